"""Fragment layouts and the Accumulator / AFragment values: the layout tables, the registers they allocate, the
instructions pack / store / load / the epilogue helpers emit (assembled), and their rules."""
from __future__ import annotations

import re

import pytest

import ptxdsl as px
from ptxdsl import assemble
from ptxdsl.errors import LayoutError
from ptxdsl.fragment import (N_FLOAT, N_INTEGER, A_K, Accumulator, AFragment, a_coord, a_values, acc_coord,
                             acc_registers)


def test_accumulator_layout_example_thread_37():
    """Thread 37 (w 1, g 1, t 1): registers 0..4 -> D[17][2], D[17][3], D[25][2], D[25][3], D[17][10]."""
    assert [acc_coord(37, i) for i in range(5)] == [(17, 2), (17, 3), (25, 2), (25, 3), (17, 10)]


@pytest.mark.parametrize("n", [8, 64, 256])
def test_accumulator_covers_the_tile_once(n):
    seen = [acc_coord(tid, i) for tid in range(128) for i in range(n // 2)]
    assert sorted(seen) == [(r, c) for r in range(64) for c in range(n)]


@pytest.mark.parametrize("dtype", list(A_K))
def test_a_fragment_covers_one_k_step_once(dtype):
    per = 4 * a_values(dtype)
    seen = [a_coord(dtype, tid, i) for tid in range(128) for i in range(per)]
    assert sorted(seen) == [(r, c) for r in range(64) for c in range(A_K[dtype])]


def test_a_layout_rows_of_the_reference_table():
    # tid 5: w 0, g 1, t 1
    assert [a_coord("bf16", 5, i) for i in range(8)] == [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11),
                                                        (9, 10), (9, 11)]
    assert [a_coord("tf32", 5, j) for j in range(4)] == [(1, 1), (9, 1), (1, 5), (9, 5)]
    assert [a_coord("e4m3", 5, i) for i in (0, 3, 4, 8, 12)] == [(1, 4), (1, 7), (9, 4), (1, 20), (9, 20)]
    assert [a_coord("b1", 5, i) for i in (0, 31, 32, 64, 96)] == [(1, 32), (1, 63), (9, 32), (1, 160), (9, 160)]


@pytest.mark.parametrize("dtype, n, count, regtype", [("f32", 256, 128, "f32"), ("f16", 64, 16, "b32"),
                                                      ("s32", 48, 24, "s32")])
def test_accumulator_allocates_its_registers(dtype, n, count, regtype):
    k = px.kernel("acc", reqntid=128, arch="sm_90a")
    acc = Accumulator(k, n, dtype)
    assert len(acc.regs) == len(acc) == count == acc_registers(n, dtype)
    assert {r.type.name for r in acc.regs} == {regtype} and len(set(map(id, acc.regs))) == count


def test_coords_relative_and_absolute():
    k = px.kernel("acc", reqntid=128, arch="sm_90a")
    acc = Accumulator(k, 16)
    assert [acc.coords(i) for i in range(8)] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    assert acc.coords(4, tid=37) == (17, 10)
    assert acc.layout(37) == [acc_coord(37, i) for i in range(8)]
    f16 = Accumulator(k, 16, "f16")
    assert [f16.coords(j) for j in range(4)] == [(0, 0), (8, 0), (0, 8), (8, 8)]      # low halves
    with pytest.raises(LayoutError, match="fragment.register"):
        acc.coords(8)


def _body(k) -> list[str]:
    return [line.strip() for line in k.ptx().splitlines() if line.startswith("\t") and not line.startswith("\t.")]


def test_zero_pack_and_store_emit_cvt_pairs_and_stmatrix():
    with px.kernel("epi", reqntid=128, arch="sm_90a") as k:
        c = k.shared("c", 64 * 256 + 64, align=128)
        acc = Accumulator(k, 32)
        acc.zero(k)
        acc.store(k, c, 64 * 2 * 2, offset=64)
    body = _body(k)
    assert body[:16] == [f"mov.f32 %f{i}, 0f00000000;" for i in range(1, 17)]
    cvts = [s for s in body if s.startswith("cvt")]
    assert cvts == [f"cvt.rn.bf16x2.f32 %r{j + 1}, %f{2 * j + 2}, %f{2 * j + 1};" for j in range(8)]
    st = [s for s in body if s.startswith("stmatrix")]
    assert len(st) == 2
    assert re.fullmatch(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[%r\d+\], \{%r1, %r2, %r3, %r4\};", st[0])
    assert re.fullmatch(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[%r\d+\+32\], \{%r5, %r6, %r7, %r8\};",
                        st[1])
    assert any(s.startswith("mad.lo.u32") and s.endswith(", 256, %r" + s.split("%r")[-1]) for s in body)
    assemble(k.ptx())


def test_pack_to_fp8_pairs():
    with px.kernel("fp8", reqntid=128, arch="sm_90a") as k:
        acc = Accumulator(k, 16)
        acc.zero(k)
        q = acc.pack(k, "e5m2")
        out = k.param_ptr("out")
        for j, r in enumerate(q):
            k.st(px.u16, px.Addr(out, 2 * j), r)
    assert len(q) == 4 and {r.type.name for r in q} == {"b16"}
    cvts = [s for s in _body(k) if s.startswith("cvt")]
    assert cvts[1] == "cvt.rn.satfinite.e5m2x2.f32 %rs2, %f4, %f3;"
    assemble(k.ptx())


def test_epilogue_helpers_need_no_index_arithmetic():
    with px.kernel("bias", reqntid=128, arch="sm_90a") as k:
        out = k.shared("out", 64 * 64 * 2, align=128)
        bias, scale = k.param_ptr("bias"), k.param_ptr("scale")
        acc = Accumulator(k, 64)
        acc.zero(k)
        b = acc.load_columns(k, bias)
        s = acc.load_rows(k, scale)
        acc.map(k, lambda d, i: k.fma(d, s[i], b[i], out=d))
        acc.store(k, out, 128)
    body = _body(k)
    assert sum(s.startswith("ld.global.v2.f32") for s in body) == 8          # N/8 column pairs
    assert sum(s.startswith("ld.global.f32") for s in body) == 2             # rows g and g + 8
    fmas = [s for s in body if s.startswith("fma")]
    assert len(fmas) == 32 and all(f.split()[1].rstrip(",") == f.split()[2].rstrip(",") for f in fmas)
    # register i's column value is the (i >> 2)-th pair's (i & 1) half; its row value the (i >> 1 & 1)-th row
    assert [b.index(v) for v in b[:8]] == [0, 1, 0, 1, 4, 5, 4, 5]
    assert s[0] is s[1] and s[2] is s[3] and s[0] is not s[2]
    assemble(k.ptx())


def test_elements_are_base_plus_constant():
    k = px.kernel("el", reqntid=128, arch="sm_90a")
    acc = Accumulator(k, 16)
    items = acc.elements(k)
    assert len(items) == 8 and items[0][0] is acc.regs[0]
    assert [(r.offset, c.offset) for _, r, c in items] == [acc.coords(i) for i in range(8)]
    assert items[0][1].base is items[7][1].base and items[0][2].base is items[7][2].base


def test_a_fragment_loads_with_ldmatrix_x4():
    with px.kernel("afrag", reqntid=128, arch="sm_90a") as k:
        a = k.shared("a", 64 * 128, align=128)
        frag = AFragment(k, "bf16").load(k, a, 128, k_step=2)
        out = k.param_ptr("out")
        for i, r in enumerate(frag.regs):
            k.st(px.u32, px.Addr(out, 4 * i), r)
    ld = [s for s in _body(k) if s.startswith("ldmatrix")]
    assert len(ld) == 1 and ld[0].startswith("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r")
    assert ld[0].endswith("+64];")
    assemble(k.ptx())


def test_legal_n():
    assert N_FLOAT == tuple(range(8, 257, 8)) and 40 not in N_INTEGER and 240 in N_INTEGER
    k = px.kernel("n", reqntid=128, arch="sm_90a")
    for n, dtype in ((12, "f32"), (40, "s32"), (264, "f32"), (True, "f32")):
        with pytest.raises(LayoutError, match="fragment.n") as info:
            Accumulator(k, n, dtype)
        assert info.value.loc.file == __file__
    with pytest.raises(LayoutError, match="fragment.dtype"):
        Accumulator(k, 64, "bf16")


FRAGMENT_RULES = [
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 8192), 100), "fragment.pitch", "row_pitch=100"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 8192), 64), "fragment.pitch", "row_pitch=64"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 8192), 128, offset=128), "fragment.fits", "offset=128"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 8192 + 64), 128, offset=8), "fragment.offset", "offset=8"),
    (lambda k: Accumulator(k, 64).store(k, k.mbarrier("m"), 128), "fragment.buffer", "buf="),
    (lambda k: Accumulator(k, 24).store(k, k.shared("c", 8192), 128), "fragment.n", "n=24"),
    (lambda k: Accumulator(k, 64, "s32").pack(k), "fragment.pack", "dtype='s32'"),
    (lambda k: Accumulator(k, 64).pack(k, "e3m4"), "fragment.pack", "dtype='e3m4'"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 8192), 128, dtype="e4m3"), "fragment.pack",
     "dtype='e4m3'"),
    (lambda k: Accumulator(k, 64, "f16").pack(k, "bf16"), "fragment.pack", "dtype='bf16'"),
    (lambda k: AFragment(k, "tf32").load(k, k.shared("a", 8192), 128), "fragment.ldmatrix", "dtype='tf32'"),
    (lambda k: AFragment(k).load(k, k.shared("a", 8192), 64, k_step=2), "fragment.k-step", "k_step=2"),
    (lambda k: AFragment(k, "f32"), "fragment.dtype", "dtype='f32'"),
]


