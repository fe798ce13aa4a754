"""examples/test_user_kernel.py (a user's kernel and its property tests) run as a user runs them: pytest with
the ptxdsl plugin, in a child process. On the CPU its golden, assembly and model tests pass and its GPU test
skips with the reason; on a GPU that test passes, and with an off-by-one planted in the kernel Hypothesis
finds it, shrinks it and prints the shrunk case as code that fails again when run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl.testing import snippet
from ptxdsl.testing.plugin import gpu_unavailable_reason

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "test_user_kernel.py"
TIMEOUT_S = 900


def run_pytest(*args, cwd=ROOT, **env):
    """pytest in a child process with the plugin loaded as a user's installed ptxdsl loads it (-p also makes it
    work from a checkout that is not installed); (exit status, output)."""
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env)
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "ptxdsl.testing.plugin", "-p", "no:cacheprovider",
                          "-q", "-rs", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=TIMEOUT_S,
                         check=False)
    return res.returncode, res.stdout + res.stderr


def test_the_example_tests_run_under_the_plugin():
    """What CI runs of the example: the golden, assembly and model properties; the GPU test is skipped with the
    reason on a machine without a GPU and passes on one."""
    rc, out = run_pytest(str(EXAMPLE))
    assert rc == 0, out
    if gpu_unavailable_reason() is None:
        assert "5 passed" in out, out
    else:
        assert "3 passed, 2 skipped" in out and "SKIPPED [1] examples/test_user_kernel.py" in out, out
        assert "no CUDA device: " in out, out


PLANTED_CPU = '''
from dataclasses import dataclass

@dataclass(frozen=True)
class Window:
    start: int = 0
    width: int = 16

def check_window(window, off_by=0):
    """A stand-in for a GPU check: the last element a window reaches, computed with a planted off-by-one."""
    last = window.start + window.width - 1 + off_by
    assert last < 64 or window.start + window.width > 64, f"wrote element {last} past 63"
'''

PLANTED_CPU_TEST = '''
from hypothesis import given, settings, strategies as st
from ptxdsl.testing import reproducible
from windows import Window, check_window

@settings(database=None, max_examples=300)
@given(st.builds(Window, start=st.integers(0, 64), width=st.sampled_from((16, 32, 48))))
def test_window(window):
    reproducible(check_window, window, off_by=1)
'''


def _snippet(output: str) -> str:
    """The reproducer at the end of a failure, without pytest's 'E   ' prefixes."""
    lines = [re.sub(r"^E {7}", "", line) for line in output.splitlines()]
    start = max(i for i, line in enumerate(lines) if line.startswith("# reproduce (from "))
    end = start + 1
    while end < len(lines) and not re.match(r"^\w+\(", lines[end - 1]):
        end += 1
    return "\n".join(lines[start:end])


def test_a_failing_property_prints_its_shrunk_case_as_code_that_fails_again(tmp_path):
    """The planted-bug demo on the CPU: Hypothesis finds the off-by-one, shrinks the case, and the snippet it
    prints, run alone, fails the same way."""
    (tmp_path / "windows.py").write_text(PLANTED_CPU)
    (tmp_path / "test_windows.py").write_text(PLANTED_CPU_TEST)
    rc, out = run_pytest("test_windows.py", cwd=tmp_path)
    assert rc == 1 and "wrote element 64 past 63" in out, out
    code = _snippet(out)
    assert code.splitlines()[1:3] == ["import sys; sys.path.insert(0, '.')", "from windows import Window, check_window"]
    assert re.fullmatch(r"check_window\(Window\((start=\d+)?(, )?(width=\d+)?\), off_by=1\)", code.splitlines()[3]), code
    again = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert again.returncode == 1 and "AssertionError: wrote element 64 past 63" in again.stderr


def test_the_examples_snippet_calls_the_check_with_the_same_case(monkeypatch):
    """The snippet of the GPU check, run in a fresh interpreter from the repository root, imports the example
    and calls check_transpose with an equal case (check_transpose itself replaced: it needs a GPU)."""
    from user_kernel import TransposeCase, check_transpose

    monkeypatch.chdir(ROOT)
    code = snippet(check_transpose, TransposeCase(dtype="u8", rows=3), row_offset=1)
    assert code.splitlines()[1:] == ["import sys; sys.path.insert(0, 'examples')",
                                     "from user_kernel import TransposeCase, check_transpose",
                                     "check_transpose(TransposeCase(dtype='u8', rows=3), row_offset=1)"]
    shim = ("import sys; sys.path.insert(0, 'examples')\n"
            "import user_kernel\n"
            "user_kernel.check_transpose = lambda case, row_offset=0: print(repr(case), row_offset)\n"
            "exec(sys.stdin.read())\n")
    res = subprocess.run([sys.executable, "-c", shim], input=code, cwd=ROOT, capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.stdout.strip() == "TransposeCase(dtype='u8', rows=3, cols=1, tile=32, seed=0) 1"


@pytest.mark.gpu
def test_the_examples_gpu_property_passes():
    """The random-shape property (under tests/gpu_sanitize.sh, where every process is sanitized: the fixed case)."""
    rc, out = run_pytest(str(EXAMPLE), "-k", "fixed_case" if os.environ.get("PTXDSL_SANITIZER") else "gpu_result")
    assert rc == 0 and "1 passed" in out, out


@pytest.mark.gpu
def test_planted_off_by_one_is_found_shrunk_and_printed_as_code(tmp_path):
    """PTXDSL_EXAMPLE_PLANT=1 moves the kernel's store one row down. The GPU property fails, Hypothesis shrinks
    the case, and the printed snippet, run alone from the same folder, fails with the same mismatch. (Run from
    an empty folder, so no example database remembers the failure; the output goes to $OUT/planted-bug.txt.)"""
    rc, out = run_pytest(str(EXAMPLE), "-k", "gpu_result", cwd=tmp_path, PTXDSL_EXAMPLE_PLANT="1")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "planted-bug.txt").write_text(out)
    assert rc == 1 and "1 failed" in out, out
    assert "differs in" in out and "transpose " in out, out
    code = _snippet(out)
    call = code.splitlines()[-1]
    assert call.startswith("check_transpose(TransposeCase(") and call.endswith(", row_offset=1)"), code
    again = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                           timeout=TIMEOUT_S, check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "planted-bug-snippet.txt").write_text(code + "\n\n" + again.stderr)
    assert again.returncode == 1 and "MemoryMismatch" in again.stderr and "differs in" in again.stderr, again.stderr


@pytest.mark.gpu
def test_sanitize_runs_the_examples_gpu_test_under_memcheck_and_racecheck():
    """--sanitize runs the example's fixed GPU case in child processes under compute-sanitizer: clean."""
    from ptxdsl.testing import sanitize

    if os.environ.get("PTXDSL_SANITIZER"):
        pytest.skip("already under compute-sanitizer (tests/gpu_sanitize.sh): it does not nest")
    if sanitize.find() is None:
        pytest.skip("compute-sanitizer not found (set COMPUTE_SANITIZER)")
    rc, out = run_pytest(str(EXAMPLE), "-k", "fixed_case", "--sanitize=memcheck,racecheck")
    assert rc == 0 and "1 passed" in out, out
