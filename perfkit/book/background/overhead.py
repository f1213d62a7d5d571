"""The overhead regime: what issuing one tiny kernel costs, read off recordings and a published table.

:func:`dispatch_costs` gathers, per way of issuing a kernel, the time per call (seconds) that the
sources measured, each row with its :class:`~perfkit.provenance.Source`:

- the ``timer_validation`` recording: a 4 MiB ``torch.add`` called from Python one call after
  another (torch's Timer: wall clock over a block of calls, so the slower of the CPU and the GPU
  sets it) and the same add replayed from a CUDA graph (the GPU's own time per call);
- a calibration profile (``pk.calibrate``; the book's GPU: ``timing.book_gpu_profile()``): a
  one-element add replayed from a CUDA graph;
- gpu-benches' small-kernel table (``pk.published("gpu_benches_small_kernels")``): the floor of
  its smallest kernels launched one after another from C++, and in a CUDA graph.

Pure: frames and profiles in, a frame out; None where no source is given.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...calibration.profile import DeviceProfile
from ...provenance import Source, source_of
from ..timing.published import launch_floor_s

__all__ = ["ADD_CASE", "dispatch_costs", "python_op_s"]

#: The ``timer_validation`` case timed from Python: an elementwise add of 4 MiB (fp32).
ADD_CASE = "elementwise add"


def _profile(profile: Any) -> DeviceProfile | None:
    found = profile[0] if isinstance(profile, tuple) else profile
    if found is not None and not isinstance(found, DeviceProfile):
        raise TypeError(f"profile must be a DeviceProfile, book_gpu_profile()'s (profile, path) or None, "
                        f"got {type(found).__name__}")
    return found


def _frame(frame: Any, name: str) -> pd.DataFrame | None:
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a DataFrame or None, got {type(frame).__name__}")
    return frame if frame is not None and len(frame) else None


def _add_row(timers: pd.DataFrame) -> pd.Series | None:
    rows = timers[timers["case"].astype(str).str.startswith(ADD_CASE)]
    return rows.iloc[0] if len(rows) else None


def python_op_s(timers: pd.DataFrame | None) -> float | None:
    """Seconds per call of the ``timer_validation`` add issued from Python one call after another
    (torch's Timer), None without that recording or row."""
    timers = _frame(timers, "timers")
    row = None if timers is None else _add_row(timers)
    return None if row is None or pd.isna(row["torch_timer_s"]) else float(row["torch_timer_s"])


def _by(source: Source) -> str:
    """A short name for who measured a row: the publisher's first word, else "ours"."""
    return source.by.split()[0] if source.kind == "published" and source.by else "ours"


def dispatch_costs(timers: pd.DataFrame | None = None, profile: Any = None,
                   small: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """One row per way of issuing a tiny kernel: ``how`` (what was timed), ``issued`` (``"Python,
    eager"``, ``"CUDA graph"`` or ``"C++ loop"``), ``time_s`` (per call, seconds), ``source``
    (its :class:`~perfkit.provenance.Source`) and ``by`` (who measured it: ``"ours"`` or the
    publisher's first word), slowest first. ``timers``: a ``timer_validation``
    frame; ``profile``: a :class:`~perfkit.calibration.profile.DeviceProfile` (or
    ``book_gpu_profile()``'s pair); ``small``: ``pk.published("gpu_benches_small_kernels")``.
    Rows whose source is None or lacks the value are left out; None when none is left."""
    timers, small, found = _frame(timers, "timers"), _frame(small, "small"), _profile(profile)
    rows = []
    row = None if timers is None else _add_row(timers)
    if row is not None:
        src = source_of(timers)
        rows += [{"how": "torch.add of 4 MiB, from Python", "issued": "Python, eager",
                  "time_s": row["torch_timer_s"], "source": src},
                 {"how": "the same add, in a CUDA graph", "issued": "CUDA graph",
                  "time_s": row["perfkit_graph_time_s"], "source": src}]
    if found is not None and found.latency.get("graph_s"):
        name = found.device.get("driver_name") or found.device["name"]
        rows.append({"how": "a one-element add, in a CUDA graph", "issued": "CUDA graph",
                     "time_s": found.latency["graph_s"], "source": Source("recorded", name, found.date)})
    if small is not None:
        src = source_of(small)
        rows += [{"how": "a tiny kernel, launched from C++", "issued": "C++ loop",
                  "time_s": launch_floor_s(small, "launch"), "source": src},
                 {"how": "a tiny kernel, in a CUDA graph", "issued": "CUDA graph",
                  "time_s": launch_floor_s(small, "graph"), "source": src}]
    out = pd.DataFrame(rows, columns=["how", "issued", "time_s", "source"])
    out = out[out["time_s"].notna() & out["source"].notna()].copy()
    if not len(out):
        return None
    out["by"] = [_by(src) for src in out["source"]]
    return out.sort_values("time_s", ascending=False).reset_index(drop=True)
