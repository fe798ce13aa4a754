"""ptxdsl.testing: property tests for your own TMA kernels.

Install with the extra: `pip install 'ptxdsl[testing]'` (Hypothesis, pytest, pytest-xdist). The pieces:

- `ptxdsl.testing.strategies` (Hypothesis): `dtypes`, `shapes`, `strides`, `tensor_maps` (valid by
  construction: swizzle, interleave, element strides, OOB fill, im2col), `box_coords` and
  `im2col_coords` (across the tensor's edges too), `launch_shapes`, `clusters`, `tma_cases`.
- `ptxdsl.testing.oracle`: what a TMA load, multicast, store or reduction leaves in shared and global
  memory (`smem_after_load`, `smem_after_multicast`, `gmem_after_store`, `gmem_after_reduce`, from
  `ptxdsl.reference`), and `assert_smem_equal` / `assert_global_equal`, whose failure names the rows and
  16-byte chunks that differ, swizzle undone, expected against got.
- `ptxdsl.testing.tensors`: host data for a map (`random_tensor`, `tensor_bytes`) and the numpy view of
  it (`tensor_view`, which numpy slicing works on).
- `ptxdsl.testing.reproduce`: `reproducible(check, case)` runs a check and, when it fails, prints the case
  as code you can paste (`snippet`).
- `ptxdsl.testing.differential`: `TmaCase` and `check_case`, one TMA operation run on the GPU and held
  bit-exactly against the model (the project's own differential suite runs on this).
- `ptxdsl.testing.report.Report`: cases run and failed, summed over pytest-xdist workers.
- The pytest plugin (`ptxdsl.testing.plugin`, registered on install): the `gpu` marker, the `ptx_golden`
  fixture, `--sanitize=memcheck|racecheck|synccheck`, and one pytest-xdist worker per GPU.

The names below are importable from `ptxdsl.testing` itself; each module is imported on first use, so
`import ptxdsl.testing` (which the pytest plugin does) loads neither Hypothesis nor numpy.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "strategies": ("dtypes", "shapes", "strides", "tensor_maps", "box_coords", "im2col_coords", "launch_shapes",
                   "clusters", "tma_cases", "LaunchShape"),
    "oracle": ("smem_after_load", "smem_after_multicast", "gmem_after_store", "gmem_after_reduce",
               "assert_smem_equal", "assert_global_equal", "MemoryMismatch"),
    "reproduce": ("snippet", "reproducible"),
    "tensors": ("tensor_bytes", "random_tensor", "random_values", "tensor_view"),
    "cases": ("TmaCase",),
    "differential": ("check_case", "run_case", "Mismatch", "ContextLost"),
    "report": ("Report",),
    "golden": ("check_golden",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
_MODULES = ("strategies", "oracle", "reproduce", "tensors", "cases", "differential", "harness", "report", "golden",
            "sanitize", "devices", "plugin")

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'ptxdsl.testing' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE) | set(_MODULES))
