"""Figures of the fully-connected chapter: a layer's three passes, batch size, feature counts, vocabulary padding.

Each takes the frame an experiment returned (live, or loaded from ``data/``) and is captioned with
that frame's source; ``source`` is needed only for a hand-built frame without metadata (e.g. the
model-only frame of :func:`perfkit.book.fully_connected.experiments.predicted_features`, captioned with
:func:`perfkit.provenance.modelled`), or to say why the frame is None. Model curves of other devices
(``models=``) are computed here from :func:`perfkit.gemm_model.predict_gemm_time`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ...devices import DeviceSpec
from ...display import Note
from ...gemm_model import predict_gemm_time
from ...meta import FrameMeta
from ...provenance import Source, caption, modelled, source_of
from ...roofline import arithmetic_intensity, batch_crossover, math_bound_batch
from .pricing import repriced
from ..figures import (MIN_FONT_PT, book_figure, frame_source, heading, legend_name, named_frames, new_figure, no_data, say,
    single_axes, time_axis)

__all__ = ["plot_fc_batch", "plot_fc_crossover", "plot_fc_features", "plot_fc_passes", "plot_fc_widths",
           "plot_vocab_padding"]

_PHASES = ("forward", "dgrad", "wgrad")


def _tflop_s(frame: pd.DataFrame, seconds: pd.Series) -> pd.Series:
    return 2.0 * frame["M"] * frame["N"] * frame["K"] / seconds / 1e12


@book_figure
def plot_fc_passes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                   ax: Axes | None = None) -> Figure | Note:
    """TFLOP/s of each pass (forward, dgrad, wgrad) against batch: through autograd (solid) and the
    GEMM alone (dashed), the model's prediction as crosses (``fc_passes``)."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    frame = repriced(frame)  # a recording's model line is today's model
    ax = single_axes(ax, height=4.2)
    for i, phase in enumerate(p for p in _PHASES if p in set(frame["phase"])):
        part = frame[frame["phase"] == phase]
        for impl, style in (("autograd", "o-"), ("gemm", "s--")):
            g = part[part["impl"] == impl].sort_values("batch")
            ax.plot(g["batch"], g["tflops"], style, color=f"C{i}", ms=4,
                    mfc="white" if impl == "gemm" else None, label=f"{phase}, {impl}")
        g = part[part["impl"] == "gemm"].sort_values("batch")
        if g["predicted_s"].notna().any():
            ax.plot(g["batch"], _tflop_s(g, g["predicted_s"]), "x", color=f"C{i}", ms=7, mew=1.5,
                    label=f"{phase}, model")
    I, O = int(frame["in_features"].iloc[0]), int(frame["out_features"].iloc[0])
    _throughput_axes(ax, "batch", ncol=3)
    heading(ax, f"The three GEMMs of a {I}→{O} layer, {frame['dtype'].iloc[0]}: autograd against the GEMM alone",
            label)
    return ax.figure


