"""The walk: the kernel body in program order, once per branch and twice per loop (the second pass sees what
the first iteration left behind), carrying the protocol state (ptxdsl.verify.state) and the context of the
code (which threads run it, the loops around it).

Each instruction's effects go to the rule family that owns them (`HANDLERS`, keyed by effect class); this
module only walks, joins branches and reports. A user silences one rule at one place with
`with k.allow("rule"):`.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace

from ..ir import If, Imm, Instr, Kernel, Loop, PredNot, Reg, WaitLoop, Walker
from ..isa.effects import (Access, Arrive, AsyncRead, AsyncWrite, Barrier, CommitGroup, CompleteTx, Exit, ExpectTx,
                           GlobalAsync, Init, Inval, MmaAsync, Order, ProxyFence, SetMaxNReg, TmapEdit, TmapPublish,
                           TmapRead, Trap, Wait, WaitGroup, WgmmaFence)
from . import (bulk_groups, continuation, divergence, groups, mbarrier, memory, ordering, phases, tensormaps, tma,
               transactions, wgmma)
from .facts import CTA, LANE, VARYING, WARP, facts_of
from .rules import Diagnostic, diag
from .groups import Groups
from .state import MAX_ALTERNATIVES, ZERO, Ctx, InitInfo, Range, State, stmts_loc
from .symbols import Resolver

WITHIN_GROUP = frozenset({LANE, WARP})      # a condition on these differs among the threads of one warpgroup

# effect class -> the rule families' handlers, each called as fn(flow, stmt, effect, state, ctx). Compute,
# Opaque and Elect feed the register facts (facts.py); Collective and Barrier also go to divergence.check.
HANDLERS = {
    Init: (mbarrier.init,),
    Inval: (mbarrier.inval,),
    Arrive: (mbarrier.arrive,),
    ExpectTx: (transactions.expect_tx,),
    CompleteTx: (transactions.complete_tx,),
    Wait: (phases.poll,),                       # a wait outside a wait loop (a wait loop: phases.wait_loop)
    AsyncWrite: (tma.load,),
    AsyncRead: (tma.read,),
    TmapRead: (tma.prefetch,),
    CommitGroup: (groups.commit,),
    WaitGroup: (groups.wait,),
    GlobalAsync: (ordering.bulk,),
    Order: (ordering.order,),
    Access: (memory.access,),
    ProxyFence: (mbarrier.fence, memory.fence, tensormaps.fence, ordering.fence),
    Barrier: (mbarrier.sync, memory.sync, tensormaps.sync),
    TmapEdit: (tensormaps.edit,),
    TmapPublish: (tensormaps.publish,),
    Exit: (memory.exit, bulk_groups.exit, wgmma.budget),
    WgmmaFence: (wgmma.fence,),
    MmaAsync: (wgmma.mma,),
    SetMaxNReg: (wgmma.setmaxnreg,),
}


def _handlers(e):
    got = _BY_TYPE.get(type(e))
    if got is None:
        got = _BY_TYPE[type(e)] = next((HANDLERS[c] for c in type(e).__mro__ if c in HANDLERS), ())
    return got


_BY_TYPE: dict = {}             # effect class -> its handlers (HANDLERS, looked up along the class's bases)


def _owner(region: tuple, split):
    """Which branch of a thread-varying condition holds the threads of `region` (those that issued a
    per-thread access or initialised a barrier), so that branch alone decides its state after the join."""
    if split is None:
        return None
    depth, then_key, else_key = split
    if len(region) > depth:
        return "then" if region[depth] == then_key else "else" if region[depth] == else_key else None
    return None


def _region_key(cond, elect=False):
    """How a region records the condition its threads passed (all elect_one blocks pick the same lane)."""
    if elect:
        return ("elect", None)
    return (cond.reg, True) if isinstance(cond, PredNot) else (cond, False)


class Flow(Walker):
    """Walks the kernel body in program order and reports the protocol rules.

    blind=True: the walk that prepares the launch checks. Every tensor map's spec is taken as unknown (the
    launch binds one, which may not be the declared one), and what depends on a map or a parameter is kept in
    `deferred` (verify/deferred.py checks) instead of being decided. Either walk keeps in `device` the checks a
    debug kernel makes on the device before an instruction (ptxdsl.watchdog)."""

    def __init__(self, k: Kernel, blind: bool = False):
        self.k = k
        self.blind = blind
        self.facts = facts_of(k)
        self.resolve = Resolver(k, self.facts)
        self.deferred: dict = {}    # (rule, loc, check) -> a launch check
        self.device: dict = {}      # stmt -> [device check tuples] (None: checks that disagree)
        self.tx_terms: dict = {}    # expect stmt -> (its tx operand, threads running it, the operand's Lin)
        self.found: dict = {}
        self.versions = itertools.count(1)
        self.cluster = math.prod(k.directives["reqnctapercluster"]) if "reqnctapercluster" in k.directives else None
        self.init_sites, self.arrive_sites, self.remote_arrives = mbarrier.sites(self)
        self.edits_maps = tensormaps.edits(k)
        self.passes: dict = {}      # loop -> the pass (1 or 2) over its body being walked
        self.offsets: dict = {}     # reg -> (its version, loop, the counter's version, c): reg = counter + c
        self.bounds: dict = {}      # pred -> (its version, (loop, counter version, n) it proves continue for n
                                    # more iterations when true, when false)

    @functools.cached_property
    def origins(self) -> dict:
        """{register: Param} of maps made from a parameter's bytes (tensormaps.origins), found when first asked."""
        return tensormaps.origins(self.k, self.facts.where)

    def run(self) -> list[Diagnostic]:
        ntid = self.k.directives.get("reqntid")
        ctx = Ctx(mult=math.prod(ntid) if ntid else None)
        st = self._block(self.k.body, State(), ctx)
        if not st.dead:
            self._effect(None, Exit(), st, ctx)
        return list(self.found.values())

    # ------------------------------------------------------------------ services for the rule families

    def report(self, rule, message, *stmts, severity=None):
        allow = frozenset().union(*(getattr(s, "allow", frozenset()) for s in stmts if s is not None))
        if rule in allow:
            return
        loc = stmts_loc([s for s in stmts if s is not None])
        self.found.setdefault((rule, loc, message), diag(rule, message, loc, severity))

    def where(self, v):
        """(buffer, offset or None) a shared-memory operand points at, or None."""
        return self.facts.where(v)

    def value(self, v):
        """An operand as an int, a linear form over parameters and registers (symbols.Lin), or None."""
        return self.resolve.value(v)

    def defer(self, check, *stmts):
        """Keep a launch check, unless one of `stmts` allows its rule."""
        allow = frozenset().union(*(getattr(s, "allow", frozenset()) for s in stmts if s is not None))
        if check.rule not in allow:
            self.deferred.setdefault((check.rule, check.loc, check), check)

    def device_check(self, s, check, *stmts):
        """A check a debug kernel makes on the device before `s` (dropped where the rule is allowed, and when
        two passes of the walk ask for different ones)."""
        rule = "coord-align" if check[0] == "coord" else "expect-tx-mismatch"
        allow = frozenset().union(*(getattr(x, "allow", frozenset()) for x in (s, *stmts) if x is not None))
        if rule in allow:
            return
        have = self.device.setdefault(s, [])
        if have is None or check in have:
            return
        if any(c[0] == check[0] for c in have):
            self.device[s] = None
            return
        have.append(check)

    def rng(self, v, size):
        w = self.where(v)
        return None if w is None else Range(w[0], w[1], size)

    def token(self, st, v):
        """What identifies an operand's value on this path (a register with its version)."""
        if isinstance(v, Imm):
            return ("imm", int(v.value))
        if isinstance(v, Reg):
            return ("reg", v, st.ver.get(v, 0))
        return ("?", v)

    def bump(self, st, regs):
        for r in regs:
            if isinstance(r, Reg):
                st.ver[r] = next(self.versions)

    # ------------------------------------------------------------------ structure

    def _block(self, stmts, st, ctx):
        for s in stmts:
            if st.dead:
                break
            st = self.visit(s, st, ctx) or st       # branches and loops give the state after them
        return st

    def _wait(self, s: WaitLoop, st: State, ctx: Ctx):
        for e in self._effects_of(s):
            if isinstance(e, Wait):
                phases.wait_loop(self, s, e, st, ctx)

    def instr(self, s, st, ctx):
        return self._instr(s, st, ctx)

    def if_(self, s, st, ctx):
        return self._if(s, st, ctx)

    def loop(self, s, st, ctx):
        return self._loop(s, st, ctx)

    def wait(self, s, st, ctx):
        return self._wait(s, st, ctx)

    def _enter(self, ctx: Ctx, cond, elect=False, st=None) -> Ctx:
        """The context of code that runs where `cond` holds (in state `st`, which tells whether `cond` is a
        loop-continuation test of this iteration)."""
        neg = isinstance(cond, PredNot)
        v = self.facts.get(cond.reg if neg else cond)
        sel = "elect" if elect else None if neg else v.kind
        varying = bool(v.tags & VARYING) or elect
        mult, issuers, region = ctx.mult, ctx.issuers, ctx.region
        if varying:
            region = region + (_region_key(cond, elect),)
            n = ctx.mult
            if sel == "sel_tid":
                mult = 1 if n is None or n >= 1 else 0
            elif sel in ("elect", "sel_lane"):
                mult = None if n is None else max(1, n // 32)
            elif sel == "sel_warp":
                mult = None if n is None else min(n, 32)
            elif sel == "sel_wgroup":
                mult = None if n is None else min(n, 128)
            elif (v.kind == "sel_wgroup") == neg and v.kind in ("sel_wgroup", "nsel_wgroup") and not ctx.region:
                mult = None if n is None or n < 128 else n - 128      # every warpgroup but one
            else:
                mult = None
        if CTA in v.tags:
            issuers = (1 if ctx.issuers == "all" else ctx.issuers) if sel == "sel_rank" else None
        later = continuation.later(self, cond, st) if st is not None and ctx.loops else None
        return replace(ctx, region=region, mult=mult, issuers=issuers,
                       later=(ctx.later | later) if later else ctx.later,
                       lane_div=ctx.lane_div or LANE in v.tags or elect,
                       group_div=ctx.group_div or bool(v.tags & WITHIN_GROUP) or elect,
                       warp_div=ctx.warp_div or bool(v.tags & VARYING) or elect)

    def _if(self, s: If, st: State, ctx: Ctx) -> State:
        elect = s.kind == "elect"
        v = self.facts.get(s.cond.reg if isinstance(s.cond, PredNot) else s.cond)
        varying = bool(v.tags & VARYING) or elect
        cta = CTA in v.tags and not varying
        logs = ([], []) if cta else (ctx.mc_log, ctx.mc_log)
        then_ctx = replace(self._enter(ctx, s.cond, elect, st), mc_log=logs[0])
        else_cond = s.cond.reg if isinstance(s.cond, PredNot) else PredNot(s.cond)
        else_ctx = replace(self._enter(ctx, else_cond, st=st), mc_log=logs[1])
        if elect:
            else_ctx = replace(else_ctx, mult=None if ctx.mult is None else max(0, ctx.mult - max(1, ctx.mult // 32)))
        entry = st.copy()
        t = self._block(s.then, self._branch(entry), then_ctx)
        e = self._block(s.orelse or [], self._branch(entry), else_ctx)
        if cta:
            for key, n in logs[0]:
                transactions.deliver(e, key, n)
            for key, n in logs[1]:
                transactions.deliver(t, key, n)
            if ctx.mc_log is not None:
                ctx.mc_log.extend(logs[0] + logs[1])
        split = (len(ctx.region), _region_key(s.cond, elect), _region_key(else_cond)) if varying else None
        return self._join(entry, t, e, both_run=varying, split=split)

    @staticmethod
    def _branch(entry: State) -> State:
        b = entry.copy()
        b.closed = set()
        return b

    def _join(self, entry: State, a: State, b: State, both_run: bool, split=None) -> State:
        """Combine two branches. both_run: different threads take each (their barrier contributions add);
        otherwise the branches are alternatives. split: (depth, then key, else key) of a thread-varying
        condition, so that per-thread bulk groups are taken from the branch their threads ran."""
        if a.dead and b.dead:
            out = entry.copy()
            out.dead = True
            return out
        if a.dead or b.dead:
            live = b if a.dead else a
            out = live.copy()
            out.closed = entry.closed | live.closed
            return out
        out = State()
        for key in set(a.init) | set(b.init):
            x, y = a.init.get(key), b.init.get(key)
            owner = _owner((x or y).region, split)
            if x is None or y is None or owner is not None:
                out.init[key] = (x if owner == "then" else y if owner == "else" else None) or x or y
            else:
                out.init[key] = InitInfo(x.stmt, x.fenced and y.fenced, x.synced and y.synced, x.region)
        out.inval = {**a.inval, **b.inval}
        for key in set(a.phase) | set(b.phase):
            x, y = a.phase.get(key, b.phase.get(key)), b.phase.get(key, a.phase.get(key))
            out.phase[key] = x if x == y else None
        out.arrived = a.arrived | b.arrived
        closed = a.closed | b.closed
        keys = set(a.acc) | set(b.acc) | set(entry.acc)
        for key in keys:
            x, y = a.acc.get(key, ZERO), b.acc.get(key, ZERO)
            if both_run:
                base = entry.acc.get(key, ZERO)
                if key in closed or self._alloc_closed(key, closed) or None in (x, y, base) or len(base) != 1:
                    out.acc[key] = None
                    continue
                (e0, d0), = base
                pairs = frozenset((xe + ye - e0, xd + yd - d0) for xe, xd in x for ye, yd in y)
            else:
                pairs = None if x is None or y is None else x | y
            out.acc[key] = pairs if pairs is None or len(pairs) <= MAX_ALTERNATIVES else None
        for key in set(a.src) | set(b.src):
            out.src[key] = tuple(dict.fromkeys(a.src.get(key, ()) + b.src.get(key, ())))
        out.closed = entry.closed | closed
        for key in set(a.last) & set(b.last):
            if a.last[key].token == b.last[key].token:
                out.last[key] = a.last[key]
        out.inflight = self._join_loads(entry.inflight, a, b, both_run)
        out.dirty = tuple(dict.fromkeys(a.dirty + b.dirty))
        out.asyncg = Groups.join(a.asyncg.keep(lambda x: _owner(x.region, split) != "else"),       # per-thread
                                 b.asyncg.keep(lambda x: _owner(x.region, split) != "then"))       # queues
        out.writes_unfenced = tuple(dict.fromkeys(a.writes_unfenced + b.writes_unfenced))
        out.acquired_unfenced = tuple(dict.fromkeys(a.acquired_unfenced + b.acquired_unfenced))
        out.unreleased, out.unsynced = tensormaps.join(entry, a, b, both_run)
        out.acquired = a.acquired | b.acquired
        out.wg_fenced = a.wg_fenced and b.wg_fenced
        out.wg_written = {**b.wg_written, **a.wg_written}
        out.nreg_claims = {**a.nreg_claims, **{r: c for r, c in b.nreg_claims.items()
                                               if r not in a.nreg_claims or c[1] > a.nreg_claims[r][1]}}
        for r in set(a.ver) | set(b.ver):
            va, vb = a.ver.get(r, 0), b.ver.get(r, 0)
            out.ver[r] = va if va == vb else next(self.versions)
        return out

    @staticmethod
    def _join_loads(entry, a: State, b: State, both_run: bool):
        """TMA loads in flight after two branches. One waited for in one branch only stays, marked waited
        (a bar.sync after the join retires it for everyone); so does one issued in a branch whose barrier
        the other branch's threads wait on (a producer warp and its consumers)."""
        in_a, in_b = {x.stmt: x for x in a.inflight}, {x.stmt: x for x in b.inflight}
        out = {}
        for x in entry:
            ha, hb = x.stmt in in_a, x.stmt in in_b
            if ha and hb:
                out[x.stmt] = replace(x, waited=in_a[x.stmt].waited or in_b[x.stmt].waited)
            elif ha or hb:
                out[x.stmt] = replace(x, waited=True)
        for x, other in [(x, b) for x in a.inflight] + [(x, a) for x in b.inflight]:
            if x.stmt not in out:
                seen = both_run and any(phases.may_complete(x.key, k) for k in other.closed)
                out[x.stmt] = replace(x, waited=True) if seen else x
        return tuple(out.values())

    @staticmethod
    def _alloc_closed(key, closed) -> bool:
        return (key[0], None) in closed or (key[1] is None and any(c[0] is key[0] for c in closed))

    def _loop(self, s: Loop, st: State, ctx: Ctx) -> State:
        self.bump(st, (s.var,))
        bounds = self.facts.get(s.start).tags | self.facts.get(s.stop).tags
        trips = None
        if isinstance(s.start, Imm) and isinstance(s.stop, Imm):
            trips = max(0, math.ceil((int(s.stop.value) - int(s.start.value)) / s.step))
        if trips == 0:
            return st
        bctx = replace(ctx, loops=ctx.loops + ((s, trips),))
        if bounds & VARYING:
            bctx = replace(bctx, lane_div=ctx.lane_div or LANE in bounds, warp_div=True, mult=None,
                           group_div=ctx.group_div or bool(bounds & WITHIN_GROUP))
        entry = st.copy()
        self.passes[s] = 1
        first = self._block(s.body, st.copy(), bctx)
        if trips == 1:
            continuation.carry(self, s, first, 1)
        if trips == 1 or first.dead:
            return first
        again = first.copy()
        again.last = {k: replace(v, prev_loop=s) for k, v in again.last.items()}
        self.bump(again, (s.var, s.cond))
        self.passes[s] = 2
        second = self._block(s.body, again, bctx)
        continuation.carry(self, s, second, 2)
        self.bump(second, (s.var, s.cond))
        if trips is not None:
            return second
        return self._join(entry, entry.copy(), second, both_run=False)

    # ------------------------------------------------------------------ instructions

    def _effects_of(self, s) -> tuple:
        got = self.facts.effects.get(s)
        return tuple(s.op.effects()) if got is None else got

    def _effect(self, s, e, st, ctx):
        for fn in _handlers(e):
            fn(self, s, e, st, ctx)

    def _instr(self, s: Instr, st: State, ctx: Ctx):
        op = s.op
        effects = self._effects_of(s)
        ictx = self._enter(ctx, s.guard, st=st) if s.guard is not None else ctx
        divergence.check(self, s, effects, ictx)
        wgmma.registers(self, s, effects, st, ictx)
        for e in effects:
            self._effect(s, e, st, ictx)
        if s.guard is None and any(isinstance(e, (Exit, Trap)) for e in effects):
            st.dead = True
        known = continuation.counters(self, effects, st, ctx) if ctx.loops and s.guard is None else None
        self.bump(st, op.defs())
        if known is not None:
            table, dst, what = known
            table[dst] = (st.ver[dst],) + what
