"""Provenance: where a figure's numbers come from, and the one place their labels are made.

Every number the book draws is one of:

- **live**: measured now, on this machine (``"live on H100-SXM (NVIDIA H100 80GB HBM3), 2026-11-22"``;
  ``"live (quick sweep) on …"`` for the small sweeps of ``quick=True``);
- **recorded**: measured by ``perfkit record`` on a real GPU and kept in ``data/``
  (``"recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"``, ``" (incomplete)"`` if interrupted);
- **published**: measured by a third party, read from the published-data folder with its provenance
  (``"published by Baidu DeepBench, measured on Tesla V100 (cuBLAS 10.1, 2019)"``);
- **model**: computed from a device's spec, no measurement (``"model of H100-SXM: NVIDIA H100
  datasheet (SXM), dense"``);
- **missing**: nothing to show, and why.

Frames carry their metadata in ``frame.attrs["meta"]``: an experiment attaches it when it runs
(``"live": true``), :func:`perfkit.data.load` attaches a recording's JSON. :func:`source_of` turns
that metadata into a :class:`Source`; :func:`caption` combines the sources of every frame a
figure draws into one line. Nothing else in perfkit builds a label.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pandas as pd

from ._validate import frame_or_none
from .devices import DeviceSpec, current_device
from .meta import FrameMeta
from .published_data import has_published, published
from .then_now import COUNTERPARTS, KIND, counterpart

#: The kinds of :class:`Source`.
KINDS: tuple[str, ...] = ("live", "recorded", "published", "model", "missing")


@dataclass(frozen=True)
class Source:
    """Where a frame's numbers come from. ``str(source)`` is the label figures print.

    ``device`` is the device's label, ``date`` a ``YYYY-MM-DD`` day (a year for old published
    data). ``quick`` marks a live quick sweep, ``complete=False`` an interrupted recording. ``by``
    names a publisher; ``detail`` holds the published software versions, a model's basis, or why
    data is missing.
    """

    kind: str
    device: str = ""
    date: str = ""
    quick: bool = False
    complete: bool = True
    by: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {self.kind!r}")

    @property
    def label(self) -> str:
        """The text a figure prints for this source."""
        if self.kind == "live":
            return f"live{' (quick sweep)' if self.quick else ''} on {self.device}, {self.date}"
        if self.kind == "recorded":
            return f"recorded on {self.device} on {self.date}" + ("" if self.complete else " (incomplete)")
        if self.kind == "published":
            versions = f"{self.detail}, " if self.detail else ""
            return f"published by {self.by}, measured on {self.device} ({versions}{self.date})"
        if self.kind == "model":
            return f"model of {self.device}: {self.detail}" if self.detail else f"model of {self.device}"
        return self.detail

    def __str__(self) -> str:
        return self.label


def _today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")


def live(device: str | None = None, *, quick: bool = False) -> Source:
    """The source of numbers measured now: on ``device`` (a label; default: the current device)."""
    return Source("live", device or current_device().label, _today(), quick=bool(quick))


def from_meta(meta: Mapping[str, Any] | FrameMeta) -> Source:
    """The source described by a frame's metadata: a live run's, a recording's or a published one's."""
    if not isinstance(meta, (Mapping, FrameMeta)):
        raise TypeError(f"meta must be a metadata dict (frame.attrs['meta']) or a FrameMeta, got {type(meta).__name__}")
    m = FrameMeta.of(meta)
    device = m.device_name or "an unknown device"
    if m.live:
        return Source("live", device, (m.measured_at or "")[:10] or _today(), quick=m.quick)
    if m.published_by:
        return Source("published", device, m.published_date or "an unknown date", by=m.published_by,
                      detail=m.published_detail or "")
    return Source("recorded", device, (m.recorded_at or "")[:10] or "an unknown date", complete=bool(m.complete))


def source_of(frame: pd.DataFrame | None) -> Source | None:
    """The :class:`Source` of a frame from its ``attrs["meta"]``, or ``None`` if it carries none."""
    if frame_or_none("frame", frame) is None:
        return None
    meta = FrameMeta.of(frame)
    return from_meta(meta) if meta else None


def recorded_on(frame: pd.DataFrame | None, device: str, date: str | None = None) -> bool:
    """Whether ``frame`` is a complete recording made on a device whose label contains ``device``
    (and on ``date``, ``YYYY-MM-DD``, when given): what a chapter's hidden checks ask before they
    assert the numbers its prose quotes from that recording."""
    shown = source_of(frame)
    return (shown is not None and shown.kind == "recorded" and shown.complete and device in shown.device
            and (date is None or shown.date == date))


def modelled(spec: DeviceSpec) -> Source:
    """The source of numbers computed from ``spec``: its label and where its peaks come from."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec, got {spec!r}")
    return Source("model", spec.label, detail=spec.sources.get("peaks", "peaks of unknown origin"))


