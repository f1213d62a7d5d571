"""The newest GPUs' published GEMM tables in the columns the GEMM model reads: AMD AITER's tuned GEMMs and the
MAMF finder's best shapes (B200, B300, GB200, MI300X, MI325X, MI355X).

Each function takes the frame :func:`perfkit.published` returns (its metadata kept) and gives ``M, N, K,
dtype`` (perfkit's name), ``batch``, ``layout`` and ``time_s``; given its own result, it only filters.
"""

from __future__ import annotations

import pandas as pd

from .._validate import frame_or_none, one_of
from ..dtypes import canonical_dtype

__all__ = ["AITER_DTYPES", "AITER_LAYOUT", "aiter_rows", "mamf_rows"]

#: AITER's dtypes perfkit prices (its 4-bit and MoE tables were not extracted).
AITER_DTYPES: tuple[str, ...] = ("bfloat16", "float8", "int8")

#: AITER's linear-layer convention C = A·Bᵀ with B stored N×K: in perfkit's row-major terms A "N", B "T".
AITER_LAYOUT = "NT"


def _keep_meta(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    out = out.reset_index(drop=True)
    out.attrs["meta"] = dict(frame.attrs.get("meta") or {})
    return out


def aiter_rows(frame: pd.DataFrame | None, *, dtype: str | None = None) -> pd.DataFrame | None:
    """AITER's rows as GEMMs: ``dtype`` canonical (``float8_e4m3fn``/``…fnuz`` → ``"float8"``; AITER's own in
    ``aiter_dtype``), ``layout`` :data:`AITER_LAYOUT`, ``batch`` 1 where blank. ``dtype`` keeps one of
    :data:`AITER_DTYPES`. None for None."""
    if frame_or_none("frame", frame) is None:
        return None
    if dtype is not None:
        dtype = one_of("dtype", canonical_dtype(dtype), AITER_DTYPES)
    if "aiter_dtype" in frame:
        out = frame.copy()
    else:
        out = frame.copy()
        out["aiter_dtype"] = out["dtype"]
        out["dtype"] = out["dtype"].map(canonical_dtype)
        out["batch"] = out["batch"].fillna(1).astype(int)
        out["layout"] = AITER_LAYOUT
    if dtype is not None:
        out = out[out["dtype"] == dtype]
    return _keep_meta(out, frame)


def mamf_rows(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The MAMF finder's best shape per GPU and dtype as GEMMs (``dtype`` canonical, ``layout`` "NN": every
    dimension is a multiple of 256, so the layout cannot matter to alignment), only the GPUs perfkit has a spec
    for. None for None."""
    if frame_or_none("frame", frame) is None:
        return None
    out = frame[frame["device"].astype(str) != ""].copy()
    if "mamf_dtype" not in out:
        out["mamf_dtype"] = out["dtype"]
        out["dtype"] = out["dtype"].map(canonical_dtype)
        out["layout"] = "NN"
    return _keep_meta(out, frame)
