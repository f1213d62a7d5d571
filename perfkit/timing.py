"""Timing: ``bench(fn)`` runs a zero-argument function many times and returns a :class:`Measurement`.

Every number in the book comes from :func:`bench`. What it does, and why:

- **Device time from CUDA events on torch's current stream.** One start/end event pair per sample,
  recorded on ``torch.cuda.current_stream()``, and one synchronize after the loop, never inside it.
  Events time the GPU's stream, not the host. Work is timed correctly only if it runs on that
  stream. PyTorch and CuPy both use the legacy default stream unless told otherwise, so CuPy
  kernels launched on CuPy's current stream are timed correctly; if you switch either library to
  another stream (or set ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1``), switch both
  (``with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream): ...``).
  :func:`perfkit.kernels.spin_launcher` follows torch's stream explicitly.
- **One-time costs and warm-up are kept out.** The first call (CUDA context, library handles,
  Triton/CuPy JIT, autotuning) runs and is synchronized before anything is timed; its wall time is
  kept as ``first_call_s``. Then ``warmup`` seconds' worth of calls run untimed (clocks ramp up,
  caches and allocators settle).
- **A cold L2 cache, flushed outside the timed window.** With ``flush_l2=True`` a buffer the size
  of the device's L2 (``torch.cuda.get_device_properties().L2_cache_size``; 256 MiB if unknown)
  is zeroed before each start event, so each sample starts from a cold cache and the flush is
  never timed. (Triton's ``do_bench`` flushes a fixed 256 MiB; Inductor and nvbench flush the
  real L2 size, as here.)
- **No host launch gap in the samples.** Before each start event a short GPU-side busy-wait
  (``torch.cuda._sleep``, sized to cover the host's cost of enqueuing one call) keeps the GPU
  busy while the host enqueues the start event and ``fn``'s kernels; the sample then starts when
  the GPU reaches ``fn``, not when the host got there. (A flush does the same by accident; nvbench
  uses a blocking kernel.) Gaps *between* the kernels of a multi-kernel ``fn`` still count.
- **CUDA graphs for microsecond kernels** (``cuda_graph=True``). ``n`` calls of ``fn`` are captured
  into one ``torch.cuda.CUDAGraph`` on a side stream (capture is illegal on the legacy default
  stream) with Python's garbage collector disabled (a finalizer running mid-capture can
  invalidate the graph); each sample is one replay between an event pair, divided by ``n``. This
  removes the CPU launch cost from every call. The calls inside a replay cannot be separated by
  a flush: only the first call of each replay sees a cold L2, so graph samples are warm-cache
  times (``Measurement.flush_l2`` is ``False`` and the repr says "L2 warm").
- **Sample count from a time budget.** The time of one call is estimated first; then enough
  samples run to fill about ``rep`` seconds: at least 10, at most 1000, and never more than
  ``max_time_s`` seconds of work. Large GEMMs get a few samples, tiny kernels many.
- **Median and IQR, not mean.** One interruption can make a sample ten times slower; the median
  does not move. When IQR/median exceeds 10 % (and again at 25 %) — torch.utils.benchmark's
  thresholds — the measurement carries a warning and a :class:`NoiseWarning` is issued.

On a CPU (no CUDA GPU, or ``device="cpu"``) the same interface times with ``time.perf_counter``:
warm-up excluded, one sample per call, except that a function shorter than 0.1 ms is timed in
blocks of calls and each sample is the block's time divided by its calls (``calls_per_sample``).

Units: seconds everywhere (``warmup``, ``rep``, ``max_time_s`` and every statistic); note that
Triton's ``do_bench`` takes milliseconds.
"""

from __future__ import annotations

import gc
import inspect
import math
import numbers
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ._validate import one_of, positive_number
from .devices import cpu_name

