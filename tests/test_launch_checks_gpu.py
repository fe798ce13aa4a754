"""Launch checks and debug-mode device checks on the GPU, with a load kernel whose innermost coordinate and
expect_tx bytes are kernel parameters (nothing the build can check):

- a misaligned coordinate and a wrong byte count each raise LaunchError before the launch
  (ptxdsl.verify.check_launch), and the same process then runs the kernel with good arguments, bit-exact;
- through the launcher, `prog["param_copy"](...)` raises the same LaunchError (the launcher runs the launch
  checks before the driver sees the launch) and the process's context stays usable;
- with the launch checks off (PTXDSL_LAUNCH_CHECKS=0) and debug=True, each traps on the device before the
  TMA instruction and the launch raises KernelTrap naming the line and the values;
- a trap kills its CUDA context, so every case runs in a process of its own (python tests/
  test_launch_checks_gpu.py CASE prints the outcome as JSON), and the test after them runs in this process.
"""
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptxdsl as px
from ptxdsl.reference import tx_bytes

ROWS, COLS, TILE, THREADS = 128, 256, 64, 128
SPEC = px.TensorMapSpec.tiled_for((ROWS, COLS), "bf16", (TILE, TILE))
BOX = tx_bytes(SPEC)                                    # 8192
HERE = Path(__file__).resolve()
SANITIZER = os.environ.get("PTXDSL_SANITIZER", "")
CHILD_TIMEOUT_S = 120


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def param_copy(debug=False):
    """Thread 0 loads the 64x64 bf16 box at (x, y) of `src` expecting `tx` bytes; every thread waits, then
    copies the tile to the same place of `out` with 16-byte stores."""
    with px.kernel("param_copy", reqntid=THREADS, debug=debug) as k:
        src = k.param_tensormap("src", SPEC)
        out = k.param_ptr("out")
        x, y, tx = k.param("x", px.u32), k.param("y", px.u32), k.param("tx", px.u32)
        tile = k.shared("tile", BOX, align=128)
        bar = k.mbarrier("bar")
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, tx, sem="release", scope="cta")  # TX
            k.cp_async_bulk_tensor(tile, src, (x, y), mbar=bar)  # LOAD
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
        base = k.mov(tile)
        with k.loop(0, BOX // 16 // THREADS) as i:
            chunk = k.mad(i, THREADS, tid)
            vals = k.ld(px.b32, k.add(base, k.shl(chunk, 4)), space="shared::cta", vec=4)
            row, col = k.shr(chunk, 3), k.and_(chunk, 7)
            byte = k.mad(k.add(y, row), COLS * 2, k.add(k.shl(x, 1), k.shl(col, 4)))
            k.st(px.b32, k.add(out, k.cvt(px.u64, byte)), vals)
    return k


def _source():
    import ml_dtypes

    return np.random.default_rng(11).standard_normal((ROWS, COLS), dtype=np.float32).astype(ml_dtypes.bfloat16)


def run_copy(prog, x, y, tx):
    """Launch through the launcher; (the source, what `out` holds)."""
    from ptxdsl.runtime import DeviceArray

    a = _source()
    src, out = DeviceArray.to_device(a), DeviceArray.to_device(np.zeros_like(a))
    prog["param_copy"](px.TensorMapSpec.from_array(src, (TILE, TILE)), out, x, y, tx, grid=1, block=THREADS,
                       sync=True)
    return a, out.to_host()


def copied_exactly(a, got, x, y) -> bool:
    box = (slice(y, y + TILE), slice(x, x + TILE))
    return got[box].view(np.uint16).tobytes() == a[box].view(np.uint16).tobytes()


# ------------------------------------------------------------------------------ the child processes' cases

def case_check_launch(x, tx):
    """check_launch refuses the arguments; then the same process runs the kernel with good ones."""
    from ptxdsl.verify import check_launch

    k = param_copy()
    prog = px.compile(k)
    out = {}
    try:
        check_launch(k, (SPEC, 0, x, 0, tx), grid=1, block=THREADS)
        out["error"] = None
    except px.LaunchError as e:
        out.update(error="LaunchError", rule=e.rule, file=e.loc.file, line=e.loc.line, message=str(e))
    a, got = run_copy(prog, 8, 0, BOX)
    out["then_exact"] = copied_exactly(a, got, 8, 0)
    return out


def case_launcher(x, tx):
    """The launcher itself refuses the arguments (once it calls check_launch); then good ones run."""
    prog = px.compile(param_copy())
    out = {}
    try:
        run_copy(prog, x, 0, tx)
        out["error"] = None
    except px.LaunchError as e:
        out.update(error="LaunchError", rule=e.rule, line=e.loc.line, message=str(e))
    except px.PtxdslError as e:                          # the launch went through: its context is gone
        out.update(error=type(e).__name__, message=str(e))
        return out
    a, got = run_copy(prog, 8, 0, BOX)
    out["then_exact"] = copied_exactly(a, got, 8, 0)
    return out


def case_trap(x, tx):
    """Launch checks off, debug=True: the device check traps before the TMA instruction."""
    os.environ["PTXDSL_LAUNCH_CHECKS"] = "0"
    prog = px.compile(param_copy(debug=True))
    try:
        run_copy(prog, x, 0, tx)
    except px.KernelTrap as e:
        return {"error": "KernelTrap", "rule": e.rule, "file": e.loc.file, "line": e.loc.line, "message": str(e)}
    except px.PtxdslError as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"error": None}


