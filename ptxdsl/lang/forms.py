"""The .ptxd instruction table, derived from the op declarations (ptxdsl.isa.decl.OPS): no row is kept by hand.

    mbarrier.arrive.expect_tx.release.cta [bar], 8192
      -> k.mbarrier_arrive_expect_tx(bar=bar, tx=8192, sem="release", scope="cta")

A statement `[results =] mnemonic.tok.tok operands` resolves in three steps:

1. the longest dotted prefix of the mnemonic that is some op's `ptxd` name;
2. among the ops of that name, those whose `form` tokens are all written, the largest form winning; the
   winners share one builder method and make one row (their qualifiers and operands merged in order);
3. each remaining token goes to the first qualifier, in declaration order, whose .ptxd tokens (`Qual.tokens()`)
   contain it and that is still unset (a dotted token such as `proxy.async::generic` is matched longest first);
   the fixed text of the templates (`.b64`, `.mbarrier::complete_tx::bytes`) is accepted and ignored.

The op the builder builds checks the values, so the allowed values stay in the declarations. A new
declaration is part of the language as soon as it joins OPS.
"""
from __future__ import annotations

import difflib
import inspect
import re

from ..errors import DSLError
from ..isa import decl, mbarrier
from ..isa.operands import Dsts, LabelRef, TensorMap

_PLACEHOLDER = re.compile(r"^<(\w+)>$")
WAIT_KINDS = {"try_wait": "try_wait", "test_wait": "test_wait"}     # wait.test_wait spins on test_wait


def template_parts(cls) -> list:
    """The dotted parts of an op's PTX template, in order: ('fixed', text) or ('qual', name)."""
    out = []
    for part in cls.ptx.replace("{", "").replace("}", "").split("."):
        m = _PLACEHOLDER.match(part)
        out.append(("qual", m.group(1)) if m else ("fixed", part))
    return out


def destinations(cls) -> tuple:
    """The destination slots in the order a statement's results name them (`results`, then slot order)."""
    outs = [s.name for s in cls.operands if s.kind.out]
    return tuple(cls.results) + tuple(n for n in outs if n not in cls.results)


def positional(cls) -> tuple:
    """The slots positional operands fill: the input slots in PTX order. (That is the builder's `args` order
    then slot order for every op but tensormap.replace, whose builder takes `ord` by keyword: in .ptxd
    `[m], 1, 64` is ord 1, new_val 64, as PTX writes it.)"""
    return tuple(s.name for s in cls.operands if not (s.kind.out or s.kind.fixed or s.inline))


def _first_out(cls):
    """The destination a builder method's `out=` names: the first one that is not a sink by default."""
    return next((s.name for s in cls.operands if s.kind.out and not getattr(s.kind, "sink", False)), None)


def _union(lists) -> tuple:
    return tuple(dict.fromkeys(n for names in lists for n in names))


