"""perfkit.calibration and perfkit.validation: ceilings, the model against DeepBench, the CLI verb."""

import pandas as pd
import pytest

import perfkit as pk
from perfkit.__main__ import main
from perfkit.calibration import ACHIEVABLE_FRACTIONS, datasheet_ceilings, default_ceilings
from perfkit.validation import fit_half, validation_frames, validation_table, with_predictions


def test_default_ceilings_are_documented_fractions_of_the_datasheet():
    h100 = pk.device_spec("H100-SXM")
    c = default_ceilings(h100)
    assert c.flops["bfloat16"] == pytest.approx(0.803 * 989.4e12)
    assert c.flops["float8"] == pytest.approx(0.709 * 1978.9e12)
    assert c.flops["float32"] == pytest.approx(0.941 * 66.9e12)
    assert c.bandwidth == pytest.approx(0.9 * 3350e9) and "MAMF" in c.source
    p100 = default_ceilings(pk.device_spec("P100-PCIe"))  # no Tensor Cores: fp16 at the CUDA-core fraction
    assert p100.flops["float16"] == pytest.approx(0.941 * 18.7e12)
    assert datasheet_ceilings(h100).flops["bfloat16"] == 989.4e12
    for name, fr in ACHIEVABLE_FRACTIONS.items():
        assert name in pk.KNOWN_DEVICES and fr["source"]
        assert all(0 < v <= 1 for k, v in fr.items() if k != "source" and v is not None)


def test_explain_says_which_ceilings_it_used_and_pseudo_fp16_runs_at_the_fp32_rate():
    p100 = pk.device_spec("P100-PCIe")
    pseudo = pk.explain_gemm(4096, 4096, 4096, "float16", p100, math_dtype="float32")
    native = pk.explain_gemm(4096, 4096, 4096, "float16", p100)
    assert pseudo.math_dtype == "float32" and pseudo.flops_ceiling == pytest.approx(0.941 * 9.3e12)
    assert pseudo.predicted_s > 1.9 * native.predicted_s
    assert pseudo.ceilings_source.startswith("default fractions")
    with pytest.raises(LookupError, match="no peak for dtype 'bfloat16'"):
        pk.explain_gemm(64, 64, 64, "bfloat16", p100)


def test_recorded_ceilings_win_over_the_defaults(tmp_path, monkeypatch):
    folder = tmp_path / "nvidia-h100-80gb-hbm3"
    folder.mkdir()
    meta = {"device_name": "NVIDIA H100 80GB HBM3", "device_kind": "gpu", "complete": True,
            "recorded_at": "2026-11-20T00:00:00Z"}
    pd.DataFrame({"M": [8192], "N": [8192], "K": [8192], "dtype": ["bfloat16"], "time_s": [1.5e-3],
                  "iqr_s": [0.0], "tflops": [733.0]}).to_csv(folder / "ceiling_matmul.csv", index=False)
    pd.DataFrame({"bytes": [1 << 30], "bytes_moved": [2 << 30], "time_s": [7e-4], "iqr_s": [0.0],
                  "gbps": [3070.0]}).to_csv(folder / "ceiling_copy.csv", index=False)
    import json
    for name in ("ceiling_matmul", "ceiling_copy"):
        (folder / f"{name}.json").write_text(json.dumps(dict(meta, experiment=name)))
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    pk.calibration.clear_cache()
    try:
        c = pk.achievable_ceilings(pk.device_spec("H100-SXM"))
        assert c.flops["bfloat16"] == pytest.approx(733e12) and c.bandwidth == pytest.approx(3070e9)
        assert c.source.startswith("measured (recorded on NVIDIA H100 80GB HBM3 on 2026-11-20")
        p = pk.explain_gemm(8192, 8192, 8192, "bfloat16", pk.device_spec("H100-SXM"))
        assert p.flops_ceiling == pytest.approx(733e12) and p.ceilings_source == c.source
    finally:
        pk.calibration.clear_cache()


def test_model_against_deepbench_v100_beats_the_roofline_and_reports_both_halves():
    table = validation_table()
    v100 = table[table["device"] == "V100-SXM2"]
    assert set(v100["half"]) == {"fit", "held out"} and set(table["predictor"]) == {"model", "roofline"}
    assert v100.groupby(["dtype", "half"])["n"].first().sum() == 320
    model = v100[v100["predictor"] == "model"].set_index(["dtype", "half"])
    base = v100[v100["predictor"] == "roofline"].set_index(["dtype", "half"])
    assert (model["median_abs"] < base["median_abs"]).all() and (model["p90_abs"] < base["p90_abs"]).all()
    # What the book reports (scripts/fit_gemm_model.py): held-out FP32 median within 10 %.
    assert model.loc[("float32", "held out"), "median_abs"] < 0.10
    assert (table[table["device"] == "P100-PCIe"]["half"] == "not fitted").all()


def test_fit_half_is_a_fixed_split_by_shape():
    v100 = pk.published("gemm", "V100-SXM2")
    half = fit_half(v100)
    assert 0.4 < half.mean() < 0.6 and half.equals(fit_half(v100.copy()))
    same_shape = v100.groupby(["M", "N", "K", "layout"]).apply(lambda g: half[g.index].nunique(),
                                                               include_groups=False)
    assert (same_shape == 1).all()  # fp32 and fp16 rows of one shape fall in the same half


def test_with_predictions_needs_gemm_columns_and_a_device():
    with pytest.raises(ValueError, match="lacks the GEMM columns"):
        with_predictions(pd.DataFrame({"M": [1]}))
    frame = pd.DataFrame({"M": [64], "N": [64], "K": [64], "dtype": ["float16"], "time_s": [1e-5]})
    with pytest.raises(LookupError, match="names no known device"):
        with_predictions(frame)
    out = with_predictions(frame, pk.device_spec("H100-SXM"))
    assert out["predicted_s"].iloc[0] >= out["roofline_s"].iloc[0] > 0


def test_cli_validate_prints_the_table(capsys):
    assert main(["validate", "--worst", "2"]) == 0
    out = capsys.readouterr().out
    assert "measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019)" in out and "held out" in out
    assert "worst 2 of Baidu DeepBench V100-SXM2" in out


def test_validation_table_splits_by_layout(capsys):
    frames = validation_frames()
    table = validation_table(frames, by="layout")
    assert list(table.columns[:5]) == ["data", "device", "dtype", "layout", "half"]
    v100 = table[(table["device"] == "V100-SXM2") & (table["predictor"] == "model")]
    assert set(v100["layout"]) == {"NN", "NT", "TN"}
    # The split covers the same rows as the table without it.
    whole = validation_table(frames)
    assert v100["n"].sum() == whole[(whole["device"] == "V100-SXM2") & (whole["predictor"] == "model")]["n"].sum()
    with pytest.raises(ValueError, match="by must be the name of a column"):
        validation_table(frames, by="dtype")
    with pytest.raises(ValueError, match="by='bogus' is not a column of any frame"):
        validation_table(frames, by="bogus")
    assert main(["validate", "--by", "layout"]) == 0
    assert " TN " in capsys.readouterr().out
    assert main(["validate", "--by", "bogus"]) == 2
    assert "perfkit validate: by='bogus'" in capsys.readouterr().err
