"""Kernel-wide rules: smem-capacity (shared memory over what ptxas or the device allows), cluster-size (a
cluster over 8 CTAs needs the non-portable opt-in; over 16 is impossible), debug-timeout (debug= is neither
a bool nor a positive number of seconds), unchecked-tensormap (a tensor-map parameter a TMA instruction uses
has no TensorMapSpec: its checks wait for the launch), mbarrier-state-token (mbarrier.pending_count of a constant:
ptxas fails inside itself on it)."""
from __future__ import annotations

import math

from ..ir import MAX_SHARED_PER_BLOCK, MAX_STATIC_SHARED, Kernel, TensorMapRef
from ..isa.effects import AsyncRead, AsyncWrite, TmapRead
from .rules import diag
from .state import lines

PORTABLE_CLUSTER, MAX_CLUSTER = 8, 16


def findings(k: Kernel):
    """Every kernel-wide finding."""
    for check in (capacity, cluster_size, debug_timeout, unchecked_maps, state_tokens):
        yield from check(k)


def capacity(k: Kernel):
    static = k.static_shared_bytes
    if static > MAX_STATIC_SHARED:
        big = max((a for a in k.shared if not a.dynamic), key=lambda a: a.nbytes)
        yield diag("smem-capacity", f"kernel {k.name!r} declares {static} bytes of static shared memory, over the "
                   f"{MAX_STATIC_SHARED} ptxas allows; declare large buffers with dynamic=True", big.loc)
    total = static + k.dynamic_shared_bytes
    if total > MAX_SHARED_PER_BLOCK:
        yield diag("smem-capacity", f"kernel {k.name!r} needs {total} bytes of shared memory, over the "
                   f"{MAX_SHARED_PER_BLOCK}-byte per-block limit of sm_90", k.shared[-1].loc)


def cluster_size(k: Kernel):
    d = k.directives
    if "reqnctapercluster" in d:
        size, what = math.prod(d["reqnctapercluster"]), f"reqnctapercluster={tuple(d['reqnctapercluster'])}"
    elif "maxclusterrank" in d:
        size, what = d["maxclusterrank"], f"maxclusterrank={d['maxclusterrank']}"
    else:
        return
    if size > MAX_CLUSTER:
        yield diag("cluster-size", f"{what}: {size} CTAs is over the {MAX_CLUSTER} a cluster can have", k.loc)
    elif size > PORTABLE_CLUSTER:
        yield diag("cluster-size", f"{what}: {size} CTAs is over the portable {PORTABLE_CLUSTER}; the launch must "
                   f"opt in with Function.set_non_portable_cluster_size_allowed()", k.loc, "warning")


def debug_timeout(k: Kernel):
    v = k.debug
    if isinstance(v, bool):
        return
    if not isinstance(v, (int, float)) or not 0 < v <= 3600:
        yield diag("debug-timeout", f"debug={v!r}: expected True/False or a wait timeout in seconds "
                   f"(0 < seconds <= 3600)", k.loc)


def unchecked_maps(k: Kernel):
    """A warning per tensor-map parameter without a spec that a TMA instruction reads, naming the checks that
    then run only at launch (ptxdsl.verify.check_launch, with the map the launch binds)."""
    if all(getattr(p, "tmap", None) is not None for p in k.params if p.kind == "tensormap"):
        return
    uses: dict = {}
    for ins in k.walk():
        for e in ins.op.effects():
            ref = getattr(e, "tmap", None) if isinstance(e, (AsyncWrite, AsyncRead, TmapRead)) else None
            if isinstance(ref, TensorMapRef) and ref.param is not None and getattr(ref.param, "tmap", None) is None:
                uses.setdefault(ref.param, []).append((ins, isinstance(e, AsyncWrite)))
    for p, sites in uses.items():
        off = ["coord-align", "tma-smem-bounds", "tma-smem-align", "the instruction's rank, mode and element-type "
               "rules"]
        if any(load for _, load in sites):
            off.insert(0, "expect-tx-mismatch (the bytes of its box)")
        yield diag("unchecked-tensormap", f"tensor map {p.name!r} has no TensorMapSpec, so its use at "
                   f"{lines([s for s, _ in sites])} is checked only when the kernel is launched: "
                   f"{', '.join(off)}; declare it with param_tensormap({p.name!r}, spec) (in .ptxd: "
                   f"`tensormap {p.name}: DTYPE[SHAPE] box [...]`) to check them now", p.loc)


def state_tokens(k: Kernel):
    """mbarrier.pending_count reads the state token an arrive returned; of a register that holds a constant (a
    mov of an immediate), ptxas 13 fails with an internal error (C7907) instead of a message."""
    from .facts import facts_of

    counts = [ins for ins in k.walk() if type(ins.op).mnemonic == "mbarrier.pending_count"]
    if not counts:
        return
    facts = facts_of(k)
    for ins in counts:
        const = facts.get(ins.op.state).const
        if const is not None:
            yield diag("mbarrier-state-token", f"mbarrier.pending_count reads {ins.op.state}, which holds the constant "
                       f"{const}, not a state token an mbarrier arrive returned (ptxas fails inside itself on it, "
                       f"error C7907); pass the register k.mbarrier_arrive(bar, state=True) returns", ins.loc)
