"""Check your own model (``chapters/09_check_your_model.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import check_your_model``); its modules: ``experiments``, ``figures``,
``problems``, ``interactive``, ``traces`` (a diagnosed profiler trace: its roofline and time sinks),
``steps`` (whole training steps measured, ``model_steps``, against the advisor and the ops timed alone),
``own_traces`` (our own profiler traces of one step, :func:`record_traces`).
Each is imported when first asked for (:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["MODELS", "advisor_fixes", "advisor_layers", "finding_savings", "largest_savings", "model_inputs",
           "plot_advice_vs_measured", "plot_fix_savings", "plot_savings", "plot_step_breakdown",
           "rule_summary", "step_summary", "score_ops", "score_fixes", "step_ratios", "fix_summary", "error_stats",
           "FAMILIES", "FITTED", "family_rows", "family_table", "predict_rows", "TARGETS", "Report", "validation_report", "targets",
           "print_report", "peer_table", "plot_validation", "peer_steps", "peer_ops",
           "experiments", "figures", "held_out", "families", "report", "validation_figures", "peers", "problems",
           "interactive", "traces", "diagnosed", "plot_trace_roofline", "sinks_table", "top_sinks",
           "steps", "STEP_MODELS", "model_steps", "score_steps", "step_gaps", "step_inputs", "whole_step_ratios",
           "own_traces", "TRACE_RUNS", "record_traces"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "experiments": ["MODELS", "advisor_fixes", "advisor_layers", "finding_savings", "largest_savings",
        "model_inputs", "rule_summary", "step_summary"],
    "figures": ["plot_advice_vs_measured", "plot_fix_savings", "plot_savings", "plot_step_breakdown"],
    "held_out": ["score_ops", "score_fixes", "step_ratios", "fix_summary", "error_stats"],
    "families": ["FAMILIES", "FITTED", "family_rows", "family_table", "predict_rows"],
    "report": ["TARGETS", "Report", "validation_report", "targets", "print_report", "peer_table"],
    "validation_figures": ["plot_validation"],
    "peers": ["peer_steps", "peer_ops"],
    "problems": [],
    "interactive": [],
    "traces": ["diagnosed", "plot_trace_roofline", "sinks_table", "top_sinks"],
    "steps": ["STEP_MODELS", "model_steps", "score_steps", "step_gaps", "step_inputs", "whole_step_ratios"],
    "own_traces": ["TRACE_RUNS", "record_traces"],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
