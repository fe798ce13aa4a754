"""SASS, the machine code in a cubin, as text: NVIDIA's nvdisasm (the optional extra `ptxdsl[sass]`, the
`nvidia-cuda-nvdisasm` wheel, found through cuda.pathfinder), with the builder's Python or .ptxd line printed
under each of nvdisasm's line markers when the cubin carries a line table (PTX emitted with line_info=True and
assembled with -lineinfo, as `ptxdsl.compile(..., line_info=True)` does).

    print(ptxdsl.sass.disassemble(ptxdsl.assemble(ptx, "sm_90a").cubin, ptx=ptx))
"""
from __future__ import annotations

import functools
import linecache
import os
import re
import subprocess
import tempfile
from urllib.parse import unquote

from .errors import PtxdslError

INSTALL_HINT = "pip install 'ptxdsl[sass]' (the nvidia-cuda-nvdisasm wheel)"
_MARK = re.compile(r'^(?P<indent>\s*)//## File "(?P<file>[^"]*)", line (?P<line>\d+)')
_SECTION = re.compile(r"^//-+ \.text\.(?P<name>\S+)\s+-+$")
_ANY_SECTION = re.compile(r"^//-+ \S+\s+-+$")
_FILE_DIRECTIVE = re.compile(r"^\.file\s+\d+\s", re.MULTILINE)


class SassError(PtxdslError):
    """No SASS: nvdisasm is missing or failed, or there is no cubin to disassemble."""


@functools.cache
def nvdisasm_path() -> str:
    """The nvdisasm executable: cuda.pathfinder's find_nvidia_binary_utility (NVIDIA wheels first, then conda,
    CUDA_HOME and PATH), else the nvidia-cuda-nvdisasm wheel's own file list; SassError naming the extra when
    there is none."""
    path = None
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:           # a cuda-pathfinder older than its binary finder
        pass
    else:
        try:
            path = find_nvidia_binary_utility("nvdisasm")
        except Exception:         # pathfinder's own lookup failed (unsupported platform layout): try the wheel
            path = None
    path = path or _from_wheel()
    if path is None:
        raise SassError(f"nvdisasm is not installed, so there is no SASS to show: {INSTALL_HINT}",
                        rule="sass.nvdisasm-missing")
    return path


def _from_wheel() -> str | None:
    """bin/nvdisasm of the installed nvidia-cuda-nvdisasm distribution, if any."""
    from importlib import metadata

    try:
        files = metadata.distribution("nvidia-cuda-nvdisasm").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name in ("nvdisasm", "nvdisasm.exe") and f.parent.name == "bin":
            path = str(f.locate())
            if os.access(path, os.X_OK):
                return path
    return None


def disassemble(cubin: bytes, *, ptx=None, kernel: str | None = None) -> str:
    """The SASS of `cubin` (code sections only). Where the cubin has a line table, each of nvdisasm's
    `//## File "...", line N` markers is followed by that source line's text. `ptx` (the PTX text or emitted
    PTX the cubin came from) skips the line lookup when it has no .file directives. `kernel` keeps only that
    kernel's code. SassError when nvdisasm is missing or refuses the cubin."""
    if not isinstance(cubin, (bytes, bytearray)) or not bytes(cubin[:4]) == b"\x7fELF":
        raise SassError(f"cubin={_short(cubin)} is not a cubin (an ELF image starting with b'\\x7fELF')",
                        rule="sass.not-a-cubin")
    text_ptx = None if ptx is None else str(ptx)
    lines = text_ptx is None or bool(_FILE_DIRECTIVE.search(text_ptx))
    out = _run_nvdisasm(bytes(cubin), ["-c", "-g"] if lines else ["-c"])
    if kernel is not None:
        out = kernel_section(out, kernel)
    return with_source_lines(out) if lines else out


def _run_nvdisasm(cubin: bytes, options: list[str]) -> str:
    exe = nvdisasm_path()
    fd, path = tempfile.mkstemp(suffix=".cubin", prefix="ptxdsl-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([exe, *options, path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise SassError(f"nvdisasm ({exe}) failed with exit status {proc.returncode}: "
                        f"{(proc.stderr or proc.stdout).strip()}", rule="sass.nvdisasm-failed")
    return proc.stdout


def kernel_section(sass: str, kernel: str) -> str:
    """The code of one kernel (its .text.<kernel> section) out of nvdisasm's output; SassError when absent."""
    kept, inside, found = [], False, []
    for line in sass.splitlines(keepends=True):
        if m := _SECTION.match(line):
            found.append(m["name"])
            inside = m["name"] == kernel
        elif _ANY_SECTION.match(line):
            inside = False
        if inside:
            kept.append(line)
    if not kept:
        raise SassError(f"kernel={kernel!r} has no code in this cubin; it has {', '.join(sorted(found)) or 'no kernels'}",
                        rule="sass.no-kernel")
    return "".join(kept)


def with_source_lines(sass: str) -> str:
    """Under each `//## File "f", line N` marker, the text of line N of f as a `//` comment (when f is readable)."""
    out = []
    for line in sass.splitlines(keepends=True):
        out.append(line)
        if m := _MARK.match(line):
            src = _source_line(m["file"], int(m["line"]))
            if src:
                out.append(f"{m['indent']}//    {src}\n")
    return "".join(out)


def _source_line(file: str, n: int) -> str:
    """Line n of file, stripped; the path as the PTX's .file wrote it (%XX escapes) is tried too."""
    for candidate in (file, unquote(file)):
        text = linecache.getline(os.path.abspath(candidate), n)
        if text:
            return text.strip()
    return ""


def _short(value) -> str:
    r = repr(value)
    return r if len(r) <= 40 else r[:37] + "..."
