"""A trace diagnosed: every op instance held to perfkit's model of its shape, every step broken down.

:func:`diagnose_trace` reads one trace file per rank (:func:`.read.load`), maps each op instance to
its work (:mod:`.opmap`), prices it on the trace's GPU and names the rule that explains the gap
(:mod:`.price`), then breaks each profiler step down: time by class (GEMM and convolution, attention,
memory-bound, communication, unmapped), GPU idle between kernels, launch-bound stretches and model
FLOPs utilization. A CPU-only profile (no GPU kernels) is reported by its CPU op times, and says so.
Units: seconds, FLOP, bytes, FLOP/s, bytes/s.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..devices import DeviceSpec
from .cpu import cpu_report
from .join import Joined
from .opmap import work_of
from .patterns import chains, price_patterns
from .price import TracePricer, diagnose_op, kernel_class
from .read import load, trace_spec
from .result import CLASSES, OP_COLUMNS, STEP_COLUMNS, TraceReport
from .text import summarize

__all__ = ["diagnose_trace"]

_SHORT_KERNEL_S = 10e-6  # a kernel this short, followed by a gap at least as long, is launch-bound
OPTIMIZER_FIX = ("a foreach or fused optimizer (e.g. SGD(..., foreach=True) or fused=True) and "
                 "zero_grad(set_to_none=True): one kernel for all parameters, no zeroing")
PROGRESS_OPS = 20_000  # op instances above which diagnosing shows a progress bar

def _hints(ops: pd.DataFrame) -> dict[int, dict]:
    """For a convolution without Concrete Inputs (a 2021 trace): its output's H×W, read from the next op on its
    thread whose first input has the convolution's batch and output channels (a batch norm, an activation)."""
    out: dict[int, dict] = {}
    for _, part in ops.sort_values("start_s").groupby("thread", sort=False):
        rows = list(zip(part["op_id"], part["op"], part["args"]))
        for j, (oid, name, args) in enumerate(rows):
            if name != "aten::convolution" or not args or not args[0] or (args[2] and any(args[2])):
                continue
            dims = args[0]
            if len(dims) < 2 or len(dims[0]) != 4 or len(dims[1]) != 4:
                continue
            n, k = dims[0][0], dims[1][0]
            for _, _, nxt in rows[j + 1:j + 6]:
                d = nxt[0][0] if nxt and nxt[0] and isinstance(nxt[0][0], list) else None
                if d and len(d) == 4 and d[0] == n and d[1] == k:
                    out[int(oid)] = {"next_hw": (d[2], d[3])}
                    break
    return out


def _instances(joined: Joined, pricer: TracePricer | None, progress: bool = False) -> pd.DataFrame:
    """One row per op instance with kernels (and one per kernel that joins no op), diagnosed."""
    k = joined.kernels.copy()
    end = (k["start_s"] + k["time_s"]).groupby(k["device"]).cummax()  # kernels are in start order
    k["gap_s"] = (k["start_s"] - end.groupby(k["device"]).shift(1)).clip(lower=0).fillna(0.0)
    has = k[k["op_id"] >= 0]
    agg = has.groupby("op_id", sort=False).agg(time_s=("time_s", "sum"), kernels=("time_s", "size"),
                                               start_s=("start_s", "min"), step=("step", "min"),
                                               names=("name", list), times=("time_s", list),
                                               gap_s=("gap_s", "first"))
    o = joined.ops
    ops = dict(zip(o["op_id"], zip(o["op"], o["layer"], o["pass"], o["args"], o["inner"])))
    hints = _hints(o) if (o["op"] == "aten::convolution").any() else {}
    works: dict = {}  # (name, args) → Work: the same op on the same shapes, every step
    rows = []
    for oid, time_s, n, start_s, step, names, times, gap_s in zip(agg.index, *(agg[c] for c in agg.columns)):
        name, layer, pass_, args, inner = ops[oid]
        hint = {**hints.get(int(oid), {}), "inner": inner}
        key = (name, repr(args), repr(sorted(hint.items())))
        if key not in works:
            works[key] = work_of(name, args, hint)
        rows.append((name, layer, pass_, step, time_s, n, start_s, names, times, gap_s, works[key],
                     names[int(np.argmax(times))]))  # the kernel that took longest
    lone = k[k["op_id"] < 0]
    rows += [("", "", "", step, t, 1, start_s, [name], [t], gap_s, None, name) for step, t, start_s, name, gap_s
             in zip(lone["step"], lone["time_s"], lone["start_s"], lone["name"], lone["gap_s"])]
    frame = pd.DataFrame(rows, columns=["op", "layer", "pass", "step", "time_s", "kernels", "start_s", "names",
                                        "times", "gap_s", "work", "kernel"])
    if frame.empty:
        return pd.DataFrame(columns=list(OP_COLUMNS))
    frame = frame.sort_values("start_s", ignore_index=True)
    return _diagnosed(frame, pricer, joined.events.rank, progress)


