"""The book's problems, with answers computed by perfkit and a self-check for the reader.

    >>> import perfkit as pk
    >>> pk.book.problems.check("gemm-1", 1409)      # right, close or wrong, and why
    >>> pk.book.problems.answer("gemm-1")           # the answer, from perfkit's own functions
    >>> pk.book.problems.table("02_gemm")           # the problems of a chapter

Every answer is a function of perfkit (never a number typed in), so when the models change the
answers follow. One module per chapter holds that chapter's problems (``EXERCISES``).
"""

from __future__ import annotations

import importlib
import math
import numbers
from typing import Any

import pandas as pd

from .chapters import CHAPTERS
from .exercise import Check, Exercise, _norm

STATUSES = ("right", "close", "wrong", "unanswered")


_REGISTRY: dict[str, Exercise] | None = None


def _registry() -> dict[str, Exercise]:
    global _REGISTRY
    if _REGISTRY is None:
        found: dict[str, Exercise] = {}
        for name in (*CHAPTERS, "workshop"):  # each chapter folder's problems module, then the labs'
            module = importlib.import_module(f"perfkit.book.{name}.problems")
            for ex in module.EXERCISES:
                if ex.id in found:
                    raise RuntimeError(f"two exercises share the id {ex.id!r}")
                found[ex.id] = ex
        _REGISTRY = found
    return _REGISTRY


def get(exercise_id: str) -> Exercise:
    """The exercise ``exercise_id``; ``LookupError`` listing the known ids if there is none."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise_id must be a string such as 'gemm-1', got {type(exercise_id).__name__}")
    found = _registry()
    if exercise_id not in found:
        raise LookupError(f"no exercise {exercise_id!r}; known: {', '.join(found)}")
    return found[exercise_id]


def answer(exercise_id: str) -> Any:
    """The answer to ``exercise_id``, computed by perfkit."""
    return get(exercise_id).answer()


def all_exercises(chapter: str | None = None) -> list[Exercise]:
    """Every exercise, or those of ``chapter`` (e.g. ``"02_gemm"``), in reading order."""
    found = list(_registry().values())
    if chapter is None:
        return found
    chosen = [ex for ex in found if ex.chapter == chapter]
    if not chosen:
        chapters = sorted({ex.chapter for ex in found})
        raise LookupError(f"no exercises for chapter {chapter!r}; chapters with exercises: {chapters}")
    return chosen


def table(chapter: str | None = None) -> pd.DataFrame:
    """The exercises (id, chapter, question, unit) as a table; answers are not shown."""
    return pd.DataFrame([{"id": ex.id, "chapter": ex.chapter, "question": ex.question, "unit": ex.unit}
                         for ex in all_exercises(chapter)])


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace(",", "").replace("_", ""))
        except ValueError:
            return None
    try:  # numpy and torch scalars
        return float(value)
    except (TypeError, ValueError):
        return None


def _matches(expected: float, given: float, rel_tol: float) -> bool:
    if rel_tol == 0:
        return given == expected
    return math.isclose(given, expected, rel_tol=rel_tol, abs_tol=1e-12)


def check(exercise_id: str, given: Any) -> Check:
    """Check the reader's answer ``given`` to ``exercise_id``: right, close or wrong, and why.

    ``None`` means not answered yet (the question is repeated). A numeric answer may be a number
    or a string such as ``"1,409"``; a choice is compared without case or spaces.
    """
    ex = get(exercise_id)
    unit = f" (in {ex.unit})" if ex.unit else ""
    if given is None:
        how = f" one of {', '.join(ex.choices)}" if ex.choices else f" a number{unit}"
        return Check(ex.id, "unanswered", f"Replace None by your answer:{how}.")
    expected = ex.answer()
    hint = f" Hint: {ex.hint}" if ex.hint else ""
    if ex.choices:
        if _norm(given) == _norm(expected):
            return Check(ex.id, "right", f"{given!s} is right.")
        if _norm(given) not in {_norm(c) for c in ex.choices}:
            return Check(ex.id, "wrong", f"{given!r} is not one of the choices ({', '.join(ex.choices)}).")
        for solve, why in ex.mistakes:
            if _norm(given) == _norm(solve()):
                return Check(ex.id, "wrong", f"{given!s} is not it: {why}")
        return Check(ex.id, "wrong", f"{given!s} is not it.{hint}")
    value = _number(given)
    if value is None:
        return Check(ex.id, "wrong", f"expected a number{unit}, got {given!r}.")
    if _matches(float(expected), value, ex.rel_tol):
        return Check(ex.id, "right", f"{ex.fmt.format(value)} is right{unit}.")
    for solve, why in ex.mistakes:
        if _matches(float(solve()), value, max(ex.rel_tol, 1e-9)):
            return Check(ex.id, "wrong", f"{ex.fmt.format(value)} is a common slip: {why}")
    off = abs(value - float(expected)) / abs(float(expected)) if expected else math.inf
    if off <= ex.close_tol:
        side = "high" if value > float(expected) else "low"
        return Check(ex.id, "close", f"{ex.fmt.format(value)} is close but {off:.1%} too {side}{unit}."
                     f"{hint}")
    return Check(ex.id, "wrong", f"{ex.fmt.format(value)} is off by more than {ex.close_tol:.0%}{unit}.{hint}")


__all__ = ["Check", "Exercise", "STATUSES", "all_exercises", "answer", "check", "get", "table"]
