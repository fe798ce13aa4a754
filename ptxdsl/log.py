"""The `ptxdsl` logger: each compile stage's time and the cubin cache's hits and misses at DEBUG level, why a
module goes to the driver JIT at INFO level, and ptxas's notes on a serialised wgmma pipeline at WARNING level.

Silent unless the application configures logging (the logger carries a NullHandler, as libraries' loggers do):

    import logging
    logging.basicConfig()
    logging.getLogger("ptxdsl").setLevel(logging.DEBUG)

ptxdsl never imports `logging` itself (about 5 ms): a process that has not imported it cannot have configured it,
so until it is imported every call here returns at once.
"""
from __future__ import annotations

import contextlib
import sys
import time

NAME = "ptxdsl"
_DEBUG = 10
_logger = None


def logger():
    """The `ptxdsl` logging.Logger, or None while the process has not imported logging."""
    global _logger
    if _logger is None:
        logging = sys.modules.get("logging")
        if logging is None:
            return None
        _logger = logging.getLogger(NAME)
        if not any(isinstance(h, logging.NullHandler) for h in _logger.handlers):
            _logger.addHandler(logging.NullHandler())
    return _logger


def debug(msg: str, *args) -> None:
    lg = logger()
    if lg is not None:
        lg.debug(msg, *args)


def info(msg: str, *args) -> None:
    lg = logger()
    if lg is not None:
        lg.info(msg, *args)


def warning(msg: str, *args) -> None:
    lg = logger()
    if lg is not None:
        lg.warning(msg, *args)


@contextlib.contextmanager
def stage(name: str, what: str = ""):
    """Log `name what: N ms` at DEBUG level when the block ends (also when it raises)."""
    lg = logger()
    if lg is None or not lg.isEnabledFor(_DEBUG):
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        lg.debug("%s%s: %.3f ms", name, f" {what}" if what else "", 1e3 * (time.perf_counter() - t0))
