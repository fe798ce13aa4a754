"""Row gather (an embedding lookup, a MoE token gather): out[i] = table[index[i]] for rows of ROW bytes,
built with ptxdsl.pipeline.

Each ring stage holds ROWS_PER_STAGE gathered rows. The producer is all of warp 0: for each of its tiles,
lane 0 arms the stage's full barrier with the stage's bytes, then lane j reads index[tile * G + j] (s64, as
torch's index_select takes it) and issues one bulk copy (cp.async.bulk, no tensor map) of that table row into
row j of the stage, on the full barrier. Warp 1's elected lane stores the whole stage to its place in `out`
with one bulk copy and releases it one store behind (StoreDrain).

Each CTA gathers tiles_per_cta(row) stages' worth of rows (ptxdsl.pipeline.persistent): one stage for rows of
512 bytes or more, 64 KiB for smaller ones, whose stages fill slower. On the H200 that, with the small rings
below (several CTAs share an SM), ran fastest (docs/performance.md)."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.pipeline import Ring, StoreDrain, launch_shape, persistent

ROW = 1024                 # bytes per row (a multiple of 16)
STAGE = 16384              # bytes per ring stage, at most


def rows_per_stage(row):
    """Rows per ring stage: 16 KiB stages, at most 32 rows (one per producer lane), at least one row."""
    return max(1, min(32, STAGE // row))


def ring_bytes_for(row):
    """Two stages of 16 KiB or more; 24 KiB of smaller stages."""
    stage = rows_per_stage(row) * row
    return 2 * stage if stage >= STAGE else max(2 * stage, 24576 // stage * stage)


def tiles_per_cta(row):
    """Stages per CTA: one of 16 KiB or more; 64 KiB of smaller ones."""
    stage = rows_per_stage(row) * row
    return 1 if stage >= STAGE else max(1, 65536 // stage)


def build(row=ROW, depth=1, ring_bytes=None, name="pipe_gather"):
    """The gather kernel for rows of `row` bytes (ring_bytes: ring_bytes_for(row))."""
    ring_bytes = ring_bytes or ring_bytes_for(row)
    if row % 16 or not 16 <= row <= ring_bytes // 2:
        raise px.DSLError(f"pipe_gather: row={row} bytes, expected a multiple of 16 from 16 to {ring_bytes // 2}")
    g = rows_per_stage(row)
    stages = min(32, ring_bytes // (g * row))
    with px.kernel(name, reqntid=64) as k:
        table = k.param_ptr("table")
        index = k.param_ptr("index")
        out = k.param_ptr("out")
        ntiles = k.param("ntiles", px.u32)
        ring = Ring(k, "ring", stages=stages, stage_bytes=g * row, align=128)
        ring.init()
        lane = k.mov(sreg.laneid)
        with k.if_(k.setp("eq", k.warp_idx(), 0)):          # the producer warp
            cur = ring.cursor()
            mine = k.setp("lt", lane, g)                      # the lanes that copy a row
            with persistent(k, ntiles) as tile:
                r = k.reg(px.u64)
                with k.if_(mine):                             # read the row's index while the stage drains
                    k.ld(px.u64, k.add(index, k.mul(k.mad(tile, g, lane), 8, mode="wide")), out=r)
                ring.producer_acquire(cur)
                with k.if_(k.setp("eq", lane, 0)):
                    ring.producer_arm(cur, g * row)
                k.bar_warp_sync()                             # the arm comes before any row's bytes
                with k.if_(mine):
                    k.cp_async_bulk(ring.buffer(cur) if g == 1 else k.mad(lane, row, ring.buffer(cur)),
                                    k.mad(r, row, table), row, dst_space="shared::cluster", src_space="global",
                                    mbar=ring.full(cur))
                cur.advance()
        with k.else_():
            with k.elect_one():                               # the storer: one bulk store per stage
                cur = ring.cursor()
                drain = StoreDrain(ring, depth)
                with persistent(k, ntiles) as tile:
                    ring.consumer_wait(cur)
                    dst = k.add(out, k.mul(tile, g * row, mode="wide"))
                    k.cp_async_bulk(dst, ring.buffer(cur), g * row, dst_space="global", src_space="shared::cta")
                    k.cp_async_bulk_commit_group()
                    drain.committed()
                    cur.advance()
                drain.finish()
    return k


KERNEL = build()


def launcher(prog, n, row=ROW, tiles=None, name="pipe_gather"):
    """A function (table, index, out, stream=None) gathering `n` rows of `row` bytes, `tiles` stages per CTA
    (default tiles_per_cta(row); 0: a persistent grid, one CTA per SM)."""
    g = rows_per_stage(row)
    if n % g:
        raise ValueError(f"pipe_gather: {n} rows are not a whole number of {g}-row stages")
    ntiles = n // g
    tiles = tiles_per_cta(row) if tiles is None else tiles
    launch = prog[name]
    grid, _ = launch_shape(launch, ntiles, None if tiles == 0 else tiles)

    def run(table, index, out, stream=None):
        launch(table, index, out, ntiles, grid=grid, block=64, stream=stream)
    return run


def launches():
    """The launches run() makes, for the launch checks (`ptxdsl check` runs them; no GPU needed): 4096 rows of
    ROW and of 128 bytes, with the default stages per CTA and on a persistent grid of 3 CTAs."""
    out, n = [], 4096
    for row, k in ((ROW, KERNEL), (128, build(128))):
        ntiles = n // rows_per_stage(row)
        for grid in (-(-ntiles // tiles_per_cta(row)), 3):
            out.append(px.Launch(k, {"ntiles": ntiles}, grid=grid, block=64, note=f"{row}-byte rows"))
    return out


def run(device=None, kernel=None):
    """Gather 4096 random rows of a 2048-row table (rows of ROW bytes, and of 128 bytes), each with the default
    launch and on a persistent grid of 3 CTAs (each laps the ring many times); every byte is checked."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(7)
    n = 4096
    index = rng.integers(0, 2048, n).astype(np.int64)
    ix = DeviceArray.to_device(index)
    verdicts = []
    for row, k in ((ROW, kernel or KERNEL), (128, build(128))):
        table = rng.integers(0, 256, (2048, row), dtype=np.uint8)
        prog = px.compile(k, device=device)
        t = DeviceArray.to_device(table)
        for tiles in (None, -(-n // rows_per_stage(row) // 3)):
            out = DeviceArray.to_device(np.zeros((n, row), np.uint8))
            launcher(prog, n, row=row, tiles=tiles)(t, ix, out)
            same = out.to_host() == table[index]
            verdicts.append((bool(same.all()), f"{row} B rows, {tiles or tiles_per_cta(row)} stage(s) per CTA: "
                                               f"differing={int((~same).sum())}"))
    ok = all(v for v, _ in verdicts)
    return ok, f"pipe_gather: {n} rows, bit-exact={ok}; " + "; ".join(m for _, m in verdicts)
