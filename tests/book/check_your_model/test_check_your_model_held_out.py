"""The advisor scored on the real models' recordings (the score set): ops, steps, fixes, and the report."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from perfkit.book.check_your_model.held_out import (MIN_SAVING_S, error_stats, fix_summary, score_fixes, score_ops,
                                                    step_ratios)
from perfkit.calibration import calibrated
from perfkit.data import load

from testkit import DATA, H100, framed


def test_error_stats_are_two_sided_and_signed():
    s = error_stats(pd.Series([1.0, 2.0, 0.5, float("nan")]))
    assert s["n"] == 3 and s["median_abs"] == pytest.approx(0.5) and s["median_signed"] == pytest.approx(0.0)


def test_fix_summary_judges_signs_beyond_the_noise_and_ranks():
    f = pd.DataFrame({"measured_saving_s": [1e-3, 2e-3, -5e-4, 1e-6, 3e-3],
                      "predicted_saving_s": [2e-3, 1e-3, -1e-4, -1e-3, float("nan")]})
    s = fix_summary(f)
    assert s["judged"] == 4  # the 1 µs saving is below MIN_SAVING_S
    assert s["sign_agreement"] == pytest.approx(3 / 4)  # an unpriced fix counts as wrong
    assert s["spearman"] == pytest.approx(0.6)  # ranks of the four priced ones: [3,4,1,2] against [4,3,2,1]
    assert MIN_SAVING_S == 10e-6


def test_bad_frames_are_refused_naming_what_is_missing():
    with pytest.raises(TypeError, match="advisor_layers DataFrame"):
        score_ops([1, 2], H100)
    with pytest.raises(ValueError, match="layers lacks the advisor_layers columns"):
        score_ops(pd.DataFrame({"model": ["gpt2_small"]}), H100)
    with pytest.raises(ValueError, match="fixes lacks the advisor_fixes columns"):
        score_fixes(pd.DataFrame({"model": ["gpt2_small"]}), H100)


@pytest.fixture(scope="module")
def scored():
    spec = calibrated("H200")
    advices: dict = {}
    layers, fixes = load("advisor_layers", root=DATA), load("advisor_fixes", root=DATA)
    return score_ops(layers, spec, advices), score_fixes(fixes, spec, advices), layers, fixes


@pytest.mark.slow  # advises four full-size models (seconds)
def test_every_recorded_op_and_fix_is_matched_and_the_defects_are_left_out_with_a_reason(scored):
    ops, fixes, layers, recorded_fixes = scored
    assert len(ops) == len(layers) and ops["predicted_s"].notna().all()
    left = ops[~ops["scored"]]
    assert sorted(left["op"]) == ["mul", "scaled_dot_product_attention", "scaled_dot_product_attention"]
    assert left["why"].str.contains("re-record").all()
    assert len(fixes) == len(recorded_fixes) and fixes["predicted_saving_s"].notna().all()
    steps = step_ratios(ops).set_index("model")
    assert set(steps.index) == {"gpt2_small", "resnet50", "lstm_lm", "llama_7b"}
    mine = ops[ops["scored"] & (ops["model"] == "resnet50")]
    assert steps.loc["resnet50", "measured_step_s"] == pytest.approx((mine["time_s"] * mine["layers"]).sum())
    assert steps["ratio"].between(0.5, 2).all()


@pytest.mark.slow
def test_a_rerecording_with_a_fixed_perfkit_has_no_defects(scored):
    _, _, layers, _ = scored
    fresh = layers.copy()
    fresh.attrs["meta"] = {**layers.attrs["meta"], "perfkit_commit": "0" * 40}
    ops = score_ops(fresh[fresh["model"] == "lstm_lm"], calibrated("H200"))
    assert ops["scored"].all()


@pytest.mark.slow
def test_the_report_scores_every_family_and_prints_every_target(capsys):
    from perfkit.book.check_your_model.report import TARGETS, print_report, targets, validation_report

    (report,) = validation_report(DATA)
    assert report.device == "nvidia-h200" and not report.problems
    assert {"GEMM", "memory-bound", "convolution", "attention", "recurrent layer", "decoding"} <= \
        set(report.families["family"])
    fit = report.families.set_index("recording")["split"]
    assert fit["batchnorm_sizes"].startswith("fit") and fit["gemm_sizes"] == "held out"
    t = targets(report)
    assert len(t) == len(TARGETS) and t["value"].notna().all()
    print_report([report])
    out = capsys.readouterr().out
    assert "Fit on" in out and "advisor_layers, advisor_fixes: nothing (the score set)" in out
    for what, _, _ in TARGETS:
        assert what in out


def test_a_recording_without_metadata_is_named_and_the_rest_still_scored(tmp_path):
    from perfkit.book.check_your_model.report import validation_report

    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    for name in ("activation_sizes", "pool_sizes"):
        shutil.copy(DATA / "nvidia-h200" / f"{name}.csv", folder)
        shutil.copy(DATA / "nvidia-h200" / f"{name}.json", folder)
    shutil.copy(DATA / "nvidia-h200" / "device_profile.json", folder)
    (folder / "pool_sizes.json").unlink()  # data without metadata: not trusted
    (report,) = validation_report(tmp_path, models=False)
    assert list(report.families["recording"]) == ["activation_sizes"]
    assert any("pool_sizes" in n for n in report.notes)
    (problem,) = report.problems
    assert "pool_sizes.csv" in problem and "no metadata" in problem
