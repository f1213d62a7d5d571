"""perfkit.read_trace and perfkit.diagnose_trace on real GPU traces, ``<repo>/../shared/reference/traces``
(third-party files, never copied into the repository: the module skips, saying why, where they are absent).

Each file is also read here independently (json + gzip) and perfkit's frames are held to it: one row per GPU
event, kernel time summed to the file's durations, GEMM FLOPs from the recorded ``Input Dims``. The counts
come from that folder's README. TraceLens's own per-op reports of two of the traces
(``tracelens_reference/``) are an independent check of FLOPs, achieved TFLOP/s and kernel times.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.devices import known_by_vendor
from perfkit.trace import TRACE_RULES, UnknownTraceDevice

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "traces"
TRACELENS = TRACES / "tracelens_reference"

#: file → (perfkit's device for the trace's GPU, GPU kernels, kernels that join no op, profiler steps), all as
#: the folder's README states them.
README = {
    "tracelens_h100_gaunernst_bert-small-uncased__1016001.json.gz": ("H100-SXM", 60, 0, 1),
    "tracelens_h100_Falconsai_nsfw_image_detection__1016002.json.gz": ("H100-SXM", 154, 0, 1),
    "kineto_resnet50_v100_worker0.1623143089861.pt.trace.json.gz": ("V100-SXM2", 8772, 0, 6),
    "tracelens_h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": ("H100-SXM", 1465, 436, 1),
    "tracelens_h100_facebook_timesformer-base-finetuned-k400__1016002.json.gz": ("H100-SXM", 446, 0, 1),
    "tracelens_h100_google_owlv2-large-patch14-ensemble__1016001.json.gz": ("H100-SXM", 4330, 0, 1),
    "tracelens_mi300_gaunernst_bert-small-uncased__1016001.json.gz": ("MI300X", 60, 0, 1),
    "tracelens_mi300_Falconsai_nsfw_image_detection__1016002.json.gz": ("MI300X", 155, 0, 1),
    "tracelens_mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": ("MI300X", 1516, 463, 1),
    "tracelens_mi300_facebook_timesformer-base-finetuned-k400__1016002.json.gz": ("MI300X", 447, 0, 1),
    "tracelens_mi300_google_owlv2-large-patch14-ensemble__1016001.json.gz": ("MI300X", 4255, 0, 1),
    "tracelens_mi300_resnet_act_checkpoint.json.gz": ("MI300X", 2995, 757, 3),
    "tracelens_b200_eager_trace.json.gz": ("B200", 768, 2, 0),
}
BERT_H100 = "tracelens_h100_gaunernst_bert-small-uncased__1016001.json.gz"
VIT_H100 = "tracelens_h100_Falconsai_nsfw_image_detection__1016002.json.gz"
#: the smallest file of each of the newest GPUs, by the name its deviceProperties give (the README: an SR-IOV
#: virtual function of an MI300X for the Hugging Face models, a whole MI300X for the ResNet, a B200)
NEWEST_GPUS = {"AMD Instinct MI300X VF": "tracelens_mi300_gaunernst_bert-small-uncased__1016001.json.gz",
               "AMD Instinct MI300X": "tracelens_mi300_resnet_act_checkpoint.json.gz",
               "NVIDIA B200": "tracelens_b200_eager_trace.json.gz"}

GPU_KINDS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
             "gpu_memset": "memset", "Memset": "memset"}
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def _files() -> list:
    return [pytest.param(n, id=n.split("__")[0].removesuffix(".json.gz")) for n in README]


@pytest.fixture(scope="module", autouse=True)
def traces_dir():
    """Skip the module where the shared traces are absent (third-party files, kept outside the repo)."""
    if not TRACES.is_dir():
        pytest.skip(f"the shared reference traces are absent ({TRACES.resolve()}): they live outside the "
                    "repository, in shared/reference/traces (this project's machines and CI have them)")
    return TRACES


def _gemm_dims(name: str, dims: list) -> tuple[tuple[int, ...], tuple[int, ...]]:
    i, j = (1, 2) if name in ("aten::addmm", "aten::baddbmm") else (0, 1)
    return tuple(dims[i]), tuple(dims[j])


def _shapes(a: tuple, b: tuple) -> str:
    return "x".join(map(str, a)) + " @ " + "x".join(map(str, b))


@functools.lru_cache(maxsize=None)
def raw(name: str) -> dict:
    """What the file itself says, read with json + gzip: GPU events by kind, their summed ``dur`` (µs),
    the GPUs it names, and every GEMM op's recorded operand shapes."""
    with gzip.open(TRACES / name, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    kinds: Counter = Counter()
    dur = 0.0
    gemms: Counter = Counter()
    steps = set()
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in ("user_annotation", "Operator") and str(e.get("name")).startswith("ProfilerStep#"):
            steps.add(e["name"])
        if cat in GPU_KINDS:
            kinds[GPU_KINDS[cat]] += 1
            dur += float(e["dur"])
        elif cat in ("cpu_op", "Operator") and e.get("name") in GEMM_OPS:
            a, b = _gemm_dims(e["name"], e["args"]["Input Dims"])
            gemms[(e["name"], _shapes(a, b))] += 1
    return {"kinds": kinds, "dur_us": dur, "gemms": gemms, "steps": len(steps),
            "gpu": [d.get("name") for d in doc.get("deviceProperties", [])]}


@functools.lru_cache(maxsize=None)
def report(name: str):
    """diagnose_trace on the GPU the trace names (no ``spec``: every GPU here is in perfkit's table)."""
    return pk.diagnose_trace(TRACES / name, progress=False)


def kernels(name: str) -> pd.DataFrame:
    """read_trace's frame of the file: the report's ``kernels`` (each file is streamed once here; that the two
    are the same frame is checked on the smaller files, test_read_trace_is_the_reports_kernel_frame)."""
    return report(name).kernels


#: the files under 0.5 MB, streamed twice: by read_trace and by diagnose_trace
SMALL = [p for p in _files() if (TRACES / p.values[0]).stat().st_size < 1 << 19] if TRACES.is_dir() else []


def test_the_readme_lists_every_trace_here():
    text = (TRACES / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([^`]+\.json\.gz)` \|", text, flags=re.MULTILINE))
    present = {p.name for p in TRACES.glob("*.json.gz")}
    assert listed == present == set(README)


@pytest.mark.parametrize("name", SMALL)
def test_read_trace_is_the_reports_kernel_frame(name):
    pd.testing.assert_frame_equal(pk.read_trace(TRACES / name, progress=False), report(name).kernels)


@pytest.mark.parametrize("name", _files())
def test_one_row_per_gpu_event_and_the_readme_kernel_counts(name):
    k = kernels(name)
    counts = k["kind"].value_counts().to_dict()
    assert counts == dict(raw(name)["kinds"])  # every kernel, copy and memset of the file, none added
    assert counts["kernel"] == README[name][1]
    if name == BERT_H100:
        assert counts == {"kernel": 60, "memcpy": 1}
    assert set(k["joined_by"]) <= {"correlation", "external id", "none"}


@pytest.mark.parametrize("name", _files())
def test_kernel_time_is_the_files_durations(name):
    k = kernels(name)
    assert k["time_s"].sum() == pytest.approx(raw(name)["dur_us"] * 1e-6, rel=1e-9)
    assert (k["time_s"] >= 0).all() and (k["start_s"] >= 0).all()


@pytest.mark.parametrize("name", _files())
def test_every_kernel_joins_an_op_or_is_counted_unjoined(name):
    k = kernels(name)
    joined = k["op"] != ""
    assert (joined == (k["joined_by"] != "none")).all()
    assert (joined == (k["op_id"] >= 0)).all()


@pytest.mark.parametrize("name", _files())
def test_the_kernels_that_join_no_op_are_the_readmes(name):
    k = kernels(name)
    assert int(((k["kind"] == "kernel") & (k["op"] == "")).sum()) == README[name][2]


@pytest.mark.parametrize("name", _files())
def test_diagnose(name):
    device = README[name][0]
    rep = report(name)
    assert rep.summary["device"] == device and rep.spec.name == device
    ops = rep.ops
    # every kernel counted once
    assert ops["time_s"].sum() == pytest.approx(raw(name)["dur_us"] * 1e-6, rel=1e-9)
    assert set(ops["rule"]) <= set(TRACE_RULES) | {""}
    assert (rep.steps["idle_s"] >= -1e-12).all()
    assert (rep.steps["busy_s"] <= rep.steps["span_s"] + 1e-12).all()
    gemm = ops[ops["op"].isin(GEMM_OPS)]
    assert len(gemm) > 0 and (gemm["class"] == "gemm").all()
    assert ((gemm["predicted_s"] > 0) & gemm["predicted_s"].map(math.isfinite)).all()


@pytest.mark.parametrize("name", _files())
def test_a_report_with_the_traces_profiler_steps(name):
    rep = report(name)
    steps = README[name][3]
    assert raw(name)["steps"] == steps
    assert rep.summary["steps"] == steps  # no ProfilerStep#N (the B200's vLLM trace): one step, numbered -1
    numbered = set(rep.steps["step"]) - {-1}  # -1: kernels outside any step
    assert len(numbered) == steps and (steps or set(rep.steps["step"]) == {-1})
    assert (rep.steps["span_s"] > 0).all() and rep.summary["kernel_time_s"] > 0
    mapped = rep.ops[rep.ops["rule"] != "unmapped"]
    assert len(mapped) and mapped["predicted_s"].notna().any()


@pytest.mark.parametrize("gpu", list(NEWEST_GPUS))
def test_the_newest_gpus_are_diagnosed_by_the_name_their_trace_gives(gpu):
    """MI300X (and its virtual function) and B200 are in perfkit's table: their traces need no ``spec``; the
    report names the trace's GPU and says the launch gap it takes off is Hopper's, assumed."""
    name = NEWEST_GPUS[gpu]
    assert gpu in raw(name)["gpu"]
    rep = report(name)
    assert rep.spec.name == README[name][0]
    assert rep.spec.label == f"{rep.spec.name} ({gpu})" and rep.spec.driver_name == gpu
    assert rep.summary["launch_gap_source"].startswith("assumed from hopper")
    text = str(rep)
    assert f"Device: {rep.spec.label};" in text and rep.summary["launch_gap_source"] in text


def test_a_gpu_perfkit_lacks_is_named_with_the_known_devices_by_vendor(tmp_path):
    """A real trace whose deviceProperties name a GPU no table holds: UnknownTraceDevice names it and lists the
    known devices grouped by vendor, as perfkit.device_spec does; with spec it is diagnosed."""
    with gzip.open(TRACES / NEWEST_GPUS["AMD Instinct MI300X VF"], "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    for d in doc["deviceProperties"]:
        d["name"] = "AMD Instinct MI999X"
    path = tmp_path / "mi999x.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    with pytest.raises(UnknownTraceDevice, match=re.escape("'AMD Instinct MI999X'")) as info:
        pk.diagnose_trace(path, progress=False)
    msg = str(info.value)
    for vendor, names in known_by_vendor().items():
        assert f"{vendor}: {', '.join(names)}" in msg
    with pytest.raises(LookupError) as lookup:
        pk.device_spec("AMD Instinct MI999X")
    assert str(lookup.value).split("known devices: ")[1] in msg  # the same grouped list
    assert pk.diagnose_trace(path, spec="MI300X", progress=False).spec.name == "MI300X"


@pytest.mark.parametrize("name", _files())
def test_gemm_flops_are_2mnk_of_the_recorded_shapes(name):
    ops = report(name).ops
    gemm = ops[ops["op"].isin(GEMM_OPS)]
    # the same GEMM instances as the file records (each launched kernels), with the same operand shapes
    assert Counter(zip(gemm["op"], gemm["shapes"])) == raw(name)["gemms"]
    for r in gemm.itertuples():
        a, b = (tuple(int(v) for v in s.split("x")) for s in r.shapes.split(" @ "))
        M, K, N = a[-2], a[-1], b[-1]
        batch = a[0] if len(a) == 3 else 1
        assert (r.M, r.N, r.K, r.batch) == (M, N, K, batch)
        assert r.flops == 2.0 * M * N * K * batch


# -- TraceLens's per-op reports of the same traces ---------------------------------------------------------

TRACELENS_CASES = {"h100_bert-small": BERT_H100, "h100_vit-nsfw": VIT_H100}
KERNEL_US = "Kernel Time (µs)_sum"


def _tracelens(case: str, table: str) -> pd.DataFrame:
    path = TRACELENS / case / table
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return pd.read_csv(path)


@pytest.mark.parametrize("case", list(TRACELENS_CASES))
def test_gemm_agrees_with_tracelens(case):
    ops = report(TRACELENS_CASES[case]).ops
    table = _tracelens(case, "GEMM.csv")
    assert len(table) >= 4
    for _, row in table.iterrows():
        M, N, K, B = (int(row[f"param: {p}"]) for p in ("M", "N", "K", "B"))
        sel = ops[(ops["op"] == row["name"]) & (ops["M"] == M) & (ops["N"] == N) & (ops["K"] == K)
                  & (ops["batch"] == B)]
        assert len(sel) == row["name_count"], (case, M, N, K)
        flops = sel["flops"] + (M * N * B if row["param: bias"] else 0)  # TraceLens counts addmm's bias, M·N
        assert flops.tolist() == pytest.approx([row["GFLOPS_first"] * 1e9] * len(sel), rel=1e-6)
        achieved = (flops / sel["time_s"]).mean() / 1e12
        assert achieved == pytest.approx(row["TFLOPS/s_mean"], rel=0.01), (case, M, N, K)
        assert sel["time_s"].sum() * 1e6 == pytest.approx(row[KERNEL_US], rel=1e-3), (case, M, N, K)


@pytest.mark.parametrize("case", list(TRACELENS_CASES))
def test_flash_attention_agrees_with_tracelens(case):
    ops = report(TRACELENS_CASES[case]).ops
    table = _tracelens(case, "SDPA_fwd.csv")
    for _, row in table.iterrows():
        dims = ast.literal_eval(row["Input Dims_first"])
        shapes = " @ ".join("x".join(map(str, d)) for d in dims[:3])
        sel = ops[(ops["op"] == row["name"]) & (ops["shapes"] == shapes)]
        assert len(sel) == row["name_count"]
        B, L, H, S, d = (int(row[f"param: {p}"]) for p in ("B", "N_Q", "H_Q", "N_KV", "d_h_qk"))
        assert not row["param: causal"]
        assert row["GFLOPS_first"] * 1e9 == pytest.approx(4 * B * H * L * S * d, rel=1e-9)  # the convention
        assert sel["flops"].tolist() == pytest.approx([row["GFLOPS_first"] * 1e9] * len(sel), rel=1e-6)
        achieved = (sel["flops"] / sel["time_s"]).mean() / 1e12
        assert achieved == pytest.approx(row["TFLOPS/s_mean"], rel=0.01)
        assert sel["time_s"].sum() * 1e6 == pytest.approx(row[KERNEL_US], rel=1e-3)


def test_the_patch_embedding_conv_agrees_with_tracelens():
    ops = report(VIT_H100).ops
    table = _tracelens("h100_vit-nsfw", "CONV_fwd.csv")
    assert len(table) == 1
    row = table.iloc[0]
    conv = ops[ops["op"] == "aten::convolution"]
    assert len(conv) == row["name_count"] == 1
    assert conv["shapes"].iloc[0] == "4x3x224x224 @ 768x3x16x16"
    assert not row["param: bias"]  # TraceLens counts no bias here either
    assert conv["flops"].iloc[0] == pytest.approx(row["GFLOPS_first"] * 1e9, rel=1e-6)
    # the op's time: every kernel it launched (memsets, the NCHW↔NHWC transposes, the GEMM, the bias add)
    assert conv["time_s"].iloc[0] * 1e6 == pytest.approx(row[KERNEL_US], rel=1e-3)
