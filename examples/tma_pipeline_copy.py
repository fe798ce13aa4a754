"""A pipelined copy. Each CTA walks down one column of 64x64 bf16 tiles. Thread 0 keeps STAGES TMA loads
in flight in a ring of shared buffers; every thread copies each landed tile to global memory and then
releases its stage. Two mbarriers per stage: `full` completes when the tile's bytes have arrived, `empty`
when all THREADS threads have read the buffer. `stage` walks the ring and the phase bit flips each time it
wraps around. The loop comes in two parts: the steady state refills the stage it just drained with the
tile STAGES ahead; the drain consumes the last STAGES tiles."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from tile_common import THREADS, TILE, TILE_BYTES, random_bf16, tile_spec

ROWS, COLS = 512, 256
STAGES = 3
TILES = ROWS // TILE                                  # tiles per CTA: one column of the matrix

with px.kernel("tma_pipeline_copy", reqntid=THREADS) as k:
    src = k.param_tensormap("src", tile_spec(ROWS, COLS))
    out = k.param_ptr("out")
    pitch = k.param("pitch", px.u32)                  # bytes per output row
    ring = k.shared("ring", STAGES * TILE_BYTES, align=128)
    full = k.mbarrier("full", STAGES)
    empty = k.mbarrier("empty", STAGES)

    tid = k.mov(sreg.tid_x)
    is_t0 = k.setp("eq", tid, 0)
    x = k.mul(k.mov(sreg.ctaid_x), TILE)

    with k.if_(is_t0):
        with k.loop(0, STAGES) as s:
            k.mbarrier_init(k.mad(s, 8, k.mov(full)), 1)
            k.mbarrier_init(k.mad(s, 8, k.mov(empty)), THREADS)
        k.fence_mbarrier_init()
    k.bar_sync(0)

    # Prologue: one load in flight per stage.
    with k.if_(is_t0):
        with k.loop(0, STAGES) as s:
            k.mbarrier_arrive_expect_tx(k.mad(s, 8, k.mov(full)), TILE_BYTES, sem="release", scope="cta")
            k.cp_async_bulk_tensor(k.mad(s, TILE_BYTES, k.mov(ring)), src, (x, k.mul(s, TILE)),
                                   mbar=k.mad(s, 8, k.mov(full)))

    stage = k.reg(px.u32)
    k.mov(0, px.u32, out=stage)
    phase = k.reg(px.u32)
    k.mov(0, px.u32, out=phase)

    def copy_out(t, buf, regs=(None,) * 5):
        """Every thread copies its 16-byte chunks of tile t from `buf` to global memory. Returns the
        registers it wrote; passing them back as `regs` writes the same registers again."""
        chunk_r, row_r, col_r, vals_r, gbyte_r = regs
        with k.loop(0, TILE_BYTES // 16 // THREADS) as i:
            chunk = k.mad(i, THREADS, tid, out=chunk_r)           # 16-byte chunk of the tile
            row = k.shr(chunk, 3, out=row_r)                      # 8 chunks per 128-byte row
            col = k.and_(chunk, 7, out=col_r)
            vals = k.ld(px.b32, k.add(buf, k.shl(chunk, 4)), space="shared::cta", vec=4, out=vals_r)
            gbyte = k.mad(k.mad(t, TILE, row), pitch, k.add(k.shl(x, 1), k.shl(col, 4)), out=gbyte_r)
            k.st(px.b32, k.add(out, k.cvt(px.u64, gbyte)), vals)
        return chunk, row, col, vals, gbyte

    def next_stage():
        """stage = stage + 1; on wrapping to 0 the phase bit flips."""
        k.add(stage, 1, out=stage)
        with k.if_(k.setp("eq", stage, STAGES)):
            k.mov(0, px.u32, out=stage)
            k.xor(phase, 1, out=phase)

    # Steady state: consume tile t, then refill its stage with tile t + STAGES.
    with k.loop(0, TILES - STAGES) as t:
        full_s = k.mad(stage, 8, k.mov(full))
        empty_s = k.mad(stage, 8, k.mov(empty))
        buf = k.mad(stage, TILE_BYTES, k.mov(ring))
        k.mbarrier_wait(full_s, parity=phase, sem="acquire", scope="cta")
        regs = copy_out(t, buf)
        k.mbarrier_arrive(empty_s, sem="release", scope="cta")
        with k.if_(is_t0):
            k.mbarrier_wait(empty_s, parity=phase, sem="acquire", scope="cta")   # every thread has read the stage
            k.mbarrier_arrive_expect_tx(full_s, TILE_BYTES, sem="release", scope="cta")
            k.cp_async_bulk_tensor(buf, src, (x, k.mul(k.add(t, STAGES), TILE)), mbar=full_s)
        next_stage()
    # Drain: the last STAGES tiles are already in flight (full_s, buf and the copy's registers are reused).
    with k.loop(TILES - STAGES, TILES) as t:
        k.mad(stage, 8, k.mov(full), out=full_s)
        k.mad(stage, TILE_BYTES, k.mov(ring), out=buf)
        k.mbarrier_wait(full_s, parity=phase, sem="acquire", scope="cta")
        copy_out(t, buf, regs)
        next_stage()

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {"pitch": COLS * 2}, grid=(COLS // TILE,))]


def run(device=None, kernel=None):
    """Copy a random matrix through the pipeline and check the copy is bit-exact. `kernel` replaces the
    kernel (the same kernel built another way, e.g. from its .ptxd form)."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(3)
    a = random_bf16(rng, (ROWS, COLS))
    prog = px.compile(kernel or k, device=device)
    src_buf = DeviceArray.to_device(a)
    out_buf = DeviceArray.to_device(np.full_like(a, np.nan))
    prog["tma_pipeline_copy"](px.TensorMapSpec.from_array(src_buf, (TILE, TILE)), out_buf, COLS * 2,
                              grid=(COLS // TILE,), block=THREADS)
    same = out_buf.to_host().view(np.uint16) == a.view(np.uint16)
    ok = bool(same.all())
    return ok, f"tma_pipeline_copy: {ROWS}x{COLS} bf16, {STAGES} stages, bit-exact={ok} differing={int((~same).sum())}"
