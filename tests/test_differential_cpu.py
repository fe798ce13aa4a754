"""The GPU differential suite's CPU half: every kernel shape it launches assembles for sm_90a, every drawn
case is one the tensor-map rules and the model accept, and a mismatch is reported with a runnable snippet."""
from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings

import differential as diff
import ptxdsl as px
from differential import Case
from ptxdsl import reference as ref
from ptxdsl.tensormap import DTYPES


@pytest.mark.parametrize("key", diff.kernel_keys(), ids=diff.kernel_name)
def test_every_kernel_shape_assembles_for_sm90a(key):
    ptx = px.emit(diff.build_kernel(key))
    res = px.assemble(ptx, "sm_90a")
    info = res.kernels[diff.kernel_name(key)]
    assert info.registers > 0 and info.spill_stores == 0
    assert f".extern .shared .align {diff.SMEM_ALIGN}" in ptx.text
    if key[0] == "multicast":
        assert ".multicast::cluster" in ptx.text and "barrier.cluster.wait" in ptx.text


def test_kernel_keys_cover_every_operation_and_rank():
    keys = set(diff.kernel_keys())
    assert {("reduce", r, op) for r in diff.RANKS for op in ref.REDUCE_TYPES} <= keys
    assert {(op, r) for op in ("load", "multicast", "store") for r in diff.RANKS} <= keys


def check_valid(case: Case) -> None:
    """A case keeps the suite's rules, and the model and the harness handle it."""
    spec = case.spec().validate()
    esize = DTYPES[case.dtype][1]
    assert case.coords[0] * esize % 16 == 0
    if case.op in ("store", "reduce"):
        assert min(case.coords) >= 0
    if case.op == "reduce":
        assert case.dtype in ref.REDUCE_TYPES[case.reduce_op]
    assert diff.kernel_key(case) in diff.kernel_keys()
    window = diff.smem_window(case)
    assert window % diff.SMEM_ALIGN == 0 and window > ref.smem_layout(spec)[0] >= ref.tx_bytes(spec)
    gmem, image = diff.case_data(case)
    assert gmem.dtype == image.dtype == np.uint8 and image.size == window
    assert gmem.size == 2 * diff.GUARD + diff.extent(case)
    expected = diff.expect(case, gmem, image)
    if case.op in ("load", "multicast"):
        assert sorted(expected) == [f"smem{r}" for r in range(case.ctas)]
        assert all(v.size == window for v in expected.values())
    else:
        assert expected["gmem"].size == gmem.size
        assert expected["gmem"][:diff.GUARD].tobytes() == gmem[:diff.GUARD].tobytes()
    line = diff.snippet(case).splitlines()[-1]
    assert eval(line[len("check_case("):-1], {"Case": Case}) == case
    assert diff.box_position(case) in ("inside", "crossing an edge", "outside")


@settings(max_examples=40, deadline=None)
@given(diff.cases())
def test_drawn_cases_are_valid_and_the_model_answers_them(case):
    check_valid(case)


def test_pinned_gpu_cases_are_valid_and_the_model_answers_them():
    from test_differential_gpu import PINNED

    for op, cases in PINNED.items():
        for case in cases:
            assert case.op == op
            check_valid(case)


def _outcome(case, corrupt):
    """An Outcome whose observed buffers are the model's answer with `corrupt` applied."""
    gmem, image = diff.case_data(case)
    expected = diff.expect(case, gmem, image)
    observed = {k: corrupt(k, v.copy()) for k, v in expected.items()}
    status = tuple(diff.STATUS_DONE if r in diff.receivers(case) else 0 for r in range(case.ctas))
    return diff.Outcome(case, gmem, image, expected, observed, status, (1024,) * case.ctas)


STORE = Case(op="store", dtype="f32", dims=(6, 5), strides=(32,), box=(4, 4), coords=(4, 2), element_strides=(1, 1),
             seed=7)


def test_compare_finds_nothing_when_the_device_agrees():
    assert diff.compare(_outcome(STORE, lambda k, v: v)) == []


def test_a_wrong_element_is_reported_with_its_coordinates_and_values():
    def flip(_, v):
        v[diff.GUARD + 3 * 32 + 5 * 4] ^= 0x80   # element (5, 3): inside the box and the tensor
        return v

    (category, details), = diff.compare(_outcome(STORE, flip))
    assert category == "store-gmem" and details["bad_bytes"] == 1
    row, = details["elements"]
    assert row["coords"] == "(5, 3)" and "source" in row and row["expected"] != row["observed"]


def test_writes_into_padding_and_guards_are_located():
    def smear(_, v):
        v[diff.GUARD + 3 * 32 + 6 * 4] ^= 1      # past dims[0] in row 3: row padding
        v[diff.GUARD - 1] ^= 1
        v[-1] ^= 1
        return v

    (_, details), = diff.compare(_outcome(STORE, smear))
    where = [r["coords"] for r in details["elements"]]
    assert where == ["guard before the tensor", "(6, 3) (row padding)", "guard after the tensor"]


def test_multicast_timeout_and_shared_memory_mismatch_are_separate_problems():
    case = Case(op="multicast", dtype="u8", dims=(64,), strides=(), box=(32,), coords=(16,), element_strides=(1,),
                cta_mask=2)
    outcome = _outcome(case, lambda k, v: np.where(np.arange(v.size) == 40, 0, v).astype(np.uint8)
                       if k == "smem1" else v)
    outcome.status = (0, diff.STATUS_TIMEOUT)
    problems = diff.compare(outcome)
    assert [c for c, _ in problems] == ["multicast-timeout", "multicast-smem"]
    assert problems[1][1]["buffer"] == "smem1" and problems[1][1]["bad_beyond_box"] == 1


def test_report_writes_each_distinct_mismatch_once_and_marks_the_minimal_one(tmp_path):
    path = tmp_path / "differential.jsonl"
    report = diff.Report(str(path))
    problems = [("store-gmem", {"bad_bytes": 1})]
    other = replace(STORE, seed=8)
    for case in (STORE, STORE, other):
        report.ran(case)
        report.mismatch(case, problems, test="store")
    report.mismatch(STORE, problems, test="store", minimal=True)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["minimal"], r["case"]["seed"]) for r in lines] == [(False, 7), (False, 8), (True, 7)]
    assert lines[0]["snippet"] == diff.snippet(STORE) and lines[0]["problems"][0]["category"] == "store-gmem"
    assert report.summary(5) == ("differential: 3 cases run (2 distinct), 2 mismatching (store-gmem: 2), seed=5")


def test_the_snippet_runs_check_case_on_the_same_case(monkeypatch):
    seen = []
    monkeypatch.setattr(diff, "check_case", seen.append)
    monkeypatch.setitem(sys.modules, "differential", diff)
    exec(diff.snippet(STORE), {})
    assert seen == [STORE]


def test_a_mismatch_is_an_assertion_named_by_its_category():
    kind = diff.mismatch_kind("reduce-gmem")
    assert issubclass(kind, AssertionError) and kind.category == "reduce-gmem"
    assert diff.mismatch_kind("reduce-gmem") is kind and diff.mismatch_kind("load-smem") is not kind
    assert not issubclass(diff.ContextLost, Exception)