class Row:
    """What one .ptxd spelling builds: the ops it may make (one builder method), their qualifiers' tokens
    merged in declaration order, the fixed template text, and the operand slots in statement order."""

    def __init__(self, name: str, ops, method: str | None = None, extra: dict | None = None, check: bool = True):
        self.name = name
        self.ops = tuple(ops)
        self.method = method or self.ops[0].method
        self.form = frozenset().union(*(c.form for c in self.ops))
        self.tokens: dict = {}            # qualifier -> {.ptxd token: value}
        self.derived: set = set()         # qualifiers the op computes from its operands
        self.defaults: dict = {}          # qualifier -> the default every op agrees on
        self.fixed: set = set()           # the templates' fixed text
        defaults: dict = {}
        for c in self.ops:
            for qname, q in c.quals.items():
                for t, v in q.tokens().items():
                    self.tokens.setdefault(qname, {}).setdefault(t, v)
                if q.derived:
                    self.derived.add(qname)
                defaults.setdefault(qname, []).append(q.default)
            self.fixed.update(text for kind, text in template_parts(c) if kind == "fixed")
        self.tokens.update({qname: dict(values) for qname, values in (extra or {}).items()})
        for qname, ds in defaults.items():
            if len(ds) == len(self.ops) and ds[0] is not None and all(d == ds[0] for d in ds):
                self.defaults[qname] = ds[0]
        self.by_token: dict = {}          # .ptxd token -> the qualifiers that take it, in declaration order
        for qname, toks in self.tokens.items():
            for t in toks:
                self.by_token.setdefault(t, []).append(qname)
        self.accepted = self.fixed | self.form
        self.positional = _union(positional(c) for c in self.ops)
        self.dests = _union(destinations(c) for c in self.ops)
        slots = {s.name: s for c in self.ops for s in c.operands}
        self.sinks = frozenset(n for n in self.dests if getattr(slots[n].kind, "sink", False))
        self.vector = next((n for n in self.dests if isinstance(slots[n].kind, Dsts)), None) \
            if len(self.dests) == 1 else None
        self.labels = frozenset(n for n, s in slots.items() if isinstance(s.kind, LabelRef))
        self.tensors = {s.name: s.kind.coords for c in self.ops for s in c.operands
                        if isinstance(s.kind, TensorMap) and s.kind.coords}     # tensor-map slot -> its coordinates
        firsts = {_first_out(c) for c in self.ops} - {None}
        self.out = firsts.pop() if len(firsts) == 1 else None
        required = [tuple(n for n in positional(c) if next(s for s in c.operands if s.name == n).required)
                    for c in self.ops]
        longest = max(required, key=len, default=())
        for names in required if check else ():
            if names != longest[:len(names)]:
                raise TypeError(f".ptxd {name}: the ops {', '.join(c.__name__ for c in self.ops)} share a spelling "
                                f"but their required operands disagree ({', '.join(names)} / {', '.join(longest)})")

    def key(self, slot: str) -> str:
        """The builder keyword of a destination slot: out= for the first one, else the slot's name."""
        return "out" if slot == self.out else slot

    def allowed(self) -> str:
        own = set(self.name.split("."))
        words = sorted({"." + t for t in self.by_token} | {"." + t for t in self.accepted - own})
        return ", ".join(words) if words else "no qualifiers"

    def route(self, mnemonic: str, parts) -> tuple[dict, dict]:
        """The qualifier tokens `parts` as builder keywords: ({qualifier: value}, {derived qualifier: (token,
        value)}). DSLError for a token no qualifier takes, or a qualifier set twice."""
        values, derived, given = {}, {}, {}
        i = 0
        while i < len(parts):
            for j in range(len(parts), i, -1):
                tok = ".".join(parts[i:j])
                names = self.by_token.get(tok)
                if names or (j == i + 1 and tok in self.accepted):
                    break
            else:
                close = difflib.get_close_matches(parts[i], [*self.by_token, *self.accepted], n=1)
                hint = f" (did you mean .{close[0]}?)" if close else ""
                raise DSLError(f"{mnemonic}: unknown qualifier .{parts[i]}{hint}; {self.name} takes {self.allowed()}")
            i = j
            if not names:
                continue                    # fixed template text: the op writes it itself
            free = [n for n in names if n not in given]
            if not free:
                raise DSLError(f"{mnemonic}: .{tok} and .{given[names[-1]]} both set {names[-1]}; give one")
            qname = free[0]
            given[qname] = tok
            value = self.tokens[qname][tok]
            if qname in self.derived:
                derived[qname] = (tok, value)
            else:
                values[qname] = value
        return values, derived

    def __repr__(self) -> str:
        return f"Row({self.name!r}, {self.method}, {[c.__name__ for c in self.ops]})"


