"""pk.padded_linear: the same layer, computed on features padded to a multiple with zeros."""

from __future__ import annotations

import pytest
import torch

import perfkit as pk
from perfkit.padding import PaddedConv2d, PaddedLinear, padded_conv2d, padded_linear

SHAPES = [(13, 21), (16, 24), (768, 1001), (5, 3)]


def _layer(i: int, o: int, bias: bool = True, dtype=torch.float64) -> torch.nn.Linear:
    torch.manual_seed(i * 1000 + o)
    return torch.nn.Linear(i, o, bias=bias, dtype=dtype)


def _run(module, x, g):
    """Output and input gradient of ``module`` (a layer) on ``x`` with upstream gradient ``g``."""
    x = x.clone().requires_grad_(True)
    y = module(x)
    y.backward(g)
    return y.detach(), x.grad


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("multiple", [8, 64])
@pytest.mark.parametrize("bias", [True, False])
def test_outputs_and_input_gradients_equal_the_original(shape, multiple, bias):
    layer = _layer(*shape, bias=bias)
    padded = pk.padded_linear(layer, multiple=multiple)
    x = torch.randn(7, shape[0], dtype=torch.float64)
    g = torch.randn(7, shape[1], dtype=torch.float64)
    y0, dx0 = _run(layer, x, g)
    y1, dx1 = _run(padded, x, g)
    assert y1.shape == y0.shape
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(dx1, dx0)
    # the weight gradient of the real block is the original's; the padding gets none
    i, o = shape
    torch.testing.assert_close(padded.linear.weight.grad[:o, :i], layer.weight.grad)
    assert (padded.linear.weight.grad[o:] == 0).all()
    assert (padded.linear.weight.grad[:, i:] == 0).all()


@pytest.mark.parametrize("shape", SHAPES)
def test_padded_dimensions_and_zero_padding(shape):
    i, o = shape
    padded = padded_linear(_layer(i, o), multiple=8)
    assert isinstance(padded, PaddedLinear) and isinstance(padded, torch.nn.Module)
    assert (padded.in_features, padded.out_features) == (i, o)
    assert padded.padded_in_features == pk.pad_to_multiple(i, 8) and padded.padded_in_features % 8 == 0
    assert padded.padded_out_features == pk.pad_to_multiple(o, 8) and padded.padded_out_features % 8 == 0
    assert padded.padded_in_features - i < 8 and padded.padded_out_features - o < 8
    w = padded.linear.weight
    assert w.shape == (padded.padded_out_features, padded.padded_in_features)
    assert (w[o:] == 0).all() and (w[:, i:] == 0).all() and (padded.linear.bias[o:] == 0).all()


def test_keep_padding_returns_the_wide_output_with_zero_extras():
    layer = _layer(30, 50257 % 1000)  # 257 outputs → 264
    wide = padded_linear(layer, 8, keep_padding=True)
    x = torch.randn(4, 30, dtype=torch.float64)
    y = wide(x)
    assert y.shape == (4, 264)
    torch.testing.assert_close(y[:, :257], layer(x))
    assert (y[:, 257:] == 0).all()
    masked = wide.mask_padding(wide(x))
    assert torch.isinf(masked[:, 257:]).all()
    torch.testing.assert_close(masked.softmax(-1)[:, :257], layer(x).softmax(-1))


def test_parameters_are_copies_and_to_linear_gives_them_back():
    layer = _layer(10, 20)
    before = layer.weight.detach().clone()
    padded = padded_linear(layer, 16)
    assert padded.linear.weight.data_ptr() != layer.weight.data_ptr()
    with torch.no_grad():
        padded.linear.weight.add_(1.0)
    torch.testing.assert_close(layer.weight.detach(), before)  # the original is untouched
    back = padded.to_linear()
    assert isinstance(back, torch.nn.Linear) and (back.in_features, back.out_features) == (10, 20)
    torch.testing.assert_close(back.weight.detach(), before + 1.0)


def test_training_the_padded_layer_matches_the_original_and_keeps_the_padding_zero():
    layer = _layer(12, 30)
    padded = padded_linear(layer, 8)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (layer, padded)]
    torch.manual_seed(1)
    for _ in range(3):
        x = torch.randn(6, 12, dtype=torch.float64)
        target = torch.randint(0, 30, (6,))
        for module, opt in zip((layer, padded), opts):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(module(x), target).backward()
            opt.step()
    w = padded.linear.weight.detach()
    torch.testing.assert_close(w[:30, :12], layer.weight.detach())
    assert (w[30:] == 0).all() and (w[:, 12:] == 0).all()


