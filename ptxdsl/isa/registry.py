"""The TMA-family op registry: every PTX form ptxdsl emits, as data.

Each `Form` names its DSL call, its PTX grammar (the spelling template), the qualifier values it
takes, its floors (the targets and .version it needs, and the qualifier values that raise them), the
combinations that are not allowed, and how far it has been checked: 'emitted' (text only),
'assembled' (ptxas through nvJitLink, in CI, for the floor target) or 'gpu' (run on an H200 and
checked against numpy / ptxdsl.reference). Floors come from shared/reference/ptx-tma-isa.md and its
ptxas floor matrix; tests/test_isa_forms.py holds the ops to them.

Template syntax (the mnemonic part, before the first space): `<name>` is the value of qualifier
`name`; `{...}` is kept when every `<name>` inside it has a value (None drops the group). The operand
part after the first space is documentation.

    python -m ptxdsl.isa.registry > docs/isa.md
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from ..target import ARCH_SPECIFIC, BASE, SM100_UP, SM100A, TARGET_MIN_PTX, TARGETS, Req, fmt_ptx
from .bulk import MULTICAST_TARGETS, REDUCE_BULK_TYPES

LEVELS = ("emitted", "assembled", "gpu")
BLACKWELL_ARCH = ARCH_SPECIFIC - {"sm_90a"}
DIMS = ("1d", "2d", "3d", "4d", "5d")
HINT = (None, "L2::cache_hint")
SCOPES4 = ("cta", "cluster", "gpu", "sys")
BULK_TYPES = ("b32", "b64", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


@dataclass(frozen=True)
class Form:
    """One PTX form: how to write it in the DSL, how PTX spells it, what it needs."""

    key: str
    family: str
    ptx: str
    dsl: str
    quals: dict = field(default_factory=dict)      # name -> allowed values (PTX spellings; None = omitted)
    req: Req = BASE                                # the floor of the plainest combination
    when: tuple = ()                               # ((condition, Req), ...): values that raise the floor
    excludes: tuple = ()                           # ((condition, reason), ...): combinations that are errors
    level: str = "assembled"
    note: str = ""

    @property
    def mnemonic(self) -> str:
        return self.ptx.split(" ", 1)[0]

    def need(self, q: dict) -> Req:
        """The floor of qualifier choice q: req and every `when` that q matches."""
        r = self.req
        for cond, extra in self.when:
            if matches(cond, q):
                r = r & extra
        return r

    def excluded(self, q: dict) -> str | None:
        """Why q is not allowed, or None when it is."""
        return next((reason for cond, reason in self.excludes if matches(cond, q)), None)

    def spell(self, q: dict) -> str:
        """The mnemonic with qualifiers that choice q spells, from the template."""
        def group(m):
            names = _PLACEHOLDER.findall(m.group(1))
            return _fill(m.group(1), q) if all(q.get(n) is not None for n in names) else ""
        return _fill(_GROUP.sub(group, self.mnemonic), q)


_GROUP = re.compile(r"\{([^{}]*)\}")
_PLACEHOLDER = re.compile(r"<(\w+)>")


def _fill(text: str, q: dict) -> str:
    return _PLACEHOLDER.sub(lambda m: str(q[m.group(1)]), text)


def matches(cond: dict, q: dict) -> bool:
    """q matches cond when, for every name in cond, q's value is the value (or one of the tuple) given."""
    for name, want in cond.items():
        have = q.get(name)
        if isinstance(want, (tuple, frozenset, set)):
            if have not in want:
                return False
        elif have != want:
            return False
    return True


def floor_target(r: Req) -> tuple[str, tuple[int, int]]:
    """The lowest .target that accepts r, and the .version it needs there."""
    arch = next(t for t in TARGETS if t in r.targets)
    return arch, max(TARGET_MIN_PTX[arch], r.ptx)


def _v(ptx, targets=None) -> Req:
    return Req(ptx, targets) if targets is not None else Req(ptx)


# ----------------------------------------------------------------------------------- mbarrier

LOCAL = ("shared::cta", "shared", None)                # None: a generic address
SEM_SCOPE_APART = (({"sem": None, "scope": ("cta", "cluster")}, "PTX takes .sem and .scope together"),
                   ({"sem": ("release", "relaxed", "acquire"), "scope": None}, "PTX takes .sem and .scope together"))
RELAXED = (({"sem": "relaxed"}, _v((8, 6))),)


