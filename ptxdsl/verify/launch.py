"""check_launch: the verifier's launch checks, evaluated with the actual arguments before the driver sees them.

    check_launch(kernel, args, grid=..., block=..., cluster=None)

`kernel` is a KernelBuilder, a Kernel or the emitted kernel info (`PTX.kernels[name]`, what a launcher holds);
`args` the launch's arguments in parameter order (ints for scalars, a TensorMapSpec for each tensor map; a raw
CUtensorMap, or anything else, leaves the checks that need it to the declared spec, if any). A pointer parameter
may be given as a host array (numpy, anything with `__array_interface__`): the run of the kernel's threads then
reads what the kernel loads through it from there (a work list, a table of shapes), so that a kernel whose loop
bounds or branches come from memory is checked too. At a real launch the pointers are device memory the
checks do not read. A broken check
raises LaunchError naming the rule, the parameters and their values, and the kernel's line. Needs no GPU. The
environment variable PTXDSL_LAUNCH_CHECKS=0 turns the checks off.

The checks (`launch_plan(kernel).checks`, verify/deferred.py) come from a walk of the kernel in which every
tensor map's spec is unknown and parameters are symbols, plus the run of the kernel's threads where it depends
on a scalar parameter. They are computed once per kernel (by verify_kernel, else on first use), and their
verdict is kept per distinct signature of the arguments they read (those scalars' values, those maps' dtype,
box, swizzle and kind): a repeated launch with the same signature costs one dictionary lookup.
"""
from __future__ import annotations

import os

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import LaunchError, SourceLoc
from ..limits import block_threads, launch_dims
from ..tensormap import TensorMapSpec
from .deferred import Env, RingCheck, cluster_size
from .rules import RULES

CACHE_SIZE = 256                # verdicts kept per kernel (distinct argument signatures)
ENV = "PTXDSL_LAUNCH_CHECKS"    # "0": check_launch checks nothing (a debug kernel's device checks then speak)
HIDDEN = "__ptxdsl_debug"       # the debug record's parameter (ptxdsl.watchdog.PARAM): not the user's
RUN = ("the run of the CTA's threads (wait-never-armed, arrival-count, ring-parity, refill-race, tma-load-race at "
       "launch)")


