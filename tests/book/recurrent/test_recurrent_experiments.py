"""The recurrent-layer chapter's experiments, helpers and figures.

Quick CPU runs check every experiment's rows (not its timings); the persistent experiment's GPU
code path runs on the CPU with the torch reference standing in for the kernel.
"""

from __future__ import annotations

import functools
import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit import book  # noqa: E402
from perfkit.experiments.registry import REGISTRY, missing_needs
from perfkit.book.recurrent import experiments as rnn  # noqa: E402
from perfkit import placement  # noqa: E402
from perfkit.timing import bench  # noqa: E402

from perfkit.kernels import cupy_rnn as kernel  # noqa: E402
from figure_helpers import figure_named, note_of
from testkit import H100_RECORDED, RECORDED_LABEL, framed, heading_text

CPU_RUNNABLE = ["rnn_combine_time", "rnn_hidden", "rnn_batch", "rnn_cudnn"]

#: Tests that read DeepBench's published tables (kept outside the repository) skip without them.
needs_deepbench = pytest.mark.skipif(
    not all(pk.published_data.has_published(f"deepbench_{k}") for k in ("gemm", "conv", "rnn")),
    reason=pk.published_data.HOW_TO_GET)
quiet = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected with short_bench


def _short(fn, **kw):
    """Real measurements with a tiny time budget (conftest's short_bench, for a cached frame)."""
    return bench(fn, **{**kw, "warmup_s": 0.0, "rep_s": 0.002, "max_time_s": 0.05})


@functools.lru_cache(maxsize=None)
def _cpu_frame(name: str) -> pd.DataFrame:
    with placement.use(timer=_short):
        return REGISTRY[name](device="cpu", quick=True, progress=False)


def test_registered_with_rnn_or_persistent_names_and_needs():
    for name in CPU_RUNNABLE + ["rnn_persistent"]:
        exp = REGISTRY[name]
        assert "rnn" in name or "persistent" in name
        assert all(isinstance(v, str) and v for v in exp.columns.values()), name
    assert REGISTRY["rnn_persistent"].needs == ("cuda", "cupy")
    cudnn = REGISTRY["rnn_cudnn"].columns
    assert list(cudnn)[:7] == ["cell", "hidden", "batch", "dtype", "timesteps", "impl", "time_s"]
    assert "layout" in REGISTRY["rnn_batch"].columns and "note" in REGISTRY["rnn_persistent"].columns


@quiet
@pytest.mark.parametrize("name", CPU_RUNNABLE)
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_run_returns_exactly_the_declared_columns(name):
    frame = _cpu_frame(name)
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    assert frame["hidden"].max() <= 256 and frame.get("timesteps", pd.Series([1])).max() <= 16
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")


@quiet
def test_combine_time_rows():
    frame = _cpu_frame("rnn_combine_time")
    per_step, combined = frame[frame["method"] == "per step"], frame[frame["method"] == "combined"]
    assert len(per_step) == len(combined) and set(frame["cell"]) == {"rnn", "gru", "lstm"}
    assert (per_step["gemms"] == per_step["timesteps"]).all() and (per_step["N"] == per_step["batch"]).all()
    assert (combined["N"] == combined["batch"] * combined["timesteps"]).all() and (combined["gemms"] == 1).all()
    assert (frame["M"] == frame["cell"].map(pk.shapes.RNN_GATES) * frame["hidden"]).all()
    speed = rnn.combine_speedup(frame)
    assert len(speed) == len(combined) and (speed["columns"] == speed["batch"] * speed["timesteps"]).all()
    assert speed["speedup"].to_numpy() == pytest.approx((speed["per_step_s"] / speed["combined_s"]).to_numpy())


@quiet
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_hidden_and_batch_rows():
    hidden = _cpu_frame("rnn_hidden")
    assert dict(zip(hidden["hidden"], hidden["multiple"]))[128] == 128
    assert {h: m for h, m in zip(hidden["hidden"], hidden["multiple"]) if h in (120, 127, 256)} == \
        {120: 8, 127: 1, 256: 256}
    batch = _cpu_frame("rnn_batch")
    assert set(batch["layout"]) == {"NN", "TN"} and {1, 8, 9, 125, 128, 256} <= set(batch["batch"])
    assert (batch["N"] == batch["batch"]).all() and (batch["K"] == batch["hidden"]).all()


