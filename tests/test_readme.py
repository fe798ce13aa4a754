"""The README's first example runs as written, its kernel assembles and its tensor maps carry specs (so the
verifier's byte checks are on); the set-up commands are the ones CI runs. (Every other python block of the
README and docs/ runs in tests/test_docs.py.)"""
import re
from pathlib import Path

import pytest

import ptxdsl as px

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
FIRST = re.search(r"```python\n(.*?)```", README, re.S).group(1)


def run_first(code=FIRST):
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    return ns


def test_readme_example(capsys):
    ns = run_first()
    out = capsys.readouterr().out
    assert ".target sm_90\n" in out and "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in out
    assert "tma_store_tile  sm_90a:" in out
    assert px.emit(ns["k"]).target.version == "8.0"


def test_readme_example_attaches_tensormap_specs(capsys):
    kernel = run_first()["k"].finish()
    capsys.readouterr()
    maps = [p for p in kernel.params if p.kind == "tensormap"]
    assert [p.name for p in maps] == ["src", "dst"]
    assert all(p.tmap is not None and p.tmap.box_bytes == 8192 for p in maps)


def test_readme_example_with_a_wrong_byte_count_stops_at_the_line(capsys):
    """What the prose under the example promises: 8000 instead of 8192 is an expect-tx-mismatch."""
    assert FIRST.count("k.mbarrier_arrive_expect_tx(bar, 8192,") == 1
    bad = FIRST.replace("k.mbarrier_arrive_expect_tx(bar, 8192,", "k.mbarrier_arrive_expect_tx(bar, 8000,")
    line = 1 + bad[:bad.index("(bar, 8000,")].count("\n")
    with pytest.raises(px.VerifyError) as e:
        run_first(bad)
    assert e.value.rule == "expect-tx-mismatch" and e.value.loc.line == line
    assert "`ptxdsl docs expect-tx-mismatch`" in str(e.value)
    capsys.readouterr()


def test_the_set_up_command_is_what_ci_runs():
    setup = re.search(r"## Set up and run.*?```bash\n(.*?)\n", README, re.S).group(1)
    install, _, run = setup.partition(" && ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert install in ci and run.split("#")[0].strip() in ci
    assert "--emit-only" in run        # CI has no GPU: the command must succeed there, saying nothing ran
