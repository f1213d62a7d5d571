"""A CPU-only profile (no GPU kernels): each op perfkit maps reported by its CPU time, and labelled so.

The op instances are the outermost mapped ops (``aten::addmm`` under ``aten::linear``), each with the CPU
time its span took (children included). With a ``spec`` their shapes are also priced on that GPU: what
the same ops would take there by perfkit's model, never a measurement of it. Units: seconds, FLOP, bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..devices import DeviceSpec
from .join import Joined
from .opmap import MAPPED, work_of
from .price import TracePricer
from .result import OP_COLUMNS, STEP_COLUMNS, TraceReport

__all__ = ["CPU_NOTE", "cpu_report"]

CPU_NOTE = ("a CPU-only profile: no GPU kernels, so time_s is each op's CPU time (its span, children included), "
            "not a GPU measurement")


def cpu_report(files: list[Path], joined: list[Joined], spec: DeviceSpec | None):
    """The :class:`~.report.TraceReport` of CPU-only traces."""
    pricer = TracePricer(spec) if spec is not None else None
    rows = []
    for j in joined:
        ops = j.ops[j.ops["outermost"] & j.ops["op"].isin(MAPPED)]
        for r in map(pd.Series, ops.to_dict("records")):
            w = work_of(r.op, r.args)
            pred = pricer.row(w)["predicted_s"] if (pricer is not None and w is not None) else math.nan
            rows.append({"rank": r.rank, "step": r.step, "op": r.op, "layer": r.layer, "pass": r["pass"],
                         "class": "unmapped" if w is None else ("gemm" if w.family == "conv" else w.family),
                         "shapes": w.shapes if w else "", "dtype": w.dtype if w else "",
                         "M": w.M if w else math.nan, "N": w.N if w else math.nan, "K": w.K if w else math.nan,
                         "batch": w.batch if w else math.nan, "flops": w.flops if w else math.nan,
                         "bytes": w.bytes if w else math.nan, "time_s": r.cpu_time_s, "kernels": 0, "kernel": "",
                         "predicted_s": pred, "ratio": math.nan,
                         "achieved_flop_s": w.flops / r.cpu_time_s if w and r.cpu_time_s else math.nan,
                         "achieved_Bps": w.bytes / r.cpu_time_s if w and r.cpu_time_s else math.nan,
                         "ceiling_share": math.nan, "bound": "cpu", "rule": "" if w else "unmapped", "fix": "",
                         "saving_s": math.nan, "start_s": r.start_s, "assumed": w.assumed if w else ""})
    ops = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    kernels = pd.concat([j.kernels for j in joined], ignore_index=True)
    steps = pd.DataFrame(columns=list(STEP_COLUMNS))
    note = CPU_NOTE + (f"; predicted_s is what perfkit's model predicts for the same shapes on {spec.name}"
                       if spec else "")
    report = TraceReport(files, spec, ops, kernels, steps, notes=[note])
    report.summary = {"device": spec.name if spec else "", "cpu_only": True, "notes": [note],
                      "cpu_time_s": float(ops["time_s"].sum()), "kernels": 0, "files": len(files)}
    return report
