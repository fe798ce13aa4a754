"""compile(): emit a kernel or module, load it on the device, and launch its kernels.

    prog = ptxdsl.compile(k)
    prog["copy"](tmap_spec, out_array, 1024, grid=(8, 4), block=128)
    print(prog.resources["copy"])

The device loads the cubin `ptxdsl check` reports on, assembled by nvJitLink for the device's arch (sm_90a on an
H200) and kept in ptxdsl's disk cache, with `.cubin` and `.sass` to inspect; the driver JIT compiles the PTX
where nvJitLink's cubin cannot serve (ptxdsl.cubin says when, and the `ptxdsl` logger says why), or when asked
for (loader='ptx' or PTXDSL_LOADER=ptx). docs/compile.md has the whole path, the cache and the inspection
properties.

A kernel built with debug=True gets a hidden record in mapped host memory (ptxdsl.runtime.watchdog); a
wait that gives up writes its site there and traps, and the launch raises KernelTrap naming the waiting line.
"""
from __future__ import annotations

import os
import re

from .emit import PTX, emit
from .errors import CudaError, DSLError, LaunchError, SourceLoc
from . import log
from .runtime.launch import Plan


LOADERS = ("ptx", "cubin")
PTX_LOADER_REASON = "the driver JIT was asked for (loader='ptx' or PTXDSL_LOADER=ptx)"


def _loader(loader) -> str:
    """'cubin' (nvJitLink's cubin, cached on disk: the default) or 'ptx' (the driver JIT compiles the PTX), from
    the argument or PTXDSL_LOADER."""
    value = loader if loader is not None else os.environ.get("PTXDSL_LOADER") or "cubin"
    if value not in LOADERS:
        raise DSLError(f"loader={value!r} breaks 'the loader is one of {', '.join(LOADERS)}'"
                       + (" (from PTXDSL_LOADER)" if loader is None else ""))
    return value


