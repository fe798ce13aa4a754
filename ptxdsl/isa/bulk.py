"""cp.async.bulk.tensor (load, store), cp.reduce.async.bulk.tensor, cp.async.bulk.prefetch.tensor,
cp.async.bulk.commit_group and cp.async.bulk.wait_group{.read}.

One definition covers ranks 1-5 (the `.Nd` suffix is the length of the coordinate vector).
Floors and forms: shared/reference/ptx-tma-isa.md sections 4 and 5.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import TensorMapRef
from ..target import SM100_UP, SM100A, Req
from ..types import b16, b32, b64
from .base import Op, choice, immediate, join, memory, ops, tensormap, value

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
    "and": frozenset({"u32", "s32", "u64", "s64"}), "or": frozenset({"u32", "s32", "u64", "s64"}),
    "xor": frozenset({"u32", "s32", "u64", "s64"}),
}
MBAR_COMPLETE = "mbarrier::complete_tx::bytes"


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


def _dim(coords, mode) -> str:
    return "2d" if mode in ("tile::gather4", "tile::scatter4") else f"{len(coords)}d"


def _tensor(tmap, coords) -> str:
    return f"[{tmap}, {{{ops(*coords)}}}]"


def _mode_req(mode) -> Req:
    if mode == "im2col::w::128" or mode == "tile::scatter4":
        return Req((8, 6), SM100A)
    return Req()


def _tmap_dtype(tmap: TensorMapRef):
    p = tmap.param
    return getattr(p, "tmap", None) and p.tmap.dtype


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
        self.tmap = tensormap(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
        self.mbar = memory(f"{w} mbar", self.mbar, self.dst_space)
        if self.multicast is not None:
            if self.dst_space == "shared::cta":
                raise DSLError(f"{w}: multicast needs dst_space='shared::cluster' (a shared::cta destination "
                               f"is one CTA only)")
            self.multicast = value(f"{w} multicast cta_mask", self.multicast, b16)
        if self.mode == "im2col":
            offs = tuple(self.im2col or ())
            if len(offs) != len(self.coords) - 2:
                raise DSLError(f"{w}.im2col.{len(self.coords)}d: expected {len(self.coords) - 2} im2col offsets "
                               f"(16-bit), got {len(offs)}")
            self.im2col = tuple(value(f"{w} im2col[{i}]", o, b16) for i, o in enumerate(offs))
        elif self.mode.startswith("im2col::w"):
            offs = tuple(self.im2col or ())
            if len(offs) != 2:
                raise DSLError(f"{w}.{self.mode}: expected 2 offsets (wHalo, wOffset), got {len(offs)}")
            self.im2col = tuple(value(f"{w} im2col[{i}]", o, b16) for i, o in enumerate(offs))
        elif self.im2col:
            raise DSLError(f"{w}.{self.mode}: im2col offsets are only for the im2col modes")
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
        self.tmap = tensormap(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
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
        self.tmap = tensormap(f"{w} tensor map", self.tmap)
        dtype = _tmap_dtype(self.tmap)
        if dtype and dtype not in REDUCE_TYPES[self.op]:
            raise DSLError(f"{w}.{self.op}: the tensor map's element type {dtype!r} is not one {self.op} takes; "
                           f"expected one of {', '.join(sorted(REDUCE_TYPES[self.op]))}")
        self.coords = _coords(w, self.coords, self.mode)
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
        self.tmap = tensormap(f"{w} tensor map", self.tmap)
        self.coords = _coords(w, self.coords, self.mode)
        if self.mode == "im2col":
            offs = tuple(self.im2col or ())
            if len(offs) != len(self.coords) - 2:
                raise DSLError(f"{w}.im2col: expected {len(self.coords) - 2} im2col offsets, got {len(offs)}")
            self.im2col = tuple(value(f"{w} im2col[{i}]", o, b16) for i, o in enumerate(offs))
        elif self.mode.startswith("im2col::w"):
            offs = tuple(self.im2col or ())
            if len(offs) != 2:
                raise DSLError(f"{w}.{self.mode}: expected 2 offsets (wHalo, wOffset), got {len(offs)}")
            self.im2col = tuple(value(f"{w} im2col[{i}]", o, b16) for i, o in enumerate(offs))
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
