"""Experiments on the CPU: the same code paths the GPU recording uses, with small sizes."""

from __future__ import annotations

import json

import matplotlib
import pandas as pd
import pytest
import torch

matplotlib.use("Agg")

import perfkit as pk
from perfkit.experiments import REGISTRY, common, gemm, missing_needs
from perfkit.experiments.ceilings import measured_ceilings


def test_every_experiment_declares_columns_with_time_s():
    assert {"waves", "gemm_sizes", "gemm_alignment", "gemm_tile_quantization", "gemm_tile_sizes", "gemm_waves",
            "gemm_transposes", "gemm_small_n", "ceiling_matmul", "ceiling_copy", "timer_validation"} <= set(REGISTRY)
    for exp in REGISTRY.values():
        assert "time_s" in exp.columns, exp.name
        assert set(exp.needs) <= {"cuda", "cupy", "triton"}


def test_unknown_experiment_lists_registered_names():
    with pytest.raises(LookupError, match="gemm_sizes"):
        pk.experiments.get("no_such_experiment")


def test_gemm_sizes_cpu_rows_arrive_one_by_one():
    seen = []
    frame = gemm.gemm_sizes(device="cpu", quick=True, progress=False, on_row=seen.append)
    assert len(seen) == len(frame) > 0
    assert list(frame.columns[:4]) == ["M", "N", "K", "dtype"]
    assert (frame["time_s"] > 0).all()
    flops = 2 * frame["M"] * frame["N"] * frame["K"]
    assert (abs(frame["tflops"] - flops / frame["time_s"] / 1e12) < 1e-9).all()
    assert set(frame["sweep"]) == {"mn", "k"}


def test_interrupted_sweep_keeps_measured_rows():
    kept = []

    def on_row(row):
        kept.append(row)
        if len(kept) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gemm.gemm_small_n(device="cpu", progress=False, on_row=on_row)
    assert [r["N"] for r in kept] == [1, 2, 4]


def test_too_large_sweep_is_refused_before_allocating(monkeypatch):
    def no_alloc(*a, **k):
        raise AssertionError("allocated before the size check")

    monkeypatch.setattr(common, "matmul_fn", no_alloc)
    monkeypatch.setattr(gemm, "matmul_fn", no_alloc)
    with pytest.raises(ValueError, match="GiB.*free"):
        gemm.gemm_alignment(M=400_000, N=400_000, K_center=400_000, device="cpu", progress=False)


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="span"):
        gemm.gemm_alignment(K_center=8, span=8, device="cpu")
    with pytest.raises(TypeError, match="M"):
        gemm.gemm_small_n(M=2.5, device="cpu")
    with pytest.raises(ValueError, match="device"):
        gemm.gemm_sizes(device="tpu")
    with pytest.raises(ValueError, match="layout"):
        common.matmul_fn(4, 4, 4, "float32", "cpu", layout="XY")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal message")
@pytest.mark.parametrize("name", ["gemm_tile_quantization", "gemm_tile_sizes", "gemm_waves", "waves"])
def test_gpu_only_experiments_refuse_clearly_on_cpu(name):
    with pytest.raises(RuntimeError, match="GPU"):
        REGISTRY[name](device="auto", progress=False)
    assert "cuda" in missing_needs(REGISTRY[name])


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_matmul_fn_layouts(layout):
    fn = common.matmul_fn(6, 4, 5, "float64", "cpu", layout)
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    a, b = cells["a"], cells["b"]
    assert a.shape == (6, 5) and b.shape == (5, 4)
    assert a.is_contiguous() == (layout[0] == "N") and b.is_contiguous() == (layout[1] == "N")
    torch.testing.assert_close(fn(), a @ b)


def test_alignment_penalty():
    frame = pd.DataFrame({"dtype": ["float16"] * 4, "aligned": [True, False, False, True],
                          "time_s": [1.0, 2.0, 3.0, 1.0]})
    out = gemm.alignment_penalty(frame)
    assert out.loc["float16", "penalty"] == pytest.approx(2.5)