class Table:
    """Every .ptxd instruction of a set of declarations."""

    def __init__(self, ops: tuple):
        self.ops = ops
        self.by_name: dict = {}
        for c in ops:
            self.by_name.setdefault(tuple(c.ptxd.split(".")), []).append(c)
        self.names = frozenset(".".join(k) for k in self.by_name)
        self._rows: dict = {}
        self._resolved: dict = {}
        self._params: dict = {}
        self._builder = None
        self._wait = None
        for parts, classes in self.by_name.items():         # every row a form selects exists: check them now
            for form in dict.fromkeys(c.form for c in classes):
                self.select(".".join(parts), classes, sorted(form))

    def select(self, name: str, classes, tokens) -> Row:
        """The row of the ops named `name` whose forms the tokens write (the largest form wins)."""
        n = len(tokens)
        written = set(tokens) | {".".join(tokens[i:j]) for i in range(n) for j in range(i + 2, n + 1)}
        fitting = [c for c in classes if c.form <= written]
        if not fitting:
            need = " or ".join(sorted("." + ".".join(sorted(c.form)) for c in classes))
            raise DSLError(f"{name}.{'.'.join(tokens)}: expected the qualifier {need}" if tokens else
                           f"{name}: expected the qualifier {need}")
        size = max(len(c.form) for c in fitting)
        chosen = tuple(c for c in fitting if len(c.form) == size)
        forms = sorted(dict.fromkeys("." + ".".join(sorted(c.form)) for c in chosen))
        if len(forms) > 1:
            raise DSLError(f"{name}.{'.'.join(tokens)}: {' and '.join(forms)} name different instructions; "
                           f"give one of them")
        row = self._rows.get(chosen)
        if row is None:
            methods = sorted({c.method for c in chosen})
            if len(methods) > 1:
                raise DSLError(f"{name}.{'.'.join(tokens)} is ambiguous: it spells "
                               f"{', '.join(c.mnemonic for c in chosen)} (methods {', '.join(methods)}); add the "
                               f"qualifier that tells them apart")
            row = self._rows[chosen] = Row(name, chosen)
        return row

    def resolve(self, mnemonic: str) -> tuple[Row, dict, dict]:
        """The row a statement's dotted mnemonic selects, the qualifier keywords its tokens give, and the
        derived qualifiers it states ({name: (token, value)})."""
        hit = self._resolved.get(mnemonic)
        if hit is None:
            parts = mnemonic.split(".")
            for n in range(len(parts), 0, -1):
                classes = self.by_name.get(tuple(parts[:n]))
                if classes:
                    break
            else:
                close = difflib.get_close_matches(mnemonic, sorted(self.names), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise DSLError(f"unknown instruction {mnemonic!r}{hint}")
            row = self.select(".".join(parts[:n]), classes, parts[n:])
            hit = (row, *row.route(mnemonic, parts[n:]))
            self._resolved[mnemonic] = hit
        row, values, derived = hit
        return row, dict(values), dict(derived)

    def rows(self) -> list:
        """Every row a form selects, in declaration order of their first op."""
        out = {}
        for parts, classes in self.by_name.items():
            for form in dict.fromkeys(c.form for c in classes):
                row = self.select(".".join(parts), classes, sorted(form))
                out.setdefault(row, None)
        return list(out)

    def wait_row(self) -> Row:
        """The qualifiers of a `wait.QUALS [bar] parity|state v` statement: those of the four wait ops, and
        `.test_wait` / `.try_wait` (the instruction the loop spins on). The method is mbarrier_wait."""
        if self._wait is None:
            waits = tuple(dict.fromkeys(mbarrier.WAITS.values()))
            self._wait = Row("wait", waits, method="mbarrier_wait", extra={"kind": WAIT_KINDS}, check=False)
            self._wait.accepted = frozenset({"b64"})
        return self._wait

    def parameters(self, method: str):
        """The builder method's parameters (without self), also for ops declared after the builder's import."""
        params = self._params.get(method)
        if params is None:
            if self._builder is None:
                from ..builder import KernelBuilder

                self._builder = KernelBuilder("ptxd_table", verify=False)
            params = self._params[method] = inspect.signature(getattr(self._builder, method)).parameters
        return params


_TABLE: Table | None = None


def table() -> Table:
    """The table of the ops declared now (rebuilt when OPS changes)."""
    global _TABLE
    ops = tuple(decl.OPS)
    if _TABLE is None or _TABLE.ops != ops:
        _TABLE = Table(ops)
    return _TABLE


def resolve(mnemonic: str) -> tuple[Row, dict, dict]:
    """table().resolve(mnemonic)."""
    return table().resolve(mnemonic)


def rows() -> list:
    """table().rows()."""
    return table().rows()


def wait_row() -> Row:
    """table().wait_row()."""
    return table().wait_row()
