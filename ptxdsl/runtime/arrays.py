"""What an array is, read without copying: address, device, shape, byte strides and element type of a DeviceArray,
a torch tensor, a DLPack object (CuPy, JAX, torch, anything with __dlpack__ and __dlpack_device__), a
__cuda_array_interface__ (v3) object or a host numpy array.

`view(obj)` answers for all of them in one shape (View). Element types are named as numpy, ml_dtypes and torch
name them ('bfloat16', 'float8_e4m3fn', 'int32'), whichever library the array came from; the tensor-map data type
of each name is ptxdsl.tensormap's business. torch, CuPy and JAX are never imported here: an array of theirs
arrives with its own methods.
"""
from __future__ import annotations

from numbers import Integral

from . import dlpack

HOST = -1               # View.device of memory only the host can read


class NotAnArray(ValueError):
    """`obj` cannot be read as an array; `rule` is the sentence it breaks (callers raise their own error)."""

    def __init__(self, rule: str, kind: str = "array"):
        super().__init__(rule)
        self.rule = rule
        self.kind = kind            # 'array' (not one), 'host' (host memory), 'dtype' (an element type unread)


class View:
    """One array as the runtime sees it. `device` is the CUDA ordinal, HOST for host-only memory, or None when
    the array does not say (a __cuda_array_interface__ pointer: the driver is asked at launch). `dtype` is an
    element type name or None when the source cannot name it (`dtype_note` says why); `stream` is a
    __cuda_array_interface__ producer stream, if the array names one."""

    __slots__ = ("address", "device", "shape", "strides", "dtype", "itemsize", "stream", "source", "dtype_note")

    def __init__(self, address, device, shape, strides, dtype, itemsize, source, stream=None, dtype_note=""):
        self.address, self.device, self.shape, self.strides = address, device, shape, strides
        self.dtype, self.itemsize, self.source = dtype, itemsize, source
        self.stream, self.dtype_note = stream, dtype_note

    def __repr__(self) -> str:
        where = {HOST: "host", None: "device ?"}.get(self.device, f"device {self.device}")
        return f"<View {self.source} {self.shape} {self.dtype} at {self.address:#x} on {where}>"


def is_torch(obj) -> bool:
    """A torch tensor (or subclass), told by its type's module so torch is never imported to ask."""
    return type(obj).__module__.startswith("torch") and callable(getattr(obj, "data_ptr", None))


def torch_dtype_name(dtype) -> str:
    """'torch.float8_e4m3fn' -> 'float8_e4m3fn' (torch names its types as numpy and ml_dtypes do)."""
    return str(dtype).removeprefix("torch.")


def dtype_name_of(dtype) -> str:
    """The element type name of a numpy / ml_dtypes dtype or scalar type, a torch dtype, or a name."""
    if isinstance(dtype, str):
        return dtype.removeprefix("torch.")
    if type(dtype).__module__.startswith("torch"):
        return torch_dtype_name(dtype)
    import numpy as np

    return np.dtype(dtype).name


