"""The launch path and array reading without a device: argument packing plans (checked against the bytes the
driver would be handed), streams, devices, the configuration check, tensor-map caching, DLPack and
__cuda_array_interface__ reading, DeviceArray's DLPack export, and the element types a tensor map takes.

The driver is replaced only where a call would reach it: cuLaunchKernel, cuCtxGetCurrent and cuStreamIsCapturing
(ptxdsl.runtime.launch binds them at import), read back through a recorder."""
from __future__ import annotations

import ctypes
import gc
import importlib
import struct
import threading
import weakref
from collections import namedtuple

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver

from ptxdsl import types
from ptxdsl.errors import LaunchError, TensorMapError
from ptxdsl.runtime import arrays, dlpack
from ptxdsl.runtime import stream as streams
from ptxdsl.runtime.memory import DeviceArray
from ptxdsl.tensormap import ARRAY_DTYPES, DTYPES, MOVED_AS_BYTES, TensorMapSpec, dtype_name

launch_mod = importlib.import_module("ptxdsl.runtime.launch")
Plan = launch_mod.Plan
Param = namedtuple("Param", "name kind type")
SUCCESS = driver.CUresult.CUDA_SUCCESS
CONTEXT = 0x1234


# ------------------------------------------------------------------------------------------------ fakes

class FakeDevice:
    name = "Fake H200"
    compute_capability = (9, 0)
    max_shared_per_block_optin = 227 * 1024
    cluster_launch = True

    def __init__(self, ordinal=0):
        self.ordinal = ordinal
        self.context = CONTEXT + ordinal

    def set_current(self):
        pass


class FakeFunction:
    max_threads_per_block = 1024
    static_shared_bytes = 0
    max_dynamic_shared = 48 * 1024
    non_portable_cluster_size_allowed = False

    def __init__(self, name="k", device=None):
        self.name = name
        self.device = device or FakeDevice()
        self.handle = driver.CUfunction(0x5678)


class Driver:
    """Stands in for the launch's driver calls and keeps what each launch was handed."""

    def __init__(self):
        self.launches = []
        self.capturing = False
        self.sizes = ()

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        params = []
        if argv:
            table = (ctypes.c_void_p * len(self.sizes)).from_address(argv)
            params = [ctypes.string_at(table[i], n) for i, n in enumerate(self.sizes)]
        self.launches.append({"grid": (gx, gy, gz), "block": (bx, by, bz), "shared": shared,
                              "stream": int(stream), "params": params})
        return (SUCCESS,)

    @property
    def last(self):
        return self.launches[-1]


@pytest.fixture
def fake(monkeypatch):
    d = Driver()
    monkeypatch.setattr(launch_mod, "_cuLaunchKernel", d.cuLaunchKernel)
    monkeypatch.setattr(launch_mod, "_cuCtxGetCurrent", lambda: (SUCCESS, CONTEXT))
    monkeypatch.setattr(streams, "is_capturing", lambda s: d.capturing)
    monkeypatch.setattr(streams, "_torch_raw_stream", lambda ordinal: 0xAB00 + ordinal)
    return d


def plan(*params, device=None, sizes=None, fake=None):
    p = Plan(FakeFunction(device=device), [Param(*x) for x in params])
    if fake is not None:
        fake.sizes = sizes or [8 if x[1] == "ptr" else 128 if x[1] == "tensormap" else x[2].nbytes for x in params]
    return p


def device_array(shape, dtype, ptr=0x7000_0000, ordinal=0) -> DeviceArray:
    """A DeviceArray over a made-up address: no allocation, nothing for the driver to do."""
    arr = DeviceArray.__new__(DeviceArray)
    arr.shape, arr.dtype = tuple(shape), np.dtype(dtype)
    arr.nbytes = int(np.prod(shape)) * arr.dtype.itemsize
    arr.device, arr.ptr, arr._finalizer = FakeDevice(ordinal), ptr, None
    return arr


class FakeTensor:
    """The torch.Tensor surface the launch reads (its type's module says torch, as a real tensor's does)."""

    __module__ = "torch"

    def __init__(self, ptr=0x7100_0000, device=0, shape=(4, 8), dtype="torch.float32", esize=4):
        self._ptr, self._device, self.shape, self.dtype, self._esize = ptr, device, shape, dtype, esize
        self.device = f"cuda:{device}" if device >= 0 else "cpu"

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self._device

    def element_size(self):
        return self._esize

    def stride(self):
        return tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))


class DLPackOnly:
    """An object with nothing but the DLPack protocol (as a JAX or CuPy array presents it), exporting a made-up
    device address; it keeps the keywords each __dlpack__ call got."""

    def __init__(self, shape=(16, 64), dtype="float8_e4m3fn", ptr=0x7200_0000, device=(dlpack.CUDA, 0)):
        self.shape, self.dtype, self.ptr, self.device, self.calls = shape, dtype, ptr, device, []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return dlpack.export(self, self.ptr, self.shape, self.dtype, self.device[1],
                             versioned=kw.get("max_version") is not None, device_type=self.device[0])


class CAI:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def cai(shape=(8, 16), typestr="<f4", ptr=0x7300_0000, strides=None, stream=None):
    return CAI({"version": 3, "shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides,
                "stream": stream})


class StreamProtocol:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


# ------------------------------------------------------------------------------------------------ packing

