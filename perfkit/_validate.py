"""Argument checks shared by every perfkit module.

Each check raises ``TypeError`` or ``ValueError`` whose message names the parameter and says what
is accepted, so that bad input never surfaces as a deep traceback from torch.
"""

from __future__ import annotations

import numbers
from typing import Any


def positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise.

    Booleans and floats are refused (``3.0`` is a float, not a dimension).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` as an ``int`` if it is an integer ≥ 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return int(value)


def positive_number(name: str, value: Any) -> float:
    """Return ``value`` as a ``float`` if it is a finite number > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not v > 0 or v == float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return v


def tile_pair(name: str, value: Any) -> tuple[int, int]:
    """Return a ``(rows, cols)`` tile as two positive ints."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of positive integers such as (128, 128), got {value!r}") from None
    return positive_int(f"{name}[0]", a), positive_int(f"{name}[1]", b)


def one_of(name: str, value: Any, accepted: tuple[str, ...]) -> str:
    """Return ``value`` (lower-cased) if it is one of ``accepted``, else raise ``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(map(repr, accepted))}, got {value!r}")
    v = value.lower()
    if v not in accepted:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, accepted))}, got {value!r}")
    return v
