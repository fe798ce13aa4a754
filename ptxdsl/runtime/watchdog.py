"""Debug mode, the host side: the 16-byte record a debug kernel's waits write before they trap (mapped, pinned
host memory), passed as the kernel's hidden parameter, and the KernelTrap it turns into (ptxdsl.watchdog is
the kernel side)."""
from __future__ import annotations

import ctypes

from cuda.bindings import driver

from ..errors import KernelTrap
from ..watchdog import PARAM, RECORD_BYTES, STATE_WAIT
from .driver import check


class Record:
    """The record of one debug launch."""

    def __init__(self):
        self._host = check(driver.cuMemHostAlloc(RECORD_BYTES, driver.CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc")
        ctypes.memset(int(self._host), 0, RECORD_BYTES)
        self.device_ptr = int(check(driver.cuMemHostGetDevicePointer(self._host, 0), "cuMemHostGetDevicePointer"))

    def with_argument(self, info, args) -> list:
        """The launch arguments with the record's address in the hidden parameter's place."""
        args = list(args)
        args.insert([p.name for p in info.params].index(PARAM), self.device_ptr)
        return args

    def _words(self):
        return (ctypes.c_uint32 * 4).from_address(int(self._host))

    def trap(self, info) -> KernelTrap | None:
        """The exception for the wait that gave up, or None when the record names no wait of this kernel."""
        words = self._words()
        site, parity = int(words[0]), int(words[1])
        if not 1 <= site <= len(info.wait_sites):
            return None
        loc, bar, operand = info.wait_sites[site - 1]
        phase = f"the phase of state token {operand}" if parity == STATE_WAIT else f"phase parity {parity}"
        return KernelTrap(f"kernel {info.name!r} gave up waiting on mbarrier {bar!r} for {phase} (debug mode): "
                          f"the phase never completed; check its arrival count and expect_tx bytes (the CUDA "
                          f"context is unusable after the trap)", loc, rule="debug-watchdog")

    def free(self):
        driver.cuMemFreeHost(self._host)
