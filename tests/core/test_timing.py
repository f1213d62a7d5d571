"""perfkit.timing: bench() on the CPU (everywhere) and on CUDA (GPU-marked tests)."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import perfkit.timing
from perfkit.timing import (MAX_SAMPLES, MIN_SAMPLES, Measurement, NoiseWarning, bench, to_gbps,
                            to_tflop_s)

HAS_CUDA = torch.cuda.is_available()
# Timing tests share the machine with other work: noise is not what most of them check.
quiet = pytest.mark.filterwarnings("ignore::perfkit.timing.NoiseWarning")
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


class FakeClock:
    """``perf_counter`` for perfkit.timing that moves only when a timed function ``sleep``s: a CPU
    bench() then gives exact numbers on any machine, however busy or slow."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(perfkit.timing, "time", fake)  # perfkit.timing reads time.perf_counter only
    return fake


# ------------------------------------------------------------------------------------ CPU bench

@quiet
def test_sleep_on_the_real_clock_is_timed_no_shorter_than_it_slept():
    m = bench(lambda: time.sleep(0.003), rep_s=0.06, warmup_s=0.0, device="cpu", label="sleep 3 ms")
    # time.sleep never returns early; a busy machine only makes the times longer (exact: next test)
    assert m.median >= 0.003 and m.samples.min() >= 0.003
    assert m.device.startswith("CPU")
    assert m.calls_per_sample == 1 and not m.flush_l2 and not m.cuda_graph
    assert MIN_SAMPLES <= m.n <= MAX_SAMPLES and m.n == len(m.samples)
    assert m.first_call_s is not None and m.first_call_s >= 0.003


def test_sleep_of_known_duration_gives_that_median(clock):
    m = bench(lambda: clock.sleep(0.003), rep_s=0.06, warmup_s=0.0, device="cpu", label="sleep 3 ms")
    assert m.calls_per_sample == 1 and m.n == 20  # 0.06 s of 3 ms samples
    assert m.median == pytest.approx(0.003) and m.iqr == pytest.approx(0, abs=1e-12)
    assert m.first_call_s == pytest.approx(0.003)


def test_short_function_is_timed_in_blocks_of_calls(clock):
    m = bench(lambda: clock.sleep(5e-8), rep_s=0.02, warmup_s=0.0, device="cpu")
    assert m.calls_per_sample > 1 and m.calls_per_sample * 5e-8 >= 1e-4  # blocks of at least 0.1 ms
    assert m.median == pytest.approx(5e-8)  # seconds per call, not per block
    assert "blocks of" in repr(m)


@quiet
def test_auto_device_without_gpu_times_on_the_cpu():
    if HAS_CUDA:
        pytest.skip("a GPU is visible: 'auto' picks CUDA")
    m = bench(lambda: time.sleep(0.001), rep_s=0.02, cuda_graph=True)
    assert m.device.startswith("CPU") and not m.cuda_graph
    assert any("cuda_graph=True ignored" in w for w in m.warnings)


def test_median_resists_outliers(clock):
    calls = iter(range(100_000))

    def sometimes_slow():
        clock.sleep(0.010 if next(calls) % 5 == 0 else 0.001)

    m = bench(sometimes_slow, rep_s=0.06, warmup_s=0.0, device="cpu")
    assert m.median == pytest.approx(0.001) and m.mean > 1.5 * m.median


def test_noisy_function_warns():
    state = {"i": 0}

    def alternating():
        state["i"] += 1
        time.sleep(0.001 if state["i"] % 2 else 0.004)

    with pytest.warns(NoiseWarning, match="IQR"):
        m = bench(alternating, rep_s=0.06, warmup_s=0.0, device="cpu", label="alternating")
    assert m.noise > 0.25
    assert any("> 25 %" in w for w in m.warnings)
    assert "[noisy]" in repr(m)


@quiet
def test_max_time_s_caps_the_samples_with_a_warning():
    with pytest.warns(UserWarning, match="max_time_s"):
        m = bench(lambda: time.sleep(0.01), rep_s=1.0, warmup_s=0.0, max_time_s=0.03, device="cpu")
    assert 1 <= m.n < MIN_SAMPLES
    assert any("only" in w for w in m.warnings)


