"""IR kernel -> .ptxd text: one statement per builder call, so parsing the text back makes the same builder
calls in the same order and gives the same IR (registers, names, PTX).

An op's spelling is derived from its declaration: its `ptxd` name, its form tokens, the tokens of the
qualifiers whose value is not what the builder method would take without them (the type and inferred
qualifiers always), then its operands in the order the .ptxd table binds them (positionally while they
follow each other, then `name=value`), destinations on the left. Every spelling is read back through the
table before it is printed, so what prints is what parses.

Registers print by their PTX names without the % (r7, rd2, f3, p1, rs3); a parameter's register by the
parameter's name. A register the builder allocated before it was first written (`k.reg`, `out=`) is
declared with `reg` at the point where its number was taken.
"""
from __future__ import annotations

import itertools
import math

from ..emit import directive_lines
from ..errors import DSLError, PtxdslError
from ..ir import (Addr, If, Imm, Instr, Kernel, Label, LabelStmt, Loop, Module, Param, PredNot, Reg, SharedAlloc, Sink,
                  SpecialReg, TensorMapRef, WaitLoop, Walker)
from ..isa import core, warp
from ..isa.decl import TypeQual
from ..isa.operands import Dsts, Vector
from ..target import fmt_ptx, parse_ptx_version
from ..tensormap import DTYPES, c_strides
from ..types import ALL_TYPES, REG_CLASSES, ScalarType
from . import forms

INDENT = "    "
SPEC_DEFAULTS = {"swizzle": "none", "interleave": "none", "l2_promotion": "none", "oob_fill": "zero"}
PROLOGUE = {"scalar": (core.Ld,), "ptr": (core.Ld, core.Cvta), "tensormap": (core.Mov, core.Cvta)}
FULL_MASK = 0xFFFFFFFF


def to_ptxd(obj) -> str:
    """The .ptxd text of a Kernel, a KernelBuilder or a Module (kernels separated by a blank line)."""
    if hasattr(obj, "finish"):
        obj = obj.finish()
    kernels = obj.kernels if isinstance(obj, Module) else [obj]
    return "\n".join(_Printer(k).text() for k in kernels)


# ------------------------------------------------------------------------------ op spellings


def _ref(op, ref):
    """A destination kind's type or space: a value, the name of one of the op's qualifiers, or a function of it."""
    if callable(ref) and not isinstance(ref, ScalarType):
        return ref(op)
    if isinstance(ref, str) and ref in type(op).quals:
        return getattr(op, ref)
    return ref


def _written(q, value, param) -> bool:
    """Whether the .ptxd spelling writes qualifier q's value: the type and inferred qualifiers always; the
    others when the builder method, given nothing, would not take the same value."""
    if isinstance(q, TypeQual) or q.inferred:
        return True
    if param is not None and param.default is param.empty:
        return True
    default = q.default if param is None or param.default is None else q.normalize(param.default)
    return not (default is value or (type(default) is type(value) and default == value))


def mnemonic_words(op, method: str | None = None, full: bool = False, table: forms.Table | None = None) -> list:
    """The .ptxd mnemonic of `op` as its words: the ptxd name, then the form tokens and the qualifier tokens in
    the template's order (qualifiers the template does not name last); `full` writes every qualifier."""
    cls = type(op)
    params = (table or forms.table()).parameters(method or cls.method)
    words = cls.ptxd.split(".")
    form = set(cls.form)
    visited = set()

    def qual(name):
        visited.add(name)
        q = cls.quals[name]
        tok = q.token_for(op, getattr(op, name, None))
        if tok is None:
            return
        if tok in form:
            form.discard(tok)
            words.append(tok)
        elif full or q.derived or _written(q, getattr(op, name, None), params.get(name)):
            words.append(tok)

    for kind, text in forms.template_parts(cls):
        if kind == "qual" and text in cls.quals:
            qual(text)
        elif kind == "fixed" and text in form:
            form.discard(text)
            words.append(text)
    for name in cls.quals:
        if name not in visited:
            qual(name)
    return words + sorted(form)


