"""Appendix 91 (how good is the model): its tables, its family menu and its problems."""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import model_accuracy
from perfkit.book.check_your_model.families import family_rows, family_table
from perfkit.book.check_your_model.report import TARGETS, Report, validation_report
from perfkit.book.interactive import MAX_HTML_BYTES, figure_json, html_bytes
from perfkit.book.model_accuracy import interactive, problems as acc_problems
from perfkit.book.model_accuracy.tables import (family_errors, model_steps, peer_steps, published_gemms,
                                                split_table, targets_table)

from testkit import DATA, REPO, heading_text

SOURCE = "recorded on NVIDIA H200 on 2026-11-26"


def _rows() -> pd.DataFrame:
    """Microbenchmark rows of three families, fit and held out, with known ratios."""
    rows = []
    for family, recording, split, ratios in (
            ("GEMM", "gemm_alignment", "fit", [1.0, 1.1, 0.9]),
            ("GEMM", "gemm_sizes", "held out", [1.2, 0.8, 1.0, 1.4]),
            ("recurrent layer", "rnn_cudnn", "fit", [1.05, 0.95]),
            ("decoding", "decode_steps", "held out", [1.3, 1.2, 1.25])):
        for i, r in enumerate(ratios):
            predicted = 1e-4 * (i + 1)
            rows.append({"family": family, "recording": recording, "split": split,
                         "time_s": predicted * r, "predicted_s": predicted, "ratio": r})
    rows.append({"family": "recurrent layer", "recording": "rnn_cudnn", "split": "fit", "time_s": 1e-3,
                 "predicted_s": math.nan, "ratio": math.nan})  # a row no model covers
    return pd.DataFrame(rows)


@pytest.fixture
def report():
    rows = _rows()
    steps = pd.DataFrame({"model": ["gpt2_small", "lstm_lm"], "measured_step_s": [0.0255, 0.0033],
                          "predicted_step_s": [0.0229, 0.0019], "ratio": [1.11, 1.74], "n": [12, 4],
                          "median_abs": [0.16, 0.53], "p90_abs": [4.1, 1.85], "median_signed": [0.1, 0.5],
                          "left_out": [1, 0]})
    ops = pd.DataFrame({"model": ["gpt2_small"] * 2, "scored": [True, True], "ratio": [1.1, 0.9]})
    fixes = pd.DataFrame({"model": ["gpt2_small", "lstm_lm", "lstm_lm"], "rule": ["alignment", "small_batch",
                                                                                 "rnn_sizes"],
                          "layer": ["lm_head", "lstm", "lstm"], "measured_saving_s": [13e-3, 4e-3, 5e-4],
                          "predicted_saving_s": [10e-3, 1.5e-3, -1e-5]})
    return Report("nvidia-h200", pk.device_spec("H200"), family_table(None, rows=rows), source=SOURCE,
                  rows=rows, steps=steps, ops=ops, fixes=fixes)


# ------------------------------------------------------------------------------ the tables
def test_split_table_lists_each_familys_fitted_and_held_out_recordings(report):
    t = split_table(report).set_index("family")
    assert list(t.index) == ["GEMM", "recurrent", "decoding", "real models"]  # the page's order, short names
    assert t.loc["GEMM", "fitted on"] == "gemm_alignment" and t.loc["GEMM", "held out"] == "gemm_sizes"
    assert t.loc["decoding", "fitted on"] == "–" and t.loc["recurrent", "held out"] == "–"
    assert t.loc["real models", "held out"] == "advisor_layers, advisor_fixes"
    assert all(len(f) <= 14 for f in t.index)  # a short text column: it never wraps


