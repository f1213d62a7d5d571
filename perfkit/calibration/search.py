"""The model-guided search for a device's achievable matmul throughput (pure: it times nothing itself).

Public "maximum achievable matmul FLOPS" searches time GEMM shapes by brute force (the MAMF
finder's README: a 1-D sweep in a minute gets 80–90 % of the maximum; 3-D sweeps take hours to days). perfkit
has a model that knows which shapes fill whole tiles and whole waves (:mod:`perfkit.gemm_model`),
so :func:`guided_search` times only a few:

1. **Candidates** (:func:`candidate_shapes`): ``M = a·TM``, ``N = b·TN`` for the tiles the model
   rates fastest on the device, with ``a·b`` a whole number of waves of ``spec.sms`` work units and
   ``K`` a multiple of a large power of two (``2^p`` or ``1.5·2^p``), for which
   :func:`~perfkit.gemm_model.explain_gemm` predicts full waves and full tiles. They are ranked by
   the model's predicted throughput and picked to be diverse (aspect ratios, wave counts, ``K`` and
   operand bytes, where caches show), since the device is not the model: about 8 are timed (``quick``: 4).
   The lowest-ranked gives way to the largest **square power-of-two** shape inside the window and
   memory (e.g. 8192³ in bfloat16 on an H100-class GPU), whole waves or not: the vendor libraries are
   tuned best for those (on the H200, 8192³ ran 8 % faster than the best of the model's shapes).
2. **Refinement** around the best shape timed so far: ``M`` and ``N`` swapped, ``2K`` and ``K/2``, the
   next whole-wave tile counts up and down, and the same FLOPs with another aspect, in that order
   among those the model rates within 2 % of the best of them (the rest after, fastest first); never
   a shape already timed, only shapes inside the window and the memory limit.

**Stopping rule.** Stop when a refinement round raises the best measured throughput by less than ``min_gain``
(1 %), after ``max_rounds`` rounds (3), when ``max_trials`` timings are spent (14; ``quick``: 6), or when the
best shape has no untimed neighbour left. Each round times at most ``⌈left / rounds left⌉``.
:attr:`SearchResult.stopped` says which rule fired.

**Time window** (:func:`time_window_s`). Every shape timed has a predicted time per call inside a window: long
enough to amortize a kernel's fixed cost, short enough to time many (GPU: 0.1–10 ms; CPU, where a bfloat16
matmul runs at about 1 GFLOP/s: 5–60 ms). :func:`wide_search` is the comparison (``--thorough``): a geometric
grid that knows neither tiles nor waves, evenly subsampled to about 48 timings. Units: seconds, FLOP/s, bytes.
Both ask only for shapes torch's kernel for the dtype takes (:func:`perfkit.matmul.kernel_accepts`).
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from .._validate import boolean, non_negative_int, non_negative_number, positive_int
from ..ceilings import gemm_latency_s
from ..devices import DeviceSpec
from ..dtypes import canonical_dtype, itemsize, output_itemsize
from ..gemm_model import CANDIDATE_TILES, DEFAULT_MODEL, GemmPrediction, explain_gemm, shape_factor
from ..matmul import kernel_accepts
from ..roofline import gemm_flops

__all__ = ["SearchResult", "Trial", "candidate_shapes", "guided_search", "time_window_s", "wide_search"]

Shape = tuple[int, int, int]

#: Timings of the guided search by default and with ``quick``: candidates, then all trials.
CANDIDATES, QUICK_CANDIDATES = 8, 4
MAX_TRIALS, QUICK_MAX_TRIALS = 14, 6
#: Timings of the wide search by default.
WIDE_TRIALS = 48
#: Widest aspect ratio M/N (and N/M) of a candidate, and the widest ratio of its largest side to its smallest.
MAX_ASPECT, MAX_SPREAD = 8, 16
#: Wave counts tried (about 19 % apart), and the K values of candidates: 2^p and 1.5·2^p from 128.
_WAVES = sorted({round(2 ** (i / 4)) for i in range(72)})
_KS = sorted({k for p in range(7, 21) for k in (1 << p, 3 << (p - 1))})
#: Sides of the wide grid: 2^p and 1.5·2^p from 16 to 98304.
_GRID = np.array(sorted({v for p in range(4, 17) for v in (1 << p, 3 << (p - 1))}), dtype=np.int64)
#: How much a candidate's score drops for each chosen candidate sharing its aspect, waves or K.
_DIVERSITY = 0.97


@dataclass(frozen=True)
class Trial:
    """One timed GEMM: its shape, the measured median ``time_s`` and the model's ``predicted_s`` (seconds)."""

    M: int
    N: int
    K: int
    time_s: float
    predicted_s: float
    stage: str  # "candidate", "refine" or "wide"

    @property
    def flops(self) -> float:  # 2·M·N·K
        return float(gemm_flops(self.M, self.N, self.K))

    @property
    def flop_s(self) -> float:  # measured throughput, FLOP/s
        return self.flops / self.time_s


