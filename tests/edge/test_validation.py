"""perfkit.ceilings, perfkit.calibration and perfkit.validation: ceilings, the model against DeepBench, the CLI verb."""

import pandas as pd
import pytest

import perfkit as pk
from perfkit.__main__ import main
from perfkit.ceilings import ACHIEVABLE_FRACTIONS, EXTRA_LATENCY_S, TF32_FIT, datasheet_ceilings, default_ceilings
from perfkit.published_data import HOW_TO_GET, has_published
from perfkit.validation import fit_half, half_labels, validation_frames, validation_table, with_predictions
from testkit import framed

#: Tests that read the published tables skip, saying how to get them, where they are absent.
needs_deepbench = pytest.mark.skipif(not has_published("deepbench_gemm"), reason=HOW_TO_GET)
needs_xla = pytest.mark.skipif(not has_published("xla_h100_gemm"), reason=HOW_TO_GET)


def test_default_ceilings_are_documented_fractions_of_the_datasheet():
    h100 = pk.device_spec("H100-SXM")
    c = default_ceilings(h100)
    assert c.flop_s["bfloat16"] == pytest.approx(0.803 * 989.4e12)
    assert c.flop_s["float8"] == pytest.approx(0.709 * 1978.9e12)
    assert c.flop_s["float32"] == pytest.approx(0.941 * 66.9e12)
    assert c.bandwidth == pytest.approx(0.9 * 3350e9) and "MAMF" in c.source
    # Hopper's TF32: fitted on XLA's H100 rows, said so in the source; the A100 keeps its Tensor Core fraction
    assert c.flop_s["tf32"] == pytest.approx(TF32_FIT["fraction"] * 494.7e12) and "XLA" in c.source
    assert c.extra_latency_s == {"tf32": TF32_FIT["extra_latency_s"]} == EXTRA_LATENCY_S["H100-SXM"]
    a100 = default_ceilings(pk.device_spec("A100-SXM4-80GB"))
    a100_tf32 = pk.device_spec("A100-SXM4-80GB").peak_flop_s("tf32")
    assert a100.flop_s["tf32"] == pytest.approx(0.869 * a100_tf32) and not a100.extra_latency_s
    assert 0.5 < TF32_FIT["fraction"] < 0.803 and 0 <= TF32_FIT["extra_latency_s"] < 1e-5
    h800 = default_ceilings(pk.device_spec("H800"))  # the H100 SXM's fractions, none fitted to DeepGEMM
    assert all(h800.flop_s[d] == pytest.approx(c.flop_s[d]) for d in h800.flop_s)
    assert h800.extra_latency_s == c.extra_latency_s
    p100 = default_ceilings(pk.device_spec("P100-PCIe"))  # no Tensor Cores: fp16 at the CUDA-core fraction
    assert p100.flop_s["float16"] == pytest.approx(0.941 * 18.7e12)
    assert datasheet_ceilings(h100).flop_s["bfloat16"] == 989.4e12
    for name, fr in ACHIEVABLE_FRACTIONS.items():
        assert name in pk.KNOWN_DEVICES and fr["source"]
        assert all(0 < v <= 1 for k, v in fr.items() if k != "source" and v is not None)


def test_explain_says_which_ceilings_it_used_and_pseudo_fp16_runs_at_the_fp32_rate():
    p100 = pk.device_spec("P100-PCIe")
    pseudo = pk.explain_gemm(4096, 4096, 4096, "float16", p100, math_dtype="float32")
    native = pk.explain_gemm(4096, 4096, 4096, "float16", p100)
    assert pseudo.math_dtype == "float32" and pseudo.flop_s_ceiling == pytest.approx(0.941 * 9.3e12)
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
    h100 = pk.device_spec("H100-SXM")
    for spec in (pk.calibrated(h100), pk.calibrated("H100-SXM", root=tmp_path)):  # $PERFKIT_DATA, or root=
        c = pk.achievable_ceilings(spec)
        assert c == spec.ceilings and spec.measured_ceilings is not None
        assert c.flop_s["bfloat16"] == pytest.approx(733e12) and c.bandwidth == pytest.approx(3070e9)
        assert c.source.startswith("measured (recorded on NVIDIA H100 80GB HBM3 on 2026-11-20")
        p = pk.explain_gemm(8192, 8192, 8192, "bfloat16", spec)
        assert p.flop_s_ceiling == pytest.approx(733e12) and p.ceilings_source == c.source
    # the spec itself is unchanged: a model given it uses the documented defaults, whatever data/ holds
    assert pk.achievable_ceilings(h100) == default_ceilings(h100) and h100.measured_ceilings is None
    assert pk.explain_gemm(8192, 8192, 8192, "bfloat16", h100).flop_s_ceiling == pytest.approx(0.803 * 989.4e12)