def test_family_errors_pool_each_splits_rows(report):
    t = family_errors(report).set_index(["family", "split"])
    assert list(t.index) == [("GEMM", "fit"), ("GEMM", "held out"), ("recurrent", "fit"), ("decoding", "held out")]
    held = t.loc[("GEMM", "held out")]
    assert held["n"] == 4 and held["median"] == pytest.approx(0.2) and held["signed"] == pytest.approx(0.1)
    assert t.loc[("recurrent", "fit"), "n"] == 2  # the unpredicted row is left out
    assert t.loc[("decoding", "held out"), "signed"] == pytest.approx(0.25)
    assert list(t.columns) == ["n", "median", "p90", "signed"]


def test_model_steps_name_the_models_and_keep_seconds(report):
    t = model_steps(report)
    assert list(t["model"]) == ["GPT-2 small", "LSTM LM"]
    assert list(t.columns) == ["model", "ops", "median", "p90", "measured_s", "predicted_s", "ratio", "measured as"]
    assert t["measured_s"].iloc[0] == pytest.approx(0.0255)
    assert set(t["measured as"]) == {"ops timed alone, summed"}


def test_model_steps_take_the_whole_step_where_one_was_recorded(report):
    report.whole_steps = pd.DataFrame({"model": ["lstm_lm"], "measured_step_s": [0.0021], "predicted_step_s": [0.002],
                                       "ratio": [1.05]})
    t = model_steps(report).set_index("model")
    assert t.loc["LSTM LM", "measured as"] == "whole step" and t.loc["LSTM LM", "ratio"] == pytest.approx(1.05)
    assert t.loc["LSTM LM", "measured_s"] == pytest.approx(0.0021) and t.loc["LSTM LM", "ops"] == 4
    assert t.loc["GPT-2 small", "measured as"] == "ops timed alone, summed"
    assert t.loc["GPT-2 small", "ratio"] == pytest.approx(1.11)


def test_targets_table_says_met_or_not(report):
    t = targets_table(report)
    assert list(t["target"]) == [what for what, _, _ in TARGETS]
    assert set(t["verdict"]) <= {"met", "not met", "not measured"}
    steps = t.set_index("target")["verdict"]
    assert steps["step measured ÷ predicted: gpt2_small"] == "not met"
    assert steps["step measured ÷ predicted: llama_7b"] == "not measured"
    assert steps["real-model ops: median |measured/predicted − 1|"] == "met"
    assert steps["padded vocabulary priced ÷ measured, calibrated H200"] == "met"  # 10 / 13
    assert steps["padded vocabulary priced ÷ measured, uncalibrated H100-SXM"] == "not measured"
    assert t.set_index("target").loc["padded vocabulary priced ÷ measured, calibrated H200", "value"] == "0.769"


def test_fix_numbers(report):
    fx = model_accuracy.fix_numbers(report)
    assert fx["n"] == 3 and fx["judged"] == 3 and fx["sign_agreement"] == pytest.approx(2 / 3)
    assert fx["vocab"] == pytest.approx(10 / 13) and math.isnan(fx["vocab_h100"])


def test_published_gemms_keep_the_published_rows_with_model_and_roofline():
    table = pd.DataFrame([
        {"data": "published by Baidu DeepBench, measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019)",
         "device": "V100-SXM2", "dtype": "float16", "half": h, "predictor": p, "n": 80,
         "median_abs": m, "p90_abs": 2 * m, "optimistic": 0.5}
        for h in ("fit", "held out") for p, m in (("model", 0.1), ("roofline", 0.3))] + [
        {"data": "gemm_sizes, recorded on NVIDIA H200 on 2026-11-26", "device": "H200", "dtype": "float16",
         "half": "not fitted", "predictor": "model", "n": 24, "median_abs": 0.07, "p90_abs": 0.1,
         "optimistic": 0.5}])
    t = published_gemms(table)
    assert list(t["table"]) == ["DeepBench V100", "DeepBench V100"] and list(t["half"]) == ["fit", "held out"]
    assert list(t.columns) == ["table", "dtype", "half", "n", "median", "p90", "roofline"]
    assert t["median"].iloc[0] == 0.1 and t["roofline"].iloc[0] == 0.3 and t["p90"].iloc[0] == 0.2
    assert published_gemms(table.iloc[-1:]) is None  # our recordings only: nothing published


