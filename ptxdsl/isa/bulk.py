"""Bulk copies: cp.async.bulk (every direction), cp.reduce.async.bulk, cp.async.bulk.prefetch.L2,
cp.async.bulk.tensor (load, store), cp.reduce.async.bulk.tensor, cp.async.bulk.prefetch.tensor,
cp.async.bulk.commit_group and cp.async.bulk.wait_group{.read}.

One tensor definition covers ranks 1-5 (the `.Nd` suffix is the length of the coordinate vector).
Floors and forms: shared/reference/ptx-tma-isa.md sections 3, 4 and 5.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Addr, Imm, Reg, SharedAlloc, TensorMapRef
from ..target import SM100_UP, SM100A, Req
from ..types import b16, b32, b64, scalar_type
from .base import Op, choice, describe, immediate, join, memory, ops, tensormap, value

LOAD_MODES = frozenset({"tile", "im2col", "tile::gather4", "im2col::w", "im2col::w::128"})
STORE_MODES = frozenset({"tile", "im2col_no_offs", "tile::scatter4"})
REDUCE_MODES = frozenset({"tile", "im2col_no_offs"})
REDUCE_OPS = frozenset({"add", "min", "max", "inc", "dec", "and", "or", "xor"})
# Element types (the tensor map's dtype) each reduction takes (PTX ISA cp.reduce.async.bulk.tensor).
REDUCE_TYPES = {
    "add": frozenset({"u32", "s32", "u64", "f32", "f16", "bf16"}),
    "min": frozenset({"u32", "s32", "s64", "f16", "bf16"}),
    "max": frozenset({"u32", "s32", "s64", "f16", "bf16"}),
    "inc": frozenset({"u32"}), "dec": frozenset({"u32"}),
    # s64 and/or/xor: listed by the PTX ISA, but an illegal instruction on the H200 (u64 works).
    "and": frozenset({"u32", "s32", "u64"}), "or": frozenset({"u32", "s32", "u64"}),
    "xor": frozenset({"u32", "s32", "u64"}),
}
MBAR_COMPLETE = "mbarrier::complete_tx::bytes"
# .multicast::cluster assembles for plain sm_90 too, but PTX tunes it for the a/f targets and CCCL
# gates it on them (reference section 1): ptxdsl emits it only there.
MULTICAST_TARGETS = frozenset({"sm_90a"}) | SM100A

# cp.async.bulk: (dst space, src space) -> how the copy completes.
BULK_DIRECTIONS = {
    ("shared::cta", "global"): "mbarrier",
    ("shared::cluster", "global"): "mbarrier",
    ("shared::cluster", "shared::cta"): "mbarrier",
    ("global", "shared::cta"): "bulk_group",
}
# cp.reduce.async.bulk (non-tensor): destination -> redOp -> the types ptxas 13.0 accepts (reference 3.2).
REDUCE_BULK_TYPES = {
    "global": {
        "add": frozenset({"u32", "s32", "u64", "f32", "f64", "f16", "bf16"}),
        "min": frozenset({"u32", "s32", "u64", "s64", "f16", "bf16"}),
        "max": frozenset({"u32", "s32", "u64", "s64", "f16", "bf16"}),
        "inc": frozenset({"u32"}), "dec": frozenset({"u32"}),
        "and": frozenset({"b32", "b64"}), "or": frozenset({"b32", "b64"}), "xor": frozenset({"b32", "b64"}),
    },
    "shared::cluster": {
        "add": frozenset({"u32", "s32", "u64"}),
        "min": frozenset({"u32", "s32"}), "max": frozenset({"u32", "s32"}),
        "inc": frozenset({"u32"}), "dec": frozenset({"u32"}),
        "and": frozenset({"b32"}), "or": frozenset({"b32"}), "xor": frozenset({"b32"}),
    },
}
NOFTZ_TYPES = frozenset({"f16", "bf16"})     # .add on these needs .noftz (to global only)
BULK_ALIGN = 16


def _bulk_memory(what, v, space) -> Addr:
    """A bulk-copy data operand: 16-byte aligned where the buffer says so."""
    a = memory(what, v, space)
    if isinstance(a.base, SharedAlloc) and (a.base.align < BULK_ALIGN or a.offset % BULK_ALIGN):
        raise DSLError(f"{what}: {describe(a.base)} at offset {a.offset} (align {a.base.align}) is not 16-byte "
                       f"aligned; bulk copies need 16-byte aligned addresses")
    return a


def _bulk_size(what, v, *operands):
    """size: a .b32 register or an immediate, a positive multiple of 16 that fits known buffers."""
    v = value(what, v, b32)
    if isinstance(v, Imm):
        if v.value <= 0 or v.value % BULK_ALIGN:
            raise DSLError(f"{what}={v.value}: a bulk copy size is a positive multiple of 16 bytes")
        for a in operands:
            if isinstance(a.base, SharedAlloc) and a.offset + v.value > a.base.nbytes:
                raise DSLError(f"{what}={v.value}: {describe(a.base)} has {a.base.nbytes - a.offset} bytes "
                               f"from offset {a.offset}")
    return v


def _policy(what, v):
    return None if v is None else value(f"{what} cache policy", v, b64, imm=False)


def _mask16(what, v):
    v = value(what, v, b16)
    if isinstance(v, Imm) and not 0 <= v.value <= 0xFFFF:
        raise DSLError(f"{what}={v.value}: expected a 16-bit mask 0..0xFFFF")
    return v


@dataclass(eq=False)
class CpAsyncBulk(Op):
    """cp.async.bulk.dst.src: a non-tensor copy of `size` bytes in one of four directions.

    global -> shared::cta / shared::cluster and shared::cta -> shared::cluster complete on an mbarrier
    in the destination CTA (.mbarrier::complete_tx::bytes{.multicast::cluster}{.L2::cache_hint});
    shared::cta -> global completes through bulk groups (.bulk_group{.L2::cache_hint}{.cp_mask}).
    """

    mnemonic: ClassVar[str] = "cp.async.bulk"
    dst: object
    src: object
    size: object
    dst_space: str
    src_space: str
    mbar: object = None
    multicast: object = None
    cache_hint: object = None
    byte_mask: object = None

    def __post_init__(self):
        w = self.mnemonic
        pair = (self.dst_space, self.src_space)
        if pair not in BULK_DIRECTIONS:
            shown = ", ".join(f"{d} <- {s}" for d, s in BULK_DIRECTIONS)
            raise DSLError(f"{w}: dst_space={self.dst_space!r}, src_space={self.src_space!r} is not a direction "
                           f"cp.async.bulk has; expected one of {shown}")
        self.dst = _bulk_memory(f"{w} dst", self.dst, self.dst_space)
        self.src = _bulk_memory(f"{w} src", self.src, self.src_space)
        self.size = _bulk_size(f"{w} size", self.size, self.dst, self.src)
        if self.completion == "mbarrier":
            if self.mbar is None:
                raise DSLError(f"{w}.{self.dst_space}.{self.src_space}: mbar= is missing; this copy completes on an "
                               f"mbarrier in the destination CTA")
            self.mbar = memory(f"{w} mbar", self.mbar, self.dst_space)
        elif self.mbar is not None:
            raise DSLError(f"{w}.global.shared::cta completes through bulk groups; it takes no mbar=")
        if self.multicast is not None:
            if pair != ("shared::cluster", "global"):
                raise DSLError(f"{w}.{self.dst_space}.{self.src_space}: multicast is only for "
                               f"dst_space='shared::cluster', src_space='global'")
            self.multicast = _mask16(f"{w} multicast cta_mask", self.multicast)
        if self.cache_hint is not None and pair == ("shared::cluster", "shared::cta"):
            raise DSLError(f"{w}.shared::cluster.shared::cta takes no cache_hint (it never touches L2)")
        self.cache_hint = _policy(w, self.cache_hint)
        if self.byte_mask is not None:
            if pair != ("global", "shared::cta"):
                raise DSLError(f"{w}: byte_mask (.cp_mask) is only for the shared::cta -> global direction")
            self.byte_mask = _mask16(f"{w} byte_mask", self.byte_mask)

    @property
    def completion(self) -> str:
        return BULK_DIRECTIONS[(self.dst_space, self.src_space)]

    def emit(self) -> str:
        hint = "L2::cache_hint" if self.cache_hint is not None else ""
        if self.completion == "bulk_group":
            q = join(self.mnemonic, self.dst_space, self.src_space, "bulk_group", hint,
                     "cp_mask" if self.byte_mask is not None else "")
            tail = [v for v in (self.cache_hint, self.byte_mask) if v is not None]
            return f"{q} {ops(self.dst, self.src, self.size, *tail)}"
        q = join(self.mnemonic, self.dst_space, self.src_space, MBAR_COMPLETE,
                 "multicast::cluster" if self.multicast is not None else "", hint)
        tail = [v for v in (self.multicast, self.cache_hint) if v is not None]
        return f"{q} {ops(self.dst, self.src, self.size, self.mbar, *tail)}"

    def requires(self) -> Req:
        r = Req((8, 6)) if self.dst_space == "shared::cta" else Req((8, 0))
        if self.multicast is not None:
            r = r & Req((8, 0), MULTICAST_TARGETS)
        if self.byte_mask is not None:
            r = r & Req((8, 6), SM100_UP)
        return r


@dataclass(eq=False)
class CpReduceAsyncBulk(Op):
    """cp.reduce.async.bulk: reduce `size` bytes of a shared::cta buffer into global memory
    (.bulk_group{.L2::cache_hint}.redOp{.noftz}.type) or into a shared::cluster buffer
    (.mbarrier::complete_tx::bytes.redOp.type)."""

    mnemonic: ClassVar[str] = "cp.reduce.async.bulk"
    op: str
    type: object
    dst: object
    src: object
    size: object
    dst_space: str
    mbar: object = None
    noftz: bool = False
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} dst_space", self.dst_space, REDUCE_BULK_TYPES)
        table = REDUCE_BULK_TYPES[self.dst_space]
        choice(f"{w} op", self.op, table)
        self.type = scalar_type(self.type)
        t = self.type.name
        if t not in table[self.op]:
            raise DSLError(f"{w}.{self.op}.{t} into {self.dst_space}: .{self.op} does not take .{t} there; "
                           f"expected one of {', '.join(sorted(table[self.op]))}")
        needs_noftz = self.dst_space == "global" and self.op == "add" and t in NOFTZ_TYPES
        if needs_noftz and not self.noftz:
            raise DSLError(f"{w}.add.{t}: PTX requires .noftz on f16/bf16 additions; pass noftz=True")
        if self.noftz and not needs_noftz:
            raise DSLError(f"{w}: noftz=True is only for .add.f16 / .add.bf16 into global memory")
        self.dst = _bulk_memory(f"{w} dst", self.dst, self.dst_space)
        self.src = _bulk_memory(f"{w} src", self.src, "shared::cta")
        self.size = _bulk_size(f"{w} size", self.size, self.dst, self.src)
        if self.dst_space == "shared::cluster":
            if self.mbar is None:
                raise DSLError(f"{w}.shared::cluster: mbar= is missing; it completes on an mbarrier in the "
                               f"destination CTA")
            if self.cache_hint is not None:
                raise DSLError(f"{w}.shared::cluster takes no cache_hint")
            self.mbar = memory(f"{w} mbar", self.mbar, "shared::cluster")
        elif self.mbar is not None:
            raise DSLError(f"{w}.global completes through bulk groups; it takes no mbar=")
        self.cache_hint = _policy(w, self.cache_hint)

    def emit(self) -> str:
        t = self.type.name
        if self.dst_space == "global":
            q = join(self.mnemonic, "global", "shared::cta", "bulk_group",
                     "L2::cache_hint" if self.cache_hint is not None else "", self.op,
                     "noftz" if self.noftz else "", t)
            tail = [self.cache_hint] if self.cache_hint is not None else []
            return f"{q} {ops(self.dst, self.src, self.size, *tail)}"
        q = join(self.mnemonic, "shared::cluster", "shared::cta", MBAR_COMPLETE, self.op, t)
        return f"{q} {ops(self.dst, self.src, self.size, self.mbar)}"

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class CpAsyncBulkPrefetch(Op):
    """cp.async.bulk.prefetch.L2.global{.L2::cache_hint} [src], size{, policy}: bring bytes into L2."""

    mnemonic: ClassVar[str] = "cp.async.bulk.prefetch.L2.global"
    src: object
    size: object
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        self.src = _bulk_memory(f"{w} src", self.src, "global")
        self.size = _bulk_size(f"{w} size", self.size, self.src)
        self.cache_hint = _policy(w, self.cache_hint)

    def emit(self) -> str:
        q = join(self.mnemonic, "L2::cache_hint" if self.cache_hint is not None else "")
        tail = [self.cache_hint] if self.cache_hint is not None else []
        return f"{q} {ops(self.src, self.size, *tail)}"

    def requires(self) -> Req:
        return Req((8, 0))


def _coords(what, coords, mode) -> tuple:
    coords = tuple(coords)
    n = len(coords)
    if mode in ("tile::gather4", "tile::scatter4"):
        if n != 5:
            raise DSLError(f"{what}.{mode}: expected 5 coordinates (column, row0..row3), got {n}")
    elif mode in ("im2col", "im2col::w", "im2col::w::128", "im2col_no_offs"):
        if not 3 <= n <= 5:
            raise DSLError(f"{what}.{mode}: im2col needs a rank-3..5 tensor, got {n} coordinates")
    elif not 1 <= n <= 5:
        raise DSLError(f"{what}: expected 1..5 coordinates (innermost first), got {n}")
    return tuple(value(f"{what} coords[{i}]", c, b32) for i, c in enumerate(coords))


def _im2col_offsets(what, mode, coords, offsets) -> tuple | None:
    """The {im2colInfo} vector: rank-2 16-bit offsets for .im2col, (wHalo, wOffset) for .im2col::w*."""
    if not mode.startswith("im2col"):
        if offsets:
            raise DSLError(f"{what}.{mode}: im2col offsets are only for the im2col modes")
        return None
    want = len(coords) - 2 if mode == "im2col" else 2
    offsets = tuple(offsets or ())
    if len(offsets) != want:
        names = "16-bit offsets, W first" if mode == "im2col" else "wHalo, wOffset"
        raise DSLError(f"{what}.{len(coords)}d.{mode}: expected {want} im2col offsets ({names}), got {len(offsets)}")
    return tuple(value(f"{what} im2col[{i}]", o, b16) for i, o in enumerate(offsets))


def _dim(coords, mode) -> str:
    return "2d" if mode in ("tile::gather4", "tile::scatter4") else f"{len(coords)}d"


def _tensor(tmap, coords) -> str:
    return f"[{tmap}, {{{ops(*coords)}}}]"


def _mode_req(mode) -> Req:
    if mode == "im2col::w::128" or mode == "tile::scatter4":
        return Req((8, 6), SM100A)
    return Req()


def _tmap_spec(tmap: TensorMapRef):
    """The TensorMapSpec a tensor-map parameter was declared with, if any."""
    return getattr(tmap.param, "tmap", None)


def _tmap_dtype(tmap: TensorMapRef):
    spec = _tmap_spec(tmap)
    return spec.dtype if spec is not None else None


def _tensor_map(what, v) -> TensorMapRef:
    """The tensor-map operand: a generic address (a global-space register is not one)."""
    reg = v.addr if isinstance(v, TensorMapRef) else v
    if isinstance(reg, Reg) and reg.space is not None:
        raise DSLError(f"{what}={describe(reg)}: a tensor map operand is a generic address; convert a "
                       f"{reg.space} address with k.cvta(reg, {reg.space!r})")
    return tensormap(what, v)


def _check_against_spec(what, tmap: TensorMapRef, coords, mode) -> None:
    """Coordinates and mode agree with the map's declared rank and kind (when the param has a spec)."""
    spec = _tmap_spec(tmap)
    if spec is None:
        return
    rank = 2 if mode in ("tile::gather4", "tile::scatter4") else len(coords)
    if spec.rank != rank:
        raise DSLError(f"{what}.{_dim(coords, mode)}: tensor map {tmap.param.name!r} has rank {spec.rank}, "
                       f"the instruction addresses rank {rank}")
    im2col = mode.startswith("im2col")
    if im2col != (spec.kind == "im2col"):
        raise DSLError(f"{what}.{mode}: tensor map {tmap.param.name!r} is a {spec.kind} map; mode {mode!r} "
                       f"needs {'an im2col' if im2col else 'a tiled'} map")


