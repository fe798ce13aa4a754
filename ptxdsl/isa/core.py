"""Core PTX: mov, integer/float arithmetic, setp/selp, cvt, cvta, ld/st/atom, bar.sync, bra, ret, exit, trap,
membar.

The arithmetic family is a table: one `_arith(...)` line declares one mnemonic (its types, its modifiers and
the combinations ptxas refuses); the other ops are classes."""
from __future__ import annotations

from ..errors import DSLError
from ..ir import Imm, Param, SharedAlloc, SpecialReg
from ..target import SM100A, Req
from ..types import ALL_TYPES, ScalarType, b16, b32, f32, pred, u32, u64
from . import effects as fx
from .decl import Derived, Flag, Op, Qual, TypeQual
from .operands import Address, Dst, Dsts, LabelRef, Slot, Value, Vector, describe

INTS = ("u16", "u32", "u64", "s16", "s32", "s64")
ROUND_MODES = ("rn", "rz", "rm", "rp")
FLOATS = ("f16", "bf16", "f32", "f64")
BITS = ("b16", "b32", "b64")
SPACES = ("global", "shared", "shared::cta", "shared::cluster", "param", "local", "const")


def bits_type(t: ScalarType) -> ScalarType:
    return ALL_TYPES[f"b{t.bits}"]


def wide_type(t: ScalarType) -> ScalarType:
    """The type twice as wide (the result of .wide); DSLError for 64-bit types, which have none."""
    wide = ALL_TYPES.get(f"{t.kind}{t.bits * 2}")
    if wide is None:
        raise DSLError(f".wide of .{t.name}: there is no {t.bits * 2}-bit type; .wide takes 16- and 32-bit operands")
    return wide


def _as_bits(t, op):
    """Logic and shifts are written on .bN whatever the integer kind (and.u32 is and.b32)."""
    return bits_type(t) if t.kind in "us" else t


def _names(types) -> tuple:
    return tuple(t if isinstance(t, str) else t.name for t in types)


# ------------------------------------------------------------------------------------------- mov


class MovSource(Value):
    """mov's source: a register, an immediate, a special register, or a shared buffer / parameter whose
    address mov takes (then the type is .u32/.u64/.b32/.b64)."""

    halves = True               # a half constant becomes its bits (mov.b16)

    def __init__(self):
        super().__init__("type", sreg=True)

    def bind(self, op, what, v, alloc):
        if isinstance(v, (SharedAlloc, Param)):
            if op.type.bits not in (32, 64) or op.type.kind == "f":
                raise DSLError(f"mov of the address of {describe(v)}: expected .u32/.u64/.b32/.b64, got "
                               f".{op.type.name}")
            return v
        if op.type.name in ("f16", "bf16") and isinstance(v, (int, float)) and not isinstance(v, bool):
            return Imm(half_bits(v, op.type.name), b16)       # mov.b16 of the value's bits
        return super().bind(op, what, v, alloc)


def half_bits(v: float, name: str) -> int:
    """The 16 bits of v as an f16 or bf16 (round to nearest even)."""
    import numpy as np

    if name == "f16":
        return int(np.array(v, dtype=np.float16).view(np.uint16))
    import ml_dtypes

    return int(np.array(v, dtype=ml_dtypes.bfloat16).view(np.uint16))


class Mov(Op):
    """mov.type d, a: copy a register, an immediate, a special register, or a symbol's address into d
    (.f16/.bf16 are moved as .b16)."""

    ptx = "mov.<type>"
    quals = {"type": TypeQual("pred", *BITS, *INTS, *FLOATS, infer=("src",),
                              spell=lambda t, op: b16 if t.name in ("f16", "bf16") else t)}
    operands = (Slot("d", Dst("type", space=lambda op: "shared::cta" if isinstance(op.src, SharedAlloc) else None)),
                Slot("src", MovSource()))
    args = ("src", "type")

    def prepare(self, values):
        src = values.get("src")
        if values.get("type") is None:
            if isinstance(src, SharedAlloc):
                values["type"] = u32
            elif isinstance(src, Param):
                values["type"] = u64

    def effects(self):
        return (fx.Compute(self.d, "mov", (self.src,), self.type),)


# ------------------------------------------------------------------------------------ arithmetic


