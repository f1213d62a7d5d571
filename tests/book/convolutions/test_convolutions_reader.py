"""The reader's pieces of chapter 05_convolutions: its interactive figures, its problems and its verdicts."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.convolutions.analysis import DB_COLUMNS, conv_flops, conv_shape, pass_s
from perfkit.book.convolutions import interactive as ic
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes
from perfkit.book.convolutions import verdict as vc
from testkit import CHAPTERS, H100, V100, framed, heading_text

CHAPTER = CHAPTERS / "05_convolutions.md"

#: Tests that read DeepBench's published tables (kept outside the repository) skip without them.
needs_deepbench = pytest.mark.skipif(
    not all(pk.published_data.has_published(f"deepbench_{k}") for k in ("gemm", "conv", "rnn")),
    reason=pk.published_data.HOW_TO_GET)


def _meta(device: str = "H100-SXM", kind: str = "gpu") -> dict:
    return {"experiment": "x", "device_name": device, "device": device, "device_kind": kind,
            "recorded_at": "2025-01-01T00:00:00", "complete": True}


def _step_y(fig, k: int, trace: int) -> list:
    return fig.layout.sliders[0].steps[k].args[0]["y"][trace]


def _title(figure) -> str:
    return html.unescape(heading_text(figure))


# --- interactive figures ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ic.FIGURES))
def test_every_figure_builds_small_with_alt_text(name):
    figure = ic.FIGURES[name]()
    assert isinstance(figure, pk.book.interactive.InteractiveFigure)
    assert html_bytes(figure) < MAX_HTML_BYTES
    assert 2 <= len(figure.states) <= 60
    assert len(figure.alt) > 80 and figure.name.startswith("conv-")


def test_channels_figure_states_are_the_gemm_model_per_pass():
    figure = ic.channels_figure()
    cs = ic.channel_states()
    assert figure.states == [str(c) for c in cs]
    fig = figure.figure
    for c in (64, 129, 256, 257):
        k = cs.index(c)
        gemms = pk.conv_gemms(32, c, 56, 56, c, 3, 3, 1, 1)
        s = conv_shape(32, c, 56, 56, c, 3, 3, 1, 1)
        expected = [pass_s(s, p, "float16", H100) for p in ("forward", "dgrad", "wgrad")]
        np.testing.assert_allclose(_step_y(fig, k, 4), expected, rtol=1e-4)  # the bars
        flops = conv_flops(conv_shape(32, c, 56, 56, c, 3, 3, 1, 1))
        np.testing.assert_allclose(_step_y(fig, k, 0)[k], flops / expected[0] / 1e12, rtol=1e-4)  # the curve
        assert fig.layout.sliders[0].steps[k].args[0]["selectedpoints"][0] == [k]
        assert f"{gemms['forward'][0]}" in " ".join(fig.layout.sliders[0].steps[k].args[1]["xaxis2.ticktext"])
    t256, t257 = (_step_y(fig, cs.index(c), 4)[0] for c in (256, 257))
    assert t257 / t256 > 1.2  # a new column of tiles: the tile-edge step
    t63, t64 = (_step_y(fig, cs.index(c), 4)[0] for c in (63, 64))
    assert t63 / t64 > 1.5  # 63 half-precision channels are not whole 16-byte vectors: the alignment step
    assert fig.layout.sliders[0].active == cs.index(256)


def test_channels_figure_model_only_says_so():
    figure = ic.channels_figure()
    title = _title(figure)
    assert "model only" in title and str(pk.provenance.modelled(H100)) in title
    assert figure.figure.data[3].visible is False


def _channels_frame(kind: str = "gpu", device: str = "H100-SXM") -> pd.DataFrame:
    rows = [{"C": c, "N": 32, "H": 56, "R": 3, "dtype": d, "time_s": 1e-4 * c / 64, "tflops": 100.0 + c,
             "aligned": c % (8 if d == "float16" else 4) == 0} for d in ("float16", "tf32") for c in range(56, 73)]
    return framed(rows, _meta(device, kind))


def test_channels_figure_draws_a_recording_beside_the_model():
    frame = _channels_frame()
    figure = ic.channels_figure(frame)
    fig, cs = figure.figure, ic.channel_states()
    title = _title(figure)
    assert "recorded on H100-SXM" in title and "model of H100-SXM" in title and "model only" not in title
    assert list(fig.data[3].x) == list(range(56, 73)) and fig.data[3].visible
    k = cs.index(64)
    assert _step_y(fig, k, 3)[64 - 56] == pytest.approx(164.0)
    assert _step_y(fig, k, 5) == [pytest.approx(1e-4)]
    assert _step_y(fig, cs.index(256), 5) == [None]  # not measured at 256


def test_channels_figure_refuses_bad_input():
    with pytest.raises(ValueError, match="CPU"):
        ic.channels_figure(_channels_frame(kind="cpu"))
    with pytest.raises(TypeError, match="frame"):
        ic.channels_figure([1, 2])
    with pytest.raises(ValueError, match="lacks the columns"):
        ic.channels_figure(_channels_frame().drop(columns="tflops"))
    with pytest.raises(ValueError, match="spec is A100"):
        ic.channels_figure(_channels_frame(), spec="A100-SXM4")
    with pytest.raises(ValueError, match="at least two"):
        ic.channels_figure(channels=[64])
    with pytest.raises(ValueError, match="channels"):
        ic.channels_figure(channels=[64, 0])
    with pytest.raises(LookupError):
        ic.channels_figure(spec="no such GPU")
    with pytest.warns(UserWarning, match="not in perfkit's table"):
        figure = ic.channels_figure(_channels_frame(device="Mystery GPU 9000"))
    assert "model only" in _title(figure)


def _v100_published() -> pd.DataFrame:
    return vc.published_frames()["deepbench_v100"]


@needs_deepbench
def test_deepbench_figure_sets_published_times_beside_the_model():
    published = _v100_published()
    figure = ic.deepbench_figure(published)
    fig = figure.figure
    layers = ic.deepbench_layers()
    assert len(figure.states) == len(layers) == 19
    for k in (0, 9):
        t = layers[k]
        rows = published[(published[DB_COLUMNS] == list(t)).all(axis=1)]
        args = fig.layout.updatemenus[0].buttons[k].args
        np.testing.assert_allclose(args[0]["y"][0][0], rows["time_s"].min(), rtol=1e-4)
        s = pk.book.convolutions.experiments.db_shape(t)
        gemms = pk.conv_gemms(s["N"], s["C"], s["H"], s["W"], s["K"], s["R"], s["S"], s["stride"], s["padding"])
        for trace, spec in ((1, V100), (2, H100)):
            expected = [pass_s(s, p, "float16", spec) for p in ("forward", "dgrad", "wgrad")]
            np.testing.assert_allclose(args[0]["y"][trace], expected, rtol=1e-4)
        ratio = rows["time_s"].min() / args[0]["y"][1][0]
        assert f"forward {ratio:.2f}×" in args[1]["xaxis.title.text"]
    first, later = (fig.layout.updatemenus[0].buttons[k].args[0]["y"] for k in (0, 9))
    assert first[0][0] / first[1][0] > 3 and 0.5 < later[0][0] / later[1][0] < 2  # a first layer is far off
    assert "published by Baidu DeepBench" in _title(figure)


@needs_deepbench
def test_deepbench_figure_model_only_and_with_ours():
    figure = ic.deepbench_figure()
    assert "model only" in _title(figure) and len(figure.figure.data) == 2
    ours = framed(_v100_published(), _meta(), experiment="conv_deepbench")
    ours[["time_s", "bwd_inputs_time_s", "bwd_params_time_s"]] /= 4
    figure = ic.deepbench_figure(_v100_published(), ours)
    assert len(figure.figure.data) == 4 and "recorded on H100-SXM" in _title(figure)
    y = figure.figure.layout.updatemenus[0].buttons[5].args[0]["y"]
    np.testing.assert_allclose(y[3][0], y[0][0] / 4, rtol=1e-3)


@needs_deepbench
def test_deepbench_figure_refuses_bad_input():
    with pytest.raises(ValueError, match="then_spec"):
        ic.deepbench_figure(_v100_published(), then_spec="H100-SXM")
    cpu = framed(_v100_published(), _meta("x86_64 CPU", "cpu"))
    with pytest.raises(ValueError, match="CPU"):
        ic.deepbench_figure(None, cpu)
    with pytest.raises(ValueError, match="layers"):
        ic.deepbench_figure(layers=[(1, 2, 3)])
    with pytest.raises(TypeError, match="then_spec"):
        ic.deepbench_figure(then_spec=100)


# --- problems ------------------------------------------------------------------------------------------------

IDS = ["conv-1", "conv-2", "conv-3", "conv-4", "conv-5"]
WRONG = {"conv-1": 100352 * 3, "conv-2": 1.0, "conv-3": 129, "conv-4": 5.0, "conv-5": 90.0}


def test_exercise_ids_and_answers():
    assert [ex.id for ex in pk.book.problems.all_exercises("05_convolutions")] == IDS
    assert pk.book.problems.answer("conv-1") == 32 * 56 * 56
    assert pk.book.problems.answer("conv-3") == 257
    assert pk.book.problems.get("conv-1").answer_text() == "100,352 rows"


@pytest.mark.parametrize("exercise_id", IDS)
def test_each_exercise_checks_right_wrong_and_its_slips(exercise_id):
    ex = pk.book.problems.get(exercise_id)
    assert pk.book.problems.check(exercise_id, ex.answer()).status == "right"
    assert pk.book.problems.check(exercise_id, None).status == "unanswered"
    wrong = pk.book.problems.check(exercise_id, WRONG[exercise_id])
    assert wrong.status == "wrong" and (not ex.hint or ex.hint in wrong.message)
    assert ex.mistakes, "every problem here names its typical slip"
    for solve, why in ex.mistakes:
        assert solve() != pytest.approx(ex.answer(), rel=ex.rel_tol or 1e-12)
        verdict = pk.book.problems.check(exercise_id, solve())
        assert verdict.status == "wrong" and why in verdict.message


def test_numeric_answers_near_the_answer_are_close():
    for exercise_id in ("conv-2", "conv-4", "conv-5"):
        assert pk.book.problems.check(exercise_id, pk.book.problems.answer(exercise_id) * 1.05).status == "close"
    assert pk.book.problems.check("conv-3", 258).status == "wrong"  # integers are exact


def test_chapter_problems_match_the_module():
    text = CHAPTER.read_text()
    problems = text[text.index("## Problems"):]
    assert re.findall(r'problems\.check\("([^"]+)", None\)', problems) == IDS
    for exercise_id, block in zip(IDS, re.split(r"\n### Problem \d+", problems)[1:]):
        solution = block[block.index(":::{dropdown} Solution"):]
        assert pk.book.problems.get(exercise_id).answer_text() in solution


# --- verdicts ------------------------------------------------------------------------------------------------


def test_findings_without_frames_are_no_data_yet():
    for frames in ({}, {name: None for name in (*vc.EXPERIMENTS, *vc.PUBLISHED)}):
        table = pk.book.verdict.verdict_table(vc.findings(frames))
        assert len(table) == 11
        assert (table["now"] == "—").all() and (table["then"] == "—").all()
        assert (table["verdict"] == "no data yet").all()


@needs_deepbench
def test_frames_are_recorded_or_published_only():
    frames = vc.frames()
    assert set(frames) == {*vc.EXPERIMENTS, *vc.PUBLISHED}
    for name in vc.EXPERIMENTS:
        meta = frames[name].attrs["meta"] if frames[name] is not None else {}
        assert not meta.get("live") and meta.get("device_kind", "gpu") == "gpu"
    assert frames["deepbench_v100"] is not None and frames["deepbench_p100"] is not None
    effects = vc.effects(frames)
    assert 0.6 < effects["agreement_then"] <= 1  # as §1 prints
    assert 1 < effects["batch_gain_then"] < 2 and effects["generation_then"] > 2  # as §5 and §6 print
    table = pk.book.verdict.verdict_table(vc.findings(frames))
    assert table.loc[0, "then"] != "—"


def _synthetic() -> dict[str, pd.DataFrame]:
    """GPU frames whose effects are known: every rule's 'now' is set by construction."""
    ch = []
    for d, a in (("float16", 8), ("tf32", 4)):
        for c in [*range(56, 73), *range(120, 137)]:
            ch.append({"dtype": d, "C": c, "aligned": c % a == 0, "tflops": 100.0 if c % a == 0 else 50.0})
    first = [{"stem": "7×7/2", "phase": "forward+backward", "channels": c, "input_padding": p, "time_s": t}
             for c, p, t in ((3, "none", 2.0), (4, "once", 1.0), (4, "every step", 1.5), (8, "once", 1.0),
                             (8, "every step", 1.6))]
    layout = [{"layer": layer, "op": "forward", "layout": lay, "cudnn_benchmark": flag,
               "time_s": 2.0 if lay == "NCHW" else 1.0, "first_call_s": 3.0}
              for layer in ("a", "b") for lay in ("NCHW", "NHWC") for flag in (False, True)]
    layout += [{"layer": layer, "op": "to channels_last", "layout": "NCHW", "cudnn_benchmark": False,
                "time_s": 0.1, "first_call_s": 0.1} for layer in ("a", "b")]
    params = [{"sweep": "batch", "swept": b, "tflops": t} for b, t in ((8, 100.0), (16, 101.0), (32, 103.0))]
    passes = [{"phase": p, "time_s": 2.0, "predicted_s": 1.0} for p in ("forward", "dgrad", "wgrad")]
    ours = framed(vc.published_frames()["deepbench_v100"], _meta())
    ours["time_s"] /= 3
    frames = {"conv_channels": ch, "conv_first_layer": first, "conv_layout": layout, "conv_params": params,
              "conv_passes": passes}
    out = {name: framed(rows, _meta()) for name, rows in frames.items()}
    out["conv_deepbench"] = ours
    return {**out, **vc.published_frames()}


