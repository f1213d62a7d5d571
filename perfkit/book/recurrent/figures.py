"""Figures of the recurrent-layer chapter: combining over time, hidden and minibatch sweeps, cuDNN
against a loop of GEMMs, published RNN layers beside ours, and the persistent kernel.

Each experiment figure takes the frame its experiment returned (live, or recorded) and is captioned
with that frame's source; figures of several frames take a ``name → frame`` mapping and caption
each. Durations are seconds, throughput TFLOP/s.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogFormatter

from ...devices import device_spec
from ...display import Note, show
from ...provenance import Source, caption, modelled
from ...published_data.notes import published_absent
from ...shapes import RNN_GATES
from ..figures import (MIN_FONT_PT, book_figure, category_ticks, frame_source, heading, named_frames, new_figure,
                       no_data, shared_legend, time_axis)

__all__ = ["plot_combine_time", "plot_layer_minibatch", "plot_persistent", "plot_rnn_batch", "plot_rnn_hidden",
           "plot_rnn_layers", "plot_rnn_then_now"]

_IMPL_STYLE = {"cudnn": ("C0", "o"), "torch cpu": ("C0", "o"), "gemm loop": ("C1", "s"),
               "gemm loop (CUDA graph)": ("C2", "^"), "persistent": ("C3", "D")}


def _log2(ax: Axes, label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.grid(True, which="both", alpha=0.25)


@book_figure
def plot_combine_time(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Input GEMMs of T steps: TFLOP/s of the combined GEMM, and its speedup over T per-step GEMMs,
    against the columns it multiplies (batch·T); Baidu's threshold batch·T = 1024 dotted."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    fig, axes = new_figure(1, 2, height=3.6)
    for i, ((cell, h), g) in enumerate(frame.groupby(["cell", "hidden"], sort=False)):
        t = g.pivot_table(index=["batch", "timesteps"], columns="method", values=["time_s", "tflops"]).reset_index()
        columns = t["batch"] * t["timesteps"]
        axes[0, 0].plot(columns, t[("tflops", "combined")], "o", ms=4, color=f"C{i}", label=f"{cell}, H={h}")
        axes[0, 0].plot(columns, t[("tflops", "per step")], "o", ms=4, mfc="white", color=f"C{i}")
        axes[0, 1].plot(columns, t[("time_s", "per step")] / t[("time_s", "combined")], "o", ms=4, color=f"C{i}")
    for ax in axes[0]:
        _log2(ax, "columns of the input GEMM, batch·T")
        ax.axvline(1024, color="gray", lw=0.8, ls=":")
    axes[0, 0].set_ylabel("TFLOP/s (filled: one GEMM; open: T GEMMs)")
    axes[0, 0].set_yscale("log")
    axes[0, 0].legend(fontsize=MIN_FONT_PT)
    axes[0, 1].set_yscale("log")
    axes[0, 1].axhline(1, color="gray", lw=0.8)
    axes[0, 1].set_ylabel("speedup: T GEMMs ÷ one GEMM")
    heading(fig, f"Combine over time: the input GEMMs of a sequence ({frame['dtype'].iloc[0]})", label)
    return fig


def _multiple_class(m: int) -> str:
    return "multiple of 256" if m >= 256 else "of 64 or 128" if m >= 64 else "of 32" if m >= 32 else \
        "of 8 or 16" if m >= 8 else "not a multiple of 8"


@book_figure
def plot_rnn_hidden(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """TFLOP/s of the recurrent GEMM against H, one panel per cell, one line per batch; each point
    coloured by the largest power of two dividing H; the model dashed."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    cells = list(dict.fromkeys(frame["cell"]))
    fig, axes = new_figure(1, len(cells), height=3.6)
    classes = ["multiple of 256", "of 64 or 128", "of 32", "of 8 or 16", "not a multiple of 8"]
    colours = dict(zip(classes, ("C2", "C0", "C1", "C4", "C3")))
    for ax, cell in zip(axes[0], cells):
        for j, (b, g) in enumerate(frame[frame["cell"] == cell].groupby("batch")):
            g = g.sort_values("hidden")
            ax.plot(g["hidden"], g["tflops"], "-", color="gray", lw=0.8, alpha=0.6)
            pred = g["predicted_s"].notna()
            if pred.any():
                flops = 2.0 * g["M"] * g["N"] * g["K"]
                ax.plot(g["hidden"][pred], (flops / g["predicted_s"] / 1e12)[pred], "--", color="black", lw=0.8)
            kinds = g["multiple"].map(_multiple_class)
            for k in classes:
                sel = kinds == k
                ax.plot(g["hidden"][sel], g["tflops"][sel], "os"[j % 2], ms=4, color=colours[k],
                        label=k if j == 0 and ax is axes[0, 0] else None)
            ax.annotate(f"batch {b}", (g["hidden"].iloc[-1], g["tflops"].iloc[-1]), fontsize=MIN_FONT_PT, ha="left",
                        va="center", xytext=(5, 0), textcoords="offset points")
        ax.set_title(f"{cell} (M = {RNN_GATES[cell]}·H)", fontsize=9)
        ax.margins(x=0.16)  # room for the "batch b" labels right of each line
        ax.set_xlabel("hidden size H")
        ax.grid(True, alpha=0.25)
    axes[0, 0].set_ylabel("TFLOP/s (dashed: model)")
    axes[0, 0].legend(fontsize=MIN_FONT_PT, title="H is a …", title_fontsize=MIN_FONT_PT)
    heading(fig, f"Hidden size: the recurrent GEMM (gates·H, batch, H), {frame['dtype'].iloc[0]}", label)
    return fig


