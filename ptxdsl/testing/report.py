"""`Report`: counts the cases a property test ran and the ones that failed, across pytest-xdist workers.

    report = Report("transpose", summary_json="out/transpose-summary.json")
    report.ran(case)                                  # every case
    report.mismatch(case, [("smem", {...})])          # a failing one, with its problems

Each report registers itself by name; the ptxdsl pytest plugin prints the summary line of every report
that ran a case at the end of the session and writes its `summary_json`. Under pytest-xdist each
worker hands its counts to the controller, which merges them (distinct cases and mismatches are counted
once however many workers saw them). Nothing here imports numpy, Hypothesis or the CUDA driver.
"""
from __future__ import annotations

import hashlib
import json
import os

REPORTS: dict[str, "Report"] = {}


def _key(case) -> str:
    """A case's identity across processes: a hash of its repr (cases are plain data)."""
    return hashlib.sha1(repr(case).encode()).hexdigest()[:20]


def _jsonable(case):
    from dataclasses import asdict, is_dataclass

    return asdict(case) if is_dataclass(case) else repr(case)


class Report:
    """The cases one property suite ran and the distinct ones that failed.

    jsonl: a file that gets one JSON line per distinct failing case (at most `per_category` per problem
    category, and always the shrunk, "minimal", one), written with a single append so that several
    processes can share it. summary_json: where the session's summary goes. snippet: case -> the code
    that reproduces it (stored with each failing case). meta: extra facts for the summary (a "seed" is
    printed in the summary line, a "hint" after it).
    """

    def __init__(self, name: str, *, jsonl: str | None = None, summary_json: str | None = None,
                 per_category: int = 200, snippet=repr, meta: dict | None = None, register: bool = True):
        self.name = name
        self.jsonl = jsonl
        self.summary_json = summary_json
        self.per_category = per_category
        self.snippet = snippet
        self.meta = dict(meta or {})
        self.runs = 0
        self.distinct: set[str] = set()
        self.bad: dict[str, list[str]] = {}           # case key -> problem categories
        self.minimal: list[str] = []                  # snippets of the shrunk failing cases
        self.workers = 1                              # processes whose counts are in this report
        if register:
            REPORTS[name] = self

    def ran(self, case) -> None:
        """Count one case run."""
        self.runs += 1
        self.distinct.add(_key(case))

    def mismatch(self, case, problems, test: str = "", minimal: bool = False) -> None:
        """Record a failing case: problems is [(category, details dict)]; minimal marks Hypothesis's final
        (shrunk) replay of a failure."""
        key = _key(case)
        new = key not in self.bad
        if new:
            self.bad[key] = [c for c, _ in problems]
        if minimal:
            self.minimal.append(self.snippet(case))
        if not self.jsonl or not (new or minimal):
            return
        counts = self.by_category
        if not minimal and all(counts[c] > self.per_category for c in self.bad[key]):
            return
        record = {"test": test, "minimal": minimal, "categories": self.bad[key], "case": _jsonable(case),
                  "problems": [{"category": c, **d} for c, d in problems], "snippet": self.snippet(case)}
        fd = os.open(self.jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())     # one write: lines from workers never mix
        finally:
            os.close(fd)

    @property
    def by_category(self) -> dict[str, int]:
        """Distinct failing cases per problem category."""
        out: dict[str, int] = {}
        for cats in self.bad.values():
            for c in cats:
                out[c] = out.get(c, 0) + 1
        return out

    def summary(self, seed=None) -> str:
        """'NAME: N cases run (D distinct), M mismatching (categories)[, seed=S][ HINT]'."""
        seed = self.meta.get("seed") if seed is None else seed
        cats = ", ".join(f"{c}: {n}" for c, n in sorted(self.by_category.items())) or "none"
        hint = self.meta.get("hint")
        return (f"{self.name}: {self.runs} cases run ({len(self.distinct)} distinct), {len(self.bad)} mismatching "
                f"({cats})" + (f", seed={seed}" if seed is not None else "") + (f" ({hint})" if hint else ""))

    def as_dict(self) -> dict:
        """Everything another process needs to merge this report (pytest-xdist's workeroutput)."""
        return {"name": self.name, "jsonl": self.jsonl, "summary_json": self.summary_json, "meta": self.meta,
                "runs": self.runs, "distinct": sorted(self.distinct), "bad": self.bad, "minimal": self.minimal,
                "workers": self.workers}

    def merge(self, data: dict) -> "Report":
        """Add another process's as_dict() to this report."""
        self.runs += data["runs"]
        self.distinct.update(data["distinct"])
        for key, cats in data["bad"].items():
            self.bad.setdefault(key, cats)
        self.minimal += data["minimal"]
        self.jsonl = self.jsonl or data["jsonl"]
        self.summary_json = self.summary_json or data["summary_json"]
        self.meta = {**data["meta"], **self.meta}
        self.workers += data["workers"]
        return self

    @classmethod
    def merged(cls, parts: list[dict]) -> "Report":
        """One report from the as_dict() of each process that ran the suite (it is not registered)."""
        report = cls(parts[0]["name"], register=False)
        report.workers = 0
        for part in parts:
            report.merge(part)
        return report

    def summary_dict(self) -> dict:
        """The summary written to summary_json."""
        return {"summary": self.summary(), "seed": self.meta.get("seed"), "cases_run": self.runs,
                "distinct": len(self.distinct), "mismatching": len(self.bad), "by_category": self.by_category,
                "minimal": self.minimal, "workers": self.workers}

    def write_summary(self) -> None:
        """Write summary_dict() to summary_json, when set."""
        if self.summary_json:
            with open(self.summary_json, "w") as f:
                json.dump(self.summary_dict(), f, indent=1)
