"""Interactive figures of chapter 04_recurrent (see perfkit.interactive).

:func:`recurrent_step`: the recurrent GEMM of one time step, ``(gates·H) × batch × H``, against
the minibatch, with a slider over the hidden size H. Every curve is perfkit's GEMM model
(:func:`perfkit.gemm_model.explain_gemm`: tiles, waves, bound, time); DeepBench's published GEMMs
and RNN layers of the same shape, and a live or recorded ``rnn_batch`` frame, are drawn where
they exist. A note under the plot says whether U fits on chip for a persistent kernel
(:func:`perfkit.kernels.cupy_rnn.persistent_rnn_plan`). Times are seconds, throughput TFLOP/s.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..._validate import one_of, positive_int
from ...devices import DeviceSpec, resolve_spec
from ...dtypes import canonical_dtype, itemsize
from ...gemm_model import GemmPrediction, explain_gemm
from ...kernels.cupy_rnn import max_persistent_hidden, persistent_rnn_plan
from ...provenance import Source, caption, models_of, published_counterparts, published_together, source_of
from ...roofline import gemm_flops
from ...shapes import RNN_GATES, rnn_gemms
from ...units import format_time
from ..interactive import InteractiveFigure, State, footnote_px, heading, rounded, with_slider

__all__ = ["BATCHES", "FIGURES", "HIDDEN_GRID", "MODEL_SPECS", "SMEM_PER_BLOCK_KIB", "recurrent_step",
           "step_prediction"]

#: The minibatches of the curves (those of the ``rnn_batch`` experiment on a GPU).
BATCHES: tuple[int, ...] = (1, 2, 4, 8, 9, 16, 24, 32, 48, 64, 96, 125, 128, 160, 192, 256)
#: The hidden sizes of the slider, before the published and measured ones are added.
HIDDEN_GRID: tuple[int, ...] = tuple(range(256, 4097, 256))
#: The devices whose model curves are drawn by default: now and then.
MODEL_SPECS: tuple[str, ...] = ("H100-SXM", "V100-SXM2")
#: Shared memory one block may use (the opt-in limit), KiB, by compute capability in the CUDA
#: C++ Programming Guide: what a persistent kernel can hold per SM.
SMEM_PER_BLOCK_KIB: dict[str, int] = {"H100-SXM": 227, "H100-PCIe": 227, "H200": 227, "A100-SXM4-40GB": 163,
                                      "A100-SXM4-80GB": 163, "V100-SXM2": 96, "T4": 64, "P100-PCIe": 48,
                                      "P100-SXM2": 48}
_MAX_STATES = 60
_NN = "NN"
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def step_prediction(cell: str, hidden: int, batch: int, spec: DeviceSpec | str,
                    dtype: Any = "float16") -> GemmPrediction:
    """:func:`explain_gemm` of one step's recurrent GEMM ``rnn_gemms(cell, hidden, hidden, batch, 1)``."""
    spec = resolve_spec(spec, none_ok=False)
    M, N, K = rnn_gemms(cell, hidden, hidden, batch, 1)["recurrent"]
    return explain_gemm(M, N, K, dtype, spec)


def _specs(specs: Any) -> list[DeviceSpec]:
    if isinstance(specs, (str, DeviceSpec)):
        specs = [specs]
    if not isinstance(specs, Sequence) or not 1 <= len(specs) <= 3:
        raise TypeError(f"specs must be one to three device names or DeviceSpecs such as {list(MODEL_SPECS)}, "
                        f"got {specs!r}")
    return [resolve_spec(s, param="each of specs", none_ok=False) for s in specs]


