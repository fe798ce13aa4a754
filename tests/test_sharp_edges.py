"""Inputs fuzzing found raising a raw Python exception (or accepted when they should not be): each is a ptxdsl
error naming the value and the rule. The launch checks' own (check_launch with None, a float or infinite
cluster or block) are in test_declared_launches.py."""
from fractions import Fraction

import numpy as np
import pytest

import ptxdsl as px


def raises(exc, rule, text, fn):
    with pytest.raises(exc) as e:
        fn()
    assert e.value.rule == rule, e.value
    assert text in str(e.value), e.value
    assert e.value.loc is not None and e.value.loc.file == __file__, e.value.loc


SPEC = px.TensorMapSpec.tiled_for((64, 64), "f32", (16, 16))


@pytest.mark.parametrize("fn, rule, text", [
    (lambda: px.TensorMapSpec.tiled_for((64,), "f32", np.array(16)), "tensormap.type",
     "box=array(16) breaks 'a sequence of integers'"),
    (lambda: px.TensorMapSpec(dtype="f32", dims=np.array(5), strides=(), box=(4,)), "tensormap.type",
     "dims=array(5) breaks 'a sequence of integers'"),
    (lambda: px.TensorMapSpec.im2col_for((1, 8, 8, 64), "bf16", lower_corner=(np.array([1, 2]),), upper_corner=(0,),
                                         channels_per_pixel=64, pixels_per_column=32), "tensormap.type",
     "lower_corner[0]=array([1, 2]) breaks 'an integer'"),
    (lambda: SPEC.bind(Fraction(16, 1)), "tensormap.type", "address=Fraction(16, 1) breaks 'an integer'"),
    (lambda: SPEC.bind(16.0), "tensormap.type", "address=16.0 breaks 'an integer'"),
    (lambda: SPEC.bind(-16), "tensormap.address", "address=-0x10 breaks 'a 64-bit device address'"),
    (lambda: SPEC.bind(1 << 64), "tensormap.address", "breaks 'a 64-bit device address'"),
])
def test_tensor_map_values_that_are_not_integers(fn, rule, text):
    raises(px.TensorMapError, rule, text, fn)


def test_bind_keeps_integer_addresses():
    assert SPEC.bind(np.uint64(256)).global_address == 256
    assert type(SPEC.bind(np.uint64(256)).global_address) is int


class StringPointer:
    """A torch-like tensor whose data_ptr() is not an integer."""

    shape, dtype, is_cuda = (64, 64), "float32", True

    def data_ptr(self):
        return "0x1000"

    def stride(self):
        return (64, 1)

    def element_size(self):
        return 4


def test_from_array_with_a_pointer_that_is_not_an_integer():
    raises(px.TensorMapError, "tensormap.array", "breaks 'a tensor's data_ptr() is an integer address (it returned "
           "'0x1000')'", lambda: px.TensorMapSpec.from_array(StringPointer(), (16, 16)))


def test_reg_of_none_is_not_an_f64_register():
    with px.kernel("r", verify=False) as k:
        raises(px.DSLError, "type.scalar", "type=None is not a PTX scalar type", lambda: k.reg(None))
        assert k.reg("f64").type is px.f64


# ------------------------------------------------- what ptxdsl accepts assembles; what ptxas takes is accepted

def edge_forms(arch=None, ptx=None):
    """One kernel with the forms ptxas was found to take that ptxdsl refused: generic mapa.u32 and
    getctarank.u32, cp.reduce.async.bulk .add.noftz.f32."""
    pinned = {"arch": arch, "ptx": ptx} if arch else {}
    with px.kernel("edges", reqntid=32, **pinned) as k:
        out = k.param_ptr("out")
        buf = k.shared("buf", 256, align=16)
        r = k.mov(0, px.u32)
        k.st(px.u32, out, k.mapa(r, 1, space=None))
        k.st(px.u32, out, k.getctarank(r, space=None))
        k.cp_reduce_async_bulk("add", out, buf, 256, type="f32", noftz=True, dst_space="global")
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group(0)
    return k