def test_scalars_are_packed_by_width(fake):
    p = plan(("out", "ptr", types.u64), ("a", "scalar", types.s32), ("b", "scalar", types.f32),
             ("c", "scalar", types.u16), ("d", "scalar", types.s64), ("e", "scalar", types.f64),
             ("f", "scalar", types.bf16), ("g", "scalar", types.u8), ("h", "scalar", types.b32),
             ("i", "scalar", types.f16), fake=fake)
    p(0x1000, -123456, 1.5, 65535, -(2**40) - 3, -2.25, 3.0, np.uint8(200), -1, 0.5, grid=1, block=32)
    got = fake.last["params"]
    assert got == [struct.pack("<Q", 0x1000), struct.pack("<i", -123456), struct.pack("<f", 1.5),
                   struct.pack("<H", 65535), struct.pack("<q", -(2**40) - 3), struct.pack("<d", -2.25),
                   np.array(3.0, ml_dtypes.bfloat16).tobytes(), bytes([200]), struct.pack("<I", 2**32 - 1),
                   np.array(0.5, np.float16).tobytes()]
    p(0x2000, 7, 2, 1, 5, np.float32(0.25), 1, 1, 3, 1, grid=1, block=32)     # the same storage, new values
    assert fake.last["params"][:3] == [struct.pack("<Q", 0x2000), struct.pack("<i", 7), struct.pack("<f", 2.0)]
    assert fake.last["params"][5] == struct.pack("<d", 0.25)


def test_an_empty_kernel_gets_no_parameter_array(fake):
    p = plan(fake=fake)
    p(grid=(2, 3), block=(32, 4))
    assert fake.last == {"grid": (2, 3, 1), "block": (32, 4, 1), "shared": 0, "stream": 0, "params": []}


@pytest.mark.parametrize("ptype, value, text, rule", [
    (types.u32, -1, "a .u32 argument is 0..4294967295", "arg-range"),
    (types.s8, 128, "a .s8 argument is -128..127", "arg-range"),
    (types.u32, 1.5, "a .u32 argument is an integer", "arg-type"),
    (types.u32, "3", "a .u32 argument is an integer", "arg-type"),
    (types.f32, "x", "a .f32 argument is a real number", "arg-type"),
    (types.f32, True, "a .f32 argument is a real number", "arg-type"),
    (types.bf16, None, "a .bf16 argument is a real number", "arg-type"),
    (types.pred, 1, "a kernel parameter type is an integer or float type, not .pred", "param-type"),
])
def test_scalar_errors_name_the_argument_and_rule(fake, ptype, value, text, rule):
    p = plan(("out", "ptr", types.u64), ("n", "scalar", ptype), fake=fake)
    with pytest.raises(LaunchError) as info:
        p(0x1000, value, grid=1, block=32)
    e = info.value
    assert e.rule == f"launch.{rule}"
    assert f"kernel 'k' argument 1 (n: scalar .{ptype.name}) = {value!r} breaks '{text}'" in str(e)
    assert e.loc.file == __file__
    assert not fake.launches


def test_argument_count_is_checked(fake):
    p = plan(("out", "ptr", types.u64), ("n", "scalar", types.u32), fake=fake)
    with pytest.raises(LaunchError, match=r"len\(args\)=1 breaks 'kernel 'k' takes 2 arguments \(out, n\)'") as info:
        p(0x1000, grid=1, block=32)
    assert info.value.rule == "launch.arg-count" and info.value.loc.file == __file__


# ------------------------------------------------------------------------------------------------ pointers

def test_pointer_arguments_of_every_kind(fake):
    p = plan(("a", "ptr", types.u64), ("b", "ptr", types.u64), ("c", "ptr", types.u64), ("d", "ptr", types.u64),
             ("e", "ptr", types.u64), fake=fake)
    dl = DLPackOnly(ptr=0x7200_0400)
    p(device_array((4,), np.float32, ptr=0x7000_0100), FakeTensor(ptr=0x7100_0200), np.uint64(0x7300_0300), dl,
      0x7400_0500, grid=1, block=32)
    got = [struct.unpack("<Q", b)[0] for b in fake.last["params"]]
    assert got == [0x7000_0100, 0x7100_0200, 0x7300_0300, 0x7200_0400, 0x7400_0500]
    assert fake.last["stream"] == 0xAB00            # a torch tensor among the arguments: torch's current stream
    assert dl.calls and dl.calls[-1]["stream"] == 0xAB00


def test_a_dlpack_producer_is_handed_the_launch_stream(fake):
    p = plan(("a", "ptr", types.u64), fake=fake)
    dl = DLPackOnly()
    p(dl, grid=1, block=32)
    assert dl.calls[-1] == {"stream": 1, "max_version": dlpack.VERSION}     # DLPack's name for the legacy stream
    p(dl, grid=1, block=32, stream=77)
    assert dl.calls[-1]["stream"] == 77 and fake.last["stream"] == 77
    assert dlpack.exported_count() == 0                                     # the capsules were not kept


def test_a_cuda_array_interface_stream_is_waited_for(fake, monkeypatch):
    waits = []
    monkeypatch.setattr(launch_mod, "_wait_for_producer", lambda producer, consumer: waits.append((producer, consumer)))
    monkeypatch.setattr(Plan, "_pointer_device", lambda self, i, value, address: 0)
    p = plan(("a", "ptr", types.u64), fake=fake)
    p(cai(ptr=0x7300_0000, stream=5), grid=1, block=32, stream=9)
    assert waits == [(5, 9)] and fake.last["params"] == [struct.pack("<Q", 0x7300_0000)]
    p(cai(stream=None), grid=1, block=32)
    assert waits == [(5, 9)]


