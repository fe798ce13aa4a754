"""The verifier's rules as data (name, one-line summary, the anchor of docs/verifier.md that shows the fix,
severity) and the Diagnostic every check reports."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceLoc

DOC = "docs/verifier.md"


WALK, RUN, KERNEL, TARGET = "walk", "run", "kernel", "target"
ENGINES = (WALK, RUN, KERNEL, TARGET)


@dataclass(frozen=True)
class Rule:
    """One verifier rule: its name (what `allow()` and the diagnostics use), a one-line summary, the
    anchor of its section in docs/verifier.md, its severity, and the engine that reports it: the walk in
    program order (verify/flow.py), the run of the CTA's threads (verify/ring.py), the kernel-wide checks
    (verify/kernel.py) or the target floor. A rule of the walk may also be decided at launch (a launch check the
    walk prepared); `also` names a second engine for the cases the first cannot see (see `split`)."""

    name: str
    summary: str
    doc_anchor: str
    severity: str = "error"
    engine: str = WALK
    also: str | None = None

    @property
    def engines(self) -> tuple:
        return (self.engine,) if self.also is None else (self.engine, self.also)

    @property
    def doc(self) -> str:
        """Where the fix is shown, as the verifier's messages say it: the command that prints the rule's section
        of the installed docs, and the page in the repository."""
        return f"`ptxdsl docs {self.doc_anchor}` or {DOC}#{self.doc_anchor}"


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("mbarrier-uninit", "an mbarrier is used before mbarrier.init, after mbarrier.inval, or never initialised",
         "mbarrier-uninit", also=RUN),
    Rule("mbarrier-init-fence", "a TMA load completes on an mbarrier whose init was not published with "
         "fence.mbarrier_init / fence.proxy.async", "mbarrier-init-fence"),
    Rule("mbarrier-init-sync", "threads other than the initialising one (or another CTA's multicast) use an mbarrier "
         "with no bar.sync / barrier.cluster wait between the init and the use (a warning when they are lanes of "
         "the initialising warp)", "mbarrier-init-sync"),
    Rule("mbarrier-bounds", "an mbarrier operation on an address past the end of its barrier array (a ring index "
         "out of range)", "mbarrier-bounds", engine=RUN),
    Rule("expect-tx-mismatch", "the expect_tx bytes of a barrier phase differ from the bytes its TMA loads deliver",
         "expect-tx-mismatch", also=RUN),
    Rule("tx-count-range", "a barrier phase expects more than 2^20-1 transaction bytes", "tx-count-range"),
    Rule("phase-reuse", "a wait names the parity of a phase that already completed while the barrier's current "
         "phase still has loads or arrivals pending: it returns at once", "phase-reuse"),
    Rule("loop-parity", "a loop waits on the same barrier every iteration without flipping the parity",
         "loop-parity"),
    Rule("wait-before-arrive", "every thread waits on a barrier phase before the arrive that completes it",
         "wait-before-arrive"),
    Rule("wait-never-armed", "threads wait on a barrier phase (a slot of a ring) that no arrival ever reaches "
         "(counted over a run of the CTA's threads)", "wait-never-armed", engine=RUN),
    Rule("arrival-count", "a barrier phase some threads wait on gets fewer arrivals than its init count before every "
         "thread is blocked, or any phase gets more (counted over a run of the CTA's threads)", "arrival-count",
         engine=RUN),
    Rule("ring-parity", "a wait on a ring slot names a phase its threads have already seen complete while a TMA load "
         "on the slot's current phase is pending: it returns at once, before the data lands", "ring-parity",
         engine=RUN),
    Rule("refill-race", "a TMA load into shared memory that other threads may still be reading: no empty-barrier "
         "wait or bar.sync orders their reads before it", "refill-race", engine=RUN),
    Rule("async-proxy-fence", "a TMA store/reduce reads shared memory written by st.shared with no "
         "fence.proxy.async in between", "async-proxy-fence"),
    Rule("bulk-store-release", "a release (st.release, red/atom release, a fence) after a TMA store or reduce to "
         "global memory that is not complete (cp.async.bulk.wait_group, not .read) and fenced "
         "(fence.proxy.async.global)", "bulk-store-release"),
    Rule("acquire-async-fence", "a TMA or bulk op reads global memory after an acquiring load or atomic (a flag) with "
         "no fence.proxy.async.global in between", "acquire-async-fence"),
    Rule("tma-load-race", "ordinary loads/stores touch a buffer while a TMA load into it may be in flight",
         "tma-load-race", also=RUN),
    Rule("bulk-group-pending", "a shared buffer is overwritten while a bulk group reading it is pending (or a TMA "
         "store reads what other threads wrote with no barrier since)",
         "bulk-group-pending", also=RUN),
    Rule("bulk-group-exit", "the kernel exits while bulk groups reading shared memory are pending",
         "bulk-group-exit"),
    Rule("tensormap-release", "a tensor map edited with tensormap.replace is used before tensormap.cp_fenceproxy "
         "(or fence.proxy.tensormap release) publishes it", "tensormap-release"),
    Rule("tensormap-acquire", "a kernel that edits tensor maps uses one without fence.proxy.tensormap::generic "
         "acquire on it", "tensormap-acquire"),
    Rule("sync-aligned-divergent", "a .sync/.aligned warp-collective instruction in code that is not warp-uniform",
         "sync-aligned-divergent"),
    Rule("barrier-divergent", "bar.sync (all threads) or barrier.cluster in code that not every warp reaches",
         "barrier-divergent"),
    Rule("wgmma-fence", "a wgmma.mma_async with no wgmma.fence before it, or reading registers (accumulators, A "
         "fragment) written since the last wgmma.fence", "wgmma-fence"),
    Rule("wgmma-proxy-fence", "a wgmma.mma_async reads shared memory written by generic stores (st.shared, stmatrix) "
         "with no fence.proxy.async in between", "wgmma-proxy-fence"),
    Rule("wgmma-pending", "an accumulator or A register of a wgmma.mma_async is read or written before a "
         "wgmma.wait_group retires its group", "wgmma-pending"),
    Rule("wgmma-stage-release", "an operand stage of a wgmma.mma_async is released (its empty-barrier arrive) or "
         "refilled before a wgmma.wait_group retires the MMAs reading it", "wgmma-stage-release", engine=RUN),
    Rule("wgmma-warpgroup-divergent", "a warpgroup-collective instruction (wgmma.*, setmaxnreg) in code that is not "
         "warpgroup-uniform, or in a block that is not whole warpgroups", "wgmma-warpgroup-divergent"),
    Rule("wgmma-descriptor-map", "a matrix descriptor's swizzle, major-ness, element type, strides or start "
         "disagrees with the tensor map that fills its buffer", "wgmma-descriptor-map"),
    Rule("setmaxnreg-budget", "a setmaxnreg.dec that raises or .inc that lowers the register count, or warpgroups "
         "whose counts do not fit the register file for the kernel's block", "setmaxnreg-budget"),
    Rule("tma-smem-align", "a TMA shared-memory box not aligned to 128 bytes or to its swizzle pattern",
         "tma-smem-align"),
    Rule("mbarrier-align", "an mbarrier not 8-byte aligned", "mbarrier-align"),
    Rule("tma-smem-bounds", "a TMA box that does not fit in its shared buffer from the given offset",
         "tma-smem-bounds", also=RUN),
    Rule("tensormap-align", "a shared-memory tensor map not 128-byte aligned", "tensormap-align"),
    Rule("smem-capacity", "shared memory over what ptxas or the device allows", "smem-capacity", engine=KERNEL),
    Rule("multicast-mask", "a multicast mask with no bit set or bits outside the cluster", "multicast-mask"),
    Rule("cluster-size", "a cluster over 8 CTAs (needs the non-portable opt-in) or over 16", "cluster-size",
         engine=KERNEL),
    Rule("coord-align", "a TMA box whose innermost start offset is statically not a multiple of 16 bytes",
         "coord-align"),
    Rule("unchecked-tensormap", "a tensor-map parameter a TMA instruction uses has no TensorMapSpec: the checks "
         "that need its box and dtype run only at launch", "unchecked-tensormap", "warning", engine=KERNEL),
    Rule("tensormap-spec", "at launch: the map bound to a parameter declared without a spec breaks the rules of "
         "an instruction that uses it (rank, tiled or im2col, element type)", "tensormap-spec"),
    Rule("debug-timeout", "debug= is neither a bool nor a positive number of seconds", "debug-timeout", engine=KERNEL),
    Rule("mbarrier-state-token", "mbarrier.pending_count reads a constant, not a state token an arrive returned",
         "mbarrier-state-token", engine=KERNEL),
    Rule("target", "an instruction the kernel's .target/.version cannot express", "target", engine=TARGET),
)}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: the rule's name, what is wrong, where (the user's line), error or warning."""

    rule: str
    message: str
    loc: SourceLoc | None
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        tag = "warning: " if self.severity == "warning" else ""
        return f"{where}{self.rule}: {tag}{self.message}"


def diag(rule: str, message: str, loc, severity: str | None = None) -> Diagnostic:
    """A finding of `rule` (at its own severity unless one is given)."""
    return Diagnostic(rule, message, loc, severity or RULES[rule].severity)


def order(d: Diagnostic):
    """Diagnostics sort by file, line, column, then rule and message."""
    loc = d.loc
    return (loc is None, loc.file if loc else "", loc.line if loc else 0, loc.col if loc else 0, d.rule, d.message)
