"""``pk.advise`` on real third-party model code: transformers' GPT-2, BERT, Llama, T5, ViT, Whisper, BART and
Wav2Vec2, torch's own ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``, and perfkit's zoo CNNs
with depthwise (MobileNetV2) and grouped (ResNeXt-50) convolutions.

Hand-built test models only contain what their author thought of; these are the architectures people
actually train, written by others (masks built from ``attention_mask``, tied embeddings, ``Conv1d``
front ends, fused-attention fast paths, squeeze-excitation blocks). Every model is built from a small
configuration (two layers, real widths) under ``torch.device("meta")``: no download, no weight is
allocated, and the inputs are meta tensors, so the file runs on a CPU in seconds.

What is checked, per model where it applies:

- advise runs on the meta path, for a forward pass and a training step, and sees inside
  ``nn.MultiheadAttention`` (nothing unmapped);
- ``advice.flops`` (FLOPs of the GEMM-like ops per step) against torch's own counter,
  ``torch.utils.flop_counter.FlopCounterMode``, run on the same meta model and inputs (see
  :func:`test_forward_flops_match_torch_flop_counter` for causal attention);
- ``advice.mfu(step_time_s)`` against the spec's dense datasheet peak and its achievable ceiling;
- no inapplicable fix: channel counts a convolution's ``groups`` cannot divide, residual-stream widths
  changed alone, ``pk.padded_conv2d`` for a ``Conv1d``, ``pk.padded_linear`` on a tied ``lm_head``,
  ``first_conv`` on a squeeze-excitation conv, "a larger batch" for a GEMM its channels limit;
- one rule per cause (a bigger batch's gain only under ``small_batch``), memory-bound ops and their
  share of the step reported, and the inputs users pass (masks, ``BatchEncoding``, an empty batch).

Predictions are for H100-SXM in bfloat16.
"""

from __future__ import annotations

import functools
import math
import re

import pytest

transformers = pytest.importorskip("transformers")

#: Builds and captures dozens of whole third-party models: about 10 s, so in the full run only.
pytestmark = pytest.mark.slow

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.units import format_percent  # noqa: E402

H100_SXM, BF16 = "H100-SXM", "bfloat16"

# Llama-2-7B's widths (two layers: every layer is the same, and meta tensors cost nothing).
LLAMA_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
            "vocab_size": 32000}


@pytest.fixture(autouse=True)
def _quiet_transformers():
    """transformers logs advice about attention implementations and generation configs: not ours."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)


# ------------------------------------------------------------------------------------------ the models
def _ids(batch: int, length: int) -> torch.Tensor:
    return torch.zeros(batch, length, dtype=torch.long, device="meta")


def _meta(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, device="meta")


class SqueezeExcite(nn.Module):
    """A stem reading the images, then a squeeze-excitation block (MobileNetV3, EfficientNet): two 1×1 convs
    on the pooled (N, 96, 1, 1) tensor, the first narrowing 96 → 4 channels, the second widening 4 → 96."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 96, 3, stride=2, padding=1)
        self.reduce = nn.Conv2d(96, 4, 1)
        self.expand = nn.Conv2d(4, 96, 1)
        self.head = nn.Conv2d(96, 96, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        s = torch.sigmoid(self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True)))))
        return self.head(x * s)


def _regnet_block() -> nn.Module:
    """RegNetY-style: a grouped 3×3 (336 channels in 14 groups of 24) between 1×1 convolutions."""
    return nn.Sequential(nn.Conv2d(336, 336, 1), nn.BatchNorm2d(336), nn.ReLU(),
                         nn.Conv2d(336, 336, 3, padding=1, groups=14), nn.BatchNorm2d(336), nn.ReLU(),
                         nn.Conv2d(336, 336, 1), nn.BatchNorm2d(336))