class LaunchPlan:
    """The launch checks of one kernel and the verdicts of the argument signatures seen so far."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = kernel.name
        self.params = [p for p in kernel.params if p.name != HIDDEN]
        self.declared = {p.name: getattr(p, "tmap", None) for p in self.params if p.kind == "tensormap"}
        self.cluster = cluster_size(kernel.cluster_dims)
        self._checks = None
        self._reads = None
        self._pointers = frozenset()
        self._grid = False
        self._verdicts: dict = {}

    @property
    def checks(self) -> tuple:
        """The launch checks (computed on first use)."""
        if self._checks is None:
            self._checks = _build(self.kernel)
            names = {n for c in self._checks for n in c.params()}
            self._reads = tuple(i for i, p in enumerate(self.params) if p.name in names)
            self._pointers = frozenset(i for i in self._reads if self.params[i].kind == "ptr")
            self._grid = "grid" in names
        return self._checks

    @property
    def reads(self) -> tuple:
        """The indices of the parameters the checks read (a launch that changes only others is not checked
        again)."""
        self.checks
        return self._reads

    def run(self, args, grid, block, cluster=None, shared_bytes=None) -> None:
        """Raise LaunchError for the first check the arguments break (nothing with PTXDSL_LAUNCH_CHECKS=0)."""
        if os.environ.get(ENV) == "0":
            return
        checks = self.checks
        args = tuple(args)
        if len(args) != len(self.params):
            return                              # the launcher names the argument count
        host = {i: args[i].tobytes() for i in self._pointers if _is_host(args[i])}     # read once, if at all
        key = (tuple([_host_key(host.get(i)) if i in self._pointers else _key(args[i]) for i in self._reads]),
               cluster if cluster is None or type(cluster) is int
               else tuple(cluster), block if type(block) is int else tuple(block), _int(shared_bytes),
               None if not self._grid else grid if type(grid) is int else tuple(grid))
        try:
            verdict = self._verdicts[key]
        except KeyError:
            verdict = self._evaluate(checks, args, block, cluster, shared_bytes, grid, host)
            if len(self._verdicts) >= CACHE_SIZE:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        except TypeError:                       # an argument that cannot be a key: no cache for it
            verdict = self._evaluate(checks, args, block, cluster, shared_bytes, grid, host)
        if verdict is not None:
            rule, message, loc = verdict
            raise LaunchError(message, loc, rule=rule)

    def _evaluate(self, checks, args, block, cluster, shared_bytes=None, grid=None, host=None):
        env = self._env(args, block, cluster, shared_bytes, grid, host)
        for c in checks:
            got = c.evaluate(env)
            if got is None:
                continue
            rule, message, loc = got if isinstance(got, tuple) else (c.rule, got, c.loc)
            names = [n for n in dict.fromkeys(c.params())]
            return rule, (f"kernel {self.name!r} launched with {_given(names, env)}: {message} "
                          f"(see {RULES[rule].doc})"), loc or c.loc or self.kernel.loc
        return None

    def _env(self, args, block, cluster, shared_bytes=None, grid=None, host=None) -> Env:
        """The checks' view of a launch; `host` {pointer parameter index: bytes} the host copies run() read."""
        scalars, maps = {}, {}
        for p, a in zip(self.params, args):
            if p.kind == "scalar":
                v = _int(a)
                if v is not None:
                    scalars[p.name] = v
            elif p.kind == "tensormap":
                maps[p.name] = a if isinstance(a, TensorMapSpec) else self.declared.get(p.name)
        memory = {self.params[i].name: b for i, b in (host or {}).items()}
        size = cluster_size(_dims(cluster)) if cluster is not None else self.cluster
        return Env(scalars, maps, size, _dims(block), _int(shared_bytes), _dims(grid) if self._grid else None,
                   memory or None)


def launch_plan(kernel) -> LaunchPlan:
    """The kernel's LaunchPlan, made once and kept on the kernel (`kernel.launch_checks`)."""
    plan = getattr(kernel, "launch_checks", None)
    if not isinstance(plan, LaunchPlan):
        plan = LaunchPlan(kernel)
        kernel.launch_checks = plan
    return plan


def check_launch(kernel, args, *, grid, block, cluster=None, shared_bytes=None) -> None:
    """Evaluate `kernel`'s launch checks with the launch's arguments (in parameter order, without the debug
    record's hidden one) and its grid, block, cluster and dynamic shared bytes (None: what the kernel declares);
    raise LaunchError for the first one broken. `kernel`: a KernelBuilder, a Kernel, or a launcher's kernel info
    (`ptxdsl.emit(k).kernels[name]`). A pointer argument given as a host array (numpy) is what the kernel reads
    through it: the run of its threads follows loop bounds and branches read from such tables. The launch's shape
    is checked as the driver would: grid, block and cluster are ints or 1 to 3 ints in the device's ranges, a
    block has at most 1,024 threads, and `args` has one value per parameter (LaunchError naming the rule)."""
    plan = _plan_of(kernel)
    args, grid, block, cluster = _launch_shape(plan, args, grid, block, cluster, shared_bytes)
    plan.run(args, grid, block, cluster, shared_bytes)


def _plan_of(kernel) -> LaunchPlan:
    plan = getattr(kernel, "__dict__", {}).get("launch_checks")      # a Kernel's, or a kernel info's
    if not isinstance(plan, LaunchPlan):
        target = kernel.finish() if callable(getattr(type(kernel), "finish", None)) else kernel
        if not hasattr(target, "body"):
            raise LaunchError(f"check_launch({kernel!r}): expected a kernel (builder or Kernel) or a launcher's "
                              f"kernel info", SourceLoc.caller(), rule="launch.check")
        plan = launch_plan(target)
    return plan


