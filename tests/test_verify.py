"""The verifier: every rule rejects a minimal bad kernel (the error names the rule and the bad line) and
accepts the fixed one; the seed examples pass clean; Hypothesis mutates correct generated kernels (drop a
fence, change a byte count, flip a parity, move a wait, ...) and every mutation is flagged; debug mode
costs nothing when off."""
import inspect
import os
import re
from contextlib import contextmanager, nullcontext

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.cli import load_kernels
from ptxdsl.descriptor import MatrixLayout
from ptxdsl.errors import shown_path
from ptxdsl.fragment import Accumulator
from ptxdsl.reference import smem_layout, tx_bytes
from ptxdsl.verify import RULES, check, format_diagnostics

HERE = os.path.basename(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = px.TensorMapSpec.tiled_for((256, 512), "bf16", (64, 64))      # one box = 8192 bytes
BOX = tx_bytes(SPEC)
SWIZZLED = px.TensorMapSpec.tiled_for((128, 128), "f32", (32, 32), swizzle="128B")


# ------------------------------------------------------------------------------------ helpers

def setup(k, spec=SPEC, align=128, nbytes=BOX):
    """A tensor-map param, a tile, one mbarrier, and the predicate tid == 0."""
    src = k.param_tensormap("src", spec)
    tile = k.shared("tile", nbytes, align=align)
    bar = k.mbarrier("bar")
    tid = k.tid_x()
    return src, tile, bar, tid, k.setp("eq", tid, 0)


def init(k, bar, t0):
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)


def load(k, src, tile, bar, t0, coords=(0, 0), tx=BOX):
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, tx)
        k.cp_async_bulk_tensor(tile, src, coords, mbar=bar)


def each_thread(k, tile, tid):
    """The 4-byte slot of `tile` this thread owns."""
    return k.add(k.mov(tile), k.shl(tid, 2))


def tmap_edit(k):
    """A global tensor-map slot (its global and generic address), a 128-byte aligned shared working copy,
    and the warp-0 predicate."""
    gslot = k.param_ptr("gmap")
    tms = k.shared("tms", 128, align=128)
    warp0 = k.setp("eq", k.warp_idx(), 0)
    return gslot, k.cvta(gslot, "global"), tms, warp0


# ------------------------------------------------------------------- one bad/fixed pair per rule

def uninit_bad(k):
    src, tile, bar, tid, t0 = setup(k)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def uninit_good(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)


def init_fence_bad(k):
    src, tile, bar, tid, t0 = setup(k)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
    k.bar_sync(0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def expect_bad(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX + 16)  # BAD
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
    k.mbarrier_wait(bar, parity=0)


def tx_range_bad(k, each=600_000):
    bar = k.mbarrier("bar")
    with k.if_(k.setp("eq", k.tid_x(), 0)):
        k.mbarrier_init(bar, 1)
        k.mbarrier_expect_tx(bar, each)
        k.mbarrier_arrive_expect_tx(bar, each)  # BAD
        k.mbarrier_complete_tx(bar, each)
        k.mbarrier_complete_tx(bar, each)
        k.mbarrier_wait(bar, parity=0)


def phase_bad(k, second=0):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)
    k.bar_sync(0)
    load(k, src, tile, bar, t0, coords=(64, 0))
    k.mbarrier_wait(bar, parity=second)  # BAD


def loop_bad(k, flip=False):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    phase = k.mov(0, px.u32)
    with k.loop(0, 4) as i:
        load(k, src, tile, bar, t0, coords=(0, k.shl(i, 6)))
        k.mbarrier_wait(bar, parity=phase)  # BAD
        if flip:
            k.xor(phase, 1, out=phase)
        k.bar_sync(0)


def wait_first_bad(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    k.mbarrier_wait(bar, parity=0)  # BAD
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=1)


def wait_first_good(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)


def proxy_fence_bad(k, fence=False):
    dst = k.param_tensormap("dst", SPEC)
    tile = k.shared("tile", BOX, align=128)
    tid = k.tid_x()
    k.st(px.u32, each_thread(k, tile, tid), tid, space="shared::cta")
    if fence:
        k.fence_proxy_async(space="shared::cta")
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0)):
        k.cp_async_bulk_tensor(dst, tile, (0, 0))  # BAD
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group_read(0)


def flag_handoff(k, wait="full", store_fence=True, load_fence=True):
    """Thread 0 of group 0 TMA-stores a tile and publishes a flag; thread 0 of the other groups waits for the
    flag and adds its tile with a TMA reduce (the ordered split accumulation of examples/pipe_splitsum.py)."""
    from ptxdsl.pipeline import Flags

    y = k.param_tensormap("y", SPEC)
    flags = Flags(k, "flag", k.param_ptr("flags"))
    epoch, group = k.param("epoch", px.u32), k.param("group", px.u32)
    tile = k.shared("tile", BOX, align=128)
    with k.if_(k.setp("eq", k.tid_x(), 0)):
        with k.if_(k.setp("eq", group, 0)):
            k.cp_async_bulk_tensor(y, tile, (0, 0))
            k.cp_async_bulk_commit_group()
            if wait == "full":
                k.cp_async_bulk_wait_group(0)
            elif wait == "read":
                k.cp_async_bulk_wait_group_read(0)
            if store_fence:
                k.fence_proxy_async("global")
            flags.publish(0, epoch)  # PUBLISH
        with k.else_():
            flags.wait(0, epoch)
            if load_fence:
                k.fence_proxy_async("global")
            k.cp_reduce_async_bulk_tensor("add", y, tile, (0, 0))  # REDUCE
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group_read(0)



def load_race_bad(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.st(px.u32, each_thread(k, tile, tid), tid, space="shared::cta")  # BAD
    k.mbarrier_wait(bar, parity=0)


def load_race_good(k):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)
    k.st(px.u32, each_thread(k, tile, tid), tid, space="shared::cta")


def group_pending_bad(k, wait_first=False):
    dst = k.param_tensormap("dst", SPEC)
    tile = k.shared("tile", BOX, align=128)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        k.cp_async_bulk_tensor(dst, tile, (0, 0))
        k.cp_async_bulk_commit_group()
        if wait_first:
            k.cp_async_bulk_wait_group_read(0)
    k.bar_sync(0)
    k.st(px.u32, each_thread(k, tile, tid), tid, space="shared::cta")  # BAD
    with k.if_(t0):
        k.cp_async_bulk_wait_group_read(0)


def store_after_writes(k, sync=True):
    """Every thread writes its slot of a tile (after a TMA load it waits for), then thread 64 stores the tile with
    TMA: the others' writes reach the store only through a bar.sync after their fence.proxy.async."""
    src, dst = k.param_tensormap("src", SPEC), k.param_tensormap("dst", SPEC)
    tile, out = k.shared("tile", BOX, align=128), k.shared("out", BOX, align=128)
    bar = k.mbarrier("bar")
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    init(k, bar, t0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)
    k.st(px.u32, each_thread(k, out, tid), tid, space="shared::cta")
    k.fence_proxy_async("shared::cta")
    if sync:
        k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 64)):
        k.cp_async_bulk_tensor(dst, out, (0, 0))  # STORE
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group_read(0)


def group_exit_bad(k, wait=False):
    dst = k.param_tensormap("dst", SPEC)
    tile = k.shared("tile", BOX, align=128)
    with k.if_(k.setp("eq", k.tid_x(), 0)):
        k.cp_async_bulk_tensor(dst, tile, (0, 0))  # BAD
        k.cp_async_bulk_commit_group()
        if wait:
            k.cp_async_bulk_wait_group_read(0)


def release_bad(k, publish=False):
    gslot, gmap, tms, warp0 = tmap_edit(k)
    tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
    with k.if_(warp0):
        with k.elect_one():
            k.tensormap_replace(tms, "global_address", k.param("base", px.u64))
        if publish:
            k.tensormap_cp_fenceproxy(gslot, tms)
        k.fence_proxy_tensormap("acquire", "gpu", gmap)
        with k.elect_one():
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, px.TensorMapRef(gmap), (0, 0), mbar=bar)  # BAD
            k.mbarrier_wait(bar, parity=0)


def acquire_bad(k, acquire=False):
    gslot, gmap, tms, warp0 = tmap_edit(k)
    tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
    with k.if_(warp0):
        with k.elect_one():
            k.tensormap_replace(tms, "global_address", k.param("base", px.u64))
        k.tensormap_cp_fenceproxy(gslot, tms)
        if acquire:
            k.fence_proxy_tensormap("acquire", "gpu", gmap)
        with k.elect_one():
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, px.TensorMapRef(gmap), (0, 0), mbar=bar)  # BAD
            k.mbarrier_wait(bar, parity=0)


def aligned_bad(k):
    gslot, gmap, tms, warp0 = tmap_edit(k)
    with k.if_(k.setp("eq", k.tid_x(), 0)):
        k.tensormap_cp_fenceproxy(gslot, tms)  # BAD


def aligned_good(k):
    gslot, gmap, tms, warp0 = tmap_edit(k)
    with k.if_(warp0):
        k.tensormap_cp_fenceproxy(gslot, tms)


def elect_bad(k, warp_uniform=False):
    tid = k.tid_x()
    first = k.setp("eq", k.warp_idx(), 0) if warp_uniform else k.setp("lt", tid, 16)
    with k.if_(first):
        k.elect_sync()  # BAD


def barrier_bad(k, count=None):
    with k.if_(k.setp("eq", k.warp_idx(), 0)):
        k.bar_sync(1, count)  # BAD


