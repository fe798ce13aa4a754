"""Debug mode, the kernel side: a wait that spins longer than the kernel's timeout writes its site and
phase into a host-visible record and traps, so a hang becomes a KernelTrap naming the waiting line
(ptxdsl.runtime.watchdog reads the record). Before a TMA instruction, a debug kernel also checks on the device
what the verifier could not decide (ptxdsl.verify.device_checks): a box's innermost coordinate that is not a
multiple of 16 bytes, an expect_tx register that is not the bytes the phase's loads deliver. A failed check
writes its number and the value into the record and traps instead of an illegal instruction or a hang. A loop
written by hand (a `bra` back to a label placed before it: a spin on a flag in global memory, say) is bounded the
same way: once it has gone round for longer than the timeout it records its number (after the device checks') and
traps, so a flag that is never set is a KernelTrap naming the branch's line, not a hang.

The record is the kernel's hidden first parameter `__ptxdsl_debug` (a pointer to RECORD_BYTES of mapped host
memory): word 0 the 1-based wait site, word 1 the parity waited for (STATE_WAIT for a state token), word 2 the
1-based number of the device check that failed (0: none), word 3 the value it found."""
from __future__ import annotations

import functools

from . import sreg
from .ir import Addr, Imm, Instr, Label, LabelStmt, PredNot, Reg, statements
from .isa import core
from .isa.mbarrier import count_value
from .types import pred, u32, u64

PARAM = "__ptxdsl_debug"
DEFAULT_TIMEOUT_NS = 200_000_000      # a debug=True wait gives up after 0.2 s
STATE_WAIT = 0xFFFFFFFF               # what a wait on a state token records in place of a parity
RECORD_BYTES = 32
CHECK_WORD, VALUE_WORD = 8, 12        # byte offsets in the record: the failed check's number, the value it saw


def timeout_ns(k) -> int:
    """How long a debug-mode wait of kernel `k` spins before it traps: 0.2 s for debug=True, else debug= seconds."""
    return DEFAULT_TIMEOUT_NS if k.debug is True else max(1, int(k.debug * 1e9))


def record_param(k):
    """The register holding the record's address (the hidden parameter's)."""
    return next(p.value for p in k.params if p.name == PARAM)


def bounded_spin(wait, k, fresh) -> list:
    """The statements of a debug-mode wait: poll, give up after the timeout, record the site and trap.
    `fresh(kind)` makes a new label name."""
    op, loc = wait.op, wait.loc
    t0, t, in_time = wait.debug_regs
    head, out = Label(fresh("wait")), Label(fresh("wait_done"))
    record = record_param(k)

    def ins(o, guard=None):
        return Instr(o, guard, loc)

    parity = op.parity if getattr(op, "parity", None) is not None else Imm(STATE_WAIT, u32)
    return [
        ins(core.Mov(type=u64, d=t0, src=sreg.globaltimer)),
        LabelStmt(head, loc),
        ins(op),
        ins(core.Bra(target=out), op.done),
        ins(core.Mov(type=u64, d=t, src=sreg.globaltimer)),
        ins(core.Sub(type=u64, d=t, a=t, b=t0)),
        ins(core.Setp(cmp="lt", type=u64, p=in_time, a=t, b=timeout_ns(k))),
        ins(core.Bra(target=head), in_time),
        ins(core.St(volatile=True, space="global", type=u32, addr=Addr(record, 4), value=parity)),
        ins(core.St(volatile=True, space="global", type=u32, addr=Addr(record, 0), value=wait.site + 1)),
        ins(core.Membar(level="sys")),
        ins(core.Trap()),
        LabelStmt(out, loc),
    ]


