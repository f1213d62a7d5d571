"""Check your own model (``chapters/09_check_your_model.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import check_your_model``); its modules: ``experiments``, ``figures``,
``problems``, ``interactive``. ``interactive`` (Plotly) is imported when first asked for.
"""

from __future__ import annotations

import importlib

from . import experiments, figures, problems
from .experiments import (MODELS, advisor_fixes, advisor_layers, finding_savings, largest_savings, model_inputs,
    rule_summary, step_summary)
from .figures import plot_advice_vs_measured, plot_fix_savings, plot_savings, plot_step_breakdown

__all__ = ["MODELS", "advisor_fixes", "advisor_layers", "finding_savings", "largest_savings", "model_inputs",
           "plot_advice_vs_measured", "plot_fix_savings", "plot_savings", "plot_step_breakdown",
           "rule_summary", "step_summary", "experiments", "figures", "problems", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
