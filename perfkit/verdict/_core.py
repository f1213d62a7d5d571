"""The core of :mod:`perfkit.verdict` (see its docstring): :class:`Finding`, :func:`judge`,
:func:`finding` and :func:`verdict_table`. The chapter modules import from here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable

import pandas as pd

__all__ = ["STATUSES", "Finding", "finding", "judge", "verdict_table"]

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


def _text(value: float | None, fmt: str) -> str:
    return "—" if value is None else fmt.format(value)


def finding(rule: str, source: str, claim: str, *, now: float | None, then: float | None = None,
            holds_at: float, gone_below: float, fmt: str = "{:.2f}×", where: str = "") -> Finding:
    """A :class:`Finding` whose verdict is :func:`judge` of ``now``; ``then`` is shown beside it.

    ``now`` and ``then`` are effects (None or NaN when not measured); ``fmt`` formats both
    (default ``"{:.2f}×"``, a ratio); ``where`` points to the section that shows the data.
    """
    for name, value in (("rule", rule), ("source", source), ("claim", claim), ("fmt", fmt), ("where", where)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    now, then = _effect("now", now), _effect("then", then)
    verdict = judge(now, holds_at=holds_at, gone_below=gone_below)
    return Finding(rule, source, claim, _text(then, fmt), _text(now, fmt), verdict, where)


def verdict_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """The findings as a table (columns rule, source, claim, then, now, verdict, where)."""
    rows = list(findings)
    bad = [type(f).__name__ for f in rows if not isinstance(f, Finding)]
    if bad:
        raise TypeError(f"findings must be Finding objects (from perfkit.finding), got {bad}")
    if not rows:
        raise ValueError("findings is empty: a verdict table needs at least one finding")
    return pd.DataFrame([asdict(f) for f in rows])

