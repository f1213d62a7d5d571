"""Model zoo: four well-known architectures built in plain torch (no weights, no downloads).

Each builder makes an ``nn.Module`` of standard layers on whatever device is current (build under
``with torch.device("meta"):`` to get the shapes without allocating memory) and returns it in
train mode. Layers carry readable names for :meth:`~torch.nn.Module.named_modules`.

- :func:`gpt2_small` — 124,439,808 parameters (``lm_head`` tied to ``wte``); layers ``wte``, ``wpe``,
  ``blocks.0.attn.qkv``, ``blocks.0.attn.proj``, ``blocks.0.mlp.fc``, ``blocks.0.mlp.proj``, ``ln_f``,
  ``lm_head``.
- :func:`resnet50` — 25,557,032; torchvision's names: ``conv1``, ``bn1``, ``maxpool``,
  ``layer1.0.conv2``, ``layer1.0.downsample.0``, ``fc``.
- :func:`lstm_lm` — 36,026,000; ``embed``, ``lstm``, ``decoder``.
- :func:`llama` — 6,738,415,616 (7B, the default); ``llama(**LLAMA_CONFIGS["3B"])`` 3,426,473,600;
  ``LLAMA_CONFIGS["13B"]`` 13,015,864,320; ``embed``, ``layers.0.attention.wq`` (``wk wv wo``),
  ``layers.0.feed_forward.w1`` (``w2 w3``), ``norm``, ``output``.

:func:`parameter_count` counts a model's distinct parameters (a tied weight once).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import non_negative_number, positive_int

__all__ = ["GPT2", "ResNet50", "Bottleneck", "LSTMLanguageModel", "Llama", "RMSNorm", "LLAMA_CONFIGS",
           "gpt2_small", "resnet50", "lstm_lm", "llama", "parameter_count"]


def _probability(name: str, value: Any) -> float:
    """A dropout probability in ``[0, 1)``."""
    p = non_negative_number(name, value)
    if p >= 1:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value}")
    return p


def _heads_divide(dim: int, heads: int) -> int:
    """The head size ``dim // heads``; ``ValueError`` naming both if ``heads`` does not divide ``dim``."""
    if dim % heads:
        raise ValueError(f"dim ({dim}) must be a multiple of heads ({heads})")
    return dim // heads


def _check_tokens(idx: torch.Tensor, context: int | None = None) -> None:
    """Token ids must be ``(B, T)`` with ``T ≤ context`` (a shape check: fine on the meta device)."""
    if idx.dim() != 2:
        raise ValueError(f"expected token ids of shape (batch, time), got shape {tuple(idx.shape)}")
    if context is not None and idx.shape[1] > context:
        raise ValueError(f"sequence length {idx.shape[1]} exceeds the model's context ({context})")


def parameter_count(model: nn.Module) -> int:
    """The number of distinct parameters of ``model`` (works on the meta device; tied weights count once)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------------- GPT-2
class GPT2Attention(nn.Module):
    """Causal self-attention: one fused ``qkv`` projection, heads split, SDPA, output ``proj``."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))


class GPT2MLP(nn.Module):
    """``fc`` (dim → 4·dim), GELU, ``proj`` (4·dim → dim), dropout."""

    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(self.act(self.fc(x))))


