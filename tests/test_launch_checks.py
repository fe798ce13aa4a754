"""Launch checks (no GPU): what the verifier cannot decide when a kernel is built, because it depends on the
arguments, is kept on the kernel and evaluated by ptxdsl.verify.check_launch with the actual ones; each class has
a bad launch rejected with its rule, the parameter, its value and the kernel line, and a good one accepted, in
both front ends. A map declared without a spec is a warning naming the checks it defers. Debug kernels check on
the device what only the device knows (the PTX, its assembly and the trap message are tested here; the traps
themselves run in tests/test_launch_checks_gpu.py)."""
import inspect
import os
import re
import time

import pytest

import ptxdsl as px
from ptxdsl import lang
from ptxdsl.reference import tx_bytes
from ptxdsl.verify import check, check_launch, launch_plan

HERE = os.path.basename(__file__)
SPEC = px.TensorMapSpec.tiled_for((256, 512), "bf16", (64, 64))
BOX = tx_bytes(SPEC)                                                      # 8192
HALF = px.TensorMapSpec.tiled_for((256, 512), "bf16", (32, 64))
SWIZZLED = px.TensorMapSpec.tiled_for((256, 512), "bf16", (64, 64), swizzle="128B")
U8 = px.TensorMapSpec.tiled_for((256, 512), "u8", (64, 64))


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def param_load(k, spec=SPEC, nbytes=BOX, align=128):
    """Thread 0 loads the box at (x, y) expecting `tx` bytes; x, y and tx are kernel parameters."""
    src = k.param_tensormap("src", spec)
    x, y, tx = k.param("x", px.u32), k.param("y", px.u32), k.param("tx", px.u32)
    tile = k.shared("tile", nbytes, align=align)
    bar = k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, tx)  # TX
        k.cp_async_bulk_tensor(tile, src, (x, y), mbar=bar)  # LOAD
    k.mbarrier_wait(bar, parity=0)


def build(fn, name="k", **opts):
    with px.kernel(name, reqntid=128, **opts) as k:
        fn(k)
    return k


def launch_error(k, args, **kw) -> px.LaunchError:
    kw.setdefault("grid", 1)
    kw.setdefault("block", 128)
    with pytest.raises(px.LaunchError) as info:
        check_launch(k, args, **kw)
    return info.value


# ------------------------------------------------------------------- coordinates and byte counts as parameters

def test_parameters_pass_every_build_time_check():
    assert check(build(param_load).kernel) == []


@pytest.mark.parametrize("x, ok", [(0, True), (8, True), (64, True), (4, False), (1, False), (12, False)])
def test_a_misaligned_coordinate_parameter_is_a_launch_error(x, ok):
    k = build(param_load)
    if ok:
        check_launch(k, (SPEC, x, 0, BOX), grid=1, block=128)
        return
    e = launch_error(k, (SPEC, x, 0, BOX))
    assert e.rule == "coord-align" and e.loc.line == marked_line(param_load, "# LOAD")
    assert os.path.basename(e.loc.file) == HERE
    assert f"launched with x={x}" in str(e) and f"the innermost coordinate is {x} elements" in str(e)
    assert "`ptxdsl docs coord-align`" in str(e)


@pytest.mark.parametrize("tx", [BOX + 16, BOX - 16, 0, 2 * BOX])
def test_a_wrong_byte_count_parameter_is_a_launch_error(tx):
    k = build(param_load)
    e = launch_error(k, (SPEC, 0, 0, tx))
    assert e.rule == "expect-tx-mismatch" and e.loc.line == marked_line(param_load, "# TX")
    assert f"tx={tx}" in str(e) and f"expects {tx} transaction bytes" in str(e) and f"deliver {BOX}" in str(e)
    check_launch(k, (SPEC, 0, 0, BOX), grid=1, block=128)


