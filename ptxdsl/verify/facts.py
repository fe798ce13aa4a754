"""Register facts: what is known of each register's value on every path.

For every register: which threads its value can differ across (lanes of a warp, warps, CTAs), the shared
buffer and byte offset it points into, its low bits (its value modulo 2**k), its constant, and for
%tid/%laneid/%warpid/%cluster_ctarank (and equality tests on them) which threads it selects. The facts
come from the ops' Compute, Opaque and Elect effects (constants through ptxdsl.fold), iterated to a
fixpoint over every definition of the kernel (loops feed back). A definition no effect explains takes
the union of what its inputs vary across.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, replace

from ..fold import evaluate
from ..ir import Addr, If, Imm, Instr, Kernel, LabelStmt, Loop, PredNot, Reg, SharedAlloc, SpecialReg, WaitLoop
from ..isa.effects import Compute, Elect, Opaque
from ..types import pred, scalar_type

LANE, WARP, GROUP, CTA = "lane", "warp", "group", "cta"    # differs among: the lanes of a warp, the warps of a
VARYING = frozenset({LANE, WARP, GROUP})                    # warpgroup, the warpgroups of a CTA, the CTAs
ACROSS_WARPS = frozenset({WARP, GROUP})                     # differs among the warps of the CTA
RESIDUE_BITS = 64                   # low bits tracked by the residue analysis
FIXPOINT_PASSES = 128
VARIES = {"thread": VARYING, "warp": ACROSS_WARPS, "none": frozenset()}
_CONTROL = VARYING | {CTA}


@dataclass(frozen=True)
class Val:
    """What is known of a register on every path. tags: which threads its value can differ across.
    addr: (shared buffer, byte offset or None). res: (k, r), the value is r modulo 2**k. kind: the
    exact source (tid, lane, warp, rank) or, for predicates, what an equality test selects (sel_tid,
    sel_lane, sel_warp, sel_rank, elect). const: its value when it is the same on every path."""

    tags: frozenset = frozenset()
    addr: tuple | None = None
    res: tuple = (0, 0)
    kind: str | None = None
    const: int | bool | None = None


UNKNOWN = Val()
_OPAQUE = {k: Val(v) for k, v in VARIES.items()}
_ELECTED = Val(frozenset({LANE}), kind="elect")


def imm_val(v, bits: int = 64) -> Val:
    v = int(v)
    got = _IMMS.get((v, bits))
    if got is None:
        if len(_IMMS) > 4096:
            _IMMS.clear()
        got = _IMMS[(v, bits)] = Val(res=(bits, v % (1 << bits)), const=v)
    return got


_IMMS: dict = {}                    # (value, bits) -> Val: the facts of an immediate never change


def _tz(x: int) -> int:
    return RESIDUE_BITS if x == 0 else min(RESIDUE_BITS, (x & -x).bit_length() - 1)


def _merge_res(a, b):
    k = min(a[0], b[0])
    while k and a[1] % (1 << k) != b[1] % (1 << k):
        k -= 1
    return (k, a[1] % (1 << k))


def _merge_addr(a, b):
    if a is None or b is None or a[0] is not b[0]:
        return None
    return a if a[1] == b[1] else (a[0], None)


def merge(a: Val | None, b: Val | None) -> Val | None:
    """What holds of a register that has value a on one path and b on another."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return Val(a.tags | b.tags, _merge_addr(a.addr, b.addr), _merge_res(a.res, b.res),
               a.kind if a.kind == b.kind else None, a.const if a.const == b.const else None)


def _res_add(a, b, sign=1):
    k = min(a[0], b[0])
    return (k, (a[1] + sign * b[1]) % (1 << k))


def _res_mul(a, b):
    k = min(RESIDUE_BITS, a[0] + b[0], a[0] + _tz(b[1]), b[0] + _tz(a[1]))
    return (k, (a[1] * b[1]) % (1 << k))


def _res_and(a, mask: int):
    k = a[0]
    while k < RESIDUE_BITS and not (mask >> k) & 1:
        k += 1
    return (k, (a[1] & mask) % (1 << k))


def _trunc(res, bits):
    k = min(res[0], bits)
    return (k, res[1] % (1 << k))


