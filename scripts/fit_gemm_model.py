"""Fit the GEMM model's constants, each on the data it rests on, and print the halves never used to fit.

- default: ``reuse_per_ridge`` (c, with r0 = c · ridge point), ``sm_bandwidth_share`` (β) and
  ``latency_s`` by grid search (median + 90th percentile of |predicted/measured − 1|) on the fit half
  of DeepBench's published V100 GEMMs (``perfkit.validation.fit_half``); prints the held-out half and
  the P100 (never fitted) under the best and under perfkit's ``DEFAULT_MODEL``.
- ``--tf32``: Hopper's TF32 fraction and extra fixed cost (``perfkit.ceilings.TF32_FIT``, with the
  serial epilogue) on the fit half of OpenXLA's published H100 TF32 rows; the held-out half beside it.
- ``--alignment``: Hopper's unaligned-GEMM slowdowns (``perfkit.ceilings.ALIGNMENT_SLOWDOWNS``): per
  alignment class, the median over the unaligned GEMMs of our H200's ``gemm_alignment`` and
  ``fc_features`` (in and batch sweeps) of each one's time over its aligned neighbours'.
- ``--stream``: Hopper's GEMM streaming bandwidth per SM and flushed-L2 floor
  (``GEMM_SM_BANDWIDTH``, ``GEMM_FLOOR_S``) by grid search on the memory-bound aligned rows of our
  H200's ``gemm_small_n`` and ``fc_batch`` (``perfkit.validation.recorded_fit_rows``).

- ``--cdna``: AMD CDNA's typical-over-best fraction, GEMM fixed cost, bandwidth fraction and tile reuse
  (``perfkit.achievable.AMD_FIT``) by grid search on the fit half of AMD AITER's gfx950 (MI355X-class) bf16
  GEMMs; prints the held-out half, AITER's gfx942 (MI300X-class) bf16 rows and the MAMF rows beside them.

Run from the repository root::

    python scripts/fit_gemm_model.py [--tf32 | --alignment | --stream | --cdna]
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace

import numpy as np
import pandas as pd
from tqdm import tqdm

import perfkit as pk
from perfkit.meta import FrameMeta
from perfkit.achievable import AMD_FIT
from perfkit.ceilings import (ALIGNMENT_SLOWDOWNS, GEMM_FLOOR_S, GEMM_SM_BANDWIDTH, TF32_FIT, default_ceilings)
from perfkit.published_data.newest import aiter_rows, mamf_rows
from perfkit.gemm_model import DEFAULT_MODEL, GemmModel
from perfkit.published_data.xla import xla_rows
from perfkit.validation import fit_half, neighbour_slowdowns, recorded_fit_rows, validation_frames, with_predictions

GRID = {"reuse_per_ridge": (0.5, 0.75, 1.0, 1.25, 1.5), "sm_bandwidth_share": (0.75, 1.0, 1.5, 2.0),
        "latency_s": (4e-6, 5e-6, 6e-6)}
TF32_GRID = {"fraction": tuple(np.round(np.arange(0.60, 0.876, 0.025), 3)),
             "extra_latency_s": tuple(np.round(np.arange(0, 4.01e-6, 0.5e-6), 9))}
CDNA_GRID = {"typical_of_best": (0.7, 0.75, 0.8, 0.85), "latency_s": (2.0e-6, 2.5e-6, 3.0e-6, 3.5e-6),
             "bandwidth_fraction": (0.7, 0.75, 0.8, 0.85), "reuse_per_ridge": (1.0, 4.0, 16.0, 64.0)}
STREAM_GRID = {"floor_s": tuple(np.round(np.arange(5.0e-6, 7.51e-6, 0.25e-6), 9)),
               "sm_bandwidth": tuple(np.arange(17e9, 26.1e9, 1e9))}


def errors(frame: pd.DataFrame) -> pd.Series:
    return (frame["predicted_s"] / frame["time_s"] - 1).abs()


def score(frame: pd.DataFrame) -> float:
    e = errors(frame)
    return float(np.median(e) + np.percentile(e, 90))


def stats(frame: pd.DataFrame) -> str:
    e = errors(frame)
    return f"n={len(e)} median {np.median(e):.1%} p90 {np.percentile(e, 90):.1%}"


def summary(name: str, frame: pd.DataFrame) -> str:
    parts = []
    for dtype, g in frame.groupby("dtype"):
        e = pk.gemm_model.prediction_error(g["time_s"], g["predicted_s"])
        parts.append(f"{dtype}: n={e['n']} median {e['median_abs']:.1%} p90 {e['p90_abs']:.1%} "
                     f"optimistic {e['optimistic']:.0%}")
    return f"{name:<22} " + " | ".join(parts)


def fit_tf32() -> None:
    """Grid-search TF32_FIT on the fit half of XLA's H100 TF32 rows; print the best and both halves."""
    rows = xla_rows(pk.published("xla_h100_gemm"), dtype="tf32")
    spec = pk.device_spec("H100-SXM")
    base, half = replace(default_ceilings(spec), gemm_floor_s=None), fit_half(rows)  # XLA timed by CUPTI: warm
    grid = []
    for fraction, extra in tqdm(list(itertools.product(*TF32_GRID.values())), desc="tf32 grid"):
        c = replace(base, flop_s={**base.flop_s, "tf32": fraction * spec.peak_flop_s("tf32")},
                    extra_latency_s={**base.extra_latency_s, "tf32": extra})
        p = with_predictions(rows, spec, ceilings=c)
        grid.append({"fraction": fraction, "extra_us": extra * 1e6, "score": score(p[half]),
                     "fit": stats(p[half]), "held out": stats(p[~half]), "b = 1": stats(p[p["b"] == 1])})
    table = pd.DataFrame(grid).sort_values("score", kind="stable")
    pd.set_option("display.width", 220)
    print("best on the fit half of XLA's H100 TF32 rows (median + p90 of |error|, all b; serial epilogue):")
    print(table.head(8).to_string(index=False))
    print(f"\nperfkit.ceilings.TF32_FIT: {TF32_FIT['fraction']:.3f}, {TF32_FIT['extra_latency_s'] * 1e6:.1f} µs")


