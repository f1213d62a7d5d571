"""Published GEMM timings of modern GPUs against the GEMM model (the GEMM chapter).

Pure functions of published frames, never of perfkit's own runs:

- **OpenXLA's H100 table** (``pk.published("xla_h100_gemm")``: batched ``[b,M,K]×[b,K,N]``,
  b ∈ {1, 2, 4}, M, N, K ∈ 256 … 4096, CUPTI kernel time, 2025). :func:`xla_rows` keeps the bf16
  and f32 rows (f32 runs as TF32: relabelled ``dtype="tf32"``); the fp8 rows mix a layout kernel
  into their median and are never used. :func:`size_sweep` cuts NVIDIA's two size sweeps out of it,
  :func:`batched_rows` the b = 1, 2, 4 rows of the square shapes.
- **DeepGEMM's H800 fp8 table** (``pk.published("deepgemm_fp8")``: block-scaled fp8 GEMMs in
  DeepGEMM's own kernels). :func:`deepgemm_dense` keeps the dense "Normal GEMMs" (the latest
  publication of each shape), :func:`deepgemm_grouped` the grouped ones (``groups`` GEMMs in one
  launch: the model's ``batch``).

:func:`with_model` adds the model's prediction to any of them, with the row's half (``fit`` /
``held out`` where the model was fitted to that table, :func:`perfkit.validation.half_labels`);
:func:`error_table` and :func:`fp8_regimes` summarise the error; :func:`model_sweep` gives the model's
rows alone (for its curves, and in place of absent data). :func:`fit_tf32` is the grid search behind
:data:`perfkit.ceilings.TF32_FIT`. One-number functions (:func:`size_effect`,
:func:`batching_gain`, :func:`fp8_large_m_fraction`, :func:`fp8_small_m_bandwidth`) return None
without data. Functions given None return None. Units: seconds, FLOP/s (TFLOP/s in ``tflops``),
bytes/s (GB/s in ``gbps``).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..._validate import frame_or_none, one_of, positive_int
from ...ceilings import Ceilings, default_ceilings
from ...devices import DeviceSpec, resolve_spec
from ...meta import FrameMeta
from ...gemm_model import GemmModel, explain_gemm, prediction_error
from ...published_data.xla import XLA_DTYPES, xla_rows  # noqa: F401  (the chapter reads gp.xla_rows)
from ...validation import fit_half, half_labels, with_predictions

__all__ = ["ERROR_WORDS", "SWEEPS", "XLA_DTYPES", "batched_rows", "batching_gain", "deepgemm_dense",
           "deepgemm_grouped", "error_table", "fit_tf32", "fp8_large_m_fraction", "fp8_regimes",
           "fp8_small_m_bandwidth", "model_sweep", "size_effect", "size_sweep",
           "throughput_by_work", "time_ratio_table", "with_model", "xla_rows"]

#: XLA's dtypes perfkit uses → the dtype they run as (f32 dots run on TF32 Tensor Cores).
#: NVIDIA's two size sweeps (its Figures 3 and 4), as cut from XLA's grid: the dimension that
#: varies, and the fixed ones.
SWEEPS: dict[str, tuple[str, str]] = {"mn": ("M = N", "K = 4096"), "k": ("K", "M = N = 4096")}
_FIXED = 4096
_POWERS = tuple(2**k for k in range(8, 13))  # XLA's sizes: 256 … 4096


def _frame(frame: Any, name: str = "frame") -> pd.DataFrame | None:
    return frame_or_none(name, frame)


def _keep_meta(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    out.attrs["meta"] = dict(frame.attrs.get("meta") or {})
    return out


def with_model(frame: pd.DataFrame | None, spec: DeviceSpec | None = None, *, model: GemmModel | None = None,
               ceilings: Ceilings | str | None = None) -> pd.DataFrame | None:
    """``frame`` with the model's ``predicted_s`` and ``roofline_s``, ``predicted_tflops``, ``error``
    (``predicted/measured − 1``; NaN for model-only rows) and ``half`` (``fit``, ``held out`` or
    ``not fitted``). ``spec`` defaults to the frame's device; the batch is ``b`` or ``groups``."""
    if _frame(frame) is None:
        return None
    out = with_predictions(frame, spec, model=model, ceilings=ceilings)
    batch = out["b"] if "b" in out else out["groups"] if "groups" in out else 1
    out["predicted_tflops"] = 2.0 * batch * out["M"] * out["N"] * out["K"] / out["predicted_s"] / 1e12
    out["error"] = out["predicted_s"] / out["time_s"] - 1
    out["half"] = half_labels(out)
    return out