def swizzle_bad(k, align=128):
    src, tile, bar, tid, t0 = setup(k, SWIZZLED, align, tx_bytes(SWIZZLED))
    init(k, bar, t0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, tx_bytes(SWIZZLED))
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def bounds_bad(k, nbytes=BOX // 2):
    src, tile, bar, tid, t0 = setup(k, nbytes=nbytes)
    init(k, bar, t0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def mbarrier_align_bad(k, offset=4):
    bars = k.shared("bars", 16, align=8)
    with k.elect_one():
        k.mbarrier_init(bars.at(offset), 1)  # BAD


def tensormap_align_bad(k, offset=64):
    tms = k.shared("tms", 256, align=128)
    with k.elect_one():
        k.tensormap_replace(k.add(k.mov(tms), offset), "rank", 1, space="shared::cta")  # BAD


def capacity_bad(k, dynamic=False):
    k.shared("big", 50_000, dynamic=dynamic)  # BAD


def multicast_bad(k, mask=0b101):
    src, tile, bar, tid, t0 = setup(k)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.barrier_cluster_arrive()
    k.barrier_cluster_wait()
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
    with k.if_(k.and_(t0, k.setp("eq", k.mov(sreg.cluster_ctarank), 0))):
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar, multicast=mask)  # BAD
    k.mbarrier_wait(bar, parity=0)
    k.barrier_cluster_arrive()
    k.barrier_cluster_wait()


def coord_bad(k, offset=4):
    src, tile, bar, tid, t0 = setup(k)
    init(k, bar, t0)
    x = k.add(k.mul(k.mov(sreg.ctaid_x), 64), offset)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, src, (x, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def fill_ring(k, src, ring, full, nbytes, stages, t0):
    """Thread 0 loads tile s into slot s of the ring, for every slot (a pipeline's prologue)."""
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_arrive_expect_tx(full.at(8 * s), nbytes)
            k.cp_async_bulk_tensor(ring.at(s * nbytes), src, (0, 64 * s), mbar=full.at(8 * s))


def ring_drain(k, drain=3, tiles=6, stages=2):
    """A ring of `stages` slots: a prologue fills every slot, the steady loop consumes tile t and refills its
    slot with tile t + stages, the drain consumes the last tiles. A drain of stages + 1 iterations waits for
    a phase nothing arms (the flow analysis cannot tell the ring's slots apart; a run of thread 0 can)."""
    nb = 64 * 64 * 2
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((tiles * 64, 64), "bf16", (64, 64)))
    ring = k.shared("ring", stages * nb, align=128)
    full = k.mbarrier("full", stages)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_init(full.at(8 * s), 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    fill_ring(k, src, ring, full, nb, stages, t0)
    stage, phase = k.mov(0, px.u32), k.mov(0, px.u32)

    def consume(t, refill):
        full_s, buf = k.mad(stage, 8, k.mov(full)), k.mad(stage, nb, k.mov(ring))
        k.mbarrier_wait(full_s, parity=phase)  # BAD
        k.ld(px.u32, k.add(buf, k.shl(tid, 2)), space="shared::cta")
        if refill:
            k.bar_sync(0)
            with k.if_(t0):
                k.mbarrier_arrive_expect_tx(full_s, nb)
                k.cp_async_bulk_tensor(buf, src, (0, k.mul(k.add(t, stages), 64)), mbar=full_s)
        k.add(stage, 1, out=stage)
        with k.if_(k.setp("eq", stage, stages)):
            k.mov(0, px.u32, out=stage)
            k.xor(phase, 1, out=phase)

    with k.loop(0, tiles - stages) as t:
        consume(t, True)
    with k.loop(tiles - drain, tiles) as t:
        consume(t, False)


def arrivals_bad(k, everyone=False):
    """A barrier initialised for 128 arrivals; thread 0 alone arrives (everyone=True: all 128 do)."""
    bar = k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    with k.if_(t0):
        k.mbarrier_init(bar, 128)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    if everyone:
        k.mbarrier_arrive(bar)
    else:
        with k.if_(t0):
            k.mbarrier_arrive(bar)
    k.mbarrier_wait(bar, parity=0)  # BAD


def ring3(k, first=0, release="empty", trips=None, tiles=8, stages=3, empty_count=128):
    """A 3-stage ring as one loop, the way a new user writes it: the prologue fills the slots; iteration t
    waits on full[stage], every thread reads the slot and arrives on empty[stage], and thread 0 refills the
    slot with tile t + STAGES where `t + STAGES < TILES`. The bugs: the phase bit starts at 1 (first=1: the
    first wait returns before the data lands), the refill does not wait for the readers (release='none';
    'sync' orders them with bar.sync instead, which is fine), the loop runs one iteration too many
    (trips=TILES + 1: the last wait never returns), the empty barriers count one arrival fewer than the 128 threads
    that arrive each lap (empty_count=127: the 128th lands in the next phase)."""
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((tiles * 64, 256), "bf16", (64, 64)))
    ring = k.shared("ring", stages * BOX, align=128)
    full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_init(full.at(8 * s), 1)
            k.mbarrier_init(empty.at(8 * s), empty_count)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    fill_ring(k, src, ring, full, BOX, stages, t0)
    stage, phase = k.mov(0, px.u32), k.mov(first, px.u32)
    with k.loop(0, tiles if trips is None else trips) as t:
        full_s, empty_s = k.mad(stage, 8, k.mov(full)), k.mad(stage, 8, k.mov(empty))
        buf = k.mad(stage, BOX, k.mov(ring))
        k.mbarrier_wait(full_s, parity=phase, sem="acquire", scope="cta")  # FULL
        k.ld(px.b32, k.add(buf, k.shl(tid, 4)), space="shared::cta", vec=4)
        k.mbarrier_arrive(empty_s, sem="release", scope="cta")  # ARRIVE
        if release == "sync":
            k.bar_sync(0)
        with k.if_(t0), k.if_(k.setp("lt", k.add(t, stages), tiles)):
            if release == "empty":
                k.mbarrier_wait(empty_s, parity=phase, sem="acquire", scope="cta")
            k.mbarrier_arrive_expect_tx(full_s, BOX, sem="release", scope="cta")
            k.cp_async_bulk_tensor(buf, src, (0, k.mul(k.add(t, stages), 64)), mbar=full_s)  # REFILL
        k.add(stage, 1, out=stage)
        with k.if_(k.setp("eq", stage, stages)):
            k.mov(0, px.u32, out=stage)
            k.xor(phase, 1, out=phase)


def variant(fn, marker, **kw):
    """`fn` with keyword arguments, for the CASES table: the bad line is the one `fn` marks with `marker`."""
    def build(k):
        fn(k, **kw)
    build.source, build.marker = fn, marker
    build.__name__ = fn.__name__ + "".join(f"_{a}_{v}" for a, v in kw.items())
    return build


def publish_between_syncs(k, second_sync=True):
    """Thread 0 edits a tensor map in shared memory, bar.sync, warp 0 publishes it with
    tensormap.cp_fenceproxy, bar.sync, then thread 32 (of warp 1, which did not publish) loads through it: the
    second bar.sync is what makes the edit published for it too."""
    gslot, gmap, tms, warp0 = tmap_edit(k)
    tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    with k.if_(t0):
        k.tensormap_replace(tms, "global_address", k.param("base", px.u64))
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(warp0):
        k.tensormap_cp_fenceproxy(gslot, tms)
    if second_sync:
        k.bar_sync(0)
    k.fence_proxy_tensormap("acquire", "gpu", gmap)
    with k.if_(k.setp("eq", k.tid_x(), 32)):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, px.TensorMapRef(gmap), (0, 0), mbar=bar)  # BAD
    k.mbarrier_wait(bar, parity=0)


def init_unsynced(k, sync=False):
    """Thread 0 initialises the barrier and loads; every thread waits, with no bar.sync after the init: warps
    1-3 may poll the barrier's old memory (after an earlier launch, a completed phase 0) and return at once."""
    src, tile, bar, tid, t0 = setup(k)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    if sync:
        k.bar_sync(0)
    load(k, src, tile, bar, t0)
    k.mbarrier_wait(bar, parity=0)  # BAD


def test_init_used_by_lanes_of_the_initialising_warp_is_a_warning():
    """An init under elect_one in every warp (count 4: each warp's leader arrives), waited on by the rest of the
    warp: the warp reconverges, but nothing orders the init first; a warning (other warps would be an error)."""
    def fn(k):
        bar = k.mbarrier("bar")
        with k.elect_one():
            k.mbarrier_init(bar, 4)
            k.mbarrier_arrive(bar)
        k.mbarrier_wait(bar, parity=0)  # BAD

    diags = check(build(fn))
    assert [(d.rule, d.severity, d.loc.line) for d in diags] == [("mbarrier-init-sync", "warning", bad_line(fn))]
    assert "by other threads of the same warp" in diags[0].message


def ring_index_past_the_end(k, slots=3):
    """An init loop over one slot more than the barrier array holds."""
    src, tile, _, tid, t0 = setup(k)
    full = k.mbarrier("full", 2)
    with k.if_(t0):
        with k.loop(0, slots) as s:
            k.mbarrier_init(k.mad(s, 8, k.mov(full)), 1)  # BAD
        k.fence_mbarrier_init()
    k.bar_sync(0)
    load(k, src, tile, full, t0)
    k.mbarrier_wait(full, parity=0)


def nothing(k):
    k.bar_sync(0)


# ------------------------------------------------------------------------------------------ tensor cores

WG_SPEC = px.TensorMapSpec.tiled_for((256, 256), "bf16", (64, 64), swizzle="128B")   # a 64x64 bf16 tile, 8192 B
WG_LAYOUT = MatrixLayout.for_tensormap(WG_SPEC)                                      # K-major, 128B, 64 rows


def wgmma_tiles(k, b_layout=WG_LAYOUT, b_bytes=8192):
    """Thread 0 loads an A and a B tile (64x64 bf16, 128B swizzle) with TMA; every thread waits for them. Returns
    the descriptors of both tiles and a 64x64 f32 accumulator. `b_bytes`: the size of B's buffer."""
    a_map, b_map = k.param_tensormap("a", WG_SPEC), k.param_tensormap("b", WG_SPEC)
    ta, tb = k.shared("ta", 8192, align=1024), k.shared("tb", b_bytes, align=1024)
    bar = k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    init(k, bar, t0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, 2 * 8192)
        k.cp_async_bulk_tensor(ta, a_map, (0, 0), mbar=bar)
        k.cp_async_bulk_tensor(tb, b_map, (0, 0), mbar=bar)
    k.mbarrier_wait(bar, parity=0)
    return k.matrix_descriptor(ta, WG_LAYOUT), k.matrix_descriptor(tb, b_layout), Accumulator(k, 64)


def wgmma_out(k, acc):
    """Each thread stores its accumulator registers to global memory."""
    out = k.param_ptr("out")
    base = k.mad(k.tid_x(), 4 * len(acc.regs), out, mode="wide")
    for i, r in enumerate(acc.regs):
        k.st(px.f32, px.Addr(base, 4 * i), r, space="global")


