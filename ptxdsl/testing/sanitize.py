"""Run one pytest test under NVIDIA compute-sanitizer and read its verdict (the plugin's --sanitize).

The test runs in a child process, `compute-sanitizer --tool TOOL --target-processes all ... python -m
pytest NODEID`, with PTXDSL_SANITIZER=TOOL (tests that trap on purpose can skip themselves under it) and
PTXDSL_LINE_INFO=1 (reports name the builder's lines). The run passes when the test passed and every
process's log says 0 errors (racecheck: 0 errors and 0 warnings).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
CHILD_ENV = "PTXDSL_SANITIZE_CHILD"      # set in the child: its plugin runs the test itself

_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?$", re.M)
_HAZARDS = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", re.M)
_KERNEL_LINE = re.compile(r"[A-Za-z0-9_]+\+0x[0-9a-f]+ in (\S+\.(?:py|ptxd):\d+)")
_SKIPPED = re.compile(r"^SKIPPED \[\d+\] [^\n]*?:\d+: (.*)$", re.M)
_TALLY = re.compile(r"\b(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")


def find() -> str | None:
    """compute-sanitizer: $COMPUTE_SANITIZER, else on PATH, else the newest /usr/local/cuda*/bin one."""
    if os.environ.get("COMPUTE_SANITIZER"):
        return os.environ["COMPUTE_SANITIZER"]
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"))
    return candidates[-1] if candidates else None


def parse_tools(value: str) -> tuple[str, ...]:
    """'memcheck,racecheck' -> ('memcheck', 'racecheck'); ValueError naming a tool that does not exist."""
    tools = tuple(t.strip() for t in value.split(",") if t.strip())
    bad = [t for t in tools if t not in TOOLS]
    if bad or not tools:
        raise ValueError(f"--sanitize={value!r}: expected one or more of {', '.join(TOOLS)}, comma separated")
    return tools


def errors_in(text: str) -> int | None:
    """Errors over a sanitizer log (several processes' summaries add up); None when it has no summary."""
    counts = [int(n) for n in _ERRORS.findall(text)]
    counts += [int(e) + int(w) for e, w in _HAZARDS.findall(text)]
    return sum(counts) if counts else None


def kernel_lines(text: str) -> list[str]:
    """The .py/.ptxd lines the device frames of the reports name ('test_x.py:42'), in order, once each."""
    return list(dict.fromkeys(os.path.basename(m) for m in _KERNEL_LINE.findall(text)))


@dataclass
class Verdict:
    """What one sanitized run of a test came to: outcome is passed, failed, skipped or error."""

    tool: str
    outcome: str
    errors: int | None
    message: str


def command(sanitizer: str, tool: str, log_pattern: str, pytest_args: list[str]) -> list[str]:
    """The compute-sanitizer command line that runs `python -m pytest` with pytest_args under `tool`."""
    return wrap(sanitizer, tool, log_pattern, [sys.executable, "-m", "pytest", *pytest_args])


def wrap(sanitizer: str, tool: str, log_pattern: str, argv: list[str]) -> list[str]:
    """The compute-sanitizer command line that runs `argv` (and the processes it starts) under `tool`, each
    process's report in `log_pattern` (%p: its pid). memcheck leaves driver API errors to the program (a ptxdsl
    error raised on purpose is not a memory error)."""
    api = ["--report-api-errors", "no"] if tool == "memcheck" else []
    return [sanitizer, "--tool", tool, *api, "--target-processes", "all", "--print-limit", "100",
            "--log-file", log_pattern, *argv]


def run(sanitizer: str, tool: str, nodeid: str, *, cwd, extra_args=(), timeout: float | None = None) -> Verdict:
    """Run the test `nodeid` under `tool` in a child process (from `cwd`, the rootdir) and judge it."""
    logs = tempfile.mkdtemp(prefix=f"ptxdsl-{tool}-")
    args = [nodeid, "-p", "no:cacheprovider", "-p", "ptxdsl.testing.plugin", "-q", "-rs", *extra_args]
    env = dict(os.environ, PTXDSL_SANITIZER=tool, PTXDSL_LINE_INFO="1", **{CHILD_ENV: tool})
    try:
        res = subprocess.run(command(sanitizer, tool, os.path.join(logs, "%p.log"), args), cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Verdict(tool, "failed", None, f"compute-sanitizer {tool}: no verdict within {timeout:.0f} s "
                                             f"(logs in {logs})\n{out[-3000:]}")
    log = "".join(open(p, errors="replace").read() for p in sorted(glob.glob(os.path.join(logs, "*.log"))))
    output = res.stdout + res.stderr
    errors = errors_in(log)
    tally = {kind.rstrip("s"): int(n) for n, kind in _TALLY.findall(output.strip().splitlines()[-1] if output.strip()
                                                                      else "")}
    if res.returncode == 5:
        return Verdict(tool, "error", errors, f"the sanitized run collected no test for {nodeid}:\n{output[-3000:]}")
    if res.returncode != 0 or tally.get("failed") or tally.get("error"):
        return Verdict(tool, "failed", errors, f"the test failed under compute-sanitizer {tool} (pytest exit "
                                               f"{res.returncode}; logs in {logs}):\n{output[-4000:]}\n{log[:3000]}")
    if errors is None:
        return Verdict(tool, "error", None, f"compute-sanitizer {tool} wrote no summary (exit {res.returncode}; "
                                            f"logs in {logs}):\n{output[-3000:]}")
    if errors:
        where = ", ".join(kernel_lines(log)) or "no kernel line (build with line info)"
        return Verdict(tool, "failed", errors, f"compute-sanitizer {tool} reported {errors} errors at {where} "
                                               f"(logs in {logs}):\n{log[:6000]}")
    shutil.rmtree(logs, ignore_errors=True)
    if tally.get("skipped") and not tally.get("passed"):
        reasons = _SKIPPED.findall(output)
        return Verdict(tool, "skipped", 0, reasons[0] if reasons else "skipped in the sanitized run")
    return Verdict(tool, "passed", 0, "")
