"""ldmatrix, stmatrix and the packing cvt (.f16x2/.bf16x2 from two .f32): a warp-level 8x8 transpose built with
them emits exactly the expected PTX, assembles with nvJitLink, passes the verifier and reads back from its .ptxd
text; every form assembles; the verifier reads their effects (warp-collective, shared-memory access); the
invalid uses are build-time errors. On a GPU (the gpu marker): the transpose, ldmatrix's fragment layout with
stmatrix as its inverse, and the packing conversions' halves, .relu and .satfinite, against numpy.

    python -m pytest tests/test_matrix_ops.py -q        # on the H200 too
"""
from __future__ import annotations

import itertools

import pytest

import ptxdsl as px
from ptxdsl import lang
from ptxdsl.errors import DSLError, TargetError
from ptxdsl.ir import Reg
from ptxdsl.verify import check

TRANSPOSE_BODY = """\
ld.param.u64 %rd1, [src];
cvta.to.global.u64 %rd2, %rd1;
ld.param.u64 %rd3, [dst];
cvta.to.global.u64 %rd4, %rd3;
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 3;
cvt.u64.u32 %rd5, %r2;
add.u64 %rd6, %rd2, %rd5;
ld.global.v2.f32 {%f1, %f2}, [%rd6];
cvt.rn.bf16x2.f32 %r3, %f2, %f1;
shl.b32 %r4, %r1, 2;
and.b32 %r5, %r1, 7;
shl.b32 %r6, %r5, 4;
mov.u32 %r7, tile;
add.u32 %r8, %r7, %r4;
st.shared.b32 [%r8], %r3;
bar.warp.sync 0xFFFFFFFF;
add.u32 %r9, %r7, %r6;
ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%r10}, [%r9];
mov.u32 %r11, out;
add.u32 %r12, %r11, %r6;
stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r12], {%r10};
bar.warp.sync 0xFFFFFFFF;
add.u32 %r13, %r11, %r4;
ld.shared.b32 %r14, [%r13];
cvt.u64.u32 %rd7, %r4;
add.u64 %rd8, %rd4, %rd7;
st.global.b32 [%rd8], %r14;
ret;"""


def transpose(verify=True):
    """One warp: src holds an 8x8 row-major .f32 matrix (two elements per lane); each lane packs its two into
    a bf16x2 (element 2c in the lower half, 2c+1 in the upper), the warp stores the bf16 matrix to shared
    memory, ldmatrix.trans loads it transposed and stmatrix stores that fragment row-major: dst receives the
    8x8 bf16 transpose."""
    with px.kernel("transpose8x8", reqntid=32, verify=verify) as k:
        src = k.param_ptr("src")
        dst = k.param_ptr("dst")
        tile = k.shared("tile", 128, align=128)
        out = k.shared("out", 128, align=128)
        lane = k.tid_x()
        x0, x1 = k.ld("f32", k.add(src, k.cvt("u64", k.shl(lane, 3))), vec=2)
        packed = k.cvt("bf16x2", x1, x0)                 # x1 -> upper half, x0 -> lower half
        word = k.shl(lane, 2)                            # this lane's 4 bytes of a row-major 8x8 .b16 matrix
        row = k.shl(k.and_(lane, 7), 4)                  # lanes 0-7: the 16-byte row addresses of the matrix
        tile_base = k.mov(tile)
        k.st("b32", k.add(tile_base, word), packed, space="shared")
        k.bar_warp_sync()
        frag = k.ldmatrix(k.add(tile_base, row), num=1, trans=True)
        out_base = k.mov(out)
        k.stmatrix(k.add(out_base, row), frag)
        k.bar_warp_sync()
        mine = k.ld("b32", k.add(out_base, word), space="shared")
        k.st("b32", k.add(dst, k.cvt("u64", word)), mine)
    return k


