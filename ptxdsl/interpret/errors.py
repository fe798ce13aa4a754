"""What the interpreter reports: errors a GPU would show as a hang, a fault or a wrong result."""
from __future__ import annotations

from ..errors import PtxdslError


class InterpretError(PtxdslError):
    """A kernel the interpreter stopped: base of its reports."""


class NotInterpretable(InterpretError):
    """An instruction (or a form of one) the interpreter does not execute; the message names it."""


class MemoryFault(InterpretError):
    """An access outside every buffer, or misaligned: the address, the space and the source line."""


class Deadlock(InterpretError):
    """Every live warp waits and nothing can wake one: each warp's waiting line and what it waits for."""

    def __init__(self, message: str, waits=(), loc=None):
        self.waits = tuple(waits)
        super().__init__(message, loc, rule="interpret.deadlock")


class KernelTrapped(InterpretError):
    """A thread executed trap."""


class Livelock(InterpretError):
    """Warps keep running but none writes memory or touches a barrier: a spin on something nothing will change
    (a flag no one sets). Names where each warp was."""

    def __init__(self, message: str, loc=None):
        super().__init__(message, loc, rule="interpret.livelock")
