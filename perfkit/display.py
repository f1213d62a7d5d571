"""What a chapter shows besides figures: a styled note, a table, and a one-line device card.

Each function returns an object that a notebook displays by itself (``_repr_html_``) and that
prints as plain text elsewhere, so a chapter cell ends with one call and shows exactly one thing,
whatever matplotlib backend the environment sets.
"""

from __future__ import annotations

import html
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from .devices import DeviceSpec
from .units import GIGA, time_column
from .units import format_rate as _rate

__all__ = ["Note", "Table", "device_card", "note", "show", "table"]

_KINDS = ("note", "tip", "warning")
#: A text column whose cells are all this short (characters) never wraps in a :class:`Table`.
SHORT = 14


def _inline(text: str) -> str:
    """``text`` as HTML, with `backticked` spans as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


@dataclass(frozen=True)
class Note:
    """A styled admonition: a ``title``, a ``text`` and what the reader sees ``instead``.

    ``kind`` is ``"note"``, ``"tip"`` or ``"warning"`` (the book theme's admonition colours).
    """

    text: str
    title: str = "Note"
    instead: str = ""
    kind: str = "note"

    def __post_init__(self):
        for name in ("text", "title", "instead"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string, got {type(getattr(self, name)).__name__}")
        if not self.text.strip():
            raise ValueError("text must say something (it is empty)")
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {self.kind!r}")

    def with_instead(self, instead: str) -> "Note":
        """The same note, saying that ``instead`` is what the reader sees in its place."""
        return Note(self.text, self.title, instead, self.kind)

    def _repr_html_(self) -> str:
        body = f"<p>{_inline(self.text)}</p>"
        if self.instead:
            body += f"<p><strong>Instead:</strong> {_inline(self.instead)}</p>"
        return (f'<div class="admonition {self.kind} perfkit-note">'
                f'<p class="admonition-title">{html.escape(self.title)}</p>{body}</div>')

    def __str__(self) -> str:
        lines = [f"{self.title}: {self.text}"] + ([f"Instead: {self.instead}"] if self.instead else [])
        return "\n".join(textwrap.fill(line, 79, subsequent_indent="  ") for line in lines)

    def __repr__(self) -> str:
        return str(self)


def show(obj: Any) -> None:
    """Display ``obj`` now, beside a cell's result: in a notebook by its HTML, elsewhere printed."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets, a dependency
        print(obj)
        return
    if get_ipython() is None:
        print(obj)
    else:
        display(obj)


def empty_note(reason: str, *, recording: bool = False, nothing: str = "Nothing to show") -> Note:
    """The note shown in place of a figure or table without data: ``reason`` says why; its title is
    "No recording yet" when ``recording`` is what is missing, else ``nothing``."""
    return Note(reason[:1].upper() + reason[1:], title="No recording yet" if recording else nothing)


def note(text: str, *, title: str = "Note", instead: str = "", kind: str = "note") -> Note:
    """A :class:`Note`: a styled admonition in a notebook, a wrapped paragraph in a terminal."""
    return Note(text, title, instead, kind)


class Table:
    """A DataFrame shown as an HTML table: no index, units in the headers, numbers formatted.

    ``frame`` is the data (kept unchanged, for code that reads it); ``seconds`` maps columns of
    seconds to the unit they are shown in (``{"time_s": "µs"}`` shows ``time (µs)``); ``formats``
    maps a shown column to a format string such as ``"{:.1f}"`` or ``"{:.0%}"``; other float
    columns get ``precision`` decimals, integers thousands separators. ``caption`` goes above.
    """

    def __init__(self, frame: pd.DataFrame, *, formats: Mapping[str, str] | None = None,
                 precision: int = 2, caption: str = "", seconds: Mapping[str, str] | None = None):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        self.frame = frame
        seconds = dict(seconds or {})
        unknown = sorted(set(seconds) - set(map(str, frame.columns)))
        if unknown:
            raise ValueError(f"seconds names columns {unknown} that the frame lacks ({list(frame.columns)})")
        shown = frame.copy()
        for column, unit in seconds.items():
            header, factor = time_column(column, unit)
            shown[column] = shown[column] * factor
            shown = shown.rename(columns={column: header})
        frame = shown
        if not isinstance(precision, int) or isinstance(precision, bool) or not 0 <= precision <= 12:
            raise ValueError(f"precision must be an int from 0 to 12, got {precision!r}")
        formats = dict(formats or {})
        unknown = sorted(set(formats) - set(map(str, frame.columns)))
        if unknown:
            raise ValueError(f"formats names columns {unknown} that the table lacks ({list(frame.columns)})")
        for column, fmt in formats.items():
            if not isinstance(fmt, str) or "{" not in fmt:
                raise ValueError(f"formats[{column!r}] must be a format string such as '{{:.1f}}', got {fmt!r}")
        if not isinstance(caption, str):
            raise TypeError(f"caption must be a string, got {type(caption).__name__}")
        self.shown, self.formats, self.precision, self.caption = frame, formats, precision, caption

    def _cell(self, column: str, value: Any) -> str:
        if isinstance(value, float) and pd.isna(value):
            return "–"
        if column in self.formats:
            return self.formats[column].format(value)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
            return f"{int(value):,}"
        if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"):
            return f"{float(value):,.{self.precision}f}"
        return str(value)

    def rows(self) -> list[list[str]]:
        """The formatted cells, row by row (what both the HTML and the text forms show)."""
        columns = [str(c) for c in self.shown.columns]
        return [[self._cell(c, v) for c, v in zip(columns, row)]
                for row in self.shown.itertuples(index=False, name=None)]

    def _repr_html_(self) -> str:
        columns = [str(c) for c in self.shown.columns]
        rows = self.rows()
        numeric = [pd.api.types.is_numeric_dtype(self.shown[c]) or c in self.formats for c in self.shown.columns]
        # short words (a verdict, a dtype, a unit) never wrap; longer text wraps to fit the column
        short = [max((len(r[i]) for r in rows), default=0) <= SHORT for i in range(len(columns))]
        kinds = ["num" if n else "text short" if sh else "text" for n, sh in zip(numeric, short)]
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f'<td class="{kind}">{html.escape(cell)}</td>' for cell, kind in zip(row, kinds))
            + "</tr>" for row in rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<div class="perfkit-table-wrap"><table class="perfkit-table">{cap}'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")

    def __str__(self) -> str:
        columns = [str(c) for c in self.shown.columns]
        rows = self.rows()
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
        lines += ["  ".join(cell.rjust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(([self.caption] if self.caption else []) + lines)

    def __repr__(self) -> str:
        return str(self)


def table(frame: pd.DataFrame | None, source: Any = None, *, instead: str = "",
          formats: Mapping[str, str] | None = None, precision: int = 2, caption: str = "",
          seconds: Mapping[str, str] | None = None) -> Table | Note:
    """``frame`` as a :class:`Table`: an HTML table without index in a notebook, aligned text elsewhere.

    Its ``caption`` (one line above it) defaults to what it rests on: ``source``. Like a figure function, given no data (``frame``
    None or empty) it returns a :class:`Note` saying why: ``source`` (the :class:`~perfkit.provenance.Source` that :func:`perfkit.run_or_load`
    returned, or a string) is the reason, ``instead`` what the reader sees in its place.
    """
    if frame is None or (isinstance(frame, pd.DataFrame) and not len(frame)):
        if not isinstance(instead, str):
            raise TypeError(f"instead must be a string, got {type(instead).__name__}")
        reason = str(source or "") or ("no data (the frame is None)" if frame is None else "the frame has no rows")
        return empty_note(reason, recording=getattr(source, "kind", None) == "missing").with_instead(instead)
    if not isinstance(caption, str):
        raise TypeError(f"caption must be a string, got {type(caption).__name__}")
    return Table(frame, formats=formats, precision=precision, caption=caption or _caption_of(source),
                 seconds=seconds)


def _caption_of(source: Any) -> str:
    """One line saying what a table rests on: ``source`` (a Source or a string), first letter up."""
    text = str(source or "")
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class DeviceCard:
    """One short line about the device a chapter runs on, and its full description behind a fold."""

    spec: DeviceSpec

    def line(self) -> str:
        """The short line: the device, and where this page's numbers come from."""
        s = self.spec
        if s.kind == "gpu":
            return (f"Running on {s.label} (a GPU, {s.sms} SMs): the experiments run here, now; "
                    "its peaks are the datasheet's.")
        name = s.label if s.label.upper().startswith("CPU") else f"a CPU, {s.label},"
        return (f"Running on {name} with no GPU: GPU figures are drawn from recordings, "
                "published measurements or the model, each labelled; the \"Try it\" cells run here.")

    def _repr_html_(self) -> str:
        s = self.spec
        rows = [("device", s.label, s.sources.get("name", "")),
                ("SMs" if s.kind == "gpu" else "cores", "unknown" if s.sms is None else str(s.sms),
                 s.sources.get("sms", "")),
                ("memory bandwidth", "unknown" if s.mem_bandwidth is None else f"{s.mem_bandwidth / GIGA:,.1f} GB/s",
                 s.sources.get("mem_bandwidth", ""))]
        rows += [(f"peak {d}", _rate(v, "OP" if d == "int8" else "FLOP"), s.sources.get("peaks", ""))
                 for d, v in s.peaks.items()]
        if s.kind != "gpu":  # a CPU's speed is the build machine's, not a reader's: not shown
            rows = rows[:2]
        body = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
                       for a, b, c in rows)
        return (f'<div class="perfkit-device"><p>{html.escape(self.line())}</p>'
                f"<details><summary>Everything perfkit knows about this device</summary>"
                f'<table class="perfkit-table"><thead><tr><th>quantity</th><th>value</th><th>source</th></tr>'
                f"</thead><tbody>{body}</tbody></table></details></div>")

    def __str__(self) -> str:
        return self.line()

    def __repr__(self) -> str:
        return self.line()


def device_card(spec: DeviceSpec) -> DeviceCard:
    """The device a chapter runs on: one short line, the full description folded below it."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (pk.current_device() or pk.device_spec(name)), got {spec!r}")
    return DeviceCard(spec)
