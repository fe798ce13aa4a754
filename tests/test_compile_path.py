"""The compile path without a GPU: the arch a device gets, when nvJitLink's cubin is loaded and when the driver JIT
compiles the PTX instead (and the reason logged), what `import ptxdsl` loads, and the `ptxdsl` logger's silence."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import assembler
from ptxdsl.cubin import device_arch, nvjitlink_unusable, prepare
from ptxdsl.errors import AssembleError, TargetError
from ptxdsl.program import entry_text

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("cc, target, arch", [
    ((9, 0), "sm_90", "sm_90a"), ((9, 0), "sm_90a", "sm_90a"),
    ((10, 0), "sm_90", "sm_100a"), ((10, 0), "sm_100a", "sm_100a"), ((10, 0), "sm_100f", "sm_100a"),
    ((10, 3), "sm_100f", "sm_103a"), ((10, 3), "sm_103a", "sm_103a"), ((12, 0), "sm_120a", "sm_120a"),
    ((8, 9), "sm_80", "sm_89"),
])
def test_device_arch(cc, target, arch):
    assert device_arch(cc, target) == arch


@pytest.mark.parametrize("cc, target, needs", [
    ((10, 0), "sm_90a", "compute capability 9.0 exactly"),
    ((9, 0), "sm_100a", "compute capability 10.0 exactly"),
    ((10, 3), "sm_100a", "compute capability 10.0 exactly"),
    ((12, 0), "sm_100f", "a 10.x device"),
    ((9, 0), "sm_100", "compute capability 10.0 or later"),
])
def test_a_target_the_device_cannot_run(cc, target, needs):
    with pytest.raises(TargetError, match=rf"\.target {target} breaks 'the kernel runs on this device'.*{needs}") as e:
        device_arch(cc, target)
    assert e.value.rule == "target.device"


def test_arch_matches_what_nvjitlink_accepts():
    """The arch device_arch picks for an H200 assembles every .target the H200 runs (sm_90 and sm_90a PTX)."""
    for target in ("sm_90", "sm_90a"):
        text = f".version 8.0\n.target {target}\n.address_size 64\n.visible .entry k()\n{{\n\tret;\n}}\n"
        assert px.assemble(text, device_arch((9, 0), target)).cubin.startswith(b"\x7fELF")


def store_tile():
    from tma_store_tile import k

    return px.emit(k)


def test_the_cubin_is_loaded_when_nvjitlink_serves_the_driver(monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE", "0")
    ptx = store_tile()
    image = prepare(ptx, "sm_90a", driver=(13, 0))
    assert image.jit_reason == ""
    assert image.cubin == px.assemble(ptx, "sm_90a").cubin        # the bytes `ptxdsl check` reports on
    assert image.assembled.kernels["tma_store_tile"] == px.assemble(ptx, "sm_90a").kernels["tma_store_tile"]


def test_a_driver_older_than_nvjitlinks_major_gets_the_ptx(monkeypatch, caplog):
    major = int(assembler.nvjitlink_release().split(".")[0])
    with caplog.at_level("INFO", logger="ptxdsl"):
        image = prepare(store_tile(), "sm_90a", driver=(major - 1, 8))
    assert image.cubin is None and image.assembled is None
    assert f"newer than the driver's CUDA {major - 1}.8" in image.jit_reason
    assert any("driver JIT" in r.getMessage() and image.jit_reason in r.getMessage() for r in caplog.records)
    assert nvjitlink_unusable((major, 0)) == ""
    monkeypatch.setattr(assembler, "nvjitlink_release", lambda: f"{major + 1}.0.1")
    assert f"nvJitLink {major + 1}.0.1 is newer" in nvjitlink_unusable((major, 9))


def test_an_arch_nvjitlink_does_not_know_gets_the_ptx(monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE", "0")
    image = prepare(store_tile(), "sm_99a", driver=(13, 0))
    assert image.cubin is None and "nvJitLink cannot target sm_99a" in image.jit_reason


def test_ptx_that_ptxas_refuses_is_an_error_not_a_fallback(monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE", "0")
    text = store_tile().text.replace("cp.async.bulk.commit_group;", "cp.async.bulk.commit_groop;")
    with pytest.raises(AssembleError) as e:
        prepare(text, "sm_90a", driver=(13, 0))
    assert e.value.rule == "ptxas"


def test_a_cubin_whose_dynamic_shared_memory_starts_off_its_alignment_gets_the_ptx(monkeypatch):
    """nvJitLink 13.0 ends a kernel's .nv.shared section at a 16-byte boundary whatever the `.extern .shared
    .align` says, so the dynamic window (1024-aligned for a 128B-swizzled box) starts off it and the TMA load
    faults. The installed nvJitLink's cubin is read as it is, then with that section shortened to 0x410 bytes
    (what nvJitLink 13.0 writes for pipe_transpose): the second goes to the driver JIT, with the reason."""
    import struct

    import pipe_transpose
    from ptxdsl import cubin as cubin_mod

    monkeypatch.setenv("PTXDSL_CACHE", "0")
    ptx = px.emit(pipe_transpose.KERNEL)
    assert ptx.kernels["pipe_transpose"].dynamic_shared_align == 1024
    image = prepare(ptx, "sm_90a", driver=(13, 0))
    size = cubin_mod.shared_section_sizes(image.cubin)["pipe_transpose"]
    assert image.jit_reason == "" and size % 1024 == 0 and size >= 0x400      # the reserved kilobyte and more
    data = bytearray(image.cubin)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count, _ = struct.unpack_from("<HHH", data, 0x3A)
    for i in range(count):
        if struct.unpack_from("<Q", data, shoff + i * entsize + 32)[0] == size:
            struct.pack_into("<Q", data, shoff + i * entsize + 32, 0x410)
    assert cubin_mod.shared_section_sizes(bytes(data)) == {"pipe_transpose": 0x410}
    reason = cubin_mod.misaligned_dynamic_shared(bytes(data), ptx)
    assert ("starts the dynamic shared memory of kernel 'pipe_transpose' at byte 0x410, off the 1024-byte "
            "alignment") in reason
    monkeypatch.setattr(assembler, "assemble", lambda *a, **kw: assembler.Assembled(bytes(data), "sm_90a", "", {}))
    assert prepare(ptx, "sm_90a", driver=(13, 0)).jit_reason == reason
    assert cubin_mod.misaligned_dynamic_shared(bytes(data), store_tile()) == ""        # no dynamic window
    assert cubin_mod.shared_section_sizes(b"not an ELF image") == {}


def test_line_info_reaches_the_cubin(monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE", "0")
    from tma_store_tile import k

    lined = prepare(px.emit(k, line_info=True), "sm_90a", driver=(13, 0), line_info=True)
    plain = prepare(px.emit(k), "sm_90a", driver=(13, 0))
    assert b".debug_line" in lined.cubin and b".debug_line" not in plain.cubin


def test_entry_text_is_one_kernel():
    with px.kernel("first") as a:
        a.mov(1, px.u32)
    with px.kernel("second") as b:
        b.bar_sync(0)
    text = px.emit(px.module(a, b)).text
    second = entry_text(text, "second")
    assert second.startswith(".visible .entry second()") and second.endswith("}\n")
    assert "bar.sync 0" in second and "first" not in second
    first = entry_text(text, "first")
    assert first.startswith(".visible .entry first()") and "bar.sync" not in first
    assert text.index(first) + len(first) <= text.index(second)


IMPORT = textwrap.dedent("""
    import sys, ptxdsl
    with ptxdsl.kernel("k") as k:
        k.mov(1, ptxdsl.u32)
    ptxdsl.emit(k)
    heavy = ("numpy", "cuda", "lark", "ml_dtypes", "torch")
    print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
""")


def test_import_ptxdsl_loads_nothing_heavy():
    """Building and printing a kernel needs neither numpy, cuda-bindings (driver or nvJitLink), Lark nor ml_dtypes."""
    out = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


COMPILE_IMPORTS = textwrap.dedent("""
    import sys
    import ptxdsl.program, ptxdsl.cubin, ptxdsl.dump, ptxdsl.runtime, ptxdsl.assembler, ptxdsl.cache
    print("hashlib" in sys.modules)
""")


def test_the_compile_path_imports_no_hashlib():
    """px.compile imports what Program and the cubin cache need; hashlib (it loads OpenSSL: about 3 ms of a first
    compile on the development machine) only when a module is dumped (the cache hashes with _blake2)."""
    out = subprocess.run([sys.executable, "-c", COMPILE_IMPORTS], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_lazy_public_names():
    import ptxdsl

    assert ptxdsl.Program.__name__ == "Program" and ptxdsl.Resources.__name__ == "Resources"
    assert {"Program", "Resources", "Assembled"} <= set(dir(ptxdsl))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ptxdsl.Nope  # noqa: B018


QUIET = textwrap.dedent("""
    import sys
    sys.path.insert(0, "examples")
    import ptxdsl as px
    from ptxdsl.cubin import prepare
    from tma_store_tile import k
    prepare(px.emit(k), "sm_90a", driver=(12, 0))      # logs an INFO line: the driver JIT, and why
    prepare(px.emit(k), "sm_90a", driver=(13, 0))      # debug lines: cache, assemble
""")


def test_the_logger_is_silent_unless_configured(tmp_path):
    env = {"PTXDSL_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", QUIET], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""
    configured = QUIET.replace("import sys\n", "import sys, logging\nlogging.basicConfig(level=logging.DEBUG)\n", 1)
    env["PTXDSL_CACHE_DIR"] = str(tmp_path / "second")                 # a cold cache again
    out = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True, cwd=ROOT, env=env)
    assert "INFO:ptxdsl:loading the PTX through the driver JIT" in out.stderr
    assert "DEBUG:ptxdsl:cache miss: cubin" in out.stderr and "DEBUG:ptxdsl:assemble sm_90a:" in out.stderr


class FakeDevice:
    compute_capability = (9, 0)

    def set_current(self):
        pass


class FakeModule:
    """What Program needs of a loaded module; records how it was loaded."""

    def __init__(self, how, data):
        self.how, self.data, self.info_log = how, data, ""

    def function(self, name):
        return FakeFunction(name)


class FakeFunction:
    def __init__(self, name):
        self.name, self.handle = name, None
        self.attributes = {"num_regs": 168, "static_shared_bytes": 1024, "const_bytes": 8, "local_bytes": 0}


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """Program on a pretend H200 with a CUDA 13.0 driver: the loads are recorded, not run."""
    import ptxdsl.runtime
    import ptxdsl.runtime.module as module

    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PTXDSL_LOADER", "cubin")
    monkeypatch.setattr(ptxdsl.runtime, "current_device", FakeDevice)
    monkeypatch.setattr(module, "driver_version", lambda: (13, 0))
    monkeypatch.setattr(module, "load_cubin", lambda image, name: FakeModule("cubin", image))
    monkeypatch.setattr(module, "load_ptx", lambda text, **kw: FakeModule("ptx", text))
    return module


@pytest.mark.nvdisasm
def test_program_loads_the_cubin_and_exposes_it(fake_gpu, monkeypatch, tmp_path):
    from tma_store_tile import k

    monkeypatch.setenv("PTXDSL_DUMP_DIR", str(tmp_path / "dump"))
    prog = px.compile(k, line_info=True)
    assert prog.module.how == "cubin" and prog.loaded_from == "cubin" and prog.arch == "sm_90a"
    assert prog.module.data == prog.cubin == px.assemble(prog.ptx, "sm_90a", options=["-lineinfo"]).cubin
    assert prog.resources == px.assemble(prog.ptx, "sm_90a").kernels
    assert "k.mbarrier_init(bar, 1)" in prog.sass and "UTMALDG" in prog["tma_store_tile"].sass
    assert prog["tma_store_tile"].ptx in prog.ptx.text
    assert sorted(p.suffix for p in (tmp_path / "dump").iterdir()) == [".cubin", ".ptx", ".sass"]


def test_the_default_loader_is_the_cubin_and_ptx_asks_for_the_driver_jit(fake_gpu, monkeypatch):
    from ptxdsl.sass import SassError
    from tma_store_tile import k

    monkeypatch.delenv("PTXDSL_LOADER")
    assert px.compile(k).loaded_from == "cubin"
    prog = px.compile(k, loader="ptx")
    assert prog.module.how == "ptx" and prog.module.data == prog.ptx.text and prog.cubin is None
    assert prog.loaded_from == "ptx" and "loader='ptx'" in prog.jit_reason
    assert prog.resources["tma_store_tile"].registers == 168           # the driver's attribute
    with pytest.raises(SassError, match="loaded through the driver JIT"):
        prog.sass
    monkeypatch.setenv("PTXDSL_LOADER", "ptx")
    assert px.compile(k).loaded_from == "ptx"


@pytest.mark.parametrize("loader, env", [("jit", None), (None, "elf"), (5, None)])
def test_an_unknown_loader_is_an_error(fake_gpu, monkeypatch, loader, env):
    from tma_store_tile import k

    monkeypatch.setenv("PTXDSL_LOADER", env or "ptx")
    with pytest.raises(px.DSLError, match=r"loader=.* breaks 'the loader is one of ptx, cubin'"):
        px.compile(k, loader=loader)


def test_program_falls_back_to_the_jit_when_the_driver_refuses_the_cubin(fake_gpu, monkeypatch):
    from ptxdsl.errors import CudaError
    from tma_store_tile import k

    def refuse(image, name):
        raise CudaError("refused", code=300, name="CUDA_ERROR_NO_BINARY_FOR_GPU")

    monkeypatch.setattr(fake_gpu, "load_cubin", refuse)
    prog = px.compile(k)
    assert prog.module.how == "ptx" and prog.module.data == prog.ptx.text
    assert prog.loaded_from == "ptx" and "CUDA_ERROR_NO_BINARY_FOR_GPU" in prog.jit_reason and prog.cubin is None
    assert prog.resources["tma_store_tile"].registers == 168           # the driver's attribute, not nvJitLink's


def test_program_loads_a_setmaxnreg_module_through_the_jit(fake_gpu):
    from ptxdsl.sass import SassError
    from test_sass import setmaxnreg_kernel

    prog = px.compile(setmaxnreg_kernel())
    assert prog.module.how == "ptx" and "C7504" in prog.jit_reason and prog.cubin is None
    with pytest.raises(SassError, match="loaded through the driver JIT") as e:
        prog.sass
    assert e.value.rule == "sass.no-cubin"


def test_program_refuses_a_target_the_device_cannot_run(fake_gpu):
    with px.kernel("k", arch="sm_100a") as k:
        k.mov(1, px.u32)
    with pytest.raises(TargetError, match="sm_100a breaks 'the kernel runs on this device'"):
        px.compile(k)


def test_line_info_from_the_environment_is_on_the_program(fake_gpu, monkeypatch):
    """PTXDSL_LINE_INFO=1 (the sanitizer job): the program says so, and its cubin is nvJitLink's with -lineinfo
    (what test_compile_gpu compares it with)."""
    from tma_store_tile import k

    monkeypatch.setenv("PTXDSL_LINE_INFO", "1")
    prog = px.compile(k)
    assert prog.line_info and '.loc' in prog.ptx.text
    assert prog.cubin == px.assemble(prog.ptx, prog.arch, options=["-lineinfo"]).cubin
    assert prog.cubin != px.assemble(prog.ptx, prog.arch).cubin
    monkeypatch.setenv("PTXDSL_LINE_INFO", "0")
    assert not px.compile(k).line_info
