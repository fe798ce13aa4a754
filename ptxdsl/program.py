"""compile(): emit a kernel or module, JIT-load its PTX with cuModuleLoadData, and launch its kernels.

    prog = ptxdsl.compile(k)
    prog["copy"](tmap_spec, out_array, 1024, grid=(8, 4), block=128)

A kernel built with debug=True gets a hidden record in mapped host memory (ptxdsl.runtime.watchdog); a
wait that gives up writes its site there and traps, and the launch raises KernelTrap naming the waiting line.
"""
from __future__ import annotations

import os

from .emit import PTX, emit
from .errors import CudaError, LaunchError, SourceLoc


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
        from .runtime.watchdog import Record

        info = self.info
        check_cluster_launch(info, cluster)
        shared = info.dynamic_shared_bytes if shared_bytes is None else shared_bytes
        record = Record() if info.debug else None
        if record is not None:
            args = record.with_argument(info, args)
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


def compile(obj, *, arch: str | None = None, ptx=None, device=None, line_info: bool | None = None) -> Program:
    """Emit `obj` (a kernel builder, Kernel, Module or PTX) and load it on the device. line_info (default:
    the PTXDSL_LINE_INFO environment variable) emits .file/.loc and has the JIT keep the line table, so
    compute-sanitizer, cuda-gdb and ncu name the builder calls or .ptxd lines."""
    return Program(obj, arch=arch, ptx=ptx, device=device, line_info=line_info)
