"""Per example: time to build and emit the PTX in Python (the static verifier runs when the kernel is
closed: its share is shown apart), to assemble it with nvJitLink, and (on a GPU) to JIT-load it with
the driver (cold, then cached). Medians of repeated runs.

    python bench/bench_build.py [--repeat 200]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import ptxdsl as px  # noqa: E402

EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("tma_*.py"))


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def build_fn(name):
    """The example's kernel-building code, re-run from its source (the part after the imports)."""
    import importlib

    mod = importlib.import_module(name)
    src = (ROOT / "examples" / f"{name}.py").read_text()
    start = src.index("with px.kernel(")
    end = src.index("\nKERNEL = k")
    code = compile(src[start:end], f"{name}.py", "exec")
    ns = dict(vars(mod))

    def build():
        exec(code, ns)
        return px.emit(ns["k"]).text
    return build


def ns_kernel(name):
    import importlib

    return importlib.import_module(name).k.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    from ptxdsl.runtime.driver import driver_available

    gpu = driver_available()
    from ptxdsl.verify import verify_kernel

    print(f"{'example':18} {'build+emit ms':>14} {'(verify ms)':>12} {'assemble ms':>12} {'JIT load cold ms':>17} "
          f"{'JIT load warm ms':>17}")
    for name in EXAMPLES:
        build = build_fn(name)
        t_build = median_ms(build, args.repeat)
        text = build()
        kernel = ns_kernel(name)
        t_verify = median_ms(lambda: verify_kernel(kernel), args.repeat)
        # each run assembles a text of its own: ptxdsl assembles a module once per process, and nvJitLink 13.0
        # also answers a repeat from memory
        runs = iter(range(10**9))
        t_asm = median_ms(lambda: px.assemble(f"{text}\n// run {next(runs)}\n", "sm_90a"), max(5, args.repeat // 10))
        cold = warm = float("nan")
        if gpu:
            from ptxdsl.runtime import Device, load_ptx

            Device(0).set_current()
            unique = text + f"\n// {time.time_ns()}\n"      # defeat the driver's JIT cache once
            t0 = time.perf_counter()
            load_ptx(unique).unload()
            cold = 1e3 * (time.perf_counter() - t0)
            warm = median_ms(lambda: load_ptx(unique).unload(), 20)
        print(f"{name:18} {t_build:14.3f} {t_verify:12.3f} {t_asm:12.2f} {cold:17.2f} {warm:17.2f}")


if __name__ == "__main__":
    main()
