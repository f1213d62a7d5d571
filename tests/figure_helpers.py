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
