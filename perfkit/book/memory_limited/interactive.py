"""Interactive figures of chapter 06_memory_limited (see perfkit.interactive).

:func:`time_vs_bytes`: a slider over the batch of an N × 64 × 56 × 56 activation. Left, the byte
model's duration against bytes moved (a flat launch latency, then bytes ÷ bandwidth) with the
layers of that size placed on it, and the GPU measurements when they exist. Right, each layer's
predicted duration split into fixed latency and streaming, with batch norm → ReLU run eagerly
(two kernels) and fused (one). Every number comes from :func:`perfkit.memory_model.layer_bytes`,
:func:`~perfkit.memory_model.chain_bytes` and :func:`~perfkit.memory_model.memory_time`.
Seconds and bytes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..._validate import positive_int
from ...devices import DeviceSpec, device_spec
from ...dtypes import canonical_dtype
from ...memory_model import chain_bytes, layer_bytes, memory_time
from ...meta import FrameMeta
from ...provenance import caption, modelled, source_of
from ...units import format_time
from ..frames import spec_of
from ..interactive import InteractiveFigure, State, heading, rounded, with_slider

__all__ = ["BATCHES", "CHAIN", "FIGURES", "LAYERS", "MEASURED", "layer_times", "time_vs_bytes"]

#: The slider's batches N of an N × C × H × W activation.
BATCHES: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
_POOL = dict(kernel_size=3, stride=2, padding=1)  # ResNet's stem: the chapter's max pool
#: The bars, top to bottom: (label, the (kind, params, pass) of each kernel; kind "fused": the
#: residual tail :data:`CHAIN` fused into one kernel, counted by chain_bytes).
LAYERS: tuple[tuple[str, tuple], ...] = (
    ("ReLU fwd", (("relu", {}, "forward"),)),
    ("ReLU bwd", (("relu", {}, "backward"),)),
    ("batch norm fwd, persistent", (("batchnorm", {}, "forward"),)),
    ("batch norm fwd, two-pass", (("batchnorm", {"persistent": False}, "forward"),)),
    ("max pool 3×3/2 fwd (int64 idx)", (("maxpool", _POOL, "forward"),)),
    ("BN → add → ReLU, eager: 3 kernels",
     (("batchnorm", {}, "forward"), ("add", {}, "forward"), ("relu", {}, "forward"))),
    ("BN → add → ReLU, fused: 1 kernel", (("fused", {}, "forward"),)),
)
#: The tail of a residual block after its second convolution, as chain_bytes counts it.
CHAIN: tuple[str, ...] = ("batchnorm", "add", "relu")
#: The experiments whose GPU frames are drawn as points, and the bytes column each is placed by.
MEASURED: dict[str, str] = {"activation_sizes": "bytes", "batchnorm_sizes": "bytes_persistent",
                            "pool_sizes": "bytes"}
_COLOURS = {"activation_sizes": "#1f77b4", "batchnorm_sizes": "#ff7f0e", "pool_sizes": "#2ca02c"}


def layer_times(shape: Sequence[int], dtype: Any, spec: DeviceSpec) -> pd.DataFrame:
    """Per layer of :data:`LAYERS` on an N×C×H×W ``shape``: ``kernels``, ``bytes`` (largest kernel's,
    for placing it on the model's line), ``total_bytes``, ``latency_s`` (kernels × the fixed cost),
    ``streaming_s`` and ``predicted_s`` (the sum of each kernel's :func:`memory_time`), seconds."""
    zero = memory_time(0, spec)
    rows = []
    for label, kernels in LAYERS:
        moved = [chain_bytes(list(CHAIN), shape, dtype, fused=True) if kind == "fused"
                 else layer_bytes(kind, shape, dtype, pass_=p, **params) for kind, params, p in kernels]
        total_s = sum(memory_time(b, spec) for b in moved)
        rows.append({"layer": label, "kernels": len(moved), "bytes": max(moved), "total_bytes": sum(moved),
                     "latency_s": len(moved) * zero, "streaming_s": total_s - len(moved) * zero,
                     "predicted_s": total_s})
    return pd.DataFrame(rows)


def _checked_frames(frames: Mapping[str, pd.DataFrame | None] | None) -> dict[str, pd.DataFrame]:
    if frames is None:
        return {}
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a dict of experiment name → DataFrame or None, got {type(frames).__name__}")
    out = {}
    for name, frame in frames.items():
        if name not in MEASURED:
            raise LookupError(f"frames has {name!r}; this figure draws: {', '.join(MEASURED)}")
        if frame is None:
            continue
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frames[{name!r}] must be a DataFrame or None, got {type(frame).__name__}")
        missing = [c for c in (MEASURED[name], "time_s") if c not in frame.columns]
        if missing:
            raise ValueError(f"frames[{name!r}] lacks the columns {missing}: pass the {name} experiment's frame")
        if FrameMeta.of(frame).device_kind == "cpu":
            raise ValueError(f"frames[{name!r}] was measured on a CPU; this figure sets GPU measurements beside "
                             "a GPU's model (pass None on a CPU)")
        if len(frame):
            out[name] = frame
    return out


def _points(name: str, frame: pd.DataFrame | None) -> dict:
    if frame is None:
        return {"x": [], "y": []}
    part = frame[frame["time_s"] > 0]
    return {"x": rounded(part[MEASURED[name]]), "y": rounded(part["time_s"], 4)}


def time_vs_bytes(frames: Mapping[str, pd.DataFrame | None] | None = None, spec: DeviceSpec | None = None, *,
                  dtype: Any = "bfloat16", channels: int = 64, size: int = 56,
                  batches: Sequence[int] = BATCHES, active: int | None = None) -> InteractiveFigure:
    """The byte model against bytes, with a slider over the batch N of an N × ``channels`` × ``size``²
    ``dtype`` activation; ``frames`` (``activation_sizes``, ``batchnorm_sizes``, ``pool_sizes``: GPU
    frames, live or recorded, or None) adds their measured durations as points.

    ``spec``: the GPU modelled (default: the GPU the frames ran on, else the H100). ``active``: the
    index of the opening batch (default: the batch nearest 32).
    """
    given = _checked_frames(frames)
    if spec is None:
        spec = next((s for s in map(spec_of, given.values()) if s is not None), None) or device_spec("H100-SXM")
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (e.g. pk.device_spec('H100-SXM')), got {spec!r}")
    dtype = canonical_dtype(dtype)
    channels, size = positive_int("channels", channels), positive_int("size", size)
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence) or len(batches) < 2:
        raise ValueError(f"batches must list at least two batch sizes, got {batches!r}")
    batches = [positive_int("batches", b) for b in batches]
    if active is None:
        active = int(np.argmin([abs(b - 32) for b in batches]))

    knee = memory_time(0, spec) * spec.ceilings.bandwidth  # bytes moved in one latency
    tables = [layer_times((n, channels, size, size), dtype, spec) for n in batches]
    lo = min(1e4, min(t["bytes"].min() for t in tables) / 4)
    hi = max(t["bytes"].max() for t in tables) * 2
    for frame, column in ((f, MEASURED[n]) for n, f in given.items()):
        lo, hi = min(lo, frame[column].min()), max(hi, frame[column].max())
    line_x = np.geomspace(lo, hi, 41)
    line = {"x": rounded(line_x), "y": rounded([memory_time(b, spec) for b in line_x])}
    measured = [_points(name, given.get(name)) for name in MEASURED]
    labels = list(tables[0]["layer"])

    traces = [go.Scatter(**line, mode="lines", line={"color": "black", "width": 2},
                         name=f"byte model, {spec.name}")]
    traces += [go.Scatter(**points, mode="markers", marker={"color": _COLOURS[name], "size": 6, "opacity": 0.6},
                          name=f"{name} (measured)", showlegend=name in given)
               for name, points in zip(MEASURED, measured)]
    traces.append(go.Scatter(mode="markers", marker={"color": "#d62728", "size": 11, "symbol": "diamond"},
                             name="the layers at this size (model)", hovertemplate="%{text}<extra></extra>"))
    bars = dict(orientation="h", xaxis="x2", yaxis="y2", y=labels)
    traces.append(go.Bar(**bars, name="fixed latency (launch)", marker={"color": "#bbbbbb"}))
    traces.append(go.Bar(**bars, name="bytes ÷ bandwidth", marker={"color": "#d62728"},
                         textposition="outside", cliponaxis=False))

    states = []
    for n, t in zip(batches, tables):
        relu = t.set_index("layer").loc["ReLU fwd"]
        eager, fused = t["predicted_s"].iloc[-2], t["predicted_s"].iloc[-1]
        regime = "launch-bound" if relu["bytes"] < knee else "bandwidth-bound"
        note = (f"N × {channels} × {size} × {size} {dtype}, N = {n}: a ReLU forward moves "
                f"{relu['bytes'] / 1e6:.3g} MB, {'below' if relu['bytes'] < knee else 'above'} the "
                f"{knee / 1e6:.3g} MB knee ({regime}).<br>Fusing batch norm → add → ReLU: {format_time(eager)} → "
                f"{format_time(fused)} ({eager / fused:.2f}× faster).")
        names = [f"{lab}: {b / 1e6:.3g} MB, {format_time(s)}" for lab, b, s in zip(t["layer"], t["bytes"],
                                                                                      t["predicted_s"])]
        # the model's line and the measured points stay put ({}: not touched)
        states.append(State(f"{n}", [
            {}, *({} for _ in measured),
            {"x": rounded(t["bytes"]), "y": rounded([memory_time(b, spec) for b in t["bytes"]]), "text": names},
            {"x": rounded(t["latency_s"])},
            {"x": rounded(t["streaming_s"]), "text": [format_time(s) for s in t["predicted_s"]]},
        ], {"annotations[0].text": note}))

    model = modelled(spec)
    shown = [source_of(f) or name for name, f in given.items()]
    source = caption({"model": model, "points": caption(shown)}) if shown else model
    title = "Memory-limited layers: time is latency + bytes ÷ bandwidth" + ("" if shown else " (model only)")
    layout = {
        **heading(title, source), "height": 620, "barmode": "stack",
        "margin": {"t": 100, "l": 75, "r": 50, "b": 195},
        "xaxis": {"type": "log", "domain": [0, 0.42], "title": "bytes moved by one kernel", "ticksuffix": "B",
                  "exponentformat": "SI", "dtick": 1},
        "yaxis": {"type": "log", "title": "duration", "ticksuffix": "s", "exponentformat": "SI", "dtick": 1},
        "xaxis2": {"domain": [0.62, 1], "anchor": "y2", "title": "predicted duration", "ticksuffix": "s",
                   "exponentformat": "SI", "rangemode": "tozero"},
        "yaxis2": {"anchor": "x2", "autorange": "reversed"},
        "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": knee, "x1": knee, "y0": 0, "y1": 1,
                    "line": {"dash": "dot", "color": "gray"}}],
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.02, "xanchor": "left",
                         "yanchor": "bottom", "align": "left", "showarrow": False},
                        {"text": f"knee {knee / 1e6:.3g} MB", "xref": "x", "yref": "paper", "x": np.log10(knee),
                         "y": 0.98, "showarrow": False, "xanchor": "left", "font": {"color": "gray"}}],
        "legend": {"orientation": "h", "x": 0, "y": -0.13},
    }
    fig = with_slider(traces, states, prefix="batch N = ", active=active, layout=layout)
    fig.layout.sliders[0].update(y=-0.23, pad={"t": 40})  # below the legend
    alt = (f"Left: the byte model's predicted duration on the {spec.name} against bytes moved, flat at the "
           f"launch latency up to a knee near {knee / 1e6:.3g} MB, then rising in proportion to bytes"
           f"{', with the measured points' if shown else ''}; right: the predicted time of a ReLU, a batch "
           "norm, a max pool, and a residual block's batch norm → add → ReLU eager against fused. Moving the "
           "batch slider grows the tensor: small batches cost about one launch per kernel, large ones their "
           "bytes, and fusion saves launches at small sizes and the intermediate tensors' bytes at large ones.")
    return InteractiveFigure(fig, alt=alt, name="memory-time-vs-bytes")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"time_vs_bytes": time_vs_bytes}
