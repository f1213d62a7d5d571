"""Padding a layer to a multiple: a Linear's features (:func:`padded_linear`, :class:`PaddedLinear`) and a
Conv2d's channels (:func:`padded_conv2d`, :class:`PaddedConv2d`).

NVIDIA's checklists ask for batch, input and output features divisible by 8 (FP16; 16 for INT8),
and by 64 or 256 where a dimension is small, and NVIDIA's "Tips for Optimizing GPU Performance Using
Tensor Cores" pads a Transformer's vocabulary to a multiple of 8. :func:`padded_linear` does this for
an existing ``torch.nn.Linear``: it copies the layer into a wider one whose extra weight rows and
columns (and bias entries) are zero, so outputs and input gradients are those of the original.

When padding pays, and when it does not:

- **It pays** when the library runs an unaligned GEMM slower than the aligned one: before cuBLAS 11
  an unaligned FP16 GEMM could not use Tensor Cores at all; since then the penalty is smaller. The
  extra work is ``padded / original − 1`` (0.014 % for 50257 → 50264).
- **Padding the output** costs nothing in the forward pass when the caller keeps the wide output
  (``keep_padding=True``). Slicing it back (``keep_padding=False``) is a free view forward, but
  backward must build a zero-filled gradient of the padded width and copy the real one in: two
  passes over a ``batch × padded`` tensor, memory-bound. For a language model's output projection
  that tensor is as large as the logits, so **the slice can cost more than the padding saves**;
  the ``vocab_padding`` experiment measures both.
- **Padding the input** copies the input into a wider tensor at every call, unless the previous
  layer already produces the padded width (e.g. a :class:`PaddedLinear` with ``keep_padding=True``):
  an input exactly ``padded_in_features`` wide is used as is, its extra columns meeting zero weights.

Convolutions follow the same rules with channels for features (NVIDIA's Convolutional Layers guide:
C and K divisible by 8 for FP16, 4 for TF32; a first layer's 3 colour channels padded to 4 suffice
with stride 2). :func:`padded_conv2d` pads a ``torch.nn.Conv2d``'s input and output channels with zero
filters. Its input padding belongs in the data pipeline: pad the images **once** (the dataset's
transform or collate function, or ``F.pad`` before the first step) and hand the padded batch to the
module, which then uses it as is; otherwise every forward pass copies the input to pad it.

Units: features and channels are element counts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import boolean, positive_int
from .quantization import pad_to_multiple

__all__ = ["PaddedConv2d", "PaddedLinear", "padded_conv2d", "padded_linear"]


class PaddedLinear(nn.Module):
    """A ``torch.nn.Linear`` computed with its features padded to a multiple (zeros in the padding).

    Called like the original (input ``(..., in_features)``), it returns ``(..., out_features)``, or
    ``(..., padded_out_features)`` with ``keep_padding=True``: the extra outputs equal the zero bias
    padding (exactly 0) as long as the padding stays zero. Built by :func:`padded_linear`.

    Attributes: ``in_features``, ``out_features`` (the original layer's), ``padded_in_features``,
    ``padded_out_features``, ``multiple``, ``keep_padding``, and ``linear``: the padded
    ``nn.Linear`` whose parameters are trained.
    """

    def __init__(self, layer: nn.Linear, multiple: int = 8, keep_padding: bool = False) -> None:
        super().__init__()
        _check_layer(layer)
        self.multiple = positive_int("multiple", multiple)
        self.keep_padding = boolean("keep_padding", keep_padding)
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.padded_in_features = pad_to_multiple(layer.in_features, self.multiple)
        self.padded_out_features = pad_to_multiple(layer.out_features, self.multiple)
        w = layer.weight
        self.linear = nn.Linear(self.padded_in_features, self.padded_out_features, bias=layer.bias is not None,
                                device=w.device, dtype=w.dtype)
        self.linear.requires_grad_(w.requires_grad)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.weight[: self.out_features, : self.in_features].copy_(w)
            if layer.bias is not None:
                self.linear.bias.zero_()
                self.linear.bias[: self.out_features].copy_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``layer(x)``, computed on the padded weights; wide when ``keep_padding``."""
        width = x.shape[-1] if x.dim() else None
        if width not in (self.in_features, self.padded_in_features):
            raise ValueError(f"input must have {self.in_features} (or, already padded, {self.padded_in_features}) "
                             f"features in its last dimension, got shape {tuple(x.shape)}")
        if width != self.padded_in_features:
            x = F.pad(x, (0, self.padded_in_features - width))
        y = self.linear(x)
        if self.keep_padding or self.padded_out_features == self.out_features:
            return y
        return y[..., : self.out_features]

    def mask_padding(self, y: torch.Tensor, value: float = float("-inf")) -> torch.Tensor:
        """``y`` (a wide output) with its padded columns set to ``value`` in place, e.g. before a softmax.

        Zero logits in the padding would take probability mass from the real ones; ``-inf`` gives
        them none, and their gradient is then zero, so the padding stays zero in training.
        """
        if y.shape[-1] != self.padded_out_features:
            raise ValueError(f"y must be a wide output with {self.padded_out_features} features in its last "
                             f"dimension (keep_padding=True), got shape {tuple(y.shape)}")
        y[..., self.out_features:] = value
        return y

    def to_linear(self) -> nn.Linear:
        """A plain ``nn.Linear`` of the original shape holding this module's current weights (a copy)."""
        w = self.linear.weight
        out = nn.Linear(self.in_features, self.out_features, bias=self.linear.bias is not None,
                        device=w.device, dtype=w.dtype)
        with torch.no_grad():
            out.weight.copy_(w[: self.out_features, : self.in_features])
            if self.linear.bias is not None:
                out.bias.copy_(self.linear.bias[: self.out_features])
        return out

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}→{self.padded_in_features}, "
                f"out_features={self.out_features}→{self.padded_out_features}, multiple={self.multiple}, "
                f"keep_padding={self.keep_padding}")


