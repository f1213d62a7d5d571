"""How good the GEMM model is: its predictions beside every published and recorded GEMM.

The model's constants were fitted on one half of DeepBench's published V100 GEMMs (the *fit*
half, :func:`fit_half`: a fixed hash of each shape, so both halves mix every kind of shape); the
other half is *held out*. On Hopper, two things were chosen on the fit half of OpenXLA's published
H100 table (:data:`FITTED_ON`): the TF32 ceiling and fixed cost
(:data:`perfkit.ceilings.TF32_FIT`) on its TF32 rows, and split-K in one kernel
(:data:`perfkit.gemm_model.SPLIT_K_IN_KERNEL`) on its BF16 rows; the other half of each is held out.
The P100 and DeepGEMM's H800 were never used to fit anything. Of our own H200 recordings, the rows
of :data:`RECORDED_FITS` fitted Hopper's unaligned-GEMM slowdowns and GEMM streaming bandwidth
(:mod:`perfkit.ceilings`) and are labelled ``"fit"``; every other recorded row, and the whole of
``vocab_padding`` (nn.Linear at GPT-2's vocabulary, padded or not), is ``"not fitted"``. The table
reports, per source, device, dtype and half, the median and 90th percentile of
``|predicted/measured − 1|`` and the share of optimistic (too fast) predictions, for the model and
for the plain roofline with datasheet numbers. Each row is predicted with its layout (which
dimension of each operand is contiguous, :mod:`perfkit.gemm_alignment`). Units: seconds.
"""

from __future__ import annotations

import hashlib
from typing import Mapping

import pandas as pd

from dataclasses import replace

from .calibration import calibrated
from .ceilings import Ceilings, resolve_ceilings
from .data import load, recordings
from .devices import DeviceSpec, device_spec
from .dtypes import itemsize
from .gemm_alignment import ALIGNED_BYTES, LINEAR_LAYOUTS, alignment_bytes, alignment_class, from_column_major
from .gemm_model import GemmModel, explain_gemm, prediction_error
from .meta import FrameMeta
from .provenance import source_of
from .published_data import has_published, published, published_all
from .published_data.newest import aiter_rows, mamf_rows
from .published_data.xla import xla_rows

__all__ = ["BATCH_COLUMNS", "COLUMN_MAJOR_PUBLISHERS", "EXPERIMENT_LAYOUTS", "FITTED_ON", "FITTED_WHOLLY",
           "GEMM_EXPERIMENTS",
           "RECORDED_FITS", "VALIDATION_COLUMNS", "fit_half", "half_labels", "neighbour_slowdowns", "recorded_fit_rows",
           "row_layouts",
           "validation_frames", "validation_table", "vocab_gemms", "with_predictions", "worst_predictions"]

#: Recorded experiments whose cuBLAS rows the model is checked against (``vocab_padding`` too, through
#: :func:`vocab_gemms`).
GEMM_EXPERIMENTS: tuple[str, ...] = ("gemm_sizes", "gemm_small_n", "gemm_transposes", "gemm_alignment",
                                     "ceiling_matmul", "fc_features", "fc_batch")

#: The layout of a recorded experiment's GEMMs where its rows do not say: ``fc_*`` time the layer's
#: forward as ``matmul(W, xᵀ)`` (A = W, B = xᵀ, C = out×batch), not as nn.Linear writes it.
EXPERIMENT_LAYOUTS: dict[str, str] = {"fc_features": "NT", "fc_batch": "NT"}

#: Publishers whose ``layout`` column is a cuBLAS (column-major) layout
#: (:func:`perfkit.gemm_alignment.from_column_major`).
COLUMN_MAJOR_PUBLISHERS: tuple[str, ...] = ("Baidu DeepBench",)