def fit_alignment() -> None:
    """The model-free unaligned slowdowns of our H200 recordings, per dtype family and alignment class."""
    align = pk.data.load("gemm_alignment", device="H200")
    fc = pk.data.load("fc_features", device="H200")
    parts = [neighbour_slowdowns(align, "K").assign(source="gemm_alignment"),
             neighbour_slowdowns(fc[fc["sweep"].isin(["in", "batch"])], "swept", ("sweep",))
             .assign(source="fc_features")]
    rows = pd.concat(parts, ignore_index=True)
    rows["family"] = rows["dtype"].replace({"bfloat16": "float16"})
    pd.set_option("display.width", 220)
    print(rows.groupby(["family", "alignment_class", "source"])["slowdown"].agg(["size", "median", "min", "max"]))
    print("\npooled (the constants):")
    print(rows.groupby(["family", "alignment_class"])["slowdown"].median().round(2).to_string())
    print(f"\nperfkit.ceilings.ALIGNMENT_SLOWDOWNS['hopper']: {ALIGNMENT_SLOWDOWNS['hopper']}")


def fit_stream() -> None:
    """Grid-search Hopper's GEMM streaming bandwidth per SM and flushed-L2 floor on our H200's rows."""
    frames = validation_frames()
    ours = {n: f.drop(columns=["predicted_s", "roofline_s"]) for n, f in frames.items() if "h200" in n}
    fit = [f[recorded_fit_rows(f)] for n, f in ours.items() if n.startswith(("gemm_small_n", "fc_batch"))]
    spec0 = pk.calibrated("H200")
    grid = []
    for floor_s, sm_bw in tqdm(list(itertools.product(*STREAM_GRID.values())), desc="stream grid"):
        spec = replace(spec0, measured_ceilings=replace(spec0.measured_ceilings, gemm_floor_s=floor_s,
                                                        gemm_sm_bandwidth=sm_bw))
        p = pd.concat([with_predictions(f, spec) for f in fit])
        grid.append({"floor_us": floor_s * 1e6, "GB/s per SM": sm_bw / 1e9, "score": score(p), "fit": stats(p)})
    print(pd.DataFrame(grid).sort_values("score", kind="stable").head(8).to_string(index=False))
    print(f"\nperfkit.ceilings: GEMM_FLOOR_S {GEMM_FLOOR_S}, GEMM_SM_BANDWIDTH {GEMM_SM_BANDWIDTH}")


