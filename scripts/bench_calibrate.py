"""How good and how fast is the calibration on this machine? Prints ratios measured in one run.

    python scripts/bench_calibrate.py [--quick] [--dtype D ...] [--strict]

1. Runs ``pk.calibrate()`` (the default run; nothing is saved) and prints its wall-clock time
   against the issue's target (≤ 120 s on a 2-core CPU machine; about a minute on a GPU).
2. Then, in the same process and on the same device, runs the wide grid search per dtype (48
   GEMMs, no model guidance but the time window) and prints guided best / wide best against the
   target (≥ 0.90): how close the model-guided search gets with a fraction of the timings.
3. Prints the models' error on the validation set before and after calibration.

Timings on a shared machine are noisy, so this is a script that prints, not a test that asserts;
``--strict`` exits 1 when a target is missed (for a quiet GPU machine).
"""

from __future__ import annotations

import argparse
import sys
import time

import perfkit as pk
from perfkit.calibration import probes
from perfkit.calibration.search import time_window_s, wide_search
from perfkit.placement import measured_on, resolve_device
from perfkit.units import format_percent, format_rate

TIME_TARGET_S = 120.0
RATIO_TARGET = 0.90


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the quick calibration (a quick window for the wide search)")
    p.add_argument("--dtype", action="append", default=None, help="dtypes to calibrate (default: all this device runs)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)

    start = time.perf_counter()
    cal = pk.calibrate(quick=args.quick, dtypes=args.dtype, save=False, progress=False)
    elapsed_s = time.perf_counter() - start
    print(cal)
    ok = elapsed_s <= TIME_TARGET_S
    print(f"\ncalibration wall-clock: {elapsed_s:.1f} s (target ≤ {TIME_TARGET_S:.0f} s) {'PASS' if ok else 'FAIL'}")

    device, base = resolve_device("auto"), measured_on()
    window = time_window_s(base, args.quick)
    print(f"\nguided search against the wide grid, on {base.label}, same run:")
    for d, guided in cal.searches.items():
        unit = "OP" if d == "int8" else "FLOP"
        wide = wide_search(probes.gemm_timer(d, device, quick=args.quick), base, d, window_s=window,
                           max_bytes=probes.free_bytes(device))
        ratio = guided.best.flop_s / wide.best.flop_s
        passed = ratio >= RATIO_TARGET
        ok &= passed
        g, w = guided.best, wide.best
        print(f"  {d:<9} guided {format_rate(g.flop_s, unit):>15} ({g.M}×{g.N}×{g.K}, {len(guided.trials)} GEMMs)  "
              f"wide {format_rate(w.flop_s, unit):>15} ({w.M}×{w.N}×{w.K}, {len(wide.trials)} GEMMs)  "
              f"ratio {ratio:.3f} (target ≥ {RATIO_TARGET}) {'PASS' if passed else 'FAIL'}")

    v = cal.profile.validation
    print(f"\nmodel error on {v['after']['n']} validation ops: median {format_percent(v['before']['median_abs'])} → "
          f"{format_percent(v['after']['median_abs'])}, 90th percentile {format_percent(v['before']['p90_abs'])} → "
          f"{format_percent(v['after']['p90_abs'])} (before → after calibration)")
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