def _frames(name: str, frames: Any, needed: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """The non-empty frames of a ``name → frame`` mapping, each checked for ``needed`` columns and metadata."""
    if frames is None:
        return {}
    if not isinstance(frames, Mapping):
        raise TypeError(f"{name} must be a mapping of name → DataFrame or None "
                        f"(e.g. perfkit.published_counterparts(...)), got {type(frames).__name__}")
    out = {}
    for key, f in frames.items():
        if f is None:
            continue
        if not isinstance(f, pd.DataFrame):
            raise TypeError(f"{name}[{key!r}] must be a DataFrame or None, got {type(f).__name__}")
        lacking = [c for c in needed if c not in f.columns]
        if lacking:
            raise ValueError(f"{name}[{key!r}] lacks the column(s) {lacking}; it needs {list(needed)}")
        if source_of(f) is None:
            raise ValueError(f"{name}[{key!r}] carries no metadata (attrs['meta']), so its source is unknown")
        if len(f):
            out[str(key)] = f
    return out


def _gemm_points(f: pd.DataFrame, cell: str, h: int, dtype: str) -> pd.DataFrame:
    """Published GEMMs of one step's shape, M = gates·H and K = H, stored as is (NN), batch ≤ 256."""
    M = RNN_GATES[cell] * h
    rows = f[(f["M"] == M) & (f["K"] == h) & (f["dtype"] == dtype) & (f["layout"] == _NN) & (f["N"] <= 256)]
    rows = rows.sort_values("N")
    flops = [gemm_flops(M, n, h) for n in rows["N"]]
    tflop_s = rows["tflops"] if "tflops" in rows else pd.Series(flops, index=rows.index) / rows["time_s"] / 1e12
    text = [f"{M}×{n}×{h}: {format_time(t)}" for n, t in zip(rows["N"], rows["time_s"])]
    return pd.DataFrame({"x": rows["N"].to_numpy(), "y": tflop_s.to_numpy(), "text": text})


def _layer_points(f: pd.DataFrame, cell: str, h: int, dtype: str) -> pd.DataFrame:
    """Published whole layers of this cell and H: the recurrent math of T steps ÷ the forward time
    (the fastest T per batch)."""
    rows = f[(f["cell"].replace({"vanilla": "rnn"}) == cell) & (f["hidden"] == h) & (f["dtype"] == dtype)]
    if not len(rows):
        return pd.DataFrame({"x": [], "y": [], "text": []})
    M, _, K = rnn_gemms(cell, h, h, 1, 1)["recurrent"]
    step = rows["time_s"] / rows["timesteps"]
    rows = rows.assign(step_s=step, y=[gemm_flops(M, b, K) / s / 1e12 for b, s in zip(rows["batch"], step)])
    best = rows.sort_values("y").groupby("batch").tail(1).sort_values("batch")
    text = [f"{cell} H={h}, batch {b}, T={t}: {format_time(s)} per step"
            for b, t, s in zip(best["batch"], best["timesteps"], best["step_s"])]
    return pd.DataFrame({"x": best["batch"].to_numpy(), "y": best["y"].to_numpy(), "text": text})


def _our_points(f: pd.DataFrame, cell: str, h: int, dtype: str) -> pd.DataFrame:
    """A measured frame's recurrent GEMMs of this cell and H (layout NN where it has one), per batch."""
    keep = (f["cell"] == cell) & (f["hidden"] == h)
    if "layout" in f:
        keep &= f["layout"] == _NN
    if "dtype" in f:
        keep &= f["dtype"] == dtype
    g = f[keep].groupby("batch")[["tflops", "time_s"]].median().reset_index()
    text = [f"batch {b}: {format_time(t)}" for b, t in zip(g["batch"], g["time_s"])]
    return pd.DataFrame({"x": g["batch"].to_numpy(), "y": g["tflops"].to_numpy(), "text": text})


def _on_chip_note(cell: str, h: int, dtype: str, specs: list[DeviceSpec]) -> str:
    """One line on U: its size, and whether a persistent kernel could keep it on each device's chip."""
    g = RNN_GATES[cell]
    mib = g * h * h * itemsize(dtype) / 2**20
    head = f"U is {g * h}×{h} in {dtype}, {mib:.1f} MiB."
    parts = []
    for s in specs:
        kib = SMEM_PER_BLOCK_KIB.get(s.name)
        if kib is None or not s.sms:
            continue
        largest = max_persistent_hidden(sms=s.sms, smem_per_block_bytes=kib * 1024)
        if cell == "rnn":
            try:
                plan = persistent_rnn_plan(h, 1, sms=s.sms, smem_per_block_bytes=kib * 1024)
                parts.append(f"{s.name}: {plan.blocks} blocks × {plan.rows_per_block} rows")
            except ValueError:
                parts.append(f"{s.name}: does not fit (H ≤ {largest})")
        else:  # U holds as many weights as a vanilla U of sqrt(g)·H
            parts.append(f"{s.name}: {'yes' if g * h * h <= largest * largest else 'no'} (H ≤ {largest})")
    if not parts:
        return head
    if cell == "rnn":
        what = "Persistent kernel, U in shared memory:"
    else:
        what = (f"perfkit's persistent kernel runs vanilla cells only; U has the weights of a vanilla U of "
                f"H = {math.isqrt(g * h * h - 1) + 1}. On chip?")
    return "<br>".join(textwrap.wrap(f"{head} {what} {'; '.join(parts)}.", 100))


def _state(cell: str, h: int, dtype: str, specs: list[DeviceSpec], gemms: dict, layers: dict,
           ours: pd.DataFrame | None) -> State:
    traces: list[dict] = []
    util = []
    for s in specs:
        preds = [step_prediction(cell, h, b, s, dtype) for b in BATCHES]
        text = [f"{p.M}×{p.N}×{p.K}: tile {p.tile[0]}×{p.tile[1]}, {p.tiles} tiles, {p.waves} "
                f"wave{'s' if p.waves > 1 else ''} on {s.sms} SMs, {p.bound}-bound, {format_time(p.predicted_s)}"
                for p in preds]
        traces.append({"y": rounded(p.achieved_flop_s / 1e12 for p in preds), "text": text})
        util.append({"y": rounded((100 * p.utilization for p in preds), 3)})
    traces += util
    points = [_gemm_points(f, cell, h, dtype) for f in gemms.values()]
    points += [_layer_points(f, cell, h, dtype) for f in layers.values()]
    if ours is not None:
        points.append(_our_points(ours, cell, h, dtype))
    traces += [{"x": p["x"].tolist(), "y": rounded(p["y"]), "text": p["text"].tolist()} for p in points]
    return State(str(h), traces, {"annotations[0].text": _on_chip_note(cell, h, dtype, specs)})


def _hidden_sizes(hidden: Any, cell: str, gemms: dict, layers: dict, ours: pd.DataFrame | None) -> list[int]:
    if hidden is not None:
        if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
            raise TypeError(f"hidden must be a list of hidden sizes such as [1024, 2560], got {hidden!r}")
        sizes = {positive_int("hidden", h) for h in hidden}
    else:
        g = RNN_GATES[cell]
        sizes = set(HIDDEN_GRID)
        for f in gemms.values():
            sizes |= {int(k) for m, k in zip(f["M"], f["K"]) if m == g * k}
        for f in layers.values():
            sizes |= set(f.loc[f["cell"].replace({"vanilla": "rnn"}) == cell, "hidden"].astype(int))
        if ours is not None:
            sizes |= set(ours.loc[ours["cell"] == cell, "hidden"].astype(int))
    if not 2 <= len(sizes) <= _MAX_STATES:
        raise ValueError(f"hidden must give 2 to {_MAX_STATES} distinct sizes (one slider position each), "
                         f"got {len(sizes)}")
    return sorted(sizes)


def _source_lines(specs: Sequence[DeviceSpec], published: Sequence[Source | None]) -> list[str]:
    """Where the curves and the markers come from, in one short line each: ``"curves: model of
    H100-SXM and V100-SXM2"``, and the published frames' sources with one publisher said once
    (:func:`perfkit.provenance.published_together`)."""
    lines = ["curves: " + models_of(specs)]
    markers = published_together(published)
    return lines + (["markers: " + "; ".join(markers)] if markers else [])


def recurrent_step(frame: pd.DataFrame | None = None, source: Source | str | None = None, *,
                   gemms: Mapping[str, pd.DataFrame | None] | None = None,
                   layers: Mapping[str, pd.DataFrame | None] | None = None, cell: str = "rnn",
                   specs: Sequence[str | DeviceSpec] = MODEL_SPECS, dtype: Any = "float16",
                   hidden: Sequence[int] | None = None, start: int = 2560) -> InteractiveFigure:
    """TFLOP/s of one step's recurrent GEMM ``(gates·H) × batch × H`` against the minibatch, a
    slider over H (the model's tiles, waves, bound and time on hovering), and how full the model's
    waves are.

    ``frame``: a live or recorded ``rnn_batch`` (or ``rnn_hidden``) frame, drawn where its cell and
    H match (layout NN); ``source`` only for a frame without metadata. ``gemms``: published GEMM
    frames (``published_counterparts("gemm_sizes")``); ``layers``: published RNN layers
    (``published_counterparts("rnn_cudnn")``), drawn as their recurrent math per step ÷ the
    time per step. ``specs``: one to three devices modelled. ``hidden``: the slider's H (default
    :data:`HIDDEN_GRID` plus the published and measured ones); it opens at the H nearest ``start``.
    """
    cell = one_of("cell", cell, tuple(RNN_GATES))
    dtype, specs = canonical_dtype(dtype), _specs(specs)
    start = positive_int("start", start)
    ours = None
    if frame is not None:
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be an rnn_batch DataFrame or None, got {type(frame).__name__}")
        lacking = [c for c in ("cell", "hidden", "batch", "tflops", "time_s") if c not in frame.columns]
        if lacking:
            raise ValueError(f"frame lacks the column(s) {lacking}; pass an rnn_batch or rnn_hidden frame")
        if source is not None and not isinstance(source, (Source, str)):
            raise TypeError(f"source must be a perfkit.Source, a string or None, got {type(source).__name__}")
        own = source_of(frame) or source
        if own is None:
            raise ValueError("frame carries no metadata (attrs['meta']): pass source= to say where it comes from")
        ours = frame if len(frame) else None
    gemms = _frames("gemms", gemms, ("M", "N", "K", "layout", "dtype", "time_s"))
    layers = _frames("layers", layers, ("cell", "hidden", "batch", "timesteps", "dtype", "time_s"))
    sizes = _hidden_sizes(hidden, cell, gemms, layers, ours)
    states = [_state(cell, h, dtype, specs, gemms, layers, ours) for h in sizes]

    traces: list[Any] = []
    for i, s in enumerate(specs):
        traces.append(go.Scatter(x=list(BATCHES), mode="lines+markers", name=f"{s.name} (GEMM model)",
                                 line={"color": _COLOURS[i]},
                                 marker={"size": 5}, hovertemplate="%{text}<extra>%{fullData.name}</extra>",
                                 legendgroup=s.name))
    for i, s in enumerate(specs):
        traces.append(go.Scatter(x=list(BATCHES), mode="lines+markers", name=f"{s.name}: waves filled",
                                 line={"color": _COLOURS[i], "dash": "dot"}, marker={"size": 4},
                                 xaxis="x2", yaxis="y2", legendgroup=s.name, showlegend=False,
                                 hovertemplate="batch %{x}: waves %{y}% full<extra>" + s.name + "</extra>"))
    named = [(f"{k}: GEMM", "triangle-up") for k in gemms] + [(f"{k}: layer, per step", "diamond-open")
                                                               for k in layers]
    for j, (name, symbol) in enumerate(named):
        traces.append(go.Scatter(mode="markers", name=name, marker={"size": 9, "symbol": symbol,
                                                                   "color": _COLOURS[3 + j % 4]},
                                 hovertemplate="%{text}<extra>%{fullData.name}</extra>"))
    if ours is not None:
        traces.append(go.Scatter(mode="markers", name="ours (NN)", marker={"size": 8, "color": "black"},
                                 hovertemplate="%{text}<extra>ours</extra>"))

    ys = [v for st in states for t in st.traces[:len(specs)] + st.traces[2 * len(specs):] for v in t["y"]
          if v is not None and v > 0]
    low, high = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    lines = _source_lines(specs, [source_of(f) for f in (*gemms.values(), *layers.values())])
    lines.append("ours: " + (caption([source_of(frame) or source]) if frame is not None
                             else "none given (model and published data only)"))
    rows = "H" if RNN_GATES[cell] == 1 else f"{RNN_GATES[cell]}H"
    ticks = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    axis_x = {"type": "log", "tickvals": ticks, "ticktext": [str(t) for t in ticks]}
    head = heading(f"One step's recurrent GEMM ({cell}): {rows} × batch × H, {dtype}", lines)
    top, plot, bottom = 50, 430, 286  # pixels: title, plot panels, slider + legend + note (+ the footnote)
    layout = {
        **head, "height": top + plot + bottom + footnote_px(head["footnote"]), "margin": {"t": top, "b": bottom},
        "xaxis": dict(axis_x, domain=[0, 1], anchor="y", showticklabels=False),
        "yaxis": {"type": "log", "range": [low, high], "domain": [0.36, 1.0], "title": {"text": "TFLOP/s"}},
        "xaxis2": dict(axis_x, domain=[0, 1], anchor="y2", matches="x", title={"text": "minibatch (N)"}),
        "yaxis2": {"range": [0, 105], "domain": [0.0, 0.26], "title": {"text": "waves full (%)"}},
        "legend": {"orientation": "h", "y": -150 / plot, "yanchor": "top"},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": -250 / plot,
                         "yanchor": "top", "showarrow": False, "xanchor": "left", "align": "left"}],
    }
    active = min(range(len(sizes)), key=lambda i: (abs(sizes[i] - start), sizes[i]))
    fig = with_slider(traces, states, prefix="hidden size H = ", active=active, layout=layout)
    models = " and ".join(s.name for s in specs)
    drawn = "; DeepBench's published GEMMs and layers of that shape as markers" if gemms or layers else ""
    name = {"rnn": "a vanilla RNN", "gru": "a GRU", "lstm": "an LSTM"}[cell]
    alt = (f"TFLOP/s of one time step's recurrent GEMM of {name} layer against the minibatch, "
           f"predicted by perfkit's GEMM model for {models}{drawn}"
           f"{'; our measured points in black' if ours is not None else ''}, with how full the GPU's waves "
           "of tiles are below. Moving the hidden-size slider changes the shape: a larger H gives more tiles, "
           "fuller waves and more TFLOP/s at the same minibatch, and the note says whether U still fits on chip.")
    return InteractiveFigure(fig, alt=alt, name=f"rnn-recurrent-step-{cell}")



def _default_step() -> InteractiveFigure:
    """:func:`recurrent_step` with DeepBench's published GEMMs and layers (cheap: files in data/)."""
    return recurrent_step(gemms=published_counterparts("gemm_sizes"), layers=published_counterparts("rnn_cudnn"))


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"recurrent-step": _default_step}
