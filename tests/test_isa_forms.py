"""Every form of the TMA-family registry (ptxdsl/isa/registry.py), held to ptxas through nvJitLink.

Random qualifier choices for every form: a valid one emits the mnemonic its registry template spells,
resolves to the registry's floor target and .version, and assembles there; an excluded one raises a
ptxdsl error while the kernel is built. Deterministic companions: every qualifier value of every form
assembled once (and the whole registry asserted covered), the floors one .version lower rejected by
ptxas, the (redOp, type) tables agreeing with ptxas pair by pair, the targeted invalid cases, and
docs/isa.md equal to the generator's output. Kernels are batched into one module per floor target.
"""
from __future__ import annotations

import functools
import itertools
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import sreg, verify
from ptxdsl.emit import resolve_target
from ptxdsl.errors import AssembleError, DSLError, PtxdslError, TargetError
from ptxdsl.isa import registry as R
from ptxdsl.isa.bulk import REDUCE_BULK_TYPES
from ptxdsl.isa.cluster import RED_ASYNC_TYPES
from ptxdsl.target import TARGET_MIN_PTX, TARGETS, Target

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ((7, 8), (8, 0), (8, 1), (8, 2), (8, 3), (8, 4), (8, 5), (8, 6), (8, 7), (8, 8), (9, 0))


# ------------------------------------------------------------------------------ operands


_once = functools.cached_property


class Env:
    """The operands one test kernel offers its form, declared only when used."""

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

    @_once
    def smem64(self):
        return self.k.mov(self.smem, px.u64)

    @_once
    def smem_generic(self):
        return self.k.cvta(self.smem, "shared")

    @_once
    def tms_generic(self):
        return self.k.cvta(self.tms, "shared")

    @_once
    def bar_generic(self):
        return self.k.cvta(self.bar, "shared")

    def bar_in(self, space):
        return {None: self.bar_generic, "shared::cluster": self.bar_remote}.get(space, self.bar)

    def hint(self, q):
        return self.policy if q.get("hint") else None

    def size(self, q):
        return self.r32 if q.get("size") == "reg" else 256

    def value(self, t: str):
        return self.k.mov(1.0 if t.startswith("f") else 1, t)


def sp(space):
    """A registry space (None = generic) as the builder's keyword."""
    return "" if space is None else space


def _count(e, q):
    return {None: None, "imm": 1, "reg": e.r32}[q["count"]]


def _coords(e, q):
    """q's coordinate vector: .Nd has N entries; gather4/scatter4 take 5 for .2d (any other dim: a wrong count)."""
    n = int(q["dim"][0])
    if q["mode"] in ("tile::gather4", "tile::scatter4"):
        n = 5 if n == 2 else n + (n == 5)
    return tuple(e.r32 if i % 2 else i * 8 for i in range(n))


def _im2col(q):
    if q["mode"] == "im2col":
        return tuple(range(1, int(q["dim"][0]) - 1))
    return (1, 2) if q["mode"].startswith("im2col::w") else None


def _cta_group(q):
    return int(q["cta_group"][-1]) if q.get("cta_group") else None


def _replace_value(e, fld, q):
    v = q["value"]
    if v == "reg":
        return e.r64 if fld in ("global_address", "global_stride") else e.r32
    if v == "imm":
        return {"global_address": 0x10000, "rank": 1, "box_dim": 64, "global_dim": 4096, "global_stride": 256,
                "element_stride": 1}[fld]
    return v


def _replace(fld):
    def build(k, e, q):
        addr = {"global": e.gptr, "shared::cta": e.tms, None: e.tms_generic}[q["space"]]
        k.tensormap_replace(addr, fld, _replace_value(e, fld, q), ord=q.get("ord"), space=sp(q["space"]))
    return build


def _arrive(method, tx=False):
    def build(k, e, q):
        extra = {"tx": 4096} if tx else {"count": _count(e, q)}
        getattr(k, method)(e.bar_in(q["space"]), **extra, sem=q["sem"], scope=q["scope"], space=sp(q["space"]),
                           state=q["dst"] == "state")
    return build


