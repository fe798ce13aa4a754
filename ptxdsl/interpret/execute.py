"""The executor: a kernel's structured body flattened into steps (one closure per instruction, made once per
kernel), each run on the active lanes of a warp.

Register arithmetic is `ptxdsl.alu.compute` of the op's declared `Compute` effect; mbarrier operations follow
the declared `Init`, `Arrive`, `ExpectTx`, `CompleteTx` and `Wait` effects; fences (`Order`, `ProxyFence`)
are no-ops because the interpreter runs one instruction at a time and every write is seen by the next read
(the memory model's rules stay the verifier's job). The rest (memory, TMA, warp collectives, barriers) is
keyed by op class in `HANDLERS`; an op with none raises NotInterpretable naming it.

Where this differs from the launch checks' run of the threads (ptxdsl.verify.threads): that run follows
classes of threads with symbolic values (an address is a buffer and an offset, a value may be unknown) to
prove facts for every launch; this one runs concrete lanes of one launch, so it needs every value and keeps
none symbolic. Both take an op's arithmetic from one place (ptxdsl.alu through fold.evaluate).
"""
from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np

from .. import alu
from ..errors import PtxdslError
from .. import reference
from ..semantics import INTEGER, shl, shr
from ..ir import Addr, If, Imm, Instr, LabelStmt, Loop, Param, PredNot, Reg, SharedAlloc, SpecialReg, TensorMapRef, \
    WaitLoop
from ..isa import bulk, cluster, control, core, effects as fx, fence, mbarrier as mb, policy, tensormap as tm, warp
from ..isa import wgmma as wg
from ..isa.operands import reg_list
from ..types import ALL_TYPES, pred, u32, u64
from .barriers import BarWait, ClusterWait, CtaBarrier, MBarrier, MbarrierWait, WarpgroupWait
from .errors import InterpretError, KernelTrapped, MemoryFault, NotInterpretable
from .lanes import U64, WARP
from .memory import PARAM_WINDOW, RANK_SHIFT, SHARED_WINDOW, tmap_bytes, tmap_handle

ADVANCE = None          # a step's return: advance the active lanes' counters
HELD = True             # the step moved the counters itself (a branch, a wait)
ALL32 = np.ones(WARP, bool)


# ------------------------------------------------------------------------------------------ the code


class Step:
    """One flattened statement: `run(warp, lanes)`, where it came from, what it is."""

    __slots__ = ("run", "loc", "what", "control", "quiet")

    def __init__(self, run, loc, what, control=True, quiet=True):
        self.run, self.loc, self.what = run, loc, what
        self.control = control          # it may move the counters or change which lanes run (else: straight-line)
        self.quiet = quiet              # it changes nothing another warp can see (registers, loads, branches)


def compile_body(kernel) -> list:
    """The kernel's body as a list of Steps (structured blocks lowered to branches, as the emitter does)."""
    steps: list = []
    labels: dict = {}
    fixups: list = []

    def branch(cond, target_ref, loc, what="bra"):
        """A step that sends the lanes where `cond` holds (all, when None) to target_ref[0]."""
        read = None if cond is None else reader(cond, pred)

        def run(w, m):
            t = target_ref[0]
            if read is None:
                w.pc[m] = t
                return HELD
            c = read(w)
            taken = m & c
            w.pc[taken] = t
            w.pc[m & ~c] += 1
            return HELD
        steps.append(Step(run, loc, what))

    def block(stmts):
        for s in stmts:
            if isinstance(s, Instr):
                op = s.op
                if isinstance(op, core.Bra):
                    ref = [None]
                    fixups.append((ref, op.target.name, s.loc))
                    branch(s.guard, ref, s.loc)
                else:
                    steps.append(Step(instruction(s), s.loc, op.what, isinstance(op, CONTROL),
                                      isinstance(op, QUIET)))
            elif isinstance(s, LabelStmt):
                labels[s.label.name] = len(steps)
            elif isinstance(s, If):
                neg = s.cond.reg if isinstance(s.cond, PredNot) else PredNot(s.cond)
                skip = [None]
                branch(neg, skip, s.loc, "if")
                block(s.then)
                if s.orelse is not None:
                    end = [None]
                    branch(None, end, s.loc, "else")
                    skip[0] = len(steps)
                    block(s.orelse)
                    end[0] = len(steps)
                else:
                    skip[0] = len(steps)
            elif isinstance(s, Loop):
                loop(s)
            elif isinstance(s, WaitLoop):
                steps.append(Step(wait_loop(s), s.loc, s.op.what))
            else:
                raise NotInterpretable(f"statement {type(s).__name__}", getattr(s, "loc", None))

    def loop(s: Loop):
        t = s.var.type
        t_cmp = t if t.kind in "us" else ALL_TYPES[f"u{t.bits}"]
        start, stop = reader(s.start, t), reader(s.stop, t)
        var, cond = s.var, s.cond
        mask = alu.width_mask(t.bits)

        def init(w, m):
            np.copyto(w.regs[var], start(w), where=m)
        steps.append(Step(init, s.loc, "loop start"))
        head = len(steps)
        end = [None]

        def test(w, m):
            a, b = alu.decode(w.regs[var], t_cmp), alu.decode(stop(w), t_cmp)
            done = (a >= b) if s.step > 0 else (a <= b)
            np.copyto(w.regs[cond], done, where=m)
            taken = m & done
            w.pc[taken] = end[0]
            w.pc[m & ~done] += 1
            return HELD
        steps.append(Step(test, s.loc, "loop test"))
        block(s.body)
        inc = U64(s.step & int(mask))

        def step(w, m):
            r = w.regs[var]
            np.copyto(r, (r + inc) & mask, where=m)
            w.pc[m] = head
            return HELD
        steps.append(Step(step, s.loc, "loop step"))
        end[0] = len(steps)

    block(kernel.body)

    def ret(w, m):
        w.exit(m)
        return HELD
    steps.append(Step(ret, kernel.loc, "ret", True, False))
    for ref, name, loc in fixups:
        if name not in labels:
            raise NotInterpretable(f"bra {name}: no such label in the kernel", loc)
        ref[0] = labels[name]
    return steps


def instruction(s: Instr):
    """The step function of one instruction (its guard applied)."""
    op = s.op
    handler = HANDLERS.get(type(op))
    if handler is None:
        handler = _by_effect(op)
    run = handler(op)
    guard = s.guard
    if guard is None:
        return run
    g = reader(guard, pred)

    def guarded(w, m):
        m2 = m & g(w)
        r = run(w, m2) if m2.any() else ADVANCE
        if r is HELD:
            w.pc[m & ~m2] += 1
        return r
    return guarded


# Families whose CPU model has not landed: their ops are reported by name.
NOT_YET: dict = {}


def interpretable(cls) -> bool:
    """Whether the interpreter executes the op class: a handler of its own, or a register computation."""
    return cls in HANDLERS or issubclass(cls, COMPUTES)          # (bra: compile_body makes it a branch)


def _by_effect(op):
    family = type(op).mnemonic.split(".", 1)[0]
    if family in NOT_YET:
        raise NotInterpretable(f"{op.what}: {NOT_YET[family]}", rule="interpret.not-interpretable")
    effects = op.effects()
    comp = [e for e in effects if isinstance(e, fx.Compute)]
    if comp and len(effects) == 1:
        return lambda op: compute_step(op, comp[0])
    if all(isinstance(e, (fx.Order, fx.ProxyFence)) for e in effects) and not isinstance(op, (core.Ld, core.St)):
        return lambda op: lambda w, m: ADVANCE                 # fences: ordering is sequential here
    raise NotInterpretable(f"{op.what}: the interpreter does not execute {type(op).mnemonic} yet",
                           rule="interpret.not-interpretable")


# ------------------------------------------------------------------------------------------- operands


