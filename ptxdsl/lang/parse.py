"""Parse .ptxd text into the dataclass AST (ptxdsl.lang.ast), with file:line:col on every node.

The grammar is grammar/ptxdsl.lark (shipped inside the wheel as the package ptxdsl.grammar). Syntax
errors become ParseError with the location, the source line, a caret and what was expected.
Parsing only builds data: nothing in the file is executed.
"""
from __future__ import annotations

import functools
import hashlib
import struct
import sys
from importlib import resources
from pathlib import Path

import lark
from lark import Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .. import cache
from ..errors import ParseError, PtxdslError, SourceLoc
from .. import log
from . import ast

GRAMMAR_FILE = "ptxdsl.lark"
MAX_NESTING = 100        # brackets, braces and parentheses open at once
MAX_DEPTH = 200          # levels of the syntax tree (an operator, a block, an else-if each add one)
MAX_DIGITS = 4300        # an integer literal (Python's own limit for turning digits into an int)
MAX_LITERAL_BITS = 14284 # the largest integer with at most MAX_DIGITS decimal digits

# How an expected terminal is named in an error message.
TERMINAL_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "MNEMONIC": "an instruction", "SREG": "a special register",
    "DIRECTIVE": "a directive (.reqntid ...)", "WAIT": "wait", "WORD": "a word", "WAIT_ON": "parity or state",
    "_NL": "end of line", "$END": "end of input", "DYNAMIC": "dynamic", "BANG": "'!'",
    "RULE": "a verifier rule name",
}


def grammar_text() -> str:
    """The grammar, from the installed package ptxdsl.grammar or, in a checkout, <repo>/grammar."""
    try:
        return resources.files("ptxdsl.grammar").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")
    except (ImportError, OSError):
        return (Path(__file__).resolve().parents[2] / "grammar" / GRAMMAR_FILE).read_text(encoding="utf-8")


class _TooDeep(Exception):
    def __init__(self, line: int, col: int, what: str):
        super().__init__(what)
        self.line, self.col, self.what = line, col, what


class _JoinBrackets:
    """Post-lexer: newlines inside (...) and [...] continue the line; brackets nest at most MAX_NESTING deep."""

    always_accept = ("_NL",)

    def process(self, stream):
        depth = 0            # ( and [: newlines inside continue the line
        nesting = 0          # ( [ and {
        for tok in stream:
            if tok.type in ("LPAR", "LSQB", "LBRACE"):
                nesting += 1
                if nesting > MAX_NESTING:
                    raise _TooDeep(tok.line, tok.column, f"brackets, braces and parentheses nest more than "
                                                         f"{MAX_NESTING} deep")
                depth += tok.type != "LBRACE"
            elif tok.type in ("RPAR", "RSQB", "RBRACE"):
                nesting = max(0, nesting - 1)
                if tok.type != "RBRACE":
                    depth = max(0, depth - 1)
            elif tok.type == "_NL" and depth:
                continue
            yield tok


@functools.lru_cache(maxsize=1)
def parser() -> lark.Lark:
    """The LALR parser (built once per process; its tables come from Lark's own cache file when one matches)."""
    text = grammar_text()
    table = _lark_cache(text)
    with log.stage("parser build"):             # cache_grammar: the tests' Hypothesis strategy reads .grammar
        return lark.Lark(text, parser="lalr", lexer="contextual", propagate_positions=True,
                         maybe_placeholders=True, postlex=_JoinBrackets(), cache=table, cache_grammar=bool(table))


def _lark_cache(grammar: str) -> str | bool:
    """The file Lark caches the parser tables in (in ptxdsl's cache directory), or False when caching is off or
    the directory cannot be made. Lark checks the grammar, its options, its version and Python's in the file and
    rebuilds on any difference or damage; the name holds the grammar's hash so two grammars never share a file."""
    if not cache.enabled():
        return False
    folder = cache.cache_dir() / "lark"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:16]
    return str(folder / f"ptxdsl-{digest}-lark{lark.__version__}-py{sys.version_info[0]}{sys.version_info[1]}.cache")


def parse(text: str, filename: str = "<string>") -> ast.Module:
    """Parse .ptxd text into an ast.Module; raises ParseError (with the file, line and column) on a syntax
    error, on nesting deeper than MAX_NESTING brackets or MAX_DEPTH syntax levels, and on a number too long."""
    if not isinstance(text, str):
        raise ParseError(f"expected .ptxd text (a str), got {type(text).__name__}", SourceLoc(filename, 1, 1))
    try:
        tree = parser().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, filename) from None
    except _TooDeep as e:
        raise _located_error(f"{e.what}; split the expression or the block", text, filename, e.line, e.col) from None
    _check_depth(tree, text, filename)
    try:
        items = _ToAst(filename).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, PtxdslError):
            raise e.orig_exc from None
        meta = getattr(e.obj, "meta", e.obj)
        raise ParseError(f"cannot read this: {e.orig_exc}", SourceLoc(filename, getattr(meta, "line", 1) or 1,
                                                                       getattr(meta, "column", 1) or 1)) from None
    return ast.Module(items, filename)


