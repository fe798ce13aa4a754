"""Encode a TensorMapSpec into a 128-byte CUtensorMap (cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col), and
place an encoded map in device memory for kernels that edit it in place (tensormap.replace)."""
from __future__ import annotations

import ctypes

import numpy as np
from cuda.bindings import driver

from ..errors import TensorMapError
from ..tensormap import DTYPES, INTERLEAVE, L2_PROMOTION, OOB_FILL, SWIZZLE, SWIZZLE_MIN_CC, TensorMapSpec
from .device import Device, current_device
from .driver import call
from .memory import DeviceArray

TENSORMAP_BYTES = 128
DEVICE_ALIGN = 128          # what tensormap.cp_fenceproxy / tensormap.replace want of a global map


def encode(spec: TensorMapSpec, device: Device | None = None) -> driver.CUtensorMap:
    """validate() the spec, check the device can encode it, then encode it."""
    spec.validate()
    device = device or current_device()
    need = spec.min_compute_capability
    if device.compute_capability < need:
        what = f"swizzle={spec.swizzle!r}" if spec.swizzle in SWIZZLE_MIN_CC else "a tensor map"
        have = "%d.%d" % device.compute_capability
        raise TensorMapError(f"{what} breaks 'this map needs compute capability >= {need[0]}.{need[1]}' "
                             f"on {device.name} (compute capability {have})",
                             loc=spec.loc, rule="tensormap.compute-capability")
    return encode_raw(spec)


def encode_raw(spec: TensorMapSpec) -> driver.CUtensorMap:
    """Hand the spec's fields to the driver as they are, without validate().

    The driver's rejection raises CudaError; values cuda-bindings cannot pass at all (a list longer than 5,
    a negative size) raise TensorMapError with rule tensormap.binding.
    """
    current_device()
    try:
        return _encode(spec)
    except (ValueError, OverflowError, TypeError) as e:
        raise TensorMapError(f"cuda-bindings refused the fields of {spec!r}: {e}", loc=spec.loc,
                             rule="tensormap.binding") from None


def _encode(spec: TensorMapSpec) -> driver.CUtensorMap:
    # A rank-1 map has no strides, but the driver rejects a NULL stride array: pass one unread entry.
    strides = [driver.cuuint64_t(s) for s in spec.strides] or [driver.cuuint64_t(0)]
    common = (driver.CUtensorMapDataType(DTYPES[spec.dtype][0]), spec.rank, spec.global_address,
              [driver.cuuint64_t(d) for d in spec.dims], strides)
    tail = ([driver.cuuint32_t(e) for e in spec.estrides],
            driver.CUtensorMapInterleave(INTERLEAVE[spec.interleave]),
            driver.CUtensorMapSwizzle(SWIZZLE[spec.swizzle]),
            driver.CUtensorMapL2promotion(L2_PROMOTION[spec.l2_promotion]),
            driver.CUtensorMapFloatOOBfill(OOB_FILL[spec.oob_fill]))
    if spec.kind == "im2col":
        return call(driver.cuTensorMapEncodeIm2col, *common, list(spec.lower_corner), list(spec.upper_corner),
                    spec.channels_per_pixel, spec.pixels_per_column, *tail)
    return call(driver.cuTensorMapEncodeTiled, *common, [driver.cuuint32_t(b) for b in spec.box], *tail)


def tensormap_bytes(tmap: driver.CUtensorMap) -> bytes:
    """The 128 raw bytes of an encoded map (for copying it into device memory)."""
    return ctypes.string_at(tmap.getPtr(), TENSORMAP_BYTES)


def to_device(tmap) -> DeviceArray:
    """A 128-byte, 128-byte-aligned device buffer holding an encoded map (a TensorMapSpec is encoded first):
    the global slot a kernel rewrites with tensormap.replace / tensormap.cp_fenceproxy and then uses as
    `TensorMapRef(generic address)`. Its `.ptr` is also what a `param_ptr` argument takes."""
    from .device import host_device

    cpu = host_device()
    if cpu is not None and isinstance(tmap, TensorMapSpec):    # the interpreter's own 128-byte record of the map
        return DeviceArray.to_device(cpu.tensormap_record(tmap.validate()))
    if isinstance(tmap, TensorMapSpec):
        tmap = encode(tmap)
    if not isinstance(tmap, driver.CUtensorMap):
        raise TensorMapError(f"tmap={tmap!r} breaks 'to_device takes a TensorMapSpec or an encoded CUtensorMap'",
                             rule="tensormap.to-device")
    raw = np.frombuffer(tensormap_bytes(tmap), np.uint8)
    buf = DeviceArray.to_device(raw)
    if buf.ptr % DEVICE_ALIGN:
        raise TensorMapError(f"device buffer {buf.ptr:#x} breaks 'a device tensor map is {DEVICE_ALIGN}-byte "
                             f"aligned'", rule="tensormap.to-device")
    return buf
