"""The book's front door: the landing page's chapter list (with reading times) and its short table
of striking rules, and the rules page's links from each rule to the section that measures it.

Pure: each function is given the chapters' MyST sources (``{"02_gemm": text, ...}``) and the
book's verdict table (:func:`perfkit.book.scorecard.book_table`); nothing here reads a file.
"""

from __future__ import annotations

import html
import re
from typing import Mapping, Sequence

import pandas as pd
from docutils.nodes import make_id

#: Words a reader reads per minute (prose; code and outputs are looked at, not read).
WORDS_PER_MINUTE = 200

_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_SECTION = re.compile(r"^##\s+(\d+)\.\s+(.+?)\s*$", re.M)
_WHERE_NUMBER = re.compile(r"(?:§|section\s+)(\d+)")


def _text(md: str, name: str = "md") -> str:
    if not isinstance(md, str):
        raise TypeError(f"{name} must be a chapter's MyST text (str), got {type(md).__name__}")
    return md


def prose_words(md: str) -> int:
    """The words of a chapter's prose: ``md`` without its front matter, code cells and fenced blocks
    (solutions and other ``:::`` blocks count: a reader reads them)."""
    text = _FRONT_MATTER.sub("", _text(md))
    text = re.sub(r"^```[^\n]*\n.*?^```\s*$", "", text, flags=re.S | re.M)
    return len(re.findall(r"[\w’'%×÷.,-]+", text))


def reading_minutes(md: str, *, words_per_minute: int = WORDS_PER_MINUTE) -> int:
    """Minutes to read a chapter's prose at ``words_per_minute``, rounded up to a multiple of 5."""
    if not isinstance(words_per_minute, int) or words_per_minute <= 0:
        raise ValueError(f"words_per_minute must be a positive integer, got {words_per_minute!r}")
    minutes = prose_words(md) / words_per_minute
    return max(5, -(-int(round(minutes)) // 5) * 5)


def title_of(md: str) -> str:
    """A chapter's title: its first ``# `` heading."""
    m = re.search(r"^#\s+(.+?)\s*$", _FRONT_MATTER.sub("", _text(md)), re.M)
    if m is None:
        raise ValueError("md has no '# ' title heading")
    return m.group(1)


def section_anchor(md: str, number: int) -> str | None:
    """The HTML id of section ``number`` (a ``## N. Title`` heading) of a chapter, or None."""
    for n, title in _SECTION.findall(_text(md)):
        if int(n) == number:
            return make_id(re.sub(r"[`*]", "", title))
    return None


def rule_href(chapter: str, where: str, sources: Mapping[str, str], *, root: str = "chapters/") -> str:
    """The link from a rule to the section its number comes from (``where`` names it: ``"§3: …"`` or
    ``"section 3"``), else to its chapter's verdict."""
    page = f"{root}{chapter}.html"
    m = _WHERE_NUMBER.search(str(where))
    anchor = section_anchor(sources[chapter], int(m.group(1))) if m and chapter in sources else None
    return f"{page}#{anchor or 'verdict'}"


def measured_as(where: str) -> str:
    """What a rule's number is, from its ``where`` (``"§2: best TFLOP/s ÷ TFLOP/s at batch 16"`` →
    ``"best TFLOP/s ÷ TFLOP/s at batch 16"``); empty when ``where`` only names a section."""
    text = re.sub(r"^\s*(?:§\d+|section\s+\d+)\s*:?\s*", "", str(where))
    return text[:1].upper() + text[1:]


def chapter_list(sources: Mapping[str, str], blurbs: Mapping[str, str], *, root: str = "chapters/") -> str:
    """The landing page's chapter list as an HTML table: each chapter linked by its title, its reading
    time, and ``blurbs[chapter]`` (what a reader measures there). ``sources``: chapter → MyST text,
    in reading order; every chapter needs a blurb."""
    missing = [c for c in sources if c not in blurbs]
    if missing:
        raise LookupError(f"blurbs lacks the chapters {missing}; it has {list(blurbs)}")
    rows = []
    for chapter, md in sources.items():
        link = f'<a href="{html.escape(root + chapter)}.html">{html.escape(title_of(md))}</a>'
        rows.append(f'<tr><td class="text">{link}</td><td class="num">{reading_minutes(md)} min</td>'
                    f'<td class="text">{html.escape(blurbs[chapter])}</td></tr>')
    return ('<div class="perfkit-table-wrap"><table class="perfkit-table perfkit-chapters"><thead><tr>'
            "<th>Chapter</th><th>Reading</th><th>What you measure</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>")


def rests_on(now_from: str) -> str:
    """What a rule's "now" rests on, as the verdict tables say it (the label perfkit.provenance made),
    else the model."""
    return str(now_from).removeprefix("ours, ") or "the model"


def striking(table: pd.DataFrame, picks: Sequence[tuple[str, str, str]], sources: Mapping[str, str], *,
             root: str = "chapters/") -> str:
    """The landing page's short table of rules: ``picks`` are (chapter, rule, what its number is)
    for rules of ``table`` (from :func:`~perfkit.book.scorecard.book_table`); each row links the rule
    to its section and says then → now and the verdict. What the "now" rests on is the caption
    when it is the same for every row, else a column. ``LookupError`` for a pick the table lacks."""
    rows = []
    for chapter, rule, what in picks:
        hit = table[(table["chapter"] == chapter) & (table["rule"] == rule)]
        if hit.empty:
            raise LookupError(f"no rule {rule!r} in chapter {chapter!r} of the verdict table")
        r = hit.iloc[0]
        then = "" if r["then"] == "—" else f"{r['then']} → "
        rows.append((rule_href(chapter, r["where"], sources, root=root), rule, f"{then}{r['now']} {r['unit']}",
                     r["verdict"], what, rests_on(r["now_from"])))
    uniform = len({row[-1] for row in rows}) == 1
    body = ""
    for href, rule, value, verdict, what, rests in rows:
        cells = [(f'<a href="{html.escape(href)}">{html.escape(rule)}</a>', "text"), (html.escape(value), "num"),
                 (html.escape(verdict), "text short"), (html.escape(what), "text")]
        cells += [] if uniform else [(html.escape(rests), "text")]
        body += "<tr>" + "".join(f'<td class="{k}">{c}</td>' for c, k in cells) + "</tr>"
    now = f"now: {rows[0][-1]}" if uniform and rows else "now: the last column"
    head = ["Rule", "Then → now", "Verdict", "What the number is"] + ([] if uniform else ["Now rests on"])
    return ('<div class="perfkit-table-wrap"><table class="perfkit-table perfkit-striking"><caption>'
            f"Then: Baidu DeepBench's V100/P100 or the guide's own number; {html.escape(now)}</caption><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>" + body + "</tbody></table></div>")


__all__ = ["WORDS_PER_MINUTE", "chapter_list", "measured_as", "prose_words", "reading_minutes",
           "rests_on", "rule_href", "section_anchor", "striking", "title_of"]
