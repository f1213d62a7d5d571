"""What :func:`perfkit.diagnose_trace` returns: :class:`TraceReport` and the columns of its frames."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..devices import DeviceSpec
from .price import CLASSES
from .text import report_text

__all__ = ["CLASSES", "OP_COLUMNS", "STEP_COLUMNS", "TraceReport"]

#: Columns of ``TraceReport.ops``, one row per op instance (a kernel that joins no op is its own row).
OP_COLUMNS = ("rank", "step", "op", "layer", "pass", "class", "shapes", "dtype", "M", "N", "K", "batch", "flops",
              "bytes", "time_s", "kernels", "kernel", "predicted_s", "ratio", "achieved_flop_s", "achieved_Bps",
              "ceiling_share", "bound", "rule", "fix", "saving_s", "start_s", "assumed")

#: Columns of ``TraceReport.steps``, one row per rank and profiler step (step -1: kernels outside any step).
STEP_COLUMNS = ("rank", "step", "span_s", "busy_s", "idle_s", "gemm_s", "attention_s", "memory_s",
                "communication_s", "transfer_s", "unmapped_s", "launch_bound_s", "flops", "mfu", "mfu_achievable")



@dataclass
class TraceReport:
    """What :func:`diagnose_trace` found: ``ops`` (:data:`OP_COLUMNS`), ``kernels`` (:func:`perfkit.read_trace`'s
    frame, all ranks), ``steps`` (:data:`STEP_COLUMNS`), ``summary`` (the step figures) and ``notes``."""

    paths: list[Path]
    spec: DeviceSpec | None
    ops: pd.DataFrame
    kernels: pd.DataFrame
    steps: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def top(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` largest time sinks: op instances of one op, shape and rule summed, with their fix."""
        keys = ["op", "shapes", "dtype", "class", "rule", "fix"]
        g = self.ops.groupby(keys, dropna=False, sort=False)
        out = g.agg(count=("time_s", "size"), time_s=("time_s", "sum"), predicted_s=("predicted_s", lambda s: s.sum(min_count=1)),
                    saving_s=("saving_s", lambda s: s.sum(min_count=1)), layer=("layer", "first")).reset_index()
        total = self.ops["time_s"].sum()
        out["share"] = out["time_s"] / total if total else math.nan
        cols = ["op", "layer", "shapes", "dtype", "class", "count", "time_s", "share", "predicted_s", "rule",
                "fix", "saving_s"]
        return out.sort_values("time_s", ascending=False).head(n)[cols].reset_index(drop=True)

    def unmapped(self) -> pd.DataFrame:
        """Kernels perfkit cannot map (no op, or an op it has no model of), by op and kernel: count and time."""
        part = self.ops[self.ops["rule"] == "unmapped"]
        g = part.groupby(["op", "kernel"], sort=False)["time_s"].agg(["size", "sum"]).reset_index()
        return g.rename(columns={"size": "count", "sum": "time_s"}).sort_values("time_s", ascending=False,
                                                                                 ignore_index=True)

    def __str__(self) -> str:
        return report_text(self)