@needs_deepbench
def test_findings_on_frames_with_known_effects():
    frames = _synthetic()
    e = vc.effects(frames)
    assert e["agreement_now"] == pytest.approx(0.5) and e["align_fp16"] == pytest.approx(2.0)
    assert e["align_tf32"] == pytest.approx(2.0) and e["tile_gain"] == pytest.approx(1.0)
    assert e["pad4"] == pytest.approx(2.0) and e["four_vs_8"] == pytest.approx(1.0)
    assert e["pad_cost"] == pytest.approx(1.5) and e["nhwc_gain"] == pytest.approx(2.0)
    assert e["bench_gain"] == pytest.approx(1.0) and e["batch_gain_now"] == pytest.approx(1.01)
    assert e["generation_now"] == pytest.approx(3.0)
    table = pk.book.verdict.verdict_table(vc.findings(frames)).set_index("rule")
    expected = {"A convolution is its implicit GEMMs": "weaker", "Channels divisible by 8 (FP16)": "holds",
                "Channels divisible by 4 (TF32)": "holds", "Channels divisible by 64 or 256": "gone",
                "Pad the first layer's 3 channels to 4": "holds", "… and 4 channels suffice": "holds",
                "Pad the input once, not every step": "holds", "Prefer NHWC": "holds",
                "Enable cudnn.benchmark": "gone", "Larger sizes: more efficient, not faster": "gone",
                "A newer GPU runs the same layers faster": "holds"}
    assert table["verdict"].to_dict() == expected
    assert table.loc["Prefer NHWC", "now"] == "2.00" and table.loc["Prefer NHWC", "unit"] == "×"


