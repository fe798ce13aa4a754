"""Effects: what an instruction does to the protocol state, as typed data.

Each op declares its effects (`Op.effects()`); the verifier, the ring run and the debug lowering read
these and nothing else of an op: no class names, no emitted text. Operands are the op's own values
(Addr, Reg, Imm, TensorMapRef), so an analysis can ask what it knows about them.
"""
from __future__ import annotations

from dataclasses import dataclass


class Effect:
    """Base of every effect."""

    __slots__ = ()


# ------------------------------------------------------------------------------- registers


@dataclass(frozen=True)
class Compute(Effect):
    """`dst` = fn(args): a register computation the analyses can evaluate. `fn` is the PTX operation
    (add, sub, mul, mad, shl, shr, and, or, xor, not, neg, min, max, div, rem, setp.<cmp>, selp, mov, cvt,
    cvta), `type` the instruction type, `mode` .lo/.hi/.wide where it applies."""

    dst: object
    fn: str
    args: tuple
    type: object
    mode: str | None = None


@dataclass(frozen=True)
class Opaque(Effect):
    """`dst` gets a value no analysis can predict, that differs per `varies` ('thread': every lane of the
    warp may see another value; 'warp': lanes of one warp agree; 'none': every thread agrees)."""

    dst: object
    varies: str = "thread"


@dataclass(frozen=True)
class Elect(Effect):
    """elect.sync: `dst` is true in one leader lane of the lanes of `mask`."""

    dst: object
    mask: object


# -------------------------------------------------------------------------------- mbarriers


@dataclass(frozen=True)
class Init(Effect):
    """mbarrier.init: the barrier at `bar` expects `count` arrivals per phase; its phase is 0."""

    bar: object
    count: object


@dataclass(frozen=True)
class Inval(Effect):
    """mbarrier.inval: the barrier at `bar` is no longer an mbarrier."""

    bar: object


@dataclass(frozen=True)
class Arrive(Effect):
    """An arrival on `bar` (`count` arrivals, None = 1). `remote`: a barrier of another CTA of the cluster;
    `drop`: arrive_drop (the expected count shrinks); `pending`: .noComplete (cannot complete the phase)."""

    bar: object
    count: object = None
    remote: bool = False
    drop: bool = False
    pending: bool = False


@dataclass(frozen=True)
class ExpectTx(Effect):
    """The current phase of `bar` expects `tx` more transaction bytes."""

    bar: object
    tx: object
    remote: bool = False


@dataclass(frozen=True)
class CompleteTx(Effect):
    """`tx` transaction bytes of the current phase of `bar` arrive without an async copy."""

    bar: object
    tx: object
    remote: bool = False


@dataclass(frozen=True)
class Wait(Effect):
    """A poll of `bar` (test_wait / try_wait): `dst` is true once the phase of `parity` (or of the `state`
    token) has completed."""

    bar: object
    dst: object
    parity: object = None
    state: object = None


# ----------------------------------------------------------------------------- async proxy


@dataclass(frozen=True)
class AsyncWrite(Effect):
    """An asynchronous write of shared memory at `dst` that completes on the mbarrier `bar` with `size`
    bytes (None: the tensor map's box) — a TMA or bulk load, st.async, red.async. `tmap`/`coords`: the
    tensor map it reads; `multicast`: the CTA mask it also writes; `remote`: the destination and barrier
    belong to another CTA of the cluster."""

    dst: object
    bar: object
    size: object = None
    tmap: object = None
    coords: tuple = ()
    multicast: object = None
    remote: bool = False


@dataclass(frozen=True)
class AsyncRead(Effect):
    """An asynchronous read of shared memory at `src` (`size` bytes, None: the tensor map's box) through the
    async proxy, joining this thread's current bulk group (TMA store/reduce, bulk copy to global) unless it
    completes on the mbarrier `bar` (a copy into shared::cluster)."""

    src: object
    size: object = None
    tmap: object = None
    coords: tuple = ()
    bar: object = None


@dataclass(frozen=True)
class GlobalAsync(Effect):
    """The async proxy reads (`read`: a TMA or bulk load, a reduce) and/or writes (`write`: a store, a reduce)
    global memory; a write completes with the thread's bulk group (cp.async.bulk.wait_group, not .read)."""

    read: bool = False
    write: bool = False


@dataclass(frozen=True)
class Order(Effect):
    """A memory-model ordering point of the generic proxy: `sem` 'acquire' (an ld.acquire, an atom.acquire, a
    fence.acquire), 'release' (st.release, red.release, fence.release) or 'acq_rel' (both: atom.acq_rel,
    fence.acq_rel, fence.sc, membar) at `scope`. `fence`: a fence, not a load, store or atomic with the
    semantics."""

    sem: str
    scope: str | None = None
    fence: bool = False

    @property
    def acquires(self) -> bool:
        return self.sem in ("acquire", "acq_rel")

    @property
    def releases(self) -> bool:
        return self.sem in ("release", "acq_rel")


