"""Helpers the zoo's builders share: argument checks and :func:`parameter_count`."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .._validate import non_negative_number

__all__ = ["parameter_count"]


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
