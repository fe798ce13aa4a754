"""Flags between CTAs (ptxdsl.pipeline.Flags) and hand-written loops in debug mode.

- Flags.publish / Flags.wait spell st.release / ld.acquire at the flag's scope, in a loop closed by a branch
  back to its label;
- in a debug kernel every hand-written backward branch is bounded: past the timeout it records its number and
  traps; the trap names the branch's line (the Flags.wait call), the label and the timeout;
- on the GPU: CTA 1 waits for CTA 0's flag and then reads what CTA 0 wrote, launch after launch (a new epoch each),
  with and without debug mode; a flag nobody publishes is a KernelTrap naming the wait's line within a second.
"""
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
from ptxdsl.assembler import assemble
from ptxdsl.pipeline import Flags
from ptxdsl.runtime.watchdog import check_trap
from ptxdsl.verify import check

N = 256                                     # words handed from CTA 0 to CTA 1
HERE = Path(__file__).resolve()
SANITIZER = os.environ.get("PTXDSL_SANITIZER", "")


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def handoff(debug=False, publish=True, scope="gpu"):
    """CTA 0 writes mid = 3 * src, then (after bar.sync) its thread 0 publishes flag 0 with the epoch; CTA 1's
    thread 0 waits for the flag, and after bar.sync CTA 1 copies mid to out. publish=False: nobody publishes."""
    with px.kernel("handoff", reqntid=N, debug=debug) as k:
        src, mid, out = k.param_ptr("src"), k.param_ptr("mid"), k.param_ptr("out")
        flags = Flags(k, "flag", k.param_ptr("flags"), scope=scope)
        epoch = k.param("epoch", px.u32)
        tid = k.tid_x()
        off = k.mul(tid, 4, mode="wide")
        first = k.setp("eq", tid, 0)
        with k.if_(k.setp("eq", k.mov(sreg.ctaid_x), 0)):
            k.st(px.u32, k.add(mid, off), k.mul(k.ld(px.u32, k.add(src, off)), 3))
            k.bar_sync(0)
            if publish:
                with k.if_(first):
                    flags.publish(0, epoch)
        with k.else_():
            with k.if_(first):
                flags.wait(0, epoch)  # WAIT
            k.bar_sync(0)
            k.st(px.u32, k.add(out, off), k.ld(px.u32, k.add(mid, off)))
    return k


# ---------------------------------------------------------------------------------------------- CPU


@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
def test_flags_spell_release_and_acquire_at_their_scope(scope):
    text = px.emit(handoff(scope=scope)).text
    assert f"st.release.{scope}.global.u32 [" in text
    body = text[text.index("flag_wait1:"):]
    lines = [ln.strip() for ln in body.splitlines()[1:4]]
    assert lines[0].startswith(f"ld.acquire.{scope}.global.u32 ")
    assert lines[1].startswith("setp.ne.u32 ") and lines[2].endswith("bra flag_wait1;")
    assert "%globaltimer" not in text and "trap;" not in text            # not bounded outside debug mode
    assert assemble(text, "sm_90a").kernels["handoff"].registers > 0


def test_a_hand_written_loop_is_bounded_in_debug_mode():
    ptx = px.emit(handoff(debug=True))
    text = ptx.text
    start = text.index("flag_wait1:")
    loop = text[start:text.index("$L__loop_exit", text.index("trap;", start))]
    assert "ld.acquire.gpu.global.u32" in loop and "mov.u64 %rd" in loop and "%globaltimer" in loop
    assert "setp.lt.u64" in loop and "200000000" in loop and "bra flag_wait1;" in loop
    assert loop.rstrip().endswith("trap;")
    info = ptx.kernels["handoff"]
    (check,) = info.debug_checks
    assert check[1:] == ("loop", 200_000_000, "flag_wait1")
    assert check[0].file == str(HERE) and check[0].line == marked_line(handoff, "# WAIT")
    assert assemble(text, "sm_90a").kernels["handoff"].registers > 0
    # the loop's start register is cleared on the way into the label, so each entry times it afresh
    head = text[:text.index("flag_wait1:")].rstrip().splitlines()[-1].strip()
    assert head.startswith("mov.u64 %rd") and head.endswith(", 0;")