@needs_deepbench
def test_cpu_frames_are_never_now():
    frames = _synthetic()
    for name in vc.EXPERIMENTS:
        frames[name] = framed(frames[name], _meta("x86_64 CPU", "cpu"))
    table = pk.book.verdict.verdict_table(vc.findings(frames))
    assert (table["now"] == "—").all() and (table["verdict"] == "no data yet").all()


@pytest.mark.filterwarnings("ignore::UserWarning")  # a tiny time budget: few samples per point
def test_findings_on_the_experiments_cpu_runs_are_no_data_yet(short_bench):
    from perfkit.book.convolutions import experiments as conv

    frame = conv.conv_params(device="cpu", progress=False)
    assert frame.attrs["meta"]["device_kind"] == "cpu"
    table = pk.book.verdict.verdict_table(vc.findings({"conv_params": frame}))
    assert table.set_index("rule").loc["Larger sizes: more efficient, not faster", "now"] == "—"


def test_findings_refuse_bad_input():
    with pytest.raises(TypeError, match="mapping"):
        vc.findings([None])
    with pytest.raises(ValueError, match="unknown names"):
        vc.findings({"conv_chanels": None})
    with pytest.raises(TypeError, match="conv_passes"):
        vc.findings({"conv_passes": [1, 2]})


