"""The pipeline kernels (examples/pipe_*.py) side by side with torch and Triton, in one process.

Each kernel's result is checked first (copies, transposes and gathers bit-exactly; y = a*x + y bit-exactly
against numpy's f32-fma model and compared with torch's), then every implementation is timed with CUDA events
(triton.testing.do_bench: warm-up, L2 flushed before each run, the median of the runs within --rep ms, at
least 20), rotating between two sets of buffers. GB/s counts the bytes read plus the bytes written.

    python bench/bench_kernels.py [--only copy,axpy,transpose,gather,varlen,splitsum] [--rows 128,1024]
                                  [--rep 400] [--write docs/performance.md]
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

import ptxdsl as px  # noqa: E402
from timing import time_ms  # noqa: E402

SETS = 2
ROWS = []            # (kernel, impl, shape, ms, GB/s, check) of this run


# ------------------------------------------------------------------------------------- Triton peers

@triton.jit
def tt_copy(src, dst, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    nn = tl.cdiv(N, BN)
    m, n = (pid // nn) * BM, (pid % nn) * BN
    dst.store([m, n], src.load([m, n]))


@triton.jit
def tt_axpy(x, y, a, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    nn = tl.cdiv(N, BN)
    m, n = (pid // nn) * BM, (pid % nn) * BN
    r = a * x.load([m, n]).to(tl.float32) + y.load([m, n]).to(tl.float32)
    y.store([m, n], r.to(tl.bfloat16))


@triton.jit
def tt_transpose(x, out, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    nn = tl.cdiv(N, BN)
    m, n = (pid // nn) * BM, (pid % nn) * BN
    out.store([n, m], tl.trans(x.load([m, n])))


def desc(t, block):
    return TensorDescriptor.from_tensor(t, block_shape=list(block))


# -------------------------------------------------------------------------------------------- timing

def report(kernel, shape, nbytes, impls, rep):
    """Time each (name, fn, check) twice, in order and then in reverse (each a median of CUDA-event runs; the
    figure is the mean of the two), and print GB/s with each ptxdsl row's ratio to every peer."""
    print(f"\n{kernel} {shape} ({nbytes / 2**30:.2f} GiB moved per call)")
    ms = {name: [] for name, _, _ in impls}
    for order in (impls, impls[::-1]):
        for name, fn, _ in order:
            ms[name].append(time_ms(fn, rep, warmup=50))
    rates = {name: nbytes / (sum(t) / len(t)) / 1e6 for name, t in ms.items()}
    for name, _, ok in impls:
        peers = [o for o in rates if not o.startswith("ptxdsl")]
        ratios = ", ".join(f"{rates[name] / rates[o]:.3f}x {o}" for o in peers) if name.startswith("ptxdsl") else ""
        ROWS.append((kernel, name, shape, sum(ms[name]) / 2, rates[name], ok, ratios))
        print(f"  {name:28} {rates[name]:7.0f} GB/s  {ok:10}  {ratios}")
    return rates


def same_bits(a, b):
    return "bit-exact" if torch.equal(a.view(torch.int16), b.view(torch.int16)) else "MISMATCH"


# ----------------------------------------------------------------------------------------- kernels

