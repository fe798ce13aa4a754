"""Tensor-map descriptions (CUtensorMap fields) and their validation, in pure Python.

A `TensorMapSpec` holds every field that cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col take.
Dimension lists are ordered **innermost first** (dimension 0 is contiguous), exactly as the driver
and PTX tensor coordinates order them; `TensorMapSpec.tiled_for(shape=...)` accepts numpy order
(outermost first) and reverses it. `validate()` checks the driver's rules (cuda.h's, corrected by
what the driver was seen to enforce) before the driver sees them and raises TensorMapError naming
the field and the rule. The runtime encodes a valid spec
(ptxdsl.runtime.tensormap); the CPU model (ptxdsl.reference) reads the same spec.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field, replace
from numbers import Integral

from .errors import PtxdslError, SourceLoc, TensorMapError
from .types import ALL_TYPES, ScalarType, scalar_type

# On the H200 a traversal stride of 2 on dimension 0 still wrote every element (and the mbarrier
# received box[0] elements' bytes), as the driver documents for interleave NONE ("elementStrides[0]
# is ignored"). Setting this True would apply it like the other dimensions.
INNER_ELEMENT_STRIDE_APPLIES = False

# CUtensorMapDataType: our name -> (enum value, element bytes)
DTYPES: dict[str, tuple[int, int]] = {
    "u8": (0, 1), "u16": (1, 2), "u32": (2, 4), "s32": (3, 4), "u64": (4, 8), "s64": (5, 8),
    "f16": (6, 2), "f32": (7, 4), "f64": (8, 8), "bf16": (9, 2), "f32_ftz": (10, 4),
    "tf32": (11, 4), "tf32_ftz": (12, 4),
}
INTERLEAVE = {"none": 0, "16B": 1, "32B": 2}
SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3,
           "128B_atom_32B": 4, "128B_atom_32B_flip_8B": 5, "128B_atom_64B": 6}
SWIZZLE_SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128,
                "128B_atom_32B": 128, "128B_atom_32B_flip_8B": 128, "128B_atom_64B": 128}
L2_PROMOTION = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
OOB_FILL = {"zero": 0, "nan": 1}   # NONE, NAN_REQUEST_ZERO_FMA
KINDS = ("tiled", "im2col")
FLOAT_DTYPES = frozenset({"f16", "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"})

# Limits of cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col (cuda.h, CUDA 13.0).
RANKS = {"tiled": (1, 5), "im2col": (3, 5)}
MAX_DIM = 2**32
MAX_STRIDE = 2**40                  # strides are < 2^40
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
MAX_CHANNELS_PER_PIXEL = 256
MAX_PIXELS_PER_COLUMN = 1024
CORNER_RANGE = {3: (-32768, 32767), 4: (-128, 127), 5: (-16, 15)}   # im2col rank -> offset range
MAX_BOX_BYTES = 228 * 1024          # largest box the driver encodes (measured: H200, driver 580; not in cuda.h)
MAX_IM2COL_SPATIAL = 2**31 - 1      # im2col W/H/D extents (measured: H200, driver 580; not in cuda.h)
TENSORMAP_MIN_CC = (9, 0)
SWIZZLE_MIN_CC = {"128B_atom_32B": (10, 0), "128B_atom_32B_flip_8B": (10, 0), "128B_atom_64B": (10, 0)}
# Rules that validate() enforces but the driver (580, on an H200) lets through: documented ones, and im2col pixel
# dimensions of 2^31 or more, which the driver accepts only where dims + upper_corner wraps around in 32 bits
# (2^32-1 with upper_corner 2: seen on the H200).
STRICTER_THAN_DRIVER = frozenset({"tensormap.stride-overlap", "tensormap.interleave-swizzle",
                                  "tensormap.im2col-spatial-range"})

_SCALAR_TO_DTYPE = {"u8": "u8", "b8": "u8", "s8": "u8", "u16": "u16", "b16": "u16", "s16": "u16",
                    "u32": "u32", "b32": "u32", "s32": "s32", "u64": "u64", "b64": "u64", "s64": "s64",
                    "f16": "f16", "f32": "f32", "f64": "f64", "bf16": "bf16"}

# Array element types (numpy, ml_dtypes, torch and DLPack spell them alike) -> tensor-map data type.
ARRAY_DTYPES: dict[str, str] = {
    "uint8": "u8", "int8": "u8", "uint16": "u16", "int16": "u16", "uint32": "u32", "int32": "s32",
    "uint64": "u64", "int64": "s64", "float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
}
# The driver's list (CUtensorMapDataType, cuda-bindings 13.x) has no 8-, 6- or 4-bit float and no complex type,
# and its packed 16U4/16U6 types are Blackwell's sub-byte layouts. These formats hold one element per byte (or
# per 2/4 bytes) in numpy, ml_dtypes and torch, so a map moves them as the unsigned integer of their width, as
# CUTLASS and Triton encode fp8: the bytes arrive unchanged, and an out-of-bounds fill is zero bytes (never NaN).
MOVED_AS_BYTES: dict[str, str] = {
    **{name: "u8" for name in (
        "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
        "float8_e5m2fnuz", "float8_e5m3fnu", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
        "float4_e2m1fn_x2", "int1", "int2", "int4", "uint1", "uint2", "uint4")},
    "complex32": "u32", "bcomplex32": "u32",
}
_ELEMENT_RULE = ("a tensor-map element type is one of " + ", ".join(DTYPES) + ", an integer, float or bfloat16 "
                 "array type, or an fp8/fp6/fp4/int4/complex32 type (moved as bytes)")


def dtype_name(dtype, loc: SourceLoc | None = None) -> str:
    """Map a tensor-map dtype name, ScalarType, PTX name, or an array element type (numpy / ml_dtypes dtype or
    name, torch dtype: fp8 and the other narrow formats included) to a DTYPES key."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    if isinstance(dtype, ScalarType) or isinstance(dtype, str) and dtype.lstrip(".") in ALL_TYPES:
        t = scalar_type(dtype)
        if t.name not in _SCALAR_TO_DTYPE:
            raise TensorMapError(f"dtype={t.name!r} breaks '{_ELEMENT_RULE}'", loc=loc, rule="tensormap.dtype")
        return _SCALAR_TO_DTYPE[t.name]
    name = _element_name(dtype)
    if name in ARRAY_DTYPES:
        return ARRAY_DTYPES[name]
    if name in MOVED_AS_BYTES:
        return MOVED_AS_BYTES[name]
    if isinstance(dtype, str) and not _numpy_name(dtype):    # no type of any kind by that name: the error lists
        try:                                                   # the PTX names
            scalar_type(dtype)
        except PtxdslError as e:
            raise e.at(loc)
    shown = repr(name) if name is not None else _brief(dtype)
    raise TensorMapError(f"dtype={shown} breaks '{_ELEMENT_RULE}'", loc=loc, rule="tensormap.dtype")


