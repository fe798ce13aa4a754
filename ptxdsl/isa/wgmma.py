"""Warpgroup matrix multiply-accumulate on Hopper: wgmma.fence, wgmma.mma_async, wgmma.commit_group and
wgmma.wait_group (PTX ISA 8.0, .target sm_90a only).

All four are .sync.aligned: the 128 threads of a warpgroup (four consecutive warps) run them together, with the
same qualifiers. An mma_async joins the warpgroup's open wgmma group; commit_group closes it; wait_group N waits
until at most N groups are pending. Until a wait covers it, an mma_async owns its accumulator and A registers;
wgmma.fence orders the register writes before it (a zeroed or rescaled accumulator, an A fragment) before the
mma_async after it."""
from __future__ import annotations

import re

from ..errors import DSLError
from ..target import SM90A, Req
from ..types import b32, f32, pred, s32, u32
from . import effects as fx
from .decl import Derived, Flag, Op, Qual
from .operands import (Const, Descriptor, DescriptorOrRegisters, OneOf, Registers, Slot, Value, describe,
                       reg_list)

FLOOR = Req((8, 0), SM90A)

# Multiplicand type -> K (every mma_async consumes 32 bytes of K per row), the B types it pairs with, the accumulator
# types it takes.
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}
FP8 = ("e4m3", "e5m2")
INTS = ("s8", "u8")
HALVES = ("f16", "bf16")                        # the only forms with imm-trans operands
FLOATS = HALVES + ("tf32",) + FP8               # the forms with imm-scale operands
PAIRS = {"f16": ("f16",), "bf16": ("bf16",), "tf32": ("tf32",), "e4m3": FP8, "e5m2": FP8, "s8": INTS, "u8": INTS,
         "b1": ("b1",)}
ACCUMULATE = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "e4m3": ("f16", "f32"),
              "e5m2": ("f16", "f32"), "s8": ("s32",), "u8": ("s32",), "b1": ("s32",)}
DTYPES = ("f32", "f16", "s32")
N_FLOAT = tuple(range(8, 257, 8))               # every multiple of 8 up to 256
N_INT = (8, 16, 24) + tuple(range(32, 257, 16))  # integer and b1: multiples of 16 from 32 on
ACC_TYPES = {"f32": (f32, b32), "f16": (b32,), "s32": (s32, u32, b32)}
A_TYPES = (b32, u32, s32)                       # A from registers: 32-bit integer registers (tf32 bits too)
_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
          "int8": "s8", "uint8": "u8", "int32": "s32"}
_SHAPE = re.compile(r"\.?m64n(\d+)k(\d+)")


class ElementType(Qual):
    """A wgmma element type by its PTX name; a ptxdsl ScalarType, a numpy/ml_dtypes dtype or '.bf16' also work."""

    def normalize(self, value):
        if value is None or isinstance(value, bool):
            return value
        name = value if isinstance(value, str) else getattr(value, "name", value)
        if isinstance(name, str):
            name = name.lstrip(".")
            return _NAMES.get(name, name)
        return value


class ShapeN(Qual):
    """N of the .m64nNkK shape: a multiple of 8 from 8 to 256 (K follows from the multiplicand type). .ptxd and
    PTX write the whole shape (m64n128k16); the builder keyword takes N."""

    def __init__(self):
        super().__init__(*N_FLOAT, inferred=True, ptx=lambda v, op: f"m64n{v}k{K_OF[op.atype]}",
                         token=lambda v: f"m64n{v}",
                         doc="N (8..256, step 8; 8, 16, 24, 32, 48, 64, ... 256 for integer and .b1 forms); not given: "
                             "from the number of accumulator registers")

    def normalize(self, value):
        if hasattr(value, "item") and getattr(value, "shape", None) == ():
            value = value.item()
        m = _SHAPE.fullmatch(value) if isinstance(value, str) else None
        return int(m.group(1)) if m else value

    def check(self, what, value):
        value = self.normalize(value)
        if isinstance(value, bool) or value not in self.values or not isinstance(value, int):
            raise DSLError(f"{what}={value!r} is not a wgmma N; expected a multiple of 8 from 8 to 256")
        return value

    def token_for(self, op, value):
        return f"m64n{value}k{K_OF[op.atype]}"

    def tokens(self) -> dict:
        return {f"m64n{n}k{k}": f"m64n{n}k{k}" for n in self.values for k in sorted(set(K_OF.values()))}


def _acc_count(op) -> int:
    return op.n // 4 if op.dtype == "f16" else op.n // 2


def _acc_types(op) -> tuple:
    return ACC_TYPES[op.dtype]


def _layout_type(v):
    layout = getattr(v, "layout", None)
    return getattr(layout, "dtype", None)


def _from_registers(v) -> bool:
    return isinstance(v, (tuple, list)) or (hasattr(v, "regs") and not hasattr(v, "reg"))