@pytest.mark.parametrize("arch, ptx", [(None, None), ("sm_90a", "9.4"), ("sm_100a", "9.5")])
def test_forms_ptxas_takes_are_accepted_and_assemble(arch, ptx):
    p = px.emit(edge_forms(arch, ptx))
    for line in ("mapa.u32 %r2, %r1, 1;", "getctarank.u32 %r3, %r1;",
                 "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f32 [%rd2], [buf], 256;"):
        assert line in p.text, line
    assert p.target.version in ("9.4", "9.5")         # .noftz with .f32 needs PTX ISA 9.4 (ptxas says so)
    assert px.assemble(p.text, arch or "sm_90a").cubin


def test_noftz_f32_below_its_ptx_version_is_a_target_error():
    with pytest.raises(px.TargetError, match="below the 9.4 that cp.reduce.async.bulk.*add.noftz.f32 needs"):
        edge_forms("sm_90a", "9.0")


def redux_f32(arch):
    with px.kernel("redux", reqntid=32, arch=arch) as k:
        out = k.param_ptr("out")
        k.st(px.f32, out, k.redux_sync("min", k.mov(1.0, px.f32, out=k.reg(px.f32))))
    return k


def test_redux_f32_is_refused_where_ptxas_refuses_it_and_assembles_where_declared():
    with pytest.raises(px.TargetError, match="redux.sync.min.f32"):
        redux_f32("sm_110a")
    for arch in ("sm_100a", "sm_103a"):
        assert px.assemble(px.emit(redux_f32(arch)).text, arch).cubin


def test_pending_count_of_a_constant_is_refused_before_ptxas_fails_inside_itself():
    with pytest.raises(px.VerifyError) as e:
        with px.kernel("pc", reqntid=32) as k:
            out = k.param_ptr("out")
            count = k.mbarrier_pending_count(k.mov(5, px.u64))
            with k.if_(k.setp("eq", count, 0)):
                k.st(px.u32, out, count)
    assert e.value.rule == "mbarrier-state-token" and "holds the constant 5" in str(e.value)
    with px.kernel("pc", reqntid=32) as k:             # a token an arrive returned, or one loaded, assembles
        out = k.param_ptr("out")
        bar = k.mbarrier("bar")
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            k.mbarrier_init(bar, 32)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        state = k.mbarrier_arrive(bar, state=True)
        k.st(px.u32, out, k.mbarrier_pending_count(state))
        k.st(px.u32, out, k.mbarrier_pending_count(k.ld(px.u64, out)))
        k.mbarrier_wait(bar, state=state)
    assert px.assemble(px.emit(k).text, "sm_90a").cubin


def test_a_tma_copy_through_a_map_in_a_register_round_trips_through_ptxd():
    from ptxdsl import lang

    k = px.kernel("tm", reqntid=32, verify=False)
    maps = k.param_ptr("maps")
    tile, bar = k.shared("tile", 8192, align=128), k.mbarrier("bar")
    ref = px.TensorMapRef(k.cvta(maps, "global"))
    k.cp_async_bulk_tensor(tile, ref, (0, 0), mbar=bar)
    k.cp_async_bulk_tensor(ref, tile, (0, 0))
    k = k.finish()
    text = lang.to_ptxd(k)
    assert "cp.async.bulk.tensor.2d [tile], [rd3, {0, 0}], [bar]" in text
    (again,) = lang.loads(text, "rt.ptxd", verify=False)
    assert px.emit(again).text == px.emit(k).text and lang.to_ptxd(again) == text


# ---------------------------------------------------------------- the suite with only the `test` extra installed

HIDE_NVDISASM = '''
import cuda.pathfinder as _pf
import ptxdsl.sass as _sass

_pf.find_nvidia_binary_utility = lambda name: None      # as with only the `test` extra: no nvdisasm anywhere
_sass._from_wheel = lambda: None
'''


