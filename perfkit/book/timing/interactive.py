"""Interactive figures of chapter 90_timing (see perfkit.interactive): how the median, the IQR and
the mean of a real :class:`~perfkit.measurement.Measurement` settle as samples are kept.

Every statistic is the Measurement's own (``median``, ``p25``, ``p75``, ``mean``, ``noise``) of
the first k samples. Units: seconds.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import plotly.graph_objects as go

from ..._validate import positive_int
from ...measurement import NOISE_THRESHOLD, Measurement, NoiseWarning
from ...provenance import Source, live
from ...timing import bench
from ...units import format_percent, format_time
from ..interactive import InteractiveFigure, State, heading, rounded, with_slider

__all__ = ["FIGURES", "samples_settle"]

#: Most points drawn per running-statistic curve (the page stays small for 1000 samples).
_CURVE_POINTS = 150


def _stops(n: int, steps: int) -> list[int]:
    """Numbers of samples kept at the slider's stops: every one up to ``steps``, else spread
    geometrically (the statistics move most at the start), always ending at ``n``."""
    if n <= steps:
        return list(range(1, n + 1))
    ks = np.unique(np.round(np.geomspace(1, n, steps)).astype(int))
    return sorted(set(ks.tolist()) | {n})


def _time_axis(samples: np.ndarray) -> dict:
    """A y axis of seconds showing every sample, ticks labelled by :func:`~perfkit.units.format_time`:
    logarithmic (1-2-5 ticks) when the samples span more than ×3, else linear."""
    lo, hi = float(samples.min()), float(samples.max())
    if hi / max(lo, 1e-12) > 3:
        decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        ticks = [m * 10.0 ** e for e in decades for m in (1, 2, 5) if lo / 1.3 <= m * 10.0 ** e <= hi * 1.3]
        span = {"type": "log", "range": [math.log10(lo / 1.3), math.log10(hi * 1.3)]}
    else:
        pad = max(hi - lo, hi * 0.02) * 0.08
        raw = (hi - lo + 2 * pad) / 5
        step = min(m * 10.0 ** math.floor(math.log10(raw)) for m in (1, 2, 5, 10)
                   if m * 10.0 ** math.floor(math.log10(raw)) >= raw)
        ticks = list(np.arange(math.ceil((lo - pad) / step) * step, hi + pad, step))
        span = {"type": "linear", "range": [lo - pad, hi + pad]}
    return {**span, "tickvals": rounded(ticks), "ticktext": [format_time(t) for t in ticks]}


def _first(m: Measurement, k: int) -> Measurement:
    """The Measurement of ``m``'s first ``k`` samples."""
    return Measurement(samples=m.samples[:k], label=m.label, device=m.device)


def _default_measurement() -> Measurement:
    """A short live measurement on this machine's CPU: a NumPy sort of 65,536 floats."""

    data = np.random.default_rng(0).random(1 << 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseWarning)  # the figure shows the spread itself
        return bench(lambda: np.sort(data), warmup_s=0.01, rep_s=0.1, device="cpu",
                     label="NumPy sort of 65,536 floats")


