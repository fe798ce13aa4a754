"""CUDA devices and their primary contexts (cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent)."""
from __future__ import annotations

import functools

from cuda.bindings import driver

from ..errors import CudaError
from .driver import call, driver_available, unavailable_reason

_ATTR = driver.CUdevice_attribute
_devices: dict[int, "Device"] = {}


def _require_driver() -> None:
    if not driver_available():
        raise CudaError(f"no usable CUDA device: {unavailable_reason()}", rule="cuda.unavailable")


class Device:
    """One GPU with its retained primary context; Device(n) is the same object for the same ordinal."""

    ordinal: int
    handle: driver.CUdevice
    context: driver.CUcontext

    def __new__(cls, ordinal: int = 0) -> "Device":
        if ordinal in _devices:
            dev = _devices[ordinal]
            dev.set_current()
            return dev
        _require_driver()
        count = call(driver.cuDeviceGetCount)
        if not 0 <= ordinal < count:
            raise CudaError(f"ordinal={ordinal} breaks 'a device ordinal is 0..{count - 1}'", rule="cuda.ordinal")
        dev = super().__new__(cls)
        dev.ordinal = ordinal
        dev.handle = call(driver.cuDeviceGet, ordinal)
        dev.context = call(driver.cuDevicePrimaryCtxRetain, dev.handle)
        _devices[ordinal] = dev
        dev.set_current()
        return dev

    def __repr__(self) -> str:
        major, minor = self.compute_capability
        return f"<Device {self.ordinal}: {self.name}, sm_{major}{minor}>"

    def set_current(self) -> None:
        """Make this device's primary context current on the calling thread (cuCtxSetCurrent)."""
        call(driver.cuCtxSetCurrent, self.context)

    def attribute(self, attr: driver.CUdevice_attribute) -> int:
        """cuDeviceGetAttribute."""
        return call(driver.cuDeviceGetAttribute, attr, self.handle)

    @functools.cached_property
    def name(self) -> str:
        return call(driver.cuDeviceGetName, 256, self.handle).split(b"\0", 1)[0].decode()

    @functools.cached_property
    def compute_capability(self) -> tuple[int, int]:
        return (self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))

    @functools.cached_property
    def sm_count(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    @functools.cached_property
    def max_shared_per_block_optin(self) -> int:
        """Bytes of shared memory one block may use after opting in (static + dynamic)."""
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

    @functools.cached_property
    def max_threads_per_block(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)

    @functools.cached_property
    def shared_per_sm(self) -> int:
        """Bytes of shared memory one SM has for its blocks (228 KiB on Hopper)."""
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)

    @functools.cached_property
    def reserved_shared_per_block(self) -> int:
        """Bytes of shared memory the system reserves in every block (1 KiB on Hopper)."""
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)

    @functools.cached_property
    def cluster_launch(self) -> bool:
        """Whether kernels can be launched with thread-block clusters."""
        return bool(self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH))

    def synchronize(self) -> None:
        """Wait for all work in this device's primary context (cuCtxSynchronize)."""
        self.set_current()
        call(driver.cuCtxSynchronize)


_host = None       # the interpreter's CPU device while it is current (ptxdsl.interpret.device)


def set_host_device(device) -> None:
    """Make the interpreter's CPU device current (None: the GPUs again): DeviceArrays then live in host memory."""
    global _host
    _host = device


def host_device():
    """The interpreter's CPU device when it is current (PTXDSL_DEVICE=cpu makes it current when ptxdsl is
    imported), else None."""
    return _host


def current_device() -> Device:
    """The device of the calling thread's current context; device 0 (made current) when there is none. While the
    interpreter's CPU device is current (ptxdsl.interpret), that device."""
    host = host_device()
    if host is not None:
        return host
    _require_driver()
    ctx = call(driver.cuCtxGetCurrent)
    if int(ctx) == 0:
        return Device(0)
    return Device(int(call(driver.cuCtxGetDevice)))