@dataclass(frozen=True)
class TmapRead(Effect):
    """The instruction reads the tensor map `tmap` (a prefetch of a box, or of the map itself)."""

    tmap: object
    coords: tuple = ()


@dataclass(frozen=True)
class CommitGroup(Effect):
    """A commit of this thread's async group queue `queue`: 'bulk' (cp.async.bulk.commit_group: the bulk
    copies issued since the last commit form a group) or 'wgmma' (wgmma.commit_group: the warpgroup's
    mma_async issued since the last commit)."""

    queue: str = "bulk"


@dataclass(frozen=True)
class WaitGroup(Effect):
    """A wait on the async group queue `queue` ('bulk': cp.async.bulk.wait_group{.read}; 'wgmma':
    wgmma.wait_group): at most `n` groups are pending (read: their sources are free, bulk only)."""

    n: int
    read: bool = False
    queue: str = "bulk"


# ------------------------------------------------------------------------------ tensor cores


@dataclass(frozen=True)
class WgmmaFence(Effect):
    """wgmma.fence: the warpgroup's register accesses before it (accumulators, A fragments) are ordered before
    the mma_async after it."""


@dataclass(frozen=True)
class MmaAsync(Effect):
    """wgmma.mma_async: joins the warpgroup's current wgmma group; until a wait_group retires that group it
    reads and writes the accumulator registers `acc`, reads the A registers `a_regs` (empty when A comes from
    shared memory) and reads shared memory through the matrix descriptors `descs` (A's and B's, or B's alone:
    each a 64-bit register, an immediate, or a descriptor value that knows its buffer and layout)."""

    acc: tuple
    descs: tuple
    a_regs: tuple = ()


@dataclass(frozen=True)
class SetMaxNReg(Effect):
    """setmaxnreg: the per-thread register count of the warpgroup running it becomes `n` (an int), raised from
    the current one (`inc`, blocking until the CTA's pool has the registers) or lowered to it (returned to the
    pool)."""

    n: int
    inc: bool


@dataclass(frozen=True)
class ProxyFence(Effect):
    """A fence between the generic proxy and another one. `proxy`: 'async' (TMA reads see generic writes
    of `space`, None = every space), 'mbarrier_init' (inits are visible to the async proxy and the cluster),
    'tensormap' (with sem release/acquire; `addr` the map acquired), 'alias'."""

    proxy: str
    space: str | None = None
    sem: str | None = None
    addr: object = None


# ------------------------------------------------------------------------------ tensor maps


@dataclass(frozen=True)
class TmapEdit(Effect):
    """tensormap.replace: the tensor map at `addr` changes (in global or shared::cta memory); `field` is the
    field it writes (global_address, box_dim, elemtype, ...; None: not said)."""

    addr: object
    field: str | None = None


@dataclass(frozen=True)
class TmapPublish(Effect):
    """tensormap.cp_fenceproxy: the map at `src` (shared) is copied to `dst` (global) and released to the
    tensormap proxy."""

    dst: object
    src: object


# ------------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class Access(Effect):
    """An ordinary (generic proxy) access of `nbytes` at `addr` in `space`; `write` for st/atom/red."""

    addr: object
    space: str
    nbytes: int
    write: bool = False
    read: bool = True


# ---------------------------------------------------------------------- threads and control


@dataclass(frozen=True)
class Collective(Effect):
    """A .sync/.aligned instruction: every thread of `scope` ('warp', 'warpgroup') executes it together
    (all of `mask`'s lanes where a member mask is given)."""

    scope: str = "warp"
    mask: object = None


@dataclass(frozen=True)
class WarpSync(Effect):
    """bar.warp.sync: the lanes of `mask` wait for each other, and their memory accesses before it are ordered
    before theirs after it (CUDA's __syncwarp)."""

    mask: object = None


@dataclass(frozen=True)
class Barrier(Effect):
    """A barrier every thread of `scope` ('cta', 'cluster') reaches (`count` threads when given): bar.sync,
    barrier.cluster.wait. `wait=False`: an arrive that does not wait (barrier.cluster.arrive)."""

    scope: str = "cta"
    count: object = None
    wait: bool = True


@dataclass(frozen=True)
class Exit(Effect):
    """ret / exit: the thread ends."""


@dataclass(frozen=True)
class Trap(Effect):
    """trap: the kernel aborts."""


@dataclass(frozen=True)
class Jump(Effect):
    """bra: control goes to `target`."""

    target: object


@dataclass(frozen=True)
class NeedsCluster(Effect):
    """The instruction only runs in a kernel launched with a cluster (an illegal instruction otherwise)."""


def of(op, kind):
    """The effects of `op` that are instances of `kind` (a class or a tuple of classes)."""
    return [e for e in op.effects() if isinstance(e, kind)]
