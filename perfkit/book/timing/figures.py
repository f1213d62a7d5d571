"""Figures of the timing appendix: the same kernels timed by perfkit and by other timers,
published small-kernel timings (:func:`plot_small_kernels`), and a calibration (:func:`plot_calibration`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ...calibration.profile import DeviceProfile
from ...devices import device_spec
from ...display import Note
from ...measurement import Measurement
from ...provenance import Source, live
from ...units import format_time
from ..figures import (MIN_FONT_PT, book_figure, frame_source, heading, new_figure, no_data, published_label,
                       single_axes, time_axis)

__all__ = ["plot_calibration", "plot_samples", "plot_small_kernels", "plot_timers"]

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
    ax.set_xticks(x + 0.4 - width / 2, frame["case"], fontsize=MIN_FONT_PT, rotation=15, ha="right")
    time_axis(ax, "median time per call", log=True)
    values = frame[[col for col, _ in tools]].to_numpy(dtype=float)
    shown = values[np.isfinite(values) & (values > 0)]
    if shown.size:  # start the log axis below the shortest bar, so none vanishes; leave the top for the legend
        low, high = shown.min() / 2.5, shown.max()
        ax.set_ylim(low, high * (high / low) ** 0.3)
    heading(ax, "The same kernels under each timer", label)
    ax.legend(fontsize=MIN_FONT_PT, loc="upper left", ncol=len(tools))
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
    ax.legend(fontsize=MIN_FONT_PT)
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
                  textcoords="offset points", fontsize=MIN_FONT_PT, color="gray")
    time_axis(ax_t, "time per call" + (" (model)" if model_only else ""), log=True)
    ax_g.set_ylabel("GB/s")
    ax_g.set_ylim(bottom=0)
    for ax in (ax_t, ax_g):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
        ax.set_xlabel("bytes moved per call (read + write)")
        ax.grid(True, which="both", alpha=0.25)
    ax_t.legend(fontsize=MIN_FONT_PT, loc="upper left")
    heading(fig, f"Small kernels on the {spec.name}: the launch floor, the L2 and HBM" +
            (" (model only)" if model_only else ""), label)
    return fig


_STAGES = {"candidate": ("o", "proposed by the model"), "refine": ("s", "refined around the best"),
           "wide": ("x", "wide grid")}


@book_figure
def plot_calibration(profile: DeviceProfile, source: Source | str, *, dtype: str | None = None) -> Figure:
    """A calibration in two panels: the matmul search for ``dtype`` (default: the validation set's),
    each GEMM's measured throughput in the order it was timed with the best so far; and the validation
    set, each op's predicted ÷ measured time before and after calibration (1 = exact)."""
    if not isinstance(profile, DeviceProfile):
        raise TypeError(f"profile must be a DeviceProfile (pk.calibrate().profile), got {type(profile).__name__}")
    rows = pd.DataFrame(profile.validation["rows"])
    dtype = dtype or (rows["dtype"].iloc[0] if len(rows) else next(iter(profile.matmul)))
    if dtype not in profile.matmul:
        raise LookupError(f"dtype {dtype!r} was not calibrated; calibrated: {', '.join(profile.matmul)}")
    fig, axes = new_figure(1, 2, height=4.4)
    ax = axes[0, 0]
    trials = pd.DataFrame(profile.search)
    trials = trials[trials["dtype"] == dtype].reset_index(drop=True)
    unit = "OP/s" if dtype == "int8" else "FLOP/s"
    for stage, (marker, name) in _STAGES.items():
        part = trials[trials["stage"] == stage]
        if len(part):
            ax.scatter(part.index + 1, part["flop_s"], marker=marker, label=name, zorder=3)
    for method, part in trials.groupby("method", sort=False):
        ax.step(part.index + 1, part["flop_s"].cummax(), where="post", color="0.4", lw=1,
                ls="-" if method == "guided" else ":")
    peak = profile.device["peaks"].get(dtype)
    if peak:
        ax.axhline(peak, color="C3", ls="--", lw=1, label="datasheet peak" if profile.device["kind"] == "gpu"
                   else "quick estimate")
    ax.yaxis.set_major_formatter(EngFormatter(unit=unit))
    ax.set_xlabel("GEMM timed, in order")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"The {dtype} matmul search", fontsize=10)
    ax.legend(fontsize=MIN_FONT_PT, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # one column: the
    ax.grid(True, alpha=0.25)  # two legends side by side keep within their own panel's width
    ax = axes[0, 1]
    if len(rows):
        x = rows["measured_s"].to_numpy(dtype=float)
        gemm = (rows["kind"] == "gemm").to_numpy()
        for when, style in (("before", dict(facecolors="none", edgecolors="0.5")), ("after", dict(color="C0"))):
            ratio = rows[f"{when}_s"].to_numpy(dtype=float) / x
            ax.scatter(x[gemm], ratio[gemm], marker="o", label=f"GEMMs, {when}", **style)
            ax.scatter(x[~gemm], ratio[~gemm], marker="^", label=f"memory-bound, {when}", **style)
        ax.axhline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        time_axis(ax, "measured time", axis="x", log=True)
        ax.set_ylabel("predicted ÷ measured")
        ax.yaxis.set_major_locator(LogLocator(base=2))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=MIN_FONT_PT, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2), columnspacing=1.0,
                  handletextpad=0.3)
    ax.set_title("The models on this device", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    heading(fig, "Calibration: what this device achieves, and how well the model predicts it", source)
    return fig
