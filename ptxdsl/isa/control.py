"""Execution control around TMA pipelines: griddepcontrol (programmatic dependent launch), setmaxnreg
(warpgroup register reallocation) and nanosleep (a backoff in a spin)."""
from __future__ import annotations

from ..target import ARCH_SPECIFIC, Req
from ..types import u32
from . import effects as fx
from .decl import Op
from .operands import Const, Slot, Value

SETMAXNREG_RANGE = (24, 256)


class GriddepcontrolLaunchDependents(Op):
    """griddepcontrol.launch_dependents: the dependent grid may start launching."""

    ptx = "griddepcontrol.launch_dependents"
    floor = Req((7, 8))
    family = "control"


class GriddepcontrolWait(Op):
    """griddepcontrol.wait: wait until the prerequisite grids have completed and their memory is visible."""

    ptx = "griddepcontrol.wait"
    floor = Req((7, 8))
    family = "control"


class Nanosleep(Op):
    """nanosleep.u32 t: suspend the thread for about t nanoseconds (0 to 1,000,000; the hardware sleeps
    anywhere in [0, 2t]): a backoff between polls of a flag."""

    ptx = "nanosleep.u32"
    mnemonic = "nanosleep"
    operands = (Slot("t", Value(u32, lo=0, hi=1_000_000)),)
    floor = Req((7, 8))
    family = "control"


class _Setmaxnreg(Op):
    abstract = True
    operands = (Slot("n", Const(*SETMAXNREG_RANGE, step=8)),)
    floor = Req((8, 0), ARCH_SPECIFIC)
    family = "control"
    note = "N is 24..256, a multiple of 8; warpgroup-collective"

    def effects(self):
        return (fx.Collective("warpgroup"), fx.SetMaxNReg(int(self.n), inc=self.inc))


class SetmaxnregInc(_Setmaxnreg):
    """setmaxnreg.inc.sync.aligned.u32 N: raise this warpgroup's per-thread register count to N."""

    ptx = "setmaxnreg.inc.sync.aligned.u32"
    mnemonic = "setmaxnreg.inc"
    inc = True


class SetmaxnregDec(_Setmaxnreg):
    """setmaxnreg.dec.sync.aligned.u32 N: lower this warpgroup's per-thread register count to N."""

    ptx = "setmaxnreg.dec.sync.aligned.u32"
    mnemonic = "setmaxnreg.dec"
    inc = False
