"""(a) One lane TMA-loads a 64x64 bf16 tile into shared memory; all threads copy it back to global
memory with ordinary 16-byte loads and stores."""
import numpy as np

import ptxdsl as px
from tile_common import THREADS, TILE, TILE_BYTES, load_tile, random_bf16, tile_spec

ROWS, COLS = 256, 512

with px.kernel("tma_load_tile", reqntid=THREADS) as k:
    src = k.param_tensormap("src", tile_spec(ROWS, COLS))
    out = k.param_ptr("out")
    pitch = k.param("pitch", px.u32)                  # bytes per output row
    tile = k.shared("tile", TILE_BYTES, align=128)
    bar = k.mbarrier("bar")
    tid, _, x, y = load_tile(k, src, tile, bar)
    tile_base = k.mov(tile)
    with k.loop(0, TILE_BYTES // 16 // THREADS) as i:
        chunk = k.mad(i, THREADS, tid)                 # 16-byte chunk of the tile
        row = k.shr(chunk, 3)                          # 8 chunks per 128-byte row
        col = k.and_(chunk, 7)
        vals = k.ld(px.b32, k.add(tile_base, k.shl(chunk, 4)), space="shared::cta", vec=4)
        grow = k.add(y, row)
        gbyte = k.mad(grow, pitch, k.add(k.shl(x, 1), k.shl(col, 4)))
        k.st(px.b32, k.add(out, k.cvt(px.u64, gbyte)), vals)

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {"pitch": COLS * 2}, grid=(COLS // TILE, ROWS // TILE))]


def run(device=None, kernel=None):
    """Load every tile of a random matrix and check the copy is bit-exact. `kernel` replaces the kernel
    (the same kernel built another way, e.g. from its .ptxd form)."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(0)
    a = random_bf16(rng, (ROWS, COLS))
    prog = px.compile(kernel or k, device=device)
    src_buf = DeviceArray.to_device(a)
    out_buf = DeviceArray.to_device(np.full_like(a, np.nan))
    prog["tma_load_tile"](px.TensorMapSpec.from_array(src_buf, (TILE, TILE)), out_buf, COLS * 2,
                          grid=(COLS // TILE, ROWS // TILE), block=THREADS)
    got = out_buf.to_host()
    ok = got.view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
    return ok, f"tma_load_tile: {ROWS}x{COLS} bf16, bit-exact={ok}"
