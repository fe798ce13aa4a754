"""Bulk copies: cp.async.bulk (every direction), cp.reduce.async.bulk, cp.async.bulk.prefetch.L2,
cp.async.bulk.tensor (load, store), cp.reduce.async.bulk.tensor, cp.async.bulk.prefetch.tensor,
cp.async.bulk.commit_group and cp.async.bulk.wait_group{.read}.

One tensor declaration covers ranks 1-5 (the `.Nd` suffix is the length of the coordinate vector)."""
from __future__ import annotations

from ..errors import DSLError
from ..ir import Imm, SharedAlloc
from ..target import SM100_UP, SM100A, Req
from ..types import u16, u32, u64
from . import effects as fx
from .decl import Derived, Flag, Op, Qual, TypeQual
from .operands import Address, Const, Coords, Slot, TensorMap, Value, Vector, describe

MBAR_COMPLETE = "mbarrier::complete_tx::bytes"
BULK_ALIGN = 16
MAX_WAIT_GROUP = 2**31 - 1       # ptxas checks no range; a count of bulk groups
# .multicast::cluster assembles for plain sm_90 too, but PTX tunes it for the a/f targets and CCCL gates it
# on them: ptxdsl emits it only there.
MULTICAST_TARGETS = frozenset({"sm_90a"}) | SM100A
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
LOAD_MODES = ("tile", "im2col", "tile::gather4", "im2col::w", "im2col::w::128")
STORE_MODES = ("tile", "im2col_no_offs", "tile::scatter4")
REDUCE_MODES = ("tile", "im2col_no_offs")
DIMS = ("1d", "2d", "3d", "4d", "5d")
IM2COL = ("im2col", "im2col::w", "im2col::w::128", "im2col_no_offs")
FOUR = ("tile::gather4", "tile::scatter4")

HINT = Derived(None, "L2::cache_hint", doc="written when a cache policy operand is given")
CACHE_HINT = Slot("cache_hint", Value(u64, imm=False), optional=True)
SIZE = Value(u32, lo=BULK_ALIGN, hi=(1 << 32) - 16, step=BULK_ALIGN, rule="a bulk copy size is a positive multiple "
                                                                          "of 16 bytes")


def _hint(op):
    return "L2::cache_hint" if op.cache_hint is not None else None


class _Hinted(Op):
    """Ops with an optional L2 cache policy operand (.L2::cache_hint is written when it is given)."""

    abstract = True
    hint = property(_hint)


# ------------------------------------------------------------------------------- non-tensor


class BulkAddress(Address):
    """A bulk-copy data operand: 16-byte aligned where the buffer says so."""

    def __init__(self, space):
        super().__init__(space, align=BULK_ALIGN)


def _check_size(op, *operands):
    """size: a positive multiple of 16 that fits the buffers it names."""
    v = op.size
    if isinstance(v, Imm):
        for a in operands:
            if isinstance(a.base, SharedAlloc) and a.offset + v.value > a.base.nbytes:
                raise DSLError(f"{op.mnemonic} size={v.value}: {describe(a.base)} has {a.base.nbytes - a.offset} "
                               f"bytes from offset {a.offset}")


class _Bulk(_Hinted):
    """cp.async.bulk.dst.src: a non-tensor copy of `size` bytes; the direction is (dst_space, src_space)."""

    abstract = True
    family = "bulk"
    method = "cp_async_bulk"
    mnemonic = "cp.async.bulk"

    def check(self):
        _check_size(self, self.dst, self.src)


class CpAsyncBulkSharedGlobal(_Bulk):
    """cp.async.bulk.shared::cta.global: global -> this CTA's shared memory, completing on `mbar`."""

    ptx = "cp.async.bulk.<dst_space>.<src_space>." + MBAR_COMPLETE + "{.<hint>}"
    quals = {"dst_space": Qual("shared::cta", default="shared::cta"),
             "src_space": Qual("global", default="global"), "hint": HINT}
    operands = (Slot("dst", BulkAddress("shared::cta")), Slot("src", BulkAddress("global")), Slot("size", SIZE),
                Slot("mbar", Address("shared::cta")), CACHE_HINT)
    floor = Req((8, 6))
    level = "gpu"

    def effects(self):
        return (fx.AsyncWrite(self.dst, self.mbar, self.size), fx.GlobalAsync(read=True))


