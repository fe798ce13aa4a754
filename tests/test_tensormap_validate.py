"""TensorMapSpec.validate(): one test per cuTensorMapEncode* rule, the numpy-order factories, and properties."""
from __future__ import annotations

import os
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ptxdsl import types
from ptxdsl.errors import TensorMapError
from ptxdsl.tensormap import (CORNER_RANGE, DTYPES, FLOAT_DTYPES, L2_PROMOTION, MAX_BOX_BYTES, SWIZZLE,
                              SWIZZLE_SPAN, TensorMapSpec)

TILED = TensorMapSpec(dtype="bf16", dims=(128, 64, 4), strides=(256, 256 * 64), box=(64, 16, 1), swizzle="128B",
                      global_address=0x7F00_0000_0000)
IM2COL = TensorMapSpec(dtype="f16", dims=(32, 16, 16, 2), strides=(64, 64 * 16, 64 * 256), box=(), kind="im2col",
                       lower_corner=(-1, -1), upper_corner=(-1, -1), channels_per_pixel=32, pixels_per_column=128)


def broken(spec: TensorMapSpec, rule: str, *shown: str) -> TensorMapError:
    """validate() fails with `rule`, and the message names each of `shown` and the rule text."""
    with pytest.raises(TensorMapError) as info:
        spec.validate()
    err = info.value
    assert err.rule == f"tensormap.{rule}", str(err)
    assert "breaks '" in err.message
    for text in shown:
        assert text in err.message, (text, err.message)
    return err


def test_good_specs_pass():
    assert TILED.validate() is TILED
    assert IM2COL.validate() is IM2COL


@pytest.mark.parametrize("spec", [
    TensorMapSpec(dtype="u8", dims=(16,), strides=(), box=(16,)),
    TensorMapSpec(dtype="f32", dims=(64, 64, 64), strides=(256, 256 * 64), box=(32, 32, 57)),
    TensorMapSpec(dtype="f32", dims=(64, 64, 64), strides=(256, 256 * 64), box=(32, 32, 115),
                  element_strides=(1, 1, 2)),
    TensorMapSpec(dtype="f32", dims=(2**32, 1), strides=(2**40 - 16,), box=(256, 256), element_strides=(8, 8)),
    TensorMapSpec(dtype="bf16", dims=(64, 8), strides=(128,), box=(64, 8), swizzle="128B", oob_fill="nan"),
    TensorMapSpec(dtype="f32", dims=(8, 8), strides=(32,), box=(8, 8), swizzle="32B"),
    TensorMapSpec(dtype="u16", dims=(32, 8), strides=(64,), box=(32, 8), swizzle="64B", l2_promotion="256B"),
    TensorMapSpec(dtype="f16", dims=(8, 4, 4), strides=(32, 128), box=(8, 4, 4), interleave="32B", swizzle="32B",
                  global_address=32),
    TensorMapSpec(dtype="u8", dims=(8, 4, 4), strides=(16, 64), box=(16, 4, 4), interleave="16B"),
    TensorMapSpec(dtype="bf16", dims=(64, 8), strides=(128,), box=(64, 8), swizzle="128B_atom_64B"),
    TensorMapSpec(dtype="u8", dims=(16, 70000, 2), strides=(16, 16 * 70000), box=(), kind="im2col",
                  lower_corner=(-32768,), upper_corner=(32767,), channels_per_pixel=16, pixels_per_column=1024),
    TensorMapSpec(dtype="f32", dims=(4, 8, 8, 8, 2), strides=(16, 128, 1024, 8192), box=(), kind="im2col",
                  lower_corner=(-16, 15, -16), upper_corner=(15, 8, -16), channels_per_pixel=4, pixels_per_column=1),
], ids=lambda s: f"{s.kind}-{s.dtype}-{s.swizzle}-r{s.rank}")
def test_boundary_specs_pass(spec):
    assert spec.validate() is spec


