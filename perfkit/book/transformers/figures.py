"""Figures of the transformer chapter: attention against sequence length, and decoding against batch.

Each takes the frame its experiment returned (``attention_backends``, ``attention_head_dims``,
``decode_steps``; live, recorded, or the model-only frames of
:func:`perfkit.book.transformers.analysis.predicted_attention` and
:func:`~perfkit.book.transformers.analysis.predicted_decode` captioned with
:func:`perfkit.provenance.modelled`) and is captioned with that frame's source. Where a frame has
measured times the model's ``predicted_s`` is drawn beside them, dotted; where it has none, the
model is drawn alone and the heading says "(model only)". Seconds, bytes, tokens/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter

from ...display import Note
from ...provenance import Source
from ..figures import MIN_FONT_PT, book_figure, frame_source, heading, new_figure, no_data, shared_legend, time_axis

__all__ = ["plot_attention", "plot_attention_memory", "plot_decode", "plot_head_dims"]

_COLOURS = {"math": "C3", "flash": "C0", "efficient": "C2", "cudnn": "C4"}
_NAMES = {"math": "math (unfused)", "flash": "flash", "efficient": "memory-efficient", "cudnn": "cuDNN"}


def _measured(frame: pd.DataFrame) -> bool:
    return bool(frame["time_s"].notna().any())


def _log2_axis(ax: Axes, label: str, values: pd.Series) -> None:
    """A base-2 log x axis ticked at ``values`` (plain integers, thousands separated)."""
    ax.set_xscale("log", base=2)
    ticks = sorted(int(v) for v in pd.unique(values))
    if len(ticks) > 9:  # every other one, so that the labels do not collide
        ticks = ticks[::2]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.3)


def _rate_unit(flop_s: pd.Series) -> tuple[float, str]:
    """(scale, unit) for FLOP/s: TFLOP/s from 1 TFLOP/s on, else GFLOP/s (a CPU)."""
    top = float(np.nanmax(flop_s.to_numpy(float))) if len(flop_s) else 0.0
    return (1e12, "TFLOP/s") if top >= 1e12 else (1e9, "GFLOP/s")


def _shape(frame: pd.DataFrame) -> str:
    first = frame.iloc[0]
    return f"batch {int(first['batch'])}, {int(first['heads'])} heads, {first['dtype']}"


@book_figure
def plot_attention(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """``attention_backends``: duration (log-log) and TFLOP/s (FLOPs a causal mask needs ÷ time)
    against the sequence length, one colour per SDPA backend, no mask solid and causal dashed; the
    model dotted where it applies (a GPU's frame)."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    measured = _measured(frame)
    fig, axes = new_figure(1, 2, height=4.3)
    ax_t, ax_r = axes[0]
    scale, unit = _rate_unit(frame["flops"] / (frame["time_s"] if measured else frame["predicted_s"]))
    for (backend, causal), g in frame.groupby(["backend", "causal"], sort=False):
        g = g.sort_values("seq")
        t = g["time_s"] if measured else g["predicted_s"]
        style = dict(color=_COLOURS.get(backend, "gray"), ms=4, marker="o" if not causal else "s",
                     ls="-" if not causal else "--", mfc=None if not causal else "white")
        name = f"{_NAMES.get(backend, backend)}{', causal' if causal else ''}"
        ax_t.plot(g["seq"], t, label=name, **style)
        ax_r.plot(g["seq"], g["flops"] / t / scale, label=name, **style)
        if measured and g["predicted_s"].notna().any():
            ax_t.plot(g["seq"], g["predicted_s"], ":", color=style["color"], lw=1.2)
    if measured and frame["predicted_s"].notna().any():
        ax_t.plot([], [], ":", color="black", lw=1.2, label="model (pk.predict_attention_time)")
    time_axis(ax_t, "forward duration" + ("" if measured else " (model)"), log=True)
    ax_r.set_ylabel(f"{unit} (the mask's FLOPs)")
    for ax in (ax_t, ax_r):
        _log2_axis(ax, "sequence length (queries = keys)", frame["seq"])
    shared_legend(fig, (ax_t, ax_r), ncol=3)
    d = int(frame["head_dim"].iloc[0])
    heading(fig, f"Attention forward against sequence length: {_shape(frame)}, head dim {d}"
            + ("" if measured else " (model only)"), label)
    return fig


@book_figure
def plot_head_dims(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """``attention_head_dims``: TFLOP/s against the head dimension, one colour per SDPA backend."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    measured = _measured(frame)
    fig, axes = new_figure(height=3.5)
    ax = axes[0, 0]
    scale, unit = _rate_unit(frame["flops"] / (frame["time_s"] if measured else frame["predicted_s"]))
    for backend, g in frame.groupby("backend", sort=False):
        g = g.sort_values("head_dim")
        t = g["time_s"] if measured else g["predicted_s"]
        ax.plot(g["head_dim"], g["flops"] / t / scale, "o-", ms=5, color=_COLOURS.get(backend, "gray"),
                label=_NAMES.get(backend, backend))
    dims = sorted(frame["head_dim"].unique())
    ax.set_xticks(dims, [str(int(d)) for d in dims])
    ax.set_xlabel("head dimension d")
    ax.set_ylabel(unit + ("" if measured else " (model)"))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=MIN_FONT_PT, frameon=False)
    s = int(frame["seq"].iloc[0])
    heading(fig, f"Attention forward against head dimension: {_shape(frame)}, sequence {s:,}"
            + ("" if measured else " (model only)"), label)
    return fig


@book_figure
def plot_attention_memory(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Bytes against sequence length: what the math path writes for its scores and probabilities
    (``2·b·h·s²·itemsize``, counted) and what a fused kernel reads and writes (Q, K, V, O:
    :func:`perfkit.attention_bytes`), with the memory each backend allocated (``peak_bytes``) where
    a GPU measured it."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    fig, axes = new_figure(height=4.2)
    ax = axes[0, 0]
    model = frame.drop_duplicates("seq").sort_values("seq")
    size = (model["bytes_unfused"] - model["bytes_fused"]) / 2  # each copy of the s×s matrix (S, then P)
    ax.plot(model["seq"], 2 * size, "-", color=_COLOURS["math"], lw=1.5, label="scores + probabilities (counted)")
    ax.plot(model["seq"], model["bytes_fused"], "-", color=_COLOURS["flash"], lw=1.5, label="Q, K, V, O (counted)")
    if "peak_bytes" in frame and frame["peak_bytes"].notna().any():
        for backend, g in frame[frame["peak_bytes"].notna() & ~frame["causal"].astype(bool)].groupby("backend"):
            g = g.sort_values("seq")
            ax.plot(g["seq"], g["peak_bytes"], "o", ms=5, color=_COLOURS.get(backend, "gray"),
                    label=f"{_NAMES.get(backend, backend)}: allocated (measured)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_ylabel("bytes")
    _log2_axis(ax, "sequence length (queries = keys)", frame["seq"])
    ax.legend(fontsize=MIN_FONT_PT, frameon=False)
    heading(fig, f"Memory of attention against sequence length: {_shape(frame)}", label)
    return fig


@book_figure
def plot_decode(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                bandwidth: float | None = None, bandwidth_source: str = "") -> Figure | Note:
    """``decode_steps``: tokens/s (log-log) and GB/s (bytes a step moves ÷ its time) against the
    batch, one colour per K/V head count; the model (:func:`perfkit.predict_decode_time`) dotted;
    ``bandwidth`` (bytes/s; named by ``bandwidth_source``) dashed gray on the right."""
    if (note := no_data(frame, source)) is not None:
        return note
    if bandwidth is not None and not (isinstance(bandwidth, (int, float)) and np.isfinite(bandwidth)
                                      and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive number of bytes/s or None, got {bandwidth!r}")
    label = frame_source(frame, source)
    measured = _measured(frame)
    fig, axes = new_figure(1, 2, height=4.1)
    ax_t, ax_g = axes[0]
    heads = int(frame["heads"].iloc[0])
    for i, (kv, g) in enumerate(frame.groupby("kv_heads", sort=False)):
        g = g.sort_values("batch")
        t = g["time_s"] if measured else g["predicted_s"]
        name = f"{int(kv)} K/V heads" + (" (no GQA)" if kv == heads else " (GQA)" if kv > 1 else " (MQA)")
        ax_t.plot(g["batch"], g["batch"] / t, "o-", ms=4, color=f"C{i}", label=name)
        ax_g.plot(g["batch"], g["bytes"] / t / 1e9, "o-", ms=4, color=f"C{i}", label=name)
        if measured and g["predicted_s"].notna().any():
            ax_t.plot(g["batch"], g["batch"] / g["predicted_s"], ":", color=f"C{i}", lw=1.2)
            ax_g.plot(g["batch"], g["bytes"] / g["predicted_s"] / 1e9, ":", color=f"C{i}", lw=1.2)
    if measured and frame["predicted_s"].notna().any():
        ax_t.plot([], [], ":", color="black", lw=1.2, label="model (pk.predict_decode_time)")
    if bandwidth is not None:
        ax_g.axhline(bandwidth / 1e9, ls="--", color="gray", lw=1,
                     label=f"{bandwidth / 1e9:,.0f} GB/s" + (f" ({bandwidth_source})" if bandwidth_source else ""))
    ax_t.set_yscale("log")
    ax_t.set_ylabel("tokens/s" + ("" if measured else " (model)"))
    ax_g.set_ylabel("GB/s (step bytes ÷ time)")
    ax_g.set_ylim(bottom=0)
    ax_t.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax_t.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
    ax_t.yaxis.set_minor_formatter(NullFormatter())
    for ax in (ax_t, ax_g):
        _log2_axis(ax, "batch (sequences decoded together)", frame["batch"])
    shared_legend(fig, (ax_t, ax_g), ncol=3)
    first = frame.iloc[0]
    heading(fig, f"One decoding step: {int(first['layers'])} layers of width {int(first['hidden'])}, context "
            f"{int(first['context']):,}, {first['dtype']}" + ("" if measured else " (model only)"), label)
    return fig