def _launch_shape(plan, args, grid, block, cluster, shared_bytes):
    """The launch's arguments and dimensions, checked as the driver checks them (LaunchError otherwise)."""
    where = SourceLoc.caller()
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise LaunchError(f"args={args!r} breaks 'the arguments are a tuple or list of the kernel's "
                          f"{len(plan.params)} parameters, in order'", where, rule="launch.arg-count")
    if len(args) != len(plan.params):
        names = ", ".join(p.name for p in plan.params) or "none"
        raise LaunchError(f"{len(args)} argument(s) given for kernel {plan.name!r} breaks 'one argument per "
                          f"parameter ({names})'", where, rule="launch.arg-count")
    try:
        dims = launch_dims(grid, "grid"), launch_dims(block, "block")
        cl = None if cluster is None else launch_dims(cluster, "cluster")
        block_threads(dims[1], name=plan.name)
    except LaunchError as e:
        raise e.at(where) from None
    if shared_bytes is not None and (type(shared_bytes) is bool or _int(shared_bytes) is None
                                     or _int(shared_bytes) < 0):
        raise LaunchError(f"shared_bytes={shared_bytes!r} breaks 'shared_bytes is a byte count >= 0'", where,
                          rule="launch.shared-bytes")
    return tuple(args), dims[0], dims[1], cl


@dataclass(frozen=True)
class Outcome:
    """What one launch check said of one launch (explain_launch, Launch.explain): `verdict` is "holds", "broken", "not run"
    (`needs` names the values it lacks: parameters, "grid", "block"), "cut short" (the run of the threads stopped
    at its step budget before the end: no hang concluded) or "not followed" (the run met a value it cannot know,
    such as one loaded from memory no host copy was given for)."""

    rule: str
    loc: SourceLoc | None
    verdict: str
    needs: tuple = ()
    message: str = ""
    what: str = ""


def explain_launch(kernel, args, *, grid=None, block=None, cluster=None, shared_bytes=None) -> list:
    """Every launch check of `kernel` evaluated with what is known of a launch, as Outcomes (none raises): `args`
    in parameter order, None for a value not known (a tensor map then keeps its declared spec, a pointer is
    device memory), `grid` None when not known. What `ptxdsl check` prints."""
    plan = _plan_of(kernel)
    checks = plan.checks
    args = tuple(args)
    grid = None if grid is None else launch_dims(grid, "grid")
    block = None if block is None else launch_dims(block, "block")
    if block is not None:
        block_threads(block, name=plan.name)
    if block is None and kernel_block(plan.kernel) is not None:
        block = kernel_block(plan.kernel)
    host = {i: a.tobytes() for i, a in enumerate(args) if plan.params[i].kind == "ptr" and _is_host(a)}
    env = plan._env(args, block, cluster, shared_bytes, grid, host)
    known = {p.name for p, a in zip(plan.params, args)
             if a is not None or (p.kind == "tensormap" and plan.declared.get(p.name) is not None)}
    out = []
    for c in checks:
        ring = isinstance(c, RingCheck)
        what = RUN if ring else c.rule
        needs = tuple(n for n in dict.fromkeys(c.params())
                      if (n == "grid" and grid is None) or (n == "block" and block is None)
                      or (n not in ("grid", "block") and n not in known))
        if needs:
            out.append(Outcome(c.rule, c.loc, "not run", needs, what=what))
            continue
        if ring:
            got, ends = c.run(env)
            cut = [e for e in ends if e[1] != "end"]
            if got is None and cut:
                cta, end, steps = cut[0]
                verdict = "cut short" if end == "budget" else "not followed"
                text = (f"the run of CTA {cta}'s threads stopped at its budget of {steps - 1:,} class steps, before "
                        f"the kernel's end: no hang or race past that point is ruled out (a smaller launch of the "
                        f"same kernel is checked whole)" if end == "budget" else
                        f"the run of CTA {cta}'s threads met a value it cannot know (loaded from memory without a "
                        f"host copy, or a branch it cannot follow) and stopped without a verdict")
                out.append(Outcome(c.rule, c.loc, verdict, message=text, what=what))
                continue
        else:
            got = c.evaluate(env)
        if got is None:
            out.append(Outcome(c.rule, c.loc, "holds", what=what))
        else:
            rule, message, loc = got if isinstance(got, tuple) else (c.rule, got, c.loc)
            out.append(Outcome(rule, loc or c.loc or plan.kernel.loc, "broken", message=message, what=what))
    return out


