"""`ptxdsl emit|check|run` on the examples and on a kernel with a protocol bug."""
import textwrap
from pathlib import Path

from ptxdsl.cli import main

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


def test_emit_check_reports_resources(capsys):
    assert main(["emit", "--check", str(EX / "tma_load_tile.py")]) == 0
    assert "tma_load_tile  sm_90a:" in capsys.readouterr().err


def test_emit_pinned_target(capsys):
    assert main(["emit", "--arch", "sm_90a", "--ptx", "8.3", "--check", str(EX / "tma_load_tile.py")]) == 0
    out = capsys.readouterr()
    assert ".version 8.3\n.target sm_90a\n" in out.out and "tma_load_tile  sm_90a:" in out.err


def test_emit_arch_below_an_instructions_floor_is_an_error(capsys):
    assert main(["emit", "--arch", "sm_90", "--ptx", "7.8", str(EX / "tma_load_tile.py")]) == 2
    assert "below the 8.0 that" in capsys.readouterr().err


def test_check_lists_findings_like_a_linter(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""\
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
        """))
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.py:9: expect-tx-mismatch: mbarrier bar expects 8000 transaction bytes" in out


def test_check_clean_example(capsys):
    assert main(["check", str(EX / "tma_load_tile.ptxd")]) == 0
    assert "assembled for sm_90a" in capsys.readouterr().out


def test_run_without_gpu_says_why(capsys):
    from ptxdsl.runtime.driver import driver_available

    rc = main(["run", str(EX / "tma_store_tile.py")])
    out = capsys.readouterr().out
    if driver_available():
        assert rc == 0 and "PASS" in out
    else:
        assert rc == 0 and "not run: " in out


def test_bad_file_reports_a_ptxdsl_error(tmp_path, capsys):
    bad = tmp_path / "bad.ptxd"
    bad.write_text("kernel k( {\n")
    assert main(["emit", str(bad)]) == 2
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
    for cmd, rc in (("emit", 2), ("check", 1), ("run", 1)):
        for path, text in cases:
            assert text in _error_of(capsys, [cmd, path], rc), (cmd, path)


def test_a_bad_file_does_not_stop_the_next(tmp_path, capsys):
    missing = str(tmp_path / "missing.ptxd")
    for cmd, rc in (("emit", 2), ("check", 1), ("run", 1)):
        assert main([cmd, missing, str(EX / "tma_load_tile.ptxd")]) == rc
        out = capsys.readouterr()
        assert "missing.ptxd: no such file" in out.err
        assert {"emit": ".entry tma_load_tile", "check": "assembled for sm_90a",
                "run": "emitted tma_load_tile"}[cmd] in out.out


def test_an_unknown_kernel_names_those_the_file_defines(capsys):
    err = _error_of(capsys, ["emit", "--kernel", "nope", str(EX / "tma_load_tile.py")], 2)
    assert "no kernel 'nope'; the file defines tma_load_tile" in err


def test_check_does_not_leave_the_verifier_switched_off(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("PTXDSL_VERIFY", raising=False)
    import os

    main(["check", str(EX / "tma_load_tile.py")])
    capsys.readouterr()
    assert "PTXDSL_VERIFY" not in os.environ