def wgmma_tile(k, fence="first", zero_after_fence=False, wait=True, touch_early=False):
    da, db, acc = wgmma_tiles(k)
    if fence == "first":
        k.wgmma_fence()  # FENCE
    if zero_after_fence:
        acc.zero(k)
    k.wgmma_mma_async(acc, da, db, scale_d=1 if zero_after_fence else 0)  # MMA
    k.wgmma_commit_group()
    if touch_early:
        k.add(acc.regs[0], 1.0, out=acc.regs[0])  # EARLY
    if wait:
        k.wgmma_wait_group(0)
    wgmma_out(k, acc)


def wgmma_mapped(k, b_layout=WG_LAYOUT, b_bytes=8192):
    """B's descriptor built from `b_layout` (the map wrote B with a 128B swizzle) in a buffer of `b_bytes`."""
    da, db, acc = wgmma_tiles(k, b_layout, b_bytes)
    k.wgmma_fence()
    k.wgmma_mma_async(acc, da, db, scale_d=0)  # MMA
    k.wgmma_commit_group()
    k.wgmma_wait_group(0)
    wgmma_out(k, acc)


def wgmma_b_moved(k, b_start=32):
    """B's descriptor moved `b_start` bytes into its 128B-swizzled tile: 32 is K step 1, 1024 row 8 (its second
    8-row group); 16 is half a K step, 128 the tile's row 1, where no K step starts."""
    da, db, acc = wgmma_tiles(k)
    k.wgmma_fence()
    k.wgmma_mma_async(acc, da, db.advance(b_start), scale_d=0)  # MMA
    k.wgmma_commit_group()
    k.wgmma_wait_group(0)
    wgmma_out(k, acc)


def wgmma_generic_tile(k, proxy_fence=True):
    """Every thread writes A with st.shared (B comes by TMA): the async proxy reads A only after
    fence.proxy.async by the writers and a barrier."""
    da, db, acc = wgmma_tiles(k)
    ta = da.buffer
    tid = k.tid_x()
    with k.loop(0, 16) as i:
        k.st(px.u32, k.add(k.mov(ta), k.shl(k.mad(i, 128, tid), 2)), 0, space="shared::cta")
    if proxy_fence:
        k.fence_proxy_async("shared::cta")
    k.bar_sync(0)
    k.wgmma_fence()
    k.wgmma_mma_async(acc, da, db, scale_d=0)  # MMA
    k.wgmma_commit_group()
    k.wgmma_wait_group(0)
    wgmma_out(k, acc)


def wgmma_ring(k, release="after_wait", tiles=4, stages=2, lead_releases=False):
    """Warpgroup 0 (thread 0) fills a ring of `stages` 64x64 bf16 tiles by TMA; warpgroup 1 multiplies each tile
    (as A and B) into its accumulator and releases the slot on its empty barrier, after wgmma.wait_group."""
    a_map = k.param_tensormap("a", WG_SPEC)
    ring = k.shared("ring", stages * 8192, align=1024)
    full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        with k.loop(0, stages) as s:
            k.mbarrier_init(k.mad(s, 8, k.mov(full)), 1)
            k.mbarrier_init(k.mad(s, 8, k.mov(empty)), 1 if lead_releases else 128)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    group = k.shr(tid, 7)
    lead = k.setp("eq", tid, 128)
    with k.if_(t0):
        with k.loop(0, tiles) as t:
            s, lap = k.rem(t, stages), k.div(t, stages)
            full_s, empty_s = k.mad(s, 8, k.mov(full)), k.mad(s, 8, k.mov(empty))
            with k.if_(k.setp("ge", t, stages)):
                k.mbarrier_wait(empty_s, parity=k.and_(k.sub(lap, 1), 1))
            k.mbarrier_arrive_expect_tx(full_s, 8192)
            k.cp_async_bulk_tensor(k.mad(s, 8192, k.mov(ring)), a_map, (k.mul(t, 64), 0), mbar=full_s)  # REFILL
    with k.if_(k.setp("eq", group, 1)):
        acc = Accumulator(k, 64)
        first = k.matrix_descriptor(ring, WG_LAYOUT)
        with k.loop(0, tiles) as t:
            s, lap = k.rem(t, stages), k.div(t, stages)
            full_s, empty_s = k.mad(s, 8, k.mov(full)), k.mad(s, 8, k.mov(empty))
            k.mbarrier_wait(full_s, parity=k.and_(lap, 1))
            d = first.advance(s, stride=8192)
            k.wgmma_fence()
            k.wgmma_mma_async(acc, d, d, scale_d=k.setp("ne", t, 0))
            k.wgmma_commit_group()
            if release == "before_wait":
                with k.if_(lead) if lead_releases else nullcontext():
                    k.mbarrier_arrive(empty_s)  # RELEASE
            if release.startswith("pipelined"):         # keep one group in flight: release the previous stage
                k.wgmma_wait_group(1)
                if release == "pipelined_this":
                    k.mbarrier_arrive(empty_s)      # the stage the group in flight still reads
                else:
                    with k.if_(k.setp("ne", t, 0)):
                        k.mbarrier_arrive(k.mad(k.rem(k.add(t, stages - 1), stages), 8, k.mov(empty)))
            else:
                k.wgmma_wait_group(0)
            if release == "after_wait":
                with k.if_(lead) if lead_releases else nullcontext():
                    k.mbarrier_arrive(empty_s)
        if release.startswith("pipelined"):
            k.wgmma_wait_group(0)
        wgmma_out(k, acc)


def register_split(k, dec=40, inc=232, by="warpgroup"):
    """A producer warpgroup gives registers back, two consumer warpgroups take them (384 threads: 168 each at
    entry, a pool of 64512): 128 x 40 + 256 x 232 = 64512 fits."""
    tid = k.tid_x()
    group = k.shr(tid, 7) if by == "warpgroup" else k.shr(tid, 5)
    with k.if_(k.setp("eq", group, 0)):
        k.setmaxnreg_dec(dec)  # DEC
    with k.if_(k.setp("ne", group, 0)):
        k.setmaxnreg_inc(inc)  # INC
    k.bar_sync(0)


# (rule, bad builder, fixed builder, kernel options of the bad one, of the fixed one)
CASES = [
    ("mbarrier-uninit", uninit_bad, uninit_good, {}, {}),
    ("mbarrier-init-fence", init_fence_bad, uninit_good, {}, {}),
    ("expect-tx-mismatch", expect_bad, uninit_good, {}, {}),
    ("tx-count-range", tx_range_bad, lambda k: tx_range_bad(k, 300_000), {}, {}),
    ("phase-reuse", phase_bad, lambda k: phase_bad(k, 1), {}, {}),
    ("loop-parity", loop_bad, lambda k: loop_bad(k, flip=True), {}, {}),
    ("wait-before-arrive", wait_first_bad, wait_first_good, {}, {}),
    ("async-proxy-fence", proxy_fence_bad, lambda k: proxy_fence_bad(k, fence=True), {}, {}),
    ("tma-load-race", load_race_bad, load_race_good, {}, {}),
    ("bulk-group-pending", group_pending_bad, lambda k: group_pending_bad(k, wait_first=True), {}, {}),
    ("bulk-group-exit", group_exit_bad, lambda k: group_exit_bad(k, wait=True), {}, {}),
    ("tensormap-release", release_bad, lambda k: release_bad(k, publish=True), {}, {}),
    ("tensormap-acquire", acquire_bad, lambda k: acquire_bad(k, acquire=True), {}, {}),
    ("sync-aligned-divergent", aligned_bad, aligned_good, {}, {}),
    ("sync-aligned-divergent", elect_bad, lambda k: elect_bad(k, warp_uniform=True), {}, {}),
    ("barrier-divergent", barrier_bad, lambda k: barrier_bad(k, 32), {}, {}),
    ("tma-smem-align", swizzle_bad, lambda k: swizzle_bad(k, 1024), {}, {}),
    ("tma-smem-bounds", bounds_bad, lambda k: bounds_bad(k, BOX), {}, {}),
    ("mbarrier-align", mbarrier_align_bad, lambda k: mbarrier_align_bad(k, 8), {}, {}),
    ("tensormap-align", tensormap_align_bad, lambda k: tensormap_align_bad(k, 128), {}, {}),
    ("smem-capacity", capacity_bad, lambda k: capacity_bad(k, dynamic=True), {}, {}),
    ("multicast-mask", multicast_bad, lambda k: multicast_bad(k, 0b11), {"reqnctapercluster": 2},
     {"reqnctapercluster": 2}),
    ("coord-align", coord_bad, lambda k: coord_bad(k, 8), {}, {}),
    ("wait-never-armed", ring_drain, lambda k: ring_drain(k, drain=2), {}, {}),
    ("wait-never-armed", variant(ring3, "# FULL", trips=9), ring3, {}, {}),
    ("mbarrier-init-sync", init_unsynced, lambda k: init_unsynced(k, sync=True), {}, {}),
    ("mbarrier-bounds", ring_index_past_the_end, lambda k: ring_index_past_the_end(k, 2), {}, {}),
    ("arrival-count", arrivals_bad, lambda k: arrivals_bad(k, everyone=True), {}, {}),
    ("arrival-count", variant(ring3, "# ARRIVE", empty_count=127), ring3, {}, {}),
    ("ring-parity", variant(ring3, "# FULL", first=1), ring3, {}, {}),
    ("refill-race", variant(ring3, "# REFILL", release="none"), lambda k: ring3(k, release="sync"), {}, {}),
    ("tensormap-release", variant(publish_between_syncs, "# BAD", second_sync=False), publish_between_syncs, {}, {}),
    ("bulk-store-release", variant(flag_handoff, "# PUBLISH", wait="read"), flag_handoff, {}, {}),
    ("bulk-store-release", variant(flag_handoff, "# PUBLISH", wait=None), flag_handoff, {}, {}),
    ("bulk-store-release", variant(flag_handoff, "# PUBLISH", store_fence=False), flag_handoff, {}, {}),
    ("acquire-async-fence", variant(flag_handoff, "# REDUCE", load_fence=False), flag_handoff, {}, {}),
    ("setmaxnreg-budget", variant(register_split, "# INC", inc=240), register_split, {"reqntid": 384},
     {"reqntid": 384}),
    ("setmaxnreg-budget", variant(register_split, "# DEC", dec=176), register_split, {"reqntid": 384},
     {"reqntid": 384}),
    ("setmaxnreg-budget", variant(register_split, "# INC", inc=160), register_split, {"reqntid": 384},
     {"reqntid": 384}),
    ("wgmma-warpgroup-divergent", variant(register_split, "# DEC", by="warp"), register_split, {"reqntid": 384},
     {"reqntid": 384}),
    ("wgmma-warpgroup-divergent", variant(register_split, "# DEC"), register_split, {"reqntid": 96},
     {"reqntid": 384}),
    ("wgmma-fence", variant(wgmma_tile, "# MMA", fence=None), wgmma_tile, {}, {}),
    ("wgmma-fence", variant(wgmma_tile, "# MMA", zero_after_fence=True), wgmma_tile, {}, {}),
    ("wgmma-pending", variant(wgmma_tile, "# EARLY", touch_early=True), wgmma_tile, {}, {}),
    ("wgmma-proxy-fence", variant(wgmma_generic_tile, "# MMA", proxy_fence=False), wgmma_generic_tile, {}, {}),
    ("wgmma-stage-release", variant(wgmma_ring, "# REFILL", release="before_wait"), wgmma_ring, {"reqntid": 256},
     {"reqntid": 256}),
    ("wgmma-descriptor-map", variant(wgmma_mapped, "# MMA", b_layout=MatrixLayout("bf16", 64, 64, "64B")),
     wgmma_mapped, {}, {}),
    ("wgmma-descriptor-map", variant(wgmma_mapped, "# MMA", b_layout=MatrixLayout("bf16", 64, 64, sbo=2048),
                                     b_bytes=16384), lambda k: wgmma_mapped(k, b_bytes=16384), {}, {}),
    ("wgmma-descriptor-map", variant(wgmma_b_moved, "# MMA", b_start=16), wgmma_b_moved, {}, {}),
    ("wgmma-descriptor-map", variant(wgmma_b_moved, "# MMA", b_start=128), lambda k: wgmma_b_moved(k, 1024), {},
     {}),
    ("bulk-group-pending", variant(store_after_writes, "# STORE", sync=False), store_after_writes, {}, {}),
]


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def bad_line(fn) -> int:
    return marked_line(getattr(fn, "source", fn), getattr(fn, "marker", "# BAD"))


