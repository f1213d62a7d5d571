"""Chapter 08_communication: the model's collective frames, the published tables in the experiment's
columns, reading a curve at any size, the effects the verdicts read, the training side (6N rule,
data-parallel steps, a tensor-parallel layer), the verdicts themselves and the figures. Everything here
is computed from perfkit's models or from made-up frames whose answers are known: nothing is timed
(the published tables are read only where they are installed)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import communication as cm
from perfkit.book.communication import analysis, training, verdict
from perfkit.book.evidence import as_measured
from perfkit.book.figures import BookFigure
from perfkit.collectives import bus_bandwidth, crossover_bytes
from perfkit.display import Note
from perfkit.published_data import HOW_TO_GET, has_published
from testkit import H100, framed, heading_text

P100 = pk.device_spec("P100-PCIe")
MiB = 2**20


def _gpu(frame: pd.DataFrame, device: str = "H100-SXM", kind: str = "gpu") -> pd.DataFrame:
    """``frame`` as if recorded: time_s = predicted_s where unmeasured, a ``device`` column and metadata."""
    out = as_measured(frame) if frame["time_s"].isna().all() else frame.copy()
    out["device"] = "cuda" if kind == "gpu" else "cpu"
    return framed(out, device=device, device_kind=kind, live=False, recorded_at="2026-01-01")


def _power_law(sizes, n_ranks=8, alpha=50e-6, bandwidth=400e9, op="all-reduce") -> pd.DataFrame:
    """A measured-looking frame whose time is α + size·factor/B: every answer is known by hand."""
    rows = []
    for n in np.atleast_1d(n_ranks):
        for s in sizes:
            t = alpha + s * 2 * (n - 1) / n / bandwidth
            rows.append({"op": op, "backend": "made up", "n_ranks": int(n), "size_bytes": int(s), "time_s": t,
                         "algbw_GBps": s / t / 1e9, "busbw_GBps": bus_bandwidth(op, s, n, t) / 1e9,
                         "predicted_s": math.nan})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# The model's frames and the published tables in the experiment's columns


def test_predicted_collectives_are_the_model_row_by_row():
    frame = analysis.predicted_collectives("nvlink4", n_ranks=(2, 8), sizes=(2**10, 2**30))
    assert set(analysis.COLUMNS) <= set(frame.columns) and len(frame) == 4
    assert frame["time_s"].isna().all() and (frame["backend"] == "model").all()
    for _, row in frame.iterrows():
        p = pk.explain_collective("all-reduce", row["size_bytes"], row["n_ranks"], "nvlink4")
        assert row["predicted_s"] == p.time_s and row["bound"] == p.bound and row["latency_s"] == p.latency_s
    tree = analysis.predicted_collectives("ib-ndr", n_ranks=(64,), sizes=(2**20,), algorithm="tree")
    assert tree["predicted_s"].iloc[0] == pk.collective_time("all-reduce", 2**20, 64, "ib-ndr", algorithm="tree")
    assert analysis.SIZES[0] == 2**10 and analysis.SIZES[-1] == 2**31 and len(analysis.SIZES) == 22
    label = str(analysis.model_source("nvlink4", 8))
    assert label.startswith("model of 8 GPUs over NVLink 4") and "α-β" in label
    across = str(analysis.model_source("nvlink4", 16, inter_link="ib-ndr", ranks_per_node=8))
    assert "InfiniBand NDR (4x, 400 Gb/s) between nodes of 8" in across


def _xla_like() -> pd.DataFrame:
    base = _power_law((2**20, 2**30), n_ranks=(2, 8))
    out = base.rename(columns={"op": "collective", "n_ranks": "n_gpus"}).drop(columns=["backend", "predicted_s"])
    out = pd.concat([out, out.assign(collective="all-gather")], ignore_index=True)
    return framed(out, published_by="OpenXLA (XLA's table)", published_date="2025", device="H100-SXM",
                  device_name="H100", device_kind="gpu")


def _deepbench_like() -> pd.DataFrame:
    base = _power_law((400_000, 26_214_400, 258_000_000), n_ranks=(2, 8), alpha=200e-6, bandwidth=6e9)
    gpu = base.assign(system="NVIDIA Tesla P100", device_type="GPU", n_nodes=1, algorithm="NCCL 2.0")
    other = gpu.assign(system="Intel(R) Xeon Phi(TM) 7250F", device_type="CPU (Xeon Phi)")
    out = pd.concat([gpu, other, gpu.assign(n_nodes=2, n_ranks=16)], ignore_index=True)
    return framed(out, published_by="Baidu DeepBench", published_date="2017", device="P100-PCIe",
                  device_name="several", device_kind="gpu")


def test_published_tables_are_put_into_the_experiments_columns():
    xla = analysis.xla_frame(_xla_like())
    assert set(xla["op"]) == {"all-reduce"} and set(xla["n_ranks"]) == {2, 8} and len(xla) == 4
    assert list(analysis.xla_frame(_xla_like(), n_ranks=8)["n_ranks"].unique()) == [8]
    assert str(pk.source_of(xla)).startswith("published by OpenXLA")
    assert analysis.xla_frame(None) is None and analysis.xla_frame(_xla_like(), n_ranks=3) is None
    db = analysis.deepbench_frame(_deepbench_like())
    assert len(db) == 6 and set(db["n_ranks"]) == {2, 8} and (db["backend"] == "NCCL 2.0").all()
    assert str(pk.source_of(db)) == "published by Baidu DeepBench, measured on NVIDIA Tesla P100 (2017)"
    assert set(analysis.deepbench_frame(_deepbench_like(), nodes=2)["n_ranks"]) == {16}
    assert analysis.deepbench_frame(_deepbench_like(), system="Xeon Phi") is None  # CPUs are never read
    assert analysis.deepbench_frame(None) is None


# --------------------------------------------------------------------------------------------
# Reading a curve


def test_time_at_interpolates_in_log_log_and_refuses_to_extrapolate():
    frame = _power_law((2**20, 2**22))
    t1, t2 = frame["time_s"]
    middle = analysis.time_at(frame, 2**21)
    assert middle == pytest.approx(math.sqrt(t1 * t2))  # halfway in log(size): the geometric mean
    assert analysis.time_at(frame, 2**20) == pytest.approx(t1)
    assert analysis.time_at(frame, 2**19) is None and analysis.time_at(frame, 2**23) is None
    assert analysis.time_at(frame, 2**10, below="floor") == pytest.approx(t1)
    assert analysis.time_at(frame, 2**21, n_ranks=4) is None  # no rows on 4 ranks
    assert analysis.time_at(None, 2**21) is None
    with pytest.raises(ValueError, match="nbytes"):
        analysis.time_at(frame, 0)
    assert analysis.busbw_at(frame, 2**20) == pytest.approx(bus_bandwidth("all-reduce", 2**20, 8, t1))
    size, busbw = analysis.largest_busbw(frame)
    assert size == 2**22 and busbw == pytest.approx(bus_bandwidth("all-reduce", 2**22, 8, t2))


def test_half_bandwidth_is_the_first_size_at_half_the_largest():
    sizes = [2**k for k in range(10, 31)]
    frame = _power_law(sizes, alpha=50e-6, bandwidth=400e9)
    busbw = frame["busbw_GBps"].to_numpy()
    first = sizes[int(np.argmax(busbw >= busbw[-1] / 2))]
    assert analysis.half_bandwidth_bytes(frame) == first
    # by hand: busbw = B·s·f / (α·B + s·f), half of B where s·f = α·B, i.e. s = 50 µs · 400 GB/s / 1.75
    assert first / 2 < 50e-6 * 400e9 / 1.75 <= first
    assert analysis.half_bandwidth_bytes(None) is None


# --------------------------------------------------------------------------------------------
# The effects, on frames whose answers are known


def test_latency_gpu_count_and_bucket_effects():
    sizes = [400_000, 25 * MiB, 2**31]
    frame = _power_law(sizes, n_ranks=(2, 8))
    b8 = frame[frame["n_ranks"] == 8].set_index("size_bytes")["busbw_GBps"]
    b2 = frame[frame["n_ranks"] == 2].set_index("size_bytes")["busbw_GBps"]
    assert analysis.latency_gain(frame) == pytest.approx(b8[2**31] / b8[400_000])
    assert analysis.bucket_share(frame) == pytest.approx(b8[25 * MiB] / b8[2**31])
    assert analysis.gpu_count_ratio(frame) == pytest.approx(b8[2**31] / b2[2**31])
    assert analysis.gpu_count_ratio(frame[frame["n_ranks"] == 8]) is None
    assert analysis.latency_gain(frame[frame["size_bytes"] > 400_000]) is None
    # a pure-bandwidth link: every size at the same busbw, no latency to amortise
    flat = _power_law(sizes, n_ranks=(2, 8), alpha=0.0)
    assert analysis.latency_gain(flat) == pytest.approx(1.0) and analysis.bucket_share(flat) == pytest.approx(1.0)
    assert analysis.gpu_count_ratio(flat) == pytest.approx(1.0)


def test_gpt2_parameters_match_the_zoo_and_the_6n_rule():
    assert training.gpt2_params() == pk.zoo.parameter_count(pk.zoo.gpt2_small()) == 124_439_808
    flop_s = pk.achievable_ceilings(H100).flop_s_for("bfloat16")
    assert training.backward_time(H100, 1000, 10) == pytest.approx(4 * 1000 * 10 / flop_s)
    assert training.backward_time(P100, 1000, 10, dtype="float32") == pytest.approx(
        4e4 / pk.achievable_ceilings(P100).flop_s_for("float32"))
    with pytest.raises(ValueError, match="tokens"):
        training.backward_time(H100, 10, 0)


def test_ddp_allreduce_and_overlap_read_the_curve_bucket_by_bucket():
    grads = training.gpt2_params() * 4
    k = math.ceil(grads / analysis.BUCKET_BYTES)
    last = grads - (k - 1) * analysis.BUCKET_BYTES
    frame = as_measured(analysis.predicted_collectives(sizes=(2**10, last, analysis.BUCKET_BYTES)))
    t = frame.set_index("size_bytes")["time_s"]
    want = (k - 1) * t[analysis.BUCKET_BYTES] + t[last]
    assert training.ddp_allreduce_time(frame, grads) == pytest.approx(want)
    # the model's own data-parallel step sums the same all-reduces
    step = pk.data_parallel_step(grads, 1.0, 8, "nvlink4")
    assert training.ddp_allreduce_time(frame, grads) == pytest.approx(step.allreduce_s)
    backward = training.backward_time(H100, training.gpt2_params(), training.DP_BATCH * 1024)
    assert training.overlap_ratio(frame, H100) == pytest.approx(backward / want)
    assert training.overlap_ratio(frame, None) is None
    small = as_measured(analysis.predicted_collectives(sizes=(2**10, 2**20)))
    assert training.ddp_allreduce_time(small, grads) is None  # a 25 MiB bucket beyond the frame's sizes


def test_data_parallel_sweep_is_the_model_step_by_step():
    frame = training.data_parallel_sweep(H100, batches=(1, 8))
    assert list(frame["setup"].unique()) == list(training.DP_SETUPS) and len(frame) == 6
    grads = training.gpt2_params() * 4
    for _, row in frame.iterrows():
        n, link, inter, per_node, algorithm = training.DP_SETUPS[row["setup"]]
        backward = training.backward_time(H100, training.gpt2_params(), row["batch"] * 1024)
        step = pk.data_parallel_step(grads, backward, n, link, forward_s=backward / 2, algorithm=algorithm,
                                     inter_link=inter, ranks_per_node=per_node)
        assert row["step_s"] == pytest.approx(step.step_s) and row["comm_share"] == pytest.approx(step.comm_share)
        assert row["buckets"] == 19
    share = frame.set_index(["setup", "batch"])["comm_share"]
    one, ib, eth = training.DP_SETUPS
    assert share[one, 8] < share[one, 1] and share[one, 8] < share[ib, 8] < share[eth, 8]
    assert str(training.data_parallel_source(H100)).startswith("model of GPT-2 small on H100-SXM")


def test_tensor_parallel_layer_splits_the_gemms_and_adds_two_allreduces():
    layer = training.tensor_parallel_layer(H100)
    assert list(layer["kind"]) == ["GEMM", "attention", "GEMM", "all-reduce", "GEMM", "GEMM", "all-reduce"]
    assert math.isclose(layer["share"].sum(), 1.0)
    m, t, s = training.LLAMA2_70B, 8, training.TP_TOKENS
    gemms = layer[layer["kind"] == "GEMM"].set_index("op")["predicted_s"]
    assert gemms["Q, K, V projection"] == pk.explain_gemm(s, (64 + 2 * 8) * 128 // t, 8192, "bfloat16",
                                                          H100).predicted_s
    assert gemms["down projection"] == pk.explain_gemm(s, 8192, m.ffn // t, "bfloat16", H100).predicted_s
    comm = layer.loc[layer["kind"] == "all-reduce", "predicted_s"]
    assert (comm == pk.collective_time("all-reduce", s * 8192 * 2, t, "nvlink4")).all()
    attention = layer.loc[layer["kind"] == "attention", "predicted_s"].iloc[0]
    assert attention == pk.predict_attention_time(1, 8, s, s, 128, spec=H100, dtype="bfloat16", causal=True,
                                                  kv_heads=1).time_s
    frame = as_measured(analysis.predicted_collectives(n_ranks=(8,)))
    read = training.tensor_parallel_layer(H100, collectives=frame)
    assert read["predicted_s"].sum() == pytest.approx(layer["predicted_s"].sum(), rel=1e-6)  # 64 MiB is in SIZES
    ratio = training.tensor_parallel_ratio(frame, H100)
    assert ratio == pytest.approx((layer["predicted_s"].sum() - comm.sum()) / comm.sum(), rel=1e-6)
    over_ib = training.tensor_parallel_layer(H100, inter_link="ib-ndr", ranks_per_node=1)
    assert over_ib.loc[over_ib["kind"] == "all-reduce", "predicted_s"].sum() > 5 * comm.sum()
    assert training.tensor_parallel_ratio(frame, P100) is None  # no bfloat16 on a P100
    assert training.tensor_parallel_ratio(None, H100) is None
    with pytest.raises(ValueError, match="tp=3"):
        training.tensor_parallel_layer(H100, tp=3)
    with pytest.raises(TypeError, match="model"):
        training.tensor_parallel_layer(H100, model="llama")


def test_flop_per_byte_rows_skip_missing_frames():
    model = analysis.predicted_collectives(n_ranks=(8,))
    table = analysis.flop_per_byte({"model": (H100, "bfloat16", model), "missing": (P100, "float32", None)})
    assert list(table["system"]) == ["model"]
    row = table.iloc[0]
    busbw = pk.explain_collective("all-reduce", 2**31, 8, "nvlink4").bus_bytes_s
    assert row["busbw GB/s"] == pytest.approx(busbw / 1e9)
    assert row["FLOP per busbw byte"] == pytest.approx(H100.peak_flop_s("bfloat16") / busbw)
    assert row["half-bandwidth message"] == 16 * MiB


# --------------------------------------------------------------------------------------------
# The verdicts


def test_without_data_the_rules_have_no_now_and_no_then():
    table = pk.book.verdict.verdict_table(verdict.findings({}))
    assert list(table["rule"]) == [f.rule for f in verdict.findings({})] and len(table) == len(verdict.RULES)
    assert (table["verdict"] == "no data yet").all() and (table["then"] == "—").all()
    assert set(table["unit"]) <= {"×", "%"}


def test_the_model_predicts_each_rule():
    m = verdict.model_effects(H100)
    assert set(m) == set(verdict.RULES) and all(v is not None for v in m.values())
    assert m["latency"] > 10 and m["gpu_count"] == pytest.approx(1.0, abs=0.01)
    assert 0.5 < m["buckets"] < 0.8 and m["overlap"] > 1 and m["tensor_parallel"] > 1
    alt = verdict.alternatives({})
    assert list(alt) == list(verdict.RULES) and {e.kind for e in alt.values()} == {"model"}
    assert {e.now_from for e in alt.values()} == {"model of H100-SXM"}
    table = pk.book.verdict.verdict_table(verdict.findings({}, instead=alt))
    assert table["verdict"].str.startswith("predicted: ").all()


def test_a_gpu_recording_decides_and_a_cpu_run_never_does():
    model = analysis.predicted_collectives(n_ranks=(2, 8))
    frames = {"collective_sizes": _gpu(model)}
    table = pk.book.verdict.verdict_table(verdict.findings(frames)).set_index("rule")
    assert (table["evidence"] == "measured").all()
    assert table["now_from"].str.startswith("ours, recorded on H100-SXM").all()
    m = verdict.model_effects(H100)
    assert table.loc["Small messages are latency-bound", "now"] == f"{m['latency']:.1f}"
    cpu = _gpu(model, device="CPU (x86_64, 2 cores)", kind="cpu")
    assert set(verdict.effects({"collective_sizes": cpu}).values()) == {None}
    gloo_on_a_gpu_machine = _gpu(model).assign(device="cpu")  # gloo ran on CPU tensors
    assert set(verdict.effects({"collective_sizes": gloo_on_a_gpu_machine}).values()) == {None}
    with pytest.raises(ValueError, match="unknown key"):
        verdict.effects({"collectives": cpu})
    with pytest.raises(TypeError, match="frames"):
        verdict.effects([cpu])


def test_then_comes_from_deepbench_and_now_from_xla_where_published():
    then = verdict.then_effects(_deepbench_like())
    frame = analysis.deepbench_frame(_deepbench_like(), n_ranks=8)
    assert then["latency"] == pytest.approx(analysis.latency_gain(frame))
    assert then["overlap"] == pytest.approx(training.overlap_ratio(frame, P100, n_ranks=8, dtype="float32"))
    assert then["tensor_parallel"] is None
    table = pk.book.verdict.verdict_table(verdict.findings({"deepbench_allreduce": _deepbench_like()}))
    assert (table["then"].iloc[:4] != "—").all() and table["then"].iloc[4] == "—"
    alt = verdict.alternatives({"xla_h100_collectives": _xla_like()})
    assert alt["gpu_count"].kind == "published"
    assert alt["gpu_count"].now_from == "published by OpenXLA, measured on H100-SXM (2025)"
    assert alt["latency"].kind == "model"  # the made-up table has no message near 400 KB: rule by rule
    assert verdict.then_effects(None) == dict.fromkeys(verdict.RULES)


@pytest.mark.published
def test_the_published_tables_give_the_chapters_verdicts():
    if not (has_published("xla_h100_collectives") and has_published("deepbench_allreduce")):
        pytest.skip(HOW_TO_GET)
    frames = {"deepbench_allreduce": pk.published("deepbench_allreduce", "P100-PCIe")}
    instead = verdict.alternatives(verdict.modern_frames())
    table = pk.book.verdict.verdict_table(verdict.findings(frames, instead=instead))
    assert list(table["then"]) == ["2.0", "1.00", "100", "3.14", "—"]
    assert list(table["now"]) == ["20.0", "1.61", "59", "1.40", "1.66"]
    assert list(table["verdict"]) == ["holds", "weaker", "weaker", "holds", "holds"]
    xla = analysis.xla_frame(pk.published("xla_h100_collectives"), n_ranks=8)
    assert round(analysis.largest_busbw(xla)[1] / 1e9) == 402
    assert analysis.half_bandwidth_bytes(xla) == 16 * MiB
    # the model's ring is within 20 % of XLA's 8-GPU all-reduce from 1 MiB on (scripts/validate_collectives.py)
    big = xla[xla["size_bytes"] >= MiB]
    ratio = [pk.collective_time("all-reduce", s, 8, "nvlink4") / t for s, t in zip(big["size_bytes"], big["time_s"])]
    assert abs(np.median(ratio) - 1) < 0.2


# --------------------------------------------------------------------------------------------
# The figures


def test_plot_sizes_draws_measured_and_model_series_or_says_why_not():
    model = analysis.predicted_collectives(n_ranks=(8,), sizes=(2**10, 2**20, 2**30))
    source = analysis.model_source("nvlink4", 8)
    fig = cm.plot_sizes({"model": model}, {"model": source})
    assert isinstance(fig, BookFigure) and str(source) in heading_text(fig)
    measured = _power_law((2**10, 2**20, 2**30))
    fig = cm.plot_sizes({"made up": measured, "model": model}, {"made up": "a made-up frame", "model": source})
    ax_t, ax_b = fig.axes[:2]
    line = ax_b.lines[0]
    assert list(line.get_xdata()) == [2**10, 2**20, 2**30]
    assert np.allclose(line.get_ydata(), measured["busbw_GBps"])
    assert fig.to_png()[:4] == b"\x89PNG"
    cross = crossover_bytes("all-reduce", 8, "nvlink4")
    assert 2**10 < cross < 2**30  # the model's cross is drawn at its nearest size
    note = cm.plot_sizes({"nothing": None}, instead="the model, above")
    assert isinstance(note, Note) and "the model, above" in note._repr_html_()
    with pytest.raises(ValueError, match="source"):
        cm.plot_sizes({"model": model})  # a frame without metadata must say where its numbers come from
    with pytest.raises(TypeError, match="series"):
        cm.plot_sizes([model])
    with pytest.raises(TypeError, match="title"):
        cm.plot_sizes({"model": model}, {"model": source}, title=3)


def test_plot_data_parallel_and_sizes_in_words():
    frame = training.data_parallel_sweep(H100, batches=(1, 4, 16))
    fig = cm.plot_data_parallel(frame, training.data_parallel_source(H100))
    assert isinstance(fig, BookFigure) and "19 buckets" in heading_text(fig)
    assert isinstance(cm.plot_data_parallel(None), Note)
    with pytest.raises(ValueError, match="source"):
        cm.plot_data_parallel(frame)
    assert [cm.binary_size(x) for x in (2**10, 25 * MiB, 2**31, 400_000, 258_000_000, 512)] == [
        "1 KiB", "25 MiB", "2 GiB", "400 KB", "258 MB", "512 B"]
