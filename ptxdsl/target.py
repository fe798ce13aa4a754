"""Targets (.target sm_XX and .version) and the floor each instruction needs.

Every op declares a `Req`: the set of .target values that accept it and the lowest PTX ISA version
it needs. A kernel's target is the lowest one that every op accepts; its .version is the highest of
the target's own minimum and the ops' versions (numbers measured with ptxas through nvJitLink; the tests
hold every declaration to it).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import TargetError

# Lowest first: the default target is the first one every op of a kernel accepts.
TARGETS: tuple[str, ...] = ("sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_120a")

# The lowest .version ptxas 13.0 accepts for an empty kernel on each target.
TARGET_MIN_PTX: dict[str, tuple[int, int]] = {
    "sm_90": (7, 8), "sm_90a": (8, 0), "sm_100": (8, 6), "sm_100a": (8, 6),
    "sm_100f": (8, 8), "sm_103a": (8, 8), "sm_110a": (9, 0), "sm_120a": (8, 7),
}

# The newest PTX ISA ptxdsl writes: the newest nvJitLink 13.5 assembles (measured). The H200's driver (CUDA
# 13.0) JIT-loads up to 9.0.
NEWEST_PTX: tuple[int, int] = (9, 5)

ALL = frozenset(TARGETS)
# Arch-specific (a/f) targets: tensormap.replace, setmaxnreg.
ARCH_SPECIFIC = frozenset({"sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_120a"})
SM100_UP = frozenset({"sm_100", "sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_120a"})
# The sm_100a family: .cta_group, gather4/im2col::w to shared::cluster, scatter4, im2col::w::128.
SM100A = frozenset({"sm_100a", "sm_100f", "sm_103a", "sm_110a"})
# Hopper's own: wgmma (ptxas rejects it on plain sm_90 and on every later target; Blackwell has tcgen05).
SM90A = frozenset({"sm_90a"})


def fmt_ptx(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


@dataclass(frozen=True)
class Req:
    """What one instruction form needs: accepted targets and the lowest .version."""

    ptx: tuple[int, int] = (7, 8)
    targets: frozenset = ALL

    def __and__(self, other: "Req") -> "Req":
        if other.ptx <= self.ptx and other.targets >= self.targets:
            return self                      # the usual case (BASE): nothing to narrow
        return Req(max(self.ptx, other.ptx), self.targets & other.targets)

    def describe(self) -> str:
        names = [t for t in TARGETS if t in self.targets]
        span = names[0] if len(names) == 1 else ", ".join(names)
        return f".version >= {fmt_ptx(self.ptx)} on one of {span}"


BASE = Req()


@dataclass(frozen=True)
class Target:
    """A .target architecture and a .version, e.g. Target('sm_90a', (8, 0))."""

    arch: str
    ptx: tuple[int, int]

    def __post_init__(self):
        if self.arch not in TARGET_MIN_PTX:
            raise TargetError(f"target={self.arch!r} is not known; expected one of {', '.join(TARGETS)}")

    @property
    def version(self) -> str:
        return fmt_ptx(self.ptx)

    def __str__(self) -> str:
        return f"{self.arch} (PTX {self.version})"


def parse_ptx_version(v) -> tuple[int, int]:
    """Accept (8, 0), '8.0' or 8.0; TargetError for anything else or a version ptxdsl cannot write."""
    try:
        if isinstance(v, tuple) and len(v) == 2:
            version = (int(v[0]), int(v[1]))
        elif isinstance(v, (str, float, int)) and not isinstance(v, bool):
            major, _, minor = str(v).partition(".")
            version = (int(major), int(minor or 0))
        else:
            raise ValueError
    except (ValueError, TypeError):
        raise TargetError(f"ptx={v!r} is not a PTX ISA version such as '8.0'") from None
    if not (7, 0) <= version <= NEWEST_PTX:
        raise TargetError(f"ptx={v!r}: ptxdsl writes PTX ISA 7.0 to {fmt_ptx(NEWEST_PTX)} (the newest its nvJitLink "
                          f"assembles)")
    return version


def accepts(arch: str, req: Req) -> tuple[int, int] | None:
    """The .version that `arch` needs for `req`, or None when `arch` rejects it."""
    if arch not in req.targets:
        return None
    return max(TARGET_MIN_PTX[arch], req.ptx)


def _what(w) -> str:
    """An op's name for messages (ops are passed unprinted: naming them costs an emit)."""
    return w if isinstance(w, str) else w.what


def resolve(reqs, arch: str | None = None, ptx=None) -> Target:
    """The target for a kernel whose ops have `reqs` ((op or name, Req, loc) triples).

    With `arch`/`ptx` unset, the lowest target every op accepts and the lowest .version they need.
    A pinned arch that rejects an op, or a pinned .version below an op's floor, raises TargetError
    naming the instruction and where it was built.
    """
    reqs = list(reqs)
    if arch is None:
        need = BASE
        for _, r, _ in reqs:
            need = need & r
        candidates = [t for t in TARGETS if t in need.targets]
        if not candidates:
            what, r, loc = _first_conflict(reqs)
            raise TargetError(f"no single target accepts every instruction: {_what(what)} needs {r.describe()}", loc)
        arch = candidates[0]
    else:
        Target(arch, (0, 0))  # validates the name
    need_ptx = TARGET_MIN_PTX[arch]
    for what, r, loc in reqs:
        v = accepts(arch, r)
        if v is None:
            raise TargetError(f"{_what(what)} is not available on .target {arch}; it needs {r.describe()}", loc,
                              rule="target")
        need_ptx = max(need_ptx, v)
    if ptx is not None:
        pinned = parse_ptx_version(ptx)
        if pinned < need_ptx:
            what, loc = _first_needing(reqs, arch, pinned)
            raise TargetError(f".version {fmt_ptx(pinned)} is below the {fmt_ptx(need_ptx)} that {_what(what)} needs "
                              f"on .target {arch}", loc, rule="target")
        need_ptx = pinned
    return Target(arch, need_ptx)


def _first_conflict(reqs):
    acc = BASE
    for what, r, loc in reqs:
        acc = acc & r
        if not acc.targets:
            return what, r, loc
    return reqs[-1]


def _first_needing(reqs, arch, pinned):
    for what, r, loc in reqs:
        if max(TARGET_MIN_PTX[arch], r.ptx) > pinned:
            return what, loc
    return f"target {arch}", None


def requirements(kernels):
    """(op, Req, loc) for every op of the kernels in program order, and the cluster directives' floors."""
    out = []
    for k in kernels:
        for ins in k.walk():
            out.append((ins.op, ins.op.requires(), ins.loc))
        for key in ("reqnctapercluster", "explicitcluster", "maxclusterrank"):
            if key in k.directives:
                out.append((f".{key}", Req((7, 8)), k.loc))
    return out


def resolve_target(kernels, arch=None, ptx=None) -> Target:
    """The target of a module of `kernels`: pinned by `arch`/`ptx` or by the first kernel that pins one, else
    the lowest that every instruction accepts."""
    arch = arch or next((k.arch for k in kernels if k.arch), None)
    ptx = ptx or next((k.ptx for k in kernels if k.ptx), None)
    return resolve(requirements(kernels), arch, ptx)
