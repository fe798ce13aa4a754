"""The kernel body as a flat list of steps with jumps, so that a run (verify/ring.py) can keep a thread's place
as one index and copy it when threads part ways at a branch.

    ("ins", Instr)                  an instruction (its guard is the run's business)
    ("wait", WaitLoop)              an mbarrier wait loop
    ("if", If, target)              go on where the condition holds, else jump to `target`
    ("jmp", target)
    ("init", Loop)                  the counter takes its start value
    ("test", Loop, target)          leave the loop (jump to `target`) unless counter < stop (> stop, step < 0)
    ("step", Loop)                  counter += step
    ("skip", Loop, defs)            a loop the run does not need to enter: forget the registers it writes
    ("poll", LabelStmt, defs)       a hand-written loop that only polls global memory (a spin on a flag another
                                    CTA sets, Flags.wait): taken as ending, its registers forgotten

`flatten(body, needed, keep)` returns None when the body holds other hand-written labels (bra can go anywhere).
`needed(loop)` says whether a loop's body holds something the run must see; the others become one ("skip") step.
`keep(instr)` (when given) says whether the run must execute an instruction; the others leave no step.
"""
from __future__ import annotations

from ..ir import If, Instr, LabelStmt, Loop, WaitLoop
from ..isa.effects import Access, Compute, Jump, Opaque, Order


class _Labels(Exception):
    """A hand-written label: the body is not structured."""


def flatten(body, needed, keep=None) -> list | None:
    code: list = []
    try:
        _emit(body, code, needed, keep)
    except _Labels:
        return None
    return code


def _emit(stmts, code, needed, keep):
    i = 0
    while i < len(stmts):
        s = stmts[i]
        i += 1
        if isinstance(s, LabelStmt):
            end = poll_end(stmts, i - 1)
            if end is None:
                raise _Labels
            code.append(("poll", s, tuple(defs(stmts[i:end + 1]))))
            i = end + 1
        elif isinstance(s, Instr):
            if keep is None or keep(s):
                code.append(("ins", s))
        elif isinstance(s, WaitLoop):
            code.append(("wait", s))
        elif isinstance(s, If):
            at = len(code)
            code.append(None)
            _emit(s.then, code, needed, keep)
            if s.orelse:
                jump = len(code)
                code.append(None)
                code[at] = ("if", s, len(code))
                _emit(s.orelse, code, needed, keep)
                code[jump] = ("jmp", len(code))
            else:
                code[at] = ("if", s, len(code))
        elif isinstance(s, Loop):
            if not needed(s):
                code.append(("skip", s, tuple(defs(s.body)) + (s.var, s.cond)))
                continue
            code.append(("init", s))
            head = len(code)
            code.append(None)
            _emit(s.body, code, needed, keep)
            code.append(("step", s))
            code.append(("jmp", head))
            code[head] = ("test", s, len(code))


def poll_end(stmts, at):
    """The index of the guarded `bra` back to the label stmts[at] that closes a poll loop, or None: between the
    two, only instructions that read global memory and compute (no other label or branch, no shared memory, no
    barrier), so nothing the run counts happens while the thread spins."""
    name = stmts[at].label.name
    for j in range(at + 1, len(stmts)):
        s = stmts[j]
        if not isinstance(s, Instr):
            return None
        effects = s.op.effects()
        jumps = [e for e in effects if isinstance(e, Jump)]
        if jumps:
            return j if s.guard is not None and jumps[0].target.name == name else None
        if not all(isinstance(e, (Compute, Opaque, Order)) or
                   (isinstance(e, Access) and e.space == "global" and not e.write) for e in effects):
            return None
    return None


def defs(stmts):
    """Every register the statements write."""
    for s in stmts:
        if isinstance(s, (Instr, WaitLoop)):
            yield from s.op.defs()
        elif isinstance(s, If):
            yield from defs(s.then)
            yield from defs(s.orelse or [])
        elif isinstance(s, Loop):
            yield s.var
            yield s.cond
            yield from defs(s.body)
