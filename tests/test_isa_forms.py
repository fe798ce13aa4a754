"""Every op declaration (ptxdsl/isa), held to ptxas through nvJitLink.

The combinations come from the declarations themselves (tests/declared.py): every qualifier value of every
op, with the operand shapes its conditions name, is built through the builder and assembled at the floor
target it resolves to, in modules of many ops whose ptxas errors map back to the combination on the line;
every combination a declaration excludes raises a ptxdsl error, and ptxas rejects it too unless the
declaration lists it among the refusals (ptxas accepts it; ptxdsl refuses it on purpose and says why).
Hypothesis draws combinations over every operand shape as well. Deterministic companions: the floors one
.version lower rejected by ptxas, the targeted invalid cases with their messages, exact operand text, and
docs/isa.md equal to the generator's output.
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import declared as D
import ptxdsl as px
from ptxdsl.builder import KernelBuilder
from ptxdsl.errors import AssembleError, DSLError, PtxdslError, TargetError
from ptxdsl.isa import registry as R
from ptxdsl.isa.decl import OPS, matches
from ptxdsl.target import TARGET_MIN_PTX, TARGETS, resolve_target

ROOT = Path(__file__).resolve().parents[1]
EXCLUDED_CHUNK = 48             # rejected lines per module: ptxas reports them all in one pass
VERSIONS = ((7, 8), (8, 0), (8, 1), (8, 2), (8, 3), (8, 4), (8, 5), (8, 6), (8, 7), (8, 8), (9, 0))


# ------------------------------------------------------------------------------ combinations


@functools.cache
def declared() -> tuple:
    """(cls, q, excluded reason) for every valid combination of every op, and the first few each exclusion names."""
    return tuple((cls, q, why) for cls in OPS for q, why in D.classified(cls))


def _show(batch, bad) -> list:
    return [f"{batch.items[n - 1][0].__name__}: {batch.items[n - 1][2].emit()}" for n in sorted(bad)]


def test_every_op_has_a_builder_method_and_a_docstring():
    for cls in OPS:
        assert callable(getattr(KernelBuilder, cls.method, None)), cls.__name__
        assert cls.__doc__ and cls.__doc__.strip(), cls.__name__


def test_every_declared_combination_builds_at_its_floor_and_assembles():
    """Admitted by ptxdsl and rejected by ptxas: 0."""
    valid = [(cls, q) for cls, q, why in declared() if why is None]
    assert len(valid) > 3000
    rejected = []
    for target, pairs in D.by_target(valid).items():
        batch = D.Batch("ok", target)
        for cls, q in pairs:
            batch.add(cls, q)
        ptx = batch.finish()
        assert ptx.target == target
        for cls, q, op in batch.items:
            assert D.target_of(cls, q) == target
            assert resolve_target([_one_kernel(op)]) == target, (cls.__name__, q)
        rejected += _show(batch, batch.assemble(ptx))
    assert not rejected, f"{len(rejected)} combinations ptxdsl admits and ptxas rejects: {rejected[:20]}"


def _one_kernel(op):
    from ptxdsl.ir import Instr, Kernel

    return Kernel("one", body=[Instr(op)])


def _per_rule(pairs, n=4) -> list:
    """Up to n combinations per (op, exclusion rule): every rule is held to ptxas without assembling the whole
    excluded space (tens of thousands of combinations)."""
    seen = defaultdict(int)
    out = []
    for cls, q in pairs:
        rule = next(i for i, (cond, _) in enumerate(cls.excludes + cls.refuses) if matches(cond, q))
        if seen[(cls, rule)] < n:
            seen[(cls, rule)] += 1
            out.append((cls, q))
    return out


def test_every_excluded_combination_is_refused_and_ptxas_agrees():
    """Refused by ptxdsl: always a DSLError. Rejected by ptxas too, unless the declaration lists it among
    its refusals (then ptxas accepts it, and the refusal says why)."""
    excluded = _per_rule([(cls, q) for cls, q, why in declared() if why is not None])
    buildable, refused_ok = [], []
    for cls, q in excluded:
        assert not D.builds(cls, q), (cls.__name__, q)
        try:
            D.Batch("probe").add(cls, q, build=D.unchecked(cls))
        except DSLError:
            continue                          # an operand check refuses it as well: nothing to emit
        buildable.append((cls, q))
    accepted = []
    for target, pairs in D.by_target(buildable).items():
        for chunk in range(0, len(pairs), EXCLUDED_CHUNK):
            batch = D.Batch("bad", target)
            for cls, q in pairs[chunk:chunk + EXCLUDED_CHUNK]:
                batch.add(cls, q, build=D.unchecked(cls))
            bad = batch.assemble()
            for n, (cls, q, op) in enumerate(batch.items, 1):
                refused_only = cls.refused(q) is not None and not any(matches(c, q) for c, _ in cls.excludes)
                if n in bad:
                    assert not refused_only, f"{cls.__name__} refuses {op.emit()} as ptxas-accepted, but ptxas " \
                                             f"rejects it: make it an exclusion"
                elif refused_only:
                    refused_ok.append((cls.__name__, op.emit(), cls.refused(q)))
                else:
                    accepted.append(f"{cls.__name__}: {op.emit()} ({cls.excluded(q)})")
    assert not accepted, f"{len(accepted)} combinations ptxdsl excludes but ptxas accepts; list them in the op's " \
                         f"`refuses` with the reason: {accepted[:20]}"
    assert buildable


@st.composite
def drawn(draw, ops=tuple(OPS)):
    cls = draw(st.sampled_from(ops))
    q = {name: draw(st.sampled_from(values)) for name, values in cls.choices().items()}
    return cls, q


@given(st.lists(drawn(), min_size=6, max_size=20))
def test_random_combinations_over_every_operand_shape(combos):
    valid = []
    for cls, q in combos:
        if cls.excluded(q) is not None:
            assert not D.builds(cls, q), (cls.__name__, q)
        else:
            valid.append((cls, q))
    for target, pairs in D.by_target(valid).items():
        batch = D.Batch("r", target)
        for cls, q in pairs:
            batch.add(cls, q)
        bad = batch.assemble()
        assert not bad, _show(batch, bad)


def test_a_newly_declared_op_is_drawn_built_and_assembled():
    from ptxdsl.isa.decl import Op
    from ptxdsl.isa.operands import Slot, Value
    from ptxdsl.types import u32

    class Nanosleep(Op):
        """nanosleep.u32 t: suspend the thread for about t nanoseconds."""

        ptx = "nanosleep.u32"
        mnemonic = "nanosleep"
        operands = (Slot("t", Value(u32)),)

    try:
        assert Nanosleep in OPS
        combos = list(D.combinations(Nanosleep))
        assert {q["t"] for q in D.combinations(Nanosleep, all_shapes=True)} == {"imm", "reg"}
        batch = D.Batch("n", D.target_of(Nanosleep, combos[0]))
        for q in combos:
            batch.add(Nanosleep, q)
        assert batch.items[-1][2].emit().startswith("nanosleep.u32 ")
        assert not batch.assemble()
        assert "nanosleep.u32" in R.render_markdown()
    finally:
        OPS.remove(Nanosleep)


# ---------------------------------------------------------------------------------- floors


@functools.cache
def coverage() -> tuple:
    """For every op, each qualifier value (and each shape a condition names) at least once."""
    out = []
    for cls in OPS:
        seen = set()
        for cls_, q, why in declared():
            if cls_ is not cls or why is not None:
                continue
            new = {(n, str(v)) for n, v in q.items()} - seen
            if new or not seen:
                seen |= {(n, str(v)) for n, v in q.items()}
                out.append((cls, q))
    return tuple(out)


@given(drawn(tuple(OPS)), st.sampled_from(TARGETS[:4]))
def test_a_target_without_the_form_is_a_build_time_error(choice, arch):
    cls, q = choice
    if cls.excluded(q) is not None:
        return
    need = cls.need(q)
    if arch in need.targets:
        ptx = max(need.ptx, TARGET_MIN_PTX[arch])
        lower = [v for v in VERSIONS if TARGET_MIN_PTX[arch] <= v < ptx]
        if not lower:
            return
        with pytest.raises(TargetError, match="below"):
            _pinned(cls, q, arch, lower[-1])
        return
    with pytest.raises(TargetError, match="not available on .target"):
        _pinned(cls, q, arch, None)


def _pinned(cls, q, arch, ptx):
    """Emit combination q with .target/.version pinned."""
    batch = D.Batch("pinned")
    batch.add(cls, q)
    batch.finish()
    return px.emit(px.module(*batch.kernels), arch=arch, ptx=ptx)


def _error_lines(err: AssembleError) -> set[int]:
    return {int(n) for n in re.findall(r"PTX line (\d+)", str(err))}


def test_floors_are_not_too_high():
    """One .version below each floor, ptxas rejects the op's own line (where the floor is above the
    target's minimum)."""
    groups = defaultdict(list)
    for cls, q in coverage():
        t = D.target_of(cls, q)
        if t.ptx > TARGET_MIN_PTX[t.arch]:
            groups[t].append((cls, q))
    assert groups
    for target, pairs in groups.items():
        batch = D.Batch("f", target)
        for cls, q in pairs:
            batch.add(cls, q)
        ptx = batch.finish()
        lower = max(v for v in VERSIONS if v < target.ptx)
        text = ptx.text.replace(f".version {target.version}\n", f".version {lower[0]}.{lower[1]}\n", 1)
        ptx.text = text
        bad = batch.assemble(ptx)
        missing = [f"{cls.__name__}: {op.emit()}" for n, (cls, q, op) in enumerate(batch.items, 1) if n not in bad]
        assert not missing, f"assembled one .version below their floor {target}: {missing[:10]}"


