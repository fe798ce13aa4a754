"""`TmaCase`: one TMA operation on one tiled tensor map, with its data and the model's answer.

A case is plain data (a frozen dataclass of ints, strings and tuples), so its repr is the code that
builds it again: that is what makes a shrunk failing case a paste-able reproducer. `case_data(case)`
makes its global buffer and shared-memory image from `case.seed`; `expect(case, ...)` is what
`ptxdsl.reference` says the operation leaves behind. The GPU side (kernels, running, comparing) is in
`ptxdsl.testing.harness` and `ptxdsl.testing.differential`; the strategy that draws cases is
`ptxdsl.testing.strategies.tma_cases`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import reference as ref
from ..tensormap import DTYPES, TensorMapSpec
from . import oracle
from .tensors import random_values, tensor_bytes

OPS = ("load", "multicast", "store", "reduce")
GUARD = 256                   # bytes of global memory checked on each side of the tensor
SMEM_ALIGN = 1024             # the 128B swizzle repeat: every shared window starts on it


@dataclass(frozen=True)
class TmaCase:
    """One TMA operation on one tiled tensor map. Lists are innermost first, as in TensorMapSpec.

    op: load | multicast (a cluster of 2; `cta_mask` says which CTAs receive the box, `issuer` which
    cluster rank issues it) | store | reduce (`reduce_op`). `fill` is the byte a load kernel writes over
    its shared window first; `values` says how tensor and image data are drawn from `seed`: raw bits,
    small integers (signed zeros included) or finite floats of mixed magnitude.
    """

    op: str
    dtype: str
    dims: tuple
    strides: tuple                        # bytes, dimensions 1..rank-1
    box: tuple
    coords: tuple
    element_strides: tuple = ()
    swizzle: str = "none"
    oob_fill: str = "zero"
    reduce_op: str | None = None
    fill: int = 0xA5
    cta_mask: int = 0
    issuer: int = 0
    values: str = "bits"
    seed: int = 0

    @property
    def rank(self) -> int:
        return len(self.dims)

    def spec(self, address: int = 0) -> TensorMapSpec:
        """The case's tensor map, over `address` (0: not bound to memory yet)."""
        return TensorMapSpec(dtype=self.dtype, dims=tuple(self.dims), strides=tuple(self.strides),
                             box=tuple(self.box), element_strides=tuple(self.element_strides),
                             swizzle=self.swizzle, oob_fill=self.oob_fill, global_address=address)

    @property
    def ctas(self) -> int:
        """CTAs the case's kernel runs: 2 for a multicast, else 1."""
        return 2 if self.op == "multicast" else 1


def extent(case: TmaCase) -> int:
    """Bytes from the tensor's first element to the end of its last one, rounded up to 16."""
    return tensor_bytes(case.spec())


def smem_window(case: TmaCase) -> int:
    """Dynamic shared bytes a case's kernel gets: the model's box rounded up to 1024, plus 1024."""
    nbytes = ref.smem_layout(case.spec())[0]
    return -(-nbytes // SMEM_ALIGN) * SMEM_ALIGN + SMEM_ALIGN


def case_data(case: TmaCase) -> tuple[np.ndarray, np.ndarray]:
    """(global buffer, shared image): the tensor's bytes with GUARD bytes on each side, and the
    bytes a store/reduce kernel puts in shared memory (the whole window); both from case.seed."""
    rng = np.random.default_rng(case.seed)
    esize = DTYPES[case.dtype][1]
    body = GUARD + extent(case) + GUARD
    gmem = random_values(rng, case.dtype, body // esize, case.values)
    image = random_values(rng, case.dtype, smem_window(case) // esize, case.values)
    return gmem, image


def expect(case: TmaCase, gmem: np.ndarray, image: np.ndarray) -> dict[str, np.ndarray]:
    """What the model says the kernel leaves behind: {"smem0"/"smem1": window bytes} for loads,
    {"gmem": the whole global buffer, guards included} for stores and reductions."""
    spec = case.spec()
    window = smem_window(case)
    if case.op == "load":
        return {"smem0": oracle.smem_after_load(spec, gmem, case.coords, window=window, fill=case.fill,
                                                offset=GUARD)}
    if case.op == "multicast":
        got = oracle.smem_after_multicast(spec, gmem, case.coords, case.cta_mask, 2, window=window,
                                          fill=case.fill, offset=GUARD)
        return {f"smem{r}": got[r] for r in range(2)}
    if case.op == "store":
        return {"gmem": oracle.gmem_after_store(spec, gmem, case.coords, image, offset=GUARD)}
    return {"gmem": oracle.gmem_after_reduce(spec, gmem, case.coords, image, case.reduce_op, offset=GUARD)}


def receivers(case: TmaCase) -> tuple:
    """The cluster ranks whose barrier a case's TMA completes."""
    if case.op == "multicast":
        return tuple(r for r in range(2) if case.cta_mask >> r & 1)
    return (0,) if case.op == "load" else ()


def box_position(case: TmaCase) -> str:
    """'inside', 'crossing an edge' or 'outside': where the box lies against the tensor."""
    inside = ref.element_offsets(case.spec(), case.coords)[1]
    return "inside" if inside.all() else "crossing an edge" if inside.any() else "outside"


def events(case: TmaCase) -> list[str]:
    """Labels for Hypothesis statistics (hypothesis.event): operation, rank, dtype, swizzle, where the box lies."""
    spec = case.spec()
    out = [f"op={case.op}{'.' + case.reduce_op if case.reduce_op else ''}", f"rank={case.rank}",
           f"dtype={case.dtype}", f"swizzle={case.swizzle}", f"box {box_position(case)}"]
    if any(s > 1 for s in spec.estrides):
        out.append("element strides > 1")
    if case.oob_fill == "nan":
        out.append("oob_fill=nan")
    if case.op == "reduce":
        out.append(f"values={case.values}")
    return out
