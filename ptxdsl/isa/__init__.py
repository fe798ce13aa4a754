"""The instruction families, one module each: every op is one declaration (ptxdsl.isa.decl)."""
from . import bulk, cluster, control, core, fence, mbarrier, policy, tensormap, warp, wgmma  # noqa: F401
from .decl import OPS, Op

__all__ = ["OPS", "Op"]
