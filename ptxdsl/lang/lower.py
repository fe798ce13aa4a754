"""AST -> KernelBuilder calls. The text front end never prints PTX: every statement becomes builder
calls made under `builder.at(SourceLoc(file, line, col))`, so ops and errors carry the .ptxd line.

Names are kernel-wide (like Python locals): `x = a + b` makes a new register the first time and writes
into the same register afterwards. Operators compute (`x * 64 + tid` is mad.lo; a special register or a
shared buffer in arithmetic is first read with mov); instruction operands and loop bounds are passed
to the builder as written. Constant subexpressions are folded.
"""
from __future__ import annotations

import copy
import operator
from collections import ChainMap
from contextlib import ExitStack
from dataclasses import replace

from .. import fold as _fold
from .. import sreg as _sreg
from ..builder import KernelBuilder
from ..errors import DSLError, PtxdslError, SourceLoc
from ..ir import SINK, Addr, Instr, Label, Param, PredNot, Reg, SharedAlloc, SpecialReg, WaitLoop
from ..tensormap import TensorMapSpec
from ..types import ALL_TYPES, pred, scalar_type
from . import ast, forms
from .parse import MAX_LITERAL_BITS as MAX_CONSTANT_BITS     # a folded constant stays printable

# Kernel directives: name -> (builder keyword, shape of its value).
DIRECTIVES = {
    "reqntid": ("reqntid", "dims"), "maxntid": ("maxntid", "dims"), "reqnctapercluster": ("reqnctapercluster", "dims"),
    "cluster": ("reqnctapercluster", "dims"), "minnctapersm": ("minnctapersm", "int"), "maxnreg": ("maxnreg", "int"),
    "maxclusterrank": ("maxclusterrank", "int"), "explicitcluster": ("explicitcluster", "flag"),
    "target": ("arch", "word"), "version": ("ptx", "version"), "debug": ("debug", "seconds"),
}
# Tensor-map options: name -> kind of value.
TMAP_OPTIONS = {
    "box": "list", "strides": "list", "element_strides": "list", "lower_corner": "list", "upper_corner": "list",
    "swizzle": "word", "interleave": "word", "l2_promotion": "word", "oob_fill": "word",
    "channels_per_pixel": "int", "pixels_per_column": "int", "address": "int",
}
COMPARE = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
BINARY_METHOD = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shl", ">>": "shr",
                 "&": "and_", "|": "or_", "^": "xor"}


def lower_module(module: ast.Module, *, verify: bool = True) -> list:
    """Build every kernel of a parsed file; returns the finished ir.Kernel objects in file order. verify=False
    leaves the verifier's rules to an explicit ptxdsl.verify.check (as for a builder kernel)."""
    consts: dict = {}
    kernels = []
    for item in module.items:
        if isinstance(item, ast.ConstDef):
            _located(item.loc, _define_const, consts, item, consts)
        else:
            kernels.append(_located(item.loc, _KernelLowering(item, consts, module.file, verify).build))
    return kernels


def _located(loc, fn, *args):
    """Run fn; any error it raises leaves as a PtxdslError located at `loc` (when it has no place yet)."""
    try:
        return fn(*args)
    except PtxdslError as e:
        raise e.at(loc) from None
    except RecursionError:
        raise DSLError("statements or expressions nested too deeply", loc) from None
    except Exception as e:       # a bug below: still a located error, with the original as its cause
        raise DSLError(f"internal error (a ptxdsl bug, please report): {type(e).__name__}: {e}", loc) from e


def relocated(e: PtxdslError, loc) -> PtxdslError:
    """A copy of e located at `loc`, replacing the place it had (a Python line inside ptxdsl's callers)."""
    e = copy.copy(e)
    e.loc = loc
    e.args = (e._format(),)
    return e


def _define_const(table: dict, item: ast.ConstDef, consts: dict):
    if item.name in table:
        raise DSLError(f"{item.name!r} is already defined")
    table[item.name] = fold(item.value, consts)


# ------------------------------------------------------------------------------ constant folding

