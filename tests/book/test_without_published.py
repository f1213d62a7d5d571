"""Chapters 04 (recurrent) and 05 (convolutions) without the published-data folder: a laptop clone, or
Colab before ``python -m perfkit published fetch``. Every function the chapters call on DeepBench's
tables takes their absence: numbers become notes saying how to get the data, figures draw the GEMM
model's prediction (labelled as the model), and nothing raises.

Each test points ``$PERFKIT_PUBLISHED`` at an empty folder; no chapter is executed here (the book build
does that), only the calls its cells make.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book import problems as exercises
from perfkit import book  # noqa: E402
from perfkit.book.recurrent import problems as rnn_exercises  # noqa: E402
from perfkit.book.convolutions import experiments as conv, analysis as conv_analysis
from perfkit.book.recurrent import experiments as rnn, analysis as rnn_analysis  # noqa: E402
from perfkit.book.convolutions import interactive as iconv  # noqa: E402
from perfkit.book.recurrent import interactive as irnn  # noqa: E402
from perfkit.book.figures import BookFigure  # noqa: E402
from perfkit.published_data import HOW_TO_GET  # noqa: E402
from perfkit.book.convolutions import verdict as vconv  # noqa: E402
from perfkit.book.recurrent import verdict as vrnn  # noqa: E402
from testkit import H100, H100_NAME, V100, framed, heading_text

MODEL = ("V100-SXM2", "H100-SXM")


def _rnn_model():
    return {gpu: rnn_analysis.predicted_layers(pk.device_spec(gpu)) for gpu in MODEL}
MISSING = pk.provenance.missing("no GPU here and no recording yet")


@pytest.fixture(autouse=True)
def no_published(tmp_path, monkeypatch):
    """An empty published-data folder: DeepBench's tables are not here."""
    monkeypatch.setenv(pk.published_data.ENV, str(tmp_path))
    assert not any(pk.published_data.has_published(f"deepbench_{k}") for k in ("gemm", "conv", "rnn"))


def _says_how_to_get(text: str) -> bool:
    return HOW_TO_GET in " ".join(text.split())


def _heading(fig) -> str:
    title = heading_text(fig)
    return " ".join(title.split())


# --------------------------------------------------------------------------------------------
# What every chapter cell relies on


def test_counterparts_are_empty_and_lookups_give_none():
    for experiment in ("gemm_sizes", "gemm_small_n", "rnn_cudnn", "conv_deepbench"):
        assert pk.provenance.published_counterparts(experiment) == {}
    assert pk.provenance.published_counterparts("conv_deepbench", dtype="float32").get("V100-SXM2, 2019") is None
    with pytest.raises(pk.published_data.PublishedDataMissing, match="PERFKIT_PUBLISHED"):
        pk.published("deepbench_gemm", "V100-SXM2")  # why the chapters no longer call it directly


def test_a_printed_number_becomes_a_note_saying_how_to_get_the_data(capsys):
    pk.published_data.printed("V100, 2019: N = 7000 ran {:.1f}× the TFLOP/s of N = 16", None)
    out = capsys.readouterr().out
    assert out.startswith("Published data missing") and _says_how_to_get(out) and "7000" not in out
    pk.published_data.printed("{:.2f}× with C ≥ 8, {:.2f}× with C < 8", 3.0, math.nan)  # NaN is missing too
    assert _says_how_to_get(capsys.readouterr().out)
    pk.published_data.printed("ran {:.1f}×, {}", 13.94, "yes")  # with the data: exactly what print says
    assert capsys.readouterr().out == "ran 13.9×, yes\n"
    note = pk.table(None, pk.published_data.PUBLISHED_ABSENT, caption="DeepBench's V100")
    assert isinstance(note, pk.display.Note) and _says_how_to_get(note.text)
    assert _says_how_to_get(pk.published_data.published_absent("the model").text)


def test_printed_refuses_bad_input():
    with pytest.raises(TypeError, match="template"):
        pk.published_data.printed(42, 1.0)
    with pytest.raises(TypeError, match="missing"):
        pk.published_data.printed("{}", None, missing="not a note")


# --------------------------------------------------------------------------------------------
# Chapter 04: recurrent layers


