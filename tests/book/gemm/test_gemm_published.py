"""perfkit.book.gemm.published and its figures: published modern GEMMs against the model.

The analysis functions are checked on small synthetic frames (what they compute); the tests that
read the real published tables skip, saying how to get them, where the folder is absent. No test
checks the model's accuracy targets: ``scripts/validate_published.py`` prints them.
"""

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.ceilings import TF32_FIT
from perfkit.display import Note
from perfkit.book.gemm import published as gp
from perfkit.book.gemm import figures as plots
from perfkit.book.figures import BookFigure
from perfkit.published_data import HOW_TO_GET, has_published
from testkit import H100, framed, heading_text

XLA_META = {"published_by": "OpenXLA (XLA's GPU matmul performance table)", "device": "H100-SXM",
            "device_name": "H100", "published_date": "2025", "timing": "CUPTI kernel time: the median"}
needs_xla = pytest.mark.skipif(not has_published("xla_h100_gemm"), reason=HOW_TO_GET)
needs_deepgemm = pytest.mark.skipif(not has_published("deepgemm_fp8"), reason=HOW_TO_GET)


def xla_frame(time_s=lambda M, N, K, b, d: 1e-5) -> pd.DataFrame:
    """A small XLA-like table: bf16, f32 (TF32) and fp8 rows, b = 1, 2, 4."""
    rows = []
    for d, math in (("bfloat16", "bfloat16"), ("float32", "tf32"), ("float8_e4m3fn", "float8")):
        for M in (256, 1024, 4096):
            for K in (256, 4096):
                for b in (1, 2, 4):
                    t = time_s(M, M, K, b, d)
                    rows.append({"dtype": d, "math_dtype": math, "b": b, "M": M, "N": M, "K": K, "layout": "NN",
                                 "time_s": t, "tflops": 2 * b * M * M * K / t / 1e12})
    return framed(rows, XLA_META)


def test_xla_rows_keep_bf16_and_tf32_and_never_fp8():
    rows = gp.xla_rows(xla_frame())
    assert set(rows["dtype"]) == {"bfloat16", "tf32"} and set(rows["xla_dtype"]) == {"bfloat16", "float32"}
    assert rows.attrs["meta"]["published_by"].startswith("OpenXLA")
    assert set(gp.xla_rows(xla_frame(), dtype="float32")["dtype"]) == {"tf32"}
    assert set(gp.xla_rows(xla_frame(), batch=(1, 4))["b"]) == {1, 4}
    assert set(gp.xla_rows(xla_frame(), dtype="bfloat16", batch=2)["b"]) == {2}
    with pytest.raises(ValueError, match="dtype must be one of"):
        gp.xla_rows(xla_frame(), dtype="float8")
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        gp.xla_rows(xla_frame(), batch=0)
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        gp.xla_rows([1, 2])


def test_none_in_none_out():
    for fn in (gp.xla_rows, gp.with_model, gp.size_sweep, gp.error_table, gp.batched_rows, gp.deepgemm_dense,
               gp.deepgemm_grouped, gp.fp8_regimes, gp.fp8_small_m_bandwidth, gp.fp8_large_m_fraction,
               gp.size_effect, gp.batching_gain):
        assert fn(None) is None, fn.__name__


def test_with_model_and_error_table_compute_what_they_say():
    # measured = exactly 1.25 × the model's prediction: every error is 1/1.25 − 1 = −20 %
    truth = gp.with_model(gp.xla_rows(xla_frame()), H100)
    frame = gp.xla_rows(xla_frame())
    frame["time_s"] = truth["predicted_s"].to_numpy() * 1.25
    p = gp.with_model(frame)
    assert p["error"].to_numpy() == pytest.approx(np.full(len(p), -0.2))
    assert set(p["half"]) == {"fit", "held out"}
    table = gp.error_table(p)
    assert set(table["batch"]) == {"b = 1", "b > 1"} and set(table["dtype"]) == {"bfloat16", "tf32"}
    assert table["median_abs"].to_numpy() == pytest.approx(0.2) and (table["optimistic"] == 1).all()
    assert table["median"].to_numpy() == pytest.approx(-0.2)
    assert table["n"].sum() == len(p)
    assert list(gp.error_table(p, by=("dtype",)).columns[:2]) == ["dtype", "half"]
    with pytest.raises(ValueError, match="by names columns the frame lacks"):
        gp.error_table(p, by=("bogus",))