def _diagnosed(frame: pd.DataFrame, pricer: TracePricer | None, rank: int, progress: bool = False) -> pd.DataFrame:
    works = list(frame["work"])
    bar = None
    if progress and len(frame) > PROGRESS_OPS:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(frame), unit="op", desc="diagnosing", leave=False)
    chain = chains(works)
    cl = pricer.spec.ceilings if pricer is not None else None
    out = []
    for i, (w, time_s, names, times, gap_s, kernel) in enumerate(zip(
            works, frame["time_s"], frame["names"], frame["times"], frame["gap_s"], frame["kernel"])):
        d = diagnose_op(w, time_s, names, pricer, in_chain=chain[i] >= 0, kernel_times_s=times, gap_before_s=gap_s)
        if bar is not None and i % 1000 == 999:
            bar.update(1000)
        cls = (w.family if w.family != "conv" else "gemm") if w is not None else kernel_class(kernel)
        if d["bound"] in ("communication", "transfer"):
            cls = d["bound"]
        flops, nbytes = (w.flops, w.bytes) if w is not None else (math.nan, math.nan)
        share = math.nan
        if cl is not None and w is not None and time_s > 0:
            share = max(flops / time_s / cl.flop_s_for(w.dtype) if w.family != "memory" else 0.0,
                        nbytes / time_s / cl.bandwidth)
        pred = d["predicted_s"]
        out.append((cls, w.shapes if w else "", w.dtype if w else "", w.M if w else math.nan,
                    w.N if w else math.nan, w.K if w else math.nan, w.batch if w else math.nan, flops, nbytes,
                    pred, time_s / pred if pred else math.nan, flops / time_s if time_s else math.nan,
                    nbytes / time_s if time_s else math.nan, share, d["bound"], d["rule"], d["fix"], d["saving_s"],
                    w.assumed if w else ""))
    if bar is not None:
        bar.close()
    ops = pd.DataFrame(out, columns=["class", "shapes", "dtype", "M", "N", "K", "batch", "flops", "bytes",
                                     "predicted_s", "ratio", "achieved_flop_s", "achieved_Bps", "ceiling_share",
                                     "bound", "rule", "fix", "saving_s", "assumed"])
    for col in ("op", "layer", "pass", "time_s", "kernels", "kernel", "start_s"):
        ops[col] = frame[col].to_numpy()
    ops["step"] = frame["step"].astype(int).to_numpy()
    ops["rank"] = rank
    price_patterns(ops, works, pricer)
    optimizer = (ops["pass"] == "optimizer") & (ops["rule"] == "fusion")
    ops.loc[optimizer, "fix"] = OPTIMIZER_FIX
    return ops[list(OP_COLUMNS)]


def _launch_bound_s(k: pd.DataFrame, min_run: int = 5) -> float:
    """Seconds spent in runs of at least ``min_run`` short kernels each followed by an idle gap as long."""
    start, end = k["start_s"].to_numpy(), (k["start_s"] + k["time_s"]).to_numpy()
    short = np.r_[(k["time_s"].to_numpy()[:-1] < _SHORT_KERNEL_S) & (start[1:] - end[:-1] >= k["time_s"].to_numpy()
                                                                      [:-1]), False]
    total, i = 0.0, 0
    while i < len(short):
        j = i
        while j < len(short) and short[j]:
            j += 1
        if j - i >= min_run:
            total += end[j] - start[i] if j < len(end) else end[-1] - start[i]
        i = j + 1
    return total


def _busy_s(k: pd.DataFrame) -> float:
    """Seconds with at least one kernel running (overlapping streams counted once)."""
    if k.empty:
        return 0.0
    start, end = k["start_s"].to_numpy(), (k["start_s"] + k["time_s"]).to_numpy()
    order = np.argsort(start)
    start, end = start[order], np.maximum.accumulate(end[order])
    gaps = np.clip(start[1:] - end[:-1], 0, None).sum()
    return float(end[-1] - start[0] - gaps)


