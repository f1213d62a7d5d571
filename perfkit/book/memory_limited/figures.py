"""Figures of the memory-limited layers chapter: duration and GB/s against bytes moved.

Each takes the frame its experiment returned (``activation_sizes``, ``batchnorm_sizes``,
``pool_sizes``; live, recorded, or the model-only frame of
:func:`perfkit.book.memory_limited.experiments.predicted_activations` captioned with
:func:`perfkit.provenance.modelled`) and is captioned with that frame's source. ``fits`` (from
:func:`perfkit.book.memory_limited.experiments.bandwidth_fit`) adds each series' two asymptotes: its floor and
time = bytes / bandwidth. ``ceiling`` (bytes/s) draws the copy ceiling, which needs its own
``ceiling_source`` (a recorded ``ceiling_copy``, the datasheet, this CPU's measured copy).
Durations in seconds, bytes in bytes (SI-prefixed ticks), bandwidth in GB/s (1e9 bytes/s).

Published measurements (:mod:`perfkit.book.memory_limited.published`): :func:`plot_published_time_vs_bytes`
draws Liger-Kernel's forward rows against the bytes the byte model says each provider moves, and
:func:`plot_bandwidth_vs_occupancy` gpu-benches' bandwidth against occupancy on four generations of
GPU. Given the model-only frames those functions return without the published table (marked by
``attrs["model_of"]``), they draw the model's prediction, labelled as such.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from ...devices import device_spec
from ...display import Note
from ...memory_model import memory_time
from ...provenance import Source, caption
from ..figures import (book_figure, frame_source, heading, new_figure, no_data, published_label, shared_legend,
                       time_axis)

__all__ = ["plot_activation_sizes", "plot_bandwidth_vs_occupancy", "plot_batchnorm_sizes", "plot_pool_sizes",
           "plot_published_time_vs_bytes"]

_PASS_STYLE = {"forward": dict(marker="o", ls="-"), "backward": dict(marker="s", ls="--", mfc="white")}


def _sources(label: Source | str, ceiling: float | None, ceiling_source: Source | str | None) -> str:
    """The caption: where the timings come from, and where the ceiling does (required with one)."""
    if ceiling is None:
        return str(label)
    if not isinstance(ceiling, (int, float)) or isinstance(ceiling, bool) or not ceiling > 0:
        raise TypeError(f"ceiling must be a positive number of bytes/s, got {ceiling!r}")
    if ceiling_source is None:
        raise ValueError("ceiling needs ceiling_source= (a perfkit.Source or a string) saying where it comes "
                         "from, e.g. the source of a ceiling_copy frame or 'datasheet × 0.9'")
    return caption({"timings": label, "copy ceiling": ceiling_source})


def _bytes_axis(ax: Axes, label: str) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_xlabel(label)
    ax.grid(True, which="both", alpha=0.25)


def _gbps_axis(ax: Axes, ceiling: float | None) -> None:
    if ceiling is not None:
        ax.axhline(ceiling / 1e9, color="gray", ls="--", lw=1.2, label=f"copy ceiling, {ceiling / 1e9:,.0f} GB/s")
    ax.set_ylabel("GB/s (bytes ÷ duration)")
    ax.set_ylim(bottom=0)


def _asymptotes(ax: Axes, fit: pd.Series, x: np.ndarray, color: str) -> None:
    """The floor up to the knee and time = bytes / bandwidth from there: thin lines in ``color``."""
    if not np.isfinite(fit.get("bandwidth", np.nan)):
        return
    knee, lo, hi = fit["knee_bytes"], x.min(), x.max()
    ax.plot([lo, max(lo, min(knee, hi))], [fit["floor_s"]] * 2, color=color, lw=0.8, alpha=0.5)
    grid = np.geomspace(max(lo, min(knee, hi)), hi, 20)
    ax.plot(grid, grid / fit["bandwidth"], color=color, lw=0.8, alpha=0.5)


def _fit_row(fits: pd.DataFrame | None, keys: dict) -> pd.Series | None:
    if fits is None or not len(fits):
        return None
    if not isinstance(fits, pd.DataFrame):
        raise TypeError(f"fits must be a DataFrame from bandwidth_fit or None, got {type(fits).__name__}")
    sel = np.ones(len(fits), bool)
    for k, v in keys.items():
        if k in fits.columns:
            sel &= (fits[k] == v).to_numpy()
    return fits[sel].iloc[0] if sel.sum() == 1 else None


def _time_vs_bytes(frame: pd.DataFrame, keys: list[str], colours: dict, title: str, *,
                   fits: pd.DataFrame | None, ceiling: float | None, caption_text: str) -> Figure:
    """Two panels side by side against bytes: duration (log-log) and GB/s; one series per ``keys``
    group, coloured by ``colours[group without pass]`` and styled by pass; the model's predicted_s
    dotted black."""
    measured = frame["time_s"].notna().any()
    fig, axes = new_figure(1, 2, height=3.6)
    ax_t, ax_g = axes[0]
    for group, g in frame.groupby(keys, sort=False):
        group = group if isinstance(group, tuple) else (group,)
        named = dict(zip(keys, group))
        g = g.sort_values("bytes")
        t = g["time_s"] if measured else g["predicted_s"]
        color = colours[tuple(v for k, v in named.items() if k != "pass")]
        name = ", ".join(str(v) for v in group)
        style = dict(_PASS_STYLE.get(named.get("pass"), _PASS_STYLE["forward"]), ms=4, color=color)
        ax_t.plot(g["bytes"], t, label=name, **style)
        ax_g.plot(g["bytes"], g["bytes"] / t / 1e9, label=name, **style)
        fit = _fit_row(fits, named)
        if fit is not None:
            _asymptotes(ax_t, fit, g["bytes"].to_numpy(float), color)
    model = frame[frame["predicted_s"].notna()].drop_duplicates("bytes").sort_values("bytes")
    if measured and len(model):
        for ax, y in ((ax_t, model["predicted_s"]), (ax_g, model["bytes"] / model["predicted_s"] / 1e9)):
            ax.plot(model["bytes"], y, ":", color="black", lw=1.5, label="model: latency + bytes ÷ bandwidth")
    time_axis(ax_t, "duration" + ("" if measured else " (model)"), log=True)
    _gbps_axis(ax_g, ceiling)
    for ax in (ax_t, ax_g):
        _bytes_axis(ax, "bytes moved per pass (pk.layer_bytes)")
    shared_legend(fig, (ax_t, ax_g), ncol=4)
    heading(fig, title + ("" if measured else " (model only)"), caption_text)
    return fig


@book_figure
def plot_activation_sizes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                          fits: pd.DataFrame | None = None, ceiling: float | None = None,
                          ceiling_source: Source | str | None = None) -> Figure | Note:
    """``activation_sizes``: duration and GB/s against bytes, one colour per op, forward solid and
    backward dashed; thin lines: the ``fits`` asymptotes; dotted: the model; dashed gray: ``ceiling``."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    if frame["time_s"].isna().all():  # the model: every op of the same bytes takes the same time
        frame = frame.drop_duplicates(["pass", "bytes"]).assign(op="every op")
    colours = {(op,): f"C{i}" for i, op in enumerate(dict.fromkeys(frame["op"]))}
    return _time_vs_bytes(frame, ["op", "pass"], colours,
                          f"Activations: duration against bytes, {frame['dtype'].iloc[0]}", fits=fits,
                          ceiling=ceiling, caption_text=_sources(label, ceiling, ceiling_source))


