"""The advisor on the newest GPUs of perfkit's table: B200 (Blackwell), MI300X (CDNA 3) and MI355X (CDNA 4).

The zoo models (an MLP, GPT-2, ResNet-50, the LSTM language model), each built on the meta device, are advised
in bfloat16, float8 and, where the GPU has it, float4 (half a byte per element); GPT-2 also in float6 (three
quarters of a byte). What is checked holds for any sane model of these GPUs, so it does not change as their
GEMM and attention constants are refitted: every prediction positive, finite and no faster than the dense
datasheet peak; the same FLOPs on every GPU; a GEMM-bound model faster on a B200 than on an H100 (and on an
MI355X than on an MI300X); the rules firing where the book says (GPT-2's vocabulary, ResNet's first
convolution and NCHW layout, the LSTM's sizes and batch), in the vendor's words; a dtype the GPU lacks (TF32
on an MI355X) refused before the model runs.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

import perfkit as pk
from perfkit.__main__ import main

NEWEST = ("B200", "MI300X", "MI355X")
GEMM_OPS = ("linear", "matmul", "conv", "rnn", "attention")


def _mlp() -> nn.Module:
    """Two wide linear layers around a GELU: GEMM-bound at 8192 tokens."""
    return nn.Sequential(nn.Linear(4096, 16384), nn.GELU(), nn.Linear(16384, 4096))


#: name → (builder, input shape, input dtype); each built on the meta device
MODELS = {
    "mlp": (_mlp, (8192, 4096), torch.float32),
    "gpt2": (lambda: pk.zoo.gpt2_small(layers=2), (8, 1024), torch.int64),
    "resnet50": (pk.zoo.resnet50, (32, 3, 224, 224), torch.float32),
    "lstm_lm": (pk.zoo.lstm_lm, (20, 35), torch.int64),
}


def _dtypes(device: str) -> list[str]:
    return ["bfloat16", "float8"] + (["float4"] if "float4" in pk.device_spec(device).peaks else [])


CASES = [pytest.param(device, dtype, name, id=f"{device}-{dtype}-{name}")
         for device in NEWEST for dtype in _dtypes(device) for name in MODELS]


@functools.cache
def advised(device: str, dtype: str, name: str, training: bool = True):
    build, shape, input_dtype = MODELS[name]
    with torch.device("meta"):
        model = build()
    return pk.advise(model, torch.zeros(shape, dtype=input_dtype, device="meta"), dtype, device, training=training)


def rule(advice, name: str):
    return advice.findings[advice.findings["rule"] == name]


@pytest.mark.parametrize("device, dtype, name", CASES)
def test_predictions_are_positive_finite_and_under_the_peak(device, dtype, name):
    a = advised(device, dtype, name)
    spec = pk.device_spec(device)
    assert a.spec.name == device and a.dtype == dtype and a.path == "meta" and a.unmapped.empty
    t = a.layers["predicted_s"]
    assert len(t) and (t > 0).all() and t.map(math.isfinite).all()
    assert a.step_s > 0 and math.isfinite(a.step_s)
    # no GEMM pass faster than its FLOPs at the dense datasheet peak of the dtype
    gemm = a.layers[a.layers["op"].str.split(".").str[0].isin(GEMM_OPS) & (a.layers["flops"] > 0)]
    assert len(gemm) and (gemm["flops"] / gemm["predicted_s"] <= spec.peak_flop_s(dtype) * (1 + 1e-9)).all()
    saving = a.findings["predicted_saving_s"]
    assert (saving.isna() | saving.map(math.isfinite)).all()
    assert (a.findings["fix"].str.len() > 0).all()
    # the work is the model's, not the GPU's: the same FLOPs as on an H100 in a dtype both have
    same = dtype if dtype in pk.device_spec("H100-SXM").peaks else "bfloat16"
    assert a.flops == advised("H100-SXM", same, name).flops > 0


@pytest.mark.parametrize("fast, slow", [("B200", "H100-SXM"), ("MI355X", "MI300X")])
def test_a_gemm_bound_model_is_faster_on_the_newer_gpu(fast, slow):
    """Twice the bfloat16 Tensor (Matrix) Core peak and more bandwidth: a GEMM-bound step takes less time; never
    less than its FLOPs at the newer GPU's dense peak."""
    new, old = advised(fast, "bfloat16", "mlp"), advised(slow, "bfloat16", "mlp")
    for a in (new, old):
        math_s = a.layers.loc[a.layers["bound"] == "math", "predicted_s"].sum()
        assert math_s > 0.5 * a.step_s  # GEMM-bound: most of the step is math
    assert new.flops == old.flops
    assert new.step_s < old.step_s
    assert new.step_s >= new.flops / pk.device_spec(fast).peak_flop_s("bfloat16")


