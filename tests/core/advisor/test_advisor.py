"""The advisor (pk.advise): each rule where it should fire and where it should not, the layers table
against perfkit's own GEMM shapes and byte model, the meta and real paths, the user's model left as it
was, bad input, measure=True, the printed forms, the ``advise`` command line and the zoo models.

Predictions are for H100-SXM in bfloat16 unless a test says otherwise; every model is small and built
by hand (or on the meta device), so the file runs on a CPU in seconds.
"""

from __future__ import annotations

import math
import sys
import threading
import types

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import perfkit as pk
from perfkit.__main__ import main
from perfkit.devices import cuda_available
from perfkit.units import format_time
from perfkit.advisor import FINDING_COLUMNS, LAYER_COLUMNS, QUANTIZATION_THRESHOLD, RULES, UNMAPPED_COLUMNS

H100_SXM = "H100-SXM"
BF16 = "bfloat16"


def advise(model, inputs, **kw):
    kw.setdefault("spec", H100_SXM)
    kw.setdefault("dtype", BF16)
    return pk.advise(model, inputs, **kw)


def rule(advice, name: str) -> pd.DataFrame:
    return advice.findings[advice.findings["rule"] == name]


def spec():
    return pk.device_spec(H100_SXM)


# ------------------------------------------------------------------------------------ small models
class Head(nn.Module):
    """A body and a vocabulary head, as a language model ends."""

    def __init__(self, dim: int = 1000, vocab: int = 50257) -> None:
        super().__init__()
        self.body = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        return self.lm_head(self.body(x))


class Block(nn.Module):
    """Linear → LayerNorm → GELU → Dropout → Linear: a chain of three memory-bound ops between GEMMs."""

    def __init__(self, dim: int = 1024) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.ln = nn.LayerNorm(dim)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.ln(self.fc1(x)))))


class Wrapped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


