"""Verdicts: does a 2015–2023 performance rule still hold? Computed from data, never typed in.

Each chapter ends with a table of :class:`Finding` rows, one per rule: what the source said,
the effect measured *then* (published data) and *now* (a live or recorded run), and a verdict
that :func:`judge` computes from the "now" number:

- ``"holds"``: the effect is still at least ``holds_at``;
- ``"weaker"``: it is still there, but below ``holds_at``;
- ``"gone"``: it is below ``gone_below`` (e.g. a speedup under 1.1×: noise, not a rule);
- ``"no data yet"``: nothing was measured or recorded on a current GPU.

An *effect* is a number where larger means the rule matters more: the speedup from following it
(slow ÷ fast time), or the fraction of the best throughput reached at the rule's threshold.
Nothing here measures. One module per chapter (``perfkit.verdict.fc`` …) computes that
chapter's findings from the frames it is handed (``findings(frames)``), so the chapter and the
book-wide table (:func:`book_table`) share one computation; only each module's ``frames()``
reads ``data/``, for that table: recordings, never a live run.
"""

from __future__ import annotations

import pandas as pd

from ._core import STATUSES, Finding, finding, judge, show, verdict_table

__all__ = ["STATUSES", "Finding", "book_table", "book_table_html", "book_summary", "finding", "judge", "show",
           "verdict_table"]


def book_table() -> pd.DataFrame:
    """Every chapter's verdicts from the recorded and published data (see :mod:`perfkit.verdict.book`)."""
    from .book import book_table as _table

    return _table()


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
