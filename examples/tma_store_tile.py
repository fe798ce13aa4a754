"""(b) One lane TMA-loads a 64x64 bf16 tile, then TMA-stores it to the same place of another
matrix, completing through a bulk group (commit_group, wait_group 0)."""
import numpy as np

import ptxdsl as px
from tile_common import THREADS, TILE, TILE_BYTES, load_tile, random_bf16, tile_spec

ROWS, COLS = 256, 512

with px.kernel("tma_store_tile", reqntid=THREADS) as k:
    src = k.param_tensormap("src", tile_spec(ROWS, COLS))
    dst = k.param_tensormap("dst", tile_spec(ROWS, COLS))
    tile = k.shared("tile", TILE_BYTES, align=128)
    bar = k.mbarrier("bar")
    _, is_t0, x, y = load_tile(k, src, tile, bar)
    k.fence_proxy_async(space="shared::cta")
    with k.if_(is_t0):
        k.cp_async_bulk_tensor(dst, tile, (x, y))
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group(0)

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {}, grid=(COLS // TILE, ROWS // TILE))]


def run(device=None, kernel=None):
    """Copy a random matrix tile by tile through shared memory; the copy must be bit-exact. `kernel` replaces the kernel
    (the same kernel built another way, e.g. from its .ptxd form)."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(1)
    a = random_bf16(rng, (ROWS, COLS))
    prog = px.compile(kernel or k, device=device)
    src_buf = DeviceArray.to_device(a)
    dst_buf = DeviceArray.to_device(np.full_like(a, np.nan))
    prog["tma_store_tile"](px.TensorMapSpec.from_array(src_buf, (TILE, TILE)),
                           px.TensorMapSpec.from_array(dst_buf, (TILE, TILE)),
                           grid=(COLS // TILE, ROWS // TILE), block=THREADS)
    got = dst_buf.to_host()
    ok = got.view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
    return ok, f"tma_store_tile: {ROWS}x{COLS} bf16, bit-exact={ok}"
