"""A live run's time, predicted before it runs: a dry run of the experiment's own code on meta tensors."""

from __future__ import annotations

import time
import warnings

import pytest

import perfkit as pk
from perfkit import placement, timing
from perfkit.book import workshop
from perfkit.book.workshop import estimate, labs
from perfkit.experiments import registry

T4 = pk.device_spec("T4")


@pytest.mark.parametrize("name", workshop.LIVE_EXPERIMENTS)
def test_each_live_run_takes_under_a_minute_on_a_t4(name):
    """The issue's budget: every live cell of the labs, with the quick settings, under a minute on a T4."""
    e = workshop.estimate_run(name, T4, **workshop.quick_settings(name, T4))
    assert e.points > 0 and e.unpriced == 0, e
    assert e.run_s < 60, f"{name}: {e}"
    assert e.run_s > estimate.GPU_START_S + e.points * 0.025  # at least start-up and each point's warm-up
    assert "T4" in str(e) and "perfkit's models" in str(e)


def test_dry_run_allocates_and_times_nothing(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("timed for real")

    monkeypatch.setattr(timing, "bench", boom)
    cpu = pk.device_spec("H100-SXM")
    e = workshop.estimate_run("gemm_sizes", cpu, quick=True, dtypes=("float16",))
    assert e.points == 14 and e.op_s > 0


def test_bigger_ops_take_longer_and_the_budget_bounds_small_ones():
    cpu = pk.current_device()
    small = estimate._bench_s(1e-6, {"warmup_s": 0.005, "rep_s": 0.02, "max_time_s": 0.3}, cpu)
    assert 0.025 <= small < 0.05  # warm-up + rep_s, and the blocks that size a sample
    big = estimate._bench_s(0.1, {"warmup_s": 0.005, "rep_s": 0.02, "max_time_s": 0.3}, cpu)
    assert 0.6 < big < 0.8  # first call, a block, a warm-up block, 4 samples: max_time_s reached
    gpu = estimate._bench_s(1e-5, {}, T4)  # defaults: 25 ms warm-up, 100 ms of samples
    assert 0.05 < gpu < 0.2  # 1000 samples of op + L2 flush + event overhead, capped by rep_s


def test_predict_frame_holds_only_predictions():
    frame = workshop.predict_frame("gemm_sizes", T4, dtypes=("float16",), quick=True)
    assert "predicted_s" in frame and not {"time_s", "tflops", "iqr_s"} & set(frame.columns)
    assert frame.attrs == {"model_of": "T4"} and (frame["predicted_s"] > 0).all()
    expected = pk.predict_gemm_time(1024, 1024, 512, "float16", T4)
    row = frame[(frame.M == 1024) & (frame.K == 512)].iloc[0]
    assert row["predicted_s"] == pytest.approx(expected)


def test_bad_input():
    with pytest.raises(TypeError, match="DeviceSpec"):
        workshop.estimate_run("gemm_sizes", "T4")
    with pytest.raises(TypeError, match="takes no argument 'batch'"):
        workshop.estimate_run("gemm_sizes", T4, batch=3)
    with pytest.raises(LookupError, match="unknown experiment"):
        workshop.estimate_run("gemm_nothing", T4)
    with pytest.raises(TypeError, match="DeviceSpec"):
        workshop.predict_frame("gemm_sizes", None)


@pytest.mark.slow
@pytest.mark.parametrize("name", workshop.LIVE_EXPERIMENTS)
def test_cpu_prediction_holds_against_the_measured_run(name):
    """The issue's check: the time predicted for this CPU within 3× of the run measured right after.

    Both on one torch thread: this CPU's ceilings are measured again (as a lab's calibration does),
    the run is predicted, then run and measured twice over: its wall time, and its CPU time
    (``time.process_time``, the time the CPU gave this process). On an idle machine the two agree;
    on one busy with other tests (pytest-xdist's other worker, a notebook) the scheduler makes each
    sample wait, which inflates the wall time threefold but not the CPU time of one thread (two
    threads would spin while waiting for each other), so either within 3× passes."""
    tries = []
    for _ in range(2):
        with placement.one_cpu_thread("cpu"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = pk.current_device(refresh=True)
            settings = labs.quick_settings(name, spec)
            predicted = workshop.estimate_run(name, spec, **settings).run_s
            wall0, cpu0 = time.perf_counter(), time.process_time()
            registry.get(name)(**settings, device="cpu", progress=False)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        pk.current_device(refresh=True)  # the spec other tests see: measured on every thread again
        tries.append(f"predicted {predicted:.2f} s, measured {wall:.2f} s (CPU time {cpu:.2f} s)")
        if any(predicted / 3 <= t <= predicted * 3 for t in (wall, cpu)):
            return
    pytest.fail(f"{name}: not within 3× in two tries: {'; '.join(tries)}")


@pytest.mark.slow
def test_time_labs_script_prints_and_writes_each_run(tmp_path):
    import subprocess
    import sys

    import pandas as pd

    from testkit import SCRIPTS

    out = tmp_path / "labs.csv"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "time_labs.py"), "--lab", "labs/01_roofline",
                           "--no-calibrate", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert "fc_batch" in proc.stdout and "T4:" in proc.stdout, proc.stdout + proc.stderr
    frame = pd.read_csv(out)
    assert list(frame["experiment"]) == ["fc_batch"] and (frame["predicted_s"] > 0).all()
    assert {"measured_s", "ratio", "within_target", "t4_predicted_s"} <= set(frame.columns)
    bad = subprocess.run([sys.executable, str(SCRIPTS / "time_labs.py"), "--lab", "labs/99"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
