"""Does ``perfkit.trace`` meet the issue's scale targets? Time and peak memory of reading a large trace.

The targets (issue 42): a 500 MB trace (uncompressed JSON) read in at most 1.5 GB of memory and 60 s on
2 cores; ``pk.read_trace`` on the 35 MB V100 ResNet-50 trace in at most 3 s.

    python scripts/trace_scale.py                 # 500 MB (takes a few minutes)
    python scripts/trace_scale.py --mb 100 --keep --out /tmp/trace-scale
    python scripts/trace_scale.py --mb 100 --profile   # also cProfile and tracemalloc of the reader

How:

1. **A large trace.** The events of the V100 ResNet-50 training trace (pytorch/kineto's sample, 6 profiler
   steps, 75,718 events, 9,096 kernels, copies and memsets; read from ``<repo>/../shared/reference/traces``)
   are written N times into one plain JSON file in a temporary folder, until it holds ``--mb`` MB (10**6
   bytes) of JSON: copy k shifted in time by k times the trace's span (its first event to its last end),
   its ``correlation`` ids (and the flow arrows' ``id``, which Kineto sets to them), ``External id`` /
   ``external id``, autograd ``Sequence number`` and ``ProfilerStep#N`` numbers moved past the previous
   copy's, so every id stays unique and the steps run on (5..10, 11..16, ...). The file has Kineto's
   layout: one object with ``schemaVersion``, ``deviceProperties`` and ``traceEvents``, one event per
   few lines; the trace-wide events (process/thread names, the profiler's ``Trace`` span and its
   window markers) are written once. It is written one copy at a time from a text template of the
   original (never 500 MB of objects).
2. **Measured, each in a fresh Python process**, so its peak memory is its own: ``pk.read_trace(path,
   progress=False)`` and ``pk.diagnose_trace(path, progress=False)`` on the large file, ``pk.read_trace``
   on the V100 trace itself (gzipped, as it is given), and ``json.load`` of the large file (the
   reference a streaming reader is compared with). Wall and CPU seconds of the call alone (after
   imports), and the process's peak resident memory (``VmHWM`` in ``/proc/self/status``; ``ru_maxrss``
   would carry the parent's peak across ``exec``), which includes the interpreter and
   its imports (numpy, pandas: given as "after imports").
3. **Checked**: the kernel rows read equal N times the V100 trace's, every profiler step distinct, every
   kernel joined by correlation as in the original.

Numbers depend on the machine and its load (printed): run on an idle 2-core machine to compare with
the targets. The script exits 0 when it could measure (a missed target is reported, not an error), and
0 with a message when the shared traces are absent; 1 when a measurement failed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / ".." / "shared" / "reference" / "traces"
V100_NAME = "kineto_resnet50_v100_worker0.1623143089861.pt.trace.json.gz"

#: The issue's targets: seconds and bytes (1.5 GB = 1.5e9 bytes, the stricter reading) for the large trace,
#: seconds for the V100 trace.
TARGET_BIG_S = 60.0
TARGET_BIG_BYTES = 1.5e9
TARGET_V100_S = 3.0

MIB = 1 << 20
MB = 10 ** 6

# The kinds of value that change from copy to copy (index into the per-copy offsets).
_TIME, _CORR, _EXT, _SEQ, _STEP = range(5)
_ID_KINDS = {"correlation": _CORR, "External id": _EXT, "external id": _EXT, "Sequence number": _SEQ,
             "external ts": _TIME}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_global(e: dict) -> bool:
    """A trace-wide event, written once: metadata, the profiler's ``Trace`` span, its global instants."""
    return e.get("ph") == "M" or e.get("cat") == "Trace" or (e.get("ph") == "i" and e.get("s") == "g")


