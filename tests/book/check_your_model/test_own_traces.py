"""Our own torch.profiler traces (issue 45 step 4): the runs, where they are written, what their metadata says,
what is refused, and perfkit reading them back. On this CPU the models are shrunk and run in float32."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.data import device_slug, repo_data_dir
from perfkit.device_runtime import cpu_name
from perfkit.devices import cuda_available
from perfkit.environment import environment
from perfkit.book.check_your_model import own_traces
from perfkit.book.check_your_model.own_traces import TRACE_COLUMNS, TRACE_RUNS, TracesFailed, record_traces
from perfkit.trace.capture import CAPTURE_KEYS

REPO = Path(__file__).resolve().parents[3]
SMALL = ["gpt2_small_bf16", "llama_decode_bf16"]  # a second or two on a CPU; ResNet-50's runs take ~20 s


@pytest.fixture
def no_models(monkeypatch):
    """Building any run's model fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(own_traces, "_build", refuse)


def _where(tmp_path: Path) -> Path:
    return tmp_path / device_slug(cpu_name()) / "traces"


def test_the_runs():
    assert list(TRACE_RUNS) == ["resnet50_bf16_nchw", "resnet50_bf16_channels_last", "gpt2_small_bf16",
                                "llama_decode_bf16"]
    assert {r.layout for n, r in TRACE_RUNS.items() if n.startswith("resnet50")} == {"nchw", "channels_last"}
    assert {r.mode for r in TRACE_RUNS.values()} == {"train", "decode"}


