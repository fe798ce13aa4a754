"""Debug mode, the host side: the record a debug kernel's waits and device checks write before they trap
(mapped, pinned host memory), passed as the kernel's hidden parameter, and the KernelTrap it turns into
(ptxdsl.watchdog is the kernel side)."""
from __future__ import annotations

import ctypes

from cuda.bindings import driver

from ..errors import KernelTrap
from ..watchdog import CHECK_WORD, PARAM, RECORD_BYTES, STATE_WAIT, VALUE_WORD
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
        return (ctypes.c_uint32 * (RECORD_BYTES // 4)).from_address(int(self._host))

    def trap(self, info) -> KernelTrap | None:
        """The exception for the device check that failed or the wait that gave up, or None when the record names
        neither."""
        words = self._words()
        failed = check_trap(info, int(words[CHECK_WORD // 4]), int(words[VALUE_WORD // 4]))
        if failed is not None:
            return failed
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


def check_trap(info, number: int, value: int) -> KernelTrap | None:
    """The KernelTrap of device check `number` (1-based, info.debug_checks) that saw `value`, or None."""
    checks = getattr(info, "debug_checks", None) or []
    if not 1 <= number <= len(checks):
        return None
    loc, kind, expected, what = checks[number - 1]
    if kind == "coord":
        signed = value - (1 << 32) if value >> 31 else value
        msg = (f"kernel {info.name!r}: the TMA box's innermost coordinate is {signed} ({what}), {signed % expected} "
               f"elements past a multiple of {expected}: the box would start off a 16-byte boundary, which TMA "
               f"rejects with an illegal instruction (debug mode checked it on the device and trapped; see "
               f"`ptxdsl docs coord-align`)")
        rule = "debug-coord-align"
    elif kind == "loop":
        msg = (f"kernel {info.name!r}: the loop back to label {what!r} went round for longer than {expected / 1e9:g} s "
               f"(debug mode): whatever it waits for never came true; check who sets it and that they run (debug mode "
               f"bounded the hand-written loop on the device and trapped)")
        rule = "debug-watchdog"
    else:
        msg = (f"kernel {info.name!r}: expect_tx arms {value} transaction bytes, but {what} deliver {expected}: "
               + ("the wait would never return" if value > expected else "the phase would complete before the data "
                  "lands") + " (debug mode checked it on the device and trapped; see `ptxdsl docs expect-tx-mismatch`)")
        rule = "debug-expect-tx"
    return KernelTrap(msg + " (the CUDA context is unusable after the trap)", loc, rule=rule)