@dataclass(frozen=True)
class SearchResult:
    """Every timing of one search, in order, and why it stopped."""

    dtype: str
    method: str  # "guided" or "wide"
    trials: tuple[Trial, ...]
    rounds: int  # refinement rounds run (0 for the wide search)
    stopped: str  # one sentence: the stopping rule that fired

    @property
    def best(self) -> Trial:  # the trial with the highest measured throughput
        return max(self.trials, key=lambda t: t.flop_s)

    def frame(self) -> pd.DataFrame:
        """One row per trial: dtype, method, stage, M, N, K, time_s, flop_s, predicted_s."""
        rows = [(self.dtype, self.method, t.stage, t.M, t.N, t.K, t.time_s, t.flop_s, t.predicted_s)
                for t in self.trials]
        return pd.DataFrame(rows, columns=["dtype", "method", "stage", "M", "N", "K", "time_s", "flop_s",
                                           "predicted_s"])


def _check_spec(spec: Any, model: bool = True) -> DeviceSpec:
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a perfkit DeviceSpec (e.g. device_spec('H100-SXM')), got {spec!r}")
    if model and not spec.sms or not spec.mem_bandwidth:
        raise LookupError(f"{spec.name} needs a known SM (core) count and memory bandwidth for the GEMM model")
    return spec


def _check_dtype(spec: DeviceSpec, dtype: Any) -> str:
    d = canonical_dtype(dtype)
    if d not in spec.peaks:
        have = ", ".join(map(repr, spec.peaks)) or "none"
        raise LookupError(f"dtype {d!r} has no peak on {spec.name}; dtypes with a peak: {have}")
    return d


def time_window_s(spec: DeviceSpec, quick: bool = False) -> tuple[float, float]:
    """The predicted seconds per call a timed shape must fall in, ``(lo, hi)``: long enough to
    amortize a kernel's fixed cost, short enough to time many. A GPU: (1e-4, 1e-2), ``quick``
    (1e-4, 3e-3); a CPU: (5e-3, 6e-2), ``quick`` (2e-3, 2e-2)."""
    spec, quick = _check_spec(spec, model=False), boolean("quick", quick)
    windows = {"gpu": ((1e-4, 1e-2), (1e-4, 3e-3)), "cpu": ((5e-3, 6e-2), (2e-3, 2e-2))}  # (default, quick)
    return windows["gpu" if spec.kind == "gpu" else "cpu"][quick]


def _check_window(window_s: Any) -> tuple[float, float]:
    lo, hi = window_s if isinstance(window_s, (tuple, list)) and len(window_s) == 2 else (None, None)
    ok = all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in (lo, hi))
    if not ok or not lo < hi:
        raise ValueError(f"window_s must be two positive numbers of seconds (lo, hi) with lo < hi, got {window_s!r}")
    return float(lo), float(hi)


def _check_limits(spec, window_s, max_bytes, quick) -> tuple[tuple[float, float], int]:
    """The window (default :func:`time_window_s`) and the byte limit (default an eighth of the device's
    memory, 1 GiB when unknown: room for A, B and C and the timer's copies)."""
    window = time_window_s(spec, quick) if window_s is None else _check_window(window_s)
    if max_bytes is None:
        return window, int(spec.memory_bytes) // 8 if spec.memory_bytes else 1 << 30
    return window, positive_int("max_bytes", max_bytes)


