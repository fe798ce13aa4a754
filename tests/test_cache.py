"""The on-disk cache (ptxdsl.cache): a second process finds the first one's cubin, a damaged entry is rebuilt and never
loaded, concurrent writers leave whole entries, PTXDSL_CACHE=0 and PTXDSL_CACHE_DIR are honoured, the key holds what
shapes a cubin, and the Lark parser tables are cached beside the cubins."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ptxdsl as px
from ptxdsl import assembler, cache
from ptxdsl.cubin import device_arch, prepare

ROOT = Path(__file__).resolve().parents[1]

# A child process: build the store-tile example, take the compile path's cubin (what px.compile loads on an H200) and
# report the cubin's hash, the `ptxdsl` logger's lines and whether nvJitLink was loaded.
CHILD = textwrap.dedent("""
    import hashlib, json, logging, sys
    lines = []
    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    log = logging.getLogger("ptxdsl")
    log.addHandler(Keep())
    log.setLevel(logging.DEBUG)
    sys.path.insert(0, "examples")
    import ptxdsl as px
    from ptxdsl.cubin import device_arch, prepare
    from tma_store_tile import k
    ptx = px.emit(k)
    image = prepare(ptx, device_arch((9, 0), ptx.target.arch), driver=(13, 0))
    print(json.dumps({"sha": hashlib.sha256(image.cubin).hexdigest(), "log": lines,
                      "nvjitlink_loaded": "cuda.bindings.nvjitlink" in sys.modules}))
""")


def run_child(cache_dir, **env) -> dict:
    full = {k: v for k, v in os.environ.items() if k != "PTXDSL_CACHE"}
    full.update(PTXDSL_CACHE_DIR=str(cache_dir), **env)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, env=full)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def store_tile_ptx():
    from tma_store_tile import k

    return px.emit(k)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(d))
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    return d


def entries(d: Path) -> list[Path]:
    return sorted((d / "cubin").glob("*.bin"))


def test_a_second_process_hits_the_first_ones_cubin(tmp_path):
    first = run_child(tmp_path)
    assert any(line.startswith("cache miss: cubin") for line in first["log"]), first["log"]
    assert any(line.startswith("cache store: cubin") for line in first["log"])
    assert any(line.startswith("assemble sm_90a:") for line in first["log"])
    assert first["nvjitlink_loaded"]
    second = run_child(tmp_path)
    assert any(line.startswith("cache hit: cubin") for line in second["log"]), second["log"]
    assert not any(line.startswith(("cache miss", "assemble")) for line in second["log"])
    assert not second["nvjitlink_loaded"]         # a hit needs no nvJitLink at all
    assert second["sha"] == first["sha"]
    assert len(entries(tmp_path)) == 1


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


DAMAGE = {
    "truncated": lambda d: d[: len(d) // 2],
    "empty": lambda d: b"",
    "payload byte flipped": lambda d: _flip(d, len(d) - 100),
    "digest byte flipped": lambda d: _flip(d, len(cache.MAGIC) + 3),
    "length field changed": lambda d: _flip(d, len(cache.MAGIC) + 32),
    "magic changed": lambda d: b"X" + d[1:],
    "bytes appended": lambda d: d + b"\0" * 16,
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_entry_is_rebuilt_never_loaded(cache_dir, damage, caplog):
    ptx = store_tile_ptx()
    good = assembler.assemble(ptx, "sm_90a", cache=True)
    (path,) = entries(cache_dir)
    original = path.read_bytes()
    path.write_bytes(DAMAGE[damage](original))
    assert cache.get("cubin", path.stem) is None                 # never returned
    assert not path.exists()                                      # and dropped
    path.write_bytes(DAMAGE[damage](original))
    with caplog.at_level("DEBUG", logger="ptxdsl"):
        again = assembler.assemble(ptx, "sm_90a", cache=True)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("cache: dropping damaged entry") for m in messages), messages
    assert any(m.startswith("cache miss") for m in messages)
    assert again.cubin == good.cubin
    assert assembler._cached(path.stem, "sm_90a").cubin == good.cubin       # rebuilt in place


def test_an_entry_with_a_valid_checksum_but_no_cubin_is_rebuilt(cache_dir):
    ptx = store_tile_ptx()
    good = assembler.assemble(ptx, "sm_90a", cache=True)
    (path,) = entries(cache_dir)
    cache.put("cubin", path.stem, (3).to_bytes(8, "little") + b"log" + b"not an ELF image")
    again = assembler.assemble(ptx, "sm_90a", cache=True)
    assert again.cubin == good.cubin and again.cubin.startswith(b"\x7fELF")


def test_a_hit_returns_what_assembling_returns(cache_dir):
    ptx = store_tile_ptx()
    fresh = assembler.assemble(ptx, "sm_90a")
    stored = assembler.assemble(ptx, "sm_90a", cache=True)
    hit = assembler.assemble(ptx, "sm_90a", cache=True)
    assert fresh.cubin == stored.cubin == hit.cubin
    assert fresh.kernels == stored.kernels == hit.kernels
    assert hit.info_log == stored.info_log                       # the log as nvJitLink wrote it (with its timing)
    assert hit.arch == "sm_90a" and hit.kernels["tma_store_tile"].registers > 0


WRITER = textwrap.dedent("""
    import sys
    from ptxdsl import cache
    i, rounds = int(sys.argv[1]), int(sys.argv[2])
    payload = bytes([i]) * (1 << 20) + i.to_bytes(4, "little")
    for _ in range(rounds):
        cache.put("cubin", "shared-entry", payload)
