"""What a TMA operation leaves in shared and global memory (from `ptxdsl.reference`), and assertions
that compare a kernel's memory with it and say where they differ.

    expected = smem_after_load(spec, host_tensor, (x, y), window=4096, fill=0xA5)
    assert_smem_equal(expected, smem_copied_back, spec)      # rows and 16-byte chunks that differ

Global buffers are numpy arrays (any dtype and shape) whose C-order bytes hold the tensor from byte
`offset` on, addressed with the spec's dims and byte strides; shared memory is a flat uint8 array whose
offset 0 is aligned to the swizzle repeat. Lists are innermost first, as in `TensorMapSpec`. The oracle
functions never change their arguments; each returns a new array.
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..errors import PtxdslError
from ..tensormap import DTYPES, FLOAT_DTYPES, SWIZZLE_SPAN, TensorMapSpec, dtype_name
from ..types import scalar_type, to_numpy

CHUNK = 16                    # bytes: the unit the swizzle moves and a store writes whole
_AS_F32 = {"f32_ftz": "f32", "tf32": "f32", "tf32_ftz": "f32"}


# --- the oracles -------------------------------------------------------------------------------

def _flat(gmem) -> np.ndarray:
    return np.ascontiguousarray(gmem).reshape(-1).view(np.uint8)


def _window(box: np.ndarray, window: int | None, fill: int) -> np.ndarray:
    if window is None:
        return box
    if window < box.size:
        raise ValueError(f"window={window} bytes is smaller than the box's {box.size} bytes in shared memory")
    out = np.full(window, fill, np.uint8)
    out[:box.size] = box
    return out


def smem_after_load(spec: TensorMapSpec, gmem, coords, *, offsets=None, window: int | None = None, fill: int = 0,
                    offset: int = 0) -> np.ndarray:
    """The shared-memory bytes (uint8) after a TMA load of the box at `coords` (im2col maps: with the
    im2col `offsets`) into memory that held `fill` bytes: the box laid out as the hardware does (padded
    rows, swizzle), out-of-bounds elements as the map's oob_fill. `window` (bytes, default the box's own
    size) extends the result with the untouched `fill` bytes after the box."""
    tensor = _flat(gmem)[offset:]
    if spec.kind == "im2col":
        box = ref.load_im2col(spec, tensor, coords, offsets, fill=fill)
    elif offsets is not None:
        raise ValueError("offsets apply only to im2col maps")
    else:
        box = ref.load_box(spec, tensor, coords, fill=fill)
    return _window(box, window, fill)


def smem_after_multicast(spec: TensorMapSpec, gmem, coords, cta_mask: int, cluster_size: int, *, offsets=None,
                         window: int | None = None, fill: int = 0, offset: int = 0) -> dict[int, np.ndarray]:
    """{cluster rank: shared-memory bytes} for every CTA of the cluster after a .multicast::cluster load:
    the box (as `smem_after_load`) in each CTA whose bit is set in cta_mask, and the untouched `fill`
    bytes in the others."""
    got = ref.multicast(spec, _flat(gmem)[offset:], coords, cta_mask, cluster_size, offsets=offsets, fill=fill)
    size = window if window is not None else ref.smem_layout(spec)[0]
    return {r: _window(np.frombuffer(got[r], np.uint8), window, fill) if r in got else np.full(size, fill, np.uint8)
            for r in range(cluster_size)}


def _rewrite(gmem, offset: int, model) -> np.ndarray:
    """gmem with the model's new tensor bytes from `offset` on, as an array of gmem's dtype and shape."""
    arr = np.asarray(gmem)
    if offset == 0:
        return model(arr)
    flat = _flat(arr).copy()
    flat[offset:] = model(flat[offset:])
    return flat.view(arr.dtype).reshape(arr.shape)


def gmem_after_store(spec: TensorMapSpec, gmem, coords, smem, *, offset: int = 0) -> np.ndarray:
    """gmem after a TMA store of the shared-memory image `smem` to the box at `coords`: elements outside
    the tensor are dropped, except that the 16-byte chunk holding each row's last element is written
    whole (`ptxdsl.reference.store_bounds`)."""
    return _rewrite(gmem, offset, lambda t: ref.store_box(spec, t, coords, smem))


def gmem_after_reduce(spec: TensorMapSpec, gmem, coords, smem, op: str, *, offset: int = 0) -> np.ndarray:
    """gmem after cp.reduce.async.bulk.tensor `op` (add, min, max, inc, dec, and, or, xor) of `smem` at
    `coords`, with the PTX result rules of `ptxdsl.reference.reduce_box`."""
    return _rewrite(gmem, offset, lambda t: ref.reduce_box(spec, t, coords, smem, op))


# --- comparing ---------------------------------------------------------------------------------

class MemoryMismatch(AssertionError):
    """Two memory images differ. `chunks` lists the byte offset of each differing 16-byte chunk."""

    def __init__(self, message: str, chunks: list[int]):
        super().__init__(message)
        self.chunks = chunks


def _bytes(buf) -> np.ndarray:
    if isinstance(buf, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(buf), np.uint8)
    return np.ascontiguousarray(buf).reshape(-1).view(np.uint8)


def _bad_chunks(exp: np.ndarray, got: np.ndarray, origin: int = 0) -> np.ndarray:
    """Start offsets of the 16-byte chunks (counted from `origin`) where exp and got differ."""
    bad = np.flatnonzero(exp != got)
    return np.unique((bad - origin) // CHUNK * CHUNK + origin)


def _hex(raw: np.ndarray, esize: int) -> str:
    """Bytes as little-endian words of the element size (the way a debugger prints them)."""
    return " ".join(raw[i:i + esize][::-1].tobytes().hex() for i in range(0, raw.size - esize + 1, esize))


def _values(raw: np.ndarray, dtype: str | None) -> str:
    """The elements' values, for dtypes numpy knows (tf32 and the ftz maps are shown as the f32 they hold)."""
    dtype = _AS_F32.get(dtype, dtype)
    if dtype is None or dtype not in DTYPES or raw.size % DTYPES[dtype][1]:
        return ""
    vals = raw.copy().view(to_numpy(scalar_type(dtype)))
    text = [str(v) if dtype in FLOAT_DTYPES else str(int(v)) for v in vals]
    return "  (" + ", ".join(text) + ")"


