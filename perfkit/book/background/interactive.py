"""Interactive figures of chapter 01_background (see perfkit.interactive): the roofline of every
known GPU with NVIDIA's five example operations on it, and a linear layer's GEMM moving along the
roof as its batch grows. Every number comes from :mod:`perfkit.roofline` and the device specs.

Units: intensities in FLOP/byte, throughputs in TFLOP/s (FLOP/s ÷ 10¹²), times in seconds.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import plotly.graph_objects as go

from ...architectures import FAMILIES, VENDOR, family
from ...devices import KNOWN_DEVICES, DeviceSpec, resolve_spec
from ...dtypes import canonical_dtype
from ...provenance import caption, modelled
from ...roofline import (Operation, arithmetic_intensity, attainable_flop_s, gemm_operation, math_bound_batch,
    nvidia_example_operations, roofline_time)
from ...units import TERA, format_time
from ..interactive import InteractiveFigure, State, heading, retitle, rounded, with_menu, with_slider

__all__ = ["BOOK_GPUS", "FIGURES", "gemm_batch_roofline", "menu_label", "roofline_by_device"]

#: The GPUs the device menu offers by default, then → now → next: Volta and Ampere, Hopper and Ada,
#: Blackwell and AMD Instinct (CDNA 3 and 4).
BOOK_GPUS: tuple[str, ...] = ("V100-SXM2", "A100-SXM4-80GB", "H100-SXM", "H200", "L40S", "B200", "GB200",
                              "MI300X", "MI355X")

#: Colours of the two bounds (colour-blind safe: blue and orange).
BOUND_COLOURS = {"math": "#0072B2", "memory": "#E69F00"}
#: Colours of the roofs of the batch figure (none of them a bound's colour).
_ROOF_COLOURS = ("#555555", "#009E73", "#CC79A7", "#56B4E9")
#: Operations closer than this (decades of intensity) have their names on opposite sides.
_NEIGHBOURS_DECADES = 0.2
#: Decades of intensity one character of a name takes at the figure's width (about 6.5 px of 117 per decade).
_CHAR_DECADES = 0.056
#: Intensities drawn on the x axis, FLOP/byte.
_X_RANGE = (0.06, 1e4)


def _spec(device: DeviceSpec | str, param: str) -> DeviceSpec:
    return resolve_spec(device, param=f"each of {param}", none_ok=False)


def _specs(devices: Iterable[DeviceSpec | str] | None, dtype: str, *, skip_missing: bool = False) -> list[DeviceSpec]:
    """The devices to offer: ``devices``, or every known GPU with a ``dtype`` peak; ``skip_missing``
    leaves out those of ``devices`` without one (a default list asked for another dtype)."""
    if devices is None:
        return [s for s in KNOWN_DEVICES.values() if dtype in s.peaks and s.mem_bandwidth]
    if isinstance(devices, (str, DeviceSpec)) or not isinstance(devices, Iterable):
        raise TypeError(f"devices must be a list of DeviceSpecs or device names, got {devices!r}")
    specs = [_spec(d, "devices") for d in devices]
    if skip_missing:
        specs = [s for s in specs if dtype in s.peaks and s.mem_bandwidth]
    if not specs:
        raise ValueError("devices must name at least one device")
    for s in specs:
        s.ops_per_byte(dtype)  # LookupError naming the dtype or the bandwidth this device lacks
    return specs


def menu_label(spec: DeviceSpec) -> str:
    """A device's name in the menu, with its generation: ``"H100-SXM (Hopper)"``, ``"MI300X (AMD CDNA 3)"``."""
    fam = family(spec)
    if fam not in FAMILIES:
        return spec.name
    word = f"CDNA {fam[4:]}" if fam.startswith("cdna") else fam.capitalize()
    return f"{spec.name} ({'AMD ' if VENDOR[fam] == 'AMD' else ''}{word})"


def _roof(spec: DeviceSpec, dtype: str) -> dict:
    """The roof as three points (log-log): where the axis starts, the ridge, where it ends."""
    ridge, peak = spec.ops_per_byte(dtype), spec.peak_flop_s(dtype) / TERA
    lo, hi = min(_X_RANGE[0], ridge), max(_X_RANGE[1], ridge)
    return {"x": rounded([lo, ridge, hi]), "y": rounded([attainable_flop_s(lo, spec, dtype) / TERA, peak, peak])}


