"""Transaction bytes: what each barrier phase expects (expect_tx) against what it receives (the bytes of the
async copies that complete on it, complete_tx), counted per thread that runs them.

Rules: expect-tx-mismatch (the two differ when a wait ends the phase), tx-count-range (a phase expects more
than 2^20-1 bytes).

A count that depends on a parameter, or a box whose map the launch binds, is a linear form (verify/symbols.py).
A phase whose two sides differ by a constant is an error now; one whose difference still holds a symbol
becomes a launch check (in the walk that prepares them), and, where one expect_tx's register alone decides
it, a device check in debug mode (the register must hold the bytes the loads deliver).
"""
from __future__ import annotations

from ..isa.effects import Arrive, CompleteTx, ExpectTx
from . import mbarrier
from .deferred import TxCheck, launchable
from .facts import key_name
from .state import ZERO, imm, line, lines, times
from .symbols import Lin, is_static

MAX_TX = (1 << 20) - 1


def expect(cx, s, key, tx, st, ctx):
    """The current phase of `key` expects `tx` more bytes from every thread that runs `s`."""
    x = cx.value(tx)
    n = times(x, ctx.mult)
    if isinstance(x, Lin) and ctx.mult is not None:
        cx.tx_terms[s] = (tx, ctx.mult, x)
    for k in mbarrier.keys_of(st, key):
        acc = st.acc.get(k, ZERO)
        if key[1] is None or acc is None or n is None:
            st.acc[k] = None
            continue
        st.acc[k] = frozenset((e + n, d) for e, d in acc)
        st.src[k] = st.src.get(k, ()) + (s,)
        if is_static(n) and any(is_static(e) and e + n > MAX_TX for e, _ in acc):
            cx.report("tx-count-range", f"mbarrier {key_name(k)} expects {max(e for e, _ in acc) + n} "
                      f"transaction bytes in one phase, over the {MAX_TX} an mbarrier can count", s)


def deliver(st, key, n, s=None):
    """`n` bytes (None: not static) arrive on the current phase of `key`."""
    for k in mbarrier.keys_of(st, key):
        acc = st.acc.get(k, ZERO)
        if key[1] is None or acc is None or n is None:
            st.acc[k] = None
            continue
        st.acc[k] = frozenset((e, d + n) for e, d in acc)
        if s is not None:
            st.src[k] = st.src.get(k, ()) + (s,)


def expect_tx(cx, s, e, st, ctx):
    key = mbarrier.bar_key(cx, e.bar, s) if not e.remote else None
    if key is not None:
        mbarrier.use(cx, key, s, st, ctx, "expect")
        expect(cx, s, key, e.tx, st, ctx)


def complete_tx(cx, s, e, st, ctx):
    key = mbarrier.bar_key(cx, e.bar, s) if not e.remote else None
    if key is not None:
        mbarrier.use(cx, key, s, st, ctx, "expect")
        deliver(st, key, times(cx.value(e.tx), ctx.mult), s)


def _counts_bytes(stmt) -> bool:
    """Whether `stmt` states transaction bytes itself (expect_tx, complete_tx) rather than copying them."""
    return any(isinstance(e, (Arrive, ExpectTx, CompleteTx)) for e in stmt.op.effects())


def close(cx, w, key, st, exact):
    """A wait on `key` ends its phase: the bytes expected and delivered must agree on every path."""
    acc = st.acc.get(key, ZERO)
    srcs = st.src.get(key, ())
    st.acc[key] = ZERO if exact else None
    st.src[key] = ()
    if acc is None or not exact:
        return
    wrong = sorted(((e, d) for e, d in acc if e != d), key=str)
    fixed = [(e, d) for e, d in wrong if is_static(e - d)]
    if fixed:
        _mismatch(cx, w, key, acc, srcs, *fixed[0])
        return
    for e, d in wrong:
        _unknown(cx, w, key, e, d, srcs)


def _mismatch(cx, w, key, acc, srcs, e, d):
    expects = [s for s in srcs if _counts_bytes(s)]
    loads = [s for s in srcs if s not in expects]
    path = " on one path" if len(acc) > 1 else ""
    name = key_name(key)
    if e == 0:
        msg = (f"the TMA load(s) at {lines(loads)} deliver {d} bytes to mbarrier {name}, but no expect_tx "
               f"precedes the wait at {line(w)}{path}: the phase can complete before the data lands")
    elif d == 0:
        msg = (f"mbarrier {name} expects {e} transaction bytes{path}, but no TMA load completes on it before "
               f"the wait at {line(w)}: the wait never returns")
    else:
        msg = (f"mbarrier {name} expects {e} transaction bytes{path}, but the TMA load(s) at {lines(loads)} "
               f"deliver {d} before the wait at {line(w)}: "
               + ("the wait never returns" if e - d > 0 else "the tx-count underflows"))
    cx.report("expect-tx-mismatch", msg, *(expects or loads), w, *srcs)


def _unknown(cx, w, key, e, d, srcs):
    """Expected and delivered bytes that depend on the arguments: a launch check (parameters and maps), and a
    device check where one expect_tx register decides the phase and the loads' bytes are static."""
    expects = [s for s in srcs if _counts_bytes(s)]
    loads = [s for s in srcs if s not in expects]
    if cx.blind:
        if launchable(e, d):
            cx.defer(TxCheck((expects or loads or [w])[0].loc, key_name(key), e, d, lines(loads), line(w)),
                     *(expects or loads), w, *srcs)
        return
    if not is_static(d):
        return
    mine = [s for s in dict.fromkeys(expects) if s in cx.tx_terms]
    if len(mine) != 1:
        return
    s = mine[0]
    reg, mult, x = cx.tx_terms[s]
    rest = e - x * mult
    if not is_static(rest) or (d - rest) % mult or d - rest < 0:
        return
    cx.device_check(s, ("tx", reg, (d - rest) // mult, key_name(key), lines(loads)), *srcs, w)
