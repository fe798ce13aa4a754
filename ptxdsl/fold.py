"""Constant folding with PTX's semantics: the one evaluator that the .ptxd lowering (constant expressions),
the verifier's register facts and the ring run share.

Values are Python ints (and bools for predicates). `binary`/`unary`/`compare` work on unbounded ints as C
does (division and remainder truncate toward zero); `evaluate` runs a `Compute` effect at its registers'
widths: register values are stored unsigned (masked to the width) and read signed where the type is.
"""
from __future__ import annotations

import operator

from .errors import DSLError
from .semantics import INTEGER, shl, shr

MAX_SHIFT = 64

BINARY = INTEGER            # the integer operations: one definition (ptxdsl.semantics) for folding and lanes
COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
           "ge": operator.ge, "lo": operator.lt, "ls": operator.le, "hi": operator.gt, "hs": operator.ge}
SYMBOL = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shl", ">>": "shr", "&": "and",
          "|": "or", "^": "xor", "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def binary(fn: str, a: int, b: int) -> int:
    """`a fn b` on integers (div/rem truncate toward zero); DSLError for a division by zero or a shift
    outside 0..64."""
    if fn in ("div", "rem") and b == 0:
        raise DSLError(f"{a} {fn} {b}: division by zero")
    if fn in ("shl", "shr") and not 0 <= b <= MAX_SHIFT:
        raise DSLError(f"shift by {b}: expected a count in 0..{MAX_SHIFT}")
    return BINARY[fn](a, b)


def compare(cmp: str, a, b) -> bool:
    return COMPARE[cmp](a, b)


def mask(v: int, bits: int) -> int:
    """v as an unsigned `bits`-bit register holds it."""
    return v & ((1 << bits) - 1)


def signed(v: int, bits: int) -> int:
    """An unsigned `bits`-bit value read as two's complement."""
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def evaluate(effect, value_of):
    """The value a Compute effect writes, or None when it depends on something unknown (value_of(operand)
    gives an operand's int, bool or None) or is not an integer computation."""
    t = effect.type
    if t is None or t.kind == "f":
        return None
    args = [value_of(a) for a in effect.args]
    fn = effect.fn
    if fn == "mov":
        return args[0]
    if fn == "selp":
        c = args[2]
        return None if c is None else (args[0] if c else args[1])
    if any(x is None or isinstance(x, bool) and t.kind != "pred" for x in args):
        return None
    if t.kind == "pred":
        if fn in ("and", "or", "xor"):
            return {"and": args[0] and args[1], "or": args[0] or args[1], "xor": args[0] != args[1]}[fn]
        if fn == "not":
            return not args[0]
        return None
    bits = t.bits
    if t.kind == "s":
        args = [signed(mask(x, bits), bits) if not isinstance(x, bool) else x for x in args]
    if fn.startswith("setp."):
        cmp = fn[5:]
        return compare(cmp, *args) if cmp in COMPARE else None
    if fn == "cvt":
        if effect.mode.startswith(("f", "bf")):
            return None
        src_bits, src_signed = int(effect.mode[1:]), effect.mode[0] == "s"
        x = mask(args[0], src_bits)
        return mask(signed(x, src_bits) if src_signed else x, bits)
    if fn == "cvta":
        return None
    mode = effect.mode
    out_bits = bits * 2 if mode == "wide" else bits
    try:
        if fn == "mad":
            if mode not in ("lo", "wide"):
                return None
            return mask(args[0] * args[1] + args[2], out_bits)
        if fn in BINARY:
            if fn == "mul" and mode not in (None, "lo", "wide"):
                return None
            if fn == "shl":
                return mask(shl(args[0], args[1], bits), bits)
            if fn == "shr":
                got = shr(args[0], args[1], bits)
                return None if got is None else mask(got, bits)
            return mask(binary(fn, args[0], args[1]), out_bits)
        if fn == "not":
            return mask(~args[0], bits)
        if fn == "neg":
            return mask(-args[0], bits)
        if fn == "abs":
            return mask(abs(args[0]), bits)
    except DSLError:
        return None
    return None
