"""Chapter 09's "Read your own profile": a diagnosed ``torch.profiler`` trace on the roofline, its time sinks.

:func:`diagnosed` reads a published trace (:mod:`perfkit.published_data.traces`) and diagnoses it
(:func:`perfkit.diagnose_trace`) on the GPU it was recorded on. :func:`plot_trace_roofline` draws every
op instance of one profiler step on that GPU's roofline (arithmetic intensity against achieved FLOP/s,
both axes logarithmic), coloured by the rule that explains its gap to the model; a menu switches between
traces (or, for one trace, colours by class of work instead). :func:`top_sinks` and :func:`sinks_table`
give the largest time sinks with their fix and its saving. Every figure and table says what its numbers
rest on: kernel times measured by whoever recorded the trace, predictions by perfkit's model of the same
shapes on the same GPU. Units: seconds, FLOP, bytes, FLOP/s.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.colors import to_hex

from ..._validate import positive_int
from ...display import Note, Table, table
from ...provenance import Source, caption, from_meta, modelled
from ...published_data.traces import TRACES, TRACES_ABSENT, published_trace_or_none, trace_meta
from ...trace import TRACE_RULES, TraceReport, diagnose_trace
from ...trace.result import CLASSES
from ...units import format_percent, format_rate, format_time
from ..interactive import InteractiveFigure, State, retitle, rounded, with_menu
from ..figures import book_figure
from .figures import RULE_COLOURS

__all__ = ["CLASS_COLOURS", "RULE_HEX", "diagnosed", "plot_trace_roofline", "sinks_table",
           "step_ops", "top_sinks", "trace_caption", "trace_name", "trace_source"]

#: The colour of each trace rule: the advisor's colour where the rule is the same, else one of its own
#: (a rule added later takes the next unused one of :data:`_SPARE`); gray for an op with no finding.
RULE_HEX: dict[str, str] = {**{r: to_hex(c) for r, c in RULE_COLOURS.items() if r in TRACE_RULES},
                            "precision": "#17becf", "launch_bound": "#e377c2", "model_gap": "#000000",
                            "communication": "#637939", "host_transfer": "#843c39",
                            "attention_math": "#5254a3", "unmapped": "#c7c7c7", "": "#7f7f7f"}
_SPARE = ("#393b79", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")
RULE_HEX.update(zip([r for r in TRACE_RULES if r not in RULE_HEX], _SPARE))
#: The colour of each class of GPU time (a class added later takes the next unused one of :data:`_SPARE`).
CLASS_COLOURS: dict[str, str] = {"gemm": "#1f77b4", "attention": "#9467bd", "memory": "#2ca02c",
                                 "communication": "#637939", "transfer": "#843c39", "unmapped": "#c7c7c7"}
CLASS_COLOURS.update(zip([c for c in CLASSES if c not in CLASS_COLOURS], _SPARE))
_NO_RULE = "no finding"


def trace_name(report: TraceReport) -> str | None:
    """The :data:`~perfkit.published_data.traces.TRACES` name of ``report``'s first file; None for others."""
    file = report.paths[0].name if report.paths else ""
    return next((n for n, e in TRACES.items() if e.file == file), None)


def trace_source(report: TraceReport) -> Source | str:
    """Where ``report``'s kernel times come from: a published trace's publisher, GPU, software and day,
    else the trace file's name."""
    name = trace_name(report)
    if name is not None:
        return from_meta(trace_meta(name))
    return f"torch.profiler trace {', '.join(p.name for p in report.paths)}"


def trace_caption(report: TraceReport, source: Source | str | None = None) -> str:
    """One line: what the kernel times rest on (``source``, default :func:`trace_source`) and what the
    predictions rest on (perfkit's model of the report's GPU)."""
    parts: dict[str, Source | str | None] = {"kernel times": source or trace_source(report)}
    if report.spec is not None:
        parts["predicted"] = modelled(report.spec)
    return caption(parts)


def _report(report: Any, param: str = "report") -> TraceReport:
    if not isinstance(report, TraceReport):
        raise TypeError(f"{param} must be a TraceReport (pk.diagnose_trace(...)), "
                        f"got {type(report).__name__}")
    return report