class _Arith(Op):
    """A binary or unary arithmetic / logic instruction: d = op(a, b) or d = op(a)."""

    abstract = True
    binary = True

    def settle(self):
        mode = getattr(self, "mode", None)
        if mode is None and "mode" in type(self).quals:
            if self.mnemonic == "mul" and self.type.kind in "us":
                self.mode = "lo"                   # ptxas takes no integer mul without .lo/.hi/.wide
            elif self.mnemonic == "div" and self.type.kind == "f":
                self.mode = "rn"                   # nor a float div without a rounding (or .approx/.full)

    def effects(self):
        args = (self.a, self.b) if self.binary else (self.a,)
        return (fx.Compute(self.d, self.mnemonic, args, self.type, getattr(self, "mode", None)),)


def _result_type(op):
    return wide_type(op.type) if getattr(op, "mode", None) == "wide" else op.type


def _address_space(op):
    """add/sub of an address register keep its state space."""
    return op.a.space if op.mnemonic in ("add", "sub") and hasattr(op.a, "space") else None


def _restrict(quals: dict, types) -> tuple:
    """Exclusions from a table {qualifier: {value: the types that take it}}: every other type is an error."""
    out = []
    for name, table in quals.items():
        for value, ok in table.items():
            bad = tuple(t for t in types if t not in ok)
            if bad:
                out.append(({name: value, "type": bad}, f".{_word(value, name)} is not for .{'/.'.join(bad)}"
                            f" (it takes .{'/.'.join(ok)})"))
    return tuple(out)


def _word(value, name) -> str:
    return name.replace("_", ".") if value is True else str(value)


def _arith(mnemonic: str, types, *, modes=None, flags=None, unary=False, bits=False, result=None, b_type=None,
           excludes=(), raises=(), method=None, doc=""):
    """Declare one arithmetic mnemonic: its types (inferred from the operands unless type= is given), its .mode
    values and flags each with the types that take them ({value: types}), the result type when it is not the
    operand type, and the type of b."""
    modes, flags = modes or {}, flags or {}
    quals = {}
    template = mnemonic
    if "relu" in flags:
        quals["relu"] = Flag("relu")
        template += "{.<relu>}"
    if modes:
        quals["mode"] = Qual(None, *modes)
        template += "{.<mode>}"
    for name in flags:
        if name != "relu":
            quals[name] = Flag({"nan": "NaN", "xorsign_abs": "xorsign.abs"}.get(name, name))
            template += f"{{.<{name}>}}"
    quals["type"] = TypeQual(*types, infer=("a",) if unary else ("a", "b"), spell=_as_bits if bits else None)
    template += ".<type>"
    dst = Dst(result if result is not None else _result_type, space=_address_space)
    operands = [Slot("d", dst), Slot("a", Value("type"))]
    if not unary:
        operands.append(Slot("b", Value(b_type or "type")))
    table = {"mode": modes, **{n: {True: ok} for n, ok in flags.items()}}
    name = "".join(p.capitalize() for p in mnemonic.split("."))
    ns = {"ptx": template, "quals": quals, "operands": tuple(operands),
          "excludes": _restrict(table, _names(types)) + tuple(excludes), "raises": tuple(raises),
          "binary": not unary, "__doc__": doc, "__module__": __name__}
    if method:
        ns["method"] = method
    return type(name, (_Arith,), ns)


F32_64 = ("f32", "f64")
HALF_FTZ = ("f16", "f32")             # .ftz: f32 and f16
ROUNDED = {"rn": FLOATS, "rz": F32_64, "rm": F32_64, "rp": F32_64}     # f16/bf16 round only .rn
ADD_FLAGS = {"ftz": HALF_FTZ, "sat": ("s32", "f16", "f32")}
MUL_MODES = {"lo": INTS, "hi": INTS, "wide": ("u16", "u32", "s16", "s32"), **ROUNDED}
SAT_ROUND = (({"sat": True, "type": "f16", "mode": ("rz", "rm", "rp")}, "f16 rounds only .rn"),)
MINMAX_FLAGS = {"relu": ("s32",), "ftz": HALF_FTZ, "nan": ("f16", "bf16", "f32"), "xorsign_abs": ("f16", "bf16", "f32")}

Add = _arith("add", INTS + FLOATS, modes=ROUNDED, flags=ADD_FLAGS, doc="add: d = a + b ({.rn,.rz,.rm,.rp} and "
             ".ftz on floats, .sat on s32/f16/f32).")
Sub = _arith("sub", INTS + FLOATS, modes=ROUNDED, flags=ADD_FLAGS, doc="sub: d = a - b.")
Mul = _arith("mul", INTS + FLOATS, modes=MUL_MODES, flags={"ftz": HALF_FTZ, "sat": ("f16", "f32")},
             doc="mul: d = a * b (integers: .lo, .hi or .wide, the half of the product; default .lo).")