def _bound(op: Operation, spec: DeviceSpec, dtype: str) -> tuple[float, float, str]:
    """Attainable TFLOP/s of ``op`` on ``spec``, its roofline time (s) and its bound."""
    seconds, bound = roofline_time(op.flops, op.bytes, spec, dtype)
    return attainable_flop_s(op.intensity, spec, dtype) / TERA, seconds, bound


def _text_positions(intensities: Sequence[float], labels: Sequence[str], x_max: float) -> list[str]:
    """Where each operation's name sits: under the roof, to the right; above it, to the left, when
    the name would run past ``x_max`` or into the name of the next operation (by intensity)."""
    order = sorted(range(len(intensities)), key=lambda i: intensities[i])
    where = ["bottom right"] * len(intensities)
    for i in order:
        if math.log10(x_max / intensities[i]) < len(labels[i]) * _CHAR_DECADES:
            where[i] = "top left"
    for i, j in zip(order, order[1:]):
        if math.log10(intensities[j] / intensities[i]) < _NEIGHBOURS_DECADES and where[j] == "bottom right":
            where[i] = "top left"
    return where


def _log_range(lo: float, hi: float, pad: float = 0.15) -> list[float]:
    return [math.log10(lo) - pad, math.log10(hi) + pad]


def roofline_by_device(operations: Sequence[Operation] | None = None, *,
                       devices: Iterable[DeviceSpec | str] | None = BOOK_GPUS, dtype: Any = "float16",
                       active: str = "H100-SXM") -> InteractiveFigure:
    """A roofline with a drop-down over ``devices`` (default: :data:`BOOK_GPUS`, those with a
    ``dtype`` peak; None: every known GPU with one), each named with its vendor in the menu,
    placing ``operations`` (default: :func:`~perfkit.roofline.nvidia_example_operations`) on the
    chosen device's roof, each named with its bound (math or memory) there.

    The axes stay fixed, so choosing another GPU moves its roof and ridge point under the
    operations. ``active`` names the device shown first.
    """
    dtype = canonical_dtype(dtype)
    ops = nvidia_example_operations(dtype) if operations is None else list(operations)
    if not ops or not all(isinstance(op, Operation) for op in ops):
        raise TypeError(f"operations must be a non-empty list of perfkit Operations, got {operations!r}")
    if any(op.intensity <= 0 for op in ops):
        raise ValueError("operations must all do some FLOPs: 0 FLOP/byte has no place on a log axis")
    specs = _specs(None, dtype) if devices is None else _specs(devices, dtype, skip_missing=devices is BOOK_GPUS)
    names = [s.name for s in specs]
    if active not in names:
        raise ValueError(f"active must be one of the devices ({', '.join(names)}), got {active!r}")
    xs = rounded([op.intensity for op in ops])
    x_range = _log_range(min(min(xs), _X_RANGE[0]), max(max(xs), _X_RANGE[1]), 0.05)
    where = _text_positions([op.intensity for op in ops], [f"{op.name}: memory" for op in ops], 10 ** x_range[1])

    states = []
    for spec in specs:
        points = [_bound(op, spec, dtype) for op in ops]
        ridge = spec.ops_per_byte(dtype)
        n_math = sum(b == "math" for _, _, b in points)
        hover = [f"{op.name}<br>{op.intensity:.3g} FLOP/byte<br>{y:.3g} TFLOP/s attainable<br>"
                 f"{b}-bound: {format_time(t)}" for op, (y, t, b) in zip(ops, points)]
        states.append(State(menu_label(spec), [
            _roof(spec, dtype),
            {"x": rounded([ridge]), "y": rounded([spec.peak_flop_s(dtype) / TERA]),
             "text": [f"ops:byte {ridge:.3g}"]},
            {"y": rounded([y for y, _, _ in points]), "text": [f"{op.name}: {b}" for op, (_, _, b) in zip(ops, points)],
             "hovertext": hover, "marker.color": [BOUND_COLOURS[b] for _, _, b in points]},
        ], {**retitle(f"Roofline of {spec.name}, {dtype}", modelled(spec)),
            "annotations[0].text": f"{n_math} of {len(ops)} math-bound on {spec.name}: ridge at "
                                   f"{ridge:.3g} FLOP/byte (blue: math-bound, orange: memory-bound)"}))

    lows = [attainable_flop_s(min(op.intensity for op in ops), s, dtype) / TERA for s in specs]
    highs = [s.peak_flop_s(dtype) / TERA for s in specs]
    traces = [
        go.Scatter(x=[], y=[], mode="lines", line={"color": "#444", "width": 2.5}, name="roof", hoverinfo="skip"),
        go.Scatter(x=[], y=[], mode="markers+text", marker={"color": "#444", "size": 9}, textposition="bottom right",
                   name="ridge point", hoverinfo="x+y"),
        go.Scatter(x=xs, y=[], mode="markers+text", marker={"size": 11, "symbol": "square",
                                                             "line": {"color": "black", "width": 1}},
                   textposition=where, name="operations", hoverinfo="text"),
    ]
    layout = {
        **heading(f"Roofline of {active}, {dtype}", modelled(specs[names.index(active)])),
        "xaxis": {"type": "log", "title": "arithmetic intensity (FLOP/byte)",
                  "range": x_range},
        "yaxis": {"type": "log", "title": f"attainable {dtype} TFLOP/s",
                  "range": _log_range(min(lows), max(highs), 0.3)},
        "showlegend": False, "height": 500, "margin": {"t": 55, "b": 72, "l": 65},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 0, "yshift": -50,
                         "yanchor": "top", "showarrow": False, "xanchor": "left"}],
    }
    figure = with_menu(traces, states, active=names.index(active), layout=layout)
    alt = (f"A log-log roofline (attainable {dtype} TFLOP/s against FLOP per byte) with {len(ops)} operations "
           "on it, each named with its bound. A drop-down chooses the GPU: its roof and ridge point move under "
           "the operations, and an operation turns math-bound only when its intensity clears the ridge.")
    return InteractiveFigure(figure, alt=alt, name="background-roofline-by-device")


