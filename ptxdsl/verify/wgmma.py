"""Tensor cores: setmaxnreg's register budget.

Rules (the walk): setmaxnreg-budget (a .dec that raises, an .inc that lowers, warpgroups whose counts overflow
the CTA's pool). wgmma-warpgroup-divergent is verify/divergence.py's.
"""
from __future__ import annotations

import math

from .state import line

REGISTER_FILE = 65_536          # 32-bit registers of an SM (sm_90)
MAX_PER_THREAD = 256            # the most setmaxnreg can ask for (ptxas gives a thread at most 255)


# ----------------------------------------------------------------------------------- setmaxnreg


def block_threads(k):
    ntid = k.directives.get("reqntid") or k.directives.get("maxntid")
    return math.prod(ntid) if ntid else None


def entry_registers(k):
    """The per-thread register count a thread starts with: .maxnreg, else what the register file gives each
    thread of `minnctapersm` blocks (rounded down to 8), or None when the block's size is not declared."""
    n = block_threads(k)
    if n is None:
        return k.directives.get("maxnreg")
    per = REGISTER_FILE // (n * max(1, k.directives.get("minnctapersm", 1))) // 8 * 8
    per = min(per, MAX_PER_THREAD)
    m = k.directives.get("maxnreg")
    return min(per, m) if m else per


def setmaxnreg(cx, s, e, st, ctx):
    """setmaxnreg: .dec must not raise and .inc must not lower the warpgroup's count; the count it leaves is the
    warpgroup's claim on the CTA's pool (checked at the kernel's end)."""
    now = st.nreg if st.nreg is not None else entry_registers(cx.k)
    if now is not None and (e.n > now if not e.inc else e.n < now):
        verb, back = ("dec", "raise") if not e.inc else ("inc", "lower")
        cx.report("setmaxnreg-budget", f"setmaxnreg.{verb} {e.n} would {back} the warpgroup's register count, "
                  f"which is {now} here ({'after the setmaxnreg at ' + line(st.nreg_at) if st.nreg_at else 'at entry'})"
                  f": .dec only lowers and .inc only raises (use setmaxnreg.{'inc' if not e.inc else 'dec'})", s)
    st.nreg, st.nreg_at = e.n, s
    st.nreg_claims = {**st.nreg_claims, ctx.region: (ctx.mult, e.n, s)}


def budget(cx, s, e, st, ctx):
    """At the kernel's end: the counts the warpgroups hold must fit the pool the CTA was launched with."""
    if not st.nreg_claims:
        return
    n, per = block_threads(cx.k), entry_registers(cx.k)
    if n is None or per is None:
        return
    claims = list(st.nreg_claims.values())
    if any(m is None for m, _, _ in claims):
        return
    covered = sum(m for m, _, _ in claims)
    if covered > n:
        return                      # overlapping claims (a count set twice on one path): not a sum
    total = sum(m * c for m, c, _ in claims) + (n - covered) * per
    pool = min(REGISTER_FILE, n * per)
    if total > pool:
        parts = " + ".join(f"{m} x {c}" for m, c, _ in claims) + (f" + {n - covered} x {per}" if n > covered else "")
        stmts = [x for _, _, x in sorted(claims, key=lambda c: -c[1])]      # the largest count first: it waits
        cx.report("setmaxnreg-budget", f"the warpgroups' register counts add up to {parts} = {total} registers, "
                  f"but the block of {n} threads starts with {per} each: a pool of {pool}; setmaxnreg.inc waits for "
                  f"registers that never come back (the kernel hangs); lower the counts so that they sum to at "
                  f"most {pool}", *stmts)