def test_first_call_is_not_a_sample(clock):
    state = {"n": 0}

    def slow_first():
        state["n"] += 1
        clock.sleep(0.25 if state["n"] == 1 else 0.001)

    m = bench(slow_first, rep_s=0.02, warmup_s=0.0, device="cpu")
    assert m.samples.max() == pytest.approx(0.001)  # no sample holds the 0.25 s first call
    assert m.first_call_s == pytest.approx(0.25)


# ------------------------------------------------------------------------------------ arguments

@pytest.mark.parametrize("fn", [42, "lambda: 1", None])
def test_non_callable_fn_is_a_type_error(fn):
    with pytest.raises(TypeError, match="fn"):
        bench(fn)


def test_fn_needing_arguments_is_a_type_error():
    with pytest.raises(TypeError, match="fn"):
        bench(lambda x: x)


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"warmup_s": -1}, ValueError, "warmup_s"),
    ({"warmup_s": "1"}, TypeError, "warmup_s"),
    ({"warmup_s": float("nan")}, ValueError, "warmup_s"),
    ({"rep_s": 0}, ValueError, "rep_s"),
    ({"rep_s": -0.1}, ValueError, "rep_s"),
    ({"rep_s": None}, TypeError, "rep_s"),
    ({"max_time_s": 0}, ValueError, "max_time_s"),
    ({"flush_l2": "yes"}, TypeError, "flush_l2"),
    ({"cuda_graph": 1}, TypeError, "cuda_graph"),
    ({"label": 3}, TypeError, "label"),
    ({"device": "tpu"}, ValueError, "device"),
    ({"device": 0}, TypeError, "device"),
    ({"device": "cpu", "cuda_graph": True}, ValueError, "cuda_graph"),
])
def test_bad_arguments_name_the_parameter(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        bench(lambda: None, **kwargs)


@pytest.mark.parametrize("old", ["warmup", "rep"])
def test_millisecond_style_names_are_refused(old):
    # warmup_s and rep_s are seconds; Triton's do_bench(warmup=, rep=) are milliseconds.
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
        bench(lambda: None, device="cpu", **{old: 1})


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is visible")
def test_cuda_without_gpu_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="device='cuda'"):
        bench(lambda: None, device="cuda")


# ------------------------------------------------------------------------------------ Measurement

def test_statistics_are_consistent_with_the_samples():
    samples = np.array([3.0, 1.0, 2.0, 10.0, 4.0, 2.5, 1.5]) * 1e-3
    m = Measurement(samples=samples, label="x")
    assert m.n == 7
    assert m.median == pytest.approx(np.median(samples))
    assert m.mean == pytest.approx(samples.mean())
    assert m.min == pytest.approx(samples.min())
    assert m.iqr == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25))
    assert m.noise == pytest.approx(m.iqr / m.median)
    assert isinstance(m.samples, np.ndarray) and m.samples.dtype == np.float64


def test_measurement_needs_samples():
    with pytest.raises(ValueError, match="samples"):
        Measurement(samples=[])


def test_repr_reads_like_a_lab_notebook_line():
    m = Measurement(samples=[1.73e-4] * 200, label="gemm 4096×4096×4096 bf16", device="H100-SXM",
                    flush_l2=True)
    assert repr(m) == "gemm 4096×4096×4096 bf16 on H100-SXM: 173 µs median (IQR 0.0%, n=200, L2 flushed)"
    g = Measurement(samples=[2.5e-6, 2.6e-6, 2.7e-6], label="add", device="H100-SXM", cuda_graph=True,
                    calls_per_sample=400)
    assert "2.60 µs median" in repr(g) and "CUDA graph of 400 calls" in repr(g) and "L2 warm" in repr(g)
    c = Measurement(samples=[1.5, 1.5], label="slow", device="CPU (x86_64, 2 cores)")
    assert repr(c) == "slow on CPU (x86_64, 2 cores): 1.50 s median (IQR 0.0%, n=2)"
    assert "L2" not in repr(c)
    assert "1.00 ms" in repr(Measurement(samples=[0.9999e-3]))
    assert "42.0 ns" in repr(Measurement(samples=[4.2e-8]))