def _throughput_axes(ax: Axes, xlabel: str, *, ncol: int) -> None:
    """TFLOP/s from zero against a log₂ ``xlabel`` axis, with a grid and a small legend."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT, ncol=ncol)


def _specs(models: DeviceSpec | Iterable[DeviceSpec] | None) -> list[DeviceSpec]:
    items = [] if models is None else [models] if isinstance(models, DeviceSpec) else list(models)
    bad = [m for m in items if not isinstance(m, DeviceSpec)]
    if bad:
        raise TypeError(f"models must be DeviceSpecs (e.g. pk.device_spec('H100-SXM')), got {bad!r}")
    return items


@book_figure
def plot_fc_batch(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                  published: Mapping[str, pd.DataFrame | None] | None = None,
                  models: DeviceSpec | Iterable[DeviceSpec] | None = None) -> Figure | Note:
    """A layer's forward GEMM against batch: duration, TFLOP/s, and intensity against the ridge.

    ``frame`` is an ``fc_batch`` run (its own ``predicted_s`` dashed black); ``published`` (name →
    frame, e.g. ``pk.provenance.published_counterparts("fc_batch")``) adds the published GPUs ("then", dotted);
    ``models`` adds the model's curve for each device (dashed) and, in the bottom panel, its ridge
    and :func:`perfkit.math_bound_batch` (vertical dashed). Thin lines on the duration panel are
    each measured series' two asymptotes (its fastest time, and time ∝ batch at its best
    throughput); the dotted verticals below mark where they meet, the measured crossover.
    """
    then, then_labels = named_frames(published, param="published")
    specs = _specs(models)
    if not then and (note := no_data(frame, source)) is not None:
        return note
    ours = frame is not None and len(frame) > 0
    if ours:
        frame = repriced(frame)  # a recording's model line is today's model
        layer = _layer(frame)
        for name in [n for n, f in then.items() if _layer(f) != layer]:
            say(f"{name} is another layer or dtype ({_layer(then.pop(name))} against ours {layer})",
                title="Not drawn")
            then_labels.pop(name)
    else:
        say(f"ours: {source or 'no data'}", title="Published data only",
            instead="the published measurements, drawn below")
    series = ({"ours": frame} if ours else {}) | then
    labels = {"ours": frame_source(frame, source)} if ours else {}
    labels |= then_labels
    shown = next(iter(series.values()))
    O, I, dtype = int(shown["M"].iloc[0]), int(shown["K"].iloc[0]), str(shown["dtype"].iloc[0])
    top = max(int(f["N"].max()) for f in series.values())
    grid = np.unique(np.geomspace(1, max(top, 8192) if specs else top, 60).round().astype(int))
    fig, axes = new_figure(3, 1, height=9)
    ax_t, ax_f, ax_i = axes[:, 0]
    for i, (name, f) in enumerate(series.items()):
        g = f.sort_values("N")
        k = i - 1 if ours else i  # index among the published series
        color = "C0" if name == "ours" else f"C{k + 3}"
        style = dict(marker="o", ls="-", ms=3) if name == "ours" else dict(marker="^v<>"[k % 4], ls=":", ms=5)
        legend = legend_name(labels[name], name) if name == "ours" else f"{name} (published)"
        ax_t.plot(g["N"], g["time_s"], color=color, label=legend, **style)
        ax_f.plot(g["N"], g["tflops"], color=color, label=legend, **style)
        c = batch_crossover(g).iloc[0]
        floor_s, best, cross = c["floor_s"], c["best_tflops"] * 1e12, c["crossover_batch"]
        low, high = grid[grid <= 4 * cross], grid[grid >= cross / 4]
        ax_t.plot(low, np.full(len(low), floor_s), color=color, lw=0.7, alpha=0.5)
        ax_t.plot(high, 2.0 * O * I * high / best, color=color, lw=0.7, alpha=0.5)
        ax_i.axvline(cross, color=color, ls=":", lw=1.2, label=f"measured crossover, {legend}: {cross:.0f}")
    if ours and frame["predicted_s"].notna().any():
        g = frame.sort_values("N")
        ax_t.plot(g["N"], g["predicted_s"], "--", color="black", lw=1, label="model, this device")
        ax_f.plot(g["N"], _tflop_s(g, g["predicted_s"]), "--", color="black", lw=1, label="model, this device")
    ax_i.plot(grid, [arithmetic_intensity(O, int(b), I, dtype) for b in grid], color="black", lw=1.2,
              label=f"intensity of {I}→{O}, {dtype}")
    for j, spec in enumerate(specs):
        color = f"C{j + 1}"
        t = np.array([predict_gemm_time(O, int(b), I, dtype, spec) for b in grid])
        ax_t.plot(grid, t, "--", color=color, lw=1, label=f"{spec.name}, model")
        ax_f.plot(grid, 2.0 * O * I * grid / t / 1e12, "--", color=color, lw=1, label=f"{spec.name}, model")
        ridge, b = spec.ops_per_byte(dtype), math_bound_batch(I, O, spec, dtype)
        ax_i.axhline(ridge, color=color, lw=1, label=f"{spec.name} ridge {ridge:.0f} FLOP/B")
        if b is not None:
            ax_i.axvline(b, color=color, ls="--", lw=1, label=f"{spec.name} math-bound from batch {b}")
    time_axis(ax_t, log=True)
    ax_f.set_ylabel("TFLOP/s")
    ax_f.set_ylim(bottom=0)
    ax_i.set_yscale("log")
    ax_i.set_ylabel("FLOP per byte")
    ax_i.set_xlabel("batch (N of the forward GEMM)")
    for ax in (ax_t, ax_f, ax_i):
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=MIN_FONT_PT)
    sources = caption(labels) + "".join(f"; {m}" for m in dict.fromkeys(str(modelled(s)) for s in specs))
    heading(fig, f"Batch size: the forward GEMM of a {I}→{O} layer, {dtype}", sources)
    return fig


@book_figure
def plot_fc_crossover(frame: pd.DataFrame | None, spec: DeviceSpec, *, missing: str = "",
                      layers: Iterable[int] = (1024, 2048, 4096), dtypes: Iterable[str] = ("bfloat16", "tf32")
                      ) -> Figure:
    """TFLOP/s against the batch of square layers' forward GEMMs, one panel per dtype: published
    measurements (``frame``, from :func:`perfkit.book.fully_connected.analysis.published_batch_sweeps`:
    points, and their measured crossover dotted) against the model of ``spec`` (dashed lines, and
    :func:`perfkit.math_bound_batch` as a dashed vertical). Without ``frame`` it draws the model
    alone, labelled as such, beside a note saying ``missing`` (e.g. how to get the data)."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (pk.device_spec('H100-SXM')), got {spec!r}")
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a batch-sweep DataFrame or None, got {type(frame).__name__}")
    ours = frame is not None and len(frame) > 0
    if ours:
        layers, dtypes = sorted({int(m) for m in frame["M"]}), list(dict.fromkeys(frame["dtype"]))
    else:
        layers, dtypes = sorted(int(m) for m in layers), list(dtypes)
        say(missing or "no published measurements were given", title="Model only",
            instead="the model's prediction, drawn below")
    fig, axes = new_figure(1, len(dtypes), height=4.6)
    grid = np.unique(np.geomspace(64, 8192, 40).round().astype(int))
    for ax, dtype in zip(axes[0], dtypes):
        for i, width in enumerate(layers):
            color = f"C{i}"
            t = np.array([predict_gemm_time(width, int(b), width, dtype, spec) for b in grid])
            ax.plot(grid, 2.0 * width * width * grid / t / 1e12, "--", color=color, lw=1)
            b = math_bound_batch(width, width, spec, dtype)
            if b is not None:
                ax.axvline(b, color=color, ls="--", lw=0.8, alpha=0.6)
            g = frame[(frame["M"] == width) & (frame["K"] == width) & (frame["dtype"] == dtype)] if ours else []
            if len(g):
                g = g.sort_values("N")
                ax.plot(g["N"], g["tflops"], "o", color=color, ms=5)
                ax.axvline(batch_crossover(g).iloc[0]["crossover_batch"], color=color, ls=":", lw=1.5)
        ax.set_title(dtype, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (the small GEMM dimension)")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.25)
    handles = [Line2D([], [], color=f"C{i}", lw=3, label=f"{w} → {w}") for i, w in enumerate(layers)]
    handles += [Line2D([], [], color="gray", ls="--", lw=1, label="model; vertical: pk.math_bound_batch")]
    if ours:
        handles += [Line2D([], [], color="gray", ls="", marker="o", label="published"),
                    Line2D([], [], color="gray", ls=":", lw=1.5, label="measured crossover")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=MIN_FONT_PT, frameon=False)
    parts = {"points": source_of(frame) if ours else None, "lines": modelled(spec)}
    timing = (FrameMeta.of(frame).timing or "").split(":")[0] if ours else ""
    what = (f"published measurements{f' ({timing})' if timing else ''} against the model" if ours
            else "the model's prediction only")
    heading(fig, f"Square layers on {spec.name}: where the forward GEMM turns math-bound, {what}",
            caption(parts))
    return fig


def _layer(frame: pd.DataFrame) -> tuple[int, int, str]:
    """(M, K, dtype) of a batch sweep's first row: the layer it measures."""
    r = frame.iloc[0]
    return int(r["M"]), int(r["K"]), str(r["dtype"])


@book_figure
def plot_fc_widths(frames: Mapping[str, pd.DataFrame | None], *, dtype: str = "float16", ax: Axes | None = None,
                   sources: Mapping[str, Source | str] | None = None) -> Figure | Note:
    """TFLOP/s against batch of square layers (M = K: 1760, 2048, 2560, 4096 in DeepBench), one colour
    per width and one line style per frame (the fastest layout of each shape)."""
    def square(f: pd.DataFrame) -> pd.DataFrame:
        if not {"M", "N", "K", "dtype", "tflops"} <= set(f.columns):
            return f.iloc[:0]
        return f[(f["M"] == f["K"]) & (f["dtype"] == dtype)]

    parts, labels = named_frames(frames, sources, keep=square)
    if not parts:
        return no_data(None, f"no {dtype} GEMMs with M = K in {', '.join(map(str, frames or {})) or 'no frames'}")
    ax = single_axes(ax, height=4.5)
    widths = sorted({int(m) for f in parts.values() for m in f["M"]})
    for j, (name, f) in enumerate(parts.items()):
        best = f.groupby(["M", "N"])["tflops"].max().reset_index()
        for m, g in best.groupby("M"):
            ax.plot(g["N"], g["tflops"], marker="o^sv"[j % 4], ls=("-", ":", "--", "-.")[j % 4], ms=4,
                    color=f"C{widths.index(int(m))}", label=f"{m}×{m}, {name}")
    _throughput_axes(ax, "batch (N)", ncol=2)
    heading(ax, f"Square layers (inputs = outputs) against batch, {dtype}", caption(labels))
    return ax.figure


_CLASSES = ((256, "÷256", "C3"), (64, "÷64", "C2"), (8, "÷8", "C0"), (1, "not ÷8", "C1"))


@book_figure
def plot_fc_features(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """TFLOP/s against each swept dimension (``fc_features``), markers by the largest of 256, 64, 8 that
    divides it; the model dashed. A frame of predictions only (``time_s`` empty) draws the model alone."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    frame = repriced(frame)  # a recording's model line is today's model
    sweeps = list(dict.fromkeys(frame["sweep"]))
    fig, axes = new_figure(len(sweeps), 1, height=2.3 * len(sweeps) + 1)
    measured = frame["time_s"].notna().any()
    names = {"in": "input features (K)", "out": "output features (M)", "batch": "batch (N)"}
    for ax, s in zip(axes[:, 0], sweeps):
        g = frame[frame["sweep"] == s].sort_values("swept")
        y = g["tflops"] if measured else _tflop_s(g, g["predicted_s"])
        ax.plot(g["swept"], y, "-", color="gray", lw=0.6)
        cls = g["divisible_by"].map(lambda d: next(low for low, _, _ in _CLASSES if d >= low))
        for low, name, color in reversed(_CLASSES):  # the rarer multiples on top
            sel = cls == low
            ax.plot(g.loc[sel, "swept"], y[sel], "o", ms=3.5 if low < 64 else 6, color=color, label=name,
                    zorder=3)
        if measured and g["predicted_s"].notna().any():
            ax.plot(g["swept"], _tflop_s(g, g["predicted_s"]), "--", color="black", lw=1, label="model")
        for v in range(int(g["swept"].min()) // 64 * 64 + 64, int(g["swept"].max()) + 1, 64):
            ax.axvline(v, color="gray", lw=1.2 if v % 256 == 0 else 0.5, alpha=0.4)
        fixed = [f"{c} {int(g[c].iloc[0])}" for c in ("batch", "in_features", "out_features")
                 if g[c].nunique() == 1]
        ax.set_xlabel(f"{names.get(s, s)}; fixed: {', '.join(fixed)}")
        ax.set_ylabel("TFLOP/s" + ("" if measured else " (model)"))
        ax.grid(True, axis="y", alpha=0.25)
        ax.legend(fontsize=MIN_FONT_PT, ncol=5)
    heading(fig, f"Feature counts around multiples of 8, 64 and 256, {frame['dtype'].iloc[0]}", label)
    return fig


def _variant(row: pd.Series) -> str:
    m = int(row["multiple"])
    if row["impl"] == "linear":
        return f"nn.Linear {int(row['out_features'])}" + (f" (×{m})" if m > 1 else "")
    return f"padded_linear ×{m}, {row['impl'].split(', ')[-1]}"


@book_figure
def plot_vocab_padding(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Duration of the output projection per vocabulary and implementation (``vocab_padding``), forward
    and forward+backward; each bar says its speedup over the unpadded nn.Linear, black ticks the model.
    A frame of predictions only (:func:`perfkit.book.fully_connected.experiments.predicted_vocab`) draws the model's bars."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    frame = repriced(frame)  # a recording's model line is today's model
    measured = frame["time_s"].notna().any()
    phases = list(dict.fromkeys(frame["phase"]))
    fig, axes = new_figure(1, len(phases), height=3.8)
    for ax, phase in zip(axes[0], phases):
        g = frame[frame["phase"] == phase].reset_index(drop=True)
        t = g["time_s"] if measured else g["predicted_s"]
        base = t[(g["impl"] == "linear") & (g["multiple"] == 1)]
        y = np.arange(len(g))[::-1]
        colors = ["gray" if i == "linear" and m == 1 else "C0" if i == "linear" else "C2" if "kept" in i else "C1"
                  for i, m in zip(g["impl"], g["multiple"])]
        ax.barh(y, t, color=colors, alpha=1.0 if measured else 0.6)
        if measured:
            ax.plot(g["predicted_s"], y, "|", color="black", ms=14, mew=2)
        right = 1.4 * np.nanmax([t.max(), g["predicted_s"].max()])
        for yi, ti in zip(y, t):
            if len(base):
                ratio = base.iloc[0] / ti
                ax.annotate(f"{ratio:.{3 if abs(ratio - 1) < 0.05 else 2}f}×", (right, yi), ha="right",
                            va="center", fontsize=MIN_FONT_PT)
        ax.set_yticks(y, [_variant(r) for _, r in g.iterrows()], fontsize=MIN_FONT_PT)
        time_axis(ax, phase + ("" if measured else " (model)"), axis="x")
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.set_xlim(0, right)
        ax.grid(True, axis="x", alpha=0.25)
    r = frame.iloc[0]
    what = "black ticks: the model" if measured else "the model only"
    heading(fig, f"Vocabulary padding: {int(r['in_features'])} → {int(r['vocab'])} logits, {int(r['tokens'])} "
                 f"tokens, {r['dtype']}\nright: speedup over the unpadded nn.Linear; {what}", label)
    return fig
