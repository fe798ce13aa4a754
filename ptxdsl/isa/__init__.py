"""The instruction families, one module each; every op is data with its own emit()."""
from . import bulk, cluster, control, core, fence, mbarrier, policy, tensormap  # noqa: F401
