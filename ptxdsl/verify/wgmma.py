"""Tensor cores: the warpgroup's mma_async pipeline against the registers it reads and writes, the shared memory
its descriptors read, the tensor maps that fill that memory, and setmaxnreg's register budget.

An mma_async joins the 'wgmma' queue of verify/groups.py twice: its registers (accumulators and A fragment, a
REGS entry) and each operand tile its descriptors name (a READ entry); wgmma.wait_group retires both.

Rules (the walk): wgmma-fence (an mma_async with no wgmma.fence before it on some path, or reading registers
written since the last fence), wgmma-proxy-fence (an operand tile written by generic stores with no
fence.proxy.async since), wgmma-pending (an accumulator or A register touched before the wait_group that retires
its group), wgmma-descriptor-map (a descriptor's layout and the tensor map that fills its buffer disagree),
setmaxnreg-budget (a .dec that raises, an .inc that lowers, warpgroups whose counts overflow the CTA's pool).
wgmma-warpgroup-divergent is verify/divergence.py's; wgmma-stage-release is the run's (verify/ring.py).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..ir import Reg, SharedAlloc, TensorMapRef
from ..isa.effects import AsyncWrite, MmaAsync, SetMaxNReg
from .facts import key_name
from .groups import READ, REGS
from .state import Pending, Range, first_overlap, line

REGISTER_FILE = 65_536          # 32-bit registers of an SM (sm_90)
MAX_PER_THREAD = 256            # the most setmaxnreg can ask for (ptxas gives a thread at most 255)


@dataclass(frozen=True)
class MmaRegs:
    """The registers an mma_async reads and writes until its group retires."""

    regs: frozenset
    stmt: object
    region: tuple = ()


def _regs(e: MmaAsync) -> tuple:
    acc = getattr(e.acc, "regs", e.acc)
    a = getattr(e.a_regs, "regs", e.a_regs)
    return tuple(r for r in tuple(acc or ()) + tuple(a or ()) if isinstance(r, Reg))


def tracked(cx) -> frozenset:
    """Every register some mma_async of the kernel uses as an accumulator or A register (kept on the walk)."""
    got = cx.__dict__.get("_wgmma_regs")
    if got is None:
        got = cx.__dict__["_wgmma_regs"] = frozenset(
            r for effects in cx.facts.effects.values() for e in effects if isinstance(e, MmaAsync) for r in _regs(e))
    return got


# ----------------------------------------------------------------------------------- registers


def registers(cx, s, effects, st, ctx):
    """Any instruction other than an mma_async: it must not touch the registers of an mma_async in flight, and
    what it writes needs a wgmma.fence before an mma_async reads it."""
    regs = tracked(cx)
    if not regs or any(isinstance(e, MmaAsync) for e in effects):
        return
    op = s.op
    defs = [r for r in op.defs() if r in regs]
    uses = [r for r in op.uses() if r in regs]
    if s.guard is not None and getattr(s.guard, "reg", s.guard) in regs:
        uses.append(getattr(s.guard, "reg", s.guard))
    if not defs and not uses:
        return
    touched = set(defs) | set(uses)
    for x in st.asyncg.pending("wgmma", REGS):
        hit = sorted(touched & x.item.regs, key=str)
        if hit:
            verb = "writes" if hit[0] in defs else "reads"
            how = ("its group is not committed (wgmma.commit_group) nor waited for"
                   if st.asyncg.uncommitted("wgmma", x) else "no wgmma.wait_group has retired its group")
            cx.report("wgmma-pending", f"this {verb} {hit[0]}, a register of the wgmma.mma_async at "
                      f"{line(x.item.stmt)} that is still in flight ({how}): the tensor core may still read or "
                      f"write it; wgmma.commit_group and wgmma.wait_group first", s, x.item.stmt)
            break
    if defs:
        st.wg_written = {**st.wg_written, **{r: s for r in defs}}


def fence(cx, s, e, st, ctx):
    """wgmma.fence: the register accesses before it are ordered before the mma_async after it."""
    st.wg_fenced = True
    st.wg_written = {}


def mma(cx, s, e, st, ctx):
    """wgmma.mma_async: checks its registers and operands, then joins the warpgroup's open wgmma group."""
    regs = _regs(e)
    if not st.wg_fenced:
        cx.report("wgmma-fence", "no wgmma.fence comes before this wgmma.mma_async (on some path to it): the "
                  "registers it reads are not ordered after the warpgroup's accesses; put k.wgmma_fence() before "
                  "the first mma_async (and after any write of its accumulators or A fragment)", s)
    else:
        acc = set(getattr(e.acc, "regs", e.acc) or ())
        hit = next((r for r in regs if r in st.wg_written), None)
        if hit is not None:
            w, kind = st.wg_written[hit], "an accumulator" if hit in acc else "an A register"
            cx.report("wgmma-fence", f"this wgmma.mma_async reads {hit}, {kind} written at {line(w)} after the last "
                      f"wgmma.fence: the tensor core may read its old value; put k.wgmma_fence() between the write "
                      f"and the mma_async", s, w)
    for d in e.descs:
        rng = _tile(d)
        if rng is None:
            continue
        if x := first_overlap(st.dirty, rng):
            cx.report("wgmma-proxy-fence", f"this wgmma.mma_async reads {key_name((rng.alloc, rng.off))} through "
                      f"the async proxy, but generic stores wrote it at {line(x.stmt)} with no fence.proxy.async "
                      f"since: the tensor core may read stale bytes; put k.fence_proxy_async('shared::cta') after "
                      f"the stores (in every writing thread), then a barrier, then the mma_async", s, x.stmt)
        loads = st.inflight if rng.off is not None else tuple(p for p in st.inflight
                                                              if p.range is not None and p.range.off is not None)
        if x := first_overlap(loads, rng):
            cx.report("tma-load-race", f"this wgmma.mma_async reads {key_name((rng.alloc, rng.off))} while the TMA "
                      f"load at {line(x.stmt)} into it may still be in flight: wait on its mbarrier first", s, x.stmt)
        if not cx.blind:
            _against_maps(cx, s, d)
        st.asyncg = st.asyncg.add("wgmma", READ, Pending(rng, s, region=ctx.region))
    if regs:
        st.asyncg = st.asyncg.add("wgmma", REGS, MmaRegs(frozenset(regs), s, ctx.region))


