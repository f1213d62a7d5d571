"""The problems of chapter 90_timing, with answers computed by perfkit."""

from __future__ import annotations

import inspect

import numpy as np

from ...measurement import GROSS_NOISE_THRESHOLD, NOISE_THRESHOLD, Measurement, to_tflop_s
from ...roofline import gemm_flops
from ...timing import _sample_count, bench
from ...units import format_time
from ..exercise import Exercise

CHAPTER = "90_timing"

#: Problem 1: ten samples in milliseconds, two of them interrupted.
SLOW_TWICE_MS = (2.0, 2.1, 2.0, 20.0, 2.1, 2.0, 2.2, 2.0, 20.0, 2.1)
#: Problem 2: ten samples in milliseconds from a machine doing other work.
BUSY_MS = (1.00, 1.02, 1.05, 1.10, 1.12, 1.15, 1.30, 1.01, 1.03, 1.20)
#: Problem 3: a 4096³ GEMM and its median, in seconds.
GEMM_SIZE, GEMM_MEDIAN_S = 4096, 160e-6
#: Problem 4: one call lasting two seconds.
LONG_CALL_S = 2.0
#: What pk.bench's report says of a Measurement, by its IQR/median.
VERDICTS = ("quiet", "noisy", "very noisy")


def _measurement(ms: tuple[float, ...]) -> Measurement:
    return Measurement(samples=np.asarray(ms) * 1e-3)


def _verdict(noise: float) -> str:
    return VERDICTS[2] if noise > GROSS_NOISE_THRESHOLD else VERDICTS[1] if noise > NOISE_THRESHOLD else VERDICTS[0]


def _range_verdict() -> str:
    """The verdict if the full range (max − min) stood in for the IQR."""
    m = _measurement(BUSY_MS)
    return _verdict((m.samples.max() - m.samples.min()) / m.median)


def _bench_default(name: str) -> float:
    return inspect.signature(bench).parameters[name].default


def _samples_of(call_s: float, max_time_s: float) -> int:
    return _sample_count(_bench_default("rep_s"), call_s, max_time_s)


EXERCISES: list[Exercise] = [
    Exercise(
        id="timing-1", chapter=CHAPTER,
        question=(f"pk.bench took these ten samples, in milliseconds: {', '.join(map(str, SLOW_TWICE_MS))}. "
                  "Build pk.Measurement(samples=...) from them (in seconds): what median does it report, in "
                  "milliseconds?"),
        solve=lambda: _measurement(SLOW_TWICE_MS).median * 1e3,
        unit="ms", fmt="{:.2f}",
        hint="sort the samples; with an even count the median is the mean of the middle two.",
        mistakes=((lambda: _measurement(SLOW_TWICE_MS).mean * 1e3,
                   f"that is the mean, which the two interrupted {format_time(max(SLOW_TWICE_MS) / 1e3)} "
                   "samples pull up."),),
    ),
    Exercise(
        id="timing-2", chapter=CHAPTER,
        question=(f"A Measurement holds these samples, in milliseconds: {', '.join(f'{v:.2f}' for v in BUSY_MS)}. "
                  "Is its report quiet, noisy (IQR/median above 10 %) or very noisy (above 25 %)? "
                  "Compute m.noise."),
        solve=lambda: _verdict(_measurement(BUSY_MS).noise),
        choices=VERDICTS,
        hint="the IQR is p75 − p25 of the samples (m.iqr), divided by the median.",
        mistakes=((_range_verdict,
                   "that judges the full range (max − min); the IQR keeps only the middle half of the samples, "
                   "so one slow sample cannot inflate it."),),
    ),
    Exercise(
        id="timing-3", chapter=CHAPTER,
        question=(f"pk.bench reports a median of {format_time(GEMM_MEDIAN_S)} for a {GEMM_SIZE}³ bfloat16 GEMM. "
                  "What throughput is that, in TFLOP/s (pk.timing.to_tflop_s and pk.gemm_flops)?"),
        solve=lambda: to_tflop_s(GEMM_MEDIAN_S, gemm_flops(GEMM_SIZE, GEMM_SIZE, GEMM_SIZE)),
        unit="TFLOP/s", fmt="{:,.4g}",
        hint=f"perfkit takes seconds: {format_time(GEMM_MEDIAN_S)} is {GEMM_MEDIAN_S:g} s, and a GEMM does "
             "2·M·N·K FLOPs.",
        mistakes=(
            (lambda: to_tflop_s(GEMM_MEDIAN_S, gemm_flops(GEMM_SIZE, GEMM_SIZE, GEMM_SIZE)) / 2,
             "half of it: a multiply-add is two FLOPs, so an M×N×K GEMM does 2·M·N·K."),
            (lambda: to_tflop_s(GEMM_MEDIAN_S * 1e3, gemm_flops(GEMM_SIZE, GEMM_SIZE, GEMM_SIZE)),
             "a thousand times too small: the median was passed in milliseconds; perfkit takes seconds."),
        ),
    ),
    Exercise(
        id="timing-4", chapter=CHAPTER,
        question=(f"How many samples does pk.bench take, with its default rep_s and max_time_s, of a function "
                  f"whose every call lasts {LONG_CALL_S:g} s?"),
        solve=lambda: _samples_of(LONG_CALL_S, _bench_default("max_time_s")),
        unit="samples", rel_tol=0, close_tol=0.10, fmt="{:,.0f}",
        hint="rep_s asks for at least 10 samples, but max_time_s caps the seconds spent sampling.",
        mistakes=(
            (lambda: _samples_of(LONG_CALL_S, 1e9),
             "that is the floor of 10 samples; max_time_s (10 s by default) stops the run sooner."),
        ),
    ),
]
