"""Collective instructions in divergent code.

Rules: sync-aligned-divergent (a .sync/.aligned warp-collective instruction where only some lanes of a warp
run it; one whose member mask statically names only some lanes is fine there), barrier-divergent (a barrier
every thread of the CTA or cluster must reach, where only some warps run it).
"""
from __future__ import annotations

from ..isa.effects import Barrier, Collective

FULL_MASK = 0xFFFFFFFF


def _partial(cx, e: Collective) -> bool:
    """Whether the member mask is a constant naming only some lanes."""
    if e.mask is None:
        return False
    m = cx.facts.get(e.mask).const
    return m is not None and m & FULL_MASK != FULL_MASK


def check(cx, s, effects, ctx):
    """Checks one instruction's Collective and Barrier effects against the code's divergence."""
    if not (ctx.lane_div or ctx.warp_div):
        return
    what = s.op.what
    collective = [e for e in effects if isinstance(e, Collective)]
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