# (id, spec, rule, texts the message must contain)
RULES = [
    ("kind", replace(TILED, kind="tile"), "kind", "kind='tile'"),
    ("dtype", replace(TILED, dtype="bf17"), "dtype", "dtype='bf17'"),
    ("interleave", replace(TILED, interleave="64B"), "interleave", "interleave='64B'"),
    ("swizzle", replace(TILED, swizzle="256B"), "swizzle", "swizzle='256B'"),
    ("l2", replace(TILED, l2_promotion="512B"), "l2-promotion", "l2_promotion='512B'"),
    ("oob", replace(TILED, oob_fill="inf"), "oob-fill", "oob_fill='inf'"),
    ("rank-0", replace(TILED, dims=(), strides=(), box=()), "rank", "rank=0", "rank 1..5"),
    ("rank-6", replace(TILED, dims=(1,) * 6), "rank", "rank=6", "rank 1..5"),
    ("im2col-rank-2", replace(IM2COL, dims=(32, 16), strides=(64,)), "rank", "rank=2", "rank 3..5"),
    ("interleave-rank", TensorMapSpec(dtype="f16", dims=(8, 4), strides=(16,), box=(8, 4), interleave="16B"),
     "interleave-rank", "rank=2", ">= 3"),
    ("dim-0", replace(TILED, dims=(128, 0, 4)), "dim-range", "dims[1]=0", "1..2^32"),
    ("dim-big", replace(TILED, dims=(2**32 + 1, 64, 4)), "dim-range", f"dims[0]={2**32 + 1}"),
    ("dim-float", replace(TILED, dims=(128.0, 64, 4)), "dim-range", "dims[0]=128.0"),
    ("address-negative", replace(TILED, global_address=-16), "address-range", "global_address=-16"),
    ("address-8", replace(TILED, global_address=0x1008), "address-align", "global_address=0x1008", "16-byte"),
    ("address-32B", TensorMapSpec(dtype="f16", dims=(16, 4, 4), strides=(32, 128), box=(16, 4, 4),
                                  interleave="32B", swizzle="32B", global_address=0x1010),
     "address-align", "global_address=0x1010", "32-byte"),
    ("stride-count", replace(TILED, strides=(256,)), "stride-count", "len(strides)=1", "2 entries"),
    ("stride-range", replace(TILED, strides=(256, 2**40)), "stride-range", f"strides[1]={2**40}", "< 2^40"),
    ("stride-negative", replace(TILED, strides=(-256, 256 * 64)), "stride-range", "strides[0]=-256"),
    ("stride-align", replace(TILED, strides=(264, 264 * 64)), "stride-align", "strides[0]=264", "multiple of 16"),
    ("stride-align-32B", TensorMapSpec(dtype="f16", dims=(8, 4, 4), strides=(16, 64), box=(8, 4, 4),
                                       interleave="32B", swizzle="32B"),
     "stride-align", "strides[0]=16", "multiple of 32"),
    ("stride-overlap-0", replace(TILED, strides=(128, 128 * 64)), "stride-overlap", "strides[0]=128",
     "dims[0]*elem_bytes = 256"),
    ("stride-overlap-1", replace(TILED, strides=(256, 256 * 32)), "stride-overlap", "strides[1]=8192",
     "strides[0]*dims[1] = 16384"),
    ("box-count", replace(TILED, box=(64, 16)), "box-count", "len(box)=2", "3 entries"),
    ("box-big", replace(TILED, box=(64, 300, 1), swizzle="none"), "box-range", "box[1]=300",
     "each box dimension is 1..256"),
    ("box-0", replace(TILED, box=(64, 16, 0)), "box-range", "box[2]=0"),
    ("box-inner-bytes", TensorMapSpec(dtype="u8", dims=(64, 8), strides=(64,), box=(8, 8)), "box-inner-bytes",
     "box[0]=8 (8 bytes)", "multiple of 16"),
    ("box-inner-bytes-interleaved", TensorMapSpec(dtype="bf16", dims=(8, 4, 4), strides=(16, 64), box=(4, 4, 4),
                                                  interleave="16B"), "box-inner-bytes", "box[0]=4 (8 bytes)"),
    ("swizzle-span-128", replace(TILED, box=(128, 16, 1)), "swizzle-span", "box[0]=128 (256 bytes)", "<= 128"),
    ("swizzle-span-32", replace(TILED, box=(32, 16, 1), swizzle="32B"), "swizzle-span", "box[0]=32 (64 bytes)",
     "<= 32"),
    ("swizzle-span-im2col", replace(IM2COL, channels_per_pixel=64, swizzle="64B"), "swizzle-span",
     "channels_per_pixel=64 (128 bytes)", "<= 64"),
    ("interleave-swizzle", TensorMapSpec(dtype="f16", dims=(16, 4, 4), strides=(32, 128), box=(16, 4, 4),
                                         interleave="32B"),
     "interleave-swizzle", "swizzle='none'", "interleave 32B requires swizzle 32B"),
    ("estride-count", replace(TILED, element_strides=(1, 1)), "element-stride-count", "len(element_strides)=2"),
    ("estride-0", replace(TILED, element_strides=(1, 0, 1)), "element-stride-range", "element_strides[1]=0",
     "1..8"),
    ("estride-9", replace(TILED, element_strides=(9, 1, 1)), "element-stride-range", "element_strides[0]=9"),
    ("box-bytes", replace(TILED, dtype="f32", strides=(512, 512 * 64), box=(32, 64, 29), swizzle="none"),
     "box-bytes", "box=(32, 64, 29) (237568 bytes)", "at most 233472 bytes"),
    ("box-bytes-strided", replace(TILED, dtype="f32", strides=(512, 512 * 64), box=(32, 32, 116),
                                  swizzle="none", element_strides=(1, 1, 2)),
     "box-bytes", "(237568 bytes)", "box[i]//element_strides[i]"),
    ("box-bytes-im2col", replace(IM2COL, channels_per_pixel=256, pixels_per_column=457), "box-bytes",
     "256*457 (233984 bytes)"),
    ("oob-nan-int", TensorMapSpec(dtype="u32", dims=(64,), strides=(), box=(64,), oob_fill="nan"),
     "oob-fill-float", "oob_fill='nan'", "floating-point", "u32"),
    ("corner-count", replace(IM2COL, lower_corner=(0,)), "corner-count", "len(lower_corner)=1", "2 entries"),
    ("corner-rank3", TensorMapSpec(dtype="u8", dims=(16, 64, 2), strides=(16, 1024), box=(), kind="im2col",
                                   lower_corner=(-32769,), upper_corner=(0,), channels_per_pixel=16,
                                   pixels_per_column=4),
     "corner-range", "lower_corner[0]=-32769", "-32768..32767"),
    ("corner-rank4", replace(IM2COL, upper_corner=(128, 0)), "corner-range", "upper_corner[0]=128", "-128..127"),
    ("corner-rank5", TensorMapSpec(dtype="f32", dims=(4, 8, 8, 8, 2), strides=(16, 128, 1024, 8192), box=(),
                                   kind="im2col", lower_corner=(0, 0, 16), upper_corner=(0, 0, 0),
                                   channels_per_pixel=4, pixels_per_column=1),
     "corner-range", "lower_corner[2]=16", "-16..15"),
    ("im2col-area", replace(IM2COL, lower_corner=(0, 0), upper_corner=(-16, 0)), "im2col-area",
     "upper_corner[0]=-16 (extent 0)", "non-zero pixel box area"),
    # interleaved: the pixel dimensions are dims[0..rank-3] (seen on the H200: the driver refused this map)
    ("im2col-area-interleaved", TensorMapSpec(dtype="bf16", dims=(1, 1, 2, 1), strides=(16, 16, 32), box=(),
                                              interleave="16B", swizzle="128B", kind="im2col", lower_corner=(0, 1),
                                              upper_corner=(0, 0), channels_per_pixel=8, pixels_per_column=1),
     "im2col-area", "upper_corner[1]=0 (extent 0)", "dims[1] + upper_corner[1]"),
    # the driver adds a pixel dimension and its upper corner in signed 32 bits (seen on the H200: 2^31-1 with
    # upper_corner 1 refused, with lower_corner -1 accepted)
    ("im2col-extent-range", TensorMapSpec(dtype="bf16", dims=(8, 2**31 - 1, 1), strides=(16, 2**35), box=(),
                                          kind="im2col", lower_corner=(0,), upper_corner=(1,), channels_per_pixel=8,
                                          pixels_per_column=1),
     "im2col-extent-range", "upper_corner[0]=1 (dims[1] + upper_corner[0] = 2147483648)", "signed 32 bits"),
    ("channels-0", replace(IM2COL, channels_per_pixel=0), "channels-per-pixel", "channels_per_pixel=0", "1..256"),
    ("channels-257", replace(IM2COL, channels_per_pixel=257), "channels-per-pixel", "channels_per_pixel=257"),
    ("pixels-0", replace(IM2COL, pixels_per_column=0), "pixels-per-column", "pixels_per_column=0", "1..1024"),
    ("pixels-1025", replace(IM2COL, pixels_per_column=1025), "pixels-per-column", "pixels_per_column=1025"),
    ("im2col-inner-bytes", replace(IM2COL, channels_per_pixel=4), "box-inner-bytes",
     "channels_per_pixel=4 (8 bytes)", "multiple of 16"),
]


