"""nvJitLink as CI's oracle: accepted modules give cubins and resources, rejected ones
give ptxas's errors mapped back to PTX lines and source origins. No GPU needed."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ptxdsl.assembler import (Assembled, Resources, _assemble_error, assemble, nvjitlink_version,
                              parse_resources)
from ptxdsl.errors import AssembleError, DSLError, SourceLoc

GOLDEN = Path(__file__).resolve().parent / "golden"
ELF_MAGIC = b"\x7fELF"

TWO_KERNELS = """\
.version 8.0
.target sm_90
.address_size 64

.visible .entry scale(.param .u64 p_out, .param .f32 p_k)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<4>;
  .shared .align 16 .b8 stage[4096];

  ld.param.u64 %rd1, [p_out];
  ld.param.f32 %f1, [p_k];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  cvt.rn.f32.u32 %f2, %r1;
  mul.f32 %f3, %f2, %f1;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, stage;
  add.u32 %r3, %r3, %r2;
  st.shared.f32 [%r3], %f3;
  bar.sync 0;
  ld.shared.f32 %f3, [%r3];
  mul.wide.u32 %rd3, %r1, 4;
  add.u64 %rd3, %rd2, %rd3;
  st.global.f32 [%rd3], %f3;
  ret;
}

.visible .entry empty()
{
  ret;
}
"""

TMA_LOAD = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry tma_load_2d(.param .align 64 .b8 tmap[128], .param .u32 p_x, .param .u32 p_y)
.reqntid 128, 1, 1
{
  .reg .pred %p<4>;
  .reg .b32  %r<8>;
  .reg .b64  %rd<4>;
  .shared .align 1024 .b8 box[8192];
  .shared .align 8 .b64 full;

  mov.b64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  ld.param.u32 %r1, [p_x];
  ld.param.u32 %r2, [p_y];
  mov.u32 %r3, box;
  mov.u32 %r4, full;
  mov.u32 %r5, %tid.x;
  setp.eq.u32 %p1, %r5, 0;
  @!%p1 bra ISSUED;
  mbarrier.init.shared::cta.b64 [%r4], 1;
  fence.mbarrier_init.release.cluster;
  mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r4], 8192;
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r1, %r2}], [%r4];
ISSUED:
  bar.sync 0;
  mov.u32 %r6, 0;
WAIT:
  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r4], %r6;
  @!%p2 bra WAIT;
  ret;
}
"""

SYNTAX_ERROR_LINE = 9
SYNTAX_ERROR = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry broken(.param .u64 p)
{
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  add.u32 %r2, %r1, %r9q;
  ret;
}
"""

GATHER4_LINE = 18
GATHER4 = """\
.version 8.6
.target {target}
.address_size 64