def _arrive(key, ptx, dsl, *, tx=False, level="assembled", note=""):
    quals = {"sem": (None, "release", "relaxed"), "scope": (None, "cta", "cluster"),
             "space": LOCAL + ("shared::cluster",), "dst": ("_", "state")}
    if not tx:
        quals["count"] = (None, "imm", "reg")
    excludes = SEM_SCOPE_APART + (
        ({"space": "shared::cluster", "dst": "state"}, "a remote arrive's destination is the sink '_'"),
        ({"space": "shared::cluster", "scope": (None, "cta")}, "a remote arrive needs cluster scope"),
    )
    when = ((({"space": "shared::cluster"}, _v((8, 0))), ({"sem": "release"}, _v((8, 0)))) if not tx else ()) \
        + RELAXED
    return Form(key, "mbarrier", ptx, dsl, quals, _v((8, 0) if tx else (7, 8)), when, excludes, level, note)


def _no_complete(key, ptx, dsl):
    quals = {"sem": (None, "release"), "scope": (None, "cta"), "space": LOCAL, "dst": ("_", "state"),
             "count": ("imm", "reg")}
    return Form(key, "mbarrier", ptx, dsl, quals, _v((7, 8)), (({"sem": "release"}, _v((8, 0))),),
                SEM_SCOPE_APART)


def _wait(key, ptx, dsl, *, parity, hint):
    quals = {"sem": (None, "acquire", "relaxed"), "scope": (None, "cta", "cluster"), "space": LOCAL}
    if parity:
        quals["parity"] = ("imm", "reg")
    if hint:
        quals["hint"] = (None, "imm", "reg")
    return Form(key, "mbarrier", ptx, dsl, quals, _v((7, 8)), (({"sem": "acquire"}, _v((8, 0))),) + RELAXED,
                SEM_SCOPE_APART,
                level="gpu" if parity and hint else "assembled")


def _tx_only(key, ptx, dsl):
    quals = {"sem": (None, "relaxed"), "scope": (None, "cta", "cluster"), "space": LOCAL + ("shared::cluster",)}
    return Form(key, "mbarrier", ptx, dsl, quals, _v((8, 0)), (), SEM_SCOPE_APART)


MBARRIER = (
    Form("mbarrier.init", "mbarrier", "mbarrier.init{.<space>}.b64 [addr], count",
         "k.mbarrier_init(bar, count, space='shared::cta')", {"space": LOCAL, "count": ("imm", "reg")},
         level="gpu"),
    Form("mbarrier.inval", "mbarrier", "mbarrier.inval{.<space>}.b64 [addr]",
         "k.mbarrier_inval(bar, space='shared::cta')", {"space": LOCAL}),
    _arrive("mbarrier.arrive", "mbarrier.arrive{.<sem>.<scope>}{.<space>}.b64 state|_, [addr]{, count}",
            "k.mbarrier_arrive(bar, count=None, sem=, scope=, space=, state=False)"),
    _no_complete("mbarrier.arrive.noComplete",
                 "mbarrier.arrive.noComplete{.<sem>.<scope>}{.<space>}.b64 state, [addr], count",
                 "k.mbarrier_arrive_no_complete(bar, count, sem=, scope=, space=)"),
    _arrive("mbarrier.arrive.expect_tx",
            "mbarrier.arrive.expect_tx{.<sem>.<scope>}{.<space>}.b64 state|_, [addr], txCount",
            "k.mbarrier_arrive_expect_tx(bar, tx, sem=, scope=, space=, state=False)", tx=True, level="gpu"),
    _arrive("mbarrier.arrive_drop", "mbarrier.arrive_drop{.<sem>.<scope>}{.<space>}.b64 state|_, [addr]{, count}",
            "k.mbarrier_arrive_drop(bar, count=None, sem=, scope=, space=, state=False)"),
    _no_complete("mbarrier.arrive_drop.noComplete",
                 "mbarrier.arrive_drop.noComplete{.<sem>.<scope>}{.<space>}.b64 state, [addr], count",
                 "k.mbarrier_arrive_drop_no_complete(bar, count, sem=, scope=, space=)"),
    _arrive("mbarrier.arrive_drop.expect_tx",
            "mbarrier.arrive_drop.expect_tx{.<sem>.<scope>}{.<space>}.b64 state|_, [addr], txCount",
            "k.mbarrier_arrive_drop_expect_tx(bar, tx, sem=, scope=, space=, state=False)", tx=True),
    _tx_only("mbarrier.expect_tx", "mbarrier.expect_tx{.<sem>.<scope>}{.<space>}.b64 [addr], txCount",
             "k.mbarrier_expect_tx(bar, tx, sem=, scope=, space=)"),
    _tx_only("mbarrier.complete_tx", "mbarrier.complete_tx{.<sem>.<scope>}{.<space>}.b64 [addr], txCount",
             "k.mbarrier_complete_tx(bar, tx, sem=, scope=, space=)"),
    _wait("mbarrier.test_wait", "mbarrier.test_wait{.<sem>.<scope>}{.<space>}.b64 p, [addr], state",
          "k.mbarrier_test_wait(bar, state=s, sem=, scope=)", parity=False, hint=False),
    _wait("mbarrier.test_wait.parity", "mbarrier.test_wait.parity{.<sem>.<scope>}{.<space>}.b64 p, [addr], parity",
          "k.mbarrier_test_wait(bar, parity=0, sem=, scope=)", parity=True, hint=False),
    _wait("mbarrier.try_wait", "mbarrier.try_wait{.<sem>.<scope>}{.<space>}.b64 p, [addr], state{, hint}",
          "k.mbarrier_try_wait(bar, state=s, hint=None, sem=, scope=)", parity=False, hint=True),
    _wait("mbarrier.try_wait.parity",
          "mbarrier.try_wait.parity{.<sem>.<scope>}{.<space>}.b64 p, [addr], parity{, hint}",
          "k.mbarrier_try_wait(bar, parity=0, hint=None, sem=, scope=); k.mbarrier_wait(...) loops on it",
          parity=True, hint=True),
    Form("mbarrier.pending_count", "mbarrier", "mbarrier.pending_count.b64 count, state",
         "k.mbarrier_pending_count(state)"),
    Form("fence.mbarrier_init", "mbarrier", "fence.mbarrier_init.release.cluster", "k.fence_mbarrier_init()",
         req=_v((8, 0)), level="gpu"),
)

