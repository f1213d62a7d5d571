"""Figures of fusion and of a small network's time budget (the memory-limited chapter).

:func:`plot_fusion` draws a ``fusion_chains`` frame: eager against compiled time, and the time
fusion saved beside what the byte model says it should save. :func:`plot_network_breakdown` draws
a ``convnet_breakdown`` frame: the share of each network's time in math-bound (conv, linear) and
memory-bound layers, measured beside predicted. Both accept a frame of predictions only
(:func:`perfkit.book.memory_limited.fusion.predicted_chains`,
:func:`perfkit.book.memory_limited.convnet.predicted_breakdown`; captioned with
:func:`perfkit.provenance.modelled`). :func:`plot_fusion_published` draws published eager/fused
pairs (:func:`perfkit.book.memory_limited.published.fusion_pairs`): the measured time ratio beside
the byte model's. Seconds and bytes throughout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...display import Note
from ...provenance import Source
from ...units import format_percent, format_time
from ..figures import MIN_FONT_PT, book_figure, frame_source, heading, new_figure, no_data, time_axis
from .figures import published_label

__all__ = ["plot_fusion", "plot_fusion_published", "plot_network_breakdown"]

_KEYS = ["chain", "batch", "in_features", "out_features", "size", "phase"]
_SHORT = {"conv_bn_relu": "conv→bn→relu", "linear_bias_gelu_dropout": "linear→bias→gelu→dropout"}


def _case(r: pd.Series) -> str:
    """A two-line label of one chain, size and phase: ``"conv→bn→relu, fwd+bwd\n128 × 64→64 ch, 56²"``."""
    phase = "fwd" if r["phase"] == "forward" else "fwd+bwd"
    what = f"ch, {int(r['size'])}²" if int(r["size"]) > 1 else "features"
    return (f"{_SHORT.get(r['chain'], r['chain'])}, {phase}\n{int(r['batch'])} × {int(r['in_features'])}→"
            f"{int(r['out_features'])} {what}")


def _pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per chain, size and phase with eager and compiled columns side by side (suffix ``_c``)."""
    eager = frame[frame["mode"] == "eager"].set_index(_KEYS)
    compiled = frame[frame["mode"] == "compiled"].set_index(_KEYS)
    return eager.merge(compiled, "left", left_index=True, right_index=True, suffixes=("", "_c")).reset_index()


