"""ptxas's second opinion on a wgmma pipeline (ptxdsl.ptxas_notes): kernels built with the builder whose pipeline
ptxas serialises or repairs, assembled by nvJitLink; each note names the builder line of the instruction it is about
(marked `# <- CODE` below) and what to change; `ptxdsl check` prints them, strict=True refuses them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import ptxas_notes
from ptxdsl.cli import main
from ptxdsl.errors import AssembleError

HERE = Path(__file__)


def marked(code: str) -> int:
    """The line of this file marked `# <- code`."""
    (n,) = [i for i, ln in enumerate(HERE.read_text().splitlines(), 1) if ln.rstrip().endswith(f"# <- {code}")]
    return n


def stage(variant: str, *, strict: bool = False, name: str | None = None):
    """A K loop of bf16 mma_async with one group in flight (wait_group 1), and the mistake `variant` inside it."""
    with px.kernel(name or f"k_{variant}", verify=False, reqntid=128, strict=strict) as k:
        acc = tuple(k.mov(0.0, px.f32) for _ in range(32))
        a = tuple(k.mov(0, px.b32) for _ in range(4))
        da, db = k.param("a", px.u64), k.param("b", px.u64)
        out, n = k.param_ptr("out"), k.param("n", px.u32)
        k.wgmma_fence()
        with k.loop(0, n) as i:
            k.wgmma_mma_async(acc, a if variant == "write_a" else da, db, atype="bf16")
            if variant == "read_acc":
                k.st(px.f32, out, acc[3])                                  # <- C7514
            if variant == "write_acc":
                k.mov(1.0, px.f32, out=acc[0])                             # <- C7515
            if variant == "write_a":
                k.mov(i, out=a[0])                                         # <- C7513
            k.wgmma_commit_group()
            k.wgmma_wait_group(1)
        k.wgmma_wait_group(0)
        k.st(px.f32, out, acc[:4])
    return k


def test_a_pipeline_ptxas_keeps_has_no_notes():
    ptx = px.emit(stage("clean", strict=True))
    asm = px.assemble(ptx, "sm_90a")
    assert asm.notes(ptx) == [] and "C75" not in asm.info_log


@pytest.mark.parametrize("variant, codes", [
    ("read_acc", ["C7517", "C7514"]),
    ("write_acc", ["C7515"]),
    ("write_a", ["C7513"]),
])
def test_each_note_names_the_builder_line_and_what_to_change(variant, codes):
    ptx = px.emit(stage(variant))
    asm = px.assemble(ptx, "sm_90a")
    found = asm.notes(ptx)
    assert [n.code for n in found] == codes, asm.info_log
    for note in found:
        code = "C7514" if note.code == "C7517" else note.code
        assert (note.loc.file, note.loc.line) == (__file__, marked(code)), str(note)
        assert note.kernel == f"k_{variant}"
        assert note.message.split(": ", 1)[1].startswith(ptxas_notes.ADVICE[note.code][0])
        assert f"Change: {ptxas_notes.ADVICE[note.code][1]}" in note.message
        assert str(note).startswith(f"{HERE.name}:{marked(code)}: ptxas-{note.code}: warning: kernel 'k_{variant}'")


def test_too_few_registers_for_the_groups_in_flight_names_the_stage():
    """Two 64x256 f32 accumulators (256 registers) in flight: ptxas serialises (C7511) and points at the stage's
    fence."""
    with px.kernel("wide", verify=False, reqntid=128) as k:
        accs = [tuple(k.mov(0.0, px.f32) for _ in range(128)) for _ in range(2)]
        da, db = k.param("a", px.u64), k.param("b", px.u64)
        out, n = k.param_ptr("out"), k.param("n", px.u32)
        with k.loop(0, n):
            k.wgmma_fence()                                                # <- C7511
            for acc in accs:
                k.wgmma_mma_async(acc, da, db, atype="bf16")
                k.wgmma_commit_group()
            k.wgmma_wait_group(1)
        k.wgmma_wait_group(0)
        for acc in accs:
            for j in range(0, 128, 4):
                k.st(px.f32, k.add(out, k.mov(4 * j, px.u64)), acc[j:j + 4])
    ptx = px.emit(k)
    (note,) = px.assemble(ptx, "sm_90a").notes(ptx)
    assert note.code == "C7511" and note.loc.line == marked("C7511")
    assert "more registers" in note.message and "maxnreg" in note.message


def fenceless():
    """Accumulators rescaled at the top of each K step with no wgmma.fence after the write."""
    with px.kernel("fenceless", verify=False, reqntid=128) as k:
        acc = tuple(k.mov(0.0, px.f32) for _ in range(32))
        da, db = k.param("a", px.u64), k.param("b", px.u64)
        out, n = k.param_ptr("out"), k.param("n", px.u32)
        x = k.ld(px.f32, out)
        with k.loop(0, n):
            for r in acc:
                k.mul(r, x, out=r)                                         # <- C7519
            k.wgmma_mma_async(acc, da, db, atype="bf16")
            k.wgmma_commit_group()
            k.wgmma_wait_group(0)
        k.st(px.f32, out, acc[:4])
    return k


def test_an_injected_warpgroup_arrive_names_the_unfenced_write():
    """C7519 as ptxas 13.0 and the CUDA 13.0 driver JIT print it for this kernel (nvJitLink 13.5 repairs it without a
    word): the note names the last write of an accumulator before the mma_async."""
    ptx = px.emit(fenceless())
    mma = next(n for n, ln in enumerate(ptx.text.splitlines(), 1) if "mma_async" in ln)
    log = (f"ptxas info    : (C7519) warpgroup.arrive is injected in around line {mma} by compiler to allow use of "
           f"registers in GMMA in function 'fenceless'\n")
    (note,) = ptxas_notes.notes(log, ptx)
    assert note.code == "C7519" and note.loc.line == marked("C7519") and "k.wgmma_fence()" in note.message
    assert re.search(r"\(mul\.f32 %f32, %f32, %f33\)", note.message), note.message


def test_strict_kernels_refuse_the_notes():
    with pytest.raises(AssembleError, match="ptxas-C7515: kernel 's'") as info:
        px.assemble(px.emit(stage("write_acc", strict=True, name="s")), "sm_90a")
    assert info.value.rule == "ptxas-serialized" and info.value.loc.line == marked("C7515")
    px.assemble(px.emit(stage("write_acc", strict=True, name="s2")), "sm_90a", strict=False)     # asked not to
    with pytest.raises(AssembleError, match="ptxas-C7513"):
        px.assemble(px.emit(stage("write_a", name="s3")), "sm_90a", strict=True)
    with pytest.raises(px.DSLError, match="strict='yes'"):
        px.kernel("bad", strict="yes")


def test_compile_logs_the_notes_and_refuses_them_for_a_strict_kernel(caplog):
    import logging

    from ptxdsl.assembler import nvjitlink_release
    from ptxdsl.cubin import prepare

    driver = tuple(int(x) for x in nvjitlink_release().split(".")[:2])
    with caplog.at_level(logging.WARNING, logger="ptxdsl"):
        image = prepare(px.emit(stage("read_acc", name="c1")), "sm_90a", driver=driver)
    assert image.cubin is not None
    assert [r.getMessage().split(": ")[1] for r in caplog.records] == ["ptxas-C7517", "ptxas-C7514"]
    with pytest.raises(AssembleError, match="strict=True"):
        prepare(px.emit(stage("read_acc", strict=True, name="c2")), "sm_90a", driver=driver)


CHECKED = f"""\
import sys
sys.path.insert(0, {str(HERE.parent)!r})
from test_ptxas_notes import stage
KERNEL = stage("write_a", name="checked")
"""


def test_ptxdsl_check_prints_the_notes_and_strict_fails(tmp_path, capsys):
    f = tmp_path / "serial.py"
    f.write_text(CHECKED)
    assert main(["check", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"{HERE.name}:{marked('C7513')}: ptxas-C7513: warning: kernel 'checked'" in out
    assert main(["check", "--strict", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{HERE.name}:{marked('C7513')}" in err and "ptxas-C7513: kernel 'checked'" in err and "strict=True" in err


def test_notes_read_a_log_without_the_ptx():
    log = ("ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
           "wgmma pipeline crossing function boundary at a function call in the function 'f'\n"
           "ptxas info    : 0 bytes gmem\n")
    (note,) = ptxas_notes.notes(log)
    assert (note.code, note.kernel, note.loc, note.line) == ("C7510", "f", None, None)
    assert "keep calls out" in note.message and str(note).startswith("ptxas-C7510: warning:")
    assert ptxas_notes.notes("ptxas info    : (C7504) 'setmaxnreg' ignored\n") == []


PTXAS_13_0 = """\
ptxas info    : (C7519) warpgroup.arrive is injected in around line 67 by compiler to allow use of registers in GMMA in function 'k_read_acc'
ptxas info    : (C7517) warpgroup.wait is injected in around line 68 by compiler to allow use of registers defined by GMMA in function 'k_read_acc'
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'k_read_acc'
"""  # noqa: E501  (ptxas 13.0's words for stage("read_acc"), the compiler of the CUDA 13.0 driver JIT)


def test_ptxas_13_0s_wording_gives_the_same_notes():
    """The driver JIT of CUDA 13.0 words C7517 differently, adds C7519 (the fence is outside the loop) and gives no
    line for C7514: the notes still name the read."""
    ptx = px.emit(stage("read_acc"))
    found = ptxas_notes.notes(PTXAS_13_0, ptx)
    assert [n.code for n in found] == ["C7519", "C7517", "C7514"]
    assert [n.loc.line for n in found[1:]] == [marked("C7514")] * 2
    assert found[0].line == 67 and "mma_async" in found[0].message


@pytest.mark.gpu
def test_the_driver_jit_log_refuses_a_strict_kernel():
    """Loaded through the driver JIT (its ptxas, CUDA 13.0 on the H200), a strict kernel whose pipeline ptxas
    serialises is refused as nvJitLink's path refuses it."""
    with pytest.raises(AssembleError, match=r"ptxas-C75\d\d: kernel 'jit_strict'") as info:
        px.compile(stage("write_acc", strict=True, name="jit_strict"), loader="ptx")
    assert info.value.rule == "ptxas-serialized"
    prog = px.compile(stage("write_acc", name="jit_loose"), loader="ptx")
    assert prog.loaded_from == "ptx"