@pytest.mark.parametrize("spec, rule, shown", [pytest.param(s, r, t, id=i) for i, s, r, *t in RULES])
def test_rule(spec, rule, shown):
    broken(spec, rule, *shown)


def test_every_rule_is_tested():
    tested = {rule for _, _, rule, *_ in RULES}
    assert tested >= {"kind", "dtype", "interleave", "swizzle", "l2-promotion", "oob-fill", "rank", "interleave-rank",
                      "dim-range", "address-range", "address-align", "stride-count", "stride-range",
                      "stride-align", "stride-overlap", "box-count", "box-range", "box-inner-bytes",
                      "swizzle-span", "interleave-swizzle", "element-stride-count", "element-stride-range",
                      "box-bytes", "oob-fill-float", "corner-count", "corner-range", "im2col-area",
                      "im2col-extent-range", "channels-per-pixel", "pixels-per-column"}


def test_indexed_fields_say_lists_are_innermost_first():
    err = broken(replace(TILED, box=(64, 300, 1), swizzle="none"), "box-range")
    assert "innermost first" in err.message


def test_first_broken_rule_wins():
    # box, element strides and oob fill are all broken: the fixed order reports the box first
    spec = TensorMapSpec(dtype="u32", dims=(64, 16, 4), strides=(256, 4096), box=(64, 0, 1),
                         element_strides=(9, 9, 9), oob_fill="nan")
    broken(spec, "box-range", "box[1]=0")
    broken(replace(spec, box=(64, 1, 1)), "element-stride-range", "element_strides[0]=9")
    broken(replace(spec, box=(64, 1, 1), element_strides=()), "oob-fill-float")


