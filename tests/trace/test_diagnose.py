"""perfkit.diagnose_trace on synthetic Kineto traces (tests/trace/synthetic.py) and on a real CPU profile made
here with torch.profiler: op rows counted from the recorded shapes, measured time summed from their kernels,
predicted on the trace's GPU, the rule that explains the gap; steps broken down; the text report."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

import perfkit as pk
from perfkit.devices import KNOWN_DEVICES
from perfkit.trace import OP_COLUMNS, STEP_COLUMNS, TRACE_RULES
from perfkit.trace.price import launch_gap
from perfkit.trace.result import CLASSES

from synthetic import CONV, F32, KERNELS, SDPA, Gemm, SyntheticTrace, write_trace

GEMMS = (Gemm(128, 512, 768), Gemm(128, 512, 4095), Gemm(256, 512, 1024, F32))
H100 = KNOWN_DEVICES["H100-SXM"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """(trace, report): two steps of the synthetic model with three GEMMs and a kernel that joins nothing."""
    trace = SyntheticTrace(steps=2, gemms=GEMMS, unjoined_kernel=True)
    path = write_trace(tmp_path_factory.mktemp("diag") / "synthetic.json.gz", trace)
    return trace, pk.diagnose_trace(path, progress=False)


def _gemm_rows(report, g: Gemm) -> pd.DataFrame:
    ops = report.ops
    return ops[(ops["op"] == "aten::addmm") & (ops["M"] == g.M) & (ops["N"] == g.N) & (ops["K"] == g.K)]


def test_report_frames_have_their_columns(synthetic):
    _, report = synthetic
    assert list(report.ops.columns) == list(OP_COLUMNS)
    assert list(report.steps.columns) == list(STEP_COLUMNS)
    # per step: layer norm, 3 GEMMs, relu, conv + bias, flash, memcpy, nccl, the kernel that joins nothing
    assert len(report.kernels) == 2 * 11
    assert set(report.ops["rule"]) <= set(TRACE_RULES) | {""}
    assert report.spec is H100 or report.spec.name == "H100-SXM"


@pytest.mark.parametrize("g", GEMMS, ids=lambda g: f"{g.M}x{g.N}x{g.K}-{g.dtype}")
def test_gemm_rows_count_2mnk_of_the_recorded_shapes(synthetic, g):
    _, report = synthetic
    rows = _gemm_rows(report, g)
    assert len(rows) == 2  # one per step
    assert (rows["flops"] == 2.0 * g.M * g.N * g.K).all()  # the bias is not counted
    assert (rows["batch"] == 1).all() and (rows["class"] == "gemm").all()
    assert set(rows["shapes"]) == {f"{g.M}x{g.K} @ {g.K}x{g.N}"}
    assert set(rows["dtype"]) == {"float32" if g.dtype == F32 else "bfloat16"}
    assert (rows["achieved_flop_s"] == rows["flops"] / rows["time_s"]).all()
    assert set(rows["pass"]) == {"forward"}


def test_op_time_is_the_sum_of_its_kernels(synthetic):
    trace, report = synthetic
    k = report.kernels[report.kernels["op"] != ""]
    keys = ["rank", "step", "op", "layer"]
    by_kernels = k.groupby(keys).agg(time_s=("time_s", "sum"), kernels=("time_s", "size"))
    ops = report.ops[report.ops["op"] != ""].set_index(keys).sort_index()
    assert not ops.index.duplicated().any()
    pd.testing.assert_series_equal(ops["time_s"], by_kernels["time_s"].reindex(ops.index), rtol=1e-12)
    assert (ops["kernels"] == by_kernels["kernels"].reindex(ops.index)).all()
    conv = report.ops[report.ops["op"] == "aten::convolution"]
    assert list(conv["kernels"]) == [2, 2]  # the cuDNN kernel and the bias add
    dur = {e.tag: e.dur_us for e in trace.expect.values()}
    assert conv["time_s"].tolist() == pytest.approx([(dur["conv"] + dur["bias"]) * 1e-6] * 2, rel=1e-12)
    # a kernel that joins no op is a row of its own: counted, not dropped
    lost = report.ops[report.ops["op"] == ""]
    assert len(lost) == 2 and (lost["rule"] == "unmapped").all()
    assert (lost["kernel"] == KERNELS["unjoined"]).all()
    assert (lost["kernels"] == 1).all() and lost["flops"].isna().all()
    assert report.ops["time_s"].sum() == pytest.approx(report.kernels["time_s"].sum(), rel=1e-12)


def test_predictions_on_a_known_gpu(synthetic):
    _, report = synthetic
    ops = report.ops
    modelled = ops[ops["op"].isin(["aten::addmm", "aten::convolution", "aten::native_layer_norm", "aten::relu",
                                   "aten::_scaled_dot_product_flash_attention"])]
    assert len(modelled) == 2 * 7  # per step: 3 GEMMs, conv, layer norm, relu, flash
    assert set(modelled["class"]) == {"gemm", "attention", "memory"}
    pred = modelled["predicted_s"]
    assert (pred > 0).all() and pred.map(math.isfinite).all()
    assert (modelled["ratio"] == modelled["time_s"] / modelled["predicted_s"]).all()
    unmodelled = ops["rule"].isin(["communication", "unmapped"])
    assert unmodelled.sum() == 2 * 2  # the collective and the kernel that joins nothing
    assert ops.loc[unmodelled, "predicted_s"].isna().all()


def test_the_collective_is_communication(synthetic):
    _, report = synthetic
    nccl = report.ops[report.ops["kernel"] == KERNELS["nccl"]]
    assert len(nccl) == 2
    assert set(nccl["op"]) == {"c10d::allreduce_"}
    assert set(nccl["class"]) == {"communication"} and set(nccl["rule"]) == {"communication"}
    assert nccl["fix"].str.contains("overlap").all()


def test_an_unaligned_gemm_gets_the_alignment_rule(synthetic):
    _, report = synthetic
    unaligned = _gemm_rows(report, Gemm(128, 512, 4095))
    assert set(unaligned["rule"]) == {"alignment"}
    assert unaligned["fix"].str.contains("4095").all() and unaligned["fix"].str.contains("4096").all()
    assert (unaligned["saving_s"] >= 0).all()
    aligned = _gemm_rows(report, Gemm(128, 512, 768))
    assert "alignment" not in set(aligned["rule"])  # the same GEMM with K = 768 is aligned


def test_a_float32_gemm_on_h100_gets_the_precision_rule(synthetic):
    _, report = synthetic
    fp32 = _gemm_rows(report, Gemm(256, 512, 1024, F32))
    assert set(fp32["rule"]) == {"precision"}
    bf16 = report.ops[(report.ops["class"] == "gemm") & (report.ops["dtype"] == "bfloat16")]
    assert "precision" not in set(bf16["rule"])


def test_conv_flops_from_stride_padding_and_groups(synthetic):
    _, report = synthetic
    c = CONV
    P = (c["H"] + 2 * c["padding"][0] - c["dilation"][0] * (c["R"] - 1) - 1) // c["stride"][0] + 1
    Q = (c["W"] + 2 * c["padding"][1] - c["dilation"][1] * (c["S"] - 1) - 1) // c["stride"][1] + 1
    assert (P, Q) == (28, 54)
    flops = 2 * c["N"] * P * Q * c["K"] * c["C"] * c["R"] * c["S"] / c["groups"]
    conv = report.ops[report.ops["op"] == "aten::convolution"]
    assert len(conv) == 2
    assert (conv["flops"] == flops).all()
    assert (conv["class"] == "gemm").all() and (conv["assumed"] == "").all()
    # implicit GEMM of one group: M = N·P·Q, N = K/groups, K = C/groups·R·S
    g = c["groups"]
    assert (conv["M"] == c["N"] * P * Q).all() and (conv["N"] == c["K"] // g).all()
    assert (conv["K"] == c["C"] // g * c["R"] * c["S"]).all() and (conv["batch"] == g).all()


def test_flash_attention_flops(synthetic):
    _, report = synthetic
    a = SDPA
    attn = report.ops[report.ops["class"] == "attention"]
    assert len(attn) == 2 and set(attn["op"]) == {"aten::_scaled_dot_product_flash_attention"}
    assert (attn["flops"] == 4 * a["B"] * a["H"] * a["L"] * a["S"] * a["E"]).all()  # not causal


def test_steps_frame(synthetic):
    _, report = synthetic
    steps = report.steps.set_index("step")
    assert list(steps.index) == [1, 2] and (steps["rank"] == 0).all()
    assert (steps["busy_s"] <= steps["span_s"] + 1e-15).all()
    assert (steps["idle_s"] >= 0).all()
    assert steps["idle_s"].tolist() == pytest.approx((steps["span_s"] - steps["busy_s"]).tolist(), abs=1e-15)
    # every kernel second is in exactly one class; unmapped_s is the part of them perfkit has no model of
    assert {f"{c}_s" for c in CLASSES} <= set(STEP_COLUMNS)
    classes = steps[[f"{c}_s" for c in CLASSES]].sum(axis=1)
    kernel_time = report.kernels.groupby("step")["time_s"].sum().reindex(steps.index)
    assert classes.tolist() == pytest.approx(kernel_time.tolist(), rel=1e-12)
    assert (steps["busy_s"] <= kernel_time + 1e-15).all()  # overlap counted once
    unmapped = report.ops[report.ops["rule"] == "unmapped"].groupby("step")["time_s"].sum()
    assert steps["unmapped_s"].tolist() == pytest.approx(unmapped.reindex(steps.index).tolist(), rel=1e-12)
    assert (steps["unmapped_s"] > 0).all() and (steps["communication_s"] > 0).all()
    tensor = report.ops[report.ops["class"].isin(["gemm", "attention"])].groupby("step")["flops"].sum()
    assert steps["flops"].tolist() == pytest.approx(tensor.tolist(), rel=1e-12)
    mfu = steps["flops"] / steps["span_s"] / H100.peaks["bfloat16"]  # bf16 carries most of the FLOPs
    assert steps["mfu"].tolist() == pytest.approx(mfu.tolist(), rel=1e-9)
    assert ((0 < steps["mfu"]) & (steps["mfu"] <= steps["mfu_achievable"])).all()
    assert (steps["mfu_achievable"] < 1).all()


def test_summary(synthetic):
    _, report = synthetic
    s = report.summary
    keys = {"device", "files", "ranks", "steps", "kernels", "kernel_time_s", "joined_share", "mapped_share",
            "unmapped_time_s", "outside_steps_s", "time_by_class_s", "step_s", "idle_s", "launch_bound_s",
            "mfu", "mfu_achievable", "predicted_s", "saving_s", "notes", "top"}
    assert keys <= set(s)
    assert s["device"] == "H100-SXM" and s["files"] == 1 and s["ranks"] == 1 and s["steps"] == 2
    assert s["kernels"] == len(report.kernels)
    assert s["kernel_time_s"] == pytest.approx(report.kernels["time_s"].sum(), rel=1e-12)
    assert s["joined_share"] < 1  # the kernel that joins nothing
    assert sum(s["time_by_class_s"].values()) == pytest.approx(s["kernel_time_s"], rel=1e-12)
    assert s["unmapped_time_s"] == pytest.approx(2 * 1.625e-6, rel=1e-12)
    assert s["top"][0]["op"] == report.top(1)["op"][0]


def test_top_and_unmapped(synthetic):
    _, report = synthetic
    top = report.top(4)
    assert len(top) == 4 and top["time_s"].is_monotonic_decreasing
    assert list(top.columns) == ["op", "layer", "shapes", "dtype", "class", "count", "time_s", "share",
                                 "predicted_s", "rule", "fix", "saving_s"]
    everything = report.top(100)
    assert everything["share"].sum() == pytest.approx(1.0, rel=1e-12)
    assert everything["count"].sum() == len(report.ops)
    unmapped = report.unmapped()
    assert set(unmapped["kernel"]) == {KERNELS["unjoined"]} and unmapped["count"].sum() == 2


def test_text_report(synthetic):
    _, report = synthetic
    text = str(report)
    assert "H100-SXM" in text and "synthetic.json.gz" in text
    assert report.top(1)["op"][0] in text
    assert "alignment" in text and "precision" in text


def test_text_report_names_the_measured_launch_gap(synthetic):
    _, report = synthetic
    gap, source = launch_gap(H100)
    assert report.summary["launch_gap_s"] == gap.gap_s and report.summary["launch_gap_source"] == source
    assert f"the {pk.units.format_time(gap.gap_s)} launch gap a kernel's duration leaves out" in str(report)
    assert f"(the launch gap: {source})" in str(report)
    assert not source.startswith("assumed")


@pytest.mark.parametrize("gpu, device", [("AMD Instinct MI300X VF", "MI300X"), ("NVIDIA B200", "B200"),
                                         ("AMD Instinct MI355X", "MI355X")])
def test_a_trace_from_the_newest_gpus_needs_no_spec(tmp_path, gpu, device):
    """The trace's deviceProperties name resolves through the device table; the report names both, prices every
    mapped op there and says the launch gap it takes off each kernel is assumed (measured on Hopper only)."""
    path = write_trace(tmp_path / "newest.json", SyntheticTrace(device_name=gpu, gemms=GEMMS[:2]))
    report = pk.diagnose_trace(path, progress=False)
    assert report.spec.name == device and report.spec.driver_name == gpu
    mapped = report.ops[~report.ops["rule"].isin(["unmapped", "communication", "host_transfer"])]
    assert len(mapped) and ((mapped["predicted_s"] > 0) & mapped["predicted_s"].map(math.isfinite)).all()
    text = str(report)
    assert f"Device: {device} ({gpu});" in text
    assert report.summary["launch_gap_source"].startswith("assumed from hopper")
    assert report.summary["launch_gap_source"] in text


def test_a_2021_trace_assumes_the_conv_stride_and_says_so(tmp_path):
    path = write_trace(tmp_path / "old.json", SyntheticTrace(schema="2021", gemms=GEMMS[:1]))
    report = pk.diagnose_trace(path, progress=False)
    g = GEMMS[0]
    assert list(_gemm_rows(report, g)["flops"]) == [2.0 * g.M * g.N * g.K]
    conv = report.ops[report.ops["op"] == "aten::convolution"].iloc[0]
    assert conv["assumed"] != ""  # no Concrete Inputs: stride and padding had to be assumed


def test_ranks_from_several_files_and_a_folder(tmp_path):
    for r in (0, 1):
        write_trace(tmp_path / f"rank{r}.json", SyntheticTrace(rank=r, steps=2))
    report = pk.diagnose_trace(tmp_path, progress=False)
    assert report.summary["ranks"] == 2 and report.summary["files"] == 2
    assert sorted(zip(report.steps["rank"], report.steps["step"])) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert set(report.ops["rank"]) == {0, 1}
    one = pk.diagnose_trace(tmp_path / "rank0.json", progress=False)
    assert len(report.ops) == 2 * len(one.ops)


# -- a real CPU profile ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory):
    """A torch.profiler CPU trace of Linear(64, 32) → ReLU → Linear(32, 16) on 8 rows: two active steps."""
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp_path_factory.mktemp("cpu_profile") / "cpu_trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    x = torch.randn(8, 64)

    def export(prof) -> None:  # inside on_trace_ready: the profiler clears its events after the cycle
        prof.export_chrome_trace(str(path))

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                  schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                                  on_trace_ready=export) as prof:
        for _ in range(3):
            model(x)
            prof.step()
    assert path.is_file()
    return path


def _cpu_gemms(report) -> pd.DataFrame:
    return report.ops[report.ops["op"] == "aten::addmm"]


def test_a_cpu_profile_is_reported_by_cpu_time(cpu_trace):
    report = pk.diagnose_trace(cpu_trace, progress=False)
    assert report.summary["cpu_only"] is True and report.summary["kernels"] == 0
    gemms = _cpu_gemms(report)
    assert len(gemms) == 4  # two Linear layers × two active steps
    assert report.ops["step"].nunique() == 2
    assert sorted(set(zip(gemms["M"], gemms["N"], gemms["K"]))) == [(8, 16, 32), (8, 32, 64)]
    assert (gemms["flops"] == 2 * gemms["M"] * gemms["N"] * gemms["K"]).all()
    assert set(gemms["dtype"]) == {"float32"}
    assert (gemms["time_s"] > 0).all() and (gemms["kernels"] == 0).all()
    assert report.summary["cpu_time_s"] == pytest.approx(report.ops["time_s"].sum(), rel=1e-12)
    assert report.ops["predicted_s"].isna().all()  # no GPU named, no prediction
    assert "not a GPU measurement" in report.notes[0]
    assert "aten::addmm" in str(report)


def test_a_cpu_profile_priced_on_a_gpu_is_a_model(cpu_trace):
    report = pk.diagnose_trace(cpu_trace, spec="H100-SXM", progress=False)
    gemms = _cpu_gemms(report)
    assert gemms["predicted_s"].map(math.isfinite).all() and (gemms["predicted_s"] > 0).all()
    note = report.notes[0]
    assert "not a GPU measurement" in note and "model" in note and "H100-SXM" in note
    assert report.summary["device"] == "H100-SXM"
    assert (gemms["bound"] == "cpu").all()  # still CPU time, labelled so
    text = str(report)
    assert "model" in text and "H100-SXM" in text
