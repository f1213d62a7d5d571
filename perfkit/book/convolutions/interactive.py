"""Interactive figures of chapter 05_convolutions (see :mod:`perfkit.interactive`).

- :func:`channels_figure`: a slider over the channels (C = K) of a ResNet-50 3×3 layer; the GEMM
  model's TFLOP/s of the three implicit GEMMs (forward, dgrad, wgrad) against C, and each pass's
  predicted time at the chosen C; ``conv_channels`` measurements (forward) beside them.
- :func:`deepbench_figure`: a menu over DeepBench's training convolutions; for each pass the
  published V100 time, the GEMM model's time on a V100 and on a current GPU, and our measurement.

Every time is computed here by :func:`perfkit.book.convolutions.analysis.pass_s` (the GEMM model's
:func:`perfkit.explain_gemm` of each pass's GEMM, :func:`perfkit.conv_gemms`, with the convolution's tensors
read once: :func:`perfkit.conv_model.implicit_gemm_s`); the page only switches between the states. Times are seconds, throughput TFLOP/s.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..._validate import frame_or_none, positive_int
from ...devices import DeviceSpec, device_spec, resolve_spec
from ...dtypes import canonical_dtype
from ...gemm_model import GemmPrediction, explain_gemm
from ...meta import FrameMeta
from ...provenance import modelled, published_counterparts, source_of
from ...shapes import conv_gemms
from ...units import format_time
from ..frames import spec_of
from ..interactive import InteractiveFigure, State, footnote_px, heading, rounded, with_menu, with_slider
from ...conv_model import CONV_LAYOUTS
from .analysis import DB_COLUMNS, PHASES, channel_points, conv_flops, conv_shape, db_shape, pass_s
from .experiments import DEEPBENCH_CONVS

__all__ = ["FIGURES", "MENU_ENTRY_PX", "RESNET_3X3", "channel_states", "channels_figure", "deepbench_figure",
           "deepbench_layers", "menu_height", "pass_predictions", "pass_times", "title_px"]

#: The layer of the chapter's §2 (and of ``conv_channels`` on a GPU): a 3×3, stride-1 convolution with
#: padding 1 on 56×56 images at batch 32 (ResNet-50's conv2_x); C = K is what the slider moves.
RESNET_3X3: dict[str, int] = dict(batch=32, size=56, filter=3)
_COLOURS = {"forward": "#1f77b4", "dgrad": "#ff7f0e", "wgrad": "#2ca02c"}
_NAMES = {"forward": "forward", "dgrad": "dgrad (input gradient)", "wgrad": "wgrad (weight gradient)"}


def channel_states() -> list[int]:
    """The slider's C = K values: those ``conv_channels`` measures on a GPU (around 64, 128 and 256) and
    every multiple of 32 up to 320, with 16."""
    return sorted(set(channel_points()) | set(range(32, 321, 32)) | {16})


def _spec(spec: Any, param: str = "spec") -> DeviceSpec:
    return resolve_spec(spec, param=param, none_ok=False)


def _gpu_frame(frame: Any, param: str, columns: Sequence[str]) -> pd.DataFrame | None:
    """``frame`` if it is a GPU frame (live, recorded or published) with ``columns``; None stays None."""
    if frame_or_none(param, frame) is None:
        return None
    if FrameMeta.of(frame).device_kind == "cpu":
        raise ValueError(f"{param} was measured on a CPU; these figures set GPU data against a GPU's model, "
                         "so pass a GPU frame (live or recorded) or None")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{param} lacks the columns {missing}; pass the frame of its experiment")
    return frame


def _model_spec(spec: Any, frame: pd.DataFrame | None, param: str) -> tuple[DeviceSpec, pd.DataFrame | None]:
    """(the GPU to model, the frame to draw): ``spec``, by default the frame's GPU, else the H100.
    ``ValueError`` if ``spec`` is not the frame's GPU; a frame from a GPU perfkit has no datasheet for is
    drawn only beside an explicit ``spec`` (without one it is left out, with a warning)."""
    measured = spec_of(frame)
    if spec is None and frame is not None and measured is None:
        warnings.warn(f"{param}: its GPU is not in perfkit's table, so it is not drawn beside the H100's model; "
                      "pass spec= to say which GPU to model", stacklevel=3)
        return device_spec("H100-SXM"), None
    chosen = _spec(spec) if spec is not None else measured or device_spec("H100-SXM")
    if measured is not None and measured.name != chosen.name:
        raise ValueError(f"spec is {chosen.name} but {param} was measured on {measured.name}: a measurement is "
                         "drawn only beside the model for its own GPU (leave spec=None)")
    return chosen, frame


def pass_predictions(channels: int, spec: Any = "H100-SXM", dtype: str = "float16", *, batch: int = 32,
                     size: int = 56, filter: int = 3) -> dict[str, GemmPrediction]:
    """The GEMM model's view of each pass of a ``filter``×``filter`` convolution with C = K = ``channels`` on
    ``size``² images at ``batch`` (stride 1, 'same' padding): pass → :func:`perfkit.explain_gemm` (its tiles,
    waves and bound; the pass's time is :func:`pass_times`')."""
    C, spec = positive_int("channels", channels), _spec(spec)
    f = positive_int("filter", filter)
    s = conv_shape(positive_int("batch", batch), C, positive_int("size", size), size, C, f, f, 1, f // 2)
    gemms = conv_gemms(s["N"], C, s["H"], s["W"], C, f, f, 1, f // 2)
    return {p: explain_gemm(*gemms[p], canonical_dtype(dtype), spec, layout=CONV_LAYOUTS[p]) for p in PHASES}


def pass_times(channels: int, spec: Any = "H100-SXM", dtype: str = "float16", *, batch: int = 32,
               size: int = 56, filter: int = 3) -> dict[str, float]:
    """Seconds of each pass of the layer of :func:`pass_predictions` as an implicit GEMM
    (:func:`perfkit.book.convolutions.analysis.pass_s`: the GEMM's math, the tensors read once)."""
    C, spec, f = positive_int("channels", channels), _spec(spec), positive_int("filter", filter)
    s = conv_shape(positive_int("batch", batch), C, positive_int("size", size), size, C, f, f, 1, f // 2)
    return {p: pass_s(s, p, canonical_dtype(dtype), spec) for p in PHASES}


def _tflop_s(channels: int, t: float, batch: int, size: int, f: int) -> float:
    return conv_flops(conv_shape(batch, channels, size, size, channels, f, f, 1, f // 2)) / t / 1e12


def _nice_step(span: float) -> float:
    raw = span / 4
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _time_axis(top: float) -> dict[str, Any]:
    """A linear seconds axis from 0 to ``top`` with ticks labelled by :func:`perfkit.units.format_time`."""
    step = _nice_step(top)
    ticks = [k * step for k in range(int(top / step) + 1)]
    return {"range": [0, top], "tickvals": rounded(ticks), "ticktext": [format_time(t) if t else "0" for t in ticks]}


def _log_time_axis(low: float, high: float) -> dict[str, Any]:
    """A log seconds axis spanning ``low`` … ``high`` (seconds), ticks at 1, 2, 5 × 10ⁿ by format_time."""
    ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
             for m in (1, 2, 5) if low <= m * 10.0 ** e <= high]
    return {"range": [math.log10(low), math.log10(high)], "tickvals": rounded(ticks),
            "ticktext": [format_time(t) for t in ticks]}


def _measured_channels(frame: pd.DataFrame | None, dtype: str, batch: int, size: int, f: int) -> pd.DataFrame:
    """Median forward time and TFLOP/s per C of a ``conv_channels`` frame at this layer and dtype."""
    if frame is None:
        return pd.DataFrame(columns=["time_s", "tflops"])
    rows = frame[(frame["dtype"] == dtype) & (frame["N"] == batch) & (frame["H"] == size) & (frame["R"] == f)]
    return rows.groupby("C")[["time_s", "tflops"]].median()


#: Pixels of the title block: its top padding, and each line of the title.
_TITLE_PAD_PX, _TITLE_PX = 16, 20


def _heading(title: str, parts: dict[str, Any]) -> dict:
    """:func:`heading` with one footnote line per source of ``parts`` (name → Source or None, None
    skipped; a name that starts with ``_`` is not printed), the title hung from the figure's top edge
    so that it takes the top :func:`title_px` of the figure, whatever the plot's size."""
    named = [(n, src) for n, src in parts.items() if src is not None]
    sources = named[0][1] if len(named) == 1 else \
        [str(src) if n.startswith("_") else f"{n}: {src}" for n, src in named]
    out = heading(title, sources)
    out["title"].update({"yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": _TITLE_PAD_PX}})
    return out


def title_px(title: dict) -> int:
    """Pixels from the figure's top edge to the bottom of a :func:`_heading` title (its ``"title"``)."""
    return _TITLE_PAD_PX + _TITLE_PX * (title["text"].count("<br>") + 1)


def _gemm_ticks(pred: dict[str, GemmPrediction]) -> dict[str, Any]:
    """The right panel's category labels: each pass with its GEMM's M, N and K."""
    return {"xaxis2.tickvals": list(PHASES),
            "xaxis2.ticktext": [f"<b>{p}</b><br>M {pred[p].M}<br>N {pred[p].N}<br>K {pred[p].K}" for p in PHASES]}


def channels_figure(frame: pd.DataFrame | None = None, *, spec: Any = None, dtype: str = "float16",
                    batch: int | None = None, size: int | None = None, filter: int = 3,
                    channels: Sequence[int] | None = None, active: int | None = None) -> InteractiveFigure:
    """A slider over C = K of a 3×3 layer: left, the model's TFLOP/s of each pass against C (a marker at
    the chosen C) and ``frame``'s measured forward TFLOP/s; right, each pass's predicted time and GEMM.

    ``frame``: a ``conv_channels`` frame measured on a GPU (live or recorded), or None (the model alone);
    ``batch`` and ``size`` default to the frame's, else :data:`RESNET_3X3`. ``spec``: the GPU modelled
    (default: the frame's, else the H100). ``channels``: the slider's values (default
    :func:`channel_states`). ``active``: the index of the state it opens at (default: C = 256).
    """
    frame = _gpu_frame(frame, "frame", ["C", "N", "H", "R", "dtype", "time_s", "tflops"])
    (spec, frame), dtype = _model_spec(spec, frame, "frame"), canonical_dtype(dtype)
    first = frame.iloc[0] if frame is not None and len(frame) else None
    batch = positive_int("batch", batch if batch is not None else int(first["N"]) if first is not None else 32)
    size = positive_int("size", size if size is not None else int(first["H"]) if first is not None else 56)
    f = positive_int("filter", filter)
    if isinstance(channels, (str, bytes)):
        raise TypeError(f"channels must be a list of channel counts, got {channels!r}")
    cs = channel_states() if channels is None else sorted({positive_int("channels", c) for c in channels})
    if len(cs) < 2:
        raise ValueError(f"channels must hold at least two channel counts, got {list(cs)}")
    model = {c: pass_predictions(c, spec, dtype, batch=batch, size=size, filter=f) for c in cs}
    secs = {c: pass_times(c, spec, dtype, batch=batch, size=size, filter=f) for c in cs}
    tflop_s = {p: rounded([_tflop_s(c, secs[c][p], batch, size, f) for c in cs]) for p in PHASES}
    measured = _measured_channels(frame, dtype, batch, size, f)
    has_data = len(measured) > 0
    mx = [int(c) for c in measured.index]
    dash = {"forward": "solid", "dgrad": "dot", "wgrad": "solid"}
    traces = [go.Scatter(x=cs, mode="lines+markers", name=_NAMES[p], marker={"size": 4},
                         line={"color": _COLOURS[p], "width": 3 if p == "forward" else 1.5, "dash": dash[p]},
                         selected={"marker": {"size": 12}}, unselected={"marker": {"opacity": 0.4}},
                         hovertemplate=f"{p}: C = %{{x}}, %{{y:.0f}} TFLOP/s<extra></extra>") for p in PHASES]
    traces.append(go.Scatter(x=mx, mode="markers", name="measured forward", visible=has_data,
                             marker={"symbol": "x", "size": 8, "color": "black"}, selected={"marker": {"size": 13}},
                             unselected={"marker": {"opacity": 0.5}},
                             hovertemplate="measured forward: C = %{x}, %{y:.0f} TFLOP/s<extra></extra>"))
    traces.append(go.Bar(x=list(PHASES), marker={"color": [_COLOURS[p] for p in PHASES]}, textposition="outside",
                         cliponaxis=False, xaxis="x2", yaxis="y2", showlegend=False,
                         hoverinfo="text"))
    traces.append(go.Scatter(x=["forward"], mode="markers", xaxis="x2", yaxis="y2", showlegend=False,
                             marker={"symbol": "x", "size": 12, "color": "black"}, hoverinfo="text", visible=has_data))
    states = []
    for k, c in enumerate(cs):
        pred = model[c]
        times = [secs[c][p] for p in PHASES]
        t_meas = float(measured.loc[c, "time_s"]) if c in measured.index else None
        hover = [f"{p}: GEMM {pred[p].M}×{pred[p].N}×{pred[p].K}, {format_time(secs[c][p])}, "
                 f"{tflop_s[p][k]:.0f} TFLOP/s; {pred[p].tiles} tiles of {pred[p].tile[0]}×{pred[p].tile[1]} "
                 f"in {pred[p].waves} waves, {pred[p].bound}-bound" for p in PHASES]
        fwd = pred["forward"]
        layout = {**{f"yaxis2.{key}": v for key, v in _time_axis(max(times + [t_meas or 0.0]) * 1.25).items()},
                  **_gemm_ticks(pred),
                  "annotations[0].text": f"C = K = {c}: the forward GEMM is {fwd.tiles} tiles of "
                                         f"{fwd.tile[0]}×{fwd.tile[1]} in {fwd.waves} waves on {spec.sms} SMs"}
        states.append(State(f"{c}", [
            *({"y": tflop_s[p], "selectedpoints": [k], "text": None, "hovertext": None} for p in PHASES),
            {"y": rounded(measured["tflops"]), "selectedpoints": [mx.index(c)] if c in mx else [], "text": None,
             "hovertext": None},
            {"y": rounded(times), "selectedpoints": None, "text": [format_time(t) for t in times],
             "hovertext": hover},
            {"y": rounded([t_meas]), "selectedpoints": None, "text": None,
             "hovertext": [f"measured forward: {format_time(t_meas)}" if t_meas else ""]},
        ], layout))
    title = f"The implicit GEMMs of a {f}×{f} layer as C = K changes: {size}², batch {batch}, {dtype}"
    lines = {"model": modelled(spec), "measured forward": source_of(frame) if has_data else None}
    if not has_data:
        title += " (model only)"
    head = _heading(title, lines)  # the C = K annotation sits between the title and the plot
    layout = {**head, "height": 460, "margin": {"t": title_px(head["title"]) + 30, "b": 135},
              "xaxis": {"domain": [0, 0.55], "title": {"text": "C = K (channels)"}},
              "yaxis": {"title": {"text": "TFLOP/s"}, "rangemode": "tozero"},
              "xaxis2": {"domain": [0.66, 1], "anchor": "y2"},
              "yaxis2": {"anchor": "x2", "title": {"text": "predicted time per pass"}},
              "legend": {"x": 0.01, "y": 0.99, "xanchor": "left", "yanchor": "top", "orientation": "v",
                         "bgcolor": "rgba(255,255,255,0.8)"},
              "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.0, "xanchor": "left",
                               "yanchor": "bottom", "showarrow": False}]}
    start = (cs.index(256) if 256 in cs else 0) if active is None else active
    fig = with_slider(traces, states, prefix="C = K = ", active=start, layout=layout)
    alt = (f"Left: the GEMM model's TFLOP/s of a convolution's forward, dgrad and wgrad GEMMs on {spec.name} "
           f"against the channel count C = K of a {f}×{f} layer ({size}² images, batch {batch}, {dtype}); "
           "forward and dgrad coincide when C = K" + ("; crosses: measured forward" if has_data else "")
           + ". Right: each pass's predicted time and GEMM shape. The slider sets C: throughput climbs with C "
           "and drops where one more channel needs a new column of tiles, as from 256 to 257, and where the "
           "channels stop filling whole 16-byte vectors, as from 64 to 63.")
    return InteractiveFigure(fig, alt=alt, name="conv-channels-gemms")


