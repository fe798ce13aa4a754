"""The .ptxd text front end: byte-identical twins of the Python examples, errors that point at the .ptxd
line, grammar-generated strings that only ever raise ptxdsl errors, and builder -> .ptxd -> builder
round trips that keep the IR and the PTX."""
import importlib
import math
import re
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

import ptxdsl as px
from ptxdsl import lang, sreg
from ptxdsl.ir import (
    Addr,
    If,
    Imm,
    Instr,
    Label,
    LabelStmt,
    Loop,
    Param,
    PredNot,
    Reg,
    SharedAlloc,
    Sink,
    SpecialReg,
    TensorMapRef,
    WaitLoop,
)
from ptxdsl.lang import forms
from ptxdsl.lang.parse import grammar_text, parser
from ptxdsl.target import parse_ptx_version
from ptxdsl.verify import RULES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TWINS = sorted(p.stem for p in EXAMPLES.glob("tma_*.py"))
PTXD_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.ptxd"))


def build(text, name="t.ptxd"):
    (k,) = lang.loads(text, name)
    return k


def ptx_of(k):
    return px.emit(k).text


# ------------------------------------------------------------------------------ IR structure


def structure(k):
    """Everything the IR says about a kernel except source locations, as comparable tuples."""

    def val(v):
        if isinstance(v, Reg):
            return ("reg", v.type.name, v.index, v.space)
        if isinstance(v, PredNot):
            return ("not", val(v.reg))
        if isinstance(v, Imm):
            return ("imm", repr(v.value), v.type.name)
        if isinstance(v, SpecialReg):
            return ("sreg", v.name)
        if isinstance(v, SharedAlloc):
            return ("shared", v.name)
        if isinstance(v, Param):
            return ("param", v.name)
        if isinstance(v, Label):
            return ("label", v.name)
        if isinstance(v, Sink):
            return "_"
        if isinstance(v, Addr):
            return ("addr", val(v.base), v.offset)
        if isinstance(v, TensorMapRef):
            return ("tmap", val(v.addr), v.param.name if v.param else None)
        if isinstance(v, (tuple, list)):
            return tuple(val(x) for x in v)
        if is_dataclass(v):
            return (type(v).__name__,) + tuple((f.name, val(getattr(v, f.name))) for f in fields(v))
        if isinstance(v, float):
            return ("float", repr(v))
        return v

    def body(stmts):
        out = []
        for s in stmts or ():
            allow = tuple(sorted(getattr(s, "allow", ())))
            if isinstance(s, Instr):
                out.append(("instr", val(s.op), val(s.guard), allow))
            elif isinstance(s, LabelStmt):
                out.append(("label", s.label.name))
            elif isinstance(s, If):
                out.append(("if", val(s.cond), s.kind, body(s.then), None if s.orelse is None else body(s.orelse)))
            elif isinstance(s, Loop):
                out.append(("loop", val(s.var), val(s.start), val(s.stop), s.step, val(s.cond), body(s.body)))
            elif isinstance(s, WaitLoop):
                out.append(("wait", val(s.op), val(s.debug_regs), s.site, allow))
            else:
                raise AssertionError(f"unknown statement {s!r}")
        return tuple(out)

    params = tuple((p.name, p.kind, p.type.name, val(p.value), getattr(p, "tmap", None)) for p in k.params)
    shared = tuple((a.name, a.nbytes, a.align, a.dynamic, a.offset, a.role, a.base) for a in k.shared)
    version = parse_ptx_version(k.ptx) if k.ptx else None
    return (k.name, params, shared, tuple(k.directives.items()), tuple(k.reg_counts.items()), k.arch, version,
            k.debug, body(k.body))


def assert_round_trip(k):
    text = lang.to_ptxd(k)
    again = build(text, "rt.ptxd")
    assert ptx_of(again) == ptx_of(k), text
    assert structure(again) == structure(k), text
    assert lang.to_ptxd(again) == text
    return text


# ---------------------------------------------------------------------------------- examples


@pytest.mark.parametrize("name", TWINS)
def test_example_twin_emits_byte_identical_ptx(name):
    (k,) = lang.load(EXAMPLES / f"{name}.ptxd")
    twin = importlib.import_module(name).k
    assert ptx_of(k) == ptx_of(twin)
    assert structure(k) == structure(twin.finish())


@pytest.mark.parametrize("name", PTXD_EXAMPLES)
def test_example_round_trips(name):
    (k,) = lang.load(EXAMPLES / f"{name}.ptxd")
    assert_round_trip(k)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_pipelined_copy_assembles(arch):
    (k,) = lang.load(EXAMPLES / "tma_pipeline_copy.ptxd")
    ptx = px.emit(k)
    res = px.assemble(ptx, arch)
    assert res.cubin[:4] == b"\x7fELF"
    assert res.kernels["tma_pipeline_copy"].spill_stores == 0
    text = ptx.text
    assert ".shared .align 8 .b64 full[3];" in text and ".shared .align 8 .b64 empty[3];" in text
    assert ".shared .align 128 .b8 ring[24576];" in text
    assert re.search(r"mbarrier\.try_wait\.parity\.acquire\.cta\.shared::cta\.b64 %p\d+, \[%r\d+\], %r\d+;", text)
    assert re.search(r"xor\.b32 %r(\d+), %r\1, 1;", text), "the phase bit flips in place"


