"""The pieces of an exercise: :class:`Exercise` (a problem and how to compute its answer) and
:class:`Check` (the verdict on a reader's answer). See :mod:`perfkit.book.problems`."""

from __future__ import annotations

import html
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Exercise:
    """One problem: ``id`` (``"gemm-1"``), the ``chapter`` it ends (``"02_gemm"``), its
    ``question`` in one or two sentences, and ``solve``, which computes the answer with perfkit.

    A numeric answer is right within ``rel_tol`` (relative; 0 means exactly) and close within
    ``close_tol``; a text answer is one of ``choices`` (compared without case or spaces).
    ``unit`` names the answer's unit; ``fmt`` formats it; ``hint`` is said on a wrong or close
    answer (how to get there, not the answer); ``mistakes`` are ``(solve, why)`` pairs of common
    wrong answers, recognised and explained.
    """

    id: str
    chapter: str
    question: str
    solve: Callable[[], Any]
    unit: str = ""
    rel_tol: float = 0.01
    close_tol: float = 0.10
    choices: tuple[str, ...] = ()
    fmt: str = "{:,.4g}"
    hint: str = ""
    mistakes: tuple[tuple[Callable[[], Any], str], ...] = field(default=())

    def answer(self) -> Any:
        """The answer, computed now."""
        value = self.solve()
        if self.choices:
            if _norm(value) not in {_norm(c) for c in self.choices}:
                raise RuntimeError(f"exercise {self.id}: solve() gave {value!r}, not one of {self.choices}")
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise RuntimeError(f"exercise {self.id}: solve() gave {value!r}, not a number")
        return value

    def answer_text(self) -> str:
        """The answer as the worked solution states it (``fmt`` and ``unit``)."""
        value = self.answer()
        text = str(value) if self.choices else self.fmt.format(value)
        return f"{text} {self.unit}".strip()


@dataclass(frozen=True)
class Check:
    """The verdict on one answer: ``status`` (right, close, wrong or unanswered) and why."""

    id: str
    status: str
    message: str

    def __bool__(self) -> bool:
        return self.status == "right"

    def __str__(self) -> str:
        return f"{self.id}: {self.status}. {self.message}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colour = {"right": "#2e7d32", "close": "#b26a00", "wrong": "#c62828"}.get(self.status, "#555")
        return (f'<p class="perfkit-check"><b style="color:{colour}">{html.escape(self.id)}: '
                f'{html.escape(self.status)}.</b> {html.escape(self.message)}</p>')


def _norm(text: Any) -> str:
    return "".join(str(text).lower().split())


__all__ = ["Check", "Exercise"]