def test_an_input_already_padded_is_used_as_is():
    layer = _layer(13, 21)
    padded = padded_linear(layer, 8)
    x = torch.randn(3, 13, dtype=torch.float64)
    wide = torch.nn.functional.pad(x, (0, 3), value=5.0)  # extra columns meet zero weights
    torch.testing.assert_close(padded(wide), layer(x))


def test_dtype_device_and_frozen_layers_are_preserved():
    layer = torch.nn.Linear(10, 11, dtype=torch.bfloat16).requires_grad_(False)
    padded = padded_linear(layer, 4)
    assert padded.linear.weight.dtype == torch.bfloat16 and padded.linear.weight.device == layer.weight.device
    assert not padded.linear.weight.requires_grad
    assert padded_linear(_layer(8, 16), 8).padded_out_features == 16  # already aligned: unchanged
    assert "13→16" in repr(padded_linear(_layer(13, 21), 8))


@pytest.mark.parametrize("bad", [torch.nn.Conv1d(3, 4, 1), torch.nn.Sequential(torch.nn.Linear(2, 2)), "linear",
                                 None, torch.nn.LazyLinear(4)])
def test_non_linear_layers_are_refused(bad):
    with pytest.raises(TypeError, match="layer"):
        pk.padded_linear(bad)


@pytest.mark.parametrize("multiple, error", [(0, ValueError), (-8, ValueError), (2.5, TypeError), ("8", TypeError)])
def test_bad_multiple_is_refused(multiple, error):
    with pytest.raises(error, match="multiple"):
        pk.padded_linear(torch.nn.Linear(3, 5), multiple=multiple)


def test_bad_keep_padding_and_bad_inputs_are_refused():
    with pytest.raises(TypeError, match="keep_padding"):
        padded_linear(torch.nn.Linear(3, 5), keep_padding="yes")
    padded = padded_linear(torch.nn.Linear(3, 5), 8)
    with pytest.raises(ValueError, match="3 .*8.* features"):
        padded(torch.randn(2, 4))
    with pytest.raises(ValueError, match="wide output"):
        padded.mask_padding(torch.randn(2, 5))


# --- pk.padded_conv2d

CONVS = [dict(in_channels=3, out_channels=13, kernel_size=3, padding=1),
         dict(in_channels=5, out_channels=7, kernel_size=(3, 5), stride=2, padding=(1, 2)),
         dict(in_channels=6, out_channels=10, kernel_size=3, dilation=2, padding=2),
         dict(in_channels=8, out_channels=8, kernel_size=1)]


def _conv(bias: bool = True, dtype=torch.float64, **kw) -> torch.nn.Conv2d:
    torch.manual_seed(kw["in_channels"] * 100 + kw["out_channels"])
    return torch.nn.Conv2d(bias=bias, dtype=dtype, **kw)


