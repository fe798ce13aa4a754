"""IR kernel -> .ptxd text: one statement per builder call, so parsing the text back makes the same
builder calls in the same order and gives the same IR (registers, names, PTX).

Registers print by their PTX names without the % (r7, rd2, p1, rs3); a parameter's register by the
parameter's name. A register the builder allocated before it was first written (`k.reg`, `out=`) is
declared with `reg` at the point where its number was taken.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import fields, is_dataclass

from ..errors import DSLError
from ..ir import (
    REG_PREFIX,
    Addr,
    If,
    Imm,
    Instr,
    Kernel,
    Label,
    LabelStmt,
    Loop,
    Module,
    Param,
    PredNot,
    Reg,
    SharedAlloc,
    Sink,
    SpecialReg,
    TensorMapRef,
    WaitLoop,
)
from ..isa import bulk, cluster, control, core, fence, mbarrier, policy, tensormap
from ..isa.core import AS_BITS, bits_type, wide_type
from ..emit import directive_lines
from ..target import fmt_ptx, parse_ptx_version
from ..tensormap import DTYPES, _c_strides
from ..types import b16, b32, b64, pred, u32, u64

INDENT = "    "
DEF_FIELDS = frozenset({"dst", "pred_dst", "lane_dst"})
CLASS_TYPE = {1: pred, 16: b16, 32: b32, 64: b64}     # for numbers k.reg() took that nothing ever used
SPEC_DEFAULTS = {"swizzle": "none", "interleave": "none", "l2_promotion": "none", "oob_fill": "zero"}


def to_ptxd(obj) -> str:
    """The .ptxd text of a Kernel, a KernelBuilder or a Module (kernels separated by a blank line)."""
    if hasattr(obj, "finish"):
        obj = obj.finish()
    kernels = obj.kernels if isinstance(obj, Module) else [obj]
    return "\n".join(_Printer(k).text() for k in kernels)


class Spelling:
    """How one op prints: mnemonic, operand texts, and for ops with results the (type, space) of each
    register the builder method would allocate, and whether the method takes out=."""

    def __init__(self, mnemonic, operands=(), fresh=(), out=True):
        self.mnemonic = mnemonic
        self.operands = list(operands)
        self.fresh = list(fresh)
        self.out = out


def _q(*parts) -> str:
    return ".".join(str(p) for p in parts if p)


def _space(space, default="shared::cta"):
    return space if space != default else None


class _Printer:
    def __init__(self, k: Kernel):
        self.k = k
        self.lines: list[str] = []
        self.depth = 1
        self.names: dict = {}           # Reg -> name, for every register the text has named
        self.counter = {1: 0, 16: 0, 32: 0, 64: 0}
        self.slots: dict = {}           # (bits, index) -> Reg, every register the IR mentions
        self.symbols = {p.name for p in k.params} | {a.name for a in k.shared}
        self.allowed: frozenset = frozenset()     # verifier rules the enclosing allow blocks silence
        self._collect(k.body)
        for p in k.params:
            if p.value is not None:
                self._slot(p.value)

    # ---------------------------------------------------------------------------- registers

    def _slot(self, r: Reg):
        self.slots.setdefault((r.type.reg_bits, r.index), r)

    def _collect(self, stmts):
        for s in stmts:
            if isinstance(s, Instr):
                self._collect_value(s.op)
                self._collect_value(s.guard)
            elif isinstance(s, LabelStmt):
                self.symbols.add(s.label.name)
            elif isinstance(s, If):
                self._collect_value(s.cond)
                self._collect(s.then)
                self._collect(s.orelse or [])
            elif isinstance(s, Loop):
                self._collect_value((s.var, s.cond, s.start, s.stop))
                self._collect(s.body)
            elif isinstance(s, WaitLoop):
                self._collect_value((s.op, s.debug_regs))

    def _collect_value(self, v):
        if isinstance(v, Reg):
            self._slot(v)
        elif isinstance(v, PredNot):
            self._slot(v.reg)
        elif isinstance(v, Addr):
            self._collect_value(v.base)
        elif isinstance(v, TensorMapRef):
            self._collect_value(v.addr)
        elif isinstance(v, (tuple, list)):
            for x in v:
                self._collect_value(x)
        elif is_dataclass(v) and not isinstance(v, (SharedAlloc, Param, Imm, SpecialReg, Label)):
            for f in fields(v):
                self._collect_value(getattr(v, f.name))

    def reg_name(self, r: Reg) -> str:
        name = REG_PREFIX[r.type.reg_bits][1:] + str(r.index)
        while name in self.symbols:
            name += "_"
        return name

    def take(self, r: Reg, name: str | None = None):
        """The text names `r`; its number is the next one of its class."""
        bits = r.type.reg_bits
        if r.index != self.counter[bits] + 1:
            raise self.unprintable(f"register {r.name} is allocated out of order")
        self.counter[bits] = r.index
        self.names[r] = name or self.reg_name(r)

    def skip(self, r: Reg):
        """The builder allocates `r` without the text naming it (a loop's exit predicate, a wait's flag)."""
        self.fill_to(r)
        bits = r.type.reg_bits
        if r.index != self.counter[bits] + 1:
            raise self.unprintable(f"register {r.name} is allocated out of order")
        self.counter[bits] = r.index

    def declare(self, r: Reg):
        self.fill_to(r)
        self.take(r)
        self.line(f"reg {r.type.name} {self.names[r]}")

    def fill_to(self, r: Reg):
        """Declare the numbers of r's class taken before r that nothing has named yet."""
        bits = r.type.reg_bits
        while self.counter[bits] + 1 < r.index:
            idx = self.counter[bits] + 1
            other = self.slots.get((bits, idx)) or Reg(CLASS_TYPE[bits], idx)
            self.take(other)
            self.line(f"reg {other.type.name} {self.names[other]}")

    def known(self, r: Reg):
        if r in self.names:
            return
        if r.index <= self.counter[r.type.reg_bits]:
            raise self.unprintable(f"register {r.name} is read, but the text has no name for it (it is allocated "
                                   f"implicitly by an earlier statement)")
        self.declare(r)

    def unprintable(self, why: str) -> DSLError:
        return DSLError(f"kernel {self.k.name!r} cannot be printed as .ptxd: {why}", self.k.loc)

    # ------------------------------------------------------------------------------- values

    def v(self, x) -> str:
        if isinstance(x, Reg):
            return self.names[x]
        if isinstance(x, PredNot):
            return "!" + self.names[x.reg]
        if isinstance(x, Imm):
            return number(x.value, x)
        if isinstance(x, bool):
            return str(int(x))
        if isinstance(x, (int, float)):
            return number(x)
        if isinstance(x, (SpecialReg, SharedAlloc, Param, Label)):
            return x.name
        if isinstance(x, Sink):
            return "_"
        if isinstance(x, Addr):
            return self.addr(x)
        if isinstance(x, TensorMapRef):
            return x.param.name if x.param is not None else self.names[x.addr]
        if isinstance(x, tuple):
            return "{" + ", ".join(self.v(i) for i in x) + "}"
        raise self.unprintable(f"no .ptxd spelling for the operand {x!r}")

    def addr(self, a: Addr) -> str:
        base = self.v(a.base)
        if not a.offset:
            return f"[{base}]"
        return f"[{base}{'+' if a.offset > 0 else '-'}{abs(a.offset)}]"

    def tensor(self, tmap, coords) -> str:
        return f"[{self.v(tmap)}, {self.v(tuple(coords))}]"

    # ------------------------------------------------------------------------------- output

    def line(self, text: str):
        self.lines.append(INDENT * self.depth + text)

    def text(self) -> str:
        k = self.k
        params = [p for p in k.params if not (k.debug and p.name == "__ptxdsl_debug")]
        out = [f"kernel {k.name}(" + ", ".join(self.param_text(p) for p in params) + ")"]
        out += [INDENT + d for d in self.directive_lines()]
        start = self.prologue()
        for a in k.shared:
            self.line(shared_text(a))
        self.block(k.body[start:])
        for bits in (1, 16, 32, 64):
            top = k.reg_counts[bits]
            if self.counter[bits] < top:
                r = self.slots.get((bits, top)) or Reg(CLASS_TYPE[bits], top)
                self.declare(r)
        return "\n".join(out + ["{"] + self.lines + ["}"]) + "\n"

    def directive_lines(self):
        k = self.k
        yield from directive_lines(k)
        if k.arch:
            yield f".target {k.arch}"
        if k.ptx:
            yield f".version {fmt_ptx(parse_ptx_version(k.ptx))}"
        if k.debug is True:
            yield ".debug"
        elif k.debug:
            yield f".debug {number(float(k.debug))}"

    def param_text(self, p: Param) -> str:
        if p.kind == "tensormap":
            spec = getattr(p, "tmap", None)
            return f"tensormap {p.name}" + (f": {spec_text(spec)}" if spec is not None else "")
        if p.kind == "ptr":
            return f"ptr {p.name}"
        return f"{p.type.name} {p.name}"

    def prologue(self) -> int:
        """Match the loads the builder made for each parameter; returns where the kernel's own body starts."""
        body, pos = self.k.body, 0
        for p in self.k.params:
            want = {"scalar": (core.Ld,), "ptr": (core.Ld, core.Cvta), "tensormap": (core.Mov, core.Cvta)}[p.kind]
            got = body[pos:pos + len(want)]
            if len(got) != len(want) or not all(isinstance(s, Instr) and isinstance(s.op, t) and s.guard is None
                                                for s, t in zip(got, want)):
                raise self.unprintable(f"parameter {p.name!r} is declared after the body starts")
            for s in got:
                for r in s.op.defs():
                    self.skip(r)
            self.names[p.value] = p.name
            pos += len(want)
        return pos

    # --------------------------------------------------------------------------- statements

    def block(self, stmts):
        items, i = [], 0
        while i < len(stmts):
            s, nxt = stmts[i], stmts[i + 1] if i + 1 < len(stmts) else None
            if (isinstance(s, Instr) and isinstance(s.op, cluster.ElectSync) and s.guard is None
                    and isinstance(s.op.lane_dst, Sink) and isinstance(nxt, If) and nxt.kind == "elect"
                    and nxt.cond is s.op.pred_dst):
                items.append((s.allow, (s, nxt)))
                i += 2
                continue
            items.append((getattr(s, "allow", self.allowed), s))
            i += 1
        for rules, group in itertools.groupby(items, key=lambda item: item[0]):
            group = [g for _, g in group]
            if rules == self.allowed:
                for g in group:
                    self.stmt(g)
                continue
            if not rules >= self.allowed:
                raise self.unprintable("a statement allows fewer verifier rules than the block around it")
            outer, self.allowed = self.allowed, rules
            self.line("allow " + ", ".join(sorted(rules - outer)) + " {")
            self.depth += 1
            for g in group:
                self.stmt(g)
            self.depth -= 1
            self.line("}")
            self.allowed = outer

    def stmt(self, s):
        if isinstance(s, tuple):
            self.elect(*s)
        elif isinstance(s, Instr):
            self.instr(s)
        elif isinstance(s, LabelStmt):
            self.lines.append(INDENT * (self.depth - 1) + f"{s.label.name}:")
        elif isinstance(s, If):
            self.if_(s)
        elif isinstance(s, Loop):
            self.loop(s)
        elif isinstance(s, WaitLoop):
            self.wait(s)
        else:
            raise self.unprintable(f"no .ptxd spelling for {type(s).__name__}")

    def nested(self, head: str, body, orelse=None):
        self.line(head + " {")
        self.depth += 1
        self.block(body)
        self.depth -= 1
        if orelse is not None:
            self.line("} else {")
            self.depth += 1
            self.block(orelse)
            self.depth -= 1
        self.line("}")

    def if_(self, s: If):
        self.reads(s.cond)
        self.nested(f"if {self.v(s.cond)}", s.then, s.orelse)

    def elect(self, s: Instr, node: If):
        self.reads(s.op.mask)
        mask = s.op.mask
        head = "elect_one" if isinstance(mask, Imm) and mask.value == 0xFFFFFFFF else f"elect_one {self.v(mask)}"
        self.skip(s.op.pred_dst)
        self.nested(head, node.then, node.orelse)

    def loop(self, s: Loop):
        self.reads((s.start, s.stop))
        bounds = f"{self.v(s.start)}..{self.v(s.stop)}"
        self.fill_to(s.var)
        self.take(s.var)
        self.skip(s.cond)
        t = "" if s.var.type is u32 else f"{s.var.type.name} "
        step = "" if s.step == 1 else f" step {s.step}"
        self.nested(f"for {t}{self.names[s.var]} in {bounds}{step}", s.body)

    def wait(self, s: WaitLoop):
        op = s.op
        self.reads(_reads(op))
        quals = _q("wait", op.sem, op.scope, _space(op.space), op.kind if op.kind != "try_wait" else None)
        on = f"parity {self.v(op.parity)}" if op.parity is not None else f"state {self.v(op.state)}"
        hint = f" hint {self.v(op.hint)}" if op.hint is not None else ""
        for r in (op.dst, *s.debug_regs):
            self.skip(r)
        self.line(f"{quals} {self.addr(op.addr)} {on}{hint}")

    def reads(self, v):
        regs = []
        _regs_in(v, regs)
        for r in sorted(regs, key=lambda r: (r.type.reg_bits, r.index)):
            self.known(r)

    def instr(self, s: Instr):
        op = s.op
        spell = SPELL.get(type(op))
        if spell is None:
            raise self.unprintable(f"no .ptxd spelling for {type(op).__name__}; add one in ptxdsl/lang/printer.py")
        self.reads(_reads(op))
        if s.guard is not None:
            self.reads(s.guard)
        dsts = list(op.defs())
        if dsts:
            self.results(op, dsts, spell(self, op))
        sp = spell(self, op)
        text = sp.mnemonic + (" " + ", ".join(sp.operands) if sp.operands else "")
        if dsts:
            text = ", ".join(self.names[r] for r in dsts) + " = " + text
        guard = "" if s.guard is None else f"@{self.v(s.guard)} "
        self.line(guard + text)

    def results(self, op, dsts, sp: Spelling):
        first = dsts[0]
        if first not in self.names:
            self.fill_to(first)
        counter = dict(self.counter)
        fresh = len(sp.fresh) == len(dsts)
        for r, (t, space) in zip(dsts, sp.fresh):
            bits = r.type.reg_bits
            fresh = fresh and r not in self.names and r.index == counter[bits] + 1 and r.type is t and \
                r.space == space
            counter[bits] = r.index
        if fresh:
            for r in dsts:
                self.take(r)
            return
        if not sp.out:
            raise self.unprintable(f"{sp.mnemonic} writes registers its builder method always allocates new")
        for r in dsts:
            self.known(r)


