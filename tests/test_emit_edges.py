"""What the emitter writes at the edges ptxas is strict about, each held to nvJitLink: negative address
offsets, .file paths with quotes and non-ASCII characters, and the module-wide limits (duplicate names,
parameter space, identifier length, setmaxnreg against .maxnreg, the .version ptxdsl can write)."""
import pytest

import ptxdsl as px
from ptxdsl.errors import DSLError, TargetError
from ptxdsl.limits import MAX_IDENTIFIER, PARAM_BYTES, PARAM_BYTES_OLD


def assembles(k, arch=None):
    ptx = px.emit(k)
    px.assemble(ptx, arch or ptx.target.arch)
    return ptx.text


def test_negative_offsets_are_written_as_ptxas_reads_them():
    with px.kernel("neg", verify=False) as k:
        g = k.param_ptr("g")
        s = k.shared("s", 64)
        k.st(px.u32, px.Addr(g, -16), 1)
        v = k.ld(px.u32, px.Addr(k.mov(s), -8), space="shared::cta")
        k.st(px.u32, g, v)
    text = assembles(k)
    assert "[%rd2+-16]" in text and "+-8]" in text


def test_a_file_path_with_a_quote_and_non_ascii_characters(tmp_path):
    src = tmp_path / 'dé"jà ü.py'
    src.write_text('import ptxdsl as px\nwith px.kernel("p") as k:\n    k.mov(1, px.u32)\n', encoding="utf-8")
    ns = {}
    exec(compile(src.read_text(encoding="utf-8"), str(src), "exec"), ns)
    ptx = px.emit(ns["k"], line_info=True)
    line = next(ln for ln in ptx.text.splitlines() if ln.startswith(".file"))
    assert line.isascii() and line.count('"') == 2
    assert line.endswith('d%C3%A9%22j%C3%A0 %C3%BC.py"')
    px.assemble(ptx, "sm_90a")


def test_two_kernels_of_one_name_in_a_module():
    with px.kernel("same") as a:
        a.mov(1, px.u32)
    with px.kernel("same") as b:
        b.mov(2, px.u32)
    with pytest.raises(DSLError, match="two kernels named 'same'") as info:
        px.emit(px.module(a, b))
    assert info.value.loc is not None


@pytest.mark.parametrize("ptx, limit", [("8.0", PARAM_BYTES_OLD), ("8.1", PARAM_BYTES)])
def test_parameter_space(ptx, limit):
    n = limit // 8
    with px.kernel("fits", ptx=ptx) as k:
        for i in range(n):
            k.param(f"p{i}", px.u64)
    assembles(k)
    with px.kernel("over", ptx=ptx) as k:
        for i in range(n + 1):
            k.param(f"p{i}", px.u64)
    with pytest.raises(DSLError, match=f"over the {limit}"):
        px.emit(k)


def test_identifier_length():
    with px.kernel("k" * MAX_IDENTIFIER) as k:
        k.mov(1, px.u32)
    assembles(k)
    with pytest.raises(DSLError, match="at most"):
        px.kernel("k" * (MAX_IDENTIFIER + 1))


def test_setmaxnreg_dec_above_maxnreg():
    with px.kernel("ok", maxnreg=64, arch="sm_90a") as k:
        k.setmaxnreg_dec(40)
        k.setmaxnreg_inc(232)
    assembles(k)
    with px.kernel("bad", maxnreg=32, arch="sm_90a") as k:
        k.setmaxnreg_dec(40)
    with pytest.raises(DSLError, match=r"setmaxnreg.dec to 40 registers .* is 32 \(.maxnreg 32\)"):
        px.emit(k)
    with px.kernel("bad2", arch="sm_90a") as k:
        k.setmaxnreg_inc(24)
        k.setmaxnreg_dec(32)
    with pytest.raises(DSLError, match=r"is 24 \(setmaxnreg.inc 24\)"):
        px.emit(k)


@pytest.mark.parametrize("ptx", ["99.9", "6.5", "x", (9,)])
def test_a_version_ptxdsl_cannot_write(ptx):
    with px.kernel("v") as k:
        k.mov(1, px.u32)
    with pytest.raises(TargetError):
        px.emit(k, ptx=ptx)