def test_directives_emit_and_assemble():
    kernels = []
    for i, opts in enumerate(({"reqntid": (128, 1, 1)}, {"maxntid": (256, 2)}, {"maxntid": 128, "minnctapersm": 2},
                              {"maxnreg": 168}, {"reqnctapercluster": (2, 1, 1)}, {"explicitcluster": True},
                              {"maxclusterrank": 8})):
        with px.kernel(f"d{i}", **opts) as k:
            k.ret()
        kernels.append(k)
    text = px.emit(px.module(*kernels)).text
    for line in (".reqntid 128, 1, 1", ".maxntid 256, 2, 1", ".minnctapersm 2", ".maxnreg 168",
                 ".reqnctapercluster 2, 1, 1", ".explicitcluster", ".maxclusterrank 8"):
        assert line in text
    px.assemble(text, "sm_90a")


# ------------------------------------------------------------------------- builder operands


_once = functools.cached_property


class Env:
    """Operands for the hand-written cases below, declared only when used."""

    def __init__(self, k, spec=None):
        self.k = k
        self.spec = spec

    @_once
    def gptr(self):
        return self.k.param_ptr("g")

    @_once
    def generic(self):
        return self.k.cvta(self.gptr, "global")

    @_once
    def tmap(self):
        return self.k.param_tensormap("tm", self.spec)

    @_once
    def smem(self):
        return self.k.shared("smem", 4096, align=1024)

    @_once
    def tms(self):
        return self.k.shared("tms", 128, align=128)

    @_once
    def bar(self):
        return self.k.mbarrier("bar")

    @_once
    def r32(self):
        return self.k.mov(256, px.u32)

    @_once
    def r64(self):
        return self.k.mov(4096, px.u64)

    @_once
    def f32(self):
        return self.k.mov(0.5, px.f32)

    @_once
    def mask(self):
        return self.k.mov(3, px.b16)

    @_once
    def policy(self):
        return self.k.mov(0, px.b64)

    @_once
    def smem_remote(self):
        return self.k.mapa(self.smem.at(2048), 1)

    @_once
    def bar_remote(self):
        return self.k.mapa(self.bar, 1)

    def value(self, t: str):
        return self.k.mov(1.0 if t.startswith("f") else 1, t)


