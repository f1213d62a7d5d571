"""Figures of the GPU-background chapter: rooflines, waves, and the tiles of a GEMM in waves."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter

from ..._validate import positive_int
from ...devices import DeviceSpec
from ...display import Note
from ...dtypes import canonical_dtype
from ...provenance import Source, caption, modelled
from ...quantization import cdiv, wave_quantization
from ...roofline import Operation, attainable_flop_s
from ...units import GIGA, TERA, format_time
from ..figures import MIN_FONT_PT, book_figure, frame_source, heading, new_figure, no_data, single_axes, time_axis

__all__ = ["plot_dispatch_costs", "plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves"]


def _as_specs(specs: Any) -> list[DeviceSpec]:
    items = [specs] if isinstance(specs, DeviceSpec) else list(specs) if isinstance(specs, (list, tuple)) else []
    if not items or not all(isinstance(s, DeviceSpec) for s in items):
        raise TypeError(f"specs must be a DeviceSpec or a non-empty list of them, got {specs!r}")
    return items


def _ceilings(ceilings: Any) -> list[Mapping]:
    if ceilings is None:
        return []
    items = [ceilings] if isinstance(ceilings, Mapping) else list(ceilings)
    for c in items:
        if not isinstance(c, Mapping) or not {"flop_s", "bandwidth"} <= set(c):
            raise ValueError("ceilings must be a mapping (or a list of them) with keys 'flop_s' (FLOP/s) and "
                             f"'bandwidth' (bytes/s) and optionally 'label', got {c!r}")
        if not (c["flop_s"] > 0 and c["bandwidth"] > 0):
            raise ValueError(f"ceilings 'flop_s' and 'bandwidth' must be positive, got {c!r}")
    return items


def _roof_label(label: str, flop_s: float, bandwidth: float) -> str:
    return f"{label}: {EngFormatter(unit='FLOP/s', places=1)(flop_s)}, {bandwidth / GIGA:,.0f} GB/s"


def _model_of(sms: int) -> Source:
    """The default caption of a figure of the wave model, when no spec names the GPU."""
    return Source("model", f"a GPU with {sms} SMs", detail="no measurement")


#: Font size (points) of the names and ridge labels on a roofline.
_LABEL_PT = MIN_FONT_PT
#: Vertical distance between two stacked names, and from a marker to its name (points).
_LINE_PT, _DROP_PT, _SHIFT_PT = 1.5 * _LABEL_PT, 2 * _LABEL_PT, 1.25 * _LABEL_PT
#: Width of an average character of a name, in ems (DejaVu Sans, mixed case and digits).
_CHAR_EM = 0.62
#: Room kept above the highest roof for its ridge label and the legend (points), at least.
_HEADROOM_PT = 44.0
#: Up to this many roofs, each ridge point is labelled beside it; beyond, in the legend.
_RIDGE_LABELS = 2
_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}


def _axes_points(ax: Axes) -> tuple[float, float]:
    """Width and height of ``ax`` in points, shrunk a little for the room a layout will take."""
    box = ax.get_window_extent()
    scale = 72.0 / ax.figure.dpi
    return box.width * scale * 0.9, box.height * scale * 0.8


def _place_names(points: list[tuple[str, float, float]], xlim: tuple[float, float],
                 ylim: tuple[float, float], size_pt: tuple[float, float]) -> list[tuple[float, float]]:
    """Positions (data coordinates) of the names of markers at ``points`` = ``(name, x, y)``.

    Each name starts below and to the right of its marker, under the roof; names whose boxes would
    overlap are pushed down, one text line at a time, so that none covers another (log axes).
    """
    (x0, x1), (y0, y1), (w_pt, h_pt) = np.log10(xlim), np.log10(ylim), size_pt
    per_x, per_y = (x1 - x0) / w_pt, (y1 - y0) / h_pt  # decades per point
    line, width = _LINE_PT * per_y, [_CHAR_EM * _LABEL_PT * len(n) * per_x for n, _, _ in points]
    want = [(np.log10(x) + _SHIFT_PT * per_x, np.log10(y) - _DROP_PT * per_y) for _, x, y in points]
    placed: dict[int, tuple[float, float]] = {}
    for i in sorted(range(len(points)), key=lambda i: -want[i][1]):
        x, y = want[i]
        clash = True
        while clash:
            clash = False
            for j, (xj, yj) in placed.items():
                if x < xj + width[j] and xj < x + width[i] and abs(y - yj) < line:
                    y, clash = yj - line, True
        placed[i] = (x, y)
    return [(10 ** placed[i][0], 10 ** placed[i][1]) for i in range(len(points))]


@book_figure
def plot_roofline(operations: Iterable[Operation] | None, specs: DeviceSpec | Sequence[DeviceSpec],
                  dtype: Any = "float16", *, ax: Axes | None = None, source: Source | str | None = None,
                  ceilings: Mapping | Sequence[Mapping] | None = None) -> Figure:
    """Draw each device's roofline for ``dtype`` and place ``operations`` on it.

    Log-log axes: arithmetic intensity (FLOP/byte) against attainable TFLOP/s. Each device's ridge
    point (ops:byte) is marked, and labelled beside it (with more than two roofs, in the legend,
    where the labels cannot collide); each operation sits at its intensity on every device's roof and is
    named once, under the highest roof, names stacked so that none covers another. An operation
    with no FLOPs cannot sit on a log axis: a note names it. ``ceilings`` —
    ``{"label": str, "flop_s": FLOP/s, "bandwidth": bytes/s}`` or a list of them — adds measured
    roofs, dashed. The caption is ``source``, by default each spec's
    :func:`~perfkit.provenance.modelled` label.
    """
    specs = _as_specs(specs)
    dtype = canonical_dtype(dtype)
    ops = list(operations or [])
    for op in ops:
        if not isinstance(op, Operation):
            raise TypeError(f"operations must hold Operation objects, got {op!r}")
    ceils = _ceilings(ceilings)
    ax = single_axes(ax, height=4.8)
    placed = sorted((op for op in ops if op.intensity > 0), key=lambda op: op.intensity)

    xs = [op.intensity for op in placed] + [s.ops_per_byte(dtype) for s in specs]
    xs += [c["flop_s"] / c["bandwidth"] for c in ceils]
    x = np.geomspace(min(0.1, min(xs) / 3), max(1e4, max(xs) * 3), 400)
    ys = [attainable_flop_s(x[0], s, dtype) / TERA for s in specs] + [s.peak_flop_s(dtype) / TERA for s in specs]
    ys += [min(c["flop_s"], x[0] * c["bandwidth"]) / TERA for c in ceils] + [c["flop_s"] / TERA for c in ceils]

    for i, spec in enumerate(specs):
        color, peak = f"C{i}", spec.peak_flop_s(dtype)
        ridge = spec.ops_per_byte(dtype)
        label = _roof_label(spec.label, peak, spec.mem_bandwidth)
        ax.plot(x, attainable_flop_s(x, spec, dtype) / TERA, color=color, lw=2,
                label=label if len(specs) <= _RIDGE_LABELS else f"{label}, ops:byte {ridge:.3g}")
        ax.plot([ridge], [peak / TERA], "o", color=color, ms=6)
        if len(specs) <= _RIDGE_LABELS:  # more ridges than that crowd each other: the legend says them
            ax.annotate(f"ops:byte {ridge:.3g}", (ridge, peak / TERA), xytext=(4, 5), textcoords="offset points",
                        fontsize=_LABEL_PT, color=color, ha="left", va="bottom", bbox=_BOX, zorder=4)
        for op in placed:
            ax.plot([op.intensity], [attainable_flop_s(op.intensity, spec, dtype) / TERA], "s", ms=6,
                    mfc=color, mec="black", zorder=3)

    for j, c in enumerate(ceils):
        ax.plot(x, np.minimum(c["flop_s"], x * c["bandwidth"]) / TERA, "--", color=f"C{len(specs) + j}", lw=1.5,
                label=_roof_label(c.get("label", "measured"), c["flop_s"], c["bandwidth"]))

    # Axis limits first (every marker, the roofs and room above them), then the names under the roof.
    w_pt, h_pt = _axes_points(ax)
    lo, hi = np.log10(min(ys) / 2), np.log10(max(ys))
    room = max(_HEADROOM_PT, (1.45 * (len(specs) + len(ceils)) + 1.2) * _LABEL_PT)  # the legend's rows
    hi += (hi - lo) * room / (h_pt - room)
    xlim, ylim = (x[0] / 1.3, x[-1] * 1.3), (10 ** lo, 10 ** hi)
    tops = [(op.name, op.intensity, max(attainable_flop_s(op.intensity, s, dtype) for s in specs) / TERA)
            for op in placed]
    spots = _place_names(tops, xlim, ylim, (w_pt, h_pt))
    for (name, xi, yi), (xt, yt) in zip(tops, spots):
        ax.annotate(name, (xi, yi), xytext=(xt, yt), fontsize=_LABEL_PT, ha="left", va="center", bbox=_BOX,
                    zorder=5, arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "0.35", "shrinkA": 0,
                                          "shrinkB": 4})
    if spots:  # a name pushed far down, or far right, widens the axes rather than leave them
        per_x = (np.log10(xlim[1]) - np.log10(xlim[0])) / w_pt
        right = max(np.log10(xt) + _CHAR_EM * _LABEL_PT * len(n) * per_x for (n, _, _), (xt, _) in zip(tops, spots))
        xlim = (xlim[0], max(xlim[1], 10 ** (right + 0.05)))
        ylim = (min(ylim[0], min(yt for _, yt in spots) / 2), ylim[1])
    left_out = [op.name for op in ops if op.intensity <= 0]
    if left_out:
        ax.text(0.99, 0.02, "not drawn (0 FLOP/byte has no place on a log axis): " + ", ".join(left_out),
                transform=ax.transAxes, ha="right", va="bottom", fontsize=MIN_FONT_PT, color="0.3", wrap=True)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(f"attainable {dtype} TFLOP/s")
    names = " and ".join(s.name for s in specs)
    heading(ax, f"Roofline{'s' * (len(specs) > 1)} of the {names}, {dtype}: attainable TFLOP/s against intensity",
            source if source is not None else caption([modelled(s) for s in specs]))
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    ax.legend(fontsize=_LABEL_PT, loc="upper left", framealpha=0.9)
    return ax.figure


@book_figure
def plot_tile_waves(M: int, N: int, tile: tuple[int, int], sms: int, *, blocks_per_sm: int = 1,
                    ax: Axes | None = None, source: Source | str | None = None) -> Figure:
    """Draw the tiles of an M×N GEMM output coloured by the wave they run in.

    Tiles are numbered row by row (the launch order varies by library). The useful M×N region is
    outlined: tile area outside it is tile-quantization waste. The caption is ``source`` (e.g.
    ``perfkit.provenance.modelled(spec)``), by default a model of a GPU with ``sms`` SMs.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    wq = wave_quantization(M, N, tile, sms, blocks_per_sm)
    tm, tn = wq.tile
    rows, cols = cdiv(wq.M, tm), cdiv(wq.N, tn)
    waves = np.arange(rows * cols).reshape(rows, cols) // wq.wave_size
    ax = single_axes(ax, height=5.5, width=6.5)
    cmap = ListedColormap([f"C{i % 10}" for i in range(wq.waves)])
    ax.imshow(waves, cmap=cmap, vmin=-0.5, vmax=wq.waves - 0.5, extent=(0, cols * tn, rows * tm, 0),
              interpolation="nearest", aspect="auto", alpha=0.6)
    if rows * cols <= 2500:  # tile borders, while they stay readable
        for r in range(rows + 1):
            ax.axhline(r * tm, color="white", lw=0.5)
        for c in range(cols + 1):
            ax.axvline(c * tn, color="white", lw=0.5)
    ax.add_patch(Rectangle((0, 0), wq.N, wq.M, fill=False, ec="black", lw=2))
    ax.set_xlim(0, cols * tn)
    ax.set_ylim(rows * tm, 0)
    ax.set_xlabel("N (columns)")
    ax.set_ylabel("M (rows)")
    title = (f"{wq.tiles} tiles of {tm}×{tn} in {wq.waves} wave{'s' * (wq.waves != 1)} of {wq.wave_size}: "
             f"{wq.utilization:.1%} utilization, last wave {wq.last_wave_tiles} tiles\n"
             f"colour = wave; outlined: the useful {wq.M}×{wq.N} output")
    heading(ax, title, source if source is not None else _model_of(wq.sms))
    return ax.figure


