"""Figure of the timing appendix: the same kernels timed by perfkit and by other timers."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..measurement import Measurement
from ..provenance import Source, live
from ..units import format_time
from ..display import Note
from ._common import book_figure, frame_source, heading, no_data, single_axes, time_axis

__all__ = ["plot_samples", "plot_timers"]

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