def _check_layer(layer: object) -> None:
    if not isinstance(layer, nn.Linear):
        raise TypeError(f"layer must be a torch.nn.Linear, got {type(layer).__name__}")
    if isinstance(layer.weight, nn.parameter.UninitializedParameter):
        raise TypeError("layer is a LazyLinear whose shape is not known yet; run one forward pass first")


def padded_linear(layer: nn.Linear, multiple: int = 8, keep_padding: bool = False) -> PaddedLinear:
    """``layer`` with its in and out features padded up to a multiple of ``multiple`` (zero rows and columns).

    Same call signature and output shape as ``layer``; outputs and input gradients equal the
    original's up to floating-point rounding (the same sums, the zero terms added in). With
    ``keep_padding=True`` the output keeps its padded width (the fast path: no slice; the caller
    ignores or masks the extra columns, see :meth:`PaddedLinear.mask_padding`).

    Parameters are **copied**, not shared: training the padded module leaves ``layer`` unchanged.
    To train with it, put it in the model in place of ``layer``
    (``model.head = padded_linear(model.head, 64)``) before building the optimizer, and take the
    trained layer back out with :meth:`PaddedLinear.to_linear`. The padding receives zero gradient
    unless a loss reads the extra outputs, so plain SGD, Adam and weight decay keep it zero. A layer
    whose weight is tied to another (an embedding) is untied by the copy: pad the tied tensor's
    own size instead (e.g. the model's vocabulary).

    Raises ``TypeError`` if ``layer`` is not a ``torch.nn.Linear`` and ``ValueError`` if
    ``multiple`` < 1.
    """
    return PaddedLinear(layer, multiple=multiple, keep_padding=keep_padding)


