"""MatrixLayout and k.matrix_descriptor: the verified templates, the worked example's descriptor values and K
steps, one test per rule, the tensor-map bridge, and the PTX the builder helper emits (assembled)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import assemble
from ptxdsl.descriptor import (ELEMENT_BITS, FIELD_MAX, K_STEP, MatrixDescriptor, MatrixLayout, encode,
                               tensormap_mismatches)
from ptxdsl.errors import DSLError, LayoutError
from ptxdsl.tensormap import TensorMapSpec

# The verified templates (bf16 tiles of 64 or 128 rows x 64 K, start field 0), as (layout, LBO, SBO, template).
TEMPLATES = [
    (MatrixLayout("bf16", 64, 64, "128B"), 16, 1024, 0x4000004000010000),
    (MatrixLayout("bf16", 128, 64, "128B"), 16, 1024, 0x4000004000010000),
    (MatrixLayout("bf16", 64, 64, "64B"), 16, 512, 0x8000002000010000),
    (MatrixLayout("bf16", 64, 64, "32B"), 16, 256, 0xC000001000010000),
    (MatrixLayout("bf16", 64, 64, "none"), 1024, 128, 0x0000000800400000),
    (MatrixLayout("bf16", 128, 64, "128B", "MN"), 8192, 1024, 0x4000004002000000),
    (MatrixLayout("bf16", 64, 64, "64B", "MN"), 4096, 512, 0x8000002001000000),
    (MatrixLayout("bf16", 64, 64, "32B", "MN"), 2048, 256, 0xC000001000800000),
    (MatrixLayout("bf16", 64, 64, None, "MN"), 1024, 128, 0x0000000800400000),
]


@pytest.mark.parametrize("layout, lbo, sbo, template", TEMPLATES,
                         ids=[f"{t[0].major}-{t[0].swizzle}-{t[0].rows}" for t in TEMPLATES])
def test_verified_templates(layout, lbo, sbo, template):
    assert (layout.lbo, layout.sbo, layout.template) == (lbo, sbo, template)


def test_worked_example_descriptors_and_k_steps():
    """A 64x64 and a 256x64 bf16 K-major 128B tile at 0x400 and 0x2400: the descriptors the H200 ran with."""
    a, b = MatrixLayout("bf16", 64, 64, "128B"), MatrixLayout("bf16", 256, 64, "128B")
    assert a.nbytes == 8192 and b.nbytes == 32768
    assert [a.descriptor(0x400 + a.k_offset(j)) for j in range(4)] == [
        0x4000004000010040, 0x4000004000010042, 0x4000004000010044, 0x4000004000010046]
    assert [b.descriptor(0x2400 + b.k_offset(j)) for j in range(4)] == [
        0x4000004000010240, 0x4000004000010242, 0x4000004000010244, 0x4000004000010246]
    # element A[m][k] sits at m*128 + ((k/8) ^ (m%8))*16 + (k%8)*2 once swizzled; before the swizzle, m*128 + 2k
    assert a.byte_offset(5, 17) == 5 * 128 + 34


@pytest.mark.parametrize("swizzle, offsets", [
    ("128B", [0, 32, 64, 96, 64 * 128, 64 * 128 + 32, 64 * 128 + 64, 64 * 128 + 96]),      # 2 atom columns
    ("64B", [0, 32, 64 * 64, 64 * 64 + 32, 2 * 64 * 64, 2 * 64 * 64 + 32, 3 * 4096, 3 * 4096 + 32]),
    ("32B", [j * 64 * 32 for j in range(8)]),
    ("none", [j * 2 * 1024 for j in range(8)]),
])
def test_k_step_offsets_k_major(swizzle, offsets):
    lay = MatrixLayout("bf16", 64, 128, swizzle)
    assert [lay.k_offset(j) for j in range(lay.k_steps)] == offsets


def test_k_step_offsets_mn_major():
    assert [MatrixLayout("f16", 64, 64, "128B", "MN").k_offset(j) for j in range(4)] == [0, 2048, 4096, 6144]
    assert [MatrixLayout("f16", 64, 64, "none", "MN").k_offset(j) for j in range(4)] == [0, 2048, 4096, 6144]


@pytest.mark.parametrize("dtype", list(ELEMENT_BITS))
def test_every_type_steps_32_bytes_of_k(dtype):
    lay = MatrixLayout(dtype, 64, 2 * K_STEP[dtype], "128B" if ELEMENT_BITS[dtype] * K_STEP[dtype] * 2 <= 1024
                       else "none")
    assert lay.k_steps == 2 and lay.k_offset(1) in (32, 2 * lay.lbo)


# ---------------------------------------------------------------------------------------------------- rules

RULES = [
    (dict(dtype="f64"), "layout.dtype", "dtype='f64'"),
    (dict(swizzle="128B_atom_32B"), "layout.swizzle", "swizzle='128B_atom_32B'"),
    (dict(major="N"), "layout.major", "major='N'"),
    (dict(dtype="e4m3", k=64, major="MN"), "layout.mn-major-type", "major='MN'"),
    (dict(rows=0), "layout.extent", "rows=0"),
    (dict(rows=60), "layout.rows", "rows=60"),
    (dict(k=24), "layout.k-steps", "k=24"),
    (dict(k=96), "layout.swizzle-span", "k=96 (192 bytes)"),
    (dict(rows=24, major="MN", swizzle="32B"), "layout.swizzle-span", "rows=24 (48 bytes)"),
    (dict(sbo=1000), "layout.field-align", "sbo=1000"),
    (dict(sbo=FIELD_MAX + 16), "layout.field-range", f"sbo={FIELD_MAX + 16}"),
    (dict(lbo=-16, swizzle="none"), "layout.field-range", "lbo=-16"),
    (dict(sbo=512), "layout.overlap", "sbo=512"),
    (dict(swizzle="none", lbo=128, sbo=128), "layout.overlap", "(lbo, sbo)=(128, 128)"),
    (dict(base_offset=8), "layout.base-offset", "base_offset=8"),
    (dict(rows=256, k=512), "layout.size", "nbytes=262144"),
]


@pytest.mark.parametrize("change, rule, shown", RULES, ids=[r[1] + "-" + r[2] for r in RULES])
def test_each_rule_names_field_and_rule(change, rule, shown):
    kw = dict(dtype="bf16", rows=64, k=64, swizzle="128B", major="K") | change
    with pytest.raises(LayoutError) as info:
        MatrixLayout(**kw)
    err = info.value
    assert isinstance(err, DSLError)
    assert err.rule == rule and shown in err.message and "breaks '" in err.message, str(err)
    assert err.loc is not None and err.loc.file == __file__


def test_padded_rows_are_allowed():
    lay = MatrixLayout("bf16", 64, 64, "128B", sbo=2048)
    assert lay.template == 0x4000008000010000 and lay.nbytes == 7 * 2048 + 1024


def test_k_step_range_and_element_range():
    lay = MatrixLayout("bf16", 64, 64)
    for bad in (-1, 4, 1.0):
        with pytest.raises(LayoutError, match="descriptor.k-step"):
            lay.k_offset(bad)
    with pytest.raises(LayoutError, match="layout.element"):
        lay.byte_offset(64, 0)
    with pytest.raises(LayoutError, match="descriptor.align"):
        lay.descriptor(0x408)


# ------------------------------------------------------------------------------------------- tensor maps

def _spec(dtype="bf16", box=(64, 64), swizzle="128B", dims=(256, 256)):
    eb = {"bf16": 2, "f16": 2, "u8": 1, "f32": 4, "tf32": 4}[dtype]
    return TensorMapSpec(dtype=dtype, dims=dims, strides=(dims[0] * eb,), box=box, swizzle=swizzle)


def test_for_tensormap_k_major_and_mn_major():
    spec = _spec()
    assert MatrixLayout.for_tensormap(spec) == MatrixLayout("bf16", 64, 64, "128B")
    assert MatrixLayout.for_tensormap(spec, boxes=2) == MatrixLayout("bf16", 64, 128, "128B")
    assert MatrixLayout.for_tensormap(spec, major="MN", boxes=2) == MatrixLayout("bf16", 128, 64, "128B", "MN")
    assert MatrixLayout.for_tensormap(_spec("u8", (128, 64)), "e4m3") == MatrixLayout("e4m3", 64, 128, "128B")
    for lay, boxes in ((MatrixLayout.for_tensormap(spec, boxes=2), 2), (MatrixLayout("bf16", 64, 64), 1)):
        assert tensormap_mismatches(lay, spec, boxes) == []


def test_for_tensormap_refuses_what_it_cannot_place():
    with pytest.raises(LayoutError, match="layout.tensormap"):
        MatrixLayout.for_tensormap(_spec(box=(32, 64)), boxes=2)       # half-span boxes do not stack
    with pytest.raises(LayoutError, match="layout.dtype"):
        MatrixLayout.for_tensormap(_spec("f32", (32, 64)))


def test_mismatches_name_each_disagreement():
    lay = MatrixLayout("f16", 128, 32, "64B")
    found = tensormap_mismatches(lay, _spec())
    assert len(found) == 4, found
    assert found[0].startswith("swizzle: the layout says '64B', the tensor map writes '128B'")
    assert found[1].startswith("element type: the layout holds f16, the tensor map moves bf16")
    assert found[2].startswith("box width") and found[3] == "box rows: box[1] = 64, the layout's rows = 128"


# ------------------------------------------------------------------------------------------------ device

def test_matrix_descriptor_emits_three_instructions_and_one_add_per_k_step():
    lay = MatrixLayout("bf16", 64, 64, "128B")
    with px.kernel("desc", reqntid=128, arch="sm_90a") as k:
        k.shared("pad", 16)
        a = k.shared("a", 8192, align=1024)
        d = k.matrix_descriptor(a, lay)
        steps = [d.advance_k(j) for j in range(4)]
        out = k.param_ptr("out")
        for j, s in enumerate(steps):
            k.st(px.u64, px.Addr(out, 8 * j), s.reg)
    body = [line.strip() for line in k.ptx().splitlines() if line.startswith("\t") and not line.startswith("\t.")]
    assert body[:6] == ["mov.u64 %rd1, a;", "shr.u64 %rd2, %rd1, 4;",
                        f"add.u64 %rd3, %rd2, {0x4000004000010000};", "add.u64 %rd4, %rd3, 2;",
                        "add.u64 %rd5, %rd3, 4;", "add.u64 %rd6, %rd3, 6;"]
    assert isinstance(d, MatrixDescriptor) and d.buffer is a and d.layout is lay and d.offset == 0
    assert [s.offset for s in steps] == [0, 32, 64, 96] and steps[0] is d
    assemble(k.ptx())


def test_matrix_descriptor_offsets_and_register_steps():
    lay = MatrixLayout("bf16", 64, 64, "32B")
    with px.kernel("desc2", reqntid=128, arch="sm_90a") as k:
        ring = k.shared("ring", 4 * 8192, align=1024, dynamic=True)
        d = k.matrix_descriptor(ring, lay, offset=8192)
        stage = k.and_(k.tid_x(), 3)
        s = d.advance(stage, stride=8192)
        j = k.shr(k.tid_x(), 5)
        step = s.advance_k(j)
        out = k.param_ptr("out")
        k.st(px.u64, out, step.reg)
        off = k.mul(stage, 8192)
        k.st(px.u64, out, k.matrix_descriptor(ring, lay, offset=off).reg)
    text = k.ptx()
    assert f"add.u64 %rd3, %rd2, {0xC000001000010000 + 512};" in text
    assert "mad.wide.u32 %rd4, %r2, 512, %rd3;" in text           # stage * 8192 bytes
    assert "mad.wide.u32 %rd5, %r4, 128, %rd4;" in text           # K step j * 2048 bytes (one 32B atom column)
    assert d.offset == 8192 and s.offset is None and step.offset is None
    assemble(text)


DEVICE_RULES = [
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=512), MatrixLayout("bf16", 64, 64)),
     "descriptor.swizzle-align", "b.align=512"),
    (lambda k: k.matrix_descriptor(k.shared("b", 16384, align=1024), MatrixLayout("bf16", 64, 64), offset=256),
     "descriptor.swizzle-align", "offset=256"),
    (lambda k: k.matrix_descriptor(k.shared("b", 16384, align=1024), MatrixLayout("bf16", 64, 64, "none"),
                                   offset=8),
     "descriptor.align", "offset=8"),
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=8), MatrixLayout("bf16", 64, 64, "none")),
     "descriptor.align", "b.align=8"),
    (lambda k: k.matrix_descriptor(k.shared("b", 4096, align=1024), MatrixLayout("bf16", 64, 64)),
     "descriptor.fits", "offset=0"),
    (lambda k: k.matrix_descriptor(k.mbarrier("m"), MatrixLayout("bf16", 64, 64)), "descriptor.buffer", "buf="),
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=1024), "128B"), "descriptor.layout", "layout="),
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=1024), MatrixLayout("bf16", 64, 64)).advance_k(4),
     "descriptor.k-step", "j=4"),
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=1024), MatrixLayout("bf16", 64, 64)).advance(8),
     "descriptor.advance", "nbytes=8"),
    (lambda k: k.matrix_descriptor(k.shared("b", 8192, align=1024), MatrixLayout("bf16", 64, 64)).advance(8192),
     "descriptor.fits", "offset=8192"),
    (lambda k: k.matrix_descriptor(k.shared("b", 16384, align=1024), MatrixLayout("bf16", 64, 128))
     .advance_k(k.tid_x()), "descriptor.k-step", "evenly spaced"),
]


@pytest.mark.parametrize("build, rule, shown", DEVICE_RULES, ids=[f"{r[1]}-{r[2]}" for r in DEVICE_RULES])
def test_device_rules(build, rule, shown):
    k = px.kernel("bad", reqntid=128, arch="sm_90a")
    with pytest.raises(LayoutError) as info:
        build(k)
    assert info.value.rule == rule and shown in info.value.message, str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_base_offset_lets_a_tile_start_off_its_repeat():
    with px.kernel("based", reqntid=128, arch="sm_90a", verify=False) as k:
        b = k.shared("b", 16384, align=1024)
        d = k.matrix_descriptor(b, MatrixLayout("bf16", 64, 64, base_offset=2), offset=256)
    assert d.offset == 256 and d.layout.template >> 49 & 7 == 2


# ----------------------------------------------------------------------------------------------- properties

@st.composite
def layouts(draw):
    dtype = draw(st.sampled_from(sorted(ELEMENT_BITS)))
    major = draw(st.sampled_from(["K", "MN"])) if dtype in ("bf16", "f16") else "K"
    swizzle = draw(st.sampled_from(["none", "32B", "64B", "128B"]))
    rows = 8 * draw(st.integers(1, 32))
    steps = draw(st.integers(1, 8))
    k = K_STEP[dtype] * steps
    run = (k if major == "K" else rows) * ELEMENT_BITS[dtype] // 8
    w = {"none": 16, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    if swizzle != "none" and (run > w and run % w or run % 16):
        swizzle = "none"
    try:
        return MatrixLayout(dtype, rows, k, swizzle, major)
    except LayoutError as e:                       # only a too-large tile may be refused
        assert e.rule == "layout.size"
        return MatrixLayout(dtype, 8, K_STEP[dtype], swizzle if swizzle != "none" else "none", "K")


@given(layouts())
def test_canonical_placement_is_dense_and_inside_nbytes(lay):
    chunks = lay.chunk_offsets()
    assert len(set(chunks)) == len(chunks)
    assert min(chunks) == 0 and max(chunks) + 16 <= lay.nbytes
    # every byte of every row lies inside the tile's span and the descriptor's fields hold LBO and SBO
    assert lay.template >> 16 & 0x3FFF == encode(lay.lbo) and lay.template >> 32 & 0x3FFF == encode(lay.sbo)
    assert all(0 <= lay.k_offset(j) < lay.nbytes for j in range(lay.k_steps))


@given(layouts(), st.data())
def test_byte_offset_agrees_with_k_steps(lay, data):
    """Element (row 0, first K of step j) sits where step j starts (K-major), or step j's first 8-row group
    (MN-major)."""
    j = data.draw(st.integers(0, lay.k_steps - 1))
    assert lay.byte_offset(0, j * lay.k_step) == lay.k_offset(j)


def test_at_row_keeps_the_tiles_k_steps():
    """The second consumer's A (rows 64-127) of a 128 x 128 K tile loaded as two 128B boxes: +8192 bytes, and
    K step 4 is in the second atom column of the whole tile (+16384), not of a 64-row tile (+8192)."""
    lay = MatrixLayout("bf16", 128, 128, "128B")
    with px.kernel("rows", reqntid=256, arch="sm_90a") as k:
        a = k.shared("a", lay.nbytes, align=1024, dynamic=True)
        top = k.matrix_descriptor(a, lay)
        second = top.at_row(64)
        steps = [second.advance_k(j) for j in range(lay.k_steps)]
        out = k.param_ptr("out")
        k.st(px.u64, out, steps[-1].reg)
    assert second.offset == 8192 and second.layout is lay
    assert [s.offset for s in steps] == [8192 + lay.k_offset(j) for j in range(8)]
    assert steps[4].offset == 8192 + 16384
    assert top.at_row(0) is top
    with pytest.raises(LayoutError, match="descriptor.row"):
        top.at_row(60)
    mn = MatrixLayout("bf16", 128, 64, "128B", "MN")
    with px.kernel("rows2", reqntid=128, arch="sm_90a", verify=False) as k:
        d = k.matrix_descriptor(k.shared("b", mn.nbytes, align=1024, dynamic=True), mn)
        assert d.at_row(64).offset == mn.lbo
        with pytest.raises(LayoutError, match="group of 64"):
            d.at_row(8)


def test_repr_is_the_constructor_call():
    assert repr(MatrixLayout("bf16", 64, 64)) == "MatrixLayout('bf16', 64, 64, '128B', 'K')"
    padded = MatrixLayout("f16", 64, 64, "none", "MN", lbo=2048, sbo=256)
    assert repr(padded) == "MatrixLayout('f16', 64, 64, 'none', 'MN', lbo=2048, sbo=256)"
    with pytest.raises(LayoutError, match="layout.field-type"):
        MatrixLayout("bf16", 64, 64, sbo="1024")