def reader(v, t=None):
    """A function warp -> lanes for an operand: register bits, immediate bits, a special register, the address
    of a shared buffer (shared::cta) or of a parameter (param space)."""
    if isinstance(v, Reg):
        return lambda w: w.regs[v]
    if isinstance(v, PredNot):
        r = v.reg
        return lambda w: ~w.regs[r]
    if isinstance(v, Imm):
        const = imm_bits(v, t)
        return lambda w: const
    if isinstance(v, bool):
        const = np.bool_(v)
        return lambda w: const
    if isinstance(v, int):
        const = U64(v & ((1 << 64) - 1))
        return lambda w: const
    if isinstance(v, SpecialReg):
        name = v.name
        return lambda w: w.cta.launch.sreg(w, name)
    if isinstance(v, SharedAlloc):
        return lambda w: U64(w.cta.launch.layout[v])
    if isinstance(v, Param):
        return lambda w: U64(w.cta.launch.param_offset[v])
    if isinstance(v, TensorMapRef):
        return reader(v.addr)
    raise NotInterpretable(f"operand {v!r}")


def imm_bits(v: Imm, t=None):
    it = v.type if t is None or t.kind == "pred" else t
    if v.type.kind == "pred" or (t is not None and t.kind == "pred"):
        return np.bool_(bool(v.value))
    if it.kind == "f" or v.type.kind == "f":
        ft = it if it.kind == "f" else v.type
        if ft.bits == 16 and isinstance(v.value, int) and v.type.kind != "f":
            return U64(v.value & 0xFFFF)
        return U64(int(alu.encode(np.array([float(v.value)]), ft)[0]))
    return U64(int(v.value) & ((1 << 64) - 1))


def writer(dst):
    """A function (warp, lanes, value) writing a destination register where lanes hold (None: the sink)."""
    if not isinstance(dst, Reg):
        return lambda w, m, value: None

    def write(w, m, value):
        np.copyto(w.regs[dst], value, where=m)
    return write


def address(a, t=None):
    """A function warp -> (space-relative address lanes) of an Addr or address register (offset applied)."""
    if isinstance(a, Addr):
        base, off = a.base, a.offset
    else:
        base, off = a, 0
    if isinstance(base, Param):
        return lambda w: U64(w.cta.launch.param_offset[base] + off)
    base_read = reader(base)
    if not off:
        return base_read
    o = U64(off & ((1 << 64) - 1))
    return lambda w: base_read(w) + o


# ------------------------------------------------------------------------------------------- memory


def _space_of(space):
    return "" if space is None else space


def locate(w, space: str, addrs, m, nbytes: int, what: str, align: int | None = None):
    """[(buffer, lane mask, offsets of those lanes)] for the accesses of `nbytes` at `addrs` in the lanes `m`;
    MemoryFault for one outside every buffer or not aligned to `align` (default nbytes)."""
    addrs = np.broadcast_to(np.asarray(addrs, dtype=U64), (WARP,))
    sel = addrs[m]
    if align is None:
        align = nbytes
    if align > 1:
        bad = (sel % U64(align)) != 0
        if bad.any():
            a = int(sel[bad][0])
            raise MemoryFault(f"{what}: address {a:#x} ({_space_name(space)}) is not {align}-byte aligned",
                              rule="interpret.misaligned")
    launch = w.cta.launch
    lo, hi = int(sel.min()), int(sel.max())
    region = launch.region(w, space, lo, hi - lo + nbytes, what)
    if region is not None:
        buf, base_off = region
        return [(buf, m, (sel - U64(lo)).astype(np.int64) + base_off)]
    out = []
    idx = np.flatnonzero(m)
    for i, a in zip(idx, sel.tolist()):
        r = launch.region(w, space, a, nbytes, what)
        if r is None:
            raise MemoryFault(f"{what}: {nbytes} bytes at {_space_name(space)} address {a:#x} (lane {i}) are outside "
                              f"every buffer", rule="interpret.out-of-bounds")
        lane = np.zeros(WARP, bool)
        lane[i] = True
        out.append((r[0], lane, np.array([r[1]], np.int64)))
    return out


def _space_name(space: str) -> str:
    return space or "generic"


def load_bytes(w, space, addr_read, m, nbytes, what, align=None):
    """(k active lanes, nbytes) uint8 of what the lanes read."""
    out = np.zeros((WARP, nbytes), np.uint8)
    for buf, lanes, offs in locate(w, space, addr_read(w), m, nbytes, what, align):
        out[lanes] = buf[offs[:, None] + np.arange(nbytes)]
    return out


def store_bytes(w, space, addr_read, m, data, what, align=None):
    """Write data (32, nbytes) of the lanes m."""
    nbytes = data.shape[1]
    for buf, lanes, offs in locate(w, space, addr_read(w), m, nbytes, what, align):
        buf[offs[:, None] + np.arange(nbytes)] = data[lanes]


def _to_lanes(raw, elem_bytes, count):
    """(32, elem_bytes * count) uint8 -> list of count uint64 lanes."""
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[elem_bytes]
    vals = np.ascontiguousarray(raw).view(dt).reshape(WARP, count)
    return [vals[:, i].astype(U64) for i in range(count)]


def _from_lanes(values, elem_bytes):
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[elem_bytes]
    cols = [np.broadcast_to(np.asarray(v), (WARP,)).astype(dt) for v in values]
    return np.stack(cols, axis=1).view(np.uint8).reshape(WARP, elem_bytes * len(values))


# --------------------------------------------------------------------------------------------- handlers


def compute_step(op, e):
    t = e.type
    dst_t = e.dst.type if isinstance(e.dst, Reg) else t
    arg_types = _arg_types(op, e)
    reads = [reader(a, at) for a, at in zip(e.args, arg_types)]
    write = writer(e.dst)
    for flag in ("sat", "ftz", "relu", "nan", "xorsign_abs"):
        if getattr(op, flag, False):
            raise NotInterpretable(f"{op.what}: the .{flag} form is not modelled by the interpreter",
                                   rule="interpret.not-interpretable")

    fast = _fast_int(e)
    if fast is not None:
        if len(reads) == 2:
            ra, rb = reads

            def run2(w, m):
                write(w, m, fast(ra(w), rb(w)))
            return run2
        if len(reads) == 3:
            ra, rb, rc = reads

            def run3(w, m):
                write(w, m, fast(ra(w), rb(w), rc(w)))
            return run3

    def run(w, m):
        try:
            value = alu.compute(e, [r(w) for r in reads], dst_t)
        except alu.Unsupported as x:
            raise NotInterpretable(f"{op.what}: the interpreter has no exact model of {x}",
                                   rule="interpret.not-interpretable") from None
        write(w, m, value)
    return run


_WRAP = ("add", "sub", "and", "or", "xor", "mul")
_UCMP = {"setp.eq": np.equal, "setp.ne": np.not_equal, "setp.lo": np.less, "setp.ls": np.less_equal,
         "setp.hi": np.greater, "setp.hs": np.greater_equal}


def _fast_int(e):
    """The integer forms that need no decoding, straight on the bits (the same results as alu.compute, which
    the tests compare them with): wrapping add/sub/mul.lo/mad.lo and the logic ops, shifts, selp, unsigned
    comparisons."""
    t = e.type
    if t is None or t.kind not in "usb" or e.mode not in (None, "lo"):
        return None
    mask = alu.width_mask(t.bits)
    bits = U64(t.bits)
    if e.fn in _WRAP:                     # wrapping on the bits is the same for signed and unsigned types
        f = INTEGER[e.fn]
        return lambda a, b: f(a, b) & mask
    if e.fn == "mad":
        mul, add = INTEGER["mul"], INTEGER["add"]
        return lambda a, b, c: add(mul(a, b), c) & mask
    if e.fn == "shl":
        return lambda a, b: shl(a, np.asarray(b, U64), t.bits) & mask
    if e.fn == "shr" and t.kind != "s":
        return lambda a, b: shr(a & mask, np.asarray(b, U64), t.bits)
    if e.fn == "selp":
        return lambda a, b, c: np.where(c, a, b)
    cmp = _UCMP.get(e.fn) if t.kind != "s" or e.fn in ("setp.eq", "setp.ne") else None
    if cmp is None and t.kind != "s":
        cmp = {"setp.lt": np.less, "setp.le": np.less_equal, "setp.gt": np.greater,
               "setp.ge": np.greater_equal}.get(e.fn)
    if cmp is not None:
        return lambda a, b: cmp(a & mask, b & mask)
    return None