def test_the_byte_count_is_checked_against_the_map_the_launch_binds():
    """The declared spec says 64x64; a launch that binds a 32x64 box delivers half the bytes."""
    k = build(param_load)
    e = launch_error(k, (HALF, 0, 0, BOX))
    assert e.rule == "expect-tx-mismatch" and "deliver 4096" in str(e) and "box [32, 64]" in str(e)
    check_launch(k, (HALF, 0, 0, tx_bytes(HALF)), grid=1, block=128)


def test_a_raw_tensor_map_argument_leaves_the_declared_spec_in_force():
    k = build(param_load)
    opaque = object()                       # what check_launch cannot read (a CUtensorMap)
    check_launch(k, (opaque, 8, 0, BOX), grid=1, block=128)
    assert launch_error(k, (opaque, 4, 0, BOX)).rule == "coord-align"


def test_a_coordinate_known_modulo_a_power_of_two():
    """x = 64 * ctaid.x + off: the launch knows off, the build knows the rest is a multiple of 64."""
    def fn(k):
        src = k.param_tensormap("src", SPEC)
        off = k.param("off", px.u32)
        tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
        t0 = k.setp("eq", k.tid_x(), 0)
        x = k.mad(k.mov(px.sreg.ctaid_x), 64, off)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, src, (x, 0), mbar=bar)  # LOAD
            k.mbarrier_wait(bar, parity=0)

    k = build(fn)
    check_launch(k, (SPEC, 16), grid=4, block=128)
    e = launch_error(k, (SPEC, 20))
    assert e.rule == "coord-align" and "is 4 (mod 8) elements" in str(e) and "off=20" in str(e)


def test_the_verdict_is_kept_per_argument_signature():
    k = build(param_load)
    plan = launch_plan(k.kernel)
    calls = []
    original = plan._evaluate
    plan._evaluate = lambda *a: calls.append(a[1]) or original(*a)
    for _ in range(3):
        check_launch(k, (SPEC.bind(0x10000), 8, 0, BOX), grid=1, block=128)
        check_launch(k, (SPEC.bind(0x20000), 16, 64, BOX), grid=1, block=128)    # y and the address: not read
    assert len(calls) == 2                  # x differs (a check reads it); y and the map's address do not
    for _ in range(2):
        with pytest.raises(px.LaunchError):
            check_launch(k, (SPEC, 4, 0, BOX), grid=1, block=128)
    assert len(calls) == 3
    t = time.perf_counter()
    n = 2000
    for _ in range(n):
        check_launch(k.kernel, (SPEC, 8, 0, BOX), grid=1, block=128)
    per_call = (time.perf_counter() - t) / n
    assert per_call < 50e-6, per_call     # a dictionary lookup, not a walk of the kernel (about 1 us here)


def test_check_launch_takes_the_emitted_kernel_info_a_launcher_holds():
    k = build(param_load, debug=True)
    info = px.emit(k).kernels["k"]
    assert info.launch_checks is launch_plan(k.kernel)
    check_launch(info, (SPEC, 8, 0, BOX), grid=1, block=128)       # the debug record's parameter is hidden
    assert launch_error(info, (SPEC, 8, 0, BOX + 16)).rule == "expect-tx-mismatch"


# ---------------------------------------------------------------------------------- maps declared without spec

def load_any(k, tx=BOX, nbytes=BOX, align=128):
    src = k.param_tensormap("src")  # DECL
    tile, bar = k.shared("tile", nbytes, align=align), k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, tx)
        k.cp_async_bulk_tensor(tile, src, (8, 0), mbar=bar)  # LOAD
    k.mbarrier_wait(bar, parity=0)


def test_a_map_without_spec_is_a_warning_naming_the_checks_it_defers():
    diags = check(build(load_any).kernel)
    assert [(d.rule, d.severity, d.loc.line) for d in diags] == [
        ("unchecked-tensormap", "warning", marked_line(load_any, "# DECL"))]
    text = diags[0].message
    assert f"its use at line {marked_line(load_any, '# LOAD')}" in text
    for deferred in ("expect-tx-mismatch", "coord-align", "tma-smem-bounds", "tma-smem-align", "element-type"):
        assert deferred in text
    assert "param_tensormap('src', spec)" in text


