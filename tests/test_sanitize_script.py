"""tests/gpu_sanitize.sh's bookkeeping, with a stand-in compute-sanitizer and python: which runs it makes,
how it counts errors, and when it fails. (On the H200 the real tools run it: see docs/verifier.md.)"""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The stand-in sanitizer: writes one log per run with the error count FAKE_<TOOL>_<RUN> (default 0) for runs
# whose pytest arguments mention RUN ("suite" when -k "not planted"), then runs the command.
FAKE_CS = r"""#!/usr/bin/env bash
if [ "$1" = --version ]; then echo "fake sanitizer 1.0"; exit 0; fi
tool= log= api=
while [ $# -gt 0 ]; do
    case $1 in
        --tool) tool=$2; shift 2 ;;
        --log-file) log=${2//%p/$$}; shift 2 ;;
        --report-api-errors) api=$2; shift 2 ;;
        --target-processes|--print-limit) shift 2 ;;
        *) break ;;
    esac
done
run=suite
case "$*" in *planted_phase_race*) run=phase ;; *planted_tma_race*) run=tma ;; *planted_divergent_bar*) run=bar ;;
             *local*) run=known ;; esac
var="FAKE_${tool}_${run}"
n=${!var:-0}
if [ "$tool" = racecheck ]; then
    echo "========= RACECHECK SUMMARY: $n hazards displayed ($n errors, 0 warnings)" > "$log"
else
    echo "========= ERROR SUMMARY: $n errors" > "$log"
fi
echo "========= ERROR SUMMARY: 99 errors were not printed. Use --print-limit option" >> "$log"  # not a count
[ "$n" = 0 ] || echo "=========     at k+0x40 in /x/tests/test_debug_gpu.py:4$n" >> "$log"
echo "=========         Host Frame: launch in launch.py:250" >> "$log"   # a host frame: not a kernel line
echo "$tool $run PTXDSL_SANITIZER=$PTXDSL_SANITIZER KNOWN=${PTXDSL_SANITIZER_KNOWN:-} API=$api" \
     "LINE_INFO=$PTXDSL_LINE_INFO $*" >> "$FAKE_CALLS"
exec "$@"
"""
FAKE_PY = """#!/usr/bin/env bash
echo "3 passed, 1 skipped in 0.10s"
exit ${FAKE_PYTEST_RC:-0}
"""


def _exe(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def sanitize(tmp_path, **env):
    calls = tmp_path / "calls"
    calls.write_text("")
    full = dict(os.environ, COMPUTE_SANITIZER=_exe(tmp_path / "cs", FAKE_CS), PYTHON=_exe(tmp_path / "py", FAKE_PY),
                FAKE_CALLS=str(calls), LOGS=str(tmp_path / "logs"), FAKE_racecheck_phase="2", FAKE_synccheck_bar="1",
                FAKE_memcheck_known="1")
    full.update(env)
    res = subprocess.run(["bash", str(ROOT / "tests" / "gpu_sanitize.sh")], capture_output=True, text=True,
                         env=full, timeout=60, check=False)
    return res, calls.read_text().splitlines()


def _row(out: str, tool: str, run: str) -> str:
    (row,) = [line for line in out.splitlines() if line.startswith(tool) and run in line]
    return row


@pytest.mark.parametrize("parallel", ["1", "0"])
def test_all_clean_passes_and_counts_every_run(tmp_path, parallel):
    res, calls = sanitize(tmp_path, PARALLEL=parallel)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0      3 passed, 1 skipped" in _row(res.stdout, "memcheck", "GPU suite")
    assert "ok: reported at test_debug_gpu.py:42;" in _row(res.stdout, "racecheck", "planted_phase_race")
    assert "ok: reported at test_debug_gpu.py:41;" in _row(res.stdout, "synccheck", "planted_divergent_bar")
    assert "not required" in _row(res.stdout, "racecheck", "planted_tma_race")
    assert "1      3 passed" in _row(res.stdout, "memcheck", "known: test_bulk_copies_round_trip[False-local]")
    # three suites with -k "not planted", three planted runs, one known run with its switch on
    assert sum("-k not planted" in c for c in calls) == 3
    assert sum(c.startswith("memcheck known") and "KNOWN=1" in c for c in calls) == 1
    assert all(f"PTXDSL_SANITIZER={c.split()[0]} " in c and "LINE_INFO=1 " in c for c in calls)
    # memcheck leaves the driver errors the runtime tests provoke on purpose to those tests
    assert all(("API=no " in c) == c.startswith("memcheck") for c in calls)
    # the rows come out grouped by tool, in TOOLS order, whatever order the parallel jobs ended in
    tools = [line.split()[0] for line in res.stdout.splitlines()[2:]]
    assert tools == sorted(tools, key=["memcheck", "racecheck", "synccheck"].index)


def test_an_error_in_the_suite_fails(tmp_path):
    res, _ = sanitize(tmp_path, FAKE_memcheck_suite="3")
    assert res.returncode == 1
    assert "FAIL" in _row(res.stdout, "memcheck", "GPU suite") and "3 " in _row(res.stdout, "memcheck", "GPU suite")
    assert "FAIL" not in _row(res.stdout, "racecheck", "GPU suite")


def test_a_planted_bug_the_tool_misses_fails(tmp_path):
    res, _ = sanitize(tmp_path, FAKE_racecheck_phase="0", TOOLS="racecheck")
    assert res.returncode == 1
    assert "FAIL: not reported" in _row(res.stdout, "racecheck", "planted_phase_race")
    assert "memcheck" not in res.stdout.split("tools:")[1].split("\n", 1)[1]


def test_a_failing_pytest_fails(tmp_path):
    res, _ = sanitize(tmp_path, FAKE_PYTEST_RC="1", TOOLS="synccheck")
    assert res.returncode == 1
    assert "FAIL (pytest exit 1" in _row(res.stdout, "synccheck", "GPU suite")


def test_a_known_report_that_went_away_is_said_but_not_a_failure(tmp_path):
    res, _ = sanitize(tmp_path, FAKE_memcheck_known="0", TOOLS="memcheck")
    assert res.returncode == 0, res.stdout
    assert "no longer reported" in _row(res.stdout, "memcheck", "known:")


def test_empty_planted_and_known_run_only_the_suites(tmp_path):
    res, calls = sanitize(tmp_path, PLANTED="", KNOWN="")
    assert res.returncode == 0, res.stdout
    assert len(calls) == 3 and all("-k not planted" in c for c in calls)
