"""The mutation campaign (tests/mutants.py) on the CPU interpreter: every mutant run with verify=False on
ptxdsl.interpret, its output compared with the unmutated kernel's, and, given the GPU campaign's JSON, the two
verdicts side by side.

    python tests/mutants_interpret.py [--gpu DIR/mutants.json] [--json FILE] [FAMILY ...]

Interpreter outcomes: correct, wrong data, deadlock (the line every warp waits at), fault (an access outside
any buffer or misaligned, or a TMA box the hardware refuses), uninitialised mbarrier, launch error. With
--gpu, the table crosses them with the GPU's outcomes, and the lines a hang was caught at on the GPU (the
debug watchdog names the waiting line) are compared with the line the interpreter's deadlock names: exit 1
when a mutant that hung on the GPU is not a deadlock here, or is one at another line.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples"))

import mutants as campaign  # noqa: E402

import ptxdsl as px  # noqa: E402
from ptxdsl.interpret import CPU, Deadlock, InterpretError, MemoryFault  # noqa: E402

LINE = re.compile(r"([\w.-]+\.py:\d+)")


def outcome(m, reference) -> tuple[str, str]:
    """(outcome, where) of one mutant on the interpreter: `where` is the source line a deadlock or fault names."""
    fam = campaign.FAMILIES[m.family]
    try:
        out = campaign._run_on_gpu(fam, campaign.mutate(m, debug=False), m.extra)[0]
    except Deadlock as e:
        return "deadlock", str(e.loc or "")
    except MemoryFault as e:
        return "fault", str(e.loc or "")
    except InterpretError as e:
        return (e.rule or "interpret error").removeprefix("interpret."), str(e.loc or "")
    except px.LaunchError as e:
        return "launch error", e.rule or ""
    return ("correct" if out.tobytes() == reference.tobytes() else "wrong data"), ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*")
    ap.add_argument("--gpu", help="the GPU campaign's mutants.json to compare with")
    ap.add_argument("--json", help="write every mutant's interpreter outcome here")
    args = ap.parse_args(argv)
    campaign.REPEATS = 1                        # the interpreter is deterministic: one launch tells
    os.environ["PTXDSL_LAUNCH_CHECKS"] = "0"    # as in the GPU campaign: the device (here, the interpreter) decides
    found = campaign.mutants(args.families or None)
    rows = {}
    t0 = time.perf_counter()
    with CPU:
        refs = {}
        for m in found:
            if m.family not in refs:
                fam = campaign.FAMILIES[m.family]
                refs[m.family] = campaign._run_on_gpu(fam, campaign.kernel_of(m.family, False), ())[0]
            got, where = outcome(m, refs[m.family])
            rows[m.id] = {"id": m.id, "interpreter": got, "where": where}
    seconds = time.perf_counter() - t0
    counts = collections.Counter(r["interpreter"] for r in rows.values())
    print(f"{len(rows)} mutants on the interpreter in {seconds:.0f} s: "
          + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
    if args.json:
        Path(args.json).write_text(json.dumps(list(rows.values()), indent=1) + "\n")
    if not args.gpu:
        return 0
    gpu = json.loads(Path(args.gpu).read_text())
    gpu = gpu.get("mutants", gpu) if isinstance(gpu, dict) else gpu
    table = collections.Counter()
    bad = []
    for g in gpu:
        r = rows.get(g.get("id"))
        if r is None or "gpu" not in g:
            continue
        table[(g["gpu"], r["interpreter"])] += 1
        if g["gpu"] == "hang caught by watchdog":
            lines = LINE.findall(g.get("detail", ""))     # the waiting line the watchdog named (file:line)
            if r["interpreter"] != "deadlock" or (lines and lines[0] != r["where"]):
                bad.append((g["id"], lines[:1], r["interpreter"], r["where"]))
    print("GPU outcome x interpreter outcome:")
    for (gk, ik), n in sorted(table.items()):
        print(f"  {n:4d}  {gk:<26} {ik}")
    for mid, gl, ik, where in bad:
        print(f"  hung on the GPU at {gl[0] if gl else '?'}, interpreter: {ik} {where}: {mid}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