def sites(k) -> list:
    """(loc, barrier name, what it waits for) of every wait of `k`, in site order, for the trap message."""
    addrs = [s.op.bar for s in k.wait_sites]
    if k.debug and any(isinstance(a.base, Reg) for a in addrs):
        from .verify import barrier_names      # registers traced to their buffers: only debug kernels pay

        names = barrier_names(k, addrs)
    else:
        names = [_bar_name(a) for a in addrs]
    return [(s.loc, name, _waited(s.op)) for s, name in zip(k.wait_sites, names)]


def _bar_name(addr) -> str:
    base = addr.base
    name = getattr(base, "name", str(base))
    return f"{name}+{addr.offset}" if addr.offset else name


def _waited(op) -> str:
    v = op.parity if getattr(op, "parity", None) is not None else op.state
    n = count_value(v)
    return str(n) if n is not None else str(v)


def op_checks(k) -> dict:
    """{Instr: the checks a debug kernel makes before it}, each check (number, kind, register, expected, ...) as
    ptxdsl.verify.device_checks gives it, numbered from 1 in program order; the two scratch registers the
    checks use are allocated once per kernel (before its `.reg` lines are written). Empty unless k.debug."""
    if not k.debug:
        return {}
    got = k.__dict__.get("debug_op_checks")
    if got is None:
        from .verify import device_checks       # the verifier's facts: only debug kernels pay for them

        found = device_checks(k)
        got, n = {}, 0
        for ins in k.walk():
            for c in found.get(ins, ()):
                n += 1
                got.setdefault(ins, []).append((n,) + tuple(c))
        if got:
            k.debug_scratch = (_scratch(k, u32), _scratch(k, pred))
        k.debug_op_checks = got
    return got


def loop_sites(k) -> dict:
    """{Instr: (number, start register)} for each hand-written backward branch of a debug kernel (a `bra` to a
    label placed before it), numbered after the device checks; one start register (.u64, 0 until the loop first
    goes round) per branch, and a scratch pair for all of them (`_scratch`: the emitter's). Empty unless
    k.debug."""
    if not k.debug:
        return {}
    got = k.__dict__.get("debug_loop_sites")
    if got is None:
        first = sum(len(c) for c in op_checks(k).values()) + 1
        reg = functools.partial(_scratch, k)
        placed, got = set(), {}
        for s in statements(k.body, (Instr, LabelStmt)):
            if isinstance(s, LabelStmt):
                placed.add(s.label.name)
            elif isinstance(s.op, core.Bra) and s.op.target.name in placed:
                got[s] = (first + len(got), reg(u64))
        if got:
            k.debug_loop_scratch = (reg(u64), reg(pred))
        k.debug_loop_sites = got
    return got


def _scratch(k, t) -> Reg:
    """A register the emitter adds to a debug kernel (for its device checks and bounded loops): numbered past the
    kernel's own, without adding to them, so the kernel (and the .ptxd printed from it) stays as it was built."""
    extra = k.__dict__.setdefault("debug_extra_regs", {})
    extra[t.reg_class] = extra.get(t.reg_class, 0) + 1
    return Reg(t, k.reg_counts[t.reg_class] + extra[t.reg_class])


def extra_regs(k, cls: str) -> int:
    """How many registers of class `cls` the emitter adds to a debug kernel (`_scratch`)."""
    return k.__dict__.get("debug_extra_regs", {}).get(cls, 0) if k.debug else 0


def loop_starts(k, label=None) -> list:
    """The statements that clear the start registers of the loops back to `label` (all of them when None): at
    the kernel's entry, and on the way into the label from above, so each entry into a loop times it afresh."""
    return [Instr(core.Mov(type=u64, d=t0, src=0), None, s.loc) for s, (_, t0) in loop_sites(k).items()
            if label is None or s.op.target.name == label]


