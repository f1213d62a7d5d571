"""Chapter 04 (recurrent layers) for the reader: its interactive figure, its problems and its
verdicts (perfkit.book.recurrent.interactive, perfkit.book.recurrent.problems, perfkit.book.recurrent.verdict)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.recurrent import problems as rnn_exercises
from perfkit.book.recurrent import experiments as experiments
from perfkit.book.recurrent import analysis as analysis
from perfkit.book.recurrent import interactive as interactive
from perfkit.book.interactive import MAX_HTML_BYTES, figure_json, html_bytes
from perfkit.book.recurrent import verdict as verdicts
from testkit import H100_NAME, framed, heading_text

GPU_META = {"experiment": "synthetic", "device_name": H100_NAME, "device_kind": "gpu",
            "recorded_at": "2026-01-01T00:00:00+00:00", "complete": True}

#: Tests that read DeepBench's published tables (kept outside the repository) skip without them.
needs_deepbench = pytest.mark.skipif(
    not all(pk.published_data.has_published(f"deepbench_{k}") for k in ("gemm", "conv", "rnn")),
    reason=pk.published_data.HOW_TO_GET)


# --------------------------------------------------------------------------------------------
# The interactive figure


@pytest.fixture(scope="module")
def published():
    return {"gemms": pk.provenance.published_counterparts("gemm_sizes"), "layers": pk.provenance.published_counterparts("rnn_cudnn")}


@pytest.fixture(scope="module")
def step(published):
    return interactive.recurrent_step(hidden=[1024, 2560, 4096], **published)


def _steps(fig):
    return figure_json(fig)["layout"]["sliders"][0]["steps"]


def _trace_index(fig, name):
    return next(i for i, t in enumerate(fig.figure.data) if t.name == name)


@needs_deepbench
def test_registered_figure_builds_small_and_labelled():
    fig = interactive.FIGURES["recurrent-step"]()
    assert html_bytes(fig) < MAX_HTML_BYTES
    assert len(fig.states) >= 10 and "2560" in fig.states and "1760" in fig.states  # DeepBench's H added
    title = heading_text(fig)
    assert "model of H100-SXM" in title and "published by Baidu DeepBench" in title
    # one short line each for the curves, the published markers and ours: the publisher said once
    assert title.count("<br>") <= 3 and title.count("published by") == 1
    assert "Tesla V100-SXM2 (cuBLAS 10.1, cuDNN 7.6, 2019)" in title
    assert fig.figure.layout.sliders[0].steps[fig.figure.layout.sliders[0].active].label == "2560"


def test_model_curves_are_perfkits_prediction_at_each_hidden_size(step):
    steps = _steps(step)
    assert [s["label"] for s in steps] == ["1024", "2560", "4096"]
    for k, h in enumerate((1024, 2560, 4096)):
        data = steps[k]["args"][0]
        for i, spec in enumerate(interactive.MODEL_SPECS):
            preds = [interactive.step_prediction("rnn", h, b, spec) for b in interactive.BATCHES]
            tflops = data["y"][i]
            assert tflops == pytest.approx([p.achieved_flop_s / 1e12 for p in preds], rel=1e-4)
            waves = data["y"][len(interactive.MODEL_SPECS) + i]
            assert waves == pytest.approx([100 * p.utilization for p in preds], rel=1e-2)
            assert f"{preds[0].tiles} tiles" in data["text"][i][0]
    # A larger H is more work per step: more TFLOP/s at the same batch, on both devices.
    first, last = steps[0]["args"][0]["y"], steps[-1]["args"][0]["y"]
    assert all(b > a for a, b in zip(first[0], last[0]))
    assert first[0] != steps[1]["args"][0]["y"][0]


@needs_deepbench
def test_published_points_appear_where_their_shape_is(step, published):
    steps = _steps(step)
    gemm = _trace_index(step, "V100-SXM2, 2019: GEMM")
    layer = _trace_index(step, "V100-SXM2, 2019: layer, per step")
    at_2560 = steps[1]["args"][0]
    assert at_2560["x"][gemm] == [16, 32, 64, 128]
    v100 = published["gemms"]["V100-SXM2, 2019"]
    want = v100[(v100["M"] == 2560) & (v100["K"] == 2560) & (v100["layout"] == "NN") & (v100["N"] <= 256)]
    want = want.sort_values("N")
    assert at_2560["y"][gemm] == pytest.approx(want["tflops"].tolist(), rel=1e-4)
    rows = published["layers"]["V100-SXM2, 2019"]
    row = rows[(rows["cell"] == "rnn") & (rows["hidden"] == 2560) & (rows["batch"] == 32)].iloc[0]
    per_step = pk.gemm_flops(2560, 32, 2560) * row["timesteps"] / row["time_s"] / 1e12
    assert at_2560["y"][layer][at_2560["x"][layer].index(32)] == pytest.approx(per_step, rel=1e-4)
    assert steps[0]["args"][0]["x"][gemm] == []  # DeepBench timed no 1024 × N × 1024 GEMM


def test_on_chip_note_follows_the_persistent_plan(step):
    notes = [s["args"][1]["annotations[0].text"].replace("<br>", " ") for s in _steps(step)]
    plan = pk.kernels.persistent_rnn_plan(1024, 1, sms=132, smem_per_block_bytes=227 * 1024)
    assert f"H100-SXM: {plan.blocks} blocks × {plan.rows_per_block} rows" in notes[0]
    assert "H100-SXM: does not fit (H ≤ 3824)" in notes[2]  # 4096 > max_persistent_hidden
    lstm = interactive.recurrent_step(cell="lstm", hidden=[1024, 2048])
    lstm_notes = [s["args"][1]["annotations[0].text"].replace("<br>", " ") for s in _steps(lstm)]
    assert "H100-SXM: yes" in lstm_notes[0] and "H100-SXM: no" in lstm_notes[1]  # 4·2048² > 3824²


def test_our_points_and_the_model_only_heading():
    alone = interactive.recurrent_step(hidden=[512, 1024])
    assert "none given" in heading_text(alone) and "model of" in heading_text(alone)
    ours = framed({"cell": "rnn", "hidden": 1024, "batch": [1, 32, 32], "layout": ["NN", "NN", "TN"],
                   "dtype": "float16", "tflops": [1.0, 20.0, 5.0], "time_s": [2e-6, 3e-6, 1e-5]}, GPU_META,
                  experiment="rnn_batch")
    fig = interactive.recurrent_step(ours, hidden=[512, 1024])
    assert "recorded on NVIDIA H100" in heading_text(fig)
    last = len(fig.figure.data) - 1
    steps = _steps(fig)
    assert steps[1]["args"][0]["x"][last] == [1, 32] and steps[1]["args"][0]["y"][last] == [1.0, 20.0]  # NN
    assert steps[0]["args"][0]["x"][last] == []


def test_recurrent_step_refuses_bad_input():
    with pytest.raises(ValueError, match="cell"):
        interactive.recurrent_step(cell="transformer")
    with pytest.raises(TypeError, match="specs"):
        interactive.recurrent_step(specs=[42])
    with pytest.raises(LookupError):
        interactive.recurrent_step(specs=["no such GPU"])
    with pytest.raises(ValueError, match="hidden"):
        interactive.recurrent_step(hidden=[1024])
    with pytest.raises(TypeError, match="hidden"):
        interactive.recurrent_step(hidden=1024)
    with pytest.raises(TypeError, match="gemms"):
        interactive.recurrent_step(gemms=[pd.DataFrame()])
    with pytest.raises(ValueError, match="lacks"):
        interactive.recurrent_step(layers={"x": pd.DataFrame({"cell": ["rnn"]})})
    bare = pd.DataFrame({"cell": ["rnn"], "hidden": [1024], "batch": [1], "tflops": [1.0], "time_s": [1e-6]})
    with pytest.raises(ValueError, match="source"):
        interactive.recurrent_step(bare)
    assert interactive.recurrent_step(bare, "a test frame", hidden=[512, 1024]).states == ["512", "1024"]


# --------------------------------------------------------------------------------------------
# Problems


def _status(ex_id, given):
    return exercises.check(ex_id, given)


def _gru_s() -> float:
    """DeepBench's V100 GRU of problem 3 (H = 2816, batch 32, T = 1500), seconds: the published row, or
    the time the question states where the table is absent."""
    if not pk.published_data.has_published("deepbench_rnn"):
        return rnn_exercises.GRU_STATED_S
    v100 = pk.published("deepbench_rnn", "V100-SXM2")
    row = v100[(v100["cell"] == "gru") & (v100["hidden"] == 2816) & (v100["batch"] == 32)
               & (v100["timesteps"] == 1500) & (v100["dtype"] == "float16")]
    return float(row["time_s"].iloc[0])


def test_problem_answers_come_from_perfkit():
    h100, v100 = pk.device_spec("H100-SXM"), pk.device_spec("V100-SXM2")
    assert exercises.answer("rnn-1") == pk.math_bound_batch(1536, 4 * 1536, h100)
    p = pk.explain_gemm(2560, 32, 2560, "float16", h100)
    assert exercises.answer("rnn-2") == p.waves * h100.sms - p.tiles * p.split_k
    assert exercises.answer("rnn-3") == pytest.approx(pk.gemm_flops(3 * 2816, 32, 2816) * 1500 / _gru_s() / 1e12,
                                                      rel=1e-3)
    largest = pk.kernels.max_persistent_hidden(sms=132, smem_per_block_bytes=227 * 1024)
    assert exercises.answer("rnn-4") == largest // 2
    assert exercises.answer("rnn-5") == pk.explain_gemm(1024, 1, 256, "float16", h100).bound
    assert pk.explain_gemm(2560, 32, 2560, "float16", v100).tiles == v100.sms  # the V100 slip really is 0


def test_problem_1_slips():
    assert _status("rnn-1", 157).status == "wrong" and "V100" in _status("rnn-1", 157).message
    assert "four gates" in _status("rnn-1", 480).message
    assert _status("rnn-1", 8).status == "wrong"
    assert _status("rnn-1", 390).status == "close"  # exact integers only


def test_problem_2_slips():
    assert "number of tiles" in _status("rnn-2", 80).message
    assert "V100" in _status("rnn-2", 0).message
    assert _status("rnn-2", 132).status == "wrong"


def test_problem_3_slips():
    assert _status("rnn-3", 12.69).status == "right"  # from the rounded 0.18 s
    assert "three gates" in _status("rnn-3", exercises.answer("rnn-3") / 3).message
    assert "two FLOPs" in _status("rnn-3", exercises.answer("rnn-3") / 2).message
    assert "input GEMM" in _status("rnn-3", exercises.answer("rnn-3") * 2).message
    assert _status("rnn-3", 125).status == "wrong"  # the V100's peak, not what it reached


def test_problem_4_slips():
    assert _status("rnn-4", round(math.sqrt(132 * 227 * 1024 / 8))).status == "right"  # raw smem estimate
    assert "vanilla limit" in _status("rnn-4", 3824).message
    assert "H_max / 2" in _status("rnn-4", 956).message
    assert _status("rnn-4", 2720).status == "wrong"  # Baidu's GP100 vanilla figure


def test_problem_5_slips():
    assert _status("rnn-5", "Latency").status == "right"
    assert "0.5 MiB" in _status("rnn-5", "memory").message
    assert "tiny fraction" in _status("rnn-5", "math").message
    assert _status("rnn-5", "compute").status == "wrong"


# --------------------------------------------------------------------------------------------
# Verdicts


def test_no_frames_means_no_data_yet():
    table = pk.book.verdict.verdict_table(verdicts.findings(dict.fromkeys(verdicts.KEYS)))
    assert (table["now"] == "—").all() and (table["verdict"] == "no data yet").all()
    assert len(pk.book.verdict.verdict_table(verdicts.findings({}))) == len(table) == 11


@needs_deepbench
def test_frames_are_recorded_and_published_only():
    frames = verdicts.frames()
    assert set(frames) == set(verdicts.KEYS)
    for name in verdicts.EXPERIMENTS:
        f = frames[name]
        assert f is None or f.attrs["meta"].get("device_kind") == "gpu" and not f.attrs["meta"].get("live")
    assert pk.source_of(frames["published_gemm"]).kind == "published"
    table = pk.book.verdict.verdict_table(verdicts.findings(frames))
    then = verdicts.effects(frames)["then_combine"]
    assert table.loc[0, "then"] == f"{then:.2f}" and then > 5  # the V100's N = 7000 vs 16


def _batch_frame():
    """An rnn_batch-like frame with known effects: b = 32 ÷ b = 1 is 20×, 128 ÷ 125 is 1.05×,
    TN 1.5× slower than NN."""
    rows = []
    for b, tflops in ((1, 1.0), (32, 20.0), (125, 40.0), (128, 42.0)):
        for layout, slow in (("NN", 1.0), ("TN", 1.5)):
            flops = pk.gemm_flops(2560, b, 2560)
            rows.append(dict(cell="rnn", hidden=2560, batch=b, dtype="float16", M=2560, N=b, K=2560,
                             layout=layout, tflops=tflops / slow, time_s=flops / (tflops / slow * 1e12)))
    return pd.DataFrame(rows)


def _by_claim(frames):
    return {(f.rule, f.claim): f for f in verdicts.findings(frames)}


def test_synthetic_frames_give_the_expected_verdicts():
    found = _by_claim({"rnn_batch": framed(_batch_frame(), GPU_META)})
    gain = found[("Minibatch ≥ 32", "×14 TFLOP/s from batch 1 to 32 (cuBLAS)")]
    assert (gain.now, gain.verdict) == ("20.00", "holds")
    pen = found[("Multiples of 32", "over 4× lost at (2560, 125, 2560) vs N = 128")]
    assert (pen.now, pen.verdict) == ("1.05", "gone")
    spread = found[("Fix the layout (NN, not TN)", "slower layout ÷ faster, recurrent GEMM")]
    assert (spread.now, spread.verdict) == ("1.50", "holds")
    layers = pd.DataFrame([dict(cell="lstm", hidden=1024, batch=b, timesteps=25, dtype="float16", impl=impl,
                                time_s=t, input_gemm_s=t / 10, tflops=1.0 / t)
                           for b in (16, 128) for impl, t in (("cudnn", 1e-3), ("gemm loop", 1.2e-3),
                                                               ("gemm loop (CUDA graph)", 1e-3))])
    found = _by_claim({"rnn_cudnn": framed(layers, GPU_META)})
    assert found[("Use cuDNN", "cuDNN faster than an eager loop of GEMMs")].verdict == "weaker"  # 1.2×
    assert found[("Use cuDNN", "cuDNN faster than the loop replayed from a CUDA graph")].verdict == "gone"
    batch = found[("Doubling the minibatch costs < 2× the time", "batch 128 vs 16: TFLOP/s of whole layers")]
    assert (batch.now, batch.verdict) == ("8.00", "holds")  # 8× the sequences in the same time


@pytest.mark.filterwarnings("ignore:.*samples:UserWarning")
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_runs_are_never_now_but_compute_like_the_chapter(short_bench):
    batch = experiments.rnn_batch(cell="rnn", hidden=2560, batch=(1, 32, 125, 128), quick=True, progress=False)
    combine = experiments.rnn_combine_time(cell="rnn", hidden=64, batch=64, timesteps=(4, 16), quick=True,
                                           progress=False)
    assert batch.attrs["meta"]["device_kind"] == "cpu"
    cpu = {"rnn_batch": batch, "rnn_combine_time": combine}
    assert all(v is None for k, v in verdicts.effects(cpu).items() if not k.startswith("then"))
    relabelled = verdicts.effects({k: framed(f, GPU_META) for k, f in cpu.items()})
    vanilla = dict(cell="rnn", hidden=2560, layout="NN")
    assert relabelled["gain_32"] == analysis.throughput_ratio(batch, "batch", 32, 1, **vanilla)
    assert relabelled["pen_125"] == analysis.throughput_ratio(batch, "batch", 128, 125, **vanilla)
    assert relabelled["spread"] == pk.then_now.layout_spread(batch)["spread"].median()
    speed = analysis.combine_speedup(combine)
    assert relabelled["wide_speedup"] == speed[speed["columns"] >= 1024]["speedup"].median()
    assert relabelled["h_1024"] is None  # no rnn_hidden frame


def test_each_rule_points_at_a_section_of_the_chapter():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "chapters" / "04_recurrent.md").read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## (\d+)\. ", text, re.M)}
    wheres = {f.where for f in verdicts.findings({})}
    assert wheres and {int(w.lstrip("§")) for w in wheres} <= sections, (wheres, sections)


def test_findings_refuse_bad_frames():
    with pytest.raises(TypeError, match="mapping"):
        verdicts.findings([None])
    with pytest.raises(ValueError, match="unknown"):
        verdicts.findings({"rnn_bach": None})
    with pytest.raises(TypeError, match="rnn_batch"):
        verdicts.findings({"rnn_batch": [1, 2]})


# --------------------------------------------------------------------------------------------
# What the chapter shows: analyses that take None (no run, no recording) and give None


def test_analyses_pass_none_through():
    assert analysis.combine_summary(None) is None and analysis.batch_effects(None) is None
    assert analysis.throughput_ratios(None, "hidden", [(1024, 1000)]) is None
    assert analysis.persistent_summary(None) is None
    layers = pd.DataFrame({"cell": ["rnn"], "hidden": [1024], "batch": [16], "timesteps": [10],
                           "dtype": ["float16"], "time_s": [1e-3]})
    assert analysis.layer_speedups(None, layers) is None and analysis.layer_speedups(layers, None) is None
    assert analysis.layer_count(None) is None and analysis.layer_count(layers) == 1
    assert analysis.layout_table(None) is None
    note = pk.table(analysis.batch_effects(None), "no GPU here", instead="the model, above")
    assert isinstance(note, pk.display.Note) and note.instead == "the model, above"


def test_layout_table_reads_the_recurrent_gemms_of_a_gemm_frame():
    rows = [dict(M=m, N=n, K=m, dtype=d, layout=lay, time_s=t * (1.5 if lay == "TN" else 1.0))
            for m in (2560, 1024) for n, t in ((16, 1e-5), (32, 1.1e-5), (512, 1e-4)) for lay in ("NN", "TN")
            for d in ("float16", "float32")]
    table = analysis.layout_table(pd.DataFrame(rows), size=2560, max_batch=256)
    assert list(table.columns) == ["batch", "faster layout", "slower layout", "slower ÷ faster (×)"]
    assert sorted(table["batch"]) == [16, 32] and (table["slower layout"] == "TN").all()
    assert table["slower ÷ faster (×)"].to_numpy() == pytest.approx(1.5)
    assert analysis.layout_table(pd.DataFrame(rows), size=4096).empty


def test_batch_effects_are_the_verdicts_numbers():
    frame = _batch_frame()
    table = analysis.batch_effects(frame).set_index("compared")["ratio (×)"]
    e = verdicts.effects({"rnn_batch": framed(frame, GPU_META)})
    assert table["TFLOP/s at 32 ÷ 1, H = 2560 NN"] == pytest.approx(e["gain_32"]) == pytest.approx(20)
    assert table["TFLOP/s at 128 ÷ 125, H = 2560 NN"] == pytest.approx(e["pen_125"])
    assert table["slower layout ÷ faster, median"] == pytest.approx(e["spread"]) == pytest.approx(1.5)


def test_throughput_ratios_name_each_pair_and_leave_missing_ones_empty():
    frame = _batch_frame()
    table = analysis.throughput_ratios(frame, "batch", [(32, 1), (64, 1)], layout="NN")
    assert list(table["compared"]) == ["batch 32 ÷ 1", "batch 64 ÷ 1"]
    assert table.loc[0, "ratio (×)"] == pytest.approx(20) and math.isnan(table.loc[1, "ratio (×)"])


def test_combine_summary_keeps_only_wide_shapes():
    rows = [dict(cell="lstm", hidden=1024, batch=b, timesteps=t, dtype="float16", method=m,
                 time_s=(t if m == "per step" else 1.0) * 1e-3, tflops=1.0)
            for b, t in ((16, 16), (16, 64), (64, 64)) for m in ("combined", "per step")]
    table = analysis.combine_summary(pd.DataFrame(rows))
    assert list(table.columns) == ["cell", "H", "shapes", "median speedup (×)"]
    assert table.iloc[0].tolist() == ["lstm", 1024, 2, 64.0]  # 16·16 = 256 columns left out
    assert analysis.combine_summary(pd.DataFrame(rows), min_columns=10**6).empty


def test_persistent_summary_gives_ratios_and_refusals():
    rows = []
    for h, refused in ((1024, False), (8192, True)):
        for impl, t in (("persistent", 1e-4), ("gemm loop", 3e-3), ("cudnn", 2e-4)):
            bad = refused and impl == "persistent"
            rows.append(dict(impl=impl, hidden=h, batch=4, timesteps=10, dtype="float16",
                             time_s=float("nan") if bad else t, tflops=float("nan") if bad else 1e-4 / t,
                             note="refused: U does not fit" if bad else ""))
    table = analysis.persistent_summary(pd.DataFrame(rows)).set_index("H")
    assert table.loc[1024, "÷ loop of GEMMs (×)"] == pytest.approx(30)
    assert table.loc[1024, "÷ cuDNN (×)"] == pytest.approx(2) and table.loc[1024, "kernel"] == "ran"
    assert math.isnan(table.loc[8192, "÷ cuDNN (×)"]) and table.loc[8192, "kernel"].startswith("refused")


@needs_deepbench
def test_layer_speedups_pair_the_same_layers():
    v100 = pk.provenance.published_counterparts("rnn_cudnn", dtype="float16")["V100-SXM2, 2019"]
    ours = v100.iloc[:3].assign(time_s=v100["time_s"].iloc[:3] / 4)
    table = analysis.layer_speedups(ours, v100)
    assert list(table.columns) == ["cell", "H", "batch", "T", "then_s", "now_s", "speedup (×)"]
    assert len(table) == 3 and table["speedup (×)"].to_numpy() == pytest.approx(4)
    assert (table["then_s"] / table["now_s"]).to_numpy() == pytest.approx(4)
    shown = pk.table(table, seconds={"then_s": "ms", "now_s": "ms"}).shown
    assert list(shown.columns) == ["cell", "H", "batch", "T", "then (ms)", "now (ms)", "speedup (×)"]
    assert shown["then (ms)"].to_numpy() == pytest.approx(1e3 * table["then_s"].to_numpy())


def test_the_experiment_module_still_offers_the_analyses_it_re_exports():
    for name in ("combine_speedup", "deepbench_comparable", "throughput_ratio"):
        assert getattr(experiments, name) is getattr(analysis, name)
    assert analysis.deepbench_comparable(None) is None and analysis.combine_speedup(None) is None