def _mha(kdim=None, vdim=None, need_weights=False, length=256, source=256):
    mha = nn.MultiheadAttention(512, 8, kdim=kdim, vdim=vdim, batch_first=True)
    q = _meta(8, length, 512)
    if kdim is None:  # self-attention: one tensor for query, key and value (the packed in_proj_weight)
        return mha, {"query": q, "key": q, "value": q, "need_weights": need_weights}
    return mha, {"query": q, "key": _meta(8, source, kdim), "value": _meta(8, source, vdim),
                 "need_weights": need_weights}


def _encoder_layer():
    return nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True).eval(), _meta(8, 256, 512)


tf = transformers
#: name → (builder of the model, builder of its example inputs); each built under torch.device("meta").
MODELS = {
    "gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2)), lambda: {"input_ids": _ids(2, 1024)}),
    "bert": (lambda: tf.BertForMaskedLM(tf.BertConfig(num_hidden_layers=2)), lambda: {"input_ids": _ids(8, 128)}),
    "llama": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=2, **LLAMA_7B)),
              lambda: {"input_ids": _ids(1, 2048)}),
    "t5": (lambda: tf.T5ForConditionalGeneration(tf.T5Config(num_layers=2, num_decoder_layers=2)),
           lambda: {"input_ids": _ids(4, 256), "decoder_input_ids": _ids(4, 64)}),
    "vit": (lambda: tf.ViTForImageClassification(tf.ViTConfig(num_hidden_layers=2)),
            lambda: {"pixel_values": _meta(8, 3, 224, 224)}),
    "whisper": (lambda: tf.WhisperForConditionalGeneration(tf.WhisperConfig(encoder_layers=2, decoder_layers=2)),
                lambda: {"input_features": _meta(2, 80, 3000), "decoder_input_ids": _ids(2, 64)}),
    "bart": (lambda: tf.BartForConditionalGeneration(tf.BartConfig(encoder_layers=2, decoder_layers=2)),
             lambda: {"input_ids": _ids(4, 256)}),
    "wav2vec2": (lambda: tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(num_hidden_layers=2)), lambda: _meta(2, 32000)),
    "mha_self": (lambda: _mha()[0], lambda: _mha()[1]),
    "mha_self_weights": (lambda: _mha(need_weights=True)[0], lambda: _mha(need_weights=True)[1]),
    "mha_cross": (lambda: _mha(128, 96)[0], lambda: _mha(128, 96, source=100)[1]),
    "mha_cross_weights": (lambda: _mha(128, 96, True)[0], lambda: _mha(128, 96, True, source=100)[1]),
    "encoder_layer": (lambda: _encoder_layer()[0], lambda: _encoder_layer()[1]),
    "convnext": (lambda: tf.ConvNextForImageClassification(tf.ConvNextConfig(depths=[1, 1, 2, 1])),
                 lambda: _meta(8, 3, 224, 224)),  # depthwise 7×7 and LayerNorm on channels-last tensors
    "efficientnet": (lambda: tf.EfficientNetForImageClassification(tf.EfficientNetConfig()),
                     lambda: _meta(4, 3, 224, 224)),  # padded stem, depthwise and squeeze-excitation
    "regnet": (lambda: tf.RegNetForImageClassification(tf.RegNetConfig(depths=[1, 1, 2, 1])),
               lambda: _meta(8, 3, 224, 224)),  # grouped 3×3 convolutions
    "swin": (lambda: tf.SwinForImageClassification(tf.SwinConfig(depths=[1, 1, 2, 1])),
             lambda: _meta(4, 3, 224, 224)),  # windowed attention with a relative-position bias table
    "mobilenet_v2": (lambda: pk.zoo.mobilenet_v2(), lambda: _meta(8, 3, 224, 224)),
    "resnext50": (lambda: pk.zoo.resnext50_32x4d(), lambda: _meta(8, 3, 224, 224)),
    "regnet_block": (_regnet_block, lambda: _meta(8, 336, 28, 28)),
    "squeeze_excite": (SqueezeExcite, lambda: _meta(8, 3, 224, 224)),
}
TORCH_ATTENTION = ("mha_self", "mha_self_weights", "mha_cross", "mha_cross_weights", "encoder_layer")