class Program:
    """A loaded module: `prog[name]` is a launcher for one of its kernels. `.ptx` is the emitted PTX, `.cubin` the
    image the device loaded (None when the driver JIT compiled the PTX: `.jit_reason` says why), `.sass` its
    machine code as text, `.resources` each kernel's registers, shared memory and spills, `.arch` the cubin's."""

    def __init__(self, obj, *, arch: str | None = None, ptx=None, device=None, line_info: bool | None = None,
                 loader: str | None = None):
        from .cubin import Image, device_arch, prepare
        from .dump import dump
        from .runtime import current_device
        from .runtime.module import driver_version

        if line_info is None:
            line_info = os.environ.get("PTXDSL_LINE_INFO", "") not in ("", "0")
        if isinstance(obj, PTX):
            self.ptx: PTX = obj
        else:
            with log.stage("emit"):
                self.ptx = emit(obj, arch=arch, ptx=ptx, line_info=line_info)
        self.device = device or current_device()
        self.device.set_current()
        self.arch = device_arch(self.device.compute_capability, self.ptx.target.arch)
        if _loader(loader) == "cubin":
            self.image = prepare(self.ptx, self.arch, driver=driver_version(), line_info=line_info)
        else:
            self.image = Image(self.arch, None, PTX_LOADER_REASON)
        self.jit_reason = self.image.jit_reason
        self.module = self._load(line_info)
        self._launchers: dict = {}
        self._sass: str | None = None
        dump(self.ptx, self.cubin)

    def _load(self, line_info: bool):
        """cuModuleLoadData of the cubin; the PTX through the driver JIT when there is none or the driver refuses
        it (a cubin newer than the driver, say), with the reason logged and kept in .jit_reason."""
        from .runtime.module import CUBIN_REFUSED, load_cubin, load_ptx

        name = "+".join(self.ptx.kernels) or "ptxdsl"
        image = self.image.cubin
        if image is not None:
            try:
                with log.stage("load", f"cubin {self.arch}"):
                    return load_cubin(image, name=name)
            except CudaError as e:
                if e.name not in CUBIN_REFUSED:
                    raise
                self.jit_reason = f"the driver refused nvJitLink's {self.arch} cubin: {e.name}"
                log.info("loading the PTX through the driver JIT: %s", self.jit_reason)
        with log.stage("load", "PTX through the driver JIT"):
            module = load_ptx(self.ptx.text, name=name, line_info=line_info, verbose=True)
        if module.info_log:
            log.debug("driver JIT log of %s:\n%s", name, module.info_log)
            if "C75" in module.info_log:
                from . import ptxas_notes

                found = ptxas_notes.notes(module.info_log, self.ptx)
                for note in found:
                    log.warning("%s", note)
                ptxas_notes.refuse(found, {n for n, info in self.ptx.kernels.items() if info.strict})
        return module

    def __getitem__(self, name: str) -> "Launcher":
        if name not in self._launchers:
            if name not in self.ptx.kernels:
                raise KeyError(f"no kernel {name!r}; this module has {', '.join(self.ptx.kernels)}")
            self._launchers[name] = Launcher(self, self.ptx.kernels[name])
        return self._launchers[name]

    @property
    def text(self) -> str:
        return self.ptx.text

    @property
    def loaded_from(self) -> str:
        """'cubin' (nvJitLink's, loaded as is) or 'ptx' (compiled by the driver JIT)."""
        return "ptx" if self.jit_reason else "cubin"

    @property
    def cubin(self) -> bytes | None:
        """The cubin the device loaded; None when the driver JIT compiled the PTX (it keeps its machine code)."""
        return None if self.jit_reason else self.image.cubin

    @property
    def sass(self) -> str:
        """The loaded cubin's SASS, each source line under its code when compiled with line_info (nvdisasm, the
        `ptxdsl[sass]` extra). SassError when nvdisasm is missing or the driver JIT compiled the PTX."""
        from .sass import SassError, disassemble

        if self._sass is None:
            if self.cubin is None:
                raise SassError(f"no SASS: the module was loaded through the driver JIT ({self.jit_reason}), "
                                f"which keeps its machine code to itself", rule="sass.no-cubin")
            self._sass = disassemble(self.cubin, ptx=self.ptx)
        return self._sass

    @property
    def resources(self) -> dict:
        """Each kernel's Resources: nvJitLink's report for the loaded cubin (as `ptxdsl check` prints it); for a
        module the driver JIT compiled, the driver's function attributes (registers, static shared, const and
        local bytes; the driver reports no spill or barrier counts, so those read 0)."""
        if not self.jit_reason:
            return dict(self.image.assembled.kernels)
        from .assembler import Resources

        out = {}
        for name in self.ptx.kernels:
            a = self.module.function(name).attributes
            out[name] = Resources(registers=a["num_regs"], shared_bytes=a["static_shared_bytes"],
                                  const_bytes=a["const_bytes"], stack_frame=a["local_bytes"])
        return out

    def __repr__(self) -> str:
        return (f"<Program {', '.join(self.ptx.kernels)} on {self.device!r}: "
                f"{'cubin ' + self.arch if not self.jit_reason else 'driver JIT'}>")


def entry_text(ptx_text: str, name: str) -> str:
    """The `.entry name(...) ... }` block of one kernel in emitted PTX text (the emitter closes each at column 0)."""
    m = re.search(rf"^(?:\.visible )?\.entry {re.escape(name)}\b.*?^}}\n", ptx_text, re.MULTILINE | re.DOTALL)
    if m is None:
        raise KeyError(f"no .entry {name!r} in this PTX")
    return m.group(0)


