"""gpu-benches' small kernels on an H200, for the timing appendix: the launch floor, the L2 and HBM plateaus.

``pk.published("gpu_benches_small_kernels")`` holds a float64 ``scale`` kernel (read one array,
write another: ``bytes_moved`` = 16 bytes per element) from 64 kB to 2 GB, timed on the host around
a loop of launches (median of 3), in four variants (:data:`VARIANTS`): one plain launch per call,
the calls captured in a CUDA graph, and one persistent kernel that loops over the calls with a grid
barrier (atomics, or cooperative groups' grid sync). ``time_s`` is derived from the printed, rounded
GB/s. Pure functions of that frame: :func:`small_kernel_sweep` keeps the fastest block size per
size, :func:`launch_floor_s`, :func:`launch_bound_bytes`, :func:`l2_plateau_gbps` and
:func:`hbm_plateau_gbps` read the numbers the appendix quotes, :func:`small_kernel_summary` puts them
in one table. :func:`predicted_small_kernels` is the byte model's curve (``pk.memory_time``) for when
the table is absent. Units: seconds, bytes, GB/s (1e9 bytes/s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._validate import one_of, positive_number
from ...devices import DeviceSpec, device_spec
from ...memory_model import memory_time
from ..reader import readable

__all__ = ["FLOOR_SPAN", "HBM_FACTOR", "VARIANTS", "hbm_plateau_gbps", "l2_plateau_gbps",
           "launch_bound_bytes", "launch_floor_s", "predicted_small_kernels",
           "small_kernel_summary", "small_kernel_sweep", "summary_table"]

#: The variants, and what each times per call.
VARIANTS: dict[str, str] = {
    "launch": "one kernel launch per call",
    "graph": "the calls captured in a CUDA graph",
    "persistent_atomic": "one persistent kernel, a grid barrier (atomics) per call",
    "persistent_gsync": "one persistent kernel, a grid sync (cooperative groups) per call",
}
#: Sizes at least this many times the L2 are "HBM" (the array pair cannot stay in the L2).
HBM_FACTOR = 4
#: The floor is the median time of the sizes up to this many times the smallest (64 to 128 kB),
#: where moving the bytes takes a few nanoseconds: the median damps the rounding of the printed GB/s.
FLOOR_SPAN = 2


def _check(frame: Any) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be pk.published('gpu_benches_small_kernels'), got {type(frame).__name__}")
    missing = {"device", "variant", "bytes_moved", "block_size", "gbps", "time_s"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the columns {sorted(missing)} of pk.published('gpu_benches_small_kernels')")
    return frame


def small_kernel_sweep(frame: pd.DataFrame | None, *, model: DeviceSpec | None = None) -> pd.DataFrame | None:
    """Per variant and size, the fastest block size: ``variant``, ``bytes`` (moved per call),
    ``time_s`` (per call), ``gbps``, ``block_size``, and the variant's ``floor_s`` (the median time
    of its sizes up to :data:`FLOOR_SPAN` × the smallest). Keeps the metadata. None gives
    :func:`predicted_small_kernels` on ``model``, or None without it."""
    if frame is None:
        return None if model is None else predicted_small_kernels(model)
    frame = _check(frame)
    best = frame.loc[frame.groupby(["variant", "bytes_moved"])["time_s"].idxmin()]
    out = pd.DataFrame({"device": best["device"], "variant": best["variant"], "bytes": best["bytes_moved"],
                        "time_s": best["time_s"], "gbps": best["gbps"], "block_size": best["block_size"]})
    out = out.sort_values(["variant", "bytes"]).reset_index(drop=True)
    smallest = out.groupby("variant")["bytes"].transform("min")
    flat = out[out["bytes"] <= FLOOR_SPAN * smallest]
    out["floor_s"] = out["variant"].map(flat.groupby("variant")["time_s"].median())
    out.attrs.update(frame.attrs)
    return out


def _variant(sweep: pd.DataFrame, variant: str) -> pd.DataFrame:
    variant = one_of("variant", variant, tuple(VARIANTS))
    part = sweep[sweep["variant"] == variant]
    if not len(part):
        raise LookupError(f"the frame has no {variant!r} rows; its variants: {', '.join(sorted(set(sweep['variant'])))}")
    return part


def _sweep(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    if frame is None:
        return None
    return frame if {"bytes", "variant"} <= set(frame.columns) else small_kernel_sweep(frame)


def launch_floor_s(frame: pd.DataFrame | None, variant: str = "launch") -> float | None:
    """The time per call of ``variant``'s smallest kernels (seconds; ``floor_s`` of
    :func:`small_kernel_sweep`), where moving the bytes takes nanoseconds and what is left is the
    cost of starting a kernel (plain launch), a graph node (graph) or a grid barrier (persistent).
    ``frame``: the published table or its :func:`small_kernel_sweep`; None without data."""
    sweep = _sweep(frame)
    return None if sweep is None else float(_variant(sweep, variant)["floor_s"].iloc[0])


def launch_bound_bytes(frame: pd.DataFrame | None, variant: str = "launch", factor: float = 2.0) -> float | None:
    """The most bytes a call of ``variant`` moves while it still takes less than ``factor`` × the
    floor: below it, a timing measures mostly the floor, not the kernel. None without data."""
    sweep = _sweep(frame)
    if sweep is None:
        return None
    part = _variant(sweep, variant)
    below = part[part["time_s"] < positive_number("factor", factor) * part["floor_s"].iloc[0]]
    return float(below["bytes"].max())


def _l2_bytes(sweep: pd.DataFrame, l2_bytes: float | None) -> float:
    if l2_bytes is not None:
        return positive_number("l2_bytes", l2_bytes)
    spec = device_spec(str(sweep["device"].iloc[0]))
    if not spec.l2_bytes:
        raise LookupError(f"the L2 size of {spec.name} is unknown: pass l2_bytes")
    return float(spec.l2_bytes)


def l2_plateau_gbps(frame: pd.DataFrame | None, variant: str = "graph", *, l2_bytes: float | None = None) -> float | None:
    """The best GB/s of ``variant`` on sizes that fit in the L2 (``l2_bytes``; default: the GPU's
    datasheet L2): the bandwidth of data the L2 holds. None without data."""
    sweep = _sweep(frame)
    if sweep is None:
        return None
    part = _variant(sweep, variant)
    fits = part[part["bytes"] <= _l2_bytes(part, l2_bytes)]
    return float(fits["gbps"].max()) if len(fits) else None


def hbm_plateau_gbps(frame: pd.DataFrame | None, variant: str = "graph", *, l2_bytes: float | None = None) -> float | None:
    """The median GB/s of ``variant`` on sizes of at least :data:`HBM_FACTOR` × the L2: the
    bandwidth of HBM. None without data (or no such size)."""
    sweep = _sweep(frame)
    if sweep is None:
        return None
    part = _variant(sweep, variant)
    big = part[part["bytes"] >= HBM_FACTOR * _l2_bytes(part, l2_bytes)]
    return float(big["gbps"].median()) if len(big) else None


def small_kernel_summary(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """One row per variant: ``floor_s``, ``launch_bound_bytes`` (time < 2 × floor), ``l2_gbps``,
    ``hbm_gbps`` and ``hbm_fraction`` (of the datasheet bandwidth). None without data."""
    sweep = _sweep(frame)
    if sweep is None:
        return None
    spec = device_spec(str(sweep["device"].iloc[0]))
    rows = []
    for v in (v for v in VARIANTS if v in set(sweep["variant"])):
        hbm = hbm_plateau_gbps(sweep, v)
        rows.append({"variant": v, "what": VARIANTS[v], "floor_s": launch_floor_s(sweep, v),
                     "launch_bound_bytes": launch_bound_bytes(sweep, v), "l2_gbps": l2_plateau_gbps(sweep, v),
                     "hbm_gbps": hbm, "hbm_fraction": np.nan if hbm is None else hbm * 1e9 / spec.mem_bandwidth})
    out = pd.DataFrame(rows)
    out.attrs.update(sweep.attrs)
    return out


def predicted_small_kernels(spec: DeviceSpec) -> pd.DataFrame:
    """The byte model's time per call (``pk.memory_time``: a fixed latency + bytes ÷ achievable
    bandwidth) for gpu-benches' sizes, 64 kB to 2 GB, on ``spec``: ``variant`` "model",
    ``time_s`` NaN, ``predicted_s``, ``predicted_gbps``; ``attrs["model_of"]`` names the GPU."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (pk.device_spec('H200')), got {spec!r}")
    nbytes = np.geomspace(64e3, 2e9, 41)
    predicted = np.array([memory_time(b, spec) for b in nbytes])
    out = pd.DataFrame({"device": spec.name, "variant": "model", "bytes": nbytes, "time_s": np.nan,
                        "gbps": np.nan, "predicted_s": predicted, "predicted_gbps": nbytes / predicted / 1e9})
    out.attrs["model_of"] = spec.name
    return out


def summary_table(summary: pd.DataFrame | None, *, seconds: str = "s") -> pd.DataFrame | None:
    """:func:`small_kernel_summary` for ``pk.table``: floors in ``seconds`` ("s", "ms", "µs"), sizes
    in MB, GB/s, % of the datasheet. None in, None out."""
    names = {"what": "each call", "floor_s": "floor", "launch_bound_bytes": ("< 2 × floor up to (MB)", 1e-6),
             "l2_gbps": "L2 plateau (GB/s)", "hbm_gbps": "HBM plateau (GB/s)",
             "hbm_fraction": ("HBM, % of datasheet", 100.0)}
    return readable(summary, list(names), names=names, seconds=seconds)
