"""What every figure shares: creating it, its heading and caption, time axes, and the no-data note.

The contract of a figure function (:func:`book_figure` wraps each one): it returns a
:class:`BookFigure`, a matplotlib ``Figure`` that a notebook shows as a PNG when it is a cell's
result, whatever backend the environment sets, and that pyplot does not know (so no backend shows
it a second time); given ``ax=``, it draws into that Axes and returns ``ax.figure``. With no data it
returns a :class:`~perfkit.display.Note` saying why (:func:`no_data`), and ``instead=`` names what
the reader sees in its place. Its caption, the second line of its heading, comes from the frames
it draws (:func:`frame_source`) or from the model it draws.
"""

from __future__ import annotations

import functools
import io
import math
import textwrap
from typing import Callable, Iterable, Mapping

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, LogFormatterSciNotation

from ..devices import device_spec
from ..display import Note, empty_note, show
from ..meta import FrameMeta
from ..provenance import Source, modelled, source_of

#: Width of the book's text column, inches: every figure is legible at this width.
WIDTH = 7.5
#: Pixels per inch of a figure's PNG: 7.5 inches make 750 pixels (a tight box adds or trims a few).
DPI = 100
#: Width of the text column in a 1280 px wide window, CSS px (measured in the built book): a PNG up
#: to that wide is shown at its own size, a wider one scaled down to it.
COLUMN_PX = 760
#: The least type a room reads from a projector: CSS px as shown in a 1280 px wide window.
MIN_FONT_PX = 12
#: The least type of a figure, points. A PNG shows ``pt × DPI/72`` px, times ``COLUMN_PX / width``
#: when it is wider than the column: 9 pt is 12.5 px, at least :data:`MIN_FONT_PX` in any PNG up to
#: :data:`MAX_PNG_PX` wide. Every text a figure draws (titles, labels, ticks, legends, annotations,
#: the caption) is at least this.
MIN_FONT_PT = 9.0
#: The widest PNG whose :data:`MIN_FONT_PT` type still shows at :data:`MIN_FONT_PX` in the column.
MAX_PNG_PX = int(MIN_FONT_PT * DPI / 72 * COLUMN_PX / MIN_FONT_PX)


def shown_px(points: float, png_width: int, dpi: float = DPI) -> float:
    """The size, in CSS px of a 1280 px window, of ``points`` type in a PNG ``png_width`` px wide."""
    return points * dpi / 72 * min(1.0, COLUMN_PX / png_width)


class BookFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG when it is a notebook cell's result.

    pyplot does not know it, so the environment's backend (``MPLBACKEND=Agg`` on a headless
    server, the inline backend in Jupyter) never shows it by itself: a figure appears exactly
    once, where the cell returns it.
    """

    #: What the figure rests on, one entry per :func:`heading`: (panel title, source text).
    captions: list

    def to_png(self, dpi: float = DPI) -> bytes:
        """The figure as PNG bytes (``dpi`` pixels per inch, trimmed to what is drawn), and under it,
        as a strip of its own (so no legend or label of the figure can land on it), its caption."""
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", pad_inches=_PAD_IN, facecolor="white")
        text = caption_text(getattr(self, "captions", []))
        if not text:
            return buf.getvalue()
        buf.seek(0)
        image = mpimg.imread(buf, format="png")
        strip = _caption_strip(text, width_px=image.shape[1], dpi=dpi)
        out = io.BytesIO()
        mpimg.imsave(out, np.vstack([image[..., :3], strip[..., :3]]), format="png")
        return out.getvalue()

    def _repr_png_(self) -> bytes:
        return self.to_png()

    def draw(self, renderer) -> None:
        """Draw, a log axis's default labels written as plain numbers where they are short."""
        for ax in self.axes:
            for axis in (ax.xaxis, ax.yaxis):
                if axis.get_scale() != "log":
                    continue
                for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                                 (axis.get_minor_formatter, axis.set_minor_formatter)):
                    if type(get()) is LogFormatterSciNotation:
                        put(_PlainLog.like(get()))
        super().draw(renderer)


class _PlainLog(LogFormatterSciNotation):
    """A log axis's labels as plain numbers (0.001 … 99,999), where matplotlib writes powers of ten:
    an exponent is a superscript, 0.7 of the label's type, under :data:`MIN_FONT_PT`."""

    @classmethod
    def like(cls, other: LogFormatterSciNotation) -> "_PlainLog":
        return cls(base=other._base, labelOnlyBase=other.labelOnlyBase, minor_thresholds=other.minor_thresholds,
                   linthresh=other._linthresh)

    def __call__(self, x: float, pos: int | None = None) -> str:
        label = super().__call__(x, pos)
        return f"{x:g}" if label and 1e-3 <= abs(x) < 1e5 else label