Div = _arith("div", INTS + F32_64, modes={"rn": F32_64, "rz": F32_64, "rm": F32_64, "rp": F32_64,
                                         "approx": ("f32",), "full": ("f32",)}, flags={"ftz": ("f32",)},
             doc="div: d = a / b (floats: .rn by default, .approx/.full on f32).")
Rem = _arith("rem", INTS, doc="rem: d = a % b (integers).")
Min = _arith("min", INTS + FLOATS, flags=MINMAX_FLAGS, raises=(({"relu": True}, Req((8, 0))),),
             doc="min: d = the smaller of a and b (.NaN propagates NaN, .relu clamps at 0).")
Max = _arith("max", INTS + FLOATS, flags=MINMAX_FLAGS, raises=(({"relu": True}, Req((8, 0))),),
             doc="max: d = the larger of a and b.")
And = _arith("and", ("pred",) + BITS + INTS, bits=True, method="and_", doc="and: d = a & b (and.pred on predicates).")
Or = _arith("or", ("pred",) + BITS + INTS, bits=True, method="or_", doc="or: d = a | b.")
Xor = _arith("xor", ("pred",) + BITS + INTS, bits=True, doc="xor: d = a ^ b.")
Shl = _arith("shl", BITS + INTS, bits=True, b_type=u32, doc="shl: d = a << b (b: a .u32 count).")
Shr = _arith("shr", BITS + INTS, b_type=u32, doc="shr: d = a >> b (arithmetic for signed types).")
Not = _arith("not", ("pred",) + BITS + INTS, unary=True, bits=True, method="not_", doc="not: d = ~a.")
Cnot = _arith("cnot", BITS + INTS, unary=True, bits=True, doc="cnot: d = (a == 0).")
Neg = _arith("neg", ("s16", "s32", "s64") + FLOATS, unary=True, flags={"ftz": HALF_FTZ}, doc="neg: d = -a.")
Abs = _arith("abs", ("s16", "s32", "s64") + FLOATS, unary=True, flags={"ftz": HALF_FTZ}, doc="abs: d = |a|.")
Popc = _arith("popc", ("b32", "b64", "u32", "u64", "s32", "s64"), unary=True, bits=True, result=u32,
              doc="popc: d = the number of set bits of a (d is .u32).")
Clz = _arith("clz", ("b32", "b64", "u32", "u64", "s32", "s64"), unary=True, bits=True, result=u32,
             doc="clz: d = the number of leading zero bits of a (d is .u32).")
Brev = _arith("brev", ("b32", "b64", "u32", "u64", "s32", "s64"), unary=True, bits=True,
              doc="brev: d = the bits of a reversed.")
Add.excludes += SAT_ROUND
Sub.excludes += SAT_ROUND
Mul.excludes += SAT_ROUND


class Mad(Op):
    """mad{.lo,.hi,.wide}.type d, a, b, c: d = a * b + c on integers (.lo by default; .hi.sat on s32)."""

    ptx = "mad.<mode>{.<sat>}.<type>"
    quals = {"mode": Qual("lo", "hi", "wide", default="lo"), "sat": Flag("sat"), "type": TypeQual(*INTS, infer=("a", "b"))}
    operands = (Slot("d", Dst(_result_type)), Slot("a", Value("type")), Slot("b", Value("type")),
                Slot("c", Value(_result_type)))
    excludes = (({"mode": "wide", "type": ("u64", "s64")}, "mad.wide takes 16- and 32-bit operands"),
                ({"sat": True, "mode": ("lo", "wide")}, ".sat is for mad.hi.s32"),
                ({"sat": True, "type": tuple(t for t in INTS if t != "s32")}, ".sat is for mad.hi.s32"))

    def effects(self):
        return (fx.Compute(self.d, "mad", (self.a, self.b, self.c), self.type, self.mode),)


class Fma(Op):
    """fma.rnd.type d, a, b, c: d = a * b + c on floats, rounded once (.rn by default)."""

    ptx = "fma.<rnd>{.<ftz>}{.<sat>}{.<relu>}.<type>"
    quals = {"rnd": Qual(*ROUND_MODES, default="rn"), "ftz": Flag("ftz"), "sat": Flag("sat"), "relu": Flag("relu"),
             "type": TypeQual(*FLOATS, infer=("a", "b"))}
    operands = (Slot("d", Dst("type")), Slot("a", Value("type")), Slot("b", Value("type")), Slot("c", Value("type")))
    excludes = _restrict({"rnd": {"rz": ("bf16",) + F32_64, "rm": ("bf16",) + F32_64, "rp": ("bf16",) + F32_64},
                          "ftz": {True: HALF_FTZ}, "sat": {True: HALF_FTZ}, "relu": {True: ("f16", "bf16")}},
                         FLOATS) + (
        ({"relu": True, "sat": True}, ".relu and .sat do not go together"),
        ({"type": "f16", "rnd": ("rz", "rm", "rp")}, "f16 fma rounds only .rn"))

    def effects(self):
        return (fx.Compute(self.d, "fma", (self.a, self.b, self.c), self.type, self.rnd),)