class PaddedConv2d(nn.Module):
    """A ``torch.nn.Conv2d`` computed with its channels padded to multiples (zero filters in the padding).

    Called like the original: input ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) with the original
    ``C = in_channels``, which is zero-padded to ``padded_in_channels`` on every call, or an input
    already ``padded_in_channels`` wide, used as is (the fast path: pad once in the data pipeline;
    its extra channels meet zero weights, so their values do not matter). Returns the original's
    ``K = out_channels`` output channels, or ``padded_out_channels`` with ``keep_padding=True`` (the
    extra channels are the zero bias padding, exactly 0, as long as the padding stays zero).
    Built by :func:`padded_conv2d`.

    Attributes: ``in_channels``, ``out_channels`` (the original's), ``padded_in_channels``,
    ``padded_out_channels``, ``in_multiple``, ``out_multiple``, ``keep_padding``, and ``conv``: the
    padded ``nn.Conv2d`` whose parameters are trained.
    """

    def __init__(self, conv: nn.Conv2d, in_multiple: int = 1, out_multiple: int = 1,
                 keep_padding: bool = False) -> None:
        super().__init__()
        _check_conv(conv)
        self.in_multiple = positive_int("in_multiple", in_multiple)
        self.out_multiple = positive_int("out_multiple", out_multiple)
        self.keep_padding = boolean("keep_padding", keep_padding)
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.padded_in_channels = pad_to_multiple(conv.in_channels, self.in_multiple)
        self.padded_out_channels = pad_to_multiple(conv.out_channels, self.out_multiple)
        w = conv.weight
        self.conv = nn.Conv2d(self.padded_in_channels, self.padded_out_channels, conv.kernel_size, conv.stride,
                              conv.padding, conv.dilation, groups=1, bias=conv.bias is not None,
                              padding_mode=conv.padding_mode, device=w.device, dtype=w.dtype)
        if w.dim() == 4 and w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous():
            self.conv.to(memory_format=torch.channels_last)  # keep an NHWC model NHWC
        self.conv.requires_grad_(w.requires_grad)
        K, C = self.out_channels, self.in_channels
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[:K, :C].copy_(w)
            if conv.bias is not None:
                self.conv.bias.zero_()
                self.conv.bias[:K].copy_(conv.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``conv(x)`` on the padded channels; ``x`` has ``in_channels`` (padded here) or ``padded_in_channels``."""
        if x.dim() not in (3, 4) or x.shape[-3] not in (self.in_channels, self.padded_in_channels):
            raise ValueError(f"input must be (N, C, H, W) or (C, H, W) with C = {self.in_channels} (or, already "
                             f"padded, {self.padded_in_channels}) channels, got shape {tuple(x.shape)}")
        if x.shape[-3] != self.padded_in_channels:  # a copy of the input at every call: pad once upstream
            x = F.pad(x, (0, 0, 0, 0, 0, self.padded_in_channels - x.shape[-3]))
        y = self.conv(x)
        if self.keep_padding or self.padded_out_channels == self.out_channels:
            return y
        return y.narrow(-3, 0, self.out_channels)

    def pad_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (``in_channels`` wide) zero-padded to ``padded_in_channels``: call it once, in the data pipeline."""
        if x.dim() not in (3, 4) or x.shape[-3] != self.in_channels:
            raise ValueError(f"x must be (N, C, H, W) or (C, H, W) with C = {self.in_channels}, got shape "
                             f"{tuple(x.shape)}")
        return F.pad(x, (0, 0, 0, 0, 0, self.padded_in_channels - self.in_channels))

    def to_conv2d(self) -> nn.Conv2d:
        """A plain ``nn.Conv2d`` of the original shape holding this module's current weights (a copy)."""
        c = self.conv
        out = nn.Conv2d(self.in_channels, self.out_channels, c.kernel_size, c.stride, c.padding, c.dilation,
                        bias=c.bias is not None, padding_mode=c.padding_mode, device=c.weight.device,
                        dtype=c.weight.dtype)
        with torch.no_grad():
            out.weight.copy_(c.weight[: self.out_channels, : self.in_channels])
            if c.bias is not None:
                out.bias.copy_(c.bias[: self.out_channels])
        return out

    def extra_repr(self) -> str:
        return (f"in_channels={self.in_channels}→{self.padded_in_channels}, "
                f"out_channels={self.out_channels}→{self.padded_out_channels}, keep_padding={self.keep_padding}")


def _check_conv(conv: object) -> None:
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"conv must be a torch.nn.Conv2d, got {type(conv).__name__}")
    if isinstance(conv.weight, nn.parameter.UninitializedParameter):
        raise TypeError("conv is a LazyConv2d whose shape is not known yet; run one forward pass first")
    if conv.groups != 1:
        raise ValueError(f"conv must have groups=1 (grouped and depthwise convolutions are not supported), "
                         f"got groups={conv.groups}")


def padded_conv2d(conv: nn.Conv2d, in_multiple: int = 1, out_multiple: int = 1,
                  keep_padding: bool = False) -> PaddedConv2d:
    """``conv`` with its input channels padded up to a multiple of ``in_multiple`` and its output channels
    up to a multiple of ``out_multiple`` (zero filters and zero input channels).

    Same call signature and output shape as ``conv``; outputs, input gradients and the weight gradient
    of the real filters equal the original's up to floating-point rounding (the same sums with zero
    terms added); the padding gets zero gradient. ``keep_padding=True`` returns all
    ``padded_out_channels`` (no slice: the next layer can take them as its padded input).

    **Where to pad the input.** Given a ``C``-channel input, the module pads it with ``F.pad`` on every
    call: a copy of the whole batch each step, memory-bound, which can cost more than the padding
    saves (the ``conv_first_layer`` experiment measures it). Pad once instead, where the data is made
    (the dataset's transform or the DataLoader's collate, e.g. RGB → RGB0 for a first layer, or
    :meth:`PaddedConv2d.pad_input` once), and pass the padded batch: the module uses it as is.

    Parameters are **copied**, not shared: put the module in the model in place of ``conv`` before
    building the optimizer, and take the trained layer back with :meth:`PaddedConv2d.to_conv2d`.

    Raises ``TypeError`` if ``conv`` is not a ``torch.nn.Conv2d`` (or is lazy), ``ValueError`` if its
    ``groups`` is not 1 or a multiple is < 1.
    """
    return PaddedConv2d(conv, in_multiple=in_multiple, out_multiple=out_multiple, keep_padding=keep_padding)
