"""Descriptors and fragments on the H200: descriptor values made from the buffers' real shared addresses, the
epilogue helpers (elements, load_columns/load_rows, map, store through stmatrix, row-major and swizzled), the A
fragment loaded with ldmatrix, and the 8-bit float packing, each compared with ptxdsl.reference.wgmma. The
kernels build, pass the verifier and assemble on any machine; the runs need a GPU."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ptxdsl as px
from ptxdsl import assemble
from ptxdsl.descriptor import MatrixLayout
from ptxdsl.fragment import Accumulator, AFragment
from ptxdsl.ir import Addr
from ptxdsl.reference import wgmma as W
from ptxdsl.types import f32, u32, u64

DESC_LAYOUTS = [MatrixLayout("bf16", 64, 64, "128B"), MatrixLayout("bf16", 256, 128, "64B"),
                MatrixLayout("f16", 64, 64, "none", "MN"), MatrixLayout("e4m3", 128, 128, "32B")]


def descriptors():
    """Thread 0 writes, for each layout, the buffer's shared address and the descriptors of every K step."""
    with px.kernel("descriptors", reqntid=32, arch="sm_90a") as k:
        out = k.param_ptr("out")
        k.shared("first", 16)                       # the buffers do not start at 0 (nor does this one)
        bufs = [k.shared(f"t{i}", lay.nbytes, align=1024, dynamic=True) for i, lay in enumerate(DESC_LAYOUTS)]
        with k.if_(k.setp("eq", k.tid_x(), 0)):
            at = 0
            for buf, lay in zip(bufs, DESC_LAYOUTS):
                k.st(u64, Addr(out, at), k.cvt(u64, k.mov(buf)))
                d = k.matrix_descriptor(buf, lay)
                for j in range(lay.k_steps):
                    k.st(u64, Addr(out, at + 8 + 8 * j), d.advance_k(j).reg)
                at += 8 + 8 * lay.k_steps
    return k