def _caption_strip(text: str, *, width_px: int, dpi: float) -> np.ndarray:
    """``text`` in :data:`MIN_FONT_PT` grey type, left-aligned on a white strip ``width_px`` wide:
    RGB(A) floats."""
    strip = caption_figure(text, width_px=width_px, dpi=dpi)
    buf = io.BytesIO()
    strip.savefig(buf, format="png", dpi=dpi, facecolor="white")
    buf.seek(0)
    image = mpimg.imread(buf, format="png")
    if image.shape[1] != width_px:  # rounding of inches to pixels: pad or trim to the figure's width
        pad = np.ones((image.shape[0], max(0, width_px - image.shape[1]), image.shape[2]), image.dtype)
        image = np.hstack([image, pad])[:, :width_px]
    return image


def caption_figure(text: str, *, width_px: int, dpi: float = DPI) -> Figure:
    """The strip under a figure that holds its caption ``text`` (lines of :data:`CAPTION_CHARS`),
    ``width_px`` wide."""
    lines = text.count("\n") + 1
    strip = Figure(figsize=(width_px / dpi, (_PAD_IN + _CAPTION_LINE_IN * lines)), dpi=dpi)
    FigureCanvasAgg(strip)
    strip.text(4 / width_px, 0.5, text, ha="left", va="center", fontsize=MIN_FONT_PT, color="0.35",
               linespacing=_CAPTION_SPACING)
    return strip


#: White around what a figure draws, inches (matplotlib's 0.1 is a page's worth over a chapter's figures).
_PAD_IN = 0.05
#: Spacing of a caption's lines (in font sizes, times matplotlib's 1.2), and a line's height in inches.
_CAPTION_SPACING = 1.1
_CAPTION_LINE_IN = MIN_FONT_PT * _CAPTION_SPACING * 1.2 / 72


def new_figure(nrows: int = 1, ncols: int = 1, *, height: float = 4.5,
               width: float = WIDTH) -> tuple[BookFigure, np.ndarray]:
    """A constrained-layout :class:`BookFigure` (inches) and its ``nrows × ncols`` Axes, always 2-D."""
    fig = BookFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # draws off-screen (text extents, PNG) with no pyplot and no backend
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def book_figure(fn: Callable) -> Callable:
    """Give figure function ``fn`` the keyword ``instead``: what the reader sees where ``fn`` has
    no data to draw (e.g. ``"the model's prediction for an H100, drawn above"``). When ``fn``
    returns a :class:`~perfkit.display.Note`, the note says it."""
    @functools.wraps(fn)
    def draw(*args, instead: str = "", **kwargs):
        if not isinstance(instead, str):
            raise TypeError(f"instead must be a string naming what is shown in the figure's place, got {instead!r}")
        result = fn(*args, **kwargs)
        if isinstance(result, Note) and instead:
            result = result.with_instead(instead)
        return result

    return draw


def single_axes(ax: Axes | None, *, height: float = 4.5, width: float = WIDTH) -> Axes:
    """``ax`` if given, else the Axes of a new one-panel figure of ``width × height`` inches."""
    if ax is None:
        return new_figure(height=height, width=width)[1][0, 0]
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def no_data(frame: pd.DataFrame | None, why: Source | str | None = None) -> Note | None:
    """None when ``frame`` has rows; else the :class:`~perfkit.display.Note` saying why there is no figure.

    ``why`` (e.g. the missing :class:`~perfkit.provenance.Source` of :func:`perfkit.run_or_load`)
    says why there is no frame.
    """
    _check_source(why, "source")
    if frame is not None and len(frame):
        return None
    if frame is None:
        reason = str(why) if why is not None else "no data (the frame is None)"
    else:
        label = source_of(frame) or why
        reason = "the frame has no rows" + (f" ({label})" if label is not None else "")
    return nothing_drawn(reason, recording=isinstance(why, Source) and why.kind == "missing")


def nothing_drawn(reason: str, *, recording: bool = False) -> Note:
    """The note a figure function returns instead of a figure: ``reason`` says why."""
    return empty_note(reason, recording=recording, nothing="Nothing to draw")


def say(text: str, *, title: str, instead: str = "") -> None:
    """Show a short :class:`~perfkit.display.Note` beside a figure (printed outside a notebook)."""
    show(Note(text, title=title, instead=instead))


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


