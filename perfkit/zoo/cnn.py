"""Convolutional networks built in plain torch, in torchvision's layouts and module names (no weights,
no downloads).

- :func:`resnet50` — 25,557,032 parameters; ``conv1``, ``bn1``, ``maxpool``, ``layer1.0.conv2``,
  ``layer1.0.downsample.0``, ``fc``.
- :func:`resnext50_32x4d` — 25,028,904; ResNet-50's names, each bottleneck's ``conv2`` a grouped 3×3
  (32 groups): grouped convolutions are one GEMM per group.
- :func:`mobilenet_v2` — 3,504,872; ``features.0.0`` (first conv), ``features.1.conv.0.0`` (a depthwise
  3×3), ``features.2.conv.0.0`` (1×1 expand), ``features.18.0`` (last 1×1), ``classifier.1``: depthwise
  convolutions are memory-bound.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import positive_int, positive_number

__all__ = ["Bottleneck", "ResNet50", "InvertedResidual", "MobileNetV2", "resnet50", "resnext50_32x4d",
           "mobilenet_v2"]


# ---------------------------------------------------------------------------------- ResNet, ResNeXt
class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1×1 → 3×3 (carries the stride) → 1×1 (×4 channels), BN after each,
    ``downsample`` (1×1 conv + BN) on the shortcut when the shape changes, add, ReLU.

    ``width`` is the stage's width (torchvision's ``planes``); the block puts out ``4 · width`` channels.
    ResNeXt's block (Xie et al. 2017) splits the 3×3 into ``groups`` groups of ``width · base_width / 64``
    channels each (the 1×1s widen to match); the defaults (one group, ``base_width`` 64) are ResNet's."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1, groups: int = 1, base_width: int = 64) -> None:
        super().__init__()
        out_channels = width * self.expansion
        inner = int(width * (base_width / 64.0)) * groups  # torchvision's rule; = width for ResNet
        self.conv1 = nn.Conv2d(in_channels, inner, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(inner)
        self.conv2 = nn.Conv2d(inner, inner, 3, stride=stride, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(inner)
        self.conv3 = nn.Conv2d(inner, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 (He et al. 2015) in torchvision's layout and module names; with ``groups`` and
    ``base_width`` (see :class:`Bottleneck`) it is ResNeXt-50 (Xie et al. 2017), names unchanged."""

    def __init__(self, num_classes: int, in_channels: int, blocks: tuple[int, ...] = (3, 4, 6, 3),
                 groups: int = 1, base_width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = 64
        for i, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
            stage = []
            for j in range(n):
                stage.append(Bottleneck(channels, width, stride=2 if (j == 0 and i > 1) else 1,
                                        groups=groups, base_width=base_width))
                channels = width * Bottleneck.expansion
            setattr(self, f"layer{i}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, in_channels, H, W)`` → class logits ``(B, num_classes)``."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(num_classes: int = 1000, in_channels: int = 3) -> ResNet50:
    """ResNet-50: stages of [3, 4, 6, 3] bottlenecks of widths 64…512 (He et al. 2015, Table 1),
    stride on the 3×3 conv (torchvision's v1.5); 25,557,032 parameters at the defaults, as
    ``torchvision.models.resnet50``. Input ``(B, 3, 224, 224)`` → ``(B, num_classes)``.
    """
    num_classes = positive_int("num_classes", num_classes)
    in_channels = positive_int("in_channels", in_channels)
    return ResNet50(num_classes, in_channels).train()


def resnext50_32x4d(num_classes: int = 1000, in_channels: int = 3) -> ResNet50:
    """ResNeXt-50 32×4d (Xie et al. 2017): ResNet-50 with each bottleneck's 3×3 conv split into 32 groups
    of 4 channels per 64 of stage width (``layer1``: 128 channels, ``layer4``: 1024), the 1×1s widened to
    match; 25,028,904 parameters at the defaults, as ``torchvision.models.resnext50_32x4d``, with the same
    module names as :func:`resnet50`. Input ``(B, 3, 224, 224)`` → ``(B, num_classes)``.

    The book uses it as the grouped CNN: a grouped convolution is one GEMM per group (``layer1.0.conv2``:
    32 GEMMs with N = 4 output channels and K = 3·3·4 = 36), far smaller than the dense 3×3's.
    """
    num_classes = positive_int("num_classes", num_classes)
    in_channels = positive_int("in_channels", in_channels)
    return ResNet50(num_classes, in_channels, groups=32, base_width=4).train()


# -------------------------------------------------------------------------------------- MobileNetV2
#: MobileNetV2's inverted residual stages (Sandler et al. 2018, Table 2): expansion t, channels c,
#: blocks n, first stride s.
_INVERTED_RESIDUAL_SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                              (6, 160, 3, 2), (6, 320, 1, 1))


def _make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """``v`` rounded to the nearest multiple of ``divisor`` (at least ``min_value``, by default ``divisor``)
    and never more than 10 % below ``v``: torchvision's channel rounding, from TensorFlow's MobileNet."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _conv_bn_relu6(in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1,
                   groups: int = 1) -> nn.Sequential:
    """torchvision's ``Conv2dNormActivation``: conv (no bias, "same" padding) ``.0``, ``BatchNorm2d`` ``.1``,
    ``ReLU6`` ``.2``."""
    conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2, groups=groups,
                     bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(out_channels), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """MobileNetV2's block, ``conv``: 1×1 expand to ``t ×`` the channels + BN + ReLU6 (absent when t = 1),
    3×3 depthwise conv (groups = channels, carries the stride) + BN + ReLU6, 1×1 project + BN (linear);
    ``x + conv(x)`` when the stride is 1 and the channels do not change."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        self.stride = stride
        hidden = int(round(in_channels * expand_ratio))
        self.use_res_connect = stride == 1 and in_channels == out_channels
        layers: list[nn.Module] = [] if expand_ratio == 1 else [_conv_bn_relu6(in_channels, hidden, 1)]
        layers += [_conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018) in torchvision's layout and module names: ``features`` (first
    conv, 17 inverted residuals, last 1×1 conv), global average pool, ``classifier`` (dropout, linear)."""

    def __init__(self, num_classes: int, width_mult: float = 1.0) -> None:
        super().__init__()
        channels = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [_conv_bn_relu6(3, channels, stride=2)]
        for t, c, n, s in _INVERTED_RESIDUAL_SETTING:
            out_channels = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(channels, out_channels, s if i == 0 else 1, expand_ratio=t))
                channels = out_channels
        features.append(_conv_bn_relu6(channels, self.last_channel, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` → class logits ``(B, num_classes)``."""
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(num_classes: int = 1000, width_mult: float = 1.0) -> MobileNetV2:
    """MobileNetV2 (Sandler et al. 2018): a 3→32 stride-2 conv, 17 inverted residual blocks (t, c, n, s =
    1,16,1,1 · 6,24,2,2 · 6,32,3,2 · 6,64,4,2 · 6,96,3,1 · 6,160,3,2 · 6,320,1,1), a 1×1 conv to 1280, pool,
    dropout 0.2, linear; channels × ``width_mult`` rounded to multiples of 8. 3,504,872 parameters at the
    defaults, as ``torchvision.models.mobilenet_v2``, with its module names (``features.1.conv.0.0``,
    ``classifier.1``). Input ``(B, 3, 224, 224)`` → ``(B, num_classes)``.

    The book uses it as the depthwise CNN: a depthwise 3×3 (groups = channels) does 9 multiply-adds per
    output element, a GEMM per channel with N = 1 and K = 9, so it is memory-bound on any GPU.
    """
    num_classes = positive_int("num_classes", num_classes)
    width_mult = positive_number("width_mult", width_mult)
    return MobileNetV2(num_classes, width_mult).train()
