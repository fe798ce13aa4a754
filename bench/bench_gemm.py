"""ptxdsl's GEMM (ptxdsl.gemm) side by side with torch.matmul (cuBLAS) and Triton's persistent TMA matmul, in
one process, bf16 in, f32 accumulation, bf16 out.

For each shape, each implementation's result is first checked against an f32 reference (torch.matmul of the
f32 copies, TF32 off): the error is max|C - ref| / max|ref|, printed for cuBLAS too, and an implementation passes
when its error is within twice cuBLAS's (bf16 output rounding dominates both). Then every implementation is timed
with CUDA events (triton.testing.do_bench: warm-up, L2 flushed before each run, the median of the runs within
--rep ms), in order and again in reverse; the figure is the mean of the two medians. TFLOP/s = 2 M N K / time.

    python bench/bench_gemm.py [--quick] [--shapes 8192x8192x8192,4096x4096x4096] [--rep 300] [--only ptxdsl,torch]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

import ptxdsl.gemm as pg  # noqa: E402
from timing import time_ms  # noqa: E402

SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (16384, 16384, 16384), (1024, 8192, 8192), (256, 8192, 8192))
QUICK = ((4096, 4096, 4096), (8192, 8192, 8192), (256, 8192, 8192))
VARIANTS = {                        # other configurations to time beside the chosen one (--variants)
    "128x256s3": pg.GemmConfig(stages=3),
    "128x256d1": pg.GemmConfig(stages=4, epilogue_n=128, mma_depth=1),
    "128x256g16": pg.GemmConfig(stages=4, epilogue_n=128, group_m=16),
    "128x128": pg.GemmConfig(block_n=128, stages=4),
    "128x128s6": pg.GemmConfig(block_n=128, stages=6),
    "128x128s6d1": pg.GemmConfig(block_n=128, stages=6, mma_depth=1),
    "128x128x1": pg.GemmConfig(block_n=128, stages=4, consumers=1, registers=None),
}
TRITON_CONFIGS = ((128, 256, 64, 3, 8), (128, 128, 64, 4, 8))      # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps


# ------------------------------------------------------------------------- Triton's persistent TMA matmul

@triton.jit
def tt_matmul_persistent(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """The tutorial's (09-persistent-matmul) TMA persistent kernel: C = A @ B.T, B stored N x K."""
    start = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    in_group = GROUP_M * num_n
    for tile in tl.range(start, num_m * num_n, NUM_SMS, flatten=True):
        group = tile // in_group
        first_m = group * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % size_m)
        pid_n = (tile % in_group) // size_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def triton_matmul(a, b_nk, c, cfg):
    bm, bn, bk, stages, warps = cfg
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    m, k = a.shape
    n = b_nk.shape[0]
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(b_nk, [bn, bk])
    cd = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)

    def run():
        tt_matmul_persistent[grid](ad, bd, cd, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                   NUM_SMS=sms, num_stages=stages, num_warps=warps)
    return run


# ---------------------------------------------------------------------------------------------- bench

def rel_error(c, ref):
    return ((c.float() - ref).abs().max() / ref.abs().max()).item()


def bench_shape(m, n, k, args, rows):
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b_nk = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b_kn = b_nk.t().contiguous()
    ref = a.float() @ b_nk.float().t()
    flops = 2 * m * n * k
    outs = {}
    impls = []

    def add(name, make):
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        try:
            fn = make(c)
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
        except Exception as e:                       # noqa: BLE001 (a failing peer is reported, not fatal)
            print(f"  {name}: FAILED {type(e).__name__}: {e}")
            return
        outs[name] = c
        impls.append((name, fn))

    only = args.only.split(",") if args.only else None
    if not only or "torch" in only:
        add("torch.matmul (cuBLAS)", lambda c: (lambda: torch.matmul(a, b_nk.t(), out=c)))
    if not only or "ptxdsl" in only:
        add("ptxdsl a @ b.T (B K-major)", lambda c: (lambda: pg.matmul(a, b_nk.t(), out=c)))
        add("ptxdsl a @ b (B MN-major)", lambda c: (lambda: pg.matmul(a, b_kn, out=c)))
        for v in args.variants.split(",") if args.variants else ():
            cfg = VARIANTS[v]
            add(f"ptxdsl {v} (B K-major)", lambda c, cfg=cfg: (lambda: pg.matmul(a, b_nk.t(), out=c, config=cfg)))
    if not only or "triton" in only:
        for cfg in TRITON_CONFIGS:
            add(f"triton persistent TMA {cfg[0]}x{cfg[1]}x{cfg[2]} s{cfg[3]}", lambda c, cfg=cfg: triton_matmul(
                a, b_nk, c, cfg))
    errs = {name: rel_error(c, ref) for name, c in outs.items()}
    cublas = errs.get("torch.matmul (cuBLAS)")
    print(f"\n{m}x{n}x{k} bf16 (f32 accumulate), {flops / 1e12:.2f} TFLOP a call")
    ms = {name: [] for name, _ in impls}
    for order in (impls, impls[::-1]):
        for name, fn in order:
            ms[name].append(time_ms(lambda _i, fn=fn: fn(), args.rep))
    tflops = {name: flops / (sum(t) / len(t)) / 1e9 for name, t in ms.items()}
    best_triton = max((v for nm, v in tflops.items() if nm.startswith("triton")), default=None)
    for name, _ in impls:
        ok = "" if cublas is None else ("ok" if errs[name] <= 2 * cublas + 1e-6 else "TOO LARGE")
        ratio = ""
        if name.startswith("ptxdsl"):
            ratio = f"{tflops[name] / tflops['torch.matmul (cuBLAS)']:.3f}x cuBLAS" if cublas is not None else ""
            if best_triton:
                ratio += f", {tflops[name] / best_triton:.3f}x best Triton"
        print(f"  {name:40} {tflops[name]:7.1f} TFLOP/s  err {errs[name]:.2e} {ok:9} {ratio}")
        rows.append((f"{m}x{n}x{k}", name, tflops[name], errs[name], ok, ratio))
    del a, b_nk, b_kn, ref, outs
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="three shapes, short timing")
    ap.add_argument("--shapes", help="MxNxK,... (default: the issue's shapes)")
    ap.add_argument("--rep", type=int, default=300, help="milliseconds of timed runs per implementation")
    ap.add_argument("--only", help="comma-separated: ptxdsl, torch, triton")
    ap.add_argument("--variants", help=f"comma-separated ptxdsl configurations to time too: {', '.join(VARIANTS)}")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = SHAPES
    if args.quick:
        shapes, args.rep = QUICK, min(args.rep, 100)
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}, triton {triton.__version__}")
    rows = []
    for m, n, k in shapes:
        bench_shape(m, n, k, args, rows)
    print("\n| shape | impl | TFLOP/s | rel. error | vs cuBLAS's | ratios |\n|---|---|---|---|---|---|")
    for shape, name, t, e, ok, r in rows:
        print(f"| {shape} | {name} | {t:.1f} | {e:.2e} | {ok} | {r} |")


if __name__ == "__main__":
    main()
