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
import inspect
import operator
import os
import re
import types
from contextlib import contextmanager

from . import sreg as _sreg
from . import limits, watchdog
from .errors import DSLError, PtxdslError, SourceLoc
from .ir import (MAX_SHARED_PER_BLOCK, If, Instr, Kernel, Label, LabelStmt, Loop, Module, Param, PredNot, Reg,
                 SharedAlloc, TensorMapRef, WaitLoop, is_pow2)
from .isa import bulk, core, fence, mbarrier, tensormap, warp
from .isa.decl import OPS, Op, infer_type
from .isa.operands import REQUIRED, check_value
from .target import resolve_target
from .tensormap import TensorMapSpec
from .types import b64, pred, scalar_type, u32, u64

_IDENT = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+)$")          # a PTX identifier (no $)
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


class KernelBuilder:
    """Builds one Kernel. Use as a context manager; leaving the block verifies the kernel."""

    def __init__(self, name: str, *, arch: str | None = None, ptx=None, debug: bool = False, verify: bool | None = None,
                 strict: bool = False, loc=None, **directives):
        self._loc_override: SourceLoc | None = None
        self.verify = verify if verify is not None else os.environ.get("PTXDSL_VERIFY", "1") not in ("0", "")
        self._allow: frozenset = frozenset()
        loc = loc or SourceLoc.caller()
        if not isinstance(name, str) or not _IDENT.match(name):
            raise DSLError(f"kernel name {name!r} is not a PTX identifier", loc)
        try:
            limits.identifier("kernel name", name)
        except PtxdslError as e:
            raise e.at(loc) from None
        if not isinstance(strict, bool):
            raise DSLError(f"kernel {name!r}: strict={strict!r} breaks 'True or False'", loc)
        self.kernel = Kernel(name=name, arch=arch, ptx=ptx, debug=debug, loc=loc, strict=strict)
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
            self.param_ptr(watchdog.PARAM)

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

    def _name(self, name: str) -> str:
        if not isinstance(name, str) or not _IDENT.match(name) or name.startswith("__ptxdsl") and name != watchdog.PARAM:
            raise DSLError(f"name {name!r} is not a PTX identifier")
        limits.identifier("name", name)
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
        """Close the kernel and run the whole-kernel checks (called by `with`'s exit): the target floor
        always, the verifier's rules unless the kernel was made with verify=False (then `ptxdsl.verify.check`
        lists them)."""
        if not self._done:
            if len(self._blocks) != 1:
                raise DSLError("kernel closed inside an open if_/loop block", self.kernel.loc)
            if self.verify:
                from .verify import verify_kernel

                verify_kernel(self.kernel)
            else:
                resolve_target([self.kernel])
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
        p.value = self.kernel.new_reg(t)
        self._insert(core.Ld(space="param", type=t, d=(p.value,), addr=p))
        return p.value

    @_located
    def param_ptr(self, name: str) -> Reg:
        """A global pointer parameter (.param .u64): ld.param.u64 then cvta.to.global.u64."""
        p = Param(self._name(name), "ptr", u64, loc=self._loc())
        self.kernel.params.append(p)
        raw = self.kernel.new_reg(u64)
        self._insert(core.Ld(space="param", type=u64, d=(raw,), addr=p))
        p.value = self.kernel.new_reg(u64, "global")
        self._insert(core.Cvta(space="global", d=p.value, src=raw, to=True))
        return p.value

    @_located
    def param_tensormap(self, name: str, spec=None) -> Param:
        """A CUtensorMap passed by value (.param .align 64 .b8 name[128]); its generic address comes
        from mov.b64 + cvta.param.u64. `spec` (a TensorMapSpec, validated here) lets checks see its dtype and
        box."""
        if spec is not None:
            if not isinstance(spec, TensorMapSpec):
                raise DSLError(f"param_tensormap {name!r}: spec={spec!r} breaks 'a TensorMapSpec or None'")
            spec.validate()
        p = Param(self._name(name), "tensormap", u64, loc=self._loc())
        p.tmap = spec
        self.kernel.params.append(p)
        raw = self.kernel.new_reg(u64)
        self._insert(core.Mov(type=b64, d=raw, src=p))
        p.value = self.kernel.new_reg(u64)
        self._insert(core.Cvta(space="param", d=p.value, src=raw))
        return p

    @_located
    def shared(self, name: str, nbytes: int, *, align: int = 16, dynamic: bool = False) -> SharedAlloc:
        """A shared-memory buffer. Static: `.shared .align A .b8 name[N]`; dynamic=True places it in the
        kernel's `.extern .shared` window (the launch sizes the window to fit every dynamic buffer)."""
        return self._shared(name, nbytes, align, dynamic, "buffer")

    @_located
    def mbarrier(self, name: str, n: int = 1, *, dynamic: bool = False) -> SharedAlloc:
        """Shared storage for `n` mbarriers (8 bytes each, 8-byte aligned). Index with `.at(8 * i)`."""
        n = _integer(f"mbarrier {name!r} n", n)
        if n < 1 or 8 * n > MAX_SHARED_PER_BLOCK:
            raise DSLError(f"mbarrier {name!r}: n={n!r}, expected a positive count that fits shared memory")
        return self._shared(name, 8 * n, 8, dynamic, "mbarrier")

    def _shared(self, name, nbytes, align, dynamic, role) -> SharedAlloc:
        nbytes, align = _integer(f"shared {name!r} nbytes", nbytes), _integer(f"shared {name!r} align", align)
        if nbytes <= 0:
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

    # ------------------------------------------------------------------------------- any op

    def _op(self, cls, /, **kw):
        """Build the declared op `cls` from keyword arguments (its qualifiers and operands; `out=` names its
        first destination), insert it, and return what it writes: a register, a tuple, or None."""
        out = kw.pop("out", None)
        if out is not None:
            first = _first_out(cls)
            if first is None:
                raise DSLError(f"{cls.mnemonic} writes no register; out= does not apply")
            if not isinstance(out, (Reg, tuple, list)):
                raise DSLError(f"out={out!r}: expected a register")
            kw[first] = out
        op = cls(alloc=self.kernel.new_reg, **kw)
        self._insert(op)
        names = cls.results or tuple(s.name for s in cls.operands if s.kind.out)
        results = [getattr(op, n) for n in names]
        results = [r for r in results if isinstance(r, Reg) or (isinstance(r, tuple) and r)]
        if not results:
            return None
        if len(results) == 1:
            r = results[0]
            return r[0] if isinstance(r, tuple) and len(r) == 1 else r
        return tuple(results)

    def op(self, cls, /, **kw):
        """Insert any declared op (a ptxdsl.isa.decl.Op subclass) by keyword arguments; the builder methods
        named after the mnemonics are this, with positional operands."""
        if not (isinstance(cls, type) and issubclass(cls, Op) and cls in OPS):
            raise DSLError(f"op({cls!r}): expected a declared op class (ptxdsl.isa.decl.OPS)", self._loc())
        try:
            return self._op(cls, **kw)
        except PtxdslError as e:
            raise e.at(self._loc()) from None

    def __getattr__(self, name):
        cls = _method_ops().get(name) if not name.startswith("_") else None
        if cls is None or len(cls) != 1:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return types.MethodType(_generated_method(cls[0]), self)

    # ----------------------------------------------------------------- ops with several forms

    @_located
    def mad(self, a, b, c, *, mode=None, sat=False, type=None, out=None) -> Reg:
        """mad{.lo,.hi,.wide}{.sat}.type d, a, b, c on integers; fma.rn (or mode=) .type on floats."""
        t = core.Mad.quals["type"].normalize(type) or infer_type("mad", core.Fma.quals["type"], {"a": a, "b": b})
        if t is not None and t.kind == "f":
            return self._op(core.Fma, a=a, b=b, c=c, rnd=mode, sat=sat, type=t, out=out)
        return self._op(core.Mad, a=a, b=b, c=c, mode=mode, sat=sat, type=t, out=out)

    @_located
    def cvt(self, type, src, lo=None, *, rnd=None, sat=False, relu=False, satfinite=False, stype=None,
            out=None) -> Reg:
        """cvt{.rnd}{.sat}.type.stype d, src: convert src to `type`. With lo, or type 'f16x2' / 'bf16x2' /
        'e4m3x2' / 'e5m2x2': cvt.rnd{.relu}{.satfinite}.type.f32 d, src, lo packs two .f32 values into one .b32
        register (.b16 for the FP8 pairs), src in the upper half and lo in the lower (rnd .rn by default). With
        stype 'e4m3x2' / 'e5m2x2': cvt.rn{.relu}.f16x2.stype d, src widens the FP8 pair in a .b16 register."""
        given = {name: v for name, v in (("rnd", rnd), ("sat", sat), ("relu", relu), ("satfinite", satfinite),
                                         ("stype", stype)) if v is not None and v is not False}
        if isinstance(stype, str) and stype.lstrip(".") in core.FP8_PAIRS:
            return self._op(core.CvtUnpack, type=type, src=src, out=out, **given)
        pack = lo is not None or (isinstance(type, str) and type.lstrip(".") in core.PAIRS)
        if pack:
            return self._op(core.CvtPack, type=type, src=src, lo=lo, out=out, **given)
        return self._op(core.Cvt, type=type, src=src, out=out, **given)

    @_located
    def atom_add(self, type, addr, value, *, space: str = "global", out=None) -> Reg:
        """atom.space.add.type d, [addr], value: k.atom("add", ...)."""
        return self._op(core.Atom, op="add", type=type, addr=addr, value=value, space=space, out=out)

    # ------------------------------------------------------------------------ control flow

    @_located
    def label(self, name: str) -> Label:
        """A label at this point (for hand-written branches; prefer if_/loop)."""
        if isinstance(name, str) and name.startswith("$L__"):
            raise DSLError(f"label {name!r}: the $L__ prefix is reserved for generated labels")
        lab = Label(self._name(name))
        self._append(LabelStmt(lab, self._loc()))
        return lab

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
        try:
            start, stop = check_value("loop start", start, t, sreg=True), check_value("loop stop", stop, t)
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
        return self._op(warp.ElectSync, mask=mask)

    # ------------------------------------------------------------------------------ mbarrier

    def _wait_op(self, kind, bar, parity, state, hint, sem, scope, space, out):
        cls = mbarrier.wait_class(kind, parity, state)
        kw = {"parity": parity} if parity is not None else {"state": state}
        if hint is not None:
            if kind != "try_wait":
                raise DSLError("mbarrier.test_wait takes no suspend-time hint")
            kw["hint"] = hint
        return cls(alloc=self.kernel.new_reg, bar=bar, sem=sem, scope=scope, space=space, done=out, **kw)

    @_located
    def mbarrier_try_wait(self, bar, *, parity=None, state=None, hint=None, sem=None, scope=None,
                          space="shared::cta", out=None) -> Reg:
        """mbarrier.try_wait{.parity}{.sem.scope}.shared::cta.b64 p, [bar], parity|state{, hint} -> p."""
        return self._insert(self._wait_op("try_wait", bar, parity, state, hint, sem, scope, space, out)).done

    @_located
    def mbarrier_test_wait(self, bar, *, parity=None, state=None, sem=None, scope=None,
                           space="shared::cta", out=None) -> Reg:
        """mbarrier.test_wait{.parity}{.sem.scope}.shared::cta.b64 p, [bar], parity|state -> p."""
        return self._insert(self._wait_op("test_wait", bar, parity, state, None, sem, scope, space, out)).done

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

    # ------------------------------------------------------------------------------- fences

    @_located
    def fence_proxy_tensormap(self, sem: str, scope: str, addr=None) -> None:
        """fence.proxy.tensormap::generic.release.scope / .acquire.scope [addr], 128."""
        if isinstance(addr, (Param, TensorMapRef)):
            addr = addr.value if isinstance(addr, Param) else addr.addr
        cls = {"release": fence.FenceProxyTensormapRelease, "acquire": fence.FenceProxyTensormapAcquire}.get(
            sem if isinstance(sem, str) else None)
        if cls is None:
            raise DSLError(f"fence.proxy.tensormap::generic sem={sem!r} is not allowed; expected 'release' or "
                           f"'acquire'")
        if sem == "acquire" and addr is None:
            raise DSLError("fence.proxy.tensormap::generic.acquire needs addr= (the tensor map it acquires)")
        if sem == "release" and addr is not None:
            raise DSLError("fence.proxy.tensormap::generic.release takes no address")
        self._op(cls, scope=scope, **({"addr": addr} if addr is not None else {}))

    @_located
    def fence_sync_restrict(self, sem: str, *, proxy_async: bool = False) -> None:
        """fence{.proxy.async::generic}.{release|acquire}.sync_restrict::shared::{cta|cluster}.cluster."""
        cls = {"release": fence.FenceSyncRestrictRelease, "acquire": fence.FenceSyncRestrictAcquire}.get(
            sem if isinstance(sem, str) else None)
        if cls is None:
            raise DSLError(f"fence sync_restrict sem={sem!r} is not allowed; expected 'release' or 'acquire'")
        self._op(cls, proxy_async=proxy_async)

    # ------------------------------------------------------------------------- bulk copies

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
            self._op(bulk.CpAsyncBulkTensorLoad, dst=dst, src=src, coords=_tuple(coords), mbar=mbar,
                     dst_space=dst_space, mode=mode, im2col=im2col, multicast=multicast, cta_group=cta_group,
                     cache_hint=cache_hint)
        elif _is_tmap(dst) and not _is_tmap(src):
            if mbar is not None or multicast is not None or im2col is not None or cta_group is not None:
                raise DSLError("cp.async.bulk.tensor store: mbar/multicast/im2col/cta_group are load-only "
                               "(a store completes through bulk groups)")
            self._op(bulk.CpAsyncBulkTensorStore, dst=dst, src=src, coords=_tuple(coords), mode=mode,
                     cache_hint=cache_hint)
        else:
            raise DSLError("cp.async.bulk.tensor: exactly one of dst/src must be a tensor map "
                           "(src for a load, dst for a store)")

    @_located
    def cp_async_bulk(self, dst, src, size, *, dst_space: str, src_space: str, mbar=None, multicast=None,
                      cache_hint=None, byte_mask=None) -> None:
        """cp.async.bulk.dst_space.src_space: copy `size` bytes (a multiple of 16). The direction is the
        (dst_space, src_space) pair, spelled as in PTX: ('shared::cta', 'global') and ('shared::cluster',
        'global' | 'shared::cta') complete on `mbar`; ('global', 'shared::cta') through bulk groups.
        multicast= is a 16-bit CTA mask (global -> shared::cluster); byte_mask= is .cp_mask (sm_100+)."""
        cls = bulk.bulk_class(dst_space, src_space)
        given = {"mbar": mbar, "multicast": multicast, "cache_hint": cache_hint, "byte_mask": byte_mask}
        slots = {s.name for s in cls.operands}
        for name, v in given.items():
            if v is not None and name not in slots:
                why = {"mbar": "it completes through bulk groups", "multicast": "multicast is only for "
                       "dst_space='shared::cluster', src_space='global'", "cache_hint": "it never touches L2",
                       "byte_mask": ".cp_mask is only for the shared::cta -> global direction"}[name]
                raise DSLError(f"cp.async.bulk.{dst_space}.{src_space} takes no {name}=: {why}")
        if "mbar" in slots and mbar is None:
            raise DSLError(f"cp.async.bulk.{dst_space}.{src_space}: mbar= is missing; this copy completes on an "
                           f"mbarrier in the destination CTA")
        self._op(cls, dst=dst, src=src, size=size, **{k: v for k, v in given.items() if v is not None})

    @_located
    def cp_reduce_async_bulk(self, op: str, dst, src, size, *, type, dst_space: str, mbar=None,
                             noftz: bool = False, cache_hint=None) -> None:
        """cp.reduce.async.bulk.dst_space.shared::cta.op{.noftz}.type: reduce `size` bytes of the shared
        buffer `src` into `dst` (dst_space 'global' through bulk groups, 'shared::cluster' on `mbar`)."""
        if dst_space == "global":
            if mbar is not None:
                raise DSLError("cp.reduce.async.bulk.global completes through bulk groups; it takes no mbar=")
            self._op(bulk.CpReduceAsyncBulkGlobal, op=op, type=type, dst=dst, src=src, size=size, noftz=noftz,
                     cache_hint=cache_hint)
        elif dst_space == "shared::cluster":
            if mbar is None:
                raise DSLError("cp.reduce.async.bulk.shared::cluster: mbar= is missing; it completes on an "
                               "mbarrier in the destination CTA")
            if cache_hint is not None:
                raise DSLError("cp.reduce.async.bulk.shared::cluster takes no cache_hint")
            if noftz:
                raise DSLError("cp.reduce.async.bulk: noftz=True is only for .add.f16 / .add.bf16 into global "
                               "memory")
            self._op(bulk.CpReduceAsyncBulkCluster, op=op, type=type, dst=dst, src=src, size=size, mbar=mbar)
        else:
            raise DSLError(f"cp.reduce.async.bulk dst_space={dst_space!r} is not allowed; expected 'global' or "
                           f"'shared::cluster'")

    @_located
    def cp_async_bulk_wait_group_read(self, n: int = 0) -> None:
        """cp.async.bulk.wait_group.read n: the shared sources of all but n groups may be reused."""
        self._op(bulk.CpAsyncBulkWaitGroup, n=n, read=True)

    # -------------------------------------------------------------------------- tensor maps

    @_located
    def tensormap_replace(self, addr, field: str, new_val, *, ord=None, space=None, mode: str = "tile") -> None:
        """tensormap.replace.tile.field{.space}.b1024.type [addr], {ord,} new_val. `space` defaults to the
        address's: a shared buffer -> 'shared::cta', a global register -> 'global', else '' (generic).
        rank takes rank-1; field3 values (elemtype, swizzle_mode, ...) are immediates or names."""
        cls = tensormap.REPLACE.get(field) if isinstance(field, str) else None
        if cls is None:
            raise DSLError(f"tensormap.replace field={field!r} is not allowed; expected one of "
                           f"{', '.join(tensormap.REPLACE)}")
        kw = {"ord": ord} if ord is not None else {}
        if ord is None and any(s.name == "ord" for s in cls.operands):
            raise DSLError(f"tensormap.replace.{mode}.{field}: ord= (the dimension, an immediate 0..4) is missing")
        if ord is not None and not any(s.name == "ord" for s in cls.operands):
            raise DSLError(f"tensormap.replace.{mode}.{field} takes no ord= (only box_dim, global_dim, "
                           f"global_stride, element_stride do)")
        self._op(cls, addr=addr, new_val=new_val, space=space, mode=mode, **kw)

    # ------------------------------------------------------------------------------- warp

    @_located
    def vote_sync(self, mode: str, a, mask=0xFFFFFFFF, *, out=None) -> Reg:
        """vote.sync.{all,any,uni}.pred d, a, mask -> a .pred; vote.sync.ballot.b32 -> the .u32 ballot."""
        cls = warp.VoteSyncBallot if mode == "ballot" else warp.VoteSync
        return self._op(cls, mode=mode, a=a, mask=mask, out=out)

    # ------------------------------------------------------------------------------ helpers

    @_located
    def tid_x(self) -> Reg:
        """mov.u32 d, %tid.x."""
        return self.mov(_sreg.tid_x)

    @_located
    def warp_idx(self) -> Reg:
        """tid.x / 32 (the warp's index in a 1-D block; %warpid is a hardware slot, not this)."""
        return self.shr(self.mov(_sreg.tid_x), 5)

    # ------------------------------------------------------------------------- tensor cores

    @_located
    def matrix_descriptor(self, buf, layout, offset=0):
        """The wgmma matrix descriptor (a MatrixDescriptor: .reg, .buffer, .layout, .offset) of `layout`'s tile at
        `offset` bytes into the shared buffer `buf`: mov.u64 of its address, shr.u64, add.u64 of the template.
        `desc.advance_k(j)` steps it to K step j (one add)."""
        from .descriptor import matrix_descriptor

        return matrix_descriptor(self, buf, layout, offset)


