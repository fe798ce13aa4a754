"""Hypothesis: random tile shapes give kernels that assemble and whose TMA lines have the right form."""
import functools
import re

from hypothesis import given
from hypothesis import strategies as st

import ptxdsl as px
from ptxdsl.reference import tx_bytes
from ptxdsl.testing import strategies as pst

DTYPES = ("bf16", "f16", "f32", "u8", "s32", "u16", "f64", "u64")
# Random tiled maps (ptxdsl.testing.strategies): every Hopper swizzle, element strides, boxes up to 200 KiB.
tile_specs = functools.partial(pst.tensor_maps, dtypes=DTYPES, max_smem_bytes=200 * 1024)


def tile_kernel(name, spec, op):
    """A kernel that loads one box of `spec` and then stores or reduces it back (one lane)."""
    nbytes = -(-spec.smem_bytes // 1024) * 1024          # swizzled rows take whole spans
    with px.kernel(name, reqntid=32) as k:
        src = k.param_tensormap("src", spec)
        coords = [k.param(f"c{i}", px.s32) for i in range(spec.rank)]
        tile = k.shared("tile", nbytes, align=1024, dynamic=True)
        bar = k.mbarrier("bar")
        with k.elect_one():
            k.mbarrier_init(bar, 1)
            k.fence_mbarrier_init()
            k.mbarrier_arrive_expect_tx(bar, tx_bytes(spec))
            k.cp_async_bulk_tensor(tile, src, coords, mbar=bar)
            k.mbarrier_wait(bar, parity=0)
            if op == "store":
                k.cp_async_bulk_tensor(src, tile, coords)
            else:
                k.cp_reduce_async_bulk_tensor(op, src, tile, coords)
            k.cp_async_bulk_commit_group()
            k.cp_async_bulk_wait_group_read(0)
    return k


@given(st.lists(tile_specs(), min_size=1, max_size=6), st.data())
def test_random_tiles_assemble_and_have_the_tma_form(specs, data):
    kernels = []
    for i, spec in enumerate(specs):
        ops = ["store"] + [op for op, ts in (("add", {"bf16", "f16", "f32", "s32", "u64"}), ("min", {"s32", "bf16"}),
                                             ("and", {"s32", "u64"})) if spec.dtype in ts]
        kernels.append(tile_kernel(f"k{i}", spec, data.draw(st.sampled_from(ops))))
    ptx = px.emit(px.module(*kernels))
    for k, spec in zip(kernels, specs):
        n = spec.rank
        coords = r"\{" + ", ".join([r"%r\d+"] * n) + r"\}"
        text = ptx.text.split(f".entry {k.kernel.name}(")[1].split("\n}\n")[0]
        loads = re.findall(rf"cp\.async\.bulk\.tensor\.{n}d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes "
                           rf"\[{k.kernel.name}_dsmem\], \[%rd\d+, {coords}\], \[bar\];", text)
        back = re.findall(rf"cp(\.reduce)?\.async\.bulk\.tensor\.{n}d\.global\.shared::cta\.(\w+\.)?tile\.bulk_group "
                          rf"\[%rd\d+, {coords}\], \[{k.kernel.name}_dsmem\];", text)
        assert len(loads) == 1 and len(back) == 1, text
        assert f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], {tx_bytes(spec)};" in text
    res = px.assemble(ptx, "sm_90a")
    assert set(res.kernels) == {k.kernel.name for k in kernels}
