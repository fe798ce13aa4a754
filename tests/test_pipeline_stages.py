"""ptxdsl.pipeline's stage handles, roles and tile scheduler (no GPU, except the marked test): a warp-specialised
copy written with `ring.produce` / `ring.consume`, `Roles` and `TileScheduler` passes the verifier and its launch
checks with no allow(); the stage arms exactly the bytes of its declared loads; a load left out, or issued out of
order, is a DSLError at the block; register reallocation is emitted in the right direction and a budget over the
CTA's pool is refused before ptxas or the GPU (where it would hang) sees it."""
import inspect
import os

import pytest

import ptxdsl as px
from ptxdsl.pipeline import Ring, Roles, StoreDrain, TileScheduler
from ptxdsl.verify import check, check_launch

HERE = os.path.basename(__file__)
T = 64
SPEC = px.TensorMapSpec.tiled_for((1024, 1024), "bf16", (T, T), swizzle="128B")
HALF = px.TensorMapSpec.tiled_for((1024, 1024), "bf16", (T // 2, T), swizzle="128B")     # 32 rows of 64


def copy_kernel(mistake=None, stages=3, group=4):
    """out = x, tile by tile in a grouped order: warpgroup 0's first lane loads each 64 x 64 tile as two boxes of
    32 rows (one stage; the second lands 4 KiB after the first, which continues the swizzled tile), the first thread of warpgroups 1-2 stores the stage with TMA and releases it one store behind.
    The register split is the GEMM's: 40 for the producer warpgroup, 232 for the two others."""
    with px.kernel("ws_copy", maxntid=384, minnctapersm=1) as k:
        x, out = k.param_tensormap("x", HALF), k.param_tensormap("out", SPEC)
        m_tiles, n_tiles = k.param("m_tiles", px.u32), k.param("n_tiles", px.u32)
        ring = Ring(k, "ring", stages=stages, loads=(x, x))
        ring.init()
        roles = Roles(k)
        sched = TileScheduler(k, m_tiles, n_tiles, group=group)
        with roles.warpgroup(0, registers=40):
            with roles.warp(0), k.elect_one():
                cur = ring.cursor()
                with sched.tiles() as (tm, tn):
                    col, row = k.mul(tn, T), k.mul(tm, T)
                    with ring.produce(cur) as st:  # M stage
                        if mistake != "missing":
                            st.load(x, (col, row))
                        st.load(x, (col, k.add(row, T // 2)))
                        if mistake == "extra":
                            st.load(x, (col, row))  # M extra
        with roles.warpgroups(1, 2, registers=232):
            with k.if_(k.setp("eq", roles.tid, 128)):
                cur = ring.cursor()
                drain = StoreDrain(ring, 1)
                with sched.tiles() as (tm, tn):
                    with ring.consume(cur, release=False) as st:
                        k.cp_async_bulk_tensor(out, st.slot(0), (k.mul(tn, T), k.mul(tm, T)))
                        k.cp_async_bulk_commit_group()
                        drain.committed()
                drain.finish()
    return k


def marked(marker, fn=copy_kernel):
    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


def test_stage_handles_roles_and_scheduler_pass_the_verifier_and_launch_checks():
    k = copy_kernel()
    assert check(k) == []
    for grid, (m, n) in ((1, (2, 3)), (2, (16, 16)), (5, (9, 7)), (132, (16, 16))):
        check_launch(k, (HALF, SPEC, m, n), grid=grid, block=384)


def test_the_stage_arms_the_bytes_of_its_declared_loads():
    text = px.emit(copy_kernel()).text
    assert f"mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r" in text
    arm = next(line for line in text.splitlines() if "expect_tx" in line)
    assert arm.rstrip(";").endswith(f", {2 * HALF.box_bytes}"), arm
    # the second box lands one 1024-aligned slot after the first
    k = copy_kernel()
    assert k  # built
    with px.kernel("k") as kk:
        xx = kk.param_tensormap("x", HALF)
        ring = Ring(kk, "ring", stages=2, loads=(xx, xx))
    assert ring.slots == (0, HALF.smem_bytes) and ring.stage_bytes == 2 * HALF.smem_bytes
    assert ring.load_bytes == 2 * HALF.box_bytes == SPEC.box_bytes


@pytest.mark.parametrize("mistake, line", [("missing", "# M stage"), ("extra", "# M extra")])
def test_a_stage_that_does_not_issue_its_declared_loads_is_refused(mistake, line):
    with pytest.raises(px.DSLError) as info:
        copy_kernel(mistake)
    e = info.value
    assert e.rule == "pipeline.stage-loads", str(e)
    assert (os.path.basename(e.loc.file), e.loc.line) == (HERE, marked(line)), str(e)
    assert ("1 of the 2 declared loads" if mistake == "missing" else "no more loads") in str(e)


def test_a_ring_without_sizes_or_with_a_map_without_spec_is_refused():
    with px.kernel("k") as k:
        bare = k.param_tensormap("bare")
        with pytest.raises(px.DSLError, match="give stage_bytes= or loads="):
            Ring(k, "r1", stages=2)
        with pytest.raises(px.DSLError, match="loads\\[0\\]"):
            Ring(k, "r2", stages=2, loads=(bare,))
        with pytest.raises(px.DSLError, match="smaller than its loads"):
            Ring(k, "r3", stages=2, stage_bytes=1024, loads=(k.param_tensormap("m", SPEC),))


def test_register_reallocation_goes_down_for_the_producer_and_up_for_the_consumers():
    text = px.emit(copy_kernel()).text
    assert text.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert text.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    assert ".maxntid 384, 1, 1" in text and ".minnctapersm 1" in text


def test_the_entry_budget_is_what_ptxas_derives():
    with px.kernel("k", maxntid=384, minnctapersm=1) as k:
        assert Roles(k).entry_registers == 168
    with px.kernel("k2", reqntid=128, maxnreg=96) as k:
        assert Roles(k).entry_registers == 96
    with px.kernel("k3", reqntid=128, minnctapersm=1) as k:
        assert Roles(k).entry_registers == 255


@pytest.mark.parametrize("kw, regs, fragment", [
    ({"maxntid": 384, "minnctapersm": 1}, (24, 240, 248), "over the CTA's pool of 64512"),
    ({"maxntid": 384, "minnctapersm": 1}, (40, 232, 236), "multiple of 8"),
    ({"maxntid": 384}, (40, 232, 232), "register budget at entry"),
])
def test_a_register_split_the_cta_cannot_hold_is_refused(kw, regs, fragment):
    with px.kernel("k", **kw) as k:
        roles = Roles(k)
        with pytest.raises(px.DSLError, match=fragment) as info:
            for g, r in enumerate(regs):
                with roles.warpgroup(g, registers=r):
                    pass
    assert info.value.rule == "pipeline.register-budget"


def test_roles_need_the_thread_count_and_whole_warpgroups():
    with px.kernel("k") as k:
        with pytest.raises(px.DSLError, match="reqntid= or maxntid=") as info:
            Roles(k)
        assert info.value.rule == "pipeline.roles"
    with px.kernel("k2", reqntid=256) as k:
        with pytest.raises(px.DSLError, match="warpgroups 1..2"):
            with Roles(k).warpgroups(1, 2):
                pass


def tile_order(m, n, group):
    """The (row, column) TileScheduler.coords computes for tiles 0 .. m*n-1: its instructions evaluated one by
    one (ptxdsl.fold.evaluate on their Compute effects) with the parameters' values."""
    from ptxdsl.fold import evaluate
    from ptxdsl.ir import Imm
    from ptxdsl.isa.effects import Compute

    with px.kernel("order") as k:
        tile, mt, nt = k.param("tile", px.u32), k.param("m_tiles", px.u32), k.param("n_tiles", px.u32)
        row, col = TileScheduler(k, mt, nt, group=group).coords(tile)
    order = []
    for t in range(m * n):
        vals = {tile: t, mt: m, nt: n}
        for ins in k.kernel.walk():
            for e in ins.op.effects():
                if isinstance(e, Compute):
                    vals[e.dst] = evaluate(e, lambda a: a.value if isinstance(a, Imm) else vals.get(a))
        order.append((vals[row], vals[col]))
    return order


@pytest.mark.parametrize("m, n, group", [(9, 7, 4), (16, 16, 8), (3, 5, 1), (1, 4, 8), (5, 3, 8)])
def test_the_tile_order_walks_groups_of_rows(m, n, group):
    """Every tile exactly once, down `group` rows of tiles before across (the last group short)."""
    order = tile_order(m, n, group)
    assert sorted(order) == [(i, j) for i in range(m) for j in range(n)]
    g = min(group, m)
    assert order[:g] == [(i, 0) for i in range(g)]
    assert order[g * n - 1] == (g - 1, n - 1)
    last = m - m % group if m % group else m - group
    assert order[last * n: last * n + m - last] == [(i, 0) for i in range(last, m)]


@pytest.mark.gpu
def test_the_ws_copy_is_bit_exact_on_the_gpu():
    """Every tile once, in the grouped order, on persistent grids that lap the ring: out == x bit for bit."""
    import numpy as np

    from ptxdsl.runtime import DeviceArray

    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**16, (1024, 1024), dtype=np.uint16)
    xd = DeviceArray.to_device(x)
    prog = px.compile(copy_kernel())
    assert prog.loaded_from == "ptx"                 # setmaxnreg: the driver JIT compiles it
    for grid, (m, n) in ((1, (4, 4)), (7, (16, 16)), (132, (16, 16))):
        od = DeviceArray.to_device(np.zeros_like(x))
        prog["ws_copy"](px.TensorMapSpec.from_array(xd, (T // 2, T), swizzle="128B", dtype="bf16"),
                        px.TensorMapSpec.from_array(od, (T, T), swizzle="128B", dtype="bf16"), m, n,
                        grid=grid, block=384, sync=True)
        got = od.to_host()
        assert (got[:m * T, :n * T] == x[:m * T, :n * T]).all(), (grid, m, n)
