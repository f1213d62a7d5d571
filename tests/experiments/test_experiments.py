"""Experiments on the CPU: the same code paths the GPU recording uses, with small sizes.

Every experiment must return exactly the columns it declares: checked on quick CPU runs where an
experiment runs on a CPU, and on its GPU code path with a fake GPU (made-up timings, no kernels)
where it does not.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pandas as pd
import pytest
import torch

import perfkit as pk
from perfkit.book.chapters import EXPERIMENTS
from perfkit.experiments.registry import REGISTRY, missing_needs, register
from perfkit.book.background import experiments as background, ceilings
from perfkit import matmul, placement
from perfkit.book.gemm import experiments as gemm
from perfkit.ceilings import measured_ceilings

#: Experiments that run on a CPU (small sweeps), and those whose code paths need a GPU.
CPU_RUNNABLE = ["gemm_sizes", "gemm_alignment", "gemm_transposes", "gemm_small_n", "ceiling_matmul",
                "ceiling_copy", "timer_validation"]
GPU_ONLY = ["waves", "gemm_tile_quantization", "gemm_tile_sizes", "gemm_waves"]
#: Experiments whose CPU and GPU code paths are tested in their chapter's own test module.
TESTED_ELSEWHERE = {"fc_passes": "test_fc.py", "fc_batch": "test_fc.py", "fc_features": "test_fc.py",
                    "vocab_padding": "test_fc.py", "rnn_combine_time": "test_rnn.py", "rnn_hidden": "test_rnn.py",
                    "rnn_batch": "test_rnn.py", "rnn_cudnn": "test_rnn.py", "rnn_persistent": "test_rnn.py",
                    "activation_sizes": "test_memory.py", "batchnorm_sizes": "test_memory.py",
                    "pool_sizes": "test_memory.py", **{name: "test_conv.py" for name in (
                        "conv_passes", "conv_channels", "conv_first_layer", "conv_layout", "conv_params",
                        "conv_deepbench")}, "fusion_chains": "test_fusion.py",
                    "convnet_breakdown": "test_convnet.py", "advisor_layers": "test_advisor_experiments.py",
                    "advisor_fixes": "test_advisor_experiments.py",
                    **dict.fromkeys(["attention_backends", "attention_head_dims", "decode_steps"],
                                    "test_transformer_experiments.py"),
                    "collective_sizes": "test_communication_experiments.py",
                    **dict.fromkeys(["batchnorm_channels", "layernorm_sizes", "embedding_sizes"], "test_op_sweeps.py"),
                    "model_op_dtypes": "test_op_dtypes.py", "model_steps": "test_steps.py"}
quiet = pytest.mark.filterwarnings("ignore::perfkit.timing.NoiseWarning")


def test_every_experiment_declares_its_columns():
    assert set(CPU_RUNNABLE + GPU_ONLY + list(TESTED_ELSEWHERE)) == set(REGISTRY)
    for exp in REGISTRY.values():
        assert "time_s" in exp.columns, exp.name
        assert set(exp.needs) <= {"cuda", "gpus2", "cupy", "triton"}
        assert all(isinstance(v, str) and v for v in exp.columns.values()), exp.name


@pytest.mark.filterwarnings("ignore::UserWarning")  # few samples, noise: expected with short_bench
@pytest.mark.parametrize("name", CPU_RUNNABLE)
@pytest.mark.slow  # real CPU runs of every experiment: seconds
def test_cpu_run_returns_exactly_the_declared_columns(name, short_bench):
    frame = REGISTRY[name](device="cpu", quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    assert (frame["time_s"] > 0).all()
    meta = frame.attrs["meta"]
    assert meta["live"] and meta["device_kind"] == "cpu" and meta["params"] == {"quick": True}
    assert str(pk.source_of(frame)).startswith("live (quick sweep) on CPU")
    if name == "timer_validation":  # do_bench and CUDA graphs need a GPU: their columns stay empty
        assert frame["triton_do_bench_s"].isna().all() and frame["torch_timer_s"].notna().all()


@pytest.fixture
def fake_gpu(fake_gpu):
    """Run the experiments' GPU code paths here: conftest's fake H100 (the seam: made-up timings,
    its spec, its free memory, the dtypes it has peaks for; GEMM operands on torch's meta device),
    with the CuPy spin kernel stubbed (CuPy compiles and launches it at build time: no meta device).

    Only the *shape* of the rows is checked with it; no number it produces is ever shown.
    """
    builders = {"spin_launcher": lambda *a, **k: (lambda: None), "spin_blocks_per_sm": lambda *a, **k: 1}
    for module in (gemm, background, ceilings):
        fake_gpu.stub(module, **{name: fake for name, fake in builders.items() if hasattr(module, name)})
    return fake_gpu


@pytest.mark.parametrize("name", GPU_ONLY + ["gemm_sizes", "gemm_alignment", "gemm_transposes", "gemm_small_n",
                                             "ceiling_matmul"])
def test_gpu_code_path_returns_exactly_the_declared_columns(name, fake_gpu):
    frame = REGISTRY[name](quick=True, progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) > 0
    if name in ("gemm_sizes", "ceiling_matmul"):  # every dtype the GPU supports, float8 included
        assert {"float16", "bfloat16", "float8"} <= set(frame["dtype"])
    if "waves" in frame:
        assert frame["waves"].notna().any()


def test_the_seam_is_read_at_call_time_nests_and_is_restored():
    before, fixed = placement.runtime(), pk.Measurement(samples=[2e-3])
    with placement.use(timer=lambda fn, **kw: fixed, device="cuda", spec=pk.device_spec("H100-SXM")) as rt:
        assert placement.resolve_device() == "cuda" and placement.measured_on().name == "H100-SXM"
        assert placement.free_memory("cuda") == rt.spec.memory_bytes == 80e9
        assert placement.lean_bench(lambda: None, "cuda", "x") is fixed and matmul.supports_dtype("float8", "cuda")
        with placement.use(device="cpu"):  # an inner block keeps what it does not set
            assert placement.resolve_device() == "cpu" and placement.runtime().spec.name == "H100-SXM"
            with pytest.raises(RuntimeError, match="no CUDA GPU"):
                placement.resolve_device("cuda")
        assert placement.resolve_device() == "cuda"
    assert placement.runtime() == before and placement.tensor_device("cuda") == "cuda"
    with placement.use(device="cuda", spec=pk.device_spec("H100-SXM"), tensor_device="meta"):
        a, b = matmul.matmul_operands(64, 32, 16, "float16", "cuda")  # shapes only, nothing allocated
        assert placement.tensor_device("cuda") == "meta" and a.is_meta and tuple((a @ b).shape) == (64, 32)
        for d in ("int8", "float8"):  # B column-major: what _scaled_mm needs and cuBLAS's int8 kernels run fast
            _, b = matmul.matmul_operands(64, 32, 16, d, "cuda")
            assert b.shape == (16, 32) and b.t().is_contiguous() and not b.is_contiguous()
        with pytest.raises(ValueError, match="float8 GEMM does not take this shape"):
            matmul.matmul_fn(64, 24, 16, "float8", "cuda")
    assert placement.tensor_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="tensor_device"), placement.use(tensor_device="tpu"):
        pass
    with pytest.raises(TypeError, match="timer"), placement.use(timer=3):
        pass
    with pytest.raises(ValueError, match="device"), placement.use(device="tpu"):
        pass


def test_drift_from_the_declaration_is_an_error():
    def fake(*, quick=False, progress=True, on_row=None):
        return pd.DataFrame({"time_s": [1.0], "surprise": [2]})

    register("_fake_drift", "fake", {"time_s": "s", "n": "size"})(fake)
    try:
        with pytest.raises(ValueError, match=r"missing \['n'\], undeclared \['surprise'\]"):
            REGISTRY["_fake_drift"]()
    finally:
        REGISTRY.pop("_fake_drift")
    with pytest.raises(ValueError, match="time_s"):
        register("_fake_no_time", "fake", {"n": "size"})


def test_unknown_experiment_lists_registered_names():
    with pytest.raises(LookupError, match="gemm_sizes"):
        pk.experiments.registry.get("no_such_experiment")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_gemm_sizes_cpu_rows_arrive_one_by_one(short_bench):
    seen = []
    frame = gemm.gemm_sizes(device="cpu", quick=True, progress=False, on_row=seen.append)
    assert len(seen) == len(frame) > 0
    assert frame[["M", "N", "K"]].to_dict("records") == [{k: r[k] for k in "MNK"} for r in seen]
    assert set(frame["sweep"]) == {"mn", "k"}


@quiet
def test_interrupted_sweep_keeps_measured_rows():
    kept = []

    def on_row(row):
        kept.append(row)
        if len(kept) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gemm.gemm_small_n(device="cpu", progress=False, on_row=on_row)
    assert [r["N"] for r in kept] == [1, 2, 4]


def test_too_large_sweep_is_refused_before_allocating(forbid_allocation):
    forbid_allocation(matmul, "matmul_fn")
    forbid_allocation(gemm, "matmul_fn")
    with pytest.raises(ValueError, match="GiB.*free"):
        gemm.gemm_alignment(M=400_000, N=400_000, K_center=400_000, device="cpu", progress=False)


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="span"):
        gemm.gemm_alignment(K_center=8, span=8, device="cpu")
    with pytest.raises(TypeError, match="M"):
        gemm.gemm_small_n(M=2.5, device="cpu")
    with pytest.raises(ValueError, match="device"):
        gemm.gemm_sizes(device="tpu")
    with pytest.raises(ValueError, match="layout"):
        matmul.matmul_fn(4, 4, 4, "float32", "cpu", layout="XY")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal message")
@pytest.mark.parametrize("name", GPU_ONLY)
def test_gpu_only_experiments_refuse_clearly_on_cpu(name):
    with pytest.raises(RuntimeError, match="GPU"):
        REGISTRY[name](device="auto", progress=False)
    assert "cuda" in missing_needs(REGISTRY[name])


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_matmul_operands_and_fn_layouts(layout):
    a, b = matmul.matmul_operands(6, 4, 5, "float64", "cpu", layout)
    assert a.shape == (6, 5) and b.shape == (5, 4)
    assert a.is_contiguous() == (layout[0] == "N") and b.is_contiguous() == (layout[1] == "N")
    torch.testing.assert_close(matmul.matmul_fn(6, 4, 5, "float64", "cpu", layout)(), a @ b)  # same seed


def test_alignment_penalty():
    frame = pd.DataFrame({"dtype": ["float16"] * 4, "aligned": [True, False, False, True],
                          "time_s": [1.0, 2.0, 3.0, 1.0]})
    out = gemm.alignment_penalty(frame)
    assert out.loc["float16", "penalty"] == pytest.approx(2.5)


def test_measured_ceilings_picks_the_best():
    mm = pd.DataFrame({"dtype": ["float16", "float16", "float32"], "tflops": [500.0, 700.0, 50.0]})
    cp = pd.DataFrame({"gbps": [1000.0, 2900.0]})
    best = measured_ceilings(mm, cp)
    assert best["flop_s"] == {"float16": 700e12, "float32": 50e12}
    assert best["bandwidth"] == 2900e9


@quiet
def test_measure_gemm_on_cpu():
    taken = []

    def timed(fn, **kw):  # the real bench, kept: measure_gemm returns its median, in seconds
        taken.append(pk.timing.bench(fn, **kw))
        return taken[-1]

    with placement.use(timer=timed):
        t = gemm.measure_gemm(64, 64, 64, "float32", device="cpu")
    assert len(taken) == 1 and t == taken[0].median > 0 and isinstance(t, float)
    assert taken[0].label == "gemm 64×64×64 float32" and taken[0].device.startswith("CPU")
    with pytest.raises(ValueError, match="free"):
        gemm.measure_gemm(10**6, 10**6, 10**6, "float32", device="cpu")


#: Invalid values for every parameter any registered experiment takes: each must be refused with a
#: TypeError, ValueError or LookupError naming the parameter, before anything is measured. A new
#: parameter must be added here (test_every_experiment_parameter_has_invalid_values).
_SIZE = [0, -2, 2.5, "8"]  # one positive integer (rnn's sizes may also be a list of them)
_SIZES = [(0,), (-4,), (), "8", (8, 2.5)]  # a non-empty list of positive integers
INVALID = {
    "device": ["tpu", 0], "quick": ["yes", 1], "progress": ["yes", None], "on_row": [3, "print"],
    "dtype": ["float13", 16, None], "dtypes": [("float13",), (), ("float16", 3), "float13"],
    **dict.fromkeys(["M", "N", "K", "K_center", "span", "max_waves", "spin_cycles", "in_features",
                     "out_features", "vocab", "tokens", "center", "fixed", "size", "image", "hidden", "batch",
                     "timesteps", "heads", "head_dim", "seq", "context", "dim", "steps"], _SIZE),
    **dict.fromkeys(["batches", "multiples", "channels", "elements", "seqs", "head_dims"], _SIZES),
    "tile": [(0, 128), (128,), "big"], "tiles": [((0, 128),), (), ((128,),)],
    "shapes": [[(0, 0, 0, 0)], [], 5, [(8, 8)]],
    "layers": [[("rnn", 0, 1, 1)], [("rnn", 8)], [], [("cnn", 8, 1, 1)], 0, 2.5],  # tuples (rnn_cudnn), int (decode)
    "cell": ["cnn", (), 3], "ops": [("swish",), "relu", ()], "layouts": [("NCWH",), ()], "kinds": [("min",), ()],
    "windows": [("9×9",), ()], "modes": [("jit",), ()], "chains": [("attention",), ()],
    "networks": [("resnet50",), ()], "models": [("bert",), ()], "sweeps": [("depth",), ()],
    "backends": [("flashy",), (), "math"], "causal": ["yes", 1, (), None], "kv_heads": [*_SIZES, (3,)],
    "sizes_bytes": [*_SIZES, (2,)], "n_ranks": [1, 0, 2.5, "2", 1 << 20], "backend": ["mpi", 3, None],
    "timeout_s": [0, -1.0, "60", float("inf")],
}


def _parameters(name):
    return list(inspect.signature(REGISTRY[name].func).parameters)


def test_every_experiment_parameter_has_invalid_values():
    missing = {f"{name}({p})" for name in REGISTRY for p in _parameters(name) if p not in INVALID}
    assert not missing, f"add invalid values for these parameters to INVALID: {sorted(missing)}"


@pytest.fixture
def measure_nothing(monkeypatch):
    """Timing, sweeping or allocating a tensor fails the test (AssertionError is not an argument error)."""
    def measured(*args, **kwargs):
        raise AssertionError("measured or allocated before refusing a bad argument")

    for exp in REGISTRY.values():  # sweep is public, not the timer: a sweep started is a failure too
        module = importlib.import_module(exp.func.__module__)
        if hasattr(module, "sweep"):
            monkeypatch.setattr(module, "sweep", measured)
    for attr in ("randn", "randint", "empty", "empty_like", "ones", "zeros"):
        monkeypatch.setattr(torch, attr, measured)
    with placement.use(timer=measured):  # every experiment times through the seam
        yield


@pytest.mark.parametrize("name", list(EXPERIMENTS))  # the catalog: nothing imported to collect
def test_bad_argument_is_refused_before_measuring(name, measure_nothing):
    """Each parameter's invalid values (INVALID), one call each: every one refused with a TypeError,
    ValueError or LookupError naming the parameter, before anything is measured."""
    failures = []
    for param in _parameters(name):
        for bad in INVALID.get(param, []):
            call = f"{name}({param}={bad!r})"
            try:
                REGISTRY[name](**{param: bad})
            except (TypeError, ValueError, LookupError) as refused:
                if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", str(refused)):
                    failures.append(f"{call} raised {refused!r}, which does not name {param!r}")
            except Exception as e:  # noqa: BLE001  (AssertionError: it measured first)
                failures.append(f"{call} raised {type(e).__name__}: {e}")
            else:
                failures.append(f"{call} was not refused")
    assert not failures, f"{len(failures)} bad argument(s) not refused as they should be:\n" + "\n".join(failures)


def test_gemm_sizes_refuses_an_unknown_dtype_even_where_it_would_run_float32(measure_nothing):
    with pytest.raises(ValueError, match=r"dtypes .*'float16'"):  # names the accepted dtypes
        gemm.gemm_sizes(quick=True, dtypes=("float13",))
    with pytest.raises(ValueError, match="dtypes"):
        gemm.gemm_sizes(quick=True, device="cpu", dtypes=("float32", "float13"))
