"""The GEMM model against published modern-GPU timings: the targets of issue 23, before and after.

Prints, for the model as committed before the change (``--baseline``, a git revision; its
``perfkit/gemm_model.py`` and its ceilings, ``perfkit/ceilings.py`` or in older revisions
``perfkit/calibration.py``, are loaded from git) and for the model in this checkout:

- OpenXLA's H100 rows (bf16 and TF32, b = 1 and b > 1): median and 90th percentile of
  ``|predicted/measured − 1|`` on all rows, and on the held-out half (:func:`perfkit.validation.fit_half`)
  where something was fitted or chosen on the fit half (:data:`perfkit.validation.FITTED_ON`); the
  targets are judged on the held-out half. The committed model had no ``batch``: it priced a
  batched row as one GEMM.
- DeepBench's V100 (fit and held-out halves) and P100: must not get worse.
- DeepGEMM's H800 fp8 dense GEMMs (no target: reported), small M and large M.

then one PASS/FAIL line per target. Needs the published tables (``$PERFKIT_PUBLISHED``). Run from the
repository root::

    python scripts/validate_published.py [--baseline REV]
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd

import perfkit as pk
from perfkit import validation
from perfkit.devices import DeviceSpec
from perfkit.book.gemm import published as gp

ROOT = Path(__file__).resolve().parents[1]
#: The last commit with the GEMM model as it was before issue 23 (no batch, BF16-like TF32 ceiling).
BASELINE = "48f0a2019b99280b875838971be902a4aa8388c4"
#: Targets: (name, data, dtype, batch, statistic, at most) on the held-out half of XLA's rows.
TARGETS = (("bf16 b = 1 median", "H100", "bfloat16", "b = 1", "median_abs", 0.08),
           ("bf16 b = 1 p90", "H100", "bfloat16", "b = 1", "p90_abs", 0.20),
           ("tf32 b = 1 median", "H100", "tf32", "b = 1", "median_abs", 0.12),
           ("tf32 b = 1 p90", "H100", "tf32", "b = 1", "p90_abs", 0.30),
           ("bf16 b > 1 median", "H100", "bfloat16", "b > 1", "median_abs", 0.15))


def baseline_explain(rev: str):
    """``explain_gemm`` of the model at git revision ``rev``: its gemm_model and the module of its
    ceilings (``perfkit/ceilings.py``; ``perfkit/calibration.py`` in revisions before it), with that
    revision's default ceilings (the current models take the spec's, which are the defaults here)."""
    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout

    def load(name: str, path: str, source: str) -> types.ModuleType:
        mod = types.ModuleType(f"perfkit.{name}")
        mod.__package__ = "perfkit"
        sys.modules[mod.__name__] = mod
        exec(compile(source, f"{rev[:12]}:{path}", "exec"), mod.__dict__)
        return mod

    model_source = show("perfkit/gemm_model.py")
    home = "ceilings" if "from .ceilings import" in model_source else "calibration"
    ceilings = load(f"_baseline_{home}", f"perfkit/{home}.py", show(f"perfkit/{home}.py"))
    model = load("_baseline_gemm_model", "perfkit/gemm_model.py",
                 model_source.replace(f"from .{home} import", f"from ._baseline_{home} import"))
    explain = model.explain_gemm
    has_batch = "batch" in inspect.signature(explain).parameters

    class OldSpec(DeviceSpec):  # revisions before the FLOP/s names asked a spec for peak_flops
        def peak_flops(self, dtype) -> float:
            return self.peak_flop_s(dtype)

    def baseline(*args, batch: int = 1, **kwargs):  # a model without ``batch`` priced one GEMM
        args = list(args)
        spec = args[4] if len(args) > 4 else kwargs["spec"]
        spec = OldSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
        if len(args) > 4:
            args[4] = spec
        else:
            kwargs["spec"] = spec
        if kwargs.get("ceilings") is None:
            kwargs["ceilings"] = ceilings.default_ceilings(spec)
        return explain(*args, batch=batch, **kwargs) if has_batch else explain(*args, **kwargs)

    return baseline


def predictions(frame: pd.DataFrame, explain=None, spec=None) -> pd.DataFrame:
    """``with_model`` under the current model, or under ``explain`` (the baseline's)."""
    if explain is None:
        return gp.with_model(frame, spec)
    current = validation.explain_gemm
    validation.explain_gemm = explain
    try:
        return gp.with_model(frame, spec)
    finally:
        validation.explain_gemm = current


def stats(frame: pd.DataFrame) -> dict:
    e = (frame["predicted_s"] / frame["time_s"] - 1).dropna()
    if not len(e):
        return {"n": 0, "median_abs": np.nan, "p90_abs": np.nan, "median": np.nan}
    return {"n": len(e), "median_abs": float(np.median(e.abs())), "p90_abs": float(np.percentile(e.abs(), 90)),
            "median": float(np.median(e))}


def rows_of(name: str, frame: pd.DataFrame, explain) -> list[dict]:
    """Per group of ``frame`` (dtype, batch, regime): the error on all rows and on the held-out half."""
    p = predictions(frame, explain)
    out = []
    if "b" in p:
        groups = [(f"{d}, {b}", g) for (d, b), g in
                  p.assign(batch=np.where(p["b"] > 1, "b > 1", "b = 1")).groupby(["dtype", "batch"], sort=False)]
    elif "groups" in p:
        groups = [("fp8, M ≤ 128", p[p["M"] <= 128]), ("fp8, M ≥ 1024", p[p["M"] >= 1024])]
    else:
        groups = list(p.groupby("dtype", sort=False))
    for group, g in groups:
        halves = [("all", g)] + [(h, g[g["half"] == h]) for h in ("fit", "held out") if (g["half"] == h).any()]
        out += [{"data": name, "group": group, "half": h, **stats(part)} for h, part in halves]
    return out


def table(explain) -> pd.DataFrame:
    rows = []
    if pk.published_data.has_published("xla_h100_gemm"):
        rows += rows_of("H100", gp.xla_rows(pk.published("xla_h100_gemm")), explain)
    if pk.published_data.has_published("deepbench_gemm"):
        for gpu in ("V100-SXM2", "P100-PCIe"):
            rows += rows_of(gpu[:4], pk.published("deepbench_gemm", gpu), explain)
    if pk.published_data.has_published("deepgemm_fp8"):
        rows += rows_of("H800", gp.deepgemm_dense(pk.published("deepgemm_fp8")), explain)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the model before (default: %(default)s)")
    args = parser.parse_args(argv)
    if not pk.published_data.has_published("xla_h100_gemm"):
        print(f"OpenXLA's H100 table is missing: {pk.published_data.HOW_TO_GET}")
        return 2
    after = table(None)
    try:
        before = table(baseline_explain(args.baseline))
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"the baseline model ({args.baseline}) cannot be read from git ({e}); showing the current model only")
        before = after.assign(n=0, median_abs=np.nan, p90_abs=np.nan, median=np.nan)
    keys = ["data", "group", "half"]
    both = before.merge(after, on=keys, suffixes=(" before", " after"))
    pd.set_option("display.width", 160)
    print(f"|predicted / measured − 1| before ({args.baseline[:12]}) and after; median signed error "
          "(< 0: optimistic)\n")
    shown = both[keys + ["n after", "median_abs before", "median_abs after", "p90_abs before", "p90_abs after",
                         "median before", "median after"]].rename(columns={"n after": "n"})
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.1%}"))
    print("\nTargets (held-out half of XLA's H100 rows; all rows in brackets):")
    failed = 0
    idx = both.set_index(keys)
    for name, data, dtype, batch, stat, limit in TARGETS:
        held = idx.loc[(data, f"{dtype}, {batch}", "held out")]
        whole = idx.loc[(data, f"{dtype}, {batch}", "all")]
        value = held[f"{stat} after"]
        ok = value <= limit
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'}  {name:<18} {value:6.1%} ≤ {limit:.0%}?  "
              f"(all rows {whole[f'{stat} after']:.1%}; before: held out {held[f'{stat} before']:.1%}, "
              f"all {whole[f'{stat} before']:.1%})")
    deepbench = both[both["data"].isin(["V100", "P100"])]
    for _, r in deepbench.iterrows():
        for stat in ("median_abs", "p90_abs"):
            b, a = r[f"{stat} before"], r[f"{stat} after"]
            ok = not (a > b + 5e-4)  # not worse (to 0.05 %)
            failed += not ok
            print(f"  {'PASS' if ok else 'FAIL'}  {r['data']} {r['group']} {r['half']} {stat.split('_')[0]}: "
                  f"{b:.1%} → {a:.1%} (must not get worse)")
    print(f"\n{failed} target(s) failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
