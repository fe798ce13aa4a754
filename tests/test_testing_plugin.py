"""The ptxdsl pytest plugin, run by pytester: the gpu marker, ptx_golden, --sanitize (with a stand-in
compute-sanitizer), one xdist worker per GPU, and reports summed over workers."""
from __future__ import annotations

import json
import os
import stat
import types

import pytest

from ptxdsl.testing import devices, plugin, sanitize

GPU_FILE = """
import pytest

@pytest.mark.gpu
def test_on_the_device():
    pass

def test_on_the_host():
    pass
"""


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(plugin, "gpu_unavailable_reason", lambda: "no CUDA driver here")


@pytest.fixture
def a_gpu(monkeypatch):
    monkeypatch.setattr(plugin, "gpu_unavailable_reason", lambda: None)


def test_gpu_tests_skip_with_the_reason_without_a_device(pytester, no_gpu):
    pytester.makepyfile(GPU_FILE)
    res = pytester.runpytest_inprocess("-rs")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["SKIPPED*no CUDA device: no CUDA driver here"])


def test_gpu_tests_run_with_a_device(pytester, a_gpu):
    pytester.makepyfile(GPU_FILE)
    pytester.runpytest_inprocess().assert_outcomes(passed=2)


def test_the_marker_is_registered(pytester):
    res = pytester.runpytest_inprocess("--markers")
    res.stdout.fnmatch_lines(["@pytest.mark.gpu: needs a CUDA device*"])


def test_the_probe_runs_only_when_there_are_gpu_tests(pytester, monkeypatch):
    def probe():
        raise AssertionError("probed")

    monkeypatch.setattr(plugin, "gpu_unavailable_reason", probe)
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.runpytest_inprocess().assert_outcomes(passed=1)


# --- ptx_golden ----------------------------------------------------------------------------------

GOLDEN_FILE = """
import os
import ptxdsl as px

def kernel():
    with px.kernel("k") as k:
        k.mov(int(os.environ.get("GOLDEN_VALUE", "1")), px.u32)
    return k

def test_ptx(ptx_golden):
    ptx_golden(px.emit(kernel()), "k")

def test_named_after_the_test(ptx_golden):
    ptx_golden(kernel())
"""


def test_ptx_golden_fails_without_the_file_then_updates_then_holds(pytester, monkeypatch):
    pytester.makepyfile(test_golden=GOLDEN_FILE)
    res = pytester.runpytest_inprocess()
    res.assert_outcomes(failed=2)
    res.stdout.fnmatch_lines(["*no golden file *golden/k.ptx: pytest --ptx-golden-update*"])
    pytester.runpytest_inprocess("--ptx-golden-update").assert_outcomes(passed=2)
    text = (pytester.path / "golden" / "k.ptx").read_text()
    assert "mov.u32 %r1, 1;" in text
    assert (pytester.path / "golden" / "test_named_after_the_test.ptx").read_text() == text
    pytester.runpytest_inprocess().assert_outcomes(passed=2)
    monkeypatch.setenv("GOLDEN_VALUE", "7")
    res = pytester.runpytest_inprocess()
    res.assert_outcomes(failed=2)
    res.stdout.fnmatch_lines(["*emitted PTX differs from *k.ptx*", "*-*mov.u32 %r1, 1;", "*+*mov.u32 %r1, 7;"])
    monkeypatch.setenv("PTXDSL_REGEN_GOLDEN", "1")
    pytester.runpytest_inprocess().assert_outcomes(passed=2)
    assert "mov.u32 %r1, 7;" in (pytester.path / "golden" / "k.ptx").read_text()


def test_ptx_golden_dir_ini_option(pytester):
    pytester.makepyfile(test_golden=GOLDEN_FILE)
    pytester.makeini("[pytest]\nptx_golden_dir = goldens/ptx\n")
    pytester.runpytest_inprocess("--ptx-golden-update", "-k", "test_ptx").assert_outcomes(passed=1, deselected=1)
    assert (pytester.path / "goldens" / "ptx" / "k.ptx").exists()


# --- --sanitize ----------------------------------------------------------------------------------

