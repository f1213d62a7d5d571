"""What every figure shares: creating it, its heading and caption, time axes, and the no-data line.

The contract of a figure function: it returns the matplotlib ``Figure`` (given ``ax=``, it draws
into that Axes and returns ``ax.figure``); with no data it prints one line ``"No figure: <why>"``
(:func:`no_data`) and returns ``None``. Its caption, the second line of its heading, comes from
the frames it draws (:func:`frame_source`) or from the model it draws.
"""

from __future__ import annotations

import textwrap
from typing import Callable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, LogFormatterSciNotation

from ..provenance import Source, source_of

#: Width of the book's text column, inches: every figure is legible at this width.
WIDTH = 7.5


def new_figure(nrows: int = 1, ncols: int = 1, *, height: float = 4.5, width: float = WIDTH,
               pyplot: bool = True) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure (inches) and its ``nrows × ncols`` Axes, always as a 2-D array.

    ``pyplot=False`` makes a bare :class:`~matplotlib.figure.Figure` that pyplot does not know, so
    a notebook does not display it by itself (widgets show it as a PNG instead).
    """
    if pyplot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(width, height), layout="constrained")
    else:
        fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def single_axes(ax: Axes | None, *, height: float = 4.5, width: float = WIDTH) -> Axes:
    """``ax`` if given, else the Axes of a new one-panel figure of ``width × height`` inches."""
    if ax is None:
        return new_figure(height=height, width=width)[1][0, 0]
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def no_data(frame: pd.DataFrame | None, why: Source | str | None = None) -> bool:
    """Whether ``frame`` is None or has no rows; if so, print one wrapped ``"No figure: <why>"`` line.

    ``why`` (e.g. the missing :class:`~perfkit.provenance.Source` of :func:`perfkit.run_or_load`)
    says why there is no frame.
    """
    _check_source(why, "source")
    if frame is not None and len(frame):
        return False
    if frame is None:
        reason = str(why) if why is not None else "no data (the frame is None)"
    else:
        label = source_of(frame) or why
        reason = "the frame has no rows" + (f" ({label})" if label is not None else "")
    say(f"No figure: {reason}")
    return True


def say(line: str) -> None:
    """Print ``line`` wrapped to the book's 88 columns, continuation lines indented."""
    print(textwrap.fill(line, 88, subsequent_indent="  ", break_on_hyphens=False))


def frame_source(frame: pd.DataFrame, source: Source | str | None, *, param: str = "source") -> Source | str:
    """Where ``frame``'s numbers come from: its own metadata (``attrs["meta"]``), else ``source``.

    ``ValueError`` if ``source`` contradicts the frame's metadata (a mislabelled figure) or if
    neither exists; ``param`` names the argument that supplies ``source`` in that message.
    """
    _check_source(source, param)
    own = source_of(frame)
    if own is None:
        if source is None:
            raise ValueError(f"the frame carries no metadata (frame.attrs['meta']), so pass {param}= "
                             "(a perfkit.Source or a string) to say where its numbers come from")
        return source
    if source is not None and str(source) != str(own):
        raise ValueError(f"{param}={str(source)!r} contradicts the frame's own metadata ({own}); "
                         f"leave {param} out to use the frame's")
    return own


def named_frames(frames: Mapping[str, pd.DataFrame | None] | None, sources: Mapping[str, Source | str] | None = None,
                 *, param: str = "frames", keep: Callable[[pd.DataFrame], pd.DataFrame] | None = None
                 ) -> tuple[dict[str, pd.DataFrame], dict[str, Source | str]]:
    """The frames of a ``name → frame`` mapping worth drawing, and the source of each.

    ``keep`` selects the rows to draw from a frame; frames that are None or left with no rows are
    skipped. ``sources`` (name → source) is needed only for frames without metadata. ``TypeError``
    if ``frames`` is not a mapping; ``ValueError`` if ``sources`` names a frame not in it.
    """
    if frames is None:
        return {}, {}
    if not isinstance(frames, Mapping):
        raise TypeError(f"{param} must be a mapping of name → DataFrame or None, got {type(frames).__name__}")
    sources = dict(sources or {})
    unknown = set(sources) - set(frames)
    if unknown:
        raise ValueError(f"sources names {sorted(unknown)}, which are not in {param} ({list(frames)})")
    parts = {}
    for name, f in frames.items():
        if f is not None and not isinstance(f, pd.DataFrame):
            raise TypeError(f"{param}[{name!r}] must be a DataFrame or None, got {type(f).__name__}")
        f = f if f is None or keep is None else keep(f)
        if f is not None and len(f):
            parts[name] = f
    labels = {name: frame_source(f, sources.get(name), param=f"sources[{name!r}]") for name, f in parts.items()}
    return parts, labels


def legend_name(source: Source | str, default: str) -> str:
    """A short legend name for a series: its source's device, else ``default``."""
    return getattr(source, "device", "") or default


def heading(target: Figure | Axes, title: str, source: Source | str) -> None:
    """Set ``title`` and below it the caption ``source`` (wrapped to fit): a Figure's suptitle or an Axes' title."""
    _check_source(source, "source")
    text = f"{title}\n{source}"
    if isinstance(target, Figure):
        target.suptitle(text, fontsize=10, wrap=True)
    else:
        target.set_title(text, fontsize=9, wrap=True)


class _LogSeconds(LogFormatterSciNotation):
    """Minor ticks of a log axis of seconds: labelled where matplotlib would label them, in µs/ms/s."""

    _seconds = EngFormatter(unit="s")

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self._seconds(x) if super().__call__(x, pos) else ""


def time_axis(ax: Axes, label: str = "duration", axis: str = "y", *, log: bool = False) -> None:
    """Make ``ax``'s ``axis`` (``"x"`` or ``"y"``) an axis of seconds with SI-prefixed ticks (µs, ms).

    ``label`` names the axis (the unit is in the ticks); ``log`` makes it logarithmic.
    """
    which, set_scale = {"x": (ax.xaxis, ax.set_xscale), "y": (ax.yaxis, ax.set_yscale)}[axis]
    if log:  # first: setting the scale resets the formatters
        set_scale("log")
        which.set_minor_formatter(_LogSeconds())
    which.set_major_formatter(EngFormatter(unit="s"))
    which.set_label_text(label)


def _check_source(source: object, param: str) -> None:
    if source is not None and not isinstance(source, (Source, str)):
        raise TypeError(f"{param} must be a perfkit.Source, a string or None, got {type(source).__name__}")
