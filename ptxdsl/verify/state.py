"""The protocol state the walk carries along one path, the context of the code being walked, and how
diagnostics name lines."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Imm, SharedAlloc
from .groups import Groups

MAX_ALTERNATIVES = 8            # distinct (expected, delivered) byte pairs tracked per barrier phase
ZERO = frozenset({(0, 0)})      # a barrier phase that expects and has received nothing


@dataclass(frozen=True)
class Range:
    """Bytes [off, off+size) of a shared buffer; None: unknown (the rest of the buffer)."""

    alloc: SharedAlloc
    off: int | None
    size: int | None

    def overlaps(self, o: "Range") -> bool:
        if self.alloc is not o.alloc:
            return False
        if self.off is None or o.off is None:
            return True
        end_a = self.off + self.size if self.size is not None else self.alloc.nbytes
        end_b = o.off + o.size if o.size is not None else o.alloc.nbytes
        return self.off < end_b and o.off < end_a


@dataclass(frozen=True)
class Pending:
    """An asynchronous access still outstanding (a load in flight, a bulk read not yet waited for) or a
    generic write not yet fenced."""

    range: Range | None
    stmt: object
    key: tuple | None = None        # the barrier a load completes on
    waited: bool = False
    region: tuple = ()              # the thread-varying conditions the issuing threads passed
    later: frozenset = frozenset()  # (loop, pass, n): n more iterations of the enclosing loop follow


@dataclass(frozen=True)
class InitInfo:
    """An mbarrier.init: where, whether a fence and a barrier have published it since, which threads ran it."""

    stmt: object
    fenced: bool
    synced: bool
    region: tuple


@dataclass(frozen=True)
class LastWait:
    """The parity operand of the last wait on a barrier (token), that wait, and the loop whose previous
    iteration it belongs to (set when the walk starts the loop's second pass)."""

    token: tuple
    stmt: object
    prev_loop: object = None


@dataclass
class State:
    init: dict = field(default_factory=dict)         # barrier key -> InitInfo
    phase: dict = field(default_factory=dict)        # barrier key -> parity of its current phase (None: unknown)
    arrived: set = field(default_factory=set)        # barrier keys with an arrive in their current phase
    inval: dict = field(default_factory=dict)        # barrier key -> the mbarrier.inval stmt
    acc: dict = field(default_factory=dict)          # barrier key -> frozenset{(expected, delivered)} | None
    src: dict = field(default_factory=dict)          # barrier key -> tuple of contributing stmts
    closed: set = field(default_factory=set)         # barrier keys waited on in this branch
    last: dict = field(default_factory=dict)         # barrier key -> LastWait
    inflight: tuple = ()                             # Pending loads
    dirty: tuple = ()                                # Pending generic shared writes not fenced for the async proxy
    asyncg: Groups = Groups()                        # async-group queues (verify/groups.py) of Pending entries
    unreleased: tuple = ()                           # tensormap.replace stmts not published
    unsynced: tuple = ()                             # ... published by other threads, no bar.sync since
    acquired: frozenset = frozenset()                # tensor-map addresses acquired
    writes_unfenced: tuple = ()                      # Pending TMA writes of global memory complete (their bulk
                                                     # group waited for), no fence.proxy.async.global since
    acquired_unfenced: tuple = ()                    # Pending acquires, no fence.proxy.async.global since
    wg_fenced: bool = False                          # a wgmma.fence on every path here
    wg_written: dict = field(default_factory=dict)   # mma_async register -> its write since the last wgmma.fence
    nreg_claims: dict = field(default_factory=dict)  # region -> (threads, count, stmt) of the last setmaxnreg
    ver: dict = field(default_factory=dict)          # register -> the version of its value on this path
    dead: bool = False

    def copy(self) -> "State":
        """A copy whose containers the walk may change without touching this one (the tuples are shared)."""
        out = State.__new__(State)
        out.__dict__.update(self.__dict__)
        out.init, out.phase, out.arrived, out.inval = dict(self.init), dict(self.phase), set(self.arrived), \
            dict(self.inval)
        out.acc, out.src, out.closed, out.last, out.ver = dict(self.acc), dict(self.src), set(self.closed), \
            dict(self.last), dict(self.ver)
        return out


@dataclass(frozen=True)
class Ctx:
    """What is known of the code being walked and the threads that run it."""

    region: tuple = ()              # the enclosing thread-varying conditions
    lane_div: bool = False          # some enclosing condition can differ between lanes of a warp
    warp_div: bool = False          # ... or between warps
    group_div: bool = False         # ... or between the warps of a warpgroup (or lanes of a warp)
    mult: int | None = None         # threads of the CTA that run this code, when known
    issuers: object = "all"         # CTAs of the cluster that run it: "all", 1, or None
    loops: tuple = ()               # (loop, trip count or None) of the enclosing loops
    later: frozenset = frozenset()  # (loop, pass, n) of enclosing loops with at least n iterations still to come
    mc_log: list | None = None      # (barrier key, bytes) multicast into every CTA under a CTA-uniform branch


def first_overlap(pending, rng) -> "Pending | None":
    """The first outstanding access in `pending` whose range overlaps `rng`."""
    return next((x for x in pending if x.range is not None and x.range.overlaps(rng)), None)


def placement(k, alloc, off) -> tuple[int, int]:
    """(the alignment a shared buffer is guaranteed, the byte offset `off` into it sits at within that
    alignment): a dynamic buffer sits at its offset in the kernel's dynamic window."""
    if alloc.dynamic:
        return k.dynamic_align, alloc.offset + off
    return alloc.align, off


def stmts_loc(stmts):
    return next((s.loc for s in stmts if getattr(s, "loc", None) is not None), None)


def line(s) -> str:
    loc = getattr(s, "loc", None)
    return f"line {loc.line}" if loc is not None else "an earlier line"


def lines(stmts) -> str:
    nums = sorted({s.loc.line for s in stmts if getattr(s, "loc", None) is not None})
    if not nums:
        return "earlier lines"
    return ("line " if len(nums) == 1 else "lines ") + ", ".join(map(str, nums))


def imm(v):
    """An operand's value when it is an immediate (or a Python int), else None."""
    if isinstance(v, Imm):
        return int(v.value)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


def times(n, mult):
    return None if n is None or mult is None else n * mult
