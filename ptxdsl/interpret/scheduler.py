"""The run of a grid: CTAs in clusters, their warps, and the order warps take turns in.

Every CTA of the grid is resident at once (up to `RESIDENT` CTAs and `RESIDENT_BYTES` of shared memory; a
larger grid runs in waves of whole clusters, in ctaid order, as a GPU runs a grid larger than it holds). A warp
runs until its lanes block (a barrier, an mbarrier wait), exit, or use up a quantum of steps; then the next
warp takes its turn: round-robin by default, or a random warp and quantum drawn from `seed` (another legal interleaving of the same kernel, so a search over seeds explores schedules).
A blocked warp is polled again only after some barrier moved on (`progress`); when no warp can run and none
was woken, the kernel is deadlocked: `Deadlock` lists every waiting warp, its source line and the state of
the barrier it waits on.
"""
from __future__ import annotations

import itertools
import random

import numpy as np

from ..errors import PtxdslError
from .barriers import CtaBarrier
from .errors import Deadlock, InterpretError, Livelock, MemoryFault, NotInterpretable
from .execute import HELD, compile_body
from .lanes import U64, WARP, Warp
from .memory import PARAM_WINDOW, RANK_SHIFT, SHARED_WINDOW, WINDOW_SIZE, shared_layout

COUNTERS = {"launches": 0, "steps": 0}     # over the process: what bench/bench_interpret.py reports
QUANTUM = 64
SHOWN = 16                  # waiting lane groups a deadlock report lists (Deadlock.waits holds every one)
RESIDENT = 4096             # CTAs resident at once at most ...
RESIDENT_BYTES = 512 << 20  # ... and at most this much shared memory between them
MAX_STEPS = 50_000_000
LIVELOCK_STEPS = 200_000    # warp-instructions in which no warp wrote memory or touched a barrier: a spin
_CODE_CACHE: dict = {}


def code_of(kernel) -> list:
    """The kernel's steps, compiled once per Kernel object."""
    key = id(kernel)
    got = _CODE_CACHE.get(key)
    if got is None or got[0] is not kernel:
        got = _CODE_CACHE[key] = (kernel, compile_body(kernel))
    return got[1]


class Cluster:
    def __init__(self, ident):
        self.ident = ident
        self.ctas: list = []
        self.phase = 0
        self.arrived = 0

    def live_threads(self) -> int:
        return sum(c.live_threads() for c in self.ctas)

    def arrive(self, n: int) -> None:
        self.arrived += n
        self.settle()

    def settle(self) -> None:
        if self.arrived and self.arrived >= self.live_threads():
            self.arrived = 0
            self.phase += 1
            self.ctas[0].launch.progress += 1


