"""perfkit.zoo: architectures built in code — exact parameter counts, tiny CPU forwards, meta-device builds."""

from __future__ import annotations

import pytest
import torch

from perfkit import zoo


def _meta(builder, **kwargs):
    with torch.device("meta"):
        return builder(**kwargs)


# ------------------------------------------------------------------------------ parameter counts
@pytest.mark.parametrize("builder, kwargs, expected", [
    (zoo.gpt2_small, {}, 124_439_808),                       # GPT-2 small, lm_head tied
    (zoo.resnet50, {}, 25_557_032),                          # torchvision resnet50
    (zoo.resnext50_32x4d, {}, 25_028_904),                   # torchvision resnext50_32x4d
    (zoo.mobilenet_v2, {}, 3_504_872),                       # torchvision mobilenet_v2
    (zoo.lstm_lm, {}, 36_026_000),
    (zoo.llama, {}, 6_738_415_616),                          # LLaMA-7B
    (zoo.llama, zoo.LLAMA_CONFIGS["7B"], 6_738_415_616),
    (zoo.llama, zoo.LLAMA_CONFIGS["3B"], 3_426_473_600),     # OpenLLaMA-3B
    (zoo.llama, zoo.LLAMA_CONFIGS["13B"], 13_015_864_320),   # LLaMA-13B
    (zoo.vit_b_16, {}, 86_567_656),                          # torchvision vit_b_16
])
def test_parameter_counts(builder, kwargs, expected):
    model = _meta(builder, **kwargs)
    assert zoo.parameter_count(model) == expected
    assert all(p.is_meta for p in model.parameters())
    assert model.training


def test_gpt2_lm_head_is_tied_and_layer_names():
    model = _meta(zoo.gpt2_small)
    assert model.lm_head.weight is model.wte.weight
    names = dict(model.named_modules())
    for name in ("wte", "wpe", "blocks.0.attn.qkv", "blocks.11.attn.proj", "blocks.0.mlp.fc", "blocks.0.mlp.proj",
                 "ln_f", "lm_head"):
        assert name in names, name
    assert names["blocks.0.attn.qkv"].out_features == 3 * 768
    assert names["lm_head"].bias is None


def test_resnet50_torchvision_names():
    names = dict(_meta(zoo.resnet50).named_modules())
    for name in ("conv1", "bn1", "relu", "maxpool", "layer1.0.conv2", "layer1.0.downsample.0", "layer4.2.conv3",
                 "avgpool", "fc"):
        assert name in names, name
    assert [len(names[f"layer{i}"]) for i in range(1, 5)] == [3, 4, 6, 3]
    assert names["layer2.0.conv2"].stride == (2, 2) and names["layer2.0.conv1"].stride == (1, 1)
    assert names["layer1.1"].downsample is None


def test_resnext50_is_resnet50_with_grouped_3x3s():
    names = dict(_meta(zoo.resnext50_32x4d).named_modules())
    assert set(names) == set(dict(_meta(zoo.resnet50).named_modules()))
    conv = names["layer1.0.conv2"]
    assert (conv.groups, conv.in_channels, conv.out_channels, conv.kernel_size) == (32, 128, 128, (3, 3))
    assert names["layer1.0.conv1"].out_channels == 128 and names["layer1.0.conv3"].out_channels == 256
    conv = names["layer4.0.conv2"]
    assert (conv.groups, conv.out_channels, conv.stride) == (32, 1024, (2, 2))
    assert names["fc"].in_features == 2048
    # resnet50 keeps its dense 3x3s
    resnet = dict(_meta(zoo.resnet50).named_modules())
    assert (resnet["layer1.0.conv2"].groups, resnet["layer1.0.conv2"].out_channels) == (1, 64)