def _no_complete(method):
    def build(k, e, q):
        getattr(k, method)(e.bar_in(q["space"]), 1 if q["count"] == "imm" else e.r32, sem=q["sem"],
                           scope=q["scope"], space=sp(q["space"]), state=q["dst"] == "state")
    return build


def _wait(kind):
    def build(k, e, q):
        wait = k.mbarrier_try_wait if kind == "try_wait" else k.mbarrier_test_wait
        kw = {"sem": q["sem"], "scope": q["scope"], "space": sp(q["space"])}
        if "parity" in q:
            kw["parity"] = 1 if q["parity"] == "imm" else e.r32
        else:
            kw["state"] = e.r64
        if q.get("hint"):
            kw["hint"] = 1000 if q["hint"] == "imm" else e.r32
        wait(e.bar_in(q["space"]), **kw)
    return build


def _tensor_load(dst_space):
    def build(k, e, q):
        k.cp_async_bulk_tensor(e.smem, e.tmap, _coords(e, q), mbar=e.bar, dst_space=dst_space, mode=q["mode"],
                               im2col=_im2col(q), multicast=e.mask if q.get("multicast") else None,
                               cta_group=_cta_group(q), cache_hint=e.hint(q))
    return build


def _tx_only(method):
    def build(k, e, q):
        getattr(k, method)(e.bar_in(q["space"]), 4096, sem=q["sem"], scope=q["scope"], space=sp(q["space"]))
    return build


def _cluster_addr(e, q, remote: bool):
    """A shared address of q's width (the form's .u32/.u64) in q's space (None: generic)."""
    if q["space"] is None:
        return e.smem_generic if q["type"] == "u64" else e.r32
    if q["type"] == "u64":
        return e.k.mapa(e.smem64, 1) if remote else e.smem64
    return e.smem_remote if remote else e.smem


def _mapa(k, e, q):
    k.mapa(_cluster_addr(e, q, remote=False), e.r32, space=sp(q["space"]))


def _getctarank(k, e, q):
    k.getctarank(_cluster_addr(e, q, remote=True), space=sp(q["space"]))


def _reduce_spec(q):
    """A small map of q's dtype, rank and kind for the tensor reduction."""
    rank, dtype = int(q["dim"][0]), q["dtype"]
    shape = (2,) * (rank - 1) + (16,)
    if q["mode"] == "im2col_no_offs":
        if rank < 3:
            return px.TensorMapSpec.tiled_for(shape, dtype, shape)
        return px.TensorMapSpec.im2col_for(shape, dtype, channels_per_pixel=16, pixels_per_column=2,
                                           lower_corner=(0,) * (rank - 2), upper_corner=(0,) * (rank - 2))
    return px.TensorMapSpec.tiled_for(shape, dtype, shape)