# --- what the chapter shows: its analyses take None (no recording) and give None ------------------------------


def test_analyses_are_none_in_none_out():
    conv = pk.book.convolutions.experiments
    for fn in (conv.for_reader, conv.layout_payback, conv.channel_effects, conv.first_layer_effects,
               conv.layout_effects, conv.param_effects):
        assert fn(None) is None, fn.__name__
    on = pk.then_now.CONV_SHAPE
    assert pk.then_now.speedups(None, _v100_published(), on=on) is None
    assert pk.then_now.speedups(_v100_published(), None, on=on) is None
    assert isinstance(pk.table(conv.for_reader(None), "no recording"), pk.display.Note)


def test_for_reader_names_columns_with_units():
    frame = pd.DataFrame({"layer": ["a", "b"], "time_s": [1e-3, 2e-6], "tflops": [10.0, 20.0],
                          "convert_share": [0.5, 0.25], "predicted_s": [1.0, 2.0]}, index=[7, 9])
    out = pk.book.convolutions.experiments.for_reader(frame, seconds="µs")
    assert list(out.columns) == ["layer", "time (µs)", "TFLOP/s", "to NHWC ÷ conv (%)", "model (µs)"]
    assert list(out.index) == [0, 1]  # the index is dropped
    np.testing.assert_allclose(out["time (µs)"], [1000.0, 2.0])
    np.testing.assert_allclose(out["to NHWC ÷ conv (%)"], [50.0, 25.0])
    np.testing.assert_allclose(frame["time_s"], [1e-3, 2e-6])  # the frame itself is unchanged
    assert list(pk.book.convolutions.experiments.for_reader(frame, ["tflops", "layer"]).columns) == ["TFLOP/s", "layer"]
    kept = pk.book.convolutions.experiments.for_reader(frame, ["time_s", "predicted_s"], seconds={"time_s": "ms"})
    assert list(kept.columns) == ["time (ms)", "model (s)"]  # a column not named stays in seconds
    with pytest.raises(ValueError, match="lacks the columns"):
        pk.book.convolutions.experiments.for_reader(frame, ["speedup"])
    with pytest.raises(ValueError, match="not shown"):
        pk.book.convolutions.experiments.for_reader(frame, ["layer"], seconds={"time_s": "µs"})
    with pytest.raises(ValueError, match="unit"):
        pk.book.convolutions.experiments.for_reader(frame, seconds="minutes")
    with pytest.raises(TypeError, match="DataFrame"):
        pk.book.convolutions.experiments.for_reader([1, 2])


