"""Device buffers: plain cuMemAlloc allocations with a numpy shape and dtype (bf16 via ml_dtypes)."""
from __future__ import annotations

import math
import weakref

import numpy as np
from cuda.bindings import driver

from ..errors import PtxdslError
from ..types import ALL_TYPES, ScalarType, scalar_type, to_numpy
from .device import Device, current_device
from .driver import call


def _np_dtype(dtype) -> np.dtype:
    """numpy dtype of a ScalarType, a PTX type name ('bf16' -> ml_dtypes.bfloat16) or anything numpy reads."""
    if isinstance(dtype, ScalarType) or isinstance(dtype, str) and dtype.lstrip(".") in ALL_TYPES:
        return to_numpy(scalar_type(dtype))
    return np.dtype(dtype)


def _release(device: Device, ptr: int) -> None:
    device.set_current()
    call(driver.cuMemFree, ptr)


class DeviceArray:
    """A C-contiguous device buffer from cuMemAlloc; freed by free(), `with`, or garbage collection."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.dtype = _np_dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.device = current_device()
        self.ptr = int(call(driver.cuMemAlloc, self.nbytes)) if self.nbytes else 0
        self._finalizer = weakref.finalize(self, _release, self.device, self.ptr) if self.ptr else None
        if self._finalizer is not None:
            self._finalizer.atexit = False

    @classmethod
    def empty(cls, shape, dtype) -> "DeviceArray":
        """An uninitialised buffer."""
        return cls(shape, dtype)

    @classmethod
    def zeros(cls, shape, dtype) -> "DeviceArray":
        """A zero-filled buffer (cuMemsetD8)."""
        arr = cls(shape, dtype)
        arr.fill_bytes(0)
        return arr

    @classmethod
    def to_device(cls, host) -> "DeviceArray":
        """A device copy of a host array (cuMemcpyHtoD); non-contiguous input is made C-contiguous first."""
        host = np.ascontiguousarray(host)
        arr = cls(host.shape, host.dtype)
        if arr.nbytes:
            call(driver.cuMemcpyHtoD, arr.ptr, host.ctypes.data, arr.nbytes)
        return arr

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides in numpy order (always C-contiguous)."""
        out, step = [], self.dtype.itemsize
        for n in reversed(self.shape):
            out.append(step)
            step *= n
        return tuple(reversed(out))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def freed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive

    def _live(self) -> None:
        if self.freed:
            raise PtxdslError(f"DeviceArray at {self.ptr:#x} breaks 'a buffer is used only before free()'",
                              rule="memory.use-after-free")

    def to_host(self) -> np.ndarray:
        """A new host array with this buffer's contents (cuMemcpyDtoH, synchronous)."""
        self._live()
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.device.set_current()
            call(driver.cuMemcpyDtoH, out.ctypes.data, self.ptr, self.nbytes)
        return out

    def copy_from(self, host) -> None:
        """Overwrite this buffer with a host array of the same byte size (cuMemcpyHtoD)."""
        self._live()
        host = np.ascontiguousarray(host)
        if host.nbytes != self.nbytes:
            raise PtxdslError(f"host.nbytes={host.nbytes} breaks 'copy_from needs exactly {self.nbytes} bytes'",
                              rule="memory.size")
        if self.nbytes:
            self.device.set_current()
            call(driver.cuMemcpyHtoD, self.ptr, host.ctypes.data, self.nbytes)

    def fill_bytes(self, byte: int) -> None:
        """Set every byte of the buffer to `byte` (cuMemsetD8)."""
        self._live()
        if not 0 <= int(byte) <= 255:
            raise PtxdslError(f"byte={byte} breaks 'a fill byte is 0..255'", rule="memory.fill-byte")
        if self.nbytes:
            self.device.set_current()
            call(driver.cuMemsetD8, self.ptr, int(byte), self.nbytes)

    def free(self) -> None:
        """Release the allocation now (cuMemFree); later calls do nothing."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "DeviceArray":
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "stream": 1}

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
        return f"<DeviceArray {self.shape} {self.dtype.name} at {self.ptr:#x}{state}>"


empty = DeviceArray.empty
zeros = DeviceArray.zeros
to_device = DeviceArray.to_device