def test_error_carries_the_users_line():
    spec = TensorMapSpec.tiled_for((64, 128), "bf16", (16, 64))
    bad = replace(spec, box=(64, 0))
    with pytest.raises(TensorMapError) as info:
        bad.validate()
    assert info.value.loc is spec.loc
    assert os.path.basename(__file__) in str(info.value)
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.tiled_for((64, 128), "bf16", (300, 64))
    assert info.value.loc.file == __file__
    assert "box[1]=300" in str(info.value)


def test_swizzle_modes_4_to_6_are_sm100_only():
    assert TILED.min_compute_capability == (9, 0)
    for mode in ("128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B"):
        spec = replace(TILED, swizzle=mode).validate()
        assert spec.min_compute_capability == (10, 0)


# ---------------------------------------------------------------------------- numpy-order factories

def test_tiled_for_reverses_numpy_order():
    spec = TensorMapSpec.tiled_for((4, 64, 128), "bf16", (1, 16, 64), element_strides=(1, 2, 1),
                                   swizzle="128B", address=0x1000)
    assert spec.dims == (128, 64, 4)
    assert spec.strides == (256, 256 * 64)
    assert spec.box == (64, 16, 1)
    assert spec.element_strides == (1, 2, 1)
    assert spec.global_address == 0x1000
    assert spec.loc.file == __file__