def _numpy_name(name: str) -> bool:
    """Whether numpy knows an element type by this name (bool, complex64, ...: a type a tensor map has not)."""
    import numpy as np

    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def _element_name(dtype) -> str | None:
    """The array element type name of a dtype-like ('float8_e4m3fn' for np.dtype(ml_dtypes.float8_e4m3fn), a
    torch.float8_e4m3fn or that string); None for a ScalarType or anything numpy cannot read."""
    if dtype is None or isinstance(dtype, ScalarType):
        return None
    if isinstance(dtype, str):
        return dtype.removeprefix("torch.")
    if type(dtype).__module__.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    try:
        import numpy as np

        return np.dtype(dtype).name
    except Exception:
        return None


def _broken(spec: "TensorMapSpec", what: str, shown: str, rule: str, text: str) -> TensorMapError:
    """The error for one broken rule; an indexed field (`box[1]`) says its lists are innermost-first."""
    where = " (lists are innermost first)" if "[" in what else ""
    return TensorMapError(f"{what}={shown} breaks '{text}'{where}", loc=spec.loc, rule=f"tensormap.{rule}")


def _is_int(v) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _each_in(spec, name, values, lo, hi, rule, text) -> None:
    """Every entry of a list field is an integer in lo..hi."""
    for i, v in enumerate(values):
        if not _is_int(v) or not lo <= v <= hi:
            raise _broken(spec, f"{name}[{i}]", repr(v), rule, text)


def _check_enums(spec) -> None:
    for name, allowed in (("kind", KINDS), ("dtype", DTYPES), ("interleave", INTERLEAVE),
                          ("swizzle", SWIZZLE), ("l2_promotion", L2_PROMOTION), ("oob_fill", OOB_FILL)):
        value = getattr(spec, name)
        if not isinstance(value, str) or value not in allowed:
            raise _broken(spec, name, repr(value), name.replace("_", "-"),
                          f"{name} is one of {', '.join(allowed)}")


