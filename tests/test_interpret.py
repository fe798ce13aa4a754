"""The CPU interpreter (ptxdsl.interpret): the examples' host checks bit-exact on it, its reports (deadlock,
out-of-bounds, misaligned, not interpretable), seeds, numpy arguments, and one semantics with ptxdsl.fold."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import alu, fold, lang, sreg
from ptxdsl.interpret import CPU, Deadlock, MemoryFault, NotInterpretable
from ptxdsl.isa import effects as fx
from ptxdsl.testing import strategies as pst
from ptxdsl.types import ALL_TYPES

ROOT = Path(__file__).resolve().parent.parent
# every example whose host check takes a few seconds at most on the interpreter; pipe_axpy, pipe_splitsum and
# pipe_varlen pass too (`ptxdsl run --cpu examples/*.py`) but take 4-17 s each at their run()'s sizes
FAST = ["tma_load_tile", "tma_store_tile", "tma_pipeline_copy", "tma_reduce_tile", "tma_multicast_tile",
        "tensormap_replace", "user_kernel", "pipe_gather", "pipe_transpose"]
TWINS = ["tma_load_tile", "tma_store_tile", "tma_pipeline_copy", "tma_reduce_tile", "tma_multicast_tile"]


@pytest.fixture
def cpu():
    with CPU:
        yield CPU


@pytest.mark.parametrize("name", FAST)
def test_example_host_check_runs_bit_exact_on_the_interpreter(name, cpu):
    ok, verdict = importlib.import_module(name).run()
    assert ok, verdict


@pytest.mark.parametrize("name", TWINS)
def test_ptxd_twin_runs_on_the_interpreter(name, cpu):
    (kernel,) = lang.load(ROOT / "examples" / f"{name}.ptxd")
    ok, verdict = importlib.import_module(name).run(kernel=kernel)
    assert ok, verdict


def _copy(rows, cols, tiles_per_cta, seed=None):
    import pipe_copy

    from ptxdsl.runtime import DeviceArray

    a = np.random.default_rng(1).integers(0, 2**16, (rows, cols), dtype=np.uint16)
    prog = px.compile(pipe_copy.KERNEL, device="cpu")
    src, out = DeviceArray.to_device(a), DeviceArray.zeros(a.shape, np.uint16)
    box = (pipe_copy.BOX[1], pipe_copy.BOX[0])
    run = pipe_copy.launcher(prog, rows, cols, tiles_per_cta=tiles_per_cta)
    if seed is not None:
        launch = prog["pipe_copy"]
        across, ntiles = px.pipeline.tile_grid(rows, cols, pipe_copy.BOX, "pipe_copy")
        launch(px.TensorMapSpec.from_array(src, box, dtype="bf16"), px.TensorMapSpec.from_array(out, box, dtype="bf16"),
               ntiles, across, grid=-(-ntiles // tiles_per_cta), block=64, seed=seed)
    else:
        run(px.TensorMapSpec.from_array(src, box, dtype="bf16"), px.TensorMapSpec.from_array(out, box, dtype="bf16"))
    return a, out.to_host()


@pytest.mark.parametrize("tiles_per_cta", [1, 5])
def test_pipe_copy_small_is_bit_exact(tiles_per_cta, cpu):
    a, got = _copy(64, 512, tiles_per_cta)
    assert np.array_equal(a, got)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_seed_picks_another_interleaving_with_the_same_result(seed, cpu):
    a, got = _copy(64, 512, 3, seed=seed)
    assert np.array_equal(a, got)


# ------------------------------------------------------------------------------------------- reports


def _tile_kernel(tx_bytes, *, name="planted"):
    from tile_common import THREADS, TILE, TILE_BYTES, tile_spec

    with px.kernel(name, reqntid=THREADS, verify=False) as k:
        src = k.param_tensormap("src", tile_spec(64, 64))
        tile = k.shared("tile", TILE_BYTES, align=128)
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        with k.if_(is_t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(is_t0):
            k.mbarrier_arrive_expect_tx(bar, tx_bytes)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)
    del TILE
    return k


def _line_of(text, path=__file__):
    lines = Path(path).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line)


def test_a_wrong_expect_tx_is_a_deadlock_naming_the_waiting_line(cpu):
    from ptxdsl.runtime import DeviceArray

    from tile_common import TILE_BYTES

    k = _tile_kernel(TILE_BYTES + 16)
    a = DeviceArray.to_device(np.zeros((64, 64), np.uint16))
    spec = px.TensorMapSpec.from_array(a, (64, 64), dtype="bf16")
    with pytest.raises(Deadlock) as e:
        px.compile(k, device="cpu")["planted"](spec, grid=1, block=128)
    wait_line = _line_of("k.mbarrier_wait(bar, parity=0)")
    assert e.value.rule == "interpret.deadlock"
    assert e.value.loc.line == wait_line
    text = str(e.value)
    assert "4 warp(s)" in text
    assert f"test_interpret.py:{wait_line}" in text
    assert "phase 0 (parity 0), 0 of 1 arrivals pending, 16 transaction bytes pending" in text
    assert len(e.value.waits) == 4


def test_the_right_expect_tx_completes(cpu):
    from ptxdsl.runtime import DeviceArray

    from tile_common import TILE_BYTES

    a = DeviceArray.to_device(np.zeros((64, 64), np.uint16))
    spec = px.TensorMapSpec.from_array(a, (64, 64), dtype="bf16")
    px.compile(_tile_kernel(TILE_BYTES), device="cpu")["planted"](spec, grid=1, block=128)


def _store_kernel(offset_bytes, *, space="global"):
    with px.kernel("poke", verify=False) as k:
        out = k.param_ptr("out")
        tid = k.mov(sreg.tid_x)
        addr = k.add(out, k.cvt(px.u64, k.mad(tid, 4, offset_bytes)))
        k.st(px.u32, addr, tid)                                     # the poke
    return k


def test_numpy_arguments_are_written_in_place():
    out = np.zeros(64, np.uint32)
    px.compile(_store_kernel(0), device="cpu")["poke"](out, grid=1, block=64)
    assert np.array_equal(out, np.arange(64, dtype=np.uint32))


def test_an_out_of_bounds_store_names_the_line_and_the_address():
    out = np.zeros(32, np.uint32)
    with pytest.raises(MemoryFault) as e:
        px.compile(_store_kernel(0), device="cpu")["poke"](out, grid=1, block=64)
    assert e.value.rule == "interpret.out-of-bounds"
    assert e.value.loc.line == _line_of("# the poke")
    assert re.search(r"4 bytes at global address 0x[0-9a-f]+ \(lane 0\) are outside every buffer", str(e.value))


def test_a_misaligned_store_names_the_address():
    out = np.zeros(128, np.uint32)
    with pytest.raises(MemoryFault) as e:
        px.compile(_store_kernel(2), device="cpu")["poke"](out, grid=1, block=32)
    assert e.value.rule == "interpret.misaligned"
    assert "is not 4-byte aligned" in str(e.value)
    assert e.value.loc.line == _line_of("# the poke")


def test_an_op_without_a_model_is_named():
    with px.kernel("unmodelled", verify=False) as k:
        out = k.param_ptr("out")
        x = k.mov(1.5, type=px.f32)
        k.st(px.f32, out, k.add(x, x, mode="rz"))
    with pytest.raises(NotInterpretable) as e:
        px.compile(k, device="cpu")["unmodelled"](np.zeros(1, np.float32), grid=1, block=32)
    assert "add.rz.f32" in str(e.value)


# --------------------------------------------------------------------------- one semantics with fold


class _E:
    def __init__(self, fn, t, mode=None):
        self.fn, self.type, self.mode = fn, t, mode


INT_TYPES = ["u16", "u32", "u64", "s16", "s32", "s64", "b32"]


@settings(max_examples=300)
@given(st.sampled_from(["add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
                        "setp.lt", "setp.hi", "setp.eq"]),
       st.sampled_from(INT_TYPES), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_lanes_and_folding_agree(fn, tname, x, y):
    t = ALL_TYPES[tname]
    if fn in ("shl", "shr"):
        y %= 80
    if fn in ("setp.lt",) and t.kind == "b" or fn == "setp.hi" and t.kind == "s":
        return
    if fn in ("min", "max", "div", "rem") and t.kind == "b":
        return
    m = (1 << t.bits) - 1
    x &= m
    y &= m if fn not in ("shl", "shr") else 0xFFFFFFFF
    e = fx.Compute(None, fn, (x, y), t, "lo" if fn == "mul" else None)
    folded = fold.evaluate(e, lambda v: v)
    b_type = ALL_TYPES["u32"] if fn in ("shl", "shr") else t
    with np.errstate(all="ignore"):
        lanes = alu.compute(e, [alu.encode(np.array([x], np.uint64), t), alu.encode(np.array([y], np.uint64), b_type)],
                            t)
    if folded is None:                       # fold declines (a zero divisor): PTX leaves it unspecified
        return
    got = bool(lanes[0]) if fn.startswith("setp") else int(lanes[0])
    assert got == (folded if fn.startswith("setp") else fold.mask(folded, t.bits)), (fn, tname, x, y)


def test_the_interpreter_s_bit_forms_agree_with_alu():
    from ptxdsl.interpret.execute import _fast_int

    rng = np.random.default_rng(0)
    for tname in ["u32", "s32", "u64", "b16"]:
        t = ALL_TYPES[tname]
        m = np.uint64((1 << t.bits) - 1)
        a, b = rng.integers(0, 2**63, 32, dtype=np.uint64) & m, rng.integers(0, 2**63, 32, dtype=np.uint64) & m
        for fn in ["add", "sub", "mul", "and", "or", "xor", "shl", "shr", "setp.eq", "setp.lt", "setp.hs"]:
            e = _E(fn, t, "lo" if fn == "mul" else None)
            fast = _fast_int(e)
            if fast is None:
                continue
            bb = b % np.uint64(40) if fn in ("shl", "shr") else b
            with np.errstate(all="ignore"):
                want = alu.compute(e, [a, bb], t)
                assert np.array_equal(fast(a, bb), want), (fn, tname)


def test_fma_rounds_once():
    # 1 + 2^-24 (the f32 product) plus -1: a double rounding of the product would give 0
    a = np.float32(1 + 2**-12)
    e = _E("fma", ALL_TYPES["f32"], "rn")
    bits = [alu.encode(np.array([v], np.float32), ALL_TYPES["f32"]) for v in (a, a, np.float32(-1.0))]
    got = alu.decode(alu.compute(e, bits, ALL_TYPES["f32"]), ALL_TYPES["f32"])[0]
    assert got == np.float32(2**-11 + 2**-24)


@settings(max_examples=24, deadline=None)
@given(pst.tma_cases())
def test_the_interpreter_agrees_with_the_model_on_tma_cases(case):
    from ptxdsl.testing import differential as diff

    with CPU:
        diff.check_case(case)
