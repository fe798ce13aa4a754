"""Transaction bytes: what each barrier phase expects (expect_tx) against what it receives (the bytes of the
async copies that complete on it, complete_tx), counted per thread that runs them.

Rules: expect-tx-mismatch (the two differ when a wait ends the phase), tx-count-range (a phase expects more
than 2^20-1 bytes).
"""
from __future__ import annotations

from ..isa.effects import Arrive, CompleteTx, ExpectTx
from . import mbarrier
from .facts import key_name
from .state import ZERO, imm, line, lines, times

MAX_TX = (1 << 20) - 1


def expect(cx, s, key, tx, st, ctx):
    """The current phase of `key` expects `tx` more bytes from every thread that runs `s`."""
    n = times(imm(tx), ctx.mult)
    for k in mbarrier.keys_of(st, key):
        acc = st.acc.get(k, ZERO)
        if key[1] is None or acc is None or n is None:
            st.acc[k] = None
            continue
        st.acc[k] = frozenset((e + n, d) for e, d in acc)
        st.src[k] = st.src.get(k, ()) + (s,)
        if any(e + n > MAX_TX for e, _ in acc):
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
        deliver(st, key, times(imm(e.tx), ctx.mult), s)


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
    bad = sorted((e, d) for e, d in acc if e != d)
    if not bad:
        return
    e, d = bad[0]
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
               + ("the wait never returns" if e > d else "the tx-count underflows"))
    cx.report("expect-tx-mismatch", msg, *(expects or loads), w, *srcs)