class _Model:
    """The GEMM model of one device and dtype, with its predictions cached and a quick estimate."""

    def __init__(self, spec: DeviceSpec, dtype: str):
        self.spec, self.dtype = spec, dtype
        cl = spec.ceilings
        self.flop_s = min(cl.flop_s_for(dtype), spec.peak_flop_s(dtype))
        self.bandwidth = min(cl.bandwidth, spec.mem_bandwidth)
        self.latency_s = gemm_latency_s(cl, DEFAULT_MODEL.latency_s) + cl.extra_latency_s.get(dtype, 0.0)
        self.reuse_half = DEFAULT_MODEL.reuse_half(self.flop_s, self.bandwidth)
        self.size, self.out_size = itemsize(dtype), output_itemsize(dtype)
        self._cache: dict[Shape, GemmPrediction] = {}

    def explain(self, shape: Shape) -> GemmPrediction:
        if shape not in self._cache:
            self._cache[shape] = explain_gemm(*shape, self.dtype, self.spec)
        return self._cache[shape]

    def bytes(self, M, N, K):
        """Bytes of A, B and C (:func:`perfkit.roofline.gemm_bytes`), for numbers or numpy arrays alike."""
        return self.size * (M * K + K * N) + self.out_size * M * N

    def estimate_s(self, M, N, K, factor: float = 1.0):
        """Seconds if whole tiles and waves run at ``factor`` of the ceiling (numbers or numpy arrays)."""
        return np.maximum(2.0 * M * N * K / (self.flop_s * factor), self.bytes(M, N, K) / self.bandwidth) \
            + self.latency_s

    def fits(self, shape: Shape, window: tuple[float, float], max_bytes: int) -> bool:
        return (bool(kernel_accepts(*shape, self.dtype)) and self.bytes(*shape) <= max_bytes
                and window[0] <= self.explain(shape).predicted_s <= window[1])


def _whole(p: GemmPrediction) -> bool:
    return p.utilization == 1.0 and p.tile_efficiency == 1.0


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _bin(x: float) -> int:
    return round(math.log2(x))


def _square(model: _Model, window: tuple[float, float], max_bytes: int) -> Shape | None:
    """The largest n×n×n GEMM, n a power of two, inside the window and memory (``None``: none is)."""
    fits = [s for s in ((1 << p,) * 3 for p in range(4, 18)) if model.fits(s, window, max_bytes)]
    return fits[-1] if fits else None


def candidate_shapes(spec: DeviceSpec, dtype: Any, *, window_s: tuple[float, float], max_bytes: int,
                     count: int) -> list[Shape]:
    """Up to ``count`` (M, N, K) shapes that the model says fill whole tiles and whole waves on
    ``spec``, whose predicted time lies in ``window_s`` (seconds) and whose A, B and C fit in
    ``max_bytes``; diverse in aspect ratio, wave count, K and bytes; the last of them replaced by the
    largest square power-of-two shape inside the window and memory; ranked by predicted throughput.
    ``ValueError`` when the window and memory leave none."""
    spec = _check_spec(spec)
    dtype = _check_dtype(spec, dtype)
    window, max_bytes = _check_window(window_s), positive_int("max_bytes", max_bytes)
    count = positive_int("count", count)
    return _candidates(_Model(spec, dtype), window, max_bytes, count)


def _candidates(model: _Model, window: tuple[float, float], max_bytes: int, count: int) -> list[Shape]:
    lo, hi = window
    factors = {t: shape_factor(t, model.reuse_half) for t in CANDIDATE_TILES}
    top = max(factors.values())
    tiles = [t for t in CANDIDATE_TILES if factors[t] >= 0.97 * top][:4]
    W, k_min = model.spec.sms, _KS[0]
    pool: dict[tuple, list] = {}  # (aspect, waves, K, bytes) bins → best estimated entries [score, shape, bins]
    for tm, tn in tiles:
        f = factors[(tm, tn)]
        for w in _WAVES:
            n = w * W
            if 2.0 * n * tm * tn * k_min / (model.flop_s * f) > hi:
                break
            for a in _divisors(n):
                M, N = a * tm, (n // a) * tn
                if not 1 / MAX_ASPECT <= M / N <= MAX_ASPECT:
                    continue
                for K in _KS:
                    if max(M, N, K) > MAX_SPREAD * min(M, N, K):
                        if K > max(M, N):
                            break
                        continue
                    t = float(model.estimate_s(M, N, K, f))
                    if t > hi or model.bytes(M, N, K) > max_bytes:
                        break
                    if t >= lo / 2:
                        key = (_bin(M / N), _bin(w), _bin(K), _bin(model.bytes(M, N, K)))
                        pool.setdefault(key, []).append([2.0 * M * N * K / t, (M, N, K), key])
    entries = [e for group in pool.values() for e in sorted(group, key=lambda e: (-e[0], e[1]))[:3]]
    chosen, used, verified = [], [Counter() for _ in range(4)], set()
    while entries and len(chosen) < count:
        def score(e):
            return e[0] * _DIVERSITY ** sum(c[b] for c, b in zip(used, e[2]))

        i = max(range(len(entries)), key=lambda j: (score(entries[j]), entries[j][1]))
        entry = entries[i]
        if entry[1] not in verified:  # replace the estimate by the model's prediction, then rank again
            p = model.explain(entry[1])
            if not (_whole(p) and model.fits(entry[1], window, max_bytes)):
                entries.pop(i)
                continue
            entry[0] = p.achieved_flop_s
            verified.add(entry[1])
            continue
        entries.pop(i)
        chosen.append(entry)
        for c, b in zip(used, entry[2]):
            c[b] += 1
    shapes, square = [e[1] for e in sorted(chosen, key=lambda e: (-e[0], e[1]))], _square(model, window, max_bytes)
    if not shapes and square is None:
        raise ValueError(f"no GEMM shape fills whole tiles and waves of {model.spec.name} in {model.dtype} with a "
                         f"predicted time inside window_s=({lo:g}, {hi:g}) seconds and operands within "
                         f"max_bytes={max_bytes:,}; widen window_s or raise max_bytes")
    if square is not None and square not in shapes:  # it replaces the lowest-ranked
        shapes = shapes[:count - 1] + [square]
    return sorted(shapes, key=lambda s: (-model.explain(s).achieved_flop_s, s))


def _check_search(time_gemm, spec, dtype, max_trials, default_trials) -> tuple[DeviceSpec, str, int]:
    if not callable(time_gemm):
        raise TypeError(f"time_gemm must be a callable time_gemm(M, N, K) -> seconds, got {time_gemm!r}")
    spec = _check_spec(spec)
    dtype = _check_dtype(spec, dtype)
    max_trials = default_trials if max_trials is None else positive_int("max_trials", max_trials)
    return spec, dtype, max_trials


def _time(time_gemm: Callable, model: _Model, shape: Shape, stage: str) -> Trial:
    seconds = time_gemm(*shape)
    ok = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool) and math.isfinite(seconds) \
        and seconds > 0
    if not ok:
        raise ValueError(f"time_gemm{shape} must return a finite positive number of seconds, got {seconds!r}")
    return Trial(*shape, time_s=float(seconds), predicted_s=model.explain(shape).predicted_s, stage=stage)


