"""A warp-specialised copy of a 2-D bf16 matrix, built with ptxdsl.pipeline.

Each CTA walks its share of the matrix's BOX tiles (ptxdsl.pipeline.persistent: tile = ctaid.x + i *
nctaid.x). Warp 0's elected lane is the producer: it waits for an empty ring stage, arms the stage's full
barrier with the tile's bytes and issues the TMA load. Warp 1's elected lane stores: it waits for the full
stage, issues the TMA store from it, commits the bulk group and, one store behind (StoreDrain), releases the
stage whose store has been read out of shared memory. No thread touches the data: it goes global -> shared ->
global by TMA.

The launch shape is the launcher's: TILES_PER_CTA tiles per CTA and at most CTAS_PER_SM CTAs on an SM. On the
H200 one tile per CTA, six CTAs per SM copied fastest (docs/performance.md: 4.30 TB/s, against 4.05 for a
persistent grid of one CTA per SM walking an 8-stage ring)."""
import numpy as np

import ptxdsl as px
from ptxdsl.pipeline import Ring, StoreDrain, launch_shape, persistent, tile_coords, tile_grid
from tile_common import random_bf16

BOX = (256, 16)           # (columns, rows) of a tile: 8 KiB of bf16
STAGES = 2
DEPTH = 1                 # stores in flight before a stage is released
TILES_PER_CTA = 1
CTAS_PER_SM = 6


def spec(rows, cols, box=BOX, address=0):
    """The tensor map of a rows x cols bf16 matrix read and written in `box` tiles."""
    return px.TensorMapSpec.tiled_for((rows, cols), "bf16", (box[1], box[0]), address=address)


def build(box=BOX, stages=STAGES, depth=DEPTH, name="pipe_copy"):
    tile_bytes = box[0] * box[1] * 2
    with px.kernel(name, reqntid=64) as k:
        src = k.param_tensormap("src", spec(4096, 4096, box))
        dst = k.param_tensormap("dst", spec(4096, 4096, box))
        ntiles = k.param("ntiles", px.u32)
        across = k.param("tiles_per_row", px.u32)
        ring = Ring(k, "ring", stages=stages, stage_bytes=tile_bytes)
        ring.init()
        with k.if_(k.setp("eq", k.warp_idx(), 0)):
            with k.elect_one():                              # the producer: TMA loads into the ring
                cur = ring.cursor()
                with persistent(k, ntiles) as tile:
                    ring.producer_acquire(cur)
                    ring.producer_arm(cur, tile_bytes)
                    xy = tile_coords(k, tile, across, src)        # the box of the map: (columns, rows)
                    k.cp_async_bulk_tensor(ring.buffer(cur), src, xy, mbar=ring.full(cur))
                    cur.advance()
        with k.else_():
            with k.elect_one():                              # the storer: TMA stores out of the ring
                cur = ring.cursor()
                drain = StoreDrain(ring, depth)
                with persistent(k, ntiles) as tile:
                    ring.consumer_wait(cur)
                    xy = tile_coords(k, tile, across, dst)
                    k.cp_async_bulk_tensor(dst, ring.buffer(cur), xy)
                    k.cp_async_bulk_commit_group()
                    drain.committed()
                    cur.advance()
                drain.finish()
    return k


KERNEL = build()


def launcher(prog, rows, cols, box=BOX, tiles_per_cta=TILES_PER_CTA, ctas_per_sm=CTAS_PER_SM, name="pipe_copy"):
    """A function (src_map, dst_map, stream=None) copying a rows x cols matrix: tiles_per_cta tiles per CTA
    (None: a persistent grid, one CTA per SM), at most ctas_per_sm CTAs per SM (None: as many as fit)."""
    across, ntiles = tile_grid(rows, cols, box, name)
    launch = prog[name]
    grid, shared = launch_shape(launch, ntiles, tiles_per_cta, ctas_per_sm)

    def run(src_map, dst_map, stream=None):
        launch(src_map, dst_map, ntiles, across, grid=grid, block=64, shared_bytes=shared, stream=stream)
    return run


def launches():
    """The launches run() makes, for the launch checks (`ptxdsl check` runs them; no GPU needed): one tile per
    CTA, and a persistent grid of 3 CTAs that laps the ring."""
    rows, cols = 1024, 2048
    across, ntiles = tile_grid(rows, cols, BOX)
    args = {"src": spec(rows, cols), "dst": spec(rows, cols), "ntiles": ntiles, "tiles_per_row": across}
    return [px.Launch(KERNEL, args, grid=-(-ntiles // TILES_PER_CTA)), px.Launch(KERNEL, args, grid=3)]


def run(device=None, kernel=None):
    """Copy a random 1024x2048 matrix, one tile per CTA and then on a persistent grid of 3 CTAs (each laps the
    ring many times); both copies must be bit-exact."""
    from ptxdsl.runtime import DeviceArray

    rows, cols = 1024, 2048
    a = random_bf16(np.random.default_rng(5), (rows, cols))
    prog = px.compile(kernel or KERNEL, device=device)
    src = DeviceArray.to_device(a)
    box = (BOX[1], BOX[0])
    verdicts = []
    for tiles in (TILES_PER_CTA, -(-(rows // BOX[1]) * (cols // BOX[0]) // 3)):
        out = DeviceArray.to_device(np.full_like(a, np.nan))
        launcher(prog, rows, cols, tiles_per_cta=tiles)(px.TensorMapSpec.from_array(src, box),
                                                          px.TensorMapSpec.from_array(out, box))
        same = out.to_host().view(np.uint16) == a.view(np.uint16)
        verdicts.append((bool(same.all()), f"{tiles} tile(s) per CTA: differing={int((~same).sum())}"))
    ok = all(v for v, _ in verdicts)
    return ok, f"pipe_copy: {rows}x{cols} bf16, bit-exact={ok}; " + "; ".join(m for _, m in verdicts)