INT_ONLY = frozenset({"%", "<<", ">>", "&", "|", "^"})
FLOAT = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def fold_binary(op: str, a, b):
    """Fold `a op b` of two constants with PTX's semantics (ptxdsl.fold: integer / and % truncate)."""
    fn = _fold.SYMBOL[op]
    ints = isinstance(a, int) and isinstance(b, int)
    if op in INT_ONLY and not ints:
        raise DSLError(f"{a!r} {op} {b!r}: {op} takes integers")
    if op in ("/", "%") and b == 0:
        raise DSLError(f"{a!r} {op} {b!r}: division by zero")
    try:
        if fn in _fold.COMPARE:
            return int(_fold.compare(fn, a, b))
        if ints:
            return _bounded(_fold.binary(fn, a, b))
        return FLOAT[op](float(a), float(b))
    except (OverflowError, ArithmeticError) as e:
        raise DSLError(f"{op} of two constants: {e}") from None


def _bounded(v: int) -> int:
    if v.bit_length() > MAX_CONSTANT_BITS:
        raise DSLError(f"a constant expression is {v.bit_length()} bits long; constants are at most "
                       f"{MAX_CONSTANT_BITS} bits")
    return v


def fold_unary(op: str, a):
    if op == "-":
        return -a
    if op == "~" and isinstance(a, int):
        return ~a
    raise DSLError(f"{op}{a!r}: {'~ takes an integer' if op == '~' else '! takes a predicate register'}")


def constant(e, consts: dict):
    """The value of a constant expression, or None when it reads a register or calls an instruction."""
    if isinstance(e, ast.Num):
        return e.value
    if isinstance(e, ast.Name):
        v = consts.get(e.id)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(e, ast.Unary) and e.op != "!":
        a = constant(e.operand, consts)
        return None if a is None else fold_unary(e.op, a)
    if isinstance(e, ast.Binary):
        a, b = constant(e.left, consts), constant(e.right, consts)
        return None if a is None or b is None else fold_binary(e.op, a, b)
    if isinstance(e, ast.Ternary):
        c = constant(e.cond, consts)
        if c is None:
            return None
        return constant(e.then if c else e.orelse, consts)
    return None


def fold(e, consts: dict):
    """A constant expression's value; DSLError naming the expression's line otherwise."""
    v = constant(e, consts)
    if v is None:
        raise DSLError(f"expected a constant expression, got {describe(e)}", e.loc)
    return v


def describe(e) -> str:
    if isinstance(e, ast.Name):
        return repr(e.id)
    if isinstance(e, ast.SReg):
        return f"special register {e.name}"
    if isinstance(e, ast.Call):
        return f"{e.func}(...)"
    return type(e).__name__.lower()


def what(v) -> str:
    """How an error names a value."""
    if isinstance(v, Reg):
        return f"register {v.name} (.{v.type.name})"
    if isinstance(v, SharedAlloc):
        return f"shared buffer {v.name!r}"
    if isinstance(v, Param):
        return f"{v.kind} parameter {v.name!r}"
    if isinstance(v, Label):
        return f"label {v.name!r}"
    if isinstance(v, tuple):
        return f"a {len(v)}-vector"
    if isinstance(v, SpecialReg):
        return f"special register {v.name}"
    return repr(v)


# ------------------------------------------------------------------------------------- kernels


