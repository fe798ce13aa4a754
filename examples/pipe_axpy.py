"""y = a*x + y on bf16 matrices (torch's y.add_(x, alpha=a)), built with ptxdsl.pipeline.

Each ring stage holds a BOX tile of x and the same tile of y. Warp 0's elected lane is the producer: it arms
the stage's full barrier for both tiles and issues the two TMA loads. Warps 1-4 consume: each thread takes
16-byte chunks of the stage (8 elements of x and of y), computes fma.rn.f32(a, x, y) per element (bf16 to
f32 is a shift), rounds each pair back with cvt.rn.bf16x2.f32 and stores the 16 bytes straight to y in global
memory; then each warp's lane 0 releases the stage for its warp, after bar.warp.sync (4 arrivals free it).

The launch shape is the launcher's: TILES_PER_CTA tiles per CTA (ptxdsl.pipeline.persistent) and at most
CTAS_PER_SM CTAs on an SM. On the H200 one tile per CTA, four CTAs per SM ran fastest (docs/performance.md)."""
import numpy as np

import ptxdsl as px
from ptxdsl.pipeline import Ring, launch_shape, persistent, tile_coords, tile_grid
from tile_common import random_bf16

BOX = (256, 16)                   # (columns, rows): 8 KiB of bf16 per operand
STAGES = 2
TILES_PER_CTA = 1
CTAS_PER_SM = 4
CONSUMER_WARPS = 4
THREADS = 32 * (1 + CONSUMER_WARPS)


def spec(rows, cols, box=BOX):
    return px.TensorMapSpec.tiled_for((rows, cols), "bf16", (box[1], box[0]))


