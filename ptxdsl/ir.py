"""The in-memory kernel: values, statements, kernels and modules. Plain data, no text.

Both front ends (the Python builder and the .ptxd language) produce these objects; the verifier
reads them and the emitter prints them. Control flow stays structured (If, Loop, WaitLoop) so that
whole-kernel checks can see which code is warp-uniform; the emitter lowers it to labels and bra.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import DSLError, SourceLoc
from .types import REG_CLASSES, ScalarType, pred, u32

# ---------------------------------------------------------------------------------------- values

@dataclass(eq=False)
class Reg:
    """A typed virtual register (%r7). Its PTX class follows its type, as nvcc names them: %p (.pred),
    %rs (16-bit), %r (32-bit integers), %rd (64-bit integers), %f (.f32), %fd (.f64)."""

    type: ScalarType
    index: int
    space: str | None = None    # the state space an address in it points to, when known

    @property
    def name(self) -> str:
        return f"%{self.type.reg_class}{self.index}"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Reg({self.name}: {self.type.name})"

    def __invert__(self) -> "PredNot":
        if self.type is not pred:
            raise DSLError(f"~{self.name}: only a .pred register can be negated (it is .{self.type.name})")
        return PredNot(self)

    __hash__ = object.__hash__      # identity, in C


@dataclass(frozen=True, eq=False)
class PredNot:
    """A negated predicate, as in `@!%p1` or `setp ... !%p`."""

    reg: Reg

    def __str__(self) -> str:
        return f"!{self.reg.name}"

    def __invert__(self) -> Reg:
        return self.reg


@dataclass(frozen=True)
class Imm:
    """An immediate of a given type."""

    value: int | float
    type: ScalarType

    def __str__(self) -> str:
        t = self.type
        if t.kind == "f":
            if t.bits == 32:
                return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(self.value)))[0]
            if t.bits == 64:
                return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(self.value)))[0]
            raise DSLError(f"immediate {self.value!r} of type .{t.name}: PTX has no such literal; use mov.b16 bits")
        if t.bits == 16 and t.kind == "b":
            return "0x%04X" % (int(self.value) & 0xFFFF)
        return str(int(self.value))


@dataclass(frozen=True)
class SpecialReg:
    """A PTX special register such as %tid.x or %cluster_ctarank."""

    name: str
    type: ScalarType = u32
    req_ptx: tuple[int, int] = (7, 8)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Sink:
    """The `_` destination."""

    def __str__(self) -> str:
        return "_"


SINK = Sink()


@dataclass(frozen=True)
class Label:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class SharedAlloc:
    """A named shared-memory buffer. Static ones are `.shared` declarations; dynamic ones live at a
    fixed offset inside the kernel's `.extern .shared` window."""

    name: str
    nbytes: int
    align: int
    dynamic: bool = False
    offset: int = 0
    role: str = "buffer"        # "buffer" | "mbarrier" | "tensormap"
    base: str = ""              # the extern symbol for dynamic ones
    loc: SourceLoc | None = None

    @property
    def symbol(self) -> str:
        if self.dynamic:
            return f"{self.base}+{self.offset}" if self.offset else self.base
        return self.name

    def __str__(self) -> str:
        return self.symbol

    def at(self, offset: int) -> "Addr":
        """The address `offset` bytes into this buffer."""
        if not 0 <= offset < self.nbytes:
            raise DSLError(f"{self.name}.at({offset}): offset outside the {self.nbytes}-byte buffer")
        return Addr(self, offset)

    __hash__ = object.__hash__      # identity, in C


@dataclass(eq=False)
class Param:
    """A kernel parameter. kind: 'scalar' | 'ptr' | 'tensormap'. `value` is the register the
    prologue loads it into (the generic address for a tensor map)."""

    name: str
    kind: str
    type: ScalarType
    value: Reg | None = None
    loc: SourceLoc | None = None

    @property
    def align(self) -> int:
        return 64 if self.kind == "tensormap" else self.type.nbytes

    def __str__(self) -> str:
        return self.name

    __hash__ = object.__hash__      # identity, in C


@dataclass(frozen=True, eq=False)
class Addr:
    """A memory operand [base+offset]; base is a register or a symbol."""

    base: object
    offset: int = 0

    def __str__(self) -> str:
        b = str(self.base)
        if not self.offset:
            return f"[{b}]"
        if isinstance(self.base, SharedAlloc) and self.base.dynamic:
            return f"[{self.base.base}+{self.base.offset + self.offset}]"
        return f"[{b}+{self.offset}]"       # ptxas spells a negative offset [%rd2+-16], not [%rd2-16]


@dataclass(frozen=True, eq=False)
class TensorMapRef:
    """A tensor map operand: the generic address of a 128-byte CUtensorMap in a .b64 register,
    either a tensor-map parameter's or one in global memory (edited with tensormap.replace)."""

    addr: Reg
    param: Param | None = None

    def __str__(self) -> str:
        return self.addr.name


def operand_type(v) -> ScalarType | None:
    if isinstance(v, (Reg, Imm, SpecialReg)):
        return v.type
    if isinstance(v, PredNot):
        return pred
    return None


# ------------------------------------------------------------------------------------ statements


@dataclass(eq=False)
class Instr:
    """One instruction: an op (data with its own emit()), an optional guard predicate, its origin."""

    op: object
    guard: Reg | PredNot | None = None
    loc: SourceLoc | None = None
    allow: frozenset = frozenset()  # verifier rules silenced here (KernelBuilder.allow)


