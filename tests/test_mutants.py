"""The mutation campaign on the CPU (tests/mutants.py): every example and pipeline kernel mutated the ways a user
gets the protocol wrong, each mutant classified by ptxdsl. CI classifies a fixed stratified sample (all of them
with PTXDSL_MUTANTS=all: 300+ in a few seconds); each operator's mutants must be rejected where the protocol is
broken by construction, and the controls (an offset of 0, a fence the kernel does not need) accepted. The GPU
campaign's bookkeeping (workers, restarts after a dead context, timeouts, the JSON summary) is checked with
stand-in outcomes; the GPU run itself is `python tests/mutants.py gpu` (see its docstring)."""
import json
import os
import sys
from pathlib import Path

import pytest

import mutants as M

ALL = os.environ.get("PTXDSL_MUTANTS") == "all"
EVERY = M.mutants()
CHOSEN = EVERY if ALL else M.sample(EVERY, 120, seed=1)     # 120: every (family, operator) group at least once
PIPES = [f for f in M.FAMILIES if f.startswith("pipe_")]


def test_the_campaign_has_over_300_mutants_of_every_operator_and_family():
    assert len(EVERY) >= 300
    assert {m.operator for m in EVERY} == set(M.OPERATORS)
    assert {m.family for m in EVERY} == set(M.FAMILIES)
    assert len({m.id for m in EVERY}) == len(EVERY)


F32 = {"pipe_splitsum", "pipe_splitsum_ordered"}    # the families whose maps are f32 (the others bf16)


def must_reject(m) -> bool | None:
    """True: the mutation breaks the protocol by construction; False: a control that must pass; None: either."""
    if m.operator in ("tx", "flip_parity", "drop_wait", "drop_sync"):
        return True
    if m.operator == "coord_param":                     # a control: an offset of a multiple of 16 bytes (0, 4 f32)
        return m.variant * (4 if m.family in F32 else 2) % 16 != 0
    if m.operator == "init_count":
        # +1: one arrival short of every phase (a hang); -1 or 1: more arrivals than the count, the extra ones land in
        # the next phase (the H200 hung or copied wrong data with an empty barrier of 127 for 128 threads)
        return True
    if m.operator == "drop_fence":
        return None if "FenceProxyAsync" in m.what and m.family in ("tma_store_tile", "tma_reduce_tile") else True
    if m.operator == "loop_bound" and m.family.startswith("ring_copy") and m.variant[0] == "stop":
        return True
    if m.operator in ("wg_commit", "wg_wait", "wg_diverge"):
        return True
    if m.operator == "wg_fence":                        # a control: the fence twice
        return m.variant == "drop"
    if m.operator == "wg_desc":                         # controls: LBO (unused by K-major swizzled tiles)
        return {"lbo": False, "krepeat": None}.get(m.variant[0], True)
    if m.operator == "wg_setmaxnreg":                   # controls: a .dec further down, an .inc 8 lower
        return m.variant > m.base if "Dec" in m.what else m.variant != m.base - 8
    if m.operator == "loop_bound" and m.family.startswith("pipe_"):
        # the ring's init loop (a stage left uninitialised, or an mbarrier.init past the last barrier) and the
        # producer's and consumer's persistent loops, which must walk the same tiles: one that starts a tile late
        # leaves a wait that is never armed (a hang) or a load that no thread waits for
        return True
    return None


@pytest.mark.parametrize("m", CHOSEN, ids=[m.id for m in CHOSEN])
def test_each_mutant_is_classified(m):
    v = M.classify(m)
    assert v["verdict"] in ("accepted", "rejected"), v
    want = must_reject(m)
    if want is True:
        assert v["verdict"] == "rejected", (m.what, v)
        assert v["rule"] in M.px.verify.RULES or v["rule"].startswith("launch."), v
    elif want is False:
        assert v["verdict"] == "accepted", (m.what, v)
    if m.operator == "coord_param" and want:
        assert (v["stage"], v["rule"]) == ("launch", "coord-align"), v


