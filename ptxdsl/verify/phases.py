"""Waits and phase parity: a wait loop ends its barrier's phase; the parity it names must be the phase
still pending.

Rules: phase-reuse (a wait names the parity of a phase that already completed while the current one is
pending: it returns at once), loop-parity (a loop waits on the same barrier with the same parity every
iteration), wait-before-arrive (every thread waits for a phase before the arrive that completes it).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Reg
from . import mbarrier, transactions
from .facts import key_name
from .state import ZERO, LastWait, imm, line


def may_complete(load_key, wait_key) -> bool:
    """Whether a wait on wait_key may be the one a load on load_key completes on."""
    if load_key is None or load_key == wait_key:
        return True
    return load_key[0] is wait_key[0] and None in (load_key[1], wait_key[1])


def _pending(st, key) -> bool:
    """Whether the barrier's current phase has expected or delivered bytes, arrivals or loads in flight."""
    acc = st.acc.get(key, ZERO)
    return (acc is not None and any(p != (0, 0) for p in acc)) or key in st.arrived \
        or any(x.key == key for x in st.inflight)


def poll(cx, s, e, st, ctx):
    """One test_wait / try_wait outside a wait loop: the loads on its barrier may have landed."""
    key = mbarrier.bar_key(cx, e.bar, s)
    if key is not None:
        mbarrier.use(cx, key, s, st, ctx, "poll")
    st.inflight = tuple(replace(x, waited=True) if key is None or x.key is None or x.key[0] is key[0] else x
                        for x in st.inflight)


def wait_loop(cx, w, e, st, ctx):
    """A wait loop on e.bar: its phase of e.parity completes, the next one starts."""
    key = mbarrier.bar_key(cx, e.bar, w)
    if key is None:
        st.inflight = tuple(x for x in st.inflight if x.key is not None)
        st.acc = {k: None for k in st.acc}
        return
    mbarrier.use(cx, key, w, st, ctx, "wait")
    par = imm(e.parity)
    cur = st.phase.get(key) if key[1] is not None else None
    prev = st.last.get(key)
    if e.parity is not None:
        st.last[key] = LastWait(cx.token(st, e.parity), w)
    if isinstance(e.parity, Reg) and prev is not None and prev.token == st.last[key].token:
        _same_parity(cx, w, key, prev, ctx, e.parity.name)
    if par is not None and cur is not None and par != cur:
        if not _pending(st, key):
            return
        _same_parity(cx, w, key, prev, ctx, par)
        par = cur           # reported once; go on as if it waited for the current phase
    elif not ctx.region and key[1] is not None and key not in st.arrived and key in cx.arrive_sites \
            and not cx.remote_arrives:
        cx.report("wait-before-arrive", f"every thread waits here on mbarrier {key_name(key)} for a phase "
                  f"nothing has arrived on yet; the arrive comes later in program order, so the thread that "
                  f"would make it is itself stuck in this wait (deadlock)", w)
    for k in mbarrier.keys_of(st, key):
        transactions.close(cx, w, k, st, exact=key[1] is not None)
        st.phase[k] = (par ^ 1) if par is not None and key[1] is not None else None
        st.arrived.discard(k)
    st.closed.add(key)
    st.inflight = tuple(x for x in st.inflight if not may_complete(x.key, key))


def _same_parity(cx, w, key, prev, ctx, shown):
    loops = dict(ctx.loops)
    name = key_name(key)
    if prev is not None and prev.prev_loop is not None and prev.prev_loop in loops:
        trips = loops[prev.prev_loop]
        if key[1] is None and (trips is None or trips <= key[0].nbytes // 8):
            return
        cx.report("loop-parity", f"every iteration of the loop waits on mbarrier {name} with parity {shown}: "
                  f"from the second iteration on the wait returns at once while the phase is still pending "
                  f"(flip the parity each time the barrier's phase completes)", w)
    elif key[1] is not None:
        after = f"like the wait at {line(prev.stmt)}" if prev is not None else "on a freshly initialised barrier"
        cx.report("phase-reuse", f"this wait on mbarrier {name} names parity {shown} {after}: that phase has "
                  f"already completed, so the wait returns at once while the current phase (its loads and "
                  f"arrivals) is still pending; wait on the other parity", w,
                  *(() if prev is None else (prev.stmt,)))