def _reads(op) -> list:
    """Registers an op reads (every field but its destinations)."""
    out = []
    for f in fields(op):
        if f.name not in DEF_FIELDS:
            _regs_in(getattr(op, f.name), out)
    return out


def _regs_in(v, out):
    if isinstance(v, Reg):
        out.append(v)
    elif isinstance(v, PredNot):
        out.append(v.reg)
    elif isinstance(v, Addr):
        _regs_in(v.base, out)
    elif isinstance(v, TensorMapRef):
        if v.param is None:
            out.append(v.addr)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _regs_in(x, out)


def number(v, imm: Imm | None = None) -> str:
    if isinstance(v, float):
        if math.isfinite(v):
            return repr(v)
        if imm is not None and imm.type.bits in (32, 64):
            return str(imm)
        raise DSLError(f"the constant {v!r} has no .ptxd spelling outside an f32/f64 operand")
    return str(int(v))


def shared_text(a: SharedAlloc) -> str:
    dyn = " dynamic" if a.dynamic else ""
    if a.role == "mbarrier":
        n = a.nbytes // 8
        return f"mbarrier {a.name}" + (f"[{n}]" if n > 1 else "") + dyn
    if a.role != "buffer":
        raise DSLError(f"shared {a.name!r} ({a.role}): no .ptxd spelling", a.loc)
    return f"shared {a.name}: b8[{a.nbytes}] align {a.align}{dyn}"


