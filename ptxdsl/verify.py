"""Whole-kernel checks: the TMA/mbarrier protocol, alignment, capacity, cluster shape, target floor.

Rules are data (`RULES`: name, one-line summary, the anchor of docs/verifier.md that shows the fix).
The checks read the structured IR (ir.Kernel: params, shared buffers, a body of Instr / If / Loop /
WaitLoop) and yield `Diagnostic`s:

    check(kernel)          every finding, sorted by source line (what `ptxdsl check` prints)
    verify_kernel(kernel)  raise VerifyError for the first error (KernelBuilder.finish calls it)

Two analyses do the work. `_Facts` gives every register what is known of its value on every path:
which threads it varies across (lane / warp / CTA), the shared buffer and offset it addresses, its
low bits, its constant. `_Flow` then walks the body in program order, once per branch and twice per
loop (the second pass sees what the first iteration left behind), keeping the protocol state:
initialised barriers, the transaction bytes each barrier phase expects and receives, the parity of
the last wait, TMA loads in flight, generic writes not yet fenced, pending bulk groups, tensor maps
edited but not published. A load issued only where a loop test such as `t + STAGES < n` shows another
iteration follows is left to that iteration to retire, as the second pass retired the first's. A user
silences one rule at one place with `with k.allow("rule"):`.
"""
from __future__ import annotations

import itertools
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from .emit import resolve_target
from .errors import SourceLoc, TargetError, VerifyError
from .ir import (MAX_SHARED_PER_BLOCK, MAX_STATIC_SHARED, Addr, If, Imm, Instr, Kernel, LabelStmt, Loop, PredNot, Reg,
                 SharedAlloc, SpecialReg, TensorMapRef, WaitLoop)
from .reference import smem_layout, tx_bytes
from .ring import ring_findings
from .tensormap import SWIZZLE_SPAN
from .types import pred

DOC = "docs/verifier.md"
MAX_TX = (1 << 20) - 1
PORTABLE_CLUSTER, MAX_CLUSTER = 8, 16
TMA_SMEM_ALIGN = 128
TENSORMAP_ALIGN = 128           # a shared-memory working copy of a tensor map
MBARRIER_ALIGN = 8
MAX_ALTERNATIVES = 8            # distinct (expected, delivered) byte pairs tracked per barrier phase
MAX_GROUPS = 64                 # pending bulk groups tracked per thread


