"""The op declarations as the generated tests see them: every combination an op declares (qualifier values
and operand shapes), operand values built for one with the public builder API, and modules holding many
combinations that are assembled at once (ptxas's errors mapped back to the combination on the line).

Nothing here names an instruction: a newly declared op is drawn, built and assembled with no edit here.
"""
from __future__ import annotations

import itertools
import re
from collections import defaultdict
from types import SimpleNamespace

import ptxdsl as px
from ptxdsl.errors import AssembleError, DSLError, SourceLoc
from ptxdsl.isa import decl, operands as K
from ptxdsl.isa.registry import floor_target
from ptxdsl.target import Target
from ptxdsl.types import ALL_TYPES, b16, pred, scalar_type, u32, u64

BATCH = 400                     # ops per kernel
SHARED = 4096                   # bytes of the shared buffer every address slot may use
POOL = 128                      # registers a register-list slot draws from (wgmma's largest accumulator)
DESCRIPTOR = 0x4000_0040_0001_0000   # a matrix-descriptor constant (128B swizzle, SBO 1024, LBO 16)


# --------------------------------------------------------------------------------- combinations


def conditioned(cls) -> set:
    """The names that some exclusion, refusal or floor condition of `cls` mentions."""
    return {name for cond, _ in cls.excludes + cls.refuses + cls.raises for name in cond}


def default_shape(slot):
    shapes = slot.kind.shapes
    return "reg" if "reg" in shapes else (shapes[0] if shapes else None)


def combinations(cls, *, all_shapes=False):
    """Every combination of `cls`'s qualifier values, with the operand shapes its conditions name (all of
    them with all_shapes) and one usual shape for the other operands."""
    choices = cls.choices()
    names = list(choices)
    keep = set(cls.quals) | conditioned(cls) if not all_shapes else set(names)
    varying = [n for n in names if n in keep]
    fixed = {s.name: default_shape(s) for s in cls.operands if s.name in choices and s.name not in keep}
    for values in itertools.product(*(choices[n] for n in varying)):
        yield {**fixed, **dict(zip(varying, values))}


def classified(cls, *, all_shapes=False, per_rule=4):
    """(q, why) for the combinations of `cls` (as `combinations` draws them): every one that no condition excludes
    (why None), and for each exclusion or refusal the first `per_rule` combinations whose first matching condition
    it is (why: its reason). A partial choice that a condition already decides (a type pair ptxas has no form of)
    is not expanded, so a declaration with many qualifiers (wgmma.mma_async: N x three types x operand shapes) is
    walked without listing what it excludes wholesale."""
    choices = cls.choices()
    names = list(choices)
    keep = set(cls.quals) | conditioned(cls) if not all_shapes else set(names)
    varying = [n for n in names if n in keep]
    fixed = {s.name: default_shape(s) for s in cls.operands if s.name in choices and s.name not in keep}
    conds = [(i, cond, reason) for i, (cond, reason) in enumerate(cls.excludes + cls.refuses)]
    known = {n: i for i, n in enumerate(varying)}
    early = defaultdict(list)          # depth -> the conditions decided once varying[:depth + 1] are chosen
    for i, cond, reason in conds:
        depth = max((known.get(n, len(varying)) for n in cond), default=0)
        early[depth].append((i, cond, reason))

    def first(q, among):
        return next(((i, reason) for i, cond, reason in among if decl.matches(cond, q)), None)

    def walk(depth, q, domain, below):
        """The combinations under the partial choice q that no condition numbered below `below` excludes."""
        if depth == len(varying):
            yield {**fixed, **q}
            return
        name = varying[depth]
        for v in domain[name]:
            q2 = {**q, name: v}
            hit = first(q2, early[depth])
            if hit is None or hit[0] >= below:
                yield from walk(depth + 1, q2, domain, below)

    for q in walk(0, {}, choices, len(conds)):
        if first(q, early[len(varying)]) is None:
            yield q, None
    for i, cond, reason in conds:
        domain = {n: tuple(v for v in values if n not in cond or decl.matches({n: cond[n]}, {n: v}))
                  for n, values in choices.items()}
        found = 0
        for q in walk(0, {}, domain, i):
            hit = first(q, conds)
            if hit is not None and hit[0] == i:
                yield q, reason
                found += 1
                if found == per_rule:
                    break


