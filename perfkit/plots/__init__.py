"""Figures of models and of experiment results (matplotlib only; nothing here runs an experiment).

One module per chapter: :mod:`~perfkit.plots.background` (rooflines and waves),
:mod:`~perfkit.plots.gemm` and :mod:`~perfkit.plots.timers`. Every figure function

- returns a :class:`~perfkit.plots._common.BookFigure`, a matplotlib ``Figure`` that a notebook
  shows as a PNG when a cell returns it, whatever the matplotlib backend (pyplot does not know
  it, so it is shown exactly once); given ``ax=`` (one-panel figures), it draws into that Axes
  and returns ``ax.figure``;
- says where its numbers come from in the second line of its heading: an experiment figure
  ``plot_x(frame, source=None)`` uses the frame's own metadata (``frame.attrs["meta"]``, see
  :func:`perfkit.source_of`) and needs ``source`` only for a hand-built frame without metadata or
  to say why the frame is None; a model figure names the model (see
  :func:`perfkit.provenance.modelled`) unless given ``source``;
- given no data (a None or empty frame), returns a :class:`~perfkit.display.Note` (a styled
  admonition) saying why, so a chapter never shows a made-up figure; the keyword ``instead=``
  names what the reader sees in its place (the model's prediction, a published measurement);
- where a published counterpart exists (``published=`` or a ``name → frame`` mapping, see
  :func:`perfkit.provenance.published_counterparts`), draws it beside ours ("then vs now"),
  each series labelled by its own source.

Durations are plotted in seconds, with SI-prefixed ticks (µs, ms).
"""

from __future__ import annotations

from .background import plot_roofline, plot_tile_waves, plot_wave_model, plot_waves
from .gemm import *  # noqa: F401,F403  (the GEMM chapter's figures: see perfkit.plots.gemm.__all__)
from .timers import *  # noqa: F401,F403  (the timing appendix's figures)
from . import advisor as _advisor, gemm as _gemm, timers as _timers, conv as _conv, fc as _fc, fusion as _fusion, memory as _memory, rnn as _rnn
from .conv import *  # noqa: F401,F403  (the convolution chapter's figures)
from .fc import *  # noqa: F401,F403  (the FC chapter's figures: see perfkit.plots.fc.__all__)
from .rnn import *  # noqa: F401,F403  (the RNN chapter's figures: see perfkit.plots.rnn.__all__)
from .memory import *  # noqa: F401,F403  (the memory-limited chapter's figures)
from .fusion import *  # noqa: F401,F403  (fusion and a small network's time budget)
from .advisor import *  # noqa: F401,F403  (the advisor chapter's figures)

__all__ = ["plot_roofline", "plot_tile_waves", "plot_wave_model", "plot_waves"]
__all__ += _gemm.__all__ + _timers.__all__ + _fc.__all__ + _rnn.__all__ + _conv.__all__ + _memory.__all__ + _fusion.__all__ + _advisor.__all__
