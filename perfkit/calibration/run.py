"""Calibrate the device in use: measure its achievable ceilings and check the model against it.

:func:`calibrate` (``python -m perfkit calibrate``) runs, in about a minute (``quick``: about 15 s):

1. **matmul**, per dtype: the model-guided search of :mod:`.search` (shapes that fill whole tiles
   and whole waves, and the largest square power-of-two one, refined around the best); ``thorough``
   also runs the wide grid, to compare;
2. **the fixed cost of a kernel**: a one-element add and a 16×16×16 GEMM, timed as the validation
   set is (on a GPU the L2 flushed before each sample: a small kernel pays a cold memory access);
   the add with a warm L2 and inside a CUDA graph too (a HIP graph on ROCm);
3. **copy**: device-to-device copies of growing size; the best copy from DRAM is the bandwidth
   ceiling, and copies that fit the L2 show its effect where there is one;
4. **validation**: a fixed set of GEMMs and memory-bound ops, timed. A validation GEMM faster than
   its dtype's search is that dtype's ceiling: the ceiling is the best GEMM the run measured. Then
   the models predict each op before calibration (the spec's documented defaults) and after (the
   final measured ceilings).

The result is a :class:`~.profile.DeviceProfile`, saved (atomically, only once every step has
finished: an interrupted calibration writes nothing) to the user's cache, where
:func:`perfkit.current_device` finds it, or to ``out``. Units: seconds, bytes, FLOP/s, bytes/s.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from .._validate import boolean, dtype_names
from ..device_runtime import graph_name
from ..devices import DeviceSpec
from ..environment import cpu_model, environment
from ..gemm_model import predict_gemm_time, prediction_error
from ..matmul import rocm_refusal, supports_dtype
from ..memory_model import memory_time
from ..placement import measured_on, resolve_device
from ..roofline import gemm_bytes, gemm_flops
from ..units import MiB, format_rate, format_time
from . import probes
from .profile import DeviceProfile, identity_of, profile_path, save_profile, spec_dict
from .report import report
from .search import SearchResult, guided_search, wide_search

__all__ = ["CPU_DTYPES", "GPU_DTYPES", "Calibration", "calibrate", "rocm_exclusions"]

#: Dtypes calibrated by default, where the device runs them.
GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16", "float8", "int8")
CPU_DTYPES = ("float32", "float64", "bfloat16", "float16")


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` measured: the ``profile`` (saved at ``path``, ``None`` when not
    saved), each dtype's guided search and, with ``thorough``, the wide one. ``spec`` is the device
    with the measured ceilings attached; ``before`` the spec the calibration started from."""

    profile: DeviceProfile
    path: Path | None
    before: DeviceSpec
    searches: Mapping[str, SearchResult] = field(default_factory=dict)
    wide: Mapping[str, SearchResult] = field(default_factory=dict)

    @property
    def spec(self) -> DeviceSpec:
        """The calibrated device: the spec with the measured ceilings (``spec.ceilings``)."""
        return self.profile.spec(None if self.path is None else str(self.path))

    def validation(self) -> pd.DataFrame:
        """The validation set: one row per op, measured and predicted before and after (seconds)."""
        return pd.DataFrame(self.profile.validation["rows"])

    def trials(self) -> pd.DataFrame:
        """Every timing of the matmul searches (dtype, method, stage, M, N, K, time_s, flop_s, predicted_s)."""
        return pd.DataFrame(self.profile.search)

    def __str__(self) -> str:
        return report(self.profile, self.path)

    def _repr_markdown_(self) -> str:
        return "```text\n" + str(self) + "\n```"


def _environment() -> dict[str, Any]:
    env = environment()
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "perfkit": env["perfkit"],
            "torch": env["torch"], "cuda": env["cuda"], "driver": env["driver"],
            "python": platform.python_version(), "platform": platform.platform(), "hip": env["hip"]}


