"""Device buffers: plain cuMemAlloc allocations with a numpy shape and dtype (bf16 and fp8 via ml_dtypes).

A DeviceArray's own operations (to_device, zeros, fill_bytes, copy_from, to_host) are complete when they return;
to_host first waits for everything queued on the device, so it reads what asynchronous launches wrote, whichever
stream they ran on. Other libraries read one in place through DLPack (`torch.from_dlpack(arr)`, bf16 and fp8
included) or `__cuda_array_interface__`.
"""
from __future__ import annotations

import math
import weakref

import numpy as np
from cuda.bindings import driver

from ..errors import CudaError, PtxdslError
from ..types import ALL_TYPES, ScalarType, scalar_type, to_numpy
from . import dlpack
from .device import Device, current_device
from .driver import call


def _np_dtype(dtype) -> np.dtype:
    """numpy dtype of a ScalarType, a PTX type name ('bf16' -> ml_dtypes.bfloat16) or anything numpy reads."""
    if isinstance(dtype, ScalarType) or isinstance(dtype, str) and dtype.lstrip(".") in ALL_TYPES:
        return to_numpy(scalar_type(dtype))
    return np.dtype(dtype)


def _settle() -> None:
    """Wait for the legacy default stream, where cuMemsetD8 and a pageable cuMemcpyHtoD may still be running when
    they return: a launch on a non-blocking stream then sees the bytes."""
    call(driver.cuStreamSynchronize, driver.CUstream(0))


# What cuMemFree answers once the context is gone (a kernel fault leaves it unusable, or the driver shut down): the
# allocation went with it, so there is nothing to free and nothing to report (a finalizer's error would only print).
GONE = frozenset(int(getattr(driver.CUresult, "CUDA_ERROR_" + name)) for name in (
    "ILLEGAL_ADDRESS", "LAUNCH_TIMEOUT", "CONTEXT_IS_DESTROYED", "ASSERT", "HARDWARE_STACK_ERROR",
    "ILLEGAL_INSTRUCTION", "MISALIGNED_ADDRESS", "INVALID_ADDRESS_SPACE", "INVALID_PC", "LAUNCH_FAILED",
    "DEINITIALIZED"))


def _release(device: Device, ptr: int) -> None:
    """cuMemFree, quietly a no-op in a context that a fault or the driver's shutdown has already taken down."""
    try:
        device.set_current()
        call(driver.cuMemFree, ptr)
    except CudaError as e:
        if e.code not in GONE:
            raise


class DeviceArray:
    """A C-contiguous device buffer from cuMemAlloc; freed by free(), `with`, or garbage collection."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.dtype = _np_dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.device = current_device()
        if getattr(self.device, "host", False):         # the interpreter's CPU device: host memory
            self.ptr = self.device.malloc(self.nbytes)
            self._finalizer = weakref.finalize(self, self.device.free, self.ptr)
        else:
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
        if arr.nbytes and getattr(arr.device, "host", False):
            arr.device.htod(arr.ptr, host)
        elif arr.nbytes:
            call(driver.cuMemcpyHtoD, arr.ptr, host.ctypes.data, arr.nbytes)
            _settle()
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
        """A new host array with this buffer's contents: waits for all work queued on the device (cuCtxSynchronize,
        so asynchronous launches on any stream have finished, and their errors raise here), then cuMemcpyDtoH."""
        self._live()
        out = np.empty(self.shape, self.dtype)
        self.device.synchronize()
        if self.nbytes and getattr(self.device, "host", False):
            self.device.dtoh(out, self.ptr)
        elif self.nbytes:
            call(driver.cuMemcpyDtoH, out.ctypes.data, self.ptr, self.nbytes)
        return out

    def copy_from(self, host) -> None:
        """Overwrite this buffer with a host array of the same byte size (cuMemcpyHtoD)."""
        self._live()
        host = np.ascontiguousarray(host)
        if host.nbytes != self.nbytes:
            raise PtxdslError(f"host.nbytes={host.nbytes} breaks 'copy_from needs exactly {self.nbytes} bytes'",
                              rule="memory.size")
        if self.nbytes and getattr(self.device, "host", False):
            self.device.htod(self.ptr, host)
        elif self.nbytes:
            self.device.set_current()
            call(driver.cuMemcpyHtoD, self.ptr, host.ctypes.data, self.nbytes)
            _settle()

    def fill_bytes(self, byte: int) -> None:
        """Set every byte of the buffer to `byte` (cuMemsetD8)."""
        self._live()
        if not 0 <= int(byte) <= 255:
            raise PtxdslError(f"byte={byte} breaks 'a fill byte is 0..255'", rule="memory.fill-byte")
        if self.nbytes and getattr(self.device, "host", False):
            self.device.memset(self.ptr, int(byte), self.nbytes)
        elif self.nbytes:
            self.device.set_current()
            call(driver.cuMemsetD8, self.ptr, int(byte), self.nbytes)
            _settle()

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
        """CAI v3. bfloat16 and the 8-bit floats have no numpy typestr: the typestr is ml_dtypes' ('<V2' for
        bfloat16, as torch writes it too; '<V1' for most fp8 types), and DLPack carries their type. The stream is
        the legacy default stream (1), where this buffer's own copies and fills run."""
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "stream": 1}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.CUDA, self.device.ordinal)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this buffer (no copy): versioned when the consumer's max_version is 1.x or newer.
        `stream` (a consumer stream handle) is made to wait for the legacy default stream first; None, -1, 1
        and 2 need no wait (the legacy and per-thread default streams are ordered with it already)."""
        self._live()
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"dl_device={dl_device!r}: a DeviceArray exports only in place, on "
                              f"{self.__dlpack_device__()}")
        if copy:
            raise BufferError("copy=True: a DeviceArray exports only in place (copy it with to_host())")
        name = self.dtype.name
        if name not in dlpack.NAME_CODES:
            raise BufferError(f"dtype {name} has no DLPack type code")
        if stream is not None and int(stream) not in (-1, 0, 1, 2):
            _order_after_legacy(self.device, int(stream))
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack.export(self, self.ptr, self.shape, name, self.device.ordinal, versioned=versioned)

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
        return f"<DeviceArray {self.shape} {self.dtype.name} at {self.ptr:#x}{state}>"


def _order_after_legacy(device: Device, stream: int) -> None:
    """Make `stream` wait for the work queued so far on the legacy default stream (an event, cuStreamWaitEvent)."""
    device.set_current()
    event = call(driver.cuEventCreate, driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    try:
        call(driver.cuEventRecord, event, driver.CUstream(driver.CU_STREAM_LEGACY))
        call(driver.cuStreamWaitEvent, driver.CUstream(stream), event, 0)
    finally:
        call(driver.cuEventDestroy, event)


empty = DeviceArray.empty
zeros = DeviceArray.zeros
to_device = DeviceArray.to_device