def build(name: str) -> tuple[nn.Module, object]:
    """A fresh meta-device model and its meta example inputs."""
    model_fn, inputs_fn = MODELS[name]
    with torch.device("meta"):
        return model_fn(), inputs_fn()


@functools.cache
def advised(name: str, training: bool = True):
    """(model, inputs, advice) for ``MODELS[name]``; cached, as advise leaves the model as it was."""
    model, inputs = build(name)
    return model, inputs, pk.advise(model, inputs, BF16, H100_SXM, training=training)


def call(model: nn.Module, inputs) -> object:
    if isinstance(inputs, dict):
        return model(**inputs)
    return model(*inputs) if isinstance(inputs, tuple) else model(inputs)


def rule(advice, name: str):
    return advice.findings[advice.findings["rule"] == name]


# --------------------------------------------------------------------------------- a. runs on meta
@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", list(MODELS))
def test_advise_runs_on_meta(name, training):
    _, _, advice = advised(name, training)
    assert advice.path == "meta"
    assert advice.step_s > 0 and len(advice.layers)


@pytest.mark.parametrize("name", list(MODELS))
def test_nothing_is_left_unmapped(name):
    """Every module of these models does work perfkit prices: masks, rotary tables, position lookups
    (Whisper's, Swin's bias table), padding, group and weight norms (Wav2Vec2) included."""
    _, _, advice = advised(name, True)
    assert advice.unmapped.empty, advice.unmapped.to_string()


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", TORCH_ATTENTION)
def test_multihead_attention_is_seen(name, training):
    """nn.MultiheadAttention calls one functional whose projections and attention torch's function mode
    never sees; it used to be listed as unmapped with none of its work counted."""
    _, _, advice = advised(name, training)
    assert advice.unmapped.empty, advice.unmapped.to_string()
    ops = set(advice.layers["op"])
    assert "linear" in ops and ops & {"attention", "matmul"}, ops


# ------------------------------------------------------------------------------------------- b. FLOPs
class _Reference(TorchFunctionMode):
    """Runs inside FlopCounterMode: notes the FLOPs torch's counter gives each causal scaled-dot-product
    attention call, and answers a value read of a boolean meta tensor (``bool(mask.all())``, transformers'
    check that a mask is all ones) with True, as an all-ones mask would (the meta tensor has no value)."""

    def __init__(self) -> None:
        super().__init__()
        self.causal_sdpa_flops = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name in ("__bool__", "item") and args and isinstance(args[0], torch.Tensor) and args[0].is_meta
                and args[0].dtype == torch.bool):
            return True
        if name == "scaled_dot_product_attention":
            bound = {**dict(zip(("query", "key", "value", "attn_mask", "dropout_p", "is_causal"), args)), **kwargs}
            if bound.get("is_causal"):
                self.causal_sdpa_flops += sdpa_flop_count(bound["query"].shape, bound["key"].shape,
                                                          bound["value"].shape)
        return func(*args, **kwargs)


