"""Reading an interactive figure's states back in tests (perfkit.interactive)."""

from __future__ import annotations


def by_trace(args):
    """Plotly ``update`` arguments as (``{prop: [value of each trace]}`` over every trace, layout):
    a trace the state leaves alone gets None."""
    data, layout = args[0], args[1]
    n = max((len(v) for v in data.values()), default=0)
    touched = list(args[2]) if len(args) > 2 else list(range(n))
    full = {k: [None] * (max(touched, default=-1) + 1) for k in data}
    for k, values in data.items():
        for i, v in zip(touched, values):
            full[k][i] = v
    return full, layout


def steps(fig):
    """``(label, by_trace(args))`` of each slider step, or of each menu button."""
    layout = fig.figure.layout
    controls = layout.sliders[0].steps if layout.sliders else layout.updatemenus[0].buttons
    return [(c.label, by_trace(c.args)) for c in controls]


def state_heading(fig, layout) -> str:
    """The title and the source footnote that a state's layout update (``by_trace(args)[1]``) of the
    interactive figure ``fig`` shows: ``title.text`` and the footnote annotation's new text, its
    lines joined."""
    from perfkit.book.interactive import FOOTNOTE

    index = next(i for i, a in enumerate(fig.figure.layout.annotations) if a.name == FOOTNOTE)
    note = layout.get(f"annotations[{index}].text")
    if note is None and "annotations" in layout:
        note = layout["annotations"][index]["text"]
    title = layout.get("title.text", fig.figure.layout.title.text)
    return "\n".join(p for p in (title, (note or "").replace("<br>", " ")) if p)


def note_of(result) -> str:
    """The one-line text of the :class:`perfkit.Note` a figure function returned for missing data
    (title, a colon, the reason; whitespace collapsed); fails on a figure or anything else."""
    from perfkit.display import Note

    assert isinstance(result, Note), f"expected a perfkit Note (no data), got {type(result).__name__}"
    assert "perfkit-note" in result._repr_html_()
    return " ".join(str(result).split())


def figure_named(name: str):
    """The figure function ``name`` (``plot_…``) of whichever chapter folder of perfkit.book defines it."""
    import importlib

    from perfkit.book import CHAPTERS

    for folder in CHAPTERS:
        module = importlib.import_module(f"perfkit.book.{folder}")
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(f"no chapter folder defines {name!r}")


def drawn_texts(fig) -> list:
    """Every matplotlib ``Text`` that ``fig`` draws with something in it: titles, axis labels, tick
    labels, legend entries and titles, annotations (drawn first, so that ticks and legends exist)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t for t in fig.findobj(lambda a: isinstance(a, Text))
            if t.get_visible() and t.get_text().strip() and _shown(t, fig)]


def _shown(text, fig) -> bool:
    """Whether ``text`` is drawn: a tick label of an invisible tick, or one outside the axis' view, is not."""
    for ax in fig.axes:
        for i, axis in enumerate((ax.xaxis, ax.yaxis)):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if text is tick.label1 or text is tick.label2:
                    lo, hi = sorted(axis.get_view_interval())
                    return (tick.get_visible() and any(text is t for t in axis.get_ticklabels(which="both"))
                            and lo - 1e-9 * abs(lo) <= text.get_position()[i] <= hi + 1e-9 * abs(hi))
    return True


def small_texts(fig, least_pt: float) -> list[tuple[str, float]]:
    """``(text, size in points)`` of each drawn text of ``fig`` smaller than ``least_pt``; a text with
    a mathtext superscript (``$10^{3}$``) counts at that superscript's size, 0.7 of its own."""
    import re

    sizes = [(t.get_text(), t.get_fontsize() * (0.7 if re.search(r"\$[^$]*\^", t.get_text()) else 1.0))
             for t in drawn_texts(fig)]
    return [(text, size) for text, size in sizes if size < least_pt - 1e-9]


def plotly_font_sizes(node, where: str = "") -> list[tuple[str, float]]:
    """``(path, size)`` of every font size set anywhere in a Plotly figure's JSON (``font``,
    ``tickfont``, ``textfont``, … and the states' ``update`` arguments, which hold layout too)."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}" if where else str(key)
            if key.endswith("font") and isinstance(value, dict) and "size" in value:
                sizes = value["size"] if isinstance(value["size"], list) else [value["size"]]
                out += [(path, s) for s in sizes if s is not None]
            elif key.endswith("font.size") and value is not None:
                out += [(path, s) for s in (value if isinstance(value, list) else [value])]
            out += plotly_font_sizes(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += plotly_font_sizes(value, f"{where}[{i}]")
    return out
