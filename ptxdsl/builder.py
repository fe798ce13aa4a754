"""KernelBuilder: write a kernel in Python, one method per PTX instruction.

Method names are PTX mnemonics with dots as underscores (`mbarrier_arrive_expect_tx`,
`cp_async_bulk_tensor`); qualifiers are keyword arguments spelled as in PTX (`sem="release"`,
`scope="cta"`). Each method validates, builds the op, inserts it with the caller's file:line and
returns its result register. Structure is context managers: `with k.if_(p):`, `with k.else_():`,
`with k.loop(0, n) as i:`, `with k.elect_one():`.

    with ptxdsl.kernel("copy", reqntid=(128,)) as k:
        src = k.param_tensormap("src")
        ...
    print(k.ptx())
"""
from __future__ import annotations

import functools
import re
from contextlib import contextmanager

from . import sreg as _sreg
from .errors import DSLError, PtxdslError, SourceLoc
from .ir import (MAX_SHARED_PER_BLOCK, If, Instr, Kernel, Label, LabelStmt, Loop, Module, Param, PredNot, Reg,
                 SharedAlloc, TensorMapRef, WaitLoop, is_pow2, operand_type)
from .isa import bulk, cluster, control, core, fence, mbarrier, policy, tensormap
from .types import ScalarType, b64, pred, scalar_type, u32, u64

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DIRECTIVES = ("reqntid", "maxntid", "minnctapersm", "maxnreg", "reqnctapercluster", "explicitcluster",
              "maxclusterrank")


