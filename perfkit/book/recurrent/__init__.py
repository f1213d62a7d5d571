"""Recurrent layers: one small GEMM per time step (``chapters/04_recurrent.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import recurrent``); its modules: ``analysis``, ``experiments``, ``figures``,
``problems``, ``verdict``, ``interactive``. ``interactive`` (Plotly) is imported when first asked
for.
"""

from __future__ import annotations

import importlib

from . import analysis, experiments, figures, problems, verdict
from .analysis import (batch_effects, combine_summary, layer_count, layer_speedups, layout_table, persistent_summary,
    predicted_layers, throughput_ratios)
from .experiments import (CELLS, DEEPBENCH_LAYERS, PERSISTENT_ATOL, combine_speedup, deepbench_comparable, gemm_loop,
    rnn_batch, rnn_combine_time, rnn_cudnn, rnn_hidden, rnn_persistent, throughput_ratio)
from .figures import (plot_combine_time, plot_layer_minibatch, plot_persistent, plot_rnn_batch, plot_rnn_hidden,
    plot_rnn_layers, plot_rnn_then_now)

__all__ = ["CELLS", "DEEPBENCH_LAYERS", "PERSISTENT_ATOL", "batch_effects", "combine_speedup",
           "combine_summary", "deepbench_comparable", "gemm_loop", "layer_count", "layer_speedups",
           "layout_table", "persistent_summary", "plot_combine_time", "plot_layer_minibatch",
           "plot_persistent", "plot_rnn_batch", "plot_rnn_hidden", "plot_rnn_layers", "plot_rnn_then_now",
           "predicted_layers", "rnn_batch", "rnn_combine_time", "rnn_cudnn", "rnn_hidden", "rnn_persistent",
           "throughput_ratio", "throughput_ratios", "analysis", "experiments", "figures", "problems",
           "verdict", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
