"""Calibration, at the edge: measured ceilings attached to a :class:`~perfkit.devices.DeviceSpec`.

- :func:`calibrated` / :func:`current_device` (:mod:`.recorded`): a spec with the ceilings measured
  for its device attached (``spec.ceilings``), from a saved device profile or the recordings in ``data/``.

The models never read a file: they use the ceilings on the spec they are given. Nothing in
perfkit's core imports this package.
"""

from __future__ import annotations

from .recorded import calibrated, current_device, recorded_ceilings, recorded_ceilings_of

__all__ = ["calibrated", "current_device", "recorded_ceilings", "recorded_ceilings_of"]