@pytest.mark.parametrize("build, rule, shown", FRAGMENT_RULES, ids=[f"{r[1]}-{r[2]}" for r in FRAGMENT_RULES])
def test_fragment_rules(build, rule, shown):
    k = px.kernel("bad", reqntid=128, arch="sm_90a")
    with pytest.raises(LayoutError) as info:
        build(k)
    assert info.value.rule == rule and shown in info.value.message, str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__


# ------------------------------------------------------------------- the addressing, run on the host per thread

from ptxdsl.descriptor import MatrixLayout                    # noqa: E402
from ptxdsl.fragment import HostLane, row_addresses          # noqa: E402


class _Buf:
    """What row_addresses reads of a shared buffer on the host: nothing but its identity (HostLane.mov)."""


def _simulate_store(n, base, smem_size, **where):
    """The image Accumulator.store writes, thread by thread: pack, the addresses the kernel computes (the same
    code on integers), stmatrix semantics; and the 64 x N bf16 matrix stored."""
    import numpy as np
    from ptxdsl.reference import wgmma as W

    rng = np.random.default_rng(n)
    d = rng.standard_normal((64, n)).astype(np.float32)
    q = W.pack_pairs(W.matrix_to_acc(d), "bf16")                 # 128 x N/4 words
    smem = np.zeros(smem_size, np.uint8)
    for w in range(4):
        lanes = [row_addresses(HostLane(32 * w + l, base), _Buf(), range(n // 16), **where) for l in range(32)]
        for b in range(n // 16):
            W.stmatrix_x4(smem, [lanes[l][b] for l in range(32)], q[32 * w:32 * w + 32, 4 * b:4 * b + 4])
    return smem, d.astype(ml_dtypes_bf16())


def ml_dtypes_bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


@pytest.mark.parametrize("n", [16, 64, 256])
def test_store_row_major_places_every_element(n):
    import numpy as np

    pitch, base = 2 * n + 16, 0x400
    smem, d = _simulate_store(n, base, base + 72 * pitch, row_pitch=pitch, offset=8 * pitch, row=0)
    want = np.zeros_like(smem)
    rows = want[base + 8 * pitch:base + 72 * pitch].reshape(64, pitch)
    rows[:, :2 * n] = d.view(np.uint8).reshape(64, 2 * n)
    assert np.array_equal(smem, want)


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("n", [16, 128])
def test_store_through_a_layout_is_what_the_layout_places(swizzle, n):
    """The swizzled epilogue writes exactly place_tile's bytes (what a TMA store of that swizzle reads), for the
    second warpgroup's rows of a 128-row tile."""
    import numpy as np
    from ptxdsl.reference import wgmma as W

    if swizzle != "none" and 2 * n > {"32B": 32, "64B": 64, "128B": 128}[swizzle] and (2 * n) % 32:
        pytest.skip("not a whole number of spans")
    lay = MatrixLayout("bf16", 128, n, swizzle)
    base = 2048
    smem, d = _simulate_store(n, base, base + lay.nbytes, layout=lay, row=64)
    want = np.zeros_like(smem)
    full = np.zeros((128, n), d.dtype)
    full[64:] = d
    W.place_tile(want, full, lay, base)
    mask = np.zeros_like(smem)
    W.place_tile(mask, np.r_[np.zeros((64, n)), np.ones((64, n))].astype(d.dtype), lay, base)
    assert np.array_equal(smem[mask != 0], want[mask != 0]) and not smem[(mask == 0)].any()


@pytest.mark.parametrize("swizzle", [None, "128B", "64B"])
def test_a_fragment_load_matches_the_a_layout(swizzle):
    """ldmatrix through the lane addresses gives each thread the A registers of the A fragment layout."""
    import numpy as np
    from ptxdsl.reference import wgmma as W

    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, size=(64, 64)).astype(ml_dtypes_bf16())
    base = 1024
    smem = np.zeros(base + 64 * 64 * 2, np.uint8)
    if swizzle is None:
        smem[base:] = a.view(np.uint8).reshape(-1)
        where = dict(row_pitch=128)
    else:
        lay = MatrixLayout("bf16", 64, 64, swizzle)
        W.place_tile(smem, a, lay, base)
        where = dict(layout=lay)
    for step in range(4):
        regs = np.zeros((128, 4), np.uint32)
        for w in range(4):
            lanes = [row_addresses(HostLane(32 * w + l, base), _Buf(), [step], **where)[0] for l in range(32)]
            regs[32 * w:32 * w + 32] = W.ldmatrix_x4(smem, lanes)
        assert np.array_equal(W.a_regs_to_matrix(regs, "bf16"), a[:, 16 * step:16 * step + 16]), step


def test_swizzled_store_and_load_emit_and_assemble():
    lay = MatrixLayout("bf16", 128, 64, "128B")
    with px.kernel("swz", reqntid=256, arch="sm_90a") as k:
        c = k.shared("c", lay.nbytes, align=1024)
        acc = Accumulator(k, 64)
        acc.zero(k)
        acc.store(k, c, layout=lay, row=64)
        frag = AFragment(k).load(k, c, layout=lay, k_step=3)
        out = k.param_ptr("out")
        k.st(px.u32, out, frag.regs[0])
    body = _body(k)
    assert sum(s.startswith("stmatrix") for s in body) == 4 and sum(s.startswith("xor") for s in body) >= 4
    assemble(k.ptx())


LAYOUT_RULES = [
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384, align=1024)), "fragment.pitch", "exactly one"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384, align=1024), layout=MatrixLayout("f16", 64, 64)),
     "fragment.layout", "layout="),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384, align=1024), layout=MatrixLayout("bf16", 64, 128)),
     "fragment.layout", "k = 64 columns"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384, align=1024), layout=MatrixLayout("bf16", 64, 64),
                                        row=8), "fragment.layout", "row + 64"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384, align=512), layout=MatrixLayout("bf16", 64, 64)),
     "descriptor.swizzle-align", "c.align=512"),
    (lambda k: Accumulator(k, 64).store(k, k.shared("c", 16384), 128, row=4), "fragment.row", "row=4"),
]


@pytest.mark.parametrize("build, rule, shown", LAYOUT_RULES, ids=[f"{r[1]}-{i}" for i, r in enumerate(LAYOUT_RULES)])
def test_layout_store_rules(build, rule, shown):
    k = px.kernel("bad", reqntid=128, arch="sm_90a")
    with pytest.raises(LayoutError) as info:
        build(k)
    assert info.value.rule == rule and shown in info.value.message, str(info.value)


def test_f16_accumulator_columns_come_in_pairs():
    k = px.kernel("f16cols", reqntid=128, arch="sm_90a")
    acc = Accumulator(k, 32, "f16")
    cols, rows = acc.load_columns(k, k.param_ptr("bias")), acc.load_rows(k, k.param_ptr("scale"))
    assert len(cols) == len(rows) == 8
    assert all(isinstance(c, tuple) and len(c) == 2 for c in cols)
    assert cols[0] == cols[1] and cols[2] == cols[3] and cols[0] != cols[2]          # registers 0, 1: block 0
    assert rows[0] is not rows[1] and rows[0] is rows[2]                           # rows g, g + 8, g, ...
