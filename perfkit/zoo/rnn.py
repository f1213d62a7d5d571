"""A recurrent network built in plain torch: the word-level LSTM language model (no weights, no downloads).

- :func:`lstm_lm` — 36,026,000 parameters at the defaults; layers ``embed``, ``lstm``, ``decoder``.
"""

from __future__ import annotations

import torch
from torch import nn

from .._validate import positive_int
from ._common import _check_tokens, _probability

__all__ = ["LSTMLanguageModel", "lstm_lm"]


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
