"""The memory-limited layers chapter's experiments, analyses and figures.

Experiments run on the CPU with a tiny time budget (rows and byte counts, not timings, are
checked), and on their GPU code path with a fake GPU (made-up timings, no kernels). The backward
kernels they time are checked against autograd. Analyses are checked on hand-built frames whose
answers are known.
"""

from __future__ import annotations


import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit import book  # noqa: E402
from perfkit.experiments.registry import REGISTRY
from perfkit.book.memory_limited import experiments as memory  # noqa: E402
from perfkit.provenance import modelled  # noqa: E402
from figure_helpers import note_of

from testkit import heading_text

NAMES = ["activation_sizes", "batchnorm_sizes", "pool_sizes"]
SMALL = {"activation_sizes": dict(elements=[256, 4096]), "batchnorm_sizes": dict(shapes=[(2, 4, 4, 4), (4, 4, 8, 8)]),
         "pool_sizes": dict(shapes=[(1, 4, 8, 8), (2, 4, 16, 16)])}
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


@pytest.fixture
def asked_bytes(fake_gpu, monkeypatch):
    """The GPU code paths on the shared fake H100 (conftest's ``fake_gpu``: tensors on torch's meta
    device), batch norm's builder stubbed. The byte counts ``ensure_fits`` was asked about
    (checked against the H100's free memory) are kept in the returned list."""
    asked: list[int] = []
    fits = memory.ensure_fits

    def ensure_fits(n, *args, **kwargs):  # a spy: the real check still runs
        asked.append(n)
        return fits(n, *args, **kwargs)

    # batch norm's impl is the autograd node that ran: cuDNN's on a GPU, never on meta
    fake_gpu.stub(memory, ensure_fits=ensure_fits,
                  _batchnorm_fns=lambda *a: (lambda: None, lambda: None, "CudnnBatchNormBackward0"))
    return asked


def test_the_experiments_are_registered_for_the_recorder():
    words = {"activation_sizes": ("activation", "relu"), "batchnorm_sizes": ("batchnorm", "bn"),
             "pool_sizes": ("pool",)}
    for name in NAMES:
        exp = REGISTRY[name]
        assert any(w in name for w in words[name]) and exp.needs == ("cuda",)
        assert {"pass", "dtype", "time_s", "iqr_s", "gbps", "predicted_s"} <= set(exp.columns)
        assert all(isinstance(v, str) and v for v in exp.columns.values())
    assert {"bytes_persistent", "bytes_two_pass", "layout", "impl"} <= set(REGISTRY["batchnorm_sizes"].columns)
    assert {"bytes", "indices_itemsize", "window"} <= set(REGISTRY["pool_sizes"].columns)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_runs_return_the_declared_columns(name, short_bench):
    frame = REGISTRY[name](device="cpu", quick=True, progress=False, **SMALL[name])
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    assert frame["predicted_s"].isna().all()  # the GPU model is not applied to a CPU
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")
    nbytes = frame["bytes_persistent"] if name == "batchnorm_sizes" else frame["bytes"]
    assert np.allclose(frame["gbps"], nbytes / frame["time_s"] / 1e9)


def test_activation_rows_take_their_bytes_from_the_model(short_bench):
    seen = []
    frame = memory.activation_sizes(device="cpu", ops=("relu", "gelu"), elements=[64, 1024], progress=False,
                                    on_row=seen.append)
    assert len(seen) == len(frame) == 2 * 2 * 2
    for r in frame.to_dict("records"):
        assert r["bytes"] == pk.layer_bytes(r["op"], (r["elements"],), "float32", pass_=r["pass"])
        assert r["bytes"] == (2 if r["pass"] == "forward" else 3) * 4 * r["elements"]