def test_tiled_for_explicit_strides_pad_rows():
    spec = TensorMapSpec.tiled_for((8, 100), np.float32, (8, 32), strides=(512, 4))
    assert spec.dims == (100, 8) and spec.strides == (512,)


@pytest.mark.parametrize("dtype, name", [("bf16", "bf16"), (types.bf16, "bf16"), (np.float32, "f32"),
                                         (np.dtype(ml_dtypes.bfloat16), "bf16"), ("u8", "u8"), (np.int8, "u8"),
                                         (types.s32, "s32"), ("f64", "f64")])
def test_tiled_for_dtypes(dtype, name):
    assert TensorMapSpec.tiled_for((4, 64), dtype, (4, 64)).dtype == name


def test_tiled_for_rejects_a_dtype_without_tensor_map_type():
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.tiled_for((4, 64), np.bool_, (4, 64))
    assert info.value.rule == "tensormap.dtype" and info.value.loc.file == __file__


def test_tiled_for_rejects_non_contiguous_inner_dimension():
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.tiled_for((8, 64), "f32", (8, 16), strides=(512, 8))
    assert info.value.rule == "tensormap.inner-stride" and "strides[-1]=8" in str(info.value)
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.tiled_for((8, 64), "f32", (8, 16), strides=(4,))
    assert info.value.rule == "tensormap.stride-count"


def test_tiled_for_validates():
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.tiled_for((8, 64), "f32", (8, 64), swizzle="128B")
    assert info.value.rule == "tensormap.swizzle-span"


def test_im2col_for_reverses_corners():
    spec = TensorMapSpec.im2col_for((2, 8, 16, 16, 32), "f16", channels_per_pixel=32, pixels_per_column=64,
                                    lower_corner=(-1, -2, -3), upper_corner=(1, 2, 3), swizzle="64B")
    assert spec.kind == "im2col"
    assert spec.dims == (32, 16, 16, 8, 2)
    assert spec.lower_corner == (-3, -2, -1) and spec.upper_corner == (3, 2, 1)
    assert spec.box == () and spec.box_bytes == 32 * 64 * 2
    assert spec.loc.file == __file__


def test_from_array_numpy_and_device_like():
    host = np.zeros((4, 32, 64), np.float32)[:, :, :32]
    spec = TensorMapSpec.from_array(host, (1, 8, 32))
    assert spec.dims == (32, 32, 4) and spec.strides == (256, 256 * 32) and spec.global_address == 0

    class FakeDeviceArray:
        shape, dtype, strides, ptr = (16, 64), np.dtype(ml_dtypes.bfloat16), (128, 2), 0x7000_0000_0400

    spec = TensorMapSpec.from_array(FakeDeviceArray(), (16, 64), swizzle="128B")
    assert spec.dtype == "bf16" and spec.global_address == 0x7000_0000_0400 and spec.box == (64, 16)
    assert spec.loc.file == __file__


# ---------------------------------------------------------------------------- properties

