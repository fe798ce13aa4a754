"""How an instruction is declared, once.

An op class is the whole declaration of one PTX instruction form:

    class MbarrierInit(Op):
        \"\"\"mbarrier.init: set an mbarrier's arrival count and start its phase 0.\"\"\"
        ptx = "mbarrier.init{.<space>}.b64"
        quals = {"space": LOCAL_SPACE}
        operands = (Slot("addr", Address("space")), Slot("count", Value(b32, lo=1, hi=MAX_COUNT)))
        floor = Req((7, 8))
        family, level = "mbarrier", "gpu"

        def effects(self):
            return (Init(self.addr, self.count),)

- `ptx`: the spelling template. `<name>` is the PTX token of qualifier (or derived attribute) `name`;
  `{...}` is kept when every `<name>` inside it has a value. The tokens before the first qualifier are
  the op's mnemonic; the fixed tokens after it are implied (a `.ptxd` statement may write or omit them).
- `quals`: each qualifier's domain (`Qual`): the builder keyword of the same name takes those values.
- `operands`: the operand slots in PTX order (`Slot(name, kind)`); `kind` says what the slot takes
  (an integer of a width, a float, a predicate, an address in a state space, a tensor map, an
  immediate in a range, a destination register...). The builder keyword is the slot's name.
- `excludes`: ((condition, reason), ...) combinations of qualifiers (and operand shapes) that ptxas refuses;
  `refuses`: those ptxas accepts but ptxdsl refuses on purpose, each saying why (measured on the H200...).
- `floor` and `raises`: the targets and .version the plainest form needs, and ((condition, Req), ...)
  for the values that need more.
- `effects()`: what the instruction does to the protocol state (ptxdsl.isa.effects); the verifier reads
  nothing else.

From the declaration come: construction-time checks (this module), the PTX text (`emit`), the floor
(`requires`), the registry and docs/isa.md (`ptxdsl.isa.registry`), the builder methods
(`ptxdsl.builder`), the `.ptxd` instruction table and printer (`ptxdsl.lang`) and the combinations the
tests draw (`Op.choices`, `Op.excluded`).
"""
from __future__ import annotations

import functools
import re
from typing import ClassVar

from ..errors import DSLError
from ..target import BASE, Req
from .operands import REQUIRED, Kind, Slot

OPS: list[type] = []                 # every declared op class, in declaration order
LEVELS = ("emitted", "assembled", "gpu")

_GROUP = re.compile(r"\{([^{}]*)\}")
_PLACEHOLDER = re.compile(r"<(\w+)>")


# ------------------------------------------------------------------------------------ qualifiers


class Qual:
    """A qualifier's domain: the values its builder keyword takes (None: the qualifier is left out), the
    default, and how a value is spelled in PTX (`ptx`) and in .ptxd (`token`).

    `aliases` maps other accepted inputs to a value of the domain ('' for None, a bool for a flag).
    """

    def __init__(self, *values, default=None, ptx=None, token=None, aliases=None, none_token=None,
                 inferred: bool = False, doc: str = ""):
        self.values = tuple(values)
        self._domain = frozenset((type(v), v) for v in self.values)      # exact: True is not 1
        self.default = default
        self.inferred = inferred            # when not given, the op infers it from its operands (prepare)
        self._ptx = ptx
        self._token = token
        self.aliases = dict(aliases or {})
        self.none_token = none_token        # how .ptxd writes None where None is not the default ('generic')
        self.doc = doc

    derived = False

    def normalize(self, value):
        if isinstance(value, (str, bool, int)) and not isinstance(value, float):
            try:
                if value in self.aliases:
                    return self.aliases[value]
            except TypeError:
                pass
        return value

    def check(self, what: str, value):
        """The value, normalised; DSLError naming the allowed values when it is not one of them."""
        value = self.normalize(value)
        try:
            ok = (type(value), value) in self._domain
        except TypeError:                       # an unhashable value is no qualifier value
            ok = False
        if not ok:
            shown = ", ".join(repr(self.token(v) if v is not None else None) for v in self.values)
            raise DSLError(f"{what}={_show(value)} is not allowed; expected one of {shown}")
        return value

    def ptx(self, value, op) -> str | None:
        """The PTX token for `value` (None: the qualifier is not written)."""
        if value is None or value is False:
            return None
        return self._ptx(value, op) if self._ptx else str(value)

    def token(self, value) -> str | None:
        """The .ptxd token for `value` (None: not written)."""
        if value is None:
            return self.none_token
        if value is False:
            return None
        return self._token(value) if self._token else str(value)

    def token_for(self, op, value) -> str | None:
        """The .ptxd token for `value` on `op` (a spelling that depends on other qualifiers overrides this)."""
        return self.token(value)

    def tokens(self) -> dict:
        """.ptxd token -> value, for every value the token spells."""
        out = {}
        for v in self.values:
            t = self.token(v)
            if t is not None:
                out[t] = v
        return out


