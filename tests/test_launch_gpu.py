"""The launch path on a device: torch's stream order, CUDA graphs, async launches, arrays from torch, CuPy, JAX and
bare DLPack objects read in place (fp8 included), DeviceArray's DLPack export, the torch operator, devices.

torch, CuPy and JAX tests skip with the reason when the library (or its GPU backend) is missing."""
from __future__ import annotations

import os
import time

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.errors import LaunchError
from ptxdsl.runtime import Device, DeviceArray, dlpack
from ptxdsl.runtime.torch_op import torch_op

pytestmark = pytest.mark.gpu

THREADS = 128
ROWS, COLS = 64, 256                # every TMA test copies a ROWS x COLS array in BOX_ROWS x BOX_COLS boxes
BOX_ROWS, BOX_COLS = 32, 64


# ---------------------------------------------------------------------------------------------- kernels

def word_copy_kernel():
    """dst[i] = src[i] for i < n, 32-bit words, one thread each."""
    with px.kernel("word_copy", reqntid=THREADS) as k:
        src, dst = k.param_ptr("src"), k.param_ptr("dst")
        n = k.param("n", px.u32)
        i = k.mad(k.mov(sreg.ctaid_x), THREADS, k.mov(sreg.tid_x))
        with k.if_(k.setp("lt", i, n)):
            off = k.cvt(px.u64, k.shl(i, 2))
            k.st(px.u32, k.add(dst, off), k.ld(px.u32, k.add(src, off)))
    return k


def spin_kernel():
    """Thread 0 spins on %globaltimer for `ns` nanoseconds, then writes 1 to out[0]."""
    with px.kernel("spin", reqntid=32) as k:
        out = k.param_ptr("out")
        ns = k.param("ns", px.u64)
        t0 = k.mov(sreg.globaltimer)
        again = k.label("again")
        waiting = k.setp("lt", k.sub(k.mov(sreg.globaltimer), t0), ns)
        with k.guard(waiting):
            k.bra(again)
        k.st(px.u32, out, 1)
    return k


