"""The advisor scored on real models it was never fitted to: op by op, step by step, fix by fix.

``advisor_layers`` and ``advisor_fixes`` (GPT-2 small, ResNet-50, an LSTM LM and LLaMA-7B, timed on a GPU)
are the **score set**: no constant of any model is fitted to them. This module re-runs today's advisor
on the same models (built on the meta device, nothing allocated) and puts its predictions beside those
recordings:

- :func:`score_ops`: every distinct op, measured forward + backward against predicted, with the rows a
  recording defect makes meaningless left out and the reason given (:data:`RECORDING_DEFECTS`);
- :func:`step_ratios`: per model, the measured step (each op × the layers running it) ÷ the predicted one;
- :func:`score_fixes`: every recorded fix, its measured saving against the saving priced today;
  :func:`fix_summary`: sign agreement where the measured saving exceeds 10 µs, and Spearman's ρ.

Pure functions of frames and a spec; torch is imported when a model is advised. Units: seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._validate import frame_with_columns
from ...devices import DeviceSpec
from ...meta import FrameMeta
from .experiments import model_inputs

__all__ = ["MIN_SAVING_S", "RECORDING_DEFECTS", "advised", "error_stats", "fix_summary", "score_fixes",
           "score_ops", "step_ratios"]

#: Fixes whose measured saving is smaller than this are too small to judge a sign on (timing noise), seconds.
MIN_SAVING_S = 10e-6

#: Rows of a recording that measured something else than the op, by the perfkit commit that recorded them:
#: (experiment, commit) → [(predicate on a row, reason)]. A re-recording with a fixed perfkit has none.
RECORDING_DEFECTS: dict[tuple[str, str], list[tuple[Any, str]]] = {
    ("advisor_layers", "1676d711fea3e1fa0882f324d5839c1d00aaac2c"): [
        (lambda r: r["op"] == "scaled_dot_product_attention",
         "timed the unfused math path (3-D inputs, which the fused kernels refuse); fixed, to re-record"),
        (lambda r: r["model"] == "llama_7b" and r["op"] == "mul" and r["layer"] == "layers.0.feed_forward",
         "a binary op (silu(w1·x) × w3·x) timed as a sum over pairs, a slow reduction; fixed, to re-record"),
    ],
}


def advised(name: str, spec: DeviceSpec, dtype: str = "bfloat16") -> Any:
    """Today's :func:`perfkit.advise` of the :data:`MODELS` entry ``name`` at its GPU sizes, on the meta device."""
    from ...advisor import advise  # torch: imported when a model is advised

    model, x = model_inputs(name, "cuda", meta=True)
    return advise(model, x, dtype, spec)


def _groups(advice: Any) -> list[list]:
    from ...advisor.measure import op_key

    groups: dict[str, list] = {}
    for op in advice.ops:
        groups.setdefault(op_key(op), []).append(op)
    return list(groups.values())


def _defects(layers: pd.DataFrame) -> list[tuple[Any, str]]:
    commit = str(FrameMeta.of(layers).raw.get("perfkit_commit") or "").removesuffix("-dirty")
    return RECORDING_DEFECTS.get(("advisor_layers", commit), [])


def score_ops(layers: pd.DataFrame, spec: DeviceSpec, advices: dict[str, Any] | None = None) -> pd.DataFrame:
    """Each ``advisor_layers`` row with today's prediction on ``spec``: columns model, layer, op, layers,
    dtype, time_s, predicted_s, predicted_forward_s, ratio (measured ÷ predicted), scored (False for a recording
    defect or a row today's advisor no longer makes), why. ``advices``: name → advice, to reuse."""
    frame_with_columns("layers", layers, ("model", "layer", "op", "layers", "time_s"), "advisor_layers")
    advices = {} if advices is None else advices
    defects = _defects(layers)
    out = []
    for name, rows in layers.groupby("model", sort=False):
        if name not in advices:
            advices[name] = advised(name, spec, str(rows["dtype"].iloc[0]) if "dtype" in rows else "bfloat16")
        advice = advices[name]
        groups = _groups(advice)
        for i, r in enumerate(rows.to_dict("records")):
            ops = groups[i] if i < len(groups) else None
            op = ops[0] if ops else None
            same = op is not None and (op.layer or "") == (r["layer"] if isinstance(r["layer"], str) else "") \
                and (op.name or op.op) == r["op"]
            pred = advice._pricer.rows(op) if same else []
            why = next((reason for test, reason in defects if test(r)), "")
            if not same:
                why = "today's advisor no longer makes this op in this place"
            out.append({"model": name, "layer": r["layer"], "op": r["op"], "dtype": r.get("dtype", ""),
                        "layers": int(r["layers"]),
                        "time_s": r["time_s"], "predicted_s": sum(p["predicted_s"] for p in pred) if same else math.nan,
                        "predicted_forward_s": sum(p["predicted_s"] for p in pred if p["pass"] == "forward")
                        if same else math.nan, "scored": not why, "why": why})
    scored = pd.DataFrame(out)
    scored["ratio"] = scored["time_s"] / scored["predicted_s"]
    return scored