@pytest.mark.parametrize("mid", ["ring_copy/init_count/5-127", "ws_copy4/init_count/3-127",
                                 "ring_copy2/init_count/3-127"])
def test_more_arrivals_than_the_init_count_are_rejected(mid):
    """The H200 (2026-12-01) hung or copied wrong data with these: an empty barrier initialised for 127 where 128
    threads arrive each lap (the 128th arrival lands in the next phase)."""
    (m,) = [m for m in EVERY if m.id == mid]
    v = M.classify(m)
    assert (v["verdict"], v["stage"], v["rule"]) == ("rejected", "verify", "arrival-count"), v
    assert f"for a count of {m.variant}" in v["message"], v


def test_the_rules_the_campaign_exercises():
    """Over the whole campaign (or the sample), the verifier's ring and launch rules each reject some mutant."""
    rules = {M.classify(m).get("rule") for m in CHOSEN}
    assert {"expect-tx-mismatch", "coord-align", "wait-never-armed", "arrival-count", "refill-race"} <= rules, rules


def test_the_pipeline_kernels_lap_their_rings():
    """The pipe_* families run on a persistent grid, fewer CTAs than tiles (8 tiles per CTA), so that each CTA
    laps its ring several times: a ring mistake shows only when the ring wraps. Every operator finds sites in
    them."""
    assert {"pipe_copy", "pipe_axpy", "pipe_transpose", "pipe_gather", "pipe_splitsum_ordered"} <= set(PIPES)
    for name in PIPES:
        fam = M.FAMILIES[name]
        if name.startswith("pipe_splitsum"):           # a CTA per (tile, group), each adding 8 splits: 2 laps
            assert M.SS_SPLITS // 2 >= 2 * M.importlib.import_module("pipe_splitsum").STAGES, name
        elif name.startswith("pipe_varlen"):            # 3 tiles per CTA on 2 stages: tensor 0's first CTA and
            work = fam.args(M._host_arrays(fam))[2]      # the next, which waits for its map, each lap the ring
            assert work[0][2] == work[1][2] == M.VL_PER_CTA > M.importlib.import_module("pipe_varlen").STAGES
        elif name == "pipe_gather":                     # 24 stages over 3 CTAs: 8 each, 4 laps of 2 stages
            assert M.GA_TILES in fam.args(M._host_arrays(fam)) and M.GA_TILES >= 8 * fam.grid[0], name
        else:
            assert M.PIPE_TILES in fam.args(M._host_arrays(fam)), name
            assert M.PIPE_TILES >= 8 * fam.grid[0], name
        # every operator finds sites (a kernel with no tensor map has no coordinate to make a parameter)
        ops = set(M.OPERATORS) - set(M.WG_OPERATORS) - ({"coord_param"} if name == "pipe_gather" else set())
        assert {m.operator for m in EVERY if m.family == name} == ops, name


def test_every_pipeline_mutant_but_the_controls_is_rejected():
    """All the pipe_* mutants (not a sample: a few seconds): only the controls (a coordinate offset of 0) pass,
    and the ring's mistakes, which depend on the tile count and the grid, are caught at launch."""
    launch = set()
    for m in (m for m in EVERY if m.family in PIPES):
        v = M.classify(m)
        assert v["verdict"] == ("accepted" if must_reject(m) is False else "rejected"), (m.id, v)
        if v["verdict"] == "rejected" and v["stage"] == "launch":
            launch.add(v["rule"])
    assert {"ring-parity", "refill-race", "expect-tx-mismatch", "arrival-count", "wait-never-armed",
            "coord-align"} <= launch, launch


