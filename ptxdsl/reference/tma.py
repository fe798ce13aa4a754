"""A numpy model of the bytes a TMA operation moves: a test oracle, and a way to predict what a
kernel will see.

Every function reads a `TensorMapSpec` (lists innermost-first, dimension 0 contiguous) and a whole
global tensor given as a numpy array, whose raw C-order bytes are addressed with the spec's dims and
byte strides. Shared memory is a flat uint8 array whose offsets are relative to a base aligned to
the swizzle repeat (256/512/1024 B).

Measured on the H200 (docs/hardware-notes.md): under a swizzle mode every box row
takes a whole swizzle span; the mbarrier transaction count is the unpadded box; the 128B pattern
moves chunk c of 128-byte row r to chunk c ^ (r % 8); a traversal stride on dimension 0 does not
thin the box out; a box whose start in dimension 0 is not a multiple of 16 bytes dies with an
illegal instruction, so the tiled functions refuse one; oob_fill='nan' writes the 16-bit pattern 0x7FF7 over each out-of-bounds element
of an f16, bf16, f32 or f64 map (`NAN_FILL`); a store or reduction whose box starts at a negative
coordinate dies with an illegal instruction, as the CUDA Programming Guide says ("the top left
corner cannot have any negative indices"), so `store_box`/`reduce_box` refuse one; and a store or
reduction writes the whole 16-byte chunk holding the last in-bounds element of each row, past
dims[0] into the row's padding (`store_bounds`).

Float reductions leave the canonical NaN for any NaN result (`REDUCE_NAN`), order -0 below +0 in
min/max, return the number when one min/max operand is NaN, and keep subnormals. s64 and/or/xor
reductions are an illegal instruction (`REDUCE_TYPES`). The GPU differential suite
(tests/test_differential_gpu.py) agrees with this model bit for bit on thousands of random tiled
loads, multicast loads, stores and reductions: ranks 1-5, padded pitches, element strides, boxes
across the tensor's edges, every Hopper swizzle mode, both OOB fills.

Resting on documentation only, to be confirmed on the GPU: the whole im2col traversal
(`load_im2col`) and the f32_ftz/tf32 maps. Interleaved layouts and the sm_100 swizzle atoms are not
modelled: they raise ValueError.
"""
from __future__ import annotations

import numpy as np

from ..isa.bulk import REDUCE_TYPES as TENSOR_REDUCE_TYPES
from ..tensormap import INNER_ELEMENT_STRIDE_APPLIES, SWIZZLE_SPAN, TensorMapSpec
from ..types import scalar_type, to_numpy

# Bits an out-of-bounds element gets with oob_fill='nan' (NAN_REQUEST_ZERO_FMA), per tensor-map
# dtype: the halfword 0x7FF7 repeated, a NaN at every width. Measured on the H200 for f16, bf16, f32
# and f64; the f32_ftz and tf32 maps are assumed to write what f32 writes.
NAN_FILL: dict[str, int] = {
    "f16": 0x7FF7, "bf16": 0x7FF7,
    "f32": 0x7FF77FF7, "f32_ftz": 0x7FF77FF7, "tf32": 0x7FF77FF7, "tf32_ftz": 0x7FF77FF7,
    "f64": 0x7FF77FF77FF77FF7,
}

# The NaN a float reduction leaves, by element bytes: the canonical NaN whatever the operands' payloads
# (measured on the H200 for f16/bf16 add, min and max and for f32 add).
REDUCE_NAN: dict[int, int] = {2: 0x7FFF, 4: 0x7FFFFFFF}

# Address bits 4-6 XORed with bits 7-9 (CuTe Swizzle<1|2|3, 4, 3>).
SWIZZLE_MASK: dict[str, int] = {"none": 0, "32B": 0x10, "64B": 0x30, "128B": 0x70}

# Element types each cp.reduce.async.bulk.tensor operation accepts: one table, kept with the op.
REDUCE_TYPES = TENSOR_REDUCE_TYPES

# Largest im2col offset per tensor rank (PTX ISA "im2col mode: Bounding Box").
IM2COL_OFFSET_MAX = {3: (1 << 16) - 1, 4: (1 << 8) - 1, 5: (1 << 5) - 1}

