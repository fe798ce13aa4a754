"""out = x.T for a bf16 matrix, through 128-byte-swizzled shared memory, built with ptxdsl.pipeline.

Each ring stage holds a 64x64 input tile (TMA load, 128B swizzle) and the 64x64 output tile. Warp 0's
elected lane loads. Warps 1-4 transpose: ldmatrix.trans reads four 8x8 blocks of the input tile transposed
into registers and stmatrix writes them to the mirrored block positions of the output tile (each lane names
one 16-byte row, so the swizzle is one xor); a fence.proxy.async makes the writes visible to TMA, the four
warps meet at bar.sync 1, and thread 32 stores the output tile with TMA at the mirrored coordinates and
releases the stage `depth` stores behind (StoreDrain).

The launch shape is the launcher's: TILES_PER_CTA tiles per CTA (ptxdsl.pipeline.persistent). On the H200 one
tile per CTA, with a one-stage ring, ran fastest (docs/performance.md)."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.pipeline import Ring, StoreDrain, launch_shape, persistent, tile_coords, tile_grid
from tile_common import random_bf16

T = 64                      # tile side: 64 bf16 = one 128-byte swizzle span
TILE = T * T * 2
STAGES = 1
DEPTH = 0
TILES_PER_CTA = 1
CONSUMER_WARPS = 4
THREADS = 32 * (1 + CONSUMER_WARPS)


def spec(rows, cols):
    return px.TensorMapSpec.tiled_for((rows, cols), "bf16", (T, T), swizzle="128B")


def swizzled(k, base, row, chunk):
    """The address of 16-byte chunk `chunk` of row `row` in a 128B-swizzled 64x64 bf16 tile at `base`:
    base + row*128 + ((chunk ^ row % 8) * 16)."""
    return k.add(base, k.add(k.shl(row, 7), k.shl(k.xor(chunk, k.and_(row, 7)), 4)))


def build(stages=STAGES, depth=DEPTH, name="pipe_transpose"):
    with px.kernel(name, reqntid=THREADS) as k:
        xmap = k.param_tensormap("x", spec(4096, 4096))
        omap = k.param_tensormap("out", spec(4096, 4096))
        ntiles = k.param("ntiles", px.u32)
        across = k.param("tiles_per_row", px.u32)           # tiles across x's rows
        ring = Ring(k, "ring", stages=stages, stage_bytes=2 * TILE)
        ring.init()
        tid = k.tid_x()
        with k.if_(k.setp("eq", k.shr(tid, 5), 0)):
            with k.elect_one():                              # the producer: one input tile per stage
                cur = ring.cursor()
                with persistent(k, ntiles) as t:
                    ring.producer_acquire(cur)
                    ring.producer_arm(cur, TILE)
                    k.cp_async_bulk_tensor(ring.buffer(cur), xmap, tile_coords(k, t, across, (T, T)),
                                           mbar=ring.full(cur))
                    cur.advance()
        with k.else_():                                      # the transposers: 128 threads
            me = k.sub(tid, 32)
            lane = k.mov(sreg.laneid)
            i, m = k.and_(lane, 7), k.shr(lane, 3)           # the row this lane names, of matrix m
            is_storer = k.setp("eq", me, 0)
            cur = ring.cursor()
            drain = StoreDrain(ring, depth)
            with persistent(k, ntiles) as t:
                ring.consumer_wait(cur)
                src, dst = ring.buffer(cur), ring.buffer(cur, TILE)
                with k.loop(0, 4) as q:                      # 4 ldmatrix.x4 per warp: 16 of the 64 blocks
                    b = k.add(k.shl(k.add(k.shl(k.shr(me, 5), 2), q), 2), m)   # block (warp*4 + q)*4 + m
                    br, bc = k.shr(b, 3), k.and_(b, 7)
                    regs = k.ldmatrix(swizzled(k, src, k.add(k.shl(br, 3), i), bc), num=4, trans=True)
                    k.stmatrix(swizzled(k, dst, k.add(k.shl(bc, 3), i), br), regs)
                k.fence_proxy_async("shared::cta")          # the output tile, visible to the TMA store
                k.bar_sync(1, 32 * CONSUMER_WARPS)
                with k.if_(is_storer):
                    col0, row0 = tile_coords(k, t, across, (T, T))
                    k.cp_async_bulk_tensor(omap, dst, (row0, col0))
                    k.cp_async_bulk_commit_group()
                    drain.committed()
                cur.advance()
            with k.if_(is_storer):
                drain.finish()
    return k


KERNEL = build()


def launcher(prog, rows, cols, tiles_per_cta=TILES_PER_CTA, name="pipe_transpose"):
    """A function (x_map, out_map, stream=None) computing out = x.T for a rows x cols x: tiles_per_cta tiles
    per CTA (None: a persistent grid, one CTA per SM)."""
    across, ntiles = tile_grid(rows, cols, (T, T), name)
    launch = prog[name]
    grid, _ = launch_shape(launch, ntiles, tiles_per_cta)

    def run(x_map, out_map, stream=None):
        launch(x_map, out_map, ntiles, across, grid=grid, block=THREADS, stream=stream)
    return run


def launches():
    """The launches run() makes, for the launch checks (`ptxdsl check` runs them; no GPU needed): one tile per
    CTA, and a 3-stage ring on a persistent grid of 3 CTAs."""
    rows, cols = 512, 1024
    across, ntiles = tile_grid(rows, cols, (T, T))
    args = {"ntiles": ntiles, "tiles_per_row": across}
    return [px.Launch(KERNEL, args, grid=-(-ntiles // TILES_PER_CTA)),
            px.Launch(build(stages=3, depth=1), args, grid=3, note="3 stages")]


def run(device=None, kernel=None):
    """Transpose a random 512x1024 matrix, one tile per CTA, and again with a 3-stage ring on a persistent grid
    of 3 CTAs (each laps the ring many times); both must be bit-exact."""
    from ptxdsl.runtime import DeviceArray

    rows, cols = 512, 1024
    x = random_bf16(np.random.default_rng(13), (rows, cols))
    xd = DeviceArray.to_device(x)
    verdicts = []
    for prog, tiles in ((px.compile(kernel or KERNEL, device=device), TILES_PER_CTA),
                        (px.compile(build(stages=3, depth=1), device=device), -(-(rows // T) * (cols // T) // 3))):
        od = DeviceArray.to_device(np.full((cols, rows), np.nan, x.dtype))
        launcher(prog, rows, cols, tiles_per_cta=tiles)(px.TensorMapSpec.from_array(xd, (T, T), swizzle="128B"),
                                                         px.TensorMapSpec.from_array(od, (T, T), swizzle="128B"))
        same = od.to_host().view(np.uint16) == x.T.view(np.uint16)
        verdicts.append((bool(same.all()), f"{tiles} tile(s) per CTA: differing={int((~same).sum())}"))
    ok = all(v for v, _ in verdicts)
    return ok, f"pipe_transpose: {rows}x{cols} bf16, bit-exact={ok}; " + "; ".join(m for _, m in verdicts)