# -------------------------------------------------------------------------- bulk (non-tensor)

BULK = (
    Form("cp.async.bulk.shared::cta.global", "bulk",
         "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes{.<hint>} [dst], [src], size, [mbar]{, policy}",
         "k.cp_async_bulk(smem, gptr, size, dst_space='shared::cta', src_space='global', mbar=bar)",
         {"hint": HINT, "size": ("imm", "reg")}, _v((8, 6)), level="gpu"),
    Form("cp.async.bulk.shared::cluster.global", "bulk",
         "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{.<multicast>}{.<hint>} "
         "[dst], [src], size, [mbar]{, ctaMask}{, policy}",
         "k.cp_async_bulk(smem, gptr, size, dst_space='shared::cluster', src_space='global', mbar=bar, "
         "multicast=None)",
         {"multicast": (None, "multicast::cluster"), "hint": HINT, "size": ("imm", "reg")}, _v((8, 0)),
         (({"multicast": "multicast::cluster"}, _v((8, 0), MULTICAST_TARGETS)),), level="gpu",
         note="multicast: ptxas takes plain sm_90 too; ptxdsl emits it for the a/f targets only"),
    Form("cp.async.bulk.shared::cluster.shared::cta", "bulk",
         "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]",
         "k.cp_async_bulk(remote, smem, size, dst_space='shared::cluster', src_space='shared::cta', mbar=rbar)",
         {"size": ("imm", "reg")}, _v((8, 0)), level="gpu",
         note="needs a cluster launch: without one the H200 raised an illegal instruction, also for the CTA's "
              "own shared memory"),
    Form("cp.async.bulk.global.shared::cta", "bulk",
         "cp.async.bulk.global.shared::cta.bulk_group{.<hint>}{.<cp_mask>} [dst], [src], size{, policy}{, byteMask}",
         "k.cp_async_bulk(gptr, smem, size, dst_space='global', src_space='shared::cta', byte_mask=None)",
         {"hint": HINT, "cp_mask": (None, "cp_mask"), "size": ("imm", "reg")}, _v((8, 0)),
         (({"cp_mask": "cp_mask"}, _v((8, 6), SM100_UP)),), level="gpu",
         note=".cp_mask needs sm_100+: assembled, not run on hardware"),
    Form("cp.reduce.async.bulk.global.shared::cta", "bulk",
         "cp.reduce.async.bulk.global.shared::cta.bulk_group{.<hint>}.<op>{.<noftz>}.<type> [dst], [src], size{, policy}",
         "k.cp_reduce_async_bulk(op, gptr, smem, size, type=, dst_space='global', noftz=False)",
         {"op": REDUCE_OPS, "type": BULK_TYPES, "noftz": (None, "noftz"), "hint": HINT}, _v((8, 0)),
         note="run on the H200: add.f32, add.noftz.bf16, min.s32, max.u32, and.b32, inc.u32",
         excludes=tuple(({"op": o, "type": t}, f".{o} does not take .{t} into global memory")
                        for o in REDUCE_OPS for t in BULK_TYPES if t not in REDUCE_BULK_TYPES["global"][o])
         + (({"op": "add", "type": ("f16", "bf16"), "noftz": None}, ".add.f16/.bf16 needs .noftz"),
            ({"noftz": "noftz", "op": ("min", "max", "inc", "dec", "and", "or", "xor")}, ".noftz is for .add"),
            ({"noftz": "noftz", "type": ("b32", "b64", "u32", "s32", "u64", "s64", "f32", "f64")},
             ".noftz is for f16/bf16")),
         level="gpu"),
    Form("cp.reduce.async.bulk.shared::cluster.shared::cta", "bulk",
         "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.<op>.<type> "
         "[dst], [src], size, [mbar]",
         "k.cp_reduce_async_bulk(op, remote, smem, size, type=, dst_space='shared::cluster', mbar=rbar)",
         {"op": REDUCE_OPS, "type": BULK_TYPES}, _v((8, 0)),
         excludes=tuple(({"op": o, "type": t}, f".{o} does not take .{t} into shared::cluster")
                        for o in REDUCE_OPS for t in BULK_TYPES
                        if t not in REDUCE_BULK_TYPES["shared::cluster"][o])),
    Form("cp.async.bulk.prefetch.L2.global", "bulk",
         "cp.async.bulk.prefetch.L2.global{.<hint>} [src], size{, policy}",
         "k.cp_async_bulk_prefetch(gptr, size, cache_hint=None)", {"hint": HINT, "size": ("imm", "reg")},
         _v((8, 0)), level="gpu"),
    Form("cp.async.bulk.commit_group", "bulk", "cp.async.bulk.commit_group", "k.cp_async_bulk_commit_group()",
         req=_v((8, 0)), level="gpu"),
    Form("cp.async.bulk.wait_group", "bulk", "cp.async.bulk.wait_group{.<read>} N",
         "k.cp_async_bulk_wait_group(n, read=False) / k.cp_async_bulk_wait_group_read(n)",
         {"read": (None, "read")}, _v((8, 0)), level="gpu"),
)