def _tile(d):
    """The shared bytes a descriptor value surely reads: the swizzle-atom row its start address falls in (row 0 of
    the K step it names; the whole buffer when a register moved it), or None for a raw 64-bit register or
    immediate. A descriptor advanced along K starts inside its tile, so its tile's extent is not known from it:
    the row it starts in is what every check of the tile's bytes can rely on."""
    buf, lay = getattr(d, "buffer", None), getattr(d, "layout", None)
    if not isinstance(buf, SharedAlloc) or lay is None:
        return None
    off = getattr(d, "offset", None)
    return Range(buf, None, None) if off is None else Range(buf, *atom_row(lay, off))


def atom_row(layout, off) -> tuple:
    """(start, size) of the swizzle-atom row (16 bytes without a swizzle) holding byte `off` of a tile."""
    try:
        w = int(layout.width)
    except (TypeError, ValueError, AttributeError, KeyError):
        w = 16
    return off - off % w, w


# ----------------------------------------------------------------------------------- tensor maps


def _fills(cx) -> dict:
    """{shared buffer: [(offset or None, spec, load stmt)]} of the TMA loads with a declared spec."""
    got = cx.__dict__.get("_wgmma_fills")
    if got is None:
        got = {}
        for s, effects in cx.facts.effects.items():
            for e in effects:
                if isinstance(e, AsyncWrite) and e.tmap is not None and e.dst is not None:
                    p = e.tmap.param if isinstance(e.tmap, TensorMapRef) else None
                    spec, w = getattr(p, "tmap", None), cx.where(e.dst)
                    if spec is not None and w is not None:
                        got.setdefault(w[0], []).append((w[1], spec, s))
        for v in got.values():
            v.sort(key=lambda x: (x[2].loc.line if getattr(x[2], "loc", None) else 0))
        cx.__dict__["_wgmma_fills"] = got
    return got


def _boxes(layout, spec) -> int:
    """How many boxes of `spec` side by side make one K-major (or MN-major) row of `layout`."""
    try:
        box = spec.box[0] * spec.elem_bytes
        run = layout.run_bytes
    except (AttributeError, IndexError, TypeError, ValueError, KeyError):
        return 1
    return run // box if box and run > box and run % box == 0 else 1


@functools.lru_cache(maxsize=None)
def _mismatches(layout, spec, boxes) -> tuple:
    """How the layout and the map disagree (descriptor.tensormap_mismatches). A descriptor may read a slice of a
    box's rows (each consumer warpgroup its 64 rows of a 128-row box): then the layout with the box's rows must
    agree with the map and lay its rows out with the same LBO and SBO."""
    from ..descriptor import MatrixLayout, tensormap_mismatches
    try:
        wrong = tuple(tensormap_mismatches(layout, spec, boxes))
    except Exception as e:          # noqa: BLE001  a map the layout module cannot read as a tile: say why
        return (f"the tensor map is not a tile a descriptor can read ({e})",)
    try:
        rows = spec.box[1]
        mine = layout.rows if layout.major == "K" else layout.k
        if not wrong or rows <= mine or rows % mine:
            return wrong
        whole = MatrixLayout(layout.dtype, rows if layout.major == "K" else layout.rows,
                             layout.k if layout.major == "K" else rows, layout.swizzle, layout.major,
                             lbo=layout.lbo_given, sbo=layout.sbo_given, base_offset=layout.base_offset)
        if (whole.lbo, whole.sbo) == (layout.lbo, layout.sbo) and not tensormap_mismatches(whole, spec, boxes):
            return ()
    except Exception:               # noqa: BLE001  no such layout: the disagreement stands as the module says
        pass
    return wrong