@pytest.mark.parametrize("mid, rule, text", [
    ("pipe_copy/tx/0-8208", "expect-tx-mismatch", "ring_full[0] still expects 16 transaction bytes in phase 0"),
    ("pipe_copy/tx/0-16384", "expect-tx-mismatch", "ring_full[0] still expects 8192 transaction bytes"),
    ("pipe_copy/init_count/0-2", "arrival-count", "which needs 2 arrivals"),
    ("pipe_axpy/tx/0-8192", "expect-tx-mismatch", "completes its phase 0 before this TMA load's 8192 bytes land"),
])
def test_a_protocol_error_is_named_by_its_cause_not_its_consequences(mid, rule, text):
    """The consumers wait on a full phase that lacks bytes or arrivals; the producer, waiting for a slot they never
    release, is the consequence, and is not what the error names. A stage armed for half the bytes of its two
    loads is an underflow at the second load, not the refill race it leads to."""
    (m,) = [m for m in EVERY if m.id == mid]
    v = M.classify(m)
    assert (v["verdict"], v["stage"], v["rule"]) == ("rejected", "launch", rule) and text in v["message"], v


WG = ("wgmma_tile", "wgmma_ws")
WG_RULES = {"wg_fence": "wgmma-fence", "wg_commit": "wgmma-pending", "wg_wait": "wgmma-pending",
            "wg_desc": "wgmma-descriptor-map", "wg_diverge": "wgmma-warpgroup-divergent",
            "wg_setmaxnreg": "setmaxnreg-budget"}


def test_every_tensor_core_mutant_is_named_by_its_rule_at_its_line():
    """All the tensor-core mutants (not a sample): each that breaks the protocol is rejected by the rule of its class
    at the line of the mutated instruction (a dropped or moved wait_group, or a dropped commit: where the
    accumulators are first read), the controls (a second wgmma.fence, a doubled LBO, setmaxnreg counts that still
    fit) are accepted, and so is the K step read twice (functional). The H200's own verdicts come from
    `tests/mutants.py gpu --families wgmma_tile wgmma_ws`."""
    mma_line = {f: M._mmas(M.kernel_of(f, False))[0].loc.line for f in WG}
    acc = {f: set(M._mmas(M.kernel_of(f, False))[0].op.acc) for f in WG}      # the accumulator registers
    store_line = {f: next(s.loc.line for _, _, s in M._sites(M.kernel_of(f, False).body)      # acc.store's line
                          if isinstance(s, M.Instr) and acc[f] & set(s.op.uses()) and not M._has(s, M.MmaAsync))
                  for f in WG}
    found = [m for m in EVERY if m.family in WG and m.operator in M.WG_OPERATORS]
    assert {m.operator for m in found} == set(M.WG_OPERATORS) and len(found) >= 60
    for m in found:
        v = M.classify(m)
        want = must_reject(m)
        if want is None:
            assert v["verdict"] == "accepted", (m.id, v)
            continue
        assert v["verdict"] == ("rejected" if want else "accepted"), (m.id, v)
        if want:
            assert (v["stage"], v["rule"]) == ("verify", WG_RULES[m.operator]), (m.id, v)
            if m.operator in ("wg_commit", "wg_wait"):
                assert v["line"] == store_line[m.family], (m.id, v)         # the accumulators' first reader
            elif m.operator == "wg_fence":
                assert v["line"] == mma_line[m.family], (m.id, v)           # the mma_async with no fence before it
            else:
                assert v["line"] == m.line, (m.id, v)