def size_sweep(frame: pd.DataFrame | None, sweep: str = "mn") -> pd.DataFrame | None:
    """The b = 1 rows of NVIDIA's sweep ``"mn"`` (M = N varies, K = 4096) or ``"k"`` (K varies,
    M = N = 4096), with the varying dimension in ``size``, sorted by dtype and size."""
    sweep = one_of("sweep", sweep, tuple(SWEEPS))
    if _frame(frame) is None:
        return None
    f = frame[(frame["b"] == 1) & (frame["M"] == frame["N"])] if "b" in frame else frame[frame["M"] == frame["N"]]
    f = f[f["K"] == _FIXED] if sweep == "mn" else f[f["M"] == _FIXED]
    out = f.assign(size=f["M"] if sweep == "mn" else f["K"], sweep=sweep).sort_values(["dtype", "size"])
    return _keep_meta(out.reset_index(drop=True), frame)


def model_sweep(spec: DeviceSpec, sweep: str = "mn", *, dtypes: Sequence[str] = ("bfloat16", "tf32"),
                sizes: Sequence[int] = _POWERS, batch: int = 1) -> pd.DataFrame:
    """The model's rows of a sweep (as :func:`size_sweep` cuts it) on ``spec``: ``time_s`` NaN,
    ``predicted_s``, ``tflops`` predicted; ``attrs["model_of"]`` names the GPU."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (e.g. pk.device_spec('H100-SXM')), got {spec!r}")
    sweep = one_of("sweep", sweep, tuple(SWEEPS))
    batch = positive_int("batch", batch)
    rows = []
    for dtype, size in itertools.product(dtypes, sizes):
        size = positive_int("sizes", size)
        M = N = size if sweep == "mn" else _FIXED
        K = _FIXED if sweep == "mn" else size
        p = explain_gemm(M, N, K, dtype, spec, batch=batch)
        rows.append({"dtype": p.dtype, "b": batch, "M": M, "N": N, "K": K, "size": size, "sweep": sweep,
                     "time_s": float("nan"), "predicted_s": p.predicted_s, "tflops": p.achieved_flop_s / 1e12,
                     "predicted_tflops": p.achieved_flop_s / 1e12, "bound": p.bound})
    out = pd.DataFrame(rows)
    out.attrs["model_of"] = spec.label
    return out


#: Reader's names of :func:`error_table`'s columns (``readable=True``).
ERROR_WORDS: dict[str, str] = {"n": "GEMMs", "median_abs": "median |error|", "p90_abs": "90th pct. |error|",
                               "median": "median error", "optimistic": "optimistic"}


def error_table(frame: pd.DataFrame | None, *, by: Sequence[str] = ("dtype", "batch"),
                readable: bool = False) -> pd.DataFrame | None:
    """The model's error on a :func:`with_model` frame per ``by`` and half: ``n``, ``median_abs``,
    ``p90_abs`` (of ``|predicted/measured − 1|``), ``median`` (signed: < 0 is optimistic) and
    ``optimistic`` (the share predicted too fast). ``"batch"`` in ``by`` means ``b = 1`` / ``b > 1``;
    ``readable`` names the columns for a reader (:data:`ERROR_WORDS`)."""
    if _frame(frame) is None:
        return None
    f = frame[frame["predicted_s"].notna() & frame["time_s"].notna()]
    bcol = "b" if "b" in f else "groups" if "groups" in f else None
    f = f.assign(batch=np.where(f[bcol] > 1, "b > 1", "b = 1") if bcol else "b = 1")
    keys = list(by) + ["half"]
    missing = [k for k in keys if k not in f]
    if missing:
        raise ValueError(f"by names columns the frame lacks: {missing}; it has {sorted(f.columns)}")
    rows = []
    for key, g in f.groupby(keys, sort=False):
        e = prediction_error(g["time_s"], g["predicted_s"])
        rows.append({**dict(zip(keys, key)), "n": e["n"], "median_abs": e["median_abs"], "p90_abs": e["p90_abs"],
                     "median": e["median"], "optimistic": e["optimistic"]})
    out = pd.DataFrame(rows, columns=keys + ["n", "median_abs", "p90_abs", "median", "optimistic"])
    return out.rename(columns=ERROR_WORDS) if readable else out


def batched_rows(frame: pd.DataFrame | None, dtype: str = "bfloat16") -> pd.DataFrame | None:
    """The square shapes (M = N = K) of ``dtype`` for every b, with ``size`` = M; predictions kept
    if the frame has them."""
    if _frame(frame) is None:
        return None
    f = frame[(frame["dtype"] == dtype) & (frame["M"] == frame["N"]) & (frame["N"] == frame["K"])]
    return _keep_meta(f.assign(size=f["M"]).sort_values(["b", "size"]).reset_index(drop=True), frame)


def _deepgemm(frame: pd.DataFrame, dense: bool, latest: bool) -> pd.DataFrame:
    f = frame[frame["table"].str.startswith("Normal") == dense].copy()
    f["published_dtype"], f["dtype"] = f["dtype"], "float8"
    if latest:
        f = f.sort_values("published").groupby(["table", "groups", "M", "N", "K"], sort=False).tail(1)
    return _keep_meta(f.sort_values(["M", "N", "K"]).reset_index(drop=True), frame)


def deepgemm_dense(frame: pd.DataFrame | None, *, latest: bool = True) -> pd.DataFrame | None:
    """DeepGEMM's dense "Normal GEMMs" (one GEMM each), ``dtype="float8"`` (the published one in
    ``published_dtype``); ``latest`` keeps each shape's latest publication (2025-03-25 improved the
    large-M kernels; the small-M rows are unchanged)."""
    return None if _frame(frame) is None else _deepgemm(frame, True, latest)


def deepgemm_grouped(frame: pd.DataFrame | None, *, latest: bool = True) -> pd.DataFrame | None:
    """DeepGEMM's grouped GEMMs for MoE models: ``groups`` GEMMs of M (per group) × N × K in one launch."""
    return None if _frame(frame) is None else _deepgemm(frame, False, latest)