def test_rnn_numbers_are_none_and_their_tables_notes():
    v100_gemm = pk.provenance.published_counterparts("gemm_sizes").get("V100-SXM2, 2019")
    assert rnn_analysis.throughput_ratio(v100_gemm, "N", 7000, 16, on=["M", "K", "layout"], M=2560,
                                         K=2560, dtype="float16", layout="NN") is None
    assert rnn_analysis.layout_table(v100_gemm, size=2560, max_batch=256) is None
    v100 = pk.provenance.published_counterparts("rnn_cudnn", dtype="float16").get("V100-SXM2, 2019")
    assert rnn_analysis.layer_count(v100) is None
    assert rnn_analysis.throughput_ratio(v100, "batch", 128, 16) is None
    assert rnn_analysis.layer_speedups(rnn_analysis.deepbench_comparable(None), v100) is None
    assert isinstance(pk.table(rnn_analysis.layout_table(v100_gemm), pk.published_data.PUBLISHED_ABSENT), pk.display.Note)


def test_rnn_then_now_figures_draw_the_model_and_say_how_to_get_the_data(capsys):
    fig = book.recurrent.plot_rnn_then_now({"ours": None, **pk.provenance.published_counterparts("rnn_cudnn")}, or_model=_rnn_model())
    assert isinstance(fig, BookFigure)
    heading = _heading(fig)
    assert "GEMM model" in heading and str(pk.provenance.modelled(V100)) in heading
    assert str(pk.provenance.modelled(H100)) in heading and "published" not in heading
    assert _says_how_to_get(capsys.readouterr().out)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["model, V100-SXM2", "model, H100-SXM"]

    fig = book.recurrent.plot_layer_minibatch({"ours": None}, or_model=_rnn_model())
    assert isinstance(fig, BookFigure) and [ax.get_title() for ax in fig.axes[:2]] == list(labels)
    assert "GEMM model" in _heading(fig) and _says_how_to_get(capsys.readouterr().out)
    # without or_model the figures keep their contract: a note saying why there is nothing to draw
    assert isinstance(book.recurrent.plot_rnn_then_now({"ours": None}, instead="the model"), pk.display.Note)


def test_the_model_layers_are_deepbenchs_shapes_without_the_input_gemm():
    frame = rnn_analysis.predicted_layers(V100)
    assert len(frame) == len(rnn.DEEPBENCH_LAYERS) and (frame["time_s"] > 0).all()
    row = frame.iloc[0]
    M, N, K = pk.rnn_gemms(row["cell"], row["hidden"], row["hidden"], row["batch"], 1)["recurrent"]
    assert row["time_s"] == pytest.approx(row["timesteps"] * pk.predict_gemm_time(M, N, K, "float16", V100))
    assert (rnn_analysis.predicted_layers(H100)["time_s"] < frame["time_s"]).all()  # the H100 is faster
    with pytest.raises(TypeError, match="spec"):
        rnn_analysis.predicted_layers("V100-SXM2")


def test_the_model_stands_in_only_where_nothing_else_is_drawn(capsys):
    ours = framed({"cell": "rnn", "hidden": 1024, "batch": [16, 32], "timesteps": 10, "dtype": "float16",
                   "time_s": [1e-3, 1.5e-3]}, device_name=H100_NAME, device_kind="gpu",
                  recorded_at="2026-01-01T00:00:00+00:00", complete=True)
    fig = book.recurrent.plot_rnn_then_now({"ours": ours}, or_model=_rnn_model())
    assert "model" not in _heading(fig) and capsys.readouterr().out == ""
    with pytest.raises(TypeError, match="or_model must map GPU names"):
        book.recurrent.plot_rnn_then_now({"ours": None}, or_model=MODEL)


def test_rnn_interactive_figure_and_small_sweeps_are_the_model_alone():
    assert book.recurrent.plot_rnn_batch(None, MISSING, published=pk.provenance.published_counterparts("gemm_small_n"),
                                instead="the model").instead == "the model"
    fig = irnn.recurrent_step(None, MISSING, gemms=pk.provenance.published_counterparts("gemm_sizes"),
                              layers=pk.provenance.published_counterparts("rnn_cudnn"), hidden=[1024, 2560])
    names = [t.name for t in fig.figure.data]
    assert "H100-SXM (GEMM model)" in names and not any("2019" in str(n) for n in names)
    registered = irnn.FIGURES["recurrent-step"]()
    assert "model of H100-SXM" in heading_text(registered)
    assert "published by" not in heading_text(registered)


