"""Recurrent layers: one small GEMM per time step (``chapters/04_recurrent.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import recurrent``); its modules: ``analysis``, ``experiments``, ``figures``,
``problems``, ``verdict``, ``interactive``. Each is imported when first asked for
(:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["CELLS", "DEEPBENCH_LAYERS", "PERSISTENT_ATOL", "batch_effects", "combine_speedup",
           "combine_summary", "deepbench_comparable", "gemm_loop", "layer_count", "layer_speedups",
           "layout_table", "persistent_summary", "plot_combine_time", "plot_layer_minibatch",
           "plot_persistent", "plot_rnn_batch", "plot_rnn_hidden", "plot_rnn_layers", "plot_rnn_then_now",
           "predicted_layers", "rnn_batch", "rnn_combine_time", "rnn_cudnn", "rnn_hidden", "rnn_persistent",
           "throughput_ratio", "throughput_ratios", "analysis", "experiments", "figures", "problems",
           "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "analysis": ["batch_effects", "combine_summary", "layer_count", "layer_speedups", "layout_table",
        "persistent_summary", "predicted_layers", "throughput_ratios"],
    "experiments": ["CELLS", "DEEPBENCH_LAYERS", "PERSISTENT_ATOL", "combine_speedup", "deepbench_comparable",
        "gemm_loop", "rnn_batch", "rnn_combine_time", "rnn_cudnn", "rnn_hidden", "rnn_persistent",
        "throughput_ratio"],
    "figures": ["plot_combine_time", "plot_layer_minibatch", "plot_persistent", "plot_rnn_batch", "plot_rnn_hidden",
        "plot_rnn_layers", "plot_rnn_then_now"],
    "problems": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