def rocm_exclusions(device: str) -> dict[str, str]:
    """Dtypes perfkit cannot time on the ROCm GPU in use, and why (:func:`perfkit.matmul.rocm_refusal`;
    empty elsewhere)."""
    return {d: why for d in GPU_DTYPES if (why := rocm_refusal(d, device))}


def _dtypes(dtypes: Any, device: str, spec: DeviceSpec) -> list[str]:
    skip = rocm_exclusions(device)
    runnable = [d for d in (GPU_DTYPES if device == "cuda" else CPU_DTYPES)
                if d in spec.peaks and d not in skip and supports_dtype(d, device)]
    if dtypes is None:
        return runnable
    wanted = dtype_names("dtypes", dtypes)
    bad = [d for d in wanted if d not in runnable]
    if bad:
        why = "".join(f" ({d}: {skip[d]})" for d in bad if d in skip)
        raise ValueError(f"dtypes: {', '.join(map(repr, bad))} cannot be calibrated on {spec.label}{why}; "
                         f"this device runs {', '.join(map(repr, runnable)) or 'none'}")
    return wanted


def _main_dtype(dtypes: list[str], device: str) -> str:
    """The dtype of the validation set and of the GEMM floor: bfloat16 on a GPU, float32 on a CPU."""
    preferred = "bfloat16" if device == "cuda" else "float32"
    return preferred if preferred in dtypes else dtypes[0]


def _matmul_entry(guided: SearchResult, wide: SearchResult | None) -> dict[str, Any]:
    best = guided.best
    how = (f"best median of {len(guided.trials)} GEMMs chosen by perfkit's model (whole tiles and waves, and the "
           f"largest square power-of-two shape; refined around the best; {guided.stopped})")
    return {"flop_s": best.flop_s, "M": best.M, "N": best.N, "K": best.K, "time_s": best.time_s,
            "trials": len(guided.trials), "how": how,
            "wide_flop_s": None if wide is None else wide.best.flop_s,
            "wide_trials": None if wide is None else len(wide.trials)}


def _copy_entries(rows: list[dict[str, float]], spec: DeviceSpec, kernel_s: float) -> tuple[dict, dict | None]:
    """The DRAM copy ceiling (copies whose source and destination are ≥ 4× the L2, or ≥ 64 MiB),
    and the L2's effect: copies whose source and destination fit in the L2 and take at least twice
    the fixed cost of a kernel (``kernel_s``), their bandwidth net of that cost (on a GPU a copy
    that fits the L2 takes a few microseconds, as long as the launch itself)."""
    if not rows:
        raise ValueError("no copy fitted in free memory: free some memory and calibrate again")
    l2 = spec.l2_bytes
    dram = [r for r in rows if 2 * r["bytes"] >= max(4 * (l2 or 0), 64 * MiB)] or rows[-1:]
    best = max(dram, key=lambda r: r["bandwidth"])
    copy = {"bandwidth": best["bandwidth"], "bytes": int(best["bytes"]),
            "how": f"best of {len(dram)} device-to-device copies of {dram[0]['bytes'] / MiB:g}–"
                   f"{dram[-1]['bytes'] / MiB:g} MiB (Tensor.copy_, bytes read + written, the same buffers "
                   "copied again and again)", "rows": rows}
    cached = [r for r in rows if l2 and 2 * r["bytes"] <= l2 and r["time_s"] >= 2 * kernel_s]
    if not cached:
        return copy, None
    net = {r["bytes"]: 2 * r["bytes"] / (r["time_s"] - kernel_s) for r in cached}
    top = max(net, key=net.get)
    ratio = net[top] / best["bandwidth"]
    return copy, {"bandwidth": net[top], "bytes": int(top), "dram_bandwidth": best["bandwidth"],
                  "ratio": ratio, "shows": bool(ratio >= 1.2),
                  "how": f"best of {len(cached)} copies whose source and destination fit in the {l2 / MiB:g} MiB L2, "
                         "net of the fixed cost of a kernel, against the DRAM copy"}