@pytest.mark.parametrize("spec, rule, text", [
    (SPEC, None, None),
    (HALF, "expect-tx-mismatch", "deliver 4096"),
    (SWIZZLED, "tma-smem-align", "swizzle pattern repeats every 1024 bytes"),
    (px.TensorMapSpec.tiled_for((256, 512), "bf16", (128, 64)), "tma-smem-bounds", "takes 16384 bytes"),
    (px.TensorMapSpec.tiled_for((256, 512), "f32", (64, 32)), None, None),
    (px.TensorMapSpec.tiled_for((64, 256, 512), "bf16", (1, 64, 64)), "tensormap-spec", "has rank 3"),
    (U8, "coord-align", "8 bytes past a 16-byte boundary of the u8 tensor"),
])
def test_the_launch_fills_in_the_checks_of_a_map_without_spec(spec, rule, text):
    k = build(lambda k: load_any(k, tx=BOX if rule in ("expect-tx-mismatch", "tma-smem-bounds") else tx_bytes(spec)))
    if rule is None:
        check_launch(k, (spec,), grid=1, block=128)
        return
    e = launch_error(k, (spec,))
    assert e.rule == rule and text in str(e), str(e)
    assert e.loc.line in (marked_line(load_any, "# LOAD"), marked_line(load_any, "# LOAD") - 1)


def test_a_box_over_its_buffer_at_launch():
    k = build(lambda k: load_any(k, tx=4 * BOX))
    e = launch_error(k, (px.TensorMapSpec.tiled_for((256, 512), "bf16", (256, 64)),))
    assert e.rule == "tma-smem-bounds" and "takes 32768 bytes of shared memory, but tile has 8192" in str(e)


def test_a_reduction_on_a_map_type_it_does_not_take():
    def fn(k, op):
        acc = k.param_tensormap("acc")
        tile = k.shared("tile", BOX, align=128)
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            k.cp_reduce_async_bulk_tensor(op, acc, tile, (0, 0))  # REDUCE
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group_read(0)

    k = build(lambda k: fn(k, "and"))
    e = launch_error(k, (SPEC,))
    assert e.rule == "tensormap-spec" and "element type 'bf16'" in str(e) and "acc = a bf16 tiled map" in str(e)
    check_launch(k, (px.TensorMapSpec.tiled_for((256, 512), "u32", (64, 32)),), grid=1, block=128)
    check_launch(build(lambda k: fn(k, "add")), (SPEC,), grid=1, block=128)


# ---------------------------------------------------------------------------------------------- multicast

def multicast(k, mask=None):
    src = k.param_tensormap("src", HALF)
    m = k.param("mask", px.u16) if mask is None else mask
    tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
    t0 = k.setp("eq", k.tid_x(), 0)
    with k.if_(t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
    k.barrier_cluster_arrive()
    k.barrier_cluster_wait()
    with k.if_(t0):
        k.mbarrier_arrive_expect_tx(bar, BOX)
        k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar, multicast=m)  # LOAD
    k.mbarrier_wait(bar, parity=0)
    k.barrier_cluster_arrive()
    k.barrier_cluster_wait()


def test_a_multicast_mask_against_the_cluster_of_the_launch():
    k = build(multicast)
    check_launch(k, (HALF, 0b11), grid=2, block=128, cluster=(2, 1, 1))
    e = launch_error(k, (HALF, 0b101), grid=4, cluster=(2, 1, 1))
    assert e.rule == "multicast-mask" and "mask=5" in str(e) and "the launch's cluster has 2 CTAs" in str(e)
    assert launch_error(k, (HALF, 0), grid=2, cluster=(2, 1, 1)).rule == "multicast-mask"
    e = launch_error(k, (HALF, 0b11), grid=2)
    assert "without a cluster" in str(e)
    k2 = build(lambda k: multicast(k, 0b1111))
    check_launch(k2, (HALF,), grid=4, block=128, cluster=(4, 1, 1))
    assert launch_error(k2, (HALF,), grid=4, cluster=(2, 1, 1)).rule == "multicast-mask"