@book_figure
def plot_rnn_batch(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                   published: Mapping[str, pd.DataFrame | None] | None = None) -> Figure | Note:
    """Duration and TFLOP/s of the recurrent GEMM against the minibatch, NN solid and TN dashed, one
    column of panels per H; ``published`` GEMMs (e.g. ``published_counterparts("gemm_small_n")``)
    are drawn where their M = K equals a vanilla cell's H."""
    if (note := no_data(frame, source)) is not None:
        return note
    hs = sorted(frame["hidden"].unique())
    vanilla = set(frame.loc[frame["cell"] == "rnn", "hidden"])
    then, then_labels = named_frames(published, param="published", keep=lambda p: p[
        (p["M"] == p["K"]) & p["M"].isin(vanilla) & (p["layout"] == "NN")])
    labels = {"ours": frame_source(frame, source), **then_labels}
    fig, axes = new_figure(2, len(hs), height=6)
    for col, h in enumerate(hs):
        part = frame[frame["hidden"] == h]
        for i, ((cell, lay), g) in enumerate(part.groupby(["cell", "layout"], sort=False)):
            g = g.sort_values("batch")
            style = dict(color=f"C{list(RNN_GATES).index(cell)}", ls="-" if lay == "NN" else "--", lw=1.2)
            axes[0, col].plot(g["batch"], g["time_s"], marker="o", ms=2, label=f"{cell} {lay}", **style)
            axes[1, col].plot(g["batch"], g["tflops"], marker="o", ms=2, **style)
        for j, (name, p) in enumerate(then.items()):
            p = p[p["M"] == h].sort_values("N")
            if len(p):
                style = dict(marker="^v"[j % 2], ls=":", ms=5, color=f"C{j + 4}", label=f"{name} (published)")
                axes[0, col].plot(p["N"], p["time_s"], **style)
                axes[1, col].plot(p["N"], p["tflops"], **style)
        axes[0, col].set_title(f"H = {h}", fontsize=9)
        time_axis(axes[0, col], log=True)
        axes[1, col].set_ylabel("TFLOP/s")
        for ax in axes[:, col]:
            _log2(ax, "minibatch (N of the GEMM)")
            for b in (8, 128):
                ax.axvline(b, color="gray", lw=0.5, ls=":")
    shared_legend(fig, axes.flat, frameon=True)
    heading(fig, f"Minibatch: the recurrent GEMM (gates·H, batch, H), {frame['dtype'].iloc[0]}", caption(labels))
    return fig