@pytest.mark.parametrize("require, outcome", [(None, {"passed": 1, "skipped": 1}), ("1", {"passed": 1, "errors": 1})])
def test_nvdisasm_tests_skip_with_the_reason_without_the_sass_extra(pytester, monkeypatch, require, outcome):
    from pathlib import Path

    conftest = (Path(__file__).parent / "conftest.py").read_text()
    pytester.makeconftest(conftest.replace('pytest_plugins = ["ptxdsl.testing.plugin", "pytester"]', "") +
                          HIDE_NVDISASM)
    pytester.makeini("[pytest]\nmarkers =\n    nvdisasm: needs nvdisasm\n")
    pytester.makepyfile(test_it='''
import pytest
from ptxdsl import sass

@pytest.mark.nvdisasm
def test_needs_it():
    sass.nvdisasm_path()

def test_does_not():
    pass
''')
    if require:
        monkeypatch.setenv("PTXDSL_REQUIRE_NVDISASM", require)
    else:
        monkeypatch.delenv("PTXDSL_REQUIRE_NVDISASM", raising=False)
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(**outcome)
    if not require:
        result.stdout.fnmatch_lines(["*SKIPPED*nvdisasm is not installed*pip install 'ptxdsl?sass?'*"])


@pytest.mark.parametrize("dtype", [np.bool_, np.complex64])
def test_arrays_of_types_a_tensor_map_has_not_are_tensor_map_errors(dtype):
    """As docs/runtime.md says: a TensorMapError with rule tensormap.dtype naming the type."""
    raises(px.TensorMapError, "tensormap.dtype", f"dtype={np.dtype(dtype).name!r} breaks 'a tensor-map element type",
           lambda: px.TensorMapSpec.from_array(np.zeros((16, 16), dtype), (8, 8)))


def test_a_name_that_is_no_type_at_all_is_a_dsl_error_with_its_rule():
    raises(px.DSLError, "type.scalar", "type='nonsense' is not a PTX scalar type",
           lambda: px.TensorMapSpec.tiled_for((16, 16), "nonsense", (8, 8)))


# ------------------------------------------------------------------ one box convention, checked

def test_tile_coordinates_take_the_map_or_a_checked_pair():
    """tiled_for takes the box in numpy order (rows, columns), tile coordinates (columns, rows): given the map
    itself they cannot be swapped, and a swapped pair given with tmap= is an error naming the map's box."""
    from ptxdsl.pipeline import tile_box, tile_coords, tile_grid

    spec = px.TensorMapSpec.tiled_for((1024, 2048), "bf16", (16, 256))      # 16 rows x 256 columns
    assert spec.box == (256, 16) and tile_box(spec) == (256, 16)
    assert tile_grid(1024, 2048, spec) == tile_grid(1024, 2048, (256, 16)) == (8, 512)

    def ptx(box, **kw):
        with px.kernel("tc", reqntid=32, verify=False) as k:
            src = k.param_tensormap("src", spec)
            out = k.param_ptr("out")
            x, y = tile_coords(k, k.mov(px.sreg.ctaid_x), 8, src if box is None else box, **kw)
            k.st(px.u32, out, k.add(x, y))
        return px.emit(k).text

    assert ptx(None) == ptx((256, 16)) == ptx(spec) == ptx((256, 16), tmap=spec)
    with pytest.raises(px.DSLError) as e:
        ptx((16, 256), tmap=spec)
    assert e.value.rule == "pipeline.box-order"
    assert "box=(16, 256) is in numpy order (rows, columns): the map's box is 256 columns x 16 rows" in str(e.value)
    with pytest.raises(px.DSLError, match="not the map box"):
        ptx((64, 16), tmap=spec)
    with pytest.raises(px.DSLError, match="expected a tensor map .its spec's box. or a .columns, rows. pair"):
        tile_box("256x16")
    with px.kernel("nospec", verify=False) as k:
        bare = k.param_tensormap("bare")
        with pytest.raises(px.DSLError, match="tensor map 'bare' has no TensorMapSpec"):
            tile_coords(k, k.mov(0, px.u32), 8, bare)