def spec_text(s) -> str:
    """A TensorMapSpec as `dtype[shape] option value ...` (numpy order, outermost first)."""
    shape = tuple(reversed(s.dims))
    elem = DTYPES[s.dtype][1]
    parts = [f"{s.dtype}[{', '.join(map(str, shape))}]"]

    def lst(values):
        return "[" + ", ".join(map(str, reversed(tuple(values)))) + "]"

    if s.kind == "tiled":
        parts.append(f"box {lst(s.box)}")
    else:
        parts += [f"channels_per_pixel {s.channels_per_pixel}", f"pixels_per_column {s.pixels_per_column}",
                  f"lower_corner {lst(s.lower_corner)}", f"upper_corner {lst(s.upper_corner)}"]
    contiguous = tuple(reversed(_c_strides(shape, elem)[:-1]))
    if tuple(s.strides) != contiguous:
        parts.append(f"strides {lst((elem, *s.strides))}")
    if s.element_strides:
        parts.append(f"element_strides {lst(s.element_strides)}")
    for key, default in SPEC_DEFAULTS.items():
        if getattr(s, key) != default:
            parts.append(f"{key} {getattr(s, key)}")
    if s.global_address:
        parts.append(f"address {s.global_address:#x}")
    return " ".join(parts)


# ------------------------------------------------------------------------------ op spellings