@book_figure
def plot_fusion(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Left: each chain's duration eager (gray) and compiled (blue), the model's as black ticks, the
    first compile's seconds beside the compiled bar. Right: the time fusion saved (eager − compiled,
    measured) beside the saving the byte model predicts, each labelled with the bytes it saves."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    measured = frame["time_s"].notna().any()
    p = _pairs(frame)
    y = np.arange(len(p))[::-1].astype(float)
    fig, axes = new_figure(1, 2, height=1.2 + 0.42 * len(p))
    ax_t, ax_s = axes[0]
    t_e, t_c = (p[c] if measured else p[c.replace("time", "predicted")] for c in ("time_s", "time_s_c"))
    ax_t.barh(y + 0.2, t_e, height=0.38, color="gray", alpha=1 if measured else 0.6, label="eager")
    ax_t.barh(y - 0.2, t_c, height=0.38, color="C0", alpha=1 if measured else 0.6, label="torch.compile")
    if measured and p["predicted_s"].notna().any():
        ax_t.plot(p["predicted_s"], y + 0.2, "|", color="black", ms=12, mew=2, label="model")
        ax_t.plot(p["predicted_s_c"], y - 0.2, "|", color="black", ms=12, mew=2)
    for yi, ti, ci in zip(y, t_c, p["compile_s_c"]):
        if np.isfinite(ci) and np.isfinite(ti):
            ax_t.annotate(f" compile {format_time(ci)}", (ti, yi - 0.2), va="center", fontsize=MIN_FONT_PT)
    ax_t.set_yticks(y, [_case(r) for _, r in p.iterrows()], fontsize=MIN_FONT_PT)
    time_axis(ax_t, "duration" + ("" if measured else " (model)"), axis="x")
    saved, predicted = p["time_s"] - p["time_s_c"], p["predicted_s"] - p["predicted_s_c"]
    if saved.notna().any():
        ax_s.barh(y + 0.2, saved.fillna(0), height=0.38, color="C2", label="time saved, measured")
    if predicted.notna().any():
        ax_s.barh(y - 0.2, predicted.fillna(0), height=0.38, color="white", edgecolor="C2", hatch="///",
                  label="time saved, byte model")
    ends = np.fmax(saved.clip(lower=0).fillna(0), predicted.clip(lower=0).fillna(0))
    for yi, end, b in zip(y, ends, p["bytes_eager"] - p["bytes_fused"]):
        ax_s.annotate(f"{b / 1e6:.3g} MB fewer", (end, yi), xytext=(3, 0), textcoords="offset points", va="center",
                      fontsize=MIN_FONT_PT)
    ax_s.axvline(0, color="black", lw=0.8)
    ax_s.margins(x=0.45)
    ax_s.set_yticks(y, [""] * len(y))
    time_axis(ax_s, "time saved (eager − compiled)", axis="x")
    handles, names = [], []
    for ax in (ax_t, ax_s):
        ax.grid(True, axis="x", alpha=0.25)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        for handle, name in zip(*ax.get_legend_handles_labels()):
            handles.append(handle)
            names.append(name)
    # one legend below both panels: inside either, it would cover a bar
    fig.legend(handles, names, loc="outside lower center", ncol=len(names), fontsize=MIN_FONT_PT, frameon=False)
    dtype = frame["dtype"].iloc[0]
    heading(fig, f"Fusion: the ops after a GEMM, eager against torch.compile ({dtype})", label)
    return fig


