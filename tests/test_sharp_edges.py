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
