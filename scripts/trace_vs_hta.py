"""perfkit's kernel totals against HTA's (Holistic Trace Analysis) on the same traces: an optional check.

    python scripts/trace_vs_hta.py                       # the H100 BERT-small and V100 ResNet-50 traces
    python scripts/trace_vs_hta.py --hta-python /tmp/hta-venv/bin/python --trace my.pt.trace.json.gz
    python scripts/trace_vs_hta.py --names 5             # also the 5 largest per-name differences per trace

What is compared, per trace: the GPU kernel, copy and memset time summed over the whole trace and per
kernel name, and how many were counted, as

- **perfkit**: ``pk.read_trace(path)``, every row (kernels, memcpy, memset), ``time_s`` summed;
- **HTA**: ``TraceAnalysis(trace_files={0: path}, include_last_profiler_step=...)``, then
  ``get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)`` with no "others" grouping
  (its ``sum (us)`` per name, summed; the breakdown's per-type table merges overlapping intervals, so
  the per-name sums are the ones comparable with a plain sum), and the kernel count from its parsed
  frame (events on a GPU stream, ``stream != -1``, which is what the breakdown sums). Four settings:
  HTA's default, which rounds a nanosecond trace's times to whole microseconds (``ts`` up, ``ts + dur``
  down: ``round_down_time_stamps`` in ``hta/common/trace_parser.py``, so each kernel loses up to 2 µs)
  and drops the last profiler step's kernels (``include_last_profiler_step=False``); and with either
  turned off: the environment variable ``HTA_DISABLE_NS_ROUNDING=1`` (``hta/configs/env_options.py``;
  HTA 0.5.0's ``ParserConfig`` has no such field) and ``include_last_profiler_step=True``. A trace whose
  times are integer microseconds (the 2021 V100 one) is not rounded either way.

HTA is optional and heavy: ``pip install holistictraceanalysis`` (0.5.0) pulls 102 packages into a
fresh venv (jupyterlab, jupyter_server, ipykernel, nbconvert, plotly, pandas 3, numpy 2, ...; no torch),
so it lives in its own venv, never perfkit's:

    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis

HTA runs in a subprocess under that venv's Python (``--hta-python``, else ``$HTA_PYTHON``, else
``/tmp/hta-venv/bin/python``, else this Python if it imports ``hta``), one fresh process per trace and
setting, and hands back per-name totals as JSON; perfkit runs here. Without HTA the script says so and
exits 0; without the shared traces likewise. Exit 1 when a comparison could not be made.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / ".." / "shared" / "reference" / "traces"
DEFAULT_TRACES = ("tracelens_h100_gaunernst_bert-small-uncased__1016001.json.gz",
                  "kineto_resnet50_v100_worker0.1623143089861.pt.trace.json.gz")
DEFAULT_HTA_PYTHON = Path("/tmp/hta-venv/bin/python")

#: (label, round ns to µs, include the last profiler step); the first is HTA's default.
SETTINGS = (("default", True, False), ("ns", False, False), ("last step", True, True),
            ("ns + last step", False, True))

_WORKER = r"""
import json, os, sys
path, rounding, include_last = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
if not rounding:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
else:
    os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
import logging
logging.disable(logging.CRITICAL)
import hta
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: os.path.abspath(path)}, trace_dir=os.path.dirname(os.path.abspath(path)),
                   include_last_profiler_step=include_last)
_, per_name = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**9,
                                          include_memory_kernels=True)
df = ta.t.get_trace(0)
sym = ta.t.symbol_table.get_sym_table()
k = df[df["stream"].ne(-1)]
counts = k.groupby("name")["dur"].agg(["size", "sum"])
frame = {sym[int(i)]: [int(r["size"]), float(r["sum"])] for i, r in counts.iterrows()}
breakdown = {str(n): float(s) for n, s in zip(per_name["name"], per_name["sum (us)"])}
print("RESULT " + json.dumps({"version": getattr(hta, "__version__", "?"), "frame": frame,
                              "breakdown": breakdown, "ts_dtype": str(df["ts"].dtype)}))