def _excludes() -> tuple:
    out = []
    for a, pairs in PAIRS.items():
        bad = tuple(b for b in K_OF if b not in pairs)
        out.append(({"atype": a, "btype": bad}, f"A .{a} pairs with B {' or '.join('.' + b for b in pairs)} only "
                                                f"(ptxas: unexpected instruction types)"))
    for a, dts in ACCUMULATE.items():
        bad = tuple(d for d in DTYPES if d not in dts)
        out.append(({"atype": a, "dtype": bad}, f".{a} multiplicands accumulate into "
                                                f"{' or '.join('.' + d for d in dts)} only"))
    out += [
        ({"satfinite": True, "atype": FLOATS + ("b1",)}, ".satfinite is for the .s8/.u8 forms"),
        ({"atype": INTS + ("b1",), "n": tuple(n for n in N_FLOAT if n not in N_INT)},
         "integer and .b1 forms take N = 8, 16, 24, 32, 48, 64, 80, ... 256 (multiples of 16 from 32 on)"),
        ({"atype": INTS + ("b1",), "imm_scale_a": -1}, "imm_scale_a (negate A) is for the float forms only"),
        ({"atype": INTS + ("b1",), "imm_scale_b": -1}, "imm_scale_b (negate B) is for the float forms only"),
        ({"atype": ("tf32",) + FP8 + INTS + ("b1",), "imm_trans_a": 1},
         "imm_trans_a (an M-major A) is for .f16/.bf16 only: the other types are K-major"),
        ({"atype": ("tf32",) + FP8 + INTS + ("b1",), "imm_trans_b": 1},
         "imm_trans_b (an N-major B) is for .f16/.bf16 only: the other types are K-major"),
        ({"a": "regs", "imm_trans_a": 1}, "A from registers is K-major: imm_trans_a is for A from a descriptor"),
    ]
    return tuple(out)


class WgmmaFence(Op):
    """wgmma.fence.sync.aligned: the warpgroup's register writes before it (accumulators, A fragments) are ordered
    before the wgmma.mma_async after it. Needed before the first mma_async and after any instruction that writes
    its registers; it does not order shared memory (fence.proxy.async does)."""

    ptx = "wgmma.fence.sync.aligned"
    mnemonic = "wgmma.fence"
    floor = FLOOR
    family = "wgmma"

    def effects(self):
        return (fx.Collective("warpgroup"), fx.WgmmaFence())


class WgmmaCommitGroup(Op):
    """wgmma.commit_group.sync.aligned: close the warpgroup's mma_async issued since the last commit into one
    wgmma group (an empty group when there are none)."""

    ptx = "wgmma.commit_group.sync.aligned"
    mnemonic = "wgmma.commit_group"
    floor = FLOOR
    family = "wgmma"

    def effects(self):
        return (fx.CommitGroup("wgmma"),)


class WgmmaWaitGroup(Op):
    """wgmma.wait_group.sync.aligned N: wait until at most the N most recent wgmma groups are pending (0: all done);
    the registers of the groups it covers are the thread's again. N is a constant 0..7."""

    ptx = "wgmma.wait_group.sync.aligned"
    mnemonic = "wgmma.wait_group"
    operands = (Slot("n", Const(0, 7)),)
    floor = FLOOR
    family = "wgmma"
    note = "N 0..7 (ptxas takes more; the hardware limit is not documented)"

    def effects(self):
        return (fx.WaitGroup(self.n, queue="wgmma"),)