def torch_flops(name: str) -> tuple[int, int]:
    """(FlopCounterMode's total for one forward pass of ``MODELS[name]`` in eval mode on meta, the part of
    it that is causal scaled-dot-product attention)."""
    model, inputs = build(name)
    model.eval()
    ref = _Reference()
    with FlopCounterMode(display=False) as counter, torch.no_grad(), ref:
        call(model, inputs)
    return counter.get_total_flops(), ref.causal_sdpa_flops


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_flops_match_torch_flop_counter(name):
    """``advice.flops`` of a forward pass is within 1 % of torch's FlopCounterMode on the same model and inputs.

    Causal attention: a flash kernel skips the blocks above the diagonal, so perfkit counts half of QKᵀ and
    PV for ``F.scaled_dot_product_attention(..., is_causal=True)``, while FlopCounterMode counts the full
    L×S product. On the meta device torch runs SDPA by its math decomposition (two ``bmm``), so the counter
    lists those FLOPs under ``aten.bmm`` rather than under a ``scaled_dot_product`` key; the reference notes
    each causal call's count with the counter's own SDPA formula (``sdpa_flop_count``) and the expected
    total is the counter's total minus half of that. Attention written as plain matmuls (T5, the
    ``need_weights=True`` path of nn.MultiheadAttention) is counted in full by both: nothing is subtracted.
    """
    total, causal = torch_flops(name)
    assert total > 0
    if name in ("gpt2", "llama"):
        assert causal > 0.02 * total  # the sequence is long enough for the half to matter at 1 %
    expected = total - causal // 2
    _, _, advice = advised(name, False)
    assert advice.flops == pytest.approx(expected, rel=0.01), (advice.flops, total, causal)


def test_training_flops_of_gpt2():
    """A training step is forward, the activations' gradient (dgrad) and the weights' (wgrad): about 3× the
    forward FLOPs. GPT-2's first GEMMs read the embeddings, which are trained, so they keep their dgrad."""
    forward = advised("gpt2", False)[2].flops
    step = advised("gpt2", True)[2].flops
    assert step > forward > 0
    assert 2.0 <= step / forward <= 3.0 + 1e-9


@pytest.mark.parametrize("name", ["resnet50", "vit_b_16", "bert"])
def test_training_flops_match_torch_flop_counter(name):
    """A training step's FLOPs against FlopCounterMode over forward and backward: ResNet-50's strided
    convolutions (an input gradient has the forward's multiply-adds, not stride² times more), ViT-B/16's
    nn.MultiheadAttention, BERT's encoder (no causal attention here: the counter counts the whole L×S)."""
    if name in MODELS:
        model, inputs = build(name)
    else:
        with torch.device("meta"):
            model, inputs = getattr(pk.zoo, name)(), _meta(8, 3, 224, 224)
    advice = pk.advise(model, inputs, BF16, H100_SXM, training=True)
    model.train()
    with FlopCounterMode(display=False) as counter:
        out = call(model, inputs)
        (out if isinstance(out, torch.Tensor) else out.logits).float().sum().backward()
    assert advice.flops == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_training_flops_of_a_grouped_convolution():
    """A depthwise convolution's step is 3× its forward multiply-adds (forward, input and weight gradients).
    torch's FlopCounterMode counts a grouped convolution's input gradient as if it were dense (groups ×
    too many), so the reference here is the arithmetic: 2·N·P·Q·K·(C/groups)·R·S per pass."""
    with torch.device("meta"):
        model = nn.Sequential(nn.Conv2d(32, 96, 1), nn.Conv2d(96, 96, 3, padding=1, groups=96))
    advice = pk.advise(model, _meta(8, 32, 56, 56), BF16, H100_SXM, training=True)
    forward = 2 * 8 * 56 * 56 * 96 * 1 * 9
    depthwise = advice.layers[advice.layers["layer"] == "1"]
    assert depthwise["flops"].sum() == 3 * forward and set(depthwise["op"]) == {"conv.direct"}


# ------------------------------------------------------------------------------------------- c. MFU
def test_mfu_against_peak_and_ceiling():
    _, _, advice = advised("gpt2", True)
    spec = pk.device_spec(H100_SXM)
    m = advice.mfu(0.25)
    assert m.flops == advice.flops and m.step_time_s == 0.25
    assert m.flop_s == pytest.approx(advice.flops / 0.25)
    assert m.peak_flop_s == spec.peak_flop_s(BF16)
    assert m.peak_flop_s == pytest.approx(989.4e12, rel=0.01)  # the dense BF16 peak; 1,979 TFLOP/s is sparse
    assert m.ceiling_flop_s == spec.ceilings.flop_s_for(BF16) < m.peak_flop_s
    assert m.of_peak == pytest.approx(m.flop_s / m.peak_flop_s)
    assert m.of_ceiling == pytest.approx(m.flop_s / m.ceiling_flop_s)
    assert m.of_ceiling > m.of_peak > 0


