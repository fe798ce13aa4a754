"""`ptxdsl emit|check|run|sass|docs` on the examples and on a kernel with a protocol bug; `python -m ptxdsl`."""
import subprocess
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import docpages
from ptxdsl.cli import main
from ptxdsl.verify import RULES

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"


def test_emit_prints_the_golden(capsys):
    assert main(["emit", str(EX / "tma_store_tile.py")]) == 0
    assert capsys.readouterr().out == (ROOT / "tests" / "golden" / "tma_store_tile.ptx").read_text()


def test_emit_ptxd_equals_py(capsys):
    main(["emit", str(EX / "tma_reduce_tile.py")])
    py = capsys.readouterr().out
    main(["emit", str(EX / "tma_reduce_tile.ptxd")])
    assert capsys.readouterr().out == py


def test_emit_resources_reports_them_on_stderr_and_check_is_the_same_flag(capsys):
    reports = []
    for flag in ("--resources", "--check"):
        assert main(["emit", flag, str(EX / "tma_load_tile.py")]) == 0
        out = capsys.readouterr()
        assert out.out == (ROOT / "tests" / "golden" / "tma_load_tile.ptx").read_text()     # stdout stays PTX
        reports.append(out.err)
    assert reports[0] == reports[1]
    assert reports[0].startswith("tma_load_tile  sm_90a: ") and " registers, " in reports[0]


WARNS = """\
import ptxdsl as px
with px.kernel("wide", reqntid=32, reqnctapercluster=(4, 4)) as k:
    pass
"""


def test_emit_prints_the_verifiers_warnings_on_stderr(tmp_path, capsys):
    f = tmp_path / "wide.py"
    f.write_text(WARNS)
    assert main(["emit", str(f)]) == 0
    out = capsys.readouterr()
    assert ".entry wide" in out.out and "warning" not in out.out
    assert "wide.py:2: cluster-size: warning: " in out.err


def test_emit_without_warnings_prints_nothing_on_stderr(capsys):
    assert main(["emit", str(EX / "tma_store_tile.py")]) == 0
    assert capsys.readouterr().err == ""


def test_emit_pinned_target(capsys):
    assert main(["emit", "--arch", "sm_90a", "--ptx", "8.3", "--check", str(EX / "tma_load_tile.py")]) == 0
    out = capsys.readouterr()
    assert ".version 8.3\n.target sm_90a\n" in out.out and "tma_load_tile  sm_90a:" in out.err


def test_emit_arch_below_an_instructions_floor_is_an_error(capsys):
    assert main(["emit", "--arch", "sm_90", "--ptx", "7.8", str(EX / "tma_load_tile.py")]) == 1
    assert "below the 8.0 that" in capsys.readouterr().err


BAD_TX = textwrap.dedent("""\
    import ptxdsl as px
    with px.kernel("bad", reqntid=32) as k:
        t = k.param_tensormap("m", px.TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64)))
        tile = k.shared("tile", 8192, align=128)
        bar = k.mbarrier("bar")
        with k.elect_one():
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, 8000)
            k.cp_async_bulk_tensor(tile, t, (0, 0), mbar=bar)
        k.mbarrier_wait(bar, parity=0)
    """)


def test_check_lists_findings_like_a_linter(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_TX)
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.py:9: expect-tx-mismatch: mbarrier bar expects 8000 transaction bytes" in out


def test_check_clean_example(capsys):
    assert main(["check", str(EX / "tma_load_tile.ptxd")]) == 0
    assert "assembled for sm_90a" in capsys.readouterr().out


RING_BYTES = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_pipeline import copy_kernel
    BAD = copy_kernel("bytes")                  # arms half of each tile's bytes
