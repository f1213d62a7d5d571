"""The book-wide verdict table: every chapter's rules judged from the *recorded* GPU data in
``data/`` (and the published data beside it), never from a live run, so that the landing page
says the same on every machine.

Each rule's "now" rests on the strongest evidence there is: our own recording (``measured``), else
a published measurement of a current GPU (``published``: H100, H200, A100, H800), else the model's
prediction for an H100 (``model``, verdict ``"predicted: …"``). Without the published-data folder
(``$PERFKIT_PUBLISHED``), the published rules fall back to the model and say so.
"""

from __future__ import annotations

import html
import importlib
from pathlib import Path
from types import ModuleType
from typing import Mapping

import pandas as pd

from . import front
from .chapters import CHAPTERS as BOOK_CHAPTERS
from .verdict import COLUMNS as FINDING_COLUMNS
from .verdict import EVIDENCE, SHOWN, VerdictTable, rests_on, verdict_table, with_evidence

#: The chapters with a verdict table (a ``verdict`` module in their folder), in reading order.
CHAPTERS = tuple(name for name in BOOK_CHAPTERS if (Path(__file__).parent / name / "verdict.py").is_file())
COLUMNS = ["chapter", "title", *FINDING_COLUMNS]
#: The headers of :func:`book_table_html`.
HEADERS = ("Rule", "What the guides said", "Then → now", "Verdict", "What the number is", "Now rests on")


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"perfkit.book.{name}.verdict")


def chapter_findings(name: str, frames: dict | None = None) -> pd.DataFrame:
    """Chapter ``name``'s verdict table (one of :data:`CHAPTERS`) as the book shows it: from
    ``frames`` (default: the recorded and published frames of its ``frames()``), each rule nothing
    measured completed by the chapter's ``alternatives`` (published, else the model)."""
    if name not in CHAPTERS:
        raise LookupError(f"unknown chapter {name!r}; chapters with verdicts: {', '.join(CHAPTERS)}")
    module = _module(name)
    frames = module.frames() if frames is None else frames
    return verdict_table(module.findings(frames, instead=module.alternatives(module.modern_frames())))


def book_table() -> pd.DataFrame:
    """Every chapter's findings, from recorded and published frames: one row per rule, with its
    chapter (``"03_fully_connected"``), the chapter's title, and what its "now" rests on
    (``evidence``: measured, published or model; ``now_from``: the device and the source)."""
    parts = []
    for name in CHAPTERS:
        module = _module(name)
        table = chapter_findings(name)
        table.insert(0, "title", module.TITLE)
        table.insert(0, "chapter", module.CHAPTER)
        parts.append(table)
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def complete(table: pd.DataFrame) -> pd.DataFrame:
    """A chapter's verdict table whose rules nothing measured (no ``evidence``) take the published
    or predicted "now" that :func:`book_table` gives the same rule (matched by rule and claim).
    Rows already measured, and a table of no known chapter, are returned as they are."""
    table = with_evidence(table)
    keys = set(zip(table["rule"], table["claim"]))
    for name in CHAPTERS:
        module = _module(name)
        rules = verdict_table(module.findings({}))
        if not keys <= set(zip(rules["rule"], rules["claim"])):
            continue
        fallback = chapter_findings(name, {}).set_index(["rule", "claim"])
        out = table.copy()
        for i in out.index[out["evidence"] == ""]:
            row = fallback.loc[(out.at[i, "rule"], out.at[i, "claim"])]
            for column in ("now", "unit", "verdict", "where", "evidence", "now_from"):
                out.at[i, column] = row[column]
        return out
    return table


_complete = complete  # show() takes a keyword of the same name


def show(table: pd.DataFrame, *, complete: bool = True) -> VerdictTable:
    """A chapter's verdict table (from :func:`~perfkit.book.verdict.verdict_table`) as an HTML table: the rule, the claim
    with its source, then and now in the row's unit, the verdict, and what the "now" rests on.

    With ``complete`` (default), a rule nothing measured gets the "now" the book's table gives it
    (:func:`complete`): a published measurement of a current GPU, else the
    model's prediction, labelled as such; its row is styled apart from measured ones. When every
    row's "now" rests on the same source, the caption says it once and the last column says what
    each number is.
    """
    if not isinstance(complete, bool):
        raise TypeError(f"complete must be True or False, got {complete!r}")
    table = with_evidence(table)
    if complete and (table["evidence"] == "").any():
        table = _complete(table)
    shown_columns = [c for c in SHOWN if c != "then" or (table["then"] != "—").any()]  # no empty "then"
    sources = set(table["now_from"])
    if len(sources) == 1 and "" not in sources:  # one source for every row: said once, in the caption
        shown = table.assign(claim=table["claim"] + " (" + table["source"] + ")",
                             rests_on=table["where"].map(front.measured_as).replace("", "—"))
        names = {**SHOWN, "rests_on": "What the number is"}
        return VerdictTable(shown[shown_columns].rename(columns=names), table["evidence"],
                            caption=f"Now: {sources.pop()}")
    shown = table.assign(claim=table["claim"] + " (" + table["source"] + ")", rests_on=rests_on(table))
    return VerdictTable(shown[shown_columns].rename(columns=SHOWN), table["evidence"])


