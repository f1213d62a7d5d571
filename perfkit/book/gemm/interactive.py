"""Interactive figures of chapter 02_gemm (see perfkit.interactive).

:func:`waves_figure`: a slider over N for an M×N×K GEMM on one GPU. The left panel is the time
:func:`perfkit.gemm_model.predict_gemm_time` predicts against N, with forced tiles (the steps of
wave quantization) and with the library's own choice of tile and split-K; the right panel shows
how the current N's tiles fill the waves (:func:`perfkit.quantization.wave_quantization`).
Measured points of the ``gemm_waves`` experiment (live or recorded) are drawn when given.
"""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd
import plotly.graph_objects as go

from ..._validate import positive_int, tile_pair
from ...calibration import calibrated
from ...devices import DeviceSpec, current_device, device_spec, resolve_spec
from ...meta import FrameMeta
from ...dtypes import canonical_dtype
from ...gemm_model import explain_gemm, predict_gemm_time
from ...provenance import Source, caption, missing, source_of
from ...quantization import cdiv, wave_quantization
from ...units import format_time
from ..interactive import InteractiveFigure, State, heading, rounded, with_slider

__all__ = ["FIGURES", "default_rows", "waves_figure"]

#: The GPU modelled when no frame (or one from a GPU outside perfkit's table) says which.
REFERENCE = "H100-SXM"
#: Most slider positions; the N step grows (in multiples of :data:`N_STEP`) to stay under it.
MAX_STATES = 60
#: The finest N step of the slider (half a 128-column tile: some positions leave a tile partly empty).
N_STEP = 64
#: How many waves the N range spans (the steps into the second and third wave are both in view).
WAVES_SHOWN = 2.5
FULL, PARTIAL, GRID = "#1f77b4", "#ff7f0e", "#888888"


def default_rows(sms: int, tile_m: int = 256) -> int:
    """M of the ``gemm_waves`` experiment: ``tile_m`` × the largest divisor of ``sms`` up to 16,
    so that a wave holds a whole number of tile columns."""
    sms, tile_m = positive_int("sms", sms), positive_int("tile_m", tile_m)
    return tile_m * max(d for d in range(1, 17) if sms % d == 0)


def _spec(spec: DeviceSpec | str) -> DeviceSpec:
    spec = resolve_spec(spec, none_ok=False)
    if spec.kind != "gpu" or not spec.sms:
        raise ValueError(f"spec must be a GPU with a known SM count, got {spec.label} ({spec.kind})")
    return spec


def _measured(frame: pd.DataFrame | None, spec: DeviceSpec | str | None
              ) -> tuple[pd.DataFrame | None, DeviceSpec, Source | None]:
    """The frame's rows, the device they were measured on (checked against ``spec``) and, when
    the points cannot be drawn, why (a frame from a GPU perfkit has no spec of)."""
    if frame is None:
        return None, _spec(REFERENCE if spec is None else spec), None
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a gemm_waves DataFrame or None, got {type(frame).__name__}")
    lacking = [c for c in ("M", "N", "K", "dtype", "time_s", "impl", "tile_m", "tile_n") if c not in frame]
    if lacking:
        raise ValueError(f"frame lacks the column(s) {lacking}; pass a gemm_waves frame (live or recorded)")
    meta = FrameMeta.of(frame)
    if meta.device_kind == "cpu":
        raise ValueError(f"frame was measured on a CPU ({meta.device_name}); pass a GPU frame or None")
    named = meta.device_name or meta.device
    if spec is None:
        if meta.live:
            return frame, _spec(current_device()), None  # measured here, now: this GPU, known or not
        if not named:
            raise LookupError("frame's metadata names no device; pass spec= (e.g. 'H100-SXM')")
        try:  # the recorded GPU with the ceilings recorded beside it
            return frame, calibrated(_spec(named)), None
        except LookupError:  # a recording from a GPU outside perfkit's table: no model to draw it against
            return None, _spec(REFERENCE), missing(f"measured on {named}, a GPU perfkit has no spec of, so its "
                                                   "points are not drawn")
    spec = _spec(spec)
    if named and named not in (spec.name, spec.driver_name) and device_spec(named).name != spec.name:
        raise ValueError(f"frame was measured on {named}, not on spec {spec.label}: the points would not "
                         "match the model")
    return frame, spec, None


