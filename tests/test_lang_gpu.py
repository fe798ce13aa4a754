"""The .ptxd examples on the GPU: each example's run() with the kernel built from its .ptxd twin, in a
child process (tests/example_child.py) with a timeout.

Run on the H200: CI=1 python -m pytest tests/test_lang_gpu.py -q
"""
from pathlib import Path

import pytest

from example_child import run_example

EXAMPLES = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.py")
                  if p.with_suffix(".ptxd").exists())


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_from_ptxd(name):
    ok, verdict = run_example(name, "ptxd")
    print(verdict)
    assert ok, verdict
    if name == "tma_pipeline_copy":
        assert "bit-exact=True differing=0" in verdict
