"""The verifier reads ops only through their declared effects: no module of ptxdsl/verify/ names an isa class
in a string, and every rule case of test_verify gives the same diagnostics when every op of the kernel is an
instance of a renamed subclass."""
import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import ptxdsl.isa
import ptxdsl.verify
from ptxdsl.ir import If, Instr, Loop, WaitLoop
from ptxdsl.isa.decl import OPS
from ptxdsl.verify import check

import test_verify as tv

VERIFY_DIR = Path(ptxdsl.verify.__file__).parent


def isa_class_names() -> set:
    """The names of the op classes (OPS) and of every class defined in a module of ptxdsl.isa."""
    names = {cls.__name__ for cls in OPS}
    for info in pkgutil.iter_modules(ptxdsl.isa.__path__, "ptxdsl.isa."):
        module = importlib.import_module(info.name)
        names |= {name for name, obj in vars(module).items()
                  if inspect.isclass(obj) and obj.__module__ == module.__name__}
    return names


def test_no_string_in_the_verifier_names_an_isa_class():
    names = isa_class_names()
    assert {"MbarrierInit", "CpAsyncBulkTensorLoad", "Add", "Arrive"} <= names     # the scan sees what it must
    files = sorted(VERIFY_DIR.glob("*.py"))
    assert {"__init__.py", "flow.py", "facts.py", "ring.py"} <= {f.name for f in files}
    hits = [f"{f.name}:{node.lineno}: {node.value!r}" for f in files for node in ast.walk(ast.parse(f.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]
    assert hits == []


# ------------------------------------------------------------------------------------ renaming

_RENAMED: dict = {}


def _renamed(cls):
    """A subclass of `cls` under another name (abstract: not a declaration of its own)."""
    if cls not in _RENAMED:
        _RENAMED[cls] = type("Renamed" + cls.__name__, (cls,), {"abstract": True})
    return _RENAMED[cls]


def _ops(stmts):
    for s in stmts:
        if isinstance(s, (Instr, WaitLoop)):
            yield s.op
        elif isinstance(s, If):
            yield from _ops(s.then)
            yield from _ops(s.orelse or [])
        elif isinstance(s, Loop):
            yield from _ops(s.body)


def rename_ops(kernel) -> None:
    """Make every op of the kernel an instance of a renamed subclass of its class."""
    for op in _ops(kernel.body):
        op.__class__ = _renamed(type(op))


def findings(kernel):
    return [(d.rule, d.loc.line if d.loc else None, d.message, d.severity) for d in check(kernel)]


KERNELS = [(f"{rule}-{which}-{fn.__name__}", fn, opts) for rule, bad, good, bad_opts, good_opts in tv.CASES
           for which, fn, opts in (("bad", bad, bad_opts), ("good", good, good_opts))]
KERNELS += [("warp_specialized", tv.warp_specialized, {}),
            ("warp_specialized-no-flip", lambda k: tv.warp_specialized(k, consumer_flips=False), {}),
            ("single_loop_ring-ahead", lambda k: tv.single_loop_ring(k, "ahead"), {}),
            ("single_loop_ring-every", lambda k: tv.single_loop_ring(k, "every"), {})]


@pytest.mark.parametrize("name, fn, opts", KERNELS, ids=[k[0] for k in KERNELS])
def test_renamed_op_classes_give_the_same_diagnostics(name, fn, opts):
    kernel = tv.build_unchecked(fn, **opts)
    before = findings(kernel)
    rename_ops(kernel)
    assert all(type(op).__name__.startswith("Renamed") for op in _ops(kernel.body))
    assert findings(kernel) == before
    if "-bad-" in name:
        assert before, "a bad kernel of test_verify has no finding"


# ------------------------------------------------------------------------------------ engines

RUN_MODULES = {"ring.py", "races.py"}           # the run of the CTA's threads; kernel.py: the kernel-wide checks


def reported_rules() -> dict:
    """{rule: {engine}} of every rule some module of ptxdsl/verify/ reports by name: the walk's modules through
    `cx.report` / `self.report`, the run's through `self._report`, the kernel-wide checks through `diag`."""
    out: dict = {}
    for f in sorted(VERIFY_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            rule = node.args[0].value
            if name == "_report":
                engine = "run"
            elif name == "report":
                engine = "walk"
            elif name == "diag" and f.name == "kernel.py":
                engine = "kernel"
            else:
                continue
            assert (engine == "run") == (f.name in RUN_MODULES), f"{f.name} reports {rule} as the {engine}"
            out.setdefault(rule, set()).add(engine)
    return out


def test_each_rule_is_reported_by_the_engines_it_declares():
    """A rule belongs to one engine (Rule.engine); the few that a second engine also reports, for the cases the
    first cannot see (ring slots placed through a register), say so (Rule.also). A rule a module reports under
    another engine fails here, before it is found twice."""
    from ptxdsl.verify import RULES
    got = reported_rules()
    assert {"expect-tx-mismatch", "refill-race", "smem-capacity", "bulk-group-pending"} <= set(got)
    for rule, engines in got.items():
        assert engines <= set(RULES[rule].engines), (rule, engines, RULES[rule].engines)
    for r in RULES.values():
        if r.also is not None:
            assert got.get(r.name) == set(r.engines), (r.name, got.get(r.name))
