"""The GEMM kernel generator: C = A @ B (bf16 in, f32 accumulate, bf16 out), a persistent, warp-specialised
TMA + wgmma kernel built from ptxdsl.pipeline on the public builder API.

    producer warpgroup (one thread)          consumer warpgroups (each owns block_m / consumers rows of the tile)
    for each tile, for each K block:         for each tile:
      wait for an empty stage                  for each K block: wait for the stage, four MMAs per 64-row block,
      arm it, load A's and B's boxes             commit, wait, release the stage
                                               epilogue: bf16, stmatrix into shared memory, TMA store

The producer runs up to `stages` K blocks ahead, into the next tile while the consumers store this one: the
epilogue overlaps the next tile's loads. The first K block of a tile is peeled so that its first MMA has
scale-d = 0 as a literal (ptxas serialises the wgmma pipeline for a predicate there).
"""
from __future__ import annotations

from .. import builder as _builder
from ..descriptor import MatrixLayout, matrix_descriptor
from ..fragment import Accumulator
from ..pipeline import Ring, Roles, TileScheduler
from ..tensormap import TensorMapSpec
from ..types import u32
from .config import GemmConfig
from .epilogue import store_tile

SWIZZLE = "128B"
SPAN = 64                       # bf16 elements in a 128-byte swizzle row: the K block, and a B box of MN-major B


def a_spec(cfg: GemmConfig, m: int = 1024, k: int = 1024, address: int = 0) -> TensorMapSpec:
    """A (m x k, K contiguous) read in block_m x block_k boxes."""
    return TensorMapSpec.tiled_for((m, k), "bf16", (cfg.block_m, cfg.block_k), swizzle=SWIZZLE, address=address)


def b_spec(cfg: GemmConfig, n: int = 1024, k: int = 1024, address: int = 0) -> TensorMapSpec:
    """B: n x k (K-major) read in block_n x block_k boxes, or k x n (MN-major) in block_k x 64 boxes."""
    if cfg.b_major == "K":
        return TensorMapSpec.tiled_for((n, k), "bf16", (cfg.block_n, cfg.block_k), swizzle=SWIZZLE, address=address)
    return TensorMapSpec.tiled_for((k, n), "bf16", (cfg.block_k, SPAN), swizzle=SWIZZLE, address=address)


def c_spec(cfg: GemmConfig, m: int = 1024, n: int = 1024, address: int = 0) -> TensorMapSpec:
    """C (m x n) written in 64 x 64 boxes, 128B-swizzled like the shared tile the epilogue writes."""
    return TensorMapSpec.tiled_for((m, n), "bf16", (64, SPAN), swizzle=SWIZZLE, address=address)


def kernel_name(cfg: GemmConfig, epilogue=None) -> str:
    return cfg.name if epilogue is None else f"{cfg.name}_{epilogue.__name__}"


