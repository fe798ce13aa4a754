"""Whole-kernel checks: the TMA/mbarrier protocol, alignment, capacity, cluster shape, target floor.

    check(kernel)          every finding, sorted by source line (what `ptxdsl check` prints)
    verify_kernel(kernel)  raise TargetError / VerifyError for the first error (KernelBuilder.finish calls it
                           unless the kernel was made with verify=False); a kernel that passes leaves its launch
                           checks prepared
    check_launch(kernel, args, grid=, block=, cluster=)
                           raise LaunchError for a fact that depends on the arguments and does not hold with
                           these (a coordinate or byte count passed as a parameter, a map declared without a
                           spec, a loop bound); no GPU needed, cached per argument signature

Rules are data (`rules.RULES`). The checks read only the ops' declared effects (ptxdsl.isa.effects):

    facts.py         what each register holds (thread variance, shared addresses, low bits, constants)
    flow.py          the walk in program order with the protocol state (state.py), effects -> rule families:
      mbarrier.py      init/inval/use: mbarrier-uninit, -init-fence, -init-sync, -align
      transactions.py  expect_tx against delivered bytes: expect-tx-mismatch, tx-count-range
      phases.py        waits and parity: phase-reuse, loop-parity, wait-before-arrive
      continuation.py  loads a loop's later iterations retire (`if t + STAGES < n`)
      tma.py           boxes: tma-smem-align, tma-smem-bounds, coord-align, multicast-mask
      memory.py        generic accesses vs the async proxy: tma-load-race, async-proxy-fence
      groups.py        async-group queues (bulk, wgmma): commit_group / wait_group, one mechanism for both engines
      bulk_groups.py   bulk-group-pending, bulk-group-exit
      ordering.py      flags between threads vs TMA's global accesses: bulk-store-release, acquire-async-fence
      tensormaps.py    tensormap-release, tensormap-acquire, tensormap-align
      divergence.py    sync-aligned-divergent, barrier-divergent, wgmma-warpgroup-divergent
      wgmma.py         wgmma-fence, wgmma-proxy-fence, wgmma-pending, wgmma-descriptor-map, setmaxnreg-budget
    symbols.py       values known up to parameters (linear forms), for the launch and device checks
    kernel.py        smem-capacity, cluster-size, debug-timeout, unchecked-tensormap
    ring.py          a run of the kernel's threads (thread classes) through its barriers: wait-never-armed,
                     arrival-count, ring-parity, refill-race, wgmma-stage-release
    deferred.py      the launch checks as data; launch.py evaluates them (check_launch)
"""
from __future__ import annotations

from ..errors import DSLError, SourceLoc, TargetError, VerifyError, shown_path
from ..ir import Addr, Kernel, Reg, SharedAlloc
from ..target import resolve_target
from . import kernel as kernel_rules
from .facts import facts_of, key_name
from .flow import Flow
from .launch import Launch, Outcome, check_launch, explain_launch, launch_plan
from .ring import ring_findings
from .rules import RULES, Diagnostic, Rule, diag, order
from .state import stmts_loc

__all__ = ["RULES", "Diagnostic", "Launch", "Outcome", "Rule", "barrier_names", "check", "check_launch",
           "device_checks", "explain_launch", "format_diagnostics", "launch_plan", "verify_kernel"]


def check(kernel: Kernel) -> list[Diagnostic]:
    """Every finding of every rule on `kernel` (a Kernel, or a kernel builder's), sorted by source location."""
    kernel = _kernel_of(kernel)
    out = _findings(kernel)
    try:
        resolve_target([kernel])
    except TargetError as e:
        out.append(Diagnostic("target", e.message, e.loc))
    return sorted(out, key=order)


def _kernel_of(obj) -> Kernel:
    if isinstance(obj, Kernel):
        return obj
    inner = getattr(obj, "kernel", None)               # a KernelBuilder
    if isinstance(inner, Kernel):
        return inner
    raise DSLError(f"check({obj!r}): expected a Kernel or a kernel builder (px.kernel(...))", SourceLoc.caller())


def verify_kernel(k: Kernel) -> None:
    """Check the target floor (TargetError), then raise VerifyError for the first error-severity finding,
    naming the rule, the line and the page that shows the fix."""
    resolve_target([k])
    for d in sorted(_findings(k), key=order):
        if d.severity == "error":
            raise VerifyError(f"{d.message} (see {RULES[d.rule].doc})", d.loc, rule=d.rule)
    launch_plan(k).checks       # the walk that prepares the launch checks, made here with the rest of the verifier's
                                # (from the same Facts), so that a first launch only evaluates them


def format_diagnostics(diags) -> str:
    """`file:line: rule-name: message (see ...)` per finding, like a linter (paths relative to the working
    directory), each ending with the command that prints the rule's section of the docs."""
    lines = []
    for d in diags:
        tag = "warning: " if d.severity == "warning" else ""
        where = f"{_path(d.loc.file)}:{d.loc.line}: " if d.loc is not None else ""
        see = f" (see {RULES[d.rule].doc})" if d.rule in RULES and "ptxdsl docs" not in d.message else ""
        lines.append(f"{where}{d.rule}: {tag}{d.message}{see}")
    return "\n".join(lines)


def barrier_names(k: Kernel, addrs) -> list[str]:
    """Names of the mbarriers at `addrs` as the diagnostics spell them: `bar`, `bar+8`, `full[?]` for a slot of
    an array picked at run time; the register when its buffer is not known."""
    facts = facts_of(k)
    out = []
    for addr in addrs:
        base, off = (addr.base, addr.offset) if isinstance(addr, Addr) else (addr, 0)
        if isinstance(base, SharedAlloc):
            out.append(key_name((base, off)))
            continue
        known = facts.get(base).addr if isinstance(base, Reg) else None
        out.append(key_name((known[0], None if known[1] is None else known[1] + off)) if known else str(base))
    return out


def device_checks(k: Kernel) -> dict:
    """What a debug kernel checks on the device before an instruction: {Instr: [check, ...]}, a check being
    ("coord", register, multiple of elements, element bytes, dtype) for a TMA box's innermost coordinate whose
    alignment is not static, or ("tx", register, bytes, barrier name, load lines) for an expect_tx whose
    register alone decides a phase whose loads deliver a static byte count. Kept on the kernel."""
    got = getattr(k, "device_checks", None)
    if not isinstance(got, dict):
        flow = Flow(k)
        flow.run()
        got = {s: c for s, c in flow.device.items() if c}
        k.device_checks = got
    return got


def _path(file: str) -> str:
    return shown_path(file)


def _findings(k: Kernel) -> list[Diagnostic]:
    out = list(kernel_rules.findings(k))
    walk = Flow(k)
    flow = walk.run()
    out.extend(flow)
    if any(d.severity == "error" for d in flow):
        return out                  # the run of the threads would mostly report what those errors cause
    for f in ring_findings(k, effects=walk.facts.effects):
        if not any(f.rule in getattr(s, "allow", frozenset()) for s in f.stmts):
            out.append(diag(f.rule, f.message, stmts_loc(list(f.stmts))))
    return out
