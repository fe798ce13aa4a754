"""The interpreter against the H200: the same kernels, the same inputs, run on the GPU and on the CPU
interpreter (ptxdsl.interpret), compared bit for bit.

    OUT=/some/dir HYPOTHESIS_PROFILE=gpu python -m pytest tests/test_interpret_gpu.py -q

- every TMA differential case (ptxdsl.testing's harness kernels: tiled loads, multicast loads, stores and
  reductions, ranks 1-5, swizzles, fills, element strides; PTXDSL_INTERPRET_CASES of them, default 600) gives
  the same shared-memory windows or global buffer and the same completion status on both;
- every example's host check passes on both with the same verdict (the verdicts count differing elements);
- pipe_copy's output arrays are equal on both, one tile per CTA and on a persistent grid.
"""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
from hypothesis import given, note, settings

import ptxdsl as px
from ptxdsl.interpret import CPU
from ptxdsl.testing import differential as diff
from ptxdsl.testing import strategies as pst

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("PTXDSL_DEVICE", "").lower() == "cpu",
                                 reason="PTXDSL_DEVICE=cpu: the interpreter would be compared with itself")]

CASES = int(os.environ.get("PTXDSL_INTERPRET_CASES") or 600)
EXAMPLES = ["tma_load_tile", "tma_store_tile", "tma_pipeline_copy", "tma_reduce_tile", "tma_multicast_tile",
            "tensormap_replace", "user_kernel", "pipe_copy", "pipe_gather", "pipe_transpose", "pipe_axpy",
            "pipe_splitsum", "pipe_varlen", "wgmma_tile"]
INEXACT = {"wgmma_tile"}       # the H200 sums the products in its own order: both within the model's bound


@settings(max_examples=CASES, deadline=None)
@given(pst.tma_cases())
def test_tma_case_interpreter_equals_gpu(case):
    note(diff.case_snippet(case))
    gpu = diff.run_case(case)
    with CPU:
        cpu = diff.run_case(case)
    assert gpu.status == cpu.status
    assert gpu.observed.keys() == cpu.observed.keys()
    for name in gpu.observed:
        g, c = np.asarray(gpu.observed[name]).view(np.uint8), np.asarray(cpu.observed[name]).view(np.uint8)
        bad = np.flatnonzero(g != c)
        assert not bad.size, (f"{name}: {bad.size} bytes differ, first at {bad[0]}: GPU {g[bad[0]]:#x}, "
                              f"CPU {c[bad[0]]:#x}")


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_host_check_agrees(name):
    module = importlib.import_module(name)
    ok_gpu, verdict_gpu = module.run()
    with CPU:
        ok_cpu, verdict_cpu = module.run()
    assert ok_gpu and ok_cpu, (verdict_gpu, verdict_cpu)
    if name not in INEXACT:
        assert verdict_gpu == verdict_cpu


def _pipe_copy(a, tiles_per_cta):
    import pipe_copy

    from ptxdsl.runtime import DeviceArray

    rows, cols = a.shape
    box = (pipe_copy.BOX[1], pipe_copy.BOX[0])
    prog = px.compile(pipe_copy.KERNEL)
    src, out = DeviceArray.to_device(a), DeviceArray.zeros(a.shape, np.uint16)
    pipe_copy.launcher(prog, rows, cols, tiles_per_cta=tiles_per_cta)(
        px.TensorMapSpec.from_array(src, box, dtype="bf16"), px.TensorMapSpec.from_array(out, box, dtype="bf16"))
    return out.to_host()


@pytest.mark.parametrize("tiles_per_cta", [1, 7, None])
def test_pipe_copy_outputs_are_equal(tiles_per_cta):
    a = np.random.default_rng(3).integers(0, 2**16, (256, 1024), dtype=np.uint16)
    on_gpu = _pipe_copy(a, tiles_per_cta)
    with CPU:
        on_cpu = _pipe_copy(a, tiles_per_cta)
    assert np.array_equal(on_gpu, on_cpu)
    assert np.array_equal(on_cpu, a)
