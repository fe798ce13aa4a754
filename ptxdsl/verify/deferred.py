"""Launch checks: what the verifier could not decide because it depends on the kernel's arguments, kept as data
and evaluated with the actual ones (ptxdsl.verify.launch.check_launch).

Each check names its rule (a rule of rules.RULES, so `ptxdsl docs RULE` shows the fix), the user's line, and
evaluates to a message (broken) or None (holds, or the arguments do not say). An `Env` holds the launch's
values: scalar parameters by name, the TensorMapSpec bound to each tensor-map parameter (None: not known, a
raw CUtensorMap), the cluster size and the block.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from ..errors import PtxdslError, SourceLoc
from ..ir import TensorMapRef
from ..tensormap import SWIZZLE_SPAN
from .facts import _res_add
from .symbols import Lin, Sym, is_static

TMA_SMEM_ALIGN = 128


@dataclass(frozen=True)
class Env:
    """The values of one launch."""

    scalars: dict               # scalar parameter name -> int
    maps: dict                  # tensor-map parameter name -> TensorMapSpec or None
    cluster: int | None         # CTAs per cluster (the launch's, else the kernel's), None: no cluster
    block: tuple | None = None  # threads per CTA (x, y, z)
    shared_bytes: int | None = None   # the launch's dynamic shared memory (None: what the kernel declares)
    grid: tuple | None = None   # CTAs in the grid (x, y, z), where a check reads %nctaid
    memory: dict | None = None  # pointer parameter name -> the bytes it points at, where the caller gave them

    def symbol(self, s: Sym):
        if s.kind == "param":
            v = self.scalars.get(s.name)
            return v if is_static(v) else None
        if s.kind == "box":
            spec = self.maps.get(s.name)
            return _box_bytes(spec)
        return None

    def value(self, v):
        """An int, or a Lin evaluated with this launch's values (None: not known)."""
        if is_static(v):
            return v
        return v.evaluate(self.symbol) if isinstance(v, Lin) else None


def _box_bytes(spec):
    try:
        return None if spec is None else int(spec.box_bytes)
    except (KeyError, ValueError, TypeError):
        return None


def describe_map(spec) -> str:
    """How a launch error shows a tensor map: its dtype, box and swizzle."""
    if spec is None:
        return "an unknown map"
    inner = f"box {list(reversed(spec.box))}" if spec.kind == "tiled" else \
        f"{spec.channels_per_pixel} channels x {spec.pixels_per_column} pixels"
    swz = f", swizzle {spec.swizzle}" if spec.swizzle != "none" else ""
    return f"a {spec.dtype} {spec.kind} map ({inner}{swz}: {_box_bytes(spec)} bytes per box)"


class Check:
    """Base of the launch checks: fields `rule` and `loc`, the parameters it reads (`params`), and
    `evaluate(env)`: None when it holds (or the launch does not say), else the message (or, for the run of the
    threads, (rule, message, loc))."""

    def params(self) -> tuple:
        return ()

    def evaluate(self, env: Env):
        raise NotImplementedError


def _names(*values) -> tuple:
    out = []
    for v in values:
        if isinstance(v, Lin):
            out.extend(s.name for s in v.symbols() if s.kind in ("param", "box"))
    return tuple(dict.fromkeys(out))


def launchable(*values) -> bool:
    """Whether every symbol in `values` is a parameter (or a map's box), so that a launch can evaluate them."""
    return all(s.kind in ("param", "box") for v in values if isinstance(v, Lin) for s in v.symbols())


@dataclass(frozen=True)
class TxCheck(Check):
    """expect-tx-mismatch: the bytes a barrier phase expects against the bytes its loads deliver."""

    loc: SourceLoc | None
    barrier: str
    expected: object
    delivered: object
    loads: str
    wait: str
    rule: str = "expect-tx-mismatch"

    def params(self):
        return _names(self.expected, self.delivered)

    def evaluate(self, env):
        e, d = env.value(self.expected), env.value(self.delivered)
        if e is None or d is None or e == d:
            return None
        end = "the wait never returns" if e > d else "the phase completes before the data lands (tx-count underflow)"
        return (f"mbarrier {self.barrier} expects {e} transaction bytes ({self.expected}), but the TMA load(s) at "
                f"{self.loads} deliver {d} ({self.delivered}) before the wait at {self.wait}: {end}")


@dataclass(frozen=True)
class CoordCheck(Check):
    """coord-align: the innermost coordinate of a tile box times the element size is a multiple of 16 bytes.
    The coordinate is sum(coeff * param) plus a part known only modulo 2**k (`rest`)."""

    loc: SourceLoc | None
    map: str | None             # the tensor-map parameter (None: the map is not a parameter)
    spec: object                # the spec to use when the launch does not bind one
    terms: tuple                # ((param name, coeff), ...)
    rest: tuple                 # (k, r): the rest of the coordinate is r modulo 2**k
    rule: str = "coord-align"

    def params(self):
        return tuple(n for n, _ in self.terms) + ((self.map,) if self.map else ())

    def evaluate(self, env):
        spec = env.maps.get(self.map) if self.map else None
        spec = spec if spec is not None else self.spec
        if spec is None or spec.kind != "tiled" or spec.elem_bytes >= 16:
            return None
        total = 0
        for name, c in self.terms:
            v = env.scalars.get(name)
            if not is_static(v):
                return None
            total += c * v
        k, r = _res_add(self.rest, (64, total % (1 << 64)))
        need = 16 // spec.elem_bytes
        if k < need.bit_length() - 1 or not r % need:
            return None
        exact = k == 64 and not self.rest[0] < 64
        shown = f"is {r if r < 1 << 63 else r - (1 << 64)}" if exact else f"is {r % need} (mod {need})"
        return (f"the innermost coordinate {shown} elements: the box starts {(r % need) * spec.elem_bytes} bytes past "
                f"a 16-byte boundary of the {spec.dtype} tensor{f' ({self.map})' if self.map else ''}, which TMA "
                f"rejects (illegal instruction); use a multiple of {need}")