def _arg_types(op, e):
    if e.fn == "selp":
        return (e.type, e.type, pred)
    if e.fn in ("shl", "shr"):
        return (e.type, u32)
    if e.fn == "mad" and getattr(op, "mode", None) == "wide":
        return (e.type, e.type, op.d.type)
    if e.fn == "cvt":
        return (op.stype,)
    return tuple(e.type for _ in e.args)


def mov(op: core.Mov):
    src = op.src
    write = writer(op.d)
    if isinstance(src, (SharedAlloc, Param)):
        read = reader(src)
    else:
        read = reader(src, op.type)

    def run(w, m):
        write(w, m, read(w))
    return run


def cvt(op: core.Cvt):
    read = reader(op.src, op.stype)
    write = writer(op.d)
    rnd, sat, dst, src = op.rnd, op.sat, op.type, op.stype.name

    def run(w, m):
        try:
            value = alu._cvt(read(w), dst, src, rnd, sat)
        except alu.Unsupported as x:
            raise NotInterpretable(f"{op.what}: the interpreter has no exact model of {x}",
                                   rule="interpret.not-interpretable") from None
        write(w, m, value)
    return run


_PAIR_TYPES = {"f16x2": (np.float16, 16), "bf16x2": (ml_dtypes.bfloat16, 16),
               "e4m3x2": (ml_dtypes.float8_e4m3fn, 8), "e5m2x2": (ml_dtypes.float8_e5m2, 8)}


def cvt_pack(op: core.CvtPack):
    """cvt.rn/rz{.relu}{.satfinite} pairs: two f32 values rounded to f16/bf16 (a .b32 register) or FP8 (a .b16
    register), `src` in the upper half."""
    hi, lo = reader(op.src), reader(op.lo)
    write = writer(op.d)
    dt, width = _PAIR_TYPES[op.type]
    dt = np.dtype(dt)
    top = float(ml_dtypes.finfo(dt).max)
    ubits = {8: np.uint8, 16: np.uint16}[width]

    def one(bits):
        x = alu.decode(bits, ALL_TYPES["f32"]).astype(np.float64)
        if op.relu:
            x = np.where(np.isnan(x), x, np.maximum(x, 0.0))
        if op.satfinite:                    # past the largest finite value (infinities too): clamped to it
            x = np.where(np.isnan(x), x, np.clip(x, -top, top))
        y = alu._odd_f32(x).astype(dt)      # one rounding to the pair's type (round to odd first: exact)
        if op.rnd == "rz":                  # toward zero: one step back where nearest rounding went outward
            past = np.abs(y.astype(np.float64)) > np.abs(x)
            if dt == np.dtype(ml_dtypes.bfloat16):
                truncated = (alu.encode(x.astype(np.float32), ALL_TYPES["f32"]) >> U64(16)).astype(np.uint16)
                y = np.where(past & np.isfinite(x), truncated.view(dt), y)
            else:
                y = np.where(past, np.nextafter(y, np.float16(0)), y)
        return np.ascontiguousarray(y).view(ubits).astype(U64)

    def run(w, m):
        write(w, m, (one(hi(w)) << U64(width)) | one(lo(w)))
    return run


def cvt_unpack(op: core.CvtUnpack):
    """cvt.rn{.relu}.f16x2.e4m3x2/e5m2x2: the two FP8 values of a .b16 register widened to f16 (exact)."""
    read, write = reader(op.src), writer(op.d)
    dt = np.dtype(_PAIR_TYPES[op.stype][0])

    def one(byte):
        x = byte.astype(np.uint8).view(dt).astype(np.float32)
        if op.relu:
            x = np.where(np.isnan(x), x, np.maximum(x, 0))
        return x.astype(np.float16).view(np.uint16).astype(U64)

    def run(w, m):
        v = np.broadcast_to(read(w), (WARP,)).astype(U64)
        write(w, m, (one((v >> U64(8)) & U64(0xFF)) << U64(16)) | one(v & U64(0xFF)))
    return run


def cvta(op: core.Cvta):
    write = writer(op.d)
    space = op.space
    src = op.src
    if isinstance(src, SharedAlloc):
        read = reader(src)
    elif isinstance(src, Param):
        read = reader(src)
    else:
        read = reader(src, u64)
    window = PARAM_WINDOW if space == "param" else SHARED_WINDOW if space.startswith("shared") else 0
    win = U64(window)

    def run(w, m):
        a = read(w)
        if op.to:
            if window:
                a = a - win
        elif window:
            a = a + win
        write(w, m, a)
    return run


def ld(op: core.Ld):
    t, n = op.type, op.vec
    eb = t.nbytes
    space = _space_of(op.space)
    where = address(op.addr)
    writes = [writer(d) for d in op.d]
    widths = [d.type.reg_bits if isinstance(d, Reg) else 64 for d in op.d]
    what = op.what

    def run(w, m):
        raw = load_bytes(w, space, where, m, eb * n, what, align=eb * n)
        for write, v, bits in zip(writes, _to_lanes(raw, eb, n), widths):
            write(w, m, _extend(v, t, eb, bits))
    return run


def _extend(v, t, eb, reg_bits):
    """A loaded value in its register: ld.s8/s16 into a wider register sign-extends."""
    if t.kind == "s" and eb * 8 < reg_bits:
        shift = 64 - eb * 8
        return ((v.astype(np.int64) << shift) >> shift).view(U64) & alu.width_mask(reg_bits)
    return v


def st(op: core.St):
    t = op.type
    eb = t.nbytes
    space = _space_of(op.space)
    where = address(op.addr)
    reads = [reader(v, t) for v in op.value]
    what = op.what

    def run(w, m):
        data = _from_lanes([r(w) for r in reads], eb)
        store_bytes(w, space, where, m, data, what, align=eb * len(reads))
    return run


def combine(kind: str, t, old, new, c=None):
    """The value a reduction `kind` (atom/red/cp.reduce/red.async's .op) leaves: old op new, on bit lanes of
    type t. Float additions round once to the type; min/max of floats return the number when one is NaN."""
    if kind == "exch":
        return new
    if kind == "cas":
        return np.where(old == new, c, old)
    if kind in ("and", "or", "xor"):
        return INTEGER[kind](old, new)
    if kind == "inc":
        return np.where(old >= new, U64(0), old + U64(1)) & alu.width_mask(t.bits)
    if kind == "dec":
        return np.where((old == 0) | (old > new), new, old - U64(1)) & alu.width_mask(t.bits)
    a, b = alu.decode(old, t), alu.decode(new, t)
    if t.kind == "f":
        if kind == "add":
            r = a + b if t.bits >= 32 else alu.round_to(a.astype(np.float64) + b.astype(np.float64), t)
        else:
            r = (np.fmin if kind == "min" else np.fmax)(a, b)
        return alu.encode(r, t)
    if kind == "add":
        return alu.encode(INTEGER["add"](a, b), t)
    if kind in ("min", "max"):
        return alu.encode(INTEGER[kind](a, b), t)
    raise NotInterpretable(f"a .{kind} reduction", rule="interpret.not-interpretable")