def test_a_debug_loop_trap_names_the_line_the_label_and_the_timeout():
    info = px.emit(handoff(debug=True)).kernels["handoff"]
    trap = check_trap(info, 1, 0)
    assert isinstance(trap, px.KernelTrap) and trap.rule == "debug-watchdog"
    assert trap.loc.line == marked_line(handoff, "# WAIT")
    assert "the loop back to label 'flag_wait1' went round for longer than 0.2 s" in str(trap)
    assert check_trap(info, 2, 0) is None                 # a number the kernel does not have


def test_debug_timeout_bounds_loops_too():
    k = handoff(debug=0.5)
    text = px.emit(k).text
    assert "500000000" in text and "200000000" not in text


def test_loops_the_builder_makes_are_not_bounded_twice():
    """k.loop counts; mbarrier_wait has its own watchdog: neither is a hand-written backward branch."""
    with px.kernel("counted", reqntid=32, debug=True) as k:
        out = k.param_ptr("out")
        acc = k.mov(0, px.u32)
        with k.loop(0, 8) as i:
            k.add(acc, i, out=acc)
        k.st(px.u32, out, acc)
    info = px.emit(k).kernels["counted"]
    assert info.debug_checks == [] and "trap;" not in px.emit(k).text


def test_the_ordered_split_accumulation_checks_and_assembles():
    sys.path.insert(0, str(HERE.parent.parent / "examples"))
    import pipe_splitsum as ps

    check(ps.ORDERED)
    text = px.emit(ps.ORDERED).text
    store, reduce = text.index("cp.async.bulk.tensor.2d.global.shared::cta"), text.index("cp.reduce.async.bulk")
    publish, wait = text.index("st.release.gpu.global.u32"), text.index("ld.acquire.gpu.global.u32")
    assert store < text.index("cp.async.bulk.wait_group 0;") < text.index("fence.proxy.async.global;") < publish
    assert wait < text.index("fence.proxy.async.global;", wait) < reduce
    for arch in ("sm_90a", "sm_100a"):
        assert assemble(px.emit(ps.ORDERED, arch=arch).text, arch).kernels["pipe_splitsum_ordered"].spill_stores == 0


def test_a_new_epoch_each_launch_does_not_run_the_launch_checks_again():
    """The run of the threads reads the parameters that decide its path (the splits per group, the groups, the
    tile count, the lag), not the flag's epoch, the flags' pointer or the tiles across (coordinates only): a
    launch that changes only the epoch is a dictionary lookup, not another run of about 10 ms."""
    sys.path.insert(0, str(HERE.parent.parent / "examples"))
    import pipe_splitsum as ps
    from ptxdsl.verify import check_launch, launch_plan

    info = px.emit(ps.ORDERED).kernels["pipe_splitsum_ordered"]
    plan = launch_plan(info)
    assert [plan.params[i].name for i in plan.reads] == ["x", "y", "splits_per_group", "groups", "ntiles", "lag"]
    runs = []
    original = plan._evaluate
    plan._evaluate = lambda *a: runs.append(a[1]) or original(*a)
    x, y = ps.spec(4096, 512), ps.spec(512, 512)
    ntiles = 512 // 32 * (512 // 128)
    for epoch in range(1, 6):
        for across in (4, 8):
            check_launch(info, (x, y, 512, 2, 4, across, ntiles, 5, 0, epoch), grid=(ntiles + 15) * 4,
                         block=ps.THREADS)
    assert len(runs) == 1
    check_launch(info, (x, y, 512, 1, 4, 4, ntiles, 5, 0, 1), grid=(ntiles + 15) * 4, block=ps.THREADS)
    assert len(runs) == 2                   # the splits per group bound a loop: a new value is run again