@book_figure
def plot_pool_sizes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                    fits: pd.DataFrame | None = None, ceiling: float | None = None,
                    ceiling_source: Source | str | None = None) -> Figure | Note:
    """``pool_sizes``: duration and GB/s against bytes (int64 indices of max pooling included), one
    colour per kind and window, forward solid and backward dashed; the model dotted."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    pairs = list(dict.fromkeys(zip(frame["kind"], frame["window"])))
    colours = {p: f"C{i}" for i, p in enumerate(pairs)}
    return _time_vs_bytes(frame, ["kind", "window", "pass"], colours,
                          f"Pooling: duration against bytes, {frame['dtype'].iloc[0]}", fits=fits,
                          ceiling=ceiling, caption_text=_sources(label, ceiling, ceiling_source))


def _passes(frame: pd.DataFrame) -> Iterable[str]:
    return [p for p in ("forward", "backward") if p in set(frame["pass"])]


@book_figure
def plot_batchnorm_sizes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                         ceiling: float | None = None, ceiling_source: Source | str | None = None) -> Figure | Note:
    """``batchnorm_sizes``: one panel per pass, GB/s against input elements, NCHW and NHWC in their
    colours: the bandwidth if the kernel moved the persistent model's bytes (filled) or the two-pass
    model's (open, dotted), the persistent model's own (dashed black) where the GPU model applies, and
    the copy ``ceiling`` (dashed gray). A two-pass reading above the ceiling is impossible, so that
    kernel moved fewer bytes; both layouts move the same bytes, so their GB/s ratio is their speedup."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    passes = list(_passes(frame))
    fig, axes = new_figure(1, len(passes), height=3.6)
    for j, p in enumerate(passes):
        ax = axes[0, j]
        part = frame[frame["pass"] == p]
        for i, (lay, g) in enumerate(part.groupby("layout", sort=False)):
            g = g.sort_values("elements")
            color, impl = f"C{i}", str(g["impl"].iloc[0]).removesuffix("Backward0")
            for col, style, what in (("bytes_persistent", "o-", "persistent"), ("bytes_two_pass", "s:", "two-pass")):
                ax.plot(g["elements"], g[col] / g["time_s"] / 1e9, style, ms=4, color=color,
                        mfc=None if what == "persistent" else "white", label=f"{lay} ({impl}), {what} bytes")
        model = part.drop_duplicates("elements").sort_values("elements")
        if model["predicted_s"].notna().any():
            ax.plot(model["elements"], model["bytes_persistent"] / model["predicted_s"] / 1e9, "--", color="black",
                    lw=1.2, label="model, persistent")
        _gbps_axis(ax, ceiling)
        ax.set_title(p, fontsize=9)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(EngFormatter())
        ax.set_xlabel(f"input elements (N·{int(part['C'].iloc[0])}·H·W)")
        ax.grid(True, which="both", alpha=0.25)
    shared_legend(fig, axes.ravel(), ncol=2)
    heading(fig, f"Batch norm in training mode, {frame['dtype'].iloc[0]}: the GB/s each byte count implies",
            _sources(label, ceiling, ceiling_source))
    return fig


