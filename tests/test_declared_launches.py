"""`ptxdsl check FILE` and the launches a file declares (`launches()`, px.Launch): a ring mistake only a launch's
values show fails the check with the declared launches and is named as not run without them; the examples
declare theirs and check clean; `--launch` takes floats, tables and expressions; a run cut short says so; the
launch's own shape is checked as the driver checks it."""
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ptxdsl as px
from ptxdsl.cli import main
from ptxdsl.verify import Launch, check_launch, explain_launch

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
PTXD = (EX / "pipe_copy.ptxd").read_text()

# pipe_copy.ptxd with one mistake each that only the run of the threads with a launch's values finds.
PTXD_MISTAKES = {
    "expect-tx-mismatch": ("mbarrier.arrive.expect_tx.release.cta [ring_full + stage * 8], TILE_BYTES",
                           "mbarrier.arrive.expect_tx.release.cta [ring_full + stage * 8], TILE_BYTES / 2"),
    "ring-parity": ("parity s_phase ", "parity s_phase ^ 1 "),
    "refill-race": ("if issued >= 1 {", "if issued >= 0 {"),     # a stage released before its store read it
    "arrival-count": ("mbarrier.init [ring_empty + s * 8], 1", "mbarrier.init [ring_empty + s * 8], 2"),
}
PTXD_LAUNCHES = textwrap.dedent("""\
    import ptxdsl as px

    def launches():
        return [px.Launch("pipe_copy", {"ntiles": 20, "tiles_per_row": 16}, grid=2, note="two CTAs lap the ring")]
    """)


@pytest.mark.parametrize("rule", sorted(PTXD_MISTAKES))
def test_a_ptxd_ring_mistake_fails_check_with_the_launches_beside_it(rule, tmp_path, capsys):
    old, new = PTXD_MISTAKES[rule]
    assert PTXD.count(old) == 1
    bad = tmp_path / "ring.ptxd"
    bad.write_text(PTXD.replace(old, new))
    assert main(["check", str(bad)]) == 0                  # without a launch: the build alone cannot tell...
    out = capsys.readouterr().out
    assert "pipe_copy: 4 of 5 launch check(s) hold, 1 not run without a launch's values" in out   # ...and says so
    assert "needs ntiles (--launch ntiles=VALUE), the grid (--grid X[,Y,Z])" in out
    (tmp_path / "ring.py").write_text(PTXD_LAUNCHES)
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "pipe_copy: 5 launch check(s), with the 1 launch(es) the file declares:" in out
    assert "ntiles=20, tiles_per_row=16, grid=2 (two CTAs lap the ring): 1 broken, 4 of 5 launch check(s) hold" in out
    assert "ring.ptxd:" in out and f": {rule}: kernel 'pipe_copy' launched with ntiles=20" in out
    assert f"(see `ptxdsl docs {rule}`" in out


RING_PY = textwrap.dedent("""\
    import sys
    sys.path.insert(0, {tests!r})
    import ptxdsl as px
    from test_pipeline import copy_kernel

    BAD = copy_kernel({mistake!r})

    def launches():
        return [px.Launch(BAD, {{"ntiles": 20, "tiles_per_row": 16}}, grid=2)]
    """)


@pytest.mark.parametrize("mistake, rule", [("bytes", "expect-tx-mismatch"), ("parity", "ring-parity"),
                                           ("no_drain", "refill-race"), (None, None)])
def test_a_python_ring_mistake_fails_check_with_its_launches(mistake, rule, tmp_path, capsys):
    f = tmp_path / "ring.py"
    f.write_text(RING_PY.format(tests=str(ROOT / "tests"), mistake=mistake))
    assert main(["check", str(f)]) == (1 if rule else 0)
    out = capsys.readouterr().out
    if rule:
        assert "ring.py:" in out and f": {rule}: kernel 'copy' launched with ntiles=20, tiles_per_row=16, grid=2" in out
    else:
        assert "ntiles=20, tiles_per_row=16, grid=2: 5 of 5 launch check(s) hold" in out


EXAMPLES = sorted(p.name for p in EX.glob("*.py") if p.name not in ("tile_common.py",))


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_declares_its_launches_and_checks_clean(name, capsys):
    assert main(["check", str(EX / name)]) == 0
    out = capsys.readouterr().out
    assert "not run" not in out and "cut short" not in out and "not followed" not in out
    assert "launch(es) the file declares:" in out
    verdicts = [line for line in out.splitlines() if line.startswith("  ") and "launch check(s)" in line]
    assert verdicts and all(line.endswith("hold") for line in verdicts)
    for line in verdicts:
        held, total = line.rsplit(": ", 1)[1].split(" launch check(s)")[0].split(" of ")
        assert held == total


def test_a_run_of_the_threads_cut_short_says_so(capsys):
    assert main(["check", str(EX / "pipe_copy.py"), "--launch", "ntiles=400000,tiles_per_row=16", "--grid", "3"]) == 0
    out = capsys.readouterr().out
    assert "4 of 5 launch check(s) hold, 1 not concluded" in out
    assert "cut short: the run of CTA 0's threads stopped at its budget of 30,000 class steps" in out
    assert "hold\n" not in out.split("4 of 5")[1]