class WgmmaMmaAsync(Op):
    """wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.dtype.atype.btype{.and.popc} d, a, b-desc, scale-d
    {, imm-scale-a, imm-scale-b{, imm-trans-a}{, imm-trans-b}}: D = (±A)(±B) + (scale-d ? D : 0) on a 64xN tile
    (K = 32 bytes of the type: 16 for f16/bf16, 8 for tf32, 32 for fp8 and 8-bit integers, 256 for b1). d: the
    N/2 accumulator registers (.f32/.s32), N/4 for .f16; a: a matrix descriptor (SS) or 4 .b32 registers (RS);
    b: a matrix descriptor. scale-d: a predicate, its negation or 0/1. imm-scale-a/b (1, -1) on float forms;
    imm-trans-a/b (0, 1) on f16/bf16, imm-trans-a only with A from a descriptor. .s8/.u8 mixed need PTX 8.4."""

    ptx = "wgmma.mma_async.sync.aligned.<n>{.<satfinite>}.<dtype>.<atype>.<btype>{.<popc>}"
    mnemonic = "wgmma.mma_async"
    quals = {"n": ShapeN(),
             "satfinite": Flag("satfinite", doc="saturate integer results to the int32 range"),
             "dtype": ElementType(*DTYPES, inferred=True,
                                  doc="the accumulator type; not given: f32 (s32 for integer and .b1 forms), or "
                                      "f16 when N is given and d has N/4 registers"),
             "atype": ElementType(*K_OF, inferred=True, doc="A's type; not given: from a descriptor value's "
                                                            ".layout.dtype, else btype"),
             "btype": ElementType(*K_OF, inferred=True, doc="B's type; not given: from b's .layout.dtype, else atype"),
             "popc": Derived("and.popc", doc=".and.popc: the .b1 form's operation (written for .b1)")}
    operands = (Slot("d", Registers(_acc_count, _acc_types,
                                    rule="N/2 registers for .f32/.s32 accumulators, N/4 for .f16")),
                Slot("a", DescriptorOrRegisters(4, lambda op: A_TYPES)),
                Slot("b", Descriptor()),
                Slot("scale_d", Value(pred), default=1),
                Slot("imm_scale_a", OneOf(1, -1, neutral=1, when=lambda op: op.atype in FLOATS), default=1),
                Slot("imm_scale_b", OneOf(1, -1, neutral=1, when=lambda op: op.atype in FLOATS), default=1),
                Slot("imm_trans_a", OneOf(0, 1, neutral=0, when=lambda op: op.atype in HALVES and not
                                          _from_registers(op.a)), default=0),
                Slot("imm_trans_b", OneOf(0, 1, neutral=0, when=lambda op: op.atype in HALVES), default=0))
    args = ("d", "a", "b")
    excludes = _excludes()
    floor = FLOOR
    raises = (({"atype": "s8", "btype": "u8"}, Req((8, 4))), ({"atype": "u8", "btype": "s8"}, Req((8, 4))))
    family = "wgmma"
    note = ("sm_90a only; M = 64; imm_scale_a/b written on float forms only, imm_trans_a/b on f16/bf16 only "
            "(imm_trans_a not with A from registers)")

    @property
    def popc(self):
        return "and.popc" if getattr(self, "atype", None) == "b1" else None

    def prepare(self, values):
        self._k = None
        n = values.get("n")
        if isinstance(n, str):
            m = _SHAPE.fullmatch(n)
            if m is None:
                raise DSLError(f"wgmma.mma_async n={n!r}: expected N or a shape such as 'm64n128k16'")
            values["n"], self._k = int(m.group(1)), int(m.group(2))
        norm = self.quals["atype"].normalize
        at = norm(values.get("atype")) or norm(_layout_type(values.get("a")))
        bt = norm(values.get("btype")) or norm(_layout_type(values.get("b")))
        at, bt = at or bt, bt or at
        if at is None:
            raise DSLError("wgmma.mma_async: cannot tell the multiplicand types; pass atype= (and btype=), or "
                           "descriptor values whose .layout has a dtype")
        values["atype"], values["btype"] = at, bt
        d = values.get("d")
        regs = reg_list(d) if isinstance(d, (tuple, list)) or hasattr(d, "regs") else None
        if regs is None and d is not None:
            raise DSLError(f"wgmma.mma_async d={describe(d)}: expected a tuple of registers or a fragment (an object "
                           f"with .regs)")
        dt = self.quals["dtype"].normalize(values.get("dtype"))
        if dt is None and isinstance(at, str):
            dts = ACCUMULATE.get(at, ("f32",))
            dt = dts[0] if len(dts) == 1 else None
            if dt is None:
                dt = self.quals["dtype"].normalize(getattr(d, "dtype", None))
            if dt is None and regs and isinstance(values.get("n"), int):
                dt = "f16" if 4 * len(regs) == values["n"] else "f32"
            dt = dt if dt in DTYPES else "f32"
        values["dtype"] = dt
        if values.get("n") is None and regs is not None:
            values["n"] = len(regs) * (4 if dt == "f16" else 2)

    def settle(self):
        if self._k is not None and self._k != K_OF[self.atype]:
            raise DSLError(f"wgmma.mma_async.m64n{self.n}k{self._k}: .{self.atype} multiplicands take K = "
                           f"{K_OF[self.atype]} (m64n{self.n}k{K_OF[self.atype]})")

    def check(self):
        if _from_registers(self.a):
            acc = {r.name for r in reg_list(self.d)}
            for i, r in enumerate(reg_list(self.a)):
                if r.name in acc:
                    raise DSLError(f"{self.what} a[{i}]={r.name} is also an accumulator register (d): A and D must "
                                   f"not share registers")

    @property
    def acc(self) -> tuple:
        """The accumulator registers."""
        return tuple(reg_list(self.d))

    def defs(self):
        return self.acc

    def uses(self):
        regs = list(super().uses())
        if getattr(self.scale_d, "value", None) == 0:          # the immediate 0
            acc = set(map(id, self.acc))
            regs = [r for r in regs if id(r) not in acc]      # scale-d = 0: D is written, not read
        return tuple(regs)

    def effects(self):
        rs = _from_registers(self.a)
        return (fx.Collective("warpgroup"),
                fx.MmaAsync(acc=self.acc, descs=(self.b,) if rs else (self.a, self.b),
                            a_regs=tuple(reg_list(self.a)) if rs else ()))