def _latency(floors: Mapping[str, float | None], dtype: str, device: str) -> dict[str, Any]:
    """The profile's fixed costs (:func:`.probes.launch_floors`): those the models use, timed as the
    validation set is, and on a GPU the warm add and the CUDA (on ROCm: HIP) graph's in ``how``."""
    how = (f"median of a one-element add (a plain launch) and of a 16×16×16 {dtype} GEMM, timed by perfkit.bench "
           "as the validation set is: ")
    if device == "cuda":
        how += ("the L2 flushed before each sample, so a small kernel pays a cold memory access, as the kernels the "
                f"models predict do; with a warm L2 the add took {format_time(floors['warm_kernel_s'])}, and "
                f"{format_time(floors['graph_s'])} per call inside a {graph_name()}")
    else:
        how += "blocks of calls on the CPU (no cache flush)"
    return {"gemm_s": floors["gemm_s"], "kernel_s": floors["kernel_s"], "graph_s": floors["graph_s"], "how": how}


def _measure_validation(dtype: str, device: str, quick: bool, max_bytes: int) -> list[dict[str, Any]]:
    """The validation set's rows, timed (``measured_s``), not yet predicted."""
    rows = []
    for M, N, K in probes.validation_gemms(device, quick):
        nbytes, flops = round(gemm_bytes(M, N, K, dtype)), gemm_flops(M, N, K)  # a float since float4/6 scales
        if nbytes <= max_bytes:
            rows.append({"kind": "gemm", "shape": f"{M}×{N}×{K}", "dtype": dtype, "bytes": nbytes, "flops": flops,
                         "measured_s": probes.gemm_timer(dtype, device, quick=quick)(M, N, K)})
    for case in probes.memory_cases(device, quick):
        nbytes = probes.memory_case_bytes(case, dtype)
        if nbytes <= max_bytes:
            rows.append({"kind": case.kind, "shape": "×".join(map(str, case.shape)), "dtype": dtype,
                         "bytes": nbytes, "flops": 0,
                         "measured_s": probes.time_memory_case(case, dtype, device, quick=quick)})
    return rows


def _gemm_shape(row: Mapping[str, Any]) -> tuple[int, int, int]:
    M, N, K = map(int, row["shape"].split("×"))
    return M, N, K


def _best_measured(entry: dict[str, Any], rows: list[dict[str, Any]], dtype: str) -> dict[str, Any]:
    """``entry`` (the search's best), or the fastest validation GEMM of ``dtype`` where it ran faster
    (timed the same way): the ceiling is the best GEMM this run measured. ``trials`` stays the search's."""
    gemms = [r for r in rows if r["kind"] == "gemm" and r["dtype"] == dtype]
    best = max(gemms, key=lambda r: r["flops"] / r["measured_s"], default=None)
    if best is None or best["flops"] / best["measured_s"] <= entry["flop_s"]:
        return entry
    unit = "OP" if dtype == "int8" else "FLOP"
    how = (f"the validation GEMM {best['shape']}, the fastest of the {entry['trials'] + len(gemms)} {dtype} GEMMs "
           f"this run timed; the {entry['how']} was {format_rate(entry['flop_s'], unit)} at "
           f"{entry['M']}×{entry['N']}×{entry['K']}")
    M, N, K = _gemm_shape(best)
    return {**entry, "flop_s": best["flops"] / best["measured_s"], "M": M, "N": N, "K": K,
            "time_s": best["measured_s"], "how": how}


def _predicted(rows: list[dict[str, Any]], before: DeviceSpec, after: DeviceSpec) -> dict[str, Any]:
    """The validation set: ``rows`` predicted by the models on ``before`` and ``after``, and their errors."""
    def predict(row, spec):
        if row["kind"] == "gemm":
            return predict_gemm_time(*_gemm_shape(row), row["dtype"], spec)
        return memory_time(row["bytes"], spec)

    rows = [{**r, "before_s": predict(r, before), "after_s": predict(r, after)} for r in rows]
    summary = {}
    for when in ("before", "after"):
        err = prediction_error([r["measured_s"] for r in rows], [r[f"{when}_s"] for r in rows])
        summary[when] = {"median_abs": err["median_abs"], "p90_abs": err["p90_abs"], "n": err["n"]}
    return {"rows": rows, **summary}