def test_rnn_verdicts_and_problems_without_the_published_data():
    frames = vrnn.frames()
    assert frames["published_gemm"] is None and frames["published_rnn"] is None
    table = pk.book.verdict.verdict_table(vrnn.findings(frames))
    assert len(table) == 11 and table.loc[0, "then"] == "—"
    for ex in exercises.all_exercises("04_recurrent"):
        assert exercises.check(ex.id, ex.answer()).status == "right"
    stated = pk.gemm_flops(3 * 2816, 32, 2816) * 1500 / rnn_exercises.GRU_STATED_S / 1e12  # the question's 0.18 s
    assert exercises.answer("rnn-3") == pytest.approx(stated)


# --------------------------------------------------------------------------------------------
# Chapter 05: convolutions


def test_conv_numbers_are_none_and_their_tables_notes():
    then = pk.provenance.published_counterparts("conv_deepbench")
    v100_then = conv.predicted_published(then.get("V100-SXM2, 2019"), V100)
    assert v100_then is None and conv.model_agreement(v100_then) is None
    assert conv_analysis.share_within(v100_then, 0.8, 1.25) is None
    worst = conv_analysis.furthest_off(v100_then, 5)
    assert worst is None and isinstance(pk.table(conv.for_reader(worst, ["W", "ratio"]), "no layers"), pk.display.Note)
    fp32 = pk.provenance.published_counterparts("conv_deepbench", dtype="float32")
    same = pk.then_now.speedups(then.get("V100-SXM2, 2019"), fp32.get("V100-SXM2, 2019"),
                                on=[c for c in pk.then_now.CONV_SHAPE if c != "dtype"])
    assert conv_analysis.speedup_by_channels(same, 8) == {True: None, False: None}
    assert conv.throughput_gain(then.get("V100-SXM2, 2019"), 8, 16) is None
    assert conv_analysis.median_speedup(then.get("V100-SXM2, 2019"), then.get("P100-PCIe, 2018")) is None


def test_conv_then_now_figure_draws_the_model_and_says_how_to_get_the_data(capsys):
    model = {gpu: conv_analysis.predicted_deepbench(pk.device_spec(gpu)) for gpu in MODEL}
    fig = book.convolutions.plot_conv_then_now({"ours": None, **pk.provenance.published_counterparts("conv_deepbench")}, only="ours",
                                   or_model=model)
    assert isinstance(fig, BookFigure)
    heading = _heading(fig)
    assert "GEMM model" in heading and str(pk.provenance.modelled(V100)) in heading
    out = capsys.readouterr().out
    assert _says_how_to_get(out) and "Every shape drawn" not in out
    assert len(fig.axes[2].get_xticks()) == len(conv.DEEPBENCH_CONVS)
    assert isinstance(book.convolutions.plot_conv_then_now({"ours": None}, instead="x"), pk.display.Note)
    with pytest.raises(TypeError, match="or_model must map GPU names to the model's frames"):
        book.convolutions.plot_conv_then_now({"ours": None}, or_model=MODEL)


def test_the_model_convolutions_are_each_pass_of_deepbenchs_shapes():
    frame = conv_analysis.predicted_deepbench(V100)
    assert len(frame) == len(conv.DEEPBENCH_CONVS) and (frame[["time_s", "bwd_params_time_s"]] > 0).all().all()
    s = conv_analysis.db_shape(conv.DEEPBENCH_CONVS[0])
    M, N, K = conv_analysis.conv_gemm(s, "dgrad")
    assert frame.loc[0, "bwd_inputs_time_s"] == pytest.approx(pk.predict_gemm_time(M, N, K, "float16", V100))
    assert tuple(frame.loc[0, conv_analysis.DB_COLUMNS]) == conv.DEEPBENCH_CONVS[0]


def test_conv_interactive_figures_are_the_model_alone():
    figure = iconv.deepbench_figure(pk.provenance.published_counterparts("conv_deepbench").get("V100-SXM2, 2019"), None)
    assert "model only" in heading_text(figure) and len(figure.figure.data) == 2
    assert "model only" in heading_text(iconv.FIGURES["deepbench"]())
    assert "model only" in heading_text(iconv.FIGURES["channels"]())


def test_conv_verdicts_and_problems_without_the_published_data():
    published = vconv.published_frames()
    assert published == {"deepbench_v100": None, "deepbench_p100": None}
    table = pk.book.verdict.verdict_table(vconv.findings({**dict.fromkeys(vconv.EXPERIMENTS), **published}))
    assert len(table) == 11 and table.loc[0, "then"] == "—"
    for ex in exercises.all_exercises("05_convolutions"):
        assert exercises.check(ex.id, ex.answer()).status == "right"
