"""Operand slots: what each operand of an instruction takes, how it is checked and how PTX writes it.

A `Slot(name, kind)` on an op declaration is one operand; its `kind` is one of the classes below. Types
may be given as a ScalarType, as the name of one of the op's qualifiers ("type") or as a function of the
op; state spaces the same way. Every check raises a DSLError that names the operand, the value and the
rule; the builder adds the user's line.

The type rules (the ones ptxas applies, made strict where ptxas would silently reinterpret bits):
an integer slot takes u/s/b registers of its width, never a float one; a float slot takes a register of
its own float type (or untyped .bN bits of its width), never an integer one; a .bN slot takes any
register of its width; a .pred slot only a predicate.
"""
from __future__ import annotations

import math

from ..errors import DSLError
from ..ir import SINK, Addr, Imm, Label, Param, PredNot, Reg, SharedAlloc, Sink, SpecialReg, TensorMapRef
from ..target import BASE, Req
from ..types import ScalarType, b64, pred, s32

REQUIRED = object()
SHARED_SPACES = frozenset({"shared", "shared::cta", "shared::cluster"})


class Slot:
    """One operand of a declaration: its name (the builder keyword), its kind, whether PTX may leave it
    out (`optional`), and the builder's default when the user gives nothing (`default`)."""

    def __init__(self, name: str, kind: "Kind", *, optional: bool = False, default=REQUIRED, inline: bool = False,
                 doc: str = ""):
        self.name = name
        self.kind = kind
        self.optional = optional
        self.default = default
        self.inline = inline        # written inside another operand (a tensor's coordinates), not on its own
        self.doc = doc

    @property
    def required(self) -> bool:
        return not self.optional and self.default is REQUIRED and not self.kind.out and not self.kind.fixed

    def __repr__(self) -> str:
        return f"Slot({self.name!r}, {self.kind!r})"


def _resolve(op, ref):
    """A type or space reference: a value, the name of one of the op's attributes, or a function of the op."""
    if callable(ref) and not isinstance(ref, ScalarType):
        return ref(op)
    if isinstance(ref, str) and ref.isidentifier() and hasattr(op, ref):
        return getattr(op, ref)
    return ref


def shape_of(v) -> str | None:
    """How a generated test names an operand value: None (absent), 'imm', 'reg', 'sink' or 'vec'."""
    if v is None:
        return None
    if isinstance(v, Sink):
        return "sink"
    if isinstance(v, (bool, int, float, Imm)):
        return "imm"
    if isinstance(v, (tuple, list)):
        return "vec"
    return "reg"


def describe(v) -> str:
    if isinstance(v, Reg):
        src = f", a {v.space} address" if v.space else ""
        return f"{v.name} (.{v.type.name}{src})"
    if isinstance(v, SharedAlloc):
        return f"shared buffer {v.name!r}"
    if isinstance(v, Param):
        return f"param {v.name!r}"
    if isinstance(v, SpecialReg):
        return f"{v.name} (.{v.type.name})"
    return repr(v)


class Kind:
    """What an operand slot takes. `bind` checks a user value and returns what the op stores; `text` is its
    PTX; `regs` the registers in it; `shapes` what generated tests draw for it."""

    shapes: tuple = ("reg",)
    out = False          # a destination
    fixed = False        # always the same text (no user value)

    def bind(self, op, what: str, v, alloc):
        return v

    def shape(self, v):
        return shape_of(v)

    def text(self, op, v) -> str:
        return str(v)

    def regs(self, v) -> list:
        return _regs(v)

    def requires(self, v) -> Req:
        return BASE

    def syntax(self, name: str) -> str:
        return name

    def __repr__(self) -> str:
        return type(self).__name__


def _regs(v, out=None) -> list:
    out = [] if out is None else out
    if isinstance(v, Reg):
        out.append(v)
    elif isinstance(v, PredNot):
        out.append(v.reg)
    elif isinstance(v, Addr):
        _regs(v.base, out)
    elif isinstance(v, TensorMapRef):
        out.append(v.addr)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _regs(x, out)
    return out


# ------------------------------------------------------------------------------------ registers


