"""How good the GEMM model is: its predictions beside every published and recorded GEMM in ``data/``.

The model's constants were fitted on one half of DeepBench's published V100 GEMMs (the *fit*
half, :func:`fit_half`: a fixed hash of each shape, so both halves mix every kind of shape); the
other half is *held out*, and the P100 and our own recordings were never used to fit it. The
table reports, per source, device, dtype and half, the median and 90th percentile of
``|predicted/measured − 1|`` and the share of optimistic (too fast) predictions, for the model and
for the plain roofline with datasheet numbers. Units: seconds.
"""

from __future__ import annotations

import hashlib
from typing import Mapping

import pandas as pd

from .devices import DeviceSpec, device_spec
from .gemm_model import GemmModel, explain_gemm, prediction_error
from .provenance import source_of

__all__ = ["GEMM_EXPERIMENTS", "VALIDATION_COLUMNS", "fit_half", "validation_frames", "validation_table",
           "with_predictions", "worst_predictions"]

#: Recorded experiments whose cuBLAS rows the model is checked against.
GEMM_EXPERIMENTS: tuple[str, ...] = ("gemm_sizes", "gemm_small_n", "gemm_transposes", "gemm_alignment",
                                     "ceiling_matmul")

#: Columns of :func:`validation_table`.
VALIDATION_COLUMNS: tuple[str, ...] = ("data", "device", "dtype", "half", "predictor", "n", "median_abs",
                                       "p90_abs", "optimistic")


def _spec_of(frame: pd.DataFrame, spec: DeviceSpec | None) -> DeviceSpec:
    if spec is not None:
        if not isinstance(spec, DeviceSpec):
            raise TypeError(f"spec must be a DeviceSpec or None, got {spec!r}")
        return spec
    meta = frame.attrs.get("meta") or {}
    for name in (meta.get("device"), meta.get("device_name")):
        if isinstance(name, str):
            try:
                return device_spec(name)  # a table name or a driver name
            except LookupError:
                continue
    raise LookupError("the frame's metadata names no known device (keys 'device', 'device_name'); pass spec=")


def fit_half(frame: pd.DataFrame) -> pd.Series:
    """True for the rows whose shape is in the fit half: sha1 of ``"M×N×K layout"`` is even."""
    layout = frame["layout"] if "layout" in frame else pd.Series("NN", index=frame.index)
    keys = [f"{m}x{n}x{k}{lay}" for m, n, k, lay in zip(frame["M"], frame["N"], frame["K"], layout)]
    return pd.Series([int(hashlib.sha1(k.encode()).hexdigest(), 16) % 2 == 0 for k in keys], index=frame.index)