def test_small_runs_are_written_under_the_device_slug_and_read_back(tmp_path):
    frame = record_traces(tmp_path, SMALL, device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(TRACE_COLUMNS) and frame["name"].tolist() == SMALL
    where = _where(tmp_path)
    assert sorted(p.name for p in where.iterdir()) == sorted(f"{n}{s}" for n in SMALL for s in (".json", ".json.gz"))
    assert frame["path"].tolist() == [str(where / f"{n}.json.gz") for n in SMALL]
    assert set(frame["dtype"]) == {"float32"} and set(frame["device"]) == {cpu_name()}
    assert frame["mode"].tolist() == ["train", "decode"]
    # the same machine keys as a recording of perfkit record, none of a recording's own
    from perfkit.experiments.record import _new_meta
    from perfkit.experiments.registry import Experiment

    recording = _new_meta(Experiment("x", record_traces, ""), own_traces._spec("cpu"), environment(), True)
    for name, row in zip(SMALL, frame.itertuples()):
        raw = Path(row.path).read_bytes()
        meta = json.loads((where / f"{name}.json").read_text())
        assert row.bytes == len(raw) == meta["bytes"] <= 3_000_000
        assert meta["sha256"] == hashlib.sha256(raw).hexdigest()
        assert "traceEvents" in json.loads(gzip.decompress(raw))
        assert set(recording) - set(own_traces._RECORDING_ONLY) | set(CAPTURE_KEYS) | {"trace", "ran"} == set(meta)
        assert meta["trace"] == name and meta["device_kind"] == "cpu" and meta["params"] == {"quick": True}
        assert meta["ran"]["dtype"] == "float32" and meta["ran"]["model"] == TRACE_RUNS[name].model
        assert "shrunk" in meta["ran"]["description"]
        report = pk.diagnose_trace(row.path, progress=False)
        assert report.summary["cpu_only"] is True
        mapped = report.ops[report.ops["class"] != "unmapped"]
        assert len(mapped) > 0 and set(mapped["step"]) == {1}
    gpt2 = json.loads((where / "gpt2_small_bf16.json").read_text())["ran"]
    assert gpt2["input"] == [2, 64] and gpt2["optimizer"].startswith("torch.optim.AdamW")
    decode = json.loads((where / "llama_decode_bf16.json").read_text())["ran"]
    assert decode["batch"] == own_traces.DECODE_BATCH == 16 and decode["kv_heads"] == decode["heads"]


@pytest.mark.slow  # ResNet-50's full structure trains a step on the CPU: ~45 s for all four runs
def test_every_run_on_the_cpu(tmp_path):
    frame = record_traces(tmp_path, device="cpu", quick=True, progress=False)
    assert frame["name"].tolist() == list(TRACE_RUNS)
    assert (frame["bytes"] < 1_000_000).all()
    strides = {}
    for row in frame.itertuples():
        ops = pk.diagnose_trace(row.path, progress=False).ops
        if row.model == "resnet50":
            assert ops["op"].str.contains("conv").any()
            doc = json.loads(gzip.decompress(Path(row.path).read_bytes()))
            conv = next(e for e in doc["traceEvents"] if e.get("name") == "aten::convolution")
            strides[row.name] = conv["args"]["Input Strides"][0]
    assert strides["resnet50_bf16_nchw"] != strides["resnet50_bf16_channels_last"]  # the layouts differ


def test_a_cpu_trace_is_refused_in_the_repository_data_folder(no_models):
    for out in (repo_data_dir(), repo_data_dir() / "some" / "folder"):
        with pytest.raises(ValueError, match="repository's data/ folder, which holds only real GPU measurements"):
            record_traces(out, SMALL, device="cpu", progress=False)


def test_an_unknown_run_is_refused_before_any_model(tmp_path, no_models):
    with pytest.raises(LookupError, match="unknown runs .*'nope'.*known: resnet50_bf16_nchw, "):
        record_traces(tmp_path, ["gpt2_small_bf16", "nope"], device="cpu", progress=False)
    with pytest.raises(TypeError, match="out must be a folder path"):
        record_traces(3, device="cpu", progress=False)
    with pytest.raises(TypeError, match="quick must be"):
        record_traces(tmp_path, quick="yes", device="cpu")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_over_the_limit_fails_its_run_only(tmp_path, monkeypatch):
    real = own_traces.capture_trace

    def small_limit(step, path, **kwargs):
        return real(step, path, **kwargs, **({"max_bytes": 100} if path.name.startswith("gpt2") else {}))

    monkeypatch.setattr(own_traces, "capture_trace", small_limit)
    with pytest.raises(TracesFailed, match=r"1 trace\(s\) failed \(1 written\): gpt2_small_bf16: ValueError: .*"
                                           r"over the limit max_bytes=100") as caught:
        record_traces(tmp_path, SMALL, device="cpu", progress=False)
    assert list(caught.value.failed) == ["gpt2_small_bf16"]
    assert isinstance(caught.value.written, pd.DataFrame) and caught.value.written["name"].tolist() == SMALL[1:]
    assert sorted(p.name for p in _where(tmp_path).iterdir()) == ["llama_decode_bf16.json", "llama_decode_bf16.json.gz"]


def _script():
    spec = importlib.util.spec_from_file_location("record_traces_script", REPO / "scripts" / "record_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script(tmp_path, capsys, no_models):
    script = _script()
    bad = [["--out", str(tmp_path), "--runs", "nope"], []]
    if not cuda_available():  # a CPU recording into data/
        bad.append(["--out", str(repo_data_dir())])
    for argv in bad:
        with pytest.raises(SystemExit) as exit_:
            script.main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("record_traces.py: error: ") and err.count("\n") == 1, err


def test_the_script_prints_each_file(tmp_path, capsys, monkeypatch):
    script = _script()
    monkeypatch.setattr(script, "record_traces", lambda out, runs, **kw: record_traces(out, runs, device="cpu", **kw))
    assert script.main(["--out", str(tmp_path), "--runs", "llama_decode_bf16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    path = _where(tmp_path) / "llama_decode_bf16.json.gz"
    assert f"{path}  {path.stat().st_size:,} bytes" in out and "1 trace(s) in" in out


@pytest.mark.gpu
def test_gpu_traces_hold_kernels_joined_to_their_ops(tmp_path):
    """On a GPU (quick: the shrunk models, in bfloat16): kernels in the trace, joined to ops, in step 1."""
    frame = record_traces(tmp_path, SMALL, device="cuda", quick=True, progress=False)
    assert set(frame["dtype"]) == {"bfloat16"}
    for row in frame.itertuples():
        meta = json.loads(Path(row.path.replace(".json.gz", ".json")).read_text())
        assert meta["device_kind"] == "gpu" and meta["profiler"]["activities"] == ["CPU", "CUDA"]
        report = pk.diagnose_trace(row.path, spec=pk.current_device(), progress=False)
        kernels = report.kernels
        assert len(kernels) > 0 and (kernels["joined_by"] == "correlation").mean() > 0.9
        assert set(kernels.loc[kernels["step"] >= 0, "step"]) == {1}
        assert (report.ops["class"] != "unmapped").any()