def check_value(what: str, v, t: ScalarType, *, imm: bool = True, sreg: bool = False, lo=None, hi=None):
    """A register whose type fits slot type t, or (with imm) a Python number turned into an Imm of type t
    (with sreg, also a special register: the operands that become a mov source)."""
    if isinstance(v, Imm):
        v = v.value
    if isinstance(v, bool):
        v = int(v)
    if hasattr(v, "dtype") and hasattr(v, "item") and getattr(v, "shape", None) == ():
        v = v.item()                       # a numpy scalar
    if isinstance(v, (int, float)):
        if not imm:
            raise DSLError(f"{what}={v!r}: expected a register, got an immediate")
        return _immediate(what, v, t, lo, hi)
    if isinstance(v, SpecialReg) and not sreg:
        raise DSLError(f"{what}={v.name}: a special register is only an operand of mov (ptxas: \"Special register "
                       f"argument not allowed\"); read it first: k.mov(sreg.{v.name[1:].replace('.', '_')})")
    if isinstance(v, PredNot):
        if t is not pred:
            raise DSLError(f"{what}=!{v.reg.name}: a negated predicate is only allowed where .pred is expected")
        return v
    if isinstance(v, (Reg, SpecialReg)):
        fits(what, v, t)
        return v
    raise DSLError(f"{what}={v!r}: expected a register or a number for .{t.name}")


def fits(what: str, v, t: ScalarType) -> None:
    """DSLError unless register v (of its logical type) may stand where PTX expects type t."""
    have = v.type
    if t is pred or have is pred:
        if have is not t:
            raise DSLError(f"{what}={describe(v)}: expected a .{t.name} operand")
        return
    if have.reg_bits != t.reg_bits and not (t.bits == 8 and have.reg_bits <= 32):
        raise DSLError(f"{what}={describe(v)}: expected a {t.bits}-bit operand for .{t.name}, "
                       f"got a {have.bits}-bit register")
    if t.kind == "b" or have.kind == "b":
        return
    if t.kind == "f" and have is not t:
        if have.kind == "f":
            raise DSLError(f"{what}={describe(v)}: expected .{t.name}, got .{have.name} (another float format); "
                           f"convert it with k.cvt({t.name!r}, ...)")
        raise DSLError(f"{what}={describe(v)}: expected a float (.{t.name}), got an integer (.{have.name}); convert "
                       f"it with k.cvt({t.name!r}, ...) or reinterpret its bits with k.mov(x, type='b{t.bits}')")
    if t.kind in "us" and have.kind == "f":
        raise DSLError(f"{what}={describe(v)}: expected an integer (.{t.name}), got a float (.{have.name}); convert "
                       f"it with k.cvt({t.name!r}, ...) or reinterpret its bits with k.mov(x, type='b{t.bits}')")


def _immediate(what, v, t: ScalarType, lo, hi) -> Imm:
    if t is pred:
        if v not in (0, 1):
            raise DSLError(f"{what}={v!r}: a .pred immediate is 0 or 1")
        return Imm(int(v), t)
    if t.kind == "f" and t.bits == 16:
        raise DSLError(f"{what}={v!r}: PTX has no .{t.name} literal; put the value in a register first with "
                       f"k.mov({v!r}, type={t.name!r})")
    if t.kind == "f":
        if isinstance(v, float) and math.isfinite(v) and t.bits == 32 and abs(v) > 3.4028234663852886e38:
            raise DSLError(f"{what}={v!r} does not fit in .f32 (largest finite value 3.4028235e38)")
        if isinstance(v, int) and abs(v) > 2 ** 1023:
            raise DSLError(f"{what}={v!r} does not fit in .{t.name}")
        v = float(v)
    else:
        if not isinstance(v, int):
            raise DSLError(f"{what}={v!r}: expected an integer for .{t.name}")
        if not -(1 << (t.bits - 1)) <= v < (1 << t.bits):
            raise DSLError(f"{what}={v!r} does not fit in .{t.name}")
    if lo is not None and v < lo or hi is not None and v > hi:
        raise DSLError(f"{what}={v!r} is out of range; expected {lo}..{hi}")
    return Imm(v, t)


