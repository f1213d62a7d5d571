"""Then vs now: published counterparts of experiments, layout spread, speedups, and their figures."""

from __future__ import annotations

import pandas as pd
import pytest

import perfkit as pk
from perfkit.provenance import THEN_GPUS, missing, published_counterparts
from perfkit.published_data import has_published
from perfkit.then_now import COUNTERPARTS, counterpart, layout_spread, speedups, spread_summary
from figure_helpers import note_of
from testkit import H100_NAME, V100_PUBLISHED, framed, heading_text


def _gemms(rows, device="H100-SXM"):
    """A hand-built GEMM frame with live metadata: rows of (M, N, K, layout, time_s)."""
    f = pd.DataFrame(rows, columns=["M", "N", "K", "layout", "time_s"]).assign(dtype="float16")
    f["tflops"] = 2 * f["M"] * f["N"] * f["K"] / f["time_s"] / 1e12
    return framed(f, live=True, device=device, device_name=H100_NAME, measured_at="2026-11-22T10:00:00+00:00")


@pytest.mark.published
def test_counterparts_of_small_n_are_the_minibatch_shapes():
    then = published_counterparts("gemm_small_n")
    assert list(then) == [V100_PUBLISHED, "P100-PCIe, 2018"] and len(THEN_GPUS) == 2
    for rows in then.values():
        assert list(rows["N"]) == [16, 32, 64, 128]
        assert (rows["M"] == 2560).all() and (rows["K"] == 2560).all()
        assert set(rows["layout"]) == {"NN"} and set(rows["dtype"]) == {"float16"}
        assert pk.source_of(rows).kind == "published"
    fp32 = published_counterparts("gemm_small_n", dtype="fp32", gpus=["V100-SXM2"])
    assert list(fp32) == [V100_PUBLISHED] and set(fp32[V100_PUBLISHED]["dtype"]) == {"float32"}


@pytest.mark.published
def test_counterparts_of_transposes_have_two_layouts_per_shape():
    rows = published_counterparts("gemm_transposes")[V100_PUBLISHED]
    assert (rows.groupby(["M", "N", "K"])["layout"].nunique() == 2).all() and len(rows) == 2 * 77


def test_counterpart_refuses_unknown_experiments_and_bad_arguments():
    with pytest.raises(LookupError, match="no published counterpart; these do: " + ", ".join(COUNTERPARTS)):
        published_counterparts("gemm_alignment")
    with pytest.raises(TypeError, match="gpus must be a list"):
        published_counterparts("gemm_small_n", gpus="V100-SXM2")
    if has_published("deepbench_gemm"):  # a GPU DeepBench did not measure
        with pytest.raises(LookupError, match="'deepbench_gemm' has no rows for GPU 'A100-SXM4-80GB'; its GPUs: V100"):
            published_counterparts("gemm_small_n", gpus=["A100-SXM4-80GB"])
    with pytest.raises(ValueError, match=r"frame lacks the column\(s\) \['layout'\]"):
        counterpart("gemm_small_n", pd.DataFrame({"M": [1], "N": [1], "K": [1], "dtype": ["float16"],
                                                  "time_s": [1.0]}))


def test_layout_spread_compares_the_slowest_layout_with_the_fastest():
    f = _gemms([(64, 64, 64, "NN", 2e-6), (64, 64, 64, "TN", 5e-6), (64, 64, 64, "NT", 2.5e-6),
                (128, 8, 128, "NN", 1e-6)])  # the second shape has one layout: skipped
    s = layout_spread(f)
    assert len(s) == 1
    row = s.iloc[0]
    assert (row.fastest, row.slowest, row.layouts) == ("NN", "TN", 3)
    assert row.spread == pytest.approx(2.5)
    assert s.attrs["meta"]["device"] == "H100-SXM"  # the spread keeps its frame's metadata
    with pytest.raises(TypeError, match="frame must be a DataFrame"):
        layout_spread([1, 2])
    with pytest.raises(ValueError, match="lacks the column"):
        layout_spread(f.drop(columns="layout"))