# The stand-in compute-sanitizer: records its arguments and environment, writes one log per "process" with
# FAKE_ERRORS errors, prints what pytest would (FAKE_OUT) and exits FAKE_RC; it runs nothing.
FAKE_CS = r"""#!/usr/bin/env bash
log=
for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = --log-file ]; then j=$((i + 1)); log=${!j//%p/$$}; fi
done
echo "$* | SANITIZER=$PTXDSL_SANITIZER CHILD=$PTXDSL_SANITIZE_CHILD LINE_INFO=$PTXDSL_LINE_INFO" >> "$FAKE_CALLS"
n=${FAKE_ERRORS:-0}
echo "========= ERROR SUMMARY: $n errors" > "$log"
[ "$n" = 0 ] || echo "=========     at transpose_f32_32+0x1d0 in /x/examples/user_kernel.py:58" >> "$log"
printf '%b\n' "${FAKE_OUT:-1 passed in 0.01s}"
exit ${FAKE_RC:-0}
"""


@pytest.fixture
def fake_sanitizer(pytester, monkeypatch, a_gpu):
    path = pytester.path / "fake-cs"
    path.write_text(FAKE_CS)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    calls = pytester.path / "calls"
    calls.write_text("")
    monkeypatch.setenv("COMPUTE_SANITIZER", str(path))
    monkeypatch.setenv("FAKE_CALLS", str(calls))
    monkeypatch.delenv(sanitize.CHILD_ENV, raising=False)
    pytester.makepyfile(test_kernels=GPU_FILE)
    return lambda: calls.read_text().splitlines()


def test_sanitize_runs_each_gpu_test_in_a_child_under_each_tool(pytester, fake_sanitizer):
    res = pytester.runpytest_inprocess("--sanitize=memcheck,racecheck")
    res.assert_outcomes(passed=2)
    calls = fake_sanitizer()
    assert len(calls) == 2                           # the host test ran here, the gpu one under each tool
    memcheck, racecheck = calls
    assert memcheck.startswith("--tool memcheck --report-api-errors no --target-processes all")
    assert racecheck.startswith("--tool racecheck --target-processes all")
    for call in calls:
        assert " -m pytest test_kernels.py::test_on_the_device -p no:cacheprovider -p ptxdsl.testing.plugin" in call
        assert "CHILD=" + call.split("--tool ")[1].split()[0] in call and "LINE_INFO=1" in call
    assert "SANITIZER=memcheck" in memcheck and "SANITIZER=racecheck" in racecheck