@dataclass(frozen=True)
class BoxCheck(Check):
    """tma-smem-bounds and tma-smem-align: the box the launch's map moves against its shared buffer."""

    loc: SourceLoc | None
    map: str
    buffer: str
    room: int | None            # bytes of the buffer from the box's offset (None: offset not static)
    align: int                  # the alignment the box's shared address is guaranteed
    what: str
    rule: str = "tma-smem-bounds"
    window: int | None = None   # the buffer ends the dynamic window the kernel declares (this many bytes): a
                                # launch with more dynamic shared memory gives it the difference

    def params(self):
        return (self.map,)

    def evaluate(self, env):
        spec = env.maps.get(self.map)
        if spec is None:
            return None
        try:
            size = int(spec.smem_bytes)
        except (KeyError, ValueError, TypeError):
            return None
        if self.rule == "tma-smem-bounds":
            room = self.room
            if room is not None and self.window is not None and env.shared_bytes is not None:
                room += max(0, env.shared_bytes - self.window)
            if room is None or size <= room:
                return None
            return (f"the TMA {self.what} box of {describe_map(spec)} takes {size} bytes of shared memory, but "
                    f"{self.buffer} has {room} from its offset"
                    + (f" (with {env.shared_bytes} bytes of dynamic shared memory)" if self.window is not None
                       and env.shared_bytes is not None else ""))
        span = SWIZZLE_SPAN.get(spec.swizzle, 0)
        need = max(TMA_SMEM_ALIGN, span * 8)
        if self.align % need == 0:
            return None
        why = f"its {spec.swizzle} swizzle pattern repeats every {need} bytes" if span else "TMA boxes need 128 bytes"
        return (f"{self.what} {self.buffer} is only {self.align}-byte aligned for {describe_map(spec)}, but {why}; "
                f"declare the buffer with align={need}")


@dataclass(frozen=True)
class MaskCheck(Check):
    """multicast-mask: a multicast mask against the cluster the kernel is launched with."""

    loc: SourceLoc | None
    mask: object
    rule: str = "multicast-mask"

    def params(self):
        return _names(self.mask)

    def evaluate(self, env):
        m = env.value(self.mask)
        if m is None:
            return None
        m &= 0xFFFF
        if m == 0:
            return "the multicast mask is 0: the load writes no CTA and its barrier never completes"
        if env.cluster is None:
            return (f"a multicast load (mask {m:#x}) in a launch without a cluster: pass cluster= or build the "
                    f"kernel with reqnctapercluster=")
        if m >> env.cluster:
            return (f"multicast mask {m:#x} names CTA ranks up to {m.bit_length() - 1}, but the launch's cluster has "
                    f"{env.cluster} CTAs")
        return None


@dataclass(frozen=True)
class OpCheck(Check):
    """tensormap-spec: the instruction's own rules for its map (rank, tiled or im2col, the element types a
    reduction takes), run again with the map the launch binds to a parameter declared without a spec."""

    loc: SourceLoc | None
    op: object = field(repr=False)
    ref: object = field(repr=False)    # the op's TensorMapRef operand
    map: str
    rule: str = "tensormap-spec"

    def params(self):
        return (self.map,)

    def evaluate(self, env):
        spec = env.maps.get(self.map)
        if spec is None:
            return None
        op = copy.copy(self.op)
        param = copy.copy(self.ref.param)
        param.tmap = spec
        bound = TensorMapRef(self.ref.addr, param)
        for name, value in vars(self.op).items():
            if value is self.ref:
                setattr(op, name, bound)
        try:
            op.check()
        except PtxdslError as e:
            return f"{self.map} is {describe_map(spec)}, which this instruction cannot take: {e.message}"
        return None


@dataclass(frozen=True, eq=False)
class RingCheck(Check):
    """wait-never-armed / tma-load-race / arrival-count: the run of the kernel's threads (verify/ring.py)
    again, with the launch's scalar parameters (loop bounds and branches on them) and the host copies of the
    tables its pointer parameters point at, where check_launch was given them: then for CTA 0, CTA 1 and the
    last CTA, which may take different paths through the tables."""

    kernel: object = field(repr=False)
    names: tuple = ()
    loc: SourceLoc | None = None
    rule: str = "wait-never-armed"

    def params(self):
        return self.names + ("grid",)

    def evaluate(self, env):
        return self.run(env)[0]

    def run(self, env) -> tuple:
        """(the verdict evaluate returns, how the runs ended: [(ctaid.x, "end" | "budget" | "gave-up", steps)])."""
        from .ring import LAUNCH_BUDGET, ring_findings

        ends = []

        def follow(cta):
            outcome = {}
            found = ring_findings(self.kernel, params=env.scalars, block=env.block, grid=env.grid,
                                  budget=LAUNCH_BUDGET, memory=env.memory, cta=cta, outcome=outcome)
            ends.append((cta, outcome.get("end", "end"), outcome.get("steps", 0)))
            return found

        found = follow(0)
        if not found and env.memory and env.grid:       # tables in memory: CTAs take different paths
            for cta in sorted({1, env.grid[0] - 1} - {0}):
                if cta < env.grid[0]:
                    found = follow(cta)
                    if found:
                        break
        if not found:
            return None, ends
        f = found[0]
        return (f.rule, f.message, next((s.loc for s in f.stmts if getattr(s, "loc", None)), None)), ends


def cluster_size(dims) -> int | None:
    return None if dims is None else math.prod(dims)