def build(fn, name="t", **opts):
    with px.kernel(name, **{"reqntid": 128, **opts}) as k:
        fn(k)
    return k.kernel


def build_unchecked(fn, **opts):
    return build(fn, verify=False, **opts)


@pytest.mark.parametrize("rule, bad, good, bad_opts, good_opts", CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_rule_rejects_bad_kernel_naming_rule_and_line(rule, bad, good, bad_opts, good_opts):
    with pytest.raises(px.VerifyError) as info:
        build(bad, **bad_opts)
    e = info.value
    assert e.rule == rule, str(e)
    assert os.path.basename(e.loc.file) == HERE and e.loc.line == bad_line(bad), str(e)
    assert str(e).startswith(f"{shown_path(__file__)}:{bad_line(bad)}: {rule}: ")     # relative to the working directory
    assert RULES[rule].doc in str(e)


@pytest.mark.parametrize("rule, bad, good, bad_opts, good_opts", CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_fixed_kernel_passes_clean(rule, bad, good, bad_opts, good_opts):
    assert check(build(good, **good_opts)) == []


@pytest.mark.parametrize("rule, bad, good, bad_opts, good_opts", CASES, ids=[f"{c[0]}-{c[1].__name__}" for c in CASES])
def test_fixed_kernels_assemble(rule, bad, good, bad_opts, good_opts):
    px.assemble(px.emit(build(good, **good_opts)), "sm_90a")


def test_every_rule_has_a_case_and_a_doc_section():
    covered = {c[0] for c in CASES} | {"cluster-size", "debug-timeout", "target", "unchecked-tensormap",
                                       "tensormap-spec", "mbarrier-state-token"}   # the last: test_sharp_edges
    assert covered == set(RULES)
    doc = open(os.path.join(ROOT, "docs", "verifier.md")).read()
    for r in RULES.values():
        assert f'<a id="{r.doc_anchor}"></a>' in doc, r.name
        section = doc.split(f'<a id="{r.doc_anchor}"></a>')[1].split('<a id="')[0]
        if r.name != "target":
            assert "Bad:" in section and "Fixed:" in section, r.name


# ------------------------------------------------------------------- the remaining rules and the API

def test_use_before_init_and_after_inval():
    def before(k):
        bar = k.mbarrier("bar")
        with k.elect_one():
            k.mbarrier_arrive(bar)  # BAD
            k.mbarrier_init(bar, 1)

    def after(k):
        bar = k.mbarrier("bar")
        with k.elect_one():
            k.mbarrier_init(bar, 1)
            k.mbarrier_inval(bar)
            k.mbarrier_arrive(bar)  # BAD

    for fn, text in ((before, "used before its mbarrier.init at line"), (after, "used after its mbarrier.inval")):
        with pytest.raises(px.VerifyError, match=text) as info:
            build(fn)
        assert info.value.rule == "mbarrier-uninit" and info.value.loc.line == bad_line(fn)


def test_cluster_size_warning_over_8_error_over_16():
    big = check(build(nothing, reqnctapercluster=(4, 4)))
    assert [(d.rule, d.severity) for d in big] == [("cluster-size", "warning")]
    assert "set_non_portable_cluster_size_allowed" in big[0].message
    assert check(build(nothing, reqnctapercluster=8)) == []
    with pytest.raises(px.VerifyError, match=r"maxclusterrank=32: 32 CTAs is over the 16") as info:
        build(nothing, maxclusterrank=32)
    assert info.value.rule == "cluster-size"


def test_multicast_counts_every_issuing_cta():
    """Every CTA of a 2-CTA cluster multicasts half a tile to both: each barrier receives two loads."""
    half = px.TensorMapSpec.tiled_for((256, 512), "bf16", (32, 64))

    def fn(k, tx):
        src = k.param_tensormap("src", half)
        tile = k.shared("tile", BOX, align=128)
        bar = k.mbarrier("bar")
        t0 = k.setp("eq", k.tid_x(), 0)
        rank = k.mov(sreg.cluster_ctarank)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.barrier_cluster_arrive()
        k.barrier_cluster_wait()
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, tx)
            k.cp_async_bulk_tensor(k.add(k.mov(tile), k.shl(rank, 12)), src, (0, k.shl(rank, 5)), mbar=bar,
                                   multicast=0b11)
        k.mbarrier_wait(bar, parity=0)
        k.barrier_cluster_arrive()
        k.barrier_cluster_wait()

    assert check(build(lambda k: fn(k, 2 * tx_bytes(half)), reqnctapercluster=2)) == []
    with pytest.raises(px.VerifyError, match=r"expects 4096 transaction bytes, but the TMA load\(s\) at line \d+ "
                                             r"deliver 8192") as info:
        build(lambda k: fn(k, tx_bytes(half)), reqnctapercluster=2)
    assert info.value.rule == "expect-tx-mismatch"


def test_debug_timeout_must_be_positive_seconds():
    with pytest.raises(px.VerifyError, match=r"debug=-1: expected True/False or a wait timeout") as info:
        build(nothing, debug=-1)
    assert info.value.rule == "debug-timeout"
    assert check(build(nothing, debug=0.5)) == []


def test_target_findings_are_listed_by_check_and_raised_as_target_errors():
    def fn(k):
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar, cta_group=2)  # BAD
        k.mbarrier_wait(bar, parity=0)

    with pytest.raises(px.TargetError):
        build(fn, arch="sm_90a")
    with pytest.raises(px.TargetError):
        build(fn, arch="sm_90a", verify=False)
    kernel = build(fn)
    kernel.arch = "sm_90a"
    assert [(d.rule, d.loc.line) for d in check(kernel)] == [("target", bad_line(fn))]


def test_allow_silences_one_rule_at_one_place():
    def fn(k, allowed):
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        with k.if_(t0):
            with k.allow(*allowed):
                k.mbarrier_arrive_expect_tx(bar, BOX + 16)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)

    assert check(build(lambda k: fn(k, ["expect-tx-mismatch"]))) == []
    with pytest.raises(px.VerifyError) as info:
        build(lambda k: fn(k, ["phase-reuse"]))
    assert info.value.rule == "expect-tx-mismatch"
    with pytest.raises(px.DSLError, match=r"allow\('no-such-rule'\): no such verifier rule") as info:
        build(lambda k: fn(k, ["no-such-rule"]))
    assert os.path.basename(info.value.loc.file) == HERE


def test_allow_on_a_wait_covers_rules_reported_there():
    def fn(k):
        src, tile, bar, tid, t0 = setup(k)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        load(k, src, tile, bar, t0)
        with k.allow("mbarrier-init-sync"):
            k.mbarrier_wait(bar, parity=0)

    assert check(build(fn)) == []


def test_check_lists_every_finding_in_line_order_and_formats_like_a_linter():
    def fn(k):
        src, tile, bar, tid, t0 = setup(k, align=64)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, 100)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)

    diags = check(build_unchecked(fn))
    rules = [d.rule for d in diags]
    assert rules == ["expect-tx-mismatch", "mbarrier-init-fence", "tma-smem-align", "mbarrier-init-sync"], rules
    assert [d.loc.line for d in diags] == sorted(d.loc.line for d in diags)
    text = format_diagnostics(diags)
    for line, d in zip(text.splitlines(), diags):
        assert re.fullmatch(rf"\S*{HERE}:{d.loc.line}: {d.rule}: (warning: )?.+", line), line
    assert "mbarrier-init-sync: warning: " not in text and "mbarrier-init-sync: " in text


def test_verify_false_lets_a_file_load_and_check_list_all(tmp_path):
    text = ("import ptxdsl as px\n"
            "with px.kernel('k', reqntid=32{}) as k:\n"
            "    bar = k.mbarrier('bar')\n"
            "    k.mbarrier_wait(bar, parity=0)\n"
            "    k.mbarrier_wait(bar, parity=1)\n")
    checked, unchecked = tmp_path / "checked.py", tmp_path / "unchecked.py"
    checked.write_text(text.format(""))
    unchecked.write_text(text.format(", verify=False"))
    with pytest.raises(px.VerifyError):
        load_kernels(str(checked))
    kernels, _ = load_kernels(str(unchecked))
    assert [(d.rule, d.loc.line) for d in check(kernels[0])] == [("mbarrier-uninit", 4), ("mbarrier-uninit", 5)]


@pytest.mark.parametrize("name", ["tma_load_tile", "tma_store_tile", "tma_reduce_tile"])
def test_seed_examples_pass_clean(name):
    kernels, _ = load_kernels(os.path.join(ROOT, "examples", f"{name}.py"))
    assert kernels and all(check(k) == [] for k in kernels)


