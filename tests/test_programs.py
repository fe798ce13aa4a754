"""Random programs: every op family (drawn from the declarations), nested under if/else, loops, elect_one and
guards, with tensor maps of rank 1-5 described by TensorMapSpecs. Each program builds (or raises a ptxdsl
error, never anything else), assembles with nvJitLink, and prints to .ptxd and reads back to the same IR
and the same PTX.

    PTXDSL_PROGRAMS=20000 python -m pytest tests/test_programs.py    # a longer run
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import declared as D
import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.errors import PtxdslError, TargetError
from ptxdsl.isa.decl import OPS
from test_lang import assert_round_trip

PROGRAMS = int(os.environ.get("PTXDSL_PROGRAMS", "2000"))
PER_EXAMPLE = 10                       # programs (kernels) per drawn module
VALID = {cls: D.valid(cls) for cls in OPS}


@st.composite
def combination(draw):
    cls = draw(st.sampled_from([c for c in OPS if VALID[c]]))
    q = dict(draw(st.sampled_from(VALID[cls])))
    for name, shapes in cls.choices().items():        # redraw operand shapes where every shape is allowed
        if name not in cls.quals and name not in D.conditioned(cls):
            q[name] = draw(st.sampled_from(shapes))
    return ("op", cls, q)


def statements(depth=0):
    leaf = combination()
    if depth >= 2:
        return st.lists(leaf, min_size=1, max_size=4)
    inner = st.deferred(lambda: statements(depth + 1))
    block = st.one_of(st.tuples(st.sampled_from(["if", "ifelse", "loop", "elect"]), inner, inner),
                      st.tuples(st.just("guard"), combination(), st.none()))
    return st.lists(st.one_of(leaf, leaf, leaf, block), min_size=1, max_size=6)


def build(k, ops, items):
    tid = ops._once("tid", lambda: k.mov(sreg.tid_x))
    for item in items:
        kind = item[0]
        if kind == "op":
            _, cls, q = item
            kw = D.arguments(cls, q, ops)
            try:
                k.op(cls, **kw)
            except PtxdslError:
                pass                    # a combination whose operand values do not fit together: refused
        elif kind in ("if", "ifelse"):
            with k.if_(k.setp("lt", tid, 32)):
                build(k, ops, item[1])
            if kind == "ifelse":
                with k.else_():
                    build(k, ops, item[2])
        elif kind == "loop":
            with k.loop(0, 2):
                build(k, ops, item[1])
        elif kind == "elect":
            with k.elect_one():
                build(k, ops, item[1])
        elif kind == "guard":
            with k.guard(k.setp("ne", tid, 0)):
                build(k, ops, [item[1]])


STATS = {"built": 0, "assembled": 0}


@settings(max_examples=max(1, PROGRAMS // PER_EXAMPLE), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(statements(), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
def test_random_programs_assemble_and_round_trip(programs):
    groups = {}
    for i, items in enumerate(programs):
        STATS["built"] += 1
        try:
            with px.kernel(f"prog{i}", verify=False) as k:
                ops = D.Operands(k, specs=True)
                ops.parameters()
                build(k, ops, items)
        except TargetError:
            continue                            # closed as a whole: ops no single target takes (wgmma, sm_100a's)
        try:
            target = px.emit(k).target          # refused as a whole: ops no single target takes, register counts
        except PtxdslError:
            continue
        groups.setdefault(target, []).append(k.finish())
    for target, kernels in groups.items():
        ptx = px.emit(px.module(*kernels))
        px.assemble(ptx, target.arch)
        STATS["assembled"] += len(kernels)
        for k in kernels:
            assert_round_trip(k, verify=False)


def test_most_random_programs_reach_ptxas():
    """The property above is not vacuous: most programs it draws are emitted and assembled."""
    if STATS["built"] >= 100:
        assert STATS["assembled"] >= 0.6 * STATS["built"], STATS
