"""A batch of tensors of different shapes in one launch: out_i = a * x_i for 64 bf16 tensors, each of its own
shape, with no host round trip, built with ptxdsl.pipeline and tensormap.replace.

The operation is elementwise and each tensor contiguous, so the kernel reads tensor i as what it is in memory: n_i
elements, seen as n_i // 256 rows of 256 (one 512-byte row pitch for every tensor, whatever its shape or rank)
and a tail of n_i % 256 elements. Every tile is then BOX[1] whole rows, 16 contiguous KiB, except the last of a
tensor; a tensor's own shape would leave a partial tile at the end of each row of tiles.

The host passes one tensor map (the template: 256-element rows read in BOX tiles), a table with each tensor's
addresses, rows and tail, and a work list made once per list of tensors: each CTA takes a run of up to
TILES_PER_CTA tiles of one tensor. Thread 0 copies the template into shared memory and rewrites it for its
tensor (global_address, and global_dim 1: its rows); warp 0 publishes the edited map to the CTA's 128-byte slot
in global memory (tensormap.cp_fenceproxy) and acquires it (fence.proxy.tensormap::generic.acquire). Its elected
lane then loads the CTA's tiles through the edited map into the ring (TMA fills rows past the tensor's end with
zeros); warps 1-4 scale each 16-byte chunk that lies inside the tensor and store it to out_i with st.global.v4.
The CTA with a tensor's last tiles also scales its tail from global memory (up to two elements per consumer).

maps="tensor" rewrites one map per tensor instead of one per CTA: the CTA that takes a tensor's first tiles edits
and publishes the map to the tensor's slot, then sets the tensor's flag (ptxdsl.pipeline.Flags); the tensor's other
CTAs (higher ctaids: the work list runs tensor by tensor) wait for the flag and acquire the map from the slot."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.pipeline import Flags, Ring
from ptxdsl.verify import check_launch
from tile_common import random_bf16

BOX = (256, 32)                 # (elements per row, rows) of bf16: 16 KiB
STAGES = 2
TILES_PER_CTA = 2
CTAS_PER_SM = 4                 # measured best on the H200 (docs/performance.md)
CONSUMER_WARPS = 4
THREADS = 32 * (1 + CONSUMER_WARPS)
MAP_BYTES = 128
DESC = 32                       # bytes per tensor: src u64, dst u64, rows u32, tail u32, pad
WORK = 16                       # bytes per CTA: tensor u32, first tile u32, tiles u32, tail u32 (1: scale the tail)
DESC_DTYPE = np.dtype([("src", "<u8"), ("dst", "<u8"), ("rows", "<u4"), ("tail", "<u4"), ("pad", "<u8")])


def template(box=BOX):
    """The template map as the kernel declares it: rows of box[0] bf16 read in `box` tiles (the launch passes any
    such map; each CTA rewrites its address and its number of rows)."""
    return px.TensorMapSpec.tiled_for((box[1], box[0]), "bf16", (box[1], box[0]))


def build(stages=STAGES, box=BOX, name="pipe_varlen", maps="cta"):
    """The kernel; maps="cta" (each CTA edits its own copy of the template) or "tensor" (one map per tensor)."""
    if maps not in ("cta", "tensor"):
        raise px.DSLError(f"pipe_varlen: maps={maps!r}, expected 'cta' or 'tensor'")
    consumers = 32 * CONSUMER_WARPS
    if box[0] > 2 * consumers:
        raise px.DSLError(f"pipe_varlen: box={box}: a tail of up to {box[0] - 1} elements needs box[0] <= "
                          f"{2 * consumers} (two elements per consumer thread)")
    tile = box[0] * box[1] * 2
    chunks = tile // 16
    with px.kernel(name, reqntid=THREADS) as k:
        tmpl = k.param_tensormap("tmpl", template(box))
        desc = k.param_ptr("desc")
        work = k.param_ptr("work")
        slots = k.param_ptr("slots")                      # 128 bytes of global memory per CTA (per tensor)
        a = k.param("a", px.f32)
        if maps == "tensor":
            flags = Flags(k, "map_ready", k.param_ptr("flags"))   # one per tensor: its map is in its slot
            epoch = k.param("epoch", px.u32)
        tms = k.shared("tms", MAP_BYTES, align=128)
        ring = Ring(k, "ring", stages=stages, stage_bytes=tile, consumers=CONSUMER_WARPS)
        cta = k.mov(sreg.ctaid_x)
        item = k.add(work, k.mul(cta, WORK, mode="wide"))
        tensor, first, count, has_tail = (k.ld(px.u32, k.add(item, 4 * i)) for i in range(4))
        entry = k.add(desc, k.mul(tensor, DESC, mode="wide"))
        src, dst = k.ld(px.u64, entry), k.ld(px.u64, k.add(entry, 8))
        rows, tail = k.ld(px.u32, k.add(entry, 16)), k.ld(px.u32, k.add(entry, 20))

        def edit():                                       # the template, rewritten for this CTA's tensor
            for i in range(0, MAP_BYTES, 16):
                k.st(px.b32, tms.at(i), k.ld(px.b32, px.Addr(tmpl, i), space="param", vec=4), space="shared::cta")
            k.tensormap_replace(tms, "global_address", src)
            k.tensormap_replace(tms, "global_dim", k.max(rows, 1), ord=1)     # (a tensor of tail only: no load)

        def produce(edited=None, flag=None):              # the producer: the CTA's tiles through the edited map
            if edited is None:                            # (made here, after the publish, so that the verifier
                edited = px.TensorMapRef(k.cvta(slot, "global"))   # knows the map keeps the template's box)
            with k.elect_one():
                if flag is not None:
                    flag()
                    k.fence_proxy_tensormap("acquire", "gpu", edited)
                cur = ring.cursor()
                with k.loop(0, count) as j:
                    ring.producer_acquire(cur)
                    ring.producer_arm(cur, tile)
                    row = k.mul(k.add(first, j), box[1])
                    k.cp_async_bulk_tensor(ring.buffer(cur), edited, (0, row), mbar=ring.full(cur))
                    cur.advance()

        def consume():                                    # the consumers: scale what lies inside the tensor
            me = k.sub(k.tid_x(), 32)
            body = k.mul(rows, box[0] * 2, mode="wide")   # bytes in whole rows
            cur = ring.cursor()
            with k.loop(0, count) as j:
                at = k.mul(k.add(first, j), tile, mode="wide")
                ring.consumer_wait(cur)
                buf = ring.buffer(cur)
                with k.loop(0, chunks // consumers) as i:
                    c = k.shl(k.mad(i, consumers, me), 4)
                    off = k.add(at, k.cvt(px.u64, c))
                    with k.if_(k.setp("lt", off, body)):
                        vals = k.ld(px.b32, k.add(buf, c), space="shared::cta", vec=4)
                        res = tuple(scale_bf16x2(k, a, w) for w in vals)
                        k.st(px.b32, k.add(dst, off), res)
                k.bar_warp_sync()                         # the warp's reads are done: one arrival for it
                with k.if_(k.setp("eq", k.and_(me, 31), 0)):
                    ring.consumer_release(cur)
                cur.advance()
            with k.if_(k.setp("ne", has_tail, 0)):        # the elements past the whole rows
                for h in range(2):
                    e = k.add(me, h * consumers)
                    with k.if_(k.setp("lt", e, tail)):
                        off = k.add(body, k.mul(e, 2, mode="wide"))
                        k.st(px.b16, k.add(dst, off), scale_bf16(k, a, k.ld(px.u16, k.add(src, off))))

        if maps == "cta":
            with k.if_(k.setp("eq", k.tid_x(), 0)):
                edit()
            ring.init()                                   # (its bar.sync also orders the edit before the publish)
            slot = k.add(slots, k.mul(cta, MAP_BYTES, mode="wide"))
            with k.if_(k.setp("eq", k.warp_idx(), 0)):
                k.tensormap_cp_fenceproxy(slot, tms, scope="gpu")      # publish: the whole warp
                edited = px.TensorMapRef(k.cvta(slot, "global"))
                k.fence_proxy_tensormap("acquire", "gpu", edited)
                produce(edited)
            with k.else_():
                consume()
            return k
        slot = k.add(slots, k.mul(tensor, MAP_BYTES, mode="wide"))
        warp0 = k.setp("eq", k.warp_idx(), 0)
        with k.if_(k.setp("eq", first, 0)):               # the tensor's first CTA: edit, publish, set the flag
            with k.if_(k.setp("eq", k.tid_x(), 0)):
                edit()
            ring.init()
            with k.if_(warp0):
                k.tensormap_cp_fenceproxy(slot, tms, scope="gpu")
                produce(flag=lambda: flags.publish(tensor, epoch))
            with k.else_():
                consume()
        with k.else_():                                   # the others: wait for the flag, acquire the map
            ring.init()
            with k.if_(warp0):
                produce(flag=lambda: flags.wait(tensor, epoch))
            with k.else_():
                consume()
    return k


def scale_bf16x2(k, a, w):
    """Two bf16 lanes times a: widened to f32 (a mask, a shift), mul.rn.f32, packed back by cvt.rn.bf16x2.f32."""
    hi = k.mul(a, k.mov(k.and_(w, 0xFFFF0000), px.f32))
    lo = k.mul(a, k.mov(k.shl(w, 16), px.f32))
    return k.cvt("bf16x2", hi, lo)


def scale_bf16(k, a, h):
    """One bf16 (a .u16 register) times a: widened to f32 by a shift, mul.rn.f32, rounded by cvt.rn.bf16.f32."""
    return k.cvt(px.bf16, k.mul(a, k.mov(k.mov(k.shl(k.cvt(px.u32, h), 16), type="b32"), px.f32)))


KERNEL = build()
SHARED_MAPS = build(maps="tensor", name="pipe_varlen_shared_maps")


def tables(tensors, tiles_per_cta=TILES_PER_CTA, box=BOX):
    """The tensor table (DESC bytes each, as uint8) and the work list (one WORK record per CTA, as uint32) for
    (src address, dst address, elements) triples: a tensor of n elements is n // box[0] whole rows, in tiles of
    box[1] rows, and a tail of n % box[0]; the CTA with its last tiles (a CTA of none, for a tensor of fewer
    elements than a row) also scales the tail. A tensor of no elements takes no CTA."""
    desc, work = np.zeros(len(tensors), DESC_DTYPE), []
    for i, (src, dst, n) in enumerate(tensors):
        rows, tail = divmod(n, box[0])
        tiles = -(-rows // box[1])
        desc[i] = (src, dst, rows, tail, 0)
        mine = [[i, t, min(tiles_per_cta, tiles - t), 0] for t in range(0, tiles, tiles_per_cta)]
        if tail:
            mine = mine or [[i, 0, 0, 0]]
            mine[-1][3] = 1
        work += mine
    return desc.view(np.uint8), np.array(work, np.uint32).reshape(-1, 4)


def _tensor(arr, what):
    """(device address, elements) of a contiguous bf16 array, or ValueError naming `what` and the rule."""
    from ptxdsl.runtime.arrays import c_strides, view

    v = view(arr)
    if v.dtype != "bfloat16":
        raise ValueError(f"pipe_varlen: {what} is {v.dtype}, expected bfloat16")
    if v.strides != c_strides(v.shape, 2):
        raise ValueError(f"pipe_varlen: {what} has strides {v.strides} (bytes): it must be contiguous")
    if v.address % 16:
        raise ValueError(f"pipe_varlen: {what} starts at {v.address:#x}, not on a 16-byte boundary (a tensor map's)")
    return v.address, int(np.prod(v.shape, dtype=np.int64))


class Batch:
    """The launch of one batch: the tables (tensor addresses and sizes, the work list) and the map slots, made once
    on the device for a list of (x, out) pairs of contiguous bf16 device arrays of any shape, out the size of x
    (anything with `__cuda_array_interface__` or DLPack: DeviceArray, torch, CuPy). `batch(a)` launches
    out_i = a * x_i.

    With a kernel built with maps="tensor" (`name` is its name) the slots are one per tensor, with a flag each,
    and every launch passes a new epoch: the launches of one Batch share them, so they must not overlap.

    The tables are checked once here against the kernel (ptxdsl.verify.check_launch with their host copies: the
    run of its threads follows the tile counts and sizes it will read), since a launch cannot read them."""

    def __init__(self, prog, pairs, tiles_per_cta=TILES_PER_CTA, box=BOX, ctas_per_sm=CTAS_PER_SM, name="pipe_varlen"):
        from ptxdsl.runtime import DeviceArray

        tensors = []
        for i, (x, out) in enumerate(pairs):
            (src, n), (dst, m) = _tensor(x, f"pair {i}: x"), _tensor(out, f"pair {i}: out")
            if n != m:
                raise ValueError(f"pipe_varlen: pair {i}: x has {n} elements, out {m}")
            tensors.append((src, dst, n))
        desc, work = tables(tensors, tiles_per_cta, box)
        self.grid = len(work)
        self.launch = prog[name]
        self.per_tensor = "epoch" in [p.name for p in self.launch.params]
        if self.grid:                                     # the template: any map of box[0]-element rows, here
            src, _, n = next((t for t in tensors if t[2] >= box[0]), tensors[0])   # the first tensor's rows (a
            self.tmpl = px.TensorMapSpec.tiled_for((max(1, n // box[0]), box[0]), "bf16", (box[1], box[0]),
                                                   address=src)          # batch of tails only loads through none)
            check_launch(self.launch.info, (self.tmpl, desc, work, 0, 1.0) + ((0, 1) if self.per_tensor else ()),
                         grid=self.grid, block=THREADS)  # the tables against the kernel
        self.desc = DeviceArray.to_device(desc)
        self.work = DeviceArray.to_device(work if self.grid else np.zeros((1, 4), np.uint32))
        self.slots = DeviceArray.zeros((max(1, len(tensors) if self.per_tensor else self.grid), MAP_BYTES), np.uint8)
        self.flags = DeviceArray.zeros((max(1, len(tensors)),), np.uint32) if self.per_tensor else None
        self.epoch = 0
        self.shared = self.launch.shared_bytes_for(ctas_per_sm) if ctas_per_sm else None

    def __call__(self, a, stream=None):
        if not self.grid:                                 # a batch of empty tensors: nothing to launch
            return
        if not self.per_tensor:
            self.launch(self.tmpl, self.desc, self.work, self.slots, a, grid=self.grid, block=THREADS,
                        shared_bytes=self.shared, stream=stream)
            return
        if self.epoch == 0xFFFFFFFF:                      # 2**32 - 1 launches: start again over zeroed flags
            self.flags.fill_bytes(0)
            self.epoch = 0
        self.epoch += 1
        self.launch(self.tmpl, self.desc, self.work, self.slots, a, self.flags, self.epoch, grid=self.grid,
                    block=THREADS, shared_bytes=self.shared, stream=stream)
def random_shapes(rng, n, rows=(64, 2048), cols=(64, 4096)):
    """n (rows, cols) shapes: rows uniform in `rows`, cols a multiple of 8 in `cols`."""
    return [(int(rng.integers(*rows)), 8 * int(rng.integers(cols[0] // 8, cols[1] // 8))) for _ in range(n)]


def launches():
    """The batches run() launches, for the launch checks (`ptxdsl check` runs them; no GPU needed): the tables of
    its 17 tensors (at made-up addresses: the checks read the tables' sizes and tile counts, not the tensors),
    with a map per CTA and with a map per tensor."""
    rng = np.random.default_rng(17)
    shapes = random_shapes(rng, 12, rows=(1, 300), cols=(8, 700)) + [(5, 7), (1000,), (3, 100, 9), (64, 256), (2, 515)]
    sizes = [int(np.prod(s)) for s in shapes]
    base = 1 << 32
    tensors = [(base + (i << 24), base + (i << 24) + (1 << 23), n) for i, n in enumerate(sizes)]
    desc, work = tables(tensors, tiles_per_cta=2)
    tmpl = px.TensorMapSpec.tiled_for((max(1, sizes[0] // BOX[0]), BOX[0]), "bf16", (BOX[1], BOX[0]),
                                      address=tensors[0][0])
    args = {"tmpl": tmpl, "desc": desc, "work": work, "a": 0.5}
    return [px.Launch(KERNEL, args, grid=len(work), block=THREADS),
            px.Launch(SHARED_MAPS, {**args, "epoch": 1}, grid=len(work), block=THREADS, note="a map per tensor")]


def run(device=None, kernel=None):
    """0.5 * x_i for 12 random matrices and 5 tensors of other ranks and sizes (a tail only, a 1-D tensor of
    rows and a tail, a 3-D one, whole tiles, an odd size), checked bit for bit against numpy; then the same batch
    with one map per tensor, launched three times (a = 0.5, 2, -1) into outputs full of NaN."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(17)
    shapes = random_shapes(rng, 12, rows=(1, 300), cols=(8, 700)) + [(5, 7), (1000,), (3, 100, 9), (64, 256), (2, 515)]
    xs = [random_bf16(rng, s) for s in shapes]
    dx = [DeviceArray.to_device(x) for x in xs]
    do = [DeviceArray.to_device(np.full_like(x, np.nan)) for x in xs]

    def differing(a):
        bad = 0
        for x, o in zip(xs, do):
            want = (x.astype(np.float32) * np.float32(a)).astype(ml_dtypes.bfloat16)
            bad += int((o.to_host().view(np.uint16) != want.view(np.uint16)).sum())
        return bad

    Batch(px.compile(kernel or KERNEL, device=device), list(zip(dx, do)), tiles_per_cta=2)(0.5)
    bad = [differing(0.5)]
    shared = Batch(px.compile(SHARED_MAPS, device=device), list(zip(dx, do)), tiles_per_cta=2,
                   name="pipe_varlen_shared_maps")
    for a in (0.5, 2.0, -1.0):
        for o in do:
            o.fill_bytes(0xFF)
        shared(a)
        bad.append(differing(a))
    ok = not any(bad)
    return ok, (f"pipe_varlen: {len(xs)} tensors {[x.shape for x in xs[:3]]}..., bit-exact={ok} differing={bad[0]}; "
                f"one map per tensor, 3 launches: differing={bad[1:]}")