CMP_INT = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")
CMP_FLOAT = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
UNORDERED = tuple(c for c in CMP_FLOAT if c not in CMP_INT)
SIGNED = ("s16", "s32", "s64")
UNSIGNED = ("u16", "u32", "u64")


class Setp(Op):
    """setp.cmp.type p, a, b: p = a cmp b (lo/ls/hi/hs: unsigned; equ...geu, num, nan: unordered floats;
    .bN compares only eq/ne)."""

    ptx = "setp.<cmp>{.<ftz>}.<type>"
    quals = {"cmp": Qual(*dict.fromkeys(CMP_INT + CMP_FLOAT)), "ftz": Flag("ftz"),
             "type": TypeQual(*BITS, *INTS, *FLOATS, infer=("a", "b"))}
    operands = (Slot("p", Dst(pred)), Slot("a", Value("type")), Slot("b", Value("type")))
    args = ("cmp", "a", "b")
    excludes = (({"cmp": UNORDERED, "type": BITS + INTS}, "the unordered comparisons (equ, ..., num, nan) are for "
                                                          "floating-point types"),
                ({"cmp": ("lo", "ls", "hi", "hs"), "type": BITS + SIGNED + FLOATS},
                 "lo/ls/hi/hs are unsigned integer comparisons"),
                ({"cmp": ("lt", "le", "gt", "ge"), "type": BITS}, ".bN values compare only eq/ne; say .u or .s"),
                ({"ftz": True, "type": tuple(t for t in BITS + INTS + FLOATS if t not in HALF_FTZ)},
                 ".ftz is for .f32 and .f16"))

    def effects(self):
        return (fx.Compute(self.p, "setp." + self.cmp, (self.a, self.b), self.type),)


def _half_bits(t, op):
    """Halves move as their bits: selp.f16 is written selp.b16."""
    return b16 if t.name in ("f16", "bf16") else t


class Selp(Op):
    """selp.type d, a, b, c: d = c ? a : b."""

    ptx = "selp.<type>"
    quals = {"type": TypeQual(*BITS, *INTS, *FLOATS, infer=("a", "b"), spell=_half_bits)}
    operands = (Slot("d", Dst("type")), Slot("a", Value("type")), Slot("b", Value("type")),
                Slot("cond", Value(pred)))

    def effects(self):
        return (fx.Compute(self.d, "selp", (self.a, self.b, self.cond), self.type),)


# ------------------------------------------------------------------------------------ conversions

CVT_TYPES = ("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64") + FLOATS
INT_ROUND = ("rni", "rzi", "rmi", "rpi")
NO_ROUND = (None,)


def _bits_of(t: str) -> int:
    return int(t.lstrip("usbf").lstrip("f") or 16) if t != "bf16" else 16


def _fits(s: str, d: str) -> bool:
    """Whether every value of integer type s is a value of integer type d (no .sat needed)."""
    sb, db = _bits_of(s), _bits_of(d)
    if s[0] == "u":
        return db >= sb if d[0] == "u" else db > sb
    return d[0] == "s" and db >= sb


def _cvt_rule(d: str, s: str):
    """(the roundings cvt.d.s takes, whether it takes .sat), as ptxas accepts them; None: no such cvt."""
    df, sf = d in FLOATS, s in FLOATS
    if not df and not sf:
        return NO_ROUND, not _fits(s, d)
    if "bf16" in (d, s) and ("u8" in (d, s) or "s8" in (d, s)):
        return None
    sat = "bf16" not in (d, s)
    if not df:
        return INT_ROUND, sat
    if not sf:
        return ROUND_MODES, sat
    if d == s:
        return NO_ROUND + INT_ROUND, sat
    if "bf16" in (d, s):
        return (ROUND_MODES if d == "bf16" and s in F32_64 else NO_ROUND + ROUND_MODES), False
    return (NO_ROUND if _bits_of(d) > _bits_of(s) else ROUND_MODES), sat


