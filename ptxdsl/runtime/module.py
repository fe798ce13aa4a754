"""Modules loaded into the driver (cuModuleLoadData of a cubin, cuModuleLoadDataEx of PTX for the driver's JIT)
and the kernels in them."""
from __future__ import annotations

import functools

from cuda.bindings import driver

from .device import Device, current_device
from .driver import call, cuda_error

_JIT = driver.CUjit_option
_FA = driver.CUfunction_attribute
JIT_LOG_BYTES = 64 * 1024


def _log_text(buf: bytearray) -> str:
    return bytes(buf).split(b"\0", 1)[0].decode(errors="replace").strip()


# cuModuleLoadData's answers to a cubin this driver cannot take (made by a newer toolkit, for another GPU):
# the PTX can still go through the driver's JIT.
CUBIN_REFUSED = frozenset({"CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                           "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_SOURCE"})


def driver_version() -> tuple[int, int]:
    """The CUDA version the driver supports (cuDriverGetVersion), e.g. (13, 0) for a 580 driver."""
    v = call(driver.cuDriverGetVersion)
    return v // 1000, (v % 1000) // 10


def load_cubin(image: bytes, *, name: str = "ptxdsl") -> "Module":
    """Load a cubin (an ELF image nvJitLink made) into the current device's context with cuModuleLoadData; no JIT
    runs. A failure raises CudaError (its .name in CUBIN_REFUSED when the driver cannot take this image)."""
    device = current_device()
    handle = call(driver.cuModuleLoadData, image)
    return Module(handle, name, device)


def load_ptx(ptx_text: str, *, name: str = "ptxdsl", line_info: bool = False, verbose: bool = False) -> "Module":
    """JIT-load PTX text into the current device's context; a failure raises CudaError carrying the JIT error log.
    line_info: CU_JIT_GENERATE_LINE_INFO, so tools map the machine code to the PTX's .loc lines. verbose:
    CU_JIT_LOG_VERBOSE, so the module's info_log holds ptxas's report (registers, ignored setmaxnreg ...)."""
    device = current_device()
    info, error = bytearray(JIT_LOG_BYTES), bytearray(JIT_LOG_BYTES)
    options = [_JIT.CU_JIT_INFO_LOG_BUFFER, _JIT.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
               _JIT.CU_JIT_ERROR_LOG_BUFFER, _JIT.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
    values = [info, JIT_LOG_BYTES, error, JIT_LOG_BYTES]
    if line_info:
        options.append(_JIT.CU_JIT_GENERATE_LINE_INFO)
        values.append(1)
    if verbose:
        options.append(_JIT.CU_JIT_LOG_VERBOSE)
        values.append(1)
    code, handle = driver.cuModuleLoadDataEx(ptx_text.encode() + b"\0", len(options), options, values)
    if code != driver.CUresult.CUDA_SUCCESS:
        log = _log_text(error) or "(the JIT error log is empty)"
        raise cuda_error(code, "cuModuleLoadDataEx", log=f"JIT error log of module {name!r}:\n{log}")
    return Module(handle, name, device, _log_text(info))


class Module:
    """A loaded module; unload() (or `with`) releases it."""

    def __init__(self, handle: driver.CUmodule, name: str, device: Device, info_log: str = ""):
        self.handle = handle
        self.name = name
        self.device = device
        self.info_log = info_log
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> "Function":
        """The kernel `name` (cuModuleGetFunction); the same object on every call."""
        if name not in self._functions:
            handle = call(driver.cuModuleGetFunction, self.handle, name.encode())
            self._functions[name] = Function(handle, name, self)
        return self._functions[name]

    def unload(self) -> None:
        """cuModuleUnload; later calls do nothing."""
        if self.handle is not None:
            self.device.set_current()
            call(driver.cuModuleUnload, self.handle)
            self.handle = None
            self._functions.clear()

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc) -> None:
        self.unload()

    def __repr__(self) -> str:
        return f"<Module {self.name!r} on {self.device!r}>"


class Function:
    """One kernel of a loaded module, with its attributes (cuFuncGetAttribute / cuFuncSetAttribute)."""

    def __init__(self, handle: driver.CUfunction, name: str, module: Module):
        self.handle = handle
        self.name = name
        self.module = module
        self.non_portable_cluster_size_allowed = False

    @property
    def device(self) -> Device:
        return self.module.device

    def _get(self, attr: driver.CUfunction_attribute) -> int:
        return call(driver.cuFuncGetAttribute, attr, self.handle)

    def _set(self, attr: driver.CUfunction_attribute, value: int) -> None:
        call(driver.cuFuncSetAttribute, self.handle, attr, int(value))

    @property
    def attributes(self) -> dict[str, int]:
        """Registers, static/local/const bytes, thread and dynamic-shared limits, PTX/binary versions."""
        return {
            "num_regs": self._get(_FA.CU_FUNC_ATTRIBUTE_NUM_REGS),
            "static_shared_bytes": self.static_shared_bytes,
            "local_bytes": self._get(_FA.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            "const_bytes": self._get(_FA.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
            "max_threads_per_block": self.max_threads_per_block,
            "max_dynamic_shared_bytes": self.max_dynamic_shared,
            "ptx_version": self._get(_FA.CU_FUNC_ATTRIBUTE_PTX_VERSION),
            "binary_version": self._get(_FA.CU_FUNC_ATTRIBUTE_BINARY_VERSION),
        }

    @functools.cached_property
    def static_shared_bytes(self) -> int:
        return self._get(_FA.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)

    @functools.cached_property
    def max_threads_per_block(self) -> int:
        """The most threads a block of this kernel may have (registers and .maxntid/.reqntid included)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)

    @property
    def max_dynamic_shared(self) -> int:
        """Dynamic shared bytes a launch may ask for now (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Allow launches with up to `nbytes` of dynamic shared memory (needed above 48 KiB)."""
        self._set(_FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)

    def set_non_portable_cluster_size_allowed(self) -> None:
        """Allow clusters of more than 8 CTAs (up to 16 on Hopper)."""
        self._set(_FA.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        self.non_portable_cluster_size_allowed = True

    def __repr__(self) -> str:
        return f"<Function {self.name!r} of module {self.module.name!r}>"
