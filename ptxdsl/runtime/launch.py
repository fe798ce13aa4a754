"""Kernel launches (cuLaunchKernel, or cuLaunchKernelEx for clusters), checked before the driver sees them and
planned once per kernel.

A Plan is made once per kernel: one packer per parameter writes its argument into storage the plan owns, and the
driver gets the address of a prebuilt array of pointers to that storage, so a launch runs little Python besides
the driver call. Encoded tensor maps are kept per plan, by spec; the launch configuration is checked once for
each new grid/block/shared/cluster object, not on every launch. Launches are asynchronous: `sync=True` waits for
the kernel (cuStreamSynchronize) and raises its error.

The stream is the caller's: `stream=` (ptxdsl.runtime.stream reads every kind), else torch's current stream on
the device when an argument is a torch tensor, else the plan's default, the legacy default stream. The device
comes from the arguments: each pointer argument must live on the kernel's device.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
import weakref
from numbers import Integral, Real

from cuda.bindings import driver

from .. import log
from ..limits import MAX_BLOCK_THREADS, block_threads
from ..limits import launch_dims as _dims       # the launch limits of compute capability 9.x/10.x devices
from ..errors import CudaError, LaunchError, PtxdslError, SourceLoc
from ..tensormap import TensorMapSpec
from . import arrays
from . import stream as streams
from .driver import call, cuda_error
from .memory import DeviceArray
from .module import Function
from .tensormap import encode

PORTABLE_CLUSTER = 8
NON_PORTABLE_CLUSTER = 16
DEFAULT_SHARED_LIMIT = 48 * 1024       # static + dynamic bytes a kernel gets without opting in
TENSORMAP_CACHE = 256                  # encoded maps a plan keeps (the oldest goes first)
_INT_CTYPES = {8: (ctypes.c_uint8, ctypes.c_int8), 16: (ctypes.c_uint16, ctypes.c_int16),
               32: (ctypes.c_uint32, ctypes.c_int32), 64: (ctypes.c_uint64, ctypes.c_int64)}
_cuLaunchKernel = driver.cuLaunchKernel
_cuLaunchKernelEx = driver.cuLaunchKernelEx
_cuCtxGetCurrent = driver.cuCtxGetCurrent
# What cuLaunchKernel returns when the calling thread's current context is not the kernel's (another one: the
# function handle is foreign there; none: no context). A launch tries first and makes the kernel's context
# current only then, so the common case pays no cuCtxGetCurrent.
_WRONG_CONTEXT = (driver.CUresult.CUDA_ERROR_INVALID_HANDLE, driver.CUresult.CUDA_ERROR_INVALID_CONTEXT)

# Pointer arguments by type, learned on first sight: the kinds a launch reads without asking anything else.
_DEVICE_ARRAY, _TORCH, _INT = 1, 2, 3
_pointer_kinds: dict[type, int] = {}


def _show(value) -> str:
    if type(value).__module__ == "numpy" and hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<numpy array {value.shape} {value.dtype}>"
    if callable(getattr(value, "data_ptr", None)) and hasattr(value, "device"):
        return f"<tensor {tuple(value.shape)} {value.dtype} on {value.device}>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _typed(p) -> str:
    return p.kind if p.type is None else f"{p.kind} .{p.type}"


class Plan:
    """How to launch one kernel, made once: packers, argument storage, the last checked configuration. Calling it
    launches: `plan(*args, grid=, block=, shared_bytes=, cluster=, stream=, sync=)`."""

    def __init__(self, function: Function, params, *, shared_bytes: int = 0, name: str | None = None,
                 check_cluster=None, debug=None, checks=None):
        self.function = function
        self.params = tuple(params)
        self.name = name or function.name
        self.shared_bytes = shared_bytes
        self._check_cluster_launch = check_cluster
        self._debug = debug                     # the KernelInfo of a debug kernel (its watchdog record), else None
        self._launch_checks = checks            # the kernel's ptxdsl.verify.launch.LaunchPlan, if any
        self._checks = None                     # ... when it has checks to run (_bind)
        self._owner = threading.get_ident()
        self._threads = threading.local()
        self._n = len(self.params)
        self._packers = None                    # made with the device facts at the first launch (_bind)
        self._tensormaps: dict = {}
        self._grid_key = self._block_key = self._shared_key = self._cluster_key = _UNSET
        self._kernel = None                     # cuLaunchKernel with the function and configuration bound
        self._cluster_config = None
        self._stream_key = _UNSET
        self._stream = None
        self._torch_handle = None
        self._torch_stream = None
        self._default_stream = driver.CUstream(streams.LEGACY)

    @property
    def device(self):
        return self.function.device

    def _bind(self) -> None:
        """The device facts and the argument storage: kernelParams, an array of pointers into slots this plan
        owns, and one packer per parameter that writes its argument there."""
        device = self.function.device
        self._handle = self.function.handle
        self._ordinal = device.ordinal
        self._context = int(device.context)
        n = self._n
        self._argv = (ctypes.c_void_p * max(n, 1))()
        self._argv_address = ctypes.addressof(self._argv) if n else 0
        self._held: list = [None] * n          # what argv points into for tensor maps: (argument, CUtensorMap)
        self._slots: list = [None] * n
        self._packers = [self._packer(i, p) for i, p in enumerate(self.params)]
        self._bind_checks()

    def _bind_checks(self) -> None:
        """The verifier's launch checks (ptxdsl.verify.check_launch: facts only the arguments decide), when the
        kernel has any and PTXDSL_LAUNCH_CHECKS is not 0. A launch whose scalar and tensor-map arguments that the
        checks read (LaunchPlan.reads), grid, block and cluster equal the last one's (the same map objects) is not
        checked again."""
        plan = self._launch_checks
        if plan is None:
            return
        from ..verify.launch import ENV, HIDDEN

        if os.environ.get(ENV) == "0" or not plan.checks:
            return
        user = [p for p in self.params if p.name != HIDDEN]
        self._check_reads = tuple(i for i in plan.reads if user[i].kind in ("scalar", "tensormap"))
        self._checked = None
        self._checks = plan

    def _check(self, given, grid, block, cluster, shared_bytes) -> None:
        key = (tuple([given[i] for i in self._check_reads]), grid, block, cluster, shared_bytes)
        try:
            if key == self._checked:
                return
        except Exception:           # an argument that does not compare (an array as a scalar): check every time
            key = None
        self._checks.run(given, grid, block, cluster, shared_bytes)
        self._checked = key

    # ------------------------------------------------------------------------------------------- the launch

    def __call__(self, *args, grid, block, shared_bytes=None, cluster=None, stream=None, sync: bool = False):
        """Queue the kernel: pack `args` against its parameters, pick the stream (`stream=`, else torch's current
        stream when an argument is a torch tensor, else the legacy default stream), check a grid, block,
        shared_bytes or cluster object not seen before, and launch. `sync=True` waits for the kernel and raises
        its error. Every error names the caller's line."""
        record = None
        try:
            if threading.get_ident() != self._owner:
                return self._for_this_thread()(*args, grid=grid, block=block, shared_bytes=shared_bytes,
                                               cluster=cluster, stream=stream, sync=sync)
            given = args
            if self._debug is not None:
                record, sync = _watchdog_record(), True
                args = record.with_argument(self._debug, args)
            if len(args) != self._n:
                raise self._count_error(args)
            if shared_bytes is None:
                shared_bytes = self.shared_bytes
            if (grid is not self._grid_key or block is not self._block_key or shared_bytes is not self._shared_key
                    or cluster is not self._cluster_key):
                self._configure(grid, block, shared_bytes, cluster)
            if self._checks is not None:
                self._check(given, grid, block, cluster, shared_bytes)
            torch_seen = cupy_seen = False
            deferred = None
            if self._n:
                for pack, value in zip(self._packers, args):
                    r = pack(value)
                    if r is not None:
                        if r is True:
                            torch_seen = True
                        else:
                            cupy_seen = cupy_seen or getattr(r, "cupy", False)
                            if deferred is None:
                                deferred = [r]
                            else:
                                deferred.append(r)
            if stream is None:
                hstream = (self._torch_current() if torch_seen else self._cupy_current() if cupy_seen
                           else self._default_stream)
            elif stream is self._stream_key:
                hstream = self._stream
            else:
                hstream = self._set_stream(stream)
            if deferred is not None:
                for finish in deferred:
                    finish(hstream)
            if sync and int(_cuCtxGetCurrent()[1]) != self._context:
                self.function.device.set_current()        # before asking the stream whether it is capturing
            if sync and streams.is_capturing(hstream):
                raise LaunchError(f"sync=True breaks 'a launch into a stream being captured in a CUDA graph does "
                                  f"not wait' (kernel {self.name!r}; a debug kernel always waits)",
                                  rule="launch.sync-in-capture")
            err = self._launch(hstream)
            if err and err in _WRONG_CONTEXT and int(_cuCtxGetCurrent()[1]) != self._context:
                self.function.device.set_current()        # another context was current on this thread (or none)
                err = self._launch(hstream)
            if err:
                raise _kernel_error(self.name, cuda_error(err, "cuLaunchKernel" if self._cluster_config is None
                                                          else "cuLaunchKernelEx"))
            if sync:
                try:
                    call(driver.cuStreamSynchronize, hstream)
                except CudaError as e:
                    trap = record.trap(self._debug) if record is not None else None
                    if trap is not None:
                        raise trap from e
                    raise _kernel_error(self.name, e) from None
        except PtxdslError as e:
            raise e.at(SourceLoc.caller())
        finally:
            if record is not None:
                record.free()

    def _launch(self, hstream):
        """cuLaunchKernel (cuLaunchKernelEx for a cluster) with the bound configuration; the CUresult."""
        if self._cluster_config is None:
            return self._kernel(hstream, self._argv_address, 0)[0]
        self._cluster_config.hStream = hstream
        return _cuLaunchKernelEx(self._cluster_config, self._handle, self._argv_address, 0)[0]

    def _for_this_thread(self) -> "Plan":
        """A plan of this thread's own: argument storage is not shared between threads that launch at once."""
        plan = getattr(self._threads, "plan", None)
        if plan is None:
            plan = self._threads.plan = Plan(self.function, self.params, shared_bytes=self.shared_bytes,
                                             name=self.name, check_cluster=self._check_cluster_launch,
                                             debug=self._debug, checks=self._launch_checks)
        return plan

    def _count_error(self, args) -> LaunchError:
        names = ", ".join(p.name for p in self.params) or "none"
        return LaunchError(f"len(args)={len(args)} breaks 'kernel {self.name!r} takes {self._n} arguments "
                           f"({names})'", rule="launch.arg-count")

    def error(self, i: int, value, text: str, rule: str) -> LaunchError:
        """The error for argument i: names the kernel, the parameter, the value and the rule."""
        p = self.params[i]
        return LaunchError(f"kernel {self.name!r} argument {i} ({p.name}: {_typed(p)}) = {_show(value)} breaks "
                           f"'{text}'", rule=f"launch.{rule}")

    # ----------------------------------------------------------------------------------------------- streams

    def _set_stream(self, stream) -> driver.CUstream:
        try:
            h = stream if isinstance(stream, driver.CUstream) else driver.CUstream(streams.handle(stream))
        except streams.BadStream as e:
            raise LaunchError(f"stream={_show(stream)} breaks '{e}'", rule="launch.stream") from None
        self._stream_key, self._stream = stream, h
        return h

    def _cupy_current(self) -> driver.CUstream:
        """CuPy's current stream, as torch's is taken for torch tensors (a launch given CuPy arrays and no
        stream= runs where CuPy's own kernels would)."""
        return driver.CUstream(streams.cupy_current())

    def _torch_current(self) -> driver.CUstream:
        h = streams.torch_current(self._ordinal)
        if h != self._torch_handle:
            self._torch_handle, self._torch_stream = h, driver.CUstream(h)
        return self._torch_stream

    # --------------------------------------------------------------------------------------- configuration

    def _configure(self, grid, block, shared_bytes, cluster) -> None:
        """Check a grid/block/shared/cluster seen for the first time and keep it as the driver wants it (the
        `ptxdsl` logger times it at DEBUG level: once per new configuration, never per launch)."""
        with log.stage("launch", f"{self.name}: grid={grid} block={block} shared_bytes={shared_bytes} "
                                 f"cluster={cluster} checked"):
            if self._packers is None:
                self._bind()
            function = self.function
            g, b = _dims(grid, "grid"), _dims(block, "block")
            if self._check_cluster_launch is not None:
                self._check_cluster_launch(cluster)
            _check_block(function, b)
            function.device.set_current()
            _check_shared(function, shared_bytes)
            config = None
            if cluster is not None:
                c = _dims(cluster, "cluster")
                _check_cluster(function, g, c)
                _check_cluster_fits(function, g, b, c, int(shared_bytes))
                config = _cluster_config(g, b, int(shared_bytes), self._default_stream, c)
            self._kernel = functools.partial(_cuLaunchKernel, self._handle, *g, *b, int(shared_bytes))
            self._cluster_config = config
            self._grid_key, self._block_key, self._shared_key, self._cluster_key = grid, block, shared_bytes, cluster

    # --------------------------------------------------------------------------------------------- packers

    def _packer(self, i: int, p):
        """The function that writes argument i into this plan's storage (and argv's entry for it)."""
        kind = p.kind
        if kind == "scalar":
            return self._scalar_packer(i, p)
        if kind == "ptr":
            return self._pointer_packer(i)
        if kind == "tensormap":
            return self._tensormap_packer(i)

        def bad(value):
            raise self.error(i, value, "a parameter kind is scalar, ptr or tensormap", "param-kind")
        return bad

    def _store(self, i: int, ctype):
        slot = ctype()
        self._slots[i] = slot
        self._argv[i] = ctypes.addressof(slot)
        return slot

    def _scalar_packer(self, i: int, p):
        t = p.type
        if t.kind == "f" and t.bits == 16:
            slot = self._store(i, ctypes.c_uint16)

            def half(value):
                slot.value = self._half_bits(i, t, value)
            return half
        if t.kind == "f":
            slot = self._store(i, ctypes.c_float if t.bits == 32 else ctypes.c_double)

            def real(value):
                if type(value) is float:
                    slot.value = value
                elif isinstance(value, Real) and not isinstance(value, bool):
                    slot.value = float(value)
                else:
                    raise self.error(i, value, f"a .{t.name} argument is a real number", "arg-type")
            return real
        if t.kind not in ("u", "s", "b") or t.bits not in _INT_CTYPES:
            def unsupported(value):
                raise self.error(i, value, f"a kernel parameter type is an integer or float type, not .{t.name}",
                                 "param-type")
            return unsupported
        n = t.bits
        lo = -(2 ** (n - 1)) if t.kind in ("s", "b") else 0
        hi = 2 ** (n - 1) - 1 if t.kind == "s" else 2**n - 1
        unsigned, signed = _INT_CTYPES[n]
        slot = self._store(i, signed if t.kind == "s" else unsigned)     # a negative .b value wraps, as intended

        def integer(value):
            if type(value) is int and lo <= value <= hi:
                slot.value = value
                return
            if not isinstance(value, Integral):
                raise self.error(i, value, f"a .{t.name} argument is an integer", "arg-type")
            if not lo <= int(value) <= hi:
                raise self.error(i, value, f"a .{t.name} argument is {lo}..{hi}", "arg-range")
            slot.value = int(value)
        return integer

    def _half_bits(self, i: int, t, value) -> int:
        if not isinstance(value, Real) or isinstance(value, bool):
            raise self.error(i, value, f"a .{t.name} argument is a real number", "arg-type")
        import numpy as np

        from ..types import to_numpy

        return int(np.array(value, to_numpy(t)).view(np.uint16))

    def _pointer_packer(self, i: int):
        slot = self._store(i, ctypes.c_uint64)
        ordinal = self._ordinal
        kinds = _pointer_kinds

        def pointer(value):
            kind = kinds.get(type(value))
            if kind == _TORCH:
                device = value.get_device()
                if device != ordinal:
                    raise self._device_error(i, value, device)
                slot.value = value.data_ptr()
                return True
            if kind == _DEVICE_ARRAY:
                if value.freed:
                    raise self.error(i, value, "a pointer argument is a live DeviceArray (this one was freed)",
                                     "arg-freed")
                if value.device.ordinal != ordinal:
                    raise self._device_error(i, value, value.device.ordinal)
                slot.value = value.ptr
                return None
            if kind == _INT:
                if 0 <= value < 2**64:
                    slot.value = int(value)
                    return None
                raise self.error(i, value, "a pointer argument is a 64-bit address", "arg-type")
            return self._pointer_first_sight(i, value, slot, pointer)
        return pointer

    def _pointer_first_sight(self, i: int, value, slot, pointer):
        """Learn the kind of a pointer argument's type, or read an array protocol (after the stream is known)."""
        t = type(value)
        if issubclass(t, DeviceArray):
            _pointer_kinds[t] = _DEVICE_ARRAY
            return pointer(value)
        if arrays.is_torch(value) and callable(getattr(value, "get_device", None)):
            _pointer_kinds[t] = _TORCH
            return pointer(value)
        if issubclass(t, Integral) and not issubclass(t, bool):
            _pointer_kinds[t] = _INT
            return pointer(value)
        if t.__module__ == "numpy" and hasattr(value, "__array_interface__"):
            raise self.error(i, value, "a pointer argument is device memory; copy host arrays with to_device()",
                             "arg-type")
        if (callable(getattr(value, "data_ptr", None)) or hasattr(value, "__dlpack__")
                or arrays._cuda_array_interface(value) is not None):
            def finish(hstream):
                self._protocol_pointer(i, value, slot, hstream)
            finish.cupy = streams.is_cupy(value)        # the launch then defaults to CuPy's current stream
            return finish
        raise self.error(i, value, "a pointer argument is a DeviceArray, a torch tensor, a __dlpack__ or "
                         "__cuda_array_interface__ object, or a 64-bit address", "arg-type")

    def _protocol_pointer(self, i: int, value, slot, hstream) -> None:
        """A DLPack or __cuda_array_interface__ argument, read once the launch's stream is known: DLPack producers
        order their work before it (`__dlpack__(stream=)`), a CAI producer stream is waited for here."""
        h = int(hstream)
        try:
            v = arrays.view(value, stream=h or 1)            # DLPack spells the legacy default stream 1
        except arrays.NotAnArray as e:
            if e.kind == "host":
                raise self.error(i, value, f"a pointer argument is device memory: {e.rule}", "arg-host-tensor")
            raise self.error(i, value, f"a pointer argument is device memory: {e.rule}", "arg-type") from None
        device = v.device
        if device is None and v.source == "cuda_array_interface":
            device = self._pointer_device(i, value, v.address)
        if device is not None and device != self._ordinal:
            raise self._device_error(i, value, device)
        if v.stream is not None:
            _wait_for_producer(v.stream, h)
        slot.value = v.address

    def _pointer_device(self, i: int, value, address: int) -> int:
        try:
            return int(call(driver.cuPointerGetAttribute,
                            driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address))
        except CudaError as e:
            raise self.error(i, value, f"a pointer argument is CUDA memory (cuPointerGetAttribute: {e.name})",
                             "arg-not-device") from None

    def _device_error(self, i: int, value, device) -> LaunchError:
        if device == arrays.HOST:
            return self.error(i, value, "a pointer argument is device memory (tensor.cuda())", "arg-host-tensor")
        return self.error(i, value, f"an argument is on the kernel's device {self._ordinal}, not device {device} "
                          f"(compile for that device: ptxdsl.compile(k, device=Device({device})))", "arg-device")

    def _tensormap_packer(self, i: int):
        argv, held = self._argv, self._held

        def tensormap(value):
            last = held[i]
            if last is not None and last[0] is value:       # the same map object as last time: argv holds it
                return None
            if type(value) is TensorMapSpec:
                tmap = self._encoded(i, value)
            elif isinstance(value, driver.CUtensorMap):
                tmap = value
            else:
                raise self.error(i, value, "a tensormap argument is a CUtensorMap or a TensorMapSpec", "arg-type")
            held[i] = (value, tmap)
            argv[i] = tmap.getPtr()
            return None
        return tensormap

    def _encoded(self, i: int, spec: TensorMapSpec) -> driver.CUtensorMap:
        """cuTensorMapEncode* of `spec` (its address included), cached by the spec's value."""
        cache = self._tensormaps
        try:
            return cache[spec]
        except (KeyError, TypeError):       # TypeError: an unhashable field, which validate() names below
            pass
        if not spec.global_address:
            raise self.error(i, spec, "a TensorMapSpec argument has a global address (from_array(device_array) "
                             "or spec.bind(ptr))", "arg-unbound-tensormap")
        tmap = encode(spec, self.device)
        if len(cache) >= TENSORMAP_CACHE:
            del cache[next(iter(cache))]
        cache[spec] = tmap
        return tmap


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def _watchdog_record():
    from .watchdog import Record

    return Record()


