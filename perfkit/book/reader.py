"""The chapters' analysis frames as a reader sees them: columns named in words, with their units.

:func:`readable` picks a frame's columns, renames them by a chapter's names (:data:`CONV_NAMES`,
:data:`MEMORY_NAMES`) and scales them (shares to percent, bytes to MB); columns of seconds (named
``*_s``) are shown in the unit the caller asks for (:func:`perfkit.units.time_column`). The
result goes to :func:`perfkit.table`. Pure: None in, None out.
"""

from __future__ import annotations

from typing import Mapping, Sequence, Union

import pandas as pd

from .._validate import frame_or_none
from ..units import time_column

__all__ = ["CONV_NAMES", "MEMORY_NAMES", "readable"]

#: A column's header, or (header, factor that turns its values into the header's unit). For a
#: column of seconds, the header's stem: its unit is added when it is shown.
Names = Mapping[str, Union[str, tuple]]

#: The convolution chapter's columns (:mod:`perfkit.book.convolutions.analysis`).
CONV_NAMES: dict[str, str | tuple] = {
    "predicted_s": "model", "autotune_s": "autotuning", "convert_s": "to NHWC", "tflops": "TFLOP/s",
    "gemm_M": "GEMM M", "gemm_N": "GEMM N", "gemm_K": "GEMM K", "ratio": "model ÷ measured",
    "speedup": "speedup (×)", "aligned_tflops": "aligned, TFLOP/s", "unaligned_tflops": "unaligned, TFLOP/s",
    "align_gain": "alignment gain (×)", "tile_gain": "tile gain (×)", "speedup_4": "speedup, 4 ch. (×)",
    "speedup_8": "speedup, 8 ch. (×)", "pad_cost_4": "F.pad cost, 4 ch. (×)", "pad_cost_8": "F.pad cost, 8 ch. (×)",
    "nhwc_gain": "NCHW ÷ NHWC (×)", "benchmark_gain": "benchmark off ÷ on (×)",
    "convert_share": ("to NHWC ÷ conv (%)", 100.0), "repay_calls": "calls to repay autotuning",
    "first": "from", "last": "to", "time_ratio": "time, to ÷ from", "tflops_ratio": "TFLOP/s, to ÷ from",
    "predicted_time_ratio": "model time, to ÷ from",
}

#: The memory-limited chapter's columns (:mod:`perfkit.book.memory_limited.experiments`, ``fusion``, ``convnet``).
MEMORY_NAMES: dict[str, str | tuple] = {
    "nchw_s": "NCHW", "nhwc_s": "NHWC", "time_saved_s": "saved", "predicted_saved_s": "model saves",
    "predicted_layers_s": "model: layers", "network_s": "whole step", "gbps": "GB/s",
    "fraction": ("% of copy ceiling", 100.0), "knee_bytes": ("knee (MB)", 1e-6), "r2": "R²",
    "speedup": "speedup (×)", "closer_to": "closer to", "two_pass_ratio": "two-pass ÷ implied bytes",
    "bytes_saved": ("saved (MB)", 1e-6), "predicted_speedup": "model speedup (×)", "in_features": "in features",
    "memory_share": ("memory-bound (%)", 100.0), "predicted_memory_share": ("model: memory-bound (%)", 100.0),
}


def readable(frame: pd.DataFrame | None, columns: Sequence[str] | None = None, *, names: Names,
             seconds: str | Mapping[str, str] | None = None) -> pd.DataFrame | None:
    """``frame``'s ``columns`` (default: all) for the page, the index dropped: each renamed (and
    scaled) by ``names``; ``seconds`` is the unit (``"s"``, ``"ms"``, ``"µs"``, ``"ns"``) of every
    column of seconds (``*_s``), or a mapping column → unit (the others stay in seconds).
    ``ValueError`` for a column the frame lacks. Pure: None in, None out."""
    if frame_or_none("frame", frame) is None:
        return None
    columns = [str(c) for c in frame.columns] if columns is None else list(columns)
    units = ({c: seconds for c in columns if c.endswith("_s")} if isinstance(seconds, str)
             else dict(seconds or {}))
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}; its columns: {list(frame.columns)}")
    unshown = [c for c in units if c not in columns]
    if unshown:
        raise ValueError(f"seconds names columns {unshown} that are not shown ({columns})")
    out = {}
    for c in columns:
        name = names.get(c, c)
        header, factor = name if isinstance(name, tuple) else (name, 1.0)
        if c.endswith("_s"):
            header, factor = time_column(header if c in names else c, units.get(c, "s"))
        out[header] = frame[c] * factor if factor != 1.0 else frame[c]
    return pd.DataFrame(out).reset_index(drop=True)
