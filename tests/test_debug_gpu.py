"""Debug mode and compute-sanitizer on the device.

- A tile copy whose expect_tx is 16 bytes too many hangs on its wait; with debug=True it raises KernelTrap
  naming the waiting line within a second (run in a subprocess: a trap kills the CUDA context). The
  same kernel with the right count matches numpy bit for bit, with and without debug mode.
- Planted bugs for tests/gpu_sanitize.sh: each runs only when PTXDSL_SANITIZER names the tool that sees
  it, and the static verifier must reject the same kernel without its allow() (checked on any machine).
"""
import contextlib
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.reference import tx_bytes
from ptxdsl.verify import check

ROWS, COLS, TILE, THREADS = 128, 256, 64, 128
SPEC = px.TensorMapSpec.tiled_for((ROWS, COLS), "bf16", (TILE, TILE))
BOX = tx_bytes(SPEC)                                    # 8192
SANITIZER = os.environ.get("PTXDSL_SANITIZER", "")
HERE = Path(__file__).resolve()


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def tile_copy(extra_tx=0, debug=True):
    """Thread 0 loads this CTA's 64x64 bf16 tile with TMA (expecting BOX + extra_tx bytes); every
    thread waits, then copies the tile to `out` (same layout as the source) with 16-byte stores."""
    with px.kernel("tile_copy", reqntid=THREADS, debug=debug) as k:
        src = k.param_tensormap("src", SPEC)
        out = k.param_ptr("out")
        tile = k.shared("tile", BOX, align=128)
        bar = k.mbarrier("bar")
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        x = k.mul(k.mov(sreg.ctaid_x), TILE)
        y = k.mul(k.mov(sreg.ctaid_y), TILE)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            with k.allow("expect-tx-mismatch"):
                k.mbarrier_arrive_expect_tx(bar, BOX + extra_tx, sem="release", scope="cta")
            k.cp_async_bulk_tensor(tile, src, (x, y), mbar=bar)
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")  # WAIT
        base = k.mov(tile)
        with k.loop(0, BOX // 16 // THREADS) as i:
            chunk = k.mad(i, THREADS, tid)
            vals = k.ld(px.b32, k.add(base, k.shl(chunk, 4)), space="shared::cta", vec=4)
            row, col = k.shr(chunk, 3), k.and_(chunk, 7)
            byte = k.mad(k.add(y, row), COLS * 2, k.add(k.shl(x, 1), k.shl(col, 4)))
            k.st(px.b32, k.add(out, k.cvt(px.u64, byte)), vals)
    return k


def run_tile_copy(extra_tx, debug, line_info=None):
    """(the source matrix, what the kernel wrote); the launch's seconds go to run_tile_copy.launch_s and
    the loaded PTX to run_tile_copy.ptx."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    a = np.random.default_rng(5).standard_normal((ROWS, COLS), dtype=np.float32).astype(ml_dtypes.bfloat16)
    prog = px.compile(tile_copy(extra_tx, debug), line_info=line_info)
    run_tile_copy.ptx = prog.text
    src, out = DeviceArray.to_device(a), DeviceArray.to_device(np.zeros_like(a))
    spec = px.TensorMapSpec.from_array(src, (TILE, TILE))
    t0 = time.perf_counter()
    try:
        prog["tile_copy"](spec, out, grid=(COLS // TILE, ROWS // TILE), block=THREADS)
    finally:
        run_tile_copy.launch_s = time.perf_counter() - t0
    return a, out.to_host()


def child_trap():
    """Run the miscounted kernel in debug mode; print what happened as JSON (the subprocess's job)."""
    try:
        run_tile_copy(16, True)
    except px.KernelTrap as e:
        print(json.dumps({"error": "KernelTrap", "rule": e.rule, "file": e.loc.file, "line": e.loc.line,
                          "message": str(e), "elapsed": run_tile_copy.launch_s}))
        return
    except Exception as e:                  # noqa: BLE001  (reported to the parent, which fails)
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return
    print(json.dumps({"error": None}))


def ring_overrun(allow=True):
    """A 2-slot ring filled once (two tiles), then waited on three times: the third wait is for a phase
    nothing arms. The verifier's run of thread 0 reports it (wait-never-armed); in debug mode the GPU traps
    there instead of hanging."""
    with px.kernel("ring_overrun", reqntid=THREADS, debug=True) as k:
        src = k.param_tensormap("src", SPEC)
        ring = k.shared("ring", 2 * BOX, align=128)
        full = k.mbarrier("full", 2)
        t0 = k.setp("eq", k.tid_x(), 0)
        with k.if_(t0):
            for s in range(2):
                k.mbarrier_init(full.at(8 * s), 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            for s in range(2):
                k.mbarrier_arrive_expect_tx(full.at(8 * s), BOX)
                k.cp_async_bulk_tensor(ring.at(s * BOX), src, (0, TILE * s), mbar=full.at(8 * s))
        stage, phase = k.mov(0, px.u32), k.mov(0, px.u32)
        with k.loop(0, 3):
            with k.allow(*(["wait-never-armed"] if allow else [])):
                k.mbarrier_wait(k.mad(stage, 8, k.mov(full)), parity=phase, sem="acquire", scope="cta")  # WAIT
            k.add(stage, 1, out=stage)
            with k.if_(k.setp("eq", stage, 2)):
                k.mov(0, px.u32, out=stage)
                k.xor(phase, 1, out=phase)
    return k


def child_ring_trap():
    """Run ring_overrun in debug mode; print what happened as JSON."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    src = DeviceArray.to_device(np.zeros((ROWS, COLS), ml_dtypes.bfloat16))
    try:
        px.compile(ring_overrun())["ring_overrun"](px.TensorMapSpec.from_array(src, (TILE, TILE)), grid=1,
                                                    block=THREADS)
    except px.KernelTrap as e:
        print(json.dumps({"error": "KernelTrap", "rule": e.rule, "line": e.loc.line, "message": str(e)}))
        return
    except Exception as e:                  # noqa: BLE001  (reported to the parent, which fails)
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return
    print(json.dumps({"error": None}))


def in_subprocess(func: str, timeout: int = 120) -> dict:
    code = (f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); import {HERE.stem} as t; t.{func}()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=str(HERE.parent.parent))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"the child printed no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])


@pytest.mark.gpu
@pytest.mark.skipif(bool(SANITIZER), reason="the watchdog traps on purpose; a sanitizer counts that as an error")
def test_wrong_expect_tx_traps_naming_the_wait_line_within_a_second():
    t0 = time.perf_counter()
    r = in_subprocess("child_trap")
    wall = time.perf_counter() - t0
    assert r["error"] == "KernelTrap", r
    assert r["rule"] == "debug-watchdog" and r["file"] == str(HERE) and r["line"] == marked_line(tile_copy, "# WAIT")
    assert f"test_debug_gpu.py:{r['line']}: debug-watchdog:" in r["message"]
    assert "mbarrier 'bar' for phase parity 0" in r["message"]
    assert r["elapsed"] < 1.0, r                # the launch returns after 0.2 s of spinning, not never
    print(f"KernelTrap after {r['elapsed']:.3f} s (child process {wall:.1f} s): {r['message']}")


def test_ring_overrun_is_found_statically():
    with pytest.raises(px.VerifyError) as info:
        ring_overrun(allow=False)
    assert info.value.rule == "wait-never-armed" and info.value.loc.line == marked_line(ring_overrun, "# WAIT")
    # a debug-mode trap names the barrier array of a slot picked at run time
    (site,) = px.emit(ring_overrun()).kernels["ring_overrun"].wait_sites
    assert site[0].line == marked_line(ring_overrun, "# WAIT") and site[1] == "full[?]"


@pytest.mark.gpu
@pytest.mark.skipif(bool(SANITIZER), reason="the watchdog traps on purpose; a sanitizer counts that as an error")
def test_ring_overrun_traps_at_the_line_the_verifier_names():
    r = in_subprocess("child_ring_trap")
    assert r["error"] == "KernelTrap", r
    assert r["rule"] == "debug-watchdog" and r["line"] == marked_line(ring_overrun, "# WAIT"), r
    assert "mbarrier 'full[?]' for phase parity 1" in r["message"], r      # slot 0, its second phase


@pytest.mark.gpu
@pytest.mark.parametrize("debug, line_info", [(True, False), (False, False), (False, True)])
def test_right_expect_tx_matches_numpy(debug, line_info):
    a, got = run_tile_copy(0, debug, line_info)
    assert got.view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
    assert (f'.file 1 "{HERE}"' in run_tile_copy.ptx) == line_info, run_tile_copy.ptx[:400]


# ------------------------------------------------------------------------------------- planted bugs

def planted_phase_race(allow=True):
    """A barrier of count 2. Thread 0 publishes a value through phase 0 (one arrive of count 2); then it
    rewrites the buffer and arrives once for phase 1, which stays pending, and everyone waits on parity 0
    again: that phase completed long ago, so the wait returns at once and the reads race with thread 0's
    store. (No wait ever spins: phase 0 is complete before anyone waits on it, and phase 1 never
    completes, so the wrong wait cannot turn into a hang on phase 2.)"""
    with px.kernel("planted_phase_race", reqntid=64) as k:
        out = k.param_ptr("out")
        buf = k.shared("buf", 16)
        bar = k.mbarrier("bar")
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        with k.if_(t0):
            k.mbarrier_init(bar, 2)
            k.fence_mbarrier_init()
            k.st(px.u32, buf, 1, space="shared::cta")
            k.mbarrier_arrive(bar, 2, sem="release", scope="cta")
        k.bar_sync(0)
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
        first = k.ld(px.u32, buf, space="shared::cta")
        k.bar_sync(0)
        with k.if_(t0):
            k.st(px.u32, buf, 2, space="shared::cta")
            k.mbarrier_arrive(bar, sem="release", scope="cta")
        with k.allow(*(["phase-reuse"] if allow else [])):
            k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")  # BAD
        second = k.ld(px.u32, buf, space="shared::cta")
        k.st(px.u32, k.add(out, k.mul(tid, 4, mode="wide")), k.add(first, second))
    return k


def planted_tma_race(allow=True):
    """Every thread stores into the tile while thread 0's TMA load into it may be in flight."""
    with px.kernel("planted_tma_race", reqntid=THREADS) as k:
        src = k.param_tensormap("src", SPEC)
        tile = k.shared("tile", BOX, align=128)
        bar = k.mbarrier("bar")
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, BOX, sem="release", scope="cta")
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        with k.allow(*(["tma-load-race"] if allow else [])):
            k.st(px.u32, k.add(k.mov(tile), k.shl(tid, 6)), tid, space="shared::cta")  # BAD
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
    return k


def planted_divergent_bar(allow=True):
    """Half the lanes of the only warp run bar.sync (an aligned barrier in divergent code)."""
    with px.kernel("planted_divergent_bar", reqntid=32) as k:
        out = k.param_ptr("out")
        lane = k.mov(sreg.laneid)
        with k.if_(k.setp("lt", lane, 16)):
            with k.allow(*(["sync-aligned-divergent"] if allow else [])):
                k.bar_sync(0)  # BAD
        k.st(px.u32, k.add(out, k.mul(lane, 4, mode="wide")), lane)
    return k


PLANTED = [(planted_phase_race, "phase-reuse"), (planted_tma_race, "tma-load-race"),
           (planted_divergent_bar, "sync-aligned-divergent")]


@pytest.mark.parametrize("build, rule", PLANTED, ids=[p[0].__name__ for p in PLANTED])
def test_planted_bugs_are_rejected_statically(build, rule):
    with pytest.raises(px.VerifyError) as info:
        build(allow=False)
    assert info.value.rule == rule and info.value.loc.line == marked_line(build, "# BAD")
    assert check(build(allow=True).kernel) == []


def launch_planted(build, *args, **kw):
    """Launch a planted bug under the sanitizer, which judges it, and wait for it (launches are asynchronous: the
    test must not end before the kernel ran); a launch the tool aborts is expected."""
    with contextlib.suppress(px.CudaError):
        px.compile(build())[build().kernel.name](*args, sync=True, **kw)


@pytest.mark.gpu
@pytest.mark.skipif(SANITIZER != "racecheck", reason="planted bug: runs only under compute-sanitizer racecheck")
def test_planted_phase_race_under_racecheck():
    from ptxdsl.runtime import DeviceArray

    launch_planted(planted_phase_race, DeviceArray.zeros(64, np.uint32), grid=1, block=64)


@pytest.mark.gpu
@pytest.mark.skipif(SANITIZER != "racecheck", reason="planted bug: runs only under compute-sanitizer racecheck")
def test_planted_tma_race_under_racecheck():
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    src = DeviceArray.to_device(np.ones((ROWS, COLS), ml_dtypes.bfloat16))
    launch_planted(planted_tma_race, px.TensorMapSpec.from_array(src, (TILE, TILE)), grid=1, block=THREADS)


@pytest.mark.gpu
@pytest.mark.skipif(SANITIZER != "synccheck", reason="planted bug: runs only under compute-sanitizer synccheck")
def test_planted_divergent_bar_under_synccheck():
    from ptxdsl.runtime import DeviceArray

    launch_planted(planted_divergent_bar, DeviceArray.zeros(32, np.uint32), grid=1, block=32)
