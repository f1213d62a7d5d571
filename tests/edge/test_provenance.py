"""perfkit.provenance: the one place figure labels are made, run_or_load, and combined captions."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import perfkit as pk
from perfkit.experiments.registry import REGISTRY, register
from perfkit.calibration import recorded_ceilings
from perfkit.experiments.run import run_or_load
from perfkit.provenance import Source, caption, from_meta, live, missing, modelled, recorded_on, source_of
from testkit import H100_NAME, H100_RECORDED, framed


def test_labels_of_every_kind():
    assert str(from_meta(H100_RECORDED)) == "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"
    assert str(from_meta(dict(H100_RECORDED, complete=False))).endswith("on 2026-11-20 (incomplete)")
    published = {"device_name": "Tesla V100", "published_by": "Baidu DeepBench",
                 "published_detail": "cuBLAS 10.1", "published_date": "2019"}
    assert str(from_meta(published)) == "published by Baidu DeepBench, measured on Tesla V100 (cuBLAS 10.1, 2019)"
    run = {"live": True, "device_name": "CPU (x86_64, 2 cores)", "measured_at": "2026-11-22T09:00:00+00:00",
           "params": {"quick": True}}
    assert str(from_meta(run)) == "live (quick sweep) on CPU (x86_64, 2 cores), 2026-11-22"
    assert str(modelled(pk.device_spec("H100-SXM"))) == "model of H100-SXM: NVIDIA H100 datasheet (SXM), dense"
    assert str(missing("no recording yet")) == "no recording yet"
    import datetime as dt  # the label's date is today's in UTC, read from the same clock around the call

    before = dt.datetime.now(dt.timezone.utc).date().isoformat()
    here = live("my GPU", quick=False)
    after = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert here.kind == "live" and str(here) in (f"live on my GPU, {before}", f"live on my GPU, {after}")
    with pytest.raises(ValueError, match="kind must be one of"):
        Source("guessed")
    with pytest.raises(TypeError, match="meta"):
        from_meta("H100")


def test_source_of_a_frame():
    bare = pd.DataFrame({"time_s": [1.0]})
    assert source_of(bare) is None and source_of(None) is None
    frame = framed(bare, H100_RECORDED)
    assert source_of(frame) == from_meta(H100_RECORDED)
    assert source_of(frame[frame["time_s"] > 0]) == from_meta(H100_RECORDED)  # survives a filter
    with pytest.raises(TypeError, match="frame"):
        source_of([1, 2])


def test_recorded_on_asks_for_a_complete_recording_of_that_device_and_day():
    bare = pd.DataFrame({"time_s": [1.0]})
    assert not recorded_on(bare, "H100") and not recorded_on(None, "H100")
    frame = framed(bare, H100_RECORDED)
    assert recorded_on(frame, "H100") and recorded_on(frame, H100_NAME, "2026-11-20")
    assert not recorded_on(frame, "H200") and not recorded_on(frame, "H100", "2026-11-21")
    frame = framed(bare, H100_RECORDED, complete=False)
    assert not recorded_on(frame, "H100")  # an interrupted recording is not the one the prose quotes
    frame = framed(bare, live=True, device_name=H100_NAME, measured_at="2026-11-20T10:00:00+00:00")
    assert not recorded_on(frame, "H100")


def test_caption_says_each_label_once():
    rec, cpu = from_meta(H100_RECORDED), live("CPU (x86_64, 2 cores)")
    assert caption({"sizes": rec, "waves": rec, "small N": None}) == str(rec)
    assert caption({"sizes": rec, "waves": rec, "small N": cpu}) == f"sizes, waves: {rec}; small N: {cpu}"
    assert caption([rec, str(rec), cpu]) == f"{rec}; {cpu}"
    with pytest.raises(ValueError, match="at least one"):
        caption({"a": None})
    with pytest.raises(TypeError, match="Source"):
        caption([3])


@pytest.fixture
def fake_experiment():
    calls = []

    def fake(*, quick=False, progress=True, on_row=None):
        calls.append(quick)
        return pd.DataFrame({"time_s": [1.0]})

    register("_fake_live", "fake", {"time_s": "seconds"})(fake)
    yield calls
    REGISTRY.pop("_fake_live")


def test_run_or_load_live_and_quick_label(fake_experiment, monkeypatch):
    monkeypatch.setenv("PERFKIT_QUICK", "1")
    frame, source = run_or_load("_fake_live")
    assert fake_experiment == [True] and str(source).startswith("live (quick sweep) on ")
    assert source_of(frame) == source
    monkeypatch.delenv("PERFKIT_QUICK")
    frame, source = pk.run_or_load("_fake_live")
    assert fake_experiment[-1] is False and str(source).startswith("live on ")


def _fake_recording(root, experiment, frame, device_name=H100_NAME):
    slug = pk.data.device_slug(device_name)
    (root / slug).mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / slug / f"{experiment}.csv", index=False)
    meta = dict(H100_RECORDED, device_name=device_name, device_kind="gpu", experiment=experiment, rows=len(frame))
    (root / slug / f"{experiment}.json").write_text(json.dumps(meta))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU run_or_load measures live")
def test_run_or_load_without_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    frame, source = run_or_load("gemm_small_n")
    assert frame is None and source.kind == "missing" and "no recording" in str(source)
    _fake_recording(tmp_path, "gemm_small_n", pd.DataFrame({"N": [1, 2], "time_s": [1e-5, 1e-5]}))
    frame, source = run_or_load("gemm_small_n")
    assert list(frame["N"]) == [1, 2] and source_of(frame) == source
    assert str(source) == "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"


def test_recorded_ceilings_match_the_device(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    h100 = pk.device_spec("H100-SXM")
    assert recorded_ceilings(h100) is None
    _fake_recording(tmp_path, "ceiling_matmul", pd.DataFrame({"dtype": ["float16"], "tflops": [700.0],
                                                              "time_s": [1.0]}))
    assert recorded_ceilings(h100) is None  # the copy ceiling is still missing
    _fake_recording(tmp_path, "ceiling_copy", pd.DataFrame({"gbps": [2900.0], "time_s": [1.0]}))
    c = recorded_ceilings(h100)
    assert c == {"label": "measured (recorded on NVIDIA H100 80GB HBM3 on 2026-11-20)", "flop_s": 700e12,
                 "bandwidth": 2900e9}
    assert recorded_ceilings(pk.device_spec("A100-SXM4-80GB")) is None
    assert recorded_ceilings(h100, "float8") is None
