"""Appendix: how perfkit times (``chapters/90_timing.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import timing``); its modules: ``experiments``, ``figures``, ``problems``,
``published``, ``calibration`` (the section "Calibrate your own GPU"), ``interactive``. Each is imported
when first asked for (:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["book_gpu_profile", "ceilings_frame", "error_frame", "plot_calibration", "plot_samples",
           "plot_small_kernels", "plot_timers", "profile_source", "profile_table", "timer_agreement", "timer_cases", "timer_table",
           "timer_validation",
           "calibration", "experiments", "figures", "problems", "published", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "calibration": ["book_gpu_profile", "ceilings_frame", "error_frame", "profile_source", "profile_table"],
    "experiments": ["timer_agreement", "timer_cases", "timer_table", "timer_validation"],
    "figures": ["plot_calibration", "plot_samples", "plot_small_kernels", "plot_timers"],
    "problems": [],
    "published": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
