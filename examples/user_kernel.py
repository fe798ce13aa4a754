"""A kernel of your own, and the property tests that hold it to the TMA model (examples/test_user_kernel.py;
docs/testing.md walks through both).

The kernel transposes a rows x cols matrix tile by tile: each CTA TMA-loads one tile x tile box into shared
memory, its threads transpose the box there, and one thread TMA-stores the result to the transposed position
of the cols x rows output. The TMA fills what lies past the input's edges and drops what lies past the
output's, so any shape works: the grid just covers the input with tiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.tensormap import DTYPES
from ptxdsl.testing import assert_global_equal, gmem_after_store, random_tensor, smem_after_load

THREADS = 128
WORD = {1: px.b8, 2: px.b16, 4: px.b32, 8: px.b64}      # the shared-memory access for each element size


def transpose_kernel(dtype: str = "f32", tile: int = 32, *, src=None, dst=None, row_offset: int = 0):
    """transpose_<dtype>_<tile>(src, dst): dst = src^T, tile by tile. `src`/`dst` (TensorMapSpecs) let the
    verifier check the copies against the maps. row_offset plants a bug: the store lands that many rows
    below the transposed position (0: correct)."""
    esize = DTYPES[dtype][1]
    nbytes = tile * tile * esize
    with px.kernel(f"transpose_{dtype}_{tile}", reqntid=THREADS) as k:
        src_map = k.param_tensormap("src", src)
        dst_map = k.param_tensormap("dst", dst)
        a = k.shared("a", nbytes, align=128)              # the tile as loaded: row r, column c at r * tile + c
        b = k.shared("b", nbytes, align=128)              # its transpose: b[c * tile + r] = a[r * tile + c]
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        x = k.mul(k.mov(sreg.ctaid_x), tile)              # the tile's first column in src
        y = k.mul(k.mov(sreg.ctaid_y), tile)              # and first row
        with k.if_(is_t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(is_t0):
            k.mbarrier_arrive_expect_tx(bar, nbytes, sem="release", scope="cta")
            k.cp_async_bulk_tensor(a, src_map, (x, y), mbar=bar)
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
        a0, b0 = k.mov(a), k.mov(b)
        log_tile, log_esize = tile.bit_length() - 1, esize.bit_length() - 1
        with k.loop(tid, tile * tile, THREADS) as i:
            row, col = k.shr(i, log_tile), k.and_(i, tile - 1)
            value = k.ld(WORD[esize], k.add(a0, k.shl(i, log_esize)), space="shared::cta")
            k.st(WORD[esize], k.add(b0, k.shl(k.mad(col, tile, row), log_esize)), value, space="shared::cta")
        k.fence_proxy_async("shared::cta")                # the TMA store reads what st.shared wrote
        k.bar_sync(0)
        with k.if_(is_t0):
            out_row = k.add(x, row_offset) if row_offset else x
            k.cp_async_bulk_tensor(dst_map, b, (y, out_row))      # dst coordinates: (column, row) = (y, x)
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group(0)
    return k


KERNEL = transpose_kernel("f32", 32)


@dataclass(frozen=True)
class TransposeCase:
    """One run: a rows x cols matrix of `dtype`, random bytes from `seed`, moved in tile x tile boxes."""

    dtype: str = "f32"
    rows: int = 1
    cols: int = 1
    tile: int = 32
    seed: int = 0

    def maps(self, src_address: int = 0, dst_address: int = 0):
        """(src, dst) tensor maps: rows start on 16-byte boundaries, as a tensor map needs."""
        esize = DTYPES[self.dtype][1]

        def matrix(rows, cols, address):
            pitch = -(-cols * esize // 16) * 16
            return px.TensorMapSpec.tiled_for((rows, cols), self.dtype, (self.tile, self.tile),
                                              strides=(pitch, esize), address=address)

        return matrix(self.rows, self.cols, src_address), matrix(self.cols, self.rows, dst_address)

    @property
    def grid(self) -> tuple[int, int]:
        return -(-self.cols // self.tile), -(-self.rows // self.tile)


def model(case: TransposeCase, src: np.ndarray, dst: np.ndarray, row_offset: int = 0) -> np.ndarray:
    """What dst holds after the kernel, from ptxdsl's model of TMA: each tile loaded as the TMA loads it,
    transposed, and stored as the TMA stores it (clipped at the edges, the 16-byte chunk past each row's
    end written whole). row_offset: the kernel built with that planted bug."""
    src_map, dst_map = case.maps()
    out = dst
    for ty in range(case.grid[1]):
        for tx in range(case.grid[0]):
            x, y = tx * case.tile, ty * case.tile
            loaded = smem_after_load(src_map, src, (x, y)).reshape(case.tile, case.tile, -1)
            out = gmem_after_store(dst_map, out, (y, x + row_offset), loaded.transpose(1, 0, 2).copy())
    return out


def program(dtype: str, tile: int, row_offset: int):
    """The compiled kernel on the current device (the GPU, or the CPU interpreter while it is current)."""
    from ptxdsl.runtime.device import host_device

    return _program(dtype, tile, row_offset, host_device() is not None)


@lru_cache(maxsize=None)
def _program(dtype: str, tile: int, row_offset: int, on_cpu: bool):
    return px.compile(transpose_kernel(dtype, tile, row_offset=row_offset))


def check_transpose(case: TransposeCase, row_offset: int = 0) -> None:
    """Run the kernel on the GPU for `case` and hold the whole output buffer, row padding included,
    bit-exactly equal to the model."""
    from ptxdsl.runtime import DeviceArray

    src_map, dst_map = case.maps()
    src, dst = random_tensor(src_map, case.seed), random_tensor(dst_map, case.seed + 1)
    with DeviceArray.to_device(src) as src_dev, DeviceArray.to_device(dst) as dst_dev:
        launch = program(case.dtype, case.tile, row_offset)[f"transpose_{case.dtype}_{case.tile}"]
        launch(src_map.bind(src_dev.ptr), dst_map.bind(dst_dev.ptr), grid=case.grid, block=THREADS, sync=True)
        got = dst_dev.to_host()
    assert_global_equal(model(case, src, dst), got, dst_map, name=f"transpose {case.rows}x{case.cols} {case.dtype}")


def launches():
    """Launches of the kernel for the launch checks (`ptxdsl check` runs them; no GPU needed): its maps have no
    spec in the kernel, so their box, dtype and swizzle are checked against these."""
    out = []
    for rows, cols in ((200, 72), (64, 64), (33, 7)):
        case = TransposeCase(dtype="f32", rows=rows, cols=cols)
        src, dst = case.maps()
        out.append(px.Launch(KERNEL, {"src": src, "dst": dst}, grid=case.grid, block=THREADS))
    return out


def run():
    """The examples' host check: one fixed case on the GPU (a MemoryMismatch says where it differs)."""
    case = TransposeCase(dtype="bf16", rows=200, cols=72, seed=1)
    check_transpose(case)
    return True, f"transpose_bf16_32: {case.rows}x{case.cols}, equal to the model"
