"""Calibration, at the edge: the ceilings recorded in ``data/``, attached to a :class:`DeviceSpec`.

The models never read ``data/``: they use the ceilings a spec carries (``spec.ceilings``, see
:mod:`perfkit.ceilings`), the documented defaults unless measured ones were attached. This module
is where they are attached: :func:`calibrated` returns the spec with the ceilings recorded for its
GPU (``ceiling_matmul`` and ``ceiling_copy``, and ``gemm_alignment`` for unaligned dimensions),
:func:`current_device` the device in use, calibrated. Nothing in perfkit's core imports it.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ..ceilings import Ceilings, _check_spec, alignment_slowdown, measured_ceilings
from ..data import load
from ..devices import DeviceSpec, device_spec
from ..devices import current_device as _device_in_use
from ..provenance import caption, source_of

__all__ = ["calibrated", "current_device", "recorded_ceilings", "recorded_ceilings_of"]


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


def calibrated(spec: str | DeviceSpec, root: str | os.PathLike | None = None) -> DeviceSpec:
    """``spec`` (a :class:`DeviceSpec` or a device name) with the ceilings recorded for its GPU in
    ``data/`` (or ``root``) attached as ``measured_ceilings``, so that ``spec.ceilings`` and every
    model use them; the spec unchanged when nothing is recorded for it."""
    if isinstance(spec, str):
        spec = device_spec(spec)
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec or a device name such as 'H100-SXM', got {spec!r}")
    if not spec.mem_bandwidth:
        return spec  # no bandwidth, no ceilings to attach
    measured = recorded_ceilings_of(spec, root)
    return spec if measured is None else replace(spec, measured_ceilings=measured)


def current_device(refresh: bool = False) -> DeviceSpec:
    """The device in use (:func:`perfkit.devices.current_device`) with its recorded ceilings
    attached when ``data/`` has them (:func:`calibrated`)."""
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
