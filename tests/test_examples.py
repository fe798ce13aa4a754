"""The seed examples: golden PTX, assembly, and (on a GPU) numpy's answer.

Regenerate the goldens on purpose with PTXDSL_REGEN_GOLDEN=1.
"""
import os
from pathlib import Path

import pytest

import ptxdsl as px
from example_child import run_example
from ptxdsl.cli import load_kernels

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
# the tma_* examples and pipe_copy have .ptxd twins (tests/test_lang.py); tensormap_replace and pipe_varlen have
# none: the .ptxd language cannot name a tensor map held in a register (px.TensorMapRef) as a copy's tensor operand;
# the other pipe_* kernels are built with ptxdsl.pipeline and are shown in Python only
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("tma_*.py")) + ["tensormap_replace"] + sorted(
    p.stem for p in (ROOT / "examples").glob("pipe_*.py")) + sorted(p.stem for p in (ROOT / "examples").glob("wgmma_*.py"))
# the lowest target an example needs, when it is not sm_90 / PTX 8.0 (.multicast::cluster is an sm_90a form,
# tensormap.replace needs sm_90a and PTX 8.3)
LOWEST = {"tma_multicast_tile": ("sm_90a", "8.0"), "tensormap_replace": ("sm_90a", "8.3"),
          "pipe_varlen": ("sm_90a", "8.3"), "wgmma_tile": ("sm_90a", "8.0")}
# wgmma runs on sm_90a alone (Blackwell has tcgen05 instead): those examples are not assembled for sm_100a
SM90A_ONLY = {"wgmma_tile"}


def _ptx(name):
    kernels, ns = load_kernels(str(ROOT / "examples" / f"{name}.py"))
    return px.emit(px.module(*kernels)), ns


@pytest.mark.parametrize("name", EXAMPLES)
def test_golden(name):
    ptx, _ = _ptx(name)
    path = GOLDEN / f"{name}.ptx"
    if os.environ.get("PTXDSL_REGEN_GOLDEN"):
        path.write_text(ptx.text)
    assert ptx.text == path.read_text(), f"{name}: emitted PTX differs from {path} (PTXDSL_REGEN_GOLDEN=1 to update)"


@pytest.mark.parametrize("name", EXAMPLES)
def test_emit_is_deterministic(name):
    assert _ptx(name)[0].text == _ptx(name)[0].text


@pytest.mark.parametrize("name, arch", [(n, a) for n in EXAMPLES for a in ("sm_90a", "sm_100a")
                                         if not (a == "sm_100a" and n in SM90A_ONLY)])
def test_assembles(name, arch):
    ptx, _ = _ptx(name)
    if ptx.target.arch.endswith("a") and ptx.target.arch != arch:     # an arch-specific target: emit for `arch`
        kernels, _ = load_kernels(str(ROOT / "examples" / f"{name}.py"))
        ptx = px.emit(px.module(*kernels), arch=arch)
    res = px.assemble(ptx, arch)
    assert res.cubin[:4] == b"\x7fELF"
    assert name in res.kernels and res.kernels[name].registers > 0
    assert res.kernels[name].spill_stores == 0


@pytest.mark.parametrize("name", EXAMPLES)
def test_lowest_target(name):
    ptx, _ = _ptx(name)
    arch, version = LOWEST.get(name, ("sm_90", "8.0"))
    assert (ptx.target.arch, ptx.target.version) == (arch, version)
    assert f".version {version}\n.target {arch}\n" in ptx.text


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXAMPLES)
def test_gpu_matches_numpy(name):
    """The example's own host check (a child process, so a hang or trap cannot take the suite with it)."""
    ok, verdict = run_example(name, "py")
    print(verdict)
    assert ok, verdict


def test_the_batch_reads_each_tensor_as_rows_of_its_box_and_a_tail():
    """pipe_varlen's tables: a tensor of n elements is n // 256 rows, in tiles of 32 rows, and a tail of n % 256
    that the CTA with its last tiles scales (a CTA of no tiles for a tensor shorter than a row); an empty tensor
    takes no CTA."""
    import pipe_varlen as pv

    sizes = (36_400, 100, 0, 64 * 256)
    desc, work = pv.tables([(0x1000 * (i + 1), 0x9000 * (i + 1), n) for i, n in enumerate(sizes)], tiles_per_cta=2)
    d = desc.view(pv.DESC_DTYPE)
    assert d["rows"].tolist() == [142, 0, 0, 64] and d["tail"].tolist() == [48, 100, 0, 0]
    assert d["src"].tolist() == [0x1000, 0x2000, 0x3000, 0x4000] and d["dst"][3] == 0x24000
    assert work.tolist() == [[0, 0, 2, 0], [0, 2, 2, 0], [0, 4, 1, 1], [1, 0, 0, 1], [3, 0, 2, 0]]

