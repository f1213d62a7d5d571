#!/usr/bin/env python
"""Each workshop lab's live runs on this machine: predicted before they run, then measured.

    python scripts/time_labs.py [--lab labs/02_gemm ...] [--no-calibrate] [--out FILE.csv]

As a lab does, it first calibrates this device (``perfkit calibrate --quick``, not saved), then for
every live run of the labs (``perfkit.book.workshop.LIVE``, the labs' quick settings) prints the
time perfkit's models predict here, the time the run took, their ratio, and the prediction for a T4
beside them. The issue's target is the prediction within 3× of the measurement; the script exits 1
when a run misses it. On a GPU this is the labs' timing evidence (the GPU run script's ``labs`` step).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perfkit as pk  # noqa: E402
from perfkit import placement  # noqa: E402
from perfkit.book import workshop  # noqa: E402
from perfkit.experiments import registry  # noqa: E402

TARGET = 3.0  # the prediction within 3× of the measured run
CPU_LAB_S, T4_LAB_S = 180, 600  # a lab's whole run: 3 minutes on a laptop CPU, 10 on a T4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", action="append", choices=list(workshop.LIVE), help="only this lab (repeatable)")
    ap.add_argument("--no-calibrate", action="store_true", help="use the datasheet (GPU) or quick measures (CPU)")
    ap.add_argument("--out", type=Path, help="write the rows to this CSV file")
    args = ap.parse_args(argv)
    if args.out is not None and not args.out.parent.is_dir():
        ap.error(f"--out: folder {args.out.parent} does not exist")
    spec = pk.current_device() if args.no_calibrate else pk.calibrate(quick=True, save=False, progress=False).spec
    t4 = pk.device_spec(workshop.ROOM_GPU)
    print(f"device: {spec.name}{'' if args.no_calibrate else ' (calibrated, quick)'}")
    rows = []
    for lab in args.lab or list(workshop.LIVE):
        for name in workshop.LIVE[lab]:
            settings = workshop.quick_settings(name, spec)
            predicted = workshop.estimate_run(name, spec, **settings)
            on_t4 = workshop.estimate_run(name, t4, **workshop.quick_settings(name, t4))
            with warnings.catch_warnings(), placement.use(spec=spec):
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                registry.get(name)(**settings, progress=False)
                measured = time.perf_counter() - t0
            ratio = measured / predicted.run_s
            rows.append({"lab": lab, "experiment": name, "device": spec.name, "points": predicted.points,
                         "predicted_s": predicted.run_s, "measured_s": measured, "ratio": ratio,
                         "within_target": 1 / TARGET <= ratio <= TARGET, "t4_predicted_s": on_t4.run_s})
            r = rows[-1]
            print(f"{lab:22} {name:18} {r['points']:4d} points  predicted {r['predicted_s']:6.2f} s  "
                  f"measured {measured:6.2f} s  ×{ratio:4.2f} {'ok' if r['within_target'] else 'MISSED'}  "
                  f"(T4: {on_t4.run_s:5.1f} s predicted)", flush=True)
    frame = pd.DataFrame(rows)
    if args.out is not None:
        frame.to_csv(args.out, index=False)
    for lab, runs in frame.groupby("lab", sort=False):
        print(f"{lab:22} live runs: {runs['measured_s'].sum():5.1f} s measured here, "
              f"{runs['t4_predicted_s'].sum():5.1f} s predicted on a T4 (a lab: ≤ {CPU_LAB_S / 60:g} min on a CPU, "
              f"≤ {T4_LAB_S / 60:g} min on a T4, with its calibration)")
    total = frame["measured_s"].sum()
    print(f"all live runs: {total:.1f} s measured, {frame['predicted_s'].sum():.1f} s predicted; "
          f"ratio median {frame['ratio'].median():.2f}, range {frame['ratio'].min():.2f}–{frame['ratio'].max():.2f} "
          f"(target: within {TARGET:g}×)")
    return 0 if frame["within_target"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
