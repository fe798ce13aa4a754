"""Thread classes for the run of a kernel (verify/ring.py): threads that have taken the same path so far share
one program counter and one set of registers. A register holds one value for the whole class, or a tuple with
one value per thread (aligned with `tids`) where it differs (%tid, addresses computed from it). At a branch
whose condition differs inside a class, the class splits in two (`split`).

Values: ints and bools as ptxdsl.fold computes them, `Sym` for an address in shared memory, None for anything
the run does not know. Register arithmetic is fold.evaluate's. In a block of one dimension, %tid.x and what
add/sub/mul/shl/mad make of it with constants stay `Affine` (a * tid + b, or an address that far into a buffer)
instead of a tuple: the usual index arithmetic then costs the same for 128 threads as for one, and a range of
addresses is two multiplications; anything else gets the tuple (`column`).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from ..fold import evaluate
from ..ir import Imm, Param, PredNot, Reg, SharedAlloc, SpecialReg
from .groups import Groups

WARP = 32
MEMORY_SHIFT = 44               # the run gives the memory a caller passed addresses (i + 1) << 44: cvta keeps them
ZERO_SREGS = frozenset({"%ctaid.y", "%ctaid.z", "%cluster_ctarank", "%cluster_ctaid.x", "%cluster_ctaid.y",
                        "%cluster_ctaid.z", "%clusterid.x", "%clusterid.y", "%clusterid.z"})   # %ctaid.x: Values.cta


class Sym:
    """An address in shared memory: `off` bytes into `alloc` (a value: equal when both are; made by the hundred
    per instruction where every thread of a class has its own, hence a plain class with slots)."""

    __slots__ = ("alloc", "off")

    def __init__(self, alloc: SharedAlloc, off: int):
        self.alloc = alloc
        self.off = off

    def __eq__(self, other):
        return type(other) is Sym and other.alloc is self.alloc and other.off == self.off

    def __hash__(self):
        return hash((self.alloc, self.off))

    def __repr__(self):
        return f"Sym({self.alloc.name}, {self.off})"


class Desc:
    """A wgmma matrix descriptor built from a shared address: its start-address field names `off` bytes into
    `alloc` (`mov` of the buffer, `shr` by 4, `add` of a template whose other fields are `rest`); adds move it."""

    __slots__ = ("alloc", "off", "rest")

    def __init__(self, alloc: SharedAlloc, off: int, rest: int = 0):
        self.alloc, self.off, self.rest = alloc, off, rest

    def __eq__(self, other):
        return type(other) is Desc and other.alloc is self.alloc and other.off == self.off and other.rest == self.rest

    def __hash__(self):
        return hash((self.alloc, self.off, self.rest))

    def __repr__(self):
        return f"Desc({self.alloc.name}, {self.off})"

    def plus(self, x: int) -> "Desc":
        return Desc(self.alloc, self.off + 16 * (x & 0x3FFF), self.rest + (x & ~0x3FFF))


class Affine:
    """A value that differs per thread: a * t + b for thread t (its index in the block: %tid.x in a block of one
    dimension), bytes into `alloc` for an address in shared memory (alloc None: an integer). It does not depend on
    which threads a class holds, so a class that splits keeps it as it is. a is never 0."""

    __slots__ = ("a", "b", "alloc")

    def __init__(self, a: int, b: int, alloc=None):
        self.a, self.b, self.alloc = a, b, alloc

    def __eq__(self, other):
        return (type(other) is Affine and other.a == self.a and other.b == self.b and other.alloc is self.alloc)

    def __hash__(self):
        return hash((self.a, self.b, self.alloc))

    def __repr__(self):
        return f"Affine({self.a}*t + {self.b}{'' if self.alloc is None else ' in ' + self.alloc.name})"

    def at(self, t: int):
        v = self.a * t + self.b
        return v if self.alloc is None else Sym(self.alloc, v)

    def bounds(self, tids) -> tuple:
        """(lowest, highest) of a * t + b over `tids` (sorted)."""
        x, y = self.a * tids[0] + self.b, self.a * tids[-1] + self.b
        return (x, y) if x <= y else (y, x)


def affine(a: int, b: int, alloc=None):
    """a * t + b (an address in `alloc` where given), a plain value when it does not depend on t."""
    if a:
        return Affine(a, b, alloc)
    return b if alloc is None else Sym(alloc, b)


def column(v, tids):
    """A value as the run's tuple of one value per thread of `tids` (an Affine), or as it is."""
    if type(v) is not Affine:
        return v
    a, b, alloc = v.a, v.b, v.alloc
    if alloc is None:
        return tuple(a * t + b for t in tids)
    return tuple(Sym(alloc, a * t + b) for t in tids)


