"""The transformer block: attention, MLP and decoding (``chapters/07_transformers.md``): the chapter's
machinery in one folder.

Its experiments (registered for the recorder: ``attention_backends``, ``attention_head_dims``,
``decode_steps``), the model's frames and the effects the verdicts read, and its figures are
importable from here (``from perfkit.book import transformers``); its modules: ``analysis``,
``decoding``, ``experiments``, ``figures``, ``problems``, ``verdict``, ``interactive``. ``interactive`` (Plotly)
is imported when first asked for. The models themselves are in the core: :mod:`perfkit.transformer`.
"""

from __future__ import annotations

import importlib

from . import analysis, decoding, experiments, figures, problems, verdict
from .analysis import block_costs, predicted_attention, predicted_decode
from .decoding import CPU_MODEL, GPU_MODEL, DecodeModel, decode_model, decode_steps
from .experiments import ATTENTION_BACKENDS, attention_backends, attention_head_dims
from .figures import plot_attention, plot_attention_memory, plot_decode, plot_head_dims

__all__ = ["ATTENTION_BACKENDS", "CPU_MODEL", "GPU_MODEL", "DecodeModel", "attention_backends",
           "attention_head_dims", "block_costs", "decode_model", "decode_steps", "plot_attention",
           "plot_attention_memory", "plot_decode", "plot_head_dims", "predicted_attention", "predicted_decode",
           "analysis", "decoding", "experiments", "figures", "problems", "verdict", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