def _pair(exp: np.ndarray, got: np.ndarray, lo: int, hi: int, dtype: str | None, esize: int) -> list[str]:
    e, g = exp[lo:hi], got[lo:hi]
    return [f"      expected  {_hex(e, esize)}{_values(e, dtype)}",
            f"      got       {_hex(g, esize)}{_values(g, dtype)}"]


def _box_span(spec: TensorMapSpec, row: int, first: int, count: int) -> str:
    """'box[x=8..11, y=3]': box-relative coordinates, innermost first, of `count` elements of a box row."""
    shape = spec.box_elems if spec.kind == "tiled" else (spec.channels_per_pixel, spec.pixels_per_column)
    names = ("x", "y", "z", "w", "v") if spec.kind == "tiled" else ("channel", "pixel")
    parts = [f"{names[0]}={first}" + (f"..{first + count - 1}" if count > 1 else "")]
    for n, name in zip(shape[1:], names[1:]):
        parts.append(f"{name}={row % n}")
        row //= n
    return "box[" + ", ".join(parts) + "]"


def _smem_place(spec: TensorMapSpec, offset: int, nbytes: int, row_bytes: int) -> str:
    """Where a chunk of a box's shared-memory image lies: its row, and which box elements it holds."""
    if offset >= nbytes:
        return f"offset {offset:#x}: past the box (it ends at {nbytes:#x})"
    logical = ref.swizzle_offset(offset, spec.swizzle)
    row, within = divmod(logical, row_bytes)
    where = f"row {row}, chunk {offset % row_bytes // CHUNK} (offset {offset:#x})"
    if logical != offset:
        where += f", swizzled from chunk {within // CHUNK}"
    dense = (spec.box_elems[0] if spec.kind == "tiled" else spec.channels_per_pixel) * spec.elem_bytes
    if within >= dense:
        return where + ": row padding of the swizzle span"
    first = within // spec.elem_bytes
    count = min(CHUNK, dense - within) // spec.elem_bytes
    return f"{where}: {_box_span(spec, row, first, count)}"