def _is_tmap(v) -> bool:
    return isinstance(v, TensorMapRef) or (isinstance(v, Param) and v.kind == "tensormap")


def _integer(what: str, v) -> int:
    """v as a Python int (numpy integers included); DSLError for anything else (bools and floats too)."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise DSLError(f"{what}={v!r}: expected an integer")
    return operator.index(v)


def _tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


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

    Options: arch / ptx pin .target / .version; verify=False (default: the PTXDSL_VERIFY environment
    variable, else True) leaves the verifier's rules to an explicit `ptxdsl.verify.check(kernel)`; debug=True (or a timeout in seconds) bounds every
    wait loop; strict=True makes assembling refuse ptxas's notes on a serialised wgmma pipeline (ptxdsl.ptxas_notes:
    without it they are warnings that `ptxdsl check` prints); directives
    reqntid, maxntid, minnctapersm, maxnreg, reqnctapercluster, explicitcluster, maxclusterrank.
    """
    return KernelBuilder(name, loc=SourceLoc.caller(), **kw)


def module(*kernels, arch: str | None = None, ptx=None) -> Module:
    """A module of several kernels (builders or Kernel objects) sharing one .target/.version."""
    ks = [k.finish() if isinstance(k, KernelBuilder) else k for k in kernels]
    return Module(ks, arch, ptx)



