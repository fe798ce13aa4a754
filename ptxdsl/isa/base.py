"""What every op shares: the Op base class and the operand checks ops run when they are built.

An op is a dataclass holding its qualifiers and operands. Allowed qualifier values are class data;
`__post_init__` checks them (raising DSLError "expected X, got Y"); `emit()` returns the PTX text
without the guard and the semicolon; `requires()` returns the targets and .version it needs.
"""
from __future__ import annotations

from typing import ClassVar

from ..errors import DSLError
from ..ir import Addr, Imm, Param, PredNot, Reg, SharedAlloc, Sink, SpecialReg, TensorMapRef
from ..target import BASE, Req
from ..types import ScalarType, pred


class Op:
    """Base of all ops. Subclasses set `mnemonic` (the PTX name the op becomes)."""

    mnemonic: ClassVar[str] = ""

    def emit(self) -> str:
        raise NotImplementedError

    def requires(self) -> Req:
        return BASE

    def defs(self) -> tuple:
        """Registers this op writes."""
        return tuple(v for v in (getattr(self, "dst", None),) if isinstance(v, Reg))

    def uses(self) -> tuple:
        """Registers this op reads."""
        out = []
        for name in getattr(self, "__dataclass_fields__", {}):
            if name == "dst":
                continue
            _collect_regs(getattr(self, name), out)
        return tuple(out)

    @property
    def what(self) -> str:
        """How error messages name this op: its full PTX spelling when it can be printed."""
        try:
            return self.emit().split(" ", 1)[0]
        except Exception:
            return self.mnemonic


def _collect_regs(v, out):
    if isinstance(v, Reg):
        out.append(v)
    elif isinstance(v, PredNot):
        out.append(v.reg)
    elif isinstance(v, Addr):
        _collect_regs(v.base, out)
    elif isinstance(v, TensorMapRef):
        out.append(v.addr)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _collect_regs(x, out)


def choice(what: str, value, allowed) -> None:
    """DSLError unless `value` is one of `allowed` (None allowed only if listed)."""
    if value not in allowed:
        shown = ", ".join(repr(a) for a in sorted(allowed, key=lambda a: (a is None, str(a))))
        raise DSLError(f"{what}={value!r} is not allowed; expected one of {shown}")


def join(*parts) -> str:
    """The mnemonic with its qualifiers: join('mbarrier.init', 'shared::cta', 'b64') -> 'mbarrier.init.shared::cta.b64'."""
    return ".".join(p for p in parts if p)


def ops(*operands) -> str:
    return ", ".join(str(o) for o in operands)


def describe(v) -> str:
    if isinstance(v, Reg):
        src = f", a {v.space} address" if v.space else ""
        return f"{v.name} (.{v.type.name}{src})"
    if isinstance(v, SharedAlloc):
        return f"shared buffer {v.name!r}"
    if isinstance(v, Param):
        return f"param {v.name!r}"
    return repr(v)


def value(what: str, v, t: ScalarType, *, imm: bool = True, sreg: bool = False):
    """A register of t's width (or, with imm, a Python number turned into an Imm of type t; with sreg, a
    special register, for the operands that become a mov source)."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not imm:
            raise DSLError(f"{what}={v!r}: expected a register, got an immediate")
        if t.kind != "f" and not isinstance(v, int):
            raise DSLError(f"{what}={v!r}: expected an integer for .{t.name}")
        if t.kind in ("u", "b") and isinstance(v, int) and not (-(1 << (t.bits - 1)) <= v < (1 << t.bits)):
            raise DSLError(f"{what}={v!r} does not fit in .{t.name}")
        if t.kind == "s" and not (-(1 << (t.bits - 1)) <= v < (1 << t.bits)):
            raise DSLError(f"{what}={v!r} does not fit in .{t.name}")
        return Imm(v, t)
    if isinstance(v, Imm):
        return Imm(v.value, t)
    if isinstance(v, SpecialReg) and not sreg:
        raise DSLError(f"{what}={v.name}: a special register is only an operand of mov (ptxas: \"Special register "
                       f"argument not allowed\"); read it first: k.mov(sreg.{v.name[1:].replace('.', '_')})")
    if isinstance(v, (Reg, SpecialReg)):
        if t is pred or v.type is pred:
            if v.type is not t:
                raise DSLError(f"{what}={describe(v)}: expected a .{t.name} operand")
            return v
        if v.type.reg_bits != t.reg_bits and not (t.bits == 8 and v.type.reg_bits <= 32):
            raise DSLError(f"{what}={describe(v)}: expected a {t.bits}-bit operand for .{t.name}, "
                           f"got a {v.type.bits}-bit register")
        return v
    if isinstance(v, PredNot):
        if t is not pred:
            raise DSLError(f"{what}=!{v.reg.name}: a negated predicate is only allowed where .pred is expected")
        return v
    raise DSLError(f"{what}={v!r}: expected a register or a number for .{t.name}")


def dest(what: str, v, t: ScalarType, *, sink: bool = False):
    """A destination register of t's width (or `_` where the form allows a sink)."""
    if v is None or isinstance(v, Sink):
        if sink:
            return Sink()
        raise DSLError(f"{what}: expected a destination register, got the sink '_'")
    if not isinstance(v, Reg):
        raise DSLError(f"{what}={v!r}: expected a destination register")
    if (t is pred) != (v.type is pred) or (t is not pred and v.type.reg_bits != t.reg_bits):
        raise DSLError(f"{what}={describe(v)}: expected a .{t.name} destination")
    return v