# ---------------------------------------------------------------------------------------------------- rings

def ring_of_n(k, stages=3):
    """A single-loop ring over `n` tiles (a parameter): the prologue fills every slot, iteration t consumes tile
    t and refills its slot with tile t + STAGES where `t + STAGES < n`. With n < STAGES the prologue's extra
    loads are never waited for."""
    src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((1024, 64), "bf16", (64, 64)))
    n = k.param("n", px.u32)
    ring = k.shared("ring", stages * BOX, align=128)
    full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
    tid = k.tid_x()
    t0 = k.setp("eq", tid, 0)
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_init(full.at(8 * s), 1)
            k.mbarrier_init(empty.at(8 * s), 128)
        k.fence_mbarrier_init()
    k.bar_sync(0)
    with k.if_(t0):
        for s in range(stages):
            k.mbarrier_arrive_expect_tx(full.at(8 * s), BOX)
            k.cp_async_bulk_tensor(ring.at(s * BOX), src, (0, 64 * s), mbar=full.at(8 * s))  # PROLOGUE
    stage, phase = k.mov(0, px.u32), k.mov(0, px.u32)
    with k.loop(0, n) as t:
        full_s, empty_s = k.mad(stage, 8, k.mov(full)), k.mad(stage, 8, k.mov(empty))
        buf = k.mad(stage, BOX, k.mov(ring))
        k.mbarrier_wait(full_s, parity=phase)
        k.ld(px.b32, k.add(buf, k.shl(tid, 4)), space="shared::cta", vec=4)
        k.mbarrier_arrive(empty_s)
        with k.if_(t0), k.if_(k.setp("lt", k.add(t, stages), n)):
            k.mbarrier_wait(empty_s, parity=phase)
            k.mbarrier_arrive_expect_tx(full_s, BOX)
            k.cp_async_bulk_tensor(buf, src, (0, k.mul(k.add(t, stages), 64)), mbar=full_s)
        k.add(stage, 1, out=stage)
        with k.if_(k.setp("eq", stage, stages)):
            k.mov(0, px.u32, out=stage)
            k.xor(phase, 1, out=phase)


def test_a_ring_length_against_the_loop_bound_of_the_launch():
    k = build(ring_of_n)
    spec = px.TensorMapSpec.tiled_for((1024, 64), "bf16", (64, 64))
    for n in (3, 4, 8, 16):
        check_launch(k, (spec, n), grid=1, block=128)
    e = launch_error(k, (spec, 2))
    assert e.rule == "tma-load-race" and "n=2" in str(e) and "the kernel exits while the TMA load" in str(e)
    assert e.loc.line == marked_line(ring_of_n, "# PROLOGUE")



def ring_with_extras(k):
    """ring_of_n, then a bar.warp.sync whose mask is a parameter and a global store of another one."""
    ring_of_n(k)
    mask = k.param("mask", px.u32)
    out, scale = k.param_ptr("out"), k.param("scale", px.u32)
    k.bar_warp_sync(mask)
    k.st(px.u32, out, k.mul(scale, 3))


def test_the_run_at_launch_reads_the_parameters_that_decide_its_path_only():
    """The ring's loop bound and the warp sync's mask decide what the run of the threads does; a value only
    stored to global memory does not, so a launch that changes only it is not checked again."""
    k = build(ring_with_extras)
    plan = launch_plan(k.kernel)
    assert [plan.params[i].name for i in plan.reads] == ["src", "n", "mask"]
    spec = px.TensorMapSpec.tiled_for((1024, 64), "bf16", (64, 64))
    runs = []
    original = plan._evaluate
    plan._evaluate = lambda *a: runs.append(a[1]) or original(*a)
    for scale in range(5):
        check_launch(k, (spec, 8, 0xFFFFFFFF, 0, scale), grid=1, block=128)
    assert len(runs) == 1
    with pytest.raises(px.LaunchError, match="n=2"):
        check_launch(k, (spec, 2, 0xFFFFFFFF, 0, 0), grid=1, block=128)