def diagnosed(name: str) -> TraceReport | None:
    """The published trace ``name`` (a key of ``TRACES``) diagnosed on the GPU it was recorded on; None
    where the folder of published traces is not here."""
    path = published_trace_or_none(name)
    return None if path is None else diagnose_trace(path, spec=TRACES[name].device, progress=False)


def step_ops(report: TraceReport, step: int | None = None) -> pd.DataFrame:
    """``report.ops`` of one profiler step: ``step``, else the last one (kernels outside any step where
    there is none)."""
    ops = _report(report).ops
    steps = sorted(set(ops["step"]))
    if step is None:
        inside = [s for s in steps if s >= 0]
        step = inside[-1] if inside else (steps[-1] if steps else -1)
    elif step not in steps:
        raise LookupError(f"step must be one of the trace's profiler steps {steps}, got {step!r}")
    return ops[ops["step"] == step]


def _dtype(ops: pd.DataFrame) -> str:
    tensor = ops[ops["class"].isin(["gemm", "attention"]) & (ops["flops"] > 0)]
    return str(tensor.groupby("dtype")["flops"].sum().idxmax()) if not tensor.empty else "float32"


def _drawn(ops: pd.DataFrame) -> pd.Series:
    return (ops["flops"] > 0) & (ops["bytes"] > 0) & (ops["time_s"] > 0)


def _hover(r: Any, same: int) -> str:
    op = str(r.op).removeprefix("aten::") or "(no op)"
    layer = f" · {r.layer}" if r.layer else ""
    layer += f" (one of {same} alike)" if same > 1 else ""
    predicted = f"predicted {format_time(r.predicted_s)}" if r.predicted_s == r.predicted_s else "no model"
    finding = f"<br>{r.rule}: {r.fix}" if r.rule else ""
    return (f"<b>{op}</b> {r.shapes} {r.dtype}{layer}<br>measured {format_time(r.time_s)}, "
            f"{predicted}<br>{format_rate(r.achieved_flop_s)} at {r.flops / r.bytes:.3g} FLOP/B{finding}")


def _roofs(report: TraceReport, dtype: str, lo: float, hi: float) -> list[dict]:
    """The datasheet roof and the achievable one over intensities ``lo`` … ``hi`` (FLOP/B)."""
    spec = report.spec
    out = []
    for name, peak, bandwidth in (
            ("datasheet", spec.peak_flop_s(dtype), spec.mem_bandwidth),
            ("achievable", spec.ceilings.flop_s_for(dtype), spec.ceilings.bandwidth)):
        ridge = peak / bandwidth
        x = [lo, ridge, hi] if lo < ridge < hi else [lo, hi]
        out.append({"x": rounded(x), "y": rounded([min(peak, bandwidth * v) for v in x]),
                    "name": f"{name} roof ({dtype}): {format_rate(peak)}, {format_rate(bandwidth, 'B')}"})
    return out


_SI = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _ticks(low: float, high: float) -> dict:
    """Tick values at each power of ten from ``low`` to ``high`` (FLOP/s), labelled with SI prefixes."""
    powers = range(math.ceil(math.log10(low)), math.floor(math.log10(high)) + 1)
    text = [f"{10 ** (p % 3)}{_SI.get(p - p % 3, f'e{p - p % 3}')}" for p in powers]
    return {"yaxis.tickvals": [10.0 ** p for p in powers], "yaxis.ticktext": text}