def test_the_interpreter_never_shows_a_tensor_core_mutant_wrong_that_the_verifier_accepts():
    """Every tensor-core mutant (and the families' dropped fences and barriers) run on the CPU interpreter, checks
    at launch off: each that computes a wrong result, faults or deadlocks is rejected, but the K step read twice,
    a legal read of other elements (`functional`); the controls compute the unmutated kernel's result."""
    import mutants_interpret as MI

    from ptxdsl.interpret import CPU

    saved = M.REPEATS
    M.REPEATS = 1
    found = [m for m in EVERY if m.family in WG and (m.operator in M.WG_OPERATORS
                                                     or m.operator in ("drop_fence", "drop_sync"))]
    outcomes = {}
    try:
        with CPU, pytest.MonkeyPatch.context() as mp:
            mp.setenv("PTXDSL_LAUNCH_CHECKS", "0")
            for f in WG:                                # one CTA: every mutant here shows (or not) in each CTA
                mp.setitem(M.FAMILIES, f, M.dataclasses.replace(M.FAMILIES[f], grid=(1, 1)))
            refs = {f: M._run_on_gpu(M.FAMILIES[f], M.kernel_of(f, False), ())[0] for f in WG}
            for m in found:
                outcomes[m.id] = MI.outcome(m, refs[m.family])
    finally:
        M.REPEATS = saved
    wrong = {mid for mid, (got, _) in outcomes.items() if got != "correct"}
    assert len(wrong) >= 40, outcomes                   # the descriptors, the divergent mma_async, a torn tile
    for m in found:
        got, where = outcomes[m.id]
        v = M.classify(m)
        row = {"id": m.id, "operator": m.operator, "ptxdsl": v, "gpu": "wrong data"}
        if m.id in wrong and not M.functional(row):
            assert v["verdict"] == "rejected", (m.id, got, where, v)
        if must_reject(m) is False:
            assert got == "correct", (m.id, got, where)
        if must_reject(m) is None:
            assert got == "wrong data" and v["verdict"] == "accepted" and M.functional(row), (m.id, got, v)


# ------------------------------------------------------------------------------- the GPU side's bookkeeping

def run_campaign(tmp_path, monkeypatch, outcomes, n, timeout=None):
    monkeypatch.setenv(M.FAKE, outcomes)
    if timeout is not None:
        monkeypatch.setenv("PTXDSL_MUTANTS_TIMEOUT", str(timeout))
        monkeypatch.setattr(M, "TIMEOUT_S", timeout)
    result = M.gpu_campaign(n, 2, tmp_path, seed=3)
    return result, json.loads((tmp_path / "mutants.json").read_text())


def test_the_gpu_campaign_restarts_a_worker_after_a_dead_context(tmp_path, monkeypatch):
    result, written = run_campaign(tmp_path, monkeypatch, "correct,trap,wrong data,context error", 8)
    assert written == json.loads(json.dumps(result))
    rows = written["mutants"]
    assert len(rows) == 8 and {r["gpu"] for r in rows} <= {"correct", "trap", "wrong data", "context error"}
    assert all(r["ptxdsl"]["verdict"] in ("accepted", "rejected") for r in rows)
    s = written["summary"]
    assert s["mutants"] == 8 and sum(s["gpu"].values()) == 8 and not s["unclassified"]
    assert s["broken_on_gpu_but_accepted"] == [r["id"] for r in rows if r["gpu"] in M.BROKEN
                                               and r["ptxdsl"]["verdict"] == "accepted"]
    assert all("memory_model" in r for r in rows)
    assert sorted(s["memory_model_violations_not_observed"] + s["false_positives"]) == sorted(
        s["correct_on_gpu_but_rejected"])


def test_the_gpu_campaign_runs_the_families_named(tmp_path, monkeypatch, capsys):
    """`gpu --families wgmma_tile wgmma_ws` samples those kernels' mutants only (the tensor-core pass on the H200);
    a family that does not exist is refused by name before any GPU work."""
    monkeypatch.setenv(M.FAKE, "correct,wrong data")
    result = M.gpu_campaign(6, 2, tmp_path, seed=3, families=["wgmma_ws"])
    assert {r["family"] for r in result["mutants"]} == {"wgmma_ws"} and len(result["mutants"]) == 6
    assert M.main(["gpu", "--families", "wgmma_tile", "wgmma_tiles", "--out", str(tmp_path)]) == 2
    assert "no such family: wgmma_tiles" in capsys.readouterr().err


