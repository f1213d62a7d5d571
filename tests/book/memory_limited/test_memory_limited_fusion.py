"""Fusion (eager against torch.compile): the ``fusion_chains`` experiment, its analysis, its figure.

The experiment runs on the CPU with a tiny time budget (rows, not timings, are checked); its GPU
code path runs on a fake GPU (made-up timings, no kernels). The byte counts and the analysis are
checked by hand on known shapes. One test compiles a graph (~10 s) and is skipped without a C
compiler. The small CNN's time budget is tested in test_convnet.py.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.experiments.registry import REGISTRY  # noqa: E402
from perfkit import placement  # noqa: E402
from perfkit.book.memory_limited import fusion as fu  # noqa: E402
from perfkit.book.memory_limited import fusion_figures as plots  # noqa: E402
from perfkit.provenance import missing, modelled  # noqa: E402
from figure_helpers import note_of
from testkit import H100, heading_text

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here
no_compiler = pytest.mark.skipif(fu.compiler_missing("cpu") is not None,
                                 reason="torch.compile needs a C++ compiler")


@pytest.fixture
def fake_gpu(fake_gpu):
    """The GPU code path on conftest's fake H100 (the seam: made-up timings, its spec, its free
    memory; the chains' tensors on torch's meta device), with compiling stubbed."""
    # torch.compile (inductor, Triton, a C compiler) cannot trace or build kernels for meta tensors
    fake_gpu.stub(fu, compiler_missing=lambda device="cpu": None, _compile=lambda *a: (None, 4.5))
    return fake_gpu


def test_the_experiment_is_registered_for_the_recorder():
    exp = REGISTRY["fusion_chains"]
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
    # bias, GELU, dropout (a 1-byte mask)
    assert fu.tail_bytes(**lin) == (2 * es + 4 * O) + 2 * es + (2 * es + E)
    assert fu.tail_bytes(**lin, fused=True) == 2 * es + 4 * O + E
    back_eager = (es + 4 * O) + 3 * es + (2 * es + E)
    assert fu.tail_bytes(**lin, phase="forward+backward") == 6 * es + 4 * O + E + back_eager
    fused = fu.tail_bytes(**lin, phase="forward+backward", fused=True)
    assert fused == (2 * es + 4 * O + E) + (3 * es + 4 * O + E)


@pytest.mark.parametrize("chain", list(fu.CHAINS))
@pytest.mark.parametrize("phase", fu.PHASES)
def test_fusion_saves_bytes_and_the_model_says_it_saves_time(chain, phase):
    for size in fu._GPU_SIZES[chain]:
        eager = fu.tail_bytes(chain, size, phase=phase)
        fused = fu.tail_bytes(chain, size, phase=phase, fused=True)
        assert 0 < fused < eager
    saved = fu.fusion_savings(fu.predicted_chains(H100))
    assert len(saved) == 8 and (saved["bytes_saved"] > 0).all()
    assert (saved["predicted_saved_s"] > 0).all() and (saved["predicted_speedup"] > 1).all()
    assert saved["speedup"].isna().all()  # nothing measured


def test_the_model_of_the_chains():
    frame = fu.predicted_chains(H100)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns) and len(frame) == 16
    assert frame["time_s"].isna().all() and (frame["predicted_s"] > 0).all()
    assert set(frame["dtype"]) == {"float16"}
    assert set(fu.predicted_chains(H100, dtype="bfloat16")["dtype"]) == {"bfloat16"}
    pairs = frame.pivot_table(index=["chain", "in_features", "phase"], columns="mode",
                              values="predicted_s")
    assert (pairs["compiled"] < pairs["eager"]).all()  # fewer bytes, fewer kernels
    assert "model of H100-SXM" in _heading(plots.plot_fusion(frame, modelled(H100)))


def test_fusion_chains_eager_on_cpu_both_chains(short_bench):
    seen = []
    frame = fu.fusion_chains(device="cpu", chains=list(fu.CHAINS), modes="eager", progress=False,
                             on_row=seen.append)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns) and len(frame) == len(seen) == 4
    assert set(frame["mode"]) == {"eager"} and frame["compile_s"].isna().all()
    assert (frame["time_s"] > 0).all() and frame["predicted_s"].isna().all()
    assert set(frame["dtype"]) == {"float32"}
    assert str(pk.source_of(frame)).startswith("live on CPU")
    assert fu.fusion_savings(frame).empty


@pytest.mark.slow  # torch.compile builds a kernel: seconds
@no_compiler
def test_fusion_chains_quick_cpu_run_compiles_one_graph(short_bench):
    frame = fu.fusion_chains(device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns)
    assert len(frame) == 4 and set(frame["chain"]) == {"linear_bias_gelu_dropout"}
    compiled = frame[frame["mode"] == "compiled"]
    assert (compiled["compile_s"] > 0).all() and compiled["compile_s"].nunique() == 1
    assert (frame["time_s"] > 0).all()
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
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="conv_bn_relu.*inductor exploded"):
        fu.fusion_chains(device="cpu", chains="conv_bn_relu", progress=False)
    assert torch.get_num_threads() == threads  # restored after the failure


def test_the_chain_function_is_the_chain():
    forward, (x, w, b), dy = fu._chain_fn("linear_bias_gelu_dropout", (16, 8, 12), "float32", "cpu")
    torch.manual_seed(1)
    y = forward(x, w, b)
    kept = y != 0  # dropout zeroes about 10 %, scales the rest by 1/0.9
    ref = torch.nn.functional.gelu(x @ w.t() + b) / 0.9
    torch.testing.assert_close(y[kept], ref[kept])
    assert 0.7 < kept.float().mean() < 1 and dy.shape == y.shape
    forward, (x, w, g, beta), _ = fu._chain_fn("conv_bn_relu", (2, 3, 4, 5), "float32", "cpu")
    conv = torch.nn.functional.conv2d(x, w, padding=1)
    ref = torch.relu(torch.nn.functional.batch_norm(conv, None, None, g, beta, training=True))
    torch.testing.assert_close(forward(x, w, g, beta), ref)


def test_a_cpu_bench_runs_on_one_thread_and_restores_the_count():
    threads = torch.get_num_threads()
    seen = []
    m = placement.lean_bench(lambda: seen.append(torch.get_num_threads()), "cpu", "threads")
    assert m.median > 0 and set(seen) == {1} and torch.get_num_threads() == threads
    with pytest.raises(ZeroDivisionError), placement.one_cpu_thread("cpu"):
        1 / 0
    assert torch.get_num_threads() == threads


@pytest.mark.usefixtures("fake_gpu")
def test_the_gpu_code_path_returns_the_declared_columns():
    frame = REGISTRY["fusion_chains"](progress=False)
    assert list(frame.columns) == list(REGISTRY["fusion_chains"].columns)
    assert frame["predicted_s"].notna().all() and set(frame["dtype"]) == {"float16"}
    assert len(frame) == 2 * 2 * 2 * 2 and set(frame["chain"]) == set(fu.CHAINS)
    assert (frame.loc[frame["mode"] == "compiled", "compile_s"] == 4.5).all()
    model = fu.predicted_chains(H100).drop(columns=["time_s", "iqr_s", "compile_s"])
    measured = frame.drop(columns=["time_s", "iqr_s", "compile_s"])
    assert measured.equals(model)  # the same rows, the same predictions


@pytest.mark.parametrize("call, error, match", [
    (lambda: fu.fusion_chains(device="cpu", chains="attention"), LookupError, "attention"),
    (lambda: fu.tail_bytes("nope", (1, 2, 3)), LookupError, "nope"),
    (lambda: fu.tail_bytes("conv_bn_relu", (1, 2, 3)), TypeError, "size"),
    (lambda: fu.tail_bytes("linear_bias_gelu_dropout", (1, 0, 3)), ValueError, r"size\[1\]"),
    (lambda: fu.tail_bytes("conv_bn_relu", (1, 2, 3, 4), phase="sideways"), ValueError, "phase"),
    (lambda: fu.fusion_chains(device="cpu", modes=("jit",)), ValueError, "modes"),
    (lambda: fu.fusion_chains(device="tpu"), ValueError, "device"),
    (lambda: fu.predicted_chains(H100, dtype="int8"), ValueError, "dtype"),
])
def test_bad_arguments_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _heading(fig) -> str:
    titles = [heading_text(fig)]
    return " ".join(" ".join(titles).split())


def test_the_figure_refuses_without_data(capsys):
    assert note_of(plots.plot_fusion(None, missing("no recording yet"))) == "No recording yet: No recording yet"