@pytest.mark.parametrize("block", re.findall(r"```ptxd\n(.*?)```", (ROOT / "docs" / "language.md").read_text(), re.DOTALL))
def test_every_ptxd_block_of_the_docs_builds(block):
    for k in lang.loads(block, "doc.ptxd"):
        assert_round_trip(k)


SPELLINGS = """kernel spellings(u32 a, s32 b, ptr g, tensormap src: bf16[256, 512] box [64, 64], tensormap dst,
                 tensormap acc: bf16[256, 512] box [64, 64])
    .reqntid 128
    .target sm_90a
{
    shared tile: b8[8192] align 128
    shared m: b8[128] align 128
    mbarrier bar
    allow mbarrier-init-fence, tma-load-race, bulk-group-pending, tensormap-acquire, async-proxy-fence {
        y = add.s32 b, b
        w = mul.wide.u32 a, 8
        p = setp.lt.s32 b, y
        d = cvt.rn.f32.u32 a
        v = ld.global.v2.u64 [g + 16]
        st.shared::cta.b32 [tile + 4], a
        r = atom.global.add.u32 [g], 1
        mbarrier.init [bar], 1
        st = mbarrier.arrive.release.cta [bar]
        q = mbarrier.try_wait.parity.acquire.cta [bar], 0
        cp.async.bulk.tensor [tile], [src, {a, a}], [bar]
        cp.async.bulk.tensor.shared::cta [tile], [src, {a, 0}], [bar]
        cp.async.bulk.tensor [dst, {a, a}], [tile]
        cp.reduce.async.bulk.tensor.add [acc, {a, a}], [tile]
        cp.async.bulk.prefetch.tensor [src, {a, a}]
        cp.async.bulk.shared::cta.global [tile], [g], 256, [bar]
        cp.async.bulk.commit_group
        cp.async.bulk.wait_group.read 0
        fence.proxy.async.shared::cta
        fence.proxy.tensormap::generic.acquire.gpu [src]
        e, lane = elect.sync 0xffffffff
        barrier.cluster.arrive.release.aligned
        barrier.cluster.wait.aligned
        rr = mapa.shared::cluster [tile], a
        tensormap.replace.tile.box_dim [m], 1, 64
        bar.sync 0
        bra.uni done
        done:
    }
}
"""


def test_the_documented_spellings_build_assemble_and_round_trip():
    k = build(SPELLINGS)
    assert_round_trip(k)
    text = ptx_of(k)
    for line in ("mul.wide.u32 %rd9, %r1, 8;", "ld.global.v2.u64 {%rd10, %rd11}, [%rd2+16];",
                 "mbarrier.arrive.release.cta.shared::cta.b64 %rd12, [bar];",
                 ("cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [tile], "
                  "[%rd4, {%r1, 0}], [bar];"),
                 "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [tile], [%rd2], 256, [bar];",
                 "elect.sync %r6|%p3, 4294967295;", "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [m], 1, 64;"):
        assert line in text, line
    assert px.assemble(px.emit(k), "sm_90a").cubin[:4] == b"\x7fELF"


def test_load_returns_every_kernel_in_file_order():
    ks = lang.loads("kernel a() {\n}\nkernel b(u32 n) {\n    x = n + 1\n}\n")
    assert [k.name for k in ks] == ["a", "b"]
    assert all(isinstance(k, px.Kernel) for k in ks)


# ------------------------------------------------------------------------------- lowering


def test_index_arithmetic_lowers_to_mad_and_folds_constants():
    k = build("""const T = 64
kernel k(u32 n)
{
    tid = %tid.x
    x = %ctaid.x * T + tid
    y = n * (T * 2) + 3 * 4
    z = (tid << 4) + (n >> 1) - 1
}
""")
    body = ptx_of(k)
    assert "mov.u32 %r3, %ctaid.x;\n\tmad.lo.u32 %r4, %r3, 64, %r2;" in body
    assert "mad.lo.u32 %r5, %r1, 128, 12;" in body
    assert "shl.b32 %r6, %r2, 4;\n\tshr.u32 %r7, %r1, 1;\n\tadd.u32 %r8, %r6, %r7;\n\tsub.u32 %r9, %r8, 1;" in body


