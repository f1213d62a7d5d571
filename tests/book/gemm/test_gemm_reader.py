"""Chapter 02_gemm for the reader: its interactive figure, its problems and its verdicts."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.gemm import interactive as igemm
from perfkit.book.interactive import MAX_HTML_BYTES, InteractiveFigure, html_bytes, rounded
from perfkit.book.gemm import verdict as vgemm
from testkit import CHAPTERS, H100, H100_NAME, framed, heading_text

CHAPTER = CHAPTERS / "02_gemm.md"
TILE = (256, 128)


def _frame(rows: list[dict], experiment: str, **meta) -> pd.DataFrame:
    """``rows`` as a recording of ``experiment`` on an H100 (``meta`` overrides)."""
    return framed(rows, {"experiment": experiment, "device_name": H100_NAME, "device_kind": "gpu",
                         "recorded_at": "2026-01-02T00:00:00Z", "complete": True}, **meta)


def _gemm_row(M, N, K, dtype, t, **extra) -> dict:
    return dict(M=M, N=N, K=K, dtype=dtype, time_s=t, iqr_s=0.01 * t, tflops=2 * M * N * K / t / 1e12, **extra)


def waves_frame(*, quantized: bool = True, M: int = 3072, K: int = 4096, **meta) -> pd.DataFrame:
    """A gemm_waves-like frame on an H100 (``meta`` overrides): forced-tile times from the model (steps), or ∝ N."""
    rows = []
    for N in range(64, 4608 + 1, 64):
        wq = pk.wave_quantization(M, N, TILE, H100.sms)
        for impl, tile in (("triton 256x128", TILE), ("cublas", None)):
            t = pk.predict_gemm_time(M, N, K, "float16", H100, tile)
            if not quantized:
                t = 1e-7 * N
            rows.append(_gemm_row(M, N, K, "float16", t, impl=impl, tile_m=256, tile_n=128, block_k=64,
                                  tiles=wq.tiles, waves=wq.waves, predicted_s=t))
    return _frame(rows, "gemm_waves", **meta)


def tile_frame(*, quantized: bool = True, K: int = 2048) -> pd.DataFrame:
    M = H100.sms * 256
    rows = []
    for N in range(64, 8 * 128 + 1, 16):
        wq = pk.wave_quantization(M, N, TILE, H100.sms)
        t = pk.predict_gemm_time(M, N, K, "float16", H100, TILE) if quantized else 1e-7 * N
        rows.append(_gemm_row(M, N, K, "float16", t, impl="triton 256x128", tile_m=256, tile_n=128, block_k=64,
                              tiles=wq.tiles, waves=wq.waves, predicted_s=t))
    return _frame(rows, "gemm_tile_quantization")


def alignment_frame(penalty: float) -> pd.DataFrame:
    rows = []
    for dtype, a in (("float16", 8), ("tf32", 4)):
        for K in range(4088, 4105):
            t = 2e-4 * K / 4096 * (1 if K % a == 0 else penalty)
            rows.append(_gemm_row(4096, 4096, K, dtype, t, aligned=K % a == 0, alignment=a))
    return _frame(rows, "gemm_alignment")


def sizes_frame(*, flat: bool = False) -> pd.DataFrame:
    rows = []
    for sweep in ("mn", "k"):
        for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
            M, N, K = (s, s, 4096) if sweep == "mn" else (4096, 4096, s)
            t = 2 * M * N * K / 500e12 if flat else pk.predict_gemm_time(M, N, K, "float16", H100)
            rows.append(_gemm_row(M, N, K, "float16", t, sweep=sweep, predicted_s=t))
    return _frame(rows, "gemm_sizes")


def transposes_frame(worst: float) -> pd.DataFrame:
    rows = []
    for shape, M, N, K in [("square", 4096, 4096, 4096)] + [("skinny", 2560, n, 2560) for n in (32, 64, 128)]:
        for layout in ("NN", "NT", "TN", "TT"):
            t = 1e-5 * (worst if (layout == "TN" and N == 32) else 1.0)
            rows.append(_gemm_row(M, N, K, "float16", t, layout=layout, shape=shape))
    return _frame(rows, "gemm_transposes")


def small_n_frame(*, memory_bound: bool = True) -> pd.DataFrame:
    rows = []
    for N in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        t = 1e-5 if memory_bound else 1e-7 * N
        rows.append(_gemm_row(2560, N, 2560, "float16", t, gbps=1.0, intensity=1.0, predicted_s=t))
    return _frame(rows, "gemm_small_n")


# --- the interactive figure --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(igemm.FIGURES))
def test_every_registered_figure_builds_small_and_described(name):
    figure = igemm.FIGURES[name]()
    assert isinstance(figure, InteractiveFigure)
    assert figure.name.startswith("gemm-") and len(figure.alt) > 100
    assert html_bytes(figure) < MAX_HTML_BYTES
    assert 10 <= len(figure.states) <= igemm.MAX_STATES


def _steps(figure):
    return figure.figure.to_dict()["layout"]["sliders"][0]["steps"]


def test_each_state_is_the_models_prediction_tiles_and_waves():
    figure = igemm.waves_figure()
    M, K = igemm.default_rows(H100.sms), 4096
    assert M == 3072  # 12 rows of tiles: 11 tile columns per wave of 132
    steps = _steps(figure)
    for step in steps:
        N = int(step["label"])
        layout = step["args"][1]
        marker = layout["shapes"][1]
        predicted = pk.predict_gemm_time(M, N, K, "float16", H100, tile=TILE)
        assert marker["xanchor"] == N and marker["yanchor"] == rounded([predicted])[0]
        wq = pk.wave_quantization(M, N, TILE, H100.sms)
        bars = [s["y1"] for s in layout["shapes"][2:]]
        assert sum(bars) == wq.tiles and sum(b > 0 for b in bars) == wq.waves
        assert bars[wq.waves - 1] == wq.last_wave_tiles
        text = layout["annotations"][0]["text"]
        assert f"{wq.tiles} tiles" in text and pk.units.format_time(predicted) in text


def test_the_marker_jumps_where_a_new_wave_starts_and_nowhere_else():
    steps = {int(s["label"]): s["args"][1] for s in _steps(igemm.waves_figure())}
    time = {n: layout["shapes"][1]["yanchor"] for n, layout in steps.items()}
    assert time[1472] / time[1408] > 1.8  # 12 tiles more: a second wave
    assert time[2816] / time[1472] == pytest.approx(1.0)  # all of the second wave costs the same
    assert [s["y1"] for s in steps[1408]["shapes"][2:]] == [132, 0, 0]
    assert [s["y1"] for s in steps[1472]["shapes"][2:]] == [132, 12, 0]


def test_states_only_move_layout_so_the_static_curves_stay():
    figure = igemm.waves_figure(waves_frame())
    for step in _steps(figure):
        assert step["args"][0] == {}  # no trace property is restyled (null would erase a curve)
    names = [t.name for t in figure.figure.data]
    assert "measured, cuBLAS" in names and "measured, 256×128 tiles" in names


def test_provenance_in_the_title():
    model_only = heading_text(igemm.waves_figure())
    assert "model of H100-SXM" in model_only and "model only" in model_only
    recorded = heading_text(igemm.waves_figure(waves_frame()))
    assert "recorded on NVIDIA H100 80GB HBM3 on 2026-01-02" in recorded
    assert "model of H100-SXM" in recorded
    unknown = waves_frame(device_name="NVIDIA Imaginary GPU", device="NVIDIA Imaginary GPU")
    figure = igemm.waves_figure(unknown)  # no spec to model it with: the reference GPU, no points
    assert "NVIDIA Imaginary GPU" in heading_text(figure) and "H100-SXM" in heading_text(figure)
    assert not any(str(t.name).startswith("measured") for t in figure.figure.data)
    v100 = heading_text(igemm.waves_figure(spec="V100-SXM2"))
    assert "V100-SXM2" in v100 and "4096×N×4096" in v100  # 16 rows of tiles on 80 SMs


def test_bad_input_is_refused_with_the_parameter_named():
    with pytest.raises(LookupError, match="unknown device"):
        igemm.waves_figure(spec="no such GPU")
    with pytest.raises(TypeError, match="spec"):
        igemm.waves_figure(spec=132)
    with pytest.raises(ValueError, match="tile"):
        igemm.waves_figure(tile=(0, 128))
    with pytest.raises(ValueError, match="K"):
        igemm.waves_figure(K=0)
    with pytest.raises(TypeError, match="frame"):
        igemm.waves_figure("gemm_waves")
    with pytest.raises(ValueError, match="lacks"):
        igemm.waves_figure(waves_frame().drop(columns=["impl"]))
    cpu = waves_frame(device_kind="cpu", device_name="CPU (x86_64, 2 cores)")
    with pytest.raises(ValueError, match="CPU"):
        igemm.waves_figure(cpu)
    with pytest.raises(ValueError, match="not on spec"):
        igemm.waves_figure(waves_frame(), spec="V100-SXM2")
    with pytest.raises(ValueError, match="triton"):
        igemm.waves_figure(waves_frame().query("impl == 'cublas'"))
    with pytest.raises(ValueError, match="GPU"):
        igemm.waves_figure(spec=dataclasses.replace(H100, kind="cpu"))


# --- the problems --------------------------------------------------------------------------------


def test_the_chapters_exercises_and_their_answers():
    ids = [ex.id for ex in exercises.all_exercises("02_gemm")]
    assert ids == [f"gemm-{i}" for i in range(1, 6)]
    assert exercises.answer("gemm-1") == 1409
    assert exercises.answer("gemm-2") == pk.math_bound_batch(4096, 4096, H100) == 346
    assert exercises.answer("gemm-3") == "alignment"
    assert exercises.answer("gemm-4") == pytest.approx(1.87, abs=0.01)  # layout "NTT": N is never a leading dim
    assert exercises.answer("gemm-5") == pytest.approx(1.086, abs=0.001)
    text = CHAPTER.read_text()
    for ex_id in ids:
        assert f'problems.check("{ex_id}", None)' in text
        assert exercises.get(ex_id).answer_text() in text
        assert exercises.check(ex_id, exercises.answer(ex_id)).status == "right"
        assert exercises.check(ex_id, None).status == "unanswered"


@pytest.mark.parametrize("ex_id", [f"gemm-{i}" for i in range(1, 6)])
def test_every_listed_mistake_is_recognised(ex_id):
    ex = exercises.get(ex_id)
    assert ex.mistakes
    for solve, why in ex.mistakes:
        verdict = exercises.check(ex_id, solve())
        assert verdict.status == "wrong" and why in verdict.message


@pytest.mark.parametrize("ex_id, given, status, says", [
    ("gemm-1", 1408, "wrong", "one full wave"),
    ("gemm-1", 1536, "wrong", "partly empty tile"),
    ("gemm-1", 1153, "wrong", "A100"),
    ("gemm-1", 1410, "close", "too high"),
    ("gemm-1", "1,409", "right", ""),
    ("gemm-2", 149, "wrong", "V100"),
    ("gemm-2", 296, "wrong", "ridge itself"),
    ("gemm-2", 345, "close", "too low"),
    ("gemm-2", 512, "wrong", "off by more"),
    ("gemm-3", "tile quantization", "wrong", "M×N output"),
    ("gemm-3", "Memory-Bound", "wrong", "math-bound"),
    ("gemm-3", "ALIGNMENT", "right", ""),
    ("gemm-3", "padding", "wrong", "not one of the choices"),
    ("gemm-4", 1.0007, "wrong", "ratio of the work"),
    ("gemm-4", 2.0, "close", "too high"),
    ("gemm-4", 1.88, "right", ""),
    ("gemm-5", 8, "wrong", "memory-bound"),
    ("gemm-5", 1.1, "close", "too high"),
    ("gemm-5", 2.0, "wrong", "off by more"),
])
def test_answers_are_judged_with_the_right_message(ex_id, given, status, says):
    verdict = exercises.check(ex_id, given)
    assert verdict.status == status
    assert says in verdict.message


# --- the verdicts --------------------------------------------------------------------------------


def test_no_frames_means_no_data_yet_for_every_rule():
    for frames in ({}, {name: None for name in (*vgemm.EXPERIMENTS, vgemm.PUBLISHED)}):
        table = pk.book.verdict.verdict_table(vgemm.findings(frames))
        assert len(table) == 6
        assert (table["now"] == "—").all() and (table["then"] == "—").all()
        assert (table["verdict"] == "no data yet").all()


@pytest.mark.published
def test_frames_are_recorded_or_published_never_live():
    frames = vgemm.frames()
    assert set(frames) == {*vgemm.EXPERIMENTS, vgemm.PUBLISHED}
    for name in vgemm.EXPERIMENTS:
        frame = frames[name]
        assert frame is None or (not frame.attrs["meta"].get("live")
                                 and frame.attrs["meta"].get("device_kind") == "gpu")
    assert frames[vgemm.PUBLISHED].attrs["meta"]["published_by"] == "Baidu DeepBench"
    table = pk.book.verdict.verdict_table(vgemm.findings(frames))
    assert ((table["now"] == "—") == (table["verdict"] == "no data yet")).all()


def test_then_comes_from_deepbench_v100():
    published = pk.published("deepbench_gemm", "V100-SXM2")
    table = pk.book.verdict.verdict_table(vgemm.findings({vgemm.PUBLISHED: published})).set_index("rule")
    then = table["then"]
    assert (then != "—").sum() == 4
    assert then["Tile quantization"] == then["Wave quantization"] == "—"
    # The chapter's own then-vs-now numbers: above 100 GFLOP vs below 1 GFLOP, N = 128 vs 16.
    v100 = pk.provenance.published_counterparts("gemm_sizes")["V100-SXM2, 2019"]
    work = 2 * v100["M"] * v100["N"] * v100["K"]
    ratio = v100[work >= 1e11]["tflops"].median() / v100[work <= 1e9]["tflops"].median()
    assert then["Bigger GEMMs are more efficient"] == f"{ratio:.1f}"
    small = pk.provenance.published_counterparts("gemm_small_n")["V100-SXM2, 2019"].set_index("N")["time_s"]
    assert then["Small minibatch is memory-bound"] == f"{8 * small[16] / small[128]:.1f}"
    skinny = pk.then_now.layout_spread(pk.then_now.counterpart("gemm_transposes", published))
    skinny = skinny[(skinny["M"] == 2560) & (skinny["K"] == 2560) & (skinny["N"] <= 128)]
    assert then["Prefer NN over TN"] == f"{skinny['spread'].max():.2f}"
    assert float(then["Dimensions multiples of 8 (FP16) / 16 bytes"]) < 1.1


def _verdicts(**frames) -> dict[str, str]:
    table = pk.book.verdict.verdict_table(vgemm.findings(frames))
    return dict(zip(table["rule"], table["verdict"]))


def test_frames_with_strong_effects_hold():
    verdicts = _verdicts(gemm_sizes=sizes_frame(), gemm_alignment=alignment_frame(1.5),
                         gemm_tile_quantization=tile_frame(), gemm_waves=waves_frame(),
                         gemm_transposes=transposes_frame(2.0), gemm_small_n=small_n_frame())
    assert set(verdicts.values()) == {"holds"}


def test_frames_without_the_effects_are_gone():
    verdicts = _verdicts(gemm_sizes=sizes_frame(flat=True), gemm_alignment=alignment_frame(1.0),
                         gemm_tile_quantization=tile_frame(quantized=False),
                         gemm_waves=waves_frame(quantized=False), gemm_transposes=transposes_frame(1.0),
                         gemm_small_n=small_n_frame(memory_bound=False))
    assert set(verdicts.values()) == {"gone"}


def test_effects_in_between_are_weaker():
    assert _verdicts(gemm_alignment=alignment_frame(1.1))[
        "Dimensions multiples of 8 (FP16) / 16 bytes"] == "weaker"
    assert _verdicts(gemm_transposes=transposes_frame(1.2))["Prefer NN over TN"] == "weaker"


def test_quantization_effect_measures_the_share_of_a_step():
    assert vgemm.quantization_effect(tile_frame()) == pytest.approx(1.0, abs=0.15)
    assert vgemm.quantization_effect(tile_frame(quantized=False)) == pytest.approx(16 / 128)
    assert vgemm.quantization_effect(waves_frame(quantized=False)) == pytest.approx(64 / 1408)
    # The cuBLAS rows do not count: the forced tiles are what the rule is about.
    assert vgemm.quantization_effect(waves_frame().query("impl == 'cublas'")) is None
    # A sweep that never completes a wave after the step gives no effect.
    assert vgemm.quantization_effect(waves_frame().query("N <= 2048")) is None


@pytest.mark.published
@pytest.mark.filterwarnings("ignore:.*samples")
def test_a_cpu_or_published_frame_is_never_now(short_bench):
    cpu = pk.book.gemm.experiments.gemm_transposes(device="cpu", progress=False)
    assert cpu.attrs["meta"]["device_kind"] == "cpu"
    with pytest.raises(ValueError, match="CPU"):
        vgemm.findings({"gemm_transposes": cpu})
    with pytest.raises(ValueError, match="published"):
        vgemm.findings({"gemm_small_n": pk.provenance.published_counterparts("gemm_small_n")["V100-SXM2, 2019"]})
    with pytest.raises(TypeError, match="frames"):
        vgemm.findings([cpu])
    # The computation itself is the same on any frame of the experiment's columns.
    bare = cpu.copy()
    bare.attrs = {}
    spread = pk.then_now.layout_spread(bare)["spread"].max()
    assert vgemm.layout_effect(bare) == pytest.approx(spread)
    row = pk.book.verdict.verdict_table(vgemm.findings({"gemm_transposes": bare})).set_index("rule").loc["Prefer NN over TN"]
    assert row["now"] == f"{spread:.2f}" and row["unit"] == "×"
    assert row["verdict"] == pk.book.verdict.judge(spread, holds_at=1.3, gone_below=1.1)


def test_the_verdict_cell_is_computed_not_typed():
    text = CHAPTER.read_text()
    verdict = text[text.index("## Verdict"):text.index("## Problems")]
    assert "gemm.verdict.findings" in verdict
    assert not re.search(r"^\|.*\|$", verdict, flags=re.M)  # no Markdown table of results


def test_small_n_effect_needs_both_minibatches():
    frame = small_n_frame()
    assert vgemm.small_n_effect(frame) == pytest.approx(8.0)
    assert vgemm.small_n_effect(frame[frame["N"] != 16]) is None
    assert np.isclose(vgemm.small_n_effect(small_n_frame(memory_bound=False)), 1.0)


# --- the chapter's analysis functions: None in, None out -----------------------------------------


@pytest.mark.published
def test_analysis_functions_pass_no_recording_through_as_none():
    v100 = pk.provenance.published_counterparts("gemm_small_n")["V100-SXM2, 2019"]
    assert pk.book.gemm.experiments.alignment_penalty(None) is None
    assert pk.book.gemm.experiments.alignment_summary(None) is None
    assert pk.book.gemm.experiments.size_throughput(None) is None
    assert pk.then_now.speedup_table(None, v100) is None
    assert pk.then_now.speedup_table(small_n_frame(), None) is None
    # ...so the chapter's table cell shows a note saying what is shown instead.
    note = pk.table(pk.book.gemm.experiments.alignment_summary(None), pk.provenance.missing("no GPU"),
                    instead="the verdict")
    assert isinstance(note, pk.display.Note) and note.instead == "the verdict"


def test_alignment_summary_is_seconds_shown_in_microseconds_with_the_penalty():
    out = pk.book.gemm.experiments.alignment_summary(alignment_frame(1.5))
    assert list(out.columns) == ["dtype", "aligned_K_s", "unaligned_K_s", "penalty (×)"]
    assert set(out["dtype"]) == {"float16", "tf32"}
    assert out["penalty (×)"].to_numpy() == pytest.approx([1.5, 1.5], rel=0.01)
    assert out["aligned_K_s"].to_numpy() == pytest.approx([200e-6, 200e-6], rel=0.01)
    shown = pk.table(out, seconds={"aligned_K_s": "µs", "unaligned_K_s": "µs"},
                     formats={"aligned K (µs)": "{:.1f}"})
    assert list(shown.shown.columns) == ["dtype", "aligned K (µs)", "unaligned K (µs)", "penalty (×)"]
    text = str(shown)
    assert "penalty (×)" in text and "float16" in text and "200.0" in text


def test_size_throughput_is_the_smallest_and_best_of_a_sweep():
    frame = sizes_frame()
    out = pk.book.gemm.experiments.size_throughput(frame)
    mn = frame[frame["sweep"] == "mn"]
    assert list(out.columns) == ["dtype", "smallest (TFLOP/s)", "best (TFLOP/s)"]
    assert out.iloc[0]["smallest (TFLOP/s)"] == pytest.approx(mn.loc[mn["M"].idxmin(), "tflops"])
    assert out.iloc[0]["best (TFLOP/s)"] == pytest.approx(mn["tflops"].max())
    assert (out["best (TFLOP/s)"] > 2 * out["smallest (TFLOP/s)"]).all()  # the chapter's claim
    k = pk.book.gemm.experiments.size_throughput(frame, sweep="k")
    assert k.iloc[0]["best (TFLOP/s)"] == pytest.approx(frame[frame["sweep"] == "k"]["tflops"].max())
    with pytest.raises(ValueError, match="sweep"):
        pk.book.gemm.experiments.size_throughput(frame, sweep="n")


@pytest.mark.published
def test_speedup_table_is_speedups_in_seconds():
    v100 = pk.provenance.published_counterparts("gemm_small_n")["V100-SXM2, 2019"]
    now = small_n_frame()
    out = pk.then_now.speedup_table(now, v100)
    raw = pk.then_now.speedups(now, v100)
    assert list(out.columns) == [*pk.then_now.SHAPE, "then_s", "now_s", "speedup (×)"]
    assert out["then_s"].to_numpy() == pytest.approx(raw["then_s"].to_numpy())
    assert out["speedup (×)"].to_numpy() == pytest.approx(raw["speedup"].to_numpy())
    shown = pk.table(out, seconds={"then_s": "µs", "now_s": "µs"},
                     formats={"then (µs)": "{:.3g}", "now (µs)": "{:.3g}"})
    assert list(shown.shown.columns)[-3:] == ["then (µs)", "now (µs)", "speedup (×)"]

