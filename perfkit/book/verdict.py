"""The core of :mod:`perfkit.verdict` (see its docstring): :class:`Finding`, :class:`Evidence`,
:func:`judge`, :func:`finding`, :func:`verdict_table` and :func:`show`. The chapter modules import
from here.

Every finding says what its "now" rests on (``evidence``): ``"measured"`` (our own GPU run, live or
recorded), ``"published"`` (a third party's measurement of a current GPU) or ``"model"`` (perfkit's
prediction, whose verdict reads ``"predicted: holds"``); ``""`` when there is none (``"no data
yet"``). A measurement always comes first: a published or predicted "now" (:class:`Evidence`)
stands in only where nothing was measured."""

from __future__ import annotations

import html
import math
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping

import pandas as pd

from ..display import Table
from .frames import measured_from

__all__ = ["EVIDENCE", "PREDICTIONS", "STATUSES", "VERDICTS", "Band", "Evidence", "Finding", "finding", "instead_of",
           "judge", "verdict_table"]

#: The possible verdicts, strongest first.
STATUSES: tuple[str, ...] = ("holds", "weaker", "gone", "no data yet")
#: What a "now" may rest on, strongest first: our measurement, a published one, the model.
EVIDENCE: tuple[str, ...] = ("measured", "published", "model")
#: The verdicts of a "now" that the model predicted (never a measured verdict).
PREDICTIONS: tuple[str, ...] = tuple(f"predicted: {s}" for s in STATUSES[:3])
#: Every verdict a finding may carry.
VERDICTS: tuple[str, ...] = STATUSES + PREDICTIONS


def _effect(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    value = float(value)
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Band:
    """A two-sided claim: the effect is about ``target`` ("does not depend on": 1; "predicts": 1;
    "about 2× faster": 2). It holds within a factor ``holds_within`` of ``target`` either way, is
    gone beyond a factor ``gone_beyond`` either way, and is weaker between. Factors, not
    differences: a ratio 2× too high is as far off as one 2× too low. ``ValueError`` unless
    ``target > 0`` and ``1 ≤ holds_within ≤ gone_beyond``.

    A one-sided claim ("at least 2× faster", "aligned sizes are faster") takes ``holds_at`` and
    ``gone_below`` instead: there, more of the effect only strengthens the rule."""

    target: float
    holds_within: float
    gone_beyond: float

    def __post_init__(self) -> None:
        for name in ("target", "holds_within", "gone_beyond"):
            value = _effect(name, getattr(self, name))
            if value is None or math.isinf(value):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)!r}")
            object.__setattr__(self, name, value)
        if self.target <= 0:
            raise ValueError(f"target must be > 0 (the band is a factor either way), got {self.target:g}")
        if not 1 <= self.holds_within <= self.gone_beyond:
            raise ValueError(f"need 1 ≤ holds_within ≤ gone_beyond, got holds_within={self.holds_within:g}, "
                             f"gone_beyond={self.gone_beyond:g}")

    @property
    def holds(self) -> tuple[float, float]:
        """The effects at which the rule holds: ``(target ÷ holds_within, target × holds_within)``."""
        return self.target / self.holds_within, self.target * self.holds_within

    @property
    def gone(self) -> tuple[float, float]:
        """The rule is gone below the first and above the second: ``target ÷, × gone_beyond``."""
        return self.target / self.gone_beyond, self.target * self.gone_beyond

    def judge(self, effect: float | None) -> str:
        """``"holds"`` inside :attr:`holds` (ends included), ``"gone"`` outside :attr:`gone`,
        ``"weaker"`` between, ``"no data yet"`` for None or NaN."""
        effect = _effect("effect", effect)
        if effect is None:
            return "no data yet"
        (low, high), (gone_low, gone_high) = self.holds, self.gone
        if low <= effect <= high:
            return "holds"
        return "gone" if effect < gone_low or effect > gone_high else "weaker"

    def text(self, fmt: str = "{:.2f}×") -> str:
        """The band as a claim states it, in a finding's ``fmt``: ``"holds within 0.80–1.25×"``,
        ``"holds within 50–200 %"``."""
        number, unit, scale = _split_fmt(fmt)
        low, high = (_text(x, number, scale) for x in self.holds)
        return f"holds within {low}–{high}{_UNIT_AFTER_NUMBER.get(unit, ' ' + unit)}"


