"""The Vision Transformer built in plain torch, in torchvision's layout and module names (no weights, no downloads).

- :func:`vit_b_16` — 86,567,656 parameters (``torchvision.models.vit_b_16``); ``conv_proj`` (16×16 patches),
  ``class_token``, ``encoder.pos_embedding``, ``encoder.layers.encoder_layer_0.ln_1``,
  ``….self_attention`` (an ``nn.MultiheadAttention``), ``….ln_2``, ``….mlp.0`` (768 → 3072), ``….mlp.3``
  (3072 → 768), ``encoder.ln``, ``heads.head``.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from .._validate import positive_int
from ._common import _heads_divide, _probability

__all__ = ["EncoderBlock", "MLPBlock", "ViTEncoder", "VisionTransformer", "vit_b_16"]

_LN_EPS = 1e-6  # torchvision's norm_layer: partial(nn.LayerNorm, eps=1e-6)


class MLPBlock(nn.Sequential):
    """torchvision's ``MLPBlock``: ``0`` Linear dim → mlp_dim, ``1`` GELU, ``2`` Dropout, ``3`` Linear
    mlp_dim → dim, ``4`` Dropout."""

    def __init__(self, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, dim),
                         nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    """Pre-LayerNorm encoder block: ``x = input + dropout(self_attention(ln_1(input)))``, then
    ``x + mlp(ln_2(x))``; the attention is ``nn.MultiheadAttention(dim, heads, batch_first=True)`` called as
    ``self_attention(x, x, x, need_weights=False)``, as torchvision calls it."""

    def __init__(self, heads: int, dim: int, mlp_dim: int, dropout: float, attention_dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=_LN_EPS)
        self.self_attention = nn.MultiheadAttention(dim, heads, dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(dim, eps=_LN_EPS)
        self.mlp = MLPBlock(dim, mlp_dim, dropout)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dim() != 3:
            raise ValueError(f"expected (batch, tokens, dim) inputs, got shape {tuple(input.shape)}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class ViTEncoder(nn.Module):
    """torchvision's ``Encoder``: add the learned ``pos_embedding`` ``(1, tokens, dim)``, dropout, the blocks
    ``layers.encoder_layer_{i}``, a final LayerNorm ``ln``."""

    def __init__(self, tokens: int, layers: int, heads: int, dim: int, mlp_dim: int, dropout: float,
                 attention_dropout: float) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(heads, dim, mlp_dim, dropout, attention_dropout))
            for i in range(layers)))
        self.ln = nn.LayerNorm(dim, eps=_LN_EPS)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(nn.Module):
    """ViT (Dosovitskiy et al. 2021) in torchvision's layout: ``conv_proj`` cuts the image into
    ``patch_size``² patches (a convolution with that kernel and stride), a ``class_token`` is put in front
    of the patch tokens, the ``encoder`` runs, and ``heads.head`` classifies the class token's output."""

    def __init__(self, image_size: int, patch_size: int, layers: int, heads: int, dim: int, mlp_dim: int,
                 num_classes: int, dropout: float = 0.0, attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.image_size, self.patch_size, self.hidden_dim = image_size, patch_size, dim
        self.conv_proj = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.seq_length = (image_size // patch_size) ** 2 + 1
        self.encoder = ViTEncoder(self.seq_length, layers, heads, dim, mlp_dim, dropout, attention_dropout)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(dim, num_classes)))

    def _process_input(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` → patch tokens ``(B, (H/p)·(W/p), dim)``."""
        if x.dim() != 4 or tuple(x.shape[1:]) != (3, self.image_size, self.image_size):
            raise ValueError(f"expected images of shape (batch, 3, {self.image_size}, {self.image_size}), "
                             f"got shape {tuple(x.shape)}")
        n, side = x.shape[0], self.image_size // self.patch_size
        x = self.conv_proj(x).reshape(n, self.hidden_dim, side * side)
        return x.permute(0, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, image_size, image_size)`` → class logits ``(B, num_classes)``."""
        x = self._process_input(x)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


def vit_b_16(num_classes: int = 1000, image_size: int = 224, patch_size: int = 16, dim: int = 768,
             layers: int = 12, heads: int = 12, mlp_dim: int = 3072, dropout: float = 0.0,
             attention_dropout: float = 0.0) -> VisionTransformer:
    """ViT-B/16 (Dosovitskiy et al. 2021), as ``torchvision.models.vit_b_16``: 16×16 patches of a 224×224
    image (196 patch tokens and a class token: 197), 12 encoder layers of width 768 with 12 heads and an
    MLP of 3072; 86,567,656 parameters at the defaults, with torchvision's module names. The other
    arguments make smaller ViTs of the same structure (``image_size`` a multiple of ``patch_size``).
    Weights are torch's default initialisation (the position table and class token as torchvision's).
    Input ``(B, 3, image_size, image_size)`` → ``(B, num_classes)``.
    """
    num_classes = positive_int("num_classes", num_classes)
    image_size = positive_int("image_size", image_size)
    patch_size = positive_int("patch_size", patch_size)
    dim = positive_int("dim", dim)
    layers = positive_int("layers", layers)
    heads = positive_int("heads", heads)
    mlp_dim = positive_int("mlp_dim", mlp_dim)
    dropout = _probability("dropout", dropout)
    attention_dropout = _probability("attention_dropout", attention_dropout)
    if image_size % patch_size:
        raise ValueError(f"image_size ({image_size}) must be a multiple of patch_size ({patch_size})")
    _heads_divide(dim, heads)
    return VisionTransformer(image_size, patch_size, layers, heads, dim, mlp_dim, num_classes, dropout,
                             attention_dropout).train()
