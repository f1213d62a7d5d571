"""Appendix: how good is the model (``chapters/91_model_accuracy.md``): perfkit's predictions against
every recording in ``data/``, per family, with the fit/score split (:mod:`perfkit.validation` and
:mod:`perfkit.book.check_your_model.report` compute it). This folder holds the page's tables
(``tables``: small frames for :func:`perfkit.table`), its interactive figure (``interactive``) and its
problems."""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["FAMILY_LABELS", "FAMILY_ORDER", "MODEL_NAMES", "family_errors", "fix_numbers", "model_steps", "peer_steps",
           "newest_gemms", "published_gemms", "split_table", "targets_table", "tables", "interactive", "problems"]

_MODULES = {
    "tables": ["FAMILY_LABELS", "FAMILY_ORDER", "MODEL_NAMES", "family_errors", "fix_numbers", "model_steps", "peer_steps",
               "newest_gemms", "published_gemms", "split_table", "targets_table"],
    "interactive": [],
    "problems": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
