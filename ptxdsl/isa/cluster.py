"""Cluster instructions: barrier.cluster.{arrive,wait}, mapa, getctarank, and the small remote stores
st.async / red.async that signal a peer CTA's mbarrier."""
from __future__ import annotations

from ..ir import Addr, Reg
from ..target import Req
from ..types import u32, u64
from . import effects as fx
from .decl import Derived, Flag, Op, Qual, TypeQual
from .operands import Address, Dst, Slot, Value, Vector

MBAR_COMPLETE = "mbarrier::complete_tx::bytes"
GENERIC_OR_CLUSTER = Qual("shared::cluster", None, default="shared::cluster", aliases={"": None},
                          none_token="generic", doc="shared::cluster, or None for a generic address")


class _BarrierCluster(Op):
    abstract = True
    floor = Req((7, 8))
    raises = (({"sem": ("release", "relaxed", "acquire")}, Req((8, 0))),)
    family, level = "cluster", "gpu"


class BarrierClusterArrive(_BarrierCluster):
    """barrier.cluster.arrive{.release|.relaxed}{.aligned}: this thread arrives at the cluster barrier."""

    ptx = "barrier.cluster.arrive{.<sem>}{.<aligned>}"
    quals = {"sem": Qual(None, "release", "relaxed"), "aligned": Flag("aligned")}

    def effects(self):
        return (fx.Barrier("cluster", wait=False),) + ((fx.Collective("warp"),) if self.aligned else ())


class BarrierClusterWait(_BarrierCluster):
    """barrier.cluster.wait{.acquire}{.aligned}: wait until every thread of the cluster has arrived."""

    ptx = "barrier.cluster.wait{.<sem>}{.<aligned>}"
    quals = {"sem": Qual(None, "acquire"), "aligned": Flag("aligned")}

    def effects(self):
        return (fx.Barrier("cluster"),) + ((fx.Collective("warp"),) if self.aligned else ())


def _address_width(v, space) -> int:
    base = v.base if isinstance(v, Addr) else v
    if isinstance(base, Reg):
        return base.type.bits
    return 32 if space else 64


ADDR_TYPE = TypeQual("u32", "u64", doc="the address width (from the address operand)")


class Mapa(Op):
    """mapa{.shared::cluster}.{u32|u64} d, a, rank: the address of a's location in CTA `rank` of the cluster
    (.shared::cluster: a shared::cta address in, a shared::cluster one out; generic: .u64 in and out)."""

    ptx = "mapa{.<space>}.<type>"
    quals = {"space": GENERIC_OR_CLUSTER, "type": ADDR_TYPE}
    operands = (Slot("d", Dst("type", space=lambda op: op.space)),
                Slot("addr", Address(lambda op: "shared::cta" if op.space else "", bracket=False,
                                     width=lambda op: op.type.bits)),
                Slot("rank", Value(u32)))
    floor = Req((7, 8))
    family, level = "cluster", "gpu"
    note = "run on the H200: mapa.shared::cluster.u32"

    def prepare(self, values):
        _default_address_type(values)


def _default_address_type(values) -> None:
    """.u32 or .u64 from the width of the address operand in its state space (mapa, getctarank)."""
    space = GENERIC_OR_CLUSTER.normalize(values.get("space", "shared::cluster"))
    values.setdefault("type", u64 if _address_width(values.get("addr"), space) == 64 else u32)


class Getctarank(Op):
    """getctarank{.shared::cluster}.{u32|u64} d, a: the cluster rank of the CTA that owns address a
    (.u32/.u64 is a's width; d is 32-bit)."""

    ptx = "getctarank{.<space>}.<type>"
    quals = {"space": GENERIC_OR_CLUSTER, "type": ADDR_TYPE}
    operands = (Slot("d", Dst(u32)), Slot("addr", Address("space", bracket=False, width=lambda op: op.type.bits)))
    floor = Req((7, 8))
    family, level = "cluster", "gpu"
    note = "run on the H200: getctarank.shared::cluster.u32"

    def prepare(self, values):
        _default_address_type(values)


ST_TYPES = ("b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64")
VEC = Derived(None, "v2", "v4")


class StAsync(Op):
    """st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2|.v4}.type [a], b, [mbar]: store into a
    (peer) CTA's shared memory and complete-tx the bytes on the mbarrier in that CTA."""

    ptx = "st.async.shared::cluster." + MBAR_COMPLETE + "{.<vec>}.<type>"
    mnemonic = "st.async"
    quals = {"vec": VEC, "type": TypeQual(*ST_TYPES, infer=("value",))}
    operands = (Slot("addr", Address("shared::cluster")), Slot("value", Vector("type", max_bits=128)),
                Slot("mbar", Address("shared::cluster")))
    args = ("type", "addr", "value", "mbar")
    excludes = (({"value": 4, "type": ("b64", "u64", "s64", "f64")}, "a vector is at most 128 bits"),)
    floor = Req((8, 1))
    family, level = "cluster", "gpu"

    @property
    def vec(self):
        n = len(self.value)
        return f"v{n}" if n > 1 else None

    def effects(self):
        return (fx.AsyncWrite(self.addr, self.mbar, self.type.nbytes * len(self.value), remote=True),
                fx.NeedsCluster())


RED_ASYNC_TYPES = {
    "add": ("u32", "s32", "u64", "s64"), "min": ("u32", "s32"), "max": ("u32", "s32"),
    "inc": ("u32",), "dec": ("u32",), "and": ("b32",), "or": ("b32",), "xor": ("b32",),
}


class RedAsync(Op):
    """red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [a], b, [mbar]:
    a reduction into a (peer) CTA's shared memory that completes-tx on the mbarrier in that CTA."""

    ptx = "red.async.relaxed.cluster.shared::cluster." + MBAR_COMPLETE + ".<op>.<type>"
    mnemonic = "red.async"
    quals = {"op": Qual(*RED_ASYNC_TYPES), "type": TypeQual("b32", "u32", "s32", "u64", "s64", infer=("value",))}
    operands = (Slot("addr", Address("shared::cluster")), Slot("value", Value("type")),
                Slot("mbar", Address("shared::cluster")))
    args = ("op", "type", "addr", "value", "mbar")
    excludes = tuple(({"op": o, "type": t}, f".{o} does not take .{t}")
                     for o, ok in RED_ASYNC_TYPES.items() for t in ("b32", "u32", "s32", "u64", "s64") if t not in ok)
    floor = Req((8, 1))
    family, level = "cluster", "gpu"

    def effects(self):
        return (fx.AsyncWrite(self.addr, self.mbar, self.type.nbytes, remote=True), fx.NeedsCluster())