class Value(Kind):
    """A value of type `type`: a register that fits it, or (imm=True) a number; lo/hi bound immediates and
    `step` asks them for multiples (`rule` says why); sreg=True also takes a special register (mov's source)."""

    def __init__(self, type, *, imm: bool = True, reg: bool = True, sreg: bool = False, lo=None, hi=None,
                 step: int = 1, rule: str = "", hex: int = 0):
        self.type = type
        self.hex = hex                # write a constant in hexadecimal with this many digits (masks)
        self.imm = imm
        self.reg = reg
        self.sreg = sreg
        self.lo, self.hi, self.step, self.rule = lo, hi, step, rule
        self.shapes = tuple(s for s, ok in (("imm", imm), ("reg", reg)) if ok)

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        t = _resolve(op, self.type)
        if not self.reg and isinstance(v, (Reg, SpecialReg, PredNot)):
            raise DSLError(f"{what}={describe(v)}: expected a constant (PTX takes only an immediate here)")
        try:
            v = check_value(what, v, t, imm=self.imm, sreg=self.sreg, lo=self.lo, hi=self.hi)
        except DSLError as e:
            if self.rule and "out of range" in e.message:
                raise DSLError(f"{e.message}: {self.rule}") from None
            raise
        if self.step > 1 and isinstance(v, Imm) and int(v.value) % self.step:
            raise DSLError(f"{what}={v.value:#x} is not a multiple of {self.step}" + (f": {self.rule}" if self.rule
                                                                                       else ""))
        return v

    def requires(self, v) -> Req:
        return Req(v.req_ptx) if isinstance(v, SpecialReg) else BASE

    def text(self, op, v) -> str:
        return _hex(v, self.hex)


def _hex(v, digits: int) -> str:
    if digits and isinstance(v, Imm) and isinstance(v.value, int) and v.value >= 0:
        return f"0x{v.value:0{digits}X}"
    return str(v)

    def __repr__(self) -> str:
        return f"Value({getattr(self.type, 'name', self.type)})"


class Const(Kind):
    """An integer constant in [lo, hi] (operands PTX requires to be immediates). `step` asks for multiples.
    Its shape (what conditions and generated tests name) is the value itself."""

    def __init__(self, lo: int, hi: int, *, step: int = 1):
        self.lo, self.hi, self.step = lo, hi, step
        self.shapes = tuple(range(lo, hi + 1, step)) if (hi - lo) // step < 256 else (lo, hi)

    def shape(self, v):
        if isinstance(v, Imm):
            v = v.value
        return v if isinstance(v, int) and not isinstance(v, bool) else shape_of(v)

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        if isinstance(v, Imm):
            v = v.value
        if hasattr(v, "dtype") and hasattr(v, "item") and getattr(v, "shape", None) == ():
            v = v.item()
        if not isinstance(v, int) or isinstance(v, bool):
            raise DSLError(f"{what}={describe(v) if isinstance(v, Reg) else repr(v)}: expected an integer constant "
                           f"(PTX takes only an immediate here)")
        if not self.lo <= v <= self.hi:
            raise DSLError(f"{what}={v} is out of range; expected {self.lo}..{self.hi}")
        if v % self.step:
            raise DSLError(f"{what}={v}: expected a multiple of {self.step}")
        return v


class Dst(Kind):
    """A destination register of type `type` (allocated by the builder when not given). `sink=True`: the
    sink `_` is allowed, and the register is made only when asked (True) or given. `space` is the state
    space an address written here points to."""

    out = True

    def __init__(self, type, *, sink: bool = False, space=None):
        self.type = type
        self.sink = sink
        self.space = space
        self.shapes = ("sink", "reg") if sink else ("reg",)

    def shape(self, v):
        if v is None or v is False:
            return "sink" if self.sink else "reg"
        return "sink" if isinstance(v, Sink) else "reg"

    def bind(self, op, what, v, alloc):
        t = _resolve(op, self.type)
        if v is None or v is False or isinstance(v, Sink):
            if self.sink:
                return SINK
            if isinstance(v, Sink):
                raise DSLError(f"{what}: expected a destination register, got the sink '_'")
            v = True
        if v is True:
            if alloc is None:
                raise DSLError(f"{what}: expected a destination register")
            return alloc(t, _resolve(op, self.space))
        if not isinstance(v, Reg):
            raise DSLError(f"{what}={v!r}: expected a destination register")
        if (t is pred) != (v.type is pred) or (t is not pred and v.type.reg_bits != t.reg_bits):
            raise DSLError(f"{what}={describe(v)}: expected a .{t.name} destination")
        fits(what, v, t)
        return v

    def regs(self, v):
        return [v] if isinstance(v, Reg) else []

    def __repr__(self) -> str:
        return f"Dst({getattr(self.type, 'name', self.type)})"


