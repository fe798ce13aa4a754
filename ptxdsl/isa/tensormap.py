"""Tensor maps on the device: tensormap.replace (one declaration per field), tensormap.cp_fenceproxy and
prefetch{.param,.const}.tensormap."""
from __future__ import annotations

from ..errors import DSLError
from ..ir import Addr, Param, Reg, SharedAlloc, TensorMapRef
from ..target import ARCH_SPECIFIC, Req
from ..tensormap import DTYPES, INTERLEAVE, OOB_FILL
from ..types import b32, b64, u32, u64
from . import effects as fx
from .decl import Op, Qual
from .operands import Address, Const, Literal, Slot, Value, describe

TENSORMAP_BYTES = 128
SMEM_ALIGN = 128            # a shared::cta working copy of a tensor map
SCOPES = ("cta", "cluster", "gpu", "sys")
BLACKWELL_ARCH = ARCH_SPECIFIC - {"sm_90a"}
TM_REQ = Req((8, 3), ARCH_SPECIFIC)

# field -> (field group 1/2/3, .type of new_val)
FIELDS = {
    "global_address": (1, b64), "rank": (1, b32),
    "box_dim": (2, b32), "global_dim": (2, b32), "global_stride": (2, b64), "element_stride": (2, b32),
    "elemtype": (3, b32), "interleave_layout": (3, b32), "swizzle_mode": (3, b32),
    "swizzle_atomicity": (3, b32), "fill_mode": (3, b32),
}
# field3 values by name -> the encoding tensormap.replace takes.
PACKED_ELEMTYPES = {"16u4_align8b": 13, "16u4_align16b": 14, "16u6_align16b": 15}
FIELD3_NAMES = {
    "elemtype": {**{name: code for name, (code, _) in DTYPES.items()}, **PACKED_ELEMTYPES},
    "interleave_layout": dict(INTERLEAVE),
    "swizzle_mode": {"none": 0, "32B": 1, "64B": 2, "128B": 3},
    "swizzle_atomicity": {"16B": 0, "32B": 1, "32B_flip_8B": 2, "64B": 3},
    "fill_mode": dict(OOB_FILL),
}
FIELD3_MAX = {"elemtype": 15, "interleave_layout": 2, "swizzle_mode": 3, "swizzle_atomicity": 3, "fill_mode": 1}
# Immediate ranges ptxas does not check: field -> (lo, hi, what the rule is).
VALUE_RANGE = {
    "rank": (0, 4, "the .rank field holds rank-1 of a rank-1..5 map"),
    "box_dim": (1, 256, "a box dimension is 1..256"),
    "global_dim": (1, 2**32 - 1, "a global dimension is 1..2^32-1 in a .b32"),
    "element_stride": (1, 8, "an element stride is 1..8"),
    "global_stride": (0, 2**40 - 1, "a global stride is < 2^40 bytes"),
    "global_address": (0, 2**64 - 1, "a 64-bit address"),
}


class TensorMapMemory(Address):
    """The 128-byte tensor map an instruction edits or copies: 128-byte aligned where that is known, and
    whole inside its buffer."""

    def bind(self, op, what, v, alloc):
        if isinstance(v, TensorMapRef):
            v = v.addr
        a = super().bind(op, what, v, alloc)
        if isinstance(a.base, SharedAlloc) and (a.base.align < SMEM_ALIGN or a.offset % SMEM_ALIGN):
            raise DSLError(f"{what}: {describe(a.base)} at offset {a.offset} (align {a.base.align}) is not 128-byte "
                           f"aligned; keep a shared copy of a tensor map 128-byte aligned")
        if isinstance(a.base, SharedAlloc) and a.offset + TENSORMAP_BYTES > a.base.nbytes:
            raise DSLError(f"{what}: {describe(a.base)} has no 128 bytes from offset {a.offset} for a tensor map")
        return a


def infer_space(v) -> str | None:
    """The state space of a tensor-map address: a shared buffer or shared register is shared::cta, a global
    register is global, anything else (a 64-bit register, a TensorMapRef) is generic (None)."""
    base = v.base if isinstance(v, Addr) else v
    if isinstance(base, SharedAlloc):
        return "shared::cta"
    if isinstance(base, Reg) and (base.space in ("shared", "shared::cta") or base.type.bits == 32):
        return "shared::cta"
    if isinstance(base, Reg) and base.space == "global":
        return "global"
    return None