"""


def find_hta_python(given: str | None) -> str | None:
    """The Python that imports ``hta``: ``given``, ``$HTA_PYTHON``, the default venv, this one; or None."""
    candidates = [given] if given else [os.environ.get("HTA_PYTHON"), str(DEFAULT_HTA_PYTHON), sys.executable]
    for c in candidates:
        if not c or not Path(c).exists():
            continue
        ok = subprocess.run([c, "-c", "import hta.trace_analysis"], capture_output=True).returncode == 0
        if ok:
            return c
    return None


def hta_totals(python: str, path: Path, rounding: bool, include_last: bool, timeout_s: float) -> dict:
    """HTA's per-name (count, µs) for ``path`` under one setting, from a fresh process: the worker's JSON."""
    argv = [python, "-c", _WORKER, str(path), "1" if rounding else "0", "1" if include_last else "0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"HTA failed on {path.name} (exit {proc.returncode}): {tail}")
    return json.loads(line[len("RESULT "):])


def perfkit_totals(path: Path) -> dict[str, list]:
    """perfkit's per-name [count, µs] for ``path`` (``pk.read_trace``, kernels, copies and memsets)."""
    sys.path.insert(0, str(REPO))
    import perfkit as pk

    k = pk.read_trace(path, progress=False)
    g = k.groupby(["name", "kind"])["time_s"].agg(["size", "sum"])
    return {str(n): [int(r["size"]), float(r["sum"]) * 1e6, str(kind)] for (n, kind), r in g.iterrows()}


def _kernels_only(per_name: dict[str, list], kinds: dict[str, list]) -> tuple[int, float]:
    """Count and µs of the names ``kinds`` (perfkit's) calls kernels, or that are not named Memcpy/Memset."""
    keep = [v for n, v in per_name.items()
            if (kinds[n][2] == "kernel" if n in kinds else not n.startswith(("Memcpy", "Memset")))]
    return sum(v[0] for v in keep), sum(v[1] for v in keep)


def _total(per_name: dict[str, list]) -> tuple[int, float]:
    return sum(v[0] for v in per_name.values()), sum(v[1] for v in per_name.values())


def _largest_gap(pk_names: dict[str, list], hta_names: dict[str, list]) -> tuple[str, float, float]:
    """The kernel name whose total differs most between the two (name, perfkit µs, HTA µs)."""
    best = ("", 0.0, 0.0)
    for n in sorted(set(pk_names) | set(hta_names)):
        a, b = pk_names.get(n, [0, 0.0])[1], hta_names.get(n, [0, 0.0])[1]
        if abs(a - b) > abs(best[1] - best[2]) or not best[0]:
            best = (n, a, b)
    return best