class CpAsyncBulkClusterGlobal(_Bulk):
    """cp.async.bulk.shared::cluster.global: global -> shared memory of this CTA (or, with `multicast`, of
    every CTA of the 16-bit mask), completing on `mbar` in each destination CTA."""

    ptx = "cp.async.bulk.<dst_space>.<src_space>." + MBAR_COMPLETE + "{.<mc>}{.<hint>}"
    quals = {"dst_space": Qual("shared::cluster", default="shared::cluster"),
             "src_space": Qual("global", default="global"),
             "mc": Derived(None, "multicast::cluster", doc="written when a multicast mask is given"), "hint": HINT}
    operands = (Slot("dst", BulkAddress("shared::cluster")), Slot("src", BulkAddress("global")), Slot("size", SIZE),
                Slot("mbar", Address("shared::cluster")), Slot("multicast", Value(u16, hex=4), optional=True), CACHE_HINT)
    floor = Req((8, 0))
    raises = (({"multicast": ("reg", "imm")}, Req((8, 0), MULTICAST_TARGETS)),)
    level = "gpu"
    note = "multicast: ptxas takes plain sm_90 too; ptxdsl emits it for the a/f targets only"

    @property
    def mc(self):
        return "multicast::cluster" if getattr(self, "multicast", None) is not None else None

    def effects(self):
        return (fx.AsyncWrite(self.dst, self.mbar, self.size, multicast=self.multicast), fx.GlobalAsync(read=True))


class CpAsyncBulkClusterShared(_Bulk):
    """cp.async.bulk.shared::cluster.shared::cta: this CTA's shared memory -> a (peer) CTA's, completing on
    `mbar` in the destination CTA. Needs a cluster launch (an illegal instruction on the H200 without one,
    even into the CTA's own shared memory)."""

    ptx = "cp.async.bulk.<dst_space>.<src_space>." + MBAR_COMPLETE
    quals = {"dst_space": Qual("shared::cluster", default="shared::cluster"),
             "src_space": Qual("shared::cta", default="shared::cta")}
    operands = (Slot("dst", BulkAddress("shared::cluster")), Slot("src", BulkAddress("shared::cta")),
                Slot("size", SIZE), Slot("mbar", Address("shared::cluster")))
    floor = Req((8, 0))
    level = "gpu"
    note = "needs a cluster launch: without one the H200 raised an illegal instruction, also for the CTA's own " \
           "shared memory"

    def effects(self):
        return (fx.AsyncWrite(self.dst, self.mbar, self.size, remote=True),
                fx.AsyncRead(self.src, self.size, bar=self.mbar), fx.NeedsCluster())


class CpAsyncBulkGlobalShared(_Bulk):
    """cp.async.bulk.global.shared::cta.bulk_group: this CTA's shared memory -> global, completing through
    bulk groups (byte_mask: .cp_mask, sm_100+)."""

    ptx = "cp.async.bulk.<dst_space>.<src_space>.bulk_group{.<hint>}{.<cp_mask>}"
    quals = {"dst_space": Qual("global", default="global"), "src_space": Qual("shared::cta", default="shared::cta"),
             "hint": HINT, "cp_mask": Derived(None, "cp_mask", doc="written when a byte mask is given")}
    operands = (Slot("dst", BulkAddress("global")), Slot("src", BulkAddress("shared::cta")), Slot("size", SIZE),
                CACHE_HINT, Slot("byte_mask", Value(u16, hex=4), optional=True))
    floor = Req((8, 0))
    raises = (({"byte_mask": ("reg", "imm")}, Req((8, 6), SM100_UP)),)
    level = "gpu"
    note = ".cp_mask needs sm_100+: assembled, not run on hardware"

    @property
    def cp_mask(self):
        return "cp_mask" if getattr(self, "byte_mask", None) is not None else None

    def effects(self):
        return (fx.AsyncRead(self.src, self.size), fx.GlobalAsync(write=True))


BULK_DIRECTIONS = {(c.quals["dst_space"].default, c.quals["src_space"].default): c for c in
                   (CpAsyncBulkSharedGlobal, CpAsyncBulkClusterGlobal, CpAsyncBulkClusterShared,
                    CpAsyncBulkGlobalShared)}


