"""TMA and bulk copies: the boxes they move and the barriers they complete on.

Box sizes come from the tensor map's TensorMapSpec (`box_bytes`: the transaction count, `smem_bytes`: the
shared memory a box takes). Rules: tma-smem-align (a box not aligned to 128 bytes or to its swizzle
pattern), tma-smem-bounds (a box that overruns its buffer), coord-align (an innermost start offset
statically off a 16-byte boundary), multicast-mask (a mask with no bit set or bits outside the cluster).
A load also feeds the transaction count of its barrier (transactions) and the loads in flight (memory); a
store joins a bulk group (bulk_groups).

A tensor-map parameter declared without a spec gets an `unchecked-tensormap` warning, and in the walk that
prepares the launch checks (`cx.blind`: every map's spec is taken as unknown, the launch binds it) each of these
rules becomes a launch check (verify/deferred.py). A coordinate whose alignment is not static becomes a launch
check when it depends on parameters, and a device check in debug mode (`cx.device`, ptxdsl.watchdog).
"""
from __future__ import annotations

import math

from ..ir import Reg, TensorMapRef
from ..tensormap import SWIZZLE_SPAN
from . import bulk_groups, memory, mbarrier, tensormaps, transactions
from .deferred import BoxCheck, CoordCheck, MaskCheck, OpCheck, launchable
from .facts import _res_add, _res_mul, imm_val, key_name
from .state import Pending, imm, placement, times
from .symbols import is_static, sym

TMA_SMEM_ALIGN = 128


def spec_of(tmap):
    """The TensorMapSpec of a tensor-map parameter, if it was declared with one."""
    p = tmap.param if isinstance(tmap, TensorMapRef) else None
    return getattr(p, "tmap", None) if p is not None else None


def map_param(cx, tmap):
    """The tensor-map parameter whose box a TMA operand moves: the parameter it names, or the one a map in memory
    was made from (tensormaps.origins); None otherwise."""
    if not isinstance(tmap, TensorMapRef):
        return None
    return tmap.param if tmap.param is not None else cx.origins.get(tmap.addr)


def _spec(cx, tmap):
    """The spec the walk uses: the declared one, or none in the walk that prepares the launch checks."""
    p = map_param(cx, tmap)
    return None if cx.blind or p is None else getattr(p, "tmap", None)


def _size(spec, what):
    """spec.box_bytes / spec.smem_bytes, or None without a (well-formed) spec."""
    try:
        return None if spec is None else int(getattr(spec, what))
    except (ValueError, KeyError, TypeError):
        return None


def _coords(cx, s, e, spec):
    """coord-align: a tile box (one coordinate per dimension) must start on a 16-byte boundary."""
    if not e.coords:
        return
    p = map_param(cx, e.tmap)
    if spec is None:
        if p is not None and cx.blind:
            _defer_coord(cx, s, e.coords[0], p.name, None)
        return
    if spec.kind != "tiled" or len(e.coords) != spec.rank:
        return
    eb = spec.elem_bytes
    if eb >= 16:
        return
    need = 16 // eb
    j = need.bit_length() - 1
    k, r = cx.facts.get(e.coords[0]).res
    if k >= j:
        if r % need:
            cx.report("coord-align", f"the innermost coordinate is {r % need} (mod {need}) elements: the box "
                      f"starts {(r % need) * eb} bytes past a 16-byte boundary of the {spec.dtype} tensor, which "
                      f"TMA rejects (illegal instruction); use a multiple of {need}", s)
        return
    if isinstance(e.coords[0], Reg):
        cx.device_check(s, ("coord", e.coords[0], need, eb, spec.dtype))


def _defer_coord(cx, s, coord, map_name, spec):
    """A launch check of the innermost coordinate: its parameter terms, and the residue of the rest."""
    v = cx.value(coord)
    if v is None:
        return
    if is_static(v):
        terms, rest = (), (64, v % (1 << 64))
    else:
        terms = tuple((x.name, c) for x, c in v.terms if x.kind == "param")
        rest = (64, v.const % (1 << 64))
        for x, c in v.terms:
            if x.kind != "param":
                rest = _res_add(rest, _res_mul(cx.facts.get(cx.resolve.reg_named(x.name)).res,
                                               imm_val(c % (1 << 64)).res))
    cx.defer(CoordCheck(s.loc, map_name, spec, terms, rest), s)


def _smem_align(cx, s, v, spec, what, tmap=None):
    w = cx.where(v)
    if w is None or w[1] is None:
        return
    a, off = w
    align, addr = placement(cx.k, a, off)
    p = map_param(cx, tmap)
    if spec is None:
        if p is not None and cx.blind:
            got = math.gcd(align, addr) if addr else align
            cx.defer(BoxCheck(s.loc, p.name, key_name(w), None, got, what, "tma-smem-align"), s)
        return
    swz = getattr(spec, "swizzle", "none")
    span = SWIZZLE_SPAN.get(swz, 0)
    need = max(TMA_SMEM_ALIGN, span * 8)
    if align < need or addr % need:
        why = f"its {swz} swizzle pattern repeats every {need} bytes" if span else "TMA boxes need 128 bytes"
        cx.report("tma-smem-align", f"{what} {key_name(w)} is only {math.gcd(align, addr) if addr else align}-"
                  f"byte aligned, but {why}; declare the buffer with align={need}", s)