class Dsts(Kind):
    """A vector of destinations ({d0, d1, ...}); its length is the op's `count` attribute. `braces`: written
    {d0} even for one register (ldmatrix)."""

    out = True
    shapes = ("reg",)

    def __init__(self, type, count: str, *, braces: bool = False):
        self.type = type
        self.count = count
        self.braces = braces

    def bind(self, op, what, v, alloc):
        t = _resolve(op, self.type)
        n = _resolve(op, self.count)
        if v is None or v is True:
            if alloc is None:
                raise DSLError(f"{what}: expected destination registers")
            return tuple(alloc(t, None) for _ in range(n))
        regs = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if len(regs) != n:
            raise DSLError(f"{what}: {self.count}={n} takes {n} destination registers, got {len(regs)}")
        return tuple(Dst(t).bind(op, f"{what}[{i}]", r, alloc) for i, r in enumerate(regs))

    def text(self, op, v) -> str:
        return str(v[0]) if len(v) == 1 and not self.braces else "{" + ", ".join(map(str, v)) + "}"


class Vector(Kind):
    """A value or a vector {a, b, ...} of values of type `type`, of one of the lengths `lengths`. Its shape
    (what conditions and generated tests name) is the length."""

    def __init__(self, type, lengths=(1, 2, 4), *, imm: bool = True, max_bits=None, braces: bool = False,
                 hex: int = 0):
        self.type = type
        self.hex = hex
        self.lengths = tuple(lengths)
        self.imm = imm
        self.max_bits = max_bits
        self.braces = braces          # written {a} even for one value
        self.shapes = self.lengths

    def shape(self, v):
        if v is None:
            return None
        return len(v) if isinstance(v, (tuple, list)) else 1

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        t = _resolve(op, self.type)
        values = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if len(values) not in self.lengths:
            raise DSLError(f"{what}: a vector of {len(values)} values; expected {' or '.join(map(str, self.lengths))}")
        if self.max_bits and len(values) * t.bits > self.max_bits:
            raise DSLError(f"{what}: .v{len(values)}.{t.name} is {len(values) * t.bits} bits; a vector is at most "
                           f"{self.max_bits} bits")
        return tuple(check_value(f"{what}[{i}]" if len(values) > 1 else what, x, t, imm=self.imm)
                     for i, x in enumerate(values))

    def text(self, op, v) -> str:
        items = [_hex(x, self.hex) for x in v]
        return items[0] if len(items) == 1 and not self.braces else "{" + ", ".join(items) + "}"


class Address(Kind):
    """A memory operand [a] in state space `space` ('' or None: a generic address): a shared buffer (or
    Addr into one), a register holding an address, or a parameter (param space). `align` asks for that
    alignment where it is known; `width` (bits, or an attribute or function of the op) for a register of that
    width; `bracket=False` writes it without brackets (mapa, getctarank)."""

    shapes = ("reg",)

    def __init__(self, space, *, align: int = 0, bracket: bool = True, width=None):
        self.space = space
        self.align = align
        self.bracket = bracket
        self.width = width

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        space = _resolve(op, self.space) or ""
        if not self.bracket and not space and isinstance(getattr(v, "base", v), SharedAlloc):
            raise DSLError(f"{what}: the generic form takes a 64-bit generic address register, got {describe(v)}")
        width = _resolve(op, self.width)
        base = v.base if isinstance(v, Addr) else v
        if width is not None:
            have = base.type.bits if isinstance(base, Reg) else 32 if isinstance(base, SharedAlloc) else None
            if have is not None and have != width:
                raise DSLError(f"{what}={describe(base)} is a {have}-bit address; this instruction (.u{width}) takes "
                               f"a {width}-bit one")
        a = memory(what, v, space)
        if self.align and isinstance(a.base, SharedAlloc) and (a.base.align < self.align or a.offset % self.align):
            raise DSLError(f"{what}: {describe(a.base)} at offset {a.offset} (align {a.base.align}) is not "
                           f"{self.align}-byte aligned")
        if not self.bracket and isinstance(v, Reg):
            return v
        return a

    def text(self, op, v) -> str:
        if self.bracket:
            return str(v)
        return str(v)[1:-1] if isinstance(v, Addr) else str(v)

    def syntax(self, name: str) -> str:
        return f"[{name}]" if self.bracket else name