class RNNModel(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, 1, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class Scores(nn.Module):
    """Attention scores as a batched matmul: memory-bound at head size 64."""

    def forward(self, q, k):
        return torch.matmul(q, k.transpose(-2, -1))


class Fused(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class ConvNet(nn.Module):
    """A first convolution on 3 channels, batch norm, ReLU, a second convolution, pooling, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(64, 128, 3, stride=2, padding=1, bias=False)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 16)

    def forward(self, x):
        x = self.conv2(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class ItemModel(nn.Module):
    """Reads an activation's value (``.item()`` or ``.tolist()``): impossible on the meta device."""

    def __init__(self, how: str = "item") -> None:
        super().__init__()
        self.how = how
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        y = self.bn(self.conv(x))
        scale = y.abs().amax().item() if self.how == "item" else max(y.abs().amax((1, 2, 3)).tolist())
        if scale > 1e9:  # a data-dependent branch
            y = y / scale
        return self.fc(self.drop(y.mean((2, 3))))


def no_hooks(model: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def snapshot(model: nn.Module) -> dict:
    """Everything of a model that advise must leave as it was."""
    return {
        "state": {k: (v.device, v.dtype, v.data_ptr(), v.detach().clone()) for k, v in model.state_dict().items()},
        "flags": {n: m.training for n, m in model.named_modules()},
        "requires_grad": {n: p.requires_grad for n, p in model.named_parameters()},
        "params": {n: id(p) for n, p in model.named_parameters()},
    }


def assert_unchanged(model: nn.Module, before: dict) -> None:
    after = snapshot(model)
    assert after["flags"] == before["flags"]
    assert after["requires_grad"] == before["requires_grad"]
    assert after["params"] == before["params"]
    assert after["state"].keys() == before["state"].keys()
    for k, (device, dtype, ptr, value) in before["state"].items():
        d, t, p, v = after["state"][k]
        assert (d, t, p) == (device, dtype, ptr), k
        assert torch.equal(v, value), k
    assert no_hooks(model)


# -------------------------------------------------------------------------------- rules: alignment
def test_an_aligned_mlp_has_no_alignment_or_tile_finding():
    mlp = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    a = advise(mlp, torch.randn(8192, 1024))
    for r in ("alignment", "quantization", "small_batch", "fusion", "first_conv", "layout", "rnn_sizes"):
        assert rule(a, r).empty, (r, a.findings)
    # the lone GELU between the GEMMs is memory-bound (its epilogue fusion is priced); the GEMMs are not
    assert set(rule(a, "memory_bound")["layer"]) == {"1"}
    assert list(a.findings.columns) == list(FINDING_COLUMNS)


def test_alignment_pads_a_vocabulary_head_with_padded_linear():
    a = advise(Head(), torch.randn(8192, 1000))
    hits = rule(a, "alignment")
    assert hits["layer"].tolist() == ["lm_head"]  # 1000 and 8192 are multiples of 8: only the head
    f = hits.iloc[0]
    assert "50257" in f.message and "not a multiple of 8" in f.message
    assert "50257 → 50304" in f.fix and "pk.padded_linear(model.lm_head, multiple=64)" in f.fix
    assert 50304 % pk.alignment(BF16, 128) == 0 and 50304 - 50257 < pk.alignment(BF16, 128)
    assert math.isfinite(f.predicted_saving_s)


def test_alignment_of_the_tokens_is_one_model_level_finding():
    a = advise(Head(1024, 1024), torch.randn(8191, 1024))
    hits = rule(a, "alignment")
    assert hits["layer"].tolist() == [""]  # the model itself, as named_modules() names it
    assert "8191 rows per step" in hits.iloc[0].message and "in 2 linear layers" in hits.iloc[0].message
    assert "(e.g. 8192)" in hits.iloc[0].fix


def test_alignment_of_the_rows_is_one_finding_per_row_count():
    class Patches(nn.Module):  # a ViT's blocks see batch × 197 rows, its classifier the batch
        def __init__(self):
            super().__init__()
            self.block = nn.Linear(768, 768)
            self.head = nn.Linear(768, 1000)

        def forward(self, x):
            return self.head(self.block(x)[:, 0])

    hits = rule(advise(Patches(), torch.randn(100, 197, 768)), "alignment")
    assert sorted(hits["message"].str.extract(r"^(\d+) rows")[0].astype(int)) == [100, 19700]
    assert all("in 1 linear layer " in m for m in hits["message"])


def test_alignment_prices_padded_tokens_at_the_same_batch_and_leaves_tiny_batches_alone():
    # one rule per cause: the padded rows are extra work here; a larger batch's gain is small_batch's
    a = advise(Head(1024, 1024), torch.randn(8191, 1024))
    model = a._pricer
    ops = [op for op in a.ops if op.op == "linear"]
    expected = sum(model.time_s(op) - model.time_s(op.with_params(tokens=8192)) for op in ops)
    assert rule(a, "alignment").iloc[0].predicted_saving_s == pytest.approx(expected)
    assert expected <= 0 and rule(a, "alignment").iloc[0].severity == "info"
    decode = advise(Head(1024, 1024), torch.randn(1, 1024), training=False)  # one token: a GEMV
    assert rule(decode, "alignment").empty and (rule(decode, "small_batch")["predicted_saving_s"] > 0).all()


def test_a_tied_head_is_padded_with_its_embedding_not_by_padded_linear():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(50257, 768)
            self.lm_head = nn.Linear(768, 50257, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            return self.lm_head(self.wte(idx))

    fix = rule(advise(Tied(), torch.zeros(8, 1024, dtype=torch.long)), "alignment").iloc[0].fix
    assert "padded_linear(model.lm_head" not in fix.replace("pk.padded_linear would", "")
    assert "tied to wte" in fix and "resize_token_embeddings(50304)" in fix and "untie" in fix


def test_x_at_a_weight_is_a_linear_layer_and_only_nn_linear_gets_padded_linear():
    class Conv1D(nn.Module):  # GPT-2's (transformers): y = x @ W + b with W of shape (in, out)
        def __init__(self, nx: int, nf: int):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf))
            self.bias = nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)

    a = advise(nn.Sequential(Conv1D(768, 2301), nn.GELU(), nn.Linear(2301, 768)), torch.randn(8, 1024, 768))
    ops = [op.op for op in a.ops if op.is_gemm]
    assert ops == ["linear", "linear"] and a.ops[0].params["out_features"] == 2301
    fixes = rule(a, "alignment").set_index("layer")["fix"]
    assert "where the model is defined" in fixes["0"] and "Conv1D" in fixes["0"]
    assert "pk.padded_linear(model[2]" in fixes["2"]


def test_a_conv1d_is_never_given_padded_conv2d():
    net = nn.Sequential(nn.Conv1d(1, 500, 10, stride=5), nn.GELU(), nn.Conv1d(500, 500, 3))
    a = advise(net, torch.randn(8, 1, 16000))
    assert not any("padded_conv2d" in f for f in a.findings["fix"])
    assert rule(a, "first_conv").empty  # perfkit has no padded Conv1d: no fix it cannot apply
    assert "where the model is defined" in rule(a, "alignment").set_index("layer").loc["2", "fix"]


# --------------------------------------------------------------------------------- rules: first_conv
@pytest.mark.parametrize("stride, target", [(2, 4), (1, 8)])
def test_first_conv_pads_three_channels_to_four_with_stride_two_else_eight(stride, target):
    net = nn.Sequential(nn.Conv2d(3, 64, 7, stride=stride, padding=3), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
    a = advise(net, torch.randn(8, 3, 64, 64))
    hits = rule(a, "first_conv")
    assert hits["layer"].tolist() == ["0"]
    assert f"pad the input channels 3 → {target}" in hits.iloc[0].fix
    assert f"pk.padded_conv2d(model[0], in_multiple={target})" in hits.iloc[0].fix
    assert rule(a, "alignment").empty  # the 3 channels are first_conv's, not alignment's


def test_first_conv_is_silent_on_wide_convolutions():
    a = advise(nn.Conv2d(64, 64, 3, padding=1), torch.randn(8, 64, 32, 32))
    assert rule(a, "first_conv").empty


# ------------------------------------------------------------------------------------- rules: layout
def test_layout_fires_for_nchw_and_not_for_channels_last():
    net = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
                        nn.Conv2d(128, 128, 3, padding=1))
    x = torch.randn(8, 64, 56, 56)
    a = advise(net, x)
    hits = rule(a, "layout")
    assert sorted(hits["layer"]) == ["0", "3"]
    assert (hits["predicted_saving_s"] > 0).all()
    assert all("channels_last" in fix for fix in hits["fix"])
    net = net.to(memory_format=torch.channels_last)
    b = advise(net, x.to(memory_format=torch.channels_last))
    assert rule(b, "layout").empty
    assert b.layers[b.layers["op"] == "conv"].shape[0] == a.layers[a.layers["op"] == "conv"].shape[0]
    # the saving is what the NCHW copies add to the step: channels-last takes exactly that off
    assert a.step_s - b.step_s == pytest.approx(hits["predicted_saving_s"].sum(), rel=1e-9)
    assert "conv.nchw_transpose" not in set(b.layers["op"])
    fp32 = advise(nn.Conv2d(64, 128, 3, padding=1), x, dtype="float32")  # NCHW, no Tensor Cores
    assert "layout" not in set(fp32.findings["rule"]) and "conv.nchw_transpose" not in set(fp32.layers["op"])


# ---------------------------------------------------------------------------------- rules: rnn_sizes
def test_rnn_sizes_fires_for_hidden_1000_and_batch_20():
    a = advise(RNNModel(1000), torch.randn(20, 35, 1000))
    hits = rule(a, "rnn_sizes")
    assert set(hits["layer"]) == {"lstm"}
    fixes = set(hits["fix"])
    assert "hidden 1000 → 1024" in fixes and "batch 20 → 24" in fixes


def test_rnn_sizes_is_silent_for_hidden_1024_and_batch_32():
    a = advise(RNNModel(1024), torch.randn(32, 35, 1024))
    assert rule(a, "rnn_sizes").empty
    rnn = a.layers[a.layers["layer"] == "lstm"]
    assert {"forward", "dgrad", "wgrad"} <= set(rnn["pass"])
    # the recurrent GEMM runs once per step: rnn_gemms' shape, repeated seq_len times
    rec = rnn[(rnn["pass"] == "forward") & (rnn["op"] == "rnn.l0.recurrent")].iloc[0]
    assert (rec.M, rec.N, rec.K) == pk.rnn_gemms("lstm", 1024, 1024, 32, 35)["recurrent"] and rec["count"] == 35


# -------------------------------------------------------------------------------- rules: small_batch
def test_small_batch_fires_below_the_math_bound_batch_only():
    star = pk.math_bound_batch(4096, 4096, spec(), BF16)
    assert 16 < star < 8192
    a = advise(nn.Linear(4096, 4096), torch.randn(16, 4096))
    hits = rule(a, "small_batch")
    assert len(hits) == 1 and f"at least {star}" in hits.iloc[0].fix
    assert hits.iloc[0].predicted_saving_s > 0
    assert rule(a, "memory_bound").empty  # its memory-bound GEMM is small_batch's, not memory_bound's
    b = advise(nn.Linear(4096, 4096), torch.randn(8192, 4096))
    assert rule(b, "small_batch").empty


# ------------------------------------------------------------------------------------- rules: fusion
def test_fusion_fires_for_a_chain_between_linears_not_for_a_lone_activation():
    a = advise(Wrapped(), torch.randn(8192, 1024))
    hits = rule(a, "fusion")
    assert len(hits) == 1
    f = hits.iloc[0]
    assert f.layer == "block"  # the module holding the chain, as named_modules() names it
    assert "layer_norm → gelu → dropout" in f.message and "torch.compile" in f.fix
    assert f.predicted_saving_s > 0
    lone = advise(nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 1024)), torch.randn(8192, 1024))
    assert rule(lone, "fusion").empty