_FLOAT_DTYPES = frozenset(NAN_FILL)


# --- swizzle -----------------------------------------------------------------------------------

def _swizzle_mask(mode: str) -> int:
    if mode in SWIZZLE_MASK:
        return SWIZZLE_MASK[mode]
    if mode in SWIZZLE_SPAN:
        raise ValueError(f"swizzle={mode!r} is an sm_100 swizzle atom mode; ptxdsl.reference "
                         f"models only {', '.join(SWIZZLE_MASK)}")
    raise ValueError(f"swizzle={mode!r} is not a swizzle mode; expected one of {', '.join(SWIZZLE_MASK)}")


def swizzle_offset(offset: int, mode: str) -> int:
    """The shared-memory byte offset that byte `offset` of an unswizzled buffer moves to."""
    return offset ^ ((offset >> 3) & _swizzle_mask(mode))


def _as_bytes(buf) -> np.ndarray:
    return np.frombuffer(bytes(buf), dtype=np.uint8)


def _permutation(size: int, mode: str) -> np.ndarray:
    span = SWIZZLE_SPAN[mode] if _swizzle_mask(mode) else 1
    if size % span:
        raise ValueError(f"a {mode} swizzled buffer must be a multiple of {span} bytes, got {size}")
    a = np.arange(size, dtype=np.int64)
    return a ^ ((a >> 3) & SWIZZLE_MASK[mode])


def swizzle_bytes(buf, mode: str) -> np.ndarray:
    """Place an unswizzled buffer the way the TMA swizzle does (a new uint8 array)."""
    src = _as_bytes(buf)
    out = np.empty_like(src)
    out[_permutation(src.size, mode)] = src
    return out


def unswizzle_bytes(buf, mode: str) -> np.ndarray:
    """Undo `swizzle_bytes` (a new uint8 array)."""
    src = _as_bytes(buf)
    return src[_permutation(src.size, mode)]


# --- box geometry ------------------------------------------------------------------------------

def _traversal_strides(spec: TensorMapSpec) -> tuple[int, ...]:
    strides = spec.estrides
    return strides if INNER_ELEMENT_STRIDE_APPLIES else (1, *strides[1:])