def bench_copy(args):
    import pipe_copy

    rows, cols = 32768, 32768                                   # 2 GiB of bf16
    srcs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    dsts = [torch.empty_like(s) for s in srcs]
    prog = px.compile(pipe_copy.KERNEL)
    go = pipe_copy.launcher(prog, rows, cols)
    box = (pipe_copy.BOX[1], pipe_copy.BOX[0])
    maps = [(px.TensorMapSpec.from_array(s, box), px.TensorMapSpec.from_array(d, box)) for s, d in zip(srcs, dsts)]
    tmaps = [(desc(s, (64, 128)), desc(d, (64, 128))) for s, d in zip(srcs, dsts)]
    # the same kernel on a persistent grid (one CTA per SM walking an 8-stage ring of 16 KiB tiles)
    pbox = (256, 32)
    pgo = pipe_copy.launcher(px.compile(pipe_copy.build(box=pbox, stages=8)), rows, cols, box=pbox,
                             tiles_per_cta=None, ctas_per_sm=None)
    pmaps = [(px.TensorMapSpec.from_array(s, pbox[::-1]), px.TensorMapSpec.from_array(d, pbox[::-1]))
             for s, d in zip(srcs, dsts)]

    def ours(i):
        go(*maps[i % SETS])

    def persistent(i):
        pgo(*pmaps[i % SETS])

    def theirs(i):
        dsts[i % SETS].copy_(srcs[i % SETS])

    def trit(i):
        s, d = tmaps[i % SETS]
        tt_copy[(rows // 64 * (cols // 128),)](s, d, cols, BM=64, BN=128)

    impls = (("ptxdsl", ours), ("ptxdsl persistent", persistent), ("torch copy_", theirs), ("triton", trit))
    checks = {}
    for name, fn in impls:
        for d in dsts:
            d.fill_(float("nan"))
        for i in range(SETS):
            fn(i)
        torch.cuda.synchronize()
        checks[name] = "bit-exact" if all(same_bits(s, d) == "bit-exact" for s, d in zip(srcs, dsts)) else "MISMATCH"
    report("copy", f"{rows}x{cols} bf16", 2 * rows * cols * 2, [(n, f, checks[n]) for n, f in impls], args.rep)


def bench_axpy(args):
    import numpy as np

    import pipe_axpy

    rows, cols, a = 16384, 32768, 0.5                           # 1 GiB each of x and y
    xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    ys = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    prog = px.compile(pipe_axpy.KERNEL)
    go = pipe_axpy.launcher(prog, rows, cols)
    box = (pipe_axpy.BOX[1], pipe_axpy.BOX[0])
    maps = [(px.TensorMapSpec.from_array(x, box), px.TensorMapSpec.from_array(y, box)) for x, y in zip(xs, ys)]
    tmaps = [(desc(x, (64, 128)), desc(y, (64, 128))) for x, y in zip(xs, ys)]
    pgo = pipe_axpy.launcher(px.compile(pipe_axpy.build(stages=8)), rows, cols, tiles_per_cta=None, ctas_per_sm=None)

    def ours(i):
        go(a, *maps[i % SETS], ys[i % SETS])

    def persistent(i):
        pgo(a, *maps[i % SETS], ys[i % SETS])

    def theirs(i):
        ys[i % SETS].add_(xs[i % SETS], alpha=a)

    def trit(i):
        x, y = tmaps[i % SETS]
        tt_axpy[(rows // 64 * (cols // 128),)](x, y, a, cols, BM=64, BN=128)

    # one call each on copies of set 0: ours against numpy's model, and against torch and Triton
    impls = (("ptxdsl", ours), ("ptxdsl persistent", persistent), ("torch add_", theirs), ("triton", trit))
    y0 = ys[0].clone()
    outs = {}
    for name, fn in impls:
        ys[0].copy_(y0)
        fn(0)
        torch.cuda.synchronize()
        outs[name] = ys[0].clone()
    ys[0].copy_(y0)
    host = lambda t: t.view(torch.int16).cpu().numpy().view(np.uint16)  # noqa: E731
    import ml_dtypes

    want = pipe_axpy.reference(a, host(xs[0]).view(ml_dtypes.bfloat16), host(y0).view(ml_dtypes.bfloat16))
    checks = {}
    for name in ("ptxdsl", "ptxdsl persistent"):
        checks[name] = "bit-exact" if (host(outs[name]) == want.view(np.uint16)).all() else "MISMATCH"
    for name in ("torch add_", "triton"):
        diff = int((host(outs[name]) != host(outs["ptxdsl"])).sum())
        checks[name] = "= ptxdsl" if diff == 0 else f"{diff} differ"
    report("axpy y = a*x + y", f"{rows}x{cols} bf16", 3 * rows * cols * 2, [(n, f, checks[n]) for n, f in impls],
           args.rep)


def bench_transpose(args):
    import pipe_transpose as pt

    rows, cols = 16384, 32768                                   # 1 GiB of bf16
    xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    outs = [torch.empty(cols, rows, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    prog = px.compile(pt.KERNEL)
    go = pt.launcher(prog, rows, cols)
    maps = [(px.TensorMapSpec.from_array(x, (pt.T, pt.T), swizzle="128B"),
             px.TensorMapSpec.from_array(o, (pt.T, pt.T), swizzle="128B")) for x, o in zip(xs, outs)]
    tmaps = [(desc(x, (64, 64)), desc(o, (64, 64))) for x, o in zip(xs, outs)]
    pgo = pt.launcher(px.compile(pt.build(stages=8, depth=1)), rows, cols, tiles_per_cta=None)

    def ours(i):
        go(*maps[i % SETS])

    def persistent(i):
        pgo(*maps[i % SETS])

    def theirs(i):
        outs[i % SETS].copy_(xs[i % SETS].t())

    def contiguous(i):
        xs[i % SETS].t().contiguous()

    def trit(i):
        x, o = tmaps[i % SETS]
        tt_transpose[(rows // 64 * (cols // 64),)](x, o, cols, BM=64, BN=64)

    checks = {}
    for name, fn in (("ptxdsl", ours), ("ptxdsl persistent", persistent), ("torch copy_(x.t())", theirs),
                     ("triton", trit)):
        for o in outs:
            o.fill_(float("nan"))
        for i in range(SETS):
            fn(i)
        torch.cuda.synchronize()
        checks[name] = "bit-exact" if all(same_bits(x.t().contiguous(), o) == "bit-exact"
                                          for x, o in zip(xs, outs)) else "MISMATCH"
    checks["torch x.t().contiguous()"] = "(same op)"
    report("transpose", f"{rows}x{cols} bf16", 2 * rows * cols * 2,
           [(n, f, checks[n]) for n, f in (("ptxdsl", ours), ("ptxdsl persistent", persistent),
                                            ("torch copy_(x.t())", theirs), ("torch x.t().contiguous()", contiguous),
                                            ("triton", trit))], args.rep)


def bench_gather(args, row):
    import torch.nn.functional as F

    import pipe_gather as pg

    nrows = 2**30 // row                                        # a 1 GiB table
    n = 2**29 // row                                            # 512 MiB gathered
    cols = row // 2
    tables = [torch.randn(nrows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    idx = [torch.randint(0, nrows, (n,), device="cuda", dtype=torch.int64) for _ in range(SETS)]
    outs = [torch.empty(n, cols, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    prog = px.compile(pg.build(row=row))
    go = pg.launcher(prog, n, row=row)

    def ours(i):
        go(tables[i % SETS], idx[i % SETS], outs[i % SETS])

    def theirs(i):
        torch.index_select(tables[i % SETS], 0, idx[i % SETS], out=outs[i % SETS])

    def emb(i):
        F.embedding(idx[i % SETS], tables[i % SETS])

    checks = {}
    for name, fn in (("ptxdsl", ours), ("torch index_select", theirs)):
        for o in outs:
            o.fill_(float("nan"))
        for i in range(SETS):
            fn(i)
        torch.cuda.synchronize()
        checks[name] = "bit-exact" if all(same_bits(t[j], o) == "bit-exact"
                                          for t, j, o in zip(tables, idx, outs)) else "MISMATCH"
    checks["torch F.embedding"] = "(same op)"
    report(f"gather {row} B rows", f"{n} of {nrows} rows", 2 * n * row,
           [(nm, f, checks[nm]) for nm, f in (("ptxdsl", ours), ("torch index_select", theirs),
                                              ("torch F.embedding", emb))], args.rep)


def bench_varlen(args):
    import numpy as np

    import pipe_varlen as pv

    shapes = pv.random_shapes(np.random.default_rng(0), 64, rows=(256, 2048), cols=(256, 4096))
    xs = [torch.randn(*s, device="cuda", dtype=torch.bfloat16) for s in shapes]
    outs = [[torch.empty_like(x) for x in xs] for _ in range(SETS)]
    nbytes = 2 * sum(x.numel() for x in xs) * 2
    prog = px.compile(pv.KERNEL)
    batches = [pv.Batch(prog, list(zip(xs, o))) for o in outs]   # the tables, made once per list of tensors
    shared = px.compile(pv.SHARED_MAPS)
    per_tensor = [pv.Batch(shared, list(zip(xs, o)), name="pipe_varlen_shared_maps") for o in outs]

    def ours(i):
        batches[i % SETS](0.5)

    def ours_per_tensor(i):
        per_tensor[i % SETS](0.5)

    def loop(i):
        for x, o in zip(xs, outs[i % SETS]):
            torch.mul(x, 0.5, out=o)

    def loop_new(i):
        [x * 0.5 for x in xs]

    def foreach(i):
        torch._foreach_mul(xs, 0.5)

    def checked(fn):
        for o in outs[0]:
            o.fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        ok = all(torch.equal((x * 0.5).view(torch.int16), o.view(torch.int16)) for x, o in zip(xs, outs[0]))
        return "bit-exact" if ok else "MISMATCH"

    check, check_per_tensor = checked(ours), checked(ours_per_tensor)
    report("variable-length batch, out_i = 0.5 * x_i", f"{len(xs)} bf16 tensors, {nbytes / 2 / 2**20:.0f} MiB",
           nbytes, [("ptxdsl (one launch)", ours, check),
                    ("ptxdsl (one launch, a map per tensor)", ours_per_tensor, check_per_tensor),
                    ("torch loop of mul(out=)", loop, "(reference)"),
                    ("torch loop of x * 0.5", loop_new, "(reference)"), ("torch _foreach_mul", foreach, "(reference)")],
           args.rep)


def bench_splitsum(args):
    import pipe_splitsum as ps

    s, m, n = 16, 4096, 8192                                    # 16 f32 splits of 128 MiB
    xs = [torch.randn(s, m, n, device="cuda", dtype=torch.float32) for _ in range(SETS)]
    ys = [torch.empty(m, n, device="cuda", dtype=torch.float32) for _ in range(SETS)]
    nbytes = (s + 1) * m * n * 4
    xmaps = [ps.spec_of(x, s * m, n) for x in xs]
    ymaps = [ps.spec_of(y, m, n) for y in ys]
    store = ps.launcher(px.compile(ps.build(combine="store")), s, m, n, 1)
    add2 = ps.launcher(px.compile(ps.KERNEL), s, m, n, 2)
    add4 = ps.launcher(px.compile(ps.KERNEL), s, m, n, 4)
    ordered = px.compile(ps.ORDERED)
    ordered2 = [ps.launcher(ordered, s, m, n, 2, name="pipe_splitsum_ordered") for _ in range(SETS)]
    ordered4 = [ps.launcher(ordered, s, m, n, 4, name="pipe_splitsum_ordered") for _ in range(SETS)]

    def one_group(i):
        store(xmaps[i % SETS], ymaps[i % SETS])

    def two_groups(i):
        ys[i % SETS].zero_()
        add2(xmaps[i % SETS], ymaps[i % SETS])

    def four_groups(i):
        ys[i % SETS].zero_()
        add4(xmaps[i % SETS], ymaps[i % SETS])

    def ordered_two(i):
        ordered2[i % SETS](xmaps[i % SETS], ymaps[i % SETS])

    def ordered_four(i):
        ordered4[i % SETS](xmaps[i % SETS], ymaps[i % SETS])

    def theirs(i):
        torch.sum(xs[i % SETS], 0, out=ys[i % SETS])

    exact = xs[0].double().sum(0)
    bound = 2 * s * torch.finfo(torch.float32).eps * xs[0].abs().double().sum(0)
    impls = (("ptxdsl 1 group (TMA store)", one_group), ("ptxdsl 2 groups (zero + TMA reduce add)", two_groups),
             ("ptxdsl 4 groups (zero + TMA reduce add)", four_groups),
             ("ptxdsl 2 groups (ordered: store, flag, TMA reduce add)", ordered_two),
             ("ptxdsl 4 groups (ordered: store, flag, TMA reduce add)", ordered_four), ("torch sum(0)", theirs))
    checks = {}
    for name, fn in impls:
        ys[0].fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        off = int((~((ys[0].double() - exact).abs() <= bound)).sum())     # a NaN left in y counts too
        checks[name] = "within f32 rounding" if off == 0 else f"{off} off"
    report("split accumulation, y = x.sum(0)", f"({s}, {m}, {n}) f32", nbytes,
           [(nm, f, checks[nm]) for nm, f in impls], args.rep)


# -------------------------------------------------------------------------------------- the table

def versions():
    from cuda.bindings import driver

    err, v = driver.cuDriverGetVersion()
    props = torch.cuda.get_device_properties(0)
    return {"date": datetime.date.today().isoformat(), "device": f"{props.name}, {props.multi_processor_count} SMs",
            "driver": f"CUDA {v // 1000}.{v % 1000 // 10}", "python": platform.python_version(),
            "torch": torch.__version__, "triton": triton.__version__,
            "cuda-bindings": importlib.metadata.version("cuda-bindings"), "ptxdsl": px.__version__}


BEGIN, END = "<!-- bench_kernels: begin -->", "<!-- bench_kernels: end -->"


def table() -> str:
    v = versions()
    out = [BEGIN, "", f"- **Date**: {v['date']}; **device**: {v['device']}, driver {v['driver']}",
           f"- **Software**: Python {v['python']}, torch {v['torch']}, triton {v['triton']}, cuda-bindings "
           f"{v['cuda-bindings']}, ptxdsl {v['ptxdsl']}", "",
           "| kernel | shape | impl | ms | GB/s | check | ptxdsl against the peers |", "|---|---|---|---|---|---|---|"]
    out += [f"| {k} | {s} | {i} | {ms:.3f} | {gbs:,.0f} | {ok} | {r} |" for k, i, s, ms, gbs, ok, r in ROWS]
    return "\n".join(out + ["", END])


def write(path: Path) -> None:
    text = path.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + table() + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Pipeline kernels: `bench/bench_kernels.py`\n\n" + table() + "\n"
    path.write_text(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="copy,axpy,transpose,gather,varlen,splitsum")
    ap.add_argument("--rows", default="1024", help="gather row sizes in bytes, comma-separated")
    ap.add_argument("--rep", type=int, default=400, help="milliseconds of timed runs per implementation")
    ap.add_argument("--write", type=Path, help="put the table into this markdown file")
    args = ap.parse_args()
    only = args.only.split(",")
    for name in only:
        if name == "gather":
            for row in (int(r) for r in args.rows.split(",")):
                bench_gather(args, row)
        else:
            {"copy": bench_copy, "axpy": bench_axpy, "transpose": bench_transpose, "varlen": bench_varlen,
             "splitsum": bench_splitsum}[name](args)
        torch.cuda.empty_cache()
    if args.write:
        write(args.write)
    print("\n" + table())


if __name__ == "__main__":
    main()
