"""The ring check: a concrete run of thread 0 of CTA 0 through a kernel, counting the mbarrier phases it arms
and waits for on each slot of a barrier array it indexes at run time (a ring of stages).

The walk (flow) cannot tell the slots of such an array apart. This run can, wherever thread 0's path is fixed
by constants, loop counters and %tid (every special register that names a thread, CTA or cluster rank reads
0). Rules: wait-never-armed (a wait for a phase thread 0 never arms never returns), tma-load-race (a phase it
arms but never waits for leaves a TMA load in flight when the kernel exits: a drain loop one iteration too
short or too long). Anything it cannot follow (a branch on a parameter, elect.sync, a multicast or remote
barrier, an arrival count above 1) ends the run without a finding. Register arithmetic is ptxdsl.fold's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..fold import evaluate, signed
from ..ir import Addr, If, Imm, Instr, Loop, PredNot, Reg, SharedAlloc, SpecialReg, WaitLoop, Walker, walk
from ..isa.effects import (Arrive, AsyncWrite, CompleteTx, Compute, Exit, ExpectTx, Init, Inval, Jump, Wait)
from ..types import pred

STEP_BUDGET = 20_000            # statements one run may execute before it gives up (a few ms)
ZERO_SREGS = frozenset({"%tid.x", "%tid.y", "%tid.z", "%laneid", "%ctaid.x", "%ctaid.y", "%ctaid.z",
                        "%cluster_ctarank", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
                        "%clusterid.x", "%clusterid.y", "%clusterid.z"})
BARRIER_EVENTS = (Init, Inval, Arrive, ExpectTx, CompleteTx, Wait)


class _GiveUp(Exception):
    """Thread 0's path depends on something the run does not know."""


class _Exit(Exception):
    """ret / exit: the run is over."""


@dataclass(frozen=True)
class _Sym:
    """An address in shared memory: `off` bytes into `alloc`."""

    alloc: SharedAlloc
    off: int


@dataclass
class _Slot:
    """One mbarrier as thread 0 sees it."""

    count: int = 1
    armed: int = 0              # phases completed by thread 0's arrivals (the TMA bytes land in time)
    waited: int = 0             # of those, the ones thread 0 has waited for
    loads: list = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    stmts: tuple


def ring_findings(kernel) -> list[Finding]:
    """What the run of thread 0 finds on the barrier arrays it indexes at run time (empty when it gives up)."""
    if not _ring_waits(kernel.body):
        return []                               # every wait names its barrier statically: the flow knows
    run = _Run()
    try:
        run.block(kernel.body)
    except _Exit:
        pass
    except _GiveUp:
        return []
    return run.findings()


def _arms(effects) -> bool:
    """An instruction that moves a barrier's phase on: an arrive, or a copy that completes on it."""
    return any(isinstance(e, (Arrive, AsyncWrite)) for e in effects)


def _counted(effects) -> bool:
    """An instruction the run counts: an mbarrier op or wait, or a copy that completes on a barrier."""
    return any(isinstance(e, BARRIER_EVENTS + (AsyncWrite,)) for e in effects)


def _any(stmts, test) -> bool:
    return any(test(ins.op.effects()) for ins in walk(stmts))


def _ring_waits(stmts) -> bool:
    """Whether some wait finds its barrier through a register (a slot picked at run time)."""
    return any(isinstance(e, Wait) and isinstance(e.bar.base if isinstance(e.bar, Addr) else e.bar, Reg)
               for ins in walk(stmts) for e in ins.op.effects())


def _defs(stmts):
    for s in stmts:
        if isinstance(s, (Instr, WaitLoop)):
            yield from s.op.defs()
        elif isinstance(s, If):
            yield from _defs(s.then)
            yield from _defs(s.orelse or [])
        elif isinstance(s, Loop):
            yield s.var
            yield from _defs(s.body)


