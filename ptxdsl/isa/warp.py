"""Warp-level instructions: elect.sync, bar.warp.sync, shfl.sync, vote.sync, redux.sync, activemask, and the
8x8 matrix loads and stores ldmatrix / stmatrix.

Each takes a member mask (default: all 32 lanes); the lanes it names execute the instruction together.
ldmatrix and stmatrix take none: they are .aligned, all 32 lanes run them."""
from __future__ import annotations

from ..target import SM100A, Req
from ..types import b32, pred, u32
from . import effects as fx
from .decl import Derived, Flag, Op, Qual, TypeQual
from .operands import Address, Dst, Dsts, PairedDst, Slot, Value, Vector

FULL = 0xFFFFFFFF
MASK = Slot("mask", Value(u32, hex=8), default=FULL)


class ElectSync(Op):
    """elect.sync d|p, membermask: p is true in one leader lane of the mask (d: the leader's lane id)."""

    ptx = "elect.sync"
    operands = (Slot("lane", PairedDst(u32, "pred", sink=True)), Slot("pred", Dst(pred), inline=True), MASK)
    results = ("pred", "lane")
    floor = Req((8, 0))
    family, level = "warp", "gpu"

    def effects(self):
        out = [fx.Elect(self.pred, self.mask), fx.Collective("warp", self.mask)]
        if self.lane in self.defs():
            out.append(fx.Opaque(self.lane, "warp"))
        return tuple(out)


class BarWarpSync(Op):
    """bar.warp.sync membermask: the lanes of the mask wait for each other (CUDA's __syncwarp)."""

    ptx = "bar.warp.sync"
    operands = (MASK,)
    floor = Req((7, 8))
    family = "warp"

    def effects(self):
        return (fx.Collective("warp", self.mask), fx.WarpSync(self.mask))


SHFL_TYPES = TypeQual("b32", "u32", "s32", "f32", infer=("a",), spell=lambda t, op: b32,
                      doc="the value's type (PTX writes .b32)")


class ShflSync(Op):
    """shfl.sync.mode.b32 d{|p}, a, b, c, membermask: d = a of another lane (up/down by b, bfly: lane ^ b,
    idx: lane b), within the segment and clamp c; p says whether that lane was in range."""

    ptx = "shfl.sync.<mode>.<type>"
    quals = {"mode": Qual("up", "down", "bfly", "idx"), "type": SHFL_TYPES}
    operands = (Slot("d", PairedDst("type", "p")), Slot("p", Dst(pred, sink=True), inline=True),
                Slot("a", Value("type")), Slot("b", Value(u32, lo=0, hi=31)),
                Slot("c", Value(u32), optional=True), MASK)
    args = ("mode", "a", "b")
    floor = Req((7, 8))
    family = "warp"

    def prepare(self, values):
        if values.get("c") is None:
            values["c"] = 0 if values.get("mode") == "up" else 0x1F     # the whole warp, one segment

    def effects(self):
        out = [fx.Collective("warp", self.mask), fx.Opaque(self.d)]
        if self.p in self.defs():
            out.append(fx.Opaque(self.p))
        return tuple(out)


class VoteSync(Op):
    """vote.sync.{all,any,uni}.pred d, a, membermask: whether a holds in all / any lane, or in all or none."""

    ptx = "vote.sync.<mode>.pred"
    quals = {"mode": Qual("all", "any", "uni")}
    operands = (Slot("d", Dst(pred)), Slot("a", Value(pred)), MASK)
    args = ("mode", "a")
    floor = Req((7, 8))
    family = "warp"

    def effects(self):
        return (fx.Collective("warp", self.mask), fx.Opaque(self.d, "warp"))


class VoteSyncBallot(Op):
    """vote.sync.ballot.b32 d, a, membermask: bit i of d is a of lane i (lanes of the mask)."""

    ptx = "vote.sync.<mode>.b32"
    quals = {"mode": Qual("ballot", default="ballot")}
    operands = (Slot("d", Dst(u32)), Slot("a", Value(pred)), MASK)
    args = ("mode", "a")
    method = "vote_sync"
    floor = Req((7, 8))
    family = "warp"

    def effects(self):
        return (fx.Collective("warp", self.mask), fx.Opaque(self.d, "warp"))


REDUX_TYPES = {"add": ("u32", "s32"), "min": ("u32", "s32", "f32"), "max": ("u32", "s32", "f32"),
               "and": ("b32",), "or": ("b32",), "xor": ("b32",)}


