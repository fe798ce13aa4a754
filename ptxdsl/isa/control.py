"""Execution control around TMA pipelines: griddepcontrol (programmatic dependent launch) and
setmaxnreg (warpgroup register reallocation). Floors: shared/reference/ptx-tma-isa.md section 8.6."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..target import ARCH_SPECIFIC, Req
from .base import Op, choice, immediate

SETMAXNREG_RANGE = (24, 256)


@dataclass(eq=False)
class Griddepcontrol(Op):
    """griddepcontrol.launch_dependents (let the dependent grid start) / griddepcontrol.wait (wait for
    the prerequisite grids and see their writes)."""

    mnemonic: ClassVar[str] = "griddepcontrol"
    action: str

    def __post_init__(self):
        choice("griddepcontrol action", self.action, {"launch_dependents", "wait"})

    def emit(self) -> str:
        return f"griddepcontrol.{self.action}"


@dataclass(eq=False)
class Setmaxnreg(Op):
    """setmaxnreg.{inc|dec}.sync.aligned.u32 N: raise / lower this warpgroup's per-thread register count
    to N (24..256, a multiple of 8). Warpgroup-collective."""

    mnemonic: ClassVar[str] = "setmaxnreg"
    action: str
    n: int

    def __post_init__(self):
        choice("setmaxnreg action", self.action, {"inc", "dec"})
        lo, hi = SETMAXNREG_RANGE
        self.n = immediate(f"setmaxnreg.{self.action} N", self.n, lo, hi)
        if self.n % 8:
            raise DSLError(f"setmaxnreg.{self.action} N={self.n}: the register count is a multiple of 8")

    def emit(self) -> str:
        return f"setmaxnreg.{self.action}.sync.aligned.u32 {self.n}"

    def requires(self) -> Req:
        return Req((8, 0), ARCH_SPECIFIC)
