"""perfkit.ceilings and perfkit.calibrated: the ceilings travel on the DeviceSpec; the models never read data/."""

import dataclasses
import importlib
import sys

import pandas as pd
import pytest
import torch

import perfkit as pk
from perfkit import data
from perfkit.ceilings import Ceilings, default_ceilings, merged, resolve_ceilings
from perfkit.experiments.registry import REGISTRY
from testkit import H100, H100_NAME

#: A GEMM, a memory-bound layer and a byte count, predicted on a named spec.
GEMM = (4096, 4096, 4096, "bfloat16")
RELU = ("relu", (64, 1024, 1024), "bfloat16")


def _record_ceilings(out, monkeypatch, *, tflops, gbps, dtype="bfloat16"):
    """Record a ceiling_matmul and a ceiling_copy "measured on an H100" into ``out`` with perfkit's
    own recorder (the experiments replaced by fakes that hand over the given rows)."""
    recorder = importlib.import_module("perfkit.experiments.record")
    h100 = dataclasses.replace(H100, driver_name=H100_NAME)
    monkeypatch.setattr(recorder, "current_device", lambda: h100)
    monkeypatch.setattr(recorder, "missing_needs", lambda exp: [])
    n = 8192
    rows = {"ceiling_matmul": [{"M": n, "N": n, "K": n, "dtype": dtype, "time_s": 2 * n ** 3 / (tflops * 1e12),
                                "iqr_s": 0.0, "tflops": tflops}],
            "ceiling_copy": [{"bytes": 1 << 30, "bytes_moved": 2 << 30, "time_s": (2 << 30) / (gbps * 1e9),
                              "iqr_s": 0.0, "gbps": gbps}]}
    for name, measured in rows.items():
        def fake(*, quick=False, progress=True, on_row=None, _rows=measured):
            for row in _rows:
                on_row(row)
            return pd.DataFrame(_rows)

        monkeypatch.setitem(REGISTRY, name, dataclasses.replace(REGISTRY[name], func=fake))
    paths = pk.record(list(rows), out, quick=True, progress=False)
    assert len(paths) == 2


def _answers(spec, ceilings=None):
    return {"predict_gemm_time": pk.predict_gemm_time(*GEMM, spec, ceilings=ceilings),
            "explain_gemm": pk.explain_gemm(*GEMM, spec, ceilings=ceilings).predicted_s,
            "memory_time": pk.memory_time(1e8, spec, ceilings=ceilings),
            "predict_layer_time": pk.predict_layer_time(*RELU, spec) if ceilings is None else
            pk.memory_time(pk.layer_bytes(*RELU), spec, ceilings=ceilings)}


def _advice_layers(monkeypatch, root):
    monkeypatch.setenv("PERFKIT_DATA", str(root))
    return pk.advise(torch.nn.Linear(64, 64), torch.zeros(8, 64), spec="H100-SXM").layers


def test_models_on_a_named_spec_open_nothing_under_data(tmp_path, monkeypatch):
    recorded, empty = tmp_path / "recorded", tmp_path / "empty"
    empty.mkdir()
    _record_ceilings(recorded, monkeypatch, tflops=400.0, gbps=1500.0)  # far below the H100's defaults
    h100 = pk.device_spec("H100-SXM")
    assert pk.calibrated(h100, root=recorded).ceilings.bandwidth == pytest.approx(1500e9)  # it would change them
    expected = _answers(h100, default_ceilings(h100))
    expected_layers = _advice_layers(monkeypatch, empty)

    def refuse(*args, **kwargs):
        raise AssertionError("a model read data/")

    for name in ("load", "data_root", "recordings", "has_recording", "read_meta"):
        original = getattr(data, name)
        for module in [m for n, m in sys.modules.items() if n.startswith("perfkit") and m is not None]:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, refuse)
    monkeypatch.setenv("PERFKIT_DATA", str(recorded))
    with pytest.raises(AssertionError, match="read data"):
        pk.calibrated(h100)  # the guard is in place: the edge does read data/
    assert _answers(h100) == pytest.approx(expected)
    assert _answers(pk.device_spec("H100-SXM")) == pytest.approx(expected)
    pd.testing.assert_frame_equal(_advice_layers(monkeypatch, recorded), expected_layers)


