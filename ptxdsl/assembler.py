"""PTX text -> cubin through nvJitLink (ptxas in-process), with a resource report and
ptxas's diagnostics mapped back to PTX lines and their source locations; with cache=True the cubin comes
from the on-disk cache (ptxdsl.cache) when the same PTX was assembled the same way before."""
from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from . import cache as _cache
from .errors import AssembleError, DSLError
from . import log

class _Pattern:
    """A regular expression compiled on first use (re keeps it): every cubin compile imports this module, and
    compiling its dozen patterns up front cost about a millisecond."""

    __slots__ = ("pattern", "flags")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags = pattern, flags

    def match(self, text: str):
        return re.match(self.pattern, text, self.flags)

    def fullmatch(self, text: str):
        return re.fullmatch(self.pattern, text, self.flags)

    def search(self, text: str):
        return re.search(self.pattern, text, self.flags)


_ARCH = _Pattern(r"sm_\d{2,3}[af]?")
_INPUT_NAME = "ptxdsl.ptx"
_TARGET = _Pattern(r"\s*\.target\s+(?P<sm>sm_\w+)")

_DIAG = _Pattern(r"ptxas (?:.*?, line (?P<line>\d+); )?(?P<kind>error|warning|fatal)\s*: (?P<text>.*)")
_INTERNAL = _Pattern(r"internal (?:compiler )?error", re.IGNORECASE)
_PTXAS_ENTRY = _Pattern(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)'")
_PTXAS_FUNC = _Pattern(r"ptxas info\s*: Function properties for (?P<name>\S+)")
_PTXAS_USAGE = _Pattern(r"ptxas(?: info)?\s*[:.]\s+(?P<items>(?:Used )?\d+ .*)")
_LINK_FUNC = _Pattern(r"info\s*: Function properties for '(?P<name>[^']+)':")
_LINK_USAGE = _Pattern(r"info\s*: (?P<items>used \d+ registers.*)")
_ITEM = _Pattern(r"(?:used )?(?P<n>\d+) (?:bytes )?(?P<what>.+)", re.IGNORECASE)
_FIELD_OF = {
    "registers": "registers",
    "barriers": "barriers",
    "smem": "shared_bytes",
    "cmem[0]": "const_bytes",
    "stack frame": "stack_frame",
    "spill stores": "spill_stores",
    "spill loads": "spill_loads",
}
_LINKER_FIELDS = frozenset({"registers", "shared_bytes", "const_bytes"})
# ptxas compiles nvJitLink's PTX inputs as relocatable code (ptxas -c) and then drops every setmaxnreg
# (C7504); a whole-program compile (the driver JIT's) keeps it. No nvJitLink or -Xptxas option changes that
# (measured with nvJitLink 13.5: -Xptxas -ewp, -kernels-used, -maxrregcount, -O3, ...).
_SETMAXNREG_DROPPED = _Pattern(r"\(C7504\)[^\n]*setmaxnreg")
_ELF = b"\x7fELF"
_WHEEL = "nvidia_nvjitlink-"


class Resources(NamedTuple):
    """One kernel's resource usage as reported by `-verbose`.

    Registers, static shared memory and cmem[0] bytes are the linker's numbers for the
    final cubin (ptxas does not know a module-scope .shared size before linking); barriers,
    stack frame and spills are ptxas's (the linker prints a nonzero barrier count even for
    kernels with no barrier instruction).
    """

    registers: int = 0
    shared_bytes: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0
    const_bytes: int = 0


