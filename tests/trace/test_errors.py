"""Bad input to perfkit.read_trace, perfkit.diagnose_trace and ``python -m perfkit trace``: a clear error
naming the file, raised before anything is returned or written (the CLI exits 2 and writes no CSV)."""

from __future__ import annotations

import csv
import gzip
import json
import re

import pytest

import perfkit as pk
from perfkit.__main__ import main
from perfkit.devices import KNOWN_DEVICES
from perfkit.trace import OP_COLUMNS, NoGpuKernels, TraceFormatError, UnknownTraceDevice
from perfkit.devices import known_devices_text

from synthetic import SyntheticTrace, kineto_trace, write_trace

FICTIONAL_GPU = "NVIDIA H999 Imaginary Edition"


def _good(tmp_path, name="good.json", **kw):
    return write_trace(tmp_path / name, SyntheticTrace(**kw))


def _not_json(tmp_path):
    p = tmp_path / "notes.json"
    p.write_text("Profiler output follows.\nstep 1: 12.5 ms\nstep 2: 12.7 ms\n")
    return p


def _truncated_json(tmp_path):
    text = json.dumps(kineto_trace(steps=2))
    p = tmp_path / "truncated.json"
    p.write_text(text[:len(text) // 2])
    return p


def _truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(kineto_trace(steps=2)).encode())
    p = tmp_path / "truncated.json.gz"
    p.write_bytes(data[:len(data) // 2])
    return p


def _empty_events(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": []}))
    return p


def _no_events(tmp_path):
    p = tmp_path / "no_events.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}]}))
    return p


def _unknown_schema(tmp_path):
    return write_trace(tmp_path / "schema99.json", SyntheticTrace(schema_version=99))


def _binary(tmp_path):
    p = tmp_path / "binary.json"
    p.write_bytes(bytes(range(256)) * 4)
    return p


def _empty_file(tmp_path):
    p = tmp_path / "zero.json"
    p.write_bytes(b"")
    return p


FORMAT_ERRORS = {"not JSON": _not_json, "truncated JSON": _truncated_json, "truncated gzip": _truncated_gzip,
                 "empty traceEvents": _empty_events, "no traceEvents": _no_events,
                 "unknown schemaVersion": _unknown_schema, "binary": _binary, "empty file": _empty_file}

WHY = {"not JSON": "not a Kineto/Chrome JSON trace", "truncated JSON": "ends early", "truncated gzip": "gzip",
       "empty traceEvents": "empty", "no traceEvents": "without traceEvents", "unknown schemaVersion": "99",
       "binary": "UTF-8", "empty file": "not a Kineto"}


@pytest.mark.parametrize("case", list(FORMAT_ERRORS))
@pytest.mark.parametrize("fn", [pk.read_trace, pk.diagnose_trace], ids=["read_trace", "diagnose_trace"])
def test_bad_files_raise_trace_format_error_naming_the_file(tmp_path, case, fn):
    path = FORMAT_ERRORS[case](tmp_path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(TraceFormatError, match=re.escape(str(path))) as info:
        fn(path, progress=False)
    assert isinstance(info.value, ValueError)
    assert WHY[case] in str(info.value)
    assert sorted(tmp_path.iterdir()) == before  # nothing written next to the trace


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.33, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
def test_a_trace_cut_anywhere_is_refused(tmp_path, fraction, gz):
    text = json.dumps(kineto_trace(steps=2)).encode()
    data = gzip.compress(text) if gz else text
    p = tmp_path / ("cut.json.gz" if gz else "cut.json")
    p.write_bytes(data[:max(4, int(len(data) * fraction))])
    with pytest.raises(TraceFormatError, match=re.escape(str(p))):
        pk.read_trace(p, progress=False)


def test_a_trace_cut_before_its_last_brace_is_refused(tmp_path):
    doc = kineto_trace()
    doc = {"traceEvents": doc["traceEvents"], "deviceProperties": doc["deviceProperties"], "schemaVersion": 1}
    text = json.dumps(doc)
    p = tmp_path / "events_first.json"
    p.write_text(text[:-1])
    with pytest.raises(TraceFormatError, match=re.escape(str(p))):
        pk.read_trace(p, progress=False)
    p.write_text(text)
    assert len(pk.read_trace(p, progress=False)) == 8  # the same file, whole, reads


def test_a_gzip_stub_of_three_bytes_is_a_format_error(tmp_path):
    p = tmp_path / "stub.json.gz"
    p.write_bytes(gzip.compress(b"{}")[:3])
    with pytest.raises(TraceFormatError, match=re.escape(str(p))):
        pk.read_trace(p, progress=False)


def test_a_cpu_only_trace(tmp_path):
    path = write_trace(tmp_path / "cpu.json", SyntheticTrace(cpu_only=True, device_name=None))
    with pytest.raises(NoGpuKernels, match=re.escape(str(path))) as info:
        pk.read_trace(path, progress=False)
    assert isinstance(info.value, ValueError)
    report = pk.diagnose_trace(path, progress=False)
    assert report.summary["cpu_only"] is True and report.summary["kernels"] == 0
    assert report.kernels.empty and report.steps.empty
    assert set(report.ops["op"]) >= {"aten::addmm", "aten::native_layer_norm", "aten::convolution"}
    assert (report.ops["kernels"] == 0).all() and (report.ops["bound"] == "cpu").all()
    assert report.ops["predicted_s"].isna().all()  # no device, no prediction
    assert "CPU" in report.notes[0] and "not a GPU measurement" in report.notes[0]


def test_an_unknown_gpu(tmp_path):
    path = _good(tmp_path, "unknown_gpu.json", device_name=FICTIONAL_GPU)
    assert len(pk.read_trace(path, progress=False)) == 8  # reading needs no device
    with pytest.raises(UnknownTraceDevice) as info:
        pk.diagnose_trace(path, progress=False)
    msg = str(info.value)
    assert isinstance(info.value, LookupError)
    assert str(path) in msg and FICTIONAL_GPU in msg and "spec" in msg
    assert all(name in msg for name in KNOWN_DEVICES)
    # grouped by vendor, as perfkit.device_spec's LookupError lists them
    assert "NVIDIA: " in msg and "; AMD: MI300X" in msg and msg.endswith(known_devices_text())
    report = pk.diagnose_trace(path, spec="H100-SXM", progress=False)
    assert report.summary["device"] == "H100-SXM"
    assert report.ops["predicted_s"].notna().any()


def test_a_gpu_trace_without_device_properties_asks_for_spec(tmp_path):
    path = _good(tmp_path, "nameless.json", device_name=None)
    with pytest.raises(UnknownTraceDevice, match=re.escape(str(path))):
        pk.diagnose_trace(path, progress=False)
    assert pk.diagnose_trace(path, spec="H100-SXM", progress=False).summary["device"] == "H100-SXM"


def test_an_unknown_spec_name_is_a_lookup_error(tmp_path):
    with pytest.raises(LookupError):
        pk.diagnose_trace(_good(tmp_path), spec="H999-IMAGINARY", progress=False)
    with pytest.raises(TypeError):
        pk.diagnose_trace(_good(tmp_path), spec=3.5, progress=False)


@pytest.mark.parametrize("fn", [pk.read_trace, pk.diagnose_trace], ids=["read_trace", "diagnose_trace"])
def test_a_missing_file(tmp_path, fn):
    path = tmp_path / "never_written.json"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        fn(path, progress=False)


@pytest.mark.parametrize("bad", [42, None, 3.5, b"trace.json", {"path": "x"}])
@pytest.mark.parametrize("fn", [pk.read_trace, pk.diagnose_trace], ids=["read_trace", "diagnose_trace"])
def test_a_non_path_is_a_type_error(fn, bad):
    with pytest.raises(TypeError, match="path"):
        fn(bad, progress=False)


def test_ranks_with_different_steps_are_refused_naming_both_files(tmp_path):
    a = write_trace(tmp_path / "rank0.json", SyntheticTrace(rank=0, steps=2, first_step=1))
    b = write_trace(tmp_path / "rank1.json", SyntheticTrace(rank=1, steps=2, first_step=2))
    with pytest.raises(ValueError, match="rank0.json") as info:
        pk.diagnose_trace([a, b], progress=False)
    assert "rank1.json" in str(info.value)
    with pytest.raises(ValueError, match="rank1.json"):
        pk.diagnose_trace(tmp_path, progress=False)  # the folder: the same two files


def test_a_folder_without_traces(tmp_path):
    (tmp_path / "readme.txt").write_text("no traces here")
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        pk.diagnose_trace(tmp_path, progress=False)


# -- the command line --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["not JSON", "truncated JSON", "truncated gzip", "empty traceEvents",
                                  "unknown schemaVersion"])
def test_cli_bad_input_exits_2_naming_the_file_and_writes_no_csv(tmp_path, capsys, case):
    bad = FORMAT_ERRORS[case](tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "ops.csv"
    assert main(["trace", str(bad), "--csv", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert str(bad) in captured.err
    assert not out.exists() and list(out_dir.iterdir()) == []  # no CSV, no temporary file left


def test_cli_missing_file_and_unknown_gpu(tmp_path, capsys):
    out = tmp_path / "ops.csv"
    missing = tmp_path / "missing.json"
    assert main(["trace", str(missing), "--csv", str(out), "--no-progress"]) == 2
    assert str(missing) in capsys.readouterr().err
    unknown = _good(tmp_path, "unknown.json", device_name=FICTIONAL_GPU)
    assert main(["trace", str(unknown), "--csv", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(unknown) in err and "H100-SXM" in err
    assert not out.exists()
    assert main(["trace", str(unknown), "--spec", "H100-SXM", "--csv", str(out), "--no-progress"]) == 0
    assert out.exists()


def test_cli_mismatched_ranks_exit_2(tmp_path, capsys):
    a = write_trace(tmp_path / "rank0.json", SyntheticTrace(rank=0, steps=1, first_step=1))
    b = write_trace(tmp_path / "rank1.json", SyntheticTrace(rank=1, steps=1, first_step=5))
    out = tmp_path / "ops.csv"
    assert main(["trace", str(a), str(b), "--csv", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "rank0.json" in err and "rank1.json" in err and not out.exists()


def test_cli_good_trace_writes_the_ops_csv(tmp_path, capsys):
    good = _good(tmp_path, "good.json.gz", steps=2)
    out = tmp_path / "ops.csv"
    assert main(["trace", str(good), "--csv", str(out), "--top", "3", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "H100-SXM" in captured.out and str(out) in captured.out
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == OP_COLUMNS
    report = pk.diagnose_trace(good, progress=False)
    assert len(rows) - 1 == len(report.ops)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json.gz", "ops.csv"]  # no temporary file left


def test_cli_top_must_be_positive(tmp_path, capsys):
    out = tmp_path / "ops.csv"
    assert main(["trace", str(_good(tmp_path)), "--top", "0", "--csv", str(out), "--no-progress"]) == 2
    assert "--top" in capsys.readouterr().err and not out.exists()
