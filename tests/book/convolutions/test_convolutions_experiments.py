"""The convolution chapter's experiments, analyses and figures.

Experiments run on the CPU with a tiny time budget (rows, not timings, are checked), and on their GPU
code path with a fake GPU (made-up timings, no kernels). Analyses are checked on hand-built frames with
known answers and on DeepBench's published V100 and P100 convolutions.
"""

from __future__ import annotations

import itertools
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit import book  # noqa: E402
from perfkit.experiments.registry import REGISTRY
from perfkit.book.convolutions import experiments as conv, analysis as conv_analysis  # noqa: E402
from perfkit import placement  # noqa: E402
from perfkit.provenance import missing, modelled  # noqa: E402
from figure_helpers import note_of
from testkit import V100_PUBLISHED, heading_text

NAMES = ["conv_passes", "conv_channels", "conv_first_layer", "conv_layout", "conv_params", "conv_deepbench"]

#: Tests that read DeepBench's published tables (kept outside the repository) skip without them.
needs_deepbench = pytest.mark.skipif(
    not all(pk.published_data.has_published(f"deepbench_{k}") for k in ("gemm", "conv", "rnn")),
    reason=pk.published_data.HOW_TO_GET)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


@pytest.fixture
def fake_gpu(fake_gpu):
    """The GPU code paths on conftest's fake H100 (the seam: made-up timings, its spec, its free
    memory; tensors on torch's meta device). Only row shapes are checked."""
    return fake_gpu


def _heading(fig) -> str:
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def test_the_experiments_are_registered_for_the_recorder():
    for name in NAMES:
        exp = REGISTRY[name]
        assert "conv" in name and exp.needs == ("cuda",) and "time_s" in exp.columns
        assert all(isinstance(v, str) and v for v in exp.columns.values())
    assert {"gemm_M", "gemm_N", "gemm_K", "N", "predicted_s", "tflops"} <= set(REGISTRY["conv_passes"].columns)
    assert "M" not in REGISTRY["conv_passes"].columns  # the batch is N; the GEMM's sizes are gemm_*
    db = REGISTRY["conv_deepbench"].columns
    assert set(pk.then_now.CONV_SHAPE + ["time_s", "bwd_inputs_time_s", "bwd_params_time_s"]) <= set(db)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_runs_return_the_declared_columns(name, short_bench):
    kwargs = {"conv_channels": dict(channels=[7, 8]), "conv_first_layer": dict(size=32),
              "conv_passes": dict(batch=1), "conv_deepbench": dict(shapes=[(20, 12, 4, 2, 8, 3, 3, 1, 1, 1, 1)])}
    frame = REGISTRY[name](device="cpu", quick=True, progress=False, **kwargs.get(name, {}))
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")


@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_conv_passes_rows_are_nvidias_implicit_gemms(short_bench):
    seen = []
    frame = conv.conv_passes(device="cpu", batch=2, progress=False, on_row=seen.append)
    assert len(seen) == len(frame) == 3 * len(conv.RESNET_LAYERS)
    for r in frame.itertuples():
        gemms = pk.conv_gemms(r.N, r.C, r.H, r.W, r.K, r.R, r.S, r.stride, r.padding, r.dilation)
        assert (r.gemm_M, r.gemm_N, r.gemm_K) == gemms[r.phase]
        assert r.tflops == pytest.approx(2 * r.N * r.K * r.C * r.R * r.S * r.P * r.Q / r.time_s / 1e12)
    fwd = frame[(frame["phase"] == "forward") & (frame["layer"] == "3×3 64→64, 28²")].iloc[0]
    assert (fwd.N, fwd.H, fwd.P, fwd.gemm_M, fwd.gemm_N, fwd.gemm_K) == (2, 28, 28, 2 * 28 * 28, 64, 576)


def test_conv_channels_marks_aligned_channels(short_bench):
    frame = conv.conv_channels(device="cpu", channels=[6, 7, 8, 64], size=8, progress=False)
    assert list(frame["C"]) == list(frame["K"]) == [6, 7, 8, 64]
    assert frame["aligned"].tolist() == [False, False, True, True]  # float32 on a CPU: multiples of 4
    assert frame["divisible_by"].tolist() == [2, 1, 8, 64]
    assert conv.channel_points()[:17] == list(range(56, 73)) and {120, 127, 129, 136, 248, 257, 264} <= set(
        conv.channel_points())