def _plain_log_labels(ax: Axes) -> None:
    """Label a log y axis with plain numbers (2, 3, 10), not 2×10⁰."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def _shape_label(r) -> str:
    return f"{r.cell} {r.hidden}·{r.batch}·{r.timesteps}"


@book_figure
def plot_rnn_layers(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Per layer shape (cell H·batch·T): duration per time step of each implementation (top), and each
    implementation's time ÷ the library's (bottom); black bars: the GEMM-only model."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    keys = ["cell", "hidden", "batch", "timesteps"]
    shapes = frame[keys].drop_duplicates().reset_index(drop=True)
    x = {tuple(r): i for i, r in enumerate(shapes.itertuples(index=False))}
    lib = "cudnn" if "cudnn" in set(frame["impl"]) else "torch cpu"
    base = frame[frame["impl"] == lib].set_index(keys)["time_s"]
    fig, axes = new_figure(2, 1, height=5)
    for impl, g in frame.groupby("impl", sort=False):
        colour, marker = _IMPL_STYLE.get(impl, ("C5", "x"))
        xs = [x[tuple(r)] for r in g[keys].itertuples(index=False)]
        axes[0, 0].plot(xs, g["step_s"], marker, ms=4, color=colour, label=impl, ls="none")
        rel = g["time_s"].to_numpy() / base.reindex(pd.MultiIndex.from_frame(g[keys])).to_numpy()
        axes[1, 0].plot(xs, rel, marker, ms=4, color=colour, ls="none")
    first = frame.drop_duplicates(keys)
    axes[0, 0].plot([x[tuple(r)] for r in first[keys].itertuples(index=False)],
                    first["predicted_s"] / first["timesteps"], "_", ms=10, color="black", label="model (GEMMs only)")
    time_axis(axes[0, 0], "duration per time step", log=True)
    axes[1, 0].axhline(1, color="gray", lw=0.8)
    axes[1, 0].set_yscale("log")
    _plain_log_labels(axes[1, 0])
    axes[1, 0].set_ylabel(f"time ÷ {lib}")
    category_ticks(axes[1, 0], [_shape_label(r) for r in shapes.itertuples()])
    axes[0, 0].set_xticks(range(len(shapes)), [""] * len(shapes))
    for ax in axes[:, 0]:
        ax.grid(True, alpha=0.25)
    axes[0, 0].legend(fontsize=MIN_FONT_PT)
    heading(fig, f"Whole layers, forward: the library against a loop of GEMMs ({frame['dtype'].iloc[0]})", label)
    return fig


def _recurrent_tflop_s(f: pd.DataFrame) -> pd.Series:
    """TFLOP/s of a layer's recurrent GEMMs alone: 2·gates·H²·batch·T / time_s."""
    gates = f["cell"].map(RNN_GATES)
    return 2.0 * gates * f["hidden"] ** 2 * f["batch"] * f["timesteps"] / f["time_s"] / 1e12


def _model_layers(or_model: Mapping[str, pd.DataFrame] | None
                 ) -> tuple[dict[str, pd.DataFrame], dict[str, Source]]:
    """``or_model`` (GPU name → the GEMM model's frame of DeepBench's layers, from
    :func:`perfkit.book.recurrent.analysis.predicted_layers`) named ``"model, <GPU>"``, and their sources."""
    if or_model is None:
        return {}, {}
    if not isinstance(or_model, Mapping) or not all(isinstance(f, pd.DataFrame) for f in or_model.values()):
        raise TypeError(f"or_model must map GPU names to the model's frames, e.g. {{'H100-SXM': "
                        f"rnn_analysis.predicted_layers(h100)}}, got {or_model!r}")
    specs = [device_spec(name) for name in or_model]
    parts = {f"model, {s.name}": frame for s, frame in zip(specs, or_model.values())}
    return parts, {name: modelled(s) for name, s in zip(parts, specs)}


def _instead_the_model(parts: Mapping[str, pd.DataFrame]) -> None:
    """Say, above a figure of the model's frames, that the published measurements are missing."""
    gpus = " and ".join(name.removeprefix("model, ") for name in parts)
    show(published_absent(instead=f"the GEMM model's prediction of the same layers on the {gpus}, in this figure"))


@book_figure
def plot_rnn_then_now(frames: Mapping[str, pd.DataFrame | None], *,
                      sources: Mapping[str, Source | str] | None = None,
                      or_model: Mapping[str, pd.DataFrame] | None = None) -> Figure | Note:
    """Forward time of each published RNN layer shape in every frame (published "then", ours "now"),
    one marker per frame, shapes in DeepBench's order; frames share the columns cell, hidden, batch,
    timesteps, time_s (ours: :func:`perfkit.book.recurrent.experiments.deepbench_comparable`). Where no frame has
    rows (no published data here, nothing measured), the GEMM model's prediction in ``or_model``
    (GPU name → the frame of :func:`perfkit.book.recurrent.analysis.predicted_layers`) is drawn instead,
    labelled as the model."""
    parts, labels = named_frames(frames, sources)
    title = "RNN layers then and now (input GEMM excluded)"
    if not parts and or_model:
        parts, labels = _model_layers(or_model)
        _instead_the_model(parts)
        title = "RNN layers as the GEMM model predicts them (input GEMM excluded)"
    if not parts:
        return no_data(None, "no RNN layer frame to draw")
    keys = ["cell", "hidden", "batch", "timesteps"]
    shapes = pd.concat([f[keys] for f in parts.values()]).drop_duplicates().reset_index(drop=True)
    shapes = shapes.sort_values(keys, key=lambda c: c.map({"rnn": 0, "lstm": 1, "gru": 2}) if c.name == "cell"
                                else c, kind="stable").reset_index(drop=True)
    x = {tuple(r): i for i, r in enumerate(shapes.itertuples(index=False))}
    fig, axes = new_figure(1, 1, height=4.5)
    ax = axes[0, 0]
    for i, (name, f) in enumerate(parts.items()):
        xs = [x[tuple(r)] for r in f[keys].itertuples(index=False)]
        ax.plot(xs, f["time_s"], "o^vsD"[i % 5], ms=4, ls="none", color=f"C{i}", label=name)
    time_axis(ax, "forward time of the layer", log=True)
    ax.set_xticks(range(len(shapes)), [_shape_label(r) for r in shapes.itertuples()], rotation=90, fontsize=MIN_FONT_PT)
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT)
    heading(ax, title, caption(labels))
    return fig


