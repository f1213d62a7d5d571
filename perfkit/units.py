"""Units: the scale constants and the one formatter of durations that every module uses.

perfkit computes in base units (seconds, bytes, FLOP/s, bytes/s) and scales only to print or
label. Figures scale their axes with :class:`matplotlib.ticker.EngFormatter` (see
:mod:`perfkit.plots`); text uses :func:`format_time`, :func:`format_rate` and :func:`format_percent`.
"""

from __future__ import annotations

import math

#: Decimal scales: TFLOP/s = FLOP/s / TERA, GB/s = bytes/s / GIGA.
TERA = 1e12
GIGA = 1e9
#: Binary sizes: MiB and GiB in bytes.
MiB = 1 << 20
GiB = 1 << 30

_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def format_time(seconds: float) -> str:
    """A duration with three significant digits and an SI unit: ``'173 µs'``, ``'2.60 µs'``, ``'1.50 s'``.

    A value that would round up to 1000 of a unit moves to the next unit (``0.9999e-3`` prints as
    ``'1.00 ms'``). Non-finite values print as ``'inf s'`` or ``'nan s'``.
    """
    if not math.isfinite(seconds):
        return f"{seconds} s"
    i = next((k for k, (_, scale) in enumerate(_TIME_UNITS) if abs(seconds) >= scale), len(_TIME_UNITS) - 1)
    while True:
        unit, scale = _TIME_UNITS[i]
        v = seconds / scale
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
        if round(abs(v), digits) >= 1000 and i > 0:
            i -= 1
            continue
        return f"{v:.{digits}f} {unit}"


def time_column(name: str, unit: str) -> tuple[str, float]:
    """A table header for a column of seconds shown in ``unit`` (``"s"``, ``"ms"``, ``"µs"`` or
    ``"ns"``), and the factor that converts: ``("time_s", "µs")`` → ``("time (µs)", 1e6)``."""
    scales = dict(_TIME_UNITS)
    if unit not in scales:
        raise ValueError(f"unit must be one of {list(scales)}, got {unit!r}")
    stem = name[:-2] if name.endswith("_s") else name
    return f"{stem.replace('_', ' ')} ({unit})", 1.0 / scales[unit]


def format_rate(per_second: float, unit: str = "FLOP") -> str:
    """A rate with the prefix that keeps it readable: ``'989.4 TFLOP/s'``, ``'1.2 GFLOP/s'``
    (never ``'0.0 TFLOP/s'``); ``unit`` is what is counted per second (``"FLOP"``, ``"OP"``, ``"B"``)."""
    if not math.isfinite(per_second):
        return f"{per_second} {unit}/s"
    for prefix, scale in (("T", TERA), ("G", GIGA), ("M", 1e6)):
        if abs(per_second) >= scale:
            return f"{per_second / scale:,.1f} {prefix}{unit}/s"
    return f"{per_second:,.1f} {unit}/s"


def format_percent(fraction: float) -> str:
    """A fraction as a percentage: ``0.004`` → ``'0.4%'``, ``1.7`` → ``'170%'``, NaN/inf → ``'n/a'``."""
    if not math.isfinite(fraction):
        return "n/a"
    return f"{100 * fraction:.1f}%" if abs(fraction) < 1 else f"{100 * fraction:.0f}%"


__all__ = ["GIGA", "GiB", "MiB", "TERA", "format_percent", "format_rate", "format_time", "time_column"]