# ------------------------------------------------------------------------------ bulk tensor

LOAD_MODES = ("tile", "im2col", "tile::gather4", "im2col::w", "im2col::w::128")
IM2COL_DIMS = ("3d", "4d", "5d")
MODE_DIMS = (({"mode": ("im2col", "im2col::w", "im2col::w::128", "im2col_no_offs"), "dim": ("1d", "2d")},
              "im2col modes need a rank-3..5 tensor"),
             ({"mode": ("tile::gather4", "tile::scatter4"), "dim": ("1d", "3d", "4d", "5d")},
              "gather4/scatter4 are .2d only"))
CTA_GROUP = (None, "cta_group::1", "cta_group::2")
SM100A_86 = _v((8, 6), SM100A)

TENSOR = (
    Form("cp.async.bulk.tensor.shared::cluster.global", "tensor",
         "cp.async.bulk.tensor.<dim>.shared::cluster.global.<mode>.mbarrier::complete_tx::bytes{.<multicast>}"
         "{.<cta_group>}{.<hint>} [dst], [tmap, {coords}], [mbar]{, {im2col}}{, ctaMask}{, policy}",
         "k.cp_async_bulk_tensor(smem, tmap, coords, mbar=bar, mode='tile', im2col=None, multicast=None, "
         "cta_group=None, cache_hint=None)",
         {"dim": DIMS, "mode": LOAD_MODES, "multicast": (None, "multicast::cluster"), "cta_group": CTA_GROUP,
          "hint": HINT}, _v((8, 0)),
         (({"mode": ("tile::gather4", "im2col::w", "im2col::w::128")}, SM100A_86),
          ({"cta_group": ("cta_group::1", "cta_group::2")}, SM100A_86),
          ({"multicast": "multicast::cluster"}, _v((8, 0), MULTICAST_TARGETS))),
         MODE_DIMS, level="gpu",
         note="tile 1d-5d, im2col and multicast run on the H200; gather4, im2col::w(::128) and cta_group are "
              "sm_100a forms: assembled, not run on hardware"),
    Form("cp.async.bulk.tensor.shared::cta.global", "tensor",
         "cp.async.bulk.tensor.<dim>.shared::cta.global.<mode>.mbarrier::complete_tx::bytes{.<cta_group>}"
         "{.<hint>} [dst], [tmap, {coords}], [mbar]{, {im2col}}{, policy}",
         "k.cp_async_bulk_tensor(smem, tmap, coords, mbar=bar, dst_space='shared::cta', mode='tile')",
         {"dim": DIMS, "mode": LOAD_MODES, "cta_group": CTA_GROUP, "hint": HINT}, _v((8, 6)),
         (({"mode": ("tile::gather4", "im2col::w")}, _v((8, 6), SM100_UP)),
          ({"mode": "im2col::w::128"}, SM100A_86),
          ({"cta_group": ("cta_group::1", "cta_group::2")}, SM100A_86)),
         MODE_DIMS, level="gpu",
         note="multicast is not allowed with a shared::cta destination"),
    Form("cp.async.bulk.tensor.global.shared::cta", "tensor",
         "cp.async.bulk.tensor.<dim>.global.shared::cta.<mode>.bulk_group{.<hint>} [tmap, {coords}], [src]{, policy}",
         "k.cp_async_bulk_tensor(tmap, smem, coords, mode='tile', cache_hint=None)",
         {"dim": DIMS, "mode": ("tile", "im2col_no_offs", "tile::scatter4"), "hint": HINT}, _v((8, 0)),
         (({"mode": "tile::scatter4"}, SM100A_86),), MODE_DIMS, level="gpu",
         note="run on the H200: .tile; scatter4 is an sm_100a form: assembled, not run on hardware"),
    Form("cp.reduce.async.bulk.tensor", "tensor",
         "cp.reduce.async.bulk.tensor.<dim>.global.shared::cta.<op>.<mode>.bulk_group{.<hint>} "
         "[tmap, {coords}], [src]{, policy}",
         "k.cp_reduce_async_bulk_tensor(op, tmap, smem, coords, mode='tile')",
         {"dim": DIMS, "op": REDUCE_OPS, "mode": ("tile", "im2col_no_offs"), "hint": HINT,
          "dtype": ("u32", "s32", "u64", "s64", "f16", "bf16", "f32")}, _v((8, 0)),
         excludes=MODE_DIMS + tuple(
             ({"op": o, "dtype": t}, f".{o} does not take a {t} tensor map")
             for o, ok in (("add", {"u32", "s32", "u64", "f32", "f16", "bf16"}),
                           ("min", {"u32", "s32", "s64", "f16", "bf16"}), ("max", {"u32", "s32", "s64", "f16", "bf16"}),
                           ("inc", {"u32"}), ("dec", {"u32"}), ("and", {"u32", "s32", "u64", "s64"}),
                           ("or", {"u32", "s32", "u64", "s64"}), ("xor", {"u32", "s32", "u64", "s64"}))
             for t in ("u32", "s32", "u64", "s64", "f16", "bf16", "f32") if t not in ok),
         level="gpu",
         note="the element type is the tensor map's (checked when the param has a TensorMapSpec); run on the "
              "H200: add on bf16/f32/s32, min and max on bf16/s32"),
    Form("cp.async.bulk.prefetch.tensor", "tensor",
         "cp.async.bulk.prefetch.tensor.<dim>.L2.global.<mode>{.<hint>} [tmap, {coords}]{, {im2col}}{, policy}",
         "k.cp_async_bulk_prefetch_tensor(tmap, coords, mode='tile', im2col=None)",
         {"dim": DIMS, "mode": LOAD_MODES, "hint": HINT}, _v((8, 0)),
         (({"mode": ("tile::gather4", "im2col::w", "im2col::w::128")}, SM100A_86),), MODE_DIMS, level="gpu"),
)

