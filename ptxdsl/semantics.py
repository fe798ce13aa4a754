"""The integer operations of PTX, keyed by the name a `Compute` effect declares (add, sub, mul, div, rem, min,
max, and, or, xor, shl, shr): one definition for every user. `ptxdsl.fold` applies them to Python ints
(constant folding, the verifier's register facts, the launch checks' run of the threads) and `ptxdsl.alu` to
numpy lanes (the interpreter), so the two cannot disagree.

Each function takes two integers or two broadcastable integer arrays (signed values for the signed types,
unsigned ones otherwise) and returns the exact result before it is cut to the register's width; the caller
masks it. Division and remainder truncate toward zero, as C and PTX do; the caller handles a zero divisor
(PTX leaves the result unspecified). This module imports nothing heavy: numpy is used only when it is given
arrays.
"""
from __future__ import annotations

import operator


def select(cond, a, b):
    """a where cond holds, else b (a plain conditional for Python values, numpy.where for arrays)."""
    if isinstance(cond, bool):
        return a if cond else b
    import numpy as np

    return np.where(cond, a, b)


def div(a, b):
    """a / b truncated toward zero."""
    q = abs(a) // abs(b)
    return select((a >= 0) == (b >= 0), q, -q)


def rem(a, b):
    """a - div(a, b) * b: the sign of a."""
    return a - div(a, b) * b


def minimum(a, b):
    return select(a <= b, a, b)


def maximum(a, b):
    return select(a >= b, a, b)


def shl(a, count, bits: int):
    """a << count at a `bits`-wide type: 0 once the count reaches the width (PTX clamps shift counts)."""
    if isinstance(count, int):
        return a << count if 0 <= count < bits else 0 * a
    import numpy as np

    return np.where(count < bits, a << np.minimum(count, 63).astype(count.dtype), 0)


def shr(a, count, bits: int):
    """a >> count at a `bits`-wide type: arithmetic for a signed (negative) a, 0 or the sign once the count
    reaches the width."""
    if isinstance(count, int):
        return a >> min(count, bits) if count >= 0 else None
    import numpy as np

    if a.dtype.kind == "i":
        return a >> np.minimum(count, 63).astype(np.int64)
    return np.where(count < bits, a >> np.minimum(count, 63).astype(a.dtype), 0).astype(a.dtype)


INTEGER = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": div, "rem": rem,
    "min": minimum, "max": maximum, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
    "shl": operator.lshift, "shr": operator.rshift,
}