def test_comparisons_casts_ternary_and_names_that_write_registers():
    k = build("""kernel k(u32 n, ptr out)
{
    p = n < 16
    v = p ? n : 16
    v = v + 1
    a = out + u64(v * 4)
    reg s32 acc = -1
    acc = acc * 3
    st.global.s32 [a + 8], acc
}
""")
    body = ptx_of(k)
    assert "setp.lt.u32 %p1, %r1, 16;" in body
    assert "selp.u32 %r2, %r1, 16, %p1;" in body
    assert "add.u32 %r2, %r2, 1;" in body, "an existing name is written in place"
    assert "mul.lo.u32 %r3, %r2, 4;\n\tcvt.u64.u32 %rd3, %r3;\n\tadd.u64 %rd4, %rd2, %rd3;" in body
    assert "mov.s32 %r4, -1;\n\tmul.lo.s32 %r4, %r4, 3;" in body
    assert "st.global.s32 [%rd4+8], %r4;" in body


def test_structured_statements():
    k = build("""kernel k(u32 n)
    .reqntid 64
{
    mbarrier bar[2]
    tid = %tid.x
    if tid == 0 {
        mbarrier.init [bar], 1
        mbarrier.init [bar + 8], 1
        fence.mbarrier_init
    }
    if n == 0 {
        bar.sync 1, 64
    } else if n == 1 {
        membar.cta
    } else {
        exit
    }
    for s32 i in 4..-4 step -2 {
        q = i > 0
        @!q trap
    }
}
""")
    body = ptx_of(k)
    assert "@!%p2 bra $L__else" in body and "bar.sync 1, 64;" in body and "exit;" in body
    assert "mbarrier.init.shared::cta.b64 [bar+8], 1;" in body
    assert "setp.le.s32" in body and "add.s32 %r3, %r3, -2;" in body
    assert "setp.gt.s32 %p5, %r3, 0;\n\t@!%p5 trap;" in body


def test_wait_elect_labels_and_allow():
    k = build("""kernel k()
    .reqntid 32
{
    mbarrier bar
    elect_one {
        mbarrier.init [bar], 1
    }
    fence.mbarrier_init
    st = mbarrier.arrive.release.cta [bar]
    wait.acquire.cta [bar] state st hint 1000
    n = mbarrier.pending_count st
    top:
    bra.uni done
    bra top
    done:
    allow wait-before-arrive {
        wait.test_wait [bar] parity 1
    }
}
""")
    body = ptx_of(k)
    assert "elect.sync _|%p1, 4294967295;" in body
    assert "mbarrier.arrive.release.cta.shared::cta.b64 %rd1, [bar];" in body
    assert "mbarrier.try_wait.acquire.cta.shared::cta.b64 %p2, [bar], %rd1, 1000;" in body
    assert "mbarrier.pending_count.b64 %r1, %rd1;" in body
    assert "bra.uni done;" in body and "\ttop:" not in body and "top:\n" in body
    assert "mbarrier.test_wait.parity.shared::cta.b64" in body
    assert [s.allow for s in k.body if isinstance(s, WaitLoop)] == [frozenset(), frozenset({"wait-before-arrive"})]


def test_tensor_map_parameters_and_directives():
    k = build("""kernel k(tensormap a: f32[16, 8, 32] box [1, 8, 32] swizzle 128B oob_fill nan,
             tensormap b: bf16[256, 512] box [64, 64] strides [2048, 2],
             tensormap c)
    .maxntid 256
    .reqnctapercluster 2
    .target sm_90a
    .version 8.3
{
}
""")
    a, b, c = k.params
    assert a.tmap == px.TensorMapSpec.tiled_for((16, 8, 32), "f32", (1, 8, 32), swizzle="128B", oob_fill="nan")
    assert b.tmap.strides == (2048,) and c.tmap is None
    ptx = ptx_of(k)
    assert ".maxntid 256, 1, 1\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n" in ptx
    assert ".version 8.3\n.target sm_90a\n" in ptx


@pytest.mark.parametrize("mnemonic,method,kwargs", [
    ("mbarrier.arrive.expect_tx.release.cta", "mbarrier_arrive_expect_tx", {"sem": "release", "scope": "cta"}),
    ("mbarrier.try_wait.parity.acquire.cluster", "mbarrier_try_wait", {"sem": "acquire", "scope": "cluster"}),
    ("cvt.rn.sat.f32.s32", "cvt", {"rnd": "rn", "sat": True, "type": "f32", "stype": "s32"}),
    ("cp.async.bulk.tensor.shared::cta.im2col", "cp_async_bulk_tensor", {"dst_space": "shared::cta",
                                                                         "mode": "im2col"}),
    ("cp.reduce.async.bulk.tensor.max", "cp_reduce_async_bulk_tensor", {"op": "max"}),
    ("barrier.cluster.arrive.release.aligned", "barrier_cluster_arrive", {"sem": "release", "aligned": True}),
    ("barrier.cluster.wait", "barrier_cluster_wait", {"aligned": False}),
    ("fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster", "fence_sync_restrict",
     {"sem": "release", "proxy_async": True}),
    ("ld.global.v2.u64", "ld", {"space": "global", "vec": 2, "type": "u64"}),
    ("cp.async.bulk.wait_group.read", "cp_async_bulk_wait_group_read", {}),
])
def test_instruction_table_routes_qualifiers(mnemonic, method, kwargs):
    form, got = forms.resolve(mnemonic)
    assert form.method == method and got == kwargs