def memory(what: str, v, space: str) -> Addr:
    """A memory operand in `space` ('global', 'shared::cta', 'shared::cluster', 'param', generic '')."""
    if isinstance(v, Addr):
        base = v.base
    else:
        base = v
        v = Addr(v, 0)
    if isinstance(base, SharedAlloc):
        if space not in SHARED_SPACES and space != "":
            raise DSLError(f"{what}: {describe(base)} is in shared memory, but this operand must be a "
                           f"{space or 'generic'} address")
        return v
    if isinstance(base, Param):
        if space != "param":
            raise DSLError(f"{what}: {describe(base)} is a kernel parameter; this operand must be a "
                           f"{space or 'generic'} address")
        return v
    if isinstance(base, Reg):
        if base.type is pred or base.type.reg_bits not in (32, 64) or base.type.kind == "f":
            raise DSLError(f"{what}={describe(base)}: an address is a 32- or 64-bit integer register (.u32, .u64), "
                           f"not .{base.type.name}")
        if space in ("global", "") and base.type.reg_bits != 64:
            raise DSLError(f"{what}={describe(base)}: a {space or 'generic'} address must be 64-bit")
        if base.space is not None and not _space_ok(base.space, space):
            raise DSLError(f"{what}={describe(base)}: expected a {space or 'generic'} address, "
                           f"got a {base.space} address")
        return v
    raise DSLError(f"{what}={describe(v.base) if isinstance(v, Addr) else repr(v)}: expected an address (shared "
                   f"buffer, register or Addr)")


def _space_ok(have: str, want: str) -> bool:
    if have == want:
        return True
    shared = {"shared", "shared::cta"}
    return have in shared and want in shared | {"shared::cluster"}   # a CTA address is a cluster one too


class TensorMap(Kind):
    """The generic address of a 128-byte tensor map: a tensor-map parameter, a TensorMapRef or a 64-bit
    register (a state-space register must be converted to generic with cvta first). With `coords` (the
    name of the op's coordinate slot) it is the tensor operand PTX writes [tmap, {c0, c1, ...}]."""

    def __init__(self, coords: str | None = None):
        self.coords = coords

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        reg = v.addr if isinstance(v, TensorMapRef) else v
        if isinstance(reg, Reg) and reg.space is not None:
            raise DSLError(f"{what}={describe(reg)}: a tensor map operand is a generic address; convert a "
                           f"{reg.space} address with k.cvta(reg, {reg.space!r})")
        if isinstance(v, Param):
            if v.kind != "tensormap":
                raise DSLError(f"{what}: {describe(v)} is a {v.kind} parameter, not a tensor map")
            return TensorMapRef(v.value, v)
        if isinstance(v, TensorMapRef):
            return v
        if isinstance(v, Reg) and v.type.reg_bits == 64 and v.type.kind != "f":
            return TensorMapRef(v)
        raise DSLError(f"{what}={describe(v)}: expected a tensor-map parameter or the 64-bit generic address of "
                       f"a tensor map")

    def regs(self, v):
        return [v.addr] if isinstance(v, TensorMapRef) else []

    def text(self, op, v) -> str:
        if self.coords is None:
            return str(v)
        return f"[{v}, {{{', '.join(map(str, getattr(op, self.coords)))}}}]"

    def syntax(self, name: str) -> str:
        return f"[{name}, {{{self.coords}}}]" if self.coords else name