# -------------------------------------------------------------------------------------- the .ptxd twins

PARAM_LOAD = """kernel param_load(tensormap src: bf16[256, 512] box [64, 64], u32 x, u32 y, u32 tx)
    .reqntid 128
{
    shared tile: b8[8192] align 128
    mbarrier bar
    is_t0 = %tid.x == 0
    if is_t0 {
        mbarrier.init [bar], 1
        fence.mbarrier_init
    }
    bar.sync 0
    if is_t0 {
        mbarrier.arrive.expect_tx [bar], tx
        cp.async.bulk.tensor [tile], [src, {x, y}], [bar]
    }
    wait [bar] parity 0
}
"""

UNCHECKED = PARAM_LOAD.replace("tensormap src: bf16[256, 512] box [64, 64]", "tensormap src")


@pytest.mark.parametrize("args, rule, line", [((SPEC, 8, 0, BOX), None, None),
                                              ((SPEC, 4, 0, BOX), "coord-align", 14),
                                              ((SPEC, 8, 0, BOX - 16), "expect-tx-mismatch", 13)])
def test_ptxd_twin_of_the_parameterised_load(args, rule, line):
    (k,) = lang.loads(PARAM_LOAD, "param_load.ptxd")
    assert check(k) == []
    if rule is None:
        check_launch(k, args, grid=1, block=128)
        return
    with pytest.raises(px.LaunchError) as info:
        check_launch(k, args, grid=1, block=128)
    assert info.value.rule == rule and info.value.loc.line == line and info.value.loc.file == "param_load.ptxd"


def test_ptxd_twin_of_a_map_without_spec():
    (k,) = lang.loads(UNCHECKED, "unchecked.ptxd")
    assert [(d.rule, d.loc.line) for d in check(k)] == [("unchecked-tensormap", 1)]
    check_launch(k, (SPEC, 8, 0, BOX), grid=1, block=128)
    with pytest.raises(px.LaunchError) as info:
        check_launch(k, (HALF, 8, 0, BOX), grid=1, block=128)
    assert info.value.rule == "expect-tx-mismatch" and info.value.loc.line == 13


# ------------------------------------------------------------------------------- debug mode: device checks

def test_a_debug_kernel_checks_what_only_the_device_knows_before_its_tma_instructions():
    ptx = px.emit(build(param_load, debug=True))
    text = ptx.text
    body = text.split("bar.sync 0;")[1]
    tx_check = body.index("setp.ne.u32 %p4, %r3, 8192;")                # tx (%r3) against the box's bytes
    arrive = body.index("mbarrier.arrive.expect_tx")
    coord_check = body.index("and.b32 %r5, %r1, 7;")                     # x (%r1) modulo 8 bf16 elements
    load = body.index("cp.async.bulk.tensor")
    assert tx_check < arrive < coord_check < load
    assert "@%p4 st.volatile.global.u32 [%rd2+8], 1;" in body and "@%p4 st.volatile.global.u32 [%rd2+8], 2;" in body
    assert "@%p4 st.volatile.global.u32 [%rd2+12], %r3;" in body and "@%p4 trap;" in body
    px.assemble(ptx, "sm_90a")
    info = ptx.kernels["k"]
    assert [(loc.line, kind, want) for loc, kind, want, _ in info.debug_checks] == [
        (marked_line(param_load, "# TX"), "tx", BOX), (marked_line(param_load, "# LOAD"), "coord", 8)]
    assert px.emit(build(param_load, debug=True)).text == text           # deterministic


def test_no_device_check_where_the_build_decides():
    """Constant coordinates and byte counts are checked when the kernel is built: no code for them; a kernel
    without debug=True gets none either."""
    def fn(k):
        src = k.param_tensormap("src", SPEC)
        tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, src, (k.mul(k.mov(px.sreg.ctaid_x), 64), 0), mbar=bar)
            k.mbarrier_wait(bar, parity=0)

    assert px.emit(build(fn, debug=True)).kernels["k"].debug_checks == []
    plain = px.emit(build(param_load)).text
    assert "trap" not in plain and "%rd2+12" not in plain