# ------------------------------------------------------------------------------- policies

PRIMARY = ("L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged")
SECONDARY = (None, "L2::evict_first", "L2::evict_unchanged")

POLICY = (
    Form("createpolicy.fractional", "policy",
         "createpolicy.fractional.<primary>{.<secondary>}.b64 policy{, fraction}",
         "k.createpolicy_fractional('L2::evict_last', secondary=None, fraction=None)",
         {"primary": PRIMARY, "secondary": SECONDARY, "fraction": (None, "imm", "reg")}, level="gpu"),
    Form("createpolicy.range", "policy",
         "createpolicy.range{.<space>}.<primary>{.<secondary>}.b64 policy, [a], primary_size, total_size",
         "k.createpolicy_range(gptr, primary_size, total_size, primary=, secondary=None, space='global')",
         {"space": ("global", None), "primary": PRIMARY, "secondary": SECONDARY}),
    Form("createpolicy.cvt", "policy", "createpolicy.cvt.L2.b64 policy, access_property",
         "k.createpolicy_cvt(access_property)"),
)

# --------------------------------------------------------------------------------- fences

FENCES = (
    Form("fence.proxy.async", "fence", "fence.proxy.async{.<space>}", "k.fence_proxy_async(space=None)",
         {"space": (None, "global", "shared::cta", "shared::cluster")}, _v((8, 0)), level="gpu"),
    Form("fence.proxy.tensormap::generic.release", "fence", "fence.proxy.tensormap::generic.release.<scope>",
         "k.fence_proxy_tensormap('release', scope)", {"scope": SCOPES4}, _v((8, 3))),
    Form("fence.proxy.tensormap::generic.acquire", "fence",
         "fence.proxy.tensormap::generic.acquire.<scope> [addr], 128",
         "k.fence_proxy_tensormap('acquire', scope, tmap_or_generic_addr)", {"scope": SCOPES4}, _v((8, 3)),
         level="gpu"),
    Form("fence.sem.scope", "fence", "fence.<sem>.<scope>", "k.fence(sem, scope)",
         {"sem": ("sc", "acq_rel", "acquire", "release"), "scope": SCOPES4}, _v((7, 8)),
         (({"sem": ("acquire", "release")}, _v((8, 6))),)),
    Form("fence.release.sync_restrict", "fence", "fence{.<proxy>}.release.sync_restrict::shared::cta.cluster",
         "k.fence_sync_restrict('release', proxy_async=False)", {"proxy": (None, "proxy.async::generic")},
         _v((8, 6))),
    Form("fence.acquire.sync_restrict", "fence", "fence{.<proxy>}.acquire.sync_restrict::shared::cluster.cluster",
         "k.fence_sync_restrict('acquire', proxy_async=False)", {"proxy": (None, "proxy.async::generic")},
         _v((8, 6))),
)