def fp8_regimes(frame: pd.DataFrame | None, spec: DeviceSpec | None = None) -> pd.DataFrame | None:
    """Per regime of a :func:`with_model` DeepGEMM frame, small M (≤ 128: memory-bound) and large M:
    shapes, measured TB/s and TFLOP/s ranges, best fraction of the fp8 peak, model's error."""
    if _frame(frame) is None:
        return None
    spec = resolve_spec(spec, default=FrameMeta.of(frame).device or "H800")
    peak = spec.peak_flop_s("float8") / 1e12
    rows = []
    for regime, g in (("M ≤ 128 (memory-bound)", frame[frame["M"] <= 128]),
                      ("M ≥ 1024", frame[frame["M"] >= 1024])):
        if not len(g):
            continue
        e = prediction_error(g["time_s"], g["predicted_s"])
        rows.append({"regime": regime, "GEMMs": len(g), "TB/s (min)": g["gbps"].min() / 1e3,
                     "TB/s (max)": g["gbps"].max() / 1e3, "TFLOP/s (min)": g["tflops"].min(),
                     "TFLOP/s (max)": g["tflops"].max(), "best share of fp8 peak": g["tflops"].max() / peak,
                     "median |error|": e["median_abs"], "90th pct. |error|": e["p90_abs"],
                     "median error": e["median"]})
    return pd.DataFrame(rows)


def fp8_small_m_bandwidth(frame: pd.DataFrame | None) -> tuple[float, float] | None:
    """(min, max) TB/s DeepGEMM's dense GEMMs with M ≤ 128 reach, or None without data."""
    if _frame(frame) is None or not (frame["M"] <= 128).any():
        return None
    g = frame.loc[frame["M"] <= 128, "gbps"] / 1e3
    return float(g.min()), float(g.max())


def fp8_large_m_fraction(frame: pd.DataFrame | None, spec: DeviceSpec | None = None) -> float | None:
    """The best dense large-M (≥ 1024) TFLOP/s as a fraction of the datasheet fp8 peak, or None."""
    if _frame(frame) is None or not (frame["M"] >= 1024).any():
        return None
    spec = resolve_spec(spec, default=FrameMeta.of(frame).device or "H800")
    return float(frame.loc[frame["M"] >= 1024, "tflops"].max() * 1e12 / spec.peak_flop_s("float8"))


def size_effect(frame: pd.DataFrame | None, dtype: str = "bfloat16", *, low_flop: float = 1e9,
                high_flop: float = 1e11) -> float | None:
    """Median TFLOP/s of ``dtype``'s GEMMs above ``high_flop`` of work (2·b·M·N·K) ÷ those below
    ``low_flop`` (the GEMM chapter's "bigger GEMMs" effect), or None without rows on both sides."""
    if _frame(frame) is None:
        return None
    f = frame[frame["dtype"] == dtype]
    work = 2.0 * (f["b"] if "b" in f else 1) * f["M"] * f["N"] * f["K"]
    low, high = f.loc[work < low_flop, "tflops"], f.loc[work > high_flop, "tflops"]
    return float(high.median() / low.median()) if len(low) and len(high) else None


def batching_gain(frame: pd.DataFrame | None, dtype: str = "bfloat16", batch: int = 4) -> pd.Series | None:
    """Per shape (M, N, K) of XLA's rows: ``batch`` separate GEMMs' time ÷ one batched launch of
    them (``batch · t(b=1) / t(b=batch)``; > 1: batching pays), or None without data."""
    if _frame(frame) is None:
        return None
    batch = positive_int("batch", batch)
    f = frame[frame["dtype"] == dtype].pivot_table(index=["M", "N", "K"], columns="b", values="time_s")
    if 1 not in f or batch not in f:
        return None
    return (batch * f[1] / f[batch]).rename(f"{batch} GEMMs ÷ one batched launch")


