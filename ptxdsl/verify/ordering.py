"""Flags between threads against the async proxy: what a release publishes of TMA's global writes, and what a
TMA read sees after an acquire.

Rules: bulk-store-release (a release store, atomic or fence comes after a TMA store, reduce or bulk copy to
global memory that the thread has not seen complete with cp.async.bulk.wait_group (not .read) and fenced with
fence.proxy.async.global: a thread that acquires the flag may read the old bytes), acquire-async-fence (a TMA or
bulk op reads global memory after an acquiring load or atomic with no fence.proxy.async.global in between: it may
read what was there before the writes the acquire made visible).
"""
from __future__ import annotations

from .groups import WRITE
from .state import Pending, line


def bulk(cx, s, e, st, ctx):
    """A TMA/bulk op on global memory: a read must not follow an unfenced acquire; a write joins the thread's
    current bulk group."""
    if e.read and st.acquired_unfenced:
        a = st.acquired_unfenced[0]
        cx.report("acquire-async-fence", f"this TMA op reads global memory after the acquire at {line(a.stmt)} with "
                  f"no fence.proxy.async.global in between: the async proxy may read what was there before the "
                  f"writes the acquire made visible", s, a.stmt)
    if e.write:
        st.asyncg = st.asyncg.add("bulk", WRITE, Pending(None, s, region=ctx.region))


def fence(cx, s, e, st, ctx):
    """fence.proxy.async.global (or of every space) orders completed TMA writes before later generic accesses,
    and an acquire before later TMA reads. fence.proxy.tensormap::generic acquire after an acquire says what the
    flag published: a tensor map in its slot, which the TMA ops after it read through (their data is not the
    flag's)."""
    if e.proxy == "async" and e.space in (None, "global"):
        st.writes_unfenced, st.acquired_unfenced = (), ()
    elif e.proxy == "tensormap" and e.sem == "acquire":
        st.acquired_unfenced = ()


def order(cx, s, e, st, ctx):
    if e.releases:
        pending = tuple(x.item for x in st.asyncg.pending("bulk", WRITE))
        if pending:
            cx.report("bulk-store-release", f"this release may be seen before the TMA write at "
                      f"{line(pending[0].stmt)} has reached global memory: cp.async.bulk.commit_group, "
                      f"cp.async.bulk.wait_group 0 (not .read) and fence.proxy.async.global first", s,
                      pending[0].stmt)
        elif st.writes_unfenced:
            cx.report("bulk-store-release", f"the TMA write at {line(st.writes_unfenced[0].stmt)} is complete but "
                      f"not ordered before this release: fence.proxy.async.global between them", s,
                      st.writes_unfenced[0].stmt)
    if e.acquires and not e.fence:      # an acquire that read something (a flag), not a fence kept for other reasons
        st.acquired_unfenced = st.acquired_unfenced + (Pending(None, s, region=ctx.region),)
