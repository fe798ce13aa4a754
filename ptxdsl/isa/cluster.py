"""Cluster helpers: elect.sync, barrier.cluster.{arrive,wait}, mapa, getctarank.
Floors: shared/reference/ptx-tma-isa.md section 8."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Reg
from ..target import Req
from ..types import b32, pred, u32
from .base import Op, choice, dest, join, ops, value


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


@dataclass(eq=False)
class Mapa(Op):
    """mapa{.shared::cluster}.{u32|u64} d, a, rank: the address of the same location in CTA `rank`."""

    mnemonic: ClassVar[str] = "mapa"
    dst: Reg
    addr: object
    rank: object
    shared: bool = True

    def __post_init__(self):
        t = self.dst.type if isinstance(self.dst, Reg) else u32
        choice("mapa address width", t.bits, {32, 64})
        self.dst = dest("mapa d", self.dst, t)
        if not isinstance(self.addr, Reg):
            from .base import memory
            self.addr = memory("mapa a", self.addr, "shared::cta").base
        self.rank = value("mapa rank", self.rank, b32)

    def emit(self) -> str:
        t = "u64" if self.dst.type.bits == 64 else "u32"
        return f"{join('mapa', 'shared::cluster' if self.shared else '', t)} {ops(self.dst, self.addr, self.rank)}"


@dataclass(eq=False)
class Getctarank(Op):
    """getctarank{.shared::cluster}.{u32|u64} d, a: the cluster rank of the CTA owning address a."""

    mnemonic: ClassVar[str] = "getctarank"
    dst: Reg
    addr: object
    shared: bool = True

    def __post_init__(self):
        self.dst = dest("getctarank d", self.dst, u32)
        if isinstance(self.addr, Reg):
            choice("getctarank address width", self.addr.type.bits, {32, 64})

    def emit(self) -> str:
        t = "u64" if isinstance(self.addr, Reg) and self.addr.type.bits == 64 else "u32"
        return f"{join('getctarank', 'shared::cluster' if self.shared else '', t)} {ops(self.dst, self.addr)}"



