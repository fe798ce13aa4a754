"""Run ptxdsl kernels on the CPU: an interpreter with the GPU's results, and deadlock and fault reports.

    prog = px.compile(k, device="cpu")          # or ptxdsl.interpret.compile(k)
    prog["k"](src_spec, out_array, n, grid=(8, 4), block=128)

docs/interpreter.md has the whole story: what it runs, how to read a deadlock report, what it does not model.
"""
from .device import CPU, CpuDevice, is_cpu
from .errors import Deadlock, InterpretError, KernelTrapped, Livelock, MemoryFault, NotInterpretable
from .program import Launcher, Program, compile

__all__ = ["CPU", "CpuDevice", "Deadlock", "InterpretError", "KernelTrapped", "Launcher", "Livelock", "MemoryFault",
           "NotInterpretable", "Program", "compile", "is_cpu"]