def calibrate(*, quick: bool = False, thorough: bool = False, dtypes: Any = None, out: str | os.PathLike | None = None,
              save: bool = True, progress: bool = True) -> Calibration:
    """Measure the device in use (the GPU, else this CPU) and return a :class:`Calibration`.

    - ``quick``: a smaller search and validation set (about 15 s); ``thorough``: also the wide grid
      search per dtype, to see how close the guided search gets (its own figure in the profile).
    - ``dtypes``: the dtypes to calibrate (default: every one this device runs of
      :data:`GPU_DTYPES` or :data:`CPU_DTYPES`).
    - ``save``: write the profile to ``out`` (a ``.json`` path), else to the user's cache
      (:func:`~.profile.profile_path`), where :func:`perfkit.current_device` finds it. Nothing
      is written until every step has finished.
    """
    quick, thorough = boolean("quick", quick), boolean("thorough", thorough)
    save, progress = boolean("save", save), boolean("progress", progress)
    if quick and thorough:
        raise ValueError("quick and thorough exclude each other: pick one (or neither, the default)")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a path to a .json file or None, got {out!r}")
    if out is not None and Path(out).suffix != ".json":
        raise ValueError(f"out must name a .json file, got {str(out)!r}")
    device = resolve_device("auto")
    base = measured_on()
    dtypes = _dtypes(dtypes, device, base)
    if not dtypes:
        raise ValueError(f"{base.label} runs none of perfkit's matmul dtypes through torch")
    from tqdm.auto import tqdm

    start = time.perf_counter()
    max_bytes = probes.free_bytes(device)
    steps = tqdm(total=len(dtypes) * (2 if thorough else 1) + 3, desc="calibrate", disable=not progress, leave=False)
    searches, wide = {}, {}
    for d in dtypes:
        steps.set_postfix_str(f"matmul {d}")
        timer = probes.gemm_timer(d, device, quick=quick)
        searches[d] = guided_search(timer, base, d, quick=quick, max_bytes=max_bytes)
        steps.update()
        if thorough:
            wide[d] = wide_search(timer, base, d, max_bytes=max_bytes)  # thorough: the default window
            steps.update()
    main = _main_dtype(dtypes, device)
    steps.set_postfix_str("kernel floor")
    floors = probes.launch_floors(device, main, quick=quick)
    steps.update()
    steps.set_postfix_str("copy")  # warm copies: net of the warm fixed cost
    copies = probes.copy_sweep(device, quick=quick, max_bytes=max_bytes)
    copy, l2 = _copy_entries(copies, base, floors["warm_kernel_s"])
    steps.update()
    steps.set_postfix_str("validation")
    measured = _measure_validation(main, device, quick, max_bytes)
    steps.update()
    steps.close()
    matmul = {d: _best_measured(_matmul_entry(searches[d], wide.get(d)), measured, d) for d in dtypes}
    search = [row for d in dtypes for r in (searches[d], *([wide[d]] if d in wide else ()))
              for row in r.frame().to_dict("records")]
    draft = DeviceProfile(device=spec_dict(base), identity=identity_of(base, cpu_model() if device == "cpu" else None),
                          environment=_environment(), mode="thorough" if thorough else "quick" if quick else "default",
                          duration_s=0.0, matmul=matmul, copy=copy, l2=l2, latency=_latency(floors, main, device),
                          validation={"rows": [], "before": {}, "after": {}}, search=search)
    # predicted with the final ceilings: the profile's own spec
    profile = replace(draft, validation=_predicted(measured, base, draft.spec()),
                      duration_s=time.perf_counter() - start)
    path = None
    if save:
        path = save_profile(profile, out if out is not None else profile_path(base.name))
    return Calibration(profile=profile, path=path, before=base, searches=searches, wide=wide)
