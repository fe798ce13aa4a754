"""Edit a tensor map on the device: each CTA reads the 128 bytes of the tensor-map parameter `src` (the map
of matrix A), copies them to shared memory, points the copy at matrix B with tensormap.replace, publishes it to
the CTA's own slot of global memory with one whole warp's tensormap.cp_fenceproxy, acquires it with
fence.proxy.tensormap::generic.acquire, and TMA-loads its 64x64 bf16 tile through it: a tile of B. The tile is
then stored through `dst`, so the host finds B in the output, not A."""
import numpy as np

import ptxdsl as px
from ptxdsl import sreg
from tile_common import THREADS, TILE, TILE_BYTES, random_bf16, tile_spec

ROWS, COLS = 256, 512
MAP_BYTES = 128                     # a CUtensorMap

with px.kernel("tensormap_replace", reqntid=THREADS) as k:
    src = k.param_tensormap("src", tile_spec(ROWS, COLS))      # the map of A, as the host encoded it
    dst = k.param_tensormap("dst", tile_spec(ROWS, COLS))
    maps = k.param_ptr("maps")                                  # one 128-byte slot per CTA, in global memory
    b = k.param("b", px.u64)                                    # B's global address
    tms = k.shared("tms", MAP_BYTES, align=128)                 # the working copy of the map
    tile = k.shared("tile", TILE_BYTES, align=128)
    bar = k.mbarrier("bar")
    is_t0 = k.setp("eq", k.mov(sreg.tid_x), 0)
    x = k.mul(k.mov(sreg.ctaid_x), TILE)
    y = k.mul(k.mov(sreg.ctaid_y), TILE)
    cta = k.mad(k.mov(sreg.ctaid_y), k.mov(sreg.nctaid_x), k.mov(sreg.ctaid_x))
    slot = k.add(maps, k.mul(cta, MAP_BYTES, mode="wide"))     # this CTA's slot (a global address)
    with k.if_(is_t0):
        k.mbarrier_init(bar, 1)
        k.fence_mbarrier_init()
        for i in range(0, MAP_BYTES, 16):                       # 1. read the parameter's bytes, 16 at a time
            k.st(px.b32, tms.at(i), k.ld(px.b32, px.Addr(src, i), space="param", vec=4), space="shared::cta")
        k.tensormap_replace(tms, "global_address", b)          # 2. edit the copy in shared memory
    k.bar_sync(0)
    with k.if_(k.setp("eq", k.warp_idx(), 0)):                  # warp 0, all 32 lanes:
        k.tensormap_cp_fenceproxy(slot, tms, scope="gpu")      # 3. publish the copy to the slot
        edited = px.TensorMapRef(k.cvta(slot, "global"))       #    (its generic address)
        k.fence_proxy_tensormap("acquire", "gpu", edited)      # 4. acquire it for the TMA unit
        with k.elect_one():
            k.mbarrier_arrive_expect_tx(bar, TILE_BYTES, sem="release", scope="cta")
            k.cp_async_bulk_tensor(tile, edited, (x, y), mbar=bar)     # 5. load through the edited map
    k.mbarrier_wait(bar, parity=0, sem="acquire", scope="cta")
    with k.if_(is_t0):
        k.cp_async_bulk_tensor(dst, tile, (x, y))
        k.cp_async_bulk_commit_group()
        k.cp_async_bulk_wait_group(0)

KERNEL = k


def launches():
    """The launch run() makes, for the launch checks (`ptxdsl check` runs it; no GPU needed)."""
    return [px.Launch(KERNEL, {"b": 1 << 32}, grid=(COLS // TILE, ROWS // TILE))]


def run(device=None, kernel=None):
    """Launch with `src` describing A and `b` pointing at B: the output must be B, bit for bit. `kernel` replaces
    the kernel (the same kernel built another way)."""
    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(6)
    a, b = random_bf16(rng, (ROWS, COLS)), random_bf16(rng, (ROWS, COLS))
    prog = px.compile(kernel or k, device=device)
    grid = (COLS // TILE, ROWS // TILE)
    a_buf, b_buf = DeviceArray.to_device(a), DeviceArray.to_device(b)
    out = DeviceArray.to_device(np.full_like(a, np.nan))
    maps = DeviceArray.zeros((grid[0] * grid[1], MAP_BYTES), np.uint8)
    prog["tensormap_replace"](px.TensorMapSpec.from_array(a_buf, (TILE, TILE)),    # src: the map of A
                              px.TensorMapSpec.from_array(out, (TILE, TILE)),      # dst
                              maps, b_buf.ptr, grid=grid, block=THREADS)           # the slots, B's address
    got = out.to_host()
    ok = got.view(np.uint16).tobytes() == b.view(np.uint16).tobytes()
    return ok, f"tensormap_replace: {ROWS}x{COLS} bf16 loaded through the edited map, equal to B={ok}"
