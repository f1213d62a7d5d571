"""Interactive figures of chapter 03_fully_connected (see perfkit.interactive).

:func:`batch_explorer`: a layer's three GEMMs (forward, dgrad, wgrad; NVIDIA's FC table) as the
batch grows. A slider moves the batch: the top panel marks the GEMM model's predicted TFLOP/s of
each GEMM on each device, the bottom panel their arithmetic intensity (the same for all three)
against each device's ridge point. Measured GEMMs of the same layer (DeepBench's published V100
GEMMs, a live or recorded ``fc_batch`` or ``fc_passes`` run) are drawn as points where they match.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..._validate import positive_int
from ...data import has_recording, load
from ...devices import DeviceSpec, device_spec
from ...dtypes import canonical_dtype
from ...gemm_model import explain_gemm
from ...provenance import modelled, source_of
from ...published_data import has_published
from ...published_data import published as published_frame
from ...roofline import arithmetic_intensity, gemm_flops, math_bound_batch
from ...shapes import linear_gemms
from ..interactive import InteractiveFigure, State, footnote_px, heading, rounded, with_slider

__all__ = ["BATCHES", "FIGURES", "PHASES", "batch_explorer", "layer_points", "predicted_tflop_s", "ridge_status"]

#: The three GEMMs of a layer, in NVIDIA's order.
PHASES = ("forward", "dgrad", "wgrad")
#: The slider's batches (each device's math-bound batch is added where it falls inside).
BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
           4096, 6144, 8192)
_COLOURS = {"forward": "#1f77b4", "dgrad": "#ff7f0e", "wgrad": "#2ca02c"}
_DASHES = ("dash", "solid", "dot", "dashdot")
_SYMBOLS = ("triangle-up", "square", "diamond", "triangle-down")
_MAX_STATES = 60


def _specs(models: DeviceSpec | Iterable[DeviceSpec] | None) -> list[DeviceSpec]:
    if models is None:
        return [device_spec("V100-SXM2"), device_spec("H100-SXM")]
    items = [models] if isinstance(models, DeviceSpec) else list(models)
    bad = [m for m in items if not isinstance(m, DeviceSpec)]
    if bad or not items:
        raise TypeError(f"models must be one or more DeviceSpecs (e.g. pk.device_spec('H100-SXM')), got {models!r}")
    if len(items) > len(_DASHES):
        raise ValueError(f"models takes at most {len(_DASHES)} devices, got {len(items)}")
    return items


def _frames(frames: Mapping[str, pd.DataFrame | None] | None, param: str) -> dict[str, pd.DataFrame]:
    if frames is None:
        return {}
    if not isinstance(frames, Mapping):
        raise TypeError(f"{param} must be a mapping of name → DataFrame or None, got {type(frames).__name__}")
    out = {}
    for name, f in frames.items():
        if f is not None and not isinstance(f, pd.DataFrame):
            raise TypeError(f"{param}[{name!r}] must be a DataFrame or None, got {type(f).__name__}")
        if f is not None and len(f):
            out[str(name)] = f
    return out


def layer_points(frame: pd.DataFrame, in_features: int, out_features: int, dtype: str = "float16") -> pd.DataFrame:
    """The GEMMs of ``frame`` that are one of the layer's three: columns ``phase``, ``batch``, ``tflops``.

    ``frame`` has ``M``, ``N``, ``K``, ``dtype`` and ``tflops`` (an ``fc_batch`` or ``fc_passes``
    run, whose autograd rows are left out, or published GEMMs). A GEMM is matched by its shape
    (forward: M = out, K = in; dgrad: M = in, K = out; wgrad: M = in, N = out), or by its ``phase``
    column; several layouts of one GEMM keep the fastest. A square layer's forward and dgrad have
    one shape: such a point is called ``"forward"``.
    """
    I, O = positive_int("in_features", in_features), positive_int("out_features", out_features)
    needed = {"M", "N", "K", "dtype", "tflops"}
    if not isinstance(frame, pd.DataFrame) or not needed <= set(frame.columns):
        raise ValueError(f"frame must be a DataFrame with columns {sorted(needed)}, got "
                         f"{list(getattr(frame, 'columns', []))}")
    rows = frame[frame["dtype"] == canonical_dtype(dtype)]
    if "impl" in rows.columns:
        rows = rows[rows["impl"] == "gemm"]
    points = []
    for r in rows.itertuples(index=False):
        M, N, K = int(r.M), int(r.N), int(r.K)
        found = [(p, B) for p, B in (("forward", N), ("dgrad", N), ("wgrad", K))
                 if linear_gemms(B, I, O)[p] == (M, N, K)]
        given = getattr(r, "phase", None)
        found = [f for f in found if given is None or f[0] == given]
        if found:
            points.append({"phase": found[0][0], "batch": found[0][1], "tflops": float(r.tflops)})
    out = pd.DataFrame(points, columns=["phase", "batch", "tflops"])
    return out.groupby(["phase", "batch"], as_index=False, sort=True)["tflops"].max()


def predicted_tflop_s(batch: int, in_features: int, out_features: int, spec: DeviceSpec,
                     dtype: str = "float16") -> dict[str, float]:
    """The GEMM model's throughput (TFLOP/s) of each of the layer's three GEMMs at ``batch`` on ``spec``."""
    out = {}
    for phase, (M, N, K) in linear_gemms(batch, in_features, out_features).items():
        out[phase] = gemm_flops(M, N, K) / explain_gemm(M, N, K, dtype, spec).predicted_s / 1e12
    return out


def ridge_status(batch: int, in_features: int, out_features: int, specs: Sequence[DeviceSpec],
                 dtype: str = "float16") -> str:
    """One line: the layer's intensity at ``batch`` (FLOP/B) and, per device, which side of its ridge."""
    ai = arithmetic_intensity(out_features, batch, in_features, dtype)
    sides = [f"{'math' if ai >= s.ops_per_byte(dtype) else 'memory'}-bound on {s.name} "
             f"(ridge {s.ops_per_byte(dtype):.0f})" for s in specs]
    return f"batch {batch}: {ai:,.0f} FLOP/B, " + ", ".join(sides)


