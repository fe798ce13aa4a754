"""A fresh process from `import ptxdsl` to the first launched and checked kernel (the store-tile example: a
256x512 bf16 matrix copied tile by tile through shared memory with TMA), with a cold and with a warm cubin
cache (PTXDSL_CACHE_DIR in a temporary folder), stage by stage; beside it Triton's fresh process for the same
copy with a cold and a warm Triton cache (TRITON_CACHE_DIR in a temporary folder). Prints one table. ptxdsl and
the examples are byte-compiled first, as an installed package is.

Targets: with a warm cache, kernel object to launched (emit, cache hit, module load, first launch; context
creation apart) under 5 ms; the whole ptxdsl process at most 1/5 of Triton's.

    python bench/bench_start.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS, COLS = 256, 512
KERNEL_TO_LAUNCHED_MS = 5.0
TRITON_RATIO = 5.0


def ptxdsl_child() -> dict:
    """Runs in the fresh process: each stage's milliseconds (the compile stages from the `ptxdsl` logger)."""
    t = {}
    clock = time.perf_counter
    t0 = clock()
    import ptxdsl as px
    t["import ptxdsl"] = clock() - t0

    import logging
    stages = {}

    class Stages(logging.Handler):          # the `ptxdsl` logger's stage lines: "emit: 0.41 ms" ...
        def emit(self, record):
            if record.msg == "%s%s: %.3f ms":
                name, _, ms = record.args
                stages[name] = stages.get(name, 0.0) + ms / 1e3
            elif str(record.msg).startswith("cache hit"):
                stages["cache hit"] = 1
    log = logging.getLogger("ptxdsl")
    log.addHandler(Stages())
    log.setLevel(logging.DEBUG)

    s = clock()
    import ml_dtypes  # noqa: F401
    import numpy as np
    t["import numpy, ml_dtypes (host data)"] = clock() - s
    s = clock()
    sys.path.insert(0, str(ROOT / "examples"))
    import tma_store_tile as ex                 # builds the kernel at import
    from tile_common import THREADS, TILE, random_bf16
    t["build kernel"] = clock() - s
    s = clock()
    from ptxdsl.runtime import Device, DeviceArray
    t["import runtime (cuda-bindings)"] = clock() - s
    s = clock()
    dev = Device(0)
    t["context creation"] = clock() - s
    s = clock()
    prog = px.compile(ex.k, device=dev)
    t["compile (all)"] = clock() - s
    for name in ("emit", "cache lookup", "assemble", "load"):
        t[name] = stages.get(name, 0.0)
    s = clock()
    a = random_bf16(np.random.default_rng(1), (ROWS, COLS))
    src = DeviceArray.to_device(a)
    dst = DeviceArray.to_device(np.full_like(a, np.nan))
    t["data to device"] = clock() - s
    s = clock()
    prog["tma_store_tile"](px.TensorMapSpec.from_array(src, (TILE, TILE)),
                           px.TensorMapSpec.from_array(dst, (TILE, TILE)),
                           grid=(COLS // TILE, ROWS // TILE), block=THREADS)
    dev.synchronize()
    t["first launch + sync"] = clock() - s
    s = clock()
    ok = dst.to_host().view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
    t["check"] = clock() - s
    t["in-process total"] = clock() - t0
    return {"ms": {k: 1e3 * v for k, v in t.items()}, "ok": ok, "cache_hit": "cache hit" in stages,
            "loaded_from": prog.loaded_from}


def triton_child() -> dict:
    """Runs in the fresh process: Triton's copy of the same matrix, stage by stage."""
    t = {}
    clock = time.perf_counter
    t0 = clock()
    import torch
    t["import torch"] = clock() - t0
    s = clock()
    import triton
    import triton.language as tl
    t["import triton"] = clock() - s
    s = clock()

    @triton.jit
    def copy(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
    t["build kernel"] = clock() - s
    s = clock()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    t["context creation"] = clock() - s
    s = clock()
    a = torch.randn(ROWS, COLS, device="cuda").to(torch.bfloat16)
    b = torch.full_like(a, float("nan"))
    torch.cuda.synchronize()
    t["data to device"] = clock() - s
    s = clock()
    copy[(triton.cdiv(ROWS * COLS, 4096),)](a, b, ROWS * COLS, BLOCK=4096)
    torch.cuda.synchronize()
    t["first call (compile or cache) + sync"] = clock() - s
    s = clock()
    ok = bool(torch.equal(a.view(torch.int16), b.view(torch.int16)))
    t["check"] = clock() - s
    t["in-process total"] = clock() - t0
    return {"ms": {k: 1e3 * v for k, v in t.items()}, "ok": ok}


def fresh(which: str, env: dict) -> dict:
    """Run one child in a fresh interpreter; its stages plus the process's wall time (interpreter start included)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", which], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=ROOT)
    wall = 1e3 * (time.perf_counter() - t0)
    if proc.returncode != 0:
        raise SystemExit(f"{which} child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["ms"]["python start + exit"] = wall - out["ms"]["in-process total"]
    out["ms"]["process wall"] = wall
    return out


def median_run(which: str, env_for_run, repeat: int) -> dict:
    runs = [fresh(which, env_for_run(i)) for i in range(repeat)]
    keys = runs[0]["ms"].keys()
    return {"ms": {k: statistics.median(r["ms"].get(k, 0.0) for r in runs) for k in keys},
            "ok": all(r["ok"] for r in runs), "runs": runs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes per column (medians are shown)")
    ap.add_argument("--child", choices=("ptxdsl", "triton"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps((ptxdsl_child if args.child == "ptxdsl" else triton_child)()))
        return

    # what `pip install` does: byte-compile the package, so no fresh process below compiles ptxdsl's sources
    # (where PYTHONDONTWRITEBYTECODE is set or the checkout is read-only, each one would, at several ms a module)
    import compileall

    for folder in ("ptxdsl", "examples"):
        compileall.compile_dir(str(ROOT / folder), quiet=1)
    cols = {}
    with tempfile.TemporaryDirectory(prefix="ptxdsl-bench-") as tmp:
        def caches(folder):
            """ptxdsl's cubin cache and the driver's JIT cache (CUDA_CACHE_PATH), both in `folder`."""
            return {"PTXDSL_CACHE_DIR": os.path.join(folder, "ptxdsl"), "CUDA_CACHE_PATH": os.path.join(folder, "jit")}
        warm_dir = os.path.join(tmp, "ptxdsl-warm")
        fresh("ptxdsl", caches(warm_dir))                                 # fill the caches
        cols["ptxdsl cold"] = median_run("ptxdsl", lambda i: caches(os.path.join(tmp, f"ptxdsl-cold-{i}")),
                                         args.repeat)
        cols["ptxdsl warm"] = median_run("ptxdsl", lambda i: caches(warm_dir), args.repeat)
        try:
            import importlib.util
            have_triton = importlib.util.find_spec("triton") and importlib.util.find_spec("torch")
        except ValueError:
            have_triton = False
        if have_triton:
            tri_warm = os.path.join(tmp, "triton-warm")
            fresh("triton", {"TRITON_CACHE_DIR": tri_warm})
            cols["triton cold"] = median_run("triton", lambda i: {"TRITON_CACHE_DIR": os.path.join(tmp, f"tc{i}")},
                                             args.repeat)
            cols["triton warm"] = median_run("triton", lambda i: {"TRITON_CACHE_DIR": tri_warm}, args.repeat)

    rows = []
    for c in cols.values():
        rows += [k for k in c["ms"] if k not in rows]
    rows = [r for r in rows if r not in ("in-process total", "process wall")] + ["in-process total", "process wall"]
    width = max(map(len, rows)) + 2
    print(f"fresh process to the first launched and checked {ROWS}x{COLS} bf16 copy; medians of {args.repeat} "
          f"run(s), ms; python {sys.version.split()[0]}")
    print(f"{'stage':{width}}" + "".join(f"{name:>14}" for name in cols))
    for r in rows:
        cells = "".join(f"{c['ms'][r]:14.2f}" if r in c["ms"] else f"{'':14}" for c in cols.values())
        print(f"{r:{width}}{cells}")
    print(f"{'check passed':{width}}" + "".join(f"{str(c['ok']):>14}" for c in cols.values()))

    warm = cols["ptxdsl warm"]
    hits = all(r["cache_hit"] for r in warm["runs"])
    launched = warm["ms"]["compile (all)"] + warm["ms"]["first launch + sync"]
    loaded = warm['runs'][0]['loaded_from']
    print(f"\nptxdsl warm: loaded from: {loaded}" + (f"; cubin cache hit in every run: {hits}" if loaded == "cubin"
                                                     else " (the driver JIT's cache, CUDA_CACHE_PATH)"))
    print(f"kernel object -> launched, warm cache (compile + first launch, context apart): {launched:.2f} ms "
          f"(target < {KERNEL_TO_LAUNCHED_MS} ms: {'met' if launched < KERNEL_TO_LAUNCHED_MS else 'NOT met'})")
    if "triton warm" in cols:
        for mode in ("cold", "warm"):
            p, t = cols[f"ptxdsl {mode}"]["ms"]["process wall"], cols[f"triton {mode}"]["ms"]["process wall"]
            print(f"whole process, {mode} caches: ptxdsl {p:.0f} ms, Triton {t:.0f} ms, ratio 1/{t / p:.1f} "
                  f"(target <= 1/{TRITON_RATIO:.0f}: {'met' if p * TRITON_RATIO <= t else 'NOT met'})")
    else:
        print("Triton or torch is not installed: no Triton columns")
    if not all(c["ok"] for c in cols.values()):
        raise SystemExit("a copy came back wrong")


if __name__ == "__main__":
    main()