@pytest.mark.parametrize("bad", [0, -1, math.nan, "1"])
def test_mfu_rejects_a_bad_step_time(bad):
    _, _, advice = advised("gpt2", True)
    with pytest.raises((ValueError, TypeError), match="step_time_s"):
        advice.mfu(bad)


# ------------------------------------------------------------------------------- d. no inapplicable fix
@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", ["whisper", "wav2vec2"])
def test_no_conv2d_fix_for_conv1d(name, training):
    """Whisper's conv1/conv2 and Wav2Vec2's feature extractor are Conv1d: pk.padded_conv2d raises on them."""
    model, _, advice = advised(name, training)
    conv1d = {n for n, m in model.named_modules() if isinstance(m, nn.Conv1d)}
    assert len(conv1d) >= 2  # Whisper: model.encoder.conv1 and conv2; Wav2Vec2: seven feature-extractor convs
    wrong = advice.findings[advice.findings["layer"].isin(conv1d)
                            & advice.findings["fix"].str.contains("padded_conv2d", regex=False)]
    assert wrong.empty, wrong[["layer", "rule", "fix"]].to_string()


_CHANNELS = re.compile(r"(input|output) channels (\d+) → (\d+)")


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnext50", "regnet_block", "wav2vec2", "convnext",
                                  "efficientnet", "regnet"])
def test_grouped_convs_get_only_channel_counts_groups_divide(name, training):
    """A grouped convolution's channels come in ``groups`` equal parts: a proposed count must be a multiple of
    ``groups``; a depthwise convolution (groups == channels) cannot change its channels alone at all."""
    model, _, advice = advised(name, training)
    for f in advice.findings.itertuples():
        if f.rule not in ("quantization", "alignment") or not f.layer:
            continue
        conv = model.get_submodule(f.layer)
        if not isinstance(conv, (nn.Conv1d, nn.Conv2d)):
            continue
        found = _CHANNELS.findall(f.fix)
        depthwise = conv.groups > 1 and conv.groups == conv.in_channels == conv.out_channels
        assert not (depthwise and found), f"{f.layer} is depthwise: {f.fix}"
        for _, _, new in found:
            assert int(new) % conv.groups == 0, f"{f.layer} has groups={conv.groups}: {f.fix}"


_RESIDUAL = {  # layers whose output is added to the residual stream, by name suffix
    "gpt2": ("attn.c_proj", "mlp.c_proj"),
    "bert": ("attention.output.dense", "output.dense"),
    "llama": ("o_proj", "down_proj"),
    "vit": ("attention.o_proj", "mlp.fc2"),
}
_ATTENTION_INPUTS = {"gpt2": ("attn.c_attn",), "bert": ("self.query", "self.key", "self.value"),
                     "llama": ("q_proj", "k_proj", "v_proj"), "vit": ("q_proj", "k_proj", "v_proj")}
_FREE = {"gpt2": ("mlp.c_fc",), "bert": ("intermediate.dense",), "llama": ("gate_proj", "up_proj"),
         "vit": ("mlp.fc1",)}  # an MLP's hidden width: only its own block reads it


