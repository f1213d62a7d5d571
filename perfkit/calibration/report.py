"""A calibration's report: what was measured, against the datasheet, and the model's error before
and after (plain text, for the command line and a notebook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..ceilings import KERNEL_LATENCY_S
from ..device_runtime import graph_name
from ..gemm_model import prediction_error
from ..units import GiB, MiB, format_percent, format_rate, format_time
from .profile import DeviceProfile

__all__ = ["ceilings_table", "error_by_kind", "report"]


def _size(nbytes: float) -> str:
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes / MiB:g} MiB"


def ceilings_table(profile: DeviceProfile) -> list[dict[str, Any]]:
    """One row per measured ceiling: ``ceiling``, ``measured`` and ``reference`` (formatted), ``share``
    of the reference (a fraction, or None), ``how``. The reference is the datasheet's peak on a known
    GPU, else the quick estimate the spec was made with (a CPU's)."""
    device = profile.device
    sheet = "datasheet" if device["kind"] == "gpu" and not str(device["sources"].get("peaks", "")).startswith(
        "measured") else "quick estimate"
    rows = []
    for d, m in profile.matmul.items():
        unit = "OP" if d == "int8" else "FLOP"
        peak = device["peaks"].get(d)
        wide = "" if m["wide_flop_s"] is None else (
            f"; the wide search: {format_rate(m['wide_flop_s'], unit)} in {m['wide_trials']} GEMMs "
            f"(guided/wide {m['flop_s'] / m['wide_flop_s']:.2f})")
        searched = any((r["dtype"], r["M"], r["N"], r["K"], r["time_s"]) == (d, m["M"], m["N"], m["K"], m["time_s"])
                       for r in profile.search)  # else a validation GEMM ran faster than the search's best
        rows.append({"ceiling": f"matmul {d}", "measured": format_rate(m["flop_s"], unit),
                     "reference": "" if peak is None else f"{format_rate(peak, unit)} ({sheet})",
                     "share": None if peak is None else m["flop_s"] / peak,
                     "how": f"{m['M']}×{m['N']}×{m['K']}, best of {m['trials']} GEMMs"
                            f"{'' if searched else ' and the validation set'}{wide}"})
    bw = device["mem_bandwidth"]
    rows.append({"ceiling": "copy (DRAM)", "measured": format_rate(profile.copy["bandwidth"], "B"),
                 "reference": "" if bw is None else f"{format_rate(bw, 'B')} ({sheet})",
                 "share": None if bw is None else profile.copy["bandwidth"] / bw,
                 "how": f"copies of {_size(profile.copy['bytes'])}"})
    if profile.l2 is not None:
        l2 = profile.l2
        rows.append({"ceiling": "copy (in L2)", "measured": format_rate(l2["bandwidth"], "B"),
                     "reference": f"{l2['ratio']:.1f}× the DRAM copy", "share": None,
                     "how": f"copies of {_size(l2['bytes'])}" + ("" if l2["shows"] else ": no clear L2 effect")})
    lat = profile.latency
    model_default = f"{format_time(KERNEL_LATENCY_S)} (the model's default)"
    timed = _floor_timing(profile)
    graph = graph_name("rocm" if profile.environment.get("hip") else "cuda")  # a ROCm profile names its HIP
    graph = "" if lat["graph_s"] is None else f"; {format_time(lat['graph_s'])} inside a {graph} (warm)"
    rows.append({"ceiling": "kernel floor", "measured": format_time(lat["kernel_s"]), "reference": model_default,
                 "share": None, "how": f"a one-element add, plain launch{timed}{graph}"})
    rows.append({"ceiling": "GEMM floor", "measured": format_time(lat["gemm_s"]), "reference": model_default,
                 "share": None, "how": f"a 16×16×16 GEMM{timed}"})
    return rows


def _floor_timing(profile: DeviceProfile) -> str:
    """How a GPU profile's floors were timed: with the L2 flushed (as its validation set), or warm (the
    profiles before 2026-11-26 said "without flushing the L2" in ``latency.how``); nothing on a CPU."""
    if profile.device["kind"] != "gpu":
        return ""
    return ", warm L2" if "without flushing the L2" in profile.latency["how"] else ", L2 flushed"


def error_by_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """The validation error of GEMMs and of memory-bound ops apart: ``{"GEMMs": {"before": …, "after": …},
    "memory-bound": …}``, each :func:`perfkit.gemm_model.prediction_error` (kinds with no row left out)."""
    out = {}
    for label, keep in (("GEMMs", lambda r: r["kind"] == "gemm"), ("memory-bound", lambda r: r["kind"] != "gemm")):
        part = [r for r in rows if keep(r)]
        if part:
            out[label] = {when: prediction_error([r["measured_s"] for r in part], [r[f"{when}_s"] for r in part])
                          for when in ("before", "after")}
    return out


def report(profile: DeviceProfile, path: str | Path | None = None) -> str:
    """The calibration as text: the device, each ceiling, the model's error before and after."""
    env, device = profile.environment, profile.device
    name = device["name"] if not device.get("driver_name") or device["driver_name"] == device["name"] else (
        f"{device['driver_name']} ({device['name']})")
    lines = [f"Calibrated {name} on {env['date'][:10]}: {profile.mode} run, {profile.duration_s:.0f} s"]
    rows = ceilings_table(profile)
    w = [max(len(r[k]) for r in rows) for k in ("ceiling", "measured", "reference")]
    for r in rows:
        share = "" if r["share"] is None else f"{format_percent(r['share']):>5}  "
        lines.append(f"  {r['ceiling']:<{w[0]}}  {r['measured']:>{w[1]}}  {r['reference']:<{w[2]}}  "
                     f"{share}{r['how']}")
    v = profile.validation
    if v.get("rows"):
        b, a = v["before"], v["after"]
        lines.append(f"The models on {a['n']} ops of this device, |predicted/measured − 1| "
                     "before → after calibration:")
        lines.append(f"  all ops        median {format_percent(b['median_abs'])} → "
                     f"{format_percent(a['median_abs'])}, 90th percentile {format_percent(b['p90_abs'])} → "
                     f"{format_percent(a['p90_abs'])}")
        for label, part in error_by_kind(v["rows"]).items():
            lines.append(f"  {label:<13}  median {format_percent(part['before']['median_abs'])} → "
                         f"{format_percent(part['after']['median_abs'])}, 90th percentile "
                         f"{format_percent(part['before']['p90_abs'])} → {format_percent(part['after']['p90_abs'])} "
                         f"({part['after']['n']} ops)")
    lines.append(f"Saved to {path}" if path is not None else "Not saved (save=False)")
    return "\n".join(lines)
