"""wgmma end to end with the values: operand tiles placed on the host by reference.wgmma.place_tile, copied into
shared memory by the threads, multiplied through k.matrix_descriptor / advance_k (or an AFragment for A) into an
Accumulator, and every thread's accumulator registers written out; the host reads them with acc_to_matrix and
compares with mma_async. On the H200 this checks the descriptor values, the swizzles, the K steps, the register
layouts and the model's arithmetic against the hardware at once. Every kernel builds, verifies and assembles
here."""
from __future__ import annotations

import numpy as np
import pytest

import ptxdsl as px
from ptxdsl import assemble
from ptxdsl.descriptor import MatrixLayout
from ptxdsl.fragment import Accumulator, AFragment
from ptxdsl.ir import Addr
from ptxdsl.reference import wgmma as W
from ptxdsl.types import u32

# (name, A layout or None for A from registers, B layout, N, accumulator, extra mma_async keywords)
CASES = [
    ("bf16_k128", MatrixLayout("bf16", 64, 64, "128B"), MatrixLayout("bf16", 128, 64, "128B"), 128, "f32", {}),
    ("bf16_wide_k", MatrixLayout("bf16", 64, 128, "64B"), MatrixLayout("bf16", 64, 128, "64B"), 64, "f32", {}),
    ("f16_mn", MatrixLayout("f16", 64, 32, "none", "MN"), MatrixLayout("f16", 64, 32, "128B", "MN"), 64, "f16",
     dict(imm_trans_a=1, imm_trans_b=1)),
    ("tf32_32b", MatrixLayout("tf32", 64, 32, "32B"), MatrixLayout("tf32", 32, 32, "32B"), 32, "f32", {}),
    ("e4m3_e5m2", MatrixLayout("e4m3", 64, 128, "128B"), MatrixLayout("e5m2", 64, 128, "128B"), 64, "f32",
     dict(imm_scale_b=-1)),
    ("s8_none", MatrixLayout("s8", 64, 64, "none"), MatrixLayout("s8", 48, 64, "none"), 48, "s32", {}),
    ("b1", MatrixLayout("b1", 64, 512, "64B"), MatrixLayout("b1", 32, 512, "64B"), 32, "s32", {}),
    ("bf16_rs", None, MatrixLayout("bf16", 64, 64, "128B"), 64, "f32", {}),
]
A_ROW_MAJOR_PITCH = 128                       # the RS case's A: a row-major 64 x 64 bf16 tile