# ---------------------------------------------------------------------------------------------- GPU


def run_handoff(debug, publish=True, launches=3):
    """[(src, out)] of `launches` launches over the same flags, a new src and epoch each."""
    from ptxdsl.runtime import DeviceArray

    prog = px.compile(handoff(debug=debug, publish=publish))
    flags = DeviceArray.zeros((1,), np.uint32)
    mid, out = DeviceArray.zeros((N,), np.uint32), DeviceArray.zeros((N,), np.uint32)
    got = []
    for epoch in range(1, launches + 1):
        src = np.random.default_rng(epoch).integers(0, 2**30, N, dtype=np.uint32)
        prog["handoff"](DeviceArray.to_device(src), mid, out, flags, epoch, grid=2, block=N, sync=True)
        got.append((src, out.to_host()))
    return got


def child_flag_trap():
    """Wait for a flag nobody publishes, in debug mode; print what happened as JSON (the subprocess's job)."""
    t0 = time.perf_counter()
    try:
        run_handoff(True, publish=False, launches=1)
    except px.KernelTrap as e:
        print(json.dumps({"error": "KernelTrap", "rule": e.rule, "file": e.loc.file, "line": e.loc.line,
                          "message": str(e), "elapsed": time.perf_counter() - t0}))
        return
    except Exception as e:                  # noqa: BLE001  (reported to the parent, which fails)
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return
    print(json.dumps({"error": None}))


@pytest.mark.gpu
@pytest.mark.parametrize("debug", [False, True])
def test_cta_1_reads_what_cta_0_wrote_before_its_flag(debug):
    for src, out in run_handoff(debug):
        assert np.array_equal(out, src * np.uint32(3))


@pytest.mark.gpu
@pytest.mark.skipif(bool(SANITIZER), reason="the watchdog traps on purpose; a sanitizer counts that as an error")
def test_a_flag_nobody_publishes_traps_naming_the_wait_line():
    code = f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); import {HERE.stem} as t; t.child_flag_trap()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(HERE.parent.parent))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"the child printed no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    r = json.loads(lines[-1])
    assert r["error"] == "KernelTrap", r
    assert r["rule"] == "debug-watchdog" and r["file"] == str(HERE) and r["line"] == marked_line(handoff, "# WAIT")
    assert "label 'flag_wait1'" in r["message"] and r["elapsed"] < 5.0, r


@pytest.mark.parametrize("make, match", [
    (lambda k: Flags(k, "f", k.param_ptr("b"), scope="device"), "Flags: scope='device', expected"),
    (lambda k: Flags(k, "f", k.param_ptr("b")).wait(-1, 1), "Flags 'f': flag -1 is before the first"),
    (lambda k: Flags(k, "f", k.param("b", px.u32)).publish(0, 1), "a global address must be 64-bit"),
    (lambda k: Flags(k, "f", k.param_ptr("b")).wait(0, k.param("e", px.f32)), "mixed types"),
])
def test_flags_misuse_names_the_value_and_the_line(make, match):
    with pytest.raises(px.DSLError, match=match) as info:
        with px.kernel("t", reqntid=32) as k:
            make(k)
    assert info.value.loc.file == str(HERE)


def test_a_backoff_sleeps_between_polls_and_the_run_still_follows_the_spin():
    from ptxdsl.verify.linear import flatten

    with px.kernel("backoff", reqntid=32) as k:
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            Flags(k, "f", k.param_ptr("flag")).wait(0, 1, backoff_ns=256)
    text = px.emit(k).text
    body = [ln.strip() for ln in text[text.index("f_wait1:"):].splitlines()[1:5]]
    assert body[0].startswith("ld.acquire.gpu.global.u32") and body[1].startswith("setp.ne.u32")
    assert body[2].endswith("nanosleep.u32 256;") and body[3].endswith("bra f_wait1;")
    assert assemble(text, "sm_90a").kernels["backoff"].registers > 0
    assert flatten(k.kernel.body, lambda loop: True)[-1][0] == "poll"