# ------------------------------------------------------------------ targeted invalid cases


def _kernel(build, **kw):
    with px.kernel("bad", verify=False, **kw) as k:
        build(k, Env(k))


SPEC3 = px.TensorMapSpec.tiled_for((4, 8, 16), "f32", (4, 8, 16))
SPEC_F32 = px.TensorMapSpec.tiled_for((64, 64), "f32", (16, 16))


@pytest.mark.parametrize("build, error, match", [
    # a multicast store (tensor and bulk)
    (lambda k, e: k.cp_async_bulk_tensor(e.tmap, e.smem, (0, 0), multicast=3), DSLError, "load-only"),
    (lambda k, e: k.cp_async_bulk(e.gptr, e.smem, 256, dst_space="global", src_space="shared::cta", multicast=3),
     DSLError, "multicast is only for"),
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 256, dst_space="shared::cta", src_space="global", mbar=e.bar,
                                  multicast=3), DSLError, "multicast is only for"),
    # a reduce op on a type it does not take
    (lambda k, e: k.cp_reduce_async_bulk("min", e.gptr, e.smem, 256, type="f32", dst_space="global"),
     DSLError, r"\.min does not take \.f32"),
    (lambda k, e: k.cp_reduce_async_bulk("and", e.gptr, e.smem, 256, type="u32", dst_space="global"),
     DSLError, r"\.and does not take \.u32"),
    (lambda k, e: k.cp_reduce_async_bulk("add", e.gptr, e.smem, 256, type="bf16", dst_space="global"),
     DSLError, "noftz=True"),
    (lambda k, e: k.cp_reduce_async_bulk_tensor("min", k.param_tensormap("t", SPEC_F32), e.smem, (0, 0)),
     DSLError, "element type 'f32'"),
    (lambda k, e: k.red_async("add", "f32", e.smem_remote, e.f32, e.bar_remote), DSLError, "red.async"),
    # im2col below rank 3
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, e.tmap, (0, 0), mbar=e.bar, mode="im2col", im2col=()),
     DSLError, "rank-3..5"),
    (lambda k, e: k.cp_async_bulk_tensor(e.tmap, e.smem, (0, 0), mode="im2col_no_offs"), DSLError, "rank-3..5"),
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, e.tmap, (0, 0, 0, 0), mbar=e.bar, mode="im2col", im2col=(1,)),
     DSLError, "expects 2 im2col offsets"),
    # the map a param was declared with disagrees with the instruction
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, k.param_tensormap("t", SPEC3), (0, 0), mbar=e.bar),
     DSLError, "has rank 3"),
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, k.param_tensormap("t", SPEC3), (0, 0, 0), mbar=e.bar,
                                         mode="im2col", im2col=(0,)), DSLError, "tiled map"),
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, px.TensorMapRef(e.gptr), (0, 0), mbar=e.bar), DSLError, "cvta"),
    # field3 from a register, ord 5, values out of range
    (lambda k, e: k.tensormap_replace(e.tms, "swizzle_mode", e.r32), DSLError, "immediates only"),
    (lambda k, e: k.tensormap_replace(e.tms, "box_dim", 64, ord=5), DSLError, r"ord=5 is out of range"),
    (lambda k, e: k.tensormap_replace(e.tms, "box_dim", 64, ord=e.r32), DSLError, "integer constant"),
    (lambda k, e: k.tensormap_replace(e.tms, "global_stride", 256, ord=4), DSLError, "out of range"),
    (lambda k, e: k.tensormap_replace(e.tms, "rank", 5), DSLError, "rank-1"),
    (lambda k, e: k.tensormap_replace(e.tms, "box_dim", 0, ord=0), DSLError, "1..256"),
    (lambda k, e: k.tensormap_replace(e.tms, "box_dim", 257, ord=0), DSLError, "1..256"),
    (lambda k, e: k.tensormap_replace(e.tms, "element_stride", 9, ord=0), DSLError, "1..8"),
    (lambda k, e: k.tensormap_replace(e.tms, "element_stride", 0, ord=0), DSLError, "1..8"),
    (lambda k, e: k.tensormap_replace(e.tms, "global_stride", 24, ord=0), DSLError, "multiple of 16"),
    (lambda k, e: k.tensormap_replace(e.tms, "elemtype", 16), DSLError, "out of range"),
    (lambda k, e: k.tensormap_replace(e.tms, "fill_mode", "inf"), DSLError, "not a name"),
    (lambda k, e: k.tensormap_replace(e.tms, "rank", 1, ord=0), DSLError, "takes no ord"),
    (lambda k, e: k.tensormap_replace(e.tms, "box_dim", 64), DSLError, "ord= "),
    (lambda k, e: k.tensormap_replace(k.shared("t64", 128, align=64), "rank", 1), DSLError, "128-byte aligned"),
    (lambda k, e: k.tensormap_replace(e.tms, "global_address", e.r32), DSLError, "64-bit"),
    # mbarrier rules ptxas enforces
    (lambda k, e: k.mbarrier_arrive(e.bar, sem="release"), DSLError, "together"),
    (lambda k, e: k.mbarrier_try_wait(e.bar, parity=0, scope="cta"), DSLError, "together"),
    (lambda k, e: k.mbarrier_arrive(e.bar_remote, sem="release", scope="cluster", space="shared::cluster",
                                    state=True), DSLError, "sink"),
    (lambda k, e: k.mbarrier_try_wait(e.bar_remote, parity=0, space="shared::cluster"), DSLError, "space='shared::cluster' is not allowed"),
    (lambda k, e: k.mbarrier_arrive_no_complete(e.bar, 1, sem="release", scope="cluster"), DSLError, "noComplete"),
    (lambda k, e: k.mbarrier_init(e.bar, 0), DSLError, "1..1048575"),
    # bulk copies
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 100, dst_space="shared::cta", src_space="global", mbar=e.bar),
     DSLError, "multiple of 16"),
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 8192, dst_space="shared::cta", src_space="global", mbar=e.bar),
     DSLError, "4096 bytes"),
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 256, dst_space="shared::cta", src_space="global"),
     DSLError, "mbar= is missing"),
    (lambda k, e: k.cp_async_bulk(e.gptr, e.smem, 256, dst_space="global", src_space="global"),
     DSLError, "not a direction"),
    (lambda k, e: k.cp_async_bulk(e.gptr, e.smem, 256, dst_space="global", src_space="shared::cta", mbar=e.bar),
     DSLError, "takes no mbar"),
    (lambda k, e: k.cp_async_bulk(e.r32, e.smem, 256, dst_space="global", src_space="shared::cta"),
     DSLError, "64-bit"),
    (lambda k, e: k.cp_async_bulk(e.smem.at(8), e.gptr, 256, dst_space="shared::cta", src_space="global",
                                  mbar=e.bar), DSLError, "16-byte aligned"),
    (lambda k, e: k.cp_async_bulk(e.smem_remote, e.smem, 256, dst_space="shared::cluster", src_space="shared::cta",
                                  mbar=e.bar_remote, cache_hint=e.policy), DSLError, "no cache_hint"),
    (lambda k, e: k.cp_async_bulk_prefetch(e.gptr, 100), DSLError, "multiple of 16"),
    # policies, control, cluster
    (lambda k, e: k.createpolicy_fractional("L2::evict_last", fraction=1.5), DSLError, "0 < fraction <= 1"),
    (lambda k, e: k.createpolicy_fractional("evict_last"), DSLError, "L2::evict_last"),
    (lambda k, e: k.createpolicy_fractional("L2::evict_last", "L2::evict_last"), DSLError, "secondary"),
    (lambda k, e: k.createpolicy_range(e.smem, 64, 128), DSLError, "shared memory"),
    (lambda k, e: k.setmaxnreg_inc(100), DSLError, "multiple of 8"),
    (lambda k, e: k.setmaxnreg_dec(16), DSLError, "out of range"),
    (lambda k, e: k.st_async("u64", e.smem_remote, (e.r64,) * 4, e.bar_remote), DSLError, "128 bits"),
    (lambda k, e: k.mapa(e.gptr, 1), DSLError, "got a global address"),
    (lambda k, e: k.mapa(e.r32, 1, space=""), DSLError, "64-bit"),
    (lambda k, e: k.tensormap_cp_fenceproxy(e.gptr, e.tms, scope="warp"), DSLError, "scope"),
    (lambda k, e: k.fence_proxy_tensormap("acquire", "gpu", e.gptr), DSLError, "generic"),
    (lambda k, e: k.prefetch_tensormap(e.gptr, space="param"), DSLError, "param"),
])
def test_invalid_forms_raise_at_build_time(build, error, match):
    with pytest.raises(error, match=match) as info:
        _kernel(build)
    assert info.value.loc is not None and info.value.loc.file == __file__