_DB_PASSES = {"time_s": "forward", "bwd_inputs_time_s": "dgrad", "bwd_params_time_s": "wgrad"}


def deepbench_layers() -> list[tuple[int, ...]]:
    """The DeepBench convolutions of the menu: those ``conv_deepbench`` measures, in its order."""

    return list(DEEPBENCH_CONVS)


def _db_label(t: tuple[int, ...]) -> str:
    W, H, C, N, K, R, S, _, _, sh, _ = t
    return f"{W}×{H}, C {C}→K {K}, {R}×{S}/{sh}, N {N}"


def _db_times(frame: pd.DataFrame | None, dtype: str) -> dict[tuple, dict[str, float]]:
    """Fastest time of each pass per DeepBench shape of ``frame`` in ``dtype`` (NaN where not measured)."""
    if frame is None:
        return {}
    rows = frame[frame["dtype"] == dtype] if "dtype" in frame else frame
    best = rows.groupby(DB_COLUMNS)[[c for c in _DB_PASSES if c in rows]].min()
    return {tuple(int(v) for v in k): r.to_dict() for k, r in best.iterrows()}


#: Pixels a Plotly drop-down entry takes when its menu is open (30 px at least, a gap and a border). The
#: menu's header sits just above the plot area, so the open list starts about where the plot does.
MENU_ENTRY_PX = 35