def _round(x: int, to: int) -> int:
    return -(-x // to) * to


def _plan(a_lay, b_lay):
    """(A offset, B offset, image bytes) in the shared buffer: each tile on a 1024-byte boundary."""
    a_bytes = a_lay.nbytes if a_lay is not None else 64 * A_ROW_MAJOR_PITCH
    b_at = _round(a_bytes, 1024)
    return 0, b_at, _round(b_at + b_lay.nbytes, 16)


def gemm(name, a_lay, b_lay, n, dtype, extra):
    """One warpgroup: copy the image in, fence.proxy.async, bar.sync; then every K step's mma_async; write the
    accumulator registers out (thread t's registers at row t)."""
    _, b_at, nbytes = _plan(a_lay, b_lay)
    with px.kernel(f"mma_{name}", reqntid=128, arch="sm_90a") as k:
        src, out = k.param_ptr("src"), k.param_ptr("out")
        smem = k.shared("smem", nbytes, align=1024, dynamic=True)
        tid = k.tid_x()
        with k.loop(tid, nbytes // 16, 128) as c:
            words = k.ld(u32, k.add(src, k.mul(c, 16, mode="wide")), vec=4)
            k.st(u32, k.add(k.mov(smem), k.shl(c, 4)), words, space="shared")
        k.fence_proxy_async("shared::cta")
        k.bar_sync(0)
        acc = Accumulator(k, n, dtype)
        bd = k.matrix_descriptor(smem, b_lay, offset=b_at)
        steps = b_lay.k_steps
        if a_lay is not None:
            ad = k.matrix_descriptor(smem, a_lay)
            k.wgmma_fence()
            for j in range(steps):
                k.wgmma_mma_async(acc, ad.advance_k(j), bd.advance_k(j), scale_d=int(j > 0), **extra)
        else:
            frags = [AFragment(k, "bf16").load(k, smem, A_ROW_MAJOR_PITCH, k_step=j) for j in range(steps)]
            k.wgmma_fence()
            for j in range(steps):
                k.wgmma_mma_async(acc, frags[j], bd.advance_k(j), scale_d=int(j > 0), **extra)
        k.wgmma_commit_group()
        k.wgmma_wait_group(0)
        row = k.add(out, k.mul(tid, 4 * len(acc.regs), mode="wide"))
        for i, r in enumerate(acc.regs):
            k.st(u32 if dtype != "f32" else px.f32, Addr(row, 4 * i), r)
    return k


def test_the_gemm_kernels_build_verify_and_assemble():
    kernels = [gemm(*case) for case in CASES]
    text = px.emit(px.module(*kernels, arch="sm_90a")).text
    assert text.count("wgmma.mma_async") == sum(c[2].k_steps for c in CASES)
    assemble(text)


def _operands(name, a_lay, b_lay, n, rng):
    atype = a_lay.dtype if a_lay is not None else "bf16"
    k = b_lay.k

    def draw(dtype, shape):
        if dtype == "b1":
            return rng.integers(0, 2, size=shape).astype(np.uint8)
        if dtype in ("s8", "u8"):
            return rng.integers(-128, 128, size=shape).astype(np.int8)
        return rng.integers(-4, 5, size=shape).astype(np.float32).astype(W.ELEMENT_DTYPES[dtype])

    return draw(atype, (64, k)), draw(b_lay.dtype, (n, k))


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mma_async_through_the_values_on_the_gpu(case):
    from ptxdsl.runtime import DeviceArray

    name, a_lay, b_lay, n, dtype, extra = case
    a, b = _operands(name, a_lay, b_lay, n, np.random.default_rng(len(name)))
    _, b_at, nbytes = _plan(a_lay, b_lay)
    image = np.zeros(nbytes, np.uint8)
    if a_lay is not None:
        W.place_tile(image, a, a_lay, 0)
    else:
        image[:64 * A_ROW_MAJOR_PITCH] = a.view(np.uint8).reshape(-1)
    W.place_tile(image, b, b_lay, b_at)
    count = n // 4 if dtype == "f16" else n // 2
    out = DeviceArray.zeros((128, count), np.float32 if dtype == "f32" else np.uint32)
    px.compile(gemm(*case))[f"mma_{name}"](DeviceArray.to_device(image), out, grid=1, block=128, sync=True)
    regs = out.to_host()
    got = W.acc_to_matrix(regs if dtype != "s32" else regs.view(np.int32), n, dtype)
    atype = a_lay.dtype if a_lay is not None else "bf16"
    want = W.mma_async(None, a, b, dtype=dtype, atype=atype, btype=b_lay.dtype,
                       scale_a=extra.get("imm_scale_a", 1), scale_b=extra.get("imm_scale_b", 1))
    assert np.array_equal(got, want), name           # small integers: exact in every type


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_model_runs_each_kernel(case):
    """What the GPU test expects, computed the kernel's way on the model: the image at shared address 0x400, the
    descriptors k.matrix_descriptor/advance_k make there, ldmatrix through the lanes' addresses for RS, one
    wgmma per K step into the registers; acc_to_matrix of the result is mma_async of the matrices."""
    from ptxdsl.fragment import HostLane, row_addresses

    name, a_lay, b_lay, n, dtype, extra = case
    a, b = _operands(name, a_lay, b_lay, n, np.random.default_rng(len(name)))
    _, b_at, nbytes = _plan(a_lay, b_lay)
    base = 0x400
    smem = np.zeros(base + nbytes, np.uint8)
    if a_lay is not None:
        W.place_tile(smem, a, a_lay, base)
    else:
        smem[base:base + 64 * A_ROW_MAJOR_PITCH] = a.view(np.uint8).reshape(-1)
    W.place_tile(smem, b, b_lay, base + b_at)
    atype = a_lay.dtype if a_lay is not None else "bf16"
    kw = dict(n=n, dtype=dtype, atype=atype, btype=b_lay.dtype, trans_a=bool(extra.get("imm_trans_a")),
              trans_b=bool(extra.get("imm_trans_b")), scale_a=extra.get("imm_scale_a", 1),
              scale_b=extra.get("imm_scale_b", 1))
    regs = None
    for j in range(b_lay.k_steps):
        if a_lay is not None:
            a_op = a_lay.descriptor(base + a_lay.k_offset(j))
        else:
            a_op = np.zeros((128, 4), np.uint32)
            for w in range(4):
                lanes = [row_addresses(HostLane(32 * w + l, base), None, [j], row_pitch=A_ROW_MAJOR_PITCH)[0]
                         for l in range(32)]
                a_op[32 * w:32 * w + 32] = W.ldmatrix_x4(smem, lanes)
        regs = W.wgmma(smem, regs, a_op, b_lay.descriptor(base + b_at + b_lay.k_offset(j)), scale_d=int(j > 0),
                       **kw)
    want = W.mma_async(None, a, b, dtype=dtype, atype=atype, btype=b_lay.dtype, scale_a=kw["scale_a"],
                       scale_b=kw["scale_b"])
    assert np.array_equal(W.acc_to_matrix(regs, n, dtype), want)
    assert np.any(want != 0)