@pytest.mark.parametrize("device", NEWEST)
@pytest.mark.parametrize("dtype", ["bfloat16", "float8"])
def test_gpt2s_vocabulary_is_the_one_alignment_finding(device, dtype):
    a = advised(device, dtype, "gpt2")
    hits = rule(a, "alignment")
    assert set(hits["layer"]) == {"lm_head"}
    assert "50257 → 50304" in hits.iloc[0]["fix"]
    assert rule(a, "first_conv").empty and rule(a, "rnn_sizes").empty
    assert len(rule(a, "fusion"))


@pytest.mark.parametrize("device", NEWEST)
def test_resnets_first_convolution_and_layout_in_the_vendors_words(device):
    a = advised(device, "bfloat16", "resnet50")
    spec = pk.device_spec(device)
    first = rule(a, "first_conv")
    assert set(first["layer"]) == {"conv1"} and "3 → 4" in first.iloc[0]["fix"]  # stride 2: 4 channels do
    layout = rule(a, "layout")
    assert "layer1.0.conv2" in set(layout["layer"])
    cores = "Matrix Core" if spec.vendor == "AMD" else "Tensor Core"
    assert first["message"].str.contains(cores).all() and layout["message"].str.contains(cores).all()
    for message in rule(a, "quantization")["message"]:  # waves of the GPU's SMs, or CUs on AMD
        assert device in message and f"waves of {spec.sms} {spec.unit_name}" in message


@pytest.mark.parametrize("device", NEWEST)
def test_the_lstms_sizes_and_batch(device):
    a = advised(device, "bfloat16", "lstm_lm")
    sizes = rule(a, "rnn_sizes")
    assert set(sizes["layer"]) == {"lstm"} and {"hidden 1000 → 1024", "batch 20 → 24"} <= set(sizes["fix"])
    small = rule(a, "small_batch")
    assert "lstm" in set(small["layer"]) and small["message"].str.contains(device).all()


@pytest.mark.parametrize("device", ["MI300X", "MI355X", "B200"])
def test_fused_attention_is_priced_as_a_fused_kernel(device):
    """PyTorch's SDPA on ROCm runs a fused (AOTriton) kernel for bfloat16 at head size 64, never the math path."""
    class Attention(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    q = torch.zeros(8, 16, 2048, 64, device="meta")
    a = pk.advise(Attention(), (q, q, q), "bfloat16", device)
    rows = a.layers[a.layers["op"] == "attention"]
    assert set(rows["pass"]) == {"forward", "backward"}
    assert (rows["bound"] != "math path").all()
    assert ((rows["predicted_s"] > 0) & rows["predicted_s"].map(math.isfinite)).all()


@pytest.mark.parametrize("device", ["B200", "MI355X"])
def test_float6_is_advised_with_its_48_byte_multiple(device):
    """float6 elements take 0.75 bytes: 16 bytes hold no whole number of them; 64 elements fill 48."""
    a = advised(device, "float6", "gpt2")
    t = a.layers["predicted_s"]
    assert a.step_s > 0 and (t > 0).all() and t.map(math.isfinite).all()
    hits = rule(a, "alignment")
    assert set(hits["layer"]) == {"lm_head"}
    assert "not a multiple of 64 (float6: 48 bytes" in hits.iloc[0]["message"]
    assert "50257 → " in hits.iloc[0]["fix"] and int(hits.iloc[0]["fix"].split("50257 → ")[1].split()[0]) % 64 == 0


class Counted(nn.Module):
    """A linear layer that counts its forward calls."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


@pytest.mark.parametrize("device, dtype", [("MI355X", "tf32"), ("MI300X", "float4"), ("MI300X", "float6"),
                                           ("H100-SXM", "float4")])
def test_a_dtype_the_gpu_lacks_is_refused_before_the_model_runs(device, dtype):
    model = Counted()
    with pytest.raises(LookupError) as info:
        pk.advise(model, torch.zeros(8, 64), dtype, device, meta=False)
    msg = str(info.value)
    spec = pk.device_spec(device)
    assert msg.startswith(f"dtype {dtype!r}: {device} has no {dtype} peak")
    assert msg.endswith(", ".join(spec.peaks)) and "bfloat16" in msg
    assert model.calls == 0


def test_the_cli_refuses_tf32_on_an_mi355x(capsys):
    assert main(["advise", "perfkit.zoo:lstm_lm", "--input", "20x35:int64", "--spec", "MI355X", "--dtype",
                 "tf32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfkit advise:") and "'tf32'" in err and "MI355X" in err and "float4" in err