class Replicator:
    """The V100 trace as a text template whose ids and times are shifted per copy (:meth:`copy_text`)."""

    def __init__(self, doc: dict) -> None:
        events = doc["traceEvents"]
        self.top = {k: v for k, v in doc.items() if k != "traceEvents"}
        self.globals = [e for e in events if _is_global(e)]
        local = [e for e in events if not _is_global(e)]
        self.events_per_copy = len(local)
        starts = [e["ts"] for e in events if "ts" in e]
        ends = [e["ts"] + (e.get("dur") or 0) for e in events if "ts" in e]
        self.span = math.ceil(max(ends) - min(starts))  # µs

        def id_range(keys: tuple[str, ...], top_level: str | None = None) -> int:
            vals = [v for e in local for k in keys for v in [(e.get("args") or {}).get(k)]
                    if _is_int(v) and v > 0]
            if top_level:
                vals += [e[top_level] for e in local if _is_int(e.get(top_level)) and e[top_level] > 0]
            return max(vals) - min(vals) + 1 if vals else 0

        steps = [int(e["name"].split("#")[1]) for e in local
                 if str(e.get("name", "")).startswith("ProfilerStep#") and e["name"].split("#")[1].isdigit()]
        self.steps_per_copy = len(set(steps))
        self.step_range = max(steps) - min(steps) + 1 if steps else 0
        self.ranges = (self.span, id_range(("correlation",), "id"), id_range(("External id", "external id")),
                       id_range(("Sequence number",)), self.step_range)
        parts: list[str] = []
        self.dynamic: list[tuple[int, int | float]] = []
        for e in local:
            parts.append(self._template(e))
        self.template = ",\n".join(parts)

    def _value(self, v: Any, kind: int | None) -> str:
        if kind is None or not (_is_int(v) or isinstance(v, float)) or (kind != _TIME and v <= 0):
            return json.dumps(v).replace("%", "%%")
        self.dynamic.append((kind, v))
        return "%s"

    def _template(self, e: dict) -> str:
        """One event in Kineto's layout, with ``%s`` where a shifted value goes (``%`` doubled elsewhere)."""
        items = []
        for k, v in e.items():
            if k == "args":
                continue
            if k == "name" and isinstance(v, str) and v.startswith("ProfilerStep#") and v[13:].isdigit():
                self.dynamic.append((_STEP, int(v[13:])))
                items.append('"name": "ProfilerStep#%s"')
                continue
            kind = _TIME if k == "ts" else _CORR if k == "id" and e.get("ph") in ("s", "f", "t") else None
            items.append(f"{json.dumps(k)}: {self._value(v, kind)}")
        text = "  {\n    " + ", ".join(items)
        if "args" in e:
            args = [f"{json.dumps(k).replace('%', '%%')}: {self._value(v, _ID_KINDS.get(k))}"
                    for k, v in (e["args"] or {}).items()]
            text += ',\n    "args": {\n      ' + ", ".join(args) + "\n    }"
        return text + "\n  }"

    def copy_text(self, k: int) -> str:
        """Copy ``k`` of the trace's events (no trailing comma)."""
        offs = [k * r for r in self.ranges]
        return self.template % tuple(b + offs[kind] for kind, b in self.dynamic)

    def header(self) -> str:
        members = "".join(f"  {json.dumps(k)}: {json.dumps(v, indent=2)},\n" for k, v in self.top.items())
        return "{\n" + members + '  "traceEvents": [\n'

    def footer(self, copies: int) -> str:
        """The trace-wide events, once, spanning all ``copies``; then the closing brackets."""
        out = []
        for e in self.globals:
            e = json.loads(json.dumps(e))
            if e.get("cat") == "Trace" and "dur" in e:
                e["dur"] = e["dur"] + (copies - 1) * self.span
            elif e.get("name") == "Record Window End":
                e["ts"] = e["ts"] + (copies - 1) * self.span
            out.append("  " + json.dumps(e))
        return (",\n" + ",\n".join(out) if out else "") + "\n]}\n"


def build(source: Path, dest: Path, target_bytes: int) -> dict:
    """Write ``dest``: copies of ``source``'s events up to ``target_bytes`` or more; what was written."""
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    rep = Replicator(doc)
    source_events = len(doc["traceEvents"])
    del doc
    first = rep.copy_text(0)
    per_copy = len(first.encode()) + 2
    fixed = len(rep.header().encode()) + len(rep.footer(1).encode())
    copies = max(1, math.ceil((target_bytes - fixed) / per_copy))
    with open(dest, "w", encoding="utf-8") as out:
        out.write(rep.header())
        for k in range(copies):
            out.write(first if k == 0 else ",\n" + rep.copy_text(k))
        out.write(rep.footer(copies))
    return {"copies": copies, "bytes": dest.stat().st_size,
            "events": copies * rep.events_per_copy + len(rep.globals), "steps": copies * rep.steps_per_copy,
            "copy_bytes": per_copy, "span_us": rep.span, "source_events": source_events}


_CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]

def peak_mib():
    # VmHWM: this process image's peak resident memory; ru_maxrss would carry the parent's peak across exec
    try:
        with open("/proc/self/status") as fh:
            return next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:")) / 1024  # kB
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