class TensormapReplace(Op):
    """tensormap.replace.tile.field{.global|.shared::cta}.b1024.type [addr], {ord,} new_val: one field of a
    tensor map in memory. field1 (global_address, rank) and field2 (box_dim, global_dim, global_stride,
    element_stride; `ord` the dimension) take a register or an immediate; field3 (elemtype,
    interleave_layout, swizzle_mode, swizzle_atomicity, fill_mode) only an immediate, its encoding or its
    name (elemtype='bf16', swizzle_mode='128B', fill_mode='nan'). The space defaults to the address's."""

    abstract = True
    field = ""
    quals = {"mode": Qual("tile", default="tile"),
             "space": Qual("global", "shared::cta", None, default=None, aliases={"": None}, none_token="generic",
                           inferred=True)}
    floor = TM_REQ
    family = "tensormap"
    method = "tensormap_replace"
    args = ("addr", "field", "new_val")

    def prepare(self, values):
        if values.get("space") is None:                 # not given: the address's ("" asks for generic)
            values["space"] = infer_space(values.get("addr"))
        group = FIELDS[self.field][0]
        if group == 3:
            values["new_val"] = self._field3_value(values.get("new_val"))

    def _field3_value(self, v) -> int:
        w = f"{self.mnemonic}.{self.field} new_val"
        if isinstance(v, str):
            names = FIELD3_NAMES[self.field]
            if v not in names:
                raise DSLError(f"{w}={v!r} is not a name of this field; expected one of {', '.join(names)} or the "
                               f"encoding 0..{FIELD3_MAX[self.field]}")
            return names[v]
        if isinstance(v, Reg):
            raise DSLError(f"{w}={describe(v)}: field3 values are immediates only (ptxas: 'Integer constant "
                           f"expression expected'); branch on the register instead")
        return v

    def effects(self):
        return (fx.TmapEdit(self.addr, self.field),)


def _replace_class(field: str, group: int, t) -> type:
    name = "TensormapReplace" + "".join(p.capitalize() for p in field.split("_"))
    ords = 3 if field == "global_stride" else 4
    ops = [Slot("addr", TensorMapMemory("space"))]
    if group == 2:
        ops.append(Slot("ord", Const(0, ords)))
    if group == 3:
        new_val = Const(0, FIELD3_MAX[field])
    else:
        lo, hi, rule = VALUE_RANGE[field]
        step = 16 if field in ("global_stride", "global_address") else 1
        new_val = Value(u64 if t.bits == 64 else u32, lo=lo, hi=hi, step=step,
                        rule=rule + (" (tensor-map strides and addresses are 16-byte aligned)" if step > 1 else ""))
    ops.append(Slot("new_val", new_val))
    ns = {"ptx": f"tensormap.replace.<mode>.<field>{{.<space>}}.b1024.{t.name}",
          "mnemonic": "tensormap.replace", "field": field,
          "quals": {**TensormapReplace.quals, "field": Qual(field, default=field)},
          "operands": tuple(ops), "form": frozenset({field}), "__doc__": f"tensormap.replace of .{field}.",
          "__module__": __name__}
    if field == "swizzle_atomicity":
        ns["floor"] = Req((8, 6), BLACKWELL_ARCH)
        ns["note"] = "sm_100a-class: assembled, not run on hardware"
    if field == "elemtype":
        ns["raises"] = (({"new_val": (13, 14, 15)}, Req((8, 7), BLACKWELL_ARCH)),)
        ns["note"] = "13-15 (packed 4/6-bit) need .version 8.7 on an sm_100a-class target"
    if field in ("global_address", "global_dim", "global_stride"):
        ns["level"] = "gpu"
    return type(name, (TensormapReplace,), ns)


REPLACE = {field: _replace_class(field, group, t) for field, (group, t) in FIELDS.items()}


class TensormapCpFenceproxy(Op):
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned [dst], [src], 128:
    copy a 128-byte tensor map from shared::cta to global memory and release it to the tensormap proxy. A
    whole warp executes it."""

    ptx = "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned"
    mnemonic = "tensormap.cp_fenceproxy"
    quals = {"scope": Qual(*SCOPES, default="gpu")}
    operands = (Slot("dst", TensorMapMemory("global")), Slot("src", TensorMapMemory("shared::cta")),
                Slot("size", Literal("128")))
    floor = Req((8, 3))
    family, level = "tensormap", "gpu"

    def effects(self):
        return (fx.TmapPublish(self.dst, self.src), fx.Collective("warp"))


class PrefetchTensormap(Op):
    """prefetch{.param|.const}.tensormap [a]: bring a tensor map into the descriptor cache (a tensor-map
    parameter or generic address; space 'param': the parameter symbol; 'const': a .const address)."""

    ptx = "prefetch{.<space>}.tensormap"
    mnemonic = "prefetch.tensormap"
    ptxd, form = "prefetch", frozenset({"tensormap"})
    quals = {"space": Qual(None, "param", "const", aliases={"": None})}
    operands = (Slot("tmap", Address("space")),)
    floor = Req((8, 0))
    family, level = "tensormap", "gpu"

    def prepare(self, values):
        v = values.get("tmap")
        space = values.get("space")
        if isinstance(v, Param) and not space:
            if v.kind != "tensormap":
                raise DSLError(f"prefetch.tensormap: {describe(v)} is a {v.kind} parameter, not a tensor map")
            values["tmap"] = v.value
        elif isinstance(v, TensorMapRef):
            values["tmap"] = v.addr

    def effects(self):
        return (fx.TmapRead(self.tmap),)
