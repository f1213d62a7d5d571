#!/usr/bin/env python
"""Will a short GPU loan's record step fit its budget? Predicted here, checked against the last loan.

    python scripts/plan_loan.py [--device H200] [--experiments "NAME ..."] [--budget 300]

For each experiment of the loan (default: ``LOAN_EXPERIMENTS`` in ``scripts/gpu_run.sh``, what
``gpu_run.sh --loan`` records) it prints the wall time perfkit's dry-run estimate predicts on the
device (:func:`perfkit.book.workshop.estimate.estimate_run`, run on this CPU with meta tensors) and,
where ``data/<slug>/`` holds an earlier recording of it, how long that recording took
(``finished_at − recorded_at``, whole seconds; resumed recordings left out). The estimate's own error
is printed from every experiment recorded on that device (measured ÷ predicted, median and total), and
the plan's predicted total is scaled by that total ratio before it is held to ``--budget``. Exit 1
when the scaled total is over the budget, 2 on bad input. Nothing is timed here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import statistics
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import perfkit as pk  # noqa: E402
from perfkit.book.workshop.estimate import estimate_run  # noqa: E402
from perfkit.data import data_root, device_slug, recordings  # noqa: E402
from perfkit.devices import match_driver_name  # noqa: E402
from perfkit.experiments import registry  # noqa: E402


def loan_experiments(script: Path = REPO / "scripts" / "gpu_run.sh") -> list[str]:
    """The names ``gpu_run.sh --loan`` records (its ``LOAN_EXPERIMENTS`` line)."""
    found = re.search(r'^LOAN_EXPERIMENTS="([^"]*)"', script.read_text(), re.MULTILINE)
    if found is None:
        raise LookupError(f"{script}: no LOAN_EXPERIMENTS=\"...\" line")
    return found.group(1).split()


def recorded_s(meta: dict) -> float:
    """Seconds an earlier recording took; NaN if it was interrupted or resumed."""
    if not meta.get("complete") or meta.get("resumed_at") or not meta.get("finished_at"):
        return math.nan
    start, end = (dt.datetime.fromisoformat(meta[k]) for k in ("recorded_at", "finished_at"))
    return (end - start).total_seconds()


def predicted_s(name: str, spec) -> float:
    """The dry-run estimate on ``spec`` (seconds); NaN where the experiment cannot run dry here, or times
    nothing through perfkit's timer (it keeps its own clock, as ``model_steps`` does: nothing to price)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimate = estimate_run(name, spec)
    except Exception:  # noqa: BLE001  (a kernel that needs CuPy/CUDA to exist: not priced)
        return math.nan
    return estimate.run_s if estimate.points else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="H200", help="the loan's GPU, a perfkit device name (default H200)")
    ap.add_argument("--experiments", default=None, help='names, space-separated (default: gpu_run.sh --loan\'s)')
    ap.add_argument("--budget", type=int, default=300, help="the record step's budget in seconds (default 300)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the estimate's check against earlier recordings (faster; the total is not scaled)")
    args = ap.parse_args(argv)
    try:
        spec = pk.device_spec(args.device)
        names = args.experiments.split() if args.experiments is not None else loan_experiments()
        for n in names:
            registry.get(n)
    except (LookupError, ValueError, TypeError, ImportError, OSError) as e:
        print(f"plan_loan.py: {e}", file=sys.stderr)
        return 2
    if not names or args.budget <= 0:
        print("plan_loan.py: give at least one experiment and a positive --budget", file=sys.stderr)
        return 2

    table = recordings()
    mine = table[table["device_name"].map(lambda d: device_slug(str(d)) == device_slug(spec.name)
                                          or match_driver_name(str(d)) == spec.name)]
    slugs = sorted(set(mine["device_slug"]))
    metas = {p.stem: json.loads(p.read_text()) for s in slugs for p in (data_root() / s).glob("*.json")
             if p.stem in registry.REGISTRY.names()}
    past = {n: recorded_s(m) for n, m in metas.items()}

    pairs = [] if args.no_check else [(past[n], predicted_s(n, spec)) for n in sorted(past)
                                      if not math.isnan(past[n])]
    pairs = [(m, p) for m, p in pairs if not math.isnan(p)]
    ratio = sum(m for m, _ in pairs) / sum(p for _, p in pairs) if pairs else math.nan
    if pairs:
        print(f"the estimate against the last recordings on {', '.join(slugs)} ({len(pairs)} experiments): "
              f"measured ÷ predicted median {statistics.median(m / p for m, p in pairs):.2f}, "
              f"total {sum(m for m, _ in pairs):.0f} s ÷ {sum(p for _, p in pairs):.0f} s = {ratio:.2f}")
    elif not args.no_check:
        print(f"no earlier recording on {spec.name}: the estimate is not checked")

    print(f"\n{'experiment':24s} {'predicted':>10s} {'last time':>10s}")
    total, unpriced = 0.0, []
    for n in names:
        p, last = predicted_s(n, spec), past.get(n, math.nan)
        total += 0.0 if math.isnan(p) else p
        unpriced += [n] if math.isnan(p) else []
        print(f"{n:24s} {'' if math.isnan(p) else f'{p:9.1f}s':>10s} {'' if math.isnan(last) else f'{last:9.0f}s':>10s}"
              + ("   (not priced: it cannot run dry here, or keeps its own clock)" if math.isnan(p) else ""))
    scaled = total * (ratio if not math.isnan(ratio) else 1.0)
    verdict = "fits" if scaled <= args.budget else "does NOT fit"
    scaling = "" if math.isnan(ratio) else f"; × {ratio:.2f} (the estimate's error above) = {scaled:.0f} s"
    left = f"; not priced: {', '.join(unpriced)}" if unpriced else ""
    print(f"\npredicted {total:.0f} s{scaling} against the {args.budget} s budget: {verdict}{left}")
    return 0 if scaled <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
