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

from ..errors import LaunchError, SourceLoc
from ..tensormap import TensorMapSpec
from .deferred import Env, RingCheck, cluster_size
from .rules import RULES

CACHE_SIZE = 256                # verdicts kept per kernel (distinct argument signatures)
ENV = "PTXDSL_LAUNCH_CHECKS"    # "0": check_launch checks nothing (a debug kernel's device checks then speak)
HIDDEN = "__ptxdsl_debug"       # the debug record's parameter (ptxdsl.watchdog.PARAM): not the user's


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
    through it: the run of its threads follows loop bounds and branches read from such tables."""
    plan = getattr(kernel, "__dict__", {}).get("launch_checks")      # a Kernel's, or a kernel info's
    if not isinstance(plan, LaunchPlan):
        target = kernel.finish() if callable(getattr(type(kernel), "finish", None)) else kernel
        if not hasattr(target, "body"):
            raise LaunchError(f"check_launch({kernel!r}): expected a kernel (builder or Kernel) or a launcher's "
                              f"kernel info", SourceLoc.caller(), rule="launch.check")
        plan = launch_plan(target)
    plan.run(args, grid, block, cluster, shared_bytes)


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
