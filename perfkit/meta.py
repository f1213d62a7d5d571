"""A frame's metadata, typed: what ``frame.attrs["meta"]`` says about where its rows come from.

Three writers fill ``frame.attrs["meta"]`` with a plain dict (the recorder's JSON format, kept as it
is): a live run (:func:`perfkit.experiments.registry.register`: ``live``, ``device_name``, ``device_kind``,
``measured_at``, ``params``), a recording (:func:`perfkit.data.load`: the JSON the recorder wrote,
with ``device``, ``recorded_at``, ``complete``) and a published table (``published_by``,
``published_date``, ``timing``, ``caveat``). Readers go through :class:`FrameMeta` and one answer to
"which GPU measured this frame", :func:`gpu_of`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .devices import DeviceSpec, current_device, device_spec, match_driver_name

__all__ = ["FrameMeta", "gpu_of", "is_cpu"]


def _text(value: Any) -> str | None:
    """``value`` as a string, ``None`` when it is missing or empty."""
    return None if value is None or value == "" else str(value)


@dataclass(frozen=True)
class FrameMeta:
    """The metadata of one frame; a field is ``None`` (or empty) when the frame's metadata lacks it.

    ``device`` is perfkit's table name (``"H100-SXM"``), ``device_name`` the name the driver or the
    publisher gave (``"NVIDIA H100 80GB HBM3"``), ``device_kind`` ``"gpu"`` or ``"cpu"``. Dates are
    ISO 8601 strings (``measured_at`` for a live run, ``recorded_at`` for a recording).
    ``complete`` is ``None`` when the metadata does not say. ``raw`` is the dict itself.
    """

    experiment: str | None = None
    live: bool = False
    device: str | None = None
    device_name: str | None = None
    device_kind: str | None = None
    measured_at: str | None = None
    recorded_at: str | None = None
    complete: bool | None = None
    quick: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    rows: int | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    published_by: str | None = None
    published_date: str | None = None
    published_detail: str | None = None
    timing: str | None = None
    caveat: str | None = None
    gemm_beta: float = 0.0  # a published GEMM's beta (1: C is read as well as written)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, source: Any, param: str = "frame") -> "FrameMeta":
        """The metadata of ``source``: a DataFrame (its ``attrs["meta"]``), a metadata dict, a
        :class:`FrameMeta`, or ``None`` (an empty one). Missing keys give ``None`` fields."""
        if isinstance(source, FrameMeta):
            return source
        if source is not None and not isinstance(source, Mapping):
            attrs = getattr(source, "attrs", None)  # a DataFrame (duck-typed: the core needs no pandas here)
            if not isinstance(attrs, Mapping):
                raise TypeError(f"{param} must be a DataFrame, its attrs['meta'] dict, a FrameMeta or None, "
                                f"got {type(source).__name__}")
            source = attrs.get("meta")
        meta = source if isinstance(source, Mapping) else {}
        params = meta.get("params") if isinstance(meta.get("params"), Mapping) else {}
        rows = meta.get("rows")
        return cls(
            experiment=_text(meta.get("experiment")), live=bool(meta.get("live")),
            device=_text(meta.get("device")), device_name=_text(meta.get("device_name")),
            device_kind=_text(meta.get("device_kind")), measured_at=_text(meta.get("measured_at")),
            recorded_at=_text(meta.get("recorded_at")),
            complete=None if "complete" not in meta else bool(meta["complete"]),
            quick=bool(params.get("quick", False)), params=dict(params),
            rows=int(rows) if isinstance(rows, (int, float)) and not isinstance(rows, bool) else None,
            columns=dict(meta.get("columns") or {}), published_by=_text(meta.get("published_by")),
            published_date=_text(meta.get("published_date")), published_detail=_text(meta.get("published_detail")),
            timing=_text(meta.get("timing")), caveat=_text(meta.get("caveat")),
            gemm_beta=float(meta.get("gemm_beta") or 0), raw=dict(meta),
        )

    def __bool__(self) -> bool:
        """Whether the frame carried any metadata at all."""
        return bool(self.raw)

    @property
    def published(self) -> bool:
        """Whether a third party measured the frame (its metadata names a publisher)."""
        return bool(self.published_by)

    @property
    def is_cpu(self) -> bool:
        """Whether the frame was measured on a CPU (no metadata: not a CPU)."""
        name = self.device_name or self.device or ""
        return self.device_kind == "cpu" or name.upper().startswith("CPU")

    @property
    def gpu(self) -> DeviceSpec | None:
        """The GPU that measured the frame: its recorded table name, else its driver's (or
        publisher's) name, else this GPU for a live frame; ``None`` for a CPU run, no metadata, or a
        GPU perfkit has no spec of. Datasheet ceilings: a prediction attaches the recorded ones
        with ``perfkit.calibrated``."""
        if self.is_cpu:
            return None
        for name in (self.device, match_driver_name(self.device_name or ""), self.device_name):
            if name:
                try:
                    return device_spec(name)
                except LookupError:
                    continue
        return current_device() if self.live else None


def gpu_of(frame: Any) -> DeviceSpec | None:
    """Which GPU measured ``frame`` (a DataFrame, its metadata dict, a :class:`FrameMeta` or
    ``None``): :attr:`FrameMeta.gpu`."""
    return FrameMeta.of(frame).gpu


def is_cpu(frame: Any) -> bool:
    """Whether ``frame`` (a DataFrame, its metadata dict, a :class:`FrameMeta` or ``None``) was
    measured on a CPU; a frame without metadata is not."""
    return FrameMeta.of(frame).is_cpu
