"""The fully-connected chapter's experiments, analyses and figures.

Experiments run on the CPU with a tiny time budget (rows, not timings, are checked), and on their
GPU code path with a fake GPU (made-up timings, no kernels). Analyses are checked on hand-built
frames with known answers and on DeepBench's published V100 GEMMs.
"""

from __future__ import annotations


import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit import book  # noqa: E402
from perfkit.experiments.registry import REGISTRY
from perfkit.book.fully_connected import experiments as fc  # noqa: E402
from perfkit import placement  # noqa: E402
from perfkit.provenance import modelled  # noqa: E402
from figure_helpers import note_of
from testkit import CPU_LIVE, framed, heading_text

NAMES = ["fc_passes", "fc_batch", "fc_features", "vocab_padding"]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


@pytest.fixture
def fake_gpu(fake_gpu):
    """The GPU code paths on conftest's fake H100 (the seam: made-up timings, its spec, its free
    memory; the layers' tensors on torch's meta device). Only row shapes are checked."""
    return fake_gpu


def test_the_experiments_are_registered_for_the_recorder():
    for name in NAMES:
        exp = REGISTRY[name]
        assert any(word in name for word in ("fc", "linear", "vocab"))
        assert exp.needs == ("cuda",) and "time_s" in exp.columns
        assert all(isinstance(v, str) and v for v in exp.columns.values())
    assert {"M", "N", "K", "dtype", "time_s", "tflops", "intensity", "predicted_s"} <= set(REGISTRY["fc_batch"].columns)
    assert {"phase", "impl"} <= set(REGISTRY["fc_passes"].columns)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_runs_return_the_declared_columns(name, short_bench):
    kwargs = {"vocab_padding": dict(in_features=16, tokens=8), "fc_features": dict(sweeps=("in", "batch"))}
    frame = REGISTRY[name](device="cpu", quick=True, progress=False, **kwargs.get(name, {}))
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")


def test_fc_passes_rows_are_nvidias_table(short_bench):
    frame = fc.fc_passes(device="cpu", in_features=24, out_features=40, batches=[8, 16], progress=False)
    assert len(frame) == 2 * 2 * 3
    assert set(frame["impl"]) == {"autograd", "gemm"} and set(frame["phase"]) == {"forward", "dgrad", "wgrad"}
    for r in frame.itertuples():
        assert (r.M, r.N, r.K) == pk.linear_gemms(r.batch, 24, 40)[r.phase]
        assert r.layout == fc.PASS_LAYOUTS[r.phase]
        assert r.intensity == pytest.approx(pk.arithmetic_intensity(r.M, r.N, r.K, "float32"))
    over = fc.pass_overhead(frame)
    assert len(over) == 6 and np.allclose(over["ratio"], over["autograd_s"] / over["gemm_s"])


def test_fc_batch_rows_are_the_forward_gemm(short_bench):
    seen = []
    frame = fc.fc_batch(device="cpu", in_features=32, out_features=48, batches=[1, 4, 16], progress=False,
                        on_row=seen.append)
    assert len(seen) == 3 and list(frame["N"]) == [1, 4, 16] == list(frame["batch"])
    assert (frame["M"] == 48).all() and (frame["K"] == 32).all() and (frame["layout"] == "NT").all()
    assert frame["intensity"].tolist() == pytest.approx([pk.arithmetic_intensity(48, n, 32, "float32")
                                                         for n in (1, 4, 16)])
    assert (frame["predicted_s"] > 0).all() and set(frame["predicted_bound"]) <= {"math", "memory", "latency"}


def test_fc_features_points_and_classes(short_bench):
    pts = fc.feature_points(1024, 256)
    assert min(pts) == 768 and max(pts) == 1280 and all(p % 8 == 0 for p in range(768, 1281, 8) if p in pts)
    assert {1025, 1026, 1028, 833} <= set(pts) and 1027 not in pts
    frame = fc.fc_features(device="cpu", sweeps="out", center=64, span=16, fixed=32, progress=False)
    assert set(frame["sweep"]) == {"out"} and (frame["M"] == frame["swept"]).all()
    assert frame.set_index("swept")["divisible_by"].loc[[64, 65, 66, 68, 56]].tolist() == [64, 1, 2, 4, 8]