# ------------------------------------------------------------------------------- rules: memory_bound
def test_memory_bound_fires_for_attention_scores_as_a_matmul_not_for_sdpa():
    q = k = v = torch.randn(8, 12, 1024, 64)
    a = advise(Scores(), (q, k))
    hits = rule(a, "memory_bound")
    assert len(hits) == 1
    intensity = pk.arithmetic_intensity(1024, 1024, 64, BF16)
    ridge = spec().ops_per_byte(BF16)
    assert intensity < ridge
    assert f"{intensity:.0f} FLOP/B" in hits.iloc[0].message and f"{ridge:.0f} FLOP/B" in hits.iloc[0].message
    assert "scaled_dot_product_attention" in hits.iloc[0].fix
    fwd = a.layers[a.layers["pass"] == "forward"].iloc[0]
    assert (fwd.M, fwd.N, fwd.K, fwd.batch) == (1024, 1024, 64, 96)
    assert fwd.intensity == pytest.approx(intensity)
    assert rule(advise(Fused(), (q, k, v)), "memory_bound").empty


def test_memory_bound_fires_for_a_narrow_layer_at_any_batch():
    assert pk.math_bound_batch(4096, 8, spec(), BF16) is None  # memory-bound whatever the batch
    a = advise(nn.Linear(4096, 8), torch.randn(8192, 4096))
    hits = rule(a, "memory_bound")
    assert len(hits) == 1 and rule(a, "small_batch").empty
    intensity = pk.arithmetic_intensity(8, 8192, 4096, BF16)
    assert f"{intensity:.0f} FLOP/B" in hits.iloc[0].message
    # a square layer at 8192 tokens is above the ridge: not memory-bound
    assert pk.arithmetic_intensity(4096, 8192, 4096, BF16) > spec().ops_per_byte(BF16)
    assert rule(advise(nn.Linear(4096, 4096), torch.randn(8192, 4096)), "memory_bound").empty