CASES = {"check_coord": (case_check_launch, 4, BOX), "check_tx": (case_check_launch, 8, BOX + 16),
         "launcher_coord": (case_launcher, 4, BOX), "launcher_tx": (case_launcher, 8, BOX + 16),
         "trap_coord": (case_trap, 4, BOX), "trap_tx": (case_trap, 8, BOX + 16),
         "trap_tx_short": (case_trap, 8, BOX - 16)}


def in_child(case: str) -> dict:
    try:
        proc = subprocess.run([sys.executable, str(HERE), case], capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S, cwd=str(HERE.parent.parent))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{case}: no answer within {CHILD_TIMEOUT_S} s (a hang the watchdog should have caught)\n"
                    f"{e.stdout}\n{e.stderr}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"{case}: the child printed no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


# ------------------------------------------------------------------------------------------------- tests

@pytest.mark.gpu
@pytest.mark.parametrize("case, rule, marker, value", [("check_coord", "coord-align", "# LOAD", "x=4"),
                                                       ("check_tx", "expect-tx-mismatch", "# TX", f"tx={BOX + 16}")])
def test_check_launch_refuses_before_the_launch_and_the_context_stays_usable(case, rule, marker, value):
    r = in_child(case)
    assert r["error"] == "LaunchError" and r["rule"] == rule, r
    assert r["file"] == str(HERE) and r["line"] == marked_line(param_copy, marker), r
    assert f"launched with {value}" in r["message"] and f"test_launch_checks_gpu.py:{r['line']}: {rule}:" in \
        r["message"], r
    assert r["then_exact"] is True, r


@pytest.mark.gpu
@pytest.mark.parametrize("case, rule, marker", [("launcher_coord", "coord-align", "# LOAD"),
                                                ("launcher_tx", "expect-tx-mismatch", "# TX")])
def test_the_launcher_refuses_before_the_launch(case, rule, marker):
    """The launcher runs ptxdsl.verify's launch checks with the launch's arguments before the driver sees it."""
    r = in_child(case)
    assert r["error"] == "LaunchError" and r["rule"] == rule and r["line"] == marked_line(param_copy, marker), r
    assert r["then_exact"] is True, r


@pytest.mark.gpu
@pytest.mark.skipif(bool(SANITIZER), reason="the device checks trap on purpose; a sanitizer counts that as an error")
@pytest.mark.parametrize("case, rule, marker, words", [
    ("trap_coord", "debug-coord-align", "# LOAD", ["innermost coordinate is 4", "multiple of 8"]),
    ("trap_tx", "debug-expect-tx", "# TX", [f"expect_tx arms {BOX + 16} transaction bytes", f"deliver {BOX}"]),
    ("trap_tx_short", "debug-expect-tx", "# TX", [f"expect_tx arms {BOX - 16} transaction bytes",
                                                  "before the data lands"])])
def test_debug_mode_traps_before_the_tma_instruction_naming_the_line_and_the_values(case, rule, marker, words):
    r = in_child(case)
    assert r["error"] == "KernelTrap" and r["rule"] == rule, r
    assert r["file"] == str(HERE) and r["line"] == marked_line(param_copy, marker), r
    for w in words:
        assert w in r["message"], r


@pytest.mark.gpu
@pytest.mark.parametrize("debug", [False, True])
def test_good_arguments_copy_exactly_in_this_process_after_the_children(debug):
    """The cases above ran in their own processes: this process's context is untouched, and the kernel with
    good arguments (debug checks on or off) copies bit for bit."""
    prog = px.compile(param_copy(debug=debug))
    for x, y in ((0, 0), (8, 64), (192, 64)):
        a, got = run_copy(prog, x, y, BOX)
        assert copied_exactly(a, got, x, y), (x, y)


if __name__ == "__main__":
    fn, x, tx = CASES[sys.argv[1]]
    print(json.dumps(fn(x, tx)))
