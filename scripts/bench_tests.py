"""How long the test tiers take on this machine, against their targets (a script, not a timed test).

    python scripts/bench_tests.py            # the fast tier: target 60 s on 2 cores
    python scripts/bench_tests.py --full     # also the README's full test command: target 300 s
    python scripts/bench_tests.py --slowest 20

Runs each tier's command exactly as the README gives it, from the repository root, and prints
the wall time, the target and their ratio, pytest's closing line and the slowest tests of the
tier (pytest's ``--durations``), so a test that grew slow can be found and marked ``slow``. Exits
1 when a tier failed or ran over its target, 0 otherwise. Timings depend on the machine and its
load: run it on an idle 2-core machine (the size of this project's CI) to compare with the
targets.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: (tier, command as in the README, target wall time in seconds)
FAST = ("fast tier", 'python -m pytest -m "not slow" -n 2', 60.0)
FULL = ("full run", "python -m pytest -n 2 --dist loadfile", 300.0)


def run_tier(name: str, command: str, target_s: float, slowest: int) -> bool:
    """Run ``command`` and print its wall time against ``target_s``; True if it passed within it."""
    argv = shlex.split(command)
    argv[0] = sys.executable if argv[0] == "python" else argv[0]
    argv += ["-q", f"--durations={slowest}", "--durations-min=0.5"]
    print(f"== {name}: {command}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall_s = time.perf_counter() - start
    lines = proc.stdout.splitlines()
    durations = []
    if any("slowest" in line and "durations" in line for line in lines):
        start_at = next(i for i, line in enumerate(lines) if "slowest" in line and "durations" in line)
        durations = [line for line in lines[start_at + 1:] if re.match(r"^\d+\.\d+s ", line)][:slowest]
    closing = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error)", line)), "")
    for line in durations:
        print(f"   {line}")
    ok = proc.returncode == 0 and wall_s <= target_s
    print(f"   {closing.strip('= ')}")
    print(f"   wall {wall_s:.1f} s, target {target_s:.0f} s: {wall_s / target_s:.2f} of the target "
          f"({'within' if wall_s <= target_s else 'OVER'}; pytest exit {proc.returncode})", flush=True)
    if proc.returncode != 0:
        print("\n".join(lines[-40:]))
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="also time the README's full test command")
    p.add_argument("--slowest", type=int, default=10, metavar="N", help="list the N slowest tests of each tier")
    args = p.parse_args(argv)
    if args.slowest < 0:
        p.error(f"--slowest must be ≥ 0, got {args.slowest}")
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (targets assume an idle 2-core machine)")
    ok = run_tier(*FAST, args.slowest)
    if args.full:
        ok = run_tier(*FULL, args.slowest) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
