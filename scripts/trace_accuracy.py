"""perfkit's model against third-party profiler traces, op instance by op instance.

For every trace in ``../shared/reference/traces`` (or ``--traces DIR``) on its own GPU (H100, V100, MI300X
and its virtual function, B200: all in perfkit's table; a trace whose GPU is not is left out, said so,
rather than priced as another GPU), :func:`perfkit.diagnose_trace` prices each op instance for its
recorded shapes and the script prints, per trace and class (GEMM and convolution, attention, memory-bound),
how many instances the model priced, the median and 90th-percentile error ``|measured/predicted - 1|``
(taken on the log scale, so 2x too slow and 2x too fast count alike) and the time-weighted ratio (the
class's measured time over its predicted time). ``--min-us`` leaves out instances shorter than that
(integer-microsecond traces round a 1 µs kernel by half of itself). Under the table, each GPU's launch gap
(the per-kernel time a trace's durations leave out) and where it comes from: measured on Hopper, assumed
elsewhere.

None of these traces was used to fit any constant: they are third-party measurements (their publishers,
commits and timing are in the traces' README), so this is a held-out score. Run:
``python scripts/trace_accuracy.py [--traces DIR] [--min-us 10]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import perfkit as pk
from perfkit.trace import UnknownTraceDevice

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "traces"


def score(report: pk.trace.TraceReport, min_s: float) -> pd.DataFrame:
    """Per class: n, median and p90 error, time-weighted measured ÷ predicted."""
    ops = report.ops
    ops = ops[ops["predicted_s"].notna() & (ops["time_s"] >= max(min_s, 1e-12))]
    rows = []
    for cls, g in ops.groupby("class"):
        err = np.abs(np.log(g["time_s"] / g["predicted_s"]))
        rows.append({"class": cls, "n": len(g), "median_error": float(np.expm1(np.median(err))),
                     "p90_error": float(np.expm1(np.quantile(err, 0.9))),
                     "time_weighted_ratio": float(g["time_s"].sum() / g["predicted_s"].sum())})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=Path, default=DEFAULT, help="folder of Kineto traces (default: %(default)s)")
    p.add_argument("--min-us", type=float, default=0.0, help="leave out instances shorter than this (µs)")
    args = p.parse_args(argv)
    if not args.traces.is_dir():
        print(f"no traces folder at {args.traces}: nothing to score")
        return 0
    frames, gaps = [], {}
    for path in sorted(args.traces.glob("*.json*")):
        try:
            report = pk.diagnose_trace(path, progress=False)
        except UnknownTraceDevice as e:
            print(f"skipped {path.name}: {str(e).split(';')[0].split(': ', 1)[-1]}")
            continue
        s = score(report, args.min_us * 1e-6)
        s.insert(0, "device", report.spec.name)
        s.insert(0, "trace", path.name.removeprefix("tracelens_").split("__")[0][:40])
        frames.append(s)
        gaps[report.spec.name] = (report.summary["launch_gap_s"], report.summary["launch_gap_source"])
    if not frames:
        print("no trace of a GPU perfkit knows: nothing to score")
        return 0
    table = pd.concat(frames, ignore_index=True)
    with pd.option_context("display.width", 160, "display.float_format", "{:.2f}".format):
        print(table.to_string(index=False))
    print("\nlaunch gap taken off each predicted kernel:")
    for device, (gap_s, source) in gaps.items():
        print(f"  {device}: {gap_s * 1e6:.2f} µs, {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
