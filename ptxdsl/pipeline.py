"""Pipelines built from the public builder API: a ring of shared-memory stages with a full and an empty
mbarrier per stage, the (stage, phase) cursor that walks it, TMA stores drained through bulk groups, and a
persistent tile loop. Nothing here is special to ptxdsl: a user can write the same with `k.*` calls.

The protocol is CUTLASS's `PipelineTmaAsync`:

- the producer (one elected lane) waits until a stage is empty (`producer_acquire`: the empty barrier's
  phase *before* the cursor's, so the first pass over the ring does not wait), arms the full barrier with
  the bytes its TMA loads will deliver (`producer_arm`: mbarrier.arrive.expect_tx) and issues the loads on
  that barrier (`full(cur)`, `buffer(cur)`);
- the consumers wait for the full barrier's phase (`consumer_wait`: mbarrier.try_wait.parity), read the
  stage, and arrive on the empty barrier (`consumer_release`), `consumers` arrivals per phase;
- both advance their own cursor (`Cursor.advance`): the stage index wraps at the ring's length and the
  phase bit flips when it does.

    ring = Ring(k, "ring", stages=4, stage_bytes=16384)
    ring.init()                                   # every thread: thread 0 initialises, then bar.sync 0
    with k.if_(k.setp("eq", k.warp_idx(), 0)):
        with k.elect_one():
            cur = ring.cursor()
            with persistent(k, ntiles) as tile:
                ring.producer_acquire(cur)
                ring.producer_arm(cur, 16384)
                k.cp_async_bulk_tensor(ring.buffer(cur), src, coords(tile), mbar=ring.full(cur))
                cur.advance()

One level up, a ring declared with the tensor maps each stage loads hands out stage handles that do the
protocol for a block: `with ring.produce(cur) as st:` waits for the empty stage, arms the full barrier with the
bytes of the declared loads (their boxes, as ThunderKittens' tma::expect takes them from the tile type), lets
the block issue `st.load(tmap, coords)` and advances the cursor; `with ring.consume(cur) as st:` waits for the
full stage, lets the block read `st.slot(i)`, then releases the stage and advances. Roles (`Roles`: warpgroups
and warps by %tid, with setmaxnreg register reallocation) and a persistent scheduler over a grid of output tiles
in a grouped order (`TileScheduler`) complete what a warp-specialised GEMM needs.

    ring = Ring(k, "ring", stages=4, loads=(amap, bmap))
    roles = Roles(k)
    with roles.warpgroup(0, registers=40):
        with k.elect_one():
            cur = ring.cursor()
            with sched.tiles() as (tm, tn):
                with k.loop(0, kblocks) as kb:
                    with ring.produce(cur) as st:
                        st.load(amap, (k.mul(kb, 64), k.mul(tm, 128)))
                        st.load(bmap, (k.mul(kb, 64), k.mul(tn, 256)))
"""
from __future__ import annotations

from contextlib import contextmanager

from . import sreg
from .errors import DSLError, LaunchError, SourceLoc
from .tensormap import TensorMapSpec
from .types import u32

MBAR_BYTES = 8


class Cursor:
    """A position in a ring: `stage` (0 .. stages-1) and `phase` (0 or 1), two u32 registers."""

    def __init__(self, ring: "Ring", stage, phase):
        self.ring, self.stage, self.phase = ring, stage, phase

    def advance(self) -> None:
        """stage += 1; on wrapping to 0 the phase bit flips (add, setp, selp, xor: no branch)."""
        k, n = self.ring.k, self.ring.stages
        k.add(self.stage, 1, out=self.stage)
        wrap = k.setp("eq", self.stage, n)
        k.selp(0, self.stage, wrap, out=self.stage)
        k.xor(self.phase, k.selp(1, 0, wrap, type=u32), out=self.phase)


