"""perfkit.meta (a frame's metadata, typed; which GPU measured a frame) and devices.resolve_spec."""

import json

import pandas as pd
import pytest

import perfkit as pk
from perfkit.experiments import registry
from perfkit.data import load
from perfkit.devices import KNOWN_DEVICES, resolve_spec
from perfkit.meta import FrameMeta, gpu_of, is_cpu
from perfkit.provenance import from_meta, source_of
from testkit import H100


#: What the recorder writes beside a CSV (perfkit.experiments.record), trimmed to the keys readers use.
RECORDED = {"experiment": "gemm_sizes", "description": "d", "device_name": "NVIDIA H100 80GB HBM3",
            "device_kind": "gpu", "device": "H100-SXM", "sm_count": 132, "recorded_at": "2026-02-01T10:00:00+00:00",
            "finished_at": "2026-02-01T11:00:00+00:00", "complete": True, "error": None, "params": {"quick": False},
            "columns": {"n": "size", "time_s": "duration (s)"}, "needs": [], "rows": 2}
LIVE = {"experiment": "gemm_sizes", "live": True, "device_name": "CPU (x86_64, 2 cores)", "device_kind": "cpu",
        "measured_at": "2026-03-04T05:06:07+00:00", "params": {"quick": True}}
PUBLISHED = {"experiment": "deepbench_gemm", "device_name": "Tesla V100", "device": "V100-SXM2", "device_kind": "gpu",
             "published_by": "Baidu DeepBench", "published_date": "2019", "published_detail": "cuBLAS 10.1",
             "timing": "CUDA events", "caveat": "old", "rows": 5, "complete": True, "gemm_beta": 1}


def _frame(meta):
    frame = pd.DataFrame({"n": [1, 2], "time_s": [1e-6, 2e-6]})
    frame.attrs["meta"] = meta
    return frame


# --- resolve_spec ---------------------------------------------------------------------------------

def test_resolve_spec_on_each_kind():
    assert resolve_spec(H100) is H100
    assert resolve_spec("H100-SXM") is H100 and resolve_spec("h100 sxm") is H100
    assert resolve_spec("H100") is H100  # the bare name means the SXM part (pk.advise(..., spec="H100"))
    assert resolve_spec(None, default="A10") is KNOWN_DEVICES["A10"]
    assert resolve_spec(None, default=H100) is H100
    assert resolve_spec(None) is pk.devices.current_device()


@pytest.mark.parametrize("bad", [132, 1.5, b"H100-SXM", ["H100-SXM"], {"name": "H100-SXM"}])
def test_resolve_spec_refuses_what_is_not_a_device_naming_the_parameter(bad):
    with pytest.raises(TypeError, match=r"gpu must be a device name such as 'H100-SXM', a DeviceSpec or None"):
        resolve_spec(bad, param="gpu")


def test_resolve_spec_unknown_names_and_refused_none():
    with pytest.raises(LookupError, match=r"^gpu: unknown device name 'TPU v5e'; known devices: NVIDIA: V100-SXM2"):
        resolve_spec("TPU v5e", param="gpu")
    with pytest.raises(TypeError, match="spec must be a device name such as 'H100-SXM', a DeviceSpec, got None"):
        resolve_spec(None, none_ok=False)


# --- the models take a name as well as a spec -----------------------------------------------------

def test_the_models_accept_a_name_and_give_the_same_numbers():
    by_name = pk.explain_gemm(4096, 4096, 4096, "bfloat16", "H100-SXM")
    assert by_name == pk.explain_gemm(4096, 4096, 4096, "bfloat16", H100)
    assert pk.predict_gemm_time(1024, 512, 4096, "float16", "A100-SXM4-80GB") == pk.predict_gemm_time(
        1024, 512, 4096, "float16", KNOWN_DEVICES["A100-SXM4-80GB"])
    assert pk.memory_time(1e9, "H100-SXM") == pk.memory_time(1e9, H100)
    assert pk.predict_layer_time("relu", (8, 1024), "float16", "H100-SXM") == pk.predict_layer_time(
        "relu", (8, 1024), "float16", H100)
    assert pk.math_bound_batch(4096, 4096, "V100-SXM2") == pk.math_bound_batch(4096, 4096,
                                                                               KNOWN_DEVICES["V100-SXM2"]) == 149
    assert pk.roofline_time(1e12, 1e9, "H100-SXM", "float16") == pk.roofline_time(1e12, 1e9, H100, "float16")
    assert pk.roofline.attainable_flop_s(10.0, "H100-SXM", "float16") == pk.roofline.attainable_flop_s(
        10.0, H100, "float16")
    for call in (lambda: pk.predict_gemm_time(64, 64, 64, "float16", 7),
                 lambda: pk.memory_time(1e6, None), lambda: pk.roofline_time(1, 1, 3.0, "float16")):
        with pytest.raises(TypeError, match="spec must be a device name"):
            call()


