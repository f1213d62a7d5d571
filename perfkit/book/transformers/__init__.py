"""The transformer block: attention, MLP and decoding (``chapters/07_transformers.md``): the chapter's
machinery in one folder.

Its experiments (registered for the recorder: ``attention_backends``, ``attention_head_dims``,
``decode_steps``), the model's frames and the effects the verdicts read, and its figures are importable
from here (``from perfkit.book import transformers``); its modules: ``analysis``, ``decoding``,
``experiments``, ``figures``, ``problems``, ``published`` (NVIDIA's cuDNN attention on H200 and
Blackwell, beside our recording), ``verdict``, ``interactive``. Each is imported when first
asked for (:mod:`perfkit.book.lazy`): importing the experiments draws nothing. The models themselves are
in the core: :mod:`perfkit.transformer`.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["ATTENTION_BACKENDS", "CPU_MODEL", "GPU_MODEL", "DecodeModel", "attention_backends",
           "attention_head_dims", "block_costs", "decode_model", "decode_steps", "plot_attention",
           "plot_attention_memory", "plot_decode", "plot_head_dims", "predicted_attention", "predicted_decode",
           "analysis", "decoding", "experiments", "figures", "problems", "published", "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "analysis": ["block_costs", "predicted_attention", "predicted_decode"],
    "decoding": ["CPU_MODEL", "GPU_MODEL", "DecodeModel", "decode_model", "decode_steps"],
    "experiments": ["ATTENTION_BACKENDS", "attention_backends", "attention_head_dims"],
    "figures": ["plot_attention", "plot_attention_memory", "plot_decode", "plot_head_dims"],
    "problems": [],
    "published": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