def error_stats(ratio: pd.Series) -> dict[str, float]:
    """n, median and 90th percentile of |measured/predicted − 1|, and the median signed error (+: too fast)."""
    r = pd.Series(ratio, dtype=float).dropna()
    e = (r - 1).abs()
    return {"n": len(r), "median_abs": float(e.median()) if len(r) else math.nan,
            "p90_abs": float(e.quantile(0.9)) if len(r) else math.nan,
            "median_signed": float((r - 1).median()) if len(r) else math.nan}


def step_ratios(scored: pd.DataFrame) -> pd.DataFrame:
    """Per model: measured and predicted step over its scored ops (each × its layers), their ratio, and the
    per-op error statistics (:func:`error_stats`)."""
    rows = []
    for name, g in scored[scored["scored"]].groupby("model", sort=False):
        measured, predicted = (g["time_s"] * g["layers"]).sum(), (g["predicted_s"] * g["layers"]).sum()
        rows.append({"model": name, "measured_step_s": measured, "predicted_step_s": predicted,
                     "ratio": measured / predicted, **error_stats(g["ratio"]),
                     "left_out": int((~scored.loc[scored["model"] == name, "scored"]).sum())})
    return pd.DataFrame(rows)


def score_fixes(fixes: pd.DataFrame, spec: DeviceSpec, advices: dict[str, Any] | None = None) -> pd.DataFrame:
    """Each ``advisor_fixes`` row with the saving today's advisor prices for it on ``spec``
    (``predicted_saving_s``; the recorded column is kept as ``recorded_prediction_s``). A fix is matched
    by model, rule, layer and wording, else by model, rule, layer and order; unmatched: NaN."""
    frame_with_columns("fixes", fixes, ("model", "rule", "layer", "fix", "measured_saving_s"), "advisor_fixes")
    advices = {} if advices is None else advices
    out, used = [], set()
    for r in fixes.to_dict("records"):
        name = r["model"]
        if name not in advices:
            advices[name] = advised(name, spec, str(r.get("dtype", "bfloat16")))
        f = advices[name].findings.reset_index(drop=True)
        layer = r["layer"] if isinstance(r["layer"], str) else ""
        same = f[(f["rule"] == r["rule"]) & (f["layer"].fillna("") == layer)]
        same = same[[(name, i) not in used for i in same.index]]
        exact = same[same["fix"] == r["fix"]]
        hit = exact.index[0] if len(exact) else (same.index[0] if len(same) else None)
        if hit is not None:
            used.add((name, hit))
        out.append({"model": name, "rule": r["rule"], "layer": layer, "fix": r["fix"], "dtype": r.get("dtype", ""),
                    "measured_saving_s": r["measured_saving_s"],
                    "predicted_saving_s": f.loc[hit, "predicted_saving_s"] if hit is not None else math.nan,
                    "recorded_prediction_s": r.get("predicted_saving_s", math.nan)})
    return pd.DataFrame(out)


def fix_summary(scored: pd.DataFrame, column: str = "predicted_saving_s") -> dict[str, float]:
    """n, how many are judged (|measured saving| > :data:`MIN_SAVING_S`), the share of those whose priced
    saving has the measured sign (no price counts as wrong), and Spearman's ρ of priced against measured."""
    m, p = scored["measured_saving_s"].astype(float), scored[column].astype(float)
    judged = m.abs() > MIN_SAVING_S
    agree = (np.sign(p[judged].fillna(0)) == np.sign(m[judged])).mean() if judged.any() else math.nan
    both = p.notna()
    rho = m[both].rank().corr(p[both].rank()) if both.sum() > 2 else math.nan
    return {"n": len(scored), "judged": int(judged.sum()), "sign_agreement": float(agree), "spearman": float(rho)}
