"""ptxdsl.gemm on the CPU: every configuration of the table builds, passes the verifier with no allow() and its
launch checks on small grids, and assembles with nvJitLink without a serialised-wgmma line (ptxas C7509-C7520);
the mainloop reads like the math (wait, fence, the MMAs of a K block, commit, wait, release) with scale-d a literal
0 on a tile's first MMA only; the configuration rules and the choice by shape; the launch plan read off the arrays.
The H200 suite (correctness against an f32 reference within cuBLAS's error, both layouts of B, shapes off the
tile) is tests/test_gemm_gpu.py."""
import re
from dataclasses import replace

import pytest

import ptxdsl as px
from ptxdsl.assembler import assemble
from ptxdsl.gemm import GemmConfig, build, choose
from ptxdsl.gemm.config import FAST, SIMPLE, SMALL, TABLE
from ptxdsl.gemm.kernel import a_spec, b_spec, c_spec
from ptxdsl.verify import check, check_launch

CONFIGS = [FAST, SMALL, SIMPLE, replace(FAST, b_major="MN"), replace(SIMPLE, b_major="MN"),
           replace(FAST, mma_depth=1), replace(SMALL, b_major="MN", mma_depth=1)]
SERIALISED = re.compile(r"\(C75(09|1\d|20)\)")


@pytest.fixture(scope="module")
def kernels():
    return {cfg: build(cfg) for cfg in CONFIGS}


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_each_kernel_passes_the_verifier_and_its_launch_checks(kernels, cfg):
    k = kernels[cfg]
    assert check(k) == []
    for grid, (m_tiles, n_tiles, k_blocks) in ((1, (2, 2, 3)), (2, (3, 2, 5)), (132, (9, 7, 4))):
        check_launch(k, (a_spec(cfg), b_spec(cfg), c_spec(cfg), m_tiles, n_tiles, k_blocks), grid=grid,
                     block=cfg.threads)


def test_a_wrong_byte_count_is_caught_by_the_launch_check(monkeypatch):
    """The check is not vacuous: the same kernel with its stages armed for 1 KiB is refused."""
    from ptxdsl import pipeline

    monkeypatch.setattr(pipeline.Ring, "load_bytes", property(lambda self: 1024))
    k = build(FAST)
    with pytest.raises(px.LaunchError) as info:
        check_launch(k, (a_spec(FAST), b_spec(FAST), c_spec(FAST), 2, 2, 3), grid=1, block=FAST.threads)
    assert info.value.rule == "expect-tx-mismatch"


def test_nvjitlink_assembles_every_kernel_without_serialising_wgmma(kernels):
    text = px.emit(px.module(*kernels.values())).text
    asm = assemble(text, "sm_90a")
    assert not SERIALISED.search(asm.info_log), asm.info_log
    for cfg in CONFIGS:
        r = asm.kernels[cfg.name]
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, (cfg.name, r)
    # nvJitLink drops setmaxnreg (C7504): the kernels that reallocate load through the driver JIT
    assert "C7504" in asm.info_log


def protocol(text):
    """The consumer's wgmma and ring steps in PTX order: fence, mma_async, commit_group, wait_group, and
    'release' for the arrive on an empty barrier."""
    steps = []
    for ln in text.splitlines():
        op = ln.strip().split(" ")[0]
        if op.startswith("wgmma."):
            steps.append(op.split(".")[1])
        elif op == "mbarrier.arrive.release.cta.shared::cta.b64":
            steps.append("release")
    return " ".join(steps)


def test_the_mainloop_reads_like_the_math():
    """Per K block: fence, 4 MMAs (K 64 = 4 x k16) per 64-row block, commit, wait 0, release the stage; twice in
    the PTX (the peeled first K block and the loop). A tile's first MMA has scale-d a literal 0, every other 1."""
    text = px.emit(build(FAST)).text
    mmas = [ln for ln in text.splitlines() if "wgmma.mma_async" in ln]
    assert len(mmas) == 8 and all(".m64n256k16.f32.bf16.bf16" in ln for ln in mmas)
    assert [ln.rstrip(";").split(",")[-5].strip() for ln in mmas] == ["0"] + ["1"] * 7
    block = "fence mma_async mma_async mma_async mma_async commit_group wait_group release"
    assert protocol(text) == f"{block} {block}", protocol(text)
    assert text.count("wgmma.wait_group.sync.aligned 0;") == 2
    two_blocks = px.emit(build(SIMPLE)).text                      # 128 rows, one consumer: two accumulators
    assert protocol(two_blocks).split(" release")[0] == "fence " + " ".join(["mma_async"] * 8) + \
        " commit_group wait_group"