def _budget(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Seconds per network and category (each layer's ``column`` × count, both passes); NaN if any is missing."""
    part = frame[frame["category"].isin(("math", "memory"))]
    seconds = part["count"] * part[column]
    out = seconds.groupby([part["network"], part["category"]], sort=False).sum(min_count=1).unstack("category")
    complete = seconds.notna().groupby(part["network"], sort=False).all()
    return out.where(complete, np.nan).reindex(columns=["math", "memory"])


@book_figure
def plot_network_breakdown(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Per network, the layers' time split into math-bound (conv, linear) and memory-bound layers (batch norm,
    ReLU, add, pooling): left, as shares of the sum, measured beside predicted; right, in seconds, with the
    whole step measured once (black diamond) against the sum of its layers timed alone."""
    if (note := no_data(frame, source)) is not None:
        return note
    label = frame_source(frame, source)
    measured, predicted = _budget(frame, "time_s"), _budget(frame, "predicted_s")
    whole = frame[frame["category"] == "network"].set_index("network")["time_s"]
    nets = list(measured.index)
    fig, axes = new_figure(1, 2, height=3.8)
    for k, (ax, shares) in enumerate(zip(axes[0], (True, False))):
        x = np.arange(len(nets), dtype=float)
        for dx, what, b, hatch in ((-0.2, "measured", measured, None), (0.2, "predicted", predicted, "///")):
            if b.isna().all().all():
                continue
            scale = b.sum(axis=1) if shares else 1.0
            math_part, mem = b["math"] / scale, b["memory"] / scale
            ax.bar(x + dx, math_part, 0.38, color="C0", hatch=hatch, edgecolor="white",
                   label=f"math (conv, linear), {what}")
            ax.bar(x + dx, mem, 0.38, bottom=math_part, color="C1", hatch=hatch, edgecolor="white",
                   label=f"memory-bound, {what}")
            if shares:
                for xi, mid, share in zip(x + dx, math_part + mem / 2, mem):
                    ax.annotate(format_percent(share), (xi, mid), ha="center", va="center", fontsize=MIN_FONT_PT,
                                fontweight="bold")
        if not shares and whole.notna().any():
            ax.plot(x - 0.2, whole.reindex(nets), "D", color="black", ms=6, label="whole step, measured")
        ax.set_xticks(x, [_network_label(frame, n) for n in nets], fontsize=MIN_FONT_PT)
        ax.grid(True, axis="y", alpha=0.25)
        if k == 0:
            ax.set_ylabel("share of the layers' time")
            ax.set_ylim(0, 1.45)
            ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
        else:
            time_axis(ax, "forward + backward, all layers")
            ax.set_ylim(0, 1.45 * ax.get_ylim()[1])
        ax.legend(fontsize=MIN_FONT_PT, loc="upper left")
    r = frame.iloc[0]
    hatched = "; hatched: model" if measured.notna().any().any() and predicted.notna().any().any() else ""
    heading(fig, f"Where a small CNN's time goes: batch {int(r['batch'])}, {r['dtype']}{hatched}", label)
    return fig


def _network_label(frame: pd.DataFrame, network: str) -> str:
    """``"small: 16–64 ch"``: the network and the range of its convs' output channels."""
    ch = frame.loc[(frame["network"] == network) & (frame["kind"] == "conv"), "channels"]
    return f"{network}: {ch.min()}–{ch.max()} ch" if len(ch) else str(network)


@book_figure
def plot_fusion_published(frame: pd.DataFrame | None, source: Source | str | None = None) -> Figure | Note:
    """Published eager/fused pairs (:func:`perfkit.book.memory_limited.published.fusion_pairs`), one row
    each: the measured eager ÷ fused forward time at the largest size (bar; dots: the smaller sizes)
    beside the byte model's ratio (hatched), on a log axis. A model-only frame draws the model's bars."""
    if (note := no_data(frame, source)) is not None:
        return note
    label, model_only = published_label(frame, source)
    top = frame[frame["largest"]].reset_index(drop=True)
    y = np.arange(len(top))[::-1].astype(float)
    fig, axes = new_figure(1, 1, height=1.2 + 0.55 * len(top))
    ax = axes[0, 0]
    if not model_only:
        ax.barh(y + 0.2, top["ratio"], height=0.38, color="C0", label="measured, largest size")
        for yi, (_, r) in zip(y, top.iterrows()):
            rest = frame[(frame["device"] == r["device"]) & (frame["kernel"] == r["kernel"])
                         & (frame["eager"] == r["eager"]) & ~frame["largest"]]
            ax.plot(rest["ratio"], [yi + 0.2] * len(rest), "o", ms=3, color="black", alpha=0.5,
                    label="measured, smaller sizes" if yi == y[0] else None)
            end = max(r["ratio"], rest["ratio"].max()) if len(rest) else r["ratio"]
            ax.annotate(f"{r['ratio']:.2f}×", (end, yi + 0.2), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=MIN_FONT_PT)
    ax.barh(y - 0.2, top["predicted_ratio"], height=0.38, color="white", edgecolor="C0", hatch="///",
            label="byte model (Σ pk.memory_time, eager ÷ fused)")
    for yi, v in zip(y, top["predicted_ratio"]):
        ax.annotate(f"{v:.2f}×", (v, yi - 0.2), xytext=(4, 0), textcoords="offset points", va="center", fontsize=MIN_FONT_PT)
    names = [f"{r['eager_label']} ({int(r['eager_kernels'])} kernel{'s' if r['eager_kernels'] > 1 else ''})\n"
             f"÷ {r['fused_label']}, {r['device']}, {r['dtype']}" for _, r in top.iterrows()]
    ax.set_yticks(y, names, fontsize=MIN_FONT_PT)
    ax.set_xscale("log")
    ax.axvline(1, color="black", lw=0.8)
    ax.set_xlabel("eager time ÷ fused time (forward)")
    ax.set_xlim(0.8, 2.2 * float(np.nanmax(top[["predicted_ratio"] + ([] if model_only else ["ratio"])].to_numpy())))
    ax.grid(True, axis="x", which="both", alpha=0.25)
    ax.legend(fontsize=MIN_FONT_PT, loc="lower right")
    heading(fig, "What fusion buys, measured and predicted" + (" (model only)" if model_only else ""), label)
    return fig
