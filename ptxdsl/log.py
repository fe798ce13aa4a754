"""The `ptxdsl` logger: each compile stage's time and the cubin cache's hits and misses, at debug level.

Silent unless the application configures logging (the logger carries a NullHandler, as libraries do):

    import logging
    logging.basicConfig()
    logging.getLogger("ptxdsl").setLevel(logging.DEBUG)
"""
from __future__ import annotations

import contextlib
import logging
import time

logger = logging.getLogger("ptxdsl")
logger.addHandler(logging.NullHandler())


@contextlib.contextmanager
def stage(name: str, what: str = ""):
    """Log `name what: N ms` at debug level when the block ends (also when it raises)."""
    if not logger.isEnabledFor(logging.DEBUG):
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        logger.debug("%s%s: %.3f ms", name, f" {what}" if what else "", 1e3 * (time.perf_counter() - t0))