def waves_figure(frame: pd.DataFrame | None = None, spec: DeviceSpec | str | None = None, *,
                 dtype: Any = "float16", K: int = 4096, tile: tuple[int, int] = (256, 128)) -> InteractiveFigure:
    """Predicted time (s) against N on ``spec`` (default: the frame's GPU, else :data:`REFERENCE`),
    with a slider over N; tiles, waves and the prediction of the current N are read out.

    ``frame``: a ``gemm_waves`` frame (live, or a recording made on a GPU); its forced-tile rows fix M, K,
    the dtype and the tile, and its points are drawn. Without it, M follows that experiment
    (:func:`default_rows`) and ``dtype``, ``K`` and ``tile`` apply.
    """
    frame, spec, why = _measured(frame, spec)
    forced = None
    if frame is not None:
        forced = frame[frame["impl"].astype(str).str.startswith("triton")]
        if not len(forced):
            raise ValueError("frame has no forced-tile (triton) rows; pass a gemm_waves frame")
        first = forced.iloc[0]
        dtype, K, tile = first["dtype"], int(first["K"]), (int(first["tile_m"]), int(first["tile_n"]))
        M = int(first["M"])
    dtype = canonical_dtype(dtype)
    K = positive_int("K", K)
    tm, tn = tile_pair("tile", tile)
    if frame is None:
        M = default_rows(spec.sms, tm)
    rows = cdiv(M, tm)
    n_max = cdiv(int(WAVES_SHOWN * spec.sms), rows) * tn
    step = N_STEP * cdiv(n_max, N_STEP * MAX_STATES)
    grid = list(range(step, n_max + 1, step))
    dense = list(range(16, n_max + 1, 16))

    forced_s = [predict_gemm_time(M, n, K, dtype, spec, (tm, tn)) for n in dense]
    library_s = [predict_gemm_time(M, n, K, dtype, spec) for n in dense]
    traces = [
        go.Scatter(x=dense, y=rounded(forced_s), mode="lines", name=f"model, {tm}×{tn} tiles",
                   line={"color": FULL, "width": 2}, text=[format_time(t) for t in forced_s],
                   hovertemplate="N = %{x}: %{text}<extra></extra>"),
        go.Scatter(x=dense, y=rounded(library_s), mode="lines", name="model, the library's tiles",
                   line={"color": GRID, "width": 1.5, "dash": "dash"}, text=[format_time(t) for t in library_s],
                   hovertemplate="N = %{x}: %{text}<extra></extra>"),
    ]
    if frame is not None:
        cublas = frame[frame["impl"] == "cublas"]
        for part, name, symbol in ((forced, f"measured, {tm}×{tn} tiles", "circle"),
                                   (cublas, "measured, cuBLAS", "x")):
            if len(part):
                part = part.sort_values("N")
                traces.append(go.Scatter(x=part["N"].tolist(), y=rounded(part["time_s"]), mode="markers",
                                         name=name, marker={"symbol": symbol, "size": 6},
                                         text=[format_time(t) for t in part["time_s"]],
                                         hovertemplate="N = %{x}: %{text}<extra></extra>"))
    waves_max = wave_quantization(M, n_max, (tm, tn), spec.sms).waves
    traces.append(go.Scatter(x=[0.5, waves_max + 0.5], y=[spec.sms] * 2, mode="lines", xaxis="x2", yaxis="y2",
                             name=f"a wave: {spec.sms} SMs", line={"color": GRID, "dash": "dot"},
                             hoverinfo="skip"))

    states = [_state(M, n, K, dtype, spec, (tm, tn), waves_max, len(traces)) for n in grid]
    first_step = next((i for i, n in enumerate(grid) if wave_quantization(M, n, (tm, tn), spec.sms).waves > 1), 1)
    points = source_of(frame) if frame is not None else why or missing("no gemm_waves measurement given, "
                                                                         "model only")
    # the model's basis (the datasheet) is in the static figures' captions; one line here
    shown = caption({"curves": Source("model", spec.label), "points": points})
    legend_rows = 1 if len(traces) <= 3 else 2
    height = 525 + 22 * legend_rows
    head = heading(f"Waves on {spec.label}: {M}×N×{K} {dtype}, N swept", shown)
    layout = {
        **head, "title": {**head["title"], "yref": "container", "y": 1 - 18 / height, "yanchor": "top"},
        "height": height, "margin": {"t": 92 + 22 * legend_rows, "b": 135},
        "legend": {"orientation": "h", "x": 0, "yref": "container", "y": 1 - 44 / height, "yanchor": "top"},
        "xaxis": {"domain": [0, 0.7], "title": {"text": "N (columns of C)"}, "range": [0, n_max + step]},
        "yaxis": {"title": {"text": "time of one GEMM"}, "tickformat": "~s", "ticksuffix": "s",
                  "rangemode": "tozero"},
        "xaxis2": {"domain": [0.8, 1.0], "anchor": "y2", "title": {"text": "wave"}, "range": [0.5, waves_max + 0.5],
                   "tickvals": list(range(1, waves_max + 1))},
        "yaxis2": {"anchor": "x2", "title": {"text": "tiles in the wave"}, "range": [0, 1.15 * spec.sms]},
    }
    figure = with_slider(traces, states, prefix="N = ", active=max(0, first_step - 1), layout=layout)
    alt = (f"Predicted duration of a {M}×N×{K} {dtype} GEMM on {spec.label} against N: with forced "
           f"{tm}×{tn} tiles it climbs in steps, one per wave of {spec.sms} tiles, while the library's "
           "choice of tile is smoother; bars show how many tiles each wave holds. Moving the slider "
           "over N moves the marker along the curve and refills the bars: one column past a full "
           "wave starts a nearly empty wave that costs as much as a full one.")
    return InteractiveFigure(figure, alt=alt, name="gemm-waves")