def build(box=BOX, stages=STAGES, warps=CONSUMER_WARPS, name="pipe_axpy"):
    tile = box[0] * box[1] * 2
    chunks = tile // 16                                   # 16-byte chunks per operand tile
    per_row = box[0] * 2 // 16                            # chunks per tile row
    consumers = 32 * warps
    if chunks % consumers:
        raise px.DSLError(f"pipe_axpy: box={box} has {chunks} chunks, not a multiple of {consumers} threads")
    with px.kernel(name, reqntid=32 + consumers) as k:
        xmap = k.param_tensormap("x", spec(4096, 4096, box))
        ymap = k.param_tensormap("y", spec(4096, 4096, box))
        y = k.param_ptr("y_out")                          # y's global address (the same memory as ymap's)
        a = k.param("a", px.f32)
        pitch = k.param("pitch", px.u32)                  # bytes per row of y
        ntiles = k.param("ntiles", px.u32)
        across = k.param("tiles_per_row", px.u32)
        ring = Ring(k, "ring", stages=stages, stage_bytes=2 * tile, consumers=warps)
        ring.init()
        warp = k.warp_idx()
        with k.if_(k.setp("eq", warp, 0)):
            with k.elect_one():                           # the producer: x and y tiles into one stage
                cur = ring.cursor()
                with persistent(k, ntiles) as t:
                    ring.producer_acquire(cur)
                    ring.producer_arm(cur, 2 * tile)
                    xy = tile_coords(k, t, across, box)
                    k.cp_async_bulk_tensor(ring.buffer(cur), xmap, xy, mbar=ring.full(cur))
                    k.cp_async_bulk_tensor(ring.buffer(cur, tile), ymap, xy, mbar=ring.full(cur))
                    cur.advance()
        with k.else_():                                   # the consumers: 128 threads compute and store
            me = k.sub(k.tid_x(), 32)
            cur = ring.cursor()
            with persistent(k, ntiles) as t:
                col0, row0 = tile_coords(k, t, across, box)
                corner = k.add(y, k.cvt(px.u64, k.mad(row0, pitch, k.shl(col0, 1))))
                ring.consumer_wait(cur)
                buf = ring.buffer(cur)
                with k.loop(0, chunks // consumers) as j:
                    c = k.mad(j, consumers, me)
                    off = k.shl(c, 4)
                    xs = k.ld(px.b32, k.add(buf, off), space="shared::cta", vec=4)
                    ys = k.ld(px.b32, k.add(buf, k.add(off, tile)), space="shared::cta", vec=4)
                    res = tuple(axpy_bf16x2(k, a, xw, yw) for xw, yw in zip(xs, ys))
                    row, col = k.div(c, per_row), k.rem(c, per_row)
                    gaddr = k.add(corner, k.cvt(px.u64, k.mad(row, pitch, k.shl(col, 4))))
                    k.st(px.b32, gaddr, res)
                k.bar_warp_sync()                         # the warp's reads are done: one arrival for it
                with k.if_(k.setp("eq", k.and_(me, 31), 0)):
                    ring.consumer_release(cur)
                cur.advance()
    return k


def axpy_bf16x2(k, a, xw, yw):
    """Two bf16 lanes of a*x + y: each half widened to f32 (a shift or a mask), fma.rn.f32, then
    cvt.rn.bf16x2.f32 packs the pair back (round to nearest even, once)."""
    hi = k.fma(a, k.mov(k.and_(xw, 0xFFFF0000), px.f32), k.mov(k.and_(yw, 0xFFFF0000), px.f32))
    lo = k.fma(a, k.mov(k.shl(xw, 16), px.f32), k.mov(k.shl(yw, 16), px.f32))
    return k.cvt("bf16x2", hi, lo)


KERNEL = build()


def launcher(prog, rows, cols, box=BOX, tiles_per_cta=TILES_PER_CTA, ctas_per_sm=CTAS_PER_SM,
             warps=CONSUMER_WARPS, name="pipe_axpy"):
    """A function (a, x_map, y_map, y, stream=None) computing y = a*x + y on a rows x cols matrix:
    tiles_per_cta tiles per CTA (None: a persistent grid, one CTA per SM), at most ctas_per_sm CTAs per SM."""
    across, ntiles = tile_grid(rows, cols, box, name)
    launch = prog[name]
    grid, shared = launch_shape(launch, ntiles, tiles_per_cta, ctas_per_sm)

    def run(a, x_map, y_map, y, stream=None):
        launch(x_map, y_map, y, a, cols * 2, ntiles, across, grid=grid, block=32 * (1 + warps),
               shared_bytes=shared, stream=stream)
    return run


def reference(a, x, y):
    """numpy's a*x + y as the kernel rounds it: fma.rn.f32 then round to nearest even bf16. a*x is exact in
    f64 (24 + 8 significant bits); the f64 sum rounded to f32 is the fma's one rounding except where the f64
    sum lands exactly on an f32 tie (double rounding), which random data practically never shows."""
    import ml_dtypes

    exact = np.float64(np.float32(a)) * x.astype(np.float64) + y.astype(np.float64)
    return exact.astype(np.float32).astype(ml_dtypes.bfloat16)


def launches():
    """The launches run() makes, for the launch checks (`ptxdsl check` runs them; no GPU needed): one tile per
    CTA, and a persistent grid of 3 CTAs that laps the ring."""
    rows, cols = 512, 1024
    across, ntiles = tile_grid(rows, cols, BOX)
    args = {"x": spec(rows, cols), "y": spec(rows, cols), "a": 0.75, "pitch": cols * 2, "ntiles": ntiles,
            "tiles_per_row": across}
    block = 32 * (1 + CONSUMER_WARPS)
    return [px.Launch(KERNEL, args, grid=-(-ntiles // TILES_PER_CTA), block=block),
            px.Launch(KERNEL, args, grid=3, block=block)]


def run(device=None, kernel=None):
    """y = 0.75*x + y on a 512x1024 matrix, one tile per CTA and then on a persistent grid of 3 CTAs (each laps
    the ring many times), each checked bit for bit against `reference`."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(11)
    rows, cols, a = 512, 1024, 0.75
    x, y = random_bf16(rng, (rows, cols)), random_bf16(rng, (rows, cols))
    want = reference(a, x, y).view(np.uint16)
    prog = px.compile(kernel or KERNEL, device=device)
    xd = DeviceArray.to_device(x)
    box = (BOX[1], BOX[0])
    verdicts = []
    for tiles in (TILES_PER_CTA, -(-(rows // BOX[1]) * (cols // BOX[0]) // 3)):
        yd = DeviceArray.to_device(y)
        launcher(prog, rows, cols, tiles_per_cta=tiles)(a, px.TensorMapSpec.from_array(xd, box),
                                                         px.TensorMapSpec.from_array(yd, box), yd)
        got = yd.to_host().view(np.uint16)
        verdicts.append((bool((got == want).all()), f"{tiles} tile(s) per CTA: differing={int((got != want).sum())}"))
    ok = all(v for v, _ in verdicts)
    return ok, f"pipe_axpy: {rows}x{cols} bf16, bit-exact={ok}; " + "; ".join(m for _, m in verdicts)
