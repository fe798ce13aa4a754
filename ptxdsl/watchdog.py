"""Debug mode, the kernel side: a wait that spins longer than the kernel's timeout writes its site and
phase into a host-visible record and traps, so a hang becomes a KernelTrap naming the waiting line
(ptxdsl.runtime.watchdog reads the record).

The record is the kernel's hidden first parameter `__ptxdsl_debug` (a pointer to 16 bytes of mapped host
memory): word 0 the 1-based wait site, word 1 the parity waited for (STATE_WAIT for a state token)."""
from __future__ import annotations

from . import sreg
from .ir import Addr, Imm, Instr, Label, LabelStmt, Reg
from .isa import core
from .isa.mbarrier import count_value
from .types import u32, u64

PARAM = "__ptxdsl_debug"
DEFAULT_TIMEOUT_NS = 200_000_000      # a debug=True wait gives up after 0.2 s
STATE_WAIT = 0xFFFFFFFF               # what a wait on a state token records in place of a parity
RECORD_BYTES = 16


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


__all__ = ["DEFAULT_TIMEOUT_NS", "PARAM", "RECORD_BYTES", "STATE_WAIT", "bounded_spin", "record_param", "sites",
           "timeout_ns"]
