"""Figures of the GEMM chapter's experiments, and of the GEMM model against measurement.

Each takes the frame an experiment returned (live, or loaded from ``data/``) and is captioned
with that frame's source; ``source`` is needed only for a hand-built frame without metadata, or
to say why the frame is None (e.g. the source :func:`perfkit.run_or_load` returned).
The published modern GPUs' figures draw the model beside them, or alone where the table is absent.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...devices import DeviceSpec, device_spec
from ...display import Note
from ...gemm_model import explain_gemm, prediction_error
from ...meta import FrameMeta
from ...provenance import Source, caption, modelled, source_of
from ...published_data import HOW_TO_GET
from ...roofline import gemm_bytes
from ...then_now import layout_spread
from ..figures import (MIN_FONT_PT, book_figure, frame_source, heading, legend_name, named_frames, new_figure, no_data, say,
    single_axes, time_axis)

__all__ = ["plot_alignment", "plot_fp8_published", "plot_gemm_sizes", "plot_gemm_waves", "plot_h100_batched",
           "plot_h100_sizes", "plot_layout_spread", "plot_predicted_vs_measured", "plot_quantization_sweep", "plot_small_n",
           "plot_throughput_vs_work", "plot_tile_sizes", "plot_transposes"]


@book_figure
def plot_gemm_sizes(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Duration (s) and TFLOP/s against size for the ``gemm_sizes`` experiment; the model dashed."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    fig, axes = new_figure(2, 2, height=6)
    for col, (sweep, xname, name) in enumerate((("mn", "M", "M = N"), ("k", "K", "K"))):
        part = frame[frame["sweep"] == sweep]
        fixed = "K" if sweep == "mn" else "M"
        for i, (dtype, g) in enumerate(part.groupby("dtype", sort=False)):
            g = g.sort_values(xname)
            axes[0, col].plot(g[xname], g["time_s"], "o-", color=f"C{i}", ms=3, label=dtype)
            axes[1, col].plot(g[xname], g["tflops"], "o-", color=f"C{i}", ms=3, label=dtype)
            if "predicted_s" in g and g["predicted_s"].notna().any():
                axes[0, col].plot(g[xname], g["predicted_s"], "--", color=f"C{i}", lw=1)
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.25)
        time_axis(axes[0, col], log=True)
        axes[1, col].set_ylabel("TFLOP/s")
        axes[1, col].set_ylim(bottom=0)
        axes[1, col].set_xlabel(f"{name} ({fixed} = {int(part[fixed].iloc[0]) if len(part) else '?'})")
        axes[0, col].set_title(f"{name} swept", fontsize=9)
    axes[0, 0].legend(fontsize=MIN_FONT_PT, title="dashed: model", title_fontsize=MIN_FONT_PT)
    heading(fig, "GEMM duration and throughput against size", label)
    return fig


@book_figure
def plot_alignment(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                   ax: Axes | None = None) -> Figure | Note:
    """Duration against K around a multiple of 8, per dtype, relative to the aligned median."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    ax = single_axes(ax, height=3.4)
    for i, (dtype, g) in enumerate(frame.groupby("dtype", sort=False)):
        g = g.sort_values("K")
        aligned = g["aligned"].astype(bool)
        rel = g["time_s"] / g.loc[aligned, "time_s"].median()
        ax.plot(g["K"], rel, "-", color=f"C{i}", lw=1, label=f"{dtype} (aligned every {int(g['alignment'].iloc[0])})")
        ax.plot(g["K"][aligned], rel[aligned], "o", color=f"C{i}", ms=6)
        ax.plot(g["K"][~aligned], rel[~aligned], "o", mfc="white", color=f"C{i}", ms=5)
    ax.axhline(1, color="gray", lw=0.8)
    ax.set_xlabel(f"K (M = {int(frame['M'].iloc[0])}, N = {int(frame['N'].iloc[0])}); filled = aligned")
    ax.set_ylabel("duration / median aligned duration")
    heading(ax, "Alignment: duration as K steps by one element", label)
    ax.grid(True, alpha=0.25)
    # Below the axes: the unaligned points fill the whole plot, so no corner is free for a legend.
    ax.legend(fontsize=MIN_FONT_PT, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    return ax.figure


@book_figure
def plot_quantization_sweep(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """TFLOP/s (left) and duration (s, right) against N (NVIDIA's Figures 7 and 8), one line per
    implementation, the model of the forced tile dashed and each new wave dotted."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    M, K = int(frame["M"].iloc[0]), int(frame["K"].iloc[0])
    fig, axes = new_figure(1, 2, height=3.4)
    for i, (impl, g) in enumerate(frame.groupby("impl", sort=False)):
        g = g.sort_values("N")
        axes[0, 0].plot(g["N"], g["tflops"], "-", color=f"C{i}", lw=1.2, label=impl)
        axes[0, 1].plot(g["N"], g["time_s"], "-", color=f"C{i}", lw=1.2, label=impl)
        if impl.startswith("triton") and g["predicted_s"].notna().any():
            axes[0, 1].plot(g["N"], g["predicted_s"], "--", color="black", lw=1, label=f"model, {impl} tile")
            for n in g["N"][g["waves"].diff() > 0]:
                for ax in axes[0]:
                    ax.axvline(n, color="gray", lw=0.6, ls=":")
    axes[0, 0].set_ylabel("TFLOP/s")
    time_axis(axes[0, 1])
    for ax in axes[0]:
        ax.set_xlabel("N (dotted: a new wave starts)")
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=MIN_FONT_PT)
    heading(fig, f"Quantization: M = {M}, K = {K}, N swept", label)
    return fig


@book_figure
def plot_tile_sizes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                    ax: Axes | None = None) -> Figure | Note:
    """TFLOP/s of one GEMM under each forced tile, with cuBLAS (gray) for reference."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    M, N, K = (int(frame[c].iloc[0]) for c in ("M", "N", "K"))
    ax = single_axes(ax, height=3.8)
    ax.bar(frame["impl"], frame["tflops"], color=["gray" if i == "cublas" else "C0" for i in frame["impl"]])
    for x, (t, w) in enumerate(zip(frame["tflops"], frame["waves"])):
        ax.annotate(f"{t:.0f}" + ("" if pd.isna(w) else f"\n{int(w)} waves"), (x, t), ha="center", va="bottom",
                    fontsize=MIN_FONT_PT)
    ax.set_ylabel("TFLOP/s")
    ax.tick_params(axis="x", labelsize=MIN_FONT_PT)
    heading(ax, f"Tile size: {M}×{N}×{K} {frame['dtype'].iloc[0]}", label)
    ax.grid(True, axis="y", alpha=0.25)
    return ax.figure


@book_figure
def plot_transposes(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                    ax: Axes | None = None) -> Figure | Note:
    """TFLOP/s of each BLAS layout (NN, NT, TN, TT) per shape."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    ax = single_axes(ax, height=3.8)
    shapes = frame.assign(shape_name=[f"{m}×{n}×{k}" for m, n, k in zip(frame["M"], frame["N"], frame["K"])])
    table = shapes.pivot_table(index="shape_name", columns="layout", values="tflops", sort=False)
    width = 0.8 / len(table.columns)
    for j, layout in enumerate(table.columns):
        ax.bar(np.arange(len(table)) + j * width, table[layout], width, label=layout)
    ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, table.index, fontsize=MIN_FONT_PT)
    ax.set_ylabel("TFLOP/s")
    ax.set_xlabel("M×N×K")
    heading(ax, f"Layouts: {frame['dtype'].iloc[0]} GEMMs", label)
    ax.legend(fontsize=MIN_FONT_PT, title="layout (A, B)")
    ax.grid(True, axis="y", alpha=0.25)
    return ax.figure


@book_figure
def plot_small_n(frame: pd.DataFrame | None, source: Source | str | None = None, *,
                 published: Mapping[str, pd.DataFrame | None] | None = None) -> Figure | Note:
    """Duration (s), TFLOP/s and GB/s against a small N: flat duration while memory-bound.

    ``published`` (name → frame, e.g. ``pk.provenance.published_counterparts("gemm_small_n")``) adds the
    published GPUs' points ("then"); with it, the figure is drawn even when ``frame`` is None.
    """
    then, then_labels = named_frames(published, param="published")
    if not then and (note := no_data(frame, source)) is not None:
        return note
    ours = frame is not None and len(frame) > 0
    labels = dict(then_labels)
    if ours:
        labels = {"ours": frame_source(frame, source), **labels}
    else:
        say(f"ours: {source or 'no data'}", title="Published data only",
            instead="the published measurements, drawn below")
    fig, axes = new_figure(1, 2, height=3.3)
    if ours:
        g = frame.sort_values("N")
        axes[0, 0].plot(g["N"], g["time_s"], "o-", ms=3, label=legend_name(labels["ours"], "measured"))
        if g["predicted_s"].notna().any():
            axes[0, 0].plot(g["N"], g["predicted_s"], "--", color="black", lw=1, label="model")
        axes[0, 1].plot(g["N"], g["tflops"], "o-", ms=3, color="C1", label="TFLOP/s")
        twin = axes[0, 1].twinx()
        twin.plot(g["N"], g["gbps"], "s-", ms=3, color="C2", label="GB/s")
        twin.set_ylabel("GB/s (minimum bytes)", color="C2")
    for i, (name, p) in enumerate(then.items()):
        p = p.sort_values("N")
        style = dict(marker="^v<>"[i % 4], ls=":", ms=5, color=f"C{i + 3}", label=f"{name} (published)")
        axes[0, 0].plot(p["N"], p["time_s"], **style)
        axes[0, 1].plot(p["N"], p["tflops"], **style)
    time_axis(axes[0, 0], log=bool(then))
    axes[0, 1].set_ylabel("TFLOP/s", color="C1" if ours else "black")
    axes[0, 1].set_ylim(bottom=0)
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N")
        ax.grid(True, which="both", alpha=0.25)
    axes[0, 0].legend(fontsize=MIN_FONT_PT)
    shown = frame if ours else next(iter(then.values()))
    M, K, dtype = int(shown["M"].iloc[0]), int(shown["K"].iloc[0]), shown["dtype"].iloc[0]
    heading(fig, f"Small N: M = K = {M if M == K else (M, K)}, {dtype}", caption(labels))
    return fig


@book_figure
def plot_layout_spread(frames: Mapping[str, pd.DataFrame | None], *, ax: Axes | None = None,
                       sources: Mapping[str, Source | str] | None = None) -> Figure | Note:
    """Per frame and dtype, each shape's slowest layout ÷ its fastest (1 = layout does not matter).

    ``frames`` maps a name to a frame with ``layout`` and ``time_s`` columns (our
    ``gemm_transposes``, published GEMMs, ...); shapes measured in one layout only are skipped.
    """
    parts, labels = named_frames(frames, sources, keep=_spread_or_empty)
    if not parts:
        return no_data(None, "no frame has a GEMM shape measured in more than one layout")
    ax = single_axes(ax, height=3.2)
    rng = np.random.default_rng(0)
    ticks = []
    for i, (name, spread) in enumerate(parts.items()):
        for dtype, g in spread.groupby("dtype", sort=False):
            x = len(ticks)
            ax.plot(x + rng.uniform(-0.2, 0.2, len(g)), g["spread"], "o", ms=3, alpha=0.6, color=f"C{i}")
            ax.plot([x - 0.3, x + 0.3], [g["spread"].median()] * 2, color="black", lw=1.5)
            ticks.append(f"{name}\n{dtype} ({len(g)} shapes)")
    ax.axhline(1, color="gray", lw=0.8)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=MIN_FONT_PT)
    ax.set_ylabel("slowest layout ÷ fastest")
    heading(ax, "Does the layout matter? Each shape's slowest layout against its fastest (bar: median)",
            caption(labels))
    ax.grid(True, axis="y", alpha=0.25)
    return ax.figure


@book_figure
def plot_throughput_vs_work(frames: Mapping[str, pd.DataFrame | None], *, dtype: str | tuple[str, ...] = "float16",
                            ax: Axes | None = None, sources: Mapping[str, Source | str] | None = None
                            ) -> Figure | Note:
    """TFLOP/s against the GEMM's work (2·M·N·K FLOP, × ``b`` if batched) in ``dtype`` (or a tuple
    of comparable ones, ``("float16", "bfloat16")``), one colour per frame: the then-vs-now view of
    "bigger GEMMs are more efficient", a sizes sweep beside every published GEMM, whatever their shapes.
    """
    dtypes = (dtype,) if isinstance(dtype, str) else tuple(dtype)
    parts, labels = named_frames(frames, sources, keep=lambda f: f[f["dtype"].isin(dtypes)])
    if not parts:
        return no_data(None, f"no {' or '.join(dtypes)} GEMMs in {', '.join(map(str, frames)) or 'no frames'}")
    ax = single_axes(ax, height=3.6)
    for i, (name, f) in enumerate(parts.items()):
        work = 2.0 * f["M"] * f["N"] * f["K"] * (f["b"] if "b" in f else 1)
        ax.plot(work, f["tflops"], "o", ms=3, alpha=0.6, color=f"C{i}",
                label=name if len(dtypes) == 1 else f"{name}, {'/'.join(dict.fromkeys(f['dtype']))}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("work, 2·M·N·K (FLOP)")
    ax.set_ylabel("TFLOP/s")
    heading(ax, f"Throughput against work, {' and '.join(dtypes)} GEMMs", caption(labels))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT)
    return ax.figure


def _spread_or_empty(frame: pd.DataFrame) -> pd.DataFrame:
    if "layout" not in frame or "time_s" not in frame:
        return frame.iloc[:0]
    return layout_spread(frame)


@book_figure
def plot_predicted_vs_measured(frames: Mapping[str, pd.DataFrame | None], *, ax: Axes | None = None,
                               sources: Mapping[str, Source | str] | None = None) -> Figure | Note:
    """Measured against predicted duration (s) of every row with a prediction, one colour per frame.

    ``frames`` maps a name to an experiment's frame (None, empty or prediction-less frames are
    skipped). The caption names the source of every frame drawn; ``sources`` (name → source) is
    needed only for hand-built frames without metadata. The title gives the model's error.
    """
    parts, labels = named_frames(frames, sources, keep=_predicted_rows)
    if not parts:
        return no_data(None, _nothing_predicted(frames))
    ax = single_axes(ax, height=5.5, width=6.5)
    for i, (name, f) in enumerate(parts.items()):
        ax.plot(f["predicted_s"], f["time_s"], "o", ms=3, color=f"C{i}", label=name, alpha=0.7)
    rows = pd.concat(parts.values())
    err = prediction_error(rows["time_s"], rows["predicted_s"])
    lo = min(rows["time_s"].min(), rows["predicted_s"].min()) / 1.5
    hi = max(rows["time_s"].max(), rows["predicted_s"].max()) * 1.5
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, label="measured = predicted")
    time_axis(ax, "predicted", axis="x", log=True)
    time_axis(ax, "measured", axis="y", log=True)
    heading(ax, f"Model against measurement: median |error| {err['median_abs']:.0%}, 90th percentile "
                f"{err['p90_abs']:.0%} ({err['n']} GEMMs)", caption(labels))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT)
    return ax.figure


def _predicted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["predicted_s"].notna()] if "predicted_s" in frame else frame.iloc[:0]


def _nothing_predicted(frames: Mapping[str, pd.DataFrame | None]) -> str:
    """Why none of ``frames`` can be drawn, naming each part."""
    if not frames:
        return "nothing to compare with the model: no frames given"
    empty = [name for name, f in frames.items() if f is None or len(f) == 0]
    unpredicted = [name for name in frames if name not in empty]
    why = [f"no data for {', '.join(empty)}"] if empty else []
    why += [f"no predictions in {', '.join(unpredicted)}"] if unpredicted else []
    return "nothing to compare with the model: " + "; ".join(why)


def _published_or_model(frame: pd.DataFrame | None, spec: DeviceSpec | None, what: str, default: str):
    """The device to model and whether published rows are drawn; notes how to get absent data."""
    if spec is not None and not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec or None, got {spec!r}")
    if frame is None or not len(frame):
        say(f"{what} is not here: {HOW_TO_GET}.", title="Published data absent",
            instead="the model's prediction alone, drawn below")
        return spec or device_spec(default), False
    return spec or device_spec(FrameMeta.of(frame).device or default), True


def _pair(ax: Axes, x, model, rows: pd.DataFrame | None, xcol: str, ycol: str, i: int, name: str) -> None:
    """The model's line (dashed) and, where ``rows`` has any, the published one (solid), in colour i."""
    ax.plot(x, model, "--", color=f"C{i}", lw=1.2, label=f"{name}, model" if name else None)
    if rows is not None and len(rows := rows.sort_values(xcol)):
        ax.plot(rows[xcol], rows[ycol], "o-", color=f"C{i}", ms=4, label=f"{name}, published" if name else None)