def bulk_class(dst_space, src_space):
    """The cp.async.bulk declaration of a (dst_space, src_space) direction."""
    cls = BULK_DIRECTIONS.get((dst_space, src_space)) if isinstance(dst_space, str) and isinstance(src_space, str) \
        else None
    if cls is None:
        shown = ", ".join(f"{d} <- {s}" for d, s in BULK_DIRECTIONS)
        raise DSLError(f"cp.async.bulk: dst_space={dst_space!r}, src_space={src_space!r} is not a direction "
                       f"cp.async.bulk has; expected one of {shown}")
    return cls


# cp.reduce.async.bulk (non-tensor): destination -> redOp -> the types ptxas accepts.
REDUCE_BULK_TYPES = {
    "global": {
        "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"), "min": ("u32", "s32", "u64", "s64", "f16", "bf16"),
        "max": ("u32", "s32", "u64", "s64", "f16", "bf16"), "inc": ("u32",), "dec": ("u32",),
        "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    },
    "shared::cluster": {
        "add": ("u32", "s32", "u64"), "min": ("u32", "s32"), "max": ("u32", "s32"), "inc": ("u32",), "dec": ("u32",),
        "and": ("b32",), "or": ("b32",), "xor": ("b32",),
    },
}
BULK_TYPES = ("b32", "b64", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")


def _type_excludes(table, where):
    return tuple(({"op": o, "type": t}, f".{o} does not take .{t} into {where}")
                 for o in REDUCE_OPS for t in BULK_TYPES if t not in table[o])


class CpReduceAsyncBulkGlobal(_Hinted):
    """cp.reduce.async.bulk.global.shared::cta.bulk_group.op{.noftz}.type: reduce `size` bytes of a
    shared::cta buffer into global memory, completing through bulk groups."""

    ptx = "cp.reduce.async.bulk.<dst_space>.shared::cta.bulk_group{.<hint>}.<op>{.<noftz>}.<type>"
    mnemonic = "cp.reduce.async.bulk"
    quals = {"dst_space": Qual("global", default="global"), "hint": HINT, "op": Qual(*REDUCE_OPS),
             "noftz": Flag("noftz"), "type": TypeQual(*BULK_TYPES)}
    operands = (Slot("dst", BulkAddress("global")), Slot("src", BulkAddress("shared::cta")), Slot("size", SIZE),
                CACHE_HINT)
    args = ("op", "dst", "src", "size")
    excludes = _type_excludes(REDUCE_BULK_TYPES["global"], "global memory") + (
        ({"op": "add", "type": ("f16", "bf16"), "noftz": False}, ".add.f16/.bf16 needs .noftz; pass noftz=True"),
        ({"noftz": True, "op": ("min", "max", "inc", "dec", "and", "or", "xor")}, ".noftz is for .add"),
        ({"noftz": True, "type": ("b32", "b64", "u32", "s32", "u64", "s64", "f64")}, ".noftz is for f16, bf16 and f32"))
    floor = Req((8, 0))
    raises = (({"noftz": True, "type": "f32"}, Req((9, 4))),)      # ptxas: .noftz with .f32 from PTX ISA 9.4
    family, level = "bulk", "gpu"
    method = "cp_reduce_async_bulk"
    note = "run on the H200: add.f32, add.noftz.bf16, min.s32, max.u32, and.b32, inc.u32"

    def check(self):
        _check_size(self, self.dst, self.src)

    def effects(self):
        return (fx.AsyncRead(self.src, self.size), fx.GlobalAsync(read=True, write=True))


class CpReduceAsyncBulkCluster(Op):
    """cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.op.type: reduce `size`
    bytes into a (peer) CTA's shared memory, completing on `mbar` there."""

    ptx = "cp.reduce.async.bulk.<dst_space>.shared::cta." + MBAR_COMPLETE + ".<op>.<type>"
    mnemonic = "cp.reduce.async.bulk"
    quals = {"dst_space": Qual("shared::cluster", default="shared::cluster"), "op": Qual(*REDUCE_OPS),
             "type": TypeQual(*BULK_TYPES)}
    operands = (Slot("dst", BulkAddress("shared::cluster")), Slot("src", BulkAddress("shared::cta")),
                Slot("size", SIZE), Slot("mbar", Address("shared::cluster")))
    args = ("op", "dst", "src", "size")
    excludes = _type_excludes(REDUCE_BULK_TYPES["shared::cluster"], "shared::cluster")
    floor = Req((8, 0))
    family = "bulk"
    method = "cp_reduce_async_bulk"

    def check(self):
        _check_size(self, self.dst, self.src)

    def effects(self):
        return (fx.AsyncWrite(self.dst, self.mbar, self.size, remote=True),
                fx.AsyncRead(self.src, self.size, bar=self.mbar), fx.NeedsCluster())


class CpAsyncBulkPrefetch(_Hinted):
    """cp.async.bulk.prefetch.L2.global{.L2::cache_hint} [src], size{, policy}: bring bytes into L2."""

    ptx = "cp.async.bulk.prefetch.L2.global{.<hint>}"
    mnemonic = "cp.async.bulk.prefetch"
    quals = {"hint": HINT}
    operands = (Slot("src", BulkAddress("global")), Slot("size", SIZE), CACHE_HINT)
    floor = Req((8, 0))
    family, level = "bulk", "gpu"

    def check(self):
        _check_size(self, self.src)


class CpAsyncBulkCommitGroup(Op):
    """cp.async.bulk.commit_group: close this thread's current bulk async-group."""

    ptx = "cp.async.bulk.commit_group"
    floor = Req((8, 0))
    family, level = "bulk", "gpu"

    def effects(self):
        return (fx.CommitGroup(),)


class CpAsyncBulkWaitGroup(Op):
    """cp.async.bulk.wait_group{.read} N: wait until at most N of this thread's bulk groups are pending
    (.read: until their shared-memory sources may be reused)."""

    ptx = "cp.async.bulk.wait_group{.<read>}"
    mnemonic = "cp.async.bulk.wait_group"
    quals = {"read": Flag("read")}
    operands = (Slot("n", Const(0, MAX_WAIT_GROUP), default=0),)
    floor = Req((8, 0))
    family, level = "bulk", "gpu"

    def effects(self):
        return (fx.WaitGroup(self.n, self.read),)


# ----------------------------------------------------------------------------------- tensor


def _dim(op) -> str | None:
    coords = getattr(op, "coords", None)
    if coords is None:
        return None
    return "2d" if op.mode in FOUR else f"{len(coords)}d"


# Coordinate counts the modes take (the `coords` shape is the number of coordinates).
MODE_DIMS = (({"mode": IM2COL, "coords": (1, 2)}, "the im2col modes need a rank-3..5 tensor (3 to 5 coordinates)"),
             ({"mode": FOUR, "coords": (1, 2, 3, 4)}, "gather4/scatter4 take 5 coordinates (column, row0..row3)"))
# The {im2colInfo} vector (its shape is its length): rank-2 16-bit offsets for .im2col, (wHalo, wOffset) for
# .im2col::w*, none for the other modes.
IM2COL_COUNTS = (
    ({"mode": ("tile", "tile::gather4"), "im2col": (1, 2, 3)}, "im2col offsets are only for the im2col load modes"),
    *(({"mode": "im2col", "coords": n, "im2col": tuple(c for c in (None, 1, 2, 3) if c != n - 2)},
       f"a {n}d .im2col load expects {n - 2} im2col offset{'s' if n > 3 else ''} (16-bit, W first)")
      for n in (3, 4, 5)),
    ({"mode": ("im2col::w", "im2col::w::128"), "im2col": (None, 1, 3)},
     "an .im2col::w load expects 2 im2col offsets (wHalo, wOffset)"),
)


def _check_coords(op, what):
    """Coordinate count against the mode, then mode and rank against the map's TensorMapSpec if it has one."""
    n = len(op.coords)
    tmap = op.tmap_ref
    spec = tmap_spec(tmap)
    if spec is None:
        return
    rank = 2 if op.mode in FOUR else n
    if spec.rank != rank:
        raise DSLError(f"{what}.{op.dim}: tensor map {tmap.param.name!r} has rank {spec.rank}, the instruction "
                       f"addresses rank {rank}")
    im2col = op.mode.startswith("im2col")
    if im2col != (spec.kind == "im2col"):
        raise DSLError(f"{what}.{op.mode}: tensor map {tmap.param.name!r} is a {spec.kind} map; mode {op.mode!r} "
                       f"needs {'an im2col' if im2col else 'a tiled'} map")


def tmap_spec(tmap):
    """The TensorMapSpec a tensor-map parameter was declared with, if any."""
    param = getattr(tmap, "param", None)
    return getattr(param, "tmap", None) if param is not None else None


IM2COL_OFFSETS = Slot("im2col", Vector(u16, (1, 2, 3), braces=True, hex=4), optional=True)


class _Tensor(_Hinted):
    abstract = True
    family = "tensor"
    dim = property(_dim)


class CpAsyncBulkTensorLoad(_Tensor):
    """cp.async.bulk.tensor.Nd.dst.global.mode.mbarrier::complete_tx::bytes: a box of the tensor map `src` at
    `coords` (innermost first) into shared memory at `dst`, completing on `mbar`. `multicast`: a 16-bit mask
    of the cluster's CTAs that receive it too (sm_90a); `cta_group` (sm_100a); `im2col` offsets."""

    ptx = ("cp.async.bulk.tensor.<dim>.<dst_space>.global.<mode>." + MBAR_COMPLETE +
           "{.<mc>}{.<cta_group>}{.<hint>}")
    mnemonic = "cp.async.bulk.tensor"
    quals = {"dim": Derived(*DIMS), "dst_space": Qual("shared::cluster", "shared::cta", default="shared::cluster"),
             "mode": Qual(*LOAD_MODES, default="tile"),
             "mc": Derived(None, "multicast::cluster", doc="written when a multicast mask is given"),
             "cta_group": Qual(None, 1, 2, ptx=lambda v, op: f"cta_group::{v}", token=lambda v: f"cta_group::{v}"),
             "hint": HINT}
    operands = (Slot("dst", Address("dst_space")), Slot("src", TensorMap(coords="coords")),
                Slot("coords", Coords(), inline=True), Slot("mbar", Address("dst_space")), IM2COL_OFFSETS,
                Slot("multicast", Value(u16, hex=4), optional=True), CACHE_HINT)
    args = ("dst", "src", "coords")
    excludes = MODE_DIMS + IM2COL_COUNTS + (({"dst_space": "shared::cta", "multicast": ("reg", "imm")},
                             "multicast needs dst_space='shared::cluster' (a shared::cta destination is one CTA "
                             "only)"),)
    floor = Req((8, 0))
    raises = (({"dst_space": "shared::cta"}, Req((8, 6))),
              ({"mode": ("tile::gather4", "im2col::w"), "dst_space": "shared::cta"}, Req((8, 6), SM100_UP)),
              ({"mode": ("tile::gather4", "im2col::w"), "dst_space": "shared::cluster"}, Req((8, 6), SM100A)),
              ({"mode": "im2col::w::128"}, Req((8, 6), SM100A)),
              ({"cta_group": (1, 2)}, Req((8, 6), SM100A)),
              ({"multicast": ("reg", "imm")}, Req((8, 0), MULTICAST_TARGETS)))
    method = "cp_async_bulk_tensor"
    level = "gpu"
    note = "gather4, im2col::w and .cta_group need an sm_100a-class target: assembled, not run on hardware"

    @property
    def mc(self):
        return "multicast::cluster" if getattr(self, "multicast", None) is not None else None

    @property
    def tmap_ref(self):
        return self.src

    def check(self):
        _check_coords(self, self.mnemonic)

    def effects(self):
        return (fx.AsyncWrite(self.dst, self.mbar, None, self.src, self.coords, self.multicast),
                fx.GlobalAsync(read=True))


class CpAsyncBulkTensorStore(_Tensor):
    """cp.async.bulk.tensor.Nd.global.shared::cta.mode.bulk_group: the box at `src` (shared::cta) into the
    tensor map `dst` at `coords`, completing through bulk groups."""

    ptx = "cp.async.bulk.tensor.<dim>.global.shared::cta.<mode>.bulk_group{.<hint>}"
    mnemonic = "cp.async.bulk.tensor"
    quals = {"dim": Derived(*DIMS), "mode": Qual(*STORE_MODES, default="tile"), "hint": HINT}
    operands = (Slot("dst", TensorMap(coords="coords")), Slot("coords", Coords(), inline=True),
                Slot("src", Address("shared::cta")), CACHE_HINT)
    args = ("dst", "src", "coords")
    excludes = MODE_DIMS
    floor = Req((8, 0))
    raises = (({"mode": "tile::scatter4"}, Req((8, 6), SM100A)),)
    method = "cp_async_bulk_tensor"
    level = "gpu"

    @property
    def tmap_ref(self):
        return self.dst

    def check(self):
        _check_coords(self, self.mnemonic)

    def effects(self):
        return (fx.AsyncRead(self.src, None, self.dst, self.coords), fx.GlobalAsync(write=True))


# Element types (the tensor map's dtype) each reduction takes.
REDUCE_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f16", "bf16"),
    "min": ("u32", "s32", "s64", "f16", "bf16"), "max": ("u32", "s32", "s64", "f16", "bf16"),
    "inc": ("u32",), "dec": ("u32",),
    # s64 and/or/xor: listed by the PTX ISA, but an illegal instruction on the H200 (u64 works).
    "and": ("u32", "s32", "u64"), "or": ("u32", "s32", "u64"), "xor": ("u32", "s32", "u64"),
}


