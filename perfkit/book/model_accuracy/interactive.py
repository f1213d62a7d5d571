"""Interactive figure of the appendix 91_model_accuracy: every recorded microbenchmark row against today's
models, one family at a time.

:func:`family_menu` draws, for the family chosen in a drop-down menu (GEMM, memory-bound, convolution,
recurrent layer, attention, decoding), each row's measured time against the time today's models predict
for it, on log axes, with the recordings a constant was fitted on apart from those held out. The rows
are :attr:`Report.rows <perfkit.book.check_your_model.report.Report>` (``perfkit validate``); the page
only switches between states computed here.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import plotly.graph_objects as go

from ...units import format_percent
from ..check_your_model.held_out import error_stats
from ..check_your_model.report import validation_report
from ..interactive import InteractiveFigure, State, heading, rounded, with_menu
from .tables import FAMILY_LABELS, FAMILY_ORDER

__all__ = ["FIGURES", "family_menu"]

_SPLITS = (("fit", "fitted on it", "#1f77b4", "circle-open"), ("held out", "held out", "#d62728", "circle"))


def _report(report: Any) -> Any:
    if report is not None:
        return report
    reports = validation_report(models=False)
    return reports[0] if reports else None


def _state(family: str, rows: Any) -> State:
    mine = rows[(rows["family"] == family) & np.isfinite(rows["ratio"])]
    traces = []
    for split, *_ in _SPLITS:
        part = mine[mine["split"] == split]
        traces.append({"x": rounded(part["predicted_s"]), "y": rounded(part["time_s"]),
                       "text": list(part["recording"])})
    lo = float(min(mine["predicted_s"].min(), mine["time_s"].min()))
    hi = float(max(mine["predicted_s"].max(), mine["time_s"].max()))
    span = [math.log10(lo) - 0.15, math.log10(hi) + 0.15]
    traces.append({"x": [lo / 2, hi * 2], "y": [lo / 2, hi * 2]})
    held = error_stats(mine.loc[mine["split"] == "held out", "ratio"])
    fit = error_stats(mine.loc[mine["split"] == "fit", "ratio"])
    parts = [f"{name}: {s['n']} rows, median |error| {format_percent(s['median_abs'])}"
             for name, s in (("held out", held), ("fitted on", fit)) if s["n"]]
    label = FAMILY_LABELS.get(family, family)
    return State(label, traces, {"xaxis.range": span, "yaxis.range": span,
                                 "annotations[0].text": f"{label}: " + "; ".join(parts)})


def family_menu(report: Any = None, *, active: int | str = 0) -> InteractiveFigure:
    """A menu over the microbenchmark families of ``report`` (one :class:`~perfkit.book.check_your_model.
    report.Report`; None: the first GPU of :func:`validation_report` without the real models): each row's
    measured time against today's prediction, log-log, fitted-on recordings as open circles, held-out ones
    filled, with the line measured = predicted. ``active``: the family shown first (index or name)."""
    report = _report(report)
    if report is None or report.rows is None or not len(report.rows):
        raise LookupError("no recorded microbenchmark to draw: record one (python -m perfkit record) or use data/")
    rows = report.rows
    families = [f for f in FAMILY_ORDER if ((rows["family"] == f) & np.isfinite(rows["ratio"])).any()]
    families += sorted(set(rows["family"]) - set(families))
    if len(families) < 2:
        raise ValueError(f"a menu needs at least two families with predicted rows, got {families}")
    if isinstance(active, str):
        active = {v: k for k, v in FAMILY_LABELS.items()}.get(active, active)
        if active not in families:
            raise LookupError(f"active must be one of the families {families}, got {active!r}")
        active = families.index(active)
    elif isinstance(active, bool) or not isinstance(active, int) or not 0 <= active < len(families):
        raise ValueError(f"active must be a family's name or an index 0 … {len(families) - 1}, got {active!r}")
    states = [_state(f, rows) for f in families]
    traces = [go.Scatter(mode="markers", name=label, marker={"color": colour, "symbol": symbol, "size": 6},
                         hovertemplate="%{text}<br>predicted %{x:.3s}s, measured %{y:.3s}s<extra></extra>")
              for _, label, colour, symbol in _SPLITS]
    traces.append(go.Scatter(mode="lines", name="measured = predicted", line={"color": "#888", "dash": "dot"},
                             hoverinfo="skip"))
    head = heading("Each microbenchmark row: measured against today's model",
                    f"{report.source}; predicted with {report.spec.name}'s calibrated ceilings")
    layout = {**head, "height": 520, "margin": {"l": 70, "r": 20, "t": 85, "b": 110},
              "xaxis": {"type": "log", "title": "predicted time (s)", "exponentformat": "SI"},
              "yaxis": {"type": "log", "title": "measured time (s)", "exponentformat": "SI"},
              "legend": {"orientation": "h", "x": 0, "y": -0.2},
              "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.01, "xanchor": "left",
                               "yanchor": "bottom", "showarrow": False}]}
    fig = with_menu(traces, states, active=active, layout=layout)
    names = [FAMILY_LABELS.get(f, f) for f in families]
    alt = ("Log-log scatter, one family at a time chosen from a menu (" + ", ".join(names) + "): each "
           "recorded microbenchmark row's measured time against the time today's model predicts, the "
           "recordings a constant was fitted on as open circles and the held-out ones filled, with the "
           "line where measured equals predicted. A note above gives each split's median error.")
    return InteractiveFigure(fig, alt=alt, name="accuracy-family-menu")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"family_menu": family_menu}