def judge(effect: float | None, *, holds_at: float | None = None, gone_below: float | None = None,
          band: Band | None = None) -> str:
    """The verdict on a rule whose measured effect is ``effect`` (None or NaN: ``"no data yet"``).

    One-sided (``holds_at``, ``gone_below``): ``"holds"`` if ``effect ≥ holds_at``, ``"gone"`` if
    ``effect < gone_below``, else ``"weaker"``; ``ValueError`` unless ``gone_below ≤ holds_at``.
    Two-sided (``band``, a :class:`Band`, and no thresholds): :meth:`Band.judge`.
    """
    if band is not None:
        if not isinstance(band, Band):
            raise TypeError(f"band must be a Band or None, got {type(band).__name__}")
        if holds_at is not None or gone_below is not None:
            raise ValueError("give either holds_at and gone_below (a one-sided rule) or band (a two-sided one), "
                             "not both")
        return band.judge(effect)
    effect = _effect("effect", effect)
    holds_at, gone_below = _effect("holds_at", holds_at), _effect("gone_below", gone_below)
    if holds_at is None or gone_below is None:
        raise ValueError("holds_at and gone_below must be numbers, not None or NaN (or give band, for a "
                         "two-sided rule)")
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
    evidence: str = ""
    now_from: str = ""


