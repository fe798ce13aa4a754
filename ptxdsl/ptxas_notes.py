"""ptxas's second opinion on a wgmma pipeline.

ptxas does not refuse a warpgroup-MMA pipeline it cannot overlap: it serialises the mma_async of the function and
says so in an info line, "(C75xx) Potential Performance Loss: wgmma.mma_async instructions are serialized due to
...", or repairs a missing step and says that it did ("(C7517) wgmma.wait_group is injected", "(C7519)
warpgroup.arrive is injected"). The kernel then runs, slower. `notes(info_log, ptx)` turns each such line of an
nvJitLink or driver-JIT log into a PtxasNote: the code, the kernel, the builder line it comes from and what to
change. ptxas often names no line ("in line 0") or the stage's fence or wait_group; the PTX of the function is then
read for the instruction the message is about (an accumulator read or written, or an A register written, between an
mma_async and the wait_group that covers it; a register written since the last wgmma.fence).

`ptxdsl check` prints the notes; a kernel made with `px.kernel(..., strict=True)` (or assembled with
`assemble(..., strict=True)`) is refused with an AssembleError (rule 'ptxas-serialized') naming the first one.

Codes measured with nvJitLink 13.5 on kernels built with the builder: C7511, C7513, C7514, C7515, C7517. ptxas
13.0 (whose driver JIT the H200 runs) prints C7513/C7514/C7515 for the same kernels too, C7517 as "warpgroup.wait is
injected", and C7519 (which nvJitLink 13.5 does not print) for a write that no wgmma.fence follows, a loop's back
edge included. C7510 (a call in the stage) is from other compilers' reports: ptxdsl kernels make no calls.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NOTE = re.compile(r"\((?P<code>C75\d\d)\)\s*(?P<text>.*)")      # "ptxas info    : (C7514) ..." in either log
_FUNCTION = re.compile(r"function '(?P<name>[^']+)'")
_LINE = re.compile(r"(?:in around line|in line|at line) (?P<line>\d+)")
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?(?:\.entry|\.func)\s+(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_$][\w$]*)")
_REG = re.compile(r"%[A-Za-z_]+\d+")
_MMA = re.compile(r"wgmma\.mma_async\S*\s+\{(?P<d>[^}]*)\}\s*,\s*(?P<a>\{[^}]*\}|[^,]+)")

# code -> (what ptxas saw, what to change). Codes whose text names something not listed here get the generic note.
ADVICE = {
    "C7510": ("the wgmma pipeline crosses a function call",
              "keep calls out of the stretch between an mma_async and the wait_group that covers it"),
    "C7511": ("the accumulators in flight need more registers than the kernel has",
              "keep fewer groups in flight (a smaller k.wgmma_wait_group(n) before the next mma_async), use a smaller "
              "N per mma_async, or give the warpgroup more registers (px.kernel(maxnreg=...), k.setmaxnreg_inc)"),
    "C7513": ("an instruction writes the A registers of an mma_async before the wait_group that covers it",
              "build the next A fragment in other registers, or wait first (k.wgmma_wait_group(0)) and then "
              "k.wgmma_fence() before the next mma_async"),
    "C7514": ("an instruction reads the accumulators of an mma_async before the wait_group that covers it",
              "read them after k.wgmma_wait_group(n) with n small enough to cover that mma_async's group"),
    "C7515": ("an instruction writes the accumulators of an mma_async before the wait_group that covers it",
              "write them after k.wgmma_wait_group(n) covers that mma_async's group, then k.wgmma_fence() before "
              "the next mma_async (a literal scale_d=0 zeroes the accumulators without writing them)"),
    "C7517": ("the accumulators of an mma_async are used before a wait_group covers it; ptxas inserted one",
              "put k.wgmma_commit_group() and k.wgmma_wait_group(n) before the first use"),
    "C7519": ("registers an mma_async uses (accumulators or A) were written with no wgmma.fence after the write; "
              "ptxas inserted one",
              "put k.wgmma_fence() between the write and the mma_async (inside the loop when the write is)"),
}
GENERIC = ("ptxas serialised the warpgroup's mma_async", "see ptxas's words above; the stage between an mma_async and "
                                                           "its covering wait_group should hold only wgmma "
                                                           "instructions and work on other registers")


@dataclass(frozen=True)
class PtxasNote:
    """One ptxas info line about the wgmma pipeline of `kernel`: `code` (C75xx), ptxas's own `text`, the PTX
    `line` it is about (the instruction found in the PTX, else ptxas's), `loc` (that line's builder line) and
    `message` (what ptxas saw and what to change)."""

    code: str
    kernel: str
    line: int | None
    loc: object
    message: str
    text: str

    @property
    def rule(self) -> str:
        return f"ptxas-{self.code}"

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else (f"PTX line {self.line}: " if self.line else "")
        return f"{where}{self.rule}: warning: {self.message}"


def notes(info_log: str, ptx=None, origins=None) -> list:
    """The wgmma pipeline notes of an nvJitLink or driver-JIT info log, for the PTX (text, or an emitted PTX whose
    origins map its lines to builder lines) that was assembled. One note per distinct (code, kernel, line)."""
    text = getattr(ptx, "text", ptx) if ptx is not None else ""
    origins = getattr(ptx, "origins", None) if origins is None else origins
    lines = text.split("\n") if text else []
    out, seen = [], set()
    for raw in info_log.splitlines():
        m = _NOTE.search(raw)
        if m is None or "wgmma" not in m["text"] and "warpgroup" not in m["text"] and "GMMA" not in m["text"]:
            continue
        code, said = m["code"], m["text"].strip()
        fn = _FUNCTION.search(said)
        kernel = fn["name"] if fn else ""
        at = _LINE.search(said)
        given = int(at["line"]) if at and int(at["line"]) > 0 else None
        found = _culprit(code, lines, kernel, given)
        line = found or given or _first_mma(lines, kernel)
        key = (code, kernel, line)
        if key in seen:
            continue
        seen.add(key)
        loc = (origins or {}).get(line) if line else None
        saw, change = ADVICE.get(code, GENERIC)
        where = ""
        if found and given and found != given:
            stage = (origins or {}).get(given)
            where = f" (ptxas points at PTX line {given}" + (f", {stage}" if stage is not None else "") + ")"
        shown = f" ({lines[line - 1].strip().rstrip(';')})" if line and 0 < line <= len(lines) else ""
        message = f"kernel {kernel!r}: {saw}{shown}{where}. Change: {change}. [ptxas: ({code}) {_short(said)}]"
        out.append(PtxasNote(code, kernel, line, loc, message, said))
    return out


def refuse(found: list, strict_kernels) -> None:
    """AssembleError (rule 'ptxas-serialized') for the first note of a kernel in `strict_kernels` (True: any)."""
    from .errors import AssembleError

    for note in found:
        if strict_kernels is True or note.kernel in strict_kernels:
            more = sum(1 for n in found if n is not note and (strict_kernels is True or n.kernel in strict_kernels))
            raise AssembleError(f"{note.rule}: {note.message}" + (f" (and {more} more)" if more else "") +
                                "; the kernel is strict=True, which refuses a serialised wgmma pipeline",
                                loc=note.loc, rule="ptxas-serialized")


def _short(text: str) -> str:
    return text.replace("Potential Performance Loss: ", "").replace("  ", " ")


# ------------------------------------------------------------------------------------- the PTX


def _body(lines: list, kernel: str) -> range:
    """The 1-based PTX line numbers of `kernel`'s body (empty when it is not found)."""
    start = None
    for n, ln in enumerate(lines, 1):
        m = _ENTRY.match(ln)
        if start is None:
            if m and m["name"] == kernel:
                start = n
        elif m or ln.startswith("}"):
            return range(start, n + (1 if ln.startswith("}") else 0))
    return range(start, len(lines) + 1) if start else range(0)


