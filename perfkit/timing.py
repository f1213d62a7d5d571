"""Timing: ``bench(fn)`` runs a zero-argument function many times and returns a :class:`Measurement`.

Every number in the book comes from :func:`bench`. On a CUDA GPU it times each sample with a
pair of CUDA events on torch's current stream, after the first call and a warm-up, with the L2
cache flushed and a GPU busy-wait before each start event, optionally replaying a CUDA graph of
many calls; on a CPU it uses ``time.perf_counter``. The samples fill a time budget; the median
and IQR summarise them. Units: seconds everywhere. The appendix "how perfkit times"
(``chapters/90_timing.md``) explains each choice.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
import warnings
from typing import Any, Callable, Iterator

from ._validate import boolean, non_negative_number, one_of, optional_str, positive_number, zero_arg_callable
from .devices import cpu_name, current_device
from .measurement import Measurement, NoiseWarning, noise_message, to_gbps, to_tflop_s
from .units import MiB

#: Fewest and most samples :func:`bench` takes (``max_time_s`` may stop it below the minimum).
MIN_SAMPLES = 10
MAX_SAMPLES = 1000

_CPU_MIN_BLOCK_S = 1e-4  # a CPU sample times at least this long a block of calls
_GRAPH_REPLAY_S = 1e-3  # aim for graph replays this long ...
_GRAPH_MAX_CALLS = 1000  # ... with at most this many captured calls
_MAX_WARMUP_CALLS = 10_000
_FLUSH_FALLBACK_BYTES = 256 * MiB
_SLACK_MIN_S, _SLACK_MAX_S = 20e-6, 1e-3  # GPU busy-wait before each start event


def _default_label(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str) or "<lambda>" in name:
        return "fn"
    return name


def bench(fn: Callable[[], Any], *, warmup_s: float = 0.025, rep_s: float = 0.1,
          flush_l2: bool = True, cuda_graph: bool = False, label: str | None = None,
          device: str = "auto", max_time_s: float = 10.0) -> Measurement:
    """Time ``fn()`` and return a :class:`Measurement` of seconds per call (quote its ``median``).

    Args:
        fn: a function taking no arguments, e.g. ``lambda: torch.matmul(a, b)``.
        warmup_s: seconds of untimed calls after the first call and the few calls that
            estimate its duration (which also warm up).
        rep_s: seconds of samples to aim for; the count is clamped to 10…1000.
        flush_l2: zero an L2-sized buffer before every sample, outside the timed window
            (CUDA only; ignored on a CPU).
        cuda_graph: capture many calls into a CUDA graph and time its replays (for microsecond
            kernels; no flush between the captured calls). Ignored on a CPU.
        label: what is timed, for the repr (default: the function's name).
        device: ``"auto"`` (CUDA when ``torch.cuda.is_available()``), ``"cuda"`` or ``"cpu"``.
        max_time_s: cap on the seconds spent sampling; may leave fewer than 10 samples, with a
            warning in the Measurement.

    ``warmup_s`` and ``rep_s`` are seconds, whereas the ``warmup`` and ``rep`` arguments of
    Triton's ``triton.testing.do_bench`` are milliseconds. How the samples are taken is
    explained in the appendix "how perfkit times" (``chapters/90_timing.md``).
    """
    zero_arg_callable("fn", fn)
    warmup_s = non_negative_number("warmup_s", warmup_s, "seconds")
    rep_s = positive_number("rep_s", rep_s)
    flush_l2 = boolean("flush_l2", flush_l2)
    cuda_graph = boolean("cuda_graph", cuda_graph)
    label = optional_str("label", label)
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
            raise RuntimeError("device='cuda' was asked for but torch sees no CUDA GPU; "
                               "use device='cpu' or 'auto'")
        device = "cuda" if has_cuda else "cpu"

    notes: list[str] = []
    if device == "cuda":
        if cuda_graph:
            samples, calls, first = _bench_cuda_graph(fn, warmup_s, rep_s, flush_l2, max_time_s)
            if flush_l2:
                notes.append(f"cuda_graph=True: the {calls} calls inside each graph replay are not separated "
                             "by L2 flushes, so these are warm-cache times (only the first call of a replay "
                             "starts cold); pass flush_l2=False to say so and silence this warning")
        else:
            samples, calls, first = _bench_cuda(fn, warmup_s, rep_s, flush_l2, max_time_s)
        dev_label = current_device().label
        flushed = flush_l2 and not cuda_graph
    else:
        if cuda_graph:  # device="auto" on a machine without a GPU: run the same code on the CPU
            notes.append("cuda_graph=True ignored: no CUDA GPU, timed on the CPU")
        samples, calls, first = _bench_cpu(fn, warmup_s, rep_s, max_time_s)
        dev_label = cpu_name()
        flushed = False
        cuda_graph = False

    if len(samples) < MIN_SAMPLES:
        notes.append(f"only {len(samples)} samples (max_time_s={max_time_s:g} s reached); "
                     "the median is less reliable")
    m = Measurement(samples=samples, label=label, device=dev_label, flush_l2=flushed,
                    cuda_graph=cuda_graph, calls_per_sample=calls, first_call_s=first)
    for note in notes:
        m.warnings.append(note)
        if note.startswith("only "):  # too few samples: as unreliable as a noisy one
            warnings.warn(f"{label}: {note}", NoiseWarning, stacklevel=2)
        elif not note.startswith("cuda_graph=True ignored"):
            warnings.warn(f"{label}: {note}", UserWarning, stacklevel=2)
    msg = noise_message(label, m.noise)
    if msg is not None:
        m.warnings.append(msg)
        warnings.warn(msg, NoiseWarning, stacklevel=2)
    return m


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Keep Python's garbage collector off inside the block (on again after, if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _warmup_count(warmup_s: float, call_s: float, max_time_s: float) -> int:
    """Calls filling ``warmup_s`` seconds (the estimate calls before them already warmed up a little)."""
    return min(math.ceil(min(warmup_s, max_time_s) / call_s), _MAX_WARMUP_CALLS)


def _sample_count(rep_s: float, sample_s: float, max_time_s: float) -> int:
    """Samples of ``sample_s`` seconds filling ``rep_s``: 10…1000, and at most ``max_time_s`` of work."""
    n = min(max(math.ceil(rep_s / sample_s), MIN_SAMPLES), MAX_SAMPLES)
    return max(1, min(n, math.floor(max_time_s / sample_s)))


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------

def _cpu_block(fn, number: int) -> float:
    """Seconds taken by ``number`` back-to-back calls of ``fn``."""
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


def _bench_cpu(fn, warmup_s: float, rep_s: float, max_time_s: float):
    """Samples (seconds per call), calls per sample and first-call seconds, with perf_counter."""
    pc = time.perf_counter
    t0 = pc()
    fn()  # one-time costs
    first = pc() - t0
    number = 1
    t = _cpu_block(fn, number)
    while t < _CPU_MIN_BLOCK_S and number < 10**8:  # block short calls (timer resolution, overhead)
        number = min(10**8, max(number * 2, math.ceil(number * 1.2 * _CPU_MIN_BLOCK_S / max(t, 1e-9))))
        t = _cpu_block(fn, number)
    deadline = pc() + min(warmup_s, max_time_s)
    warm = [t]  # the calibration blocks were the first warm-up
    while pc() < deadline:
        warm.append(_cpu_block(fn, number))
    block_s = max(min(warm[-5:]), 1e-9)  # the fastest recent block sizes the sample count
    n = _sample_count(rep_s, block_s, max_time_s)
    samples = []
    with _gc_paused():
        start = pc()
        for _ in range(n):
            samples.append(_cpu_block(fn, number) / number)
            if pc() - start > max_time_s:
                break
    return samples, number, first


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
    """An int32 buffer the size of the device's caches (256 MiB if unknown), zeroed to flush them: its L2 (on
    AMD every die's, as the device spec counts it, which ROCm reports per die) and a memory-side cache behind
    it (AMD's Infinity Cache)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    nbytes = int(getattr(props, "L2_cache_size", 0) or 0)
    spec = current_device()
    if spec.kind == "gpu":
        nbytes = max(nbytes, spec.l2_bytes or 0) + (spec.llc_bytes or 0)
    nbytes = nbytes or _FLUSH_FALLBACK_BYTES
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


def _first_call(fn, torch) -> float:
    """Wall seconds of the first call, synchronized: context, handles, JIT, autotuning."""
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _sample_events(torch, run: Callable[[], Any], n: int, cache, slack: Callable[[], None],
                   max_time_s: float, calls_per_sample: int) -> list[float]:
    """Seconds per call of up to ``n`` samples of ``run()``, one event pair each on torch's stream.

    Before each start event the L2 flush buffer ``cache`` (if any) is zeroed and ``slack()``
    enqueues a GPU busy-wait; sampling stops after ``max_time_s`` seconds; a single synchronize
    follows the loop. Each sample is divided by ``calls_per_sample``.
    """
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    taken = 0
    wall0 = time.perf_counter()
    for i in range(n):
        if cache is not None:
            cache.zero_()  # outside the window
        slack()
        starts[i].record()
        run()
        ends[i].record()
        taken += 1
        if time.perf_counter() - wall0 > max_time_s:
            break
    torch.cuda.synchronize()
    return [starts[i].elapsed_time(ends[i]) * 1e-3 / calls_per_sample for i in range(taken)]


def _bench_cuda(fn, warmup_s: float, rep_s: float, flush_l2: bool, max_time_s: float):
    """Samples (seconds per call), calls per sample (1) and first-call seconds, one call per sample."""
    import torch

    first = _first_call(fn, torch)
    host_s = _host_time(fn, torch)
    est = _estimate_cuda(fn, torch)
    slack = _gpu_slack(torch, host_s)
    cache = _flush_buffer(torch) if flush_l2 else None

    for _ in range(_warmup_count(warmup_s, est, max_time_s)):
        fn()
    n = _sample_count(rep_s, est, max_time_s)
    with _gc_paused():
        samples = _sample_events(torch, fn, n, cache, slack, max_time_s, 1)
    return samples, 1, first


def _bench_cuda_graph(fn, warmup_s: float, rep_s: float, flush_l2: bool, max_time_s: float):
    """Samples (seconds per call), calls per replay and first-call seconds, from graph replays."""
    import torch

    first = _first_call(fn, torch)
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
    try:
        # A finalizer (e.g. a kernel module unloading) must not run during capture.
        with _gc_paused(), torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                fn()
    except Exception as e:
        raise RuntimeError(f"fn could not be captured into a CUDA graph ({type(e).__name__}: {e}); "
                           "it may synchronize, copy to the host or launch work on another stream. "
                           "Use cuda_graph=False.") from e

    replay_est = calls * est
    host_s = _host_time(graph.replay, torch)
    slack = _gpu_slack(torch, host_s)
    cache = _flush_buffer(torch) if flush_l2 else None
    for _ in range(min(_warmup_count(warmup_s, replay_est, max_time_s), 100)):
        graph.replay()
    n = _sample_count(rep_s, replay_est, max_time_s)
    with _gc_paused():
        samples = _sample_events(torch, graph.replay, n, cache, slack, max_time_s, calls)
    return samples, calls, first


__all__ = ["MAX_SAMPLES", "MIN_SAMPLES", "Measurement", "NoiseWarning", "bench", "to_gbps", "to_tflop_s"]