@pytest.mark.parametrize("build, kw, match", [
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, e.tmap, (0, 0), mbar=e.bar, cta_group=2), {"arch": "sm_90a"},
     "not available on .target sm_90a"),
    (lambda k, e: k.tensormap_replace(e.tms, "rank", 1), {"arch": "sm_90"}, "not available on .target sm_90"),
    (lambda k, e: k.tensormap_replace(e.tms, "swizzle_atomicity", 1), {"arch": "sm_90a"}, "sm_90a"),
    (lambda k, e: k.tensormap_replace(e.tms, "elemtype", 13), {"arch": "sm_100a", "ptx": "8.6"}, "below"),
    (lambda k, e: k.cp_async_bulk(e.gptr, e.smem, 256, dst_space="global", src_space="shared::cta",
                                  byte_mask=0xFFFF), {"arch": "sm_90a"}, "not available"),
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 256, dst_space="shared::cluster", src_space="global",
                                  mbar=e.bar, multicast=3), {"arch": "sm_90"}, "not available on .target sm_90"),
    (lambda k, e: k.mbarrier_arrive(e.bar, sem="release", scope="cluster"), {"ptx": "7.8"}, "below the 8.0"),
    (lambda k, e: k.mbarrier_try_wait(e.bar, parity=0, sem="relaxed", scope="cluster"), {"ptx": "8.5"},
     "below the 8.6"),
    (lambda k, e: k.fence("acquire", "cluster"), {"ptx": "8.0"}, "below the 8.6"),
    (lambda k, e: k.setmaxnreg_dec(40), {"arch": "sm_100"}, "not available on .target sm_100"),
])
def test_a_form_beyond_the_pinned_target_is_a_target_error(build, kw, match):
    with pytest.raises(TargetError, match=match) as info:
        _kernel(build, **kw)
    assert info.value.loc is not None


