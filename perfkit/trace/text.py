"""A diagnosed trace in figures and words: :func:`summarize` (the step figures as a dict) and
:func:`report_text` (what ``python -m perfkit trace`` prints). Units: seconds, FLOP."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..units import format_percent, format_time
from .price import CLASSES, launch_gap

if TYPE_CHECKING:
    from .report import TraceReport

__all__ = ["report_text", "summarize"]


def summarize(report: "TraceReport") -> dict[str, Any]:
    """The step figures: kernels, time by class and its shares, GPU idle, launch-bound time, MFU (means over
    the profiler steps), how much of the kernel time perfkit joined and mapped, and the top sinks."""
    k, ops, steps = report.kernels, report.ops, report.steps
    inside = steps[steps["step"] >= 0]
    per_step = inside if not inside.empty else steps
    total = float(k["time_s"].sum())
    by_class = ops.groupby("class")["time_s"].sum()
    gap, gap_source = launch_gap(report.spec) if report.spec is not None else (None, "")
    out: dict[str, Any] = {
        "device": report.spec.name if report.spec is not None else "",
        "device_label": report.spec.label if report.spec is not None else "",
        "launch_gap_s": gap.gap_s if gap is not None else math.nan, "launch_gap_source": gap_source,
        "files": len(report.paths), "ranks": int(k["rank"].nunique()), "steps": int(inside["step"].nunique()),
        "kernels": len(k), "kernel_time_s": total,
        "joined_share": float(k.loc[k["op_id"] >= 0, "time_s"].sum() / total) if total else math.nan,
        "mapped_share": float(k.loc[k["mapped"], "time_s"].sum() / total) if total else math.nan,
        "unmapped_time_s": float(ops.loc[ops["rule"] == "unmapped", "time_s"].sum()),
        "outside_steps_s": float(k.loc[k["step"] < 0, "time_s"].sum()) if not inside.empty else 0.0,
        "time_by_class_s": {c: float(by_class.get(c, 0.0)) for c in CLASSES},
        "step_s": float(per_step["span_s"].mean()), "idle_s": float(per_step["idle_s"].mean()),
        "launch_bound_s": float(per_step["launch_bound_s"].mean()),
        "mfu": float(per_step["mfu"].mean()), "mfu_achievable": float(per_step["mfu_achievable"].mean()),
        "predicted_s": float(ops["predicted_s"].sum(min_count=1)),
        "saving_s": float(ops["saving_s"].clip(lower=0).sum(min_count=1)),
        "notes": list(report.notes),
    }
    top = report.top(5)
    out["top"] = [{"op": r.op, "shapes": r.shapes, "time_s": float(r.time_s), "rule": r.rule, "fix": r.fix,
                   "saving_s": float(r.saving_s)} for r in top.itertuples()]
    return out


def _t(seconds: float) -> str:
    return format_time(seconds) if seconds == seconds else "—"


def report_text(report: "TraceReport", top: int = 10) -> str:
    """The report as text: the device and what the figures rest on, per-step figures, the top time sinks."""
    s = report.summary
    if s.get("cpu_only"):
        return _cpu_text(report, top)
    lines = [f"Trace: {', '.join(p.name for p in report.paths)}",
             f"Device: {s.get('device_label') or s['device'] or 'unknown (no predictions)'}; {s['kernels']} kernels, "
             f"{_t(s['kernel_time_s'])} of kernel time over {s['steps']} profiler step(s), {s['ranks']} rank(s)",
             f"Joined to an op: {format_percent(s['joined_share'])} of kernel time; mapped to a perfkit model: "
             f"{format_percent(s['mapped_share'])}"]
    lines += [f"Note: {n}" for n in s["notes"]]
    if not s["steps"]:
        lines.append("No ProfilerStep#N annotations in the trace: it is taken as one step")
    lines += ["", "Per step (means): "
              f"{_t(s['step_s'])} on the GPU, {_t(s['idle_s'])} idle between kernels, "
              f"{_t(s['launch_bound_s'])} in launch-bound stretches"]
    if s["mfu"] == s["mfu"]:
        lines.append(f"MFU: {format_percent(s['mfu'])} of the datasheet peak, {format_percent(s['mfu_achievable'])} "
                     "of the achievable ceiling (GEMM and attention FLOPs ÷ the step's GPU span)")
    total = sum(s["time_by_class_s"].values())
    lines.append("Time by class: " + ", ".join(
        f"{c} {_t(v)} ({format_percent(v / total) if total else '—'})" for c, v in s["time_by_class_s"].items() if v))
    if s["outside_steps_s"]:
        lines.append(f"Kernels outside any profiler step: {_t(s['outside_steps_s'])}")
    gap = f", less the {_t(s['launch_gap_s'])} launch gap a kernel's duration leaves out" if s["device"] else ""
    lines += ["", f"Top {top} time sinks: measured kernel time; predicted for the shape by perfkit's model on "
                  f"{s['device'] or 'no device'}{gap}; saving = measured − the model's time of the fix"]
    if s["device"]:
        lines.append(f"(the launch gap: {s['launch_gap_source']})")
    frame = report.top(top)
    for r in frame.itertuples():
        pred = f"predicted {_t(r.predicted_s)}" if r.predicted_s == r.predicted_s and r.predicted_s else "no model"
        lines.append(f"  {_t(r.time_s):>9} {format_percent(r.share):>6}  {r.op or '(no op)'} {r.shapes} "
                     f"{r.dtype} ×{r.count}  [{pred}]")
        if r.rule:
            saving = f" (saves ≈ {_t(r.saving_s)})" if r.saving_s == r.saving_s and r.saving_s > 0 else ""
            lines.append(f"            {r.rule}: {r.fix}{saving}")
    if (frame["rule"] == "unmapped").all() or frame.empty:
        lines.append("  (no op perfkit maps among these)")
    unmapped = report.unmapped()
    if not unmapped.empty:
        lines += ["", f"Unmapped kernels ({_t(unmapped['time_s'].sum())}, listed, not dropped):"]
        for r in unmapped.head(5).itertuples():
            lines.append(f"  {_t(r.time_s):>9}  ×{r.count}  {r.op or '(no op)'}: {r.kernel[:90]}")
    return "\n".join(lines)


def _cpu_text(report: "TraceReport", top: int) -> str:
    s = report.summary
    lines = [f"Trace: {', '.join(p.name for p in report.paths)}", f"Note: {s['notes'][0]}",
             f"CPU time of the ops perfkit maps: {_t(s['cpu_time_s'])}", "", f"Top {top} ops by CPU time:"]
    for r in report.top(top).itertuples():
        pred = f" [{_t(r.predicted_s)} on {s['device']} by the model]" if r.predicted_s == r.predicted_s else ""
        lines.append(f"  {_t(r.time_s):>9} {format_percent(r.share):>6}  {r.op} {r.shapes} {r.dtype} ×{r.count}{pred}")
    return "\n".join(lines)
