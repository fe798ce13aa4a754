"""The on-disk cache: cubins nvJitLink made (keyed by everything that shapes them) and the Lark parser tables.

Where: `PTXDSL_CACHE_DIR` when set, else the platform's user cache directory (`$XDG_CACHE_HOME/ptxdsl` or
`~/.cache/ptxdsl` on Linux, `~/Library/Caches/ptxdsl` on macOS, `%LOCALAPPDATA%\\ptxdsl\\Cache` on Windows).
`PTXDSL_CACHE=0` turns it off. Each kind of entry is kept under a size cap (`PTXDSL_CACHE_MAX_MB`, default
1024 MiB): a write that takes the kind past it removes the least recently used entries (a read marks an entry
used). `ptxdsl cache [info|clear]` shows or empties it. Entries are written to a temporary file and renamed into place (`os.replace`),
so processes that write the same entry at once never leave a torn one; each entry carries its length and
BLAKE2b-256 digest, checked on every read, and a damaged entry is dropped (and rebuilt by the caller), never
returned. The cache never fails a compile: a directory that cannot be written just means no caching.

Keys and digests are BLAKE2b from CPython's own `_blake2` module where there is one: `import hashlib` loads
OpenSSL, about 3 ms of a first compile, which a warm cache would otherwise spend before its file read.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

try:
    from _blake2 import blake2b
except ImportError:                     # an interpreter without it: hashlib's (the same function)
    from hashlib import blake2b

from . import log

MAGIC = b"ptxdsl-cache-2\n"
DEFAULT_MAX_MB = 1024
_HEADER = len(MAGIC) + 32 + 8          # magic, BLAKE2b-256 of the payload, payload length (little endian)
_OFF = ("0", "false", "no", "off")


def enabled() -> bool:
    """False when PTXDSL_CACHE is 0/false/no/off."""
    return os.environ.get("PTXDSL_CACHE", "1").strip().lower() not in _OFF


def cache_dir() -> Path:
    """The cache's root directory (it may not exist yet)."""
    override = os.environ.get("PTXDSL_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else home / "AppData" / "Local") / "ptxdsl" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "ptxdsl"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else home / ".cache") / "ptxdsl"


def key(*parts: str | bytes) -> str:
    """A hex BLAKE2b-256 over the parts (each length-prefixed, so no two part lists collide)."""
    h = blake2b(digest_size=32)
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def entry_path(kind: str, name: str) -> Path:
    """Where entry `name` of `kind` ('cubin', ...) lives."""
    return cache_dir() / kind / f"{name}.bin"


def get(kind: str, name: str) -> bytes | None:
    """The payload stored under kind/name, or None when absent, disabled or damaged (a damaged entry is removed)."""
    if not enabled():
        return None
    path = entry_path(kind, name)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    payload = _unwrap(data)
    if payload is None:
        log.debug("cache: dropping damaged entry %s (%d bytes)", path, len(data))
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        with contextlib.suppress(OSError):
            os.utime(path)                  # used now: the eviction removes the least recently used first
    return payload


def put(kind: str, name: str, payload: bytes) -> Path | None:
    """Store payload under kind/name atomically (temp file + os.replace); the path, or None if not written."""
    if not enabled():
        return None
    path = entry_path(kind, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, _wrap(payload))
    except OSError as e:
        log.debug("cache: cannot write %s: %s", path, e)
        return None
    evict(kind, keep=path)
    return path


def max_bytes() -> int:
    """The size cap of each kind of entry: PTXDSL_CACHE_MAX_MB MiB (default 1024; an unreadable value: the
    default)."""
    text = os.environ.get("PTXDSL_CACHE_MAX_MB", "").strip()
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return max(0, int(mb * (1 << 20))) if mb == mb else DEFAULT_MAX_MB << 20


def _entries(kind: str) -> list:
    """(mtime, size, path) of each entry of a kind, oldest use first."""
    out = []
    try:
        with os.scandir(cache_dir() / kind) as it:
            for e in it:
                if e.name.endswith(".bin"):
                    with contextlib.suppress(OSError):
                        st = e.stat()
                        out.append((st.st_mtime, st.st_size, Path(e.path)))
    except OSError:
        return []
    return sorted(out)


def evict(kind: str, keep: Path | None = None) -> int:
    """Remove the least recently used entries of a kind until it is under max_bytes() (never `keep`, the entry
    just written); the number removed."""
    entries = _entries(kind)
    total, cap, removed = sum(size for _, size, _ in entries), max_bytes(), 0
    for _, size, path in entries:
        if total <= cap:
            break
        if path == keep:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
            removed += 1
    if removed:
        log.debug("cache: removed %d %s entries over the %d-byte cap", removed, kind, cap)
    return removed


def info() -> dict:
    """What `ptxdsl cache info` prints: the directory, whether the cache is on, the cap, and per kind of entry
    its count and bytes."""
    kinds = {}
    root = cache_dir()
    with contextlib.suppress(OSError):
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            files = [f for f in d.iterdir() if f.is_file()]
            kinds[d.name] = (len(files), sum(f.stat().st_size for f in files))
    return {"dir": root, "enabled": enabled(), "max_bytes": max_bytes(), "kinds": kinds}


def write_atomic(path: Path, data: bytes) -> None:
    """Write data to path through a temporary file in the same directory, renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def clear() -> None:
    """Remove the whole cache directory."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


def _wrap(payload: bytes) -> bytes:
    return MAGIC + blake2b(payload, digest_size=32).digest() + len(payload).to_bytes(8, "little") + payload


def _unwrap(data: bytes) -> bytes | None:
    """The payload of a stored entry, or None unless the magic, the length and the digest all check out."""
    if len(data) < _HEADER or not data.startswith(MAGIC):
        return None
    digest = data[len(MAGIC):len(MAGIC) + 32]
    size = int.from_bytes(data[len(MAGIC) + 32:_HEADER], "little")
    payload = data[_HEADER:]
    if len(payload) != size or blake2b(payload, digest_size=32).digest() != digest:
        return None
    return payload