@dataclass
class Threads:
    """One class of threads (`tids` in increasing order). `vc` is what it knows of the others (their clocks, by
    class id) and of barrier phases (("bar", key) -> the last phase it saw complete); `reads` the shared-memory
    accesses its threads made: (alloc, lo, hi, clock, stmt, write); a TMA store's read is a list whose clock is
    PENDING until a wait_group retires its group (`asyncg`: its async-group queues, verify/groups.py)."""

    id: int
    tids: tuple
    pc: int = 0
    regs: dict = field(default_factory=dict)
    clock: int = 0
    vc: dict = field(default_factory=dict)
    synced: int = 0
    reads: list = field(default_factory=list)
    asyncg: Groups = Groups()
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


PENDING = float("inf")              # the clock of a read not yet complete: no other thread can have seen it


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

    def __init__(self, block, params, grid=None, cta=0):
        self.block = block                  # (x, y, z)
        self.params = params or {}          # scalar parameter name -> int
        self.grid = grid                    # (x, y, z) CTAs, or None: %nctaid is not known
        self.cta = cta                      # the %ctaid.x of the CTA the run follows

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
        if name == "%ctaid.x":
            return self.cta
        if name in ZERO_SREGS:
            return 0
        if name == "%tid.x" and x == self.block[0] * y * self.block[2]:
            return affine(1, 0) if th.n > 1 else th.tids[0]
        per = {"%tid.x": lambda t: t % x, "%tid.y": lambda t: t // x % y, "%tid.z": lambda t: t // (x * y),
               "%laneid": lambda t: t % WARP, "%warpid": lambda t: t // WARP}.get(name)
        if per is not None:
            return norm(tuple(per(t) for t in th.tids))
        sizes = {"%ntid.x": x, "%ntid.y": y, "%ntid.z": self.block[2]}
        if self.grid is not None:
            sizes.update({"%nctaid.x": self.grid[0], "%nctaid.y": self.grid[1], "%nctaid.z": self.grid[2]})
        return sizes.get(name)

    # ------------------------------------------------------------------------------ compute

    def compute(self, e, args, tids=()):
        """The value e (a Compute effect) writes, from its operands' values (those of the class of `tids`)."""
        n = 0
        lin = False
        for a in args:
            if type(a) is tuple:
                n = len(a)
            elif type(a) is Affine:
                lin = True
        if lin:
            if type(args[0]) is Affine and (e.fn == "mov" or e.fn in ("cvta", "cvt") and args[0].alloc is not None):
                return args[0]
            if not n:
                got = _affine(e, args, tids) if e.fn not in _COMPARE else _compare(e, args, tids)
                if got is not None:
                    return got
            args = [column(a, tids) for a in args]
            n = len(tids)
        if not n:
            return _scalar(e, args)
        if e.fn == "mov" or e.fn in ("cvta", "cvt") and type(args[0]) is tuple and all(type(x) is Sym
                                                                                       for x in args[0]):
            return args[0]
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
    if fn == "mov" or fn == "cvta" and type(vals[0]) is int and vals[0] >> MEMORY_SHIFT:
        return vals[0]
    if fn == "selp":
        c = vals[2]
        return None if c is None else vals[0] if c else vals[1]
    if any(isinstance(x, (Sym, Desc)) for x in vals):
        return _address(fn, e.mode, vals)
    it = iter(vals)
    return evaluate(e, lambda _a: next(it))


_FAST = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}


def _vector(e, args, n):
    """The common integer operations on whole columns at once, and addresses plus per-thread offsets (None: not
    one of them, or not all ints)."""
    t, fn, mode = e.type, e.fn, e.mode
    if t is None or t.kind not in "usb" or fn not in (*_FAST, "shl", "shr", "mad"):
        return None
    if (fn == "mul" and mode not in (None, "lo")) or (fn == "mad" and mode not in ("lo", "wide")):
        return None
    cols = []
    for a in args:
        if type(a) is tuple:
            if not _ints(a):
                return _addresses(fn, args, n)
            cols.append(a)
        elif type(a) is int:
            cols.append((a,) * n)
        else:
            return _addresses(fn, args, n)
    if fn == "mad" and mode != "lo":
        return None
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


