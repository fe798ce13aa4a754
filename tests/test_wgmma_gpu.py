"""wgmma.mma_async on the H200 against the CPU model (ptxdsl.reference.wgmma): random legal forms (every type
family, N, A from shared memory or registers, each swizzle and major-ness, scale and transpose immediates, 1-4 K
steps, scale-d from a launch parameter), each built through the builder (so the verifier checks it) and
assembled by nvJitLink before it runs. Integer and fp8 cases are compared bit for bit, f16/bf16/tf32 within the
model's stated bound.

    HYPOTHESIS_PROFILE=gpu PTXDSL_WGMMA_CASES=300 python -m pytest tests/test_wgmma_gpu.py -q

PTXDSL_WGMMA_CASES sets how many cases are drawn (default 300)."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings

import ptxdsl as px
import wgmma_cases as W

CASES = int(os.environ.get("PTXDSL_WGMMA_CASES") or 300)


@functools.lru_cache(maxsize=64)
def _program(form):
    case = W.WgmmaCase(*form)
    return px.compile(W.build(case))


def run_on_gpu(case: W.WgmmaCase) -> np.ndarray:
    from ptxdsl.runtime import DeviceArray

    data = W.inputs(case)
    prog = _program(case.form())
    bufs = [DeviceArray.to_device(data[name]) for name in ("img", "din", "ain")]
    dout = DeviceArray.to_device(np.full_like(data["din"], 0xFFFFFFFF))
    prog["wgmma_case"](*bufs, dout, int(case.keep), grid=1, block=W.WARPGROUP)
    return data, dout.to_host()


@pytest.mark.gpu
@settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck))
@given(W.cases())
def test_mma_async_matches_the_model(case):
    event(f"{case.atype}x{case.btype}->{case.dtype}")
    event("RS" if case.a_regs else f"SS A {case.a_swizzle} {case.a_major}")
    event(f"B {case.b_swizzle} {case.b_major}")
    note(repr(case))
    data, got = run_on_gpu(case)
    ok, why = W.compare(case, data, got)
    assert ok, f"{case}: {why}"


@pytest.mark.gpu
def test_the_worked_example_form_is_exact_on_small_integers():
    """bf16 64x256x64, both operands K-major 128B: the reference page's worked example form."""
    case = W.WgmmaCase("bf16", "bf16", "f32", 256, 4, False, "128B", "K", "128B", "K", keep=False, seed=7)
    data, got = run_on_gpu(case)
    ok, why = W.compare(case, data, got)
    assert ok, why