@pytest.mark.parametrize("batch", [32, 256])
def test_memory_bound_names_the_channels_not_the_batch_when_the_channels_limit_it(batch):
    # ResNet-50's layer1.0.conv1: a 1x1 convolution 64 → 64 sits at 32 FLOP/B whatever the batch
    net = nn.Sequential(nn.Conv2d(64, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
    a = advise(net.to(memory_format=torch.channels_last),
               torch.randn(batch, 64, 56, 56).to(memory_format=torch.channels_last), spec=H100_SXM)
    f = rule(a, "memory_bound").set_index("layer").loc["0"]
    assert "32 FLOP/B" in f.message and "output channels (64)" in f.message and "filter taps (64)" in f.message
    assert "a larger batch will not help" in f.fix


def test_memory_bound_names_the_tokens_when_the_batch_limits_a_gemm():
    # a batched product of activations (no weight): its batch is its rows; small_batch does not own it
    class Outer(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)

    a = advise(Outer(), (torch.randn(8, 4096), torch.randn(4096, 4096)), training=False)
    f = rule(a, "memory_bound").iloc[0]
    assert "rows (8)" in f.message and "make its smallest dimension larger" in f.fix


def test_memory_bound_reports_isolated_memory_ops_and_the_step_share():
    net = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.LayerNorm(1024))
    a = advise(net, torch.randn(8192, 1024))
    hits = rule(a, "memory_bound").set_index("layer")
    assert {"1", "3"} <= set(hits.index)  # the GELU and the LayerNorm, each alone between GEMMs
    assert hits.loc["1", "predicted_saving_s"] > 0 and "epilogue" in hits.loc["1", "fix"]
    share = a.layers.loc[a.layers["bound"] == "memory", "predicted_s"].sum() / a.step_s
    assert a.memory_bound_share == pytest.approx(share) and 0 < share < 1
    assert f"memory-bound ops: {pk.units.format_percent(share)} of the step" in str(a)
    fp32 = advise(net, torch.randn(8192, 1024), dtype="float32")  # float32 bytes: half of them to win
    assert "bfloat16" in rule(fp32, "memory_bound").set_index("layer").loc["3", "fix"]


# ------------------------------------------------------------------------------- rules: quantization
def test_quantization_fires_for_a_wave_that_is_half_empty():
    # forward M=2304 (out), N=1024 (tokens), K=1024: 72 tiles on 132 SMs
    p = pk.explain_gemm(2304, 1024, 1024, BF16, spec())
    useful = p.utilization * p.tile_efficiency
    assert useful < QUANTIZATION_THRESHOLD
    a = advise(nn.Linear(1024, 2304), torch.randn(1024, 1024), training=False)
    hits = rule(a, "quantization")
    assert len(hits) == 1
    f = hits.iloc[0]
    assert f"{useful:.1%}" in f.message and f"{p.tiles} tiles" in f.message and f"{spec().sms}" in f.message
    target = int(f.fix.split("out_features 2304 → ")[1].split()[0])
    assert target != 2304 and target % 64 == 0
    # the saving: the same work done at the new width's time per feature, priced by the same models
    wider = advise(nn.Linear(1024, target), torch.randn(1024, 1024), training=False)
    assert f.predicted_saving_s == pytest.approx(a.step_s - wider.step_s * 2304 / target)
    assert f.predicted_saving_s > 0


def test_rules_argument_selects_rules():
    a = advise(Head(), torch.randn(8191, 1000), rules=["alignment"])
    assert set(a.findings["rule"]) == {"alignment"}
    assert advise(Head(), torch.randn(8191, 1000), rules=[]).findings.empty


# ------------------------------------------------------------------------------------------ names
def test_layer_names_are_named_modules_names():
    a = advise(Wrapped(), torch.randn(512, 1024))
    names = dict(Wrapped().named_modules())
    assert set(a.layers["layer"]) == {"block.fc1", "block.ln", "block.act", "block.drop", "block.fc2"}
    assert set(a.findings["layer"]) <= set(names)
    assert (a.layers["module"][a.layers["layer"] == "block.fc1"] == "Linear").all()


class Shared(nn.Module):
    """One Linear module registered under two names (``a`` first): named_modules() calls it ``a``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(1000, 1000)
        self.b = self.a

    def forward(self, x):
        return self.b(self.a(x))


def test_a_shared_module_keeps_its_named_modules_name():
    model = Shared()
    a = advise(model, torch.randn(64, 1000))
    names = [n for n, _ in model.named_modules()]
    assert names == ["", "a"]
    assert set(a.layers["layer"]) == {"a"}
    assert set(a.findings["layer"]) <= set(names)


# ------------------------------------------------------------------------------------ layers table
def test_linear_rows_are_linear_gemms():
    mlp = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1000))
    a = advise(mlp, torch.randn(4, 2048, 1024))
    assert list(a.layers.columns) == list(LAYER_COLUMNS)
    for layer, (i, o), passes in (("0", (1024, 4096), ["forward", "wgrad"]),  # reads the inputs: no dgrad
                                  ("2", (4096, 1000), ["forward", "dgrad", "wgrad"])):
        rows = a.layers[a.layers["layer"] == layer]
        assert rows["pass"].tolist() == passes
        gemms = pk.linear_gemms(4 * 2048, i, o)
        for r in rows.to_dict("records"):
            assert (r["M"], r["N"], r["K"]) == gemms[r["pass"]]
    inference = advise(mlp, torch.randn(4, 2048, 1024), training=False)
    assert set(inference.layers["pass"]) == {"forward"}
    assert len(inference.layers) == 3


def test_frozen_weights_have_no_weight_gradient():
    mlp = nn.Sequential(nn.Embedding(1000, 256), nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256))
    mlp[0].requires_grad_(False)
    mlp[1].requires_grad_(False)
    a = advise(mlp, torch.zeros(8, 128, dtype=torch.long))
    passes = a.layers.groupby("layer")["pass"].apply(list).to_dict()
    assert passes["0"] == ["forward"]  # a frozen table: no backward at all
    assert passes["1"] == ["forward", "dgrad"]  # frozen weight: the input's gradient only
    assert passes["3"] == ["forward", "dgrad", "wgrad"]
    assert mlp[1].weight.requires_grad is False  # left as it was


def test_conv_rows_are_conv_gemms_and_the_first_conv_has_no_dgrad():
    a = advise(ConvNet(), torch.randn(8, 3, 64, 64))
    conv1 = a.layers[(a.layers["layer"] == "conv1") & (a.layers["op"] == "conv")]
    assert conv1["pass"].tolist() == ["forward", "wgrad"]
    # NCHW on Tensor Cores: what each pass reads transposed to NHWC (the 3-channel input padded to 4 on the
    # way), the filters, and what it writes transposed back: forward x, w, y; wgrad x, dy, dw
    copies = a.layers[(a.layers["layer"] == "conv1") & (a.layers["op"] == "conv.nchw_transpose")]
    assert copies["pass"].tolist() == ["forward"] * 3 + ["wgrad"] * 3
    x, w, y = 2 * 8 * 3 * 64 * 64, 2 * 64 * 3 * 7 * 7, 2 * 8 * 64 * 32 * 32
    assert copies["bytes"].tolist() == [x + x * 4 // 3, 2 * w, 2 * y, x + x * 4 // 3, 2 * y, 2 * w]
    g1 = pk.conv_gemms(8, 3, 64, 64, 64, 7, 7, stride=2, padding=3)
    assert tuple(conv1.iloc[0][["M", "N", "K"]]) == g1["forward"]
    assert tuple(conv1.iloc[1][["M", "N", "K"]]) == g1["wgrad"]
    conv2 = a.layers[(a.layers["layer"] == "conv2") & (a.layers["op"] == "conv")]
    assert conv2["pass"].tolist() == ["forward", "dgrad", "wgrad"]
    g2 = pk.conv_gemms(8, 64, 32, 32, 128, 3, 3, stride=2, padding=1)
    g2["dgrad"] = (8 * 16 * 16, 64, 128 * 9)  # the forward's multiply-adds: stride 2 has 1/4 of N·H·W's
    for r in conv2.to_dict("records"):
        assert (r["M"], r["N"], r["K"]) == g2[r["pass"]]
    inference = advise(ConvNet(), torch.randn(8, 3, 64, 64), training=False)
    assert set(inference.layers["pass"]) == {"forward"}


def test_memory_bound_rows_are_the_byte_model():
    a = advise(Wrapped(), torch.randn(8, 512, 1024))
    shape = (8, 512, 1024)
    rows = a.layers.set_index(["layer", "pass"])
    for layer, kind, params in (("block.act", "gelu", {}), ("block.drop", "dropout", {}),
                                ("block.ln", "layernorm", {"normalized_ndim": 1, "elementwise_affine": True,
                                                           "training": True})):
        for pass_ in ("forward", "backward"):
            assert rows.loc[(layer, pass_), "bytes"] == pk.layer_bytes(kind, shape, BF16, pass_=pass_, **params)
            assert rows.loc[(layer, pass_), "bound"] == "memory"
    c = advise(ConvNet(), torch.randn(8, 3, 64, 64))
    rows = c.layers.set_index(["layer", "pass"])
    for layer, kind, params in (("bn1", "batchnorm", {"training": True}), ("relu", "relu", {})):
        for pass_ in ("forward", "backward"):
            assert rows.loc[(layer, pass_), "bytes"] == pk.layer_bytes(kind, (8, 64, 32, 32), BF16, pass_=pass_,
                                                                       **params)


def test_the_step_is_the_sum_of_the_layers():
    a = advise(ConvNet(), torch.randn(8, 3, 64, 64))
    assert a.step_s == pytest.approx(a.layers["predicted_s"].sum())
    assert a.by_layer()["predicted_s"].sum() == pytest.approx(a.step_s)
    assert a.by_layer()["share"].sum() == pytest.approx(1)
    assert (a.layers["predicted_s"] > 0).all()
    assert format_time(a.step_s) in str(a)


# --------------------------------------------------------------------------------- meta / real path
def test_a_model_built_on_meta_is_advised_on_meta():
    with torch.device("meta"):
        model = Head()
    a = advise(model, torch.zeros(8192, 1000, device="meta"))
    assert a.path == "meta" and a.note == ""
    assert rule(a, "alignment")["layer"].tolist() == ["lm_head"]
    assert all(p.device.type == "meta" for p in model.parameters())
    assert no_hooks(model) and model.training


def test_a_real_model_is_advised_on_a_meta_copy_and_left_as_it_was():
    model = ConvNet().train()
    model.bn1.eval()  # mixed flags must come back as they were
    model.conv1.weight.requires_grad_(False)
    before = snapshot(model)
    a = advise(model, torch.randn(8, 3, 64, 64))
    assert a.path == "meta"
    assert_unchanged(model, before)
    # the same shapes and findings as the same model built on meta
    with torch.device("meta"):
        on_meta = ConvNet()
    on_meta.conv1.weight.requires_grad_(False)  # frozen there too: no weight gradient
    b = advise(on_meta, torch.zeros(8, 3, 64, 64, device="meta"))
    pd.testing.assert_frame_equal(a.layers, b.layers)


@pytest.mark.parametrize("how", ["item", "tolist"])
def test_a_model_that_cannot_run_on_meta_takes_the_real_path(how):
    model = ItemModel(how).train()
    model.drop.eval()
    model.fc.weight.requires_grad_(False)
    with torch.no_grad():
        model.bn.running_mean.add_(0.5)
        model.bn.running_var.mul_(2)
    before = snapshot(model)
    nbt = int(model.bn.num_batches_tracked)
    a = advise(model, torch.randn(4, 8, 16, 16))
    assert a.path == "real"
    assert "the meta device could not run it" in a.note
    assert "a real forward pass" in str(a) and a.note in str(a)
    assert_unchanged(model, before)  # running statistics, flags, requires_grad, no hooks
    assert int(model.bn.num_batches_tracked) == nbt
    assert torch.is_grad_enabled()
    assert {"conv", "bn", "fc"} <= set(a.layers["layer"])
    assert a.layers.loc[(a.layers["layer"] == "conv") & (a.layers["op"] == "conv"), "pass"].tolist() == [
        "forward", "wgrad"]


def test_meta_false_runs_the_model_itself_and_says_so():
    model = Head(64, 100)
    before = snapshot(model)
    a = advise(model, torch.randn(64, 64), meta=False)
    assert a.path == "real" and "meta=False" in a.note
    assert_unchanged(model, before)


def test_a_model_deepcopy_cannot_copy_runs_for_real_and_says_why():
    class Locked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)
            self.lock = threading.Lock()  # deepcopy cannot copy a lock

        def forward(self, x):
            return self.fc(x)

    model = Locked()
    before = snapshot(model)
    a = advise(model, torch.randn(64, 64))
    assert a.path == "real" and "could not be copied to the meta device" in a.note
    assert a.layers["layer"].tolist() == ["fc", "fc"]
    assert_unchanged(model, before)


def test_keyword_inputs_and_non_tensor_arguments():
    class KW(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x, scale=1.0):
            return {"y": self.fc(x) * scale}

    a = advise(KW(), {"x": torch.randn(64, 64), "scale": 2.0})
    b = advise(KW(), (torch.randn(64, 64), 2.0))
    assert a.layers["layer"].tolist()[:1] == ["fc"]
    pd.testing.assert_frame_equal(a.layers, b.layers)


# ----------------------------------------------------------------------------------------- hooks
def _function_modes() -> int:
    return torch._C._len_torch_function_stack()


def test_no_hook_or_function_mode_is_left_behind():
    model = ConvNet()
    seen = []
    user = model.fc.register_forward_hook(lambda m, i, o: seen.append(1))
    modes = _function_modes()
    advise(model, torch.randn(2, 3, 32, 32))
    assert list(model.fc._forward_hooks) == [user.id]
    user.remove()
    assert no_hooks(model)
    assert _function_modes() == modes and torch.is_grad_enabled()


def test_no_hook_or_function_mode_is_left_behind_when_the_forward_raises():
    model = ConvNet()
    model.train()
    before = snapshot(model)
    modes = _function_modes()
    with pytest.raises(ValueError):
        advise(model, torch.randn(2, 4, 32, 32))  # 4 channels into conv1
    assert_unchanged(model, before)
    assert _function_modes() == modes and torch.is_grad_enabled()
    with torch.device("meta"):
        on_meta = ConvNet()
    with pytest.raises(ValueError):
        advise(on_meta, torch.zeros(2, 4, 32, 32, device="meta"))
    assert no_hooks(on_meta) and on_meta.training
    assert _function_modes() == modes


# -------------------------------------------------------------------------------------- unmapped
class Upsample(nn.Module):
    """Nearest-neighbour upsampling written as F.interpolate (perfkit does not map it)."""

    def forward(self, x):
        return F.interpolate(x, scale_factor=1)


class Odd(nn.Module):
    """A convolution, an upsampling and a ConvTranspose2d (perfkit maps neither), then a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.gn = Upsample()
        self.up = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.fc = nn.Linear(16 * 32 * 32, 64)

    def forward(self, x):
        return self.fc(self.up(self.gn(self.conv(x))).flatten(1))


def test_unmapped_layers_are_listed_and_the_rest_is_advised():
    a = advise(Odd(), torch.randn(2, 8, 16, 16))
    assert list(a.unmapped.columns) == list(UNMAPPED_COLUMNS)
    assert set(a.unmapped["layer"]) == {"gn", "up"}
    assert set(a.unmapped["module"]) == {"Upsample", "ConvTranspose2d"}
    assert set(a.layers["layer"]) == {"conv", "fc"}
    assert "Upsample" in str(a) and "ConvTranspose2d" in a._repr_html_()


def test_group_norm_and_weight_norm_are_memory_ops():
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(64, 64, 3, padding=1))
    a = advise(nn.Sequential(conv, nn.GroupNorm(8, 64)), torch.randn(4, 64, 1000))
    assert a.unmapped.empty
    kinds = {(o.layer, o.op) for o in a.ops}
    assert ("1", "layernorm") in kinds and any(op == "elementwise" for _, op in kinds)
    norm = a.layers[(a.layers["layer"] == "1") & (a.layers["pass"] == "forward")].iloc[0]
    assert norm["bytes"] == pk.layer_bytes("layernorm", (4, 64, 1000), BF16, normalized_ndim=2,
                                           elementwise_affine=True, training=True)


