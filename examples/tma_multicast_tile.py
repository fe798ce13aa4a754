"""Multicast. The two CTAs of a cluster need the same 64x64 bf16 tile, as the CTAs that share an A
tile in a GEMM do. Each CTA loads one half of it (32 rows) with .multicast::cluster, so every half lands
in both CTAs' shared memory at the same offset and completes on both CTAs' barriers: each barrier expects
the whole tile. Each CTA then writes its copy to its own column block of `out`, so both 64-column blocks
of a row block must equal the source."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from tile_common import THREADS, TILE, TILE_BYTES, random_bf16

ROWS = 256
CTAS = 2                                              # CTAs per cluster, along x
HALF = TILE // CTAS                                   # rows each CTA loads
HALF_BYTES = TILE_BYTES // CTAS
BOTH = (1 << CTAS) - 1                                # the multicast mask: every CTA of the cluster

with px.kernel("tma_multicast_tile", reqntid=THREADS, reqnctapercluster=(CTAS, 1, 1)) as k:
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((ROWS, TILE), "bf16", (HALF, TILE)))
    out = k.param_ptr("out")
    pitch = k.param("pitch", px.u32)                  # bytes per output row
    tile = k.shared("tile", TILE_BYTES, align=128)
    bar = k.mbarrier("bar")

    tid = k.mov(sreg.tid_x)
    is_t0 = k.setp("eq", tid, 0)
    rank = k.mov(sreg.cluster_ctarank)
    y = k.mul(k.mov(sreg.ctaid_y), TILE)
    with k.if_(is_t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    # Both barriers are initialised (and the init published cluster-wide) before either CTA multicasts.
    k.barrier_cluster_arrive(sem="release", aligned=True)
    k.barrier_cluster_wait(sem="acquire", aligned=True)
    with k.if_(is_t0):
        k.mbarrier_arrive_expect_tx(bar, TILE_BYTES, sem="release", scope="cta")
        half = k.mul(rank, HALF)
        k.cp_async_bulk_tensor(k.mad(rank, HALF_BYTES, k.mov(tile)), src, (0, k.add(y, half)), mbar=bar,
                               multicast=BOTH)
    k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")

    base = k.mov(tile)
    column = k.mul(rank, TILE * 2)                    # this CTA's 64-column block of `out`, in bytes
    with k.loop(0, TILE_BYTES // 16 // THREADS) as i:
        chunk = k.mad(i, THREADS, tid)                # 16-byte chunk of the tile
        row, col = k.shr(chunk, 3), k.and_(chunk, 7)  # 8 chunks per 128-byte row
        vals = k.ld(px.b32, k.add(base, k.shl(chunk, 4)), space="shared::cta", vec=4)
        gbyte = k.mad(k.add(y, row), pitch, k.add(column, k.shl(col, 4)))
        k.st(px.b32, k.add(out, k.cvt(px.u64, gbyte)), vals)

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {"pitch": CTAS * TILE * 2}, grid=(CTAS, ROWS // TILE), cluster=(CTAS, 1, 1))]


def run(device=None, kernel=None):
    """Broadcast each 64-row block of a random ROWS x 64 matrix to both CTAs of a cluster; `out` must hold
    the matrix twice side by side, bit for bit. `kernel` replaces the kernel (the same kernel built another
    way, e.g. from its .ptxd form)."""
    from ptxdsl.runtime import DeviceArray

    a = random_bf16(np.random.default_rng(4), (ROWS, TILE))
    prog = px.compile(kernel or k, device=device)
    src_buf = DeviceArray.to_device(a)
    out_buf = DeviceArray.to_device(np.full((ROWS, CTAS * TILE), np.nan, a.dtype))
    prog["tma_multicast_tile"](px.TensorMapSpec.from_array(src_buf, (HALF, TILE)), out_buf, CTAS * TILE * 2,
                               grid=(CTAS, ROWS // TILE), block=THREADS, cluster=(CTAS, 1, 1))
    want = np.concatenate([a] * CTAS, axis=1)
    same = out_buf.to_host().view(np.uint16) == want.view(np.uint16)
    ok = bool(same.all())
    return ok, (f"tma_multicast_tile: {ROWS}x{TILE} bf16 to a cluster of {CTAS}, bit-exact={ok} "
                f"differing={int((~same).sum())}")
