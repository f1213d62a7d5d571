"""The appendix's section "Calibrate your own GPU": a device profile as tables, where its numbers
come from, and the profile of the book's GPU committed in ``data/``."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ...calibration.profile import DeviceProfile
from ...calibration.recorded import data_profile
from ...calibration.report import ceilings_table, error_by_kind
from ...devices import device_spec
from ...display import Note, Table, table
from ...provenance import Source, missing

__all__ = ["book_gpu_profile", "ceilings_frame", "error_frame", "profile_source", "profile_table"]


def _profile(profile: DeviceProfile) -> DeviceProfile:
    if not isinstance(profile, DeviceProfile):
        raise TypeError(f"profile must be a DeviceProfile (pk.calibrate().profile), got {type(profile).__name__}")
    return profile


def profile_source(profile: DeviceProfile, *, live: bool) -> Source:
    """Where a profile's numbers come from: measured now on this machine (``live``), or recorded on
    its device on the day of its calibration."""
    device = _profile(profile).device
    name = device.get("driver_name") or device["name"]
    label = name if name == device["name"] else f"{device['name']} ({name})"
    if live:
        return Source("live", label, profile.date, quick=profile.mode == "quick")
    return Source("recorded", name, profile.date)


def ceilings_frame(profile: DeviceProfile) -> pd.DataFrame:
    """One row per measured ceiling: ``ceiling``, ``measured``, ``reference`` (the datasheet, or a
    CPU's quick estimate), ``share`` of it, and how it was measured."""
    frame = pd.DataFrame(ceilings_table(_profile(profile)))
    return frame.rename(columns={"how": "how it was measured"})


def error_frame(profile: DeviceProfile | tuple[DeviceProfile, Path] | None) -> pd.DataFrame | None:
    """The models' error on the validation set, before and after calibration: median and 90th
    percentile of |predicted/measured − 1| for all ops, the GEMMs and the memory-bound ops.
    ``profile`` may be :func:`book_gpu_profile`'s ``(profile, path)``; None gives None."""
    if profile is None:
        return None
    v = _profile(profile[0] if isinstance(profile, tuple) else profile).validation
    parts = {"all ops": {"before": v["before"], "after": v["after"]}, **error_by_kind(v["rows"])}
    return pd.DataFrame([{"ops": label, "count": e["after"]["n"],
                          "median before": e["before"]["median_abs"], "median after": e["after"]["median_abs"],
                          "p90 before": e["before"]["p90_abs"], "p90 after": e["after"]["p90_abs"]}
                         for label, e in parts.items()])


def book_gpu_profile(name: str | None = None, root: str | os.PathLike | None = None
                     ) -> tuple[DeviceProfile, Path] | None:
    """The calibration profile of the GPU ``name`` committed with its recordings in ``data/`` (or
    ``root``), and its path; ``name`` None: the first GPU profile there (by folder name). ``None``
    until a GPU run has recorded one."""
    return data_profile(None if name is None else device_spec(name), root)


def profile_table(found: DeviceProfile | tuple[DeviceProfile, Path] | None, *, live: bool = False,
                  how: bool = True, absent: str = "no profile", instead: str = "") -> Table | Note:
    """The ceilings of a profile (or of :func:`book_gpu_profile`'s ``(profile, path)``) as a table captioned
    with where they come from (``how=False`` leaves out how each was measured); where there is none, a
    note saying ``absent`` and what is used ``instead``."""
    if found is None:
        return table(None, missing(absent), instead=instead)
    profile = found[0] if isinstance(found, tuple) else found
    frame = ceilings_frame(profile)
    if not how:
        frame = frame.drop(columns="how it was measured")
    return table(frame, caption=str(profile_source(profile, live=live)), formats={"share": "{:.0%}"})