def test_with_one_k_block_in_flight_a_stage_is_released_after_the_next_ones_mmas():
    """mma_depth=1: the peeled block commits without waiting; each later one commits, waits for all but the
    newest group (wait_group 1: the previous stage's MMAs are done) and releases the previous stage; after the
    loop, wait_group 0 and the last release, before the epilogue reads the accumulators."""
    text = px.emit(build(replace(FAST, mma_depth=1))).text
    mma4 = "fence mma_async mma_async mma_async mma_async commit_group"
    assert protocol(text) == f"{mma4} {mma4} wait_group release wait_group release", protocol(text)
    waits = [ln.strip() for ln in text.splitlines() if "wgmma.wait_group" in ln]
    assert waits == ["wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;"]


def test_the_register_split_and_budget_are_declared():
    text = px.emit(build(FAST)).text
    assert ".maxntid 384, 1, 1" in text and ".minnctapersm 1" in text
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in text and "setmaxnreg.inc.sync.aligned.u32 232;" in text
    assert "setmaxnreg" not in px.emit(build(SIMPLE)).text


@pytest.mark.parametrize("kw, rule, fragment", [
    ({"block_n": 320}, "gemm.tile", "block_n=320"),
    ({"block_k": 32}, "gemm.tile", "block_k=32"),
    ({"block_m": 64, "consumers": 2}, "gemm.tile", "block_m=64"),
    ({"stages": 5}, "gemm.shared", "stages=5"),
    ({"registers": (24, 248)}, "gemm.registers", "fit the CTA's pool"),
    ({"registers": (40, 230)}, "gemm.registers", "multiples of 8"),
    ({"block_m": 256, "consumers": 1, "registers": None}, "gemm.registers", "at most 128 f32"),
    ({"b_major": "N"}, "gemm.config", "b_major='N'"),
    ({"epilogue_n": 96}, "gemm.tile", "epilogue_n=96"),
    ({"consumers": 0}, "gemm.config", "consumers=0"),
])
def test_bad_configurations_are_refused_with_their_rule(kw, rule, fragment):
    with pytest.raises(px.DSLError) as info:
        GemmConfig(**kw)
    assert info.value.rule == rule and fragment in str(info.value), str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_the_table_and_the_choice_by_shape():
    assert dict(TABLE)["128x256"] is FAST
    assert choose(8192, 8192, 8192) == FAST                       # 32 x 64 tiles of 128x256: every SM busy
    assert choose(4096, 4096, 4096) == FAST                       # 512 tiles
    assert choose(256, 8192, 8192) == SMALL                       # 2 x 32 = 64 big tiles: smaller ones
    assert choose(1024, 8192, 8192, b_major="MN") == replace(FAST, b_major="MN")
    for cfg in (FAST, SMALL, SIMPLE):
        assert cfg.shared_bytes <= 227 * 1024


def test_the_launch_plan_reads_the_layouts_off_the_arrays():
    import ml_dtypes
    import numpy as np

    from ptxdsl.gemm.launch import plan

    a = np.zeros((300, 200), ml_dtypes.bfloat16)
    w = np.zeros((520, 200), ml_dtypes.bfloat16)                  # N x K: a @ w.T reads B K-major
    out = np.zeros((300, 520), ml_dtypes.bfloat16)
    cfg, args, ntiles = plan(a, w.T, out, SIMPLE)
    assert cfg.b_major == "K" and args[3:] == (3, 5, 4) and ntiles == 15
    assert args[1].dims == (200, 520) and args[1].box == (64, 128)
    cfg, args, _ = plan(a, np.zeros((200, 520), ml_dtypes.bfloat16), out, SIMPLE)    # K x N: MN-major
    assert cfg.b_major == "MN" and args[1].dims == (520, 200) and args[1].box == (64, 64)
    with pytest.raises(px.LaunchError) as info:
        plan(a, w, out, SIMPLE)
    assert info.value.rule == "gemm.shape"
    with pytest.raises(px.LaunchError) as info:
        plan(a.astype(np.float32), w.T, out, SIMPLE)
    assert info.value.rule == "gemm.dtype"


def test_an_epilogue_runs_on_each_accumulator_before_the_cast():
    from ptxdsl.gemm.epilogue import relu, scale

    plain = px.emit(build(SMALL)).text
    text = px.emit(build(SMALL, epilogue=relu)).text
    regs = SMALL.block_n // 2                                      # f32 accumulator registers a thread
    assert text.count("max.f32") == plain.count("max.f32") + regs
    assert "gemm_bf16_128x128x64_s4_c2_g8_r40_232_bk_relu" in text
    assert px.emit(build(SMALL, epilogue=scale(0.5))).text.count("mul.f32") >= regs
    assert check(build(SMALL, epilogue=relu)) == []