BUILD = {
    "mbarrier.init": lambda k, e, q: k.mbarrier_init(e.bar_in(q["space"]), 1 if q["count"] == "imm" else e.r32,
                                                     space=sp(q["space"])),
    "mbarrier.inval": lambda k, e, q: k.mbarrier_inval(e.bar_in(q["space"]), space=sp(q["space"])),
    "mbarrier.arrive": _arrive("mbarrier_arrive"),
    "mbarrier.arrive.noComplete": _no_complete("mbarrier_arrive_no_complete"),
    "mbarrier.arrive.expect_tx": _arrive("mbarrier_arrive_expect_tx", tx=True),
    "mbarrier.arrive_drop": _arrive("mbarrier_arrive_drop"),
    "mbarrier.arrive_drop.noComplete": _no_complete("mbarrier_arrive_drop_no_complete"),
    "mbarrier.arrive_drop.expect_tx": _arrive("mbarrier_arrive_drop_expect_tx", tx=True),
    "mbarrier.expect_tx": _tx_only("mbarrier_expect_tx"),
    "mbarrier.complete_tx": _tx_only("mbarrier_complete_tx"),
    "mbarrier.test_wait": _wait("test_wait"),
    "mbarrier.test_wait.parity": _wait("test_wait"),
    "mbarrier.try_wait": _wait("try_wait"),
    "mbarrier.try_wait.parity": _wait("try_wait"),
    "mbarrier.pending_count": lambda k, e, q: k.mbarrier_pending_count(e.r64),
    "fence.mbarrier_init": lambda k, e, q: k.fence_mbarrier_init(),
    "cp.async.bulk.shared::cta.global": lambda k, e, q: k.cp_async_bulk(
        e.smem, e.gptr, e.size(q), dst_space="shared::cta", src_space="global", mbar=e.bar, cache_hint=e.hint(q)),
    "cp.async.bulk.shared::cluster.global": lambda k, e, q: k.cp_async_bulk(
        e.smem, e.gptr, e.size(q), dst_space="shared::cluster", src_space="global", mbar=e.bar,
        multicast=e.mask if q["multicast"] else None, cache_hint=e.hint(q)),
    "cp.async.bulk.shared::cluster.shared::cta": lambda k, e, q: k.cp_async_bulk(
        e.smem_remote, e.smem, e.size(q), dst_space="shared::cluster", src_space="shared::cta", mbar=e.bar_remote),
    "cp.async.bulk.global.shared::cta": lambda k, e, q: k.cp_async_bulk(
        e.gptr, e.smem, e.size(q), dst_space="global", src_space="shared::cta", cache_hint=e.hint(q),
        byte_mask=e.mask if q["cp_mask"] else None),
    "cp.reduce.async.bulk.global.shared::cta": lambda k, e, q: k.cp_reduce_async_bulk(
        q["op"], e.gptr, e.smem, 256, type=q["type"], dst_space="global", noftz=bool(q["noftz"]),
        cache_hint=e.hint(q)),
    "cp.reduce.async.bulk.shared::cluster.shared::cta": lambda k, e, q: k.cp_reduce_async_bulk(
        q["op"], e.smem_remote, e.smem, 256, type=q["type"], dst_space="shared::cluster", mbar=e.bar_remote),
    "cp.async.bulk.prefetch.L2.global": lambda k, e, q: k.cp_async_bulk_prefetch(
        e.gptr, e.size(q), cache_hint=e.hint(q)),
    "cp.async.bulk.commit_group": lambda k, e, q: k.cp_async_bulk_commit_group(),
    "cp.async.bulk.wait_group": lambda k, e, q: k.cp_async_bulk_wait_group(2, read=bool(q["read"])),
    "cp.async.bulk.tensor.shared::cluster.global": _tensor_load("shared::cluster"),
    "cp.async.bulk.tensor.shared::cta.global": _tensor_load("shared::cta"),
    "cp.async.bulk.tensor.global.shared::cta": lambda k, e, q: k.cp_async_bulk_tensor(
        e.tmap, e.smem, _coords(e, q), mode=q["mode"], cache_hint=e.hint(q)),
    "cp.reduce.async.bulk.tensor": lambda k, e, q: k.cp_reduce_async_bulk_tensor(
        q["op"], e.tmap, e.smem, _coords(e, q), mode=q["mode"], cache_hint=e.hint(q)),
    "cp.async.bulk.prefetch.tensor": lambda k, e, q: k.cp_async_bulk_prefetch_tensor(
        e.tmap, _coords(e, q), mode=q["mode"], im2col=_im2col(q), cache_hint=e.hint(q)),
    "createpolicy.fractional": lambda k, e, q: k.createpolicy_fractional(
        q["primary"], q["secondary"], {None: None, "imm": 0.5, "reg": e.f32}[q["fraction"]]),
    "createpolicy.range": lambda k, e, q: k.createpolicy_range(
        e.gptr if q["space"] else e.generic, 1024, 4096, primary=q["primary"], secondary=q["secondary"],
        space=sp(q["space"])),
    "createpolicy.cvt": lambda k, e, q: k.createpolicy_cvt(e.r64),
    "fence.proxy.async": lambda k, e, q: k.fence_proxy_async(q["space"]),
    "fence.proxy.tensormap::generic.release": lambda k, e, q: k.fence_proxy_tensormap("release", q["scope"]),
    "fence.proxy.tensormap::generic.acquire": lambda k, e, q: k.fence_proxy_tensormap("acquire", q["scope"], e.tmap),
    "fence.sem.scope": lambda k, e, q: k.fence(q["sem"], q["scope"]),
    "fence.release.sync_restrict": lambda k, e, q: k.fence_sync_restrict("release", proxy_async=bool(q["proxy"])),
    "fence.acquire.sync_restrict": lambda k, e, q: k.fence_sync_restrict("acquire", proxy_async=bool(q["proxy"])),
    **{f"tensormap.replace.tile.{fld}": _replace(fld) for fld in (
        "global_address", "rank", "box_dim", "global_dim", "global_stride", "element_stride", "elemtype",
        "interleave_layout", "swizzle_mode", "swizzle_atomicity", "fill_mode")},
    "tensormap.cp_fenceproxy": lambda k, e, q: k.tensormap_cp_fenceproxy(e.gptr, e.tms, scope=q["scope"]),
    "prefetch.tensormap": lambda k, e, q: k.prefetch_tensormap(e.r64 if q["space"] == "const" else e.tmap,
                                                               space=sp(q["space"])),
    "barrier.cluster.arrive": lambda k, e, q: k.barrier_cluster_arrive(sem=q["sem"], aligned=bool(q["aligned"])),
    "barrier.cluster.wait": lambda k, e, q: k.barrier_cluster_wait(sem=q["sem"], aligned=bool(q["aligned"])),
    "mapa": _mapa,
    "getctarank": _getctarank,
    "elect.sync": lambda k, e, q: k.elect_sync(0xFFFFFFFF if q["mask"] == "imm" else e.r32, lane=q["lane"] == "reg"),
    "cluster special registers": lambda k, e, q: k.mov(sreg.ALL[q["sreg"]]),
    "is_explicit_cluster": lambda k, e, q: k.mov(sreg.is_explicit_cluster),
    "st.async": lambda k, e, q: k.st_async(q["type"], e.smem_remote,
                                           (e.value(q["type"]),) * int((q["vec"] or "v1")[1]), e.bar_remote),
    "red.async": lambda k, e, q: k.red_async(q["op"], q["type"], e.smem_remote, e.value(q["type"]), e.bar_remote),
    "griddepcontrol": lambda k, e, q: getattr(k, f"griddepcontrol_{q['action']}")(),
    "setmaxnreg": lambda k, e, q: getattr(k, f"setmaxnreg_{q['action']}")(q["n"]),
}