def _batches(batches: Iterable[int] | None, I: int, O: int, specs, dtype) -> list[int]:
    if batches is None:
        grid = set(BATCHES) | {b for s in specs if (b := math_bound_batch(I, O, s, dtype)) and b <= BATCHES[-1]}
    else:
        if isinstance(batches, (str, bytes)) or not isinstance(batches, Iterable):
            raise TypeError(f"batches must be a list of positive integers, got {batches!r}")
        grid = {positive_int("batches", b) for b in batches}
    if not 2 <= len(grid) <= _MAX_STATES:
        raise ValueError(f"batches must hold 2 to {_MAX_STATES} distinct batches, got {len(grid)}")
    return sorted(grid)


def _title(I: int, O: int, dtype: str, sources: list) -> dict:
    """The heading (:func:`heading`): the title, and the sources one per line in the footnote."""
    return heading(f"The three GEMMs of a {I}→{O} layer against the batch, {dtype}", sources)


def batch_explorer(measured: Mapping[str, pd.DataFrame | None] | None = None, *,
                   published: Mapping[str, pd.DataFrame | None] | None = None, in_features: int = 4096,
                   out_features: int = 4096, dtype: str = "float16",
                   models: DeviceSpec | Iterable[DeviceSpec] | None = None,
                   batches: Iterable[int] | None = None) -> InteractiveFigure:
    """A slider over the batch of a ``in_features → out_features`` layer: each GEMM's predicted
    TFLOP/s on each of ``models`` (default V100-SXM2 and H100-SXM) and their intensity against each
    ridge. ``measured`` (name → a live or recorded ``fc_batch``/``fc_passes`` frame) and
    ``published`` (name → published GEMMs, e.g. ``{"V100": pk.published("deepbench_gemm", "V100-SXM2")}``)
    add the points that match the layer (:func:`layer_points`); without any, the footnote under it says so.
    """
    I, O = positive_int("in_features", in_features), positive_int("out_features", out_features)
    dtype = canonical_dtype(dtype)
    specs = _specs(models)
    grid = _batches(batches, I, O, specs, dtype)
    data = [(name, f, False) for name, f in _frames(measured, "measured").items()]
    data += [(name, f, True) for name, f in _frames(published, "published").items()]
    points = [(name, layer_points(f, I, O, dtype), source_of(f), pub) for name, f, pub in data]
    points = [(n, p, s, pub) for n, p, s, pub in points if len(p)]
    sources: list = [modelled(s) for s in specs] + [s or n for n, _, s, _ in points]
    if all(pub for *_, pub in points):
        shown = "the model and published points" if points else "the model only"
        sources.append(f"no recording of a GPU run of this layer yet: {shown}")
    model = {(s.name, p): [] for s in specs for p in PHASES}
    for B in grid:
        for s in specs:
            for p, v in predicted_tflop_s(B, I, O, s, dtype).items():
                model[(s.name, p)].append(v)
    intensity = [arithmetic_intensity(O, B, I, dtype) for B in grid]

    traces, static = _static_traces(specs, grid, model, points, intensity, dtype)
    for j, s in enumerate(specs):  # the markers at the slider's batch
        traces.append(go.Scatter(mode="markers", showlegend=False, legendgroup=s.name,
                                 marker={"color": [_COLOURS[p] for p in PHASES], "size": 11,
                                         "symbol": "circle-open" if j == 0 else "circle", "line": {"width": 2}},
                                 hovertemplate="%{text}<extra></extra>"))
    traces.append(go.Scatter(mode="markers", showlegend=False, xaxis="x2", yaxis="y2",
                             marker={"color": "black", "size": 11}, hovertemplate="%{text}<extra></extra>"))
    states = []
    for i, B in enumerate(grid):
        moving = [{"x": [B] * 3, "y": rounded(model[(s.name, p)][i] for p in PHASES),
                   "text": [f"{s.name} model, {p}, batch {B}: {model[(s.name, p)][i]:.3g} TFLOP/s"
                            for p in PHASES]} for s in specs]
        moving.append({"x": [B], "y": rounded([intensity[i]]),
                       "text": [f"batch {B}: {intensity[i]:.3g} FLOP/B (all three GEMMs)"]})
        tops = ", ".join(f"{s.name} {max(model[(s.name, p)][i] for p in PHASES):.0f}" for s in specs)
        note = f"{ridge_status(B, I, O, specs, dtype)}<br>best of the three GEMMs, model: {tops} TFLOP/s"
        states.append(State(str(B), [*static, *moving], {"annotations": [_note(note)]}))
    start = min(range(len(grid)), key=lambda i: abs(grid[i] - 128))
    figure = with_slider(traces, states, prefix="batch = ", active=start, layout=_layout(I, O, dtype, sources))
    figure.layout.sliders[0].update(y=-0.13, yanchor="top", pad={"t": 0})
    alt = (f"Two panels for a {I}→{O} layer in {dtype} as the batch grows from {grid[0]} to {grid[-1]}: "
           f"top, the predicted TFLOP/s of its forward, dgrad and wgrad GEMMs on "
           f"{' and '.join(s.name for s in specs)} (lines) with measured points where they exist; bottom, "
           "their common arithmetic intensity against each device's ridge point. Moving the batch slider "
           "marks each GEMM's predicted throughput and says on which devices the layer is memory- or "
           "math-bound.")
    return InteractiveFigure(figure, alt=alt, name=f"fc-batch-{I}-{O}")


