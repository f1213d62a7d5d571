"""What a page says where the published tables are not on this machine: how to get them.

The notes are :class:`perfkit.display.Note` objects (styled admonitions in a notebook).
"""

from __future__ import annotations

import math
from typing import Any

from ..display import Note, show
from .read import HOW_TO_GET, has_published

__all__ = ["PUBLISHED_ABSENT", "absent_note", "printed", "published_absent"]


#: Why a number, table or figure computed from published measurements is missing, and how to get them
#: (``pk.table(frame, PUBLISHED_ABSENT, ...)`` says it in place of the table).
PUBLISHED_ABSENT = f"the published measurements this rests on are not on this machine. To see them, {HOW_TO_GET}."


def published_absent(instead: str = "") -> Note:
    """The note shown where published measurements are not here (:data:`PUBLISHED_ABSENT`);
    ``instead`` says what the reader sees in their place."""
    return Note(PUBLISHED_ABSENT[:1].upper() + PUBLISHED_ABSENT[1:], "Published data missing", instead)


def absent_note(*sources: str) -> Note | None:
    """A one-line note saying how to get the published tables ``sources`` where any is absent (the
    figures then draw the model's prediction); None when all are here."""
    absent = [s for s in sources if not has_published(s)]
    if not absent:
        return None
    return Note(f"The published table{'s' if len(absent) > 1 else ''} {', '.join(absent)} "
                f"{'are' if len(absent) > 1 else 'is'} not here, so the figures below show the model's prediction "
                f"instead. To see the measurements: {HOW_TO_GET}.", "Published data not found")


def printed(template: str, *values: Any, missing: Note | None = None) -> None:
    """``print(template.format(*values))``; where a value is None or NaN (the data it is computed from
    is absent), show the note ``missing`` instead (default: :func:`published_absent`)."""
    if not isinstance(template, str):
        raise TypeError(f"template must be a format string such as 'ran {{:.1f}}×', got {template!r}")
    if missing is not None and not isinstance(missing, Note):
        raise TypeError(f"missing must be a perfkit Note or None, got {type(missing).__name__}")
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        show(missing or published_absent())
    else:
        print(template.format(*values))
