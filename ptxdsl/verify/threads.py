"""Thread classes for the run of a kernel (verify/ring.py): threads that have taken the same path so far share
one program counter and one set of registers. A register holds one value for the whole class, or a tuple with
one value per thread (aligned with `tids`) where it differs (%tid, addresses computed from it). At a branch
whose condition differs inside a class, the class splits in two (`split`).

Values: ints and bools as ptxdsl.fold computes them, `Sym` for an address in shared memory, None for anything
the run does not know. Register arithmetic is fold.evaluate's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..fold import evaluate
from ..ir import Imm, Param, PredNot, Reg, SharedAlloc, SpecialReg
from ..types import pred

WARP = 32
ZERO_SREGS = frozenset({"%ctaid.x", "%ctaid.y", "%ctaid.z", "%cluster_ctarank", "%cluster_ctaid.x",
                        "%cluster_ctaid.y", "%cluster_ctaid.z", "%clusterid.x", "%clusterid.y", "%clusterid.z"})


@dataclass(frozen=True)
class Sym:
    """An address in shared memory: `off` bytes into `alloc`."""

    alloc: SharedAlloc
    off: int


@dataclass
class Threads:
    """One class of threads. `vc` is what it knows of the others (their clocks, by class id) and of barrier
    phases (("bar", key) -> the last phase it saw complete); `reads` the shared-memory accesses its threads
    made: (alloc, lo, hi, clock, stmt, write)."""

    id: int
    tids: tuple
    pc: int = 0
    regs: dict = field(default_factory=dict)
    clock: int = 0
    vc: dict = field(default_factory=dict)
    synced: int = 0
    reads: list = field(default_factory=list)
    state: str = "run"              # run | wait | bar | done
    at: object = None               # the statement it is blocked at

    @property
    def n(self) -> int:
        return len(self.tids)

    def tick(self) -> int:
        self.clock += 1
        self.vc[self.id] = self.clock
        return self.clock

    def learn(self, known: dict) -> None:
        """Join another's knowledge (an acquire): the max of each component."""
        for k, v in known.items():
            if self.vc.get(k, -1) < v:
                self.vc[k] = v
        self.synced = max(self.synced, known.get(self.id, 0))


def describe(tids) -> str:
    """How a finding names threads: `thread 0`, `threads 32-63`, `threads 0, 32, 64, 96`."""
    t = sorted(tids)
    if len(t) == 1:
        return f"thread {t[0]}"
    if t == list(range(t[0], t[-1] + 1)):
        return f"threads {t[0]}-{t[-1]}"
    shown = ", ".join(map(str, t[:6]))
    return f"threads {shown}{', ...' if len(t) > 6 else ''} ({len(t)} threads)"


class Values:
    """Reads operands and computes Compute effects for a class (one value, or one per thread)."""

    def __init__(self, block, params):
        self.block = block                  # (x, y, z)
        self.params = params or {}          # scalar parameter name -> int

    # ------------------------------------------------------------------------------ operands

    def get(self, th: Threads, v):
        if isinstance(v, Reg):
            return th.regs.get(v)
        if isinstance(v, PredNot):
            x = th.regs.get(v.reg)
            return _map(lambda b: None if b is None else not b, x)
        if isinstance(v, Imm):
            return None if v.type.kind == "f" else int(v.value)
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, SharedAlloc):
            return Sym(v, 0)
        if isinstance(v, SpecialReg):
            return self.sreg(th, v.name)
        if isinstance(v, Param):
            return self.params.get(v.name) if v.kind == "scalar" else None
        return None

    def sreg(self, th: Threads, name: str):
        x, y, _ = self.block
        if name in ZERO_SREGS:
            return 0
        per = {"%tid.x": lambda t: t % x, "%tid.y": lambda t: t // x % y, "%tid.z": lambda t: t // (x * y),
               "%laneid": lambda t: t % WARP, "%warpid": lambda t: t // WARP}.get(name)
        if per is not None:
            return norm(tuple(per(t) for t in th.tids))
        sizes = {"%ntid.x": x, "%ntid.y": y, "%ntid.z": self.block[2], "%nctaid.x": None}
        return sizes.get(name)

    # ------------------------------------------------------------------------------ compute

    def compute(self, e, args):
        """The value e (a Compute effect) writes, from its operands' values."""
        if not any(isinstance(a, tuple) for a in args):
            return _scalar(e, args)
        n = len(next(a for a in args if isinstance(a, tuple)))
        fast = _vector(e, args, n)
        if fast is not None:
            return fast
        return norm(tuple(_scalar(e, [a[i] if isinstance(a, tuple) else a for a in args]) for i in range(n)))

    def elect(self, th: Threads, mask):
        """elect.sync: every lane of the member mask runs it together (it is .sync), so each warp's leader is the
        lane of the mask's lowest bit, whichever class its thread is in now."""
        m = self.get(th, mask)
        if not isinstance(m, int) or not m & 0xFFFFFFFF:
            return None
        lane = ((m & -m).bit_length() - 1) % WARP
        return norm(tuple(t % WARP == lane for t in th.tids))


def norm(values: tuple):
    """One value when every thread has the same one (the tuple otherwise)."""
    first = values[0]
    for v in values:
        if v is not first and (type(v) is not type(first) or v != first):
            return values
    return first


def _map(fn, x):
    return norm(tuple(fn(v) for v in x)) if isinstance(x, tuple) else fn(x)


def _scalar(e, vals):
    fn = e.fn
    if fn == "mov":
        return vals[0]
    if fn == "selp":
        c = vals[2]
        return None if c is None else vals[0] if c else vals[1]
    if any(isinstance(x, Sym) for x in vals):
        return _address(fn, e.mode, vals)
    it = iter(vals)
    return evaluate(e, lambda _a: next(it))


_FAST = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}