@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_conv_first_layer_runs_padded_conv2d_once_or_every_step(short_bench):
    frame = conv.conv_first_layer(device="cpu", size=16, progress=False)
    assert len(frame) == 2 * 2 * 5 and (frame["C"] == 3).all()
    assert set(zip(frame["channels"], frame["input_padding"])) == {(3, "none"), (4, "once"), (4, "every step"),
                                                                    (8, "once"), (8, "every step")}
    r = frame[(frame["stem"] == "7×7/2") & (frame["channels"] == 4)].iloc[0]
    assert (r.stride, r.P, r.gemm_K) == (2, 8, 4 * 49)  # the GEMM that runs has the padded channels
    both = frame[frame["phase"] == "forward+backward"]
    assert np.allclose(both["tflops"], 2 * 2 * both["N"] * 64 * 3 * both["R"] ** 2 * both["P"] ** 2
                       / both["time_s"] / 1e12)
    effects = conv.first_layer_effects(frame)
    assert len(effects) == 4 and (effects[["speedup_4", "pad_cost_8"]] > 0).all().all()


@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_conv_layout_restores_the_benchmark_flag(short_bench):
    before = torch.backends.cudnn.benchmark
    frame = conv.conv_layout(device="cpu", progress=False)
    assert torch.backends.cudnn.benchmark == before
    assert set(frame["layout"]) == {"NCHW", "NHWC", "NCHW→NHWC"} and not frame["cudnn_benchmark"].any()
    convert = frame[frame["op"] == "to channels_last"]
    assert convert["tflops"].isna().all() and (convert["gbps"] > 0).all() and frame["first_call_s"].notna().all()
    assert len(conv.layout_effects(frame)) == 4


