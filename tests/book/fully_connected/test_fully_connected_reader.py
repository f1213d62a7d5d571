"""Chapter 03_fully_connected for its reader: the batch explorer (perfkit.book.fully_connected.interactive), the
problems (perfkit.book.fully_connected.problems) and the verdicts (perfkit.book.fully_connected.verdict)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
import perfkit.book.fully_connected.verdict as verdict_fc
from perfkit.book import problems as exercises
from perfkit.book.fully_connected import experiments as fc_exp
from perfkit.book.fully_connected import analysis as fc_analysis
from perfkit.book.fully_connected import interactive as fc
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes
from testkit import CPU_LIVE, H100, H100_NAME, V100, framed, heading_text


# --------------------------------------------------------------------------------------------
# The batch explorer


@pytest.fixture(scope="module")
def square():
    return fc.FIGURES["batch"]()


def _steps(figure):
    return figure.figure.layout.sliders[0].steps


def _moving(figure):
    """Indices of the traces whose x changes between states (the markers at the slider's batch)."""
    first, last = (s.args[0] for s in (_steps(figure)[0], _steps(figure)[-1]))
    return [i for i, (a, b) in enumerate(zip(first["x"], last["x"])) if a != b]


@pytest.mark.published
def test_every_figure_builds_small_with_its_sources():
    for name, build in fc.FIGURES.items():
        figure = build()
        assert html_bytes(figure) < MAX_HTML_BYTES, name
        assert len(figure.states) >= 20, name
        title = heading_text(figure)
        assert "model of V100-SXM2" in title and "model of H100-SXM" in title, title
        # the heading says where the measured points come from: a recording in data/, or none yet
        assert ("recorded on " in title) != ("no recording of a GPU run" in title), title
    title = heading_text(fc.FIGURES["batch"]())
    assert "published by Baidu DeepBench" in title
    if pk.data.has_recording("fc_batch"):  # the 4096 → 4096 layer is the one fc_batch sweeps
        meta = pk.data.load("fc_batch").attrs["meta"]
        assert f"recorded on {meta['device_name']} on {meta['recorded_at'][:10]}" in title
    assert "published by" not in heading_text(fc.FIGURES["gpt2-head"]())


def test_states_are_the_models_predictions(square):
    steps = _steps(square)
    batches = [int(s.label) for s in steps]
    assert {149, 346} <= set(batches)  # each device's math-bound batch is a stop of the slider
    v100_marks, h100_marks, dot = _moving(square)
    for k in (0, batches.index(149), len(batches) - 1):
        B, data = batches[k], steps[k].args[0]
        for marks, spec in ((v100_marks, V100), (h100_marks, H100)):
            want = fc.predicted_tflop_s(B, 4096, 4096, spec)
            assert data["x"][marks] == [B] * 3
            assert data["y"][marks] == pytest.approx([want[p] for p in fc.PHASES], rel=1e-4)
        assert data["y"][dot] == pytest.approx([pk.arithmetic_intensity(4096, B, 4096, "float16")], rel=1e-4)
    ys = [tuple(s.args[0]["y"][h100_marks]) for s in steps]
    assert len(set(ys)) == len(ys)  # every batch moves the H100's markers
    # The prediction grows with the batch up to the math-bound region.
    assert ys[batches.index(512)][0] > 5 * ys[batches.index(16)][0]


def test_static_traces_are_repeated_in_every_state(square):
    """A state that left a trace's x or y out would send null, which Plotly takes as "reset"."""
    moving = set(_moving(square))
    steps = _steps(square)
    for i, trace in enumerate(square.figure.data):
        if i in moving:
            continue
        for s in steps:
            assert s.args[0]["x"][i] is not None and s.args[0]["y"][i] is not None
            assert list(s.args[0]["x"][i]) == list(trace.x)


def test_the_note_says_which_side_of_each_ridge(square):
    notes = {s.label: s.args[1]["annotations"][0]["text"] for s in _steps(square)}
    assert "memory-bound on V100-SXM2" in notes["128"] and "memory-bound on H100-SXM" in notes["128"]
    assert "math-bound on V100-SXM2" in notes["149"] and "memory-bound on H100-SXM" in notes["149"]
    assert "math-bound on V100-SXM2" in notes["346"] and "math-bound on H100-SXM" in notes["346"]
    assert fc.ridge_status(148, 4096, 4096, [V100]).endswith("memory-bound on V100-SXM2 (ridge 139)")


def test_published_points_are_deepbenchs_v100_gemms():
    db = pk.published("deepbench_gemm", "V100-SXM2")
    points = fc.layer_points(db, 4096, 4096)
    square_nn = db[(db.M == 4096) & (db.K == 4096) & (db.dtype == "float16")]
    assert list(points["batch"]) == sorted(set(square_nn["N"]))
    assert set(points["phase"]) == {"forward"}  # a square layer's dgrad has the forward's shape
    at16 = square_nn[square_nn.N == 16]["tflops"].max()  # the fastest layout is kept
    assert points.set_index("batch").loc[16, "tflops"] == pytest.approx(at16)
    assert fc.layer_points(db, 768, 50257).empty


def test_layer_points_of_a_passes_frame():
    rows = []
    for B in (32, 512):
        for phase, (M, N, K) in pk.linear_gemms(B, 1024, 4096).items():
            for impl, tflops in (("autograd", 1.0), ("gemm", 2.0)):
                rows.append(dict(phase=phase, impl=impl, M=M, N=N, K=K, dtype="float16", tflops=tflops))
    points = fc.layer_points(pd.DataFrame(rows), 1024, 4096)
    assert len(points) == 6 and (points["tflops"] == 2.0).all()  # autograd rows left out
    assert set(points[points.phase == "wgrad"]["batch"]) == {32, 512}  # wgrad's batch is its K


def _live_batch(batches=(16, 128, 1024), device=H100_NAME):
    rows = []
    for B in batches:
        t = pk.predict_gemm_time(4096, B, 4096, "float16", H100) * 1.2
        rows.append(dict(M=4096, N=B, K=4096, dtype="float16", time_s=t, tflops=2 * 4096 * B * 4096 / t / 1e12))
    return framed(rows, live=True, device_name=device, device_kind="gpu", measured_at="2026-11-20T10:00:00+00:00")


def test_a_gpu_run_is_drawn_and_named():
    figure = fc.batch_explorer({"fc_batch": _live_batch()}, published={"V100": pk.published("deepbench_gemm", "V100-SXM2")})
    title = heading_text(figure)
    assert "live on NVIDIA H100 80GB HBM3, 2026-11-20" in title and "no recording" not in title
    ours = [t for t in figure.figure.data if t.name == "NVIDIA H100 80GB HBM3"]
    assert len(ours) == 1 and list(ours[0].x) == [16, 128, 1024]


def test_batch_explorer_refuses_bad_input():
    with pytest.raises(ValueError, match="in_features"):
        fc.batch_explorer(in_features=0)
    with pytest.raises(TypeError, match="models"):
        fc.batch_explorer(models=["H100-SXM"])
    with pytest.raises(ValueError, match="batches"):
        fc.batch_explorer(batches=[8])
    with pytest.raises(TypeError, match="batches"):
        fc.batch_explorer(batches=8)
    with pytest.raises(TypeError, match="measured"):
        fc.batch_explorer([_live_batch()])
    with pytest.raises(TypeError, match="published"):
        fc.batch_explorer(published={"V100": "DeepBench"})
    with pytest.raises(ValueError, match="columns"):
        fc.layer_points(pd.DataFrame({"M": [1]}), 4096, 4096)


def test_the_head_figure_is_memory_bound_at_decode_sizes():
    head = fc.FIGURES["gpt2-head"]()
    notes = {s.label: s.args[1]["annotations"][0]["text"] for s in _steps(head)}
    assert "memory-bound on V100-SXM2" in notes["64"] and "memory-bound on H100-SXM" in notes["64"]
    assert str(pk.math_bound_batch(768, 50257, H100)) in notes


# --------------------------------------------------------------------------------------------
# Problems


@pytest.mark.parametrize("ex", exercises.all_exercises("03_fully_connected"), ids=lambda e: e.id)
def test_every_listed_mistake_is_recognised(ex):
    for solve, why in ex.mistakes:
        verdict = exercises.check(ex.id, solve())
        assert verdict.status == "wrong" and why in verdict.message, verdict


def test_the_answers():
    assert [e.id for e in exercises.all_exercises("03_fully_connected")] == [f"fc-{i}" for i in range(1, 6)]
    assert exercises.answer("fc-1") == pk.math_bound_batch(1024, 4096, pk.device_spec("A100-SXM4-80GB")) == 189
    assert exercises.answer("fc-2") == pytest.approx(50257 / (12 * 9216 + 50257))
    assert exercises.answer("fc-3") == pytest.approx(
        2 * 8192 * (1001 + 1008) / H100.mem_bandwidth / (2 * 4096 * 8192 * 1008 / H100.peak_flop_s("float16")))
    assert exercises.answer("fc-4") == pytest.approx(math.log(1024 / 1001))
    assert exercises.answer("fc-5") == 2048


@pytest.mark.parametrize("ex_id,given,status", [
    ("fc-1", 149, "wrong"),            # the V100's 4096-wide rule of thumb
    ("fc-1", 128, "wrong"),
    ("fc-1", 195, "close"),
    ("fc-2", 50257 / (50257 + 3072), "wrong"),  # the head against one MLP layer only
    ("fc-2", 0.3, "close"),
    ("fc-3", 0.0, "wrong"),            # "padding is free"
    ("fc-4", math.log(1024), "wrong"),  # the loss itself, not the difference
    ("fc-4", 23 / 1024, "close"),      # the padding's probability, near the nats by accident
    ("fc-5", 1024, "wrong"),
    ("fc-5", "2,048", "right"),
])
def test_plausible_answers(ex_id, given, status):
    assert exercises.check(ex_id, given).status == status


# --------------------------------------------------------------------------------------------
# Verdicts


def test_findings_without_data_say_no_data_yet():
    table = pk.book.verdict.verdict_table(verdict_fc.findings({name: None for name in verdict_fc.EXPERIMENTS}))
    assert len(table) == 8 == len(verdict_fc.RULES)
    assert (table["now"] == "—").all() and (table["verdict"] == "no data yet").all()
    assert (table["then"] == "—").all()  # no published frame either
    assert (pk.book.verdict.verdict_table(verdict_fc.findings({}))["verdict"] == "no data yet").all()


@pytest.mark.published
def test_frames_are_recorded_or_published_only():
    frames = verdict_fc.frames()
    assert set(frames) == {*verdict_fc.EXPERIMENTS, verdict_fc.PUBLISHED}
    for name in verdict_fc.EXPERIMENTS:
        assert frames[name] is None or frames[name].attrs["meta"].get("device_kind") == "gpu"
    then = frames[verdict_fc.PUBLISHED]
    assert then.attrs["meta"]["published_by"] == "Baidu DeepBench"
    table = pk.book.verdict.verdict_table(verdict_fc.findings(frames))
    fold = verdict_fc.crossover_fold(then, V100)
    assert table.loc[1, "then"] == f"{fold:.2f}" and 0.67 < fold <= 1  # DeepBench's crossover ≈ the roofline's
    assert table.loc[2, "then"] == "—"  # DeepBench has no TF32
    assert float(table.loc[3, "then"]) > 2  # V100: larger batches were much faster


def _passes(share: float) -> pd.DataFrame:
    rows = [dict(batch=B, phase=p, impl=impl, time_s=1e-3 * (share if impl == "gemm" else 1.0))
            for B in (32, 512) for p in ("forward", "dgrad", "wgrad") for impl in ("autograd", "gemm")]
    return pd.DataFrame(rows)


def _features(unaligned_tflops: float, by_8_tflops: float) -> pd.DataFrame:
    rows = []
    for n in fc_exp.feature_points(1024, 256):
        d = fc_exp._divisible_by(n)
        tflops = unaligned_tflops if d < 8 else by_8_tflops if d < 64 else 100.0
        rows.append(dict(sweep="out", swept=n, divisible_by=d, tflops=tflops))
    return pd.DataFrame(rows)


def _vocab(speedup: float) -> pd.DataFrame:
    frame = fc_exp.predicted_vocab(H100)
    base = frame["predicted_s"].where(frame["multiple"] == 1).groupby(frame["phase"]).transform("max")
    frame["time_s"] = np.where(frame["multiple"] == 1, base, base / speedup)
    return frame


def _batch_with_crossover(crossover: float) -> pd.DataFrame:
    """A 4096² sweep whose two asymptotes meet at ``crossover`` rows, on an H100 (recorded)."""
    best, batches = 600e12, (1, 16, 64, 256, 1024, 4096)
    floor = crossover * 2 * 4096 * 4096 / best
    rows = []
    for B in batches:
        t = max(floor, 2 * 4096 * B * 4096 / best)
        rows.append(dict(M=4096, N=B, K=4096, dtype="float16", time_s=t, tflops=2 * 4096 * B * 4096 / t / 1e12))
    return framed(rows, device="H100-SXM", device_name=H100_NAME, device_kind="gpu", recorded_at="2026-11-20",
                  complete=True)


def test_findings_on_frames_with_known_effects():
    predicted = pk.math_bound_batch(4096, 4096, H100)
    frames = {"fc_passes": _passes(0.9), "fc_batch": _batch_with_crossover(predicted / 2.5),
              "fc_features": _features(50.0, 99.0), "vocab_padding": _vocab(1.0)}
    table = pk.book.verdict.verdict_table(verdict_fc.findings(frames)).set_index("rule")
    assert table.loc["A layer is three GEMMs", ["now", "verdict"]].tolist() == ["0.90", "holds"]
    assert table.loc["Batch > 128 (V100)", ["now", "verdict"]].tolist() == ["0.40", "weaker"]
    assert table.loc["Larger batches are more efficient", "verdict"] == "holds"
    assert table.loc["Features divisible by 8 (FP16)", "verdict"] == "holds"  # 99 / 50
    assert table.loc["Divisible by 64, ideally 256", "verdict"] == "gone"  # 100 / 99
    assert table.loc["Pad the vocabulary to ×8", ["now", "verdict"]].tolist() == ["1.00", "gone"]
    # A layer whose time is not its GEMMs', and a crossover at the roofline's batch:
    frames = {"fc_passes": _passes(0.4), "fc_batch": _batch_with_crossover(predicted)}
    table = pk.book.verdict.verdict_table(verdict_fc.findings(frames)).set_index("rule")
    assert table.loc["A layer is three GEMMs", "verdict"] == "gone"
    assert table.loc["Batch > 128 (V100)", ["now", "verdict"]].tolist() == ["1.00", "holds"]
    assert table.loc["Batch > 128 (V100)", ["evidence", "now_from"]].tolist() == [
        "measured", "ours, recorded on H100-SXM on 2026-11-20"]
    assert table.loc["… and in TF32", "now"] == "—"  # the sweep has no TF32 rows


def test_a_tf32_sweep_is_judged_against_the_tf32_ridge():
    fp16 = _batch_with_crossover(pk.math_bound_batch(4096, 4096, H100))
    tf32 = fp16.assign(dtype="tf32", time_s=2 * fp16["time_s"], tflops=fp16["tflops"] / 2)
    both = pd.concat([fp16, tf32], ignore_index=True)
    both.attrs = fp16.attrs
    table = pk.book.verdict.verdict_table(verdict_fc.findings({"fc_batch": both})).set_index("rule")
    # Half the FLOP/s and twice the bytes: the same crossover batch in TF32.
    assert pk.math_bound_batch(4096, 4096, H100, "tf32") == pk.math_bound_batch(4096, 4096, H100)
    assert table.loc["… and in TF32", ["now", "verdict"]].tolist() == ["1.00", "holds"]
    assert table.loc["Batch > 128 (V100)", "now"] == "1.00"  # read from the float16 rows only


def test_rules_nothing_measured_rest_on_published_h100_rows_or_the_model():
    table = pk.book.verdict.verdict_table(verdict_fc.findings({}, instead=verdict_fc.alternatives({}))).set_index("rule")
    assert (table["evidence"] == "model").all() and table["verdict"].str.startswith("predicted: ").all()
    predicted = verdict_fc.predicted_sweep(H100)
    assert table.loc["Batch > 128 (V100)", "now"] == f"{verdict_fc.crossover_fold(predicted, H100):.2f}"
    if not pk.published_data.has_published("xla_h100_gemm"):
        pytest.skip(pk.published_data.HOW_TO_GET)
    modern = verdict_fc.modern_frames()
    table = pk.book.verdict.verdict_table(verdict_fc.findings({}, instead=verdict_fc.alternatives(modern))).set_index("rule")
    rows = ["Batch > 128 (V100)", "… and in TF32", "Larger batches are more efficient"]
    assert (table.loc[rows, "evidence"] == "published").all()
    assert (table.loc[rows, "now_from"] == "published by OpenXLA, measured on H100-SXM (2025)").all()
    assert (table.drop(index=rows)["evidence"] == "model").all()  # nothing about alignment from XLA
    sweep = verdict_fc.h100_sweep(modern["xla_h100_gemm"])
    crossing = pk.roofline.batch_crossover(sweep).iloc[0]
    fold = crossing["crossover_batch"] / pk.math_bound_batch(4096, 4096, H100, "bfloat16")
    assert table.loc["Batch > 128 (V100)", "now"] == f"{min(fold, 1 / fold):.2f}"
    at_256 = sweep.loc[sweep["N"] == 256, "tflops"].iloc[0]
    assert table.loc["Larger batches are more efficient", "now"] == f"{sweep['tflops'].max() / at_256:.1f}"


def test_published_batch_sweeps_read_one_small_dimension_as_the_batch():
    assert fc_analysis.published_batch_sweeps(None) is None
    with pytest.raises(ValueError, match="batch must be"):
        fc_analysis.published_batch_sweeps(None, batch="K")
    with pytest.raises(ValueError, match="lacks the columns"):
        fc_analysis.published_batch_sweeps(pd.DataFrame({"M": [1]}))
    rows = framed([dict(b=b, M=m, N=n, K=4096, dtype=d, time_s=1e-5, tflops=1.0)
                   for b in (1, 2) for m in (4096, 256) for n in (256, 4096)
                   for d in ("bfloat16", "float32", "float8_e4m3fn")], device="H100-SXM", published_by="OpenXLA")
    by_n = fc_analysis.published_batch_sweeps(rows, layers=(4096,))
    assert set(by_n["dtype"]) == {"bfloat16", "tf32"} and (by_n["M"] == 4096).all()  # no fp8, b = 1 only
    assert sorted(by_n["N"].unique()) == [256, 4096] and by_n.attrs["meta"]["device"] == "H100-SXM"
    by_m = fc_analysis.published_batch_sweeps(rows, batch="M", layers=(4096,))
    assert (by_m["M"] == 4096).all() and sorted(by_m["N"].unique()) == [256, 4096]
    assert len(fc_analysis.published_batch_sweeps(rows, layers=None)) == 8


def test_a_cpu_run_is_never_now():
    cpu = fc_exp.fc_batch(device="cpu", in_features=64, out_features=64, batches=(1, 16), progress=False)
    assert cpu.attrs["meta"]["device_kind"] == "cpu"
    table = pk.book.verdict.verdict_table(verdict_fc.findings({"fc_batch": cpu}))
    assert (table["verdict"] == "no data yet").all()
    with pytest.raises(TypeError, match="frames"):
        verdict_fc.findings([cpu])
    with pytest.raises(TypeError, match="DataFrame"):
        verdict_fc.findings({"fc_batch": "a frame"})


def test_the_vocabulary_figure_heading_fits():
    fig = pk.book.fully_connected.plot_vocab_padding(fc_exp.predicted_vocab(H100), pk.provenance.modelled(H100))
    lines = heading_text(fig).splitlines()
    assert len(lines) == 3 and lines[-1].startswith("model of H100-SXM")


# --------------------------------------------------------------------------------------------
# What the chapter shows: analyses that take None (no run, no recording) and give None


def test_analyses_pass_none_through():
    for fn in (fc_analysis.pass_overhead, fc_analysis.feature_effects, fc_analysis.vocab_savings, fc_analysis.overhead_table,
               fc_analysis.effects_table, fc_analysis.savings_table):
        assert fn(None) is None, fn.__name__
    assert fc_analysis.crossovers({"ours": None}) is None
    assert fc_analysis.batch_speedups(None, pk.published("deepbench_gemm", "V100-SXM2")) is None
    note = pk.table(fc_analysis.overhead_table(None), "no GPU here")
    assert isinstance(note, pk.display.Note) and note.text == "No GPU here" and not note.instead


def test_reader_tables_have_words_and_seconds():
    over = fc_analysis.overhead_table(_passes(0.5))
    assert list(over.columns) == ["batch", "pass", "through_autograd_s", "GEMM_alone_s", "autograd ÷ GEMM"]
    assert over["through_autograd_s"].eq(1e-3).all() and over["autograd ÷ GEMM"].eq(2).all()
    shown = pk.table(over, seconds={"through_autograd_s": "µs", "GEMM_alone_s": "µs"})
    assert list(shown.shown.columns) == ["batch", "pass", "through autograd (µs)", "GEMM alone (µs)",
                                         "autograd ÷ GEMM"]
    assert shown.shown["through autograd (µs)"].to_numpy() == pytest.approx(1000)
    eff = fc_analysis.effects_table(_features(50.0, 99.0))
    assert eff.loc[0, "swept"] == "outputs" and eff.loc[0, "align gain (×)"] == pytest.approx(
        fc_analysis.feature_effects(_features(50.0, 99.0)).loc[0, "align_gain"])
    saved = fc_analysis.savings_table(_vocab(1.25))
    assert {"pass", "implementation", "logits", "time_s", "speedup (×)"} <= set(saved.columns)
    padded = saved[(saved["implementation"] == "linear") & (saved["logits"] != 50257)]
    assert padded["speedup (×)"].to_numpy() == pytest.approx(1.25)


@pytest.mark.published
def test_crossovers_of_deepbench_and_of_a_recording():
    v100 = pk.provenance.published_counterparts("fc_batch")["V100-SXM2, 2019"]
    predicted = pk.math_bound_batch(4096, 4096, H100)
    table = fc_analysis.crossovers({"DeepBench": v100, "ours": _batch_with_crossover(predicted / 2), "none": None})
    assert list(table["data"]) == ["DeepBench", "ours"] and list(table["device"]) == ["V100-SXM2", "H100-SXM"]
    assert table.loc[0, "predicted crossover"] == 149 and 165 < table.loc[0, "measured crossover"] < 175
    assert table.loc[1, "predicted crossover"] == predicted
    assert table.loc[1, "measured crossover"] == pytest.approx(predicted / 2)
    speed = fc_analysis.batch_speedups(_batch_with_crossover(predicted), v100)
    assert list(speed.columns) == ["batch", "layer", "then_s", "now_s", "speedup (×)"]
    assert set(speed["batch"]) == {16, 64} and (speed["layer"] == "4096→4096").all()


def _cpu_sweep(crossover: float = 64.0) -> pd.DataFrame:
    """A live 1024 → 1024 FP32 sweep on a CPU whose two asymptotes meet at ``crossover`` rows: made-up
    times, so nothing depends on this machine's speed."""
    best, rows = 0.5e12, []
    for B in (1, 4, 16, 64, 256, 1024):
        t = max(crossover * 2 * 1024 * 1024 / best, 2 * 1024 * B * 1024 / best)
        rows.append(dict(M=1024, N=B, K=1024, dtype="float32", time_s=t, tflops=2 * 1024 * B * 1024 / t / 1e12))
    return framed(rows, CPU_LIVE, device_kind="cpu")


def test_crossover_of_a_live_cpu_run_uses_this_cpu(monkeypatch):
    """A live CPU sweep is predicted with the ceilings of the CPU it ran on (this machine's), and with
    none on a GPU machine. A hand-built sweep and a made-up CPU: deterministic on any machine."""
    cpu = dataclasses.replace(H100, name="CPU (synthetic, 2 cores)", kind="cpu", sms=2)
    monkeypatch.setattr(fc_analysis, "current_device", lambda: cpu)
    row = fc_analysis.crossovers({"this CPU": _cpu_sweep()}).iloc[0]
    assert row["device"] == cpu.name and row["layer"] == "1024→1024"
    assert row["measured crossover"] == pytest.approx(64)
    assert row["predicted crossover"] == pk.math_bound_batch(1024, 1024, cpu, "float32")
    monkeypatch.setattr(fc_analysis, "current_device", lambda: H100)  # run here, but here is a GPU
    row = fc_analysis.crossovers({"this CPU": _cpu_sweep()}).iloc[0]
    assert math.isnan(row["predicted crossover"]) and row["device"] == CPU_LIVE["device_name"]


def test_crossover_table_is_the_readers_columns():
    predicted = pk.math_bound_batch(4096, 4096, H100)
    frames = {"ours": _batch_with_crossover(predicted * 1.5), "none": None}
    table = fc_analysis.crossover_table(frames)
    assert list(table.columns) == ["device", "layer", "dtype", "best TFLOP/s", "measured crossover",
                                   "predicted crossover"]
    assert table.loc[0, "measured crossover"] == pytest.approx(1.5 * predicted)
    assert fc_analysis.crossover_table({"none": None}) is None
    assert isinstance(pk.table(fc_analysis.crossover_table({}), "why"), pk.display.Note)


def test_frame_device_reads_the_metadata_like_the_verdicts():
    """fc_analysis finds a frame's device with perfkit.devices alone (experiments never import
    perfkit.verdict), and agrees with the verdicts' own lookup."""
    from perfkit.book.frames import spec_of

    frames = [{"device": "H100-SXM", "device_name": "NVIDIA H100 80GB HBM3", "device_kind": "gpu"},
              {"device_name": "Tesla V100-SXM2-16GB", "device_kind": "gpu"},
              {"device_name": "Some Future GPU", "device_kind": "gpu"},
              {"device_name": "CPU (x86_64)", "device_kind": "cpu"}, {}]
    for meta in frames:
        frame = framed({"M": [1]}, meta)
        found = fc_analysis.frame_device(frame)
        assert found == spec_of(frame), meta
    assert fc_analysis.frame_device(pd.DataFrame({"M": [1]})) is None  # no metadata, not live
    assert fc_analysis.frame_device(framed({"M": [1]}, device_name=H100_NAME)).name == "H100-SXM"


@pytest.mark.published
def test_reader_tables_show_seconds_in_the_unit_the_chapter_asks():
    v100 = pk.provenance.published_counterparts("fc_batch")["V100-SXM2, 2019"]
    table = pk.table(fc_analysis.crossovers({"DeepBench": v100}), seconds={"fastest_s": "µs"},
                     formats={"fastest (µs)": "{:.0f}"})
    assert "fastest (µs)" in table.shown.columns and "fastest_s" in table.frame.columns
    assert table.shown["fastest (µs)"].iloc[0] == pytest.approx(1e6 * table.frame["fastest_s"].iloc[0])


def test_the_h100_crossover_figure_labels_published_points_and_the_model(capsys):
    rows = framed([dict(b=1, M=4096, N=n, K=4096, dtype=d, time_s=t, tflops=2 * 4096 * n * 4096 / t / 1e12)
                   for d in ("bfloat16", "float32") for n, t in ((256, 2e-5), (1024, 4e-5), (4096, 1.6e-4))],
                  device="H100-SXM", device_name="H100", published_by="OpenXLA", published_date="2025",
                  timing="CUPTI kernel time: the median")
    sweeps = fc_analysis.published_batch_sweeps(rows, layers=(4096,))
    fig = pk.book.fully_connected.plot_fc_crossover(sweeps, H100)
    title = heading_text(fig)
    assert "published by OpenXLA" in title and "CUPTI kernel time" in title and "model of H100-SXM" in title
    assert [ax.get_title() for ax in fig.axes] == ["bfloat16", "tf32"]
    model_only = pk.book.fully_connected.plot_fc_crossover(None, H100, missing="how to get the data")
    assert "the model's prediction only" in heading_text(model_only)
    assert "published by" not in heading_text(model_only)
    assert "how to get the data" in capsys.readouterr().out
    with pytest.raises(TypeError, match="spec"):
        pk.book.fully_connected.plot_fc_crossover(sweeps, "H100")