def _box_range(cx, s, v, spec, what, tmap=None):
    """The bytes a TMA box occupies in shared memory at `v`; reports a box that overruns its buffer."""
    size = _size(spec, "smem_bytes")
    r = cx.rng(v, size)
    p = map_param(cx, tmap)
    if spec is None and p is not None and cx.blind and r is not None and r.off is not None:
        a = r.alloc
        last = a.dynamic and a.offset + a.nbytes == cx.k.dynamic_shared_bytes
        cx.defer(BoxCheck(s.loc, p.name, a.name, a.nbytes - r.off, 0, what,
                          window=cx.k.dynamic_shared_bytes if last else None), s)
    if r is not None and r.off is not None and size is not None and r.off + size > r.alloc.nbytes:
        cx.report("tma-smem-bounds", f"the TMA {what} box takes {size} bytes of shared memory but "
                  f"{r.alloc.name} has {r.alloc.nbytes - r.off} from offset {r.off}", s)
    return r


def _multicast(cx, s, mask, n, ctx):
    """Bytes each CTA's barrier receives from a multicast load (None when that is not static)."""
    m = cx.facts.get(mask).const
    if cx.blind and cx.cluster is None or m is None:
        v = cx.value(mask)
        if cx.blind and v is not None and launchable(v):
            cx.defer(MaskCheck(s.loc, v), s)
        return None
    m &= 0xFFFF
    if m == 0:
        cx.report("multicast-mask", "the multicast mask is 0: the load writes no CTA and its barrier never "
                  "completes", s)
        return None
    if cx.cluster is None:
        return None
    if m >> cx.cluster:
        cx.report("multicast-mask", f"multicast mask {m:#x} names CTA ranks up to {m.bit_length() - 1}, but "
                  f"the cluster has {cx.cluster} CTAs (reqnctapercluster)", s)
        return None
    if m != (1 << cx.cluster) - 1 or n is None:
        return None
    issuers = cx.cluster if ctx.issuers == "all" else ctx.issuers
    return None if issuers is None else n * issuers


def _complete_on_barrier(cx, s, e, st, ctx, dst, size, log_multicast=False):
    """An async write of `dst` whose `size` bytes complete on e.bar (multicast counted)."""
    if dst is not None:
        bulk_groups.overwrite(cx, s, dst, st)
    key = mbarrier.bar_key(cx, e.bar, s)
    st.inflight = st.inflight + (Pending(dst, s, key, later=ctx.later),)
    if key is None:
        st.acc = {k: None for k in st.acc}
        return
    mbarrier.use(cx, key, s, st, ctx, "tma")
    if e.multicast is not None:
        mbarrier.use(cx, key, s, st, ctx, "multicast")
    n = times(size, ctx.mult)
    if e.multicast is not None:
        n = _multicast(cx, s, e.multicast, n, ctx)
        if log_multicast and ctx.mc_log is not None and n is not None:
            ctx.mc_log.append((key, n))
    transactions.deliver(st, key, n, s)


# ----------------------------------------------------------------------------------- effects


def _box_bytes(cx, spec, tmap):
    """The transaction bytes of one box: the spec's, or the box of a parameter the launch binds (a Lin)."""
    n = _size(spec, "box_bytes")
    p = map_param(cx, tmap)
    if n is None and spec is None and p is not None:
        return sym("box", p.name)
    return n


def _op_rules(cx, s, tmap):
    """At launch, the instruction's own rules for a map the launch binds (rank, mode, element type)."""
    p = tmap.param if isinstance(tmap, TensorMapRef) else None
    if cx.blind and p is not None:
        cx.defer(OpCheck(s.loc, s.op, tmap, p.name), s)


def load(cx, s, e, st, ctx):
    """An async write of shared memory that completes on an mbarrier: a TMA load (the box of e.tmap), or a
    bulk copy, st.async, red.async (e.size bytes)."""
    if e.tmap is None:
        size = imm(e.size)
        dst = cx.rng(e.dst, size) if e.dst is not None else None
        _complete_on_barrier(cx, s, e, st, ctx, dst, size)
        return
    spec = _spec(cx, e.tmap)
    tensormaps.use(cx, s, e.tmap, st)
    _op_rules(cx, s, e.tmap)
    _coords(cx, s, e, spec)
    _smem_align(cx, s, e.dst, spec, "the TMA destination", e.tmap)
    dst = _box_range(cx, s, e.dst, spec, "destination", e.tmap)
    _complete_on_barrier(cx, s, e, st, ctx, dst, _box_bytes(cx, spec, e.tmap), log_multicast=True)


def read(cx, s, e, st, ctx):
    """An async read of shared memory: a TMA store / reduce (the box of e.tmap) or a bulk copy out of it. It
    joins the thread's bulk group unless it completes on an mbarrier."""
    if e.tmap is None:
        src = cx.rng(e.src, imm(e.size))
    else:
        spec = _spec(cx, e.tmap)
        tensormaps.use(cx, s, e.tmap, st)
        _op_rules(cx, s, e.tmap)
        _coords(cx, s, e, spec)
        _smem_align(cx, s, e.src, spec, "the TMA source", e.tmap)
        src = _box_range(cx, s, e.src, spec, "source", e.tmap)
    memory.async_source(cx, s, src, st)
    if e.bar is None:
        bulk_groups.join(cx, s, src, st, ctx)


def prefetch(cx, s, e, st, ctx):
    """A read of a tensor map alone (a prefetch of a box, or of the map)."""
    tensormaps.use(cx, s, e.tmap, st)
    _op_rules(cx, s, e.tmap)
    _coords(cx, s, e, _spec(cx, e.tmap))
