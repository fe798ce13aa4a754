"""Test set-up: the ptxdsl pytest plugin (the gpu marker's skip rule, ptx_golden, --sanitize, one xdist
worker per GPU), pytester for the plugin's own tests, the Hypothesis profiles, and one differential seed
for every process of a session."""
import os
import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# Loaded here too, so the suite runs from a checkout that is not pip-installed (the entry point is named
# after the module, so an installed plugin is not registered twice).
pytest_plugins = ["ptxdsl.testing.plugin", "pytester"]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None)
settings.register_profile("gpu", max_examples=200, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# The differential suite's seed, drawn once here so that pytest-xdist workers and sanitized child
# processes (which inherit the environment) draw the same cases and report one seed.
if not os.environ.get("PTXDSL_DIFF_SEED"):
    os.environ["PTXDSL_DIFF_SEED"] = str(random.SystemRandom().randrange(2**32))


def pytest_runtest_setup(item):
    """A test marked nvdisasm needs the `sass` extra: without it, it skips with the reason (only the `test` extra
    installed), unless PTXDSL_REQUIRE_NVDISASM=1 (CI installs the extra), where a missing nvdisasm fails it."""
    mark = item.get_closest_marker("nvdisasm")
    if mark is None:
        return
    import pytest

    from ptxdsl import sass

    sass.nvdisasm_path.cache_clear()
    try:
        sass.nvdisasm_path()
        missing = None
        if "wheel" in mark.args and sass._from_wheel() is None:
            missing = "the nvidia-cuda-nvdisasm wheel is not installed (pip install 'ptxdsl[sass]')"
    except sass.SassError as e:
        missing = str(e)
    if missing is None:
        return
    if os.environ.get("PTXDSL_REQUIRE_NVDISASM") == "1":
        pytest.fail(f"{missing} (PTXDSL_REQUIRE_NVDISASM=1: the sass extra must be installed)", pytrace=False)
    pytest.skip(missing)