# Directive forms: the kernel options they come from, and the line they emit.
DIRECTIVE = {
    ".reqntid": lambda q: {"reqntid": (128, 1, 1)[:q["dims"]]},
    ".maxntid": lambda q: {"maxntid": (256, 2, 1)[:q["dims"]]},
    ".minnctapersm": lambda q: {"maxntid": 128, "minnctapersm": 2},
    ".maxnreg": lambda q: {"maxnreg": 168},
    ".reqnctapercluster": lambda q: {"reqnctapercluster": (2, 1, 1)[:q["dims"]]},
    ".explicitcluster": lambda q: {"explicitcluster": True},
    ".maxclusterrank": lambda q: {"maxclusterrank": 8},
}
DIRECTIVE_LINE = {
    ".reqntid": ".reqntid 128, 1, 1", ".maxntid": ".maxntid 256, ", ".minnctapersm": ".minnctapersm 2",
    ".maxnreg": ".maxnreg 168", ".reqnctapercluster": ".reqnctapercluster 2, 1, 1",
    ".explicitcluster": ".explicitcluster", ".maxclusterrank": ".maxclusterrank 8",
}


# ------------------------------------------------------------------------------- building


class Case:
    """One form with one qualifier choice, built into its own kernel."""

    def __init__(self, name: str, form: R.Form, q: dict, arch=None, ptx=None):
        self.form, self.q = form, q
        opts = DIRECTIVE[form.key](q) if form.family == "directive" else {}
        spec = _reduce_spec(q) if form.key == "cp.reduce.async.bulk.tensor" else None
        with verify.deferred(), px.kernel(name, arch=arch, ptx=ptx, **opts) as k:
            e = Env(k, spec)
            if form.family != "directive":
                start = len(list(k.kernel.walk()))
                BUILD[form.key](k, e, q)
                self.ops = [ins.op for ins in list(k.kernel.walk())[start:]]
        self.kernel = k

    @property
    def text(self) -> str:
        """The form's own instruction: the last op it built (helpers such as mapa come first)."""
        return self.ops[-1].emit()

    def check_spelling(self, ptx_text: str) -> None:
        if self.form.family == "directive":
            assert DIRECTIVE_LINE[self.form.key] in ptx_text, (self.form.key, self.q)
            return
        mnemonic = self.text.split(" ", 1)[0]
        assert mnemonic == self.form.spell(self.q), (self.form.key, self.q, self.text)
        assert f"\t{self.text};\n" in ptx_text
        if self.form.key == "cluster special registers":
            assert self.text.endswith(f", {self.q['sreg']}")

    @property
    def expected(self) -> Target:
        arch, ptx = R.floor_target(self.form.need(self.q))
        return Target(arch, ptx)


