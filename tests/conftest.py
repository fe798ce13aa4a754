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
