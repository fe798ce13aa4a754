"""Values known up to the kernel's parameters: linear forms over symbols.

A byte count or coordinate that depends on a scalar parameter (`tx = k.param("tx", u32)`), or on the box of a
tensor map declared without a TensorMapSpec, is not a constant, but it is often `c0 + c1 * tx` or
`box_bytes(src)`: a `Lin`. The flow carries such forms where it would otherwise give up; a difference that
still holds a symbol becomes a launch check (verify/launch.py) evaluated with the actual arguments, and a
register's value a debug kernel tests on the device.

Symbols: `param` (a scalar parameter's value), `box` (the box bytes of a tensor-map parameter), `reg` (a
register the analysis cannot express in parameters). A register written once by add/sub/mul/shl/mad/mov/cvt
of such values is expanded; anything else is its own `reg` symbol.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Imm, Reg
from ..isa.effects import Compute

MAX_DEPTH = 32                  # definitions followed back from one operand


@dataclass(frozen=True, order=True)
class Sym:
    """A value the analysis names but cannot compute: kind is 'param', 'box' or 'reg'."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"box_bytes({self.name})" if self.kind == "box" else self.name


@dataclass(frozen=True)
class Lin:
    """const + sum(coeff * sym): never built without a term (see `lin`), so a Lin is never equal to an int."""

    terms: tuple            # ((Sym, coeff), ...) sorted by symbol, every coeff non-zero
    const: int = 0

    def __add__(self, other):
        if isinstance(other, Lin):
            d = dict(self.terms)
            for s, c in other.terms:
                d[s] = d.get(s, 0) + c
            return lin(d, self.const + other.const)
        if isinstance(other, int):
            return lin(dict(self.terms), self.const + other)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return lin({s: -c for s, c in self.terms}, -self.const)

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, k):
        if isinstance(k, int) and not isinstance(k, bool):
            return lin({s: c * k for s, c in self.terms}, self.const * k)
        return NotImplemented

    __rmul__ = __mul__

    def symbols(self) -> tuple:
        return tuple(s for s, _ in self.terms)

    def coeff(self, sym) -> int:
        return dict(self.terms).get(sym, 0)

    def evaluate(self, value_of):
        """The integer value with value_of(sym) for each symbol (None when one is unknown)."""
        total = self.const
        for s, c in self.terms:
            v = value_of(s)
            if v is None:
                return None
            total += c * v
        return total

    def __str__(self) -> str:
        parts = []
        for s, c in self.terms:
            parts.append(f"{'' if c == 1 else '-' if c == -1 else f'{c}*'}{s}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def lin(terms: dict, const: int = 0):
    """A Lin of the non-zero terms, or the plain int when none is left."""
    kept = tuple(sorted((s, c) for s, c in terms.items() if c))
    return Lin(kept, const) if kept else const


def sym(kind: str, name: str) -> Lin:
    return Lin(((Sym(kind, name), 1),), 0)


def is_static(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def show(v) -> str:
    return str(v)


class Resolver:
    """Expresses operands in constants and parameters, from the register facts (ptxdsl.verify.facts)."""

    def __init__(self, k, facts):
        self.facts = facts
        self.params = {p.value: p for p in k.params if p.kind == "scalar" and p.value is not None}
        self.defs: dict = {}
        for d in facts.sites:
            for dst, e in d.items:
                if isinstance(e, Compute) and facts.ndefs.get(dst) == 1:
                    self.defs[dst] = e
        self._memo: dict = {}
        self._named: dict = {}

    def reg_named(self, name: str):
        """The register behind a `reg` symbol."""
        return self._named.get(name)

    def value(self, v):
        """An operand's value: an int, a Lin over parameters and registers, or None (a float, an address)."""
        c = self.facts.get(v).const if isinstance(v, (Reg, Imm, int)) else None
        if is_static(c):
            return c
        if isinstance(v, Imm):
            return None
        if not isinstance(v, Reg) or v.type.kind == "f" or v.type.name == "pred":
            return None
        return self._reg(v, 0)

    def _reg(self, r: Reg, depth: int):
        if r in self._memo:
            return self._memo[r]
        out = self._expand(r, depth)
        self._memo[r] = out
        return out

    def _expand(self, r: Reg, depth: int):
        if r in self.params:
            return sym("param", self.params[r].name)
        c = self.facts.get(r).const
        if is_static(c):
            return c
        e = self.defs.get(r)
        if e is not None and depth <= MAX_DEPTH and e.type is not None and e.type.kind != "f":
            out = _apply(e, [self._operand(a, depth + 1) for a in e.args], r.type.bits)
            if out is not None:
                return out
        self._named[r.name] = r
        return sym("reg", r.name)

    def _operand(self, a, depth):
        if isinstance(a, Reg):
            return self._reg(a, depth) if a.type.kind != "f" else None
        c = self.facts.get(a).const if isinstance(a, (Imm, int)) else None
        return c if is_static(c) else None


def _apply(e: Compute, args, bits: int):
    """fn(args) when it stays linear (an int times a form, sums), else None."""
    fn = e.fn
    if any(a is None for a in args[:3 if fn == "mad" else 2 if fn in ("add", "sub", "mul", "shl") else 1]):
        return None
    if fn == "mov" or (fn == "cvt" and e.mode and e.mode[0] in "us" and int(e.mode[1:]) <= bits):
        return args[0]
    if fn == "add":
        return args[0] + args[1]
    if fn == "sub":
        return args[0] - args[1]
    if fn == "mul" and e.mode in (None, "lo", "wide"):
        return _mul(args[0], args[1])
    if fn == "shl" and is_static(args[1]) and 0 <= args[1] < bits:
        return _mul(args[0], 1 << args[1])
    if fn == "mad" and e.mode in ("lo", "wide"):
        m = _mul(args[0], args[1])
        return None if m is None else m + args[2]
    if fn == "neg":
        return -args[0]
    return None


def _mul(a, b):
    if is_static(a):
        return b * a
    if is_static(b):
        return a * b
    return None
