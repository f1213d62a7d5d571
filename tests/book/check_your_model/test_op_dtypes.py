"""``model_op_dtypes``: ResNet-50's stem and the LSTM LM's LSTM in float16 and bfloat16.

On the CPU (float32, shrunk: rows are checked, not timings); on its GPU code path with conftest's fake
H100 (made-up timings, the ops built on the meta device, priced by the advisor); the ops are checked to be
the zoo models' own, and the timed backward passes to compute what training computes.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import perfkit as pk
from perfkit.book.check_your_model import experiments as ex
from perfkit.book.check_your_model import op_dtypes
from perfkit.book.workshop.estimate import estimate_run
from perfkit.experiments.registry import REGISTRY
from perfkit.zoo import lstm_lm, resnet50

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


def test_registered_for_the_recorder_by_this_module():
    exp = REGISTRY["model_op_dtypes"]
    assert exp.module == op_dtypes.__name__ and exp.needs == ("cuda",)
    assert {"op", "dtype", "layout", "pass", "shape", "time_s", "iqr_s", "predicted_s"} <= set(exp.columns)


def test_cpu_run_is_float32_only_one_row_per_point(short_bench):
    seen = []
    frame = op_dtypes.model_op_dtypes(device="cpu", progress=False, on_row=seen.append)
    assert list(frame.columns) == list(REGISTRY["model_op_dtypes"].columns)
    assert len(frame) == len(seen) == 2 * 2 + 2  # the stem in two layouts, the LSTM; two passes each
    assert set(frame["dtype"]) == {"float32"}  # a CPU's 16-bit math says nothing about a GPU's
    assert (frame["time_s"] > 0).all() and frame["predicted_s"].isna().all()
    stem = frame[frame["op"] == "resnet50.conv1"]
    assert set(stem["layout"]) == {"NCHW", "NHWC"} and (stem["impl"] == "ConvolutionBackward0").all()
    assert stem["shape"].iloc[0].startswith("x 2×3×32×32, w 64×3×7×7, stride 2")  # MODELS' CPU image
    lstm = frame[frame["op"] == "lstm_lm.lstm"]
    assert set(lstm["layout"]) == {"batch_first"} and "2 layers, hidden 100" in lstm["shape"].iloc[0]
    one = op_dtypes.model_op_dtypes(device="cpu", ops="lstm_lm.lstm", dtypes="bfloat16", progress=False)
    assert len(one) == 2 and set(one["dtype"]) == {"float32"}


def test_the_ops_are_the_zoo_models_own():
    with torch.device("meta"):
        conv1 = resnet50().conv1
        lm = lstm_lm().lstm
    stem = op_dtypes.STEM
    assert (conv1.in_channels, conv1.out_channels, conv1.kernel_size, conv1.stride, conv1.padding, conv1.bias) == (
        stem["in_channels"], stem["out_channels"], (stem["kernel_size"],) * 2, (stem["stride"],) * 2,
        (stem["padding"],) * 2, None)
    built = op_dtypes._lstm(op_dtypes._sizes("lstm_lm.lstm", "cuda")[1], "meta")
    assert str(built) == str(lm) and built.training and built.dropout == lm.dropout == 0.2
    assert op_dtypes._sizes("lstm_lm.lstm", "cuda")[0] == (20, 35) and lm.hidden_size == 1000
    assert op_dtypes._sizes("resnet50.conv1", "cuda")[0] == (32, 3, 224, 224)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_the_stem_backward_is_the_weight_gradient_alone(layout):
    forward, backward, impl = op_dtypes._stem_fns((2, 3, 16, 16), layout, "float32", "cpu")
    y = forward()
    assert y.shape == (2, 64, 8, 8) and y.requires_grad
    assert y.is_contiguous(memory_format=torch.channels_last if layout == "NHWC" else torch.contiguous_format)
    grads = backward()
    assert len(grads) == 1 and grads[0].shape == (64, 3, 7, 7)  # the images need no gradient
    assert impl == "ConvolutionBackward0"


def test_the_lstm_backward_computes_the_input_and_weight_gradients():
    forward, backward, impl = op_dtypes._lstm_fns((3, 5), {"hidden": 8, "layers": 2}, "float32", "cpu")
    assert forward().shape == (3, 5, 8)
    grads = backward()
    assert grads[0].shape == (3, 5, 8) and len(grads) == 1 + 2 * 4  # x, then each layer's four tensors
    assert "Rnn" in impl or "Lstm" in impl  # a fused recurrent kernel on this CPU (oneDNN's)


def test_impl_names_the_kernels_node_through_views():
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    assert op_dtypes._impl(F.conv2d(x, torch.randn(4, 3, 3, 3)).transpose(0, 1) * 2) == "ConvolutionBackward0"
    assert op_dtypes._impl(x * 2) == "unfused"


def test_gpu_code_path_prices_each_op_as_its_model_runs_it(fake_gpu):
    frame = op_dtypes.model_op_dtypes(progress=False)
    assert list(frame.columns) == list(REGISTRY["model_op_dtypes"].columns) and len(frame) == 12
    assert set(frame["dtype"]) == {"float16", "bfloat16"} and (frame["predicted_s"] > 0).all()
    assert "x 32×3×224×224" in frame["shape"].iloc[0]
    h100 = fake_gpu.spec
    lm = pk.advise(*ex.model_inputs("lstm_lm", "cuda", meta=True), "bfloat16", h100).layers
    lstm = lm[lm["layer"] == "lstm"]
    assert "dgrad" in set(lstm["pass"])  # in its model the LSTM's input needs a gradient
    got = frame[(frame["op"] == "lstm_lm.lstm") & (frame["dtype"] == "bfloat16")].set_index("pass")["predicted_s"]
    assert got["forward"] == pytest.approx(lstm.loc[lstm["pass"] == "forward", "predicted_s"].sum())
    assert got["backward"] == pytest.approx(lstm.loc[lstm["pass"] != "forward", "predicted_s"].sum())
    stem = frame[frame["op"] == "resnet50.conv1"].set_index(["dtype", "layout", "pass"])["predicted_s"]
    assert stem["float16", "NCHW", "forward"] > stem["float16", "NHWC", "forward"]  # NCHW pays transposes


def test_the_gpu_sweep_is_predicted_under_20_s_on_an_h200():
    run = estimate_run("model_op_dtypes", pk.device_spec("H200"))
    assert run.points == 12 and run.unpriced == 0 and run.run_s <= 20


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ops=["bert.encoder"]), LookupError, "ops"),
    (dict(ops="relu"), LookupError, "ops"),
    (dict(dtypes=["int8"]), ValueError, "dtypes"),
    (dict(dtypes=[]), ValueError, "dtypes"),
    (dict(layouts=["NCWH"]), ValueError, "layouts"),
    (dict(device="tpu"), ValueError, "device"),
])
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match, forbid_allocation, monkeypatch):
    forbid_allocation(op_dtypes, "_stem_fns", "_lstm_fns", "_predicted", "ensure_fits")
    monkeypatch.setattr(op_dtypes, "sweep", lambda *a, **k: pytest.fail("swept before refusing"))
    with pytest.raises(error, match=match):
        op_dtypes.model_op_dtypes(**{"device": "cpu", **kwargs})


def test_too_large_is_refused_before_allocating(forbid_allocation, monkeypatch):
    forbid_allocation(op_dtypes, "_stem_fns", "_lstm_fns")
    monkeypatch.setitem(ex.MODELS, "resnet50", (*ex.MODELS["resnet50"][:4], (2**16, 3, 2**12, 2**12)))
    with pytest.raises(ValueError, match="GiB.*free"):
        op_dtypes.model_op_dtypes(device="cpu", progress=False)
