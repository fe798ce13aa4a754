"""The mutation campaign: every example kernel and pipeline kernel, mutated the ways a user gets the protocol
wrong, classified by ptxdsl (the verifier when the kernel is built, then the launch checks with the launch's
actual arguments) and, for a sample, by the GPU (each mutant run with debug=True, its output compared with the
unmutated kernel's, bit for bit).

    python tests/mutants.py cpu [--json FILE]
        every mutant, classified on the CPU: `rejected: RULE` (built), `launch: RULE` (check_launch) or `accepted`
    python tests/mutants.py gpu --sample 160 --jobs 4 --out DIR [--seed 0] [--budget 210] [--sanitizer-budget 240]
            [--families NAME ...]
        a stratified sample (of the named kernels' mutants only, with --families) run on the GPU (a CUDA device
        needed); writes DIR/mutants.json: for each mutant ptxdsl's verdict and the GPU's (correct, wrong data, trap,
        hang caught by the watchdog, launch error, context error, timeout), then the summary below; exits 1 when a
        protocol bug was accepted. Each mutant that ran correctly runs again under compute-sanitizer racecheck and
        synccheck, the device's own race and barrier checkers (beside each family's unmutated kernel, which must be
        clean under the same tool): a hazard, a synccheck error, or a hang or dead context that the slower
        serialised run exposes shows the mutant broken although its plain run came out right (`broken_by_sanitizer`)
    python tests/mutants.py sanitize ID... [--jobs 4] [--budget 400]
        the sanitizer pass alone, on the mutants named (as a gpu run's JSON names them): each under racecheck and
        synccheck beside its family's unmutated kernel; prints each outcome and `broken_by_sanitizer`
    python tests/mutants.py summarise FILE
        the summary of a mutants.json written earlier, with today's classification (the file is not changed)

Mutation operators (each on every site it applies to): drop a fence (fence.mbarrier_init, fence.proxy.async,
the tensor-map fences and cp_fenceproxy), change an expect_tx byte count (+16, -16, twice, half), flip a wait's
parity (an immediate, or the first value of a parity register), drop a wait, shift a bound of a loop that holds
barrier or TMA operations by one, change an mbarrier.init count (+1, -1, to 1), drop a bar.sync / cluster wait,
and turn a TMA box's innermost coordinate into one that depends on a parameter (`x + off`, launched with off = 0,
1 or 4 elements). The tensor-core kernels (wgmma_tile, wgmma_ws) have their own operators (wg_*: drop or repeat
wgmma.fence, drop the commit, drop, move or loosen the wait_group, rewrite a descriptor's layout or advance, put an
mma_async under a lane or warp branch, change a setmaxnreg count; see the comment above _mmas). Mutants are made
on the kernel IR (a deep copy), so the same mutation applies to the debug build of the kernel the GPU runs.

The GPU summary sorts the two disagreements between ptxdsl and the GPU:

- broken on the GPU but accepted (`broken_on_gpu_but_accepted`): protocol bugs ptxdsl missed; the campaign's
  done-criterion is that this list is empty. Kept apart in `functional_not_protocol` ("functional, not a protocol
  error"): an accepted loop_bound mutant whose output differs only by whole tiles misplaced or missing (no torn
  tile). A loop that starts or stops one iteration off while every load is still waited for and every barrier
  phase still balances moves other tiles: a different kernel, which no protocol check can tell from the intended
  one (`ring_copy/loop_bound/0-start1` skips tile 0 and copies tile t + 1 into row t). So is an accepted
  coord_param mutant whose box moves by whole 16-byte units (an f32 map's coordinate 4 elements off): a legal
  box over other elements. And a wg_desc mutant whose last K step reads the step before (`-krepeat`): each
  descriptor still starts on a K step of the tile TMA wrote, so the product is of other elements, legally read.
- correct on the GPU but rejected (`correct_on_gpu_but_rejected`, every one of them), split in two:
  `memory_model_violations_not_observed`, where the PTX memory model does not order what the kernel needs (one
  run on one device shows that the H200 happened not to reorder it, not that it cannot), and `false_positives`,
  the rest: mutants whose change is harmless by the PTX rules, which ptxdsl should accept. MEMORY_MODEL gives the
  reason per operator and rule:
    drop_fence   the init, map edit or shared-memory write is a generic-proxy write; without fence.mbarrier_init
                 (fence.proxy.async), tensormap.cp_fenceproxy or fence.proxy.tensormap the async proxy (the TMA
                 unit) may still see the old bytes
    drop_sync    nothing orders one thread's mbarrier.init before the other threads' waits (or another CTA's
                 multicast complete_tx): they may use the barrier's memory before it is initialised
    drop_wait    a TMA write and the generic reads of the same buffer are unordered (a refill before the readers
                 have released the slot, or reads before the load's phase completes): a data race
    wg_fence     without wgmma.fence the mma_async's reads of the accumulators are not ordered after the
                 warpgroup's earlier accesses to those registers
    wg_commit    the mma_async are in no group: wgmma.wait_group does not wait for them, and the accumulators are
                 read while the tensor core may still write them
    wg_wait      the accumulators are read before a wgmma.wait_group retires the group that writes them
    wg_setmaxnreg  a .dec that raises or an .inc that lowers the count is undefined in the PTX ISA
    loop_bound   a load no thread waits for: reads race it, or the CTA exits while it still writes its shared
                 memory; a refill issued before the slot's readers have arrived
    flip_parity  the wait names a phase that has already completed: it returns before the data lands (a race)
    init_count   (fewer than the arrivals) the phase completes before every thread has arrived, so what the late
                 ones did is not ordered before the waiters, and their arrivals count towards the next phase
    tx           (fewer bytes than delivered) the tx-count reaches zero before the last bytes land: the phase
                 completes early and the surplus counts against the next phase
  A mutant that ptxdsl rejects for a hang (too many arrivals or bytes expected, a wait never armed) or an illegal
  coordinate and that ran correctly is a false positive: those faults show on every run.

The GPU side runs mutants in worker processes (`python tests/mutants.py worker ID...`) that print one JSON line
per mutant and exit when a mutant kills their CUDA context (a trap, an illegal instruction); the parent starts a
new worker for the rest, and kills a worker that says nothing for TIMEOUT_S (a hang the watchdog did not catch).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib
import json
import os
import random
import runpy
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
for p in (str(EXAMPLES), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

import ptxdsl as px  # noqa: E402
from ptxdsl import sreg  # noqa: E402
from ptxdsl.fragment import Accumulator  # noqa: E402
from ptxdsl.ir import If, Imm, Instr, Loop, Param, Reg, WaitLoop, walk  # noqa: E402
from ptxdsl.isa import core  # noqa: E402
from ptxdsl.isa.effects import (AsyncRead, AsyncWrite, Barrier, CommitGroup, ExpectTx, Init, MmaAsync,  # noqa: E402
                                ProxyFence, SetMaxNReg, TmapPublish, TmapRead, Wait, WaitGroup, WgmmaFence)
from ptxdsl.ir import SINK  # noqa: E402
from ptxdsl.types import ALL_TYPES, pred, u32  # noqa: E402
from ptxdsl.verify import check, check_launch  # noqa: E402

TIMEOUT_S = float(os.environ.get("PTXDSL_MUTANTS_TIMEOUT", 30))    # a worker silent this long is hung
REPEATS = 2                     # launches per mutant (a race may show only sometimes)
CACHED = ("launch_checks", "device_checks", "debug_op_checks", "debug_scratch", "facts", "ring_depends")
BROKEN = ("wrong data", "trap", "hang caught by watchdog", "context error", "timeout")

TILE, THREADS = 64, 128
TILE_BYTES = TILE * TILE * 2


# ------------------------------------------------------------------------------------- pipeline kernels

def ring_copy(debug=False, rows=512, cols=256, stages=3):
    """A pipelined copy as one loop: thread 0 keeps STAGES loads in flight in a ring; iteration t waits on
    full[stage], every thread copies the tile out and arrives on empty[stage], and thread 0 refills the stage
    with tile t + STAGES where `t + STAGES < TILES` (after waiting on empty[stage])."""
    tiles = rows // TILE
    with px.kernel("ring_copy", reqntid=THREADS, debug=debug) as k:
        src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((rows, cols), "bf16", (TILE, TILE)))
        out = k.param_ptr("out")
        pitch = k.param("pitch", px.u32)
        ring = k.shared("ring", stages * TILE_BYTES, align=128)
        full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
        tid = k.tid_x()
        t0 = k.setp("eq", tid, 0)
        x = k.mul(k.mov(sreg.ctaid_x), TILE)
        with k.if_(t0):
            for s in range(stages):
                k.mbarrier_init(full.at(8 * s), 1)
                k.mbarrier_init(empty.at(8 * s), THREADS)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(t0):
            for s in range(stages):
                k.mbarrier_arrive_expect_tx(full.at(8 * s), TILE_BYTES, sem="release", scope="cta")
                k.cp_async_bulk_tensor(ring.at(s * TILE_BYTES), src, (x, s * TILE), mbar=full.at(8 * s))
        stage, phase = k.mov(0, px.u32), k.mov(0, px.u32)
        with k.loop(0, tiles) as t:
            full_s, empty_s = k.mad(stage, 8, k.mov(full)), k.mad(stage, 8, k.mov(empty))
            buf = k.mad(stage, TILE_BYTES, k.mov(ring))
            k.mbarrier_wait(full_s, parity=phase, sem="acquire", scope="cta")
            _copy_out(k, buf, tid, t, x, out, pitch, THREADS)
            k.mbarrier_arrive(empty_s, sem="release", scope="cta")
            with k.if_(t0), k.if_(k.setp("lt", k.add(t, stages), tiles)):
                k.mbarrier_wait(empty_s, parity=phase, sem="acquire", scope="cta")
                k.mbarrier_arrive_expect_tx(full_s, TILE_BYTES, sem="release", scope="cta")
                k.cp_async_bulk_tensor(buf, src, (x, k.mul(k.add(t, stages), TILE)), mbar=full_s)
            k.add(stage, 1, out=stage)
            with k.if_(k.setp("eq", stage, stages)):
                k.mov(0, px.u32, out=stage)
                k.xor(phase, 1, out=phase)
    return k.kernel


def ws_copy(debug=False, rows=512, cols=256, stages=2):
    """Warp-specialized copy: warp 0 (one elected lane) produces (wait empty[s], expect, load into slot s), warps
    1-4 consume (wait full[s], copy the tile out, arrive on empty[s]); stages and phases are registers."""
    tiles, consumers = rows // TILE, THREADS
    with px.kernel("ws_copy", reqntid=32 + consumers, debug=debug) as k:
        src = k.param_tensormap("src", px.TensorMapSpec.tiled_for((rows, cols), "bf16", (TILE, TILE)))
        out = k.param_ptr("out")
        pitch = k.param("pitch", px.u32)
        ring = k.shared("ring", stages * TILE_BYTES, align=128)
        full, empty = k.mbarrier("full", stages), k.mbarrier("empty", stages)
        tid = k.tid_x()
        x = k.mul(k.mov(sreg.ctaid_x), TILE)
        with k.if_(k.setp("eq", tid, 0)):
            for s in range(stages):
                k.mbarrier_init(full.at(8 * s), 1)
                k.mbarrier_init(empty.at(8 * s), consumers)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(k.setp("eq", k.warp_idx(), 0)):
            with k.elect_one():
                phase = k.mov(0, px.u32)
                with k.loop(0, tiles) as i:
                    stage = k.and_(i, stages - 1)
                    k.mbarrier_wait(k.mad(stage, 8, k.mov(empty)), parity=k.xor(phase, 1), sem="acquire",
                                    scope="cta")
                    full_s = k.mad(stage, 8, k.mov(full))
                    k.mbarrier_arrive_expect_tx(full_s, TILE_BYTES, sem="release", scope="cta")
                    k.cp_async_bulk_tensor(k.mad(stage, TILE_BYTES, k.mov(ring)), src, (x, k.mul(i, TILE)),
                                           mbar=full_s)
                    with k.if_(k.setp("eq", stage, stages - 1)):
                        k.xor(phase, 1, out=phase)
        with k.else_():
            ctid = k.sub(tid, 32)
            phase = k.mov(0, px.u32)
            with k.loop(0, tiles) as i:
                stage = k.and_(i, stages - 1)
                k.mbarrier_wait(k.mad(stage, 8, k.mov(full)), parity=phase, sem="acquire", scope="cta")
                _copy_out(k, k.mad(stage, TILE_BYTES, k.mov(ring)), ctid, i, x, out, pitch, consumers)
                k.mbarrier_arrive(k.mad(stage, 8, k.mov(empty)), sem="release", scope="cta")
                with k.if_(k.setp("eq", stage, stages - 1)):
                    k.xor(phase, 1, out=phase)
    return k.kernel


def _copy_out(k, buf, tid, t, x, out, pitch, threads):
    """The `threads` threads copy tile t from `buf` to rows t*TILE.. of `out` (16-byte chunks)."""
    with k.loop(0, TILE_BYTES // 16 // threads) as i:
        chunk = k.mad(i, threads, tid)
        vals = k.ld(px.b32, k.add(buf, k.shl(chunk, 4)), space="shared::cta", vec=4)
        row, col = k.shr(chunk, 3), k.and_(chunk, 7)
        gbyte = k.mad(k.mad(t, TILE, row), pitch, k.add(k.shl(x, 1), k.shl(col, 4)))
        k.st(px.b32, k.add(out, k.cvt(px.u64, gbyte)), vals)


WS_K, WS_TN = 64, 64            # wgmma_ws: one 64 x 64 tile of C per CTA, the whole K (64) in one tile
WS_A = px.TensorMapSpec.tiled_for((256, WS_K), "bf16", (64, WS_K), swizzle="128B")
WS_B = px.TensorMapSpec.tiled_for((512, WS_K), "bf16", (WS_TN, WS_K), swizzle="128B")
WS_C = px.TensorMapSpec.tiled_for((256, 512), "bf16", (64, WS_TN))
WS_DEC, WS_INC = 40, 216        # 256 threads, 2 CTAs per SM: 128 registers each at entry, a pool of 32,768 per CTA


def wgmma_ws(debug=False):
    """A warp-specialized tensor-core tile: warpgroup 0 gives registers back (setmaxnreg.dec 40) and thread 0 loads
    A and B with TMA; warpgroup 1 takes them (setmaxnreg.inc 216: 128 x 40 + 128 x 216 = 32,768, the pool of a
    256-thread block at 2 CTAs per SM), waits on the mbarrier, multiplies with four mma_async, stores C through
    stmatrix and thread 128 writes it back with a TMA store (a named barrier over the 128 consumer threads)."""
    a_lay, b_lay = px.MatrixLayout.for_tensormap(WS_A), px.MatrixLayout.for_tensormap(WS_B)
    with px.kernel("wgmma_ws", reqntid=256, minnctapersm=2, debug=debug) as k:
        a_map, b_map = k.param_tensormap("a", WS_A), k.param_tensormap("b", WS_B)
        c_map = k.param_tensormap("c", WS_C)
        a_tile = k.shared("a_tile", a_lay.nbytes, align=1024)
        b_tile = k.shared("b_tile", b_lay.nbytes, align=1024)
        c_tile = k.shared("c_tile", 64 * WS_TN * 2, align=128)
        full = k.mbarrier("full")
        n0 = k.mul(k.mov(sreg.ctaid_x), WS_TN)
        m0 = k.mul(k.mov(sreg.ctaid_y), 64)
        tid = k.tid_x()
        with k.if_(k.setp("eq", tid, 0)):
            k.mbarrier_init(full, 1)
            k.fence_mbarrier_init()
        k.bar_sync(0)
        with k.if_(k.setp("eq", k.shr(tid, 7), 0)):
            k.setmaxnreg_dec(WS_DEC)
            with k.if_(k.setp("eq", tid, 0)):
                k.mbarrier_arrive_expect_tx(full, WS_A.box_bytes + WS_B.box_bytes, sem="release", scope="cta")
                k.cp_async_bulk_tensor(a_tile, a_map, (0, m0), mbar=full)
                k.cp_async_bulk_tensor(b_tile, b_map, (0, n0), mbar=full)
        with k.else_():
            k.setmaxnreg_inc(WS_INC)
            k.mbarrier_wait(full, parity=0, sem="acquire", scope="cta")
            a = k.matrix_descriptor(a_tile, a_lay)
            b = k.matrix_descriptor(b_tile, b_lay)
            acc = Accumulator(k, WS_TN)
            k.wgmma_fence()
            for j in range(a_lay.k_steps):
                k.wgmma_mma_async(acc, a.advance_k(j), b.advance_k(j), scale_d=0 if j == 0 else 1)
            k.wgmma_commit_group()
            k.wgmma_wait_group(0)
            acc.store(k, c_tile, WS_TN * 2, dtype="bf16")
            k.fence_proxy_async("shared::cta")
            k.bar_sync(1, 128)
            with k.if_(k.setp("eq", tid, 128)):
                k.cp_async_bulk_tensor(c_map, c_tile, (n0, m0))
                k.cp_async_bulk_commit_group()
                k.cp_async_bulk_wait_group_read(0)
    return k.kernel


# --------------------------------------------------------------------------------------------- families

@dataclass
class Family:
    """A kernel with what it takes to launch it: `build(debug)` the Kernel; `shapes` the arrays (name, numpy
    shape, fill) the harness makes; `args(arrays)` the launch's arguments (maps as TensorMapSpecs); `out` the
    array whose bytes are the result; grid, block, cluster."""

    name: str
    build: object
    shapes: tuple
    args: object
    out: str
    grid: tuple
    block: int = THREADS
    cluster: tuple | None = None


def _example(name):
    def build(debug=False):
        if not debug:
            return importlib.import_module(name).KERNEL.finish()
        original = px.kernel
        px.kernel = lambda *a, **kw: original(*a, **{**kw, "debug": True})
        try:
            return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"{name}_debug")["KERNEL"].finish()
        finally:
            px.kernel = original
    build.__name__ = name
    return build


def _pipe(module, **kw):
    """The kernel of a pipe_* example built by the example's own `build(**kw)` (a variant of its KERNEL: more
    stages, another drain depth); debug=True builds it with px.kernel(..., debug=True), like _example."""
    def build(debug=False):
        make = importlib.import_module(module).build
        if not debug:
            return make(**kw).finish()
        original = px.kernel
        px.kernel = lambda *a, **k: original(*a, **{**k, "debug": True})
        try:
            return make(**kw).finish()
        finally:
            px.kernel = original
    build.__name__ = module
    return build


def _map(a, box, swizzle="none"):
    return px.TensorMapSpec.from_array(a, box, swizzle=swizzle)


def _swizzled(a):
    return px.TensorMapSpec.from_array(a, (TILE, TILE), swizzle="128B")


def _map32(a):
    """The split accumulation's f32 map: 32 rows of 128 columns (pipe_splitsum.BOX)."""
    return px.TensorMapSpec.from_array(a, (32, 128))


