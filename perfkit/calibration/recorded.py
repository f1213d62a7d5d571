"""Measured ceilings attached to a :class:`DeviceSpec`: from a device profile, or the recordings in ``data/``.

The models never read a file: they use the ceilings a spec carries (``spec.ceilings``, see
:mod:`perfkit.ceilings`), the documented defaults unless measured ones were attached. This module
is where they are attached. :func:`calibrated` returns the spec with, in order of preference:

1. the profile a calibration saved for its device in the user's cache (``python -m perfkit
   calibrate``, :func:`~.profile.profile_path`): the reader's own measurement;
2. a profile committed with the recordings in ``data/<device>/device_profile.json`` (the book's GPU);
3. the ceilings recorded in ``data/`` (``ceiling_matmul`` and ``ceiling_copy``, and
   ``gemm_alignment`` for unaligned dimensions).

A calibration never times misaligned GEMMs, so a profile of a GPU (1 or 2) also gets the slowdown
of unaligned dimensions from that GPU's ``gemm_alignment`` recording in ``data/``, when there is one.

:func:`current_device` is the device in use, calibrated; its ``sources["ceilings"]`` says which
profile it used. Nothing in perfkit's core imports this module.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path

from ..ceilings import Ceilings, _check_spec, alignment_slowdown, measured_ceilings
from ..data import data_root, load
from ..devices import DeviceSpec, cpu_name, cuda_available, device_spec
from ..devices import current_device as _device_in_use
from ..environment import cpu_model
from ..provenance import caption, source_of
from .profile import DeviceProfile, load_profile, profile_path

#: The name of a device profile committed with a device's recordings in ``data/<device-slug>/``.
PROFILE_FILE = "device_profile.json"

__all__ = ["PROFILE_FILE", "calibrated", "current_device", "data_profile", "recorded_ceilings", "recorded_ceilings_of"]


def _recording(name: str, spec: DeviceSpec, root):
    try:
        return load(name, device=spec, root=root)
    except (LookupError, FileNotFoundError):
        return None


def recorded_ceilings_of(spec: DeviceSpec, root: str | os.PathLike | None = None) -> Ceilings | None:
    """Ceilings measured on ``spec``'s GPU and recorded in ``data/`` (or ``root``; only the dtypes
    measured), or ``None`` unless both ``ceiling_matmul`` and ``ceiling_copy`` are recorded for it."""
    spec = _check_spec(spec)
    frames = {name: _recording(name, spec, root) for name in ("ceiling_matmul", "ceiling_copy")}
    if any(f is None for f in frames.values()):
        return None
    best = measured_ceilings(frames["ceiling_matmul"], frames["ceiling_copy"])
    if not best["bandwidth"] or not best["flop_s"]:
        return None
    slowdown = alignment_slowdown(_recording("gemm_alignment", spec, root))
    label = caption([source_of(f) for f in frames.values()])
    return Ceilings(best["flop_s"], best["bandwidth"], f"measured ({label})", slowdown)


def _with_alignment(spec: DeviceSpec, root) -> DeviceSpec:
    """``spec`` (calibrated from a profile) with the unaligned-GEMM slowdown recorded on its GPU in
    ``data/`` (``gemm_alignment``) added where the profile has none: a calibration does not time
    misaligned shapes, a recording does."""
    ceilings = spec.measured_ceilings
    if ceilings is None or ceilings.unaligned_slowdown or spec.kind != "gpu":
        return spec
    slowdown = alignment_slowdown(_recording("gemm_alignment", spec, root))
    if not slowdown:
        return spec
    source = f"{ceilings.source}; unaligned GEMMs from gemm_alignment (recorded)"
    ceilings = replace(ceilings, unaligned_slowdown=slowdown, source=source)
    return replace(spec, measured_ceilings=ceilings,
                   sources={**spec.sources, "ceilings": f"{spec.sources.get('ceilings', '')}; unaligned "
                                                         "GEMMs: the gemm_alignment recording"})


def _is_path(value) -> bool:
    return isinstance(value, os.PathLike) or (isinstance(value, str) and value.lower().endswith(".json"))


def _cached_profile(name: str, *, warn: bool = True) -> tuple[DeviceProfile, Path] | None:
    """The profile saved in the user's cache under the device name ``name``, and its path, if there is
    one and it is readable (an unreadable one is ignored, with a warning that names it if ``warn``)."""
    path = profile_path(name)
    if not path.is_file():
        return None
    try:
        return load_profile(path), path
    except (OSError, ValueError) as e:
        if warn:
            warnings.warn(f"ignoring the saved device profile: {e} (run `python -m perfkit calibrate` again, "
                          "or delete the file)", UserWarning, stacklevel=3)
        return None


def data_profile(spec: DeviceSpec | None, root: str | os.PathLike | None = None
                 ) -> tuple[DeviceProfile, Path] | None:
    """The profile committed with the recordings in ``data/`` (or ``root``) measured on ``spec``'s device
    (``None``: the first profile of a GPU there, by folder name), and its path; ``None`` if there is none."""
    base = data_root(root)
    for path in sorted(base.glob(f"*/{PROFILE_FILE}")) if base.is_dir() else ():
        try:
            profile = load_profile(path)
        except (OSError, ValueError):
            continue
        if profile.matches(spec) if spec is not None else profile.device.get("kind") == "gpu":
            return profile, path
    return None


def calibrated(spec: str | os.PathLike | DeviceSpec, root: str | os.PathLike | None = None, *,
               profile: str | os.PathLike | None = None) -> DeviceSpec:
    """``spec`` with the ceilings measured on its device attached (``spec.ceilings`` and every model
    then use them); the spec unchanged when nothing was measured on it.

    ``spec`` is a :class:`DeviceSpec`, a device name (``"H100-SXM"``) or the path of a device
    profile (a ``.json`` file :func:`perfkit.calibrate` wrote: its device, calibrated). Where the
    ceilings come from is in the module docstring; ``profile`` names one to use (``ValueError`` if it
    was measured on another device), ``root`` another recordings folder than ``data/``.
    """
    if _is_path(spec):
        path = Path(spec)
        return load_profile(path).spec(str(path))
    if isinstance(spec, str):
        spec = device_spec(spec)
    if not isinstance(spec, DeviceSpec):
        raise TypeError("spec must be a DeviceSpec, a device name such as 'H100-SXM' or the path of a device "
                        f"profile (.json), got {spec!r}")
    if profile is not None:
        if not isinstance(profile, (str, os.PathLike)):
            raise TypeError(f"profile must be the path of a device profile (.json) or None, got {profile!r}")
        found = load_profile(profile)
        if not found.matches(spec):
            raise ValueError(f"profile {str(profile)!r} was measured on {found.identity.get('name')!r}, "
                             f"not on {spec.name!r}: calibrate that device, or pass its own profile")
        return found.spec(str(profile))
    if not spec.mem_bandwidth:
        return spec  # no bandwidth, no ceilings to attach
    saved = _cached_profile(spec.name)
    if saved is not None and not saved[0].matches(spec, model=cpu_model() if spec.kind == "cpu" else None):
        saved = None
    saved = saved or data_profile(spec, root)
    if saved is not None:
        return _with_alignment(saved[0].spec(str(saved[1])), root)
    measured = recorded_ceilings_of(spec, root)
    if measured is None:
        return spec
    return replace(spec, measured_ceilings=measured, sources={**spec.sources, "ceilings": measured.source})


def current_device(refresh: bool = False) -> DeviceSpec:
    """The device in use (:func:`perfkit.devices.current_device`) with its measured ceilings
    attached (:func:`calibrated`). On a CPU with a saved profile of this CPU (same name and model),
    the profile's spec: no quick measurement needed."""
    if not cuda_available():
        saved = _cached_profile(cpu_name(), warn=False)  # calibrated() below warns if it is unreadable
        me = {"kind": "cpu", "name": cpu_name(), "model": cpu_model()}
        if saved is not None and all(saved[0].identity[k] == v for k, v in me.items()):
            return saved[0].spec(str(saved[1]))
    return calibrated(_device_in_use(refresh))


def recorded_ceilings(spec: DeviceSpec, dtype: str = "float16") -> dict | None:
    """Measured ceilings of ``spec``'s GPU from ``data/``, for :func:`perfkit.plot_roofline`.

    Returns ``{"label", "flop_s", "bandwidth"}`` (FLOP/s, bytes/s) when ``ceiling_matmul`` (with
    ``dtype``) and ``ceiling_copy`` were both recorded on a GPU matching ``spec``, else ``None``.
    """
    measured = recorded_ceilings_of(spec)
    if measured is None or dtype not in measured.flop_s:
        return None
    return {"label": measured.source, "flop_s": measured.flop_s[dtype], "bandwidth": measured.bandwidth}