def test_mobilenet_v2_torchvision_names():
    names = dict(_meta(zoo.mobilenet_v2).named_modules())
    first = names["features.0.0"]
    assert (first.in_channels, first.out_channels, first.stride) == (3, 32, (2, 2))
    assert isinstance(names["features.0.1"], torch.nn.BatchNorm2d) and isinstance(names["features.0.2"],
                                                                                  torch.nn.ReLU6)
    dw = names["features.1.conv.0.0"]  # t = 1: no expansion, the block starts with the depthwise conv
    assert dw.groups == dw.in_channels == dw.out_channels == 32
    expand = names["features.2.conv.0.0"]
    assert (expand.in_channels, expand.out_channels, expand.kernel_size) == (16, 96, (1, 1))
    dw = names["features.2.conv.1.0"]
    assert dw.groups == dw.in_channels == dw.out_channels == 96 and dw.stride == (2, 2)
    project = names["features.2.conv.2"]
    assert (project.in_channels, project.out_channels) == (96, 24)
    assert isinstance(names["features.2.conv.3"], torch.nn.BatchNorm2d)
    assert len(names["features"]) == 19 and len(names["features.1.conv"]) == 3 and len(names["features.2.conv"]) == 4
    last = names["features.18.0"]
    assert (last.in_channels, last.out_channels) == (320, 1280)
    assert names["classifier.0"].p == 0.2 and names["classifier.1"].in_features == 1280
    residual = [i for i in range(1, 18) if names[f"features.{i}"].use_res_connect]
    assert residual == [3, 5, 6, 8, 9, 10, 12, 13, 15, 16]  # stride 1 and same channels in and out


def test_mobilenet_v2_width_mult_rounds_channels_to_8():
    assert [zoo._make_divisible(v) for v in (3, 8.8, 9, 12, 33.6, 1280)] == [8, 8, 16, 16, 32, 1280]
    names = dict(_meta(zoo.mobilenet_v2, width_mult=0.5).named_modules())
    assert names["features.0.0"].out_channels == 16 and names["features.1.conv.1"].out_channels == 8
    assert names["classifier.1"].in_features == 1280  # the last conv never narrows
    names = dict(_meta(zoo.mobilenet_v2, width_mult=1.4).named_modules())
    assert names["features.0.0"].out_channels == 48 and names["classifier.1"].in_features == 1792


def test_vit_b_16_torchvision_names():
    model = _meta(zoo.vit_b_16)
    names = dict(model.named_modules())
    block = "encoder.layers.encoder_layer_0"
    for name in ("conv_proj", "encoder", "encoder.dropout", f"{block}.ln_1", f"{block}.self_attention",
                 f"{block}.self_attention.out_proj", f"{block}.dropout", f"{block}.ln_2", f"{block}.mlp.0",
                 f"{block}.mlp.1", f"{block}.mlp.2", f"{block}.mlp.3", f"{block}.mlp.4",
                 "encoder.layers.encoder_layer_11", "encoder.ln", "heads.head"):
        assert name in names, name
    assert "encoder.layers.encoder_layer_12" not in names
    conv = names["conv_proj"]
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride) == (3, 768, (16, 16), (16, 16))
    attention = names[f"{block}.self_attention"]
    assert isinstance(attention, torch.nn.MultiheadAttention) and attention.batch_first
    assert (attention.embed_dim, attention.num_heads, attention.in_proj_weight.shape) == (768, 12, (2304, 768))
    assert (names[f"{block}.mlp.0"].in_features, names[f"{block}.mlp.0"].out_features) == (768, 3072)
    assert (names[f"{block}.mlp.3"].in_features, names[f"{block}.mlp.3"].out_features) == (3072, 768)
    assert isinstance(names[f"{block}.mlp.1"], torch.nn.GELU) and isinstance(names[f"{block}.mlp.4"], torch.nn.Dropout)
    assert names[f"{block}.ln_1"].eps == 1e-6 and names["encoder.ln"].eps == 1e-6
    assert model.seq_length == 197 and model.class_token.shape == (1, 1, 768)
    assert model.encoder.pos_embedding.shape == (1, 197, 768)
    assert (names["heads.head"].in_features, names["heads.head"].out_features) == (768, 1000)