def assemble_grouped(cases) -> None:
    """Emit the cases' kernels as one module per floor target and assemble each with nvJitLink."""
    groups = defaultdict(list)
    for c in cases:
        groups[c.expected].append(c)
    for target, group in sorted(groups.items(), key=lambda kv: (kv[0].arch, kv[0].ptx)):
        ptx = px.emit(px.module(*(c.kernel for c in group)))
        assert ptx.target == target
        for c in group:
            c.check_spelling(ptx.text)
        px.assemble(ptx, target.arch)


def check_floor(case: Case) -> None:
    assert resolve_target([case.kernel.kernel]) == case.expected, (case.form.key, case.q)


def valid_completions(form: R.Form, fixed: dict, limit: int = 400):
    """Qualifier choices that keep `fixed` and are not excluded, in registry order."""
    names = [n for n in form.quals if n not in fixed]
    for values in itertools.islice(itertools.product(*(form.quals[n] for n in names)), limit):
        q = {**fixed, **dict(zip(names, values))}
        if form.excluded(q) is None:
            yield q


@functools.cache
def coverage_cases() -> tuple:
    """For every form, each value of each qualifier at least once (with the first valid completion)."""
    out = []
    for form in R.FORMS:
        seen = set()
        singles = [{}] + [{n: v} for n, vals in form.quals.items() for v in vals]
        for fixed in singles:
            q = next(valid_completions(form, fixed), None)
            if q is None:
                continue
            key = tuple(sorted(q.items(), key=lambda kv: kv[0]))
            if key not in seen:
                seen.add(key)
                out.append(Case(f"c{len(out)}", form, q))
    return tuple(out)


# ---------------------------------------------------------------------------------- tests


def test_registry_and_builders_cover_the_same_forms():
    assert set(BUILD) | set(DIRECTIVE) == set(R.BY_KEY)
    assert set(DIRECTIVE) == {f.key for f in R.FORMS if f.family == "directive"}


def test_every_form_and_every_qualifier_value_assembles():
    cases = coverage_cases()
    for c in cases:
        check_floor(c)
    assemble_grouped(cases)
    assert {c.form.key for c in cases} == set(R.BY_KEY)
    for form in R.FORMS:
        used = {(n, c.q[n]) for c in cases if c.form is form for n in c.q}
        for name, values in form.quals.items():
            for v in values:
                if next(valid_completions(form, {name: v}), None) is not None:
                    assert (name, v) in used, (form.key, name, v)