def _batches(in_features: int, out_features: int, specs: Sequence[DeviceSpec], dtype: str) -> list[int]:
    """Batches from 1 to 8192 in steps of about ×1.5, and each device's math-bound batch."""
    steps = {b * m for b in (1 << k for k in range(14)) for m in (1, 1.5) if b * m <= 8192 and b * m % 1 == 0}
    crossings = {math_bound_batch(in_features, out_features, s, dtype) for s in specs}
    return sorted(int(b) for b in steps | {c for c in crossings if c is not None})


def gemm_batch_roofline(in_features: int = 1024, out_features: int = 4096, *,
                        devices: Sequence[DeviceSpec | str] = ("V100-SXM2", "H100-SXM"), dtype: Any = "float16",
                        batches: Sequence[int] | None = None, active: int = 0) -> InteractiveFigure:
    """A slider over the batch of a linear layer (``in_features`` → ``out_features``): its forward
    GEMM (M = ``out_features``, N = batch, K = ``in_features``) moves along each device's roof.

    Each state places the GEMM at its intensity (:func:`~perfkit.roofline.arithmetic_intensity`)
    on every roof, with its bound and roofline time (:func:`~perfkit.roofline.roofline_time`).
    ``batches`` (default: 1 … 8192, with each device's :func:`~perfkit.roofline.math_bound_batch`)
    are the slider's stops; ``active`` indexes the first one shown.
    """
    dtype = canonical_dtype(dtype)
    specs = _specs(devices, dtype)
    gemm_operation(out_features, 1, in_features, dtype)  # validates the sizes, naming them M and K
    stops = _batches(in_features, out_features, specs, dtype) if batches is None else list(batches)
    if len(stops) < 2 or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in stops):
        raise ValueError(f"batches must hold at least two positive integers, got {batches!r}")
    crossings = [math_bound_batch(in_features, out_features, s, dtype) for s in specs]
    said = "; ".join(f"{s.name} at batch {c}" if c else f"{s.name} never" for s, c in zip(specs, crossings))

    states = []
    for n in stops:
        op = gemm_operation(out_features, n, in_features, dtype)
        parts = []
        for s in specs:
            y, t, b = _bound(op, s, dtype)
            parts.append({"x": rounded([op.intensity]), "y": rounded([y]),
                          "text": [f"{s.name}: {b}, {format_time(t)}"],
                          "marker.color": [BOUND_COLOURS[b]]})
        intensity = arithmetic_intensity(out_features, n, in_features, dtype)
        states.append(State(str(n), [{}] * (2 * len(specs)) + parts, {
            "annotations[0].text": f"batch {n}: GEMM {out_features}×{n}×{in_features}, {intensity:.3g} FLOP/byte"
                                   f"<br>math-bound from {said}"}))

    traces = []
    for i, s in enumerate(specs):
        colour = _ROOF_COLOURS[i % len(_ROOF_COLOURS)]
        traces += [go.Scatter(**_roof(s, dtype), mode="lines", line={"width": 2.5, "color": colour},
                              name=f"{s.name}: {s.peak_flop_s(dtype) / TERA:,.0f} TFLOP/s, "
                                   f"{s.mem_bandwidth / 1e9:,.0f} GB/s, ridge {s.ops_per_byte(dtype):.3g} FLOP/byte"),
                   go.Scatter(x=rounded([s.ops_per_byte(dtype)]), y=rounded([s.peak_flop_s(dtype) / TERA]),
                              mode="markers", marker={"size": 9, "color": colour}, showlegend=False,
                              hoverinfo="x+y")]
    traces += [go.Scatter(x=[], y=[], mode="markers+text", textposition="bottom right",
                          marker={"size": 13, "symbol": "square", "line": {"color": "black", "width": 1}},
                          name=f"the GEMM on {s.name}", showlegend=False, hoverinfo="x+y+text") for s in specs]
    lo = min(attainable_flop_s(arithmetic_intensity(out_features, min(stops), in_features, dtype), s, dtype)
             for s in specs) / TERA
    hi = max(s.peak_flop_s(dtype) for s in specs) / TERA
    x_lo = arithmetic_intensity(out_features, min(stops), in_features, dtype)
    x_hi = max([arithmetic_intensity(out_features, max(stops), in_features, dtype)]
               + [s.ops_per_byte(dtype) for s in specs])
    source = caption([modelled(s) for s in specs])
    layout = {**heading(f"Linear layer {in_features}→{out_features}, {dtype}: the batch moves its GEMM "
                               "along the roof", source),
              "xaxis": {"type": "log", "title": "arithmetic intensity (FLOP/byte)",
                        "range": _log_range(x_lo / 2, x_hi * 12, 0)},
              "yaxis": {"type": "log", "title": f"attainable {dtype} TFLOP/s", "range": _log_range(lo, hi, 0.3)},
              "height": 580, "margin": {"t": 90, "b": 135},
              "legend": {"orientation": "v", "x": 0.99, "y": 0.02, "xanchor": "right", "yanchor": "bottom",
                         "bgcolor": "rgba(255,255,255,0.85)"},
              "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.01, "showarrow": False,
                               "xanchor": "left", "yanchor": "bottom", "align": "left"}]}
    if not 0 <= active < len(stops):
        raise ValueError(f"active must index batches (0 … {len(stops) - 1}), got {active}")
    figure = with_slider(traces, states, prefix="batch = ", active=active, layout=layout)
    alt = (f"A log-log roofline of {', '.join(s.name for s in specs)} with the forward GEMM of a "
           f"{in_features}→{out_features} linear layer on each roof. The slider sets the batch: the GEMM's "
           "intensity grows with it, so the point climbs the sloped, memory-bound part of each roof until it "
           "passes that GPU's ridge and turns math-bound, at a larger batch on the newer GPU.")
    return InteractiveFigure(figure, alt=alt, name="background-gemm-batch")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {
    "roofline_by_device": roofline_by_device,
    "gemm_batch_roofline": gemm_batch_roofline,
}
