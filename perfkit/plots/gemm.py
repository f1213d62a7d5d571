"""Figures of models and recorded results (matplotlib only; nothing here runs an experiment).

Every figure says where its numbers come from: pass ``source`` (e.g. ``"live on H100-SXM,
2026-11-22"`` or ``"recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"``); without it the figure
names each device and where its spec comes from (:func:`spec_source`).
"""

from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._validate import positive_int
from .devices import DeviceSpec
from .dtypes import canonical_dtype
from .quantization import wave_quantization
from .roofline import Operation, attainable_flops

__all__ = ["plot_roofline", "plot_tile_waves", "spec_source", "plot_gemm_sizes", "plot_alignment",
           "plot_quantization_sweep", "plot_tile_sizes", "plot_transposes", "plot_small_n",
           "plot_predicted_vs_measured", "plot_timers", "plot_waves", "plot_wave_model"]

T = 1e12


def _as_specs(specs: Any) -> list[DeviceSpec]:
    items = [specs] if isinstance(specs, DeviceSpec) else list(specs) if isinstance(specs, (list, tuple)) else []
    if not items or not all(isinstance(s, DeviceSpec) for s in items):
        raise TypeError(f"specs must be a DeviceSpec or a non-empty list of them, got {specs!r}")
    return items


def _new_axes(ax, figsize=(7.5, 4.8)):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize, layout="constrained")[1]


def spec_source(specs: DeviceSpec | Sequence[DeviceSpec]) -> str:
    """One line naming each device and where its peaks come from (datasheet or a dated measurement)."""
    return "; ".join(f"{s.label}: {s.sources.get('peaks', 'peaks of unknown origin')}" for s in _as_specs(specs))


def _wrap(text: str, width: int = 110) -> str:
    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


def _ceilings(ceilings: Any) -> list[Mapping]:
    if ceilings is None:
        return []
    items = [ceilings] if isinstance(ceilings, Mapping) else list(ceilings)
    for c in items:
        if not isinstance(c, Mapping) or not {"flops", "bandwidth"} <= set(c):
            raise ValueError("ceilings must be a mapping (or a list of them) with keys 'flops' (FLOP/s) and "
                             f"'bandwidth' (bytes/s) and optionally 'label', got {c!r}")
        if not (c["flops"] > 0 and c["bandwidth"] > 0):
            raise ValueError(f"ceilings 'flops' and 'bandwidth' must be positive, got {c!r}")
    return items