def test_a_guarded_tma_instruction_is_checked_only_where_its_guard_holds():
    def fn(k):
        src = k.param_tensormap("src", SPEC)
        x = k.param("x", px.u32)
        tile, bar = k.shared("tile", BOX, align=128), k.mbarrier("bar")
        t0 = k.setp("eq", k.tid_x(), 0)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.guard(t0):
            k.mbarrier_arrive_expect_tx(bar, BOX)
            k.cp_async_bulk_tensor(tile, src, (x, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)

    ptx = px.emit(build(fn, debug=True))
    body = ptx.text.split("bar.sync 0;")[1]
    label = re.search(r"@!%p1 bra (\$L__check_skip\d+);", body).group(1)
    assert body.index(label) < body.index("and.b32") < body.index(f"{label}:") < body.index("@%p1 cp.async.bulk.tensor")
    px.assemble(ptx, "sm_90a")


def test_the_trap_message_names_the_line_and_the_values():
    from ptxdsl.runtime.watchdog import check_trap

    info = px.emit(build(param_load, debug=True)).kernels["k"]
    tx = check_trap(info, 1, BOX + 16)
    assert tx.rule == "debug-expect-tx" and tx.loc.line == marked_line(param_load, "# TX")
    assert f"expect_tx arms {BOX + 16} transaction bytes" in str(tx) and f"deliver {BOX}" in str(tx)
    coord = check_trap(info, 2, 4)
    assert coord.rule == "debug-coord-align" and coord.loc.line == marked_line(param_load, "# LOAD")
    assert "innermost coordinate is 4" in str(coord) and "multiple of 8" in str(coord)
    assert check_trap(info, 3, 0) is None and check_trap(info, 0, 0) is None


def test_the_docs_launch_check_example_runs_as_written(capsys):
    """docs/verifier.md#launch-checks: its program runs and prints the LaunchError the page shows."""
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "verifier.md").read_text()
    section = page.split('<a id="launch-checks"></a>')[1]
    code, shown = re.findall(r"```[a-z]*\n(.*?)```", section, re.S)[:2]       # the program, then what it prints
    assert code.startswith("import ptxdsl as px")
    exec(compile(code, "launch.py", "exec"), {})
    printed = capsys.readouterr().out
    shown = shown.replace("\n", " ")
    assert printed.startswith("launch.py:16: coord-align: kernel 'param_load' launched with x=4")
    assert " ".join(printed.split())[:200] == " ".join(shown.split())[:200]


def test_a_box_in_the_last_dynamic_buffer_fits_the_launchs_window():
    """The differential harness declares a 1 KiB dynamic buffer and launches with the window the box needs:
    the bounds check reads the launch's dynamic shared bytes (found on the H200: a 1040-byte box refused)."""
    from ptxdsl import reference as ref
    from ptxdsl.testing import harness
    from ptxdsl.testing.cases import TmaCase, smem_window

    case = TmaCase(op="load", dtype="u8", dims=(16, 1, 1, 1, 65), strides=(16, 16, 16, 16), box=(16, 1, 1, 1, 65),
                   coords=(0, 0, 0, 0, 0))
    kernel = harness.build_kernel(harness.kernel_key(case)).finish()
    spec = case.spec(0x10000)
    window = smem_window(case)
    args = (spec, 0x20000, 0x30000, window, 0, ref.tx_bytes(spec), 0, 0, 0, 0, 0)
    check_launch(kernel, args, grid=1, block=128, shared_bytes=window)
    with pytest.raises(px.LaunchError, match="tma-smem-bounds: .* has 1024 from its offset \\(with 1024 bytes"):
        check_launch(kernel, args, grid=1, block=128, shared_bytes=1024)