def test_batchnorm_rows_carry_both_byte_models(short_bench):
    frame = memory.batchnorm_sizes(device="cpu", shapes=[(2, 4, 4, 4)], progress=False)
    assert len(frame) == 2 * 2 and set(frame["layout"]) == {"NCHW", "NHWC"}
    for r in frame.to_dict("records"):
        shape = (r["N"], r["C"], r["H"], r["W"])
        assert r["bytes_persistent"] == pk.layer_bytes("batchnorm", shape, "float32", pass_=r["pass"])
        assert r["bytes_two_pass"] == pk.layer_bytes("batchnorm", shape, "float32", pass_=r["pass"],
                                                     persistent=False)
        assert r["bytes_two_pass"] > r["bytes_persistent"] and r["impl"].endswith("Backward0")


def test_pool_rows_count_the_int64_indices(short_bench):
    frame = memory.pool_sizes(device="cpu", shapes=[(1, 2, 8, 8)], progress=False)
    assert len(frame) == 2 * 2 * 2
    r = frame.set_index(["kind", "window", "pass"])
    out = 2 * 4 * 4  # 8×8 → 4×4 with both windows
    assert (r["out_elements"] == out).all()
    assert r.loc[("max", "3×3/2, pad 1", "forward"), "bytes"] == 4 * (128 + out) + 8 * out
    assert r.loc[("max", "2×2/2", "backward"), "bytes"] == 4 * (out + 128) + 8 * out
    assert r.loc[("avg", "2×2/2", "forward"), "bytes"] == 4 * (128 + out)
    assert r.loc[("avg", "3×3/2, pad 1", "backward"), "indices_itemsize"] == 0


@pytest.mark.parametrize("op", memory.ACTIVATION_OPS)
def test_the_timed_activation_backward_is_autograds(op):
    n = 1000
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=gen).requires_grad_(True)
    dy = torch.randn(n, generator=gen)
    forward = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
    expected, = torch.autograd.grad(forward[op](x), x, dy)
    got = memory._activation_fn(op, "backward", n, "float32", "cpu")()
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(memory._activation_fn(op, "forward", n, "float32", "cpu")(), forward[op](x.detach()))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("window", list(memory.POOL_WINDOWS))
def test_the_timed_pool_backward_is_autograds(kind, window):
    shape = (2, 3, 10, 10)
    k, s, p = memory.POOL_WINDOWS[window]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).requires_grad_(True)
    pool = torch.nn.functional.max_pool2d if kind == "max" else torch.nn.functional.avg_pool2d
    y = pool(x, k, s, p)
    dy = torch.randn(y.shape, generator=gen)
    expected, = torch.autograd.grad(y, x, dy)
    assert torch.allclose(memory._pool_fn(kind, window, "backward", shape, "float32", "cpu")(), expected, atol=1e-6)
    forward = memory._pool_fn(kind, window, "forward", shape, "float32", "cpu")()
    assert torch.equal(forward[0] if kind == "max" else forward, y.detach())
    if kind == "max":
        assert forward[1].dtype == torch.int64 and forward[1].element_size() == memory.POOL_INDEX_ITEMSIZE


