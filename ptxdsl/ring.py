"""The ring check: a concrete run of thread 0 of CTA 0 through a kernel, counting the mbarrier phases it arms
and waits for on each slot of a barrier array it indexes at run time (a ring of stages).

The flow analysis of verify.py cannot tell the slots of such an array apart. This run can, wherever thread 0's
path is fixed by constants, loop counters and %tid (every special register that names a thread, CTA or cluster
rank reads 0): a wait for a phase that thread 0 never arms never returns, and a phase it arms but never waits
for leaves a TMA load in flight when the kernel exits (a drain loop one iteration too short or too long).
Anything it cannot follow (a branch on a parameter, elect.sync, a multicast or remote barrier, an arrival
count above 1) ends the run without a finding.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Addr, If, Imm, Instr, Loop, PredNot, Reg, SharedAlloc, SpecialReg, WaitLoop, walk
from .types import pred

STEP_BUDGET = 20_000            # statements one run may execute before it gives up (a few ms)
ZERO_SREGS = frozenset({"%tid.x", "%tid.y", "%tid.z", "%laneid", "%ctaid.x", "%ctaid.y", "%ctaid.z",
                        "%cluster_ctarank", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
                        "%clusterid.x", "%clusterid.y", "%clusterid.z"})
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
        "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
        "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b}


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
        return []                               # every wait names its barrier statically: the flow analysis knows
    run = _Run()
    try:
        run.block(kernel.body)
    except _Exit:
        pass
    except _GiveUp:
        return []
    return run.findings()


def _mask(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _is_arm(op) -> bool:
    """An op that moves a barrier's phase on: an arrive, or a load that completes on it."""
    return type(op).__name__ == "MbarrierArrive" or getattr(op, "mbar", None) is not None


def _arms(stmts) -> bool:
    """Whether `stmts` arrive on a barrier or load into one (what other threads than 0 may do instead)."""
    return any(_is_arm(ins.op) for ins in walk(stmts))


def _events(stmts) -> bool:
    """Whether `stmts` hold anything the run counts (an mbarrier op or wait, a load that completes on one)."""
    return any(type(ins.op).__name__.startswith("Mbarrier") or _is_arm(ins.op) for ins in walk(stmts))


def _ring_waits(stmts) -> bool:
    """Whether some wait finds its barrier through a register (a slot picked at run time)."""
    return any(type(ins.op).__name__ == "MbarrierWait"
               and isinstance(ins.op.addr.base if isinstance(ins.op.addr, Addr) else ins.op.addr, Reg)
               for ins in walk(stmts))


def _defs(stmts):
    for s in stmts:
        if isinstance(s, Instr):
            yield from s.op.defs()
        elif isinstance(s, WaitLoop):
            yield from s.op.defs()
        elif isinstance(s, If):
            yield from _defs(s.then)
            yield from _defs(s.orelse or [])
        elif isinstance(s, Loop):
            yield s.var
            yield from _defs(s.body)


