"""Properties of the CPU model of TMA (ptxdsl.reference)."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ptxdsl import reference as ref
from ptxdsl.tensormap import DTYPES, SWIZZLE_SPAN, TensorMapSpec
from ptxdsl.types import scalar_type, to_numpy

FAST = settings(max_examples=60, deadline=None)
HOPPER_SWIZZLES = ("32B", "64B", "128B")
NUMPY_DTYPES = ("u8", "u16", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")


def np_dtype(name: str) -> np.dtype:
    return to_numpy(scalar_type(name))


def dense_strides(dims, esize, pitch0):
    """Byte strides of a C-order array whose innermost row holds pitch0 elements."""
    strides, step = [], pitch0 * esize
    for d in dims[1:]:
        strides.append(step)
        step *= d
    return tuple(strides)


def random_tensor(seed, dtype, dims, pitch0):
    """A numpy array (outermost first) with random bytes; its first dims[0] columns are the tensor."""
    shape = (*reversed(dims[1:]), pitch0)
    nbytes = int(np.prod(shape)) * DTYPES[dtype][1]
    raw = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    return raw.view(np_dtype(dtype)).reshape(shape)


@st.composite
def tiled_cases(draw, swizzles=("none",), inside=False, unit_strides=False, dtypes=NUMPY_DTYPES, store=False):
    """(spec, gmem, coords) for a small tiled map; boxes start at a multiple of 16 bytes in dimension 0,
    inside the tensor when `inside`, at non-negative coordinates (as a store's must) when `store`."""
    dtype = draw(st.sampled_from(dtypes))
    esize = DTYPES[dtype][1]
    swizzle = draw(st.sampled_from(swizzles))
    rank = draw(st.integers(1, 4))
    span = SWIZZLE_SPAN[swizzle] or 64
    box0 = draw(st.sampled_from([n for n in (16 // esize, 32 // esize, 64 // esize) if n and n * esize <= span]))
    box = (box0, *(draw(st.integers(1, 4)) for _ in range(rank - 1)))
    es = (1,) * rank if unit_strides else tuple(draw(st.integers(1, 3)) for _ in range(rank))
    n = [box0] + [-(-b // s) for b, s in zip(box[1:], es[1:])]
    q = 16 // esize
    if inside:
        dims = tuple(draw(st.integers((k - 1) * s + 1, (k - 1) * s + 4)) for k, s in zip(n, (1, *es[1:])))
        coords = tuple(draw(st.integers(0, d - 1 - (k - 1) * s)) for d, k, s in zip(dims, n, (1, *es[1:])))
    else:
        dims = tuple(draw(st.integers(1, 2 * b + 2)) for b in box)
        coords = tuple(draw(st.integers(0 if store else -b - 2, d + 1)) for b, d in zip(box, dims))
    coords = (coords[0] // q * q, *coords[1:])
    pitch0 = -(-dims[0] * esize // 16) * 16 // esize + draw(st.integers(0, 2)) * (16 // esize)
    gmem = random_tensor(draw(st.integers(0, 2**32 - 1)), dtype, dims, pitch0)
    spec = TensorMapSpec(dtype=dtype, dims=dims, strides=dense_strides(dims, esize, pitch0), box=box,
                         element_strides=es, swizzle=swizzle,
                         oob_fill=draw(st.sampled_from(("zero", "nan"))))
    return spec, gmem, coords


def box_slices(spec, coords):
    """numpy index (outermost first) of an in-bounds box; dimension 0 is walked with stride 1."""
    strides = (1, *spec.estrides[1:])
    n = ref._box_shape(spec)
    return tuple(slice(c, c + (k - 1) * s + 1, s) for c, k, s in reversed(list(zip(coords, n, strides))))


# --- swizzle -----------------------------------------------------------------------------------

@FAST
@given(st.sampled_from(HOPPER_SWIZZLES), st.integers(1, 4), st.data())
def test_swizzle_is_a_permutation_inside_its_span_and_unswizzle_inverts_it(mode, repeats, data):
    size = repeats * 8 * SWIZZLE_SPAN[mode]
    buf = data.draw(st.binary(min_size=size, max_size=size))
    out = ref.swizzle_bytes(buf, mode)
    assert ref.unswizzle_bytes(out, mode).tobytes() == buf
    for a in range(0, size, 16):
        moved = ref.swizzle_offset(a, mode)
        assert moved // SWIZZLE_SPAN[mode] == a // SWIZZLE_SPAN[mode]
        assert out[moved:moved + 16].tobytes() == buf[a:a + 16]
    assert sorted(ref.swizzle_offset(a, mode) for a in range(size)) == list(range(size))


def test_swizzle_patterns_by_row():
    for row, chunk in itertools.product(range(16), range(8)):
        a = row * 128 + chunk * 16
        assert ref.swizzle_offset(a, "128B") == row * 128 + (chunk ^ row % 8) * 16
        assert ref.swizzle_offset(a, "64B") == row * 128 + (chunk ^ row % 4) * 16
        assert ref.swizzle_offset(a, "32B") == row * 128 + (chunk ^ row % 2) * 16
        assert ref.swizzle_offset(a + 5, "none") == a + 5


@pytest.mark.parametrize("mode", ["128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B"])
def test_sm100_atom_modes_are_refused(mode):
    with pytest.raises(ValueError, match="sm_100"):
        ref.swizzle_offset(0, mode)
    with pytest.raises(ValueError, match="sm_100"):
        ref.swizzle_bytes(bytes(1024), mode)


def test_swizzled_buffer_must_fill_whole_spans():
    with pytest.raises(ValueError, match="multiple of 128"):
        ref.swizzle_bytes(bytes(200), "128B")


# --- layout ------------------------------------------------------------------------------------

def test_narrow_box_under_128B_swizzle_takes_whole_rows():
    spec = TensorMapSpec(dtype="f32", dims=(16, 8), strides=(64,), box=(16, 8), swizzle="128B")
    assert ref.smem_layout(spec) == (1024, 128)
    assert ref.tx_bytes(spec) == 512
    gmem = np.arange(128, dtype=np.uint32).reshape(8, 16)
    smem = ref.load_box(spec, gmem, (0, 0), fill=0xAB)
    assert smem.size == 1024
    rows = smem.reshape(8, 8, 16)
    for r in range(8):
        for c in range(8):
            chunk = rows[r, c ^ r].tobytes()
            assert chunk == (gmem[r, 4 * c:4 * c + 4].tobytes() if c < 4 else b"\xab" * 16)


def test_unswizzled_rows_are_packed():
    spec = TensorMapSpec(dtype="f16", dims=(64, 64), strides=(128,), box=(8, 5))
    assert ref.smem_layout(spec) == (80, 16)
    assert ref.tx_bytes(spec) == 80


def test_box_wider_than_the_swizzle_span_is_refused():
    spec = TensorMapSpec(dtype="f32", dims=(64, 8), strides=(256,), box=(16, 8), swizzle="32B")
    with pytest.raises(ValueError, match="exceeds"):
        ref.smem_layout(spec)


def test_128B_swizzle_of_a_64x64_bf16_box():
    gmem = np.arange(64 * 64, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(64, 64)
    spec = TensorMapSpec(dtype="bf16", dims=(64, 64), strides=(128,), box=(64, 64), swizzle="128B")
    smem = ref.load_box(spec, gmem, (0, 0))
    assert smem.size == 8192 and ref.tx_bytes(spec) == 8192
    for r, c in itertools.product(range(64), range(8)):
        dst = r * 128 + (c ^ r % 8) * 16
        assert smem[dst:dst + 16].tobytes() == gmem[r, 8 * c:8 * c + 8].tobytes()


# --- loads -------------------------------------------------------------------------------------

@FAST
@given(tiled_cases(inside=True))
def test_box_inside_the_tensor_is_the_numpy_slice(case):
    spec, gmem, coords = case
    smem = ref.load_box(spec, gmem, coords)
    assert smem.size == ref.smem_layout(spec)[0] == ref.tx_bytes(spec)
    assert smem.tobytes() == np.ascontiguousarray(gmem[box_slices(spec, coords)]).tobytes()


@FAST
@given(tiled_cases(dtypes=("u16", "s32", "f16", "bf16", "f32", "f64"), unit_strides=True))
def test_out_of_bounds_elements_get_the_map_fill(case):
    spec, gmem, coords = case
    esize = spec.elem_bytes
    if spec.oob_fill == "nan" and spec.dtype in ref.NAN_FILL:
        fill = ref.NAN_FILL[spec.dtype].to_bytes(esize, "little")
    else:
        fill = bytes(esize)
    expected = bytearray()
    for pos in itertools.product(*(range(c, c + b) for c, b in zip(reversed(coords), reversed(spec.box)))):
        inside = all(0 <= x < d for x, d in zip(pos, reversed(spec.dims)))
        expected += gmem[pos].tobytes() if inside else fill
    assert ref.load_box(spec, gmem, coords).tobytes() == bytes(expected)


@pytest.mark.parametrize("dtype,element", [("f16", "f77f"), ("bf16", "f77f"), ("f32", "f77ff77f"),
                                           ("f64", "f77ff77ff77ff77f")])
def test_nan_fill_is_the_halfword_0x7ff7_measured_on_the_h200(dtype, element):
    esize = DTYPES[dtype][1]
    spec = TensorMapSpec(dtype=dtype, dims=(1,), strides=(), box=(16 // esize,), oob_fill="nan")
    gmem = np.frombuffer(bytes(range(1, esize + 1)), np_dtype(dtype))
    smem = ref.load_box(spec, gmem, (0,))
    assert smem.tobytes().hex() == bytes(range(1, esize + 1)).hex() + element * (16 // esize - 1)
    assert np.isnan(smem[esize:].view(np_dtype(dtype)).astype(np.float64)).all()


@pytest.mark.parametrize("dtype,x", [("f32", 1), ("u8", 3), ("f32", -1), ("f64", 1)])
def test_a_box_not_starting_on_16_bytes_is_refused(dtype, x):
    """Each died with an illegal instruction on the H200 (f32 at 1 and -1, u8 at 3)."""
    esize = DTYPES[dtype][1]
    spec = TensorMapSpec(dtype=dtype, dims=(64, 4), strides=(64 * esize,), box=(16 // esize, 4))
    gmem = np.zeros((4, 64), np_dtype(dtype))
    for model in (lambda: ref.load_box(spec, gmem, (x, 0)), lambda: ref.store_box(spec, gmem, (abs(x), 0), bytes(64)),
                  lambda: ref.multicast(spec, gmem, (x, 0), 3, 2)):
        with pytest.raises(ValueError, match="multiple of 16 bytes"):
            model()


def test_nan_fill_of_an_integer_map_is_zero():
    spec = TensorMapSpec(dtype="u32", dims=(4,), strides=(), box=(8,), oob_fill="nan")
    smem = ref.load_box(spec, np.full(4, 7, np.uint32), (0,))
    assert smem.view(np.uint32).tolist() == [7, 7, 7, 7, 0, 0, 0, 0]


def test_inner_element_stride_is_ignored():
    spec = TensorMapSpec(dtype="f32", dims=(32, 8), strides=(128,), box=(8, 4), element_strides=(2, 2))
    gmem = np.arange(256, dtype=np.float32).reshape(8, 32)
    assert ref.tx_bytes(spec) == 8 * 2 * 4
    assert ref.load_box(spec, gmem, (4, 1)).view(np.float32).tolist() == gmem[1:5:2, 4:12].ravel().tolist()


def test_element_offsets_pair_each_box_element_with_its_global_bytes():
    spec = TensorMapSpec(dtype="u16", dims=(12, 5), strides=(48,), box=(8, 4), element_strides=(1, 2), swizzle="32B")
    gmem = random_tensor(3, "u16", spec.dims, 24)
    offsets, inside = ref.element_offsets(spec, (8, 3))
    elements = ref.smem_elements(spec, ref.load_box(spec, gmem, (8, 3)))
    assert inside.reshape(2, 8).tolist() == [[True] * 4 + [False] * 4, [False] * 8]
    raw = gmem.tobytes()
    assert [raw[o:o + 2] for o in offsets[inside]] == [e.tobytes() for e in elements[inside]]
    assert offsets[:4].tolist() == [3 * 48 + 2 * x for x in range(8, 12)]


def test_gmem_smaller_than_the_map_is_refused():
    spec = TensorMapSpec(dtype="f32", dims=(16, 8), strides=(64,), box=(4, 4))
    with pytest.raises(ValueError, match="gmem holds"):
        ref.load_box(spec, np.zeros((7, 16), np.float32), (0, 0))


def test_coordinates_and_box_must_match_the_rank():
    spec = TensorMapSpec(dtype="f32", dims=(16, 8), strides=(64,), box=(4, 4))
    with pytest.raises(ValueError, match="rank-2"):
        ref.load_box(spec, np.zeros((8, 16), np.float32), (0,))
    with pytest.raises(ValueError, match="element_strides need 2"):
        ref.load_box(TensorMapSpec(dtype="f32", dims=(16, 8), strides=(64,), box=(4,)),
                     np.zeros((8, 16), np.float32), (0, 0))


# --- stores and reductions ---------------------------------------------------------------------

@FAST
@given(tiled_cases(swizzles=("none", *HOPPER_SWIZZLES), store=True))
def test_store_of_a_load_round_trips(case):
    spec, gmem, coords = case
    before = gmem.copy()
    out = ref.store_box(spec, gmem, coords, ref.load_box(spec, gmem, coords, fill=0x5A))
    assert out.shape == gmem.shape and out.dtype == gmem.dtype
    assert out[..., :spec.dims[0]].tobytes() == gmem[..., :spec.dims[0]].tobytes()
    bound = ref.store_bounds(spec)[0]
    assert out[..., bound:].tobytes() == gmem[..., bound:].tobytes()
    assert gmem.tobytes() == before.tobytes()


@FAST
@given(tiled_cases(swizzles=("none", *HOPPER_SWIZZLES), inside=True))
def test_store_writes_exactly_the_box(case):
    spec, gmem, coords = case
    out = ref.store_box(spec, np.zeros_like(gmem), coords, ref.load_box(spec, gmem, coords))
    expected = np.zeros_like(gmem)
    expected[box_slices(spec, coords)] = gmem[box_slices(spec, coords)]
    assert out.tobytes() == expected.tobytes()


@FAST
@pytest.mark.parametrize("dtype", sorted(ref.REDUCE_TYPES["add"]))
@given(data=st.data())
def test_reduce_add_of_zeros_is_the_identity(dtype, data):
    spec, gmem, coords = data.draw(tiled_cases(swizzles=("none", "128B"), dtypes=(dtype,), store=True))
    out = ref.reduce_box(spec, gmem, coords, bytes(ref.smem_layout(spec)[0]), "add")
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out.astype(np.float64), gmem.astype(np.float64))


def tile_pairs():
    """A map, a tensor, two non-overlapping tile-aligned boxes and their shared-memory images."""
    @st.composite
    def build(draw):
        dtype = draw(st.sampled_from(sorted(set().union(*ref.REDUCE_TYPES.values()))))
        esize = DTYPES[dtype][1]
        box = (16 // esize, draw(st.integers(1, 3)))
        grid = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        dims = (box[0] * grid[0] - draw(st.integers(0, box[0] - 1)), box[1] * grid[1])
        tiles = draw(st.lists(st.tuples(st.integers(0, grid[0] - 1), st.integers(0, grid[1] - 1)),
                              min_size=2, max_size=2, unique=True))
        pitch0 = box[0] * grid[0]
        spec = TensorMapSpec(dtype=dtype, dims=dims, strides=dense_strides(dims, esize, pitch0), box=box)
        seed = draw(st.integers(0, 2**32 - 1))
        gmem = random_tensor(seed, dtype, dims, pitch0)
        nbytes = ref.smem_layout(spec)[0]
        rng = np.random.default_rng(seed + 1)
        images = [rng.integers(0, 256, nbytes, dtype=np.uint8) for _ in tiles]
        coords = [(tx * box[0], ty * box[1]) for tx, ty in tiles]
        op = draw(st.sampled_from(sorted(op for op, types in ref.REDUCE_TYPES.items() if dtype in types)))
        return spec, gmem, coords, images, op
    return build()


@FAST
@given(tile_pairs())
def test_non_overlapping_tiles_commute(case):
    spec, gmem, coords, images, op = case
    for apply in (ref.store_box, lambda s, g, c, m: ref.reduce_box(s, g, c, m, op)):
        ab = apply(spec, apply(spec, gmem, coords[0], images[0]), coords[1], images[1])
        ba = apply(spec, apply(spec, gmem, coords[1], images[1]), coords[0], images[0])
        assert ab.tobytes() == ba.tobytes()


def one_element_map(dtype):
    return TensorMapSpec(dtype=dtype, dims=(1,), strides=(), box=(1,))


def reduce_one(dtype, old, src, op):
    dt = np_dtype(dtype)
    return ref.reduce_box(one_element_map(dtype), np.array([old], dt), (0,),
                          np.array([src], dt).tobytes(), op)[0]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_inc_and_dec_follow_the_atom_rules(old, src):
    assert reduce_one("u32", old, src, "inc") == (0 if old >= src else old + 1)
    assert reduce_one("u32", old, src, "dec") == (src if old == 0 or old > src else old - 1)


def test_reduction_arithmetic_examples():
    assert reduce_one("u32", 2**32 - 1, 2, "add") == 1
    assert reduce_one("s32", -5, 3, "add") == -2
    assert reduce_one("s32", -5, 3, "min") == -5
    assert reduce_one("s64", -5, 3, "max") == 3
    assert reduce_one("u64", 0b1100, 0b1010, "xor") == 0b0110
    assert reduce_one("s32", 0b1100, 0b1010, "and") == 0b1000
    assert reduce_one("u32", 0b1100, 0b1010, "or") == 0b1110
    assert float(reduce_one("bf16", 1.0, 2**-8, "add")) == 1.0
    assert float(reduce_one("bf16", 1.0, 3 * 2**-9, "add")) == 1.0078125
    assert float(reduce_one("f16", 2048, 1, "add")) == 2048
    assert float(reduce_one("f16", 2048, 3, "add")) == 2052
    assert float(reduce_one("f32", 1.0, 2**-24, "add")) == 1.0
    assert float(reduce_one("f16", np.nan, 2.0, "min")) == 2.0
    assert float(reduce_one("bf16", -1.0, 2.0, "max")) == 2.0


def reduce_bits(dtype, old, src, op):
    """The bits reduce_one leaves, from operand bit patterns."""
    bits = np.dtype(f"<u{DTYPES[dtype][1]}")
    pair = np.array([old, src], bits).view(np_dtype(dtype))
    return int(np.array(reduce_one(dtype, pair[0], pair[1], op)).view(bits))


@pytest.mark.parametrize("dtype,old,src,op", [
    ("bf16", 0x867D, 0x7FF9, "add"),     # the H200 left 0x7FFF, not the quieted source payload
    ("bf16", 0xFF8C, 0x3F80, "add"),
    ("bf16", 0x7F80, 0xFF80, "add"),     # inf + -inf
    ("f16", 0x7D5E, 0x3C00, "add"),
    ("f16", 0x3C00, 0xFDC6, "add"),
    ("f32", 0x3F800000, 0xFFC00001, "add"),
    ("f16", 0x7E00, 0xFD00, "min"),
])
def test_a_nan_reduction_result_is_the_canonical_nan(dtype, old, src, op):
    assert reduce_bits(dtype, old, src, op) == ref.REDUCE_NAN[DTYPES[dtype][1]]


@pytest.mark.parametrize("old,src,op", [
    (0xF8D4, 0x7D0D, "min"),             # a signalling NaN operand: the H200 kept the number
    (0xF8D4, 0x7D0D, "max"),
    (0x7D0D, 0x3C00, "max"),
    (0x7CEC, 0x577D, "max"),
])
def test_min_and_max_return_the_number_when_one_operand_is_any_nan(old, src, op):
    number = old if src & 0x7C00 == 0x7C00 else src
    assert reduce_bits("f16", old, src, op) == number


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("old,src,op,bits", [
    (-0.0, 0.0, "min", 0x8000),          # the H200 left -0 where fmin gave +0
    (0.0, -0.0, "min", 0x8000),
    (0.0, -0.0, "max", 0x0000),          # and +0 where fmax gave -0
    (-0.0, 0.0, "max", 0x0000),
    (-0.0, -0.0, "max", 0x8000),
    (np.nan, -0.0, "min", 0x8000),
])
def test_min_and_max_order_negative_zero_below_positive_zero(dtype, old, src, op, bits):
    dt = np_dtype(dtype)
    assert reduce_bits(dtype, int(np.array(old, dt).view(np.uint16)), int(np.array(src, dt).view(np.uint16)),
                       op) == bits


@pytest.mark.parametrize("op,dtype", [("add", "s64"), ("add", "f64"), ("min", "f32"), ("inc", "s32"),
                                      ("dec", "u64"), ("and", "f16"), ("xor", "u16"), ("mul", "u32"),
                                      ("and", "s64"), ("or", "s64"), ("xor", "s64")])
def test_disallowed_reductions_name_op_and_dtype(op, dtype):
    """Reductions outside REDUCE_TYPES are refused; s64 and/or/xor too (in the PTX ISA table, but an
    illegal instruction on the H200)."""
    with pytest.raises(ValueError, match=f"op={op!r}"):
        ref.reduce_box(one_element_map(dtype), np.zeros(1, np_dtype(dtype)), (0,), bytes(16), op)


def store_case(dtype, dims, pitch0, box, coords, op=None, seed=0):
    """A store (op None) or reduction of random bytes into a random tensor, and the model's answer."""
    esize = DTYPES[dtype][1]
    spec = TensorMapSpec(dtype=dtype, dims=dims, strides=dense_strides(dims, esize, pitch0), box=box)
    gmem = random_tensor(seed, dtype, dims, pitch0)
    smem = np.random.default_rng(seed + 1).integers(0, 256, ref.smem_layout(spec)[0], dtype=np.uint8)
    out = ref.store_box(spec, gmem, coords, smem) if op is None else ref.reduce_box(spec, gmem, coords, smem, op)
    return spec, gmem, smem, out


@FAST
@given(st.sampled_from(["u8", "u32", "u64", "f16"]), st.integers(1, 40), st.integers(0, 2), st.integers(1, 4),
       st.integers(0, 3), st.booleans())
@example("u8", 33, 0, 2, 1, False).via("a 1-D u8 store of 32 at 16 wrote elements 33..47 on the H200")
@example("u32", 17, 0, 4, 1, True).via("a u32 reduction of 16 at 4 into dims (17, 1) changed elements 17..19")
def test_a_store_writes_the_whole_16_byte_chunk_past_dims0(dtype, dim0, row, chunks, start, reduce):
    esize = DTYPES[dtype][1]
    per16 = 16 // esize
    bound = -(-dim0 // per16) * per16
    op = "xor" if reduce and dtype in ("u32", "u64") else None
    spec, gmem, smem, out = store_case(dtype, (dim0, row + 1), bound + per16, (per16 * chunks, 1), (per16 * start, row),
                                       op)
    assert ref.store_bounds(spec) == (bound, row + 1)
    written = np.zeros(bound + per16, bool)
    written[per16 * start:min(per16 * (start + chunks), bound)] = True
    n = int(written.sum())
    src = smem[:n * esize].view(gmem.dtype)
    assert out[row][written].tobytes() == (src if op is None else gmem[row][written] ^ src).tobytes()
    assert out[row][~written].tobytes() == gmem[row][~written].tobytes()
    assert out[:row].tobytes() == gmem[:row].tobytes()


@pytest.mark.parametrize("coords", [(-8, 0), (0, -1)])
def test_stores_and_reductions_refuse_a_negative_start(coords):
    spec = TensorMapSpec(dtype="f16", dims=(16, 8), strides=(32,), box=(8, 8))
    gmem, smem = np.zeros((8, 16), np.float16), bytes(128)
    with pytest.raises(ValueError, match="non-negative"):
        ref.store_box(spec, gmem, coords, smem)
    with pytest.raises(ValueError, match="non-negative"):
        ref.reduce_box(spec, gmem, coords, smem, "add")
    assert ref.store_box(spec, gmem, (8, 4), smem).shape == (8, 16)


def test_store_needs_a_whole_box_of_shared_memory():
    spec = TensorMapSpec(dtype="f32", dims=(8, 8), strides=(32,), box=(8, 8))
    with pytest.raises(ValueError, match="occupies 256"):
        ref.store_box(spec, np.zeros((8, 8), np.float32), (0, 0), bytes(255))


# --- im2col ------------------------------------------------------------------------------------

def im2col_map(dims, lower, upper, cpp, ppc, element_strides=(), swizzle="none", oob_fill="zero", dtype="f32"):
    esize = DTYPES[dtype][1]
    return TensorMapSpec(dtype=dtype, dims=dims, strides=dense_strides(dims, esize, dims[0]), box=(),
                         element_strides=element_strides, swizzle=swizzle, oob_fill=oob_fill,
                         kind="im2col", lower_corner=lower, upper_corner=upper,
                         channels_per_pixel=cpp, pixels_per_column=ppc)


def test_im2col_without_padding_walks_pixels_in_nhwc_order():
    dims = (8, 5, 3, 2)  # C, W, H, N
    gmem = np.arange(np.prod(dims), dtype=np.float32).reshape(2, 3, 5, 8)
    spec = im2col_map(dims, (0, 0), (0, 0), cpp=4, ppc=30)
    smem = ref.load_im2col(spec, gmem, (2, 0, 0, 0), (0, 0)).view(np.float32)
    assert smem.tolist() == gmem[:, :, :, 2:6].ravel().tolist()
    assert ref.tx_bytes(spec) == ref.smem_layout(spec)[0] == 30 * 4 * 4


def test_im2col_wraps_inside_the_bounding_box_and_fills_outside_the_tensor():
    dims = (4, 5, 2)  # C, W, N
    gmem = np.arange(40, dtype=np.float32).reshape(2, 5, 4) + 1
    spec = im2col_map(dims, (-1,), (-1,), cpp=4, ppc=7)  # filter bases w = -1 .. 3
    smem = ref.load_im2col(spec, gmem, (0, 2, 0), (1,)).view(np.float32).reshape(7, 4)
    pixels = [(3, 0), (4, 0), (0, 1), (1, 1), (2, 1), (3, 1), (4, 1)]  # (w + offset, n)
    assert smem.tolist() == [gmem[n, w].tolist() for w, n in pixels]
    smem = ref.load_im2col(spec, gmem, (0, 3, 1), (0,)).view(np.float32).reshape(7, 4)
    assert smem[0].tolist() == gmem[1, 3].tolist()
    assert smem[1:].tolist() == [[0.0] * 4] * 6  # w = -1 is padding, then image n = 2 does not exist


def test_im2col_traversal_stride_and_two_spatial_dimensions():
    dims = (2, 6, 6, 1)  # C, W, H, N
    gmem = np.arange(72, dtype=np.float32).reshape(1, 6, 6, 2) + 1
    spec = im2col_map(dims, (0, 0), (-2, -2), cpp=2, ppc=4, element_strides=(1, 2, 2, 1))
    smem = ref.load_im2col(spec, gmem, (0, 2, 0, 0), (1, 2)).view(np.float32).reshape(4, 2)
    # filter bases W, H in 0..3 by steps of 2: (2,0) (0,2) (2,2), then image n = 1 (absent)
    assert smem.tolist() == [gmem[0, 2, 3].tolist(), gmem[0, 4, 1].tolist(), gmem[0, 4, 3].tolist(), [0.0, 0.0]]


def test_im2col_nan_fill_and_swizzle():
    dims = (32, 4, 1)
    gmem = np.ones((1, 4, 32), np.float32)
    spec = im2col_map(dims, (-2,), (0,), cpp=8, ppc=8, swizzle="128B", oob_fill="nan")
    smem = ref.load_im2col(spec, gmem, (0, -2, 0), (0,))
    assert ref.smem_layout(spec) == (1024, 128) and ref.tx_bytes(spec) == 256
    rows = ref.unswizzle_bytes(smem, "128B").reshape(8, 128)[:, :32].copy().view(np.uint32)
    assert rows[:2].ravel().tolist() == [0x7FF77FF7] * 16
    assert rows[2:6].view(np.float32).ravel().tolist() == [1.0] * 32


def test_im2col_offsets_are_range_checked():
    spec = im2col_map((4, 4, 4, 1), (0, 0), (0, 0), cpp=4, ppc=1)
    gmem = np.zeros((1, 4, 4, 4), np.float32)
    with pytest.raises(ValueError, match="0..255"):
        ref.load_im2col(spec, gmem, (0, 0, 0, 0), (256, 0))
    with pytest.raises(ValueError, match="needs 2"):
        ref.load_im2col(spec, gmem, (0, 0, 0, 0), (0,))


def test_load_functions_check_the_map_kind():
    spec = im2col_map((4, 4, 1), (0,), (0,), cpp=4, ppc=1)
    with pytest.raises(ValueError, match="load_im2col"):
        ref.load_box(spec, np.zeros((1, 4, 4), np.float32), (0, 0, 0))


# --- multicast ---------------------------------------------------------------------------------

@FAST
@given(tiled_cases(swizzles=("none", "64B")), st.integers(1, 16), st.data())
def test_multicast_delivers_the_same_box_to_each_masked_cta(case, cluster, data):
    spec, gmem, coords = case
    mask = data.draw(st.integers(0, (1 << cluster) - 1))
    out = ref.multicast(spec, gmem, coords, mask, cluster)
    assert sorted(out) == [r for r in range(cluster) if mask >> r & 1]
    assert all(v == ref.load_box(spec, gmem, coords).tobytes() for v in out.values())


def test_multicast_mask_must_fit_the_cluster():
    spec = TensorMapSpec(dtype="f32", dims=(4,), strides=(), box=(4,))
    with pytest.raises(ValueError, match="outside a cluster of 2"):
        ref.multicast(spec, np.zeros(4, np.float32), (0,), 0b100, 2)
