"""The validation figure of "Check your own model": every recording's error beside the real models' steps.

:func:`plot_validation` draws one :class:`~.report.Report` (``perfkit validate`` for one GPU): on the left,
each microbenchmark recording's median |measured/predicted − 1| (bar) and 90th percentile (tick), grouped
by family, the recordings a model was fitted on hatched; on the right, each real model's measured ÷
predicted step, with the target band. Everything is a recording on the report's GPU beside today's models.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ...display import Note
from ..figures import MIN_FONT_PT, book_figure, heading, new_figure, nothing_drawn
from .report import Report

__all__ = ["plot_validation"]

_FAMILY_COLOURS = {"GEMM": "C0", "memory-bound": "C1", "convolution": "C2", "recurrent layer": "C3",
                   "attention": "C4", "decoding": "C5"}


@book_figure
def plot_validation(report: Report) -> Figure | Note:
    """``report``'s families (left: median and p90 |error| per recording, fit ones hatched) and real-model
    steps (right: measured ÷ predicted, the 0.9–1.1 target shaded)."""
    if not isinstance(report, Report):
        raise TypeError(f"report must be a perfkit validate Report (validation_report()[i]), got {report!r}")
    fam = report.families.sort_values(["family", "recording"], key=lambda c: c.map(
        {f: i for i, f in enumerate(_FAMILY_COLOURS)}) if c.name == "family" else c).reset_index(drop=True)
    if not len(fam):
        return nothing_drawn(f"no microbenchmark recording on {report.device} to score")
    with_steps = report.steps is not None and len(report.steps)
    fig, axes = new_figure(1, 2 if with_steps else 1, height=2.2 + 0.21 * len(fam))
    if with_steps:
        axes[0, 0].get_gridspec().set_width_ratios([2.2, 1])
    ax = axes[0, 0]
    y = np.arange(len(fam))[::-1]
    cap = 3.0
    for yi, r in zip(y, fam.itertuples()):
        colour = _FAMILY_COLOURS.get(r.family, "0.5")
        fit = str(r.split).startswith("fit")
        ax.barh(yi, min(r.median_abs, cap), color=colour if not fit else "white", edgecolor=colour,
                hatch="///" if fit else None, height=0.7)
        if not math.isnan(r.p90_abs):
            ax.plot([min(r.p90_abs, cap)], [yi], "|", color="black", ms=9)
        if r.median_abs > cap:
            ax.annotate(f" {r.median_abs:.0%}", (cap, yi), va="center", fontsize=MIN_FONT_PT)
    ax.set_yticks(y, [f"{r.recording}{' (fit)' if str(r.split).startswith('fit') else ''}" for r in fam.itertuples()],
                  fontsize=MIN_FONT_PT)
    ax.set_xlim(0, cap * 1.12)
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_xlabel("|measured / predicted − 1|: median (bar), 90th percentile (tick)")
    ax.grid(True, axis="x", alpha=0.25)
    handles = [Patch(color=c, label=f) for f, c in _FAMILY_COLOURS.items() if (fam["family"] == f).any()]
    handles.append(Patch(facecolor="white", edgecolor="0.4", hatch="///", label="fitted on it"))
    ax.legend(handles=handles, fontsize=MIN_FONT_PT, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4, frameon=False)
    if with_steps:
        bx = axes[0, 1]
        steps = report.steps.reset_index(drop=True)
        ys = np.arange(len(steps))[::-1]
        bx.axvspan(0.9, 1.1, color="0.85", label="target 0.9 – 1.1")
        bx.axvline(1, color="0.4", lw=0.8)
        bx.barh(ys, steps["ratio"] - 1, left=1, height=0.6, color="C0")
        for yi, v in zip(ys, steps["ratio"]):
            bx.annotate(f"{v:.2f}", (max(v, 1), yi), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=MIN_FONT_PT)
        bx.set_yticks(ys, steps["model"], fontsize=MIN_FONT_PT)
        hi = max(1.6, float(steps["ratio"].max()) + 0.15)
        bx.set_xlim(min(0.6, float(steps["ratio"].min()) - 0.1), hi)
        bx.set_xlabel("measured ÷ predicted step")
        bx.legend(fontsize=MIN_FONT_PT, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    heading(fig, f"Today's models against every recording on {report.device}: microbenchmarks by family "
                 "(left) and four real models' training steps, held out (right)",
            f"{report.source}; predicted with {report.spec.name}'s ceilings ({report.spec.ceilings.source.split(';')[0]})")
    return fig