class Ring:
    """`stages` shared buffers of `stage_bytes` bytes, with a full and an empty mbarrier for each.

    `consumers` is the empty barrier's arrival count: how many consumer_release calls free a stage (one per
    consumer thread, or one per warp when a lane releases for its warp). The buffer is aligned to `align`
    bytes (1024 suits every TMA swizzle) and, with `dynamic=True`, sized at launch (dynamic shared memory,
    past the 48 KiB a static buffer may take)."""

    def __init__(self, k, name: str, *, stages: int, stage_bytes: int | None = None, consumers: int = 1,
                 align: int = 1024, dynamic: bool = True, loads=()):
        self.slots, self.loads = _stage_layout(name, loads, align)
        if stage_bytes is None:
            if not self.loads:
                raise DSLError(f"Ring {name!r}: give stage_bytes= or loads= (the tensor maps a stage loads, which "
                               f"size it)", SourceLoc.caller())
            stage_bytes = self.slots[-1] + _spec(self.loads[-1]).smem_bytes
            stage_bytes = -(-stage_bytes // align) * align
        elif self.loads and stage_bytes < self.slots[-1] + _spec(self.loads[-1]).smem_bytes:
            raise DSLError(f"Ring {name!r}: stage_bytes={stage_bytes} is smaller than its loads' boxes "
                           f"({self.slots[-1] + _spec(self.loads[-1]).smem_bytes} bytes)", SourceLoc.caller())
        for what, v, lo in (("stages", stages, 1), ("stage_bytes", stage_bytes, 16), ("consumers", consumers, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise DSLError(f"Ring {name!r}: {what}={v!r}, expected an integer of at least {lo}", SourceLoc.caller())
        if stage_bytes % 128:
            raise DSLError(f"Ring {name!r}: stage_bytes={stage_bytes} is not a multiple of 128 (each stage "
                           "must keep the buffer's TMA alignment)", SourceLoc.caller())
        self.k, self.name = k, name
        self.stages, self.stage_bytes, self.consumers = stages, stage_bytes, consumers
        self.buf = k.shared(name, stages * stage_bytes, align=align, dynamic=dynamic)
        self.full_bars = k.mbarrier(f"{name}_full", stages)
        self.empty_bars = k.mbarrier(f"{name}_empty", stages)

    def init(self) -> None:
        """Every thread calls this: thread 0 initialises each full barrier for one arrival (the producer's
        arrive.expect_tx) and each empty barrier for `consumers`, fences the inits, then bar.sync 0."""
        k = self.k
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            with k.loop(0, self.stages) as s:
                k.mbarrier_init(k.mad(s, MBAR_BYTES, k.mov(self.full_bars)), 1)
                k.mbarrier_init(k.mad(s, MBAR_BYTES, k.mov(self.empty_bars)), self.consumers)
            k.fence_mbarrier_init()
        k.bar_sync(0)

    def cursor(self) -> Cursor:
        """A cursor at stage 0, phase 0 (fresh registers)."""
        k = self.k
        return Cursor(self, k.mov(0, u32, out=k.reg(u32)), k.mov(0, u32, out=k.reg(u32)))

    # ------------------------------------------------------------------ addresses of the cursor's stage

    def full(self, cur: Cursor):
        """The shared address of the cursor's full barrier."""
        return self.k.mad(cur.stage, MBAR_BYTES, self.k.mov(self.full_bars))

    def empty(self, cur: Cursor):
        """The shared address of the cursor's empty barrier."""
        return self.k.mad(cur.stage, MBAR_BYTES, self.k.mov(self.empty_bars))

    def buffer(self, cur: Cursor, offset: int = 0):
        """The shared address of the cursor's stage (plus `offset` bytes into it)."""
        k = self.k
        base = k.mad(cur.stage, self.stage_bytes, k.mov(self.buf))
        return k.add(base, offset) if offset else base

    # -------------------------------------------------------------------------------- stage handles

    @property
    def load_bytes(self) -> int:
        """The bytes the declared loads of one stage deliver (the full barrier's transaction count)."""
        return sum(_spec(t).box_bytes for t in self.loads)

    @contextmanager
    def produce(self, cur: Cursor):
        """`with ring.produce(cur) as st:` the producer's turn at the cursor's stage: wait until it is empty,
        arm its full barrier with the bytes of the ring's declared loads, let the block issue them
        (`st.load(tmap, coords)`, in the order declared), then advance the cursor. The block must issue every
        declared load once (DSLError, rule pipeline.stage-loads, otherwise)."""
        if not self.loads:
            raise DSLError(f"Ring {self.name!r}: produce() needs the ring's loads= (the tensor maps each stage "
                           f"loads, whose boxes give the byte count)", SourceLoc.caller())
        self.producer_acquire(cur)
        self.producer_arm(cur, self.load_bytes)
        st = Stage(self, cur, producing=True)
        yield st
        st._check_loaded()
        cur.advance()

    @contextmanager
    def consume(self, cur: Cursor, release=True):
        """`with ring.consume(cur) as st:` a consumer's turn at the cursor's stage: wait until it is full, let
        the block read it (`st.slot(i)`: the address of declared load i), then release it and advance the
        cursor. `release`: True (every thread running the block arrives on the empty barrier), a .pred register
        (the threads where it is true arrive: one per warpgroup, say, with consumers= counting them) or False
        (the block, or a StoreDrain, releases the stage itself)."""
        self.consumer_wait(cur)
        yield Stage(self, cur, producing=False)
        if release is False:
            cur.advance()
        else:
            self.release(cur, None if release is True else release)

    def release(self, cur: Cursor, where=None) -> None:
        """Release the cursor's stage (consumer_release, only where the .pred `where` holds when given) and
        advance the cursor: for a consumer that frees its stages behind the one it reads (`consume(cur,
        release=False)` with a second cursor here)."""
        if where is None:
            self.consumer_release(cur)
        else:
            with self.k.if_(where):
                self.consumer_release(cur)
        cur.advance()

    # ------------------------------------------------------------------------------------ producer

    def producer_acquire(self, cur: Cursor) -> None:
        """Wait until the cursor's stage is empty: the empty barrier's previous phase (parity phase ^ 1)
        has completed. On the first pass over the ring that phase counts as complete, so it does not wait."""
        k = self.k
        k.mbarrier_wait(self.empty(cur), parity=k.xor(cur.phase, 1), sem="acquire", scope="cta")

    def producer_arm(self, cur: Cursor, nbytes) -> None:
        """mbarrier.arrive.expect_tx on the cursor's full barrier: its phase completes once `nbytes` have
        landed (the sum of the TMA loads issued on `full(cur)` for this stage)."""
        self.k.mbarrier_arrive_expect_tx(self.full(cur), nbytes, sem="release", scope="cta")

    # ------------------------------------------------------------------------------------ consumer

    def consumer_wait(self, cur: Cursor) -> None:
        """Wait until the cursor's stage is full: its full barrier's phase `cur.phase` has completed."""
        self.k.mbarrier_wait(self.full(cur), parity=cur.phase, sem="acquire", scope="cta")

    def consumer_release(self, cur: Cursor) -> None:
        """Arrive on the cursor's empty barrier: this consumer is done reading the stage."""
        self.k.mbarrier_arrive(self.empty(cur), sem="release", scope="cta")


def _spec(tmap):
    """The TensorMapSpec of a load: a tensor-map parameter's (k.param_tensormap(name, spec)) or a spec."""
    return tmap if isinstance(tmap, TensorMapSpec) else getattr(tmap, "tmap", None)


def _stage_layout(name, loads, align) -> tuple:
    """(byte offset of each load's slot in a stage, the loads): boxes one after another, each slot starting on
    `align` bytes (the swizzle pattern's repeat, so a wgmma descriptor can address it with base offset 0)."""
    loads = tuple(loads)
    offsets, at = [], 0
    for i, t in enumerate(loads):
        spec = _spec(t)
        if spec is None:
            raise DSLError(f"Ring {name!r}: loads[{i}]={t!r} breaks 'a tensor-map parameter made with a spec "
                           f"(k.param_tensormap(name, spec)) or a TensorMapSpec'", SourceLoc.caller())
        offsets.append(at)
        at = -(-(at + spec.smem_bytes) // align) * align
    return tuple(offsets), loads


class Stage:
    """The cursor's stage during a `ring.produce` or `ring.consume` block: `buffer` (its shared address),
    `full` (its full barrier), `slot(i)` (where declared load i lands), and for the producer `load`."""

    def __init__(self, ring: Ring, cur: Cursor, *, producing: bool):
        self.ring, self.cur = ring, cur
        self._buffer = None
        self.full = ring.full(cur) if producing else None
        self._issued = 0 if producing else None

    @property
    def buffer(self):
        """The stage's shared address (computed at first use: a block that addresses the stage otherwise, by
        descriptors from the cursor, say, emits nothing for it)."""
        if self._buffer is None:
            self._buffer = self.ring.buffer(self.cur)
        return self._buffer

    def slot(self, i: int):
        """The shared address of declared load i's box in this stage."""
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.ring.slots):
            raise DSLError(f"Ring {self.ring.name!r}: slot({i!r}) breaks 'a declared load's index, 0 to "
                           f"{len(self.ring.slots) - 1}'", SourceLoc.caller())
        off = self.ring.slots[i]
        return self.ring.k.add(self.buffer, off) if off else self.buffer

    def load(self, tmap, coords, **kw) -> None:
        """cp.async.bulk.tensor of the next declared load's box at `coords` (innermost first) into its slot,
        completing on the stage's full barrier (keywords go to k.cp_async_bulk_tensor: cache_hint, ...)."""
        ring, i = self.ring, self._issued
        if i is None:
            raise DSLError(f"Ring {ring.name!r}: load() in a consume() block; loads are the producer's",
                           SourceLoc.caller(), rule="pipeline.stage-loads")
        if i >= len(ring.loads) or ring.loads[i] is not tmap:
            want = "no more loads" if i >= len(ring.loads) else f"map {_name(ring.loads[i])}"
            raise DSLError(f"Ring {ring.name!r}: stage load {i} is map {_name(tmap)}, but the ring declares "
                           f"{want} there (loads= gives the order and the bytes armed)", SourceLoc.caller(),
                           rule="pipeline.stage-loads")
        ring.k.cp_async_bulk_tensor(self.slot(i), tmap, coords, mbar=self.full, **kw)
        self._issued = i + 1

    def _check_loaded(self) -> None:
        if self._issued != len(self.ring.loads):
            missing = ", ".join(_name(t) for t in self.ring.loads[self._issued:])
            raise DSLError(f"Ring {self.ring.name!r}: the produce() block issued {self._issued} of the "
                           f"{len(self.ring.loads)} declared loads (missing {missing}); the full barrier was armed "
                           f"for all of them and would never complete", SourceLoc.caller(),
                           rule="pipeline.stage-loads")


def _name(tmap) -> str:
    return repr(getattr(tmap, "name", None) or tmap)


class StoreDrain:
    """Release ring stages that TMA stores read from, `depth` stores behind: after each store's
    commit_group, `cp.async.bulk.wait_group.read depth` and release the stage of the store `depth` before
    (its shared source has been read). `finish()` waits for every store (wait_group 0).

    One thread issues the stores and calls `committed()` after each commit_group."""

    def __init__(self, ring: Ring, depth: int = 1):
        if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth < ring.stages:
            raise DSLError(f"StoreDrain: depth={depth!r}, expected an integer from 0 to stages-1 "
                           f"({ring.stages - 1}): a deeper drain would hold every stage", SourceLoc.caller())
        self.ring, self.depth = ring, depth
        self.lag = ring.cursor()
        k = ring.k
        self.issued = k.mov(0, u32, out=k.reg(u32)) if depth else None

    def committed(self) -> None:
        """After a store's commit_group: wait until all but `depth` stores have read their stage, then
        release the oldest one's stage (once `depth` stores are in flight)."""
        k = self.ring.k
        k.cp_async_bulk_wait_group_read(self.depth)
        if self.depth == 0:
            self._release()
            return
        with k.if_(k.setp("ge", self.issued, self.depth)):
            self._release()
        k.add(self.issued, 1, out=self.issued)

    def _release(self):
        self.ring.consumer_release(self.lag)
        self.lag.advance()

    def finish(self) -> None:
        """Wait until every store has completed (cp.async.bulk.wait_group 0)."""
        self.ring.k.cp_async_bulk_wait_group(0)


class Flags:
    """u32 flags in global memory (one per tile, say) that one CTA publishes and others wait for: the ordering
    between CTAs of a split-K "serial" reduction or a stream-K fixup (CUTLASS's `GenericBarrier`).

    `base` is a global pointer register (a `param_ptr`). A flag holds the launch's epoch once published: the host
    passes a new, non-zero epoch each launch (1, 2, 3...), so the flags (zeroed once) need no reset.

    - `publish(i, epoch)`: st.release.gpu.global.u32 [base + 4i], epoch. Everything the thread wrote before
      is visible to a thread that sees the flag; writes made by TMA (the async proxy) must be complete first
      (`cp.async.bulk.wait_group 0`) and fenced (`fence.proxy.async.global`).
    - `wait(i, epoch)`: spin on ld.acquire.gpu.global.u32 until the flag equals epoch; a TMA op issued after
      it must be fenced too (`fence.proxy.async.global`). In debug mode the loop is bounded and traps naming
      this line. The CTA that publishes must be able to run while this one spins: give it the lower ctaid
      (the GPU starts a grid's CTAs in ctaid order, as single-pass scans assume, though CUDA does not promise
      it), or launch no more CTAs than can be resident at once."""

    def __init__(self, k, name: str, base, *, scope: str = "gpu"):
        if scope not in ("cta", "cluster", "gpu", "sys"):
            raise DSLError(f"Flags: scope={scope!r}, expected 'cta', 'cluster', 'gpu' or 'sys' (the threads that "
                           f"publish and wait)", SourceLoc.caller())
        self.k, self.name, self.base, self.scope = k, name, base, scope
        self.waits = 0

    def addr(self, i):
        """The flag's global address: base + 4 * i (i: a u32 register or a constant)."""
        if isinstance(i, int) and not isinstance(i, bool):
            if i < 0:
                raise DSLError(f"Flags {self.name!r}: flag {i} is before the first (flags are numbered from 0)",
                               SourceLoc.caller())
            return self.k.add(self.base, 4 * i) if i else self.base
        return self.k.add(self.base, self.k.mul(i, 4, mode="wide"))

    def publish(self, i, epoch) -> None:
        """Release flag i with `epoch` (st.release.scope.global.u32)."""
        self.k.st(u32, self.addr(i), epoch, sem="release", scope=self.scope)

    def wait(self, i, epoch, backoff_ns: int | None = None) -> None:
        """Spin until flag i holds `epoch` (ld.acquire.scope.global.u32, setp.ne, a branch back); with
        `backoff_ns`, nanosleep that long between polls (fewer loads of the flag while many threads spin)."""
        k = self.k
        where = self.addr(i)
        self.waits += 1
        again = k.label(f"{self.name}_wait{self.waits}")
        pending = k.setp("ne", k.ld(u32, where, sem="acquire", scope=self.scope), epoch)
        with k.guard(pending):
            if backoff_ns is not None:
                k.nanosleep(backoff_ns)
            k.bra(again)


@contextmanager
def persistent(k, ntiles):
    """`with persistent(k, ntiles) as tile:` the CTA's share of tiles 0 .. ntiles-1 (`ntiles`: a u32 register
    or a constant), round robin over the grid: tile = ctaid.x + i * nctaid.x, so the CTAs work on neighbouring
    tiles at any moment. A grid of one CTA per SM (or per SM slot) makes it persistent; a grid of ntiles CTAs
    gives each CTA one tile. It shares tiles among CTAs: a CTA's own count of work is a plain k.loop."""
    cta, n = k.mov(sreg.ctaid_x), k.mov(sreg.nctaid_x)
    left = k.sub(k.max(ntiles, cta), cta)                   # tiles from this CTA's first on (0 past the end)
    iters = k.div(k.add(left, k.sub(n, 1)), n)
    with k.loop(0, iters) as i:
        yield k.mad(i, n, cta)


class Roles:
    """Warp-specialised roles by thread index, instead of hand-written `k.if_(k.setp(...))` on %tid.x:
    `with roles.warpgroup(0, registers=40):` runs its block in warpgroup 0 (threads 0-127) after
    setmaxnreg.dec to 40 registers a thread; `with roles.warpgroups(1, 2, registers=232) as wg:` in
    warpgroups 1 and 2 after setmaxnreg.inc to 232, with `wg` the index among them (0 or 1); `roles.warp(i)`
    and `roles.lane` / `roles.tid_in_warpgroup` for finer roles.

    The kernel needs its thread count (reqntid= or maxntid=). A role with `registers=` needs the register
    budget at entry that ptxas derives setmaxnreg's direction from: maxnreg=, or minnctapersm= with the thread
    count (ptxas drops setmaxnreg otherwise, info C7508); every warpgroup's count together must fit the CTA's
    pool, entry count x threads (a `setmaxnreg.inc` past it blocks forever), checked as roles are declared. A
    kernel with setmaxnreg loads through the driver JIT (ptxdsl.compile does so: nvJitLink drops it, C7504)."""

    WARPGROUP = 128

    def __init__(self, k):
        d = k.kernel.directives
        ntid = d.get("reqntid") or d.get("maxntid")
        if ntid is None:
            raise DSLError(f"Roles: kernel {k.kernel.name!r} has no thread count; give it reqntid= or maxntid=",
                           SourceLoc.caller(), rule="pipeline.roles")
        self.k, self.threads = k, ntid[0] * ntid[1] * ntid[2]
        self.tid = k.tid_x()
        self._warpgroup = k.shr(self.tid, 7)
        self._warp = k.shr(self.tid, 5)
        self.registers: dict[int, int] = {}         # warpgroup -> the register count its role sets

    @property
    def entry_registers(self) -> int | None:
        """The per-thread register count ptxas gives the kernel at entry (maxnreg=, or 64K registers over the
        threads of minnctapersm= CTAs, in steps of 8, at most 255), None without such a budget."""
        d = self.k.kernel.directives
        if "maxnreg" in d:
            return d["maxnreg"]
        if "minnctapersm" in d:
            return min(255, 65536 // (self.threads * d["minnctapersm"]) // 8 * 8)
        return None

    @property
    def lane(self):
        """%tid.x % 32."""
        return self.k.and_(self.tid, 31)

    @property
    def tid_in_warpgroup(self):
        """%tid.x % 128."""
        return self.k.and_(self.tid, self.WARPGROUP - 1)

    def warpgroup(self, index: int, *, registers: int | None = None):
        """`with roles.warpgroup(i, registers=None) as wg:` the block runs in warpgroup i (wg reads 0)."""
        return self.warpgroups(index, 1, registers=registers)

    @contextmanager
    def warpgroups(self, first: int, count: int = 1, *, registers: int | None = None):
        """`with roles.warpgroups(first, count, registers=None) as wg:` the block runs in warpgroups first ..
        first+count-1; `wg` is the warpgroup's index among them (a u32 register). With `registers`, each runs
        setmaxnreg (.dec or .inc, from the entry budget) to that many registers a thread first."""
        k = self.k
        groups = self.threads // self.WARPGROUP
        for what, v, lo in (("first", first, 0), ("count", count, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise DSLError(f"Roles: {what}={v!r} breaks 'an integer of at least {lo}'", SourceLoc.caller(),
                               rule="pipeline.roles")
        if self.threads % self.WARPGROUP or first + count > groups:
            raise DSLError(f"Roles: warpgroups {first}..{first + count - 1} break 'whole warpgroups of the "
                           f"kernel's {self.threads} threads ({groups} warpgroups)'", SourceLoc.caller(),
                           rule="pipeline.roles")
        if registers is not None:
            self._reserve(range(first, first + count), registers)
        idx = k.sub(self._warpgroup, first) if first else self._warpgroup
        cond = k.setp("eq", self._warpgroup, first) if count == 1 else k.setp("lt", idx, count)
        with k.if_(cond):
            if registers is not None:
                entry = self.entry_registers
                if registers < entry:
                    k.setmaxnreg_dec(registers)
                elif registers > entry:
                    k.setmaxnreg_inc(registers)
            yield idx

    def _reserve(self, groups, registers: int) -> None:
        entry = self.entry_registers
        if entry is None:
            raise DSLError(f"Roles: registers={registers} (setmaxnreg) needs the kernel's register budget at entry: "
                           f"build it with maxnreg=, or minnctapersm= with maxntid=/reqntid= (ptxas ignores "
                           f"setmaxnreg otherwise, C7508)", SourceLoc.caller(), rule="pipeline.register-budget")
        if isinstance(registers, bool) or not isinstance(registers, int) or not 24 <= registers <= 256 \
                or registers % 8:
            raise DSLError(f"Roles: registers={registers!r} breaks 'setmaxnreg takes 24 to 256, a multiple of 8'",
                           SourceLoc.caller(), rule="pipeline.register-budget")
        for g in groups:
            if g in self.registers:
                raise DSLError(f"Roles: warpgroup {g} already has a role with registers={self.registers[g]}",
                               SourceLoc.caller(), rule="pipeline.register-budget")
            self.registers[g] = registers
        groups_all = self.threads // self.WARPGROUP
        total = sum(self.registers.get(g, entry) for g in range(groups_all)) * self.WARPGROUP
        pool = entry * self.threads
        if total > pool:
            shown = " + ".join(f"{self.registers.get(g, entry)}" for g in range(groups_all))
            raise DSLError(f"Roles: registers {shown} (x 128 threads) = {total} is over the CTA's pool of {pool} "
                           f"({entry} at entry x {self.threads} threads): setmaxnreg.inc would wait forever",
                           SourceLoc.caller(), rule="pipeline.register-budget")

    def warp(self, index: int):
        """`with roles.warp(i):` the block runs in warp i of the CTA (threads 32i .. 32i+31)."""
        k = self.k
        return k.if_(k.setp("eq", self._warp, index))


class TileScheduler:
    """The output tiles of an m_tiles x n_tiles grid (u32 registers or constants), shared round robin over a
    persistent grid (`persistent`) and numbered in a grouped order: `group` rows of tiles at a time, down the
    rows of a group before across (Triton's GROUP_SIZE_M, ThunderKittens' SUPER_M), so the CTAs working at
    once share rows of A and columns of B in L2. `with sched.tiles() as (tm, tn):` gives the tile's row and
    column (in tiles); every role that walks the tiles walks them in the same order."""

    def __init__(self, k, m_tiles, n_tiles, *, group: int = 8):
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise DSLError(f"TileScheduler: group={group!r} breaks 'a positive integer'", SourceLoc.caller(),
                           rule="pipeline.roles")
        self.k, self.m_tiles, self.n_tiles, self.group = k, m_tiles, n_tiles, group
        self.ntiles = k.mul(m_tiles, n_tiles) if not (isinstance(m_tiles, int) and isinstance(n_tiles, int)) \
            else m_tiles * n_tiles

    def coords(self, tile):
        """(row, column) in tiles of tile number `tile` in the grouped order."""
        k, g = self.k, self.group
        if g == 1:
            row = k.div(tile, self.n_tiles)
            return row, k.sub(tile, k.mul(row, self.n_tiles))
        per_group = k.mul(self.n_tiles, g)
        first = k.mul(k.div(tile, per_group), g)                     # the group's first row of tiles
        rows = k.min(k.sub(self.m_tiles, first), g)                 # rows in this group (the last may be short)
        r = k.rem(tile, per_group)
        return k.add(first, k.rem(r, rows)), k.div(r, rows)

    @contextmanager
    def tiles(self):
        with persistent(self.k, self.ntiles) as t:
            yield self.coords(t)


def tile_coords(k, tile, tiles_per_row, box, *, tmap=None):
    """(column, row) element coordinates of tile number `tile` in a row-major grid of tiles with
    `tiles_per_row` tiles across, innermost first, as TMA takes them. `box` is the tile: the tensor map itself (a
    tensor-map parameter declared with its spec, or a TensorMapSpec: its box, which is (columns, rows)), or a
    (columns, rows) pair, which `tmap=` (the map the coordinates go to) checks against that map's box: a pair in
    numpy order (rows, columns), as `TensorMapSpec.tiled_for` takes the box, is a DSLError (rule
    pipeline.box-order) instead of coordinates that leave rows unwritten."""
    cols, rows = tile_box(box, tmap)
    row = k.div(tile, tiles_per_row)
    col = k.sub(tile, k.mul(row, tiles_per_row))
    return k.mul(col, cols), k.mul(row, rows)


def tile_box(box, tmap=None) -> tuple:
    """(columns, rows) of a tile: the box of a 2-D tiled map (a TensorMapSpec, or a tensor-map parameter's spec)
    or a (columns, rows) pair, checked against `tmap`'s box where given. DSLError (rule pipeline.box-order) for
    a pair that is not the map's box, or a map that is not a tiled map of rank 2 or more."""
    spec = _spec_of(box)
    if spec is not None:
        return spec.box[0], spec.box[1]
    try:
        cols, rows = (int(v.__index__()) for v in box)
    except (TypeError, ValueError, AttributeError):
        raise DSLError(f"box={box!r}: expected a tensor map (its spec's box) or a (columns, rows) pair of ints",
                       SourceLoc.caller(), rule="pipeline.box-order") from None
    want = _spec_of(tmap) if tmap is not None else None
    if tmap is not None and want is None:
        raise DSLError(f"tmap={tmap!r}: expected a TensorMapSpec or a tensor-map parameter declared with its spec",
                       SourceLoc.caller(), rule="pipeline.box-order")
    if want is not None and (cols, rows) != tuple(want.box[:2]):
        swapped = (rows, cols) == tuple(want.box[:2])
        raise DSLError(f"box=({cols}, {rows}) is {'in numpy order (rows, columns)' if swapped else 'not the map box'}"
                       f": the map's box is {want.box[0]} columns x {want.box[1]} rows, so tile coordinates take "
                       f"box=({want.box[0]}, {want.box[1]}) (or the map itself: box=the map)", SourceLoc.caller(),
                       rule="pipeline.box-order")
    return cols, rows


def _spec_of(v):
    """The TensorMapSpec of a spec or a tensor-map parameter (None: neither); DSLError for a map that is not a
    tiled map of rank 2 or more."""
    from .tensormap import TensorMapSpec

    spec = v if isinstance(v, TensorMapSpec) else getattr(v, "tmap", None)
    if spec is None:
        if getattr(v, "kind", None) == "tensormap":
            raise DSLError(f"tensor map {v.name!r} has no TensorMapSpec: declare it with one, or give the tile as a "
                           f"(columns, rows) pair", SourceLoc.caller(), rule="pipeline.box-order")
        return None
    if spec.kind != "tiled" or len(spec.box) < 2:
        raise DSLError(f"a {spec.kind} map of rank {len(spec.box)} has no (columns, rows) tile box",
                       SourceLoc.caller(), rule="pipeline.box-order")
    return spec


def tile_grid(rows: int, cols: int, box, what: str = "matrix") -> tuple:
    """(tiles_per_row, ntiles) of a rows x cols matrix cut into `box` tiles (a map, or (columns, rows) as
    `tile_coords` takes it), row-major as `tile_coords` numbers them; LaunchError (rule pipeline.whole-tiles)
    naming `what` when the matrix is not a whole number of tiles."""
    box = tile_box(box)
    if rows % box[1] or cols % box[0]:
        raise LaunchError(f"{what}: {rows}x{cols} is not a whole number of {box[1]}x{box[0]} tiles",
                          SourceLoc.caller(), rule="pipeline.whole-tiles")
    return cols // box[0], cols // box[0] * (rows // box[1])


def launch_shape(launch, ntiles: int, tiles_per_cta=1, ctas_per_sm=None) -> tuple:
    """(grid, shared_bytes) to launch a kernel whose CTAs take their tiles through `persistent`: `tiles_per_cta`
    of the `ntiles` each (None: a persistent grid of one CTA per SM), with at most `ctas_per_sm` CTAs on an SM
    (None: as many as fit; `Launcher.shared_bytes_for`). `launch` is the compiled kernel, `prog[name]`."""
    if tiles_per_cta is None:
        grid = min(ntiles, launch.device.sm_count)
    else:
        grid = -(-ntiles // tiles_per_cta)
    return max(grid, 1), (launch.shared_bytes_for(ctas_per_sm) if ctas_per_sm else None)
