"""The README's first example runs as written and its kernel assembles."""
import re
from pathlib import Path

import ptxdsl as px


def test_readme_example(capsys):
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = re.search(r"```python\n(import ptxdsl as px.*?)```", text, re.S).group(1)
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    out = capsys.readouterr().out
    assert ".target sm_90\n" in out and "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in out
    assert "tma_store_tile  sm_90a:" in out
    assert px.emit(ns["k"]).target.version == "8.0"
