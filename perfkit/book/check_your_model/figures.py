"""Figures of the chapter "Check your own model" (the advisor): where a step's time goes, what the fixes
save, and the advisor's predictions against measurements.

- :func:`plot_step_breakdown` and :func:`plot_savings` draw :class:`perfkit.advisor.Advice` objects,
  one or a ``name → Advice`` mapping: model predictions, captioned with
  :func:`perfkit.provenance.modelled` of each advice's device;
- :func:`plot_advice_vs_measured` draws an ``advisor_layers`` frame (every distinct op timed beside its
  prediction) and :func:`plot_fix_savings` an ``advisor_fixes`` frame (each fix timed against the op as
  it is); both are captioned with the frame's own source (live or recorded).

An op's kind of work is one of :data:`KINDS`: the GEMM kinds of :data:`perfkit.advisor.ops.GEMM_OPS`,
and every memory-bound op (norms, activations, dropout, elementwise, pooling, embeddings) grouped.
Seconds throughout (SI-prefixed ticks); shares of a step as fractions.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter
from matplotlib.transforms import ScaledTranslation

from ...advisor.advice import Advice
from ...advisor.ops import GEMM_OPS
from ...advisor.rules import RULES
from ...display import Note
from ...gemm_model import prediction_error
from ...provenance import Source, caption, modelled
from ...units import format_percent, format_time
from ..figures import (MIN_FONT_PT, book_figure, frame_source, heading, new_figure, no_data, nothing_drawn,
                       single_axes, time_axis)

__all__ = ["plot_advice_vs_measured", "plot_fix_savings", "plot_savings", "plot_step_breakdown"]

#: The kinds of work a step is split into: GEMMs by kind, then every memory-bound op.
KINDS = ("linear", "conv", "attention", "matmul", "rnn", "memory-bound")
#: The colour of each kind of work (matplotlib colour names).
KIND_COLOURS = {"linear": "C0", "conv": "C2", "attention": "C4", "matmul": "C5", "rnn": "C3", "memory-bound": "0.7"}
#: The colour of each rule's bars (matplotlib's cycle without its gray, C7, which marks unpriced work).
RULE_COLOURS = {r: f"C{i if i < 7 else i + 1}" for i, r in enumerate(RULES)}
_MARKERS = {"linear": "o", "conv": "s", "attention": "^", "matmul": "v", "rnn": "D", "memory-bound": "X"}
# torch functions (the experiments' ``op`` column) → the advisor's GEMM kinds
_FUNCTIONS = {"conv1d": "conv", "conv2d": "conv", "scaled_dot_product_attention": "attention", "lstm": "rnn",
              "gru": "rnn", "rnn_tanh": "rnn", "rnn_relu": "rnn", "bmm": "matmul", "mm": "matmul",
              "addmm": "matmul", "baddbmm": "matmul"}


def op_kind(op: str) -> str:
    """The kind of work (one of :data:`KINDS`) of an op: a layers-table name (``"rnn.l0.recurrent"``,
    ``"layernorm"``) or the torch function an experiment timed (``"conv2d"``, ``"gelu"``)."""
    if str(op).endswith("nchw_transpose"):  # the copies around an NCHW convolution move bytes only
        return "memory-bound"
    head = str(op).split(".")[0]
    head = _FUNCTIONS.get(head, head)
    return head if head in GEMM_OPS else "memory-bound"


def _advices(advices: Any) -> dict[str, Advice]:
    """``advices`` as ``name → Advice``: one Advice is named after its model."""
    if advices is None:
        return {}
    if isinstance(advices, Advice):
        return {advices.model: advices}
    if not isinstance(advices, Mapping):
        raise TypeError(f"advices must be a perfkit.advisor.Advice or a mapping of name → Advice, got "
                        f"{type(advices).__name__}")
    for name, a in advices.items():
        if not isinstance(a, Advice):
            raise TypeError(f"advices[{name!r}] must be a perfkit.advisor.Advice, got {type(a).__name__}")
    return dict(advices)


def _no_advice(named: dict[str, Advice]) -> Note | None:
    if named:
        return None
    return no_data(None, "no advice to draw (pass an Advice, or a mapping of name → Advice)")


def _legend_below(ax: Axes, **kwargs: Any) -> None:
    """A legend half an inch below the Axes (under its tick labels and x label), centred."""
    below = ax.transAxes + ScaledTranslation(0, -0.55, ax.figure.dpi_scale_trans)
    ax.legend(fontsize=MIN_FONT_PT, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below, **kwargs)


def _modelled(named: dict[str, Advice]) -> str:
    """The caption: the device each advice predicts for (said once when they share it)."""
    return caption({name: modelled(a.spec) for name, a in named.items()})


def _mode(a: Advice) -> str:
    return f"{a.dtype} training step" if a.training else f"{a.dtype} forward pass"


@book_figure
def plot_step_breakdown(advices: Advice | Mapping[str, Advice] | None, *, ax: Axes | None = None) -> Figure | Note:
    """Where each model's predicted step goes: one stacked bar per model, the share of its step in each kind
    of work (:data:`KINDS`: GEMMs by kind, memory-bound ops grouped), its predicted step in its label."""
    named = _advices(advices)
    if (note := _no_advice(named)) is not None:
        return note
    ax = single_axes(ax, height=1.4 + 0.5 * len(named))
    y = np.arange(len(named))[::-1].astype(float)
    shares = {}
    for name, a in named.items():
        t = a.layers.groupby(a.layers["op"].map(op_kind))["predicted_s"].sum() if len(a.layers) else pd.Series()
        shares[name] = (t / a.step_s if a.step_s else t * 0).reindex(KINDS, fill_value=0.0)
    drawn = [k for k in KINDS if any(s[k] > 0 for s in shares.values())]
    left = np.zeros(len(named))
    for kind in drawn:
        width = np.array([shares[n][kind] for n in named])
        ax.barh(y, width, left=left, height=0.6, color=KIND_COLOURS[kind], edgecolor="white", label=kind)
        for yi, li, wi in zip(y, left, width):
            if wi >= 0.06:
                ax.annotate(format_percent(wi), (li + wi / 2, yi), ha="center", va="center", fontsize=MIN_FONT_PT)
        left += width
    ax.set_yticks(y, [f"{name}\n{format_time(a.step_s)} per {_mode(a)}" for name, a in named.items()], fontsize=MIN_FONT_PT)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("share of the predicted step")
    ax.grid(True, axis="x", alpha=0.25)
    _legend_below(ax, ncol=len(drawn))
    heading(ax, "Where a step's time goes, by kind of work (the advisor's predictions)", _modelled(named))
    return ax.figure


@book_figure
def plot_savings(advices: Advice | Mapping[str, Advice] | None, *, ax: Axes | None = None) -> Figure | Note:
    """The predicted saving of each rule that fired, as a share of the predicted step: one bar per model
    and rule (``Advice.by_rule``: summed over its findings; fixes may overlap), coloured by rule. A rule
    that fired without a priced saving (the model charges no penalty for it, or it names no single
    fix) is listed and marked, not drawn."""
    named = _advices(advices)
    if (note := _no_advice(named)) is not None:
        return note
    rows = [(name, rule, r.share, r.predicted_saving_s, r.findings)
            for name, a in named.items() for rule, r in a.by_rule().iterrows()]
    if not rows:
        return nothing_drawn("no rule fired for " + ", ".join(named) + " (every rule is met)")
    t = pd.DataFrame(rows, columns=["name", "rule", "share", "saving", "findings"])
    priced = t["share"].notna() & (t["share"] > 0)
    ax = single_axes(ax, height=1.5 + 0.3 * len(t))
    y = np.arange(len(t))[::-1].astype(float)
    colours = RULE_COLOURS
    ax.barh(y[priced.to_numpy()], t.loc[priced, "share"], height=0.7,
            color=[colours[r] for r in t.loc[priced, "rule"]])
    for yi, r, ok in zip(y, t.itertuples(), priced):
        text = f" {format_percent(r.share)} ({format_time(r.saving)})" if ok else " fired; no saving priced"
        ax.annotate(text, (r.share if ok else 0, yi), va="center", fontsize=MIN_FONT_PT, color="black" if ok else "0.35")
    names = t["name"].to_numpy()
    for yi, (a, b) in zip(y, zip(names[:-1], names[1:])):
        if a != b:
            ax.axhline(yi - 0.5, color="0.6", lw=0.6)
    ax.set_yticks(y, [f"{r.name}: {r.rule} ({r.findings})" for r in t.itertuples()], fontsize=MIN_FONT_PT)
    ax.set_ylim(-0.7, len(t) - 0.3)
    top = t.loc[priced, "share"].max() if priced.any() else 0.01
    ax.set_xlim(0, top * 1.4)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("predicted saving, share of the predicted step (in brackets: findings)")
    ax.grid(True, axis="x", alpha=0.25)
    heading(ax, "What each rule's fixes would save (predicted; fixes may overlap)", _modelled(named))
    return ax.figure


def _measured_rows(frame: pd.DataFrame) -> pd.DataFrame:
    keep = frame["predicted_s"].notna() & frame["time_s"].notna() & (frame["time_s"] > 0) & (frame["predicted_s"] > 0)
    return frame[keep]


@book_figure
def plot_advice_vs_measured(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                            ax: Axes | None = None) -> Figure | Note:
    """``advisor_layers``: each distinct op's measured forward + backward time against the advisor's
    prediction (log-log), one colour per model with its median |error| in the legend, one marker per
    kind of work; the gray line is measured = predicted, the dotted ones a factor of 2 either way."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    rows = _measured_rows(frame)
    if not len(rows):
        return nothing_drawn(f"no op has both a prediction and a measurement ({label})")
    ax = single_axes(ax, height=5.8, width=6.8)
    models = list(dict.fromkeys(rows["model"]))
    kinds = rows["op"].map(op_kind)
    for i, model in enumerate(models):
        part = rows[rows["model"] == model]
        err = prediction_error(part["time_s"], part["predicted_s"])
        for kind in KINDS:
            sel = part[kinds.loc[part.index] == kind]
            if len(sel):
                ax.plot(sel["predicted_s"], sel["time_s"], _MARKERS[kind], ms=5, color=f"C{i}", alpha=0.75,
                        mfc="none" if kind == "memory-bound" else f"C{i}", ls="none")
        ax.plot([], [], "s", color=f"C{i}", label=f"{model}: median |error| {err['median_abs']:.0%} ({err['n']} ops)")
    lo = min(rows["time_s"].min(), rows["predicted_s"].min()) / 2
    hi = max(rows["time_s"].max(), rows["predicted_s"].max()) * 2
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, label="measured = predicted")
    for k in (2, 0.5):
        ax.plot([lo, hi], [lo * k, hi * k], ":", color="gray", lw=0.8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    time_axis(ax, "predicted (forward + backward)", axis="x", log=True)
    time_axis(ax, "measured (forward + backward)", axis="y", log=True)
    ax.grid(True, which="both", alpha=0.2)
    first = ax.legend(fontsize=MIN_FONT_PT, loc="upper left")
    ax.add_artist(first)
    drawn = [k for k in KINDS if (kinds == k).any()]
    ax.legend(handles=[Line2D([], [], marker=_MARKERS[k], ls="none", color="black", mfc="none" if
                              k == "memory-bound" else "black", label=k) for k in drawn],
              fontsize=MIN_FONT_PT, loc="lower right", title="kind of work", title_fontsize=MIN_FONT_PT)
    err = prediction_error(rows["time_s"], rows["predicted_s"])
    dtypes = ", ".join(dict.fromkeys(rows["dtype"].astype(str)))
    heading(ax, f"Predicted against measured time per op ({dtypes}): median |error| {err['median_abs']:.0%}, "
                f"{err['n']} ops", label)
    return ax.figure


def _symlog_threshold(values: np.ndarray) -> float:
    """The linear range of a symlog axis: a hundredth of the largest value, rounded down to a power of 10."""
    finite = np.abs(values[np.isfinite(values) & (values != 0)])
    if not len(finite):
        return 1e-6
    return 10.0 ** math.floor(math.log10(finite.max() / 100))


def _short(text: str, n: int = 48) -> str:
    text = str(text).split(":")[0] if ": pk." in str(text) else str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


@book_figure
def plot_fix_savings(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                     max_rows: int = 30) -> Figure | Note:
    """``advisor_fixes``: each fix's measured saving per step (solid) beside the advisor's predicted saving
    (hatched), coloured by rule, on a symmetric-log axis (negative: the fix made the op slower). With
    more than ``max_rows`` fixes, the ``max_rows`` with the largest savings either way are drawn."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise ValueError(f"max_rows must be a positive integer, got {max_rows!r}")
    rows = frame.reset_index(drop=True)
    size = np.fmax(rows["measured_saving_s"].abs().fillna(0), rows["predicted_saving_s"].abs().fillna(0))
    shown = rows.loc[sorted(size.nlargest(max_rows).index)] if len(rows) > max_rows else rows
    n = len(shown)
    fig, axes = new_figure(height=1.9 + 0.42 * n)
    ax = axes[0, 0]
    y = np.arange(n)[::-1].astype(float)
    colours = RULE_COLOURS
    colour = [colours.get(r, "black") for r in shown["rule"]]
    measured, predicted = shown["measured_saving_s"].to_numpy(float), shown["predicted_saving_s"].to_numpy(float)
    ax.barh(y + 0.2, np.nan_to_num(measured), height=0.38, color=colour)
    ax.barh(y - 0.2, np.nan_to_num(predicted), height=0.38, color="white", edgecolor=colour, hatch="///")
    for yi, m, p in zip(y, measured, predicted):
        for value, dy in ((m, 0.2), (p, -0.2)):
            if not np.isfinite(value):
                ax.annotate(" not priced" if dy < 0 else " not measured", (0, yi + dy), va="center", fontsize=MIN_FONT_PT)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xscale("symlog", linthresh=_symlog_threshold(np.concatenate([measured, predicted])))
    time_axis(ax, "saving per step (negative: the fix is slower)", axis="x")
    labels = [f"{r.model}: {r.layer or '(model)'}\n{_short(r.fix)}" for r in shown.itertuples()]
    ax.set_yticks(y, labels, fontsize=MIN_FONT_PT)
    ax.grid(True, axis="x", alpha=0.25)
    handles = [Patch(color=colours.get(r, "black"), label=r) for r in dict.fromkeys(shown["rule"])]
    handles += [Patch(facecolor="0.4", label="measured"),
                Patch(facecolor="white", edgecolor="0.4", hatch="///", label="predicted")]
    _legend_below(ax, handles=handles, ncol=min(len(handles), 5))
    dtypes = ", ".join(dict.fromkeys(shown["dtype"].astype(str)))
    some = f" (the {n} largest of {len(rows)})" if n < len(rows) else ""
    heading(fig, f"Each fix timed: measured (solid) against predicted (hatched) saving, {dtypes}{some}", label)
    return fig