def _mov(p, op):
    return Spelling(f"mov.{op.type.name}", [p.v(op.src)],
                    [(op.type, "shared::cta" if isinstance(op.src, SharedAlloc) else None)])


def _binary(p, op):
    t = op.type
    d = op.dst
    if op.op in AS_BITS and d.type.kind in "us" and bits_type(d.type) is t:
        t = d.type
    space = op.a.space if op.op in ("add", "sub") and isinstance(op.a, Reg) else None
    return Spelling(_q(op.op, op.mode, t.name), [p.v(op.a), p.v(op.b)],
                    [(wide_type(t) if op.mode == "wide" else t, space)])


def _unary(p, op):
    t = op.type
    if op.op == "not" and op.dst.type.kind in "us" and bits_type(op.dst.type) is t:
        t = op.dst.type
    return Spelling(f"{op.op}.{t.name}", [p.v(op.a)], [(t, None)])


def _mad(p, op):
    name = "fma" if op.type.kind == "f" else "mad"
    t = op.type
    return Spelling(_q(name, op.mode, t.name), [p.v(op.a), p.v(op.b), p.v(op.c)],
                    [(wide_type(t) if op.mode == "wide" else t, None)])


def _setp(p, op):
    return Spelling(f"setp.{op.cmp}.{op.type.name}", [p.v(op.a), p.v(op.b)], [(pred, None)])


