"""What every lab shares: its dtype and quick settings, the machine note, live runs and what to expect."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import workshop
from perfkit.book.workshop import labs
from perfkit.display import Note
from perfkit.experiments import registry
from perfkit.memory_model import predict_layer_time
from testkit import framed

T4 = pk.device_spec("T4")


def test_quick_settings_take_the_lab_dtype():
    cpu = pk.current_device()
    assert workshop.lab_dtype(T4) == "float16" and workshop.lab_dtype(cpu) == "float32"
    assert workshop.quick_settings("gemm_sizes", T4) == {"quick": True, "dtypes": ("float16",)}
    assert workshop.quick_settings("activation_sizes", cpu)["dtype"] == "float32"
    with pytest.raises(LookupError, match="no lab runs experiment 'waves'"):
        workshop.quick_settings("waves", T4)


def test_machine_note():
    cpu = pk.current_device()
    assert "No GPU here" in str(workshop.machine_note(cpu))
    assert workshop.machine_note(T4) is None
    unknown = dataclasses.replace(T4, name="Mystery GPU", sources={"name": "not in perfkit's table: NVIDIA GPU"})
    found = workshop.machine_note(unknown)
    assert isinstance(found, Note) and "(Mystery GPU)" in " ".join(str(found).split())


def test_live_refuses_bad_input():
    with pytest.raises(LookupError, match="no lab runs experiment"):
        workshop.live("waves", T4)
    with pytest.raises(TypeError, match="DeviceSpec"):
        workshop.live("gemm_sizes", "T4")


def test_live_skips_an_experiment_whose_package_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(registry, "missing_needs", lambda e: ["cuda", "triton"])
    assert workshop.live("gemm_sizes", pk.current_device()) is None
    assert "needs triton" in capsys.readouterr().out


def test_live_skips_a_run_that_does_not_fit_in_free_memory(monkeypatch, capsys):
    from perfkit import placement

    monkeypatch.setattr(placement, "free_memory", lambda device: 1024)  # a GPU someone else has filled
    assert workshop.live("decode_steps", pk.current_device()) is None
    out = capsys.readouterr().out
    assert "decode_steps was not run" in out and "is free on" in " ".join(out.split())


def test_live_says_its_time_then_runs(short_bench, capsys):
    frame = workshop.live("gemm_alignment", pk.current_device())
    out = capsys.readouterr().out
    assert "expected about" in out and "on a T4 (perfkit's models, before running)" in out and "took" in out
    assert len(frame) == 9 and set(frame["dtype"]) == {"float32"}


def test_run_times():
    table = workshop.run_times("labs/02_gemm")
    assert list(table["experiment"]) == list(workshop.LIVE["labs/02_gemm"])
    assert (table["T4 (predicted)"] > 0).all()
    with pytest.raises(LookupError, match="unknown lab"):
        workshop.run_times("labs/99")


def _recordings(lab):
    return {name: pk.data.load(name, "nvidia-h200") for name in workshop.RECORDED[lab]}


@pytest.mark.parametrize("lab", list(workshop.LABS))
def test_expectations_put_a_t4_prediction_beside_the_h200_recording(lab):
    frame = workshop.expectations(lab, _recordings(lab))
    assert list(frame.columns) == ["what", "T4 (perfkit's prediction)", "H200 (our recording)"]
    assert len(frame) >= 2 and (frame.iloc[:, 1:] > 0).all().all()
    assert set(frame.attrs["recorded"]) == set(workshop.RECORDED[lab])


def test_expectations_numbers():
    frame = workshop.expectations("labs/03_memory_bound", _recordings("labs/03_memory_bound"))
    assert frame.iloc[0, 1] == pytest.approx(predict_layer_time("relu", (2**14,), "float16", T4) * 1e6)
    rec = pk.data.load("activation_sizes", "nvidia-h200")
    relu = rec[(rec.op == "relu") & (rec.elements == 2**24) & (rec["pass"] == "forward")].iloc[0]
    assert frame.iloc[1, 2] == pytest.approx(relu["gbps"])
    gemm = workshop.expectations("labs/02_gemm", _recordings("labs/02_gemm"))
    assert 4 < gemm.iloc[2, 2] < 6  # K = 4095 against 4096 on the H200: about five times


def test_expectations_refuse_missing_or_foreign_recordings():
    with pytest.raises(LookupError, match="unknown lab"):
        workshop.expectations("labs/07", {})
    with pytest.raises(ValueError, match="recordings lacks"):
        workshop.expectations("labs/04_transformers", {})
    h100 = framed(pd.DataFrame({"batch": [1]}), device_name="NVIDIA H100 80GB HBM3")
    with pytest.raises(ValueError, match="not an H200"):
        workshop.expectations("labs/04_transformers", {"decode_steps": h100})