R, C = 256, 512
PIPE_R, PIPE_C = 192, 512       # 24 tiles: 12 x 2 of PIPE_BOX (pipe_copy, pipe_axpy), 3 x 8 of 64x64 (pipe_transpose)
PIPE_BOX = (16, 256)            # (rows, columns): the examples' BOX = (256, 16) is (columns, rows)
PIPE_TILES, PIPE_GRID = 24, (3,)
SS_SPLITS, SS_M, SS_N, SS_LAG = 16, 64, 256, 1   # pipe_splitsum_ordered: 4 output tiles of 32x128 f32, 2 groups of 8
SS_TILES = (SS_M // 32) * (SS_N // 128)
GA_ROWS, GA_COLS, GA_TILES = 64, 512, 24         # pipe_gather: a 64-row table of 1 KiB rows, 24 stages of 16 rows
VL_SIZES = (180 * 256 + 48, 100, 64 * 256, 99 * 256)   # pipe_varlen: 180 rows and a tail, a tail only, 64, 99 rows
VL_AT = tuple(sum(-(-n // 256) * 256 for n in VL_SIZES[:i]) for i in range(len(VL_SIZES)))   # each 512-B aligned
VL_ROWS, VL_PER_CTA = sum(-(-n // 256) for n in VL_SIZES), 3                     # 345 rows of 256 in x and out


def _varlen_args(a, tensor_maps=False):
    """pipe_varlen's launch over the 4 tensors laid end to end in x and out: the template, the tables made by the
    example's own `tables` (3 tiles per CTA: a CTA of 3 laps its 2-stage ring), the map slots; on the GPU the tables
    are uploaded, on the CPU their host copies are passed, which check_launch reads (the tile counts and sizes)."""
    vl = importlib.import_module("pipe_varlen")
    x, out = _ptr(a["x"]), _ptr(a["out"])
    desc, work = vl.tables([(x + 2 * at, out + 2 * at, n) for at, n in zip(VL_AT, VL_SIZES)], VL_PER_CTA)
    if x:
        from ptxdsl.runtime import DeviceArray

        desc, work = DeviceArray.to_device(desc), DeviceArray.to_device(work)
    return (vl.template().bind(x), desc, work, a["slots"], 0.5) + ((a["flags"], 1) if tensor_maps else ())


VL_GRID = (len(importlib.import_module("pipe_varlen").tables([(0, 0, n) for n in VL_SIZES], VL_PER_CTA)[1]),)
FAMILIES = {f.name: f for f in [
    Family("tma_load_tile", _example("tma_load_tile"), (("src", (R, C), "random"), ("out", (R, C), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], C * 2), "out", (C // TILE, R // TILE)),
    Family("tma_store_tile", _example("tma_store_tile"), (("src", (R, C), "random"), ("dst", (R, C), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), _map(a["dst"], (TILE, TILE))), "dst", (C // TILE, R // TILE)),
    Family("tma_reduce_tile", _example("tma_reduce_tile"), (("src", (R, C), "random"), ("acc", (R, C), "random")),
           lambda a: (_map(a["src"], (TILE, TILE)), _map(a["acc"], (TILE, TILE))), "acc", (C // TILE, R // TILE)),
    Family("tma_multicast_tile", _example("tma_multicast_tile"),
           (("src", (256, TILE), "random"), ("out", (256, 2 * TILE), "pattern")),
           lambda a: (_map(a["src"], (TILE // 2, TILE)), a["out"], 2 * TILE * 2), "out", (2, 256 // TILE),
           cluster=(2, 1, 1)),
    Family("tma_pipeline_copy", _example("tma_pipeline_copy"),
           (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,)),
    Family("tensormap_replace", _example("tensormap_replace"),
           (("a", (R, C), "random"), ("b", (R, C), "random"), ("out", (R, C), "pattern"),
            ("maps", ((C // TILE) * (R // TILE), 128), "zeros8")),
           lambda a: (_map(a["a"], (TILE, TILE)), _map(a["out"], (TILE, TILE)), a["maps"], _ptr(a["b"])), "out",
           (C // TILE, R // TILE)),
    Family("ring_copy", ring_copy, (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,)),
    Family("ws_copy", ws_copy, (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,), block=160),
    Family("ring_copy2", lambda debug=False: ring_copy(debug, stages=2),
           (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,)),
    Family("ring_copy4", lambda debug=False: ring_copy(debug, stages=4),
           (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,)),
    Family("ws_copy4", lambda debug=False: ws_copy(debug, stages=4),
           (("src", (512, 256), "random"), ("out", (512, 256), "pattern")),
           lambda a: (_map(a["src"], (TILE, TILE)), a["out"], 256 * 2), "out", (256 // TILE,), block=160),
    # The ptxdsl.pipeline kernels, on a persistent grid: PIPE_TILES tiles over PIPE_GRID CTAs, 8 per CTA, so each
    # CTA laps its ring 4 times (2 stages), 8 times (1 stage) or 2-3 times (3 stages). pipe_copy and pipe_axpy
    # move 16x256 tiles (PIPE_BOX), which tile_report's 64x64 tiles do not line up with: a misplaced or missing
    # kernel tile shows there as torn 64x64 tiles (so `functional` does not recognise a loop shift that moves
    # whole tiles), and pipe_axpy's output is its input y, updated in place: a 64x64 tile it never writes shows
    # as misplaced, not missing. pipe_transpose's tiles are 64x64: its report is as precise as the others'.
    Family("pipe_copy", _example("pipe_copy"),
           (("src", (PIPE_R, PIPE_C), "random"), ("dst", (PIPE_R, PIPE_C), "pattern")),
           lambda a: (_map(a["src"], PIPE_BOX), _map(a["dst"], PIPE_BOX), PIPE_TILES, PIPE_C // PIPE_BOX[1]),
           "dst", PIPE_GRID, block=64),
    Family("pipe_axpy", _example("pipe_axpy"),
           (("x", (PIPE_R, PIPE_C), "random"), ("y", (PIPE_R, PIPE_C), "random")),
           lambda a: (_map(a["x"], PIPE_BOX), _map(a["y"], PIPE_BOX), a["y"], 0.75, PIPE_C * 2, PIPE_TILES,
                      PIPE_C // PIPE_BOX[1]), "y", PIPE_GRID, block=160),
    Family("pipe_transpose", _example("pipe_transpose"),
           (("x", (PIPE_R, PIPE_C), "random"), ("out", (PIPE_C, PIPE_R), "pattern")),
           lambda a: (_swizzled(a["x"]), _swizzled(a["out"]), PIPE_TILES, PIPE_C // TILE), "out", PIPE_GRID,
           block=160),
    Family("pipe_transpose3", _pipe("pipe_transpose", stages=3, depth=1),     # its run()'s persistent variant
           (("x", (PIPE_R, PIPE_C), "random"), ("out", (PIPE_C, PIPE_R), "pattern")),
           lambda a: (_swizzled(a["x"]), _swizzled(a["out"]), PIPE_TILES, PIPE_C // TILE), "out", PIPE_GRID,
           block=160),
    # The ordered split accumulation: in each of 4 output tiles, group 0 stores its sum of 8 splits (2 laps of the
    # 4-stage ring) and publishes the tile's flag (ptxdsl.pipeline.Flags), group 1 waits for the flag and adds its
    # sum with a TMA reduce. One add per tile, so the output is the same bits run after run. Group 1 of tile t is
    # CTA 2(t + SS_LAG) + 1. Its elements are f32: a coordinate 4 elements off is 16 bytes off, still aligned.
    # The row gather: warp 0's lanes each copy one table row (a bulk copy, no tensor map) into a stage, warp 1 stores
    # whole stages; 24 stages of 16 rows over 3 CTAs, so each CTA laps its 2-stage ring 4 times. The index is random
    # rows of the table (the same every run). It has no tensor map: no coordinate to turn into a parameter.
    Family("pipe_gather", _example("pipe_gather"),
           (("table", (GA_ROWS, GA_COLS), "random"), ("index", (GA_TILES * 16,), "rows64"),
            ("out", (GA_TILES * 16, GA_COLS), "pattern")),
           lambda a: (a["table"], a["index"], a["out"], GA_TILES), "out", PIPE_GRID, block=64),
    # The split accumulation with TMA reduce adds into a zeroed y: 2 groups per tile, 0 + a + b in either order is
    # the same bits.
    Family("pipe_splitsum", _example("pipe_splitsum"),
           (("x", (SS_SPLITS * SS_M, SS_N), "f32"), ("y", (SS_M, SS_N), "f32zeros")),
           lambda a: (_map32(a["x"]), _map32(a["y"]), SS_M, SS_SPLITS // 2, 2, SS_N // 128), "y", (SS_TILES * 2,),
           block=160),
    Family("pipe_splitsum_ordered", _pipe("pipe_splitsum", combine="ordered", name="pipe_splitsum_ordered"),
           (("x", (SS_SPLITS * SS_M, SS_N), "f32"), ("y", (SS_M, SS_N), "f32pattern"),
            ("flags", (SS_TILES * 4,), "zeros8")),
           lambda a: (_map32(a["x"]), _map32(a["y"]), SS_M, SS_SPLITS // 2, 2, SS_N // 128, SS_TILES, SS_LAG,
                      a["flags"], 1), "y", ((SS_TILES + SS_LAG) * 2,), block=160),
    # The batch: 4 tensors of 46,128, 100, 16,384 and 25,344 elements (rows of 256 and tails) in 6 CTAs of up to 3
    # tiles (6, 0, 2 and 4 tiles: 3 + 3, 0, 2, 3 + 1), so that a tensor's first CTA and one that waits for its map
    # each lap the 2-stage ring; with a map per CTA, and with a map per tensor (its first CTA publishes it).
    Family("pipe_varlen", _example("pipe_varlen"),
           (("x", (VL_ROWS, 256), "random"), ("out", (VL_ROWS, 256), "pattern"),
            ("slots", (VL_GRID[0], 128), "zeros8")),
           _varlen_args, "out", VL_GRID, block=160),
    Family("pipe_varlen_shared_maps", _pipe("pipe_varlen", maps="tensor", name="pipe_varlen_shared_maps"),
           (("x", (VL_ROWS, 256), "random"), ("out", (VL_ROWS, 256), "pattern"),
            ("slots", (len(VL_SIZES), 128), "zeros8"), ("flags", (4 * len(VL_SIZES),), "zeros8")),
           lambda a: _varlen_args(a, tensor_maps=True), "out", VL_GRID, block=160),
    # The tensor cores: wgmma_tile (one warpgroup: TMA loads of A and B into 128B-swizzled tiles, four mma_async,
    # stmatrix, a TMA store of C) on a 2 x 2 corner of its 4 x 4 grid of C tiles (the rest of C keeps its pattern:
    # an interpreter run of the whole grid costs 4 times more), and wgmma_ws (a producer warpgroup that lowers its
    # registers, a consumer that raises them) on 2 x 2 of its 64 x 64 tiles.
    Family("wgmma_tile", _example("wgmma_tile"),
           (("a", (256, 64), "random"), ("b", (512, 64), "random"), ("c", (256, 512), "pattern")),
           lambda a: (_map(a["a"], (64, 64), "128B"), _map(a["b"], (128, 64), "128B"), _map(a["c"], (64, 128))),
           "c", (2, 2)),
    Family("wgmma_ws", wgmma_ws,
           (("a", (256, WS_K), "random"), ("b", (512, WS_K), "random"), ("c", (256, 512), "pattern")),
           lambda a: (_map(a["a"], (64, WS_K), "128B"), _map(a["b"], (WS_TN, WS_K), "128B"),
                      _map(a["c"], (64, WS_TN))), "c", (2, 2), block=256),
]}


def _ptr(a):
    return getattr(a, "ptr", 0)


class _HostArray:
    """What the CPU side passes for an array: its shape, dtype and strides, no address (check_launch reads
    only the map's description)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.strides = np.zeros(shape, self.dtype).strides
        self.ptr = 0


def _host_arrays(fam):
    import ml_dtypes

    out = {}
    for name, shape, fill in fam.shapes:
        out[name] = _HostArray(shape, {"zeros8": np.uint8, "f32": np.float32, "f32pattern": np.float32,
                                       "f32zeros": np.float32, "rows64": np.int64}.get(fill, ml_dtypes.bfloat16))
    return out


# -------------------------------------------------------------------------------------------- mutations

def _sites(stmts, out=None) -> list:
    """(list, index, statement) of every statement, in program order."""
    out = [] if out is None else out
    for i, s in enumerate(stmts):
        out.append((stmts, i, s))
        if isinstance(s, If):
            _sites(s.then, out)
            _sites(s.orelse or [], out)
        elif isinstance(s, Loop):
            _sites(s.body, out)
    return out


def _effects(s):
    return s.op.effects() if isinstance(s, (Instr, WaitLoop)) else ()


def _has(s, kinds):
    return any(isinstance(e, kinds) for e in _effects(s))


def _protocol_loop(s) -> bool:
    return isinstance(s, Loop) and (any(isinstance(x, WaitLoop) for _, _, x in _sites(s.body)) or any(
        isinstance(e, (Init, ExpectTx, AsyncWrite, AsyncRead, Wait, Barrier)) for ins in walk(s.body)
        for e in ins.op.effects()))


def _elem_bytes(s) -> int | None:
    """Bytes per element of the tensor map a TMA instruction names (None: a map without a declared spec)."""
    for e in s.op.effects():
        spec = getattr(getattr(getattr(e, "tmap", None), "param", None), "tmap", None)
        if spec is not None:
            return spec.elem_bytes
    return None


def shift_bytes(m) -> int | None:
    """How far a coord_param mutant moves its box, in bytes (None for other mutants, or an unknown map)."""
    return m.variant * m.base if m.operator == "coord_param" and isinstance(m.base, int) else None


def _tma(s) -> bool:
    return isinstance(s, Instr) and any(isinstance(e, (AsyncWrite, AsyncRead, TmapRead))
                                        and getattr(e, "tmap", None) is not None and e.coords
                                        for e in s.op.effects())


def _parity_inits(kernel) -> list:
    """The Mov instructions that give a wait's parity register its first value (a constant)."""
    regs = []
    for _, _, s in _sites(kernel.body):
        if isinstance(s, WaitLoop) and isinstance(getattr(s.op, "parity", None), Reg):
            regs.append(s.op.parity)
    firsts = []
    for r in dict.fromkeys(regs):
        for _, _, s in _sites(kernel.body):
            if isinstance(s, Instr) and r in s.op.defs():
                if isinstance(s.op, core.Mov) and isinstance(s.op.src, Imm):
                    firsts.append(s)
                break
    return firsts


# operator -> (which statements it applies to, the variants at each)
def _sites_of(kernel, operator) -> list:
    found = []
    inits = _parity_inits(kernel) if operator == "flip_parity" else []
    for lst, i, s in _sites(kernel.body):
        if operator == "drop_fence" and _has(s, (ProxyFence, TmapPublish)):
            found.append((lst, i, s, [None]))
        elif operator == "tx" and isinstance(s, Instr) and _has(s, ExpectTx) and isinstance(s.op.tx, Imm):
            v = int(s.op.tx.value)
            found.append((lst, i, s, [v + 16, v - 16, 2 * v, v // 2]))
        elif operator == "flip_parity" and (isinstance(s, WaitLoop) and isinstance(getattr(s.op, "parity", None), Imm)
                                            or s in inits):
            found.append((lst, i, s, [None]))
        elif operator == "drop_wait" and isinstance(s, WaitLoop):
            found.append((lst, i, s, [None]))
        elif operator == "loop_bound" and _protocol_loop(s):
            variants = []
            if isinstance(s.start, Imm):
                variants += [("start", +1), ("start", -1)] if int(s.start.value) > 0 else [("start", +1)]
            if isinstance(s.stop, Imm):
                variants += [("stop", +1), ("stop", -1)]
            found.append((lst, i, s, variants))
        elif operator == "init_count" and isinstance(s, Instr) and _has(s, Init) and isinstance(s.op.count, Imm):
            c = int(s.op.count.value)
            found.append((lst, i, s, [c + 1] + ([c - 1, 1] if c > 1 else [])))
        elif operator == "drop_sync" and isinstance(s, Instr) and any(isinstance(e, Barrier) and e.wait
                                                                      for e in _effects(s)):
            found.append((lst, i, s, [None]))
        elif operator == "coord_param" and _tma(s):
            found.append((lst, i, s, [0, 1, 4]))
        elif operator == "wg_fence" and _has(s, WgmmaFence):
            found.append((lst, i, s, ["drop", "twice"]))
        elif operator == "wg_commit" and any(isinstance(e, CommitGroup) and e.queue == "wgmma" for e in _effects(s)):
            found.append((lst, i, s, ["drop"]))
        elif operator == "wg_wait" and any(isinstance(e, WaitGroup) and e.queue == "wgmma" for e in _effects(s)):
            found.append((lst, i, s, ["drop", "after_use", "n1"]))
        elif operator == "wg_desc":
            for name, first in _wg_buffers(kernel):         # a site per descriptor buffer: A's, then B's
                if s is first:
                    found.append((lst, i, s, _wg_desc_variants(kernel, name)))
        elif operator == "wg_diverge" and _has(s, MmaAsync):
            found.append((lst, i, s, ["lane", "warp"]))
        elif operator == "wg_setmaxnreg" and _has(s, SetMaxNReg):
            from ptxdsl.verify.wgmma import entry_registers

            n, entry = int(s.op.n), entry_registers(kernel)
            found.append((lst, i, s, [entry + 8, 24] if not s.op.inc else [n + 8, entry - 8, n - 8]))
    return found


# ------------------------------------------------------------------------------------- tensor-core operators
#
# wg_fence      drop a wgmma.fence, or run it twice (a control: a redundant fence)
# wg_commit     drop the wgmma.commit_group
# wg_wait       drop the wgmma.wait_group, move it after the last use of the accumulators (the stmatrix store), or
#               wait_group 1 in place of 0 (the one group is left in flight)
# wg_desc       a descriptor's tile (every mma_async that reads one buffer), rewritten as a kernel built with that
#               layout or that advance would emit it (the template, the start and the K-step adds, and the descriptor
#               value the verifier reads): the swizzle swapped against the map's (64B, 32B or none on a 128B map),
#               SBO doubled (a tile that reaches past its buffer: k.matrix_descriptor would refuse it, the IR
#               takes it), LBO doubled (a control: K-major swizzled tiles do not use it), the start 16 bytes on,
#               each K step advanced twice as far, the last K step reading the one before (functional: another
#               whole K step of the tile)
# wg_diverge    an mma_async under a branch on the lane ((tid & 31) < 16) or the warp ((tid & 127) < 64)
# wg_setmaxnreg a .dec above the count at entry, or down to 24 (a control); an .inc 8 higher (past the pool, which
#               wgmma_ws's counts fill exactly), below the count at entry, or 8 lower (a control)

def _mmas(kernel) -> list:
    return [s for _, _, s in _sites(kernel.body) if isinstance(s, Instr) and _has(s, MmaAsync)]


def _wg_buffers(kernel) -> list:
    """(buffer name, the first mma_async reading it) of each shared buffer a descriptor value names, in order."""
    found = {}
    for s in _mmas(kernel):
        for d in (s.op.a, s.op.b):
            buf = getattr(d, "buffer", None)
            if buf is not None and getattr(d, "layout", None) is not None:
                found.setdefault(buf.name, s)
    return list(found.items())


WG_SWIZZLES = ("128B", "64B", "32B", "none")


def _wg_desc_variants(kernel, name) -> list:
    first = dict(_wg_buffers(kernel))[name]
    lay = next(d.layout for d in (first.op.a, first.op.b) if getattr(getattr(d, "buffer", None), "name", 0) == name)
    out = []
    for sw in WG_SWIZZLES:
        if sw != lay.swizzle and _relaid(lay, ("swizzle", sw)) is not None:
            out.append(("swizzle", sw))
    for v in [("sbo", 2), ("lbo", 2), ("start", 16), ("kstep", 2), ("krepeat",)]:
        if _relaid(lay, v) is not None:
            out.append(v)
    return out


def _relaid(lay, v):
    """The layout a wg_desc variant's kernel would be built with (None: no such layout)."""
    from ptxdsl.descriptor import MatrixLayout

    kw = {"lbo": lay.lbo_given, "sbo": lay.sbo_given, "base_offset": lay.base_offset}
    try:
        if v[0] == "swizzle":
            return MatrixLayout(lay.dtype, lay.rows, lay.k, v[1], lay.major, base_offset=lay.base_offset)
        if v[0] in ("sbo", "lbo"):
            return MatrixLayout(lay.dtype, lay.rows, lay.k, lay.swizzle, lay.major,
                                **{**kw, v[0]: v[1] * getattr(lay, v[0])})
    except px.PtxdslError:
        return None
    return lay if lay.k_steps > 1 else None


def _rewrite_descs(k, name, v):
    """Every descriptor of buffer `name`: its template or start (the base add), its K-step adds, and the value
    the mma_async keeps, as the kernel built with the variant's layout or advance would have them."""
    from ptxdsl.descriptor import MatrixDescriptor

    defs = {r: s for _, _, s in _sites(k.body) if isinstance(s, Instr) for r in s.op.defs()}
    uses = [(s, f) for s in _mmas(k) for f in ("a", "b")
            if getattr(getattr(getattr(s.op, f), "buffer", None), "name", None) == name]
    lay = getattr(uses[0][0].op, uses[0][1]).layout
    new = _relaid(lay, v)
    steps = [lay.k_offset(j) for j in range(lay.k_steps)]
    base = min(getattr(s.op, f).offset for s, f in uses)
    shift = 16 if v[0] == "start" else 0

    def step(j):
        if v[0] == "kstep":
            return v[1] * steps[j]
        if v[0] == "krepeat" and j == len(steps) - 1:
            return steps[j - 1]
        return new.k_offset(j)
    done = set()
    for s, f in uses:
        d = getattr(s.op, f)
        j = steps.index(d.offset - base)
        add = defs[d.reg]
        if id(add) not in done:
            done.add(id(add))
            op = copy.copy(add.op)
            value = new.template + ((base + shift) >> 4) if j == 0 else step(j) >> 4
            op.b = Imm(value, op.b.type)
            add.op = op
        op = copy.copy(s.op)
        setattr(op, f, MatrixDescriptor(d._k, d.reg, d.buffer, new, base + shift + (step(j) if j else 0)))
        s.op = op


def _diverge(k, lst, i, s, v):
    """The mma_async at lst[i] under `if (tid & mask) < bound` (lane: 31, 16; warp: 127, 64)."""
    from ptxdsl.types import b32

    mask, bound = (31, 16) if v == "lane" else (127, 64)
    tid, low, p = k.new_reg(u32), k.new_reg(u32), k.new_reg(pred)
    lst[i:i + 1] = [Instr(core.Mov(type=u32, d=tid, src=sreg.tid_x), None, s.loc),
                    Instr(core.And(type=b32, d=low, a=tid, b=Imm(mask, b32)), None, s.loc),
                    Instr(core.Setp(cmp="lt", type=u32, p=p, a=low, b=Imm(bound, u32)), None, s.loc),
                    If(p, [s], None, s.loc)]


def _accumulator_uses(lst, i) -> int:
    """The index in `lst` of the last statement after `i` that reads a register of the kernel's accumulators."""
    regs = set()
    for e in (e for x in lst for e in _effects(x) if isinstance(e, MmaAsync)):
        regs |= set(getattr(e.acc, "regs", e.acc) or ())
    last = i
    for j in range(i + 1, len(lst)):
        x = lst[j]
        if isinstance(x, Instr) and regs & set(x.op.uses()):
            last = j
    return last


OPERATORS = ("drop_fence", "tx", "flip_parity", "drop_wait", "loop_bound", "init_count", "drop_sync", "coord_param",
             "wg_fence", "wg_commit", "wg_wait", "wg_desc", "wg_diverge", "wg_setmaxnreg")
WG_OPERATORS = tuple(op for op in OPERATORS if op.startswith("wg_"))    # only tensor-core kernels have their sites


@dataclass(frozen=True)
class Mutant:
    id: str
    family: str
    operator: str
    site: int                   # which site of the operator, in program order
    variant: object
    line: int | None
    what: str
    base: object = None         # the value the variant replaces (an init count, a byte count; coord_param: the
                                # bytes per element of the map, so that variant * base is the box's shift in bytes)

    @property
    def extra(self) -> tuple:
        """The arguments the mutant takes after the kernel's own (coord_param: the offset)."""
        return (self.variant,) if self.operator == "coord_param" else ()


def mutants(families=None) -> list:
    """Every mutant of every family (or of the named ones), in a fixed order."""
    out = []
    for fam in (families or FAMILIES):
        kernel = kernel_of(fam, False)
        for operator in OPERATORS:
            for n, (_, _, s, variants) in enumerate(_sites_of(kernel, operator)):
                line = s.loc.line if getattr(s, "loc", None) is not None else None
                name = type(s.op).__name__ if isinstance(s, (Instr, WaitLoop)) else "loop"
                base = {"init_count": lambda: int(s.op.count.value), "tx": lambda: int(s.op.tx.value),
                        "coord_param": lambda: _elem_bytes(s), "wg_setmaxnreg": lambda: int(s.op.n)}.get(
                    operator, lambda: None)()
                for v in variants:
                    vid = "" if v is None else "-" + ("".join(map(str, v)) if isinstance(v, tuple) else str(v))
                    out.append(Mutant(f"{fam}/{operator}/{n}{vid}", fam, operator, n, v, line,
                                      f"{operator} at line {line} ({name}{'' if v is None else f', {v}'})", base))
    return out


_KERNELS: dict = {}
_SHARED = {id(t): t for t in ALL_TYPES.values()} | {id(SINK): SINK}


def kernel_of(family: str, debug: bool):
    key = (family, debug)
    if key not in _KERNELS:
        _KERNELS[key] = FAMILIES[family].build(debug)
    return _KERNELS[key]


def mutate(m: Mutant, debug: bool = False):
    """A deep copy of the family's kernel with the mutation applied."""
    original = kernel_of(m.family, debug)
    saved = {a: original.__dict__.pop(a) for a in CACHED if a in original.__dict__}
    try:
        k = copy.deepcopy(original, dict(_SHARED))      # types are compared by identity (`t is pred`): keep them
    finally:
        original.__dict__.update(saved)
    lst, i, s, _ = _sites_of(k, m.operator)[m.site]
    v = m.variant
    if m.operator in ("drop_fence", "drop_wait", "drop_sync"):
        del lst[i]
    elif m.operator == "tx":
        op = copy.copy(s.op)
        op.tx = Imm(v, u32)
        s.op = op
    elif m.operator == "flip_parity":
        op = copy.copy(s.op)
        if isinstance(s, WaitLoop):
            op.parity = Imm(1 - int(op.parity.value), u32)
        else:
            op.src = Imm(1 - int(op.src.value), op.src.type)
        s.op = op
    elif m.operator == "loop_bound":
        which, delta = v
        setattr(s, which, Imm(int(getattr(s, which).value) + delta, s.var.type))
    elif m.operator == "init_count":
        op = copy.copy(s.op)
        op.count = Imm(v, op.count.type)
        s.op = op
    elif m.operator == "coord_param":
        _coordinate_plus_param(k, lst, i, s)
    elif m.operator == "wg_fence":
        if v == "drop":
            del lst[i]
        else:
            lst.insert(i + 1, copy.copy(s))
    elif m.operator == "wg_commit":
        del lst[i]
    elif m.operator == "wg_wait":
        if v == "n1":
            op = copy.copy(s.op)
            op.n = 1
            s.op = op
        else:
            last = _accumulator_uses(lst, i)
            del lst[i]
            if v == "after_use":
                lst.insert(last, s)
    elif m.operator == "wg_desc":
        _rewrite_descs(k, _wg_buffers(k)[m.site][0], v)
    elif m.operator == "wg_diverge":
        _diverge(k, lst, i, s, v)
    elif m.operator == "wg_setmaxnreg":
        op = copy.copy(s.op)
        op.n = v
        s.op = op
    return k


def _coordinate_plus_param(k, lst, i, s):
    """coords[0] -> coords[0] + off, `off` a new u32 parameter (the launch passes it)."""
    p = Param("mutant_off", "scalar", u32, loc=s.loc)
    p.value = k.new_reg(u32)
    k.params.append(p)
    k.body.insert(0, Instr(core.Ld(space="param", type=u32, d=(p.value,), addr=p), None, s.loc))
    if lst is k.body:
        i += 1
    x = k.new_reg(u32)
    c = s.op.coords[0]
    a = Imm(int(c.value), u32) if isinstance(c, Imm) else c
    lst.insert(i, Instr(core.Add(type=u32, d=x, a=a, b=p.value), None, s.loc))
    op = copy.copy(s.op)
    op.coords = (x,) + tuple(s.op.coords[1:])
    s.op = op


# ------------------------------------------------------------------------------------------ classification

def launch_args(fam: Family, arrays) -> tuple:
    return tuple(fam.args(arrays))


def classify(m: Mutant) -> dict:
    """ptxdsl's verdict on a mutant: the first error the verifier reports, else the first launch check its
    launch breaks, else accepted."""
    try:
        k = mutate(m)
    except px.PtxdslError as e:
        return {"verdict": "rejected", "stage": "build", "rule": e.rule or type(e).__name__, "message": str(e)}
    errors = [d for d in check(k) if d.severity == "error"]
    if errors:
        d = errors[0]
        return {"verdict": "rejected", "stage": "verify", "rule": d.rule, "line": d.loc.line if d.loc else None,
                "message": d.message}
    fam = FAMILIES[m.family]
    args = launch_args(fam, _host_arrays(fam)) + m.extra
    try:
        check_launch(k, args, grid=fam.grid, block=fam.block, cluster=fam.cluster)
    except px.LaunchError as e:
        return {"verdict": "rejected", "stage": "launch", "rule": e.rule, "line": e.loc.line if e.loc else None,
                "message": str(e)}
    return {"verdict": "accepted"}


def cpu_campaign(json_path=None, families=None) -> dict:
    t0 = time.perf_counter()
    rows = []
    for m in mutants(families):
        rows.append({"id": m.id, "family": m.family, "operator": m.operator, "what": m.what,
                     "ptxdsl": classify(m)})
    summary = _summarise_cpu(rows)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    result = {"mutants": rows, "summary": summary}
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
    return result


def _summarise_cpu(rows) -> dict:
    by_rule, by_op = {}, {}
    for r in rows:
        v = r["ptxdsl"]
        key = f"{v['stage']}: {v['rule']}" if v["verdict"] == "rejected" else "accepted"
        by_rule[key] = by_rule.get(key, 0) + 1
        op = by_op.setdefault(r["operator"], {"rejected": 0, "accepted": 0})
        op[v["verdict"]] += 1
    return {"mutants": len(rows), "rejected": sum(r["ptxdsl"]["verdict"] == "rejected" for r in rows),
            "by_verdict": dict(sorted(by_rule.items())), "by_operator": by_op}


# ------------------------------------------------------------------------------------------------ the GPU

def _host_inputs(fam, seed=0) -> dict:
    """The arrays a launch starts from (numpy): random bf16 (or f32) inputs, outputs filled with 0xA5A5 (0xA5A5A5A5),
    zeroed bytes, random row numbers of the gather's table."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, fill in fam.shapes:
        if fill == "random":
            out[name] = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
        elif fill == "pattern":
            out[name] = np.full(shape, 0xA5A5, np.uint16).view(ml_dtypes.bfloat16)
        elif fill == "f32":
            out[name] = rng.standard_normal(shape, dtype=np.float32)
        elif fill == "f32pattern":
            out[name] = np.full(shape, 0xA5A5A5A5, np.uint32).view(np.float32)
        elif fill == "f32zeros":
            out[name] = np.zeros(shape, np.float32)
        elif fill == "rows64":
            out[name] = rng.integers(0, GA_ROWS, shape, dtype=np.int64)
        else:
            out[name] = np.zeros(shape, np.uint8)
    return out


def _device_arrays(fam, seed=0):
    from ptxdsl.runtime import DeviceArray

    return {name: DeviceArray.to_device(a) for name, a in _host_inputs(fam, seed).items()}


def _run_on_gpu(fam, kernel, extra) -> list:
    """The output array after each of REPEATS launches (fresh inputs each time)."""
    prog = px.compile(kernel)
    outputs = []
    for _ in range(REPEATS):
        arrays = _device_arrays(fam)
        prog[kernel.name](*fam.args(arrays), *extra, grid=fam.grid, block=fam.block, cluster=fam.cluster,
                          sync=True)
        outputs.append(arrays[fam.out].to_host())
    return outputs


def _tiles(a):
    rows, cols = a.shape[0] // TILE, a.shape[1] // TILE if a.ndim > 1 else 0
    return {(r, c): a[r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE].tobytes()
            for r in range(rows) for c in range(cols)}


def tile_report(fam, reference, got) -> str:
    """How the output's 64x64 tiles differ from the unmutated kernel's: `misplaced` (a whole tile of an input, or
    zeros, in the wrong place: a kernel that moves other data with its protocol intact), `missing` (never
    written), `torn` (anything else: a race or a partial copy)."""
    inputs = _host_inputs(fam)
    whole = set()
    for name, shape, fill in fam.shapes:
        if fill == "random":
            whole |= set(_tiles(inputs[name]).values())
    zeros = bytes(TILE * TILE * 2)
    pattern = np.full((TILE, TILE), 0xA5A5, np.uint16).tobytes()
    counts = {"misplaced": 0, "missing": 0, "torn": 0}
    ref, out = _tiles(reference), _tiles(got)
    for key, tile in out.items():
        if tile == ref.get(key):
            continue
        if tile == pattern:
            counts["missing"] += 1
        elif tile in whole or tile == zeros:
            counts["misplaced"] += 1
        else:
            counts["torn"] += 1
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no 64x64 tile differs"


FAKE = "PTXDSL_MUTANTS_FAKE"    # tests of the campaign's bookkeeping: "outcome,outcome,..." by mutant order, no GPU


def _fake(m):
    """A stand-in outcome for the bookkeeping tests (FAKE lists outcomes; `sleep` hangs the worker)."""
    plan = os.environ[FAKE].split(",")
    if m is None:
        return "reference", "", np.zeros(1)
    outcome = plan[sum(map(ord, m.id)) % len(plan)]
    if outcome == "sleep":
        time.sleep(3600)
    return outcome, "fake", None


def gpu_outcome(m: Mutant | None, family: str, reference) -> tuple:
    """(outcome, detail, the output or None) of one mutant's debug build on the GPU (checks at launch off: the
    device decides); m=None runs the unmutated kernel and returns its output as the reference."""
    if os.environ.get(FAKE):
        return _fake(m)
    fam = FAMILIES[family]
    try:
        kernel = mutate(m, debug=True) if m is not None else kernel_of(family, True)
        outputs = _run_on_gpu(fam, kernel, m.extra if m is not None else ())
    except px.LaunchError as e:
        return "launch error", str(e), None
    except px.KernelTrap as e:
        return ("hang caught by watchdog" if e.rule == "debug-watchdog" else "trap"), str(e), None
    except px.CudaError as e:
        return "context error", str(e), None
    except px.PtxdslError as e:
        return "build error", f"{type(e).__name__}: {e}", None
    if reference is None:
        return "reference", "", outputs[0]
    differ = [o for o in outputs if o.tobytes() != reference.tobytes()]
    if not differ:
        return "correct", f"{len(outputs)} launches bit-exact", None
    return "wrong data", (f"{len(differ)} of {len(outputs)} launches differ from the unmutated kernel's output "
                          f"({tile_report(FAMILIES[family], reference, differ[0])})"), None


def _through_checks(m) -> str:
    """What the launcher does with the launch checks on (a mutant they reject must not reach the GPU)."""
    os.environ.pop("PTXDSL_LAUNCH_CHECKS", None)
    if os.environ.get(FAKE):
        return "launch error: fake"
    fam = FAMILIES[m.family]
    try:
        _run_on_gpu(fam, mutate(m, debug=True), m.extra)
    except px.LaunchError as e:
        return f"launch error: {e.rule}"
    except px.PtxdslError as e:
        return f"reached the GPU: {type(e).__name__}"
    return "reached the GPU: ran"


def worker(ids) -> None:
    """Run mutants by id, one JSON line each; stop after one that leaves the CUDA context unusable. A mutant the
    launch checks reject is first launched with them on (it must stop there), then with them off
    (PTXDSL_LAUNCH_CHECKS=0) so that the device says what it does."""
    os.environ["PTXDSL_LAUNCH_CHECKS"] = "0"
    by_id = {m.id: m for m in mutants(sorted({i.split("/")[0] for i in ids}))}
    refs = {}
    for mid in ids:
        if mid.endswith(REFERENCE):             # the unmutated kernel alone (the sanitizer pass's control run)
            outcome, detail, _ = gpu_outcome(None, mid[:-len(REFERENCE)], None)
            print(json.dumps({"id": mid, "gpu": "correct" if outcome == "reference" else outcome,
                              "detail": detail[:600]}), flush=True)
            continue
        m = by_id[mid]
        t = time.perf_counter()
        if m.family not in refs:
            outcome, detail, ref = gpu_outcome(None, m.family, None)
            if outcome != "reference":
                print(json.dumps({"id": mid, "gpu": "reference failed", "detail": detail}), flush=True)
                return
            refs[m.family] = ref
        launcher = None
        if classify(m).get("stage") == "launch":
            launcher = _through_checks(m)     # the launcher, its launch checks on: refuses before the GPU
        os.environ["PTXDSL_LAUNCH_CHECKS"] = "0"
        outcome, detail, _ = gpu_outcome(m, m.family, refs[m.family])
        print(json.dumps({"id": mid, "gpu": outcome, "detail": detail[:600], "with_launch_checks": launcher,
                          "seconds": round(time.perf_counter() - t, 3)}), flush=True)
        if outcome in ("trap", "hang caught by watchdog", "context error"):
            return


def _worker_process(ids, results, lock, deadline=float("inf")):
    """Feed `ids` to worker processes until each has an outcome. A worker stops after a mutant that kills its
    context (the next worker takes the rest); one silent for TIMEOUT_S is killed and its current mutant is a
    timeout; one that fails before any result gives its current mutant a worker error."""
    import tempfile

    todo = list(ids)
    while todo:
        if time.perf_counter() > deadline:
            with lock:
                for i in todo:
                    results[i] = {"id": i, "gpu": "not run", "detail": "the campaign's time budget ran out"}
            return
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "worker", *todo],
                                    stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(ROOT))
            lines: list = []
            reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
            reader.start()
            seen, last, killed = 0, time.perf_counter(), False
            while proc.poll() is None:
                time.sleep(0.05)
                if len(lines) > seen:
                    seen, last = len(lines), time.perf_counter()
                elif time.perf_counter() - last > TIMEOUT_S:
                    proc.kill()
                    killed = True
            proc.wait()
            reader.join(timeout=5)
            err.seek(0)
            stderr = err.read()
        done = [json.loads(ln) for ln in lines if ln.startswith("{")]
        with lock:
            for r in done:
                results[r["id"]] = r
        finished = {r["id"] for r in done}
        todo = [i for i in todo if i not in finished]
        if todo and (killed or not done):
            with lock:
                results[todo[0]] = {"id": todo[0], "gpu": "timeout" if killed else "worker error",
                                    "detail": stderr[-600:]}
            todo = todo[1:]


# ------------------------------------------------------------------------ the device's own checkers

REFERENCE = "/reference"                # worker id FAMILY/reference: the unmutated kernel
SANITIZERS = ("racecheck", "synccheck")
SANITIZER_TIMEOUT_S = float(os.environ.get("PTXDSL_MUTANTS_SANITIZER_TIMEOUT", 120))
CLEAN = "clean"


def judge_sanitized(tool: str, stdout: str, log: str) -> str:
    """What one worker run under compute-sanitizer `tool` says: 'clean'; a finding ('N racecheck hazards',
    'N synccheck errors', or the run's outcome when it was not correct under the tool: a hang the slower
    serialised run exposes, a context the checker's traps killed); or 'no verdict ...'."""
    from ptxdsl.testing.sanitize import errors_in

    rows = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    errors = errors_in(log)
    if rows and rows[-1]["gpu"] != "correct":
        return f"{rows[-1]['gpu']} under {tool}"
    if errors:
        return f"{errors} {tool} {'hazards' if tool == 'racecheck' else 'errors'}"
    if not rows or errors is None:
        return f"no verdict under {tool}"
    return CLEAN


def is_finding(outcome: str | None) -> bool:
    """A sanitizer outcome that shows the mutant broken (not clean, not void, not a run without a verdict)."""
    return bool(outcome) and outcome != CLEAN and not outcome.startswith(("no verdict", "void", "timeout"))


def sanitized(tool: str, mid: str, sanitizer: str) -> str:
    """Run mutant `mid` (or FAMILY/reference) in a worker under compute-sanitizer `tool`; judge_sanitized's
    verdict. The worker runs the family's unmutated kernel first: its control run must be clean for a finding
    to count (gpu_campaign checks)."""
    import shutil
    import tempfile

    from ptxdsl.testing.sanitize import wrap

    logs = tempfile.mkdtemp(prefix=f"mutant-{tool}-")
    cmd = wrap(sanitizer, tool, os.path.join(logs, "%p.log"), [sys.executable, str(Path(__file__).resolve()),
                                                                 "worker", mid])
    env = dict(os.environ, PTXDSL_SANITIZER=tool, PTXDSL_LINE_INFO="1")
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=SANITIZER_TIMEOUT_S, cwd=str(ROOT), env=env)
        stdout = res.stdout
    except subprocess.TimeoutExpired:
        shutil.rmtree(logs, ignore_errors=True)
        return f"timeout under {tool} ({SANITIZER_TIMEOUT_S:.0f} s)"
    log = "".join(Path(p).read_text(errors="replace") for p in sorted(Path(logs).glob("*.log")))
    shutil.rmtree(logs, ignore_errors=True)
    return judge_sanitized(tool, stdout, log)


def sanitizer_pass(ids, jobs, deadline) -> dict:
    """{mutant id: {tool: outcome}} for the mutants that ran correctly, each under racecheck and synccheck, with
    each family's unmutated kernel as the control: a tool whose control run is not clean voids its findings for
    that family. Runs that would start after `deadline` are 'not run'."""
    from concurrent.futures import ThreadPoolExecutor
    from ptxdsl.testing.sanitize import find

    sanitizer = find()
    if sanitizer is None or not ids or os.environ.get(FAKE):
        return {}
    families = sorted({i.split("/")[0] for i in ids})
    runs = [(tool, f + REFERENCE) for f in families for tool in SANITIZERS] + [(t, i) for i in ids for t in SANITIZERS]

    def one(run):
        return run, (sanitized(run[0], run[1], sanitizer) if time.perf_counter() < deadline
                     else "not run: the campaign's time budget ran out")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        got = dict(pool.map(one, runs))
    out = {}
    for i in ids:
        fam = i.split("/")[0]
        out[i] = {tool: (got[(tool, i)] if got[(tool, fam + REFERENCE)] == CLEAN
                         else f"void: the unmutated kernel under {tool}: {got[(tool, fam + REFERENCE)]}")
                  for tool in SANITIZERS}
    return out


def sanitize_ids(ids, jobs, budget) -> int:
    """`sanitize`: the sanitizer pass on the mutants named; 2 (and why, on stderr) for an unknown id or without
    compute-sanitizer."""
    from ptxdsl.testing.sanitize import find

    known = {m.id for m in mutants()}
    unknown = [i for i in ids if i not in known]
    if unknown:
        print(f"tests/mutants.py sanitize: no such mutant: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if find() is None:
        print("tests/mutants.py sanitize: compute-sanitizer not found (it comes with the CUDA toolkit)",
              file=sys.stderr)
        return 2
    got = sanitizer_pass(ids, jobs, time.perf_counter() + budget)
    broken = sorted(i for i, v in got.items() if any(is_finding(x) for x in v.values()))
    print(json.dumps({"sanitized": got, "broken_by_sanitizer": broken}, indent=1))
    return 0


def sample(all_mutants, n, seed) -> list:
    """A stratified sample: round robin over (family, operator) groups, each shuffled with `seed`."""
    rng = random.Random(seed)
    groups: dict = {}
    for m in all_mutants:
        groups.setdefault((m.family, m.operator), []).append(m)
    for g in groups.values():
        rng.shuffle(g)
    keys = sorted(groups)
    rng.shuffle(keys)
    out = []
    while len(out) < n and any(groups.values()):
        for key in keys:
            if groups[key] and len(out) < n:
                out.append(groups[key].pop())
    return out


def gpu_campaign(n, jobs, out_dir, seed=0, budget=float("inf"), sanitizer_budget=240.0, families=None) -> dict:
    """Run a sample of `n` mutants (of the named families only, given `families`) on the GPU in `jobs` worker
    streams; no new worker starts after `budget` seconds (its mutants are `not run`). Then each mutant that ran
    correctly runs again under compute-sanitizer racecheck and synccheck (when it is installed), for at most
    `sanitizer_budget` seconds (0: not at all)."""
    t0 = time.perf_counter()
    chosen = sample(mutants(families), n, seed)
    verdicts = {m.id: classify(m) for m in chosen}
    results: dict = {}
    lock = threading.Lock()
    shards = [[m.id for m in chosen[j::jobs]] for j in range(jobs)]
    threads = [threading.Thread(target=_worker_process, args=(s, results, lock, t0 + budget)) for s in shards if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    correct = [m.id for m in chosen if results.get(m.id, {}).get("gpu") == "correct"]
    checked = sanitizer_pass(correct, jobs, time.perf_counter() + sanitizer_budget) if sanitizer_budget else {}
    rows = []
    for m in chosen:
        g = results.get(m.id, {"gpu": "no result", "detail": ""})
        rows.append({"id": m.id, "family": m.family, "operator": m.operator, "what": m.what,
                     "ptxdsl": verdicts[m.id], "gpu": g["gpu"], "gpu_detail": g.get("detail", ""),
                     "sanitizer": checked.get(m.id),
                     "with_launch_checks": g.get("with_launch_checks"), "seconds": g.get("seconds"),
                     "memory_model": memory_model_reason(m.operator, verdicts[m.id], m.variant, m.base),
                     "shift_bytes": shift_bytes(m)})
    summary = summarise_gpu(rows)
    summary["wall_seconds"] = round(time.perf_counter() - t0, 1)
    summary["device"] = _device_name()
    summary["date"] = time.strftime("%Y-%m-%d")
    result = {"summary": summary, "mutants": rows}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps(result, indent=1))
    return result


# (operator, rule that rejects the mutant) -> why the change breaks the PTX memory model even where one GPU run
# gave the right answer. A rejected mutant that ran correctly and is not here is a false positive.
_RACE = "a TMA write and generic reads of the same buffer are not ordered: a data race"
MEMORY_MODEL = {
    ("drop_fence", "mbarrier-init-fence"): "the init is a generic-proxy write: without fence.mbarrier_init the TMA "
                                           "unit's complete_tx may act on the barrier's old bytes",
    ("drop_fence", "async-proxy-fence"): "st.shared writes are not made visible to the async proxy before the TMA "
                                         "store/reduce reads them",
    ("drop_fence", "tensormap-release"): "the tensormap.replace edit is not released to the tensormap proxy "
                                         "(tensormap.cp_fenceproxy): the TMA unit may read the old map",
    ("drop_fence", "tensormap-acquire"): "the edited map is not acquired (fence.proxy.tensormap::generic): the TMA "
                                         "unit may use a stale copy",
    ("drop_sync", "mbarrier-init-sync"): "nothing orders one thread's mbarrier.init before the other threads' waits "
                                         "(or another CTA's multicast complete_tx): they may use the barrier's "
                                         "memory before it is initialised",
    ("drop_wait", "refill-race"): "the refill's TMA write is not ordered after the readers' generic reads (the "
                                  "empty-barrier wait orders them): " + _RACE,
    ("drop_wait", "tma-load-race"): "the reads are not ordered after the load's phase completes: " + _RACE,
    ("loop_bound", "tma-load-race"): "a load no thread waits for: reads race it, or the CTA exits while it still "
                                     "writes the CTA's shared memory",
    ("loop_bound", "refill-race"): "a refill before the slot's readers have released it: " + _RACE,
    ("loop_bound", "mbarrier-bounds"): "the init loop writes one barrier past the array: an out-of-bounds "
                                       "shared-memory write, onto whatever ptxas placed there",
    ("flip_parity", "phase-reuse"): "the wait names a phase that already completed and returns at once: " + _RACE,
    ("flip_parity", "ring-parity"): "the wait names a phase that already completed and returns at once: " + _RACE,
    ("flip_parity", "refill-race"): "a wait that returns at once lets the refill overtake the readers: " + _RACE,
    ("flip_parity", "tma-load-race"): "a wait that returns at once lets the reads overtake the load: " + _RACE,
    ("init_count", "arrival-count"): "more arrivals than the init count: the phase completes before every thread "
                                     "has arrived, so the late threads' reads are not ordered before the refill, "
                                     "and their arrivals count towards the next phase",
    ("init_count", "refill-race"): "more arrivals than the init count: the phase completes before every reader "
                                   "has arrived: " + _RACE,
    ("tx", "expect-tx-mismatch"): "fewer bytes expected than delivered: the tx-count reaches zero before the last "
                                  "bytes land, so the phase completes early (a race) and the surplus counts against "
                                  "the next phase",
    ("tx", "refill-race"): "fewer bytes expected than delivered: the phase completes before the last bytes land, so "
                           "the readers release the stage and the refill overtakes them: " + _RACE,
    ("drop_sync", "refill-race"): "without the CTA barrier, a warp refills or stores from a stage that other warps "
                                  "still read or write: " + _RACE,
    ("drop_sync", "bulk-group-pending"): "without the CTA barrier, the TMA store reads shared memory that other "
                                         "warps may still be writing: " + _RACE,
    ("drop_fence", "bulk-store-release"): "the TMA store's global writes (async proxy) are not ordered before the "
                                          "flag's release: a CTA that acquires the flag may add to the old bytes",
    ("drop_fence", "acquire-async-fence"): "the flag's acquire is not ordered before the TMA reduce (async proxy): "
                                           "it may read y before the store the flag published",
    ("wg_fence", "wgmma-fence"): "without wgmma.fence the mma_async's reads of the accumulators are not ordered "
                                 "after the warpgroup's earlier accesses to those registers",
    ("wg_commit", "wgmma-pending"): "the mma_async are in no group: wgmma.wait_group does not wait for them, and "
                                    "the accumulators are read while the tensor core may still write them",
    ("wg_wait", "wgmma-pending"): "the accumulators are read before a wgmma.wait_group retires the group that "
                                  "writes them",
    ("wg_setmaxnreg", "setmaxnreg-budget"): "a .dec that raises or an .inc that lowers the count is undefined in "
                                            "the PTX ISA",
}


def memory_model_reason(operator, verdict, variant=None, base=None) -> str | None:
    """Why a rejected mutant breaks the PTX memory model (None: it does not, or not in a way a run can miss: a
    hang, an illegal instruction). An init count or byte count raised above what arrives is a hang, not a race."""
    if verdict.get("verdict") != "rejected":
        return None
    if operator in ("init_count", "tx") and not (isinstance(variant, int) and isinstance(base, int)
                                                 and variant < base):
        return None
    if operator == "wg_setmaxnreg" and "would" not in verdict.get("message", ""):
        return None                 # counts over the pool: the .inc waits forever, a hang every run shows
    return MEMORY_MODEL.get((operator, verdict.get("rule")))


def functional(row) -> bool:
    """An accepted mutant that computes something else with the protocol intact, not a protocol error: a loop_bound
    mutant whose output differs by whole tiles only (misplaced or missing, none torn), a coord_param mutant
    whose box moves by a whole number of 16-byte units (f32 moved 4 elements: a legal box over other elements),
    or a wg_desc mutant whose last K step reads the step before (a descriptor on a K step of the tile TMA wrote:
    a legal read of other elements, which only the kernel's intent tells from a GEMM's)."""
    if row["ptxdsl"]["verdict"] != "accepted" or row["gpu"] != "wrong data":
        return False
    detail = row.get("gpu_detail") or ""
    if row["operator"] == "coord_param":
        shift = row.get("shift_bytes")
        return isinstance(shift, int) and shift > 0 and shift % 16 == 0
    if row["operator"] == "wg_desc":
        return row["id"].endswith("-krepeat")      # another whole K step of the tile: a legal read of other elements
    return (row["operator"] == "loop_bound" and "torn" not in detail
            and ("misplaced" in detail or "missing" in detail))


def sanitizer_findings(row) -> list[str]:
    """'tool: finding' for each of compute-sanitizer's checkers that showed the mutant broken."""
    return [f"{tool}: {got}" for tool, got in (row.get("sanitizer") or {}).items() if is_finding(got)]


def summarise_gpu(rows) -> dict:
    """The campaign's verdict. A mutant is broken on the GPU when its run went wrong (BROKEN) or, having run
    correctly, compute-sanitizer's racecheck or synccheck showed it broken (`broken_by_sanitizer`); correct
    when it ran correctly and neither did."""
    by_gpu: dict = {}
    for r in rows:
        by_gpu[r["gpu"]] = by_gpu.get(r["gpu"], 0) + 1
    rejected = [r for r in rows if r["ptxdsl"]["verdict"] == "rejected"]
    by_sanitizer = [r for r in rows if r["gpu"] == "correct" and sanitizer_findings(r)]
    broken_accepted = [r for r in rows if (r["gpu"] in BROKEN or r in by_sanitizer)
                       and r["ptxdsl"]["verdict"] == "accepted"]
    correct = [r for r in rows if r["gpu"] == "correct" and r not in by_sanitizer]
    correct_rejected = [r for r in correct if r["ptxdsl"]["verdict"] == "rejected"]
    memory_model = [r["id"] for r in correct_rejected if r.get("memory_model")]
    false_positives = [r["id"] for r in correct_rejected if not r.get("memory_model")]
    return {"mutants": len(rows), "rejected_by_ptxdsl": len(rejected), "gpu": by_gpu,
            "broken_on_gpu_but_accepted": [r["id"] for r in broken_accepted if not functional(r)],
            "functional_not_protocol": [r["id"] for r in broken_accepted if functional(r)],
            "broken_by_sanitizer": {r["id"]: sanitizer_findings(r) for r in by_sanitizer},
            "sanitizer_checked": sum(1 for r in rows if r.get("sanitizer")),
            "correct_on_gpu_but_rejected": [r["id"] for r in correct_rejected],
            "memory_model_violations_not_observed": memory_model,
            "false_positives": false_positives,
            "false_positive_share_of_sample": round(len(false_positives) / max(1, len(rows)), 4),
            "correct_but_rejected_share_of_sample": round(len(correct_rejected) / max(1, len(rows)), 4),
            "correct_but_rejected_share_of_correct": round(len(correct_rejected) / max(1, len(correct)), 4),
            "unclassified": [r["id"] for r in rows if r["gpu"] in ("no result", "worker error", "build error")],
            "not_run": [r["id"] for r in rows if r["gpu"] == "not run"],
            "launch_rejected_but_launched": [r["id"] for r in rows if (r.get("with_launch_checks") or "")
                                             .startswith("reached the GPU")]}


def resummarise(path, reclassify=False) -> dict:
    """The summary of a mutants.json written earlier, with today's classification of the disagreements (each
    row's `memory_model` reason from today's MEMORY_MODEL); `reclassify` replaces each row's ptxdsl verdict by
    today's (the GPU's outcome stays the file's)."""
    data = json.loads(Path(path).read_text())
    by_id = {m.id: m for m in mutants()}
    rows = []
    for r in data["mutants"]:
        r = dict(r)
        m = by_id.get(r["id"])
        if m is not None:
            if reclassify:
                r["ptxdsl"] = classify(m)
            r["memory_model"] = memory_model_reason(m.operator, r["ptxdsl"], m.variant, m.base)
            r["shift_bytes"] = shift_bytes(m)
        rows.append(r)
    summary = summarise_gpu(rows)
    for key in ("wall_seconds", "device", "date"):
        if key in data.get("summary", {}):
            summary[key] = data["summary"][key]
    return summary


def _device_name() -> str:
    try:
        from ptxdsl.runtime import Device

        return Device(0).name
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tests/mutants.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpu")
    c.add_argument("--json")
    c.add_argument("--families", nargs="*", help="only these kernels (default: all)")
    g = sub.add_parser("gpu")
    g.add_argument("--sample", type=int, default=120)
    g.add_argument("--jobs", type=int, default=4)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", default=os.environ.get("OUT", "."))
    g.add_argument("--budget", type=float, default=210, help="seconds after which no new worker starts")
    g.add_argument("--sanitizer-budget", type=float, default=240,
                   help="seconds for the compute-sanitizer runs of the mutants that ran correctly (0: none)")
    g.add_argument("--families", nargs="*", help="only these kernels' mutants (default: all)")
    w = sub.add_parser("worker")
    w.add_argument("ids", nargs="+")
    z = sub.add_parser("sanitize")
    z.add_argument("ids", nargs="+")
    z.add_argument("--jobs", type=int, default=4)
    z.add_argument("--budget", type=float, default=400, help="seconds after which no new run starts")
    r = sub.add_parser("summarise")
    r.add_argument("file")
    r.add_argument("--reclassify", action="store_true", help="today's ptxdsl verdicts in place of the file's")
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        worker(a.ids)
        return 0
    if a.cmd == "sanitize":
        return sanitize_ids(a.ids, a.jobs, a.budget)
    if a.cmd == "summarise":
        print(json.dumps(resummarise(a.file, a.reclassify), indent=1))
        return 0
    if a.cmd == "cpu":
        s = cpu_campaign(a.json, a.families or None)["summary"]
        print(json.dumps(s, indent=1))
        return 0
    unknown = sorted(set(a.families or ()) - set(FAMILIES))
    if unknown:
        print(f"tests/mutants.py gpu: no such family: {', '.join(unknown)}", file=sys.stderr)
        return 2
    s = gpu_campaign(a.sample, a.jobs, a.out, a.seed, a.budget, a.sanitizer_budget, a.families or None)["summary"]
    print(json.dumps(s, indent=1))
    return 0 if not s["broken_on_gpu_but_accepted"] and not s["unclassified"] else 1


if __name__ == "__main__":
    sys.exit(main())