def _selp(p, op):
    return Spelling(f"selp.{op.type.name}", [p.v(op.a), p.v(op.b), p.v(op.cond)], [(op.type, None)])


def _cvt(p, op):
    return Spelling(_q("cvt", op.rnd, "sat" if op.sat else "", op.dtype.name, op.stype.name), [p.v(op.src)],
                    [(op.dtype, None)])


def _cvta(p, op):
    return Spelling(_q("cvta", "to" if op.to else "", op.space), [p.v(op.src)],
                    [(u64, op.space if op.to else None)])


def _ld(p, op):
    vec = f"v{len(op.dst)}" if len(op.dst) > 1 else ""
    return Spelling(_q("ld", op.space, vec, op.type.name), [p.v(op.addr)], [(op.type, None)] * len(op.dst))


def _st(p, op):
    vec = f"v{len(op.src)}" if len(op.src) > 1 else ""
    src = op.src[0] if len(op.src) == 1 else op.src
    return Spelling(_q("st", op.space, vec, op.type.name), [p.v(op.addr), p.v(src)])


def _atom(p, op):
    return Spelling(f"atom.{op.space}.add.{op.type.name}", [p.v(op.addr), p.v(op.src)], [(op.type, None)])


def _bar_sync(p, op):
    return Spelling("bar.sync", [str(op.barrier)] + ([str(op.count)] if op.count is not None else []))


def _plain(name):
    return lambda p, op: Spelling(name)


def _arrive(p, op):
    kind = "expect_tx" if op.tx is not None else ("noComplete" if op.no_complete else "")
    tail = [p.v(op.count)] if op.count is not None else []
    tail += [p.v(op.tx)] if op.tx is not None else []
    if op.no_complete and isinstance(op.dst, Sink):
        tail.append("state=0")
    fresh = [(u64, None)] if isinstance(op.dst, Reg) else []
    return Spelling(_q(op.base, kind, op.sem, op.scope, _space(op.space)), [p.v(op.addr), *tail], fresh, out=False)


def _expect_tx(p, op):
    return Spelling(_q(op.mnemonic, op.sem, op.scope, _space(op.space)), [p.v(op.addr), p.v(op.tx)])


def _try_wait(p, op):
    on = op.parity if op.parity is not None else op.state
    tail = [p.v(op.hint)] if op.hint is not None else []
    return Spelling(_q(op.mnemonic, op.sem, op.scope, _space(op.space)), [p.v(op.addr), p.v(on), *tail],
                    [(pred, None)])


