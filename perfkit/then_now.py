"""Then vs now: published measurements beside ours, shape by shape.

Baidu DeepBench published GEMM, convolution and RNN timings from a Tesla V100 (cuBLAS 10.1 and
cuDNN 7.6, 2019) and a Tesla P100 (cuBLAS 8.0, 2018); see :func:`perfkit.data.published`. Several
of the book's experiments measure the same GEMMs, convolutions or RNN layers. :func:`counterpart`
picks the published rows that match an experiment
(:func:`perfkit.provenance.published_counterparts` loads them for every published GPU), so a
figure can draw them beside a live or recorded run; :func:`layout_spread` and :func:`speedups`
turn both into the numbers a verdict is computed from. Nothing here reads ``data/``.

Layout names: DeepBench uses BLAS's column-major names, perfkit torch's row-major ones, so "NN"
is not the same memory order in both. :func:`layout_spread` compares the slowest with the fastest
layout of each shape, and :func:`speedups` the fastest layout of each side, which does not depend
on the naming. Times are seconds.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from .dtypes import canonical_dtype

#: Experiments with a published counterpart, and which published rows match them.
COUNTERPARTS: dict[str, str] = {
    "gemm_sizes": "every published GEMM in the dtype (throughput against work)",
    "gemm_small_n": "M = K = 2560 in NN with N ≤ 256 (Baidu's minibatch shapes: N = 16…128)",
    "gemm_transposes": "every published GEMM shape measured in more than one layout",
    "fc_batch": "M = K = 4096 in NN: the forward GEMM of a 4096→4096 layer at batch N = 16…7000",
    "rnn_cudnn": "every published training RNN layer (cuDNN forward, input GEMM skipped), cell "
                 "'vanilla' named 'rnn'",
    "conv_deepbench": "every published training convolution in the dtype (cuDNN forward, backward-data and "
                      "backward-filter times)",
}

#: The kind of published data (:func:`perfkit.data.published`) each counterpart comes from.
KIND: dict[str, str] = {name: next((k for k in ("rnn", "conv") if name.startswith(k)), "gemm")
                        for name in COUNTERPARTS}

#: The columns that name a GEMM shape.
SHAPE = ["M", "N", "K", "dtype"]

#: The columns that name a recurrent layer's shape (the cell is "rnn", "gru" or "lstm").
RNN_SHAPE = ["cell", "hidden", "batch", "timesteps", "dtype"]

#: The columns that name a convolution's shape, in DeepBench's names: input W×H×C×N, K filters of R×S
#: (height × width), pads and strides per axis.
CONV_SHAPE = ["W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w", "dtype"]


def counterpart(experiment: str, frame: pd.DataFrame, dtype: str = "float16") -> pd.DataFrame:
    """The rows of a published ``frame`` (GEMMs, RNN layers or convolutions: :data:`KIND`) that match
    ``experiment`` in ``dtype`` (see :data:`COUNTERPARTS`).

    The result keeps ``frame``'s metadata (``attrs``), so figures label it as published. Raises
    ``LookupError`` for an experiment without a counterpart, naming those with one.
    """
    if experiment not in COUNTERPARTS:
        raise LookupError(f"experiment {experiment!r} has no published counterpart; these do: "
                          f"{', '.join(COUNTERPARTS)}")
    if KIND[experiment] == "rnn":
        _check_columns(frame, RNN_SHAPE + ["time_s"], "frame")
        rows = frame[frame["dtype"] == canonical_dtype(dtype)].assign(
            cell=lambda f: f["cell"].replace({"vanilla": "rnn"}))
        rows = rows.sort_values(RNN_SHAPE).reset_index(drop=True)
        rows.attrs = dict(frame.attrs)
        return rows
    if KIND[experiment] == "conv":  # DeepBench's order (its layers follow each other within a network)
        _check_columns(frame, CONV_SHAPE + ["time_s"], "frame")
        rows = frame[frame["dtype"] == canonical_dtype(dtype)].reset_index(drop=True)
        rows.attrs = dict(frame.attrs)
        return rows
    _check_columns(frame, SHAPE + ["layout", "time_s"], "frame")
    rows = frame[frame["dtype"] == canonical_dtype(dtype)]
    if experiment == "gemm_small_n":
        rows = rows[(rows["M"] == 2560) & (rows["K"] == 2560) & (rows["N"] <= 256) & (rows["layout"] == "NN")]
    elif experiment == "fc_batch":
        rows = rows[(rows["M"] == 4096) & (rows["K"] == 4096) & (rows["layout"] == "NN")]
    elif experiment == "gemm_transposes":
        rows = rows[rows.groupby(SHAPE)["layout"].transform("nunique") > 1]
    rows = rows.sort_values(["M", "N", "K", "layout"]).reset_index(drop=True)
    rows.attrs = dict(frame.attrs)
    return rows


def _check_columns(frame: pd.DataFrame, needed: list[str], param: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{param} must be a DataFrame, got {type(frame).__name__}")
    lacking = [c for c in needed if c not in frame.columns]
    if lacking:
        raise ValueError(f"{param} lacks the column(s) {lacking}; it needs {needed}")


def layout_spread(frame: pd.DataFrame) -> pd.DataFrame:
    """Per shape measured in two or more layouts: the fastest and slowest layout and their ratio.

    Columns: M, N, K, dtype, layouts (how many), fastest, slowest (layout names, in the frame's
    own convention), fastest_s, slowest_s (seconds) and ``spread`` = slowest_s / fastest_s
    (1.0: layout does not matter). Sorted by spread, largest first; keeps ``frame``'s ``attrs``.
    """
    _check_columns(frame, SHAPE + ["layout", "time_s"], "frame")
    rows = []
    for shape, g in frame.groupby(SHAPE, sort=False):
        by_layout = g.groupby("layout")["time_s"].median()
        if len(by_layout) < 2:
            continue
        rows.append((*shape, len(by_layout), by_layout.idxmin(), by_layout.idxmax(), by_layout.min(),
                     by_layout.max()))
    out = pd.DataFrame(rows, columns=SHAPE + ["layouts", "fastest", "slowest", "fastest_s", "slowest_s"])
    out["spread"] = out["slowest_s"] / out["fastest_s"]
    out = out.sort_values("spread", ascending=False, kind="stable").reset_index(drop=True)
    out.attrs = dict(frame.attrs)
    return out


def spread_summary(frames: Mapping[str, pd.DataFrame | None]) -> pd.DataFrame:
    """:func:`layout_spread` of each named frame, summarised: one row per name and dtype.

    Columns: name, dtype, shapes, median_spread, worst_spread and worst_shape (``"M×N×K"``).
    None frames and frames with no shape in two layouts are left out.
    """
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of name → DataFrame or None, got {type(frames).__name__}")
    rows = []
    for name, frame in frames.items():
        if frame is None:
            continue
        for dtype, g in layout_spread(frame).groupby("dtype", sort=False):
            w = g.iloc[0]  # sorted, largest spread first
            rows.append((name, dtype, len(g), g["spread"].median(), w["spread"], f"{w.M}×{w.N}×{w.K}"))
    return pd.DataFrame(rows, columns=["name", "dtype", "shapes", "median_spread", "worst_spread", "worst_shape"])


def speedups(now: pd.DataFrame | None, then: pd.DataFrame | None, on: list[str] | None = None, *,
             column: str = "time_s") -> pd.DataFrame | None:
    """The shapes both frames measured: the fastest time of each and ``speedup`` = then_s / now_s.

    ``on`` names the shape columns: :data:`SHAPE` (GEMMs, the default; the fastest layout counts),
    :data:`RNN_SHAPE` (recurrent layers) or :data:`CONV_SHAPE` (convolutions). ``column`` is the
    time compared (seconds; e.g. a convolution's ``"bwd_params_time_s"``); shapes without it on
    either side are left out. Columns: ``on``, then_s, now_s (seconds), speedup (> 1: ``now`` is
    faster). Empty when the frames share no shape; None when either frame is None (no recording
    yet), so a chapter passes it straight to :func:`perfkit.table`.
    """
    on = SHAPE if on is None else on
    if isinstance(on, str) or not isinstance(on, list) or not all(isinstance(c, str) for c in on):
        raise TypeError(f"on must be a list of column names such as {SHAPE}, {RNN_SHAPE} or {CONV_SHAPE}, "
                        f"got {on!r}")
    if not isinstance(column, str):
        raise TypeError(f"column must be the name of a time column such as 'time_s', got {column!r}")
    if now is None or then is None:
        return None
    best = []
    for name, frame in (("now", now), ("then", then)):
        _check_columns(frame, on + [column], name)
        best.append(frame.groupby(on)[column].min().rename(f"{name}_s"))
    out = pd.concat(best, axis=1, join="inner").dropna().reset_index()[on + ["then_s", "now_s"]]
    out["speedup"] = out["then_s"] / out["now_s"]
    return out


def speedup_table(now: pd.DataFrame | None, then: pd.DataFrame | None, on: list[str] | None = None, *,
                  column: str = "time_s") -> pd.DataFrame | None:
    """:func:`speedups` for a reader: the shape columns, ``then_s`` and ``now_s`` (seconds; show
    them with ``pk.table(..., seconds={"then_s": "µs", "now_s": "µs"})``) and ``speedup (×)``
    (> 1: ``now`` is faster).

    None when either frame is None, as :func:`speedups`.
    """
    out = speedups(now, then, on, column=column)
    return None if out is None else out.rename(columns={"speedup": "speedup (×)"})


__all__ = ["CONV_SHAPE", "COUNTERPARTS", "KIND", "RNN_SHAPE", "SHAPE", "counterpart", "layout_spread", "speedups",
           "speedup_table", "spread_summary"]