@dataclass(frozen=True)
class Rule:
    """One verifier rule: its name (what `allow()` and the diagnostics use), a one-line summary, the
    anchor of its section in docs/verifier.md, and its severity."""

    name: str
    summary: str
    doc_anchor: str
    severity: str = "error"

    @property
    def doc(self) -> str:
        return f"{DOC}#{self.doc_anchor}"


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("mbarrier-uninit", "an mbarrier is used before mbarrier.init, after mbarrier.inval, or never initialised",
         "mbarrier-uninit"),
    Rule("mbarrier-init-fence", "a TMA load completes on an mbarrier whose init was not published with "
         "fence.mbarrier_init / fence.proxy.async", "mbarrier-init-fence"),
    Rule("mbarrier-init-sync", "threads other than the initialising one use an mbarrier with no bar.sync / "
         "barrier.cluster between the init and the use", "mbarrier-init-sync", "warning"),
    Rule("expect-tx-mismatch", "the expect_tx bytes of a barrier phase differ from the bytes its TMA loads deliver",
         "expect-tx-mismatch"),
    Rule("tx-count-range", "a barrier phase expects more than 2^20-1 transaction bytes", "tx-count-range"),
    Rule("phase-reuse", "a wait names the parity of a phase that already completed while the barrier's current "
         "phase still has loads or arrivals pending: it returns at once", "phase-reuse"),
    Rule("loop-parity", "a loop waits on the same barrier every iteration without flipping the parity",
         "loop-parity"),
    Rule("wait-before-arrive", "every thread waits on a barrier phase before the arrive that completes it",
         "wait-before-arrive"),
    Rule("wait-never-armed", "thread 0 waits on a slot of a barrier ring for a phase it never arms (counted over "
         "a run of thread 0)", "wait-never-armed"),
    Rule("async-proxy-fence", "a TMA store/reduce reads shared memory written by st.shared with no "
         "fence.proxy.async in between", "async-proxy-fence"),
    Rule("tma-load-race", "ordinary loads/stores touch a buffer while a TMA load into it may be in flight",
         "tma-load-race"),
    Rule("bulk-group-pending", "a shared buffer is overwritten while a bulk group reading it is pending",
         "bulk-group-pending"),
    Rule("bulk-group-exit", "the kernel exits while bulk groups reading shared memory are pending",
         "bulk-group-exit"),
    Rule("tensormap-release", "a tensor map edited with tensormap.replace is used before tensormap.cp_fenceproxy "
         "(or fence.proxy.tensormap release) publishes it", "tensormap-release"),
    Rule("tensormap-acquire", "a kernel that edits tensor maps uses one without fence.proxy.tensormap::generic "
         "acquire on it", "tensormap-acquire"),
    Rule("sync-aligned-divergent", "a .sync/.aligned warp-collective instruction in code that is not warp-uniform",
         "sync-aligned-divergent"),
    Rule("barrier-divergent", "bar.sync (all threads) or barrier.cluster in code that not every warp reaches",
         "barrier-divergent"),
    Rule("tma-smem-align", "a TMA shared-memory box not aligned to 128 bytes or to its swizzle pattern",
         "tma-smem-align"),
    Rule("mbarrier-align", "an mbarrier not 8-byte aligned", "mbarrier-align"),
    Rule("tma-smem-bounds", "a TMA box that does not fit in its shared buffer from the given offset",
         "tma-smem-bounds"),
    Rule("tensormap-align", "a shared-memory tensor map not 128-byte aligned", "tensormap-align"),
    Rule("smem-capacity", "shared memory over what ptxas or the device allows", "smem-capacity"),
    Rule("multicast-mask", "a multicast mask with no bit set or bits outside the cluster", "multicast-mask"),
    Rule("cluster-size", "a cluster over 8 CTAs (needs the non-portable opt-in) or over 16", "cluster-size"),
    Rule("coord-align", "a TMA box whose innermost start offset is statically not a multiple of 16 bytes",
         "coord-align"),
    Rule("debug-timeout", "debug= is neither a bool nor a positive number of seconds", "debug-timeout"),
    Rule("target", "an instruction the kernel's .target/.version cannot express", "target"),
)}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: the rule's name, what is wrong, where (the user's line), error or warning."""

    rule: str
    message: str
    loc: SourceLoc | None
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        tag = "warning: " if self.severity == "warning" else ""
        return f"{where}{self.rule}: {tag}{self.message}"


def _order(d: Diagnostic):
    loc = d.loc
    return (loc is None, loc.file if loc else "", loc.line if loc else 0, loc.col if loc else 0, d.rule, d.message)


def check(kernel: Kernel) -> list[Diagnostic]:
    """Every finding of every rule on `kernel`, sorted by source location."""
    out = _findings(kernel)
    try:
        resolve_target([kernel])
    except TargetError as e:
        out.append(Diagnostic("target", e.message, e.loc))
    return sorted(out, key=_order)


_deferred = False


@contextmanager
def deferred():
    """Inside the block verify_kernel() raises nothing for the protocol rules, so that a file of kernels
    can be loaded whole and `check()` can list every finding (what `ptxdsl check` needs)."""
    global _deferred
    prev, _deferred = _deferred, True
    try:
        yield
    finally:
        _deferred = prev


def verify_kernel(k: Kernel) -> None:
    """Check the target floor (TargetError), then raise VerifyError for the first error-severity finding,
    naming the rule, the line and the page that shows the fix."""
    resolve_target([k])
    if _deferred:
        return
    for d in sorted(_findings(k), key=_order):
        if d.severity == "error":
            raise VerifyError(f"{d.message} (see {RULES[d.rule].doc})", d.loc, rule=d.rule)


def format_diagnostics(diags) -> str:
    """`file:line: rule-name: message` per finding, like a linter (paths relative to the working directory)."""
    lines = []
    for d in diags:
        tag = "warning: " if d.severity == "warning" else ""
        where = f"{_path(d.loc.file)}:{d.loc.line}: " if d.loc is not None else ""
        lines.append(f"{where}{d.rule}: {tag}{d.message}")
    return "\n".join(lines)


def _path(file: str) -> str:
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return file
    return file if rel.startswith("..") else rel


def _findings(k: Kernel) -> list[Diagnostic]:
    out = []
    for fn in (_check_capacity, _check_cluster, _check_debug):
        out.extend(fn(k))
    flow = _Flow(k).run()
    out.extend(flow)
    seen = {(d.rule, d.loc) for d in flow}
    for f in ring_findings(k):
        if not any(f.rule in getattr(s, "allow", frozenset()) for s in f.stmts):
            d = _diag(f.rule, f.message, _stmts_loc(list(f.stmts)))
            if (d.rule, d.loc) not in seen:
                out.append(d)
    return out


# --------------------------------------------------------------------------- kernel-level rules

def _diag(rule: str, message: str, loc, severity: str | None = None) -> Diagnostic:
    return Diagnostic(rule, message, loc, severity or RULES[rule].severity)


def _check_capacity(k: Kernel):
    static = k.static_shared_bytes
    if static > MAX_STATIC_SHARED:
        big = max((a for a in k.shared if not a.dynamic), key=lambda a: a.nbytes)
        yield _diag("smem-capacity", f"kernel {k.name!r} declares {static} bytes of static shared memory, over the "
                    f"{MAX_STATIC_SHARED} ptxas allows; declare large buffers with dynamic=True", big.loc)
    total = static + k.dynamic_shared_bytes
    if total > MAX_SHARED_PER_BLOCK:
        yield _diag("smem-capacity", f"kernel {k.name!r} needs {total} bytes of shared memory, over the "
                    f"{MAX_SHARED_PER_BLOCK}-byte per-block limit of sm_90", k.shared[-1].loc)


def _check_cluster(k: Kernel):
    d = k.directives
    if "reqnctapercluster" in d:
        size, what = math.prod(d["reqnctapercluster"]), f"reqnctapercluster={tuple(d['reqnctapercluster'])}"
    elif "maxclusterrank" in d:
        size, what = d["maxclusterrank"], f"maxclusterrank={d['maxclusterrank']}"
    else:
        return
    if size > MAX_CLUSTER:
        yield _diag("cluster-size", f"{what}: {size} CTAs is over the {MAX_CLUSTER} a cluster can have", k.loc)
    elif size > PORTABLE_CLUSTER:
        yield _diag("cluster-size", f"{what}: {size} CTAs is over the portable {PORTABLE_CLUSTER}; the launch must "
                    f"opt in with Function.set_non_portable_cluster_size_allowed()", k.loc, "warning")


def _check_debug(k: Kernel):
    v = k.debug
    if isinstance(v, bool):
        return
    if not isinstance(v, (int, float)) or not 0 < v <= 3600:
        yield _diag("debug-timeout", f"debug={v!r}: expected True/False or a wait timeout in seconds "
                    f"(0 < seconds <= 3600)", k.loc)


# ------------------------------------------------------------------------- register facts

LANE, WARP, CTA = "lane", "warp", "cta"
VARYING = frozenset({LANE, WARP})
_K = 64                                 # low bits tracked by the residue analysis


@dataclass(frozen=True)
class _Val:
    """What is known of a register on every path. tags: which threads its value can differ across.
    addr: (shared buffer, byte offset or None). res: (k, r), the value is r modulo 2**k. kind: the
    exact source (tid, lane, warp, rank) or, for predicates, what an equality test selects (sel_tid,
    sel_lane, sel_warp, sel_rank, elect)."""

    tags: frozenset = frozenset()
    addr: tuple | None = None
    res: tuple = (0, 0)
    kind: str | None = None
    const: int | None = None


UNKNOWN = _Val()


def _imm_val(v: int, bits: int = 64) -> _Val:
    v = int(v)
    return _Val(res=(bits, v % (1 << bits)), const=v)


def _tz(x: int) -> int:
    return _K if x == 0 else min(_K, (x & -x).bit_length() - 1)


def _merge_res(a, b):
    k = min(a[0], b[0])
    while k and a[1] % (1 << k) != b[1] % (1 << k):
        k -= 1
    return (k, a[1] % (1 << k))


def _merge_addr(a, b):
    if a is None or b is None or a[0] is not b[0]:
        return None
    return a if a[1] == b[1] else (a[0], None)


def _merge(a: _Val | None, b: _Val | None) -> _Val | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    return _Val(a.tags | b.tags, _merge_addr(a.addr, b.addr), _merge_res(a.res, b.res),
                a.kind if a.kind == b.kind else None, a.const if a.const == b.const else None)


def _res_add(a, b, sign=1):
    k = min(a[0], b[0])
    return (k, (a[1] + sign * b[1]) % (1 << k))


def _res_mul(a, b):
    k = min(_K, a[0] + b[0], a[0] + _tz(b[1]), b[0] + _tz(a[1]))
    return (k, (a[1] * b[1]) % (1 << k))


def _res_and(a, mask: int):
    k = a[0]
    while k < _K and not (mask >> k) & 1:
        k += 1
    return (k, (a[1] & mask) % (1 << k))


_SREG_TAGS = {"%ctaid": {CTA}, "%clusterid": {CTA}, "%cluster_ctaid": {CTA}, "%smid": {CTA},
              "%cluster_ctarank": {CTA}, "%laneid": {LANE}, "%warpid": {WARP},
              "%clock": {LANE, WARP, CTA}, "%clock64": {LANE, WARP, CTA}, "%globaltimer": {LANE, WARP, CTA},
              "%globaltimer_lo": {LANE, WARP, CTA}, "%globaltimer_hi": {LANE, WARP, CTA}}
_SREG_KIND = {"%tid.x": "tid", "%laneid": "lane", "%warpid": "warp", "%cluster_ctarank": "rank"}


def _sreg_val(s: SpecialReg, k: Kernel) -> _Val:
    name = s.name
    if name.startswith("%tid."):
        ntid = k.directives.get("reqntid") or k.directives.get("maxntid")
        whole_warps = name != "%tid.x" and ntid is not None and ntid[0] % 32 == 0
        tags = {WARP} if whole_warps else {LANE, WARP}
    else:
        tags = _SREG_TAGS.get(name, _SREG_TAGS.get(name.split(".")[0], set()))
    return _Val(frozenset(tags), kind=_SREG_KIND.get(name))


def _mask(v, bits):
    return None if v is None else v % (1 << bits)


class _Facts:
    """Register facts over every definition of the kernel, iterated to a fixpoint (loops feed back)."""

    def __init__(self, k: Kernel):
        self.k = k
        self.vals: dict[Reg, _Val] = {}
        self.defs: list = []               # (stmt-ish, enclosing conditions)
        self.region_end: dict[int, int] = {}   # index of a loop's first body def -> end of its defs
        self.raw_labels = False
        self._collect(k.body, ())
        counts: dict[Reg, int] = {}
        for item, _ in self.defs:
            for r in self._dsts(item):
                counts[r] = counts.get(r, 0) + 1
        self.ndefs = counts
        self.multi = {r for r, n in counts.items() if n > 1}
        # Facts flow forward in program order; a loop's defs are iterated until they settle (merges only
        # grow, so that ends), then the walk goes on. Hand-written labels may branch anywhere: then the
        # whole kernel is iterated instead.
        if self.raw_labels:
            for _ in range(128):
                if not self._solve(0, len(self.defs), regions=False):
                    break
        else:
            self._solve(0, len(self.defs))

    def _solve(self, lo, hi, outer=None, regions=True) -> bool:
        """One forward pass over defs[lo:hi], each loop region inside it iterated to its fixpoint.
        Returns whether any fact changed."""
        changed = False
        i = lo
        while i < hi:
            end = self.region_end.get(i) if regions else None
            if end is not None and i != outer:
                for _ in range(128):
                    if not self._solve(i, end, outer=i):
                        break
                    changed = True
                i = end
            else:
                changed |= self._step(*self.defs[i])
                i += 1
        return changed

    def _step(self, item, conds) -> bool:
        changed = False
        for r, v in self._transfer(item):
            if v is None:
                continue
            if r in self.multi and conds:
                ctl = frozenset().union(*(self.get(c).tags for c in conds)) & (VARYING | {CTA})
                v = replace(v, tags=v.tags | ctl)
            old = self.vals.get(r)
            merged = _merge(old, v)
            if merged != old:
                self.vals[r] = merged
                changed = True
        return changed

    def _collect(self, stmts, conds):
        for s in stmts:
            if isinstance(s, Instr):
                self.defs.append((s.op, conds))
            elif isinstance(s, If):
                inner = conds + (s.cond,)
                self._collect(s.then, inner)
                self._collect(s.orelse or [], inner)
            elif isinstance(s, Loop):
                self.defs.append((("loop-start", s), conds))
                begin = len(self.defs)
                self.defs.append((("loop-step", s), conds))
                self._collect(s.body, conds + (s.cond,))
                self.region_end[begin] = len(self.defs)
            elif isinstance(s, WaitLoop):
                self.defs.append((s.op, conds))
            elif isinstance(s, LabelStmt):
                self.raw_labels = True

    @staticmethod
    def _dsts(item):
        if isinstance(item, tuple):
            return (item[1].var,) if item[0] == "loop-start" else (item[1].var, item[1].cond)
        return tuple(r for r in item.defs() if isinstance(r, Reg))

    def get(self, v) -> _Val:
        """The facts of an operand (register, immediate, special register, negated predicate)."""
        if isinstance(v, Reg):
            return self.vals.get(v, UNKNOWN)
        if isinstance(v, PredNot):
            return replace(self.get(v.reg), kind=None)
        if isinstance(v, Imm):
            return _imm_val(v.value, v.type.bits) if v.type.kind != "f" else UNKNOWN
        if isinstance(v, bool):
            return _imm_val(int(v))
        if isinstance(v, int):
            return _imm_val(v)
        if isinstance(v, SpecialReg):
            return _sreg_val(v, self.k)
        return UNKNOWN

    def _opnd(self, v):
        """Like get(), but None for a register with no facts yet (the fixpoint has not reached it)."""
        if isinstance(v, Reg) and v not in self.vals:
            return None
        if isinstance(v, PredNot) and v.reg not in self.vals:
            return None
        return self.get(v)

    def _transfer(self, item):
        if isinstance(item, tuple):
            kind, loop = item
            if kind == "loop-start":
                yield loop.var, self._opnd(loop.start)
                return
            cur = self._opnd(loop.var)
            step = _imm_val(loop.step, loop.var.type.bits)
            yield loop.var, None if cur is None else self._binary("add", cur, step, loop.var.type.bits)
            stop = self._opnd(loop.stop)
            yield loop.cond, None if cur is None or stop is None else _Val(cur.tags | stop.tags)
            return
        op = item
        name = type(op).__name__
        handler = getattr(self, f"_t_{name}", None)
        if handler is not None:
            yield from handler(op)
            return
        uses = [self._opnd(u) for u in op.uses()]
        tags = frozenset() if None in uses else frozenset().union(*(u.tags for u in uses)) if uses else frozenset()
        for d in op.defs():
            if isinstance(d, Reg):
                yield d, None if None in uses else _Val(tags)

    # one transfer per op class (by name, so that new op families fall back to the generic rule)

    def _t_Mov(self, op):
        src = op.src
        if isinstance(src, SharedAlloc):
            yield op.dst, _Val(addr=(src, 0))
        elif isinstance(src, SpecialReg):
            yield op.dst, _sreg_val(src, self.k)
        elif isinstance(src, (Reg, Imm, PredNot)):
            yield op.dst, self._opnd(src)
        else:
            yield op.dst, UNKNOWN

    def _t_Cvta(self, op):
        src = op.src
        if isinstance(src, SharedAlloc):
            yield op.dst, _Val(addr=(src, 0))
        elif isinstance(src, Reg):
            v = self._opnd(src)
            yield op.dst, None if v is None else replace(v, kind=None)
        else:
            yield op.dst, UNKNOWN

    def _t_Cvt(self, op):
        v = self._opnd(op.src)
        if v is None:
            yield op.dst, None
        elif op.dtype.kind == "f" or op.stype.kind == "f":
            yield op.dst, _Val(v.tags)
        else:
            bits = min(op.dtype.bits, op.stype.bits)
            yield op.dst, _Val(v.tags, res=(min(v.res[0], bits), v.res[1] % (1 << min(v.res[0], bits))),
                               kind=v.kind, const=v.const)

    def _t_Binary(self, op):
        a, b = self._opnd(op.a), self._opnd(op.b)
        if a is None or b is None:
            yield op.dst, None
            return
        bits = op.dst.type.bits if isinstance(op.dst, Reg) else 32
        if op.mode in ("hi",) or op.type.kind == "f":
            yield op.dst, _Val(a.tags | b.tags)
            return
        yield op.dst, self._binary(op.op, a, b, bits)

    def _binary(self, name, a: _Val, b: _Val, bits: int) -> _Val:
        tags = a.tags | b.tags
        kind = None
        if a.kind == "tid" and b.const is not None and (
                (name == "shr" and b.const >= 5) or (name == "div" and b.const and b.const % 32 == 0)
                or (name == "and" and b.const % 32 == 0)):
            tags, kind = frozenset({WARP}), ("warp" if name != "and" else None)
        addr = None
        if name in ("add", "sub") and a.addr is not None and b.addr is None:
            off, delta = a.addr[1], None if b.const is None else b.const if name == "add" else -b.const
            addr = (a.addr[0], None if off is None or delta is None else off + delta)
        elif name == "add" and b.addr is not None and a.addr is None:
            off = b.addr[1]
            addr = (b.addr[0], None if off is None or a.const is None else off + a.const)
        res = (0, 0)
        if name == "add":
            res = _res_add(a.res, b.res)
        elif name == "sub":
            res = _res_add(a.res, b.res, -1)
        elif name == "mul":
            res = _res_mul(a.res, b.res)
        elif name == "shl" and b.const is not None:
            res = _res_mul(a.res, _imm_val(1 << min(b.const, _K), _K).res)
        elif name == "and" and b.const is not None:
            res = _res_and(a.res, b.const % (1 << bits))
        elif name == "and" and a.const is not None:
            res = _res_and(b.res, a.const % (1 << bits))
        res = (min(res[0], bits), res[1] % (1 << min(res[0], bits)))
        const = None
        if a.const is not None and b.const is not None:
            x, y = a.const, b.const
            const = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                     "shl": lambda: x << y if 0 <= y < 64 else 0, "shr": lambda: x >> y if y >= 0 else None,
                     "and": lambda: x & y, "or": lambda: x | y, "xor": lambda: x ^ y}.get(name, lambda: None)()
            const = _mask(const, bits) if const is not None else None
        return _Val(tags, addr, res, kind, const)

    def _t_Mad(self, op):
        a, b, c = self._opnd(op.a), self._opnd(op.b), self._opnd(op.c)
        if a is None or b is None or c is None:
            yield op.dst, None
            return
        if op.mode == "hi" or op.type.kind == "f":
            yield op.dst, _Val(a.tags | b.tags | c.tags)
            return
        bits = op.dst.type.bits
        yield op.dst, self._binary("add", self._binary("mul", a, b, bits), c, bits)

    def _t_Setp(self, op):
        a, b = self._opnd(op.a), self._opnd(op.b)
        if a is None or b is None:
            yield op.dst, None
            return
        tags, kind = a.tags | b.tags, None
        for x, y, cmp in ((a, b, op.cmp), (b, a, _SWAP.get(op.cmp, op.cmp))):
            if x.kind in ("tid", "lane", "warp", "rank") and y.const is not None:
                if cmp == "eq":
                    kind = "sel_" + x.kind
                if x.kind == "tid" and ((cmp in ("lt", "ge") and y.const % 32 == 0)
                                        or (cmp in ("le", "gt") and y.const % 32 == 31)):
                    tags = frozenset({WARP}) | (tags - {LANE, WARP})
        yield op.dst, _Val(tags, kind=kind)

    def _t_Selp(self, op):
        vals = [self._opnd(v) for v in (op.a, op.b, op.cond)]
        if None in vals:
            yield op.dst, None
            return
        a, b, c = vals
        yield op.dst, _Val(a.tags | b.tags | c.tags, _merge_addr(a.addr, b.addr), _merge_res(a.res, b.res),
                           const=a.const if a.const == b.const else None)

    def _t_Ld(self, op):
        base = op.addr.base if isinstance(op.addr, Addr) else op.addr
        v = self._opnd(base) if isinstance(base, Reg) else UNKNOWN
        for d in op.dst:
            yield d, None if v is None else _Val(v.tags)

    def _t_AtomAdd(self, op):
        yield op.dst, _Val(frozenset({LANE, WARP}))

    def _t_ElectSync(self, op):
        yield op.pred_dst, _Val(frozenset({LANE}), kind="elect")
        if isinstance(op.lane_dst, Reg):
            yield op.lane_dst, UNKNOWN

    def _t_MbarrierWait(self, op):
        yield op.dst, _Val(frozenset({LANE, WARP}))

    def _t_MbarrierArrive(self, op):
        if isinstance(op.dst, Reg):
            yield op.dst, UNKNOWN


_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
_NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
_UNSIGNED_CMP = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_COUNTING = frozenset({"Binary", "Unary", "Setp"})   # the ops that can tell a loop-continuation test (_counters)
_REGISTER_OPS = frozenset({"Mov", "Binary", "Mad", "Unary", "Setp", "Selp", "Cvt", "Cvta"})


# ----------------------------------------------------------------------------- flow analysis

@dataclass(frozen=True)
class _Range:
    """Bytes [off, off+size) of a shared buffer; None: unknown (the rest of the buffer)."""

    alloc: SharedAlloc
    off: int | None
    size: int | None

    def overlaps(self, o: "_Range") -> bool:
        if self.alloc is not o.alloc:
            return False
        if self.off is None or o.off is None:
            return True
        end_a = self.off + self.size if self.size is not None else self.alloc.nbytes
        end_b = o.off + o.size if o.size is not None else o.alloc.nbytes
        return self.off < end_b and o.off < end_a


@dataclass(frozen=True)
class _Access:
    """An asynchronous access still outstanding (or a generic write not yet fenced)."""

    range: _Range | None
    stmt: object
    key: tuple | None = None
    waited: bool = False
    region: tuple = ()          # the thread-varying conditions the issuing threads passed
    later: frozenset = frozenset()  # (loop, pass, n): n more iterations of the enclosing loop follow


@dataclass(frozen=True)
class _Init:
    stmt: object
    fenced: bool
    synced: bool
    region: tuple


@dataclass(frozen=True)
class _Last:
    token: tuple
    stmt: object
    prev_loop: object = None


_ZERO = frozenset({(0, 0)})


@dataclass
class _State:
    init: dict = field(default_factory=dict)         # barrier key -> _Init
    phase: dict = field(default_factory=dict)        # barrier key -> parity of its current phase (None: unknown)
    arrived: set = field(default_factory=set)        # barrier keys with an arrive in their current phase
    inval: dict = field(default_factory=dict)        # barrier key -> the mbarrier.inval stmt
    acc: dict = field(default_factory=dict)          # barrier key -> frozenset{(expected, delivered)} | None
    src: dict = field(default_factory=dict)          # barrier key -> tuple of contributing stmts
    closed: set = field(default_factory=set)         # barrier keys waited on in this branch
    last: dict = field(default_factory=dict)         # barrier key -> _Last
    inflight: tuple = ()
    dirty: tuple = ()
    uncommitted: tuple = ()
    groups: tuple = ()
    unreleased: tuple = ()
    acquired: frozenset = frozenset()
    ver: dict = field(default_factory=dict)
    dead: bool = False

    def copy(self) -> "_State":
        return replace(self, init=dict(self.init), phase=dict(self.phase), arrived=set(self.arrived),
                       inval=dict(self.inval), acc=dict(self.acc), src=dict(self.src), closed=set(self.closed),
                       last=dict(self.last), ver=dict(self.ver))


@dataclass(frozen=True)
class _Ctx:
    region: tuple = ()              # the enclosing thread-varying conditions
    lane_div: bool = False          # some enclosing condition can differ between lanes of a warp
    warp_div: bool = False          # ... or between warps
    mult: int | None = None         # threads of the CTA that run this code, when known
    issuers: object = "all"         # CTAs of the cluster that run it: "all", 1, or None
    loops: tuple = ()
    later: frozenset = frozenset()  # (loop, pass, n) of enclosing loops with at least n iterations still to come
    mc_log: list | None = None


def _stmts_loc(stmts):
    return next((s.loc for s in stmts if getattr(s, "loc", None) is not None), None)


def _line(s) -> str:
    loc = getattr(s, "loc", None)
    return f"line {loc.line}" if loc is not None else "an earlier line"


def _lines(stmts) -> str:
    nums = sorted({s.loc.line for s in stmts if getattr(s, "loc", None) is not None})
    if not nums:
        return "earlier lines"
    return ("line " if len(nums) == 1 else "lines ") + ", ".join(map(str, nums))


def _mn(op) -> str:
    return str(getattr(op, "mnemonic", "") or "")


def _opname(op) -> str:
    return type(op).__name__


def barrier_names(k: Kernel, addrs) -> list[str]:
    """Names of the mbarriers at `addrs` as the diagnostics spell them: `bar`, `bar+8`, `full[?]` for a slot of
    an array picked at run time; the register when its buffer is not known."""
    facts = _Facts(k)
    out = []
    for addr in addrs:
        base, off = (addr.base, addr.offset) if isinstance(addr, Addr) else (addr, 0)
        if isinstance(base, SharedAlloc):
            out.append(_key_name((base, off)))
            continue
        known = facts.get(base).addr if isinstance(base, Reg) else None
        out.append(_key_name((known[0], None if known[1] is None else known[1] + off)) if known else str(base))
    return out


def _key_name(key) -> str:
    a, off = key
    return f"{a.name}" + (f"+{off}" if off else "" if off is not None else "[?]")


def _owner(region: tuple, split):
    """Which branch of a thread-varying condition holds the threads of `region` (those that issued a
    per-thread access or initialised a barrier), so that branch alone decides its state after the join."""
    if split is None:
        return None
    depth, then_key, else_key = split
    if len(region) > depth:
        return "then" if region[depth] == then_key else "else" if region[depth] == else_key else None
    return None


def _region_key(cond, kind=None):
    """How a region records the condition its threads passed (all elect_one blocks pick the same lane)."""
    if kind == "elect":
        return ("elect", None)
    return (cond.reg, True) if isinstance(cond, PredNot) else (cond, False)


class _Flow:
    """Walks the kernel body in program order and reports the protocol rules."""

    def __init__(self, k: Kernel):
        self.k = k
        self.facts = _Facts(k)
        self.found: dict = {}
        self.versions = itertools.count(1)
        self.cluster = math.prod(k.directives["reqnctapercluster"]) if "reqnctapercluster" in k.directives else None
        self.init_sites = self._init_sites()
        self.arrive_sites, self.remote_arrives = self._arrive_sites()
        self.edits_maps = any(self._is_replace(i.op) or self._is_cp_fenceproxy(i.op) for i in k.walk())
        self.passes: dict = {}      # loop -> the pass (1 or 2) over its body being walked
        self.offsets: dict = {}     # reg -> (its version, loop, the counter's version, c): reg = counter + c
        self.bounds: dict = {}      # pred -> (its version, (loop, counter version, n) it proves continue for n
                                    # more iterations when true, when false)

    def run(self) -> list[Diagnostic]:
        ntid = self.k.directives.get("reqntid")
        ctx = _Ctx(mult=math.prod(ntid) if ntid else None)
        st = self._block(self.k.body, _State(), ctx)
        if not st.dead:
            self._exit(None, st)
        return list(self.found.values())

    # ------------------------------------------------------------------ reporting

    def report(self, rule, message, *stmts, severity=None):
        allow = frozenset().union(*(getattr(s, "allow", frozenset()) for s in stmts if s is not None))
        if rule in allow:
            return
        loc = _stmts_loc([s for s in stmts if s is not None])
        d = _diag(rule, message, loc, severity)
        self.found.setdefault((rule, loc, message), d)

    # ------------------------------------------------------------------ operands

    def where(self, v):
        """(buffer, offset or None) a shared-memory operand points at, or None."""
        off = 0
        if isinstance(v, Addr):
            v, off = v.base, v.offset
        if isinstance(v, SharedAlloc):
            return (v, off)
        if isinstance(v, Reg):
            a = self.facts.get(v).addr
            if a is not None:
                return (a[0], None if a[1] is None else a[1] + off)
        return None

    def rng(self, v, size):
        w = self.where(v)
        return None if w is None else _Range(w[0], w[1], size)

    def token(self, st, v):
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
            if isinstance(s, Instr):
                self._instr(s, st, ctx)
            elif isinstance(s, If):
                st = self._if(s, st, ctx)
            elif isinstance(s, Loop):
                st = self._loop(s, st, ctx)
            elif isinstance(s, WaitLoop):
                self._wait_loop(s, st, ctx)
        return st

    def _enter(self, ctx: _Ctx, cond, kind=None, st=None) -> _Ctx:
        """The context of code that runs where `cond` holds (in state `st`, which tells whether `cond` is a
        loop-continuation test of this iteration)."""
        neg = isinstance(cond, PredNot)
        v = self.facts.get(cond.reg if neg else cond)
        sel = None if neg else v.kind
        if kind == "elect":
            sel = "elect"
        varying = bool(v.tags & VARYING) or kind == "elect"
        mult, issuers, region = ctx.mult, ctx.issuers, ctx.region
        if varying:
            region = region + (_region_key(cond, kind),)
            n = ctx.mult
            if sel == "sel_tid":
                mult = 1 if n is None or n >= 1 else 0
            elif sel in ("elect", "sel_lane"):
                mult = None if n is None else max(1, n // 32)
            elif sel == "sel_warp":
                mult = None if n is None else min(n, 32)
            else:
                mult = None
        if CTA in v.tags:
            issuers = (1 if ctx.issuers == "all" else ctx.issuers) if sel == "sel_rank" else None
        later = self._later(cond, st) if st is not None and ctx.loops else None
        return replace(ctx, region=region, mult=mult, issuers=issuers,
                       later=(ctx.later | later) if later else ctx.later,
                       lane_div=ctx.lane_div or LANE in v.tags or kind == "elect",
                       warp_div=ctx.warp_div or bool(v.tags & VARYING) or kind == "elect")

    def _if(self, s: If, st: _State, ctx: _Ctx) -> _State:
        v = self.facts.get(s.cond.reg if isinstance(s.cond, PredNot) else s.cond)
        varying = bool(v.tags & VARYING) or s.kind == "elect"
        cta = CTA in v.tags and not varying
        logs = ([], []) if cta else (ctx.mc_log, ctx.mc_log)
        then_ctx = replace(self._enter(ctx, s.cond, s.kind, st), mc_log=logs[0])
        else_cond = s.cond.reg if isinstance(s.cond, PredNot) else PredNot(s.cond)
        else_ctx = replace(self._enter(ctx, else_cond, st=st), mc_log=logs[1])
        if s.kind == "elect":
            else_ctx = replace(else_ctx, mult=None if ctx.mult is None else max(0, ctx.mult - max(1, ctx.mult // 32)))
        entry = st.copy()
        t = self._block(s.then, self._branch(entry), then_ctx)
        e = self._block(s.orelse or [], self._branch(entry), else_ctx)
        if cta:
            for key, n in logs[0]:
                self._deliver(e, key, n)
            for key, n in logs[1]:
                self._deliver(t, key, n)
            if ctx.mc_log is not None:
                ctx.mc_log.extend(logs[0] + logs[1])
        split = (len(ctx.region), _region_key(s.cond, s.kind), _region_key(else_cond)) if varying else None
        return self._join(entry, t, e, both_run=varying, split=split)

    @staticmethod
    def _branch(entry: _State) -> _State:
        b = entry.copy()
        b.closed = set()
        return b

    def _join(self, entry: _State, a: _State, b: _State, both_run: bool, split=None) -> _State:
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
        out = _State()
        for key in set(a.init) | set(b.init):
            x, y = a.init.get(key), b.init.get(key)
            owner = _owner((x or y).region, split)
            if x is None or y is None or owner is not None:
                out.init[key] = (x if owner == "then" else y if owner == "else" else None) or x or y
            else:
                out.init[key] = _Init(x.stmt, x.fenced and y.fenced, x.synced and y.synced, x.region)
        out.inval = {**a.inval, **b.inval}
        for key in set(a.phase) | set(b.phase):
            x, y = a.phase.get(key, b.phase.get(key)), b.phase.get(key, a.phase.get(key))
            out.phase[key] = x if x == y else None
        out.arrived = a.arrived | b.arrived
        closed = a.closed | b.closed
        keys = set(a.acc) | set(b.acc) | set(entry.acc)
        for key in keys:
            x, y = a.acc.get(key, _ZERO), b.acc.get(key, _ZERO)
            if both_run:
                base = entry.acc.get(key, _ZERO)
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
        out.inflight = self._join_access(entry.inflight, a, b, both_run)
        out.dirty = tuple(dict.fromkeys(a.dirty + b.dirty))
        mine_a = lambda xs: tuple(x for x in xs if _owner(x.region, split) != "else")   # noqa: E731
        mine_b = lambda xs: tuple(x for x in xs if _owner(x.region, split) != "then")   # noqa: E731
        out.uncommitted = tuple(dict.fromkeys(mine_a(a.uncommitted) + mine_b(b.uncommitted)))
        groups = [g for g in map(mine_a, a.groups) if g] + [g for g in map(mine_b, b.groups) if g]
        out.groups = tuple(dict.fromkeys(groups))[-MAX_GROUPS:]
        out.unreleased = tuple(dict.fromkeys(a.unreleased + b.unreleased))
        out.acquired = a.acquired | b.acquired
        for r in set(a.ver) | set(b.ver):
            va, vb = a.ver.get(r, 0), b.ver.get(r, 0)
            out.ver[r] = va if va == vb else next(self.versions)
        return out

    def _join_access(self, entry, a: _State, b: _State, both_run: bool):
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
                seen = both_run and any(self._may_complete(x.key, k) for k in other.closed)
                out[x.stmt] = replace(x, waited=True) if seen else x
        return tuple(out.values())

    @staticmethod
    def _alloc_closed(key, closed) -> bool:
        return (key[0], None) in closed or (key[1] is None and any(c[0] is key[0] for c in closed))

    def _loop(self, s: Loop, st: _State, ctx: _Ctx) -> _State:
        self.bump(st, (s.var,))
        bounds = self.facts.get(s.start).tags | self.facts.get(s.stop).tags
        trips = None
        if isinstance(s.start, Imm) and isinstance(s.stop, Imm):
            trips = max(0, math.ceil((int(s.stop.value) - int(s.start.value)) / s.step))
        if trips == 0:
            return st
        bctx = replace(ctx, loops=ctx.loops + ((s, trips),))
        if bounds & VARYING:
            bctx = replace(bctx, lane_div=ctx.lane_div or LANE in bounds, warp_div=True, mult=None)
        entry = st.copy()
        self.passes[s] = 1
        first = self._block(s.body, st.copy(), bctx)
        if trips == 1:
            self._carry(s, first, 1)
        if trips == 1 or first.dead:
            return first
        again = first.copy()
        again.last = {k: replace(v, prev_loop=s) for k, v in again.last.items()}
        self.bump(again, (s.var, s.cond))
        self.passes[s] = 2
        second = self._block(s.body, again, bctx)
        self._carry(s, second, 2)
        self.bump(second, (s.var, s.cond))
        if trips is not None:
            return second
        return self._join(entry, entry.copy(), second, both_run=False)

    # ------------------------------------------------------------------ instructions

    def _instr(self, s: Instr, st: _State, ctx: _Ctx):
        op = s.op
        name = _opname(op)
        ictx = self._enter(ctx, s.guard, st=st) if s.guard is not None else ctx
        self._collective(s, op, ictx)
        if name in _REGISTER_OPS:
            pass                    # registers only: nothing of the protocol
        elif name == "MbarrierInit":
            self._init(s, op, st, ictx)
        elif name == "MbarrierInval":
            key = self._bar_key(op.addr, s)
            if key is not None:
                self._use(key, s, st, ictx, "inval")
                st.init.pop(key, None)
                st.inval[key] = s
        elif name == "MbarrierArrive":
            key = self._bar_key(op.addr, s) if op.space != "shared::cluster" else None
            if key is not None:
                self._use(key, s, st, ictx, "arrive")
                st.arrived.update(self._keys_of(st, key))
                if op.tx is not None:
                    self._expect(s, key, op.tx, st, ictx)
        elif name == "MbarrierExpectTx":
            key = self._bar_key(op.addr, s) if op.space != "shared::cluster" else None
            if key is not None:
                self._use(key, s, st, ictx, "expect")
                if op.complete:
                    self._deliver(st, key, self._times(self._imm(op.tx), ictx.mult), s)
                else:
                    self._expect(s, key, op.tx, st, ictx)
        elif name == "MbarrierWait":
            key = self._bar_key(op.addr, s)
            if key is not None:
                self._use(key, s, st, ictx, "poll")
            st.inflight = tuple(replace(x, waited=True) if key is None or x.key is None or x.key[0] is key[0] else x
                                for x in st.inflight)
        elif hasattr(op, "tmap"):
            if getattr(op, "mbar", None) is not None:
                self._tma_load(s, op, st, ictx)
            elif getattr(op, "src", None) is not None:
                self._tma_read(s, op, st, ictx)
            else:
                self._tmap_use(s, op.tmap, st)
                self._coords(s, op)
        elif getattr(op, "mbar", None) is not None:
            self._async_load(s, op, st, ictx)
        elif _mn(op).startswith(("cp.async.bulk", "cp.reduce.async.bulk")) and getattr(op, "src", None) is not None \
                and "prefetch" not in _mn(op):
            self._bulk_read(s, self.rng(op.src, self._imm(getattr(op, "size", None))), st, ictx)
        elif name == "CpAsyncBulkCommitGroup":
            if st.uncommitted:
                st.groups = (st.groups + (st.uncommitted,))[-MAX_GROUPS:]
                st.uncommitted = ()
        elif name == "CpAsyncBulkWaitGroup":
            st.groups = st.groups[-op.n:] if op.n else ()
        elif name in ("St", "AtomAdd"):
            self._generic(s, op, st, write=True)
        elif name == "Ld":
            self._generic(s, op, st, write=False)
        elif name == "FenceProxyAsync":
            if op.space != "global":
                st.dirty = ()
                self._fence_init(st)
        elif name == "FenceMbarrierInit":
            self._fence_init(st)
        elif name == "FenceSyncRestrict":
            if op.proxy_async and op.sem == "release":
                st.dirty = ()
        elif name == "FenceProxyTensormap":
            if op.sem == "release":
                st.unreleased = ()
            else:
                st.acquired = st.acquired | {op.addr.base if isinstance(op.addr, Addr) else op.addr}
        elif name == "BarSync" or (name == "BarrierCluster" and op.kind == "wait"):
            self._sync(st)
        elif name in ("Ret", "Exit"):
            self._exit(s, st)
            if s.guard is None:
                st.dead = True
        elif name == "Trap":
            if s.guard is None:
                st.dead = True
        elif self._is_replace(op):
            st.unreleased = st.unreleased + (s,)
            self._tmap_align(s, getattr(op, "addr", None))
        elif self._is_cp_fenceproxy(op):
            st.unreleased = ()
            self._tmap_align(s, getattr(op, "src", None))
            self._tmap_align(s, getattr(op, "dst", None))
        known = self._counters(op, name, st, ctx) if name in _COUNTING and ctx.loops and s.guard is None else None
        self.bump(st, op.defs())
        if known is not None:
            table, what = known
            table[op.dst] = (st.ver[op.dst],) + what

    @staticmethod
    def _is_replace(op) -> bool:
        return _mn(op).startswith("tensormap.replace") or _opname(op) == "TensormapReplace"

    @staticmethod
    def _is_cp_fenceproxy(op) -> bool:
        return _mn(op).startswith("tensormap.cp_fenceproxy") or _opname(op) == "TensormapCpFenceproxy"

    @staticmethod
    def _imm(v):
        if isinstance(v, Imm):
            return int(v.value)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        return None

    @staticmethod
    def _times(n, mult):
        return None if n is None or mult is None else n * mult

    # ------------------------------------------------------------------ mbarrier protocol

    def _init_sites(self):
        sites = {}
        for ins in self.k.walk():
            if _opname(ins.op) == "MbarrierInit":
                w = self.where(ins.op.addr)
                if w is not None:
                    sites.setdefault(w, ins)
        return sites

    def _arrive_sites(self):
        keys, remote = set(), False
        for ins in self.k.walk():
            if _opname(ins.op) == "MbarrierArrive":
                w = self.where(ins.op.addr) if ins.op.space != "shared::cluster" else None
                if w is None:
                    remote = True
                else:
                    keys.add(w)
        return keys, remote

    def _bar_key(self, addr, s):
        w = self.where(addr)
        if w is None:
            return None
        a, off = w
        if off is not None and ((a.offset + off if a.dynamic else off) % MBARRIER_ALIGN
                                or (self.k.dynamic_align if a.dynamic else a.align) < MBARRIER_ALIGN):
            self.report("mbarrier-align", f"mbarrier {_key_name(w)} is not {MBARRIER_ALIGN}-byte aligned "
                        f"(buffer align {a.align}, offset {off})", s)
        return w

    def _init(self, s, op, st, ctx):
        key = self._bar_key(op.addr, s)
        if key is None:
            return
        st.init[key] = _Init(s, False, False, ctx.region)
        st.phase[key] = 0
        st.arrived.discard(key)
        st.inval.pop(key, None)
        st.acc[key] = _ZERO
        st.src[key] = ()
        st.last.pop(key, None)

    def _lookup_init(self, st, key):
        a, off = key
        if key in st.init:
            return st.init[key]
        if (a, None) in st.init:
            return st.init[(a, None)]
        if off is None:
            return next((v for k, v in st.init.items() if k[0] is a), None)
        return None

    def _use(self, key, s, st, ctx, what):
        info = self._lookup_init(st, key)
        name = _key_name(key)
        if info is None:
            if key in st.inval:
                self.report("mbarrier-uninit", f"mbarrier {name} is used after its mbarrier.inval at "
                            f"{_line(st.inval[key])} and before a new mbarrier.init", s)
            elif key in self.init_sites or (key[0], None) in self.init_sites:
                site = self.init_sites.get(key) or self.init_sites[(key[0], None)]
                self.report("mbarrier-uninit", f"mbarrier {name} is used before its mbarrier.init at {_line(site)}",
                            s)
            elif what in ("wait", "tma") and key[1] is not None and not any(k[0] is key[0] for k in self.init_sites):
                self.report("mbarrier-uninit", f"mbarrier {name} is never initialised: add mbarrier.init "
                            f"(and fence.mbarrier_init) before the first use", s)
            return
        if not info.synced and info.region != ctx.region[:len(info.region)]:
            self.report("mbarrier-init-sync", f"mbarrier {name} was initialised at {_line(info.stmt)} by other "
                        f"threads; put bar.sync (or a cluster barrier) between the init and this use", s)
        if what == "tma" and not info.fenced:
            self.report("mbarrier-init-fence", f"a TMA load completes on mbarrier {name}, but its mbarrier.init at "
                        f"{_line(info.stmt)} is not followed by fence.mbarrier_init (or fence.proxy.async), so the "
                        f"async proxy may see an uninitialised barrier", s, info.stmt)

    def _fence_init(self, st):
        st.init = {k: replace(v, fenced=True) for k, v in st.init.items()}

    def _sync(self, st):
        st.init = {k: replace(v, synced=True) for k, v in st.init.items()}
        st.inflight = tuple(x for x in st.inflight if not x.waited)

    def _keys_of(self, st, key):
        """The barrier keys an access to `key` may touch (all of a buffer for an unknown offset)."""
        if key[1] is not None:
            return [key]
        return [k for k in set(st.acc) | set(st.init) | {key} if k[0] is key[0]]

    def _expect(self, s, key, tx, st, ctx):
        n = self._times(self._imm(tx), ctx.mult)
        for k in self._keys_of(st, key):
            acc = st.acc.get(k, _ZERO)
            if key[1] is None or acc is None or n is None:
                st.acc[k] = None
                continue
            st.acc[k] = frozenset((e + n, d) for e, d in acc)
            st.src[k] = st.src.get(k, ()) + (s,)
            if any(e + n > MAX_TX for e, _ in acc):
                self.report("tx-count-range", f"mbarrier {_key_name(k)} expects {max(e for e, _ in acc) + n} "
                            f"transaction bytes in one phase, over the {MAX_TX} an mbarrier can count", s)

    def _deliver(self, st, key, n, s=None):
        for k in self._keys_of(st, key):
            acc = st.acc.get(k, _ZERO)
            if key[1] is None or acc is None or n is None:
                st.acc[k] = None
                continue
            st.acc[k] = frozenset((e, d + n) for e, d in acc)
            if s is not None:
                st.src[k] = st.src.get(k, ()) + (s,)

    def _wait_loop(self, w: WaitLoop, st, ctx):
        op = w.op
        key = self._bar_key(op.addr, w)
        if key is None:
            st.inflight = tuple(x for x in st.inflight if x.key is not None)
            st.acc = {k: None for k in st.acc}
            return
        self._use(key, w, st, ctx, "wait")
        par = self._imm(op.parity)
        cur = st.phase.get(key) if key[1] is not None else None
        prev = st.last.get(key)
        if op.parity is not None:
            st.last[key] = _Last(self.token(st, op.parity), w)
        if isinstance(op.parity, Reg) and prev is not None and prev.token == st.last[key].token:
            self._same_parity(w, key, prev, ctx, op.parity.name)
        if par is not None and cur is not None and par != cur:
            if not self._pending(st, key):
                return
            self._same_parity(w, key, prev, ctx, par)
            par = cur           # reported once; go on as if it waited for the current phase
        elif not ctx.region and key[1] is not None and key not in st.arrived and key in self.arrive_sites \
                and not self.remote_arrives:
            self.report("wait-before-arrive", f"every thread waits here on mbarrier {_key_name(key)} for a phase "
                        f"nothing has arrived on yet; the arrive comes later in program order, so the thread that "
                        f"would make it is itself stuck in this wait (deadlock)", w)
        for k in self._keys_of(st, key):
            self._close(w, k, st, exact=key[1] is not None)
            st.phase[k] = (par ^ 1) if par is not None and key[1] is not None else None
            st.arrived.discard(k)
        st.closed.add(key)
        st.inflight = tuple(x for x in st.inflight if not self._may_complete(x.key, key))

    @staticmethod
    def _may_complete(load_key, wait_key) -> bool:
        """Whether a wait on wait_key may be the one a load on load_key completes on."""
        if load_key is None or load_key == wait_key:
            return True
        return load_key[0] is wait_key[0] and None in (load_key[1], wait_key[1])

    def _pending(self, st, key) -> bool:
        """Whether the barrier's current phase has expected or delivered bytes, arrivals or loads in flight."""
        acc = st.acc.get(key, _ZERO)
        return (acc is not None and any(p != (0, 0) for p in acc)) or key in st.arrived \
            or any(x.key == key for x in st.inflight)

    def _same_parity(self, w, key, prev, ctx, shown):
        loops = dict(ctx.loops)
        name = _key_name(key)
        if prev is not None and prev.prev_loop is not None and prev.prev_loop in loops:
            trips = loops[prev.prev_loop]
            if key[1] is None and (trips is None or trips <= key[0].nbytes // 8):
                return
            self.report("loop-parity", f"every iteration of the loop waits on mbarrier {name} with parity {shown}: "
                        f"from the second iteration on the wait returns at once while the phase is still pending "
                        f"(flip the parity each time the barrier's phase completes)", w)
        elif key[1] is not None:
            after = f"like the wait at {_line(prev.stmt)}" if prev is not None else "on a freshly initialised barrier"
            self.report("phase-reuse", f"this wait on mbarrier {name} names parity {shown} {after}: that phase has "
                        f"already completed, so the wait returns at once while the current phase (its loads and "
                        f"arrivals) is still pending; wait on the other parity", w,
                        *(() if prev is None else (prev.stmt,)))

    def _close(self, w, key, st, exact):
        acc = st.acc.get(key, _ZERO)
        srcs = st.src.get(key, ())
        st.acc[key] = _ZERO if exact else None
        st.src[key] = ()
        if acc is None or not exact:
            return
        bad = sorted((e, d) for e, d in acc if e != d)
        if not bad:
            return
        e, d = bad[0]
        expects = [s for s in srcs if _opname(getattr(s, "op", None)) in ("MbarrierArrive", "MbarrierExpectTx")]
        loads = [s for s in srcs if s not in expects]
        path = " on one path" if len(acc) > 1 else ""
        name = _key_name(key)
        if e == 0:
            msg = (f"the TMA load(s) at {_lines(loads)} deliver {d} bytes to mbarrier {name}, but no expect_tx "
                   f"precedes the wait at {_line(w)}{path}: the phase can complete before the data lands")
        elif d == 0:
            msg = (f"mbarrier {name} expects {e} transaction bytes{path}, but no TMA load completes on it before "
                   f"the wait at {_line(w)}: the wait never returns")
        else:
            msg = (f"mbarrier {name} expects {e} transaction bytes{path}, but the TMA load(s) at {_lines(loads)} "
                   f"deliver {d} before the wait at {_line(w)}: "
                   + ("the wait never returns" if e > d else "the tx-count underflows"))
        self.report("expect-tx-mismatch", msg, *(expects or loads), w, *srcs)

    # ------------------------------------------------------------------ loop continuation

    def _counters(self, op, name, st, ctx):
        """What `op` will tell of the enclosing loops' counters, read from its operands before it runs:
        (self.offsets, (loop, counter version, c)) for `d = counter + c`; (self.bounds, (loops proven when
        true, when false)) for a setp that proves another iteration follows (`t + STAGES < n`), and for the
        and/or/not of such predicates."""
        if op.type is pred:
            a = self._proven(op.a, st) or (frozenset(), frozenset())
            if op.op == "not":
                when = a[::-1]
            else:
                b = self._proven(op.b, st) or (frozenset(), frozenset())
                when = {"and": (a[0] | b[0], frozenset()), "or": (frozenset(), a[1] | b[1])}.get(op.op, (None, None))
            return (self.bounds, when) if when[0] or when[1] else None
        if op.type.kind == "f" or name == "Unary":
            return None
        if name == "Binary":
            if op.op not in ("add", "sub"):
                return None
            for x, y in ((op.a, op.b), (op.b, op.a))[:2 if op.op == "add" else 1]:
                for loop, _ in ctx.loops:
                    off = self._counter(x, loop, st)
                    c = None if off is None else self._const(y)
                    if c is not None:
                        return self.offsets, (loop, st.ver.get(loop.var, 0), off + (c if op.op == "add" else -c))
            return None
        cmp = _UNSIGNED_CMP.get(op.cmp, op.cmp)
        if cmp not in _NEGATE or not any(self._counter(v, loop, st) is not None
                                         for v in (op.a, op.b) for loop, _ in ctx.loops):
            return None
        when = tuple(frozenset((loop, st.ver.get(loop.var, 0), n) for loop, _ in ctx.loops
                               for n in (self._continues(c, op.a, op.b, loop, st),) if n) for c in (cmp, _NEGATE[cmp]))
        return (self.bounds, when) if when[0] or when[1] else None

    def _proven(self, v, st):
        """(when true, when false): the (loop, counter version) a predicate set in this state proves continue."""
        p = v.reg if isinstance(v, PredNot) else v
        rec = self.bounds.get(p) if isinstance(p, Reg) else None
        if rec is None or rec[0] != st.ver.get(p, 0):
            return None
        return (rec[2], rec[1]) if isinstance(v, PredNot) else rec[1:]

    def _const(self, v):
        return int(v.value) if isinstance(v, Imm) else self.facts.get(v).const

    def _counter(self, v, loop, st):
        """c when `v` holds this iteration's counter of `loop` plus the constant c (None otherwise)."""
        if v is loop.var:
            return 0 if self.facts.ndefs.get(v) == 2 else None     # written by the loop alone
        rec = self.offsets.get(v)
        if rec is not None and rec[1] is loop and rec[0] == st.ver.get(v, 0) and rec[2] == st.ver.get(loop.var, 0):
            return rec[3]
        return None

    def _stop_offset(self, v, loop):
        """c when `v` is the stop bound of `loop` plus the constant c (None otherwise)."""
        k, stop = self._const(v), self._const(loop.stop)
        if k is not None and stop is not None:
            return k - stop
        if v is loop.stop and isinstance(v, Reg) and self.facts.ndefs.get(v, 0) <= 1:
            return 0
        return None

    def _continues(self, cmp, a, b, loop, st) -> int:
        """How many more iterations of `loop` `a cmp b` holding proves to follow this one (0: none)."""
        if cmp in ("gt", "ge"):
            a, b, cmp = b, a, _SWAP[cmp]
        if cmp not in ("lt", "le"):
            return 0
        slack = int(cmp == "le")                            # a < b + slack
        if loop.step > 0:           # counter + ca < stop + cb + slack; iteration j follows if counter + j*step < stop
            ca, cb = self._counter(a, loop, st), self._stop_offset(b, loop)
            return 0 if ca is None or cb is None else max(0, (ca - cb - slack) // loop.step)
        ca, cb = self._counter(b, loop, st), self._stop_offset(a, loop)
        return 0 if ca is None or cb is None else max(0, (cb - ca - slack) // -loop.step)

    def _later(self, cond, st) -> frozenset:
        """The (loop, pass, n) of the enclosing loops with at least n more iterations where `cond` holds: a
        predicate set in this iteration (the counter's version is the same) by a continuation test such as
        `t + STAGES < n`."""
        proven = self._proven(cond, st)
        if proven is None:
            return frozenset()
        return frozenset((loop, self.passes[loop], n) for loop, ver, n in proven[0] if st.ver.get(loop.var, 0) == ver)

    @staticmethod
    def _ahead(later, s, p) -> int:
        """How many more iterations of loop `s` (in pass p) `later` proves to follow (0: none)."""
        return max((n for loop, q, n in later if loop is s and q == p), default=0)

    @staticmethod
    def _ring(x) -> int:
        """The iterations after its issue in which a load is waited on: the barrier array's length for a load
        on a slot computed at run time (a ring advances one slot per iteration), else 1."""
        return max(1, x.key[0].nbytes // 8) if x.key is not None and x.key[1] is None else 1

    def _carry(self, s, st, last):
        """Loads still in flight after the last pass (`last`) of loop `s` that were issued only where more
        iterations follow (`if t + STAGES < n`: no drain loop needed). With one pass they never run; after
        the second, the iteration that follows retires each as the second pass retired the same load issued
        by the first (gone from the loads in flight, or waited), when at least as many iterations follow as
        the load's ring has slots: in a 3-slot ring, `t + 1 < n` leaves the last two refills unwaited."""
        if not any(self._ahead(x.later, s, last) for x in st.inflight):
            return
        before = {x.stmt: x for x in st.inflight if self._ahead(x.later, s, 1)} if last == 2 else {}
        out = []
        for x in st.inflight:
            ahead = self._ahead(x.later, s, last)
            if ahead and (last == 1 or ahead >= self._ring(x)):
                prev = before.get(x.stmt)
                if prev is None:
                    continue
                x = replace(x, waited=x.waited or prev.waited)
            out.append(x)
        st.inflight = tuple(out)

    # ------------------------------------------------------------------ TMA

    def _spec(self, tmap):
        p = tmap.param if isinstance(tmap, TensorMapRef) else None
        return getattr(p, "tmap", None) if p is not None else None

    def _coords(self, s, op):
        spec = self._spec(op.tmap)
        if spec is None or getattr(op, "mode", "tile") != "tile" or not op.coords or spec.kind != "tiled":
            return
        e = spec.elem_bytes
        if e >= 16:
            return
        need = 16 // e
        j = need.bit_length() - 1
        k, r = self.facts.get(op.coords[0]).res
        if k >= j and r % need:
            self.report("coord-align", f"the innermost coordinate is {r % need} (mod {need}) elements: the box "
                        f"starts {(r % need) * e} bytes past a 16-byte boundary of the {spec.dtype} tensor, which "
                        f"TMA rejects (illegal instruction); use a multiple of {need}", s)

    def _smem_align(self, s, v, spec, what):
        swz = getattr(spec, "swizzle", "none") if spec is not None else "none"
        span = SWIZZLE_SPAN.get(swz, 0)
        need = max(TMA_SMEM_ALIGN, span * 8)
        w = self.where(v)
        if w is None or w[1] is None:
            return
        a, off = w
        align = self.k.dynamic_align if a.dynamic else a.align
        addr = a.offset + off if a.dynamic else off
        if align < need or addr % need:
            why = f"its {swz} swizzle pattern repeats every {need} bytes" if span else "TMA boxes need 128 bytes"
            self.report("tma-smem-align", f"{what} {_key_name(w)} is only {math.gcd(align, addr) if addr else align}-"
                        f"byte aligned, but {why}; declare the buffer with align={need}", s)

    def _smem_bytes(self, spec):
        if spec is None:
            return None
        try:
            return int(smem_layout(spec)[0])
        except (ValueError, KeyError, TypeError):
            return None

    def _tx_bytes(self, spec):
        if spec is None:
            return None
        try:
            return int(tx_bytes(spec))
        except (ValueError, KeyError, TypeError):
            return None

    def _tma_load(self, s, op, st, ctx):
        spec = self._spec(op.tmap)
        self._tmap_use(s, op.tmap, st)
        self._coords(s, op)
        self._smem_align(s, op.dst, spec, "the TMA destination")
        dst = self._box_range(s, op.dst, spec, "destination")
        self._complete_on_barrier(s, op, st, ctx, dst, self._tx_bytes(spec), log_multicast=True)

    def _complete_on_barrier(self, s, op, st, ctx, dst, size, log_multicast=False):
        """An async write of `dst` whose `size` bytes complete on op.mbar (multicast counted)."""
        if dst is not None:
            self._overwrite(s, dst, st)
        key = self._bar_key(op.mbar, s)
        st.inflight = st.inflight + (_Access(dst, s, key, later=ctx.later),)
        if key is None:
            st.acc = {k: None for k in st.acc}
            return
        self._use(key, s, st, ctx, "tma")
        n = self._times(size, ctx.mult)
        mc = getattr(op, "multicast", None)
        if mc is not None:
            n = self._multicast(s, mc, n, ctx)
            if log_multicast and ctx.mc_log is not None and n is not None:
                ctx.mc_log.append((key, n))
        self._deliver(st, key, n, s)

    def _multicast(self, s, mask, n, ctx):
        """Bytes each CTA's barrier receives from a multicast load (None when that is not static)."""
        m = self.facts.get(mask).const
        if m is None:
            return None
        m &= 0xFFFF
        if m == 0:
            self.report("multicast-mask", "the multicast mask is 0: the load writes no CTA and its barrier never "
                        "completes", s)
            return None
        if self.cluster is None:
            return None
        if m >> self.cluster:
            self.report("multicast-mask", f"multicast mask {m:#x} names CTA ranks up to {m.bit_length() - 1}, but "
                        f"the cluster has {self.cluster} CTAs (reqnctapercluster)", s)
            return None
        if m != (1 << self.cluster) - 1 or n is None:
            return None
        issuers = self.cluster if ctx.issuers == "all" else ctx.issuers
        return None if issuers is None else n * issuers

    def _async_load(self, s, op, st, ctx):
        """A non-tensor copy that completes on an mbarrier (cp.async.bulk, cp.reduce.async.bulk, st.async,
        red.async): it writes its destination and delivers its bytes to the barrier."""
        size = self._imm(getattr(op, "size", None))
        if size is None and getattr(op, "size", None) is None and hasattr(op, "type") and hasattr(op, "src"):
            size = op.type.nbytes * (len(op.src) if isinstance(op.src, tuple) else 1)
        dst = self.rng(op.dst, size) if getattr(op, "dst", None) is not None else None
        self._complete_on_barrier(s, op, st, ctx, dst, size)

    def _tma_read(self, s, op, st, ctx):
        spec = self._spec(op.tmap)
        self._tmap_use(s, op.tmap, st)
        self._coords(s, op)
        self._smem_align(s, op.src, spec, "the TMA source")
        self._bulk_read(s, self._box_range(s, op.src, spec, "source"), st, ctx)

    def _box_range(self, s, v, spec, what):
        """The bytes a TMA box occupies in shared memory at `v`; reports a box that overruns its buffer."""
        size = self._smem_bytes(spec)
        r = self.rng(v, size)
        if r is not None and r.off is not None and size is not None and r.off + size > r.alloc.nbytes:
            self.report("tma-smem-bounds", f"the TMA {what} box takes {size} bytes of shared memory but "
                        f"{r.alloc.name} has {r.alloc.nbytes - r.off} from offset {r.off}", s)
        return r

    def _bulk_read(self, s, src, st, ctx):
        if src is not None:
            for x in st.dirty:
                if x.range is not None and x.range.overlaps(src):
                    self.report("async-proxy-fence", f"this bulk copy reads {_key_name((src.alloc, src.off))}, which "
                                f"st.shared wrote at {_line(x.stmt)} with no fence.proxy.async.shared::cta in between: "
                                f"the async proxy may read stale data", s, x.stmt)
                    break
            for x in st.inflight:
                if x.range is not None and x.range.overlaps(src):
                    self.report("tma-load-race", f"this bulk copy reads {_key_name((src.alloc, src.off))} while the "
                                f"TMA load at {_line(x.stmt)} into it may still be in flight; wait on its barrier "
                                f"first", s, x.stmt)
                    break
        st.uncommitted = st.uncommitted + (_Access(src, s, region=ctx.region),)

    def _overwrite(self, s, rng, st):
        for x in st.uncommitted + tuple(itertools.chain.from_iterable(st.groups)):
            if x.range is not None and x.range.overlaps(rng):
                self.report("bulk-group-pending", f"this writes {_key_name((rng.alloc, rng.off))} while the bulk copy "
                            f"at {_line(x.stmt)} may still be reading it; cp.async.bulk.commit_group and "
                            f"cp.async.bulk.wait_group.read first", s, x.stmt)
                return

    def _generic(self, s, op, st, write):
        if op.space not in ("shared", "shared::cta", ""):
            return
        name = _opname(op)
        n = len(op.src) if name == "St" else len(op.dst) if name == "Ld" else 1
        rng = self.rng(op.addr, op.type.nbytes * n)
        if rng is None:
            return
        for x in st.inflight:
            if x.range is not None and x.range.overlaps(rng):
                verb = "writes" if write else "reads"
                self.report("tma-load-race", f"this {verb} {_key_name((rng.alloc, rng.off))} while the TMA load at "
                            f"{_line(x.stmt)} into it may still be in flight: wait on its mbarrier first", s, x.stmt)
                break
        if write:
            self._overwrite(s, rng, st)
            st.dirty = st.dirty + (_Access(rng, s),)

    def _exit(self, s, st):
        loads = [x for x in st.inflight if not x.waited]
        if loads:
            self.report("tma-load-race", f"the kernel exits {f'at {_line(s)}' if s is not None else 'at its end'} "
                        f"while the TMA load at {_line(loads[0].stmt)} may still be writing its shared memory; wait "
                        f"on its mbarrier first", s if s is not None else loads[0].stmt, loads[0].stmt)
        pending = st.uncommitted + tuple(itertools.chain.from_iterable(st.groups))
        if not pending:
            return
        first = pending[0]
        how = "is not committed" if first in st.uncommitted else "is not waited for"
        where = f"at {_line(s)}" if s is not None else "at its end"
        self.report("bulk-group-exit", f"the kernel exits {where} while the bulk copy at {_line(first.stmt)} may still "
                    f"read shared memory (it {how}); end with cp.async.bulk.commit_group and "
                    f"cp.async.bulk.wait_group.read 0", s if s is not None else first.stmt, first.stmt)

    # ------------------------------------------------------------------ tensor maps

    def _tmap_use(self, s, tmap, st):
        if not isinstance(tmap, TensorMapRef) or tmap.param is not None:
            return
        if st.unreleased:
            self.report("tensormap-release", f"this uses a tensor map while the tensormap.replace at "
                        f"{_line(st.unreleased[0])} is not published: copy it out with tensormap.cp_fenceproxy "
                        f"(release) first", s, st.unreleased[0])
        elif self.edits_maps and tmap.addr not in st.acquired:
            self.report("tensormap-acquire", f"this uses the tensor map at {tmap.addr.name}, which this kernel "
                        f"edits, without fence.proxy.tensormap::generic.acquire [{tmap.addr.name}], 128 before it", s)

    def _tmap_align(self, s, v):
        w = self.where(v) if v is not None else None
        if w is None or w[1] is None:
            return
        a, off = w
        align = self.k.dynamic_align if a.dynamic else a.align
        addr = a.offset + off if a.dynamic else off
        if align < TENSORMAP_ALIGN or addr % TENSORMAP_ALIGN:
            self.report("tensormap-align", f"the tensor map at {_key_name(w)} is not {TENSORMAP_ALIGN}-byte aligned "
                        f"(buffer align {a.align}, offset {off}); keep shared copies of tensor maps 128-byte "
                        f"aligned", s)

    # ------------------------------------------------------------------ divergence

    def _collective(self, s, op, ctx):
        if not (ctx.lane_div or ctx.warp_div):
            return
        what = op.what
        parts = what.split(".")
        name = _opname(op)
        if name == "ElectSync" and self.facts.get(op.mask).const not in (None, 0xFFFFFFFF):
            return
        if ("aligned" in parts or "sync" in parts) and ctx.lane_div:
            self.report("sync-aligned-divergent", f"{what} is a warp-collective (.sync/.aligned) instruction, but "
                        f"here only some lanes of a warp run it (it is under a condition on %tid/%laneid/elect); "
                        f"all 32 lanes must execute it together", s)
            return
        whole_cta = (name == "BarSync" and op.count is None) or name == "BarrierCluster"
        if whole_cta and ctx.warp_div:
            self.report("barrier-divergent", f"{what} waits for every thread of the "
                        f"{'CTA' if name == 'BarSync' else 'cluster'}, but here only some warps run it: it deadlocks",
                        s)