def _closest_split(n: int, tile: tuple[int, int], aspect: float) -> tuple[int, int]:
    """``(a·TM, b·TN)`` with ``a·b = n`` tiles and M/N closest to ``aspect``."""
    tm, tn = tile
    a = min(_divisors(n), key=lambda d: (abs(math.log(d * tm / ((n // d) * tn) / aspect)), d))
    return a * tm, (n // a) * tn


def _neighbours(model: _Model, shape: Shape) -> list[Shape]:
    """Shapes around ``shape``, in order: M, N swapped; 2K, K/2; the next whole-wave tile counts; other aspects."""
    M, N, K = shape
    out = [(N, M, K), (M, N, 2 * K), (M, N, K // 2)]
    p = model.explain(shape)
    W = model.spec.sms
    waves = max(1, round(p.tiles / W))
    out += [(*_closest_split(w * W, p.tile, M / N), K) for w in (waves + 1, waves - 1) if w >= 1]
    out += [(2 * M, N // 2, K), (M // 2, 2 * N, K), (2 * M, N, K // 2), (M, 2 * N, K // 2),
            (M // 2, N, 2 * K), (M, N // 2, 2 * K)]
    return [s for s in dict.fromkeys(out) if min(s) >= 1 and s != shape]  # in order, each once


def guided_search(time_gemm: Callable[[int, int, int], float], spec: DeviceSpec, dtype: Any, *, quick: bool = False,
                  window_s: tuple[float, float] | None = None, max_bytes: int | None = None,
                  max_trials: int | None = None, min_gain: float = 0.01, max_rounds: int = 3) -> SearchResult:
    """Time the model's candidate shapes with ``time_gemm(M, N, K) -> seconds`` (a measured median),
    then refine around the best until the stopping rule of the module docstring fires.

    ``window_s`` (default :func:`time_window_s`) bounds each shape's predicted seconds per call;
    ``max_bytes`` (default an eighth of the device memory) bounds A + B + C; ``max_trials``
    (default 14, ``quick`` 6) bounds the timings; ``min_gain`` (≥ 0) is the relative gain below
    which a round ends the search; ``max_rounds`` (≥ 0) bounds the refinement rounds.
    """
    quick = boolean("quick", quick)
    spec, dtype, max_trials = _check_search(time_gemm, spec, dtype, max_trials, (MAX_TRIALS, QUICK_MAX_TRIALS)[quick])
    window, max_bytes = _check_limits(spec, window_s, max_bytes, quick)
    min_gain = non_negative_number("min_gain", min_gain)
    max_rounds = non_negative_int("max_rounds", max_rounds)
    model = _Model(spec, dtype)
    count = min(max_trials, QUICK_CANDIDATES if quick else CANDIDATES)  # the square is among those timed
    trials = [_time(time_gemm, model, s, "candidate") for s in _candidates(model, window, max_bytes, count)]
    timed = {(t.M, t.N, t.K) for t in trials}
    rounds, stopped = 0, ""
    while not stopped:
        best = max(trials, key=lambda t: t.flop_s)
        left = max_trials - len(trials)
        stopped = (f"max_trials ({max_trials}) timings spent after {rounds} refinement round(s)" if left <= 0 else
                   f"max_rounds ({max_rounds}) refinement rounds run" if rounds >= max_rounds else "")
        if stopped:
            break
        near = [s for s in _neighbours(model, (best.M, best.N, best.K))
                if s not in timed and model.fits(s, window, max_bytes)]
        if not near:
            stopped = (f"no untimed neighbour of the best shape {best.M}×{best.N}×{best.K} is left inside the "
                       f"window and memory after {rounds} refinement round(s)")
            break
        top = max(model.explain(s).achieved_flop_s for s in near)  # within 2 % of it: the neighbour order
        near.sort(key=lambda s: max(1.0, 0.98 * top / model.explain(s).achieved_flop_s))
        share = -(-left // (max_rounds - rounds))
        for s in near[:share]:
            trials.append(_time(time_gemm, model, s, "refine"))
            timed.add(s)
        rounds += 1
        gain = max(t.flop_s for t in trials) / best.flop_s - 1
        if gain < min_gain:
            stopped = (f"round {rounds} raised the best throughput by {gain:.2%}, less than "
                       f"min_gain ({min_gain:.2%})")
    return SearchResult(dtype, "guided", tuple(trials), rounds, stopped)


def wide_search(time_gemm: Callable[[int, int, int], float], spec: DeviceSpec, dtype: Any, *,
                window_s: tuple[float, float] | None = None, max_bytes: int | None = None,
                max_trials: int | None = None) -> SearchResult:
    """The comparison search (``--thorough``): no tiles, no waves. The grid of M, N and K in
    2^p and 1.5·2^p (16 … 98304, every aspect) inside ``window_s`` and ``max_bytes``, evenly
    subsampled to ``max_trials`` (default 48) timings. The model only estimates each call's time."""
    spec, dtype, max_trials = _check_search(time_gemm, spec, dtype, max_trials, WIDE_TRIALS)
    (lo, hi), max_bytes = _check_limits(spec, window_s, max_bytes, False)
    model = _Model(spec, dtype)
    M, N, K = (g.ravel() for g in np.meshgrid(_GRID, _GRID, _GRID, indexing="ij"))
    estimate = model.estimate_s(M.astype(float), N.astype(float), K.astype(float))
    keep = ((estimate <= hi) & (estimate >= lo / 4) & (model.bytes(M, N, K) <= max_bytes)
            & kernel_accepts(M, N, K, dtype))
    grid = list(zip(M[keep].tolist(), N[keep].tolist(), K[keep].tolist()))  # sorted by M, then N, then K
    bounds = np.linspace(0, len(grid), max_trials + 1).round().astype(int)

    def nearest_middle(start: int, stop: int) -> Shape | None:  # of grid[start:stop], inside the window
        order = sorted(range(start, stop), key=lambda i: (abs(i - (start + stop) // 2), i))
        return next((grid[i] for i in order if model.fits(grid[i], (lo, hi), max_bytes)), None)

    shapes = [s for s in map(nearest_middle, bounds[:-1].tolist(), bounds[1:].tolist()) if s is not None]
    if not shapes:
        raise ValueError(f"no grid shape of {spec.name} in {dtype} has a predicted time inside window_s=({lo:g}, "
                         f"{hi:g}) seconds with operands within max_bytes={max_bytes:,}")
    trials, refused = [], []
    for s in shapes:  # a comparison, not the ceiling: a shape the vendor library refuses is skipped, and said
        try:
            trials.append(_time(time_gemm, model, s, "wide"))
        except RuntimeError as e:
            refused.append(f"{'×'.join(map(str, s))} ({str(e).splitlines()[0][:80]})")
    if not trials:
        raise RuntimeError(f"the vendor library refused every wide-search shape of {dtype}: {refused[0]}")
    stopped = (f"timed {len(trials)} shapes spread evenly over the {len(grid)} grid shapes estimated inside the "
               "window and memory" + (f"; {len(refused)} refused by the library, e.g. {refused[0]}" if refused else ""))
    return SearchResult(dtype, "wide", tuple(trials), 0, stopped)
