"""Collective communication: all-reduce and all-gather between processes (``chapters/08_communication.md``):
the chapter's machinery in one folder.

Its experiment (registered for the recorder: ``collective_sizes``, a real sweep with
``torch.distributed``), the model's frames, the published tables in the experiment's columns and the
effects the verdicts read, and its figures are importable from here (``from perfkit.book import
communication``); its modules: ``experiments`` and ``workers`` (the ranks' processes), ``analysis``,
``training`` (data and tensor parallelism), ``figures``, ``problems``, ``verdict``, ``interactive``.
Each is imported when first asked for (:mod:`perfkit.book.lazy`): importing the experiments draws
nothing. The model of a collective is in the core: :mod:`perfkit.collectives` and
:mod:`perfkit.interconnects`.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["COLLECTIVE_OPS", "binary_size", "collective_sizes", "data_parallel_source", "data_parallel_sweep",
           "deepbench_frame", "model_source", "plot_data_parallel", "plot_sizes", "predicted_collectives",
           "tensor_parallel_layer", "xla_frame",
           "analysis", "experiments", "figures", "problems", "training", "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "analysis": ["deepbench_frame", "model_source", "predicted_collectives", "xla_frame"],
    "experiments": ["COLLECTIVE_OPS", "collective_sizes"],
    "figures": ["binary_size", "plot_data_parallel", "plot_sizes"],
    "problems": [],
    "training": ["data_parallel_source", "data_parallel_sweep", "tensor_parallel_layer"],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