def shared_legend(fig: Figure, axes: Iterable[Axes], *, ncol: int | None = None, frameon: bool = False) -> None:
    """One legend below every panel of ``fig`` (the panels share their series), each label once, so
    that no legend covers data; ``ncol`` columns (default: up to 4), fewer where they would not fit
    the figure's width."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if entries:
        ncol = min(len(entries), 4) if ncol is None else ncol
        # no more columns than fit the figure's width (a wider legend widens the PNG, which the column
        # then shrinks): each as wide as the longest label, with its handle and the gap to the next
        column_pt = (0.58 * max(len(label) for label in entries) + 4.8) * MIN_FONT_PT
        ncol = max(1, min(ncol, int(fig.get_figwidth() * 72 // column_pt)))
        fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=ncol,
                   fontsize=MIN_FONT_PT, frameon=frameon)


def category_ticks(ax: Axes, labels: list[str], *, axis: str = "x", rotation: float = 90) -> None:
    """Ticks at 0, 1, … on ``ax``'s ``axis`` (``"x"`` or ``"y"``), labelled with ``labels`` in
    :data:`MIN_FONT_PT` type: every one while they fit side by side, else every k-th (each tick still
    marked), so that no label covers the next."""
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    fig = ax.figure
    box = ax.get_position()
    length_px = (box.width * fig.get_figwidth() if axis == "x" else box.height * fig.get_figheight()) * fig.dpi
    line_px = MIN_FONT_PT * 1.3 * fig.dpi / 72  # a label's height across the axis, with a gap
    step = max(1, math.ceil(len(labels) * line_px / max(length_px, 1.0)))
    shown = [label if i % step == 0 else "" for i, label in enumerate(labels)]
    if axis == "x":
        ax.set_xticks(range(len(labels)), shown, rotation=rotation, fontsize=MIN_FONT_PT)
    else:
        ax.set_yticks(range(len(labels)), shown, fontsize=MIN_FONT_PT)


def legend_name(source: Source | str, default: str) -> str:
    """A short legend name for a series: its source's device, else ``default``."""
    return getattr(source, "device", "") or default


def heading(target: Figure | Axes, title: str, source: Source | str) -> None:
    """Set ``title`` (a Figure's suptitle or an Axes' title) and note ``source``: on a
    :class:`BookFigure` it goes to the one caption under the figure, elsewhere below the title."""
    _check_source(source, "source")
    fig = target if isinstance(target, Figure) else target.figure
    if isinstance(fig, BookFigure):
        fig.captions = [*getattr(fig, "captions", []), (title, str(source))]
        text = title
    else:
        text = f"{title}\n{source}"
    if isinstance(target, Figure):
        target.suptitle(text, fontsize=10, wrap=True)
    else:
        target.set_title(text, fontsize=9, wrap=True)


#: Characters per caption line at :data:`MIN_FONT_PT` across a 7.5 in figure.
CAPTION_CHARS = 100


def caption_text(captions: Iterable[tuple[str, str]]) -> str:
    """The caption under a figure: its sources, each once, each prefixed by its panel's title
    when the panels rest on different sources; wrapped to the column."""
    captions = [(t, s) for t, s in captions if s]
    sources = list(dict.fromkeys(s for _, s in captions))
    if len(sources) <= 1:
        parts = sources
    else:
        parts = list(dict.fromkeys(f"{t}: {s}" if t else s for t, s in captions))
    text = "; ".join(p.rstrip(".") for p in parts)
    return "\n".join(textwrap.wrap(text, CAPTION_CHARS))


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


def published_label(frame: pd.DataFrame, source: Source | str | None) -> tuple[str, bool]:
    """(caption, is the model's): a published frame's source and how its publisher timed, or the
    model of the GPUs a model-only frame names (``attrs["model_of"]``)."""
    if source is not None or source_of(frame) is not None:
        label = frame_source(frame, source)
        timing = FrameMeta.of(frame).timing
        return (f"{label}; timed: {timing}" if timing else str(label)), False
    names = [n.strip() for n in str(frame.attrs.get("model_of", "")).split(",") if n.strip()]
    if not names:
        raise ValueError("the frame carries neither metadata nor attrs['model_of']: pass source=")
    if len(names) == 1:
        return str(modelled(device_spec(names[0]))), True
    return str(Source("model", ", ".join(names), detail="achievable bandwidth (perfkit.achievable_ceilings)")), True