def _steps(kernels: pd.DataFrame, ops: pd.DataFrame, spec: DeviceSpec | None) -> pd.DataFrame:
    rows = []
    for (rank, step), k in kernels.groupby(["rank", "step"], sort=True):
        k = k.sort_values("start_s")
        o = ops[(ops["rank"] == rank) & (ops["step"] == step)]
        span = float((k["start_s"] + k["time_s"]).max() - k["start_s"].min())
        busy = _busy_s(k)
        by = o.groupby("class")["time_s"].sum()
        flops = float(o["flops"].where(o["class"].isin(["gemm", "attention"])).sum())
        row = {"rank": rank, "step": step, "span_s": span, "busy_s": busy, "idle_s": span - busy,
               **{f"{c}_s": float(by.get(c, 0.0)) for c in CLASSES},
               "unmapped_s": float(o.loc[o["rule"] == "unmapped", "time_s"].sum()), "launch_bound_s": _launch_bound_s(k),
               "flops": flops, "mfu": math.nan, "mfu_achievable": math.nan}
        tensor = o[o["class"].isin(["gemm", "attention"])]
        if spec is not None and not tensor.empty and span > 0 and flops > 0:
            dtype = tensor.groupby("dtype")["flops"].sum().idxmax()
            row["mfu"] = flops / span / spec.peak_flop_s(dtype)
            row["mfu_achievable"] = flops / span / spec.ceilings.flop_s_for(dtype)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))


def _files(path: Any) -> list[Path]:
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.name.endswith((".json", ".json.gz")))
            if not files:
                raise FileNotFoundError(f"{p}: a folder with no .json or .json.gz trace files")
            return files
        return [p]
    if isinstance(path, Sequence) and path and all(isinstance(p, (str, os.PathLike)) for p in path):
        return [Path(p) for p in path]
    raise TypeError(f"path must be a trace file, a folder of them (one per rank) or a list of paths, got {path!r}")


def diagnose_trace(path: Any, spec: str | DeviceSpec | None = None, progress: bool = True) -> TraceReport:
    """Every op instance of a ``torch.profiler`` trace held to perfkit's model of its shape, and every step.

    ``path``: a Kineto JSON trace (``.json`` or ``.json.gz``), a list of them or a folder (one file per
    rank of a distributed run: their profiler steps must match). ``spec``: the GPU (a name such as
    ``'H100-SXM'``, or a :class:`~perfkit.DeviceSpec`); by default the one the trace's ``deviceProperties``
    names, which must be in perfkit's table (:class:`~.read.UnknownTraceDevice` lists the names).
    Everything is read and checked before anything is returned. See :class:`TraceReport`.
    """
    files = _files(path)
    joined = [load(f, progress) for f in files]
    resolved = [trace_spec(j, spec) for j in joined]
    device = next((s for s in resolved if s is not None), None)
    if len(joined) > 1:
        ranks = [j.events.rank for j in joined]
        if len(set(ranks)) < len(ranks):  # no distributedInfo: number the files
            for i, j in enumerate(joined):
                j.kernels["rank"], j.ops["rank"] = i, i
                j.events.top["distributedInfo"] = {"rank": i}
        steps = [tuple(sorted(set(j.kernels["step"]) - {-1})) for j in joined]
        if len(set(steps)) > 1:
            detail = "; ".join(f"{f.name}: {list(s)}" for f, s in zip(files, steps))
            raise ValueError(f"the ranks' traces do not hold the same profiler steps ({detail}): profile the "
                             "same steps on every rank")
    notes: list[str] = []
    if all(j.kernels.empty for j in joined):
        return cpu_report(files, joined, device)
    pricer = TracePricer(device) if device is not None else None
    ops = pd.concat([_instances(j, pricer, progress) for j in joined], ignore_index=True)
    kernels = pd.concat([j.kernels for j in joined], ignore_index=True)
    if not any(j.ops["args"].map(bool).any() for j in joined):
        notes.append("the trace has no shapes (record_shapes=False): ops are classified by kernel name only")
    steps = _steps(kernels, ops, device)
    report = TraceReport(files, device, ops, kernels, steps, notes=notes)
    report.summary = summarize(report)
    return report