@quiet
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cudnn_rows_on_a_cpu_skip_the_cuda_graph():
    frame = _cpu_frame("rnn_cudnn")
    assert set(frame["impl"]) == {"torch cpu", "gemm loop"}  # no "cudnn" label on a CPU, no CUDA graph
    assert set(frame["cell"]) == {"rnn", "gru", "lstm"}
    assert frame["step_s"].to_numpy() == pytest.approx((frame["time_s"] / frame["timesteps"]).to_numpy())
    comparable = rnn.deepbench_comparable(frame)
    assert set(comparable["impl"]) == {"torch cpu"} and comparable.attrs == frame.attrs
    lib = frame[frame["impl"] == "torch cpu"].reset_index(drop=True)
    assert comparable["time_s"].to_numpy() == pytest.approx((lib["time_s"] - lib["input_gemm_s"]).to_numpy())
    assert rnn.deepbench_comparable(None) is None


@pytest.mark.parametrize("cls", [torch.nn.RNN, torch.nn.GRU, torch.nn.LSTM])
def test_gemm_loop_is_the_torch_layer(cls):
    torch.manual_seed(0)
    layer, x = cls(6, 10), torch.randn(5, 3, 6)
    with torch.no_grad():
        torch.testing.assert_close(rnn.gemm_loop(layer, x), layer(x)[0], atol=1e-5, rtol=1e-5)
        xp = torch.nn.functional.linear(x, layer.weight_ih_l0, layer.bias_ih_l0)
        torch.testing.assert_close(rnn.gemm_loop(layer, xp, input_projection=False), layer(x)[0],
                                   atol=1e-5, rtol=1e-5)


def test_gemm_loop_relu_and_no_bias_and_refusals():
    layer, x = torch.nn.RNN(4, 8, nonlinearity="relu", bias=False), torch.randn(3, 2, 4)
    with torch.no_grad():
        torch.testing.assert_close(rnn.gemm_loop(layer, x), layer(x)[0])
    for bad in (torch.nn.LSTM(4, 8, num_layers=2), torch.nn.GRU(4, 8, batch_first=True), torch.nn.Linear(4, 8)):
        with pytest.raises(ValueError, match="module"):
            rnn.gemm_loop(bad, x)


@pytest.mark.parametrize("name", CPU_RUNNABLE[:3])
def test_bad_cell_hidden_batch_name_the_parameter(name):
    run = REGISTRY[name]
    with pytest.raises(ValueError, match="cell"):
        run(cell="transformer", device="cpu")
    with pytest.raises(ValueError, match="hidden"):
        run(hidden=0, device="cpu")
    with pytest.raises(ValueError, match="batch"):
        run(batch=(4, 0), device="cpu")


def test_bad_layers_and_persistent_arguments_name_the_parameter():
    for layer, param in [(("gruu", 8, 2, 2), "cell"), (("lstm", 0, 2, 2), "hidden"), (("lstm", 8, -1, 2), "batch"),
                         (("lstm", 8, 2, 0), "timesteps")]:
        with pytest.raises(ValueError, match=param):
            rnn.rnn_cudnn(layers=[layer], device="cpu")
    with pytest.raises(ValueError, match="hidden"):
        rnn.rnn_persistent(hidden=0, device="cpu")
    with pytest.raises(ValueError, match="batch"):
        rnn.rnn_persistent(batch=0, device="cpu")
    with pytest.raises(ValueError, match="timesteps"):
        rnn.rnn_combine_time(timesteps=0, device="cpu")
    with pytest.raises(TypeError, match="hidden"):
        rnn.rnn_hidden(hidden=1.5, device="cpu")


