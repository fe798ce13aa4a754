"""Host time per launch of an empty kernel: ptxdsl (asynchronous, the default), raw cuLaunchKernel through
cuda-bindings, torch's x.add_(1) on a one-element tensor, and Triton's launch of an empty kernel, in one process.

Each row is the median, over many rounds, of one timed loop of back-to-back launches (perf_counter around the
loop, divided by its length); the rows take turns within each round, and the device is synchronised between
loops, outside the timing, so no launch queue fills. A counter kernel launched through the same path checks
first that asynchronous launches all ran.

    python bench/bench_launch.py [--loop 200 --rounds 300]
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.util
import statistics
import sys
import time

import numpy as np
from cuda.bindings import driver

import ptxdsl as px
from ptxdsl import sreg


def kernels():
    with px.kernel("empty") as empty:
        pass
    with px.kernel("empty_args") as empty_args:       # the same, with a pointer and an integer to pack
        empty_args.param_ptr("out")
        empty_args.param("n", px.u32)
    with px.kernel("count", reqntid=32) as count:
        out = count.param_ptr("out")
        with count.if_(count.setp("eq", count.mov(sreg.tid_x), 0)):
            count.atom_add(px.u32, out, 1)
    return px.compile(px.module(empty, empty_args, count))


def check_async_launches(prog, n: int) -> bool:
    """n launches of the counter kernel, no sync in between, all counted."""
    from ptxdsl.runtime import DeviceArray

    counter = DeviceArray.zeros(1, np.uint32)
    launch = prog["count"]
    for _ in range(n):
        launch(counter, grid=1, block=32)
    return int(counter.to_host()[0]) == n


def timed(fn, loop: int) -> float:
    """Seconds per call of fn over one loop."""
    t0 = time.perf_counter()
    for _ in range(loop):
        fn()
    return (time.perf_counter() - t0) / loop


def rows(prog, torch, triton):
    """name -> (what it launches, zero-argument callable doing one launch)."""
    empty, empty_args = prog["empty"], prog["empty_args"]
    function = empty.function.handle
    stream = driver.CUstream(0)
    grid, block = 1, 32
    out = {"raw cuLaunchKernel": ("empty kernel, kernelParams=0, CUstream(0)",
                                  lambda: driver.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0)),
           "ptxdsl": ("empty kernel, prog['empty'](grid=1, block=32)", lambda: empty(grid=grid, block=block))}
    from ptxdsl.runtime import DeviceArray

    buf = DeviceArray.zeros(16, np.uint32)
    out["ptxdsl (DeviceArray, int)"] = ("empty kernel with a pointer and a u32 parameter",
                                         lambda: empty_args(buf, 5, grid=grid, block=block))
    args_function = empty_args.function.handle
    types = (ctypes.c_void_p, ctypes.c_uint32)
    out["raw cuLaunchKernel (args)"] = ("the same, kernelParams=((ptr, 5), (c_void_p, c_uint32))",
                                        lambda: driver.cuLaunchKernel(args_function, 1, 1, 1, 32, 1, 1, 0, stream,
                                                                      ((buf.ptr, 5), types), 0))
    if torch is not None:
        x = torch.zeros(1, device="cuda")
        t = torch.zeros(16, dtype=torch.int32, device="cuda")
        out["ptxdsl (torch tensor, int)"] = ("empty kernel, a torch tensor: torch's current stream",
                                             lambda: empty_args(t, 5, grid=grid, block=block))
        out["torch x.add_(1)"] = ("one-element float32 tensor", lambda: x.add_(1))
    if triton is not None:
        import triton.language as tl

        globals()["tl"] = tl            # triton reads the (string) annotation tl.constexpr in the module's globals

        @triton.jit
        def triton_empty(x, BLOCK: tl.constexpr):
            pass

        y = torch.zeros(16, device="cuda")
        triton_empty[(1,)](y, BLOCK=32)
        out["triton"] = ("empty @triton.jit kernel with one tensor argument",
                         lambda: triton_empty[(1,)](y, BLOCK=32))
    return out


def synchronize(torch):
    if torch is not None:
        torch.cuda.synchronize()
    else:
        from ptxdsl.runtime import current_device

        current_device().synchronize()


def measure(loop: int = 200, rounds: int = 300, check: int = 1000) -> dict:
    """{'rows': {name: (what, median µs)}, 'async_check': bool, 'about': str}."""
    torch = _optional("torch")
    triton = _optional("triton") if torch is not None else None
    if torch is not None:
        torch.zeros(1, device="cuda")               # torch on the primary context before ptxdsl's first call
    prog = kernels()
    ok = check_async_launches(prog, check)
    fns = rows(prog, torch, triton)
    for _, fn in fns.values():                      # warm: configurations checked, code paths hot
        for _ in range(loop):
            fn()
    synchronize(torch)
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, (_, fn) in fns.items():
            samples[name].append(timed(fn, loop))
            synchronize(torch)
    med = {name: (fns[name][0], 1e6 * statistics.median(s)) for name, s in samples.items()}
    return {"rows": med, "async_check": ok, "about": _about(torch, triton)}


def _optional(name: str):
    if importlib.util.find_spec(name) is None:
        return None
    return __import__(name)


def _about(torch, triton) -> str:
    from ptxdsl.runtime import current_device

    import cuda.bindings

    parts = [datetime.date.today().isoformat(), current_device().name, f"driver {_driver_version()}",
             f"Python {sys.version.split()[0]}", f"cuda-bindings {cuda.bindings.__version__}",
             f"ptxdsl {px.__version__}"]
    if torch is not None:
        parts.append(f"torch {torch.__version__}")
    if triton is not None:
        parts.append(f"triton {triton.__version__}")
    return ", ".join(parts)


def _driver_version() -> str:
    err, v = driver.cuDriverGetVersion()
    return f"CUDA {v // 1000}.{v % 1000 // 10}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loop", type=int, default=200, help="launches per timed loop")
    ap.add_argument("--rounds", type=int, default=300, help="timed loops per row (the median is reported)")
    args = ap.parse_args(argv)
    r = measure(args.loop, args.rounds)
    print(f"host time per launch, median of {args.rounds} loops of {args.loop}: {r['about']}")
    print(f"async check: {'all launches ran' if r['async_check'] else 'LAUNCHES LOST'}")
    rows_ = r["rows"]
    raw = rows_["raw cuLaunchKernel"][1]
    print(f"{'launch':28s} {'us':>7s} {'vs raw':>8s}  what")
    for name, (what, us) in rows_.items():
        print(f"{name:28s} {us:7.2f} {us - raw:+8.2f}  {what}")
    ours = rows_["ptxdsl"][1]
    print(f"ptxdsl <= raw + 1.5 us: {'yes' if ours <= raw + 1.5 else 'no'} ({ours - raw:+.2f} us)")
    if "torch x.add_(1)" in rows_:
        torch_us = rows_["torch x.add_(1)"][1]
        print(f"ptxdsl below torch x.add_(1): {'yes' if ours < torch_us else 'no'} ({ours:.2f} vs {torch_us:.2f} us)")
    return 0 if r["async_check"] else 1


if __name__ == "__main__":
    sys.exit(main())