def _finish(fig: Figure, axes, xlabels, ylabels, title: str, frame, have: bool, spec: DeviceSpec) -> Figure:
    """Log-2 x axes from 0 up, grids, labels, and the heading: who published, how timed, the model."""
    for ax, xlabel, ylabel in zip(axes, xlabels, ylabels):
        ax.set_xscale("log", base=2)
        ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(0, None))
        ax.grid(True, which="both", alpha=0.25)
    timing = (FrameMeta.of(frame).timing or "?").split(";")[0].split(":")[0] if have else ""
    heading(fig, title, caption({"solid": f"{source_of(frame)}, timed with {timing}" if have else None,
                                 "dashed": modelled(spec)}))
    return fig


#: XLA's sizes, and NVIDIA's two size sweeps cut from its grid: (x label, dimension swept, fixed ones).
_SIZES = tuple(2**k for k in range(8, 13))
_SWEEPS = (("M = N (K = 4096)", "M", {"K": 4096}), ("K (M = N = 4096)", "K", {"M": 4096, "N": 4096}))
#: DeepGEMM's (N, K) at M = 64, 128, 4096 (DeepSeek-V3's shapes: configuration, not results), for the model alone.
FP8_SHAPES = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))


@book_figure
def plot_h100_sizes(frame: pd.DataFrame | None, spec: DeviceSpec | None = None) -> Figure:
    """TFLOP/s against size in NVIDIA's two sweeps: OpenXLA's H100 rows (``gemm_published.xla_rows``)
    solid, the model dashed, the datasheet peaks dotted. None: the model of ``spec`` (or an H100) alone."""
    spec, have = _published_or_model(frame, spec, "OpenXLA's H100 GEMM table", "H100-SXM")
    fig, axes = new_figure(1, 2, height=3.8)
    rows = frame[(frame["b"] == 1) & (frame["M"] == frame["N"])] if have else None
    for ax, (_, swept, fixed) in zip(axes[0], _SWEEPS):
        cut = rows[np.logical_and.reduce([rows[d] == v for d, v in fixed.items()])] if have else None
        for i, dtype in enumerate(("bfloat16", "tf32")):
            model = [explain_gemm(*(fixed.get(d, n) for d in "MNK"), dtype, spec).achieved_flop_s / 1e12 for n in _SIZES]
            _pair(ax, _SIZES, model, cut[cut["dtype"] == dtype] if have else None, swept, "tflops", i, dtype)
            ax.axhline(spec.peak_flop_s(dtype) / 1e12, color=f"C{i}", lw=0.6, ls=":")
    axes[0, 0].legend(fontsize=MIN_FONT_PT)
    return _finish(fig, axes[0], [f"{x}; dotted: datasheet peak" for x, _, _ in _SWEEPS], ["TFLOP/s", ""],
                   f"GEMM throughput against size on an {spec.name}", frame, have, spec)


