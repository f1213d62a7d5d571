"""Collective communication: all-reduce and all-gather between processes (``chapters/08_communication.md``):
the chapter's machinery in one folder.

Its experiment (registered for the recorder: ``collective_sizes``, a real sweep with ``torch.distributed``),
the model's frames, the published tables in the experiment's columns and the effects the verdicts read,
and its figures are importable from here (``from perfkit.book import communication``); its modules:
``experiments`` and ``workers`` (the ranks' processes), ``analysis``, ``training`` (data and tensor
parallelism), ``figures``, ``problems``, ``verdict``, ``interactive``. ``interactive`` (Plotly) is
imported when first asked for. The model of a collective is in the core: :mod:`perfkit.collectives`
and :mod:`perfkit.interconnects`.
"""

from __future__ import annotations

import importlib

from . import analysis, experiments, figures, problems, training, verdict
from .analysis import deepbench_frame, model_source, predicted_collectives, xla_frame
from .training import data_parallel_source, data_parallel_sweep, tensor_parallel_layer
from .experiments import COLLECTIVE_OPS, collective_sizes
from .figures import binary_size, plot_data_parallel, plot_sizes

__all__ = ["COLLECTIVE_OPS", "binary_size", "collective_sizes", "data_parallel_source", "data_parallel_sweep",
           "deepbench_frame", "model_source", "plot_data_parallel", "plot_sizes", "predicted_collectives",
           "tensor_parallel_layer", "xla_frame",
           "analysis", "experiments", "figures", "problems", "training", "verdict", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
