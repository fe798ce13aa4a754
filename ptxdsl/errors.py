"""The ptxdsl error types and the source locations they carry.

Every error a user can see names the offending value, the rule it breaks and
where it came from (a builder call's file:line, or a .ptxd line).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True, order=True)
class SourceLoc:
    """Where an IR object came from: a user's file and line (and column for .ptxd)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        base = os.path.basename(self.file)
        return f"{base}:{self.line}" + (f":{self.col}" if self.col else "")

    @classmethod
    def caller(cls, skip: int = 0) -> "SourceLoc":
        """The first stack frame outside the ptxdsl package: the user's builder call. `skip` passes over that
        many frames first (a dataclass's generated __init__ has no file of its own)."""
        f = sys._getframe(1 + skip)
        while f is not None:
            fn = f.f_code.co_filename
            if not _inside_package(fn):
                return cls(fn, f.f_lineno)
            f = f.f_back
        return cls("<unknown>", 0)


_CONTEXTLIB = os.path.abspath(contextlib.__file__)
_DATACLASSES = os.path.abspath(dataclasses.__file__)


@functools.lru_cache(maxsize=None)
def _inside_package(filename: str) -> bool:
    """True for ptxdsl's own files, contextlib (the frames of the builder's with-blocks) and dataclasses
    (dataclasses.replace of a spec)."""
    path = os.path.abspath(filename)
    return path.startswith(_PKG_DIR + os.sep) or path in (_CONTEXTLIB, _DATACLASSES)


class PtxdslError(Exception):
    """Base class of every error ptxdsl raises on purpose."""

    def __init__(self, message: str, loc: SourceLoc | None = None, rule: str | None = None):
        self.message = message
        self.loc = loc
        self.rule = rule
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.loc is not None:
            parts.append(f"{self.loc}: ")
        if self.rule:
            parts.append(f"{self.rule}: ")
        parts.append(self.message)
        return "".join(parts)

    def at(self, loc: SourceLoc | None) -> "PtxdslError":
        """Attach a location if the error has none yet; returns self for `raise e.at(loc)`."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._format(),)
        return self


class DSLError(PtxdslError):
    """A kernel built with a bad value: wrong qualifier, operand type or state space."""


class TargetError(PtxdslError):
    """A pinned .target/.version below what an instruction needs."""


class VerifyError(PtxdslError):
    """A whole-kernel rule broken (protocol, capacity, alignment)."""


class ParseError(PtxdslError):
    """A .ptxd syntax error."""


class AssembleError(PtxdslError):
    """ptxas (through nvJitLink) rejected the PTX."""


class TensorMapError(PtxdslError):
    """A tensor-map field breaks a cuTensorMapEncode* rule."""


class LayoutError(DSLError):
    """A matrix layout, descriptor or register fragment breaks a tensor-core rule."""


class CudaError(PtxdslError):
    """A CUDA driver call failed; carries the driver's name for the error."""

    def __init__(self, message: str, loc: SourceLoc | None = None, rule: str | None = None,
                 code: int | None = None, name: str | None = None):
        self.code = code
        self.name = name
        super().__init__(message, loc, rule)


class LaunchError(PtxdslError):
    """A launch configuration the device cannot run (block, grid, cluster, shared memory)."""


class KernelTrap(PtxdslError):
    """A debug-mode kernel stopped waiting on a barrier and reported where."""