def _located(fn):
    """Attach the user's file:line to any ptxdsl error raised while building."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except PtxdslError as e:
            raise e.at(self._loc()) from None

    return wrapper


def _binary_method(op: str, doc: str, modes: bool = False):
    """The builder method for binary op `op` (add, sub, ... shr): validate, insert, return d."""
    if modes:
        def method(self, a, b, *, mode=None, type=None, out=None) -> Reg:
            return self._binary(op, a, b, type, out, mode)
    else:
        def method(self, a, b, *, type=None, out=None) -> Reg:
            return self._binary(op, a, b, type, out)
    method.__name__ = method.__qualname__ = op + "_" if op in ("and", "or") else op
    method.__doc__ = doc
    return _located(method)


def _unary_method(op: str, doc: str):
    """The builder method for unary op `op` (not, neg, abs)."""
    def method(self, a, *, type=None, out=None) -> Reg:
        return self._unary(op, a, type, out)
    method.__name__ = method.__qualname__ = op + "_" if op == "not" else op
    method.__doc__ = doc
    return _located(method)


class KernelBuilder:
    """Builds one Kernel. Use as a context manager; leaving the block verifies the kernel."""

    def __init__(self, name: str, *, arch: str | None = None, ptx=None, debug: bool = False, loc=None,
                 **directives):
        self._loc_override: SourceLoc | None = None
        self._allow: frozenset = frozenset()
        loc = loc or SourceLoc.caller()
        if not _IDENT.match(name or ""):
            raise DSLError(f"kernel name {name!r} is not a PTX identifier", loc)
        self.kernel = Kernel(name=name, arch=arch, ptx=ptx, debug=debug, loc=loc)
        try:
            self.kernel.directives = _check_directives(directives)
        except PtxdslError as e:
            raise e.at(loc) from None
        self._blocks: list[list] = [self.kernel.body]
        self._guard = None
        self._names: set[str] = set()
        self._last_if: If | None = None
        self._done = False
        if debug:
            self.param_ptr("__ptxdsl_debug")

    # ----------------------------------------------------------------------------- plumbing

    def _loc(self) -> SourceLoc:
        return self._loc_override or SourceLoc.caller()

    @contextmanager
    def at(self, loc: SourceLoc):
        """Attribute the ops built inside the block to `loc` (the text front end uses this)."""
        prev, self._loc_override = self._loc_override, loc
        try:
            yield
        finally:
            self._loc_override = prev

    def allow(self, *rules: str):
        """`with k.allow("expect-tx-mismatch"):` the verifier drops those rules' findings at the
        instructions built inside the block (a deliberate exception, e.g. a planted bug)."""
        from .verify import RULES

        for r in rules:
            if r not in RULES:
                raise DSLError(f"allow({r!r}): no such verifier rule; expected one of {', '.join(RULES)}", self._loc())
        return self._allowing(frozenset(rules))

    @contextmanager
    def _allowing(self, rules: frozenset):
        prev, self._allow = self._allow, self._allow | rules
        try:
            yield
        finally:
            self._allow = prev

    def _append(self, stmt):
        if self._allow and isinstance(stmt, (Instr, WaitLoop)):
            stmt.allow = self._allow
        self._blocks[-1].append(stmt)
        self._last_if = stmt if isinstance(stmt, If) else None

    def _insert(self, op):
        self._append(Instr(op, self._guard, self._loc()))
        return op

    def _reg(self, t: ScalarType, out=None, space=None) -> Reg:
        if out is not None:
            if not isinstance(out, Reg):
                raise DSLError(f"out={out!r}: expected a register")
            return out
        return self.kernel.new_reg(t, space)

    def _name(self, name: str) -> str:
        if not _IDENT.match(name or "") or name.startswith("__ptxdsl") and name != "__ptxdsl_debug":
            raise DSLError(f"name {name!r} is not a PTX identifier")
        if name in self._names:
            raise DSLError(f"name {name!r} is already used in kernel {self.kernel.name!r}")
        self._names.add(name)
        return name

    def __enter__(self) -> "KernelBuilder":
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.finish()
        return False

    def finish(self) -> Kernel:
        """Close the kernel and run the whole-kernel checks (called by `with`'s exit)."""
        if not self._done:
            from .verify import verify_kernel

            if len(self._blocks) != 1:
                raise DSLError("kernel closed inside an open if_/loop block", self.kernel.loc)
            verify_kernel(self.kernel)
            self._done = True
        return self.kernel

    def ptx(self, **kw) -> str:
        """The PTX text of this kernel alone (see ptxdsl.emit for options)."""
        from .emit import emit

        return emit(self.finish(), **kw).text

    # ------------------------------------------------------------------------- declarations

    @_located
    def reg(self, type) -> Reg:
        """A fresh register of `type` (declared as .pred/.b16/.b32/.b64 by width)."""
        return self.kernel.new_reg(scalar_type(type))

    @_located
    def param(self, name: str, type) -> Reg:
        """A scalar kernel parameter (.param .type name), loaded into a register with ld.param."""
        t = scalar_type(type)
        if t is pred:
            raise DSLError(f"param {name!r}: .pred parameters do not exist; use a u32")
        p = Param(self._name(name), "scalar", t, loc=self._loc())
        self.kernel.params.append(p)
        p.value = self._reg(t)
        self._insert(core.Ld("param", t, (p.value,), p))
        return p.value

    @_located
    def param_ptr(self, name: str) -> Reg:
        """A global pointer parameter (.param .u64): ld.param.u64 then cvta.to.global.u64."""
        p = Param(self._name(name), "ptr", u64, loc=self._loc())
        self.kernel.params.append(p)
        raw = self._reg(u64)
        self._insert(core.Ld("param", u64, (raw,), p))
        p.value = self._reg(u64, space="global")
        self._insert(core.Cvta("global", p.value, raw, to=True))
        return p.value

    @_located
    def param_tensormap(self, name: str, spec=None) -> Param:
        """A CUtensorMap passed by value (.param .align 64 .b8 name[128]); its generic address comes
        from mov.b64 + cvta.param.u64. `spec` (a TensorMapSpec) lets checks see its dtype and box."""
        p = Param(self._name(name), "tensormap", u64, loc=self._loc())
        p.tmap = spec
        self.kernel.params.append(p)
        raw = self._reg(u64)
        self._insert(core.Mov(b64, raw, p))
        p.value = self._reg(u64)
        self._insert(core.Cvta("param", p.value, raw))
        return p

    @_located
    def shared(self, name: str, nbytes: int, *, align: int = 16, dynamic: bool = False) -> SharedAlloc:
        """A shared-memory buffer. Static: `.shared .align A .b8 name[N]`; dynamic=True places it in the
        kernel's `.extern .shared` window (the launch sizes the window to fit every dynamic buffer)."""
        return self._shared(name, nbytes, align, dynamic, "buffer")

    @_located
    def mbarrier(self, name: str, n: int = 1, *, dynamic: bool = False) -> SharedAlloc:
        """Shared storage for `n` mbarriers (8 bytes each, 8-byte aligned). Index with `.at(8 * i)`."""
        if not isinstance(n, int) or n < 1:
            raise DSLError(f"mbarrier {name!r}: n={n!r}, expected a positive count")
        return self._shared(name, 8 * n, 8, dynamic, "mbarrier")

    def _shared(self, name, nbytes, align, dynamic, role) -> SharedAlloc:
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise DSLError(f"shared {name!r}: nbytes={nbytes!r}, expected a positive integer")
        if not is_pow2(align) or align > 1024:
            raise DSLError(f"shared {name!r}: align={align!r}, expected a power of two up to 1024")
        if nbytes > MAX_SHARED_PER_BLOCK:
            raise DSLError(f"shared {name!r}: nbytes={nbytes} is over the {MAX_SHARED_PER_BLOCK}-byte "
                           f"per-block shared-memory limit of sm_90")
        a = SharedAlloc(self._name(name), nbytes, align, dynamic, role=role, loc=self._loc())
        if dynamic:
            end = self.kernel.dynamic_shared_bytes
            a.offset = -(-end // align) * align
            a.base = self.kernel.dynamic_base
        self.kernel.shared.append(a)
        return a

    # ------------------------------------------------------------------------------- values

    @_located
    def mov(self, src, type=None, *, out=None) -> Reg:
        """mov.type d, src (src: register, number, special register, or a buffer/param whose address to take)."""
        if isinstance(src, SharedAlloc):
            t = scalar_type(type) if type else u32
            d = self._reg(t, out, space="shared::cta")
        else:
            t = scalar_type(type) if type else (operand_type(src) or _no_type("mov"))
            d = self._reg(t, out)
        self._insert(core.Mov(t, d, src))
        return d

    def _binary(self, op, a, b, type, out, mode=None):
        t = _infer(op, a, b, type)
        res_t = t
        if mode == "wide":
            res_t = core.wide_type(t)
        space = a.space if isinstance(a, Reg) and op in ("add", "sub") else None
        d = self._reg(res_t, out, space=space)
        self._insert(core.Binary(op, t, d, a, b, mode))
        return d

    # Binary arithmetic and logic: one factory, one line per PTX mnemonic.
    add = _binary_method("add", "add.type d, a, b.")
    sub = _binary_method("sub", "sub.type d, a, b.")
    mul = _binary_method("mul", "mul{.lo,.hi,.wide}.type d, a, b (integers default to .lo).", modes=True)
    div = _binary_method("div", "div.type d, a, b (f32 defaults to .rn).", modes=True)
    rem = _binary_method("rem", "rem.type d, a, b.")
    min = _binary_method("min", "min.type d, a, b.")
    max = _binary_method("max", "max.type d, a, b.")
    and_ = _binary_method("and", "and.bN d, a, b (and.pred on predicates).")
    or_ = _binary_method("or", "or.bN d, a, b.")
    xor = _binary_method("xor", "xor.bN d, a, b.")
    shl = _binary_method("shl", "shl.bN d, a, b.")
    shr = _binary_method("shr", "shr.{u,s}N d, a, b (arithmetic for signed types).")

    def _unary(self, op, a, type, out):
        t = _infer(op, a, None, type)
        d = self._reg(u32 if op in ("popc", "clz") else t, out)
        self._insert(core.Unary(op, t, d, a))
        return d

    # Unary ops: the same factory shape.
    not_ = _unary_method("not", "not.bN d, a (not.pred on predicates).")
    neg = _unary_method("neg", "neg.type d, a.")
    abs = _unary_method("abs", "abs.type d, a.")

    @_located
    def mad(self, a, b, c, *, mode=None, type=None, out=None) -> Reg:
        """mad{.lo,.hi,.wide}.type d, a, b, c (fma.rn for floats)."""
        t = _infer("mad", a, b, type)
        d = self._reg(core.wide_type(t) if mode == "wide" else t, out)
        self._insert(core.Mad(t, d, a, b, c, mode))
        return d

    @_located
    def setp(self, cmp: str, a, b, *, type=None, out=None) -> Reg:
        """setp.cmp.type p, a, b -> a .pred register."""
        t = _infer("setp", a, b, type)
        d = self._reg(pred, out)
        self._insert(core.Setp(cmp, t, d, a, b))
        return d

    @_located
    def selp(self, a, b, cond, *, type=None, out=None) -> Reg:
        """selp.type d, a, b, cond (d = cond ? a : b)."""
        t = _infer("selp", a, b, type)
        d = self._reg(t, out)
        self._insert(core.Selp(t, d, a, b, cond))
        return d

    @_located
    def cvt(self, type, src, *, rnd=None, sat=False, stype=None, out=None) -> Reg:
        """cvt{.rnd}{.sat}.dtype.stype d, src (rounding filled in where PTX requires one)."""
        dt = scalar_type(type)
        st = scalar_type(stype) if stype else (operand_type(src) or _no_type("cvt"))
        d = self._reg(dt, out)
        self._insert(core.Cvt(dt, st, d, src, rnd, sat))
        return d

    @_located
    def cvta(self, src, space: str, *, to: bool = False, out=None) -> Reg:
        """cvta{.to}.space.u64 d, src: a space address to generic (or generic to space with to=True)."""
        d = self._reg(u64, out, space=space if to else None)
        self._insert(core.Cvta(space, d, src, to))
        return d

    @_located
    def ld(self, type, addr, *, space: str = "global", vec: int = 1, out=None):
        """ld.space{.vN}.type d, [addr] -> a register (or a tuple of `vec` registers)."""
        t = scalar_type(type)
        if out is not None:
            dst = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        else:
            dst = tuple(self.kernel.new_reg(t) for _ in range(vec))
        self._insert(core.Ld(space, t, dst, addr))
        return dst[0] if len(dst) == 1 else dst

    @_located
    def st(self, type, addr, value, *, space: str = "global") -> None:
        """st.space{.vN}.type [addr], value (a tuple of 2 or 4 values stores a vector)."""
        src = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        self._insert(core.St(space, scalar_type(type), addr, src))

    @_located
    def atom_add(self, type, addr, value, *, space: str = "global", out=None) -> Reg:
        """atom.space.add.type d, [addr], value."""
        t = scalar_type(type)
        d = self._reg(t, out)
        self._insert(core.AtomAdd(space, t, d, addr, value))
        return d

    # ------------------------------------------------------------------------ control flow

    @_located
    def bar_sync(self, barrier: int = 0, count: int | None = None) -> None:
        """bar.sync id{, count}."""
        self._insert(core.BarSync(barrier, count))

    @_located
    def ret(self) -> None:
        """ret."""
        self._insert(core.Ret())

    @_located
    def exit(self) -> None:
        """exit."""
        self._insert(core.Exit())

    @_located
    def trap(self) -> None:
        """trap."""
        self._insert(core.Trap())

    @_located
    def membar(self, level: str = "gl") -> None:
        """membar.level."""
        self._insert(core.Membar(level))

    @_located
    def label(self, name: str) -> Label:
        """A label at this point (for hand-written branches; prefer if_/loop)."""
        if name.startswith("$L__"):
            raise DSLError(f"label {name!r}: the $L__ prefix is reserved for generated labels")
        lab = Label(self._name(name))
        self._append(LabelStmt(lab, self._loc()))
        return lab

    @_located
    def bra(self, target: Label, *, uni: bool = False) -> None:
        """bra{.uni} label (predicated with `with k.guard(p):`)."""
        if not isinstance(target, Label):
            raise DSLError(f"bra target={target!r}: expected a Label from k.label()")
        self._insert(core.Bra(target, uni))

    @contextmanager
    def guard(self, p):
        """Predicate every instruction built inside the block: `@p instr` (or `@!p` with ~p)."""
        if not (isinstance(p, PredNot) or (isinstance(p, Reg) and p.type is pred)):
            raise DSLError(f"guard({p!r}): expected a .pred register or its negation", self._loc())
        prev, self._guard = self._guard, p
        try:
            yield p
        finally:
            self._guard = prev

    @contextmanager
    def if_(self, cond):
        """`with k.if_(p):` runs the block where p is true (a predicated branch around it)."""
        node = self._open_if(cond, "if")
        self._blocks.append(node.then)
        try:
            yield node
        finally:
            self._blocks.pop()
            self._last_if = node

    def _open_if(self, cond, kind) -> If:
        if not (isinstance(cond, PredNot) or (isinstance(cond, Reg) and cond.type is pred)):
            raise DSLError(f"if_({cond!r}): expected a .pred register (from setp) or its negation", self._loc())
        if self._guard is not None:
            raise DSLError("if_ inside a guard() block: put the guard inside the if_ instead", self._loc())
        node = If(cond, loc=self._loc(), kind=kind)
        self._append(node)
        return node

    @contextmanager
    def else_(self):
        """`with k.else_():` directly after an `if_` block: runs where its predicate is false."""
        node = self._last_if
        if node is None or node.orelse is not None:
            raise DSLError("else_() must directly follow an if_() block", self._loc())
        node.orelse = []
        self._blocks.append(node.orelse)
        try:
            yield node
        finally:
            self._blocks.pop()
            self._last_if = None

    @contextmanager
    def loop(self, start, stop, step: int = 1, *, type=u32):
        """`with k.loop(start, stop, step) as i:` a counted loop over register i (stop exclusive)."""
        loc = self._loc()
        t = scalar_type(type)
        if not isinstance(step, int) or step == 0:
            raise DSLError(f"loop step={step!r}: expected a non-zero integer constant", loc)
        if self._guard is not None:
            raise DSLError("loop inside a guard() block is not allowed", loc)
        from .isa.base import value
        try:
            start, stop = value("loop start", start, t, sreg=True), value("loop stop", stop, t)
        except PtxdslError as e:
            raise e.at(loc) from None
        node = Loop(self.kernel.new_reg(t), start, stop, step, self.kernel.new_reg(pred), loc=loc)
        self._append(node)
        self._blocks.append(node.body)
        try:
            yield node.var
        finally:
            self._blocks.pop()

    @contextmanager
    def elect_one(self, mask: int = 0xFFFFFFFF):
        """`with k.elect_one():` the block runs in one lane of the warp (elect.sync + branch)."""
        p = self._elect(mask)
        node = self._open_if(p, "elect")
        self._blocks.append(node.then)
        try:
            yield node
        finally:
            self._blocks.pop()
            self._last_if = node

    def _elect(self, mask):
        p = self.kernel.new_reg(pred)
        self._insert(cluster.ElectSync(p, None, mask))
        return p

    # ------------------------------------------------------------------------------ mbarrier

    @_located
    def mbarrier_init(self, bar, count=1, *, space: str = "shared::cta") -> None:
        """mbarrier.init.shared::cta.b64 [bar], count."""
        self._insert(mbarrier.MbarrierInit(bar, count, space))

    @_located
    def mbarrier_inval(self, bar, *, space: str = "shared::cta") -> None:
        """mbarrier.inval.shared::cta.b64 [bar]."""
        self._insert(mbarrier.MbarrierInval(bar, space))

    def _arrive(self, bar, state, **kw):
        dst = self.kernel.new_reg(u64) if state else None
        self._insert(mbarrier.MbarrierArrive(bar, dst, **kw))
        return dst

    @_located
    def mbarrier_arrive(self, bar, count=None, *, sem=None, scope=None, space="shared::cta", state=False):
        """mbarrier.arrive{.sem}{.scope}{.space}.b64 state|_, [bar]{, count}. Returns the state
        register when state=True (else the sink `_` is the destination)."""
        return self._arrive(bar, state, count=count, sem=sem, scope=scope, space=space)

    @_located
    def mbarrier_arrive_no_complete(self, bar, count, *, sem=None, scope=None, space="shared::cta", state=True):
        """mbarrier.arrive.noComplete{.release}{.cta}.shared::cta.b64 state, [bar], count."""
        return self._arrive(bar, state, count=count, sem=sem, scope=scope, space=space, no_complete=True)

    @_located
    def mbarrier_arrive_drop(self, bar, count=None, *, sem=None, scope=None, space="shared::cta", state=False):
        """mbarrier.arrive_drop{.sem}{.scope}{.space}.b64 state|_, [bar]{, count}."""
        return self._arrive(bar, state, count=count, sem=sem, scope=scope, space=space, drop=True)

    @_located
    def mbarrier_arrive_drop_no_complete(self, bar, count, *, sem=None, scope=None, space="shared::cta",
                                         state=True):
        """mbarrier.arrive_drop.noComplete{.release.cta}.shared::cta.b64 state, [bar], count."""
        return self._arrive(bar, state, count=count, sem=sem, scope=scope, space=space, drop=True,
                            no_complete=True)

    @_located
    def mbarrier_arrive_expect_tx(self, bar, tx, *, sem=None, scope=None, space="shared::cta", state=False):
        """mbarrier.arrive.expect_tx{.sem}{.scope}{.space}.b64 state|_, [bar], tx."""
        return self._arrive(bar, state, tx=tx, sem=sem, scope=scope, space=space)

    @_located
    def mbarrier_arrive_drop_expect_tx(self, bar, tx, *, sem=None, scope=None, space="shared::cta", state=False):
        """mbarrier.arrive_drop.expect_tx{.sem}{.scope}{.space}.b64 state|_, [bar], tx."""
        return self._arrive(bar, state, tx=tx, sem=sem, scope=scope, space=space, drop=True)

    @_located
    def mbarrier_expect_tx(self, bar, tx, *, sem=None, scope=None, space="shared::cta") -> None:
        """mbarrier.expect_tx{.relaxed}{.scope}{.space}.b64 [bar], tx."""
        self._insert(mbarrier.MbarrierExpectTx(bar, tx, sem, scope, space))

    @_located
    def mbarrier_complete_tx(self, bar, tx, *, sem=None, scope=None, space="shared::cta") -> None:
        """mbarrier.complete_tx{.relaxed}{.scope}{.space}.b64 [bar], tx."""
        self._insert(mbarrier.MbarrierExpectTx(bar, tx, sem, scope, space, complete=True))

    def _wait_op(self, kind, bar, parity, state, hint, sem, scope, space, out):
        d = self._reg(pred, out)
        return mbarrier.MbarrierWait(bar, d, parity, state, hint, sem, scope, space, kind)

    @_located
    def mbarrier_try_wait(self, bar, *, parity=None, state=None, hint=None, sem=None, scope=None,
                          space="shared::cta", out=None) -> Reg:
        """mbarrier.try_wait{.parity}{.sem}{.scope}.shared::cta.b64 p, [bar], parity|state{, hint} -> p."""
        return self._insert(self._wait_op("try_wait", bar, parity, state, hint, sem, scope, space, out)).dst

    @_located
    def mbarrier_test_wait(self, bar, *, parity=None, state=None, sem=None, scope=None,
                           space="shared::cta", out=None) -> Reg:
        """mbarrier.test_wait{.parity}{.sem}{.scope}.shared::cta.b64 p, [bar], parity|state -> p."""
        return self._insert(self._wait_op("test_wait", bar, parity, state, None, sem, scope, space, out)).dst

    @_located
    def mbarrier_wait(self, bar, *, parity=None, state=None, hint=None, sem=None, scope=None,
                      space="shared::cta", kind: str = "try_wait") -> None:
        """Loop on mbarrier.try_wait (or test_wait) until the phase completes. With the kernel in
        debug mode the loop is bounded and reports this line instead of hanging."""
        op = self._wait_op(kind, bar, parity, state, hint, sem, scope, space, None)
        if self._guard is not None:
            raise DSLError("mbarrier_wait inside a guard() block: use if_ instead")
        node = WaitLoop(op, self._loc(), site=len(self.kernel.wait_sites))
        if self.kernel.debug:
            node.debug_regs = (self.kernel.new_reg(u64), self.kernel.new_reg(u64), self.kernel.new_reg(pred))
        self.kernel.wait_sites.append(node)
        self._append(node)

    @_located
    def mbarrier_pending_count(self, state, *, out=None) -> Reg:
        """mbarrier.pending_count.b64 count, state."""
        d = self._reg(u32, out)
        self._insert(mbarrier.MbarrierPendingCount(d, state))
        return d

    # ------------------------------------------------------------------------------- fences

    @_located
    def fence_proxy_async(self, space: str | None = None) -> None:
        """fence.proxy.async{.space}."""
        self._insert(fence.FenceProxyAsync(space))

    @_located
    def fence_mbarrier_init(self) -> None:
        """fence.mbarrier_init.release.cluster."""
        self._insert(fence.FenceMbarrierInit())

    @_located
    def fence_proxy_tensormap(self, sem: str, scope: str, addr=None) -> None:
        """fence.proxy.tensormap::generic.release.scope / .acquire.scope [addr], 128."""
        if isinstance(addr, (Param, TensorMapRef)):
            addr = addr.value if isinstance(addr, Param) else addr.addr
        self._insert(fence.FenceProxyTensormap(sem, scope, addr))

    @_located
    def fence(self, sem: str = "acq_rel", scope: str = "cta") -> None:
        """fence.{sc,acq_rel,acquire,release}.scope."""
        self._insert(fence.Fence(sem, scope))

    @_located
    def fence_sync_restrict(self, sem: str, *, proxy_async: bool = False) -> None:
        """fence{.proxy.async::generic}.{release|acquire}.sync_restrict::shared::{cta|cluster}.cluster."""
        self._insert(fence.FenceSyncRestrict(sem, proxy_async))

    # ------------------------------------------------------------------------- bulk tensor

    @_located
    def cp_async_bulk_tensor(self, dst, src, coords, *, mbar=None, dst_space: str = "shared::cluster",
                             mode: str = "tile", im2col=None, multicast=None, cta_group=None,
                             cache_hint=None) -> None:
        """cp.async.bulk.tensor.Nd: a load when `src` is a tensor map (dst: shared buffer, mbar required),
        a store when `dst` is (src: shared::cta buffer, completes through bulk groups). N = len(coords),
        coordinates innermost first."""
        if _is_tmap(src) and not _is_tmap(dst):
            if mbar is None:
                raise DSLError("cp.async.bulk.tensor load: mbar= is missing; a load completes on an mbarrier")
            self._insert(bulk.CpAsyncBulkTensorLoad(dst, src, tuple(coords), mbar, dst_space, mode, im2col,
                                                    multicast, cta_group, cache_hint))
        elif _is_tmap(dst) and not _is_tmap(src):
            if mbar is not None or multicast is not None or im2col is not None or cta_group is not None:
                raise DSLError("cp.async.bulk.tensor store: mbar/multicast/im2col/cta_group are load-only "
                               "(a store completes through bulk groups)")
            self._insert(bulk.CpAsyncBulkTensorStore(dst, tuple(coords), src, mode, cache_hint))
        else:
            raise DSLError("cp.async.bulk.tensor: exactly one of dst/src must be a tensor map "
                           "(src for a load, dst for a store)")

    @_located
    def cp_reduce_async_bulk_tensor(self, op: str, dst, src, coords, *, mode: str = "tile",
                                    cache_hint=None) -> None:
        """cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op: reduce the shared box `src` into the
        tensor map `dst`."""
        self._insert(bulk.CpReduceAsyncBulkTensor(op, dst, tuple(coords), src, mode, cache_hint))

    @_located
    def cp_async_bulk_prefetch_tensor(self, tmap, coords, *, mode: str = "tile", im2col=None,
                                      cache_hint=None) -> None:
        """cp.async.bulk.prefetch.tensor.Nd.L2.global: prefetch a box into L2."""
        self._insert(bulk.CpAsyncBulkPrefetchTensor(tmap, tuple(coords), mode, im2col, cache_hint))

    @_located
    def cp_async_bulk(self, dst, src, size, *, dst_space: str, src_space: str, mbar=None, multicast=None,
                      cache_hint=None, byte_mask=None) -> None:
        """cp.async.bulk.dst_space.src_space: copy `size` bytes (a multiple of 16). The direction is the
        (dst_space, src_space) pair, spelled as in PTX: ('shared::cta', 'global') and ('shared::cluster',
        'global' | 'shared::cta') complete on `mbar`; ('global', 'shared::cta') through bulk groups.
        multicast= is a 16-bit CTA mask (global -> shared::cluster); byte_mask= is .cp_mask (sm_100+)."""
        self._insert(bulk.CpAsyncBulk(dst, src, size, dst_space, src_space, mbar, multicast, cache_hint,
                                      byte_mask))

    @_located
    def cp_reduce_async_bulk(self, op: str, dst, src, size, *, type, dst_space: str, mbar=None,
                             noftz: bool = False, cache_hint=None) -> None:
        """cp.reduce.async.bulk.dst_space.shared::cta.op{.noftz}.type: reduce `size` bytes of the shared
        buffer `src` into `dst` (dst_space 'global' through bulk groups, 'shared::cluster' on `mbar`)."""
        self._insert(bulk.CpReduceAsyncBulk(op, type, dst, src, size, dst_space, mbar, noftz, cache_hint))

    @_located
    def cp_async_bulk_prefetch(self, src, size, *, cache_hint=None) -> None:
        """cp.async.bulk.prefetch.L2.global [src], size: prefetch `size` bytes of global memory into L2."""
        self._insert(bulk.CpAsyncBulkPrefetch(src, size, cache_hint))

    @_located
    def cp_async_bulk_commit_group(self) -> None:
        """cp.async.bulk.commit_group."""
        self._insert(bulk.CpAsyncBulkCommitGroup())

    @_located
    def cp_async_bulk_wait_group(self, n: int = 0, *, read: bool = False) -> None:
        """cp.async.bulk.wait_group{.read} n."""
        self._insert(bulk.CpAsyncBulkWaitGroup(n, read))

    @_located
    def cp_async_bulk_wait_group_read(self, n: int = 0) -> None:
        """cp.async.bulk.wait_group.read n: the shared sources of all but n groups may be reused."""
        self._insert(bulk.CpAsyncBulkWaitGroup(n, True))

    # ------------------------------------------------------------------------------ cluster

    @_located
    def elect_sync(self, mask=0xFFFFFFFF, *, lane: bool = False):
        """elect.sync d|p, mask -> p (and the leader's lane id when lane=True)."""
        p = self.kernel.new_reg(pred)
        d = self.kernel.new_reg(u32) if lane else None
        self._insert(cluster.ElectSync(p, d, mask))
        return (p, d) if lane else p

    @_located
    def barrier_cluster_arrive(self, *, sem=None, aligned: bool = True) -> None:
        """barrier.cluster.arrive{.release|.relaxed}{.aligned}."""
        self._insert(cluster.BarrierCluster("arrive", sem, aligned))

    @_located
    def barrier_cluster_wait(self, *, sem=None, aligned: bool = True) -> None:
        """barrier.cluster.wait{.acquire}{.aligned}."""
        self._insert(cluster.BarrierCluster("wait", sem, aligned))

    @_located
    def mapa(self, addr, rank, *, space: str = "shared::cluster", out=None) -> Reg:
        """mapa.shared::cluster.{u32|u64} d, addr, rank: addr's location in CTA `rank` of the cluster
        (space='' is the generic mapa.u64 form; the width follows addr)."""
        wide = isinstance(addr, Reg) and addr.type.bits == 64
        d = self._reg(u64 if wide else u32, out, space=space or None)
        self._insert(cluster.Mapa(d, addr, rank, space))
        return d

    @_located
    def getctarank(self, addr, *, space: str = "shared::cluster", out=None) -> Reg:
        """getctarank{.shared::cluster}.{u32|u64} d, addr (space='' is the generic .u64 form)."""
        d = self._reg(u32, out)
        self._insert(cluster.Getctarank(d, addr, space))
        return d

    @_located
    def st_async(self, type, addr, value, mbar) -> None:
        """st.async.shared::cluster.mbarrier::complete_tx::bytes{.v2|.v4}.type [addr], value, [mbar]: store
        into a peer CTA's shared memory and complete-tx the bytes on its mbarrier (a tuple stores a vector)."""
        self._insert(cluster.StAsync(type, addr, value, mbar))

    @_located
    def red_async(self, op: str, type, addr, value, mbar) -> None:
        """red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [addr], value, [mbar]."""
        self._insert(cluster.RedAsync(op, type, addr, value, mbar))

    # ------------------------------------------------------------------ execution control

    @_located
    def griddepcontrol_launch_dependents(self) -> None:
        """griddepcontrol.launch_dependents: the dependent grid may start launching."""
        self._insert(control.Griddepcontrol("launch_dependents"))

    @_located
    def griddepcontrol_wait(self) -> None:
        """griddepcontrol.wait: wait for the prerequisite grids and see their memory."""
        self._insert(control.Griddepcontrol("wait"))

    @_located
    def setmaxnreg_inc(self, n: int) -> None:
        """setmaxnreg.inc.sync.aligned.u32 n (warpgroup-collective)."""
        self._insert(control.Setmaxnreg("inc", n))

    @_located
    def setmaxnreg_dec(self, n: int) -> None:
        """setmaxnreg.dec.sync.aligned.u32 n (warpgroup-collective)."""
        self._insert(control.Setmaxnreg("dec", n))

    # --------------------------------------------------------------------------- policies

    @_located
    def createpolicy_fractional(self, primary: str = "L2::evict_last", secondary=None, fraction=None, *,
                                out=None) -> Reg:
        """createpolicy.fractional.primary{.secondary}.b64 policy{, fraction} -> the .b64 policy register
        (levels spelled as in PTX: 'L2::evict_last', 'L2::evict_first', ...)."""
        d = self._reg(b64, out)
        self._insert(policy.CreatepolicyFractional(d, primary, secondary, fraction))
        return d

    @_located
    def createpolicy_range(self, addr, primary_size, total_size, *, primary: str = "L2::evict_last",
                           secondary=None, space: str = "global", out=None) -> Reg:
        """createpolicy.range{.global}.primary{.secondary}.b64 policy, [addr], primary_size, total_size."""
        d = self._reg(b64, out)
        self._insert(policy.CreatepolicyRange(d, addr, primary_size, total_size, primary, secondary, space))
        return d

    @_located
    def createpolicy_cvt(self, access_property, *, out=None) -> Reg:
        """createpolicy.cvt.L2.b64 policy, access_property."""
        d = self._reg(b64, out)
        self._insert(policy.CreatepolicyCvt(d, access_property))
        return d

    # -------------------------------------------------------------------------- tensor maps

    @_located
    def tensormap_replace(self, addr, field: str, new_val, *, ord=None, space=None, mode: str = "tile") -> None:
        """tensormap.replace.tile.field{.space}.b1024.type [addr], {ord,} new_val. `space` defaults to the
        address's: a shared buffer -> 'shared::cta', a global register -> 'global', else '' (generic).
        rank takes rank-1; field3 values (elemtype, swizzle_mode, ...) are immediates or names."""
        space = tensormap.infer_space(addr) if space is None else space
        self._insert(tensormap.TensormapReplace(field, addr, new_val, ord, space, mode))

    @_located
    def tensormap_cp_fenceproxy(self, dst, src, *, scope: str = "gpu") -> None:
        """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned
        [dst], [src], 128: publish the shared copy `src` to the global map `dst` (run by a whole warp)."""
        self._insert(tensormap.TensormapCpFenceproxy(dst, src, scope))

    @_located
    def prefetch_tensormap(self, tmap, *, space: str = "") -> None:
        """prefetch{.param|.const}.tensormap [tmap]: a tensor-map param or generic address ('' default),
        the param symbol (space='param') or a .const address (space='const')."""
        self._insert(tensormap.PrefetchTensormap(tmap, space))

    # ------------------------------------------------------------------------------ helpers

    @_located
    def tid_x(self) -> Reg:
        """mov.u32 d, %tid.x."""
        return self.mov(_sreg.tid_x)

    @_located
    def warp_idx(self) -> Reg:
        """tid.x / 32 (the warp's index in a 1-D block; %warpid is a hardware slot, not this)."""
        return self.shr(self.mov(_sreg.tid_x), 5)


def _is_tmap(v) -> bool:
    return isinstance(v, TensorMapRef) or (isinstance(v, Param) and v.kind == "tensormap")


def _no_type(what):
    raise DSLError(f"{what}: cannot infer the type from a constant; pass type=")


def _infer(what, a, b, type) -> ScalarType:
    if type is not None:
        return scalar_type(type)
    for v in (a, b):
        t = operand_type(v)
        if t is not None:
            return t
    raise DSLError(f"{what}: cannot infer the type from constants alone; pass type=")


def _check_directives(d: dict) -> dict:
    out = {}
    for key in d:
        if key not in DIRECTIVES:
            raise DSLError(f"unknown kernel option {key!r}; expected one of {', '.join(DIRECTIVES)}, "
                           f"arch, ptx, debug")
    for key in DIRECTIVES:
        v = d.get(key)
        if v is None or v is False:
            continue
        if key in ("reqntid", "maxntid", "reqnctapercluster"):
            dims = (v,) if isinstance(v, int) else tuple(v)
            if not 1 <= len(dims) <= 3 or any(not isinstance(x, int) or x < 1 for x in dims):
                raise DSLError(f"{key}={v!r}: expected 1 to 3 positive integers")
            dims = dims + (1,) * (3 - len(dims))
            if key != "reqnctapercluster" and dims[0] * dims[1] * dims[2] > 1024:
                raise DSLError(f"{key}={v!r}: {dims[0] * dims[1] * dims[2]} threads is over the 1024 a CTA can have")
            out[key] = dims
        elif key == "explicitcluster":
            out[key] = True
        else:
            if not isinstance(v, int) or v < 1:
                raise DSLError(f"{key}={v!r}: expected a positive integer")
            out[key] = v
    if "reqntid" in out and "maxntid" in out:
        raise DSLError("reqntid and maxntid cannot both be given (ptxas: conflicting directives)")
    if "reqnctapercluster" in out and "maxclusterrank" in out:
        raise DSLError("reqnctapercluster and maxclusterrank cannot both be given")
    if "reqnctapercluster" in out:
        c = out["reqnctapercluster"]
        n = c[0] * c[1] * c[2]
        if n > 16:
            raise DSLError(f"reqnctapercluster={c}: {n} CTAs is over the 16 a cluster can have")
        out["explicitcluster"] = True
    return out


def kernel(name: str, **kw) -> KernelBuilder:
    """Start a kernel: `with ptxdsl.kernel("name", reqntid=128) as k:`.

    Options: arch / ptx pin .target / .version; debug=True (or a timeout in seconds) bounds every
    wait loop; directives
    reqntid, maxntid, minnctapersm, maxnreg, reqnctapercluster, explicitcluster, maxclusterrank.
    """
    return KernelBuilder(name, loc=SourceLoc.caller(), **kw)


def module(*kernels, arch: str | None = None, ptx=None) -> Module:
    """A module of several kernels (builders or Kernel objects) sharing one .target/.version."""
    ks = [k.finish() if isinstance(k, KernelBuilder) else k for k in kernels]
    return Module(ks, arch, ptx)

