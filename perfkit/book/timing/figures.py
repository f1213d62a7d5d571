"""Figures of the timing appendix: the same kernels timed by perfkit and by other timers, and
published small-kernel timings (:func:`plot_small_kernels`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from ...devices import device_spec
from ...display import Note
from ...measurement import Measurement
from ...provenance import Source, live
from ...units import format_time
from ..figures import book_figure, frame_source, heading, new_figure, no_data, published_label, single_axes, time_axis

__all__ = ["plot_samples", "plot_small_kernels", "plot_timers"]

_VARIANT_NAMES = {"launch": "plain launch", "graph": "CUDA graph", "persistent_atomic": "persistent (atomics)",
                  "persistent_gsync": "persistent (grid sync)", "model": "model: latency + bytes ÷ bandwidth"}

#: Columns of the ``timer_validation`` experiment, and the timer each holds.
TIMERS = (("perfkit_time_s", "perfkit.bench"), ("perfkit_graph_time_s", "perfkit.bench, CUDA graph"),
          ("triton_do_bench_s", "triton do_bench"), ("torch_timer_s", "torch Timer"))


@book_figure
def plot_timers(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                ax: Axes | None = None) -> Figure | Note:
    """Each case's median time per call (s) under each timer; a timer with no values (on a CPU) is left out.

    The log axis starts well below the shortest bar, so every bar shows, however close the times are.
    """
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    tools = [(col, name) for col, name in TIMERS if frame[col].notna().any()]
    ax = single_axes(ax, height=4)
    width = 0.8 / len(tools)
    x = np.arange(len(frame))
    for j, (col, name) in enumerate(tools):
        ax.bar(x + j * width, frame[col], width, label=name)
    ax.set_xticks(x + 0.4 - width / 2, frame["case"], fontsize=8, rotation=15, ha="right")
    time_axis(ax, "median time per call", log=True)
    values = frame[[col for col, _ in tools]].to_numpy(dtype=float)
    shown = values[np.isfinite(values) & (values > 0)]
    if shown.size:  # start the log axis below the shortest bar, so none vanishes; leave the top for the legend
        low, high = shown.min() / 2.5, shown.max()
        ax.set_ylim(low, high * (high / low) ** 0.3)
    heading(ax, "The same kernels under each timer", label)
    ax.legend(fontsize=8, loc="upper left", ncol=len(tools))
    ax.grid(True, axis="y", which="both", alpha=0.25)
    return ax.figure


@book_figure
def plot_samples(m: Measurement, source: Source | str | None = None, *, ax: Axes | None = None,
                 bins: int = 30) -> Figure:
    """A histogram of one :class:`~perfkit.measurement.Measurement`'s samples (s), median and mean marked.

    The caption is ``source``, by default a live measurement on the Measurement's device.
    """
    if not isinstance(m, Measurement):
        raise TypeError(f"m must be a perfkit Measurement (from perfkit.bench), got {type(m).__name__}")
    ax = single_axes(ax, height=3)
    ax.hist(m.samples, bins=bins, color="C0")
    ax.axvline(m.median, color="black", label=f"median {format_time(m.median)}")
    ax.axvline(m.mean, color="C3", ls="--", label=f"mean {format_time(m.mean)}")
    time_axis(ax, "one call", axis="x")
    ax.set_ylabel("samples")
    heading(ax, f"{m.label}: spread of the samples", source if source is not None else live(m.device or None))
    ax.legend(fontsize=8)
    return ax.figure


@book_figure
def plot_small_kernels(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Small streaming kernels (:func:`perfkit.book.timing.published.small_kernel_sweep`), one
    line per variant: left, time per call against bytes moved, each variant's floor (``floor_s``, else
    its shortest time) dashed; right,
    GB/s, with the GPU's L2 size and datasheet bandwidth. A model-only frame
    (:func:`~perfkit.book.timing.published.predicted_small_kernels`) draws ``predicted_s``."""

    if (note := no_data(frame, source)) is not None:
        return note
    label, model_only = published_label(frame, source)
    spec = device_spec(str(frame["device"].iloc[0]))
    fig, axes = new_figure(1, 2, height=4.3)
    ax_t, ax_g = axes[0]
    col = "predicted_s" if model_only else "time_s"
    for i, (variant, g) in enumerate(frame.groupby("variant", sort=False)):
        color = "black" if variant == "model" else f"C{i}"
        style = ":" if variant == "model" else "-"
        floor = g["floor_s"].iloc[0] if "floor_s" in g.columns else g[col].min()
        name = f"{_VARIANT_NAMES.get(variant, variant)}: floor {format_time(floor)}"
        ax_t.plot(g["bytes"], g[col], style, color=color, lw=1.3, label=name)
        ax_g.plot(g["bytes"], g["bytes"] / g[col] / 1e9, style, color=color, lw=1.3)
        ax_t.axhline(floor, color=color, ls="--", lw=0.7, alpha=0.7)
    if spec.l2_bytes:
        for ax in (ax_t, ax_g):
            ax.axvline(spec.l2_bytes, color="gray", ls="-.", lw=1, label="L2 size" if ax is ax_t else None)
    ax_g.axhline(spec.mem_bandwidth / 1e9, color="gray", ls="--", lw=1.2)
    ax_g.annotate("datasheet bandwidth", (frame["bytes"].min(), spec.mem_bandwidth / 1e9), xytext=(2, 3),
                  textcoords="offset points", fontsize=7, color="gray")
    time_axis(ax_t, "time per call" + (" (model)" if model_only else ""), log=True)
    ax_g.set_ylabel("GB/s")
    ax_g.set_ylim(bottom=0)
    for ax in (ax_t, ax_g):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
        ax.set_xlabel("bytes moved per call (read + write)")
        ax.grid(True, which="both", alpha=0.25)
    ax_t.legend(fontsize=7, loc="upper left")
    heading(fig, f"Small kernels on the {spec.name}: the launch floor, the L2 and HBM" +
            (" (model only)" if model_only else ""), label)
    return fig
