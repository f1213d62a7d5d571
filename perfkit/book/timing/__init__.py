"""Appendix: how perfkit times (``chapters/90_timing.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import timing``); its modules: ``experiments``, ``figures``, ``problems``,
``published``, ``calibration`` (the section "Calibrate your own GPU"), ``interactive``.
``interactive`` (Plotly) is imported when first asked for.
"""

from __future__ import annotations

import importlib

from . import calibration, experiments, figures, problems, published
from .calibration import book_gpu_profile, ceilings_frame, error_frame, profile_source, profile_table
from .experiments import timer_agreement, timer_cases, timer_table, timer_validation
from .figures import plot_calibration, plot_samples, plot_small_kernels, plot_timers

__all__ = ["book_gpu_profile", "ceilings_frame", "error_frame", "plot_calibration", "plot_samples",
           "plot_small_kernels", "plot_timers", "profile_source", "profile_table", "timer_agreement", "timer_cases", "timer_table",
           "timer_validation",
           "calibration", "experiments", "figures", "problems", "published", "interactive"]


def __getattr__(name: str):
    if name == "interactive":  # Plotly: imported when asked for
        return importlib.import_module(".interactive", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