def atom(op):
    """atom / red: lane by lane in lane order (each lane's read-modify-write is atomic)."""
    t = op.type
    eb = t.nbytes
    space = _space_of(op.space)
    where = address(op.addr)
    value = reader(op.value, t)
    c = reader(op.c, t) if getattr(op, "c", None) is not None else None
    write = writer(op.d) if hasattr(op, "d") else None
    kind = op.op
    what = op.what
    dt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[eb]

    def run(w, m):
        groups = locate(w, space, where(w), m, eb, what)
        vals = np.broadcast_to(value(w), (WARP,))
        cs = np.broadcast_to(c(w), (WARP,)) if c is not None else None
        out = np.zeros(WARP, U64)
        with np.errstate(all="ignore"):
            for buf, lanes, offs in groups:
                for i, off in zip(np.flatnonzero(lanes), offs.tolist()):
                    cell = buf[off:off + eb].view(dt)
                    old = np.array([cell[0]], U64)
                    out[i] = old[0]
                    new = combine(kind, t, old, vals[i:i + 1], cs[i:i + 1] if cs is not None else None)
                    cell[0] = dt(new[0])
        if write is not None:
            write(w, m, out)
    return run


# ---------------------------------------------------------------------------------------- control


def bar_sync(op: core.BarSync):
    ident = reader(op.barrier, u32)
    count = reader(op.count, u32) if op.count is not None else None

    def run(w, m):
        cta = w.cta
        b = int(np.broadcast_to(ident(w), (WARP,))[m][0])
        bar = cta.bars.get(b)
        if bar is None:
            bar = cta.bars[b] = CtaBarrier(b)
        if count is not None:
            bar.count = int(np.broadcast_to(count(w), (WARP,))[m][0])
        bar.arrived += int(m.sum())          # each thread that executes it (exited threads are not awaited)
        w.block(m, BarWait(cta, bar, bar.round, w.where))
        cta.check_barrier(bar)
        return HELD
    return run


def exit_(op):
    def run(w, m):
        w.exit(m)
        return HELD
    return run


def trap(op):
    def run(w, m):
        raise KernelTrapped(f"trap executed by {w.describe()} lanes {np.flatnonzero(m).tolist()}",
                            rule="interpret.trap")
    return run


def nop(op):
    return lambda w, m: ADVANCE


def opaque_zero(op):
    write = writer(op.defs()[0]) if op.defs() else None

    def run(w, m):
        if write is not None:
            write(w, m, U64(0))
    return run


# ---------------------------------------------------------------------------------------- mbarriers


def _bar_location(w, space, addr_read, m, what):
    """[(cta, offset, lanes)] of the mbarrier each active lane names (shared::cta, shared::cluster, generic)."""
    addrs = np.broadcast_to(np.asarray(addr_read(w), U64), (WARP,))
    out = {}
    for i, a in zip(np.flatnonzero(m), addrs[m].tolist()):
        cta, off = w.cta.launch.shared_target(w, space, a, 8, what)
        key = (id(cta), off)
        if key not in out:
            out[key] = [cta, off, np.zeros(WARP, bool)]
        out[key][2][i] = True
    return out.values()


def _barrier(cta, off, what, init=False):
    bar = cta.mbars.get(off)
    if bar is None and not init:
        raise InterpretError(f"{what}: the mbarrier at shared offset {off:#x} of CTA {cta.ctaid} is not initialised "
                             f"(mbarrier.init first)", rule="interpret.mbarrier-uninitialised")
    return bar


def mbarrier_init(op):
    e = op.effects()[0]
    space, where, count = _space_of(op.space), address(op.bar), reader(e.count, u32)

    def run(w, m):
        counts = np.broadcast_to(count(w), (WARP,))
        for cta, off, lanes in _bar_location(w, space, where, m, op.what):
            i = int(np.flatnonzero(lanes)[-1])
            cta.mbars[off] = MBarrier(int(counts[i]), f"{cta.launch.shared_name(off)} of CTA {cta.ctaid}")
    return run


def mbarrier_inval(op):
    space, where = _space_of(op.space), address(op.bar)

    def run(w, m):
        for cta, off, lanes in _bar_location(w, space, where, m, op.what):
            cta.mbars.pop(off, None)
    return run


def mbarrier_arrive(op):
    effects = op.effects()
    arrive = next((e for e in effects if isinstance(e, fx.Arrive)), None)
    expect = next((e for e in effects if isinstance(e, fx.ExpectTx)), None)
    complete = next((e for e in effects if isinstance(e, fx.CompleteTx)), None)
    space, where = _space_of(op.space), address(op.bar)
    count = reader(arrive.count, u32) if arrive is not None and arrive.count is not None else None
    tx_e = expect or complete
    tx = reader(tx_e.tx, u32) if tx_e is not None else None
    state = getattr(op, "state", None)
    write = writer(state) if isinstance(state, Reg) else None

    def run(w, m):
        sched = w.cta.launch
        counts = np.broadcast_to(count(w), (WARP,)) if count is not None else None
        txs = np.broadcast_to(tx(w), (WARP,)) if tx is not None else None
        tokens = np.zeros(WARP, U64)
        for cta, off, lanes in _bar_location(w, space, where, m, op.what):
            bar = _barrier(cta, off, op.what)
            for i in np.flatnonzero(lanes).tolist():
                if txs is not None:
                    nbytes = int(txs[i]) & 0xFFFFFFFF
                    nbytes = nbytes - (1 << 32) if nbytes >> 31 else nbytes
                    (bar.expect_tx if expect is not None else bar.complete_tx)(nbytes, sched)
                if arrive is not None:
                    n = int(counts[i]) if counts is not None else 1
                    if arrive.pending:
                        bar.pending -= n
                        tokens[i] = bar.phase
                    else:
                        tokens[i] = bar.arrive(n, arrive.drop, sched)
        if write is not None:
            write(w, m, tokens)
    return run


def _poll(op):
    e = next(e for e in op.effects() if isinstance(e, fx.Wait))
    space, where = _space_of(op.space), address(op.bar)
    parity = reader(e.parity, u32) if e.parity is not None else None
    token = reader(e.state, u64) if e.state is not None else None

    def poll(w, m):
        """(done lanes, [(lanes, MbarrierWait)] for the lanes not done)."""
        done = np.zeros(WARP, bool)
        waits = []
        ps = np.broadcast_to(parity(w), (WARP,)) if parity is not None else None
        ts = np.broadcast_to(token(w), (WARP,)) if token is not None else None
        for cta, off, lanes in _bar_location(w, space, where, m, op.what):
            bar = _barrier(cta, off, op.what)
            for i in np.flatnonzero(lanes).tolist():
                waiter = MbarrierWait(cta, off, bar, int(ps[i]) & 1 if ps is not None else None,
                                      int(ts[i]) if ts is not None else None, w.where, None)
                if waiter.done():
                    done[i] = True
                else:
                    lane = np.zeros(WARP, bool)
                    lane[i] = True
                    waits.append((lane, waiter))
        return done, waits
    return poll


def mbarrier_test(op):
    poll = _poll(op)
    write = writer(op.done)

    def run(w, m):
        done, _ = poll(w, m)
        write(w, m, done)
    return run


def wait_loop(s: WaitLoop):
    """A spin on try_wait/test_wait: the lanes whose phase completed go on; the others block on the barrier
    (and are woken when it moves on), instead of spinning."""
    poll = _poll(s.op)
    write = writer(s.op.done)

    def run(w, m):
        done, waits = poll(w, m)
        if done.any():
            write(w, done, True)
            w.pc[done] += 1
        if waits:
            merged = {}
            for lane, waiter in waits:
                key = (id(waiter.bar), waiter.parity, waiter.token)
                if key in merged:
                    merged[key][0] |= lane
                else:
                    merged[key] = [lane, waiter]
            for lane, waiter in merged.values():
                w.block(lane, waiter)
        return HELD
    return run


def pending_count(op):
    write = writer(op.count)

    def run(w, m):
        write(w, m, U64(0))
    return run


