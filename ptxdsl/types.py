"""PTX scalar types and state spaces."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class ScalarType:
    """A PTX fundamental type such as .u32 or .bf16 (`kind` is b/u/s/f/pred)."""

    name: str
    bits: int
    kind: str

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ptxdsl.{self.name}"

    @cached_property
    def ptx(self) -> str:
        return "." + self.name

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @cached_property
    def reg_bits(self) -> int:
        """Width of the register class that holds this type (8-bit values live in 16-bit registers)."""
        if self.kind == "pred":
            return 1
        return max(16, self.bits)

    @cached_property
    def reg_class(self) -> str:
        """The register class a value of this type lives in, named as nvcc names it: p (.pred), rs (16-bit,
        halves included), r (32-bit integers), rd (64-bit integers), f (.f32), fd (.f64)."""
        if self.kind == "pred":
            return "p"
        if self.kind == "f" and self.bits >= 32:
            return "f" if self.bits == 32 else "fd"
        return {16: "rs", 32: "r", 64: "rd"}[self.reg_bits]


pred = ScalarType("pred", 1, "pred")
b8, b16, b32, b64 = (ScalarType(f"b{n}", n, "b") for n in (8, 16, 32, 64))
u8, u16, u32, u64 = (ScalarType(f"u{n}", n, "u") for n in (8, 16, 32, 64))
s8, s16, s32, s64 = (ScalarType(f"s{n}", n, "s") for n in (8, 16, 32, 64))
f16 = ScalarType("f16", 16, "f")
bf16 = ScalarType("bf16", 16, "f")
f32 = ScalarType("f32", 32, "f")
f64 = ScalarType("f64", 64, "f")

ALL_TYPES: dict[str, ScalarType] = {
    t.name: t
    for t in (pred, b8, b16, b32, b64, u8, u16, u32, u64, s8, s16, s32, s64, f16, bf16, f32, f64)
}

# Register classes in declaration order: class -> the type PTX declares them with.
REG_CLASSES: dict[str, ScalarType] = {"p": pred, "rs": b16, "r": b32, "rd": b64, "f": f32, "fd": f64}


def scalar_type(t) -> ScalarType:
    """Accept a ScalarType, a PTX name ('u32', '.u32') or a numpy dtype."""
    if isinstance(t, ScalarType):
        return t
    from .errors import DSLError

    if t is None:                               # numpy reads None as float64: a type must be named
        raise DSLError("type=None is not a PTX scalar type; expected a name such as 'u32', a ptxdsl type such as "
                       "px.u32 or a numpy dtype", rule="type.scalar")
    if isinstance(t, str):
        name = t.lstrip(".")
        if name in ALL_TYPES:
            return ALL_TYPES[name]
        raise DSLError(f"type={t!r} is not a PTX scalar type; expected one of {', '.join(ALL_TYPES)}",
                       rule="type.scalar")
    try:
        return from_numpy(t)
    except DSLError:
        raise
    except Exception:
        raise DSLError(f"type={t!r} is not a PTX scalar type; expected a name such as 'u32', a ptxdsl type such "
                       f"as px.u32 or a numpy dtype", rule="type.scalar") from None


def from_numpy(dtype) -> ScalarType:
    """The PTX type of a numpy dtype (bf16 via ml_dtypes)."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return bf16
    table = {
        "uint8": u8, "uint16": u16, "uint32": u32, "uint64": u64,
        "int8": s8, "int16": s16, "int32": s32, "int64": s64,
        "float16": f16, "float32": f32, "float64": f64, "bool": pred,
    }
    if dt.name not in table:
        from .errors import DSLError

        raise DSLError(f"dtype={dt.name!r} has no PTX scalar type")
    return table[dt.name]


def to_numpy(t: ScalarType):
    """The numpy dtype of a PTX type (bf16 via ml_dtypes)."""
    import numpy as np

    if t is bf16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    table = {
        "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
        "b8": "uint8", "b16": "uint16", "b32": "uint32", "b64": "uint64",
        "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
        "f16": "float16", "f32": "float32", "f64": "float64",
    }
    return np.dtype(table[t.name])


# State spaces, spelled as in PTX (without the leading dot).
GLOBAL = "global"
SHARED_CTA = "shared::cta"
SHARED_CLUSTER = "shared::cluster"
SHARED = "shared"
PARAM = "param"
LOCAL = "local"
CONST = "const"
SPACES = frozenset({GLOBAL, SHARED, SHARED_CTA, SHARED_CLUSTER, PARAM, LOCAL, CONST})
