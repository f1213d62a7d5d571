"""Fit the GEMM model's constants on the fit half of DeepBench's published V100 GEMMs.

A grid search over ``reuse_per_ridge`` (c, with r0 = c · ridge point), ``sm_bandwidth_share`` (β) and ``latency_s`` minimising
median + 90th percentile of |predicted/measured − 1| on the fit half (``perfkit.validation.fit_half``);
it prints the best few, then the held-out half and the P100 (never fitted) under the best and
under perfkit's ``DEFAULT_MODEL``. The ceilings are not fitted: they are the documented defaults
of ``perfkit.ceilings``, except Hopper's TF32 ceiling and fixed cost, which ``--tf32`` fits on the
fit half of OpenXLA's published H100 TF32 rows (``perfkit.ceilings.TF32_FIT``; the held-out half is
printed beside it, never used to choose). Run from the repository root::

    python scripts/fit_gemm_model.py           # the model's constants, on DeepBench's V100
    python scripts/fit_gemm_model.py --tf32    # Hopper's TF32 fraction and fixed cost, on XLA's H100
"""

from __future__ import annotations

import argparse
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
        e = pk.gemm_model.prediction_error(g["time_s"], g["predicted_s"])
        parts.append(f"{dtype}: n={e['n']} median {e['median_abs']:.1%} p90 {e['p90_abs']:.1%} "
                     f"optimistic {e['optimistic']:.0%}")
    return f"{name:<22} " + " | ".join(parts)


def fit_tf32() -> None:
    """Grid-search TF32_FIT on the fit half of XLA's H100 TF32 rows; print the best and the halves."""
    from perfkit.ceilings import TF32_FIT
    from perfkit.book.gemm.published import fit_tf32 as search

    best, grid = search(pk.published("xla_h100_gemm"))
    pd.set_option("display.width", 200)
    print("best on the fit half of XLA's H100 TF32 rows (median + p90 of |error|, all b):")
    print(grid.head(8).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\nbest: fraction {best['fraction']:.3f}, extra latency {best['extra_latency_s'] * 1e6:.1f} µs; "
          f"perfkit.ceilings.TF32_FIT: {TF32_FIT['fraction']:.3f}, {TF32_FIT['extra_latency_s'] * 1e6:.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tf32", action="store_true", help="fit Hopper's TF32 defaults on XLA's H100 rows instead")
    if parser.parse_args().tf32:
        return fit_tf32()
    v100 = pk.published("deepbench_gemm", "V100-SXM2")
    p100 = pk.published("deepbench_gemm", "P100-PCIe")
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
