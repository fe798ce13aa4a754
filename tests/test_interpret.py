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
        "tensormap_replace", "user_kernel", "pipe_gather", "pipe_transpose", "wgmma_tile"]
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


def test_a_wrong_expect_tx_is_a_deadlock_naming_the_waiting_line(cpu, monkeypatch):
    from ptxdsl.runtime import DeviceArray

    from tile_common import TILE_BYTES

    k = _tile_kernel(TILE_BYTES + 16)
    a = DeviceArray.to_device(np.zeros((64, 64), np.uint16))
    spec = px.TensorMapSpec.from_array(a, (64, 64), dtype="bf16")
    with pytest.raises(px.LaunchError, match="expect-tx-mismatch"):       # the launch checks run as on the GPU
        px.compile(k, device="cpu")["planted"](spec, grid=1, block=128)
    monkeypatch.setenv("PTXDSL_LAUNCH_CHECKS", "0")
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


def test_warp_collectives_atomics_and_signed_division():
    with px.kernel("coll", verify=False) as k:
        out = k.param_ptr("out")
        cnt = k.param_ptr("cnt")
        tid = k.mov(sreg.tid_x)
        lane = k.and_(tid, 31)
        base = k.add(out, k.cvt(px.u64, k.shl(tid, 5)))        # 8 words per thread
        d = k.shfl_sync("bfly", tid, 1)
        k.st(px.u32, base, d)
        d2 = k.shfl_sync("down", tid, 3)
        k.st(px.u32, k.add(base, 4), d2)
        odd = k.setp("eq", k.and_(tid, 1), 1)
        ball = k.vote_sync("ballot", odd)
        k.st(px.u32, k.add(base, 8), ball)
        s = k.redux_sync("add", tid)
        k.st(px.u32, k.add(base, 12), s)
        old = k.atom("add", px.u32, cnt, 1)
        k.st(px.u32, k.add(base, 16), old)
        k.red("max", px.u32, k.add(cnt, 4), tid)
        idx = k.shfl_sync("idx", tid, 5)
        k.st(px.u32, k.add(base, 20), idx)
        neg = k.sub(k.mov(0, type=px.s32), k.cvt(px.s32, tid))
        q = k.div(neg, 3)
        k.st(px.s32, k.add(base, 24), q)
        r = k.rem(neg, 3)
        k.st(px.s32, k.add(base, 28), r)

    out = np.zeros((64, 8), np.uint32)
    cnt = np.zeros(2, np.uint32)
    px.compile(k, device="cpu")["coll"](out, cnt, grid=1, block=64)
    t = np.arange(64)
    assert (out[:, 0] == t ^ 1).all()
    assert (out[:, 1] == np.where(t % 32 + 3 < 32, t + 3, t)).all()
    assert (out[:, 2] == 0xAAAAAAAA).all()
    assert (out[:, 3] == np.where(t < 32, sum(range(32)), sum(range(32, 64)))).all()
    assert sorted(out[:, 4]) == list(range(64)) and cnt[0] == 64 and cnt[1] == 63
    assert (out[:, 5] == (t // 32) * 32 + 5).all()
    assert (out[:, 6].view(np.int32) == -(t // 3)).all(), out[:, 6].view(np.int32)
    assert (out[:, 7].view(np.int32) == -(t % 3)).all()


def test_a_cluster_writes_its_peer_s_shared_memory_through_mapa():
    with px.kernel("dsmem", reqnctapercluster=(2, 1, 1), verify=False) as k:
        out = k.param_ptr("out")
        buf = k.shared("buf", 16)
        rank = k.mov(sreg.cluster_ctarank)
        tid = k.mov(sreg.tid_x)
        peer = k.xor(rank, 1)
        k.barrier_cluster_arrive()
        k.barrier_cluster_wait()
        with k.if_(k.setp("eq", tid, 0)):
            remote = k.mapa(k.mov(buf), peer)
            k.st(px.u32, remote, k.add(rank, 100), space="shared::cluster")
        k.barrier_cluster_arrive()
        k.barrier_cluster_wait()
        with k.if_(k.setp("eq", tid, 0)):
            v = k.ld(px.u32, buf, space="shared::cta")
            k.st(px.u32, k.add(out, k.cvt(px.u64, k.shl(k.mov(sreg.ctaid_x), 2))), v)

    out = np.zeros(4, np.uint32)
    px.compile(k, device="cpu")["dsmem"](out, grid=4, block=64)
    assert list(out) == [101, 100, 101, 100]


def test_a_missing_arrival_is_a_deadlock_with_the_barrier_s_state():
    with px.kernel("two_arrivals", reqntid=64, verify=False) as k:
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        with k.if_(k.setp("eq", tid, 0)):
            k.mbarrier_init(bar, 2)
        k.bar_sync(0)
        with k.if_(k.setp("eq", tid, 0)):
            k.mbarrier_arrive(bar)                          # one of the two arrivals
        k.mbarrier_wait(bar, parity=0)                      # the waits
    with pytest.raises(Deadlock) as e:
        px.compile(k, device="cpu")["two_arrivals"](grid=1, block=64)
    assert e.value.loc.line == _line_of("# the waits")
    assert "phase 0 (parity 0), 1 of 2 arrivals pending, 0 transaction bytes pending" in str(e.value)


def test_every_declared_op_runs_or_is_named_not_interpretable_yet():
    from ptxdsl.interpret.execute import NOT_YET, interpretable
    from ptxdsl.isa import OPS

    missing = [c.__name__ for c in OPS if not interpretable(c) and c.mnemonic.split(".")[0] not in NOT_YET]
    assert missing == [], f"declare how the interpreter runs {missing} (ptxdsl/interpret/execute.py HANDLERS)"


def test_bulk_reductions_and_remote_async_stores():
    with px.kernel("reduce_into", reqnctapercluster=(2, 1, 1), verify=False) as k:
        out = k.param_ptr("out")
        src = k.shared("src", 64, align=16)
        box = k.shared("box", 16, align=16)
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        rank = k.mov(sreg.cluster_ctarank)
        k.st(px.u32, k.add(k.mov(src), k.shl(tid, 2)), k.add(tid, k.mul(rank, 16)), space="shared::cta")
        with k.if_(k.setp("eq", tid, 0)):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.barrier_cluster_arrive()
        k.barrier_cluster_wait()
        with k.if_(k.setp("eq", tid, 0)):
            k.cp_reduce_async_bulk("add", out, src, 64, type=px.u32, dst_space="global")
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group(0)
            k.mbarrier_arrive_expect_tx(bar, 4)
            peer_bar = k.mapa(k.mov(bar), k.xor(rank, 1))
            peer_box = k.mapa(k.mov(box), k.xor(rank, 1))
            k.red_async("max", px.u32, peer_box, k.add(rank, 1000), peer_bar)     # into the peer's box[0]
        k.mbarrier_wait(bar, parity=0)
        with k.if_(k.setp("eq", tid, 0)):
            k.st(px.u32, k.add(out, k.cvt(px.u64, k.add(k.shl(rank, 2), 64))), k.ld(px.u32, box, space="shared::cta"))
    out = np.zeros(18, np.uint32)
    px.compile(k, device="cpu")["reduce_into"](out, grid=2, block=16)
    assert list(out[:16]) == [2 * i + 16 for i in range(16)]
    assert list(out[16:]) == [1001, 1000]


def test_ptxdsl_run_cpu_runs_a_file_s_host_check(capsys):
    from ptxdsl.cli import main

    assert main(["run", "--cpu", str(ROOT / "examples" / "tma_store_tile.py")]) == 0
    out = capsys.readouterr()
    assert "PASS: tma_store_tile" in out.out
    assert "1 passed on the CPU interpreter, 0 failed, 0 not run" in out.err


def test_tensor_maps_built_from_host_arrays_read_and_write_them_in_place(cpu):
    import tma_store_tile

    rows, cols = tma_store_tile.ROWS, tma_store_tile.COLS
    a = np.random.default_rng(2).integers(0, 2**16, (rows, cols), dtype=np.uint16)
    out = np.zeros_like(a)
    src = px.TensorMapSpec.from_array(a, (64, 64), dtype="bf16")
    dst = px.TensorMapSpec.from_array(out, (64, 64), dtype="bf16")
    assert src.global_address and dst.global_address
    px.compile(tma_store_tile.KERNEL, device="cpu")["tma_store_tile"](src, dst, grid=(cols // 64, rows // 64),
                                                                       block=128)
    assert np.array_equal(out, a)


def test_a_flag_nobody_publishes_is_a_livelock_naming_the_spin(cpu, monkeypatch):
    import test_flags

    from ptxdsl.interpret import Livelock
    from ptxdsl.interpret import scheduler

    monkeypatch.setattr(scheduler, "LIVELOCK_STEPS", 20_000)
    with pytest.raises(Livelock) as e:
        test_flags.run_handoff(False, publish=False, launches=1)
    assert e.value.rule == "interpret.livelock"
    assert e.value.loc.line == test_flags.marked_line(test_flags.handoff, "# WAIT")
