"""Property tests of the transpose in examples/user_kernel.py, with ptxdsl.testing and its pytest plugin:

    python -m pytest examples/test_user_kernel.py        # the GPU test skips, with the reason, without a GPU
    python -m pytest examples/test_user_kernel.py --ptx-golden-update       # after changing the kernel on purpose

PTXDSL_EXAMPLE_PLANT=1 plants an off-by-one in the kernel's store coordinate: the GPU test then fails,
Hypothesis shrinks the case, and the failure ends with the shrunk case as code you can paste.
"""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl.testing import random_tensor, reproducible, tensor_view
from ptxdsl.testing import strategies as pst
from user_kernel import KERNEL, TransposeCase, check_transpose, launches, model, run, transpose_kernel  # noqa: F401

PLANTED = int(os.environ.get("PTXDSL_EXAMPLE_PLANT", "0"))     # rows the store is off by; 0 is the real kernel


@st.composite
def transpose_cases(draw):
    """Any of the ten element types, a matrix of 1..200 x 1..200, tiles of 32 or 16, random data."""
    rows, cols = draw(pst.shapes(ranks=(2, 2), max_side=200))
    return TransposeCase(dtype=draw(pst.dtypes()), rows=rows, cols=cols, tile=draw(st.sampled_from((32, 16))),
                         seed=draw(st.integers(0, 2**32 - 1)))


def test_ptx_matches_the_golden_file(ptx_golden):
    ptx_golden(px.emit(KERNEL), "transpose_f32_32")


@settings(max_examples=25, deadline=None)
@given(transpose_cases())
def test_assembles_for_random_shapes(case):
    src, dst = case.maps()
    k = transpose_kernel(case.dtype, case.tile, src=src, dst=dst)     # the verifier checks the copies against the maps
    info = px.assemble(px.emit(k), "sm_90a").kernels[k.kernel.name]
    assert info.spill_stores == 0 and info.shared_bytes >= 2 * src.box_bytes


@pytest.mark.gpu
@settings(max_examples=60, deadline=None)
@given(transpose_cases())
def test_gpu_result_equals_the_model(case):
    reproducible(check_transpose, case, row_offset=PLANTED)


@pytest.mark.gpu
def test_the_fixed_case():
    ok, verdict = run()
    assert ok, verdict


@settings(max_examples=25, deadline=None)
@given(transpose_cases())
def test_the_model_is_the_transpose(case):
    """The model the GPU test trusts, checked against numpy where the output tensor lies."""
    src_map, dst_map = case.maps()
    src, dst = random_tensor(src_map, case.seed), random_tensor(dst_map, case.seed + 1)
    got = tensor_view(dst_map, model(case, src, dst))
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(tensor_view(src_map, src).T).tobytes()
