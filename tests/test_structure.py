"""The package's shape: no import cycle between ptxdsl's modules (lazy imports included), and `import ptxdsl`
loads neither the CUDA driver bindings, nvJitLink nor numpy (building and printing a kernel needs none)."""
import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ptxdsl"


def _modules() -> dict:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _graph(mods) -> dict:
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != m and not m.startswith(t + "."):      # a package importing its parent: not a cycle
                    graph[m].add(t)
    return graph


def _cycles(graph) -> list:
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 and not all(x.startswith(min(comp)) for x in comp):
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert _cycles(_graph(_modules())) == []


def test_import_ptxdsl_loads_no_driver_nvjitlink_or_numpy():
    code = ("import sys, ptxdsl\n"
            "with ptxdsl.kernel('k') as k:\n    k.mov(1, ptxdsl.u32)\n"
            "ptxdsl.emit(k)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('cuda.bindings.driver', 'cuda.bindings.nvjitlink', "
            "'cuda.bindings.cynvjitlink', 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