class Flag(Qual):
    """A qualifier that is there or not: the builder keyword takes True/False, PTX and .ptxd write `word`."""

    def __init__(self, word: str, *, doc: str = ""):
        super().__init__(False, True, default=False, ptx=lambda v, op: word, token=lambda v: word,
                         aliases={None: False, 0: False, 1: True, word: True}, doc=doc)
        self.word = word


class TypeQual(Qual):
    """The instruction type. The builder keyword takes a ScalarType or its name; `infer` names the slots
    whose register types give it when it is not passed (mixed types are an error naming both); `spell`
    maps a type to the one PTX writes (e.g. and.u32 is written and.b32)."""

    def __init__(self, *types, default=None, infer=(), spell=None, doc: str = ""):
        from ..types import ALL_TYPES

        types = tuple(ALL_TYPES[t] if isinstance(t, str) else t for t in types)
        super().__init__(*types, default=default, ptx=(lambda v, op: spell(v, op).name) if spell else None,
                         token=lambda v: v.name, doc=doc)
        self.infer = tuple(infer)

    def normalize(self, value):
        from ..types import ScalarType, scalar_type

        if value is None or value.__class__ is ScalarType:
            return value
        if value == "":
            return None
        if isinstance(value, bool) or not isinstance(value, (str,)) and not hasattr(value, "kind") \
                and not hasattr(value, "dtype") and not isinstance(value, type):
            raise DSLError(f"type={value!r} is not a PTX scalar type; expected a name such as 'u32' or a "
                           f"ptxdsl type such as px.u32")
        return scalar_type(value)

    def ptx(self, value, op):
        if value is None:
            return None
        return self._ptx(value, op) if self._ptx else value.name


class Derived(Qual):
    """A qualifier the op computes from its operands (.v4 from a vector's length, .2d from the coordinates).
    The builder keyword may still state it; then it must agree."""

    derived = True

    def __init__(self, *values, ptx=None, token=None, doc: str = ""):
        super().__init__(*values, ptx=ptx, token=token, doc=doc)


def _member(value, values) -> bool:
    for v in values:
        if v is value or (type(v) is type(value) and v == value):
            return True
    return False


def _show(value) -> str:
    name = getattr(value, "name", None)
    return f"{name!r}" if isinstance(name, str) and hasattr(value, "kind") else repr(value)


# ------------------------------------------------------------------------------------ conditions


def matches(cond: dict, values: dict) -> bool:
    """`values` matches `cond` when, for every name in cond, the value is the one given (or one of a tuple)."""
    for name, want in cond.items():
        have = values.get(name)
        if hasattr(have, "reg_class"):           # a ScalarType is named by its PTX name in conditions
            have = have.name
        if isinstance(want, (tuple, frozenset, set)):
            if not _member(have, want):
                return False
        elif not _member(have, (want,)):
            return False
    return True


def _key(v):
    """How a condition compares a value: a ScalarType by its name, anything else as it is."""
    return v.name if hasattr(v, "reg_class") else v


def _compiled(cond: dict) -> tuple:
    """A condition as ((name, the set of values it matches), ...) for the checks a construction makes."""
    out = []
    for name, want in cond.items():
        values = want if isinstance(want, (tuple, frozenset, set)) else (want,)
        out.append((name, frozenset(_key(v) for v in values)))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _placeholders(template: str) -> tuple:
    return tuple(_PLACEHOLDER.findall(template))


def _fill(text: str, values: dict) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def spell_template(template: str, values: dict) -> str:
    """The template with each `<name>` replaced by values[name] (a string, or None to drop its group)."""
    return _spell(template, tuple(values.items()))