@needs_deepbench
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


@needs_deepbench
def test_fit_half_is_a_fixed_split_by_shape():
    v100 = pk.published("deepbench_gemm", "V100-SXM2")
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


@needs_deepbench
def test_cli_validate_prints_the_table(capsys):
    assert main(["validate", "--worst", "2"]) == 0
    out = capsys.readouterr().out
    assert "measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019)" in out and "held out" in out
    assert "worst 2 of Baidu DeepBench V100-SXM2" in out


@needs_deepbench
@pytest.mark.slow  # the model against every published GEMM: seconds
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


def _synthetic(meta: dict, dtypes=("bfloat16", "tf32")) -> pd.DataFrame:
    rows = [{"M": m, "N": n, "K": 512, "dtype": d, "b": b, "time_s": 1e-5}
            for m in (256, 512, 1024) for n in (256, 2048) for d in dtypes for b in (1, 4)]
    return framed(rows, meta)


def test_half_labels_follow_what_was_fitted():
    xla = _synthetic({"published_by": "OpenXLA (XLA's GPU matmul performance table)", "device": "H100-SXM"},
                     dtypes=("bfloat16", "tf32", "float8"))
    halves = half_labels(xla)
    fitted = xla["dtype"] != "float8"
    assert set(halves[fitted]) == {"fit", "held out"} and set(halves[~fitted]) == {"not fitted"}
    assert (halves[fitted] == fit_half(xla)[fitted].map({True: "fit", False: "held out"})).all()
    # one shape's dtypes and batches fall in the same half
    assert (xla[fitted].assign(h=halves).groupby(["M", "N", "K"])["h"].nunique() == 1).all()
    other = _synthetic({"published_by": "OpenXLA", "device": "A100-SXM4-80GB"})
    assert set(half_labels(other)) == {"not fitted"}
    assert set(half_labels(_synthetic({}))) == {"not fitted"}


def test_with_predictions_reads_the_batch_column():
    h100 = pk.device_spec("H100-SXM")
    for column in ("batch", "b", "groups"):
        frame = pd.DataFrame({"M": [256, 256], "N": [256, 256], "K": [4096, 4096], "dtype": ["bfloat16"] * 2,
                              "time_s": [1e-5, 1e-5], column: [1, 4]})
        out = with_predictions(frame, h100)
        assert out["predicted_s"].tolist() == pytest.approx(
            [pk.predict_gemm_time(256, 256, 4096, "bfloat16", h100, batch=b) for b in (1, 4)])
        assert out["predicted_s"].iloc[1] > out["predicted_s"].iloc[0]


def test_validation_table_gives_the_halves_of_a_fitted_source():
    frame = _synthetic({"published_by": "OpenXLA (XLA's GPU matmul performance table)", "device": "H100-SXM",
                        "device_name": "H100", "published_date": "2025"})
    table = validation_table({"xla": with_predictions(frame, pk.device_spec("H100-SXM"))})
    assert set(table["half"]) == {"fit", "held out"} and set(table["dtype"]) == {"bfloat16", "tf32"}
    assert table.groupby("predictor")["n"].sum().tolist() == [len(frame)] * 2
    assert table["data"].str.startswith("published by OpenXLA").all()


@needs_xla
def test_validation_frames_hold_xlas_h100_rows_labelled_as_published():
    frames = validation_frames()
    xla = frames["OpenXLA H100-SXM"]
    assert set(xla["dtype"]) == {"bfloat16", "tf32"} and set(xla["b"]) == {1, 2, 4}
    assert xla["predicted_s"].notna().all() and len(xla) == 750
    table = validation_table(frames)
    h100 = table[(table["device"] == "H100-SXM") & (table["predictor"] == "model")]
    assert set(h100["half"]) == {"fit", "held out"}
    assert h100["data"].str.contains("published by OpenXLA").all() and h100["data"].str.contains("H100").all()
