"""The ptxdsl pytest plugin (registered by the package's `pytest11` entry point; `-p no:ptxdsl.testing.plugin`
turns it off, `-p ptxdsl.testing.plugin` loads it from a checkout that is not installed).

- `@pytest.mark.gpu`: the test needs a CUDA device; without one it is skipped with the reason (never
  reported as passed). With PTXDSL_DEVICE=cpu the gpu tests run on the CPU interpreter instead
  (ptxdsl.interpret): `px.compile` and `DeviceArray` use it, no GPU needed.
- `ptx_golden` fixture: `ptx_golden(ptx, name=None)` holds emitted PTX equal to `golden/NAME.ptx` beside
  the test file (ini option `ptx_golden_dir` moves them); `--ptx-golden-update` or PTXDSL_REGEN_GOLDEN=1
  rewrites the files.
- `--sanitize=memcheck|racecheck|synccheck|initcheck` (comma-separated for several): each gpu test runs
  in a child process under compute-sanitizer with that tool instead of in this process, and fails when
  the tool reports an error (`ptxdsl.testing.sanitize`).
- pytest-xdist: with two or more GPUs, `-n auto` starts one worker per GPU, and each worker (whatever
  `-n` says) sees one GPU, the workers taking the GPUs in turn (`ptxdsl.testing.devices`). With one GPU
  or none nothing changes.
- `ptxdsl.testing.report.Report`s that ran cases print their summary line at the end of the session and
  write their summary_json, counts summed over the xdist workers.

Loading the plugin imports neither Hypothesis, numpy nor the CUDA driver; the driver is probed only when
the session has gpu tests.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from . import devices, golden, sanitize
from .report import REPORTS, Report

_WORKER_REPORTS = pytest.StashKey[list]()
_MERGED = pytest.StashKey[list]()
_TOOLS = pytest.StashKey[tuple]()
GPU_MARKER = "gpu: needs a CUDA device (skipped with the reason otherwise; run under --sanitize=TOOL by compute-sanitizer)"


DEVICE_ENV = "PTXDSL_DEVICE"


def cpu_requested() -> bool:
    """PTXDSL_DEVICE=cpu: gpu tests run on the CPU interpreter (ptxdsl.interpret) instead of a GPU."""
    return os.environ.get(DEVICE_ENV, "").strip().lower() == "cpu"


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device can be used (or PTXDSL_DEVICE=cpu puts the interpreter in its place); else why not
    (cached for the process)."""
    if cpu_requested():
        return None
    try:
        from ..runtime.driver import driver_available, unavailable_reason
    except ImportError as e:                # cuda-bindings missing entirely
        return f"cuda-bindings not importable: {e}"
    return None if driver_available() else unavailable_reason()