def test_a_silent_worker_is_a_timeout_and_the_rest_still_run(tmp_path, monkeypatch):
    # 10 s of silence is a hang: a worker's first line (after Python, ptxdsl and its kernels) takes seconds on a
    # loaded machine. The stand-in picks a mutant's outcome by its id: a plan in which the first of the 4 the
    # campaign samples sleeps and the others come out correct.
    chosen = M.sample(M.mutants(), 4, 3)
    n = 1 + max(sum(map(ord, m.id)) for m in chosen)
    first = sum(map(ord, chosen[0].id))
    plan = ",".join("sleep" if i == first else "correct" for i in range(n))
    result, written = run_campaign(tmp_path, monkeypatch, plan, 4, timeout=10)
    gpu = [r["gpu"] for r in written["mutants"]]
    assert "timeout" in gpu and "correct" in gpu and "no result" not in gpu, gpu


def row(mid, verdict, gpu, detail="", **ptxdsl):
    (m,) = [m for m in EVERY if m.id == mid]
    v = {"verdict": verdict, **ptxdsl}
    return {"id": mid, "family": m.family, "operator": m.operator, "what": m.what, "ptxdsl": v, "gpu": gpu,
            "gpu_detail": detail, "memory_model": M.memory_model_reason(m.operator, v, m.variant, m.base),
            "shift_bytes": M.shift_bytes(m)}


def test_the_summary_sorts_the_disagreements():
    """Broken but accepted: protocol bugs apart from loop shifts that move whole tiles (functional); correct but
    rejected: memory-model violations apart from false positives (a hang the GPU did not show)."""
    rows = [row("ring_copy/init_count/5-127", "accepted", "context error"),
            row("ring_copy/loop_bound/0-start1", "accepted", "wrong data",
                "2 of 2 launches differ from the unmutated kernel's output (12 misplaced, 4 missing)"),
            row("ring_copy2/loop_bound/0-start1", "accepted", "wrong data",
                "2 of 2 launches differ from the unmutated kernel's output (4 misplaced, 8 torn)"),
            row("ring_copy4/loop_bound/0-start1", "accepted", "hang caught by watchdog"),
            row("ring_copy/drop_fence/0", "rejected", "correct", rule="mbarrier-init-fence"),
            row("ring_copy/drop_wait/1", "rejected", "correct", rule="refill-race"),
            row("ws_copy/loop_bound/0-stop1", "rejected", "correct", rule="tma-load-race"),
            row("ring_copy/init_count/5-129", "rejected", "correct", rule="wait-never-armed"),
            row("tma_load_tile/tx/0-8208", "rejected", "correct", rule="expect-tx-mismatch"),
            row("tma_load_tile/tx/0-8176", "rejected", "correct", rule="expect-tx-mismatch"),
            row("tma_load_tile/drop_wait/0", "rejected", "wrong data", rule="tma-load-race")]
    s = M.summarise_gpu(rows)
    assert s["broken_on_gpu_but_accepted"] == ["ring_copy/init_count/5-127", "ring_copy2/loop_bound/0-start1",
                                               "ring_copy4/loop_bound/0-start1"]
    assert s["functional_not_protocol"] == ["ring_copy/loop_bound/0-start1"]
    assert s["memory_model_violations_not_observed"] == ["ring_copy/drop_fence/0", "ring_copy/drop_wait/1",
                                                         "ws_copy/loop_bound/0-stop1", "tma_load_tile/tx/0-8176"]
    assert s["false_positives"] == ["ring_copy/init_count/5-129", "tma_load_tile/tx/0-8208"]
    assert len(s["correct_on_gpu_but_rejected"]) == 6 and s["false_positive_share_of_sample"] == round(2 / 11, 4)



