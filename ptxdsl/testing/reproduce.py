"""Failing cases as code a user can paste: `snippet(fn, *args)` and `reproducible(fn, *args)`.

    reproducible(check_transpose, case)      # in a Hypothesis test: calls check_transpose(case); when the
                                             # test fails, the shrunk case is printed as code:

    # reproduce (from /home/me/project):
    import sys; sys.path.insert(0, "examples")
    from user_kernel import TransposeCase, check_transpose
    check_transpose(TransposeCase(dtype='u8', rows=1, cols=1))

Arguments are written with their repr, except dataclasses, which are written as their constructor call
with the fields that differ from their defaults; the classes they name are imported. So a case is
reproducible as long as it is plain data: numbers, strings, tuples, lists, dicts and dataclasses of them.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
from pathlib import Path

_BUILTIN_MODULES = ("builtins",)


def _short(value) -> str:
    """repr(value), with dataclasses as their constructor call over the fields that differ from the defaults."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = []
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            v = getattr(value, f.name)
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            if default is dataclasses.MISSING or v != default:
                parts.append(f"{f.name}={_short(v)}")
        return f"{type(value).__qualname__}({', '.join(parts)})"
    if isinstance(value, tuple) and type(value) is tuple:
        inner = ", ".join(_short(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list) and type(value) is list:
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict) and type(value) is dict:
        return "{" + ", ".join(f"{_short(k)}: {_short(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _types(value, out: list) -> None:
    """The classes whose names the short repr of `value` spells (dataclasses, and anything not builtin)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(type(value))
        for f in dataclasses.fields(value):
            _types(getattr(value, f.name), out)
    elif type(value) in (tuple, list):
        for v in value:
            _types(v, out)
    elif type(value) is dict:
        for k, v in value.items():
            _types(k, out)
            _types(v, out)
    elif type(value).__module__ not in _BUILTIN_MODULES:
        out.append(type(value))


def _site_dirs() -> list[Path]:
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    return [Path(p).resolve() for p in paths]


def _path_line(module_name: str) -> str | None:
    """`import sys; sys.path.insert(0, DIR)` for a module that is importable only because a test runner put
    its directory on sys.path (an examples/ or tests/ module); None for installed modules and ptxdsl."""
    module = sys.modules.get(module_name)
    top = module_name.split(".")[0]
    if module is None or top == "ptxdsl" or not getattr(module, "__file__", None):
        return None
    path = Path(module.__file__).resolve()
    base = path.parents[module_name.count(".") + (1 if path.name == "__init__.py" else 0)]
    if any(base == d or d in base.parents for d in _site_dirs()):
        return None
    cwd = Path.cwd().resolve()
    shown = os.path.relpath(base, cwd) if base == cwd or cwd in base.parents else str(base)
    return f"import sys; sys.path.insert(0, {shown!r})"


def _imports(objs) -> list[str]:
    """`from MODULE import A, B` per module (numpy as `import numpy as np`: its scalars print as np.int64(5))."""
    names: dict[str, list[str]] = {}
    numpy = False
    for obj in objs:
        module = obj.__module__
        if module == "numpy" or module.startswith("numpy."):
            numpy = True
            continue
        name = obj.__qualname__.split(".")[0]
        if name not in names.setdefault(module, []):
            names[module].append(name)
    lines = [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(names.items())]
    return lines + (["import numpy as np"] if numpy else [])


def snippet(fn, *args, **kwargs) -> str:
    """Python code that calls fn(*args, **kwargs) again, run from the current directory: a comment saying
    where, the sys.path line a test-runner-only module needs, the imports, then the call."""
    if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
        raise ValueError(f"{fn.__qualname__} is not importable by name: a reproducer needs a module-level "
                         f"function of an importable module")
    objs: list = [fn]
    for v in (*args, *kwargs.values()):
        _types(v, objs)
    paths = list(dict.fromkeys(p for p in (_path_line(o.__module__) for o in objs) if p))
    call = ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])
    return "\n".join([f"# reproduce (from {Path.cwd()}):", *paths, *_imports(objs), f"{fn.__qualname__}({call})"])


def _in_hypothesis_test() -> bool:
    control = sys.modules.get("hypothesis.control")
    return control is not None and control.currently_in_test_context()


def reproducible(fn, *args, **kwargs):
    """Call fn(*args, **kwargs) and return its result; when it raises, the failure carries
    snippet(fn, *args, **kwargs). Inside a Hypothesis test the snippet is a note, which Hypothesis prints
    under the shrunk falsifying example; elsewhere it is added to the exception's notes."""
    code = snippet(fn, *args, **kwargs)
    if _in_hypothesis_test():
        from hypothesis import note

        note(code)
        return fn(*args, **kwargs)
    try:
        return fn(*args, **kwargs)
    except Exception as e:
        if hasattr(e, "add_note"):
            e.add_note(code)
        else:                                   # Python 3.10: no exception notes
            print(code, file=sys.stderr)
        raise