class _KernelLowering:
    """Lowers one kernel definition through a KernelBuilder."""

    def __init__(self, kdef: ast.Kernel, consts: dict, file: str, verify: bool = True):
        self.kdef = kdef
        self.consts = consts
        self.file = file
        self.verify = verify
        self.env: dict = {}
        self.names = ChainMap(self.env, consts)     # what a name denotes: the kernel's own first, then the file's
        self.table = forms.table()                  # the instructions declared now
        self.loop_vars: set[str] = set()
        self.forward: dict[str, SourceLoc] = {}     # labels branched to before they are placed
        self.k: KernelBuilder | None = None

    def build(self):
        kdef = self.kdef
        options = _located(kdef.loc, self.directives, kdef.directives)
        self.k = _located(kdef.loc, lambda: KernelBuilder(kdef.name, loc=kdef.loc, verify=self.verify, **options))
        for p in kdef.params:
            self.run(p.loc, self.param, p)
        self.block(kdef.body)
        for name, loc in self.forward.items():
            raise DSLError(f"branch to label {name!r}, which the kernel never places", loc)
        return _located(kdef.loc, self.k.finish)

    def run(self, loc, fn, *args):
        with self.k.at(loc):
            return _located(loc, fn, *args)

    # ---------------------------------------------------------------------------- header

    def directives(self, directives) -> dict:
        out = {}
        for d in directives:
            if d.name not in DIRECTIVES:
                raise DSLError(f"unknown directive .{d.name}; expected one of "
                               f"{', '.join('.' + n for n in DIRECTIVES)}", d.loc)
            key, shape = DIRECTIVES[d.name]
            if key in out:
                raise DSLError(f"directive .{d.name} given twice", d.loc)
            out[key] = _located(d.loc, self.directive_value, d, shape)
        return out

    def directive_value(self, d: ast.Directive, shape: str):
        args = d.args
        if shape == "flag" or (shape == "seconds" and not args):
            if args:
                raise DSLError(f".{d.name} takes no value")
            return True
        if len(args) != 1 and shape != "dims":
            raise DSLError(f".{d.name} takes one value, got {len(args)}")
        if shape == "word":
            if not isinstance(args[0], ast.Name):
                raise DSLError(f".{d.name} expects a name such as sm_90a, got {describe(args[0])}")
            return args[0].id
        if shape == "version":
            if not isinstance(args[0], ast.Num) or "." not in args[0].text:
                raise DSLError(f".{d.name} expects a PTX ISA version such as 8.0")
            return args[0].text
        values = [fold(a, self.consts) for a in args]
        if shape == "seconds":
            if not isinstance(values[0], (int, float)) or values[0] <= 0:
                raise DSLError(f".{d.name} {values[0]!r}: expected a positive number of seconds")
            return float(values[0])
        if shape == "dims":
            if not 1 <= len(values) <= 3:
                raise DSLError(f".{d.name} takes 1 to 3 values, got {len(values)}")
            return tuple(values)
        return values[0]

    def param(self, p: ast.Param):
        k = self.k
        self.check_new(p.name)
        if p.spec is not None and p.kind != "tensormap":
            raise DSLError(f"parameter {p.name!r}: only a tensormap parameter takes a ': dtype[...]' description")
        if p.kind == "ptr":
            self.env[p.name] = k.param_ptr(p.name)
        elif p.kind == "tensormap":
            spec = self.tmap_spec(p.spec) if p.spec is not None else None
            self.env[p.name] = k.param_tensormap(p.name, spec)
        elif p.kind in ALL_TYPES:
            self.env[p.name] = k.param(p.name, p.kind)
        else:
            raise DSLError(f"parameter {p.name!r}: unknown kind {p.kind!r}; expected ptr, tensormap or a scalar type "
                           f"({', '.join(t for t in ALL_TYPES if t != 'pred')})")

    def tmap_spec(self, spec: ast.TmapSpec) -> TensorMapSpec:
        kw = {}
        for name, value, loc in spec.options:
            if name not in TMAP_OPTIONS:
                raise DSLError(f"unknown tensor-map option {name!r}; expected one of {', '.join(TMAP_OPTIONS)}", loc)
            if name in kw:
                raise DSLError(f"tensor-map option {name!r} given twice", loc)
            kw[name] = _located(loc, self.tmap_option, name, value)
        shape = tuple(self.integer(fold(d, self.consts), "tensor-map shape") for d in spec.dims)
        try:
            if "box" in kw:
                box = kw.pop("box")
                made = TensorMapSpec.tiled_for(shape, spec.dtype, box, **kw)
            elif "channels_per_pixel" in kw:
                made = TensorMapSpec.im2col_for(shape, spec.dtype, **kw)
            else:
                raise DSLError("a tensor-map description needs `box [...]` (tiled) or `channels_per_pixel N ...` "
                               "(im2col)", spec.loc)
        except (TypeError, ValueError) as e:
            raise DSLError(f"tensor-map description: {e}", spec.loc) from None
        except PtxdslError as e:         # located at the Python line that called lang.loads: name the .ptxd one
            raise relocated(e, spec.loc) from None
        return replace(made, loc=spec.loc)

    def tmap_option(self, name, value):
        kind = TMAP_OPTIONS[name]
        if kind == "list":
            if not isinstance(value, list):
                raise DSLError(f"tensor-map option {name}: expected a list [a, b, ...]")
            return tuple(self.integer(fold(v, self.consts), name) for v in value)
        if isinstance(value, list):
            raise DSLError(f"tensor-map option {name}: expected one value, got a list")
        if kind == "int":
            if value in self.consts:
                return self.integer(self.consts[value], name)
            try:
                return int(value, 0)
            except ValueError:
                raise DSLError(f"tensor-map option {name}={value!r}: expected an integer") from None
        return value

    @staticmethod
    def integer(v, what_):
        if not isinstance(v, int):
            raise DSLError(f"{what_}={v!r}: expected an integer")
        return v

    # ------------------------------------------------------------------------ statements

    def block(self, stmts):
        for s in stmts:
            self.run(s.loc, self.stmt, s)

    def stmt(self, s):
        method = getattr(self, "stmt_" + type(s).__name__)
        method(s)

    def stmt_ConstDef(self, s: ast.ConstDef):
        self.check_new(s.name)
        self.env[s.name] = fold(s.value, self.names)

    def stmt_SharedDecl(self, s: ast.SharedDecl):
        self.check_new(s.name)
        t = scalar_type(s.type)
        n = self.integer(fold(s.count, self.names), f"shared {s.name} count")
        align = 16 if s.align is None else self.integer(fold(s.align, self.names), f"shared {s.name} align")
        self.env[s.name] = self.k.shared(s.name, n * t.nbytes, align=align, dynamic=s.dynamic)

    def stmt_MbarrierDecl(self, s: ast.MbarrierDecl):
        self.check_new(s.name)
        n = 1 if s.count is None else self.integer(fold(s.count, self.names), f"mbarrier {s.name} count")
        self.env[s.name] = self.k.mbarrier(s.name, n, dynamic=s.dynamic)

    def stmt_RegDecl(self, s: ast.RegDecl):
        t = scalar_type(s.type)
        regs = []
        for name in s.names:
            self.check_new(name)
            self.env[name] = self.k.reg(t)
            regs.append(self.env[name])
        if s.init is not None:
            for r in regs:
                self.compute(s.init, r)

    def stmt_Label(self, s: ast.Label):
        self.check_new(s.name)
        self.env[s.name] = self.k.label(s.name)
        self.forward.pop(s.name, None)

    def stmt_Assign(self, s: ast.Assign):
        if len(set(s.targets)) != len(s.targets):
            raise DSLError(f"a name appears twice among the results: {', '.join(s.targets)}")
        value = s.value
        if isinstance(value, ast.Name) and value.id not in self.names and value.id in self.table.names:
            value = ast.Instr(value.id, [], value.loc)        # `m = activemask`: an instruction without operands
        if isinstance(value, ast.Instr):
            self.instr(value, s.targets)
            return
        if len(s.targets) != 1:
            raise DSLError(f"an expression has one result; got {len(s.targets)} names")
        name = s.targets[0]
        out = self.bound_reg(name)
        result = self.compute(s.value, out)
        if out is None:
            self.env[name] = result

    def stmt_Instr(self, s: ast.Instr):
        self.instr(s, [])

    def stmt_If(self, s: ast.If):
        """if / else if / else. An else-if chain is walked, not recursed: the builder's else blocks stay open
        on a stack until the chain ends."""
        with ExitStack() as chain:
            cond = self.value(s.cond)
            while True:
                with self.k.if_(cond):
                    self.block(s.then)
                if s.orelse is None:
                    return
                chain.enter_context(self.k.at(s.loc))
                chain.enter_context(self.k.else_())
                nxt = s.orelse[0] if len(s.orelse) == 1 else None
                if not isinstance(nxt, ast.If):
                    self.block(s.orelse)
                    return
                s = nxt
                chain.enter_context(self.k.at(s.loc))
                cond = _located(s.loc, self.value, s.cond)

    def stmt_For(self, s: ast.For):
        if s.var in self.env and s.var not in self.loop_vars:
            raise DSLError(f"loop variable {s.var!r} is already {what(self.env[s.var])}")
        start, stop = self.value(s.start), self.value(s.stop)
        step = 1 if s.step is None else fold(s.step, self.names)
        with self.k.loop(start, stop, step, type=s.type or "u32") as var:
            self.env[s.var] = var
            self.loop_vars.add(s.var)
            self.block(s.body)

    def stmt_Elect(self, s: ast.Elect):
        mask = () if s.mask is None else (self.value(s.mask),)
        with self.k.elect_one(*mask):
            self.block(s.body)
        if s.orelse is not None:
            with self.k.at(s.loc), self.k.else_():
                self.block(s.orelse)

    def stmt_Wait(self, s: ast.Wait):
        row = self.table.wait_row()
        kwargs, derived = row.route(s.mnemonic, s.mnemonic.split(".")[1:])
        kwargs["bar"] = self.operand(s.bar, row)
        kwargs[s.on] = self.operand(s.value, row)
        if s.hint is not None:
            kwargs["hint"] = self.operand(s.hint, row)
        self.call(row, s.mnemonic, kwargs, derived)

    def stmt_Allow(self, s: ast.Allow):
        with self.k.allow(*s.rules):
            self.block(s.body)

    def stmt_Guarded(self, s: ast.Guarded):
        p = self.lookup(s.pred, s.loc)
        if not (isinstance(p, Reg) and p.type is pred):
            raise DSLError(f"guard @{'!' if s.negated else ''}{s.pred}: expected a .pred register, got {what(p)}")
        with self.k.guard(~p if s.negated else p):
            self.stmt(s.stmt)

    # -------------------------------------------------------------------------- instructions

    def instr(self, s: ast.Instr, targets: list):
        row, kwargs, derived = self.table.resolve(s.mnemonic)
        self.bind_operands(row, s.mnemonic, s.operands, kwargs)
        self.results(row, s.mnemonic, kwargs, derived, targets)

    def bind_operands(self, row: forms.Row, mnemonic: str, operands: list, kwargs: dict):
        """Positional operands fill the row's slots in order; `name=value` goes by name; a tensor operand
        [tmap, {c, ...}] fills a tensor-map slot and its coordinates."""
        positional = [o for o in operands if not isinstance(o, ast.KwArg)]
        if len(positional) > len(row.positional):
            n = len(row.positional)
            raise DSLError(f"{mnemonic} takes at most {n} operand{'s' if n != 1 else ''} "
                           f"({', '.join(row.positional) or 'none'}), got {len(positional)}")
        i = 0
        for o in operands:
            if isinstance(o, ast.KwArg):
                param, o = o.name, o.value
            else:
                param, i = row.positional[i], i + 1
            if param in kwargs:
                raise DSLError(f"{mnemonic}: {param} is given twice")
            if isinstance(o, ast.Mem) and o.coords is not None:
                coords = row.tensors.get(param)
                if coords is None:
                    raise DSLError(f"{mnemonic}: {param} is not a tensor operand; [tmap, {{...}}] is only for "
                                   f"{', '.join(row.tensors) or 'the tensor copies'}")
                if coords in kwargs:
                    raise DSLError(f"{mnemonic}: only one tensor operand [tmap, {{...}}] is allowed")
                kwargs[param] = self.operand(o.addr, row, param)
                kwargs[coords] = tuple(self.value(c) for c in o.coords.items)
            else:
                kwargs[param] = self.operand(o, row, param)

    def results(self, row: forms.Row, mnemonic: str, kwargs: dict, derived: dict, targets: list):
        """Name the destinations: new names take the registers the builder makes (a sinkable destination
        is made because it is named), names of registers pass those registers (out=, lane=, ...)."""
        if not targets:
            self.call(row, mnemonic, kwargs, derived)
            return
        if not row.dests:
            raise DSLError(f"{mnemonic} has no result to name")
        if row.vector is None and len(targets) > len(row.dests):
            n = len(row.dests)
            raise DSLError(f"{mnemonic} gives {n} result{'s' if n != 1 else ''} ({', '.join(row.dests)}), but "
                           f"{len(targets)} names are given")
        bound = [self.bound_reg(t) for t in targets]
        if any(b is None for b in bound) and not all(b is None for b in bound):
            new = [t for t, b in zip(targets, bound) if b is None]
            raise DSLError(f"{mnemonic}: results mix new names ({', '.join(new)}) with existing registers; "
                           f"declare them with `reg` first")
        if bound[0] is not None:
            pairs = [(row.vector, bound[0] if len(bound) == 1 else tuple(bound))] if row.vector else \
                list(zip(row.dests, bound))
            params = self.parameters(row)
            for slot, reg in pairs:
                key = row.key(slot)
                if key not in params:
                    raise DSLError(f"{mnemonic} always writes a new register; use a new name instead of "
                                   f"{', '.join(targets)}")
                if key in kwargs:
                    raise DSLError(f"{mnemonic}: {key} is given twice")
                kwargs[key] = reg
            self.call(row, mnemonic, kwargs, derived)
            return
        for slot in row.dests[:len(targets)]:
            if slot in row.sinks:
                kwargs.setdefault(row.key(slot), True)
        res = self.call(row, mnemonic, kwargs, derived)
        if res is None:
            raise DSLError(f"{mnemonic} has no result to name")
        if len(targets) == 1:
            self.env[targets[0]] = res
        elif isinstance(res, tuple) and len(res) == len(targets):
            self.env.update(zip(targets, res))
        else:
            n = len(res) if isinstance(res, tuple) else 1
            raise DSLError(f"{mnemonic} gives {n} result{'s' if n != 1 else ''}, but {len(targets)} names are given")

    def call(self, row: forms.Row, mnemonic: str, kwargs: dict, derived: dict | None = None):
        """Call the row's builder method with keyword arguments. A stated derived qualifier (.2d, .v4) goes to
        the method when it takes it, else it is checked against the op the method built."""
        params = self.parameters(row)
        stated = []
        for name, (tok, value) in (derived or {}).items():
            if name in params:
                kwargs.setdefault(name, value)
            else:
                stated.append((name, tok))
        unknown = [k for k in kwargs if k not in params]
        if unknown:
            raise DSLError(f"{mnemonic}: unknown operand {unknown[0]}=; {row.name} takes {', '.join(params)}")
        for name, p in params.items():
            if p.default is p.empty and name not in kwargs and name in row.defaults:
                kwargs[name] = row.defaults[name]          # a qualifier the method needs that every op defaults
        missing = [n for n, p in params.items() if p.default is p.empty and n not in kwargs
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if missing:
            name = missing[0]
            if name in row.tokens:
                tokens = ["." + t for t in row.tokens[name]]
                shown = ", ".join(tokens[:8]) + (", ..." if len(tokens) > 8 else "")
                raise DSLError(f"{mnemonic}: missing the qualifier that sets {name} ({shown})")
            raise DSLError(f"{mnemonic}: missing operand {name} ({row.name} takes "
                           f"{', '.join(row.positional) or 'none'})")
        block = self.k._blocks[-1] if stated else None
        result = getattr(self.k, row.method)(**kwargs)
        if stated:
            self.check_stated(mnemonic, block, stated)
        return result

    def check_stated(self, mnemonic: str, block: list, stated: list):
        """A derived qualifier written in the statement agrees with the op built (.v4 with a 4-vector)."""
        last = block[-1] if block else None
        op = last.op if isinstance(last, (Instr, WaitLoop)) else None
        if op is None:
            return
        for name, tok in stated:
            q = type(op).quals.get(name)
            have = q.token_for(op, getattr(op, name, None)) if q is not None else None
            if have != tok:
                gives = f".{have}" if have else f"no .{tok}"
                raise DSLError(f"{mnemonic}: .{tok} disagrees with the operands, which give {gives}")

    def parameters(self, row: forms.Row):
        return self.table.parameters(row.method)

    # ------------------------------------------------------------------------------ values

    def check_new(self, name: str):
        if name in self.env or name in self.consts:
            prev = self.env.get(name, self.consts.get(name))
            raise DSLError(f"{name!r} is already defined as {what(prev)}")

    def lookup(self, name: str, loc):
        if name in self.env:
            return self.env[name]
        if name in self.consts:
            return self.consts[name]
        raise DSLError(f"unknown name {name!r}", loc)

    def bound_reg(self, name: str):
        """The register a result name already denotes, or None for a new name."""
        if name not in self.env:
            if name in self.consts:
                raise DSLError(f"{name!r} is a constant; it cannot take a result")
            return None
        v = self.env[name]
        if isinstance(v, Reg) or (isinstance(v, tuple) and all(isinstance(r, Reg) for r in v)):
            return v
        raise DSLError(f"{name!r} is {what(v)}; it cannot take a result")

    def operand(self, e, row: forms.Row, param: str | None = None):
        """An instruction operand as the builder takes it (buffers, params and special registers as is)."""
        if isinstance(e, ast.Mem):
            if e.coords is not None:
                raise DSLError("a tensor operand [tmap, {...}] is only allowed as an instruction operand")
            return self.address(e.addr)
        if isinstance(e, ast.Vector):
            return tuple(self.value(i) for i in e.items)
        if isinstance(e, ast.Sink):
            return SINK
        if isinstance(e, ast.KwArg):
            raise DSLError(f"{e.name}= is only allowed in an operand list")
        if param in row.labels and isinstance(e, ast.Name) and e.id not in self.env:
            self.forward.setdefault(e.id, e.loc)
            return Label(e.id)
        return self.value(e)

    def address(self, e):
        """`[base]` or `[base + constant]` / `[base - constant]` -> what the builder takes as an address."""
        if isinstance(e, ast.Binary) and e.op in "+-":
            off = constant(e.right, self.names)
            if off is not None:
                base = self.value(e.left)
                if not isinstance(off, int):
                    raise DSLError(f"address offset {off!r}: expected an integer")
                off = off if e.op == "+" else -off
                if isinstance(base, SharedAlloc):
                    return base.at(off)
                if isinstance(base, (Reg, Param)):
                    return Addr(base, off)
                raise DSLError(f"address [{what(base)} {e.op} {abs(off)}]: expected a register or buffer base")
        return self.value(e)

    def value(self, e, out=None):
        """Evaluate an expression: constants fold, operators become builder calls (the outermost one
        writing `out` when given), names and special registers stay as they are."""
        if isinstance(e, ast.Num):
            return e.value
        if isinstance(e, ast.Name):
            return self.lookup(e.id, e.loc)
        if isinstance(e, ast.SReg):
            r = _sreg.ALL.get(e.name)
            if r is None:
                raise DSLError(f"unknown special register {e.name}; expected one of {', '.join(sorted(_sreg.ALL))}",
                               e.loc)
            return r
        if isinstance(e, ast.Unary):
            return self.unary(e, out)
        if isinstance(e, ast.Binary):
            return self.binary(e, out)
        if isinstance(e, ast.Ternary):
            c = constant(e.cond, self.names)
            if c is not None:
                return self.value(e.then if c else e.orelse, out)
            cond = self.value(e.cond)
            a, b = self.arith(self.value(e.then)), self.arith(self.value(e.orelse))
            return self.op("selp", a, b, cond, out=out)
        if isinstance(e, ast.Call):
            return self.call_expr(e, out)
        if isinstance(e, (ast.Mem, ast.Vector, ast.Sink, ast.KwArg)):
            raise DSLError(f"{type(e).__name__.lower()} operand is not allowed inside an expression", e.loc)
        raise DSLError(f"cannot evaluate {describe(e)}", getattr(e, "loc", None))

    def compute(self, e, out=None):
        """Evaluate `e` into a register: `out` when given, else a new one (atoms are copied with mov)."""
        v = self.value(e, out)
        produced = isinstance(e, (ast.Binary, ast.Ternary, ast.Call)) or (isinstance(e, ast.Unary) and e.op != "!")
        if produced and isinstance(v, Reg) and (out is None or v is out):
            return v
        if isinstance(v, PredNot):
            return self.op("not_", v.reg, out=out)
        if isinstance(v, (int, float)):
            if out is None:
                raise DSLError(f"cannot tell the type of the constant {v!r}; declare the register first "
                               f"(`reg u32 x = {v!r}`) or write mov.TYPE")
            return self.op("mov", v, type=out.type, out=out)
        if isinstance(v, SharedAlloc) and out is not None:
            return self.op("mov", v, type=out.type, out=out)
        if isinstance(v, (Reg, SpecialReg, SharedAlloc)):
            return self.op("mov", v, out=out)
        raise DSLError(f"{what(v)} is not a value a register can hold")

    def arith(self, v):
        """An operand of an operator: special registers and buffer addresses are read with mov first."""
        if isinstance(v, (SpecialReg, SharedAlloc)):
            return self.op("mov", v)
        if isinstance(v, (Reg, PredNot, int, float)):
            return v
        raise DSLError(f"{what(v)} cannot be used in arithmetic")

    def op(self, method: str, *args, out=None, **kw):
        if out is not None:
            kw["out"] = out
        return getattr(self.k, method)(*args, **kw)

    def unary(self, e: ast.Unary, out):
        v = self.value(e.operand)
        if isinstance(v, (int, float)):
            return fold_unary(e.op, v)
        if e.op == "!":
            if isinstance(v, PredNot):
                return v.reg
            if isinstance(v, Reg) and v.type is pred:
                return ~v
            raise DSLError(f"!: expected a .pred register, got {what(v)}", e.loc)
        return self.op("neg" if e.op == "-" else "not_", self.arith(v), out=out)

    def binary(self, e: ast.Binary, out):
        scope = self.names
        whole = constant(e, scope)
        if whole is not None:
            return whole
        if e.op == "+" and isinstance(e.left, ast.Binary) and e.left.op == "*" and constant(e.left, scope) is None:
            a, b = self.arith(self.value(e.left.left)), self.arith(self.value(e.left.right))
            c = self.arith(self.value(e.right))
            return self.op("mad", a, b, c, out=out)
        if e.op == "+" and isinstance(e.right, ast.Binary) and e.right.op == "*" and constant(e.right, scope) is None:
            c = self.arith(self.value(e.left))
            a, b = self.arith(self.value(e.right.left)), self.arith(self.value(e.right.right))
            return self.op("mad", a, b, c, out=out)
        a = self.arith(self.value(e.left))
        b = self.arith(self.value(e.right))
        if e.op in COMPARE:
            return self.op("setp", COMPARE[e.op], a, b, out=out)
        return self.op(BINARY_METHOD[e.op], a, b, out=out)

    def call_expr(self, e: ast.Call, out):
        if e.func in ALL_TYPES:
            if len(e.args) != 1 or isinstance(e.args[0], (ast.KwArg, ast.Mem, ast.Vector, ast.Sink)):
                raise DSLError(f"{e.func}(x) converts one value; got {len(e.args)} operands", e.loc)
            return self.op("cvt", e.func, self.arith(self.value(e.args[0])), out=out)
        row, kwargs, derived = self.table.resolve(e.func)
        self.bind_operands(row, e.func, e.args, kwargs)
        if out is not None:
            if "out" not in self.parameters(row):
                raise DSLError(f"{e.func}(...) always writes a new register", e.loc)
            kwargs["out"] = out
        res = self.call(row, e.func, kwargs, derived)
        if not isinstance(res, Reg):
            raise DSLError(f"{e.func}(...) gives no single register value", e.loc)
        return res

