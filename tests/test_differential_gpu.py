"""GPU differential suite: random TMA loads, multicast loads, stores and reductions, compared bit-exactly
with ptxdsl.reference, through ptxdsl.testing (cases: strategies.tma_cases; kernels: harness; running and
comparing: differential.check_case).

One device call runs it all:

    OUT=/some/dir HYPOTHESIS_PROFILE=gpu python -m pytest tests/test_differential_gpu.py -q \\
        --hypothesis-show-statistics

and on a machine with several GPUs, one pytest-xdist worker per GPU (the ptxdsl plugin gives each its own):

    OUT=/some/dir HYPOTHESIS_PROFILE=gpu python -m pytest tests/test_differential_gpu.py -q -n auto

PTXDSL_DIFF_CASES sets how many cases the four tests draw together (default 2000) and PTXDSL_DIFF_SEED
the seed (default: one drawn by tests/conftest.py for the whole session, printed in the summary line).
With OUT set, every mismatching case is appended to $OUT/differential.jsonl (the case, what differed, a
runnable snippet; the shrunk case of each failure is marked "minimal") and the summary, counts summed
over the workers, goes to $OUT/differential-summary.json.
"""
from __future__ import annotations

import os
import random

import pytest
from hypothesis import event, example, given, note, seed, settings
from hypothesis.control import current_build_context

from ptxdsl.testing import differential as diff
from ptxdsl.testing import strategies as pst
from ptxdsl.testing.cases import TmaCase, events

pytestmark = pytest.mark.gpu

TOTAL = int(os.environ.get("PTXDSL_DIFF_CASES") or 2000)
SEED = int(os.environ.get("PTXDSL_DIFF_SEED") or random.SystemRandom().randrange(2**32))
SHARE = {"load": 0.35, "multicast": 0.15, "store": 0.2, "reduce": 0.3}

diff.REPORT.meta.update(seed=SEED, hint=f"rerun with PTXDSL_DIFF_SEED={SEED}")
if os.environ.get("OUT"):
    diff.REPORT.jsonl = os.path.join(os.environ["OUT"], "differential.jsonl")
    diff.REPORT.summary_json = os.path.join(os.environ["OUT"], "differential-summary.json")


def examples(op: str) -> settings:
    return settings(max_examples=max(1, round(TOTAL * SHARE[op])))


@pytest.fixture(autouse=True)
def context_alive():
    if diff.LOST:
        pytest.skip(f"the CUDA context was lost by an earlier case:\n{diff.case_snippet(diff.LOST[0][0])}")


def run(case: TmaCase, test: str) -> None:
    """Check one case; the final replay of a shrunk failure is marked minimal in the report."""
    for label in events(case):
        event(label)
    note(diff.case_snippet(case))
    diff.check_case(case, test=test, minimal=current_build_context().is_final)


# Cases that once disagreed, or that pin a measured fact (docs/hardware-notes.md; ptxdsl/reference/tma.py's docstring).
PINNED = {
    "load": [
        # a 64-byte-wide box under the 128B swizzle spreads over 1024 bytes
        TmaCase(op="load", dtype="f32", dims=(16, 8), strides=(64,), box=(16, 8), coords=(0, 0), element_strides=(1, 1),
                swizzle="128B"),
        # a traversal stride of 2 on dimension 0 still loads every element
        TmaCase(op="load", dtype="f32", dims=(32, 8), strides=(128,), box=(8, 4), coords=(4, 1),
                element_strides=(2, 2)),
        # oob_fill='nan' writes the halfword 0x7FF7
        TmaCase(op="load", dtype="f16", dims=(1,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
                oob_fill="nan"),
    ],
    "multicast": [
        TmaCase(op="multicast", dtype="f16", dims=(1,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
                oob_fill="nan", cta_mask=3),
    ],
    "store": [
        # the 16-byte chunk holding the last in-bounds element is written whole
        TmaCase(op="store", dtype="u8", dims=(33,), strides=(), box=(32,), coords=(16,), element_strides=(1,)),
    ],
    "reduce": [
        TmaCase(op="reduce", dtype="u32", dims=(17, 1), strides=(80,), box=(16, 1), coords=(4, 0),
                element_strides=(1, 1), reduce_op="inc"),
        # a NaN result is the canonical NaN
        TmaCase(op="reduce", dtype="bf16", dims=(25,), strides=(), box=(16,), coords=(0,), element_strides=(1,),
                reduce_op="add"),
        # min orders -0 below +0
        TmaCase(op="reduce", dtype="bf16", dims=(16, 1, 1, 1, 3), strides=(32, 32, 32, 32), box=(16, 1, 1, 1, 3),
                coords=(0, 0, 0, 0, 0), element_strides=(1, 1, 1, 1, 1), reduce_op="min", values="small"),
        # min with a signalling-NaN operand returns the number
        TmaCase(op="reduce", dtype="f16", dims=(8,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
                reduce_op="min", seed=56),
    ],
}


def pinned(op: str):
    """@example for each pinned case of `op`."""
    def apply(test):
        for case in reversed(PINNED[op]):
            test = example(case)(test)
        return test
    return apply


@seed(SEED)
@examples("load")
@given(pst.tma_cases(ops=("load",)))
@pinned("load")
def test_load_matches_the_model(case):
    run(case, "load")


@seed(SEED)
@examples("multicast")
@given(pst.tma_cases(ops=("multicast",)))
@pinned("multicast")
def test_multicast_matches_the_model(case):
    run(case, "multicast")


@seed(SEED)
@examples("store")
@given(pst.tma_cases(ops=("store",)))
@pinned("store")
def test_store_matches_the_model(case):
    run(case, "store")


@seed(SEED)
@examples("reduce")
@given(pst.tma_cases(ops=("reduce",)))
@pinned("reduce")
def test_reduce_matches_the_model(case):
    run(case, "reduce")
