"""Fully-connected layers: three GEMMs and a batch size (``chapters/03_fully_connected.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import fully_connected``); its modules: ``analysis``, ``experiments``,
``figures``, ``problems``, ``verdict``, ``interactive``. ``interactive`` (Plotly) is imported when
first asked for.
"""

from __future__ import annotations

import importlib

from . import analysis, experiments, figures, problems, verdict
from .analysis import (SWEEP_NAMES, XLA_DTYPES, batch_speedups, crossovers, effects_table, frame_device,
    overhead_table, padded_shapes, published_batch_sweeps, savings_table, square_layers)
from .experiments import (FC_DTYPES, PASS_LAYOUTS, fc_batch, fc_features, fc_passes, feature_effects, feature_points,
    pass_overhead, predicted_features, predicted_vocab, vocab_padding, vocab_savings)
from .figures import (plot_fc_batch, plot_fc_crossover, plot_fc_features, plot_fc_passes, plot_fc_widths,
    plot_vocab_padding)

__all__ = ["FC_DTYPES", "PASS_LAYOUTS", "SWEEP_NAMES", "XLA_DTYPES", "batch_speedups", "crossovers",
           "effects_table", "fc_batch", "fc_features", "fc_passes", "feature_effects", "feature_points",
           "frame_device", "overhead_table", "padded_shapes", "pass_overhead", "plot_fc_batch",
           "plot_fc_crossover", "plot_fc_features", "plot_fc_passes", "plot_fc_widths", "plot_vocab_padding",
           "predicted_features", "predicted_vocab", "published_batch_sweeps", "savings_table",
           "square_layers", "vocab_padding", "vocab_savings", "analysis", "experiments", "figures",
           "problems", "verdict", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