def _cvt_excludes() -> tuple:
    out = []
    for d in CVT_TYPES:
        for s in CVT_TYPES:
            rule = _cvt_rule(d, s)
            if rule is None:
                out.append(({"type": d, "stype": s}, f"ptxas has no cvt.{d}.{s}"))
                continue
            rounds, sat = rule
            bad = tuple(r for r in ROUND_MODES + INT_ROUND if r not in rounds)    # None: the default (settle)
            if bad:
                takes = ", ".join(f".{r}" for r in rounds if r) or "no rounding"
                out.append(({"type": d, "stype": s, "rnd": bad}, f"cvt.{d}.{s} takes {takes}"
                            + (" or none" if None in rounds and len(rounds) > 1 else "")))
            if not sat:
                out.append(({"type": d, "stype": s, "sat": True}, f"cvt.{d}.{s} takes no .sat"
                            + (" (every value fits)" if d not in FLOATS and s not in FLOATS else "")))
    return tuple(out)


class Cvt(Op):
    """cvt{.rnd}{.sat}.dtype.stype d, a: convert between types (the rounding PTX requires is filled in: .rzi from
    a float to an integer, .rn to a float from an integer or a wider float)."""

    ptx = "cvt{.<rnd>}{.<sat>}.<type>.<stype>"
    quals = {"rnd": Qual(None, *ROUND_MODES, *INT_ROUND), "sat": Flag("sat"), "type": TypeQual(*CVT_TYPES),
             "stype": TypeQual(*CVT_TYPES, infer=("src",))}
    operands = (Slot("d", Dst("type")), Slot("src", Value("stype", sreg=True)))
    args = ("type", "src")
    excludes = _cvt_excludes()

    def settle(self):
        if self.rnd is None:
            rule = _cvt_rule(self.type.name, self.stype.name)
            if rule is not None and None not in rule[0]:
                self.rnd = rule[0][0] if rule[0][0] != "rni" else "rzi"     # C's truncation to integers

    def check(self):
        if isinstance(self.src, SpecialReg) and "f" in (self.type.kind, self.stype.kind):
            raise DSLError(f"cvt src={self.src.name}: a special register is only an operand of mov and of an integer "
                           f"cvt (ptxas: \"Special register argument not allowed\"); read it first: "
                           f"k.mov(sreg.{self.src.name[1:].replace('.', '_')})")

    def effects(self):
        return (fx.Compute(self.d, "cvt", (self.src,), self.type, self.stype.name),)


PAIRS = ("f16x2", "bf16x2", "e4m3x2", "e5m2x2")
FP8_PAIRS = ("e4m3x2", "e5m2x2")


class CvtPack(Op):
    """cvt.rnd{.relu}{.satfinite}.f16x2/bf16x2.f32 d, a, b: round two .f32 values to 16-bit floats packed in one
    .b32 register, a (`src`) in the upper half and b (`lo`) in the lower (.relu clamps negatives to 0,
    .satfinite clamps to the largest finite value). PTX ISA 7.0 on sm_80; .satfinite from 8.1.
    cvt.rn.satfinite{.relu}.e4m3x2/e5m2x2.f32 d, a, b: the same into two FP8 values in a .b16 register (a in the
    upper byte; .satfinite always, .rn only; PTX ISA 7.8 on sm_89)."""

    ptx = "cvt.<rnd>{.<relu>}{.<satfinite>}.<type>.<stype>"
    quals = {"rnd": Qual("rn", "rz", default="rn"), "relu": Flag("relu"), "satfinite": Flag("satfinite"),
             "type": Qual(*PAIRS, aliases={"." + p: p for p in PAIRS},
                          doc="the packed pair (f16x2, bf16x2; e4m3x2, e5m2x2 in a .b16 register)"),
             "stype": TypeQual("f32", default=f32)}
    operands = (Slot("d", Dst(lambda op: b16 if op.type in FP8_PAIRS else b32)), Slot("src", Value("stype")),
                Slot("lo", Value("stype")))
    args = ("type", "src", "lo")
    excludes = (({"type": FP8_PAIRS, "rnd": "rz"}, "an FP8 pair is rounded to nearest (.rn); ptxas takes .rz only "
                                                   "from PTX 9.4"),)
    floor = Req((7, 0))
    raises = (({"satfinite": True, "type": ("f16x2", "bf16x2")}, Req((8, 1))), ({"type": FP8_PAIRS}, Req((7, 8))))
    level = "gpu"

    def settle(self):
        if self.type in FP8_PAIRS:
            self.satfinite = True          # PTX requires it: out-of-range values clamp to the largest finite FP8

    def check(self):
        if self.d.type.kind == "f":
            raise DSLError(f"{self.what} d={describe(self.d)}: the pair is written to a .b{self.d.type.bits} "
                           f"register (ptxas takes no float register here)")