""")


def test_check_runs_the_launch_checks_with_the_given_launch(tmp_path, capsys):
    """A persistent ring whose mistake only a launch shows: plain `check` says the run of the threads did not run
    and what it needs, `check --launch` finds the mistake without a GPU, and passes the correct example with the
    same launch."""
    bad = tmp_path / "ring.py"
    bad.write_text(RING_BYTES.format(tests=str(ROOT / "tests")))
    assert main(["check", str(bad)]) == 0                  # the build alone cannot tell...
    out = capsys.readouterr().out
    assert "copy: 4 of 5 launch check(s) hold, 1 not run without a launch's values" in out     # ...and says so
    assert ("not run: the run of the CTA's threads (wait-never-armed, arrival-count, ring-parity, refill-race, "
            "tma-load-race at launch) needs ntiles (--launch ntiles=VALUE), the grid (--grid X[,Y,Z])") in out
    assert "`ptxdsl docs declared-launches`" in out
    assert main(["check", str(bad), "--launch", "ntiles=20,tiles_per_row=16", "--grid", "2"]) == 1
    out = capsys.readouterr().out
    assert ("copy: --launch ntiles=20, tiles_per_row=16, grid=(2, 1, 1): 1 broken, 4 of 5 launch check(s) hold"
            in out)
    assert ("expect-tx-mismatch: kernel 'copy' launched with --launch ntiles=20, tiles_per_row=16, grid=(2, 1, 1): "
            in out)
    assert "(see `ptxdsl docs expect-tx-mismatch` or docs/verifier.md#expect-tx-mismatch)" in out
    assert main(["check", str(EX / "pipe_copy.py"), "--launch", "ntiles=200,tiles_per_row=16", "--grid", "8"]) == 0
    assert ("pipe_copy: --launch ntiles=200, tiles_per_row=16, grid=(8, 1, 1): 5 of 5 launch check(s) hold"
            in capsys.readouterr().out)


def test_check_launch_without_every_value_runs_what_it_can(capsys):
    assert main(["check", str(EX / "pipe_copy.py"), "--launch", "tiles_per_row=16"]) == 0
    out = capsys.readouterr().out
    assert "pipe_copy: --launch tiles_per_row=16, grid=(1, 1, 1): 4 of 5 launch check(s) hold, 1 not run" in out
    assert "needs ntiles (--launch ntiles=VALUE)" in out


@pytest.mark.parametrize("argv, message", [
    (["--launch", "ntiles=x,tiles_per_row=1"], "--launch ntiles=x: not an integer, a float, a .npy file or a Python "
     "expression that evaluates (NameError: name 'x' is not defined)"),
    (["--launch", "ntiles"], "--launch 'ntiles': expected NAME=VALUE"),
    (["--launch", "ntiles=2.5,tiles_per_row=1"], "--launch ntiles=2.5: ntiles is a u32 parameter: give an integer"),
    (["--launch", "ntiles=2,tiles_per_row=1", "--grid", "0"], "--grid '0': expected up to three positive integers"),
    (["--launch", "ntiles=2,tiles_per_row=1", "--block", "1,2,3,4"], "--block '1,2,3,4': expected up to three"),
    (["--launch", "ntiles=2,tiles_per_row=1", "--block", "32,32,2"], "block=(32, 32, 2) (2048 threads) breaks 'a block "
     "of kernel 'pipe_copy' has at most 1024 threads'"),
    (["--launch", "work=missing.npy"], "--launch work=missing.npy: cannot read it as a .npy table"),
])
def test_check_launch_arguments_are_checked(argv, message, capsys):
    assert main(["check", str(EX / "pipe_copy.py"), *argv]) == 1
    assert message in capsys.readouterr().err


def test_run_fails_when_nothing_ran_on_a_gpu(capsys):
    from ptxdsl.runtime.driver import driver_available

    rc = main(["run", str(EX / "tma_store_tile.py")])
    out = capsys.readouterr()
    if driver_available():
        assert rc == 0 and "tma_store_tile.py: PASS" in out.out
        assert out.err.strip().endswith("1 passed on the GPU, 0 failed, 0 not run")
    else:
        assert rc == 1 and "tma_store_tile.py: not run: " in out.out
        assert "0 passed on the GPU, 0 failed, 1 not run (nothing ran on a GPU; `ptxdsl run --emit-only`" in out.err


def test_run_emit_only_emits_assembles_and_says_nothing_ran(capsys):
    rc = main(["run", "--emit-only", str(EX / "tma_store_tile.py"), str(EX / "tma_load_tile.ptxd")])
    out = capsys.readouterr()
    assert rc == 0
    assert "tma_store_tile.py: emitted tma_store_tile (PTX 8.0 sm_90), assembled for sm_90a" in out.out
    assert "tma_load_tile.ptxd: emitted tma_load_tile" in out.out
    assert "PASS" not in out.out and "not run" not in out.out
    assert out.err.strip() == "ptxdsl run: --emit-only: emitted and assembled; nothing ran on a GPU"


def test_run_emit_only_still_fails_on_a_bad_file(tmp_path, capsys):
    assert main(["run", "--emit-only", str(tmp_path / "missing.py")]) == 1
    assert "missing.py: no such file" in capsys.readouterr().err


def test_run_a_file_without_a_host_check_is_not_run(tmp_path, capsys):
    f = tmp_path / "plain.py"
    f.write_text((EX / "tma_store_tile.py").read_text().split("\ndef run(")[0])
    (tmp_path / "tile_common.py").write_text((EX / "tile_common.py").read_text())
    assert main(["run", str(f)]) == 1
    out = capsys.readouterr()
    assert "plain.py: not run: no host check (a run() function) to run" in out.out


def test_bad_file_reports_a_ptxdsl_error(tmp_path, capsys):
    bad = tmp_path / "bad.ptxd"
    bad.write_text("kernel k( {\n")
    assert main(["emit", str(bad)]) == 1
    assert "bad.ptxd:1" in capsys.readouterr().err


def _error_of(capsys, argv, rc):
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert err.startswith("ptxdsl: error: "), err
    return err


def test_files_the_command_line_cannot_read_are_errors(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("kernel")
    (tmp_path / "latin1.ptxd").write_bytes("// caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty.py").write_text("x = 1\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "raises.py").write_text("x = 1\nraise ValueError('boom')\n")
    (tmp_path / "syntax.py").write_text("def f(:\n")
    cases = [
        (str(tmp_path / "missing.py"), "missing.py: no such file"),
        (str(tmp_path), "is a directory"),
        (str(tmp_path / "notes.txt"), "not a .py or .ptxd file"),
        (str(tmp_path / "latin1.ptxd"), "not UTF-8 text (byte 6"),
        ("", "an empty file name was given"),
        (str(tmp_path / "empty.py"), "empty.py: defines no kernels"),
        (str(tmp_path / "exits.py"), "called sys.exit(3) while it was loaded"),
        (str(tmp_path / "raises.py"), "raises.py:2: ValueError: boom"),
        (str(tmp_path / "syntax.py"), "syntax.py:1: "),
    ]
    for cmd, rc in (("emit", 1), ("check", 1), ("run", 1), ("sass", 1)):    # the same status for the same error
        for path, text in cases:
            assert text in _error_of(capsys, [cmd, path], rc), (cmd, path)


def test_a_bad_file_does_not_stop_the_next(tmp_path, capsys):
    missing = str(tmp_path / "missing.ptxd")
    for cmd, rc in (("emit", 1), ("check", 1), ("run", 1)):
        assert main([cmd, missing, str(EX / "tma_load_tile.ptxd")]) == rc
        out = capsys.readouterr()
        assert "missing.ptxd: no such file" in out.err
        assert {"emit": ".entry tma_load_tile", "check": "assembled for sm_90a",
                "run": "emitted tma_load_tile"}[cmd] in out.out


def test_an_unknown_kernel_names_those_the_file_defines(capsys):
    err = _error_of(capsys, ["emit", "--kernel", "nope", str(EX / "tma_load_tile.py")], 1)
    assert "no kernel 'nope'; the file defines tma_load_tile" in err


def test_check_does_not_leave_the_verifier_switched_off(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("PTXDSL_VERIFY", raising=False)
    import os

    main(["check", str(EX / "tma_load_tile.py")])
    capsys.readouterr()
    assert "PTXDSL_VERIFY" not in os.environ


# ------------------------------------------------------------------ --version, python -m, docs, sass

def _version() -> str:
    """The installed distribution's version; the package's own where it runs from a checkout on PYTHONPATH."""
    try:
        return metadata.version("ptxdsl")
    except metadata.PackageNotFoundError:
        return px.__version__


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"ptxdsl {_version()}\n"


def test_python_m_ptxdsl_runs_the_command_line(tmp_path):
    """From outside the checkout: the installed package, not the working directory's."""
    def ptxdsl(*argv):
        return subprocess.run([sys.executable, "-m", "ptxdsl", *argv], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120, check=False)

    v = ptxdsl("--version")
    assert (v.returncode, v.stdout) == (0, f"ptxdsl {_version()}\n")
    e = ptxdsl("emit", str(EX / "tma_store_tile.ptxd"))
    assert e.returncode == 0, e.stderr
    assert e.stdout == (ROOT / "tests" / "golden" / "tma_store_tile.ptx").read_text()
    bad = ptxdsl("emit", "missing.py")
    assert bad.returncode == 1 and bad.stderr.startswith("ptxdsl: error: missing.py: no such file")
    usage = ptxdsl()
    assert usage.returncode == 2 and "usage: ptxdsl" in usage.stderr


