"""``perfkit validate``: every prediction perfkit makes beside every recording that measures it, with targets.

:func:`validation_report` gathers, for each GPU folder under ``data/``: the microbenchmark families
(:mod:`.families`, with the recordings each model was fitted on marked ``fit``), the real models' ops and
steps and the recorded fixes (:mod:`.held_out`, the score set: nothing is fitted to them), on the
recording's GPU with its calibration and, for the fix the issue names, on an uncalibrated ``H100-SXM``.
The step targets judge the whole measured step (``model_steps``, :mod:`.steps`: forward + backward run
as one step, re-predicted today) where it was recorded, else the sum of the ops timed alone.
:func:`targets` judges the numbers against :data:`TARGETS`; :func:`print_report` prints it all. A
recording that cannot be read (a CSV without its metadata) is listed with the reason, never skipped
silently. Units: seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...calibration import calibrated
from ...data import data_root, load, recordings
from ...devices import DeviceSpec, device_spec, match_driver_name
from ...provenance import Source, source_of
from ...units import format_time
from .families import FAMILIES, FITTED, family_rows, family_table
from .held_out import MIN_SAVING_S, fix_summary, score_fixes, score_ops, step_ratios
from .peers import peer_steps
from .steps import score_steps

__all__ = ["TARGETS", "Report", "peer_table", "print_report", "targets", "validation_report"]

#: (what, low, high): a target holds when low ≤ value ≤ high.
TARGETS: tuple[tuple[str, float, float], ...] = (
    ("real-model ops: median |measured/predicted − 1|", 0.0, 0.15),
    ("real-model ops: p90 |measured/predicted − 1|", 0.0, 0.50),
    *((f"step measured ÷ predicted: {m}", 0.9, 1.1) for m in ("resnet50", "gpt2_small", "llama_7b", "lstm_lm")),
    (f"fixes: sign agreement where |measured saving| > {format_time(MIN_SAVING_S)}", 0.9, 1.0),
    ("fixes: Spearman ρ of priced against measured savings", 0.8, 1.0),
    ("padded vocabulary priced ÷ measured, calibrated H200", 0.5, 2.0),
    ("padded vocabulary priced ÷ measured, uncalibrated H100-SXM", 0.5, 2.0),
)

#: The fix whose price the targets follow on a GPU without a profile: GPT-2's vocabulary padded to ×64.
VOCAB_FIX = ("gpt2_small", "alignment", "lm_head")


@dataclass
class Report:
    """What :func:`validation_report` found on one GPU's recordings."""

    device: str
    spec: DeviceSpec
    families: pd.DataFrame
    source: Source | str = ""  # where the recordings come from (perfkit.provenance)
    ops: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    fixes: pd.DataFrame | None = None
    fixes_uncalibrated: pd.DataFrame | None = None
    whole_steps: pd.DataFrame | None = None  # model_steps re-predicted (steps.score_steps): the step targets' source
    rows: pd.DataFrame | None = None  # every microbenchmark row with its prediction (families.family_rows)
    problems: list[str] = field(default_factory=list)  # recordings that could not be read
    notes: list[str] = field(default_factory=list)  # what is not scored for want of a recording


def _spec_for(device_name: Any) -> DeviceSpec:
    name = match_driver_name(device_name) if isinstance(device_name, str) else None
    return calibrated(device_spec(name or device_name))


def validation_report(root: Any = None, *, models: bool = True, uncalibrated: str = "H100-SXM") -> list[Report]:
    """One :class:`Report` per GPU with recordings under ``root`` (default ``data/``). ``models=False`` skips
    the real models (they need torch); ``uncalibrated`` names the GPU without a profile whose fix prices are
    also scored (None: none)."""
    table = recordings(root)
    table = table[table["device_kind"] == "gpu"]
    orphans = [p for p in data_root(root).glob("*/*.csv") if not p.name.startswith(".")
               and not p.with_suffix(".json").is_file()]
    reports = []
    for slug, mine in table.groupby("device_slug", sort=True):
        problems = [f"{p}: no metadata file {p.with_suffix('.json').name} beside it; data without metadata is not "
                    "trusted" for p in orphans if p.parent.name == slug]
        frames = {}
        for name in mine["experiment"]:
            try:
                frames[name] = load(name, device=slug, root=root)
            except (OSError, ValueError, LookupError) as e:
                problems.append(f"{name}: {e}")
        spec = _spec_for(mine["device_name"].iloc[0])
        rows = family_rows({n: f for n, f in frames.items() if n in FAMILIES}, spec)
        report = Report(slug, spec, family_table(None, rows=rows), rows=rows,
                        source=source_of(next(iter(frames.values()))) if frames else "", problems=problems)
        missing = [n for n in FAMILIES if n not in frames]
        if missing:
            report.notes.append(f"no recording of {', '.join(missing)} on {slug}: not scored")
        if models and {"advisor_layers", "advisor_fixes"} <= set(frames):
            advices: dict[str, Any] = {}
            report.ops = score_ops(frames["advisor_layers"], spec, advices)
            report.steps = step_ratios(report.ops)
            report.fixes = score_fixes(frames["advisor_fixes"], spec, advices)
            if uncalibrated:
                report.fixes_uncalibrated = score_fixes(frames["advisor_fixes"], device_spec(uncalibrated))
        elif models:
            report.notes.append(f"no advisor_layers/advisor_fixes on {slug}: the real models are not scored")
        if models and "model_steps" in frames:
            report.whole_steps = score_steps(frames["model_steps"], spec, report.ops)
        elif models:
            report.notes.append(f"no model_steps recording on {slug}: the step is the sum of the ops timed alone")
        reports.append(report)
    return reports