@pytest.mark.parametrize("name", list(_RESIDUAL))
def test_the_data_paths_find_the_widths_other_layers_share(name):
    """perfkit.advisor.dataflow: the layers writing the residual stream or feeding attention share their
    width with other layers; an MLP's first layer does not (GPT-2's GELU adds x to 0.044715·x³: one layer's
    output added to itself is not a residual stream)."""
    from dataclasses import replace

    from perfkit.advisor.capture import capture
    from perfkit.advisor.dataflow import shared_width_ops
    from perfkit.advisor.ops import map_call

    model, inputs = build(name)
    cap = capture(model, inputs)
    ops = [replace(op, index=i) for i, op in enumerate(o for c in cap.calls for o in map_call(c, True)[0])]
    shared = shared_width_ops(cap.calls, ops)
    gemm_layers = {op.layer for op in ops if op.op == "linear"}
    shared_layers = {op.layer for op in ops if op.index in shared}
    for suffixes, expected in ((_RESIDUAL[name] + _ATTENTION_INPUTS[name], True), (_FREE[name], False)):
        layers = {layer for layer in gemm_layers if layer.endswith(suffixes)}
        assert len(layers) >= 2 * len(suffixes), (suffixes, sorted(gemm_layers))  # two blocks each
        assert all((layer in shared_layers) == expected for layer in layers), (expected, sorted(shared_layers))


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", list(_RESIDUAL))
def test_no_new_width_for_a_residual_stream_alone(name, training):
    """A layer adding into the residual stream shares its width with every block: it cannot be resized alone.
    Such a layer may have a quantization finding, but no fix proposing a size (no "→", no priced saving)."""
    _, _, advice = advised(name, training)
    q = rule(advice, "quantization")
    hit = q[q["layer"].str.endswith(_RESIDUAL[name])]
    for f in hit.itertuples():
        assert "→" not in f.fix and math.isnan(f.predicted_saving_s), f"{f.layer}: {f.fix}"


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
def test_gpt2_tied_lm_head_stays_tied(training):
    """GPT-2's lm_head shares its weight with the token embedding: pk.padded_linear(model.lm_head) would
    make a new, untied weight. The 50257-word vocabulary is padded in the config (vocab_size) instead."""
    model, _, advice = advised("gpt2", training)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert not advice.findings["fix"].str.contains("padded_linear(model.lm_head", regex=False).any()
    head = advice.findings[(advice.findings["layer"] == "lm_head") & (advice.findings["rule"] == "alignment")]
    assert len(head), advice.findings[["layer", "rule"]].to_string()
    assert head["fix"].str.contains("vocab").all(), head["fix"].tolist()


@pytest.mark.parametrize("name, first", [("vit", {"vit.embeddings.patch_embeddings.projection"}),
                                         ("mobilenet_v2", {"features.0.0"}),
                                         ("efficientnet", {"efficientnet.embeddings.convolution"}),
                                         ("squeeze_excite", {"stem"})])
def test_first_conv_only_on_the_input(name, first):
    """first_conv is about the images' 3 colour channels: it fires on the convolution that reads the model's
    input, never on a squeeze-excitation conv that happens to have few channels (SqueezeExcite.expand: 4)."""
    _, _, advice = advised(name, True)
    assert set(rule(advice, "first_conv")["layer"]) == first


@pytest.mark.parametrize("batch", [32, 256])
def test_memory_bound_names_what_limits_it(batch):
    """ResNet-50's layer1.1.conv1 (1×1, 256 → 64 channels) stays near 51 FLOP/B at any batch: its output
    channels limit it, so "a larger batch" is the wrong fix. (layer1.0.conv1, 64 → 64, is too small a share of
    the step to report: a 1×1 NCHW convolution runs without transposes.)"""
    with torch.device("meta"):
        model = pk.zoo.resnet50()
    advice = pk.advise(model, _meta(batch, 3, 224, 224), BF16, H100_SXM, training=True)
    mb = rule(advice, "memory_bound")
    hits = list(mb[mb["layer"] == "layer1.1.conv1"].itertuples())
    assert len(hits) == 1
    f = hits[0]
    assert f.fix.startswith("a larger batch will not help"), f.fix  # said so, not recommended
    assert "51 FLOP/B" in f.message and "output channels (64)" in f.message, f.message


