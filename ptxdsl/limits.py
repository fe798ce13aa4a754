"""ptxas's limits on a kernel as a whole, checked before ptxas sees the module (it would reject it, or abort
the process): identifier length, parameter space, register budgets against setmaxnreg."""
from __future__ import annotations

import math
from numbers import Integral

from .errors import DSLError, LaunchError

# Longest identifier ptxdsl writes. nvJitLink 13.5 assembling with -verbose aborted the whole process
# (malloc: invalid size) for a 100,000-character kernel name; 70,000 still assembled.
MAX_IDENTIFIER = 16384
# Bytes of kernel parameters ptxas takes: 0x1100 below PTX ISA 8.1, 0x7ffc from 8.1 (measured on sm_90, sm_90a
# and sm_100a with nvJitLink 13.5).
PARAM_BYTES_OLD, PARAM_BYTES = 4352, 32764
PARAM_BYTES_FROM = (8, 1)
# A launch's dimensions as the driver takes them (cuLaunchKernelEx), and the threads of one block.
DIM_MAX = {"grid": (2**31 - 1, 65535, 65535), "block": (1024, 1024, 64), "cluster": (16, 16, 16)}
MAX_BLOCK_THREADS = 1024


def identifier(what: str, name: str) -> None:
    """DSLError for an identifier longer than ptxdsl writes."""
    if len(name) > MAX_IDENTIFIER:
        raise DSLError(f"{what} of {len(name)} characters: identifiers are at most {MAX_IDENTIFIER} characters "
                       f"(nvJitLink aborted the process on a 100,000-character name)")


def param_bytes(k) -> int:
    """The bytes of the kernel's .param space, each parameter aligned to itself."""
    end = 0
    for p in k.params:
        size = 128 if p.kind == "tensormap" else p.type.nbytes
        end = -(-end // p.align) * p.align + size
    return end


def check_kernel(k, target) -> None:
    """The kernel's parameter space against the target's .version, and its setmaxnreg.dec counts against its
    .maxnreg (ptxas rejects a decrease to more registers than the kernel may have)."""
    limit = PARAM_BYTES if target.ptx >= PARAM_BYTES_FROM else PARAM_BYTES_OLD
    used = param_bytes(k)
    if used > limit:
        more = "" if limit == PARAM_BYTES else "; .version 8.1 and later allow 32764"
        raise DSLError(f"kernel {k.name!r} has {used} bytes of parameters, over the {limit} ptxas allows at .version "
                       f"{target.version}{more}", k.loc)
    # ptxas: "setmaxnreg.dec has register count (N) which is larger than the largest temporal register count in
    # the program": a decrease may not name more registers than the kernel's .maxnreg or any setmaxnreg.inc gives.
    counts = {"setmaxnreg.inc": [], "setmaxnreg.dec": []}
    for ins in k.walk():
        mnemonic = type(ins.op).mnemonic
        if mnemonic in counts and isinstance(getattr(ins.op, "n", None), int):
            counts[mnemonic].append((ins.op.n, ins.loc))
    bounds = [n for n, _ in counts["setmaxnreg.inc"]]
    maxnreg = k.directives.get("maxnreg")
    if maxnreg is not None:
        bounds.append(maxnreg)
    if not bounds:
        return
    top = max(bounds)
    for n, loc in counts["setmaxnreg.dec"]:
        if n > top:
            what = f".maxnreg {maxnreg}" if maxnreg == top else f"setmaxnreg.inc {top}"
            raise DSLError(f"setmaxnreg.dec to {n} registers in a kernel whose largest register count is {top} "
                           f"({what}): ptxas refuses a decrease above it", loc)


def launch_dims(value, what: str) -> tuple[int, int, int]:
    """`value` (an int or 1 to 3 ints) as (x, y, z), each in the driver's range for `what` ("grid", "block" or
    "cluster"); LaunchError naming the value and the rule otherwise (a float, inf, a string, 0, too many)."""
    try:
        dims = (value,) if isinstance(value, Integral) else None if isinstance(value, str) else tuple(value)
    except TypeError:
        dims = None
    if dims is None or not 1 <= len(dims) <= 3 or not all(isinstance(d, Integral) for d in dims):
        raise LaunchError(f"{what}={value!r} breaks '{what} is an int or 1 to 3 ints (x, y, z)'",
                          rule=f"launch.{what}-shape")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, d, top in zip("xyz", dims, DIM_MAX[what]):
        if not 1 <= d <= top:
            raise LaunchError(f"{what}.{axis}={d} breaks '{what}.{axis} is 1..{top}'", rule=f"launch.{what}-range")
    return dims


def block_threads(block: tuple, limit: int = MAX_BLOCK_THREADS, name: str | None = None) -> int:
    """The threads of a block (x, y, z); LaunchError over `limit` (the device's 1,024, or a kernel's lower)."""
    threads = math.prod(block)
    if threads > limit:
        of = f" of kernel {name!r}" if name else ""
        raise LaunchError(f"block={tuple(block)} ({threads} threads) breaks 'a block{of} has at most {limit} "
                          f"threads'", rule="launch.block-threads")
    return threads