def warp_specialized(k, consumer_flips=True, stages=2, ntiles=8):
    """Warp 0 produces (one elected lane: wait empty[s], expect, load into stage s), warps 1-3 consume (wait
    full[s], read, arrive on empty[s]); stages and parities are registers, as in a real pipeline."""
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((1024, 512), "bf16", (64, 64)))
    tiles = k.shared("tiles", stages * BOX, align=1024, dynamic=True)
    full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
    tid = k.tid_x()
    with k.if_(k.setp("eq", tid, 0)):
        for s in range(stages):
            k.mbarrier_init(full.at(8 * s), 1)
            k.mbarrier_init(empty.at(8 * s), 96)
        k.fence_mbarrier_init()
    k.bar_sync(0)

    def slot(bars, stage):
        return k.add(k.mov(bars), k.shl(stage, 3))

    with k.if_(k.setp("eq", k.warp_idx(), 0)):
        with k.elect_one():
            phase = k.mov(0, px.u32)
            with k.loop(0, ntiles) as i:
                stage = k.and_(i, stages - 1)
                k.mbarrier_wait(slot(empty, stage), parity=k.xor(phase, 1))
                k.mbarrier_arrive_expect_tx(slot(full, stage), BOX)
                k.cp_async_bulk_tensor(k.add(k.mov(tiles), k.mul(stage, BOX)), src, (0, k.mul(i, 64)),
                                       mbar=slot(full, stage))
                with k.if_(k.setp("eq", stage, stages - 1)):
                    k.xor(phase, 1, out=phase)
    with k.else_():
        phase = k.mov(0, px.u32)
        with k.loop(0, ntiles) as i:
            stage = k.and_(i, stages - 1)
            k.mbarrier_wait(slot(full, stage), parity=phase)  # BAD
            k.ld(px.u32, k.add(k.add(k.mov(tiles), k.mul(stage, BOX)), k.shl(tid, 2)), space="shared::cta")
            k.mbarrier_arrive(slot(empty, stage))
            if consumer_flips:
                with k.if_(k.setp("eq", stage, stages - 1)):
                    k.xor(phase, 1, out=phase)


def test_warp_specialized_pipeline_passes_clean_and_assembles():
    kernel = build(warp_specialized)
    assert check(kernel) == []
    px.assemble(px.emit(kernel), "sm_90a")


def test_warp_specialized_consumer_that_never_flips_its_parity():
    with pytest.raises(px.VerifyError, match=r"every iteration of the loop waits on mbarrier full\[\?\]") as info:
        build(lambda k: warp_specialized(k, consumer_flips=False))
    assert info.value.rule == "loop-parity" and info.value.loc.line == bad_line(warp_specialized)
    assert check(build(lambda k: warp_specialized(k, consumer_flips=False, ntiles=2))) == []   # one pass per barrier


RING_TILES, RING_STAGES = 8, 3


def single_loop_ring(k, refill="ahead"):
    """The pipelined copy of examples/tma_pipeline_copy.py as one loop with no drain: consume tile t, release
    its stage, and refill the stage with tile t + STAGES only where `refill` says another iteration follows
    (the clean forms), or where it does not prove that (the buggy ones: the last loads are never waited on)."""
    tiles, stages = RING_TILES, RING_STAGES
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((tiles * 64, 256), "bf16", (64, 64)))
    n = k.param("n", px.u32) if refill in ("param", "other_param") else tiles
    other = k.param("m", px.u32) if refill == "other_param" else None
    ring = k.shared("ring", stages * BOX, align=128)
    full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_init(full.at(8 * s), 1)
            k.mbarrier_init(empty.at(8 * s), 128)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    fill_ring(k, src, ring, full, BOX, stages, t0)
    stage, phase = k.mov(0, px.u32), k.mov(0, px.u32)
    stale = k.setp("lt", k.mov(1, px.u32), tiles) if refill == "stale" else None
    with k.loop(0, n) as t:
        full_s, empty_s = k.mad(stage, 8, k.mov(full)), k.mad(stage, 8, k.mov(empty))
        buf = k.mad(stage, BOX, k.mov(ring))
        k.mbarrier_wait(full_s, parity=phase, sem="acquire", scope="cta")
        k.ld(px.b32, k.add(buf, k.shl(tid, 4)), space="shared::cta", vec=4)
        k.mbarrier_arrive(empty_s, sem="release", scope="cta")
        more = {
            "ahead": lambda: k.setp("lt", k.add(t, stages), tiles),              # t + STAGES < TILES
            "param": lambda: k.setp("lt", k.add(t, stages), n),                  # ... < n, the loop's stop
            "below": lambda: k.setp("lt", t, tiles - stages),
            "swapped": lambda: k.setp("gt", tiles, k.add(t, stages)),
            "not_past": lambda: ~k.setp("ge", k.add(t, stages), tiles),
            "every": lambda: None,                                               # refills after the last tile too
            "always_true": lambda: k.setp("lt", t, tiles),
            "off_by_one": lambda: k.setp("le", k.add(t, 1), tiles),
            "one_ahead": lambda: k.setp("lt", k.add(t, 1), tiles),               # proves 1 of the 3 iterations
            "short_of_ring": lambda: k.setp("lt", k.add(t, stages - 1), tiles),  # proves 2 of the 3
            "other_param": lambda: k.setp("lt", k.add(t, stages), other),        # not the loop's stop
            "stale": lambda: stale,                                              # set by the previous iteration
        }[refill]()
        with k.if_(t0), (k.if_(more) if more is not None else nullcontext()):
            k.mbarrier_wait(empty_s, parity=phase, sem="acquire", scope="cta")
            k.mbarrier_arrive_expect_tx(full_s, BOX, sem="release", scope="cta")
            k.cp_async_bulk_tensor(buf, src, (0, k.mul(k.add(t, stages), 64)), mbar=full_s)  # REFILL
        if refill == "stale":
            k.setp("lt", k.add(t, 1), tiles, out=stale)
        k.add(stage, 1, out=stage)
        with k.if_(k.setp("eq", stage, stages)):
            k.mov(0, px.u32, out=stage)
            k.xor(phase, 1, out=phase)


@pytest.mark.parametrize("refill", ["ahead", "param", "below", "swapped", "not_past"])
def test_single_loop_ring_that_refills_only_while_tiles_remain_passes_clean(refill):
    kernel = build(lambda k: single_loop_ring(k, refill))
    assert check(kernel) == []
    px.assemble(px.emit(kernel), "sm_90a")


@pytest.mark.parametrize("refill", ["every", "always_true", "off_by_one", "one_ahead", "short_of_ring", "other_param",
                                    "stale"])
def test_single_loop_ring_whose_last_refill_is_never_waited_on(refill):
    line = marked_line(single_loop_ring, "# REFILL")
    with pytest.raises(px.VerifyError, match=f"the kernel exits at its end while the TMA load at line {line} may "
                                             f"still be writing") as info:
        build(lambda k: single_loop_ring(k, refill))
    assert info.value.rule == "tma-load-race" and info.value.loc.line == line


def test_continuation_test_of_an_outer_loop_and_a_loop_of_one_trip():
    def nested(k, outer_test):
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        load(k, src, tile, bar, t0)
        phase = k.mov(0, px.u32)
        with k.loop(0, 4) as t:
            k.mbarrier_wait(bar, parity=phase)
            k.ld(px.u32, each_thread(k, tile, tid), space="shared::cta")
            k.bar_sync(0)
            more = k.setp("lt", k.add(t, 1), 4)
            with k.loop(0, 2) as j:
                with k.if_(k.and_(t0, k.setp("eq", j, 1))), k.if_(more if outer_test else k.setp("lt", j, 2)):
                    k.mbarrier_arrive_expect_tx(bar, BOX)
                    k.cp_async_bulk_tensor(tile, src, (0, k.shl(t, 6)), mbar=bar)  # REFILL
            k.xor(phase, 1, out=phase)

    def one_trip(k):
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        with k.loop(0, 1) as t:
            load(k, src, tile, bar, t0)
            k.mbarrier_wait(bar, parity=0)
            with k.if_(k.and_(t0, k.setp("lt", k.add(t, 1), 1))):     # never true
                k.mbarrier_arrive_expect_tx(bar, BOX)
                k.cp_async_bulk_tensor(tile, src, (0, 64), mbar=bar)

    assert check(build(lambda k: nested(k, True))) == []
    assert check(build(one_trip)) == []
    with pytest.raises(px.VerifyError, match="the kernel exits at its end") as info:
        build(lambda k: nested(k, False))       # j < 2 says nothing of t: the last refill is never waited on
    assert info.value.loc.line == marked_line(nested, "# REFILL")


# ---------------------------------------------------------------------- debug mode: zero cost when off

def watched(debug, tx=BOX):
    with px.kernel("watched", reqntid=128, debug=debug) as k:
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        with k.if_(t0):
            with k.allow("expect-tx-mismatch"):
                k.mbarrier_arrive_expect_tx(bar, tx)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)  # WAIT
    return k


def test_debug_off_is_zero_cost():
    default, off = px.emit(watched(False)).text, px.emit(watched(False)).text
    with px.kernel("watched", reqntid=128) as k:
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        load(k, src, tile, bar, t0)
        k.mbarrier_wait(bar, parity=0)
    assert default == off == px.emit(k).text
    for marker in ("__ptxdsl_debug", "%globaltimer", "trap", "st.volatile", "membar.sys"):
        assert marker not in default
    loop = re.findall(r"\$L__wait\d+:\n\t(mbarrier\.try_wait[^\n]*)\n\t(@!%p\d+ bra \$L__wait\d+;)\n", default)
    assert len(loop) == 1, default
    assert [p.name for p in watched(False).kernel.params] == ["src"]


@pytest.mark.parametrize("debug, ns", [(True, 200_000_000), (0.5, 500_000_000), (2, 2_000_000_000)])
def test_debug_wait_is_bounded_and_assembles(debug, ns):
    k = watched(debug, BOX + 16)
    ptx = px.emit(k)
    assert [p.name for p in k.kernel.params][0] == "__ptxdsl_debug"
    body = ptx.text.split("mbarrier.try_wait")[1].split("\n$L__wait_done")[0]
    assert "mov.u64 %rd" in ptx.text and ", %globaltimer;" in ptx.text
    assert f", {ns};" in body and "trap;" in body
    assert "st.volatile.global.u32 [%rd2], 1;" in body       # the wait's site (1-based) for the host
    assert "st.volatile.global.u32 [%rd2+4], 0;" in body     # the parity it waited for
    px.assemble(ptx, "sm_90a")
    info = ptx.kernels["watched"]
    assert info.debug == debug and info.wait_sites[0][1:] == ("bar", "0")
    assert info.wait_sites[0][0].line == marked_line(watched, "# WAIT")


