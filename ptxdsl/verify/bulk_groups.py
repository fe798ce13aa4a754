"""Bulk async-groups: a TMA store, reduce or bulk copy to global memory reads its shared source until
cp.async.bulk.wait_group.read says the group holding it is done (the 'bulk' queue of verify/groups.py, READ
entries).

Rules: bulk-group-pending (a shared buffer is overwritten while a bulk group reading it is pending; also found
by the run of the threads, verify/ring.py, for ring slots),
bulk-group-exit (the kernel exits with bulk reads not committed or not waited for).
"""
from __future__ import annotations

from .facts import key_name
from .groups import READ
from .state import Pending, first_overlap, line


def _pending(st):
    return tuple(x.item for x in st.asyncg.pending("bulk", READ))


def join(cx, s, src, st, ctx):
    """A bulk read of `src` joins this thread's current (uncommitted) group."""
    st.asyncg = st.asyncg.add("bulk", READ, Pending(src, s, region=ctx.region))


def overwrite(cx, s, rng, st):
    """Something writes `rng`: no pending bulk read may still be reading it. Where both sit at offsets the walk
    cannot place (register-indexed ring slots: the writer's stage and the store's may differ), the run of the
    threads decides (verify/ring.py), slot by slot."""
    pending = _pending(st)
    if rng.off is None:
        pending = tuple(x for x in pending if x.range is None or x.range.off is not None)
    if x := first_overlap(pending, rng):
        cx.report("bulk-group-pending", f"this writes {key_name((rng.alloc, rng.off))} while the bulk copy "
                  f"at {line(x.stmt)} may still be reading it; cp.async.bulk.commit_group and "
                  f"cp.async.bulk.wait_group.read first", s, x.stmt)


def exit(cx, s, e, st, ctx):
    """The kernel ends (at `s`, or at its end when s is None): every bulk read must be committed and waited."""
    pending = _pending(st)
    if not pending:
        return
    first = pending[0]
    how = "is not committed" if any(x.item is first for x in st.asyncg.queue("bulk").open) else "is not waited for"
    where = f"at {line(s)}" if s is not None else "at its end"
    cx.report("bulk-group-exit", f"the kernel exits {where} while the bulk copy at {line(first.stmt)} may still "
              f"read shared memory (it {how}); end with cp.async.bulk.commit_group and "
              f"cp.async.bulk.wait_group.read 0", s if s is not None else first.stmt, first.stmt)