class Assembled:
    """A cubin nvJitLink produced, the verbose log, and each entry's resources (parsed from the log when first
    asked for: a cache hit that only loads the cubin never reads them)."""

    __slots__ = ("cubin", "arch", "info_log", "_kernels")

    def __init__(self, cubin: bytes, arch: str, info_log: str, kernels: dict | None = None):
        self.cubin, self.arch, self.info_log, self._kernels = cubin, arch, info_log, kernels

    @property
    def kernels(self) -> dict[str, Resources]:
        if self._kernels is None:
            self._kernels = parse_resources(self.info_log)
        return self._kernels

    def __repr__(self) -> str:
        return f"Assembled(arch={self.arch!r}, {len(self.cubin)} bytes of cubin, kernels={list(self.kernels)})"

    def report(self) -> str:
        """One line per kernel: registers, barriers, shared/const/stack bytes, spills."""
        width = max((len(name) for name in self.kernels), default=0)
        return "\n".join(
            f"{name:<{width}}  {self.arch}: {r.registers} registers, {r.barriers} barriers, "
            f"{r.shared_bytes} B smem, {r.const_bytes} B cmem[0], {r.stack_frame} B stack, "
            f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads"
            for name, r in self.kernels.items()
        )

    def notes(self, ptx=None, origins=None) -> list:
        """ptxas's notes on a serialised wgmma pipeline in this log (ptxdsl.ptxas_notes.PtxasNote), mapped to the
        builder lines of `ptx` (the emitted PTX that was assembled) when it is given."""
        if "C75" not in self.info_log:
            return []
        from . import ptxas_notes

        return ptxas_notes.notes(self.info_log, ptx, origins)

    @property
    def setmaxnreg_dropped(self) -> bool:
        """True when ptxas dropped the module's setmaxnreg instructions (info C7504: nvJitLink compiles PTX as
        relocatable code); the driver JIT's whole-program compile keeps them."""
        return bool(_SETMAXNREG_DROPPED.search(self.info_log))


def nvjitlink_version() -> tuple[int, int]:
    """nvJitLinkVersion: the (major, minor) of the loaded nvJitLink library."""
    from cuda.bindings import nvjitlink

    major, minor = nvjitlink.version()
    return int(major), int(minor)


@functools.cache
def nvjitlink_release() -> str:
    """The nvJitLink release: '13.5.37' from the nvidia-nvjitlink wheel's metadata directory, found without
    loading the 60 MB library (so a cache hit costs no nvJitLink load; importlib.metadata alone takes ~20 ms
    to import) in the sys.path entries that hold an nvidia/ package folder (listing the standard library's
    folders too cost 0.25 ms); 'major.minor' from nvJitLinkVersion when no wheel is installed."""
    for entry in sys.path:
        if not os.path.isdir(os.path.join(entry or ".", "nvidia")):     # the wheel's files sit in nvidia/
            continue
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.startswith(_WHEEL) and n.endswith(".dist-info"):
                return n[len(_WHEEL):-len(".dist-info")]
    return "%d.%d" % nvjitlink_version()


# What this process assembled, by (PTX, options): the same module assembles once. nvJitLink 13.0 (seen on the
# H200) leaves ptxas's lines out of the info log when it compiles the same PTX again in one process, so a second
# report would read 0 barriers and no spills.
_MEMO: dict = {}
_MEMO_SIZE = 64


def assemble(ptx, arch: str = "sm_90a", *, origins: Mapping[int, object] | None = None,
             options: Sequence[str] = (), cache: bool = False, strict: bool | None = None) -> Assembled:
    """Assemble one PTX module for `arch` with nvJitLink (`-arch=<arch> -verbose` plus `options`).

    `ptx` is PTX text or an emitted `ptxdsl.PTX` (whose line origins are then used). `origins` maps
    1-based PTX line numbers to source locations; an AssembleError names the PTX line and its origin
    for every ptxas diagnostic that points at a line. cache=True looks the result up in the on-disk cache
    first (keyed by the PTX, the arch, the options, the nvJitLink release and ptxdsl's version) and stores it
    there after assembling; failures are never cached.

    ptxas's notes on a serialised wgmma pipeline (ptxdsl.ptxas_notes) raise an AssembleError (rule
    'ptxas-serialized') for the kernels made with strict=True (an emitted PTX knows them), for every kernel with
    strict=True here, for none with strict=False.
    """
    strict_kernels = set()
    if not isinstance(ptx, str):
        origins = ptx.origins if origins is None else origins
        strict_kernels = {name for name, info in ptx.kernels.items() if getattr(info, "strict", False)}
        ptx = ptx.text
    if strict is not None:
        strict_kernels = strict or set()
    _check_arch(arch)
    if isinstance(options, str):
        raise DSLError(f"options={options!r} must be a sequence of option strings, not one string")
    opts = [f"-arch={arch}", "-verbose", *options]
    name = None
    if cache and _cache.enabled():
        name = cache_key(ptx, opts)
        with log.stage("cache lookup", arch):
            hit = _cached(name, arch)
        if hit is not None:
            log.debug("cache hit: cubin %s (%s, %d bytes)", name[:16], arch, len(hit.cubin))
            return _strict(hit, ptx, origins, strict_kernels)
        log.debug("cache miss: cubin %s (%s)", name[:16], arch)
    memo = (ptx, tuple(opts))
    result = _MEMO.get(memo)
    if result is None:
        with log.stage("assemble", arch):
            result = _assemble(ptx, arch, opts, origins)
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[memo] = result
    if name is not None:
        _store(name, result)
    return _strict(result, ptx, origins, strict_kernels)