@book_figure
def plot_waves(frame: pd.DataFrame | None, source: Source | str | None = None, *,
               ax: Axes | None = None) -> Figure | Note:
    """Launch duration (s) against the number of blocks of the ``waves`` experiment, wave boundaries marked."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    wave = int(frame["wave_size"].iloc[0])
    ax = single_axes(ax, height=3.8)
    g = frame.sort_values("blocks")
    ax.plot(g["blocks"], g["time_s"], "o-", ms=4, label="measured")
    one = g.loc[g["waves"] == 1, "time_s"].median()
    ax.step(g["blocks"], g["waves"] * one, where="pre", color="black", lw=1, ls="--", label="waves × one-wave time")
    for k in range(1, int(g["waves"].max()) + 1):
        ax.axvline(k * wave, color="gray", lw=0.6, ls=":")
    ax.set_xlabel("blocks launched (dotted: multiples of the wave size)")
    time_axis(ax)
    heading(ax, f"Waves: {int(frame['sms'].iloc[0])} SMs × {int(frame['blocks_per_sm'].iloc[0])} block(s) per SM "
                f"= {wave} blocks per wave", label)
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT)
    return ax.figure


@book_figure
def plot_wave_model(sms: int, *, blocks_per_sm: int = 1, max_waves: int = 4,
                    source: Source | str | None = None) -> Figure:
    """The wave model alone: waves and SM utilization against the number of blocks launched.

    The caption is ``source`` (e.g. ``perfkit.provenance.modelled(spec)``), by default a model of a
    GPU with ``sms`` SMs.
    """
    sms, blocks_per_sm = positive_int("sms", sms), positive_int("blocks_per_sm", blocks_per_sm)
    wave = sms * blocks_per_sm
    blocks = np.arange(1, positive_int("max_waves", max_waves) * wave + 1)
    waves = cdiv(blocks, wave)
    fig, axes = new_figure(1, 2, height=3.4)
    axes[0, 0].step(blocks, waves, where="post")
    axes[0, 0].set_ylabel("waves (∝ duration of equal blocks)")
    axes[0, 1].plot(blocks, blocks / (waves * wave), color="C1")
    axes[0, 1].set_ylabel("SM utilization")
    for ax in axes[0]:
        ax.set_xlabel("blocks launched")
        ax.grid(True, alpha=0.25)
    heading(fig, f"Wave model: {sms} SMs × {blocks_per_sm} block(s) per SM",
            source if source is not None else _model_of(sms))
    return fig


#: Bar colour per way of issuing a kernel (:func:`perfkit.book.background.overhead.dispatch_costs`).
_ISSUED = {"Python, eager": "C1", "C++ loop": "0.55", "CUDA graph": "C0"}


@book_figure
def plot_dispatch_costs(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                        ax: Axes | None = None) -> Figure | Note:
    """Time per call (s) of a tiny kernel by how it is issued (a
    :func:`~perfkit.book.background.overhead.dispatch_costs` frame): horizontal bars, slowest on top,
    each labelled with its time and who measured it. The caption names each row's source
    (``source`` replaces it)."""
    if (note := no_data(frame, source)) is not None:
        return note
    ax = single_axes(ax, height=0.45 * len(frame) + 1.1)
    y = np.arange(len(frame))[::-1]
    colours = [_ISSUED.get(i, "C2") for i in frame["issued"]]
    ax.barh(y, frame["time_s"], color=colours, height=0.6)
    for yi, t in zip(y, frame["time_s"]):
        ax.text(t, yi, f" {format_time(t)}", va="center", fontsize=MIN_FONT_PT)
    ax.set_yticks(y, [f"{h} [{b}]" for h, b in zip(frame["how"], frame["by"])], fontsize=MIN_FONT_PT)
    time_axis(ax, "time per call", axis="x")
    ax.set_xlim(0, frame["time_s"].max() * 1.2)
    handles = [Patch(color=c, label=i) for i, c in _ISSUED.items() if i in set(frame["issued"])]
    ax.legend(handles=handles, fontsize=MIN_FONT_PT, loc="lower right", title="issued by", title_fontsize=MIN_FONT_PT)
    ax.grid(True, axis="x", alpha=0.25)
    label = source if source is not None else caption(dict(zip(frame["by"], frame["source"])))
    devices = {getattr(s, "device", "") for s in frame["source"]}
    where = f" on the {devices.pop()}" if len(devices) == 1 else ""
    heading(ax, f"One tiny kernel{where}: what issuing it costs", label)
    return ax.figure
