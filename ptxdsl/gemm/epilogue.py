"""The GEMM's epilogue: an optional function over each f32 accumulator fragment (`relu`, `scale(alpha)`, or the
caller's: `fn(k, acc)` with ptxdsl.fragment.Accumulator's map / load_columns / load_rows), then the accumulators of a consumer warpgroup to bf16 in a 128B-swizzled shared tile
(stmatrix, bank-conflict free), then TMA stores of 64 x 64 boxes.

Each consumer owns rows [wg * rows, (wg + 1) * rows) of the block_m x block_n tile; its shared region holds
m_blocks x (epilogue_n / 64) boxes of 64 rows x 128 bytes, each swizzled as TMA's 128B mode reads it: 16-byte chunk
c of row r sits at chunk c ^ (r % 8). Before writing, the thread that stores waits until the previous tile's
stores have read the region (cp.async.bulk.wait_group.read 0) and the consumers meet at a named barrier; after,
every writer fences (fence.proxy.async: the copy engine reads what the threads wrote), they meet again, and the
storing thread issues the stores and commits them.
"""
from __future__ import annotations

from ..ir import Addr
from .. import sreg

BOX = 64 * 128                  # bytes of one 64 x 64 bf16 box
EPILOGUE_BARRIER = 1            # bar.sync id the consumer warpgroups meet at (0 is the ring's init)


def relu(k, acc) -> None:
    """C = max(A @ B, 0), on the f32 accumulator before the cast."""
    acc.map(k, lambda d, i: k.max(d, 0.0, out=d))


def scale(alpha: float):
    """C = alpha * (A @ B), alpha a constant: an epilogue for `build(cfg, epilogue=scale(0.5))`."""
    def epilogue(k, acc) -> None:
        acc.map(k, lambda d, i: k.mul(d, float(alpha), out=d))
    epilogue.__name__ = f"scale_{alpha}".replace(".", "_").replace("-", "m")
    return epilogue


def store_tile(k, cfg, acc, out, cmap, wg, lead, m0, n0, epilogue=None) -> None:
    """Store the accumulators `acc` (cfg.m_blocks of them, 64 x block_n each) of consumer `wg` as C's tile at
    rows m0, columns n0 (elements), cfg.epilogue_n columns at a time through the consumer's shared region (its
    own named barrier, 1 + wg, so the consumers do not wait for each other). `epilogue(k, accumulator)` runs on
    each f32 accumulator first (`relu`, `scale(alpha)`, or the caller's own: Accumulator.map and friends)."""
    if epilogue is not None:
        for a in acc:
            epilogue(k, a)
    cols = cfg.epilogue_n
    boxes_n = cols // 64
    region = k.mad(wg, cfg.m_blocks * boxes_n * BOX, k.mov(out))
    barrier = k.add(wg, EPILOGUE_BARRIER)
    lane = k.mov(sreg.laneid)
    warp = k.and_(k.shr(k.tid_x(), 5), 3)
    # lane l writes row 16w + (l & 15) of 8x8 matrix l >> 3; its 16-byte chunk is 2m + (l >> 4) for column
    # block m of four: swizzled, (2m) ^ ((l >> 4) ^ (l & 7)).
    row = k.add(k.shl(warp, 4), k.and_(lane, 15))
    flip = k.xor(k.shr(lane, 4), k.and_(lane, 7))
    row_base = k.add(region, k.shl(row, 7))
    chunk = [k.add(row_base, k.shl(k.xor(flip, 2 * m), 4)) for m in range(4)]
    row0 = k.add(m0, k.mul(wg, cfg.rows_per_consumer))

    for r in range(cfg.block_n // cols):
        with k.if_(lead):
            k.cp_async_bulk_wait_group_read(0)      # the last stores have read the region
        k.bar_sync(barrier, 128)
        for mb, a in enumerate(acc):
            d = a.regs
            for b in range(cols // 16):
                col = r * cols // 16 + b               # 16-column block of the accumulator
                q = [k.cvt("bf16x2", d[8 * col + 2 * j + 1], d[8 * col + 2 * j]) for j in range(4)]
                box = mb * boxes_n + b // 4
                where = chunk[b % 4]
                k.stmatrix(Addr(where, box * BOX) if box else where, q)
        k.fence_proxy_async("shared::cta")
        k.bar_sync(barrier, 128)
        with k.if_(lead):
            for mb in range(cfg.m_blocks):
                for nb in range(boxes_n):
                    box = mb * boxes_n + nb
                    src = k.add(region, box * BOX) if box else region
                    x = r * cols + 64 * nb
                    k.cp_async_bulk_tensor(cmap, src, (k.add(n0, x) if x else n0,
                                                       k.add(row0, 64 * mb) if mb else row0))
            k.cp_async_bulk_commit_group()
