"""The instruction families, one module each; every op is data with its own emit()."""
from . import bulk, cluster, core, fence, mbarrier  # noqa: F401