# ----------------------------------------------------------------------------- tensor maps

TM_SPACE = {"space": (None, "global", "shared::cta")}
TM_REQ = _v((8, 3), ARCH_SPECIFIC)


def _replace(fld, typ, *, ord_=False, values=None, req=TM_REQ, when=(), level="assembled", note=""):
    quals = dict(TM_SPACE)
    if ord_:
        quals["ord"] = (0, 1, 2, 3) if fld == "global_stride" else (0, 1, 2, 3, 4)
    quals["value"] = values if values is not None else ("imm", "reg")
    operands = "[addr], ord, new_val" if ord_ else "[addr], new_val"
    call = f"k.tensormap_replace(addr, '{fld}', new_val{', ord=i' if ord_ else ''}, space=None)"
    return Form(f"tensormap.replace.tile.{fld}", "tensormap",
                f"tensormap.replace.tile.{fld}{{.<space>}}.b1024.{typ} {operands}", call, quals, req, when,
                level=level, note=note)


TENSORMAP = (
    _replace("global_address", "b64", level="gpu"),
    _replace("rank", "b32", note="new_val is rank-1 (0..4)"),
    _replace("box_dim", "b32", ord_=True, note="1..256"),
    _replace("global_dim", "b32", ord_=True, level="gpu"),
    _replace("global_stride", "b64", ord_=True, level="gpu", note="bytes, a multiple of 16; ord 0..3 = dims 1..4"),
    _replace("element_stride", "b32", ord_=True, note="1..8"),
    _replace("elemtype", "b32", values=tuple(range(16)),
             when=(({"value": (13, 14, 15)}, _v((8, 7), BLACKWELL_ARCH)),),
             note="immediate only; 13-15 (packed 4/6-bit) need .version 8.7 on an sm_100a-class target"),
    _replace("interleave_layout", "b32", values=(0, 1, 2), note="immediate only"),
    _replace("swizzle_mode", "b32", values=(0, 1, 2, 3), note="immediate only"),
    _replace("swizzle_atomicity", "b32", values=(0, 1, 2, 3), req=_v((8, 6), BLACKWELL_ARCH),
             note="immediate only; sm_100a-class: assembled, not run on hardware"),
    _replace("fill_mode", "b32", values=(0, 1), note="immediate only"),
    Form("tensormap.cp_fenceproxy", "tensormap",
         "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.<scope>.sync.aligned [dst], [src], 128",
         "k.tensormap_cp_fenceproxy(gmem_map, smem_map, scope='gpu') (a whole warp)", {"scope": SCOPES4},
         _v((8, 3)), level="gpu"),
    Form("prefetch.tensormap", "tensormap", "prefetch{.<space>}.tensormap [a]",
         "k.prefetch_tensormap(tmap, space='')", {"space": (None, "param", "const")}, _v((8, 0)), level="gpu"),
)

# -------------------------------------------------------------------------------- cluster

CLUSTER_SREGS = ("%cluster_ctarank", "%cluster_nctarank", "%cluster_ctaid.x", "%cluster_ctaid.y",
                 "%cluster_ctaid.z", "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z",
                 "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x", "%nclusterid.y",
                 "%nclusterid.z", "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size")
ST_TYPES = ("b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64")

