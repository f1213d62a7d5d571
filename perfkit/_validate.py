"""Argument checks shared by every perfkit module.

Each check returns the value in its plain Python type, or raises ``TypeError`` (wrong kind of
value) or ``ValueError`` (right kind, wrong value) whose message names the parameter and says
what is accepted, so that bad input never surfaces as a deep traceback from torch. perfkit
validates nowhere else.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from .dtypes import DTYPES, canonical_dtype


def _is_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def positive_int(name: str, value: Any) -> int:
    """``value`` as an ``int`` if it is a positive integer (booleans and floats such as ``3.0`` are refused)."""
    if not _is_int(value):
        raise TypeError(f"{name} must be a positive integer, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def non_negative_int(name: str, value: Any) -> int:
    """``value`` as an ``int`` if it is an integer ≥ 0."""
    if not _is_int(value):
        raise TypeError(f"{name} must be a non-negative integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return int(value)


def int_in_range(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an ``int`` if it is an integer in ``low … high``."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer in {low}…{high}, got {value!r} ({type(value).__name__})")
    if not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}…{high}, got {value}")
    return int(value)


def power_of_two(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` if it is a power of two in ``low … high`` (no upper bound if ``None``)."""
    v = positive_int(name, value)
    if v & (v - 1) or v < low or (high is not None and v > high):
        span = f"{low}…{high}" if high is not None else f"≥ {low}"
        raise ValueError(f"{name} must be a power of two in {span}, got {v}")
    return v


def positive_number(name: str, value: Any) -> float:
    """``value`` as a ``float`` if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return v


def non_negative_number(name: str, value: Any, unit: str = "") -> float:
    """``value`` as a ``float`` if it is a finite number ≥ 0; ``unit`` (e.g. ``"seconds"``) goes in the message."""
    what = f"a finite number of {unit} ≥ 0" if unit else "a non-negative finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be {what}, got {value}")
    return v


def boolean(name: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False`` (numpy booleans too); ``1`` and ``"yes"`` are refused."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def tile_pair(name: str, value: Any) -> tuple[int, int]:
    """A ``(rows, cols)`` tile as two positive ints."""
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of positive integers such as (128, 128), got {value!r}") from None
    return positive_int(f"{name}[0]", a), positive_int(f"{name}[1]", b)


def positive_ints(name: str, value: Any, length: int, example: str) -> tuple[int, ...]:
    """``value``, a tuple or list of ``length`` positive integers (e.g. an (N, C, H, W) shape), as a
    tuple of ints; ``example`` (such as ``"(M, N, K)"``) goes in the message."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != length:
        raise TypeError(f"{name} must hold {example} tuples of {length} positive integers, got {value!r}")
    return tuple(positive_int(name, v) for v in value)


def int_or_pair(name: str, value: Any, check: Callable[[str, Any], int] = positive_int) -> tuple[int, int]:
    """An int ``v`` (→ ``(v, v)``) or an ``(h, w)`` pair, each element checked by ``check``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an integer or an (h, w) pair, got {value!r}")
        return check(f"{name}[0]", value[0]), check(f"{name}[1]", value[1])
    v = check(name, value)
    return v, v


def one_of(name: str, value: Any, accepted: tuple[str, ...]) -> str:
    """``value`` (lower-cased) if it is one of ``accepted``, else raise ``ValueError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(map(repr, accepted))}, got {value!r}")
    v = value.lower()
    if v not in accepted:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, accepted))}, got {value!r}")
    return v


def sequence_of(name: str, value: Any, check: Callable[[str, Any], Any] | None = None, *,
                single: bool = False) -> list:
    """``value``, a non-empty list, tuple or other iterable (not a string), as a list, each item
    passed through ``check(name, item)``; with ``single``, one item alone (anything but a list,
    tuple or range) stands for a list of one."""
    if single and not isinstance(value, (list, tuple, range)):
        items = [value]
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list or tuple of values, got {value!r}")
    else:
        items = list(value)
    if not items:
        raise ValueError(f"{name} must hold at least one value, got {value!r}")
    return [check(name, v) for v in items] if check is not None else items


def dtype_name(name: str, value: Any, accepted: tuple[str, ...] = DTYPES) -> str:
    """The canonical name (:func:`perfkit.dtypes.canonical_dtype`) of the dtype ``value`` (a name,
    an alias such as ``"fp16"`` or a ``torch.dtype``) if it is one of ``accepted``."""
    try:
        d = canonical_dtype(value)
    except TypeError:
        raise TypeError(f"{name} must be a dtype name or torch.dtype, one of {', '.join(map(repr, accepted))}; "
                        f"got {value!r}") from None
    except ValueError:
        d = None
    if d not in accepted:
        raise ValueError(f"{name} must be one of the dtypes {', '.join(map(repr, accepted))}, got {value!r}")
    return d


def dtype_names(name: str, value: Any, accepted: tuple[str, ...] = DTYPES) -> list[str]:
    """``value``, one dtype or a non-empty sequence of them, as a list of canonical names from ``accepted``."""
    return sequence_of(name, value, lambda n, v: dtype_name(n, v, accepted), single=True)


def callable_or_none(name: str, value: Any) -> Callable | None:
    """``value`` if it is callable or None (a callback such as an experiment's ``on_row``)."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a callable or None, got {value!r}")
    return value


def optional_str(name: str, value: Any) -> str | None:
    """``value`` if it is a string or ``None``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None, got {value!r}")
    return value


def frame_or_none(name: str, value: Any) -> pd.DataFrame | None:
    """``value`` if it is a pandas DataFrame or None (no data: analyses pass it through)."""
    if value is not None and not isinstance(value, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame or None, got {type(value).__name__}")
    return value


def frame_with_columns(name: str, value: Any, columns: Iterable[str], what: str) -> pd.DataFrame:
    """``value`` if it is a DataFrame with ``columns``: ``TypeError`` (not "an ``what`` DataFrame") or
    ``ValueError`` naming the columns it lacks."""
    if not isinstance(value, pd.DataFrame):
        raise TypeError(f"{name} must be an {what} DataFrame, got {type(value).__name__}")
    missing = set(columns) - set(value.columns)
    if missing:
        raise ValueError(f"{name} lacks the {what} columns {sorted(missing)}")
    return value


def folder(name: str, value: Any) -> Path:
    """A folder path given as ``str`` or ``os.PathLike``, as a :class:`~pathlib.Path` (not checked to exist)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a folder path (str or os.PathLike), got {value!r}")
    return Path(value)


def zero_arg_callable(name: str, fn: Any) -> Callable[[], Any]:
    """``fn`` if it can be called with no arguments (builtins without a signature are accepted)."""
    if not callable(fn):
        raise TypeError(f"{name} must be a zero-argument callable such as lambda: torch.matmul(a, b), "
                        f"got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    try:
        sig.bind()
    except TypeError:
        raise TypeError(f"{name} must be callable with no arguments (wrap it: lambda: f(x)); "
                        f"{getattr(fn, '__qualname__', fn)!r} has signature {sig}") from None
    return fn