@pytest.mark.parametrize("layout", memory.LAYOUTS)
def test_the_timed_batchnorm_is_training_mode(layout):
    forward, backward, impl = memory._batchnorm_fns((4, 3, 5, 5), layout, "float32", "cpu")
    y = forward()
    per_channel = y.detach().transpose(0, 1).reshape(3, -1)
    assert torch.allclose(per_channel.mean(1), torch.zeros(3), atol=1e-5)  # normalised by the batch statistics
    assert y.is_contiguous(memory_format=torch.channels_last if layout == "NHWC" else torch.contiguous_format)
    dx, = backward()
    assert dx.shape == (4, 3, 5, 5) and torch.allclose(dx.sum((0, 2, 3)), torch.zeros(3), atol=1e-4)
    assert "BatchNorm" in impl


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_paths_fit_the_recorders_budget(name, asked_bytes):
    frame = REGISTRY[name](progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns)
    assert set(frame["dtype"]) == {"bfloat16"} and frame["predicted_s"].notna().all()
    assert len(frame) * 0.3 <= 20  # ≤ 20 s on an H100 at ~0.3 s per bench point
    assert max(asked_bytes) < 80e9  # the full sweep fits in an 80 GB GPU
    if name == "activation_sizes":
        assert frame["elements"].min() == 2**14 and frame["elements"].max() == 2**28
        h100 = pk.device_spec("H100-SXM")
        r = frame.iloc[-1]
        assert r["predicted_s"] == pytest.approx(pk.predict_layer_time(r["op"], (r["elements"],), "bfloat16", h100,
                                                                        pass_=r["pass"]))
    if name == "batchnorm_sizes":
        assert set(frame["impl"]) == {"CudnnBatchNormBackward0"}
        assert (frame["predicted_two_pass_s"] > frame["predicted_s"]).all()
    quick = REGISTRY[name](quick=True, progress=False)
    assert 0 < len(quick) < len(frame)


@pytest.mark.parametrize("call, error, match", [
    (lambda: memory.activation_sizes(device="cpu", ops=["swish"]), ValueError, "ops"),
    (lambda: memory.activation_sizes(device="cpu", ops="relu"), TypeError, "ops"),
    (lambda: memory.activation_sizes(device="cpu", elements=[0]), ValueError, "elements"),
    (lambda: memory.activation_sizes(device="cpu", dtype="int8"), ValueError, "dtype"),
    (lambda: memory.batchnorm_sizes(device="cpu", shapes=[(1, 2, 3)]), TypeError, "shapes"),
    (lambda: memory.batchnorm_sizes(device="cpu", layouts=["NHCW"]), ValueError, "layouts"),
    (lambda: memory.pool_sizes(device="cpu", windows=["5×5"]), ValueError, "windows"),
    (lambda: memory.pool_sizes(device="cpu", kinds=["lp"]), ValueError, "kinds"),
    (lambda: memory.pool_sizes(device="cpu", shapes=[(1, 1, 1, 1)], windows=["2×2/2"]), ValueError, "kernel_size"),
    (lambda: memory.pool_sizes(device="tpu"), ValueError, "device"),
])
def test_bad_arguments_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_too_large_sweeps_are_refused_before_allocating(forbid_allocation):
    forbid_allocation(memory, "_activation_fn", "_batchnorm_fns", "_pool_fn")
    with pytest.raises(ValueError, match="GiB.*free"):
        memory.activation_sizes(device="cpu", elements=[2**44], progress=False)
    with pytest.raises(ValueError, match="GiB.*free"):
        memory.batchnorm_sizes(device="cpu", shapes=[(4096, 512, 1024, 1024)], progress=False)
    with pytest.raises(ValueError, match="GiB.*free"):
        memory.pool_sizes(device="cpu", shapes=[(4096, 512, 1024, 1024)], progress=False)


def test_interrupted_sweep_keeps_measured_rows(short_bench):
    kept = []

    def on_row(row):
        kept.append(row)
        if len(kept) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        memory.activation_sizes(device="cpu", elements=[64, 128, 256, 512], progress=False, on_row=on_row)
    assert [r["elements"] for r in kept] == [64, 128, 256]


def _made_up(bandwidth=2e12, fixed=5e-6, sizes=2.0 ** np.arange(10, 31, 2)):
    """A sweep with a known answer: time = fixed + bytes / bandwidth for two groups."""
    rows = [{"op": op, "pass": "forward", "bytes": b, "time_s": fixed + b / (bandwidth * k)}
            for op, k in (("relu", 1.0), ("gelu", 0.5)) for b in sizes]
    return pd.DataFrame(rows)


