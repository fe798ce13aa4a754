"""createpolicy: the 64-bit L2 cache policies that `.L2::cache_hint` operands take.
Forms: shared/reference/ptx-tma-isa.md section 8.5 (ISA 7.4, sm_80: no floor above the baseline)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Imm, Reg
from ..types import b32, b64, f32
from .base import Op, choice, dest, join, memory, ops, value

PRIMARY = frozenset({"L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged"})
SECONDARY = frozenset({None, "L2::evict_first", "L2::evict_unchanged"})


def _levels(what, primary, secondary) -> None:
    choice(f"{what} primary", primary, PRIMARY)
    choice(f"{what} secondary", secondary, SECONDARY)


@dataclass(eq=False)
class CreatepolicyFractional(Op):
    """createpolicy.fractional.L2::primary{.L2::secondary}.b64 policy{, fraction}: the primary priority
    for `fraction` (0 < f <= 1, default 1.0) of the accesses, the secondary for the rest."""

    mnemonic: ClassVar[str] = "createpolicy.fractional"
    dst: Reg
    primary: str
    secondary: str | None = None
    fraction: object = None

    def __post_init__(self):
        _levels(self.mnemonic, self.primary, self.secondary)
        self.dst = dest(f"{self.mnemonic} policy", self.dst, b64)
        if self.fraction is not None:
            self.fraction = value(f"{self.mnemonic} fraction", self.fraction, f32)
            if isinstance(self.fraction, Imm) and not 0.0 < float(self.fraction.value) <= 1.0:
                raise DSLError(f"{self.mnemonic} fraction={self.fraction.value}: expected 0 < fraction <= 1")

    def emit(self) -> str:
        q = join(self.mnemonic, self.primary, self.secondary, "b64")
        return f"{q} {ops(self.dst, *(() if self.fraction is None else (self.fraction,)))}"


@dataclass(eq=False)
class CreatepolicyRange(Op):
    """createpolicy.range{.global}.L2::primary{.L2::secondary}.b64 policy, [a], primary_size, total_size:
    the primary priority inside [a, a + primary_size), the secondary for the rest of [a, a + total_size)."""

    mnemonic: ClassVar[str] = "createpolicy.range"
    dst: Reg
    addr: object
    primary_size: object
    total_size: object
    primary: str
    secondary: str | None = None
    space: str = "global"

    def __post_init__(self):
        w = self.mnemonic
        _levels(w, self.primary, self.secondary)
        choice(f"{w} space", self.space, {"global", ""})
        self.dst = dest(f"{w} policy", self.dst, b64)
        self.addr = memory(f"{w} a", self.addr, self.space)
        self.primary_size = value(f"{w} primary_size", self.primary_size, b32)
        self.total_size = value(f"{w} total_size", self.total_size, b32)
        p, t = self.primary_size, self.total_size
        if isinstance(p, Imm) and isinstance(t, Imm) and not 0 <= p.value <= t.value:
            raise DSLError(f"{w}: primary_size={p.value} and total_size={t.value}: expected "
                           f"0 <= primary_size <= total_size")

    def emit(self) -> str:
        q = join(self.mnemonic, self.space, self.primary, self.secondary, "b64")
        return f"{q} {ops(self.dst, self.addr, self.primary_size, self.total_size)}"


@dataclass(eq=False)
class CreatepolicyCvt(Op):
    """createpolicy.cvt.L2.b64 policy, access_property: convert a CUDA access-policy-window property."""

    mnemonic: ClassVar[str] = "createpolicy.cvt.L2"
    dst: Reg
    src: object

    def __post_init__(self):
        self.dst = dest(f"{self.mnemonic} policy", self.dst, b64)
        self.src = value(f"{self.mnemonic} access_property", self.src, b64, imm=False)

    def emit(self) -> str:
        return f"createpolicy.cvt.L2.b64 {ops(self.dst, self.src)}"