class Coords(Kind):
    """Tensor coordinates, innermost first: .s32 values (registers or constants), `lengths` of them. Its
    shape (what conditions and generated tests name) is the number of coordinates."""

    def __init__(self, lengths=(1, 2, 3, 4, 5)):
        self.lengths = tuple(lengths)
        self.shapes = self.lengths

    def shape(self, v):
        return len(v) if isinstance(v, (tuple, list)) else None

    def bind(self, op, what, v, alloc):
        if v is None:
            raise DSLError(f"{what}: the coordinates are missing")
        coords = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if len(coords) not in self.lengths:
            raise DSLError(f"{what}: expected {self.lengths[0]}..{self.lengths[-1]} coordinates (innermost first), "
                           f"got {len(coords)}")
        return tuple(check_value(f"{what}[{i}]", c, s32) for i, c in enumerate(coords))

    def text(self, op, v) -> str:
        return "{" + ", ".join(map(str, v)) + "}"

    def syntax(self, name: str) -> str:
        return "{" + name + "}"


class Literal(Kind):
    """A constant operand PTX requires (`128` after a tensor map's address)."""

    fixed = True
    shapes = ()

    def __init__(self, text: str):
        self.literal = text

    def bind(self, op, what, v, alloc):
        return self.literal

    def text(self, op, v) -> str:
        return self.literal

    def regs(self, v):
        return []

    def syntax(self, name: str) -> str:
        return self.literal


class LabelRef(Kind):
    """A branch target: a Label."""

    shapes = ("label",)

    def bind(self, op, what, v, alloc):
        if not isinstance(v, Label):
            raise DSLError(f"{what}={v!r}: expected a Label from k.label()")
        return v


class PairedDst(Dst):
    """A destination PTX writes joined to another one, d|p (elect.sync, shfl.sync): this slot's register,
    `|`, then the `other` slot's (which is inline)."""

    def __init__(self, type, other: str, *, sink: bool = False):
        super().__init__(type, sink=sink)
        self.other = other

    def text(self, op, v) -> str:
        other = getattr(op, self.other)
        return f"{v}|{other}" if other is not None and not isinstance(other, Sink) else str(v)

    def syntax(self, name: str) -> str:
        return f"{name}|{self.other}"


class OneOf(Const):
    """An integer constant from a short list (`values`, e.g. 1 or -1), for operands PTX takes only as an immediate
    and only in some forms: `when(op)` says whether this form writes it. Where it does not, the `neutral` value
    (the builder's default) is left out; another value stays, for the declaration's exclusions to name."""

    def __init__(self, *values: int, neutral: int, when=None, rule: str = ""):
        self.values = tuple(values)
        self.lo, self.hi, self.step = min(values), max(values), 1
        self.shapes = self.values
        self.neutral = neutral
        self.when = when
        self.rule = rule

    def bind(self, op, what, v, alloc):
        if v is None:
            v = self.neutral
        if isinstance(v, Imm):
            v = v.value
        if not isinstance(v, int) or isinstance(v, bool) or v not in self.values:
            shown = describe(v) if isinstance(v, Reg) else repr(v)
            raise DSLError(f"{what}={shown}: expected the constant {' or '.join(map(str, self.values))}"
                           + (f" ({self.rule})" if self.rule else ""))
        if self.when is not None and not self.when(op) and v == self.neutral:
            return None
        return v

    def text(self, op, v) -> str:
        return str(v)


class Descriptor(Kind):
    """A 64-bit operand that describes a matrix in shared memory (wgmma's matrix descriptor): a .b64/.u64 register,
    a 64-bit integer constant, or a descriptor value (any object with a `.reg` register, kept as given so that the
    checks after construction see its buffer and layout; PTX gets its `.reg`)."""

    shapes = ("reg", "imm")

    def shape(self, v):
        if v is None:
            return None
        return "imm" if isinstance(v, (int, Imm)) and not isinstance(v, bool) else "reg"

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        if isinstance(v, Imm):
            v = v.value
        if isinstance(v, int) and not isinstance(v, bool):
            if not 0 <= v < 1 << 64:
                raise DSLError(f"{what}={v:#x}: a matrix descriptor constant is a 64-bit unsigned value")
            return Imm(v, b64)
        reg = getattr(v, "reg", v)
        if not isinstance(reg, Reg) or reg.type is pred or reg.type.reg_bits != 64 or reg.type.kind not in "bu":
            shown = describe(reg) if isinstance(reg, (Reg, SharedAlloc)) else repr(v)
            raise DSLError(f"{what}={shown}: expected a matrix descriptor: a .b64/.u64 register, a 64-bit constant "
                           f"or a descriptor value with a .reg (ptxas takes no other register and no shared-memory "
                           f"symbol here)")
        return v

    def text(self, op, v) -> str:
        if isinstance(v, Imm):
            return f"0x{int(v.value):016X}"
        return str(getattr(v, "reg", v))

    def regs(self, v) -> list:
        reg = getattr(v, "reg", v)
        return [reg] if isinstance(reg, Reg) else []


