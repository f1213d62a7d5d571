"""The GEMM model against our own recordings in ``data/``: its error on each recorded experiment.

:func:`perfkit.validation.validation_frames` gives every GEMM the model is checked against, with
its prediction; the recorded ones (no publisher, an experiment name in the metadata) are ours.
:func:`recorded_errors` is their table, one row per experiment and half, for the model and for
the plain roofline. Errors are fractions (0.1 = 10 %) of ``|predicted / measured − 1|``.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ...gemm_model import prediction_error
from ...meta import FrameMeta
from ...provenance import source_of
from ...validation import half_labels

__all__ = ["RECORDED_ERROR_COLUMNS", "recorded_errors", "recorded_summary"]

#: Columns of :func:`recorded_errors`.
RECORDED_ERROR_COLUMNS = ("experiment", "data", "half", "n", "model median", "model p90", "model optimistic",
                          "roofline median")


def _ours(frames: Mapping[str, pd.DataFrame]) -> list[pd.DataFrame]:
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of name → frame (pk.validation.validation_frames()), "
                        f"got {type(frames).__name__}")
    out = []
    for name, f in frames.items():
        if not isinstance(f, pd.DataFrame):
            raise TypeError(f"frames[{name!r}] must be a DataFrame, got {type(f).__name__}")
        meta = FrameMeta.of(f)
        if meta.experiment and not meta.published_by and {"predicted_s", "roofline_s"} <= set(f.columns):
            out.append(f[f["predicted_s"].notna()])
    return [f for f in out if len(f)]


def recorded_errors(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame | None:
    """Per recorded GEMM experiment in ``frames`` and half (``"not fitted"``, or ``"fit"`` for the
    unaligned rows of ``gemm_alignment``, whose median sets the model's unaligned slowdown):
    the number of GEMMs, the model's median and 90th-percentile error, its share of optimistic
    (too fast) predictions, and the plain roofline's median error. None when nothing is recorded."""
    rows = []
    for f in _ours(frames):
        meta, halves = FrameMeta.of(f), half_labels(f)
        for half in ("not fitted", "fit"):
            part = f[halves == half]
            if not len(part):
                continue
            model = prediction_error(part["time_s"], part["predicted_s"])
            roofline = prediction_error(part["time_s"], part["roofline_s"])
            rows.append({"experiment": meta.experiment, "data": str(source_of(f)), "half": half, "n": model["n"],
                         "model median": model["median_abs"], "model p90": model["p90_abs"],
                         "model optimistic": model["optimistic"], "roofline median": roofline["median_abs"]})
    return pd.DataFrame(rows, columns=list(RECORDED_ERROR_COLUMNS)) if rows else None


def recorded_summary(frames: Mapping[str, pd.DataFrame]) -> dict | None:
    """Over every recorded GEMM the model was not fitted to: ``n``, ``median_abs``, ``p90_abs``,
    ``optimistic`` (:func:`perfkit.gemm_model.prediction_error`) and ``data`` (what they rest on);
    None when nothing is recorded."""
    parts = [f[half_labels(f) == "not fitted"] for f in _ours(frames)]
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    both = pd.concat(parts, ignore_index=True)
    labels = sorted({str(source_of(p)) for p in parts})
    return {**prediction_error(both["time_s"], both["predicted_s"]), "data": "; ".join(labels)}
