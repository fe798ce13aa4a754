"""The GEMM on arrays: `matmul(a, b, out=None)` computes out = a @ b (bf16) on the caller's stream.

a is M x K with K contiguous; b is K x N, either row-major (N contiguous: read MN-major, imm-trans-b = 1) or the
transposed view of an N x K matrix (K contiguous: read K-major, torch's `a @ w.T`). Any array ptxdsl reads works
(torch tensors, DLPack and __cuda_array_interface__ objects, DeviceArray); `out` (M x N, N contiguous) is made
with torch when a is a torch tensor and not given. M, N and K need not be multiples of the tile: TMA zero-fills
the loads past the edges and clips the stores; rows must be 16-byte aligned (K and N multiples of 8).

The kernel of each configuration is built, verified and compiled once per device (kept in this module), and the
tensor maps are encoded once per array (the launcher caches them by value)."""
from __future__ import annotations

from dataclasses import replace

from ..errors import LaunchError, SourceLoc
from ..runtime import arrays
from ..tensormap import TensorMapSpec
from .config import GemmConfig, choose
from .kernel import SPAN, SWIZZLE, build, kernel_name

_PROGRAMS: dict = {}             # (config, device ordinal) -> the compiled kernel's launcher
_PLANS: dict = {}                # the arrays' (address, shape, strides, dtype) and the config -> plan()'s answer
PLANS_KEPT = 256


def _bad(what: str, value, text: str, rule: str):
    return LaunchError(f"matmul: {what}={value} breaks '{text}'", SourceLoc.caller(), rule=f"gemm.{rule}")


def kernel_for(cfg: GemmConfig, device=None, epilogue=None):
    """The launcher of `cfg`'s kernel (with `epilogue`) on `device` (default: the current one), compiled on first
    use."""
    from ..program import compile as compile_
    from ..runtime import current_device

    device = device or current_device()
    key = (cfg, device.ordinal, epilogue)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = compile_(build(cfg, epilogue=epilogue), device=device)[kernel_name(cfg, epilogue)]
    return _PROGRAMS[key]


def _matrix(v, name):
    if len(v.shape) != 2:
        raise _bad(f"{name}.shape", v.shape, "a 2-D matrix", "shape")
    if v.dtype != "bfloat16":
        raise _bad(f"{name}.dtype", v.dtype, "bfloat16 (this kernel is bf16 in, bf16 out)", "dtype")
    return v


def plan(a, b, out, config: GemmConfig | None = None):
    """(config, launch arguments, number of tiles) for out = a @ b; LaunchError naming the operand for a layout
    the kernel cannot read. Kept per arrays and config: a repeated call costs a dictionary lookup, not three
    tensor maps' validation."""
    views = tuple(arrays.view(x) for x in (a, b, out))
    key = (config, *((v.address, v.shape, v.strides, v.dtype) for v in views))
    hit = _PLANS.get(key)
    if hit is None:
        hit = _plan(*views, config)
        if len(_PLANS) >= PLANS_KEPT:
            del _PLANS[next(iter(_PLANS))]
        _PLANS[key] = hit
    return hit


def _plan(va, vb, vc, config):
    va, vb, vc = (_matrix(v, n) for v, n in ((va, "a"), (vb, "b"), (vc, "out")))
    (m, k), (k2, n) = va.shape, vb.shape
    if k2 != k or vc.shape != (m, n):
        raise _bad("shapes", f"{va.shape} @ {vb.shape} -> {vc.shape}", "(M, K) @ (K, N) -> (M, N)", "shape")
    if va.strides[1] != 2:
        raise _bad("a.strides", va.strides, "K contiguous (a row-major M x K matrix)", "layout")
    if vc.strides[1] != 2:
        raise _bad("out.strides", vc.strides, "N contiguous (a row-major M x N matrix)", "layout")
    if vb.strides[1] == 2:
        b_major, b_shape, b_strides = "MN", (k, n), vb.strides
    elif vb.strides[0] == 2:
        b_major, b_shape, b_strides = "K", (n, k), vb.strides[::-1]
    else:
        raise _bad("b.strides", vb.strides, "K or N contiguous", "layout")
    cfg = config or choose(m, n, k, b_major=b_major)
    if cfg.b_major != b_major:
        cfg = replace(cfg, b_major=b_major)
    amap = TensorMapSpec.tiled_for((m, k), "bf16", (cfg.block_m, cfg.block_k), strides=va.strides,
                                   swizzle=SWIZZLE, address=va.address)
    box = (cfg.block_n, cfg.block_k) if b_major == "K" else (cfg.block_k, SPAN)
    bmap = TensorMapSpec.tiled_for(b_shape, "bf16", box, strides=b_strides, swizzle=SWIZZLE, address=vb.address)
    cmap = TensorMapSpec.tiled_for((m, n), "bf16", (64, SPAN), strides=vc.strides, swizzle=SWIZZLE,
                                   address=vc.address)
    m_tiles, n_tiles = -(-m // cfg.block_m), -(-n // cfg.block_n)
    return cfg, (amap, bmap, cmap, m_tiles, n_tiles, -(-k // cfg.block_k)), m_tiles * n_tiles


def matmul(a, b, out=None, *, config: GemmConfig | None = None, epilogue=None, stream=None):
    """out = epilogue(a @ b) (bf16, f32 accumulation) with ptxdsl's persistent warp-specialised GEMM; returns
    out. `epilogue`: None, or a function over the f32 accumulator (ptxdsl.gemm.epilogue: relu, scale(alpha)),
    one compiled kernel per function object. The stream is `stream=`, else torch's current stream when a is a
    torch tensor, else the legacy default stream."""
    torch_in = arrays.is_torch(a)
    if out is None:
        if not torch_in:
            raise _bad("out", None, "an output array (made for you only when a is a torch tensor)", "out")
        import torch

        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    cfg, args, ntiles = plan(a, b, out, config)
    launch = kernel_for(cfg, epilogue=epilogue)
    if args[5] == 0:
        raise _bad("K", 0, "K >= 1", "shape")
    if stream is None and torch_in:
        import torch

        stream = torch.cuda.current_stream(a.device)
    launch(*args, grid=max(1, min(ntiles, launch.device.sm_count)), block=cfg.threads, stream=stream)
    return out