def _fence_tensormap(p, op):
    return Spelling(_q(op.mnemonic, op.sem, op.scope), [p.v(op.addr)] if op.addr is not None else [])


def _sync_restrict(p, op):
    space = "shared::cta" if op.sem == "release" else "shared::cluster"
    return Spelling(_q("fence", "proxy.async::generic" if op.proxy_async else "", op.sem,
                       f"sync_restrict::{space}", "cluster"))


def _load(p, op):
    kw = []
    if op.im2col:
        kw.append(f"im2col={p.v(op.im2col)}")
    if op.multicast is not None:
        kw.append(f"multicast={p.v(op.multicast)}")
    if op.cache_hint is not None:
        kw.append(f"cache_hint={p.v(op.cache_hint)}")
    mnem = _q("cp.async.bulk.tensor", _space(op.dst_space, "shared::cluster"), _space(op.mode, "tile"),
              f"cta_group::{op.cta_group}" if op.cta_group else "")
    return Spelling(mnem, [p.v(op.dst), p.tensor(op.tmap, op.coords), p.v(op.mbar), *kw])


def _hint(p, op):
    return [f"cache_hint={p.v(op.cache_hint)}"] if op.cache_hint is not None else []


def _store(p, op):
    return Spelling(_q("cp.async.bulk.tensor", _space(op.mode, "tile")),
                    [p.tensor(op.tmap, op.coords), p.v(op.src), *_hint(p, op)])


def _reduce(p, op):
    return Spelling(_q("cp.reduce.async.bulk.tensor", op.op, _space(op.mode, "tile")),
                    [p.tensor(op.tmap, op.coords), p.v(op.src), *_hint(p, op)])


def _prefetch(p, op):
    kw = [f"im2col={p.v(op.im2col)}"] if op.im2col else []
    return Spelling(_q("cp.async.bulk.prefetch.tensor", _space(op.mode, "tile")),
                    [p.tensor(op.tmap, op.coords), *kw, *_hint(p, op)])


def _bulk(p, op):
    kw = [f"{name}={p.v(getattr(op, name))}" for name in ("multicast", "cache_hint", "byte_mask")
          if getattr(op, name) is not None]
    mbar = [p.v(op.mbar)] if op.mbar is not None else []
    return Spelling(_q("cp.async.bulk", op.dst_space, op.src_space), [p.v(op.dst), p.v(op.src), p.v(op.size), *mbar,
                                                                      *kw])


def _reduce_bulk(p, op):
    mbar = [p.v(op.mbar)] if op.mbar is not None else []
    return Spelling(_q("cp.reduce.async.bulk", op.dst_space, op.op, "noftz" if op.noftz else "", op.type.name),
                    [p.v(op.dst), p.v(op.src), p.v(op.size), *mbar, *_hint(p, op)])


def _prefetch_bulk(p, op):
    return Spelling("cp.async.bulk.prefetch", [p.v(op.src), p.v(op.size), *_hint(p, op)])


def _st_async(p, op):
    vec = f"v{len(op.src)}" if isinstance(op.src, tuple) and len(op.src) > 1 else ""
    src = op.src[0] if isinstance(op.src, tuple) and len(op.src) == 1 else op.src
    return Spelling(_q("st.async", vec, op.type.name), [p.v(op.addr), p.v(src), p.v(op.mbar)])


def _mapa(p, op):
    t = u64 if op.dst.type.bits == 64 else u32
    return Spelling(_q("mapa", op.space), [p.v(op.addr), p.v(op.rank)], [(t, op.space or None)])


def _policy(p, op):
    name = type(op).__name__
    if name == "CreatepolicyFractional":
        frac = [p.v(op.fraction)] if op.fraction is not None else []
        return Spelling(_q(op.mnemonic, op.primary, op.secondary), frac, [(b64, None)])
    if name == "CreatepolicyRange":
        return Spelling(_q(op.mnemonic, op.space, op.primary, op.secondary),
                        [p.v(op.addr), p.v(op.primary_size), p.v(op.total_size)], [(b64, None)])
    return Spelling("createpolicy.cvt", [p.v(op.src)], [(b64, None)])