def test_every_form_names_a_builder_method_and_its_parameters():
    import inspect

    for f in forms.FORMS:
        params = inspect.signature(getattr(px.KernelBuilder, f.method)).parameters
        for name in (*f.args, *f.fixed, *f.defaults):
            assert name in params, f"{f.name} -> {f.method} has no parameter {name!r}"


# ------------------------------------------------------------------------------------ errors


def error_of(text, kind=px.PtxdslError, name="bad.ptxd"):
    with pytest.raises(kind) as e:
        lang.loads(text, name)
    return e.value


def test_syntax_error_shows_location_source_line_caret_and_expected():
    e = error_of("kernel k() {\n    x = 1 +\n}\n", px.ParseError)
    msg = str(e)
    assert msg.startswith("bad.ptxd:2:12: syntax error: unexpected end of line; expected ")
    assert "a number" in msg and "a name" in msg and "'('" in msg
    src, caret = msg.splitlines()[1:3]
    assert src.strip() == "x = 1 +"
    assert src.startswith("    ") and caret == " " * (4 + 11) + "^"       # under column 12, past the '+'
    assert (e.loc.line, e.loc.col) == (2, 12)


def test_syntax_error_on_a_bad_character_and_at_end_of_input():
    e = error_of("kernel k() {\n    x = $y\n}\n", px.ParseError)
    assert str(e).startswith("bad.ptxd:2:9: syntax error: unexpected character '$'")
    e = error_of("kernel k(ptr out) {\n    x = out\n", px.ParseError)
    assert "unexpected end of input" in str(e) and "'}'" in str(e)


@pytest.mark.parametrize("text,line,words", [
    ("kernel k() {\n    y = x + 1\n}", 2, "unknown name 'x'"),
    ("kernel k(ptr out) {\n    y = add.u32 out, 1\n}", 2, "expected a 32-bit operand"),
    ("kernel k() {\n    mbarrier bar\n    mbarrier.arrive.expect_tx.releese.cta [bar], 8\n}", 3,
     "unknown qualifier .releese"),
    ("kernel k() {\n    mbarrier bar\n    mbarrier.arive [bar]\n}", 3, "did you mean mbarrier.arrive"),
    ("kernel k(u32 n) {\n    st.global.u32 [n], 1\n}", 2, "a global address must be 64-bit"),
    ("kernel k() {\n    x = 5\n}", 2, "cannot tell the type of the constant 5"),
    ("kernel k() {\n    shared t: b8[64]\n    t = 1\n}", 3, "is shared buffer 't'"),
    ("kernel k(u32 n) {\n    m = n\n    m, q = ld.global.v2.u32 [0]\n}", 3, "mix new names"),
    ("kernel k() {\n\n    bra nowhere\n}", 3, "never places"),
    ("kernel k(u32 n)\n    .reqntid 2000\n{\n}", 1, "over the 1024"),
    ("kernel k(tensormap t: bf16[64, 64] box [300, 64]) {\n}", 1, "box"),
    ("kernel k(ptr p: bf16[4] box [4]) {\n}", 1, "only a tensormap parameter"),
])
def test_semantic_errors_name_the_ptxd_line(text, line, words):
    e = error_of(text)
    assert isinstance(e, (px.DSLError, px.TensorMapError))
    assert e.loc is not None and e.loc.file == "bad.ptxd" and e.loc.line == line, str(e)
    assert words in str(e)
    assert str(e).startswith(f"bad.ptxd:{line}")


def test_instruction_above_the_pinned_target_names_its_line():
    e = error_of("kernel k()\n    .target sm_90a\n    .version 8.0\n{\n    mbarrier bar\n"
                 "    mbarrier.arrive.relaxed.cta [bar]\n}", px.TargetError)
    assert e.loc.line == 6 and "8.6" in str(e) and str(e).startswith("bad.ptxd:6:")


def test_verifier_findings_name_the_ptxd_line():
    e = error_of("kernel k() {\n    mbarrier bar\n    wait [bar] parity 0\n}", px.VerifyError)
    assert e.loc.line == 3 and e.rule == "mbarrier-uninit"


def test_parsing_never_executes_the_file():
    with pytest.raises(px.ParseError):
        lang.loads('kernel k() {\n    x = __import__("os").system("exit 3")\n}')
    e = error_of("kernel k() {\n    x = eval(1)\n}", px.DSLError)
    assert "unknown instruction 'eval'" in str(e)
    ast_ = lang.parse("kernel k() {\n    x = open(1)\n}", "a.ptxd")
    assert ast_.items[0].body[0].value.func == "open"