def _instruction(ln: str):
    """(opcode, defs, uses) of one PTX instruction line, or None for what is not an instruction."""
    s = ln.split("//", 1)[0].strip().rstrip(";").strip()
    if not s or s.startswith((".", "$", "{", "}")) or s.endswith(":"):
        return None
    guard = []
    if s.startswith("@"):
        g, _, s = s.partition(" ")
        guard = _REG.findall(g)
        s = s.strip()
    opcode, _, rest = s.partition(" ")
    ops = _split(rest)
    if not ops:
        return opcode, [], guard
    first = ops[0].strip()
    defs = [] if first.startswith("[") else _REG.findall(first)
    uses = guard + [r for o in ops[1:] for r in _REG.findall(o)] + (_REG.findall(first) if first.startswith("[")
                                                                      else [])
    return opcode, defs, uses


def _split(operands: str) -> list:
    """Operands split at the commas outside braces and brackets."""
    out, depth, cur = [], 0, []
    for ch in operands:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def _mmas(lines: list, body: range) -> list:
    """(line, accumulator registers, A registers) of each mma_async of the body."""
    out = []
    for n in body:
        m = _MMA.search(lines[n - 1])
        if m:
            a = m["a"].strip()
            out.append((n, set(_REG.findall(m["d"])), set(_REG.findall(a)) if a.startswith("{") else set()))
    return out


def _first_mma(lines: list, kernel: str):
    found = _mmas(lines, _body(lines, kernel))
    return found[0][0] if found else None


def _culprit(code: str, lines: list, kernel: str, given):
    """The PTX line of the instruction the note is about, read from the function's PTX; None if none is found."""
    if not lines or code not in ("C7513", "C7514", "C7515", "C7517", "C7519"):
        return None
    body = _body(lines, kernel)
    for n, acc, a_regs in _mmas(lines, body):
        if code == "C7519":
            for p in range(n - 1, body.start, -1):           # back to the last wgmma.fence
                ins = _instruction(lines[p - 1])
                if ins is None:
                    continue
                if ins[0].startswith("wgmma.fence"):
                    break
                if not ins[0].startswith("wgmma") and set(ins[1]) & (acc | a_regs):
                    return p
            continue
        for p in range(n + 1, body.stop):                    # forward to the wait_group that ends the stage
            ins = _instruction(lines[p - 1])
            if ins is None:
                continue
            opcode, defs, uses = ins
            if opcode.startswith("wgmma.wait_group"):
                break
            if opcode.startswith("wgmma"):
                continue
            hit = {"C7513": set(defs) & a_regs, "C7514": set(uses) & acc, "C7515": set(defs) & acc,
                   "C7517": (set(uses) | set(defs)) & acc}[code]
            if hit:
                return p
    return None


__all__ = ["ADVICE", "PtxasNote", "notes", "refuse"]
