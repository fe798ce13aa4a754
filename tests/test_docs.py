"""The docs run as written: every ```python block of README.md and docs/*.md is a whole program (run here, from
the repository root), an excerpt (first line `# excerpt of examples/NAME.py`: the rest of the block is a verbatim
run of that file's lines, and the file builds), or needs a GPU (first line `# needs a CUDA device`: it runs in a
child process with the GPU tests). docs/api.md is what `python -m ptxdsl.apidoc` prints, and names every public
builder call that is not an instruction. Relative links point at files that exist.
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import apidoc
from ptxdsl.builder import KernelBuilder, _method_ops
from ptxdsl.cli import load_kernels
from ptxdsl.isa import OPS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXCERPT = re.compile(r"# excerpt of (examples/[\w.-]+\.py)\s*$")
NEEDS_GPU = "# needs a CUDA device"
GPU_TIMEOUT_S = 300


def python_blocks():
    """(page, first line number, code) of every ```python block, in page order."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M):     # in a list item: indented
            code = textwrap.dedent(m.group(2))
            out.append((page.relative_to(ROOT).as_posix(), text.count("\n", 0, m.start()) + 2, code))
    return out


BLOCKS = python_blocks()


def _kind(code: str) -> str:
    first = code.split("\n", 1)[0].strip()
    if EXCERPT.fullmatch(first):
        return "excerpt"
    return "gpu" if first == NEEDS_GPU else "program"


def _params(kind: str):
    """The blocks of one kind; a block that disassembles (ptxdsl.sass) needs nvdisasm, the `sass` extra."""
    return [pytest.param(page, line, code, id=f"{page}:{line}",
                         marks=[pytest.mark.nvdisasm] if "ptxdsl.sass" in code or ".sass" in code else [])
            for page, line, code in BLOCKS if _kind(code) == kind]


def test_every_page_has_its_blocks_found():
    """The fence pattern finds the blocks (a page with none still counts): README's and the new pages' at least."""
    found = {page for page, _, _ in BLOCKS}
    assert {"README.md", "docs/tensormap-replace.md", "docs/troubleshooting.md"} <= found


@pytest.mark.parametrize("page, line, code", _params("program"))
def test_whole_program_runs(page, line, code, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    declared = list(OPS)                  # a block may declare an op (language.md shows how): the rest of the
    try:                                  # session sees the instruction set as shipped
        exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__main__"})
    finally:
        OPS[:] = declared
    capsys.readouterr()


@pytest.mark.parametrize("page, line, code", _params("excerpt"))
def test_excerpt_is_verbatim(page, line, code):
    first, _, body = code.partition("\n")
    path = ROOT / EXCERPT.fullmatch(first.strip()).group(1)
    assert path.is_file(), f"{page}:{line}: {path.relative_to(ROOT)} does not exist"
    want = textwrap.dedent(body.rstrip("\n"))
    n = want.count("\n") + 1
    lines = path.read_text(encoding="utf-8").split("\n")
    windows = ("\n".join(lines[i:i + n]) for i in range(len(lines) - n + 1))
    assert any(textwrap.dedent(w) == want for w in windows), \
        f"{page}:{line}: the block is not a run of consecutive lines of {path.relative_to(ROOT)} (dedented)"


@pytest.mark.parametrize("path", sorted({EXCERPT.fullmatch(c.split("\n", 1)[0].strip()).group(1)
                                         for _, _, c in BLOCKS if _kind(c) == "excerpt"}))
def test_excerpted_example_builds_verifies_and_assembles(path):
    kernels, ns = load_kernels(str(ROOT / path))
    assert kernels and callable(ns.get("run")), path          # its host check runs with the GPU tests
    px.assemble(px.emit(px.module(*kernels)), "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("page, line, code", _params("gpu"))
def test_gpu_block_runs(page, line, code):
    from ptxdsl.runtime.driver import driver_available, unavailable_reason

    if not driver_available():
        pytest.skip(f"no CUDA device: {unavailable_reason()}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=GPU_TIMEOUT_S, check=False)
    assert res.returncode == 0, f"{page}:{line}\n{res.stdout}\n{res.stderr[-3000:]}"


# ------------------------------------------------------------------------------------ docs/api.md

def test_api_md_is_generated_from_the_docstrings():
    have, want = (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), apidoc.render()
    if have != want:
        diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "docs/api.md", "render()"))
        pytest.fail(f"docs/api.md is stale: python -m ptxdsl.apidoc > docs/api.md\n{diff[:4000]}", pytrace=False)


def test_api_md_has_every_builder_call_that_is_not_an_instruction():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    instructions = set(_method_ops())
    for name, value in vars(KernelBuilder).items():
        if name.startswith("_") or name in instructions or not callable(value):
            continue
        assert f"### `k.{name}(" in text, f"k.{name} is not on docs/api.md: add it to ptxdsl.apidoc.SECTIONS"


def test_api_md_has_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in px.__all__:
        assert f"ptxdsl.{name}" in text, f"ptxdsl.{name} is not on docs/api.md"


def test_api_md_links_the_instruction_table():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert "[isa.md](isa.md)" in text
    assert "### `k.mbarrier_init(" not in text and "### `k.cp_async_bulk_tensor(" not in text


def test_apidoc_names_only_what_exists():
    for _, _, items in apidoc.SECTIONS:
        for path, _ in items:
            apidoc.resolve(path)


# ------------------------------------------------------------------------------------------ links

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_point_at_files_that_exist(page):
    path = ROOT / page
    text = re.sub(r"^( *)```.*?^\1```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve()
        assert dest.exists(), f"{page}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            from ptxdsl import docpages

            assert anchor in docpages.sections(dest.read_text(encoding="utf-8")), f"{page}: no anchor {target}"


def test_readme_links_the_guides():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in ("api", "runtime", "compile", "troubleshooting", "tensormap-replace", "isa", "language", "verifier"):
        assert f"(docs/{doc}.md" in text, doc


def test_docs_never_point_outside_the_project():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "/work/" not in text and "shared/design.md" not in text, page

