"""Properties of the CPU model of TMA (ptxdsl.reference)."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
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
def tiled_cases(draw, swizzles=("none",), inside=False, unit_strides=False, dtypes=NUMPY_DTYPES):
    """(spec, gmem, coords) for a small tiled map; boxes start inside the tensor when `inside`."""
    dtype = draw(st.sampled_from(dtypes))
    esize = DTYPES[dtype][1]
    swizzle = draw(st.sampled_from(swizzles))
    rank = draw(st.integers(1, 4))
    span = SWIZZLE_SPAN[swizzle] or 64
    box0 = draw(st.sampled_from([n for n in (16 // esize, 32 // esize, 64 // esize) if n and n * esize <= span]))
    box = (box0, *(draw(st.integers(1, 4)) for _ in range(rank - 1)))
    es = (1,) * rank if unit_strides else tuple(draw(st.integers(1, 3)) for _ in range(rank))
    n = [box0] + [-(-b // s) for b, s in zip(box[1:], es[1:])]
    if inside:
        dims = tuple(draw(st.integers((k - 1) * s + 1, (k - 1) * s + 4)) for k, s in zip(n, (1, *es[1:])))
        coords = tuple(draw(st.integers(0, d - 1 - (k - 1) * s)) for d, k, s in zip(dims, n, (1, *es[1:])))
    else:
        dims = tuple(draw(st.integers(1, 2 * b + 2)) for b in box)
        coords = tuple(draw(st.integers(-b - 2, d + 1)) for b, d in zip(box, dims))
    pitch0 = dims[0] + draw(st.integers(0, 2)) * (16 // esize or 1)
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


def test_nan_fill_of_an_integer_map_is_zero():
    spec = TensorMapSpec(dtype="u32", dims=(4,), strides=(), box=(8,), oob_fill="nan")
    smem = ref.load_box(spec, np.full(4, 7, np.uint32), (0,))
    assert smem.view(np.uint32).tolist() == [7, 7, 7, 7, 0, 0, 0, 0]


def test_inner_element_stride_is_ignored():
    spec = TensorMapSpec(dtype="f32", dims=(32, 8), strides=(128,), box=(8, 4), element_strides=(2, 2))
    gmem = np.arange(256, dtype=np.float32).reshape(8, 32)
    assert ref.tx_bytes(spec) == 8 * 2 * 4
    assert ref.load_box(spec, gmem, (3, 1)).view(np.float32).tolist() == gmem[1:5:2, 3:11].ravel().tolist()


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
@given(tiled_cases(swizzles=("none", *HOPPER_SWIZZLES)))
def test_store_of_a_load_round_trips(case):
    spec, gmem, coords = case
    before = gmem.copy()
    out = ref.store_box(spec, gmem, coords, ref.load_box(spec, gmem, coords, fill=0x5A))
    assert out.tobytes() == gmem.tobytes() and out.shape == gmem.shape and out.dtype == gmem.dtype
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
    spec, gmem, coords = data.draw(tiled_cases(swizzles=("none", "128B"), dtypes=(dtype,)))
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
        spec = TensorMapSpec(dtype=dtype, dims=dims, strides=dense_strides(dims, esize, dims[0]), box=box)
        seed = draw(st.integers(0, 2**32 - 1))
        gmem = random_tensor(seed, dtype, dims, dims[0])
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


@pytest.mark.parametrize("op,dtype", [("add", "s64"), ("add", "f64"), ("min", "f32"), ("inc", "s32"),
                                      ("dec", "u64"), ("and", "f16"), ("xor", "u16"), ("mul", "u32")])
def test_disallowed_reductions_name_op_and_dtype(op, dtype):
    with pytest.raises(ValueError, match=f"op={op!r}"):
        ref.reduce_box(one_element_map(dtype), np.zeros(1, np_dtype(dtype)), (0,), bytes(16), op)


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
    assert rows[:2].ravel().tolist() == [0x7FFFFFFF] * 16
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