CLUSTER = (
    Form("barrier.cluster.arrive", "cluster", "barrier.cluster.arrive{.<sem>}{.<aligned>}",
         "k.barrier_cluster_arrive(sem=None, aligned=True)",
         {"sem": (None, "release", "relaxed"), "aligned": (None, "aligned")}, _v((7, 8)),
         (({"sem": ("release", "relaxed")}, _v((8, 0))),), level="gpu"),
    Form("barrier.cluster.wait", "cluster", "barrier.cluster.wait{.<sem>}{.<aligned>}",
         "k.barrier_cluster_wait(sem=None, aligned=True)", {"sem": (None, "acquire"), "aligned": (None, "aligned")},
         _v((7, 8)), (({"sem": "acquire"}, _v((8, 0))),), level="gpu"),
    Form("mapa", "cluster", "mapa{.<space>}.<type> d, a, rank", "k.mapa(addr, rank, space='shared::cluster')",
         {"space": ("shared::cluster", None), "type": ("u32", "u64")}, _v((7, 8)),
         excludes=(({"space": None, "type": "u32"}, "a generic address is 64-bit"),), level="gpu",
         note="run on the H200: mapa.shared::cluster.u32"),
    Form("getctarank", "cluster", "getctarank{.<space>}.<type> d, a", "k.getctarank(addr, space='shared::cluster')",
         {"space": ("shared::cluster", None), "type": ("u32", "u64")}, _v((7, 8)),
         excludes=(({"space": None, "type": "u32"}, "a generic address is 64-bit"),), level="gpu",
         note="run on the H200: getctarank.shared::cluster.u32"),
    Form("elect.sync", "cluster", "elect.sync d|p, membermask", "k.elect_sync(mask, lane=False); k.elect_one()",
         {"lane": ("_", "reg"), "mask": ("imm", "reg")}, _v((8, 0)), level="gpu"),
    Form("cluster special registers", "cluster", "mov.u32 d, %sreg", "k.mov(sreg.cluster_ctarank)",
         {"sreg": CLUSTER_SREGS}, _v((7, 8)), (({"sreg": "%aggr_smem_size"}, _v((8, 1))),), level="gpu",
         note="run on the H200: %cluster_ctarank, %cluster_nctarank, %cluster_ctaid.x, %clusterid.x, "
              "%nclusterid.x"),
    Form("is_explicit_cluster", "cluster", "mov.pred p, %is_explicit_cluster", "k.mov(sreg.is_explicit_cluster)",
         level="gpu"),
    Form("st.async", "cluster",
         "st.async.shared::cluster.mbarrier::complete_tx::bytes{.<vec>}.<type> [a], b, [mbar]",
         "k.st_async(type, remote_addr, value_or_tuple, remote_mbar)",
         {"vec": (None, "v2", "v4"), "type": ST_TYPES}, _v((8, 1)),
         excludes=(({"vec": "v4", "type": ("b64", "u64", "s64", "f64")}, "a vector is at most 128 bits"),),
         level="gpu"),
    Form("red.async", "cluster",
         "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.<op>.<type> [a], b, [mbar]",
         "k.red_async(op, type, remote_addr, value, remote_mbar)",
         {"op": REDUCE_OPS, "type": ("b32", "u32", "s32", "u64", "s64")}, _v((8, 1)),
         excludes=tuple(({"op": o, "type": t}, f".{o} does not take .{t}") for o, ok in (
             ("add", {"u32", "s32", "u64", "s64"}), ("min", {"u32", "s32"}), ("max", {"u32", "s32"}),
             ("inc", {"u32"}), ("dec", {"u32"}), ("and", {"b32"}), ("or", {"b32"}), ("xor", {"b32"}))
             for t in ("b32", "u32", "s32", "u64", "s64") if t not in ok),
         level="gpu"),
    Form("griddepcontrol", "control", "griddepcontrol.<action>",
         "k.griddepcontrol_launch_dependents() / k.griddepcontrol_wait()",
         {"action": ("launch_dependents", "wait")}, _v((7, 8))),
    Form("setmaxnreg", "control", "setmaxnreg.<action>.sync.aligned.u32 N", "k.setmaxnreg_inc(n) / k.setmaxnreg_dec(n)",
         {"action": ("inc", "dec"), "n": (24, 40, 128, 232, 256)}, _v((8, 0), ARCH_SPECIFIC),
         note="N is 24..256, a multiple of 8; warpgroup-collective"),
)

# ------------------------------------------------------------------------------ directives