def test_an_aligned_coordinate_shift_is_functional_not_a_protocol_bug():
    """A coord_param mutant moves its box by off elements: 4 f32 elements are 16 bytes (a legal box over other
    elements, which computes something else); 1 f32 element and 4 bf16 elements are off a 16-byte boundary."""
    by_id = {m.id: m for m in EVERY}
    assert M.shift_bytes(by_id["pipe_splitsum/coord_param/0-4"]) == 16
    assert M.shift_bytes(by_id["pipe_splitsum/coord_param/0-1"]) == 4
    assert M.shift_bytes(by_id["pipe_axpy/coord_param/1-4"]) == 8
    assert M.shift_bytes(by_id["ring_copy/drop_fence/0"]) is None
    detail = "2 of 2 launches differ from the unmutated kernel's output (4 torn)"
    s = M.summarise_gpu([row("pipe_splitsum/coord_param/0-4", "accepted", "wrong data", detail),
                         row("pipe_axpy/coord_param/1-4", "accepted", "wrong data", detail),
                         row("pipe_splitsum/coord_param/0-1", "accepted", "trap")])
    assert s["functional_not_protocol"] == ["pipe_splitsum/coord_param/0-4"]
    assert s["broken_on_gpu_but_accepted"] == ["pipe_axpy/coord_param/1-4", "pipe_splitsum/coord_param/0-1"]

def test_what_a_sanitized_run_says():
    ok = '{"id": "a/b/0", "gpu": "correct", "detail": "2 launches bit-exact"}\n'
    race = "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n"
    assert M.judge_sanitized("racecheck", ok, race) == "2 racecheck hazards"
    assert M.judge_sanitized("racecheck", ok, race.replace("2", "0")) == M.CLEAN
    assert M.judge_sanitized("synccheck", ok, "========= ERROR SUMMARY: 384 errors\n") == "384 synccheck errors"
    dead = '{"id": "a/b/0", "gpu": "context error", "detail": "unspecified launch failure"}\n'
    assert M.judge_sanitized("synccheck", dead, "========= ERROR SUMMARY: 0 errors\n") == "context error under synccheck"
    assert M.judge_sanitized("racecheck", ok, "") == "no verdict under racecheck"
    assert M.judge_sanitized("racecheck", "", race) == "2 racecheck hazards"        # the worker died: hazards still count
    assert M.judge_sanitized("racecheck", "", race.replace("2", "0")) == "no verdict under racecheck"
    assert [M.is_finding(x) for x in ("2 racecheck hazards", "hang caught by watchdog under racecheck", M.CLEAN,
                                      "void: the unmutated kernel under racecheck: 1 racecheck hazards",
                                      "no verdict under synccheck", "timeout under racecheck (120 s)", None)] == [
        True, True, False, False, False, False, False]


FAKE_SANITIZER = r"""#!/bin/sh
# stands in for compute-sanitizer: --tool T ... --log-file PATTERN python mutants.py worker ID
while [ "$1" != "worker" ]; do
    case "$1" in --tool) tool=$2 ;; --log-file) log=$(echo "$2" | sed "s/%p/$$/") ;; esac
    shift
done
id=$2
case "$tool:$id" in
    racecheck:*drop_sync*|racecheck:tma_load_tile/reference) n=3 ;;
    *) n=0 ;;
esac
if [ "$tool" = racecheck ]; then
    echo "RACECHECK SUMMARY: $n hazards displayed (0 errors, $n warnings)" > "$log"
else
    echo "ERROR SUMMARY: 0 errors" > "$log"
fi
echo "{\"id\": \"$id\", \"gpu\": \"correct\", \"detail\": \"\"}"
"""


