"""The run: a concrete run of one CTA's threads through the kernel, counting what each mbarrier phase receives.

The walk (flow) cannot tell the slots of a barrier array indexed at run time apart, nor count the arrivals of
threads that take different branches. This run can, wherever the threads' paths are fixed by constants, loop
counters, %tid (and what it selects: warps, lanes, elect.sync's lowest lane) and, at launch, the scalar
parameters: CTA 0 of cluster 0 (every CTA or cluster index reads 0). Threads that take the same path run as one
class (verify/threads.py), which splits where a branch or guard differs among its threads; the classes run one
after another until each ends or blocks (an mbarrier wait whose phase has not completed, a bar.sync), as long as
any can go on.

An mbarrier phase completes when its arrivals reach the init count and its transaction bytes (expect_tx minus
the bytes of the loads completing on it) reach zero. Each class keeps what it knows of the others (vector
clocks, joined at arrive -> wait and at bar.sync), so a TMA load into shared memory can be checked against the
reads it may overwrite. Rules:

- wait-never-armed: every thread still running is blocked and a wait's phase has no arrival at all (reported
  only when no blocked phase lacks arrivals or bytes, the two rules below, which are then the cause);
- arrival-count: ... a wait's phase has some arrivals but fewer than the init count (`mbarrier.init(bar, 128)`
  where only thread 0 arrives); or, whenever it happens, a phase receives more arrivals than its init count
  (`mbarrier.init(empty, 127)` where 128 threads arrive each lap): the extra ones count towards the next phase;
- expect-tx-mismatch: ... its arrivals are complete but its bytes are not (per slot of a ring); or, whenever it
  happens, a load that its issuer meant for a phase (it armed the phase and has waited for nothing since) finds
  that phase already completed by the loads issued before it: the expect_tx counts fewer bytes than they deliver;
- ring-parity: a wait returns at once because it names a phase its threads have already seen complete, while
  a TMA load on the barrier's current phase is pending (a single-loop ring whose parity starts at 1);
- refill-race: a TMA load into a buffer that other threads read with nothing (an mbarrier arrive -> wait, a
  bar.sync) ordering those reads before it (a refill with the empty-barrier wait or bar.sync removed);
- tma-load-race: a thread reads a ring slot before it has seen the phase its load completes on, or the kernel
  ends while a load on a ring slot was never waited for;
- bulk-group-pending: a thread writes a ring slot that a TMA store (or bulk copy out of shared memory) may still
  read: its bulk group not yet retired by wait_group.read, or retired where the writer has not seen it.
  (A refill by TMA load of such a slot is a refill-race.)

The shared-memory side of the last three rules (what each class read and wrote, against loads in flight and
stores still reading) is verify/races.py.

A hand-written loop that only polls global memory (Flags.wait: a flag another CTA publishes) is taken as ending.
Anything else it cannot follow (a branch or loop bound on a value it does not know, other hand-written branches,
a multicast, remote barrier or state-token wait, more than MAX_CLASSES classes) ends the run without a finding;
at the end of its step budget it ends with what it found on the way (a race it saw stands; a wait that would
never return is not concluded). `ring_findings(kernel)` runs it when the kernel is verified; `check_launch` runs
it again with the parameters it reads when the first run stopped on one (ring_depends_on_params).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..ir import Addr, If, Instr, LabelStmt, Loop, Param, Reg, WaitLoop, statements
from ..isa.effects import (Access, Arrive, AsyncRead, AsyncWrite, Barrier, CommitGroup, CompleteTx, Compute, Elect,
                           Exit, ExpectTx, Init, Inval, Jump, MmaAsync, Trap, Wait, WaitGroup, WarpSync)
from .facts import facts_of
from .linear import flatten, poll_end
from .tensormaps import origins
from .races import SHARED, Races, _line, _slot
from .threads import MEMORY_SHIFT, Sym, Threads, Values, describe, split

STEP_BUDGET = 100_000           # class steps one run may take before it gives up
LAUNCH_BUDGET = 30_000          # the same, for the run a launch check makes (a first launch waits for it)
MAX_CLASSES = 64
_LEAVES = (Instr, WaitLoop)    # the statements whose effects the run reads
WATCHED = (Init, Inval, Arrive, ExpectTx, CompleteTx, Wait, AsyncWrite, Barrier, Exit, Trap, Jump)
BULK = (AsyncRead, CommitGroup, WaitGroup, MmaAsync)    # async reads of shared memory and their groups
FULL_MASK = 0xFFFFFFFF


class _GiveUp(Exception):
    """The run depends on something it does not know."""


class _Budget(_GiveUp):
    """The run took its whole step budget: what it found on the way stands, nothing more is concluded."""


class _Stop(Exception):
    """The run found a fault it cannot go past (its findings stand)."""


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    stmts: tuple


@dataclass
class _Bar:
    """One mbarrier."""

    count: int
    pending: int
    stmt: object
    tx: int = 0
    phase: int = 0
    exact: bool = True              # every byte count on it was known
    vc: dict = field(default_factory=dict)      # knowledge the current phase's arrivals released
    done: dict = field(default_factory=dict)    # phase -> knowledge at its completion
    arrived: list = field(default_factory=list)  # (tids, stmt) of the current phase's arrivals
    loads: list = field(default_factory=list)   # loads on the current phase
    src: list = field(default_factory=list)     # the expect_tx, complete_tx and loads of the current phase


@dataclass
class _Load:
    """A TMA load (or bulk copy) into shared memory."""

    alloc: object
    lo: int
    hi: int
    key: Sym
    phase: int
    stmt: object
    issuer: tuple = ()


def ring_findings(kernel, params=None, block=None, maps=None, effects=None, grid=None, budget=STEP_BUDGET,
                  memory=None, cta=0, outcome=None) -> list:
    """What the run finds (empty when it gives up). `params` (name -> int) and `block` are a launch's; `maps`
    (name -> TensorMapSpec) the maps it binds; `memory` (pointer parameter name -> bytes) what its pointers
    point at, where a caller of check_launch gave host copies; `cta` the %ctaid.x of the CTA it follows (CTA 0
    unless the launch checks pick others: with memory, CTAs take different paths); `effects` ({statement: its
    effects}, as Facts.effects keeps them) spares working them out again. The run the verifier makes (no launch
    values) also leaves on the kernel what `ring_depends_on_params` would work out, so that a first launch need
    not run it again. `outcome` (a dict), where given, gets how the run ended: "end" (it ran to the end, or to a
    fault), "budget" (cut short after `budget` class steps: no hang concluded) or "gave-up" (it met something it
    cannot follow)."""
    fx = Effects(effects or ())
    plain = (params is None and block is None and maps is None and grid is None and memory is None and not cta
             and budget == STEP_BUDGET)
    if not _has_waits(kernel, fx):
        if plain:
            kernel.__dict__["ring_depends"] = ()
        return []
    run = _Run(kernel, params, block, maps, fx, grid, memory, cta)
    run.budget = budget
    gave_up = False
    try:
        run.go()
        found = run.verdict()
    except _Budget:
        gave_up, found = True, list(run.found.values())
    except _GiveUp:
        gave_up, found = True, []
    except _Stop:
        found = list(run.found.values())
    if outcome is not None:
        outcome["end"] = "end" if not gave_up else "budget" if run.steps > run.budget else "gave-up"
        outcome["steps"] = run.steps
    if plain:
        kernel.__dict__["ring_depends"] = _depends(kernel, run, gave_up)
    return found


def ring_depends_on_params(kernel) -> tuple:
    """The scalar parameters (names) to run again with at launch: all of them when the run without them
    gives up (or does not know the block's size), else ()."""
    known = getattr(kernel, "__dict__", {}).get("ring_depends")
    if known is not None:
        return known
    fx = Effects()
    if not _has_waits(kernel, fx):
        return ()
    run = _Run(kernel, None, None, None, fx)
    try:
        run.go()
    except _GiveUp:
        return _depends(kernel, run, True)
    except _Stop:
        pass
    return ()


def _depends(kernel, run, gave_up: bool) -> tuple:
    """The parameters a launch's run reads: those whose loaded value reaches something the run decides on
    (_relevant), so that a parameter it never reads (a flag's epoch, a scale factor) does not make a new launch
    check of every launch that changes it."""
    if not gave_up:
        return ()
    read = _param_regs(kernel.body)
    names = tuple(p.name for p in kernel.params if p.kind in ("scalar", "ptr")
                  and any(r in run.relevant for r in read.get(p.name, ())))
    return names + (("block",) if run.block is None else ()) if (names or run.block is None) else ()


def _param_regs(body) -> dict:
    """{parameter name: the registers ld.param loads it into}."""
    out: dict = {}
    for s in statements(body, _LEAVES):
        addr = getattr(s.op, "addr", None)
        base = addr.base if isinstance(addr, Addr) else addr
        if isinstance(base, Param):
            out.setdefault(base.name, []).extend(s.op.defs())
    return out


class Effects(dict):
    """{statement (Instr or WaitLoop of the body): its op's effects}, filled as they are asked for."""

    def of(self, s) -> tuple:
        got = self.get(s)
        if got is None:
            got = self[s] = tuple(s.op.effects())
        return got


def _has_waits(kernel, fx) -> bool:
    return bool(kernel.wait_sites) and any(isinstance(e, AsyncWrite) or isinstance(e, Arrive)
                                           for s in statements(kernel.body, _LEAVES) for e in fx.of(s))


def _relevant(kernel, fx) -> set:
    """Registers whose values the run needs: conditions, loop bounds, guards, barrier and shared-memory
    operands, and what they are computed from (not what a poll loop computes: the run takes it as ending)."""
    need, defs = set(), {}

    def use(*vals):
        for v in vals:
            if isinstance(v, Addr):
                v = v.base
            r = getattr(v, "reg", v)
            if isinstance(r, Reg):
                need.add(r)

    def scan(stmts):
        skip = -1
        for i, s in enumerate(stmts):
            if i <= skip:                           # inside a poll loop: the run forgets what it computes
                continue
            if isinstance(s, LabelStmt):
                skip = poll_end(stmts, i) or i
            elif isinstance(s, If):
                use(s.cond)
                scan(s.then)
                scan(s.orelse or [])
            elif isinstance(s, Loop):
                use(s.start, s.stop)
                scan(s.body)
            elif isinstance(s, (Instr, WaitLoop)):
                use(getattr(s, "guard", None))
                for e in fx.of(s):
                    if isinstance(e, Compute):
                        defs.setdefault(e.dst, []).extend(e.args)
                    elif isinstance(e, (Init, Inval, Arrive, ExpectTx, CompleteTx)):
                        use(e.bar, getattr(e, "count", None), getattr(e, "tx", None))
                    elif isinstance(e, Wait):
                        use(e.bar, e.parity)
                    elif isinstance(e, AsyncWrite):
                        use(e.dst, e.bar, e.size, e.multicast)
                    elif isinstance(e, AsyncRead) and e.bar is None:
                        use(e.src, e.size)
                    elif isinstance(e, MmaAsync):
                        use(*(getattr(d, "reg", None) for d in e.descs))
                    elif isinstance(e, Access) and e.space in SHARED:
                        use(e.addr)
                    elif isinstance(e, Access) and e.space == "global" and not e.write:
                        for d in s.op.defs():       # a value loaded from memory the caller may have given
                            defs.setdefault(d, []).append(e.addr.base if isinstance(e.addr, Addr) else e.addr)
                    elif isinstance(e, Barrier):
                        use(e.count)
                    elif isinstance(e, (Elect, WarpSync)):
                        use(e.mask)

    scan(kernel.body)
    todo = list(need)
    while todo:
        r = todo.pop()
        for a in defs.get(r, ()):
            x = getattr(a, "reg", a)
            if isinstance(x, Reg) and x not in need:
                need.add(x)
                todo.append(x)
    return need


class _Run(Races):
    def __init__(self, k, params, block, maps, fx, grid=None, memory=None, cta=0):
        self.k = k
        d = k.directives
        ntid = d.get("reqntid") or (tuple(block) if block else None)
        self.block = tuple(ntid) + (1,) * (3 - len(ntid)) if ntid else None
        # each pointer the caller gave the memory of gets an address of its own, far above the others
        self.memory = {(i + 1) << MEMORY_SHIFT: bytes(b) for i, b in enumerate((memory or {}).values())}
        self.pointers = dict(zip(memory or {}, self.memory))
        self.values = Values(self.block or (1, 1, 1), {**(params or {}), **self.pointers}, grid, cta)
        self.maps = maps or {}
        self.fx = fx
        self.relevant = _relevant(k, fx)
        self.code = flatten(k.body, self._needed, self._keep)
        self.plans = [None] * len(self.code or ())      # per instruction of `code`, its _plan once it has run
        self.bars: dict = {}
        self.loads: list = []
        self.ring: set = set()          # barrier arrays some op addressed through a register
        self.found: dict = {}
        self.steps = 0
        self.budget = STEP_BUDGET
        self.next_id = 1
        self.classes: list = []
        self.armed: dict = {}           # (class id, barrier key) -> (phase, waits, stmt) of its last exact expect_tx
        self.waits: dict = {}           # class id -> the waits and bar.syncs it has come through
        self.mma_reads: dict = {}       # (mma stmt, descriptor, warpgroups, loop counters) -> its shared read record
        self.loop_vars = _loop_vars(k.body)

    @functools.cached_property
    def origins(self) -> dict:
        """{register: Param} of maps made from a parameter's bytes (tensormaps.origins), found when first asked."""
        return origins(self.k)

    def _keep(self, s: Instr) -> bool:
        """Whether the run executes `s`: it writes a register the run reads, or has a guard (which may split a
        class), or an effect the run watches. The others (global stores, the arithmetic of global addresses)
        change nothing it reads."""
        if s.guard is not None or any(r in self.relevant for r in s.op.defs()):
            return True
        return any(isinstance(e, WATCHED + BULK + (WarpSync,)) or isinstance(e, Access) and e.space in SHARED
                   for e in self.fx.of(s))

    def _needed(self, loop) -> bool:
        return any(isinstance(s, WaitLoop) or any(isinstance(e, WATCHED + BULK) or isinstance(e, Access)
                                                  and e.space in SHARED for e in self.fx.of(s))
                   for s in statements(loop.body, _LEAVES))

    # ------------------------------------------------------------------------------ scheduling

    def go(self):
        if self.code is None or self.block is None:
            raise _GiveUp
        self.classes = [Threads(0, tuple(range(self.block[0] * self.block[1] * self.block[2])))]
        while True:
            ran = False
            for th in list(self.classes):
                if th.state == "wait" and self._wait_over(th):
                    th.state = "run"
                if th.state == "run":
                    self._run(th)
                    ran = True
            if ran:
                continue
            if all(th.state == "done" for th in self.classes):
                return
            if not self._release_syncs():
                self._deadlock()
                return

    def _run(self, th: Threads):
        code = self.code
        while th.state == "run":
            self.steps += 1
            if self.steps > self.budget:
                raise _Budget
            if th.pc >= len(code):
                th.state = "done"
                return
            op = code[th.pc]
            kind = op[0]
            if kind == "ins":
                plan = self.plans[th.pc]
                if plan is None:
                    plan = self.plans[th.pc] = self._plan(op[1])
                self._ins(th, op[1], plan)
            elif kind == "wait":
                self._wait(th, op[1])
            elif kind == "if":
                self._branch(th, op[1], op[2])
            elif kind == "jmp":
                th.pc = op[1]
            elif kind == "init":
                loop = op[1]
                th.regs[loop.var] = self._int(th, loop.start)
                th.pc += 1
            elif kind == "test":
                self._test(th, op[1], op[2])
            elif kind == "step":
                loop = op[1]
                v = th.regs.get(loop.var)
                if not isinstance(v, int):
                    raise _GiveUp
                th.regs[loop.var] = (v + loop.step) & ((1 << loop.var.type.reg_bits) - 1)
                th.pc += 1
            else:                               # skip, poll
                for r in op[2]:
                    th.regs.pop(r, None)
                th.pc += 1

    def _int(self, th, v):
        x = self.values.get(th, v)
        if not isinstance(x, int) or isinstance(x, bool):
            raise _GiveUp
        return x

    def _test(self, th, loop, end):
        var, stop = th.regs.get(loop.var), self._int(th, loop.stop)
        if not isinstance(var, int):
            raise _GiveUp
        bits = loop.var.type.bits
        if loop.var.type.kind == "s":
            var, stop = _signed(var, bits), _signed(stop, bits)
        more = var < stop if loop.step > 0 else var > stop
        th.pc = th.pc + 1 if more else end

    def _branch(self, th, s, other):
        c = self.values.get(th, s.cond)
        if isinstance(c, tuple):
            if any(x is None for x in c):
                raise _GiveUp
            yes, no = self._split(th, c)
            yes.pc, no.pc = th.pc + 1, other
            return
        if c is None:
            raise _GiveUp
        th.pc = th.pc + 1 if c else other

    def _split(self, th, mask):
        if len(self.classes) >= MAX_CLASSES:
            raise _GiveUp
        dicts = [c.vc for c in self.classes if c is not th]
        for b in self.bars.values():
            dicts.append(b.vc)
            dicts.extend(b.done.values())
        dicts.extend(r[6] for c in self.classes for r in c.reads if len(r) > 6)     # who retired each MMA read
        yes, no = split(th, mask, self.next_id, dicts)
        self.next_id += 2
        i = self.classes.index(th)
        self.classes[i:i + 1] = [yes, no]
        th.state = "split"
        return yes, no

    # ------------------------------------------------------------------------------ instructions

    def _plan(self, s: Instr) -> tuple:
        """What running `s` takes, worked out once per run (every class that runs it reads the same):
        (the registers it writes, the values it computes [(0, Compute) | (1, Elect) | (2, parameter name)], what
        it does [(handler, effect)], whether it has an effect the run watches)."""
        effects = self.fx.of(s)
        values = []
        for e in effects:
            if isinstance(e, Compute) and e.dst in self.relevant:
                values.append((0, e))
            elif isinstance(e, Elect):
                values.append((1, e))
            elif isinstance(e, Access) and e.space == "param":
                p = e.addr.base if isinstance(e.addr, Addr) else e.addr
                if isinstance(p, Param) and (p.kind == "scalar" or p.name in self.pointers):
                    values.append((2, p.name))
            elif isinstance(e, Access) and e.space == "global" and not e.write and self.memory:
                values.append((3, e))
        acts = []
        for e in sorted(effects, key=lambda x: not isinstance(x, ExpectTx)):    # arrive.expect_tx: expect first
            if isinstance(e, Exit):
                acts.append((None, e))
                break
            if isinstance(e, (Trap, Jump)):
                acts.append((_give_up, e))
                break
            handler = _HANDLERS.get(type(e))
            if handler is not None and not (isinstance(e, Access) and e.space not in SHARED):
                acts.append((handler, e))
        return tuple(s.op.defs()), tuple(values), tuple(acts), any(isinstance(e, WATCHED) for e in effects)

    def _ins(self, th, s: Instr, plan):
        defs, values, acts, watched = plan
        regs = th.regs
        if s.guard is not None:
            g = self.values.get(th, s.guard)
            if isinstance(g, tuple):
                if any(x is None for x in g):
                    raise _GiveUp
                yes, no = self._split(th, g)
                no.pc = th.pc + 1           # the threads the guard leaves out skip the instruction
                return
            if g is None:
                if watched:
                    raise _GiveUp
                for r in defs:
                    regs.pop(r, None)
                th.pc += 1
                return
            if not g:
                th.pc += 1
                return
        results = []
        get = self.values.get
        for kind, x in values:
            if kind == 0:
                results.append((x.dst, self.values.compute(x, [get(th, a) for a in x.args], th.tids)))
            elif kind == 1:
                results.append((x.dst, self.values.elect(th, x.mask)))
            elif kind == 2:
                results.extend((r, self.values.params.get(x)) for r in defs)
            else:
                results.extend(zip(defs, self._read(th, x, s.op)))
        for r in defs:
            regs.pop(r, None)
        for r, v in results:
            if v is not None:
                regs[r] = v
        th.pc += 1
        for handler, e in acts:
            if handler is None:
                th.state = "done"
                return
            handler(self, th, s, e)

    def _read(self, th, e, op) -> list:
        """The values a load of global memory gives each of its destinations, from the memory the caller gave
        (None where the address is not in it, or differs among the class's threads)."""
        v = e.addr
        base = self.values.get(th, v.base if isinstance(v, Addr) else v)
        n = len(op.defs())
        if type(base) is not int:
            return [None] * n
        at = base + (v.offset if isinstance(v, Addr) else 0)
        size = e.nbytes // n
        start = max((b for b in self.memory if b <= at), default=None)
        data = self.memory.get(start)
        t = op.type
        if data is None or at - start + e.nbytes > len(data) or t.kind not in "usb":
            return [None] * n
        off = at - start
        return [int.from_bytes(data[off + i * size:off + (i + 1) * size], "little")
                for i in range(n)]

    def _addr(self, th, v, bar=False) -> Sym:
        x = self.values.get(th, v.base if isinstance(v, Addr) else v)
        off = v.offset if isinstance(v, Addr) else 0
        if not isinstance(x, Sym):
            raise _GiveUp
        if bar and isinstance(v.base if isinstance(v, Addr) else v, Reg):
            self.ring.add(x.alloc)
        return Sym(x.alloc, x.off + off)

    def _bar(self, th, v, s=None, waiting=False) -> tuple:
        key = self._addr(th, v, bar=True)
        self._in_bounds(key, s)
        b = self.bars.get(key)
        if b is None:
            inited = sorted(k.off // 8 for k in self.bars if k.alloc is key.alloc and self.bars[k].stmt is not None)
            if inited and key.alloc.nbytes > 8 and s is not None:
                self._report("mbarrier-uninit", f"{describe(th.tids)} use(s) mbarrier {_slot(key)} here, but no "
                             f"thread has initialised it (the run initialised {key.alloc.name}"
                             f"{inited}): an mbarrier.init loop that misses a slot", s)
                raise _Stop
            if not waiting:
                raise _GiveUp               # used before an init this run saw
            b = self.bars[key] = _Bar(1, 1, None)       # never initialised: its phase 0 never completes
        return key, b

    def _in_bounds(self, key, s):
        if s is not None and not 0 <= key.off <= key.alloc.nbytes - 8:
            self._report("mbarrier-bounds", f"this mbarrier operation addresses {key.alloc.name}+{key.off}, past "
                         f"the {key.alloc.nbytes // 8} barrier(s) of {key.alloc.name}: a ring index out of range "
                         f"writes whatever lies next to it", s)
            raise _Stop

    def init(self, th, s, e):
        count = self._int(th, e.count)
        key = self._addr(th, e.bar, bar=True)
        self._in_bounds(key, s)
        self.bars[key] = _Bar(count, count, s)

    def inval(self, th, s, e):
        self.bars.pop(self._addr(th, e.bar, bar=True), None)

    def arrive(self, th, s, e):
        if e.remote or e.pending:
            raise _GiveUp
        key, b = self._bar(th, e.bar, s)
        each = self._int(th, e.count) if e.count is not None else 1
        n = th.n * each
        if n > b.pending:
            self._overflow(th, key, b, n, s)
        th.tick()
        for k, v in th.vc.items():
            if b.vc.get(k, -1) < v:
                b.vc[k] = v
        b.arrived.append((th.tids, s))
        b.pending -= n
        if e.drop:
            b.count -= n
        self._complete(key, b, s)

    def _overflow(self, th, key, b, n, s):
        """More arrivals than the phase's init count: the phase completes after `pending` of them, and the others
        count towards the next phase (seen on the H200: an empty barrier initialised for 127 where 128 threads
        arrive each lap hung or let a refill overwrite a slot still being read). The threads of one arrive
        instruction do not land together, so which of them complete the phase is not known either. A finding
        already made explains it (threads that race ahead of a missing wait arrive for a later lap too early)."""
        if self.found:
            raise _Stop
        arrived = b.count - b.pending
        over = arrived + n - b.count
        self._report("arrival-count", f"{describe(th.tids)} arrive here on mbarrier {_slot(key)} in its phase "
                     f"{b.phase}, which completes after {b.count} arrival(s) (its mbarrier.init at line "
                     f"{_line(b.stmt)}) and has {arrived} already: {arrived + n} arrivals for a count of {b.count}, "
                     f"so the phase completes before all of these threads have arrived and {over} of them count "
                     f"towards phase {b.phase + 1} (init the barrier with the number of arrivals each phase "
                     f"receives)", s, b.stmt)
        raise _Stop

    def expect_tx(self, th, s, e):
        if e.remote:
            raise _GiveUp
        key, b = self._bar(th, e.bar, s)
        tx = self.values.get(th, e.tx)
        if isinstance(tx, int) and not isinstance(tx, bool):
            b.tx += th.n * tx
            self.armed[(th.id, key)] = (b.phase, self.waits.get(th.id, 0), s)
        else:
            b.exact = False
        b.src.append(s)

    def _early(self, th, key, b, nbytes, s):
        """A load whose bytes its issuer meant for a phase that has already completed: the issuer armed that
        phase (expect_tx) and has waited for nothing since, but the loads issued with it delivered the expected
        bytes first. The tx-count underflows on the device (all the loads are in flight together), the phase
        completes before these bytes land, and they count towards the next phase."""
        armed = self.armed.get((th.id, key))
        if armed is None or nbytes is None or not b.exact:
            return
        phase, waits, expect = armed
        if b.phase > phase and waits == self.waits.get(th.id, 0):
            self._report("expect-tx-mismatch", f"mbarrier {_slot(key)} completes its phase {phase} before this TMA "
                         f"load's {th.n * nbytes} bytes land: the expect_tx at line {_line(expect)} counts fewer "
                         f"bytes than the loads issued with it deliver, so the tx-count underflows and the surplus "
                         f"counts towards phase {phase + 1}", expect, s)
            raise _Stop

    def complete_tx(self, th, s, e):
        if e.remote:
            raise _GiveUp
        key, b = self._bar(th, e.bar, s)
        tx = self.values.get(th, e.tx)
        if isinstance(tx, int) and not isinstance(tx, bool):
            b.tx -= th.n * tx
        else:
            b.exact = False
        b.src.append(s)
        self._complete(key, b, s)

    def load(self, th, s, e):
        """A TMA load or bulk copy into this CTA's shared memory. A multicast one also lands in (and completes on
        the barriers of) the other CTAs, which also send theirs here: its bytes on this barrier are not known."""
        if e.remote:
            raise _GiveUp
        key, b = self._bar(th, e.bar, s)
        where = self.span(th, e.dst)            # one destination, or one per thread (a row per lane)
        if where is None:
            raise _GiveUp
        alloc, lo, top = where
        nbytes, room = self._sizes(th, e)
        if e.multicast is not None:
            nbytes = None
        th.tick()
        hi = top + (room if room is not None else alloc.nbytes)
        if room is not None and (lo < 0 or hi > alloc.nbytes):
            if not self._placed(e.dst):         # a box the walk places is the walk's (or the launch's box check)
                self._report("tma-smem-bounds", f"this TMA load writes {alloc.name}[{lo}:{hi}], past the "
                             f"{alloc.nbytes} bytes of {alloc.name} (a ring slot index out of range)", s)
            raise _Stop
        self._early(th, key, b, nbytes, s)
        self._refill_race(th, s, alloc, lo, hi)
        ld = _Load(alloc, lo, hi, key, b.phase, s, th.tids)
        self.loads.append(ld)
        b.loads.append(ld)
        b.src.append(s)
        if nbytes is None:
            b.exact = False
            b.tx = min(b.tx, 0)
        else:
            b.tx -= th.n * nbytes
        self._complete(key, b, s)

    def _placed(self, v) -> bool:
        """Whether the walk knows the buffer and offset of the shared address `v` on every path (then the rules
        of a box at `v` are the walk's to report: verify/tma.py)."""
        w = facts_of(self.k).where(v)
        return w is not None and w[1] is not None

    def _sizes(self, th, e):
        """(transaction bytes, shared bytes) of a copy: its size, or its map's box."""
        if e.tmap is None:
            n = self.values.get(th, e.size)
            return (n, n) if isinstance(n, int) and not isinstance(n, bool) else (None, None)
        p = getattr(e.tmap, "param", None) or self.origins.get(getattr(e.tmap, "addr", None))
        spec = None if p is None else self.maps.get(p.name) or getattr(p, "tmap", None)
        try:
            return int(spec.box_bytes), int(spec.smem_bytes)
        except (AttributeError, KeyError, ValueError, TypeError):
            return None, None

    def warp_sync(self, th, s, e):
        """bar.warp.sync with every lane: like bar.sync for the lanes of one warp. A class spanning several warps
        is parted into one class per warp; each waits until its warp's lanes (whatever classes hold them) are all
        here, and they leave knowing each other's past. A partial mask is not followed."""
        if self.values.get(th, e.mask) != FULL_MASK:
            return
        total = self.block[0] * self.block[1] * self.block[2]
        warps = sorted({t // 32 for t in th.tids})
        for w in warps[:-1]:
            mine, th = self._split(th, tuple(t // 32 == w for t in th.tids))
            mine.state, mine.at = "bar", (s, ("warp", w), min(32, total - 32 * w))
        th.state, th.at = "bar", (s, ("warp", warps[-1]), min(32, total - 32 * warps[-1]))

    def barrier(self, th, s, e):
        """bar.sync / barrier.cluster.wait: block until every live thread (or `count` threads) is there. The
        barriers a kernel names are told apart by scope and count."""
        if not e.wait:
            return
        count = self._int(th, e.count) if e.count is not None else None
        th.state, th.at = "bar", (s, (e.scope, count), count)

    # ------------------------------------------------------------------------------ barriers

    def _complete(self, key, b: _Bar, s):
        while b.pending <= 0 and (b.tx == 0 or not b.exact):
            known = dict(b.vc)
            known[("bar", key)] = b.phase
            b.done[b.phase] = known
            b.phase += 1
            b.pending += b.count
            b.tx = 0
            b.vc, b.arrived, b.loads, b.src = {}, [], [], []
            if b.count <= 0:
                raise _GiveUp
        if b.pending <= 0 and b.tx < 0 and b.exact:
            self._report("expect-tx-mismatch", f"mbarrier {_slot(key)} receives {-b.tx} transaction bytes more than "
                         f"its phase {b.phase} expects once all {b.count} arrivals are in: the tx-count underflows",
                         *_expects_first(b.src), s)
            b.tx = 0
            self._complete(key, b, s)

    def _wait(self, th, w: WaitLoop):
        e = next((x for x in self.fx.of(w) if isinstance(x, Wait)), None)
        if e is None or e.parity is None:
            raise _GiveUp
        parity = self.values.get(th, e.parity)
        if parity not in (0, 1) or isinstance(parity, tuple):
            raise _GiveUp
        key, b = self._bar(th, e.bar, w, waiting=True)
        seen = th.vc.get(("bar", key), -1)
        if parity == seen % 2:
            # It names a phase these threads saw complete (or, on a fresh barrier, the phase before phase 0):
            # unless the next phase has completed by then, it returns at once.
            pending = [ld for ld in self.loads if ld.key == key and ld.phase == seen + 1]
            if pending and key.alloc in self.ring:
                which = "the one before the first" if seen < 0 else "already seen complete"
                self._report("ring-parity", f"{describe(th.tids)} wait here on mbarrier {_slot(key)} with parity "
                             f"{parity}, which names phase {seen} ({which}), while the TMA load at line "
                             f"{_line(pending[0].stmt)} completes on phase {seen + 1}: "
                             f"the wait can return at once, before the data lands (start the parity at 0 and flip "
                             f"it each time the ring wraps)", w, pending[0].stmt)
            th.tick()
            th.pc += 1
            return
        want = seen + 1
        if b.phase > want:
            th.learn(b.done[want])
            th.tick()
            th.pc += 1
            self.waits[th.id] = self.waits.get(th.id, 0) + 1
            return
        th.state, th.at = "wait", (w, key, parity, want)

    def _wait_over(self, th) -> bool:
        w, key, parity, phase = th.at
        b = self.bars.get(key)
        if b is None or b.phase <= phase:
            return False
        th.learn(b.done[phase])
        th.tick()
        th.pc += 1
        self.waits[th.id] = self.waits.get(th.id, 0) + 1
        return True

    def _release_syncs(self) -> bool:
        """Release a bar.sync every live class has reached (or enough threads, with a count)."""
        live = [c for c in self.classes if c.state not in ("done", "split")]
        at = {}
        for c in live:
            if c.state == "bar":
                at.setdefault(c.at[1], []).append(c)
        for bid, group in at.items():
            count = group[0].at[2]
            threads = sum(c.n for c in group)
            if (count is not None and threads >= count) or (count is None and len(group) == len(live)):
                known: dict = {}
                for c in group:
                    for k, v in c.vc.items():
                        if known.get(k, -1) < v:
                            known[k] = v
                for c in group:
                    c.learn(known)
                    c.synced = c.clock
                    c.tick()
                    c.state = "run"              # its pc is past the bar.sync already
                    self.waits[c.id] = self.waits.get(c.id, 0) + 1
                return True
        return False

    def _deadlock(self):
        """Every live class is blocked: name the waits that can never return. A phase short of arrivals or of
        bytes is a cause; a wait whose phase nothing arrives on is reported only when no such cause is, since it
        is mostly their consequence (a producer waiting for a slot that consumers, stuck on an unfinished full
        phase, never release)."""
        unarmed, caused = [], False
        for th in self.classes:
            if th.state != "wait":
                continue
            w, key, parity, phase = th.at
            b = self.bars[key]
            if b.pending > 0 and b.pending < b.count:
                who = sorted({t for tids, _ in b.arrived for t in tids})
                arrived = b.count - b.pending
                self._report("arrival-count", f"{describe(th.tids)} wait here on mbarrier {_slot(key)} for its phase "
                             f"{phase}, which needs {b.count} arrivals (its mbarrier.init at line {_line(b.stmt)}), "
                             f"but only {arrived} arrive ({describe(who) if who else 'no thread'}) before every "
                             f"thread is blocked: the wait never returns", w, b.stmt)
                caused = True
            elif b.pending <= 0 and b.exact and b.tx > 0:
                self._report("expect-tx-mismatch", f"mbarrier {_slot(key)} still expects {b.tx} transaction bytes "
                             f"in phase {phase} when every arrival is in and no load is left to deliver them: the "
                             f"wait at line {_line(w)} never returns", *_expects_first(b.src), w)
                caused = True
            elif b.pending == b.count and b.exact or b.pending == b.count and not b.loads:
                unarmed.append(th)
        for th in unarmed if not caused else ():
            w, key, parity, phase = th.at
            self._report("wait-never-armed", f"{describe(th.tids)} wait here on mbarrier {_slot(key)} for its "
                         f"phase {phase}, but nothing arrives on that phase: only {phase} phase(s) of it ever "
                         f"complete, so the wait never returns (a drain loop that runs too long, or a ring that "
                         f"skips a refill)", w)

    # ------------------------------------------------------------------------------ races

    def _report(self, rule, message, *stmts):
        key = (rule, stmts[0])
        if key not in self.found:
            self.found[key] = Finding(rule, message, stmts)

    def verdict(self) -> list:
        if all(c.state in ("done", "split") for c in self.classes):
            live = [c for c in self.classes if c.state == "done"]
            for ld in self.loads:
                if ld.key.alloc in self.ring and not any(c.vc.get(("bar", ld.key), -1) >= ld.phase for c in live):
                    self._report("tma-load-race", f"the kernel exits while the TMA load at line {_line(ld.stmt)} may "
                                 f"still be writing shared memory: no thread waits for phase {ld.phase} of mbarrier "
                                 f"{_slot(ld.key)}, which it completes on (a drain loop that stops too early, or a "
                                 f"refill with no iteration left to consume it)", ld.stmt)
        return list(self.found.values())


def _loop_vars(stmts, around=(), out=None) -> dict:
    """{statement: the counters of the loops around it, outermost first}."""
    out = {} if out is None else out
    for s in stmts:
        if isinstance(s, Loop):
            _loop_vars(s.body, around + (s.var,), out)
        elif isinstance(s, If):
            _loop_vars(s.then, around, out)
            _loop_vars(s.orelse or (), around, out)
        else:
            out[s] = around
    return out


def _give_up(run, th, s, e):
    raise _GiveUp                   # a trap or a hand-written branch: the run cannot follow it


def _expects_first(stmts) -> list:
    """A phase's statements, those that state bytes (expect_tx, complete_tx) first, as the flow names them."""
    loads = [s for s in stmts if any(isinstance(e, AsyncWrite) for e in s.op.effects())]
    return [s for s in stmts if s not in loads] + loads


def _signed(v, bits):
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


_HANDLERS = {Init: _Run.init, Inval: _Run.inval, Arrive: _Run.arrive, ExpectTx: _Run.expect_tx,
             CompleteTx: _Run.complete_tx, AsyncWrite: _Run.load, Access: _Run.access, Barrier: _Run.barrier,
             AsyncRead: _Run.store_read, CommitGroup: _Run.commit_group, WaitGroup: _Run.wait_group,
             MmaAsync: _Run.mma_read,
             WarpSync: _Run.warp_sync}