def test_vocab_padding_rows_and_savings(short_bench):
    frame = fc.vocab_padding(device="cpu", vocab=1001, in_features=8, tokens=4, progress=False)
    assert len(frame) == 2 * 7 and set(frame["phase"]) == {"forward", "forward+backward"}
    widths = frame.groupby("multiple")["out_features"].unique()
    assert list(widths[1]) == [1001] and list(widths[8]) == [1008] and list(widths[64]) == [1024]
    assert (frame["vocab"] == 1001).all()
    saved = fc.vocab_savings(frame)
    base = saved[(saved["impl"] == "linear") & (saved["multiple"] == 1)]
    assert (base["saving"] == 1.0).all() and (saved["saving"] > 0).all()
    f = frame[frame["phase"] == "forward+backward"]
    assert np.allclose(f["tflops"], 3 * 2 * 4 * 8 * 1001 / f["time_s"] / 1e12)


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_paths_return_the_declared_columns(name, fake_gpu):
    frame = REGISTRY[name](progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert set(frame["dtype"]) == {"float16"} and frame["predicted_s"].notna().all()
    if name == "fc_batch":
        assert (frame["M"] == 4096).all() and (frame["K"] == 4096).all()
        assert {1, 128, 7000, 8192} <= set(frame["N"])
    if name == "vocab_padding":
        assert set(frame["out_features"]) == {50257, 50264, 50304} and (frame["in_features"] == 768).all()


@pytest.mark.parametrize("call, match", [
    (lambda: fc.fc_batch(device="cpu", in_features=0), "in_features"),
    (lambda: fc.fc_batch(device="cpu", batches=[8, 0]), "batches"),
    (lambda: fc.fc_batch(device="cpu", batches=[]), "batches"),
    (lambda: fc.fc_passes(device="cpu", out_features=-1), "out_features"),
    (lambda: fc.fc_passes(device="cpu", dtype="int8"), "dtype"),
    (lambda: fc.fc_features(device="cpu", sweeps=("width",)), "sweeps"),
    (lambda: fc.fc_features(device="cpu", center=8, span=8), "span"),
    (lambda: fc.fc_features(device="cpu", fixed=0), "fixed"),
    (lambda: fc.vocab_padding(device="cpu", vocab=0), "vocab"),
    (lambda: fc.vocab_padding(device="cpu", tokens=-3), "tokens"),
    (lambda: fc.vocab_padding(device="cpu", multiples=(8, 0)), "multiples"),
    (lambda: fc.fc_batch(device="tpu"), "device"),
])
def test_bad_arguments_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_batches_must_be_integers():
    with pytest.raises(TypeError, match="batches"):
        fc.fc_batch(device="cpu", batches=64)
    with pytest.raises(TypeError, match="in_features"):
        fc.fc_passes(device="cpu", in_features=2.5)


def test_batch_crossover_finds_where_the_asymptotes_meet():
    M = K = 4096
    N = np.array([1, 16, 64, 256, 1024, 4096])
    floor, peak = 50e-6, 100e12
    t = np.maximum(floor, 2.0 * M * N * K / peak)
    frame = pd.DataFrame({"M": M, "N": N, "K": K, "dtype": "float16", "time_s": t, "tflops": 2.0 * M * N * K / t / 1e12})
    out = pk.roofline.batch_crossover(frame).iloc[0]
    assert out["crossover_batch"] == pytest.approx(floor * peak / (2 * M * K))
    assert out["best_tflops"] == pytest.approx(100) and out["max_batch"] == 4096


@pytest.mark.published
def test_batch_crossover_of_deepbench_v100_agrees_with_nvidias_rule():
    v100 = pk.provenance.published_counterparts("fc_batch")["V100-SXM2, 2019"]
    out = pk.roofline.batch_crossover(v100).iloc[0]
    predicted = pk.math_bound_batch(4096, 4096, pk.device_spec("V100-SXM2"))
    assert 128 < predicted <= 160  # NVIDIA: "greater than 128" on V100
    assert predicted / 1.5 < out["crossover_batch"] < predicted * 1.5


def test_feature_effects_on_a_made_up_sweep():
    swept = np.array([64, 65, 72, 128, 129, 136, 256, 257])
    div = [fc._divisible_by(int(n)) for n in swept]
    tflops = np.where(np.array(div) >= 64, 2.0, np.where(np.array(div) >= 8, 1.5, 1.0))
    frame = pd.DataFrame({"sweep": "in", "swept": swept, "divisible_by": div, "tflops": tflops})
    out = fc.feature_effects(frame).iloc[0]
    assert out["unaligned"] == 1.0 and out["by_8"] == 1.5 and out["by_64"] == 2.0 and out["by_256"] == 2.0
    assert out["tile_gain"] == pytest.approx(2.0 / 1.5) and out["align_gain"] == pytest.approx(2.0)


def test_predicted_features_is_the_model_alone():
    h100 = pk.device_spec("H100-SXM")
    frame = fc.predicted_features(h100, sweeps=("out",), center=256, span=64, fixed=512)
    assert list(frame.columns) == list(REGISTRY["fc_features"].columns)
    assert frame["time_s"].isna().all() and (frame["predicted_s"] > 0).all()
    fig = book.fully_connected.plot_fc_features(frame, modelled(h100))
    assert "model of H100-SXM" in heading_text(fig)


def _heading(fig) -> str:
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def test_figures_are_captioned_and_refuse_without_data(short_bench, capsys):
    passes = fc.fc_passes(device="cpu", in_features=16, out_features=24, batches=[4, 8], progress=False)
    batch = fc.fc_batch(device="cpu", in_features=16, out_features=24, batches=[1, 8, 64], progress=False)
    vocab = fc.vocab_padding(device="cpu", vocab=300, in_features=8, tokens=4, progress=False)
    feats = fc.fc_features(device="cpu", sweeps=("in",), center=32, span=8, fixed=16, progress=False)
    for fn, frame in ((book.fully_connected.plot_fc_passes, passes), (book.fully_connected.plot_fc_batch, batch),
                      (book.fully_connected.plot_vocab_padding, vocab), (book.fully_connected.plot_fc_features, feats)):
        assert "live on CPU" in _heading(fn(frame))
        assert note_of(fn(None, pk.provenance.missing("no recording yet"))) == "No recording yet: No recording yet"
    hand = framed(batch, CPU_LIVE)
    assert "AMD EPYC" in _heading(book.fully_connected.plot_fc_batch(hand, models=[pk.device_spec("V100-SXM2")]))


@pytest.mark.published
def test_batch_figure_with_published_data_only_and_another_layer(capsys):
    then = pk.provenance.published_counterparts("fc_batch")
    h100 = pk.device_spec("H100-SXM")
    fig = book.fully_connected.plot_fc_batch(None, pk.provenance.missing("no GPU"), published=then, models=[h100])
    text = _heading(fig)
    assert "published by Baidu DeepBench" in text and "model of H100-SXM" in text
    assert "Published data only" in capsys.readouterr().out
    other = framed({"M": 64, "N": [1, 8], "K": 64, "dtype": "float32", "time_s": [1e-5, 2e-5],
                    "tflops": [0.001, 0.003], "predicted_s": np.nan}, CPU_LIVE)
    fig = book.fully_connected.plot_fc_batch(other, published=then)
    assert "published" not in _heading(fig) and "Not drawn: V100-SXM2, 2019" in capsys.readouterr().out
    with pytest.raises(TypeError, match="models"):
        book.fully_connected.plot_fc_batch(other, models=["H100-SXM"])


def test_widths_figure_draws_square_layers_only(capsys):
    v100 = pk.published("deepbench_gemm", "V100-SXM2")
    fig = book.fully_connected.plot_fc_widths({"V100-SXM2, 2019": v100})
    assert "published by Baidu DeepBench" in _heading(fig)
    assert {line.get_label().split(",")[0] for line in fig.axes[0].lines} >= {"1760×1760", "4096×4096"}
    assert note_of(book.fully_connected.plot_fc_widths({"none": None})).startswith("Nothing to draw")


def test_predicted_vocab_prices_the_slice_of_a_padded_backward():
    h100 = pk.device_spec("H100-SXM")
    frame = fc.predicted_vocab(h100)
    assert list(frame.columns) == list(REGISTRY["vocab_padding"].columns) and frame["time_s"].isna().all()
    saved = fc.vocab_savings(frame).set_index(["phase", "impl", "multiple"])["predicted_saving"]
    fwd, both = saved["forward"], saved["forward+backward"]
    # the model prices the unaligned vocabulary (an odd leading dimension: ~5x, measured 6.1x on the H200)
    # and the sliced backward's copies, which give part of the saving back
    assert fwd[("padded_linear, sliced", 8)] == pytest.approx(fwd[("padded_linear, kept", 8)])
    assert 4 < fwd[("linear", 8)] < 7
    assert 1.5 < both[("padded_linear, sliced", 8)] < both[("padded_linear, kept", 8)]
    fig = book.fully_connected.plot_vocab_padding(frame, modelled(h100))
    assert "model of H100-SXM" in _heading(fig) and "model only" in _heading(fig)


def test_a_cpu_run_on_a_gpu_machine_predicts_nothing(short_bench):
    """Predictions use the device measured: a CPU run never borrows the GPU's spec."""
    with placement.use(spec=pk.device_spec("H100-SXM")):  # measured on a GPU, but run on the CPU
        frame = fc.fc_batch(device="cpu", in_features=16, out_features=16, batches=[2, 4], progress=False)
    assert frame["predicted_s"].isna().all() and (frame["predicted_bound"] == "").all()


def _recorded(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as if recorded on an H100 SXM, with a stale prediction (1 s everywhere)."""
    return framed(frame.assign(time_s=1e-3, predicted_s=1.0), device="H100-SXM", device_kind="gpu",
                  recorded_at="2026-11-20T10:00:00+00:00")


def test_a_recording_is_drawn_with_todays_model():
    """A recording keeps the prediction of the model it was recorded with; ``repriced`` (and so the
    figures) price it again with today's model, each GEMM in the layout the experiment times."""
    from perfkit.gemm_alignment import LINEAR_LAYOUTS

    h100 = pk.device_spec("H100-SXM")
    vocab = _recorded(fc.predicted_vocab(h100))
    again = book.fully_connected.repriced(vocab)
    assert again["predicted_s"].to_numpy() == pytest.approx(fc.predicted_vocab(h100)["predicted_s"].to_numpy())
    assert (vocab["predicted_s"] == 1.0).all() and again.attrs["meta"] == vocab.attrs["meta"]
    fig = book.fully_connected.plot_vocab_padding(vocab)
    ticks = [line for line in fig.axes[0].lines if line.get_marker() == "|"]
    assert list(ticks[0].get_xdata()) == pytest.approx(list(again[again["phase"] == "forward"]["predicted_s"]))

    feats = _recorded(fc.predicted_features(h100, sweeps=("in",), center=256, span=64, fixed=512))
    want = [pk.explain_gemm(r.M, r.N, r.K, "float16", h100, layout="NT").predicted_s for r in feats.itertuples()]
    assert book.fully_connected.repriced(feats)["predicted_s"].to_numpy() == pytest.approx(want)

    rows = [dict(batch=64, phase=p, impl=impl, M=M, N=N, K=K, dtype="float16", in_features=256, out_features=512)
            for impl in ("autograd", "gemm") for p, (M, N, K) in pk.linear_gemms(64, 256, 512).items()]
    passes = book.fully_connected.repriced(_recorded(pd.DataFrame(rows)))
    for r in passes.itertuples():
        layout = LINEAR_LAYOUTS[r.phase] if r.impl == "autograd" else fc.PASS_LAYOUTS[r.phase]
        assert r.predicted_s == pytest.approx(pk.explain_gemm(r.M, r.N, r.K, "float16", h100,
                                                              layout=layout).predicted_s)

    batch = _recorded(pd.DataFrame({"M": 512, "N": [1, 64], "K": 256, "dtype": "float16", "predicted_bound": ""}))
    assert set(book.fully_connected.repriced(batch)["predicted_bound"]) <= {"math", "memory", "latency"}
    # live runs (priced as they ran), CPU runs, frames of no known GPU and None are left as they are
    for same in (framed(vocab, live=True, device_name="NVIDIA H100 80GB HBM3"), framed(vocab, CPU_LIVE),
                 fc.predicted_vocab(h100), framed(vocab, device_name="Some Future GPU", device_kind="gpu")):
        assert book.fully_connected.repriced(same) is same
    assert book.fully_connected.repriced(None) is None
