"""The CPU as a device: `ptxdsl.interpret.CPU` answers what a `ptxdsl.runtime.Device` answers (the H200's
figures, so launch shapes come out as on the GPU) and owns the interpreter's global memory.

While it is current (`CPU.set_current()`, `with CPU:`, `ptxdsl run --cpu`, `PTXDSL_DEVICE=cpu`), a
`DeviceArray` lives in host memory at an address the interpreter resolves: `DeviceArray.to_device(a)`,
`.to_host()`, `TensorMapSpec.from_array(buf, box)` and the launches of `px.compile(k, device="cpu")` work
unchanged, without a driver.
"""
from __future__ import annotations

import numpy as np

from .memory import Heap, tmap_bytes

# The H200's figures, so that launch shapes (persistent grids, CTAs per SM) come out as on the GPU.
H200 = {"sm_count": 132, "shared_per_sm": 233472, "reserved_shared_per_block": 1024,
        "max_shared_per_block_optin": 232448, "max_threads_per_block": 1024}


class CpuDevice:
    """The interpreter as a device. `host` tells the runtime to keep DeviceArrays in host memory."""

    host = True
    ordinal = -1
    name = "ptxdsl interpreter (CPU)"
    compute_capability = (9, 0)
    cluster_launch = True

    def __init__(self):
        self.heap = Heap()
        for k, v in H200.items():
            setattr(self, k, v)
        self._saved = []
        self._host_maps: dict = {}

    def __repr__(self) -> str:
        return "<Device cpu: the ptxdsl interpreter>"

    # ------------------------------------------------------------------------------------ currency

    def set_current(self) -> None:
        from ..runtime.device import set_host_device

        set_host_device(self)

    def release(self) -> None:
        """Stop being the current device (GPU devices are current again)."""
        from ..runtime.device import set_host_device

        set_host_device(None)

    def __enter__(self):
        from ..runtime.device import host_device

        self._saved.append(host_device())
        self.set_current()
        return self

    def __exit__(self, *exc):
        from ..runtime.device import set_host_device

        set_host_device(self._saved.pop())

    def synchronize(self) -> None:
        """Launches on the CPU finish before they return: nothing to wait for."""

    # ------------------------------------------------------------------------------- DeviceArray memory

    def malloc(self, nbytes: int) -> int:
        return self.heap.alloc(nbytes)

    def free(self, ptr: int) -> None:
        self.heap.unmap(ptr)

    def buffer(self, ptr: int, nbytes: int) -> np.ndarray:
        buf, off = self.heap.buffer(ptr, nbytes, "DeviceArray")
        return buf[off:off + nbytes]

    def htod(self, ptr: int, host: np.ndarray) -> None:
        self.buffer(ptr, host.nbytes)[:] = np.ascontiguousarray(host).reshape(-1).view(np.uint8)

    def dtoh(self, out: np.ndarray, ptr: int) -> None:
        out.reshape(-1).view(np.uint8)[:] = self.buffer(ptr, out.nbytes)

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        self.buffer(ptr, nbytes)[:] = byte

    def tensormap_record(self, spec) -> np.ndarray:
        """The 128 bytes that stand for `spec` in the interpreter's memory (what tensormap.replace edits)."""
        return tmap_bytes(self.heap.tmap_handle(spec))

    def map_host(self, arr: np.ndarray) -> int:
        """The interpreter's address of a host numpy array's first element: its whole underlying buffer is mapped
        into global memory (once, for the life of the process), so a TensorMapSpec built from the array reads and
        writes it in place."""
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if not root.flags.c_contiguous:
            raise ValueError("a host array mapped for the interpreter is a view of a C-contiguous array")
        key = (root.ctypes.data, root.nbytes)
        base = self._host_maps.get(key)
        if base is None:
            base = self._host_maps[key] = self.heap.map(root.reshape(-1).view(np.uint8), root)
        return base + (arr.ctypes.data - root.ctypes.data)


CPU = CpuDevice()


def is_cpu(device) -> bool:
    """Whether `device` asks for the interpreter: the CPU device, or the string 'cpu'."""
    return device is CPU or isinstance(device, CpuDevice) or (isinstance(device, str) and device.lower() == "cpu")
