"""`px.compile(k, device="cpu")`: a program whose kernels run on the interpreter, launched with the GPU's call.

    prog = px.compile(k, device="cpu")
    prog["copy"](src_spec, out, 1024, grid=(8, 4), block=128)      # numpy arrays, CPU DeviceArrays, ints

Pointer arguments are CPU DeviceArrays (made while the CPU device is current), numpy arrays (or anything with
`__array__` / a host DLPack capsule: mapped for the launch, written in place), or addresses. Tensor-map
arguments are TensorMapSpecs over CPU memory. The launch runs to completion before it returns (`stream` and
`sync` are accepted and mean nothing here); `seed=` picks another interleaving of the warps. The verifier's
launch checks run first, as on the GPU (PTXDSL_LAUNCH_CHECKS=0 turns them off: then the interpreter shows what
the device would do).
"""
from __future__ import annotations

import math
import struct
from numbers import Integral, Real

import numpy as np

from .. import log
from ..emit import PTX, emit
from ..errors import LaunchError, PtxdslError, SourceLoc
from ..ir import Kernel, Module
from ..limits import launch_dims
from ..tensormap import TensorMapSpec
from ..watchdog import PARAM as WATCHDOG, RECORD_BYTES
from .device import CPU
from .memory import tmap_bytes
from .scheduler import Launch


def _kernels(obj) -> list:
    if hasattr(obj, "finish") and hasattr(obj, "kernel"):
        obj = obj.finish()
    if isinstance(obj, Module):
        return list(obj.kernels)
    if isinstance(obj, Kernel):
        return [obj]
    raise LaunchError(f"compile(device='cpu') takes a kernel (builder or Kernel) or a Module, got {obj!r}: the "
                      f"interpreter runs ptxdsl's IR, not PTX text", rule="interpret.source")


class Program:
    """The interpreter's counterpart of ptxdsl.program.Program: `prog[name]` launches a kernel on the CPU. `.ptx`
    is still emitted (the same checks as for the GPU run first), but nothing is assembled or loaded."""

    def __init__(self, obj, *, arch=None, ptx=None, seed=None):
        if isinstance(obj, PTX):
            raise LaunchError("compile(device='cpu') needs the kernel, not its PTX text", rule="interpret.source")
        kernels = _kernels(obj)
        self.kernels = {k.name: k for k in kernels}
        with log.stage("emit"):             # the GPU's checks (target floors, module limits) run here too
            self.ptx = emit(obj if isinstance(obj, Module) else kernels[0], arch=arch, ptx=ptx)
        self.device = CPU
        self.seed = seed
        self._launchers: dict = {}

    def __getitem__(self, name: str) -> "Launcher":
        if name not in self._launchers:
            if name not in self.kernels:
                raise KeyError(f"no kernel {name!r}; this module has {', '.join(self.kernels)}")
            self._launchers[name] = Launcher(self, self.kernels[name], self.ptx.kernels[name])
        return self._launchers[name]

    @property
    def text(self) -> str:
        return self.ptx.text

    def __repr__(self) -> str:
        return f"<Program {', '.join(self.kernels)} on the CPU interpreter>"


