"""Transformers built in plain torch: GPT-2 small and LLaMA-shaped decoders (no weights, no downloads).

- :func:`gpt2_small` — 124,439,808 parameters (``lm_head`` tied to ``wte``); layers ``wte``, ``wpe``,
  ``blocks.0.attn.qkv``, ``blocks.0.attn.proj``, ``blocks.0.mlp.fc``, ``blocks.0.mlp.proj``, ``ln_f``,
  ``lm_head``.
- :func:`llama` — 6,738,415,616 (7B, the default); ``llama(**LLAMA_CONFIGS["3B"])`` 3,426,473,600;
  ``LLAMA_CONFIGS["13B"]`` 13,015,864,320; ``embed``, ``layers.0.attention.wq`` (``wk wv wo``),
  ``layers.0.feed_forward.w1`` (``w2 w3``), ``norm``, ``output``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import positive_int
from ._common import _check_tokens, _heads_divide, _probability

__all__ = ["GPT2", "GPT2Attention", "GPT2MLP", "GPT2Block", "Llama", "LlamaAttention", "LlamaFeedForward",
           "LlamaBlock", "RMSNorm", "LLAMA_CONFIGS", "gpt2_small", "llama"]


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