def _short(name: str, width: int = 46) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, action="append", help="a trace file (repeatable; default: "
                    "BERT-small H100 and ResNet-50 V100 from the shared reference traces)")
    ap.add_argument("--traces", type=Path, default=TRACES, help="the shared reference traces folder")
    ap.add_argument("--hta-python", default=None, help="the Python of a venv with holistictraceanalysis")
    ap.add_argument("--names", type=int, default=0, help="also print the N largest per-name differences")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed for one HTA run")
    args = ap.parse_args(argv)

    python = find_hta_python(args.hta_python)
    if python is None:
        print("trace_vs_hta: HTA (holistictraceanalysis) is not installed in any Python found "
              "(--hta-python, $HTA_PYTHON, /tmp/hta-venv/bin/python, this one): nothing compared. Install it "
              "in its own venv: python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install "
              "holistictraceanalysis")
        return 0
    paths = args.trace or [args.traces / name for name in DEFAULT_TRACES]
    missing = [p for p in paths if not p.is_file()]
    if missing and not args.trace:
        print(f"trace_vs_hta: the shared reference traces are absent ({missing[0]}): nothing compared.")
        return 0
    if missing:
        print(f"trace_vs_hta: trace file not found: {missing[0]}", file=sys.stderr)
        return 1

    failed = False
    results = []
    for path in paths:
        try:
            pk_names = perfkit_totals(path)
            hta = {label: hta_totals(python, path, rnd, last, args.timeout) for label, rnd, last in SETTINGS}
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            print(f"{path.name}: {exc}", file=sys.stderr)
            failed = True
            continue
        results.append((path, pk_names, hta))

    if not results:
        return 1
    version = next(iter(results[0][2].values()))["version"]
    print(f"HTA {version} ({python}) vs perfkit, kernel + memcpy + memset time summed (overlap not "
          "removed), µs\n")
    head = (f"{'trace':<26} {'HTA setting':<15} {'kernels pk':>10} {'HTA':>7} {'perfkit µs':>12} "
            f"{'HTA µs':>12} {'HTA/pk-1':>9} {'breakdown µs':>13}  "
            "largest per-name gap (perfkit µs / HTA µs)")
    print(head)
    print("-" * len(head))
    for path, pk_names, hta in results:
        pk_n, pk_us = _total(pk_names)
        label = _short(path.name.replace("tracelens_", "").replace(".json.gz", ""), 26)
        for setting, _, _ in SETTINGS:
            r = hta[setting]
            h_n, h_us = _total(r["frame"])
            b_us = sum(r["breakdown"].values())
            name, a, b = _largest_gap(pk_names, r["frame"])
            rel = h_us / pk_us - 1 if pk_us else float("nan")
            gap = (f"{_short(name)} ({a:,.1f} / {b:,.1f})" if abs(a - b) > 1e-3
                   else "none (all names within 1 ns)")
            print(f"{label:<26} {setting:<15} {pk_n:10,d} {h_n:7,d} {pk_us:12,.1f} {h_us:12,.1f} {rel:+9.2%} "
                  f"{b_us:13,.1f}  {gap}")
            label = ""
        kn_pk, ku_pk = _kernels_only(pk_names, pk_names)
        kernel_only = ", ".join(f"HTA {s} {_kernels_only(hta[s]['frame'], pk_names)[1]:,.1f} µs "
                                f"({_kernels_only(hta[s]['frame'], pk_names)[0]:,d})" for s, _, _ in SETTINGS)
        print(f"{'':<26} kernels alone (no memcpy/memset): perfkit {ku_pk:,.1f} µs ({kn_pk:,d}), "
              f"{kernel_only}")
        only_pk = sorted(set(pk_names) - set(hta["ns + last step"]["frame"]))
        only_hta = sorted(set(hta["ns + last step"]["frame"]) - set(pk_names))
        if only_pk or only_hta:
            print(f"{'':<26} names only perfkit has: {len(only_pk)}, only HTA (ns + last step): "
                  f"{len(only_hta)}")
        if args.names:
            frame = hta["default"]["frame"]
            gaps = sorted(set(pk_names) | set(frame), key=lambda n: -abs(pk_names.get(n, [0, 0.0])[1]
                                                                          - frame.get(n, [0, 0.0])[1]))
            for n in gaps[:args.names]:
                a, b = pk_names.get(n, [0, 0.0]), frame.get(n, [0, 0.0])
                print(f"{'':<26}   {_short(n, 70):<70} pk {a[0]:5d} × = {a[1]:10,.1f} µs   HTA default "
                      f"{b[0]:5d} × = {b[1]:10,.1f} µs")
    print("\n'HTA µs' sums HTA's parsed frame (events on a GPU stream); 'breakdown µs' sums "
          "get_gpu_kernel_breakdown's per-name 'sum (us)' (they agree unless HTA dropped a kernel type). "
          "'ns': HTA_DISABLE_NS_ROUNDING=1; 'last step': include_last_profiler_step=True.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