def test_bandwidth_fit_recovers_a_known_line():
    fits = memory.bandwidth_fit(_made_up(), ["op"], ceiling=4e12).set_index("op")
    assert fits.loc["relu", "bandwidth"] == pytest.approx(2e12, rel=1e-3)
    assert fits.loc["gelu", "bandwidth"] == pytest.approx(1e12, rel=1e-3)
    assert fits.loc["relu", "fraction"] == pytest.approx(0.5, rel=1e-3)
    assert fits.loc["relu", "r2"] == pytest.approx(1, abs=1e-6)
    floor = 5e-6 + 2.0**10 / 2e12
    assert fits.loc["relu", "floor_s"] == pytest.approx(floor)
    assert fits.loc["relu", "knee_bytes"] == pytest.approx(floor * 2e12, rel=1e-3)  # ≈ 10 MB: flat, then ∝ bytes
    assert fits.loc["relu", "fit_points"] < fits.loc["relu", "points"]
    assert fits.loc["relu", "gbps"] == pytest.approx(2000, rel=1e-3)


def test_bandwidth_fit_gives_nan_without_a_proportional_part():
    flat = pd.DataFrame({"bytes": [1e3, 1e4, 1e5], "time_s": [5e-6, 5.1e-6, 5.2e-6]})
    out = memory.bandwidth_fit(flat).iloc[0]
    assert np.isnan(out["bandwidth"]) and np.isnan(out["knee_bytes"]) and out["fit_points"] == 0
    with pytest.raises(ValueError, match="column"):
        memory.bandwidth_fit(flat, ["op"])
    with pytest.raises(ValueError, match="proportional_at"):
        memory.bandwidth_fit(flat, proportional_at=1)
    with pytest.raises(TypeError, match="frame"):
        memory.bandwidth_fit([1, 2])