def _vocab_ratio(fixes: pd.DataFrame | None) -> float:
    if fixes is None:
        return math.nan
    hit = fixes[(fixes["model"] == VOCAB_FIX[0]) & (fixes["rule"] == VOCAB_FIX[1]) & (fixes["layer"] == VOCAB_FIX[2])]
    return float(hit["predicted_saving_s"].iloc[0] / hit["measured_saving_s"].iloc[0]) if len(hit) else math.nan


def targets(report: Report) -> pd.DataFrame:
    """Each of :data:`TARGETS` with its value on ``report`` and whether it holds (NaN value: not measured).
    A model's step ratio is its whole step (``report.whole_steps``) where recorded, else its ops' sum."""
    values: list[float] = [math.nan] * len(TARGETS)
    steps = {}  # the whole step where model_steps recorded it, else the sum of the ops timed alone
    for source in (report.steps, report.whole_steps):
        if source is not None:
            steps.update(source.set_index("model")["ratio"].dropna())
    for i, m in enumerate(("resnet50", "gpt2_small", "llama_7b", "lstm_lm")):
        values[2 + i] = float(steps.get(m, math.nan))
    if report.ops is not None:
        e = (report.ops.loc[report.ops["scored"], "ratio"] - 1).abs()
        values[0], values[1] = float(e.median()), float(e.quantile(0.9))
        s = fix_summary(report.fixes)
        values[6], values[7] = s["sign_agreement"], s["spearman"]
        values[8], values[9] = _vocab_ratio(report.fixes), _vocab_ratio(report.fixes_uncalibrated)
    rows = [{"target": what, "value": v, "band": f"{lo:g} … {hi:g}",
             "holds": (lo <= v <= hi) if not math.isnan(v) else None}
            for (what, lo, hi), v in zip(TARGETS, values)]
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def print_report(reports: list[Report], peers: pd.DataFrame | None = None) -> None:
    """Print each report: the fit/score split, the families, the real models, the fixes, peers, the targets."""
    for r in reports:
        print(f"\n=== {r.device} (predictions on {r.spec.name}, "
              f"{r.spec.ceilings.source.split(';')[0] if r.spec.ceilings else 'datasheet'}) ===")
        print("\nFit on (constants derived from these recordings; every other row is held out):")
        for name, what in FITTED.items():
            print(f"  {name}: {what}")
        print("  advisor_layers, advisor_fixes: nothing (the score set)")
        fam = r.families.drop(columns="split").copy()
        fam.insert(2, "split", ["fit" if n in FITTED else "held out" for n in fam["recording"]])
        for c in ("median_abs", "p90_abs", "median_signed"):
            fam[c] = fam[c].map(_pct)
        print("\nMicrobenchmarks by family (error = measured/predicted − 1; + means the model is too fast):")
        print(fam.to_string(index=False))
        if r.steps is not None:
            st = r.steps.copy()
            for c in ("median_abs", "p90_abs", "median_signed"):
                st[c] = st[c].map(_pct)
            print("\nReal models, op by op and summed into a step (held out):")
            print(st.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            left = r.ops[~r.ops["scored"]]
            for x in left.itertuples():
                print(f"  left out: {x.model} {x.layer} {x.op}: {x.why}")
            s = fix_summary(r.fixes)
            print(f"\nFixes (held out): {s['n']} recorded, {s['judged']} with |measured saving| > "
                  f"{format_time(MIN_SAVING_S)}; sign agreement {_pct(s['sign_agreement'])}, "
                  f"Spearman ρ {s['spearman']:.2f}")
        if r.whole_steps is not None:
            print(f"\nWhole training steps (model_steps: forward + backward run as one step, re-predicted with "
                  f"{r.spec.name}; the step targets use these where recorded; ops_s: the scored ops timed alone, "
                  "gap_s: the step − ops_s):")
            print(r.whole_steps.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            for x in r.whole_steps[r.whole_steps["block_share"] < 1].itertuples():
                print(f"  {x.model}: a stack of {x.block_share:.1%} of its repeated blocks (ops_s counts the same)")
        if peers is not None and len(peers):
            print("\nPeers on the same models (measured ÷ predicted step):")
            shown = peers.assign(note=peers["note"].astype(str).str.slice(0, 70))
            print(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        t = targets(r)
        t["value"] = [f"{v:.3g}" if not math.isnan(v) else "not measured" for v in t["value"]]
        print("\nTargets:")
        print(t.to_string(index=False))
        for p in r.problems:
            print(f"  could not score: {p}")
        for n in r.notes:
            print(f"  not scored: {n}")


def peer_table(reports: list[Report]) -> pd.DataFrame | None:
    """Peers' predicted steps for the real models (:func:`.peers.peer_steps`) beside ours and the measured
    step of the first report with real models: model, predictor, measured ÷ predicted, note. None when no
    report has them."""
    mine = next((r for r in reports if r.steps is not None), None)
    if mine is None:
        return None
    measured = mine.steps.set_index("model")["measured_step_s"]
    ours = pd.DataFrame({"model": mine.steps["model"], "predictor": f"perfkit (this version, {mine.spec.name})",
                         "predicted_step_s": mine.steps["predicted_step_s"], "note": ""})
    both = pd.concat([ours, peer_steps(list(measured.index))], ignore_index=True)
    both["measured ÷ predicted"] = both["model"].map(measured) / both["predicted_step_s"]
    return both[["model", "predictor", "measured ÷ predicted", "note"]]