class CvtUnpack(Op):
    """cvt.rn{.relu}.f16x2.e4m3x2/e5m2x2 d, a: widen the two FP8 values of a .b16 register to two .f16 values
    packed in a .b32 register (the upper byte to the upper half; .relu clamps negatives to 0). PTX ISA 7.8 on
    sm_89."""

    ptx = "cvt.<rnd>{.<relu>}.<type>.<stype>"
    quals = {"rnd": Qual("rn", default="rn"), "relu": Flag("relu"),
             "type": Qual("f16x2", default="f16x2", aliases={".f16x2": "f16x2"}, doc="the packed result (f16x2)"),
             "stype": Qual(*FP8_PAIRS, aliases={"." + p: p for p in FP8_PAIRS}, doc="the FP8 pair (e4m3x2, e5m2x2)")}
    operands = (Slot("d", Dst(b32)), Slot("src", Value(b16, imm=False)))
    args = ("type", "src")
    floor = Req((7, 8))
    level = "gpu"

    def check(self):
        if self.d.type.kind == "f":
            raise DSLError(f"{self.what} d={describe(self.d)}: the pair is written to a .b32 register (ptxas takes "
                           f"no float register here)")


class CvtaSource(Value):
    """cvta's source: a .u64 register or a shared buffer / parameter symbol."""

    def __init__(self):
        super().__init__(u64)

    def bind(self, op, what, v, alloc):
        if isinstance(v, (SharedAlloc, Param)):
            space = "param" if isinstance(v, Param) else "shared"
            if not (op.space == space or space == "shared" and op.space in ("shared::cta", "shared::cluster")):
                raise DSLError(f"{what}={describe(v)} is a {space} symbol; cvta.{op.space} converts a {op.space} "
                               f"address")
            if op.to:
                raise DSLError(f"{what}={describe(v)}: cvta.to converts a generic address register, not a symbol")
            return v
        return super().bind(op, what, v, alloc)


class Cvta(Op):
    """cvta{.to}.space.u64 d, a: a state-space address to a generic one (.to: generic to the space)."""

    ptx = "cvta{.<to>}.<space>.u64"
    quals = {"to": Flag("to"), "space": Qual(*SPACES)}
    operands = (Slot("d", Dst(u64, space=lambda op: op.space if op.to else None)), Slot("src", CvtaSource()))
    args = ("src", "space")
    floor = Req((7, 8))
    raises = (({"space": "param"}, Req((7, 7))),)

    def effects(self):
        return (fx.Compute(self.d, "cvta", (self.src,), u64),)




# ------------------------------------------------------------------------------------------ memory

LDST_TYPES = BITS + ("b8", "u8", "s8") + INTS + FLOATS
VEC = {1: None, 2: "v2", 4: "v4"}
WIDE = ("b64", "u64", "s64", "f64")
# .v4 of 64-bit values: only global (and generic) memory, sm_100a-class targets from ISA 8.8.
V4_WIDE_SPACES = ("global", None)


def _ldst_type(t, op):
    """ld/st of a half moves its bits: ld.f16 is written ld.b16."""
    return b16 if t.name in ("f16", "bf16") else t


LD_SEM = Qual(None, "relaxed", "acquire", doc="a memory-model load: relaxed, or acquire (needs a scope)")
ST_SEM = Qual(None, "relaxed", "release", doc="a memory-model store: relaxed, or release (needs a scope)")
LDST_SCOPE = Qual(None, "cta", "cluster", "gpu", "sys", doc="the threads the ordering is with (with sem=)")


def _ordered_rules(name: str) -> tuple:
    """ld/st.relaxed|acquire|release: a scope always, no .volatile beside it, global or shared memory only."""
    return (({"sem": None, "scope": ("cta", "cluster", "gpu", "sys")}, f"a {name} scope goes with sem="),
            ({"sem": ("relaxed", "acquire", "release"), "scope": None}, f"{name}.sem needs a scope"),
            ({"sem": ("relaxed", "acquire", "release"), "volatile": True}, f"{name}.volatile takes no sem="),
            ({"sem": ("relaxed", "acquire", "release"), "space": ("param", "local", "const")},
             f"{name}.sem is for global and shared memory"))


def _order(sem, scope) -> tuple:
    """The Order effect of a load, store or atomic with `sem` (none for a relaxed or plain one)."""
    return (fx.Order(sem, scope),) if sem in ("acquire", "release", "acq_rel") else ()


def _ldst_rules(vec: str) -> tuple:
    return (({vec: 4, "type": WIDE, "space": tuple(sp for sp in SPACES if sp not in V4_WIDE_SPACES)},
             ".v4 of 64-bit values is only for global (and generic) memory"),)


