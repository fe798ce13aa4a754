"""The wgmma CPU model (ptxdsl.reference.wgmma): descriptor decoding against the worked example's byte formula,
tiles placed and read back through their descriptors for every layout, TMA-written tiles read through
MatrixLayout.for_tensormap, the base-offset table, fragment round trips, and mma_async's arithmetic."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ptxdsl import reference as ref
from ptxdsl.descriptor import ELEMENT_BITS, K_STEP, MatrixLayout
from ptxdsl.errors import LayoutError
from ptxdsl.fragment import N_FLOAT, N_INTEGER, acc_coord
from ptxdsl.reference import wgmma as W
from ptxdsl.tensormap import TensorMapSpec

RNG = np.random.default_rng(7)


def _ints(shape, lo=-8, hi=8):
    return RNG.integers(lo, hi, size=shape)


def test_worked_example_bytes_read_through_its_descriptors():
    """A (64x64) at 0x400 and B (256x64) at 0x2400, K-major 128B, placed with the H200-verified formula
    S + m*128 + ((k/8) ^ (m%8))*16 + (k%8)*2; descriptors ...0040 + 2j and ...0240 + 2j read K step j."""
    smem = np.zeros(0x2400 + 32768, np.uint8)
    a = _ints((64, 64)).astype(ml_dtypes.bfloat16)
    b = _ints((256, 64)).astype(ml_dtypes.bfloat16)
    for base, m in ((0x400, a), (0x2400, b)):
        for r in range(m.shape[0]):
            for k in range(64):
                at = base + r * 128 + ((k // 8) ^ (r % 8)) * 16 + (k % 8) * 2
                smem[at:at + 2] = np.frombuffer(m[r, k].tobytes(), np.uint8)
    for j in range(4):
        got_a = W.read_operand(smem, 0x4000004000010040 + 2 * j, dtype="bf16", rows=64)
        got_b = W.read_operand(smem, 0x4000004000010240 + 2 * j, dtype="bf16", rows=256)
        assert np.array_equal(got_a, a[:, 16 * j:16 * j + 16]) and np.array_equal(got_b, b[:, 16 * j:16 * j + 16])
    lay_a, lay_b = MatrixLayout("bf16", 64, 64), MatrixLayout("bf16", 256, 64)
    assert np.array_equal(W.read_tile(smem, lay_a, 0x400), a) and np.array_equal(W.read_tile(smem, lay_b, 0x2400), b)
    # and the layout places it the same way, byte for byte
    again = np.zeros_like(smem)
    W.place_tile(again, a, lay_a, 0x400)
    W.place_tile(again, b, lay_b, 0x2400)
    assert np.array_equal(again, smem)
    d = W.mma_async(None, a, b)
    assert np.array_equal(d, a.astype(np.float32) @ b.astype(np.float32).T)


def _random(dtype, shape):
    if dtype == "b1":
        return RNG.integers(0, 2, size=shape).astype(np.uint8)
    if dtype in ("s8", "u8"):
        return RNG.integers(-128 if dtype == "s8" else 0, 128 if dtype == "s8" else 256, size=shape).astype(
            W.ELEMENT_DTYPES[dtype])
    return RNG.standard_normal(shape).astype(np.float32).astype(W.ELEMENT_DTYPES[dtype])


def _same(x, y):
    """Equal bit patterns (NaNs of fp8 included)."""
    return np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))


@st.composite
def placed_layouts(draw):
    dtype = draw(st.sampled_from(sorted(ELEMENT_BITS)))
    major = draw(st.sampled_from(["K", "MN"])) if dtype in ("bf16", "f16") else "K"
    swizzle = draw(st.sampled_from(["none", "32B", "64B", "128B"]))
    rows = 8 * draw(st.integers(1, 16))
    k = K_STEP[dtype] * draw(st.integers(1, 4))
    run = (k if major == "K" else rows) * ELEMENT_BITS[dtype] // 8
    w = {"none": 16, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    if swizzle != "none" and (run > w and run % w or run % 16):
        swizzle = "none"
    lay = MatrixLayout(dtype, rows, k, swizzle, major)
    address = lay.repeat * draw(st.integers(1, 8)) if swizzle != "none" else 16 * draw(st.integers(0, 64))
    return lay, address


@given(placed_layouts())
def test_a_placed_tile_reads_back_through_its_descriptors(case):
    lay, address = case
    m = _random(lay.dtype, (lay.rows, lay.k))
    smem = np.full(address + lay.nbytes + 64, 0xA5, np.uint8)
    W.place_tile(smem, m, lay, address)
    assert _same(W.read_tile(smem, lay, address), m)


def test_a_tma_box_is_the_tile_for_tensormap_describes():
    """load_box (the TMA model, GPU-checked) writes what read_tile reads through MatrixLayout.for_tensormap."""
    g = _random("bf16", (128, 256))                          # numpy order: 128 rows of 256 K
    for swizzle, kbox in (("128B", 64), ("64B", 32), ("32B", 16)):
        spec = TensorMapSpec.tiled_for(g.shape, "bf16", (64, kbox), swizzle=swizzle)
        lay = MatrixLayout.for_tensormap(spec)
        smem = np.zeros(1024 + lay.nbytes, np.uint8)
        smem[1024:] = ref.load_box(spec, g, (kbox, 64))
        assert _same(W.read_tile(smem, lay, 1024), g[64:128, kbox:2 * kbox]), swizzle


def test_base_offset_table():
    """A 64x64 bf16 128B tile 256 bytes past a 1024-byte boundary (reference table of the H200 runs): data with
    the absolute pattern reads right with base offset 0, wrong with 2; data whose pattern restarts at the tile
    reads right with 2 (= (start >> 7) & 7), wrong with 0."""
    a = _random("bf16", (64, 64))
    start = 1024 + 256
    absolute, restarted = np.zeros(start + 8192, np.uint8), np.zeros(start + 8192, np.uint8)
    W.place_tile(absolute, a, MatrixLayout("bf16", 64, 64), start)
    W.place_tile(restarted, a, MatrixLayout("bf16", 64, 64, base_offset=2), start)
    for smem, bo, right in ((absolute, 0, True), (absolute, 2, False), (restarted, 0, False), (restarted, 2, True)):
        lay = MatrixLayout("bf16", 64, 64, base_offset=bo)
        assert _same(W.read_tile(smem, lay, start), a) == right, (bo, right)


@pytest.mark.parametrize("dtype, ns", [("f32", N_FLOAT), ("f16", N_FLOAT), ("s32", N_INTEGER)])
def test_accumulator_registers_round_trip(dtype, ns):
    for n in ns[::5] + ns[-1:]:
        d = _ints((64, n)).astype(W.ACC_DTYPES[dtype])
        regs = W.matrix_to_acc(d, dtype)
        assert regs.shape == (128, n // 4 if dtype == "f16" else n // 2)
        assert np.array_equal(W.acc_to_matrix(regs, n, dtype), d)
        if dtype == "f32":                                   # register i of thread t is acc_coord(t, i)
            assert all(regs[t, i] == d[acc_coord(t, i)] for t in (0, 37, 127) for i in (0, 3, n // 2 - 1))
        if dtype == "f16":                                   # low half = even element
            lo = (regs[37, 0] & 0xFFFF).astype(np.uint16).view(np.float16)
            assert lo == d[acc_coord(37, 0)]


@pytest.mark.parametrize("dtype", sorted(ELEMENT_BITS))
def test_a_registers_round_trip(dtype):
    a = _random(dtype, (64, K_STEP[dtype]))
    regs = W.matrix_to_a_regs(a, dtype)
    assert regs.shape == (128, 4) and regs.dtype == np.uint32
    assert _same(W.a_regs_to_matrix(regs, dtype), a)


def test_a_registers_pack_low_first():
    a = np.zeros((64, 16), ml_dtypes.bfloat16)
    a[1, 2], a[1, 3] = 1.0, 2.0                              # thread 5 (g 1, t 1), register 0: low, high
    regs = W.matrix_to_a_regs(a, "bf16")
    assert regs[5, 0] == 0x4000_3F80


@pytest.mark.parametrize("atype, btype", [("s8", "s8"), ("s8", "u8"), ("u8", "s8"), ("u8", "u8")])
def test_integer_mma_equals_numpy(atype, btype):
    a, b = _random(atype, (64, 64)), _random(btype, (48, 64))
    d = RNG.integers(-2**20, 2**20, size=(64, 48)).astype(np.int32)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    assert np.array_equal(W.mma_async(d, a, b, dtype="s32", atype=atype, btype=btype), want + d)
    assert np.array_equal(W.mma_async(d, a, b, dtype="s32", atype=atype, btype=btype, scale_d=0), want)


def test_integer_wrap_and_satfinite():
    a = np.full((64, 32), 127, np.int8)
    b = np.full((8, 32), 127, np.int8)
    d = np.full((64, 8), 2**31 - 100, np.int32)
    wrapped = W.mma_async(d, a, b, dtype="s32", atype="s8")
    assert wrapped[0, 0] == (2**31 - 100 + 32 * 127 * 127) - 2**32
    assert W.mma_async(d, a, b, dtype="s32", atype="s8", satfinite=True)[0, 0] == 2**31 - 1
    assert W.mma_async(-d, -a, b, dtype="s32", atype="s8", satfinite=True)[0, 0] == -2**31


def test_b1_is_popc_of_and():
    a, b = _random("b1", (64, 256)), _random("b1", (16, 256))
    got = W.mma_async(None, a, b, dtype="s32", atype="b1")
    assert got[3, 5] == int(np.sum(a[3] & b[5])) and np.array_equal(got, a.astype(int) @ b.astype(int).T)


def test_float_rounding_rules():
    # tf32 keeps 10 mantissa bits and truncates: 1 + 2^-10 + 2^-11 + 2^-12 becomes 1 + 2^-10 (nearest: 1 + 2^-9)
    a = np.zeros((64, 8), np.float32)
    b = np.zeros((8, 8), np.float32)
    a[0, 0], b[0, 0] = 1 + 2**-10 + 2**-11 + 2**-12, 1.0
    assert W.mma_async(None, a, b, atype="tf32")[0, 0] == np.float32(1 + 2**-10)
    # an f16 accumulator rounds once: 2048 + 1 is not representable (ties to even: 2048)
    a16 = np.zeros((64, 16), np.float16)
    b16 = np.zeros((8, 16), np.float16)
    a16[0, :2], b16[0, :2] = (2048, 1), (1, 1)
    assert W.mma_async(None, a16, b16, dtype="f16", atype="f16")[0, 0] == np.float16(2048)
    # imm-scale negates, scale_d=0 drops D
    a8, b8 = _random("e4m3", (64, 32)), _random("e5m2", (8, 32))
    d = np.ones((64, 8), np.float32)
    exact = a8.astype(np.float64) @ b8.astype(np.float64).T
    got = W.mma_async(d, a8, b8, atype="e4m3", btype="e5m2", scale_a=-1)
    assert np.array_equal(got, (1 - exact).astype(np.float32))
    assert np.array_equal(W.mma_async(d, a8, b8, atype="e4m3", btype="e5m2", scale_b=-1, scale_d=0),
                          (-exact).astype(np.float32))


@given(st.integers(0, 2**32 - 1), st.sampled_from(["bf16", "f16", "tf32"]), st.sampled_from([16, 64, 256]))
def test_any_summation_order_is_within_the_stated_bound(seed, atype, k):
    """A sequential f32 sum in a random order (what some hardware might do) stays within error_bound."""
    rng = np.random.default_rng(seed)
    k = k - k % K_STEP[atype]
    a = rng.standard_normal((64, k)).astype(np.float32).astype(W.ELEMENT_DTYPES[atype])
    b = rng.standard_normal((8, k)).astype(np.float32).astype(W.ELEMENT_DTYPES[atype])
    d = rng.standard_normal((64, 8)).astype(np.float32)
    model = W.mma_async(d, a, b, atype=atype)
    fa, fb = W._as_float64(a, atype), W._as_float64(b, atype)
    order = rng.permutation(k)
    seq = d.copy()
    for i in order:
        seq = (seq + (fa[:, i:i + 1] * fb[:, i][None, :]).astype(np.float32)).astype(np.float32)
    assert np.all(np.abs(seq.astype(np.float64) - model) <= W.error_bound(a, b, d, atype=atype))


def test_wgmma_ss_and_rs_on_registers():
    n = 32
    a, b = _random("bf16", (64, 16)), _random("bf16", (n, 16))
    la, lb = MatrixLayout("bf16", 64, 16, "32B"), MatrixLayout("bf16", n, 16, "32B")
    smem = np.zeros(0x2000, np.uint8)
    W.place_tile(smem, a, la, 0x400)
    W.place_tile(smem, b, lb, 0xC00)
    d = RNG.standard_normal((64, n)).astype(np.float32)
    want = W.mma_async(d, a, b)
    ss = W.wgmma(smem, W.matrix_to_acc(d), la.descriptor(0x400), lb.descriptor(0xC00), n=n)
    rs = W.wgmma(smem, W.matrix_to_acc(d), W.matrix_to_a_regs(a, "bf16"), lb.descriptor(0xC00), n=n)
    assert np.array_equal(W.acc_to_matrix(ss, n), want) and np.array_equal(W.acc_to_matrix(rs, n), want)
    # MN-major B read with trans_b: the same product
    lbt = MatrixLayout("bf16", n, 16, "none", "MN")
    W.place_tile(smem, b, lbt, 0x1000)
    tr = W.wgmma(smem, W.matrix_to_acc(d), la.descriptor(0x400), lbt.descriptor(0x1000), n=n, trans_b=True)
    assert np.array_equal(W.acc_to_matrix(tr, n), want)


MODEL_RULES = [
    (lambda: W.read_operand(np.zeros(64, np.uint8), 0x4000004000010000, dtype="bf16", rows=64), "model.bounds"),
    (lambda: W.read_operand(np.zeros(9000, np.uint8), 0x4000004000010000, dtype="s8", rows=64, trans=True),
     "model.trans"),
    (lambda: W.read_operand(b"", 0, dtype="f32", rows=64), "model.dtype"),
    (lambda: W.decode_descriptor(1 << 64), "model.descriptor"),
    (lambda: W.place_tile(np.zeros(8192, np.uint8), np.zeros((8, 8)), MatrixLayout("bf16", 64, 64), 0),
     "model.shape"),
    (lambda: W.mma_async(None, np.zeros((64, 16)), np.zeros((8, 16)), dtype="s32", atype="bf16"), "model.dtype"),
    (lambda: W.mma_async(None, np.zeros((64, 16)), np.zeros((8, 8))), "model.shape"),
    (lambda: W.mma_async(None, np.zeros((64, 16)), np.zeros((8, 16)), scale_a=2), "model.scale"),
    (lambda: W.mma_async(None, np.zeros((64, 16)), np.zeros((8, 16)), satfinite=True), "model.satfinite"),
    (lambda: W.acc_to_matrix(np.zeros((128, 3)), 8), "model.shape"),
    (lambda: W.acc_to_matrix(np.zeros((128, 6)), 12), "fragment.n"),
    (lambda: W.a_regs_to_matrix(np.zeros((128, 3)), "bf16"), "model.shape"),
]


@pytest.mark.parametrize("call, rule", MODEL_RULES, ids=[f"{i}-{r[1]}" for i, r in enumerate(MODEL_RULES)])
def test_model_errors_are_layout_errors(call, rule):
    with pytest.raises(LayoutError) as info:
        call()
    assert info.value.rule == rule, str(info.value)


def test_read_operand_takes_a_matrix_descriptor():
    """A kernel's descriptor values, read at the address its buffer has: role A reads 64 rows, B the layout's."""
    import ptxdsl as px

    la, lb = MatrixLayout("bf16", 128, 64, "64B"), MatrixLayout("bf16", 32, 64, "64B")
    a, b = _random("bf16", (128, 64)), _random("bf16", (32, 64))
    with px.kernel("descs", reqntid=128, arch="sm_90a", verify=False) as k:
        buf = k.shared("buf", la.nbytes + lb.nbytes, align=1024)
        da = k.matrix_descriptor(buf, la).at_row(64)
        db = k.matrix_descriptor(buf, lb, offset=la.nbytes)
        moved = db.advance(k.tid_x(), stride=16)
    smem = np.zeros(0x400 + la.nbytes + lb.nbytes, np.uint8)
    W.place_tile(smem, a, la, 0x400)
    W.place_tile(smem, b, lb, 0x400 + la.nbytes)
    for j in range(4):
        got_a = W.read_operand(smem, da.advance_k(j), "A", address=0x400)
        got_b = W.read_operand(smem, db.advance_k(j), address=0x400)
        assert got_a.shape == (64, 16) and _same(got_a, a[64:, 16 * j:16 * j + 16])
        assert got_b.shape == (32, 16) and _same(got_b, b[:, 16 * j:16 * j + 16])
    with pytest.raises(LayoutError, match="model.descriptor"):
        W.read_operand(smem, db)                                   # no address: no value
    with pytest.raises(LayoutError, match="model.descriptor"):
        W.read_operand(smem, moved, address=0x400)                 # moved by a register
    with pytest.raises(LayoutError, match="model.role"):
        W.read_operand(smem, 0, "C", dtype="bf16")
    with pytest.raises(LayoutError, match="model.shape"):
        W.read_operand(smem, 0, dtype="bf16")                      # B without its N
