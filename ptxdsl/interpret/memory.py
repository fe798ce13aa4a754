"""The interpreter's state spaces: global memory (a heap of host buffers at device-like addresses), each CTA's
shared memory, the kernel's parameters, and the generic address windows that map onto them.

Addresses, as the kernel sees them (all 64-bit values in registers):

- global: `HEAP_BASE` upwards, one region per buffer (a CPU DeviceArray, or a numpy argument mapped for one
  launch); a generic address of global memory is the same number, as on the GPU.
- shared::cta: the byte offset in the CTA's window; static buffers start at `SHARED_START` (0x400, where the H200
  puts them), dynamic ones follow at the window's alignment.
- shared::cluster: a shared::cta address of the CTA itself, or `(rank + 1) << RANK_SHIFT | offset` for CTA `rank`
  of the cluster (what mapa returns).
- generic: `SHARED_WINDOW + <shared::cluster address>` for shared memory, `PARAM_WINDOW + offset` for the kernel
  parameters (cvta.param of a tensor map's parameter).

Every access is checked: outside any buffer, or not aligned to its size, is a MemoryFault naming the address.
"""
from __future__ import annotations

import bisect

import numpy as np

from .errors import MemoryFault

HEAP_BASE = 0x7F00_0000_0000
HEAP_ALIGN = 256
SHARED_START = 0x400
RANK_SHIFT = 24
SHARED_WINDOW = 0x1_0000_0000_0000
PARAM_WINDOW = 0x2_0000_0000_0000
WINDOW_SIZE = 1 << 40
TMAP_MAGIC = int.from_bytes(b"PXDSLTM\x00", "little")     # first 8 bytes of a tensor map in the interpreter


class Heap:
    """Global memory: regions (base, uint8 buffer) at increasing addresses; buffers are views of their owners'
    memory, so a kernel's writes land in the arrays themselves."""

    def __init__(self):
        self._bases: list[int] = []
        self._bufs: list[np.ndarray] = []
        self._owners: list = []
        self._next = HEAP_BASE
        self.tmaps: list = []           # tensor-map specs by handle (the 128 bytes a map occupies name one)

    def map(self, buf: np.ndarray, owner=None) -> int:
        """Place a uint8 buffer at a fresh address; its base address."""
        base = self._next
        self._next = -(-(base + max(buf.size, 1)) // HEAP_ALIGN) * HEAP_ALIGN + HEAP_ALIGN
        i = bisect.bisect(self._bases, base)
        self._bases.insert(i, base)
        self._bufs.insert(i, buf)
        self._owners.insert(i, owner)
        return base

    def alloc(self, nbytes: int) -> int:
        return self.map(np.zeros(nbytes, np.uint8))

    def unmap(self, base: int) -> None:
        i = bisect.bisect_left(self._bases, base)
        if i < len(self._bases) and self._bases[i] == base:
            del self._bases[i], self._bufs[i], self._owners[i]

    def region(self, addr: int, nbytes: int = 1):
        """(buffer, offset) of `nbytes` at `addr`, or None when they are not inside one buffer."""
        i = bisect.bisect_right(self._bases, addr) - 1
        if i < 0:
            return None
        off = addr - self._bases[i]
        buf = self._bufs[i]
        if off + nbytes > buf.size:
            return None
        return buf, off

    def buffer(self, addr: int, nbytes: int, what: str):
        got = self.region(addr, nbytes)
        if got is None:
            raise MemoryFault(f"{what}: {nbytes} bytes at global address {addr:#x} are outside every buffer",
                              rule="interpret.out-of-bounds")
        return got

    def tmap_handle(self, spec) -> int:
        self.tmaps.append(spec)
        return len(self.tmaps) - 1


def tmap_bytes(handle: int) -> np.ndarray:
    """The 128 bytes that stand for a tensor map in the interpreter's memory (magic, handle, zeros)."""
    out = np.zeros(128, np.uint8)
    out[:8] = np.frombuffer(TMAP_MAGIC.to_bytes(8, "little"), np.uint8)
    out[8:16] = np.frombuffer(int(handle).to_bytes(8, "little"), np.uint8)
    return out


def tmap_handle(raw: np.ndarray, what: str) -> int:
    if int.from_bytes(raw[:8].tobytes(), "little") != TMAP_MAGIC:
        raise MemoryFault(f"{what}: the 128 bytes at the tensor-map address hold no tensor map",
                          rule="interpret.not-a-tensormap")
    return int.from_bytes(raw[8:16].tobytes(), "little")


def shared_layout(kernel, dynamic_bytes: int) -> tuple[dict, int]:
    """{SharedAlloc: shared::cta address} and the window's size: static buffers from SHARED_START in declaration
    order at their alignment, the dynamic window after them at its alignment."""
    where = {}
    end = SHARED_START
    for a in kernel.shared:
        if not a.dynamic:
            end = -(-end // a.align) * a.align
            where[a] = end
            end += a.nbytes
    dyn = -(-end // kernel.dynamic_align) * kernel.dynamic_align
    for a in kernel.shared:
        if a.dynamic:
            where[a] = dyn + a.offset
    return where, dyn + max(dynamic_bytes, kernel.dynamic_shared_bytes)
