"""XLA's H100 GEMM table in the columns the chapters read: its bf16 and TF32 rows, never its fp8 ones."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from .._validate import frame_or_none, one_of, positive_int

#: XLA's dtype of a row → the math perfkit prices it with (XLA's ``float32`` dots run as TF32).
XLA_DTYPES: dict[str, str] = {"bfloat16": "bfloat16", "float32": "tf32"}


def xla_rows(frame: pd.DataFrame | None, *, dtype: str | None = None,
             batch: int | Iterable[int] | None = None) -> pd.DataFrame | None:
    """XLA's bf16 and TF32 rows (``dtype`` ``"bfloat16"`` / ``"tf32"``; XLA's own in ``xla_dtype``).

    ``dtype`` keeps one of them; ``batch`` keeps one b or several. The fp8 rows are dropped (their
    median mixes a layout kernel with the GEMM: the table's README). Given its own result, it only
    filters.
    """
    if frame_or_none("frame", frame) is None:
        return None
    if dtype is not None:
        dtype = one_of("dtype", "tf32" if dtype == "float32" else dtype, tuple(XLA_DTYPES.values()))
    if "xla_dtype" in frame:  # already these rows
        out = frame.copy()
    else:
        out = frame[frame["dtype"].isin(list(XLA_DTYPES))].copy()
        out["xla_dtype"] = out["dtype"]
        out["dtype"] = out["dtype"].map(XLA_DTYPES)
    if dtype is not None:
        out = out[out["dtype"] == dtype]
    if batch is not None:
        wanted = [positive_int("batch", batch)] if not isinstance(batch, Iterable) else \
            [positive_int("batch", b) for b in batch]
        out = out[out["b"].isin(wanted)]
    out = out.reset_index(drop=True)
    out.attrs["meta"] = dict(frame.attrs.get("meta") or {})
    return out