def _strict(result: "Assembled", ptx: str, origins, strict_kernels) -> "Assembled":
    """The result, unless ptxas serialised the wgmma pipeline of a kernel in strict_kernels (AssembleError)."""
    if strict_kernels and "C75" in result.info_log:
        from . import ptxas_notes

        ptxas_notes.refuse(ptxas_notes.notes(result.info_log, ptx, origins), strict_kernels)
    return result


def cache_key(ptx: str, opts: Sequence[str]) -> str:
    """The cache key of a PTX module assembled with nvJitLink options `opts` (the -arch included)."""
    from . import __version__

    return _cache.key("ptxdsl", __version__, "nvJitLink", nvjitlink_release(), *opts, "ptx", ptx)


def _cached(name: str, arch: str) -> Assembled | None:
    """The Assembled stored under `name`; None when absent or when the payload is not (log, ELF cubin)."""
    payload = _cache.get("cubin", name)
    if payload is None:
        return None
    n = int.from_bytes(payload[:8], "little")
    info_log, cubin = payload[8:8 + n].decode(errors="replace"), payload[8 + n:]
    if len(payload) < 8 + n or not cubin.startswith(_ELF):
        log.debug("cache: entry %s holds no cubin; rebuilding", name[:16])
        return None
    return Assembled(cubin, arch, info_log)


def _store(name: str, result: Assembled) -> None:
    """Cache the result, unless the nvJitLink that made it is not the release the key names."""
    release = nvjitlink_release()
    loaded = "%d.%d" % nvjitlink_version()
    if release != loaded and not release.startswith(loaded + "."):
        log.debug("cache: not storing %s: nvJitLink %s is loaded, the installed wheel is %s", name[:16],
                     loaded, release)
        return
    info = result.info_log.encode()
    path = _cache.put("cubin", name, len(info).to_bytes(8, "little") + info + result.cubin)
    if path is not None:
        log.debug("cache store: cubin %s -> %s", name[:16], path)


