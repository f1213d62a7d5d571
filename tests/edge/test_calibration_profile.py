"""Device profiles (perfkit.calibration.profile): the JSON a calibration writes, read back strictly,
saved atomically, and turned into a DeviceSpec carrying the measured ceilings. No torch, no timing."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest

from perfkit.calibration import profile as pf
from perfkit.calibration.profile import (FORMAT, VERSION, DeviceProfile, cache_dir, identity_of, load_profile,
                                         profile_path, save_profile, spec_dict)
from perfkit.ceilings import GEMM_FLOOR_S, Ceilings
from perfkit.devices import DeviceSpec, device_spec
from perfkit.gemm_model import explain_gemm, predict_gemm_time
from testkit import H100, H100_NAME

H100_LIVE = replace(H100, driver_name=H100_NAME)
#: The day the fixture profiles say they were calibrated on: a fixed day in the past, never today.
DAY = "2025-03-14"
CPU_PEAKS_SOURCE = "measured here on 2025-03-10: best of a few 512×512×512 torch.matmul calls (a floor)"
CPU = replace(H100, kind="cpu", name="CPU (x86_64, 2 cores)", sms=2, l2_bytes=2 * 2**20, memory_bytes=8 * 2**30,
              mem_bandwidth=1.0e10, driver_name=None,
              peaks={"float64": 2.5e10, "float32": 5.0e10, "tf32": 5.0e10, "bfloat16": 4.0e9},
              sources={"name": "this machine", "sms": "os.cpu_count()", "mem_bandwidth": "measured here: copies",
                       "peaks": CPU_PEAKS_SOURCE})

BF16_S = 7.0e14  # measured bf16 throughput on the H100 (the default ceiling is 0.803 × 989.4 = 794.5 TFLOP/s)
GEMM_S = 1.1e-5  # measured fixed cost of a GEMM (the model's default is 5 µs)


def _matmul(flop_s: float, n: int, wide: float | None = None) -> dict:
    return {"flop_s": flop_s, "M": n, "N": n, "K": n, "time_s": 2 * n**3 / flop_s, "trials": 7,
            "how": "model-guided search: whole tiles and waves, refined around the best",
            "wide_flop_s": wide, "wide_trials": None if wide is None else 40}


def _profile(spec: DeviceSpec = H100_LIVE, *, matmul: dict | None = None, bandwidth: float = 2.9e12,
             l2: bool = True, model: str | None = None, mode: str = "default") -> DeviceProfile:
    matmul = matmul or {"bfloat16": _matmul(BF16_S, 8192, 6.9e14), "float32": _matmul(5.1e13, 8192)}
    return DeviceProfile(
        device=spec_dict(spec), identity=identity_of(spec, model),
        environment={"date": f"{DAY}T10:00:00Z", "perfkit": "0.1.0", "torch": "2.13.0", "cuda": "12.8",
                     "driver": "580.95.05", "python": "3.11.9", "platform": "Linux-6.8-x86_64"},
        mode=mode, duration_s=58.25, matmul=matmul,
        copy={"bandwidth": bandwidth, "bytes": 2 * 2**30, "how": "best of 10 device-to-device copies of 1 GiB",
              "rows": [{"bytes": 2**20, "time_s": 4e-6, "bandwidth": 2 * 2**20 / 4e-6},
                       {"bytes": 2 * 2**30, "time_s": 4 * 2**30 / bandwidth, "bandwidth": bandwidth}]},
        l2={"bandwidth": 7.5e12, "bytes": 16 * 2**20, "dram_bandwidth": bandwidth, "ratio": 7.5e12 / bandwidth,
            "shows": True, "how": "copies of 16 MiB, repeated"} if l2 else None,
        latency={"gemm_s": GEMM_S, "kernel_s": 2.5e-6, "graph_s": 1.3e-6, "how": "median of 1000 tiny kernels"},
        validation={"rows": [{"kind": "gemm", "shape": "4096x4096x4096", "dtype": "bfloat16", "bytes": 100663296,
                              "flops": 137438953472, "measured_s": 1.9e-4, "before_s": 1.75e-4, "after_s": 1.95e-4},
                             {"kind": "copy", "shape": "268435456", "dtype": "float32", "bytes": 2147483648,
                              "flops": 0, "measured_s": 7.4e-4, "before_s": 7.1e-4, "after_s": 7.4e-4}],
                    "before": {"median_abs": 0.06, "p90_abs": 0.12, "n": 2},
                    "after": {"median_abs": 0.02, "p90_abs": 0.03, "n": 2}},
        search=[{"dtype": "bfloat16", "method": "guided", "stage": "candidates", "M": 8192, "N": 8192, "K": 8192,
                 "time_s": 1.6e-3, "flop_s": 6.87e14, "predicted_s": 1.55e-3},
                {"dtype": "bfloat16", "method": "wide", "stage": "grid", "M": 4096, "N": 8192, "K": 4096,
                 "time_s": 4.0e-4, "flop_s": 6.87e14, "predicted_s": 3.9e-4}],
    )


def _cpu_profile(model: str | None = "Intel(R) Xeon(R) CPU @ 2.20GHz") -> DeviceProfile:
    return _profile(CPU, matmul={"float32": _matmul(8.0e10, 1024), "float64": _matmul(2.0e10, 1024)},
                    bandwidth=1.5e10, l2=False, model=model, mode="quick")


# -- round trips ------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [_profile, lambda: _profile(l2=False), _cpu_profile, lambda: _cpu_profile(None)],
                         ids=["h100", "h100-no-l2", "cpu", "cpu-no-model"])
def test_json_and_file_round_trips_are_exact(make, tmp_path):
    p = make()
    text = p.to_json()
    assert text.startswith('{\n "format": "perfkit-device-profile",\n "version": 1,\n "device": {')
    assert DeviceProfile.from_json(text) == p
    path = save_profile(p, tmp_path / "deep" / "folder" / "p.json")
    assert path == tmp_path / "deep" / "folder" / "p.json"
    back = load_profile(path)
    assert back == p
    assert back.to_json() == text
    first = next(iter(back.matmul.values()))
    assert type(first["M"]) is int and type(first["flop_s"]) is float and type(back.copy["bytes"]) is int
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == FORMAT


def test_construction_copies_and_makes_values_plain_json():
    search = _profile().search
    row = dict(search[0], M=np.int64(8192), flop_s=np.float32(6.5e14))
    sources = dict(H100.sources)
    device = dict(spec_dict(H100), sources=sources)
    p = replace(_profile(H100), device=device, search=(row,))
    assert p.search == [dict(row, M=8192, flop_s=float(np.float32(6.5e14)))]
    assert type(p.search[0]["M"]) is int and type(p.search[0]["flop_s"]) is float
    sources["peaks"] = "changed afterwards"
    assert p.device["sources"]["peaks"] == H100.sources["peaks"]
    assert DeviceProfile.from_json(p.to_json()) == p


@pytest.mark.parametrize("field, value, message", [
    ("mode", "fast", "mode must be one of 'quick', 'default', 'thorough'"),
    ("duration_s", float("nan"), "duration_s must be a number ≥ 0"),
    ("copy", {"bandwidth": 1e12, "bytes": 1.5, "how": "x", "rows": []},
     "copy.bytes must be a positive integer, got 1.5"),
    ("copy", {"bandwidth": 1e12, "bytes": 2, "how": "x", "rows": [{"bytes": 2, "time_s": -1.0, "bandwidth": 1.0}]},
     "copy.rows[0].time_s must be a positive number"),
    ("latency", {"gemm_s": 0.0, "kernel_s": 1e-6, "graph_s": None, "how": "x"}, "latency.gemm_s must be a positive"),
    ("identity", {"name": "H200", "kind": "gpu", "driver_name": None, "model": None}, "identity.name must be"),
])
def test_what_could_not_be_read_back_is_never_written(field, value, message, tmp_path):
    draft = replace(_profile(H100), **{field: value})  # a draft may be built (the calibration builds one)
    path = tmp_path / "p.json"
    for write in (draft.to_json, lambda: save_profile(draft, path)):
        with pytest.raises(ValueError, match="DeviceProfile: ") as e:
            write()
        assert message in str(e.value)
    assert _left(tmp_path) == []


def test_a_draft_with_an_empty_validation_is_refused_when_written():
    draft = replace(_profile(), validation={"rows": [], "before": {}, "after": {}})
    assert draft.spec().ceilings.flop_s["bfloat16"] == BF16_S  # usable before validation is measured
    with pytest.raises(ValueError, match="missing key 'validation.before.median_abs'"):
        draft.to_json()


# -- ceilings and spec ---------------------------------------------------------------------------------

def test_ceilings_are_the_measured_values():
    c = _profile().ceilings()
    assert isinstance(c, Ceilings)
    assert c.flop_s == {"bfloat16": BF16_S, "float32": 5.1e13}
    assert (c.bandwidth, c.gemm_latency_s, c.kernel_latency_s) == (2.9e12, GEMM_S, 2.5e-6)
    assert c.source == f"calibrated on {DAY} (default search, H100-SXM)"
    assert _cpu_profile().ceilings().source == f"calibrated on {DAY} (quick search, CPU (x86_64, 2 cores))"
    for phrase in ("live on", "recorded on", "published by", "model of"):
        assert phrase not in c.source


def test_spec_carries_the_measured_ceilings_and_the_models_use_them():
    spec = _profile().spec(origin="/cache/profiles/h100-sxm.json")
    assert replace(spec, measured_ceilings=None, sources=H100_LIVE.sources) == H100_LIVE
    assert spec.sources["ceilings"] == (f"measured by a perfkit calibration on {DAY} (default search) "
                                        "(profile /cache/profiles/h100-sxm.json)")
    assert _profile().spec().sources["ceilings"].endswith("(default search)")
    assert {k: v for k, v in spec.sources.items() if k != "ceilings"} == dict(H100.sources)
    cl = spec.ceilings
    assert cl.flop_s["bfloat16"] == BF16_S and cl.flop_s["float32"] == 5.1e13
    default = H100.ceilings
    assert cl.flop_s["float16"] == default.flop_s["float16"] and cl.flop_s["float8"] == default.flop_s["float8"]
    assert cl.bandwidth == 2.9e12 and cl.gemm_latency_s == GEMM_S and cl.kernel_latency_s == 2.5e-6
    assert cl.extra_latency_s == default.extra_latency_s  # Hopper's TF32 cost is kept
    # A large bf16 GEMM is math-bound: slower by about the ratio of the ceilings (794.5 / 700).
    big_cal, big_default = (predict_gemm_time(8192, 8192, 8192, "bfloat16", s) for s in (spec, H100))
    assert big_cal / big_default == pytest.approx(default.flop_s["bfloat16"] / BF16_S, rel=0.02)
    assert predict_gemm_time(8192, 8192, 8192, "float16", spec) == pytest.approx(
        predict_gemm_time(8192, 8192, 8192, "float16", H100), rel=0.02)
    # A tiny GEMM is latency-bound: its prediction follows the measured fixed cost of a GEMM.
    tiny_cal, tiny_default = (explain_gemm(64, 64, 64, "bfloat16", s) for s in (spec, H100))
    # the datasheet H100 pays Hopper's flushed-L2 GEMM floor (perfkit.ceilings.GEMM_FLOOR_S)
    assert tiny_cal.launch_overhead_s == GEMM_S and tiny_default.launch_overhead_s == GEMM_FLOOR_S["hopper"]
    assert tiny_cal.bound == "latency"
    assert tiny_cal.predicted_s - tiny_default.predicted_s == pytest.approx(GEMM_S - GEMM_FLOOR_S["hopper"], abs=1e-7)


def test_datasheet_peaks_are_never_raised():
    p = _profile(H100, matmul={"float64": _matmul(7.5e13, 8192)})  # above the 67 TFLOP/s datasheet peak
    spec = p.spec()
    assert spec.peaks == H100.peaks and spec.mem_bandwidth == H100.mem_bandwidth
    assert spec.ceilings.flop_s["float64"] == 7.5e13
    assert explain_gemm(8192, 8192, 8192, "float64", spec).predicted_s >= 2 * 8192**3 / H100.peaks["float64"]


def test_measured_cpu_peaks_are_raised_to_the_calibrated_ceilings():
    spec = _cpu_profile().spec()
    assert spec.kind == "cpu" and spec.name == "CPU (x86_64, 2 cores)"
    assert spec.peaks["float32"] == 8.0e10  # raised from the quick 50 GFLOP/s floor
    assert spec.peaks["float64"] == 2.5e10  # the measured 20 GFLOP/s is below it: kept
    assert spec.peaks["bfloat16"] == 4.0e9 and spec.peaks["tf32"] == 5.0e10
    assert spec.mem_bandwidth == 1.5e10
    assert spec.sources["peaks"].startswith(CPU_PEAKS_SOURCE) and "raised" in spec.sources["peaks"]
    assert "float32" in spec.sources["peaks"] and "float64" not in spec.sources["peaks"]
    assert "raised" in spec.sources["mem_bandwidth"]
    assert spec.ceilings.flop_s["float32"] == 8.0e10 and spec.ceilings.bandwidth == 1.5e10
    # The model can now reach the measured ceiling: a large float32 GEMM runs near 80 GFLOP/s.
    time_s = predict_gemm_time(1024, 1024, 1024, "float32", spec)
    assert 2 * 1024**3 / time_s > 5.0e10


def test_an_unknown_gpu_with_measured_peaks_is_raised_too():
    unknown = replace(H100_LIVE, name="NVIDIA Mystery", driver_name="NVIDIA Mystery", peaks={"bfloat16": 3e14},
                      sources=dict(H100.sources, peaks="measured here: a floor"))
    spec = _profile(unknown).spec()
    assert spec.peaks["bfloat16"] == BF16_S and spec.peaks["float32"] == 5.1e13
    assert spec.mem_bandwidth == unknown.mem_bandwidth  # 2.9 TB/s measured is below the 3.35 TB/s figure


def test_matches_the_device_it_was_measured_on():
    p = _profile()  # measured on H100_LIVE (driver name "NVIDIA H100 80GB HBM3")
    assert p.matches(H100_LIVE) and p.matches(H100)  # the table spec has no driver name to compare
    assert not p.matches(device_spec("H200"))
    assert not p.matches(replace(H100_LIVE, driver_name="NVIDIA H100 80GB HBM3 (other)"))
    assert not p.matches(CPU)
    cpu = _cpu_profile()
    assert cpu.matches(CPU) and cpu.matches(CPU, model="Intel(R) Xeon(R) CPU @ 2.20GHz")
    assert not cpu.matches(CPU, model="AMD EPYC 7B13")  # a CPU of another model
    assert not cpu.matches(replace(CPU, name="CPU (x86_64, 4 cores)"))
    assert not cpu.matches(replace(CPU, kind="gpu"))
    assert _cpu_profile(None).matches(CPU, model="AMD EPYC 7B13")  # no model recorded: cannot tell
    with pytest.raises(TypeError, match="spec must be a DeviceSpec"):
        p.matches("H100-SXM")


# -- loading errors ------------------------------------------------------------------------------------

def _good() -> dict:
    return json.loads(_profile().to_json())


def _with(change) -> str:
    data = _good()
    change(data)
    return json.dumps(data)


BAD_FILES = {
    "corrupt": (_profile().to_json()[:-40], "is not valid JSON: Expecting"),
    "list": ("[1, 2, 3]", "is not a perfkit device profile: it holds a JSON list"),
    "foreign": ('{"foo": 1}', "is not a perfkit device profile (it has no \"format\" key"),
    "other-format": (json.dumps({"format": "chrome-trace", "version": 1}), "its format is 'chrome-trace'"),
    "newer": (_with(lambda d: d.update(version=99)), "written by a newer perfkit: version 99, this perfkit reads 1"),
    "version-text": (_with(lambda d: d.update(version="1")), "version must be 1, got '1'"),
    "no-copy": (_with(lambda d: d.pop("copy")), "missing key 'copy'"),
    "no-flop_s": (_with(lambda d: d["matmul"]["bfloat16"].pop("flop_s")), "missing key 'matmul.bfloat16.flop_s'"),
    "unknown-key": (_with(lambda d: d.update(extra=1)), "unknown key 'extra'"),
    "empty-matmul": (_with(lambda d: d.update(matmul={})), "matmul must hold at least one dtype"),
    "negative": (_with(lambda d: d["matmul"]["bfloat16"].update(flop_s=-1.0)),
                 "matmul.bfloat16.flop_s must be a positive number, got -1.0"),
    "zero-bandwidth": (_with(lambda d: d["copy"].update(bandwidth=0)), "copy.bandwidth must be a positive number"),
    "infinite": (_with(lambda d: d["latency"].update(kernel_s=float("inf"))), "latency.kernel_s must be a positive"),
    "nan": (_with(lambda d: d["copy"].update(bandwidth=float("nan"))), "copy.bandwidth must be a positive number"),
    "text-flops": (_with(lambda d: d["matmul"]["float32"].update(flop_s="51e12")),
                   "matmul.float32.flop_s must be a positive number, got '51e12'"),
    "float-M": (_with(lambda d: d["matmul"]["bfloat16"].update(M=8192.5)),
                "matmul.bfloat16.M must be a positive integer, got 8192.5"),
    "unknown-dtype": (_with(lambda d: d["matmul"].update(float13=d["matmul"]["float32"])),
                      "matmul: unknown dtype 'float13'"),
    "alias-dtype": (_with(lambda d: d["matmul"].update(bf16=d["matmul"].pop("bfloat16"))),
                    "matmul: dtype 'bf16' must be written as 'bfloat16'"),
    "search-dtype": (_with(lambda d: d["search"][1].update(dtype="float13")), "search[1].dtype: unknown dtype"),
    "l2-list": (_with(lambda d: d.update(l2=[1])), "l2 must be an object, got [1]"),
    "shows-text": (_with(lambda d: d["l2"].update(shows="yes")), "l2.shows must be true or false"),
    "mode": (_with(lambda d: d.update(mode="fast")), "mode must be one of 'quick', 'default', 'thorough'"),
    "date": (_with(lambda d: d["environment"].update(date="yesterday")), "environment.date must be an ISO 8601"),
    "kind": (_with(lambda d: d["device"].update(kind="tpu")), "device.kind must be one of 'gpu', 'cpu'"),
    "identity": (_with(lambda d: d["identity"].update(name="H200")), "identity.name must be the device's name"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_file_is_refused_naming_the_file_and_the_problem(name, tmp_path):
    text, message = BAD_FILES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as e:
        load_profile(path)
    assert str(path) in str(e.value)
    assert message in str(e.value)


def test_the_good_file_the_bad_ones_are_made_from_loads(tmp_path):
    """The error cases above come from their change, not from the profile they start from."""
    path = tmp_path / "good.json"
    path.write_text(json.dumps(_good()), encoding="utf-8")
    assert load_profile(path) == _profile()


def test_from_json_names_where_the_text_came_from():
    with pytest.raises(ValueError, match=r"^profile is not valid JSON"):
        DeviceProfile.from_json("{")
    with pytest.raises(ValueError, match=r"^my upload: missing key 'copy'"):
        DeviceProfile.from_json(_with(lambda d: d.pop("copy")), where="my upload")
    with pytest.raises(TypeError, match="text must be"):
        DeviceProfile.from_json(_good())


def test_missing_or_unreadable_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no device profile at .*nothing.json"):
        load_profile(tmp_path / "nothing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="binary.json is not valid JSON: not UTF-8"):
        load_profile(binary)
    with pytest.raises(TypeError, match="path must be"):
        load_profile(42)


# -- saving ---------------------------------------------------------------------------------------------

def _left(folder) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("where, error", [("replace", OSError("disk full")), ("fsync", KeyboardInterrupt())],
                         ids=["replace-fails", "interrupted-while-writing"])
def test_a_failed_save_leaves_nothing_half_done(where, error, tmp_path, monkeypatch):
    path = tmp_path / "profiles" / "h100-sxm.json"

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(pf.os, where, fail)
    with pytest.raises(type(error)):
        save_profile(_profile(), path)
    monkeypatch.undo()
    assert not path.exists()
    assert _left(path.parent) == []  # no temporary file either
    # Over an existing profile, the old one stays whole.
    old = _cpu_profile()
    save_profile(old, path)
    monkeypatch.setattr(pf.os, where, fail)
    with pytest.raises(type(error)):
        save_profile(_profile(), path)
    monkeypatch.undo()
    assert load_profile(path) == old and _left(path.parent) == ["h100-sxm.json"]


def test_a_profile_that_cannot_be_serialised_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    monkeypatch.setattr(pf.json, "dumps", lambda *a, **k: (_ for _ in ()).throw(TypeError("not serialisable")))
    with pytest.raises(TypeError, match="not serialisable"):
        save_profile(_profile(), path)
    monkeypatch.undo()
    assert _left(tmp_path) == []


def test_save_overwrites_and_refuses_what_is_not_a_profile(tmp_path):
    path = tmp_path / "p.json"
    save_profile(_profile(), path)
    save_profile(_cpu_profile(), str(path))
    assert load_profile(str(path)) == _cpu_profile() and _left(tmp_path) == ["p.json"]
    with pytest.raises(TypeError, match="profile must be a DeviceProfile"):
        save_profile(_good(), path)


# -- where profiles live ---------------------------------------------------------------------------------

def test_cache_dir_honours_perfkit_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFKIT_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("PERFKIT_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "perfkit"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec says to ignore a relative path
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "perfkit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "perfkit"
    monkeypatch.setenv("PERFKIT_CACHE", "")  # empty counts as unset
    assert cache_dir() == tmp_path / "home" / ".cache" / "perfkit"


def test_profile_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFKIT_CACHE", str(tmp_path))
    assert profile_path("NVIDIA H100 80GB HBM3") == tmp_path / "profiles" / "nvidia-h100-80gb-hbm3.json"
    assert profile_path("CPU (x86_64, 2 cores)", folder=tmp_path / "x") == (
        tmp_path / "x" / "profiles" / "cpu-x86-64-2-cores.json")
    with pytest.raises(TypeError, match="folder must be"):
        profile_path("H100-SXM", folder=3)
    with pytest.raises(TypeError):
        profile_path(None)


def test_format_constants_and_public_names():
    assert (FORMAT, VERSION) == ("perfkit-device-profile", 1)
    assert set(pf.__all__) >= {"DeviceProfile", "save_profile", "load_profile", "cache_dir", "profile_path",
                               "spec_dict", "identity_of", "FORMAT", "VERSION"}
