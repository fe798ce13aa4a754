"""Tile copy through shared memory with TMA (the seed's kernel b), side by side with torch and Triton.

Copies a rows x cols bf16 matrix; checks each result bit-exactly first, then times each with CUDA
events (median of many runs, rotating between buffers so L2 does not serve them) and prints GB/s
counting bytes read + written.

    python bench/bench_copy.py [--rows 16384 --cols 16384 --iters 100]
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import ptxdsl as px  # noqa: E402
from tile_common import THREADS, TILE  # noqa: E402
from timing import time_ms  # noqa: E402
from tma_store_tile import k as tma_copy_kernel  # noqa: E402


@triton.jit
def _triton_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--iters", type=int, default=200, help="milliseconds of timed runs (do_bench rep)")
    ap.add_argument("--sets", type=int, default=3, help="buffer pairs to rotate between")
    args = ap.parse_args()
    rows, cols = args.rows, args.cols
    torch.manual_seed(0)
    srcs = [torch.randn(rows, cols, device="cuda").to(torch.bfloat16) for _ in range(args.sets)]
    dsts = [torch.empty_like(s) for s in srcs]
    prog = px.compile(tma_copy_kernel)
    launch = prog["tma_store_tile"]
    stream = torch.cuda.current_stream().cuda_stream
    maps = [(px.TensorMapSpec.tiled_for((rows, cols), "bf16", (TILE, TILE), address=s.data_ptr()),
             px.TensorMapSpec.tiled_for((rows, cols), "bf16", (TILE, TILE), address=d.data_ptr()))
            for s, d in zip(srcs, dsts)]
    from ptxdsl.runtime.tensormap import encode

    maps = [(encode(a), encode(b)) for a, b in maps]
    grid = (cols // TILE, rows // TILE)

    def ptxdsl_copy(i):
        a, b = maps[i % args.sets]
        launch(a, b, grid=grid, block=THREADS, stream=stream, sync=False)

    def torch_copy(i):
        dsts[i % args.sets].copy_(srcs[i % args.sets])

    def triton_copy(i):
        n = rows * cols
        _triton_copy[(triton.cdiv(n, 4096),)](srcs[i % args.sets], dsts[i % args.sets], n, BLOCK=4096)

    nbytes = 2 * rows * cols * 2
    print(f"copy {rows}x{cols} bf16 ({nbytes / 2**20:.0f} MiB moved per copy), median over {args.iters} ms of runs")
    print(f"{'impl':10} {'ms':>8} {'GB/s':>8}  check")
    for name, fn in (("ptxdsl", ptxdsl_copy), ("torch", torch_copy), ("triton", triton_copy)):
        for d in dsts:
            d.fill_(float("nan"))
        for i in range(args.sets):
            fn(i)
        torch.cuda.synchronize()
        ok = all(torch.equal(s.view(torch.int16), d.view(torch.int16)) for s, d in zip(srcs, dsts))
        ms = time_ms(fn, args.iters)
        print(f"{name:10} {ms:8.3f} {nbytes / ms / 1e6:8.0f}  {'bit-exact' if ok else 'MISMATCH'}")


if __name__ == "__main__":
    main()
