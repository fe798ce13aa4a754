"""The GPU differential suite's CPU half (ptxdsl.testing's harness): every kernel shape it launches assembles
for sm_90a, every drawn case is one the tensor-map rules and the model accept, and a mismatch is reported
with where the memory differs and a runnable snippet."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings

import ptxdsl as px
from ptxdsl import reference as ref
from ptxdsl.tensormap import DTYPES
from ptxdsl.testing import cases as tc
from ptxdsl.testing import differential as diff
from ptxdsl.testing import harness
from ptxdsl.testing import strategies as pst
from ptxdsl.testing.cases import TmaCase


@pytest.mark.parametrize("key", harness.kernel_keys(), ids=harness.kernel_name)
def test_every_kernel_shape_assembles_for_sm90a(key):
    ptx = px.emit(harness.build_kernel(key))
    res = px.assemble(ptx, "sm_90a")
    info = res.kernels[harness.kernel_name(key)]
    assert info.registers > 0 and info.spill_stores == 0
    assert f".extern .shared .align {tc.SMEM_ALIGN}" in ptx.text
    if key[0] == "multicast":
        assert ".multicast::cluster" in ptx.text and "barrier.cluster.wait" in ptx.text


def test_kernel_keys_cover_every_operation_and_rank():
    keys = set(harness.kernel_keys())
    assert {("reduce", r, op) for r in harness.RANKS for op in ref.REDUCE_TYPES} <= keys
    assert {(op, r) for op in ("load", "multicast", "store") for r in harness.RANKS} <= keys


def check_valid(case: TmaCase) -> None:
    """A case keeps the suite's rules, and the model and the harness handle it."""
    spec = case.spec().validate()
    esize = DTYPES[case.dtype][1]
    assert case.coords[0] * esize % 16 == 0
    if case.op in ("store", "reduce"):
        assert min(case.coords) >= 0
    if case.op == "reduce":
        assert case.dtype in ref.REDUCE_TYPES[case.reduce_op]
    assert harness.kernel_key(case) in harness.kernel_keys()
    window = tc.smem_window(case)
    assert window % tc.SMEM_ALIGN == 0 and window > ref.smem_layout(spec)[0] >= ref.tx_bytes(spec)
    gmem, image = tc.case_data(case)
    assert gmem.dtype == image.dtype == np.uint8 and image.size == window
    assert gmem.size == 2 * tc.GUARD + tc.extent(case)
    expected = tc.expect(case, gmem, image)
    if case.op in ("load", "multicast"):
        assert sorted(expected) == [f"smem{r}" for r in range(case.ctas)]
        assert all(v.size == window for v in expected.values())
    else:
        assert expected["gmem"].size == gmem.size
        assert expected["gmem"][:tc.GUARD].tobytes() == gmem[:tc.GUARD].tobytes()
    line = diff.case_snippet(case).splitlines()[-1]
    assert eval(line[len("check_case("):-1], {"TmaCase": TmaCase}) == case
    assert tc.box_position(case) in ("inside", "crossing an edge", "outside")


@settings(max_examples=40, deadline=None)
@given(pst.tma_cases())
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
    gmem, image = tc.case_data(case)
    expected = tc.expect(case, gmem, image)
    observed = {k: corrupt(k, v.copy()) for k, v in expected.items()}
    status = tuple(harness.STATUS_DONE if r in tc.receivers(case) else 0 for r in range(case.ctas))
    return diff.Outcome(case, gmem, image, expected, observed, status, (1024,) * case.ctas)


STORE = TmaCase(op="store", dtype="f32", dims=(6, 5), strides=(32,), box=(4, 4), coords=(4, 2),
                element_strides=(1, 1), seed=7)


def test_compare_finds_nothing_when_the_device_agrees():
    assert diff.compare(_outcome(STORE, lambda k, v: v)) == []


def test_a_wrong_element_is_reported_with_its_coordinates_and_values():
    def flip(_, v):
        v[tc.GUARD + 3 * 32 + 5 * 4] ^= 0x80   # element (5, 3): inside the box and the tensor
        return v

    (category, details), = diff.compare(_outcome(STORE, flip))
    assert category == "store-gmem" and details["bad_bytes"] == 1
    row, = details["elements"]
    assert row["coords"] == "(5, 3)" and "source" in row and row["expected"] != row["observed"]


def test_writes_into_padding_and_guards_are_located():
    def smear(_, v):
        v[tc.GUARD + 3 * 32 + 6 * 4] ^= 1      # past dims[0] in row 3: row padding
        v[tc.GUARD - 1] ^= 1
        v[-1] ^= 1
        return v

    (_, details), = diff.compare(_outcome(STORE, smear))
    where = [r["coords"] for r in details["elements"]]
    assert where == ["guard before the tensor", "(6, 3) (row padding)", "guard after the tensor"]


