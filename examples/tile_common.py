"""The part the three seed kernels share: one lane loads a 64x64 bf16 tile with TMA on an mbarrier.

Each CTA handles the tile at (ctaid.x * 64, ctaid.y * 64) of a row-major bf16 matrix.
"""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg

TILE = 64
TILE_BYTES = TILE * TILE * 2          # bf16
THREADS = 128


def tile_spec(rows: int, cols: int) -> px.TensorMapSpec:
    """The tensor map of a rows x cols bf16 matrix read in 64x64 boxes."""
    return px.TensorMapSpec.tiled_for((rows, cols), "bf16", (TILE, TILE))


def load_tile(k, tmap, tile, bar):
    """Thread 0 initialises the barrier, expects the tile's bytes and issues the TMA load;
    every thread then waits for phase 0. Returns (tid, is_thread0, x, y)."""
    tid = k.mov(sreg.tid_x)
    is_t0 = k.setp("eq", tid, 0)
    x = k.mul(k.mov(sreg.ctaid_x), TILE)
    y = k.mul(k.mov(sreg.ctaid_y), TILE)
    with k.if_(is_t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(is_t0):
        k.mbarrier_arrive_expect_tx(bar, TILE_BYTES, sem="release", scope="cta")
        k.cp_async_bulk_tensor(tile, tmap, (x, y), mbar=bar)
    k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
    return tid, is_t0, x, y


def random_bf16(rng, shape):
    import ml_dtypes

    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