def test_docs_lists_the_pages(capsys):
    assert main(["docs"]) == 0
    out = capsys.readouterr().out
    for name in ("api", "isa", "language", "troubleshooting", "tensormap-replace", "verifier"):
        assert f"\n  {name}\n" in out, name


def test_docs_prints_a_page_a_section_and_a_path(capsys):
    assert main(["docs", "verifier"]) == 0
    assert capsys.readouterr().out == (ROOT / "docs" / "verifier.md").read_text()
    assert main(["docs", "language#control-flow"]) == 0
    section = capsys.readouterr().out
    assert section.startswith("## Control flow\n") and "\n## " not in section
    assert main(["docs", "--path", "verifier"]) == 0
    assert Path(capsys.readouterr().out.strip()).read_text() == (ROOT / "docs" / "verifier.md").read_text()


def test_docs_of_an_unknown_topic_is_an_error(capsys):
    err = _error_of(capsys, ["docs", "no-such-rule"], 1)
    assert "no page or section 'no-such-rule'; the pages are " in err and "verifier" in err
    assert "no section 'nope' in verifier.md" in _error_of(capsys, ["docs", "verifier#nope"], 1)
    assert "no page 'nope'" in _error_of(capsys, ["docs", "nope#x"], 1)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_verifier_message_names_a_section_the_docs_command_prints(rule, capsys):
    """A VerifyError says `ptxdsl docs ANCHOR`: that command prints the rule's own section."""
    r = RULES[rule]
    assert f"`ptxdsl docs {r.doc_anchor}`" in r.doc and f"docs/verifier.md#{r.doc_anchor}" in r.doc
    assert main(["docs", r.doc_anchor]) == 0
    section = capsys.readouterr().out
    assert section.startswith(f'### <a id="{r.doc_anchor}"></a>{rule}')
    assert section == docpages.lookup(f"verifier#{r.doc_anchor}")


