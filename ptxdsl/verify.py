"""Whole-kernel checks run when a kernel is closed: capacity and the target floor."""
from __future__ import annotations

from .errors import VerifyError
from .ir import MAX_SHARED_PER_BLOCK, MAX_STATIC_SHARED, Kernel


def verify_kernel(k: Kernel) -> None:
    """Raise VerifyError for the first broken rule, naming the rule and the line."""
    static = k.static_shared_bytes
    if static > MAX_STATIC_SHARED:
        big = max((a for a in k.shared if not a.dynamic), key=lambda a: a.nbytes)
        raise VerifyError(f"kernel {k.name!r} declares {static} bytes of static shared memory, over the "
                          f"{MAX_STATIC_SHARED} ptxas allows; declare large buffers with dynamic=True",
                          big.loc, rule="smem-capacity")
    total = static + k.dynamic_shared_bytes
    if total > MAX_SHARED_PER_BLOCK:
        last = k.shared[-1]
        raise VerifyError(f"kernel {k.name!r} needs {total} bytes of shared memory, over the "
                          f"{MAX_SHARED_PER_BLOCK}-byte per-block limit of sm_90", last.loc, rule="smem-capacity")
    from .emit import resolve_target

    resolve_target([k])