def test_launch_takes_tables_floats_and_expressions(tmp_path, capsys):
    """pipe_varlen reads its loop bounds from two tables: given as .npy files or as expressions in the file's
    names (and `a` as a float), the run of its threads follows them to the end."""
    import importlib.util
    import sys

    sys.path.insert(0, str(EX))
    try:
        spec = importlib.util.spec_from_file_location("varlen_for_test", EX / "pipe_varlen.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(EX))
    launch = mod.launches()[0]
    np.save(tmp_path / "desc.npy", launch.args["desc"])
    np.save(tmp_path / "work.npy", launch.args["work"])
    grid = str(launch.grid)
    argv = ["check", str(EX / "pipe_varlen.py"), "--kernel", "pipe_varlen", "--grid", grid]
    assert main(argv + ["--launch", f"desc={tmp_path / 'desc.npy'},work={tmp_path / 'work.npy'},a=0.5"]) == 0
    assert f"--launch a=0.5, desc=<table>, work=<table>, grid=({grid}, 1, 1): 2 of 2 launch check(s) hold" in \
        capsys.readouterr().out
    expr = "launches()[0].args['desc'],work=launches()[0].args['work']"
    assert main(argv + ["--launch", f"desc={expr}", "--launch", "a=-1.5"]) == 0
    assert "2 of 2 launch check(s) hold" in capsys.readouterr().out


def test_check_without_launches_names_what_each_check_needs(capsys):
    assert main(["check", str(EX / "pipe_varlen.py"), "--kernel", "pipe_varlen", "--launch", "a=1.0"]) == 0
    out = capsys.readouterr().out
    assert ("needs the table desc points at (--launch desc=FILE.npy, or a Python expression giving a numpy array), "
            "the table work points at") in out


# ------------------------------------------------------------------ the launch's shape, as the driver checks it

def small_kernel(reqntid=True):
    with px.kernel("small", **({"reqntid": 128} if reqntid else {})) as k:
        n = k.param("n", px.u32)
        k.add(n, 1)
    return k


@pytest.mark.parametrize("kw, rule, text", [
    ({"args": None}, "launch.arg-count", "args=None breaks 'the arguments are a tuple or list of the kernel's 1"),
    ({"args": (1, 2)}, "launch.arg-count", "2 argument(s) given for kernel 'small' breaks 'one argument per "
     "parameter (n)'"),
    ({"cluster": (float("inf"),)}, "launch.cluster-shape", "cluster=(inf,) breaks 'cluster is an int or 1 to 3 ints"),
    ({"cluster": 2.0}, "launch.cluster-shape", "cluster=2.0 breaks"),
    ({"block": 2.0}, "launch.block-shape", "block=2.0 breaks 'block is an int or 1 to 3 ints (x, y, z)'"),
    ({"block": (32, 32, 2)}, "launch.block-threads", "block=(32, 32, 2) (2048 threads) breaks 'a block of kernel "
     "'small' has at most 1024 threads'"),
    ({"grid": (1, 70000)}, "launch.grid-range", "grid.y=70000 breaks 'grid.y is 1..65535'"),
    ({"grid": "4"}, "launch.grid-shape", "grid='4' breaks"),
    ({"shared_bytes": -1}, "launch.shared-bytes", "shared_bytes=-1 breaks 'shared_bytes is a byte count >= 0'"),
])
def test_check_launch_checks_the_launch_shape(kw, rule, text):
    call = {"args": (4,), "grid": 1, "block": 128, **kw}
    args = call.pop("args")
    with pytest.raises(px.LaunchError) as e:
        check_launch(small_kernel(reqntid=False), args, **call)
    assert e.value.rule == rule and text in str(e.value)
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_launch_descriptions_name_their_mistakes():
    k = small_kernel()
    with pytest.raises(px.LaunchError, match="'m' breaks 'args names the kernel's parameters \\(n\\)'"):
        Launch(k, {"m": 1}).check()
    with pytest.raises(px.LaunchError, match="gives no value for its scalar parameter\\(s\\) n"):
        Launch(k, {}).check()
    with pytest.raises(px.LaunchError, match="the kernel declares no .reqntid, so the launch must give block="):
        Launch(small_kernel(reqntid=False), {"n": 1}).check()
    launch = Launch(k, {"n": 3}, grid=(2, 2), note="a note")
    launch.check()
    assert launch.describe() == "n=3, grid=(2, 2) (a note)"
    assert launch.loc.file == __file__
    assert [o.verdict for o in launch.explain()] == [o.verdict for o in explain_launch(k, (3,), grid=(2, 2))]
    assert math.prod(launch.block_of()) == 128


def test_a_launch_of_a_kernel_the_file_does_not_define_is_named(tmp_path, capsys):
    bad = tmp_path / "ring.ptxd"
    bad.write_text(PTXD)
    (tmp_path / "ring.py").write_text(PTXD_LAUNCHES.replace('"pipe_copy"', '"pipe_cpy"'))
    assert main(["check", str(bad)]) == 0
    out = capsys.readouterr().out
    assert ("launches() names kernel 'pipe_cpy', which the file does not define (it defines pipe_copy): that launch "
            "is not checked") in out
    assert "pipe_copy: 4 of 5 launch check(s) hold, 1 not run without a launch's values" in out