@book_figure
def plot_h100_batched(frame: pd.DataFrame | None, spec: DeviceSpec | None = None, *, dtype: str = "bfloat16"):
    """TFLOP/s of b = 1, 2, 4 square GEMMs in one launch: OpenXLA's H100 rows
    (``gemm_published.batched_rows``) solid, the model dashed."""
    spec, have = _published_or_model(frame, spec, "OpenXLA's H100 GEMM table", "H100-SXM")
    fig, axes = new_figure(1, 1, height=3.8)
    for i, b in enumerate((1, 2, 4)):
        model = [explain_gemm(n, n, n, dtype, spec, batch=b).achieved_flop_s / 1e12 for n in _SIZES]
        m = frame[(frame["b"] == b) & (frame["dtype"] == dtype)] if have else None
        _pair(axes[0, 0], _SIZES, model, m, "M", "tflops", i, f"b = {b}")
    axes[0, 0].legend(fontsize=MIN_FONT_PT, ncol=2)
    return _finish(fig, axes[0], [f"M = N = K, {dtype}; b GEMMs in one launch"], ["TFLOP/s (all b GEMMs)"],
                   f"Batched GEMMs on an {spec.name}: b GEMMs share the waves", frame, have, spec)


@book_figure
def plot_fp8_published(frame: pd.DataFrame | None, spec: DeviceSpec | None = None) -> Figure:
    """DeepGEMM's H800 fp8 rows (``gemm_published.deepgemm_dense``): TFLOP/s and TB/s against M per
    (N, K), solid, the model dashed; dotted: fp8 peak, bandwidth. None: the model alone."""
    spec, have = _published_or_model(frame, spec, "DeepGEMM's H800 fp8 table", "H800")
    fig, axes = new_figure(1, 2, height=4.2)
    for i, (N, K) in enumerate(dict.fromkeys(zip(frame["N"], frame["K"])) if have else FP8_SHAPES):
        m = frame[(frame["N"] == N) & (frame["K"] == K)].assign(tbps=lambda f: f["gbps"] / 1e3) if have else None
        Ms = sorted(m["M"]) if have else [64, 128, 4096]
        t = [explain_gemm(M, N, K, "float8", spec).predicted_s for M in Ms]
        _pair(axes[0, 0], Ms, [2e-12 * M * N * K / s for M, s in zip(Ms, t)], m, "M", "tflops", i, "")
        _pair(axes[0, 1], Ms, [gemm_bytes(M, N, K, "float8") / s / 1e12 for M, s in zip(Ms, t)], m, "M", "tbps", i, "")
        axes[0, 0].plot([], [], "-", color=f"C{i}", label=f"N = {N}, K = {K}")
    for ax, ceiling in zip(axes[0], (spec.peak_flop_s("float8"), spec.mem_bandwidth)):
        ax.axhline(ceiling / 1e12, color="gray", ls=":", lw=0.8)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=MIN_FONT_PT)
    return _finish(fig, axes[0], ["M (dashed: model)"] * 2, ["TFLOP/s", "TB/s (A, B read once, C written)"],
                   f"fp8 GEMMs on an {spec.name}: memory-bound at small M, math-bound at large M",
                   frame, have, spec)