def _start(layout, off):
    """How a K-major swizzled descriptor's start misses the K steps of the tile TMA wrote (None: it does not, or
    it cannot be told): each starts at a multiple of 32 bytes in the first row of a swizzle pattern (a tile
    placed on a pattern boundary: base_offset 0), as advance_k(j) and at_row(8 i) place it."""
    from ..descriptor import K_STEP_BYTES

    if off is None or layout.major != "K" or layout.swizzle == "none" or layout.base_offset:
        return None
    rel = off % layout.repeat
    if rel < layout.width and rel % K_STEP_BYTES == 0:
        return None
    return (f"start: the descriptor starts {rel} bytes into a {layout.repeat}-byte swizzle pattern of the tile, "
            f"where no K step starts (each starts at a multiple of {K_STEP_BYTES} bytes in the pattern's first "
            f"{layout.width}-byte row)")


def _against_maps(cx, s, d):
    """wgmma-descriptor-map: the descriptor's layout against the maps whose loads fill its tile. With several
    candidates (loads the walk cannot place), it is reported only when none agrees."""
    lay, buf, off = d.layout, d.buffer, getattr(d, "offset", None)
    cands = []
    row = atom_row(lay, off) if off is not None else None
    for loff, spec, load in _fills(cx).get(buf, ()):
        if row is not None and loff is not None:
            try:
                size = int(spec.smem_bytes)
            except (TypeError, ValueError, KeyError, AttributeError):
                size = None
            if size is not None and not (loff < row[0] + row[1] and row[0] < loff + size):
                continue
        cands.append((spec, load))
    if not cands:
        return
    found = [(_mismatches(lay, spec, _boxes(lay, spec)), spec, load) for spec, load in cands]
    start = _start(lay, off)
    if any(not m for m, _, _ in found) and start is None:
        return
    wrong, spec, load = next(((m, sp, ld) for m, sp, ld in found if not m), found[0])
    fix = ("build the layout from the map (MatrixLayout.for_tensormap(spec)) so that both agree" if wrong else
           "step the descriptor with advance_k(j) or at_row(row)")
    wrong = tuple(wrong) + ((start,) if start else ())
    cx.report("wgmma-descriptor-map", f"the matrix descriptor of {buf.name} read here does not describe what the "
              f"TMA load at {line(load)} writes there: {'; '.join(wrong)}; {fix}", s, load)


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
    """setmaxnreg: .dec must not raise and .inc must not lower the warpgroup's count (the last setmaxnreg the
    same threads ran, or the count at entry); the count it leaves is the warpgroup's claim on the CTA's pool
    (checked at the kernel's end)."""
    last = st.nreg_claims.get(ctx.region)
    now = last[1] if last is not None else entry_registers(cx.k)
    top = _largest_count(cx)
    if not e.inc and top is not None and e.n > top:
        pass                        # over every count the kernel can have: ptxas's rule, refused when it is emitted
    elif now is not None and (e.n > now if not e.inc else e.n < now):
        verb, back = ("dec", "raise") if not e.inc else ("inc", "lower")
        where = f"after the setmaxnreg at {line(last[2])}" if last is not None else "at entry"
        cx.report("setmaxnreg-budget", f"setmaxnreg.{verb} {e.n} would {back} the warpgroup's register count, "
                  f"which is {now} here ({where}): .dec only lowers and .inc only raises (use "
                  f"setmaxnreg.{'inc' if not e.inc else 'dec'})", s)
    st.nreg_claims = {**st.nreg_claims, ctx.region: (ctx.mult, e.n, s)}


def _largest_count(cx):
    """The largest register count the kernel can have (.maxnreg, every setmaxnreg.inc), None without either: a
    .dec above it is ptxas's error (ptxdsl.limits refuses it when the kernel is emitted)."""
    got = cx.__dict__.get("_wgmma_top", ())
    if got == ():
        counts = [e.n for effects in cx.facts.effects.values() for e in effects
                  if isinstance(e, SetMaxNReg) and e.inc]
        if cx.k.directives.get("maxnreg"):
            counts.append(cx.k.directives["maxnreg"])
        got = cx.__dict__["_wgmma_top"] = max(counts) if counts else None
    return got


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
