"""Nothing but a ptxdsl error escapes the public API, and what it accepts, ptxas accepts.

Hypothesis calls every KernelBuilder method (the generated ones and the hand-written ones) and the kernel
options with arguments drawn from a hostile pool: None, negatives, huge and non-finite numbers, numpy
scalars, strings, registers of every class, buffers, parameters, labels and tuples of the wrong length.
Each call either builds or raises a PtxdslError subclass with a location; every kernel that builds emits
and assembles with nvJitLink.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.builder import KernelBuilder
from ptxdsl.errors import PtxdslError

STRUCTURAL = {"if_", "else_", "loop", "elect_one", "guard", "allow", "at", "finish", "ptx", "op"}
METHODS = sorted(name for name, fn in inspect.getmembers(KernelBuilder, callable)
                 if not name.startswith("_") and name not in STRUCTURAL)


class Pool:
    """The values one kernel offers to the drawn calls (made up front, so a draw picks an index)."""

    def __init__(self, k):
        self.k = k
        gptr = k.param_ptr("g")
        smem = k.shared("smem", 4096, align=1024)
        bar = k.mbarrier("bar", 2)
        self.values = [
            None, 0, 1, -1, 7, 31, 64, 255, 256, 4096, 2**31, 2**32, 2**40, 2**64, 2**70, -2**63,
            0.5, 1.0, -0.0, 1e39, math.inf, math.nan, True, False,
            np.int8(5), np.uint8(200), np.int64(2**40), np.float32(0.25),
            "u32", "f32", "b64", "pred", "bogus", "", "shared::cta", "global", "release", "cta", "tile", "add",
            px.u32, px.f32, px.s64, px.bf16, px.pred,
            k.mov(3, px.u32), k.mov(5, px.s32), k.mov(1.5, px.f32), k.mov(2.5, px.f64), k.mov(9, px.u64),
            k.mov(1, px.b16), k.setp("eq", k.mov(sreg.tid_x), 0), gptr, k.cvta(gptr, "global"), smem, smem.at(128),
            bar, bar.at(8), k.mov(bar), k.param_tensormap("tm"), sreg.tid_x, k.label("L"),
            (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4, 5, 6), (gptr,), [3, 4],
        ]


def _call(k, pool, name, picks):
    fn = getattr(k, name)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    args, kwargs = [], {}
    for p, pick in zip((p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD), picks):
        if pick is None:
            if p.default is not inspect.Parameter.empty:
                continue
            pick = 1                            # a required parameter always gets a value
        v = pool.values[pick % len(pool.values)]
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = v
        else:
            args.append(v)
    try:
        fn(*args, **kwargs)
    except PtxdslError as e:
        assert e.loc is not None, f"{name}: {e} has no location"


call = st.tuples(st.sampled_from(METHODS), st.lists(st.one_of(st.none(), st.integers(0, 200)), min_size=12,
                                                     max_size=12))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(call, min_size=1, max_size=12))
def test_builder_methods_raise_only_ptxdsl_errors_and_what_builds_assembles(calls):
    with px.kernel("fuzz", verify=False) as k:
        pool = Pool(k)
        for name, picks in calls:
            _call(k, pool, name, picks)
    ptx = px.emit(k)
    px.assemble(ptx, ptx.target.arch)


OPTIONS = st.fixed_dictionaries({}, optional={
    "reqntid": st.one_of(st.integers(-1, 2000), st.tuples(st.integers(0, 64), st.integers(0, 64))),
    "maxnreg": st.one_of(st.integers(-1, 300), st.just("x"), st.none()),
    "reqnctapercluster": st.one_of(st.integers(0, 20), st.tuples(st.integers(0, 5), st.integers(0, 5))),
    "arch": st.sampled_from(["sm_90", "sm_90a", "sm_100a", "sm_8", "", None, 90]),
    "ptx": st.sampled_from(["8.0", "7.8", "9.0", "99.9", "x", 8.6, None, (8, 3)]),
    "debug": st.sampled_from([True, False, 0.5, -1, "yes", None]),
    "verify": st.sampled_from([True, False]),
})


@settings(max_examples=200)
@given(st.sampled_from(["k", "", "1k", "a" * 300, "k-k", "__ptxdsl_x", None, 5]), OPTIONS)
def test_kernel_options_raise_only_ptxdsl_errors(name, options):
    try:
        with px.kernel(name, **options) as k:
            k.mov(1, px.u32)
        ptx = px.emit(k)
        px.assemble(ptx, ptx.target.arch)
    except PtxdslError:
        pass


@pytest.mark.parametrize("build", [
    lambda k: k.shared("s", 2**40),
    lambda k: k.shared("s", -1),
    lambda k: k.mbarrier("b", 10**9),
    lambda k: k.ld(px.u32, k.param_ptr("p"), vec=10**7),
    lambda k: k.param("p", None),
    lambda k: k.mov(1e39, px.f32),
    lambda k: k.mul(k.mov(1, px.u64), 3, mode="wide"),
    lambda k: k.bar_sync(0, k.mov(64, px.u32)),
    lambda k: k.add(1, 2, type=5),
    lambda k: k.add(1, 2, type=k.mov(1, px.u32)),
])
def test_reported_escapes_are_ptxdsl_errors_or_assemble(build):
    try:
        with px.kernel("t", verify=False) as k:
            build(k)
    except PtxdslError as e:
        assert e.loc is not None
        return
    ptx = px.emit(k)
    px.assemble(ptx, ptx.target.arch)


def test_a_tensormap_parameter_takes_a_spec_or_none():
    with pytest.raises(px.DSLError, match=r"spec='f32' breaks 'a TensorMapSpec or None'") as e:
        with px.kernel("t", verify=False) as k:
            k.param_tensormap("t", "f32")
    assert e.value.loc.file == __file__
    with pytest.raises(px.TensorMapError, match="box-range"):
        with px.kernel("t", verify=False) as k:
            k.param_tensormap("t", px.TensorMapSpec(dtype="f32", dims=(64,), strides=(), box=(512,)))


class _Interface:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


MAP_VALUES = [None, 0, 1, -1, 2, 16, 64, 256, 257, 2**31, 2**32, 2**40, 2**64, 1.5, math.nan, "x", "bf16", "f32",
              "u8", "128B", "none", True, np.int8(5), np.uint8(200), np.int64(64), np.float32(2.0), px.bf16, px.u32,
              (), (16,), (64, 64), (1, 2, 3, 4, 5, 6), [16, 16], (np.int8(100), np.int8(100)), (16.0, 16)]
ARRAYS = [np.zeros((64, 64), np.float32), 5, "a", None, object(), _Interface({}), _Interface({"shape": (4,)}),
          _Interface({"shape": (64, 64), "typestr": "<f4", "data": (0, False), "version": 3}),
          _Interface({"shape": (64, 64), "typestr": "<V2", "data": (4096, False), "version": 3}),
          _Interface({"shape": (64,), "typestr": "<f4", "data": 5, "version": 3}),
          _Interface({"shape": "x", "typestr": 3, "data": (4096, False)}), np.zeros((2, 3), dtype=object)]
value = st.sampled_from(MAP_VALUES)
TILED_OPTIONS = st.dictionaries(st.sampled_from(["strides", "element_strides", "swizzle", "interleave",
                                                 "l2_promotion", "oob_fill", "address"]), value, max_size=3)
IM2COL_OPTIONS = st.dictionaries(st.sampled_from(["strides", "element_strides", "swizzle", "oob_fill", "address"]),
                                 value, max_size=2)


def _map_or_error(make):
    """A spec the constructors return is valid (validate() accepts it again) and holds Python ints; a refusal
    is a ptxdsl error located at the test's call."""
    try:
        spec = make()
    except PtxdslError as e:
        assert e.loc is not None and e.loc.file == __file__, e
        return
    assert spec.validate() is spec
    assert all(type(v) is int for v in spec.dims + spec.strides + spec.box + spec.element_strides)


@settings(max_examples=300)
@given(value, value, value, TILED_OPTIONS)
def test_tiled_for_raises_only_ptxdsl_errors(shape, dtype, box, options):
    _map_or_error(lambda: px.TensorMapSpec.tiled_for(shape, dtype, box, **options))


@settings(max_examples=300)
@given(value, value, value, value, value, value, IM2COL_OPTIONS)
def test_im2col_for_raises_only_ptxdsl_errors(shape, dtype, cpp, ppc, lower, upper, options):
    _map_or_error(lambda: px.TensorMapSpec.im2col_for(shape, dtype, channels_per_pixel=cpp, pixels_per_column=ppc,
                                                      lower_corner=lower, upper_corner=upper, **options))


@settings(max_examples=200)
@given(st.sampled_from(ARRAYS), value, value, value, value)
def test_from_array_and_the_fields_raise_only_ptxdsl_errors(arr, box, dims, dtype, strides):
    _map_or_error(lambda: px.TensorMapSpec.from_array(arr, box))
    _map_or_error(lambda: px.TensorMapSpec(dims=dims, dtype=dtype, box=box, strides=strides).validate())
