"""The book-wide verdict table: every chapter's rules judged from the *recorded* GPU data in
``data/`` (and the published data beside it), never from a live run, so that the landing page
says the same on every machine.
"""

from __future__ import annotations

import html
import importlib

import pandas as pd

from ._core import verdict_table

#: The chapters with a verdict table, in reading order (modules of :mod:`perfkit.verdict`).
CHAPTERS = ("gemm", "fc", "rnn", "conv", "memory")
COLUMNS = ["chapter", "title", "rule", "source", "claim", "then", "now", "verdict", "where"]


def book_table() -> pd.DataFrame:
    """Every chapter's findings, from recorded and published frames: one row per rule, with its
    chapter (``"03_fully_connected"``) and the chapter's title."""
    parts = []
    for name in CHAPTERS:
        module = importlib.import_module(f".{name}", __package__)
        table = verdict_table(module.findings(module.frames()))
        table.insert(0, "title", module.TITLE)
        table.insert(0, "chapter", module.CHAPTER)
        parts.append(table)
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def book_table_html(table: pd.DataFrame, *, root: str = "chapters/") -> str:
    """``table`` (from :func:`book_table`) as HTML, each rule linked to its chapter's verdict;
    ``root`` is the folder of the chapter pages relative to the page that shows it."""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame book_table() returns")
    rows = []
    for r in table.itertuples(index=False):
        link = f'<a href="{html.escape(root)}{html.escape(r.chapter)}.html#verdict">{html.escape(r.title)}</a>'
        cells = [link, html.escape(r.rule), html.escape(f"{r.claim} ({r.source})"), html.escape(r.then),
                 html.escape(r.now), f'<span class="verdict-{r.verdict.replace(" ", "-")}">'
                 f"{html.escape(r.verdict)}</span>"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in
                   ("Chapter", "Rule", "What the guides said", "Then (published)", "Now (recorded)", "Verdict"))
    # Scrolls sideways rather than cut its last column on a narrow page.
    return (f'<div style="overflow-x: auto"><table class="perfkit-verdicts" style="font-size: 0.85em">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


__all__ = ["CHAPTERS", "book_table", "book_table_html"]