def build(cfg: GemmConfig, name: str | None = None, *, epilogue=None):
    """The kernel of `cfg`: parameters (a, b, c tensor maps; m_tiles, n_tiles, k_blocks). `epilogue(k, acc)`
    runs on each f32 accumulator before the cast (ptxdsl.gemm.epilogue)."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    b_boxes = 1 if cfg.b_major == "K" else bn // SPAN
    with _builder.kernel(name or kernel_name(cfg, epilogue), maxntid=cfg.threads, minnctapersm=1) as k:
        amap = k.param_tensormap("a", a_spec(cfg))
        bmap = k.param_tensormap("b", b_spec(cfg))
        cmap = k.param_tensormap("c", c_spec(cfg))
        m_tiles, n_tiles, k_blocks = (k.param(p, u32) for p in ("m_tiles", "n_tiles", "k_blocks"))
        ring = Ring(k, "ring", stages=cfg.stages, loads=(amap,) + (bmap,) * b_boxes, consumers=cfg.consumers)
        out = k.shared("out", cfg.c_bytes, align=1024, dynamic=True)
        ring.init()
        roles = Roles(k)
        tiles = TileScheduler(k, m_tiles, n_tiles, group=cfg.group_m)
        producer_regs, consumer_regs = cfg.registers or (None, None)

        with roles.warpgroup(0, registers=producer_regs):
            with roles.warp(0), k.elect_one():
                cur = ring.cursor()
                with tiles.tiles() as (tm, tn):
                    m0, n0 = k.mul(tm, bm), k.mul(tn, bn)
                    with k.loop(0, k_blocks) as kb:
                        k0 = k.mul(kb, bk)
                        with ring.produce(cur) as st:
                            st.load(amap, (k0, m0))
                            if cfg.b_major == "K":
                                st.load(bmap, (k0, n0))
                            else:
                                for i in range(b_boxes):
                                    st.load(bmap, (k.add(n0, i * SPAN) if i else n0, k0))

        with roles.warpgroups(1, cfg.consumers, registers=consumer_regs) as wg:
            lead = k.setp("eq", roles.tid_in_warpgroup, 0)
            a_tile = MatrixLayout("bf16", 64, bk, SWIZZLE)
            b_tile = MatrixLayout("bf16", bn, bk, SWIZZLE, major=cfg.b_major)
            # this warpgroup's rows of A in a stage, and B, as descriptors of stage 0
            a_first = matrix_descriptor(k, ring.buf, a_tile, k.mul(wg, cfg.rows_per_consumer * bk * 2))
            b_first = matrix_descriptor(k, ring.buf, b_tile, ring.slots[1])
            acc = [Accumulator(k, bn) for _ in range(cfg.m_blocks)]
            trans_b = 0 if cfg.b_major == "K" else 1

            def mmas(first: bool):
                """Fence, then the MMAs of the cursor's stage: 4 K steps x m_blocks, into the accumulators."""
                a = a_first.advance(cur.stage, stride=ring.stage_bytes)
                b = b_first.advance(cur.stage, stride=ring.stage_bytes)
                a_k = [[a.advance(mb * 64 * bk * 2).advance_k(j) for j in range(a_tile.k_steps)]
                       for mb in range(cfg.m_blocks)]
                b_k = [b.advance_k(j) for j in range(b_tile.k_steps)]
                k.wgmma_fence()
                for j in range(a_tile.k_steps):
                    for mb in range(cfg.m_blocks):
                        k.wgmma_mma_async(acc[mb], a_k[mb][j], b_k[j], scale_d=0 if first and j == 0 else 1,
                                          imm_trans_b=trans_b)
                k.wgmma_commit_group()

            cur = ring.cursor()
            if cfg.mma_depth == 0:
                # per K block: wait for the stage, its MMAs, commit, wait for them, release the stage
                with tiles.tiles() as (tm, tn):
                    with ring.consume(cur, release=lead):
                        mmas(first=True)
                        k.wgmma_wait_group(0)
                    with k.loop(1, k_blocks):
                        with ring.consume(cur, release=lead):
                            mmas(first=False)
                            k.wgmma_wait_group(0)
                    store_tile(k, cfg, acc, out, cmap, wg, lead, k.mul(tm, bm), k.mul(tn, bn), epilogue)
            else:
                # one K block's MMAs stay in flight: after committing a stage's, wait for the previous stage's
                # and release that one (`done`, a cursor one stage behind)
                done = ring.cursor()
                with tiles.tiles() as (tm, tn):
                    with ring.consume(cur, release=False):
                        mmas(first=True)
                    with k.loop(1, k_blocks):
                        with ring.consume(cur, release=False):
                            mmas(first=False)
                            k.wgmma_wait_group(1)
                        ring.release(done, lead)
                    k.wgmma_wait_group(0)
                    ring.release(done, lead)
                    store_tile(k, cfg, acc, out, cmap, wg, lead, k.mul(tm, bm), k.mul(tn, bn), epilogue)
            with k.if_(lead):
                k.cp_async_bulk_wait_group(0)
    return k