class _Run:
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

    def set(self, reg, x, bits=None):
        if isinstance(x, bool) or reg.type is pred:
            self.vals[reg] = None if x is None else bool(x)
        elif isinstance(x, int):
            self.vals[reg] = _mask(x, bits or reg.type.reg_bits)
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
            if isinstance(s, Instr):
                self.instr(s)
            elif isinstance(s, WaitLoop):
                self.wait(s)
            elif isinstance(s, If):
                self.if_(s)
            elif isinstance(s, Loop):
                self.loop(s)

    def if_(self, s: If):
        c = None if s.kind == "elect" else self.val(s.cond)
        if c is None:
            if _events(s.then) or _events(s.orelse or []):
                raise _GiveUp
            self.forget(_defs(s.then))
            self.forget(_defs(s.orelse or []))
        else:
            taken, other = (s.then, s.orelse or []) if c else (s.orelse or [], s.then)
            skipped = self.counted.get(id(other))
            if skipped is None:
                skipped = self.counted[id(other)] = _arms(other)
            if skipped:
                raise _GiveUp                   # other threads arrive or load there: thread 0 alone cannot count
            self.block(taken)

    def loop(self, s: Loop):
        start, stop = self.val(s.start), self.val(s.stop)
        events = self.counted.get(s)
        if events is None:
            events = self.counted[s] = _events(s.body)
        if not events or not isinstance(start, int) or not isinstance(stop, int):
            if events:
                raise _GiveUp
            self.forget([s.var, *_defs(s.body)])      # nothing counted in it: skip it, forget what it writes
            return
        bits, signed = s.var.type.bits, s.var.type.kind == "s"
        value = (lambda x: _signed(x, bits)) if signed else (lambda x: x)
        self.set(s.var, start)
        while (value(self.vals[s.var]) < value(stop)) if s.step > 0 else (value(self.vals[s.var]) > value(stop)):
            self.block(s.body)
            if not isinstance(self.vals.get(s.var), int):
                raise _GiveUp
            self.set(s.var, self.vals[s.var] + s.step)

    def instr(self, s: Instr):
        op = s.op
        name = type(op).__name__
        if s.guard is not None:
            g = self.val(s.guard)
            if g is None:
                if name.startswith("Mbarrier") or getattr(op, "mbar", None) is not None or name in ("Ret", "Exit",
                                                                                                     "Bra"):
                    raise _GiveUp
                self.forget(op.defs())
                return
            if not g:
                if _is_arm(op):
                    raise _GiveUp               # other threads may arrive or load here
                return
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, s, op)
        elif getattr(op, "mbar", None) is not None:
            self.load(s, op)
        else:
            self.forget(op.defs())

    # -------------------------------------------------------------------------------- register ops

    def op_Mov(self, s, op):
        self.set(op.dst, self.val(op.src))

    def op_Binary(self, s, op):
        a, b, t = self.val(op.a), self.val(op.b), op.type
        bits = t.bits * 2 if op.mode == "wide" else t.bits
        if op.op == "add" and isinstance(a, _Sym) and isinstance(b, int):
            return self.set(op.dst, _Sym(a.alloc, a.off + b))
        if op.op == "add" and isinstance(b, _Sym) and isinstance(a, int):
            return self.set(op.dst, _Sym(b.alloc, b.off + a))
        if op.op == "sub" and isinstance(a, _Sym) and isinstance(b, int):
            return self.set(op.dst, _Sym(a.alloc, a.off - b))
        if t is pred and isinstance(a, bool) and isinstance(b, bool):
            return self.set(op.dst, {"and": a and b, "or": a or b, "xor": a != b}.get(op.op))
        if not (isinstance(a, int) and isinstance(b, int)) or isinstance(a, bool) or isinstance(b, bool):
            return self.forget(op.defs())
        if t.kind == "s":
            a, b = _signed(a, t.bits), _signed(b, t.bits)
        f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
             "div": lambda: int(a / b) if b else None, "rem": lambda: a - b * int(a / b) if b else None,
             "min": lambda: min(a, b), "max": lambda: max(a, b), "and": lambda: a & b, "or": lambda: a | b,
             "xor": lambda: a ^ b, "shl": lambda: a << b if b < bits else 0,
             "shr": lambda: a >> min(b, bits)}.get(op.op)
        x = f() if f is not None and op.mode in (None, "lo", "wide") else None
        self.set(op.dst, x, bits) if x is not None else self.forget(op.defs())

    def op_Mad(self, s, op):
        a, b, c = self.val(op.a), self.val(op.b), self.val(op.c)
        if not (isinstance(a, int) and isinstance(b, int)) or op.mode not in ("lo", "wide"):
            return self.forget(op.defs())
        if isinstance(c, _Sym):
            return self.set(op.dst, _Sym(c.alloc, c.off + a * b))
        if not isinstance(c, int):
            return self.forget(op.defs())
        self.set(op.dst, a * b + c, op.type.bits * 2 if op.mode == "wide" else op.type.bits)

    def op_Setp(self, s, op):
        a, b, t = self.val(op.a), self.val(op.b), op.type
        if not (isinstance(a, int) and isinstance(b, int)) or t.kind == "f" or op.cmp not in _CMP:
            return self.forget(op.defs())
        if t.kind == "s":
            a, b = _signed(a, t.bits), _signed(b, t.bits)
        self.set(op.dst, _CMP[op.cmp](a, b))

    def op_Selp(self, s, op):
        c = self.val(op.cond)
        self.set(op.dst, None if c is None else self.val(op.a if c else op.b))

    def op_Cvt(self, s, op):
        x = self.val(op.src)
        if not isinstance(x, int) or isinstance(x, bool) or "f" in (op.dtype.kind, op.stype.kind):
            return self.forget(op.defs())
        self.set(op.dst, _signed(x, op.stype.bits) if op.stype.kind == "s" else x, op.dtype.bits)

    def op_Ret(self, s, op):
        raise _Exit

    op_Exit = op_Ret

    def op_Bra(self, s, op):
        raise _GiveUp

    # -------------------------------------------------------------------------------- mbarriers

    def slot(self, s, v) -> _Slot:
        return self.slots.setdefault(self.addr(v), _Slot())

    def op_MbarrierInit(self, s, op):
        count = self.val(op.count)
        if not isinstance(count, int):
            raise _GiveUp
        self.slots[self.addr(op.addr)] = _Slot(count=count)

    def op_MbarrierArrive(self, s, op):
        if op.space == "shared::cluster":
            raise _GiveUp
        slot = self.slot(s, op.addr)
        if op.count is not None and self.val(op.count) != 1:
            slot.count = 0                      # arrivals counted in bulk: not a ring this run follows
        if getattr(op, "no_complete", False) or getattr(op, "drop", False):
            slot.count = 0
        slot.armed += 1
        self.forget(op.defs())

    def load(self, s, op):
        if getattr(op, "multicast", None) is not None:
            raise _GiveUp
        self.slot(s, op.mbar).loads.append(s)
        self.forget(op.defs())

    def wait(self, w: WaitLoop):
        op = w.op
        if op.parity is None:
            raise _GiveUp
        parity, key = self.val(op.parity), self.addr(op.addr)
        slot = self.slots.setdefault(key, _Slot())
        if parity not in (0, 1):
            raise _GiveUp
        self.forget(op.defs())
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


_HANDLERS = {name[3:]: fn for name, fn in vars(_Run).items() if name.startswith("op_")}


def _slot_name(key: _Sym) -> str:
    return f"{key.alloc.name}[{key.off // 8}]" if key.alloc.nbytes > 8 else key.alloc.name


def _line(s) -> str:
    return str(s.loc.line) if s.loc is not None else "?"
