"""The one place CUresult tuples are unwrapped: every failure becomes a CudaError."""
from __future__ import annotations

import functools

from cuda.bindings import driver

from ..errors import CudaError

_SUCCESS = driver.CUresult.CUDA_SUCCESS


def _describe(code) -> tuple[str, str]:
    """cuGetErrorName / cuGetErrorString of a CUresult, tolerating codes the driver does not know, and the
    enum's own name where there is no driver library to ask (a CUresult that tests make up)."""
    try:
        err, name = driver.cuGetErrorName(code)
    except RuntimeError:                # cuda.pathfinder's DynamicLibNotFoundError: no libcuda here
        try:
            return driver.CUresult(int(code)).name, "no description (no CUDA driver to ask)"
        except ValueError:
            return f"CUresult {int(code)}", "no description (no CUDA driver to ask)"
    name = name.decode() if err == _SUCCESS and name else f"CUresult {int(code)}"
    err, desc = driver.cuGetErrorString(code)
    desc = desc.decode() if err == _SUCCESS and desc else "no description"
    return name, desc


def cuda_error(code, call_name: str, log: str = "") -> CudaError:
    """A CudaError for a failed driver call; `log` (a JIT log) is appended to the message and kept as .log."""
    name, desc = _describe(code)
    message = f"{call_name} failed with {name} ({int(code)}): {desc}"
    if log:
        message += f"\n{log}"
    err = CudaError(message, rule=f"cuda.{call_name}", code=int(code), name=name)
    err.call = call_name
    err.description = desc
    err.log = log
    return err


def check(result, call_name: str = "CUDA driver call"):
    """Unwrap a cuda-bindings return tuple (CUresult, *values): the value(s), or raise CudaError."""
    code, *values = result if isinstance(result, tuple) else (result,)
    if code != _SUCCESS:
        raise cuda_error(code, call_name)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def call(fn, *args):
    """Call a cuda-bindings driver function and check() its result under the function's own name."""
    return check(fn(*args), fn.__name__)


@functools.cache
def _probe() -> str:
    """Empty when cuInit succeeds and a device exists; otherwise why not."""
    try:
        err, = driver.cuInit(0)
    except Exception as e:      # the driver library itself is missing or unloadable
        return f"no CUDA driver: {e}"
    if err != _SUCCESS:
        return f"cuInit failed: {_describe(err)[0]}"
    err, count = driver.cuDeviceGetCount()
    if err != _SUCCESS:
        return f"cuDeviceGetCount failed: {_describe(err)[0]}"
    return "" if count > 0 else "no CUDA device present"


def driver_available() -> bool:
    """True when the CUDA driver loads, initialises and sees at least one device (never raises)."""
    return not _probe()


def unavailable_reason() -> str:
    """Why driver_available() is False (for skip messages); empty when it is True."""
    return _probe()