class Launcher:
    """Launches one kernel on the interpreter: `launcher(*args, grid=, block=, shared_bytes=, cluster=,
    seed=)`; the arguments are those the GPU launcher takes."""

    def __init__(self, program: Program, kernel: Kernel, info):
        self.program = program
        self.kernel = kernel
        self.info = info
        self.params = tuple(info.params)
        self.shared_bytes = info.dynamic_shared_bytes
        self.device = CPU
        self.steps = 0                  # warp-instructions the last launch ran
        self.hidden = any(p.name == WATCHDOG for p in self.params)

    def __call__(self, *args, grid, block, shared_bytes=None, cluster=None, stream=None, sync: bool = False,
                 seed=None):
        try:
            self._launch(args, grid, block, shared_bytes, cluster, seed)
        except PtxdslError as e:
            raise e.at(SourceLoc.caller())

    def _launch(self, args, grid, block, shared_bytes, cluster, seed):
        if self.hidden:                 # a debug kernel's watchdog record: the interpreter reports hangs itself
            given = iter(args)
            args = tuple(np.zeros(RECORD_BYTES, np.uint8) if p.name == WATCHDOG else next(given, None)
                         for p in self.params) if len(args) == len(self.params) - 1 else args
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params if p.name != WATCHDOG) or "none"
            raise LaunchError(f"len(args)={len(args)} breaks 'kernel {self.kernel.name!r} takes {len(self.params)} "
                              f"arguments ({names})'", rule="launch.arg-count")
        g, b = launch_dims(grid, "grid"), launch_dims(block, "block")
        c = launch_dims(cluster, "cluster") if cluster is not None else (self.kernel.cluster_dims or None)
        if c is not None:
            c = tuple(c) + (1,) * (3 - len(c))
            for axis, gg, cc in zip("xyz", g, c):
                if gg % cc:
                    raise LaunchError(f"grid.{axis}={gg} breaks 'the grid (in CTAs) is a multiple of "
                                      f"cluster.{axis}={cc}'", rule="launch.cluster-grid")
        if math.prod(b) > 1024:
            raise LaunchError(f"block={b} breaks 'a block has at most 1024 threads'", rule="launch.block-threads")
        if self.info.needs_cluster is not None and c is None:
            raise LaunchError(f"kernel {self.kernel.name!r} copies shared::cta -> shared::cluster (at "
                              f"{self.info.needs_cluster}), which runs only in a cluster launch: pass "
                              f"cluster=(1, 1, 1) or more", rule="launch.cluster-required")
        dyn = self.shared_bytes if shared_bytes is None else int(shared_bytes)
        checks = getattr(self.info, "launch_checks", None)
        if checks is not None and checks.checks:        # the verifier's launch checks, as the GPU launcher runs them
            checks.run([a for p, a in zip(self.params, args) if p.name != WATCHDOG], grid, block, cluster,
                       shared_bytes)
        heap = CPU.heap
        mapped: list = []
        try:
            params, offsets = self._pack(args, heap, mapped)
            launch = Launch(self.kernel, heap, params, offsets, g, b, c, dyn,
                            seed=seed if seed is not None else self.program.seed)
            with log.stage("launch", f"{self.kernel.name} on the CPU: grid={g} block={b} cluster={c}"):
                launch.run()
            self.steps = launch.steps
        finally:
            for base, arr, back in mapped:
                heap.unmap(base)
                if back is not None:
                    np.copyto(back, arr.reshape(back.shape), casting="no")

    # ------------------------------------------------------------------------------------- parameters

    def _pack(self, args, heap, mapped):
        buf = bytearray()
        offsets = {}
        for i, (p, value) in enumerate(zip(self.params, args)):
            if p.kind == "tensormap":
                data = self._tensormap(i, p, value, heap)
                align = 64
            elif p.kind == "ptr":
                data = struct.pack("<Q", self._pointer(i, p, value, heap, mapped))
                align = 8
            else:
                data = self._scalar(i, p, value)
                align = p.type.nbytes
            pad = -len(buf) % align
            buf += b"\0" * pad
            offsets[p] = len(buf)
            buf += data
        return bytes(buf), offsets

    def error(self, i, p, value, text, rule):
        shown = f"<numpy array {value.shape} {value.dtype}>" if isinstance(value, np.ndarray) else repr(value)[:80]
        return LaunchError(f"kernel {self.kernel.name!r} argument {i} ({p.name}: {p.kind}) = {shown} breaks "
                           f"'{text}'", rule=f"launch.{rule}")

    def _scalar(self, i, p, value) -> bytes:
        t = p.type
        if t.kind == "f":
            if not isinstance(value, Real) or isinstance(value, bool):
                raise self.error(i, p, value, f"a .{t.name} argument is a real number", "arg-type")
            from .. import alu

            return int(alu.encode(np.array([float(value)]), t)[0]).to_bytes(t.nbytes, "little")
        if not isinstance(value, Integral) or isinstance(value, bool):
            raise self.error(i, p, value, f"a .{t.name} argument is an integer", "arg-type")
        n = t.bits
        lo = -(2 ** (n - 1)) if t.kind in ("s", "b") else 0
        hi = 2 ** (n - 1) - 1 if t.kind == "s" else 2**n - 1
        if not lo <= int(value) <= hi:
            raise self.error(i, p, value, f"a .{t.name} argument is {lo}..{hi}", "arg-range")
        return (int(value) & ((1 << n) - 1)).to_bytes(t.nbytes, "little")

    def _pointer(self, i, p, value, heap, mapped) -> int:
        from ..runtime.memory import DeviceArray

        if isinstance(value, DeviceArray):
            if not getattr(value.device, "host", False):
                raise self.error(i, p, value, "a pointer argument of a CPU launch is in host memory (a DeviceArray "
                                 "made while the CPU device is current, or a numpy array)", "arg-device")
            return value.ptr
        if isinstance(value, Integral) and not isinstance(value, bool):
            return int(value)
        arr = _host_array(value)
        if arr is None:
            raise self.error(i, p, value, "a pointer argument is a numpy array (or __array__ / host DLPack object), a "
                             "CPU DeviceArray, or an address", "arg-type")
        if arr.flags.c_contiguous and arr.flags.writeable:
            base = heap.map(arr.reshape(-1).view(np.uint8), arr)
            mapped.append((base, arr, None))
        else:
            copy = np.ascontiguousarray(arr)
            base = heap.map(copy.reshape(-1).view(np.uint8), copy)
            mapped.append((base, copy, arr if arr.flags.writeable else None))
        return base

    def _tensormap(self, i, p, value, heap) -> bytes:
        if not isinstance(value, TensorMapSpec):
            raise self.error(i, p, value, "a tensormap argument of a CPU launch is a TensorMapSpec", "arg-type")
        if not value.global_address:
            raise self.error(i, p, value, "a TensorMapSpec argument has a global address (from_array(buf) of a CPU "
                             "DeviceArray, or spec.bind(ptr))", "arg-unbound-tensormap")
        value.validate()
        return tmap_bytes(heap.tmap_handle(value)).tobytes()

    # ----------------------------------------------------------------------- the GPU launcher's questions

    def max_active_ctas(self, block, shared_bytes=None) -> int:
        """As on the H200: CTAs per SM by shared memory (at most 32, at most 2048 threads) times the SMs."""
        nthreads = math.prod(launch_dims(block, "block"))
        smem = (self.shared_bytes if shared_bytes is None else shared_bytes) + self.kernel.static_shared_bytes
        by_smem = CPU.shared_per_sm // (smem + CPU.reserved_shared_per_block) if smem else 32
        return max(1, min(32, 2048 // nthreads, by_smem)) * CPU.sm_count

    def shared_bytes_for(self, ctas_per_sm: int) -> int:
        per_cta = CPU.shared_per_sm // ctas_per_sm - CPU.reserved_shared_per_block - self.kernel.static_shared_bytes
        return max(self.shared_bytes, per_cta // 128 * 128)


def _host_array(value):
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        try:
            if value.__dlpack_device__()[0] == 1:          # kDLCPU
                return np.from_dlpack(value)
        except Exception:
            return None
    if hasattr(value, "__array__"):
        return np.asarray(value)
    return None


def compile(obj, *, arch=None, ptx=None, seed=None) -> Program:
    """A program whose kernels run on the CPU interpreter (`px.compile(obj, device="cpu")` calls this)."""
    return Program(obj, arch=arch, ptx=ptx, seed=seed)