class ReduxSync(Op):
    """redux.sync.op.type d, a, membermask: d = op over the lanes of the mask of a (add/min/max on
    u32/s32, and/or/xor on b32; min/max on f32, with .abs and .NaN, on sm_100a)."""

    ptx = "redux.sync.<op>{.<abs>}{.<nan>}.<type>"
    quals = {"op": Qual(*REDUX_TYPES), "abs": Flag("abs"), "nan": Flag("NaN"),
             "type": TypeQual("u32", "s32", "b32", "f32", infer=("a",))}
    operands = (Slot("d", Dst("type")), Slot("a", Value("type")), MASK)
    args = ("op", "a")
    excludes = tuple(({"op": o, "type": t}, f".{o} does not take .{t}")
                     for o, ok in REDUX_TYPES.items() for t in ("u32", "s32", "b32", "f32") if t not in ok) + (
        ({"abs": True, "type": ("u32", "s32", "b32")}, ".abs is for .f32"),
        ({"nan": True, "type": ("u32", "s32", "b32")}, ".NaN is for .f32"),
    )
    floor = Req((7, 8))
    raises = (({"type": "f32"}, Req((8, 6), SM100A - {"sm_110a"})),)    # ptxas: not on sm_110a
    family = "warp"
    note = ".f32 needs an sm_100a-class target: assembled, not run on hardware"

    def prepare(self, values):
        if values.get("type") is None and values.get("op") in ("and", "or", "xor"):
            values["type"] = b32                        # the bitwise ops are .b32 whatever a's type

    def effects(self):
        return (fx.Collective("warp", self.mask), fx.Opaque(self.d, "warp"))


class Activemask(Op):
    """activemask.b32 d: the mask of the lanes of the warp executing it together now."""

    ptx = "activemask.b32"
    mnemonic = "activemask"
    operands = (Slot("d", Dst(u32)),)
    floor = Req((7, 8))
    family = "warp"

    def effects(self):
        return (fx.Opaque(self.d),)


# ------------------------------------------------------------------------------ 8x8 matrices

MATRIX_SPACE = Qual("shared", "shared::cta", None, default="shared", aliases={"": None}, none_token="generic",
                    doc="the address's state space (None: a generic address of shared memory)")
ROW_BYTES = 16                  # one row of an 8x8 .b16 matrix: the 16 bytes at one lane's address


def _x(v, op=None) -> str:
    return f"x{v}"


class Ldmatrix(Op):
    """ldmatrix.sync.aligned.m8n8.num{.trans}{.space}.b16 d, [a]: the warp loads 1, 2 or 4 8x8 matrices of 16-bit
    elements from shared memory, lanes 8i..8i+7 giving the 16-byte row addresses of matrix i; d is one .b32
    register per matrix (a tuple for x2/x4), lane l holding row l/4, columns 2(l%4) and 2(l%4)+1 of each
    (.trans: of the transposed matrix). PTX ISA 6.5 on sm_75."""

    ptx = "ldmatrix.sync.aligned.m8n8.<num>{.<trans>}{.<space>}.b16"
    mnemonic = "ldmatrix"
    quals = {"num": Qual(1, 2, 4, default=4, ptx=_x, token=_x, aliases={"x1": 1, "x2": 2, "x4": 4}, inferred=True,
                         doc="how many matrices (.x1, .x2, .x4); not given: as many as out= names, else 4"),
             "trans": Flag("trans"), "space": MATRIX_SPACE}
    operands = (Slot("d", Dsts(b32, "num", braces=True)), Slot("addr", Address("space", align=ROW_BYTES)))
    floor = Req((6, 5))
    family, level = "warp", "gpu"

    def prepare(self, values):
        if values.get("num") is None:
            d = values.get("d")
            values["num"] = 4 if d is None else len(d) if isinstance(d, (tuple, list)) else 1

    def effects(self):
        # every lane's address is taken as a row read (x1/x2 read those of lanes 0-7 / 0-15 only)
        return (fx.Collective("warp"), fx.Access(self.addr, self.space or "", ROW_BYTES),
                *(fx.Opaque(r) for r in self.d))


class Stmatrix(Op):
    """stmatrix.sync.aligned.m8n8.num{.trans}{.space}.b16 [a], r: the warp stores 1, 2 or 4 8x8 matrices of 16-bit
    elements to shared memory (the inverse of ldmatrix: r is one .b32 register per matrix, laid out as ldmatrix
    loads them; .num follows from how many are given)."""

    ptx = "stmatrix.sync.aligned.m8n8.<num>{.<trans>}{.<space>}.b16"
    mnemonic = "stmatrix"
    quals = {"num": Derived(1, 2, 4, ptx=_x, token=_x), "trans": Flag("trans"), "space": MATRIX_SPACE}
    operands = (Slot("addr", Address("space", align=ROW_BYTES)), Slot("regs", Vector(b32, imm=False, braces=True)))
    floor = Req((7, 8))
    family, level = "warp", "gpu"

    @property
    def num(self):
        regs = getattr(self, "regs", None)
        return len(regs) if regs else None

    def effects(self):
        return (fx.Collective("warp"), fx.Access(self.addr, self.space or "", ROW_BYTES, write=True, read=False))
