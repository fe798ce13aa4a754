"""A batch of tensors of different shapes in one launch: out_i = a * x_i for 64 bf16 matrices, each of its own
shape, with no host round trip, built with ptxdsl.pipeline and tensormap.replace.

The host passes one tensor map (any bf16 matrix read in BOX tiles: the template), a table with each tensor's
addresses and shape, and a work list made once per list of tensors: each CTA takes a run of up to TILES_PER_CTA
tiles of one tensor. Thread 0 copies the template into shared memory and rewrites it for its tensor
(global_address, both global_dims, the row stride); warp 0 publishes the edited map to the CTA's 128-byte slot in
global memory (tensormap.cp_fenceproxy) and acquires it (fence.proxy.tensormap::generic.acquire). Its elected lane then loads
the CTA's tiles through the edited map into the ring (TMA fills what lies past the tensor's edges with zeros);
warps 1-4 scale each 16-byte chunk that lies inside the tensor and store it to out_i with st.global.v4.

maps="tensor" rewrites one map per tensor instead of one per CTA: the CTA that takes a tensor's first tiles edits
and publishes the map to the tensor's slot, then sets the tensor's flag (ptxdsl.pipeline.Flags); the tensor's other
CTAs (higher ctaids: the work list runs tensor by tensor) wait for the flag and acquire the map from the slot."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from ptxdsl.pipeline import Flags, Ring, tile_coords
from ptxdsl.verify import check_launch
from tile_common import random_bf16

BOX = (256, 32)                 # (columns, rows) of bf16: 16 KiB
STAGES = 2
TILES_PER_CTA = 2
CTAS_PER_SM = 4                 # measured best on the H200 (docs/performance.md)
CONSUMER_WARPS = 4
THREADS = 32 * (1 + CONSUMER_WARPS)
MAP_BYTES = 128
DESC = 32                       # bytes per tensor: src u64, dst u64, rows u32, cols u32, tiles across u32, pad
WORK = 16                       # bytes per CTA: tensor u32, first tile u32, tiles u32, pad


def template(box=BOX):
    """The template map as the kernel declares it: a bf16 matrix read in `box` tiles (the launch passes any
    tensor's map; each CTA rewrites its address and shape)."""
    return px.TensorMapSpec.tiled_for((box[1], box[0]), "bf16", (box[1], box[0]))


def build(stages=STAGES, box=BOX, name="pipe_varlen", maps="cta"):
    """The kernel; maps="cta" (each CTA edits its own copy of the template) or "tensor" (one map per tensor)."""
    if maps not in ("cta", "tensor"):
        raise px.DSLError(f"pipe_varlen: maps={maps!r}, expected 'cta' or 'tensor'")
    tile = box[0] * box[1] * 2
    chunks = tile // 16
    per_row = box[0] * 2 // 16                            # 16-byte chunks per tile row
    consumers = 32 * CONSUMER_WARPS
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
        tensor, first, count = (k.ld(px.u32, k.add(item, 4 * i)) for i in range(3))
        entry = k.add(desc, k.mul(tensor, DESC, mode="wide"))
        src, dst = k.ld(px.u64, entry), k.ld(px.u64, k.add(entry, 8))
        rows, cols, across = (k.ld(px.u32, k.add(entry, 16 + 4 * i)) for i in range(3))

        def edit():                                       # the template, rewritten for this CTA's tensor
            for i in range(0, MAP_BYTES, 16):
                k.st(px.b32, tms.at(i), k.ld(px.b32, px.Addr(tmpl, i), space="param", vec=4), space="shared::cta")
            k.tensormap_replace(tms, "global_address", src)
            k.tensormap_replace(tms, "global_dim", cols, ord=0)
            k.tensormap_replace(tms, "global_dim", rows, ord=1)
            k.tensormap_replace(tms, "global_stride", k.mul(cols, 2, mode="wide"), ord=0)

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
                    xy = tile_coords(k, k.add(first, j), across, box)
                    k.cp_async_bulk_tensor(ring.buffer(cur), edited, xy, mbar=ring.full(cur))
                    cur.advance()

        def consume():                                    # the consumers: scale what lies inside the tensor
            me = k.sub(k.tid_x(), 32)
            pitch = k.shl(cols, 1)
            cur = ring.cursor()
            with k.loop(0, count) as j:
                col0, row0 = tile_coords(k, k.add(first, j), across, box)
                ring.consumer_wait(cur)
                buf = ring.buffer(cur)
                with k.loop(0, chunks // consumers) as i:
                    c = k.mad(i, consumers, me)
                    row = k.add(row0, k.div(c, per_row))
                    col = k.add(col0, k.shl(k.rem(c, per_row), 3))
                    inside = k.and_(k.setp("lt", row, rows), k.setp("lt", col, cols))
                    with k.if_(inside):
                        vals = k.ld(px.b32, k.add(buf, k.shl(c, 4)), space="shared::cta", vec=4)
                        res = tuple(scale_bf16x2(k, a, w) for w in vals)
                        k.st(px.b32, k.add(dst, k.cvt(px.u64, k.mad(row, pitch, k.shl(col, 1)))), res)
                k.bar_warp_sync()                         # the warp's reads are done: one arrival for it
                with k.if_(k.setp("eq", k.and_(me, 31), 0)):
                    ring.consumer_release(cur)
                cur.advance()

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


KERNEL = build()
SHARED_MAPS = build(maps="tensor", name="pipe_varlen_shared_maps")


class Batch:
    """The launch of one batch: the tables (tensor addresses and shapes, the work list) and the map slots,
    made once on the device for a list of (x, out) pairs of 2-D bf16 device arrays (anything with
    `__cuda_array_interface__` or DLPack: DeviceArray, torch, CuPy). `batch(a)` launches out_i = a * x_i.

    With a kernel built with maps="tensor" (`name` is its name) the slots are one per tensor, with a flag each,
    and every launch passes a new epoch: the launches of one Batch share them, so they must not overlap.

    The tables are checked once here against the kernel (ptxdsl.verify.check_launch with their host copies: the
    run of its threads follows the tile counts and shapes it will read), since a launch cannot read them."""

    def __init__(self, prog, pairs, tiles_per_cta=TILES_PER_CTA, box=BOX, ctas_per_sm=CTAS_PER_SM, name="pipe_varlen"):
        from ptxdsl.runtime import DeviceArray

        desc, work = [], []
        for i, (x, out) in enumerate(pairs):
            sx, so = px.TensorMapSpec.from_array(x, box[::-1]), px.TensorMapSpec.from_array(out, box[::-1])
            if sx.dims != so.dims:
                raise ValueError(f"pipe_varlen: pair {i}: x is {sx.dims[::-1]}, out is {so.dims[::-1]}")
            cols, rows = sx.dims
            if sx.strides[0] != cols * 2 or so.strides[0] != cols * 2:
                raise ValueError(f"pipe_varlen: pair {i}: rows must be contiguous (a row pitch of {cols * 2} bytes)")
            across = -(-cols // box[0])
            tiles = across * -(-rows // box[1])
            desc.append((sx.global_address, so.global_address, rows, cols, across, 0))
            work += [(i, t, min(tiles_per_cta, tiles - t), 0) for t in range(0, tiles, tiles_per_cta)]
        table = np.zeros(len(desc), np.dtype([("src", "<u8"), ("dst", "<u8"), ("rows", "<u4"), ("cols", "<u4"),
                                               ("across", "<u4"), ("pad", "<u4")]))
        table[:] = desc
        work = np.array(work, np.uint32)
        self.grid = len(work)
        self.launch = prog[name]
        self.per_tensor = "epoch" in [p.name for p in self.launch.params]
        self.tmpl = px.TensorMapSpec.from_array(pairs[0][0], box[::-1])    # any tensor's map will do
        tables = (self.tmpl, table.view(np.uint8), work, 0, 1.0) + ((0, 1) if self.per_tensor else ())
        check_launch(self.launch.info, tables, grid=self.grid, block=THREADS)      # the tables against the kernel
        self.desc = DeviceArray.to_device(table.view(np.uint8))
        self.work = DeviceArray.to_device(work)
        self.slots = DeviceArray.zeros((len(desc) if self.per_tensor else len(work), MAP_BYTES), np.uint8)
        self.flags = DeviceArray.zeros((len(desc),), np.uint32) if self.per_tensor else None
        self.epoch = 0
        self.shared = self.launch.shared_bytes_for(ctas_per_sm) if ctas_per_sm else None

    def __call__(self, a, stream=None):
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
    """n (rows, cols) shapes: rows uniform in `rows`, cols a multiple of 8 (16-byte rows for TMA) in `cols`."""
    return [(int(rng.integers(*rows)), 8 * int(rng.integers(cols[0] // 8, cols[1] // 8))) for _ in range(n)]


def run(device=None, kernel=None):
    """0.5 * x_i for 12 random shapes (most not whole tiles), checked bit for bit against numpy; then the same
    batch with one map per tensor, launched three times (a = 0.5, 2, -1) into outputs full of NaN."""
    import ml_dtypes

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(17)
    xs = [random_bf16(rng, s) for s in random_shapes(rng, 12, rows=(1, 300), cols=(8, 700))]
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