def _affine(e, args, tids):
    """add, sub, mul, shl and mad of Affine values and ints, as an Affine (None: another operation, an operand
    that is neither, or an integer result some thread would wrap at the type's width)."""
    t, fn = e.type, e.fn
    if t is None or t.kind not in "usb" or e.mode not in (None, "lo"):
        return None
    for a in args:
        if type(a) is not Affine and (type(a) is not int and type(a) is not Sym):
            return None
    if fn == "add" and len(args) == 2:
        got = _sum(args[0], args[1], 1)
    elif fn == "sub" and len(args) == 2:
        got = _sum(args[0], args[1], -1)
    elif fn in ("mul", "shl") and len(args) == 2:
        got = _product(fn, args[0], args[1], t.bits)
    elif fn == "mad" and len(args) == 3:
        got = _product("mul", args[0], args[1], t.bits)
        got = None if got is None else _sum(got, args[2], 1)
    else:
        return None
    if type(got) is Affine and got.alloc is None:
        lo, hi = got.bounds(tids)
        if lo < 0 or hi >> t.bits:
            return None
    return got


_COMPARE = {"setp.eq": operator.eq, "setp.ne": operator.ne, "setp.lt": operator.lt, "setp.le": operator.le,
            "setp.gt": operator.gt, "setp.ge": operator.ge}


def _compare(e, args, tids):
    """setp of an Affine integer and an int, thread by thread (None: values where a signed and an unsigned
    comparison could differ, or other operands)."""
    if len(args) != 2 or e.type is None or e.type.kind not in "usb":
        return None
    x, y = args
    cmp = _COMPARE[e.fn]
    if type(x) is not Affine:
        x, y = y, x
        cmp = {operator.lt: operator.gt, operator.gt: operator.lt, operator.le: operator.ge,
               operator.ge: operator.le}.get(cmp, cmp)
    if type(x) is not Affine or x.alloc is not None or type(y) is not int:
        return None
    half = 1 << (e.type.bits - 1)
    lo, hi = x.bounds(tids)
    if lo < 0 or hi >= half or not 0 <= y < half:
        return None
    a, b = x.a, x.b
    return norm(tuple(cmp(a * t + b, y) for t in tids))


def _parts(v):
    """(a, b, alloc) of an Affine, an int or an address."""
    if type(v) is Affine:
        return v.a, v.b, v.alloc
    if type(v) is Sym:
        return 0, v.off, v.alloc
    return 0, v, None


def _sum(x, y, sign):
    (a1, b1, m1), (a2, b2, m2) = _parts(x), _parts(y)
    if m2 is not None and (sign < 0 or m1 is not None):
        return None                 # an address subtracted, or two added
    return affine(a1 + sign * a2, b1 + sign * b2, m1 if m1 is not None else m2)


def _product(fn, x, y, bits):
    if fn == "mul" and type(x) is int and type(y) is int:
        return x * y
    if type(x) is not Affine:
        x, y = y, x
        if fn == "shl":
            return None
    if type(x) is not Affine or x.alloc is not None or type(y) is not int:
        return None
    if fn == "shl":
        if not 0 <= y < bits:
            return None
        y = 1 << y
    return affine(x.a * y, x.b * y)


def _ints(col) -> bool:
    for x in col:
        if type(x) is not int:
            return False
    return True


def _addresses(fn, args, n):
    """An address plus per-thread offsets, a column of addresses plus an offset: add, sub, mad (lo/wide) of a
    shared-memory address and integers, where one of them differs per thread (None: not this case, or a value
    some thread does not know; the caller then goes thread by thread)."""
    if fn == "add" and len(args) == 2:
        a, b = args
        if type(b) is Sym or (type(b) is tuple and type(b[0]) is Sym):
            a, b = b, a
        return _shift(a, b, 1)
    if fn == "sub" and len(args) == 2:
        return _shift(args[0], args[1], -1)
    if fn == "mad" and len(args) == 3:
        x, y, base = args
        if type(x) is int and type(y) is tuple and _ints(y):
            return _shift(base, tuple(x * v for v in y), 1)
        if type(y) is int and type(x) is tuple and _ints(x):
            return _shift(base, tuple(v * y for v in x), 1)
        if type(x) is tuple and type(y) is tuple and _ints(x) and _ints(y):
            return _shift(base, tuple(u * v for u, v in zip(x, y)), 1)
        if type(x) is int and type(y) is int:
            return _shift(base, x * y, 1)
    return None