def test_grammar_ships_as_package_data():
    assert grammar_text() == (ROOT / "grammar" / "ptxdsl.lark").read_text()
    text = (ROOT / "pyproject.toml").read_text()
    assert '"ptxdsl.grammar" = "grammar"' in text and '"ptxdsl.grammar" = ["*.lark"]' in text


# ------------------------------------------------------------------- grammar-generated strings

NAMES = ["x", "y", "tid", "n", "p", "q", "i", "bar", "tile", "src", "out", "u32", "b8", "s32", "bf16", "ptr",
         "tensormap", "pitch", "mov", "add", "min", "ret", "box", "sm_90a", "swizzle", "cta"]
MNEMONICS = sorted({f.name for f in forms.FORMS}) + [
    "mbarrier.arrive.expect_tx.release.cta", "ld.shared::cta.v4.b32", "st.global.u32", "setp.eq.u32",
    "mul.wide.u32", "mul.lo.u32", "cvt.u64.u32", "mbarrier.try_wait.parity.acquire.cta", "add.u64",
    "cp.async.bulk.tensor.shared::cta", "fence.proxy.async.shared::cta", "no.such.instr", "add.bogus",
    "cp.async.bulk.wait_group.read", "elect.sync", "mbarrier.arrive.noComplete", "cp.async.bulk.shared::cta.global"]


def _pad(strategy):
    return strategy.map(lambda s: f" {s} ")


def _explicit(start="start"):
    """Strategies for every terminal reachable from `start` (tokens padded with spaces)."""
    out = {
        "NAME": _pad(st.sampled_from(NAMES)),
        "NUMBER": _pad(st.sampled_from(["0", "1", "3", "8", "64", "128", "8192", "0x10", "1.5", "4294967295",
                                        "99999999999999999999", "0f3F800000"])),
        "MNEMONIC": _pad(st.sampled_from(MNEMONICS)),
        "WAIT": _pad(st.sampled_from(["wait", "wait.acquire.cta", "wait.test_wait", "wait.bogus"])),
        "DIRECTIVE": _pad(st.sampled_from([".reqntid", ".maxnreg", ".target", ".version", ".debug", ".cluster",
                                           ".explicitcluster", ".bogus"])),
        "SREG": _pad(st.sampled_from(["%tid.x", "%ctaid.y", "%laneid", "%clock64", "%bogus"])),
        "WORD": _pad(st.sampled_from(["128B", "none", "nan", "64", "zero", "x"])),
        "RULE": _pad(st.sampled_from(["tma-load-race", "mbarrier-uninit", "no-such-rule"])),
        "WAIT_ON": _pad(st.sampled_from(["parity", "state"])),
        "_NL": st.sampled_from(["\n", "\n  // note\n"]),
        "WS": st.just(" "),
        "LINE_COMMENT": st.just(" "),
        "BLOCK_COMMENT": st.just(" /* c */ "),
        "LINE_CONT": st.just(" "),
    }
    for t in parser().terminals:
        if t.name not in out and t.pattern.type == "str":
            out[t.name] = st.just(f" {t.pattern.value} ")
    _, rules, ignored = parser().grammar.compile([start], ())
    reachable = {sym.name for r in rules for sym in r.expansion if sym.is_term} | set(ignored)
    return {name: strategy for name, strategy in out.items() if name in reachable}


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(from_lark(parser(), explicit=_explicit()))
@example("kernel k(u32 n) {\n x = n ? 1 : 2\n}")
@example("kernel k() {\n for x in 0 .. 1 step 0 {\n }\n}")
@example("kernel k() {\n x = 1 << 99999\n}")
@example("kernel k(ptr p) {\n st.global.v4.b32 [p], {1, 2}\n}")
def test_grammar_strings_lower_or_raise_a_located_ptxdsl_error(text):
    try:
        lang.loads(text, "fuzz.ptxd")
    except px.PtxdslError as e:
        assert e.loc is not None and e.loc.file == "fuzz.ptxd", f"{type(e).__name__} without a .ptxd line: {e}"


PRELUDE = """kernel fz(ptr out, u32 n, tensormap src: bf16[256, 512] box [64, 64])
    .reqntid 128
{
    shared tile: b8[8192] align 128
    mbarrier bar[2]
    tid = %tid.x
    p = tid == 0
    q = n > 1
    x = n + 1
    y = x * 2
    i = n
"""


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(from_lark(parser(), start="block", explicit=_explicit("block")))
@example("{\n if p {\n  mbarrier.init [bar], 1\n }\n}")
@example("{\n wait.acquire.cta [bar + 8] parity x\n}")
def test_grammar_statements_inside_a_kernel_lower_or_raise_a_located_ptxdsl_error(block):
    text = PRELUDE + block.strip()[1:]
    try:
        lang.loads(text, "fuzz.ptxd")
    except px.PtxdslError as e:
        assert e.loc is not None and e.loc.file == "fuzz.ptxd", f"{type(e).__name__} without a .ptxd line: {e}"


