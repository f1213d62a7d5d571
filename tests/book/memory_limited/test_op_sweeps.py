"""``batchnorm_channels``, ``layernorm_sizes`` and ``embedding_sizes``: the memory-bound ops of real models.

On the CPU with a tiny time budget (rows and byte counts are checked, not timings); on their GPU code path
with conftest's fake H100 (made-up timings, tensors on the meta device); the backward kernels they time
are checked against autograd; the GPU sweeps' predicted H200 time (a dry run, no machine involved) is
held under the recorder's 20 s per experiment.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import perfkit as pk
from perfkit.book.memory_limited import experiments as memory
from perfkit.book.memory_limited import op_sweeps as ops
from perfkit.book.workshop.estimate import estimate_run
from perfkit.experiments.registry import REGISTRY
from perfkit.op_model import op_time_s

NAMES = ["batchnorm_channels", "layernorm_sizes", "embedding_sizes"]
SMALL = {"batchnorm_channels": dict(shapes=[(2, 4, 4, 4), (1, 8, 2, 2)]),
         "layernorm_sizes": dict(hidden=[8, 24], tokens=[4, 16]),
         "embedding_sizes": dict(vocab=[10, 33], dim=[8], tokens=[5, 12])}
ROWS = {"batchnorm_channels": 2 * 2 * 2, "layernorm_sizes": 2 * 2 * 2, "embedding_sizes": 2 * 1 * 2 * 2}
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # few samples and noise: expected here


def test_registered_for_the_recorder_by_this_module():
    for name in NAMES:
        exp = REGISTRY[name]
        assert exp.module == ops.__name__ and exp.needs == ("cuda",)
        assert {"pass", "dtype", "time_s", "iqr_s", "gbps", "predicted_s"} <= set(exp.columns)
    assert REGISTRY["batchnorm_channels"].columns == REGISTRY["batchnorm_sizes"].columns  # one frame format


@pytest.mark.parametrize("name", NAMES)
def test_cpu_runs_return_the_declared_columns_one_row_per_point(name, short_bench):
    seen = []
    frame = REGISTRY[name](device="cpu", progress=False, on_row=seen.append, **SMALL[name])
    assert list(frame.columns) == list(REGISTRY[name].columns)
    assert len(frame) == len(seen) == ROWS[name]
    assert (frame["time_s"] > 0).all() and set(frame["dtype"]) == {"float32"}
    assert frame["predicted_s"].isna().all()  # the GPU models are not applied to a CPU
    nbytes = frame["bytes_persistent"] if name == "batchnorm_channels" else frame["bytes"]
    assert np.allclose(frame["gbps"], nbytes / frame["time_s"] / 1e9)
    assert list(frame["pass"][:2]) == ["forward", "backward"]


def test_default_cpu_sizes_keep_resnets_channel_counts():
    assert {s[1] for s in ops._BN_CPU} == {64, 128, 256, 512, 1024, 2048}
    assert all(s[0] == 1 for s in ops._BN_CPU) and set(ops._BN_QUICK) <= set(ops.RESNET50_BATCHNORMS)


def test_rows_take_their_bytes_from_the_byte_model(short_bench):
    ln = ops.layernorm_sizes(device="cpu", hidden=16, tokens=[4], progress=False)
    for r in ln.to_dict("records"):
        assert r["elements"] == 64
        assert r["bytes"] == pk.layer_bytes("layernorm", (4, 16), "float32", pass_=r["pass"])
        assert r["bytes_two_pass"] == pk.layer_bytes("layernorm", (4, 16), "float32", pass_=r["pass"],
                                                     persistent=False) > r["bytes"]
    emb = ops.embedding_sizes(device="cpu", vocab=100, dim=8, tokens=6, progress=False).set_index("pass")
    assert emb.loc["forward", "bytes"] == 2 * 6 * 8 * 4 + 6 * 8  # rows read and written, int64 ids
    assert emb.loc["backward", "bytes"] == 6 * 8 * 4 + 6 * 8 + 100 * 8 * 4  # dy, ids, the whole gradient
    bn = ops.batchnorm_channels(device="cpu", shapes=[(1, 8, 3, 3)], layouts=["nhwc"], progress=False)
    assert set(bn["layout"]) == {"NHWC"} and (bn["C"] == 8).all() and bn["impl"].str.endswith("Backward0").all()


def test_resnet50s_batch_norms_are_the_zoos():
    from perfkit.zoo import resnet50

    with torch.device("meta"):
        model, x = resnet50(), torch.zeros(32, 3, 224, 224)
    seen = Counter()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.register_forward_hook(lambda m, args, out: seen.update([tuple(args[0].shape)]))
    model(x)
    assert dict(seen) == ops.RESNET50_BATCHNORMS and sum(seen.values()) == 53


def test_the_timed_layernorm_is_f_layer_norm_and_its_backward_autograds():
    forward, backward = ops._layernorm_fns(6, 10, "float32", "cpu")
    gen = torch.Generator().manual_seed(0)  # the same draws, in the same order
    x, dy, w, b = (torch.randn(s, generator=gen) for s in ((6, 10), (6, 10), 10, 10))
    for t in (x, w, b):
        t.requires_grad_(True)
    y = F.layer_norm(x, (10,), w, b, ops._EPS)
    assert torch.allclose(forward(), y.detach(), atol=1e-6)
    expected = torch.autograd.grad(y, (x, w, b), dy)  # training: x, weight and bias gradients
    assert all(torch.allclose(g, e, atol=1e-5) for g, e in zip(backward(), expected))


def test_the_timed_embedding_backward_is_the_dense_gradient_autograd_computes():
    forward, backward = ops._embedding_fns(20, 4, 50, "float32", "cpu")
    gen = torch.Generator().manual_seed(0)
    table = torch.randn((20, 4), generator=gen).requires_grad_(True)
    ids = torch.randint(20, (50,), generator=gen)
    dy = torch.randn((50, 4), generator=gen)
    y = F.embedding(ids, table)
    assert torch.equal(forward(), y.detach())
    expected, = torch.autograd.grad(y, table, dy)  # sparse=False: the whole table's gradient
    grad = backward()
    assert grad.shape == (20, 4) and torch.allclose(grad, expected, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_gpu_code_paths_run_the_real_sizes(name, fake_gpu):
    frame = REGISTRY[name](progress=False)
    assert list(frame.columns) == list(REGISTRY[name].columns)
    assert set(frame["dtype"]) == {"bfloat16"} and frame["predicted_s"].notna().all()
    h100 = fake_gpu.spec
    r = frame.iloc[-1]
    if name == "batchnorm_channels":
        assert len(frame) == 12 * 2 * 2
        assert set(zip(frame["N"], frame["C"], frame["H"], frame["W"])) == set(ops.RESNET50_BATCHNORMS)
        assert r["predicted_s"] == pytest.approx(pk.predict_layer_time("batchnorm", (r["N"], r["C"], r["H"], r["W"]),
                                                                        "bfloat16", h100, pass_=r["pass"]))
    if name == "layernorm_sizes":
        assert len(frame) == 4 * 3 * 2 and frame["elements"].max() == 32768 * 8192
        assert r["predicted_s"] == pytest.approx(op_time_s("layernorm", (r["tokens"], r["hidden"]), "bfloat16",
                                                           h100, pass_=r["pass"]))
    if name == "embedding_sizes":
        assert len(frame) == 3 * 2 * 2 * 2 and {50257, 50304} <= set(frame["vocab"])
        assert r["predicted_s"] == pytest.approx(op_time_s("embedding", (r["tokens"], r["dim"]), "bfloat16", h100,
                                                           pass_=r["pass"], num_embeddings=r["vocab"]))
    quick = REGISTRY[name](quick=True, progress=False)
    assert 0 < len(quick) < len(frame)


@pytest.mark.parametrize("name", NAMES)
def test_each_gpu_sweep_is_predicted_under_20_s_on_an_h200(name):
    run = estimate_run(name, pk.device_spec("H200"))
    assert run.unpriced == 0 and run.points == {"batchnorm_channels": 48}.get(name, 24)
    assert run.run_s <= 20


@pytest.mark.parametrize("call, error, match", [
    (lambda: ops.batchnorm_channels(device="cpu", shapes=[(1, 2, 3)]), TypeError, "shapes"),
    (lambda: ops.batchnorm_channels(device="cpu", layouts=["NHCW"]), ValueError, "layouts"),
    (lambda: ops.batchnorm_channels(device="cpu", dtype="int8"), ValueError, "dtype"),
    (lambda: ops.layernorm_sizes(device="cpu", hidden=[768, 0]), ValueError, "hidden"),
    (lambda: ops.layernorm_sizes(device="cpu", tokens="8"), TypeError, "tokens"),
    (lambda: ops.layernorm_sizes(device="tpu"), ValueError, "device"),
    (lambda: ops.embedding_sizes(device="cpu", vocab=[]), ValueError, "vocab"),
    (lambda: ops.embedding_sizes(device="cpu", dim=2.5), TypeError, "dim"),
    (lambda: ops.embedding_sizes(device="cpu", tokens=-1), ValueError, "tokens"),
])
def test_bad_arguments_are_refused_before_any_work(call, error, match, forbid_allocation, monkeypatch):
    forbid_allocation(ops, "_layernorm_fns", "_embedding_fns")
    forbid_allocation(memory, "_batchnorm_fns")
    monkeypatch.setattr(ops, "sweep", lambda *a, **k: pytest.fail("swept before refusing"))
    with pytest.raises(error, match=match):
        call()


def test_too_large_sweeps_are_refused_before_allocating(forbid_allocation):
    forbid_allocation(ops, "_layernorm_fns", "_embedding_fns")
    forbid_allocation(memory, "_batchnorm_fns")
    for call in (lambda: ops.batchnorm_channels(device="cpu", shapes=[(4096, 2048, 512, 512)], progress=False),
                 lambda: ops.layernorm_sizes(device="cpu", hidden=2**20, tokens=2**20, progress=False),
                 lambda: ops.embedding_sizes(device="cpu", vocab=2**30, dim=2**12, tokens=8, progress=False)):
        with pytest.raises(ValueError, match="GiB.*free"):
            call()
