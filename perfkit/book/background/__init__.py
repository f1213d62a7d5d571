"""GPU performance background: math, memory and waves (``chapters/01_background.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import background``); its modules: ``ceilings``, ``experiments``, ``figures``,
``problems``, ``interactive``, ``diagrams`` (a GPU drawn from its spec), ``overhead`` (what issuing a
tiny kernel costs), ``newest`` (Blackwell and AMD Instinct beside their published best GEMMs). Each
is imported when first asked for (:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["ceiling_copy", "ceiling_matmul", "dispatch_costs", "per_wave", "plot_dispatch_costs", "plot_gpu",
           "plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves", "show_newest", "waves", "ceilings",
           "diagrams", "experiments", "figures", "newest", "overhead", "problems", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "ceilings": ["ceiling_copy", "ceiling_matmul"],
    "experiments": ["per_wave", "waves"],
    "figures": ["plot_dispatch_costs", "plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves"],
    "diagrams": ["plot_gpu"],
    "overhead": ["dispatch_costs"],
    "newest": ["show_newest"],
    "problems": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