def cdna_predictions(frame: pd.DataFrame, typical_of_best: float, latency_s: float, bandwidth_fraction: float,
                     reuse_per_ridge: float) -> pd.DataFrame:
    """``frame`` (one AMD GPU's GEMMs) predicted with CDNA constants other than perfkit's."""
    spec = pk.device_spec(pk.meta.FrameMeta.of(frame).device)
    base = default_ceilings(spec)
    scale = typical_of_best / AMD_FIT["typical_of_best"]
    c = replace(base, flop_s={d: v * scale for d, v in base.flop_s.items()}, gemm_latency_s=latency_s,
                bandwidth=bandwidth_fraction * spec.mem_bandwidth, gemm_floor_s=None)
    return with_predictions(frame, spec, ceilings=c, model=GemmModel(reuse_per_ridge=reuse_per_ridge))


def fit_cdna() -> None:
    """Grid-search AMD_FIT on the fit half of AITER's gfx950 bf16 rows; print it beside the held-out rows."""
    mi355x = aiter_rows(pk.published("aiter_gemm", "MI355X"), dtype="bfloat16")
    mi300x = aiter_rows(pk.published("aiter_gemm", "MI300X"), dtype="bfloat16")
    half = fit_half(mi355x)
    fit, held = mi355x[half], mi355x[~half]
    grid = []
    for values in tqdm(list(itertools.product(*CDNA_GRID.values())), desc="cdna grid"):
        grid.append({**dict(zip(CDNA_GRID, values)), "score": score(cdna_predictions(fit, *values))})
    table = pd.DataFrame(grid).sort_values("score", kind="stable")
    pd.set_option("display.width", 220)
    print("best on the fit half of AITER's gfx950 bf16 rows (median + p90 of |error|):")
    print(table.head(8).to_string(index=False))
    best = tuple(table.iloc[0][list(CDNA_GRID)])
    ours = tuple(AMD_FIT[k] for k in CDNA_GRID)
    mamf = [m for m in map(mamf_rows, pk.published_data.published_all("mamf_newest")) if len(m)]
    for label, values in (("best", best), ("perfkit.achievable.AMD_FIT", ours)):
        print(f"\n{label}: {dict(zip(CDNA_GRID, values))}")
        for name, frame in (("MI355X fit half", fit), ("MI355X held out", held), ("MI300X (held out)", mi300x),
                            *((f"MAMF {FrameMeta.of(f).device}", f) for f in mamf
                              if pk.devices.device_spec(FrameMeta.of(f).device).vendor == "AMD")):
            print("  " + summary(name, cdna_predictions(frame, *values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tf32", action="store_true", help="fit Hopper's TF32 defaults on XLA's H100 rows")
    which.add_argument("--alignment", action="store_true", help="Hopper's unaligned slowdowns from our H200")
    which.add_argument("--stream", action="store_true", help="Hopper's GEMM streaming rate and floor from our H200")
    which.add_argument("--cdna", action="store_true", help="CDNA's constants from AITER's gfx950 bf16 rows")
    args = parser.parse_args()
    if args.cdna:
        return fit_cdna()
    if args.tf32:
        return fit_tf32()
    if args.alignment:
        return fit_alignment()
    if args.stream:
        return fit_stream()
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
