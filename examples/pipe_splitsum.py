"""Split accumulation: y = sum over s of x[s] for f32 x of shape (S, M, N), built with ptxdsl.pipeline; the
CTAs that share an output tile add their partial sums into it with cp.reduce.async.bulk.tensor .add.

The S splits are dealt out in GROUPS groups; CTA (tile, group) streams its group's S / GROUPS tiles of x through
the ring (warp 0's elected lane loads them, each through the map of x viewed as an (S*M, N) matrix), and warps
1-4 add them up in registers, 32 f32 per thread. The partial sum goes to an output buffer in shared memory
(st.shared, then fence.proxy.async so that TMA sees it); after bar.sync 1 thread 32 reduces it into y with one
TMA reduce (add) and waits for the read. With GROUPS = 1 each tile has one CTA, which stores instead (y need
not be zeroed first, and the sum is in split order, bit for bit numpy's); with more, y starts at zero (or at
what it holds: y += sum(x)) and the order of the groups' additions is the L2's.

combine="ordered" needs no zeroed y: group 0 stores its tile's sum and publishes the tile's flag
(ptxdsl.pipeline.Flags: wait_group 0, fence.proxy.async.global, st.release.gpu), and the other groups wait for
the flag (ld.acquire.gpu in a loop, then fence.proxy.async.global) before they add theirs with the TMA reduce.
Group g of a tile runs `lag` tiles' worth of CTAs after group 0 (a higher ctaid: the CTA it waits for has
started), close enough that the stored tile is still in L2 when the add reads it: by default three quarters of a wave
of the CTAs the device runs at once, so that an adder starts about when the CTA that stores its tile ends."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.pipeline import Flags, Ring, tile_coords, tile_grid

BOX = (128, 32)                 # (columns, rows) of f32: 16 KiB
TILE = BOX[0] * BOX[1] * 4
STAGES = 4
CONSUMER_WARPS = 4
THREADS = 32 * (1 + CONSUMER_WARPS)


def spec(rows, cols):
    return px.TensorMapSpec.tiled_for((rows, cols), "f32", (BOX[1], BOX[0]))


def build(combine="add", stages=STAGES, name="pipe_splitsum"):
    """The kernel. combine: how the CTAs of an output tile put their sums into y: "add" (TMA reduce add into y),
    "store" (one group, a TMA store) or "ordered" (group 0 stores, the others wait for its flag and add)."""
    if combine not in ("add", "store", "ordered"):
        raise px.DSLError(f"pipe_splitsum: combine={combine!r}, expected 'add', 'store' or 'ordered'")
    consumers = 32 * CONSUMER_WARPS
    per_thread = TILE // 16 // consumers                  # 16-byte chunks of the tile each thread adds up
    with px.kernel(name, reqntid=THREADS) as k:
        xmap = k.param_tensormap("x", spec(4096, 4096))   # x as an (S*M, N) matrix
        ymap = k.param_tensormap("y", spec(4096, 4096))
        m = k.param("m", px.u32)                          # rows per split
        per_group = k.param("splits_per_group", px.u32)
        groups = k.param("groups", px.u32)
        across = k.param("tiles_per_row", px.u32)
        if combine == "ordered":
            ntiles, lag = k.param("ntiles", px.u32), k.param("lag", px.u32)
            flags = Flags(k, "tile_flag", k.param_ptr("flags"))
            epoch = k.param("epoch", px.u32)              # this launch's flag value: 1, 2, 3...
        ring = Ring(k, "ring", stages=stages, stage_bytes=TILE, consumers=CONSUMER_WARPS)
        out = k.shared("out", TILE, align=1024, dynamic=True)
        ring.init()
        cta = k.mov(sreg.ctaid_x)
        tile, group = k.div(cta, groups), k.rem(cta, groups)
        if combine == "ordered":                          # group g works `lag` tiles behind group 0
            tile = k.sub(tile, k.mul(group, lag))
            with k.if_(k.setp("ge", tile, ntiles)):       # before the first tile or past the last: nothing to do
                k.exit()
        col0, row0 = tile_coords(k, tile, across, ymap)  # the box of y's map: (columns, rows)
        first = k.mul(group, per_group)                   # this CTA's first split
        with k.if_(k.setp("eq", k.warp_idx(), 0)):
            with k.elect_one():                           # the producer: one tile of each split of the group
                cur = ring.cursor()
                with k.loop(0, per_group) as s:
                    ring.producer_acquire(cur)
                    ring.producer_arm(cur, TILE)
                    row = k.mad(k.add(first, s), m, row0)
                    k.cp_async_bulk_tensor(ring.buffer(cur), xmap, (col0, row), mbar=ring.full(cur))
                    cur.advance()
        with k.else_():                                   # the adders: 128 threads, 32 f32 each
            me = k.sub(k.tid_x(), 32)
            offs = [k.shl(k.add(me, i * consumers), 4) for i in range(per_thread)]
            acc = [k.mov(0.0, px.f32, out=k.reg(px.f32)) for _ in range(4 * per_thread)]
            cur = ring.cursor()
            with k.loop(0, per_group):
                ring.consumer_wait(cur)
                buf = ring.buffer(cur)
                for i, off in enumerate(offs):
                    vals = k.ld(px.f32, k.add(buf, off), space="shared::cta", vec=4)
                    for j, v in enumerate(vals):
                        k.add(acc[4 * i + j], v, out=acc[4 * i + j])
                k.bar_warp_sync()                         # the warp's reads are done: one arrival for it
                with k.if_(k.setp("eq", k.and_(me, 31), 0)):
                    ring.consumer_release(cur)
                cur.advance()
            base = k.mov(out)
            for i, off in enumerate(offs):
                k.st(px.f32, k.add(base, off), tuple(acc[4 * i:4 * i + 4]), space="shared::cta")
            k.fence_proxy_async("shared::cta")            # the partial sums, visible to the TMA unit
            k.bar_sync(1, consumers)
            with k.if_(k.setp("eq", me, 0)):
                if combine == "add":
                    k.cp_reduce_async_bulk_tensor("add", ymap, out, (col0, row0))
                elif combine == "store":
                    k.cp_async_bulk_tensor(ymap, out, (col0, row0))
                else:
                    with k.if_(k.setp("eq", group, 0)):   # the first sum: stored, then the tile's flag published
                        k.cp_async_bulk_tensor(ymap, out, (col0, row0))
                        k.cp_async_bulk_commit_group()
                        k.cp_async_bulk_wait_group(0)     # the store's writes are done...
                        k.fence_proxy_async("global")     # ...and ordered before the generic release
                        flags.publish(tile, epoch)
                    with k.else_():                       # the others: added once the stored sum is there
                        flags.wait(tile, epoch)
                        k.fence_proxy_async("global")     # the acquire, before the TMA reduce reads y
                        k.cp_reduce_async_bulk_tensor("add", ymap, out, (col0, row0))
                k.cp_async_bulk_commit_group()
                k.cp_async_bulk_wait_group_read(0)
    return k


KERNEL = build()
ORDERED = build(combine="ordered", name="pipe_splitsum_ordered")


def launcher(prog, splits, m, n, groups, name="pipe_splitsum", lag=None):
    """A function (x_map, y_map, stream=None) adding the `splits` (m, n) slices of x into y, `groups` CTAs
    per output tile (a divisor of splits; 1 with a kernel built with combine="store").

    A kernel built with combine="ordered" gets its flags here (a u32 per output tile, zeroed once) and a new
    epoch each launch; the launches of one launcher share the flags, so they must not overlap (one stream). `lag`:
    the tiles between group 0 of a tile and the next group's CTA for it (None: three quarters of the CTAs the
    device runs at once, over the groups: on the H200, 99 tiles with two groups, the best of sweeps from 0 to
    1056 tiles)."""
    if splits % groups:
        raise ValueError(f"pipe_splitsum: {splits} splits in {groups} groups: groups must divide the splits")
    across, ntiles = tile_grid(m, n, BOX, name)
    launch = prog[name]
    if "epoch" not in [p.name for p in launch.params]:
        def run(x_map, y_map, stream=None):
            launch(x_map, y_map, m, splits // groups, groups, across, grid=ntiles * groups, block=THREADS,
                   stream=stream)
        return run

    from ptxdsl.runtime import DeviceArray

    if lag is None:
        lag = 3 * launch.max_active_ctas(THREADS) // (4 * groups)
    flags = DeviceArray.zeros((ntiles,), np.uint32)
    last = [0]                                            # the epoch of the last launch
    grid = (ntiles + (groups - 1) * lag) * groups

    def run_ordered(x_map, y_map, stream=None):
        if last[0] == 0xFFFFFFFF:                         # 2**32 - 1 launches: start again over zeroed flags
            flags.fill_bytes(0)
            last[0] = 0
        last[0] += 1
        launch(x_map, y_map, m, splits // groups, groups, across, ntiles, lag, flags, last[0], grid=grid,
               block=THREADS, stream=stream)
    return run_ordered


def launches():
    """The launches run() makes, for the launch checks (`ptxdsl check` runs them; no GPU needed): x of shape
    (8, 256, 512) in 4 groups added, in one group stored, and in 4 ordered groups 5 tiles apart."""
    s, m, n = 8, 256, 512
    across, ntiles = tile_grid(m, n, BOX)
    out = []
    for groups, k in ((4, KERNEL), (1, build(combine="store")), (4, ORDERED)):
        args = {"x": spec(s * m, n), "y": spec(m, n), "m": m, "splits_per_group": s // groups, "groups": groups,
                "tiles_per_row": across}
        grid = ntiles * groups
        if k is ORDERED:
            lag = 5
            args.update(ntiles=ntiles, lag=lag, epoch=1)
            grid = (ntiles + (groups - 1) * lag) * groups
        out.append(px.Launch(k, args, grid=grid, block=THREADS))
    return out


def run(device=None, kernel=None):
    """y = sum(x, 0) for x of shape (8, 256, 512): in 4 groups added into a zeroed y (within f32 rounding of
    numpy's f64 sum), in one group stored (bit for bit numpy's float32 sum in split order), and in 4 ordered groups
    into a y full of NaN, launched three times (within f32 rounding)."""
    from ptxdsl.runtime import DeviceArray

    s, m, n = 8, 256, 512
    x = np.random.default_rng(19).standard_normal((s, m, n), dtype=np.float32)
    xd = DeviceArray.to_device(x)
    xmap = spec_of(xd, s * m, n)
    exact = x.astype(np.float64).sum(0)
    bound = 2 * s * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum(0)
    verdicts = []
    for groups, k, lag in ((4, kernel or KERNEL, 0), (1, build(combine="store"), 0), (4, ORDERED, 5)):
        yd = DeviceArray.zeros((m, n), np.float32)
        go = launcher(px.compile(k, device=device), s, m, n, groups, name=getattr(k, "kernel", k).name, lag=lag)
        for _ in range(3 if k is ORDERED else 1):
            if k is ORDERED:
                yd.fill_bytes(0xFF)                       # NaN: every tile must be stored before it is added to
            go(xmap, spec_of(yd, m, n))
        got = yd.to_host()
        if groups == 1:
            want = np.zeros((m, n), np.float32)
            for i in range(s):
                want += x[i]
            bad = int((got.view(np.uint32) != want.view(np.uint32)).sum())
        else:
            bad = int((~(np.abs(got - exact) <= bound)).sum())     # a NaN left in y counts too
        verdicts.append((bad == 0, f"{groups} {'ordered ' if k is ORDERED else ''}group(s): {bad} off"))
    ok = all(v for v, _ in verdicts)
    return ok, f"pipe_splitsum: ({s}, {m}, {n}) f32, ok={ok}; " + "; ".join(t for _, t in verdicts)


def spec_of(arr, rows, cols):
    """The map of a contiguous f32 device array (a DeviceArray, torch tensor, any DLPack or CUDA-array-interface
    object) seen as a rows x cols matrix: x of shape (S, M, N) as (S*M, N)."""
    from ptxdsl.runtime.arrays import c_strides, view

    v = view(arr)
    if v.itemsize != 4 or tuple(v.strides) != c_strides(v.shape, 4) or rows * cols != int(np.prod(v.shape)):
        raise ValueError(f"pipe_splitsum: a contiguous f32 array of {rows}x{cols} elements was expected, not shape "
                         f"{tuple(v.shape)} with strides {tuple(v.strides)} and {v.itemsize}-byte elements")
    return px.TensorMapSpec.tiled_for((rows, cols), "f32", (BOX[1], BOX[0]), address=v.address)
