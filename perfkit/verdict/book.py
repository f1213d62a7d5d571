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
COLUMNS = ["chapter", "title", "rule", "source", "claim", "then", "now", "unit", "verdict", "where"]


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
    rows, chapter = [], None
    for r in table.itertuples(index=False):
        if r.chapter != chapter:  # one heading row per chapter, linked to its verdict
            chapter = r.chapter
            link = f'<a href="{html.escape(root)}{html.escape(r.chapter)}.html#verdict">{html.escape(r.title)}</a>'
            rows.append(f'<tr class="chapter"><th colspan="6">{link}</th></tr>')
        cells = [(html.escape(r.rule), "text"), (html.escape(f"{r.claim} ({r.source})"), "text"),
                 (html.escape(r.then), "num"), (html.escape(r.now), "num"), (html.escape(r.unit), "unit"),
                 (f'<span class="verdict-{r.verdict.replace(" ", "-")}">{html.escape(r.verdict)}</span>', "verdict")]
        rows.append("<tr>" + "".join(f'<td class="{kind}">{c}</td>' for c, kind in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in
                   ("Rule", "What the guides said", "Then (published)", "Now (GPU, recorded)", "Unit", "Verdict"))
    return (f'<div class="perfkit-table-wrap"><table class="perfkit-table perfkit-verdicts">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _rules(n: int) -> str:
    return f"{n} rule" if n == 1 else f"{n} rules"


def book_summary(table: pd.DataFrame) -> str:
    """One sentence: how many rules ``table`` (from :func:`book_table`) judges, from which kind of
    evidence (our GPU recordings, published measurements), and how the recorded ones came out."""
    missing = [c for c in ("chapter", "then", "now", "verdict") if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame book_table() returns")
    n, chapters = len(table), table["chapter"].nunique()
    recorded = table[table["now"] != "—"]
    published = int((table["then"] != "—").sum())
    counts = recorded["verdict"].value_counts()
    judged = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("holds", "weaker", "gone"))
    first = (f"{_rules(n)} across {chapters} chapters: {len(recorded)} judged from our own GPU recordings "
             f"({judged})" if len(recorded) else
             f"{_rules(n)} across {chapters} chapters, none judged yet: no GPU recording is in data/")
    return (f"{first}; {published} of the {n} have a published measurement (Baidu DeepBench, V100 or P100) to compare with, "
            f"and {n - len(recorded)} await a recording on a current GPU.")


__all__ = ["CHAPTERS", "book_summary", "book_table", "book_table_html"]