@pytest.mark.parametrize("value, text, rule", [
    (np.zeros(4, np.uint32), "a pointer argument is device memory; copy host arrays with to_device()", "arg-type"),
    (FakeTensor(device=-1), "a pointer argument is device memory (tensor.cuda())", "arg-host-tensor"),
    (DLPackOnly(device=(dlpack.CPU, 0)), "a pointer argument is device memory: an array is in CUDA device, managed "
                                         "or pinned memory, not cpu", "arg-host-tensor"),
    (-5, "a pointer argument is a 64-bit address", "arg-type"),
    (2**64, "a pointer argument is a 64-bit address", "arg-type"),
    ("0x1000", "a pointer argument is a DeviceArray, a torch tensor, a __dlpack__ or __cuda_array_interface__ "
               "object, or a 64-bit address", "arg-type"),
    (True, "a pointer argument is a DeviceArray, a torch tensor", "arg-type"),
])
def test_pointer_errors_name_the_argument(fake, value, text, rule):
    p = plan(("n", "scalar", types.u32), ("out", "ptr", types.u64), fake=fake)
    with pytest.raises(LaunchError) as info:
        p(1, value, grid=1, block=32)
    assert "kernel 'k' argument 1 (out: ptr .u64) = " in str(info.value)
    assert text in str(info.value) and info.value.rule == f"launch.{rule}"
    assert info.value.loc.file == __file__ and not fake.launches


def test_a_freed_device_array_is_refused(fake):
    arr = device_array((4,), np.float32)
    arr._finalizer = weakref.finalize(arr, lambda: None)
    arr._finalizer()
    p = plan(("out", "ptr", types.u64), fake=fake)
    with pytest.raises(LaunchError, match="this one was freed") as info:
        p(arr, grid=1, block=32)
    assert info.value.rule == "launch.arg-freed"


@pytest.mark.parametrize("make", [lambda: device_array((4,), np.float32, ordinal=1), lambda: FakeTensor(device=1),
                                  lambda: DLPackOnly(device=(dlpack.CUDA, 1))])
def test_an_argument_on_another_device_is_named(fake, make):
    p = plan(("a", "ptr", types.u64), ("b", "ptr", types.u64), fake=fake)
    with pytest.raises(LaunchError) as info:
        p(0x1000, make(), grid=1, block=32)
    e = info.value
    assert e.rule == "launch.arg-device" and "argument 1 (b: ptr .u64)" in str(e)
    assert "is on the kernel's device 0, not device 1" in str(e) and e.loc.file == __file__


def test_a_kernel_on_device_1_takes_device_1_arguments(fake):
    p = plan(("a", "ptr", types.u64), device=FakeDevice(1), fake=fake)
    p(FakeTensor(device=1, ptr=0x9000), grid=1, block=32)
    assert fake.last["stream"] == 0xAB01 and fake.last["params"] == [struct.pack("<Q", 0x9000)]
    with pytest.raises(LaunchError, match="not device 0"):
        p(FakeTensor(device=0), grid=1, block=32)


# ------------------------------------------------------------------------------------------------ streams

@pytest.mark.parametrize("stream, handle", [
    (None, 0), (0, 0), (7, 7), (np.int64(9), 9), (driver.CUstream(11), 11), (StreamProtocol(13), 13),
    (type("TorchLikeStream", (), {"cuda_stream": 15})(), 15),
])
def test_stream_kinds(fake, stream, handle):
    plan(fake=fake)(grid=1, block=1, stream=stream)
    assert fake.last["stream"] == handle


def test_an_explicit_stream_wins_over_torch_arguments(fake):
    p = plan(("a", "ptr", types.u64), fake=fake)
    p(FakeTensor(), grid=1, block=32, stream=StreamProtocol(21))
    assert fake.last["stream"] == 21
    p(FakeTensor(), grid=1, block=32)
    assert fake.last["stream"] == 0xAB00
    p(0x1000, grid=1, block=32)
    assert fake.last["stream"] == 0                     # no torch argument: the legacy default stream


class _BadProtocol:
    def __cuda_stream__(self):
        return "no"


@pytest.mark.parametrize("stream, text", [
    ("stream0", streams.RULE), (True, streams.RULE), (1.0, streams.RULE), (object(), streams.RULE),
    (-1, "an int stream handle is 0..2^64-1, not -1"), (2**64, "not 18446744073709551616"),
    (_BadProtocol(), "__cuda_stream__() answers (version, handle)"), (StreamProtocol(-3), "not -3"),
])
def test_a_bad_stream_is_named(fake, stream, text):
    with pytest.raises(LaunchError) as info:
        plan(fake=fake)(grid=1, block=1, stream=stream)
    assert info.value.rule == "launch.stream" and text in str(info.value)
    assert str(info.value).split(": ", 2)[-1].startswith("stream=") and info.value.loc.file == __file__
    assert not fake.launches


def test_stream_handles_without_a_launch():
    assert streams.handle(driver.CUstream(5)) == 5
    assert streams.handle(StreamProtocol(6)) == 6
    with pytest.raises(streams.BadStream):
        streams.handle(None)