def test_the_sanitizer_pass_runs_each_mutant_beside_its_familys_control(tmp_path, monkeypatch):
    """Each mutant under racecheck and synccheck, with the unmutated kernel as the control: a family whose
    control is not clean under a tool has that tool's findings voided."""
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(FAKE_SANITIZER)
    fake.chmod(0o755)
    monkeypatch.setenv("COMPUTE_SANITIZER", str(fake))
    monkeypatch.delenv(M.FAKE, raising=False)
    got = M.sanitizer_pass(["ring_copy/drop_sync/0", "ring_copy/coord_param/1-0", "tma_load_tile/drop_sync/0"], 2,
                           float("inf"))
    assert got["ring_copy/drop_sync/0"] == {"racecheck": "3 racecheck hazards", "synccheck": M.CLEAN}
    assert got["ring_copy/coord_param/1-0"] == {"racecheck": M.CLEAN, "synccheck": M.CLEAN}
    assert got["tma_load_tile/drop_sync/0"]["racecheck"].startswith("void: the unmutated kernel under racecheck")
    rows = [dict(row("ring_copy/drop_sync/0", "rejected", "correct", rule="mbarrier-init-sync"),
                 sanitizer=got["ring_copy/drop_sync/0"]),
            dict(row("ring_copy/coord_param/1-0", "accepted", "correct"), sanitizer=got["ring_copy/coord_param/1-0"]),
            dict(row("tma_load_tile/drop_sync/0", "rejected", "correct", rule="mbarrier-init-sync"),
                 sanitizer=got["tma_load_tile/drop_sync/0"]),
            dict(row("ws_copy/drop_sync/0", "accepted", "correct"), sanitizer={"racecheck": "5 racecheck hazards"})]
    s = M.summarise_gpu(rows)
    assert s["broken_by_sanitizer"] == {"ring_copy/drop_sync/0": ["racecheck: 3 racecheck hazards"],
                                        "ws_copy/drop_sync/0": ["racecheck: 5 racecheck hazards"]}
    assert s["broken_on_gpu_but_accepted"] == ["ws_copy/drop_sync/0"]
    assert s["correct_on_gpu_but_rejected"] == ["tma_load_tile/drop_sync/0"] and s["sanitizer_checked"] == 4


def test_memory_model_reasons_per_operator_and_rule():
    reason = M.memory_model_reason
    assert "fence.mbarrier_init" in reason("drop_fence", {"verdict": "rejected", "rule": "mbarrier-init-fence"})
    assert reason("drop_fence", {"verdict": "accepted"}) is None
    assert "next phase" in reason("init_count", {"verdict": "rejected", "rule": "arrival-count"}, 127, 128)
    assert reason("init_count", {"verdict": "rejected", "rule": "arrival-count"}, 129, 128) is None     # a hang
    assert reason("tx", {"verdict": "rejected", "rule": "expect-tx-mismatch"}, 16384, 8192) is None     # a hang
    assert reason("coord_param", {"verdict": "rejected", "stage": "launch", "rule": "coord-align"}, 1) is None
    assert {op for op, _ in M.MEMORY_MODEL} <= set(M.OPERATORS)
    assert {rule for _, rule in M.MEMORY_MODEL} <= set(M.px.verify.RULES)
    for op, _ in M.MEMORY_MODEL:                        # the module's docstring gives each operator's reason
        assert f"\n    {op} " in M.__doc__, op


def test_an_earlier_gpu_run_is_summarised_again(tmp_path, capsys):
    """`summarise FILE` reads a mutants.json written before the classification existed (no memory_model in its
    rows); --reclassify puts today's verdicts in: the 127-arrival mutants are rejected now."""
    rows = [row("ring_copy/init_count/5-127", "accepted", "context error"),
            row("ring_copy/loop_bound/0-start1", "accepted", "wrong data", "(12 misplaced, 4 missing)"),
            row("ring_copy/drop_fence/0", "rejected", "correct", rule="mbarrier-init-fence")]
    for r in rows:
        del r["memory_model"]
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps({"summary": {"device": "NVIDIA H200", "date": "2026-12-01"}, "mutants": rows}))
    old = M.resummarise(path)
    assert old["broken_on_gpu_but_accepted"] == ["ring_copy/init_count/5-127"]
    assert old["functional_not_protocol"] == ["ring_copy/loop_bound/0-start1"]
    assert old["memory_model_violations_not_observed"] == ["ring_copy/drop_fence/0"] and not old["false_positives"]
    assert old["device"] == "NVIDIA H200"
    assert M.main(["summarise", str(path), "--reclassify"]) == 0
    now = json.loads(capsys.readouterr().out)
    assert now["broken_on_gpu_but_accepted"] == [] and now["rejected_by_ptxdsl"] == 2
    assert now["functional_not_protocol"] == ["ring_copy/loop_bound/0-start1"]


