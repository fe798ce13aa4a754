"""Ordinary shared-memory accesses against the async proxy.

Rules: tma-load-race (a generic load/store, or an async read, touches a buffer while a TMA load into it may
be in flight; the kernel exits with a load not waited for), async-proxy-fence (an async copy reads shared
memory that st.shared wrote with no fence.proxy.async in between).
"""
from __future__ import annotations

from . import bulk_groups
from .facts import key_name
from .state import Pending, first_overlap, line

GENERIC_SHARED = ("shared", "shared::cta", "")     # spaces whose accesses may touch this CTA's shared memory


def access(cx, s, e, st, ctx):
    """An ld / st / atom: it must not race a load in flight; a write is unfenced until fence.proxy.async."""
    if e.space not in GENERIC_SHARED:
        return
    rng = cx.rng(e.addr, e.nbytes)
    if rng is None:
        return
    if x := first_overlap(st.inflight, rng):
        verb = "writes" if e.write else "reads"
        cx.report("tma-load-race", f"this {verb} {key_name((rng.alloc, rng.off))} while the TMA load at "
                  f"{line(x.stmt)} into it may still be in flight: wait on its mbarrier first", s, x.stmt)
    if e.write:
        bulk_groups.overwrite(cx, s, rng, st)
        st.dirty = st.dirty + (Pending(rng, s),)


def async_source(cx, s, src, st):
    """An async copy reads `src`: generic writes to it need a proxy fence first, and no load may be
    writing it."""
    if src is None:
        return
    if x := first_overlap(st.dirty, src):
        cx.report("async-proxy-fence", f"this bulk copy reads {key_name((src.alloc, src.off))}, which "
                  f"st.shared wrote at {line(x.stmt)} with no fence.proxy.async.shared::cta in between: "
                  f"the async proxy may read stale data", s, x.stmt)
    if x := first_overlap(st.inflight, src):
        cx.report("tma-load-race", f"this bulk copy reads {key_name((src.alloc, src.off))} while the "
                  f"TMA load at {line(x.stmt)} into it may still be in flight; wait on its barrier "
                  f"first", s, x.stmt)


def fence(cx, s, e, st, ctx):
    """fence.proxy.async (of shared memory or of every space) makes earlier generic writes visible to the
    async proxy."""
    if e.proxy == "async" and e.space != "global":
        st.dirty = ()


def sync(cx, s, e, st, ctx):
    """A barrier that waits retires the loads some thread has waited for."""
    if e.wait:
        st.inflight = tuple(x for x in st.inflight if not x.waited)


def exit(cx, s, e, st, ctx):
    """The kernel ends (at `s`, or at its end when s is None): no load may still be writing."""
    loads = [x for x in st.inflight if not x.waited]
    if loads:
        cx.report("tma-load-race", f"the kernel exits {f'at {line(s)}' if s is not None else 'at its end'} "
                  f"while the TMA load at {line(loads[0].stmt)} may still be writing its shared memory; wait "
                  f"on its mbarrier first", s if s is not None else loads[0].stmt, loads[0].stmt)