ROW_PRELUDE = """kernel rows(ptr out, u32 n, s64 w, f32 fl, tensormap src: bf16[256, 512] box [64, 64], tensormap raw)
    .reqntid 128
{
    shared tile: b8[8192] align 128
    mbarrier bar[2]
    tid = %tid.x
    p = tid == 0
    h = mov.b16 1
    lbl:
    allow """ + ", ".join(RULES) + " {\n        "
ROW_OPERANDS = ["n", "w", "fl", "out", "src", "raw", "tile", "bar", "p", "!p", "h", "lbl", "_", "0", "-1", "64", "1.5",
                "4294967296", "%tid.x", "[tile]", "[tile + 16]", "[tile + 9000]", "[bar + 8]", "[out - 4]", "[n]",
                "[src, {n, n}]", "[raw, {n}]", "[src, {n, n, n, n, n, n}]", "{n, n}", "{n, n, n, n}", "{}",
                "state=1", "mbar=[bar]", "multicast=h", "cache_hint=w", "out=n", "type=n"]
ROW_QUALIFIERS = sorted({str(t) for _, values in forms.GROUPS.values() for t in values}
                        | {t for f in forms.FORMS for t in f.form | f.implied} | {"bogus"})


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(forms.FORMS), st.lists(st.sampled_from(ROW_QUALIFIERS), max_size=2),
       st.lists(st.sampled_from(ROW_OPERANDS), max_size=4), st.sampled_from(["", "r = ", "r, s = ", "n = "]))
def test_table_rows_with_any_operands_raise_only_located_ptxdsl_errors(form, quals, operands, results):
    mnemonic = ".".join([form.name, *sorted(form.form), *quals])
    if form.name == "wait":
        stmt = f"{mnemonic} {operands[0] if operands else 'bar'} parity 0"
    else:
        stmt = results + mnemonic + " " + ", ".join(operands)
    try:
        lang.loads(ROW_PRELUDE + stmt + "\n    }\n}\n", "rows.ptxd")
    except px.PtxdslError as e:
        assert e.loc is not None and e.loc.file == "rows.ptxd", f"{type(e).__name__} without a .ptxd line: {e}"


# --------------------------------------------------------------- builder -> .ptxd -> builder

ALL_RULES = tuple(RULES)
INT_OPS = ("add", "sub", "mul", "min", "max", "and_", "or_", "xor", "shl", "shr", "rem", "div")