def plot_roofline(operations: Iterable[Operation] | None, specs: DeviceSpec | Sequence[DeviceSpec],
                  dtype: Any = "float16", *, ax=None, source: str | None = None,
                  ceilings: Mapping | Sequence[Mapping] | None = None):
    """Draw each device's roofline for ``dtype`` and place ``operations`` on it; return the Axes.

    Log-log axes: arithmetic intensity (FLOP/byte) against attainable TFLOP/s. Each device's ridge
    point (ops:byte) is marked; each operation sits at its intensity on every device's roof and is
    named once. ``ceilings`` — ``{"label": str, "flops": FLOP/s, "bandwidth": bytes/s}`` or a list of
    them — adds measured roofs, dashed. ``source`` goes in the title (default :func:`spec_source`).
    """
    specs = _as_specs(specs)
    dtype = canonical_dtype(dtype)
    ops = list(operations or [])
    for op in ops:
        if not isinstance(op, Operation):
            raise TypeError(f"operations must hold Operation objects, got {op!r}")
    ceils = _ceilings(ceilings)
    ax = _new_axes(ax)

    xs = [op.intensity for op in ops if op.intensity > 0] + [s.ops_per_byte(dtype) for s in specs]
    xs += [c["flops"] / c["bandwidth"] for c in ceils]
    x = np.geomspace(min(0.1, min(xs) / 3), max(1e4, max(xs) * 3), 400)

    for i, spec in enumerate(specs):
        color, peak = f"C{i}", spec.peak_flops(dtype)
        ridge = spec.ops_per_byte(dtype)
        ax.plot(x, attainable_flops(x, spec, dtype) / T, color=color, lw=2,
                label=f"{spec.label}: {peak / T:,.1f} TFLOP/s, {spec.mem_bandwidth / 1e9:,.0f} GB/s")
        ax.plot([ridge], [peak / T], "o", color=color, ms=6)
        ax.annotate(f"ops:byte {ridge:,.0f}", (ridge, peak / T), xytext=(-6, 6), textcoords="offset points",
                    fontsize=8, color=color, ha="right")
        for op in ops:
            if op.intensity > 0:
                ax.plot([op.intensity], [attainable_flops(op.intensity, spec, dtype) / T], "s", ms=6,
                        mfc=color, mec="black", zorder=3)

    for j, c in enumerate(ceils):
        roof = np.minimum(c["flops"], x * c["bandwidth"]) / T
        ax.plot(x, roof, "--", color=f"C{len(specs) + j}", lw=1.5,
                label=f"{c.get('label', 'measured')}: {c['flops'] / T:,.1f} TFLOP/s, {c['bandwidth'] / 1e9:,.0f} GB/s")

    placed = sorted((op for op in ops if op.intensity > 0), key=lambda op: op.intensity)
    for k, op in enumerate(placed):
        y = attainable_flops(op.intensity, specs[0], dtype) / T
        ax.annotate(op.name, (op.intensity, y), xytext=(6, 8 if k % 2 == 0 else -14), textcoords="offset points",
                    fontsize=8)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(f"attainable {dtype} TFLOP/s")
    ax.set_title(f"Roofline, {dtype}\n{_wrap(source or spec_source(specs))}", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    return ax


def plot_tile_waves(M: int, N: int, tile: tuple[int, int], sms: int, *, blocks_per_sm: int = 1, ax=None,
                    source: str | None = None):
    """Draw the tiles of an M×N GEMM output coloured by the wave they run in; return the Axes.

    Tiles are numbered row by row (the launch order varies by library). The useful M×N region is
    outlined: tile area outside it is tile-quantization waste. ``source`` (e.g. ``"model of
    A100-SXM4-80GB (datasheet), no measurement"``) goes in the title.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    sms = positive_int("sms", sms)
    wq = wave_quantization(M, N, tile, sms, blocks_per_sm)
    tm, tn = wq.tile
    rows, cols = -(-wq.M // tm), -(-wq.N // tn)
    waves = np.arange(rows * cols).reshape(rows, cols) // wq.wave_size
    ax = _new_axes(ax, figsize=(6, 5))
    base = [f"C{i}" for i in range(10)]
    cmap = ListedColormap([base[i % 10] for i in range(wq.waves)])
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
    head = (f"{wq.tiles} tiles of {tm}×{tn} in {wq.waves} wave{'s' * (wq.waves != 1)} of {wq.wave_size}: "
            f"{wq.utilization:.1%} utilization, last wave {wq.last_wave_tiles} tiles\n"
            f"colour = wave; outlined: the useful {wq.M}×{wq.N} output")
    source = source or f"model of a GPU with {sms} SMs × {wq.blocks_per_sm} block(s) per SM, no measurement"
    ax.set_title(f"{head}\n{_wrap(source)}", fontsize=9)
    return ax


# --- Figures of experiment results -------------------------------------------------------------
# Each takes the frame an experiment returned (live or loaded from data/) and the ``source`` line
# from :func:`perfkit.run_or_load`. Given no frame, it prints ``source`` (which says why there is
# no data) and draws nothing, so a chapter never shows a made-up figure.


def _no_data(frame, source: str) -> bool:
    if frame is None or len(frame) == 0:
        print(textwrap.fill(f"No figure: {source}", 88, subsequent_indent="  "))
        return True
    return False


def _figure(nrows: int, ncols: int, figsize, title: str, source: str):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", squeeze=False)
    fig.suptitle(f"{title}\n{_wrap(source)}", fontsize=10)
    return fig, axes


def plot_gemm_sizes(frame, source: str):
    """Duration and TFLOP/s against size for the ``gemm_sizes`` experiment; model dashed."""
    if _no_data(frame, source):
        return None
    fig, axes = _figure(2, 2, (10, 6.5), "GEMM duration and throughput against size", source)
    for col, (sweep, xname, label) in enumerate((("mn", "M", "M = N"), ("k", "K", "K"))):
        part = frame[frame["sweep"] == sweep]
        fixed = "K" if sweep == "mn" else "M"
        for i, (dtype, g) in enumerate(part.groupby("dtype", sort=False)):
            g = g.sort_values(xname)
            axes[0, col].plot(g[xname], g["time_s"] * 1e3, "o-", color=f"C{i}", ms=3, label=dtype)
            axes[1, col].plot(g[xname], g["tflops"], "o-", color=f"C{i}", ms=3, label=dtype)
            if "predicted_s" in g and g["predicted_s"].notna().any():
                axes[0, col].plot(g[xname], g["predicted_s"] * 1e3, "--", color=f"C{i}", lw=1)
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.25)
        axes[0, col].set_yscale("log")
        axes[0, col].set_ylabel("duration (ms)")
        axes[1, col].set_ylabel("TFLOP/s")
        axes[1, col].set_ylim(bottom=0)
        axes[1, col].set_xlabel(f"{label} ({fixed} = {int(part[fixed].iloc[0]) if len(part) else '?'})")
        axes[0, col].set_title(f"{label} swept", fontsize=9)
    axes[0, 0].legend(fontsize=8, title="dashed: model", title_fontsize=7)
    return fig


def plot_alignment(frame, source: str):
    """Duration against K around a multiple of 8, per dtype, relative to the aligned median."""
    if _no_data(frame, source):
        return None
    fig, axes = _figure(1, 1, (8, 4), "Alignment: duration as K steps by one element", source)
    ax = axes[0, 0]
    for i, (dtype, g) in enumerate(frame.groupby("dtype", sort=False)):
        g = g.sort_values("K")
        base = g.loc[g["aligned"].astype(bool), "time_s"].median()
        rel = g["time_s"] / base
        ax.plot(g["K"], rel, "-", color=f"C{i}", lw=1, label=f"{dtype} (aligned every {int(g['alignment'].iloc[0])})")
        al = g["aligned"].astype(bool)
        ax.plot(g["K"][al], rel[al], "o", color=f"C{i}", ms=6)
        ax.plot(g["K"][~al], rel[~al], "o", mfc="white", color=f"C{i}", ms=5)
    ax.axhline(1, color="gray", lw=0.8)
    ax.set_xlabel(f"K (M = {int(frame['M'].iloc[0])}, N = {int(frame['N'].iloc[0])}); filled = aligned")
    ax.set_ylabel("duration / median aligned duration")
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=8)
    return fig


def plot_quantization_sweep(frame, source: str):
    """TFLOP/s, duration and tile count against N (NVIDIA's Figures 7 and 8), one line per implementation."""
    if _no_data(frame, source):
        return None
    M, K = int(frame["M"].iloc[0]), int(frame["K"].iloc[0])
    fig, axes = _figure(3, 1, (8, 8), f"Quantization: M = {M}, K = {K}, N swept", source)
    impls = list(dict.fromkeys(frame.get("impl", ["cublas"] * len(frame))))
    for i, impl in enumerate(impls):
        g = frame[frame["impl"] == impl].sort_values("N") if "impl" in frame else frame.sort_values("N")
        axes[0, 0].plot(g["N"], g["tflops"], "-", color=f"C{i}", lw=1.2, label=impl)
        axes[1, 0].plot(g["N"], g["time_s"] * 1e6, "-", color=f"C{i}", lw=1.2, label=impl)
        if impl.startswith("triton") and g["predicted_s"].notna().any():
            axes[1, 0].plot(g["N"], g["predicted_s"] * 1e6, "--", color="black", lw=1, label=f"model, {impl} tile")
            axes[2, 0].step(g["N"], g["tiles"], where="post", color=f"C{i}", label=f"tiles ({impl})")
            for n in g["N"][g["waves"].diff() > 0]:
                for ax in axes[:, 0]:
                    ax.axvline(n, color="gray", lw=0.6, ls=":")
    axes[0, 0].set_ylabel("TFLOP/s")
    axes[1, 0].set_ylabel("duration (µs)")
    axes[2, 0].set_ylabel("output tiles")
    axes[2, 0].set_xlabel("N (dotted: a new wave starts)")
    for ax in axes[:, 0]:
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=8)
    return fig


def plot_tile_sizes(frame, source: str):
    """TFLOP/s of one GEMM under each forced tile, with cuBLAS for reference."""
    if _no_data(frame, source):
        return None
    M, N, K = (int(frame[c].iloc[0]) for c in ("M", "N", "K"))
    fig, axes = _figure(1, 1, (8, 3.8), f"Tile size: {M}×{N}×{K} {frame['dtype'].iloc[0]}", source)
    ax = axes[0, 0]
    colors = ["gray" if i == "cublas" else "C0" for i in frame["impl"]]
    ax.bar(frame["impl"], frame["tflops"], color=colors)
    for x, (t, w) in enumerate(zip(frame["tflops"], frame.get("waves", [None] * len(frame)))):
        note = f"{t:.0f}" + (f"\n{int(w)} waves" if w is not None and w == w else "")
        ax.annotate(note, (x, t), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="y", alpha=0.25)
    return fig


def plot_transposes(frame, source: str):
    """TFLOP/s of each BLAS layout (NN, NT, TN, TT) per shape."""
    if _no_data(frame, source):
        return None
    fig, axes = _figure(1, 1, (8, 3.8), f"Layouts: {frame['dtype'].iloc[0]} GEMMs", source)
    ax = axes[0, 0]
    frame = frame.assign(shape_name=[f"{m}×{n}×{k}" for m, n, k in zip(frame["M"], frame["N"], frame["K"])])
    table = frame.pivot_table(index="shape_name", columns="layout", values="tflops", sort=False)
    width = 0.8 / len(table.columns)
    for j, layout in enumerate(table.columns):
        ax.bar(np.arange(len(table)) + j * width, table[layout], width, label=layout)
    ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, table.index, fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_xlabel("M×N×K")
    ax.legend(fontsize=8, title="layout (A, B)")
    ax.grid(True, axis="y", alpha=0.25)
    return fig


def plot_small_n(frame, source: str):
    """Duration, TFLOP/s and GB/s against a small N: flat duration while memory-bound."""
    if _no_data(frame, source):
        return None
    M, K = int(frame["M"].iloc[0]), int(frame["K"].iloc[0])
    fig, axes = _figure(1, 2, (10, 3.8), f"Small N: M = K = {M if M == K else (M, K)}, {frame['dtype'].iloc[0]}", source)
    g = frame.sort_values("N")
    axes[0, 0].plot(g["N"], g["time_s"] * 1e6, "o-", ms=3, label="measured")
    if g["predicted_s"].notna().any():
        axes[0, 0].plot(g["N"], g["predicted_s"] * 1e6, "--", color="black", lw=1, label="model")
    axes[0, 0].set_ylabel("duration (µs)")
    axes[0, 1].plot(g["N"], g["tflops"], "o-", ms=3, color="C1", label="TFLOP/s")
    twin = axes[0, 1].twinx()
    twin.plot(g["N"], g["gbps"], "s-", ms=3, color="C2", label="GB/s")
    axes[0, 1].set_ylabel("TFLOP/s", color="C1")
    twin.set_ylabel("GB/s (minimum bytes)", color="C2")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N")
        ax.grid(True, which="both", alpha=0.25)
    axes[0, 0].legend(fontsize=8)
    return fig


def plot_predicted_vs_measured(frames: Mapping[str, Any], source: str):
    """Measured against predicted duration for every row with a prediction; the title gives the error."""
    from .model import prediction_error

    parts = {k: f for k, f in frames.items() if f is not None and len(f) and "predicted_s" in f}
    if not parts:
        _no_data(None, source)
        return None
    fig, axes = _figure(1, 1, (6, 5), "Model against measurement", source)
    ax = axes[0, 0]
    both = []
    for i, (name, f) in enumerate(parts.items()):
        f = f[f["predicted_s"].notna()]
        both.append(f)
        ax.loglog(f["predicted_s"] * 1e6, f["time_s"] * 1e6, "o", ms=3, color=f"C{i}", label=name, alpha=0.7)
    import pandas as pd

    allrows = pd.concat(both)
    err = prediction_error(allrows["time_s"], allrows["predicted_s"])
    lo = min(allrows["time_s"].min(), allrows["predicted_s"].min()) * 1e6 / 1.5
    hi = max(allrows["time_s"].max(), allrows["predicted_s"].max()) * 1e6 * 1.5
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, label="measured = predicted")
    ax.set_xlabel("predicted (µs)")
    ax.set_ylabel("measured (µs)")
    ax.set_title(f"median |error| {err['median_abs']:.0%}, 90th percentile {err['p90_abs']:.0%} "
                 f"({err['n']} GEMMs)", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    return fig


def plot_timers(frame, source: str):
    """Each case's time under perfkit, perfkit with CUDA graphs, do_bench and torch's Timer."""
    if _no_data(frame, source):
        return None
    fig, axes = _figure(1, 1, (9, 4), "The same kernels under three timers", source)
    ax = axes[0, 0]
    tools = [("perfkit_time_s", "perfkit.bench"), ("perfkit_graph_time_s", "perfkit.bench, CUDA graph"),
             ("triton_do_bench_s", "triton do_bench"), ("torch_timer_s", "torch Timer")]
    tools = [(col, name) for col, name in tools if frame[col].notna().any()]  # a CPU run has no GPU-only tools
    width = 0.8 / len(tools)
    x = np.arange(len(frame))
    for j, (col, name) in enumerate(tools):
        ax.bar(x + j * width, frame[col] * 1e6, width, label=name)
    ax.set_xticks(x + 0.4 - width / 2, frame["case"], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("median time per call (µs)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.25)
    return fig


def plot_waves(frame, source: str):
    """Launch duration against the number of blocks, with the wave boundaries marked."""
    if _no_data(frame, source):
        return None
    wave = int(frame["wave_size"].iloc[0])
    fig, axes = _figure(1, 1, (8, 3.8), f"Waves: {int(frame['sms'].iloc[0])} SMs × "
                        f"{int(frame['blocks_per_sm'].iloc[0])} block(s) per SM = {wave} blocks per wave", source)
    ax = axes[0, 0]
    g = frame.sort_values("blocks")
    ax.plot(g["blocks"], g["time_s"] * 1e6, "o-", ms=4, label="measured")
    one = g.loc[g["waves"] == 1, "time_s"].median()
    ax.step(g["blocks"], g["waves"] * one * 1e6, where="pre", color="black", lw=1, ls="--",
            label="waves × one-wave time")
    for k in range(1, int(g["waves"].max()) + 1):
        ax.axvline(k * wave, color="gray", lw=0.6, ls=":")
    ax.set_xlabel("blocks launched (dotted: multiples of the wave size)")
    ax.set_ylabel("duration (µs)")
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=8)
    return fig


def plot_wave_model(sms: int, source: str, *, blocks_per_sm: int = 1, max_waves: int = 4):
    """The wave model alone: waves and SM utilization against the number of blocks launched."""
    sms, blocks_per_sm = positive_int("sms", sms), positive_int("blocks_per_sm", blocks_per_sm)
    wave = sms * blocks_per_sm
    blocks = np.arange(1, max_waves * wave + 1)
    waves = -(-blocks // wave)
    fig, axes = _figure(1, 2, (10, 3.5), f"Wave model: {sms} SMs × {blocks_per_sm} block(s) per SM", source)
    axes[0, 0].step(blocks, waves, where="post")
    axes[0, 0].set_ylabel("waves (∝ duration of equal blocks)")
    axes[0, 1].plot(blocks, blocks / (waves * wave), color="C1")
    axes[0, 1].set_ylabel("SM utilization")
    for ax in axes[0]:
        ax.set_xlabel("blocks launched")
        ax.grid(True, alpha=0.25)
    return fig
