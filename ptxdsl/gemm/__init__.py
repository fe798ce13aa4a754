"""ptxdsl.gemm: a persistent, warp-specialised Hopper GEMM (TMA loads into a ring, wgmma with f32 accumulators,
stmatrix + TMA store epilogue) written with ptxdsl.pipeline on the public builder API.

- `GemmConfig` / `choose` (ptxdsl.gemm.config): tile, stages, consumers, raster group, register split.
- `build(cfg)` (ptxdsl.gemm.kernel): the kernel builder of a configuration.
- `matmul(a, b, out=None)` (ptxdsl.gemm.launch): out = a @ b on torch tensors or any array ptxdsl reads, on the
  caller's stream.
"""
from .config import GemmConfig, choose
from .kernel import build
from .launch import matmul

__all__ = ["GemmConfig", "build", "choose", "matmul"]