def number(v, imm: Imm | None = None) -> str:
    if isinstance(v, float):
        if math.isfinite(v):
            return repr(v)
        if imm is not None and imm.type.bits in (32, 64):
            return str(imm)
        raise DSLError(f"the constant {v!r} has no .ptxd spelling outside an f32/f64 operand")
    if imm is not None and imm.type.kind == "b" and v >= 0x100:
        return f"0x{int(v):X}"                  # bits (a member mask) read better in hex
    return str(int(v))


# ------------------------------------------------------------------------------------ printer


class _Printer(Walker):
    def __init__(self, k: Kernel):
        self.k = k
        self.lines: list[str] = []
        self.depth = 1
        self.names: dict = {}           # Reg -> name, for every register the text has named
        self.counter = dict.fromkeys(REG_CLASSES, 0)
        self.slots: dict = {}           # (class, index) -> Reg, every register the IR mentions
        self.symbols = {p.name for p in k.params} | {a.name for a in k.shared}
        self.allowed: frozenset = frozenset()     # verifier rules the enclosing allow blocks silence
        self.table = forms.table()
        self._collect(k.body)
        for p in k.params:
            if p.value is not None:
                self._slot(p.value)

    # ---------------------------------------------------------------------------- registers

    def _slot(self, r: Reg):
        self.slots.setdefault((r.type.reg_class, r.index), r)

    def _collect(self, stmts):
        for s in stmts:
            if isinstance(s, Instr):
                for r in (*s.op.defs(), *s.op.uses(), *_regs((s.guard,))):
                    self._slot(r)
            elif isinstance(s, LabelStmt):
                self.symbols.add(s.label.name)
            elif isinstance(s, If):
                for r in _regs((s.cond,)):
                    self._slot(r)
                self._collect(s.then)
                self._collect(s.orelse or [])
            elif isinstance(s, Loop):
                for r in _regs((s.var, s.cond, s.start, s.stop)):
                    self._slot(r)
                self._collect(s.body)
            elif isinstance(s, WaitLoop):
                for r in (*s.op.defs(), *s.op.uses(), *s.debug_regs):
                    self._slot(r)

    def reg_name(self, r: Reg) -> str:
        name = r.type.reg_class + str(r.index)
        while name in self.symbols:
            name += "_"
        return name

    def take(self, r: Reg):
        """The text names `r`; its number is the next one of its class."""
        cls = r.type.reg_class
        if r.index != self.counter[cls] + 1:
            raise self.unprintable(f"register {r.name} is allocated out of order")
        self.counter[cls] = r.index
        self.names[r] = self.reg_name(r)

    def skip(self, r: Reg):
        """The builder allocates `r` without the text naming it (a loop's exit predicate, a wait's flag)."""
        self.fill_to(r)
        cls = r.type.reg_class
        if r.index != self.counter[cls] + 1:
            raise self.unprintable(f"register {r.name} is allocated out of order")
        self.counter[cls] = r.index

    def declare(self, r: Reg):
        self.fill_to(r)
        self.take(r)
        self.line(f"reg {r.type.name} {self.names[r]}")

    def fill_to(self, r: Reg):
        """Declare the numbers of r's class taken before r that nothing has named yet."""
        cls = r.type.reg_class
        while self.counter[cls] + 1 < r.index:
            idx = self.counter[cls] + 1
            other = self.slots.get((cls, idx)) or Reg(REG_CLASSES[cls], idx)
            self.take(other)
            self.line(f"reg {other.type.name} {self.names[other]}")

    def known(self, r: Reg):
        if r in self.names:
            return
        if r.index <= self.counter[r.type.reg_class]:
            raise self.unprintable(f"register {r.name} is read, but the text has no name for it (it is allocated "
                                   f"implicitly by an earlier statement)")
        self.declare(r)

    def reads(self, regs):
        for r in sorted(set(regs), key=lambda r: (list(REG_CLASSES).index(r.type.reg_class), r.index)):
            self.known(r)

    def unprintable(self, why: str) -> DSLError:
        return DSLError(f"kernel {self.k.name!r} cannot be printed as .ptxd: {why}", self.k.loc)

    # ------------------------------------------------------------------------------- values

    def v(self, x) -> str:
        if isinstance(x, Reg):
            return self.names[x]
        if isinstance(x, PredNot):
            return "!" + self.names[x.reg]
        if isinstance(x, Imm):
            return number(x.value, x)
        if isinstance(x, bool):
            return str(int(x))
        if isinstance(x, (int, float)):
            return number(x)
        if isinstance(x, (SpecialReg, SharedAlloc, Param, Label)):
            return x.name
        if isinstance(x, Sink):
            return "_"
        if isinstance(x, Addr):
            if isinstance(x.base, Param) and x.base.kind != "tensormap":
                raise self.unprintable(f"the address [{x.base.name}] is the symbol of {x.base.kind} parameter "
                                       f"{x.base.name!r}; in .ptxd its name is the value loaded from it")
            base = self.v(x.base)
            return f"[{base}]" if not x.offset else f"[{base}{'+' if x.offset > 0 else '-'}{abs(x.offset)}]"
        if isinstance(x, TensorMapRef):
            return x.param.name if x.param is not None else self.names[x.addr]
        if isinstance(x, tuple):
            return "{" + ", ".join(self.v(i) for i in x) + "}"
        raise self.unprintable(f"no .ptxd spelling for the operand {x!r}")

    def operands(self, op, row: forms.Row) -> list:
        """The operand texts in the order the row binds them: positional while the slots follow each other,
        then name=value."""
        cls = type(op)
        slots = {s.name: s for s in cls.operands}
        out, gap = [], False
        names = list(row.positional) + [n for n, s in slots.items() if n not in row.positional and not
                                        (s.kind.out or s.kind.fixed or s.inline)]
        for name in names:
            s = slots.get(name)
            value = getattr(op, name, None) if s is not None else None
            if value is None:
                gap = True
                continue
            if name in row.tensors and isinstance(value, TensorMapRef):
                text = f"[{self.v(value)}, {self.v(tuple(getattr(op, row.tensors[name])))}]"
            elif isinstance(s.kind, Vector) and isinstance(value, tuple) and len(value) == 1:
                text = self.v(value[0])
            elif isinstance(value, Imm) and value.type.name == "b16" and \
                    getattr(_ref(op, getattr(s.kind, "type", None)), "name", None) in ("f16", "bf16"):
                text = self.half(value, _ref(op, s.kind.type).name)
            else:
                text = self.v(value)
            gap = gap or name not in row.positional
            out.append(f"{name}={text}" if gap else text)
        return out

    def half(self, imm: Imm, name: str) -> str:
        """An f16/bf16 immediate the op holds as its 16 bits (mov.b16), as the number that has those bits."""
        import numpy as np

        bits = np.array(int(imm.value), dtype=np.uint16)
        if name == "f16":
            value = float(bits.view(np.float16))
        else:
            import ml_dtypes

            value = float(bits.view(ml_dtypes.bfloat16))
        if core.half_bits(value, name) != int(imm.value):
            raise self.unprintable(f"the .{name} bits {imm} (a NaN payload) have no .ptxd spelling")
        return number(value, Imm(value, ALL_TYPES["f32"]))

    def spell(self, op) -> tuple[str, forms.Row]:
        """The .ptxd mnemonic of op and the row it reads back as, which must build op's class with op's
        qualifiers. When the short spelling reads back as something else (a token at a default left out, so
        that the next one lands on it: createpolicy's primary and secondary), every qualifier is written."""
        cls = type(op)
        for full in (False, True):
            mnemonic = ".".join(mnemonic_words(op, full=full, table=self.table))
            try:
                row, quals, _ = self.table.resolve(mnemonic)
            except PtxdslError as e:
                problem = f"{mnemonic} does not read back ({e.message})"
                continue
            params = self.table.parameters(row.method)
            missing = [n for n in quals if n not in params]
            if missing:                 # a qualifier the op was built with (k.op) that its builder method lacks
                raise self.unprintable(f"{mnemonic}: the builder method {row.method} takes no {missing[0]}=")
            if cls in row.ops and all(cls.quals[n].normalize(v) == getattr(op, n, None)
                                      for n, v in quals.items() if n in cls.quals):
                return mnemonic, row
            problem = f"{mnemonic} reads back as another {cls.mnemonic}"
        raise self.unprintable(problem)

    # ------------------------------------------------------------------------------- output

    def line(self, text: str):
        self.lines.append(INDENT * self.depth + text)

    def text(self) -> str:
        k = self.k
        params = [p for p in k.params if not (k.debug and p.name == "__ptxdsl_debug")]
        out = [f"kernel {k.name}(" + ", ".join(self.param_text(p) for p in params) + ")"]
        out += [INDENT + d for d in self.directive_lines()]
        start = self.prologue()
        for a in k.shared:
            self.line(shared_text(a))
        self.block(k.body[start:])
        for cls, t in REG_CLASSES.items():
            top = k.reg_counts.get(cls, 0)
            if self.counter[cls] < top:
                self.declare(self.slots.get((cls, top)) or Reg(t, top))
        return "\n".join(out + ["{"] + self.lines + ["}"]) + "\n"

    def directive_lines(self):
        k = self.k
        yield from directive_lines(k)
        if k.arch:
            yield f".target {k.arch}"
        if k.ptx:
            yield f".version {fmt_ptx(parse_ptx_version(k.ptx))}"
        if k.debug is True:
            yield ".debug"
        elif k.debug:
            yield f".debug {number(float(k.debug))}"

    def param_text(self, p: Param) -> str:
        if p.kind == "tensormap":
            spec = getattr(p, "tmap", None)
            return f"tensormap {p.name}" + (f": {spec_text(spec)}" if spec is not None else "")
        if p.kind == "ptr":
            return f"ptr {p.name}"
        return f"{p.type.name} {p.name}"

    def prologue(self) -> int:
        """Match the loads the builder made for each parameter; returns where the kernel's own body starts."""
        body, pos = self.k.body, 0
        for p in self.k.params:
            want = PROLOGUE[p.kind]
            got = body[pos:pos + len(want)]
            if len(got) != len(want) or not all(isinstance(s, Instr) and type(s.op) is t and s.guard is None
                                                for s, t in zip(got, want)):
                raise self.unprintable(f"parameter {p.name!r} is declared after the body starts")
            for s in got:
                for r in s.op.defs():
                    self.skip(r)
            self.names[p.value] = p.name
            pos += len(want)
        return pos

    # --------------------------------------------------------------------------- statements

    def block(self, stmts):
        items, i = [], 0
        while i < len(stmts):
            s, nxt = stmts[i], stmts[i + 1] if i + 1 < len(stmts) else None
            if (isinstance(s, Instr) and type(s.op) is warp.ElectSync and s.guard is None
                    and isinstance(s.op.lane, Sink) and isinstance(nxt, If) and nxt.kind == "elect"
                    and nxt.cond is s.op.pred):
                items.append((s.allow, (s, nxt)))
                i += 2
                continue
            items.append((getattr(s, "allow", self.allowed), s))
            i += 1
        for rules, group in itertools.groupby(items, key=lambda item: item[0]):
            group = [g for _, g in group]
            if rules == self.allowed:
                for g in group:
                    self.stmt(g)
                continue
            if not rules >= self.allowed:
                raise self.unprintable("a statement allows fewer verifier rules than the block around it")
            outer, self.allowed = self.allowed, rules
            self.line("allow " + ", ".join(sorted(rules - outer)) + " {")
            self.depth += 1
            for g in group:
                self.stmt(g)
            self.depth -= 1
            self.line("}")
            self.allowed = outer

    def stmt(self, s):
        if isinstance(s, tuple):
            self.elect(*s)
        else:
            self.visit(s)

    def label(self, s: LabelStmt):
        self.lines.append(INDENT * (self.depth - 1) + f"{s.label.name}:")

    def nested(self, head: str, body, orelse=None):
        self.line(head + " {")
        self.depth += 1
        self.block(body)
        self.depth -= 1
        if orelse is not None:
            self.line("} else {")
            self.depth += 1
            self.block(orelse)
            self.depth -= 1
        self.line("}")

    def if_(self, s: If):
        """`if c { } else if d { } else { }`: an else block that is one if (whose condition the text can
        already name) prints as `else if`, as it parses; the chain is walked, not recursed."""
        self.reads(_regs((s.cond,)))
        self.line(f"if {self.v(s.cond)} {{")
        while True:
            self.depth += 1
            self.block(s.then)
            self.depth -= 1
            orelse = s.orelse
            if orelse is None:
                break
            nxt = orelse[0] if len(orelse) == 1 else None
            if isinstance(nxt, If) and nxt.kind == "if" and all(r in self.names for r in _regs((nxt.cond,))):
                self.line(f"}} else if {self.v(nxt.cond)} {{")
                s = nxt
                continue
            self.line("} else {")
            self.depth += 1
            self.block(orelse)
            self.depth -= 1
            break
        self.line("}")

    def elect(self, s: Instr, node: If):
        mask = s.op.mask
        self.reads(_regs((mask,)))
        head = "elect_one" if isinstance(mask, Imm) and mask.value == FULL_MASK else f"elect_one {self.v(mask)}"
        self.skip(s.op.pred)
        self.nested(head, node.then, node.orelse)

    def loop(self, s: Loop):
        self.reads(_regs((s.start, s.stop)))
        bounds = f"{self.v(s.start)}..{self.v(s.stop)}"
        self.fill_to(s.var)
        self.take(s.var)
        self.skip(s.cond)
        t = "" if s.var.type.name == "u32" else f"{s.var.type.name} "
        step = "" if s.step == 1 else f" step {s.step}"
        self.nested(f"for {t}{self.names[s.var]} in {bounds}{step}", s.body)

    def wait(self, s: WaitLoop):
        op = s.op
        self.reads(op.uses())
        words = ["wait"] + mnemonic_words(op, "mbarrier_wait", table=self.table)[len(type(op).ptxd.split(".")):]
        kind = type(op).mnemonic.split(".")[1]
        if kind != "try_wait":
            words.append(kind)
        mnemonic, _ = self.spell_wait(op, ".".join(words))
        on = f"parity {self.v(op.parity)}" if getattr(op, "parity", None) is not None else f"state {self.v(op.state)}"
        hint = f" hint {self.v(op.hint)}" if getattr(op, "hint", None) is not None else ""
        for r in (*op.defs(), *s.debug_regs):
            self.skip(r)
        self.line(f"{mnemonic} {self.v(op.bar)} {on}{hint}")

    def spell_wait(self, op, mnemonic: str):
        row = self.table.wait_row()
        try:
            quals, _ = row.route(mnemonic, mnemonic.split(".")[1:])
        except PtxdslError as e:
            raise self.unprintable(f"{mnemonic} does not read back ({e.message})") from None
        kind = quals.pop("kind", "try_wait")
        cls = type(op)
        if kind != cls.mnemonic.split(".")[1] or \
                any(cls.quals[n].normalize(v) != getattr(op, n) for n, v in quals.items()):
            raise self.unprintable(f"{mnemonic} reads back as another wait")
        return mnemonic, row

    def instr(self, s: Instr):
        op = s.op
        mnemonic, row = self.spell(op)
        self.reads(op.uses())
        if s.guard is not None:
            self.reads(_regs((s.guard,)))
        named = self.results(op, row)
        ops = self.operands(op, row)
        text = mnemonic + (" " + ", ".join(ops) if ops else "")
        if named:
            text = ", ".join(self.names[r] for r in named) + " = " + text
        guard = "" if s.guard is None else f"@{self.v(s.guard)} "
        self.line(guard + text)

    def results(self, op, row: forms.Row) -> list:
        """The registers the statement names on the left, numbered as the builder numbers them: new names
        when the builder would allocate exactly these registers, else names declared with `reg`."""
        values = [(n, getattr(op, n, None)) for n in row.dests]
        named = []
        for n, v in values:
            if v is None or isinstance(v, Sink):
                break
            named.append((n, v))
        if any(isinstance(v, (Reg, tuple)) and not isinstance(v, Sink) for _, v in values[len(named):]):
            raise self.unprintable(f"{type(op).mnemonic} writes a destination after a sink; no statement names it")
        if not named:
            return []
        regs = [r for _, v in named for r in (v if isinstance(v, tuple) else (v,))]
        slots = {s.name: s for s in type(op).operands}
        expected = {}                            # register -> the (type, space) the builder would allocate it with
        for name, v in named:
            kind = slots[name].kind
            t = _ref(op, kind.type)
            space = None if isinstance(kind, Dsts) else _ref(op, getattr(kind, "space", None))
            for r in (v if isinstance(v, tuple) else (v,)):
                expected[r] = (t, space)
        order = [r for s in type(op).operands if s.kind.out for r in _regs((getattr(op, s.name, None),))
                 if r in expected]                # the builder allocates destinations in slot order
        firsts = {}
        for r in order:
            firsts.setdefault(r.type.reg_class, r)
        for r in firsts.values():
            if r not in self.names:
                self.fill_to(r)             # numbers taken before this statement that nothing named
        counter = dict(self.counter)
        fresh = True
        for r in order:
            cls = r.type.reg_class
            t, space = expected[r]
            fresh = fresh and r not in self.names and r.index == counter[cls] + 1 and r.type == t and r.space == space
            counter[cls] = r.index
        if fresh:
            for r in order:
                self.take(r)
            return regs
        params = self.table.parameters(row.method)
        if any(row.key(n) not in params for n, _ in named):
            raise self.unprintable(f"{type(op).mnemonic} writes registers its builder method always allocates new")
        for r in regs:
            self.known(r)
        return regs


