"""The GPU kernels of the differential harness: one per kernel shape (operation, rank, reduce op).

Kernels take the tensor map, the coordinates and every size as arguments, so one JIT-loaded module per
`kernel_key()` serves every `TmaCase` of that shape. A load kernel fills its whole dynamic shared window
(1024-byte aligned) with a fill byte, TMA-loads the box and copies the window out with
ld.shared/st.global; a multicast kernel does so in both CTAs of a cluster of 2, the load issued by one
cluster rank to the CTAs of a mask; a store or reduce kernel copies a global image into the window with
ordinary stores, runs fence.proxy.async.shared::cta and issues the TMA store or reduction. Waits are
bounded by %globaltimer, so a lost transaction reports a timeout instead of hanging the device. Thread 0
of each CTA writes its status and the window's shared address to `info` (INFO_WORDS words per CTA).
"""
from __future__ import annotations

from functools import lru_cache

import ptxdsl as px
from ptxdsl import reference as ref
from ptxdsl import sreg

from .cases import SMEM_ALIGN, TmaCase

RANKS = (1, 2, 3, 4, 5)
REDUCE_OPS = tuple(ref.REDUCE_TYPES)
THREADS = 128
WAIT_LIMIT_NS = 200_000_000   # a TMA wait gives up after 0.2 s and reports a timeout
STATUS_DONE, STATUS_TIMEOUT = 1, 2
INFO_WORDS = 4                # per CTA: status, shared address of the box, 0, 0


def kernel_key(case: TmaCase) -> tuple:
    """The shape of a case's kernel: what the PTX depends on (everything else is an argument)."""
    return (case.op, case.rank, case.reduce_op) if case.op == "reduce" else (case.op, case.rank)


def kernel_keys() -> list[tuple]:
    """Every kernel shape the harness can use."""
    keys = [(op, r) for op in ("load", "multicast", "store") for r in RANKS]
    return keys + [("reduce", r, op) for op in REDUCE_OPS for r in RANKS]


def kernel_name(key: tuple) -> str:
    """load_r2, multicast_r5, store_r1, reduce_add_r3, ..."""
    return "_".join(str(k) for k in (key[0], *key[2:], f"r{key[1]}"))


def _coords(k, rank):
    """The box coordinates as .s32 parameters c0..c{rank-1}, innermost first."""
    return [k.param(f"c{i}", px.s32) for i in range(rank)]


def _wait(k, bar):
    """Spin on mbarrier.try_wait.parity 0 until the phase completes or WAIT_LIMIT_NS pass; the
    predicate it returns says whether the phase completed."""
    t0 = k.mov(sreg.globaltimer)
    retry = k.label("retry")
    done = k.mbarrier_try_wait(bar, parity=0, sem="acquire", scope="cta")
    late = k.setp("ge", k.sub(k.mov(sreg.globaltimer), t0), WAIT_LIMIT_NS)
    with k.guard(k.not_(k.or_(done, late))):
        k.bra(retry)
    return done


def _copy_chunks(k, tid, nbytes, body):
    """for (i = tid; i < nbytes / 16; i += THREADS) body(byte offset of chunk i)."""
    with k.loop(tid, k.shr(nbytes, 4), THREADS) as i:
        body(k.shl(i, 4))