def test_the_command_line_prints_the_cpu_summary(capsys, tmp_path):
    out = tmp_path / "cpu.json"
    assert M.main(["cpu", "--json", str(out), "--families", "tma_load_tile", "ring_copy"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["mutants"] == sum(m.family in ("tma_load_tile", "ring_copy") for m in EVERY)
    assert json.loads(out.read_text())["summary"]["rejected"] == summary["rejected"]


def test_the_sanitizer_pass_alone_names_what_it_cannot_run(capsys, monkeypatch):
    """`tests/mutants.py sanitize ID...`: an id no operator makes is refused by name, and without
    compute-sanitizer the command says so instead of printing an empty result."""
    assert M.main(["sanitize", "ring_copy/drop_sync/0", "ring_copy/no_such/7"]) == 2
    assert "no such mutant: ring_copy/no_such/7" in capsys.readouterr().err
    import ptxdsl.testing.sanitize as sanitize

    monkeypatch.setattr(sanitize, "find", lambda: None)
    assert M.main(["sanitize", "ring_copy/drop_sync/0"]) == 2
    assert "compute-sanitizer not found" in capsys.readouterr().err


if __name__ == "__main__":
    sys.exit(pytest.main([str(Path(__file__))]))


def _varlen_tables(per_cta=2):
    """Host copies of pipe_varlen's tables, made by the example's own `tables`, for 4 tensors: 36,400 elements (142
    rows in 5 tiles, and a tail: CTAs 0-2), 100 (a tail only), 16,384 (2 whole tiles) and 25,344 (99 rows: the
    last CTA's second tile short)."""
    import pipe_varlen

    sizes = (36_400, 100, 64 * 256, 99 * 256)
    return pipe_varlen.tables([(0x10000 * (i + 1), 0x90000 * (i + 1), n) for i, n in enumerate(sizes)], per_cta)


@pytest.mark.parametrize("maps, name", [("cta", "pipe_varlen"), ("tensor", "pipe_varlen_shared_maps")])
def test_a_kernel_that_reads_its_bounds_from_memory_is_checked_with_host_tables(monkeypatch, maps, name):
    """pipe_varlen reads each CTA's tile count and its tensor's shape from tables in memory. Given host copies of
    them, check_launch follows them (CTA 0, CTA 1 and the last CTA: a tensor's first CTA and the others take
    different paths) and rejects every byte-count and parity mutant, in either copy of the producer; given device
    pointers it cannot read them and rejects none."""
    from ptxdsl.verify import check_launch

    desc, work = _varlen_tables()
    fam = M.Family(f"varlen_{maps}", M._pipe("pipe_varlen", maps=maps, name=name), (), lambda a: (), "x", (len(work),),
                   block=160)
    monkeypatch.setitem(M.FAMILIES, fam.name, fam)
    tmpl = M.px.TensorMapSpec.tiled_for((32, 256), "bf16", (32, 256))
    extra = (0, 1) if maps == "tensor" else ()
    check_launch(M.kernel_of(fam.name, False), (tmpl, desc, work, 0, 0.5) + extra, grid=len(work), block=160)
    broken = [m for m in M.mutants([fam.name]) if m.operator in ("tx", "flip_parity")]
    assert len(broken) == (10 if maps == "tensor" else 5)
    for m in broken:
        k = M.mutate(m)
        with pytest.raises(M.px.LaunchError) as info:
            check_launch(k, (tmpl, desc, work, 0, 0.5) + extra, grid=len(work), block=160)
        rules = ("expect-tx-mismatch", "ring-parity", "refill-race", "tma-load-race")
        assert info.value.rule in rules, (m.id, info.value)
        check_launch(k, (tmpl, 0x1000, 0x2000, 0, 0.5) + extra, grid=len(work), block=160)   # device pointers