""")


def test_concurrent_writers_leave_a_whole_entry(cache_dir):
    writers = 6
    payloads = {bytes([i]) * (1 << 20) + i.to_bytes(4, "little") for i in range(writers)}
    env = {**os.environ, "PTXDSL_CACHE_DIR": str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(i), "40"], env=env, cwd=ROOT)
             for i in range(writers)]
    path = cache.entry_path("cubin", "shared-entry")
    reads = 0
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        reads += 1
        assert cache._unwrap(data) in payloads, f"read a torn entry of {len(data)} bytes"
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert reads > 0
    assert cache.get("cubin", "shared-entry") in payloads
    assert [p.name for p in path.parent.iterdir()] == [path.name]       # no temporary files left behind


def test_processes_compiling_at_once_share_one_good_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    shas = {json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1])["sha"] for p in procs}
    assert len(shas) == 1
    (path,) = entries(tmp_path)
    assert cache.get("cubin", path.stem) is not None


def test_ptxdsl_cache_0_disables_it(tmp_path):
    out = run_child(tmp_path, PTXDSL_CACHE="0")
    assert not any(line.startswith("cache") for line in out["log"]), out["log"]
    assert any(line.startswith("assemble sm_90a:") for line in out["log"])
    assert not tmp_path.exists() or not any(tmp_path.rglob("*.bin"))


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no"])
def test_the_off_spellings(cache_dir, monkeypatch, value):
    monkeypatch.setenv("PTXDSL_CACHE", value)
    assert not cache.enabled()
    assert cache.put("cubin", "x", b"data") is None and cache.get("cubin", "x") is None
    assert not cache_dir.exists()


def test_ptxdsl_cache_dir_is_honoured(cache_dir):
    assert cache.cache_dir() == cache_dir
    assembler.assemble(store_tile_ptx(), "sm_90a", cache=True)
    assert len(entries(cache_dir)) == 1


def test_the_default_directory_per_platform(monkeypatch, tmp_path):
    monkeypatch.delenv("PTXDSL_CACHE_DIR", raising=False)
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "ptxdsl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")          # the XDG spec: relative paths are invalid
    assert cache.cache_dir() == tmp_path / ".cache" / "ptxdsl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == tmp_path / ".cache" / "ptxdsl"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert cache.cache_dir() == tmp_path / "Library" / "Caches" / "ptxdsl"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert cache.cache_dir() == tmp_path / "local" / "ptxdsl" / "Cache"


def test_an_unwritable_directory_means_no_caching(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(blocker))
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    out = assembler.assemble(store_tile_ptx(), "sm_90a", cache=True)       # works, caches nothing
    assert out.cubin.startswith(b"\x7fELF")


def test_the_key_holds_what_shapes_a_cubin(monkeypatch):
    text = store_tile_ptx().text
    base = assembler.cache_key(text, ["-arch=sm_90a", "-verbose"])
    assert base == assembler.cache_key(text, ["-arch=sm_90a", "-verbose"])
    assert base != assembler.cache_key(text, ["-arch=sm_100a", "-verbose"])
    assert base != assembler.cache_key(text, ["-arch=sm_90a", "-verbose", "-lineinfo"])
    assert base != assembler.cache_key(text + "\n", ["-arch=sm_90a", "-verbose"])
    monkeypatch.setattr(assembler, "nvjitlink_release", lambda: "99.0.1")
    assert base != assembler.cache_key(text, ["-arch=sm_90a", "-verbose"])
    monkeypatch.undo()
    monkeypatch.setattr(px, "__version__", "0.0.0-other")
    assert base != assembler.cache_key(text, ["-arch=sm_90a", "-verbose"])


def test_key_parts_cannot_run_into_each_other():
    assert cache.key("ab", "c") != cache.key("a", "bc")
    assert cache.key("x") == hashlib.blake2b((1).to_bytes(8, "little") + b"x", digest_size=32).hexdigest()


def test_the_nvjitlink_release_is_the_loaded_library(monkeypatch):
    release = assembler.nvjitlink_release()
    major, minor = assembler.nvjitlink_version()
    assert release == f"{major}.{minor}" or release.startswith(f"{major}.{minor}.")


def test_a_result_is_not_stored_under_another_release(cache_dir, monkeypatch):
    monkeypatch.setattr(assembler, "nvjitlink_release", lambda: "99.0.1")
    assembler.assemble(store_tile_ptx(), "sm_90a", cache=True)
    assert entries(cache_dir) == []


def test_compile_path_uses_the_cache(cache_dir, caplog):
    ptx = store_tile_ptx()
    arch = device_arch((9, 0), ptx.target.arch)
    first = prepare(ptx, arch, driver=(13, 0))
    with caplog.at_level("DEBUG", logger="ptxdsl"):
        second = prepare(ptx, arch, driver=(13, 0))
    assert second.cubin == first.cubin
    assert any(r.getMessage().startswith("cache hit") for r in caplog.records)


LARK_CHILD = textwrap.dedent("""
    import json, logging, lark, time
    from lark.utils import logger as lark_logger
    lines = []
    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    lark_logger.addHandler(Keep())
    lark_logger.setLevel(logging.DEBUG)
    import importlib
    parse = importlib.import_module("ptxdsl.lang.parse")
    t = time.perf_counter()
    parse.parser()
    ms = 1e3 * (time.perf_counter() - t)
    tree = parse.parse(open("examples/tma_store_tile.ptxd").read(), "tma_store_tile.ptxd")
    print(json.dumps({"log": lines, "ms": ms, "ast": repr(tree)}))