def missing(reason: str) -> Source:
    """The source of a figure that cannot be drawn, saying why."""
    if not isinstance(reason, str) or not reason:
        raise TypeError(f"reason must be a non-empty string, got {reason!r}")
    return Source("missing", detail=reason)


def models_of(specs: Iterable[DeviceSpec]) -> str:
    """The label of curves computed from several specs: ``"model of H100-SXM and V100-SXM2"``."""
    names = [s.name for s in specs]
    if not names:
        raise ValueError("models_of needs at least one DeviceSpec")
    return "model of " + " and ".join(names)


def published_together(sources: Iterable[Source | str | None]) -> list[str]:
    """The labels of several sources with each publisher said once: ``"published by Baidu
    DeepBench, measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019), Tesla P100 (2017)"``, then the
    other sources' labels; None entries are skipped."""
    by: dict[str, dict[str, list[str]]] = {}  # publisher → device → details and dates
    other: list[str] = []
    for src in sources:
        if isinstance(src, Source) and src.kind == "published" and src.by and src.device:
            said = by.setdefault(src.by, {}).setdefault(src.device, [])
            said += [d for d in (src.detail, src.date) if d and d not in said]
        elif src is not None:
            other.append(str(src))
    merged = [f"published by {publisher}, measured on "
              + ", ".join(f"{device} ({', '.join(sorted(d, key=str.isdigit))})" for device, d in devices.items())
              for publisher, devices in by.items()]
    return list(dict.fromkeys(merged + other))


def publisher_of(label: str) -> str | None:
    """Who published the numbers a source label (``str(source)``) names, without a leading
    "Baidu " (``"DeepBench"``, ``"OpenXLA"``); None for a label that is not a publication's."""
    if not isinstance(label, str) or not label.startswith("published by "):
        return None
    return label.removeprefix("published by ").split(",")[0].split(" (")[0].removeprefix("Baidu ")


def caption(parts: Mapping[str, Source | str | None] | Iterable[Source | str | None]) -> str:
    """One line naming where every part of a figure comes from.

    ``parts`` maps a name (a panel, a series) to its source, or is a plain list of sources;
    ``None`` entries (nothing drawn) are skipped. Identical labels are said once: one label if all
    parts share it, else ``"sizes, waves: recorded on …; small N: live on …"``.
    """
    named = parts.items() if isinstance(parts, Mapping) else ((None, p) for p in parts)
    groups: dict[str, list[str]] = {}
    for name, source in named:
        if source is None:
            continue
        if not isinstance(source, (Source, str)):
            raise TypeError(f"each source must be a Source, a string or None, got {source!r}")
        groups.setdefault(str(source), []).append(name)
    if not groups:
        raise ValueError("caption needs at least one source that is not None")
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(label if None in names else f"{', '.join(names)}: {label}" for label, names in groups.items())


#: The GPUs whose published GEMMs are drawn as "then", newest first.
THEN_GPUS: tuple[str, ...] = ("V100-SXM2", "P100-PCIe")


def published_counterparts(experiment: str, *, dtype: str = "float16", gpus: Iterable[str] = THEN_GPUS,
                           root: str | os.PathLike | None = None) -> dict[str, pd.DataFrame]:
    """The published measurements matching ``experiment`` ("then"): ``{"V100-SXM2, 2019": frame, ...}``.

    GEMMs or RNN layers (:data:`perfkit.then_now.KIND`), read by :func:`perfkit.published` from the
    published-data folder (``root``; ``{}`` where there is none) and selected by :func:`perfkit.then_now.counterpart`; each
    frame keeps its publisher's metadata. The P100's ``"float16"`` rows ran with FP32 math
    (DeepBench's "pseudo FP16").
    """
    if isinstance(gpus, str) or not isinstance(gpus, Iterable):
        raise TypeError(f"gpus must be a list of GPU names such as {list(THEN_GPUS)}, got {gpus!r}")
    if experiment not in COUNTERPARTS:
        raise LookupError(f"experiment {experiment!r} has no published counterpart; these do: "
                          f"{', '.join(COUNTERPARTS)}")
    out: dict[str, pd.DataFrame] = {}
    source = "deepbench_" + KIND[experiment]
    if not has_published(source, root):
        return out  # no published-data folder here: figures draw the model instead (labelled)
    for gpu in gpus:
        rows = counterpart(experiment, published(source, gpu, root=root), dtype)
        meta = FrameMeta.of(rows)
        out[f"{meta.device or gpu}, {meta.published_date or '?'}"] = rows
    return out


#: ``pk.provenance.live_source()``: the label of numbers measured now on this machine.
live_source = live

__all__ = ["KINDS", "THEN_GPUS", "Source", "caption", "from_meta", "live", "live_source", "missing", "modelled",
           "models_of", "published_counterparts", "published_together", "publisher_of", "recorded_on",
           "source_of"]
