"""Host data for a tensor map: the bytes a spec addresses, random or given, and a numpy view of them.

    buf = random_tensor(spec, seed=3)            # uint8, tensor_bytes(spec) long
    t = tensor_view(spec, buf)                   # numpy order (outermost first), the spec's dtype
    dev = DeviceArray.to_device(buf); spec = spec.bind(dev.ptr)

A spec's row strides may pad every dimension, so its tensor is not always a plain C array; `tensor_view`
is the strided view numpy slicing works on (`t[y0:y1, x0:x1]` is a box inside the tensor).
"""
from __future__ import annotations

import numpy as np

from ..tensormap import DTYPES, FLOAT_DTYPES, TensorMapSpec
from ..types import scalar_type, to_numpy

VALUES = ("bits", "small", "finite")


def _span(spec: TensorMapSpec) -> int:
    pitches = (spec.elem_bytes, *spec.strides)
    return spec.elem_bytes + sum(p * (d - 1) for p, d in zip(pitches, spec.dims))


def tensor_bytes(spec: TensorMapSpec) -> int:
    """Bytes from the tensor's first element to the end of its last one, rounded up to 16."""
    return -(-_span(spec) // 16) * 16


def random_values(rng, dtype: str, n: int, how: str = "bits") -> np.ndarray:
    """n elements of `dtype` as bytes (uint8), as `how` names them: "bits" (raw random bits: NaNs and
    infinities included in a float type), "small" (small integers: -4..4 for signed and float types, 0..8 for
    unsigned; floats get signed zeros) or "finite" (finite floats of mixed magnitude)."""
    np_dtype = to_numpy(scalar_type(dtype))
    esize = DTYPES[dtype][1]
    if how == "bits":
        return rng.integers(0, 256, n * esize, dtype=np.uint8)
    if how == "small":
        lo = -4 if dtype in FLOAT_DTYPES or dtype.startswith("s") else 0
        vals = rng.integers(lo, lo + 9, n).astype(np.float64 if dtype in FLOAT_DTYPES else np.int64)
        if dtype in FLOAT_DTYPES:
            vals = np.where((vals == 0) & (rng.integers(0, 2, n) == 1), -0.0, vals)
        return vals.astype(np_dtype).view(np.uint8)
    if how == "finite":
        vals = rng.standard_normal(n) * np.exp2(rng.integers(-8, 9, n))
        return vals.astype(np.float32).astype(np_dtype).view(np.uint8)
    raise ValueError(f"values={how!r}: expected one of {', '.join(VALUES)}")


def random_tensor(spec: TensorMapSpec, seed: int = 0, values: str = "bits") -> np.ndarray:
    """tensor_bytes(spec) random bytes (uint8) holding the tensor, padding included, drawn from `seed`;
    `values` is "bits" (raw random bits, the default), "small" (small integers) or "finite" (finite floats of
    mixed magnitude), as `random_values` says."""
    n = tensor_bytes(spec) // spec.elem_bytes
    return random_values(np.random.default_rng(seed), spec.dtype, n, values)


def tensor_view(spec: TensorMapSpec, buf) -> np.ndarray:
    """A numpy view (outermost first, the spec's dtype) of the tensor whose bytes start at buf's first
    byte (a read-only view: write through buf)."""
    raw = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    if raw.size < _span(spec):
        raise ValueError(f"buf holds {raw.size} bytes; the tensor spans {_span(spec)}")
    typed = raw[:raw.size // spec.elem_bytes * spec.elem_bytes].view(to_numpy(scalar_type(spec.dtype)))
    return np.lib.stride_tricks.as_strided(typed, shape=tuple(reversed(spec.dims)),
                                           strides=tuple(reversed((spec.elem_bytes, *spec.strides))),
                                           writeable=False)