class _Gen:
    """Random, type-correct builder calls (protocol findings silenced with allow: the round trip is the
    point here, not the protocol)."""

    def __init__(self, k, draw):
        self.k, self.draw = k, draw
        self.regs = {"u32": [], "s32": [], "u64": [], "pred": [], "f32": []}
        self.decl = []
        self.bufs, self.bars, self.maps = [], [], []
        self.labels = []

    def pick(self, xs):
        return self.draw(st.sampled_from(xs))

    def add(self, t, r):
        self.regs[t].append(r)
        return r

    def operand(self, t):
        choices = list(self.regs[t])
        if t in ("u32", "s32"):
            choices += [0, 1, 7, 64, -3 if t == "s32" else 4096]
        if t == "f32":
            choices += [0.5, -2.0, 1e-3]
        return self.pick(choices) if choices else None

    def out(self, t):
        """A register declared earlier with k.reg (written through out=), or None for a new one."""
        if self.draw(st.integers(0, 3)) == 0:
            r = self.k.reg(t)
            self.regs[t].append(r)
            return r
        return None

    def statement(self, depth):
        k = self.k
        kind = self.pick(["arith", "arith", "arith", "mad", "setp", "selp", "cvt", "mov", "mem", "mbar", "mbar",
                          "tma", "tma", "if", "loop", "elect", "guard", "misc", "label"])
        if kind in ("if", "loop", "elect", "guard") and depth <= 0:
            kind = "arith"
        t = self.pick(["u32", "s32"])
        a, b = self.operand(t), self.operand(t)
        if kind == "arith":
            if not isinstance(a, Reg):
                a = self.add(t, k.mov(sreg.tid_x if t == "u32" else 5, type=t))
            op = self.pick(INT_OPS)
            if op in ("shl", "shr") and not isinstance(b, Reg):
                b = abs(b) % 32
            mode = {"mode": "hi"} if op == "mul" and self.draw(st.booleans()) else {}
            self.add(t, getattr(k, op)(a, b, out=self.out(t), **mode))
        elif kind == "mad":
            c = self.operand(t)
            if not isinstance(a, Reg):
                a = self.add(t, k.mov(sreg.laneid if t == "u32" else -1, type=t))
            if t == "u32" and self.draw(st.booleans()):
                self.add("u64", k.mad(a, b, k.cvt("u64", a), mode="wide"))
            else:
                self.add(t, k.mad(a, b, c, out=self.out(t)))
        elif kind == "setp":
            if not isinstance(a, Reg):
                a = self.add(t, k.mov(sreg.ctaid_x if t == "u32" else 1, type=t))
            self.add("pred", k.setp(self.pick(["eq", "ne", "lt", "ge"]), a, b, out=self.out("pred")))
        elif kind == "selp" and self.regs["pred"]:
            self.add(t, k.selp(a, b, self.pick(self.regs["pred"]), type=t, out=self.out(t)))
        elif kind == "cvt":
            src = self.operand("u32")
            if isinstance(src, Reg):
                self.add("u64", k.cvt("u64", src))
                self.add("f32", k.cvt("f32", src, out=self.out("f32")))
            if self.regs["f32"]:
                self.add("f32", k.add(self.pick(self.regs["f32"]), self.operand("f32")))
        elif kind == "mov":
            src = self.pick([sreg.tid_x, sreg.ctaid_y, sreg.laneid, *self.bufs[:1]])
            r = k.mov(src)
            self.add("u32", r)
            if self.bufs and self.draw(st.booleans()):
                self.add("u32", k.add(r, 16))
        elif kind == "mem" and self.bufs:
            buf = self.pick(self.bufs)
            off = self.pick([0, 16, 32])
            if self.draw(st.booleans()):
                v = k.ld("b32", buf.at(off), space="shared::cta", vec=self.pick([1, 2, 4]))
                vals = v if isinstance(v, tuple) else (v,)
                if self.regs["u64"]:
                    k.st("b32", Addr(self.pick(self.regs["u64"]), 8), vals)
            elif self.regs["u32"]:
                k.st("u32", buf.at(off), self.pick(self.regs["u32"]), space="shared::cta")
                if self.regs["u64"]:
                    self.add("u32", k.atom_add("u32", self.pick(self.regs["u64"]), 1))
        elif kind == "mbar" and self.bars:
            bar = self.pick(self.bars)
            which = self.pick(["init", "arrive", "tx", "wait", "try", "test", "expect"])
            if which == "init":
                k.mbarrier_init(bar, self.pick([1, 32]))
                k.fence_mbarrier_init()
            elif which == "arrive":
                stt = k.mbarrier_arrive(bar, sem="release", scope=self.pick(["cta", "cluster"]),
                                        state=self.draw(st.booleans()))
                if stt is not None:
                    self.add("u64", stt)
                    self.add("u32", k.mbarrier_pending_count(stt))
            elif which == "tx":
                k.mbarrier_arrive_expect_tx(bar, self.pick([16, 8192]), sem="release", scope="cta")
            elif which == "wait":
                parity = self.pick([0, 1, *[r for r in self.regs["u32"]][:2]])
                k.mbarrier_wait(bar, parity=parity, **self.pick([{}, {"sem": "acquire", "scope": "cta"}]))
            elif which == "try":
                self.add("pred", k.mbarrier_try_wait(bar, parity=self.pick([0, 1]), out=self.out("pred")))
            elif which == "test":
                self.add("pred", k.mbarrier_test_wait(bar, parity=1, sem="acquire", scope="cta"))
            else:
                k.mbarrier_expect_tx(bar, 64)
        elif kind == "tma" and self.maps and self.bufs and self.bars and len(self.regs["u32"]) >= 2:
            tmap, buf, bar = self.pick(self.maps), self.pick(self.bufs), self.pick(self.bars)
            coords = (self.pick(self.regs["u32"]), self.pick([0, *self.regs["u32"]]))
            which = self.pick(["load", "store", "reduce", "prefetch"])
            if which == "load":
                k.cp_async_bulk_tensor(buf, tmap, coords, mbar=bar)
            elif which == "store":
                k.fence_proxy_async("shared::cta")
                k.cp_async_bulk_tensor(tmap, buf, coords)
                k.cp_async_bulk_commit_group()
                k.cp_async_bulk_wait_group(0, read=self.draw(st.booleans()))
            elif which == "reduce":
                k.cp_reduce_async_bulk_tensor("add", tmap, buf, coords)
                k.cp_async_bulk_commit_group()
                k.cp_async_bulk_wait_group_read(0)
            else:
                k.cp_async_bulk_prefetch_tensor(tmap, coords)
        elif kind == "if" and self.regs["pred"]:
            p = self.pick(self.regs["pred"])
            with k.if_(~p if self.draw(st.booleans()) else p):
                self.block(depth - 1)
            if self.draw(st.booleans()):
                with k.else_():
                    self.block(depth - 1)
        elif kind == "loop":
            stop = self.pick([3, *self.regs["u32"][:3]])
            with k.loop(0, stop, self.pick([1, 2])) as i:
                self.regs["u32"].append(i)
                self.block(depth - 1)
        elif kind == "elect":
            with k.elect_one():
                self.block(depth - 1)
        elif kind == "guard" and self.regs["pred"]:
            with k.guard(self.pick(self.regs["pred"])):
                self.add("u32", k.add(self.operand("u32") or 1, 1, type="u32"))
                k.bar_sync(0)
        elif kind == "misc":
            which = self.pick(["fence", "bar", "barrier", "membar", "unused"])
            if which == "fence":
                k.fence(self.pick(["acq_rel", "sc"]), self.pick(["cta", "gpu"]))
            elif which == "bar":
                k.bar_sync(0)
            elif which == "barrier":
                k.barrier_cluster_arrive(sem="release")
                k.barrier_cluster_wait(aligned=False)
            elif which == "membar":
                k.membar("cta")
            else:
                k.reg(self.pick(["u32", "pred", "u64", "b16"]))
        elif kind == "label":
            lab = k.label(f"L{len(self.labels)}")
            self.labels.append(lab)
            if self.regs["pred"]:
                with k.guard(self.pick(self.regs["pred"])):
                    k.bra(lab)

    def block(self, depth):
        for _ in range(self.draw(st.integers(0, 4))):
            self.statement(depth)


