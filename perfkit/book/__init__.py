"""The book's machinery, one folder per chapter; what the chapters share sits here.

``chapters/NN_name.md`` imports its own folder, ``from perfkit.book import name`` (its experiments,
frame analysis and figures; its ``problems``, ``verdict`` and ``interactive`` modules), and the
core with ``import perfkit as pk``. Shared by the chapters:

- :mod:`~perfkit.book.chapters`: the chapter list (folder → chapter file) and the experiments'
  catalog (``EXPERIMENTS``: name → the module that registers it), the one place each is kept;
- :mod:`~perfkit.book.lazy`: what makes each chapter folder lazy (a name is imported from its
  module when first asked for: importing an experiment module draws nothing);
- :mod:`~perfkit.book.figures`: the figure helpers (``BookFigure``, headings, no-data notes);
  :mod:`~perfkit.book.interactive`: Plotly figures that work without a kernel;
  :mod:`~perfkit.book.widgets`: the ipywidgets explorers;
- :mod:`~perfkit.book.problems` (``check``, ``answer``) on :mod:`~perfkit.book.exercise`;
- :mod:`~perfkit.book.verdict` (findings and their verdicts), :mod:`~perfkit.book.evidence`,
  :mod:`~perfkit.book.frames`, and :mod:`~perfkit.book.scorecard` (the book's table of verdicts);
- :mod:`~perfkit.book.reader`: analysis frames with columns named for a reader.

The experiment machinery the chapters register with (``register``, ``REGISTRY``, ``sweep``, the
recorder, ``run_or_load``) is library code, one layer down: :mod:`perfkit.experiments`.

Nothing here is imported by ``import perfkit``; each module is imported when first asked for.
"""

from __future__ import annotations

import importlib
import importlib.util

from .chapters import CHAPTERS

__all__ = ["CHAPTERS"]


def __getattr__(name: str):
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)  # a chapter folder or a shared module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
