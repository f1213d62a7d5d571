"""Measurement: the samples of one :func:`perfkit.bench` run, their statistics and throughputs.

Samples are seconds per call. The median is the number to quote; IQR/median ("noise") above
:data:`NOISE_THRESHOLD` marks a measurement as noisy. How the samples are taken is described in
the appendix "how perfkit times" (``chapters/90_timing.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ._validate import positive_number
from .units import GIGA, TERA, format_percent, format_time

#: IQR/median above which a measurement is flagged noisy, and very noisy (torch.utils.benchmark's).
NOISE_THRESHOLD = 0.10
GROSS_NOISE_THRESHOLD = 0.25


class NoiseWarning(UserWarning):
    """A measurement whose inter-quartile range is more than 10 % of its median."""


@dataclass(eq=False)
class Measurement:
    """The samples of one :func:`perfkit.bench` run, with their statistics and where they were taken.

    ``samples`` are seconds per call (one per sample). Statistics are computed from them:
    ``median``, ``iqr`` (p75 − p25), ``mean``, ``min``, ``n`` and ``noise`` (iqr / median).
    """

    samples: np.ndarray
    label: str = "fn"
    device: str = ""
    flush_l2: bool = False
    cuda_graph: bool = False
    calls_per_sample: int = 1
    warnings: list[str] = field(default_factory=list)
    first_call_s: float | None = None

    def __post_init__(self):
        self.samples = np.asarray(self.samples, dtype=np.float64).ravel()
        if self.samples.size == 0:
            raise ValueError("samples must contain at least one time")

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.samples.size)

    @property
    def median(self) -> float:
        """Median seconds per call: the number to quote."""
        return float(np.median(self.samples))

    @property
    def mean(self) -> float:
        """Mean seconds per call (moved by outliers; quote the median)."""
        return float(np.mean(self.samples))

    @property
    def min(self) -> float:
        """Fastest sample, in seconds per call."""
        return float(np.min(self.samples))

    @property
    def p25(self) -> float:
        """25th percentile of the samples, in seconds."""
        return float(np.percentile(self.samples, 25))

    @property
    def p75(self) -> float:
        """75th percentile of the samples, in seconds."""
        return float(np.percentile(self.samples, 75))

    @property
    def iqr(self) -> float:
        """Inter-quartile range p75 − p25, in seconds."""
        return self.p75 - self.p25

    @property
    def noise(self) -> float:
        """Relative noise: IQR / median (0.004 means 0.4 %)."""
        med = self.median
        return self.iqr / med if med > 0 else math.inf

    def tflop_s(self, flops: float) -> float:
        """Throughput from the median: ``flops`` / median / TERA (TFLOP/s)."""
        return to_tflop_s(self, flops)

    def gbps(self, nbytes: float) -> float:
        """Bandwidth from the median: ``nbytes`` / median / GIGA (GB/s)."""
        return to_gbps(self, nbytes)

    def __repr__(self) -> str:
        where = f" on {self.device}" if self.device else ""
        details = [f"IQR {format_percent(self.noise)}", f"n={self.n}"]
        if self.cuda_graph:
            details.append(f"CUDA graph of {self.calls_per_sample} calls")
        elif self.calls_per_sample > 1:
            details.append(f"blocks of {self.calls_per_sample} calls")
        if self.device and not self.device.startswith("CPU"):
            details.append("L2 flushed" if self.flush_l2 else "L2 warm")
        text = f"{self.label}{where}: {format_time(self.median)} median ({', '.join(details)})"
        if self.warnings and any("IQR" in w for w in self.warnings):
            text += " [noisy]"
        return text

    __str__ = __repr__


def noise_message(label: str, noise: float) -> str | None:
    """The warning for a measurement whose IQR/median is ``noise``, or None below 10 %."""
    if noise > GROSS_NOISE_THRESHOLD:
        return (f"{label}: IQR is {format_percent(noise)} of the median "
                f"(> {100 * GROSS_NOISE_THRESHOLD:.0f} %): significant environmental influence; "
                "close other work and measure again")
    if noise > NOISE_THRESHOLD:
        return (f"{label}: IQR is {format_percent(noise)} of the median "
                f"(> {100 * NOISE_THRESHOLD:.0f} %): the system fluctuated during the measurement")
    return None


def _seconds_of(measurement_or_seconds: Measurement | float) -> float:
    if isinstance(measurement_or_seconds, Measurement):
        return measurement_or_seconds.median
    return positive_number("measurement_or_seconds", measurement_or_seconds)


def to_tflop_s(measurement_or_seconds: Measurement | float, flops: float) -> float:
    """TFLOP/s (TERA FLOP/s) for ``flops`` done in a Measurement's median or in a number of seconds."""
    seconds = _seconds_of(measurement_or_seconds)
    flops = positive_number("flops", flops)
    return flops / seconds / TERA if seconds > 0 else math.inf


def to_gbps(measurement_or_seconds: Measurement | float, nbytes: float) -> float:
    """GB/s (GIGA bytes/s) for ``nbytes`` moved in a Measurement's median or in a number of seconds."""
    seconds = _seconds_of(measurement_or_seconds)
    nbytes = positive_number("bytes", nbytes)
    return nbytes / seconds / GIGA if seconds > 0 else math.inf


__all__ = ["GROSS_NOISE_THRESHOLD", "Measurement", "NOISE_THRESHOLD", "NoiseWarning", "noise_message",
           "to_gbps", "to_tflop_s"]
