"""The .ptxd text front end: a small language that reads like the PTX it becomes (docs/language.md).

    kernels = ptxdsl.lang.load("examples/tma_load_tile.ptxd")     # [ir.Kernel, ...]
    print(ptxdsl.emit(kernels[0]).text)
    text = ptxdsl.lang.to_ptxd(kernels[0])                         # and back

Parsing builds data only (Lark, grammar/ptxdsl.lark); lowering makes KernelBuilder calls, so a .ptxd
kernel and the same kernel written with the builder are the same IR and print the same PTX.
"""
from __future__ import annotations

from pathlib import Path

from . import ast
from .lower import lower_module
from .parse import parse
from .printer import to_ptxd


def loads(text: str, filename: str = "<string>", *, verify: bool = True) -> list:
    """Parse and build every kernel of .ptxd text; returns finished ir.Kernel objects in file order.
    verify=False leaves the verifier's rules to an explicit ptxdsl.verify.check, as for a builder kernel."""
    return lower_module(parse(text, filename), verify=verify)


def load(path, *, verify: bool = True) -> list:
    """Parse and build every kernel of a .ptxd file."""
    path = Path(path)
    return loads(path.read_text(encoding="utf-8"), str(path), verify=verify)


__all__ = ["ast", "load", "loads", "parse", "to_ptxd"]