def assert_smem_equal(expected, got, spec: TensorMapSpec | None = None, *, limit: int = 8,
                      name: str = "shared memory") -> None:
    """Raise MemoryMismatch when two shared-memory images differ, naming each differing 16-byte chunk:
    with `spec`, the box row it lies in, the chunk it was swizzled from and the box elements it holds
    (box-relative, innermost first), then the expected and the observed bytes (and values)."""
    exp, obs = _bytes(expected), _bytes(got)
    if exp.size != obs.size:
        raise MemoryMismatch(f"{name}: expected {exp.size} bytes, got {obs.size}", [])
    chunks = _bad_chunks(exp, obs)
    if not chunks.size:
        return
    dtype = spec.dtype if spec is not None else None
    esize = spec.elem_bytes if spec is not None else 4
    lines = [f"{name} differs in {chunks.size} of {-(-exp.size // CHUNK)} 16-byte chunks "
             f"({int((exp != obs).sum())} bytes)"]
    if spec is not None:
        nbytes, row_bytes = ref.smem_layout(spec)
        span = SWIZZLE_SPAN.get(spec.swizzle, 0)
        shape = spec.box_elems if spec.kind == "tiled" else (spec.channels_per_pixel, spec.pixels_per_column)
        lines.append(f"  box {spec.dtype} {'x'.join(map(str, shape))} (innermost first) in {nbytes} bytes of "
                     f"{row_bytes}-byte rows" + (f"; {spec.swizzle} swizzle: chunk c of 128-byte line l is stored "
                                                 f"at chunk c ^ (l % {span // CHUNK})" if span else ""))
    for c in chunks[:limit]:
        c = int(c)
        place = _smem_place(spec, c, nbytes, row_bytes) if spec is not None else f"offset {c:#x}"
        lines.append(f"  {place}")
        lines += _pair(exp, obs, c, min(c + CHUNK, exp.size), dtype, esize)
    if chunks.size > limit:
        lines.append(f"  ... and {chunks.size - limit} more chunks (offsets {int(chunks[limit]):#x}..{int(chunks[-1]):#x})")
    raise MemoryMismatch("\n".join(lines), [int(c) for c in chunks])


def _extent(spec: TensorMapSpec) -> int:
    pitches = (spec.elem_bytes, *spec.strides)
    return spec.elem_bytes + sum(p * (d - 1) for p, d in zip(pitches, spec.dims))


def _gmem_place(spec: TensorMapSpec | None, shape, itemsize: int, rel: int) -> str:
    """Where byte `rel` of the tensor lies: its numpy index (outermost first), or the padding around it."""
    if spec is None:
        index = np.unravel_index(rel // itemsize, shape) if shape else ()
        return f"offset {rel:#x}: element [{', '.join(str(int(i)) for i in index)}]"
    if rel < 0:
        return f"{-rel} bytes before the tensor"
    if rel >= _extent(spec):
        return f"offset {rel:#x}: after the tensor's last element"
    rem, idx = rel, []
    for pitch in reversed(spec.strides):
        idx.append(rem // pitch)
        rem %= pitch
    first = rem // spec.elem_bytes
    count = max(1, CHUNK // spec.elem_bytes)
    outer = ", ".join(str(i) for i in idx)
    inner = f"{first}:{first + count}" if count > 1 else str(first)
    text = f"offset {rel:#x}: tensor[{outer + ', ' if outer else ''}{inner}]"
    if any(i >= d for i, d in zip(reversed(idx), spec.dims[1:])) or first >= spec.dims[0]:
        text += " (padding between rows, outside the tensor)"
    elif first + count > spec.dims[0]:
        text += f" (reaches past dims[0]={spec.dims[0]} into the row's padding)"
    return text


def assert_global_equal(expected, got, spec: TensorMapSpec | None = None, *, offset: int = 0, limit: int = 8,
                        name: str = "global memory") -> None:
    """Raise MemoryMismatch when two global buffers differ, naming each differing 16-byte chunk of the
    tensor: with `spec` (the tensor starting at byte `offset` of the buffer), its numpy index (outermost
    first) or the row padding or guard it lies in; then the expected and the observed bytes (and values)."""
    exp_arr = np.asarray(expected)
    exp, obs = _bytes(expected), _bytes(got)
    if exp.size != obs.size:
        raise MemoryMismatch(f"{name}: expected {exp.size} bytes, got {obs.size}", [])
    chunks = _bad_chunks(exp, obs, offset % CHUNK)
    if not chunks.size:
        return
    dtype = spec.dtype if spec is not None else _dtype_name(exp_arr.dtype)
    esize = spec.elem_bytes if spec is not None else max(1, exp_arr.dtype.itemsize)
    lines = [f"{name} differs in {chunks.size} 16-byte chunks ({int((exp != obs).sum())} of {exp.size} bytes)"]
    if spec is not None:
        lines[0] += (f"; tensor {spec.dtype} dims {spec.dims} (innermost first), row strides {spec.strides} bytes, "
                     f"from byte {offset} of the buffer")
    for c in chunks[:limit]:
        c = max(int(c), 0)
        lines.append("  " + _gmem_place(spec, exp_arr.shape, exp_arr.dtype.itemsize, c - offset))
        lines += _pair(exp, obs, c, min(c + CHUNK, exp.size), dtype, esize)
    if chunks.size > limit:
        lines.append(f"  ... and {chunks.size - limit} more chunks")
    raise MemoryMismatch("\n".join(lines), [int(c) for c in chunks])


def _dtype_name(dtype) -> str | None:
    """The tensor-map dtype name of a numpy dtype, or None when it has none (the diff then shows hex only)."""
    try:
        return dtype_name(dtype)
    except PtxdslError:
        return None
