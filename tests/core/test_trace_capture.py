"""perfkit.trace.capture: one step profiled into a gzipped Chrome trace and its metadata, read back by perfkit."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

import perfkit as pk
from perfkit.trace.capture import CAPTURE_KEYS, SANITIZED, capture_trace, metadata_path

torch = pytest.importorskip("torch")


class TinyStep:
    """One SGD step of a two-layer MLP on the CPU; counts its calls."""

    def __init__(self, fail: bool = False):
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        self.x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.calls, self.fail = 0, fail

    def __call__(self) -> None:
        self.calls += 1
        if self.fail:
            raise RuntimeError("the step broke")
        self.opt.zero_grad()
        self.model(self.x).square().mean().backward()
        self.opt.step()


def test_a_cpu_step_is_written_gzipped_with_its_metadata(tmp_path):
    step = TinyStep()
    path = tmp_path / "traces" / "mlp.json.gz"
    info = capture_trace(step, path, meta={"model": "mlp", "batch": 8}, warmup=3, device="cpu")
    assert step.calls == 3 + 2  # warmup, then the profiler's warm-up step and the recorded one
    assert sorted(p.name for p in path.parent.iterdir()) == ["mlp.json", "mlp.json.gz"]  # nothing hidden left
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and not raw[3] & 0x08  # gzip, without a file name in its header
    doc = json.loads(gzip.decompress(raw))
    events = doc["traceEvents"]
    assert info["events"] == len(events) > 10
    assert info["json_bytes"] == len(gzip.decompress(raw))
    assert [e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")] == ["ProfilerStep#1"]
    assert any(e.get("name") == "aten::addmm" and "Input Dims" in e.get("args", {}) for e in events)  # shapes
    assert info["bytes"] == len(raw) <= 3_000_000
    assert info["sha256"] == hashlib.sha256(raw).hexdigest()
    assert json.loads(metadata_path(path).read_text()) == info
    assert {"model", "batch", *CAPTURE_KEYS} <= set(info) and info["model"] == "mlp" and info["file"] == "mlp.json.gz"
    assert info["profiler"]["activities"] == ["CPU"] and info["profiler"]["record_shapes"] is True
    assert info["profiler"]["with_stack"] is False and info["profiler"]["profile_memory"] is False
    assert info["recorded_at"].endswith("+00:00")
    assert "host_name" not in doc and doc["traceName"] == "mlp.json.gz"  # no machine's name is kept
    assert info["sanitized"] == SANITIZED


def test_perfkit_reads_the_trace_back(tmp_path):
    path = tmp_path / "mlp.json.gz"
    capture_trace(TinyStep(), path, meta={}, device="cpu")
    report = pk.diagnose_trace(path, progress=False)
    assert report.summary["cpu_only"] is True
    ops = report.ops
    assert len(ops) > 0 and set(ops["step"]) == {1}
    addmm = ops[ops["op"] == "aten::addmm"]
    assert len(addmm) == 2 and set(addmm["shapes"]) == {"8x16 @ 16x32", "8x32 @ 32x4"}
    assert (addmm["flops"] == [2 * 8 * 16 * 32, 2 * 8 * 32 * 4]).all() and (addmm["time_s"] > 0).all()
    assert {"forward", "backward"} <= set(ops["pass"])


def test_over_the_limit_is_refused_and_leaves_nothing(tmp_path):
    path = tmp_path / "big.json.gz"
    with pytest.raises(ValueError, match=r"big\.json\.gz would be [\d,]+ bytes gzipped, over the limit max_bytes=100"):
        capture_trace(TinyStep(), path, meta={}, max_bytes=100, device="cpu")
    assert list(tmp_path.iterdir()) == []


def test_a_failing_step_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="the step broke"):
        capture_trace(TinyStep(fail=True), tmp_path / "t.json.gz", meta={}, warmup=0, device="cpu")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, error, match", [
    ({"path": "t.json"}, ValueError, "path must name a gzipped trace file ending in .json.gz"),
    ({"path": ".json.gz"}, ValueError, "path must name"),
    ({"meta": {"bytes": 1}}, ValueError, r"must not hold the keys capture_trace writes itself: \['bytes'\]"),
    ({"meta": ["model"]}, TypeError, "meta must be a dict"),
    ({"meta": {"x": object()}}, TypeError, "meta must be JSON-serializable"),
    ({"max_bytes": 0}, ValueError, "max_bytes must be a positive integer"),
    ({"warmup": -1}, ValueError, "warmup must be a non-negative integer"),
    ({"device": "tpu"}, ValueError, "device"),
    ({"step": lambda x: x}, TypeError, "step must be callable with no arguments"),
])
def test_bad_input_is_refused_before_the_step_runs(tmp_path, kwargs, error, match):
    step = TinyStep()
    args = {"step": step, "path": "t.json.gz", "meta": {}, **kwargs}
    args["path"] = tmp_path / args["path"]
    with pytest.raises(error, match=match):
        capture_trace(args.pop("step"), args.pop("path"), **args)
    assert step.calls == 0 and list(tmp_path.iterdir()) == []
