"""ptxdsl.pipeline (no GPU): the library's argument checks, the PTX it writes, and the verifier on kernels built
with it. A correct persistent ring passes the verifier with no allow(); each classic mistake made with it (no
empty wait, a wrong byte count, a cursor that does not advance, the wrong parity, a stage released before its
TMA store has read it) is rejected before the launch, by the run of the threads with the launch's arguments and
grid, naming the rule and the line. The GPU runs of the pipe_* examples are in tests/test_examples.py."""
import inspect
import os

import pytest

import ptxdsl as px
from ptxdsl.pipeline import Ring, StoreDrain, persistent, tile_coords
from ptxdsl.verify import check, check_launch

HERE = os.path.basename(__file__)
BOX = (256, 32)                                      # (columns, rows) of bf16: 16 KiB
TILE = BOX[0] * BOX[1] * 2
SPEC = px.TensorMapSpec.tiled_for((4096, 4096), "bf16", (BOX[1], BOX[0]))
MISTAKES = {
    "no_acquire": "refill-race",        # the producer refills a stage the storer may still read
    "bytes": "expect-tx-mismatch",      # arms half the tile's bytes
    "no_advance": "refill-race",        # the producer's cursor stays on stage 0
    "parity": "ring-parity",            # the storer waits for parity phase ^ 1
    "no_drain": "refill-race",          # the stage is released before its TMA store has read it
}