def _replace(p, op):
    ord_ = [str(op.ord)] if op.ord is not None else []
    return Spelling(_q("tensormap.replace", op.mode, op.field, op.space), [p.v(op.addr), *ord_, p.v(op.new_val)])


def _elect(p, op):
    fresh = [(pred, None)] + ([(u32, None)] if isinstance(op.lane_dst, Reg) else [])
    return Spelling("elect.sync", [p.v(op.mask)], fresh, out=False)


SPELL = {
    core.Mov: _mov,
    core.Binary: _binary,
    core.Unary: _unary,
    core.Mad: _mad,
    core.Setp: _setp,
    core.Selp: _selp,
    core.Cvt: _cvt,
    core.Cvta: _cvta,
    core.Ld: _ld,
    core.St: _st,
    core.AtomAdd: _atom,
    core.BarSync: _bar_sync,
    core.Bra: lambda p, op: Spelling("bra.uni" if op.uni else "bra", [op.target.name]),
    core.Ret: _plain("ret"),
    core.Exit: _plain("exit"),
    core.Trap: _plain("trap"),
    core.Membar: lambda p, op: Spelling(f"membar.{op.level}"),
    mbarrier.MbarrierInit: lambda p, op: Spelling(_q("mbarrier.init", _space(op.space)),
                                                  [p.v(op.addr), p.v(op.count)]),
    mbarrier.MbarrierInval: lambda p, op: Spelling(_q("mbarrier.inval", _space(op.space)), [p.v(op.addr)]),
    mbarrier.MbarrierArrive: _arrive,
    mbarrier.MbarrierExpectTx: _expect_tx,
    mbarrier.MbarrierWait: _try_wait,
    mbarrier.MbarrierPendingCount: lambda p, op: Spelling("mbarrier.pending_count", [p.v(op.state)], [(u32, None)]),
    fence.FenceProxyAsync: lambda p, op: Spelling(_q("fence.proxy.async", op.space)),
    fence.FenceMbarrierInit: _plain("fence.mbarrier_init"),
    fence.FenceProxyTensormap: _fence_tensormap,
    fence.Fence: lambda p, op: Spelling(_q("fence", op.sem, op.scope)),
    fence.FenceSyncRestrict: _sync_restrict,
    bulk.CpAsyncBulkTensorLoad: _load,
    bulk.CpAsyncBulkTensorStore: _store,
    bulk.CpReduceAsyncBulkTensor: _reduce,
    bulk.CpAsyncBulkPrefetchTensor: _prefetch,
    bulk.CpAsyncBulkCommitGroup: _plain("cp.async.bulk.commit_group"),
    bulk.CpAsyncBulkWaitGroup: lambda p, op: Spelling(op.mnemonic, [str(op.n)]),
    cluster.ElectSync: _elect,
    cluster.BarrierCluster: lambda p, op: Spelling(_q("barrier.cluster", op.kind, op.sem,
                                                      "aligned" if op.aligned else "")),
    cluster.Mapa: _mapa,
    cluster.Getctarank: lambda p, op: Spelling(_q("getctarank", op.space), [p.v(op.addr)], [(u32, None)]),
    cluster.StAsync: _st_async,
    cluster.RedAsync: lambda p, op: Spelling(_q("red.async", op.op, op.type.name),
                                             [p.v(op.addr), p.v(op.src), p.v(op.mbar)]),
    bulk.CpAsyncBulk: _bulk,
    bulk.CpReduceAsyncBulk: _reduce_bulk,
    bulk.CpAsyncBulkPrefetch: _prefetch_bulk,
    control.Griddepcontrol: lambda p, op: Spelling(f"griddepcontrol.{op.action}"),
    control.Setmaxnreg: lambda p, op: Spelling(f"setmaxnreg.{op.action}", [str(op.n)]),
    policy.CreatepolicyFractional: _policy,
    policy.CreatepolicyRange: _policy,
    policy.CreatepolicyCvt: _policy,
    tensormap.TensormapReplace: _replace,
    tensormap.TensormapCpFenceproxy: lambda p, op: Spelling(_q("tensormap.cp_fenceproxy", op.scope),
                                                            [p.v(op.dst), p.v(op.src)]),
    tensormap.PrefetchTensormap: lambda p, op: Spelling(_q("prefetch", op.space, "tensormap"), [p.v(op.addr)]),
}
