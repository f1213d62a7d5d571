"""The core of :mod:`perfkit.verdict` (see its docstring): :class:`Finding`, :func:`judge`,
:func:`finding` and :func:`verdict_table`. The chapter modules import from here."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Iterable

import pandas as pd

from ..display import Table

__all__ = ["STATUSES", "Finding", "finding", "judge", "show", "verdict_table"]

#: The possible verdicts, strongest first.
STATUSES: tuple[str, ...] = ("holds", "weaker", "gone", "no data yet")


def _effect(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    value = float(value)
    return None if math.isnan(value) else value


def judge(effect: float | None, *, holds_at: float, gone_below: float) -> str:
    """The verdict on a rule whose measured effect is ``effect`` (None or NaN: ``"no data yet"``).

    ``"holds"`` if ``effect ≥ holds_at``, ``"gone"`` if ``effect < gone_below``, else ``"weaker"``.
    ``ValueError`` unless ``gone_below ≤ holds_at``.
    """
    effect = _effect("effect", effect)
    holds_at, gone_below = _effect("holds_at", holds_at), _effect("gone_below", gone_below)
    if holds_at is None or gone_below is None:
        raise ValueError("holds_at and gone_below must be numbers, not None or NaN")
    if gone_below > holds_at:
        raise ValueError(f"gone_below ({gone_below:g}) must not exceed holds_at ({holds_at:g})")
    if effect is None:
        return "no data yet"
    if effect >= holds_at:
        return "holds"
    return "gone" if effect < gone_below else "weaker"


@dataclass(frozen=True)
class Finding:
    """One row of a verdict table: a rule, its source, its claim, the effect then and now."""

    rule: str
    source: str
    claim: str
    then: str
    now: str
    verdict: str
    where: str = ""
    unit: str = "×"


#: What a finding's ``fmt`` may end with, and the unit it means: a ratio (×), a share (%), megabytes.
_UNITS = {"×": "×", "%": "%", "MB": "MB"}


def _split_fmt(fmt: str) -> tuple[str, str, float]:
    """A finding's ``fmt`` as (number format, unit, scale): ``"{:.1f}×"`` → ``("{:.1f}", "×", 1)``,
    ``"{:.0%}"`` → ``("{:.0f}", "%", 100)``; a bare ``"{:.2f}"`` is a ratio (×)."""
    m = re.fullmatch(r"\{:([^}]*)\}\s*(×|MB)?", fmt)
    if not m:
        raise ValueError(f"fmt must be a number format with an optional unit, such as '{{:.2f}}×', "
                         f"'{{:.0%}}' or '{{:.1f}} MB', got {fmt!r}")
    spec, unit = m.group(1), m.group(2) or "×"
    if spec.endswith("%"):
        return "{:" + spec[:-1] + "f}", "%", 100.0
    return "{:" + spec + "}", _UNITS[unit], 1.0


def _text(value: float | None, number: str, scale: float) -> str:
    return "—" if value is None else number.format(value * scale)


def finding(rule: str, source: str, claim: str, *, now: float | None, then: float | None = None,
            holds_at: float, gone_below: float, fmt: str = "{:.2f}×", where: str = "") -> Finding:
    """A :class:`Finding` whose verdict is :func:`judge` of ``now``; ``then`` is shown beside it.

    ``now`` and ``then`` are effects (None or NaN when not measured); ``fmt`` formats both and
    names their unit (default ``"{:.2f}×"``, a ratio; ``"{:.0%}"`` a share; ``"{:.1f} MB"``): the
    numbers go to ``then`` and ``now``, the unit to ``unit``, so a table has one unit per column.
    ``where`` points to the section that shows the data.
    """
    for name, value in (("rule", rule), ("source", source), ("claim", claim), ("fmt", fmt), ("where", where)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    now, then = _effect("now", now), _effect("then", then)
    verdict = judge(now, holds_at=holds_at, gone_below=gone_below)
    number, unit, scale = _split_fmt(fmt)
    return Finding(rule, source, claim, _text(then, number, scale), _text(now, number, scale), verdict, where,
                   unit)


def verdict_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """The findings as a table (columns rule, source, claim, then, now, unit, verdict, where)."""
    rows = list(findings)
    bad = [type(f).__name__ for f in rows if not isinstance(f, Finding)]
    if bad:
        raise TypeError(f"findings must be Finding objects (from perfkit.finding), got {bad}")
    if not rows:
        raise ValueError("findings is empty: a verdict table needs at least one finding")
    return pd.DataFrame([asdict(f) for f in rows])[
        ["rule", "source", "claim", "then", "now", "unit", "verdict", "where"]]


#: The columns a chapter's verdict table shows, and their headers.
SHOWN = {"rule": "Rule", "claim": "What the guide said", "then": "Then (published)",
         "now": "Now (GPU, measured)", "unit": "Unit", "verdict": "Verdict", "where": "Evidence"}


def show(table: pd.DataFrame) -> Table:
    """A chapter's verdict table (from :func:`verdict_table`) as an HTML table: the rule, the claim
    with its source, then and now in the row's unit, the verdict and where the evidence is."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be the DataFrame verdict_table() returns, got {type(table).__name__}")
    missing = [c for c in (*SHOWN, "source") if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame verdict_table() returns")
    shown = table.assign(claim=table["claim"] + " (" + table["source"] + ")")[list(SHOWN)]
    return Table(shown.rename(columns=SHOWN))