def test_sync_is_refused_in_a_capture_and_async_is_the_default(fake, monkeypatch):
    synced = []
    monkeypatch.setattr(launch_mod, "call", lambda fn, *a: synced.append(fn.__name__))
    p = plan(fake=fake)
    fake.capturing = True
    p(grid=1, block=1)                                  # asynchronous: captured like any other launch
    assert len(fake.launches) == 1 and synced == []
    with pytest.raises(LaunchError) as info:
        p(grid=1, block=1, sync=True)
    assert info.value.rule == "launch.sync-in-capture" and len(fake.launches) == 1
    fake.capturing = False
    p(grid=1, block=1, sync=True)
    assert synced == ["cuStreamSynchronize"]


# ------------------------------------------------------------------------------------------------ configuration

def test_a_configuration_is_checked_once_per_object(fake, monkeypatch):
    checked = []
    real = launch_mod._dims
    monkeypatch.setattr(launch_mod, "_dims", lambda value, what: checked.append(what) or real(value, what))
    p = plan(fake=fake)
    grid, block = (4, 2), 128
    for _ in range(3):
        p(grid=grid, block=block)
    assert checked == ["grid", "block"]
    p(grid=tuple([4, 2]), block=block)                  # a new object: checked again
    assert checked == ["grid", "block"] * 2
    with pytest.raises(LaunchError, match=r"grid.x=0 breaks 'grid.x is 1..2147483647'"):
        p(grid=(0, 2), block=block)
    with pytest.raises(LaunchError, match=r"grid=4.0 breaks"):
        p(grid=4.0, block=block)
    assert [x["grid"] for x in fake.launches] == [(4, 2, 1)] * 4


@pytest.mark.parametrize("kw, text, rule", [
    ({"block": 1025}, "block.x=1025", "block-range"),
    ({"block": (32, 32, 2)}, "2048 threads", "block-threads"),
    ({"grid": "8"}, "grid='8' breaks", "grid-shape"),
    ({"shared_bytes": -1}, "shared_bytes=-1", "shared-bytes"),
    ({"shared_bytes": 300 * 1024}, "at most 232448 bytes per block on Fake H200", "shared-bytes"),
    ({"cluster": 2, "grid": 3}, "grid.x=3 breaks 'the grid (in CTAs) is a multiple of cluster.x=2'", "cluster-grid"),
    ({"cluster": 16, "grid": 16}, "at most 8 CTAs unless set_non_portable_cluster_size_allowed()", "cluster-size"),
])
def test_configuration_errors(fake, kw, text, rule):
    kw = {"grid": 1, "block": 32, **kw}
    with pytest.raises(LaunchError) as info:
        plan(fake=fake)(**kw)
    assert text in str(info.value) and info.value.rule == f"launch.{rule}" and info.value.loc.file == __file__


def test_the_kernels_context_is_made_current_only_when_the_launch_says_it_is_not(fake, monkeypatch):
    """A launch does not ask for the current context; when cuLaunchKernel answers that the handle is foreign here
    (another context is current) or that there is no context, the kernel's is made current and the launch made
    again, once."""
    asked, made_current = [], []

    def current():
        asked.append(1)
        return (SUCCESS, 0x9999)                        # another context
    monkeypatch.setattr(launch_mod, "_cuCtxGetCurrent", current)
    p = plan(fake=fake)
    p._configure(1, 32, 0, None)
    p.function.device.set_current = lambda: made_current.append(1)
    p(grid=1, block=32)
    assert (len(fake.launches), asked, made_current) == (1, [], [])
    answers = [driver.CUresult.CUDA_ERROR_INVALID_HANDLE]
    launch = fake.cuLaunchKernel
    monkeypatch.setattr(launch_mod, "_cuLaunchKernel",
                        lambda *a: (launch(*a), (answers.pop(),) if answers else (SUCCESS,))[1])
    p._configure(1, 32, 0, None)                        # bind the patched call
    made_current.clear()
    p(grid=1, block=32)
    assert (len(fake.launches), len(asked), made_current) == (3, 1, [1])
    answers = [driver.CUresult.CUDA_ERROR_INVALID_HANDLE, driver.CUresult.CUDA_ERROR_INVALID_HANDLE]
    with pytest.raises(Exception) as info:              # still refused in the kernel's context: the error is the driver's
        p(grid=1, block=32)
    assert "CUDA_ERROR_INVALID_HANDLE" in str(info.value) and "kernel 'k'" in str(info.value)


def test_another_thread_packs_into_its_own_storage(fake):
    p = plan(("n", "scalar", types.u32), fake=fake)
    p(1, grid=1, block=1)
    errors = []

    def other():
        try:
            p(2, grid=1, block=1)
        except Exception as e:          # reported below, in the test's thread
            errors.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors
    assert [x["params"] for x in fake.launches] == [[struct.pack("<I", 1)], [struct.pack("<I", 2)]]
    assert p._slots[0].value == 1                       # the first thread's storage is untouched


# ------------------------------------------------------------------------------------------------ tensor maps

class FakeMap:
    """A CUtensorMap stand-in: 128 bytes the argv entry points at."""

    def __init__(self, fill):
        self.raw = ctypes.create_string_buffer(bytes([fill]) * 128)

    def getPtr(self):
        return ctypes.addressof(self.raw)


