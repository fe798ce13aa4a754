"""compile(): emit a kernel or module, JIT-load its PTX with cuModuleLoadData, and launch its kernels.

    prog = ptxdsl.compile(k)
    prog["copy"](tmap_spec, out_array, 1024, grid=(8, 4), block=128)

A kernel built with debug=True gets a hidden buffer in mapped host memory; a wait that gives up
writes its site there and traps, and the launch raises KernelTrap naming the waiting line.
"""
from __future__ import annotations

import ctypes
import os

from .emit import PTX, STATE_WAIT, emit
from .errors import CudaError, KernelTrap, LaunchError, SourceLoc

DEBUG_RECORD_BYTES = 16


class Program:
    """A loaded module: `prog[name]` is a launcher for one of its kernels."""

    def __init__(self, obj, *, arch: str | None = None, ptx=None, device=None, line_info: bool | None = None):
        from .runtime import Device, load_ptx

        if line_info is None:
            line_info = os.environ.get("PTXDSL_LINE_INFO", "") not in ("", "0")
        self.ptx: PTX = obj if isinstance(obj, PTX) else emit(obj, arch=arch, ptx=ptx, line_info=line_info)
        self.device = device or Device(0)
        self.device.set_current()
        self.module = load_ptx(self.ptx.text, line_info=line_info)
        self._launchers: dict = {}

    def __getitem__(self, name: str) -> "Launcher":
        if name not in self._launchers:
            if name not in self.ptx.kernels:
                raise KeyError(f"no kernel {name!r}; this module has {', '.join(self.ptx.kernels)}")
            self._launchers[name] = Launcher(self, self.ptx.kernels[name])
        return self._launchers[name]

    @property
    def text(self) -> str:
        return self.ptx.text


class Launcher:
    """Launches one kernel: checks the arguments against its signature, sizes dynamic shared memory."""

    def __init__(self, program: Program, info):
        self.program = program
        self.info = info
        self.function = program.module.function(info.name)

    def __call__(self, *args, grid, block, shared_bytes: int | None = None, cluster=None, stream=None,
                 sync: bool = True):
        from .runtime.launch import launch

        info = self.info
        check_cluster_launch(info, cluster)
        shared = info.dynamic_shared_bytes if shared_bytes is None else shared_bytes
        record = _DebugRecord() if info.debug else None
        if record is not None:
            args = _with_debug(info, args, record)
        try:
            launch(self.function, info.params, args, grid=grid, block=block, shared_bytes=shared,
                   cluster=cluster, stream=stream, sync=sync or info.debug)
        except CudaError as e:
            trap = record.trap(info) if record is not None else None
            if trap is not None:
                raise trap from e
            raise
        finally:
            if record is not None:
                record.free()


def check_cluster_launch(info, cluster) -> None:
    """LaunchError for a kernel with a cluster-only copy launched without a cluster (it would die with an
    illegal instruction): neither `cluster=` at launch nor .reqnctapercluster in the kernel."""
    if info.needs_cluster is not None and cluster is None and info.cluster_dims is None:
        raise LaunchError(f"kernel {info.name!r} copies shared::cta -> shared::cluster (cp.async.bulk at "
                          f"{info.needs_cluster}), which runs only in a cluster launch: pass cluster=(1, 1, 1) "
                          f"or more, or build the kernel with reqnctapercluster=", SourceLoc.caller(),
                          rule="launch.cluster-required")


def _with_debug(info, args, record):
    names = [p.name for p in info.params]
    i = names.index("__ptxdsl_debug")
    args = list(args)
    args.insert(i, record.device_ptr)
    return args


class _DebugRecord:
    """16 bytes of mapped, pinned host memory the kernel writes when a wait gives up."""

    def __init__(self):
        from cuda.bindings import driver

        from .runtime.driver import check

        self._host = check(driver.cuMemHostAlloc(DEBUG_RECORD_BYTES, driver.CU_MEMHOSTALLOC_DEVICEMAP),
                           "cuMemHostAlloc")
        ctypes.memset(int(self._host), 0, DEBUG_RECORD_BYTES)
        self.device_ptr = int(check(driver.cuMemHostGetDevicePointer(self._host, 0), "cuMemHostGetDevicePointer"))

    def _words(self):
        return (ctypes.c_uint32 * 4).from_address(int(self._host))

    @property
    def site(self) -> int:
        return int(self._words()[0])

    def trap(self, info) -> KernelTrap | None:
        """The exception for the wait that gave up, or None when the record names no wait of this kernel."""
        site, parity = self.site, int(self._words()[1])
        if not 1 <= site <= len(info.wait_sites):
            return None
        loc, bar, operand = info.wait_sites[site - 1]
        phase = f"the phase of state token {operand}" if parity == STATE_WAIT else f"phase parity {parity}"
        return KernelTrap(f"kernel {info.name!r} gave up waiting on mbarrier {bar!r} for {phase} (debug mode): "
                          f"the phase never completed; check its arrival count and expect_tx bytes (the CUDA "
                          f"context is unusable after the trap)", loc, rule="debug-watchdog")

    def free(self):
        from cuda.bindings import driver

        driver.cuMemFreeHost(self._host)


def compile(obj, *, arch: str | None = None, ptx=None, device=None, line_info: bool | None = None) -> Program:
    """Emit `obj` (a kernel builder, Kernel, Module or PTX) and load it on the device. line_info (default:
    the PTXDSL_LINE_INFO environment variable) emits .file/.loc and has the JIT keep the line table, so
    compute-sanitizer, cuda-gdb and ncu name the builder calls or .ptxd lines."""
    return Program(obj, arch=arch, ptx=ptx, device=device, line_info=line_info)