def test_llama_names_and_buffers():
    model = _meta(zoo.llama)
    names = dict(model.named_modules())
    for name in ("embed", "layers.0.attention.wq", "layers.0.attention.wk", "layers.0.attention.wv",
                 "layers.0.attention.wo", "layers.31.feed_forward.w1", "layers.0.feed_forward.w2",
                 "layers.0.feed_forward.w3", "layers.0.attention_norm", "norm", "output"):
        assert name in names, name
    assert model.output.weight is not model.embed.weight
    assert model.rope_cos.shape == (4096, 64)
    assert "rope_cos" not in model.state_dict()


# ------------------------------------------------------------------------------ tiny CPU forwards
def _finite_forward(model, x):
    torch.manual_seed(0)
    y = model(x)
    assert torch.isfinite(y).all()
    return y


def test_gpt2_tiny_forward():
    torch.manual_seed(0)
    model = zoo.gpt2_small(vocab_size=97, context=16, dim=32, layers=2, heads=4)
    y = _finite_forward(model, torch.randint(0, 97, (2, 16)))
    assert y.shape == (2, 16, 97)
    y.sum().backward()
    assert model.wte.weight.grad is not None
    with pytest.raises(ValueError, match="context"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_gpt2_is_causal():
    torch.manual_seed(0)
    model = zoo.gpt2_small(vocab_size=50, context=8, dim=16, layers=1, heads=2).eval()
    x = torch.randint(0, 50, (1, 8))
    x2 = x.clone()
    x2[0, -1] = (x[0, -1] + 1) % 50
    torch.testing.assert_close(model(x)[:, :-1], model(x2)[:, :-1])


def test_resnet50_small_forward():
    torch.manual_seed(0)
    y = _finite_forward(zoo.resnet50(num_classes=10), torch.randn(1, 3, 64, 64))
    assert y.shape == (1, 10)
    y = _finite_forward(zoo.resnet50(num_classes=5, in_channels=1).eval(), torch.randn(2, 1, 32, 32))
    assert y.shape == (2, 5)


def test_resnext50_small_forward():
    torch.manual_seed(0)
    model = zoo.resnext50_32x4d(num_classes=10)
    assert _finite_forward(model, torch.randn(1, 3, 64, 64)).shape == (1, 10)
    assert _finite_forward(model.eval(), torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_mobilenet_v2_small_forward():
    torch.manual_seed(0)
    model = zoo.mobilenet_v2(num_classes=10)
    y = _finite_forward(model, torch.randn(1, 3, 64, 64))
    assert y.shape == (1, 10)
    y.sum().backward()
    assert model.features[1].conv[0][0].weight.grad is not None
    y = _finite_forward(zoo.mobilenet_v2(num_classes=7, width_mult=0.5).eval(), torch.randn(2, 3, 32, 32))
    assert y.shape == (2, 7)


def test_inverted_residual_adds_its_input_only_when_shapes_match():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 6, 6)
    block = zoo.InvertedResidual(8, 8, stride=1, expand_ratio=6).eval()
    torch.testing.assert_close(block(x), x + block.conv(x))
    block = zoo.InvertedResidual(8, 8, stride=2, expand_ratio=6).eval()
    torch.testing.assert_close(block(x), block.conv(x))
    assert block(x).shape == (2, 8, 3, 3)
    assert zoo.InvertedResidual(8, 16, stride=1, expand_ratio=1)(x).shape == (2, 16, 6, 6)


def test_vit_tiny_forward_classifies_the_class_token():
    torch.manual_seed(0)
    model = zoo.vit_b_16(num_classes=7, image_size=32, patch_size=16, dim=32, layers=2, heads=4, mlp_dim=64)
    assert model.seq_length == 5  # 2 × 2 patches and the class token
    x = torch.randn(3, 3, 32, 32)
    y = _finite_forward(model, x)
    assert y.shape == (3, 7)
    y.sum().backward()
    assert model.encoder.layers.encoder_layer_0.self_attention.in_proj_weight.grad is not None
    model.eval()
    tokens = torch.cat([model.class_token.expand(3, -1, -1), model._process_input(x)], dim=1)
    torch.testing.assert_close(model(x), model.heads(model.encoder(tokens)[:, 0]))
    block = model.encoder.layers.encoder_layer_0  # x + attention(ln_1(x)), then + mlp(ln_2(·))
    h = block.ln_1(tokens)
    mid = tokens + block.self_attention(h, h, h, need_weights=False)[0]
    torch.testing.assert_close(block(tokens), mid + block.mlp(block.ln_2(mid)))
    with pytest.raises(ValueError, match="32, 32"):
        model(torch.randn(1, 3, 48, 48))


def test_the_advisor_sees_the_vits_attention():
    """nn.MultiheadAttention is one function call inside: the advisor maps it (nothing unmapped) and counts
    the FLOPs torch's own counter counts."""
    from torch.utils.flop_counter import FlopCounterMode

    import perfkit as pk

    model = _meta(zoo.vit_b_16)
    images = torch.zeros(8, 3, 224, 224, device="meta")
    advice = pk.advise(model, images, spec="H100-SXM")
    assert advice.unmapped.empty
    assert "attention" in set(advice.layers["op"])
    forward = pk.advise(model, images, spec="H100-SXM", training=False)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(images)
    assert forward.flops == pytest.approx(counter.get_total_flops(), rel=0.01)


@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_lm_small_forward(layers):
    torch.manual_seed(0)
    model = zoo.lstm_lm(vocab_size=50, hidden=24, layers=layers)
    assert model.lstm.num_layers == layers and model.lstm.batch_first
    y = _finite_forward(model, torch.randint(0, 50, (3, 7)))
    assert y.shape == (3, 7, 50)


def test_llama_tiny_forward_and_causal():
    torch.manual_seed(0)
    model = zoo.llama(dim=32, layers=2, heads=4, ffn=64, vocab_size=61, context=16)
    x = torch.randint(0, 61, (2, 10))
    y = _finite_forward(model, x)
    assert y.shape == (2, 10, 61)
    x2 = x.clone()
    x2[:, -1] = (x[:, -1] + 1) % 61
    torch.testing.assert_close(model(x2)[:, :-1], y[:, :-1])


def test_rotary_matches_complex_reference():
    """The elementwise rotary equals Meta's complex-multiplication form on consecutive pairs."""
    torch.manual_seed(0)
    model = zoo.llama(dim=32, layers=1, heads=2, ffn=8, vocab_size=5, context=12)
    x = torch.randn(2, 2, 12, 16)
    cos, sin = model.rope_cos, model.rope_sin
    freqs = torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))
    ref = torch.view_as_real(torch.view_as_complex(x.reshape(2, 2, 12, 8, 2)) * freqs).flatten(-2)
    torch.testing.assert_close(zoo._rotate(x, cos, sin), ref)
    # position 0 is not rotated; rotation keeps each pair's norm
    torch.testing.assert_close(zoo._rotate(x, cos, sin)[:, :, 0], x[:, :, 0])
    torch.testing.assert_close(zoo._rotate(x, cos, sin).norm(dim=-1), x.norm(dim=-1))