def test_directive_conflicts_raise():
    with pytest.raises(DSLError, match="reqntid and maxntid"):
        px.kernel("d", reqntid=128, maxntid=128)
    with pytest.raises(DSLError, match="reqnctapercluster and maxclusterrank"):
        px.kernel("d", reqnctapercluster=2, maxclusterrank=8)
    with pytest.raises(DSLError, match="over the 16"):
        px.kernel("d", reqnctapercluster=(4, 4, 2))


# ------------------------------------------------------------------------------ exact text


def _one(build, **kw) -> str:
    with px.kernel("t", verify=False, **kw) as k:
        build(k, Env(k))
    text = px.emit(k).text
    return [ln.strip() for ln in text.splitlines() if ln.strip().endswith(";")][-2]


@pytest.mark.parametrize("build, text", [
    (lambda k, e: k.cp_async_bulk(e.smem, e.gptr, 1024, dst_space="shared::cluster", src_space="global",
                                  mbar=e.bar, multicast=3, cache_hint=e.policy),
     "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint "
     "[smem], [%rd2], 1024, [bar], 0x0003, %rd3;"),
    (lambda k, e: k.cp_async_bulk(e.gptr, e.smem.at(256), e.r32, dst_space="global", src_space="shared::cta",
                                  cache_hint=e.policy, byte_mask=0x00FF),
     "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.cp_mask [%rd2], [smem+256], %r1, %rd3, 0x00FF;"),
    (lambda k, e: k.cp_reduce_async_bulk("add", e.gptr, e.smem, 512, type=px.bf16, dst_space="global",
                                         noftz=True),
     "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%rd2], [smem], 512;"),
    (lambda k, e: k.tensormap_replace(e.tms, "global_stride", e.r64, ord=1),
     "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [tms], 1, %rd1;"),
    (lambda k, e: k.tensormap_replace(e.gptr, "fill_mode", "nan"),
     "tensormap.replace.tile.fill_mode.global.b1024.b32 [%rd2], 1;"),
    (lambda k, e: k.tensormap_replace(e.generic, "elemtype", "bf16"),
     "tensormap.replace.tile.elemtype.b1024.b32 [%rd3], 9;"),
    (lambda k, e: k.tensormap_cp_fenceproxy(e.gptr, e.tms),
     "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [tms], 128;"),
    (lambda k, e: k.createpolicy_fractional("L2::evict_first", "L2::evict_unchanged", 0.25),
     "createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %rd1, 0f3E800000;"),
    (lambda k, e: k.mapa(e.smem.at(64), 1), "mapa.shared::cluster.u32 %r1, smem+64, 1;"),
    (lambda k, e: k.st_async(px.f32, e.smem_remote, (e.f32, e.f32), e.bar_remote),
     "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%r1], {%f1, %f1}, [%r2];"),
    (lambda k, e: k.prefetch_tensormap(e.tmap, space="param"), "prefetch.param.tensormap [tm];"),
    (lambda k, e: k.cp_async_bulk_tensor(e.smem, e.tmap, (0, 0, 0, 0), mbar=e.bar, mode="im2col", im2col=(1, 2),
                                         multicast=e.mask, cache_hint=e.policy),
     "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.multicast::cluster"
     ".L2::cache_hint [smem], [%rd2, {0, 0, 0, 0}], [bar], {0x0001, 0x0002}, %rs1, %rd3;"),
])
def test_exact_operand_text(build, text):
    assert _one(build) == text