#: Fewest and most samples :func:`bench` takes (``max_time_s`` may stop it below the minimum).
MIN_SAMPLES = 10
MAX_SAMPLES = 1000
#: IQR/median above which a measurement is flagged noisy, and very noisy (torch.utils.benchmark's).
NOISE_THRESHOLD = 0.10
GROSS_NOISE_THRESHOLD = 0.25

_CPU_MIN_BLOCK_S = 1e-4  # a CPU sample times at least this long a block of calls
_GRAPH_REPLAY_S = 1e-3  # aim for graph replays this long ...
_GRAPH_MAX_CALLS = 1000  # ... with at most this many captured calls
_MAX_WARMUP_CALLS = 10_000
_FLUSH_FALLBACK_BYTES = 256 << 20
_SLACK_MIN_S, _SLACK_MAX_S = 20e-6, 1e-3  # GPU busy-wait before each start event


class NoiseWarning(UserWarning):
    """A measurement whose inter-quartile range is more than 10 % of its median."""


@dataclass(eq=False)
class Measurement:
    """The samples of one :func:`bench` run, with their statistics and where they were taken.

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
        return float(np.mean(self.samples))

    @property
    def min(self) -> float:
        return float(np.min(self.samples))

    @property
    def p25(self) -> float:
        return float(np.percentile(self.samples, 25))

    @property
    def p75(self) -> float:
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

    def tflops(self, flops) -> float:
        """Throughput from the median: ``flops`` / median / 1e12 (TFLOP/s)."""
        return to_tflops(self, flops)

    def gbps(self, nbytes) -> float:
        """Bandwidth from the median: ``nbytes`` / median / 1e9 (GB/s)."""
        return to_gbps(self, nbytes)

    def __repr__(self) -> str:
        where = f" on {self.device}" if self.device else ""
        details = [f"IQR {_fmt_percent(self.noise)}", f"n={self.n}"]
        if self.cuda_graph:
            details.append(f"CUDA graph of {self.calls_per_sample} calls")
        elif self.calls_per_sample > 1:
            details.append(f"blocks of {self.calls_per_sample} calls")
        if self.device and not self.device.startswith("CPU"):
            details.append("L2 flushed" if self.flush_l2 else "L2 warm")
        text = f"{self.label}{where}: {_fmt_time(self.median)} median ({', '.join(details)})"
        if self.warnings and any("IQR" in w for w in self.warnings):
            text += " [noisy]"
        return text

    __str__ = __repr__


def _seconds_of(measurement_or_seconds) -> float:
    if isinstance(measurement_or_seconds, Measurement):
        return measurement_or_seconds.median
    return positive_number("measurement_or_seconds", measurement_or_seconds)


def to_tflops(measurement_or_seconds, flops) -> float:
    """TFLOP/s (1e12 FLOP/s) for ``flops`` done in a Measurement's median or in a number of seconds."""
    seconds = _seconds_of(measurement_or_seconds)
    flops = positive_number("flops", flops)
    return flops / seconds / 1e12 if seconds > 0 else math.inf


def to_gbps(measurement_or_seconds, nbytes) -> float:
    """GB/s (1e9 bytes/s) for ``nbytes`` moved in a Measurement's median or in a number of seconds."""
    seconds = _seconds_of(measurement_or_seconds)
    nbytes = positive_number("bytes", nbytes)
    return nbytes / seconds / 1e9 if seconds > 0 else math.inf


def _fmt_time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return f"{seconds} s"
    units = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
    i = next((k for k, (_, scale) in enumerate(units) if abs(seconds) >= scale), len(units) - 1)
    while True:
        unit, scale = units[i]
        v = seconds / scale
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
        if round(abs(v), digits) >= 1000 and i > 0:  # 999.7 µs prints as 1.00 ms
            i -= 1
            continue
        return f"{v:.{digits}f} {unit}"