def test_a_reported_error_fails_the_test_naming_the_kernel_line(pytester, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_ERRORS", "3")
    res = pytester.runpytest_inprocess("--sanitize=synccheck")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*compute-sanitizer synccheck reported 3 errors at user_kernel.py:58*"])


def test_a_test_failing_in_the_child_fails(pytester, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_OUT", "E   assert 1 == 2\n1 failed in 0.02s")
    monkeypatch.setenv("FAKE_RC", "1")
    res = pytester.runpytest_inprocess("--sanitize=memcheck")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*the test failed under compute-sanitizer memcheck (pytest exit 1*", "*assert 1 == 2*"])


def test_a_test_skipped_in_the_child_is_skipped_with_its_reason(pytester, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_OUT", "SKIPPED [1] test_kernels.py:4: traps on purpose\n1 skipped in 0.01s")
    res = pytester.runpytest_inprocess("--sanitize=racecheck", "-rs")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["*under compute-sanitizer: traps on purpose*"])


def test_sanitize_refuses_an_unknown_tool_and_a_missing_sanitizer(pytester, fake_sanitizer, monkeypatch):
    res = pytester.runpytest_inprocess("--sanitize=memchek")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--sanitize='memchek': expected one or more of memcheck, racecheck, synccheck*"])
    monkeypatch.setattr(sanitize, "find", lambda: None)
    res = pytester.runpytest_inprocess("--sanitize=memcheck")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*compute-sanitizer not found (set COMPUTE_SANITIZER*"])


def test_sanitizer_logs_are_counted_like_gpu_sanitize_sh():
    log = ("========= ERROR SUMMARY: 2 errors\n"
           "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n"
           "=========     at k+0x40 in /a/b/test_debug_gpu.py:41\n"
           "=========     at k+0x80 in /a/b/kern.ptxd:7\n"
           "=========         Host Frame: launch in launch.py:250\n"
           "========= ERROR SUMMARY: 99 errors were not printed. Use --print-limit option\n")
    assert sanitize.errors_in(log) == 5 and sanitize.errors_in("nothing") is None
    assert sanitize.kernel_lines(log) == ["test_debug_gpu.py:41", "kern.ptxd:7"]


# --- pytest-xdist: one worker per GPU ------------------------------------------------------------

def test_auto_workers_are_one_per_gpu_from_two_on(monkeypatch):
    monkeypatch.setattr(devices, "visible", lambda: ("0", "1", "2"))
    assert plugin.pytest_xdist_auto_num_workers(None) == 3
    monkeypatch.setattr(devices, "visible", lambda: ("0",))
    assert plugin.pytest_xdist_auto_num_workers(None) is None


def test_workers_get_the_gpus_in_turn(monkeypatch):
    monkeypatch.setattr(devices, "visible", lambda: ("4", "GPU-5f2a"))
    given = []
    for n in range(4):
        node = types.SimpleNamespace(workerinput={"workerid": f"gw{n}"})
        plugin.pytest_configure_node(node)
        given.append(node.workerinput["ptxdsl_device"])
    assert given == ["4", "GPU-5f2a", "4", "GPU-5f2a"]
    monkeypatch.setattr(devices, "visible", lambda: ("0",))
    node = types.SimpleNamespace(workerinput={"workerid": "gw0"})
    plugin.pytest_configure_node(node)
    assert "ptxdsl_device" not in node.workerinput          # one GPU: nothing changes


def test_a_worker_sets_cuda_visible_devices_before_its_tests(pytester, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    pytester.makeconftest("""
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    config.workerinput = {"workerid": "gw1", "ptxdsl_device": "1"}
    config.workeroutput = {}
""")
    pytester.makepyfile("import os\n\ndef test_sees_one():\n    assert os.environ['CUDA_VISIBLE_DEVICES'] == '1'\n")
    pytester.runpytest_inprocess().assert_outcomes(passed=1)


def test_worker_ids():
    assert devices.worker_index("gw12") == 12 and devices.device_for("gw3", ("a", "b")) == "b"
    with pytest.raises(ValueError, match="gw<N>"):
        devices.worker_index("master")


# --- reports -------------------------------------------------------------------------------------

REPORT_FILE = """
import os
import pytest
from ptxdsl.testing import Report

REPORT = Report("demo", summary_json=os.path.join(os.environ["SUMMARY_DIR"], "demo.json"), meta={"seed": 5})

@pytest.mark.parametrize("n", range(6))
def test_case(n):
    REPORT.ran(("case", n % 4))
    if n == 3:
        REPORT.mismatch(("case", 3), [("wrong", {})])
"""


@pytest.mark.parametrize("workers", [None, "2"])
def test_reports_print_one_summary_summed_over_xdist_workers(pytester, monkeypatch, workers):
    if workers:
        pytest.importorskip("xdist", reason="pytest-xdist is in the testing extra: pip install -e '.[test,testing]'")
    monkeypatch.setenv("SUMMARY_DIR", str(pytester.path))
    pytester.makepyfile(test_report=REPORT_FILE)
    args = ["-p", "ptxdsl.testing.plugin"] + (["-n", workers] if workers else [])
    res = pytester.runpytest_subprocess(*args)
    res.assert_outcomes(passed=6)
    over = " over 2 workers" if workers else ""
    res.stdout.fnmatch_lines([f"demo: 6 cases run (4 distinct), 1 mismatching (wrong: 1), seed=5{over}"])
    summary = json.loads((pytester.path / "demo.json").read_text())
    assert (summary["cases_run"], summary["distinct"], summary["mismatching"]) == (6, 4, 1)
    assert summary["workers"] == (2 if workers else 1)


def test_the_plugin_is_installed_under_its_module_name():
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    if "ptxdsl.testing.plugin" not in names:
        pytest.skip("ptxdsl is not pip-installed here (tests/conftest.py loads the plugin itself)")
    assert names["ptxdsl.testing.plugin"] == "ptxdsl.testing.plugin"
    assert os.environ.get("PTXDSL_DIFF_SEED")              # tests/conftest.py drew the session's seed


@pytest.mark.gpu
def test_an_xdist_worker_sees_only_its_gpu(request):
    """Run with -n auto on a machine with several GPUs: the worker this test lands on sees its one GPU."""
    device = getattr(request.config, "workerinput", {}).get("ptxdsl_device")
    if device is None:
        pytest.skip("not a pytest-xdist worker given a GPU (run with -n auto on a machine with several GPUs)")
    from cuda.bindings import driver

    from ptxdsl.runtime.driver import driver_available

    assert driver_available() and os.environ["CUDA_VISIBLE_DEVICES"] == device
    err, count = driver.cuDeviceGetCount()
    assert err == driver.CUresult.CUDA_SUCCESS and count == 1