class Ld(Op):
    """ld{.volatile | .relaxed.scope | .acquire.scope}{.space}{.vN}.type d, [a]: load one value or a vector of 2
    or 4 (space '' is a generic address). `sem='acquire'` with a `scope` makes it an acquire: later accesses of
    the thread are ordered after it (the reading side of a flag that another CTA releases)."""

    ptx = "ld{.<volatile>}{.<sem>}{.<scope>}{.<space>}{.<vec>}.<type>"
    quals = {"volatile": Flag("volatile"), "sem": LD_SEM, "scope": LDST_SCOPE,
             "space": Qual(*SPACES, None, default="global", aliases={"": None}, none_token="generic"),
             "vec": Qual(1, 2, 4, default=1, ptx=lambda v, op: VEC[v], token=lambda v: VEC[v]),
             "type": TypeQual(*LDST_TYPES, spell=_ldst_type)}
    operands = (Slot("d", Dsts("type", "vec")), Slot("addr", Address("space")))
    args = ("type", "addr")
    excludes = _ldst_rules("vec") + (({"volatile": True, "space": ("param", "local", "const")},
                                       "ld.volatile takes no .param, .local or .const"),) + _ordered_rules("ld")
    raises = (({"vec": 4, "type": WIDE}, Req((8, 8), SM100A)),)

    def effects(self):
        return (fx.Access(self.addr, self.space or "", self.type.nbytes * self.vec),) + _order(self.sem, self.scope)


class St(Op):
    """st{.volatile | .relaxed.scope | .release.scope}{.space}{.vN}.type [a], b: store one value or a vector of 2
    or 4 (a tuple). `sem='release'` with a `scope` makes it a release: the thread's earlier accesses are ordered
    before it (the writing side of a flag that another CTA acquires)."""

    ptx = "st{.<volatile>}{.<sem>}{.<scope>}{.<space>}{.<vec>}.<type>"
    quals = {"volatile": Flag("volatile"), "sem": ST_SEM, "scope": LDST_SCOPE,
             "space": Qual(*(s for s in SPACES if s not in ("param", "const")), None, default="global",
                           aliases={"": None}, none_token="generic"),
             "vec": Derived(None, "v2", "v4"), "type": TypeQual(*LDST_TYPES, spell=_ldst_type)}
    operands = (Slot("addr", Address("space")), Slot("value", Vector("type")))
    args = ("type", "addr", "value")
    excludes = _ldst_rules("value") + (({"volatile": True, "space": "local"}, "st.volatile takes no .local"),) \
        + _ordered_rules("st")
    raises = (({"value": 4, "type": WIDE}, Req((8, 8), SM100A)),)

    @property
    def vec(self):
        return VEC[len(self.value)] if getattr(self, "value", None) else None

    def effects(self):
        return (fx.Access(self.addr, self.space or "", self.type.nbytes * len(self.value), write=True,
                          read=False),) + _order(self.sem, self.scope)


# atom / red: the types each operation takes (measured with ptxas through nvJitLink).
ATOM_OPS = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"), "min": ("u32", "s32", "u64", "s64"),
    "max": ("u32", "s32", "u64", "s64"), "inc": ("u32",), "dec": ("u32",), "and": ("b32", "b64"),
    "or": ("b32", "b64"), "xor": ("b32", "b64"), "exch": ("b32", "b64"), "cas": ("b16", "b32", "b64"),
}
ATOM_TYPES = tuple(dict.fromkeys(t for ts in ATOM_OPS.values() for t in ts))
ATOM_SEM = Qual(None, "relaxed", "acquire", "release", "acq_rel")
ATOM_SCOPE = Qual(None, "cta", "cluster", "gpu", "sys")
ATOM_SPACE = Qual("global", "shared", "shared::cta", "shared::cluster", None, default="global", aliases={"": None},
                  none_token="generic")


def _atomic_excludes(ops) -> tuple:
    return tuple(({"op": o, "type": tuple(t for t in ATOM_TYPES if t not in ok)}, f".{o} takes .{'/.'.join(ok)}")
                 for o, ok in ops.items()) + (
        ({"noftz": True, "op": tuple(o for o in ops if o != "add")}, ".noftz is for .add"),
        ({"noftz": True, "type": ("u32", "s32", "u64", "f64", "b16", "b32", "b64", "s64")},
         ".noftz is for f16, bf16 and f32 additions"))