@functools.lru_cache(maxsize=4096)
def _spell(template: str, items: tuple) -> str:
    values = dict(items)

    def group(m):
        names = _PLACEHOLDER.findall(m.group(1))
        return _fill(m.group(1), values) if all(values.get(n) for n in names) else ""
    text = _fill(_GROUP.sub(group, template), {k: v or "" for k, v in values.items()})
    return re.sub(r"\.{2,}", ".", text).rstrip(".")


# ------------------------------------------------------------------------------------------- ops


class Op:
    """Base of every op. A subclass with a `ptx` template is a declaration and joins `OPS`; one with
    `abstract = True` only shares parts of a declaration with its subclasses."""

    ptx: ClassVar[str] = ""
    mnemonic: ClassVar[str] = ""          # the instruction's name (default: the template up to its first qualifier)
    quals: ClassVar[dict] = {}
    operands: ClassVar[tuple] = ()
    excludes: ClassVar[tuple] = ()
    refuses: ClassVar[tuple] = ()
    floor: ClassVar[Req] = BASE
    raises: ClassVar[tuple] = ()
    family: ClassVar[str] = "core"
    level: ClassVar[str] = "assembled"
    note: ClassVar[str] = ""
    method: ClassVar[str] = ""            # the KernelBuilder method (default: the mnemonic, dots as underscores)
    ptxd: ClassVar[str] = ""              # the .ptxd mnemonic (default: the PTX mnemonic)
    form: ClassVar[frozenset] = frozenset()   # .ptxd tokens that pick this op among ops of one .ptxd mnemonic
    args: ClassVar[tuple] = ()            # the builder's positional parameters (default: the input operands)
    results: ClassVar[tuple] = ()         # the order the builder returns destinations in (default: PTX's)
    abstract: ClassVar[bool] = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__dict__.get("abstract", False) or not cls.ptx:
            return
        for slot in cls.operands:
            if not isinstance(slot, Slot) or not isinstance(slot.kind, Kind):
                raise TypeError(f"{cls.__name__}.operands: {slot!r} is not a Slot")
        names = [s.name for s in cls.operands] + list(cls.quals)
        if len(set(names)) != len(names):
            raise TypeError(f"{cls.__name__}: a qualifier and an operand share a name")
        if cls.level not in LEVELS:
            raise TypeError(f"{cls.__name__}.level={cls.level!r}: expected one of {LEVELS}")
        mnemonic = _declared(cls, "mnemonic")
        cls.mnemonic = mnemonic or cls.ptx.split("{", 1)[0].split("<", 1)[0].rstrip(".")
        cls.method = _declared(cls, "method") or cls.mnemonic.replace(".", "_").replace("::", "_")
        cls.ptxd = _declared(cls, "ptxd") or cls.mnemonic
        cls.form = _declared(cls, "form") or frozenset()
        cls.args = _declared(cls, "args") or tuple(s.name for s in cls.operands
                                                    if not (s.kind.out or s.kind.fixed or s.inline))
        cls._names = frozenset(cls.quals) | {s.name for s in cls.operands}
        cls.excludes = tuple(cls.excludes) + _half_literals(cls)
        cls._checks = tuple((_compiled(cond), reason) for cond, reason in cls.excludes + cls.refuses)
        cls._cond_slots = tuple(s for s in cls.operands if any(s.name in c for c, _ in cls.excludes + cls.refuses))
        cls._fixed_floor = not cls.raises and not any(getattr(s.kind, "sreg", False) for s in cls.operands)
        OPS.append(cls)

    # --------------------------------------------------------------------------- construction

    def __init__(self, *, alloc=None, **values):
        cls = type(self)
        known = cls._names
        if not values.keys() <= known:
            name = next(n for n in values if n not in known)
            raise DSLError(f"{cls.mnemonic}: unknown argument {name}=; it takes {', '.join(sorted(known))}")
        for s in cls.operands:
            if values.get(s.name) is None and s.default is not REQUIRED:
                values[s.name] = s.default
            elif values.get(s.name) is None and s.required:
                raise DSLError(f"{cls.mnemonic}: the operand {s.name} is missing")
        self.prepare(values)
        stated = {}
        for name, q in cls.quals.items():
            if q.derived:
                stated[name] = values.get(name)
                continue
            v = q.normalize(values.get(name, q.default))
            if v is None and None not in q.values and not isinstance(q, TypeQual):
                v = q.default                    # an explicit None asks for the default
            if v is None and isinstance(q, TypeQual) and q.infer:
                v = infer_type(cls.mnemonic, q, {s: values.get(s) for s in q.infer})
                if v is None and None not in q.values:
                    raise DSLError(f"{cls.mnemonic}: cannot infer the type from constants alone; pass type=")
            setattr(self, name, q.check(f"{cls.mnemonic} {name}", v))
        self.settle()
        if cls._checks:
            given = {**self.qualifiers(), **{s.name: s.kind.shape(values.get(s.name)) for s in cls._cond_slots}}
            for cond, reason in cls._checks:
                if all(_key(given.get(name)) in allowed for name, allowed in cond):
                    raise DSLError(f"{self.what}: {reason}")
        for s in sorted(cls.operands, key=lambda s: s.kind.out):      # destinations last: they may follow inputs
            setattr(self, s.name, s.kind.bind(self, f"{cls.mnemonic} {s.name}", values.get(s.name), alloc))
        for name, given in stated.items():
            q = cls.quals[name]
            have = getattr(self, name)
            if given is not None and q.normalize(given) != have:
                raise DSLError(f"{cls.mnemonic}: {name}={given!r} disagrees with the operands, which give "
                               f"{q.token(have)!r}")
        self.check()

    def prepare(self, values: dict) -> None:
        """Hook: fill in `values` (the user's arguments) where a default depends on the operands, before
        anything is checked (a rounding cvt needs, the state space of an address)."""

    def settle(self) -> None:
        """Hook: qualifier defaults that depend on other qualifiers (mul.lo for integer types, the rounding a
        cvt needs), set after the qualifiers are checked and before the exclusions."""

    def check(self) -> None:
        """Hook: rules between operand values that a declaration cannot state (sizes against buffers)."""

    def qualifiers(self) -> dict:
        """name -> value of every qualifier, derived ones included."""
        return {name: getattr(self, name, None) for name in type(self).quals}

    # ------------------------------------------------------------------------------- derived

    def emit(self) -> str:
        """The PTX instruction (without its guard and semicolon)."""
        text = self.spelling()
        ops = [s.kind.text(self, getattr(self, s.name)) for s in type(self).operands
               if not s.inline and (getattr(self, s.name) is not None or s.kind.fixed)]
        return f"{text} {', '.join(ops)}" if ops else text

    def spelling(self) -> str:
        """The mnemonic with its qualifiers, as PTX writes it."""
        cls = type(self)
        tokens = {}
        for name in _placeholders(cls.ptx):
            q = cls.quals.get(name)
            v = getattr(self, name, None)
            tokens[name] = q.ptx(v, self) if q is not None else (None if v is None else str(v))
        return spell_template(cls.ptx, tokens)

    def requires(self) -> Req:
        if type(self)._fixed_floor:
            return type(self).floor
        r = type(self).floor
        values = self.qualifiers()
        for s in type(self).operands:
            values[s.name] = s.kind.shape(getattr(self, s.name, None))
        for cond, extra in type(self).raises:
            if matches(cond, values):
                r = r & extra
        for s in type(self).operands:
            r = r & s.kind.requires(getattr(self, s.name))
        return r

    def effects(self) -> tuple:
        """What the instruction does to the protocol state (ptxdsl.isa.effects)."""
        return ()

    def defs(self) -> tuple:
        """Registers this op writes."""
        out = []
        for s in type(self).operands:
            if s.kind.out:
                out.extend(s.kind.regs(getattr(self, s.name)))
        return tuple(out)

    def uses(self) -> tuple:
        """Registers this op reads."""
        out = []
        for s in type(self).operands:
            if not s.kind.out:
                out.extend(s.kind.regs(getattr(self, s.name)))
        return tuple(out)

    @property
    def what(self) -> str:
        """How error messages name this op: its PTX spelling when it can be printed."""
        try:
            return self.spelling()
        except Exception:                 # a half-built op (an error raised while checking it)
            return type(self).mnemonic

    def __repr__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.qualifiers().items() if v not in (None, False)]
        parts += [f"{s.name}={getattr(self, s.name, None)!r}" for s in type(self).operands]
        return f"{type(self).__name__}({', '.join(parts)})"

    # ------------------------------------------------------------------ the declaration as data

    @classmethod
    def choices(cls) -> dict:
        """name -> the values a generated test draws from: every qualifier's domain (derived ones
        excepted) and every operand slot's shapes (None: left out, 'imm', 'reg', 'sink', ...)."""
        out = {name: q.values for name, q in cls.quals.items() if not q.derived}
        for s in cls.operands:
            shapes = s.kind.shapes + ((None,) if s.optional else ())
            if len(shapes) > 1 or s.optional:
                out[s.name] = shapes
        return out

    @classmethod
    def excluded(cls, q: dict) -> str | None:
        """Why the combination q (qualifier values and operand shapes) is an error, or None."""
        return next((reason for cond, reason in cls.excludes + cls.refuses if matches(cond, q)), None)

    @classmethod
    def refused(cls, q: dict) -> str | None:
        """Why ptxdsl refuses the combination q although ptxas accepts it, or None."""
        return next((reason for cond, reason in cls.refuses if matches(cond, q)), None)

    @classmethod
    def need(cls, q: dict) -> Req:
        """The floor of the combination q."""
        r = cls.floor
        for cond, extra in cls.raises:
            if matches(cond, q):
                r = r & extra
        return r

    @classmethod
    def template(cls) -> str:
        """The PTX syntax: the spelling template and the operands (optional ones in braces)."""
        ops = [("{" + s.kind.syntax(s.name) + "}") if s.optional else s.kind.syntax(s.name) for s in cls.operands
               if not s.inline]
        return cls.ptx + (" " + ", ".join(ops) if ops else "")


