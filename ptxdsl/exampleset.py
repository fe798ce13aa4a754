"""The examples that ship with ptxdsl (`ptxdsl examples [NAME] [--copy DIR]`): ptxdsl/examples in an installed
wheel, <repo>/examples in a checkout. An example is a .py file (kernels, their launches() and a run() host check)
or a .ptxd file; copying one copies the example modules it imports beside it (tile_common.py), so the copy runs
where it lands."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from .errors import PtxdslError


class ExampleError(PtxdslError):
    """No such example, or no examples in this installation."""


def examples_dir() -> Path:
    """The folder of the examples."""
    here = Path(__file__).resolve().parent
    for folder in (here / "examples", here.parent / "examples"):
        if any(folder.glob("*.py")):
            return folder
    raise ExampleError(f"no examples in {here / 'examples'} (this installation has none)", rule="examples.missing")


def names() -> list[str]:
    """Every example file's name, sorted (the helper modules included: they are examples' parts)."""
    return sorted(p.name for p in examples_dir().iterdir() if p.suffix in (".py", ".ptxd") and
                  not p.name.startswith("__"))


def path(name: str) -> Path:
    """The file of example `name` ('pipe_copy', 'pipe_copy.py', 'pipe_copy.ptxd')."""
    folder = examples_dir()
    for candidate in (name, f"{name}.py"):
        p = folder / candidate
        if "/" not in candidate and "\\" not in candidate and p.is_file() and p.suffix in (".py", ".ptxd"):
            return p
    raise ExampleError(f"no example {name!r}; the examples are {', '.join(names())}", rule="examples.name")


def parts(p: Path) -> list[Path]:
    """The example and the example modules it imports (transitively; a .ptxd file: the .py file beside it too),
    in that order."""
    out, todo = [], [p]
    while todo:
        f = todo.pop(0)
        if f in out:
            continue
        out.append(f)
        if f.suffix == ".ptxd":                  # its run() and launches() are the .py file's beside it
            if f.with_suffix(".py").is_file():
                todo.append(f.with_suffix(".py"))
            continue
        for mod in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", f.read_text(encoding="utf-8"), re.MULTILINE):
            sibling = f.parent / f"{mod}.py"
            if sibling.is_file():
                todo.append(sibling)
    return out


def copy(name: str, dest: str | Path) -> list[Path]:
    """Copy example `name` and the example modules it imports into folder `dest` (made if missing); the files
    written. An existing file of the same name is an ExampleError (nothing is overwritten)."""
    dest = Path(dest)
    files = parts(path(name))
    clash = [dest / f.name for f in files if (dest / f.name).exists()]
    if clash:
        raise ExampleError(f"{', '.join(map(str, clash))} already exist(s): copy into another folder",
                           rule="examples.exists")
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(f, dest / f.name)) for f in files]