def samples_settle(m: Measurement | None = None, *, source: Source | str | None = None,
                   steps: int = 40) -> InteractiveFigure:
    """The samples of ``m`` in the order they were taken, with the median, the IQR band
    (p25 … p75) and the mean of the first k samples drawn against k; a slider sets k.

    Moving the slider uncovers the samples up to k and reads out their statistics, so the reader
    sees which settles early (the median, the IQR) and which jumps with every outlier (the mean).
    ``m`` defaults to a short live measurement of a NumPy sort on this machine's CPU; ``source``
    defaults to a live measurement on ``m``'s device, today. ``steps`` caps the slider's stops.
    """
    if m is None:
        m = _default_measurement()
    if not isinstance(m, Measurement):
        raise TypeError(f"m must be a perfkit Measurement (from perfkit.bench), got {type(m).__name__}")
    if m.n < 2:
        raise ValueError(f"m must hold at least two samples to watch them settle, got {m.n}")
    if source is not None and not isinstance(source, (Source, str)):
        raise TypeError(f"source must be a perfkit.Source, a string or None, got {type(source).__name__}")
    steps = positive_int("steps", steps)
    if steps < 2:
        raise ValueError(f"steps must be at least 2, got {steps}")
    source = source if source is not None else live(m.device or None)

    n, order = m.n, list(range(1, m.n + 1))
    js = _stops(n, _CURVE_POINTS) if n > _CURVE_POINTS else list(range(1, n + 1))
    firsts = [_first(m, j) for j in js]
    med, p25, p75, mean = ([getattr(f, s) for f in firsts] for s in ("median", "p25", "p75", "mean"))
    keep: dict = {}  # the traces that stay as they are
    traces = [
        go.Scatter(x=js, y=rounded(p75), mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip"),
        go.Scatter(x=js, y=rounded(p25), mode="lines", line={"width": 0}, fill="tonexty",
                   fillcolor="rgba(0,114,178,0.18)", name="IQR (p25 … p75)", hoverinfo="skip"),
        go.Scatter(x=order, y=rounded(m.samples), mode="markers", marker={"size": 6, "color": "#555"},
                   name="each sample", hovertemplate="sample %{x}: %{y:.3s}s<extra></extra>"),
        go.Scatter(x=js, y=rounded(med), mode="lines", line={"color": "#0072B2", "width": 2.5},
                   name="median", hoverinfo="skip"),
        go.Scatter(x=js, y=rounded(mean), mode="lines", line={"color": "#D55E00", "width": 2, "dash": "dash"},
                   name="mean", hoverinfo="skip"),
        go.Scatter(x=[], y=[], mode="markers", marker={"size": 11, "color": ["#0072B2", "#D55E00"],
                                                       "line": {"color": "black", "width": 1}},
                   showlegend=False, hoverinfo="skip"),
    ]
    states = []
    for k in _stops(n, steps):
        f = _first(m, k)
        flag = ", noisy" if f.noise > NOISE_THRESHOLD else ""
        states.append(State(str(k), [keep, keep, keep, keep, keep,
                                     {"x": [k, k], "y": rounded([f.median, f.mean])}], {
            "shapes[0].x0": k + 0.5,
            "annotations[0].text": (f"first {k} of {n} samples: median {format_time(f.median)}, "
                                    f"IQR {format_time(f.iqr)} ({format_percent(f.noise)} of the median{flag}), "
                                    f"mean {format_time(f.mean)}")}))

    layout = {
        **heading(f"{m.label}: the statistics of the first k samples", source),
        "xaxis": {"title": "k: samples kept (each dot is sample number k; lines: statistics of the first k)",
                  "range": [0.5, n + 0.5]},
        "yaxis": {"title": "time per call", **_time_axis(m.samples)},
        "height": 540, "margin": {"t": 100, "b": 135},
        "shapes": [{"type": "rect", "xref": "x", "yref": "paper", "x0": n + 0.5, "x1": n + 0.5, "y0": 0, "y1": 1,
                    "fillcolor": "white", "opacity": 0.8, "line": {"width": 0}, "layer": "above"}],
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.09, "showarrow": False,
                         "xanchor": "left", "yanchor": "bottom", "align": "left"}],
        "legend": {"orientation": "h", "x": 0, "y": 1.01, "yanchor": "bottom"},
    }
    figure = with_slider(traces, states, prefix="k = ", active=len(states) - 1, layout=layout)
    alt = (f"The {n} samples of '{m.label}' plotted in the order they were taken, with the median, the IQR band "
           "and the mean of the first k samples drawn against k. The slider sets k and hides the samples not "
           "yet kept: the median and the IQR settle after a few samples, while the mean jumps at every slow one.")
    return InteractiveFigure(figure, alt=alt, name="timing-samples-settle")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"samples_settle": samples_settle}
