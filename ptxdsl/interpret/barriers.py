"""mbarriers (phases, pending arrivals, transaction bytes), the CTA barriers of bar.sync, the cluster barrier,
and the waiters a blocked lane holds (each says when it is over and how a deadlock report names it).

Asynchronous copies complete when they are issued (ordering in the interpreter is sequential), so a bulk
group is complete as soon as it is committed: cp.async.bulk.wait_group never waits. What a GPU would do
later (the TMA engine's complete_tx, the store's read of shared memory) happens at the issuing instruction.
"""
from __future__ import annotations

from .errors import InterpretError


class MBarrier:
    """An initialised mbarrier: `expected` arrivals per phase, `pending` left in the current phase, `tx` the
    transaction bytes still expected (negative when bytes arrived before they were expected), `phase` the number
    of phases completed so far (the current phase's parity is phase & 1)."""

    __slots__ = ("expected", "pending", "tx", "phase", "where")

    def __init__(self, count: int, where: str):
        self.expected = count
        self.pending = count
        self.tx = 0
        self.phase = 0
        self.where = where

    def _settle(self, sched) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
            sched.progress += 1

    def arrive(self, n: int, drop: bool, sched) -> int:
        """`n` arrivals (arrive_drop: also `n` fewer expected from now on); the phase they arrived in."""
        phase = self.phase
        if drop:
            self.expected -= n
        self.pending -= n
        if self.pending < 0:
            raise InterpretError(f"{n} arrival(s) on the mbarrier at {self.where} in phase {self.phase}, which had "
                                 f"{self.pending + n} pending: more arrivals than the barrier expects",
                                 rule="interpret.mbarrier-overflow")
        self._settle(sched)
        return phase

    def expect_tx(self, nbytes: int, sched) -> None:
        self.tx += nbytes
        self._settle(sched)

    def complete_tx(self, nbytes: int, sched) -> None:
        self.tx -= nbytes
        self._settle(sched)

    def state(self) -> str:
        return (f"phase {self.phase} (parity {self.phase & 1}), {self.pending} of {self.expected} arrivals pending, "
                f"{self.tx} transaction bytes pending")


class MbarrierWait:
    """Lanes waiting (mbarrier.try_wait in a wait loop) for the phase of `parity` (or after token `token`)."""

    def __init__(self, cta, offset: int, bar: MBarrier, parity, token, loc, step):
        self.cta, self.offset, self.bar, self.parity, self.token, self.loc, self.step = \
            cta, offset, bar, parity, token, loc, step

    def done(self) -> bool:
        if self.token is not None:
            return self.bar.phase > self.token
        return (self.bar.phase & 1) != self.parity

    def ready(self, warp, lanes) -> bool:
        return self.done()

    def release(self, warp, lanes) -> None:
        pass                                    # the lanes run the wait again, which now succeeds

    def report(self) -> str:
        what = f"parity {self.parity}" if self.token is None else f"the phase after token {self.token}"
        return f"mbarrier.try_wait on {self.bar.where} for {what}: {self.bar.state()}"


class CtaBarrier:
    """bar.sync `id` of one CTA: the threads that arrived in its current round, and the warps waiting."""

    def __init__(self, ident: int):
        self.id = ident
        self.arrived = 0
        self.count = None
        self.round = 0

    def report(self, cta) -> str:
        need = self.count if self.count is not None else cta.live_threads()
        return f"bar.sync {self.id}: {self.arrived} of {need} threads arrived"


class BarWait:
    def __init__(self, cta, barrier: CtaBarrier, round_: int, loc):
        self.cta, self.barrier, self.round, self.loc = cta, barrier, round_, loc

    def ready(self, warp, lanes) -> bool:
        return self.barrier.round > self.round

    def release(self, warp, lanes) -> None:
        warp.pc[lanes] += 1

    def report(self) -> str:
        return self.barrier.report(self.cta)


class ClusterWait:
    """barrier.cluster.wait: lanes wait until the cluster barrier's phase passes the one they arrived in."""

    def __init__(self, cluster, phase: int, loc):
        self.cluster, self.phase, self.loc = cluster, phase, loc

    def ready(self, warp, lanes) -> bool:
        return self.cluster.phase > self.phase

    def release(self, warp, lanes) -> None:
        warp.pc[lanes] += 1

    def report(self) -> str:
        c = self.cluster
        return f"barrier.cluster.wait: {c.arrived} of {c.live_threads()} threads of the cluster arrived"


class WarpgroupWait:
    """Warps of a warpgroup waiting at a .sync.aligned warpgroup instruction for the others (wgmma.mma_async)."""

    def __init__(self, cta, meeting: dict, what: str, loc):
        self.cta, self.meeting, self.round, self.what, self.loc = cta, meeting, meeting["round"], what, loc

    def ready(self, warp, lanes) -> bool:
        return self.meeting["round"] > self.round

    def release(self, warp, lanes) -> None:
        warp.pc[lanes] += 1

    def report(self) -> str:
        return f"{self.what}: {len(self.meeting['arrived'])} of the warpgroup's 4 warps arrived"