DIRECTIVES = (
    Form(".reqntid", "directive", ".reqntid nx{, ny{, nz}}", "px.kernel(name, reqntid=(nx, ny, nz))",
         {"dims": (1, 2, 3)}, level="gpu", note="not with .maxntid"),
    Form(".maxntid", "directive", ".maxntid nx{, ny{, nz}}", "px.kernel(name, maxntid=(nx, ny, nz))",
         {"dims": (1, 2, 3)}),
    Form(".minnctapersm", "directive", ".minnctapersm n", "px.kernel(name, maxntid=..., minnctapersm=n)"),
    Form(".maxnreg", "directive", ".maxnreg n", "px.kernel(name, maxnreg=n)"),
    Form(".reqnctapercluster", "directive", ".reqnctapercluster nx{, ny{, nz}}",
         "px.kernel(name, reqnctapercluster=(nx, ny, nz)) (also emits .explicitcluster)", {"dims": (1, 2, 3)},
         level="gpu", note="not with .maxclusterrank"),
    Form(".explicitcluster", "directive", ".explicitcluster", "px.kernel(name, explicitcluster=True)",
         level="gpu"),
    Form(".maxclusterrank", "directive", ".maxclusterrank n", "px.kernel(name, maxclusterrank=n)"),
)

FORMS: tuple[Form, ...] = MBARRIER + BULK + TENSOR + POLICY + FENCES + TENSORMAP + CLUSTER + DIRECTIVES
BY_KEY: dict[str, Form] = {f.key: f for f in FORMS}
assert len(BY_KEY) == len(FORMS), "duplicate form keys"
assert all(f.level in LEVELS for f in FORMS)

FAMILY_TITLES = {
    "mbarrier": "mbarrier", "bulk": "Bulk copies (non-tensor)", "tensor": "Bulk tensor copies (TMA)",
    "policy": "L2 cache policies", "fence": "Fences", "tensormap": "Tensor maps on the device",
    "cluster": "Cluster", "control": "Execution control", "directive": "Kernel directives",
}
LEVEL_TEXT = {"emitted": "emitted", "assembled": "assembled", "gpu": "GPU-verified"}


def _floor_text(r: Req) -> tuple[str, str]:
    arch, ptx = floor_target(r)
    return arch, fmt_ptx(ptx)


def _raises_text(f: Form) -> str:
    parts = []
    for cond, r in f.when:
        what = ", ".join(f"{k}={'|'.join(str(x) for x in v) if isinstance(v, tuple) else v}" for k, v in cond.items())
        arch, ptx = _floor_text(f.req & r)
        parts.append(f"{what}: {arch} / {ptx}")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """docs/isa.md: one table per family, every form with its DSL call, PTX spelling, floors and level."""
    out = ["# The TMA instruction family in ptxdsl", "",
           "Generated by `python -m ptxdsl.isa.registry > docs/isa.md` from `ptxdsl/isa/registry.py`; "
           "do not edit by hand.", "",
           "PTX column: `<name>` is a qualifier value, `{...}` is optional (dropped when its qualifier is "
           "not given); the DSL column is the builder call (`k` is a `ptxdsl.kernel`).", "",
           "Floors: the lowest `.target` that accepts the plainest form and the `.version` it needs there "
           "(ptxas 13.0 measurements in shared/reference/ptx-tma-isa.md, held in CI against nvJitLink, which "
           "also rejects each form one `.version` below a floor that is above the target's own minimum); `raised by` lists the qualifier values that need "
           "more. Level: *assembled* = CI assembles random valid qualifier combinations with "
           "nvJitLink for the floor target; *GPU-verified* = also run on an H200 (sm_90a) and checked against "
           "numpy / ptxdsl.reference (tests/test_isa_gpu.py). Forms that need an sm_100a-class target are "
           "assembled for it in CI and were not run on hardware.", ""]
    for family, title in FAMILY_TITLES.items():
        forms = [f for f in FORMS if f.family == family]
        out += [f"## {title}", "", "| PTX | DSL | min sm | min ptx | raised by | level | notes |",
                "|---|---|---|---|---|---|---|"]
        for f in forms:
            arch, ptx = _floor_text(f.req)
            level = LEVEL_TEXT[f.level]
            if f.level == "gpu" and any(not {"sm_90", "sm_90a"} & (f.req & r).targets for _, r in f.when):
                level += " (Hopper forms)"
            out.append(f"| `{_cell(f.ptx)}` | `{_cell(f.dsl)}` | {arch} | {ptx} | {_cell(_raises_text(f))} | "
                       f"{level} | {_cell(f.note)} |")
        out.append("")
    counts = {lvl: sum(f.level == lvl for f in FORMS) for lvl in LEVELS}
    out += [f"{len(FORMS)} forms: {counts['gpu']} GPU-verified, {counts['assembled']} assembled only, "
            f"{counts['emitted']} emitted only.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