def _build_load(key: tuple):
    """load_rN / multicast_rN(src tensormap, out, info, nbytes, fill, tx, c0.., [mask, issuer]): fill the
    window with `fill`, cp.async.bulk.tensor the box (multicast::cluster to the CTAs of `mask`, issued by
    cluster rank `issuer`), wait with a bound, copy the window to out + rank * nbytes."""
    op, rank = key
    multicast = op == "multicast"
    with px.kernel(kernel_name(key), reqntid=THREADS) as k:
        src = k.param_tensormap("src")
        out = k.param_ptr("out")
        info = k.param_ptr("info")
        nbytes = k.param("nbytes", px.u32)
        fill = k.param("fill", px.u32)
        tx = k.param("tx", px.u32)
        coords = _coords(k, rank)
        if multicast:
            mask = k.param("mask", px.u16)
            issuer = k.param("issuer", px.u32)
        box = k.shared("box", SMEM_ALIGN, align=SMEM_ALIGN, dynamic=True)
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        cta = k.mov(sreg.cluster_ctarank) if multicast else k.mov(0, px.u32)
        with k.if_(is_t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        base = k.mov(box)
        _copy_chunks(k, tid, nbytes, lambda off: k.st(px.b32, k.add(base, off), (fill,) * 4, space="shared::cta"))
        k.fence_proxy_async("shared::cta")
        k.bar_sync(0)
        status = k.mov(0, px.u32)
        if multicast:
            receives = k.setp("ne", k.and_(k.shr(k.cvt(px.u32, mask), cta), 1), 0)
            with k.if_(k.and_(is_t0, receives)):
                k.mbarrier_arrive_expect_tx(bar, tx, sem="release", scope="cta")
            k.barrier_cluster_arrive(sem="release")
            k.barrier_cluster_wait(sem="acquire")
            with k.if_(k.and_(is_t0, k.setp("eq", cta, issuer))):
                k.cp_async_bulk_tensor(box, src, coords, mbar=bar, multicast=mask)
            with k.if_(receives):
                k.selp(STATUS_DONE, STATUS_TIMEOUT, _wait(k, bar), type=px.u32, out=status)
        else:
            with k.if_(is_t0):
                k.mbarrier_arrive_expect_tx(bar, tx, sem="release", scope="cta")
                k.cp_async_bulk_tensor(box, src, coords, mbar=bar)
            k.selp(STATUS_DONE, STATUS_TIMEOUT, _wait(k, bar), type=px.u32, out=status)
        out_cta = k.add(out, k.mul(cta, nbytes, mode="wide"))
        with k.allow("tma-load-race"):      # _wait's bounded spin is a loop the verifier does not follow
            _copy_chunks(k, tid, nbytes, lambda off: k.st(
                px.b32, k.add(out_cta, k.cvt(px.u64, off)), k.ld(px.b32, k.add(base, off), space="shared::cta", vec=4)))
        _write_info(k, info, cta, is_t0, status, base)
        if multicast:
            k.barrier_cluster_arrive(sem="release")
            k.barrier_cluster_wait(sem="acquire")
    return k


def _build_store(key: tuple):
    """store_rN / reduce_OP_rN(dst tensormap, src, info, nbytes, c0..): copy src into the window, then
    cp.async.bulk.tensor (or cp.reduce.async.bulk.tensor OP) it to the box and wait for the bulk group."""
    op, rank = key[:2]
    with px.kernel(kernel_name(key), reqntid=THREADS) as k:
        dst = k.param_tensormap("dst")
        src = k.param_ptr("src")
        info = k.param_ptr("info")
        nbytes = k.param("nbytes", px.u32)
        coords = _coords(k, rank)
        box = k.shared("box", SMEM_ALIGN, align=SMEM_ALIGN, dynamic=True)
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        base = k.mov(box)
        _copy_chunks(k, tid, nbytes, lambda off: k.st(
            px.b32, k.add(base, off), k.ld(px.b32, k.add(src, k.cvt(px.u64, off)), vec=4), space="shared::cta"))
        k.fence_proxy_async("shared::cta")
        k.bar_sync(0)
        with k.if_(is_t0):
            if op == "store":
                k.cp_async_bulk_tensor(dst, box, coords)
            else:
                k.cp_reduce_async_bulk_tensor(key[2], dst, box, coords)
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group(0)
        _write_info(k, info, k.mov(0, px.u32), is_t0, k.mov(STATUS_DONE, px.u32), base)
    return k


def _write_info(k, info, cta, is_t0, status, base):
    """Thread 0 writes its CTA's status and the box's shared address to info + 16 * cta."""
    with k.if_(is_t0):
        slot = k.add(info, k.mul(cta, 4 * INFO_WORDS, mode="wide"))
        k.st(px.u32, slot, status)
        k.st(px.u32, k.add(slot, 4), base)


def build_kernel(key: tuple):
    """The KernelBuilder (finished) for one kernel shape."""
    return _build_load(key) if key[0] in ("load", "multicast") else _build_store(key)


def launcher(key: tuple):
    """A JIT-loaded launcher for one kernel shape, loaded once per process (and once for the CPU interpreter,
    while it is the current device)."""
    from ..runtime.device import host_device

    return _launcher(key, host_device() is not None)


@lru_cache(maxsize=None)
def _launcher(key: tuple, cpu: bool):
    return px.compile(build_kernel(key))[kernel_name(key)]

