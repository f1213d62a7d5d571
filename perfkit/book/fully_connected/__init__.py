"""Fully-connected layers: three GEMMs and a batch size (``chapters/03_fully_connected.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import fully_connected``); its modules: ``analysis``, ``experiments``, ``figures``,
``pricing``, ``problems``, ``verdict``, ``interactive``. Each is imported when first asked for
(:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["FC_DTYPES", "PASS_LAYOUTS", "SWEEP_NAMES", "XLA_DTYPES", "batch_speedups", "crossover_table",
           "crossovers", "effects_table", "fc_batch", "fc_features", "fc_passes", "feature_effects", "feature_points",
           "frame_device", "overhead_table", "padded_shapes", "pass_overhead", "plot_fc_batch",
           "plot_fc_crossover", "plot_fc_features", "plot_fc_passes", "plot_fc_widths", "plot_vocab_padding",
           "predicted_features", "predicted_vocab", "published_batch_sweeps", "repriced", "savings_table",
           "square_layers", "vocab_padding", "vocab_savings", "analysis", "experiments", "figures",
           "pricing", "problems", "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "analysis": ["SWEEP_NAMES", "XLA_DTYPES", "batch_speedups", "crossover_table", "crossovers", "effects_table",
        "frame_device", "overhead_table", "padded_shapes", "published_batch_sweeps", "savings_table", "square_layers"],
    "experiments": ["FC_DTYPES", "PASS_LAYOUTS", "fc_batch", "fc_features", "fc_passes", "feature_effects",
        "feature_points", "pass_overhead", "predicted_features", "predicted_vocab", "vocab_padding",
        "vocab_savings"],
    "pricing": ["repriced"],
    "figures": ["plot_fc_batch", "plot_fc_crossover", "plot_fc_features", "plot_fc_passes", "plot_fc_widths",
        "plot_vocab_padding"],
    "problems": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