def test_tensor_maps_are_encoded_once_per_spec(fake, monkeypatch):
    encoded = []

    def encode(spec, device):
        encoded.append(spec.global_address)
        return FakeMap(len(encoded))
    monkeypatch.setattr(launch_mod, "encode", encode)
    p = plan(("m", "tensormap", None), fake=fake)
    spec = TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64), address=0x10000)
    for _ in range(3):
        p(spec, grid=1, block=32)
    p(TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64), address=0x10000), grid=1, block=32)   # equal: cached
    assert encoded == [0x10000]
    p(spec.bind(0x20000), grid=1, block=32)
    assert encoded == [0x10000, 0x20000]
    assert [x["params"][0][0] for x in fake.launches] == [1, 1, 1, 1, 2]


def test_an_encoded_map_is_passed_as_it_is(fake):
    tmap = driver.CUtensorMap()
    ctypes.memmove(tmap.getPtr(), bytes(range(128)), 128)
    p = plan(("m", "tensormap", None), fake=fake)
    p(tmap, grid=1, block=32)
    assert fake.last["params"] == [bytes(range(128))]


def test_tensormap_argument_errors(fake):
    p = plan(("m", "tensormap", None), fake=fake)
    with pytest.raises(LaunchError, match="a tensormap argument is a CUtensorMap or a TensorMapSpec") as info:
        p(0x1000, grid=1, block=32)
    assert info.value.rule == "launch.arg-type"
    with pytest.raises(LaunchError, match="has a global address") as info:
        p(TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64)), grid=1, block=32)
    assert info.value.rule == "launch.arg-unbound-tensormap"


def test_tensor_map_specs_are_hashable():
    a = TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64), address=0x1000)
    b = TensorMapSpec.tiled_for((64, 64), "bf16", (64, 64), address=0x1000)
    assert a == b and hash(a) == hash(b) and a.loc != b.loc
    assert {a: 1}[b] == 1 and a.bind(0x2000) != a


# ------------------------------------------------------------------------------------------------ element types

@pytest.mark.parametrize("name", sorted(n for n in dir(ml_dtypes) if isinstance(getattr(ml_dtypes, n), type)
                                        and n not in ("finfo", "iinfo")))