def _check_rank(spec) -> None:
    lo, hi = RANKS[spec.kind]
    if not lo <= spec.rank <= hi:
        raise _broken(spec, "rank", f"{spec.rank} (len(dims))", "rank", f"a {spec.kind} map has rank {lo}..{hi}")
    if spec.interleave != "none" and spec.rank < 3:
        raise _broken(spec, "rank", f"{spec.rank} (len(dims))", "interleave-rank",
                      f"an interleaved ({spec.interleave}) map has rank >= 3")


def _check_dims(spec) -> None:
    _each_in(spec, "dims", spec.dims, 1, MAX_DIM, "dim-range", "each global dimension is 1..2^32")


def _check_address(spec) -> None:
    a, align = spec.global_address, spec.address_align
    if not _is_int(a) or not 0 <= a < 2**64:
        raise _broken(spec, "global_address", repr(a), "address-range", "global_address is a 64-bit device address")
    if a % align:
        raise _broken(spec, "global_address", hex(a), "address-align",
                      f"global_address is {align}-byte aligned" + (" with interleave 32B" if align == 32 else ""))


def _check_strides(spec) -> None:
    if len(spec.strides) != spec.rank - 1:
        raise _broken(spec, "len(strides)", str(len(spec.strides)), "stride-count",
                      f"strides has rank-1 = {spec.rank - 1} entries (dimensions 1..rank-1, bytes)")
    _each_in(spec, "strides", spec.strides, 0, MAX_STRIDE - 1, "stride-range", "each global stride is < 2^40 bytes")
    align = spec.address_align
    for i, st in enumerate(spec.strides):
        if st % align:
            raise _broken(spec, f"strides[{i}]", repr(st), "stride-align",
                          f"each global stride is a multiple of {align} bytes"
                          + (" with interleave 32B" if align == 32 else ""))
    span = spec.dims[0] * spec.elem_bytes
    for i, st in enumerate(spec.strides):
        if st < span:
            below = "dims[0]*elem_bytes" if i == 0 else f"strides[{i - 1}]*dims[{i}]"
            raise _broken(spec, f"strides[{i}]", repr(st), "stride-overlap",
                          f"strides[{i}] >= {below} = {span} (dimensions do not overlap)")
        span = st * spec.dims[i + 1]


def _check_box(spec) -> None:
    if len(spec.box) != spec.rank:
        raise _broken(spec, "len(box)", str(len(spec.box)), "box-count", f"box has rank = {spec.rank} entries")
    _each_in(spec, "box", spec.box, 1, MAX_BOX, "box-range", f"each box dimension is 1..{MAX_BOX}")
    # cuda.h states this for interleave none only; the driver (580) enforces it for every interleave.
    if spec.box[0] * spec.elem_bytes % 16:
        raise _broken(spec, "box[0]", f"{spec.box[0]} ({spec.box[0] * spec.elem_bytes} bytes)", "box-inner-bytes",
                      "box[0]*elem_bytes is a multiple of 16 bytes")


def _im2col_pixel_dims(spec) -> range:
    """Indices of an im2col map's pixel dimensions (W, H, D): after the channels, or from dimension 0 in an
    interleaved map, as the driver counts them."""
    first = 0 if spec.interleave != "none" else 1
    return range(first, first + spec.rank - 2)