def test_a_layer_whose_work_is_one_unknown_function_is_unmapped_not_dropped():
    class Distances(nn.Module):  # its child never runs: its work is one function perfkit does not know
        def __init__(self):
            super().__init__()
            self.unused = nn.Linear(256, 256)

        def forward(self, x):
            return torch.cdist(x, x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(256, 256)
            self.dist = Distances()

        def forward(self, x):
            return self.dist(self.fc(x))

    a = advise(Model(), torch.randn(4, 128, 256))
    assert "dist" in set(a.unmapped["layer"])
    assert "dist.unused" not in set(a.unmapped["layer"])  # it never ran
    assert "fc" in set(a.layers["layer"])


def test_multihead_attention_is_its_projections_and_its_attention():
    class Attn(nn.Module):
        def __init__(self, need_weights):
            super().__init__()
            self.attn = nn.MultiheadAttention(256, 4, batch_first=True)
            self.need_weights = need_weights

        def forward(self, x):
            return self.attn(x, x, x, need_weights=self.need_weights)[0]

    x = torch.randn(4, 128, 256)
    fused = advise(Attn(False), x, training=False)
    assert fused.unmapped.empty
    rows = fused.layers.set_index("op")
    assert list(fused.layers["op"]) == ["linear", "attention", "linear"]
    assert rows.loc["attention", "batch"] == 16 and (rows["N"].iloc[0], rows["K"].iloc[0]) == (512, 256)
    assert int(fused.layers.iloc[0]["M"]) == 768  # query, key and value in one packed GEMM (3 × 256)
    scores = advise(Attn(True), x, training=False)  # the weights are returned: the scores are written out
    assert list(scores.layers["op"]) == ["linear", "matmul", "softmax", "matmul", "linear"]
    assert scores.flops == pytest.approx(fused.flops)
    assert "use F.scaled_dot_product_attention" in " ".join(rule(scores, "memory_bound")["fix"])


def test_indexing_a_parameter_table_is_a_lookup_and_slicing_is_free():
    class Positions(nn.Module):  # Whisper's positional embedding: self.weight[position_ids]
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(448, 256))

        def forward(self, ids):
            return self.weight[ids]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = Positions()
            self.fc = nn.Linear(256, 256)

        def forward(self, x):
            h = x + self.pos(torch.arange(x.shape[1]))
            return self.fc(h)[:, 0]  # a slice: a view, no work

    a = advise(Model(), torch.randn(8, 64, 256))
    assert a.unmapped.empty
    assert [(o.layer, o.op) for o in a.ops] == [("pos", "embedding"), ("", "elementwise"), ("fc", "linear")]
    assert a.ops[0].params["num_embeddings"] == 448


