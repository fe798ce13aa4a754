"""Kernel launches (cuLaunchKernel, or cuLaunchKernelEx for clusters), checked before the driver sees them."""
from __future__ import annotations

import ctypes
import math
from numbers import Integral, Real

import numpy as np
from cuda.bindings import driver

from ..errors import LaunchError, SourceLoc
from ..tensormap import TensorMapSpec
from ..types import to_numpy
from .driver import call
from .memory import DeviceArray
from .module import Function
from .tensormap import encode

# Per-dimension launch limits of compute capability 9.x/10.x devices.
DIM_MAX = {"grid": (2**31 - 1, 65535, 65535), "block": (1024, 1024, 64), "cluster": (16, 16, 16)}
MAX_BLOCK_THREADS = 1024
PORTABLE_CLUSTER = 8
NON_PORTABLE_CLUSTER = 16
DEFAULT_SHARED_LIMIT = 48 * 1024       # static + dynamic bytes a kernel gets without opting in
_INT_CTYPES = {8: (ctypes.c_uint8, ctypes.c_int8), 16: (ctypes.c_uint16, ctypes.c_int16),
               32: (ctypes.c_uint32, ctypes.c_int32), 64: (ctypes.c_uint64, ctypes.c_int64)}


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return f"<numpy array {value.shape} {value.dtype}>"
    if callable(getattr(value, "data_ptr", None)) and hasattr(value, "device"):
        return f"<tensor {tuple(value.shape)} {value.dtype} on {value.device}>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Arg:
    """One argument being packed: builds errors that name the kernel, the parameter and the value."""

    def __init__(self, function: Function, index: int, param, value):
        self.function, self.index, self.param, self.value = function, index, param, value

    def error(self, text: str, rule: str) -> LaunchError:
        p = self.param
        typed = p.kind if p.type is None else f"{p.kind} .{p.type}"
        return LaunchError(f"kernel {self.function.name!r} argument {self.index} ({p.name}: {typed}) = "
                           f"{_show(self.value)} breaks '{text}'", rule=f"launch.{rule}")

    def pack(self) -> tuple[object, object]:
        """(value, ctypes type or None) as cuLaunchKernel's kernelParams tuple wants them."""
        kind = self.param.kind
        if kind == "scalar":
            return self._scalar()
        if kind == "ptr":
            return self._ptr()
        if kind == "tensormap":
            return self._tensormap()
        raise self.error("a parameter kind is scalar, ptr or tensormap", "param-kind")

    def _scalar(self):
        t, v = self.param.type, self.value
        if t.kind == "f":
            if not isinstance(v, Real) or isinstance(v, bool):
                raise self.error(f"a .{t.name} argument is a real number", "arg-type")
            if t.bits == 16:
                return ctypes.c_uint16(int(np.array(v, to_numpy(t)).view(np.uint16))), ctypes.c_uint16
            c = ctypes.c_float if t.bits == 32 else ctypes.c_double
            return c(float(v)), c
        if t.kind not in ("u", "s", "b") or t.bits not in _INT_CTYPES:
            raise self.error(f"a kernel parameter type is an integer or float type, not .{t.name}", "param-type")
        if not isinstance(v, Integral):
            raise self.error(f"a .{t.name} argument is an integer", "arg-type")
        v, n = int(v), t.bits
        lo = -(2 ** (n - 1)) if t.kind in ("s", "b") else 0
        hi = 2 ** (n - 1) - 1 if t.kind == "s" else 2**n - 1
        if not lo <= v <= hi:
            raise self.error(f"a .{t.name} argument is {lo}..{hi}", "arg-range")
        unsigned, signed = _INT_CTYPES[n]
        c = signed if t.kind == "s" else unsigned
        return c(v % 2**n if c is unsigned else v), c

    def _ptr(self):
        v = self.value
        if isinstance(v, DeviceArray):
            if v.freed:
                raise self.error("a pointer argument is a live DeviceArray (this one was freed)", "arg-freed")
            address = v.ptr
        elif isinstance(v, np.ndarray):
            raise self.error("a pointer argument is device memory; copy host arrays with to_device()", "arg-type")
        elif callable(getattr(v, "data_ptr", None)):          # a torch tensor (bf16 has no CAI there)
            if getattr(v, "is_cuda", True) is False:
                raise self.error("a pointer argument is device memory (tensor.cuda())", "arg-host-tensor")
            address = int(v.data_ptr())
        elif hasattr(v, "__cuda_array_interface__"):
            address = v.__cuda_array_interface__["data"][0]
        elif isinstance(v, Integral) and not isinstance(v, bool) and 0 <= v < 2**64:
            address = int(v)
        else:
            raise self.error("a pointer argument is a DeviceArray, a torch tensor, a __cuda_array_interface__ "
                             "object or a 64-bit address", "arg-type")
        return ctypes.c_void_p(address), ctypes.c_void_p

    def _tensormap(self):
        v = self.value
        if isinstance(v, driver.CUtensorMap):
            return v, None
        if isinstance(v, TensorMapSpec):
            if not v.global_address:
                raise self.error("a TensorMapSpec argument has a global address (from_array(device_array) "
                                 "or spec.bind(ptr))", "arg-unbound-tensormap")
            return encode(v, self.function.device), None
        raise self.error("a tensormap argument is a CUtensorMap or a TensorMapSpec", "arg-type")


