"""How a .ptxd instruction maps onto a KernelBuilder method: one table row per spelling.

    mbarrier.arrive.expect_tx.release.cta [bar], 8192
      -> k.mbarrier_arrive_expect_tx(bar=bar, tx=8192, sem="release", scope="cta")

A row names the dotted mnemonic, the builder method, the builder parameters its operands fill in
order, and which qualifier groups it takes. A qualifier is routed to the parameter of the first of
the row's groups that lists it; the op the builder builds then checks the value (so the allowed
values stay where the ISA is: ptxdsl/isa). Adding a builder method to the language is adding a row.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ..errors import DSLError
from ..isa.bulk import LOAD_MODES, MBAR_COMPLETE, REDUCE_MODES, REDUCE_OPS, STORE_MODES
from ..isa.core import CMP_FLOAT, CMP_INT
from ..isa.policy import PRIMARY, SECONDARY
from ..isa.tensormap import FIELDS
from ..types import ALL_TYPES, SPACES


def _same(*tokens) -> dict:
    return {t: t for t in tokens}


# Qualifier groups: group -> (builder parameter, {qualifier token: value}).
GROUPS: dict[str, tuple[str, dict]] = {
    "type": ("type", _same(*ALL_TYPES)),
    "sem": ("sem", _same("release", "acquire", "relaxed", "acq_rel", "sc")),
    "scope": ("scope", _same("cta", "cluster", "gpu", "sys")),
    "space": ("space", _same(*sorted(SPACES))),
    "mbspace": ("space", _same("shared", "shared::cta", "shared::cluster")),
    "vec": ("vec", {"v2": 2, "v4": 4}),
    "cmp": ("cmp", _same(*sorted(CMP_INT | CMP_FLOAT))),
    "mode": ("mode", _same("lo", "hi", "wide", "rn", "rz", "rm", "rp", "approx", "full")),
    "rnd": ("rnd", _same("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")),
    "sat": ("sat", {"sat": True}),
    "to": ("to", {"to": True}),
    "tmode": ("mode", _same(*sorted(LOAD_MODES | STORE_MODES | REDUCE_MODES))),
    "redop": ("op", _same(*sorted(REDUCE_OPS))),
    "cta_group": ("cta_group", {"cta_group::1": 1, "cta_group::2": 2}),
    "aligned": ("aligned", {"aligned": True}),
    "kind": ("kind", _same("try_wait", "test_wait")),
    "level": ("level", _same("cta", "gl", "sys")),
    "uni": ("uni", {"uni": True}),
    "noftz": ("noftz", {"noftz": True}),
    "evict": ("primary", _same(*sorted(PRIMARY | (SECONDARY - {None})))),
}


@dataclass(frozen=True)
class Form:
    """One spelling of a builder method.

    name: the dotted mnemonic; method: the KernelBuilder method; args: the parameters positional
    operands fill; quals: the qualifier groups it takes; route: group -> parameter(s) where the
    group's default parameter is not the builder's name (a tuple fills one per qualifier, in order);
    form: qualifiers that select this row among rows of the same name; fixed / defaults: parameters
    the spelling implies (defaults may be overridden by a qualifier); implied: PTX qualifiers the op
    spells itself, accepted and ignored; flag: (parameter, n) set True when the statement names at
    least n results; vec_of: the operand whose length a .v2/.v4 qualifier states; labels: parameters
    that take a label (forward references allowed).
    """

    name: str
    method: str
    args: tuple = ()
    quals: tuple = ()
    route: dict = field(default_factory=dict)
    form: frozenset = frozenset()
    fixed: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    implied: frozenset = frozenset()
    flag: tuple | None = None
    vec_of: str | None = None
    labels: tuple = ()


_B64 = frozenset({"b64"})
_EVICT = {"evict": ("primary", "secondary")}
_MB = ("sem", "scope", "mbspace")
_ARITH = (("add", "add"), ("sub", "sub"), ("rem", "rem"), ("min", "min"), ("max", "max"), ("and", "and_"),
          ("or", "or_"), ("xor", "xor"), ("shl", "shl"), ("shr", "shr"))

FORMS: tuple[Form, ...] = (
    # values and arithmetic
    Form("mov", "mov", ("src",), ("type",)),
    *(Form(name, method, ("a", "b"), ("type",)) for name, method in _ARITH),
    Form("mul", "mul", ("a", "b"), ("mode", "type")),
    Form("div", "div", ("a", "b"), ("mode", "type")),
    Form("not", "not_", ("a",), ("type",)),
    Form("neg", "neg", ("a",), ("type",)),
    Form("abs", "abs", ("a",), ("type",)),
    Form("mad", "mad", ("a", "b", "c"), ("mode", "type")),
    Form("fma", "mad", ("a", "b", "c"), ("mode", "type")),
    Form("setp", "setp", ("a", "b"), ("cmp", "type")),
    Form("selp", "selp", ("a", "b", "cond"), ("type",)),
    Form("cvt", "cvt", ("src",), ("rnd", "sat", "type"), route={"type": ("type", "stype")}),
    Form("cvta", "cvta", ("src",), ("to", "space"), implied=frozenset({"u64"})),
    Form("ld", "ld", ("addr",), ("space", "vec", "type")),
    Form("st", "st", ("addr", "value"), ("space", "vec", "type"), vec_of="value"),
    Form("atom", "atom_add", ("addr", "value"), ("space", "type"), form=frozenset({"add"})),
    # control
    Form("bar.sync", "bar_sync", ("barrier", "count")),
    Form("bra", "bra", ("target",), ("uni",), labels=("target",)),
    Form("ret", "ret"),
    Form("exit", "exit"),
    Form("trap", "trap"),
    Form("membar", "membar", (), ("level",)),
    # mbarrier
    Form("mbarrier.init", "mbarrier_init", ("bar", "count"), ("mbspace",), implied=_B64),
    Form("mbarrier.inval", "mbarrier_inval", ("bar",), ("mbspace",), implied=_B64),
    Form("mbarrier.arrive", "mbarrier_arrive", ("bar", "count"), _MB, implied=_B64, flag=("state", 1)),
    Form("mbarrier.arrive", "mbarrier_arrive_expect_tx", ("bar", "tx"), _MB, form=frozenset({"expect_tx"}),
         implied=_B64, flag=("state", 1)),
    Form("mbarrier.arrive", "mbarrier_arrive_no_complete", ("bar", "count"), _MB,
         form=frozenset({"noComplete"}), implied=_B64),
    Form("mbarrier.arrive_drop", "mbarrier_arrive_drop", ("bar", "count"), _MB, implied=_B64, flag=("state", 1)),
    Form("mbarrier.arrive_drop", "mbarrier_arrive_drop_expect_tx", ("bar", "tx"), _MB,
         form=frozenset({"expect_tx"}), implied=_B64, flag=("state", 1)),
    Form("mbarrier.arrive_drop", "mbarrier_arrive_drop_no_complete", ("bar", "count"), _MB,
         form=frozenset({"noComplete"}), implied=_B64),
    Form("mbarrier.expect_tx", "mbarrier_expect_tx", ("bar", "tx"), _MB, implied=_B64),
    Form("mbarrier.complete_tx", "mbarrier_complete_tx", ("bar", "tx"), _MB, implied=_B64),
    Form("mbarrier.try_wait", "mbarrier_try_wait", ("bar", "state", "hint"), _MB, implied=_B64),
    Form("mbarrier.try_wait", "mbarrier_try_wait", ("bar", "parity", "hint"), _MB, form=frozenset({"parity"}),
         implied=_B64),
    Form("mbarrier.test_wait", "mbarrier_test_wait", ("bar", "state"), _MB, implied=_B64),
    Form("mbarrier.test_wait", "mbarrier_test_wait", ("bar", "parity"), _MB, form=frozenset({"parity"}),
         implied=_B64),
    Form("mbarrier.pending_count", "mbarrier_pending_count", ("state",), implied=_B64),
    Form("wait", "mbarrier_wait", ("bar",), ("sem", "scope", "mbspace", "kind")),
    # fences
    Form("fence.proxy.async", "fence_proxy_async", (), ("space",)),
    Form("fence.mbarrier_init", "fence_mbarrier_init", implied=frozenset({"release", "cluster"})),
    Form("fence.proxy.tensormap::generic", "fence_proxy_tensormap", ("addr",), ("sem", "scope")),
    Form("fence", "fence", (), ("sem", "scope")),
    Form("fence", "fence_sync_restrict", form=frozenset({"sync_restrict::shared::cta"}), fixed={"sem": "release"},
         implied=frozenset({"release", "cluster"})),
    Form("fence", "fence_sync_restrict", form=frozenset({"sync_restrict::shared::cluster"}),
         fixed={"sem": "acquire"}, implied=frozenset({"acquire", "cluster"})),
    Form("fence.proxy.async::generic", "fence_sync_restrict", form=frozenset({"sync_restrict::shared::cta"}),
         fixed={"sem": "release", "proxy_async": True}, implied=frozenset({"release", "cluster"})),
    Form("fence.proxy.async::generic", "fence_sync_restrict", form=frozenset({"sync_restrict::shared::cluster"}),
         fixed={"sem": "acquire", "proxy_async": True}, implied=frozenset({"acquire", "cluster"})),
    # bulk tensor copies
    Form("cp.async.bulk.tensor", "cp_async_bulk_tensor", ("dst", "src", "mbar"), ("space", "tmode", "cta_group"),
         route={"space": "dst_space"}),
    Form("cp.reduce.async.bulk.tensor", "cp_reduce_async_bulk_tensor", ("dst", "src"), ("redop", "tmode")),
    Form("cp.async.bulk.prefetch.tensor", "cp_async_bulk_prefetch_tensor", ("tmap",), ("tmode",)),
    Form("cp.async.bulk", "cp_async_bulk", ("dst", "src", "size", "mbar"), ("space",),
         route={"space": ("dst_space", "src_space")}, implied=frozenset({MBAR_COMPLETE, "bulk_group"})),
    Form("cp.reduce.async.bulk", "cp_reduce_async_bulk", ("dst", "src", "size", "mbar"),
         ("space", "redop", "noftz", "type"), route={"space": "dst_space"},
         implied=frozenset({"shared::cta", MBAR_COMPLETE, "bulk_group"})),
    Form("cp.async.bulk.prefetch", "cp_async_bulk_prefetch", ("src", "size"), implied=frozenset({"L2", "global"})),
    Form("cp.async.bulk.commit_group", "cp_async_bulk_commit_group"),
    Form("cp.async.bulk.wait_group", "cp_async_bulk_wait_group", ("n",)),
    Form("cp.async.bulk.wait_group", "cp_async_bulk_wait_group_read", ("n",), form=frozenset({"read"})),
    # cluster
    Form("elect.sync", "elect_sync", ("mask",), flag=("lane", 2)),
    Form("barrier.cluster.arrive", "barrier_cluster_arrive", (), ("sem", "aligned"), defaults={"aligned": False}),
    Form("barrier.cluster.wait", "barrier_cluster_wait", (), ("sem", "aligned"), defaults={"aligned": False}),
    Form("mapa", "mapa", ("addr", "rank"), ("space",), defaults={"space": ""}, implied=frozenset({"u32", "u64"})),
    Form("getctarank", "getctarank", ("addr",), ("space",), defaults={"space": ""},
         implied=frozenset({"u32", "u64"})),
    Form("st.async", "st_async", ("addr", "value", "mbar"), ("vec", "type"),
         implied=frozenset({"shared::cluster", MBAR_COMPLETE}), vec_of="value"),
    Form("red.async", "red_async", ("addr", "value", "mbar"), ("redop", "type"),
         implied=frozenset({"relaxed", "cluster", "shared::cluster", MBAR_COMPLETE})),
    # execution control and cache policies
    Form("griddepcontrol.launch_dependents", "griddepcontrol_launch_dependents"),
    Form("griddepcontrol.wait", "griddepcontrol_wait"),
    Form("setmaxnreg.inc", "setmaxnreg_inc", ("n",), implied=frozenset({"sync", "aligned", "u32"})),
    Form("setmaxnreg.dec", "setmaxnreg_dec", ("n",), implied=frozenset({"sync", "aligned", "u32"})),
    Form("createpolicy.fractional", "createpolicy_fractional", ("fraction",), ("evict",), route=_EVICT,
         implied=_B64),
    Form("createpolicy.range", "createpolicy_range", ("addr", "primary_size", "total_size"), ("space", "evict"),
         route=_EVICT, implied=_B64),
    Form("createpolicy.cvt", "createpolicy_cvt", ("access_property",), implied=frozenset({"L2", "b64"})),
    # tensor maps
    *(Form("tensormap.replace", "tensormap_replace", ("addr", "ord", "new_val") if group == 2 else ("addr", "new_val"),
           ("space", "tmode"), form=frozenset({field}), fixed={"field": field},
           implied=frozenset({"b1024", t.name})) for field, (group, t) in FIELDS.items()),
    Form("tensormap.cp_fenceproxy", "tensormap_cp_fenceproxy", ("dst", "src"), ("scope",),
         implied=frozenset({"global", "shared::cta", "tensormap::generic", "release", "sync", "aligned"})),
    Form("prefetch", "prefetch_tensormap", ("tmap",), ("space",), form=frozenset({"tensormap"})),
)

BY_NAME: dict[tuple, list[Form]] = {}
for _f in FORMS:
    BY_NAME.setdefault(tuple(_f.name.split(".")), []).append(_f)


def resolve(mnemonic: str) -> tuple[Form, dict]:
    """The row a dotted mnemonic selects and the builder keyword arguments its qualifiers give."""
    parts = mnemonic.split(".")
    for n in range(len(parts), 0, -1):
        rows = BY_NAME.get(tuple(parts[:n]))
        if rows:
            break
    else:
        close = difflib.get_close_matches(mnemonic, sorted({f.name for f in FORMS}), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise DSLError(f"unknown instruction {mnemonic!r}{hint}")
    quals = parts[n:]
    fitting = [f for f in rows if f.form <= set(quals)]
    if not fitting:
        need = " or ".join("." + ".".join(sorted(f.form)) for f in rows)
        raise DSLError(f"{mnemonic}: expected the qualifier {need}")
    row = max(fitting, key=lambda f: len(f.form))
    return row, qualifier_kwargs(row, mnemonic, [q for q in quals if q not in row.form])


def qualifier_kwargs(row: Form, mnemonic: str, quals) -> dict:
    kwargs = dict(row.defaults)
    given: dict[str, str] = {}
    for q in quals:
        if q in row.implied:
            continue
        for group in row.quals:
            param, values = GROUPS[group]
            if q in values:
                break
        else:
            raise DSLError(f"{mnemonic}: unknown qualifier .{q}; {row.name} takes {allowed_qualifiers(row)}")
        targets = row.route.get(group, param)
        targets = targets if isinstance(targets, tuple) else (targets,)
        free = [t for t in targets if t not in given]
        if not free:
            prev = given[targets[-1]]
            raise DSLError(f"{mnemonic}: .{q} and .{prev} both set {targets[-1]}; give one")
        given[free[0]] = q
        kwargs[free[0]] = values[q]
    kwargs.update(row.fixed)
    return kwargs


def allowed_qualifiers(row: Form) -> str:
    words = sorted({"." + str(t) for g in row.quals for t in GROUPS[g][1]} | {"." + t for t in row.implied})
    return ", ".join(words) if words else "no qualifiers"
