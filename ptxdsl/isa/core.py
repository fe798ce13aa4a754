"""Core PTX: mov, integer/float arithmetic, setp/selp, ld/st, cvt, cvta, bar.sync, bra, ret, trap."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Label, Param, Reg, SharedAlloc, SpecialReg
from ..target import Req
from ..types import ALL_TYPES, ScalarType, pred, u32, u64
from .base import Op, choice, dest, join, memory, ops, value


@dataclass(eq=False)
class Mov(Op):
    """mov.type d, a  (a: register, immediate, special register, or a symbol whose address to take)."""

    mnemonic: ClassVar[str] = "mov"
    type: ScalarType
    dst: Reg
    src: object

    def __post_init__(self):
        self.dst = dest("mov d", self.dst, self.type)
        if isinstance(self.src, (SharedAlloc, Param)):
            if self.type.bits not in (32, 64) or self.type.kind == "f":
                raise DSLError(f"mov of the address of {self.src}: expected .u32/.u64/.b64, got .{self.type.name}")
        elif not isinstance(self.src, SpecialReg):
            self.src = value("mov a", self.src, self.type)

    def emit(self) -> str:
        t = self.type.name
        if self.type.kind == "f" and self.type.bits == 16:
            t = "b16"
        return f"mov.{t} {ops(self.dst, self.src)}"

    def requires(self) -> Req:
        if isinstance(self.src, SpecialReg):
            return Req(self.src.req_ptx)
        return super().requires()


# Binary arithmetic and logic, as data: op -> the type kinds it takes (u, s, f, b, p = .pred).
BINARY = {
    "add": "usf", "sub": "usf", "mul": "usf", "div": "usf", "rem": "us",
    "min": "usf", "max": "usf", "and": "usbp", "or": "usbp", "xor": "usbp", "shl": "usb", "shr": "usb",
}
AS_BITS = frozenset({"and", "or", "xor", "shl"})   # emitted on .bN whatever the integer kind
INT_MUL_MODES = frozenset({"lo", "hi", "wide"})
FLOAT_ROUNDING = frozenset({None, "rn", "rz", "rm", "rp"})


def kind_letter(t: ScalarType) -> str:
    return "p" if t is pred else t.kind


def bits_type(t: ScalarType) -> ScalarType:
    return ALL_TYPES[f"b{t.bits}"]


def wide_type(t: ScalarType) -> ScalarType:
    return ALL_TYPES[f"{t.kind}{t.bits * 2}"]


@dataclass(eq=False)
class Binary(Op):
    """add/sub/mul/div/rem/min/max/and/or/xor/shl/shr.type d, a, b (mul takes .lo/.hi/.wide for integers)."""

    op: str
    type: ScalarType
    dst: Reg
    a: object
    b: object
    mode: str | None = None

    def __post_init__(self):
        choice("op", self.op, BINARY)
        t = self.type
        if kind_letter(t) not in BINARY[self.op]:
            raise DSLError(f"{self.op}.{t.name}: .{t.name} is not a type {self.op} takes")
        if self.op in AS_BITS and t.kind in "us":
            self.type = t = bits_type(t)
        if self.op == "mul" and t.kind in "us":
            self.mode = self.mode or "lo"
            choice("mul mode", self.mode, INT_MUL_MODES)
        elif self.op == "div" and t.kind == "f" and t.bits == 32:
            self.mode = self.mode or "rn"
            choice("div rounding", self.mode, {"rn", "rz", "rm", "rp", "approx", "full"})
        elif self.op == "div" and t.kind == "f":
            self.mode = self.mode or "rn"
            choice("div rounding", self.mode, {"rn", "rz", "rm", "rp"})
        elif t.kind == "f":
            choice(f"{self.op} rounding", self.mode, FLOAT_ROUNDING if self.op in ("add", "sub", "mul") else {None})
        elif self.mode is not None:
            raise DSLError(f"{self.op}.{t.name}: mode={self.mode!r} is not allowed here")
        dt = t
        if self.mode == "wide":
            dt = wide_type(t)
        self.dst = dest(f"{self.op} d", self.dst, dt)
        self.a = value(f"{self.op} a", self.a, t)
        bt = u32 if self.op in ("shl", "shr") else t
        self.b = value(f"{self.op} b", self.b, bt)

    def emit(self) -> str:
        return f"{join(self.op, self.mode, self.type.name)} {ops(self.dst, self.a, self.b)}"


@dataclass(eq=False)
class Mad(Op):
    """mad{.lo,.hi,.wide}.type d, a, b, c (integers) / fma.rn.type d, a, b, c (floats)."""

    mnemonic: ClassVar[str] = "mad"
    type: ScalarType
    dst: Reg
    a: object
    b: object
    c: object
    mode: str | None = None

    def __post_init__(self):
        t = self.type
        if t.kind in "us":
            self.mode = self.mode or "lo"
            choice("mad mode", self.mode, INT_MUL_MODES)
        elif t.kind == "f":
            self.mode = self.mode or "rn"
            choice("fma rounding", self.mode, {"rn", "rz", "rm", "rp"})
        else:
            raise DSLError(f"mad.{t.name}: expected a .u/.s/.f type")
        wide = self.mode == "wide"
        dt = wide_type(t) if wide else t
        self.dst = dest("mad d", self.dst, dt)
        self.a = value("mad a", self.a, t)
        self.b = value("mad b", self.b, t)
        self.c = value("mad c", self.c, dt)

    def emit(self) -> str:
        name = "fma" if self.type.kind == "f" else "mad"
        return f"{join(name, self.mode, self.type.name)} {ops(self.dst, self.a, self.b, self.c)}"


UNARY = {"not": "bp", "neg": "sf", "abs": "sf", "cnot": "b", "popc": "b", "clz": "b", "brev": "b"}


@dataclass(eq=False)
class Unary(Op):
    """not/neg/abs/cnot/popc/clz/brev.type d, a."""

    op: str
    type: ScalarType
    dst: Reg
    a: object

    def __post_init__(self):
        choice("op", self.op, UNARY)
        t = self.type
        if t.kind in "us" and "b" in UNARY[self.op]:
            self.type = t = bits_type(t)
        if kind_letter(t) not in UNARY[self.op]:
            raise DSLError(f"{self.op}.{t.name}: .{t.name} is not a type {self.op} takes")
        dt = u32 if self.op in ("popc", "clz") else t
        self.dst = dest(f"{self.op} d", self.dst, dt)
        self.a = value(f"{self.op} a", self.a, t)

    def emit(self) -> str:
        return f"{self.op}.{self.type.name} {ops(self.dst, self.a)}"


CMP_INT = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})
CMP_FLOAT = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"})


@dataclass(eq=False)
class Setp(Op):
    """setp.cmp.type p, a, b."""

    mnemonic: ClassVar[str] = "setp"
    cmp: str
    type: ScalarType
    dst: Reg
    a: object
    b: object

    def __post_init__(self):
        choice("setp cmp", self.cmp, CMP_FLOAT if self.type.kind == "f" else CMP_INT)
        if self.type is pred:
            raise DSLError("setp: compare .pred values with xor/and instead")
        self.dst = dest("setp p", self.dst, pred)
        self.a = value("setp a", self.a, self.type)
        self.b = value("setp b", self.b, self.type)

    def emit(self) -> str:
        return f"setp.{self.cmp}.{self.type.name} {ops(self.dst, self.a, self.b)}"


@dataclass(eq=False)
class Selp(Op):
    """selp.type d, a, b, c  (d = c ? a : b)."""

    mnemonic: ClassVar[str] = "selp"
    type: ScalarType
    dst: Reg
    a: object
    b: object
    cond: object

    def __post_init__(self):
        self.dst = dest("selp d", self.dst, self.type)
        self.a = value("selp a", self.a, self.type)
        self.b = value("selp b", self.b, self.type)
        self.cond = value("selp c", self.cond, pred)

    def emit(self) -> str:
        return f"selp.{self.type.name} {ops(self.dst, self.a, self.b, self.cond)}"


LDST_SPACES = frozenset({"global", "shared", "shared::cta", "shared::cluster", "param", "local", "const"})
VEC = frozenset({1, 2, 4})


def _vec_types(what, regs, t, vec):
    return tuple(value(f"{what}[{i}]", r, t) for i, r in enumerate(regs))


@dataclass(eq=False)
class Ld(Op):
    """ld.space{.vN}.type d, [a]."""

    mnemonic: ClassVar[str] = "ld"
    space: str
    type: ScalarType
    dst: tuple
    addr: object

    def __post_init__(self):
        choice("ld space", self.space, LDST_SPACES)
        choice("ld vector width", len(self.dst), VEC)
        if self.type is pred:
            raise DSLError("ld: .pred cannot be loaded; load an integer and setp")
        self.dst = tuple(dest(f"ld d[{i}]", r, self.type) for i, r in enumerate(self.dst))
        self.addr = memory("ld address", self.addr, self.space)

    def defs(self):
        return self.dst

    def emit(self) -> str:
        vec = f"v{len(self.dst)}" if len(self.dst) > 1 else ""
        d = self.dst[0] if len(self.dst) == 1 else "{" + ops(*self.dst) + "}"
        return f"{join('ld', self.space, vec, self.type.name)} {d}, {self.addr}"

    def requires(self) -> Req:
        return Req((7, 8))


@dataclass(eq=False)
class St(Op):
    """st.space{.vN}.type [a], b."""

    mnemonic: ClassVar[str] = "st"
    space: str
    type: ScalarType
    addr: object
    src: tuple

    def __post_init__(self):
        choice("st space", self.space, LDST_SPACES - {"param", "const"})
        choice("st vector width", len(self.src), VEC)
        self.src = _vec_types("st value", self.src, self.type, len(self.src))
        self.addr = memory("st address", self.addr, self.space)

    def emit(self) -> str:
        vec = f"v{len(self.src)}" if len(self.src) > 1 else ""
        s = self.src[0] if len(self.src) == 1 else "{" + ops(*self.src) + "}"
        return f"{join('st', self.space, vec, self.type.name)} {self.addr}, {s}"


@dataclass(eq=False)
class Cvt(Op):
    """cvt{.rnd}{.sat}.dtype.stype d, a (rounding chosen as PTX requires when not given)."""

    mnemonic: ClassVar[str] = "cvt"
    dtype: ScalarType
    stype: ScalarType
    dst: Reg
    src: object
    rnd: str | None = None
    sat: bool = False

    def __post_init__(self):
        d, s = self.dtype, self.stype
        if d is pred or s is pred:
            raise DSLError("cvt: .pred cannot be converted; use selp or setp")
        if self.rnd is None:
            if d.kind == "f" and s.kind == "f" and d.bits < s.bits:
                self.rnd = "rn"
            elif d.kind == "f" and s.kind != "f":
                self.rnd = "rn"
            elif d.kind != "f" and s.kind == "f":
                self.rnd = "rzi"
        allowed = {None, "rn", "rz", "rm", "rp"} if d.kind == "f" else {None, "rni", "rzi", "rmi", "rpi"}
        choice("cvt rounding", self.rnd, allowed)
        self.dst = dest("cvt d", self.dst, d)
        # ptxas takes a special register in an integer cvt (cvt.u64.u32 %rd, %tid.x), not in a float one
        self.src = value("cvt a", self.src, s, sreg=d.kind != "f" and s.kind != "f")

    def emit(self) -> str:
        return f"{join('cvt', self.rnd, 'sat' if self.sat else '', self.dtype.name, self.stype.name)} " \
               f"{ops(self.dst, self.src)}"


CVTA_SPACES = frozenset({"global", "shared", "shared::cta", "shared::cluster", "param", "local", "const"})


@dataclass(eq=False)
class Cvta(Op):
    """cvta{.to}.space.u64 d, a: between a state-space address and a generic one."""

    mnemonic: ClassVar[str] = "cvta"
    space: str
    dst: Reg
    src: object
    to: bool = False

    def __post_init__(self):
        choice("cvta space", self.space, CVTA_SPACES)
        self.dst = dest("cvta d", self.dst, u64)
        if not isinstance(self.src, (SharedAlloc, Param)):
            self.src = value("cvta a", self.src, u64)

    def emit(self) -> str:
        return f"{join('cvta', 'to' if self.to else '', self.space, 'u64')} {ops(self.dst, self.src)}"

    def requires(self) -> Req:
        return Req((7, 7)) if self.space == "param" else super().requires()


@dataclass(eq=False)
class BarSync(Op):
    """bar.sync id{, count}: a CTA-wide barrier (warp-uniform, all threads of the CTA by default)."""

    mnemonic: ClassVar[str] = "bar.sync"
    barrier: int = 0
    count: int | None = None

    def __post_init__(self):
        if not (isinstance(self.barrier, int) and 0 <= self.barrier <= 15):
            raise DSLError(f"bar.sync id={self.barrier!r}: expected 0..15")
        if self.count is not None and (self.count <= 0 or self.count % 32):
            raise DSLError(f"bar.sync count={self.count!r}: expected a positive multiple of 32")

    def emit(self) -> str:
        return f"bar.sync {self.barrier}" + (f", {self.count}" if self.count is not None else "")


@dataclass(eq=False)
class Bra(Op):
    """bra{.uni} label."""

    mnemonic: ClassVar[str] = "bra"
    target: Label
    uni: bool = False

    def emit(self) -> str:
        return f"{'bra.uni' if self.uni else 'bra'} {self.target}"


@dataclass(eq=False)
class Ret(Op):
    """ret."""

    mnemonic: ClassVar[str] = "ret"

    def emit(self) -> str:
        return "ret"


@dataclass(eq=False)
class Exit(Op):
    """exit."""

    mnemonic: ClassVar[str] = "exit"

    def emit(self) -> str:
        return "exit"


@dataclass(eq=False)
class Trap(Op):
    """trap: abort the kernel with an error the host sees as CUDA_ERROR_LAUNCH_FAILED / ILLEGAL_INSTRUCTION."""

    mnemonic: ClassVar[str] = "trap"

    def emit(self) -> str:
        return "trap"


@dataclass(eq=False)
class Membar(Op):
    """membar.level (cta, gl, sys)."""

    mnemonic: ClassVar[str] = "membar"
    level: str = "gl"

    def __post_init__(self):
        choice("membar level", self.level, {"cta", "gl", "sys"})

    def emit(self) -> str:
        return f"membar.{self.level}"


@dataclass(eq=False)
class AtomAdd(Op):
    """atom.space.add.type d, [a], b."""

    mnemonic: ClassVar[str] = "atom"
    space: str
    type: ScalarType
    dst: Reg
    addr: object
    src: object

    def __post_init__(self):
        choice("atom space", self.space, {"global", "shared::cta", "shared::cluster"})
        choice("atom.add type", self.type.name, {"u32", "s32", "u64", "f32", "f64"})
        self.dst = dest("atom d", self.dst, self.type)
        self.addr = memory("atom address", self.addr, self.space)
        self.src = value("atom b", self.src, self.type)

    def emit(self) -> str:
        return f"atom.{self.space}.add.{self.type.name} {ops(self.dst, self.addr, self.src)}"