def tma_copy_kernel(dtype: str):
    """Each CTA TMA-loads one box of a ROWS x COLS `dtype` array into shared memory and TMA-stores it to the same
    place of another (the maps' dtype is what the arrays' element type maps to: u8 for fp8)."""
    spec = px.TensorMapSpec.tiled_for((ROWS, COLS), dtype, (BOX_ROWS, BOX_COLS))
    with px.kernel(f"tma_copy_{spec.dtype}", reqntid=THREADS) as k:
        src = k.param_tensormap("src", spec)
        dst = k.param_tensormap("dst", spec)
        tile = k.shared("tile", spec.smem_bytes, align=128)
        bar = k.mbarrier("bar")
        is_t0 = k.setp("eq", k.mov(sreg.tid_x), 0)
        x = k.mul(k.mov(sreg.ctaid_x), BOX_COLS)
        y = k.mul(k.mov(sreg.ctaid_y), BOX_ROWS)
        with k.if_(is_t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(is_t0):
            k.mbarrier_arrive_expect_tx(bar, spec.box_bytes, sem="release", scope="cta")
            k.cp_async_bulk_tensor(tile, src, (x, y), mbar=bar)
        k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
        k.fence_proxy_async(space="shared::cta")
        with k.if_(is_t0):
            k.cp_async_bulk_tensor(dst, tile, (x, y))
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group(0)
    return k


TMA_GRID = (COLS // BOX_COLS, ROWS // BOX_ROWS)


@pytest.fixture(scope="module")
def device():
    return Device(0)


@pytest.fixture(scope="module")
def word_copy(device):
    return px.compile(word_copy_kernel())["word_copy"]


@pytest.fixture(scope="module")
def torch(device):
    return pytest.importorskip("torch")


def _tma_copy(src, dst, dtype: str) -> tuple[px.TensorMapSpec, px.TensorMapSpec]:
    """Copy src to dst with the TMA kernel, maps read in place from the arrays; the maps are returned."""
    a, b = (px.TensorMapSpec.from_array(x, (BOX_ROWS, BOX_COLS)) for x in (src, dst))
    px.compile(tma_copy_kernel(dtype))[f"tma_copy_{a.dtype}"](a, b, grid=TMA_GRID, block=THREADS, sync=True)
    return a, b


# ---------------------------------------------------------------------------------------------- occupancy

@pytest.mark.parametrize("shared, per_sm", [(0, 2048 // THREADS), (100 * 1024, 2), (120 * 1024, 1)])
def test_max_active_ctas_counts_what_threads_and_shared_memory_allow(device, word_copy, shared, per_sm):
    """128-thread CTAs of a small kernel: 16 per SM (2,048 threads); with 100 KiB of dynamic shared memory two
    (228 KiB per SM, 1 KiB reserved per CTA), with 120 KiB one; times the SMs."""
    assert word_copy.max_active_ctas(THREADS, shared) == per_sm * device.sm_count


# ---------------------------------------------------------------------------------------------- streams

def test_torch_tensors_launch_on_torchs_current_stream(torch, word_copy):
    """The input is written on a torch side stream behind a 0.1 s sleep; the copy, launched in that stream's
    context without stream=, must run after it. Launched on the legacy default stream (torch's side streams do
    not wait for it, nor it for them) or synchronously on another stream, it would copy the zeros first."""
    n = 1 << 20
    payload = torch.arange(n, dtype=torch.int32, device="cuda")
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    assert side.cuda_stream != 0
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x.copy_(payload)
        t0 = time.perf_counter()
        word_copy(x, out, n, grid=n // THREADS, block=THREADS)
        host_s = time.perf_counter() - t0
    assert not side.query(), "the side stream finished before the check: the sleep was too short to tell"
    side.synchronize()
    assert torch.equal(out, payload)
    assert host_s < 0.05                # asynchronous: the call did not wait for the sleep


def test_an_explicit_stream_object_is_used(word_copy):
    """A cuda.core stream (the __cuda_stream__ protocol) and a CUstream."""
    core = pytest.importorskip("cuda.core")
    host = np.arange(4096, dtype=np.uint32)
    src, dst = DeviceArray.to_device(host), DeviceArray.zeros(host.shape, np.uint32)
    dev = core.Device(0)
    dev.set_current()                                           # the primary context, ptxdsl's too
    stream = dev.create_stream()
    word_copy(src, dst, host.size, grid=host.size // THREADS, block=THREADS, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(dst.to_host(), host)
    err, raw = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    assert err == driver.CUresult.CUDA_SUCCESS
    dst.fill_bytes(0)
    word_copy(src, dst, host.size, grid=host.size // THREADS, block=THREADS, stream=raw, sync=True)
    np.testing.assert_array_equal(dst.to_host(), host)
    driver.cuStreamDestroy(raw)


def test_a_cupy_stream_is_accepted(word_copy):
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    if not hasattr(stream, "__cuda_stream__"):
        pytest.skip(f"CuPy {cupy.__version__}'s Stream has no __cuda_stream__")
    src = cupy.arange(4096, dtype=cupy.uint32)
    dst = cupy.zeros_like(src)
    cupy.cuda.Device().synchronize()
    word_copy(src, dst, src.size, grid=src.size // THREADS, block=THREADS, stream=stream)
    stream.synchronize()
    assert bool((dst == src).all())


def test_a_cuda_array_interface_producer_stream_is_waited_for(torch, word_copy):
    """An object that offers only __cuda_array_interface__ and names the side stream its data is written on."""
    n = 1 << 20
    payload = torch.arange(n, dtype=torch.int32, device="cuda")
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x.copy_(payload)

    class Interface:
        __cuda_array_interface__ = {"version": 3, "shape": (n,), "typestr": "<i4", "data": (x.data_ptr(), False),
                                    "strides": None, "stream": side.cuda_stream}

    word_copy(Interface(), out, n, grid=n // THREADS, block=THREADS)      # on torch's current (default) stream
    torch.cuda.current_stream().synchronize()
    assert torch.equal(out, payload)


def test_a_launch_with_another_context_current_or_none_runs_in_the_kernels(word_copy):
    """A launch does not ask for the current context: with another context current on the thread (a CUDA
    context the user created), or none (a new thread), the driver refuses the foreign handle and the launch makes
    the kernel's context current and runs there."""
    import threading

    host = np.arange(4096, dtype=np.uint32)
    src, dst = DeviceArray.to_device(host), DeviceArray.zeros(host.shape, np.uint32)
    err, cudev = driver.cuDeviceGet(0)
    err, other = driver.cuCtxCreate(None, 0, cudev)            # pushed: current on this thread
    assert err == driver.CUresult.CUDA_SUCCESS
    try:
        word_copy(src, dst, host.size, grid=host.size // THREADS, block=THREADS)
        assert int(driver.cuCtxGetCurrent()[1]) == int(src.device.context)
        src.device.synchronize()
        np.testing.assert_array_equal(dst.to_host(), host)
    finally:
        driver.cuCtxDestroy(other)
    dst.fill_bytes(0)
    errors = []

    def launch():
        try:
            assert int(driver.cuCtxGetCurrent()[1]) == 0        # a new thread has no current context
            word_copy(src, dst, host.size, grid=host.size // THREADS, block=THREADS)
            src.device.synchronize()
        except Exception as e:          # reported below, in the test's thread
            errors.append(e)
    t = threading.Thread(target=launch)
    t.start()
    t.join()
    assert not errors, errors
    np.testing.assert_array_equal(dst.to_host(), host)


def test_sync_false_returns_before_a_long_kernel_ends(device):
    spin = px.compile(spin_kernel())["spin"]
    out = DeviceArray.zeros(1, np.uint32)
    spin(out, 1000, grid=1, block=32, sync=True)                # warm: module and configuration ready
    out.fill_bytes(0)
    t0 = time.perf_counter()
    spin(out, 300_000_000, grid=1, block=32)
    returned = time.perf_counter() - t0
    got = out.to_host()                                         # waits for the device
    finished = time.perf_counter() - t0
    assert returned < 0.05 and finished > 0.25 and got[0] == 1
    t0 = time.perf_counter()
    spin(out, 300_000_000, grid=1, block=32, sync=True)
    assert time.perf_counter() - t0 > 0.25


# ---------------------------------------------------------------------------------------------- graphs

def test_torch_cuda_graph_captures_and_replays(torch, device):
    """A freshly compiled kernel's first launch happens inside the capture (its configuration check too)."""
    launcher = px.compile(word_copy_kernel())["word_copy"]
    n = 1 << 16
    src = torch.arange(n, dtype=torch.int32, device="cuda")
    dst = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launcher(src, dst, n, grid=n // THREADS, block=THREADS)
    torch.cuda.synchronize()
    assert not dst.any()                                        # capture does not run the kernel
    for k in (3, 7):
        src.copy_(torch.arange(n, dtype=torch.int32, device="cuda") * k)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(dst, src)


def test_driver_stream_capture_with_tensor_maps(device):
    """cuStreamBeginCapture on a stream of our own; TMA maps are captured by value."""
    host = np.random.default_rng(5).integers(0, 2**16, (ROWS, COLS), dtype=np.uint16).view(ml_dtypes.bfloat16)
    src, dst = DeviceArray.to_device(host), DeviceArray.zeros(host.shape, ml_dtypes.bfloat16)
    launcher = px.compile(tma_copy_kernel("bf16"))["tma_copy_bf16"]
    a, b = (px.TensorMapSpec.from_array(x, (BOX_ROWS, BOX_COLS)) for x in (src, dst))
    err, stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    assert err == driver.CUresult.CUDA_SUCCESS
    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    assert driver.cuStreamBeginCapture(stream, mode)[0] == driver.CUresult.CUDA_SUCCESS
    launcher(a, b, grid=TMA_GRID, block=THREADS, stream=stream)
    with pytest.raises(LaunchError) as info:
        launcher(a, b, grid=TMA_GRID, block=THREADS, stream=stream, sync=True)
    assert info.value.rule == "launch.sync-in-capture"
    err, graph = driver.cuStreamEndCapture(stream)
    assert err == driver.CUresult.CUDA_SUCCESS
    err, exe = driver.cuGraphInstantiate(graph, 0)
    assert err == driver.CUresult.CUDA_SUCCESS
    assert not dst.to_host().view(np.uint16).any()
    assert driver.cuGraphLaunch(exe, stream)[0] == driver.CUresult.CUDA_SUCCESS
    assert driver.cuStreamSynchronize(stream)[0] == driver.CUresult.CUDA_SUCCESS
    np.testing.assert_array_equal(dst.to_host().view(np.uint16), host.view(np.uint16))
    driver.cuGraphExecDestroy(exe)
    driver.cuGraphDestroy(graph)
    driver.cuStreamDestroy(stream)


# ---------------------------------------------------------------------------------------------- arrays

def test_a_cupy_array_goes_through_a_tma_load_in_place(device):
    cupy = pytest.importorskip("cupy")
    src = cupy.asarray(np.random.default_rng(1).standard_normal((ROWS, COLS), dtype=np.float32))
    dst = cupy.full_like(src, np.nan)
    cupy.cuda.Device().synchronize()
    a, b = _tma_copy(src, dst, "f32")
    assert (a.global_address, b.global_address) == (src.data.ptr, dst.data.ptr)
    assert cupy.asnumpy(dst).tobytes() == cupy.asnumpy(src).tobytes()


JAX_CHILD = """
import os, sys
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
try:
    gpu = jax.devices("gpu")[0]
except RuntimeError as e:
    print("JAX_NO_GPU", e)
    sys.exit(0)
print("JAX_READY", flush=True)
import ml_dtypes
import numpy as np
sys.path.insert(0, "tests")
from test_launch_gpu import COLS, ROWS, _tma_copy
from ptxdsl.runtime import DeviceArray
host = np.random.default_rng(2).standard_normal((ROWS, COLS)).astype(ml_dtypes.bfloat16)
src = jax.device_put(host, gpu).block_until_ready()
dst = DeviceArray.zeros((ROWS, COLS), ml_dtypes.bfloat16)
a, _ = _tma_copy(src, dst, "bf16")
assert a.global_address == src.unsafe_buffer_pointer() and a.dtype == "bf16", (hex(a.global_address), a.dtype)
assert dst.to_host().view(np.uint16).tobytes() == host.view(np.uint16).tobytes(), "the copy differs"
print("JAX_COPY_OK")
"""


def test_a_jax_array_goes_through_a_tma_load_in_place():
    """In a child process: JAX's GPU backend brings its own CUDA libraries, and in a process that already
    holds torch's and CuPy's it may abort while it starts (seen on the H200 with JAX 0.11)."""
    import subprocess
    import sys

    pytest.importorskip("jax")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", JAX_CHILD], cwd=root, capture_output=True, text=True,
                          timeout=240)
    out = proc.stdout + proc.stderr
    if "JAX_NO_GPU" in proc.stdout:
        pytest.skip(f"JAX has no GPU backend here: {proc.stdout.strip()[-300:]}")
    if "JAX_READY" not in proc.stdout:
        pytest.skip(f"JAX's GPU backend did not start (exit {proc.returncode}): {out.strip()[-400:]}")
    assert proc.returncode == 0 and "JAX_COPY_OK" in proc.stdout, out[-3000:]


class DLPackOnly:
    """Nothing but the DLPack protocol, over another array."""

    def __init__(self, inner):
        self._inner = inner

    def __dlpack__(self, **kw):
        return self._inner.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()


def test_a_dlpack_only_object_goes_through_a_tma_load_in_place(torch, device):
    src = torch.randn(ROWS, COLS, device="cuda").to(torch.float16)
    dst = torch.zeros_like(src)
    torch.cuda.synchronize()
    a, b = _tma_copy(DLPackOnly(src), DLPackOnly(dst), "f16")
    assert (a.global_address, b.global_address) == (src.data_ptr(), dst.data_ptr())
    torch.cuda.synchronize()
    assert torch.equal(dst.view(torch.int16), src.view(torch.int16))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_an_fp8_torch_tensor_goes_through_a_tma_load_in_place(torch, device, name):
    bits = torch.randint(0, 256, (ROWS, COLS), dtype=torch.uint8, device="cuda")
    src = bits.view(getattr(torch, name))
    dst = torch.zeros_like(src)
    torch.cuda.synchronize()
    a, b = _tma_copy(src, dst, name)
    assert (a.dtype, a.global_address, b.global_address) == ("u8", src.data_ptr(), dst.data_ptr())
    torch.cuda.synchronize()
    assert torch.equal(dst.view(torch.uint8), bits)
    try:
        src.__dlpack__(max_version=(1, 0))
    except Exception:                   # this torch exports no fp8 through DLPack: the tensor path above is the test
        return
    via_dlpack = px.TensorMapSpec.from_array(DLPackOnly(src), (BOX_ROWS, BOX_COLS))   # DLPack's fp8 type codes
    assert via_dlpack == a


@pytest.mark.parametrize("dtype, name", [(ml_dtypes.bfloat16, "bfloat16"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn")])
def test_device_array_reaches_torch_through_dlpack(torch, device, dtype, name):
    host = np.random.default_rng(3).integers(0, 256, (8, 32), dtype=np.uint8).view(dtype).reshape(8, -1)
    arr = DeviceArray.to_device(host)
    t = torch.from_dlpack(arr)
    assert t.dtype == getattr(torch, name) and t.data_ptr() == arr.ptr and tuple(t.shape) == host.shape
    assert t.cpu().view(torch.uint8).numpy().tobytes() == host.tobytes()
    del t
    assert dlpack.exported_count() == 0
    try:
        torch_typestr = torch.empty(1, dtype=getattr(torch, name), device="cuda").__cuda_array_interface__["typestr"]
    except (TypeError, KeyError, AttributeError, RuntimeError):
        return                          # this torch writes no typestr for the type: DLPack is the only channel
    assert arr.__cuda_array_interface__["typestr"] == torch_typestr


# ---------------------------------------------------------------------------------------------- torch op

_OPS: dict = {}


def _word_copy_op(torch, launcher):
    if "word_copy" not in _OPS:
        _OPS["word_copy"] = torch_op(
            launcher, "ptxdsl_test::word_copy", mutates_args=("dst",),
            grid=lambda src, dst, n: (n + THREADS - 1) // THREADS, block=THREADS)
    return _OPS["word_copy"]


def test_the_custom_op_works_from_torch(torch, word_copy):
    op = _word_copy_op(torch, word_copy)
    assert px.torch_op is torch_op
    src = torch.arange(5000, dtype=torch.int32, device="cuda")
    dst = torch.zeros_like(src)
    torch.ops.ptxdsl_test.word_copy(src, dst, src.numel())
    assert torch.equal(dst, src)
    dst.zero_()
    op(src * 2, dst, src.numel())
    assert torch.equal(dst, src * 2)


def test_the_custom_op_builds_tensor_maps_from_tensors(torch, device):
    launcher = px.compile(tma_copy_kernel("bf16"))["tma_copy_bf16"]
    op = torch_op(launcher, "ptxdsl_test::tile_copy", mutates_args=("dst",), grid=TMA_GRID, block=THREADS)
    src = torch.randn(ROWS, COLS, device="cuda").to(torch.bfloat16)
    dst = torch.zeros_like(src)
    op(src, dst)
    assert torch.equal(dst.view(torch.int16), src.view(torch.int16))


def test_the_custom_op_under_torch_compile(torch, word_copy):
    _word_copy_op(torch, word_copy)

    @torch.compile(fullgraph=True)
    def double_copy(a, b):
        torch.ops.ptxdsl_test.word_copy(a, b, a.numel())
        return b + 1

    src = torch.arange(4096, dtype=torch.int32, device="cuda")
    dst = torch.zeros_like(src)
    got = double_copy(src, dst)
    assert torch.equal(dst, src) and torch.equal(got, src + 1)


# ---------------------------------------------------------------------------------------------- devices

def test_arguments_on_two_devices_are_refused(torch, word_copy):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (this machine has one)")
    a = torch.zeros(256, dtype=torch.int32, device="cuda:0")
    b = torch.zeros(256, dtype=torch.int32, device="cuda:1")
    with pytest.raises(LaunchError) as info:
        word_copy(a, b, 256, grid=2, block=THREADS)
    assert info.value.rule == "launch.arg-device" and "argument 1 (dst: ptr" in str(info.value)
    assert "not device 1" in str(info.value) and info.value.loc.file == __file__