def _state(M: int, N: int, K: int, dtype: str, spec: DeviceSpec, tile: tuple[int, int], waves_max: int,
           n_traces: int) -> State:
    """One slider position: a marker at (N, predicted time), a bar per wave and the read-out."""
    p = explain_gemm(M, N, K, dtype, spec, tile)
    lib = explain_gemm(M, N, K, dtype, spec)
    wq = wave_quantization(M, N, tile, spec.sms)
    t = rounded([p.predicted_s])[0]
    shapes = [{"type": "line", "xref": "x", "yref": "y domain", "x0": N, "x1": N, "y0": 0, "y1": 1,
               "line": {"color": PARTIAL, "width": 1, "dash": "dot"}},
              {"type": "circle", "xref": "x", "yref": "y", "xsizemode": "pixel", "ysizemode": "pixel",
               "xanchor": N, "yanchor": t, "x0": -6, "x1": 6, "y0": -6, "y1": 6,
               "fillcolor": PARTIAL, "line": {"color": "black", "width": 1}}]
    for w in range(1, waves_max + 1):
        held = wq.wave_size if w < wq.waves else wq.last_wave_tiles if w == wq.waves else 0
        shapes.append({"type": "rect", "xref": "x2", "yref": "y2", "x0": w - 0.35, "x1": w + 0.35, "y0": 0,
                       "y1": held, "line": {"width": 0},
                       "fillcolor": FULL if held == wq.wave_size else PARTIAL})
    text = (f"N = {N:,}: {wq.tiles} tiles of {tile[0]}×{tile[1]} → {wq.waves} wave{'s' * (wq.waves > 1)}; "
            f"the last keeps {wq.last_wave_tiles} of {wq.wave_size} SMs busy ({wq.utilization:.0%} of the "
            f"SM-time used)<br>predicted {format_time(p.predicted_s)} ({p.bound}-bound); the library's choice "
            f"({lib.tile[0]}×{lib.tile[1]}, split-K {lib.split_k}): {format_time(lib.predicted_s)}")
    annotation = {"text": text, "xref": "paper", "yref": "paper", "x": 0, "y": 1.01, "xanchor": "left",
                  "yanchor": "bottom", "align": "left", "showarrow": False}
    return State(label=str(N), traces=[{}] * n_traces, layout={"shapes": shapes, "annotations": [annotation]})


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"waves": waves_figure}
