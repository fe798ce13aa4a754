"""Which CUDA stream a launch goes to, read from what the caller holds: any object with `__cuda_stream__`
(cuda.core, CuPy, torch streams), an object with a `cuda_stream` handle (older torch streams), a `CUstream`, or an
int handle. torch's current stream is read through torch itself, only when the caller passed torch tensors, and
CuPy's through CuPy, only when the caller passed CuPy arrays."""
from __future__ import annotations

import sys
from numbers import Integral

from cuda.bindings import driver

from .driver import call

LEGACY = 0              # the legacy default stream's handle (CU_STREAM_LEGACY's behaviour, spelled 0 by torch)
RULE = "stream is a __cuda_stream__ object (cuda.core, CuPy, torch), a torch stream, a CUstream or an int handle"


class BadStream(ValueError):
    """`stream=` is none of the accepted kinds (the launch turns it into a LaunchError naming the value)."""


def handle(stream) -> int:
    """The handle (an int) of any accepted stream object; BadStream otherwise."""
    if isinstance(stream, driver.CUstream):
        return int(stream)
    if isinstance(stream, Integral) and not isinstance(stream, bool):
        if 0 <= int(stream) < 2**64:
            return int(stream)
        raise BadStream(f"an int stream handle is 0..2^64-1, not {int(stream)}")
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        try:
            version, h = protocol() if callable(protocol) else protocol
            return handle(int(h))
        except BadStream:
            raise
        except Exception as e:
            raise BadStream(f"__cuda_stream__() answers (version, handle) ({type(e).__name__}: {e})") from None
    h = getattr(stream, "cuda_stream", None)            # torch.cuda.Stream before the protocol
    if isinstance(h, Integral) and not isinstance(h, bool):
        return handle(h)
    raise BadStream(RULE)


_torch_raw_stream = None


def cupy_current() -> int:
    """CuPy's current stream (cupy is already imported: a CuPy array was passed): the handle of
    cupy.cuda.get_current_stream(), 0 for its default (legacy) stream."""
    return int(sys.modules["cupy"].cuda.get_current_stream().ptr)


def is_cupy(obj) -> bool:
    """A CuPy array, told by its type's module so cupy is never imported to ask."""
    return type(obj).__module__.split(".", 1)[0] == "cupy"


def torch_current(ordinal: int) -> int:
    """torch's current stream on device `ordinal` (torch is already imported: a torch tensor was passed).
    torch._C._cuda_getCurrentRawStream is what Triton's launcher reads; torch.cuda.current_stream is the
    public fallback."""
    global _torch_raw_stream
    if _torch_raw_stream is None:
        torch = sys.modules["torch"]
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else lambda d: torch.cuda.current_stream(d).cuda_stream
    return _torch_raw_stream(ordinal)


def is_capturing(stream: driver.CUstream) -> bool:
    """Whether `stream` is being captured into a CUDA graph (cuStreamIsCapturing)."""
    status = call(driver.cuStreamIsCapturing, stream)
    return status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
