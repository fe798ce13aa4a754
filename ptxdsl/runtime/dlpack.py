"""DLPack, both ways, with ctypes: read the tensor behind a `__dlpack__` capsule (address, device, shape, strides,
element type) without consuming it, and export a device buffer as a capsule.

cuda.core's StridedMemoryView reads DLPack too, but (cuda-core 1.2.2) it refuses the fp8 type codes and cannot
export bf16 or fp8, which are the element types TMA kernels move most; so the few structures of dlpack.h are
spelled here. Reading never renames the capsule: the producer's capsule destructor frees the tensor when the
capsule goes, as the protocol says for an unconsumed capsule.
"""
from __future__ import annotations

import ctypes

# DLDeviceType
CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}
DEVICE_ACCESSIBLE = frozenset({CUDA, CUDA_HOST, CUDA_MANAGED})    # memory a CUDA kernel can address

# DLDataTypeCode -> element type name (numpy / ml_dtypes / torch spelling), keyed by (code, bits).
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6
DTYPE_CODES: dict[tuple[int, int], str] = {
    **{(_INT, b): f"int{b}" for b in (8, 16, 32, 64)},
    **{(_UINT, b): f"uint{b}" for b in (8, 16, 32, 64)},
    **{(_FLOAT, b): f"float{b}" for b in (16, 32, 64)},
    (_BFLOAT, 16): "bfloat16", (_COMPLEX, 32): "complex32", (_COMPLEX, 64): "complex64",
    (_COMPLEX, 128): "complex128", (_BOOL, 8): "bool",
    (7, 8): "float8_e3m4", (8, 8): "float8_e4m3", (9, 8): "float8_e4m3b11fnuz", (10, 8): "float8_e4m3fn",
    (11, 8): "float8_e4m3fnuz", (12, 8): "float8_e5m2", (13, 8): "float8_e5m2fnuz", (14, 8): "float8_e8m0fnu",
    (15, 6): "float6_e2m3fn", (16, 6): "float6_e3m2fn", (17, 4): "float4_e2m1fn",
}
NAME_CODES = {name: key for key, name in DTYPE_CODES.items()}

UNVERSIONED, VERSIONED = b"dltensor", b"dltensor_versioned"
VERSION = (1, 1)                        # the newest layout spelled here (flags, sub-byte padding bit)
FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# The capsule API through ctypes. Capsules arrive as Python objects (py_object) when read; the destructor of an
# exported capsule gets a raw pointer (the object is being destroyed: no new references to it).
_api = ctypes.pythonapi
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)(
    ("PyCapsule_New", _api))


class Tensor:
    """What a capsule describes: address (data + byte_offset), device (DLPack type, id), shape, byte strides
    (numpy order), element type name (None for a code not in DTYPE_CODES: `code` says which) and item bytes
    (0 for a sub-byte type)."""

    __slots__ = ("address", "device_type", "device_id", "shape", "strides", "dtype", "itemsize", "code",
                 "read_only")

    def __repr__(self) -> str:
        return (f"<DLPack tensor {self.shape} {self.dtype or self.code} at {self.address:#x} on "
                f"{DEVICE_NAMES.get(self.device_type, self.device_type)}:{self.device_id}>")


def read(capsule) -> Tensor:
    """The tensor a DLPack capsule (versioned or not) holds; ValueError for an object that is not one."""
    if _is_valid(capsule, VERSIONED):
        managed = DLManagedTensorVersioned.from_address(_get_pointer(capsule, VERSIONED))
        if managed.version.major != 1:
            raise ValueError(f"DLPack version {managed.version.major}.{managed.version.minor} (this reader knows 1.x)")
        t, read_only = managed.dl_tensor, bool(managed.flags & FLAG_READ_ONLY)
    elif _is_valid(capsule, UNVERSIONED):
        t, read_only = DLManagedTensor.from_address(_get_pointer(capsule, UNVERSIONED)).dl_tensor, False
    else:
        raise ValueError(f"{capsule!r} is not an unconsumed DLPack capsule ('dltensor' or 'dltensor_versioned')")
    out = Tensor()
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    out.code = (code, bits, lanes)
    out.dtype = DTYPE_CODES.get((code, bits)) if lanes == 1 else None
    out.itemsize = bits * lanes // 8 if bits * lanes % 8 == 0 else 0
    out.address = (t.data or 0) + t.byte_offset
    out.device_type, out.device_id = t.device.device_type, t.device.device_id
    out.shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        out.strides = tuple(t.strides[i] * out.itemsize for i in range(t.ndim))
    else:                                   # NULL strides: compact, row-major
        out.strides, step = [], out.itemsize
        for n in reversed(out.shape):
            out.strides.append(step)
            step *= n
        out.strides = tuple(reversed(out.strides))
    out.read_only = read_only
    return out


# ------------------------------------------------------------------------------------------------- export

_exports: dict[int, tuple] = {}     # address of a managed tensor -> what keeps it and its owner alive


@_DELETER
def _delete(address):
    _exports.pop(address, None)


@_DESTRUCTOR
def _destroy_capsule(capsule):
    """An exported capsule nobody consumed: free its tensor (a consumer renames it and calls the deleter)."""
    for name in (VERSIONED, UNVERSIONED):
        if _raw_is_valid(capsule, name):
            _exports.pop(_raw_get_pointer(capsule, name), None)
            return


def export(owner, address: int, shape, dtype: str, device_id: int, *, versioned: bool,
           device_type: int = CUDA):
    """A new DLPack capsule of a compact row-major tensor at `address` (memory `owner` keeps alive until the
    consumer's deleter runs). `dtype` is a DTYPE_CODES name; KeyError for one DLPack cannot spell."""
    code, bits = NAME_CODES[dtype]
    ndim = len(shape)
    dims = (ctypes.c_int64 * max(ndim, 1))(*shape)
    steps, step = [], 1
    for n in reversed(shape):
        steps.append(step)
        step *= n
    strides = (ctypes.c_int64 * max(ndim, 1))(*reversed(steps))
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(*VERSION)
        name = VERSIONED
    else:
        managed = DLManagedTensor()
        name = UNVERSIONED
    t = managed.dl_tensor
    t.data = address or None
    t.device = DLDevice(device_type, device_id)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))      # spelled out, not NULL
    t.byte_offset = 0
    managed.deleter = _delete
    key = ctypes.addressof(managed)
    _exports[key] = (owner, managed, dims, strides)
    return _new_capsule(key, name, _destroy_capsule)


def exported_count() -> int:
    """How many exported tensors are still held (for tests: a consumed or dropped capsule releases its own)."""
    return len(_exports)