# ------------------------------------------------------------------------------ generated methods

_UNSET = object()


def _method_ops() -> dict:
    """Builder method name -> the op classes declared with it."""
    out: dict = {}
    for cls in OPS:
        out.setdefault(cls.method, []).append(cls)
    return out


def _signature(cls) -> inspect.Signature:
    """A generated method's signature: the op's `args` positionally (those with defaults last), then every
    other qualifier and input operand by keyword, and out= for its first destination."""
    slots = {s.name: s for s in cls.operands}
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    seen = set()
    defaulted = False
    for name in cls.args:
        default = _default(cls, name, slots)
        if default is REQUIRED and defaulted:
            default = None
        defaulted = defaulted or default is not REQUIRED
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=inspect.Parameter.empty if default is REQUIRED else default))
        seen.add(name)
    for name in [s.name for s in cls.operands if not (s.kind.out or s.kind.fixed or s.inline)] + list(cls.quals):
        if name in seen or (name in cls.quals and cls.quals[name].derived):
            continue
        default = _default(cls, name, slots)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        default=None if default is REQUIRED else default))
        seen.add(name)
    first = _first_out(cls)
    for s in cls.operands:
        if s.kind.out:
            name = "out" if s.name == first else s.name
            if name not in seen:
                params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _first_out(cls):
    """The destination `out=` names: the first one that is not a sink by default."""
    return next((s.name for s in cls.operands if s.kind.out and not getattr(s.kind, "sink", False)), None)


