"""SASS (ptxdsl.sass, nvdisasm from the `ptxdsl[sass]` extra): the builder's Python and .ptxd lines under the code
they became, one kernel's section, the setmaxnreg trap as nvJitLink's SASS shows it, the errors, and
PTXDSL_DUMP_DIR. The tests that need nvdisasm are marked `nvdisasm`: without the extra they skip with the reason;
CI installs it and sets PTXDSL_REQUIRE_NVDISASM=1, so there a missing nvdisasm fails them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import dump, lang, sass, sreg
from ptxdsl.errors import PtxdslError
from ptxdsl.sass import SassError, disassemble

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r'//## File "(?P<file>[^"]+)", line (?P<line>\d+)\n\s*//    (?P<text>.*)\n')


def line_of(path: Path, text: str) -> int:
    """The 1-based line of `path` that holds `text` (exactly once)."""
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, (path, text, hits)
    return hits[0]


def lined_cubin(kernel):
    ptx = px.emit(kernel, line_info=True)
    return ptx, px.assemble(ptx, "sm_90a", options=["-lineinfo"]).cubin


@pytest.mark.nvdisasm
def test_sass_shows_the_builders_python_lines():
    from tma_store_tile import k

    ptx, cubin = lined_cubin(k)
    out = disassemble(cubin, ptx=ptx)
    common = ROOT / "examples" / "tile_common.py"
    marks = {(Path(m["file"]).name, int(m["line"])): m["text"] for m in MARK.finditer(out)}
    init_line = line_of(common, "k.mbarrier_init(bar, 1)")
    assert marks[("tile_common.py", init_line)] == "k.mbarrier_init(bar, 1)"
    store_line = line_of(ROOT / "examples" / "tma_store_tile.py", "k.cp_async_bulk_tensor(dst, tile, (x, y))")
    assert marks[("tma_store_tile.py", store_line)] == "k.cp_async_bulk_tensor(dst, tile, (x, y))"
    # each marker's text is that line of that file
    for (name, n), text in marks.items():
        assert (ROOT / "examples" / name).read_text().splitlines()[n - 1].strip() == text
    assert "UTMALDG" in out and "UTMASTG" in out           # the TMA load and store, in SASS


@pytest.mark.nvdisasm
def test_sass_shows_the_ptxd_lines():
    path = ROOT / "examples" / "tma_store_tile.ptxd"
    (kernel,) = lang.load(path)
    ptx, cubin = lined_cubin(kernel)
    out = disassemble(cubin, ptx=ptx)
    marks = [m for m in MARK.finditer(out) if m["file"].endswith("tma_store_tile.ptxd")]
    assert marks, out[:2000]
    lines = path.read_text().splitlines()
    for m in marks:
        assert lines[int(m["line"]) - 1].strip() == m["text"]
    assert any("mbarrier" in m["text"] for m in marks)


@pytest.mark.nvdisasm
def test_without_line_info_there_are_no_markers():
    from tma_store_tile import k

    ptx = px.emit(k)
    out = disassemble(px.assemble(ptx, "sm_90a").cubin, ptx=ptx)
    assert "//##" not in out and "UTMALDG" in out


def two_kernel_module():
    with px.kernel("first") as a:
        a.mov(1, px.u32)
    with px.kernel("second") as b:
        b.bar_sync(0)
    return px.module(a, b)


@pytest.mark.nvdisasm
def test_one_kernels_section():
    mod = two_kernel_module()
    cubin = px.assemble(px.emit(mod), "sm_90a").cubin
    whole = disassemble(cubin)
    second = disassemble(cubin, kernel="second")
    assert ".text.first" in whole and ".text.second" in whole
    assert ".text.second" in second and ".text.first" not in second
    assert "BAR.SYNC" in second
    with pytest.raises(SassError, match=r"kernel='third' has no code in this cubin; it has first, second$"):
        disassemble(cubin, kernel="third")


def setmaxnreg_kernel():
    with px.kernel("smr", reqntid=256, maxnreg=168, arch="sm_90a") as k:
        out = k.param_ptr("out")
        wg = k.shr(k.mov(sreg.tid_x), 7)
        with k.if_(k.setp("eq", wg, 0)):
            k.setmaxnreg_dec(40)
        with k.if_(k.setp("ne", wg, 0)):
            k.setmaxnreg_inc(232)
        tid = k.mov(sreg.tid_x)
        k.st(px.u32, k.add(out, k.cvt(px.u64, k.mul(tid, 4))), tid)
    return k


@pytest.mark.nvdisasm
def test_setmaxnreg_goes_to_the_driver_jit_because_nvjitlink_drops_it():
    """The trap as measured: nvJitLink compiles PTX as relocatable code, ptxas then drops setmaxnreg (C7504) and the
    SASS has no USETMAXREG; so the compile path loads such a module through the driver JIT (whole program), which
    keeps it (tests/test_compile_gpu.py checks the registers the GPU gives the kernel). This test fails once an
    nvJitLink keeps setmaxnreg: then the cubin can be loaded as is."""
    from ptxdsl.cubin import prepare

    ptx = px.emit(setmaxnreg_kernel())
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx.text
    asm = px.assemble(ptx, "sm_90a")
    assert asm.setmaxnreg_dropped and "C7504" in asm.info_log
    assert "USETMAXREG" not in disassemble(asm.cubin)
    image = prepare(ptx, "sm_90a", driver=(13, 0))
    assert image.cubin is None and "setmaxnreg" in image.jit_reason and "C7504" in image.jit_reason


def test_a_kernel_without_setmaxnreg_keeps_its_cubin():
    from ptxdsl.cubin import prepare
    from tma_store_tile import k

    ptx = px.emit(k)
    asm = px.assemble(ptx, "sm_90a")
    assert not asm.setmaxnreg_dropped
    image = prepare(ptx, "sm_90a", driver=(13, 0))
    assert image.jit_reason == "" and image.cubin == asm.cubin


def test_missing_nvdisasm_names_the_extra(monkeypatch):
    import cuda.pathfinder

    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_binary_utility", lambda name: None, raising=False)
    monkeypatch.setattr(sass, "_from_wheel", lambda: None)
    sass.nvdisasm_path.cache_clear()
    try:
        with pytest.raises(SassError, match=r"nvdisasm is not installed.*pip install 'ptxdsl\[sass\]'") as e:
            disassemble(px.assemble(px.emit(two_kernel_module()), "sm_90a").cubin)
        assert e.value.rule == "sass.nvdisasm-missing"
    finally:
        sass.nvdisasm_path.cache_clear()


@pytest.mark.nvdisasm("wheel")
def test_nvdisasm_is_found_from_the_wheel_when_pathfinder_cannot(monkeypatch):
    import cuda.pathfinder

    monkeypatch.setattr(cuda.pathfinder, "find_nvidia_binary_utility", lambda name: None, raising=False)
    sass.nvdisasm_path.cache_clear()
    try:
        path = sass.nvdisasm_path()
        assert Path(path).name == "nvdisasm" and Path(path).parent.name == "bin"
    finally:
        sass.nvdisasm_path.cache_clear()


@pytest.mark.parametrize("bad", [b"", b"not an elf", "text", None, b"\x7fELF" + b"\0" * 8])
def test_not_a_cubin(bad):
    with pytest.raises(SassError):
        disassemble(bad)


@pytest.mark.nvdisasm
def test_dump_dir_gets_ptx_cubin_and_sass(tmp_path, monkeypatch):
    from tma_store_tile import k

    ptx = px.emit(k, line_info=True)
    cubin = px.assemble(ptx, "sm_90a", options=["-lineinfo"]).cubin
    monkeypatch.delenv("PTXDSL_DUMP_DIR", raising=False)
    assert dump.dump(ptx, cubin) == []
    monkeypatch.setenv("PTXDSL_DUMP_DIR", str(tmp_path / "dumps"))
    written = dump.dump(ptx, cubin)
    names = sorted(p.name for p in written)
    assert [re.sub(r"-[0-9a-f]{16}\.", "-HASH.", n) for n in names] == [
        "tma_store_tile-HASH.cubin", "tma_store_tile-HASH.ptx", "tma_store_tile-HASH.sass"]
    files = {p.suffix: p for p in written}
    assert files[".ptx"].read_text() == ptx.text
    assert files[".cubin"].read_bytes() == cubin
    assert "k.mbarrier_init(bar, 1)" in files[".sass"].read_text()
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == names


def test_dump_of_a_jit_loaded_module_has_only_the_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXDSL_DUMP_DIR", str(tmp_path))
    ptx = px.emit(setmaxnreg_kernel())
    (only,) = dump.dump(ptx, None)
    assert only.name.startswith("smr-") and only.suffix == ".ptx"


def test_an_unwritable_dump_dir_is_a_ptxdsl_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("PTXDSL_DUMP_DIR", str(blocker))
    with pytest.raises(PtxdslError, match=r"PTXDSL_DUMP_DIR=.*dump directory is writable"):
        dump.dump(px.emit(setmaxnreg_kernel()), None)


def test_dump_names_a_module_by_its_kernels():
    ptx = px.emit(two_kernel_module())
    assert re.fullmatch(r"first\+second-[0-9a-f]{16}", dump.stem(ptx.kernels, ptx.text))