#: Recorded experiment → which of its rows fitted what (:func:`recorded_fit_rows`); they are "fit" in
#: :func:`half_labels`, all other recorded rows "not fitted".
RECORDED_FITS: dict[str, str] = {
    "gemm_alignment": "its unaligned rows: Hopper's unaligned slowdowns (perfkit.ceilings.ALIGNMENT_SLOWDOWNS), "
                      "and a calibrated GPU's partial one",
    "fc_features": "the unaligned rows of its in and batch sweeps: Hopper's unaligned slowdowns",
    "gemm_small_n": "its aligned rows up to N = 128: Hopper's GEMM streaming bandwidth and flushed-L2 floor "
                    "(GEMM_SM_BANDWIDTH, GEMM_FLOOR_S)",
    "fc_batch": "its aligned rows up to batch 128: Hopper's GEMM streaming bandwidth and flushed-L2 floor",
}

#: What the model was fitted (or tuned) on: (publisher's name as it begins, perfkit device) → the
#: dtypes fitted (None: all). Rows of these get the halves of :func:`fit_half`; others are "not fitted".
FITTED_ON: dict[tuple[str, str], frozenset[str] | None] = {
    ("Baidu DeepBench", "V100-SXM2"): None,
    ("OpenXLA", "H100-SXM"): frozenset({"bfloat16", "tf32"}),
    ("AMD AITER", "MI355X"): frozenset({"bfloat16"}),  # CDNA's constants (perfkit.achievable.AMD_FIT)
}

#: Published tables every row of which fitted something (not split in halves): (publisher's name as it
#: begins, perfkit device). The MAMF finder's AMD rows set those devices' achievable fractions
#: (perfkit.achievable.ACHIEVABLE_FRACTIONS); its Blackwell rows fitted nothing and are "not fitted".
FITTED_WHOLLY: frozenset[tuple[str, str]] = frozenset(
    ("ml-engineering", d) for d in ("MI300X", "MI325X", "MI355X"))

#: Columns that give a row's batch (GEMMs per launch), first found wins: ours, XLA's, DeepGEMM's.
BATCH_COLUMNS: tuple[str, ...] = ("batch", "b", "groups")

#: Columns of :func:`validation_table`.
VALIDATION_COLUMNS: tuple[str, ...] = ("data", "device", "dtype", "half", "predictor", "n", "median_abs",
                                       "p90_abs", "optimistic")


def _spec_of(frame: pd.DataFrame, spec: DeviceSpec | None) -> DeviceSpec:
    if spec is not None:
        if not isinstance(spec, DeviceSpec):
            raise TypeError(f"spec must be a DeviceSpec or None, got {spec!r}")
        return spec
    meta = FrameMeta.of(frame)
    for name in (meta.device, meta.device_name):
        if name:
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


def _fitted_dtypes(meta: FrameMeta) -> frozenset[str] | None | bool:
    """The dtypes fitted on a frame with this metadata: None (all), a set, or False (none)."""
    by, device = meta.published_by or "", meta.device
    for (publisher, fitted_device), dtypes in FITTED_ON.items():
        if by.startswith(publisher) and device == fitted_device:
            return dtypes
    return False


def recorded_fit_rows(frame: pd.DataFrame) -> pd.Series:
    """True for the rows of a recording that fitted a constant (:data:`RECORDED_FITS`, by the
    experiment its metadata names); all False for any other frame."""
    meta = FrameMeta.of(frame)
    none = pd.Series(False, index=frame.index)
    if meta.published_by or meta.experiment not in RECORDED_FITS:
        return none
    if meta.experiment == "gemm_alignment" and "aligned" in frame:
        return ~frame["aligned"].astype(bool)
    if meta.experiment == "fc_features" and {"sweep", "divisible_by"} <= set(frame.columns):
        return frame["sweep"].isin(["in", "batch"]) & (frame["divisible_by"] < 8)
    if meta.experiment in ("gemm_small_n", "fc_batch"):  # memory-bound, every leading dimension aligned
        return ((frame["N"] % 8 == 0) | (frame["N"] == 1)) & (frame["N"] <= 128)
    return none