def _assemble(ptx: str, arch: str, opts: list, origins) -> Assembled:
    from cuda.bindings import nvjitlink

    data = ptx.encode()
    try:
        handle = nvjitlink.create(len(opts), opts)
    except nvjitlink.nvJitLinkError as e:
        raise AssembleError(f"nvJitLink refused the options {' '.join(opts)}: {e}", rule="nvJitLink") from None
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), _INPUT_NAME)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            error_log = _read(handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            raise _assemble_error(error_log, str(e), arch, ptx, origins or {}) from None
        info_log = _read(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        cubin = _read_bytes(handle, nvjitlink.get_linked_cubin_size, nvjitlink.get_linked_cubin)
    finally:
        nvjitlink.destroy(handle)
    return Assembled(cubin=cubin, arch=arch, info_log=info_log, kernels=parse_resources(info_log))


def parse_resources(info_log: str) -> dict[str, Resources]:
    """Each entry function's Resources from nvJitLink's `-verbose` info log, sorted by name."""
    entries: set[str] = set()
    ptxas: dict[str, dict[str, int]] = {}
    linker: dict[str, dict[str, int]] = {}
    table, current = ptxas, None
    for line in info_log.splitlines():
        if m := _PTXAS_ENTRY.match(line):
            entries.add(m["name"])
        elif m := _PTXAS_FUNC.match(line):
            table, current = ptxas, m["name"]
        elif m := _LINK_FUNC.match(line):
            table, current = linker, m["name"]
            entries.add(current)
        elif current is not None and (m := _PTXAS_USAGE.match(line) or _LINK_USAGE.match(line)):
            table.setdefault(current, {}).update(_usage_items(m["items"]))
    kernels = {}
    for name in sorted(entries):
        values = dict(ptxas.get(name, {}))
        values.update((k, v) for k, v in linker.get(name, {}).items() if k in _LINKER_FIELDS)
        kernels[name] = Resources(**values)
    return kernels


def _usage_items(items: str) -> dict[str, int]:
    """`Used 5 registers, used 1 barriers, 1024 bytes smem` -> {registers: 5, ...}."""
    out = {}
    for item in items.split(","):
        m = _ITEM.fullmatch(item.strip())
        if m and m["what"] in _FIELD_OF:
            out[_FIELD_OF[m["what"]]] = int(m["n"])
    return out


def _assemble_error(error_log: str, status: str, arch: str, ptx: str,
                    origins: Mapping[int, object]) -> AssembleError:
    """An AssembleError listing ptxas's errors first, each with its PTX line and origin."""
    ptx_lines = ptx.split("\n")
    diags, other = [], []
    for line in error_log.splitlines():
        if m := _DIAG.match(line):
            diags.append(m)
        elif line.strip() and not line.startswith("ERROR NVJITLINK_"):
            other.append(line.strip())
    diags.sort(key=lambda m: m["kind"] != "error")
    parts, first_loc = [], None
    for m in diags:
        parts.append(m["text"] if m["kind"] != "warning" else f"warning: {m['text']}")
        if m["line"] is None:
            continue
        n = int(m["line"])
        text = ptx_lines[n - 1].strip() if 0 < n <= len(ptx_lines) else "<past the end of the PTX>"
        origin = origins.get(n)
        if origin is not None and first_loc is None and m["kind"] != "warning":
            first_loc = origin
        where = f"PTX line {n}" + (f" (from {origin})" if origin is not None else "")
        parts.append(f"  {where}: {text}")
    parts.extend(other)
    for n, line in enumerate(ptx_lines, 1):
        if (m := _TARGET.match(line)) and m["sm"] != arch:
            parts.append(f"PTX line {n}: {line.strip()} (assembling for {arch})")
    parts.append(f"nvJitLink {status}, -arch={arch}")
    if any(_INTERNAL.search(m["text"]) for m in diags) or any(_INTERNAL.search(line) for line in other):
        parts.insert(0, "ptxas failed inside itself (an internal compiler error), not on a rule of the PTX: "
                        "please report the kernel to ptxdsl, which should refuse what ptxas cannot compile")
        return AssembleError("\n".join(parts), loc=first_loc, rule="ptxas-internal")
    return AssembleError("\n".join(parts), loc=first_loc, rule="ptxas")


def _check_arch(arch: object) -> None:
    """DSLError unless arch looks like sm_NN, sm_NNa or sm_NNf."""
    if not isinstance(arch, str) or not _ARCH.fullmatch(arch):
        raise DSLError(f"arch={arch!r} is not a GPU architecture; expected sm_NN, sm_NNa or sm_NNf "
                       f"(e.g. 'sm_90a', 'sm_100a')")


def _read_bytes(handle, size_of, read) -> bytes:
    """Call an nvJitLink get-size / get-buffer pair and return the buffer."""
    size = size_of(handle)
    buf = bytearray(size)
    if size:
        read(handle, buf)
    return bytes(buf)


def _read(handle: int, size_of, read) -> str:
    """A NUL-terminated nvJitLink log as text."""
    return _read_bytes(handle, size_of, read).rstrip(b"\0").decode(errors="replace")