def _align_up(n: int, a: int) -> int:
    return -(-n // a) * a


@st.composite
def valid_tiled(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    esize = DTYPES[dtype][1]
    interleave = draw(st.sampled_from(["none", "none", "16B", "32B"]))
    rank = draw(st.integers(3 if interleave != "none" else 1, 5))
    swizzle = "32B" if interleave == "32B" else draw(st.sampled_from(sorted(SWIZZLE)))
    align = 32 if interleave == "32B" else 16
    dims = tuple(draw(st.integers(1, 256)) for _ in range(rank - 1)) + (draw(st.integers(1, 2**32)),)
    strides, span = [], dims[0] * esize
    for i in range(rank - 1):
        s = _align_up(span, align) + align * draw(st.integers(0, 3))
        strides.append(s)
        span = s * dims[i + 1]
    span = SWIZZLE_SPAN[swizzle] if interleave == "none" else 0
    box0 = draw(st.integers(1, min(256 * esize, span or 256 * esize) // 16)) * 16 // esize
    estrides = draw(st.one_of(st.just(()), st.tuples(*[st.integers(1, 8)] * rank)))
    es = estrides or (1,) * rank
    box, room = [box0], MAX_BOX_BYTES // (-(-box0 // es[0]) * esize)
    for e in es[1:]:
        box.append(draw(st.integers(1, min(256, room * e))))
        room //= -(-box[-1] // e)
    oob = draw(st.sampled_from(["zero", "nan"])) if dtype in FLOAT_DTYPES else "zero"
    return TensorMapSpec(dtype=dtype, dims=dims, strides=tuple(strides), box=tuple(box), element_strides=estrides,
                         interleave=interleave, swizzle=swizzle, oob_fill=oob,
                         l2_promotion=draw(st.sampled_from(sorted(L2_PROMOTION))),
                         global_address=align * draw(st.integers(0, 2**40)))


@st.composite
def valid_im2col(draw):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    esize = DTYPES[dtype][1]
    rank = draw(st.integers(3, 5))
    swizzle = draw(st.sampled_from(sorted(SWIZZLE)))
    dims = tuple(draw(st.integers(1, 64)) for _ in range(rank))
    strides, span = [], dims[0] * esize
    for i in range(rank - 1):
        s = _align_up(span, 16) + 16 * draw(st.integers(0, 3))
        strides.append(s)
        span = s * dims[i + 1]
    lo, hi = CORNER_RANGE[rank]
    lower, upper = [], []
    for d in dims[1:-1]:
        low = draw(st.integers(lo, hi))
        lower.append(low)
        upper.append(draw(st.integers(max(lo, low + 1 - d), hi)))
    top = min(256 * esize, SWIZZLE_SPAN[swizzle] or 256 * esize)
    channels = draw(st.integers(1, top // 16)) * 16 // esize
    return TensorMapSpec(dtype=dtype, dims=dims, strides=tuple(strides), box=(), kind="im2col",
                         lower_corner=tuple(lower), upper_corner=tuple(upper), channels_per_pixel=channels,
                         pixels_per_column=draw(st.integers(1, min(1024, MAX_BOX_BYTES // (channels * esize)))),
                         swizzle=swizzle,
                         element_strides=draw(st.one_of(st.just(()), st.tuples(*[st.integers(1, 8)] * rank))))


@given(st.one_of(valid_tiled(), valid_im2col()))
def test_valid_specs_pass(spec):
    assert spec.validate() is spec
    assert spec.box_bytes > 0


@given(valid_tiled())
def test_tiled_for_round_trips(spec):
    esize = spec.elem_bytes
    np_strides = tuple(reversed(spec.strides)) + (esize,)
    again = TensorMapSpec.tiled_for(tuple(reversed(spec.dims)), spec.dtype, tuple(reversed(spec.box)),
                                    strides=np_strides, element_strides=tuple(reversed(spec.element_strides)) or None,
                                    interleave=spec.interleave, swizzle=spec.swizzle,
                                    l2_promotion=spec.l2_promotion, oob_fill=spec.oob_fill,
                                    address=spec.global_address)
    assert again == spec


@given(valid_tiled(), st.data())
def test_one_bad_box_entry_is_named(spec, data):
    i = data.draw(st.integers(0, spec.rank - 1))
    bad = data.draw(st.sampled_from([0, 257, 1000]))
    box = spec.box[:i] + (bad,) + spec.box[i + 1:]
    broken(replace(spec, box=box), "box-range", f"box[{i}]={bad}")


@given(valid_tiled(), st.data())
def test_one_bad_dim_is_named(spec, data):
    i = data.draw(st.integers(0, spec.rank - 1))
    bad = data.draw(st.sampled_from([0, 2**32 + 1]))
    broken(replace(spec, dims=spec.dims[:i] + (bad,) + spec.dims[i + 1:]), "dim-range", f"dims[{i}]={bad}")


@given(st.one_of(valid_tiled(), valid_im2col()), st.data())
def test_one_bad_element_stride_is_named(spec, data):
    i = data.draw(st.integers(0, spec.rank - 1))
    bad = data.draw(st.sampled_from([0, 9]))
    estrides = list(spec.estrides)
    estrides[i] = bad
    broken(replace(spec, element_strides=tuple(estrides)), "element-stride-range", f"element_strides[{i}]={bad}")


@given(valid_tiled(), st.integers(1, 15))
def test_misaligned_address_is_named(spec, offset):
    bad = spec.global_address + offset
    broken(replace(spec, global_address=bad), "address-align", f"global_address={bad:#x}")


@given(valid_tiled(), st.data())
def test_misaligned_stride_is_named(spec, data):
    assume(spec.rank > 1)
    i = data.draw(st.integers(0, spec.rank - 2))
    strides = spec.strides[:i] + (spec.strides[i] + 8,) + spec.strides[i + 1:]
    broken(replace(spec, strides=strides), "stride-align", f"strides[{i}]={spec.strides[i] + 8}")


class _FakeTorch:
    """Just the torch.Tensor surface from_array reads (data_ptr, stride in elements, element_size)."""

    def __init__(self, shape, stride, dtype, esize, ptr):
        self.shape, self._stride, self.dtype, self._esize, self._ptr = shape, stride, dtype, esize, ptr

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride

    def element_size(self):
        return self._esize


class _FakeCAI:
    def __init__(self, shape, typestr, ptr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def test_from_array_reads_torch_like_tensors():
    t = _FakeTorch((256, 512), (1024, 1), "torch.bfloat16", 2, 0x7F0000001000)
    spec = TensorMapSpec.from_array(t, (64, 64))
    assert (spec.dtype, spec.dims, spec.strides, spec.box, spec.global_address) == \
        ("bf16", (512, 256), (2048,), (64, 64), 0x7F0000001000)



def test_from_array_refuses_a_host_tensor():
    t = _FakeTorch((64, 64), (64, 1), "torch.bfloat16", 2, 0x1000)
    t.is_cuda, t.device = False, "cpu"
    with pytest.raises(TensorMapError, match=r"arr=<tensor on cpu> breaks .*device memory") as info:
        TensorMapSpec.from_array(t, (32, 32))
    assert info.value.rule == "tensormap.host-array"
    assert info.value.loc is not None and info.value.loc.file.endswith("test_tensormap_validate.py")

def test_from_array_reads_cuda_array_interface():
    c = _FakeCAI((8, 16, 32), "<f4", 0x10000)
    spec = TensorMapSpec.from_array(c, (2, 4, 8))
    assert (spec.dtype, spec.dims, spec.strides, spec.global_address) == ("f32", (32, 16, 8), (128, 2048), 0x10000)
    padded = _FakeCAI((8, 16), "<u2", 0x10000, strides=(64, 2))
    assert TensorMapSpec.from_array(padded, (8, 16)).strides == (64,)


@pytest.mark.parametrize("rank", [3, 4, 5])
@pytest.mark.parametrize("interleave", ["none", "16B"])
def test_im2col_pixel_dimensions_stay_below_2_31(rank, interleave):
    """Measured on the H200 (driver 580): W/H/D extents of an im2col map are < 2^31 (the channel and batch
    dimensions go to 2^32); in an interleaved map the driver counts the pixel dimensions from dimension 0."""
    first = 0 if interleave == "16B" else 1
    for i in range(rank):
        dims = [8] + [2] * (rank - 1)
        dims[i] = 2**31
        strides, span = [], dims[0] * 2
        for d in dims[1:]:
            strides.append(-(-span // 16) * 16)
            span = strides[-1] * d
        spec = TensorMapSpec(dtype="bf16", dims=tuple(dims), strides=tuple(strides), box=(), kind="im2col",
                             interleave=interleave, lower_corner=(0,) * (rank - 2), upper_corner=(0,) * (rank - 2),
                             channels_per_pixel=8, pixels_per_column=1)
        if first <= i < first + rank - 2:
            broken(spec, "im2col-spatial-range", f"dims[{i}]=2147483648", "1..2^31-1")
            spec = replace(spec, dims=tuple(d - 1 if j == i else d for j, d in enumerate(dims)))
        assert spec.validate() is spec
