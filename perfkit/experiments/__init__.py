"""Experiments: one function per measured figure, shared by the chapters, the recorder and the tests.

An experiment is a plain function, one module per chapter, that measures and returns a tidy
``pandas.DataFrame`` (one row per measurement) whose columns are declared when it is registered
(:mod:`perfkit.experiments.registry`). Every experiment accepts these keyword arguments:

- ``on_row``: called with each row (a ``dict``) as soon as it is measured, so a recorder can write
  it before the next measurement starts; an interrupted sweep keeps every row it measured;
- ``progress``: show a tqdm progress bar (default ``True``);
- ``quick``: a small version of the sweep (for tests and CPU runs).

Experiments never draw (:mod:`perfkit.plots` does) and never read ``data/``
(:func:`perfkit.run_or_load` does).
"""

from __future__ import annotations

# Each module registers its experiments; the import order is the recorder's order: the ceilings,
# timers and GEMMs the model and the other chapters rest on first, then the chapters in book order.
from . import (background, ceilings, timers, gemm, fc, fc_analysis, rnn, rnn_analysis, conv,  # noqa: F401,I001
               conv_analysis, memory, fusion, convnet, advisor)
from .registry import NEEDS, REGISTRY, Experiment, get, missing_needs, register

__all__ = ["NEEDS", "REGISTRY", "Experiment", "advisor", "background", "ceilings", "conv", "conv_analysis", "convnet", "fc",
           "fc_analysis", "fusion", "gemm", "get", "memory", "missing_needs", "register", "rnn", "rnn_analysis",
           "timers"]
