"""perfkit.read_trace on synthetic Kineto traces (tests/trace/synthetic.py): one row per GPU event, each
joined to the op that launched it by correlation, else by External id, else kept unjoined; both schemas,
plain and gzipped; steps, layers, times and bytes as the file records them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import perfkit as pk
from perfkit.trace import KERNEL_COLUMNS, MAPPED

from synthetic import F32, KERNELS, MEMCPY_BYTES, Gemm, SyntheticTrace, gpu_events, write_trace

TWO_GEMMS = (Gemm(128, 512, 768), Gemm(256, 1024, 512, F32))


def _read(tmp_path, trace: SyntheticTrace, name: str = "trace.json") -> pd.DataFrame:
    return pk.read_trace(write_trace(tmp_path / name, trace), progress=False)


def _check_against_expect(frame: pd.DataFrame, trace: SyntheticTrace) -> None:
    """Every row is one GPU event of the file, charged, joined, layered and stepped as the builder says."""
    assert sorted(frame["correlation"]) == sorted(trace.expect), "one row per GPU event, none lost or added"
    for r in frame.itertuples(index=False):
        e = trace.expect[r.correlation]
        got = {"name": r.name, "kind": r.kind, "op": r.op, "joined_by": r.joined_by, "layer": r.layer,
               "step": r.step}
        want = {"name": e.name, "kind": e.kind, "op": e.op, "joined_by": e.joined_by, "layer": e.layer,
                "step": e.step}
        assert got == want, f"kernel {e.tag} (correlation {r.correlation})"


def test_columns_and_one_row_per_gpu_event(tmp_path):
    trace = SyntheticTrace(steps=2, gemms=TWO_GEMMS)
    frame = _read(tmp_path, trace)
    assert list(frame.columns) == list(KERNEL_COLUMNS)
    events = list(gpu_events(trace.doc))
    assert len(frame) == len(events) == 2 * 9  # per step: ln, 2 GEMMs, relu, conv + bias, flash, memcpy, nccl
    assert frame["start_s"].is_monotonic_increasing
    assert (frame["time_s"] > 0).all()


def test_every_kernel_joins_the_op_of_its_launch_and_correlation_beats_a_wrong_external_id(tmp_path):
    trace = SyntheticTrace(steps=2, gemms=TWO_GEMMS, wrong_external_id=True)
    frame = _read(tmp_path, trace)
    _check_against_expect(frame, trace)
    # the trap is set: the first GEMM kernel's External id names the ReLU op, not the addmm
    ops = {e["args"]["External id"]: e["name"] for e in trace.doc["traceEvents"] if e.get("cat") == "cpu_op"}
    gemm_kernels = [e for e in gpu_events(trace.doc) if e["name"] == KERNELS["gemm_bf16"]]
    assert [ops[e["args"]["External id"]] for e in gemm_kernels] == ["aten::relu", "aten::relu"]
    rows = frame[frame["name"] == KERNELS["gemm_bf16"]]
    assert list(rows["op"]) == ["aten::addmm", "aten::addmm"]
    assert list(rows["joined_by"]) == ["correlation", "correlation"]
    assert list(rows["layer"]) == ["Net_0/Linear_0", "Net_0/Linear_0"]
    assert list(rows["launch"]) == ["cudaLaunchKernel", "cudaLaunchKernel"]
    # a composite owns what runs inside it: the cuDNN kernel and the bias add both charge the convolution
    conv = frame[frame["name"].isin([KERNELS["conv"], KERNELS["bias"]])]
    assert set(conv["op"]) == {"aten::convolution"} and len(conv) == 4
    # the op that runs flash attention, not the wrapper that launched its kernel
    flash = frame.loc[frame["name"] == KERNELS["flash"], "op"]
    assert set(flash) == {"aten::_scaled_dot_product_flash_attention"}


def test_a_kernel_without_its_launch_joins_by_external_id(tmp_path):
    trace = SyntheticTrace(orphan_relu=True)
    frame = _read(tmp_path, trace)
    _check_against_expect(frame, trace)
    relu = frame[frame["name"] == KERNELS["relu"]].iloc[0]
    assert relu["op"] == "aten::relu" and relu["joined_by"] == "external id"
    assert relu["launch"] == "" and relu["layer"] == "Net_0/ReLU_0"
    assert relu["step"] == 1  # from the GPU-side ProfilerStep#1 annotation: no launch to place it
    assert (frame.loc[frame.index != relu.name, "joined_by"] == "correlation").all()


def test_a_kernel_that_joins_nothing_is_kept(tmp_path):
    trace = SyntheticTrace(unjoined_kernel=True, steps=2)
    frame = _read(tmp_path, trace)
    _check_against_expect(frame, trace)
    lost = frame[frame["name"] == KERNELS["unjoined"]]
    assert len(lost) == 2
    assert (lost["op"] == "").all() and (lost["joined_by"] == "none").all()
    assert (lost["op_id"] < 0).all() and not lost["mapped"].any() and (lost["layer"] == "").all()
    assert lost["time_s"].sum() == pytest.approx(2 * 1.625e-6, rel=1e-12)
    # every other kernel joins an op
    assert (frame.loc[frame["joined_by"] != "none", "op"] != "").all()


def test_gz_and_plain_give_identical_frames(tmp_path):
    trace = SyntheticTrace(steps=2, gemms=TWO_GEMMS, wrong_external_id=True, orphan_relu=True,
                           unjoined_kernel=True)
    plain = _read(tmp_path, trace, "t.json")
    gz = _read(tmp_path, trace, "t.json.gz")
    assert (tmp_path / "t.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    pd.testing.assert_frame_equal(plain, gz)


@pytest.mark.parametrize("schema, version", [("current", 1), ("2021", 1), ("2021", None)])
def test_both_schemas(tmp_path, schema, version):
    trace = SyntheticTrace(steps=2, gemms=TWO_GEMMS, schema=schema, schema_version=version,
                           wrong_external_id=True, orphan_relu=True, unjoined_kernel=True)
    frame = _read(tmp_path, trace)
    _check_against_expect(frame, trace)
    assert set(frame["kind"]) == {"kernel", "memcpy"}
    assert frame["joined_by"].value_counts().to_dict() == {"correlation": 16, "external id": 2, "none": 2}
    if schema == "2021":
        cats = {e["cat"] for e in trace.doc["traceEvents"] if e.get("ph") == "X"}
        assert {"Operator", "Runtime", "Kernel", "Memcpy"} <= cats and "cpu_op" not in cats
        joinable = [e for e in gpu_events(trace.doc) if e["name"] != KERNELS["unjoined"]]
        assert all("external id" in e["args"] for e in joinable)
        assert all(isinstance(e["ts"], int) for e in gpu_events(trace.doc))
        assert (frame["layer"] == "").all()  # no module frames in 2021


def test_the_two_schemas_join_alike(tmp_path):
    new = _read(tmp_path, SyntheticTrace(steps=2, gemms=TWO_GEMMS), "new.json")
    old = _read(tmp_path, SyntheticTrace(steps=2, gemms=TWO_GEMMS, schema="2021"), "old.json")
    cols = ["step", "kind", "name", "joined_by", "op", "pass", "mapped", "bytes", "stream"]
    pd.testing.assert_frame_equal(new[cols], old[cols])


def test_steps_come_from_profiler_step_spans(tmp_path):
    trace = SyntheticTrace(steps=3, first_step=7)
    frame = _read(tmp_path, trace)
    _check_against_expect(frame, trace)
    assert frame["step"].value_counts().sort_index().to_dict() == {7: 8, 8: 8, 9: 8}
    # steps follow time: every kernel of step 8 starts after every kernel of step 7 ends
    ends = (frame["start_s"] + frame["time_s"]).groupby(frame["step"]).max()
    starts = frame.groupby("step")["start_s"].min()
    assert ends[7] <= starts[8] and ends[8] <= starts[9]


def test_kernels_outside_any_step_get_step_minus_one(tmp_path):
    trace = SyntheticTrace(orphan_relu=True, gpu_step_annotations=False)
    frame = _read(tmp_path, trace)
    relu = frame[frame["name"] == KERNELS["relu"]]
    assert list(relu["step"]) == [-1]  # no launch and no GPU-side step: no step
    assert (frame.loc[frame["name"] != KERNELS["relu"], "step"] == 1).all()


def test_layers_come_from_module_frames(tmp_path):
    frame = _read(tmp_path, SyntheticTrace(gemms=TWO_GEMMS))
    layer = dict(zip(frame["name"] + "|" + frame["op"], frame["layer"]))
    assert layer[KERNELS["layer_norm"] + "|aten::native_layer_norm"] == "Net_0/LayerNorm_0"
    assert layer[KERNELS["gemm_bf16"] + "|aten::addmm"] == "Net_0/Linear_0"
    assert layer[KERNELS["gemm_f32"] + "|aten::addmm"] == "Net_0/Linear_1"
    assert layer[KERNELS["conv"] + "|aten::convolution"] == "Net_0/Conv2d_0"
    assert layer[KERNELS["flash"] + "|aten::_scaled_dot_product_flash_attention"] == "Net_0/Attention_0"
    assert layer[KERNELS["memcpy"] + "|aten::copy_"] == ""  # outside every module
    assert set(frame["pass"]) == {"forward"}


def test_time_s_is_dur_times_1e_6_exactly(tmp_path):
    trace = SyntheticTrace(steps=2, gemms=TWO_GEMMS, orphan_relu=True, unjoined_kernel=True)
    frame = _read(tmp_path, trace)
    dur = {e["args"]["correlation"]: e["dur"] for e in gpu_events(trace.doc)}
    assert any(d != round(d) for d in dur.values())  # fractional microseconds, as Kineto writes them
    for r in frame.itertuples():
        assert r.time_s == float(dur[r.correlation]) * 1e-6  # exact: no rounding to whole microseconds
    # start_s: seconds from the first event of the trace (the Trace span is not an event of the run)
    first = min(e["ts"] for e in trace.doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "Trace")
    ts = {e["args"]["correlation"]: e["ts"] for e in gpu_events(trace.doc)}
    for r in frame.itertuples():
        assert r.start_s == pytest.approx((ts[r.correlation] - first) * 1e-6, abs=1e-12)
    assert frame["start_s"].min() > 0


def test_memcpy_row(tmp_path):
    frame = _read(tmp_path, SyntheticTrace(steps=2))
    copies = frame[frame["kind"] == "memcpy"]
    assert len(copies) == 2
    assert (copies["bytes"] == MEMCPY_BYTES).all()
    assert (copies["name"] == KERNELS["memcpy"]).all()
    assert (copies["launch"] == "cudaMemcpyAsync").all() and (copies["op"] == "aten::copy_").all()
    assert (frame.loc[frame["kind"] == "kernel", "bytes"] == 0).all()


def test_mapped_device_stream_and_rank(tmp_path):
    frame = _read(tmp_path, SyntheticTrace(rank=3, world_size=4))
    assert (frame["rank"] == 3).all() and (frame["device"] == 0).all()
    assert list(frame["mapped"]) == [op in MAPPED for op in frame["op"]]
    nccl = frame[frame["name"] == KERNELS["nccl"]].iloc[0]
    assert nccl["op"] == "c10d::allreduce_" and not nccl["mapped"] and nccl["stream"] == 20
    assert frame.loc[frame["op"] == "aten::addmm", "mapped"].all()
    assert frame.loc[frame["stream"] != 20, "stream"].eq(7).all()


def test_rank_is_0_without_distributed_info(tmp_path):
    assert (_read(tmp_path, SyntheticTrace())["rank"] == 0).all()


def test_a_collective_launched_inside_an_nccl_annotation_joins_the_enclosing_op(tmp_path):
    trace = SyntheticTrace(nccl_annotation=True)
    frame = _read(tmp_path, trace)
    nccl = frame[frame["name"] == KERNELS["nccl"]].iloc[0]
    assert (nccl["op"], nccl["joined_by"]) == ("c10d::allreduce_", "correlation")


def test_chromes_json_array_format_is_read(tmp_path):
    trace = SyntheticTrace(steps=2)
    path = tmp_path / "events_only.json"
    path.write_text(json.dumps(trace.doc["traceEvents"]))  # a bare array of events, no top-level object
    frame = pk.read_trace(path, progress=False)
    _check_against_expect(frame, trace)
    pd.testing.assert_frame_equal(frame, _read(tmp_path, trace))
