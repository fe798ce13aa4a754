"""Golden files: emitted PTX held equal to a checked-in copy, regenerated only on purpose.

The pytest plugin's `ptx_golden` fixture calls `check_golden`; regenerate with `pytest --ptx-golden-update`
(or PTXDSL_REGEN_GOLDEN=1) and review the diff before committing it.
"""
from __future__ import annotations

import difflib
from pathlib import Path

UPDATE_HINT = "pytest --ptx-golden-update (or PTXDSL_REGEN_GOLDEN=1) rewrites it"
MAX_DIFF_LINES = 60


def ptx_text(ptx) -> str:
    """The PTX text of a str, a PTX object (.text) or anything ptxdsl.emit takes (a kernel builder, Kernel,
    Module)."""
    if isinstance(ptx, str):
        return ptx
    if isinstance(getattr(ptx, "text", None), str):
        return ptx.text
    from .. import emit

    return emit(ptx).text


def check_golden(text: str, path, *, update: bool = False) -> None:
    """Compare `text` with the file at `path`; with update=True write it there instead (creating its
    folder). AssertionError with a unified diff (golden -> emitted) when they differ or the file is missing."""
    path = Path(path)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"no golden file {path}: {UPDATE_HINT}")
    golden = path.read_text()
    if golden == text:
        return
    diff = list(difflib.unified_diff(golden.splitlines(), text.splitlines(), f"{path} (golden)", "emitted",
                                     lineterm=""))
    shown = diff[:MAX_DIFF_LINES] + ([f"... {len(diff) - MAX_DIFF_LINES} more diff lines"]
                                     if len(diff) > MAX_DIFF_LINES else [])
    raise AssertionError(f"emitted PTX differs from {path} ({UPDATE_HINT}):\n" + "\n".join(shown))