def half_labels(frame: pd.DataFrame) -> pd.Series:
    """Per row: ``"fit"`` or ``"held out"`` (:func:`fit_half`) where the model was fitted on the
    frame's source, device and dtype (:data:`FITTED_ON`), else ``"not fitted"``. The rows of our
    recordings that fitted a constant (:func:`recorded_fit_rows`, :data:`RECORDED_FITS`: e.g. the
    unaligned rows of ``gemm_alignment``) are ``"fit"``."""
    meta = FrameMeta.of(frame)
    dtypes = _fitted_dtypes(meta)
    out = pd.Series("not fitted", index=frame.index, dtype=object)
    out[recorded_fit_rows(frame)] = "fit"
    if any((meta.published_by or "").startswith(by) and meta.device == d for by, d in FITTED_WHOLLY):
        out[:] = "fit"
        return out
    if dtypes is False or not len(frame):
        return out
    fitted = pd.Series(True, index=frame.index) if dtypes is None else frame["dtype"].isin(list(dtypes))
    half = fit_half(frame)
    out[fitted & half] = "fit"
    out[fitted & ~half] = "held out"
    return out


def row_layouts(frame: pd.DataFrame) -> pd.Series:
    """Per row, the layout its GEMM ran in (:mod:`perfkit.gemm_alignment`): the ``layout`` column (a
    cuBLAS column-major one for :data:`COLUMN_MAJOR_PUBLISHERS`, else torch's row-major names), nn.Linear's
    pass layout for rows timed through autograd (``impl`` "autograd", ``phase``), else the experiment's
    (:data:`EXPERIMENT_LAYOUTS`), else ``"NN"`` (``torch.matmul`` of contiguous tensors)."""
    meta = FrameMeta.of(frame)
    default = EXPERIMENT_LAYOUTS.get(meta.experiment or "", "NN")
    out = pd.Series(default, index=frame.index, dtype=object)
    if "layout" in frame:
        out = frame["layout"].fillna(default).astype(str).str.upper()
        if any((meta.published_by or "").startswith(p) for p in COLUMN_MAJOR_PUBLISHERS):
            out = out.map(from_column_major)
    if {"impl", "phase"} <= set(frame.columns):
        autograd = frame["impl"].astype(str) == "autograd"
        out[autograd] = frame.loc[autograd, "phase"].map(LINEAR_LAYOUTS).fillna(out[autograd])
    return out