_SREG_TAGS = {"%ctaid": {CTA}, "%clusterid": {CTA}, "%cluster_ctaid": {CTA}, "%smid": {CTA},
              "%cluster_ctarank": {CTA}, "%laneid": {LANE}, "%warpid": {WARP, GROUP},
              "%clock": {LANE, WARP, GROUP, CTA}, "%clock64": {LANE, WARP, GROUP, CTA},
              "%globaltimer": {LANE, WARP, GROUP, CTA}, "%globaltimer_lo": {LANE, WARP, GROUP, CTA},
              "%globaltimer_hi": {LANE, WARP, GROUP, CTA}}
_SREG_KIND = {"%tid.x": "tid", "%laneid": "lane", "%warpid": "warp", "%cluster_ctarank": "rank"}
_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}


def sreg_val(s: SpecialReg, k: Kernel) -> Val:
    name = s.name
    if name.startswith("%tid."):
        ntid = k.directives.get("reqntid") or k.directives.get("maxntid")
        whole = 0 if name == "%tid.x" or ntid is None else math.gcd(ntid[0], 128)
        tags = {GROUP} if whole == 128 else {WARP, GROUP} if whole % 32 == 0 and whole else {LANE, WARP, GROUP}
    else:
        tags = _SREG_TAGS.get(name, _SREG_TAGS.get(name.split(".")[0], set()))
    return Val(frozenset(tags), kind=_SREG_KIND.get(name))


def key_name(key) -> str:
    """How diagnostics name (buffer, offset): `bar`, `bar+8`, `full[?]` for a slot picked at run time."""
    a, off = key
    return f"{a.name}" + (f"+{off}" if off else "" if off is not None else "[?]")


@dataclass(frozen=True)
class _Def:
    """One definition site: the effects that explain its registers ((register, Compute | Opaque | Elect) in
    order), the registers it writes that no effect explains and the registers it reads (those take the union
    of what its inputs vary across), and the conditions of the enclosing blocks."""

    items: tuple
    rest: tuple
    uses: tuple
    conds: tuple
    defs: tuple = ()


def _site(effects, defs, uses, conds) -> _Def:
    """A definition site from an op's effects, the registers it writes, and `uses()` (called only when some
    register it writes has no effect that explains it)."""
    items = tuple((e.dst, e) for e in effects if isinstance(e, (Compute, Opaque, Elect)) and isinstance(e.dst, Reg))
    done = {dst for dst, _ in items}
    rest = tuple(r for r in defs if r not in done)
    return _Def(items, rest, tuple(uses()) if rest else (), conds, defs)


def _loop_defs(loop: Loop, conds) -> tuple:
    """The loop's own definitions as Compute effects: var = start, then var += step and cond = var < stop."""
    t = loop.var.type
    start = _site((Compute(loop.var, "mov", (loop.start,), t),), (loop.var,), tuple, conds)
    cmp = "setp.lt" if loop.step > 0 else "setp.gt"
    step = _site((Compute(loop.var, "add", (loop.var, Imm(loop.step, t)), t),
                  Compute(loop.cond, cmp, (loop.var, loop.stop), t)), (loop.var, loop.cond), tuple, conds)
    return start, step


def facts_of(k: Kernel) -> "Facts":
    """The kernel's Facts, made once and kept on it (`k.facts`): every walk of the verifier (the checking one,
    the one that prepares the launch checks, the debug build's) reads the same; they depend on the kernel alone."""
    got = k.__dict__.get("facts")
    if not isinstance(got, Facts):
        got = k.__dict__["facts"] = Facts(k)
    return got