def test_layout_payback_counts_the_calls_that_repay_autotuning():
    rows = [{"layer": "a", "op": "forward", "layout": lay, "cudnn_benchmark": flag,
             "time_s": {(False, "NHWC"): 2.0, (True, "NHWC"): 1.5}.get((flag, lay), 3.0),
             "first_call_s": 10.0 if flag else 4.0}
            for lay in ("NCHW", "NHWC") for flag in (False, True)]
    rows.append({"layer": "a", "op": "to channels_last", "layout": "NCHW", "cudnn_benchmark": False,
                 "time_s": 0.1, "first_call_s": 0.1})
    out = pk.book.convolutions.experiments.layout_payback(pd.DataFrame(rows))
    assert out.loc[0, "autotune_s"] == pytest.approx(6.0)
    assert out.loc[0, "repay_calls"] == pytest.approx(12.0)  # 6 s ÷ (2.0 − 1.5) s per call
    cpu = pd.DataFrame([r for r in rows if not r["cudnn_benchmark"]])
    assert np.isnan(pk.book.convolutions.experiments.layout_payback(cpu).loc[0, "repay_calls"])  # no flag to compare


@needs_deepbench
def test_deepbench_speedups_per_conv_shape():
    published = _v100_published()
    ours = published.copy()
    ours["time_s"] /= 2
    same = pk.then_now.speedups(ours, published, on=pk.then_now.CONV_SHAPE)
    assert len(same) and np.allclose(same["speedup"], 2.0)


def test_the_open_deepbench_menu_fits_in_its_figure():
    """Every entry of the open menu lies inside the figure (it opens just above the plot area)."""
    for figure in (ic.deepbench_figure(), ic.deepbench_figure(_v100_published())):
        fig = figure.figure
        entries = len(fig.layout.updatemenus[0].buttons)
        assert entries == 19
        assert fig.layout.height >= fig.layout.margin.t + ic.MENU_ENTRY_PX * entries
        assert fig.layout.updatemenus[0].direction == "down"
    assert ic.menu_height(100, 3) == 540  # few entries: the usual height
    assert ic.menu_height(100, 30) == 100 + 30 * ic.MENU_ENTRY_PX + 20
    with pytest.raises(ValueError):
        ic.menu_height(100, 0)


def test_titles_hang_from_the_top_above_the_plot():
    """A title of several source lines hangs from the figure's top edge, and the top margin holds it
    and what sits under it (the C = K annotation, the menu's button): no source line on a tick label."""
    figures = [ic.channels_figure(), ic.channels_figure(_channels_frame()), ic.deepbench_figure()]
    for figure in figures:
        layout = figure.figure.layout
        assert (layout.title.yref, layout.title.y, layout.title.yanchor) == ("container", 1.0, "top")
        lines = layout.title.text.count("<br>") + 1
        assert layout.margin.t >= ic.title_px(layout.title.to_plotly_json()) + 30
        assert ic.title_px(layout.title.to_plotly_json()) >= 20 * lines
    assert figures[1].figure.layout.margin.b > figures[0].figure.layout.margin.b  # one more source line, in the footnote