# ------------------------------------------------------------------------------ meta-device forwards
@pytest.mark.parametrize("config", ["7B", "3B"])
def test_llama_configs_forward_on_meta(config):
    cfg = zoo.LLAMA_CONFIGS[config]
    with torch.device("meta"):
        model = zoo.llama(**cfg)
        y = model(torch.zeros(2, 128, dtype=torch.long))
    assert y.is_meta and y.shape == (2, 128, cfg["vocab_size"])


@pytest.mark.parametrize("builder, x, shape", [
    (zoo.gpt2_small, lambda: torch.zeros(4, 1024, dtype=torch.long), (4, 1024, 50257)),
    (zoo.resnet50, lambda: torch.zeros(8, 3, 224, 224), (8, 1000)),
    (zoo.resnext50_32x4d, lambda: torch.zeros(8, 3, 224, 224), (8, 1000)),
    (zoo.mobilenet_v2, lambda: torch.zeros(8, 3, 224, 224), (8, 1000)),
    (zoo.lstm_lm, lambda: torch.zeros(20, 35, dtype=torch.long), (20, 35, 10000)),
    (zoo.vit_b_16, lambda: torch.zeros(8, 3, 224, 224), (8, 1000)),
])
def test_default_models_forward_on_meta(builder, x, shape):
    with torch.device("meta"):
        y = builder()(x())
    assert y.is_meta and y.shape == shape


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("builder, kwargs, name", [
    (zoo.gpt2_small, {"vocab_size": 0}, "vocab_size"),
    (zoo.gpt2_small, {"context": -1}, "context"),
    (zoo.gpt2_small, {"layers": 0}, "layers"),
    (zoo.gpt2_small, {"heads": 0}, "heads"),
    (zoo.gpt2_small, {"dim": 100, "heads": 12}, "heads"),
    (zoo.gpt2_small, {"dropout": 1.0}, "dropout"),
    (zoo.gpt2_small, {"dropout": -0.1}, "dropout"),
    (zoo.resnet50, {"num_classes": 0}, "num_classes"),
    (zoo.resnet50, {"in_channels": -3}, "in_channels"),
    (zoo.resnext50_32x4d, {"num_classes": 0}, "num_classes"),
    (zoo.mobilenet_v2, {"num_classes": -1}, "num_classes"),
    (zoo.mobilenet_v2, {"width_mult": 0}, "width_mult"),
    (zoo.mobilenet_v2, {"width_mult": float("inf")}, "width_mult"),
    (zoo.lstm_lm, {"hidden": 0}, "hidden"),
    (zoo.lstm_lm, {"layers": 0}, "layers"),
    (zoo.lstm_lm, {"dropout": 2}, "dropout"),
    (zoo.llama, {"ffn": 0}, "ffn"),
    (zoo.llama, {"dim": 4000, "heads": 32}, "heads"),
    (zoo.llama, {"dim": 96, "heads": 32}, "even"),
    (zoo.llama, {"context": 0}, "context"),
    (zoo.vit_b_16, {"image_size": 200}, "patch_size"),
    (zoo.vit_b_16, {"patch_size": 0}, "patch_size"),
    (zoo.vit_b_16, {"dim": 100}, "heads"),
    (zoo.vit_b_16, {"mlp_dim": 0}, "mlp_dim"),
    (zoo.vit_b_16, {"num_classes": 0}, "num_classes"),
    (zoo.vit_b_16, {"attention_dropout": 1.5}, "attention_dropout"),
])
def test_bad_arguments_raise_value_error(builder, kwargs, name):
    with pytest.raises(ValueError, match=name):
        _meta(builder, **kwargs)


def test_wrong_kinds_raise_type_error():
    with pytest.raises(TypeError, match="layers"):
        _meta(zoo.gpt2_small, layers=2.0)
    with pytest.raises(TypeError, match="width_mult"):
        _meta(zoo.mobilenet_v2, width_mult="1.0")
    with pytest.raises(TypeError, match="model"):
        zoo.parameter_count("gpt2")
    with pytest.raises(ValueError, match="batch, time"):
        zoo.gpt2_small(vocab_size=10, context=4, dim=8, layers=1, heads=2)(torch.zeros(4, dtype=torch.long))