def _dims(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, Integral) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, Integral) for d in dims):
        raise LaunchError(f"{what}={value!r} breaks '{what} is an int or 1 to 3 ints (x, y, z)'",
                          rule=f"launch.{what}-shape")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, d, top in zip("xyz", dims, DIM_MAX[what]):
        if not 1 <= d <= top:
            raise LaunchError(f"{what}.{axis}={d} breaks '{what}.{axis} is 1..{top}'", rule=f"launch.{what}-range")
    return dims


def _check_block(function: Function, block: tuple[int, int, int]) -> None:
    threads = math.prod(block)
    limit = min(MAX_BLOCK_THREADS, function.max_threads_per_block)
    if threads > limit:
        raise LaunchError(f"block={block} ({threads} threads) breaks 'a block of kernel {function.name!r} has at "
                          f"most {limit} threads'", rule="launch.block-threads")


def _check_shared(function: Function, shared_bytes) -> None:
    """Fit shared_bytes under the device's opt-in limit, raising the kernel's dynamic limit when needed."""
    if not isinstance(shared_bytes, Integral) or shared_bytes < 0:
        raise LaunchError(f"shared_bytes={shared_bytes!r} breaks 'shared_bytes is a byte count >= 0'",
                          rule="launch.shared-bytes")
    device = function.device
    static, optin = function.static_shared_bytes, device.max_shared_per_block_optin
    if shared_bytes + static > optin:
        raise LaunchError(f"shared_bytes={shared_bytes} breaks 'dynamic + static ({static}) shared memory is at "
                          f"most {optin} bytes per block on {device.name}'", rule="launch.shared-bytes")
    if shared_bytes + static > DEFAULT_SHARED_LIMIT and shared_bytes > function.max_dynamic_shared:
        function.set_max_dynamic_shared(shared_bytes)


def _check_cluster(function: Function, grid, cluster) -> None:
    device = function.device
    if not device.cluster_launch:
        raise LaunchError(f"cluster={cluster} breaks 'clusters need a device with cluster launch "
                          f"({device.name} has none)'", rule="launch.cluster-support")
    size = math.prod(cluster)
    limit = NON_PORTABLE_CLUSTER if function.non_portable_cluster_size_allowed else PORTABLE_CLUSTER
    if size > limit:
        hint = "" if limit == NON_PORTABLE_CLUSTER else " unless set_non_portable_cluster_size_allowed()"
        raise LaunchError(f"cluster={cluster} ({size} CTAs) breaks 'a cluster has at most {limit} CTAs{hint}'",
                          rule="launch.cluster-size")
    for axis, g, c in zip("xyz", grid, cluster):
        if g % c:
            raise LaunchError(f"grid.{axis}={g} breaks 'the grid (in CTAs) is a multiple of cluster.{axis}={c}'",
                              rule="launch.cluster-grid")


