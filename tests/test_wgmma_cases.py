"""The GPU differential suite's cases, on the CPU: each drawn form builds (the verifier passes it), assembles
with nvJitLink, and the model's prediction and bound are defined; the data round-trip through the image."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

import ptxdsl as px
import wgmma_cases as W
from ptxdsl.reference import wgmma as R


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(W.cases())
def test_a_case_builds_verifies_and_assembles(case):
    ptx = px.emit(W.build(case))
    assert px.assemble(ptx, "sm_90a").kernels["wgmma_case"].spill_stores == 0
    data = W.inputs(case)
    assert R.read_tile(data["img"], case.b_layout, W.B_OFF).view(np.uint8).tobytes() == \
        np.asarray(data["b"]).view(np.uint8).tobytes()
    assert W.predict(case, data).shape == (64, case.n)


def test_compare_sees_a_wrong_element():
    case = W.WgmmaCase("s8", "u8", "s32", 16, 1, True, "none", "K", "128B", "K", seed=3)
    data = W.inputs(case)
    words = R.matrix_to_acc(W.predict(case, data), "s32").astype(np.int32).view(np.uint32).copy()
    assert W.compare(case, data, words)[0]
    words[5, 2] ^= 1
    ok, why = W.compare(case, data, words)
    assert not ok and "1 of 1024" in why
