"""Figures of the communication chapter: a collective against its message size, and a data-parallel step
against the batch per GPU.

:func:`plot_sizes` draws any number of collective frames side by side (``collective_sizes`` live or
recorded, the published tables put into its columns by
:func:`~perfkit.book.communication.analysis.xla_frame` and
:func:`~perfkit.book.communication.analysis.deepbench_frame`, the model's
:func:`~perfkit.book.communication.analysis.predicted_collectives`), each series named in the legend
and captioned with its own source: measured series as markers, the model's as dashed lines with a
cross where its latency equals its transfer time. :func:`plot_data_parallel` draws
:func:`~perfkit.book.communication.analysis.data_parallel_sweep`. Bytes, seconds, 1e9 bytes/s.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter, PercentFormatter

from ...collectives import bus_bandwidth
from ...display import Note
from ...provenance import Source, caption
from ..figures import (MIN_FONT_PT, book_figure, frame_source, heading, named_frames, new_figure, nothing_drawn,
                       shared_legend)
from ..figures import time_axis

__all__ = ["binary_size", "plot_data_parallel", "plot_sizes"]


def binary_size(nbytes: float) -> str:
    """``nbytes`` as nccl-tests prints sizes: ``"1 KiB"``, ``"25 MiB"``, ``"2 GiB"``, three significant
    digits; a round decimal size, a multiple of 1000 but not of 1024 (DeepBench's 400,000), in decimal
    units, ``"400 KB"``; under 1 KiB, bytes."""
    decimal = float(nbytes).is_integer() and int(nbytes) % 1000 == 0 and int(nbytes) % 1024 != 0
    units = (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)) if decimal else (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
    for unit, scale in units:
        if nbytes >= scale:
            return f"{nbytes / scale:,.3g} {unit}"
    return f"{nbytes:,.0f} B"


def _size_axis(ax: Axes, sizes: np.ndarray) -> None:
    """A base-2 log axis of message sizes, ticked every 32× between the smallest and largest."""
    ax.set_xscale("log", base=2)
    lo, hi = int(np.floor(np.log2(sizes.min()))), int(np.ceil(np.log2(sizes.max())))
    ticks = [2.0**k for k in range(lo, hi + 1) if k % 5 == 0] or [2.0**lo, 2.0**hi]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: binary_size(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("message size (nccl-tests' count)")
    ax.grid(True, which="major", alpha=0.3)


def _measured(frame: pd.DataFrame) -> bool:
    return bool(frame["time_s"].notna().any())


@book_figure
def plot_sizes(series: Mapping[str, pd.DataFrame | None], sources: Mapping[str, Source | str] | None = None, *,
               op: str = "all-reduce", title: str = "") -> Figure | Note:
    """Time (log-log) and bus bandwidth (nccl-tests' busbw) of ``op`` against the message size, one
    colour per named frame of ``series`` (and per rank count where a frame has several). A frame with
    measured times is drawn as markers; a model frame (``time_s`` empty) as a dashed line of its
    ``predicted_s``, crossed where its latency term equals its transfer term. ``sources`` names the
    source of the frames that carry no metadata (the model's: :func:`~.analysis.model_source`)."""
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {type(title).__name__}")
    parts, labels = named_frames(series, sources, param="series",
                                 keep=lambda f: f[(f["op"] == op) & (f["time_s"].notna() | f["predicted_s"].notna())])
    if not parts:
        names = ", ".join(series) if series else "an empty mapping"
        return nothing_drawn(f"no {op} rows to draw: {names} are missing here (a published table that is not "
                             "installed, an experiment with no run or recording) or hold none")
    fig, axes = new_figure(1, 2, height=4.2)
    ax_t, ax_b = axes[0]
    sizes = []
    for i, (name, frame) in enumerate(parts.items()):
        measured = _measured(frame)
        ranks = sorted(frame["n_ranks"].unique())
        for j, n in enumerate(ranks):
            g = frame[frame["n_ranks"] == n].groupby("size_bytes", as_index=False).median(numeric_only=True)
            g = g.sort_values("size_bytes")
            t = g["time_s"] if measured else g["predicted_s"]
            label = name if len(ranks) == 1 else f"{name}, {int(n)} ranks"
            colour = f"C{(i + j * len(parts)) % 10}"
            busbw = [bus_bandwidth(op, s, int(n), x) / 1e9 for s, x in zip(g["size_bytes"], t)]
            style = dict(color=colour, label=label, ms=4, **(dict(marker="o", ls="-", lw=1) if measured
                                                           else dict(ls="--", lw=1.6)))
            ax_t.plot(g["size_bytes"], t, **style)
            ax_b.plot(g["size_bytes"], busbw, **style)
            if not measured and {"latency_s", "transfer_s"} <= set(g):
                k = int(np.argmin(np.abs(np.log(g["latency_s"] / g["transfer_s"]))))
                ax_t.plot(g["size_bytes"].iloc[k], t.iloc[k], "x", color=colour, ms=9, mew=2)
                ax_b.plot(g["size_bytes"].iloc[k], busbw[k], "x", color=colour, ms=9, mew=2)
            sizes.extend(g["size_bytes"].tolist())
    if any(not _measured(f) and "latency_s" in f for f in parts.values()):
        ax_b.plot([], [], "x", color="black", ms=9, mew=2, label="model: latency = transfer (crossover)")
    time_axis(ax_t, "time per call", log=True)
    ax_b.set_yscale("log")
    ax_b.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.4g}"))
    ax_b.set_ylabel("bus bandwidth, GB/s")
    for ax in (ax_t, ax_b):
        _size_axis(ax, np.asarray(sizes, float))
    shared_legend(fig, (ax_t, ax_b), ncol=2)
    absent = [name for name, frame in series.items() if frame is None]  # said, not silently dropped
    missing = f"; not here (no run, recording or table): {', '.join(absent)}" if absent else ""
    heading(fig, title or f"{op.capitalize()} against message size", caption(labels) + missing)
    return fig


@book_figure
def plot_data_parallel(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """:func:`~.analysis.data_parallel_sweep`: the step's time (compute alone dotted) and the share of
    it the all-reduce leaves exposed, against the batch per GPU, one colour per setup; the legend sits
    in the time panel, so that every text stays inside the figure."""
    if frame is None or not len(frame):
        return nothing_drawn("no data-parallel rows to draw")
    label = frame_source(frame, source)
    fig, axes = new_figure(1, 2, height=3.8)
    ax_t, ax_s = axes[0]
    for i, (setup, g) in enumerate(frame.groupby("setup", sort=False)):
        g = g.sort_values("batch")
        ax_t.plot(g["batch"], g["step_s"], "o-", ms=4, color=f"C{i}", label=setup)
        ax_s.plot(g["batch"], g["comm_share"], "o-", ms=4, color=f"C{i}", label=setup)
    compute = frame.drop_duplicates("batch").sort_values("batch")
    ax_t.plot(compute["batch"], compute["forward_s"] + compute["backward_s"], ":", color="black", lw=1.5,
              label="forward + backward alone")
    time_axis(ax_t, "time per step", log=True)
    ax_s.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax_s.set_ylim(0, 1)
    ax_s.set_ylabel("exposed all-reduce, share of the step")
    for ax in (ax_t, ax_s):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(frame["batch"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("batch per GPU (sequences)")
        ax.grid(True, alpha=0.3)
    # inside the time panel's empty lower right (below the curves, which start at the compute's time):
    # a figure legend below the panels would meet the caption under the figure
    ax_t.legend(loc="lower right", fontsize=MIN_FONT_PT, frameon=True, framealpha=0.9, edgecolor="none")
    first = frame.iloc[0]
    heading(fig, f"Data parallel: {first['gradient_bytes'] / 1e6:,.0f} MB of gradients in {int(first['buckets'])} "
            "buckets, all-reduced behind the backward pass", label)
    return fig