# ---------------------------------------------------------------------------------- e. one rule per cause
def test_decoding_one_token_is_small_batch_only():
    """Llama decoding one token: the gain of a bigger batch is small_batch's alone; alignment and rnn_sizes
    are priced at the same batch, where padding 1 token to 8 saves nothing."""
    with torch.device("meta"):
        model = tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=2, **LLAMA_7B))
    advice = pk.advise(model, {"input_ids": _ids(1, 1)}, BF16, H100_SXM, training=False)
    for name in ("alignment", "rnn_sizes"):
        found = rule(advice, name)
        assert not (found["predicted_saving_s"] > 0).any(), found[["layer", "message", "fix"]].to_string()
    assert (rule(advice, "small_batch")["predicted_saving_s"] > 0).any()


# ---------------------------------------------------------------------------- f. memory-bound ops reported
_MEMORY_MODULES = {"LayerNorm", "BatchNorm2d", "GELUActivation", "ReLU", "ReLU6", "GELU", "Dropout"}
_MEMORY_OPS = {"layernorm", "batchnorm", "gelu", "relu", "silu", "elementwise", "add", "softmax", "dropout",
               "maxpool", "avgpool"}


@pytest.mark.parametrize("name", ["bert", "resnet50"])
def test_memory_bound_share_reported(name):
    if name == "resnet50":
        with torch.device("meta"):
            model = pk.zoo.resnet50()
        advice = pk.advise(model, _meta(32, 3, 224, 224), BF16, H100_SXM, training=True)
    else:
        advice = advised(name, True)[2]
    share = advice.memory_bound_share
    assert 0 < share < 1
    text = str(advice)
    assert "memory-bound" in text and format_percent(share) in text, text
    mb = rule(advice, "memory_bound")
    layers = advice.layers.groupby("layer")
    memory_layers = {layer for layer, rows in layers if set(rows["module"]) & _MEMORY_MODULES
                     or set(rows["op"]) <= _MEMORY_OPS}
    assert mb["layer"].isin(memory_layers).any(), mb[["layer", "message"]].to_string()


# ------------------------------------------------------------------------------------------ g. inputs
@pytest.mark.parametrize("extra", [{"attention_mask": "ones"}, {"use_cache": False}], ids=["mask", "no_cache"])
def test_gpt2_with_a_mask_or_without_cache_runs_on_meta(extra):
    with torch.device("meta"):
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2))
    ids = _ids(4, 128)
    kw = {k: torch.ones(4, 128, dtype=torch.long, device="meta") if v == "ones" else v for k, v in extra.items()}
    advice = pk.advise(model, {"input_ids": ids, **kw}, BF16, H100_SXM)
    assert advice.path == "meta" and advice.step_s > 0


def test_batch_encoding_is_accepted():
    with torch.device("meta"):
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2))
    batch = tf.BatchEncoding({"input_ids": _ids(4, 128), "attention_mask": torch.ones(4, 128, dtype=torch.long,
                                                                                      device="meta")})
    advice = pk.advise(model, batch, BF16, H100_SXM)
    assert advice.path == "meta" and advice.step_s > 0


def test_h100_is_a_spec_name():
    with torch.device("meta"):
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2))
    advice = pk.advise(model, {"input_ids": _ids(4, 128)}, BF16, "H100")
    assert "H100" in advice.spec.name and advice.step_s > 0


def _empty_batch_cases():
    with torch.device("meta"):
        gpt2 = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2))
        linear = nn.Linear(64, 64)
    return [(gpt2, torch.zeros(0, 16, dtype=torch.long)), (linear, torch.zeros(0, 64))]


@pytest.mark.parametrize("case", [0, 1], ids=["gpt2", "linear"])
def test_empty_batch_is_refused_before_the_forward_pass(case):
    model, inputs = _empty_batch_cases()[case]
    ran = []
    model.register_forward_pre_hook(lambda module, args: ran.append(module))
    with pytest.raises(ValueError, match="example_inputs") as err:
        pk.advise(model, inputs, BF16, H100_SXM)
    assert re.search(r"zero|empty", str(err.value), re.IGNORECASE), str(err.value)
    assert not ran, "the forward pass ran"