def kernel_block(kernel):
    """The block the kernel's .reqntid fixes, as (x, y, z), or None."""
    reqntid = getattr(kernel, "directives", {}).get("reqntid")
    return None if not reqntid else tuple(reqntid) + (1,) * (3 - len(reqntid))


@dataclass(frozen=True)
class Launch:
    """A launch a file is meant for, described for the launch checks (`ptxdsl check FILE` runs those the file's
    module-level `launches()` returns; `launch.check()` runs them in Python):

        def launches():
            return [px.Launch(KERNEL, {"ntiles": 512, "tiles_per_row": 8}, grid=512),
                    px.Launch(KERNEL, {"ntiles": 512, "tiles_per_row": 8}, grid=3, note="persistent")]

    `kernel`: the kernel (a builder or Kernel) or its name (a `.ptxd` file's kernels are matched by name, with the
    `launches()` of the .py file beside it). `args`: a mapping {parameter name: value} or the values in parameter
    order. A scalar parameter must be given (an int, or a float for a float parameter); a tensor map not given
    keeps its declared spec; a pointer not given is device memory the checks do not read, and a numpy array for
    it is the table the kernel reads through it (a work list, a table of shapes). `grid` (default 1), `block`
    (default the kernel's .reqntid), `cluster` and `shared_bytes` as at a real launch; `note` is printed with
    it."""

    kernel: object
    args: object = ()
    grid: object = 1
    block: object = None
    cluster: object = None
    shared_bytes: object = None
    note: str = ""
    loc: SourceLoc | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.loc is None:
            object.__setattr__(self, "loc", SourceLoc.caller(skip=2))

    @property
    def name(self) -> str:
        """The kernel's name."""
        if isinstance(self.kernel, str):
            return self.kernel
        k = getattr(self.kernel, "kernel", self.kernel)     # a builder's Kernel
        return getattr(k, "name", repr(self.kernel))

    def arguments(self, kernel=None) -> tuple:
        """The arguments in `kernel`'s parameter order (the Launch's own kernel by default); LaunchError for a
        name the kernel does not have, a scalar not given, or a sequence of the wrong length."""
        plan = _plan_of(kernel if kernel is not None else self.kernel)
        params = plan.params
        if isinstance(self.args, Mapping):
            unknown = [n for n in self.args if n not in {p.name for p in params}]
            if unknown:
                raise LaunchError(f"Launch of {plan.name!r}: {', '.join(map(repr, unknown))} breaks 'args names "
                                  f"the kernel's parameters ({', '.join(p.name for p in params)})'", self.loc,
                                  rule="launch.arg-count")
            values = tuple(self.args.get(p.name) for p in params)
        elif isinstance(self.args, Sequence) and not isinstance(self.args, (str, bytes)):
            if len(self.args) != len(params):
                raise LaunchError(f"Launch of {plan.name!r}: {len(self.args)} argument(s) breaks 'one argument per "
                                  f"parameter ({', '.join(p.name for p in params)})'", self.loc,
                                  rule="launch.arg-count")
            values = tuple(self.args)
        else:
            raise LaunchError(f"Launch of {plan.name!r}: args={self.args!r} breaks 'args is a mapping of parameter "
                              f"names to values, or the values in parameter order'", self.loc, rule="launch.arg-count")
        missing = [p.name for p, v in zip(params, values) if p.kind == "scalar" and v is None]
        if missing:
            raise LaunchError(f"Launch of {plan.name!r} gives no value for its scalar parameter(s) "
                              f"{', '.join(missing)}", self.loc, rule="launch.arg-count")
        return values

    def block_of(self, kernel=None):
        """The launch's block: the one given, else the kernel's .reqntid (LaunchError when it has none)."""
        if self.block is not None:
            return self.block
        plan = _plan_of(kernel if kernel is not None else self.kernel)
        block = kernel_block(plan.kernel)
        if block is None:
            raise LaunchError(f"Launch of {plan.name!r}: the kernel declares no .reqntid, so the launch must give "
                              f"block=", self.loc, rule="launch.block-shape")
        return block

    def describe(self, kernel=None) -> str:
        """The launch in one line: its scalar values, tables, grid and block."""
        plan = _plan_of(kernel if kernel is not None else self.kernel)
        parts = []
        for p, v in zip(plan.params, self.arguments(kernel)):
            if v is None:
                continue
            if p.kind == "scalar":
                parts.append(f"{p.name}={v}")
            elif _is_host(v):
                parts.append(f"{p.name}=<table of {len(v.tobytes())} bytes>")
            elif isinstance(v, TensorMapSpec):
                parts.append(f"{p.name}=<{v.dtype} map>")
        parts.append(f"grid={self.grid}")
        if self.block is not None:
            parts.append(f"block={self.block}")
        if self.cluster is not None:
            parts.append(f"cluster={self.cluster}")
        if self.shared_bytes is not None:
            parts.append(f"shared_bytes={self.shared_bytes}")
        return ", ".join(parts) + (f" ({self.note})" if self.note else "")

    def check(self, kernel=None) -> None:
        """check_launch with this launch (on `kernel`, a kernel of the same parameters, by default its own)."""
        k = kernel if kernel is not None else self.kernel
        check_launch(k, self.arguments(k), grid=self.grid, block=self.block_of(k), cluster=self.cluster,
                     shared_bytes=self.shared_bytes)

    def explain(self, kernel=None) -> list:
        """explain_launch with this launch: every check's Outcome."""
        k = kernel if kernel is not None else self.kernel
        args = self.arguments(k)
        plan = _plan_of(k)
        _launch_shape(plan, args, self.grid, self.block_of(k), self.cluster, self.shared_bytes)
        return explain_launch(k, args, grid=self.grid, block=self.block_of(k), cluster=self.cluster,
                              shared_bytes=self.shared_bytes)


