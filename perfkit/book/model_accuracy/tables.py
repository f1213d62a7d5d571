"""The tables of the appendix "How good is the model": what ``python -m perfkit validate`` prints, for a reader.

Each function takes what :func:`perfkit.book.check_your_model.validation_report` (one
:class:`~perfkit.book.check_your_model.report.Report` per GPU with recordings),
:func:`perfkit.validation.validation_table` or :func:`perfkit.book.check_your_model.peer_table` returned,
and gives a small frame ready for :func:`perfkit.table`: few columns, short headers, errors as fractions
(0.12 = 12 %), times in seconds. None in (no recording) → None out, which ``pk.table`` shows as a note.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from ..check_your_model.held_out import error_stats, fix_summary
from ...devices import device_spec
from ...gemm_model import prediction_error
from ...meta import FrameMeta
from ...provenance import publisher_of, source_of
from ...validation import half_labels
from ..check_your_model.report import _vocab_ratio, targets

__all__ = ["FAMILY_LABELS", "FAMILY_ORDER", "MODEL_NAMES", "family_errors", "fix_numbers", "model_steps", "peer_steps",
           "newest_gemms", "published_gemms", "split_table", "targets_table"]

#: The families in the order the page shows them.
FAMILY_ORDER = ("GEMM", "memory-bound", "convolution", "recurrent layer", "attention", "decoding")
#: A family's name as the tables show it: one short word or two joined, so its column never wraps.
FAMILY_LABELS = {"recurrent layer": "recurrent"}
#: The real models' names in ``advisor_layers`` → the names the book gives them.
MODEL_NAMES = {"gpt2_small": "GPT-2 small", "resnet50": "ResNet-50", "lstm_lm": "LSTM LM", "llama_7b": "LLaMA-7B"}
#: Peer predictors (``peer_table``'s ``predictor``) → short column headers; ours is the first column.
_PEERS = {"mlsysim": "mlsysim 0.3.0", "torch RuntimeEstimator (roofline)": "RuntimeEstimator, ops",
          "torch RuntimeEstimator (roofline, whole model)": "RuntimeEstimator, model"}


def _order(family: pd.Series) -> pd.Series:
    return family.map({f: i for i, f in enumerate(FAMILY_ORDER)}).fillna(len(FAMILY_ORDER))


def split_table(report: Any) -> pd.DataFrame | None:
    """Per family, the recordings a constant was fitted on and those held out (comma-separated names),
    and a last row for the real models (``advisor_layers``, ``advisor_fixes``), which fitted nothing."""
    if report is None or not len(report.families):
        return None
    fam = report.families
    rows = []
    for family in sorted(fam["family"].unique(), key=lambda f: _order(pd.Series([f])).iloc[0]):
        mine = fam[fam["family"] == family]
        fit = mine["split"].str.startswith("fit")
        rows.append({"family": FAMILY_LABELS.get(family, family), "fitted on": ", ".join(sorted(mine.loc[fit, "recording"])) or "–",
                     "held out": ", ".join(sorted(mine.loc[~fit, "recording"])) or "–"})
    if report.ops is not None:
        rows.append({"family": "real models", "fitted on": "–", "held out": "advisor_layers, advisor_fixes"})
    return pd.DataFrame(rows)


def family_errors(report: Any) -> pd.DataFrame | None:
    """Per family and split (fit, held out): the recordings' rows pooled, n, median and 90th percentile of
    |measured/predicted − 1| and the median signed error (+: measured slower than predicted). Rows no
    model predicts are left out."""
    if report is None or report.rows is None or not len(report.rows):
        return None
    rows = report.rows.dropna(subset=["ratio"])
    out = []
    for (family, split), g in rows.groupby(["family", "split"], sort=False):
        s = error_stats(g["ratio"])
        out.append({"family": family, "split": split, "n": s["n"], "median": s["median_abs"],
                    "p90": s["p90_abs"], "signed": s["median_signed"]})
    out = pd.DataFrame(out)
    out = out.assign(_f=_order(out["family"]), _s=out["split"] != "fit").sort_values(["_f", "_s"])
    out["family"] = out["family"].map(lambda f: FAMILY_LABELS.get(f, f))
    return out.drop(columns=["_f", "_s"]).reset_index(drop=True)


def published_gemms(table: pd.DataFrame | None, publishers: tuple[str, ...] = ("DeepBench", "OpenXLA")
                    ) -> pd.DataFrame | None:
    """The published rows of :func:`perfkit.validation.validation_table` by ``publishers`` (default DeepBench's
    V100 and P100, OpenXLA's H100; :func:`newest_gemms` has the newest GPUs'), one row per table, dtype and
    half: n, the model's median and p90 |error| and the plain roofline's (datasheet peaks) median."""
    if table is None or not len(table):
        return None
    pub = table[table["data"].map(publisher_of).isin(publishers)]
    if not len(pub):
        return None
    rows = []
    for (data, device, dtype, half), g in pub.groupby(["data", "device", "dtype", "half"], sort=False):
        model, roof = g.set_index("predictor").loc["model"], g.set_index("predictor").loc["roofline"]
        publisher = publisher_of(data)
        rows.append({"table": f"{publisher} {device.split('-')[0]}", "dtype": dtype, "half": half,
                     "n": int(model["n"]), "median": model["median_abs"], "p90": model["p90_abs"],
                     "roofline": roof["median_abs"]})
    return pd.DataFrame(rows)


def newest_gemms(frames: Mapping[str, pd.DataFrame] | None) -> pd.DataFrame | None:
    """The newest GPUs' published GEMMs of :func:`perfkit.validation.validation_frames`: AMD AITER's tuned
    GEMMs per GPU (bf16 by half; its 8-bit kinds pooled) and the MAMF finder's best shapes per vendor and
    dtype, with n, the model's median and p90 |error| and the roofline's median. Blackwell's fp8 MAMF rows
    are ``"seen"``: its fp8 fraction was chosen after them (:mod:`perfkit.achievable`)."""
    if not frames:
        return None
    rows = []
    for f in frames.values():
        meta = FrameMeta.of(f)
        publisher = publisher_of(str(source_of(f))) or ""
        if not publisher.startswith(("AMD AITER", "ml-engineering")):
            continue
        f = f.assign(half=half_labels(f).values, group=f["dtype"])
        if publisher.startswith("AMD AITER"):
            f["table"] = f"AITER {meta.device}"
            f.loc[f["dtype"] != "bfloat16", "group"] = "8-bit"
        else:
            vendor = device_spec(meta.device).vendor
            f["table"] = "MAMF Blackwell" if vendor == "NVIDIA" else "MAMF AMD"
            f.loc[(vendor == "NVIDIA") & (f["dtype"] == "float8"), "half"] = "seen"
        rows.append(f)
    if not rows:
        return None
    out = []
    for (table, group, half), g in pd.concat(rows).groupby(["table", "group", "half"], sort=False):
        model, roof = (prediction_error(g["time_s"], g[c]) for c in ("predicted_s", "roofline_s"))
        out.append({"table": table, "dtype": group, "half": half, "n": model["n"], "median": model["median_abs"],
                    "p90": model["p90_abs"], "roofline": roof["median_abs"]})
    return pd.DataFrame(out)


def model_steps(report: Any) -> pd.DataFrame | None:
    """The four real models on ``report``'s GPU: ops scored, their median and p90 |error|, and the
    measured and predicted training step (seconds) with their ratio. ``measured as`` says what the step
    is: the whole step run as one (``model_steps``, :attr:`Report.whole_steps`) where recorded, else the
    sum of its ops timed alone (``advisor_layers``)."""
    if report is None or report.steps is None:
        return None
    s = report.steps
    t = pd.DataFrame({"model": s["model"], "ops": s["n"], "median": s["median_abs"], "p90": s["p90_abs"],
                      "measured_s": s["measured_step_s"], "predicted_s": s["predicted_step_s"],
                      "ratio": s["ratio"], "measured as": "ops timed alone, summed"})
    whole = getattr(report, "whole_steps", None)
    if whole is not None and len(whole):
        w = whole.set_index("model")
        hit = t["model"].isin(w.index)
        for column, source in (("measured_s", "measured_step_s"), ("predicted_s", "predicted_step_s"),
                               ("ratio", "ratio")):
            t.loc[hit, column] = t.loc[hit, "model"].map(w[source])
        t.loc[hit, "measured as"] = "whole step"
    t["model"] = t["model"].map(lambda m: MODEL_NAMES.get(m, m))
    return t


def fix_numbers(report: Any) -> dict[str, float] | None:
    """The recorded fixes on ``report``'s GPU: n, judged (|measured saving| > 10 µs), sign agreement,
    Spearman ρ, and GPT-2's padded vocabulary priced ÷ measured with the calibrated GPU
    (``vocab``) and on an uncalibrated H100-SXM (``vocab_h100``)."""
    if report is None or report.fixes is None:
        return None
    return {**fix_summary(report.fixes), "vocab": _vocab_ratio(report.fixes),
            "vocab_h100": _vocab_ratio(report.fixes_uncalibrated)}


def targets_table(report: Any) -> pd.DataFrame | None:
    """:func:`perfkit.book.check_your_model.targets` for a reader: target, value (3 significant digits),
    band, and "met", "not met" or "not measured"."""
    if report is None:
        return None
    t = targets(report)
    verdict = ["not measured" if h is None else "met" if h else "not met" for h in t["holds"]]
    return pd.DataFrame({"target": t["target"],
                         "value": ["–" if math.isnan(v) else f"{v:.3g}" for v in t["value"]],
                         "band": t["band"], "verdict": verdict})


def peer_steps(peers: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`perfkit.book.check_your_model.peer_table` as one row per model: measured ÷ predicted step for
    perfkit and for each peer (NaN where a peer could not run)."""
    if peers is None or not len(peers):
        return None
    names = peers["predictor"].map(lambda p: "perfkit" if p.startswith("perfkit")
                                   else next((v for k, v in _PEERS.items() if p.startswith(k)), p))
    wide = peers.assign(predictor=names).pivot(index="model", columns="predictor", values="measured ÷ predicted")
    columns = ["perfkit", *[c for c in _PEERS.values() if c in wide.columns]]
    columns += [c for c in wide.columns if c not in columns]
    order = list(dict.fromkeys(peers["model"]))
    wide = wide.loc[order, columns].reset_index()
    wide["model"] = wide["model"].map(lambda m: MODEL_NAMES.get(m, m))
    wide.columns.name = None
    return wide
