"""Convolutions: implicit GEMMs, channels and layouts (``chapters/05_convolutions.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import convolutions``); its modules: ``analysis``, ``experiments``, ``figures``,
``problems``, ``verdict``, ``interactive``. Each is imported when first asked for
(:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["CHANNEL_COLUMNS", "DB_COLUMNS", "DB_MEANINGS", "DEEPBENCH_CONVS", "PHASES", "PREDICTED",
           "RESNET_LAYERS", "SHAPE_COLUMNS", "STEMS", "TIME_COLUMNS", "channel_effects", "channel_points",
           "conv_channels", "conv_deepbench", "conv_first_layer", "conv_flops", "conv_gemm", "conv_layout",
           "conv_params", "conv_passes", "conv_shape", "db_shape", "first_layer_effects", "for_reader",
           "furthest_off", "layout_effects", "layout_payback", "median_speedup", "model_agreement",
           "model_row", "param_effects", "param_points", "plot_conv_channels", "plot_conv_layout",
           "plot_conv_params", "plot_conv_passes", "plot_conv_then_now", "plot_first_layer",
           "predicted_channels", "predicted_deepbench", "predicted_params", "predicted_published",
           "share_within", "speedup_by_channels", "throughput_gain", "analysis", "experiments", "figures",
           "problems", "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "analysis": ["CHANNEL_COLUMNS", "DB_COLUMNS", "DB_MEANINGS", "PREDICTED", "SHAPE_COLUMNS", "TIME_COLUMNS",
        "conv_flops", "conv_gemm", "conv_shape", "db_shape", "furthest_off", "median_speedup", "model_row",
        "param_points", "predicted_deepbench", "share_within", "speedup_by_channels"],
    "experiments": ["DEEPBENCH_CONVS", "PHASES", "RESNET_LAYERS", "STEMS", "channel_effects", "channel_points",
        "conv_channels", "conv_deepbench", "conv_first_layer", "conv_layout", "conv_params", "conv_passes",
        "first_layer_effects", "for_reader", "layout_effects", "layout_payback", "model_agreement", "param_effects",
        "predicted_channels", "predicted_params", "predicted_published", "throughput_gain"],
    "figures": ["plot_conv_channels", "plot_conv_layout", "plot_conv_params", "plot_conv_passes",
        "plot_conv_then_now", "plot_first_layer"],
    "problems": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
