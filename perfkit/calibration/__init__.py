"""Calibration, at the edge: a device's achievable ceilings measured, saved, and attached to its spec.

- :func:`calibrate` (:mod:`.run`; ``python -m perfkit calibrate``): measure the device in use in about
  a minute (a model-guided matmul search, :mod:`.search`; copies, the floor of a kernel, :mod:`.probes`)
  and check the models against it; the result is a :class:`DeviceProfile` (:mod:`.profile`), saved
  to the user's cache;
- :func:`calibrated` / :func:`current_device` (:mod:`.recorded`): a spec with the ceilings measured on
  its device attached (``spec.ceilings``): a saved profile, else the recordings in ``data/``.

The models never read a file: they use the ceilings on the spec they are given. Nothing in
perfkit's core imports this package.
"""

from __future__ import annotations

from .profile import DeviceProfile, load_profile, profile_path, save_profile
from .recorded import calibrated, current_device, recorded_ceilings, recorded_ceilings_of
from .run import Calibration, calibrate

__all__ = ["Calibration", "DeviceProfile", "calibrate", "calibrated", "current_device", "load_profile",
           "profile_path", "recorded_ceilings", "recorded_ceilings_of", "save_profile"]
