"""GPU performance background: math, memory and waves (``chapters/01_background.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import background``); its modules: ``ceilings``, ``experiments``, ``figures``,
``problems``, ``interactive``. ``interactive`` (Plotly) is imported when first asked for.
"""

from __future__ import annotations

import importlib

from . import ceilings, experiments, figures, problems
from .ceilings import ceiling_copy, ceiling_matmul
from .experiments import per_wave, waves
from .figures import plot_roofline, plot_tile_waves, plot_wave_model, plot_waves

__all__ = ["ceiling_copy", "ceiling_matmul", "per_wave", "plot_roofline", "plot_tile_waves",
           "plot_wave_model", "plot_waves", "waves", "ceilings", "experiments", "figures", "problems",
           "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