@st.composite
def built_kernels(draw):
    debug = draw(st.sampled_from([False, False, True]))
    k = px.kernel("rt", reqntid=draw(st.sampled_from([32, 128, (64, 2)])), debug=debug)
    g = _Gen(k, draw)
    for i, kind in enumerate(draw(st.lists(st.sampled_from(["ptr", "u32", "s32", "f32", "tensormap"]),
                                           max_size=3)) + ["tensormap"]):
        if kind == "ptr":
            g.add("u64", k.param_ptr(f"a{i}"))
        elif kind == "tensormap":
            g.maps.append(k.param_tensormap(f"a{i}", px.TensorMapSpec.tiled_for((256, 512), "bf16", (64, 64))))
        else:
            g.add(kind, k.param(f"a{i}", kind))
    with k.allow(*ALL_RULES):
        for i in range(draw(st.integers(1, 2))):
            g.bufs.append(k.shared(f"buf{i}", 8192 if i == 0 else 256, align=128, dynamic=draw(st.booleans())))
        for i in range(draw(st.integers(1, 2))):
            g.bars.append(k.mbarrier(f"bar{i}", draw(st.integers(1, 3))))
        tid = g.add("u32", k.mov(sreg.tid_x))
        g.add("pred", k.setp("eq", tid, 0))
        for _ in range(draw(st.integers(2, 12))):
            g.statement(3)
    return k.finish()


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(built_kernels())
def test_builder_kernels_round_trip_through_ptxd(k):
    assert_round_trip(k)


def test_round_trip_declares_registers_taken_before_their_first_write():
    k = px.kernel("decl", reqntid=32)
    acc = k.reg(px.u32)
    unused = k.reg(px.b16)
    tid = k.mov(sreg.tid_x)
    k.add(tid, 1, out=acc)
    p = k.setp("eq", acc, 3)
    k.mul(acc, 2, out=acc)
    k.reg(px.pred)
    with k.if_(~p):
        k.sub(acc, tid, out=acc)
    text = assert_round_trip(k.finish())
    assert "reg u32 r1" in text and "reg b16 rs1" in text and "r1 = add.u32 r2, 1" in text
    assert unused.index == 1


def test_round_trip_keeps_allow_debug_and_mid_body_failures():
    k = px.kernel("odd", reqntid=32, debug=0.25, arch="sm_90a", ptx="8.6")
    bar = k.mbarrier("bar")
    with k.allow("mbarrier-uninit"):
        k.mbarrier_wait(bar, parity=0)
    tid = k.mov(sreg.tid_x)
    with pytest.raises(px.DSLError):
        k.add(tid, 1.5)             # fails after taking register %r2
    k.mov(sreg.laneid)
    text = assert_round_trip(k.finish())
    assert ".debug 0.25" in text and "allow mbarrier-uninit {" in text
    assert "r1 = mov.u32 %tid.x\n    reg b32 r2\n    r3 = mov.u32 %laneid" in text


def test_printer_refuses_what_it_cannot_spell():
    k = px.kernel("late", reqntid=32)
    k.mov(sreg.tid_x)
    k.param("n", px.u32)
    with pytest.raises(px.DSLError, match="declared after the body starts"):
        lang.to_ptxd(k.finish())


def test_floats_print_exactly():
    k = px.kernel("f", reqntid=32)
    x = k.cvt("f32", k.mov(sreg.tid_x))
    for v in (0.1, -2.5e-30, 1e20, math.inf, -0.0):
        x = k.mul(x, v)
    assert_round_trip(k.finish())


def test_the_multicast_listing_in_the_docs_is_the_example():
    text = (EXAMPLES / "tma_multicast_tile.ptxd").read_text()
    body = text[text.index("const ROWS"):]
    assert f"```ptxd\n{body}```" in (ROOT / "docs" / "language.md").read_text()