def test_size_sweep_cuts_nvidias_two_sweeps():
    rows = gp.xla_rows(xla_frame())
    mn, k = gp.size_sweep(rows, "mn"), gp.size_sweep(rows, "k")
    assert (mn["K"] == 4096).all() and (mn["b"] == 1).all() and mn["size"].equals(mn["M"])
    assert (k["M"] == 4096).all() and (k["N"] == 4096).all() and k["size"].equals(k["K"])
    with pytest.raises(ValueError, match="sweep must be one of"):
        gp.size_sweep(rows, "diagonal")
    model = gp.model_sweep(H100, "mn")
    assert model["time_s"].isna().all() and model.attrs["model_of"] == H100.label
    assert (model.groupby("dtype")["predicted_tflops"].is_monotonic_increasing).all()
    with pytest.raises(TypeError, match="spec must be a DeviceSpec"):
        gp.model_sweep("H100", "mn")


def test_batching_gain_and_size_effect():
    # one launch of b GEMMs takes (1 + b)/2 times one GEMM: batching 4 saves 4 / 2.5 = 1.6×
    frame = gp.xla_rows(xla_frame(lambda M, N, K, b, d: 1e-5 * (1 + b) / 2))
    gain = gp.batching_gain(frame, "bfloat16", 4)
    assert gain.to_numpy() == pytest.approx(1.6) and len(gain) == 6
    assert gp.batching_gain(frame[frame["b"] == 1], "bfloat16") is None
    # equal times: throughput ∝ work; above 100 GFLOP (4096² × 4096, b ≥ 1) against below 1 GFLOP
    even = gp.xla_rows(xla_frame())
    work = 2.0 * even["b"] * even["M"] * even["N"] * even["K"]
    bf = even["dtype"] == "bfloat16"
    expected = even.loc[bf & (work > 1e11), "tflops"].median() / even.loc[bf & (work < 1e9), "tflops"].median()
    assert gp.size_effect(even) == pytest.approx(expected) and expected > 100
    assert gp.size_effect(even[even["M"] < 4096]) is None


def deepgemm_frame() -> pd.DataFrame:
    rows = []
    for published, scale in (("2025-02-25", 1.0), ("2025-03-25", 1.1)):
        for M in (64, 4096):
            t = 1e-5 if M == 64 else 1e-4 / scale
            rows.append({"table": "Normal GEMMs for dense models", "groups": 1, "M": M, "N": 4096, "K": 7168,
                         "dtype": "float8_e4m3fn (block-scaled)", "published": published, "time_s": t,
                         "tflops": 2 * M * 4096 * 7168 / t / 1e12,
                         "gbps": (M * 7168 + 4096 * 7168 + 2 * M * 4096) / t / 1e9})
        rows.append({"table": "Grouped GEMMs for MoE models (masked layout)", "groups": 4, "M": 256, "N": 4096,
                     "K": 7168, "dtype": "float8_e4m3fn (block-scaled)", "published": published, "time_s": 6e-5,
                     "tflops": 4 * 2 * 256 * 4096 * 7168 / 6e-5 / 1e12, "gbps": 2000.0})
    return framed(rows, published_by="DeepGEMM (DeepSeek)", device="H800", device_name="H800", published_date="2025")


def test_deepgemm_rows_regimes_and_numbers():
    dense = gp.deepgemm_dense(deepgemm_frame())
    assert len(dense) == 2 and (dense["published"] == "2025-03-25").all() and (dense["dtype"] == "float8").all()
    assert len(gp.deepgemm_dense(deepgemm_frame(), latest=False)) == 4
    grouped = gp.deepgemm_grouped(deepgemm_frame())
    assert len(grouped) == 1 and grouped["groups"].iloc[0] == 4
    p = gp.with_model(dense)
    assert set(p["half"]) == {"not fitted"}  # nothing was fitted to DeepGEMM
    assert gp.with_model(grouped)["predicted_s"].iloc[0] > pk.predict_gemm_time(256, 4096, 7168, "float8",
                                                                                  pk.device_spec("H800"))
    regimes = gp.fp8_regimes(p).set_index("regime")
    assert list(regimes["GEMMs"]) == [1, 1]
    large = dense[dense["M"] == 4096]
    h800 = pk.device_spec("H800")
    assert gp.fp8_large_m_fraction(dense) == pytest.approx(large["tflops"].iloc[0] * 1e12 / h800.peak_flop_s("float8"))
    low, high = gp.fp8_small_m_bandwidth(dense)
    assert low == high == pytest.approx(dense.loc[dense["M"] == 64, "gbps"].iloc[0] / 1e3)