def test_calibrated_attaches_the_recorded_ceilings(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path / "nowhere"))
    _record_ceilings(tmp_path, monkeypatch, tflops=700.0, gbps=3000.0)
    h100 = pk.device_spec("H100-SXM")
    spec = pk.calibrated(h100, root=tmp_path)
    assert spec is not h100 and spec.name == h100.name and spec.peaks == h100.peaks
    c, default = spec.ceilings, default_ceilings(h100)
    assert isinstance(c, Ceilings) and c == pk.achievable_ceilings(spec)
    assert c.flop_s["bfloat16"] == pytest.approx(700e12) and c.bandwidth == pytest.approx(3000e9)
    assert c.source.startswith(f"measured (recorded on {H100_NAME} on ")
    for d in set(default.flop_s) - {"bfloat16"}:  # dtypes not measured keep their default
        assert c.flop_s[d] == default.flop_s[d]
    assert c.extra_latency_s == default.extra_latency_s
    assert c == merged(default, spec.measured_ceilings)
    # the predictions follow the spec's ceilings
    p = pk.explain_gemm(*GEMM, spec)
    assert p.flop_s_ceiling == pytest.approx(700e12) and p.ceilings_source == c.source
    assert pk.predict_gemm_time(*GEMM, spec) != pk.predict_gemm_time(*GEMM, h100)
    assert pk.predict_gemm_time(*GEMM, spec, ceilings="default") == pk.predict_gemm_time(*GEMM, h100)
    assert pk.memory_time(1e9, spec) == pytest.approx(pk.gemm_model.DEFAULT_MODEL.latency_s + 1e9 / 3000e9)
    assert pk.memory_time(1e9, h100) == pytest.approx(pk.gemm_model.DEFAULT_MODEL.latency_s + 1e9 / (0.9 * 3350e9))
    assert pk.calibrated("H100-SXM", root=tmp_path) == spec
    # nothing recorded: the spec comes back unchanged
    a100 = pk.device_spec("A100-SXM4-80GB")
    assert pk.calibrated(a100, root=tmp_path) is a100
    assert pk.calibrated(h100, root=tmp_path / "empty") is h100
    assert pk.calibrated(h100) is h100  # $PERFKIT_DATA holds nothing


def test_recorded_gemms_are_validated_with_the_ceilings_recorded_beside_them(tmp_path, monkeypatch):
    _record_ceilings(tmp_path, monkeypatch, tflops=700.0, gbps=3000.0)
    frames = pk.validation.validation_frames(root=tmp_path)
    f = frames["ceiling_matmul on nvidia-h100-80gb-hbm3"]
    spec = pk.calibrated("H100-SXM", root=tmp_path)
    assert f["predicted_s"].iloc[0] == pytest.approx(pk.predict_gemm_time(8192, 8192, 8192, "bfloat16", spec))
    assert f["predicted_s"].iloc[0] != pytest.approx(
        pk.predict_gemm_time(8192, 8192, 8192, "bfloat16", pk.device_spec("H100-SXM")))


@pytest.mark.parametrize("bad", [42, None, b"H100-SXM", {"name": "H100-SXM"}])
def test_calibrated_refuses_what_is_not_a_spec(bad):
    with pytest.raises(TypeError, match="spec"):
        pk.calibrated(bad)


def test_calibrated_names_an_unknown_device():
    with pytest.raises(LookupError):
        pk.calibrated("H1000")


def test_ceilings_choices_and_spec_checks():
    h100 = pk.device_spec("H100-SXM")
    assert resolve_ceilings(h100) == resolve_ceilings(h100, "achievable") == h100.ceilings == default_ceilings(h100)
    assert resolve_ceilings(h100, "datasheet").flop_s["bfloat16"] == 989.4e12
    with pytest.raises(TypeError, match="ceilings must be"):
        resolve_ceilings(h100, "measured")
    with pytest.raises(TypeError, match="ceilings must be"):
        pk.memory_time(1e6, h100, ceilings="best")
    with pytest.raises(TypeError, match="spec must be a DeviceSpec"):
        pk.achievable_ceilings("H100-SXM")
    with pytest.raises(LookupError, match="bandwidth"):
        pk.achievable_ceilings(dataclasses.replace(h100, mem_bandwidth=None))
    with pytest.raises(TypeError, match="measured must be a Ceilings"):
        merged(default_ceilings(h100), {"flop_s": {}})