def with_predictions(frame: pd.DataFrame, spec: DeviceSpec | None = None, *, model: GemmModel | None = None,
                     ceilings=None) -> pd.DataFrame:
    """A copy of a GEMM frame (columns ``M, N, K, dtype, time_s``) with ``predicted_s`` and ``roofline_s``.

    ``spec`` defaults to the device its metadata names. A ``math_dtype`` column sets the math
    dtype per row; a batch column (the first of :data:`BATCH_COLUMNS` present: ``batch``, XLA's
    ``b``, DeepGEMM's ``groups``) makes each row that many GEMMs in one launch, and ``time_s`` the
    time of all of them; metadata ``gemm_beta`` ≠ 0 means C was read too. A published table (timed
    warm: back to back, or by CUPTI) is predicted without the ceilings' flushed-L2 floor
    (:data:`perfkit.ceilings.GEMM_FLOOR_S`) unless ``ceilings`` is a Ceilings. Each row gets its layout
    (:func:`row_layouts`). Rows timed with a forced tile (``impl`` "triton…") get that tile; rows
    without a peak for their dtype get NaN.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = {"M", "N", "K", "dtype", "time_s"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the GEMM columns {sorted(missing)}")
    spec = _spec_of(frame, spec)
    meta = FrameMeta.of(frame)
    if meta.published_by and not isinstance(ceilings, Ceilings):  # timed warm: no flushed-L2 floor
        ceilings = replace(resolve_ceilings(spec, ceilings), gemm_floor_s=None)
    accumulate = bool(meta.gemm_beta)
    batch_column = next((c for c in BATCH_COLUMNS if c in frame.columns), None)
    layouts = row_layouts(frame)
    predicted, roofline = [], []
    for row, layout in zip(frame.itertuples(index=False), layouts):
        r = row._asdict()
        tile = (int(r["tile_m"]), int(r["tile_n"])) if str(r.get("impl", "cublas")).startswith("triton") else None
        batch = 1 if batch_column is None else int(r[batch_column])
        try:
            p = explain_gemm(int(r["M"]), int(r["N"]), int(r["K"]), r["dtype"], spec, tile, batch=batch,
                             math_dtype=r.get("math_dtype"), accumulate=accumulate, model=model, ceilings=ceilings,
                             layout=layout)
        except LookupError:
            predicted.append(float("nan"))
            roofline.append(float("nan"))
            continue
        predicted.append(p.predicted_s)
        roofline.append(p.floor_s)
    out = frame.copy()
    out["predicted_s"] = predicted
    out["roofline_s"] = roofline
    out.attrs["meta"] = dict(meta.raw)
    return out


def vocab_gemms(frame: pd.DataFrame) -> pd.DataFrame:
    """The forward nn.Linear GEMMs of a ``vocab_padding`` recording (``impl`` "linear", ``phase``
    "forward") as a GEMM frame: ``(M, N, K) = (out_features, tokens, in_features)``, layout "NTT"
    (:data:`perfkit.gemm_alignment.LINEAR_LAYOUTS`), its metadata kept."""
    rows = frame[(frame["impl"] == "linear") & (frame["phase"] == "forward")]
    out = pd.DataFrame({"M": rows["out_features"], "N": rows["tokens"], "K": rows["in_features"],
                        "dtype": rows["dtype"], "time_s": rows["time_s"], "layout": LINEAR_LAYOUTS["forward"],
                        "vocab": rows["vocab"], "multiple": rows["multiple"]})
    out.attrs["meta"] = dict(FrameMeta.of(frame).raw)
    return out


def validation_frames(root=None) -> dict[str, pd.DataFrame]:
    """Every published GEMM (DeepBench's V100 and P100; OpenXLA's H100 bf16 and TF32 rows, every
    batch; AMD AITER's tuned GEMMs per GPU; the MAMF finder's best shapes per GPU) and every recorded cuBLAS GEMM under ``data/`` (:data:`GEMM_EXPERIMENTS`, and the nn.Linear
    rows of ``vocab_padding``), with predictions, by name. Published rows get the model with its
    default ceilings; recorded ones the ceilings recorded on their GPU (:func:`perfkit.calibrated`)."""
    frames = {}
    for f in published_all("deepbench_gemm") if has_published("deepbench_gemm") else []:
        meta = FrameMeta.of(f)
        frames[f"{meta.published_by} {meta.device}"] = with_predictions(f)
    if has_published("xla_h100_gemm"):
        frames["OpenXLA H100-SXM"] = with_predictions(xla_rows(published("xla_h100_gemm")))
    for name, rows in (("aiter_gemm", aiter_rows), ("mamf_newest", mamf_rows)):
        for f in published_all(name) if has_published(name) else []:
            f = rows(f)
            if len(f):
                meta = FrameMeta.of(f)
                frames[f"{meta.published_by} {meta.device}"] = with_predictions(f)
    table = recordings(root)
    for r in table[table["device_kind"] == "gpu"].itertuples():
        if r.experiment in GEMM_EXPERIMENTS or r.experiment == "vocab_padding":
            f = load(r.experiment, device=r.device_slug, root=root)
            if r.experiment == "vocab_padding":
                f = vocab_gemms(f)
            if "impl" in f:  # forced-tile Triton rows are the tile experiments', not cuBLAS's
                f = f[f["impl"] == "cublas"]
            if r.experiment.startswith("fc_") and "batch" in f:  # the layer's rows, not GEMMs per launch
                f = f.rename(columns={"batch": "rows"})
            # our own recording: the model on that GPU with the ceilings recorded beside it (the edge)
            frames[f"{r.experiment} on {r.device_slug}"] = with_predictions(f, calibrated(_spec_of(f, None), root))
    return frames


def _stats(part: pd.DataFrame, column: str) -> dict:
    e = prediction_error(part["time_s"], part[column])
    return {"n": e["n"], "median_abs": e["median_abs"], "p90_abs": e["p90_abs"], "optimistic": e["optimistic"]}


def validation_table(frames: Mapping[str, pd.DataFrame] | None = None, *, by: str | None = None) -> pd.DataFrame:
    """Per data source, device, dtype and half: n, median and p90 of |error|, share optimistic.

    ``frames`` (name → frame from :func:`with_predictions`) defaults to :func:`validation_frames`.
    The half is ``fit`` / ``held out`` for the data the model was fitted on (:data:`FITTED_ON`:
    DeepBench's V100, OpenXLA's H100), ``not fitted`` for everything else. ``by`` names one more
    column to split on (e.g. ``"layout"``); frames without it are left out. Errors are fractions
    (0.1 = 10 %).
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
        meta = FrameMeta.of(f)
        halves = half_labels(f)
        label = str(source_of(f) or name)
        if meta.experiment and not meta.published_by:  # our recordings: say which experiment
            label = f"{meta.experiment}, {label}"
        for key, g in f.groupby(keys, sort=False):
            split = dict(zip(keys, key))
            for half in ("fit", "held out", "not fitted"):
                part = g[halves[g.index] == half]
                if not len(part):
                    continue
                for predictor, column in (("model", "predicted_s"), ("roofline", "roofline_s")):
                    rows.append({"data": label, "device": meta.device or meta.device_name,
                                 **split, "half": half, "predictor": predictor, **_stats(part, column)})
    columns = list(VALIDATION_COLUMNS)
    if by is not None:
        columns.insert(columns.index("dtype") + 1, by)
    return pd.DataFrame(rows, columns=columns)


