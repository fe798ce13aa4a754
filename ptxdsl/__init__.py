"""ptxdsl: write TMA kernels for Hopper and Blackwell in Python, get readable PTX, run it.

    import ptxdsl as px
    with px.kernel("copy", reqntid=128) as k:
        ...
    print(px.emit(k))
"""
from . import sreg
from .builder import KernelBuilder, kernel, module
from .emit import PTX, emit
from .descriptor import MatrixLayout
from .errors import (AssembleError, CudaError, DSLError, KernelTrap, LaunchError, LayoutError, ParseError,
                     PtxdslError, SourceLoc, TargetError, TensorMapError, VerifyError)
from .ir import Addr, Kernel, Module, TensorMapRef
from .target import Target
from .tensormap import TensorMapSpec
from .types import (b8, b16, b32, b64, bf16, f16, f32, f64, pred, s8, s16, s32, s64, u8, u16, u32, u64)

__version__ = "0.1.0"


def compile(obj, **kw):
    """Emit and load a kernel or module on the GPU; see ptxdsl.program.compile."""
    from .program import compile as _compile

    return _compile(obj, **kw)


def assemble(ptx, arch: str = "sm_90a", **kw):
    """Assemble PTX with nvJitLink (loaded on first use); see ptxdsl.assembler.assemble."""
    from .assembler import assemble as _assemble

    return _assemble(ptx, arch, **kw)


# Names whose modules load the CUDA driver bindings, nvJitLink or numpy: imported on first use, so that
# `import ptxdsl` stays what building and printing a kernel needs.
_LAZY = {"Assembled": "assembler", "Resources": "assembler", "Program": "program"}
_LAZY["torch_op"] = "runtime.torch_op"         # a kernel as a torch operator: torch is imported on call


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ptxdsl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AssembleError", "Assembled", "Addr", "CudaError", "DSLError", "Kernel", "KernelBuilder", "KernelTrap", "LaunchError",
    "LayoutError", "MatrixLayout", "Module", "PTX", "ParseError", "PtxdslError", "SourceLoc", "Target", "TargetError",
    "TensorMapError",
    "TensorMapRef", "TensorMapSpec", "VerifyError", "assemble", "compile", "emit", "kernel", "module", "sreg",
    "b8", "b16", "b32", "b64", "bf16", "f16", "f32", "f64", "pred", "s8", "s16", "s32", "s64",
    "u8", "u16", "u32", "u64",
]
