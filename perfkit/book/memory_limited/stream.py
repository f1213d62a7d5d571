"""gpu-benches' STREAM-like kernels: bandwidth against occupancy on four generations of GPU.

``pk.published("gpu_benches_stream")`` (te42kyfo/gpu-benches, GPL-3.0: the numbers are cited, the
files are not copied) holds float64 kernels (``init``, ``read``, ``scale``, ``triad``, stencils) on
1 GiB arrays, timed on the host around the launch loop (median of 3), at each block size from 32
to 1024 threads with a shared-memory spoiler that allows two blocks per SM: the x-axis is
occupancy, not size. Pure functions of that frame; fractions are of the **datasheet** bandwidth.
:mod:`perfkit.book.memory_limited.published` re-exports them. Units: GB/s (1e9 bytes/s), percent.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..._validate import positive_number
from ...devices import DeviceSpec, device_spec

__all__ = ["GENERATIONS", "occupancy_for_fraction", "stream_occupancy", "stream_peak_fraction", "stream_table"]

#: Four generations of datacentre GPU, oldest first, in gpu-benches' stream table.
GENERATIONS: tuple[str, ...] = ("V100-SXM2", "A100-SXM4-80GB", "H100-PCIe", "H200")


def stream_occupancy(frame: pd.DataFrame | None, *, kernel: str = "triad", gpus: Sequence[str] = GENERATIONS,
                     model: bool = False) -> pd.DataFrame | None:
    """gpu-benches' bandwidth against occupancy for ``gpus`` (perfkit names), one row per GPU and
    block size: ``gbps`` of ``kernel``, ``gbps_low``/``gbps_high`` (slowest and fastest of all its
    kernels there), ``datasheet_gbps`` and ``fraction`` (of the datasheet). ``frame``:
    ``pk.published("gpu_benches_stream")``; None gives, with ``model=True``, the model's achievable
    bandwidth per GPU (flat: the byte model knows no occupancy), else None."""
    specs = [device_spec(g) for g in gpus]
    if frame is None:
        if not model:
            return None
        rows = [{"device": s.name, "gpu": s.name, "occupancy_pct": occ, "gbps": np.nan, "gbps_low": np.nan,
                 "gbps_high": np.nan, "datasheet_gbps": s.mem_bandwidth / 1e9, "fraction": np.nan,
                 "predicted_gbps": s.ceilings.bandwidth / 1e9}
                for s in specs for occ in (0.0, 100.0)]
        out = pd.DataFrame(rows)
        out.attrs["model_of"] = ", ".join(s.name for s in specs)
        return out
    have = set(frame["kernel"])
    if kernel not in have:
        raise LookupError(f"kernel {kernel!r} is not in the stream table; its kernels: {', '.join(sorted(have))}")
    parts = []
    for s in specs:
        g = frame[frame["device"] == s.name]
        if not len(g):
            continue
        span = g.groupby("block_size")["gbps"].agg(["min", "max"])
        k = g[g["kernel"] == kernel].set_index("block_size").sort_index()
        parts.append(pd.DataFrame({
            "device": s.name, "gpu": k["gpu"].astype(str).str.split(" \\(").str[0], "block_size": k.index,
            "occupancy_pct": k["occupancy_pct"], "gbps": k["gbps"], "gbps_low": span["min"].reindex(k.index),
            "gbps_high": span["max"].reindex(k.index), "datasheet_gbps": s.mem_bandwidth / 1e9,
            "fraction": k["gbps"] * 1e9 / s.mem_bandwidth,
            "predicted_gbps": s.ceilings.bandwidth / 1e9}).reset_index(drop=True))
    out = pd.concat(parts, ignore_index=True) if parts else None
    if out is not None:
        out.attrs["meta"] = dict(frame.attrs.get("meta") or {}, device_name=", ".join(dict.fromkeys(out["gpu"])))
        out.attrs["kernel"] = kernel
    return out


def stream_peak_fraction(frame: pd.DataFrame | None, gpu: Any, *, kernel: str = "triad") -> float | None:
    """The best gpu-benches ``kernel`` bandwidth on ``gpu`` as a fraction of its datasheet bandwidth."""
    part = stream_occupancy(frame, kernel=kernel, gpus=[gpu.name if isinstance(gpu, DeviceSpec) else gpu])
    return None if part is None or not len(part) else float(part["fraction"].max())


def occupancy_for_fraction(frame: pd.DataFrame | None, gpu: Any, of_peak: float = 0.9, *,
                           kernel: str = "triad") -> float | None:
    """The lowest occupancy (% of the threads an SM holds) at which ``kernel`` reaches ``of_peak`` of
    its own best bandwidth on ``gpu`` (gpu-benches): how much parallelism the memory system needs."""
    if not 0 < positive_number("of_peak", of_peak) <= 1:
        raise ValueError(f"of_peak must be a fraction in (0, 1], got {of_peak!r}")
    part = stream_occupancy(frame, kernel=kernel, gpus=[gpu.name if isinstance(gpu, DeviceSpec) else gpu])
    if part is None or not len(part):
        return None
    enough = part[part["gbps"] >= of_peak * part["gbps"].max()]
    return float(enough["occupancy_pct"].min()) if math.isfinite(part["gbps"].max()) else None


def stream_table(occupancy: pd.DataFrame | None, of_peak: float = 0.9) -> pd.DataFrame | None:
    """One row per GPU of :func:`stream_occupancy`'s frame, for the page: its datasheet and best
    GB/s, the best as a fraction of the datasheet, the occupancy (%) from which it reaches
    ``of_peak`` of its best, and the model's achievable GB/s. None in, None out."""
    if occupancy is None:
        return None
    rows = []
    for dev, g in occupancy.groupby("device", sort=False):
        best = g["gbps"].max()
        enough = g.loc[g["gbps"] >= of_peak * best, "occupancy_pct"]
        rows.append({"GPU": dev, "datasheet (GB/s)": g["datasheet_gbps"].iloc[0], "best (GB/s)": best,
                     "best, % of datasheet": 100 * best / g["datasheet_gbps"].iloc[0],
                     f"occupancy for {of_peak:.0%} of best (%)": enough.min() if len(enough) else np.nan,
                     "model (GB/s)": g["predicted_gbps"].iloc[0]})
    return pd.DataFrame(rows)