def with_predictions(frame: pd.DataFrame, spec: DeviceSpec | None = None, *, model: GemmModel | None = None,
                     ceilings=None) -> pd.DataFrame:
    """A copy of a GEMM frame (columns ``M, N, K, dtype, time_s``) with ``predicted_s`` and ``roofline_s``.

    ``spec`` defaults to the device its metadata names. A ``math_dtype`` column sets the math
    dtype per row; metadata ``gemm_beta`` ≠ 0 means C was read too. Rows timed with a forced tile
    (``impl`` not ``cublas``) get that tile; rows without a peak for their dtype get NaN.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = {"M", "N", "K", "dtype", "time_s"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the GEMM columns {sorted(missing)}")
    spec = _spec_of(frame, spec)
    meta = frame.attrs.get("meta") or {}
    accumulate = bool(meta.get("gemm_beta", 0))
    predicted, roofline = [], []
    for row in frame.itertuples(index=False):
        r = row._asdict()
        tile = (int(r["tile_m"]), int(r["tile_n"])) if str(r.get("impl", "cublas")).startswith("triton") else None
        try:
            p = explain_gemm(int(r["M"]), int(r["N"]), int(r["K"]), r["dtype"], spec, tile,
                             math_dtype=r.get("math_dtype"), accumulate=accumulate, model=model, ceilings=ceilings)
        except LookupError:
            predicted.append(float("nan"))
            roofline.append(float("nan"))
            continue
        predicted.append(p.predicted_s)
        roofline.append(p.floor_s)
    out = frame.copy()
    out["predicted_s"] = predicted
    out["roofline_s"] = roofline
    out.attrs["meta"] = dict(meta)
    return out


def validation_frames(root=None) -> dict[str, pd.DataFrame]:
    """Every published GEMM and every recorded cuBLAS GEMM under ``data/``, with predictions, by name."""
    from .data import load, published_all, recordings

    frames = {}
    for f in published_all("gemm", root=root):
        meta = f.attrs["meta"]
        frames[f"{meta.get('published_by')} {meta.get('device')}"] = with_predictions(f)
    table = recordings(root)
    for r in table[table["device_kind"] == "gpu"].itertuples():
        if r.experiment in GEMM_EXPERIMENTS:
            f = load(r.experiment, device=r.device_slug, root=root)
            if "impl" in f:  # forced-tile Triton rows are the tile experiments', not cuBLAS's
                f = f[f["impl"] == "cublas"]
            frames[f"{r.experiment} on {r.device_slug}"] = with_predictions(f)
    return frames


def _stats(part: pd.DataFrame, column: str) -> dict:
    e = prediction_error(part["time_s"], part[column])
    return {"n": e["n"], "median_abs": e["median_abs"], "p90_abs": e["p90_abs"], "optimistic": e["optimistic"]}


def validation_table(frames: Mapping[str, pd.DataFrame] | None = None, *, by: str | None = None) -> pd.DataFrame:
    """Per data source, device, dtype and half: n, median and p90 of |error|, share optimistic.

    ``frames`` (name → frame from :func:`with_predictions`) defaults to :func:`validation_frames`.
    The half is ``fit`` / ``held out`` for the data the model was fitted on (DeepBench's V100),
    ``not fitted`` for everything else. ``by`` names one more column to split on (e.g.
    ``"layout"``); frames without it are left out. Errors are fractions (0.1 = 10 %).
    """
    frames = validation_frames() if frames is None else frames
    if by is not None and (not isinstance(by, str) or by in VALIDATION_COLUMNS):
        raise ValueError(f"by must be the name of a column of the frames (e.g. 'layout'), not one of "
                         f"{list(VALIDATION_COLUMNS)}; got {by!r}")
    keys = ["dtype"] if by is None else ["dtype", by]
    if by is not None and frames and not any(by in f for f in frames.values()):
        columns = sorted({c for f in frames.values() for c in f.columns})
        raise ValueError(f"by={by!r} is not a column of any frame; their columns: {columns}")
    rows = []
    for name, f in frames.items():
        f = f[f["predicted_s"].notna()]
        if not len(f) or (by is not None and by not in f):
            continue
        meta = f.attrs.get("meta") or {}
        fitted = meta.get("published_by") == "Baidu DeepBench" and meta.get("device") == "V100-SXM2"
        halves = {"fit": fit_half(f), "held out": ~fit_half(f)} if fitted else {"not fitted": None}
        label = str(source_of(f) or name)
        for key, g in f.groupby(keys, sort=False):
            split = dict(zip(keys, key))
            for half, mask in halves.items():
                part = g if mask is None else g[mask[g.index]]
                if not len(part):
                    continue
                for predictor, column in (("model", "predicted_s"), ("roofline", "roofline_s")):
                    rows.append({"data": label, "device": meta.get("device") or meta.get("device_name"),
                                 **split, "half": half, "predictor": predictor, **_stats(part, column)})
    columns = list(VALIDATION_COLUMNS)
    if by is not None:
        columns.insert(columns.index("dtype") + 1, by)
    return pd.DataFrame(rows, columns=columns)


def worst_predictions(frame: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` rows of a :func:`with_predictions` frame with the largest |predicted/measured − 1|."""
    err = frame["predicted_s"] / frame["time_s"] - 1
    out = frame.assign(error=err)
    return out.reindex(err.abs().sort_values(ascending=False).index).head(n)