def _build(kernel) -> tuple:
    from .flow import Flow
    from .ring import ring_depends_on_params

    flow = Flow(kernel, blind=True)
    flow.run()
    checks = list(flow.deferred.values())
    names = ring_depends_on_params(kernel)
    if names:
        checks.append(RingCheck(kernel, names))
    return tuple(checks)


def _int(v):
    if isinstance(v, bool):
        return None
    try:
        return int(v.__index__())
    except (AttributeError, TypeError):
        return None


def _dims(v):
    if v is None:
        return None
    if isinstance(v, int):
        return (v, 1, 1)
    try:
        t = tuple(int(x) for x in v)
    except (TypeError, ValueError):
        return None
    return t + (1,) * (3 - len(t))


def _key(a):
    """What of an argument the checks read: a map's dtype, box, element strides, swizzle and kind; a
    scalar's value."""
    if type(a) is int:
        return a
    if isinstance(a, TensorMapSpec):
        return (a.kind, a.dtype, a.box, a.element_strides, a.swizzle, a.interleave, a.channels_per_pixel,
                a.pixels_per_column, len(a.dims))
    return ("arg", a if isinstance(a, (float, str, type(None))) else _int(a))


def _is_host(a) -> bool:
    """A pointer argument given as a host copy (a numpy array, anything with __array_interface__), which the checks
    read; device memory they do not (which buffer it is does not change the verdict)."""
    return getattr(a, "__array_interface__", None) is not None


def _host_key(data):
    """The cache key of a host copy's bytes (None: device memory)."""
    return None if data is None else ("memory", len(data), hash(data))


def _given(names, env) -> str:
    from .deferred import describe_map

    out = []
    for n in names:
        if n in env.scalars:
            out.append(f"{n}={env.scalars[n]}")
        elif n in env.maps:
            out.append(f"{n} = {describe_map(env.maps[n])}")
        elif env.memory and n in env.memory:
            out.append(f"{n} = the host copy given ({len(env.memory[n])} bytes)")
        elif n == "grid" and env.grid is not None:
            out.append(f"grid={env.grid}")
    return ", ".join(out) if out else "these arguments"