def body(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()]
    start = lines.index("{", lines.index(".reqntid 32, 1, 1"))
    return "\n".join(ln for ln in lines[start + 1:] if ln.endswith(";") and not ln.startswith((".reg", ".shared")))


def test_transpose_emits_the_expected_ptx_and_assembles():
    ptx = px.emit(transpose())
    assert body(ptx.text) == TRANSPOSE_BODY
    assert ptx.target == px.Target("sm_90", (7, 8))
    px.assemble(ptx.text, "sm_90")


def test_transpose_passes_the_verifier_clean():
    assert check(transpose(verify=False)) == []


def test_transpose_reads_back_from_its_ptxd_text():
    k = transpose()
    text = lang.to_ptxd(k)
    for line in ("r3 = cvt.bf16x2.f32 f2, f1", "r10 = ldmatrix.x1.trans [r9]", "stmatrix.x1 [r12], r10"):
        assert f"    {line}\n" in text, text
    (again,) = lang.loads(text, "t.ptxd")
    assert px.emit(again).text == px.emit(k).text


@pytest.mark.parametrize("stmt, ptx", [
    ("r1, r2, r3, r4 = ldmatrix.sync.aligned.m8n8.x4.shared.b16 [tile]",
     "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [tile];"),
    ("r1, r2 = ldmatrix.x2.trans.shared::cta [tile + 32]",
     "ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16 {%r1, %r2}, [tile+32];"),
    ("r1 = cvt.rz.relu.satfinite.f16x2.f32 1.0, 2.0",
     "cvt.rz.relu.satfinite.f16x2.f32 %r1, 0f3F800000, 0f40000000;"),
])
def test_ptxd_statements(stmt, ptx):
    (k,) = lang.loads(f"kernel k()\n{{\n    shared tile: b8[256] align 128\n    {stmt}\n}}\n", "s.ptxd",
                      verify=False)
    assert ptx in px.emit(k).text


def test_ptxd_stmatrix_count_must_agree_with_the_registers():
    with pytest.raises(DSLError, match=r"\.x2 disagrees with the operands, which give \.x4") as info:
        lang.loads("kernel k()\n{\n    shared tile: b8[256] align 128\n    r1, r2, r3, r4 = ldmatrix.x4 [tile]\n"
                   "    stmatrix.x2 [tile], {r1, r2, r3, r4}\n}\n", "s.ptxd", verify=False)
    assert info.value.loc.line == 5


def test_builder_results_and_inferred_count():
    with px.kernel("r", verify=False) as k:
        tile = k.shared("tile", 256, align=128)
        four = k.ldmatrix(tile)
        one = k.ldmatrix(tile, num="x1")
        two = k.ldmatrix(tile, out=four[:2])             # .x2: as many as out= names
        k.stmatrix(tile.at(128), four, trans=True)
        k.stmatrix(tile, two, space="shared::cta")
    assert isinstance(four, tuple) and len(four) == 4 and isinstance(one, Reg) and two == four[:2]
    text = px.emit(k).text
    for line in ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [tile];",
                 "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r5}, [tile];",
                 "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r1, %r2}, [tile];",
                 "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [tile+128], {%r1, %r2, %r3, %r4};",
                 "stmatrix.sync.aligned.m8n8.x2.shared::cta.b16 [tile], {%r1, %r2};"):
        assert f"\t{line}\n" in text, line


