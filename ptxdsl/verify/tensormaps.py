"""Tensor maps edited on the device: tensormap.replace, published with tensormap.cp_fenceproxy (or a
fence.proxy.tensormap release), acquired with fence.proxy.tensormap::generic.acquire before a copy uses them.

Rules: tensormap-release (a map used while an edit is not published), tensormap-acquire (a kernel that edits
maps uses one without acquiring it), tensormap-align (a shared-memory map not 128-byte aligned).

An edit published by some threads only (warp 0's cp_fenceproxy under `if warp == 0`) counts as published for
every thread after the next bar.sync.

`origins` finds maps in memory made from a tensor-map parameter (its 128 bytes copied to shared memory, only its
address, dims or strides edited, then published): such a map moves the parameter's box, so the box checks apply
to copies through it.
"""
from __future__ import annotations

from ..ir import Addr, Param, Reg, SharedAlloc, TensorMapRef
from ..isa.effects import Access, Barrier, Compute, TmapEdit, TmapPublish
from .facts import key_name
from .state import line, placement

TENSORMAP_ALIGN = 128           # a shared-memory working copy of a tensor map
MAP_BYTES = 128
BOX_KEEPING = frozenset({"global_address", "global_dim", "global_stride"})   # edits that keep box and dtype


def _static_where(v):
    if isinstance(v, Addr) and isinstance(v.base, SharedAlloc):
        return (v.base, v.offset)
    return (v, 0) if isinstance(v, SharedAlloc) else None


def origins(k, where=_static_where) -> dict:
    """{register: Param}: registers holding the address of a map made from a tensor-map parameter's bytes
    (ld.param of all 128 bytes, stored to a shared buffer at the same offsets), edited only in its address,
    dims or strides (tensormap.replace), and published (tensormap.cp_fenceproxy) to the address in the
    register; and the registers mov/cvta copy it to."""
    loaded, copied, spoiled, out = {}, {}, set(), {}
    for ins in k.walk():
        op = ins.op
        for e in op.effects():
            if isinstance(e, Access) and e.space == "param":
                p = e.addr.base if isinstance(e.addr, Addr) else e.addr
                regs = [r for r in op.defs() if isinstance(r, Reg)]
                if isinstance(p, Param) and p.kind == "tensormap" and regs:
                    off, size = e.addr.offset if isinstance(e.addr, Addr) else 0, e.nbytes // len(regs)
                    for j, r in enumerate(regs):
                        loaded[r] = (p, off + j * size)
            elif isinstance(e, Access) and e.write:
                w = where(e.addr)
                vals = [u for u in op.uses() if isinstance(u, Reg) and u in loaded]
                if w is not None and w[1] is not None and vals:
                    size = e.nbytes // len(vals)
                    for j, r in enumerate(vals):
                        copied[(w[0], w[1] + j * size)] = loaded[r]
            elif isinstance(e, TmapEdit):
                w = where(e.addr)
                if w is not None and e.field not in BOX_KEEPING:
                    spoiled.add(w[0])
            elif isinstance(e, TmapPublish):
                dst = e.dst.base if isinstance(e.dst, Addr) and not e.dst.offset else e.dst
                if not isinstance(dst, Reg):
                    continue
                w = where(e.src)
                if w is None or w[0] in spoiled:
                    continue
                parts = [copied.get((w[0], (w[1] or 0) + i)) for i in range(0, MAP_BYTES, 4)]
                first = parts[0]
                if first is not None and all(x is not None and x[0] is first[0] and x[1] == i * 4
                                             for i, x in enumerate(parts)):
                    out[dst] = first[0]
            elif isinstance(e, Compute) and e.fn in ("mov", "cvta") and e.args and e.args[0] in out:
                out[e.dst] = out[e.args[0]]
    return out


def edits(k) -> bool:
    """Whether the kernel edits or publishes tensor maps (then every map it uses must be acquired)."""
    return any(isinstance(e, (TmapEdit, TmapPublish)) for ins in k.walk() for e in ins.op.effects())


def use(cx, s, tmap, st):
    """A copy or prefetch reads the tensor map `tmap` (a parameter's needs nothing)."""
    if not isinstance(tmap, TensorMapRef) or tmap.param is not None:
        return
    if st.unreleased:
        edit = st.unreleased[0]
        cx.report("tensormap-release", f"this uses a tensor map while the tensormap.replace at {line(edit)} is not "
                  f"published: {_fix(cx, edit)}", s, edit)
    elif st.unsynced:
        edit = st.unsynced[0]
        cx.report("tensormap-release", f"this uses a tensor map whose edit at {line(edit)} other threads published, "
                  f"with no bar.sync since: put bar.sync between their publish and this use", s, edit)
    elif cx.edits_maps and tmap.addr not in st.acquired:
        cx.report("tensormap-acquire", f"this uses the tensor map at {tmap.addr.name}, which this kernel "
                  f"edits, without fence.proxy.tensormap::generic.acquire [{tmap.addr.name}], 128 before it", s)


def _fix(cx, edit) -> str:
    """How to publish an edit: a shared-memory copy goes out with cp_fenceproxy; a map edited in place in global
    memory is released with fence.proxy.tensormap::generic.release."""
    e = next((x for x in edit.op.effects() if isinstance(x, TmapEdit)), None)
    if e is not None and cx.where(e.addr) is None:
        return ("it was edited in place in global memory, so release it with fence.proxy.tensormap::generic.release "
                "(k.fence_proxy_tensormap('release', 'gpu')) after the edit, and acquire it with "
                "fence.proxy.tensormap::generic.acquire on its address before this use")
    return "copy it out with tensormap.cp_fenceproxy (release, a whole warp) first"


def join(entry, a, b, both_run):
    """(unreleased, unsynced) after two branches: an edit that one group of threads published while the others
    did not is published once a bar.sync follows."""
    unreleased = tuple(dict.fromkeys(a.unreleased + b.unreleased))
    unsynced = tuple(dict.fromkeys(a.unsynced + b.unsynced))
    if both_run:
        published = tuple(x for x in unreleased if x in entry.unreleased and (x not in a.unreleased
                                                                                or x not in b.unreleased))
        unreleased = tuple(x for x in unreleased if x not in published)
        unsynced = tuple(dict.fromkeys(unsynced + published))
    return unreleased, unsynced


def sync(cx, s, e, st, ctx):
    """A CTA barrier: an edit some threads published is published for all."""
    if isinstance(e, Barrier) and e.wait:
        st.unsynced = ()


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
    st.unsynced = ()
    _align(cx, s, e.src)
    _align(cx, s, e.dst)


def fence(cx, s, e, st, ctx):
    """fence.proxy.tensormap::generic: a release publishes the edits, an acquire makes one map usable."""
    if e.proxy != "tensormap":
        return
    if e.sem == "release":
        st.unreleased = ()
        st.unsynced = ()
    else:
        st.acquired = st.acquired | {e.addr.base if isinstance(e.addr, Addr) else e.addr}
