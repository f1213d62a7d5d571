"""The frames a chapter's verdicts read: GPU rows only (a CPU run is never a "now"), and the
recordings in ``data/`` that the book-wide table uses. Shared by the chapter modules."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from .._validate import frame_or_none
from ..calibration import calibrated
from ..data import has_recording, load
from ..devices import DeviceSpec
from ..meta import FrameMeta, gpu_of, is_cpu
from ..provenance import Source


def gpu_rows(frame: pd.DataFrame | None, param: str = "frame") -> pd.DataFrame | None:
    """``frame`` if it holds rows measured on a GPU, else None (missing, empty or a CPU run);
    ``TypeError`` naming ``param`` if it is not a DataFrame."""
    if frame_or_none(param, frame) is None:
        return None
    return None if frame.empty or is_cpu(frame) else frame


def recorded(names: Iterable[str], device: str | None = None) -> dict[str, pd.DataFrame | None]:
    """The recording of each experiment in ``names`` (on ``device``, default: any), None where
    there is none. Never measures."""
    return {name: load(name, device) if has_recording(name, device) else None for name in names}


def spec_of(frame: pd.DataFrame | None) -> DeviceSpec | None:
    """The GPU a frame was measured on (:func:`perfkit.meta.gpu_of`), with the ceilings recorded for
    it attached (:func:`perfkit.calibrated`), so that a prediction drawn beside the frame uses them;
    None for no frame, a CPU run, or a GPU perfkit does not know."""
    gpu = gpu_of(frame)
    return None if gpu is None else calibrated(gpu)


def measured_from(on: pd.DataFrame | str | None) -> str:
    """What a measured "now" rests on, in words: ``"ours, recorded on H100-SXM on 2026-02-01"``,
    ``"ours, live on H100-SXM, 2026-02-01"`` (:class:`perfkit.provenance.Source`'s label of the
    frame, with perfkit's device name); a string is returned as it is; without a frame or its
    metadata, ``"our measurement"``."""

    if isinstance(on, str):
        return on
    if on is None:
        return "our measurement"
    if not isinstance(on, pd.DataFrame):
        raise TypeError(f"on must be the DataFrame the effect was computed from, a label or None, got "
                        f"{type(on).__name__}")
    meta = FrameMeta.of(on, "on")
    if not meta:
        return "our measurement"
    spec = gpu_of(meta)
    device = spec.name if spec is not None else meta.device_name or "a GPU"
    if meta.live:
        source = Source("live", device, (meta.measured_at or "")[:10] or "today")
    else:
        source = Source("recorded", device, (meta.recorded_at or "")[:10] or "an unknown date",
                        complete=meta.complete is not False)
    return f"ours, {source.label}"


__all__ = ["gpu_rows", "is_cpu", "measured_from", "recorded", "spec_of"]
