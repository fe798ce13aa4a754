"""The runtime on a real device: properties, memory, JIT load, launches, tensor maps, validate-vs-driver agreement."""
from __future__ import annotations

from collections import namedtuple
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ptxdsl import types
from ptxdsl.errors import CudaError, LaunchError, TensorMapError
from ptxdsl.runtime import (Device, current_device, empty, encode, encode_raw, launch, load_ptx,
                            tensormap_bytes, to_device, zeros)
from ptxdsl.tensormap import (CORNER_RANGE, DTYPES, INTERLEAVE, L2_PROMOTION, STRICTER_THAN_DRIVER, SWIZZLE,
                              TensorMapSpec)

pytestmark = pytest.mark.gpu

Param = namedtuple("Param", "name kind type")

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"

STORE_TID = HEADER + """
.visible .entry store_tid(.param .u64 out, .param .u32 n, .param .u32 bias)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r5, [bias];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r3, %r3, %r4, %r2;
    setp.ge.u32 %p1, %r3, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.u32 %r2, %r2, %r5;
    st.global.u32 [%rd3], %r2;
DONE:
    ret;
}

.visible .entry cluster_rank(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %cluster_ctarank;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}

.visible .entry scalars(.param .u64 out, .param .s32 a, .param .f32 b, .param .u16 c, .param .s64 d,
                        .param .f64 e, .param .b16 f, .param .u8 g)
{
    .reg .b16 %rs<4>;
    .reg .b32 %r<2>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<3>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.s32 %r1, [a];
    st.global.s32 [%rd1], %r1;
    ld.param.f32 %f1, [b];
    st.global.f32 [%rd1+4], %f1;
    ld.param.u16 %rs1, [c];
    st.global.u16 [%rd1+8], %rs1;
    ld.param.s64 %rd2, [d];
    st.global.s64 [%rd1+16], %rd2;
    ld.param.f64 %fd1, [e];
    st.global.f64 [%rd1+24], %fd1;
    ld.param.b16 %rs2, [f];
    st.global.b16 [%rd1+32], %rs2;
    ld.param.u8 %rs3, [g];
    st.global.u8 [%rd1+34], %rs3;
    ret;
}
"""

SMEM_ECHO = HEADER + """
.extern .shared .align 16 .b8 dsmem[];

.visible .entry smem_echo(.param .u64 out, .param .u32 offset)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [offset];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, dsmem;
    add.u32 %r3, %r3, %r1;
    shl.b32 %r4, %r2, 2;
    add.u32 %r3, %r3, %r4;
    add.u32 %r5, %r2, 7;
    st.shared.u32 [%r3], %r5;
    bar.sync 0;
    ld.shared.u32 %r5, [%r3];
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""

TMA_COPY = HEADER + """
.extern .shared .align 1024 .b8 tile[];

.visible .entry tma_copy(.param .align 64 .b8 src[128], .param .align 64 .b8 dst[128],
                         .param .u32 x0, .param .u32 y0, .param .u32 nbytes)
{
    .reg .pred %p<3>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<5>;
    mov.b64 %rd1, src;
    cvta.param.u64 %rd2, %rd1;
    mov.b64 %rd3, dst;
    cvta.param.u64 %rd4, %rd3;
    ld.param.u32 %r1, [x0];
    ld.param.u32 %r2, [y0];
    ld.param.u32 %r8, [nbytes];
    mov.u32 %r3, tile;
    add.u32 %r4, %r3, %r8;
    mov.u32 %r5, %tid.x;
    setp.eq.u32 %p1, %r5, 0;
    @!%p1 bra ISSUED;
    mbarrier.init.shared::cta.b64 [%r4], 1;
    fence.mbarrier_init.release.cluster;
    mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r4], %r8;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r1, %r2}], [%r4];
ISSUED:
    bar.sync 0;
    mov.u32 %r7, 0;