def copy_kernel(mistake=None, stages=4):
    """The persistent copy of examples/pipe_copy.py, with one mistake planted (the lines marked # M)."""
    with px.kernel("copy", reqntid=64) as k:
        src, dst = k.param_tensormap("src", SPEC), k.param_tensormap("dst", SPEC)
        ntiles, across = k.param("ntiles", px.u32), k.param("tiles_per_row", px.u32)
        ring = Ring(k, "ring", stages=stages, stage_bytes=TILE)
        ring.init()
        with k.if_(k.setp("eq", k.warp_idx(), 0)):
            with k.elect_one():
                cur = ring.cursor()
                with persistent(k, ntiles) as tile:
                    if mistake != "no_acquire":
                        ring.producer_acquire(cur)
                    ring.producer_arm(cur, TILE // 2 if mistake == "bytes" else TILE)  # M bytes
                    k.cp_async_bulk_tensor(ring.buffer(cur), src, tile_coords(k, tile, across, BOX),  # M refill
                                           mbar=ring.full(cur))
                    if mistake != "no_advance":
                        cur.advance()
        with k.else_():
            with k.elect_one():
                cur = ring.cursor()
                drain = StoreDrain(ring, 1)
                with persistent(k, ntiles) as tile:
                    if mistake == "parity":
                        k.mbarrier_wait(ring.full(cur), parity=k.xor(cur.phase, 1))  # M parity
                    else:
                        ring.consumer_wait(cur)
                    k.cp_async_bulk_tensor(dst, ring.buffer(cur), tile_coords(k, tile, across, BOX))
                    k.cp_async_bulk_commit_group()
                    if mistake == "no_drain":
                        ring.consumer_release(cur)
                    else:
                        drain.committed()
                    cur.advance()
                drain.finish()
    return k


def marked_in(fn, marker):
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def marked(marker):
    return marked_in(copy_kernel, marker)


ARGS = (SPEC, SPEC, 20, 16)


def test_a_correct_ring_passes_the_verifier_and_its_launch_checks():
    k = copy_kernel()
    assert check(k) == []
    for grid, ntiles in ((1, 3), (2, 20), (7, 20), (132, 4096)):
        check_launch(k, (SPEC, SPEC, ntiles, 16), grid=grid, block=64)


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_classic_mistake_is_refused_before_the_launch(mistake):
    k = copy_kernel(mistake)
    with pytest.raises(px.LaunchError) as info:
        check_launch(k, ARGS, grid=2, block=64)
    e = info.value
    assert e.rule == MISTAKES[mistake], str(e)
    assert "ntiles=20" in str(e) and "grid=(2, 1, 1)" in str(e)
    line = {"bytes": marked("# M bytes"), "parity": marked("# M parity")}.get(mistake, marked("# M refill"))
    assert e.loc is not None and (os.path.basename(e.loc.file), e.loc.line) == (HERE, line), (str(e), line)


def test_the_grid_decides_what_the_run_sees():
    """CTA 0 of a grid of n takes tiles 0, n, 2n, ...: with ntiles <= n it runs one tile, too few to show a
    stage refilled too early; with more it does."""
    k = copy_kernel("no_acquire")
    check_launch(k, (SPEC, SPEC, 2, 16), grid=2, block=64)
    with pytest.raises(px.LaunchError):
        check_launch(k, (SPEC, SPEC, 200, 16), grid=2, block=64)


@pytest.mark.parametrize("name", ["pipe_copy", "pipe_gather", "pipe_axpy", "pipe_transpose", "pipe_varlen",
                                  "pipe_splitsum"])
def test_the_examples_pass_the_verifier_without_allow(name):
    import importlib
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    sys.path.insert(0, str(examples))
    try:
        mod = importlib.import_module(name)
    finally:
        sys.path.remove(str(examples))
    assert "allow(" not in (examples / f"{name}.py").read_text()
    assert check(mod.KERNEL) == []


@pytest.mark.parametrize("kw, fragment", [
    ({"stages": 0, "stage_bytes": 1024}, "stages=0"),
    ({"stages": 2, "stage_bytes": 1000}, "stage_bytes=1000 is not a multiple of 128"),
    ({"stages": 2, "stage_bytes": 1024, "consumers": 0}, "consumers=0"),
    ({"stages": True, "stage_bytes": 1024}, "stages=True"),
])
def test_ring_arguments_are_checked(kw, fragment):
    with px.kernel("k") as k:
        with pytest.raises(px.DSLError, match=fragment) as info:
            Ring(k, "ring", **kw)  # RING
    assert (os.path.basename(info.value.loc.file), info.value.loc.line) == (HERE, marked_in(
        test_ring_arguments_are_checked, "# RING"))


def test_a_drain_as_deep_as_the_ring_is_refused():
    with px.kernel("k") as k:
        ring = Ring(k, "ring", stages=2, stage_bytes=1024)
        with pytest.raises(px.DSLError, match="depth=2") as info:
            StoreDrain(ring, 2)  # DRAIN
    assert info.value.loc.line == marked_in(test_a_drain_as_deep_as_the_ring_is_refused, "# DRAIN")


def test_the_cursor_advances_without_a_branch():
    with px.kernel("k") as k:
        ring = Ring(k, "ring", stages=3, stage_bytes=1024)
        cur = ring.cursor()
        cur.advance()
    text = px.emit(k).text
    body = text[text.index("mov.u32 %r1, 0;"):]
    assert "bra" not in body.split("ret;")[0]
    assert "setp.eq.u32" in body and "selp.u32" in body and "xor.b32" in body


def test_launch_shape_turns_tiles_per_cta_into_a_grid():
    from ptxdsl.pipeline import launch_shape

    class Launch:                         # what launch_shape reads of prog[name]
        device = type("Device", (), {"sm_count": 132})()

        def shared_bytes_for(self, n):
            return 233472 // n

    assert launch_shape(Launch(), 1000) == (1000, None)
    assert launch_shape(Launch(), 1000, 3) == (334, None)
    assert launch_shape(Launch(), 1000, None) == (132, None)
    assert launch_shape(Launch(), 100, None) == (100, None)
    assert launch_shape(Launch(), 1000, 1, ctas_per_sm=4) == (1000, 58368)


@pytest.mark.parametrize("row", [128, 1024, 16384])
def test_a_row_per_lane_is_followed_and_its_byte_count_checked(row):
    """The gather's producer is a whole warp: lane j copies row j of the stage (one bulk copy per lane, each to
    its own offset). Armed with half the stage's bytes, the launch is refused; armed right, it passes."""
    import importlib
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    sys.path.insert(0, str(examples))
    try:
        gather = importlib.import_module("pipe_gather")
    finally:
        sys.path.remove(str(examples))
    source = (examples / "pipe_gather.py").read_text()
    half = source.replace("ring.producer_arm(cur, g * row)", "ring.producer_arm(cur, g * row // 2)")
    assert half != source
    ns = {"__name__": "half_armed"}
    exec(compile(half, str(examples / "pipe_gather.py"), "exec"), ns)
    with pytest.raises(px.LaunchError) as info:
        check_launch(ns["build"](row), (0, 0, 0, 64), grid=2, block=64)
    assert info.value.rule == "expect-tx-mismatch"
    check_launch(gather.build(row), (0, 0, 0, 64), grid=2, block=64)



def test_tile_grid_counts_the_tiles_tile_coords_numbers():
    from ptxdsl.pipeline import tile_grid

    assert tile_grid(64, 512, (256, 16)) == (2, 8)
    with pytest.raises(px.LaunchError) as info:
        tile_grid(100, 512, (256, 16), "pipe_copy")
    assert info.value.rule == "pipeline.whole-tiles" and "pipe_copy: 100x512" in str(info.value)
    assert info.value.loc.file == __file__
