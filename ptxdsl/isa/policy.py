"""createpolicy: the 64-bit L2 cache policies that `.L2::cache_hint` operands take (ISA 7.4, sm_80)."""
from __future__ import annotations

from ..errors import DSLError
from ..ir import Imm
from ..types import b64, f32, u32, u64
from .decl import Op, Qual
from .operands import Address, Dst, Slot, Value

PRIMARY = ("L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged")
SECONDARY = (None, "L2::evict_first", "L2::evict_unchanged")
POLICY = Slot("policy", Dst(b64))


class CreatepolicyFractional(Op):
    """createpolicy.fractional.primary{.secondary}.b64 policy{, fraction}: the primary priority for
    `fraction` (0 < f <= 1, default 1.0) of the accesses, the secondary for the rest."""

    ptx = "createpolicy.fractional.<primary>{.<secondary>}.b64"
    quals = {"primary": Qual(*PRIMARY, default="L2::evict_last"), "secondary": Qual(*SECONDARY)}
    operands = (POLICY, Slot("fraction", Value(f32), optional=True))
    args = ("primary", "secondary", "fraction")
    family, level = "policy", "gpu"

    def check(self):
        f = self.fraction
        if isinstance(f, Imm) and not 0.0 < float(f.value) <= 1.0:
            raise DSLError(f"{self.mnemonic} fraction={f.value}: expected 0 < fraction <= 1")


class CreatepolicyRange(Op):
    """createpolicy.range{.global}.primary{.secondary}.b64 policy, [a], primary_size, total_size: the
    primary priority inside [a, a + primary_size), the secondary for the rest of [a, a + total_size)."""

    ptx = "createpolicy.range{.<space>}.<primary>{.<secondary>}.b64"
    quals = {"space": Qual("global", None, default="global", aliases={"": None}, none_token="generic"),
             "primary": Qual(*PRIMARY, default="L2::evict_last"), "secondary": Qual(*SECONDARY)}
    operands = (POLICY, Slot("addr", Address("space")), Slot("primary_size", Value(u32)),
                Slot("total_size", Value(u32)))
    family = "policy"

    def check(self):
        p, t = self.primary_size, self.total_size
        if isinstance(p, Imm) and isinstance(t, Imm) and not 0 <= p.value <= t.value:
            raise DSLError(f"{self.mnemonic}: primary_size={p.value} and total_size={t.value}: expected "
                           f"0 <= primary_size <= total_size")


class CreatepolicyCvt(Op):
    """createpolicy.cvt.L2.b64 policy, access_property: convert a CUDA access-policy-window property."""

    ptx = "createpolicy.cvt.L2.b64"
    mnemonic = "createpolicy.cvt"
    operands = (POLICY, Slot("access_property", Value(u64, imm=False)))
    family = "policy"