def test_peer_steps_one_row_per_model_ours_first():
    peers = pd.DataFrame({"model": ["gpt2_small", "gpt2_small", "gpt2_small", "gpt2_small"],
                          "predictor": ["perfkit (this version, H200)", "mlsysim 0.3.0",
                                        "torch RuntimeEstimator (roofline)",
                                        "torch RuntimeEstimator (roofline, whole model)"],
                          "measured ÷ predicted": [1.1, 2.0, 4.2, 3.8], "note": ["", "", "", ""]})
    t = peer_steps(peers)
    assert list(t.columns) == ["model", "perfkit", "mlsysim 0.3.0", "RuntimeEstimator, ops",
                               "RuntimeEstimator, model"]
    assert t.iloc[0].tolist() == ["GPT-2 small", 1.1, 2.0, 4.2, 3.8]


def test_no_report_gives_no_table():
    for f in (split_table, family_errors, model_steps, targets_table, model_accuracy.fix_numbers):
        assert f(None) is None
    assert published_gemms(None) is None and peer_steps(None) is None
    assert isinstance(pk.table(split_table(None), caption="x"), pk.display.Note)


def test_family_rows_are_what_the_family_table_summarises(tmp_path):
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    for name in ("activation_sizes", "pool_sizes", "device_profile"):
        for ext in ((".csv", ".json") if name != "device_profile" else (".json",)):
            shutil.copy(DATA / "nvidia-h200" / f"{name}{ext}", folder)
    (report,) = validation_report(tmp_path, models=False)
    rows = report.rows
    assert list(rows.columns) == ["family", "recording", "split", "time_s", "predicted_s", "ratio"]
    assert set(rows["recording"]) == {"activation_sizes", "pool_sizes"} and set(rows["split"]) == {"fit"}
    assert np.allclose(rows["ratio"], rows["time_s"] / rows["predicted_s"])
    direct = family_table({n: pk.data.load(n, root=tmp_path) for n in ("activation_sizes", "pool_sizes")},
                          report.spec)
    pd.testing.assert_frame_equal(direct, report.families)
    assert family_rows({"not_a_family": rows}, report.spec).empty


# ------------------------------------------------------------------------------ the family menu
def test_family_menu_shows_each_family_fit_and_held_out_apart(report):
    fig = interactive.family_menu(report)
    assert fig.states == ["GEMM", "recurrent", "decoding"] and fig.name == "accuracy-family-menu"
    assert html_bytes(fig) < MAX_HTML_BYTES and "recorded on" in heading_text(fig)
    buttons = figure_json(fig)["layout"]["updatemenus"][0]["buttons"]
    gemm = buttons[0]["args"][0]
    assert gemm["x"][0] == pytest.approx([1e-4, 2e-4, 3e-4])  # fitted on: gemm_alignment
    assert gemm["y"][1] == pytest.approx([1.2e-4, 1.6e-4, 3e-4, 5.6e-4])  # held out: gemm_sizes
    assert gemm["text"][1] == ["gemm_sizes"] * 4
    assert buttons[2]["args"][0]["x"][0] == []  # decoding: nothing fitted
    assert "held out: 4 rows, median |error| 20" in buttons[0]["args"][1]["annotations[0].text"]
    assert len({str(b["args"]) for b in buttons}) == 3


def test_family_menu_opens_where_asked_and_refuses_bad_input(report):
    assert interactive.family_menu(report, active="recurrent").figure.layout.updatemenus[0].active == 1
    assert interactive.family_menu(report, active="recurrent layer").figure.layout.updatemenus[0].active == 1
    with pytest.raises(LookupError, match="active"):
        interactive.family_menu(report, active="BERT")
    with pytest.raises(ValueError, match="active"):
        interactive.family_menu(report, active=9)
    one = Report("x", report.spec, report.families, rows=report.rows[report.rows["family"] == "GEMM"])
    with pytest.raises(ValueError, match="two families"):
        interactive.family_menu(one)
    with pytest.raises(LookupError, match="no recorded microbenchmark"):
        interactive.family_menu(Report("x", report.spec, pd.DataFrame(), rows=None))


