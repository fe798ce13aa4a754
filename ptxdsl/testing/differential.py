"""Differential testing of TMA operations: a `TmaCase` run on the GPU against `ptxdsl.reference`.

    from ptxdsl.testing import TmaCase, check_case
    check_case(TmaCase(op="load", dtype="f32", dims=(16, 8), strides=(64,), box=(16, 8), coords=(0, 0),
                       swizzle="128B"))

`run_case()` runs one case with the harness kernel of its shape (`ptxdsl.testing.harness`) and collects
what the device left behind; `compare()` holds that bit-exactly against the model's answer
(`ptxdsl.testing.cases.expect`); `check_case()` does both, counts the case in a `Report` and raises the
`Mismatch` subclass of the first problem, whose message shows where the memory differs and ends with a
runnable reproducer (`snippet(check_case, case)`). Draw cases with `ptxdsl.testing.strategies.tma_cases`.

Two rules keep every drawn case away from an illegal-instruction error, which would end the CUDA
context of the whole process: the innermost coordinate is a multiple of 16 bytes, and a store or
reduction starts at non-negative coordinates. A CUDA error during a case raises `ContextLost` (not an
Exception, so Hypothesis stops at once instead of shrinking on a dead device), and every later case of
the process is refused.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .. import reference as ref
from ..tensormap import DTYPES, FLOAT_DTYPES
from ..types import scalar_type, to_numpy
from . import harness, oracle
from .cases import GUARD, SMEM_ALIGN, TmaCase, case_data, expect, extent, receivers, smem_window
from .harness import INFO_WORDS, STATUS_DONE, THREADS
from .report import Report  # noqa: F401  (ptxdsl.testing.differential.Report)
from .reproduce import snippet


@dataclass
class Outcome:
    """One case run on the GPU: its data, the model's answer and what the device left behind."""

    case: TmaCase
    gmem: np.ndarray
    image: np.ndarray
    expected: dict
    observed: dict
    status: tuple                         # per CTA: 0 (did not wait), STATUS_DONE or STATUS_TIMEOUT
    smem_base: tuple                      # per CTA: shared address of the box


class Mismatch(AssertionError):
    """The GPU and the model disagree on a case; subclasses name the kind (for Hypothesis, one bug each)."""

    category = "mismatch"


_MISMATCH_KINDS: dict[str, type] = {}


def mismatch_kind(category: str) -> type:
    """The Mismatch subclass of one category ('load-smem', 'reduce-gmem', 'multicast-timeout', ...)."""
    if category not in _MISMATCH_KINDS:
        name = "Mismatch_" + "".join(c if c.isalnum() else "_" for c in category)
        _MISMATCH_KINDS[category] = type(name, (Mismatch,), {"category": category})
    return _MISMATCH_KINDS[category]


class ContextLost(BaseException):
    """A CUDA error during a case: the context, and every later case of this process, are gone. Not an
    Exception, so Hypothesis stops at once instead of shrinking on a dead device."""


LOST: list = []                           # [(case, message, buffers)] once a CUDA error ended the context


def run_case(case: TmaCase) -> Outcome:
    """Run a case on the current GPU and collect its shared-memory windows or global buffer."""
    from ..errors import CudaError
    from ..runtime import DeviceArray

    gmem, image = case_data(case)
    expected = expect(case, gmem, image)
    window = smem_window(case)
    launch = harness.launcher(harness.kernel_key(case))
    buffers = [DeviceArray.to_device(gmem), DeviceArray.zeros((case.ctas * INFO_WORDS,), np.uint32)]
    tensor, info = buffers
    spec = case.spec(tensor.ptr + GUARD)
    coords = [int(c) for c in case.coords]
    try:
        if case.op in ("load", "multicast"):
            out = DeviceArray.zeros((case.ctas * window,), np.uint8)
            buffers.append(out)
            args = [spec, out, info, window, case.fill * 0x01010101, ref.tx_bytes(spec), *coords]
            if case.op == "multicast":
                args += [case.cta_mask, case.issuer]
            launch(*args, grid=case.ctas, block=THREADS, shared_bytes=window,
                   cluster=(2, 1, 1) if case.op == "multicast" else None, sync=True)
            raw = out.to_host()
            observed = {f"smem{r}": raw[r * window:(r + 1) * window] for r in range(case.ctas)}
        else:
            src = DeviceArray.to_device(image)
            buffers.append(src)
            launch(spec, src, info, window, *coords, grid=1, block=THREADS, shared_bytes=window, sync=True)
            observed = {"gmem": tensor.to_host()}
        words = info.to_host().reshape(case.ctas, INFO_WORDS)
    except CudaError as e:
        LOST.append((case, str(e), buffers))    # freeing them now would raise again
        raise ContextLost(f"CUDA error, the context is lost: {e}\n\n{case_snippet(case)}") from e
    finally:
        if not LOST:
            for b in buffers:
                b.free()
    return Outcome(case, gmem, image, expected, observed, tuple(int(w) for w in words[:, 0]),
                   tuple(int(w) for w in words[:, 1]))


