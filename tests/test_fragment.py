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
    assert [b.index(v) for v in b[:8]] == [0, 1, 0, 1, 4, 5, 4, 5] and s[0] is s[1] and s[2] is s[3] and s[0] is not s[2]
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
    (lambda k: Accumulator(k, 64).pack(k, "e4m3"), "fragment.pack", "dtype='e4m3'"),
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