@st.composite
def choices(draw, forms=R.FORMS):
    form = draw(st.sampled_from(forms))
    q = {name: draw(st.sampled_from(values)) for name, values in form.quals.items()}
    return form, q


@given(st.lists(choices(), min_size=6, max_size=20))
def test_random_combinations_emit_assemble_or_raise(drawn):
    valid = []
    for i, (form, q) in enumerate(drawn):
        reason = form.excluded(q)
        if reason is not None:
            with pytest.raises(DSLError):
                Case(f"bad{i}", form, q)
            continue
        c = Case(f"k{i}", form, q)
        check_floor(c)
        valid.append(c)
    assemble_grouped(valid)


RESTRICTED = tuple(f for f in R.FORMS if f.family != "directive")


@given(choices(RESTRICTED), st.sampled_from(TARGETS[:4]))
def test_a_target_without_the_form_is_a_build_time_error(choice, arch):
    form, q = choice
    if form.excluded(q) is not None:
        return
    need = form.need(q)
    if arch in need.targets:
        ptx = max(need.ptx, TARGET_MIN_PTX[arch])
        lower = [v for v in VERSIONS if TARGET_MIN_PTX[arch] <= v < ptx]
        if not lower:
            return
        with pytest.raises(TargetError, match="below"):
            Case("pinned", form, q, arch=arch, ptx=lower[-1])
        return
    with pytest.raises(TargetError, match="not available on .target"):
        Case("pinned", form, q, arch=arch)


def _error_lines(err: AssembleError) -> set[int]:
    return {int(n) for n in re.findall(r"PTX line (\d+)", str(err))}


def test_floors_are_not_too_high():
    """One .version below each floor, ptxas rejects the form's own line (where the floor is above the
    target's minimum)."""
    groups = defaultdict(list)
    for c in coverage_cases():
        t = c.expected
        if c.form.family != "directive" and t.ptx > TARGET_MIN_PTX[t.arch]:
            groups[t].append(c)
    assert groups
    for target, group in groups.items():
        ptx = px.emit(px.module(*(c.kernel for c in group))).text
        lower = max(v for v in VERSIONS if v < target.ptx)
        text = ptx.replace(f".version {target.version}\n", f".version {lower[0]}.{lower[1]}\n", 1)
        with pytest.raises(AssembleError) as info:
            px.assemble(text, target.arch)
        bad = _error_lines(info.value)
        lines = text.split("\n")
        for c in group:
            at = {n for n, ln in enumerate(lines, 1) if ln.strip() == f"{c.text};"}
            assert at & bad, (c.form.key, c.q, target, lower)


def _agreement(accepted_lines, rejected_lines, arch="sm_90a", version="8.6"):
    """Every accepted line assembles (one module); every rejected line is a ptxas error (one module)."""
    pre = (f".version {version}\n.target {arch}\n.address_size 64\n.visible .entry k(.param .u64 g)\n{{\n"
           ".reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .f32 %f<2>;\n.shared .align 1024 .b8 s[1024];\n"
           ".shared .align 8 .b64 bar;\nld.param.u64 %rd1, [g]; cvta.to.global.u64 %rd2, %rd1;\n"
           "mov.u32 %r1, s; mov.u32 %r2, bar; mov.u32 %r3, 1; mov.b64 %rd3, 1; mov.f32 %f1, 0f3F800000;\n")
    px.assemble(pre + "\n".join(accepted_lines) + "\nret;\n}\n", arch)
    text = pre + "\n".join(rejected_lines) + "\nret;\n}\n"
    with pytest.raises(AssembleError) as info:
        px.assemble(text, arch)
    bad = _error_lines(info.value)
    first = pre.count("\n") + 1
    missing = [ln for i, ln in enumerate(rejected_lines) if first + i not in bad]
    assert not missing, f"ptxas accepts lines ptxdsl rejects: {missing}"