def _static_traces(specs, grid, model, points, intensity, dtype) -> tuple[list, list]:
    """The traces that stay put (model curves, measured points, intensity, ridges) and their x and y,
    which every state repeats: a state that left them out would reset them in the page."""
    traces, static = [], []
    for j, s in enumerate(specs):
        for p in PHASES:  # forward drawn wide: a square layer's dgrad is the same GEMM, drawn over it
            traces.append(go.Scatter(mode="lines", name=f"{s.name} model, {p}", legendgroup=s.name,
                                     line={"color": _COLOURS[p], "dash": _DASHES[j],
                                           "width": 4 if p == "forward" else 1.5},
                                     hovertemplate=f"{s.name} model, {p}<br>batch %{{x}}: %{{y:.3g}} TFLOP/s"
                                                   "<extra></extra>"))
            static.append({"x": grid, "y": rounded(model[(s.name, p)])})
    for k, (name, pts, src, pub) in enumerate(points):
        label = (getattr(src, "device", "") or name) + (" (published)" if pub else "")
        traces.append(go.Scatter(mode="markers", name=label, hovertext=list(pts["phase"]),
                                 marker={"color": [_COLOURS[p] for p in pts["phase"]], "size": 10,
                                         "symbol": _SYMBOLS[k % len(_SYMBOLS)] if pub else "circle",
                                         "line": {"color": "black", "width": 1}},
                                 hovertemplate=f"{label}, %{{hovertext}}<br>batch %{{x}}: %{{y:.3g}} TFLOP/s"
                                               "<extra></extra>"))
        static.append({"x": [int(b) for b in pts["batch"]], "y": rounded(pts["tflops"])})
    traces.append(go.Scatter(mode="lines", name="intensity, all three GEMMs", xaxis="x2", yaxis="y2",
                             line={"color": "black", "width": 1.5},
                             hovertemplate="batch %{x}: %{y:.3g} FLOP/B<extra></extra>"))
    static.append({"x": grid, "y": rounded(intensity)})
    for j, s in enumerate(specs):
        ridge = s.ops_per_byte(dtype)
        traces.append(go.Scatter(mode="lines", name=f"{s.name} ridge {ridge:.0f} FLOP/B", xaxis="x2", yaxis="y2",
                                 legendgroup=s.name, line={"color": "gray", "dash": _DASHES[j], "width": 1.2},
                                 hoverinfo="skip"))
        static.append({"x": [grid[0], grid[-1]], "y": rounded([ridge, ridge])})
    return traces, static


