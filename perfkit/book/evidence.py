"""What a rule's "now" rests on when nothing was measured: a published measurement of a current
GPU, else the model's prediction (:class:`~perfkit.book.verdict.Evidence`). Shared by the chapter
modules, each of which computes its own effects from these frames (``alternatives``).

Only :func:`read` touches the published-data folder (``$PERFKIT_PUBLISHED``, see
:mod:`perfkit.published_data`); where it is absent every rule falls back to the model.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import pandas as pd

from ..devices import DeviceSpec, resolve_spec
from ..meta import FrameMeta
from ..provenance import Source
from ..published_data import published_or_none
from ..published_data.xla import xla_rows as rows
from .verdict import Evidence

#: The current GPU the model predicts for where nothing was measured or published.
TODAY_GPU = "H100-SXM"


def read(source: str) -> pd.DataFrame | None:
    """``perfkit.published(source)``, or None where the published-data folder lacks the table."""
    return published_or_none(source)


def modern(sources: Iterable[str]) -> dict[str, pd.DataFrame | None]:
    """The published tables named in ``sources`` (each None where absent), as ``alternatives`` take them."""
    return {name: read(name) for name in sources}


def frame_of(frames: Mapping[str, Any] | None, key: str) -> pd.DataFrame | None:
    """``frames[key]`` if it is a DataFrame with rows; None if absent; ``TypeError`` for anything else."""
    if frames is None:
        return None
    if not isinstance(frames, Mapping):
        raise TypeError(f"published frames must be a mapping of source name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    frame = frames.get(key)
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise TypeError(f"published frames[{key!r}] must be a DataFrame or None, got {type(frame).__name__}")
    return frame if frame is not None and len(frame) else None


def today(spec: str | DeviceSpec | None = None) -> DeviceSpec:
    """``spec`` (a GPU's name or DeviceSpec), or the GPU of :data:`TODAY_GPU`; ``TypeError`` for a CPU
    or anything else (:func:`perfkit.devices.resolve_spec`)."""
    spec = resolve_spec(spec, default=TODAY_GPU)
    if spec.kind != "gpu":
        raise TypeError(f"spec must be a GPU's name or DeviceSpec (pk.device_spec('H100-SXM')), got {spec!r}")
    return spec


def number(value: Any) -> float | None:
    """``value`` as a finite float, else None."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def published_label(frame: pd.DataFrame, device: str | None = None) -> str:
    """``"published by OpenXLA, measured on H100-SXM (2025)"``: the publisher of a published frame
    and its device (perfkit's name where it has one), as :class:`perfkit.provenance.Source` says it."""
    meta = FrameMeta.of(frame)
    if device is None:
        devices = [d for d in dict.fromkeys(frame["device"]) if d] if "device" in frame else []
        device = ", ".join(devices) or meta.device or meta.device_name or "a GPU"
    who = (meta.published_by or "a third party").split(" (")[0]
    return Source("published", device, meta.published_date or "an unknown date", by=who).label


def from_published(effect: Any, frame: pd.DataFrame | None, where: str, *, device: str | None = None,
                   holds_at: float | None = None, gone_below: float | None = None) -> Evidence | None:
    """The published "now" ``effect`` computed from ``frame``; None without an effect."""
    effect = number(effect)
    if effect is None or frame is None:
        return None
    return Evidence(effect, "published", published_label(frame, device), where, holds_at, gone_below)


def from_model(effect: Any, spec: DeviceSpec, where: str, *, holds_at: float | None = None,
               gone_below: float | None = None) -> Evidence | None:
    """The model's prediction ``effect`` for ``spec``; None without one."""
    effect = number(effect)
    return None if effect is None else Evidence(effect, "model", Source("model", spec.name).label, where,
                                                holds_at, gone_below)


def prefer(*evidence: Evidence | None) -> Evidence | None:
    """The first of ``evidence`` with a known effect (published before the model), else None."""
    return next((e for e in evidence if e is not None and e.effect is not None), None)


def xla_rows(frame: pd.DataFrame | None, *, b: int | None = 1) -> pd.DataFrame | None:
    """XLA's H100 GEMMs that may be used (bf16, and f32 run as TF32: ``dtype`` ``"bfloat16"`` or
    ``"tf32"``; :func:`perfkit.published_data.xla.xla_rows`), ``b`` GEMMs per launch (None:
    every b). None in, None out."""

    out = rows(frame, batch=b)
    return out if out is not None and len(out) else None


def as_measured(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame of the model's predictions (``predicted_*`` functions: ``time_s`` empty) with its
    ``predicted_s`` in ``time_s`` and ``tflops`` recomputed, so that the effect functions written
    for measurements compute the model's effect. The frame keeps no measurement."""
    out = frame.copy()
    out["time_s"] = out["predicted_s"]
    if "tflops" in out:
        dims = next((d for d in (("M", "N", "K"), ("gemm_M", "gemm_N", "gemm_K")) if set(d) <= set(out)), None)
        if dims is not None:
            out["tflops"] = 2.0 * out[dims[0]] * out[dims[1]] * out[dims[2]] / out["time_s"] / 1e12
        elif "flops" in out:
            out["tflops"] = out["flops"] / out["time_s"] / 1e12
    return out


__all__ = ["TODAY_GPU", "as_measured", "frame_of", "from_model", "from_published", "modern", "number", "prefer",
           "published_label", "read", "today", "xla_rows"]