def _check_im2col(spec) -> None:
    n = spec.rank - 2
    pixels = _im2col_pixel_dims(spec)
    for i in pixels:
        if spec.dims[i] > MAX_IM2COL_SPATIAL:
            raise _broken(spec, f"dims[{i}]", repr(spec.dims[i]), "im2col-spatial-range",
                          f"an im2col map's pixel dimensions (dims[{pixels.start}..{pixels.stop - 1}] with "
                          f"interleave {spec.interleave}) are 1..2^31-1")
    lo, hi = CORNER_RANGE[spec.rank]
    for name in ("lower_corner", "upper_corner"):
        corner = getattr(spec, name)
        if len(corner) != n:
            raise _broken(spec, f"len({name})", str(len(corner)), "corner-count",
                          f"{name} has rank-2 = {n} entries (W first)")
        _each_in(spec, name, corner, lo, hi, "corner-range", f"a rank-{spec.rank} im2col corner offset is {lo}..{hi}")
    for i, d in enumerate(pixels):             # the pixel dimensions as the driver counts them (see above)
        if spec.dims[d] + spec.upper_corner[i] > MAX_IM2COL_SPATIAL:
            raise _broken(spec, f"upper_corner[{i}]", f"{spec.upper_corner[i]} (dims[{d}] + upper_corner[{i}] = "
                          f"{spec.dims[d] + spec.upper_corner[i]})", "im2col-extent-range",
                          f"dims[{d}] + upper_corner[{i}] <= 2^31-1 (the driver adds them in signed 32 bits)")
        extent = spec.dims[d] + spec.upper_corner[i] - spec.lower_corner[i]
        if extent < 1:
            raise _broken(spec, f"upper_corner[{i}]", f"{spec.upper_corner[i]} (extent {extent})", "im2col-area",
                          f"dims[{d}] + upper_corner[{i}] - lower_corner[{i}] >= 1 (a non-zero pixel box area)")
    for name, top in (("channels_per_pixel", MAX_CHANNELS_PER_PIXEL), ("pixels_per_column", MAX_PIXELS_PER_COLUMN)):
        v = getattr(spec, name)
        if not _is_int(v) or not 1 <= v <= top:
            raise _broken(spec, name, repr(v), name.replace("_", "-"), f"{name} is 1..{top}")
    if spec.channels_per_pixel * spec.elem_bytes % 16:
        raise _broken(spec, "channels_per_pixel",
                      f"{spec.channels_per_pixel} ({spec.channels_per_pixel * spec.elem_bytes} bytes)",
                      "box-inner-bytes", "channels_per_pixel*elem_bytes is a multiple of 16 bytes")


def _check_inner_box(spec) -> None:
    (_check_box if spec.kind == "tiled" else _check_im2col)(spec)


def _check_swizzle(spec) -> None:
    span = SWIZZLE_SPAN[spec.swizzle]
    if spec.interleave == "none" and span and spec.inner_box_bytes > span:
        what = "box[0]" if spec.kind == "tiled" else "channels_per_pixel"
        raise _broken(spec, what, f"{spec.inner_box_bytes // spec.elem_bytes} ({spec.inner_box_bytes} bytes)",
                      "swizzle-span", f"with swizzle {spec.swizzle}, the inner box is <= {span} bytes")
    if spec.interleave == "32B" and spec.swizzle != "32B":
        raise _broken(spec, "swizzle", repr(spec.swizzle), "interleave-swizzle", "interleave 32B requires swizzle 32B")


def _check_element_strides(spec) -> None:
    if spec.element_strides and len(spec.element_strides) != spec.rank:
        raise _broken(spec, "len(element_strides)", str(len(spec.element_strides)), "element-stride-count",
                      f"element_strides is empty or has rank = {spec.rank} entries")
    _each_in(spec, "element_strides", spec.element_strides, 1, MAX_ELEMENT_STRIDE, "element-stride-range",
             f"each element stride is 1..{MAX_ELEMENT_STRIDE}")


def _check_box_bytes(spec) -> None:
    if spec.kind == "tiled":
        n = spec.elem_bytes
        for b, e in zip(spec.box, spec.estrides):
            n *= b // e
        what, shown = "box", repr(spec.box)
        counted = ", counting box[i]//element_strides[i] elements per dimension"
    else:
        n = spec.box_bytes
        what, shown = "channels_per_pixel*pixels_per_column", f"{spec.channels_per_pixel}*{spec.pixels_per_column}"
        counted = ""
    if n > MAX_BOX_BYTES:
        raise _broken(spec, what, f"{shown} ({n} bytes)", "box-bytes",
                      f"one box is at most {MAX_BOX_BYTES} bytes{counted}")


def _check_oob_fill(spec) -> None:
    if spec.oob_fill == "nan" and spec.dtype not in FLOAT_DTYPES:
        raise _broken(spec, "oob_fill", repr(spec.oob_fill), "oob-fill-float",
                      f"oob_fill 'nan' needs a floating-point dtype, not {spec.dtype}")


# The order in which validate() checks; the first broken rule is the one reported.
_CHECKS = (_check_enums, _check_rank, _check_dims, _check_address, _check_strides, _check_inner_box,
           _check_swizzle, _check_element_strides, _check_box_bytes, _check_oob_fill)


