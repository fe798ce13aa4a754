"""ptxdsl.testing's public pieces on the CPU: the strategies draw what their docstrings say (maps that
validate, coordinates by the rules, launches within the limits), the oracles agree with numpy, the memory
assertions name rows and chunks, and snippets are code that runs."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxdsl.testing as pt
from ptxdsl import TensorMapSpec
from ptxdsl import reference as ref
from ptxdsl.tensormap import DTYPES, FLOAT_DTYPES, MAX_BOX_BYTES, SWIZZLE, TensorMapSpec as Spec
from ptxdsl.testing import strategies as pst

FAST = settings(max_examples=60, deadline=None)


# --- the package stays light -------------------------------------------------------------------

def test_importing_ptxdsl_or_its_plugin_loads_no_hypothesis_numpy_or_pytest_heavyweights():
    code = ("import sys, ptxdsl\n"
            "a = sorted(m for m in ('hypothesis', 'pytest', 'numpy') if m in sys.modules)\n"
            "import ptxdsl.testing\n"
            "b = sorted(m for m in ('hypothesis', 'numpy', 'cuda.bindings.driver') if m in sys.modules)\n"
            "import ptxdsl.testing.plugin\n"
            "c = sorted(m for m in ('hypothesis', 'numpy', 'cuda.bindings.driver') if m in sys.modules)\n"
            "print(a, b, c)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] [] []"


def test_every_exported_name_resolves():
    for name in pt.__all__:
        assert getattr(pt, name) is not None
    assert pt.TmaCase is pt.cases.TmaCase and pt.tensor_maps is pst.tensor_maps


# --- strategies --------------------------------------------------------------------------------

@FAST
@given(pst.tensor_maps())
def test_default_maps_validate_and_the_model_takes_them(spec):
    assert spec.validate() is spec and spec.kind == "tiled" and spec.interleave == "none"
    assert spec.dtype in pst.MODELLED_DTYPES and spec.swizzle in pst.HOPPER_SWIZZLES
    assert ref.smem_layout(spec)[0] <= pst.MAX_SMEM_BYTES
    assert pt.tensor_bytes(spec) <= pst.MAX_TENSOR_BYTES + 5 * 16 * spec.rank
    assert spec.oob_fill == "zero" or spec.dtype in FLOAT_DTYPES


@FAST
@given(pst.tensor_maps(kinds=("tiled", "im2col"), dtypes=tuple(DTYPES), swizzles=tuple(SWIZZLE),
                       interleaves=("none", "16B", "32B"), l2_promotions=("none", "64B", "128B", "256B"),
                       max_tensor_bytes=None, max_smem_bytes=MAX_BOX_BYTES))
def test_every_field_combination_drawn_validates(spec):
    assert spec.validate() is spec
    if spec.interleave != "none":
        assert spec.rank >= 3 and spec.kind == "tiled"
    if spec.interleave == "32B":
        assert spec.swizzle == "32B"


def test_the_full_domain_is_reached():
    seen = set()

    @settings(max_examples=400, deadline=None, database=None, derandomize=True)
    @given(pst.tensor_maps(kinds=("tiled", "im2col"), dtypes=tuple(DTYPES), swizzles=tuple(SWIZZLE),
                           interleaves=("none", "16B", "32B"), max_tensor_bytes=None))
    def draw(spec):
        seen.update({("kind", spec.kind), ("interleave", spec.interleave), ("swizzle", spec.swizzle),
                     ("big", spec.dims[-1] > 2**20), ("estride", max(spec.estrides) > 1)})

    draw()
    assert {("kind", "im2col"), ("interleave", "32B"), ("interleave", "16B"), ("swizzle", "128B_atom_64B"),
            ("big", True), ("estride", True)} <= seen


@FAST
@given(pst.tensor_maps(), st.booleans(), st.data())
def test_box_coords_keep_the_hardware_rules_and_cross_edges(spec, negative, data):
    coords = data.draw(pst.box_coords(spec, negative=negative))
    assert len(coords) == spec.rank and coords[0] * spec.elem_bytes % 16 == 0
    assert negative or min(coords) >= 0
    ref.load_box(spec, np.zeros(pt.tensor_bytes(spec), np.uint8), coords)      # the model accepts them


def test_box_coords_reach_inside_crossing_and_outside():
    where = set()
    spec = Spec(dtype="f32", dims=(16, 10), strides=(64,), box=(8, 8))

    @settings(max_examples=600, deadline=None, database=None, derandomize=True)
    @given(pst.box_coords(spec))
    def draw(coords):
        inside = ref.element_offsets(spec, coords)[1]
        where.add("inside" if inside.all() else "crossing" if inside.any() else "outside")
        where.add("negative" if min(coords) < 0 else "non-negative")

    draw()
    assert where == {"inside", "crossing", "outside", "negative", "non-negative"}


@FAST
@given(pst.tensor_maps(kinds=("im2col",), ranks=(3, 5)), st.data())
def test_im2col_coords_are_what_the_model_takes(spec, data):
    coords, offsets = data.draw(pst.im2col_coords(spec))
    gmem = np.zeros(pt.tensor_bytes(spec), np.uint8)
    assert pt.smem_after_load(spec, gmem, coords, offsets=offsets).size == ref.smem_layout(spec)[0]


def test_coordinate_strategies_refuse_the_other_kind():
    tiled = Spec(dtype="f32", dims=(4,), strides=(), box=(4,))
    with pytest.raises(ValueError, match="im2col_coords"):
        pst.box_coords(Spec(dtype="f32", dims=(4, 4, 1), strides=(16, 64), box=(), kind="im2col",
                            lower_corner=(0,), upper_corner=(0,), channels_per_pixel=4,
                            pixels_per_column=1))
    with pytest.raises(ValueError, match="box_coords"):
        pst.im2col_coords(tiled)


@FAST
@given(pst.dtypes(), pst.shapes(), st.data())
def test_shapes_and_strides_make_maps(dtype, shape, data):
    strides = data.draw(pst.strides(shape, dtype))
    assert strides[-1] == DTYPES[dtype][1] and all(s % 16 == 0 for s in strides[:-1])
    spec = TensorMapSpec.tiled_for(shape, dtype, tuple(min(s, 2) for s in shape[:-1]) + (16,), strides=strides)
    assert spec.dims == tuple(reversed(shape))


@FAST
@given(pst.dtypes(reduce_op="and"), pst.dtypes(floats=True), pst.dtypes(floats=False))
def test_dtypes_filters(anded, floating, integer):
    assert anded in ref.REDUCE_TYPES["and"] and floating in FLOAT_DTYPES and integer not in FLOAT_DTYPES


def test_dtypes_says_when_nothing_is_left():
    with pytest.raises(ValueError, match="nothing left"):
        pst.dtypes(("u8",), floats=True)


@FAST
@given(pst.launch_shapes(cluster=None))
def test_launch_shapes_are_within_the_limits(launch):
    x, y, z = launch.block
    assert x % 32 == 0 and x * y * z <= 1024 and z <= 64
    if launch.cluster is not None:
        cx, cy, cz = launch.cluster
        assert cx * cy * cz <= 8
        assert all(g % c == 0 for g, c in zip(launch.grid, launch.cluster))


@FAST
@given(pst.clusters(max_ctas=16, dims=2))
def test_clusters(dims):
    assert dims[0] * dims[1] * dims[2] <= 16 and dims[2] == 1


@FAST
@given(pst.tma_cases())
def test_tma_cases_keep_the_harness_rules(case):
    spec = case.spec().validate()
    assert case.coords[0] * spec.elem_bytes % 16 == 0
    assert case.op in ("load", "multicast") or min(case.coords) >= 0
    assert ref.smem_layout(spec)[0] <= pst.MAX_SMEM_BYTES


# --- tensors and oracles -----------------------------------------------------------------------

@FAST
@given(pst.tensor_maps(element_strides=False), st.data())
def test_a_box_inside_the_tensor_is_the_numpy_slice_of_tensor_view(spec, data):
    """smem_after_load of an in-bounds box is the slice of tensor_view (swizzle undone)."""
    coords = data.draw(pst.box_coords(spec, negative=False))
    if any(c + b > d for c, b, d in zip(coords, spec.box, spec.dims)):
        return
    buf = pt.random_tensor(spec, seed=data.draw(st.integers(0, 99)))
    view = pt.tensor_view(spec, buf)
    box = view[tuple(slice(c, c + b) for c, b in reversed(list(zip(coords, spec.box))))]
    smem = pt.smem_after_load(spec, buf, coords)
    assert ref.smem_elements(spec, smem).tobytes() == np.ascontiguousarray(box).tobytes()


def test_oracles_read_the_tensor_at_an_offset_and_keep_the_rest():
    spec = Spec(dtype="u32", dims=(8, 2), strides=(32,), box=(4, 2))
    buf = np.arange(32, dtype=np.uint32)              # 16 bytes of guard, then the tensor
    smem = pt.smem_after_load(spec, buf, (4, 0), offset=16, window=64, fill=0xEE)
    assert smem[:32].view(np.uint32).tolist() == [8, 9, 10, 11, 16, 17, 18, 19]
    assert smem[32:].tolist() == [0xEE] * 32
    image = np.arange(100, 108, dtype=np.uint32).view(np.uint8)
    out = pt.gmem_after_store(spec, buf, (4, 1), image, offset=16)
    assert out.dtype == buf.dtype and out[16:20].tolist() == [100, 101, 102, 103]
    assert np.delete(out, range(16, 20)).tolist() == np.delete(buf, range(16, 20)).tolist()
    added = pt.gmem_after_reduce(spec, buf, (0, 0), np.ones(8, np.uint32).view(np.uint8), "add", offset=16)
    assert added[4:8].tolist() == [5, 6, 7, 8] and added[12:16].tolist() == [13, 14, 15, 16]
    both = pt.smem_after_multicast(spec, buf, (0, 0), 0b01, 2, offset=16, fill=7)
    assert both[0].view(np.uint32).tolist() == [4, 5, 6, 7, 12, 13, 14, 15] and both[1].tolist() == [7] * 32


def test_smem_diff_names_row_chunk_swizzle_and_box_elements():
    spec = Spec(dtype="f32", dims=(64, 8), strides=(256,), box=(32, 8), swizzle="128B")
    expected = pt.smem_after_load(spec, np.arange(512, dtype=np.float32), (0, 0), window=2048, fill=0xA5)
    got = expected.copy()
    got[5 * 128 + 16 * (2 ^ 5)] ^= 0xFF               # box row 5, its chunk 2, stored at chunk 2 ^ 5
    got[1024 + 3] = 0                                  # past the box
    with pytest.raises(pt.MemoryMismatch) as info:
        pt.assert_smem_equal(expected, got, spec)
    text = str(info.value)
    assert text.startswith("shared memory differs in 2 of 128 16-byte chunks (2 bytes)")
    assert "128B swizzle: chunk c of 128-byte line l is stored at chunk c ^ (l % 8)" in text
    assert "row 5, chunk 7 (offset 0x2f0), swizzled from chunk 2: box[x=8..11, y=5]" in text
    assert "expected  " in text and "(328.0, 329.0, 330.0, 331.0)" in text
    assert "offset 0x400: past the box (it ends at 0x400)" in text
    assert info.value.chunks == [0x2F0, 0x400]
    pt.assert_smem_equal(expected, expected.copy(), spec)


def test_gmem_diff_names_numpy_index_padding_and_guards():
    spec = Spec(dtype="u16", dims=(10, 3), strides=(32,), box=(8, 3))
    buf = np.zeros(16 + 96 + 16, np.uint8)
    got = buf.copy()
    got[16 + 32 + 2] = 1            # tensor[1, 1]
    got[16 + 64 + 24] = 1           # row 2, element 12: past dims[0] = 10
    got[0] = 1                      # the guard before
    with pytest.raises(pt.MemoryMismatch) as info:
        pt.assert_global_equal(buf, got, spec, offset=16, name="out")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("out differs in 3 16-byte chunks (3 of 128 bytes)")
    assert "  16 bytes before the tensor" in lines
    assert "  offset 0x20: tensor[1, 0:8]" in lines
    assert "  offset 0x50: tensor[2, 8:16] (reaches past dims[0]=10 into the row's padding)" in lines


def test_gmem_diff_without_a_spec_uses_the_array_shape():
    a = np.zeros((4, 8), np.float32)
    b = a.copy()
    b[2, 5] = 1.5
    with pytest.raises(AssertionError, match=r"offset 0x50: element \[2, 4\]"):
        pt.assert_global_equal(a, b)
    with pytest.raises(pt.MemoryMismatch, match="expected 128 bytes, got 64"):
        pt.assert_global_equal(a, b[:2])


# --- snippets ----------------------------------------------------------------------------------

MODULE = '''
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Shape:
    rows: int = 1
    cols: int = 1
    tag: str = "x"
    dims: tuple = (1,)

def check(shape, scale=1, extra=None):
    print("called", repr(shape), scale, extra)
'''


def test_a_snippet_imports_what_it_names_and_runs_in_a_fresh_interpreter(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "userchk.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.chdir(tmp_path)
    import userchk

    code = pt.snippet(userchk.check, userchk.Shape(rows=3, dims=(2, 5)), scale=np.int64(2),
                      extra=[userchk.Shape(), {"k": (1,)}])
    assert code.splitlines() == [
        f"# reproduce (from {tmp_path}):",
        "import sys; sys.path.insert(0, 'mods')",
        "from userchk import Shape, check",
        "import numpy as np",
        "check(Shape(rows=3, dims=(2, 5)), scale=np.int64(2), extra=[Shape(), {'k': (1,)}])"]
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "called Shape(rows=3, cols=1, tag='x', dims=(2, 5)) 2 [Shape(rows=1, cols=1, " \
                                 "tag='x', dims=(1,)), {'k': (1,)}]"


def test_a_snippet_needs_an_importable_function():
    def local():
        pass

    with pytest.raises(ValueError, match="not importable by name"):
        pt.snippet(local)


def test_reproducible_outside_hypothesis_adds_the_snippet_to_the_failure():
    case = pt.TmaCase(op="load", dtype="f32", dims=(4,), strides=(), box=(4,), coords=(0,))
    with pytest.raises(ZeroDivisionError) as info:
        pt.reproducible(_fails, case)
    notes = getattr(info.value, "__notes__", [])
    assert sys.version_info < (3, 11) or notes[-1].endswith(
        "_fails(TmaCase(op='load', dtype='f32', dims=(4,), strides=(), box=(4,), coords=(0,)))")
    assert pt.reproducible(abs, -3) == 3


def _fails(case):
    return 1 // 0


def test_snippet_reprs_default_fields_away():
    case = pt.TmaCase(op="store", dtype="u8", dims=(33,), strides=(), box=(32,), coords=(16,))
    assert pt.reproduce._short(case) == "TmaCase(op='store', dtype='u8', dims=(33,), strides=(), box=(32,), coords=(16,))"
    assert eval(pt.reproduce._short(case), {"TmaCase": pt.TmaCase}) == case
    assert dataclasses.replace(case, fill=0).fill == 0
