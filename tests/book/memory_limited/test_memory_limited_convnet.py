"""A small CNN's time budget: the ``convnet_breakdown`` experiment, its analysis, its figure.

The experiment runs on the CPU with a tiny time budget (rows, not timings, are checked); its GPU
code path runs on a fake GPU (made-up timings, no kernels). The network's layers are counted by
hand, and the analysis is checked on a made-up frame.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from perfkit.experiments.registry import REGISTRY
from perfkit.book.memory_limited import convnet as cv  # noqa: E402
from perfkit.book.memory_limited import fusion_figures as plots  # noqa: E402
from perfkit.provenance import missing, modelled  # noqa: E402
from figure_helpers import note_of
from testkit import H100, heading_text

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


@pytest.fixture
def fake_gpu(fake_gpu):
    """The GPU code path on conftest's fake H100 (the seam: made-up timings, its spec, its free
    memory; the layers' tensors on torch's meta device)."""
    return fake_gpu


def test_the_experiment_is_registered_for_the_recorder():
    exp = REGISTRY["convnet_breakdown"]
    assert "cuda" in exp.needs and "time_s" in exp.columns and "predicted_s" in exp.columns
    assert all(isinstance(v, str) and v for v in exp.columns.values())


def test_network_layers_and_counts():
    ops = cv.network_layers(cv.NETWORKS["small"], 4, distinct=False)
    assert len(ops) == 32 and ops[0][1] == "conv" and ops[-1][1] == "linear" and ops[-2][1] == "avgpool"
    layers = cv.network_layers(cv.NETWORKS["small"], 4)
    assert sum(lay[2] for lay in layers) == 32 and len(layers) == 17
    by = {lay[0]: lay for lay in layers}
    assert by["conv 16→16, 32²"][2] == 2 and by["batchnorm 32, 16²"][2] == 3 and by["add 64, 8²"][2] == 1
    assert by["conv 32→64 /2, 16²"][4] == {"out": 64, "stride": 2}
    assert by["avgpool 64, 8²"][3] == (4, 64, 8, 8)
    step = cv._network_fn(cv.NETWORKS["small"], 2, 16, "float32", "cpu")()
    assert len(step) == 9 + 9 * 2 + 2  # conv weights, batch-norm scales and shifts, linear weight and bias
    assert all(torch.isfinite(g).all() for g in step)


def test_a_layer_alone_is_the_layer():
    layer = next(lay for lay in cv.network_layers(cv.NETWORKS["small"], 2, 16) if lay[1] == "add")
    forward, backward = cv._layer_fns(layer, "float32", "cpu")
    y = forward()
    assert y.shape == layer[3]
    dx, dother = backward()  # an add passes dy through to both inputs
    torch.testing.assert_close(dx, dother)
    torch.testing.assert_close(backward()[0], dx)  # the graph is kept for the next sample


def test_convnet_quick_cpu_run(short_bench):
    frame = cv.convnet_breakdown(device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY["convnet_breakdown"].columns) and len(frame) == 17 * 2 + 1
    assert set(frame["network"]) == {"small"} and (frame["time_s"] > 0).all()
    assert frame["predicted_s"].isna().all()
    assert set(frame["category"]) == {"math", "memory", "network"}
    share = cv.memory_share(frame).iloc[0]
    assert 0 < share["memory_share"] < 1 and math.isnan(share["predicted_memory_share"])
    assert share["network_s"] > 0 and share["layers_s"] > 0
    stem = frame[(frame["layer"] == "conv 3→16, 32²") & (frame["phase"] == "backward")].iloc[0]
    assert stem["flops"] == 2 * 16 * 27 * 4 * 32 * 32  # the weight gradient only: no input gradient
    assert "live (quick sweep) on CPU" in _heading(plots.plot_network_breakdown(frame))


def test_memory_share_on_a_made_up_frame():
    rows = [("a", "math", 2, 1.0, 0.5), ("a", "memory", 3, 0.5, 0.5), ("a", "network", 1, 4.0, np.nan),
            ("b", "math", 1, 3.0, np.nan), ("b", "memory", 1, 1.0, 1.0)]
    frame = pd.DataFrame(rows, columns=["network", "category", "count", "time_s", "predicted_s"])
    out = cv.memory_share(frame).set_index("network")
    assert out.loc["a", "memory_share"] == pytest.approx(1.5 / 3.5)
    assert out.loc["a", "predicted_memory_share"] == pytest.approx(1.5 / 2.5)
    assert out.loc["a", "layers_s"] == pytest.approx(3.5) and out.loc["a", "network_s"] == 4.0
    assert out.loc["b", "memory_share"] == pytest.approx(0.25)
    assert math.isnan(out.loc["b", "predicted_memory_share"])
    assert math.isnan(out.loc["b", "network_s"])
    assert (out[["memory_share"]] <= 1).all().all()


def test_the_model_of_a_small_network():
    frame = cv.predicted_breakdown(H100)
    assert list(frame.columns) == list(REGISTRY["convnet_breakdown"].columns)
    assert frame["time_s"].isna().all() and set(frame["dtype"]) == {"float16"}
    layers = frame[frame["category"] != "network"]
    assert (layers["predicted_s"] >= 0).all() and (layers.loc[layers["category"] == "math", "flops"] > 0).all()
    add_back = layers[(layers["kind"] == "add") & (layers["phase"] == "backward")]
    assert (add_back["bytes"] == 0).all() and (add_back["predicted_s"] == 0).all()  # dy passes through
    share = cv.memory_share(frame).set_index("network")
    assert ((share["predicted_memory_share"] > 0) & (share["predicted_memory_share"] < 1)).all()
    assert share.loc["small", "predicted_memory_share"] > share.loc["wide", "predicted_memory_share"]
    step = frame[frame["category"] == "network"].set_index("network")["predicted_s"]
    assert step.to_dict() == pytest.approx(share["predicted_layers_s"].to_dict())
    assert "model of H100-SXM" in _heading(plots.plot_network_breakdown(frame, modelled(H100)))


@pytest.mark.usefixtures("fake_gpu")
def test_the_gpu_code_path_returns_the_declared_columns():
    frame = REGISTRY["convnet_breakdown"](progress=False)
    assert list(frame.columns) == list(REGISTRY["convnet_breakdown"].columns)
    assert frame["predicted_s"].notna().all() and set(frame["dtype"]) == {"float16"}
    assert len(frame) == 2 * (17 * 2 + 1) and (frame["batch"] == 128).all()
    keys = ["network", "layer", "phase"]
    model = cv.predicted_breakdown(H100).drop(columns=["time_s", "iqr_s"])
    model = model.sort_values(keys).reset_index(drop=True)
    measured = frame.drop(columns=["time_s", "iqr_s"]).sort_values(keys).reset_index(drop=True)
    assert measured.equals(model)  # the same rows, the same predictions


@pytest.mark.parametrize("call, error, match", [
    (lambda: cv.convnet_breakdown(device="cpu", networks="resnet50"), LookupError, "resnet50"),
    (lambda: cv.convnet_breakdown(device="cpu", batch=0), ValueError, "batch"),
    (lambda: cv.convnet_breakdown(device="cpu", image=30), ValueError, "image"),
    (lambda: cv.convnet_breakdown(device="tpu"), ValueError, "device"),
    (lambda: cv.network_layers((), 4), ValueError, "image"),
    (lambda: cv.network_layers((16, 0), 4), ValueError, "widths"),
    (lambda: cv.predicted_breakdown(H100, dtype="int8"), ValueError, "dtype"),
])
def test_bad_arguments_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_too_large_a_network_is_refused_before_allocating(forbid_allocation):
    forbid_allocation(cv, "_layer_fns", "_network_fn")
    with pytest.raises(ValueError, match="GiB.*free"):
        cv.convnet_breakdown(device="cpu", batch=10**6, progress=False)


def _heading(fig) -> str:
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def test_the_figure_refuses_without_data(capsys):
    assert note_of(plots.plot_network_breakdown(None, missing("no recording yet"))) == "No recording yet: No recording yet"