# --- FrameMeta ------------------------------------------------------------------------------------

def test_frame_meta_of_a_live_frame():
    frame = registry.conform(_frame(None), {"n": "", "time_s": ""}, "x")
    frame.attrs["meta"] = registry._run_meta("gemm_sizes", {"device": "cpu", "quick": True})
    meta = FrameMeta.of(frame)
    assert meta.live and meta.quick and meta.experiment == "gemm_sizes" and meta.device_kind == "cpu"
    assert meta.device_name == pk.devices.cpu_name() and meta.measured_at and meta.recorded_at is None
    assert meta.is_cpu and is_cpu(frame) and gpu_of(frame) is None and meta.complete is None
    assert frame.attrs["meta"] == meta.raw  # what is written stays a plain dict


def test_frame_meta_of_a_recording_loaded_from_disk(tmp_path):
    where = tmp_path / "nvidia-h100-80gb-hbm3"
    where.mkdir()
    _frame(None).to_csv(where / "gemm_sizes.csv", index=False)
    (where / "gemm_sizes.json").write_text(json.dumps(RECORDED), encoding="utf-8")
    frame = load("gemm_sizes", root=tmp_path)
    assert frame.attrs["meta"] == RECORDED  # the file format is read as it is
    meta = FrameMeta.of(frame)
    assert (meta.device, meta.device_name, meta.device_kind) == ("H100-SXM", "NVIDIA H100 80GB HBM3", "gpu")
    assert meta.recorded_at.startswith("2026-02-01") and meta.complete is True and not meta.live
    assert meta.rows == 2 and list(meta.columns) == ["n", "time_s"] and not meta.quick and not meta.published
    assert gpu_of(frame) is H100 and gpu_of(meta) is H100 and gpu_of(RECORDED) is H100 and not is_cpu(frame)
    assert str(source_of(frame)) == "recorded on NVIDIA H100 80GB HBM3 on 2026-02-01"
    # an older recording without the table name: the driver's name says which GPU
    old = {k: v for k, v in RECORDED.items() if k != "device"}
    assert gpu_of(old) is H100 and FrameMeta.of(old).device is None


def test_frame_meta_of_a_published_frame_and_of_nothing():
    meta = FrameMeta.of(_frame(PUBLISHED))
    assert meta.published and meta.published_by == "Baidu DeepBench" and meta.published_date == "2019"
    assert (meta.timing, meta.caveat, meta.gemm_beta, meta.rows) == ("CUDA events", "old", 1.0, 5)
    assert gpu_of(_frame(PUBLISHED)) is KNOWN_DEVICES["V100-SXM2"]
    assert str(from_meta(meta)) == str(from_meta(PUBLISHED)) == (
        "published by Baidu DeepBench, measured on Tesla V100 (cuBLAS 10.1, 2019)")
    for nothing in (None, {}, _frame(None), pd.DataFrame()):
        empty = FrameMeta.of(nothing)
        assert not empty and empty == FrameMeta() and empty.device is None and empty.complete is None
        assert gpu_of(nothing) is None and not is_cpu(nothing)
    assert FrameMeta.of(meta) is meta
    with pytest.raises(TypeError, match="frame must be a DataFrame, its attrs\\['meta'\\] dict, a FrameMeta or None"):
        FrameMeta.of("H100-SXM")


def test_gpu_of_an_unknown_gpu_and_a_cpu_recording():
    assert gpu_of({"device_name": "NVIDIA A40", "device_kind": "gpu", "recorded_at": "2026-01-01"}) is None
    assert gpu_of({"device_name": "CPU (x86_64, 2 cores)", "recorded_at": "2026-01-01"}) is None
    assert is_cpu({"device_name": "CPU (arm64, 8 cores)"}) and is_cpu({"device_kind": "cpu"})


def test_the_advisor_takes_a_bare_name():
    assert pk.advisor.advised_spec("H100") == (H100, "")
    with pytest.raises(TypeError, match="spec must be a device name"):
        pk.advisor.advised_spec(3)
