"""Units: the scale constants and the one formatter of durations that every module uses.

perfkit computes in base units (seconds, bytes, FLOP/s, bytes/s) and scales only to print or
label. Figures scale their axes with :class:`matplotlib.ticker.EngFormatter` (see
:mod:`perfkit.plots`); text uses :func:`format_time` and :func:`format_percent`.
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


def format_percent(fraction: float) -> str:
    """A fraction as a percentage: ``0.004`` → ``'0.4%'``, ``1.7`` → ``'170%'``, NaN/inf → ``'n/a'``."""
    if not math.isfinite(fraction):
        return "n/a"
    return f"{100 * fraction:.1f}%" if abs(fraction) < 1 else f"{100 * fraction:.0f}%"


__all__ = ["GIGA", "GiB", "MiB", "TERA", "format_percent", "format_time"]
