"""Differential testing of TMA kernels against the CPU model (ptxdsl.reference).

A `Case` is one TMA operation: a tiled tensor map (dtype, dims, padded byte strides, box, element
strides, swizzle, OOB fill), the box coordinates and the operation (load, multicast load in a
cluster of 2, store, or reduce with its op). `cases()` draws them with Hypothesis; `run_case()`
runs one on the GPU and `expect()` computes what the model says; `check_case()` compares the two
bit-exactly and raises a `Mismatch` whose message ends with `snippet(case)`, a runnable reproducer:

    import sys; sys.path.insert(0, "tests")
    from differential import Case, check_case
    check_case(Case(op="load", dtype="f32", ...))

Kernels take the tensor map, the coordinates and every size as arguments, so one JIT-loaded module
per `kernel_key()` (operation, rank, reduce op) serves every case of that shape. A load kernel
fills its whole dynamic shared window (1024-byte aligned) with a fill byte, TMA-loads the box and
copies the window out with ld.shared/st.global; a store or reduce kernel copies a global image into
the window with ordinary stores, runs fence.proxy.async.shared::cta and issues the TMA store or
reduction. Waits are bounded by %globaltimer, so a lost transaction reports a timeout instead of
hanging the device.

Two rules keep every drawn case away from an illegal-instruction error, which would end the CUDA
context of the whole run: the innermost coordinate is a multiple of 16 bytes (coords[0] * elem_bytes
% 16 == 0; on the H200 a box whose innermost start offset was not died, design.md), and a store or
reduction starts at non-negative coordinates (CUDA Programming Guide, "the top left corner cannot
have any negative indices"; a negative one died on the H200). Loads may start at negative
coordinates and every box may reach past the tensor's far edges.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl import reference as ref
from ptxdsl import sreg
from ptxdsl.tensormap import DTYPES, FLOAT_DTYPES, SWIZZLE_SPAN, TensorMapSpec
from ptxdsl.types import scalar_type, to_numpy

OPS = ("load", "multicast", "store", "reduce")
RANKS = (1, 2, 3, 4, 5)
SWIZZLES = ("none", "32B", "64B", "128B")
CASE_DTYPES = ("u8", "u16", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")
REDUCE_OPS = tuple(ref.REDUCE_TYPES)
REDUCE_DTYPES = tuple(d for d in CASE_DTYPES if any(d in types for types in ref.REDUCE_TYPES.values()))
FILLS = (0xA5, 0x00, 0xFF, 0x5A)
THREADS = 128
GUARD = 256                   # bytes of global memory checked on each side of the tensor
SMEM_ALIGN = 1024             # the 128B swizzle repeat
WAIT_LIMIT_NS = 200_000_000   # a TMA wait gives up after 0.2 s and reports a timeout
MAX_TENSOR_BYTES = 1 << 21
MAX_BOX_SMEM = 64 * 1024
MAX_INNER_BYTES = 512         # box[0] * elem_bytes without a swizzle
STATUS_DONE, STATUS_TIMEOUT = 1, 2
INFO_WORDS = 4                # per CTA: status, shared address of the box, 0, 0


@dataclass(frozen=True)
class Case:
    """One TMA operation on one tiled tensor map. Lists are innermost first, as in TensorMapSpec."""

    op: str                               # load | multicast | store | reduce
    dtype: str
    dims: tuple
    strides: tuple                        # bytes, dimensions 1..rank-1
    box: tuple
    coords: tuple
    element_strides: tuple = ()
    swizzle: str = "none"
    oob_fill: str = "zero"
    reduce_op: str | None = None
    fill: int = 0xA5                      # byte the load kernel writes over shared memory first
    cta_mask: int = 0                     # multicast: which of the 2 CTAs receive the box
    issuer: int = 0                       # multicast: the cluster rank that issues the load
    values: str = "bits"                  # bits | small | finite: how tensor and image data are drawn
    seed: int = 0

    @property
    def rank(self) -> int:
        return len(self.dims)

    def spec(self, address: int = 0) -> TensorMapSpec:
        return TensorMapSpec(dtype=self.dtype, dims=tuple(self.dims), strides=tuple(self.strides),
                             box=tuple(self.box), element_strides=tuple(self.element_strides),
                             swizzle=self.swizzle, oob_fill=self.oob_fill, global_address=address)

    @property
    def ctas(self) -> int:
        return 2 if self.op == "multicast" else 1


def snippet(case: Case) -> str:
    """A runnable reproducer (from the repository root, on a GPU machine)."""
    args = ", ".join(f"{f.name}={getattr(case, f.name)!r}" for f in fields(case)
                     if getattr(case, f.name) != f.default or f.name in ("op", "dtype"))
    return ('import sys; sys.path.insert(0, "tests")\n'
            "from differential import Case, check_case\n"
            f"check_case(Case({args}))")


# --- drawing cases -----------------------------------------------------------------------------

def _footprint(box: int, stride: int) -> int:
    """Elements a box dimension spans in the tensor: (ceil(box / stride) - 1) * stride + 1."""
    return (-(-box // stride) - 1) * stride + 1


def _coordinate(draw, reach: int, dim: int, negative: bool) -> int:
    """A box start along one dimension: mostly inside the tensor, else crossing an edge, else anywhere
    from fully below (when `negative`) to fully above it (reach = the elements the box spans there)."""
    lowest = -reach - 1 if negative else 0
    kind = draw(st.integers(0, 19))
    if kind < 13 and dim >= reach:
        return draw(st.integers(0, dim - reach))
    if kind < 19:
        return draw(st.integers(max(lowest, 1 - reach), dim - 1))
    return draw(st.integers(lowest, dim + 1))


@st.composite
def cases(draw, ops=OPS) -> Case:
    """A random Case that the tensor-map rules accept and whose box crosses the tensor's edges at will."""
    op = draw(st.sampled_from(ops))
    reduce_op = None
    if op == "reduce" and draw(st.booleans()):
        reduce_op = draw(st.sampled_from(REDUCE_OPS))
        dtype = draw(st.sampled_from(sorted(ref.REDUCE_TYPES[reduce_op])))
    elif op == "reduce":
        dtype = draw(st.sampled_from(REDUCE_DTYPES))
        reduce_op = draw(st.sampled_from([o for o in REDUCE_OPS if dtype in ref.REDUCE_TYPES[o]]))
    else:
        dtype = draw(st.sampled_from(CASE_DTYPES))
    esize = DTYPES[dtype][1]
    rank = draw(st.integers(1, 5))
    swizzle = draw(st.sampled_from(SWIZZLES))
    inner_max = min(SWIZZLE_SPAN[swizzle] or MAX_INNER_BYTES, 256 * esize)
    box = [draw(st.integers(1, inner_max // 16)) * 16 // esize]
    estrides = [draw(st.integers(2, 8)) if draw(st.integers(0, 6)) == 6 else 1 for _ in range(rank)]
    row_bytes = max(box[0] * esize, SWIZZLE_SPAN[swizzle])
    rows_left = min(256, MAX_BOX_SMEM // row_bytes)
    for i in range(1, rank):
        b = draw(st.integers(1, min(256, rows_left * estrides[i])))
        rows_left //= -(-b // estrides[i])
        box.append(b)
    dims, strides = [], []
    pitch = esize
    for i in range(rank):
        reach = box[0] if i == 0 else _footprint(box[i], estrides[i])
        top = min(2 * reach + 4, max(1, MAX_TENSOR_BYTES // pitch))
        low = reach if reach <= top and draw(st.integers(0, 9)) < 8 else 1
        dims.append(draw(st.integers(low, top)))
        if i + 1 < rank:
            pitch = -(-pitch * dims[i] // 16) * 16 + 16 * draw(st.integers(0, 4))
            strides.append(pitch)
    q = 16 // esize
    negative = op in ("load", "multicast")
    coords = [q * _coordinate(draw, box[0] // q, -(-dims[0] // q), negative)]
    coords += [_coordinate(draw, _footprint(box[i], estrides[i]), dims[i], negative) for i in range(1, rank)]
    floats = dtype in FLOAT_DTYPES
    return Case(op=op, dtype=dtype, dims=tuple(dims), strides=tuple(strides), box=tuple(box), coords=tuple(coords),
                element_strides=tuple(estrides), swizzle=swizzle,
                oob_fill=draw(st.sampled_from(("zero", "nan"))) if floats else "zero",
                reduce_op=reduce_op,
                fill=draw(st.sampled_from(FILLS)) if op in ("load", "multicast") else Case.fill,
                cta_mask=draw(st.sampled_from((3, 1, 2))) if op == "multicast" else 0,
                issuer=draw(st.integers(0, 1)) if op == "multicast" else 0,
                values=draw(st.sampled_from(("bits", "small", "finite") if floats else ("bits", "small")))
                if op == "reduce" else "bits",
                seed=draw(st.integers(0, 2**32 - 1)))


def events(case: Case) -> list[str]:
    """Labels for Hypothesis statistics (hypothesis.event)."""
    spec = case.spec()
    where = box_position(case)
    out = [f"op={case.op}{'.' + case.reduce_op if case.reduce_op else ''}", f"rank={case.rank}",
           f"dtype={case.dtype}", f"swizzle={case.swizzle}", f"box {where}"]
    if any(s > 1 for s in spec.estrides):
        out.append("element strides > 1")
    if case.oob_fill == "nan":
        out.append("oob_fill=nan")
    if case.op == "reduce":
        out.append(f"values={case.values}")
    return out


def box_position(case: Case) -> str:
    """'inside', 'crossing an edge' or 'outside': where the box lies against the tensor."""
    inside = ref.element_offsets(case.spec(), case.coords)[1]
    return "inside" if inside.all() else "crossing an edge" if inside.any() else "outside"


# --- data --------------------------------------------------------------------------------------

def extent(case: Case) -> int:
    """Bytes from the tensor's first element to the end of its last one, rounded up to 16."""
    pitches = (DTYPES[case.dtype][1], *case.strides)
    last = DTYPES[case.dtype][1] + sum(p * (d - 1) for p, d in zip(pitches, case.dims))
    return -(-last // 16) * 16


def smem_window(case: Case) -> int:
    """Dynamic shared bytes a case's kernel gets: the model's box rounded up to 1024, plus 1024."""
    nbytes = ref.smem_layout(case.spec())[0]
    return -(-nbytes // SMEM_ALIGN) * SMEM_ALIGN + SMEM_ALIGN


def _values(rng, dtype: str, n: int, how: str) -> np.ndarray:
    """n elements of dtype as bytes: raw random bits, small integers (signed zeros included) or
    finite floats of mixed magnitude."""
    np_dtype = to_numpy(scalar_type(dtype))
    esize = DTYPES[dtype][1]
    if how == "bits":
        return rng.integers(0, 256, n * esize, dtype=np.uint8)
    if how == "small":
        lo = -4 if dtype in FLOAT_DTYPES or dtype.startswith("s") else 0
        vals = rng.integers(lo, lo + 9, n).astype(np.float64 if dtype in FLOAT_DTYPES else np.int64)
        if dtype in FLOAT_DTYPES:
            vals = np.where((vals == 0) & (rng.integers(0, 2, n) == 1), -0.0, vals)
        return vals.astype(np_dtype).view(np.uint8)
    if how == "finite":
        vals = rng.standard_normal(n) * np.exp2(rng.integers(-8, 9, n))
        return vals.astype(np.float32).astype(np_dtype).view(np.uint8)
    raise ValueError(f"values={how!r}: expected bits, small or finite")


def case_data(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(global buffer, shared image): the tensor's bytes with GUARD bytes on each side, and the
    bytes a store/reduce kernel puts in shared memory (the whole window); both from case.seed."""
    rng = np.random.default_rng(case.seed)
    esize = DTYPES[case.dtype][1]
    body = GUARD + extent(case) + GUARD
    gmem = _values(rng, case.dtype, body // esize, case.values)
    image = _values(rng, case.dtype, smem_window(case) // esize, case.values)
    return gmem, image


# --- the model ---------------------------------------------------------------------------------

def expect(case: Case, gmem: np.ndarray, image: np.ndarray) -> dict[str, np.ndarray]:
    """What the model says the kernel leaves behind: {"smem0"/"smem1": window bytes} for loads,
    {"gmem": the whole global buffer} for stores and reductions."""
    spec = case.spec()
    tensor = gmem[GUARD:len(gmem) - GUARD]
    window = smem_window(case)
    if case.op in ("load", "multicast"):
        def padded(box_bytes):
            out = np.full(window, case.fill, np.uint8)
            out[:len(box_bytes)] = np.frombuffer(box_bytes, np.uint8)
            return out
        if case.op == "load":
            return {"smem0": padded(ref.load_box(spec, tensor, case.coords, fill=case.fill).tobytes())}
        got = ref.multicast(spec, tensor, case.coords, case.cta_mask, 2, fill=case.fill)
        return {f"smem{r}": padded(got.get(r, b"")) for r in range(2)}
    if case.op == "store":
        new = ref.store_box(spec, tensor, case.coords, image)
    else:
        new = ref.reduce_box(spec, tensor, case.coords, image, case.reduce_op)
    return {"gmem": np.concatenate([gmem[:GUARD], new, gmem[len(gmem) - GUARD:]])}


# --- kernels -----------------------------------------------------------------------------------

def kernel_key(case: Case) -> tuple:
    """The shape of a case's kernel: what the PTX depends on (everything else is an argument)."""
    return (case.op, case.rank, case.reduce_op) if case.op == "reduce" else (case.op, case.rank)


def kernel_keys() -> list[tuple]:
    """Every kernel shape the suite can use."""
    keys = [(op, r) for op in ("load", "multicast", "store") for r in RANKS]
    return keys + [("reduce", r, op) for op in REDUCE_OPS for r in RANKS]


def kernel_name(key: tuple) -> str:
    """load_r2, multicast_r5, store_r1, reduce_add_r3, ..."""
    return "_".join(str(k) for k in (key[0], *key[2:], f"r{key[1]}"))


def _coords(k, rank):
    """The box coordinates as .s32 parameters c0..c{rank-1}, innermost first."""
    return [k.param(f"c{i}", px.s32) for i in range(rank)]


def _wait(k, bar):
    """Spin on mbarrier.try_wait.parity 0 until the phase completes or WAIT_LIMIT_NS pass; the
    predicate it returns says whether the phase completed."""
    t0 = k.mov(sreg.globaltimer)
    retry = k.label("retry")
    done = k.mbarrier_try_wait(bar, parity=0, sem="acquire", scope="cta")
    late = k.setp("ge", k.sub(k.mov(sreg.globaltimer), t0), WAIT_LIMIT_NS)
    with k.guard(k.not_(k.or_(done, late))):
        k.bra(retry)
    return done


def _copy_chunks(k, tid, nbytes, body):
    """for (i = tid; i < nbytes / 16; i += THREADS) body(byte offset of chunk i)."""
    with k.loop(tid, k.shr(nbytes, 4), THREADS) as i:
        body(k.shl(i, 4))


def _build_load(key: tuple):
    """load_rN / multicast_rN(src tensormap, out, info, nbytes, fill, tx, c0.., [mask, issuer]): fill the
    window with `fill`, cp.async.bulk.tensor the box (multicast::cluster to the CTAs of `mask`, issued by
    cluster rank `issuer`), wait with a bound, copy the window to out + rank * nbytes."""
    op, rank = key
    multicast = op == "multicast"
    with px.kernel(kernel_name(key), reqntid=THREADS) as k:
        src = k.param_tensormap("src")
        out = k.param_ptr("out")
        info = k.param_ptr("info")
        nbytes = k.param("nbytes", px.u32)
        fill = k.param("fill", px.u32)
        tx = k.param("tx", px.u32)
        coords = _coords(k, rank)
        if multicast:
            mask = k.param("mask", px.u16)
            issuer = k.param("issuer", px.u32)
        box = k.shared("box", SMEM_ALIGN, align=SMEM_ALIGN, dynamic=True)
        bar = k.mbarrier("bar")
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        cta = k.mov(sreg.cluster_ctarank) if multicast else k.mov(0, px.u32)
        with k.if_(is_t0):
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
        base = k.mov(box)
        _copy_chunks(k, tid, nbytes, lambda off: k.st(px.b32, k.add(base, off), (fill,) * 4, space="shared::cta"))
        k.fence_proxy_async("shared::cta")
        k.bar_sync(0)
        status = k.mov(0, px.u32)
        if multicast:
            receives = k.setp("ne", k.and_(k.shr(k.cvt(px.u32, mask), cta), 1), 0)
            with k.if_(k.and_(is_t0, receives)):
                k.mbarrier_arrive_expect_tx(bar, tx, sem="release", scope="cta")
            k.barrier_cluster_arrive(sem="release")
            k.barrier_cluster_wait(sem="acquire")
            with k.if_(k.and_(is_t0, k.setp("eq", cta, issuer))):
                k.cp_async_bulk_tensor(box, src, coords, mbar=bar, multicast=mask)
            with k.if_(receives):
                k.selp(STATUS_DONE, STATUS_TIMEOUT, _wait(k, bar), type=px.u32, out=status)
        else:
            with k.if_(is_t0):
                k.mbarrier_arrive_expect_tx(bar, tx, sem="release", scope="cta")
                k.cp_async_bulk_tensor(box, src, coords, mbar=bar)
            k.selp(STATUS_DONE, STATUS_TIMEOUT, _wait(k, bar), type=px.u32, out=status)
        out_cta = k.add(out, k.mul(cta, nbytes, mode="wide"))
        with k.allow("tma-load-race"):      # _wait's bounded spin is a loop the verifier does not follow
            _copy_chunks(k, tid, nbytes, lambda off: k.st(
                px.b32, k.add(out_cta, k.cvt(px.u64, off)), k.ld(px.b32, k.add(base, off), space="shared::cta", vec=4)))
        _write_info(k, info, cta, is_t0, status, base)
        if multicast:
            k.barrier_cluster_arrive(sem="release")
            k.barrier_cluster_wait(sem="acquire")
    return k


def _build_store(key: tuple):
    """store_rN / reduce_OP_rN(dst tensormap, src, info, nbytes, c0..): copy src into the window, then
    cp.async.bulk.tensor (or cp.reduce.async.bulk.tensor OP) it to the box and wait for the bulk group."""
    op, rank = key[:2]
    with px.kernel(kernel_name(key), reqntid=THREADS) as k:
        dst = k.param_tensormap("dst")
        src = k.param_ptr("src")
        info = k.param_ptr("info")
        nbytes = k.param("nbytes", px.u32)
        coords = _coords(k, rank)
        box = k.shared("box", SMEM_ALIGN, align=SMEM_ALIGN, dynamic=True)
        tid = k.mov(sreg.tid_x)
        is_t0 = k.setp("eq", tid, 0)
        base = k.mov(box)
        _copy_chunks(k, tid, nbytes, lambda off: k.st(
            px.b32, k.add(base, off), k.ld(px.b32, k.add(src, k.cvt(px.u64, off)), vec=4), space="shared::cta"))
        k.fence_proxy_async("shared::cta")
        k.bar_sync(0)
        with k.if_(is_t0):
            if op == "store":
                k.cp_async_bulk_tensor(dst, box, coords)
            else:
                k.cp_reduce_async_bulk_tensor(key[2], dst, box, coords)
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group(0)
        _write_info(k, info, k.mov(0, px.u32), is_t0, k.mov(STATUS_DONE, px.u32), base)
    return k


def _write_info(k, info, cta, is_t0, status, base):
    """Thread 0 writes its CTA's status and the box's shared address to info + 16 * cta."""
    with k.if_(is_t0):
        slot = k.add(info, k.mul(cta, 4 * INFO_WORDS, mode="wide"))
        k.st(px.u32, slot, status)
        k.st(px.u32, k.add(slot, 4), base)


def build_kernel(key: tuple):
    """The KernelBuilder (finished) for one kernel shape."""
    return _build_load(key) if key[0] in ("load", "multicast") else _build_store(key)


@lru_cache(maxsize=None)
def launcher(key: tuple):
    """A JIT-loaded launcher for one kernel shape, loaded once per process."""
    return px.compile(build_kernel(key))[kernel_name(key)]


# --- running and comparing ---------------------------------------------------------------------

@dataclass
class Outcome:
    """One case run on the GPU: its data, the model's answer and what the device left behind."""

    case: Case
    gmem: np.ndarray
    image: np.ndarray
    expected: dict
    observed: dict
    status: tuple                         # per CTA: 0 (did not wait), STATUS_DONE or STATUS_TIMEOUT
    smem_base: tuple                      # per CTA: shared address of the box


class Mismatch(AssertionError):
    """The GPU and the model disagree on a case; subclasses name the kind (for Hypothesis, one bug each)."""

    category = "mismatch"


_MISMATCH_KINDS: dict[str, type] = {}


def mismatch_kind(category: str) -> type:
    """The Mismatch subclass of one category ('load-smem', 'reduce-gmem', 'multicast-timeout', ...)."""
    if category not in _MISMATCH_KINDS:
        name = "Mismatch_" + "".join(c if c.isalnum() else "_" for c in category)
        _MISMATCH_KINDS[category] = type(name, (Mismatch,), {"category": category})
    return _MISMATCH_KINDS[category]


class ContextLost(BaseException):
    """A CUDA error during a case: the context, and every later case of this process, are gone. Not an
    Exception, so Hypothesis stops at once instead of shrinking on a dead device."""


LOST: list = []                           # [(case, message, buffers)] once a CUDA error ended the context


def run_case(case: Case) -> Outcome:
    """Run a case on the current GPU and collect its shared-memory windows or global buffer."""
    from ptxdsl.errors import CudaError
    from ptxdsl.runtime import DeviceArray

    gmem, image = case_data(case)
    expected = expect(case, gmem, image)
    window = smem_window(case)
    launch = launcher(kernel_key(case))
    buffers = [DeviceArray.to_device(gmem), DeviceArray.zeros((case.ctas * INFO_WORDS,), np.uint32)]
    tensor, info = buffers
    spec = case.spec(tensor.ptr + GUARD)
    coords = [int(c) for c in case.coords]
    try:
        if case.op in ("load", "multicast"):
            out = DeviceArray.zeros((case.ctas * window,), np.uint8)
            buffers.append(out)
            args = [spec, out, info, window, case.fill * 0x01010101, ref.tx_bytes(spec), *coords]
            if case.op == "multicast":
                args += [case.cta_mask, case.issuer]
            launch(*args, grid=case.ctas, block=THREADS, shared_bytes=window,
                   cluster=(2, 1, 1) if case.op == "multicast" else None)
            raw = out.to_host()
            observed = {f"smem{r}": raw[r * window:(r + 1) * window] for r in range(case.ctas)}
        else:
            src = DeviceArray.to_device(image)
            buffers.append(src)
            launch(spec, src, info, window, *coords, grid=1, block=THREADS, shared_bytes=window)
            observed = {"gmem": tensor.to_host()}
        words = info.to_host().reshape(case.ctas, INFO_WORDS)
    except CudaError as e:
        LOST.append((case, str(e), buffers))    # freeing them now would raise again
        raise ContextLost(f"CUDA error, the context is lost: {e}\n\n{snippet(case)}") from e
    finally:
        if not LOST:
            for b in buffers:
                b.free()
    return Outcome(case, gmem, image, expected, observed, tuple(int(w) for w in words[:, 0]),
                   tuple(int(w) for w in words[:, 1]))


def receivers(case: Case) -> tuple:
    """The cluster ranks whose barrier a case's TMA completes."""
    if case.op == "multicast":
        return tuple(r for r in range(2) if case.cta_mask >> r & 1)
    return (0,) if case.op == "load" else ()


def compare(outcome: Outcome) -> list[tuple[str, dict]]:
    """[(category, details)] of every disagreement between the device and the model."""
    case = outcome.case
    problems = []
    for r in receivers(case):
        if outcome.status[r] != STATUS_DONE:
            problems.append((f"{case.op}-timeout", {"cta": r, "status": outcome.status[r],
                                                    "tx": ref.tx_bytes(case.spec())}))
    for r, base in enumerate(outcome.smem_base):
        if base % SMEM_ALIGN:
            problems.append(("harness-smem-align", {"cta": r, "smem_base": hex(base)}))
    for name, exp in outcome.expected.items():
        obs = outcome.observed[name]
        if exp.tobytes() != obs.tobytes():
            where = "gmem" if name == "gmem" else "smem"
            problems.append((f"{case.op}-{where}", diff(outcome, name)))
    return problems


def _element_text(dtype: str, raw: bytes) -> str:
    value = np.frombuffer(raw, to_numpy(scalar_type(dtype)))[0]
    return f"0x{raw[::-1].hex()} ({value!r})" if dtype in FLOAT_DTYPES else f"0x{raw[::-1].hex()} ({int(value)})"


def _element_coords(case: Case, off: int) -> str:
    """Tensor coordinates (innermost first) of the element at byte `off` of the tensor, or where it lies."""
    esize = DTYPES[case.dtype][1]
    if off < 0:
        return "guard before the tensor"
    if off >= extent(case):
        return "guard after the tensor"
    rem, idx = off - off % esize, []
    for pitch in reversed(case.strides):
        idx.append(rem // pitch)
        rem %= pitch
    idx.append(rem // esize)
    idx = idx[::-1]
    inside = all(i < d for i, d in zip(idx, case.dims))
    return f"{tuple(idx)}" + ("" if inside else " (row padding)")


def diff(outcome: Outcome, name: str, limit: int = 8) -> dict:
    """A summary of where one buffer differs: counts, then the first few chunks or elements."""
    case = outcome.case
    exp, obs = outcome.expected[name], outcome.observed[name]
    bad = np.flatnonzero(exp != obs)
    out = {"buffer": name, "bytes": int(exp.size), "bad_bytes": int(bad.size),
           "first_bad": int(bad[0]), "last_bad": int(bad[-1])}
    if name != "gmem":
        nbytes = ref.smem_layout(case.spec())[0]
        out["model_box_bytes"] = nbytes
        out["bad_beyond_box"] = int((bad >= nbytes).sum())
        out["chunks"] = [{"offset": int(c) * 16, "expected": exp[c * 16:c * 16 + 16].tobytes().hex(),
                          "observed": obs[c * 16:c * 16 + 16].tobytes().hex()}
                         for c in np.unique(bad // 16)[:limit]]
        return out
    esize = DTYPES[case.dtype][1]
    spec = case.spec()
    offsets, inside = ref.element_offsets(spec, case.coords)
    src = dict(zip(offsets[inside].tolist(), ref.smem_elements(spec, outcome.image)[inside]))
    rows = []
    for b in np.unique((bad - GUARD) // esize * esize)[:limit]:
        b = int(b)
        at = slice(GUARD + b, GUARD + b + esize)
        row = {"coords": _element_coords(case, b), "byte": GUARD + b,
               "before": _element_text(case.dtype, outcome.gmem[at].tobytes()),
               "expected": _element_text(case.dtype, exp[at].tobytes()),
               "observed": _element_text(case.dtype, obs[at].tobytes())}
        if b in src:
            row["source"] = _element_text(case.dtype, src[b].tobytes())
        rows.append(row)
    out["elements"] = rows
    return out


def render(case: Case, problems) -> str:
    """The text of a mismatch: each problem, then the reproducer."""
    lines = [f"GPU and ptxdsl.reference disagree ({', '.join(c for c, _ in problems)}):"]
    for category, details in problems:
        lines.append(f"  {category}: {json.dumps(details)}")
    return "\n".join(lines) + "\n\n" + snippet(case)


# --- the report --------------------------------------------------------------------------------

class Report:
    """Counts every case run and appends each distinct mismatch to `path` (JSON lines)."""

    def __init__(self, path: str | None = None, per_category: int = 200):
        self.path = path
        self.per_category = per_category
        self.runs = 0
        self.distinct: set = set()
        self.bad: dict = {}                # case -> categories
        self.by_category: dict[str, int] = {}
        self.minimal: list = []

    def ran(self, case: Case) -> None:
        self.runs += 1
        self.distinct.add(case)

    def mismatch(self, case: Case, problems, test: str = "", minimal: bool = False) -> None:
        new = case not in self.bad
        if new:
            self.bad[case] = [c for c, _ in problems]
            for c in self.bad[case]:
                self.by_category[c] = self.by_category.get(c, 0) + 1
        if minimal:
            self.minimal.append(case)
        if not self.path or not (new or minimal):
            return
        if not minimal and all(self.by_category[c] > self.per_category for c in self.bad[case]):
            return
        record = {"test": test, "minimal": minimal, "categories": self.bad[case], "case": asdict(case),
                  "problems": [{"category": c, **d} for c, d in problems], "snippet": snippet(case)}
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def summary(self, seed=None) -> str:
        cats = ", ".join(f"{c}: {n}" for c, n in sorted(self.by_category.items())) or "none"
        return (f"differential: {self.runs} cases run ({len(self.distinct)} distinct), {len(self.bad)} mismatching "
                f"({cats})" + (f", seed={seed}" if seed is not None else ""))


REPORT = Report(os.path.join(os.environ["OUT"], "differential.jsonl") if os.environ.get("OUT") else None)


def check_case(case: Case, report: Report = REPORT, test: str = "", minimal: bool = False) -> Outcome:
    """Run a case and raise the Mismatch subclass of its first problem when the device and the model
    disagree (a ContextLost on a CUDA error); every mismatch goes to `report`."""
    if LOST:
        raise ContextLost(f"the CUDA context was lost by an earlier case:\n{snippet(LOST[0][0])}")
    report.ran(case)
    try:
        outcome = run_case(case)
    except ContextLost as e:
        report.mismatch(case, [("cuda-error", {"error": str(e.__cause__)})], test, minimal)
        raise
    problems = compare(outcome)
    if problems:
        report.mismatch(case, problems, test, minimal)
        raise mismatch_kind(problems[0][0])(render(case, problems))
    return outcome