class CpReduceAsyncBulkTensor(_Tensor):
    """cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op.mode.bulk_group: reduce the box at `src` into the
    tensor map `dst` at `coords`; the element type is the map's."""

    ptx = "cp.reduce.async.bulk.tensor.<dim>.global.shared::cta.<op>.<mode>.bulk_group{.<hint>}"
    mnemonic = "cp.reduce.async.bulk.tensor"
    quals = {"dim": Derived(*DIMS), "op": Qual(*REDUCE_OPS), "mode": Qual(*REDUCE_MODES, default="tile"),
             "hint": HINT}
    operands = (Slot("dst", TensorMap(coords="coords")), Slot("coords", Coords(), inline=True),
                Slot("src", Address("shared::cta")), CACHE_HINT)
    args = ("op", "dst", "src", "coords")
    excludes = MODE_DIMS
    floor = Req((8, 0))
    level = "gpu"
    note = "the element type is the tensor map's (checked when the param has a TensorMapSpec); run on the H200: " \
           "add on bf16/f32/s32, min and max on bf16/s32"

    @property
    def tmap_ref(self):
        return self.dst

    def check(self):
        spec = tmap_spec(self.dst)
        if spec is not None and spec.dtype not in REDUCE_TYPES[self.op]:
            raise DSLError(f"{self.mnemonic}.{self.op}: the tensor map's element type {spec.dtype!r} is not one "
                           f"{self.op} takes; expected one of {', '.join(sorted(REDUCE_TYPES[self.op]))}")
        _check_coords(self, self.mnemonic)

    def effects(self):
        return (fx.AsyncRead(self.src, None, self.dst, self.coords), fx.GlobalAsync(read=True, write=True))


class CpAsyncBulkPrefetchTensor(_Tensor):
    """cp.async.bulk.prefetch.tensor.Nd.L2.global.mode: prefetch a box of the tensor map into L2."""

    ptx = "cp.async.bulk.prefetch.tensor.<dim>.L2.global.<mode>{.<hint>}"
    mnemonic = "cp.async.bulk.prefetch.tensor"
    quals = {"dim": Derived(*DIMS), "mode": Qual(*LOAD_MODES, default="tile"), "hint": HINT}
    operands = (Slot("tmap", TensorMap(coords="coords")), Slot("coords", Coords(), inline=True), IM2COL_OFFSETS,
                CACHE_HINT)
    args = ("tmap", "coords")
    excludes = MODE_DIMS + IM2COL_COUNTS
    floor = Req((8, 0))
    raises = (({"mode": ("tile::gather4", "im2col::w", "im2col::w::128")}, Req((8, 6), SM100A)),)
    level = "gpu"

    @property
    def tmap_ref(self):
        return self.tmap

    def check(self):
        _check_coords(self, self.mnemonic)

    def effects(self):
        return (fx.TmapRead(self.tmap, self.coords),)