@dataclass(frozen=True)
class Evidence:
    """A "now" that is not our own measurement, for a rule nothing measured yet.

    ``effect`` is the rule's effect (None: not available); ``kind`` is ``"published"`` (a third
    party's measurement of a current GPU) or ``"model"`` (perfkit's prediction); ``now_from`` names
    the device and the source (``"H100-SXM, published by OpenXLA (2025)"``, ``"model of
    H100-SXM"``); ``where`` says what the number is, in place of the rule's own; ``holds_at`` and
    ``gone_below`` replace the rule's thresholds when the number is measured on another scale.
    """

    effect: float | None
    kind: str
    now_from: str
    where: str = ""
    holds_at: float | None = None
    gone_below: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in EVIDENCE[1:]:
            raise ValueError(f"kind must be one of {EVIDENCE[1:]}, got {self.kind!r}")
        for name in ("now_from", "where"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a string, got {type(getattr(self, name)).__name__}")
        if not self.now_from:
            raise ValueError("now_from must name the device and the source of the number")
        for name in ("effect", "holds_at", "gone_below"):
            object.__setattr__(self, name, _effect(name, getattr(self, name)))


#: What a finding's ``fmt`` may end with, and the unit it means: a ratio (×), a share (%), megabytes.
_UNITS = {"×": "×", "%": "%", "MB": "MB"}
#: How a unit follows a number in prose ("1.25×", "125 %", "1.2 MB").
_UNIT_AFTER_NUMBER = {"×": "×", "%": " %"}


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
            holds_at: float | None = None, gone_below: float | None = None, fmt: str = "{:.2f}×",
            where: str = "", on: pd.DataFrame | str | None = None, instead: Evidence | None = None,
            band: Band | None = None) -> Finding:
    """A :class:`Finding` whose verdict is :func:`judge` of ``now``; ``then`` is shown beside it.

    A one-sided rule gives ``holds_at`` and ``gone_below``; a two-sided one ("about", "does not
    depend on", "predicts") gives ``band`` instead, which the claim then states
    (``"…; holds within 0.80–1.25×"``, in ``fmt``).

    ``now`` and ``then`` are effects (None or NaN when not measured); ``fmt`` formats both and
    names their unit (default ``"{:.2f}×"``, a ratio; ``"{:.0%}"`` a share; ``"{:.1f} MB"``): the
    numbers go to ``then`` and ``now``, the unit to ``unit``, so a table has one unit per column.
    ``where`` points to the section that shows the data; ``on`` is the frame ``now`` was computed
    from (or a label), named in ``now_from``.

    A measured ``now`` always decides (evidence ``"measured"``). Without one, ``instead`` (an
    :class:`Evidence`, published or predicted) gives the "now" when its effect is known: its
    verdict, against its own thresholds if it has them, reads ``"predicted: …"`` for the model
    (a two-sided rule's evidence brings none: ``ValueError``).
    """
    for name, value in (("rule", rule), ("source", source), ("claim", claim), ("fmt", fmt), ("where", where)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    if instead is not None and not isinstance(instead, Evidence):
        raise TypeError(f"instead must be an Evidence or None, got {type(instead).__name__}")
    now, then = _effect("now", now), _effect("then", then)
    judge(None, holds_at=holds_at, gone_below=gone_below, band=band)  # the rule's thresholds: checked in any case
    if band is not None:
        claim = f"{claim}; {band.text(fmt)}"
        if instead is not None and (instead.holds_at is not None or instead.gone_below is not None):
            raise ValueError("a two-sided rule (band) takes no one-sided thresholds from its evidence (instead)")
    number, unit, scale = _split_fmt(fmt)
    evidence, now_from = ("measured", measured_from(on)) if now is not None else ("", "")
    if now is None and instead is not None and instead.effect is not None:
        now, evidence, now_from, where = instead.effect, instead.kind, instead.now_from, instead.where or where
        holds_at = holds_at if instead.holds_at is None else instead.holds_at
        gone_below = gone_below if instead.gone_below is None else instead.gone_below
    verdict = judge(now, band=band) if band is not None else judge(now, holds_at=holds_at, gone_below=gone_below)
    if evidence == "model":
        verdict = f"predicted: {verdict}"
    return Finding(rule, source, claim, _text(then, number, scale), _text(now, number, scale), verdict, where,
                   unit, evidence, now_from)


def instead_of(instead: Mapping[str, Evidence | None] | None, keys: Iterable[str]) -> dict[str, Evidence | None]:
    """A chapter's ``instead`` argument checked: every rule key of ``keys`` (None where absent);
    ``TypeError`` for a value that is not an Evidence, ``ValueError`` for an unknown key."""
    keys = tuple(keys)
    if instead is None:
        return dict.fromkeys(keys)
    if not isinstance(instead, Mapping):
        raise TypeError(f"instead must be a mapping of rule key → Evidence or None (the chapter's "
                        f"alternatives()), got {type(instead).__name__}")
    unknown = [k for k in instead if k not in keys]
    if unknown:
        raise ValueError(f"instead has unknown rule keys {unknown}; accepted: {', '.join(keys)}")
    bad = [k for k, v in instead.items() if v is not None and not isinstance(v, Evidence)]
    if bad:
        raise TypeError(f"instead[{bad[0]!r}] must be an Evidence or None, got {type(instead[bad[0]]).__name__}")
    return {k: instead.get(k) for k in keys}


#: The columns of :func:`verdict_table`.
COLUMNS = ["rule", "source", "claim", "then", "now", "unit", "verdict", "where", "evidence", "now_from"]


def verdict_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """The findings as a table (columns :data:`COLUMNS`: rule, source, claim, then, now, unit,
    verdict, where, evidence, now_from)."""
    rows = list(findings)
    bad = [type(f).__name__ for f in rows if not isinstance(f, Finding)]
    if bad:
        raise TypeError(f"findings must be Finding objects (from perfkit.finding), got {bad}")
    if not rows:
        raise ValueError("findings is empty: a verdict table needs at least one finding")
    return pd.DataFrame([asdict(f) for f in rows])[COLUMNS]


#: The columns a chapter's verdict table shows, and their headers.
SHOWN = {"rule": "Rule", "claim": "What the guide said", "then": "Then (published)", "now": "Now",
         "unit": "Unit", "verdict": "Verdict", "rests_on": "Now rests on"}
#: What a row without any "now" rests on.
NOTHING_YET = "nothing yet: no measurement and no prediction"


def with_evidence(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the columns ``evidence`` and ``now_from``: a table made before they existed
    counts a "now" as measured. ``ValueError`` naming the columns it lacks."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be the DataFrame verdict_table() returns, got {type(table).__name__}")
    missing = [c for c in COLUMNS[:8] if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing}; pass the frame verdict_table() returns")
    out = table.copy()
    if "evidence" not in out:
        out["evidence"] = (out["now"] != "—").map({True: "measured", False: ""})
    if "now_from" not in out:
        out["now_from"] = ""
    return out


def rests_on(table: pd.DataFrame) -> pd.Series:
    """Per row of a verdict table: where its "now" comes from and what it is (``now_from: where``)."""
    def one(r) -> str:
        source = r.now_from or ("our measurement" if r.evidence == "measured" else NOTHING_YET)
        return f"{source}: {r.where}" if r.where else source
    return pd.Series([one(r) for r in table.itertuples(index=False)], index=table.index, dtype=object)


class VerdictTable(Table):
    """A verdict table whose rows say what they rest on: each ``<tr>`` has the class
    ``evidence-measured``, ``evidence-published``, ``evidence-model`` or ``evidence-none``, so
    predictions are styled apart from measurements (``_static/perfkit.css``)."""

    def __init__(self, frame: pd.DataFrame, evidence: Iterable[str], **kwargs):
        super().__init__(frame, **kwargs)
        self.evidence = [e or "none" for e in evidence]
        if len(self.evidence) != len(frame):
            raise ValueError(f"evidence has {len(self.evidence)} entries for {len(frame)} rows")

    #: The cell class of each shown column, as the book-wide table has them (verdicts never wrap).
    KINDS = {"Then (published)": "num", "Now": "num", "Unit": "unit", "Verdict": "verdict", "Now rests on":
             "text evidence"}

    def _repr_html_(self) -> str:
        columns = [str(c) for c in self.shown.columns]
        kinds = [self.KINDS.get(c, "text") for c in columns]
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join(f'<tr class="evidence-{e}">' + "".join(f'<td class="{k}">{html.escape(cell)}</td>'
                                                              for cell, k in zip(row, kinds)) + "</tr>"
                       for e, row in zip(self.evidence, self.rows()))
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<div class="perfkit-table-wrap"><table class="perfkit-table perfkit-verdicts">{cap}'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