def c_strides(shape, itemsize: int) -> tuple[int, ...]:
    """Byte strides of a compact row-major array, numpy order."""
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def view(obj, *, stream: int | None = None) -> View:
    """Read `obj` as an array. `stream` is the consumer stream a DLPack producer orders its work before (its
    `__dlpack__(stream=)`: 1 is the legacy default stream, -1 asks for no ordering); None leaves the producer's
    default. NotAnArray when `obj` is none of the kinds above."""
    from .memory import DeviceArray

    if isinstance(obj, DeviceArray):
        return _device_array(obj)
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "stride", None)):
        return _torch(obj)
    if type(obj).__module__ == "numpy" and hasattr(obj, "__array_interface__"):
        return _numpy(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack(obj, stream)
    cai = _cuda_array_interface(obj)
    if cai is not None:
        return _cai(cai)
    if all(hasattr(obj, a) for a in ("shape", "dtype", "strides")):     # numpy-like: shape, dtype, byte strides
        try:
            name = dtype_name_of(obj.dtype)
            return View(int(getattr(obj, "ptr", 0) or 0), None, tuple(obj.shape), tuple(obj.strides), name,
                        _itemsize(obj.dtype), "array")
        except (TypeError, ValueError) as e:
            raise NotAnArray(f"an array has a shape, a dtype and byte strides ({type(e).__name__}: {e})") from None
    raise NotAnArray("an array is a DeviceArray, a torch tensor, a __dlpack__ object (CuPy, JAX, ...), a "
                     "__cuda_array_interface__ object or a numpy array")


def _itemsize(dtype) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize


def _device_array(arr) -> View:
    if arr.freed:
        raise NotAnArray("a DeviceArray is used only before free()")
    return View(arr.ptr, arr.device.ordinal, arr.shape, arr.strides, arr.dtype.name, arr.dtype.itemsize,
                "DeviceArray")


def _torch(t) -> View:
    if callable(getattr(t, "get_device", None)):
        device = t.get_device()                             # -1 for a CPU tensor
    elif getattr(t, "is_cuda", True) is False:
        device = HOST
    else:
        device = getattr(getattr(t, "device", None), "index", None)
    if device == HOST:
        raise NotAnArray("an array is in device memory (tensor.cuda())", kind="host")
    itemsize, address = t.element_size(), t.data_ptr()
    if isinstance(address, bool) or not isinstance(address, Integral):
        raise NotAnArray(f"a tensor's data_ptr() is an integer address (it returned {address!r:.60})")
    if not isinstance(itemsize, Integral) or isinstance(itemsize, bool) or itemsize < 0:
        raise NotAnArray(f"a tensor's element_size() is a byte count (it returned {itemsize!r:.60})")
    try:
        return View(int(address), device, tuple(t.shape), tuple(s * itemsize for s in t.stride()),
                    torch_dtype_name(t.dtype), itemsize, "torch")
    except (TypeError, ValueError) as e:
        raise NotAnArray(f"a tensor has a shape, strides and a dtype ({type(e).__name__}: {e})") from None


def _numpy(a) -> View:
    """Host memory: shape, dtype and strides are real, the address is not a device one (0, unbound)."""
    return View(0, HOST, tuple(a.shape), tuple(a.strides), a.dtype.name, a.dtype.itemsize, "numpy")


def _dlpack(obj, stream) -> View:
    try:
        device_type, device_id = obj.__dlpack_device__()
    except Exception as e:
        raise NotAnArray(f"__dlpack_device__() answers (device type, id) ({type(e).__name__}: {e})") from None
    if device_type not in dlpack.DEVICE_ACCESSIBLE:
        where = dlpack.DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
        raise NotAnArray(f"an array is in CUDA device, managed or pinned memory, not {where}", kind="host")
    kw = {"stream": stream} if stream is not None and device_type == dlpack.CUDA else {}
    try:
        try:
            capsule = obj.__dlpack__(max_version=dlpack.VERSION, **kw)
        except TypeError:                                   # a producer older than DLPack 1.0's keywords
            capsule = obj.__dlpack__(**kw)
        t = dlpack.read(capsule)
    except Exception as e:
        raise NotAnArray(f"__dlpack__() gives a DLPack capsule ({type(e).__name__}: {e})") from None
    note = "" if t.dtype else f"DLPack type code {t.code} (code, bits, lanes) has no name here"
    device = t.device_id if t.device_type == dlpack.CUDA else None
    return View(t.address, device, t.shape, t.strides, t.dtype, t.itemsize, "dlpack", dtype_note=note)


def _cuda_array_interface(obj):
    try:
        return getattr(obj, "__cuda_array_interface__", None)
    except Exception:           # e.g. a CPU tensor raises AttributeError / RuntimeError from the property
        return None


# __cuda_array_interface__ typestrs that name no single type: torch and ml_dtypes write bfloat16 as '<V2' and
# ml_dtypes most 8-bit floats as '<V1' (numpy has no such types), so the bytes' meaning is lost.
_OPAQUE = "'{t}' is an opaque {n}-byte type (torch and ml_dtypes export bfloat16 and fp8 so): pass the array " \
          "through DLPack (__dlpack__) or a torch tensor, or say its dtype="


def _cai(cai) -> View:
    import numpy as np

    try:
        if cai.get("mask") is not None:
            raise NotAnArray("a __cuda_array_interface__ array has no mask")
        typestr = cai["typestr"]
        dt = np.dtype(typestr)
        shape = tuple(int(n) for n in cai["shape"])
        address = int(cai["data"][0])
        strides = cai.get("strides")
        strides = c_strides(shape, dt.itemsize) if strides is None else tuple(int(s) for s in strides)
        stream = cai.get("stream")
    except NotAnArray:
        raise
    except Exception as e:
        raise NotAnArray(f"a __cuda_array_interface__ has shape, typestr and data=(address, read-only) "
                         f"({type(e).__name__}: {e})") from None
    if dt.kind == "V":
        return View(address, None, shape, strides, None, dt.itemsize, "cuda_array_interface", stream,
                    _OPAQUE.format(t=typestr, n=dt.itemsize))
    return View(address, None, shape, strides, dt.name, dt.itemsize, "cuda_array_interface", stream)