def test_a_verify_error_points_at_the_docs_command(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_TX)
    err = _error_of(capsys, ["emit", str(bad)], 1)
    assert "bad.py:9: expect-tx-mismatch: " in err
    assert "(see `ptxdsl docs expect-tx-mismatch` or docs/verifier.md#expect-tx-mismatch)" in err


def _fake_sass(monkeypatch):
    """A stand-in ptxdsl.sass recording what the command hands to disassemble(cubin, *, ptx=None)."""
    calls = []

    def disassemble(cubin, *, ptx=None):
        calls.append((cubin, ptx))
        return f"SASS of {len(cubin)} bytes"

    monkeypatch.setitem(sys.modules, "ptxdsl.sass", types.SimpleNamespace(disassemble=disassemble))
    monkeypatch.setattr(px, "sass", sys.modules["ptxdsl.sass"], raising=False)
    return calls


def test_sass_disassembles_the_cubin_nvjitlink_made(monkeypatch, capsys):
    calls = _fake_sass(monkeypatch)
    path = str(EX / "tma_load_tile.py")
    assert main(["sass", "--arch", "sm_90a", path]) == 0
    (cubin, ptx), = calls
    want = px.emit(px.module(*__import__("ptxdsl.cli").cli.load_kernels(path)[0]), arch="sm_90a")
    assert ptx.text == want.text
    assert cubin == px.assemble(want, "sm_90a").cubin and cubin[:4] == b"\x7fELF"
    assert capsys.readouterr().out == f"SASS of {len(cubin)} bytes\n"