@pytest.mark.published
def test_spread_summary_of_deepbench_v100():
    then = published_counterparts("gemm_transposes")
    table = spread_summary({"ours": None, **then}).set_index("name")
    assert list(table.index) == list(then)  # None is left out
    v100 = table.loc[V100_PUBLISHED]
    assert v100["shapes"] == 77 and v100["median_spread"] < 1.1 and v100["worst_spread"] > 2
    assert v100["worst_shape"] == "1024×16×500000"
    with pytest.raises(TypeError, match="frames must be a mapping"):
        spread_summary([then[V100_PUBLISHED]])


@pytest.mark.published
def test_speedups_match_shapes_and_take_each_sides_fastest_layout():
    now = _gemms([(2560, 16, 2560, "NN", 8e-6), (2560, 16, 2560, "TN", 9e-6), (4096, 1, 4096, "NN", 1e-5)])
    then = published_counterparts("gemm_small_n")[V100_PUBLISHED]
    s = speedups(now, then)
    assert list(s[["M", "N", "K"]].itertuples(index=False, name=None)) == [(2560, 16, 2560)]
    v100_16 = then.set_index("N").loc[16, "time_s"]
    assert s["then_s"].iloc[0] == v100_16 and s["speedup"].iloc[0] == pytest.approx(v100_16 / 8e-6)
    assert speedups(now[now["N"] == 1], then).empty


@pytest.mark.published
def test_small_n_figure_draws_published_data_without_ours(capsys):
    then = published_counterparts("gemm_small_n")
    fig = pk.book.gemm.plot_small_n(None, missing("no GPU here"), published=then)
    assert fig is not None
    assert "Published data only: ours: no GPU here" in " ".join(capsys.readouterr().out.split())
    text = heading_text(fig)
    assert "published by Baidu DeepBench, measured on Tesla V100-SXM2" in text and "Tesla P100" in text
    assert note_of(pk.book.gemm.plot_small_n(None, missing("no GPU here"))) == "No recording yet: No GPU here"
    with pytest.raises(TypeError, match="published must be a mapping"):
        pk.book.gemm.plot_small_n(None, published=[then[V100_PUBLISHED]])


@pytest.mark.published
def test_small_n_figure_captions_ours_and_theirs():
    ours = _gemms([(2560, n, 2560, "NN", 1e-5 * (1 + n / 64)) for n in (1, 16, 64)])
    ours = ours.assign(gbps=1.0, predicted_s=float("nan"))
    fig = pk.book.gemm.plot_small_n(ours, published=published_counterparts("gemm_small_n", gpus=["V100-SXM2"]))
    text = heading_text(fig)
    assert "ours: live on NVIDIA H100 80GB HBM3, 2026-11-22" in text
    assert f"{V100_PUBLISHED}: published by Baidu DeepBench" in text
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["NVIDIA H100 80GB HBM3", f"{V100_PUBLISHED} (published)"]


@pytest.mark.published
def test_layout_spread_and_throughput_figures():
    then = published_counterparts("gemm_transposes")
    fig = pk.book.gemm.plot_layout_spread({"ours": None, **then})
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == [f"{V100_PUBLISHED}\nfloat16 (77 shapes)", "P100-PCIe, 2018\nfloat16 (77 shapes)"]
    single = _gemms([(64, 64, 64, "NN", 1e-6)])
    assert note_of(pk.book.gemm.plot_layout_spread({"ours": single})).startswith("Nothing to draw")
    sizes = published_counterparts("gemm_sizes")
    fig = pk.book.gemm.plot_throughput_vs_work(sizes)
    assert [len(line.get_xdata()) for line in fig.axes[0].lines] == [160, 160]
    assert note_of(pk.book.gemm.plot_throughput_vs_work(sizes, dtype="bfloat16")).startswith("Nothing to draw")


@pytest.mark.published
def test_counterparts_of_fc_batch_are_a_4096_layer_forward_gemm():
    for rows in published_counterparts("fc_batch").values():
        assert list(rows["N"]) == [16, 32, 64, 128, 7000]
        assert (rows["M"] == 4096).all() and (rows["K"] == 4096).all() and set(rows["layout"]) == {"NN"}
    v100 = published_counterparts("fc_batch")[V100_PUBLISHED].set_index("N")["tflops"]
    assert v100[7000] > 5 * v100[16]  # memory-bound at batch 16, math-bound at 7000