# ------------------------------------------------------------------- Hypothesis: mutated pipelines

# (spec, tile bytes, tile alignment) of the boxes the generator loads
SPECS = [(s, -(-smem_layout(s)[0] // 128) * 128, max(128, 8 * {"none": 0, "64B": 64, "128B": 128}[s.swizzle]))
         for s in (SPEC, SWIZZLED, px.TensorMapSpec.tiled_for((64, 256), "u8", (16, 64), swizzle="64B"))]


def correct_plan(stages: int, rounds: int, tail: str) -> list:
    """The protocol as a list of steps: init, fence, sync; per round: expect + load every stage, then per
    stage wait on the round's parity and use the tile (read it, TMA-store it, or rewrite and store it)."""
    plan = [("init",), ("fence_init",), ("sync",)]
    for r in range(rounds):
        for s in range(stages):
            plan += [("expect", s, 0), ("load", s, r)]
        for s in range(stages):
            plan.append(("wait", s, r % 2))
            if tail == "read":
                plan += [("read", s)]
            elif tail == "store":
                plan += [("store", s, r), ("commit",), ("wait_group",)]
            else:
                plan += [("write", s), ("fence_async",), ("sync",), ("store", s, r), ("commit",), ("wait_group",)]
        plan.append(("sync",))
    return plan


def build_plan(plan, spec_i: int, stages: int, leader: str, loop_rounds: int = 0):
    """Emit `plan` as a kernel (leader steps run in thread 0 or in one elected lane of warp 0). With
    loop_rounds, the plan is one round and runs in a k.loop with a parity register flipped at its end."""
    spec, nbytes, align = SPECS[spec_i]
    with px.kernel("gen", reqntid=128, verify=False) as k:
        src = k.param_tensormap("src", spec)
        dst = k.param_tensormap("dst", spec)
        tiles = [k.shared(f"tile{s}", nbytes, align=align) for s in range(stages)]
        bars = k.mbarrier("bar", stages)
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        warp0 = k.setp("eq", k.warp_idx(), 0)

        def lead():
            if leader == "tid0":
                return k.if_(t0)
            return _elect_in(k, warp0)

        def emit(steps, parity=None, row=None):
            for step in steps:
                kind = step[0]
                if kind == "init":
                    with lead():
                        for s in range(stages):
                            k.mbarrier_init(bars.at(8 * s), 1)
                elif kind == "fence_init":
                    with lead():
                        k.fence_mbarrier_init()
                elif kind == "sync":
                    k.bar_sync(0)
                elif kind == "expect":
                    with lead():
                        k.mbarrier_arrive_expect_tx(bars.at(8 * step[1]), max(16, tx_bytes(spec) + step[2]))
                elif kind == "load":
                    y = row if row is not None else (step[2] * stages + step[1]) * spec.box[1]
                    with lead():
                        k.cp_async_bulk_tensor(tiles[step[1]], src, (0, y), mbar=bars.at(8 * step[1]))
                elif kind == "wait":
                    k.mbarrier_wait(bars.at(8 * step[1]), parity=step[2] if parity is None else parity)
                elif kind == "read":
                    k.ld(px.b32, each_thread(k, tiles[step[1]], tid), space="shared::cta")
                elif kind == "write":
                    k.st(px.b32, each_thread(k, tiles[step[1]], tid), tid, space="shared::cta")
                elif kind == "fence_async":
                    k.fence_proxy_async(space="shared::cta")
                elif kind == "store":
                    with lead():
                        k.cp_async_bulk_tensor(dst, tiles[step[1]], (0, step[2] * spec.box[1]))
                elif kind == "commit":
                    with lead():
                        k.cp_async_bulk_commit_group()
                elif kind == "wait_group":
                    with lead():
                        k.cp_async_bulk_wait_group_read(0)
                elif kind == "flip":
                    k.xor(parity, 1, out=parity)

        if not loop_rounds:
            emit(plan)
        else:
            head = plan.index(("sync",)) + 1
            emit(plan[:head])
            phase = k.mov(0, px.u32)
            with k.loop(0, loop_rounds) as i:
                emit(plan[head:], parity=phase, row=k.mul(i, spec.box[1]))
    return k.kernel


@contextmanager
def _elect_in(k, warp0):
    with k.if_(warp0):
        with k.elect_one():
            yield


def errors(kernel) -> set:
    return {d.rule for d in check(kernel) if d.severity == "error"}


def indices(plan, kind):
    return [i for i, s in enumerate(plan) if s[0] == kind]


def mutate(plan, how: str, pick: int, delta: int):
    """(mutated plan, the rules of which at least one must fire) or None when `how` does not apply."""
    p = list(plan)
    at = lambda kind: indices(p, kind)[pick % len(indices(p, kind))] if indices(p, kind) else None  # noqa: E731
    if how == "drop_init_fence":
        p.remove(("fence_init",))
        return p, {"mbarrier-init-fence"}
    if how == "drop_init":
        p.remove(("init",))
        return p, {"mbarrier-uninit"}
    if how == "bytes":
        i = at("expect")
        p[i] = ("expect", p[i][1], 16 * delta)
        return p, {"expect-tx-mismatch"}
    if how == "flip_parity":
        i = at("wait")
        p[i] = ("wait", p[i][1], 1 - p[i][2])
        return p, {"phase-reuse", "loop-parity"}
    if how == "wait_before_expect":
        i = at("wait")
        w = p.pop(i)
        j = max(x for x in indices(p, "expect") if x < i and p[x][1] == w[1])
        p.insert(j, w)
        return p, {"wait-before-arrive"}
    if how == "wait_after_use":
        i = at("wait")
        w = p.pop(i)
        uses = [j for j in range(i, len(p)) if p[j][0] in ("read", "write", "store") and p[j][1] == w[1]]
        p.insert(uses[0] + 1, w)
        return p, {"tma-load-race"}
    if how == "drop_wait":
        del p[at("wait")]
        return p, {"tma-load-race", "phase-reuse", "expect-tx-mismatch"}
    if how == "drop_proxy_fence":
        i = at("fence_async")
        if i is None:
            return None
        del p[i]
        return p, {"async-proxy-fence"}
    if how == "drop_wait_groups":
        if ("wait_group",) not in p:
            return None
        return [x for x in p if x != ("wait_group",)], {"bulk-group-exit", "bulk-group-pending"}
    raise AssertionError(how)


MUTATIONS = ["drop_init_fence", "drop_init", "bytes", "flip_parity", "wait_before_expect", "wait_after_use",
             "drop_wait", "drop_proxy_fence", "drop_wait_groups"]
configs = st.tuples(st.integers(0, len(SPECS) - 1), st.integers(1, 2), st.integers(1, 3),
                    st.sampled_from(["read", "store", "write"]), st.sampled_from(["tid0", "elect"]))


@given(configs)
def test_generated_pipelines_pass_clean(cfg):
    spec_i, stages, rounds, tail, leader = cfg
    assert check(build_plan(correct_plan(stages, rounds, tail), spec_i, stages, leader)) == []


@pytest.mark.parametrize("how", MUTATIONS)
@given(cfg=configs, pick=st.integers(0, 30), delta=st.integers(-64, 64).filter(bool))
@example(cfg=(0, 1, 1, "read", "tid0"), pick=0, delta=1)
def test_every_protocol_mutation_is_flagged(how, cfg, pick, delta):
    spec_i, stages, rounds, tail, leader = cfg
    mutated = mutate(correct_plan(stages, rounds, tail), how, pick, delta)
    if mutated is None:
        return
    plan, expected = mutated
    found = errors(build_plan(plan, spec_i, stages, leader))
    assert found & expected, (how, found, plan)


@given(configs, st.integers(0, 30))
def test_harmless_edits_stay_clean(cfg, pick):
    """Swapping an expect with its load, or repeating a wait at once, does not break the protocol."""
    spec_i, stages, rounds, tail, leader = cfg
    plan = correct_plan(stages, rounds, tail)
    i = indices(plan, "expect")[pick % len(indices(plan, "expect"))]
    plan[i], plan[i + 1] = plan[i + 1], plan[i]
    j = indices(plan, "wait")[pick % len(indices(plan, "wait"))]
    plan.insert(j + 1, plan[j])
    assert check(build_plan(plan, spec_i, stages, leader)) == []


@given(configs, st.integers(2, 5), st.booleans())
def test_loop_pipelines_flip_their_parity(cfg, trips, flip):
    """One round in a k.loop: clean when the parity register flips each iteration, loop-parity when not."""
    spec_i, stages, _, tail, leader = cfg
    plan = correct_plan(stages, 1, tail) + ([("flip",)] if flip else [])
    kernel = build_plan(plan, spec_i, stages, leader, loop_rounds=trips)
    if flip:
        assert check(kernel) == []
    else:
        assert "loop-parity" in errors(kernel)


@pytest.mark.parametrize("old, new, rule, line", [
    ("[bar], TILE_BYTES", "[bar], HALF_BYTES", "expect-tx-mismatch", 35),    # one half is not the tile
    ("const BOTH = 3", "const BOTH = 7", "multicast-mask", 37),             # rank 2 is not in the cluster
])
def test_multicast_example_counts_both_halves(old, new, rule, line):
    """The multicast example passes clean; each CTA's barrier gets both CTAs' halves, so expecting one half
    is a mismatch, and a mask bit past the cluster is reported at the load."""
    from ptxdsl import lang

    path = os.path.join(ROOT, "examples", "tma_multicast_tile.ptxd")
    text = open(path).read()
    assert check(lang.loads(text, path)[0]) == []
    assert old in text
    with pytest.raises(px.VerifyError) as info:
        lang.loads(text.replace(old, new), "m.ptxd")
    assert info.value.rule == rule and info.value.loc.line == line


@given(st.integers(1, 4).flatmap(lambda stages: st.tuples(st.just(stages), st.integers(stages, 10),
                                                            st.integers(max(0, stages - 2), stages + 2))))
def test_a_ring_drain_of_the_wrong_length_is_found(shape):
    """Any ring: clean when the drain runs one pass per slot still in flight; one pass short leaves loads in
    flight at exit (tma-load-race), one pass long waits for a phase nothing arms (wait-never-armed)."""
    stages, tiles, drain = shape
    drain = min(drain, tiles)
    found = errors(build_unchecked(lambda k: ring_drain(k, drain=drain, tiles=tiles, stages=stages)))
    want = set() if drain == stages else {"tma-load-race"} if drain < stages else {"wait-never-armed"}
    assert found == want, (shape, found)


@pytest.mark.parametrize("first, rule", [("TILES - STAGES + 1", "tma-load-race"),
                                         ("TILES - STAGES - 1", "wait-never-armed")])
def test_the_pipeline_example_with_a_drain_off_by_one(first, rule):
    from ptxdsl import lang

    path = os.path.join(ROOT, "examples", "tma_pipeline_copy.ptxd")
    text = open(path).read()
    assert "for t in TILES - STAGES..TILES {" in text
    with pytest.raises(px.VerifyError) as info:
        lang.loads(text.replace("for t in TILES - STAGES..TILES {", f"for t in {first}..TILES {{"), path)
    assert info.value.rule == rule


def producer_is_another_thread(k, producer_tid=96, waits=2):
    """Thread `producer_tid` fills a 2-slot ring; every thread, thread 0 among them, waits on each slot."""
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((512, 64), "bf16", (64, 64)))
    ring = k.shared("ring", 2 * BOX, align=128)
    full = k.mbarrier("full", 2)
    tid = k.tid_x()
    with k.if_(k.setp("eq", tid, 0)):
        for s in range(2):
            k.mbarrier_init(full.at(8 * s), 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, producer_tid)):
        with k.loop(0, 2) as i:
            slot = k.mad(i, 8, k.mov(full))
            k.mbarrier_arrive_expect_tx(slot, BOX)
            k.cp_async_bulk_tensor(k.mad(i, BOX, k.mov(ring)), src, (0, k.mul(i, 64)), mbar=slot)
    with k.loop(0, waits) as i:
        k.mbarrier_wait(k.mad(i, 8, k.mov(full)), parity=0)
        k.ld(px.u32, k.add(k.mad(i, BOX, k.mov(ring)), k.shl(tid, 2)), space="shared::cta")