class Launcher(Plan):
    """Launches one kernel: `prog["k"](*args, grid=, block=, shared_bytes=, cluster=, stream=, sync=)`. Arguments
    are checked against the kernel's signature and packed by the plan made here once (ptxdsl.runtime.launch.Plan,
    which also holds the call); the launch is asynchronous.

    stream: any `__cuda_stream__` object (cuda.core, CuPy, torch), a torch stream, a CUstream or an int handle;
    by default torch's current stream on the device when an argument is a torch tensor, else the legacy default
    stream. sync=True waits for the kernel and raises its error; a debug kernel always waits, and a wait that gave
    up raises KernelTrap naming the waiting line. shared_bytes defaults to the kernel's dynamic shared memory."""

    def __init__(self, program: Program, info):
        self.program = program
        self.info = info
        super().__init__(program.module.function(info.name), info.params, shared_bytes=info.dynamic_shared_bytes,
                         name=info.name, check_cluster=lambda cluster: check_cluster_launch(info, cluster),
                         debug=info if info.debug else None, checks=getattr(info, "launch_checks", None))

    @property
    def ptx(self) -> str:
        """This kernel's .entry out of the module's PTX text."""
        return entry_text(self.program.ptx.text, self.info.name)

    @property
    def cubin(self) -> bytes | None:
        """The module's cubin (one image holds every kernel of the module); None after a driver JIT load."""
        return self.program.cubin

    @property
    def sass(self) -> str:
        """This kernel's SASS (see Program.sass)."""
        from .sass import kernel_section

        return kernel_section(self.program.sass, self.info.name)

    @property
    def resources(self):
        """This kernel's Resources: registers, shared/const/stack bytes, spills (see Program.resources)."""
        return self.program.resources[self.info.name]

    def max_active_ctas(self, block, shared_bytes: int | None = None) -> int:
        """CTAs of this kernel the device runs at once with `block` threads and `shared_bytes` of dynamic shared
        memory (default: what the kernel declares): per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor) times the
        SMs. A persistent grid's size; a wave of the grid's CTAs."""
        from .runtime.launch import max_active_ctas

        return max_active_ctas(self.function, block=block,
                               shared_bytes=self.shared_bytes if shared_bytes is None else shared_bytes)

    def shared_bytes_for(self, ctas_per_sm: int) -> int:
        """The dynamic shared bytes to launch with (`shared_bytes=`) so that shared memory lets at most
        `ctas_per_sm` CTAs of this kernel share an SM, and never fewer bytes than the kernel needs. A knob for
        memory-bound kernels, where fewer TMA requests in flight per SM can move more bytes."""
        if isinstance(ctas_per_sm, bool) or not isinstance(ctas_per_sm, int) or ctas_per_sm < 1:
            raise LaunchError(f"shared_bytes_for(ctas_per_sm={ctas_per_sm!r}): expected a positive integer",
                              SourceLoc.caller(), rule="launch.shared-bytes")
        dev = self.device
        per_cta = dev.shared_per_sm // ctas_per_sm - dev.reserved_shared_per_block - self.function.static_shared_bytes
        return max(self.shared_bytes, per_cta // 128 * 128)


def check_cluster_launch(info, cluster) -> None:
    """LaunchError for a kernel with a cluster-only copy launched without a cluster (it would die with an
    illegal instruction): neither `cluster=` at launch nor .reqnctapercluster in the kernel."""
    if info.needs_cluster is not None and cluster is None and info.cluster_dims is None:
        raise LaunchError(f"kernel {info.name!r} copies shared::cta -> shared::cluster (cp.async.bulk at "
                          f"{info.needs_cluster}), which runs only in a cluster launch: pass cluster=(1, 1, 1) "
                          f"or more, or build the kernel with reqnctapercluster=", SourceLoc.caller(),
                          rule="launch.cluster-required")


def compile(obj, *, arch: str | None = None, ptx=None, device=None, line_info: bool | None = None,
            loader: str | None = None) -> Program:
    """Emit `obj` (a kernel builder, Kernel, Module or PTX) and load it on `device` (default: the current
    context's, else device 0). loader='cubin' (the default; PTXDSL_LOADER sets another) loads nvJitLink's cubin
    for the device's arch, from the on-disk cache when it was made before, or the PTX where nvJitLink cannot serve
    (docs/compile.md); loader='ptx' has the driver JIT compile the PTX (the driver caches what it compiled).
    line_info (default: the PTXDSL_LINE_INFO environment variable) emits .file/.loc and keeps the line table,
    so compute-sanitizer, cuda-gdb, ncu and `.sass` name the builder calls or .ptxd lines."""
    return Program(obj, arch=arch, ptx=ptx, device=device, line_info=line_info, loader=loader)