@pytest.mark.published
def test_counterparts_of_rnn_cudnn_are_published_rnn_layers_with_our_cell_names():
    then = published_counterparts("rnn_cudnn", dtype="float32")
    assert list(then) == [V100_PUBLISHED, "P100-PCIe, 2018"]
    rows = then[V100_PUBLISHED]
    assert set(rows["cell"]) == {"rnn", "gru", "lstm"} and set(rows["dtype"]) == {"float32"}
    assert list(rows[pk.then_now.RNN_SHAPE].columns) == ["cell", "hidden", "batch", "timesteps", "dtype"]
    assert pk.source_of(rows).kind == "published"
    vanilla = rows[(rows["cell"] == "rnn") & (rows["hidden"] == 1760)].set_index("batch")["time_s"]
    assert list(vanilla.index) == [16, 32, 64, 128] and (vanilla > 0).all()
    with pytest.raises(ValueError, match="lacks the column"):
        counterpart("rnn_cudnn", pd.DataFrame({"cell": ["rnn"], "time_s": [1.0]}))


@pytest.mark.published
def test_speedups_of_rnn_layers_match_on_the_rnn_shape():
    then = published_counterparts("rnn_cudnn", dtype="float32")[V100_PUBLISHED]
    now = then.head(3)[pk.then_now.RNN_SHAPE + ["time_s"]].assign(time_s=lambda f: f["time_s"] / 4)
    out = speedups(now, then, on=pk.then_now.RNN_SHAPE)
    assert len(out) == 3 and out["speedup"].round(6).eq(4).all()
    with pytest.raises(TypeError, match="on must be a list of column names"):
        speedups(now, then, on="cell")
    with pytest.raises(ValueError, match="lacks the column"):
        speedups(now, then)  # GEMM columns by default


@pytest.mark.published
def test_counterparts_of_conv_deepbench_are_published_convolutions_in_the_dtype():
    assert pk.then_now.KIND["conv_deepbench"] == "conv" and pk.then_now.KIND["rnn_cudnn"] == "rnn"
    then = published_counterparts("conv_deepbench")
    assert list(then) == [V100_PUBLISHED, "P100-PCIe, 2018"]
    for rows in then.values():
        assert len(rows) == 94 and set(rows["dtype"]) == {"float16"}
        assert pk.source_of(rows).kind == "published"
        assert set(pk.then_now.CONV_SHAPE) <= set(rows.columns)
    assert list(then[V100_PUBLISHED]["row"]) == sorted(then[V100_PUBLISHED]["row"])  # DeepBench's own order
    fp32 = published_counterparts("conv_deepbench", dtype="fp32", gpus=["P100-PCIe"])
    assert set(fp32["P100-PCIe, 2018"]["dtype"]) == {"float32"}
    with pytest.raises(ValueError, match="lacks the column"):
        counterpart("conv_deepbench", pd.DataFrame({"W": [1], "time_s": [1.0]}))


@pytest.mark.published
def test_speedups_of_convolutions_compare_any_time_column():
    then = published_counterparts("conv_deepbench")[V100_PUBLISHED]
    shape = pk.then_now.CONV_SHAPE
    now = then.head(4)[shape + ["time_s", "bwd_params_time_s", "bwd_inputs_time_s"]].assign(
        time_s=lambda f: f["time_s"] / 2, bwd_params_time_s=lambda f: f["bwd_params_time_s"] / 5)
    assert speedups(now, then, on=shape)["speedup"].round(6).eq(2).all()
    assert speedups(now, then, on=shape, column="bwd_params_time_s")["speedup"].round(6).eq(5).all()
    first_layers = speedups(now, then, on=shape, column="bwd_inputs_time_s")
    assert len(first_layers) == 0  # DeepBench ran no backward-data pass for these C = 1 layers
    with pytest.raises(TypeError, match="column"):
        speedups(now, then, on=shape, column=3)
    with pytest.raises(ValueError, match="lacks the column"):
        speedups(now, then, on=shape, column="no_such_time_s")
