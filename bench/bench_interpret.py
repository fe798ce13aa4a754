"""The CPU interpreter's speed: each example's host check (its run(), at its own sizes) on ptxdsl.interpret,
with the warp-instructions it executed and their rate. pipe_copy (1024 x 2048 bf16, two launches) is the
figure docs/interpreter.md quotes.

    python bench/bench_interpret.py [NAME ...]
"""
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from ptxdsl.interpret import CPU  # noqa: E402
from ptxdsl.interpret.scheduler import COUNTERS  # noqa: E402

EXAMPLES = ["pipe_copy", "tma_load_tile", "tma_store_tile", "tma_pipeline_copy", "tma_reduce_tile",
            "tma_multicast_tile", "tensormap_replace", "pipe_gather", "pipe_transpose", "pipe_axpy", "pipe_varlen",
            "pipe_splitsum"]


def main(names) -> int:
    print(f"{'example':<20} {'ok':>3} {'seconds':>8} {'launches':>8} {'warp-instrs':>12} {'warp-instrs/s':>14}")
    bad = 0
    for name in names:
        module = importlib.import_module(name)
        before = dict(COUNTERS)
        with CPU:
            t0 = time.perf_counter()
            ok, _ = module.run()
            dt = time.perf_counter() - t0
        steps = COUNTERS["steps"] - before["steps"]
        launches = COUNTERS["launches"] - before["launches"]
        print(f"{name:<20} {'yes' if ok else 'NO':>3} {dt:8.2f} {launches:8d} {steps:12d} {steps / dt:14,.0f}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or EXAMPLES))