.visible .entry gather_rows(.param .align 64 .b8 tmap[128])
{{
  .reg .b32  %r<16>;
  .reg .b64  %rd<4>;
  .shared .align 1024 .b8 tile[2048];
  .shared .align 8    .b64 bar;

  mov.b64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  mov.u32 %r1, tile;
  mov.u32 %r2, bar;
  mov.u32 %r10, 0; mov.u32 %r11, 8; mov.u32 %r12, 17; mov.u32 %r13, 42; mov.u32 %r14, 99;
  mbarrier.init.shared::cta.b64 [%r2], 1;
  cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes [%r1], [%rd2, {{%r10, %r11, %r12, %r13, %r14}}], [%r2];
  ret;
}}
"""


def spilling_module(values: int = 64) -> str:
    """A kernel holding `values` floats live at once (spills under a small -maxrregcount)."""
    loads = "\n".join(f"  ld.volatile.global.f32 %f{i}, [%rd2+{4 * i}];" for i in range(values))
    stores = "\n".join(f"  st.volatile.global.f32 [%rd2+{4 * i + 1024}], %f{i};" for i in reversed(range(values)))
    return (".version 8.0\n.target sm_90\n.address_size 64\n"
            ".visible .entry spill(.param .u64 p)\n{\n"
            f"  .reg .f32 %f<{values}>;\n  .reg .b64 %rd<3>;\n"
            "  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd2, %rd1;\n"
            f"{loads}\n{stores}\n  ret;\n}}\n")


def test_inline_module_gives_cubin_and_resources():
    out = assemble(TWO_KERNELS, "sm_90")
    assert isinstance(out, Assembled) and out.arch == "sm_90"
    assert out.cubin.startswith(ELF_MAGIC)
    assert set(out.kernels) == {"scale", "empty"}
    scale, empty = out.kernels["scale"], out.kernels["empty"]
    assert 4 <= scale.registers <= 64 and 1 <= empty.registers <= 16
    assert scale.barriers == 1 and empty.barriers == 0
    assert scale.shared_bytes >= 4096 > empty.shared_bytes
    assert scale.spill_stores == scale.spill_loads == scale.stack_frame == 0
    assert "Compiling entry function 'scale'" in out.info_log


def test_tma_module_sm90a():
    out = assemble(TMA_LOAD)
    assert out.arch == "sm_90a" and out.cubin.startswith(ELF_MAGIC)
    r = out.kernels["tma_load_2d"]
    assert 2 <= r.registers <= 32
    assert r.shared_bytes >= 8192 + 8
    assert r.const_bytes > 0


MAX_REGISTERS = {"pipe_splitsum": 96,       # 32 f32 accumulators per thread
                 "wgmma_tile": 128}         # 64 f32 accumulators per thread (m64n128)
MORE_KERNELS = {"pipe_splitsum": {"pipe_splitsum", "pipe_splitsum_ordered"},     # examples with two kernels
                "pipe_varlen": {"pipe_varlen", "pipe_varlen_shared_maps"}}


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.ptx")))
def test_golden_kernels_assemble(name):
    out = assemble((GOLDEN / f"{name}.ptx").read_text(), "sm_90a")
    assert out.cubin.startswith(ELF_MAGIC)
    assert set(out.kernels) == MORE_KERNELS.get(name, {name})
    for kernel, r in out.kernels.items():
        assert 2 <= r.registers <= MAX_REGISTERS.get(name, 64) and r.spill_stores == 0 and r.shared_bytes > 0, kernel


def test_an_internal_compiler_error_is_told_apart_from_a_rule():
    log = ("ptxas /tmp/k.ptx, line 3; fatal   : Internal Compiler Error (codegen): \"unexpected operand\"\n"
           "ERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (ptx)\n")
    err = _assemble_error(log, "NVJITLINK_ERROR_PTX_COMPILE", "sm_90a", "a\nb\nld.v8.b16 x;\n",
                          {3: SourceLoc("/src/k.py", 9)})
    assert err.rule == "ptxas-internal" and err.loc == SourceLoc("/src/k.py", 9)
    assert err.message.startswith("ptxas failed inside itself (an internal compiler error)")
    assert "PTX line 3 (from k.py:9): ld.v8.b16 x;" in err.message
    plain = _assemble_error("ptxas /tmp/k.ptx, line 3; error   : Unknown symbol 'x'\n", "E", "sm_90a",
                            "a\nb\nc\n", {})
    assert plain.rule == "ptxas" and plain.message.startswith("Unknown symbol 'x'")


def test_report_has_one_line_per_kernel():
    out = assemble(TWO_KERNELS, "sm_90")
    lines = out.report().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("empty") and lines[1].startswith("scale")
    r = out.kernels["scale"]
    assert f"{r.registers} registers" in lines[1] and f"{r.shared_bytes} B smem" in lines[1]


def test_options_reach_ptxas_and_spills_are_reported():
    r = assemble(spilling_module(), "sm_90", options=["-maxrregcount=24"]).kernels["spill"]
    assert r.registers <= 24
    assert r.spill_stores > 0 and r.spill_loads > 0 and r.stack_frame >= r.spill_stores


def test_syntax_error_names_line_text_and_origin():
    origin = SourceLoc("/src/kernel.py", 17)
    with pytest.raises(AssembleError) as info:
        assemble(SYNTAX_ERROR, origins={SYNTAX_ERROR_LINE: origin})
    err = info.value
    assert err.message.startswith("Arguments mismatch for instruction 'add'")
    assert "Unknown symbol '%r9q'" in err.message
    assert f"PTX line {SYNTAX_ERROR_LINE} (from kernel.py:17): add.u32 %r2, %r1, %r9q;" in err.message
    assert err.loc == origin
    assert str(err).startswith("kernel.py:17: ")


def test_syntax_error_without_origins():
    with pytest.raises(AssembleError) as info:
        assemble(SYNTAX_ERROR)
    err = info.value
    assert err.loc is None
    assert f"PTX line {SYNTAX_ERROR_LINE}: add.u32 %r2, %r1, %r9q;" in err.message
    assert "sm_90a" in err.message


def test_gather4_needs_sm100a():
    with pytest.raises(AssembleError) as info:
        assemble(GATHER4.format(target="sm_90a"), "sm_90a")
    msg = info.value.message
    assert "gather4" in msg and "sm_100" in msg
    assert f"PTX line {GATHER4_LINE}: cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4" in msg
    out = assemble(GATHER4.format(target="sm_100a"), "sm_100a")
    assert out.cubin.startswith(ELF_MAGIC) and "gather_rows" in out.kernels


def test_target_above_arch_points_at_target_line():
    with pytest.raises(AssembleError) as info:
        assemble(GATHER4.format(target="sm_100a"), "sm_90a")
    assert "PTX line 2: .target sm_100a (assembling for sm_90a)" in info.value.message


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103a",
                                  "sm_110a", "sm_120a"])
def test_accepted_archs(arch):
    assert assemble(TWO_KERNELS, arch).cubin.startswith(ELF_MAGIC)


@pytest.mark.parametrize("arch", ["sm90", "compute_90a", "sm_90b", "SM_90A", "sm_9", "", "sm_90a ", None])
def test_bad_arch_is_a_dsl_error(arch):
    with pytest.raises(DSLError, match="expected sm_NN, sm_NNa or sm_NNf"):
        assemble(TWO_KERNELS, arch)


def test_well_formed_unknown_arch_is_an_assemble_error():
    with pytest.raises(AssembleError, match="ERROR_UNRECOGNIZED_ARCH"):
        assemble(TWO_KERNELS, "sm_99a")


def test_options_must_be_a_sequence():
    with pytest.raises(DSLError, match="sequence of option strings"):
        assemble(TWO_KERNELS, "sm_90", options="-lineinfo")


def test_deterministic():
    assert assemble(TMA_LOAD).cubin == assemble(TMA_LOAD).cubin
    assert assemble(TWO_KERNELS, "sm_100a").cubin == assemble(TWO_KERNELS, "sm_100a").cubin


def test_threads_get_their_own_handles():
    jobs = [(TMA_LOAD, "sm_90a"), (TWO_KERNELS, "sm_100a")] * 4
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda job: assemble(*job), jobs))
    assert all(o.cubin == outs[i % 2].cubin for i, o in enumerate(outs))
    assert all(o.arch == job[1] for o, job in zip(outs, jobs))


def test_parse_resources_from_a_recorded_log():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     232 bytes stack frame, 228 bytes spill stores, 224 bytes spill loads\n"
        "ptxas info    : Used 24 registers, used 1 barriers\n"
        "ptxas info    : Function properties for helper\n"
        "ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "info    : 0 bytes gmem\n"
        "info    : Function properties for 'k':\n"
        "info    : used 24 registers, used 5 barriers, 232 stack, 5120 bytes smem, 536 bytes cmem[0], 0 bytes lmem\n"
    )
    assert parse_resources(log) == {
        "k": Resources(registers=24, shared_bytes=5120, stack_frame=232, spill_stores=228,
                       spill_loads=224, barriers=1, const_bytes=536),
    }


def test_nvjitlink_version():
    major, minor = nvjitlink_version()
    assert isinstance(major, int) and isinstance(minor, int) and major >= 12


def test_the_same_module_assembles_once_per_process():
    """nvJitLink 13.0 leaves ptxas's lines out when it compiles the same PTX again in one process (on the H200 a
    second report read 0 barriers): a repeated assemble returns the first result."""
    first = assemble(TWO_KERNELS, "sm_90")
    again = assemble(TWO_KERNELS, "sm_90")
    assert again is first and again.kernels["scale"].barriers == 1
    assert assemble(TWO_KERNELS, "sm_90", options=["-lineinfo"]) is not first
