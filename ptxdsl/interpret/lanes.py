"""A warp's state: 32 lanes vectorised with numpy. Each lane has its own program counter, and the warp runs
the lanes that sit at the lowest counter among those that can run (the others wait there): divergent paths
run one after the other and reconverge where the counters meet again, whatever the branches (structured
blocks, labels and bra alike). A lane is `alive` until it exits, `blocked` while it waits on a barrier."""
from __future__ import annotations

import numpy as np

WARP = 32
U64 = np.uint64


class Regs(dict):
    """Register -> lanes (uint64 bits, or bool for .pred); a register read before any write reads zeros."""

    def __missing__(self, reg):
        v = np.zeros(WARP, bool if reg.type.kind == "pred" else U64)
        self[reg] = v
        return v


class Warp:
    """One warp of a CTA: its lanes' registers, counters and masks, and what its blocked lanes wait for."""

    def __init__(self, cta, index: int, tids, nthreads: int):
        self.cta = cta
        self.index = index                       # warp index in the CTA
        self.regs = Regs()
        self.pc = np.zeros(WARP, np.int64)
        lane_tid = index * WARP + np.arange(WARP)
        self.alive = lane_tid < nthreads
        self.blocked = np.zeros(WARP, bool)
        self.waits: list = []                    # [lanes mask, Waiter] of blocked lanes
        self.tid = tids                          # (x, y, z) lanes of %tid
        self.steps = 0
        self.where = None                        # the source line of the last step (deadlock reports)
        self.cluster_phase = np.zeros(WARP, np.int64)   # per lane: the cluster barrier phase it arrived in
        self.polled = -1                         # the scheduler's progress count when its waits were last polled

    @property
    def done(self) -> bool:
        return not self.alive.any()

    def runnable(self) -> np.ndarray:
        return self.alive & ~self.blocked

    def exit(self, lanes: np.ndarray) -> None:
        """The lanes end (ret, exit): barriers no longer wait for them."""
        self.alive &= ~lanes
        self.cta.lane_exited()

    def block(self, lanes: np.ndarray, waiter) -> None:
        self.blocked |= lanes
        self.waits.append([lanes.copy(), waiter])

    def wake(self) -> bool:
        """Unblock lanes whose wait is over; whether any did."""
        woke = False
        keep = []
        for lanes, waiter in self.waits:
            lanes &= self.alive
            if not lanes.any():
                continue
            if waiter.ready(self, lanes):
                self.blocked &= ~lanes
                waiter.release(self, lanes)
                woke = True
            else:
                keep.append([lanes, waiter])
        self.waits = keep
        return woke

    def describe(self) -> str:
        c = self.cta
        return f"CTA {c.ctaid} warp {self.index}"
