"""Appendix: how good is the model (``chapters/91_model_accuracy.md``): perfkit's predictions against
every recording in ``data/``, per family, with the fit/score split (:mod:`perfkit.validation` and
:mod:`perfkit.book.check_your_model.report` compute it; this folder holds the page's problems)."""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["problems"]

_MODULES = {"problems": []}

__getattr__, __dir__ = lazy(__name__, _MODULES)