def _regs(values) -> list:
    out = []
    for v in values:
        if isinstance(v, Reg):
            out.append(v)
        elif isinstance(v, PredNot):
            out.append(v.reg)
        elif isinstance(v, Addr):
            out.extend(_regs((v.base,)))
        elif isinstance(v, TensorMapRef):
            out.append(v.addr)
        elif isinstance(v, (tuple, list)):
            out.extend(_regs(v))
    return out


def shared_text(a: SharedAlloc) -> str:
    dyn = " dynamic" if a.dynamic else ""
    if a.role == "mbarrier":
        n = a.nbytes // 8
        return f"mbarrier {a.name}" + (f"[{n}]" if n > 1 else "") + dyn
    if a.role != "buffer":
        raise DSLError(f"shared {a.name!r} ({a.role}): no .ptxd spelling", a.loc)
    return f"shared {a.name}: b8[{a.nbytes}] align {a.align}{dyn}"


def spec_text(s) -> str:
    """A TensorMapSpec as `dtype[shape] option value ...` (numpy order, outermost first)."""
    shape = tuple(reversed(s.dims))
    elem = DTYPES[s.dtype][1]
    parts = [f"{s.dtype}[{', '.join(map(str, shape))}]"]

    def lst(values):
        return "[" + ", ".join(map(str, reversed(tuple(values)))) + "]"

    if s.kind == "tiled":
        parts.append(f"box {lst(s.box)}")
    else:
        parts += [f"channels_per_pixel {s.channels_per_pixel}", f"pixels_per_column {s.pixels_per_column}",
                  f"lower_corner {lst(s.lower_corner)}", f"upper_corner {lst(s.upper_corner)}"]
    contiguous = tuple(reversed(c_strides(shape, elem)[:-1]))
    if tuple(s.strides) != contiguous:
        parts.append(f"strides {lst((elem, *s.strides))}")
    if s.element_strides:
        parts.append(f"element_strides {lst(s.element_strides)}")
    for key, default in SPEC_DEFAULTS.items():
        if getattr(s, key) != default:
            parts.append(f"{key} {getattr(s, key)}")
    if s.global_address:
        parts.append(f"address {s.global_address:#x}")
    return " ".join(parts)