def test_every_form_assembles():
    """Every .num, .trans and state space of ldmatrix / stmatrix (a generic address too), and every rounding,
    .relu and .satfinite of both packing conversions, in one kernel."""
    with px.kernel("forms", verify=False) as k:
        tile = k.shared("tile", 256, align=128)
        generic = k.cvta(tile, "shared")
        a, b = k.mov(1.5, px.f32), k.mov(-2.0, px.f32)
        regs = k.ldmatrix(tile)
        for num, trans, space in itertools.product((1, 2, 4), (False, True), ("shared", "shared::cta", None)):
            addr = generic if space is None else tile
            k.ldmatrix(addr, num=num, trans=trans, space=space)
            k.stmatrix(addr, regs[:num], trans=trans, space=space)
        for type_, rnd, relu, satfinite in itertools.product(("f16x2", "bf16x2"), ("rn", "rz"), (False, True),
                                                             (False, True)):
            k.cvt(type_, a, b, rnd=rnd, relu=relu, satfinite=satfinite)
        k.cvt("bf16x2", 0.5, b)                          # an .f32 constant is an operand too
    ptx = px.emit(k)
    assert ptx.target == px.Target("sm_90", (8, 1))     # .satfinite on a packing cvt: ISA 8.1
    text = ptx.text
    assert text.count("ldmatrix.sync.aligned.m8n8.") == 19 and text.count("stmatrix.sync.aligned.m8n8.") == 18
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.b16 {" in text and "stmatrix.sync.aligned.m8n8.x4.b16 [%rd1]" in text
    assert "cvt.rz.relu.satfinite.bf16x2.f32 " in text and "cvt.rn.bf16x2.f32 %r" in text
    px.assemble(text, "sm_90")


def test_satfinite_needs_ptx_8_1():
    with pytest.raises(TargetError, match="below the 8.1"):
        with px.kernel("s", ptx="8.0", verify=False) as k:
            k.cvt("bf16x2", k.mov(1.0, px.f32), k.mov(1.0, px.f32), satfinite=True)


@pytest.mark.parametrize("build, match", [
    (lambda k, t, f: k.ldmatrix(t, num=3), "num=3 is not allowed"),
    (lambda k, t, f: k.ldmatrix(t, num=2, out=k.ldmatrix(t)), "num=2 takes 2 destination registers, got 4"),
    (lambda k, t, f: k.ldmatrix(t.at(8)), "16-byte aligned"),
    (lambda k, t, f: k.ldmatrix(k.param_ptr("g")), "global"),
    (lambda k, t, f: k.ldmatrix(t, space="global"), "space='global' is not allowed"),
    (lambda k, t, f: k.stmatrix(t, (1, 2)), "expected a register, got an immediate"),
    (lambda k, t, f: k.stmatrix(t, k.ldmatrix(t)[:3]), "a vector of 3 values"),
    (lambda k, t, f: k.cvt("bf16x2", f), "the operand lo is missing"),
    (lambda k, t, f: k.cvt(px.bf16, f, f), "expected one of 'f16x2', 'bf16x2'"),
    (lambda k, t, f: k.cvt("bf16x2", f, f, rnd="rm"), "rnd='rm' is not allowed"),
    (lambda k, t, f: k.cvt("bf16x2", f, f, sat=True), "unknown argument sat="),
    (lambda k, t, f: k.cvt("bf16x2", k.mov(1, px.u32), f), r"expected a float \(.f32\)"),
    (lambda k, t, f: k.cvt("bf16x2", f, f, out=k.mov(0.0, px.f32)), "to a .b32 register"),
    (lambda k, t, f: k.cvt("f32", k.mov(1, px.u32), relu=True), "unknown argument relu="),
])
def test_invalid_uses_are_build_time_errors(build, match):
    with pytest.raises(DSLError, match=match) as info:
        with px.kernel("bad", verify=False) as k:
            build(k, k.shared("tile", 256, align=128), k.mov(1.0, px.f32))
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_the_verifier_sees_a_divergent_ldmatrix():
    def fn(k):
        tile = k.shared("tile", 128, align=128)
        with k.if_(k.setp("lt", k.tid_x(), 8)):
            k.ldmatrix(tile, num=1)
    with px.kernel("div", reqntid=32, verify=False) as k:
        fn(k)
    assert [d.rule for d in check(k)] == ["sync-aligned-divergent"]


@pytest.mark.parametrize("access", ["ldmatrix", "stmatrix"])
def test_the_verifier_sees_the_shared_memory_access_racing_a_tma_load(access):
    spec = px.TensorMapSpec.tiled_for((64, 64), "bf16", (8, 8))     # one box: 128 bytes
    with px.kernel("race", reqntid=32, verify=False) as k:
        src = k.param_tensormap("src", spec)
        tile = k.shared("tile", 128, align=128)
        bar = k.mbarrier("bar")
        t0 = k.setp("eq", k.tid_x(), 0)
        with k.if_(t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            k.mbarrier_arrive_expect_tx(bar, 128)
            k.cp_async_bulk_tensor(tile, src, (0, 0), mbar=bar)
        regs = k.ldmatrix(tile) if access == "ldmatrix" else k.stmatrix(tile, k.mov(0, px.b32))
        k.mbarrier_wait(bar, parity=0)
    found = check(k)
    assert [d.rule for d in found] == ["tma-load-race"], found
    assert regs is None or len(regs) == 4


# ------------------------------------------------------------------------------------------ on the GPU


def fragments(trans: bool):
    """Four 8x8 .b16 matrices (512 bytes) to shared memory; ldmatrix.x4 (lanes 8i..8i+7 give the rows of matrix
    i) writes each lane's four registers to `regs`; stmatrix.x4 of them (same .trans) to another buffer, which
    goes back to `back`."""
    with px.kernel(f"fragments{int(trans)}", reqntid=32) as k:
        src, regs, back = k.param_ptr("src"), k.param_ptr("regs"), k.param_ptr("back")
        tile = k.shared("tile", 512, align=128)
        again = k.shared("again", 512, align=128)
        off = k.shl(k.tid_x(), 4)
        goff = k.cvt("u64", off)
        tile_addr, again_addr = k.add(k.mov(tile), off), k.add(k.mov(again), off)
        k.st("b32", tile_addr, k.ld("b32", k.add(src, goff), vec=4), space="shared")
        k.bar_warp_sync()
        frag = k.ldmatrix(tile_addr, trans=trans)
        k.st("b32", k.add(regs, goff), frag)
        k.stmatrix(again_addr, frag, trans=trans)
        k.bar_warp_sync()
        k.st("b32", k.add(back, goff), k.ld("b32", again_addr, space="shared", vec=4))
    return k


PACKS = (("bf16x2", {}), ("f16x2", {}), ("f16x2", {"relu": True}), ("f16x2", {"satfinite": True}),
         ("bf16x2", {"rnd": "rz"}), ("f16x2", {"relu": True, "satfinite": True}))


def packs():
    """Every lane converts the pair src[0], src[1] each way of PACKS; lane 0's words go to dst."""
    with px.kernel("packs", reqntid=32) as k:
        src, dst = k.param_ptr("src"), k.param_ptr("dst")
        a, b = k.ld("f32", src, vec=2)
        words = [k.cvt(type_, a, b, **kw) for type_, kw in PACKS]
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            for i in range(0, len(words), 2):
                k.st("b32", k.add(dst, k.mov(4 * i, px.u64)), tuple(words[i:i + 2]))
    return k


FP8_PACKS = (("e4m3x2", {}), ("e5m2x2", {}), ("e4m3x2", {"relu": True}), ("e5m2x2", {"relu": True}))
FP8_MAX = {"e4m3x2": 448.0, "e5m2x2": 57344.0}


def fp8_packs():
    """Every lane packs src[0], src[1] into each FP8 pair of FP8_PACKS (a .b16 word) and widens the word back to an
    f16x2 (.relu on the way back for the pairs packed without it, which keep their negative values); lane 0 stores
    the .b16 words to dst[0:2] (as two u32) and the widened pairs to dst[4:8] (a 16-byte aligned vector)."""
    with px.kernel("fp8_packs", reqntid=32) as k:
        src, dst = k.param_ptr("src"), k.param_ptr("dst")
        a, b = k.ld("f32", src, vec=2)
        pairs = [k.cvt(type_, a, b, **kw) for type_, kw in FP8_PACKS]
        wide = [k.cvt("f16x2", p, stype=type_, relu=not kw) for p, (type_, kw) in zip(pairs, FP8_PACKS)]
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            k.st("b16", dst, tuple(pairs))
            k.st("b32", k.add(dst, k.mov(16, px.u64)), tuple(wide))
    return k


def test_fp8_pair_conversions_spell_as_ptx_and_refuse_what_ptxas_rejects():
    with px.kernel("fp8", verify=False) as k:
        a = k.mov(1.5, px.f32)
        pair = k.cvt("e4m3x2", a, a)
        k.cvt("e5m2x2", a, a, relu=True)
        k.cvt("f16x2", pair, stype="e4m3x2")
        k.cvt("f16x2", pair, stype=".e5m2x2", relu=True)
        for bad, match in ((lambda: k.cvt("e4m3x2", a, a, rnd="rz"), "rounded to nearest"),
                           (lambda: k.cvt("f16x2", a, stype="e4m3x2"), r"expected a 16-bit operand"),
                           (lambda: k.cvt("f16x2", 0x3C3C, stype="e4m3x2"), "expected a register"),
                           (lambda: k.cvt("bf16x2", pair, stype="e4m3x2"), "type='bf16x2' is not allowed"),
                           (lambda: k.cvt("e4m3x2", a, a, out=k.reg(px.b32)), r"expected a \.b16 destination")):
            with pytest.raises(px.DSLError, match=match):
                bad()
    ptx = px.emit(k)
    assert [ln.strip() for ln in ptx.text.splitlines() if ln.strip().startswith("cvt")] == [
        "cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f1;", "cvt.rn.relu.satfinite.e5m2x2.f32 %rs2, %f1, %f1;",
        "cvt.rn.f16x2.e4m3x2 %r1, %rs1;", "cvt.rn.relu.f16x2.e5m2x2 %r2, %rs1;"]
    assert (ptx.target.arch, ptx.target.version) == ("sm_90", "7.8")
    px.assemble(ptx.text, "sm_90")


def test_the_gpu_kernels_build_clean_and_assemble():
    for k in (fragments(False), fragments(True), packs(), fp8_packs()):
        assert check(k) == []
        ptx = px.emit(k)
        px.assemble(ptx.text, ptx.target.arch)


@pytest.mark.gpu
def test_transpose_on_the_gpu():
    import ml_dtypes
    import numpy as np
    from ptxdsl.runtime import DeviceArray

    m = np.random.default_rng(7).standard_normal((8, 8)).astype(np.float32)
    src, dst = DeviceArray.to_device(m), DeviceArray.zeros((8, 8), np.uint16)
    px.compile(transpose())["transpose8x8"](src, dst, grid=1, block=32, sync=True)
    assert np.array_equal(dst.to_host(), m.astype(ml_dtypes.bfloat16).view(np.uint16).T)


@pytest.mark.gpu
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragment_layout_and_stmatrix_inverse_on_the_gpu(trans):
    """Lane l's register i holds row l/4 of matrix i (of its transpose with .trans), columns 2(l%4) in the low
    half and 2(l%4)+1 in the high half; stmatrix with the same .trans stores the matrices back."""
    import numpy as np
    from ptxdsl.runtime import DeviceArray

    mats = np.arange(4 * 64, dtype=np.uint16).reshape(4, 8, 8)
    src = DeviceArray.to_device(mats)
    regs, back = DeviceArray.zeros((32, 4), np.uint32), DeviceArray.zeros((4, 8, 8), np.uint16)
    px.compile(fragments(trans))[f"fragments{int(trans)}"](src, regs, back, grid=1, block=32, sync=True)
    seen = mats.transpose(0, 2, 1) if trans else mats
    lane = np.arange(32)
    row, col = lane // 4, 2 * (lane % 4)
    want = seen[:, row, col].astype(np.uint32) | (seen[:, row, col + 1].astype(np.uint32) << 16)
    assert np.array_equal(regs.to_host(), want.T)
    assert np.array_equal(back.to_host(), mats)


@pytest.mark.gpu
def test_packing_cvt_on_the_gpu():
    """src goes to the upper half, lo to the lower; .relu clamps negatives to 0, .satfinite to the largest finite
    value (f16: 65504, where the plain conversion gives inf)."""
    import ml_dtypes
    import numpy as np
    from ptxdsl.runtime import DeviceArray

    prog = px.compile(packs())
    for a, b in ((1.5, -2.0), (1e5, -1e5), (-3.0, 0.1)):
        src, dst = DeviceArray.to_device(np.array([a, b], np.float32)), DeviceArray.zeros((len(PACKS),), np.uint32)
        prog["packs"](src, dst, grid=1, block=32, sync=True)
        for (type_, kw), word in zip(PACKS, dst.to_host()):
            half = np.float16 if type_ == "f16x2" else ml_dtypes.bfloat16
            hi, lo = (np.array([a, b], np.float32) if not kw.get("relu") else np.maximum([a, b], 0).astype(np.float32))
            if kw.get("satfinite"):
                hi, lo = (np.clip(x, -65504, 65504) for x in (hi, lo))
            if kw.get("rnd") == "rz":          # round toward zero: truncate the f32 bits to bf16's
                want = [int(np.array(x, np.float32).view(np.uint32)) >> 16 for x in (hi, lo)]
            else:
                with np.errstate(over="ignore"):           # 1e5 is inf in f16
                    want = [int(np.array(x).astype(half).view(np.uint16)) for x in (hi, lo)]
            assert (int(word) >> 16, int(word) & 0xFFFF) == tuple(want), (a, b, type_, kw, hex(int(word)))


@pytest.mark.gpu
def test_fp8_pair_cvt_on_the_gpu():
    """cvt.rn.satfinite{.relu}.e4m3x2/e5m2x2.f32: src to the upper byte, lo to the lower, rounded to nearest even and
    clamped to the largest finite FP8 value (e4m3: 448, e5m2: 57344); cvt.rn{.relu}.f16x2 of the pair gives the
    same two values as f16 (.relu: negatives to 0)."""
    import ml_dtypes
    import numpy as np
    from ptxdsl.runtime import DeviceArray

    prog = px.compile(fp8_packs())
    fp8 = {"e4m3x2": ml_dtypes.float8_e4m3fn, "e5m2x2": ml_dtypes.float8_e5m2}
    for a, b in ((1.5, -2.0), (1e5, -1e5), (-3.3, 0.1), (300.0, -0.015625)):
        src = DeviceArray.to_device(np.array([a, b], np.float32))
        dst = DeviceArray.zeros((4 + len(FP8_PACKS),), np.uint32)
        prog["fp8_packs"](src, dst, grid=1, block=32, sync=True)
        out = dst.to_host()
        halves = out[:2].view(np.uint16)
        for i, (type_, kw) in enumerate(FP8_PACKS):
            x = np.array([a, b], np.float32)
            if kw.get("relu"):
                x = np.maximum(x, 0).astype(np.float32)
            q = np.clip(x, -FP8_MAX[type_], FP8_MAX[type_]).astype(fp8[type_])
            bits = q.view(np.uint8).astype(int)
            assert int(halves[i]) == bits[0] << 8 | bits[1], (a, b, type_, kw, hex(int(halves[i])))
            back = q.astype(np.float32)
            if not kw:                          # widened with .relu
                back = np.maximum(back, 0)
            want = back.astype(np.float16).view(np.uint16).astype(int)
            word = int(out[4 + i])
            assert (word >> 16, word & 0xFFFF) == (want[0], want[1]), (a, b, type_, kw, hex(word))
