"""Random legal wgmma.mma_async cases, the kernel that runs one, and the CPU model's prediction of it.

A case is one instruction form (types, N, A from shared memory or registers, each operand's layout and swizzle,
the scale and transpose immediates) over 1 to 4 K steps, with scale-d read from a launch parameter. The kernel
copies a host-made shared-memory image into a 1024-byte-aligned buffer (fence.proxy.async, bar.sync), loads the
accumulator (and A registers) from global memory, issues one mma_async per K step (descriptors advanced with
advance_k), waits and stores every accumulator register. The host places A and B in the image with
ptxdsl.reference.place_tile and predicts D with reference.mma_async; tests/test_wgmma_gpu.py compares them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl.reference import wgmma as R
from ptxdsl.descriptor import MatrixLayout
from ptxdsl.errors import LayoutError
from ptxdsl.fragment import Accumulator, acc_registers

WARPGROUP = 128
A_OFF = 0
B_OFF = 8192                    # A's tile is at most 64 rows x 128 bytes
SMEM = B_OFF + 32768            # B's at most 256 rows x 128 bytes

# (atype, btype, dtype) of every family wgmma takes
FAMILIES = [("bf16", "bf16", "f32"), ("f16", "f16", "f32"), ("f16", "f16", "f16"), ("tf32", "tf32", "f32"),
            *[(a, b, d) for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2") for d in ("f32", "f16")],
            *[(a, b, "s32") for a in ("s8", "u8") for b in ("s8", "u8")], ("b1", "b1", "s32")]
N_FLOAT = tuple(range(8, 257, 8))
N_INT = (8, 16, 24) + tuple(range(32, 257, 16))
K_STEP = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}
SWIZZLES = ("none", "32B", "64B", "128B")
FP8 = ("e4m3", "e5m2")


@dataclass(frozen=True)
class WgmmaCase:
    atype: str
    btype: str
    dtype: str
    n: int
    ksteps: int
    a_regs: bool                # A from registers (RS) rather than a descriptor (SS)
    a_swizzle: str
    a_major: str
    b_swizzle: str
    b_major: str
    scale_a: int = 1
    scale_b: int = 1
    satfinite: bool = False
    keep: bool = True           # scale-d: accumulate onto D (a launch parameter, through a predicate)
    seed: int = 0

    @property
    def k(self) -> int:
        return self.ksteps * K_STEP[self.atype]

    @functools.cached_property
    def a_layout(self) -> MatrixLayout | None:
        return None if self.a_regs else MatrixLayout(self.atype, 64, self.k, self.a_swizzle, self.a_major)

    @functools.cached_property
    def b_layout(self) -> MatrixLayout:
        return MatrixLayout(self.btype, self.n, self.k, self.b_swizzle, self.b_major)

    def form(self) -> tuple:
        """What the kernel depends on (the data and `keep` do not)."""
        return (self.atype, self.btype, self.dtype, self.n, self.ksteps, self.a_regs, self.a_swizzle, self.a_major,
                self.b_swizzle, self.b_major, self.scale_a, self.scale_b, self.satfinite)


def legal(case: WgmmaCase) -> bool:
    """Whether the layouts exist and fit the image (MatrixLayout refuses what the hardware cannot read)."""
    try:
        a, b = case.a_layout, case.b_layout
    except LayoutError:
        return False
    return (a is None or a.nbytes <= B_OFF - A_OFF) and b.nbytes <= SMEM - B_OFF


@st.composite
def cases(draw) -> WgmmaCase:
    atype, btype, dtype = draw(st.sampled_from(FAMILIES))
    ints = dtype == "s32"
    n = draw(st.sampled_from(N_INT if ints else N_FLOAT))
    halves = atype in ("f16", "bf16")
    majors = st.sampled_from(("K", "MN")) if halves else st.just("K")
    case = WgmmaCase(
        atype, btype, dtype, n, ksteps=draw(st.sampled_from((1, 2, 4))), a_regs=draw(st.booleans()),
        a_swizzle=draw(st.sampled_from(SWIZZLES)), a_major=draw(majors), b_swizzle=draw(st.sampled_from(SWIZZLES)),
        b_major=draw(majors), scale_a=1 if ints else draw(st.sampled_from((1, -1))),
        scale_b=1 if ints else draw(st.sampled_from((1, -1))), satfinite=ints and atype != "b1" and draw(st.booleans()),
        keep=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)))
    if case.a_regs:
        case = WgmmaCase(**{**case.__dict__, "a_swizzle": "none", "a_major": "K"})
    from hypothesis import assume

    assume(legal(case))
    return case


# ------------------------------------------------------------------------------------------------ the kernel

def build(case: WgmmaCase):
    """The kernel of `case`'s form: params img (the shared image), din (accumulator registers, thread-major),
    ain (A registers per K step), dout, keep (scale-d)."""
    nregs = acc_registers(case.n, case.dtype)
    with px.kernel("wgmma_case", reqntid=WARPGROUP, arch="sm_90a") as k:
        img, din, ain, dout = (k.param_ptr(name) for name in ("img", "din", "ain", "dout"))
        keep = k.param("keep", px.u32)
        tiles = k.shared("tiles", SMEM, align=1024)
        tid = k.tid_x()
        base = k.mov(tiles)
        with k.loop(0, SMEM // 16 // WARPGROUP) as i:           # the image, 16 bytes a thread at a time
            chunk = k.shl(k.mad(i, WARPGROUP, tid), 4)
            v = k.ld(px.b32, k.add(img, k.cvt(px.u64, chunk)), space="global", vec=4)
            k.st(px.b32, k.add(base, chunk), v, space="shared::cta")
        k.fence_proxy_async("shared::cta")                      # generic stores, read by the async proxy
        k.bar_sync(0)

        acc = Accumulator(k, case.n, case.dtype)
        mine = k.add(din, k.cvt(px.u64, k.mul(tid, 4 * nregs)))
        for i, r in enumerate(acc.regs):
            k.ld(r.type, px.Addr(mine, 4 * i), space="global", out=r)
        if case.a_regs:
            a_base = k.add(ain, k.cvt(px.u64, k.mul(tid, 16)))
            a_steps = [tuple(k.ld(px.b32, px.Addr(a_base, 16 * WARPGROUP * j + 4 * q), space="global")
                             for q in range(4)) for j in range(case.ksteps)]
        else:
            a_desc = k.matrix_descriptor(tiles, case.a_layout, A_OFF)
        b_desc = k.matrix_descriptor(tiles, case.b_layout, B_OFF)
        scale_d = k.setp("ne", keep, 0)

        halves = case.atype in ("f16", "bf16")
        k.wgmma_fence()
        for j in range(case.ksteps):
            extra = {}
            if case.dtype != "s32":
                extra.update(imm_scale_a=case.scale_a, imm_scale_b=case.scale_b)
            if halves:
                extra.update(imm_trans_b=int(case.b_major == "MN"))
                if not case.a_regs:
                    extra.update(imm_trans_a=int(case.a_major == "MN"))
            a = a_steps[j] if case.a_regs else a_desc.advance_k(j)
            k.wgmma_mma_async(acc, a, b_desc.advance_k(j), scale_d=scale_d if j == 0 else 1, n=case.n,
                              dtype=case.dtype, atype=case.atype, btype=case.btype, satfinite=case.satfinite,
                              **extra)
        k.wgmma_commit_group()
        k.wgmma_wait_group(0)

        out = k.add(dout, k.cvt(px.u64, k.mul(tid, 4 * nregs)))
        for i, r in enumerate(acc.regs):
            k.st(r.type, px.Addr(out, 4 * i), r, space="global")
    return k


# ------------------------------------------------------------------------------------------------ the data

def _matrix(rng, dtype: str, shape) -> np.ndarray:
    if dtype in ("bf16", "f16", "tf32"):
        return rng.standard_normal(shape).astype(R.ELEMENT_DTYPES[dtype])
    if dtype in FP8:                           # small integers: exact in fp8 and in any accumulation order
        return rng.integers(-2, 3, shape).astype(R.ELEMENT_DTYPES[dtype])
    if dtype == "s8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dtype == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.integers(0, 2, shape).astype(np.uint8)        # b1


def _initial_d(rng, case: WgmmaCase) -> np.ndarray:
    shape = (64, case.n)
    if case.dtype == "s32":
        hi = 2**31 - 1 if case.satfinite else 2**20       # near the int32 limits when saturating
        return rng.integers(-hi, hi, shape).astype(np.int32)
    if case.atype in FP8:                      # integers, so that every sum is exact in f16 and f32
        return rng.integers(-8, 9, shape).astype(np.float16 if case.dtype == "f16" else np.float32)
    return rng.standard_normal(shape).astype(np.float16 if case.dtype == "f16" else np.float32)


def inputs(case: WgmmaCase) -> dict:
    """The matrices and launch buffers of a case (deterministic in case.seed)."""
    rng = np.random.default_rng(case.seed)
    a = _matrix(rng, case.atype, (64, case.k))
    b = _matrix(rng, case.btype, (case.n, case.k))
    d = _initial_d(rng, case)
    img = np.zeros(SMEM, dtype=np.uint8)
    if not case.a_regs:
        R.place_tile(img, a, case.a_layout, A_OFF)
    R.place_tile(img, b, case.b_layout, B_OFF)
    kk = K_STEP[case.atype]
    ain = (np.stack([R.matrix_to_a_regs(a[:, j * kk:(j + 1) * kk], case.atype) for j in range(case.ksteps)])
           if case.a_regs else np.zeros((1, WARPGROUP, 4), np.uint32))
    din = R.matrix_to_acc(d, case.dtype)
    return {"a": a, "b": b, "d": d, "img": img, "ain": np.ascontiguousarray(ain, dtype=np.uint32),
            "din": np.ascontiguousarray(din).view(np.uint32)}


def predict(case: WgmmaCase, data: dict) -> np.ndarray:
    """D after the case's K steps, from the model (one K step at a time, as the instructions run)."""
    d, kk = data["d"], K_STEP[case.atype]
    for j in range(case.ksteps):
        d = R.mma_async(d, data["a"][:, j * kk:(j + 1) * kk], data["b"][:, j * kk:(j + 1) * kk], dtype=case.dtype,
                        atype=case.atype, btype=case.btype, scale_d=case.keep or j > 0, scale_a=case.scale_a,
                        scale_b=case.scale_b, satfinite=case.satfinite)
    return d


def bound(case: WgmmaCase, data: dict) -> np.ndarray:
    """Per element: 0 for exact cases (integers; fp8 cases hold small integers throughout), else the model's
    error bound (ptxdsl.reference.wgmma's docstring) over the whole K."""
    if case.dtype == "s32" or case.atype in FP8:
        return np.zeros((64, case.n))
    return R.error_bound(data["a"], data["b"], data["d"] if case.keep else None, dtype=case.dtype, atype=case.atype,
                         btype=case.btype, scale_d=case.keep)


def compare(case: WgmmaCase, data: dict, dout_words: np.ndarray) -> tuple[bool, str]:
    got = R.acc_to_matrix(dout_words.reshape(WARPGROUP, -1).view(
        np.float32 if case.dtype == "f32" else np.int32 if case.dtype == "s32" else np.uint32), case.n, case.dtype)
    want = predict(case, data)
    if case.dtype == "s32":
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~(np.abs(g - w) <= bound(case, data) + 1e-30) | np.isnan(g)
    if not bad.any():
        return True, ""
    r, c = np.argwhere(bad)[0]
    return False, (f"{int(bad.sum())} of {bad.size} elements differ; first D[{r}][{c}]: got {got[r, c]}, "
                   f"model {want[r, c]}")
