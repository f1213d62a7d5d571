"""Fusion (eager against torch.compile) and a small CNN's time budget: experiments, analyses, figures.

Experiments run on the CPU with a tiny time budget (rows, not timings, are checked); their GPU code
paths run on a fake GPU (made-up timings, no kernels). The byte counts and analyses are checked by
hand on known shapes and made-up frames. One test compiles a graph (~10 s) and is skipped without a
C compiler.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.experiments import REGISTRY  # noqa: E402
from perfkit.experiments import fusion as fu  # noqa: E402
from perfkit.measurement import Measurement  # noqa: E402
from perfkit.plots import fusion as plots  # noqa: E402
from perfkit.provenance import missing, modelled  # noqa: E402
from perfkit.timing import bench  # noqa: E402

NAMES = ["fusion_chains", "convnet_breakdown"]
H100 = pk.device_spec("H100-SXM")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here
no_compiler = pytest.mark.skipif(fu.compiler_missing("cpu") is not None, reason="torch.compile needs a C++ compiler")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def short_bench(monkeypatch):
    monkeypatch.setattr(fu, "_bench", lambda fn, device, label: bench(fn, device=device, label=label, warmup_s=0.0,
                                                                      rep_s=0.002, max_time_s=0.05))


@pytest.fixture
def fake_gpu(monkeypatch):
    """The GPU code paths on a fake H100: made-up timings, no tensors on a GPU. Only rows are checked."""
    timing = Measurement(samples=[1e-3, 1.2e-3, 1.1e-3])
    for name, fake in {"resolve_device": lambda device="auto": "cuda", "current_device": lambda: H100,
                       "_bench": lambda fn, device, label: timing, "ensure_fits": lambda *a, **k: None,
                       "compiler_missing": lambda device="cpu": None,
                       "_chain_fn": lambda *a: (lambda *x: None, [], None), "_compile": lambda *a: (None, 4.5),
                       "_layer_fns": lambda *a: (lambda: None, lambda: None),
                       "_network_fn": lambda *a: (lambda: None)}.items():
        monkeypatch.setattr(fu, name, fake)


def test_the_experiments_are_registered_for_the_recorder():
    assert "fusion" in NAMES[0] and "conv" in NAMES[1]
    for name in NAMES:
        exp = REGISTRY[name]
        assert "cuda" in exp.needs and "time_s" in exp.columns and "predicted_s" in exp.columns
        assert all(isinstance(v, str) and v for v in exp.columns.values())


def test_chain_bytes_by_hand():
    b, o, s = 8, 16, 10
    es, C = b * o * s * s * 2, o  # float16: 2 bytes per element
    size = (b, 3, o, s)
    assert fu.tail_bytes("conv_bn_relu", size) == 2 * es + 32 * C + 2 * es  # batch norm + ReLU, eager
    assert fu.tail_bytes("conv_bn_relu", size, fused=True) == 2 * es + 32 * C
    both = fu.tail_bytes("conv_bn_relu", size, phase="forward+backward")
    assert both == 4 * es + 32 * C + (3 * es + 20 * C) + 3 * es
    fused = fu.tail_bytes("conv_bn_relu", size, phase="forward+backward", fused=True)
    assert fused == 2 * es + 32 * C + 3 * es + 20 * C
    T, O = 64, 32
    E, es = T * O, T * O * 4  # float32
    lin = dict(chain="linear_bias_gelu_dropout", size=(T, 8, O), dtype="float32")
    assert fu.tail_bytes(**lin) == (2 * es + 4 * O) + 2 * es + (2 * es + E)  # bias, GELU, dropout (1-byte mask)
    assert fu.tail_bytes(**lin, fused=True) == 2 * es + 4 * O + E
    back_eager = (es + 4 * O) + 3 * es + (2 * es + E)
    assert fu.tail_bytes(**lin, phase="forward+backward") == 6 * es + 4 * O + E + back_eager
    assert fu.tail_bytes(**lin, phase="forward+backward", fused=True) == (2 * es + 4 * O + E) + (3 * es + 4 * O + E)


@pytest.mark.parametrize("chain", list(fu.CHAINS))
@pytest.mark.parametrize("phase", fu.PHASES)
def test_fusion_saves_bytes_and_the_model_says_it_saves_time(chain, phase):
    for size in fu._GPU_SIZES[chain]:
        eager, fused = (fu.tail_bytes(chain, size, phase=phase, fused=f) for f in (False, True))
        assert 0 < fused < eager
    saved = fu.fusion_savings(fu.predicted_frame("fusion_chains", H100))
    assert len(saved) == 8 and (saved["bytes_saved"] > 0).all()
    assert (saved["predicted_saved_s"] > 0).all() and (saved["predicted_speedup"] > 1).all()
    assert saved["speedup"].isna().all()  # nothing measured


def test_fusion_chains_eager_on_cpu_both_chains(short_bench):
    seen = []
    frame = fu.fusion_chains(device="cpu", chains=list(fu.CHAINS), modes="eager", progress=False, on_row=seen.append)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns) and len(frame) == len(seen) == 4
    assert set(frame["mode"]) == {"eager"} and frame["compile_s"].isna().all()
    assert (frame["time_s"] > 0).all() and frame["predicted_s"].isna().all() and set(frame["dtype"]) == {"float32"}
    assert str(pk.source_of(frame)).startswith("live on CPU")
    assert fu.fusion_savings(frame).empty


@no_compiler
def test_fusion_chains_quick_cpu_run_compiles_one_graph(short_bench):
    frame = fu.fusion_chains(device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns)
    assert len(frame) == 4 and set(frame["chain"]) == {"linear_bias_gelu_dropout"}
    compiled = frame[frame["mode"] == "compiled"]
    assert (compiled["compile_s"] > 0).all() and compiled["compile_s"].nunique() == 1 and (frame["time_s"] > 0).all()
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")
    saved = fu.fusion_savings(frame)
    assert len(saved) == 2 and np.allclose(saved["speedup"], saved["eager_s"] / saved["compiled_s"])
    assert "live (quick sweep) on CPU" in _heading(plots.plot_fusion(frame))


def test_without_a_compiler_the_compiled_rows_are_left_out(monkeypatch, short_bench, capsys):
    monkeypatch.setattr(fu, "compiler_missing", lambda device="cpu": "no cc here")
    frame = fu.fusion_chains(device="cpu", progress=False)
    assert set(frame["mode"]) == {"eager"} and len(frame) == 2
    assert "compiled rows left out: no cc here" in capsys.readouterr().out


def test_a_failing_compile_names_the_chain(monkeypatch, short_bench):
    def broken(fn, **kw):
        def call(*a):
            raise AssertionError("inductor exploded")
        return call

    monkeypatch.setattr(fu, "compiler_missing", lambda device="cpu": None)
    monkeypatch.setattr(torch, "compile", broken)
    with pytest.raises(RuntimeError, match="conv_bn_relu.*inductor exploded"):
        fu.fusion_chains(device="cpu", chains="conv_bn_relu", progress=False)


def test_the_chain_function_is_the_chain():
    forward, (x, w, b), dy = fu._chain_fn("linear_bias_gelu_dropout", (16, 8, 12), "float32", "cpu")
    torch.manual_seed(1)
    y = forward(x, w, b)
    kept = y != 0  # dropout zeroes about 10 %, scales the rest by 1/0.9
    ref = torch.nn.functional.gelu(x @ w.t() + b) / 0.9
    torch.testing.assert_close(y[kept], ref[kept])
    assert 0.7 < kept.float().mean() < 1 and dy.shape == y.shape
    forward, (x, w, g, beta), _ = fu._chain_fn("conv_bn_relu", (2, 3, 4, 5), "float32", "cpu")
    ref = torch.relu(torch.nn.functional.batch_norm(torch.nn.functional.conv2d(x, w, padding=1), None, None, g, beta,
                                                    training=True))
    torch.testing.assert_close(forward(x, w, g, beta), ref)


def test_network_layers_and_counts():
    ops = fu.network_layers(fu.NETWORKS["small"], 4, distinct=False)
    assert len(ops) == 32 and ops[0][1] == "conv" and ops[-1][1] == "linear" and ops[-2][1] == "avgpool"
    layers = fu.network_layers(fu.NETWORKS["small"], 4)
    assert sum(lay[2] for lay in layers) == 32 and len(layers) == 17
    by = {lay[0]: lay for lay in layers}
    assert by["conv 16→16, 32²"][2] == 2 and by["batchnorm 32, 16²"][2] == 3 and by["add 64, 8²"][2] == 1
    assert by["conv 32→64 /2, 16²"][4] == {"out": 64, "stride": 2} and by["avgpool 64, 8²"][3] == (4, 64, 8, 8)
    step = fu._network_fn(fu.NETWORKS["small"], 2, 16, "float32", "cpu")()
    assert len(step) == 9 + 9 * 2 + 2  # conv weights, batch-norm scales and shifts, linear weight and bias
    assert all(torch.isfinite(g).all() for g in step)


def test_convnet_quick_cpu_run(short_bench):
    frame = fu.convnet_breakdown(device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY["convnet_breakdown"].columns) and len(frame) == 17 * 2 + 1
    assert set(frame["network"]) == {"small"} and (frame["time_s"] > 0).all() and frame["predicted_s"].isna().all()
    assert set(frame["category"]) == {"math", "memory", "network"}
    share = fu.memory_share(frame).iloc[0]
    assert 0 < share["memory_share"] < 1 and math.isnan(share["predicted_memory_share"])
    assert share["network_s"] > 0 and share["layers_s"] > 0
    stem = frame[(frame["layer"] == "conv 3→16, 32²") & (frame["phase"] == "backward")].iloc[0]
    assert stem["flops"] == 2 * 16 * 27 * 4 * 32 * 32  # the weight gradient only: no input gradient
    assert "live (quick sweep) on CPU" in _heading(plots.plot_network_breakdown(frame))


def test_memory_share_on_a_made_up_frame():
    rows = [("a", "math", 2, 1.0, 0.5), ("a", "memory", 3, 0.5, 0.5), ("a", "network", 1, 4.0, np.nan),
            ("b", "math", 1, 3.0, np.nan), ("b", "memory", 1, 1.0, 1.0)]
    frame = pd.DataFrame(rows, columns=["network", "category", "count", "time_s", "predicted_s"])
    out = fu.memory_share(frame).set_index("network")
    assert out.loc["a", "memory_share"] == pytest.approx(1.5 / 3.5)
    assert out.loc["a", "predicted_memory_share"] == pytest.approx(1.5 / 2.5)
    assert out.loc["a", "layers_s"] == pytest.approx(3.5) and out.loc["a", "network_s"] == 4.0
    assert out.loc["b", "memory_share"] == pytest.approx(0.25) and math.isnan(out.loc["b", "predicted_memory_share"])
    assert math.isnan(out.loc["b", "network_s"])
    assert (out[["memory_share"]] <= 1).all().all()


def test_the_model_of_a_small_network():
    frame = fu.predicted_frame("convnet_breakdown", H100)
    assert list(frame.columns) == list(REGISTRY["convnet_breakdown"].columns) and frame["time_s"].isna().all()
    layers = frame[frame["category"] != "network"]
    assert (layers["predicted_s"] >= 0).all() and (layers.loc[layers["category"] == "math", "flops"] > 0).all()
    add_back = layers[(layers["kind"] == "add") & (layers["phase"] == "backward")]
    assert (add_back["bytes"] == 0).all() and (add_back["predicted_s"] == 0).all()  # dy passes through
    share = fu.memory_share(frame).set_index("network")
    assert ((share["predicted_memory_share"] > 0) & (share["predicted_memory_share"] < 1)).all()
    assert share.loc["small", "predicted_memory_share"] > share.loc["wide", "predicted_memory_share"]
    step = frame[frame["category"] == "network"].set_index("network")["predicted_s"]
    assert step.to_dict() == pytest.approx(share["predicted_layers_s"].to_dict())
    assert "model of H100-SXM" in _heading(plots.plot_network_breakdown(frame, modelled(H100)))
    assert "model of H100-SXM" in _heading(plots.plot_fusion(fu.predicted_frame("fusion_chains", H100), modelled(H100)))


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_paths_return_the_declared_columns(name, fake_gpu):
    frame = REGISTRY[name](progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns) and frame["predicted_s"].notna().all()
    assert set(frame["dtype"]) == {"float16"}
    if name == "fusion_chains":
        assert len(frame) == 2 * 2 * 2 * 2 and set(frame["chain"]) == set(fu.CHAINS)
        assert (frame.loc[frame["mode"] == "compiled", "compile_s"] == 4.5).all()
    else:
        assert len(frame) == 2 * (17 * 2 + 1) and (frame["batch"] == 128).all()


@pytest.mark.parametrize("call, error, match", [
    (lambda: fu.fusion_chains(device="cpu", chains="attention"), LookupError, "attention"),
    (lambda: fu.convnet_breakdown(device="cpu", networks="resnet50"), LookupError, "resnet50"),
    (lambda: fu.tail_bytes("nope", (1, 2, 3)), LookupError, "nope"),
    (lambda: fu.tail_bytes("conv_bn_relu", (1, 2, 3)), TypeError, "size"),
    (lambda: fu.tail_bytes("linear_bias_gelu_dropout", (1, 0, 3)), ValueError, r"size\[1\]"),
    (lambda: fu.tail_bytes("conv_bn_relu", (1, 2, 3, 4), phase="sideways"), ValueError, "phase"),
    (lambda: fu.fusion_chains(device="cpu", modes=("jit",)), ValueError, "modes"),
    (lambda: fu.fusion_chains(device="tpu"), ValueError, "device"),
    (lambda: fu.convnet_breakdown(device="cpu", batch=0), ValueError, "batch"),
    (lambda: fu.convnet_breakdown(device="cpu", image=30), ValueError, "image"),
    (lambda: fu.predicted_frame("gemm_sizes", H100), ValueError, "experiment"),
])
def test_bad_arguments_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_too_large_a_network_is_refused_before_allocating(monkeypatch):
    def no_alloc(*a, **k):
        raise AssertionError("allocated before the size check")

    monkeypatch.setattr(fu, "_layer_fns", no_alloc)
    monkeypatch.setattr(fu, "_network_fn", no_alloc)
    with pytest.raises(ValueError, match="GiB.*free"):
        fu.convnet_breakdown(device="cpu", batch=10**6, progress=False)


def _heading(fig) -> str:
    titles = [fig._suptitle.get_text() if fig._suptitle else ""] + [ax.get_title() for ax in fig.axes]
    return " ".join(" ".join(titles).split())


def test_figures_refuse_without_data(capsys):
    for fn in (plots.plot_fusion, plots.plot_network_breakdown):
        assert fn(None, missing("no recording yet")) is None
        assert "No figure: no recording yet" in capsys.readouterr().out