@dataclass(eq=False)
class LabelStmt:
    label: Label
    loc: SourceLoc | None = None


@dataclass(eq=False)
class If:
    """`if cond: then else: orelse`, lowered to a predicated branch."""

    cond: Reg | PredNot
    then: list = field(default_factory=list)
    orelse: list | None = None
    loc: SourceLoc | None = None
    kind: str = "if"            # "if" | "elect" (the condition came from elect.sync)


@dataclass(eq=False)
class Loop:
    """`for var in range(start, stop, step)` over a register; `cond` is the exit-test predicate."""

    var: Reg
    start: object
    stop: object
    step: int
    cond: Reg
    body: list = field(default_factory=list)
    loc: SourceLoc | None = None


@dataclass(eq=False)
class WaitLoop:
    """Spin on an mbarrier test/try_wait until it reports completion. In debug mode the emitter
    bounds the spin and reports the barrier, parity and source line before trapping."""

    op: object                  # an MbarrierTryWait / MbarrierTestWait whose dst is `done`
    loc: SourceLoc | None = None
    debug_regs: tuple = ()      # (start .u64, elapsed .u64, in-time pred) allocated when the kernel is in debug mode
    site: int = 0               # index of this wait in the kernel (debug reports)
    allow: frozenset = frozenset()  # verifier rules silenced here (KernelBuilder.allow)


# --------------------------------------------------------------------------------------- kernels

MAX_SHARED_PER_BLOCK = 232448   # sm_90 opt-in limit: 227 KiB
MAX_STATIC_SHARED = 48 * 1024   # static .shared over this is rejected by ptxas on sm_90/sm_100


@dataclass(eq=False)
class Kernel:
    """One `.entry`: signature, directives, shared memory, registers and a structured body."""

    name: str
    params: list = field(default_factory=list)
    shared: list = field(default_factory=list)
    body: list = field(default_factory=list)
    directives: dict = field(default_factory=dict)   # reqntid, maxntid, minnctapersm, maxnreg, ...
    reg_counts: dict = field(default_factory=lambda: dict.fromkeys(REG_CLASSES, 0))
    arch: str | None = None
    ptx: object = None
    debug: bool | float = False     # True, or the seconds a debug-mode wait spins before it traps
    loc: SourceLoc | None = None
    wait_sites: list = field(default_factory=list)    # WaitLoop objects in build order (debug reports)
    strict: bool = False            # assembling refuses ptxas's notes on a serialised wgmma pipeline (ptxas_notes)

    def new_reg(self, t: ScalarType, space: str | None = None) -> Reg:
        cls = t.reg_class
        self.reg_counts[cls] += 1
        return Reg(t, self.reg_counts[cls], space)

    @property
    def dynamic_base(self) -> str:
        return f"{self.name}_dsmem"

    @property
    def dynamic_shared_bytes(self) -> int:
        ends = [a.offset + a.nbytes for a in self.shared if a.dynamic]
        return max(ends, default=0)

    @property
    def static_shared_bytes(self) -> int:
        end = 0
        for a in self.shared:
            if not a.dynamic:
                end = -(-end // a.align) * a.align + a.nbytes
        return end

    @property
    def dynamic_align(self) -> int:
        return max([a.align for a in self.shared if a.dynamic], default=16)

    @property
    def cluster_dims(self) -> tuple | None:
        d = self.directives.get("reqnctapercluster")
        return tuple(d) if d else None

    def walk(self):
        """Every Instr of the kernel in program order (descending into structured statements)."""
        yield from walk(self.body)


class Walker:
    """The one walk over a body of statements. `block(stmts, *args)` visits each statement: `visit` calls the
    method named after its kind (instr, label, if_, loop, wait) with the statement and *args. By default a
    branch or loop walks its bodies and everything else does nothing; the emitter, the printer, the
    verifier's flow and the ring run override the kinds they care about (and `block`, where they thread state
    through the statements or stop early)."""

    def block(self, stmts, *args):
        for s in stmts:
            self.visit(s, *args)

    def visit(self, s, *args):
        return getattr(self, _KIND[type(s)])(s, *args)

    def instr(self, s, *args):
        return None

    def label(self, s, *args):
        return None

    def if_(self, s, *args):
        self.block(s.then, *args)
        self.block(s.orelse or [], *args)

    def loop(self, s, *args):
        self.block(s.body, *args)

    def wait(self, s, *args):
        return None


def statements(stmts, kinds):
    """The statements of `kinds` (Instr, LabelStmt, WaitLoop) in a body, in program order, from inside every
    If and Loop too."""
    for s in stmts:
        if isinstance(s, kinds):
            yield s
        elif isinstance(s, If):
            yield from statements(s.then, kinds)
            yield from statements(s.orelse or (), kinds)
        elif isinstance(s, Loop):
            yield from statements(s.body, kinds)


def walk(stmts):
    """Every instruction of a body in program order, a WaitLoop as an Instr of its op."""
    for s in statements(stmts, (Instr, WaitLoop)):
        yield s if isinstance(s, Instr) else Instr(s.op, None, s.loc)


_KIND = {Instr: "instr", LabelStmt: "label", If: "if_", Loop: "loop", WaitLoop: "wait"}


@dataclass(eq=False)
class Module:
    """A PTX module: one or more kernels sharing a .target/.version."""

    kernels: list = field(default_factory=list)
    arch: str | None = None
    ptx: object = None

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0