def test_fit_tf32_never_looks_at_the_held_out_half():
    frame = gp.xla_rows(xla_frame(lambda M, N, K, b, d: 2e-6 * (1 + M * K / 2**20)))
    grid = dict(fractions=(0.6, 0.7, 0.8), extra_latencies_s=(0.0, 3e-6))
    best, table = gp.fit_tf32(frame, H100, **grid)
    assert len(table) == 6 and table["score"].is_monotonic_increasing
    assert {"fraction", "extra_latency_s", "score"} <= set(best)
    held = ~pk.validation.fit_half(frame) & (frame["dtype"] == "tf32")
    spoiled = frame.copy()
    spoiled.loc[held, "time_s"] *= 7.0  # whatever the held-out rows say, the choice is the same
    again, _ = gp.fit_tf32(spoiled, H100, **grid)
    assert again == best
    with pytest.raises(ValueError, match="fit_tf32 needs XLA's TF32 rows"):
        gp.fit_tf32(frame[frame["dtype"] == "bfloat16"], H100)


def test_figures_without_published_data_draw_the_model_and_say_how_to_get_it(capsys):
    for fig in (plots.plot_h100_sizes(None, instead="x"), plots.plot_h100_batched(None),
                plots.plot_fp8_published(None)):
        assert isinstance(fig, BookFigure)
        assert "model" in heading_text(fig) and fig.to_png()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert out.count("Published data absent") == 3 and "PERFKIT_PUBLISHED" in out
    with pytest.raises(TypeError, match="spec must be a DeviceSpec"):
        plots.plot_h100_sizes(None, "H100")


def test_figures_from_synthetic_published_rows_say_who_published_and_how_they_timed(capsys):
    p = gp.with_model(gp.xla_rows(xla_frame()))
    for fig in (plots.plot_h100_sizes(p), plots.plot_h100_batched(gp.batched_rows(p))):
        title = heading_text(fig)
        assert "published by OpenXLA" in title and "timed with CUPTI kernel time" in title and "model" in title
    fig = plots.plot_fp8_published(gp.with_model(gp.deepgemm_dense(deepgemm_frame())))
    assert "published by DeepGEMM" in heading_text(fig)
    assert "Published data absent" not in capsys.readouterr().out


@needs_xla
def test_xlas_h100_table_with_the_model():
    rows = gp.xla_rows(pk.published("xla_h100_gemm"))
    assert len(rows) == 750 and set(rows["b"]) == {1, 2, 4}
    p = gp.with_model(rows)
    assert p["predicted_s"].notna().all() and (p["predicted_s"] >= p["roofline_s"]).all()
    table = gp.error_table(p)
    assert set(table["half"]) == {"fit", "held out"} and table["n"].sum() == 750
    assert len(gp.size_sweep(rows, "mn")) == 10 and len(gp.batched_rows(rows)) == 15
    assert isinstance(plots.plot_h100_sizes(p), BookFigure)


@needs_xla
def test_the_committed_tf32_constants_are_the_fit_half_optimum():
    f, x = TF32_FIT["fraction"], TF32_FIT["extra_latency_s"]  # the committed pair and its grid neighbours
    best, _ = gp.fit_tf32(pk.published("xla_h100_gemm"), fractions=tuple(round(f + d, 3) for d in (-0.025, 0, 0.025)),
                          extra_latencies_s=tuple(round(x + d, 9) for d in (-0.5e-6, 0, 0.5e-6)))
    assert best["fraction"] == pytest.approx(TF32_FIT["fraction"])
    assert best["extra_latency_s"] == pytest.approx(TF32_FIT["extra_latency_s"])


@needs_deepgemm
def test_deepgemms_h800_rows_with_the_model():
    raw = pk.published("deepgemm_fp8")
    dense = gp.with_model(gp.deepgemm_dense(raw))
    assert (dense["dtype"] == "float8").all() and dense["predicted_s"].notna().all()
    assert len(dense) == len(raw[raw["table"].str.startswith("Normal")].drop_duplicates(["M", "N", "K"]))
    low, high = gp.fp8_small_m_bandwidth(dense)
    assert 1.0 < low < high < pk.device_spec("H800").mem_bandwidth / 1e12
    assert 0.5 < gp.fp8_large_m_fraction(dense) < 1
    assert isinstance(plots.plot_fp8_published(dense), BookFigure)
    assert isinstance(gp.fp8_regimes(dense), pd.DataFrame)


def test_a_note_is_never_a_figure_here():
    # the published figures always draw (the model at least): never a bare Note
    assert not isinstance(plots.plot_h100_sizes(None), Note)