# ------------------------------------------------------------------------------ the problems
def test_the_appendixs_problems_in_order():
    assert [ex.id for ex in acc_problems.EXERCISES] == ["acc-1", "acc-2"]
    for ex in acc_problems.EXERCISES:
        assert pk.book.problems.check(ex.id, ex.answer()).status == "right"
        assert pk.book.problems.check(ex.id, None).status == "unanswered"


def test_problem_1_is_the_roofline_over_the_model_on_the_held_out_half():
    from perfkit.book.model_accuracy.problems import _xla_bf16

    held = _xla_bf16("held out", "roofline") / _xla_bf16("held out", "model")
    assert pk.book.problems.answer("acc-1") == pytest.approx(held)
    fit = _xla_bf16("fit", "roofline") / _xla_bf16("fit", "model")
    slip = pk.book.problems.check("acc-1", fit)
    assert slip.status == "wrong" and "fit half" in slip.message
    # the numbers the solution states
    text = (REPO / "chapters" / "91_model_accuracy.md").read_text(encoding="utf-8")
    solution = text[text.find("### Problem 1"):text.find("### Problem 2")]
    stated = [f"{100 * _xla_bf16('held out', 'roofline'):.1f} %", f"{100 * _xla_bf16('held out', 'model'):.1f} %",
              f"({fit:.1f})", f"{held:.1f} ×"]
    for number in stated:
        assert number in solution, number


def test_problem_2_reads_the_sign_of_the_error():
    from perfkit.book.model_accuracy.problems import _signed_error

    signed = _signed_error("gemm_tile_quantization")
    assert 0.2 < signed < 0.3  # "about +25 %"
    assert pk.book.problems.answer("acc-2") == "too fast"
    slip = pk.book.problems.check("acc-2", "too slow")
    assert slip.status == "wrong" and "took longer" in slip.message


def test_the_page_calls_what_it_shows():
    text = (REPO / "chapters" / "91_model_accuracy.md").read_text(encoding="utf-8")
    assert text.count("pk.device_card(") == 1 and "instead=" not in text
    assert "model_accuracy.interactive.family_menu(" in text and "plot_validation(" in text
    assert re.search(r"alt: \S", text)
    tables = re.findall(r"pk\.table\((.*?)\)\n```", text, flags=re.S)
    assert tables and all("caption=" in t for t in tables)


@pytest.mark.skipif(not (pk.published_data.has_published("aiter_gemm") and pk.published_data.has_published(
    "mamf_newest")), reason=pk.published_data.HOW_TO_GET)
def test_newest_gemms_pool_aiter_by_device_and_mamf_by_vendor():
    frames = pk.validation.validation_frames()
    t = model_accuracy.newest_gemms(frames).set_index(["table", "dtype", "half"])
    assert {"AITER MI355X", "AITER MI300X", "MAMF Blackwell", "MAMF AMD"} <= set(t.index.get_level_values(0))
    assert set(t.xs("AITER MI355X").index) == {("bfloat16", "fit"), ("bfloat16", "held out"), ("8-bit", "not fitted")}
    assert t.xs("MAMF Blackwell").loc[("float8", "seen"), "n"] == 3  # fp8 fraction chosen after these rows
    assert (t["median"] < t["roofline"]).sum() >= len(t) - 1 and (t["p90"] >= t["median"]).all()
    # the old table keeps the NVIDIA publishers only
    assert set(published_gemms(pk.validation.validation_table(frames))["table"].str.split().str[0]) == \
        {"DeepBench", "OpenXLA"}
    assert model_accuracy.newest_gemms({}) is None