SHARED_SPACES = frozenset({"shared", "shared::cta", "shared::cluster"})


def memory(what: str, v, space: str) -> Addr:
    """A memory operand in `space` ('global', 'shared::cta', 'shared::cluster', 'param', generic '').

    Accepts a SharedAlloc, an Addr, a register holding an address, or a Param (param space).
    A register known to hold an address of another space is an error naming both spaces.
    """
    if isinstance(v, Addr):
        base = v.base
    else:
        base = v
        v = Addr(v, 0)
    if isinstance(base, SharedAlloc):
        if space not in SHARED_SPACES and space != "":
            raise DSLError(f"{what}: {describe(base)} is in shared memory, but this operand must be a "
                           f"{space or 'generic'} address")
        return v
    if isinstance(base, Param):
        if space != "param":
            raise DSLError(f"{what}: {describe(base)} is a kernel parameter; this operand must be a "
                           f"{space or 'generic'} address")
        return v
    if isinstance(base, Reg):
        if base.type.reg_bits not in (32, 64) or base.type.kind == "f":
            raise DSLError(f"{what}={describe(base)}: an address must be a 32- or 64-bit integer register")
        if space in ("global", "") and base.type.reg_bits != 64:
            raise DSLError(f"{what}={describe(base)}: a {space or 'generic'} address must be 64-bit")
        if base.space is not None and not _space_ok(base.space, space):
            raise DSLError(f"{what}={describe(base)}: expected a {space or 'generic'} address, "
                           f"got a {base.space} address")
        return v
    raise DSLError(f"{what}={v!r}: expected an address (shared buffer, register or Addr)")


def _space_ok(have: str, want: str) -> bool:
    if have == want:
        return True
    shared = {"shared", "shared::cta"}
    if have in shared and want in shared | {"shared::cluster"}:
        return True     # a CTA-local shared address is also a valid shared::cluster address
    return False


def tensormap(what: str, v) -> TensorMapRef:
    """The tensor-map operand: a tensor-map param (its generic address) or a TensorMapRef."""
    if isinstance(v, Param):
        if v.kind != "tensormap":
            raise DSLError(f"{what}: {describe(v)} is a {v.kind} parameter, not a tensor map")
        return TensorMapRef(v.value, v)
    if isinstance(v, TensorMapRef):
        return v
    if isinstance(v, Reg) and v.type.reg_bits == 64:
        return TensorMapRef(v)
    raise DSLError(f"{what}={v!r}: expected a tensor-map parameter or the 64-bit generic address of a tensor map")


def immediate(what: str, v, lo: int, hi: int) -> int:
    """An integer immediate in [lo, hi] (operands PTX requires to be constants)."""
    if isinstance(v, Imm):
        v = v.value
    if not isinstance(v, int) or isinstance(v, bool):
        raise DSLError(f"{what}={v!r}: expected an integer constant (PTX takes only an immediate here)")
    if not lo <= v <= hi:
        raise DSLError(f"{what}={v} is out of range; expected {lo}..{hi}")
    return v


def req(ptx=(7, 8), targets=None) -> Req:
    return Req(ptx, targets) if targets is not None else Req(ptx)
