"""The wgmma family (ptxdsl/isa/wgmma.py) through the builder: exact PTX, what is inferred from the operands,
the effects the verifier reads, the forms ptxdsl refuses (with the rule and the user's line), the target floors,
and the .ptxd round trip. Every combination the declaration admits is assembled in test_isa_forms."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import ptxdsl as px
from ptxdsl import lang
from ptxdsl.errors import DSLError, TargetError
from ptxdsl.isa import effects as fx
from ptxdsl.isa import wgmma as W
from test_lang import assert_round_trip


def _regs(k, n, t=px.f32):
    return tuple(k.mov(0.0 if t is px.f32 else 0, t) for _ in range(n))


class Env:
    """Operands for one test kernel: descriptors, A registers, accumulators and a predicate."""

    def __init__(self, k):
        self.k = k
        self.da = k.mov(0x4000004000010000, px.u64)
        self.db = k.mov(0x4000004000010040, px.b64)
        self.a = _regs(k, 4, px.b32)
        self.p = k.setp("ne", k.mov(1, px.u32), 0)

    def acc(self, n, t=px.f32):
        return _regs(self.k, n, t)


def _lines(k) -> list:
    return [ln.strip() for ln in px.emit(k).text.splitlines() if ln.strip().startswith("wgmma")]


def _build(body, **kw):
    with px.kernel("t", verify=False, **kw) as k:
        out = body(k, Env(k))
    return k, out


# --------------------------------------------------------------------------------- exact text


def _acc_text(first, n, cls="f"):
    return "{" + ", ".join(f"%{cls}{i}" for i in range(first, first + n)) + "}"


def test_the_four_instructions_spell_as_ptx_and_assemble():
    def body(k, e):
        d = e.acc(64)
        k.wgmma_fence()
        k.wgmma_mma_async(d, e.da, e.db, atype="bf16", scale_d=e.p)
        k.wgmma_mma_async(d, e.da, e.db, atype="bf16", scale_d=~e.p, imm_scale_a=-1, imm_trans_a=1, imm_trans_b=1)
        k.wgmma_mma_async(d[:32], e.a, e.db, atype="f16", scale_d=0, imm_trans_b=1)
        k.wgmma_commit_group()
        k.wgmma_wait_group(1)
        k.wgmma_wait_group(0)
    k, _ = _build(body)
    acc = _acc_text(1, 64)
    assert _lines(k) == [
        "wgmma.fence.sync.aligned;",
        f"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {acc}, %rd1, %rd2, %p1, 1, 1, 0, 0;",
        f"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {acc}, %rd1, %rd2, !%p1, -1, 1, 1, 1;",
        f"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {_acc_text(1, 32)}, {{%r1, %r2, %r3, %r4}}, %rd2, 0, "
        f"1, 1, 1;",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 1;",
        "wgmma.wait_group.sync.aligned 0;",
    ]
    ptx = px.emit(k)
    assert (ptx.target.arch, ptx.target.version) == ("sm_90a", "8.0")
    px.assemble(ptx.text, "sm_90a")


@pytest.mark.parametrize("kw, regs, text", [
    ({"atype": "tf32"}, (8, px.f32), "m64n16k8.f32.tf32.tf32 {D}, %rd1, %rd2, 1, 1, -1;"),
    ({"atype": "e4m3", "btype": "e5m2", "dtype": "f16"}, (4, px.b32),
     "m64n16k32.f16.e4m3.e5m2 {D}, %rd1, %rd2, 1, 1, -1;"),
    ({"atype": "s8", "btype": "s8", "satfinite": True}, (12, px.s32),
     "m64n24k32.satfinite.s32.s8.s8 {D}, %rd1, %rd2, 1;"),
    ({"atype": "u8", "btype": "s8"}, (16, px.u32), "m64n32k32.s32.u8.s8 {D}, %rd1, %rd2, 1;"),
    ({"atype": "b1"}, (24, px.b32), "m64n48k256.s32.b1.b1.and.popc {D}, %rd1, %rd2, 1;"),
])
def test_the_operands_follow_the_type_family(kw, regs, text):
    """imm-scale only on float forms, imm-trans only on f16/bf16, .and.popc written for b1."""
    def body(k, e):
        scale_b = -1 if kw["atype"] in W.FLOATS else 1
        return k.wgmma_mma_async(e.acc(*regs), e.da, e.db, imm_scale_b=scale_b, **kw)
    k, _ = _build(body)
    cls = "f" if regs[1] is px.f32 else "r"
    first = 1 if cls == "f" else 6
    (line,) = [ln for ln in _lines(k) if "mma_async" in ln]
    assert line == "wgmma.mma_async.sync.aligned." + text.replace("{D}", _acc_text(first, regs[0], cls))
    ptx = px.emit(k)
    assert ptx.target.version == ("8.4" if {kw["atype"], kw.get("btype")} == {"s8", "u8"} else "8.0")
    px.assemble(ptx.text, "sm_90a")


def test_descriptor_constants_are_written_as_64_bit_hex():
    k, _ = _build(lambda k, e: k.wgmma_mma_async(e.acc(4), 0x4000004000010000, 16, atype="bf16"))
    assert _lines(k)[0].endswith(", 0x4000004000010000, 0x0000000000000010, 1, 1, 1, 0, 0;")


# -------------------------------------------------------------------------------- inference


def test_n_and_dtype_are_inferred_from_the_accumulators():
    def body(k, e):
        k.wgmma_mma_async(e.acc(128), e.da, e.db, atype="bf16")                   # 128 f32: N = 256
        k.wgmma_mma_async(e.acc(16, px.b32), e.da, e.db, atype="f16", n=64)       # N/4 registers: f16
        k.wgmma_mma_async(e.acc(16, px.s32), e.da, e.db, atype="s8")              # integers: s32
    k, _ = _build(body)
    assert [ln.split(" ")[0].split(".")[4:7] for ln in _lines(k)] == [
        ["m64n256k16", "f32", "bf16"], ["m64n64k16", "f16", "f16"], ["m64n32k32", "s32", "s8"]]


def test_descriptor_and_fragment_values_are_kept_and_give_the_types():
    """A descriptor value (`.reg`, `.layout.dtype`) and a fragment (`.regs`): PTX gets the registers, the op (and
    the verifier through its effects) keeps the objects."""
    def body(k, e):
        a = SimpleNamespace(reg=e.da, layout=SimpleNamespace(dtype="e5m2"), buffer="A")
        b = SimpleNamespace(reg=e.db, layout=SimpleNamespace(dtype="e4m3"), buffer="B")
        frag = SimpleNamespace(regs=e.acc(32))
        k.wgmma_fence()
        k.wgmma_mma_async(frag, a, b)
        return a, b, frag
    k, (a, b, frag) = _build(body)
    op = k.kernel.body[-1].op
    assert op.a is a and op.b is b and op.d is frag
    assert _lines(k)[-1].startswith("wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3 " + _acc_text(1, 32)
                                    + ", %rd1, %rd2, 1, 1, 1;")
    assert op.effects() == (fx.Collective("warpgroup"), fx.MmaAsync(acc=frag.regs, descs=(a, b), a_regs=()))
    assert op.defs() == frag.regs
    assert set(op.uses()) == set(frag.regs) | {a.reg, b.reg}


def test_effects_are_the_agreed_ones():
    def body(k, e):
        d = e.acc(8)
        k.wgmma_fence()
        k.wgmma_mma_async(d, e.a, e.db, atype="bf16", scale_d=0)
        k.wgmma_commit_group()
        k.wgmma_wait_group(3)
        return d
    k, d = _build(body)
    fence, mma, commit, wait = (s.op for s in k.kernel.body[-4:])
    assert fence.effects() == (fx.Collective("warpgroup"), fx.WgmmaFence())
    assert mma.effects() == (fx.Collective("warpgroup"), fx.MmaAsync(acc=d, descs=(mma.b,), a_regs=mma.a))
    assert commit.effects() == (fx.CommitGroup("wgmma"),)
    assert wait.effects() == (fx.WaitGroup(3, queue="wgmma"),)
    assert not set(mma.uses()) & set(d), "scale-d = 0: the accumulators are written, not read"


# ----------------------------------------------------------------------------- refused forms


@pytest.mark.parametrize("build, match", [
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="bf16", dtype="f16"), r"accumulate into \.f32 only"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="bf16", btype="f16"), r"pairs with B \.bf16 only"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="e4m3", btype="s8"), r"\.e4m3 or \.e5m2 only"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32, px.s32), e.da, e.db, atype="s8", dtype="f32"), r"into \.s32 only"),
    (lambda k, e: k.wgmma_mma_async(e.acc(20, px.s32), e.da, e.db, atype="s8"), "m64n40k32.*multiples of 16"),
    (lambda k, e: k.wgmma_mma_async(e.acc(20, px.s32), e.da, e.db, atype="b1"), "m64n40k256.*multiples of 16"),
    (lambda k, e: k.wgmma_mma_async(e.acc(6), e.da, e.db, atype="bf16"), "n=12 is not a wgmma N"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="bf16", n=264), "n=264 is not a wgmma N"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="tf32", imm_trans_a=1), "imm_trans_a.*K-major"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="e5m2", imm_trans_b=1), "imm_trans_b.*K-major"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.a, e.db, atype="f16", imm_trans_a=1), "A from registers"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32, px.s32), e.da, e.db, atype="u8", imm_scale_b=-1), "float forms"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="f16", satfinite=True), "satfinite is for"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32, px.s32), e.da, e.db, atype="b1", satfinite=True), "satfinite is for"),
    (lambda k, e: k.wgmma_mma_async(e.acc(32), e.da, e.db, atype="bf16", n=128), "takes exactly 64"),
    (lambda k, e: k.wgmma_mma_async(e.acc(16), e.da, e.db, atype="f16", dtype="f16"),
     r"expected a register of type \.b32"),
    (lambda k, e: k.wgmma_mma_async(e.acc(16), e.da, e.db, atype="s8"), r"\.s32 or \.u32 or \.b32"),
    (lambda k, e: (lambda d: k.wgmma_mma_async(d[:7] + d[:1], e.da, e.db, atype="bf16"))(e.acc(8)),
     r"d\[7\]=%f1 is also d\[0\]"),
    (lambda k, e: (lambda d: k.wgmma_mma_async(d, d[4:], e.db, atype="s8"))(e.acc(8, px.b32)),
     "also an accumulator register"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.acc(4), e.db, atype="tf32"), r"a\[0\]=%f9 \(\.f32\)"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.a[:2], e.db, atype="bf16"), "2 registers; this form takes exactly 4"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.a[0], atype="bf16"), "expected a matrix descriptor"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), k.shared("s", 256), e.db, atype="bf16"), "no shared-memory symbol"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, -1, atype="bf16"), "64-bit unsigned"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="bf16", scale_d=2), "0 or 1"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="bf16", scale_d=e.a[0]), r"expected a \.pred"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="bf16", imm_scale_a=0), "constant 1 or -1"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="bf16", imm_trans_b=e.a[0]), "constant 0 or 1"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db), "cannot tell the multiplicand types"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="f64"), "atype='f64' is not allowed"),
    (lambda k, e: k.wgmma_mma_async(e.acc(8), e.da, e.db, atype="bf16", n="m64n16k32"), "take K = 16"),
    (lambda k, e: k.wgmma_mma_async(e.a[0], e.da, e.db, atype="bf16"), "a tuple of registers or a fragment"),
    (lambda k, e: k.wgmma_wait_group(8), r"n=8 is out of range; expected 0\.\.7"),
    (lambda k, e: k.wgmma_wait_group(e.a[0]), "integer constant"),
])
def test_a_form_ptxas_rejects_is_refused_naming_the_value_and_the_line(build, match):
    with pytest.raises(DSLError, match=match) as info:
        _build(build)
    assert info.value.loc is not None and info.value.loc.file == __file__


@pytest.mark.parametrize("kw, match", [
    ({"arch": "sm_90"}, "not available on .target sm_90;"),
    ({"arch": "sm_100a"}, "not available on .target sm_100a"),
    ({"arch": "sm_120a"}, "not available on .target sm_120a"),
])
def test_wgmma_is_sm_90a_only(kw, match):
    for build in (lambda k, e: k.wgmma_fence(), lambda k, e: k.wgmma_commit_group(),
                  lambda k, e: k.wgmma_wait_group(0),
                  lambda k, e: k.wgmma_mma_async(e.acc(4), e.da, e.db, atype="bf16")):
        with pytest.raises(TargetError, match=match + ".*sm_90a"):
            _build(build, **kw)


def test_mixed_integer_types_need_ptx_8_4():
    with pytest.raises(TargetError, match="below the 8.4"):
        _build(lambda k, e: k.wgmma_mma_async(e.acc(4, px.s32), e.da, e.db, atype="s8", btype="u8"), ptx="8.3")
    k, _ = _build(lambda k, e: k.wgmma_mma_async(e.acc(4, px.s32), e.da, e.db, atype="s8"), ptx="8.0")
    px.assemble(px.emit(k).text, "sm_90a")


# ------------------------------------------------------------------------------------- .ptxd


def test_ptxd_round_trips_brace_lists_and_negated_predicates():
    def body(k, e):
        d = e.acc(128)
        k.wgmma_fence()
        k.wgmma_mma_async(d, e.da, e.db, atype="bf16", scale_d=~e.p, imm_trans_b=1)
        k.wgmma_mma_async(d[:64], e.a, e.db, atype="f16", imm_scale_a=-1)
        k.wgmma_mma_async(e.acc(8, px.s32), e.a, 0x10, atype="u8", btype="s8", satfinite=True)
        k.wgmma_mma_async(e.acc(8, px.s32), e.da, e.db, atype="b1")
        k.wgmma_commit_group()
        k.wgmma_wait_group(0)
    k, _ = _build(body)
    text = assert_round_trip(k.finish(), verify=False)
    assert "wgmma.mma_async.m64n256k16.f32.bf16.bf16 {f1, f2, " in text and ", f128}, rd1, rd2, !p1, 1, 1, 0, 1" \
        in text
    assert "wgmma.mma_async.m64n16k256.s32.b1.b1.and.popc {" in text


PTXD = """\
kernel mma(u64 adesc, u64 bdesc, u32 first)
{
    p = setp.eq.u32 first, 1
    reg f32 c0
    reg f32 c1
    reg f32 c2
    reg f32 c3
    wgmma.fence
    wgmma.mma_async.m64n8k16.f32.bf16.bf16 {c0, c1, c2, c3}, adesc, bdesc, !p, 1, 1, 0, 0
    wgmma.mma_async.m64n8k8.f32.tf32.tf32 {c0, c1, c2, c3}, adesc, bdesc, 1, -1, 1
    wgmma.commit_group
    wgmma.wait_group 0
}
"""


def test_ptxd_text_builds_the_same_ops_as_ptx_writes_them():
    (k,) = lang.loads(PTXD, "mma.ptxd", verify=False)
    lines = _lines(k)
    assert lines[1] == "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, " \
                       "!%p1, 1, 1, 0, 0;"
    assert lines[2] == "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, " \
                       "-1, 1;"
    px.assemble(px.emit(k).text, "sm_90a")


@pytest.mark.parametrize("statement, match", [
    ("wgmma.mma_async.m64n8k32.f32.bf16.bf16 {c0, c1, c2, c3}, adesc, bdesc", "take K = 16"),
    ("wgmma.mma_async.m64n8k16.f32.bf16.bf16.and.popc {c0, c1, c2, c3}, adesc, bdesc", "and.popc disagrees"),
    ("wgmma.mma_async.m64n16k16.f32.bf16.bf16 {c0, c1, c2, c3}, adesc, bdesc", "takes exactly 8"),
    ("wgmma.mma_async.m64n12k16.f32.bf16.bf16 {c0, c1, c2, c3}, adesc, bdesc", "unknown qualifier"),
])
def test_ptxd_statements_ptxas_would_reject_are_errors(statement, match):
    text = PTXD.replace("    wgmma.fence\n", f"    {statement}\n")
    with pytest.raises(DSLError, match=match):
        lang.loads(text, "bad.ptxd", verify=False)


# ------------------------------------------------------------------------- the declared space


def test_the_declaration_admits_exactly_the_forms_of_the_ptx_tables():
    """The (shape, types, .satfinite, A source) the declaration admits are the ISA's table (reference section 3.2),
    written out here independently: 546 shapes and types, each with A from a descriptor or from registers; and
    the immediates each family takes."""
    import declared as D

    floats = {("f16", "f16"): ("f16", "f32"), ("bf16", "bf16"): ("f32",), ("tf32", "tf32"): ("f32",),
              **{(a, b): ("f16", "f32") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")}}
    ints = [(a, b) for a in ("s8", "u8") for b in ("s8", "u8")] + [("b1", "b1")]
    int_n = [8, 16, 24] + list(range(32, 257, 16))
    want = {(n, d, a, b, False, src) for (a, b), ds in floats.items() for d in ds for n in range(8, 257, 8)
            for src in ("desc", "regs")}
    want |= {(n, "s32", a, b, sat, src) for a, b in ints for n in int_n for src in ("desc", "regs")
             for sat in ((False, True) if a != "b1" else (False,))}
    valid = D.valid(W.WgmmaMmaAsync)
    have = {(q["n"], q["dtype"], q["atype"], q["btype"], q["satfinite"], q["a"]) for q in valid}
    assert len(want) == 1092 and have == want
    per_form = {}
    for q in valid:
        key = (q["atype"], q["a"])
        per_form.setdefault(key, set()).add((q["imm_scale_a"], q["imm_scale_b"], q["imm_trans_a"], q["imm_trans_b"]))
    scales = {(x, y) for x in (1, -1) for y in (1, -1)}
    for (atype, src), imms in per_form.items():
        trans = {(0, 0)} if atype not in ("f16", "bf16") else {(0, 0), (0, 1)} | ({(1, 0), (1, 1)} if src == "desc"
                                                                               else set())
        sc = scales if atype not in ("s8", "u8", "b1") else {(1, 1)}
        assert imms == {s + t for s in sc for t in trans}, (atype, src)
    assert len(valid) == 4932