def _fmt_percent(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{100 * x:.1f}%" if x < 1 else f"{100 * x:.0f}%"


# --------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------

def _check_fn(fn) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable such as lambda: torch.matmul(a, b), "
                        f"got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: accept them
        return
    try:
        sig.bind()
    except TypeError:
        raise TypeError(f"fn must be callable with no arguments (wrap it: lambda: f(x)); "
                        f"{getattr(fn, '__qualname__', fn)!r} has signature {sig}") from None


def _check_bool(name: str, value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def _non_negative_seconds(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds ≥ 0, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a finite number of seconds ≥ 0, got {value}")
    return v


def _default_label(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str) or "<lambda>" in name:
        return "fn"
    return name


def bench(fn: Callable[[], Any], *, warmup: float = 0.025, rep: float = 0.1, flush_l2: bool = True,
          cuda_graph: bool = False, label: str | None = None, device: str = "auto",
          max_time_s: float = 10.0) -> Measurement:
    """Time ``fn()`` and return a :class:`Measurement` of seconds per call (quote its ``median``).

    Args:
        fn: a function taking no arguments, e.g. ``lambda: torch.matmul(a, b)``.
        warmup: seconds of untimed calls after the first call and the few calls that estimate
            its duration (which also warm up).
        rep: seconds of samples to aim for; the count is clamped to 10…1000.
        flush_l2: zero an L2-sized buffer before every sample, outside the timed window
            (CUDA only; ignored on a CPU).
        cuda_graph: capture many calls into a CUDA graph and time its replays (for microsecond
            kernels; no flush between the captured calls). Ignored on a CPU.
        label: what is timed, for the repr (default: the function's name).
        device: ``"auto"`` (CUDA when ``torch.cuda.is_available()``), ``"cuda"`` or ``"cpu"``.
        max_time_s: cap on the seconds spent sampling; may leave fewer than 10 samples, with a
            warning in the Measurement.

    See the module documentation for how the samples are taken.
    """
    _check_fn(fn)
    warmup = _non_negative_seconds("warmup", warmup)
    rep = positive_number("rep", rep)
    flush_l2 = _check_bool("flush_l2", flush_l2)
    cuda_graph = _check_bool("cuda_graph", cuda_graph)
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a string or None, got {label!r}")
    device = one_of("device", device, ("auto", "cuda", "cpu"))
    max_time_s = positive_number("max_time_s", max_time_s)
    if device == "cpu" and cuda_graph:
        raise ValueError("cuda_graph=True needs a CUDA GPU, but device='cpu' was asked for")
    label = label if label is not None else _default_label(fn)

    if device in ("auto", "cuda"):
        try:
            import torch
            has_cuda = bool(torch.cuda.is_available())
        except ImportError:
            has_cuda = False
        if device == "cuda" and not has_cuda:
            raise RuntimeError("device='cuda' was asked for but torch sees no CUDA GPU; use device='cpu' or 'auto'")
        device = "cuda" if has_cuda else "cpu"

    notes: list[str] = []
    if device == "cuda":
        if cuda_graph:
            samples, calls, first = _bench_cuda_graph(fn, warmup, rep, flush_l2, max_time_s)
            if flush_l2:
                notes.append(f"cuda_graph=True: the {calls} calls inside each graph replay are not separated "
                             "by L2 flushes, so these are warm-cache times (only the first call of a replay "
                             "starts cold); pass flush_l2=False to say so and silence this warning")
        else:
            samples, calls, first = _bench_cuda(fn, warmup, rep, flush_l2, max_time_s)
        from .devices import current_device

        dev_label = current_device().label
        flushed = flush_l2 and not cuda_graph
    else:
        if cuda_graph:  # device="auto" on a machine without a GPU: run the same code on the CPU
            notes.append("cuda_graph=True ignored: no CUDA GPU, timed on the CPU")
        samples, calls, first = _bench_cpu(fn, warmup, rep, max_time_s)
        dev_label = cpu_name()
        flushed = False
        cuda_graph = False

    if len(samples) < MIN_SAMPLES:
        notes.append(f"only {len(samples)} samples (max_time_s={max_time_s:g} s reached); "
                     "the median is less reliable")
    m = Measurement(samples=np.asarray(samples), label=label, device=dev_label, flush_l2=flushed,
                    cuda_graph=cuda_graph, calls_per_sample=calls, first_call_s=first)
    for note in notes:
        m.warnings.append(note)
        if not note.startswith("cuda_graph=True ignored"):
            warnings.warn(f"{label}: {note}", UserWarning, stacklevel=2)
    noise = m.noise
    if noise > NOISE_THRESHOLD:
        if noise > GROSS_NOISE_THRESHOLD:
            msg = (f"{label}: IQR is {_fmt_percent(noise)} of the median (> 25 %): significant "
                   "environmental influence; close other work and measure again")
        else:
            msg = (f"{label}: IQR is {_fmt_percent(noise)} of the median (> 10 %): the system "
                   "fluctuated during the measurement")
        m.warnings.append(msg)
        warnings.warn(msg, NoiseWarning, stacklevel=2)
    return m


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------

def _cpu_block(fn, number: int) -> float:
    pc = time.perf_counter
    if number == 1:
        t0 = pc()
        fn()
        return pc() - t0
    rng = range(number)
    t0 = pc()
    for _ in rng:
        fn()
    return pc() - t0


def _bench_cpu(fn, warmup: float, rep: float, max_time_s: float):
    pc = time.perf_counter
    t0 = pc()
    fn()  # one-time costs
    first = pc() - t0
    number = 1
    t = _cpu_block(fn, number)
    while t < _CPU_MIN_BLOCK_S and number < 10**8:  # block short calls (timer resolution, overhead)
        number = min(10**8, max(number * 2, math.ceil(number * 1.2 * _CPU_MIN_BLOCK_S / max(t, 1e-9))))
        t = _cpu_block(fn, number)
    deadline = pc() + min(warmup, max_time_s)
    warm = [t]  # the calibration blocks were the first warm-up
    while pc() < deadline:
        warm.append(_cpu_block(fn, number))
    block_s = max(min(warm[-5:]), 1e-9)  # the fastest recent block sizes the sample count
    n = _sample_count(rep, block_s, max_time_s)
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = pc()
        for _ in range(n):
            samples.append(_cpu_block(fn, number) / number)
            if pc() - start > max_time_s:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples, number, first


def _warmup_count(warmup: float, call_s: float, max_time_s: float) -> int:
    """Calls filling ``warmup`` seconds (the estimate calls before them already warmed up a little)."""
    return min(math.ceil(min(warmup, max_time_s) / call_s), _MAX_WARMUP_CALLS)


def _sample_count(rep: float, sample_s: float, max_time_s: float) -> int:
    n = min(max(math.ceil(rep / sample_s), MIN_SAMPLES), MAX_SAMPLES)
    return max(1, min(n, math.floor(max_time_s / sample_s)))


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------

_sleep_rates: dict[int, float | None] = {}


def _sleep_cycles_per_s(torch) -> float | None:
    """Clock cycles per second of ``torch.cuda._sleep`` on the current device (None if unavailable)."""
    dev = torch.cuda.current_device()
    if dev in _sleep_rates:
        return _sleep_rates[dev]
    rate = None
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        try:
            cycles = 200_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(2):  # the first call may load the kernel
                start.record()
                sleep(cycles)
                end.record()
                end.synchronize()
            seconds = start.elapsed_time(end) * 1e-3
            rate = cycles / seconds if seconds > 0 else None
        except Exception:
            rate = None
    _sleep_rates[dev] = rate
    return rate


def _gpu_slack(torch, host_s: float) -> Callable[[], None]:
    """A function that enqueues a GPU busy-wait long enough to hide the host's enqueue time."""
    rate = _sleep_cycles_per_s(torch)
    if not rate:
        return lambda: None
    slack_s = min(max(1.5 * host_s + _SLACK_MIN_S, _SLACK_MIN_S), _SLACK_MAX_S)
    cycles = int(slack_s * rate)
    sleep = torch.cuda._sleep
    return lambda: sleep(cycles)


def _flush_buffer(torch):
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    nbytes = int(getattr(props, "L2_cache_size", 0) or 0) or _FLUSH_FALLBACK_BYTES
    return torch.empty(max(nbytes // 4, 1), dtype=torch.int32, device="cuda")


def _host_time(fn, torch) -> float:
    """Wall time the host spends in one call of fn, starting from an idle GPU."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    return host


def _estimate_cuda(fn, torch) -> float:
    """Device seconds per call: one call, or the average of 5 back-to-back calls if it is short."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    est = start.elapsed_time(end) * 1e-3
    if est < 1e-3:
        start.record()
        for _ in range(5):
            fn()
        end.record()
        end.synchronize()
        est = start.elapsed_time(end) * 1e-3 / 5
    return max(est, 1e-7)


def _bench_cuda(fn, warmup: float, rep: float, flush_l2: bool, max_time_s: float):
    import torch

    t0 = time.perf_counter()
    fn()  # one-time costs: context, handles, JIT, autotuning
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    host_s = _host_time(fn, torch)
    est = _estimate_cuda(fn, torch)
    slack = _gpu_slack(torch, host_s)
    cache = _flush_buffer(torch) if flush_l2 else None

    for _ in range(_warmup_count(warmup, est, max_time_s)):
        fn()
    n = _sample_count(rep, est, max_time_s)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    taken = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        wall0 = time.perf_counter()
        for i in range(n):
            if cache is not None:
                cache.zero_()  # outside the window
            slack()
            starts[i].record()
            fn()
            ends[i].record()
            taken += 1
            if time.perf_counter() - wall0 > max_time_s:
                break
        torch.cuda.synchronize()
    finally:
        if gc_was_enabled:
            gc.enable()
    samples = [starts[i].elapsed_time(ends[i]) * 1e-3 for i in range(taken)]
    return samples, 1, first


def _bench_cuda_graph(fn, warmup: float, rep: float, flush_l2: bool, max_time_s: float):
    import torch

    t0 = time.perf_counter()
    fn()  # one-time costs
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    est = _estimate_cuda(fn, torch)
    calls = min(max(1, math.ceil(_GRAPH_REPLAY_S / est)), _GRAPH_MAX_CALLS)

    # Capture on a side stream (illegal on the legacy default stream), after running fn there
    # once so that libraries set up per-stream state (e.g. cuBLAS workspaces) outside the capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a finalizer (e.g. a kernel module unloading) must not run during capture
    try:
        with torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                fn()
    except Exception as e:
        raise RuntimeError(f"fn could not be captured into a CUDA graph ({type(e).__name__}: {e}); "
                           "it may synchronize, copy to the host or launch work on another stream. "
                           "Use cuda_graph=False.") from e
    finally:
        if gc_was_enabled:
            gc.enable()

    replay_est = calls * est
    host_s = _host_time(graph.replay, torch)
    slack = _gpu_slack(torch, host_s)
    cache = _flush_buffer(torch) if flush_l2 else None
    for _ in range(min(_warmup_count(warmup, replay_est, max_time_s), 100)):
        graph.replay()
    n = _sample_count(rep, replay_est, max_time_s)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    taken = 0
    wall0 = time.perf_counter()
    for i in range(n):
        if cache is not None:
            cache.zero_()
        slack()
        starts[i].record()
        graph.replay()
        ends[i].record()
        taken += 1
        if time.perf_counter() - wall0 > max_time_s:
            break
    torch.cuda.synchronize()
    samples = [starts[i].elapsed_time(ends[i]) * 1e-3 / calls for i in range(taken)]
    del graph
    return samples, calls, first


__all__ = ["bench", "Measurement", "NoiseWarning", "to_tflops", "to_gbps"]
