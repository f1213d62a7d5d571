"""What every interactive figure shares: the wrapper that renders it, and the slider and menu
that move it.

An interactive figure is a Plotly figure whose every state was computed in Python, by the same
perfkit functions as the static figures, when the figure was built. The page only switches
between those states (Plotly's ``update`` method), so its sliders and menus work in a static
page, with no kernel, and there is no second implementation of any model in JavaScript.

The page loads Plotly's *basic* bundle (scatter, bar and pie; about 1 MB) from jsdelivr, at the
version of the ``plotly`` Python package that built the figure.
"""

from __future__ import annotations

import html
import textwrap
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs_version

from .._validate import positive_int, sequence_of
from ..provenance import Source

#: Plotly's basic bundle, at the version the ``plotly`` package renders for.
PLOTLY_JS_URL = ("https://cdn.jsdelivr.net/npm/plotly.js-basic-dist-min@"
                 f"{get_plotlyjs_version()}/plotly-basic.min.js")
#: An interactive figure's HTML must stay under this many bytes (its page weight, JS excluded).
MAX_HTML_BYTES = 300_000
#: Width of the book's text column, CSS px, in a 1280 px wide window: a figure's div is as wide
#: (measured in the built book), and Plotly draws at one pixel per CSS pixel.
WIDTH_PX = 760
#: The least type of an interactive figure, px as shown in that column: legible from the back of a
#: room on a projector. Every font of every figure (titles, axes, ticks, legends, annotations,
#: sliders, menus) is at least this; Plotly's own default is 12.
MIN_FONT_PX = 12
CONFIG = {"displaylogo": False, "responsive": True,
          "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}
SIGNIFICANT_DIGITS = 5


@dataclass(frozen=True)
class State:
    """One position of a slider or menu: its ``label``, the changing properties of each trace
    (``traces[i]`` updates trace ``i``, e.g. ``{"y": [...], "text": [...]}``) and a ``layout``
    update (e.g. ``{"annotations[0].text": "..."}``; :func:`retitle` for the title and its footnote)."""

    label: str
    traces: Sequence[Mapping[str, Any]]
    layout: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class InteractiveFigure:
    """A Plotly figure for the page: ``figure``, its ``alt`` text (what a reader who cannot see it
    needs to know) and a stable ``name`` (the HTML id). Displays itself in a notebook and in the
    built book; :meth:`to_html` is that HTML."""

    figure: go.Figure
    alt: str
    name: str

    def __post_init__(self):
        if not isinstance(self.figure, go.Figure):
            raise TypeError(f"figure must be a plotly.graph_objects.Figure, got {type(self.figure).__name__}")
        if not isinstance(self.alt, str) or len(self.alt.strip()) < 20:
            raise ValueError(f"alt must describe the figure in a sentence (≥ 20 characters), got {self.alt!r}")
        if not isinstance(self.name, str) or not re.fullmatch(r"[a-z][a-z0-9-]*", self.name):
            raise ValueError(f"name must be lower-case letters, digits and '-', got {self.name!r}")

    @property
    def states(self) -> list[str]:
        """The labels of every slider step and menu button, in order."""
        layout = self.figure.layout
        labels = [s.label for slider in layout.sliders or () for s in slider.steps]
        labels += [b.label for menu in layout.updatemenus or () for b in menu.buttons]
        return labels

    def to_html(self) -> str:
        """The figure as an HTML fragment: a ``<div role="figure">`` with its alt text, the script tag
        of Plotly's basic bundle, and the figure."""
        body = self.figure.to_html(full_html=False, include_plotlyjs=PLOTLY_JS_URL, div_id=self.name,
                                   config=CONFIG, default_width="100%",
                                   default_height=f"{self.figure.layout.height or 460}px")
        alt = html.escape(self.alt, quote=True)
        return (f'<div class="perfkit-interactive" role="figure" aria-label="{alt}">\n{body}\n'
                f'<noscript>{alt}</noscript></div>')

    def _repr_html_(self) -> str:
        return self.to_html()

    def show(self) -> None:
        """Display the figure in a notebook (or print its alt text outside one)."""
        try:
            from IPython.display import HTML, display
        except ImportError:  # pragma: no cover - IPython comes with every notebook
            print(self.alt)
            return
        display(HTML(self.to_html()))


def rounded(values: Any, digits: int = SIGNIFICANT_DIGITS) -> list:
    """``values`` as a list of floats rounded to ``digits`` significant digits (None for NaN),
    to keep the page small; strings and None pass through."""
    out = []
    for v in values:
        if v is None or isinstance(v, str):
            out.append(v)
            continue
        v = float(v)
        if math.isnan(v) or math.isinf(v):
            out.append(None)
        elif v == 0:
            out.append(0.0)
        else:
            out.append(round(v, digits - 1 - int(math.floor(math.log10(abs(v))))))
    return out


def heading(title: str, source: Source | str | Sequence[Source | str]) -> dict:
    """Layout entries for a figure's heading: its ``title`` (what it shows, nothing else) and a
    ``footnote``: where the numbers come from, one source (wrapped to the column) or a list of them,
    each said once on a line of its own. :func:`with_slider` and :func:`with_menu` draw the footnote
    under the figure, in :data:`MIN_FONT_PX` grey type (:func:`footnote_px` says how tall it is)."""
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {type(title).__name__}")
    return {"title": {"text": html.escape(title), "x": 0.0, "xanchor": "left", "font": {"size": TITLE_PX}},
            "footnote": footnote(source)}


def retitle(title: str, source: Source | str | Sequence[Source | str]) -> dict:
    """A :class:`State`'s layout update that changes the title and its footnote (see :func:`heading`)."""
    entries = heading(title, source)
    return {"title.text": entries["title"]["text"], "footnote": entries["footnote"]}


def footnote(source: Source | str | Sequence[Source | str]) -> str:
    """The text of a figure's source footnote: ``source``'s lines, wrapped to :data:`SOURCE_CHARS`,
    joined by ``<br>`` (Plotly never wraps a text)."""
    if isinstance(source, (Source, str)):
        sources = [str(source)]
    elif isinstance(source, Sequence) and source and all(isinstance(s, (Source, str)) for s in source):
        sources = list(dict.fromkeys(map(str, source)))
    else:
        raise TypeError(f"source must be a perfkit.Source, a string or a list of them, got {source!r}")
    return "<br>".join(html.escape(line) for s in sources for line in _wrapped(s))


def _wrapped(text: str) -> list[str]:
    """``text`` in lines of at most :data:`SOURCE_CHARS`, broken after its "; " where it can (a
    caption's sources each whole), else between words."""
    lines: list[str] = []
    for part in text.split("; "):
        if lines and len(lines[-1]) + 2 + len(part) <= SOURCE_CHARS:
            lines[-1] += "; " + part
        else:
            if lines:
                lines[-1] += ";"
            lines += textwrap.wrap(part, SOURCE_CHARS) or [""]
    return lines


def footnote_px(text: str) -> int:
    """Pixels a footnote of ``text`` (from :func:`footnote`) takes under a figure, with the gap above it:
    what a figure's top margin gives up to its bottom margin once its title no longer holds the sources."""
    return _GAP_PX + _LINE_PX * (text.count("<br>") + 1)


#: Characters of a footnote line that fit the text column at :data:`MIN_FONT_PX` (wide fonts included).
SOURCE_CHARS = 100
#: A title's type, px.
TITLE_PX = 15
#: Pixels of one footnote line (Plotly sets lines 1.3 em apart) and of the gap above the footnote.
_LINE_PX, _GAP_PX = 16, 10
#: The footnote's colour, and its name among the layout's annotations (:func:`footnote_of`).
FOOTNOTE_COLOUR, FOOTNOTE = "#555555", "source"


def footnote_of(figure: InteractiveFigure | go.Figure) -> str:
    """The text of ``figure``'s source footnote as it opens ("" without one)."""
    fig = figure.figure if isinstance(figure, InteractiveFigure) else figure
    return next((a.text or "" for a in fig.layout.annotations or () if a.name == FOOTNOTE), "")


def _place_footnote(fig: go.Figure, texts: Sequence[str]) -> dict:
    """Add :func:`footnote_px` of the longest of ``texts`` to the bottom margin (the height stays: the
    top margin the title's sources no longer take is the room; each figure sets it) and return the
    footnote annotation that fills it: at the figure's bottom edge, left-aligned with its left edge.
    In paper coordinates, so the margins must hold what they frame: Plotly widens a margin too small
    for a slider, a menu or a legend, and that would move the footnote onto it."""
    height = fig.layout.height or 460
    m = fig.layout.margin
    top, bottom = (80 if m.t is None else m.t), (60 if m.b is None else m.b) + max(footnote_px(t) for t in texts)
    left, right = (60 if m.l is None else m.l), (20 if m.r is None else m.r)
    plot = max(height - top - bottom, 1)
    fig.update_layout(margin={"t": top, "b": bottom})
    if fig.layout.title.y is None:  # hung from the top edge: its one line never grows into the plot
        fig.update_layout(title={"yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 12}})
    return {"name": FOOTNOTE, "text": texts[0], "xref": "paper", "yref": "paper", "showarrow": False,
            "x": _edge(left, right), "xanchor": "left",
            "y": -(bottom - 4) / plot, "yanchor": "bottom", "align": "left",
            "font": {"size": MIN_FONT_PX, "color": FOOTNOTE_COLOUR}}


def _edge(left: float, right: float) -> float:
    """The paper x of the figure's left edge (6 px in) when its margins are ``left`` and ``right`` px."""
    return -(left - 6) / max(WIDTH_PX - left - right, 1)


def _footnoted(fig: go.Figure, note: str | None, states: Sequence[State]) -> list[State]:
    """Draw the footnote of the layout (``note``) or of the states (their layout's ``"footnote"``) on
    ``fig``, as its last annotation, and turn each state's ``"footnote"`` into an update of it."""
    texts = [t for t in [note, *(s.layout.get("footnote") for s in states)] if t is not None]
    if not texts:
        return list(states)
    base = list(fig.layout.annotations or ())
    index = max([len(base)] + [len(s.layout["annotations"]) for s in states if "annotations" in s.layout])
    fixed = [a.to_plotly_json() for a in base] + [{"text": "", "showarrow": False}] * (index - len(base))
    entry = _place_footnote(fig, texts)
    fig.update_layout(annotations=[*fixed, entry])
    out = []
    for s in states:
        layout = dict(s.layout)
        text = layout.pop("footnote", entry["text"] if "annotations" in layout else None)
        if "annotations" in layout:
            own = list(layout["annotations"])
            layout["annotations"] = [*own, *fixed[len(own):], {**entry, "text": text}]
        elif text is not None:
            layout[f"annotations[{index}].text"] = text
        out.append(State(s.label, s.traces, layout))
    return out


def _check_states(states: Sequence[State], n_traces: int, param: str) -> None:
    if not states:
        raise ValueError(f"{param} needs at least two states, got none")
    if len(states) < 2:
        raise ValueError(f"{param} needs at least two states to move between, got {len(states)}")
    keys = None
    for s in states:
        if not isinstance(s, State):
            raise TypeError(f"each of {param} must be a State, got {type(s).__name__}")
        if len(s.traces) != n_traces:
            raise ValueError(f"state {s.label!r} updates {len(s.traces)} traces; the figure has {n_traces}")
        these = [tuple(sorted(t)) for t in s.traces]
        if keys is not None and these != keys:
            raise ValueError(f"state {s.label!r} updates properties {these}, the first state {keys}: "
                             "every state must update the same ones")
        keys = these


def _update_args(state: State, fig: go.Figure) -> list:
    """Plotly ``update`` arguments: only the traces the state touches (a null would erase a
    property), each property a trace does not set restated from the figure's own trace."""
    touched = [i for i, t in enumerate(state.traces) if t]
    if not touched:
        return [{}, dict(state.layout)]
    props = sorted({k for i in touched for k in state.traces[i]})
    data = {k: [state.traces[i][k] if k in state.traces[i] else fig.data[i][k] for i in touched]
            for k in props}
    return [data, dict(state.layout), touched]


def _apply(fig: go.Figure, state: State) -> None:
    for trace, update in zip(fig.data, state.traces):
        trace.update(dict(update))
    if state.layout:
        fig.update_layout(dict(state.layout))


def _base(traces: Sequence[Any], layout: Mapping[str, Any] | None) -> tuple[go.Figure, str | None]:
    """The figure of ``traces`` with the book's layout and ``layout``; and its footnote, if it has one."""
    layout = dict(layout or {})
    note = layout.pop("footnote", None)
    fig = go.Figure(data=list(traces))
    fig.update_layout(template="plotly_white", height=460, margin={"l": 60, "r": 20, "t": 80, "b": 60},
                      legend={"orientation": "h", "y": -0.25}, font={"size": MIN_FONT_PX},
                      title={"x": 0.0, "xanchor": "left", "font": {"size": TITLE_PX}})
    if layout:
        fig.update_layout(layout)
    # Plotly labels a log axis's 2s and 5s in 0.75 of the tick font: below the least type
    fig.for_each_xaxis(_major_log_labels)
    fig.for_each_yaxis(_major_log_labels)
    return fig, note


def _major_log_labels(axis: Any) -> None:
    if axis.type == "log" and axis.minorloglabels is None:
        axis.minorloglabels = "none"


def _controlled(traces: Sequence[Any], states: Sequence[State], active: int,
                layout: Mapping[str, Any] | None) -> tuple[go.Figure, list[dict]]:
    """The figure opened at ``states[active]``, and one Plotly ``update`` entry per state."""
    fig, note = _base(traces, layout)
    _check_states(states, len(fig.data), "states")
    if not 0 <= active < len(states):
        raise ValueError(f"active must index states (0 … {len(states) - 1}), got {active}")
    states = _footnoted(fig, note, states)
    _apply(fig, states[active])
    return fig, [{"method": "update", "label": s.label, "args": _update_args(s, fig)} for s in states]


def with_slider(traces: Sequence[Any], states: Sequence[State], *, prefix: str, active: int = 0,
                layout: Mapping[str, Any] | None = None) -> go.Figure:
    """A figure of ``traces`` with a slider over ``states``; it opens at ``states[active]``.

    ``prefix`` labels the slider's current value (e.g. ``"N = "``). ``layout`` may hold a
    ``"footnote"`` (from :func:`heading`), and so may each state's: it is drawn under the figure, in
    :func:`footnote_px` added to the bottom margin (a figure takes it from its top margin).
    """
    fig, steps = _controlled(traces, states, active, layout)
    fig.update_layout(sliders=[{"active": active, "steps": steps, "pad": {"t": 50},
                                "currentvalue": {"prefix": prefix}}])
    return fig


def distinct_ints(name: str, values: Any, least: int = 1, low: int = 1) -> list[int]:
    """``values`` as a list of at least ``least`` distinct integers ≥ ``low`` (a slider's values);
    ``ValueError``/``TypeError`` naming ``name`` otherwise."""
    items = sequence_of(name, values, positive_int)
    if len(items) < least or len(set(items)) != len(items) or min(items) < low:
        raise ValueError(f"{name} must list at least {least} distinct integers ≥ {low}, got {values!r}")
    return items


def slider_index(active: Any, values: Sequence[int], default: int) -> int:
    """The state a slider opens at: ``active`` (an index into ``values``), or, when it is ``None``, the
    value closest to ``default``."""
    if active is None:
        return min(range(len(values)), key=lambda i: abs(values[i] - default))
    if isinstance(active, bool) or not isinstance(active, int) or not 0 <= active < len(values):
        raise ValueError(f"active must index the slider's values (0 … {len(values) - 1}), got {active!r}")
    return active


def bars_with_slider(traces: Sequence[Any], states: Sequence[State], *, prefix: str, active: int,
                     head: Mapping[str, Any], x_title: str, height: int, left: int) -> go.Figure:
    """Stacked horizontal bars (``traces``) with a slider over ``states``, below the legend: the layout
    of the book's bar figures. ``head``: the title and footnote (:func:`heading`); ``x_title`` names
    the time axis (seconds); ``left`` is the margin, in pixels, for the bars' labels; each state may
    set ``annotations[0].text``, an empty note above the bars, from the figure's left edge."""
    layout = {
        **head, "height": height, "barmode": "stack", "margin": {"t": 72, "l": left, "r": 30, "b": 172},
        "xaxis": {"title": x_title, "ticksuffix": "s", "exponentformat": "SI"}, "yaxis": {"autorange": "reversed"},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": _edge(left, 30), "y": 1.02,
                         "xanchor": "left", "yanchor": "bottom", "align": "left", "showarrow": False}],
        "legend": {"orientation": "h", "x": 0, "y": -0.28},
    }
    fig = with_slider(traces, states, prefix=prefix, active=active, layout=layout)
    fig.layout.sliders[0].update(y=-0.5, pad={"t": 20})
    return fig


def with_menu(traces: Sequence[Any], states: Sequence[State], *, active: int = 0,
              layout: Mapping[str, Any] | None = None) -> go.Figure:
    """A figure of ``traces`` with a drop-down menu over ``states``; it opens at ``states[active]``."""
    fig, buttons = _controlled(traces, states, active, layout)
    fig.update_layout(updatemenus=[{"active": active, "buttons": buttons, "x": 1.0, "xanchor": "right",
                                    "y": 1.02, "yanchor": "bottom", "direction": "down"}])
    return fig


def html_bytes(figure: InteractiveFigure) -> int:
    """Bytes of ``figure``'s HTML (the page weight it adds, Plotly's JS excluded)."""
    return len(figure.to_html().encode("utf-8"))


def figure_json(figure: InteractiveFigure) -> dict:
    """The figure's data and layout, as the page receives them."""
    return json.loads(figure.figure.to_json())


__all__ = ["CONFIG", "FOOTNOTE", "InteractiveFigure", "MAX_HTML_BYTES", "MIN_FONT_PX", "PLOTLY_JS_URL", "State",
           "footnote", "footnote_of", "footnote_px", "heading", "html_bytes", "figure_json", "retitle", "rounded",
           "with_menu", "with_slider"]