# ---------------------------------------------------------------------------------------------- TMA


def _lane_values(w, m, reads):
    return [np.broadcast_to(r(w), (WARP,)) for r in reads]


def _signed32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def tensor_map(w, addr: int, what: str):
    """The TensorMapSpec a tensor map's generic address holds."""
    launch = w.cta.launch
    buf, off = launch.region(w, "", addr, 128, what) or (None, None)
    if buf is None:
        raise MemoryFault(f"{what}: the tensor map address {addr:#x} is outside every buffer",
                          rule="interpret.out-of-bounds")
    if addr % 64:
        raise MemoryFault(f"{what}: the tensor map address {addr:#x} is not 64-byte aligned",
                          rule="interpret.misaligned")
    handle = tmap_handle(buf[off:off + 128], what)
    return launch.heap.tmaps[handle]


def _window(spec, coords, launch, what, tail=16):
    """(the spec over the rows the box touches, its coordinates there, the bytes it addresses): the TMA model
    reads and writes a whole tensor array, so each operation gets the part of the tensor its box can reach."""
    e = spec.elem_bytes
    pitches = (e, *spec.strides)
    dims, new = list(spec.dims), list(coords)
    start = 0
    if spec.kind == "tiled":
        estr = spec.estrides
        for k in range(1, spec.rank):
            n = -(-spec.box[k] // estr[k])
            first, last = coords[k], coords[k] + estr[k] * (n - 1)
            lo, hi = max(first, 0), min(last, spec.dims[k] - 1)
            if lo > hi:
                continue
            start += lo * pitches[k]
            dims[k] = hi - lo + 1
            new[k] = coords[k] - lo
    extent = e * dims[0] + sum(p * (d - 1) for p, d in zip(pitches[1:], dims[1:]))
    base = spec.global_address + start
    got = launch.heap.region(base, extent)
    if got is None:
        raise MemoryFault(f"{what}: the tensor map's {extent} bytes at global address {base:#x} are outside every "
                          f"buffer (the map's global_address {spec.global_address:#x}, dims {spec.dims})",
                          rule="interpret.out-of-bounds")
    buf, off = got
    end = min(buf.size, off + extent + tail)
    sub = replace(spec, dims=tuple(dims), global_address=base) if start or dims != list(spec.dims) else spec
    return sub, tuple(new), buf, off, end


_PADDING: dict = {}


def _data_bytes(spec, load):
    """Which bytes of a loaded box image are the box's (a bool mask; None: all of them). Under a swizzle mode a
    narrow row is padded to the swizzle span, and the TMA engine leaves the padding untouched: the model fills
    it with the `fill` it is given, so two loads with different fills tell data from padding (once per layout)."""
    if spec.swizzle == "none":
        return None
    key = (spec.kind, spec.dtype, spec.box, spec.swizzle, spec.element_strides, spec.channels_per_pixel,
           spec.pixels_per_column)
    got = _PADDING.get(key)
    if got is None:
        got = _PADDING[key] = load(0) == load(255)
        if got.all():
            got = _PADDING[key] = True
    return None if got is True else got


def _swizzle_align(spec):
    span = {"none": 16, "32B": 256, "64B": 512, "128B": 1024}.get(spec.swizzle, 128)
    return max(span, 128)


def tensor_load(op: bulk.CpAsyncBulkTensorLoad):
    if op.mode not in ("tile", "im2col"):
        raise NotInterpretable(f"{op.what}: mode {op.mode!r} is not modelled (ptxdsl.reference has tile and im2col)",
                               rule="interpret.not-interpretable")
    if op.cta_group is not None:
        raise NotInterpretable(f"{op.what}: .cta_group is not modelled", rule="interpret.not-interpretable")
    space = op.dst_space
    dst, bar, tmap = address(op.dst), address(op.mbar), reader(op.src)
    coords = [reader(c, ALL_TYPES["s32"]) for c in op.coords]
    offs = [reader(c, ALL_TYPES["u16"]) for c in (op.im2col or ())]
    mc = reader(op.multicast, ALL_TYPES["u16"]) if op.multicast is not None else None
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        cs, os_ = _lane_values(w, m, coords), _lane_values(w, m, offs)
        ds, bs, ts = (np.broadcast_to(r(w), (WARP,)) for r in (dst, bar, tmap))
        masks = np.broadcast_to(mc(w), (WARP,)) if mc is not None else None
        for i in np.flatnonzero(m).tolist():
            spec = tensor_map(w, int(ts[i]), what)
            c = tuple(_signed32(int(x[i])) for x in cs)
            try:
                if spec.kind == "im2col":
                    got = launch.heap.region(spec.global_address, 1)
                    if got is None:
                        raise MemoryFault(f"{what}: the map's global address {spec.global_address:#x} is outside "
                                          f"every buffer", rule="interpret.out-of-bounds")
                    o = tuple(int(x[i]) for x in os_)

                    def load(fill, spec=spec, g=got, c=c, o=o):
                        return reference.load_im2col(spec, g[0][g[1]:], c, o, fill)
                else:
                    sub, c2, buf, lo, hi = _window(spec, c, launch, what)

                    def load(fill, sub=sub, g=buf[lo:hi], c2=c2):
                        return reference.load_box(sub, g, c2, fill)
                data = load(0)
                keep = _data_bytes(spec, load)
            except ValueError as e:
                raise MemoryFault(f"{what}: {e}", rule="interpret.tma") from None
            nbytes = reference.tx_bytes(spec)
            targets = [w.cta.launch.shared_target(w, space, int(ds[i]), data.size, what)]
            bar_targets = [w.cta.launch.shared_target(w, space, int(bs[i]), 8, what)]
            if masks is not None:
                own_off, bar_off = targets[0][1], bar_targets[0][1]
                ranks = [r for r in range(16) if int(masks[i]) >> r & 1]
                ctas = w.cta.cluster.ctas
                for r in ranks:
                    if r >= len(ctas):
                        raise MemoryFault(f"{what}: multicast mask {int(masks[i]):#x} names CTA rank {r} of a "
                                          f"cluster of {len(ctas)}", rule="interpret.multicast")
                targets = [(ctas[r], own_off) for r in ranks]
                bar_targets = [(ctas[r], bar_off) for r in ranks]
            for (cta, off), (bcta, boff) in zip(targets, bar_targets):
                if off % _swizzle_align(spec):
                    raise MemoryFault(f"{what}: shared destination {off:#x} is not {_swizzle_align(spec)}-byte "
                                      f"aligned (a {spec.swizzle} box)", rule="interpret.misaligned")
                if keep is None:
                    cta.smem[off:off + data.size] = data
                else:
                    window = cta.smem[off:off + data.size]
                    window[keep] = data[keep]
                _barrier(bcta, boff, what).complete_tx(nbytes, launch)
    return run


def tensor_store(op):
    reduce_op = getattr(op, "op", None)
    if op.mode != "tile":
        raise NotInterpretable(f"{op.what}: mode {op.mode!r} is not modelled", rule="interpret.not-interpretable")
    src, tmap = address(op.src), reader(op.dst)
    coords = [reader(c, ALL_TYPES["s32"]) for c in op.coords]
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        cs = _lane_values(w, m, coords)
        ss, ts = (np.broadcast_to(r(w), (WARP,)) for r in (src, tmap))
        for i in np.flatnonzero(m).tolist():
            spec = tensor_map(w, int(ts[i]), what)
            c = tuple(_signed32(int(x[i])) for x in cs)
            nbytes = reference.smem_layout(spec)[0]
            cta, off = launch.shared_target(w, "shared::cta", int(ss[i]), nbytes, what)
            if off % _swizzle_align(spec):
                raise MemoryFault(f"{what}: shared source {off:#x} is not {_swizzle_align(spec)}-byte aligned "
                                  f"(a {spec.swizzle} box)", rule="interpret.misaligned")
            smem = cta.smem[off:off + nbytes]
            sub, c2, buf, lo, hi = _window(spec, c, launch, what)
            try:
                if reduce_op is None:
                    new = reference.store_box(sub, buf[lo:hi], c2, smem)
                else:
                    new = reference.reduce_box(sub, buf[lo:hi], c2, smem, reduce_op)
            except ValueError as e:
                raise MemoryFault(f"{what}: {e}", rule="interpret.tma") from None
            buf[lo:hi] = new
    return run


def bulk_copy(op):
    """cp.async.bulk in every direction: `size` bytes copied at issue; the destination's mbarrier (if any)
    completes the bytes."""
    dst, src, size = address(op.dst), address(op.src), reader(op.size, u32)
    bar = address(op.mbar) if getattr(op, "mbar", None) is not None else None
    mc = reader(op.multicast, ALL_TYPES["u16"]) if getattr(op, "multicast", None) is not None else None
    dspace, sspace = op.dst_space, op.src_space
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        ds, ss, ns = (np.broadcast_to(r(w), (WARP,)) for r in (dst, src, size))
        bs = np.broadcast_to(bar(w), (WARP,)) if bar is not None else None
        for i in np.flatnonzero(m).tolist():
            n = int(ns[i])
            buf, off = _bytes_at(launch, w, sspace, int(ss[i]), n, what)
            data = buf[off:off + n].copy()
            if dspace == "global":
                dbuf, doff = launch.heap.buffer(int(ds[i]), n, what)
                dbuf[doff:doff + n] = data
                continue
            cta, doff = launch.shared_target(w, dspace, int(ds[i]), n, what)
            bcta, boff = launch.shared_target(w, dspace, int(bs[i]), 8, what)
            targets = [(cta, bcta)]
            if mc is not None:
                ctas = w.cta.cluster.ctas
                mask = int(np.broadcast_to(mc(w), (WARP,))[i])
                targets = [(ctas[r], ctas[r]) for r in range(len(ctas)) if mask >> r & 1]
            for tcta, tb in targets:
                tcta.smem[doff:doff + n] = data
                _barrier(tb, boff, what).complete_tx(n, launch)
    return run


def _bytes_at(launch, w, space: str, addr: int, n: int, what: str):
    """(buffer, offset) of the n bytes at `addr` in global memory or a (peer) CTA's shared memory."""
    if space == "global":
        return launch.heap.buffer(addr, n, what)
    cta, off = launch.shared_target(w, space, addr, n, what)
    return cta.smem, off


def bulk_reduce(op):
    """cp.reduce.async.bulk: `size` bytes of shared memory reduced element by element into global memory or a
    (peer) CTA's shared memory, at issue (the latter completes the bytes on its mbarrier)."""
    dst, src, size = address(op.dst), address(op.src), reader(op.size, u32)
    bar = address(op.mbar) if getattr(op, "mbar", None) is not None else None
    t, kind, dspace = op.type, op.op, op.dst_space
    eb = t.nbytes
    dt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[eb]
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        ds, ss, ns = (np.broadcast_to(r(w), (WARP,)) for r in (dst, src, size))
        bs = np.broadcast_to(bar(w), (WARP,)) if bar is not None else None
        for i in np.flatnonzero(m).tolist():
            n = int(ns[i])
            cta, soff = launch.shared_target(w, "shared::cta", int(ss[i]), n, what)
            new = cta.smem[soff:soff + n].view(dt).astype(U64)
            dbuf, doff = _bytes_at(launch, w, dspace, int(ds[i]), n, what)
            if doff % eb:
                raise MemoryFault(f"{what}: destination offset {doff:#x} is not {eb}-byte aligned",
                                  rule="interpret.misaligned")
            cells = dbuf[doff:doff + n].view(dt)
            cells[:] = combine(kind, t, cells.astype(U64), new).astype(dt)
            if bs is not None:
                bcta, boff = launch.shared_target(w, dspace, int(bs[i]), 8, what)
                _barrier(bcta, boff, what).complete_tx(n, launch)
    return run


def st_async(op):
    """st.async / red.async: a store or reduction into a (peer) CTA's shared memory that completes its bytes on
    the mbarrier there, at issue."""
    where, bar = address(op.addr), address(op.mbar)
    t = op.type
    eb = t.nbytes
    values = [reader(v, t) for v in (op.value if isinstance(op.value, (tuple, list)) else (op.value,))]
    kind = getattr(op, "op", None)
    dt = {4: np.uint32, 8: np.uint64}[eb]
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        addrs, bars = np.broadcast_to(where(w), (WARP,)), np.broadcast_to(bar(w), (WARP,))
        vals = [np.broadcast_to(v(w), (WARP,)) for v in values]
        n = eb * len(vals)
        for i in np.flatnonzero(m).tolist():
            cta, off = launch.shared_target(w, "shared::cluster", int(addrs[i]), n, what)
            if off % n:
                raise MemoryFault(f"{what}: shared::cluster address {int(addrs[i]):#x} is not {n}-byte aligned",
                                  rule="interpret.misaligned")
            cells = cta.smem[off:off + n].view(dt)
            new = np.array([v[i] for v in vals], U64)
            cells[:] = (new if kind is None else combine(kind, t, cells.astype(U64), new)).astype(dt)
            bcta, boff = launch.shared_target(w, "shared::cluster", int(bars[i]), 8, what)
            _barrier(bcta, boff, what).complete_tx(n, launch)
    return run


def commit_group(op):
    return lambda w, m: ADVANCE          # bulk copies complete at issue: every group is complete when committed


# ----------------------------------------------------------------------------------- warp collectives


def _mask_lanes(w, read, m):
    """The member mask's lanes (bool lanes) as the active lanes see it."""
    mask = int(np.broadcast_to(read(w), (WARP,))[m][0])
    return (mask >> np.arange(WARP)) & 1 == 1


def elect(op: warp.ElectSync):
    mask = reader(op.mask, u32)
    wp, wl = writer(op.pred), writer(op.lane)

    def run(w, m):
        members = _mask_lanes(w, mask, m) & m
        idx = np.flatnonzero(members)
        leader = np.zeros(WARP, bool)
        if idx.size:
            leader[idx[0]] = True
        wp(w, m, leader)
        wl(w, m, U64(idx[0] if idx.size else 0))
    return run


def shfl(op: warp.ShflSync):
    a, b, c = reader(op.a, op.type), reader(op.b, u32), reader(op.c, u32)
    wd, wp = writer(op.d), writer(op.p)
    mode = op.mode
    lane = np.arange(WARP)

    def run(w, m):
        bv = np.broadcast_to(b(w), (WARP,)).astype(np.int64) & 31
        cv = np.broadcast_to(c(w), (WARP,)).astype(np.int64)
        clamp, segmask = cv & 31, (cv >> 8) & 31
        max_lane = (lane & segmask) | (clamp & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = min_lane | (bv & ~segmask)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = np.broadcast_to(a(w), (WARP,))
        wd(w, m, src[j])
        wp(w, m, ok)
    return run


def vote(op):
    a = reader(op.a, pred)
    wd = writer(op.d)
    mode = op.mode
    bits = (U64(1) << np.arange(WARP, dtype=U64))

    def run(w, m):
        v = np.broadcast_to(a(w), (WARP,)) & m
        if mode == "all":
            r = bool(v[m].all())
        elif mode == "any":
            r = bool(v.any())
        elif mode == "uni":
            r = bool(v[m].all() or not v[m].any())
        else:
            r = U64(int(bits[v].sum()))
        wd(w, m, r)
    return run


def redux(op: warp.ReduxSync):
    a = reader(op.a, op.type)
    wd = writer(op.d)
    t, kind = op.type, op.op
    if t.kind == "f":
        raise NotInterpretable(f"{op.what}: redux.sync on .f32 is not modelled", rule="interpret.not-interpretable")

    def run(w, m):
        v = alu.decode(np.broadcast_to(a(w), (WARP,)), t)[m]
        if kind == "add":
            r = int(v.astype(np.int64).sum()) if t.kind == "s" else int(v.sum())
        elif kind == "min":
            r = int(v.min())
        elif kind == "max":
            r = int(v.max())
        else:
            r = int({"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind].reduce(v))
        wd(w, m, U64(r & 0xFFFFFFFF))
    return run


def activemask(op):
    wd = writer(op.d)
    bits = (U64(1) << np.arange(WARP, dtype=U64))

    def run(w, m):
        wd(w, m, U64(int(bits[m].sum())))
    return run


def ldmatrix(op: warp.Ldmatrix):
    space = _space_of(op.space)
    where = address(op.addr)
    writes = [writer(d) for d in op.d]
    num, trans = op.num, op.trans
    what = op.what

    def run(w, m):
        rows = load_bytes(w, space, where, ALL32 & w.alive, 16, what, align=16)      # lane l: row l%8 of matrix l//8
        for i, write in enumerate(writes):
            mat = rows[8 * i:8 * i + 8].view(np.uint16).reshape(8, 8)
            if trans:
                mat = mat.T
            lane = np.arange(WARP)
            r, c = lane // 4, 2 * (lane % 4)
            lo, hi = mat[r, c].astype(U64), mat[r, c + 1].astype(U64)
            write(w, m, lo | (hi << U64(16)))
    return run


def stmatrix(op: warp.Stmatrix):
    space = _space_of(op.space)
    where = address(op.addr)
    reads = [reader(r) for r in op.regs]
    trans = op.trans
    what = op.what

    def run(w, m):
        lane = np.arange(WARP)
        r, c = lane // 4, 2 * (lane % 4)
        rows = np.zeros((WARP, 8), np.uint16)
        for i, read in enumerate(reads):
            v = np.broadcast_to(read(w), (WARP,))
            mat = np.zeros((8, 8), np.uint16)
            mat[r, c] = (v & U64(0xFFFF)).astype(np.uint16)
            mat[r, c + 1] = (v >> U64(16)).astype(np.uint16)
            if trans:
                mat = mat.T
            rows[8 * i:8 * i + 8] = mat
        sel = np.zeros(WARP, bool)
        sel[:8 * len(reads)] = True
        store_bytes(w, space, where, sel & w.alive, rows.view(np.uint8).reshape(WARP, 16), what, align=16)
    return run


# ---------------------------------------------------------------------------------------- tensor cores


def _descriptor(v):
    """A reader of a matrix descriptor operand: a descriptor value (its .reg), a 64-bit register or an immediate."""
    return reader(getattr(v, "reg", v), u64)


def mma_async(op: wg.WgmmaMmaAsync):
    """wgmma.mma_async: the four warps of the warpgroup meet here (it is .sync.aligned); the last to arrive runs
    ptxdsl.reference.wgmma on the 128 threads' accumulators (and A registers) and the descriptors' shared memory,
    writes the new accumulators into every warp and releases the others. The result is complete at once, so
    wgmma.commit_group / wait_group never wait (as for bulk copies)."""
    acc = reg_list(op.d)
    rs = wg._from_registers(op.a)
    a_regs = reg_list(op.a) if rs else ()
    a_desc = None if rs else _descriptor(op.a)
    b_desc = _descriptor(op.b)
    scale_d = reader(op.scale_d, pred)
    n, dtype, atype, btype = op.n, op.dtype, op.atype, op.btype
    acc_view = {"f32": np.float32, "s32": np.int32, "f16": np.uint32}[dtype]

    def compute(warps, w, m):
        first = int(np.flatnonzero(m)[0])

        def uniform(read):
            return int(np.broadcast_to(read(w), (WARP,))[first])
        d = np.concatenate([np.stack([v.regs[r] for r in acc], axis=1) for v in warps]).astype(np.uint32)
        if rs:
            a = np.concatenate([np.stack([v.regs[r] for r in a_regs], axis=1) for v in warps]).astype(np.uint32)
        else:
            a = uniform(a_desc)
        keep = bool(np.broadcast_to(scale_d(w), (WARP,))[first])
        try:
            out = reference.wgmma.wgmma(
                w.cta.smem, d.view(acc_view), a, uniform(b_desc), n=n, dtype=dtype, atype=atype, btype=btype,
                trans_a=bool(_imm(op.imm_trans_a, 0)), trans_b=bool(_imm(op.imm_trans_b, 0)), scale_d=keep,
                scale_a=_imm(op.imm_scale_a, 1), scale_b=_imm(op.imm_scale_b, 1), satfinite=bool(op.satfinite),
                smem_base=0)
        except PtxdslError as e:
            raise MemoryFault(f"{op.what}: {e.message}", rule="interpret.wgmma") from None
        bits = np.ascontiguousarray(out).view(np.uint32).astype(U64).reshape(len(warps), WARP, len(acc))
        for v, words in zip(warps, bits):
            for i, r in enumerate(acc):
                v.regs[r][:] = words[:, i]
    return warpgroup(compute, "wgmma.mma_async")


def _imm(v, neutral: int) -> int:
    """An immediate operand's value (left out, or not applying to the form: `neutral`)."""
    v = getattr(v, "value", v)
    return neutral if v is None else int(v)


def warpgroup(compute, what):
    """A step the four warps of a warpgroup execute together: each blocks until the last arrives, which runs
    `compute(warps, warp, lanes)` and releases them."""
    def run(w, m):
        cta = w.cta
        group = w.index // 4
        warps = cta.warps[4 * group:4 * group + 4]
        if len(warps) < 4:
            raise InterpretError(f"{what} is a warpgroup instruction: warp {w.index} has no whole warpgroup "
                                 f"(the block has {len(cta.warps)} warps)", rule="interpret.warpgroup")
        key = (group, id(run))
        meet = cta.meetings.setdefault(key, {"round": 0, "arrived": set()})
        meet["arrived"].add(w.index)
        if len(meet["arrived"]) < 4:
            w.block(m, WarpgroupWait(cta, meet, what, w.where))
            return HELD
        compute(warps, w, m)
        meet["arrived"] = set()
        meet["round"] += 1
        cta.launch.progress += 1
        return ADVANCE
    return run


# -------------------------------------------------------------------------------------------- clusters


def cluster_arrive(op):
    def run(w, m):
        cl = w.cta.cluster
        w.cluster_phase[m] = cl.phase
        cl.arrive(int(m.sum()))
    return run


def cluster_wait(op):
    def run(w, m):
        cl = w.cta.cluster
        phase = int(w.cluster_phase[m].max())
        if cl.phase > phase:
            return ADVANCE
        w.block(m, ClusterWait(cl, phase, w.where))
        return HELD
    return run


def mapa(op: cluster.Mapa):
    read, rank = reader(op.addr.base if isinstance(op.addr, Addr) else op.addr), reader(op.rank, u32)
    off = op.addr.offset if isinstance(op.addr, Addr) else 0
    write = writer(op.d)
    generic = op.space is None

    def run(w, m):
        a = np.broadcast_to(read(w), (WARP,)).astype(U64) + U64(off)
        r = np.broadcast_to(rank(w), (WARP,)).astype(U64)
        if generic:
            local = (a - U64(SHARED_WINDOW)) & U64((1 << RANK_SHIFT) - 1)
            write(w, m, U64(SHARED_WINDOW) + ((r + U64(1)) << U64(RANK_SHIFT)) + local)
        else:
            local = a & U64((1 << RANK_SHIFT) - 1)
            write(w, m, ((r + U64(1)) << U64(RANK_SHIFT)) | local)
    return run


def getctarank(op):
    read = reader(op.addr.base if isinstance(op.addr, Addr) else op.addr)
    write = writer(op.d)
    generic = op.space is None

    def run(w, m):
        a = np.broadcast_to(read(w), (WARP,)).astype(U64)
        if generic:
            a = a - U64(SHARED_WINDOW)
        hi = (a >> U64(RANK_SHIFT)).astype(np.int64)
        write(w, m, np.where(hi == 0, w.cta.rank, hi - 1).astype(U64))
    return run


# ---------------------------------------------------------------------------------------- tensor maps


def tensormap_replace(op):
    where = address(op.addr)
    space = _space_of(op.space)
    value = reader(op.new_val)
    field = op.field
    ord_ = getattr(op, "ord", None)
    what = op.what
    names3 = {k: {v: n for n, v in names.items()} for k, names in tm.FIELD3_NAMES.items()}

    def edit(spec, v):
        if field == "global_address":
            return replace(spec, global_address=v)
        if field in ("box_dim", "global_dim", "element_stride", "global_stride"):
            attr = {"box_dim": "box", "global_dim": "dims", "element_stride": "element_strides",
                    "global_stride": "strides"}[field]
            cur = list(getattr(spec, attr) or (1,) * spec.rank)
            cur[int(ord_.value) if hasattr(ord_, "value") else int(ord_)] = v
            return replace(spec, **{attr: tuple(cur)})
        if field in ("elemtype", "swizzle_mode", "fill_mode", "interleave_layout"):
            attr = {"elemtype": "dtype", "swizzle_mode": "swizzle", "fill_mode": "oob_fill",
                    "interleave_layout": "interleave"}[field]
            return replace(spec, **{attr: names3[field][v]})
        raise NotInterpretable(f"{what}: replacing .{field} is not modelled", rule="interpret.not-interpretable")

    def run(w, m):
        launch = w.cta.launch
        vals = np.broadcast_to(value(w), (WARP,))
        for buf, lanes, offs in locate(w, space, where(w), m, 128, what, align=64):
            for i, off in zip(np.flatnonzero(lanes).tolist(), offs.tolist()):
                spec = launch.heap.tmaps[tmap_handle(buf[off:off + 128], what)]
                buf[off:off + 128] = tmap_bytes(launch.heap.tmap_handle(edit(spec, int(vals[i]))))
    return run


def tensormap_copy(op):
    dst, src = address(op.dst), address(op.src)
    what = op.what

    def run(w, m):
        launch = w.cta.launch
        d, s = np.broadcast_to(dst(w), (WARP,)), np.broadcast_to(src(w), (WARP,))
        i = int(np.flatnonzero(m)[0])
        cta, off = launch.shared_target(w, "shared::cta", int(s[i]), 128, what)
        buf, doff = launch.heap.buffer(int(d[i]), 128, what)
        buf[doff:doff + 128] = cta.smem[off:off + 128]
    return run


# Ops that change nothing another warp can see: a run of only these in every warp is a livelock (a spin).
QUIET = (core._Arith, core.Mad, core.Fma, core.Setp, core.Selp, core.Mov, core.Cvt, core.CvtPack, core.Cvta, core.Ld,
         core.Membar, mb.MbarrierTestWait, mb.MbarrierTestWaitParity, mb.MbarrierTryWait, mb.MbarrierTryWaitParity,
         mb.MbarrierPendingCount, control.Nanosleep, warp.ElectSync, warp.ShflSync, warp.VoteSync,
         warp.VoteSyncBallot, warp.ReduxSync, warp.Activemask, cluster.Mapa, cluster.Getctarank, fence.Fence,
         fence.FenceProxyAsync, fence.FenceProxyTensormapAcquire)

# Ops whose whole effect is one Compute: ptxdsl.alu runs them.
COMPUTES = (core._Arith, core.Mad, core.Fma, core.Setp, core.Selp)

# Ops whose step may move the counters or block or end lanes: the scheduler syncs the counters before them.
CONTROL = (core.BarSync, core.Ret, core.Exit, core.Trap, cluster.BarrierClusterWait, wg.WgmmaMmaAsync)

HANDLERS = {
    core.Mov: mov, core.Cvt: cvt, core.CvtPack: cvt_pack, core.Cvta: cvta, core.Ld: ld, core.St: st,
    core.Atom: atom, core.Red: atom, core.BarSync: bar_sync, core.Ret: exit_, core.Exit: exit_, core.Trap: trap,
    core.Membar: nop,
    mb.MbarrierInit: mbarrier_init, mb.MbarrierInval: mbarrier_inval, mb.MbarrierArrive: mbarrier_arrive,
    mb.MbarrierArriveExpectTx: mbarrier_arrive, mb.MbarrierArriveNoComplete: mbarrier_arrive,
    mb.MbarrierArriveDrop: mbarrier_arrive, mb.MbarrierArriveDropExpectTx: mbarrier_arrive,
    mb.MbarrierArriveDropNoComplete: mbarrier_arrive, mb.MbarrierExpectTx: mbarrier_arrive,
    mb.MbarrierCompleteTx: mbarrier_arrive, mb.MbarrierTestWait: mbarrier_test,
    mb.MbarrierTestWaitParity: mbarrier_test, mb.MbarrierTryWait: mbarrier_test,
    mb.MbarrierTryWaitParity: mbarrier_test, mb.MbarrierPendingCount: pending_count, mb.FenceMbarrierInit: nop,
    bulk.CpAsyncBulkTensorLoad: tensor_load, bulk.CpAsyncBulkTensorStore: tensor_store,
    bulk.CpReduceAsyncBulkTensor: tensor_store, bulk.CpAsyncBulkPrefetchTensor: nop,
    bulk.CpAsyncBulkPrefetch: nop, bulk.CpAsyncBulkCommitGroup: commit_group, bulk.CpAsyncBulkWaitGroup: nop,
    bulk.CpAsyncBulkSharedGlobal: bulk_copy, bulk.CpAsyncBulkClusterGlobal: bulk_copy,
    bulk.CpAsyncBulkClusterShared: bulk_copy, bulk.CpAsyncBulkGlobalShared: bulk_copy,
    bulk.CpReduceAsyncBulkGlobal: bulk_reduce, bulk.CpReduceAsyncBulkCluster: bulk_reduce,
    cluster.StAsync: st_async, cluster.RedAsync: st_async, core.Bra: nop,
    warp.ElectSync: elect, warp.BarWarpSync: nop, warp.ShflSync: shfl, warp.VoteSync: vote,
    warp.VoteSyncBallot: vote, warp.ReduxSync: redux, warp.Activemask: activemask, warp.Ldmatrix: ldmatrix,
    warp.Stmatrix: stmatrix,
    cluster.BarrierClusterArrive: cluster_arrive, cluster.BarrierClusterWait: cluster_wait, cluster.Mapa: mapa,
    cluster.Getctarank: getctarank,
    fence.FenceProxyAsync: nop, fence.FenceProxyAlias: nop, fence.FenceProxyTensormapRelease: nop,
    fence.FenceProxyTensormapAcquire: nop, fence.Fence: nop, fence.FenceSyncRestrictRelease: nop,
    fence.FenceSyncRestrictAcquire: nop,
    control.GriddepcontrolLaunchDependents: nop, control.GriddepcontrolWait: nop, control.Nanosleep: nop,
    control.SetmaxnregInc: nop, control.SetmaxnregDec: nop,
    policy.CreatepolicyFractional: opaque_zero, policy.CreatepolicyRange: opaque_zero,
    policy.CreatepolicyCvt: opaque_zero,
    wg.WgmmaMmaAsync: mma_async, wg.WgmmaFence: nop, wg.WgmmaCommitGroup: commit_group, wg.WgmmaWaitGroup: nop,
    core.CvtUnpack: cvt_unpack,
    tm.TensormapCpFenceproxy: tensormap_copy, tm.PrefetchTensormap: nop,
    **{cls: tensormap_replace for cls in tm.REPLACE.values()},
}