def test_the_run_of_thread_0_leaves_rings_other_threads_fill_alone():
    """Thread 0 never arms this ring (thread 96 does): its run cannot count it and must not report it."""
    assert check(build(producer_is_another_thread)) == []
    assert check(build(lambda k: producer_is_another_thread(k, producer_tid=0))) == []
    with pytest.raises(px.VerifyError) as info:           # the same ring waited once too often: slot 2 of 2
        build(lambda k: producer_is_another_thread(k, producer_tid=0, waits=3))
    assert info.value.rule == "mbarrier-bounds"
    with pytest.raises(px.VerifyError) as info:           # ... and by the threads that do not fill it
        build(lambda k: producer_is_another_thread(k, producer_tid=96, waits=3))
    assert info.value.rule == "mbarrier-bounds"


# ---------------------------------------------------------- the ring rules in .ptxd: a bad kernel, its fixed twin

RING3_PTXD = """const TILES = 8
const STAGES = 3
const TILE_BYTES = 8192

kernel ring3(tensormap src: bf16[512, 256] box [64, 64])
    .reqntid 128
{
    shared ring: b8[STAGES * TILE_BYTES] align 128
    mbarrier full[STAGES]
    mbarrier empty[STAGES]
    tid = %tid.x
    is_t0 = tid == 0
    if is_t0 {
        for s in 0..STAGES {
            mbarrier.init [full + s * 8], 1         // INIT
            mbarrier.init [empty + s * 8], 128
        }
        fence.mbarrier_init
    }
    bar.sync 0                                      // SYNC
    if is_t0 {
        for s in 0..STAGES {
            mbarrier.arrive.expect_tx [full + s * 8], TILE_BYTES
            cp.async.bulk.tensor [ring + s * TILE_BYTES], [src, {0, s * 64}], [full + s * 8]
        }
    }
    reg u32 stage = 0
    reg u32 phase = 0
    for t in 0..TILES {
        full_s = full + stage * 8
        empty_s = empty + stage * 8
        buf = ring + stage * TILE_BYTES
        wait [full_s] parity phase                  // FULL
        v = ld.shared::cta.v4.b32 [buf + (tid << 4)]
        mbarrier.arrive [empty_s]                   // ARRIVE
        if is_t0 {
            if t + STAGES < TILES {
                wait [empty_s] parity phase         // EMPTY
                mbarrier.arrive.expect_tx [full_s], TILE_BYTES
                cp.async.bulk.tensor [buf], [src, {0, (t + STAGES) * 64}], [full_s]    // REFILL
            }
        }
        stage = stage + 1
        if stage == STAGES {
            stage = 0
            phase = phase ^ 1
        }
    }
}
"""

ARRIVALS_PTXD = """kernel arrivals()
    .reqntid 128
{
    mbarrier bar
    is_t0 = %tid.x == 0
    if is_t0 {
        mbarrier.init [bar], 128
        fence.mbarrier_init
    }
    bar.sync 0
    if is_t0 {
        mbarrier.arrive [bar]
    }
    wait [bar] parity 0                             // WAIT
}
"""

FIXED_ARRIVALS = ARRIVALS_PTXD.replace("""    if is_t0 {
        mbarrier.arrive [bar]
    }
""", """    mbarrier.arrive [bar]
""")

# (rule, bad text, fixed text, the marker of the line the rule names)
HANDOFF_PTXD = """kernel handoff(tensormap y: f32[256, 512] box [32, 128], u64 flags, u32 epoch, u32 group)
    .reqntid 128
{
    shared tile: b8[16384] align 128
    if %tid.x == 0 {
        if group == 0 {
            cp.async.bulk.tensor [y, {0, 0}], [tile]
            cp.async.bulk.commit_group
            cp.async.bulk.wait_group 0
            fence.proxy.async.global                            // STORE FENCE
            st.release.gpu.global.u32 [flags], epoch            // PUBLISH
        } else {
again:
            v = ld.acquire.gpu.global.u32 [flags]
            pending = v != epoch
            @pending bra again
            fence.proxy.async.global                            // LOAD FENCE
            cp.reduce.async.bulk.tensor.add [y, {0, 0}], [tile]  // REDUCE
        }
        cp.async.bulk.commit_group
        cp.async.bulk.wait_group.read 0
    }
}"""


def _without(text, marker):
    return "\n".join(ln for ln in text.split("\n") if not ln.rstrip().endswith(marker))


PTXD_TWINS = [
    ("ring-parity", RING3_PTXD.replace("reg u32 phase = 0", "reg u32 phase = 1"), RING3_PTXD, "// FULL"),
    ("refill-race", "\n".join(ln for ln in RING3_PTXD.split("\n") if "// EMPTY" not in ln), RING3_PTXD, "// REFILL"),
    ("wait-never-armed", RING3_PTXD.replace("for t in 0..TILES {", "for t in 0..TILES + 1 {"), RING3_PTXD, "// FULL"),
    ("arrival-count", ARRIVALS_PTXD, FIXED_ARRIVALS, "// WAIT"),
    ("arrival-count", RING3_PTXD.replace("mbarrier.init [empty + s * 8], 128", "mbarrier.init [empty + s * 8], 127"),
     RING3_PTXD, "// ARRIVE"),
    ("mbarrier-init-sync", "\n".join(ln for ln in RING3_PTXD.split("\n") if "// SYNC" not in ln), RING3_PTXD,
     "// FULL"),
    ("mbarrier-bounds", RING3_PTXD.replace("for s in 0..STAGES {", "for s in 0..STAGES + 1 {", 1), RING3_PTXD,
     "// INIT"),
    ("bulk-store-release", _without(HANDOFF_PTXD, "// STORE FENCE"), HANDOFF_PTXD, "// PUBLISH"),
    ("bulk-store-release", HANDOFF_PTXD.replace("wait_group 0\n", "wait_group.read 0\n", 1), HANDOFF_PTXD,
     "// PUBLISH"),
    ("acquire-async-fence", _without(HANDOFF_PTXD, "// LOAD FENCE"), HANDOFF_PTXD, "// REDUCE"),
]


@pytest.mark.parametrize("rule, bad, fixed, marker", PTXD_TWINS, ids=[f"{t[0]}-{t[3][3:]}" for t in PTXD_TWINS])
def test_ptxd_twins_of_the_ring_rules(rule, bad, fixed, marker):
    from ptxdsl import lang

    line = 1 + next(i for i, text in enumerate(bad.split("\n")) if text.rstrip().endswith(marker))
    with pytest.raises(px.VerifyError) as info:
        lang.loads(bad, "twin.ptxd")
    assert info.value.rule == rule and info.value.loc.line == line, str(info.value)
    assert info.value.loc.file == "twin.ptxd" and f"twin.ptxd:{line}" in str(info.value)
    (k,) = lang.loads(fixed, "twin.ptxd")
    assert check(k) == []
    px.assemble(px.emit(k), "sm_90a")


# ---------------------------------------------------------- the run's per-thread values: affine forms

def _as_column(v, tids):
    from ptxdsl.verify.threads import column

    v = column(v, tids)
    return v if isinstance(v, tuple) else (v,) * len(tids)


@given(st.sampled_from(["add", "sub", "mul", "shl", "mad", "setp.eq", "setp.ne", "setp.lt", "setp.ge", "and",
                        "shr", "xor"]),
       st.integers(-4, 64), st.integers(0, 1 << 20), st.integers(0, 1 << 12), st.sampled_from(["u32", "s32", "u64"]),
       st.lists(st.integers(0, 1023), min_size=2, max_size=40, unique=True).map(sorted), st.booleans(),
       st.booleans())