def c_strides(shape, elem_bytes: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array, numpy order."""
    out, step = [], elem_bytes
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _outer_strides(shape, strides, elem_bytes: int, loc) -> tuple[int, ...]:
    """numpy-order byte strides (one per dimension) -> the driver's rank-1 strides, innermost first."""
    strides = c_strides(shape, elem_bytes) if strides is None else _ints("strides", strides, loc)
    if len(strides) != len(shape):
        raise TensorMapError(f"len(strides)={len(strides)} breaks 'strides has one entry per shape dimension "
                             f"({len(shape)}), numpy order, bytes'", loc=loc, rule="tensormap.stride-count")
    if strides and strides[-1] != elem_bytes:
        raise TensorMapError(f"strides[-1]={strides[-1]} breaks 'the innermost dimension is contiguous "
                             f"(stride = {elem_bytes} bytes)'", loc=loc, rule="tensormap.inner-stride")
    return tuple(reversed(strides[:-1]))


def _reversed_or_empty(values, name="", loc=None) -> tuple[int, ...]:
    return tuple(reversed(_ints(name, values, loc))) if values is not None else ()


def _int(name: str, v, loc=None) -> int:
    """A field's integer (numpy integers included), as a Python int; TensorMapError for anything else."""
    if isinstance(v, bool) or not isinstance(v, Integral) and not hasattr(v, "__index__"):
        raise TensorMapError(f"{name}={_brief(v)} breaks 'an integer'", loc=loc, rule="tensormap.type")
    try:
        return operator.index(v)
    except TypeError:                           # an object with __index__ that is no integer (a numpy array)
        raise TensorMapError(f"{name}={_brief(v)} breaks 'an integer'", loc=loc, rule="tensormap.type") from None


def _as_int(v):
    """`v` as a Python int when it is an integer of any kind (numpy's included), else unchanged."""
    return operator.index(v) if not isinstance(v, (bool, int)) and isinstance(v, Integral) else v


def _ints(name: str, values, loc=None) -> tuple[int, ...]:
    """A list field as a tuple of Python ints; TensorMapError for a non-sequence or a non-integer entry."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") and not hasattr(values, "__len__"):
        raise TensorMapError(f"{name}={values!r} breaks 'a sequence of integers'", loc=loc, rule="tensormap.type")
    try:
        items = tuple(values)
    except TypeError:                           # iterable in name only (a 0-d numpy array)
        raise TensorMapError(f"{name}={_brief(values)} breaks 'a sequence of integers'", loc=loc,
                             rule="tensormap.type") from None
    return tuple(_int(f"{name}[{i}]", v, loc) for i, v in enumerate(items))


def _array_layout(arr, dtype=None):
    """(shape, dtype, byte strides, device address) of an array, numpy order (ptxdsl.runtime.arrays reads it: a
    DeviceArray, torch tensor, __dlpack__ or __cuda_array_interface__ object, or numpy array); TensorMapError
    naming what is missing when `arr` is not one. `dtype` overrides the array's own element type."""
    from .runtime.arrays import NotAnArray, view

    loc = SourceLoc.caller()
    try:
        v = view(arr)
    except NotAnArray as e:
        if e.kind == "host":
            raise TensorMapError(f"arr={_brief_array(arr)} breaks 'a tensor map's {e.rule.removeprefix('an ')}'",
                                 loc=loc, rule="tensormap.host-array") from None
        raise TensorMapError(f"arr={_brief(arr)} breaks '{e.rule}'", loc=loc, rule="tensormap.array") from None
    if v.source == "numpy" and not v.address:
        from .runtime.device import host_device

        cpu = host_device()             # the interpreter is the device: host arrays are its global memory
        if cpu is not None:
            v.address = cpu.map_host(arr)
    if dtype is None:
        if v.dtype is None:
            raise TensorMapError(f"arr={_brief(arr)} breaks 'a tensor map's array names its element type': "
                                 f"{v.dtype_note}", loc=loc, rule="tensormap.dtype")
        dtype = v.dtype
    elif DTYPES[dtype_name(dtype, loc)][1] != v.itemsize:
        raise TensorMapError(f"dtype={dtype!r} breaks 'dtype= has the array's element size ({v.itemsize} bytes)'",
                             loc=loc, rule="tensormap.dtype")
    if v.itemsize == 0:
        raise TensorMapError(f"dtype={v.dtype!r} breaks 'a tensor map's elements are whole bytes (view a packed "
                             f"sub-byte array as uint8)'", loc=loc, rule="tensormap.dtype")
    return v.shape, dtype, v.strides, v.address


def _brief(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _brief_array(v) -> str:
    """'<tensor on cpu>' for a torch-like tensor, else the short repr."""
    if callable(getattr(v, "data_ptr", None)):
        return f"<tensor on {getattr(v, 'device', 'cpu')}>"
    return _brief(v)


@dataclass(frozen=True)
class TensorMapSpec:
    """All fields of one CUtensorMap. Lists are innermost-first (dimension 0 = contiguous)."""

    dtype: str                          # a DTYPES key
    dims: tuple[int, ...]               # globalDim, elements per dimension
    strides: tuple[int, ...]            # globalStrides in bytes for dimensions 1..rank-1 (rank-1 entries)
    box: tuple[int, ...]                # boxDim (tiled); for im2col: (channelsPerPixel, pixelsPerColumn) live below
    element_strides: tuple[int, ...] = ()   # default: all 1
    interleave: str = "none"
    swizzle: str = "none"
    l2_promotion: str = "none"
    oob_fill: str = "zero"
    global_address: int = 0             # device pointer; 0 = not bound yet (alignment not checked)
    # im2col only
    kind: str = "tiled"                 # "tiled" | "im2col"
    lower_corner: tuple[int, ...] = ()  # pixelBoxLowerCorner (rank-2 entries, W first)
    upper_corner: tuple[int, ...] = ()  # pixelBoxUpperCorner
    channels_per_pixel: int = 0
    pixels_per_column: int = 0
    loc: SourceLoc | None = field(default=None, compare=False, repr=False)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def estrides(self) -> tuple[int, ...]:
        return self.element_strides or (1,) * self.rank

    @property
    def box_elems(self) -> tuple[int, ...]:
        """Elements a load writes per dimension: ceil(box[i] / element_strides[i]) for i > 0, and all
        box[0] elements of dimension 0 (its element stride is not applied; see INNER_ELEMENT_STRIDE_APPLIES)."""
        n = tuple(-(-b // s) for b, s in zip(self.box, self.estrides))
        return n if INNER_ELEMENT_STRIDE_APPLIES or not n else (self.box[0], *n[1:])

    @property
    def inner_box_bytes(self) -> int:
        """Bytes of the box's innermost extent (box[0], or channels_per_pixel for im2col)."""
        inner = self.box[0] if self.kind == "tiled" else self.channels_per_pixel
        return inner * self.elem_bytes

    @property
    def address_align(self) -> int:
        """Alignment the global address and strides need, in bytes."""
        return 32 if self.interleave == "32B" else 16

    @property
    def min_compute_capability(self) -> tuple[int, int]:
        """The lowest device compute capability that can encode this map."""
        return SWIZZLE_MIN_CC.get(self.swizzle, TENSORMAP_MIN_CC)

    @property
    def box_bytes(self) -> int:
        """The bytes of one box: the mbarrier transaction count of one load (swizzle padding not counted)."""
        if self.kind == "im2col":
            return self.channels_per_pixel * self.pixels_per_column * self.elem_bytes
        n = self.elem_bytes
        for e in self.box_elems:
            n *= e
        return n

    @property
    def smem_bytes(self) -> int:
        """The bytes one box occupies in shared memory: dense, dimension 0 fastest, except that under a
        swizzle mode every row (the innermost extent) takes whole swizzle spans even when it is narrower
        (measured on the H200: a 64-byte-wide box under 128B swizzle filled 128 bytes per row)."""
        shape = (self.channels_per_pixel, self.pixels_per_column) if self.kind == "im2col" else self.box_elems
        row = shape[0] * self.elem_bytes
        span = SWIZZLE_SPAN[self.swizzle]
        if span:
            row = -(-row // span) * span
        for n in shape[1:]:
            row *= n
        return row

    def bind(self, address: int) -> "TensorMapSpec":
        """The same map over another global address (an integer: a device pointer's value)."""
        address = _int("address", address, SourceLoc.caller())
        if not 0 <= address < 1 << 64:
            raise TensorMapError(f"address={address:#x} breaks 'a 64-bit device address'", loc=SourceLoc.caller(),
                                 rule="tensormap.address")
        return replace(self, global_address=address)

    def validate(self) -> "TensorMapSpec":
        """Check the cuTensorMapEncode* rules in a fixed order; the first broken one raises TensorMapError."""
        for check in _CHECKS:
            check(self)
        return self

    def __post_init__(self):
        if self.loc is None:                    # built directly: errors point at the user's constructor call
            object.__setattr__(self, "loc", SourceLoc.caller(skip=2))
        # numpy integers become Python ints; anything else stays for validate() to name with its field's rule
        for name in ("dims", "strides", "box", "element_strides", "lower_corner", "upper_corner"):
            values = getattr(self, name)
            try:
                if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                    raise TypeError
                values = tuple(values)
            except TypeError:                   # not a sequence, or iterable in name only (a 0-d numpy array)
                raise TensorMapError(f"{name}={_brief(values)} breaks 'a sequence of integers'", loc=self.loc,
                                     rule="tensormap.type") from None
            object.__setattr__(self, name, tuple(_as_int(v) for v in values))
        for name in ("global_address", "channels_per_pixel", "pixels_per_column"):
            object.__setattr__(self, name, _as_int(getattr(self, name)))

    @classmethod
    def tiled_for(cls, shape, dtype, box, *, strides=None, element_strides=None, interleave: str = "none",
                  swizzle: str = "none", l2_promotion: str = "none", oob_fill: str = "zero",
                  address: int = 0) -> "TensorMapSpec":
        """A validated tiled map; shape/box/strides(bytes)/element_strides in numpy order (outermost first)."""
        loc = SourceLoc.caller()
        name = dtype_name(dtype, loc)
        shape = _ints("shape", shape, loc)
        spec = cls(dtype=name, dims=tuple(reversed(shape)),
                   strides=_outer_strides(shape, strides, DTYPES[name][1], loc),
                   box=tuple(reversed(_ints("box", box, loc))),
                   element_strides=_reversed_or_empty(element_strides, "element_strides", loc),
                   interleave=interleave, swizzle=swizzle, l2_promotion=l2_promotion, oob_fill=oob_fill,
                   global_address=address, loc=loc)
        return spec.validate()

    @classmethod
    def im2col_for(cls, shape, dtype, *, channels_per_pixel: int, pixels_per_column: int, lower_corner,
                   upper_corner, strides=None, element_strides=None, interleave: str = "none",
                   swizzle: str = "none", l2_promotion: str = "none", oob_fill: str = "zero",
                   address: int = 0) -> "TensorMapSpec":
        """A validated im2col map over an N[D][H]WC tensor; shape/strides numpy order, corners (D,H,W) order."""
        loc = SourceLoc.caller()
        name = dtype_name(dtype, loc)
        shape = _ints("shape", shape, loc)
        spec = cls(dtype=name, dims=tuple(reversed(shape)),
                   strides=_outer_strides(shape, strides, DTYPES[name][1], loc), box=(),
                   element_strides=_reversed_or_empty(element_strides, "element_strides", loc), interleave=interleave,
                   swizzle=swizzle, l2_promotion=l2_promotion, oob_fill=oob_fill, global_address=address,
                   kind="im2col", lower_corner=_reversed_or_empty(lower_corner, "lower_corner", loc),
                   upper_corner=_reversed_or_empty(upper_corner, "upper_corner", loc),
                   channels_per_pixel=channels_per_pixel, pixels_per_column=pixels_per_column, loc=loc)
        return spec.validate()

    @classmethod
    def from_array(cls, arr, box, *, dtype=None, **kw) -> "TensorMapSpec":
        """A validated tiled map over an array, read in place (no copy): a DeviceArray, a torch tensor, any
        `__dlpack__` object (CuPy, JAX, ...), a `__cuda_array_interface__` object, or a numpy array (host: the
        map is unbound, address 0). `box` is in numpy order, like the shape. fp8 and the other narrow types move
        as bytes (MOVED_AS_BYTES); `dtype=` names the element type where the array cannot (a '<V2' typestr)."""
        shape, dtype, strides, address = _array_layout(arr, dtype)
        kw.setdefault("address", address)
        kw.setdefault("strides", strides)
        return cls.tiled_for(shape, dtype, box, **kw)