def test_sass_line_info_and_kernel_selection(monkeypatch, capsys):
    calls = _fake_sass(monkeypatch)
    assert main(["sass", "--line-info", "--kernel", "tma_load_tile", str(EX / "tma_load_tile.ptxd")]) == 0
    (_, ptx), = calls
    assert '.file 1 "' in ptx.text and "tma_load_tile.ptxd" in ptx.text
    assert _error_of(capsys, ["sass", "--kernel", "nope", str(EX / "tma_load_tile.py")], 1)


@pytest.mark.nvdisasm
def test_sass_of_an_example_for_real(capsys):
    """With the `sass` extra installed (CI installs it): nvdisasm's SASS of the cubin, the builder's lines between."""
    pytest.importorskip("ptxdsl.sass", reason="ptxdsl.sass is not in this tree")
    rc = main(["sass", "--line-info", str(EX / "tma_load_tile.py")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert ".text.tma_load_tile" in out.out and "UTMALDG" in out.out            # the TMA load
    assert "k.cp_async_bulk_tensor(tile, tmap, (x, y), mbar=bar)" in out.out    # tile_common.py's line


def test_dump_dir_gets_what_emit_check_and_assemble_make(tmp_path, monkeypatch, capsys):
    """PTXDSL_DUMP_DIR is not only px.compile's: emit writes the PTX, check the PTX and the cubin it assembled
    (and its SASS with nvdisasm), px.assemble what it assembled."""
    monkeypatch.setenv("PTXDSL_DUMP_DIR", str(tmp_path / "d"))
    assert main(["emit", str(EX / "tma_load_tile.py")]) == 0
    assert "ptxdsl: dumped " in capsys.readouterr().err
    assert [p.suffix for p in (tmp_path / "d").iterdir()] == [".ptx"]
    assert main(["check", str(EX / "tma_store_tile.py")]) == 0
    suffixes = sorted(p.suffix for p in (tmp_path / "d").iterdir() if p.name.startswith("tma_store_tile-"))
    assert {".ptx", ".cubin"} <= set(suffixes)
    from tma_reduce_tile import KERNEL

    text = px.emit(KERNEL).text
    px.assemble(text, "sm_90a")                             # PTX text: the kernels' names come from its .entry
    dumped = [p for p in (tmp_path / "d").iterdir() if p.name.startswith("tma_reduce_tile-")]
    assert {p.suffix for p in dumped} >= {".ptx", ".cubin"}
    assert next(p for p in dumped if p.suffix == ".ptx").read_text() == text


def test_examples_are_listed_printed_and_copied_with_what_they_import(tmp_path, capsys):
    assert main(["examples"]) == 0
    out = capsys.readouterr().out
    assert "  pipe_copy.py\n" in out and "  tma_load_tile.ptxd\n" in out and "__" not in out
    assert main(["examples", "pipe_copy"]) == 0
    assert capsys.readouterr().out == (EX / "pipe_copy.py").read_text()
    assert main(["examples", "tma_load_tile.ptxd", "--copy", str(tmp_path / "ex")]) == 0
    copied = sorted(p.name for p in (tmp_path / "ex").iterdir())
    assert copied == ["tile_common.py", "tma_load_tile.ptxd", "tma_load_tile.py"]     # its .py and what that imports
    capsys.readouterr()
    assert main(["check", str(tmp_path / "ex" / "tma_load_tile.ptxd")]) == 0           # the copy checks where it lands
    assert "launch check(s) hold" in capsys.readouterr().out
    assert "already exist" in _error_of(capsys, ["examples", "tma_load_tile", "--copy", str(tmp_path / "ex")], 1)
    listed = _error_of(capsys, ["examples", "nope"], 1)
    assert "no example 'nope'; the examples are " in listed and "pipe_axpy.py" in listed
    assert "no example '../README.md'" in _error_of(capsys, ["examples", "../README.md"], 1)