def worst_predictions(frame: pd.DataFrame | None, n: int = 10, *,
                      columns: list[str] | None = None) -> pd.DataFrame | None:
    """The ``n`` rows of a :func:`with_predictions` frame with the largest |predicted/measured − 1|
    (column ``error``), only ``columns`` if given; None for None."""
    if frame is None:
        return None
    err = frame["predicted_s"] / frame["time_s"] - 1
    out = frame.assign(error=err)
    out = out.reindex(err.abs().sort_values(ascending=False).index).head(n)
    return out if columns is None else out[list(columns)]


def neighbour_slowdowns(frame: pd.DataFrame, swept: str, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """Per unaligned row of a sweep (``swept``: the column stepped through values around multiples of 16
    bytes, e.g. ``gemm_alignment``'s ``K``, ``fc_features``' ``swept``), its ``time_s`` over the mean of
    its nearest aligned neighbours below and above in the same ``dtype`` and ``by`` group: a frame of
    ``dtype``, the ``by`` columns, ``swept``, ``bytes`` (:func:`perfkit.gemm_alignment.alignment_bytes`),
    ``alignment_class`` and ``slowdown``. A model-free measure: the aligned neighbours stand for what the row would cost."""
    missing = {swept, "dtype", "time_s", *by} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the columns {sorted(missing)}")
    rows = []
    for key, g in frame.groupby(["dtype", *by], sort=False):
        key = key if isinstance(key, tuple) else (key,)
        size = itemsize(key[0])
        g = g.sort_values(swept)
        nbytes = g[swept].map(lambda n: alignment_bytes(int(n), size))
        ok = g[nbytes >= ALIGNED_BYTES]
        for (_, r), b in zip(g.iterrows(), nbytes):
            if b >= ALIGNED_BYTES:
                continue
            below, above = ok[ok[swept] < r[swept]].tail(1), ok[ok[swept] > r[swept]].head(1)
            ref = pd.concat([below, above])["time_s"]
            if len(ref):
                rows.append({**dict(zip(["dtype", *by], key)), swept: r[swept], "bytes": b,
                             "alignment_class": alignment_class(b), "slowdown": float(r["time_s"] / ref.mean())})
    return pd.DataFrame(rows, columns=["dtype", *by, swept, "bytes", "alignment_class", "slowdown"])