""")


def _lark_child(cache_dir, **extra) -> dict:
    env = {**os.environ, "PTXDSL_CACHE_DIR": str(cache_dir)}
    env.pop("PTXDSL_CACHE", None)
    env.update(extra)
    out = subprocess.run([sys.executable, "-c", LARK_CHILD], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_lark_parser_tables_are_cached(tmp_path):
    first = _lark_child(tmp_path)
    assert any(m.startswith("Saving grammar to cache") for m in first["log"]), first["log"]
    (table,) = (tmp_path / "lark").iterdir()
    second = _lark_child(tmp_path)
    assert any(m.startswith("Loading grammar from cache") for m in second["log"]), second["log"]
    assert second["ast"] == first["ast"]
    table.write_bytes(table.read_bytes()[:500])                       # damaged: Lark rebuilds it
    third = _lark_child(tmp_path)
    assert any(m.startswith("Saving grammar to cache") for m in third["log"]), third["log"]
    assert third["ast"] == first["ast"]


def test_the_parser_builds_without_the_cache(tmp_path):
    off = _lark_child(tmp_path, PTXDSL_CACHE="0")
    assert not any("cache" in m for m in off["log"]), off["log"]
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert off["ast"] == _lark_child(tmp_path / "on")["ast"]


def test_each_kind_stays_under_its_cap_removing_the_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", str(3 * 1100 / (1 << 20)))     # room for three 1,000-byte entries
    for i, name in enumerate("abc"):
        cache.put("cubin", name, bytes(1000))
        os.utime(cache.entry_path("cubin", name), (time.time() - 100 + i, time.time() - 100 + i))
    assert cache.get("cubin", "a") == bytes(1000)           # a is used now: b is the least recently used
    cache.put("cubin", "d", bytes(1000))
    assert sorted(p.stem for p in (tmp_path / "cubin").iterdir()) == ["a", "c", "d"]
    got = cache.info()
    assert got["kinds"] == {"cubin": (3, 3 * (1000 + cache._HEADER))} and got["dir"] == tmp_path
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", "0")           # a cap of 0: only the entry just written stays
    cache.put("cubin", "e", bytes(10))
    assert [p.stem for p in (tmp_path / "cubin").iterdir()] == ["e"]
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", "lots")        # unreadable: the default
    assert cache.max_bytes() == cache.DEFAULT_MAX_MB << 20


def test_the_cache_command_shows_and_clears(tmp_path, monkeypatch, capsys):
    from ptxdsl.cli import main

    monkeypatch.setenv("PTXDSL_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("PTXDSL_CACHE", raising=False)
    monkeypatch.delenv("PTXDSL_CACHE_MAX_MB", raising=False)
    cache.put("cubin", "x", b"12345")
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {tmp_path / 'c'} (on; each kind kept under 1024 MiB: PTXDSL_CACHE_MAX_MB)" in out
    assert f"  cubin: 1 file(s), {5 + cache._HEADER} bytes" in out
    assert main(["cache", "clear"]) == 0
    assert f"removed {tmp_path / 'c'} (1 file(s)" in capsys.readouterr().out
    assert not (tmp_path / "c").exists()
    assert main(["cache", "info"]) == 0 and "  empty" in capsys.readouterr().out