WAIT:
    mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [%r4], %r7;
    @!%p2 bra WAIT;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @!%p1 bra DONE;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd4, {%r1, %r2}], [%r3];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
DONE:
    ret;
}
"""

BAD_PTX = HEADER + """
.visible .entry broken(.param .u64 out)
{
    .reg .b32 %r<2>;
    frobnicate.u32 %r1, 1;
    ret;
}
"""

TID_PARAMS = (Param("out", "ptr", types.u64), Param("n", "scalar", types.u32), Param("bias", "scalar", types.u32))
SCALAR_PARAMS = (Param("out", "ptr", types.u64), Param("a", "scalar", types.s32), Param("b", "scalar", types.f32),
                 Param("c", "scalar", types.u16), Param("d", "scalar", types.s64), Param("e", "scalar", types.f64),
                 Param("f", "scalar", types.bf16), Param("g", "scalar", types.u8))
TMA_PARAMS = (Param("src", "tensormap", None), Param("dst", "tensormap", None), Param("x0", "scalar", types.u32),
              Param("y0", "scalar", types.u32), Param("nbytes", "scalar", types.u32))


@pytest.fixture(scope="module")
def device():
    return Device(0)


@pytest.fixture(scope="module")
def module(device):
    with load_ptx(STORE_TID, name="runtime-test") as mod:
        yield mod


# ---------------------------------------------------------------------------- device and memory

def test_device_properties(device):
    assert Device(0) is device and current_device() is device
    assert device.name
    assert device.compute_capability >= (9, 0)
    assert device.sm_count > 0
    assert device.max_threads_per_block == 1024
    assert device.max_shared_per_block_optin > 48 * 1024
    assert device.cluster_launch
    device.synchronize()


@pytest.mark.parametrize("dtype, bits", [(np.uint8, np.uint8), (np.float32, np.uint32),
                                         (ml_dtypes.bfloat16, np.uint16)])
def test_round_trip_is_bit_exact(device, dtype, bits):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, np.iinfo(bits).max, size=(37, 129), dtype=bits, endpoint=True)
    host = raw.view(dtype)
    with to_device(host) as arr:
        assert arr.shape == host.shape and arr.dtype == np.dtype(dtype) and arr.nbytes == host.nbytes
        assert arr.strides == host.strides
        back = arr.to_host()
        assert back.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(back.view(bits), raw)
        cai = arr.__cuda_array_interface__
        assert cai["data"][0] == arr.ptr and cai["shape"] == host.shape
    assert arr.freed


def test_zeros_empty_fill(device):
    z = zeros((5, 7), "bf16")
    assert z.dtype == np.dtype(ml_dtypes.bfloat16)
    assert not z.to_host().view(np.uint16).any()
    e = empty(100, np.uint8)
    e.fill_bytes(0xAB)
    assert (e.to_host() == 0xAB).all()
    with pytest.raises(Exception, match="0..255"):
        e.fill_bytes(256)
    assert empty((0, 4), np.float32).to_host().shape == (0, 4)
    z.free()
    e.free()
    e.free()


# ---------------------------------------------------------------------------- modules

def test_bad_ptx_raises_with_jit_log(device):
    with pytest.raises(CudaError) as info:
        load_ptx(BAD_PTX, name="bad-module")
    err = info.value
    assert err.name == "CUDA_ERROR_INVALID_PTX", str(err)
    assert err.code == 218
    assert "cuModuleLoadDataEx" in str(err) and "bad-module" in str(err)
    assert "frobnicate" in err.log or "error" in err.log.lower(), err.log


def test_function_attributes(module):
    f = module.function("store_tid")
    assert module.function("store_tid") is f
    attrs = f.attributes
    assert attrs["num_regs"] > 0
    assert attrs["static_shared_bytes"] == 0
    assert attrs["max_threads_per_block"] == 1024
    with pytest.raises(CudaError) as info:
        module.function("no_such_kernel")
    assert info.value.name == "CUDA_ERROR_NOT_FOUND"


# ---------------------------------------------------------------------------- launches

def test_launch_stores_tid(module):
    f = module.function("store_tid")
    n, block = 1000, 128
    out = empty(1024, np.uint32)
    out.fill_bytes(0xFF)
    launch(f, TID_PARAMS, (out, n, 5), grid=(n + block - 1) // block, block=block, sync=True)
    got = out.to_host()
    want = np.full(1024, 0xFFFFFFFF, np.uint32)
    want[:n] = np.arange(n) % block + 5
    np.testing.assert_array_equal(got, want)
    launch(f, TID_PARAMS, (out.ptr, n, np.uint32(1)), grid=(8, 1, 1), block=(block, 1), sync=True)
    np.testing.assert_array_equal(out.to_host()[:n], np.arange(n) % block + 1)


def test_launch_packs_scalars_by_width(module):
    f = module.function("scalars")
    out = zeros(40, np.uint8)
    launch(f, SCALAR_PARAMS, (out, -123456, 1.5, 65535, -(2**40) - 3, -2.25, 3.0, 200), grid=1, block=1, sync=True)
    raw = out.to_host().tobytes()
    assert np.frombuffer(raw, np.int32, 1, 0)[0] == -123456
    assert np.frombuffer(raw, np.float32, 1, 4)[0] == 1.5
    assert np.frombuffer(raw, np.uint16, 1, 8)[0] == 65535
    assert np.frombuffer(raw, np.int64, 1, 16)[0] == -(2**40) - 3
    assert np.frombuffer(raw, np.float64, 1, 24)[0] == -2.25
    assert np.frombuffer(raw, ml_dtypes.bfloat16, 1, 32)[0] == 3.0
    assert raw[34] == 200


@pytest.mark.parametrize("cluster", [(2, 1, 1), (4, 1, 1), (8, 1, 1)])
def test_launch_with_cluster(module, cluster):
    f = module.function("cluster_rank")
    out = zeros(16, np.uint32)
    launch(f, (Param("out", "ptr", types.u64),), (out,), grid=16, block=32, cluster=cluster, sync=True)
    np.testing.assert_array_equal(out.to_host(), np.arange(16) % cluster[0])


def test_launch_non_portable_cluster(module):
    f = module.function("cluster_rank")
    out = zeros(32, np.uint32)
    params = (Param("out", "ptr", types.u64),)
    with pytest.raises(LaunchError, match="at most 8 CTAs"):
        launch(f, params, (out,), grid=32, block=32, cluster=16)
    f.set_non_portable_cluster_size_allowed()
    launch(f, params, (out,), grid=32, block=32, cluster=16, sync=True)
    np.testing.assert_array_equal(out.to_host(), np.arange(32) % 16)


def test_large_dynamic_shared_memory(device):
    with load_ptx(SMEM_ECHO) as mod:
        f = mod.function("smem_echo")
        nbytes = 200 * 1024
        out = zeros(32, np.uint32)
        params = (Param("out", "ptr", types.u64), Param("offset", "scalar", types.u32))
        launch(f, params, (out, nbytes - 128), grid=1, block=32, shared_bytes=nbytes, sync=True)
        assert f.max_dynamic_shared >= nbytes
        np.testing.assert_array_equal(out.to_host(), np.arange(32) + 7)
        optin = device.max_shared_per_block_optin
        with pytest.raises(LaunchError) as info:
            launch(f, params, (out, 0), grid=1, block=32, shared_bytes=optin + 1)
        assert f"shared_bytes={optin + 1}" in str(info.value) and str(optin) in str(info.value)


@pytest.mark.parametrize("args, kw, expect", [
    ((1, 2), {}, "len(args)=2"),
    (("OUT", -1, 0), {}, "(n: scalar .u32) = -1"),
    (("OUT", 1.5, 0), {}, "n: scalar .u32"),
    ((np.zeros(4, np.uint32), 1, 0), {}, "to_device()"),
    (("OUT", 1, 0), {"block": 1025}, "block.x=1025"),
    (("OUT", 1, 0), {"block": (32, 32, 2)}, "2048 threads"),
    (("OUT", 1, 0), {"grid": 0}, "grid.x=0"),
    (("OUT", 1, 0), {"grid": 3, "cluster": 2}, "grid.x=3"),
    (("OUT", 1, 0), {"shared_bytes": -1}, "shared_bytes=-1"),
])
def test_launch_errors_name_the_value(module, args, kw, expect):
    f = module.function("store_tid")
    out = zeros(4, np.uint32)
    args = tuple(out if isinstance(a, str) else a for a in args)
    kw = {"grid": 1, "block": 32, **kw}
    with pytest.raises(LaunchError) as info:
        launch(f, TID_PARAMS, args, **kw)
    assert expect in str(info.value), str(info.value)
    assert info.value.loc.file == __file__


def test_launch_rejects_freed_array(module):
    out = zeros(4, np.uint32)
    out.free()
    with pytest.raises(LaunchError, match="freed"):
        launch(module.function("store_tid"), TID_PARAMS, (out, 1, 0), grid=1, block=32)


# ---------------------------------------------------------------------------- tensor maps

def test_encode_valid_tiled_map(device):
    with zeros((64, 128), "bf16") as arr:
        spec = TensorMapSpec.from_array(arr, (32, 64), swizzle="128B")
        tmap = encode(spec)
        raw = tensormap_bytes(tmap)
        assert len(raw) == 128 and any(raw)
        assert tensormap_bytes(encode_raw(spec)) == raw


def test_encode_valid_im2col_map(device):
    with zeros((2, 16, 16, 64), "f16") as arr:
        spec = TensorMapSpec.im2col_for(arr.shape, arr.dtype, channels_per_pixel=64, pixels_per_column=128,
                                        lower_corner=(-1, -1), upper_corner=(-1, -1), swizzle="128B",
                                        address=arr.ptr)
        assert len(tensormap_bytes(encode(spec))) == 128


def test_encode_checks_compute_capability(device):
    if device.compute_capability >= (10, 0):
        pytest.skip("swizzle modes 4-6 are legal on this device")
    with zeros((8, 64), "bf16") as arr:
        spec = TensorMapSpec.from_array(arr, (8, 64), swizzle="128B_atom_32B")
        with pytest.raises(TensorMapError) as info:
            encode(spec)
        assert info.value.rule == "tensormap.compute-capability"


def test_encode_raw_rejection_is_a_cuda_error(device):
    with zeros((8, 64), "f32") as arr:
        spec = replace(TensorMapSpec.from_array(arr, (8, 64)), box=(300, 8))
        with pytest.raises(TensorMapError):
            encode(spec)
        with pytest.raises(CudaError) as info:
            encode_raw(spec)
        assert info.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_tma_copy_kernel_moves_one_box(device):
    rng = np.random.default_rng(3)
    host = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    with load_ptx(TMA_COPY) as mod, to_device(host) as src, zeros(host.shape, "bf16") as dst:
        box = (32, 64)
        nbytes = 32 * 64 * 2
        dst_map = encode(TensorMapSpec.from_array(dst, box, swizzle="128B"))
        launch(mod.function("tma_copy"), TMA_PARAMS,
               (TensorMapSpec.from_array(src, box, swizzle="128B"), dst_map, 64, 32, nbytes),
               grid=1, block=128, shared_bytes=nbytes + 1024, sync=True)
        got = dst.to_host().view(np.uint16)
    want = np.zeros_like(got)
    want[32:64, 64:128] = host.view(np.uint16)[32:64, 64:128]
    np.testing.assert_array_equal(got, want)



def test_tma_copy_with_torch_tensors(device):
    """Torch tensors as they come: tensor maps from from_array(tensor), a pointer argument from data_ptr()."""
    torch = pytest.importorskip("torch")
    src = torch.randn(64, 128, device="cuda").to(torch.bfloat16)
    dst = torch.zeros_like(src)
    box, nbytes = (32, 64), 32 * 64 * 2
    with load_ptx(TMA_COPY) as mod:
        launch(mod.function("tma_copy"), TMA_PARAMS,
               (TensorMapSpec.from_array(src, box, swizzle="128B"), TensorMapSpec.from_array(dst, box, swizzle="128B"),
                64, 32, nbytes), grid=1, block=128, shared_bytes=nbytes + 1024, sync=True)
    want = torch.zeros_like(src)
    want[32:64, 64:128] = src[32:64, 64:128]
    assert torch.equal(dst.view(torch.int16), want.view(torch.int16))


def test_launch_with_torch_pointer_argument(module):
    torch = pytest.importorskip("torch")
    out = torch.full((1024,), -1, dtype=torch.int32, device="cuda")
    launch(module.function("store_tid"), TID_PARAMS, (out, 1000, 7), grid=8, block=128, sync=True)
    want = torch.full((1024,), -1, dtype=torch.int32)
    want[:1000] = torch.arange(1000, dtype=torch.int32) % 128 + 7
    assert torch.equal(out.cpu(), want)


def test_host_torch_tensors_are_refused(module):
    torch = pytest.importorskip("torch")
    host = torch.zeros(1024, dtype=torch.int32)
    with pytest.raises(LaunchError, match=r"argument 0 \(out: ptr .u64\) = <tensor \(1024,\) torch.int32 on cpu>") as info:
        launch(module.function("store_tid"), TID_PARAMS, (host, 1000, 7), grid=8, block=128, sync=True)
    assert info.value.rule == "launch.arg-host-tensor"
    with pytest.raises(TensorMapError, match="tensor on cpu") as info:
        TensorMapSpec.from_array(torch.zeros(64, 64, dtype=torch.bfloat16), (32, 32))
    assert info.value.rule == "tensormap.host-array"
    assert "test_runtime_gpu.py" in str(info.value)


# ---------------------------------------------------------------------------- validate() vs the driver

def our_verdict(spec: TensorMapSpec, device: Device) -> str:
    """What encode() decides before the driver: 'ok' or the broken rule."""
    try:
        spec.validate()
    except TensorMapError as e:
        return e.rule
    return "ok" if device.compute_capability >= spec.min_compute_capability else "tensormap.compute-capability"


def agree(ours: str, theirs: str) -> bool:
    """Both accept or both reject; a rule listed in STRICTER_THAN_DRIVER may reject what the driver accepts."""
    return (ours == "ok") == (theirs == "ok") or ours in STRICTER_THAN_DRIVER


def driver_verdict(spec: TensorMapSpec) -> str:
    """What the driver (or cuda-bindings, for lists it cannot pass) decides: 'ok' or the error's name."""
    try:
        encode_raw(spec)
    except CudaError as e:
        return e.name
    except TensorMapError as e:
        return e.rule
    return "ok"