def test_measured_ceilings_picks_the_best():
    mm = pd.DataFrame({"dtype": ["float16", "float16", "float32"], "tflops": [500.0, 700.0, 50.0]})
    cp = pd.DataFrame({"gbps": [1000.0, 2900.0]})
    best = measured_ceilings(mm, cp)
    assert best["flops"] == {"float16": 700e12, "float32": 50e12}
    assert best["bandwidth"] == 2900e9


def _fake_recording(root, experiment, frame, device_name="NVIDIA H100 80GB HBM3"):
    slug = pk.data.device_slug(device_name)
    (root / slug).mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / slug / f"{experiment}.csv", index=False)
    meta = {"device_name": device_name, "device_kind": "gpu", "experiment": experiment, "complete": True,
            "recorded_at": "2026-11-20T10:00:00+00:00", "finished_at": "2026-11-20T10:05:00+00:00",
            "rows": len(frame), "columns": {}, "sm_count": 132}
    (root / slug / f"{experiment}.json").write_text(json.dumps(meta))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU run_or_load measures live")
def test_run_or_load_without_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    frame, source = pk.run_or_load("gemm_small_n")
    assert frame is None and "no recording" in source
    _fake_recording(tmp_path, "gemm_small_n", pd.DataFrame({"N": [1, 2], "time_s": [1e-5, 1e-5]}))
    frame, source = pk.run_or_load("gemm_small_n")
    assert list(frame["N"]) == [1, 2]
    assert source.startswith("recorded on NVIDIA H100 80GB HBM3 on 2026-11-20")


@pytest.mark.skipif(torch.cuda.is_available(), reason="uses fake recordings")
def test_recorded_ceilings_match_the_device(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    from perfkit.experiments.ceilings import recorded_ceilings

    h100 = pk.device_spec("H100-SXM")
    assert recorded_ceilings(h100) is None
    _fake_recording(tmp_path, "ceiling_matmul", pd.DataFrame({"dtype": ["float16"], "tflops": [700.0], "time_s": [1.0]}))
    _fake_recording(tmp_path, "ceiling_copy", pd.DataFrame({"gbps": [2900.0], "time_s": [1.0]}))
    c = recorded_ceilings(h100)
    assert c["flops"] == 700e12 and c["bandwidth"] == 2900e9 and "recorded on" in c["label"]
    assert recorded_ceilings(pk.device_spec("A100-SXM4-80GB")) is None


def test_measure_gemm_on_cpu():
    t = gemm.measure_gemm(64, 64, 64, "float32", device="cpu")
    assert 0 < t < 1
    with pytest.raises(ValueError, match="free"):
        gemm.measure_gemm(10**6, 10**6, 10**6, "float32", device="cpu")


def test_timer_validation_on_cpu_compares_perfkit_with_torch_timer():
    frame = REGISTRY["timer_validation"](device="cpu", quick=True, progress=False)
    assert len(frame) == 4 and frame["triton_do_bench_s"].isna().all()
    assert (frame["perfkit_time_s"] > 0).all() and (frame["torch_timer_s"] > 0).all()
    ratio = frame["perfkit_time_s"] / frame["torch_timer_s"] - 1
    assert (frame["perfkit_vs_torch_timer"] - ratio).abs().max() < 1e-12
    # How close the two timers are is a benchmark question (scripts/bench_kernels.py), not a unit test.


def test_run_or_load_quick_env_labels_live_runs(monkeypatch):
    from perfkit.experiments import Experiment

    calls = []
    fake = Experiment("fake_quick", lambda **kw: calls.append(kw) or pd.DataFrame({"time_s": [1.0]}), "fake", {})
    monkeypatch.setitem(REGISTRY, "fake_quick", fake)
    monkeypatch.setenv("PERFKIT_QUICK", "1")
    frame, source = pk.run_or_load("fake_quick")
    assert calls == [{"quick": True}] and source.startswith("live (quick sweep) on ")
    monkeypatch.delenv("PERFKIT_QUICK")
    frame, source = pk.run_or_load("fake_quick")
    assert calls[-1] == {} and source.startswith("live on ")