def reg_list(v) -> tuple:
    """The registers of a register-list operand: a tuple/list of registers or an object with `.regs`."""
    regs = getattr(v, "regs", v)
    return tuple(regs) if isinstance(regs, (tuple, list)) else (regs,)


class Registers(Kind):
    """A brace list of `count` distinct registers (an accumulator fragment, read and written in place). The value is a
    tuple/list of registers or any object with a `.regs` attribute (a fragment), kept as given. `types(op)` gives the
    register types the form accepts (the first is the one a test makes)."""

    shapes = ("vec",)

    def __init__(self, count, types, *, rule: str = ""):
        self.count = count
        self.types = types
        self.rule = rule

    def shape(self, v):
        return None if v is None else "vec"

    def bind(self, op, what, v, alloc):
        if v is None:
            raise DSLError(f"{what}: the registers are missing")
        if not isinstance(v, (tuple, list)) and not hasattr(v, "regs"):
            raise DSLError(f"{what}={describe(v)}: expected a tuple of registers or a fragment (an object with .regs)")
        regs = reg_list(v)
        n = _resolve(op, self.count)
        if len(regs) != n:
            raise DSLError(f"{what}: {len(regs)} registers; this form takes exactly {n}"
                           + (f" ({self.rule})" if self.rule else ""))
        allowed = _resolve(op, self.types)
        seen = {}
        for i, r in enumerate(regs):
            if not isinstance(r, Reg) or r.type not in allowed:
                shown = describe(r) if isinstance(r, (Reg, SpecialReg)) else repr(r)
                raise DSLError(f"{what}[{i}]={shown}: expected a register of type "
                               f"{' or '.join('.' + t.name for t in allowed)}")
            if r.name in seen:
                raise DSLError(f"{what}[{i}]={r.name} is also {what.split()[-1]}[{seen[r.name]}]: the registers "
                               f"must be distinct")
            seen[r.name] = i
        return v if not isinstance(v, list) else tuple(v)

    def text(self, op, v) -> str:
        return "{" + ", ".join(str(r) for r in reg_list(v)) + "}"

    def regs(self, v) -> list:
        return list(reg_list(v)) if v is not None else []

    def syntax(self, name: str) -> str:
        return "{" + name + "}"


class DescriptorOrRegisters(Kind):
    """A matrix operand that comes either from shared memory through a matrix descriptor (see Descriptor; shape
    'desc') or from `count` registers of the types `types(op)` (shape 'regs')."""

    shapes = ("desc", "regs")

    def __init__(self, count: int, types):
        self.desc = Descriptor()
        self.count = count
        self.types = types

    def shape(self, v):
        if v is None:
            return None
        return "regs" if isinstance(v, (tuple, list)) or hasattr(v, "regs") and not hasattr(v, "reg") else "desc"

    def bind(self, op, what, v, alloc):
        if v is None:
            return None
        if self.shape(v) == "desc":
            return self.desc.bind(op, what, v, alloc)
        return Registers(self.count, self.types).bind(op, what, v, alloc)

    def text(self, op, v) -> str:
        if self.shape(v) == "desc":
            return self.desc.text(op, v)
        return "{" + ", ".join(str(r) for r in reg_list(v)) + "}"

    def regs(self, v) -> list:
        if v is None:
            return []
        return self.desc.regs(v) if self.shape(v) == "desc" else list(reg_list(v))


__all__ = ["Address", "Const", "Coords", "Descriptor", "DescriptorOrRegisters", "Dst", "Dsts", "Kind", "LabelRef",
           "Literal", "OneOf", "PairedDst", "Registers", "Slot", "TensorMap", "Value", "Vector", "check_value",
           "describe", "fits", "memory", "reg_list", "shape_of"]