def _bn_frame(times: dict) -> pd.DataFrame:
    rows = []
    for (lay, p, e), t in times.items():
        shape = (e // 64, 64, 1, 1)
        rows.append({"layout": lay, "pass": p, "impl": "NativeBatchNormBackward0", "elements": e, "time_s": t,
                     "C": 64, **{f"bytes_{k}": pk.layer_bytes("batchnorm", shape, "bfloat16", pass_=p, persistent=v)
                                 for k, v in (("persistent", True), ("two_pass", False))}})
    return pd.DataFrame(rows)


def test_batchnorm_bytes_says_which_model_the_time_is_closer_to():
    e = 64 * 2**20
    bw = 2e12
    persistent = pk.layer_bytes("batchnorm", (e // 64, 64, 1, 1), "bfloat16")
    two_pass = pk.layer_bytes("batchnorm", (e // 64, 64, 1, 1), "bfloat16", persistent=False)
    frame = _bn_frame({("NHWC", "forward", e): persistent / bw, ("NCHW", "forward", e): two_pass / bw,
                       ("NHWC", "forward", 64): 1e-6})
    out = memory.batchnorm_bytes(frame, bw).set_index("layout")
    assert len(out) == 2  # the largest size only
    assert out.loc["NHWC", "closer_to"] == "persistent" and out.loc["NHWC", "position"] == pytest.approx(0)
    assert out.loc["NCHW", "closer_to"] == "two-pass" and out.loc["NCHW", "position"] == pytest.approx(1)
    assert out.loc["NHWC", "two_pass_ratio"] == pytest.approx(two_pass / persistent)
    with pytest.raises(ValueError, match="bandwidth"):
        memory.batchnorm_bytes(frame, 0)


def test_layout_speedup_divides_nchw_by_nhwc():
    frame = _bn_frame({("NCHW", "forward", 64): 3.0, ("NHWC", "forward", 64): 2.0,
                       ("NCHW", "backward", 64): 4.0, ("NHWC", "backward", 64): 4.0})
    out = memory.layout_speedup(frame).set_index("pass")
    assert out.loc["forward", "speedup"] == 1.5 and out.loc["backward", "speedup"] == 1.0
    assert out.loc["forward+backward", "speedup"] == pytest.approx(7 / 6)
    with pytest.raises(ValueError, match="both layouts"):
        memory.layout_speedup(frame[frame["layout"] == "NCHW"])


def test_byte_table_reproduces_nvidias_intensities():
    h100 = pk.device_spec("H100-SXM")
    table = memory.byte_table((32, 64, 112, 112), "float16", [h100]).set_index("layer")
    assert table.loc["ReLU", "forward_per_element"] == 4 and table.loc["ReLU", "backward_per_element"] == 6
    assert table.loc["batch norm, two-pass", "forward_bytes"] > table.loc["batch norm, persistent", "forward_bytes"]
    assert table.loc["max pool 3×3/2, int64 indices", "forward_per_element"] == pytest.approx(2.5 + 2)
    assert table.loc["ReLU", "H100-SXM forward_s"] == pytest.approx(
        pk.memory_time(table.loc["ReLU", "forward_bytes"], h100))
    assert 1 / table.loc["ReLU", "forward_per_element"] == 0.25  # NVIDIA's Table 1: 1 FLOP per 4 bytes
    with pytest.raises(TypeError):
        memory.byte_table((1, 2, 3, 4), "float16", ["H100"])


def test_predicted_activations_is_the_model_alone():
    h100 = pk.device_spec("H100-SXM")
    frame = memory.predicted_activations(h100, ops=("relu",), elements=[2**20, 2**28])
    assert list(frame.columns) == list(REGISTRY["activation_sizes"].columns)
    assert frame["time_s"].isna().all() and frame["gbps"].isna().all()
    big = frame[(frame["elements"] == 2**28) & (frame["pass"] == "forward")].iloc[0]
    assert big["predicted_s"] == pytest.approx(pk.predict_layer_time("relu", (2**28,), "bfloat16", h100))
    assert big["bytes"] / big["predicted_s"] > 0.8 * h100.mem_bandwidth  # large tensors: near the bandwidth


def test_figures_are_captioned_with_their_sources(short_bench):
    acts = memory.activation_sizes(device="cpu", ops=("relu",), elements=[256, 65536], progress=False)
    fits = memory.bandwidth_fit(acts, ["op", "pass"], proportional_at=1.5)
    fig = book.memory_limited.plot_activation_sizes(acts, fits=fits, ceiling=1e10, ceiling_source="this CPU's copy")
    title = heading_text(fig)
    assert "live on CPU" in title and "copy ceiling: this CPU's copy" in title
    with pytest.raises(ValueError, match="ceiling_source"):
        book.memory_limited.plot_activation_sizes(acts, ceiling=1e10)
    h100 = pk.device_spec("H100-SXM")
    model = book.memory_limited.plot_activation_sizes(memory.predicted_activations(h100), modelled(h100))
    assert "model of H100-SXM" in heading_text(model) and "model only" in heading_text(model)
    bn = book.memory_limited.plot_batchnorm_sizes(memory.batchnorm_sizes(device="cpu", shapes=[(2, 4, 4, 4), (4, 4, 8, 8)],
                                                           progress=False))
    assert "live on CPU" in heading_text(bn) and len(bn.axes) == 2  # GB/s, one panel per pass
    assert [ax.get_title() for ax in bn.axes] == ["forward", "backward"]
    pools = book.memory_limited.plot_pool_sizes(memory.pool_sizes(device="cpu", shapes=[(1, 2, 8, 8)], kinds=("avg",),
                                                    progress=False))
    assert "Pooling" in heading_text(pools)


@pytest.mark.parametrize("plot", [book.memory_limited.plot_activation_sizes, book.memory_limited.plot_batchnorm_sizes, book.memory_limited.plot_pool_sizes])
def test_no_data_prints_one_line(plot, capsys):
    assert note_of(plot(None, pk.provenance.missing("no recording yet"))) == "No recording yet: No recording yet"
    assert capsys.readouterr().out == ""
