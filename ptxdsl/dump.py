"""PTXDSL_DUMP_DIR: every module `ptxdsl.compile` loads, `ptxdsl.assemble` assembles and `ptxdsl emit|check|sass`
prints or assembles is written there as NAME-HASH.ptx, .cubin and .sass (the cubin and its SASS where there is
one, the SASS when nvdisasm is installed), NAME being its kernels' names and HASH the PTX's, like Triton's and CuTe
DSL's dump switches."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import PtxdslError
from . import log


def dump_dir() -> Path | None:
    """The directory PTXDSL_DUMP_DIR names, or None when it is unset or empty."""
    d = os.environ.get("PTXDSL_DUMP_DIR")
    return Path(d).expanduser() if d else None


def stem(kernels, ptx_text: str) -> str:
    """NAME-HASH: the kernels' names joined by '+' (at most 80 characters) and 16 hex digits of the PTX's SHA-256."""
    import hashlib                  # here, not at import: loading OpenSSL costs ~3 ms of every first compile
    import re                       # and a pattern compiled at import, ~0.1 ms: only a dump needs one

    name = re.sub(r"[^A-Za-z0-9_+-]", "_", "+".join(kernels))[:80] or "module"
    return f"{name}-{hashlib.sha256(ptx_text.encode()).hexdigest()[:16]}"


def dump(ptx, cubin: bytes | None) -> list[Path]:
    """Write an emitted PTX module (a PTX object, or PTX text), the cubin loaded for it (None when the driver JIT
    compiled the PTX, or when nothing was assembled) and the cubin's SASS (when nvdisasm is installed) into
    PTXDSL_DUMP_DIR; the paths written ([] when it is unset)."""
    folder = dump_dir()
    if folder is None:
        return []
    import re

    from .sass import SassError, disassemble

    text = getattr(ptx, "text", ptx)
    kernels = getattr(ptx, "kernels", None) or re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", text)
    base = stem(kernels, text)
    written = [_write(folder, f"{base}.ptx", text.encode())]
    if cubin is not None:
        written.append(_write(folder, f"{base}.cubin", cubin))
        try:
            written.append(_write(folder, f"{base}.sass", disassemble(cubin, ptx=ptx).encode()))
        except SassError as e:
            log.debug("dump: no SASS for %s: %s", base, e)
    log.debug("dump: %s", ", ".join(str(p) for p in written))
    return written


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as e:
        raise PtxdslError(f"PTXDSL_DUMP_DIR={str(folder)!r} breaks 'the dump directory is writable': cannot write "
                          f"{name}: {e.strerror or e}", rule="dump.unwritable") from None
    return path
