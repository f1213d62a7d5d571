"""Verdicts: does a 2015–2023 performance rule still hold? Computed from data, never typed in.

Each chapter ends with a table of :class:`Finding` rows, one per rule: what the source said,
the effect measured *then* (published data) and *now* (a live or recorded run), and a verdict
that :func:`judge` computes from the "now" number:

- ``"holds"``: the effect is still at least ``holds_at``;
- ``"weaker"``: it is still there, but below ``holds_at``;
- ``"gone"``: it is below ``gone_below`` (e.g. a speedup under 1.1×: noise, not a rule);
- ``"no data yet"``: nothing was measured, published or predicted for a current GPU.

Each verdict says what its "now" rests on (``evidence``), strongest first: our own GPU run, live or
recorded (``"measured"``); a third party's published measurement of a current GPU (``"published"``:
H100, H200, A100, H800); else the model's prediction for an H100 (``"model"``), whose verdict
reads ``"predicted: holds"`` and is styled apart. ``now_from`` names the device and the source.

An *effect* is a number where larger means the rule matters more: the speedup from following it
(slow ÷ fast time), or the fraction of the best throughput reached at the rule's threshold.
Nothing here measures. One module per chapter (``perfkit.verdict.fc`` …) computes that
chapter's findings from the frames it is handed (``findings(frames)``), so the chapter and the
book-wide table (:func:`book_table`) share one computation; only each module's ``frames()``
reads ``data/``, for that table: recordings, never a live run, and its ``modern_frames()`` the
published tables its ``alternatives()`` compute published or predicted "now"s from.
"""

from __future__ import annotations

import pandas as pd

from ._core import EVIDENCE, PREDICTIONS, STATUSES, VERDICTS, Evidence, Finding, finding, judge, verdict_table

__all__ = ["EVIDENCE", "PREDICTIONS", "STATUSES", "VERDICTS", "Evidence", "Finding", "book_table", "book_table_html",
           "book_summary", "chapter_table", "finding", "judge", "show", "verdict_table"]


def show(table: pd.DataFrame, *, complete: bool = True):
    """A chapter's verdict table as HTML, every rule nothing measured completed with the published or
    predicted "now" of the book's table, styled apart (see :func:`perfkit.verdict.book.show`)."""
    from .book import show as _show

    return _show(table, complete=complete)


def book_table() -> pd.DataFrame:
    """Every chapter's verdicts from the recorded and published data (see :mod:`perfkit.verdict.book`)."""
    from .book import book_table as _table

    return _table()


def chapter_table(chapter: str, frames: dict | None = None) -> pd.DataFrame:
    """Chapter ``chapter``'s verdict table (``"fc"``, …) from ``frames`` (default: its recordings),
    every rule nothing measured completed with a published or predicted "now" (see
    :mod:`perfkit.verdict.book`)."""
    from .book import chapter_findings

    return chapter_findings(chapter, frames)


def book_table_html(table: pd.DataFrame, *, root: str = "chapters/") -> str:
    """:func:`book_table` as HTML, each rule linked to its chapter (see :mod:`perfkit.verdict.book`)."""
    from .book import book_table_html as _html

    return _html(table, root=root)


def book_summary(table: pd.DataFrame) -> str:
    """One sentence counting :func:`book_table`'s verdicts by the evidence they rest on (see
    :mod:`perfkit.verdict.book`)."""
    from .book import book_summary as _summary

    return _summary(table)


def __getattr__(name: str):
    from .book import CHAPTERS

    if name in CHAPTERS:  # pk.verdict.fc: a chapter's module, imported when asked for
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'perfkit.verdict' has no attribute {name!r}")
