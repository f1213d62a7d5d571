"""The newest GPUs (Blackwell, AMD Instinct) against the published tables: every target of issue 43, printed.

Fit/score split (each constant's docstring says the same):

- AMD CDNA's GEMM constants (``perfkit.achievable.AMD_FIT``) were fitted on the *fit* half of AMD AITER's
  gfx950 (MI355X-class) bf16 GEMMs (``scripts/fit_gemm_model.py --cdna``); the other half and every gfx942
  (MI300X-class) row are held out. AMD's achievable fractions rest on the MAMF finder's rows, which are
  therefore fit rows on AMD (and predicted as a *typical* kernel: 0.75 of that best).
- Blackwell takes Hopper's fractions: nothing Blackwell fitted anything, so MAMF's B200/B300/GB200 bf16 rows
  and cuDNN's GB200/GB300 attention rows are held out. MAMF's Blackwell fp8 rows are not a clean check: fp8
  was given the Tensor Core fraction (not Hopper's lower fp8 one) after they came out 10–23 % slow, for a
  cause named in ``perfkit.achievable``. Blackwell's attention rates were fitted on cuDNN's B200
  rows (``perfkit.attention_model``).
- The H100, H200, V100 and P100 rows are perfkit's existing validation: printed to show no regression.

Prints each target with "met" or "NOT met". Needs the published tables (``$PERFKIT_PUBLISHED`` or
``../shared/reference/published``). Run from the repository root::

    python scripts/validate_newest_gpus.py
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfkit.attention_validation import attention_errors, attention_summary, published_attention_table
from perfkit.gemm_model import prediction_error
from perfkit.meta import FrameMeta
from perfkit.validation import half_labels, validation_frames, validation_table

GEMM_TARGET = {"median_abs": 0.15, "p90_abs": 0.35}
MAMF_TARGET = 0.10
ATTENTION_TARGET = 0.20
REGRESSION_DEVICES = ("H100-SXM", "H200", "V100-SXM2", "P100-PCIe")


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def gemm_section(frames: dict[str, pd.DataFrame]) -> None:
    print("## GEMM model on AMD AITER's tuned GEMMs (target: median ≤ 15 %, p90 ≤ 35 % on bf16)\n")
    rows = []
    for name, f in frames.items():
        meta = FrameMeta.of(f)
        if not (meta.published_by or "").startswith("AMD AITER"):
            continue
        f = f.assign(half=half_labels(f).values)
        for (dtype, kind, half), g in f.groupby(["dtype", "kind", "half"]):
            e = prediction_error(g["time_s"], g["predicted_s"])
            rows.append({"device": meta.device, "dtype": dtype, "kind": kind, "half": half, "n": e["n"],
                         "median": e["median_abs"], "p90": e["p90_abs"], "optimistic": e["optimistic"]})
    table = pd.DataFrame(rows)
    bf16 = table[table["dtype"] == "bfloat16"].copy()
    bf16["target"] = [verdict(m <= GEMM_TARGET["median_abs"] and p <= GEMM_TARGET["p90_abs"]) if h != "fit"
                      else "(fit rows)" for m, p, h in zip(bf16["median"], bf16["p90"], bf16["half"])]
    print(fmt(bf16))
    print("\n8-bit rows (no target: the bf16 fractions applied to 8-bit, none fitted on them):\n")
    print(fmt(table[table["dtype"] != "bfloat16"]))


def mamf_section(frames: dict[str, pd.DataFrame]) -> None:
    print(f"\n## MAMF best shapes (target: |error| ≤ {MAMF_TARGET:.0%})\n")
    rows = []
    for name, f in frames.items():
        meta = FrameMeta.of(f)
        if not (meta.published_by or "").startswith("ml-engineering"):
            continue
        halves = half_labels(f)
        for r, half in zip(f.itertuples(), halves):
            err = r.predicted_s / r.time_s - 1
            if half == "not fitted" and r.dtype == "float8":
                half = "seen (fp8 fraction chosen after)"
            rows.append({"device": meta.device, "dtype": r.dtype, "M×N×K": f"{r.M}×{r.N}×{r.K}",
                         "measured TFLOP/s": r.tflops_best, "predicted TFLOP/s": r.tflops_best / (1 + err),
                         "error": err, "half": half,
                         "target": verdict(abs(err) <= MAMF_TARGET) if half != "fit" else
                         f"{verdict(abs(err) <= MAMF_TARGET)} (fit row; a typical kernel is predicted)"})
    print(fmt(pd.DataFrame(rows)))


def attention_section() -> None:
    print(f"\n## Fused attention on cuDNN's training benchmarks (target: median ≤ {ATTENTION_TARGET:.0%}, "
          "B200 and GB200, forward and backward)\n")
    table = published_attention_table()
    if table is None or not len(table):
        print("published attention tables absent")
        return
    summary = attention_summary(attention_errors(table))
    wanted = summary["gpu"].isin(["B200", "GB200"])
    summary["target"] = ""
    summary.loc[wanted, "target"] = [verdict(m <= ATTENTION_TARGET) + (" (fit rows)" if h == "fit" else "")
                                     for m, h in zip(summary.loc[wanted, "median_abs_error"],
                                                     summary.loc[wanted, "half"])]
    print(fmt(summary))
    excluded = attention_errors(table)["excluded"].value_counts().drop("", errors="ignore")
    print("\nnot scored (each with its reason):\n" + excluded.to_string())


def regression_section(frames: dict[str, pd.DataFrame]) -> None:
    print("\n## No regression: perfkit's existing validation rows (H100, H200, V100, P100)\n")
    older = {n: f for n, f in frames.items() if FrameMeta.of(f).device in REGRESSION_DEVICES}
    table = validation_table(older)
    table = table[table["predictor"] == "model"].drop(columns=["predictor"])
    table["data"] = table["data"].str.slice(0, 60)
    print(fmt(table))


def fmt(table: pd.DataFrame) -> str:
    if not len(table):
        return "(no rows)"
    out = table.copy()
    for c in out.columns:
        if c in ("median", "p90", "median_abs", "p90_abs", "error", "optimistic", "median_abs_error",
                 "p90_abs_error"):
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:+.1%}" if c == "error" else f"{v:.1%}")
        elif out[c].dtype.kind == "f":
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:,.1f}")
    return out.to_string(index=False)


def main() -> None:
    pd.set_option("display.width", 250)
    np.seterr(all="ignore")
    frames = validation_frames()
    gemm_section(frames)
    mamf_section(frames)
    attention_section()
    regression_section(frames)


if __name__ == "__main__":
    main()