if mode == "json":
    base = peak_mib(); c0 = cpu_s(); t0 = time.perf_counter()
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    out = {"events": len(doc["traceEvents"])}
else:
    import perfkit as pk
    base = peak_mib(); c0 = cpu_s(); t0 = time.perf_counter()
    if mode == "read":
        k = pk.read_trace(path, progress=False)
    else:
        r = pk.diagnose_trace(path, progress=False)
        k = r.kernels
    wall = time.perf_counter() - t0
    out = {"kernels": len(k), "steps": int(k["step"].nunique()), "step_missing": int((k["step"] < 0).sum()),
           "joined": {str(a): int(b) for a, b in k["joined_by"].value_counts().items()}}
    if mode == "diagnose":
        out["ops"] = len(r.ops)
out.update(wall_s=time.perf_counter() - t0 if mode == "json" else wall, cpu_s=cpu_s() - c0,
           peak_mib=peak_mib(), base_mib=base)
print("RESULT " + json.dumps(out))
"""


def measure(mode: str, path: Path, timeout_s: float) -> dict:
    """Run ``mode`` (read, diagnose, json) on ``path`` in a fresh interpreter: its numbers, or an error."""
    paths = [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True,
                              timeout=timeout_s, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout_s:.0f} s"}
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(line[len("RESULT "):])


_PROFILE = r"""
import cProfile, pstats, sys, tracemalloc, time
import perfkit as pk
path = sys.argv[1]
for fn in ("read_trace", "diagnose_trace"):
    prof = cProfile.Profile()
    prof.enable(); getattr(pk, fn)(path, progress=False); prof.disable()
    print(f"== cProfile: pk.{fn} (top 18 by own time, then by cumulative time)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(r"perfkit", 18)
    tracemalloc.start(10)
    t0 = time.perf_counter(); res = getattr(pk, fn)(path, progress=False); t = time.perf_counter() - t0
    cur, peak = tracemalloc.get_traced_memory()
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    print(f"== tracemalloc: pk.{fn}: Python allocations peak {peak / 2**20:.0f} MiB, held by the result "
          f"{cur / 2**20:.0f} MiB ({t:.1f} s under tracemalloc); largest held, by line:")
    for s in snap.statistics("lineno")[:12]:
        print(f"   {s.size / 2**20:8.1f} MiB  {s.count:9d} blocks  {s.traceback[0]}")
    del res, snap
"""


def profile(path: Path) -> None:
    """cProfile and tracemalloc of read_trace and diagnose_trace on ``path`` (a fresh process), printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", _PROFILE, str(path)], env=env, cwd=REPO, check=False)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=500.0, help="the large trace's size, MB (10**6 B) of JSON")
    ap.add_argument("--keep", action="store_true", help="keep the large trace (in --out) after measuring")
    ap.add_argument("--out", type=Path, default=None, help="folder for the large trace (default: temp)")
    ap.add_argument("--no-json-load", action="store_true", help="skip the json.load reference (needs GBs)")
    ap.add_argument("--profile", action="store_true", help="also cProfile and tracemalloc both calls")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed for each measurement")
    ap.add_argument("--traces", type=Path, default=TRACES, help="the shared reference traces folder")
    args = ap.parse_args(argv)
    if args.mb <= 0:
        ap.error("--mb must be positive")
    source = args.traces / V100_NAME
    if not source.is_file():
        print(f"trace_scale: {source} is absent (the shared reference traces are not here): "
              "nothing measured.")
        return 0

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          f"python {sys.version.split()[0]}")
    folder = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="trace-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    big = folder / f"resnet50_v100_x_{args.mb:g}MB.pt.trace.json"
    failed = False
    try:
        t0 = time.perf_counter()
        info = build(source, big, int(args.mb * MB))
        source_bytes = _gunzipped_size(source)
        print(f"wrote {big} in {time.perf_counter() - t0:.0f} s: {info['bytes'] / MB:.1f} MB of JSON, "
              f"{info['copies']} copies of the V100 trace ({info['copy_bytes'] / MB:.1f} MB each; the "
              f"original's text is {source_bytes / MB:.1f} MB), {info['events']:,} events, "
              f"{info['steps']} profiler steps, copies {info['span_us'] / 1e6:.3f} s apart", flush=True)

        v100 = measure("read", source, args.timeout)
        read = measure("read", big, args.timeout)
        diag = measure("diagnose", big, args.timeout)
        ref = {"skipped": True} if args.no_json_load else measure("json", big, args.timeout)
        rows = [("pk.read_trace", source.name[:28] + "… (gz)", source_bytes, info["source_events"], v100,
                 TARGET_V100_S, None),
                ("pk.read_trace", big.name, info["bytes"], info["events"], read, TARGET_BIG_S,
                 TARGET_BIG_BYTES),
                ("pk.diagnose_trace", big.name, info["bytes"], info["events"], diag, TARGET_BIG_S,
                 TARGET_BIG_BYTES),
                ("json.load (reference)", big.name, info["bytes"], info["events"], ref, None, None)]
        print()
        head = (f"{'call':<22} {'file':<38} {'MB JSON':>8} {'events':>10} {'kernels':>8} {'wall s':>7} "
                f"{'CPU s':>7} {'peak MiB':>9} {'imports':>8}  target                      verdict")
        print(head)
        print("-" * len(head))
        for call, name, nbytes, events, r, t_s, t_b in rows:
            if r.get("skipped"):
                print(f"{call:<22} {name:<38} {nbytes / MB:8.1f} {events:10,d}  (skipped: --no-json-load)")
                continue
            if "error" in r:
                failed = True
                print(f"{call:<22} {name:<38} {nbytes / MB:8.1f} {events:10,d}  FAILED: {r['error']}")
                continue
            target, verdict = "", ""
            if t_s is not None:
                ok_t = r["wall_s"] <= t_s
                ok_m = t_b is None or r["peak_mib"] * MIB <= t_b
                target = f"≤ {t_s:g} s" + (f", ≤ {t_b / 1e9:g} GB ({t_b / MIB:.0f} MiB)" if t_b else "")
                verdict = "met" if ok_t and ok_m else "NOT met (" + ", ".join(
                    x for x, ok in (("time", ok_t), ("memory", ok_m)) if not ok) + ")"
            print(f"{call:<22} {name:<38} {nbytes / MB:8.1f} {events:10,d} {_fmt(r.get('kernels'), ',d'):>8} "
                  f"{r['wall_s']:7.1f} {r['cpu_s']:7.1f} {r['peak_mib']:9.0f} {r['base_mib']:8.0f}  "
                  f"{target:<27} {verdict}")
        print(f"\nload average {os.getloadavg()[0]:.2f} at the end. 'peak MiB' is the process's peak "
              "resident memory (VmHWM), interpreter and imports included; 'imports' is that peak before the "
              "call.")
        if not args.no_json_load and "error" not in ref and "error" not in read:
            print(f"streaming reader vs json.load on the same file: peak memory {read['peak_mib']:.0f} / "
                  f"{ref['peak_mib']:.0f} MiB = {read['peak_mib'] / ref['peak_mib']:.2f} (read_trace), "
                  + (f"{diag['peak_mib'] / ref['peak_mib']:.2f} (diagnose_trace); " if "error" not in diag
                     else "")
                  + f"time {read['wall_s']:.1f} / {ref['wall_s']:.1f} s (json.load only parses; read_trace "
                  "also joins)")
        failed |= _checks(read, diag, v100, info)
        if args.profile:
            print()
            profile(big)
    finally:
        if args.keep:
            print(f"kept {big}")
        elif args.out is None:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            big.unlink(missing_ok=True)
    return 1 if failed else 0