def _layout(I: int, O: int, dtype: str, sources: list) -> dict:
    """Two stacked panels sharing a log batch axis; the slider and the legend below them."""
    head = _title(I, O, dtype, sources)
    head["title"].update({"yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 14}})
    return {**head, "height": 714 + footnote_px(head["footnote"]), "margin": {"t": 48, "b": 280},
            "xaxis": {"type": "log", "anchor": "y", "matches": "x2", "showticklabels": False},
            "yaxis": {"title": {"text": "TFLOP/s"}, "domain": [0.46, 1.0], "rangemode": "tozero"},
            "xaxis2": {"type": "log", "anchor": "y2", "title": {"text": "batch (rows of the layer's input)"}},
            "yaxis2": {"type": "log", "dtick": 1, "title": {"text": "FLOP per byte"}, "domain": [0.0, 0.34]},
            "legend": {"orientation": "h", "y": -0.37, "yanchor": "top"}}


def _note(text: str) -> dict:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.0, "y": 0.37, "xanchor": "left",
            "yanchor": "bottom", "showarrow": False, "align": "left"}


def _recorded() -> dict[str, pd.DataFrame | None]:
    """The recorded GPU runs of the layer experiments (none until ``perfkit record`` made them)."""
    return {name: load(name) if has_recording(name) else None for name in ("fc_batch", "fc_passes")}


def _deepbench() -> dict[str, pd.DataFrame]:
    """DeepBench's V100 GEMMs (2019), where a layer's shapes may be found; ``{}`` without the published data."""
    if not has_published("deepbench_gemm"):
        return {}
    return {"V100-SXM2, 2019": published_frame("deepbench_gemm", "V100-SXM2")}


def square_layer() -> InteractiveFigure:
    """:func:`batch_explorer` of NVIDIA's 4096 → 4096 layer, with DeepBench's V100 and any recording."""
    return batch_explorer(_recorded(), published=_deepbench())


def gpt2_head() -> InteractiveFigure:
    """:func:`batch_explorer` of GPT-2's output projection (768 → 50257 logits); the batch is tokens."""
    return batch_explorer(_recorded(), published=_deepbench(), in_features=768, out_features=50257)


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"batch": square_layer, "gpt2-head": gpt2_head}