class Atom(Op):
    """atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}: d = the old value of [a], which becomes op(old, b)
    atomically (cas: c where old == b)."""

    ptx = "atom{.<sem>}{.<scope>}{.<space>}.<op>{.<noftz>}.<type>"
    quals = {"sem": ATOM_SEM, "scope": ATOM_SCOPE, "space": ATOM_SPACE, "op": Qual(*ATOM_OPS), "noftz": Flag("noftz"),
             "type": TypeQual(*ATOM_TYPES, infer=("value",))}
    operands = (Slot("d", Dst("type")), Slot("addr", Address("space")), Slot("value", Value("type")),
                Slot("c", Value("type"), optional=True))
    args = ("op", "type", "addr", "value")
    excludes = _atomic_excludes(ATOM_OPS) + (({"op": "cas", "c": None}, "atom.cas needs c= (the new value)"),
                                             ({"op": ("add", "min", "max", "inc", "dec"), "c": ("imm", "reg")},
                                              "only atom.cas takes c="),
                                             ({"op": ("and", "or", "xor", "exch"), "c": "imm"}, "only atom.cas takes c="),
                                             ({"op": ("and", "or", "xor", "exch"), "c": "reg", "type": "b64"},
                                              "only atom.cas takes c="))
    # ptxas also takes a .b32 register after the value of and/or/xor/exch .b32 (it reads it as something else); it
    # is the new value only for cas.
    refuses = (({"op": ("and", "or", "xor", "exch"), "c": "reg", "type": "b32"}, "only atom.cas takes c="),)
    raises = (({"noftz": True, "type": "f32"}, Req((9, 4))),)

    def settle(self):
        if self.op == "add" and self.type.name in ("f16", "bf16"):
            self.noftz = True                      # ptxas takes half additions only with .noftz

    def effects(self):
        return (fx.Access(self.addr, self.space or "", self.type.nbytes, write=True), fx.Opaque(self.d)) + \
            _order(self.sem, self.scope)


class Red(Op):
    """red{.sem}{.scope}{.space}.op.type [a], b: [a] = op([a], b) atomically, no result."""

    ptx = "red{.<sem>}{.<scope>}{.<space>}.<op>{.<noftz>}.<type>"
    quals = {"sem": Qual(None, "relaxed", "release"), "scope": ATOM_SCOPE, "space": ATOM_SPACE,
             "op": Qual(*(o for o in ATOM_OPS if o not in ("exch", "cas"))), "noftz": Flag("noftz"),
             "type": TypeQual(*ATOM_TYPES, infer=("value",))}
    operands = (Slot("addr", Address("space")), Slot("value", Value("type")))
    args = ("op", "type", "addr", "value")
    excludes = _atomic_excludes({o: t for o, t in ATOM_OPS.items() if o not in ("exch", "cas")})
    raises = (({"noftz": True, "type": "f32"}, Req((9, 4))),)

    settle = Atom.settle

    def effects(self):
        return (fx.Access(self.addr, self.space or "", self.type.nbytes, write=True),) + _order(self.sem, self.scope)


# ----------------------------------------------------------------------------------------- control


class BarSync(Op):
    """bar.sync a{, b}: a CTA barrier (`barrier` 0..15); every thread of the CTA (or `count` threads, a
    multiple of 32) arrives and waits. Warps execute it whole."""

    ptx = "bar.sync"
    operands = (Slot("barrier", Value(u32, lo=0, hi=15), default=0),
                Slot("count", Value(u32, lo=32, hi=1024), optional=True))

    def check(self):
        c = self.count
        if c is not None and hasattr(c, "value") and c.value % 32:
            raise DSLError(f"bar.sync count={c.value}: expected a positive multiple of 32")

    def effects(self):
        return (fx.Barrier("cta", self.count), fx.Collective("warp"))


class Bra(Op):
    """bra{.uni} label."""

    ptx = "bra{.<uni>}"
    quals = {"uni": Flag("uni")}
    operands = (Slot("target", LabelRef()),)

    def effects(self):
        return (fx.Jump(self.target),)


class Ret(Op):
    """ret: return from the kernel."""

    ptx = "ret"

    def effects(self):
        return (fx.Exit(),)


class Exit(Op):
    """exit: end the thread."""

    ptx = "exit"

    def effects(self):
        return (fx.Exit(),)


class Trap(Op):
    """trap: abort the kernel (the host sees an illegal-instruction / launch-failed error)."""

    ptx = "trap"

    def effects(self):
        return (fx.Trap(),)


class Membar(Op):
    """membar.level: order this thread's memory accesses (cta, gl, sys)."""

    ptx = "membar.<level>"
    quals = {"level": Qual("cta", "gl", "sys", default="gl")}
    args = ("level",)

    def effects(self):
        return (fx.Order("acq_rel", {"cta": "cta", "gl": "gpu", "sys": "sys"}[self.level], fence=True),)