@book_figure
def plot_layer_minibatch(frames: Mapping[str, pd.DataFrame | None], *,
                         sources: Mapping[str, Source | str] | None = None,
                         or_model: Mapping[str, pd.DataFrame] | None = None) -> Figure | Note:
    """TFLOP/s of the recurrent math (2·gates·H²·batch·T / time_s) against the minibatch, one panel per
    frame, one line per (cell, H, T): doubling the minibatch should cost less than double the time.
    Where no frame has such rows, the GEMM model's prediction for the GPUs of ``or_model`` instead."""
    def several_batches(f: pd.DataFrame) -> pd.DataFrame:
        return f[f.groupby(["cell", "hidden", "timesteps"])["batch"].transform("nunique") > 1]

    parts, labels = named_frames(frames, sources, keep=several_batches)
    title = "Minibatch against throughput of whole RNN layers"
    if not parts and or_model:
        model, labels = _model_layers(or_model)
        parts = {name: several_batches(f) for name, f in model.items()}
        _instead_the_model(parts)
        title += ", as the GEMM model predicts it"
    if not parts:
        return no_data(None, "no frame measures a layer at more than one minibatch")
    fig, axes = new_figure(1, len(parts), height=4)
    for ax, (name, f) in zip(axes[0], parts.items()):
        f = f.assign(tflops=_recurrent_tflop_s(f))
        for i, ((cell, h, t), g) in enumerate(f.groupby(["cell", "hidden", "timesteps"], sort=False)):
            g = g.groupby("batch")["tflops"].max()
            ax.plot(g.index, g.to_numpy(), "o-", ms=3, color=f"C{i % 10}", label=f"{cell} {h}, T={t}")
        _log2(ax, "minibatch")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_title(name, fontsize=MIN_FONT_PT)
    axes[0, 0].set_ylabel("TFLOP/s of the recurrent GEMMs")
    axes[0, -1].legend(fontsize=MIN_FONT_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    heading(fig, title, caption(labels))
    return fig


@book_figure
def plot_persistent(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """TFLOP/s of the recurrence against the minibatch, one panel per H, one line per implementation;
    shapes the persistent kernel refused are marked × on the axis."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    hs = sorted(frame["hidden"].unique())
    fig, axes = new_figure(1, len(hs), height=3.6)
    for ax, h in zip(axes[0], hs):
        part = frame[frame["hidden"] == h]
        for impl, g in part.groupby("impl", sort=False):
            g = g.sort_values("batch")
            colour, marker = _IMPL_STYLE.get(impl, ("C5", "x"))
            ax.plot(g["batch"], g["tflops"], marker + "-", ms=3, color=colour, label=impl)
            refused = g[g["tflops"].isna()]
            if len(refused):
                ax.plot(refused["batch"], np.full(len(refused), 0.03), "x", color=colour, ms=7, clip_on=False,
                        transform=ax.get_xaxis_transform())
        _log2(ax, "minibatch")
        ax.set_yscale("log")
        ax.set_title(f"H = {h}", fontsize=9)
    axes[0, 0].set_ylabel("TFLOP/s, 2·H²·batch·T / time")
    axes[0, 0].plot([], [], "x", color="0.3", ms=7, label="refused (× at the bottom)")
    shared_legend(fig, axes[0])  # below the panels: five narrow panels have no room for it
    heading(fig, f"Persistent RNN: weights kept on chip, T = {int(frame['timesteps'].iloc[0])}", label)
    return fig
