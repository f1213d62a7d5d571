"""GPU performance background: math, memory and waves (``chapters/01_background.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import background``); its modules: ``ceilings``, ``experiments``, ``figures``,
``problems``, ``interactive``, ``diagrams`` (a GPU drawn from its spec), ``overhead`` (what issuing a
tiny kernel costs). Each is imported when first asked for (:mod:`perfkit.book.lazy`):
importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["ceiling_copy", "ceiling_matmul", "dispatch_costs", "per_wave", "plot_dispatch_costs", "plot_gpu",
           "plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves", "waves", "ceilings", "diagrams",
           "experiments", "figures", "overhead", "problems", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "ceilings": ["ceiling_copy", "ceiling_matmul"],
    "experiments": ["per_wave", "waves"],
    "figures": ["plot_dispatch_costs", "plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves"],
    "diagrams": ["plot_gpu"],
    "overhead": ["dispatch_costs"],
    "problems": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
