"""Tensor maps on the device: tensormap.replace (every field), tensormap.cp_fenceproxy and
prefetch{.param,.const}.tensormap. Forms, value ranges and floors: shared/reference/ptx-tma-isa.md
sections 7, 8.6 and 13."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Addr, Imm, Param, Reg, SharedAlloc, TensorMapRef
from ..target import ARCH_SPECIFIC, Req
from ..tensormap import DTYPES, INTERLEAVE, OOB_FILL
from ..types import b32, b64
from .base import Op, choice, describe, immediate, join, memory, value

TENSORMAP_BYTES = 128
SMEM_ALIGN = 128            # a shared::cta working copy of a tensor map
REPLACE_SPACES = frozenset({"global", "shared::cta", ""})       # "" = generic address
SCOPES = frozenset({"cta", "cluster", "gpu", "sys"})

# field -> (field group 1/2/3, .type of new_val)
FIELDS = {
    "global_address": (1, b64), "rank": (1, b32),
    "box_dim": (2, b32), "global_dim": (2, b32), "global_stride": (2, b64), "element_stride": (2, b32),
    "elemtype": (3, b32), "interleave_layout": (3, b32), "swizzle_mode": (3, b32),
    "swizzle_atomicity": (3, b32), "fill_mode": (3, b32),
}
# field3 values by name -> the encoding tensormap.replace takes (reference 7.1).
PACKED_ELEMTYPES = {"16u4_align8b": 13, "16u4_align16b": 14, "16u6_align16b": 15}
FIELD3_NAMES = {
    "elemtype": {**{name: code for name, (code, _) in DTYPES.items()}, **PACKED_ELEMTYPES},
    "interleave_layout": dict(INTERLEAVE),
    "swizzle_mode": {"none": 0, "32B": 1, "64B": 2, "128B": 3},
    "swizzle_atomicity": {"16B": 0, "32B": 1, "32B_flip_8B": 2, "64B": 3},
    "fill_mode": dict(OOB_FILL),
}
FIELD3_MAX = {"elemtype": 15, "interleave_layout": 2, "swizzle_mode": 3, "swizzle_atomicity": 3, "fill_mode": 1}
# Immediate ranges ptxas does not check (reference section 13): field -> (lo, hi, what the rule is).
VALUE_RANGE = {
    "rank": (0, 4, "the .rank field holds rank-1 of a rank-1..5 map"),
    "box_dim": (1, 256, "a box dimension is 1..256"),
    "global_dim": (1, 2**32 - 1, "a global dimension is 1..2^32-1 in a .b32"),
    "element_stride": (1, 8, "an element stride is 1..8"),
    "global_stride": (0, 2**40 - 1, "a global stride is < 2^40 bytes"),
    "global_address": (0, 2**64 - 1, "a 64-bit address"),
}
BLACKWELL_ARCH = ARCH_SPECIFIC - {"sm_90a"}


def _tensormap_memory(what, v, space) -> Addr:
    """The 128-byte tensor map an instruction edits or copies, in `space`."""
    if isinstance(v, TensorMapRef):
        v = v.addr
    a = memory(what, v, space)
    if isinstance(a.base, SharedAlloc) and (a.base.align < SMEM_ALIGN or a.offset % SMEM_ALIGN):
        raise DSLError(f"{what}: {describe(a.base)} at offset {a.offset} (align {a.base.align}) is not 128-byte "
                       f"aligned; keep a shared copy of a tensor map 128-byte aligned")
    if isinstance(a.base, SharedAlloc) and a.offset + TENSORMAP_BYTES > a.base.nbytes:
        raise DSLError(f"{what}: {describe(a.base)} has no 128 bytes from offset {a.offset} for a tensor map")
    return a


def infer_space(v) -> str:
    """The state space of a tensor-map address: a shared buffer or shared register is shared::cta, a
    global register is global, anything else (a 64-bit register, a TensorMapRef) is generic."""
    base = v.base if isinstance(v, Addr) else v
    if isinstance(base, SharedAlloc):
        return "shared::cta"
    if isinstance(base, Reg) and (base.space in ("shared", "shared::cta") or base.type.bits == 32):
        return "shared::cta"
    if isinstance(base, Reg) and base.space == "global":
        return "global"
    return ""


@dataclass(eq=False)
class TensormapReplace(Op):
    """tensormap.replace.tile.field{.global|.shared::cta}.b1024.type [addr], {ord,} new_val.

    field1 (global_address .b64, rank .b32) and field2 (box_dim, global_dim, global_stride .b64,
    element_stride; `ord` the immediate dimension 0..4) take a register or an immediate; field3
    (elemtype, interleave_layout, swizzle_mode, swizzle_atomicity, fill_mode) only an immediate, given
    as its encoding or its name (elemtype='bf16', swizzle_mode='128B', fill_mode='nan').
    """

    mnemonic: ClassVar[str] = "tensormap.replace"
    field: str
    addr: object
    new_val: object
    ord: int | None = None
    space: str = "shared::cta"
    mode: str = "tile"

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} mode", self.mode, {"tile"})
        choice(f"{w} field", self.field, FIELDS)
        choice(f"{w}.{self.field} space", self.space, REPLACE_SPACES)
        group, t = FIELDS[self.field]
        w = f"{w}.{self.mode}.{self.field}"
        self.addr = _tensormap_memory(f"{w} addr", self.addr, self.space)
        if group == 2:
            if self.ord is None:
                raise DSLError(f"{w}: ord= (the dimension, an immediate 0..4) is missing")
            top = 3 if self.field == "global_stride" else 4
            self.ord = immediate(f"{w} ord", self.ord, 0, top)
        elif self.ord is not None:
            raise DSLError(f"{w} takes no ord= (only box_dim, global_dim, global_stride, element_stride do)")
        if group == 3:
            self.new_val = Imm(self._field3_value(w), b32)
            return
        self.new_val = value(f"{w} new_val", self.new_val, t)
        if isinstance(self.new_val, Imm):
            self._check_range(w, int(self.new_val.value))

    def _field3_value(self, w) -> int:
        v = self.new_val
        if isinstance(v, str):
            names = FIELD3_NAMES[self.field]
            if v not in names:
                raise DSLError(f"{w} new_val={v!r} is not a name of this field; expected one of "
                               f"{', '.join(names)} or the encoding 0..{FIELD3_MAX[self.field]}")
            return names[v]
        if isinstance(v, Reg):
            raise DSLError(f"{w} new_val={describe(v)}: field3 values are immediates only (ptxas: 'Integer "
                           f"constant expression expected'); branch on the register instead")
        return immediate(f"{w} new_val", v, 0, FIELD3_MAX[self.field])

    def _check_range(self, w, v: int) -> None:
        lo, hi, rule = VALUE_RANGE[self.field]
        if not lo <= v <= hi:
            raise DSLError(f"{w} new_val={v} is out of range: {rule}")
        if self.field in ("global_stride", "global_address") and v % 16:
            raise DSLError(f"{w} new_val={v:#x} is not a multiple of 16 (tensor-map strides and addresses "
                           f"are 16-byte aligned)")

    def emit(self) -> str:
        _, t = FIELDS[self.field]
        q = join(self.mnemonic, self.mode, self.field, self.space, "b1024", t.name)
        args = [self.addr] + ([self.ord] if self.ord is not None else []) + [self.new_val]
        return f"{q} {', '.join(str(a) for a in args)}"

    def requires(self) -> Req:
        r = Req((8, 3), ARCH_SPECIFIC)
        if self.field == "swizzle_atomicity":
            r = r & Req((8, 6), BLACKWELL_ARCH)
        if self.field == "elemtype" and self.new_val.value >= 13:
            r = r & Req((8, 7), BLACKWELL_ARCH)
        return r


@dataclass(eq=False)
class TensormapCpFenceproxy(Op):
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned [dst], [src], 128:
    copy a 128-byte tensor map from shared::cta to global memory and release it to the tensormap proxy.
    Warp-collective: every lane of the warp executes it."""

    mnemonic: ClassVar[str] = "tensormap.cp_fenceproxy"
    dst: object
    src: object
    scope: str = "gpu"

    def __post_init__(self):
        w = self.mnemonic
        choice(f"{w} scope", self.scope, SCOPES)
        self.dst = _tensormap_memory(f"{w} dst", self.dst, "global")
        self.src = _tensormap_memory(f"{w} src", self.src, "shared::cta")

    def emit(self) -> str:
        q = join(self.mnemonic, "global", "shared::cta", "tensormap::generic", "release", self.scope, "sync.aligned")
        return f"{q} {self.dst}, {self.src}, {TENSORMAP_BYTES}"

    def requires(self) -> Req:
        return Req((8, 3))


@dataclass(eq=False)
class PrefetchTensormap(Op):
    """prefetch{.param|.const}.tensormap [a]: bring a tensor map into the descriptor cache
    (space '' = a generic address, 'param' = a tensor-map parameter, 'const' = a .const address)."""

    mnemonic: ClassVar[str] = "prefetch.tensormap"
    addr: object
    space: str = ""

    def __post_init__(self):
        choice("prefetch.tensormap space", self.space, {"", "param", "const"})
        v = self.addr
        if isinstance(v, Param) and self.space == "":
            if v.kind != "tensormap":
                raise DSLError(f"prefetch.tensormap: {describe(v)} is a {v.kind} parameter, not a tensor map")
            v = v.value
        if isinstance(v, TensorMapRef):
            v = v.addr
        self.addr = memory("prefetch.tensormap a", v, self.space)

    def emit(self) -> str:
        return f"{join('prefetch', self.space, 'tensormap')} {self.addr}"

    def requires(self) -> Req:
        return Req((8, 0))