def test_a_leaf_that_runs_nothing_known_is_unmapped():
    a = advise(nn.Sequential(nn.Linear(64, 64), nn.PReLU(), nn.Linear(64, 64), nn.Identity()),
               torch.randn(64, 64))
    assert a.unmapped[["layer", "module"]].values.tolist() == [["1", "PReLU"]]


# ------------------------------------------------------------------------------------- bad input
def test_bad_input():
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 8)))
    x = torch.randn(4, 16)
    with pytest.raises(TypeError, match="nn.Module"):
        advise("model", x)
    with pytest.raises(TypeError, match="tensor"):
        advise(mlp, (1, 2))
    with pytest.raises(TypeError, match="tensor"):
        advise(mlp, {"x": 3})
    with pytest.raises(LookupError, match="Z999-NOPE"):
        advise(mlp, x, spec="Z999-NOPE")
    with pytest.raises(ValueError, match="float12"):
        advise(mlp, x, dtype="float12")
    with pytest.raises(LookupError, match="nope"):
        advise(mlp, x, rules=["nope"])
    with pytest.raises(LookupError, match="bfloat16"):
        advise(mlp, x, spec="V100-SXM2")  # no bfloat16 peak on a V100
    assert no_hooks(mlp)


def test_a_failing_forward_names_the_layer_and_the_shapes():
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(33, 8)))
    with pytest.raises(ValueError) as e:
        advise(mlp, torch.randn(4, 16))
    msg = str(e.value)
    assert "'2.0'" in msg and "Linear" in msg and "[4, 32]" in msg
    with pytest.raises(ValueError) as e:
        advise(nn.Linear(16, 8), torch.randn(4, 17))
    assert "[4, 17]" in str(e.value) and "Linear" in str(e.value)
    assert no_hooks(mlp)