def _shift(base, off, sign):
    """base (an address or a column of them) + sign * off (an int or a column of ints)."""
    if type(base) is Sym:
        if type(off) is tuple and _ints(off):
            alloc, at = base.alloc, base.off
            return norm(tuple(Sym(alloc, at + sign * o) for o in off))
        return None
    if type(base) is not tuple or not base or type(base[0]) is not Sym:
        return None
    alloc = base[0].alloc
    for b in base:
        if type(b) is not Sym or b.alloc is not alloc:
            return None
    if type(off) is int:
        return norm(tuple(Sym(alloc, b.off + sign * off) for b in base))
    if type(off) is tuple and _ints(off):
        return norm(tuple(Sym(alloc, b.off + sign * o) for b, o in zip(base, off)))
    return None


def _address(fn, mode, vals):
    """add/sub of an address and a number, mad of two numbers and an address (None otherwise)."""
    ints = [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]
    desc = next((x for x in vals if isinstance(x, Desc)), None)
    if desc is not None:
        if fn == "add" and len(ints) == 1 and len(vals) == 2:
            return desc.plus(ints[0])
        if fn == "mad" and mode in ("lo", "wide") and vals[2] is desc and len(ints) == 2:
            return desc.plus(ints[0] * ints[1])
        return desc if fn == "mov" else None
    if fn == "add" and len(ints) == 1 and len(vals) == 2:
        sym = next(x for x in vals if isinstance(x, Sym))
        return Sym(sym.alloc, sym.off + ints[0])
    if fn == "sub" and isinstance(vals[0], Sym) and len(ints) == 1:
        return Sym(vals[0].alloc, vals[0].off - ints[0])
    if fn == "mad" and mode in ("lo", "wide") and isinstance(vals[2], Sym) and len(ints) == 2:
        return Sym(vals[2].alloc, vals[2].off + ints[0] * ints[1])
    if fn in ("mov", "cvta", "cvt") and isinstance(vals[0], (Sym, Desc)):
        return vals[0]
    if fn == "shr" and isinstance(vals[0], Sym) and vals[1] == 4 and vals[0].off % 16 == 0:
        return Desc(vals[0].alloc, vals[0].off)              # a matrix descriptor's start-address field
    return None


def split(th: Threads, mask, new_id: int, ids_in) -> tuple:
    """Part a class where a per-thread condition differs: (the threads where it holds, the others), each a new
    class. Both keep every access made so far; `ids_in` (dicts of knowledge) learn both new ids in place of the
    old one. Each half knows the other's past only up to the last point the old class synchronised."""
    yes = [i for i, b in enumerate(mask) if b]
    no = [i for i, b in enumerate(mask) if not b]
    halves = []
    for idx, cid, other in ((yes, new_id, new_id + 1), (no, new_id + 1, new_id)):
        regs = {r: (norm(tuple(v[i] for i in idx)) if type(v) is tuple else v.at(th.tids[idx[0]])
                    if type(v) is Affine and len(idx) == 1 else v) for r, v in th.regs.items()}
        vc = {k: v for k, v in th.vc.items() if k != th.id}
        vc[cid] = th.clock
        vc[other] = th.synced
        mine = {id(r): list(r) for r in th.reads if type(r) is list and len(r) == 6}   # pending store reads: each
                                                                                            # half its own (an MMA's
                                                                                            # is the warpgroup's)
        halves.append(Threads(cid, tuple(th.tids[i] for i in idx), th.pc, regs, th.clock, vc, th.synced,
                              [mine.get(id(r), r) for r in th.reads],
                              th.asyncg.map(lambda r: mine.get(id(r), r))))
    for d in ids_in:
        if th.id in d:
            d[new_id] = d[new_id + 1] = d.pop(th.id)
    return halves[0], halves[1]
