"""The book's machinery, one folder per chapter; what the chapters share sits here.

``chapters/NN_name.md`` imports its own folder, ``from perfkit.book import name`` (its experiments,
frame analysis and figures; its ``problems``, ``verdict`` and ``interactive`` modules), and the
core with ``import perfkit as pk``. Shared by the chapters:

- :mod:`~perfkit.book.chapters`: the chapter list (folder → chapter file), the one place it is kept;
- :mod:`~perfkit.book.registry`: the experiment registry (``register``, ``REGISTRY``, ``get``);
  :mod:`~perfkit.book.measure`: what experiments share (devices, sweeps, rows);
  :mod:`~perfkit.book.record`: the recorder that writes experiments' frames to ``data/``;
- :mod:`~perfkit.book.figures`: the figure helpers (``BookFigure``, headings, no-data notes);
  :mod:`~perfkit.book.interactive`: Plotly figures that work without a kernel;
  :mod:`~perfkit.book.widgets`: the ipywidgets explorers;
- :mod:`~perfkit.book.problems` (``check``, ``answer``) on :mod:`~perfkit.book.exercise`;
- :mod:`~perfkit.book.verdict` (findings and their verdicts), :mod:`~perfkit.book.evidence`,
  :mod:`~perfkit.book.frames`, and :mod:`~perfkit.book.scorecard` (the book's table of verdicts);
- :mod:`~perfkit.book.reader`: analysis frames with columns named for a reader.

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