def _default(cls, name, slots):
    if name in slots:
        s = slots[name]
        return None if s.optional else s.default
    q = cls.quals[name]
    if q.default is not None or None in q.values or q.inferred or getattr(q, "infer", ()):
        return q.default
    return REQUIRED


def _generated_method(cls):
    """The builder method of one declared op: bind the arguments, build, insert, return the results."""
    sig = _signature(cls)
    given_names = {p.name for p in sig.parameters.values()}

    positional = [p.name for p in sig.parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD][1:]
    required = {p.name for p in sig.parameters.values() if p.default is inspect.Parameter.empty} - {"self"}

    def method(self, *args, **kw):
        if len(args) <= len(positional) and kw.keys() <= given_names and not kw.keys() & set(positional[:len(args)]):
            values = dict(zip(positional, args), **kw)          # the usual call: no Signature.bind
            if required <= values.keys():
                return self._op(cls, **values)
        try:
            bound = sig.bind(self, *args, **kw)
        except TypeError as e:
            raise DSLError(f"{cls.method}(): {e}; it takes ({', '.join(sorted(given_names - {'self'}))})") from None
        values = {k: v for k, v in bound.arguments.items() if k != "self"}
        return self._op(cls, **values)

    method.__name__ = method.__qualname__ = cls.method
    method.__signature__ = sig
    method.__doc__ = f"{cls.template()}\n\n{(cls.__doc__ or '').strip()}"
    return _located(method)


def _install_methods():
    for name, classes in _method_ops().items():
        if name in KernelBuilder.__dict__:
            continue                          # written by hand: ops with several forms, helpers
        if len(classes) != 1:
            raise TypeError(f"ops {', '.join(c.__name__ for c in classes)} share the builder method {name!r}; "
                            f"write it in KernelBuilder")
        setattr(KernelBuilder, name, _generated_method(classes[0]))


_install_methods()
