"""Typed operand slots in the builder: a float where an integer is needed and mixed-type arithmetic are DSL
errors that name both types and the user's line (the .ptxd side is in test_lang.py); registers print by class."""
import os

import pytest

import ptxdsl as px
from ptxdsl import sreg

HERE = os.path.basename(__file__)


def _error(build):
    with pytest.raises(px.DSLError) as info:
        with px.kernel("t", verify=False) as k:
            build(k)
    e = info.value
    assert e.loc is not None and os.path.basename(e.loc.file) == HERE
    return str(e)


def _f32(k):
    return k.mov(1.5, px.f32)


@pytest.mark.parametrize("build, words", [
    (lambda k: k.cp_async_bulk_tensor(k.shared("s", 4096, align=128), k.param_tensormap("m"), (_f32(k), 0),
                                      mbar=k.mbarrier("b")), ["coords[0]", ".s32", ".f32"]),
    (lambda k: k.mbarrier_wait(k.mbarrier("b"), parity=_f32(k)), ["parity", ".u32", ".f32"]),
    (lambda k: k.mbarrier_arrive_expect_tx(k.mbarrier("b"), _f32(k)), ["tx", ".u32", ".f32"]),
    (lambda k: k.ld(px.u32, k.mov(1.5, px.f64)), ["addr", ".f64", "integer register"]),
    (lambda k: k.add(_f32(k), k.mov(1, px.u32)), ["a=%f1 is .f32", "b=%r1 is .u32", "mixed types"]),
    (lambda k: k.add(k.mov(1, px.u32), _f32(k)), ["a=%r1 is .u32", "b=%f1 is .f32", "mixed types"]),
    (lambda k: k.add(k.mov(1, px.u32), k.mov(2, px.s32)), [".u32", ".s32", "type="]),
    (lambda k: k.add(k.mov(1, px.u32), _f32(k), type="u32"), ["expected an integer (.u32)", "float (.f32)"]),
    (lambda k: k.mul(_f32(k), k.mov(2.0, px.f64)), [".f32", ".f64"]),
    (lambda k: k.setp("lt", _f32(k), k.mov(1, px.s32)), [".f32", ".s32"]),
    (lambda k: k.shfl_sync("bfly", _f32(k), _f32(k)), ["shfl.sync b", ".u32", ".f32"]),
])
def test_type_errors_name_both_types_and_the_line(build, words):
    text = _error(build)
    for w in words:
        assert w in text, text


def test_explicit_type_and_conversions_build():
    with px.kernel("ok") as k:
        f = k.mov(1.5, px.f32)
        u = k.mov(3, px.u32)
        s = k.mov(-3, px.s32)
        k.add(u, s, type="s32")                          # signedness stated: allowed
        k.add(f, k.cvt(px.f32, u))                       # converted: allowed
        k.and_(k.mov(f, type="b32"), u)                  # bits reinterpreted with mov.b32: allowed
    text = px.emit(k).text
    assert "add.s32" in text and "cvt.rn.f32.u32 %f2, %r1;" in text and "mov.b32 %r" in text
    px.assemble(text, "sm_90a")


def test_registers_are_named_by_class():
    with px.kernel("regs") as k:
        k.mov(1.0, px.f32)
        k.mov(2.0, px.f64)
        k.mov(1, px.u32)
        k.mov(1, px.u64)
        k.mov(1.0, px.bf16)
        k.setp("eq", k.mov(sreg.tid_x), 0)
    text = px.emit(k).text
    for decl in (".reg .pred \t%p<2>;", ".reg .b16 \t%rs<2>;", ".reg .b32 \t%r<3>;", ".reg .b64 \t%rd<2>;",
                 ".reg .f32 \t%f<2>;", ".reg .f64 \t%fd<2>;"):
        assert decl in text, text
    assert "mov.b16 %rs1, 0x3F80;" in text          # a bf16 constant moves as its bits
    px.assemble(text, "sm_90a")