def max_active_clusters(function: Function, *, grid, block, cluster, shared_bytes: int = 0) -> int:
    """How many clusters of this shape the device can run at once with this kernel, block and dynamic shared
    memory (cuOccupancyMaxActiveClusters); 0 means it cannot schedule even one. A non-portable shape (more
    than 8 CTAs) needs set_non_portable_cluster_size_allowed() first."""
    grid, block, cluster = _dims(grid, "grid"), _dims(block, "block"), _dims(cluster, "cluster")
    config = _cluster_config(grid, block, int(shared_bytes), _stream(None), cluster)
    function.device.set_current()
    return int(call(driver.cuOccupancyMaxActiveClusters, function.handle, config))


def _check_cluster_fits(function: Function, grid, block, cluster, shared_bytes) -> None:
    """A non-portable cluster the device cannot co-schedule is a LaunchError, not a hung or failed launch."""
    if math.prod(cluster) <= PORTABLE_CLUSTER:
        return
    n = max_active_clusters(function, grid=grid, block=block, cluster=cluster, shared_bytes=shared_bytes)
    if n < 1:
        raise LaunchError(f"cluster={cluster} breaks 'the device can co-schedule one cluster of "
                          f"{math.prod(cluster)} CTAs of kernel {function.name!r} with block={block} and "
                          f"{shared_bytes} bytes of dynamic shared memory' (cuOccupancyMaxActiveClusters: 0)",
                          rule="launch.cluster-occupancy")


def _stream(stream) -> driver.CUstream:
    """A CUstream from None (the default stream), a CUstream, an int handle or a __cuda_stream__ object."""
    if stream is None:
        return driver.CUstream(0)
    if isinstance(stream, driver.CUstream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return driver.CUstream(stream.__cuda_stream__()[1])
    return driver.CUstream(int(stream))


def _cluster_config(grid, block, shared_bytes, stream, cluster) -> driver.CUlaunchConfig:
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_bytes
    config.hStream = stream
    config.attrs = [attr]
    config.numAttrs = 1
    return config


def _prepare(function: Function, params, args, grid, block, shared_bytes, cluster):
    """Every check launch() makes before the driver sees the call; returns the packed arguments and dims."""
    params, args = tuple(params), tuple(args)
    if len(args) != len(params):
        names = ", ".join(p.name for p in params) or "none"
        raise LaunchError(f"len(args)={len(args)} breaks 'kernel {function.name!r} takes {len(params)} "
                          f"arguments ({names})'", rule="launch.arg-count")
    packed = [_Arg(function, i, p, a).pack() for i, (p, a) in enumerate(zip(params, args))]
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    _check_block(function, block)
    _check_shared(function, shared_bytes)
    if cluster is not None:
        cluster = _dims(cluster, "cluster")
        _check_cluster(function, grid, cluster)
        _check_cluster_fits(function, grid, block, cluster, int(shared_bytes))
    return packed, grid, block, cluster


def launch(function: Function, params, args, *, grid, block, shared_bytes: int = 0, cluster=None,
           stream=None, sync: bool = False) -> None:
    """Check and pack the arguments against `params`, check the configuration, then launch.

    `grid` counts CTAs (also with a cluster); `sync=True` waits for the kernel and raises its errors.
    A LaunchError names the caller's line.
    """
    try:
        packed, grid, block, cluster = _prepare(function, params, args, grid, block, shared_bytes, cluster)
    except LaunchError as e:
        raise e.at(SourceLoc.caller())
    kernel_params = (tuple(v for v, _ in packed), tuple(t for _, t in packed)) if packed else 0
    hstream = _stream(stream)
    function.device.set_current()
    if cluster is None:
        call(driver.cuLaunchKernel, function.handle, *grid, *block, int(shared_bytes), hstream, kernel_params, 0)
    else:
        config = _cluster_config(grid, block, int(shared_bytes), hstream, cluster)
        call(driver.cuLaunchKernelEx, config, function.handle, kernel_params, 0)
    if sync:
        function.device.synchronize()
