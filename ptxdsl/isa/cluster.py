"""Cluster helpers: elect.sync, barrier.cluster.{arrive,wait}, mapa, getctarank, and the small remote
stores st.async / red.async that signal a peer CTA's mbarrier.
Floors: shared/reference/ptx-tma-isa.md section 8."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Addr, Reg, SharedAlloc
from ..target import Req
from ..types import ScalarType, b32, pred, scalar_type, u32
from .base import Op, choice, dest, describe, join, memory, ops, value

MBAR_COMPLETE = "mbarrier::complete_tx::bytes"


@dataclass(eq=False)
class ElectSync(Op):
    """elect.sync d|p, membermask: one leader lane of the mask gets p = true (warp-collective)."""

    mnemonic: ClassVar[str] = "elect.sync"
    pred_dst: Reg
    lane_dst: object = None
    mask: object = 0xFFFFFFFF

    def __post_init__(self):
        self.pred_dst = dest("elect.sync p", self.pred_dst, pred)
        self.lane_dst = dest("elect.sync d", self.lane_dst, b32, sink=True)
        self.mask = value("elect.sync membermask", self.mask, b32)

    def defs(self):
        return tuple(r for r in (self.pred_dst, self.lane_dst) if isinstance(r, Reg))

    def emit(self) -> str:
        return f"elect.sync {self.lane_dst}|{self.pred_dst}, {self.mask}"

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class BarrierCluster(Op):
    """barrier.cluster.{arrive{.release|.relaxed} | wait{.acquire}}{.aligned}."""

    mnemonic: ClassVar[str] = "barrier.cluster"
    kind: str
    sem: str | None = None
    aligned: bool = True

    def __post_init__(self):
        choice("barrier.cluster kind", self.kind, {"arrive", "wait"})
        allowed = {None, "release", "relaxed"} if self.kind == "arrive" else {None, "acquire"}
        choice(f"barrier.cluster.{self.kind} sem", self.sem, allowed)

    def emit(self) -> str:
        return join("barrier.cluster", self.kind, self.sem, "aligned" if self.aligned else "")

    def requires(self) -> Req:
        return Req((8, 0)) if self.sem else Req((7, 8))


def _address_operand(what: str, v, space: str):
    """An address written without brackets (mapa / getctarank take `a`, `var` or `var+imm`)."""
    if isinstance(v, (SharedAlloc, Addr)):
        if space == "":
            raise DSLError(f"{what}: the generic form takes a 64-bit generic address register, "
                           f"got {describe(v)}")
        return memory(what, v, space)
    if not isinstance(v, Reg):
        raise DSLError(f"{what}={v!r}: expected a shared buffer, an Addr or an address register")
    memory(what, v, space)
    return v


def _unbracketed(a) -> str:
    return str(a)[1:-1] if isinstance(a, Addr) else str(a)


def _address_width(a) -> int:
    return a.type.bits if isinstance(a, Reg) else 32


@dataclass(eq=False)
class Mapa(Op):
    """mapa{.shared::cluster}.{u32|u64} d, a, rank: the address of the same location in CTA `rank`
    (space 'shared::cluster': a shared::cta address in, a shared::cluster one out; '': generic .u64)."""

    mnemonic: ClassVar[str] = "mapa"
    dst: Reg
    addr: object
    rank: object
    space: str = "shared::cluster"

    def __post_init__(self):
        choice("mapa space", self.space, {"shared::cluster", ""})
        if not isinstance(self.dst, Reg):
            raise DSLError(f"mapa d={self.dst!r}: expected a destination register")
        self.addr = _address_operand("mapa a", self.addr, "shared::cta" if self.space else "")
        choice("mapa address width (bits of d)", self.dst.type.bits, {32, 64} if self.space else {64})
        self.dst = dest("mapa d", self.dst, self.dst.type)
        if _address_width(self.addr) != self.dst.type.bits:
            raise DSLError(f"mapa: a={describe(self.addr)} and d={describe(self.dst)} must have the same width "
                           f"(the .u32/.u64 of the instruction)")
        self.rank = value("mapa rank", self.rank, b32)

    def emit(self) -> str:
        t = f"u{self.dst.type.bits}"
        return f"{join('mapa', self.space, t)} {ops(self.dst, _unbracketed(self.addr), self.rank)}"


@dataclass(eq=False)
class Getctarank(Op):
    """getctarank{.shared::cluster}.{u32|u64} d, a: the cluster rank of the CTA owning address a
    (.u32/.u64 is the width of a; d is always 32-bit)."""

    mnemonic: ClassVar[str] = "getctarank"
    dst: Reg
    addr: object
    space: str = "shared::cluster"

    def __post_init__(self):
        choice("getctarank space", self.space, {"shared::cluster", ""})
        self.dst = dest("getctarank d", self.dst, u32)
        self.addr = _address_operand("getctarank a", self.addr, self.space)
        choice("getctarank address width", _address_width(self.addr), {32, 64} if self.space else {64})

    def emit(self) -> str:
        t = f"u{_address_width(self.addr)}"
        return f"{join('getctarank', self.space, t)} {ops(self.dst, _unbracketed(self.addr))}"


ST_ASYNC_TYPES = frozenset({"b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"})
# red.async: the (op, type) pairs ptxas 13.5 accepts (probed for every op x {b,u,s}{32,64}, f32).
RED_ASYNC_TYPES = {
    "add": frozenset({"u32", "s32", "u64", "s64"}),
    "min": frozenset({"u32", "s32"}), "max": frozenset({"u32", "s32"}),
    "inc": frozenset({"u32"}), "dec": frozenset({"u32"}),
    "and": frozenset({"b32"}), "or": frozenset({"b32"}), "xor": frozenset({"b32"}),
}


def _vector(what, values, t: ScalarType) -> tuple:
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    choice(f"{what} vector width", len(values), {1, 2, 4})
    if len(values) * t.bits > 128:
        raise DSLError(f"{what}.v{len(values)}.{t.name}: a vector is at most 128 bits")
    return tuple(value(f"{what} b[{i}]", v, t) for i, v in enumerate(values))


@dataclass(eq=False)
class StAsync(Op):
    """st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2|.v4}.type [a], b, [mbar]: store into a
    (peer) CTA's shared memory and complete-tx its byte count on the mbarrier in that CTA."""

    mnemonic: ClassVar[str] = "st.async"
    type: object
    addr: object
    src: object
    mbar: object

    def __post_init__(self):
        self.type = scalar_type(self.type)
        choice("st.async type", self.type.name, ST_ASYNC_TYPES)
        self.src = _vector("st.async", self.src, self.type)
        self.addr = memory("st.async a", self.addr, "shared::cluster")
        self.mbar = memory("st.async mbar", self.mbar, "shared::cluster")

    def emit(self) -> str:
        vec = f"v{len(self.src)}" if len(self.src) > 1 else ""
        b = self.src[0] if len(self.src) == 1 else "{" + ops(*self.src) + "}"
        return f"{join('st.async', 'shared::cluster', MBAR_COMPLETE, vec, self.type.name)} {ops(self.addr, b, self.mbar)}"

    def requires(self) -> Req:
        return Req((8, 1))


@dataclass(eq=False)
class RedAsync(Op):
    """red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [a], b, [mbar]:
    a reduction into a (peer) CTA's shared memory that completes-tx on the mbarrier in that CTA."""

    mnemonic: ClassVar[str] = "red.async"
    op: str
    type: object
    addr: object
    src: object
    mbar: object

    def __post_init__(self):
        choice("red.async op", self.op, RED_ASYNC_TYPES)
        self.type = scalar_type(self.type)
        allowed = RED_ASYNC_TYPES[self.op]
        if self.type.name not in allowed:
            raise DSLError(f"red.async.{self.op}.{self.type.name}: .{self.op} does not take .{self.type.name}; "
                           f"expected one of {', '.join(sorted(allowed))}")
        self.src = value("red.async b", self.src, self.type)
        self.addr = memory("red.async a", self.addr, "shared::cluster")
        self.mbar = memory("red.async mbar", self.mbar, "shared::cluster")

    def emit(self) -> str:
        q = join("red.async.relaxed.cluster", "shared::cluster", MBAR_COMPLETE, self.op, self.type.name)
        return f"{q} {ops(self.addr, self.src, self.mbar)}"

    def requires(self) -> Req:
        return Req((8, 1))