class Cta:
    def __init__(self, launch, ctaid, cluster, rank, cluster_ctaid):
        self.launch = launch
        self.ctaid = ctaid
        self.cluster = cluster
        self.rank = rank
        self.cluster_ctaid = cluster_ctaid
        self.smem = np.zeros(launch.smem_size, np.uint8)
        self.mbars: dict = {}
        self.bars: dict = {}
        self.meetings: dict = {}            # warpgroup instructions: (warpgroup, step) -> who arrived, which round
        bx, by, bz = launch.block
        n = bx * by * bz
        self.nthreads = n
        t = np.arange(-(-n // WARP) * WARP)
        tx, ty, tz = t % bx, t // bx % by, t // (bx * by)
        self.warps = [Warp(self, i, (tx[i * WARP:(i + 1) * WARP].astype(U64), ty[i * WARP:(i + 1) * WARP].astype(U64),
                                     tz[i * WARP:(i + 1) * WARP].astype(U64)), n)
                      for i in range(len(t) // WARP)]

    def live_threads(self) -> int:
        return int(sum(int(w.alive.sum()) for w in self.warps))

    def check_barrier(self, bar: CtaBarrier) -> None:
        need = bar.count if bar.count is not None else self.live_threads()
        if bar.arrived and bar.arrived >= need:
            bar.arrived = 0
            bar.round += 1
            self.launch.progress += 1

    def lane_exited(self) -> None:
        for bar in self.bars.values():
            self.check_barrier(bar)
        self.cluster.settle()


class Launch:
    """One launch on the interpreter: the memory it sees, the CTAs and the scheduler's state."""

    def __init__(self, kernel, heap, params: bytes, param_offset: dict, grid, block, cluster, dynamic_bytes: int,
                 seed=None, quantum: int = QUANTUM):
        self.kernel = kernel
        self.heap = heap
        self.params = np.frombuffer(bytearray(params), np.uint8) if params else np.zeros(1, np.uint8)
        self.param_offset = param_offset
        self.grid, self.block, self.cluster_dims = grid, block, cluster or (1, 1, 1)
        self.layout, self.smem_size = shared_layout(kernel, dynamic_bytes)
        self.dynamic_bytes = dynamic_bytes
        self.code = code_of(kernel)
        self.rng = random.Random(seed) if seed is not None else None
        self.quantum = quantum
        self.progress = 0
        self.steps = 0
        self.last_write = 0         # self.steps when a warp last did something another warp can see
        self._names = sorted((off, a) for a, off in self.layout.items())

    # ------------------------------------------------------------------------------------------ memory

    def shared_name(self, off: int) -> str:
        """How reports name shared offset `off`: the buffer that holds it."""
        for start, a in reversed(self._names):
            if start <= off < start + a.nbytes:
                return f"{a.name}+{off - start}" if off > start else a.name
        return f"shared offset {off:#x}"

    def region(self, w, space: str, addr: int, nbytes: int, what: str):
        """(buffer, offset) of [addr, addr + nbytes) in `space` as warp w sees it, or None."""
        if space in ("shared", "shared::cta", "shared::cluster"):
            cta, off = self.shared_target(w, space, addr, nbytes, what)
            return cta.smem, off
        if space == "param":
            if addr + nbytes > self.params.size:
                return None
            return self.params, addr
        if space in ("", "generic"):
            if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
                cta, off = self.shared_target(w, "shared::cluster", addr - SHARED_WINDOW, nbytes, what)
                return cta.smem, off
            if PARAM_WINDOW <= addr < PARAM_WINDOW + WINDOW_SIZE:
                off = addr - PARAM_WINDOW
                return (self.params, off) if off + nbytes <= self.params.size else None
        if space == "local":
            raise NotInterpretable(f"{what}: local memory is not modelled", rule="interpret.not-interpretable")
        if space == "const":
            raise NotInterpretable(f"{what}: const memory is not modelled", rule="interpret.not-interpretable")
        return self.heap.region(addr, nbytes)

    def shared_target(self, w, space: str, addr: int, nbytes: int, what: str):
        """(CTA, offset) of a shared address (shared::cta: the warp's own CTA; shared::cluster: a rank's)."""
        cta = w.cta
        if space in ("", "generic"):
            if not SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
                raise MemoryFault(f"{what}: generic address {addr:#x} is not in shared memory",
                                  rule="interpret.out-of-bounds")
            addr -= SHARED_WINDOW
            space = "shared::cluster"
        if space == "shared::cluster" and addr >> RANK_SHIFT:
            rank = (addr >> RANK_SHIFT) - 1
            if rank >= len(cta.cluster.ctas):
                raise MemoryFault(f"{what}: shared::cluster address {addr:#x} names CTA rank {rank} of a cluster of "
                                  f"{len(cta.cluster.ctas)}", rule="interpret.out-of-bounds")
            cta = cta.cluster.ctas[rank]
            addr &= (1 << RANK_SHIFT) - 1
        if addr < 0 or addr + nbytes > cta.smem.size or addr < 0x400 and addr + nbytes > 0:
            if addr < 0x400 or addr + nbytes > cta.smem.size:
                raise MemoryFault(f"{what}: {nbytes} bytes at shared address {addr:#x} are outside the CTA's "
                                  f"{cta.smem.size - 0x400} bytes of shared memory (0x400..{cta.smem.size:#x})",
                                  rule="interpret.out-of-bounds")
        return cta, addr

    # --------------------------------------------------------------------------------- special registers

    def sreg(self, w, name: str):
        cta = w.cta
        x, y, z = self.block
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster_dims
        if name.startswith("%tid."):
            return w.tid["xyz".index(name[-1])]
        table = {
            "%ntid.x": x, "%ntid.y": y, "%ntid.z": z, "%nctaid.x": gx, "%nctaid.y": gy, "%nctaid.z": gz,
            "%ctaid.x": cta.ctaid[0], "%ctaid.y": cta.ctaid[1], "%ctaid.z": cta.ctaid[2],
            "%cluster_ctarank": cta.rank, "%cluster_nctarank": cx * cy * cz,
            "%cluster_ctaid.x": cta.cluster_ctaid[0], "%cluster_ctaid.y": cta.cluster_ctaid[1],
            "%cluster_ctaid.z": cta.cluster_ctaid[2], "%cluster_nctaid.x": cx, "%cluster_nctaid.y": cy,
            "%cluster_nctaid.z": cz, "%clusterid.x": cta.ctaid[0] // cx, "%clusterid.y": cta.ctaid[1] // cy,
            "%clusterid.z": cta.ctaid[2] // cz, "%nclusterid.x": gx // cx, "%nclusterid.y": gy // cy,
            "%nclusterid.z": gz // cz, "%warpid": w.index, "%nwarpid": len(cta.warps), "%smid": 0,
            "%dynamic_smem_size": self.dynamic_bytes, "%total_smem_size": self.smem_size - 0x400,
            "%aggr_smem_size": self.smem_size - 0x400, "%clock": self.steps & 0xFFFFFFFF, "%clock64": self.steps,
            "%globaltimer": self.steps,
        }
        if name == "%laneid":
            return np.arange(WARP, dtype=U64)
        if name == "%is_explicit_cluster":
            return np.bool_(self.cluster_dims != (1, 1, 1))
        if name not in table:
            raise NotInterpretable(f"special register {name} is not modelled", rule="interpret.not-interpretable")
        return U64(table[name])

    # ------------------------------------------------------------------------------------------- the run

    def clusters(self):
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster_dims
        for kz, ky, kx in itertools.product(range(gz // cz), range(gy // cy), range(gx // cx)):
            cl = Cluster((kx, ky, kz))
            for rz, ry, rx in itertools.product(range(cz), range(cy), range(cx)):
                ctaid = (kx * cx + rx, ky * cy + ry, kz * cz + rz)
                cl.ctas.append(Cta(self, ctaid, cl, rx + ry * cx + rz * cx * cy, (rx, ry, rz)))
            yield cl

    def run(self) -> None:
        try:
            self._run()
        finally:
            COUNTERS["launches"] += 1
            COUNTERS["steps"] += self.steps

    def _run(self) -> None:
        per = int(np.prod(self.cluster_dims))
        limit = max(per, min(RESIDENT, RESIDENT_BYTES // max(self.smem_size, 1)))
        wave: list = []
        with np.errstate(all="ignore"):
            for cl in self.clusters():
                wave.append(cl)
                if (len(wave) + 1) * per > limit:
                    self._run_wave(wave)
                    wave = []
            if wave:
                self._run_wave(wave)

    def _run_wave(self, clusters) -> None:
        self._clusters = clusters
        warps = [w for cl in clusters for c in cl.ctas for w in c.warps if not w.done]
        code = self.code
        rng = self.rng
        seen = -1
        while warps:
            ran = False
            order = range(len(warps)) if rng is None else rng.sample(range(len(warps)), len(warps))
            for i in order:
                w = warps[i]
                if w.waits and (w.polled != self.progress):
                    w.polled = self.progress
                    w.wake()
                if self._can_run(w):
                    quantum = self.quantum if rng is None else rng.randint(1, self.quantum)
                    if self._run_warp(w, code, quantum):
                        ran = True
            warps = [w for w in warps if not w.done]
            if not ran and warps:
                if seen == self.progress:
                    self._deadlock(warps)
                seen = self.progress
                for w in warps:
                    w.polled = -1

    @staticmethod
    def _can_run(w) -> bool:
        return bool((w.alive & ~w.blocked).any())

    def _run_warp(self, w, code, quantum: int) -> bool:
        """Run warp w for up to `quantum` steps; whether it ran any. The lanes at the lowest counter run; while
        they run straight-line steps their counter is kept in `cur` and written back before a control step (a
        branch, a wait, a barrier, an exit), which moves the counters itself."""
        pc = w.pc
        n = 0
        while n < quantum:
            live = w.alive & ~w.blocked
            if not live.any():
                break
            cur = int(pc[live].min())
            active = live & (pc == cur)
            others = live & ~active
            meet = int(pc[others].min()) if others.any() else -1     # where the lanes behind catch up
            while n < quantum:
                if cur == meet:
                    pc[active] = cur
                    break
                step = code[cur]
                w.where = step.loc
                n += 1
                if not step.quiet:
                    self.last_write = self.steps + n
                if step.control:
                    pc[active] = cur
                    try:
                        r = step.run(w, active)
                    except PtxdslError as e:
                        raise e.at(step.loc)
                    if r is HELD:
                        break
                    cur += 1
                    pc[active] = cur
                    continue
                try:
                    step.run(w, active)
                except PtxdslError as e:
                    pc[active] = cur
                    raise e.at(step.loc)
                cur += 1
            else:
                pc[active] = cur
        self.steps += n
        if self.steps - self.last_write > LIVELOCK_STEPS:
            self._livelock()
        if self.steps > MAX_STEPS:
            raise InterpretError(f"the kernel ran {MAX_STEPS} warp-instructions without finishing (a livelock: a "
                                 f"spin that nothing ends?); {w.describe()} was at {w.where}", w.where,
                                 rule="interpret.step-limit")
        return n > 0

    def _livelock(self) -> None:
        spinning = [w for cl in self._clusters for c in cl.ctas for w in c.warps if not w.done and w.where]
        lines = [f"  {w.describe()} at {w.where}" for w in spinning[:SHOWN]]
        if len(spinning) > SHOWN:
            lines.append(f"  ... and {len(spinning) - SHOWN} more")
        raise Livelock(f"livelock: no warp of kernel {self.kernel.name!r} wrote memory or touched a barrier in "
                       f"{LIVELOCK_STEPS} warp-instructions (a spin on something nothing will change):\n"
                       + "\n".join(lines), spinning[0].where if spinning else None)

    def _deadlock(self, warps) -> None:
        lines = []
        first = None
        for w in warps:
            for lanes, waiter in w.waits:
                lanes_txt = _lanes(lanes)
                loc = waiter.loc
                first = first or loc
                lines.append(f"  {w.describe()} {lanes_txt} waits at {loc}: {waiter.report()}")
            if not w.waits:
                lines.append(f"  {w.describe()} is stuck at {w.where}")
        if len(lines) > SHOWN:
            lines = lines[:SHOWN] + [f"  ... and {len(lines) - SHOWN} more waiting lane groups (Deadlock.waits has "
                                     f"them all)"]
        text = (f"deadlock: every live warp of kernel {self.kernel.name!r} waits and nothing can wake one "
                f"({len(warps)} warp(s)):\n" + "\n".join(lines))
        raise Deadlock(text, [(w.describe(), wt.loc, wt.report()) for w in warps for _, wt in w.waits], first)


def _lanes(m) -> str:
    idx = np.flatnonzero(m).tolist()
    if len(idx) == 1:
        return f"lane {idx[0]}"
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"lanes {idx[0]}-{idx[-1]}"
    return f"lanes {idx}"