def _half_literals(cls) -> tuple:
    """PTX has no .f16/.bf16 literal: a constant in a slot typed by a qualifier that takes halves is an error
    (declared here once for every op, as the exclusions it amounts to)."""
    out = []
    for s in cls.operands:
        kind = s.kind
        ref = getattr(kind, "type", None)
        if not isinstance(ref, str) or ref not in cls.quals or "imm" not in kind.shapes or getattr(kind, "halves", False):
            continue
        halves = tuple(t.name for t in cls.quals[ref].values if t is not None and t.name in ("f16", "bf16"))
        cond = ({ref: halves, s.name: "imm"}, f"PTX has no .f16/.bf16 literal for {s.name}; put it in a register with "
                                               f"k.mov(value, type=...) first")
        if halves and cond not in cls.excludes:
            out.append(cond)
    return tuple(out)


def _declared(cls, name: str):
    """What `cls` itself, or an abstract base it builds on, declares for `name` (None: derive it). A concrete
    base's value is not inherited: a subclass of a declaration is another instruction."""
    for k in cls.__mro__:
        if k is Op:
            return None
        if name in k.__dict__ and (k is cls or k.__dict__.get("abstract", False)):
            return k.__dict__[name]
    return None


def infer_type(what: str, q: TypeQual, given: dict):
    """The instruction type the registers among `given` (slot -> raw value) agree on.

    A .bN register adapts to a typed one of its width; two different types (u32 and f32, u32 and s32)
    are an error naming both, as is a statement of constants only."""
    from ..ir import PredNot, operand_type

    seen = []
    for name, v in given.items():
        if isinstance(v, (tuple, list)):
            v = next((x for x in v if operand_type(x) is not None), None)
        t = operand_type(v)
        if t is not None and not isinstance(v, PredNot):
            seen.append((name, v, t))
    if not seen:
        return None
    typed = [x for x in seen if x[2].kind != "b"] or seen
    first = typed[0]
    for other in typed[1:]:
        if other[2] is not first[2]:
            raise DSLError(f"{what}: {first[0]}={_reg_text(first[1])} is .{first[2].name} but "
                           f"{other[0]}={_reg_text(other[1])} is .{other[2].name}; mixed types need an explicit "
                           f"conversion (k.cvt) or type=")
    return first[2]


def _reg_text(v) -> str:
    return getattr(v, "name", repr(v))


def op_classes(family: str | None = None) -> list:
    """The declared op classes (of one family), in declaration order."""
    return [c for c in OPS if family is None or c.family == family]
