"""Loop continuation: which loads the next iterations retire.

A load issued only where a loop test such as `t + STAGES < n` proves that more iterations follow is left to
those iterations to wait for, as the walk's second pass over the loop retired the first pass's. This module
reads the loop counters (`d = counter + c`) and the tests on them out of the Compute effects, and drops
such loads from the loads in flight after the loop. It reports nothing itself: what it proves keeps
tma-load-race from firing on a ring's last refills.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import PredNot, Reg
from ..isa.effects import Compute
from ..types import pred

_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
_NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
_UNSIGNED_CMP = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def counters(cx, effects, st, ctx):
    """What an instruction will tell of the enclosing loops' counters, read from its operands before it runs:
    (cx.offsets, d, (loop, counter version, c)) for `d = counter + c`; (cx.bounds, d, (loops proven when
    true, when false)) for a setp that proves another iteration follows (`t + STAGES < n`), and for the
    and/or/not of such predicates. None otherwise."""
    e = next((x for x in effects if isinstance(x, Compute)), None)
    if e is None:
        return None
    if e.type is pred:
        if e.fn not in ("and", "or", "not"):
            return None
        a = _proven(cx, e.args[0], st) or (frozenset(), frozenset())
        if e.fn == "not":
            when = a[::-1]
        else:
            b = _proven(cx, e.args[1], st) or (frozenset(), frozenset())
            when = (a[0] | b[0], frozenset()) if e.fn == "and" else (frozenset(), a[1] | b[1])
        return (cx.bounds, e.dst, when) if when[0] or when[1] else None
    if e.type.kind == "f":
        return None
    if e.fn in ("add", "sub"):
        x0, y0 = e.args
        for x, y in ((x0, y0), (y0, x0))[:2 if e.fn == "add" else 1]:
            for loop, _ in ctx.loops:
                off = _counter(cx, x, loop, st)
                c = None if off is None else _const(cx, y)
                if c is not None:
                    return cx.offsets, e.dst, (loop, st.ver.get(loop.var, 0), off + (c if e.fn == "add" else -c))
        return None
    if not e.fn.startswith("setp."):
        return None
    a, b = e.args
    cmp = _UNSIGNED_CMP.get(e.fn[5:], e.fn[5:])
    if cmp not in _NEGATE or not any(_counter(cx, v, loop, st) is not None for v in (a, b) for loop, _ in ctx.loops):
        return None
    when = tuple(frozenset((loop, st.ver.get(loop.var, 0), n) for loop, _ in ctx.loops
                           for n in (_continues(cx, c, a, b, loop, st),) if n) for c in (cmp, _NEGATE[cmp]))
    return (cx.bounds, e.dst, when) if when[0] or when[1] else None


def _proven(cx, v, st):
    """(when true, when false): the (loop, counter version) a predicate set in this state proves continue."""
    p = v.reg if isinstance(v, PredNot) else v
    rec = cx.bounds.get(p) if isinstance(p, Reg) else None
    if rec is None or rec[0] != st.ver.get(p, 0):
        return None
    return (rec[2], rec[1]) if isinstance(v, PredNot) else rec[1:]


def _const(cx, v):
    return cx.facts.get(v).const


def _counter(cx, v, loop, st):
    """c when `v` holds this iteration's counter of `loop` plus the constant c (None otherwise)."""
    if v is loop.var:
        return 0 if cx.facts.ndefs.get(v) == 2 else None     # written by the loop alone
    rec = cx.offsets.get(v)
    if rec is not None and rec[1] is loop and rec[0] == st.ver.get(v, 0) and rec[2] == st.ver.get(loop.var, 0):
        return rec[3]
    return None


def _stop_offset(cx, v, loop):
    """c when `v` is the stop bound of `loop` plus the constant c (None otherwise)."""
    k, stop = _const(cx, v), _const(cx, loop.stop)
    if k is not None and stop is not None:
        return k - stop
    if v is loop.stop and isinstance(v, Reg) and cx.facts.ndefs.get(v, 0) <= 1:
        return 0
    return None


def _continues(cx, cmp, a, b, loop, st) -> int:
    """How many more iterations of `loop` `a cmp b` holding proves to follow this one (0: none)."""
    if cmp in ("gt", "ge"):
        a, b, cmp = b, a, _SWAP[cmp]
    if cmp not in ("lt", "le"):
        return 0
    slack = int(cmp == "le")                            # a < b + slack
    if loop.step > 0:           # counter + ca < stop + cb + slack; iteration j follows if counter + j*step < stop
        ca, cb = _counter(cx, a, loop, st), _stop_offset(cx, b, loop)
        return 0 if ca is None or cb is None else max(0, (ca - cb - slack) // loop.step)
    ca, cb = _counter(cx, b, loop, st), _stop_offset(cx, a, loop)
    return 0 if ca is None or cb is None else max(0, (cb - ca - slack) // -loop.step)


def later(cx, cond, st) -> frozenset:
    """The (loop, pass, n) of the enclosing loops with at least n more iterations where `cond` holds: a
    predicate set in this iteration (the counter's version is the same) by a continuation test such as
    `t + STAGES < n`."""
    proven = _proven(cx, cond, st)
    if proven is None:
        return frozenset()
    return frozenset((loop, cx.passes[loop], n) for loop, ver, n in proven[0] if st.ver.get(loop.var, 0) == ver)


def _ahead(later, s, p) -> int:
    """How many more iterations of loop `s` (in pass p) `later` proves to follow (0: none)."""
    return max((n for loop, q, n in later if loop is s and q == p), default=0)


def _ring(x) -> int:
    """The iterations after its issue in which a load is waited on: the barrier array's length for a load
    on a slot computed at run time (a ring advances one slot per iteration), else 1."""
    return max(1, x.key[0].nbytes // 8) if x.key is not None and x.key[1] is None else 1


def carry(cx, s, st, last):
    """Loads still in flight after the last pass (`last`) of loop `s` that were issued only where more
    iterations follow (`if t + STAGES < n`: no drain loop needed). With one pass they never run; after
    the second, the iteration that follows retires each as the second pass retired the same load issued
    by the first (gone from the loads in flight, or waited), when at least as many iterations follow as
    the load's ring has slots: in a 3-slot ring, `t + 1 < n` leaves the last two refills unwaited."""
    if not any(_ahead(x.later, s, last) for x in st.inflight):
        return
    before = {x.stmt: x for x in st.inflight if _ahead(x.later, s, 1)} if last == 2 else {}
    out = []
    for x in st.inflight:
        ahead = _ahead(x.later, s, last)
        if ahead and (last == 1 or ahead >= _ring(x)):
            prev = before.get(x.stmt)
            if prev is None:
                continue
            x = replace(x, waited=x.waited or prev.waited)
        out.append(x)
    st.inflight = tuple(out)