# ------------------------------------------------------------------------------------ docs


def test_docs_isa_md_is_the_generators_output():
    assert (ROOT / "docs" / "isa.md").read_text() == R.render_markdown(), \
        "regenerate with: python -m ptxdsl.isa.registry > docs/isa.md"


def test_gpu_level_claims_name_a_gpu_test():
    from test_isa_gpu import VERIFIES

    claimed = {c.__name__ for c in OPS if c.level == "gpu"} | {d.name for d in R.DIRECTIVES if d.level == "gpu"}
    assert claimed <= set(VERIFIES), sorted(claimed - set(VERIFIES))
    assert set(VERIFIES) <= set(R.by_name()) | {d.name for d in R.DIRECTIVES}


def test_spelling_follows_the_template():
    from ptxdsl.isa.decl import spell_template

    t = ("cp.async.bulk.tensor.<dim>.<dst_space>.global.<mode>.mbarrier::complete_tx::bytes{.<mc>}{.<cta_group>}"
         "{.<hint>}")
    assert spell_template(t, {"dim": "2d", "dst_space": "shared::cluster", "mode": "tile",
                              "mc": "multicast::cluster", "cta_group": None, "hint": "L2::cache_hint"}) == (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        ".L2::cache_hint")
    arrive = R.by_name()["MbarrierArrive"]
    assert isinstance(arrive.excluded({"sem": "release", "scope": None}), str)
    with pytest.raises(PtxdslError):
        D.Batch("x").add(arrive, {"sem": "release", "scope": None, "space": "shared::cta", "state": "sink"})
