"""Collective instructions in divergent code.

Rules: sync-aligned-divergent (a .sync/.aligned warp-collective instruction where only some lanes of a warp
run it; one whose member mask statically names only some lanes is fine there), barrier-divergent (a barrier
every thread of the CTA or cluster must reach, where only some warps run it), wgmma-warpgroup-divergent (a
warpgroup-collective instruction, wgmma.* or setmaxnreg, where only some warps of a warpgroup run it, or in a
kernel whose block is not whole warpgroups).
"""
from __future__ import annotations

import math

from ..isa.effects import Barrier, Collective, CommitGroup, WaitGroup

FULL_MASK = 0xFFFFFFFF


def _partial(cx, e: Collective) -> bool:
    """Whether the member mask is a constant naming only some lanes."""
    if e.mask is None:
        return False
    m = cx.facts.get(e.mask).const
    return m is not None and m & FULL_MASK != FULL_MASK


WARPGROUP = 128


def _warpgroup(cx, s, ctx) -> None:
    """A warpgroup-collective instruction: all 128 threads of the warpgroup (four consecutive warps, the first a
    multiple of 4) execute it together, so the code must be warpgroup-uniform (conditions on tid / 128, not
    on the warp or the lane) and the block whole warpgroups."""
    what = s.op.what
    if ctx.group_div:
        cx.report("wgmma-warpgroup-divergent", f"{what} is a warpgroup-collective instruction, but here only some "
                  f"threads of a warpgroup run it (it is under a condition on the lane, the warp or elect); all 128 "
                  f"threads of the warpgroup must execute it together: branch on a warpgroup index "
                  f"(tid / 128) instead", s)
        return
    ntid = cx.k.directives.get("reqntid") or cx.k.directives.get("maxntid")
    n = math.prod(ntid) if ntid else None
    if n is not None and n % WARPGROUP:
        cx.report("wgmma-warpgroup-divergent", f"{what} is a warpgroup-collective instruction, but the block has "
                  f"{n} threads, not a whole number of 128-thread warpgroups: the last warpgroup is incomplete", s)


def check(cx, s, effects, ctx):
    """Checks one instruction's Collective and Barrier effects against the code's divergence."""
    collective = [e for e in effects if isinstance(e, Collective)]
    if any(e.scope == "warpgroup" for e in collective) or any(
            isinstance(e, (CommitGroup, WaitGroup)) and e.queue == "wgmma" for e in effects):   # the warpgroup's queue
        _warpgroup(cx, s, ctx)
        return
    if not (ctx.lane_div or ctx.warp_div):
        return
    what = s.op.what
    if any(_partial(cx, e) for e in collective):
        return
    if collective and ctx.lane_div:
        cx.report("sync-aligned-divergent", f"{what} is a warp-collective (.sync/.aligned) instruction, but "
                  f"here only some lanes of a warp run it (it is under a condition on %tid/%laneid/elect); "
                  f"all 32 lanes must execute it together", s)
        return
    for e in effects:
        if isinstance(e, Barrier) and e.count is None and ctx.warp_div:
            cx.report("barrier-divergent", f"{what} waits for every thread of the "
                      f"{'CTA' if e.scope == 'cta' else 'cluster'}, but here only some warps run it: it deadlocks",
                      s)