def _check_depth(tree, text: str, filename: str):
    """ParseError at the first node deeper than MAX_DEPTH (the lowering and the emitter recurse on the tree)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta if isinstance(node, Tree) else node
            raise _located_error(f"statements or expressions nest more than {MAX_DEPTH} levels deep; split them",
                                 text, filename, getattr(meta, "line", 1), getattr(meta, "column", 1))
        if isinstance(node, Tree):
            stack.extend((c, depth + 1) for c in node.children if isinstance(c, Tree))


def _located_error(message: str, text: str, filename: str, line, col) -> ParseError:
    line = line if isinstance(line, int) and line > 0 else 1
    col = col if isinstance(col, int) and col > 0 else 1
    lines = text.splitlines() or [""]
    src = lines[min(line, len(lines)) - 1].expandtabs(1)
    return ParseError(f"{message}\n    {src}\n    {' ' * (col - 1)}^", SourceLoc(filename, line, col))


# ------------------------------------------------------------------------------------ errors


def _describe_expected(names) -> str:
    terms = {t.name: t for t in parser().terminals}
    words = set()
    for n in names:
        if n in TERMINAL_WORDS:
            words.add(TERMINAL_WORDS[n])
        elif n in terms and terms[n].pattern.type == "str":
            words.add(repr(terms[n].pattern.value))
        else:
            words.add(n.lower())
    return ", ".join(sorted(words))


def _syntax_error(e: UnexpectedInput, text: str, filename: str) -> ParseError:
    line, col = getattr(e, "line", 0), getattr(e, "column", 0)
    if isinstance(e, UnexpectedCharacters):
        what = f"unexpected character {e.char!r}"
        expected = e.allowed
    elif isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            what = "unexpected end of input"
            line, col = _end_position(text)
        elif tok.type == "_NL":
            what = "unexpected end of line"
        else:
            what = f"unexpected {str(tok)!r}"
        expected = e.expected
    else:
        assert isinstance(e, UnexpectedEOF)
        what = "unexpected end of input"
        line, col = _end_position(text)
        expected = e.expected
    if not isinstance(line, int) or line < 1:
        line, col = _end_position(text)
    lines = text.splitlines() or [""]
    src = lines[min(line, len(lines)) - 1].expandtabs(1) if lines else ""
    caret = " " * max(0, col - 1) + "^"
    msg = f"syntax error: {what}; expected {_describe_expected(expected)}\n    {src}\n    {caret}"
    return ParseError(msg, SourceLoc(filename, line, max(col, 1)))


def _end_position(text: str) -> tuple[int, int]:
    lines = text.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


# --------------------------------------------------------------------------------- tree -> AST


def number_value(text: str) -> int | float:
    """The value of a NUMBER token: decimal, 0x hex, PTX 0f/0d hex floats, decimal floats. ValueError for an
    integer of more than MAX_DIGITS digits (or MAX_LITERAL_BITS bits)."""
    low = text.lower()
    if low.startswith("0f") and len(text) == 10:
        return struct.unpack("<f", struct.pack("<I", int(text[2:], 16)))[0]
    if low.startswith("0d") and len(text) == 18:
        return struct.unpack("<d", struct.pack("<Q", int(text[2:], 16)))[0]
    if not low.startswith("0x") and any(c in low for c in ".e"):
        return float(text)
    digits = text[2:] if low.startswith("0x") else text
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise ValueError(f"the integer literal has {len(digits)} digits; at most {MAX_DIGITS} are allowed")
    v = int(digits, 16) if low.startswith("0x") else int(digits)
    if v.bit_length() > MAX_LITERAL_BITS:
        raise ValueError(f"the integer literal is {v.bit_length()} bits long; at most {MAX_LITERAL_BITS} are allowed")
    return v


def _drop_tokens(children, *types):
    return [c for c in children if not (isinstance(c, Token) and c.type in types)]


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    def __init__(self, filename: str):
        super().__init__()
        self.file = filename

    def _loc(self, meta_or_tok) -> SourceLoc:
        line = getattr(meta_or_tok, "line", None)
        col = getattr(meta_or_tok, "column", None)
        return SourceLoc(self.file, line or 0, col or 0)

    # ---- top level
    def start(self, meta, items):
        return [i for i in items if i is not None]

    def const_def(self, meta, ch):
        return ast.ConstDef(str(ch[0]), ch[1], self._loc(meta))

    def kernel(self, meta, ch):
        name, rest = ch[0], ch[1:]
        params = [p for p in rest if isinstance(p, ast.Param)]
        directives = [d for d in rest if isinstance(d, ast.Directive)]
        body = rest[-1]
        return ast.Kernel(str(name), params, directives, body, self._loc(meta))

    def param(self, meta, ch):
        kind, name, spec = ch
        return ast.Param(str(kind), str(name), spec, self._loc(meta))

    def tmap_spec(self, meta, ch):
        dtype, rest = ch[0], ch[1:]
        dims = [c for c in rest if not isinstance(c, tuple)]
        options = [c for c in rest if isinstance(c, tuple)]
        return ast.TmapSpec(str(dtype), dims, options, self._loc(meta))

    def tmap_option(self, meta, ch):
        name, vals = ch[0], ch[1:]
        if len(vals) == 1 and isinstance(vals[0], Token):
            return (str(name), str(vals[0]), self._loc(meta))
        return (str(name), list(vals), self._loc(meta))

    def directive(self, meta, ch):
        return ast.Directive(str(ch[0])[1:], [c for c in ch[1:] if c is not None], self._loc(meta))

    def block(self, meta, ch):
        return [c for c in ch if c is not None]

    # ---- statements
    def guarded(self, meta, ch):
        bang, pred, stmt = ch
        return ast.Guarded(str(pred), bang is not None, stmt, self._loc(meta))

    def assign(self, meta, ch):
        *targets, value = ch
        return ast.Assign([str(t) for t in targets], value, self._loc(meta))

    def instr(self, meta, ch):
        mnem, *ops = ch
        return ast.Instr(str(mnem), [o for o in ops if o is not None], self._loc(meta))

    def label(self, meta, ch):
        return ast.Label(str(ch[0]), self._loc(meta))

    def shared_decl(self, meta, ch):
        name, type_, count, align, dyn = ch
        return ast.SharedDecl(str(name), str(type_), count, align, dyn is not None, self._loc(meta))

    def mbarrier_decl(self, meta, ch):
        name, count, dyn = ch
        return ast.MbarrierDecl(str(name), count, dyn is not None, self._loc(meta))

    def reg_decl(self, meta, ch):
        type_, *names, init = ch
        return ast.RegDecl(str(type_), [str(n) for n in names], init, self._loc(meta))

    def if_stmt(self, meta, ch):
        cond, then, orelse = ch
        if isinstance(orelse, ast.If):
            orelse = [orelse]
        return ast.If(cond, then, orelse, self._loc(meta))

    def for_stmt(self, meta, ch):
        type_, var, start, stop, step, body = ch
        return ast.For(str(type_) if type_ is not None else None, str(var), start, stop, step, body, self._loc(meta))

    def elect_stmt(self, meta, ch):
        mask, body, orelse = ch
        return ast.Elect(mask, body, orelse, self._loc(meta))

    def allow_stmt(self, meta, ch):
        *rules, body = ch
        return ast.Allow([str(r) for r in rules], body, self._loc(meta))

    def wait_stmt(self, meta, ch):
        mnem, bar, on, value, hint = ch
        return ast.Wait(str(mnem), bar, str(on), value, hint, self._loc(meta))

    # ---- operands
    def mem(self, meta, ch):
        return ast.Mem(ch[0], ch[1], self._loc(meta))

    def vector(self, meta, ch):
        return ast.Vector([c for c in ch if c is not None], self._loc(meta))

    def kwarg(self, meta, ch):
        return ast.KwArg(str(ch[0]), ch[1], self._loc(meta))

    def sink(self, meta, ch):
        return ast.Sink(self._loc(meta))

    # ---- expressions
    def number(self, meta, ch):
        try:
            value = number_value(str(ch[0]))
        except ValueError as e:
            raise ParseError(str(e), self._loc(ch[0])) from None
        return ast.Num(value, str(ch[0]), self._loc(ch[0]))

    def name(self, meta, ch):
        return ast.Name(str(ch[0]), self._loc(ch[0]))

    def sreg(self, meta, ch):
        return ast.SReg(str(ch[0]), self._loc(ch[0]))

    def call(self, meta, ch):
        func, *args = ch
        return ast.Call(str(func), [a for a in args if a is not None], self._loc(meta))

    def ternary(self, meta, ch):
        return ast.Ternary(ch[0], ch[1], ch[2], self._loc(meta))

    def _unary(op):
        def method(self, meta, ch):
            return ast.Unary(op, _drop_tokens(ch, "BANG")[0], self._loc(meta))
        return method

    neg, inv, lnot = _unary("-"), _unary("~"), _unary("!")

    def _binary(op):
        def method(self, meta, ch):
            return ast.Binary(op, ch[0], ch[1], self._loc(meta))
        return method

    add, sub, mul, div, rem = _binary("+"), _binary("-"), _binary("*"), _binary("/"), _binary("%")
    shl, shr, and_, or_, xor = _binary("<<"), _binary(">>"), _binary("&"), _binary("|"), _binary("^")
    eq, ne, lt, le, gt, ge = _binary("=="), _binary("!="), _binary("<"), _binary("<="), _binary(">"), _binary(">=")
    del _unary, _binary