def test_too_large_sweeps_are_refused_before_allocating(forbid_allocation):
    forbid_allocation(rnn, "matmul_fn", "matmul_operands", "_layer", "_inputs")
    with pytest.raises(ValueError, match="GiB.*free"):
        rnn.rnn_combine_time(hidden=200_000, batch=64, timesteps=512, device="cpu", progress=False)
    with pytest.raises(ValueError, match="GiB.*free"):
        rnn.rnn_batch(hidden=400_000, device="cpu", progress=False)
    with pytest.raises(ValueError, match="GiB.*free"):
        rnn.rnn_cudnn(layers=[("lstm", 100_000, 64, 100)], device="cpu", progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal message")
def test_persistent_needs_a_gpu():
    with pytest.raises(RuntimeError, match="GPU"):
        rnn.rnn_persistent(device="auto", progress=False)
    assert "cuda" in missing_needs(REGISTRY["rnn_persistent"])
    frame, source = pk.run_or_load("rnn_persistent")  # a recording, or None saying why: never a CPU run
    assert frame is None or list(frame.columns) == list(REGISTRY["rnn_persistent"].columns)
    assert frame is not None or "rnn_persistent" in str(source)


@pytest.fixture
def fake_kernel(monkeypatch, short_bench):
    """The persistent experiment's GPU code path on the CPU: the torch reference stands in for the
    kernel, which refuses H > 16 as the real one refuses layers too big for the chip."""
    def fake(xp, w, h0=None):
        if xp.shape[-1] > 16:
            raise ValueError("the fp16 recurrent weights do not fit on chip (fake)")
        return kernel.rnn_reference(xp, w)

    # The seam's fake GPU runs nothing; this test runs the GPU path's real checks on CPU tensors,
    # so it lets the "needs an NVIDIA GPU" check pass on device="cpu".
    monkeypatch.setattr(rnn, "require_gpu", lambda *args, **kwargs: None)
    monkeypatch.setattr(kernel, "persistent_rnn", fake)
    return fake


@quiet
def test_persistent_code_path_checks_then_times_and_records_refusals(fake_kernel):
    frame = rnn.rnn_persistent(hidden=(16, 32), batch=(1, 2), timesteps=3, device="cpu", progress=False)
    assert list(frame.columns) == list(REGISTRY["rnn_persistent"].columns)
    assert len(frame) == 2 * 2 * 3 and set(frame["impl"]) == {"persistent", "cudnn", "gemm loop"}
    refused = frame[frame["note"].str.startswith("refused")]
    assert set(refused["hidden"]) == {32} and set(refused["impl"]) == {"persistent"}
    assert refused[["time_s", "tflops", "step_s"]].isna().all().all()
    timed = frame.drop(refused.index)
    assert timed["time_s"].notna().all() and (timed["tflops"] > 0).all()
    assert timed.loc[timed["impl"] == "persistent", "note"].str.startswith("checked").all()
    assert timed.loc[timed["impl"] == "cudnn", "note"].str.contains("input GEMM").all()
    flops = 2 * timed["hidden"] ** 2 * timed["batch"] * timed["timesteps"]
    assert timed["tflops"].to_numpy() == pytest.approx((flops / timed["time_s"] / 1e12).to_numpy())


@quiet
def test_a_wrong_kernel_is_never_timed(fake_kernel, monkeypatch):
    timed = []
    monkeypatch.setattr(kernel, "persistent_rnn", lambda xp, w, h0=None: kernel.rnn_reference(xp, w) + 0.5)
    spy = lambda fn, **kw: timed.append(fn) or bench(fn, rep_s=0.002, max_time_s=0.05)  # noqa: E731
    with placement.use(timer=spy), pytest.raises(RuntimeError, match="not timing a wrong kernel"):
        rnn.rnn_persistent(hidden=16, batch=1, timesteps=3, device="cpu", progress=False)
    assert not timed


def test_throughput_ratio():
    frame = pd.DataFrame({"cell": "rnn", "hidden": [8, 8, 16, 16], "batch": [1, 32, 1, 32], "dtype": "float16",
                          "tflops": [1.0, 10.0, 2.0, 40.0], "time_s": 1.0})
    assert rnn.throughput_ratio(frame, "batch", 32, 1) == pytest.approx(15.0)  # median of 10 and 20
    assert rnn.throughput_ratio(frame, "batch", 32, 1, hidden=16) == pytest.approx(20.0)
    assert rnn.throughput_ratio(frame, "batch", 64, 1) is None and rnn.throughput_ratio(None, "batch", 2, 1) is None
    layers = pd.DataFrame({"cell": "rnn", "hidden": 8, "timesteps": 5, "dtype": "float16", "batch": [16, 128],
                           "time_s": [1.0, 2.0]})  # published layers: no tflops column
    assert rnn.throughput_ratio(layers, "batch", 128, 16) == pytest.approx(4.0)
    gemms = pd.DataFrame({"M": 64, "N": [16, 16, 32, 32], "K": 64, "dtype": "float16",
                          "layout": ["NN", "TN", "NN", "TN"], "tflops": [2.0, 1.0, 3.0, 2.0]})
    assert rnn.throughput_ratio(gemms, "layout", "NN", "TN", on=["M", "N", "K"]) == pytest.approx(1.75)


@quiet
@pytest.mark.parametrize("name, plot", [("rnn_combine_time", "plot_combine_time"), ("rnn_hidden", "plot_rnn_hidden"),
                                        ("rnn_batch", "plot_rnn_batch"), ("rnn_cudnn", "plot_rnn_layers")])
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_figures_of_cpu_runs_are_labelled_and_none_without_data(name, plot, capsys):
    frame = _cpu_frame(name)
    fig = figure_named(plot)(frame)
    assert isinstance(fig, matplotlib.figure.Figure) and "live (quick sweep) on CPU" in heading_text(fig)
    recorded = framed(frame, H100_RECORDED)
    assert RECORDED_LABEL in " ".join(heading_text(figure_named(plot)(recorded)).split())
    assert note_of(figure_named(plot)(None, "no recording yet")) == "Nothing to draw: No recording yet"
    with pytest.raises(ValueError, match="source="):
        figure_named(plot)(frame.copy().pipe(lambda f: setattr(f, "attrs", {}) or f))


@needs_deepbench
def test_published_figures_draw_without_ours(capsys):
    then = pk.provenance.published_counterparts("rnn_cudnn", dtype="float16")
    fig = book.recurrent.plot_rnn_then_now({"ours": None, **then})
    assert "Baidu DeepBench" in " ".join(heading_text(fig.axes[0]).split())
    assert book.recurrent.plot_layer_minibatch(then) is not None
    assert note_of(book.recurrent.plot_rnn_then_now({"ours": None})).startswith("Nothing to draw")


def test_persistent_figure_marks_refused_shapes():
    rows = [dict(impl=i, hidden=h, batch=b, timesteps=8, dtype="float16", time_s=t, iqr_s=0.0, step_s=t / 8,
                 tflops=2 * h * h * b * 8 / t / 1e12, predicted_s=1e-4, note="")
            for h in (512, 4096) for b in (1, 4) for i in ("persistent", "cudnn", "gemm loop")
            for t in [math.nan if (i == "persistent" and h == 4096) else 1e-4 * b]]
    fig = book.recurrent.plot_persistent(pd.DataFrame(rows), source=RECORDED_LABEL)
    assert len(fig.axes) == 2 and RECORDED_LABEL in " ".join(heading_text(fig).split())
    assert note_of(book.recurrent.plot_persistent(None, "no GPU")) == "Nothing to draw: No GPU"


def test_recurrent_gemm_shapes_follow_the_gates():
    for cell, gates in pk.shapes.RNN_GATES.items():
        assert pk.rnn_gemms(cell, 256, 128, 4, 16) == {"input": (gates * 256, 64, 128),
                                                        "recurrent": (gates * 256, 4, 256)}


@pytest.fixture
def fake_gpu(fake_gpu):
    """The GPU code paths on the CPU: conftest's fake H100 (the seam: made-up timings, its spec,
    its free memory; ``calls`` says how each implementation was timed; layers and inputs on torch's
    meta device); no kernels run.

    Only the *shape* of the rows and how each implementation is timed are checked.
    """
    return fake_gpu.calls


@pytest.mark.parametrize("name", CPU_RUNNABLE)
def test_gpu_code_path_returns_exactly_the_declared_columns(name, fake_gpu):
    frame = REGISTRY[name](quick=name == "rnn_cudnn", progress=False)  # full GPU sweeps, but no kernels
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert set(frame["dtype"]) == {"float16"} and frame["predicted_s"].notna().all()
    if name == "rnn_combine_time":
        assert frame["timesteps"].max() == 512 and set(frame["hidden"]) == {1024, 2560}
    if name == "rnn_hidden":
        assert {1000, 1024, 2560, 2568} <= set(frame["hidden"])
    if name == "rnn_cudnn":
        assert set(frame["impl"]) == {"cudnn", "gemm loop", "gemm loop (CUDA graph)"}
        graph = [kw for kw in fake_gpu if kw.get("cuda_graph")]
        assert len(graph) == len(frame) / 3 and all(kw["flush_l2"] is False for kw in graph)


@needs_deepbench
def test_default_gpu_layers_include_deepbench_training_shapes():
    layers = set(rnn.DEEPBENCH_LAYERS)
    v100 = pk.provenance.published_counterparts("rnn_cudnn", gpus=["V100-SXM2"])["V100-SXM2, 2019"]
    published = set(v100[["cell", "hidden", "batch", "timesteps"]].itertuples(index=False, name=None))
    assert len(layers & published) >= 28
    assert {("rnn", 2560, 16, 50), ("lstm", 2048, 128, 25), ("gru", 1024, 32, 1500)} <= layers & published