def test_every_ml_dtypes_type_has_a_tensor_map_type(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    got = dtype_name(dt)
    assert DTYPES[got][1] == dt.itemsize
    assert got == ("bf16" if name == "bfloat16" else MOVED_AS_BYTES[name])
    assert dtype_name(getattr(ml_dtypes, name)) == dtype_name(name) == got


@pytest.mark.parametrize("dtype, want", [
    ("float8_e4m3fn", "u8"), ("torch.float8_e5m2", "u8"), ("float8_e8m0fnu", "u8"), ("float4_e2m1fn_x2", "u8"),
    (np.float32, "f32"), (np.int32, "s32"), (np.int16, "u16"), (np.uint64, "u64"), ("bfloat16", "bf16"),
    ("torch.bfloat16", "bf16"), (types.bf16, "bf16"), ("b32", "u32"), ("tf32", "tf32"),
])
def test_element_type_names(dtype, want):
    assert dtype_name(dtype) == want


def test_torch_dtypes_are_read_by_name():
    fake_dtype = type("dtype", (), {"__module__": "torch", "__str__": lambda self: "torch.float8_e4m3fn"})()
    assert dtype_name(fake_dtype) == "u8"


@pytest.mark.parametrize("dtype, shown", [(np.complex64, "'complex64'"), (np.bool_, "'bool'"),
                                          (object, "'object'"), ("pred", "'pred'")])
def test_refused_element_types_name_the_type_and_rule(dtype, shown):
    with pytest.raises(TensorMapError) as info:
        dtype_name(dtype)
    assert info.value.rule == "tensormap.dtype"
    assert f"dtype={shown} breaks 'a tensor-map element type is one of u8" in str(info.value)


def test_fp8_maps_move_bytes_and_never_fill_nan():
    spec = TensorMapSpec.tiled_for((64, 64), "float8_e4m3fn", (64, 64), address=0x1000)
    assert spec.dtype == "u8" and spec.elem_bytes == 1
    with pytest.raises(TensorMapError, match="oob_fill 'nan' needs a floating-point dtype"):
        TensorMapSpec.tiled_for((64, 64), "float8_e4m3fn", (64, 64), oob_fill="nan")
    assert set(ARRAY_DTYPES.values()) | set(MOVED_AS_BYTES.values()) <= set(DTYPES)


# ------------------------------------------------------------------------------------------------ reading arrays

def test_from_array_reads_a_dlpack_only_object_in_place():
    obj = DLPackOnly(shape=(32, 128), dtype="float8_e4m3fn", ptr=0x7200_0000)
    spec = TensorMapSpec.from_array(obj, (16, 64))
    assert (spec.dtype, spec.dims, spec.strides, spec.box, spec.global_address) == \
        ("u8", (128, 32), (128,), (64, 16), 0x7200_0000)
    assert spec.loc.file == __file__
    assert obj.calls == [{"max_version": dlpack.VERSION}]      # no stream: reading a layout orders no work
    gc.collect()
    assert dlpack.exported_count() == 0


def test_from_array_reads_torch_fp8_and_bf16_tensors():
    t = FakeTensor(ptr=0x7100_0000, shape=(64, 128), dtype="torch.float8_e5m2", esize=1)
    spec = TensorMapSpec.from_array(t, (64, 64))
    assert (spec.dtype, spec.dims, spec.strides, spec.global_address) == ("u8", (128, 64), (128,), 0x7100_0000)
    t = FakeTensor(shape=(64, 128), dtype="torch.bfloat16", esize=2)
    assert TensorMapSpec.from_array(t, (64, 64)).dtype == "bf16"


def test_host_arrays_are_refused_or_unbound():
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.from_array(DLPackOnly(device=(dlpack.CPU, 0)), (16, 64))
    assert info.value.rule == "tensormap.host-array" and "not cpu" in str(info.value)
    with pytest.raises(TensorMapError, match=r"arr=<tensor on cpu> breaks 'a tensor map's array is in device memory"):
        TensorMapSpec.from_array(FakeTensor(device=-1, shape=(64, 64)), (64, 64))
    spec = TensorMapSpec.from_array(np.zeros((64, 64), ml_dtypes.float8_e4m3fn), (64, 64))
    assert spec.global_address == 0 and spec.dtype == "u8"


def test_an_opaque_typestr_needs_a_dtype():
    arr = cai(shape=(64, 64), typestr="<V2", ptr=0x10000)
    with pytest.raises(TensorMapError) as info:
        TensorMapSpec.from_array(arr, (64, 64))
    assert info.value.rule == "tensormap.dtype"
    assert "'<V2' is an opaque 2-byte type" in str(info.value) and "DLPack" in str(info.value)
    assert TensorMapSpec.from_array(arr, (64, 64), dtype="bf16").dtype == "bf16"
    with pytest.raises(TensorMapError, match=r"dtype='f32' breaks 'dtype= has the array's element size \(2 bytes\)'"):
        TensorMapSpec.from_array(arr, (64, 64), dtype="f32")


def test_the_dlpack_reader_agrees_with_numpy():
    a = np.arange(24 * 8, dtype=np.float32).reshape(24, 8)[::2, 1::3]
    for kw in ({}, {"max_version": (1, 0)}):
        t = dlpack.read(a.__dlpack__(**kw))
        assert (t.address, t.shape, t.strides, t.dtype, t.itemsize) == (a.ctypes.data, a.shape, a.strides,
                                                                          "float32", 4)
        assert (t.device_type, t.device_id) == (dlpack.CPU, 0)
    with pytest.raises(ValueError, match="not an unconsumed DLPack capsule"):
        dlpack.read(object())


def test_a_capsule_numpy_consumes_is_released_by_its_deleter():
    owner = np.arange(12, dtype=np.int32)
    exporter = type("X", (), {"__dlpack_device__": lambda self: (dlpack.CPU, 0),
                              "__dlpack__": lambda self, **kw: dlpack.export(owner, owner.ctypes.data, (3, 4), "int32",
                                                                             0, versioned=True,
                                                                             device_type=dlpack.CPU)})()
    got = np.from_dlpack(exporter)
    assert got.tolist() == owner.reshape(3, 4).tolist() and dlpack.exported_count() == 1
    del got
    gc.collect()
    assert dlpack.exported_count() == 0


def test_views_of_each_source():
    v = arrays.view(cai(shape=(4, 8), typestr="<u2", ptr=0x5000, strides=(32, 2), stream=3))
    assert (v.address, v.device, v.shape, v.strides, v.dtype, v.stream) == (0x5000, None, (4, 8), (32, 2), "uint16", 3)
    v = arrays.view(FakeTensor(ptr=0x6000, device=0, shape=(2, 3), dtype="torch.int32"))
    assert (v.address, v.device, v.strides, v.dtype, v.source) == (0x6000, 0, (12, 4), "int32", "torch")
    with pytest.raises(arrays.NotAnArray):
        arrays.view(5)
    with pytest.raises(arrays.NotAnArray, match="has no mask"):
        arrays.view(CAI({"version": 3, "shape": (4,), "typestr": "<f4", "data": (1, False), "mask": object()}))


# ------------------------------------------------------------------------------------------------ DeviceArray

@pytest.mark.parametrize("dtype, name", [(ml_dtypes.bfloat16, "bfloat16"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
                                         (ml_dtypes.float8_e5m2, "float8_e5m2"), (np.float32, "float32")])
def test_device_array_exports_dlpack(dtype, name):
    arr = device_array((3, 5), dtype, ptr=0x7777_0000)
    assert arr.__dlpack_device__() == (dlpack.CUDA, 0)
    for max_version in (None, (1, 0)):
        capsule = arr.__dlpack__(max_version=max_version)
        t = dlpack.read(capsule)
        assert (t.address, t.shape, t.strides, t.dtype, t.device_type) == (0x7777_0000, (3, 5),
                                                                            (5 * t.itemsize, t.itemsize), name, 2)
        assert dlpack.exported_count() == 1
        del capsule, t
        gc.collect()
        assert dlpack.exported_count() == 0
    assert arrays.view(arr).dtype == name


def test_device_array_cai_matches_what_torch_and_ml_dtypes_write():
    arr = device_array((2, 2), ml_dtypes.bfloat16)
    cai_ = arr.__cuda_array_interface__
    assert cai_["typestr"] == "<V2" == np.dtype(ml_dtypes.bfloat16).str        # torch's bfloat16 typestr too
    assert cai_["stream"] == 1 and cai_["version"] == 3 and cai_["data"] == (arr.ptr, False)


def test_device_array_refuses_what_it_cannot_export():
    arr = device_array((2, 2), np.float32)
    with pytest.raises(BufferError, match="dl_device"):
        arr.__dlpack__(dl_device=(dlpack.CPU, 0))
    with pytest.raises(BufferError, match="copy=True"):
        arr.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="no DLPack type code"):
        device_array((2,), np.dtype("V3")).__dlpack__()


# ------------------------------------------------------------------------------------------------ torch operator

class FakeLibrary:
    """torch.library.custom_op as far as torch_op uses it: the registration is kept, the op calls the impl."""

    def __init__(self):
        self.ops = {}

    def custom_op(self, name, fn, *, mutates_args, device_types, schema):
        op = type("Op", (), {"__call__": lambda self, *a: fn(*a), "register_fake": lambda self, f: None})()
        self.ops[name] = {"schema": schema, "mutates": mutates_args, "device_types": device_types, "op": op}
        return op


class FakeLauncher:
    def __init__(self, params, declared=None):
        self.info = type("Info", (), {"name": "k", "params": params})()
        self.device = FakeDevice(0)
        self.calls = []
        for p in params:
            if p.kind == "tensormap":
                p.tmap = declared

    def __call__(self, *args, **kw):
        self.calls.append((args, kw))


def _param(name, kind, t=None):
    from ptxdsl.ir import Param as IRParam

    return IRParam(name, kind, t or types.u64)


@pytest.fixture
def fake_torch(monkeypatch):
    import sys
    import types as pytypes

    lib = FakeLibrary()
    monkeypatch.setitem(sys.modules, "torch", pytypes.SimpleNamespace(library=lib))
    monkeypatch.setattr(streams, "_torch_raw_stream", lambda ordinal: 0xCD00 + ordinal)
    return lib


def test_torch_op_schema_follows_the_kernel(fake_torch):
    from ptxdsl.runtime.torch_op import torch_op

    spec = TensorMapSpec.tiled_for((64, 128), "bf16", (32, 64), swizzle="128B")
    launcher = FakeLauncher([_param("src", "tensormap"), _param("dst", "ptr"), _param("n", "scalar", types.u32),
                             _param("scale", "scalar", types.f32)], declared=spec)
    op = torch_op(launcher, "lib::k", mutates_args=("dst",), grid=lambda src, dst, n, scale: n // 128, block=128)
    reg = fake_torch.ops["lib::k"]
    assert reg["schema"] == "(Tensor src, Tensor(a!) dst, int n, float scale) -> ()"
    assert reg["mutates"] == ("dst",) and reg["device_types"] == "cuda"
    t = FakeTensor(ptr=0x7100_0000, shape=(64, 128), dtype="torch.bfloat16", esize=2)
    op(t, 0x9000, 1024, 0.5)
    (args, kw), = launcher.calls
    assert isinstance(args[0], TensorMapSpec) and args[0].global_address == 0x7100_0000
    assert args[0].box == spec.box and args[0].swizzle == "128B" and args[1:] == (0x9000, 1024, 0.5)
    assert kw == {"grid": 8, "block": 128, "shared_bytes": None, "cluster": None, "stream": 0xCD00}


@pytest.mark.parametrize("kw, text, rule", [
    ({"mutates_args": ("n",)}, "mutates_args entry 'n' breaks 'mutates_args names tensor parameters", "mutates"),
    ({"mutates_args": ("nope",)}, "mutates_args entry 'nope'", "mutates"),
    ({}, "tensor-map parameter 'm' breaks 'a map's box comes from the spec the kernel declared", "map"),
])
def test_torch_op_errors_name_the_parameter(fake_torch, kw, text, rule):
    from ptxdsl.runtime.torch_op import torch_op

    launcher = FakeLauncher([_param("m", "tensormap"), _param("n", "scalar", types.u32)])
    with pytest.raises(LaunchError) as info:
        torch_op(launcher, "lib::bad", grid=1, block=32, **kw)
    assert text in str(info.value) and info.value.rule == f"torch-op.{rule}" and info.value.loc.file == __file__
    launcher = FakeLauncher([_param("m", "tensormap"), _param("n", "scalar", types.u32)])
    torch_op(launcher, "lib::ok", grid=1, block=32, maps={"m": ((16, 64), {"swizzle": "64B"})})
    assert fake_torch.ops["lib::ok"]["schema"] == "(Tensor m, int n) -> ()"


def test_the_low_level_launch_keeps_a_plan_per_parameter_list(fake):
    f = FakeFunction()
    params = (Param("n", "scalar", types.u32),)
    fake.sizes = [4]
    for v in (1, 2):
        launch_mod.launch(f, params, (v,), grid=1, block=1)
    launch_mod.launch(f, [Param("n", "scalar", types.u32)], (3,), grid=1, block=1)    # an equal list: the same plan
    assert [x["params"] for x in fake.launches] == [[struct.pack("<I", v)] for v in (1, 2, 3)]
    assert len(launch_mod._plans[f]) == 1
    for i in range(40):
        launch_mod.launch(f, (Param(f"n{i}", "scalar", types.u32),), (i,), grid=1, block=1)
    assert len(launch_mod._plans[f]) == launch_mod.PLANS_PER_FUNCTION


def test_a_name_that_is_no_type_at_all_lists_the_ptx_names():
    from ptxdsl.errors import DSLError

    with pytest.raises(DSLError, match="type='float8' is not a PTX scalar type"):
        TensorMapSpec.tiled_for((64, 64), "float8", (64, 64))


# ------------------------------------------------------------------------------------------------ launch checks

def test_the_verifiers_launch_checks_run_before_the_launch_once_per_signature(fake, monkeypatch):
    """A kernel whose box coordinate and expect_tx bytes are parameters (tests/test_launch_checks_gpu.py's):
    the plan runs ptxdsl.verify's launch checks with the arguments, and skips them when the read arguments,
    block and cluster repeat."""
    import ptxdsl as px
    from test_launch_checks_gpu import BOX, SPEC, THREADS, param_copy

    monkeypatch.setattr(launch_mod, "encode", lambda spec, device: FakeMap(7))
    info = px.emit(param_copy()).kernels["param_copy"]
    runs = []
    real = type(info.launch_checks).run
    monkeypatch.setattr(type(info.launch_checks), "run", lambda self, *a: runs.append(a[0]) or real(self, *a))
    p = Plan(FakeFunction("param_copy"), info.params, checks=info.launch_checks)
    fake.sizes = [128, 8, 4, 4, 4]
    spec = SPEC.bind(0x7000_0000)
    with pytest.raises(LaunchError) as e:
        p(spec, 0x1000, 4, 0, BOX, grid=1, block=THREADS)
    assert e.value.rule == "coord-align" and "launched with x=4" in str(e.value) and not fake.launches
    with pytest.raises(LaunchError) as e:
        p(spec, 0x1000, 8, 0, BOX + 16, grid=1, block=THREADS)
    assert e.value.rule == "expect-tx-mismatch"
    for _ in range(3):
        p(spec, 0x1000, 8, 0, BOX, grid=1, block=THREADS)
    p(spec, 0x2000, 8, 0, BOX, grid=1, block=THREADS)          # a pointer the checks do not read
    assert len(fake.launches) == 4 and len(runs) == 3
    p(spec, 0x1000, 16, 0, BOX, grid=1, block=THREADS)         # a new coordinate: checked
    assert len(runs) == 4


def test_launch_checks_off(fake, monkeypatch):
    import ptxdsl as px
    from test_launch_checks_gpu import BOX, SPEC, THREADS, param_copy

    monkeypatch.setenv("PTXDSL_LAUNCH_CHECKS", "0")
    monkeypatch.setattr(launch_mod, "encode", lambda spec, device: FakeMap(7))
    info = px.emit(param_copy()).kernels["param_copy"]
    p = Plan(FakeFunction("param_copy"), info.params, checks=info.launch_checks)
    fake.sizes = [128, 8, 4, 4, 4]
    p(SPEC.bind(0x7000_0000), 0x1000, 4, 0, BOX, grid=1, block=THREADS)
    assert len(fake.launches) == 1


@pytest.mark.parametrize("code, quiet", [(driver.CUresult.CUDA_ERROR_LAUNCH_FAILED, True),
                                         (driver.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, True),
                                         (driver.CUresult.CUDA_ERROR_DEINITIALIZED, True),
                                         (driver.CUresult.CUDA_ERROR_INVALID_VALUE, False)])
def test_freeing_in_a_context_a_fault_took_down_is_quiet(monkeypatch, code, quiet):
    """A buffer collected after a kernel fault (or at the driver's shutdown): cuMemFree answers with the fault, the
    allocation went with the context, so there is nothing to report; any other failure still raises."""
    from ptxdsl.errors import CudaError
    from ptxdsl.runtime import memory
    from ptxdsl.runtime.driver import cuda_error

    def failing(fn, *args):
        raise cuda_error(code, fn.__name__)
    monkeypatch.setattr(memory, "call", failing)
    device = namedtuple("Device", "set_current")(lambda: None)
    if quiet:
        memory._release(device, 0x1000)
    else:
        with pytest.raises(CudaError, match="CUDA_ERROR_INVALID_VALUE"):
            memory._release(device, 0x1000)


class CupyLike(DLPackOnly):
    """A CuPy array's surface: DLPack, and a type whose module is CuPy's."""


CupyLike.__module__ = "cupy._core.core"


def test_cupy_arrays_launch_on_cupys_current_stream(fake, monkeypatch):
    """As torch tensors take torch's current stream: with CuPy arrays and no stream=, CuPy's current stream (its
    DLPack export is ordered before it); an explicit stream wins; a launch without CuPy arrays keeps the default."""
    import sys
    from types import SimpleNamespace

    current = SimpleNamespace(ptr=0xC0DE)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: current)))
    p = plan(("a", "ptr", types.u64), fake=fake)
    arr = CupyLike(dtype="float32")
    p(arr, grid=1, block=32)
    assert fake.last["stream"] == 0xC0DE and arr.calls[-1]["stream"] == 0xC0DE
    assert fake.last["params"] == [struct.pack("<Q", arr.ptr)]
    current.ptr = 0                                         # CuPy's default stream: the legacy one
    p(arr, grid=1, block=32)
    assert fake.last["stream"] == 0 and arr.calls[-1]["stream"] == 1     # DLPack spells the legacy stream 1
    p(arr, grid=1, block=32, stream=StreamProtocol(21))
    assert fake.last["stream"] == 21
    p(DLPackOnly(dtype="float32"), grid=1, block=32)        # not CuPy's: the default stream
    assert fake.last["stream"] == 0