@dataclass(eq=False)
class CpAsyncBulkTensorLoad(Op):
    """cp.async.bulk.tensor.Nd.{shared::cluster|shared::cta}.global.mode.mbarrier::complete_tx::bytes
    {.multicast::cluster}{.cta_group::N}{.L2::cache_hint} [dst], [tmap, {coords}], [mbar]{, {im2col}}{, mask}{, policy}."""

    mnemonic: ClassVar[str] = "cp.async.bulk.tensor"
    dst: object
    tmap: object
    coords: tuple
    mbar: object
    dst_space: str = "shared::cluster"
    mode: str = "tile"
    im2col: tuple | None = None
    multicast: object = None
    cta_group: int | None = None
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} dst_space", self.dst_space, {"shared::cluster", "shared::cta"})
        choice(f"{w} mode", self.mode, LOAD_MODES)
        choice(f"{w} cta_group", self.cta_group, {None, 1, 2})
        self.dst = memory(f"{w} dst", self.dst, self.dst_space)
        self.tmap = _tensor_map(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
        _check_against_spec(w, self.tmap, self.coords, self.mode)
        self.mbar = memory(f"{w} mbar", self.mbar, self.dst_space)
        if self.multicast is not None:
            if self.dst_space == "shared::cta":
                raise DSLError(f"{w}: multicast needs dst_space='shared::cluster' (a shared::cta destination "
                               f"is one CTA only)")
            self.multicast = _mask16(f"{w} multicast cta_mask", self.multicast)
        self.im2col = _im2col_offsets(w, self.mode, self.coords, self.im2col)
        if self.cache_hint is not None:
            self.cache_hint = value(f"{w} cache policy", self.cache_hint, b64, imm=False)

    def emit(self) -> str:
        q = join(self.mnemonic, _dim(self.coords, self.mode), self.dst_space, "global", self.mode, MBAR_COMPLETE,
                 "multicast::cluster" if self.multicast is not None else "",
                 f"cta_group::{self.cta_group}" if self.cta_group else "",
                 "L2::cache_hint" if self.cache_hint is not None else "")
        tail = []
        if self.im2col:
            tail.append("{" + ops(*self.im2col) + "}")
        if self.multicast is not None:
            tail.append(str(self.multicast))
        if self.cache_hint is not None:
            tail.append(str(self.cache_hint))
        return f"{q} {ops(self.dst, _tensor(self.tmap, self.coords), self.mbar, *tail)}"

    def requires(self) -> Req:
        r = Req((8, 6)) if self.dst_space == "shared::cta" else Req((8, 0))
        if self.mode in ("tile::gather4", "im2col::w"):
            r = r & Req((8, 6), SM100_UP if self.dst_space == "shared::cta" else SM100A)
        r = r & _mode_req(self.mode)
        if self.cta_group:
            r = r & Req((8, 6), SM100A)
        if self.multicast is not None:
            r = r & Req((8, 0), MULTICAST_TARGETS)
        return r


@dataclass(eq=False)
class CpAsyncBulkTensorStore(Op):
    """cp.async.bulk.tensor.Nd.global.shared::cta.mode.bulk_group{.L2::cache_hint} [tmap, {coords}], [src]{, policy}."""

    mnemonic: ClassVar[str] = "cp.async.bulk.tensor"
    tmap: object
    coords: tuple
    src: object
    mode: str = "tile"
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} store mode", self.mode, STORE_MODES)
        self.tmap = _tensor_map(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
        _check_against_spec(w, self.tmap, self.coords, self.mode)
        self.src = memory(f"{w} src", self.src, "shared::cta")
        if self.cache_hint is not None:
            self.cache_hint = value(f"{w} cache policy", self.cache_hint, b64, imm=False)

    def emit(self) -> str:
        q = join(self.mnemonic, _dim(self.coords, self.mode), "global", "shared::cta", self.mode, "bulk_group",
                 "L2::cache_hint" if self.cache_hint is not None else "")
        tail = [self.cache_hint] if self.cache_hint is not None else []
        return f"{q} {ops(_tensor(self.tmap, self.coords), self.src, *tail)}"

    def requires(self) -> Req:
        return Req((8, 0)) & _mode_req(self.mode)


@dataclass(eq=False)
class CpReduceAsyncBulkTensor(Op):
    """cp.reduce.async.bulk.tensor.Nd.global.shared::cta.redOp.mode.bulk_group{.L2::cache_hint} [tmap, {coords}], [src]."""

    mnemonic: ClassVar[str] = "cp.reduce.async.bulk.tensor"
    op: str
    tmap: object
    coords: tuple
    src: object
    mode: str = "tile"
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} op", self.op, REDUCE_OPS)
        choice(f"{w} mode", self.mode, REDUCE_MODES)
        self.tmap = _tensor_map(f"{w} tensor map", self.tmap)
        dtype = _tmap_dtype(self.tmap)
        if dtype and dtype not in REDUCE_TYPES[self.op]:
            raise DSLError(f"{w}.{self.op}: the tensor map's element type {dtype!r} is not one {self.op} takes; "
                           f"expected one of {', '.join(sorted(REDUCE_TYPES[self.op]))}")
        self.coords = _coords(w, self.coords, self.mode)
        _check_against_spec(w, self.tmap, self.coords, self.mode)
        self.src = memory(f"{w} src", self.src, "shared::cta")
        if self.cache_hint is not None:
            self.cache_hint = value(f"{w} cache policy", self.cache_hint, b64, imm=False)

    def emit(self) -> str:
        q = join(self.mnemonic, _dim(self.coords, self.mode), "global", "shared::cta", self.op, self.mode,
                 "bulk_group", "L2::cache_hint" if self.cache_hint is not None else "")
        tail = [self.cache_hint] if self.cache_hint is not None else []
        return f"{q} {ops(_tensor(self.tmap, self.coords), self.src, *tail)}"

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class CpAsyncBulkPrefetchTensor(Op):
    """cp.async.bulk.prefetch.tensor.Nd.L2.global.mode{.L2::cache_hint} [tmap, {coords}]{, {im2col}}{, policy}."""

    mnemonic: ClassVar[str] = "cp.async.bulk.prefetch.tensor"
    tmap: object
    coords: tuple
    mode: str = "tile"
    im2col: tuple | None = None
    cache_hint: object = None

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} mode", self.mode, LOAD_MODES)
        self.tmap = _tensor_map(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
        _check_against_spec(w, self.tmap, self.coords, self.mode)
        self.im2col = _im2col_offsets(w, self.mode, self.coords, self.im2col)
        if self.cache_hint is not None:
            self.cache_hint = value(f"{w} cache policy", self.cache_hint, b64, imm=False)

    def emit(self) -> str:
        q = join(self.mnemonic, _dim(self.coords, self.mode), "L2", "global", self.mode,
                 "L2::cache_hint" if self.cache_hint is not None else "")
        tail = []
        if self.im2col:
            tail.append("{" + ops(*self.im2col) + "}")
        if self.cache_hint is not None:
            tail.append(str(self.cache_hint))
        return f"{q} {ops(_tensor(self.tmap, self.coords), *tail)}"

    def requires(self) -> Req:
        if self.mode in ("tile::gather4", "im2col::w", "im2col::w::128"):
            return Req((8, 6), SM100A)
        return Req((8, 0))


@dataclass(eq=False)
class CpAsyncBulkCommitGroup(Op):
    """cp.async.bulk.commit_group: close this thread's current bulk async-group."""

    mnemonic: ClassVar[str] = "cp.async.bulk.commit_group"

    def emit(self) -> str:
        return self.mnemonic

    def requires(self) -> Req:
        return Req((8, 0))


MAX_WAIT_GROUP = 63


@dataclass(eq=False)
class CpAsyncBulkWaitGroup(Op):
    """cp.async.bulk.wait_group{.read} N: wait until at most N of this thread's bulk groups are pending."""

    n: int = 0
    read: bool = False

    def __post_init__(self):
        self.n = immediate(f"{self.mnemonic} N", self.n, 0, MAX_WAIT_GROUP)

    @property
    def mnemonic(self) -> str:  # type: ignore[override]
        return "cp.async.bulk.wait_group.read" if self.read else "cp.async.bulk.wait_group"

    def emit(self) -> str:
        return f"{self.mnemonic} {self.n}"

    def requires(self) -> Req:
        return Req((8, 0))
