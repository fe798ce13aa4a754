"""PTX special registers, read with `k.mov(sreg.tid_x)`."""
from __future__ import annotations

from .ir import SpecialReg
from .types import pred, u32, u64


def _xyz(name: str, ptx=(7, 8)):
    return tuple(SpecialReg(f"%{name}.{c}", u32, ptx) for c in "xyz")


tid_x, tid_y, tid_z = _xyz("tid")
ntid_x, ntid_y, ntid_z = _xyz("ntid")
ctaid_x, ctaid_y, ctaid_z = _xyz("ctaid")
nctaid_x, nctaid_y, nctaid_z = _xyz("nctaid")
cluster_ctaid_x, cluster_ctaid_y, cluster_ctaid_z = _xyz("cluster_ctaid")
cluster_nctaid_x, cluster_nctaid_y, cluster_nctaid_z = _xyz("cluster_nctaid")
clusterid_x, clusterid_y, clusterid_z = _xyz("clusterid")
nclusterid_x, nclusterid_y, nclusterid_z = _xyz("nclusterid")
laneid = SpecialReg("%laneid")
warpid = SpecialReg("%warpid")      # the hardware warp slot: NOT tid.x / 32, and it can change
nwarpid = SpecialReg("%nwarpid")
smid = SpecialReg("%smid")
cluster_ctarank = SpecialReg("%cluster_ctarank")
cluster_nctarank = SpecialReg("%cluster_nctarank")
is_explicit_cluster = SpecialReg("%is_explicit_cluster", pred)
dynamic_smem_size = SpecialReg("%dynamic_smem_size")
total_smem_size = SpecialReg("%total_smem_size")
aggr_smem_size = SpecialReg("%aggr_smem_size", u32, (8, 1))
clock = SpecialReg("%clock")
clock64 = SpecialReg("%clock64", u64)
globaltimer = SpecialReg("%globaltimer", u64)

ALL = {r.name: r for r in list(globals().values()) if isinstance(r, SpecialReg)}