@pytest.mark.parametrize("kw", CONVS)
@pytest.mark.parametrize("multiples", [(4, 1), (8, 8), (1, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_padded_conv2d_outputs_and_gradients_equal_the_original(kw, multiples, bias):
    conv = _conv(bias=bias, **kw)
    padded = pk.padded_conv2d(conv, in_multiple=multiples[0], out_multiple=multiples[1])
    x = torch.randn(2, kw["in_channels"], 9, 11, dtype=torch.float64)
    y0 = conv(x)
    g = torch.randn_like(y0)
    y0, dx0 = _run(conv, x, g)
    y1, dx1 = _run(padded, x, g)
    assert y1.shape == y0.shape
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(dx1, dx0)
    C, K = kw["in_channels"], kw["out_channels"]
    w = padded.conv.weight.grad
    torch.testing.assert_close(w[:K, :C], conv.weight.grad)
    assert (w[K:] == 0).all() and (w[:, C:] == 0).all()
    if bias:
        torch.testing.assert_close(padded.conv.bias.grad[:K], conv.bias.grad)


def test_padded_conv2d_pads_channels_with_zero_filters_and_copies_the_weights():
    conv = _conv(in_channels=3, out_channels=13, kernel_size=7, stride=2, padding=3)
    padded = pk.padded_conv2d(conv, in_multiple=4, out_multiple=8)
    assert isinstance(padded, PaddedConv2d) and isinstance(padded, torch.nn.Module)
    assert (padded.in_channels, padded.out_channels) == (3, 13)
    assert (padded.padded_in_channels, padded.padded_out_channels) == (4, 16)
    c = padded.conv
    assert (c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding) == (4, 16, (7, 7), (2, 2), (3, 3))
    assert (c.weight[13:] == 0).all() and (c.weight[:, 3:] == 0).all() and (c.bias[13:] == 0).all()
    assert c.weight.data_ptr() != conv.weight.data_ptr()
    before = conv.weight.detach().clone()
    with torch.no_grad():
        c.weight.add_(1.0)
    torch.testing.assert_close(conv.weight.detach(), before)  # a copy: the original is untouched
    back = padded.to_conv2d()
    assert isinstance(back, torch.nn.Conv2d) and (back.in_channels, back.out_channels) == (3, 13)
    torch.testing.assert_close(back.weight.detach(), before + 1.0)
    assert "3→4" in repr(padded) and "13→16" in repr(padded)


def test_padded_conv2d_takes_an_input_padded_once_and_keeps_padding_on_request():
    conv = _conv(in_channels=3, out_channels=13, kernel_size=3, padding=1)
    padded = padded_conv2d(conv, in_multiple=4, out_multiple=8)
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    once = padded.pad_input(x)  # what the data pipeline does, once
    assert once.shape == (2, 4, 8, 8) and (once[:, 3] == 0).all()
    torch.testing.assert_close(padded(once), conv(x))
    noisy = once.clone()
    noisy[:, 3] = 5.0  # the extra channel meets zero weights
    torch.testing.assert_close(padded(noisy), conv(x))
    wide = padded_conv2d(conv, in_multiple=4, out_multiple=8, keep_padding=True)
    y = wide(x)
    assert y.shape == (2, 16, 8, 8) and (y[:, 13:] == 0).all()
    torch.testing.assert_close(y[:, :13], conv(x))
    torch.testing.assert_close(padded(x[0]), conv(x[0]))  # an unbatched (C, H, W) input


def test_padded_conv2d_keeps_dtype_layout_and_frozen_weights():
    conv = torch.nn.Conv2d(3, 5, 3, dtype=torch.bfloat16).requires_grad_(False)
    conv = conv.to(memory_format=torch.channels_last)
    padded = padded_conv2d(conv, in_multiple=8)
    w = padded.conv.weight
    assert w.dtype == torch.bfloat16 and w.device == conv.weight.device and not w.requires_grad
    assert w.is_contiguous(memory_format=torch.channels_last)
    assert padded_conv2d(_conv(in_channels=8, out_channels=8, kernel_size=1), 8, 8).padded_in_channels == 8


@pytest.mark.parametrize("bad", [torch.nn.Conv1d(3, 4, 1), torch.nn.Linear(3, 4), "conv", None,
                                 torch.nn.LazyConv2d(4, 3)])
def test_non_conv2d_layers_are_refused(bad):
    with pytest.raises(TypeError, match="conv"):
        pk.padded_conv2d(bad, in_multiple=4)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(in_multiple=0), ValueError, "in_multiple"), (dict(out_multiple=-8), ValueError, "out_multiple"),
    (dict(in_multiple=2.5), TypeError, "in_multiple"), (dict(keep_padding="yes"), TypeError, "keep_padding")])
def test_bad_multiples_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        padded_conv2d(torch.nn.Conv2d(3, 5, 3), **kwargs)


def test_grouped_convolutions_and_wrong_inputs_are_refused():
    with pytest.raises(ValueError, match="groups"):
        pk.padded_conv2d(torch.nn.Conv2d(4, 8, 3, groups=2), in_multiple=8)
    padded = padded_conv2d(torch.nn.Conv2d(3, 5, 3), in_multiple=8)
    with pytest.raises(ValueError, match="3 .*8.* channels"):
        padded(torch.randn(2, 5, 8, 8))
    with pytest.raises(ValueError, match="C = 3"):
        padded.pad_input(torch.randn(2, 8, 8, 8))
