"""The transformer chapter's experiments: attention backends, head dimensions and decoding steps.

They run on the CPU with a tiny time budget (rows, model columns and the output checks are tested,
not timings), and on their GPU code path with a fake GPU (conftest's ``fake_gpu``: made-up timings,
tensors on torch's meta device, nothing computed). What a step or the math reference computes is
checked against a plain re-implementation.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import perfkit as pk
from perfkit import placement, timing
from perfkit.experiments.registry import REGISTRY
from perfkit.book.transformers import decoding as dx
from perfkit.book.transformers import experiments as tx

NAMES = ["attention_backends", "attention_head_dims", "decode_steps"]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


def _no_timing(fn, **options):
    raise AssertionError(f"timed {options.get('label')!r}")


@pytest.fixture(scope="module")
def cpu_runs():
    """Each experiment run once on the CPU (``quick``; a CPU runs its small defaults anyway) on conftest's
    short_bench budget: ``name → (frame, rows handed to on_row)``."""
    def short(fn, **options):
        return timing.bench(fn, **{**options, "warmup_s": 0.0, "rep_s": 0.002, "max_time_s": 0.05})

    runs = {}
    with placement.use(timer=short), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in NAMES:
            seen: list[dict] = []
            runs[name] = REGISTRY[name](device="cpu", quick=True, progress=False, on_row=seen.append), seen
    return runs


def test_the_experiments_are_registered_for_the_recorder():
    for name in NAMES:
        exp = REGISTRY[name]
        module = dx if name == "decode_steps" else tx
        assert exp.needs == ("cuda",) and exp.func.__module__ == module.__name__
        assert all(isinstance(v, str) and v for v in exp.columns.values())
    assert REGISTRY["attention_backends"].columns == REGISTRY["attention_head_dims"].columns == tx.ATTENTION_COLUMNS
    assert REGISTRY["decode_steps"].columns == dx.DECODE_COLUMNS
    assert tx.ATTENTION_BACKENDS == ("math", "flash", "efficient", "cudnn")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow  # real CPU runs of the chapter's experiments: seconds
def test_cpu_quick_runs_return_the_declared_columns(name, cpu_runs):
    frame, seen = cpu_runs[name]
    assert list(frame.columns) == list(REGISTRY[name].columns) and len(frame) == len(seen) > 0
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    meta = frame.attrs["meta"]
    assert meta["live"] and meta["device_kind"] == "cpu"
    assert frame["predicted_s"].isna().all()  # the GPU model is not applied to a CPU


@pytest.mark.slow  # rests on the real CPU runs above
def test_cpu_attention_runs_both_backends_and_they_agree_with_math(cpu_runs):
    frame = cpu_runs["attention_backends"][0]
    assert set(frame["backend"]) == {"math", "flash"} and set(frame["causal"]) == {False, True}
    assert sorted(set(frame["seq"])) == [128, 256, 512, 1024] and set(frame["head_dim"]) == {64}
    assert len(frame) == 2 * 2 * 4 and frame["peak_bytes"].isna().all()  # no CUDA allocator on a CPU
    assert (frame.loc[frame["backend"] == "math", "max_abs_diff"] == 0).all()
    flash = frame.loc[frame["backend"] == "flash", "max_abs_diff"]
    assert flash.notna().all() and (flash < 1e-4).all()  # float32: rounding only, well inside the tolerance
    for r in frame.to_dict("records"):
        b, h, s, d = r["batch"], r["heads"], r["seq"], r["head_dim"]
        assert r["flops"] == pk.attention_flops(b, h, s, s, d, causal=r["causal"])
        assert r["bytes_fused"] == pk.attention_bytes(b, h, s, s, d, "float32")
        assert r["bytes_unfused"] == pk.attention_bytes(b, h, s, s, d, "float32", fused=False)
        assert r["tflops"] == pytest.approx(r["flops"] / r["time_s"] / 1e12)


@pytest.mark.slow  # rests on the real CPU runs above
def test_cpu_head_dims_and_decode_defaults(cpu_runs):
    dims = cpu_runs["attention_head_dims"][0]
    assert sorted(set(dims["head_dim"])) == [64, 80, 96, 128] and set(dims["seq"]) == {512}
    assert set(dims["heads"]) == {4} and set(dims["causal"]) == {False} and set(dims["backend"]) == {"math", "flash"}
    steps = cpu_runs["decode_steps"][0]
    assert len(steps) == 2 * 4 and sorted(set(steps["kv_heads"])) == [1, 4]
    assert sorted(set(steps["batch"])) == [1, 4, 16, 64] and set(steps["context"]) == {256}
    assert (steps["tokens_per_s"] == steps["batch"] / steps["time_s"]).all()
    assert steps["gbps"].to_numpy() == pytest.approx((steps["bytes"] / steps["time_s"] / 1e9).to_numpy())


def test_gpu_attention_default_sweep_stops_math_at_8192(fake_gpu):
    frame = tx.attention_backends(progress=False)
    assert list(frame.columns) == list(tx.ATTENTION_COLUMNS)
    assert set(frame["backend"]) == set(tx.ATTENTION_BACKENDS) and set(frame["dtype"]) == {"bfloat16"}
    assert set(frame["heads"]) == {32} and set(frame["head_dim"]) == {128} and set(frame["batch"]) == {1}
    longest = frame.groupby("backend")["seq"].max()
    assert longest["math"] == 8192 and (longest.drop("math") == 16384).all()
    assert len(frame) == 2 * (3 * 6 + 5) == len(fake_gpu.calls)  # each row timed once, on "cuda"
    assert {c["device"] for c in fake_gpu.calls} == {"cuda"}
    assert frame["max_abs_diff"].isna().all() and frame["peak_bytes"].isna().all()  # meta: nothing computed
    for r in frame.to_dict("records"):
        p = pk.predict_attention_time(1, 32, r["seq"], r["seq"], 128, spec=fake_gpu.spec, dtype="bfloat16",
                                      fused=r["backend"] != "math", causal=r["causal"])
        assert r["predicted_s"] == p.time_s > 0


def test_gpu_attention_runs_every_asked_point_and_quick_is_small(fake_gpu):
    asked = tx.attention_backends(seqs=(16384,), causal=False, backends=("math", "cudnn"), progress=False)
    assert asked[["backend", "seq"]].values.tolist() == [["math", 16384], ["cudnn", 16384]]
    quick = tx.attention_backends(quick=True, progress=False)
    assert sorted(set(quick["seq"])) == [512, 2048] and set(quick["backend"]) == set(tx.ATTENTION_BACKENDS)
    dims = tx.attention_head_dims(progress=False)
    assert sorted(set(dims["head_dim"])) == [64, 80, 96, 128, 256] and set(dims["seq"]) == {4096}
    assert set(dims["backend"]) == set(tx.ATTENTION_BACKENDS) and list(dims.columns) == list(tx.ATTENTION_COLUMNS)
    quick_dims = tx.attention_head_dims(quick=True, progress=False)
    assert sorted(set(quick_dims["head_dim"])) == [64, 80, 128] and set(quick_dims["seq"]) == {2048}


def test_gpu_backends_this_gpu_cannot_run_are_skipped_with_a_note(fake_gpu, monkeypatch, capsys):
    def probe(backend, head_dim, causal, dtype, on):
        if backend == "cudnn":
            return "cuDNN attention needs cuDNN 9"
        return "head_dim above 128" if backend == "efficient" and head_dim > 128 else None

    monkeypatch.setattr(tx, "_unavailable", probe)
    frame = tx.attention_backends(quick=True, progress=False)
    assert set(frame["backend"]) == {"math", "flash", "efficient"}
    dims = tx.attention_head_dims(progress=False)
    assert set(dims.loc[dims["backend"] == "efficient", "head_dim"]) == {64, 80, 96, 128}
    assert 256 in set(dims.loc[dims["backend"] == "flash", "head_dim"])
    out = " ".join(capsys.readouterr().out.split())
    assert "cudnn (head_dim 128, causal=False): cuDNN attention needs cuDNN 9" in out
    assert "efficient (head_dim 256, causal=False): head_dim above 128" in out


def test_the_probe_asks_torch_which_backends_run():
    assert tx._unavailable("math", 64, False, "float32", "cpu") is None
    assert tx._unavailable("flash", 80, True, "float32", "cpu") is None
    why = tx._unavailable("efficient", 64, False, "float32", "cpu")  # torch has no CPU kernel for it
    assert isinstance(why, str) and why
    assert tx._unavailable("cudnn", 64, False, "bfloat16", "meta") is None  # a pretend GPU has them all


def test_gpu_decode_steps_take_bytes_and_predictions_from_the_model(fake_gpu):
    frame = dx.decode_steps(progress=False)
    assert list(frame.columns) == list(dx.DECODE_COLUMNS) and len(frame) == 2 * 9 == len(fake_gpu.calls)
    m = dx.GPU_MODEL
    assert sorted(set(frame["kv_heads"])) == [8, 32] and set(frame["context"]) == {2048}
    assert set(frame["layers"]) == {4} and set(frame["hidden"]) == {4096} and set(frame["dtype"]) == {"bfloat16"}
    for r in frame.to_dict("records"):
        kv, b = r["kv_heads"], r["batch"]
        assert r["params"] == m.params(kv, 4)
        assert r["bytes"] == pk.decode_step_bytes(r["params"], b, 2048, layers=4, kv_heads=kv, head_dim=128,
                                                  dtype="bfloat16")
        p = pk.predict_decode_time(r["params"], b, 2048, layers=4, kv_heads=kv, head_dim=128, dtype="bfloat16",
                                   spec=fake_gpu.spec, heads=32)
        assert math.isfinite(r["predicted_s"]) and r["predicted_s"] == p.time_s and r["flops"] == p.flops
    quick = dx.decode_steps(quick=True, progress=False)
    assert sorted(set(quick["batch"])) == [1, 8, 64] and set(quick["context"]) == {1024}


def test_decode_models_count_the_weights_they_allocate(fake_gpu):
    assert dx.decode_model("cpu") is dx.CPU_MODEL and dx.decode_model() is dx.GPU_MODEL  # auto: the fake GPU
    # LLaMA-2-7B's 32 layers, plus its embeddings, output head (32,000 × 4,096 each) and RMSNorm weights
    assert dx.GPU_MODEL.params(32, layers=32) + 2 * 32000 * 4096 + 65 * 4096 == 6_738_415_616
    for model, kv, device in ((dx.GPU_MODEL, 8, "cuda"), (dx.CPU_MODEL, 1, "cpu")):
        weights, cache = dx._decode_tensors(model, kv, 3, 16, 2, "float32", device)
        assert sum(w.numel() for layer in weights for w in layer) == model.params(kv, layers=2)
        assert tuple(cache.shape) == (2, 2, 3, kv, 16, model.head_dim)
        assert cache.is_meta  # the fake GPU allocates every tensor on meta


def test_a_decode_step_is_attention_over_the_cache_and_a_swiglu_feed_forward():
    m, kv, ctx = dx.CPU_MODEL, 2, 16
    weights, cache = dx._decode_tensors(m, kv, 4, ctx, 2, "float32", "cpu")
    x = torch.randn(3, m.hidden, generator=torch.Generator().manual_seed(1))  # 3 of the cache's 4 sequences
    want = x
    for i, (w_qkv, w_o, w_gu, w_down) in enumerate(weights):
        q = (want @ w_qkv)[:, : m.heads * m.head_dim].reshape(3, m.heads, m.head_dim)
        k, v = (cache[i, j, :3].repeat_interleave(m.heads // kv, dim=1) for j in (0, 1))  # each K/V head shared
        p = (torch.einsum("bhd,bhtd->bht", q, k) / m.head_dim ** 0.5).softmax(-1)
        want = want + torch.einsum("bht,bhtd->bhd", p, v).reshape(3, -1) @ w_o
        gate, up = (want @ w_gu).split(m.ffn, dim=-1)
        want = want + (F.silu(gate) * up) @ w_down
    torch.testing.assert_close(dx._decode_step(x, weights, cache, m, kv), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_the_math_reference_in_chunks_of_heads_is_the_math_backend(monkeypatch, causal):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 32, 16, generator=gen) for _ in range(3))
    whole = tx._attention(q, k, v, "math", causal)
    torch.testing.assert_close(tx._reference(q, k, v, causal), whole)
    monkeypatch.setattr(tx, "_REFERENCE_BYTES", 1)  # one head per chunk
    assert tx._chunk(6, 32, "float32") == 1
    torch.testing.assert_close(tx._reference(q, k, v, causal), whole)


@pytest.mark.parametrize("wrong", [lambda out: out + 0.01, lambda out: out * math.nan])
def test_a_backend_that_disagrees_with_math_stops_the_run_before_it_is_timed(monkeypatch, wrong):
    real = tx._attention

    def attention(q, k, v, backend, causal):
        out = real(q, k, v, backend, causal)
        return wrong(out) if backend == "flash" else out

    monkeypatch.setattr(tx, "_attention", attention)
    with placement.use(timer=_no_timing), pytest.raises(RuntimeError, match=r"'flash' SDPA backend disagrees"):
        tx.attention_backends(backends=("flash",), seqs=(64,), device="cpu", progress=False)
    timed = []
    with placement.use(timer=lambda fn, **kw: timed.append(kw["label"]) or pk.Measurement(samples=[1e-3])):
        with pytest.raises(RuntimeError, match=r"max \|difference\| (0\.01|nan) > 0\.001 \(float32\)"):
            tx.attention_head_dims(head_dims=(32,), seq=64, device="cpu", progress=False)
    assert len(timed) == 1 and "math" in timed[0]  # math ran first; flash was refused before its timing


def test_bad_arguments_are_refused_naming_the_parameter():
    with placement.use(timer=_no_timing):
        with pytest.raises(ValueError, match="backends must be one of"):
            tx.attention_backends(backends=("flashy",), device="cpu")
        with pytest.raises(ValueError, match=r"backends \['cudnn'\].*accepts backends 'math', 'flash'$"):
            tx.attention_backends(backends=("math", "cudnn"), device="cpu")
        with pytest.raises(ValueError, match=r"backends \['efficient'\]"):
            tx.attention_head_dims(backends=("efficient",), device="cpu")
        with pytest.raises(TypeError, match="causal"):
            tx.attention_head_dims(causal=(True,), device="cpu")
        with pytest.raises(ValueError, match=r"kv_heads must divide heads \(4\)"):
            dx.decode_steps(kv_heads=(4, 3), device="cpu")
        with pytest.raises(ValueError, match="dtype"):
            dx.decode_steps(dtype="float64", device="cpu")


def test_kv_heads_must_divide_the_gpu_models_heads(fake_gpu):
    with pytest.raises(ValueError, match=r"kv_heads must divide heads \(32\).*\[5\]"):
        dx.decode_steps(kv_heads=(32, 5), progress=False)
    assert fake_gpu.calls == []


def test_too_large_sweeps_are_refused_before_allocating(forbid_allocation):
    forbid_allocation(tx, "seeded_on", "_unavailable", "sweep")
    forbid_allocation(dx, "seeded_on", "_decode_tensors", "sweep")
    with pytest.raises(ValueError, match="attention_backends needs .*GiB.*free"):
        tx.attention_backends(seqs=(128, 1 << 20), device="cpu", progress=False)
    with pytest.raises(ValueError, match="attention_head_dims needs .*GiB.*free"):
        tx.attention_head_dims(seq=1 << 20, backends=("flash",), device="cpu", progress=False)
    with pytest.raises(ValueError, match="decode_steps needs .*GiB.*free"):
        dx.decode_steps(context=1 << 30, device="cpu", progress=False)


def test_the_gpu_sweeps_fit_an_h100_and_a_longer_math_point_does_not(fake_gpu, forbid_allocation):
    need = tx._attention_need
    assert need("math", 1, 32, 16384, 128, "bfloat16") > need("flash", 1, 32, 16384, 128, "bfloat16")
    forbid_allocation(tx, "seeded_on", "_unavailable", "sweep")
    forbid_allocation(dx, "seeded_on", "_decode_tensors", "sweep")
    with pytest.raises(ValueError, match="attention_backends needs .*GiB"):
        tx.attention_backends(seqs=(65536,), backends=("math",), progress=False)
    with pytest.raises(ValueError, match="decode_steps needs .*GiB"):
        dx.decode_steps(batches=(4096,), progress=False)