def test_multicast_timeout_and_shared_memory_mismatch_are_separate_problems():
    case = TmaCase(op="multicast", dtype="u8", dims=(64,), strides=(), box=(32,), coords=(16,),
                   element_strides=(1,), cta_mask=2)
    outcome = _outcome(case, lambda k, v: np.where(np.arange(v.size) == 40, 0, v).astype(np.uint8)
                       if k == "smem1" else v)
    outcome.status = (0, harness.STATUS_TIMEOUT)
    problems = diff.compare(outcome)
    assert [c for c, _ in problems] == ["multicast-timeout", "multicast-smem"]
    assert problems[1][1]["buffer"] == "smem1" and problems[1][1]["bad_beyond_box"] == 1


def test_a_mismatch_says_where_memory_differs_and_ends_with_the_snippet():
    def flip(_, v):
        v[tc.GUARD + 3 * 32 + 5 * 4] ^= 0x80
        return v

    outcome = _outcome(STORE, flip)
    text = diff.render(outcome, diff.compare(outcome))
    assert "gmem differs in 1 16-byte chunks" in text
    assert "offset 0x70: tensor[3, 4:8]" in text         # row 3, the chunk of elements 4..7
    assert text.endswith(diff.case_snippet(STORE))


def test_shared_memory_mismatch_names_the_box_row_and_chunk():
    case = TmaCase(op="load", dtype="f32", dims=(16, 8), strides=(64,), box=(16, 8), coords=(0, 0),
                   element_strides=(1, 1), swizzle="128B")

    def flip(_, v):
        v[3 * 128 + 16 * (1 ^ 3)] ^= 1           # row 3's chunk 1 lies at chunk 1 ^ 3 under the 128B swizzle
        return v

    outcome = _outcome(case, flip)
    text = diff.render(outcome, diff.compare(outcome))
    assert "row 3, chunk 2 (offset 0x1a0), swizzled from chunk 1: box[x=4..7, y=3]" in text


def test_report_writes_each_distinct_mismatch_once_and_marks_the_minimal_one(tmp_path):
    path = tmp_path / "differential.jsonl"
    report = diff.Report("differential", jsonl=str(path), snippet=diff.case_snippet, register=False)
    problems = [("store-gmem", {"bad_bytes": 1})]
    other = replace(STORE, seed=8)
    for case in (STORE, STORE, other):
        report.ran(case)
        report.mismatch(case, problems, test="store")
    report.mismatch(STORE, problems, test="store", minimal=True)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["minimal"], r["case"]["seed"]) for r in lines] == [(False, 7), (False, 8), (True, 7)]
    assert lines[0]["snippet"] == diff.case_snippet(STORE) and lines[0]["problems"][0]["category"] == "store-gmem"
    assert report.summary(5) == ("differential: 3 cases run (2 distinct), 2 mismatching (store-gmem: 2), seed=5")


def test_reports_of_several_workers_merge_into_one_summary(tmp_path):
    a = diff.Report("differential", register=False, meta={"seed": 9})
    b = diff.Report("differential", register=False, summary_json=str(tmp_path / "summary.json"))
    for case in (STORE, replace(STORE, seed=1)):
        a.ran(case)
    b.ran(STORE)
    b.ran(replace(STORE, seed=2))
    b.mismatch(replace(STORE, seed=2), [("store-gmem", {})], minimal=True)
    merged = diff.Report.merged([a.as_dict(), b.as_dict()])
    assert (merged.runs, len(merged.distinct), len(merged.bad), merged.workers) == (4, 3, 1, 2)
    merged.write_summary()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["summary"] == "differential: 4 cases run (3 distinct), 1 mismatching (store-gmem: 1), seed=9"
    assert summary["cases_run"] == 4 and summary["workers"] == 2 and len(summary["minimal"]) == 1


def test_the_snippet_runs_check_case_on_the_same_case(monkeypatch):
    code = diff.case_snippet(STORE)
    assert "from ptxdsl.testing.differential import check_case" in code
    assert code.splitlines()[-1].startswith("check_case(TmaCase(op='store', dtype='f32', dims=(6, 5),")
    seen = []
    monkeypatch.setattr(diff, "check_case", seen.append)
    exec(code, {})
    assert seen == [STORE]


def test_the_snippet_runs_in_a_fresh_interpreter():
    """Pasted into a new Python from the same directory, the snippet imports what it names and calls
    check_case with an equal case (check_case itself replaced: it needs a GPU)."""
    shim = ("import ptxdsl.testing.differential as d, sys\n"
            "d.check_case = lambda case: print(repr(case))\n"
            "exec(sys.stdin.read())\n")
    res = subprocess.run([sys.executable, "-c", shim], input=diff.case_snippet(STORE), capture_output=True,
                         text=True, check=True)
    assert res.stdout.strip() == repr(STORE)


def test_a_mismatch_is_an_assertion_named_by_its_category():
    kind = diff.mismatch_kind("reduce-gmem")
    assert issubclass(kind, AssertionError) and kind.category == "reduce-gmem"
    assert diff.mismatch_kind("reduce-gmem") is kind and diff.mismatch_kind("load-smem") is not kind
    assert not issubclass(diff.ContextLost, Exception)