def _groups(ops: pd.DataFrame, by: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(legend name, colour, rows) of each group of drawn ops, in a fixed order."""
    if by == "rule":
        keys = [r for r in (*TRACE_RULES, "") if r != "unmapped"]
        return [(r or _NO_RULE, RULE_HEX.get(r, "#000000"), ops[ops["rule"] == r]) for r in keys]
    return [(c, CLASS_COLOURS.get(c, "#000000"), ops[ops["class"] == c]) for c in CLASSES]


def _state(label: str, report: TraceReport, by: str, slots: int, step: int | None,
           source: Source | str | None) -> State:
    ops = step_ops(report, step)
    drawn = ops[_drawn(ops)]
    total = float(ops["time_s"].sum())
    intensity = (drawn["flops"] / drawn["bytes"]).to_numpy()
    dtype = _dtype(ops)
    ridge = report.spec.peak_flop_s(dtype) / report.spec.mem_bandwidth
    lo = 10 ** math.floor(math.log10(min(intensity.min(initial=ridge), ridge) / 2))
    hi = 10 ** math.ceil(math.log10(max(intensity.max(initial=ridge), ridge) * 2))
    top_y = report.spec.peak_flop_s(dtype)
    bottom_y = max(drawn["achieved_flop_s"].to_numpy().min(initial=top_y) / 2, top_y * 1e-7)
    biggest = float(drawn["time_s"].max()) if len(drawn) else 1.0
    traces: list[dict] = []
    alike = drawn.groupby(["op", "shapes", "rule"]).size().to_dict()
    groups = _groups(drawn, by)
    for name, colour, part in groups + [("", "#000000", drawn.iloc[:0])] * (slots - len(groups)):
        size = 5 + 22 * np.sqrt(part["time_s"].to_numpy() / biggest)
        traces.append({"x": rounded(part["flops"] / part["bytes"]), "y": rounded(part["achieved_flop_s"]),
                       "text": [_hover(r, alike[(r.op, r.shapes, r.rule)]) for r in part.itertuples()],
                       "marker.size": rounded(size, 2), "marker.color": colour,
                       "name": f"{name} ({len(part)})", "showlegend": len(part) > 0})
    traces += _roofs(report, dtype, lo, hi)
    shown = float(drawn["time_s"].sum())
    steps = sorted(s for s in set(report.ops["step"]) if s >= 0)
    which = f"step {int(ops['step'].iloc[0])} of {len(steps)}" if len(steps) > 1 else "one profiler step"
    note = (f"{len(drawn)} op instances of {which} on {report.spec.name} hold "
            f"{format_percent(shown / total) if total else '—'} of its {format_time(total)} of kernel "
            "time;<br>marker area ∝ measured time; copies and ops perfkit does not map have no FLOP count")
    title = f"{label}: every op on the roofline, by {by}"
    return State(label, traces, {**retitle(title, trace_caption(report, source)),
                                 "xaxis.range": [math.log10(lo), math.log10(hi)],
                                 "yaxis.range": [math.log10(bottom_y), math.log10(top_y * 2)],
                                 **_ticks(bottom_y, top_y * 2),
                                 "annotations[0].text": note})


def _named(reports: Any) -> dict[str, TraceReport]:
    if isinstance(reports, TraceReport):
        name = trace_name(reports)
        label = TRACES[name].ran.split(",")[0] if name else ", ".join(p.name for p in reports.paths)
        return {label: reports}
    if not isinstance(reports, Mapping):
        raise TypeError(f"reports must be a TraceReport or a mapping of name → TraceReport (or None), "
                        f"got {type(reports).__name__}")
    out = {}
    for name, r in reports.items():
        if not isinstance(name, str):
            raise TypeError(f"reports' keys must be names (strings), got {name!r}")
        if r is not None:
            out[name] = _report(r, f"reports[{name!r}]")
    return out


@book_figure
def plot_trace_roofline(reports: TraceReport | Mapping[str, TraceReport | None], *,
                        step: int | None = None,
                        sources: Mapping[str, Source | str] | None = None) -> InteractiveFigure | Note:
    """Every op instance of one profiler step (``step``, default the last) of each diagnosed trace on
    its GPU's roofline: arithmetic intensity (FLOP/B) against achieved FLOP/s, log-log, under the
    datasheet roof and the achievable one (``spec.ceilings``) of the dtype doing most FLOPs; colour: the
    rule that explains the op's gap to the model; marker area: its measured time; hover: op, shapes,
    dtype, measured and predicted time, rule and fix. ``reports``: one report, or name → report (None
    entries are skipped); a menu switches between them (with one, between colouring by rule and by
    class of work). ``sources``: name → where the kernel times come from (default:
    :func:`trace_source`). A note where there is nothing to draw: no report (the published traces are
    absent; ``instead=`` says what the reader sees in its place), or a CPU-only trace."""
    named = _named(reports)
    sources = dict(sources or {})
    if not named:
        return Note(TRACES_ABSENT[:1].upper() + TRACES_ABSENT[1:], "Published traces missing")
    cpu = [n for n, r in named.items() if r.spec is None or r.summary.get("cpu_only")]
    if cpu:
        return Note(f"{', '.join(cpu)}: no GPU kernels, or a GPU perfkit has no spec for (pass spec= to "
                    "pk.diagnose_trace), so there is no roofline to draw", "Nothing to draw")
    if len(named) == 1:
        (label, report), = named.items()
        plan = [(label, label, report, "rule"), (f"{label}, by class", label, report, "class")]
    else:
        plan = [(label, label, report, "rule") for label, report in named.items()]
    slots = max(len(_groups(r.ops.iloc[:0], by)) for _, _, r, by in plan)
    states = [_state(label, r, by, slots, step, sources.get(key)) for label, key, r, by in plan]
    edge = {"width": 0.5, "color": "white"}
    points = [go.Scatter(mode="markers", hovertemplate="%{text}<extra></extra>",
                         marker={"opacity": 0.75, "line": edge}) for _ in range(slots)]
    roofs = [go.Scatter(mode="lines", hoverinfo="name", line={"color": "#444444", "width": w, "dash": dash})
             for w, dash in ((2, "solid"), (1.5, "dash"))]
    note = {"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": -0.53, "xanchor": "left",
            "yanchor": "top", "align": "left", "showarrow": False}
    layout = {"height": 620, "margin": {"l": 70, "r": 20, "t": 78, "b": 200},
              "xaxis": {"type": "log", "title": {"text": "arithmetic intensity (FLOP per byte moved)"}},
              "yaxis": {"type": "log", "title": {"text": "achieved (FLOP/s)"}},
              "legend": {"orientation": "h", "x": 0, "y": -0.22,
                         "itemsizing": "constant"},
              "annotations": [note]}
    fig = with_menu(points + roofs, states, layout=layout)
    alt = (f"Log-log roofline scatter, one trace at a time chosen from a menu ({', '.join(named)}): each "
           "point is one op instance of a profiler step, placed at its arithmetic intensity (FLOP per byte) "
           "and the FLOP/s its measured kernels achieved, under the GPU's datasheet roof and its achievable "
           "roof; colour is the rule that explains its gap to perfkit's model, size its measured time.")
    return InteractiveFigure(fig, alt=alt, name="trace-roofline")


def top_sinks(report: TraceReport, n: int = 8) -> pd.DataFrame:
    """The ``n`` largest time sinks of ``report`` (:meth:`TraceReport.top`: op instances of one op,
    shape and rule summed over the whole trace) as the chapter shows them: ``op`` (without ``aten::``,
    underscores as spaces so that it wraps, with its count), ``shapes``, ``time_s`` (measured), ``share``
    of the kernel time, ``predicted_s`` (the model), ``fix`` (the rule and its fix) and ``saving_s``
    (measured − the model's time of the fix); NaN where there is no model or no priced saving."""
    top = _report(report).top(positive_int("n", n))
    names = [str(o).removeprefix("aten::").replace("_", " ").strip() or "(no op)" for o in top["op"]]
    return pd.DataFrame({
        "op": [f"{o} ×{c}" for o, c in zip(names, top["count"])],
        "shapes": top["shapes"], "time_s": top["time_s"], "share": top["share"],
        "predicted_s": top["predicted_s"].where(top["predicted_s"] > 0),  # top() sums no model to 0
        "fix": [f"{r}: {f}" if r and f else (r or "–") for r, f in zip(top["rule"], top["fix"])],
        "saving_s": top["saving_s"].where(top["saving_s"] > 0)})


def sinks_table(report: TraceReport | None, n: int = 8, *,
                source: Source | str | None = None) -> Table | Note:
    """:func:`top_sinks` as a table captioned with what it rests on (:func:`trace_caption`); times in the
    unit of the largest. A note where ``report`` is None (the published traces are not here)."""
    if report is None:
        return Note(TRACES_ABSENT[:1].upper() + TRACES_ABSENT[1:], "Published traces missing")
    frame = top_sinks(report, n)
    unit = format_time(float(frame["time_s"].max() if len(frame) else 0.0)).rsplit(" ", 1)[-1]
    name = trace_name(report)
    what = TRACES[name].ran if name else ", ".join(p.name for p in report.paths)
    return table(frame, seconds={"time_s": unit, "predicted_s": unit, "saving_s": unit},
                 formats={"share": "{:.0%}"}, precision=1,
                 caption=f"{what}: the {len(frame)} largest time sinks; {trace_caption(report, source)}")