def compare(outcome: Outcome) -> list[tuple[str, dict]]:
    """[(category, details)] of every disagreement between the device and the model."""
    case = outcome.case
    problems = []
    for r in receivers(case):
        if outcome.status[r] != STATUS_DONE:
            problems.append((f"{case.op}-timeout", {"cta": r, "status": outcome.status[r],
                                                    "tx": ref.tx_bytes(case.spec())}))
    for r, base in enumerate(outcome.smem_base):
        if base % SMEM_ALIGN:
            problems.append(("harness-smem-align", {"cta": r, "smem_base": hex(base)}))
    for name, exp in outcome.expected.items():
        obs = outcome.observed[name]
        if exp.tobytes() != obs.tobytes():
            where = "gmem" if name == "gmem" else "smem"
            problems.append((f"{case.op}-{where}", diff(outcome, name)))
    return problems


def _element_text(dtype: str, raw: bytes) -> str:
    value = np.frombuffer(raw, to_numpy(scalar_type(dtype)))[0]
    return f"0x{raw[::-1].hex()} ({value!r})" if dtype in FLOAT_DTYPES else f"0x{raw[::-1].hex()} ({int(value)})"


def _element_coords(case: TmaCase, off: int) -> str:
    """Tensor coordinates (innermost first) of the element at byte `off` of the tensor, or where it lies."""
    esize = DTYPES[case.dtype][1]
    if off < 0:
        return "guard before the tensor"
    if off >= extent(case):
        return "guard after the tensor"
    rem, idx = off - off % esize, []
    for pitch in reversed(case.strides):
        idx.append(rem // pitch)
        rem %= pitch
    idx.append(rem // esize)
    idx = idx[::-1]
    inside = all(i < d for i, d in zip(idx, case.dims))
    return f"{tuple(idx)}" + ("" if inside else " (row padding)")


def diff(outcome: Outcome, name: str, limit: int = 8) -> dict:
    """A summary of where one buffer differs: counts, then the first few chunks or elements."""
    case = outcome.case
    exp, obs = outcome.expected[name], outcome.observed[name]
    bad = np.flatnonzero(exp != obs)
    out = {"buffer": name, "bytes": int(exp.size), "bad_bytes": int(bad.size),
           "first_bad": int(bad[0]), "last_bad": int(bad[-1])}
    if name != "gmem":
        nbytes = ref.smem_layout(case.spec())[0]
        out["model_box_bytes"] = nbytes
        out["bad_beyond_box"] = int((bad >= nbytes).sum())
        out["chunks"] = [{"offset": int(c) * 16, "expected": exp[c * 16:c * 16 + 16].tobytes().hex(),
                          "observed": obs[c * 16:c * 16 + 16].tobytes().hex()}
                         for c in np.unique(bad // 16)[:limit]]
        return out
    esize = DTYPES[case.dtype][1]
    spec = case.spec()
    offsets, inside = ref.element_offsets(spec, case.coords)
    src = dict(zip(offsets[inside].tolist(), ref.smem_elements(spec, outcome.image)[inside]))
    rows = []
    for b in np.unique((bad - GUARD) // esize * esize)[:limit]:
        b = int(b)
        at = slice(GUARD + b, GUARD + b + esize)
        row = {"coords": _element_coords(case, b), "byte": GUARD + b,
               "before": _element_text(case.dtype, outcome.gmem[at].tobytes()),
               "expected": _element_text(case.dtype, exp[at].tobytes()),
               "observed": _element_text(case.dtype, obs[at].tobytes())}
        if b in src:
            row["source"] = _element_text(case.dtype, src[b].tobytes())
        rows.append(row)
    out["elements"] = rows
    return out


def explain(outcome: Outcome, name: str) -> str:
    """Where one buffer differs, as assert_smem_equal / assert_global_equal say it (rows, 16-byte chunks,
    expected and observed values)."""
    spec = outcome.case.spec()
    try:
        if name == "gmem":
            oracle.assert_global_equal(outcome.expected[name], outcome.observed[name], spec, offset=GUARD, name=name)
        else:
            oracle.assert_smem_equal(outcome.expected[name], outcome.observed[name], spec, name=name)
    except oracle.MemoryMismatch as e:
        return str(e)
    return f"{name}: no difference"


def render(outcome: Outcome, problems) -> str:
    """The text of a mismatch: each problem, where each buffer differs, then the reproducer."""
    case = outcome.case
    lines = [f"GPU and ptxdsl.reference disagree ({', '.join(c for c, _ in problems)}):"]
    for category, details in problems:
        lines.append(f"  {category}: {json.dumps(details)}")
    for name, exp in outcome.expected.items():
        if exp.tobytes() != outcome.observed[name].tobytes():
            lines += ["", explain(outcome, name)]
    return "\n".join(lines) + "\n\n" + case_snippet(case)


def case_snippet(case: TmaCase) -> str:
    """The code that runs `case` again: snippet(check_case, case)."""
    return snippet(check_case, case)


REPORT = Report("differential", snippet=case_snippet)


def check_case(case: TmaCase, report: Report | None = None, test: str = "", minimal: bool = False) -> Outcome:
    """Run a case and raise the Mismatch subclass of its first problem when the device and the model
    disagree (a ContextLost on a CUDA error); every case and mismatch is counted in `report` (default:
    REPORT, named "differential")."""
    report = REPORT if report is None else report
    if LOST:
        raise ContextLost(f"the CUDA context was lost by an earlier case:\n{case_snippet(LOST[0][0])}")
    report.ran(case)
    try:
        outcome = run_case(case)
    except ContextLost as e:
        report.mismatch(case, [("cuda-error", {"error": str(e.__cause__)})], test, minimal)
        raise
    problems = compare(outcome)
    if problems:
        report.mismatch(case, problems, test, minimal)
        raise mismatch_kind(problems[0][0])(render(outcome, problems))
    return outcome