def _vector(e, args, n):
    """The common integer operations on whole columns at once (None: not one of them, or not all ints)."""
    t, fn, mode = e.type, e.fn, e.mode
    if t is None or t.kind not in "usb" or fn not in (*_FAST, "shl", "shr", "mad"):
        return None
    if (fn == "mul" and mode not in (None, "lo")) or (fn == "mad" and mode != "lo"):
        return None
    cols = []
    for a in args:
        col = a if isinstance(a, tuple) else (a,) * n
        if not all(type(x) is int for x in col):
            return None
        cols.append(col)
    m = (1 << t.bits) - 1
    if fn == "mad":
        return norm(tuple((x * y + z) & m for x, y, z in zip(*cols)))
    if fn == "shl":
        return norm(tuple((x << y) & m if 0 <= y < t.bits else 0 for x, y in zip(*cols)))
    if fn == "shr":
        if t.kind == "s":
            return None
        return norm(tuple((x & m) >> min(y, t.bits) if y >= 0 else None for x, y in zip(*cols)))
    op = _FAST[fn]
    return norm(tuple(op(x, y) & m for x, y in zip(*cols)))


def _address(fn, mode, vals):
    """add/sub of an address and a number, mad of two numbers and an address (None otherwise)."""
    ints = [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]
    if fn == "add" and len(ints) == 1 and len(vals) == 2:
        sym = next(x for x in vals if isinstance(x, Sym))
        return Sym(sym.alloc, sym.off + ints[0])
    if fn == "sub" and isinstance(vals[0], Sym) and len(ints) == 1:
        return Sym(vals[0].alloc, vals[0].off - ints[0])
    if fn == "mad" and mode in ("lo", "wide") and isinstance(vals[2], Sym) and len(ints) == 2:
        return Sym(vals[2].alloc, vals[2].off + ints[0] * ints[1])
    if fn in ("mov", "cvta", "cvt") and isinstance(vals[0], Sym):
        return vals[0]
    return None


def split(th: Threads, mask, new_id: int, ids_in) -> tuple:
    """Part a class where a per-thread condition differs: (the threads where it holds, the others), each a new
    class. Both keep every access made so far; `ids_in` (dicts of knowledge) learn both new ids in place of the
    old one. Each half knows the other's past only up to the last point the old class synchronised."""
    yes = [i for i, b in enumerate(mask) if b]
    no = [i for i, b in enumerate(mask) if not b]
    halves = []
    for idx, cid, other in ((yes, new_id, new_id + 1), (no, new_id + 1, new_id)):
        regs = {r: (norm(tuple(v[i] for i in idx)) if isinstance(v, tuple) else v) for r, v in th.regs.items()}
        vc = {k: v for k, v in th.vc.items() if k != th.id}
        vc[cid] = th.clock
        vc[other] = th.synced
        halves.append(Threads(cid, tuple(th.tids[i] for i in idx), th.pc, regs, th.clock, vc, th.synced,
                              [(a, lo, hi, c, s, w) for a, lo, hi, c, s, w in th.reads]))
    for d in ids_in:
        if th.id in d:
            d[new_id] = d[new_id + 1] = d.pop(th.id)
    return halves[0], halves[1]