class Facts:
    """Register facts over every definition of the kernel, iterated to a fixpoint."""

    def __init__(self, k: Kernel):
        self.k = k
        self.vals: dict[Reg, Val] = {}
        self.sites: list[_Def] = []
        self.region_end: dict[int, int] = {}     # index of a loop's first body def -> end of its defs
        self.raw_labels = False
        self.effects: dict = {}                  # statement (Instr, WaitLoop) -> its op's effects, in program order
        self._collect(k.body, ())
        counts: dict[Reg, int] = {}
        for d in self.sites:
            for r in d.defs:
                counts[r] = counts.get(r, 0) + 1
        self.ndefs = counts
        self.multi = {r for r, n in counts.items() if n > 1}
        # Facts flow forward in program order; a loop's defs are iterated until they settle (merges only
        # grow, so that ends), then the walk goes on. Hand-written labels may branch anywhere: then the
        # whole kernel is iterated instead.
        if self.raw_labels:
            for _ in range(FIXPOINT_PASSES):
                if not self._solve(0, len(self.sites), regions=False):
                    break
        else:
            self._solve(0, len(self.sites))

    # ------------------------------------------------------------------------------ queries

    def get(self, v) -> Val:
        """The facts of an operand (register, immediate, special register, negated predicate)."""
        if isinstance(v, Reg):
            return self.vals.get(v, UNKNOWN)
        if isinstance(v, PredNot):
            x = self.get(v.reg)
            return replace(x, kind=None, const=None if x.const is None else not x.const)
        if isinstance(v, Imm):
            return imm_val(v.value, v.type.bits) if v.type.kind != "f" else UNKNOWN
        if isinstance(v, (bool, int)):
            return imm_val(int(v))
        if isinstance(v, SpecialReg):
            return sreg_val(v, self.k)
        return UNKNOWN

    def where(self, v):
        """(buffer, offset or None) a shared-memory operand points at, or None."""
        off = 0
        if isinstance(v, Addr):
            v, off = v.base, v.offset
        if isinstance(v, SharedAlloc):
            return (v, off)
        if isinstance(v, Reg):
            a = self.get(v).addr
            if a is not None:
                return (a[0], None if a[1] is None else a[1] + off)
        return None

    # ------------------------------------------------------------------------------ the fixpoint

    def _collect(self, stmts, conds):
        for s in stmts:
            if isinstance(s, (Instr, WaitLoop)):
                op = s.op
                fx = self.effects[s] = tuple(op.effects())
                self.sites.append(_site(fx, tuple(r for r in op.defs() if isinstance(r, Reg)), op.uses, conds))
            elif isinstance(s, If):
                inner = conds + (s.cond,)
                self._collect(s.then, inner)
                self._collect(s.orelse or [], inner)
            elif isinstance(s, Loop):
                start, step = _loop_defs(s, conds)
                self.sites.append(start)
                begin = len(self.sites)
                self.sites.append(step)
                self._collect(s.body, conds + (s.cond,))
                self.region_end[begin] = len(self.sites)
            elif isinstance(s, LabelStmt):
                self.raw_labels = True

    def _solve(self, lo, hi, outer=None, regions=True) -> bool:
        """One forward pass over sites[lo:hi], each loop region inside it iterated to its fixpoint.
        Returns whether any fact changed."""
        changed = False
        i = lo
        while i < hi:
            end = self.region_end.get(i) if regions else None
            if end is not None and i != outer:
                for _ in range(FIXPOINT_PASSES):
                    if not self._solve(i, end, outer=i):
                        break
                    changed = True
                i = end
            else:
                changed |= self._step(self.sites[i])
                i += 1
        return changed

    def _step(self, d: _Def) -> bool:
        changed = False
        for r, v in self._transfer(d):
            if v is None:
                continue
            if r in self.multi and d.conds:
                ctl = frozenset().union(*(self.get(c).tags for c in d.conds)) & _CONTROL
                if not ctl <= v.tags:
                    v = Val(v.tags | ctl, v.addr, v.res, v.kind, v.const)
            old = self.vals.get(r)
            merged = merge(old, v)
            if merged != old:
                self.vals[r] = merged
                changed = True
        return changed

    def _opnd(self, v):
        """Like get(), but None for a register with no facts yet (the fixpoint has not reached it)."""
        if isinstance(v, Reg) and v not in self.vals:
            return None
        if isinstance(v, PredNot) and v.reg not in self.vals:
            return None
        return self.get(v)

    def _transfer(self, d: _Def):
        for dst, e in d.items:
            if isinstance(e, Compute):
                yield dst, self._compute(e)
            elif isinstance(e, Opaque):
                yield dst, _OPAQUE[e.varies]
            else:
                yield dst, _ELECTED
        if d.rest:
            uses = [self._opnd(u) for u in d.uses]
            v = None if None in uses else Val(frozenset().union(*(u.tags for u in uses)))
            for r in d.rest:
                yield r, v

    def _const(self, v):
        """An operand's constant for fold.evaluate (None: not known)."""
        if isinstance(v, (Reg, PredNot, Imm, bool, int)):
            return self.get(v).const
        return None

    def _compute(self, e: Compute) -> Val | None:
        args = [self._opnd(a) for a in e.args]
        if None in args:
            return None
        tags = frozenset().union(*(a.tags for a in args))
        fn, t = e.fn, e.type
        bits = e.dst.type.bits
        if fn in ("mov", "cvta"):
            src = e.args[0]
            if isinstance(src, SharedAlloc):
                return Val(addr=(src, 0))
            if fn == "cvta":
                return replace(args[0], kind=None) if isinstance(src, Reg) else UNKNOWN
            return args[0]
        if t.kind == "f" or e.mode == "hi":
            return Val(tags)
        const = evaluate(e, self._const) if fn == "selp" or all(a.const is not None for a in args) else None
        if fn == "cvt":
            if scalar_type(e.mode).kind == "f":
                return Val(tags)
            a = args[0]
            return Val(tags, res=_trunc(a.res, min(bits, scalar_type(e.mode).bits)), kind=a.kind, const=const)
        if t is pred:
            return Val(tags, const=const)
        if fn.startswith("setp."):
            return self._setp(fn[5:], *args, const)
        if fn == "selp":
            a, b, _ = args
            same = a.const if a.const is not None and a.const == b.const else const
            return Val(tags, _merge_addr(a.addr, b.addr), _merge_res(a.res, b.res), const=same)
        if fn == "mad":
            product = None
            if args[0].const is not None and args[1].const is not None:
                mul = replace(e, fn="mul", args=e.args[:2], mode="wide" if e.mode == "wide" else "lo")
                product = evaluate(mul, self._const)
            return binary("add", binary("mul", args[0], args[1], bits, product), args[2], bits, const)
        if len(args) == 2:
            return binary(fn, args[0], args[1], bits, const)
        if const is not None and not isinstance(const, bool):
            return Val(tags, res=_trunc((bits, const), bits), const=const)
        return Val(tags)

    @staticmethod
    def _setp(cmp, a: Val, b: Val, const) -> Val:
        tags, kind = a.tags | b.tags, None
        for x, y, c in ((a, b, cmp), (b, a, _SWAP.get(cmp, cmp))):
            if x.kind in ("tid", "lane", "warp", "wgroup", "rank") and y.const is not None:
                if c == "eq":
                    kind = "sel_" + x.kind
                elif c == "ne" and x.kind == "wgroup":
                    kind = "nsel_wgroup"
                if x.kind == "tid" and ((c in ("lt", "ge") and y.const % 32 == 0)
                                        or (c in ("le", "gt") and y.const % 32 == 31)):
                    whole = y.const % 128 == (0 if c in ("lt", "ge") else 127)      # a warpgroup boundary
                    tags = (frozenset({GROUP}) if whole else ACROSS_WARPS) | (tags - VARYING)
        return Val(tags, kind=kind, const=const)


