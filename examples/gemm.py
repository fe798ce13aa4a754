"""C = A @ B in bf16 with f32 accumulation: the kernels ptxdsl.gemm builds for 128x256 tiles (a producer
warpgroup at 40 registers, two consumer warpgroups at 232, a 4-stage ring, C staged 128 columns at a time), on
a persistent grid: KERNEL reads B K-major (B stored N x K: torch's a @ w.T), KERNEL_MN reads it MN-major (B
stored K x N). `ptxdsl check examples/gemm.py` verifies and assembles both; docs/gemm.md walks through them."""
from dataclasses import replace

import numpy as np

import ptxdsl as px
from ptxdsl.gemm import GemmConfig, build, matmul

CONFIG = GemmConfig(stages=4, epilogue_n=128)
KERNEL = build(CONFIG)
KERNEL_MN = build(replace(CONFIG, b_major="MN"))
M, N, K = 1000, 520, 200                # run()'s product: no dimension a multiple of the tile


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed): 8 x 3 tiles of
    128 x 256, 4 K blocks of 64, one persistent CTA per tile; and the same for B K-major."""
    tiles = {"m_tiles": -(-M // CONFIG.block_m), "n_tiles": -(-N // CONFIG.block_n),
             "k_blocks": -(-K // CONFIG.block_k)}
    grid = tiles["m_tiles"] * tiles["n_tiles"]
    return [px.Launch(kernel, tiles, grid=grid, block=CONFIG.threads) for kernel in (KERNEL_MN, KERNEL)]


def run(device=None, kernel=None):
    """A 1000 x 520 x 200 product (no dimension a multiple of the tile; B stored K x N, so KERNEL_MN runs)
    against numpy's f32 product."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
    out = DeviceArray.to_device(np.zeros((M, N), ml_dtypes.bfloat16))
    matmul(DeviceArray.to_device(a), DeviceArray.to_device(np.ascontiguousarray(w.T)), out=out, config=CONFIG)
    got = out.to_host().astype(np.float32)
    ref = a.astype(np.float32) @ w.astype(np.float32).T
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    ok = err < 1e-2
    return ok, f"gemm: 1000x520x200 bf16, max error {err:.2e} of the largest |C| (bf16 output rounding)"