def menu_height(top: int, entries: int, *, least: int = 540) -> int:
    """The height (pixels) of a figure whose drop-down menu (with ``entries`` entries) opens just above
    the plot area, ``top`` pixels below the figure's top: tall enough that the open list ends inside the
    figure, so every entry can be picked; at least ``least``."""
    return max(least, top + MENU_ENTRY_PX * positive_int("entries", entries) + 20)


def deepbench_figure(published: pd.DataFrame | None = None, ours: pd.DataFrame | None = None, *,
                     then_spec: Any = "V100-SXM2", now_spec: Any = None, dtype: str = "float16",
                     layers: Sequence[tuple[int, ...]] | None = None, active: int = 0) -> InteractiveFigure:
    """A menu over DeepBench convolutions: per pass, the ``published`` time (DeepBench's V100 frame, from
    :func:`perfkit.published_counterparts`), the GEMM model's time on ``then_spec`` and on ``now_spec``
    (default: ``ours``'s GPU, else the H100), and ``ours`` (a ``conv_deepbench`` frame from a GPU), on a
    log axis of seconds. Without frames the model's bars alone. ``layers``: DeepBench tuples (default
    :func:`deepbench_layers`); ``active``: the index of the layer it opens at."""
    published = _gpu_frame(published, "published", DB_COLUMNS + ["time_s"])
    ours = _gpu_frame(ours, "ours", DB_COLUMNS + ["time_s"])
    old, dtype = _spec(then_spec, "then_spec"), canonical_dtype(dtype)
    if published is not None and (spec_of(published) or old).name != old.name:
        raise ValueError(f"published was measured on {spec_of(published).name}, then_spec is {old.name}: "
                         "pass then_spec= the published GPU")
    new, ours = _model_spec(now_spec, ours, "ours")
    if isinstance(layers, (str, bytes)):
        raise TypeError(f"layers must be a list of DeepBench tuples, got {layers!r}")
    shapes = deepbench_layers() if layers is None else [tuple(t) for t in layers]
    convs = [db_shape(t, "layers") for t in shapes]
    if len(shapes) < 2:
        raise ValueError(f"layers must hold at least two DeepBench shapes, got {len(shapes)}")
    bars: list[tuple[str, str, Callable[[tuple, dict], list[float]]]] = []  # name, colour, times of a layer
    sources: dict[str, Any] = {}
    if published is not None:
        then_t = _db_times(published, dtype)
        bars.append((f"DeepBench, {old.name}", "#1f77b4", lambda t, s: _row_times(then_t, t)))
        sources["_published"] = source_of(published)
    for spec, colour in ((old, "#9ecae1"), (new, "#a1d99b")):
        bars.append((f"GEMM model, {spec.name}", colour,
                     lambda t, s, spec=spec: [pass_s(s, p, dtype, spec) for p in PHASES]))
        sources[f"_{spec.name}"] = modelled(spec)
    if ours is not None:
        now_t = _db_times(ours, dtype)
        bars.append((f"ours, {new.name}", "#2ca02c", lambda t, s: _row_times(now_t, t)))
        sources["ours"] = source_of(ours)
    traces = [go.Bar(x=list(PHASES), name=n, marker={"color": c}, hoverinfo="text") for n, c, _ in bars]
    states = []
    for t, s in zip(shapes, convs):
        ys = [times(t, s) for _, _, times in bars]
        flat = [v for y in ys for v in y if not math.isnan(v)]
        layout = {f"yaxis.{k}": v for k, v in _log_time_axis(min(flat) / 1.5, max(flat) * 1.5).items()}
        note = "pass (its implicit GEMM)"
        if published is not None:
            ratios = [m / p for m, p in zip(ys[0], ys[1])]
            note = f"DeepBench ÷ GEMM model on the {old.name}: " + ", ".join(
                f"{p} {'—' if math.isnan(r) else f'{r:.2f}×'}" for p, r in zip(PHASES, ratios))
        layout["xaxis.title.text"] = note
        states.append(State(_db_label(t), [
            {"y": rounded(y), "hovertext": [f"{name}, {p}: " + ("not measured" if math.isnan(v) else format_time(v))
                                            for p, v in zip(PHASES, y)]}
            for (name, _, _), y in zip(bars, ys)], layout))
    title = f"DeepBench's training convolutions against the GEMM model, per pass ({dtype})"
    if published is None and ours is None:
        title += " (model only)"
    head = _heading(title, sources)
    top = title_px(head["title"]) + 45  # the menu's button sits between the title block and the plot
    height = menu_height(top + footnote_px(head["footnote"]), len(states))  # the footnote's room is the plot's
    bottom = 110  # the pass names, the note under them and the legend's one or two rows
    plot = height - top - bottom - footnote_px(head["footnote"])
    layout = {**head, "barmode": "group", "height": height,
              "margin": {"t": top, "b": bottom}, "yaxis": {"type": "log", "title": {"text": "time per pass"}},
              "xaxis": {"title": {"text": ""}}, "legend": {"y": -64 / plot, "yanchor": "top"}}
    fig = with_menu(traces, states, active=active, layout=layout)
    alt = ("Grouped bars, on a log time axis, of the forward, dgrad and wgrad passes of one DeepBench "
           "convolution: " + ("DeepBench's published V100 time, " if published is not None else "")
           + f"the GEMM model's time on the {old.name} and on the {new.name}"
           + (", and our measurement" if ours is not None else "") + ". The menu picks the layer: the model "
           "tracks most layers within tens of percent and is far too fast for first layers with one or three "
           "channels.")
    return InteractiveFigure(fig, alt=alt, name="conv-deepbench-layers")


def _row_times(times: dict[tuple, dict[str, float]], t: tuple) -> list[float]:
    """The three pass times of shape ``t`` in ``times`` (from :func:`_db_times`), NaN where missing."""
    row = times.get(tuple(int(v) for v in t), {})
    return [float(row.get(col, math.nan)) for col in _DB_PASSES]


def _v100_published() -> pd.DataFrame | None:
    frames = published_counterparts("conv_deepbench", gpus=("V100-SXM2",))
    return next(iter(frames.values()), None)


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {
    "channels": channels_figure,
    "deepbench": lambda: deepbench_figure(_v100_published()),
}