def pytest_addoption(parser):
    group = parser.getgroup("ptxdsl", "ptxdsl kernels")
    group.addoption("--ptx-golden-update", action="store_true", default=False,
                    help="ptx_golden: write the emitted PTX to the golden files instead of comparing")
    group.addoption("--sanitize", metavar="TOOL[,TOOL]", default=None,
                    help="run each gpu test in a child process under compute-sanitizer with these tools "
                         f"({', '.join(sanitize.TOOLS)}); $COMPUTE_SANITIZER names the binary")
    group.addoption("--sanitize-timeout", type=float, default=1800.0, metavar="SECONDS",
                    help="--sanitize: seconds one sanitized test may take (default 1800)")
    parser.addini("ptx_golden_dir", "ptx_golden: folder of the golden files, relative to the rootdir "
                                    "(default: golden/ beside each test file)", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", GPU_MARKER)
    device = getattr(config, "workerinput", {}).get("ptxdsl_device")
    if device is not None:                  # an xdist worker given one GPU, before anything calls cuInit
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    config.stash[_WORKER_REPORTS] = []
    config.stash[_MERGED] = []
    if cpu_requested():                     # the interpreter is the device: DeviceArray and px.compile use it
        from ..interpret import CPU

        CPU.set_current()
    value = config.getoption("sanitize")
    if value and not os.environ.get(sanitize.CHILD_ENV):
        try:
            tools = sanitize.parse_tools(value)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        if sanitize.find() is None:
            raise pytest.UsageError("--sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER, or put the "
                                    "CUDA toolkit's bin/ on PATH)")
        config.stash[_TOOLS] = tools


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Under --sanitize, a gpu test runs in sanitized child processes (one per tool) instead of here."""
    tools = pyfuncitem.config.stash.get(_TOOLS, ())
    if not tools or not pyfuncitem.get_closest_marker("gpu"):
        return None
    config = pyfuncitem.config
    extra = ["-n", "0"] if config.pluginmanager.hasplugin("xdist") else []      # the child runs one test itself
    extra += [f"--rootdir={config.rootpath}"] + (["-c", str(config.inipath)] if config.inipath else [])
    for name in ("hypothesis_profile", "hypothesis_seed"):
        value = getattr(config.option, name, None)
        if value is not None:
            extra.append(f"--{name.replace('_', '-')}={value}")
    verdicts = [sanitize.run(sanitize.find(), tool, pyfuncitem.nodeid, cwd=config.rootpath, extra_args=extra,
                             timeout=config.getoption("sanitize_timeout")) for tool in tools]
    bad = [v for v in verdicts if v.outcome in ("failed", "error")]
    if bad:
        pytest.fail("\n\n".join(v.message for v in bad), pytrace=False)
    if all(v.outcome == "skipped" for v in verdicts):
        pytest.skip(f"under compute-sanitizer: {verdicts[0].message}")
    return True


@pytest.fixture
def ptx_golden(request):
    """ptx_golden(ptx, name=None): hold PTX (text, a PTX object, or a kernel to emit) equal to NAME.ptx
    (default: the test's name) in the golden folder; --ptx-golden-update or PTXDSL_REGEN_GOLDEN=1 rewrites it."""
    config = request.config
    update = config.getoption("ptx_golden_update") or os.environ.get("PTXDSL_REGEN_GOLDEN", "") not in ("", "0")
    folder = config.getini("ptx_golden_dir")
    base = config.rootpath / folder if folder else Path(request.node.path).parent / "golden"

    def check(ptx, name: str | None = None) -> None:
        stem = name or re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
        golden.check_golden(golden.ptx_text(ptx), base / f"{stem}.ptx", update=update)

    return check


# --- pytest-xdist: one worker per GPU --------------------------------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """-n auto: one worker per GPU when there are two or more (else xdist's own choice)."""
    found = devices.visible()
    return len(found) if len(found) >= 2 else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Give each worker one GPU, in turn, when there are two or more."""
    found = devices.visible()
    if len(found) >= 2:
        node.workerinput["ptxdsl_device"] = devices.device_for(node.workerinput["workerid"], found)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    reports = getattr(node, "workeroutput", {}).get("ptxdsl_reports")
    if reports:
        node.config.stash[_WORKER_REPORTS].append(reports)


# --- reports -----------------------------------------------------------------------------------

def pytest_sessionfinish(session):
    config = session.config
    local = {r.name: r.as_dict() for r in REPORTS.values() if r.runs}
    if hasattr(config, "workerinput"):          # a worker: the controller merges and writes
        config.workeroutput["ptxdsl_reports"] = local
        return
    parts: dict[str, list] = {name: [data] for name, data in local.items()}
    for worker in config.stash.get(_WORKER_REPORTS, []):
        for name, data in worker.items():
            parts.setdefault(name, []).append(data)
    merged = [Report.merged(p) for _, p in sorted(parts.items())]
    for report in merged:
        report.write_summary()
    config.stash[_MERGED] = merged


def pytest_terminal_summary(terminalreporter, config):
    for report in config.stash.get(_MERGED, []):
        workers = f" over {report.workers} workers" if report.workers > 1 else ""
        terminalreporter.write_line(report.summary() + workers)