class _Run(Walker):
    def __init__(self):
        self.vals: dict = {}
        self.steps = 0
        self.slots: dict = {}           # _Sym -> _Slot
        self.ring: set = set()          # allocs some event addressed through a register
        self.hang = None                # (the wait that never returns, its slot, the phase it waits for)
        self.counted: dict = {}         # Loop -> whether its body holds anything the run counts;
                                        # id(branch) -> whether it arrives or loads

    # -------------------------------------------------------------------------------- values

    def val(self, v):
        if isinstance(v, Imm):
            return None if v.type.kind == "f" else int(v.value)
        if isinstance(v, Reg):
            return self.vals.get(v)
        if isinstance(v, PredNot):
            x = self.vals.get(v.reg)
            return None if x is None else not x
        if isinstance(v, SpecialReg):
            return 0 if v.name in ZERO_SREGS else None
        if isinstance(v, SharedAlloc):
            return _Sym(v, 0)
        return None

    def number(self, v):
        """An operand's value for fold.evaluate: an int or bool, None for an address or anything unknown."""
        x = self.val(v)
        return None if isinstance(x, _Sym) else x

    def addr(self, v):
        """The slot a memory operand names, or raise _GiveUp."""
        base, off = (v.base, v.offset) if isinstance(v, Addr) else (v, 0)
        if isinstance(base, SharedAlloc):
            return _Sym(base, off)
        x = self.vals.get(base) if isinstance(base, Reg) else None
        if not isinstance(x, _Sym):
            raise _GiveUp
        self.ring.add(x.alloc)
        return _Sym(x.alloc, x.off + off)

    def set(self, reg, x):
        if isinstance(x, bool) or reg.type is pred:
            self.vals[reg] = None if x is None else bool(x)
        elif isinstance(x, int):
            self.vals[reg] = x & ((1 << reg.type.reg_bits) - 1)
        else:
            self.vals[reg] = x

    def forget(self, regs):
        for r in regs:
            self.vals[r] = None

    # -------------------------------------------------------------------------------- statements

    def block(self, stmts):
        for s in stmts:
            self.steps += 1
            if self.steps > STEP_BUDGET:
                raise _GiveUp
            self.visit(s)

    def if_(self, s: If):
        c = None if s.kind == "elect" else self.val(s.cond)
        if c is None:
            if _any(s.then, _counted) or _any(s.orelse or [], _counted):
                raise _GiveUp
            self.forget(_defs(s.then))
            self.forget(_defs(s.orelse or []))
        else:
            taken, other = (s.then, s.orelse or []) if c else (s.orelse or [], s.then)
            skipped = self.counted.get(id(other))
            if skipped is None:
                skipped = self.counted[id(other)] = _any(other, _arms)
            if skipped:
                raise _GiveUp                   # other threads arrive or load there: thread 0 alone cannot count
            self.block(taken)

    def loop(self, s: Loop):
        start, stop = self.val(s.start), self.val(s.stop)
        events = self.counted.get(s)
        if events is None:
            events = self.counted[s] = _any(s.body, _counted)
        if not events or not isinstance(start, int) or not isinstance(stop, int):
            if events:
                raise _GiveUp
            self.forget([s.var, *_defs(s.body)])      # nothing counted in it: skip it, forget what it writes
            return
        bits, is_signed = s.var.type.bits, s.var.type.kind == "s"
        value = (lambda x: signed(x, bits)) if is_signed else (lambda x: x)
        self.set(s.var, start)
        while (value(self.vals[s.var]) < value(stop)) if s.step > 0 else (value(self.vals[s.var]) > value(stop)):
            self.block(s.body)
            if not isinstance(self.vals.get(s.var), int):
                raise _GiveUp
            self.set(s.var, self.vals[s.var] + s.step)

    def instr(self, s: Instr):
        effects = s.op.effects()
        if s.guard is not None:
            g = self.val(s.guard)
            if g is None:
                if any(isinstance(e, BARRIER_EVENTS + (AsyncWrite, Exit, Jump)) for e in effects):
                    raise _GiveUp
                self.forget(s.op.defs())
                return
            if not g:
                if _arms(effects):
                    raise _GiveUp               # other threads may arrive or load here
                return
        results = [(e.dst, self.compute(e)) for e in effects if isinstance(e, Compute)]
        self.forget(s.op.defs())
        for reg, x in results:
            self.set(reg, x)
        for e in effects:
            if isinstance(e, Exit):
                raise _Exit
            if isinstance(e, Jump):
                raise _GiveUp
            if isinstance(e, Init):
                self.init(e)
            elif isinstance(e, Arrive):
                self.arrive(e)
            elif isinstance(e, AsyncWrite):
                self.load(s, e)

    # -------------------------------------------------------------------------------- register ops

    def compute(self, e: Compute):
        """The value a Compute effect writes: an int or bool (fold.evaluate), an address, or None."""
        fn = e.fn
        if fn == "mov":
            return self.val(e.args[0])
        if fn == "selp":
            c = self.val(e.args[2])
            return None if c is None else self.val(e.args[0] if c else e.args[1])
        if fn in ("add", "sub") or (fn == "mad" and e.mode in ("lo", "wide")):
            vals = [self.val(a) for a in e.args]
            if any(isinstance(x, _Sym) for x in vals):
                return self._address(fn, vals)
        return evaluate(e, self.number)

    @staticmethod
    def _address(fn, vals):
        """add/sub of an address and a number, mad of two numbers and an address (None otherwise)."""
        ints = [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]
        if fn == "add" and len(ints) == 1:
            sym = next(x for x in vals if isinstance(x, _Sym))
            return _Sym(sym.alloc, sym.off + ints[0])
        if fn == "sub" and isinstance(vals[0], _Sym) and len(ints) == 1:
            return _Sym(vals[0].alloc, vals[0].off - ints[0])
        if fn == "mad" and isinstance(vals[2], _Sym) and len(ints) == 2:
            return _Sym(vals[2].alloc, vals[2].off + ints[0] * ints[1])
        return None

    # -------------------------------------------------------------------------------- mbarriers

    def slot(self, v) -> _Slot:
        return self.slots.setdefault(self.addr(v), _Slot())

    def init(self, e: Init):
        count = self.val(e.count)
        if not isinstance(count, int):
            raise _GiveUp
        self.slots[self.addr(e.bar)] = _Slot(count=count)

    def arrive(self, e: Arrive):
        if e.remote:
            raise _GiveUp
        slot = self.slot(e.bar)
        if e.count is not None and self.val(e.count) != 1:
            slot.count = 0                      # arrivals counted in bulk: not a ring this run follows
        if e.pending or e.drop:
            slot.count = 0
        slot.armed += 1

    def load(self, s, e: AsyncWrite):
        if e.multicast is not None:
            raise _GiveUp
        self.slot(e.bar).loads.append(s)

    def wait(self, w: WaitLoop):
        e = next((x for x in w.op.effects() if isinstance(x, Wait)), None)
        if e is None or e.parity is None:
            raise _GiveUp
        parity, key = self.val(e.parity), self.addr(e.bar)
        slot = self.slots.setdefault(key, _Slot())
        if parity not in (0, 1):
            raise _GiveUp
        self.forget(w.op.defs())
        if parity != slot.waited % 2:
            return                              # names the phase before: returns at once (phase-reuse's business)
        if slot.armed > slot.waited:
            slot.waited += 1
            return
        self.hang = (w, key, slot.waited)
        raise _Exit

    # -------------------------------------------------------------------------------- verdict

    def findings(self) -> list[Finding]:
        followed = {a for a in self.ring
                    if all(sl.count == 1 for k, sl in self.slots.items() if k.alloc is a)
                    and any(sl.waited or (self.hang and self.hang[1] == k) for k, sl in self.slots.items()
                            if k.alloc is a)}
        out = []
        if self.hang is not None:
            if self.hang[1].alloc not in followed:
                return []                       # stuck on a barrier other threads arrive on: the run cannot judge
            w, key, phase = self.hang
            slot = self.slots[key]
            out.append(Finding("wait-never-armed", f"thread 0 waits here on mbarrier {_slot_name(key)} for its phase "
                               f"{phase}, but it arms only {slot.armed} phase(s) of that slot (arrive.expect_tx) in "
                               f"the whole kernel: the wait never returns (a drain loop that runs too long, or a "
                               f"ring that skips a refill)", (w,)))
            return out
        for key, slot in sorted(self.slots.items(), key=lambda kv: (kv[0].alloc.name, kv[0].off)):
            if key.alloc in followed and slot.loads and slot.armed > slot.waited:
                n = slot.armed - slot.waited
                out.append(Finding("tma-load-race", f"the kernel exits while the TMA load at line "
                                   f"{_line(slot.loads[-1])} may still be writing shared memory: thread 0 arms "
                                   f"{slot.armed} phase(s) of mbarrier {_slot_name(key)} but waits for {slot.waited}, "
                                   f"so {n} load(s) on it are never waited on (a drain loop that stops too early, or "
                                   f"a refill with no iteration left to consume it)", (slot.loads[-1],)))
        return out


def _slot_name(key: _Sym) -> str:
    return f"{key.alloc.name}[{key.off // 8}]" if key.alloc.nbytes > 8 else key.alloc.name


def _line(s) -> str:
    return str(s.loc.line) if s.loc is not None else "?"
