"""The timing every benchmark here shares: triton.testing.do_bench's median of CUDA-event runs (after warm-up,
with L2 flushed before each run), calling fn(0), fn(1), ... so that a benchmark can rotate between buffers."""
import itertools

import triton


def time_ms(fn, rep, warmup=25):
    """Median milliseconds of fn(i) over `rep` ms of runs."""
    step = itertools.count()
    return triton.testing.do_bench(lambda: fn(next(step)), warmup=warmup, rep=rep, return_mode="median")