class Masked(nn.Module):
    """Checks a mask's values, as transformers does before skipping an all-ones attention mask."""

    def __init__(self, count_tokens: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.count_tokens = count_tokens

    def forward(self, x, mask=None):
        if self.count_tokens:
            return self.fc(x[:, : int(mask.sum())])  # a shape read from values: no meta kernel can know it
        if bool(mask.all()):
            return self.fc(x)
        return self.fc(x) * mask[..., None]


def test_a_boolean_check_on_a_meta_mask_is_taken_as_true_and_said():
    with torch.device("meta"):
        model = Masked()
    a = advise(model, {"x": torch.zeros(4, 16, 64, device="meta"),
                       "mask": torch.ones(4, 16, dtype=torch.bool, device="meta")})
    assert a.path == "meta" and "taken as true" in a.note
    assert [o.op for o in a.ops] == ["linear"]  # the all-ones branch


def test_a_value_a_meta_tensor_lacks_fails_with_the_keyword_shapes_and_a_hint():
    with torch.device("meta"):
        model = Masked(count_tokens=True)
    with pytest.raises(ValueError) as e:
        advise(model, {"x": torch.zeros(4, 16, 64, device="meta"),
                       "mask": torch.ones(4, 16, dtype=torch.long, device="meta")})
    msg = str(e.value)
    assert "[4, 16, 64]" in msg and "[4, 16]" in msg  # keyword inputs are named too
    assert "meta tensors hold no values" in msg and "build it on the CPU" in msg
    real = Masked(count_tokens=True)  # real weights: the meta copy fails, the model itself runs
    a = advise(real, {"x": torch.randn(4, 16, 64), "mask": torch.ones(4, 16, dtype=torch.long)})
    assert a.path == "real" and [o.op for o in a.ops] == ["linear"]


# --------------------------------------------------------------------------------------- measure
@pytest.mark.filterwarnings("ignore::perfkit.timing.NoiseWarning")
def test_measure_on_this_machine():
    here = pk.current_device()
    mlp = nn.Sequential(nn.Linear(64, 100), nn.GELU(), nn.Linear(100, 64))
    a = advise(mlp, torch.randn(60, 64), dtype="float32", spec=here, measure=True)
    m = a.measured
    assert m is not None and len(m) == len(a.ops) == 3
    assert m["layer"].tolist() == ["0", "1", "2"]
    assert (m["forward_s"] > 0).all() and (m["backward_s"] > 0).all()
    assert (m["predicted_forward_s"] > 0).all()
    assert "measured_saving_s" in a.findings.columns
    assert "measured here" in str(a) and "measured here" in a._repr_html_()
    assert "measured_saving_s" in a.by_rule().columns


@pytest.mark.filterwarnings("ignore::perfkit.timing.NoiseWarning")
def test_measure_refuses_a_device_that_is_not_here():
    if cuda_available():
        pytest.skip("this test needs a machine that is not an H100")
    mlp = nn.Sequential(nn.Linear(64, 64))
    with pytest.raises(ValueError, match="would not compare"):
        advise(mlp, torch.randn(64, 64), measure=True)
    a = advise(mlp, torch.randn(64, 64))
    with pytest.raises(ValueError, match="current_device"):
        a.measure()
    assert a.measured is None


# ------------------------------------------------------------------------------------ printed forms
def test_str_and_html_name_the_rules_the_device_and_the_dtype():
    a = advise(ConvNet(), torch.randn(8, 3, 64, 64))
    fired = set(a.findings["rule"])
    assert {"first_conv", "layout"} <= fired
    text, page = str(a), a._repr_html_()
    for r in fired:
        assert f"- {r}:" in text and f'">{r}</td>' in page
    for r in set(RULES) - fired:
        assert f"- {r}:" not in text
    for s in (text, page):
        assert H100_SXM in s and BF16 in s
    assert list(a.by_rule().index) == [r for r in RULES if r in fired]
    clean = advise(nn.Linear(1024, 1024), torch.randn(8192, 1024), rules=["alignment"])
    assert "no findings" in str(clean).lower() and "no findings" in clean._repr_html_().lower()


# ---------------------------------------------------------------------------------- command line
def test_cli_advise_an_lstm(capsys, tmp_path):
    csv = tmp_path / "findings.csv"
    assert main(["advise", "perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--spec", H100_SXM, "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    # which of the two fixes is the example depends on two priced savings within microseconds of each other
    assert "- rnn_sizes: 2 findings" in out and "e.g. lstm" in out and H100_SXM in out
    assert "batch 20 → 24" in out or "hidden 1000 → 1024" in out
    table = pd.read_csv(csv, keep_default_na=False)
    assert list(table.columns) == list(FINDING_COLUMNS)
    assert {"hidden 1000 → 1024", "batch 20 → 24"} <= set(table.loc[table["rule"] == "rnn_sizes", "fix"])
    assert set(table.loc[table["rule"] == "rnn_sizes", "layer"]) == {"lstm"}


def test_cli_inference_and_no_meta(capsys, monkeypatch):
    factories = types.ModuleType("_advisor_factories")
    factories.head = lambda: Head(64, 100)
    monkeypatch.setitem(sys.modules, "_advisor_factories", factories)
    assert main(["advise", "_advisor_factories:head", "--input", "60x64", "--spec", H100_SXM, "--inference",
                 "--no-meta", "--dtype", "float16"]) == 0
    out = capsys.readouterr().out
    assert "forward pass" in out and "float16" in out and "real forward pass" in out


def test_cli_step_time_prints_the_mfu(capsys):
    assert main(["advise", "perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--spec", H100_SXM, "--step-time",
                 "0.002"]) == 0
    out = capsys.readouterr().out
    assert "measured step of 0.002 s:" in out and "MFU" in out and "989 TFLOP/s dense datasheet peak" in out
    assert main(["advise", "perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--spec", H100_SXM, "--step-time",
                 "-1"]) == 2
    assert "step_time_s" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["perfkit.zoo:no_such_builder", "--input", "2x3"], ["cannot load"]),
    (["no_such_module_xyz:f", "--input", "2x3"], ["cannot load"]),
    (["perfkit.zoo:LLAMA_CONFIGS", "--input", "2x3"], ["must name a function"]),
    (["perfkit.zoo:lstm_lm", "--input", "20xabc:int64"], ["--input", "20xabc"]),
    (["perfkit.zoo:lstm_lm", "--input", "20x35:float99"], ["float99"]),
    (["perfkit.zoo:lstm_lm", "--input", "0x35:int64"], ["positive"]),
    (["perfkit.zoo:resnet50", "--input", "2x4x32x32"], ["conv1", "[2, 4, 32, 32]"]),
    (["_advisor_factories:broken", "--input", "4x8"], ["'fc'", "[4, 8]"]),
    (["_advisor_factories:not_a_model", "--input", "4x8"], ["nn.Module"]),
    (["perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--spec", "Z999-NOPE"], ["Z999-NOPE"]),
    (["perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--dtype", "float12"], ["float12"]),
])
def test_cli_bad_usage_returns_2_with_a_message(argv, words, capsys, monkeypatch):
    factories = types.ModuleType("_advisor_factories")
    factories.broken = Broken
    factories.not_a_model = lambda: 42
    monkeypatch.setitem(sys.modules, "_advisor_factories", factories)
    assert main(["advise", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfkit advise:")
    for w in words:
        assert w in err


class Broken(nn.Module):
    """Its ``fc`` takes 16 features: inputs of 8 fail there."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc(x)


# --------------------------------------------------------------------------------------------- zoo
@pytest.mark.slow  # advises every zoo model: seconds
def test_the_zoo_models_get_the_findings_the_book_expects():
    cases = [
        (pk.zoo.gpt2_small, (8, 1024), torch.int64, {"alignment": "lm_head", "fusion": None}),
        (pk.zoo.resnet50, (32, 3, 224, 224), torch.float32,
         {"first_conv": "conv1", "layout": "layer1.0.conv2", "fusion": None}),
        (pk.zoo.lstm_lm, (20, 35), torch.int64, {"rnn_sizes": "lstm", "small_batch": "lstm"}),
        (pk.zoo.llama, (1, 2048), torch.int64, {"fusion": None}),
    ]
    for build, shape, dtype, expected in cases:
        with torch.device("meta"):
            model = build()
        a = advise(model, torch.zeros(shape, dtype=dtype, device="meta"))
        assert a.path == "meta", build.__name__
        assert a.unmapped.empty, (build.__name__, a.unmapped)
        names = dict(model.named_modules())
        assert set(a.layers["layer"]) <= set(names) and set(a.findings["layer"]) <= set(names), build.__name__
        # every finding has a fix; one whose saving is not positive (or not priced) is only "info"
        assert (a.findings["fix"].str.len() > 0).all()
        unpriced = ~(a.findings["predicted_saving_s"] > 0)
        assert (a.findings.loc[unpriced, "severity"] == "info").all()
        assert (a.findings.loc[~unpriced, "severity"] != "info").all()
        for r, layer in expected.items():
            hits = rule(a, r)
            assert len(hits), (build.__name__, r)
            if layer is not None:
                assert layer in set(hits["layer"]), (build.__name__, r, set(hits["layer"]))
        if build is pk.zoo.gpt2_small:
            assert set(rule(a, "alignment")["layer"]) == {"lm_head"}
            assert "50257 → 50304" in rule(a, "alignment").iloc[0].fix
            assert rule(a, "first_conv").empty and rule(a, "rnn_sizes").empty
        if build is pk.zoo.resnet50:
            assert set(rule(a, "first_conv")["layer"]) == {"conv1"}
            assert "3 → 4" in rule(a, "first_conv").iloc[0].fix  # conv1 has stride 2
            conv1 = (a.layers["layer"] == "conv1") & (a.layers["op"] == "conv")
            assert a.layers.loc[conv1, "pass"].tolist() == ["forward", "wgrad"]
        if build is pk.zoo.llama:
            assert rule(a, "alignment").empty and rule(a, "rnn_sizes").empty and rule(a, "first_conv").empty
            assert "layers.31.feed_forward.w2" in set(a.layers["layer"]) and "output" in set(a.layers["layer"])


def test_a_binary_op_is_timed_as_one_and_a_reduction_as_a_reduction():
    """An elementwise op reading twice its output (silu(a) * b) runs x * y, not a sum over pairs (a slow kernel
    the first H200 recording timed in its place); a mean over the last dim stays a reduction."""
    from perfkit.advisor.measure import op_functions
    from perfkit.advisor.ops import Op

    mul = Op(0, "ffn", "Module", "elementwise", {"shape": (4, 6), "read_elements": 48}, "mul")
    fn, tensors = op_functions(mul, "float32", "cpu", True)
    assert fn().shape == (4, 6) and len(tensors) == 2 and all(t.shape == (4, 6) for t in tensors)
    mean = Op(1, "norm", "Module", "elementwise", {"shape": (4, 1), "read_elements": 24}, "mean")
    fn, tensors = op_functions(mean, "float32", "cpu", True)
    (wide,) = tensors
    assert wide.shape == (4, 6) and torch.allclose(fn(), wide.sum(-1))
