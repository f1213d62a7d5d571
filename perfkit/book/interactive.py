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
#: Width of the book's text column in pixels (7.5 in at 96 dpi, as the static figures).
WIDTH_PX = 720
CONFIG = {"displaylogo": False, "responsive": True,
          "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}
SIGNIFICANT_DIGITS = 5


@dataclass(frozen=True)
class State:
    """One position of a slider or menu: its ``label``, the changing properties of each trace
    (``traces[i]`` updates trace ``i``, e.g. ``{"y": [...], "text": [...]}``) and a ``layout``
    update (e.g. ``{"title.text": "..."}``)."""

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
    """A layout title: ``title`` and, below it in small type, where the numbers come from: one
    source, wrapped to the column (Plotly never wraps a title), or a list of them, each said once
    on a line of its own."""
    if isinstance(source, (Source, str)):
        lines = textwrap.wrap(str(source), SOURCE_CHARS) or [""]
    elif isinstance(source, Sequence) and source and all(isinstance(s, (Source, str)) for s in source):
        lines = list(dict.fromkeys(map(str, source)))
    else:
        raise TypeError(f"source must be a perfkit.Source, a string or a list of them, got {source!r}")
    below = "<br>".join(f"<sup>{html.escape(line)}</sup>" for line in lines)
    return {"text": f"{html.escape(title)}<br>{below}", "x": 0.0, "xanchor": "left", "font": {"size": 15}}


#: Characters of a source line under an interactive figure's title that fit the text column.
SOURCE_CHARS = 105


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


def _base(traces: Sequence[Any], layout: Mapping[str, Any] | None) -> go.Figure:
    fig = go.Figure(data=list(traces))
    fig.update_layout(template="plotly_white", height=460, margin={"l": 60, "r": 20, "t": 80, "b": 60},
                      legend={"orientation": "h", "y": -0.25}, font={"size": 12})
    if layout:
        fig.update_layout(dict(layout))
    return fig


def _controlled(traces: Sequence[Any], states: Sequence[State], active: int,
                layout: Mapping[str, Any] | None) -> tuple[go.Figure, list[dict]]:
    """The figure opened at ``states[active]``, and one Plotly ``update`` entry per state."""
    fig = _base(traces, layout)
    _check_states(states, len(fig.data), "states")
    if not 0 <= active < len(states):
        raise ValueError(f"active must index states (0 … {len(states) - 1}), got {active}")
    _apply(fig, states[active])
    return fig, [{"method": "update", "label": s.label, "args": _update_args(s, fig)} for s in states]


def with_slider(traces: Sequence[Any], states: Sequence[State], *, prefix: str, active: int = 0,
                layout: Mapping[str, Any] | None = None) -> go.Figure:
    """A figure of ``traces`` with a slider over ``states``; it opens at ``states[active]``.

    ``prefix`` labels the slider's current value (e.g. ``"N = "``).
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


def bars_with_slider(traces: Sequence[Any], states: Sequence[State], *, prefix: str, active: int, title: dict,
                     x_title: str, height: int, left: int) -> go.Figure:
    """Stacked horizontal bars (``traces``) with a slider over ``states``, below the legend: the layout
    of the book's bar figures. ``title`` from :func:`heading`; ``x_title`` names the time axis (seconds);
    ``left`` is the margin, in pixels, for the bars' labels; each state may set ``annotations[0].text``,
    an empty note above the bars."""
    layout = {
        "title": title, "height": height, "barmode": "stack", "margin": {"t": 120, "l": left, "r": 30, "b": 120},
        "xaxis": {"title": x_title, "ticksuffix": "s", "exponentformat": "SI"}, "yaxis": {"autorange": "reversed"},
        "annotations": [{"text": "", "xref": "paper", "yref": "paper", "x": 0, "y": 1.02, "xanchor": "left",
                         "yanchor": "bottom", "align": "left", "showarrow": False, "font": {"size": 11}}],
        "legend": {"orientation": "h", "x": 0, "y": -0.28, "font": {"size": 10}},
    }
    fig = with_slider(traces, states, prefix=prefix, active=active, layout=layout)
    fig.layout.sliders[0].update(y=-0.5, pad={"t": 40})
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


__all__ = ["CONFIG", "InteractiveFigure", "MAX_HTML_BYTES", "PLOTLY_JS_URL", "State", "heading",
           "html_bytes", "figure_json", "rounded", "with_menu", "with_slider"]
