"""What a register computation (a `Compute` effect) does, on numpy lanes: the arithmetic of every `Compute.fn`
in one place, keyed by the declared name (add, mul, mad, fma, setp.<cmp>, selp, cvt, ...).

Registers hold raw bits: a uint64 array (one entry per lane) for every non-predicate type, zero-extended from
the type's width, and a bool array for .pred. `decode` reads bits as the type's numbers (signed integers as
int64, f16/bf16/f32/f64 as numpy floats), `encode` writes numbers back as bits. `compute` is the one
entry point. Its integer operations are ptxdsl.semantics's, the definitions `ptxdsl.fold.evaluate` folds
constants with, so constant folding, the launch checks' values and the interpreter cannot disagree on one
(tests/test_interpret.py runs both on the same operands).

Floats follow IEEE round-to-nearest-even (the PTX default .rn): f32 arithmetic in float32; fma and the 16-bit
types through float64 with round-to-odd, then one rounding to the type (exact, as a fused operation must be).
Directed roundings (.rz/.rm/.rp) of float arithmetic and .approx forms other than division raise
`Unsupported` naming the operation.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .semantics import INTEGER, shl, shr

U64 = np.uint64
_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_INT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


class Unsupported(Exception):
    """A computation this module has no exact model of; the message names it."""


_MASKS = {n: U64((1 << n) - 1) for n in (1, 8, 16, 32, 64)}


def width_mask(bits: int):
    return _MASKS[bits]


def float_dtype(t):
    if t.name == "bf16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_FLOATS[t.bits])


def decode(bits, t):
    """Bits (uint64 lanes) as numbers of type t: uint64 for .u/.b, int64 for .s, numpy floats for .f*."""
    if t.kind == "pred":
        return bits
    n = t.bits
    if t.kind == "f":
        return np.asarray(bits).astype(_UINT[n]).view(float_dtype(t))
    if t.kind == "s":
        return np.asarray(bits).astype(_UINT[n]).view(_INT[n]).astype(np.int64)
    return np.asarray(bits, dtype=U64) & width_mask(n)


def encode(x, t):
    """Numbers of type t (any numpy numeric lanes) as uint64 bits."""
    if t.kind == "pred":
        return np.asarray(x, dtype=bool)
    n = t.bits
    if t.kind == "f":
        return np.asarray(x).astype(float_dtype(t)).view(_UINT[n]).astype(U64)
    x = np.asarray(x)
    if x.dtype.kind == "i":
        x = x.astype(np.int64).view(U64)
    return x.astype(U64) & width_mask(n)


# ------------------------------------------------------------------------------------------------ floats


def round_to(x64, t):
    """float64 lanes rounded once to the float type t (round to nearest even)."""
    if t.bits == 64:
        return x64
    if t.name == "bf16":
        return _odd_f32(x64).astype(ml_dtypes.bfloat16)
    return x64.astype(float_dtype(t))


def _odd_f32(x64):
    """float64 -> float32 rounded to odd: a second rounding to a narrower type is then exact."""
    r = x64.astype(np.float32)
    back = r.astype(np.float64)
    inexact = (back != x64) & np.isfinite(x64) & np.isfinite(back)
    even = (r.view(np.uint32) & 1) == 0
    fix = inexact & even
    if fix.any():
        toward = np.where(x64 > back, np.float32(np.inf), np.float32(-np.inf))
        r = np.where(fix, np.nextafter(r, toward), r)
    return r


def _fma64(a, b, c):
    """a * b + c for float64 lanes of f32/f16/bf16 values (the product is exact), rounded to odd in float64."""
    p = a * b
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    fix = (err != 0) & ((s.view(U64) & U64(1)) == 0) & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def _float_binary(fn, a, b, t, mode):
    if mode not in (None, "rn") and not (fn == "div" and mode in ("approx", "full") and t.bits == 32):
        raise Unsupported(f"{fn}.{mode}.{t.name}")
    if fn in ("min", "max"):
        return (np.fmin if fn == "min" else np.fmax)(a, b)
    if t.bits == 32 or t.bits == 64:
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[fn](a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[fn](a64, b64)
    return round_to(r, t)


# ---------------------------------------------------------------------------------------------- integers


def _mul_full(a, b, t):
    """The exact product of two integer lanes as Python ints (for .hi of 64-bit types)."""
    return [int(x) * int(y) for x, y in zip(a.tolist(), b.tolist())]


def _int_binary(fn, a, b, t, mode):
    """An integer operation on decoded lanes (int64 for signed types, uint64 otherwise), through the one
    definition in ptxdsl.semantics; the caller masks the result to the width."""
    n = t.bits
    signed = t.kind == "s"
    if fn == "mul" or fn == "mad":
        if mode in (None, "lo"):
            return INTEGER["mul"](a.astype(np.int64).view(U64), np.asarray(b).astype(np.int64).view(U64)) \
                if signed else INTEGER["mul"](a, b)
        if mode == "wide":
            return INTEGER["mul"](a, b)                  # 16/32-bit operands: exact in 64 bits
        if n <= 32:
            return INTEGER["mul"](a, b) >> n
        full = _mul_full(a, b, t)
        return np.array([(p >> 64) & ((1 << 64) - 1) for p in full], dtype=U64)
    if fn in ("div", "rem"):
        zero = b == 0
        q = INTEGER[fn](a, np.where(zero, 1, b).astype(np.asarray(b).dtype))
        if fn == "div":
            return np.where(zero, -1 if signed else ~U64(0), q)
        return np.where(zero, a, q)
    if fn in ("shl", "shr"):
        count = np.asarray(b).astype(U64) & U64(0xFFFFFFFF)
        if fn == "shl":
            return shl(a.astype(np.int64).view(U64), count, n)
        return shr(a, count.astype(np.int64) if signed else count, n)
    if fn in INTEGER:
        return INTEGER[fn](a, b)
    raise Unsupported(f"{fn}.{t.name}")


_UNORDERED = {"equ": "eq", "neu": "ne", "ltu": "lt", "leu": "le", "gtu": "gt", "geu": "ge"}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}


def _compare(cmp, a, b, t):
    if t.kind == "f":
        nan = np.isnan(a.astype(np.float64)) | np.isnan(b.astype(np.float64))
        if cmp == "num":
            return ~nan
        if cmp == "nan":
            return nan
        if cmp in _UNORDERED:
            return nan | _CMP[_UNORDERED[cmp]](a, b)
        with np.errstate(invalid="ignore"):
            return _CMP[cmp](a, b) & (~nan if cmp != "ne" else True)
    return _CMP[cmp](a, b)


def _cvt(x_bits, dst, src_name, rnd, sat):
    from .types import ALL_TYPES

    src = ALL_TYPES[src_name]
    x = decode(x_bits, src)
    if dst.kind == "f" and src.kind == "f":
        if rnd in ("rni", "rzi", "rmi", "rpi"):
            x = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](x)
        elif rnd not in (None, "rn") and dst.bits < src.bits:
            raise Unsupported(f"cvt.{rnd}.{dst.name}.{src.name}")
        out = round_to(x.astype(np.float64), dst) if dst.bits < src.bits or dst.name != src.name else x
        if sat:
            out = np.clip(np.nan_to_num(out.astype(np.float64), nan=0.0), 0.0, 1.0)
        return encode(out, dst)
    if dst.kind == "f":                                    # integer -> float
        if rnd not in (None, "rn"):
            raise Unsupported(f"cvt.{rnd}.{dst.name}.{src.name}")
        if dst.bits == 32 or dst.bits == 64:
            out = x.astype(float_dtype(dst))
        else:                       # through float64: exact for |x| < 2**53, then one rounding to the half type
            out = round_to(x.astype(np.float64), dst)
        return encode(out, dst)
    if src.kind == "f":                                    # float -> integer: rounds, saturates, NaN -> 0
        f = x.astype(np.float64)
        f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil, None: np.trunc}[rnd](f)
        lo, hi = _int_range(dst)
        f = np.where(np.isnan(f), 0.0, f)
        if dst.kind == "s":
            v = np.where(f <= lo, lo, np.where(f >= hi, hi, np.clip(f, lo, hi).astype(np.int64)))
            return encode(np.asarray(v, dtype=np.int64), dst)
        v = np.where(f <= 0, U64(0), np.where(f >= float(hi), U64(hi), np.clip(f, 0, float(hi)).astype(U64)))
        return encode(v, dst)
    if sat:
        lo, hi = _int_range(dst)
        xs = x.astype(np.int64) if src.kind == "s" else x
        if src.kind == "s":
            xs = np.clip(xs, max(lo, -(1 << 63)), min(hi, (1 << 63) - 1))
        else:
            xs = np.minimum(xs, U64(min(hi, (1 << 64) - 1)))
        return encode(xs, dst)
    return encode(x, dst)


def _int_range(t):
    if t.kind == "s":
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


# ------------------------------------------------------------------------------------------- entry point


def compute(effect, args, dst_type):
    """The bits (or predicate lanes) `effect` (a Compute) writes into a register of `dst_type`, from its
    operands' lanes `args` (bits, or bool lanes for predicates)."""
    fn, t, mode = effect.fn, effect.type, effect.mode
    if True:                    # callers silence numpy's overflow warnings (np.errstate): wrapping is the semantics
        if fn == "mov":
            return args[0]
        if fn == "selp":
            return np.where(args[2], args[0], args[1])
        if fn == "cvta":
            raise Unsupported("cvta")                    # the interpreter maps state spaces itself
        if fn == "cvt":
            return _cvt(args[0], t, mode, getattr(effect, "rnd", None), False)
        if t.kind == "pred":
            if fn == "and":
                return args[0] & args[1]
            if fn == "or":
                return args[0] | args[1]
            if fn == "xor":
                return args[0] ^ args[1]
            if fn == "not":
                return ~args[0]
            raise Unsupported(f"{fn}.pred")
        vals = [decode(a, t) for a in args]
        if fn.startswith("setp."):
            return _compare(fn[5:], vals[0], vals[1], t)
        if t.kind == "f":
            if fn == "fma":
                if mode not in (None, "rn") or t.bits == 64:
                    raise Unsupported(f"fma.{mode}.{t.name}")
                a, b, c = (v.astype(np.float64) for v in vals)
                return encode(round_to(_fma64(a, b, c), t), t)
            if fn == "neg":
                return encode(-vals[0], t)
            if fn == "abs":
                return encode(np.abs(vals[0]), t)
            if len(vals) == 2:
                return encode(_float_binary(fn, vals[0], vals[1], t, mode), t)
            raise Unsupported(f"{fn}.{t.name}")
        out_t = dst_type if mode == "wide" else t
        if fn == "mad":
            prod = _int_binary("mul", vals[0], vals[1], t, mode)
            c = decode(args[2], out_t)
            if t.kind == "s":
                prod = np.asarray(prod).astype(np.int64).view(U64)
                c = c.astype(np.int64).view(U64)
            return encode(prod + c, out_t)
        if fn == "not":
            return encode(~vals[0].astype(U64), t)
        if fn == "cnot":
            return encode((vals[0] == 0).astype(U64), t)
        if fn == "neg":
            return encode(-vals[0], t)
        if fn == "abs":
            return encode(np.abs(vals[0]), t)
        if fn == "popc":
            return np.bitwise_count(vals[0].astype(U64) & width_mask(t.bits)).astype(U64)
        if fn == "clz":
            v = vals[0].astype(U64) & width_mask(t.bits)
            return np.array([t.bits - int(x).bit_length() for x in v.tolist()], dtype=U64)
        if fn == "brev":
            v = vals[0].astype(U64) & width_mask(t.bits)
            return np.array([int(f"{int(x):0{t.bits}b}"[::-1], 2) for x in v.tolist()], dtype=U64)
        if len(vals) == 2:
            return encode(_int_binary(fn, vals[0], vals[1], t, mode), out_t)
        raise Unsupported(f"{fn}.{t.name}")
