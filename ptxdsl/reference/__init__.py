"""The CPU model of what the hardware does, in numpy: a test oracle, and a way to predict what a kernel will see.

- `ptxdsl.reference.tma`: the bytes TMA moves (loads, stores, reductions, im2col, multicast, swizzle); its
  names are also this package's own (`ptxdsl.reference.load_box`, ...), as they always were.
- `ptxdsl.reference.wgmma`: warpgroup MMA: what a matrix descriptor reads from shared memory under each swizzle,
  the register fragments, and mma_async's arithmetic.
"""
from . import tma
from .tma import (IM2COL_OFFSET_MAX, NAN_FILL, REDUCE_NAN, REDUCE_TYPES, SWIZZLE_MASK, _box_shape, element_offsets,
                  load_box, load_im2col, multicast, reduce_box, smem_elements, smem_layout, store_bounds, store_box,
                  swizzle_bytes, swizzle_offset, tx_bytes, unswizzle_bytes)

__all__ = ["IM2COL_OFFSET_MAX", "NAN_FILL", "REDUCE_NAN", "REDUCE_TYPES", "SWIZZLE_MASK", "element_offsets",
           "load_box", "load_im2col", "multicast", "reduce_box", "smem_elements", "smem_layout", "store_bounds",
           "store_box", "swizzle_bytes", "swizzle_offset", "tma", "tx_bytes", "unswizzle_bytes", "wgmma"]


def __getattr__(name):
    if name == "wgmma":                   # imported on first use: it needs ml_dtypes, the TMA model does not
        import importlib

        return importlib.import_module(f"{__name__}.wgmma")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
