"""Fit the GEMM model's constants on the fit half of DeepBench's published V100 GEMMs.

A grid search over ``reuse_per_ridge`` (c, with r0 = c · ridge point), ``sm_bandwidth_share`` (β) and ``latency_s`` minimising
median + 90th percentile of |predicted/measured − 1| on the fit half (``perfkit.validation.fit_half``);
it prints the best few, then the held-out half and the P100 (never fitted) under the best and
under perfkit's ``DEFAULT_MODEL``. The ceilings are not fitted: they are the documented defaults
of ``perfkit.calibration``. Run from the repository root::

    python scripts/fit_gemm_model.py
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from tqdm import tqdm

import perfkit as pk
from perfkit.gemm_model import DEFAULT_MODEL, GemmModel
from perfkit.validation import fit_half, with_predictions

GRID = {"reuse_per_ridge": (0.5, 0.75, 1.0, 1.25, 1.5), "sm_bandwidth_share": (0.75, 1.0, 1.5, 2.0),
        "latency_s": (4e-6, 5e-6, 6e-6)}


def score(frame: pd.DataFrame) -> float:
    e = np.abs(frame["predicted_s"] / frame["time_s"] - 1)
    return float(np.median(e) + np.percentile(e, 90))


def summary(name: str, frame: pd.DataFrame) -> str:
    parts = []
    for dtype, g in frame.groupby("dtype"):
        e = pk.prediction_error(g["time_s"], g["predicted_s"])
        parts.append(f"{dtype}: n={e['n']} median {e['median_abs']:.1%} p90 {e['p90_abs']:.1%} "
                     f"optimistic {e['optimistic']:.0%}")
    return f"{name:<22} " + " | ".join(parts)


def main() -> None:
    v100 = pk.published("gemm", "V100-SXM2")
    p100 = pk.published("gemm", "P100-PCIe")
    fit, held = v100[fit_half(v100)], v100[~fit_half(v100)]  # each keeps v100's attrs["meta"]
    results = []
    for values in tqdm(list(itertools.product(*GRID.values())), desc="grid"):
        model = GemmModel(**dict(zip(GRID, values)))
        results.append((score(with_predictions(fit, model=model, ceilings="default")), model))
    results.sort(key=lambda r: r[0])
    print("best on the fit half (median + p90 of |error|):")
    for s, m in results[:5]:
        print(f"  {s:.3f}  {m}")
    for label, model in (("best", results[0][1]), ("perfkit DEFAULT_MODEL", DEFAULT_MODEL)):
        print(f"\n{label}: {model}")
        for name, frame in (("V100 fit half", fit), ("V100 held out", held), ("P100 (not fitted)", p100)):
            print("  " + summary(name, with_predictions(frame, model=model, ceilings="default")))


if __name__ == "__main__":
    main()
