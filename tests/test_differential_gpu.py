"""GPU differential suite: random TMA loads, multicast loads, stores and reductions, compared bit-exactly
with ptxdsl.reference (case drawing, kernels and runner: tests/differential.py).

One device call runs it all:

    OUT=/some/dir HYPOTHESIS_PROFILE=gpu python -m pytest tests/test_differential_gpu.py -q \\
        --hypothesis-show-statistics

PTXDSL_DIFF_CASES sets how many cases the four tests draw together (default 2000) and PTXDSL_DIFF_SEED
the seed (default: a random one, printed in the summary line). With OUT set, every mismatching case is
appended to $OUT/differential.jsonl (the case, what differed, a runnable snippet; the shrunk case of each
failure is marked "minimal") and the summary goes to $OUT/differential-summary.json.
"""
from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import event, example, given, note, seed, settings
from hypothesis.control import current_build_context

import differential as diff
from differential import Case

pytestmark = pytest.mark.gpu

TOTAL = int(os.environ.get("PTXDSL_DIFF_CASES") or 2000)
SEED = int(os.environ.get("PTXDSL_DIFF_SEED") or random.SystemRandom().randrange(2**32))
SHARE = {"load": 0.35, "multicast": 0.15, "store": 0.2, "reduce": 0.3}


def examples(op: str) -> settings:
    return settings(max_examples=max(1, round(TOTAL * SHARE[op])))


def _say(config, text: str) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")
    with capture.global_and_fixture_disabled():
        terminal.write_line(text)


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    """After the module: the summary line on the terminal, and $OUT/differential-summary.json."""
    yield
    report = diff.REPORT
    line = report.summary(SEED) + f" (rerun with PTXDSL_DIFF_SEED={SEED})"
    _say(request.config, "\n" + line)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "differential-summary.json"), "w") as f:
            json.dump({"summary": line, "seed": SEED, "cases_run": report.runs, "distinct": len(report.distinct),
                       "mismatching": len(report.bad), "by_category": report.by_category,
                       "minimal": [diff.snippet(c) for c in report.minimal]}, f, indent=1)


@pytest.fixture(autouse=True)
def context_alive():
    if diff.LOST:
        pytest.skip(f"the CUDA context was lost by an earlier case:\n{diff.snippet(diff.LOST[0][0])}")


def run(case: Case, test: str) -> None:
    """Check one case; the final replay of a shrunk failure is marked minimal in the report."""
    for label in diff.events(case):
        event(label)
    note(diff.snippet(case))
    diff.check_case(case, test=test, minimal=current_build_context().is_final)


# Cases that once disagreed, or that pin a measured fact (design.md; ptxdsl/reference.py's docstring).
PINNED = {
    "load": [
        # a 64-byte-wide box under the 128B swizzle spreads over 1024 bytes
        Case(op="load", dtype="f32", dims=(16, 8), strides=(64,), box=(16, 8), coords=(0, 0), element_strides=(1, 1),
             swizzle="128B"),
        # a traversal stride of 2 on dimension 0 still loads every element
        Case(op="load", dtype="f32", dims=(32, 8), strides=(128,), box=(8, 4), coords=(4, 1), element_strides=(2, 2)),
        # oob_fill='nan' writes the halfword 0x7FF7
        Case(op="load", dtype="f16", dims=(1,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
             oob_fill="nan"),
    ],
    "multicast": [
        Case(op="multicast", dtype="f16", dims=(1,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
             oob_fill="nan", cta_mask=3),
    ],
    "store": [
        # the 16-byte chunk holding the last in-bounds element is written whole
        Case(op="store", dtype="u8", dims=(33,), strides=(), box=(32,), coords=(16,), element_strides=(1,)),
    ],
    "reduce": [
        Case(op="reduce", dtype="u32", dims=(17, 1), strides=(80,), box=(16, 1), coords=(4, 0), element_strides=(1, 1),
             reduce_op="inc"),
        # a NaN result is the canonical NaN
        Case(op="reduce", dtype="bf16", dims=(25,), strides=(), box=(16,), coords=(0,), element_strides=(1,),
             reduce_op="add"),
        # min orders -0 below +0
        Case(op="reduce", dtype="bf16", dims=(16, 1, 1, 1, 3), strides=(32, 32, 32, 32), box=(16, 1, 1, 1, 3),
             coords=(0, 0, 0, 0, 0), element_strides=(1, 1, 1, 1, 1), reduce_op="min", values="small"),
        # min with a signalling-NaN operand returns the number
        Case(op="reduce", dtype="f16", dims=(8,), strides=(), box=(8,), coords=(0,), element_strides=(1,),
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
@given(diff.cases(ops=("load",)))
@pinned("load")
def test_load_matches_the_model(case):
    run(case, "load")


@seed(SEED)
@examples("multicast")
@given(diff.cases(ops=("multicast",)))
@pinned("multicast")
def test_multicast_matches_the_model(case):
    run(case, "multicast")


@seed(SEED)
@examples("store")
@given(diff.cases(ops=("store",)))
@pinned("store")
def test_store_matches_the_model(case):
    run(case, "store")


@seed(SEED)
@examples("reduce")
@given(diff.cases(ops=("reduce",)))
@pinned("reduce")
def test_reduce_matches_the_model(case):
    run(case, "reduce")
