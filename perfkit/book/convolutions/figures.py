"""Figures of the convolution chapter: passes, channels, the first layer, layouts and autotuning,
layer parameters, and DeepBench's convolutions then and now.

Each experiment figure takes the frame its experiment returned (live, or recorded) and is captioned
with that frame's source; ``source`` is needed only for a hand-built frame without metadata (e.g. the
model-only frame of :func:`perfkit.book.convolutions.experiments.predicted_channels`, captioned with
:func:`perfkit.provenance.modelled`) or to say why the frame is None. Black ticks or dashed lines are
the GEMM model's time of each row's implicit GEMM(s). Durations are seconds, throughput TFLOP/s.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from ...devices import device_spec
from ...display import Note, show
from ...provenance import Source, caption, modelled
from ...published_data.notes import published_absent
from ..figures import (MIN_FONT_PT, book_figure, category_ticks, frame_source, heading, named_frames, new_figure,
                       no_data, say, shared_legend, single_axes, time_axis)

__all__ = ["plot_conv_channels", "plot_conv_layout", "plot_conv_params", "plot_conv_passes", "plot_conv_then_now",
           "plot_first_layer"]

_PHASE_COLOURS = {"forward": "C0", "dgrad": "C1", "wgrad": "C2"}


def _model_tflop_s(g: pd.DataFrame) -> pd.Series:
    """TFLOP/s the model predicts for each row: the useful FLOPs of its ``tflops`` at ``predicted_s``."""
    return 2.0 * g["N"] * g["K"] * g["C"] * g["R"] * g["S"] * g["P"] * g["Q"] / g["predicted_s"] / 1e12


@book_figure
def plot_conv_passes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                     ax: Axes | None = None) -> Figure | Note:
    """Duration of each pass (forward, dgrad, wgrad) of each layer (``conv_passes``) as bars; black ticks:
    the GEMM model of the pass's implicit GEMM."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    ax = single_axes(ax, height=3.3)
    layers = list(dict.fromkeys(frame["layer"]))
    width = 0.8 / 3
    for j, phase in enumerate(p for p in _PHASE_COLOURS if p in set(frame["phase"])):
        g = frame[frame["phase"] == phase].set_index("layer").reindex(layers)
        x = np.arange(len(layers)) + (j - 1) * width
        ax.bar(x, g["time_s"], width, color=_PHASE_COLOURS[phase], label=phase)
        if g["predicted_s"].notna().any():
            ax.plot(x, g["predicted_s"], "_", color="black", ms=12, mew=2, label="model" if j == 0 else None)
    time_axis(ax, log=True)
    ax.set_xticks(range(len(layers)), layers, fontsize=MIN_FONT_PT)
    ax.grid(True, axis="y", which="both", alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    r = frame.iloc[0]
    heading(ax, f"Three passes of ResNet-50 convolutions, batch {int(r['N'])}, {r['dtype']}", label)
    return ax.figure


def _clusters(values) -> list[list[int]]:
    """Sorted channel counts split where consecutive values are more than 16 apart."""
    out: list[list[int]] = []
    for v in sorted(set(int(c) for c in values)):
        if out and v - out[-1][-1] <= 16:
            out[-1].append(v)
        else:
            out.append([v])
    return out


@book_figure
def plot_conv_channels(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """TFLOP/s against C = K (``conv_channels``), one row of panels per dtype and one column per range of C;
    filled markers: aligned C, red: multiples of 64, open: unaligned; the model dashed. A frame of
    predictions only (``time_s`` empty) draws the model alone."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    measured = frame["time_s"].notna().any()
    dtypes, ranges = list(dict.fromkeys(frame["dtype"])), _clusters(frame["C"])
    fig, axes = new_figure(len(dtypes), len(ranges), height=2.0 * len(dtypes) + 0.7)
    for i, dtype in enumerate(dtypes):
        for j, cs in enumerate(ranges):
            ax = axes[i, j]
            g = frame[(frame["dtype"] == dtype) & frame["C"].isin(cs)].sort_values("C")
            y = g["tflops"] if measured else _model_tflop_s(g)
            ax.plot(g["C"], y, "-", color="gray", lw=0.6)
            aligned, tile = g["aligned"].astype(bool), g["C"] % 64 == 0
            ax.plot(g["C"][aligned & ~tile], y[aligned & ~tile], "o", color="C0", ms=5, label="aligned")
            ax.plot(g["C"][tile], y[tile], "o", color="C3", ms=7, label="÷64")
            ax.plot(g["C"][~aligned], y[~aligned], "o", mfc="white", color="C1", ms=4, label="not aligned")
            if measured and g["predicted_s"].notna().any():
                ax.plot(g["C"], _model_tflop_s(g), "--", color="black", lw=1, label="model")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.25)
            ax.set_xlabel("C = K (channels)" if i == len(dtypes) - 1 else "")
        axes[i, 0].set_ylabel(f"{dtype}\nTFLOP/s" + ("" if measured else " (model)"))
    shared_legend(fig, axes.flat)
    r = frame.iloc[0]
    heading(fig, f"Channels: a 3×3 convolution on {int(r['H'])}² images, batch {int(r['N'])}, C = K swept", label)
    return fig


def _first_label(r) -> str:
    if int(r["channels"]) == 3:
        return f"{r['stem']}, C = 3"
    return f"{r['stem']}, C = {int(r['channels'])}, padded {r['input_padding']}"


@book_figure
def plot_first_layer(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Duration of a first layer (``conv_first_layer``) per stem, channel count and input padding, forward and
    forward+backward; each bar says its speedup over C = 3 of the same stem; black ticks: the model."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    phases = list(dict.fromkeys(frame["phase"]))
    fig, axes = new_figure(1, len(phases), height=3.6)
    for ax, phase in zip(axes[0], phases):
        g = frame[frame["phase"] == phase].reset_index(drop=True)
        base = g[g["channels"] == 3].set_index("stem")["time_s"]
        y = np.arange(len(g))[::-1]
        colours = ["gray" if c == 3 else "C2" if how == "once" else "C1"
                   for c, how in zip(g["channels"], g["input_padding"])]
        ax.barh(y, g["time_s"], color=colours)
        if g["predicted_s"].notna().any():
            ax.plot(g["predicted_s"], y, "|", color="black", ms=12, mew=2)
        right = 1.3 * np.nanmax([g["time_s"].max(), g["predicted_s"].max()])
        for yi, (_, r) in zip(y, g.iterrows()):
            ax.annotate(f"{base[r['stem']] / r['time_s']:.2f}×", (right, yi), ha="right", va="center", fontsize=MIN_FONT_PT)
        ax.set_yticks(y, [_first_label(r) for _, r in g.iterrows()], fontsize=MIN_FONT_PT)
        time_axis(ax, phase, axis="x")
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.set_xlim(0, right)
        ax.grid(True, axis="x", alpha=0.25)
    r = frame.iloc[0]
    heading(fig, f"First layer: 3 channels padded to 4 or 8, {int(r['H'])}² images, batch {int(r['N'])}, "
                 f"{r['dtype']}; right: speedup over C = 3; green: padded once, orange: every step", label)
    return fig


@book_figure
def plot_conv_layout(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Per layer (``conv_layout``): the steady duration (left) and the first call (right, log) of the forward
    pass in NCHW and NHWC with cudnn.benchmark off and on, and of converting the input NCHW → NHWC."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    layers = list(dict.fromkeys(frame["layer"]))
    variants = list(dict.fromkeys(zip(frame["op"], frame["layout"], frame["cudnn_benchmark"])))
    fig, axes = new_figure(1, 2, height=3.6)
    width = 0.8 / len(variants)
    colours = {("NCHW", False): "#9ecae1", ("NCHW", True): "C0", ("NHWC", False): "#a1d99b", ("NHWC", True): "C2"}
    for k, (op, layout, flag) in enumerate(variants):
        g = frame[(frame["op"] == op) & (frame["layout"] == layout) & (frame["cudnn_benchmark"] == flag)]
        g = g.set_index("layer").reindex(layers)
        x = np.arange(len(layers)) + (k - (len(variants) - 1) / 2) * width
        name = f"{layout},\nbenchmark {'on' if flag else 'off'}" if op == "forward" else "NCHW → NHWC\n(the input)"
        for ax, col in zip(axes[0], ("time_s", "first_call_s")):
            ax.bar(x, g[col], width, color=colours.get((layout, bool(flag)), "C1"), label=name)
    for ax, what in zip(axes[0], ("steady state", "first call")):
        time_axis(ax, "", log=True)  # the panel's title names it: a y label takes width the layer names need
        ax.set_title(what, fontsize=MIN_FONT_PT + 1)
        ax.set_xticks(range(len(layers)), [n.replace(", ", "\n").replace(" ", "\n", 1) for n in layers], fontsize=MIN_FONT_PT)
        ax.grid(True, axis="y", which="both", alpha=0.25)
    # beside the right panel, an Axes legend that constrained layout makes room for (narrow: two lines an
    # entry, so the panels keep the width their layer names need): a figure legend hangs from fig.bbox, which
    # a tight savefig swaps for the tight box, onto the caption under it
    axes[0, 1].legend(*axes[0, 0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1),
                      fontsize=MIN_FONT_PT, frameon=False)
    r = frame.iloc[0]
    heading(fig, f"Layouts and autotuning: forward convolutions, batch {int(r['N'])}, {r['dtype']}", label)
    return fig


_PARAM_NAMES = {"batch": "batch N", "filter": "filter size R = S", "stride": "stride", "dilation": "dilation"}


@book_figure
def plot_conv_params(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Duration (top) and TFLOP/s (bottom) as one parameter changes at a time (``conv_params``), one column
    per parameter; the model of each forward implicit GEMM dashed."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    sweeps = list(dict.fromkeys(frame["sweep"]))
    measured = frame["time_s"].notna().any()
    fig, axes = new_figure(2, len(sweeps), height=4.3)
    for j, name in enumerate(sweeps):
        g = frame[frame["sweep"] == name].sort_values("swept")
        if measured:
            axes[0, j].plot(g["swept"], g["time_s"], "o-", color="C0", ms=4, label="measured")
            axes[1, j].plot(g["swept"], g["tflops"], "o-", color="C0", ms=4)
        if g["predicted_s"].notna().any():
            axes[0, j].plot(g["swept"], g["predicted_s"], "--", color="black", lw=1, label="model")
            axes[1, j].plot(g["swept"], _model_tflop_s(g), "--", color="black", lw=1)
        time_axis(axes[0, j], log=True)
        axes[1, j].set_ylim(bottom=0)
        axes[1, j].set_xlabel(_PARAM_NAMES.get(name, name))
        for ax in axes[:, j]:
            if name == "batch":
                ax.set_xscale("log", base=2)
                ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(g["swept"].unique(), [str(v) for v in g["swept"].unique()])
            ax.tick_params(axis="x", labelsize=MIN_FONT_PT)
            ax.grid(True, alpha=0.25)
    axes[1, 0].set_ylabel("TFLOP/s")
    shared_legend(fig, axes[0])
    r = frame.iloc[0]
    heading(fig, f"Batch, filter size, stride and dilation, one at a time from a 3×3 {int(r['C'])}→{int(r['K'])} "
                 f"layer, {r['dtype']}", label)
    return fig


_DB_KEYS = ["W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w"]
_DB_PASSES = {"time_s": "forward", "bwd_inputs_time_s": "dgrad", "bwd_params_time_s": "wgrad"}  # short: 3 panels


def _db_label(r) -> str:
    return f"{r.W}×{r.H}×{r.C} N{r.N} K{r.K} {r.R}×{r.S}/{r.stride_h}"


def _model_convs(or_model: Mapping[str, pd.DataFrame]) -> tuple[dict, dict]:
    """``or_model`` (GPU name → the GEMM model's frame of DeepBench's convolutions, from
    :func:`perfkit.book.convolutions.analysis.predicted_deepbench`) named ``"model, <GPU>"``, and their sources."""
    if not isinstance(or_model, Mapping) or not all(isinstance(f, pd.DataFrame) for f in or_model.values()):
        raise TypeError(f"or_model must map GPU names to the model's frames, e.g. {{'H100-SXM': "
                        f"conv_analysis.predicted_deepbench(h100)}}, got {or_model!r}")
    specs = [device_spec(name) for name in or_model]
    parts = {f"model, {s.name}": frame for s, frame in zip(specs, or_model.values())}
    gpus = " and ".join(s.name for s in specs)
    show(published_absent(instead=f"the GEMM model's prediction of the same layers on the {gpus}, in this figure"))
    return parts, {name: modelled(s) for name, s in zip(parts, specs)}


@book_figure
def plot_conv_then_now(frames: Mapping[str, pd.DataFrame | None], *, only: str | None = None,
                       sources: Mapping[str, Source | str] | None = None,
                       or_model: Mapping[str, pd.DataFrame] | None = None) -> Figure | Note:
    """Forward, backward-data and backward-filter time of DeepBench's convolution shapes in every frame
    (published "then", ours "now": ``conv_deepbench``), one marker per frame, shapes in DeepBench's order
    (published frames first).

    ``only`` names the frame whose shapes are drawn (e.g. ``"ours"``: the shapes we measured); without it,
    or when that frame is None, every shape of every frame. Where no frame has rows (no published data
    here, nothing measured), the GEMM model's prediction in ``or_model`` (GPU name → the frame of
    :func:`perfkit.book.convolutions.analysis.predicted_deepbench`) is drawn instead, labelled as the model.
    """
    if only is not None and only not in (frames or {}):
        raise ValueError(f"only must name one of the frames ({list(frames or {})}), got {only!r}")
    parts, labels = named_frames(frames, sources)
    title = "DeepBench's training convolutions then and now"
    if not parts and or_model:
        parts, labels = _model_convs(or_model)
        title, only = "DeepBench's training convolutions as the GEMM model predicts them", None
    if not parts:
        return no_data(None, "no convolution frame to draw")
    base = parts.get(only) if only is not None else None
    ordered = sorted(parts.values(), key=lambda f: "row" not in f)  # DeepBench's frames carry its row numbers
    keys = (base if base is not None else pd.concat([f[_DB_KEYS] for f in ordered]))[_DB_KEYS]
    shapes = keys.drop_duplicates().reset_index(drop=True)
    x = {tuple(r): i for i, r in enumerate(shapes.itertuples(index=False))}
    fig, axes = new_figure(3, 1, height=5.2)
    for i, (name, f) in enumerate(parts.items()):
        f = f[[tuple(r) in x for r in f[_DB_KEYS].itertuples(index=False)]]
        xs = [x[tuple(r)] for r in f[_DB_KEYS].itertuples(index=False)]
        for ax, col in zip(axes[:, 0], _DB_PASSES):
            if col in f:
                ax.plot(xs, f[col], "o^vsD"[i % 5], ms=4, ls="none", color=f"C{i}", label=name)
    for ax, (col, what) in zip(axes[:, 0], _DB_PASSES.items()):
        time_axis(ax, what, log=True)
        ax.grid(True, alpha=0.25)
        ax.set_xticks(range(len(shapes)), [""] * len(shapes))
    category_ticks(axes[2, 0], [_db_label(r) for r in shapes.itertuples()])
    axes[0, 0].legend(fontsize=MIN_FONT_PT, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    if base is None and only is not None:
        say(f"{only} has no data, so the shapes of every frame are drawn", title="Every shape drawn")
    dtypes = sorted({str(d) for f in parts.values() for d in f["dtype"].unique()}) if all(
        "dtype" in f for f in parts.values()) else []
    heading(fig, f"{title} ({', '.join(dtypes)})", caption(labels))
    return fig