def _checks(read: dict, diag: dict, v100: dict, info: dict) -> bool:
    """Print whether the large trace read as N copies of the V100 trace; True if a check failed."""
    if any("error" in r for r in (read, diag, v100)):
        return False
    want = info["copies"] * v100["kernels"]
    problems = []
    for label, r in (("read_trace", read), ("diagnose_trace", diag)):
        if r["kernels"] != want:
            problems.append(f"{label}: {r['kernels']:,} kernel rows, expected {want:,} ({info['copies']} × "
                            f"{v100['kernels']:,})")
        if r["steps"] != info["steps"] or r["step_missing"]:
            problems.append(f"{label}: {r['steps']} distinct steps ({r['step_missing']} kernels without "
                            "one), "
                            f"expected {info['steps']}")
        scaled = {k: v * info["copies"] for k, v in v100["joined"].items()}
        if r["joined"] != scaled:
            problems.append(f"{label}: joined_by {r['joined']}, expected {scaled}")
    if problems:
        print("CHECK FAILED:\n  " + "\n  ".join(problems))
        return True
    print(f"checks: {want:,} kernel rows = {info['copies']} × {v100['kernels']:,}, {info['steps']} distinct "
          f"steps, joined_by as in the original ({v100['joined']} per copy); diagnose_trace: {diag['ops']:,} "
          "op rows")
    return False


def _gunzipped_size(path: Path) -> int:
    with gzip.open(path, "rb") as fh:
        n = 0
        while chunk := fh.read(1 << 22):
            n += len(chunk)
    return n


if __name__ == "__main__":
    sys.exit(main())
