"""The builder and emitter on single ops and small kernels: expected text, and the errors users get."""
import os

import pytest

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.errors import shown_path

HERE = os.path.basename(__file__)


def body(k) -> list[str]:
    """The instruction lines of a one-kernel module, without the prologue's param loads."""
    text = px.emit(k).text
    inner = text[text.index("{\n") + 2:text.rindex("}")]
    return [ln.strip() for ln in inner.splitlines() if ln.strip() and not ln.strip().startswith(".")]


def one(build) -> str:
    """Emit a kernel whose body is `build(k)` and return its last instruction before ret."""
    with px.kernel("t") as k:
        build(k)
    return body(k)[-2]


@pytest.mark.parametrize("build, text", [
    (lambda k: k.mbarrier_init(k.mbarrier("b"), 1), "mbarrier.init.shared::cta.b64 [b], 1;"),
    (lambda k: k.mbarrier_arrive(k.mbarrier("b"), 2, sem="release", scope="cta"),
     "mbarrier.arrive.release.cta.shared::cta.b64 _, [b], 2;"),
    (lambda k: k.mbarrier_arrive_expect_tx(k.mbarrier("b"), 8192, sem="release", scope="cta"),
     "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [b], 8192;"),
    (lambda k: k.mbarrier_expect_tx(k.mbarrier("b"), 4096, sem="relaxed", scope="cta"),
     "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [b], 4096;"),
    (lambda k: k.mbarrier_try_wait(k.mbarrier("b"), parity=1, sem="acquire", scope="cluster"),
     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p1, [b], 1;"),
    (lambda k: k.fence_proxy_async("shared::cta"), "fence.proxy.async.shared::cta;"),
    (lambda k: k.fence_proxy_async(), "fence.proxy.async;"),
    (lambda k: k.fence_mbarrier_init(), "fence.mbarrier_init.release.cluster;"),
    (lambda k: k.cp_async_bulk_commit_group(), "cp.async.bulk.commit_group;"),
    (lambda k: k.cp_async_bulk_wait_group(0), "cp.async.bulk.wait_group 0;"),
    (lambda k: k.cp_async_bulk_wait_group_read(2), "cp.async.bulk.wait_group.read 2;"),
    (lambda k: k.bar_sync(0), "bar.sync 0;"),
    (lambda k: k.mul(k.mov(sreg.tid_x), 3, mode="wide"), "mul.wide.u32 %rd1, %r1, 3;"),
    (lambda k: k.mad(k.mov(sreg.tid_x), 4, 5), "mad.lo.u32 %r2, %r1, 4, 5;"),
    (lambda k: k.add(k.mov(1.5, px.f32), 2.0), "add.f32 %f2, %f1, 0f40000000;"),
    (lambda k: k.div(k.mov(1.5, px.f32), 2.0), "div.rn.f32 %f2, %f1, 0f40000000;"),
    (lambda k: k.shr(k.mov(-8, px.s32), 1), "shr.s32 %r2, %r1, 1;"),
    (lambda k: k.and_(k.mov(sreg.tid_x), 7), "and.b32 %r2, %r1, 7;"),
    (lambda k: k.setp("lt", k.mov(sreg.tid_x), 32), "setp.lt.u32 %p1, %r1, 32;"),
    (lambda k: k.selp(1, 0, k.setp("eq", k.mov(sreg.laneid), 0), type=px.u32), "selp.u32 %r2, 1, 0, %p1;"),
    (lambda k: k.cvt(px.bf16, k.mov(1.0, px.f32)), "cvt.rn.bf16.f32 %rs1, %f1;"),
    (lambda k: k.cvt(px.s32, k.mov(1.0, px.f32)), "cvt.rzi.s32.f32 %r1, %f1;"),
    (lambda k: k.ld(px.u32, k.param_ptr("p"), vec=2), "ld.global.v2.u32 {%r1, %r2}, [%rd2];"),
    (lambda k: k.st(px.b32, k.shared("s", 64).at(16), 7, space="shared::cta"), "st.shared::cta.b32 [s+16], 7;"),
    (lambda k: k.elect_sync(), "elect.sync _|%p1, 0xFFFFFFFF;"),
])
def test_single_op_text(build, text):
    assert one(build) == text


def test_structured_if_else_and_loop():
    with px.kernel("t") as k:
        tid = k.mov(sreg.tid_x)
        p = k.setp("eq", tid, 0)
        with k.if_(p):
            k.membar("cta")
        with k.else_():
            k.membar("gl")
        with k.loop(0, 4) as i:
            k.add(i, tid)
    assert body(k) == [
        "mov.u32 %r1, %tid.x;", "setp.eq.u32 %p1, %r1, 0;",
        "@!%p1 bra $L__else2;", "membar.cta;", "bra.uni $L__end1;", "$L__else2:", "membar.gl;", "$L__end1:",
        "mov.u32 %r2, 0;", "$L__loop3:", "setp.ge.u32 %p2, %r2, 4;", "@%p2 bra $L__loop_end4;",
        "add.u32 %r3, %r2, %r1;", "add.u32 %r2, %r2, 1;", "bra.uni $L__loop3;", "$L__loop_end4:", "ret;",
    ]


def test_guard_and_negated_guard():
    with px.kernel("t") as k:
        p = k.setp("eq", k.mov(sreg.laneid), 0)
        with k.guard(~p):
            k.membar("cta")
    assert "@!%p1 membar.cta;" in body(k)


def test_tensormap_param_is_nvcc_style():
    with px.kernel("t") as k:
        k.param_tensormap("tmap")
    text = px.emit(k).text
    assert ".param .align 64 .b8 tmap[128]" in text
    assert "mov.b64 %rd1, tmap;\n\tcvta.param.u64 %rd2, %rd1;" in text


def test_dynamic_shared_layout():
    with px.kernel("t") as k:
        a = k.shared("a", 100, dynamic=True)
        b = k.shared("b", 8192, align=1024, dynamic=True)
        k.mbarrier_init(k.mbarrier("bar", 2, dynamic=True).at(8), 1)
    assert (a.offset, b.offset) == (0, 1024)
    assert k.kernel.dynamic_shared_bytes == 1024 + 8192 + 16
    text = px.emit(k).text
    assert ".extern .shared .align 1024 .b8 t_dsmem[];" in text
    assert "mbarrier.init.shared::cta.b64 [t_dsmem+9224], 1;" in text


def test_same_kernel_same_bytes():
    def build():
        with px.kernel("t", reqntid=(128, 1)) as k:
            bar = k.mbarrier("bar")
            with k.elect_one():
                k.mbarrier_init(bar, 1)
            k.mbarrier_wait(bar, parity=0)
        return px.emit(k).text

    assert build() == build()


# ---------------------------------------------------------------------------------------- errors

def _raises(exc, match, build):
    with pytest.raises(exc, match=match) as info:
        with px.kernel("t") as k:
            build(k)
    assert info.value.loc is not None and os.path.basename(info.value.loc.file) == HERE, info.value.loc
    return info.value


def test_error_bad_qualifier_names_value_rule_and_line():
    e = _raises(px.DSLError, r"sem='acquire' is not allowed; expected one of None, 'release', 'relaxed'",
                lambda k: k.mbarrier_arrive(k.mbarrier("b"), sem="acquire"))
    assert str(e).startswith(f"{shown_path(__file__)}:")          # the path relative to the working directory


def test_error_wrong_operand_type():
    _raises(px.DSLError, r"expected a 32-bit operand for .u32, got a 64-bit register",
            lambda k: k.mbarrier_init(k.mbarrier("b"), k.mov(sreg.clock64)))


def _sreg_loop_stop(k):
    with k.loop(0, sreg.ntid_x):
        pass


@pytest.mark.parametrize("build, shown", [
    (lambda k: k.mul(sreg.ctaid_x, 64), r"mul a=%ctaid\.x: .*; read it first: k\.mov\(sreg\.ctaid_x\)$"),
    (lambda k: k.add(k.mov(sreg.tid_x), sreg.laneid), r"add b=%laneid: .*k\.mov\(sreg\.laneid\)$"),
    (lambda k: k.mad(k.mov(sreg.tid_x), 4, sreg.cluster_ctaid_y), r"mad c=%cluster_ctaid\.y: .*cluster_ctaid_y\)$"),
    (lambda k: k.setp("eq", sreg.tid_x, 0), "setp a=%tid.x"),
    (lambda k: k.cvt(px.f32, sreg.tid_x), "cvt src=%tid.x"),
    (lambda k: k.st(px.u32, k.param_ptr("out"), sreg.smid), r"st value=%smid"),
    (lambda k: k.mbarrier_init(k.mbarrier("b"), sreg.ntid_x), "mbarrier.init count=%ntid.x"),
    (_sreg_loop_stop, "loop stop=%ntid.x"),
])
def test_error_special_register_as_an_operand(build, shown):
    e = _raises(px.DSLError, shown, build)
    assert "a special register is only an operand of mov" in str(e), str(e)


def test_integer_cvt_of_a_special_register_assembles():
    with px.kernel("t") as k:
        k.cvt(px.u64, sreg.tid_x)
    assert "cvt.u64.u32 %rd1, %tid.x;" in px.emit(k).text
    assert px.assemble(px.emit(k), "sm_90a").kernels["t"]


def test_special_registers_are_read_with_mov_or_start_a_loop():
    with px.kernel("t", reqntid=128) as k:
        out = k.param_ptr("out")
        x = k.mul(k.mov(sreg.ctaid_x), 64)
        with k.loop(sreg.tid_x, 1024, 128) as i:
            k.st(px.u32, k.add(out, k.cvt(px.u64, k.add(x, i))), i)
    lines = body(k)
    assert "mul.lo.u32 %r2, %r1, 64;" in lines and "mov.u32 %r3, %tid.x;" in lines
    px.assemble(px.emit(k), "sm_90a")


def test_error_wrong_state_space():
    _raises(px.DSLError, r"expected a shared::cta address, got a global address",
            lambda k: k.mbarrier_init(k.param_ptr("out"), 1))


def test_error_shared_buffer_where_global_expected():
    _raises(px.DSLError, r"is in shared memory, but this operand must be a global address",
            lambda k: k.st(px.u32, k.shared("s", 16), 1, space="global"))


def test_error_missing_mbarrier():
    def build(k):
        t = k.param_tensormap("m")
        k.cp_async_bulk_tensor(k.shared("s", 1024, align=128), t, (0, 0))
    _raises(px.DSLError, r"mbar= is missing", build)


def test_error_target_pinned_too_low():
    with pytest.raises(px.TargetError, match=r"\.version 7\.8 is below the 8\.0 that mbarrier\.arrive\.expect_tx"):
        with px.kernel("t", ptx="7.8") as k:
            k.mbarrier_arrive_expect_tx(k.mbarrier("b"), 16)


def test_error_target_arch_without_the_instruction():
    with pytest.raises(px.TargetError, match=r"not available on \.target sm_90a") as info:
        with px.kernel("t", arch="sm_90a") as k:
            t = k.param_tensormap("m")
            k.cp_async_bulk_tensor(k.shared("s", 1024, align=128), t, (0, 0), mbar=k.mbarrier("b"), cta_group=2)
    assert os.path.basename(info.value.loc.file) == HERE


def test_error_shared_over_device_limit():
    _raises(px.VerifyError, r"over the 232448-byte per-block limit",
            lambda k: [k.shared("a", 200_000, dynamic=True), k.shared("b", 40_000, dynamic=True)])


def test_error_static_shared_over_48k():
    _raises(px.VerifyError, r"static shared memory.*dynamic=True", lambda k: k.shared("a", 50_000))


def test_error_tx_count_out_of_range():
    _raises(px.DSLError, r"tx=1048576 is out of range",
            lambda k: k.mbarrier_arrive_expect_tx(k.mbarrier("b"), 1 << 20))


def test_error_wait_group_needs_constant():
    _raises(px.DSLError, r"expected an integer constant", lambda k: k.cp_async_bulk_wait_group(k.mov(sreg.tid_x)))


def test_error_multicast_into_shared_cta():
    def build(k):
        t = k.param_tensormap("m")
        k.cp_async_bulk_tensor(k.shared("s", 1024, align=128), t, (0, 0), mbar=k.mbarrier("b"),
                               dst_space="shared::cta", multicast=3)
    _raises(px.DSLError, r"multicast needs dst_space='shared::cluster'", build)


def test_error_reduce_type_from_the_map():
    spec = px.TensorMapSpec.tiled_for((64, 64), "f32", (8, 8))

    def build(k):
        t = k.param_tensormap("m", spec)
        k.cp_reduce_async_bulk_tensor("inc", t, k.shared("s", 256, align=128), (0, 0))
    _raises(px.DSLError, r"element type 'f32' is not one inc takes", build)


def test_error_else_without_if():
    with pytest.raises(px.DSLError, match=r"else_\(\) must directly follow an if_\(\) block"):
        with px.kernel("t") as k:
            k.bar_sync(0)
            with k.else_():
                pass


def test_error_duplicate_name():
    _raises(px.DSLError, r"name 'x' is already used", lambda k: [k.shared("x", 16), k.mbarrier("x")])


def test_structured_statements_record_the_users_line():
    import inspect

    with px.kernel("t") as k:
        p = k.setp("eq", k.mov(sreg.tid_x), 0)
        line = inspect.currentframe().f_lineno + 1
        with k.if_(p):
            k.membar("cta")
        with k.loop(0, 2):
            pass
        with k.elect_one():
            pass
    stmts = k.kernel.body[2:]
    assert [s.loc.line for s in stmts if hasattr(s, "then") or hasattr(s, "body")] == [line, line + 2, line + 4]
    assert all(os.path.basename(s.loc.file) == HERE for s in stmts)


def test_line_info_maps_code_to_the_users_lines():
    import inspect

    with px.kernel("t") as k:
        line = inspect.currentframe().f_lineno + 1
        tid = k.mov(sreg.tid_x)
        k.add(tid, 1)
    plain = px.emit(k).text
    ptx = px.emit(k, line_info=True)
    assert ".file" not in plain and ".loc" not in plain
    assert f'.file 1 "{__file__}"' in ptx.text
    assert f"\t.loc 1 {line} 0\n\tmov.u32 %r1, %tid.x;" in ptx.text
    assert f"\t.loc 1 {line + 1} 0\n\tadd.u32 %r2, %r1, 1;" in ptx.text
    lines = ptx.text.splitlines()
    assert all(lines[n - 1].strip().startswith(("mov", "add", "ret")) for n in ptx.origins)
    assert px.assemble(ptx, "sm_90a").kernels["t"].registers > 0


def test_cluster_only_copy_needs_a_cluster_launch():
    from ptxdsl.program import check_cluster_launch

    def build(**kw):
        with px.kernel("t", reqntid=32, **kw) as k:
            a, b = k.shared("a", 256, align=128), k.shared("b", 256, align=128)
            bar = k.mbarrier("bar")
            with k.elect_one():
                k.mbarrier_init(bar, 1)
                k.fence_mbarrier_init()
                k.mbarrier_arrive_expect_tx(bar, 256)
                k.cp_async_bulk(b, a, 256, dst_space="shared::cluster", src_space="shared::cta", mbar=bar)
                k.mbarrier_wait(bar, parity=0)
        return px.emit(k).kernels["t"]

    info = build()
    with pytest.raises(px.LaunchError, match=r"runs only in a cluster launch") as e:
        check_cluster_launch(info, None)
    assert os.path.basename(e.value.loc.file) == HERE
    check_cluster_launch(info, (1, 1, 1))
    check_cluster_launch(build(reqnctapercluster=2), None)