def _dsl_accepts(build) -> bool:
    try:
        with verify.deferred(), px.kernel("probe") as k:
            build(k, Env(k))
        return True
    except DSLError:
        return False


@pytest.mark.parametrize("dst_space", ["global", "shared::cluster"])
def test_bulk_reduce_type_table_agrees_with_ptxas(dst_space):
    ok, bad = [], []
    for op, t in itertools.product(R.REDUCE_OPS, R.BULK_TYPES):
        noftz = dst_space == "global" and op == "add" and t in ("f16", "bf16")
        if dst_space == "global":
            line = f"cp.reduce.async.bulk.global.shared::cta.bulk_group.{op}{'.noftz' if noftz else ''}.{t} " \
                   f"[%rd2], [s], 256;"
            build = lambda k, e, op=op, t=t, n=noftz: k.cp_reduce_async_bulk(  # noqa: E731
                op, e.gptr, e.smem, 256, type=t, dst_space="global", noftz=n)
        else:
            line = f"cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.{op}.{t} " \
                   f"[%r1], [s], 256, [%r2];"
            build = lambda k, e, op=op, t=t: k.cp_reduce_async_bulk(  # noqa: E731
                op, e.smem_remote, e.smem, 256, type=t, dst_space="shared::cluster", mbar=e.bar_remote)
        (ok if _dsl_accepts(build) else bad).append(line)
        assert _dsl_accepts(build) == (t in REDUCE_BULK_TYPES[dst_space][op])
    _agreement(ok, bad)


def test_red_async_type_table_agrees_with_ptxas():
    ok, bad = [], []
    for op, t in itertools.product(R.REDUCE_OPS, ("b32", "u32", "s32", "b64", "u64", "s64")):
        reg = "%rd3" if t.endswith("64") else "%r3"
        line = f"red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{op}.{t} [%r1], {reg}, [%r2];"
        accepted = _dsl_accepts(lambda k, e, op=op, t=t: k.red_async(op, t, e.smem_remote, e.value(t), e.bar_remote))
        assert accepted == (t in RED_ASYNC_TYPES[op])
        (ok if accepted else bad).append(line)
    _agreement(ok, bad)


# ------------------------------------------------------------------ targeted invalid cases


def _kernel(build, **kw):
    with verify.deferred(), px.kernel("bad", **kw) as k:
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
     DSLError, r"expected one of b32, b64"),
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
     DSLError, "expected 2 im2col offsets"),
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
    (lambda k, e: k.mbarrier_arrive(e.bar_remote, sem="release", scope="cta", space="shared::cluster"),
     DSLError, "scope='cluster'"),
    (lambda k, e: k.mbarrier_try_wait(e.bar_remote, parity=0, space="shared::cluster"), DSLError, "local barrier"),
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
    with verify.deferred(), px.kernel("t", **kw) as k:
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
     "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%r1], {%r2, %r2}, [%r3];"),
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

    claimed = {f.key for f in R.FORMS if f.level == "gpu"}
    assert claimed <= set(VERIFIES), sorted(claimed - set(VERIFIES))
    assert set(VERIFIES) <= set(R.BY_KEY)


def test_spell_follows_the_template():
    f = R.BY_KEY["cp.async.bulk.tensor.shared::cluster.global"]
    q = {"dim": "2d", "mode": "tile", "multicast": "multicast::cluster", "cta_group": None, "hint": "L2::cache_hint"}
    assert f.spell(q) == ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                          ".multicast::cluster.L2::cache_hint")
    assert R.BY_KEY["mbarrier.arrive"].spell({"sem": None, "scope": None, "space": None}) == "mbarrier.arrive.b64"
    assert isinstance(R.BY_KEY["mbarrier.arrive"].excluded({"sem": "release", "scope": None}), str)
    with pytest.raises(PtxdslError):
        Case("x", R.BY_KEY["mbarrier.arrive"], {"sem": "release", "scope": None, "space": "shared::cta",
                                                "dst": "_", "count": None})
