"""Tensor maps edited on the device: tensormap.replace, published with tensormap.cp_fenceproxy (or a
fence.proxy.tensormap release), acquired with fence.proxy.tensormap::generic.acquire before a copy uses them.

Rules: tensormap-release (a map used while an edit is not published), tensormap-acquire (a kernel that edits
maps uses one without acquiring it), tensormap-align (a shared-memory map not 128-byte aligned).
"""
from __future__ import annotations

from ..ir import Addr, TensorMapRef
from ..isa.effects import TmapEdit, TmapPublish
from .facts import key_name
from .state import line, placement

TENSORMAP_ALIGN = 128           # a shared-memory working copy of a tensor map


def edits(k) -> bool:
    """Whether the kernel edits or publishes tensor maps (then every map it uses must be acquired)."""
    return any(isinstance(e, (TmapEdit, TmapPublish)) for ins in k.walk() for e in ins.op.effects())


def use(cx, s, tmap, st):
    """A copy or prefetch reads the tensor map `tmap` (a parameter's needs nothing)."""
    if not isinstance(tmap, TensorMapRef) or tmap.param is not None:
        return
    if st.unreleased:
        cx.report("tensormap-release", f"this uses a tensor map while the tensormap.replace at "
                  f"{line(st.unreleased[0])} is not published: copy it out with tensormap.cp_fenceproxy "
                  f"(release) first", s, st.unreleased[0])
    elif cx.edits_maps and tmap.addr not in st.acquired:
        cx.report("tensormap-acquire", f"this uses the tensor map at {tmap.addr.name}, which this kernel "
                  f"edits, without fence.proxy.tensormap::generic.acquire [{tmap.addr.name}], 128 before it", s)


def _align(cx, s, v):
    w = cx.where(v) if v is not None else None
    if w is None or w[1] is None:
        return
    a, off = w
    align, addr = placement(cx.k, a, off)
    if align < TENSORMAP_ALIGN or addr % TENSORMAP_ALIGN:
        cx.report("tensormap-align", f"the tensor map at {key_name(w)} is not {TENSORMAP_ALIGN}-byte aligned "
                  f"(buffer align {a.align}, offset {off}); keep shared copies of tensor maps 128-byte "
                  f"aligned", s)


def edit(cx, s, e, st, ctx):
    st.unreleased = st.unreleased + (s,)
    _align(cx, s, e.addr)


def publish(cx, s, e, st, ctx):
    st.unreleased = ()
    _align(cx, s, e.src)
    _align(cx, s, e.dst)


def fence(cx, s, e, st, ctx):
    """fence.proxy.tensormap::generic: a release publishes the edits, an acquire makes one map usable."""
    if e.proxy != "tensormap":
        return
    if e.sem == "release":
        st.unreleased = ()
    else:
        st.acquired = st.acquired | {e.addr.base if isinstance(e.addr, Addr) else e.addr}