@example("sub", 1, 0, 5, "u32", [0, 1, 127], False, False)           # negative for thread 0: wraps
@example("shl", 1 << 20, 0, 12, "u32", [0, 4095], False, False)       # past 32 bits: wraps
@example("add", 16, 64, 8, "u32", [0, 1, 127], True, True)            # an address plus an offset
@example("mad", 16, 0, 3, "u32", [1, 2, 3], True, False)              # 3 * (16 t) + buffer
def test_affine_per_thread_values_agree_with_thread_by_thread(fn, a, b, k, type_name, tids, address, swap):
    """The run keeps %tid.x-derived values as a * t + b (Affine); each operation on them gives, thread by thread,
    what the tuple of per-thread values gives (wrap-around, signed comparisons and addresses included)."""
    from hypothesis import assume

    from ptxdsl.ir import Reg, SharedAlloc
    from ptxdsl.isa.effects import Compute
    from ptxdsl.types import ALL_TYPES
    from ptxdsl.verify.threads import Sym, Values, affine

    t = ALL_TYPES[type_name]
    buf = SharedAlloc("buf", 1 << 16, 128)
    lin = affine(a, b, buf if address and fn in ("add", "sub", "mad") else None)
    if lin is not None and not isinstance(lin, (int, Sym)):
        lo, hi = lin.bounds(tids)
        assume(lin.alloc is not None or (lo >= 0 and hi < 1 << t.bits))
    args = [lin, k]
    if fn == "mad":
        args = [k, lin, Sym(buf, 64)] if address else [k, lin, 7]
    elif swap:
        args = args[::-1]
    mode = "lo" if fn in ("mad", "mul") else None
    e = Compute(Reg(t, 1), fn, tuple(Reg(t, 2 + i) for i in range(len(args))), t, mode)
    values = Values((1024, 1, 1), None)
    fast = values.compute(e, list(args), tuple(tids))
    slow = values.compute(e, [_as_column(x, tids) for x in args], tuple(tids))
    assert _as_column(fast, tids) == _as_column(slow, tids), (fn, args, fast, slow)


def test_check_takes_a_builder_or_a_kernel_and_names_anything_else():
    with px.kernel("k", reqntid=32) as k:
        k.mov(1, px.u32)
    assert check(k) == check(k.kernel) == []
    with pytest.raises(px.DSLError, match=r"check\('k'\): expected a Kernel or a kernel builder") as e:
        check("k")
    assert e.value.loc.file == __file__


def test_a_shift_by_a_negative_constant_is_no_internal_error():
    """shl.b32 by an s32 register holding -1 (a shift past the width: 0): the facts of the result are unknown,
    not a ValueError from inside the verifier (found by the .ptxd round trip's random kernels)."""
    with px.kernel("k") as k:
        p = k.param_ptr("p")
        s = k.shl(k.mov(-1, px.s32), k.mov(-1, px.s32))
        k.st(px.s32, p, s)
    assert check(k) == []


def test_a_loop_that_only_polls_global_memory_is_one_step_of_the_run():
    """The run of the threads takes a spin on a flag in global memory (Flags.wait) as one step that ends; a
    hand-written loop that touches shared memory (or does anything the run counts) still ends the run."""
    from ptxdsl.pipeline import Flags
    from ptxdsl.verify.linear import flatten

    def spin(k, space):
        flag = k.param_ptr("flag")
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            if space == "global":
                Flags(k, "f", flag).wait(0, 1)
            else:
                buf = k.shared("buf", 16, align=16)
                again = k.label("again")
                with k.guard(k.setp("ne", k.ld(px.u32, buf, space="shared::cta"), 1)):
                    k.bra(again)

    code = flatten(build(lambda k: spin(k, "global")).body, lambda loop: True)
    assert [c[0] for c in code][-2:] == ["if", "poll"] and code[-1][1].label.name == "f_wait1"
    assert flatten(build(lambda k: spin(k, "shared")).body, lambda loop: True) is None


def test_a_fence_alone_is_no_flag_acquire_but_is_a_release():
    """acquire-async-fence follows acquiring loads and atomics (a flag read), not a fence kept for other reasons;
    on the release side a fence counts (a fence then a relaxed flag store is a release)."""
    def fenced_load(k):
        src, tile, bar, tid, t0 = setup(k)
        init(k, bar, t0)
        k.fence("acq_rel", "gpu")
        load(k, src, tile, bar, t0)
        k.mbarrier_wait(bar, parity=0)

    assert check(build(fenced_load)) == []

    def store_then_fence(k):
        dst = k.param_tensormap("dst", SPEC)
        tile = k.shared("tile", BOX, align=128)
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            k.cp_async_bulk_tensor(dst, tile, (0, 0))
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group_read(0)
            k.fence("acq_rel", "gpu")  # BAD
            k.st(px.u32, k.param_ptr("flag"), 1)

    assert [d.rule for d in check(build_unchecked(store_then_fence))] == ["bulk-store-release"]


# ------------------------------------------------------------------------------------- async-group queues

def test_async_group_queues_commit_and_retire_by_name():
    """One mechanism for every kind of group: a wait on one queue retires all but its n newest groups there and
    nothing of another queue; wait_group.read retires the shared-memory reads of a bulk group, not its global
    writes."""
    from ptxdsl.verify.groups import READ, REGS, WRITE, Groups
    g = Groups().add("bulk", READ, "r1").add("bulk", WRITE, "w1").commit("bulk")
    g = g.add("bulk", READ, "r2").commit("bulk").add("wgmma", REGS, "acc").commit("wgmma")
    done, g = g.wait("bulk", 1, read=True)
    assert [x.item for x in done] == ["r1"]
    assert [x.item for x in g.pending("bulk")] == ["w1", "r2"] and [x.item for x in g.pending("wgmma")] == ["acc"]
    done, g = g.wait("bulk", 0)
    assert [x.item for x in done] == ["w1", "r2"] and g.pending("bulk") == ()
    done, g = g.wait("wgmma", 1)
    assert done == () and [x.item for x in g.pending("wgmma", REGS)] == ["acc"]
    open_ = Groups().add("wgmma", REGS, "acc")
    assert open_.wait("wgmma", 0)[0] == () and open_.uncommitted("wgmma", open_.pending("wgmma")[0])
    assert Groups().commit("bulk") == Groups() and Groups().commit("bulk", empty=True).queue("bulk").committed == ((),)


def store_then_overwrite(k, wait):
    dst = k.param_tensormap("dst", SPEC)
    tile = k.shared("tile", BOX, align=128)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        k.cp_async_bulk_tensor(dst, tile, (0, 0))
        k.cp_async_bulk_commit_group()
        if wait == "bulk":
            k.cp_async_bulk_wait_group_read(0)
    if wait == "wgmma":
        k.wgmma_commit_group()
        k.wgmma_wait_group(0)
    k.bar_sync(0)
    k.st(px.u32, each_thread(k, tile, tid), tid, space="shared::cta")  # BAD
    with k.if_(t0):
        k.cp_async_bulk_wait_group_read(0)


def test_a_wgmma_wait_retires_no_bulk_group():
    assert [(d.rule, d.loc.line) for d in check(build_unchecked(lambda k: store_then_overwrite(k, "wgmma")))] == \
        [("bulk-group-pending", bad_line(store_then_overwrite))]
    assert check(build(lambda k: store_then_overwrite(k, "bulk"))) == []


def test_the_launch_run_follows_wgmma_stages():
    """With the tile count a parameter the run at build time cannot follow the ring; check_launch runs it with the
    launch's count: the early release is found there, the fixed ring passes, and the debug build of either (a
    watchdog around each wait, the MMAs async with no barrier of their own) assembles."""
    def ring(k, release):
        wgmma_ring(k, release=release, tiles=k.param("tiles", px.u32))

    for release, rule in (("before_wait", "wgmma-stage-release"), ("after_wait", None)):
        k = build(lambda k: ring(k, release), reqntid=256, debug=True)
        px.assemble(px.emit(k), "sm_90a")
        args = {"tiles": 4, "a": WG_SPEC, "out": 0}
        launch = lambda: px.verify.check_launch(k, tuple(args[p.name] for p in k.params if p.name in args),  # noqa
                                                grid=(1, 1, 1), block=(256, 1, 1))
        if rule is None:
            launch()
            continue
        with pytest.raises(px.LaunchError) as info:
            launch()
        assert info.value.rule == rule and info.value.loc.line == marked_line(wgmma_ring, "# REFILL")


@pytest.mark.parametrize("release, rule", [("pipelined", None), ("pipelined_this", "wgmma-stage-release")])
def test_a_wgmma_ring_that_keeps_one_group_in_flight(release, rule):
    """wait_group 1 after issuing stage t retires stage t - 1: releasing that one is right, releasing stage t (still
    read by the group in flight) lets the producer refill it under the MMA."""
    diags = check(build_unchecked(lambda k: wgmma_ring(k, release=release, tiles=6), reqntid=256))
    assert [d.rule for d in diags] == ([rule] if rule else []), format_diagnostics(diags)


@pytest.mark.parametrize("release, rule", [("after_wait", None), ("before_wait", "wgmma-stage-release")])
def test_one_thread_releases_the_stage_for_its_warpgroup(release, rule):
    """An MMA is the warpgroup's and wgmma.wait_group is collective: once the lead thread (thread 128) has passed
    the wait, the stage is free for every thread of the warpgroup, and its arrive alone may release it."""
    diags = check(build_unchecked(lambda k: wgmma_ring(k, release=release, tiles=6, lead_releases=True),
                                  reqntid=256))
    assert [d.rule for d in diags] == ([rule] if rule else []), format_diagnostics(diags)


def test_a_descriptor_may_read_a_row_slice_of_a_box():
    """Two consumer warpgroups each read their 64 rows of one 128-row box (same swizzle, same SBO): no
    disagreement; a 64-row layout of another swizzle still disagrees."""
    spec = px.TensorMapSpec.tiled_for((256, 256), "bf16", (128, 64), swizzle="128B")

    def fn(k, layout):
        a_map = k.param_tensormap("a", spec)
        tile, bar = k.shared("tile", 16384, align=1024), k.mbarrier("bar")
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        init(k, bar, t0)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, 16384)
            k.cp_async_bulk_tensor(tile, a_map, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)
        half = k.matrix_descriptor(tile, layout, k.mul(k.shr(tid, 7), 8192))
        acc = Accumulator(k, 64)
        k.wgmma_fence()
        k.wgmma_mma_async(acc, half, half, scale_d=0)
        k.wgmma_commit_group()
        k.wgmma_wait_group(0)

    assert check(build(lambda k: fn(k, MatrixLayout("bf16", 64, 64, "128B")), reqntid=256)) == []
    diags = check(build_unchecked(lambda k: fn(k, MatrixLayout("bf16", 64, 64, "64B")), reqntid=256))
    assert [d.rule for d in diags] == ["wgmma-descriptor-map"] and "swizzle" in diags[0].message
