"""The .ptxd syntax tree: plain dataclasses, each carrying the SourceLoc (file:line:col) it was parsed from."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SourceLoc

# ------------------------------------------------------------------------------------ expressions


@dataclass
class Num:
    """A numeric literal; `text` is its spelling (a .version directive reads it as text)."""

    value: int | float
    text: str
    loc: SourceLoc


@dataclass
class Name:
    id: str
    loc: SourceLoc


@dataclass
class SReg:
    """A special register such as %tid.x."""

    name: str
    loc: SourceLoc


@dataclass
class Unary:
    op: str             # "-" | "~" | "!"
    operand: object
    loc: SourceLoc


@dataclass
class Binary:
    op: str             # "+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">="
    left: object
    right: object
    loc: SourceLoc


@dataclass
class Ternary:
    cond: object
    then: object
    orelse: object
    loc: SourceLoc


@dataclass
class Call:
    """`name(operands)`: a cast (`u64(x)`) or an instruction without qualifiers (`min(a, b)`)."""

    func: str
    args: list
    loc: SourceLoc


# -------------------------------------------------------------------------------------- operands


@dataclass
class Mem:
    """`[addr]`, `[addr + 16]`, or the tensor operand `[tmap, {c0, c1}]` (coords set)."""

    addr: object
    coords: Vector | None
    loc: SourceLoc


@dataclass
class Vector:
    items: list
    loc: SourceLoc


@dataclass
class KwArg:
    name: str
    value: object
    loc: SourceLoc


@dataclass
class Sink:
    loc: SourceLoc


# ------------------------------------------------------------------------------------ statements


@dataclass
class Instr:
    """`mnemonic.quals operands`; mnemonic is the dotted spelling as written."""

    mnemonic: str
    operands: list
    loc: SourceLoc


@dataclass
class Assign:
    """`a, b = value` where value is an expression or an Instr."""

    targets: list
    value: object
    loc: SourceLoc


@dataclass
class Label:
    name: str
    loc: SourceLoc


@dataclass
class SharedDecl:
    """`shared name: type[count] align A dynamic`."""

    name: str
    type: str
    count: object
    align: object | None
    dynamic: bool
    loc: SourceLoc


@dataclass
class MbarrierDecl:
    """`mbarrier name[n] dynamic`."""

    name: str
    count: object | None
    dynamic: bool
    loc: SourceLoc


@dataclass
class RegDecl:
    """`reg type a, b = init`."""

    type: str
    names: list
    init: object | None
    loc: SourceLoc


@dataclass
class ConstDef:
    name: str
    value: object
    loc: SourceLoc


@dataclass
class If:
    cond: object
    then: list
    orelse: list | None
    loc: SourceLoc


@dataclass
class For:
    """`for type var in start..stop step s { body }`."""

    type: str | None
    var: str
    start: object
    stop: object
    step: object | None
    body: list
    loc: SourceLoc


@dataclass
class Elect:
    """`elect_one mask { body } else { orelse }`."""

    mask: object | None
    body: list
    orelse: list | None
    loc: SourceLoc


@dataclass
class Wait:
    """`wait.quals bar parity|state value hint h`: spin until the barrier phase completes."""

    mnemonic: str
    bar: object
    on: str             # "parity" | "state"
    value: object
    hint: object | None
    loc: SourceLoc


@dataclass
class Allow:
    """`allow rule, rule { body }`: the verifier drops those rules' findings inside the block."""

    rules: list
    body: list
    loc: SourceLoc


@dataclass
class Guarded:
    """`@p stmt` / `@!p stmt`."""

    pred: str
    negated: bool
    stmt: object
    loc: SourceLoc


# --------------------------------------------------------------------------------------- kernels


@dataclass
class TmapSpec:
    """`dtype[dims] option value ...` of a tensor-map parameter (numpy order, outermost first)."""

    dtype: str
    dims: list
    options: list       # (name, value, loc); value: a list of expressions or a word
    loc: SourceLoc


@dataclass
class Param:
    """`ptr out`, `u32 pitch`, `tensormap src: bf16[256, 512] box [64, 64]`."""

    kind: str
    name: str
    spec: TmapSpec | None
    loc: SourceLoc


@dataclass
class Directive:
    """`.reqntid 128`, `.target sm_90a`, `.version 8.0`, `.debug`."""

    name: str
    args: list
    loc: SourceLoc


@dataclass
class Kernel:
    name: str
    params: list
    directives: list
    body: list
    loc: SourceLoc


@dataclass
class Module:
    items: list = field(default_factory=list)     # ConstDef and Kernel, in file order
    file: str = "<string>"