def _copy_out(k, buf, nbytes: int, out, threads: int):
    """Every thread copies its share of `buf` to global `out`, 16 bytes at a time."""
    tid = k.tid_x()
    with k.loop(tid, nbytes // 16, threads) as c:
        off = k.shl(c, 4)
        words = k.ld(u32, k.add(k.mov(buf), off), space="shared", vec=4)
        k.st(u32, k.add(out, k.mul(c, 16, mode="wide")), words)


def _copy_in(k, buf, nbytes: int, src, threads: int):
    tid = k.tid_x()
    with k.loop(tid, nbytes // 16, threads) as c:
        words = k.ld(u32, k.add(src, k.mul(c, 16, mode="wide")), vec=4)
        k.st(u32, k.add(k.mov(buf), k.shl(c, 4)), words, space="shared")


EPILOGUES = [("rowmajor", dict(row_pitch=2 * 64 + 32)), ("sw128", dict(layout=MatrixLayout("bf16", 64, 64, "128B"))),
             ("sw32", dict(layout=MatrixLayout("bf16", 64, 64, "32B")))]


def epilogue(name: str, where: dict, n: int = 64):
    """D (64 x N f32, row-major in global) into the accumulator through elements(); D * rowscale + bias through
    load_rows / load_columns / map; stored as bf16 with stmatrix (row-major or placed by a layout); copied out."""
    nbytes = 64 * where["row_pitch"] if "row_pitch" in where else where["layout"].nbytes
    with px.kernel(f"epilogue_{name}", reqntid=128, arch="sm_90a") as k:
        d, scale, bias, out = (k.param_ptr(p) for p in ("d", "scale", "bias", "out"))
        tile = k.shared("tile", nbytes, align=1024)
        acc = Accumulator(k, n)
        for reg, row, col in acc.elements(k):
            index = k.mad(row.value(k), n, col.value(k))
            k.ld(f32, k.add(d, k.mul(index, 4, mode="wide")), out=reg)
        s, b = acc.load_rows(k, scale), acc.load_columns(k, bias)
        acc.map(k, lambda r, i: k.fma(r, s[i], b[i], out=r))
        acc.store(k, tile, **where)
        k.bar_sync(0)
        _copy_out(k, tile, nbytes, out, 128)
    return k


A_CASES = [("rowmajor", dict(row_pitch=128)), ("sw128", dict(layout=MatrixLayout("bf16", 64, 64, "128B")))]


def a_fragments(name: str, where: dict):
    """The 64 x 64 bf16 image (host-placed) copied into shared memory; AFragment.load of each K step; every
    thread's 4 registers per step written out."""
    with px.kernel(f"afrag_{name}", reqntid=128, arch="sm_90a") as k:
        src, out = k.param_ptr("src"), k.param_ptr("out")
        tile = k.shared("tile", 8192, align=1024)
        _copy_in(k, tile, 8192, src, 128)
        k.bar_sync(0)
        base = k.add(out, k.mul(k.tid_x(), 16, mode="wide"))
        for step in range(4):
            frag = AFragment(k, "bf16").load(k, tile, k_step=step, **where)
            k.st(u32, Addr(base, 128 * 16 * step), tuple(frag.regs))
    return k


def fp8_packs():
    """Each thread packs its accumulator registers (loaded from global) to e4m3 and e5m2 pairs."""
    with px.kernel("fp8_packs", reqntid=128, arch="sm_90a") as k:
        src, out8, out5 = (k.param_ptr(p) for p in ("src", "e4m3", "e5m2"))
        acc = Accumulator(k, 16)
        tid = k.tid_x()
        for i, r in enumerate(acc.regs):
            k.ld(f32, Addr(k.add(src, k.mul(tid, 32, mode="wide")), 4 * i), out=r)
        for dst, dtype in ((out8, "e4m3"), (out5, "e5m2")):
            pairs = acc.pack(k, dtype)
            at = k.add(dst, k.mul(tid, 8, mode="wide"))
            for j, p in enumerate(pairs):
                k.st(px.u16, Addr(at, 2 * j), p)
    return k


def all_kernels():
    return [descriptors(), *(epilogue(n, w) for n, w in EPILOGUES), *(a_fragments(n, w) for n, w in A_CASES),
            fp8_packs()]


def test_the_kernels_build_verify_and_assemble():
    assemble(px.emit(px.module(*all_kernels(), arch="sm_90a")).text)


# ------------------------------------------------------------------------------------------------- the runs

@pytest.mark.gpu
def test_descriptors_from_the_real_shared_addresses():
    from ptxdsl.runtime import DeviceArray

    words = sum(1 + lay.k_steps for lay in DESC_LAYOUTS)
    out = DeviceArray.zeros((words,), np.uint64)
    px.compile(descriptors())["descriptors"](out, grid=1, block=32, sync=True)
    got, at = [int(x) for x in out.to_host()], 0
    for lay in DESC_LAYOUTS:
        address = got[at]
        assert address != 0 and address % 1024 == 0
        assert got[at + 1:at + 1 + lay.k_steps] == [lay.descriptor(address + lay.k_offset(j))
                                                   for j in range(lay.k_steps)], lay
        at += 1 + lay.k_steps


@pytest.mark.gpu
@pytest.mark.parametrize("name, where", EPILOGUES, ids=[e[0] for e in EPILOGUES])
def test_epilogue_stores_what_the_model_places(name, where):
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(11)
    n = 64
    d = rng.integers(-8, 8, size=(64, n)).astype(np.float32)
    scale = rng.choice([0.5, 1.0, 2.0], size=64).astype(np.float32)
    bias = rng.integers(-4, 4, size=n).astype(np.float32)
    nbytes = 64 * where["row_pitch"] if "row_pitch" in where else where["layout"].nbytes
    out = DeviceArray.zeros((nbytes,), np.uint8)
    args = [DeviceArray.to_device(x) for x in (d, scale, bias)] + [out]
    px.compile(epilogue(name, where))[f"epilogue_{name}"](*args, grid=1, block=128, sync=True)
    want_m = (d * scale[:, None] + bias[None, :]).astype(ml_dtypes.bfloat16)
    got = out.to_host()
    if "row_pitch" in where:
        rows = got.reshape(64, where["row_pitch"])[:, :2 * n]
        assert np.array_equal(rows.copy().view(ml_dtypes.bfloat16), want_m)
    else:
        assert np.array_equal(W.read_tile(got, where["layout"], 0), want_m)       # the buffer is 1024-aligned


@pytest.mark.gpu
@pytest.mark.parametrize("name, where", A_CASES, ids=[a[0] for a in A_CASES])
def test_a_fragment_holds_the_a_layout(name, where):
    from ptxdsl.runtime import DeviceArray

    a = np.random.default_rng(5).integers(-100, 100, size=(64, 64)).astype(ml_dtypes.bfloat16)
    image = np.zeros(8192, np.uint8)
    if "row_pitch" in where:
        image[:] = a.view(np.uint8).reshape(-1)
    else:
        W.place_tile(image, a, where["layout"], 0)
    out = DeviceArray.zeros((4, 128, 4), np.uint32)
    px.compile(a_fragments(name, where))[f"afrag_{name}"](DeviceArray.to_device(image), out, grid=1, block=128,
                                                            sync=True)
    regs = out.to_host()
    for step in range(4):
        assert np.array_equal(W.a_regs_to_matrix(regs[step], "bf16"), a[:, 16 * step:16 * step + 16]), step


@pytest.mark.gpu
def test_fp8_pairs_round_and_saturate():
    from ptxdsl.runtime import DeviceArray

    vals = np.random.default_rng(2).standard_normal((128, 8)).astype(np.float32) * 100
    vals[0, :4] = (1e6, -1e6, 448.0, 0.0)
    out8, out5 = DeviceArray.zeros((128, 4), np.uint16), DeviceArray.zeros((128, 4), np.uint16)
    px.compile(fp8_packs())["fp8_packs"](DeviceArray.to_device(vals), out8, out5, grid=1, block=128, sync=True)
    for got, dtype, top in ((out8.to_host(), ml_dtypes.float8_e4m3fn, 448.0), (out5.to_host(), ml_dtypes.float8_e5m2,
                                                                               57344.0)):
        want = np.clip(vals, -top, top).astype(dtype).view(np.uint8).astype(np.uint16)
        assert np.array_equal(got, want[:, 0::2] | want[:, 1::2] << 8)