def binary(name: str, a: Val, b: Val, bits: int, const=None) -> Val:
    """The facts of `a name b` at `bits` bits; its constant (from fold.evaluate) is the caller's."""
    tags = a.tags | b.tags
    kind = None
    # a shift amount is an unsigned 32-bit operand: an s32 register holding -1 shifts by 2^32-1 (past the width)
    shift = b.const % (1 << 32) if name in ("shl", "shr") and b.const is not None else None
    if a.kind == "tid" and b.const is not None and (
            (name == "shr" and shift >= 5) or (name == "div" and b.const and b.const % 32 == 0)
            or (name == "and" and b.const % 32 == 0)):
        # tid / 32 picks a warp, tid / 128 a warpgroup: the same in every thread of it
        group = (shift >= 7 if name == "shr" else b.const % 128 == 0)
        tags = frozenset({GROUP}) if group else ACROSS_WARPS
        kind = None if name == "and" else "wgroup" if group else "warp"
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
    elif name == "shl" and shift is not None:
        res = _res_mul(a.res, imm_val(1 << min(shift, RESIDUE_BITS), RESIDUE_BITS).res)
    elif name == "and" and b.const is not None:
        res = _res_and(a.res, b.const % (1 << bits))
    elif name == "and" and a.const is not None:
        res = _res_and(b.res, a.const % (1 << bits))
    if const is not None and not isinstance(const, bool):
        res = (bits, const)
    return Val(tags, addr, _trunc(res, bits), kind, const)
