"""Run one example's host check (its run()) in a child process, with a timeout: a protocol bug in a kernel
hangs or traps the CUDA context, and the test suite's own context must survive it.

    python tests/example_child.py NAME py|ptxd      # prints run()'s verdict; exit 0 when it passed
"""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT_S = 180


def run_example(name: str, form: str = "py") -> tuple[bool, str]:
    """(passed, what the child printed): the example's run() with its kernel built from `form`."""
    try:
        res = subprocess.run([sys.executable, __file__, name, form], capture_output=True, text=True,
                             timeout=TIMEOUT_S, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired as e:
        return False, f"{name} ({form}): no answer within {TIMEOUT_S} s\n{e.stdout or ''}{e.stderr or ''}"
    text = res.stdout + (res.stderr[-3000:] if res.returncode else "")
    return res.returncode == 0, text


def main(name: str, form: str) -> int:
    sys.path.insert(0, str(EXAMPLES))
    example = importlib.import_module(name)
    kernel = None
    if form == "ptxd":
        from ptxdsl import lang

        (kernel,) = lang.load(EXAMPLES / f"{name}.ptxd")
    ok, verdict = example.run(kernel=kernel)
    print(verdict)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
