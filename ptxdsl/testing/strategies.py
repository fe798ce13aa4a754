"""Hypothesis strategies for what a TMA kernel is given: element types, tensor shapes and strides, tensor
maps valid by construction, boxes and coordinates (across the tensor's edges too), launch shapes and
clusters, and whole TMA operations (`tma_cases`).

    from hypothesis import given
    from ptxdsl.testing import strategies as pst

    @given(pst.tensor_maps(), pst.data())
    def test_my_kernel(spec, data):
        coords = data.draw(pst.box_coords(spec))
        ...

Lists are innermost first, as in `TensorMapSpec`, except `shapes` and `strides`, which are in numpy
order (outermost first) like the arrays they describe. Every map `tensor_maps` draws passes
`TensorMapSpec.validate()`; by default it is also one the CPU model (`ptxdsl.reference`) handles and a
GPU can hold: a tiled map over at most 2 MiB whose box fits in 64 KiB of shared memory. Each strategy
shrinks towards small, simple values: rank 1, the first dtype listed, no swizzle, unit element strides,
a box inside the tensor at the origin.
"""
from __future__ import annotations

from typing import NamedTuple

from hypothesis import strategies as st

from .. import reference as ref
from ..tensormap import (CORNER_RANGE, DTYPES, FLOAT_DTYPES, L2_PROMOTION, MAX_BOX, MAX_BOX_BYTES, MAX_DIM,
                         MAX_ELEMENT_STRIDE, SWIZZLE_SPAN, TensorMapSpec)
from .cases import OPS, TmaCase