def _box_shape(spec: TensorMapSpec) -> tuple[int, ...]:
    """Elements per box dimension, innermost first (im2col: channels, pixels)."""
    if spec.kind == "im2col":
        return (spec.channels_per_pixel, spec.pixels_per_column)
    return tuple(-(-b // s) for b, s in zip(spec.box, _traversal_strides(spec)))


def smem_layout(spec: TensorMapSpec) -> tuple[int, int]:
    """(nbytes, row_bytes) one box occupies in shared memory.

    The box is dense with dimension 0 fastest; under a swizzle mode each row (the innermost extent)
    takes a whole swizzle span even when it is narrower (measured on the H200).
    """
    _swizzle_mask(spec.swizzle)
    dense = _box_shape(spec)[0] * spec.elem_bytes
    span = SWIZZLE_SPAN[spec.swizzle]
    if dense > span > 0:
        raise ValueError(f"inner box extent {dense} B exceeds the {spec.swizzle} swizzle span")
    return spec.smem_bytes, max(dense, span)


def element_offsets(spec: TensorMapSpec, coords) -> tuple[np.ndarray, np.ndarray]:
    """(byte offsets from the tensor's address, inside mask) of a tiled box's elements in box order
    (dimension 0 fastest), the order `smem_elements` returns them in; the offsets of elements outside
    the tensor are clamped to its edge."""
    _check_spec(spec, "tiled")
    offset, inside = _locate(spec, _tile_index(spec, _check_coords(spec, coords)))
    return offset.reshape(-1), inside.reshape(-1)


def smem_elements(spec: TensorMapSpec, smem) -> np.ndarray:
    """The box's elements (k, elem_bytes) in box order, read back from a shared-memory image."""
    return _from_smem(spec, smem)


def tx_bytes(spec: TensorMapSpec) -> int:
    """The mbarrier transaction count of one load: the box's own bytes, without swizzle padding."""
    return spec.box_bytes


# --- global memory -----------------------------------------------------------------------------

def _check_spec(spec: TensorMapSpec, kind: str) -> None:
    if spec.kind != kind:
        other = "load_im2col" if spec.kind == "im2col" else "load_box/store_box/reduce_box"
        raise ValueError(f"kind={spec.kind!r}: this function models {kind} maps; use {other}")
    if spec.interleave != "none":
        raise ValueError(f"interleave={spec.interleave!r} is not modelled; only 'none' is")
    if len(spec.strides) != spec.rank - 1:
        raise ValueError(f"strides has {len(spec.strides)} entries; a rank-{spec.rank} map needs {spec.rank - 1}")
    if len(spec.estrides) != spec.rank or (kind == "tiled" and len(spec.box) != spec.rank):
        raise ValueError(f"box and element_strides need {spec.rank} entries for a rank-{spec.rank} map")
    _swizzle_mask(spec.swizzle)


def _check_coords(spec: TensorMapSpec, coords) -> tuple[int, ...]:
    coords = tuple(int(c) for c in coords)
    if len(coords) != spec.rank:
        raise ValueError(f"coords has {len(coords)} entries; a rank-{spec.rank} map needs {spec.rank}")
    if any(not -(1 << 31) <= c < (1 << 31) for c in coords):
        raise ValueError(f"coords={coords} do not fit in signed 32-bit registers")
    return coords


def _check_box_coords(spec: TensorMapSpec, coords) -> tuple[int, ...]:
    coords = _check_coords(spec, coords)
    if coords[0] * spec.elem_bytes % 16:
        raise ValueError(f"coords[0]={coords[0]}: a tiled box starts at a multiple of 16 bytes in dimension 0 "
                         f"(coords[0] * {spec.elem_bytes} % 16 == 0); another start is an illegal instruction "
                         f"on the H200")
    return coords


def _check_store_coords(spec: TensorMapSpec, coords) -> tuple[int, ...]:
    coords = _check_box_coords(spec, coords)
    if min(coords) < 0:
        raise ValueError(f"coords={coords}: a store or reduction starts at non-negative coordinates "
                         f"(a negative one is an illegal instruction on the H200)")
    return coords


def _check_fill(fill: int) -> None:
    if not 0 <= fill <= 255:
        raise ValueError(f"fill={fill} is not a byte value (0..255)")


def store_bounds(spec: TensorMapSpec) -> tuple[int, ...]:
    """Elements per dimension a store or reduction writes within: the tensor's dims, except that
    dimension 0 reaches the next 16-byte boundary. On the H200 a store or reduction writes the whole
    16-byte chunk that holds the last in-bounds element of a row, so the elements past dims[0] in that
    chunk (row padding, or the bytes after a rank-1 tensor) are written too; the model writes those
    that lie inside the gmem array it is given."""
    e = spec.elem_bytes
    return (-(-spec.dims[0] * e // 16) * 16 // e, *spec.dims[1:])


def _raw(spec: TensorMapSpec, gmem: np.ndarray) -> np.ndarray:
    """The tensor's bytes, checked to hold every element the spec addresses."""
    flat = np.ascontiguousarray(gmem).reshape(-1).view(np.uint8)
    pitches = (spec.elem_bytes, *spec.strides)
    extent = spec.elem_bytes + sum(p * (d - 1) for p, d in zip(pitches, spec.dims))
    if extent > flat.size:
        raise ValueError(f"the map addresses {extent} bytes but gmem holds {flat.size}")
    return flat


def _locate(spec: TensorMapSpec, idx: list[np.ndarray], dims=None) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets and in-bounds mask (within `dims`, default the tensor's) of the elements at
    broadcastable coordinates idx."""
    offset, inside = np.int64(0), np.bool_(True)
    for x, dim, pitch in zip(idx, dims or spec.dims, (spec.elem_bytes, *spec.strides)):
        inside = inside & (x >= 0) & (x < dim)
        offset = offset + np.clip(x, 0, dim - 1) * pitch
    return tuple(np.broadcast_arrays(offset, inside))


def _oob_element(spec: TensorMapSpec) -> np.ndarray:
    if spec.oob_fill == "nan" and spec.dtype in _FLOAT_DTYPES:
        return _as_bytes(NAN_FILL[spec.dtype].to_bytes(spec.elem_bytes, "little"))
    return np.zeros(spec.elem_bytes, np.uint8)


def _read(spec: TensorMapSpec, gmem: np.ndarray, idx: list[np.ndarray]) -> np.ndarray:
    """Element bytes (..., elem_bytes) at coordinates idx; out-of-bounds ones are filled."""
    offset, inside = _locate(spec, idx)
    data = _raw(spec, gmem)[offset[..., None] + np.arange(spec.elem_bytes)]
    return np.where(inside[..., None], data, _oob_element(spec))


def _write(spec: TensorMapSpec, gmem: np.ndarray, idx: list[np.ndarray], elems: np.ndarray,
           combine=None) -> np.ndarray:
    """A copy of gmem with elems (k, elem_bytes) written (or combined) at the coordinates within
    `store_bounds`; tail bytes past the end of gmem itself are left out."""
    out = np.array(gmem, copy=True, order="C")
    flat = _raw(spec, out)
    offset, inside = (a.reshape(-1) for a in _locate(spec, idx, store_bounds(spec)))
    inside = inside & (offset + spec.elem_bytes <= flat.size)
    pos = offset[inside][:, None] + np.arange(spec.elem_bytes)
    new = elems[inside]
    flat[pos] = new if combine is None else combine(flat[pos], new)
    return out


def _tile_index(spec: TensorMapSpec, coords: tuple[int, ...]) -> list[np.ndarray]:
    """Coordinates of every box element, one broadcastable array per dimension (innermost first)."""
    idx = []
    for i, (c, n, s) in enumerate(zip(coords, _box_shape(spec), _traversal_strides(spec))):
        shape = [1] * spec.rank
        shape[spec.rank - 1 - i] = n
        idx.append((c + s * np.arange(n, dtype=np.int64)).reshape(shape))
    return idx


# --- shared memory -----------------------------------------------------------------------------

def _to_smem(spec: TensorMapSpec, elems: np.ndarray, fill: int) -> np.ndarray:
    """Lay box elements out in shared memory: padded rows, then the swizzle."""
    nbytes, row_bytes = smem_layout(spec)
    rows = elems.reshape(nbytes // row_bytes, -1)
    out = np.full((rows.shape[0], row_bytes), fill, np.uint8)
    out[:, :rows.shape[1]] = rows
    return swizzle_bytes(out, spec.swizzle)


def _from_smem(spec: TensorMapSpec, smem) -> np.ndarray:
    """Box elements (k, elem_bytes) in box order, read back from a shared-memory image."""
    nbytes, row_bytes = smem_layout(spec)
    buf = _as_bytes(smem)
    if buf.size < nbytes:
        raise ValueError(f"smem holds {buf.size} bytes; the box occupies {nbytes}")
    rows = unswizzle_bytes(buf[:nbytes], spec.swizzle).reshape(-1, row_bytes)
    return rows[:, :_box_shape(spec)[0] * spec.elem_bytes].reshape(-1, spec.elem_bytes)


# --- tiled loads, stores, reductions -----------------------------------------------------------

def load_box(spec: TensorMapSpec, gmem: np.ndarray, coords, fill: int = 0) -> np.ndarray:
    """The shared-memory bytes a tiled load of the box at `coords` writes (uint8, smem_layout size).

    Dimension i visits coords[i] + k * element_strides[i] for k < ceil(box[i] / element_strides[i]);
    dimension 0 always uses stride 1 (INNER_ELEMENT_STRIDE_APPLIES). Out-of-bounds elements get
    the map's oob_fill. Swizzle padding bytes are `fill`: the hardware leaves them untouched.
    """
    _check_spec(spec, "tiled")
    _check_fill(fill)
    coords = _check_box_coords(spec, coords)
    return _to_smem(spec, _read(spec, gmem, _tile_index(spec, coords)), fill)


def store_box(spec: TensorMapSpec, gmem: np.ndarray, coords, smem) -> np.ndarray:
    """A new global array: gmem after a tiled store of `smem`; elements outside `store_bounds` are
    skipped. The box starts at non-negative coordinates."""
    _check_spec(spec, "tiled")
    coords = _check_store_coords(spec, coords)
    return _write(spec, gmem, _tile_index(spec, coords), _from_smem(spec, smem))


def _canonical_nans(x: np.ndarray) -> np.ndarray:
    """x with every NaN replaced by the element width's canonical NaN (REDUCE_NAN)."""
    bits = np.dtype(f"<u{x.dtype.itemsize}")
    nan = np.isnan(x.astype(np.float32))
    return np.where(nan, bits.type(REDUCE_NAN[x.dtype.itemsize]), x.view(bits)).astype(bits).view(x.dtype)


def _reduce_elements(op: str, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    """old op src elementwise, with the PTX result rules; floats are rounded once per element."""
    dtype = old.dtype
    if op == "add" and dtype.kind in "iu":
        wrap = np.dtype(f"<u{dtype.itemsize}")
        return (old.view(wrap) + src.view(wrap)).view(dtype)
    if op == "add":
        return _canonical_nans((old.astype(np.float32) + src.astype(np.float32)).astype(dtype))
    if op in ("min", "max") and dtype.kind not in "iu":
        a, b = old.astype(np.float32), src.astype(np.float32)
        ordered = (np.minimum if op == "min" else np.maximum)(a, b)
        picked = np.where(np.isnan(a), b, np.where(np.isnan(b), a, ordered))
        negative = (np.signbit(a) | np.signbit(b)) if op == "min" else (np.signbit(a) & np.signbit(b))
        zero = np.where(negative, np.float32(-0.0), np.float32(0.0))
        return _canonical_nans(np.where((a == 0) & (b == 0), zero, picked).astype(dtype))
    if op == "inc":
        return np.where(old >= src, 0, old + 1).astype(dtype)
    if op == "dec":
        return np.where((old == 0) | (old > src), src, old - 1).astype(dtype)
    ufunc = {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return ufunc(old, src)


def reduce_box(spec: TensorMapSpec, gmem: np.ndarray, coords, smem, op: str) -> np.ndarray:
    """A new global array: gmem after cp.reduce.async.bulk.tensor `op` of `smem` at `coords`.

    Float add/min/max compute in float32 and round once to the element type (round to nearest
    even); a NaN result is the canonical NaN (`REDUCE_NAN`), whatever the operands' payloads; min and
    max order -0 below +0 and return the number when one operand is NaN (a signalling one too).
    Subnormals are kept (no flush to zero). inc: old >= src ? 0 : old + 1; dec: old == 0 or
    old > src ? src : old - 1. Elements outside `store_bounds` are skipped; the box starts at
    non-negative coordinates.
    """
    if op not in REDUCE_TYPES:
        raise ValueError(f"op={op!r} is not a reduction; expected one of {', '.join(REDUCE_TYPES)}")
    if spec.dtype not in REDUCE_TYPES[op]:
        raise ValueError(f"op={op!r} is not allowed for dtype={spec.dtype!r}; "
                         f"allowed: {', '.join(sorted(REDUCE_TYPES[op]))}")
    _check_spec(spec, "tiled")
    coords = _check_store_coords(spec, coords)
    dtype = to_numpy(scalar_type(spec.dtype)).newbyteorder("<")

    def combine(old: np.ndarray, src: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            result = _reduce_elements(op, old.copy().view(dtype)[:, 0], src.copy().view(dtype)[:, 0])
        return result.view(np.uint8).reshape(old.shape)

    return _write(spec, gmem, _tile_index(spec, coords), _from_smem(spec, smem), combine)


# --- im2col ------------------------------------------------------------------------------------

def _check_im2col(spec: TensorMapSpec, coords, offsets) -> tuple[tuple[int, ...], tuple[int, ...]]:
    _check_spec(spec, "im2col")
    if not 3 <= spec.rank <= 5:
        raise ValueError(f"an im2col map has rank 3..5, got {spec.rank}")
    spatial = spec.rank - 2
    if len(spec.lower_corner) != spatial or len(spec.upper_corner) != spatial:
        raise ValueError(f"lower_corner and upper_corner need {spatial} entries (W first)")
    offsets = tuple(int(o) for o in offsets)
    if len(offsets) != spatial:
        raise ValueError(f"offsets has {len(offsets)} entries; a rank-{spec.rank} map needs {spatial} (W first)")
    top = IM2COL_OFFSET_MAX[spec.rank]
    if any(not 0 <= o <= top for o in offsets):
        raise ValueError(f"offsets={offsets} outside 0..{top} for a rank-{spec.rank} map")
    return _check_coords(spec, coords), offsets


def _im2col_pixels(spec: TensorMapSpec, coords: tuple[int, ...]) -> np.ndarray:
    """Filter-base positions (W, [H, [D,]] N) of the pixels of one im2col load, in load order.

    Documentation only (PTX ISA "im2col mode"; CUTLASS's corner formulas), to be confirmed on the
    GPU. The bounding box spans lower_corner[k] .. dims[k+1] - 1 + upper_corner[k] in each spatial
    dimension. The walk starts at the instruction's coordinates and steps W by its traversal
    stride; past the box's upper edge it returns to the lower corner and steps the next dimension
    (H, then D), and past the last spatial edge it moves to the next image (N + 1).
    """
    spatial = spec.rank - 2
    lower = spec.lower_corner
    upper = [spec.dims[k + 1] - 1 + spec.upper_corner[k] for k in range(spatial)]
    steps = _traversal_strides(spec)[1:spatial + 1]
    pos = list(coords[1:])
    pixels = []
    for _ in range(spec.pixels_per_column):
        pixels.append(tuple(pos))
        for k in range(spatial):
            pos[k] += steps[k]
            if pos[k] <= upper[k]:
                break
            pos[k] = lower[k]
        else:
            pos[spatial] += 1
    return np.array(pixels, dtype=np.int64).reshape(-1, spatial + 1)


def load_im2col(spec: TensorMapSpec, gmem: np.ndarray, coords, offsets, fill: int = 0) -> np.ndarray:
    """The shared-memory bytes an im2col load writes: pixels_per_column rows of channels_per_pixel.

    coords = (c, w, [h, [d,]] n), offsets = (w, [h, [d]]) as in the PTX operands. Row p holds
    channels c .. c + channels_per_pixel - 1 of the element at pixel p's filter base plus the
    offsets (see `_im2col_pixels` for the walk, which rests on documentation only). Out-of-bounds
    elements get the map's oob_fill; rows are laid out and swizzled as in `load_box`.
    """
    coords, offsets = _check_im2col(spec, coords, offsets)
    _check_fill(fill)
    pixels = _im2col_pixels(spec, coords)
    channels = coords[0] + _traversal_strides(spec)[0] * np.arange(spec.channels_per_pixel, dtype=np.int64)
    idx = [channels[None, :]]
    idx += [pixels[:, k, None] + off for k, off in enumerate(offsets)]
    idx.append(pixels[:, -1, None])
    return _to_smem(spec, _read(spec, gmem, idx), fill)


# --- multicast ---------------------------------------------------------------------------------

def multicast(spec: TensorMapSpec, gmem: np.ndarray, coords, cta_mask: int, cluster_size: int,
              offsets=None, fill: int = 0) -> dict[int, bytes]:
    """{cluster rank: shared-memory bytes} for a .multicast::cluster load: the same box in every
    CTA whose bit is set in the 16-bit cta_mask. `offsets` are the im2col offsets of an im2col map."""
    if not 1 <= cluster_size <= 16:
        raise ValueError(f"cluster_size={cluster_size} outside 1..16")
    if not 0 <= cta_mask < (1 << cluster_size):
        raise ValueError(f"cta_mask={cta_mask:#x} names CTAs outside a cluster of {cluster_size}")
    if spec.kind == "im2col":
        data = load_im2col(spec, gmem, coords, offsets, fill)
    elif offsets is not None:
        raise ValueError("offsets apply only to im2col maps")
    else:
        data = load_box(spec, gmem, coords, fill)
    return {rank: data.tobytes() for rank in range(cluster_size) if cta_mask >> rank & 1}
