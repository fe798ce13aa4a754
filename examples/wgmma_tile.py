"""One 64 x N x 64 tile on the tensor cores, per CTA: TMA loads A (64 x 64) and B (N x 64, K contiguous) into
128B-swizzled shared memory, one warpgroup multiplies them with four wgmma.mma_async (bf16 in, f32 accumulate),
rounds the accumulator to bf16, stores it through stmatrix and writes the tile back with a TMA store.

C = A @ B.T over a (ROWS x K) A and an (COLS x K) B, one 64 x N tile of C per CTA."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.fragment import Accumulator

ROWS, COLS, K = 256, 512, 64          # C is ROWS x COLS; the whole K is one tile
TM, TN = 64, 128                      # the tile of C one CTA computes: m64n128k16 four times
THREADS = 128                         # one warpgroup

A = px.TensorMapSpec.tiled_for((ROWS, K), "bf16", (TM, K), swizzle="128B")
B = px.TensorMapSpec.tiled_for((COLS, K), "bf16", (TN, K), swizzle="128B")
C = px.TensorMapSpec.tiled_for((ROWS, COLS), "bf16", (TM, TN))
A_TILE = px.MatrixLayout.for_tensormap(A)         # 64 rows x 64 K, K-major, as the TMA load writes it
B_TILE = px.MatrixLayout.for_tensormap(B)         # 128 rows (N) x 64 K
C_PITCH = TN * 2                                  # bytes per row of the bf16 C tile in shared memory

with px.kernel("wgmma_tile", reqntid=THREADS) as k:
    a_map = k.param_tensormap("a", A)
    b_map = k.param_tensormap("b", B)
    c_map = k.param_tensormap("c", C)
    a_tile = k.shared("a_tile", A_TILE.nbytes, align=1024)
    b_tile = k.shared("b_tile", B_TILE.nbytes, align=1024)
    c_tile = k.shared("c_tile", TM * C_PITCH, align=128)
    bar = k.mbarrier("bar")
    n0 = k.mul(k.mov(sreg.ctaid_x), TN)
    m0 = k.mul(k.mov(sreg.ctaid_y), TM)
    is_t0 = k.setp("eq", k.tid_x(), 0)

    with k.if_(is_t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(is_t0):
        k.mbarrier_arrive_expect_tx(bar, A.box_bytes + B.box_bytes, sem="release", scope="cta")
        k.cp_async_bulk_tensor(a_tile, a_map, (0, m0), mbar=bar)
        k.cp_async_bulk_tensor(b_tile, b_map, (0, n0), mbar=bar)
    k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")

    a = k.matrix_descriptor(a_tile, A_TILE)
    b = k.matrix_descriptor(b_tile, B_TILE)
    acc = Accumulator(k, TN)                   # 64 x 128 f32: 64 registers per thread
    k.wgmma_fence()
    for j in range(A_TILE.k_steps):               # 64 K = 4 steps of k16
        k.wgmma_mma_async(acc, a.advance_k(j), b.advance_k(j), scale_d=0 if j == 0 else 1)
    k.wgmma_commit_group()
    k.wgmma_wait_group(0)

    acc.store(k, c_tile, C_PITCH, dtype="bf16")   # cvt.rn.bf16x2.f32 pairs, stmatrix.x4 rows
    k.fence_proxy_async("shared::cta")            # the tile, visible to the TMA unit
    k.bar_sync(0)
    with k.if_(is_t0):
        k.cp_async_bulk_tensor(c_map, c_tile, (n0, m0))
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group_read(0)

KERNEL = k


def launches():
    """The launch this file is written for: one CTA per 64 x 128 tile of C."""
    return [px.Launch("wgmma_tile", grid=(COLS // TN, ROWS // TM), block=THREADS)]


def reference(a, b) -> np.ndarray:
    """C = A @ B.T in f32 from the bf16 inputs."""
    return a.astype(np.float32) @ b.astype(np.float32).T


# f32 accumulation of 64 bf16 products, rounded once to bf16: the error is the final rounding (2^-9 relative) plus
# the accumulation's (64 * 2^-24 of the sum of |products|), well inside 2^-8 of max(|C|, sum |a||b|).
def within_bound(got, want, a, b) -> tuple[bool, float]:
    scale = np.abs(a.astype(np.float32)) @ np.abs(b.astype(np.float32)).T
    err = np.abs(got.astype(np.float32) - want)
    bound = 2.0**-8 * np.maximum(np.abs(want), scale) + 1e-6
    return bool(np.all(err <= bound)), float(np.max(err / np.maximum(scale, 1e-6)))


def run(device=None, kernel=None):
    """Multiply random bf16 matrices and check every element of C against the f32 product."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(0)
    a = rng.standard_normal((ROWS, K), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((COLS, K), dtype=np.float32).astype(ml_dtypes.bfloat16)
    prog = px.compile(kernel or k, device=device)
    a_buf, b_buf = DeviceArray.to_device(a), DeviceArray.to_device(b)
    c_buf = DeviceArray.to_device(np.full((ROWS, COLS), np.nan, dtype=ml_dtypes.bfloat16))
    prog["wgmma_tile"](px.TensorMapSpec.from_array(a_buf, (TM, K), swizzle="128B"),
                       px.TensorMapSpec.from_array(b_buf, (TN, K), swizzle="128B"),
                       px.TensorMapSpec.from_array(c_buf, (TM, TN)), grid=(COLS // TN, ROWS // TM), block=THREADS)
    got = c_buf.to_host()
    ok, worst = within_bound(got, reference(a, b), a, b)
    return ok, f"wgmma_tile: {ROWS}x{COLS}x{K} bf16 -> f32 -> bf16, within bound={ok} (worst {worst:.2e} of sum|ab|)"