def bounded_branch(s, k, fresh) -> list:
    """The statements of a debug kernel's hand-written backward branch `s`: where it is taken, note when the
    loop first went round, go round again while that is less than the timeout ago, else record the branch's
    number and trap."""
    number, t0 = loop_sites(k)[s]
    t, in_time = k.debug_loop_scratch
    record, loc = record_param(k), s.loc

    def ins(o, guard=None):
        return Instr(o, guard, loc)

    out, skip = [], None
    if s.guard is not None:
        skip = Label(fresh("loop_exit"))
        out.append(ins(core.Bra(target=skip), s.guard.reg if isinstance(s.guard, PredNot) else PredNot(s.guard)))
    out += [ins(core.Mov(type=u64, d=t, src=sreg.globaltimer)),
            ins(core.Setp(cmp="eq", type=u64, p=in_time, a=t0, b=0)),
            ins(core.Mov(type=u64, d=t0, src=t), in_time),
            ins(core.Sub(type=u64, d=t, a=t, b=t0)),
            ins(core.Setp(cmp="lt", type=u64, p=in_time, a=t, b=timeout_ns(k))),
            ins(core.Bra(target=s.op.target, uni=s.op.uni), in_time),
            ins(core.St(volatile=True, space="global", type=u32, addr=Addr(record, CHECK_WORD), value=number)),
            ins(core.Membar(level="sys")),
            ins(core.Trap())]
    if skip is not None:
        out.append(LabelStmt(skip, loc))
    return out


def check_descriptions(k) -> list:
    """(loc, kind, expected, what) of each device check in number order, for the trap message: kind 'coord'
    (expected: the multiple of elements, what: the dtype), 'tx' (expected: the bytes, what: 'barrier at
    load lines') or 'loop' (a hand-written loop; expected: the timeout in ns, what: the label it goes back to)."""
    out = []
    for ins, checks in op_checks(k).items():
        for c in checks:
            if c[1] == "coord":
                out.append((ins.loc, "coord", c[3], f"{c[5]}, {c[4]} bytes per element"))
            else:
                out.append((ins.loc, "tx", c[3], f"mbarrier {c[4]!r}, the TMA load(s) at {c[5]}"))
    out += [(s.loc, "loop", timeout_ns(k), s.op.target.name) for s in loop_sites(k)]
    return out


def checks_before(s, k, fresh) -> list:
    """The statements a debug kernel runs before instruction `s`: each check traps, recording its number and
    the value it found, when the value is wrong. A guarded instruction's checks run only where its guard holds."""
    checks = op_checks(k).get(s)
    if not checks:
        return []
    scratch, bad = k.debug_scratch
    record = record_param(k)
    loc = s.loc

    def ins(o, guard=None):
        return Instr(o, guard, loc)

    out = []
    skip = None
    if s.guard is not None:
        skip = Label(fresh("check_skip"))
        out.append(ins(core.Bra(target=skip), s.guard.reg if isinstance(s.guard, PredNot) else PredNot(s.guard)))
    for number, kind, reg, expected, *_ in checks:
        if kind == "coord":
            out.append(ins(core.And(type=u32, d=scratch, a=reg, b=expected - 1)))
            out.append(ins(core.Setp(cmp="ne", type=u32, p=bad, a=scratch, b=0)))
        else:
            out.append(ins(core.Setp(cmp="ne", type=u32, p=bad, a=reg, b=expected)))
        out += [ins(core.St(volatile=True, space="global", type=u32, addr=Addr(record, VALUE_WORD), value=reg), bad),
                ins(core.St(volatile=True, space="global", type=u32, addr=Addr(record, CHECK_WORD), value=number),
                    bad),
                ins(core.Membar(level="sys"), bad),
                ins(core.Trap(), bad)]
    if skip is not None:
        out.append(LabelStmt(skip, loc))
    return out


__all__ = ["CHECK_WORD", "DEFAULT_TIMEOUT_NS", "PARAM", "RECORD_BYTES", "STATE_WAIT", "VALUE_WORD", "bounded_branch",
           "bounded_spin", "check_descriptions", "checks_before", "extra_regs", "loop_sites", "loop_starts",
           "op_checks", "record_param", "sites", "timeout_ns"]