def _c_strides(dims, esize, align=16):
    out, span = [], dims[0] * esize
    for d in dims[1:]:
        s = -(-span // align) * align
        out.append(s)
        span = s * d
    return tuple(out)


def boundary_cases(ptr: int):
    """(label, spec) pairs on both sides of every rule the driver checks."""
    t = TensorMapSpec(dtype="f32", dims=(64, 32, 4), strides=(256, 8192), box=(32, 8, 2), global_address=ptr)
    yield "base", t
    for i in range(3):
        for d in (0, 1, 2**32, 2**32 + 1):
            dims = t.dims[:i] + (d,) + t.dims[i + 1:]
            yield f"dims[{i}]={d}", replace(t, dims=dims, strides=_c_strides(dims, 4) if i < 2 else t.strides)
    for rank in (1, 2, 4, 5, 6):
        dims = ((64,) + (2,) * 5)[:rank]
        yield f"rank={rank}", replace(t, dims=dims, strides=_c_strides(dims, 4), box=((32,) + (2,) * 5)[:rank])
    for s0 in (0, 240, 248, 256, 264, 272, 2**40 - 16, 2**40):
        yield f"strides[0]={s0}", replace(t, strides=(s0, max(8192, s0 * 32)))
    for s1 in (8192 - 16, 8192 - 8, 8192, 8200, 8208):
        yield f"strides[1]={s1}", replace(t, strides=(256, s1))
    for off in (4, 8, 16, 32, 48):
        yield f"address+{off}", replace(t, global_address=ptr + off)
    for i in range(3):
        for b in (0, 1, 255, 256, 257):
            if i == 0 and b % 4:
                continue
            yield f"box[{i}]={b}", replace(t, box=t.box[:i] + (b,) + t.box[i + 1:])
    for k in (57, 58):
        yield f"box bytes {k * 4096}", replace(t, box=(32, 32, k))
        for b2, es in ((2 * k, 2), (2 * k + 1, 2), (3 * k + 2, 3)):
            yield (f"box bytes {k * 4096}, box[2]={b2} element_strides[2]={es}",
                   replace(t, box=(32, 32, b2), element_strides=(1, 1, es)))
        yield f"box bytes {k * 4096}, element_strides[0]=2", replace(t, box=(64, 32, k), element_strides=(2, 1, 1))
    for b0 in (1, 2, 3, 4, 6, 8, 12):
        yield f"f32 box[0]={b0}", replace(t, box=(b0, 8, 2))
    for swz, span in (("32B", 32), ("64B", 64), ("128B", 128), ("128B_atom_32B", 128), ("128B_atom_64B", 128)):
        for inner in (span - 16, span, span + 16):
            yield f"swizzle {swz} inner={inner}B", replace(t, swizzle=swz, box=(inner // 4, 8, 2))
    for i in range(3):
        for e in (0, 1, 2, 8, 9):
            es = [1, 1, 1]
            es[i] = e
            yield f"element_strides[{i}]={e}", replace(t, element_strides=tuple(es))
    yield "box larger than dims", replace(t, dims=(16, 4, 4), strides=(64, 256), box=(32, 8, 2))
    for name, (_, esize) in sorted(DTYPES.items()):
        dims = (256, 32, 4)
        for fill in ("zero", "nan"):
            yield f"{name} oob={fill}", TensorMapSpec(dtype=name, dims=dims, strides=_c_strides(dims, esize),
                                                      box=(64 // esize * 2, 8, 2), oob_fill=fill, global_address=ptr)
    for l2 in L2_PROMOTION:
        yield f"l2={l2}", replace(t, l2_promotion=l2)
    for il in ("16B", "32B"):
        for swz in ("none", "32B", "64B", "128B"):
            for rank in (2, 3):
                dims = (8, 16, 4)[:rank]
                yield (f"interleave {il} swizzle {swz} rank {rank}",
                       TensorMapSpec(dtype="f16", dims=dims, strides=_c_strides(dims, 2, 32), box=(8, 8, 2)[:rank],
                                     interleave=il, swizzle=swz, global_address=ptr))
        yield (f"interleave {il} stride 16", TensorMapSpec(dtype="f16", dims=(8, 16, 4), strides=(16, 256),
                                                           box=(8, 8, 2), interleave=il, swizzle="32B",
                                                           global_address=ptr))
        yield (f"interleave {il} address+16",
               TensorMapSpec(dtype="f16", dims=(8, 16, 4), strides=(32, 512), box=(8, 8, 2), interleave=il,
                             swizzle="32B", global_address=ptr + 16))
    for rank in (3, 4, 5):
        dims = (32,) + (8,) * (rank - 2) + (2,)
        base = TensorMapSpec(dtype="f16", dims=dims, strides=_c_strides(dims, 2), box=(), kind="im2col",
                             lower_corner=(0,) * (rank - 2), upper_corner=(0,) * (rank - 2), channels_per_pixel=32,
                             pixels_per_column=64, global_address=ptr)
        yield f"im2col rank {rank}", base
        lo, hi = CORNER_RANGE[rank]
        for c in (lo - 1, lo, hi, hi + 1):
            yield f"im2col rank {rank} lower={c}", replace(base, lower_corner=(c,) + base.lower_corner[1:])
            yield f"im2col rank {rank} upper={c}", replace(base, upper_corner=(c,) + base.upper_corner[1:])
        for extent in (-1, 0, 1, 2):
            up = extent - 8
            if lo <= up <= hi:
                yield (f"im2col rank {rank} extent={extent}",
                       replace(base, upper_corner=(up,) + base.upper_corner[1:]))
        for cpp in (0, 1, 4, 8, 16, 256, 257):
            yield f"im2col rank {rank} channels={cpp}", replace(base, channels_per_pixel=cpp)
        for ppc in (0, 1, 1024, 1025):
            yield f"im2col rank {rank} pixels={ppc}", replace(base, pixels_per_column=ppc)
        for cpp, ppc in ((128, 912), (128, 913), (256, 456), (256, 457)):
            yield (f"im2col rank {rank} box bytes {cpp * ppc * 2}",
                   replace(base, channels_per_pixel=cpp, pixels_per_column=ppc))
        for swz in ("32B", "64B", "128B"):
            yield f"im2col rank {rank} swizzle {swz}", replace(base, swizzle=swz)
        for i in range(rank - 2):                      # the pixel box area of each pixel dimension at 0 and 1,
            for il in ("none", "16B"):                 # counted from dims[0] in an interleaved map
                first = 0 if il == "16B" else 1
                for extent in (0, 1):
                    dims = list(base.dims)
                    dims[first + i] = 1
                    lower = tuple(1 - extent if j == i else 0 for j in range(rank - 2))
                    yield (f"im2col rank {rank} interleave {il} pixel dim {i} extent={extent}",
                           replace(base, dims=tuple(dims), strides=_c_strides(dims, 2), interleave=il,
                                   channels_per_pixel=8 if il == "16B" else 32, lower_corner=lower))
        if rank == 3:                                  # dims + upper_corner in signed 32 bits (2^32-1 + 2 wraps to
            for il, d in (("none", 1), ("16B", 0)):    # 1: the driver accepts it, validate() does not)
                for v, lo, up in ((2**31 - 1, 0, 0), (2**31 - 1, 0, 1), (2**31 - 1, 1, 0), (2**31 - 1, -1, 0),
                                  (2**31, 0, 0), (2**31, 1, 0), (2**32 - 1, 0, 1), (2**32 - 1, 0, 2)):
                    dims = [8, 1, 1]
                    dims[d] = v
                    strides = (2**33, 2**33) if il == "16B" else (16, 16 * v)
                    yield (f"im2col rank 3 interleave {il} dims[{d}]={v} corners {lo}..{up}",
                           TensorMapSpec(dtype="bf16", dims=tuple(dims), strides=strides, box=(), kind="im2col",
                                         interleave=il, swizzle="128B" if il == "16B" else "none", lower_corner=(lo,),
                                         upper_corner=(up,), channels_per_pixel=8, pixels_per_column=1,
                                         global_address=ptr))
        for il in ("none", "16B"):                     # pixel dimensions are < 2^31, the others are not
            for i in range(rank):
                for v in (2**31 - 1, 2**31):
                    dims = list(base.dims)
                    dims[i] = v
                    yield (f"im2col rank {rank} interleave {il} dims[{i}]={v}",
                           replace(base, dims=tuple(dims), strides=_c_strides(dims, 2), interleave=il,
                                   channels_per_pixel=8 if il == "16B" else 32))


def test_validate_agrees_with_driver_on_boundaries(device):
    """Every boundary case: validate()+capability and the driver both accept or both reject (all listed at once)."""
    with empty(1 << 16, np.uint8) as buf:
        base = (buf.ptr + 255) // 256 * 256
        rows = []
        for label, spec in boundary_cases(base):
            ours, theirs = our_verdict(spec, device), driver_verdict(spec)
            if not agree(ours, theirs):
                rows.append(f"{label}: validate={ours} driver={theirs}\n    {spec!r}")
    assert not rows, f"{len(rows)} disagreements:\n" + "\n".join(rows)


def _near(*points, spread=(-1, 0, 1)):
    return st.sampled_from(sorted({p + d for p in points for d in spread if p + d >= 0}))


@st.composite
def near_boundary_specs(draw):
    """Random specs whose every field sits at or next to a rule boundary (counts always match the rank)."""
    kind = draw(st.sampled_from(["tiled", "tiled", "im2col"]))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    esize = DTYPES[dtype][1]
    interleave = draw(st.sampled_from(["none", "none", "none", *INTERLEAVE]))
    swizzle = "32B" if interleave == "32B" and draw(st.booleans()) else draw(st.sampled_from(sorted(SWIZZLE)))
    align = 32 if interleave == "32B" else 16
    rank = draw(st.integers(2, 6) if kind == "im2col" else st.integers(0, 6))
    dims = [draw(st.one_of(st.integers(1, 48), _near(1, 2**32))) for _ in range(rank)]
    strides, span = [], (dims[0] * esize if dims else 0)
    for d in dims[1:]:
        s = max(0, -(-span // align) * align + draw(st.sampled_from([-32, -16, -8, 0, 0, 0, 0, 8, 16, 32])))
        strides.append(min(s, 2**40 + 32))
        span = s * d
    estrides = draw(st.one_of(st.just(()), st.tuples(*[st.one_of(st.integers(1, 8), _near(0, 8))] * rank)))
    fields = dict(dtype=dtype, dims=tuple(dims), strides=tuple(strides), element_strides=estrides,
                  interleave=interleave, swizzle=swizzle, l2_promotion=draw(st.sampled_from(sorted(L2_PROMOTION))),
                  oob_fill=draw(st.sampled_from(["zero", "nan"])),
                  global_address=draw(st.sampled_from([0, 0, 0, 0, 4, 8, 16, 32, 48])))
    inner = st.one_of(st.integers(1, 16).map(lambda k: max(1, k * 16 // esize)), _near(1, 256), st.integers(1, 64))
    if kind == "tiled":
        box = [draw(inner)] + [draw(st.one_of(st.integers(1, 64), _near(0, 256))) for _ in range(rank - 1)]
        return TensorMapSpec(box=tuple(box[:rank]), **fields)
    lo, hi = CORNER_RANGE.get(rank, (-16, 15))
    corner = st.one_of(st.integers(lo, hi), st.sampled_from([lo - 1, lo, -1, 0, 1, hi, hi + 1]))
    return TensorMapSpec(box=(), kind="im2col", **fields,
                         lower_corner=tuple(draw(corner) for _ in range(rank - 2)),
                         upper_corner=tuple(draw(corner) for _ in range(rank - 2)),
                         channels_per_pixel=draw(inner), pixels_per_column=draw(st.one_of(st.integers(1, 1024),
                                                                                           _near(0, 1, 1024))))


@pytest.fixture(scope="module")
def aligned_base(device):
    with empty(1 << 16, np.uint8) as buf:
        yield (buf.ptr + 255) // 256 * 256


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=near_boundary_specs())
def test_validate_agrees_with_driver(device, aligned_base, spec):
    spec = spec.bind(aligned_base + spec.global_address)
    ours, theirs = our_verdict(spec, device), driver_verdict(spec)
    note(f"validate={ours} driver={theirs}")
    assert agree(ours, theirs), f"validate={ours} driver={theirs}\nspec={spec!r}"