# ------------------------------------------------------------------------------ published measurements
_KERNEL_NAMES = {"layer_norm": "layer norm", "rms_norm": "RMS norm", "fused_add_rms_norm": "add + RMS norm",
                 "megatron_rms_norm": "RMS norm (Megatron shape)", "megatron_swiglu": "SwiGLU",
                 "relu_squared": "ReLU²"}


@book_figure
def plot_published_time_vs_bytes(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Liger's forward rows (:func:`perfkit.book.memory_limited.published.liger_forward`), one column
    per GPU, fastest memory first: top, duration against the bytes the byte model says each provider
    moves (fused kernels filled, eager open; ``twin`` rows left out); bottom, those bytes ÷ duration in GB/s against the datasheet bandwidth
    (dashed) and the model's achievable one (dotted). A model-only frame draws ``predicted_s``."""
    if (note := no_data(frame, source)) is not None:
        return note
    label, model_only = published_label(frame, source)
    frame = frame[frame["bytes"].notna() & ~frame.get("twin", False)]
    t_col = "predicted_s" if model_only else "time_s"
    devices = sorted(dict.fromkeys(frame["device"]), key=lambda d: -(device_spec(d).mem_bandwidth or 0))
    fig, axes = new_figure(2, len(devices), height=7.5)
    colours = {k: f"C{i}" for i, k in enumerate(dict.fromkeys(frame["kernel"]))}
    for j, dev in enumerate(devices):
        ax_t, ax_g = axes[0, j], axes[1, j]
        part = frame[frame["device"] == dev]
        for (kernel, provider), g in part.groupby(["kernel", "provider"], sort=False):
            g = g.sort_values("bytes")
            fused = g["role"].iloc[0] == "fused"
            style = dict(marker="o" if fused else "s", ms=4, lw=1, ls="-" if fused else "--",
                         color=colours[kernel], mfc=None if fused else "white")
            name = f"{_KERNEL_NAMES.get(kernel, kernel)}, {'fused' if fused else 'eager'}"
            ax_t.plot(g["bytes"], g[t_col], label=name, **style)
            ax_g.plot(g["bytes"], g["bytes"] / g[t_col] / 1e9, label=name, **style)
        spec = device_spec(dev)
        grid = np.geomspace(part["bytes"].min(), part["bytes"].max(), 30)
        model = np.array([memory_time(b, spec) for b in grid])
        ax_t.plot(grid, model, ":", color="black", lw=1.5, label="model: one kernel, latency + bytes ÷ bandwidth")
        ax_g.plot(grid, grid / model / 1e9, ":", color="black", lw=1.5)
        ax_g.axhline(spec.mem_bandwidth / 1e9, color="gray", ls="--", lw=1.2,
                     label="datasheet bandwidth")
        time_axis(ax_t, "forward duration" + (" (model)" if model_only else ""), log=True)
        ax_t.set_title(dev, fontsize=9)
        ax_g.set_ylabel("GB/s (model bytes ÷ duration)")
        ax_g.set_ylim(0, 1.1 * spec.mem_bandwidth / 1e9)
        for ax in (ax_t, ax_g):
            _bytes_axis(ax, "bytes moved (byte model)")
    shared_legend(fig, axes.ravel(), ncol=3)
    title = "Memory-bound kernels: duration against bytes, fused and eager"
    heading(fig, title + (" (model only)" if model_only else ""), label)
    return fig


@book_figure
def plot_bandwidth_vs_occupancy(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """gpu-benches' bandwidth against occupancy
    (:func:`perfkit.book.memory_limited.published.stream_occupancy`), one line per GPU, oldest first:
    left, GB/s (the band spans all of its kernels); right, the fraction of each datasheet bandwidth.
    A model-only frame draws the model's achievable bandwidth (flat: it knows no occupancy)."""
    if (note := no_data(frame, source)) is not None:
        return note
    label, model_only = published_label(frame, source)
    fig, axes = new_figure(1, 2, height=4.2)
    ax_g, ax_f = axes[0]
    for i, (dev, g) in enumerate(frame.groupby("device", sort=False)):
        color, name = f"C{i}", f"{dev} (datasheet {g['datasheet_gbps'].iloc[0]:,.0f} GB/s)"
        if model_only:
            ax_g.plot(g["occupancy_pct"], g["predicted_gbps"], ":", color=color, label=f"{name}, model")
            ax_f.plot(g["occupancy_pct"], g["predicted_gbps"] / g["datasheet_gbps"], ":", color=color)
            continue
        ax_g.fill_between(g["occupancy_pct"], g["gbps_low"], g["gbps_high"], color=color, alpha=0.15, lw=0)
        ax_g.plot(g["occupancy_pct"], g["gbps"], "o-", ms=3, color=color, label=name)
        ax_f.plot(g["occupancy_pct"], g["fraction"], "o-", ms=3, color=color)
    ax_g.set_ylabel("GB/s")
    ax_f.set_ylabel("fraction of the datasheet bandwidth")
    ax_f.set_ylim(0, 1.05)
    ax_f.axhline(1, color="gray", lw=0.8)
    for ax in (ax_g, ax_f):
        ax.set_xlabel("occupancy (% of the threads an SM can hold)")
        ax.set_xlim(0, 100)
        ax.grid(True, alpha=0.25)
    ax_g.set_ylim(bottom=0)
    shared_legend(fig, [ax_g], ncol=2)
    kernel = frame.attrs.get("kernel", "")
    what = f"{kernel} kernel (float64), 1 GiB arrays" if kernel else "the byte model"
    heading(fig, f"Bandwidth against occupancy, four generations: {what}" + (" (model only)" if model_only else ""),
            label)
    return fig