class GPT2Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = GPT2Attention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = GPT2MLP(dim, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    """GPT-2 decoder (Radford et al. 2019); ``lm_head`` shares its weight with ``wte``."""

    def __init__(self, vocab_size: int, context: int, dim: int, layers: int, heads: int,
                 dropout: float) -> None:
        super().__init__()
        self.context = context
        self.wte = nn.Embedding(vocab_size, dim)
        self.wpe = nn.Embedding(context, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPT2Block(dim, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids ``(B, T)`` → logits ``(B, T, vocab_size)``."""
        _check_tokens(idx, self.context)
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt2_small(vocab_size: int = 50257, context: int = 1024, dim: int = 768, layers: int = 12,
               heads: int = 12, dropout: float = 0.1) -> GPT2:
    """GPT-2 small: 12 layers, 768 wide, 12 heads, 1024 positions, 50,257 tokens (the released
    ``gpt2`` config, Radford et al. 2019); 124,439,808 parameters with the tied ``lm_head``.

    ``forward(idx)`` maps token ids ``(B, T)``, ``T ≤ context``, to logits ``(B, T, vocab_size)``.
    """
    vocab_size = positive_int("vocab_size", vocab_size)
    context = positive_int("context", context)
    dim = positive_int("dim", dim)
    layers = positive_int("layers", layers)
    heads = positive_int("heads", heads)
    dropout = _probability("dropout", dropout)
    _heads_divide(dim, heads)
    return GPT2(vocab_size, context, dim, layers, heads, dropout).train()


# ------------------------------------------------------------------------------------------ ResNet-50
class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1×1 → 3×3 (carries the stride) → 1×1 (×4 channels), BN after each,
    ``downsample`` (1×1 conv + BN) on the shortcut when the shape changes, add, ReLU."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
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
    """ResNet-50 (He et al. 2015) in torchvision's layout and module names."""

    def __init__(self, num_classes: int, in_channels: int, blocks: tuple[int, ...] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = 64
        for i, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
            stage = []
            for j in range(n):
                stage.append(Bottleneck(channels, width, stride=2 if (j == 0 and i > 1) else 1))
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


# ---------------------------------------------------------------------------------------- LSTM LM
class LSTMLanguageModel(nn.Module):
    """Word-level LSTM language model: ``embed`` → dropout → ``lstm`` → dropout → ``decoder``."""

    def __init__(self, vocab_size: int, hidden: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.drop = nn.Dropout(dropout)
        # nn.LSTM applies its dropout between layers only: with one layer it would only warn.
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids ``(B, T)`` → logits ``(B, T, vocab_size)`` (zero initial state)."""
        _check_tokens(idx)
        out, _ = self.lstm(self.drop(self.embed(idx)))
        return self.decoder(self.drop(out))


def lstm_lm(vocab_size: int = 10000, hidden: int = 1000, layers: int = 2, dropout: float = 0.2) -> LSTMLanguageModel:
    """The Zaremba et al. (2014) PTB language model shape: 10,000 words, 2 LSTM layers, embedding
    as wide as the hidden state (1500 in the paper's "large" model, 650 "medium"; 1000 here as in
    the book's example); 36,026,000 parameters at the defaults.
    """
    vocab_size = positive_int("vocab_size", vocab_size)
    hidden = positive_int("hidden", hidden)
    layers = positive_int("layers", layers)
    dropout = _probability("dropout", dropout)
    return LSTMLanguageModel(vocab_size, hidden, layers, dropout).train()


# ------------------------------------------------------------------------------------------ LLaMA
LLAMA_CONFIGS: dict[str, dict[str, int]] = {
    # LLaMA-7B (Touvron et al. 2023, Table 2; ffn = 256·⌈(8·dim/3)/256⌉ as in Meta's code); LLaMA-2-7B
    # has the same shape and a 4096 context.
    "7B": {"dim": 4096, "layers": 32, "heads": 32, "ffn": 11008, "vocab_size": 32000, "context": 4096},
    # OpenLLaMA-3B (openlm-research/open_llama_3b config.json): 3,426,473,600 parameters.
    "3B": {"dim": 3200, "layers": 26, "heads": 32, "ffn": 8640, "vocab_size": 32000, "context": 2048},
    # LLaMA-13B (Touvron et al. 2023, Table 2: dim 5120, 40 heads, 40 layers; ffn 13824 by the same
    # rule); LLaMA-2-13B has the same shape. 13,015,864,320 parameters.
    "13B": {"dim": 5120, "layers": 40, "heads": 40, "ffn": 13824, "vocab_size": 32000, "context": 4096},
}


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): ``x · rsqrt(mean(x²) + eps) · weight``."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (Su et al. 2021) on consecutive pairs of ``x`` ``(B, H, T, D)``, as Meta's code;
    ``cos``/``sin`` are ``(T, D/2)``. Elementwise ops only, so it runs on the meta device."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class LlamaAttention(nn.Module):
    """Multi-head attention: ``wq wk wv`` (no bias), rotary on q and k, causal SDPA, ``wo``."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (w(x).view(b, t, self.heads, c // self.heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(_rotate(q, cos, sin), _rotate(k, cos, sin), v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, c))


class LlamaFeedForward(nn.Module):
    """SwiGLU MLP (Shazeer 2020): ``w2(silu(w1 x) · w3 x)``, no biases."""

    def __init__(self, dim: int, ffn: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    """``x + attention(attention_norm(x))``, then ``x + feed_forward(ffn_norm(x))``."""

    def __init__(self, dim: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = LlamaAttention(dim, heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = LlamaFeedForward(dim, ffn)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """LLaMA decoder (Touvron et al. 2023). The rotary tables ``rope_cos``/``rope_sin`` ``(context,
    head_dim/2)`` are non-persistent buffers shared by every layer (not parameters, not saved)."""

    def __init__(self, dim: int, layers: int, heads: int, ffn: int, vocab_size: int, context: int,
                 rope_theta: float = 10000.0) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(LlamaBlock(dim, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab_size, bias=False)
        head_dim = dim // heads
        freqs = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(context, dtype=torch.float32), freqs)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids ``(B, T)``, ``T ≤ context`` → logits ``(B, T, vocab_size)``."""
        _check_tokens(idx, self.context)
        t = idx.shape[1]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def llama(dim: int = 4096, layers: int = 32, heads: int = 32, ffn: int = 11008, vocab_size: int = 32000,
          context: int = 4096) -> Llama:
    """A LLaMA-shaped decoder; the defaults are LLaMA-7B (Touvron et al. 2023, Table 2: 6,738,415,616
    parameters). Other shapes: ``llama(**LLAMA_CONFIGS["3B"])`` etc. Build large ones under
    ``with torch.device("meta"):`` — 7B in float32 is 27 GB.
    """
    dim = positive_int("dim", dim)
    layers = positive_int("layers", layers)
    heads = positive_int("heads", heads)
    ffn = positive_int("ffn", ffn)
    vocab_size = positive_int("vocab_size", vocab_size)
    context = positive_int("context", context)
    if _heads_divide(dim, heads) % 2:
        raise ValueError(f"dim // heads must be even for the rotary embedding, got {dim} // {heads} = {dim // heads}")
    return Llama(dim, layers, heads, ffn, vocab_size, context).train()
