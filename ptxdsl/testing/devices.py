"""Which GPU each pytest-xdist worker uses: one worker per device.

The controller counts the devices (cuInit, in the controller only) and hands worker gwN the N-th one (round
robin when there are more workers than devices) through xdist's workerinput; the worker sets
CUDA_VISIBLE_DEVICES to it before anything initialises CUDA, so its tests, and the processes they start,
see that one device as device 0.
"""
from __future__ import annotations

import functools
import os
import re


@functools.cache
def visible() -> tuple[str, ...]:
    """The CUDA_VISIBLE_DEVICES entries of the devices this process's driver sees (indices when the
    variable is unset); empty without a driver or a device."""
    try:
        from ..runtime.driver import driver_available
    except ImportError:                     # cuda-bindings missing: no device to spread over
        return ()
    if not driver_available():
        return ()
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS:
        return ()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [e.strip() for e in listed.split(",") if e.strip()] if listed else [str(i) for i in range(count)]
    return tuple(entries[:count])


def worker_index(worker_id: str) -> int:
    """3 for xdist's worker id 'gw3'."""
    m = re.fullmatch(r"gw(\d+)", worker_id)
    if not m:
        raise ValueError(f"worker id {worker_id!r}: expected gw<N>")
    return int(m.group(1))


def device_for(worker_id: str, devices) -> str:
    """The CUDA_VISIBLE_DEVICES entry of one worker: the devices in turn."""
    return devices[worker_index(worker_id) % len(devices)]