def valid(cls, *, all_shapes=False) -> list:
    """The combinations of `cls` that no condition excludes."""
    return [q for q, why in classified(cls, all_shapes=all_shapes) if why is None]


def spread(qs: list, limit: int) -> list:
    """At most `limit` of the combinations qs (in their order): first enough to show every (name, value) pair
    once, then evenly spaced others (a test whose cost grows with each op's text, e.g. the .ptxd round trip, on
    an op with thousands of forms)."""
    if len(qs) <= limit:
        return list(qs)
    seen, chosen = set(), []
    for i, q in enumerate(qs):
        pairs = {(n, repr(v)) for n, v in q.items()}
        if not pairs <= seen:
            seen |= pairs
            chosen.append(i)
    step = max(1, len(qs) // max(1, limit - len(chosen)))
    chosen = sorted(set(chosen) | set(range(0, len(qs), step)))
    return [qs[i] for i in chosen[:max(limit, len(chosen))]]


def target_of(cls, q) -> Target:
    arch, ptx = floor_target(cls.need(q))
    return Target(arch, ptx)


def quals_of(cls, q) -> dict:
    return {n: v for n, v in q.items() if n in cls.quals}


# ------------------------------------------------------------------------------------ operands


class Operands:
    """Operand values for the ops of one test kernel, made with the builder when first needed and shared.
    With specs=True a tensor-map slot gets a parameter whose TensorMapSpec has the rank and kind the
    combination addresses (so the checks against the map's description run too)."""

    def __init__(self, k, specs: bool = False):
        self.k = k
        self.cache = {}
        self.labels = 0
        self.specs = specs

    def _once(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    # the building blocks
    def smem(self):
        return self._once("smem", lambda: self.k.shared("smem", SHARED, align=1024))

    def gptr(self):
        return self._once("gptr", lambda: self.k.param_ptr("g"))

    def generic(self):
        return self._once("generic", lambda: self.k.cvta(self.gptr(), "global"))

    def reg(self, t):
        t = scalar_type(t)
        if t is pred:
            return self._once("pred", lambda: self.k.setp("ne", self.reg(u32), 0))
        if t.kind == "f" and t.bits == 16:
            return self._once(("reg", t.name), lambda: self.k.mov(0x3C00, b16))
        if t.bits == 8:
            t = ALL_TYPES[f"{t.kind}16"]
        value = 1.0 if t.kind == "f" else 1
        return self._once(("reg", t.name), lambda: self.k.mov(value, t))

    def pool(self, t):
        """POOL distinct registers of type t (register lists: accumulators, fragments), the same in every op."""
        t = scalar_type(t)
        return self._once(("pool", t.name), lambda: tuple(self.k.mov(0.0 if t.kind == "f" else 0, t)
                                                          for _ in range(POOL)))

    def address(self, space, width, shape):
        if space in ("shared", "shared::cta", "shared::cluster"):
            if shape == "buffer" or (width is None and shape != "reg"):
                return self.smem()
            t = u64 if width == 64 else u32
            return self._once(("saddr", t.name), lambda: self.k.mov(self.smem(), t))
        if space == "global":
            return self.gptr()
        if space in ("local", "const", "param"):
            return self._once("reg64", lambda: self.k.mov(0, u64))
        return self.generic()

    def label(self):
        self.labels += 1
        return self.k.label(f"L{self.labels}")

    def parameters(self):
        """Declare every parameter an operand may need now (a .ptxd kernel declares them in its header)."""
        self.gptr()
        if self.specs:
            for kind, ranks in (("tiled", range(1, 6)), ("im2col", range(3, 6))):
                for rank in ranks:
                    self._once(("tmap", kind, rank), lambda kind=kind, rank=rank: self.k.param_tensormap(
                        f"tm_{kind}{rank}", map_spec(kind, rank)))
        else:
            self._once("tmap", lambda: self.k.param_tensormap("tm"))

    def tmap(self, ns, q):
        if not self.specs:
            return self._once("tmap", lambda: self.k.param_tensormap("tm"))
        mode = getattr(ns, "mode", "tile") or "tile"
        rank = 2 if mode in ("tile::gather4", "tile::scatter4") else q.get("coords", 2)
        kind = "im2col" if mode.startswith("im2col") else "tiled"
        return self._once(("tmap", kind, rank), lambda: self.k.param_tensormap(f"tm_{kind}{rank}",
                                                                               map_spec(kind, rank)))

    # one slot
    def value(self, ns, slot, shape, q=None):
        kind = slot.kind
        if kind.out:
            if getattr(kind, "sink", False):
                return True if shape == "reg" else None
            return None
        if shape is None or kind.fixed:
            return None
        if isinstance(kind, K.Registers):
            return self.pool(K._resolve(ns, kind.types)[0])[:K._resolve(ns, kind.count)]
        if isinstance(kind, K.DescriptorOrRegisters):
            return self.pool(K._resolve(ns, kind.types)[0])[-kind.count:] if shape == "regs" else self.reg(u64)
        if isinstance(kind, K.Descriptor):
            return DESCRIPTOR if shape == "imm" else self.reg(u64)
        if isinstance(kind, K.Const):
            return shape
        if isinstance(kind, K.Coords):
            return tuple(self.reg(u32) if i % 2 else i * 8 for i in range(shape))
        if isinstance(kind, K.Vector):
            t = K._resolve(ns, kind.type)
            return tuple(self.reg(t) for _ in range(shape)) if shape > 1 else self.reg(t)
        if isinstance(kind, K.TensorMap):
            return self.tmap(ns, q or {})
        if isinstance(kind, K.LabelRef):
            return self.label()
        if isinstance(kind, K.Address):
            return self.address(K._resolve(ns, kind.space) or "", K._resolve(ns, kind.width), shape)
        if isinstance(kind, K.Value):
            t = K._resolve(ns, kind.type)
            return immediate(kind, t) if shape == "imm" else self.reg(t)
        raise AssertionError(f"no sample for operand kind {kind!r}")


def map_spec(kind: str, rank: int):
    """A small u32 tensor map of `rank` (tiled, or im2col over an N[D][H]WC tensor)."""
    shape = (2,) * (rank - 1) + (16,)
    if kind == "tiled":
        return px.TensorMapSpec.tiled_for(shape, "u32", shape)
    return px.TensorMapSpec.im2col_for(shape, "u32", channels_per_pixel=16, pixels_per_column=2,
                                       lower_corner=(0,) * (rank - 2), upper_corner=(0,) * (rank - 2))


def immediate(kind, t):
    """A constant the slot accepts: 1 (1.0 for floats) when in range, else the lowest allowed."""
    if t is pred:
        return 1
    lo = kind.lo if kind.lo is not None else 1
    if lo <= 1 and (kind.hi is None or kind.hi >= 1):
        v = kind.step if kind.step > 1 else 1
    else:
        v = lo
    return float(v) if t.kind == "f" else v


def namespace(cls, q) -> SimpleNamespace:
    """The attributes a slot's type or space may refer to, before the op exists."""
    values = {n: q.get(n, cls.quals[n].default) for n in cls.quals}
    for n, v in list(values.items()):
        if isinstance(cls.quals[n], decl.TypeQual) and v is not None:
            values[n] = scalar_type(v)
    return SimpleNamespace(mnemonic=cls.mnemonic, **values)


def arguments(cls, q, ops: Operands) -> dict:
    """Builder keyword arguments for combination q of `cls`."""
    ns = namespace(cls, q)
    kw = quals_of(cls, q)
    for slot in cls.operands:
        if slot.inline and not isinstance(slot.kind, K.Coords) or slot.kind.fixed:
            continue
        shape = q.get(slot.name, default_shape(slot) if not slot.optional else None)
        v = ops.value(ns, slot, shape, q)
        if v is not None:
            kw[slot.name] = v
    return kw


# ------------------------------------------------------------------------------------- modules


# Instructions ptxas checks against the others of their kernel (ptxdsl.limits): one per kernel in a batch.
KERNEL_WIDE = frozenset({"setmaxnreg.inc", "setmaxnreg.dec"})


class Batch:
    """Combinations built into kernels of one module, each op on its own PTX line, tagged with its index."""

    def __init__(self, name: str, target: Target | None = None, **kernel_options):
        self.name = name
        self.target = target
        self.options = kernel_options
        self.kernels = []
        self.items = []              # (cls, q, op)
        self._k = None
        self._ops = None

    def _kernel(self):
        if self._k is None or len(self._k.kernel.body) > BATCH:
            if self._k is not None:
                self.kernels.append(self._k.finish())
            arch, ptx = (self.target.arch, self.target.ptx) if self.target else (None, None)
            self._k = px.KernelBuilder(f"{self.name}{len(self.kernels)}", arch=arch, ptx=ptx, verify=False,
                                       loc=SourceLoc("<declared>", 0), **self.options)
            self._ops = Operands(self._k)
        return self._k, self._ops

    def add(self, cls, q, *, build=None) -> None:
        """Build combination q of `cls` (with `build`, another class's construction rules, e.g. an unchecked
        copy) on a line of its own; an op ptxas weighs against the rest of its kernel (setmaxnreg: a decrease
        above every increase is refused) gets a kernel of its own."""
        if cls.mnemonic in KERNEL_WIDE and self._k is not None and self._k.kernel.body:
            self.kernels.append(self._k.finish())
            self._k = None
        k, ops = self._kernel()
        kw = arguments(cls, q, ops)
        with k.at(SourceLoc("<combination>", len(self.items) + 1)):
            k._op(build or cls, **kw)
        self.items.append((cls, q, k.kernel.body[-1].op))
        if cls.mnemonic in KERNEL_WIDE:
            self.kernels.append(self._k.finish())
            self._k = None

    def finish(self):
        if self._k is not None:
            self.kernels.append(self._k.finish())
            self._k = None
        return px.emit(px.module(*self.kernels))

    def assemble(self, ptx=None) -> set:
        """Assemble the module (for its target's arch); the indices (1-based) of the items ptxas rejected. The
        rejected lines are taken out and the rest assembled again until it passes, so that no error hides
        behind another (ptxas stops reporting after a number of them); an error ptxas gives no line for (an
        internal compiler error) is found by halving the items."""
        ptx = ptx or self.finish()
        lines = ptx.text.split("\n")
        where = {ptx.origins[n].line: n for n in ptx.origins if ptx.origins[n].file == "<combination>"}
        return _rejected(lines, ptx.target.arch, where, sorted(where))


def _rejected(lines, arch, where, items) -> set:
    """The items (line-tagged combinations) among `items` whose lines ptxas rejects; the others stay in `lines`."""
    chosen = set(items)
    drop = {n for i, n in where.items() if i not in chosen}
    keep = ["" if n in drop else ln for n, ln in enumerate(lines, 1)]
    index = {where[i]: i for i in items}
    bad = set()
    while True:
        try:
            px.assemble("\n".join(keep), arch)
            return bad
        except AssembleError as e:
            found = {int(n) for n in re.findall(r"PTX line (\d+)", str(e))}
            if found and found <= set(index):
                for n in found:
                    bad.add(index.pop(n))
                    keep[n - 1] = ""
                continue
            if found or len(index) <= 1:
                if len(index) == 1:
                    return bad | set(index.values())
                raise
            # no line: halve the remaining items
            rest = sorted(index.values())
            half = len(rest) // 2
            return bad | _rejected(keep, arch, where, rest[:half]) | _rejected(keep, arch, where, rest[half:])


def by_target(pairs):
    """(cls, q) pairs grouped by their floor target."""
    groups = defaultdict(list)
    for cls, q in pairs:
        groups[target_of(cls, q)].append((cls, q))
    return dict(sorted(groups.items(), key=lambda kv: (kv[0].arch, kv[0].ptx)))


def unchecked(cls):
    """A copy of `cls` without its exclusions: builds a combination ptxdsl refuses, to ask ptxas about it."""
    return type(cls.__name__, (cls,), {"excludes": (), "refuses": (), "_checks": (), "abstract": True})


def builds(cls, q) -> bool:
    """Whether ptxdsl builds combination q (in a throwaway kernel)."""
    try:
        Batch("probe").add(cls, q)
        return True
    except DSLError:
        return False