# Tensor-map dtypes with a numpy type: the ones the CPU model and the harness handle.
MODELLED_DTYPES = ("u8", "u16", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")
HOPPER_SWIZZLES = ("none", "32B", "64B", "128B")
REDUCE_OPS = tuple(ref.REDUCE_TYPES)
FILLS = (0xA5, 0x00, 0xFF, 0x5A)
MAX_TENSOR_BYTES = 1 << 21
MAX_SMEM_BYTES = 64 * 1024
MAX_INNER_BYTES = 512                 # tma_cases: box[0] * elem_bytes without a swizzle
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
PORTABLE_CLUSTER = 8                  # CTAs per cluster every sm_90 launch accepts (16 needs an opt-in)


# --- element types, shapes, strides ------------------------------------------------------------

def dtypes(names=MODELLED_DTYPES, *, reduce_op: str | None = None, floats: bool | None = None) -> st.SearchStrategy:
    """A tensor-map dtype name ('u8', 'bf16', ...) from `names` (default: the ten with a numpy type; all 13
    are `ptxdsl.tensormap.DTYPES`). reduce_op: only those cp.reduce.async.bulk.tensor `reduce_op` takes
    (`ptxdsl.reference.REDUCE_TYPES`); floats: True for float types only, False for integers only."""
    names = [n for n in names if n in DTYPES]
    if reduce_op is not None:
        names = [n for n in names if n in ref.REDUCE_TYPES[reduce_op]]
    if floats is not None:
        names = [n for n in names if (n in FLOAT_DTYPES) == floats]
    if not names:
        raise ValueError(f"dtypes(): nothing left of {names!r} with reduce_op={reduce_op!r}, floats={floats!r}")
    return st.sampled_from(names)


@st.composite
def shapes(draw, *, ranks=(1, 5), min_side: int = 1, max_side: int = 64, max_elements: int | None = 1 << 16):
    """A tensor shape in numpy order (outermost first): rank in ranks[0]..ranks[1], each side in
    min_side..max_side, at most max_elements elements (outer sides are cut down to fit)."""
    rank = draw(st.integers(*ranks))
    sides = [draw(st.integers(min_side, max_side)) for _ in range(rank)]
    if max_elements is not None:
        for i in range(rank):                   # cut the outermost sides first
            rest = 1
            for s in sides[i + 1:]:
                rest *= s
            sides[i] = max(min_side, min(sides[i], max_elements // max(rest, 1)))
    return tuple(sides)


@st.composite
def strides(draw, shape, dtype: str, *, align: int = 16, max_pad: int = 4):
    """Byte strides in numpy order for an array of `shape` and `dtype` whose innermost dimension is dense
    and each outer row starts on an `align`-byte boundary, padded by 0..max_pad more `align`s (what a
    tensor map needs: TensorMapSpec.tiled_for(shape, dtype, box, strides=...))."""
    esize = DTYPES[dtype][1]
    out, pitch = [esize], esize
    for n in reversed(shape[1:]):
        pitch = -(-pitch * n // align) * align + align * draw(st.integers(0, max_pad))
        out.append(pitch)
    return tuple(reversed(out))


# --- tensor maps -------------------------------------------------------------------------------

def _footprint(box: int, stride: int) -> int:
    """Elements a box dimension spans in the tensor: (ceil(box / stride) - 1) * stride + 1."""
    return (-(-box // stride) - 1) * stride + 1


def _element_strides(draw, rank: int, allowed: bool) -> list[int]:
    """Mostly 1, now and then 2..8 (one dimension in seven)."""
    if not allowed:
        return [1] * rank
    return [draw(st.integers(2, MAX_ELEMENT_STRIDE)) if draw(st.integers(0, 6)) == 6 else 1 for _ in range(rank)]


def _tiled_layout(draw, dtype, rank, swizzle, interleave, estrides, *, max_smem_bytes, max_tensor_bytes,
                  inner_bytes_max):
    """(box, dims, strides) of a tiled map: a box whose shared-memory image fits max_smem_bytes, then dims
    that mostly hold the box (up to about twice its reach), then padded row strides."""
    esize = DTYPES[dtype][1]
    align = 32 if interleave == "32B" else 16
    span = SWIZZLE_SPAN[swizzle] if interleave == "none" else 0
    inner_max = min(span or inner_bytes_max, MAX_BOX * esize, max_smem_bytes)
    box = [draw(st.integers(1, max(1, inner_max // 16))) * 16 // esize]
    row_bytes = max(box[0] * esize, span)
    rows_left = min(MAX_BOX, max_smem_bytes // row_bytes, MAX_BOX_BYTES // (box[0] * esize))
    for i in range(1, rank):
        b = draw(st.integers(1, max(1, min(MAX_BOX, rows_left * estrides[i]))))
        rows_left = max(1, rows_left // -(-b // estrides[i]))
        box.append(b)
    dims, row_strides = [], []
    pitch = esize
    for i in range(rank):
        reach = box[0] if i == 0 else _footprint(box[i], estrides[i])
        if max_tensor_bytes is None and i == rank - 1:
            dims.append(draw(st.integers(1, MAX_DIM)))
            break
        budget = MAX_DIM if max_tensor_bytes is None else max(1, max_tensor_bytes // pitch)
        top = min(2 * reach + 4, budget)
        low = reach if reach <= top and draw(st.integers(0, 9)) < 8 else 1
        dims.append(draw(st.integers(low, top)))
        if i + 1 < rank:
            pitch = -(-pitch * dims[i] // align) * align + align * draw(st.integers(0, 4))
            row_strides.append(pitch)
    return tuple(box), tuple(dims), tuple(row_strides)


def _im2col_map(draw, dtype, rank, swizzle, estrides, *, max_smem_bytes, max_tensor_bytes) -> dict:
    """The im2col fields: small dims, corners inside CORNER_RANGE with a non-empty bounding box, a pixel's
    channels a multiple of 16 bytes within the swizzle span, and pixels that fit max_smem_bytes."""
    esize = DTYPES[dtype][1]
    per_dim = 64 if max_tensor_bytes is None else max(1, int((max_tensor_bytes // esize) ** (1 / rank)))
    dims = [draw(st.integers(1, min(64, per_dim))) for _ in range(rank)]
    row_strides, pitch = [], esize
    for d in dims[:-1]:
        pitch = -(-pitch * d // 16) * 16 + 16 * draw(st.integers(0, 3))
        row_strides.append(pitch)
    lo, hi = CORNER_RANGE[rank]
    lower, upper = [], []
    for d in dims[1:-1]:
        low = draw(st.integers(lo, hi))
        lower.append(low)
        upper.append(draw(st.integers(max(lo, low + 1 - d), hi)))
    span = SWIZZLE_SPAN[swizzle]
    top = min(256 * esize, span or 256 * esize)
    channels = draw(st.integers(1, top // 16)) * 16 // esize
    row_bytes = max(channels * esize, span)
    pixels = draw(st.integers(1, max(1, min(1024, MAX_BOX_BYTES // (channels * esize), max_smem_bytes // row_bytes))))
    return dict(dims=tuple(dims), strides=tuple(row_strides), box=(), kind="im2col", lower_corner=tuple(lower),
                upper_corner=tuple(upper), channels_per_pixel=channels, pixels_per_column=pixels,
                element_strides=tuple(estrides))


@st.composite
def tensor_maps(draw, *, kinds=("tiled",), dtypes=MODELLED_DTYPES, ranks=(1, 5), swizzles=HOPPER_SWIZZLES,
                interleaves=("none",), element_strides: bool = True, oob_fills=("zero", "nan"),
                l2_promotions=("none",), max_tensor_bytes: int | None = MAX_TENSOR_BYTES,
                max_smem_bytes: int = MAX_SMEM_BYTES, address: int = 0):
    """A TensorMapSpec that passes validate(), over `address` (0: bind it later with spec.bind(ptr)).

    kinds: 'tiled' and/or 'im2col' (rank 3..5, corners in the rank's range, a non-empty pixel box).
    dtypes: names from ptxdsl.tensormap.DTYPES (the default ten have numpy types; add 'tf32', 'f32_ftz',
    'tf32_ftz' for validation-only use). swizzles: any of ptxdsl.tensormap.SWIZZLE (the sm_100 atom modes
    encode only on sm_100; the model handles the four Hopper ones). interleaves: 'none', '16B', '32B'
    (an interleaved map has rank >= 3; '32B' comes with swizzle '32B' and 32-byte alignment; tiled only;
    the model handles 'none' only). element_strides: False keeps them all 1; otherwise one dimension in
    seven gets 2..8. oob_fills: 'nan' is drawn for float dtypes only. max_tensor_bytes bounds the bytes the
    tensor spans (None: any dims the driver takes, up to 2^32 in the outermost dimension); max_smem_bytes
    bounds the box's shared-memory image, swizzle padding included.
    """
    kind = draw(st.sampled_from(kinds))
    dtype = draw(st.sampled_from([d for d in dtypes if d in DTYPES]))
    interleave = "none" if kind == "im2col" else draw(st.sampled_from(interleaves))
    lo, hi = ranks
    if kind == "im2col" or interleave != "none":
        lo = max(lo, 3)
    if lo > hi:
        raise ValueError(f"tensor_maps(): ranks={ranks} leave no rank for a {kind} map with interleave {interleave}")
    rank = draw(st.integers(lo, hi))
    if interleave == "32B":
        if "32B" not in swizzles:
            raise ValueError("tensor_maps(): interleave '32B' needs swizzle '32B' among swizzles")
        swizzle = "32B"
    else:
        swizzle = draw(st.sampled_from(swizzles))
    estrides = _element_strides(draw, rank, element_strides)
    if kind == "im2col":
        fields = _im2col_map(draw, dtype, rank, swizzle, estrides, max_smem_bytes=max_smem_bytes,
                             max_tensor_bytes=max_tensor_bytes)
    else:
        box, dims, row_strides = _tiled_layout(draw, dtype, rank, swizzle, interleave, estrides,
                                               max_smem_bytes=max_smem_bytes, max_tensor_bytes=max_tensor_bytes,
                                               inner_bytes_max=MAX_BOX * DTYPES[dtype][1])
        fields = dict(dims=dims, strides=row_strides, box=box, element_strides=tuple(estrides))
    fills = [f for f in oob_fills if f == "zero" or dtype in FLOAT_DTYPES] or ["zero"]
    return TensorMapSpec(dtype=dtype, swizzle=swizzle, interleave=interleave, oob_fill=draw(st.sampled_from(fills)),
                         l2_promotion=draw(st.sampled_from([p for p in l2_promotions if p in L2_PROMOTION])),
                         global_address=address, **fields)


# --- boxes and coordinates ---------------------------------------------------------------------

def _coordinate(draw, reach: int, dim: int, negative: bool) -> int:
    """A box start along one dimension: mostly inside the tensor, else crossing an edge, else anywhere
    from fully below (when `negative`) to fully above it (reach = the elements the box spans there)."""
    lowest = -reach - 1 if negative else 0
    kind = draw(st.integers(0, 19))
    if kind < 13 and dim >= reach:
        return draw(st.integers(0, dim - reach))
    if kind < 19:
        return draw(st.integers(max(lowest, 1 - reach), dim - 1))
    return draw(st.integers(lowest, dim + 1))


def _box_coords(draw, spec: TensorMapSpec, negative: bool) -> tuple:
    q = max(1, 16 // spec.elem_bytes)
    estrides = spec.estrides
    coords = [q * _coordinate(draw, spec.box[0] // q, -(-spec.dims[0] // q), negative)]
    coords += [_coordinate(draw, _footprint(spec.box[i], estrides[i]), spec.dims[i], negative)
               for i in range(1, spec.rank)]
    return tuple(coords)


def box_coords(spec: TensorMapSpec, *, negative: bool = True) -> st.SearchStrategy:
    """Coordinates (innermost first) of a tiled map's box: mostly inside the tensor, often crossing one of
    its edges, now and then anywhere from wholly below (negative=True, as a load may start) to wholly
    above it. coords[0] * elem_bytes is always a multiple of 16 (another start is an illegal
    instruction on the H200); negative=False (a store's or reduction's) keeps every coordinate >= 0."""
    if spec.kind != "tiled":
        raise ValueError("box_coords() is for tiled maps; use im2col_coords() for an im2col map")
    return st.composite(lambda draw: _box_coords(draw, spec, negative))()


def im2col_coords(spec: TensorMapSpec) -> st.SearchStrategy:
    """(coords, offsets) of an im2col load: coords = (c, w, [h, [d,]] n) with c a multiple of 16 bytes
    among the channels, each spatial coordinate in the pixel bounding box widened by 2 (so it may start in
    the padding), n in 0..N; offsets (w, [h, [d]]) in 0..3 within the rank's limit."""
    if spec.kind != "im2col":
        raise ValueError("im2col_coords() is for im2col maps; use box_coords() for a tiled map")
    return _im2col_coords(spec)


@st.composite
def _im2col_coords(draw, spec: TensorMapSpec):
    q = max(1, 16 // spec.elem_bytes)
    c = q * draw(st.integers(0, max(0, (spec.dims[0] - 1) // q)))
    spatial = []
    for k in range(spec.rank - 2):
        top = spec.dims[k + 1] - 1 + spec.upper_corner[k]
        spatial.append(draw(st.integers(spec.lower_corner[k] - 2, max(spec.lower_corner[k], top) + 2)))
    n = draw(st.integers(0, spec.dims[-1]))
    top = min(3, ref.IM2COL_OFFSET_MAX[spec.rank])
    offsets = tuple(draw(st.integers(0, top)) for _ in range(spec.rank - 2))
    return (c, *spatial, n), offsets


# --- launches ----------------------------------------------------------------------------------

class LaunchShape(NamedTuple):
    """A launch: grid (in CTAs) and block (threads), each (x, y, z); cluster (x, y, z) or None."""

    grid: tuple
    block: tuple
    cluster: tuple | None = None


@st.composite
def clusters(draw, *, max_ctas: int = PORTABLE_CLUSTER, dims: int = 3):
    """Cluster dimensions (x, y, z) with x * y * z <= max_ctas (8 is portable; up to 16 needs the
    non-portable-size opt-in); only the first `dims` dimensions may exceed 1."""
    out = []
    left = max_ctas
    for i in range(3):
        n = draw(st.integers(1, left)) if i < dims else 1
        out.append(n)
        left //= n
    return tuple(out)


@st.composite
def launch_shapes(draw, *, max_threads: int = MAX_THREADS, warps: bool = True, max_grid=(64, 16, 4),
                  cluster: bool | None = False, max_cluster_ctas: int = PORTABLE_CLUSTER):
    """A LaunchShape. block: (x, y, z) within (1024, 1024, 64) and x * y * z <= max_threads, x a multiple
    of 32 when `warps` (a warp-collective instruction needs whole warps). grid: each dimension 1..max_grid.
    cluster: False for none, True for a cluster (`clusters(max_ctas=max_cluster_ctas)`) with the grid a
    multiple of it in each dimension, None for either."""
    step = 32 if warps else 1
    x = draw(st.integers(1, min(MAX_BLOCK[0], max_threads) // step)) * step
    y = draw(st.integers(1, min(MAX_BLOCK[1], max(1, max_threads // x))))
    z = draw(st.integers(1, min(MAX_BLOCK[2], max(1, max_threads // (x * y)))))
    with_cluster = draw(st.booleans()) if cluster is None else cluster
    dims = draw(clusters(max_ctas=max_cluster_ctas)) if with_cluster else (1, 1, 1)
    grid = tuple(c * draw(st.integers(1, max(1, g // c))) for g, c in zip(max_grid, dims))
    return LaunchShape(grid, (x, y, z), dims if with_cluster else None)


# --- whole TMA operations ----------------------------------------------------------------------

@st.composite
def tma_cases(draw, ops=OPS, *, max_tensor_bytes: int = MAX_TENSOR_BYTES, max_smem_bytes: int = MAX_SMEM_BYTES):
    """A TmaCase the tensor-map rules, the model and the harness accept: op from `ops` (load, multicast,
    store, reduce with an op its dtype takes), one of the ten modelled dtypes, rank 1..5, a Hopper swizzle,
    element strides now and then, padded row strides, a box whose image fits max_smem_bytes (its inner
    extent at most 512 bytes without a swizzle), coordinates as `box_coords` draws them (negative only for
    loads), oob_fill 'nan' for floats now and then, the load's fill byte, the multicast's mask and issuer,
    and how the data is drawn (reductions: bits, small integers or finite floats)."""
    op = draw(st.sampled_from(ops))
    reduce_op = None
    if op == "reduce" and draw(st.booleans()):
        reduce_op = draw(st.sampled_from(REDUCE_OPS))
        dtype = draw(st.sampled_from(sorted(ref.REDUCE_TYPES[reduce_op])))
    elif op == "reduce":
        dtype = draw(st.sampled_from([d for d in MODELLED_DTYPES if any(d in t for t in ref.REDUCE_TYPES.values())]))
        reduce_op = draw(st.sampled_from([o for o in REDUCE_OPS if dtype in ref.REDUCE_TYPES[o]]))
    else:
        dtype = draw(st.sampled_from(MODELLED_DTYPES))
    rank = draw(st.integers(1, 5))
    swizzle = draw(st.sampled_from(HOPPER_SWIZZLES))
    estrides = _element_strides(draw, rank, True)
    box, dims, row_strides = _tiled_layout(draw, dtype, rank, swizzle, "none", estrides, max_smem_bytes=max_smem_bytes,
                                           max_tensor_bytes=max_tensor_bytes, inner_bytes_max=MAX_INNER_BYTES)
    spec = TensorMapSpec(dtype=dtype, dims=dims, strides=row_strides, box=box, element_strides=tuple(estrides),
                         swizzle=swizzle)
    coords = _box_coords(draw, spec, op in ("load", "multicast"))
    floats = dtype in FLOAT_DTYPES
    return TmaCase(op=op, dtype=dtype, dims=dims, strides=row_strides, box=box, coords=coords,
                   element_strides=tuple(estrides), swizzle=swizzle,
                   oob_fill=draw(st.sampled_from(("zero", "nan"))) if floats else "zero",
                   reduce_op=reduce_op,
                   fill=draw(st.sampled_from(FILLS)) if op in ("load", "multicast") else TmaCase.fill,
                   cta_mask=draw(st.sampled_from((3, 1, 2))) if op == "multicast" else 0,
                   issuer=draw(st.integers(0, 1)) if op == "multicast" else 0,
                   values=draw(st.sampled_from(("bits", "small", "finite") if floats else ("bits", "small")))
                   if op == "reduce" else "bits",
                   seed=draw(st.integers(0, 2**32 - 1)))