def test_tflops_and_gbps_arithmetic():
    m = Measurement(samples=[1e-3, 2e-3, 3e-3])  # median 2 ms
    assert m.tflop_s(2e12) == pytest.approx(1000.0)
    assert m.gbps(4e9) == pytest.approx(2000.0)
    assert to_tflop_s(m, 2e12) == pytest.approx(1000.0)
    assert to_tflop_s(0.5, 1e12) == pytest.approx(2.0)
    assert to_gbps(2.0, 1e9) == pytest.approx(0.5)
    assert to_gbps(m, 4e9) == pytest.approx(m.gbps(4e9))


@pytest.mark.parametrize("call, exc, name", [
    (lambda: to_tflop_s(1.0, -5), ValueError, "flops"),
    (lambda: to_tflop_s("1", 5), TypeError, "seconds"),
    (lambda: to_gbps(0, 5), ValueError, "seconds"),
    (lambda: to_gbps(1.0, "x"), TypeError, "bytes"),
])
def test_throughput_arguments_are_checked(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


@pytest.mark.slow  # a fresh interpreter
def test_importing_perfkit_imports_neither_triton_nor_cupy():
    code = ("import sys, perfkit, perfkit.timing, perfkit.kernels; "
            "bad = [m for m in ('triton', 'cupy') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------ CUDA

@pytest.mark.gpu
@requires_cuda
@quiet
def test_cuda_matmul_measurement():
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    m = bench(lambda: a @ a, label="gemm 2048³ fp16")
    assert not m.device.startswith("CPU")
    assert m.flush_l2 and not m.cuda_graph and m.calls_per_sample == 1
    assert MIN_SAMPLES <= m.n <= MAX_SAMPLES
    assert (m.samples > 0).all()
    tf = m.tflop_s(2 * 2048**3)
    assert 1 < tf < 2000, tf
    assert "L2 flushed" in repr(m)


@pytest.mark.gpu
@requires_cuda
@quiet
def test_cuda_events_time_the_device_not_the_host():
    # torch.cuda._sleep returns to the host at once; only device time can tell N from 4N cycles.
    short = bench(lambda: torch.cuda._sleep(200_000), flush_l2=False)
    long = bench(lambda: torch.cuda._sleep(800_000), flush_l2=False)
    assert long.median / short.median == pytest.approx(4.0, rel=0.1)


@pytest.mark.gpu
@requires_cuda
@quiet
def test_cuda_l2_flush_makes_a_small_copy_slower():
    n = 4 << 20  # 16 MiB each way: fits in the L2 of an A100/H100
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    warm = bench(lambda: dst.copy_(src), flush_l2=False)
    cold = bench(lambda: dst.copy_(src), flush_l2=True)
    assert cold.flush_l2 and not warm.flush_l2
    assert cold.median >= warm.median


@pytest.mark.gpu
@requires_cuda
def test_cuda_graph_mode():
    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # flush_l2=False: no warning expected ...
        warnings.simplefilter("ignore", NoiseWarning)  # ... other than possibly noise
        g = bench(lambda: torch.add(x, 1.0, out=y), cuda_graph=True, flush_l2=False, label="add")
    assert g.cuda_graph and not g.flush_l2 and g.calls_per_sample > 1
    assert "CUDA graph of" in repr(g)
    torch.cuda.synchronize()
    assert torch.equal(y, x + 1.0)
    eager = bench(lambda: torch.add(x, 1.0, out=y), flush_l2=False)
    assert g.median < 2 * eager.median  # the graph removes launch gaps; it cannot be much slower
    with pytest.warns(UserWarning, match="warm-cache"):
        g2 = bench(lambda: torch.add(x, 1.0, out=y), cuda_graph=True)
    assert not g2.flush_l2 and g2.warnings


@pytest.mark.gpu
@requires_cuda
@quiet
def test_cuda_graph_of_a_known_duration():
    one = bench(lambda: torch.cuda._sleep(100_000), flush_l2=False)
    g = bench(lambda: torch.cuda._sleep(100_000), flush_l2=False, cuda_graph=True)
    assert g.median == pytest.approx(one.median, rel=0.15)