def book_table_html(table: pd.DataFrame, *, root: str = "chapters/", sources: Mapping[str, str] | None = None) -> str:
    """``table`` (from :func:`book_table`) as HTML: one heading row per chapter linked to its verdict,
    then per rule the claim, then → now in its unit, the verdict, what the number is and what the
    "now" rests on. ``root`` is the folder of the chapter pages relative to the page that shows it;
    given the chapters' MyST ``sources`` (chapter → text), each rule links to the section that
    measures it. Each row's class names its evidence (``evidence-measured``, ``evidence-published``,
    ``evidence-model``), so predictions are styled apart from measurements."""
    missing = [c for c in COLUMNS[:10] if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame book_table() returns")
    table = with_evidence(table)
    rows, chapter = [], None
    for r in table.itertuples(index=False):
        if r.chapter != chapter:  # one heading row per chapter, linked to its verdict
            chapter = r.chapter
            link = f'<a href="{html.escape(root)}{html.escape(r.chapter)}.html#verdict">{html.escape(r.title)}</a>'
            rows.append(f'<tr class="chapter"><th colspan="{len(HEADERS)}">{link}</th></tr>')
        verdict = f'<span class="verdict-{r.verdict.replace(":", "").replace(" ", "-")}">{html.escape(r.verdict)}</span>'
        rule = html.escape(r.rule)
        if sources is not None:
            rule = f'<a href="{html.escape(front.rule_href(r.chapter, r.where, sources, root=root))}">{rule}</a>'
        rests = front.rests_on(r.now_from) if r.evidence else "nothing yet"
        then = "" if r.then == "—" else f"{r.then} → "
        cells = [(rule, "text"), (html.escape(f"{r.claim} ({r.source})"), "text"),
                 (html.escape(f"{then}{r.now} {r.unit}".strip()), "num"), (verdict, "verdict"),
                 (html.escape(front.measured_as(r.where) or "—"), "text"), (html.escape(rests), "text evidence")]
        rows.append(f'<tr class="evidence-{r.evidence or "none"}">'
                    + "".join(f'<td class="{kind}">{c}</td>' for c, kind in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    return (f'<div class="perfkit-table-wrap"><table class="perfkit-table perfkit-verdicts">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _rules(n: int) -> str:
    return f"{n} rule" if n == 1 else f"{n} rules"


def _gpus(now_from: pd.Series) -> str:
    """The GPU families that the published labels of a column of ``now_from`` were measured on
    (``"H100, H800"``)."""
    names = now_from.str.extract(r"measured on ([^(]+?) \(", expand=False).dropna().str.split(", ").explode()
    families = sorted({n.split("-")[0] for n in names if n})
    return ", ".join(families) or "none"


def _outcomes(verdicts: pd.Series, prefix: str = "") -> str:
    counts = verdicts.str.removeprefix(prefix).value_counts()
    words = {"holds": "hold", "weaker": "weaker", "gone": "gone"}
    return ", ".join(f"{counts.get(s, 0)} {w}" for s, w in words.items())


def book_summary(table: pd.DataFrame) -> str:
    """One sentence: how many rules ``table`` (from :func:`book_table`) judges, how many rest on our
    own GPU recordings, on published measurements of current GPUs, on the model's prediction (and
    on nothing yet), and how each kind came out."""
    missing = [c for c in ("chapter", "then", "now", "verdict") if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame book_table() returns")
    table = with_evidence(table)
    n, chapters = len(table), table["chapter"].nunique()
    kind = {k: table[table["evidence"] == k] for k in EVIDENCE}
    bare = int((table["evidence"] == "").sum())
    published = kind["published"]
    counts = (f"{len(kind['measured'])} measured on our GPUs, {len(published)} published "
              f"({_gpus(published['now_from'])}), {len(kind['model'])} predicted by the model")
    counts += f", {bare} with no evidence yet" if bare else ""
    judged = pd.concat([kind["measured"], published])
    parts = [f"{_rules(n)} across {chapters} chapters: {counts}"]
    if len(judged):
        parts.append(f"measured or published, {_outcomes(judged['verdict'])}")
    if len(kind["model"]):
        parts.append(f"predicted, {_outcomes(kind['model']['verdict'], 'predicted: ')}")
    then = int((table["then"] != "—").sum())
    return "; ".join(parts) + (f". {then} also have a “then” from 2015–2019 (DeepBench's V100 or P100, or the "
                               "guide's own number).")


__all__ = ["CHAPTERS", "COLUMNS", "book_summary", "book_table", "book_table_html", "chapter_findings", "complete", "show"]