def fit_tf32(frame: pd.DataFrame, spec: DeviceSpec | None = None, *,
             fractions: Sequence[float] = tuple(np.round(np.arange(0.55, 0.851, 0.025), 3)),
             extra_latencies_s: Sequence[float] = tuple(np.round(np.arange(0, 5.01e-6, 0.5e-6), 9)),
             model: GemmModel | None = None) -> tuple[dict, pd.DataFrame]:
    """Grid-search a TF32 fraction of the peak and an extra fixed cost per TF32 kernel on the **fit
    half** of XLA's TF32 rows (all b), minimising median + 90th percentile of |error|.

    Returns (the best ``{"fraction", "extra_latency_s", "score"}``, the whole grid with the fit and
    held-out halves' errors). ``spec`` defaults to the frame's device; other dtypes keep their
    default ceilings. The held-out half never enters the choice.
    """
    rows = xla_rows(frame, dtype="tf32")
    if rows is None or not len(rows):
        raise ValueError("fit_tf32 needs XLA's TF32 rows (pk.published('xla_h100_gemm'))")
    spec = resolve_spec(spec, default=FrameMeta.of(rows).device or "H100-SXM")  # XLA measured an H100
    # XLA timed warm (CUPTI): no flushed-L2 floor, as with_predictions treats published frames
    base, fit = dataclasses.replace(default_ceilings(spec), gemm_floor_s=None), fit_half(rows)
    grid = []
    for fraction, extra in itertools.product(fractions, extra_latencies_s):
        c = dataclasses.replace(base, flop_s={**base.flop_s, "tf32": fraction * spec.peak_flop_s("tf32")},
                                extra_latency_s={**base.extra_latency_s, "tf32": extra})
        p = with_predictions(rows, spec, model=model, ceilings=c)
        e = (p["predicted_s"] / p["time_s"] - 1).abs()
        row = {"fraction": float(fraction), "extra_latency_s": float(extra),
               "score": float(np.median(e[fit]) + np.percentile(e[fit], 90))}
        for half, mask in (("fit", fit), ("held out", ~fit)):
            for label, m in (("b = 1", mask & (p["b"] == 1)), ("b > 1", mask & (p["b"] > 1))):
                row[f"{half}, {label}: median"] = float(np.median(e[m]))
                row[f"{half}, {label}: p90"] = float(np.percentile(e[m], 90))
        grid.append(row)
    table = pd.DataFrame(grid).sort_values("score", kind="stable").reset_index(drop=True)
    best = table.iloc[0]
    return {"fraction": best["fraction"], "extra_latency_s": best["extra_latency_s"], "score": best["score"]}, table


def throughput_by_work(frames: dict[str, pd.DataFrame | None], *, dtypes: Sequence[str] = ("float16", "bfloat16"),
                       low_flop: float = 1e9, high_flop: float = 1e11) -> pd.DataFrame | None:
    """Per frame (name → GEMM rows with ``tflops``; None skipped): the median TFLOP/s of its
    ``dtypes`` GEMMs below ``low_flop`` of work (2·b·M·N·K) and above ``high_flop``, and their
    ratio (the "bigger GEMMs" effect). None when no frame has rows on both sides."""
    rows = []
    for name, f in frames.items():
        if _frame(f, f"frames[{name!r}]") is None or not len(f):
            continue
        f = f[f["dtype"].isin(list(dtypes))]
        work = 2.0 * (f["b"] if "b" in f else 1) * f["M"] * f["N"] * f["K"]
        low, high = f.loc[work < low_flop, "tflops"], f.loc[work > high_flop, "tflops"]
        if len(low) and len(high):
            rows.append({"source": name, "dtype": "/".join(dict.fromkeys(f["dtype"])), "small GEMMs": len(low),
                         "small (TFLOP/s)": low.median(), "large GEMMs": len(high),
                         "large (TFLOP/s)": high.median(), "large ÷ small (×)": high.median() / low.median()})
    return pd.DataFrame(rows) if rows else None


def time_ratio_table(frames: dict[str, pd.DataFrame | None], column: str, numerator: int,
                     denominator: int) -> pd.DataFrame | None:
    """Per frame (name → rows with ``column`` and ``time_s``; None skipped): the median time at
    ``column == numerator`` and at ``denominator`` (seconds) and their ratio; None without rows."""
    rows = []
    for name, f in frames.items():
        if _frame(f, f"frames[{name!r}]") is None or column not in f:
            continue
        t = f.groupby(column)["time_s"].median()
        if numerator in t.index and denominator in t.index:
            rows.append({"source": name, f"{column} = {denominator}_s": t[denominator],
                         f"{column} = {numerator}_s": t[numerator], "ratio (×)": t[numerator] / t[denominator]})
    return pd.DataFrame(rows) if rows else None