@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_conv_params_change_one_parameter_at_a_time(short_bench):
    frame = conv.conv_params(device="cpu", progress=False)
    assert set(frame["sweep"]) == {"batch", "filter", "stride", "dilation"}
    f = frame[frame["sweep"] == "filter"].set_index("swept")
    assert list(f["gemm_K"]) == [32 * r * r for r in (1, 3, 5, 7)] and (f["P"] == 28).all()
    s = frame[frame["sweep"] == "stride"].set_index("swept")
    assert list(s["gemm_M"]) == [2 * p * p for p in (28, 14, 7)]
    assert (frame[frame["sweep"] == "dilation"]["P"] == 28).all()
    assert len(conv.param_effects(frame)) == 4


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_paths_return_the_declared_columns(name, fake_gpu):
    before = torch.backends.cudnn.benchmark
    frame = REGISTRY[name](progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert frame["predicted_s"].notna().all() and (frame["predicted_s"] > 0).all()
    assert set(frame["dtype"]) == ({"float16", "tf32"} if name == "conv_channels" else {"float16"})
    assert torch.backends.cudnn.benchmark == before
    if name == "conv_passes":
        assert (frame["N"] == 32).all()
    if name == "conv_layout":
        assert set(frame["cudnn_benchmark"]) == {False, True} and (frame["first_call_s"] == 0.5).all()
    if name == "conv_deepbench":
        assert len(frame) == len(conv.DEEPBENCH_CONVS)
        assert frame.loc[frame["C"] <= 3, "bwd_inputs_time_s"].isna().all()
        assert frame.loc[frame["C"] > 3, "bwd_inputs_time_s"].notna().all()
    if name == "conv_channels":  # 31 channel counts in each dtype: within the recorder's budget
        assert len(frame) == 2 * 31


@pytest.mark.parametrize("call, error, match", [
    (lambda: conv.conv_passes(device="cpu", batch=0), ValueError, "batch"),
    (lambda: conv.conv_passes(device="cpu", dtype="int8"), ValueError, "dtype"),
    (lambda: conv.conv_channels(device="cpu", channels=[8, -1]), ValueError, "channels"),
    (lambda: conv.conv_channels(device="cpu", channels=[8.5]), TypeError, "channels"),
    (lambda: conv.conv_first_layer(device="cpu", size=-5), ValueError, "size"),
    (lambda: conv.conv_layout(device="tpu"), ValueError, "device"),
    (lambda: conv.conv_deepbench(device="cpu", shapes=[(1, 2, 3)]), ValueError, "shapes"),
    (lambda: conv.conv_deepbench(device="cpu", shapes=[]), ValueError, "shapes"),
    (lambda: conv.conv_channels(device="cpu", channels=[]), ValueError, "channels"),
    (lambda: conv.conv_channels(device="cpu", dtypes=("int8",)), ValueError, "dtype"),
    (lambda: conv_analysis.conv_shape(1, 3, 2, 2, 4, 7, 7), ValueError, "output would be empty"),
    (lambda: conv_analysis.conv_shape(1, 0, 8, 8, 4, 3, 3), ValueError, "C must be a positive integer"),
])
def test_bad_arguments_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_too_large_sweeps_are_refused_before_allocating(forbid_allocation):
    forbid_allocation(conv, "_conv_fn")
    with pytest.raises(ValueError, match="GiB.*free"):
        conv.conv_passes(device="cpu", batch=100_000, progress=False)
    with pytest.raises(ValueError, match="GiB.*free"):
        conv.conv_channels(device="cpu", channels=[20_000], batch=4096, progress=False)


def test_a_cpu_run_on_a_gpu_machine_predicts_nothing(short_bench):
    with placement.use(spec=pk.device_spec("H100-SXM")):  # measured on a GPU, but run on the CPU
        frame = conv.conv_params(device="cpu", progress=False)
    assert frame["predicted_s"].isna().all()


def test_channel_effects_on_a_made_up_sweep():
    cs = np.array([56, 60, 63, 64, 65, 72, 120, 127, 128, 136])
    tflops = np.where(cs % 64 == 0, 3.0, np.where(cs % 8 == 0, 2.0, 1.0))
    frame = pd.DataFrame({"dtype": "float16", "C": cs, "aligned": cs % 8 == 0, "tflops": tflops})
    out = conv.channel_effects(frame).iloc[0]
    # unaligned 60, 63, 65, 127: neighbours (56, 64) → 2.5, (56, 64) → 2.5, (64, 72) → 2.5, (120, 128) → 2.5
    assert out["align_gain"] == pytest.approx(2.5) and out["tile_gain"] == pytest.approx(1.5)
    assert out["unaligned_tflops"] == 1.0


def test_first_layer_and_layout_effects_on_made_up_frames():
    rows = [("7×7/2", "forward", c, how, t) for c, how, t in [(3, "none", 4.0), (4, "once", 2.0),
                                                              (4, "every step", 3.0), (8, "once", 2.5),
                                                              (8, "every step", 5.0)]]
    first = pd.DataFrame(rows, columns=["stem", "phase", "channels", "input_padding", "time_s"])
    out = conv.first_layer_effects(first).iloc[0]
    assert (out["speedup_4"], out["speedup_8"], out["pad_cost_4"], out["pad_cost_8"]) == (2.0, 1.6, 1.5, 2.0)
    lay = pd.DataFrame({"layer": "L", "op": ["forward"] * 4 + ["to channels_last"],
                        "layout": ["NCHW", "NCHW", "NHWC", "NHWC", "NCHW→NHWC"],
                        "cudnn_benchmark": [False, True, False, True, False],
                        "time_s": [4.0, 3.0, 2.0, 1.5, 0.75], "first_call_s": [1, 2, 1.0, 9.0, 0.1]})
    out = conv.layout_effects(lay).iloc[0]
    assert out["nhwc_gain"] == 2.0 and out["benchmark_gain"] == pytest.approx(2.0 / 1.5)
    assert out["autotune_s"] == 8.0 and out["convert_share"] == 0.5


@needs_deepbench
def test_throughput_gain_pairs_shapes_that_differ_in_the_batch():
    v100 = pk.provenance.published_counterparts("conv_deepbench")[V100_PUBLISHED]
    gain = conv.throughput_gain(v100, 8, 16)
    assert 1.0 < gain < 2.0  # DeepBench's V100: a batch of 16 images is more efficient than 8
    made_up = pd.DataFrame([dict(v100.iloc[0], N=8, time_s=1.0), dict(v100.iloc[0], N=16, time_s=1.5)])
    assert conv.throughput_gain(made_up, 8, 16) == pytest.approx(2 / 1.5)
    assert conv.throughput_gain(v100, 8, 1000) is None and conv.throughput_gain(None, 8, 16) is None


@needs_deepbench
def test_the_model_against_deepbench_then():
    """The GEMM model of the implicit GEMMs against cuDNN's 2019 V100 times: same order of magnitude."""
    then = pk.provenance.published_counterparts("conv_deepbench")
    v100 = conv.predicted_published(then[V100_PUBLISHED], pk.device_spec("V100-SXM2"))
    assert v100["predicted_s"].notna().all() and pk.source_of(v100).kind == "published"
    assert 0.6 < conv.model_agreement(v100) <= 1
    assert v100["ratio"].to_numpy() == pytest.approx((v100["predicted_s"] / v100["time_s"]).to_numpy())
    p100 = conv.predicted_published(then["P100-PCIe, 2018"], pk.device_spec("P100-PCIe"))
    assert p100["predicted_s"].notna().all()  # pseudo FP16: FP32 math, which the P100 has a peak for
    assert conv.model_agreement(pd.DataFrame({"time_s": [1.0]})) is None


def test_predicted_frames_are_the_model_alone():
    h100 = pk.device_spec("H100-SXM")
    ch = conv.predicted_channels(h100)
    assert list(ch.columns) == list(REGISTRY["conv_channels"].columns) and ch["time_s"].isna().all()
    assert (ch["predicted_s"] > 0).all() and set(ch["dtype"]) == {"float16", "tf32"}
    params = conv.predicted_params(h100)
    assert list(params.columns) == list(REGISTRY["conv_params"].columns) and params["tflops"].isna().all()
    fig = book.convolutions.plot_conv_channels(ch, modelled(h100))
    assert "model of H100-SXM" in _heading(fig)
    assert "model of H100-SXM" in _heading(book.convolutions.plot_conv_params(params, modelled(h100)))


@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_figures_are_captioned_and_refuse_without_data(short_bench, capsys):
    frames = {book.convolutions.plot_conv_passes: conv.conv_passes(device="cpu", batch=1, progress=False),
              book.convolutions.plot_conv_channels: conv.conv_channels(device="cpu", channels=[7, 8, 64], size=8,
                                                           progress=False),
              book.convolutions.plot_first_layer: conv.conv_first_layer(device="cpu", size=16, progress=False),
              book.convolutions.plot_conv_layout: conv.conv_layout(device="cpu", progress=False),
              book.convolutions.plot_conv_params: conv.conv_params(device="cpu", progress=False)}
    for fn, frame in frames.items():
        assert "live on CPU" in _heading(fn(frame))
        assert note_of(fn(None, missing("no recording yet"))) == "No recording yet: No recording yet"
    hand = conv.conv_params(device="cpu", progress=False)
    hand.attrs = {}
    with pytest.raises(ValueError, match="source"):
        book.convolutions.plot_conv_params(hand)


@needs_deepbench
def test_then_now_figure_draws_published_and_ours(short_bench, capsys):
    then = pk.provenance.published_counterparts("conv_deepbench")
    fig = book.convolutions.plot_conv_then_now({"ours": None, **then}, only="ours")
    assert "published by Baidu DeepBench" in _heading(fig)
    assert "Every shape drawn: ours has no data" in capsys.readouterr().out
    ours = conv.conv_deepbench(device="cpu", shapes=[(14, 14, 512, 16, 192, 1, 1, 0, 0, 1, 1)], progress=False)
    fig = book.convolutions.plot_conv_then_now({"ours": ours, **then}, only="ours")
    assert "ours: live on CPU" in _heading(fig) and len(fig.axes[2].get_xticks()) == 1
    assert note_of(book.convolutions.plot_conv_then_now({"ours": None})).startswith("Nothing to draw")
    with pytest.raises(ValueError, match="only"):
        book.convolutions.plot_conv_then_now(then, only="mine")


@needs_deepbench
def test_speedups_of_convolutions_match_on_deepbenchs_columns():
    then = pk.provenance.published_counterparts("conv_deepbench")
    v100, p100 = then[V100_PUBLISHED], then["P100-PCIe, 2018"]
    out = pk.then_now.speedups(v100, p100, on=pk.then_now.CONV_SHAPE)
    assert len(out) == v100[pk.then_now.CONV_SHAPE].drop_duplicates().shape[0]
    assert out["speedup"].median() > 1  # the V100's Tensor Cores beat the P100's FP32 math
    data = pk.then_now.speedups(v100, p100, on=pk.then_now.CONV_SHAPE, column="bwd_inputs_time_s")
    assert len(data) < len(out) and not math.isnan(data["speedup"].median())  # first layers have no dgrad


def test_summaries_of_published_convolutions_on_made_up_frames():
    """What §1, §2 and §6 print from DeepBench's rows, on frames whose answers are known."""
    frame = pd.DataFrame({"C": [1, 3, 64, 128, 256], "ratio": [0.1, 0.5, 0.9, 1.1, 1.3]})
    assert conv_analysis.share_within(frame, 0.8, 1.25) == pytest.approx(0.4)
    assert conv_analysis.furthest_off(frame, 2)["C"].tolist() == [1, 3]
    assert conv_analysis.share_within(None) is None and conv_analysis.furthest_off(None) is None
    with pytest.raises(ValueError, match="n"):
        conv_analysis.furthest_off(frame, 0)
    speed = pd.DataFrame({"C": [1, 3, 8, 64, 128], "speedup": [0.2, 0.4, 2.0, 3.0, 4.0]})
    assert conv_analysis.speedup_by_channels(speed, 8) == {True: 3.0, False: pytest.approx(0.3)}
    assert conv_analysis.speedup_by_channels(speed[speed["C"] >= 8]) == {True: 3.0, False: None}
    shape = dict(zip(pk.then_now.CONV_SHAPE, (56, 56, 64, 16, 64, 3, 3, 1, 1, 1, 1, "float16")))
    old = pd.DataFrame([dict(shape, time_s=4.0, bwd_params_time_s=6.0), dict(shape, K=128, time_s=8.0)])
    new = old.assign(time_s=old["time_s"] / 2, bwd_params_time_s=old["bwd_params_time_s"] / 3)
    assert conv_analysis.median_speedup(new, old) == pytest.approx(2.0)
    assert conv_analysis.median_speedup(new, old, column="bwd_params_time_s") == pytest.approx(3.0)
    assert conv_analysis.median_speedup(new, old.assign(C=1)) is None  # no shape in common
    assert conv_analysis.median_speedup(None, old) is None
    assert conv.predicted_published(None, pk.device_spec("V100-SXM2")) is None


def _drawn_texts(fig) -> list:
    """(text, window box) of every text ``fig`` draws: titles, labels, legends, annotations, its
    caption, and the tick labels inside each axis' view (those outside are not drawn)."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    texts = list(fig.texts) + [t for lg in fig.legends for t in lg.get_texts()]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += ax.get_legend().get_texts() if ax.get_legend() else []
        for axis, i in ((ax.xaxis, 0), (ax.yaxis, 1)):
            lo, hi = sorted(axis.get_view_interval())
            texts += [t for t in axis.get_ticklabels(which="both") if lo <= t.get_position()[i] <= hi]
    if fig._suptitle is not None and fig._suptitle not in texts:
        texts.append(fig._suptitle)
    return [(t, t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]


def test_figures_of_the_recordings_keep_their_texts_apart():
    """Drawn from the recordings the chapter shows, with the caption under them, no two texts of a
    figure overlap. The layout figure's legend is an Axes legend: a figure legend hangs from fig.bbox,
    which a tight savefig swaps for the tight box, and the caption under the figure then sits on it."""
    from perfkit.book.frames import recorded

    frames = recorded(NAMES)
    if any(frame is None for frame in frames.values()):
        pytest.skip("the chapter's recordings are not all here")
    then = pk.provenance.published_counterparts("conv_deepbench")
    figs = [book.convolutions.plot_conv_passes(frames["conv_passes"]),
            book.convolutions.plot_conv_channels(frames["conv_channels"]),
            book.convolutions.plot_first_layer(frames["conv_first_layer"]),
            book.convolutions.plot_conv_layout(frames["conv_layout"]),
            book.convolutions.plot_conv_params(frames["conv_params"]),
            book.convolutions.plot_conv_then_now({"ours": frames["conv_deepbench"], **then}, only="ours")]
    for fig in figs:
        fig.to_png()  # adds the caption
        boxes = _drawn_texts(fig)
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            assert dx <= 0.5 or dy <= 0.5, f"{heading_text(fig)!r}: {a.get_text()!r} overlaps {b.get_text()!r}"
        width = fig.bbox.width
        assert all(-1 <= box.x0 and box.x1 <= width + 1 for _, box in boxes), heading_text(fig)
    assert not figs[3].legends  # the layout figure's legend sits beside its right panel