def _kernel_error(name: str, e: CudaError) -> CudaError:
    """The driver's error, saying which kernel it came from."""
    e.message = f"kernel {name!r}: {e.message}"
    e.args = (e._format(),)
    return e


def _wait_for_producer(producer, consumer: int) -> None:
    """Make stream `consumer` wait for the work queued on a __cuda_array_interface__ producer stream (1 and 2 are
    the legacy and per-thread default streams; 0 is not a valid entry): an event and cuStreamWaitEvent."""
    producer = int(producer)
    if producer == consumer or (producer == 1 and consumer == streams.LEGACY):
        return
    event = call(driver.cuEventCreate, driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    try:
        source = {1: driver.CU_STREAM_LEGACY, 2: driver.CU_STREAM_PER_THREAD}.get(producer, producer)
        call(driver.cuEventRecord, event, driver.CUstream(source))
        call(driver.cuStreamWaitEvent, driver.CUstream(consumer), event, 0)
    finally:
        call(driver.cuEventDestroy, event)


def _check_block(function: Function, block: tuple[int, int, int]) -> None:
    block_threads(block, min(MAX_BLOCK_THREADS, function.max_threads_per_block), function.name)


def _check_shared(function: Function, shared_bytes) -> None:
    """Fit shared_bytes under the device's opt-in limit, raising the kernel's dynamic limit when needed."""
    if not isinstance(shared_bytes, Integral) or isinstance(shared_bytes, bool) or shared_bytes < 0:
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
    config = _cluster_config(grid, block, int(shared_bytes), driver.CUstream(streams.LEGACY), cluster)
    function.device.set_current()
    return int(call(driver.cuOccupancyMaxActiveClusters, function.handle, config))


def max_active_ctas(function: Function, *, block, shared_bytes: int = 0) -> int:
    """How many CTAs of this kernel, block and dynamic shared memory the device runs at once: the CTAs one SM
    holds (cuOccupancyMaxActiveBlocksPerMultiprocessor: registers, threads, shared memory) times the SMs. What a
    persistent grid launches, and how far apart in ctaid two CTAs must be for the later one to start after the
    earlier has ended."""
    block = _dims(block, "block")
    _check_block(function, block)
    _check_shared(function, shared_bytes)
    function.device.set_current()
    per_sm = call(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor, function.handle, math.prod(block),
                  int(shared_bytes))
    return int(per_sm) * function.device.sm_count


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


_plans: "weakref.WeakKeyDictionary[Function, dict]" = weakref.WeakKeyDictionary()
PLANS_PER_FUNCTION = 16


def plan(function: Function, params) -> Plan:
    """The Plan of `function` with this parameter list: made on first use, then kept with the function (the
    16 most recent parameter lists)."""
    params = tuple(params)
    by_params = _plans.setdefault(function, {})
    found = by_params.get(params)
    if found is None:
        if len(by_params) >= PLANS_PER_FUNCTION:
            del by_params[next(iter(by_params))]
        found = by_params[params] = Plan(function, params)
    return found


def launch(function: Function, params, args, *, grid, block, shared_bytes: int = 0, cluster=None,
           stream=None, sync: bool = False) -> None:
    """Check and pack the arguments against `params`, check the configuration, then launch (asynchronously).

    `grid` counts CTAs (also with a cluster); `stream` is any stream object (ptxdsl.runtime.stream); `sync=True`
    waits for the kernel and raises its errors. A LaunchError names the caller's line.
    """
    plan(function, params)(*args, grid=grid, block=block, shared_bytes=shared_bytes, cluster=cluster, stream=stream,
                           sync=sync)
