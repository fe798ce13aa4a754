"""(c) One lane TMA-loads a 64x64 bf16 tile, then reduce-adds it into the same place of another
matrix with cp.reduce.async.bulk.tensor.add (bulk group, wait_group 0)."""
import numpy as np

import ptxdsl as px
from tile_common import THREADS, TILE, TILE_BYTES, load_tile, random_bf16, tile_spec

ROWS, COLS = 256, 512

with px.kernel("tma_reduce_tile", reqntid=THREADS) as k:
    src = k.param_tensormap("src", tile_spec(ROWS, COLS))
    acc = k.param_tensormap("acc", tile_spec(ROWS, COLS))
    tile = k.shared("tile", TILE_BYTES, align=128)
    bar = k.mbarrier("bar")
    _, is_t0, x, y = load_tile(k, src, tile, bar)
    k.fence_proxy_async(space="shared::cta")
    with k.if_(is_t0):
        k.cp_reduce_async_bulk_tensor("add", acc, tile, (x, y))
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group(0)

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {}, grid=(COLS // TILE, ROWS // TILE))]


def run(device=None, kernel=None):
    """acc += a tile by tile; the result must be the float32 sum rounded to bf16 (within 1 ulp). `kernel` replaces the kernel
    (the same kernel built another way, e.g. from its .ptxd form)."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(2)
    a = random_bf16(rng, (ROWS, COLS))
    acc0 = random_bf16(rng, (ROWS, COLS))
    prog = px.compile(kernel or k, device=device)
    src_buf = DeviceArray.to_device(a)
    acc_buf = DeviceArray.to_device(acc0)
    prog["tma_reduce_tile"](px.TensorMapSpec.from_array(src_buf, (TILE, TILE)),
                            px.TensorMapSpec.from_array(acc_buf, (TILE, TILE)),
                            grid=(COLS // TILE, ROWS // TILE), block=THREADS)
    got = acc_buf.to_host()
    want = (acc0.astype(np.float32) + a.astype(np.float32)).astype(ml_dtypes.bfloat16)
    ulps = np.abs(got.view(np.int16).astype(np.int32) - want.view(np.int16).astype(np.int32))
    exact = int((ulps == 0).sum())
    ok = bool(ulps.max() <= 1)
    return ok, f"tma_reduce_tile: {ROWS}x{COLS} bf16, {exact}/{ulps.size} equal to the rounded f32 sum, max {ulps.max()} ulp"
