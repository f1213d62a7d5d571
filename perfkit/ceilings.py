"""Achievable ceilings: the math throughput and bandwidth a real GEMM can reach on a device.

Datasheet peaks are never reached: cuBLAS gets about 80 % of an H100's dense BF16 peak and 87 % of
an A100's (the MAMF finder's best shapes), and a copy draws about 90 % of the memory bandwidth. The
GEMM model (:mod:`perfkit.gemm_model`) and the byte model (:mod:`perfkit.memory_model`) use the
**achievable** ceilings a :class:`~perfkit.devices.DeviceSpec` carries (``spec.ceilings``):

1. measured ones, when the edge attached them (:func:`perfkit.calibrated` reads a recording of
   ``ceiling_matmul`` and ``ceiling_copy`` for the device in ``data/``, and ``gemm_alignment`` for
   the measured cost of unaligned dimensions; :func:`measured_ceilings` and
   :func:`alignment_slowdowns` are the pure analysis of those frames), merged with the defaults
   (:func:`merged`: what was not measured keeps its default), else
2. documented defaults: a fraction of the datasheet per device (:data:`ACHIEVABLE_FRACTIONS`), each
   with its source.

TF32 on Hopper is the one default fitted to GEMM timings rather than read off a best case: XLA's
published H100 table shows mid-sized TF32 GEMMs far slower than half their BF16 speed, so the
H100-class devices carry a TF32 fraction, an extra fixed cost per TF32 kernel
(:data:`EXTRA_LATENCY_S`) and a serial epilogue, fitted on the *fit* half of those rows (see
:data:`TF32_FIT`).

Per architecture family (:func:`architecture`) the defaults also carry what our H200 recordings
measured of Hopper and the published tables say of older GPUs: the slowdown of a GEMM whose leading
dimensions are not multiples of 16 bytes (:data:`ALIGNMENT_SLOWDOWNS`), the rate a GEMM kernel
streams its operands per SM (:data:`GEMM_SM_BANDWIDTH`) and the least a GEMM takes timed with the
L2 flushed (:data:`GEMM_FLOOR_S`), each with what it rests on.

Nothing here reads ``data/``: every function is a function of its arguments. The model never uses
a ceiling above the datasheet's. Units: FLOP/s, bytes/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from .achievable import (ACHIEVABLE_FRACTIONS, ALIGNMENT_SLOWDOWNS, BANDWIDTH_FRACTION, BANDWIDTH_FRACTIONS,
                         EXTRA_LATENCY_S, GEMM_FLOOR_S, GEMM_LATENCY_S, GEMM_SM_BANDWIDTH, GENERIC_FRACTIONS,
                         KERNEL_LATENCY_S, TENSOR_CORE_DTYPES, TF32_FIT)
from .architectures import family, nearest_family
from .dtypes import canonical_dtype, itemsize
from .gemm_alignment import alignment_bytes, alignment_class
from .units import GIGA, TERA

if TYPE_CHECKING:
    import pandas as pd


class DeviceSpec(Protocol):
    """What this module reads of a :class:`perfkit.devices.DeviceSpec` (devices imports this module,
    not the other way round)."""

    name: str
    peaks: Mapping[str, float]
    mem_bandwidth: float | None
    sources: Mapping[str, str]

__all__ = ["ACHIEVABLE_FRACTIONS", "ALIGNMENT_SLOWDOWNS", "BANDWIDTH_FRACTION", "CEILINGS_CHOICES",
           "EXTRA_LATENCY_S", "GEMM_FLOOR_S", "GEMM_SM_BANDWIDTH", "GENERIC_FRACTIONS", "KERNEL_LATENCY_S",
           "TENSOR_CORE_DTYPES", "TF32_FIT", "Ceilings", "achievable_ceilings", "alignment_slowdown",
           "alignment_slowdowns", "architecture", "cold_start_s", "datasheet_ceilings", "default_ceilings",
           "describe", "gemm_latency_s", "kernel_latency_s", "measured_ceilings", "merged", "resolve_ceilings",
           "unaligned_slowdown_for"]

@dataclass(frozen=True)
class Ceilings:
    """Achievable math throughput per dtype (FLOP/s) and memory bandwidth (bytes/s), and their source.

    ``unaligned_slowdown`` (per dtype, ≥ 1) multiplies the time of a GEMM whose worst-aligned leading
    dimension is aligned to 4–8 bytes, ``unaligned_narrow_slowdown`` to under 4 bytes (the partial
    one where a dtype has no narrow one; :func:`unaligned_slowdown_for`): per architecture by default
    (:data:`ALIGNMENT_SLOWDOWNS`), a ``gemm_alignment`` recording's when calibrated.
    ``extra_latency_s`` (per math dtype, seconds ≥ 0) is added to the model's fixed cost of a kernel
    (:data:`EXTRA_LATENCY_S`). ``gemm_latency_s`` and ``kernel_latency_s`` (seconds) are measured fixed
    costs of a GEMM kernel and of a memory-bound kernel (a calibration's, :func:`perfkit.calibrate`);
    ``None`` keeps the model's :data:`KERNEL_LATENCY_S` (:func:`gemm_latency_s`, :func:`kernel_latency_s`).
    ``gemm_sm_bandwidth`` (bytes/s per SM, or ``None``: no cap) caps what one SM draws streaming a
    GEMM's operands (:data:`GEMM_SM_BANDWIDTH`). ``serial_epilogue``: math dtypes whose GEMM kernels
    write C after their main loop instead of while the next tile's runs (Hopper's TF32, :data:`TF32_FIT`).
    ``gemm_floor_s`` (seconds or ``None``): the least fixed cost of a GEMM timed one call at a time with
    the L2 flushed (:data:`GEMM_FLOOR_S`).
    """

    flop_s: Mapping[str, float]
    bandwidth: float
    source: str
    unaligned_slowdown: Mapping[str, float] = field(default_factory=dict)
    extra_latency_s: Mapping[str, float] = field(default_factory=dict)
    gemm_latency_s: float | None = None
    kernel_latency_s: float | None = None
    unaligned_narrow_slowdown: Mapping[str, float] = field(default_factory=dict)
    gemm_sm_bandwidth: float | None = None
    serial_epilogue: frozenset[str] = frozenset()
    gemm_floor_s: float | None = None

    def flop_s_for(self, dtype) -> float:
        """Achievable FLOP/s for ``dtype``; ``LookupError`` if there is none."""
        d = canonical_dtype(dtype)
        if d not in self.flop_s:
            have = ", ".join(map(repr, self.flop_s)) or "none"
            raise LookupError(f"no achievable throughput for dtype {d!r} ({self.source}); dtypes: {have}")
        return self.flop_s[d]


def unaligned_slowdown_for(ceilings: Ceilings, dtype, nbytes: int) -> float:
    """How many times slower a GEMM in ``dtype`` runs when its worst-aligned leading dimension is
    aligned to ``nbytes`` bytes: 1 at 16 bytes, else the ceilings' partial (4–8 bytes) or narrow (under
    4; the partial one where there is no narrow one) slowdown, 1 for a dtype without one."""
    d = canonical_dtype(dtype)
    if nbytes >= 16:
        return 1.0
    partial = ceilings.unaligned_slowdown.get(d, 1.0)
    return partial if nbytes >= 4 else ceilings.unaligned_narrow_slowdown.get(d, partial)


def architecture(spec: DeviceSpec) -> str:
    """The family whose GEMM defaults ``spec`` takes (:data:`ALIGNMENT_SLOWDOWNS`): its own
    (:func:`perfkit.architectures.family`), else the nearest one with a default (an unknown GPU: the newest)."""
    fam = family(_check_spec(spec))
    return fam if fam in ALIGNMENT_SLOWDOWNS else nearest_family(fam, ALIGNMENT_SLOWDOWNS) or "hopper"


def gemm_latency_s(ceilings: Ceilings, default_s: float = KERNEL_LATENCY_S) -> float:
    """The fixed cost of a GEMM kernel (seconds): the measured one the ceilings carry, else ``default_s``;
    at least the ceilings' ``gemm_floor_s`` (a real GEMM kernel's, L2 flushed) where they have one."""
    value = default_s if ceilings.gemm_latency_s is None else ceilings.gemm_latency_s
    return max(value, ceilings.gemm_floor_s or 0.0)


def cold_start_s(ceilings: Ceilings, default_s: float = KERNEL_LATENCY_S) -> float:
    """How much of :func:`gemm_latency_s` (seconds) is the flushed-L2 floor's cold start: what a GEMM run
    right after another one (a recurrent step, a batch of launches) does not pay again, 0 without a floor."""
    warm = default_s if ceilings.gemm_latency_s is None else ceilings.gemm_latency_s
    return gemm_latency_s(ceilings, default_s) - warm


def kernel_latency_s(ceilings: Ceilings, default_s: float = KERNEL_LATENCY_S) -> float:
    """The fixed cost of a memory-bound kernel (seconds): the measured one the ceilings carry, else ``default_s``."""
    return default_s if ceilings.kernel_latency_s is None else ceilings.kernel_latency_s


def _check_spec(spec: Any) -> DeviceSpec:
    # A DeviceSpec, recognised by its fields (devices imports this module, not the other way round).
    fields = ("name", "peaks", "mem_bandwidth", "sources")
    if isinstance(spec, (str, bytes)) or not all(hasattr(spec, a) for a in fields):
        raise TypeError(f"spec must be a DeviceSpec (e.g. device_spec('H100-SXM')), got {spec!r}")
    if not spec.mem_bandwidth:
        raise LookupError(f"memory bandwidth of {spec.name} is unknown, so it has no ceilings")
    return spec


def datasheet_ceilings(spec: DeviceSpec) -> Ceilings:
    """The datasheet peaks and bandwidth themselves: the plain roofline's ceilings."""
    spec = _check_spec(spec)
    return Ceilings(dict(spec.peaks), float(spec.mem_bandwidth),
                    f"datasheet: {spec.sources.get('peaks', 'unknown source')}")


def default_ceilings(spec: DeviceSpec) -> Ceilings:
    """Documented fractions of the datasheet (:data:`ACHIEVABLE_FRACTIONS`, :data:`BANDWIDTH_FRACTION`)."""
    spec = _check_spec(spec)
    fr = ACHIEVABLE_FRACTIONS.get(spec.name, GENERIC_FRACTIONS)
    flop_s = {}
    for d, peak in spec.peaks.items():
        tensor = d in TENSOR_CORE_DTYPES and fr["tensor"] is not None
        flop_s[d] = peak * fr.get(d, fr["tensor"] if tensor else fr["cuda"])
    arch, own = architecture(spec), family(spec)  # the family whose alignment defaults it takes; its own
    align = ALIGNMENT_SLOWDOWNS[arch]
    bw_fraction = BANDWIDTH_FRACTIONS.get(own, BANDWIDTH_FRACTION)
    return Ceilings(flop_s, spec.mem_bandwidth * bw_fraction,
                    f"default fractions of the datasheet ({fr['source']}; bandwidth ×{bw_fraction}; "
                    f"unaligned GEMMs: the {arch} defaults of perfkit.achievable)",
                    unaligned_slowdown=dict(align["partial"]), extra_latency_s=dict(EXTRA_LATENCY_S.get(spec.name, {})),
                    unaligned_narrow_slowdown=dict(align["narrow"]), gemm_sm_bandwidth=GEMM_SM_BANDWIDTH.get(own),
                    serial_epilogue=frozenset({"tf32"}) if spec.name in EXTRA_LATENCY_S else frozenset(),
                    gemm_floor_s=GEMM_FLOOR_S.get(own), gemm_latency_s=GEMM_LATENCY_S.get(own))


def merged(default: Ceilings, measured: Ceilings) -> Ceilings:
    """``measured`` ceilings completed by ``default``: dtypes not measured keep their default
    throughput and unaligned slowdowns; the bandwidth, source and measured fixed costs are the
    measured ones (a value not measured keeps the default's), the extra fixed costs and serial
    epilogues the default's."""
    for name, c in (("default", default), ("measured", measured)):
        if not isinstance(c, Ceilings):
            raise TypeError(f"{name} must be a Ceilings, got {c!r}")
    def either(name):
        value = getattr(measured, name)
        return getattr(default, name) if value is None else value

    return Ceilings({**default.flop_s, **measured.flop_s}, measured.bandwidth, measured.source,
                    {**default.unaligned_slowdown, **measured.unaligned_slowdown}, default.extra_latency_s,
                    either("gemm_latency_s"), either("kernel_latency_s"),
                    {**default.unaligned_narrow_slowdown, **measured.unaligned_narrow_slowdown},
                    either("gemm_sm_bandwidth"), default.serial_epilogue | measured.serial_epilogue,
                    either("gemm_floor_s"))


def achievable_ceilings(spec: DeviceSpec) -> Ceilings:
    """The ceilings the spec carries (``spec.ceilings``): measured ones when
    :func:`perfkit.calibrated` attached them, else :func:`default_ceilings`. Never reads ``data/``."""
    return _check_spec(spec).ceilings


#: What ``ceilings=`` of the models accepts besides a :class:`Ceilings`.
CEILINGS_CHOICES = (None, "achievable", "default", "datasheet")


def resolve_ceilings(spec: DeviceSpec, ceilings: Ceilings | str | None = None) -> Ceilings:
    """The ceilings a model uses on ``spec``: ``None`` or ``"achievable"`` → ``spec.ceilings``;
    ``"default"`` → :func:`default_ceilings`; ``"datasheet"`` → :func:`datasheet_ceilings`; a
    :class:`Ceilings` as given."""
    if isinstance(ceilings, Ceilings):
        return ceilings
    if ceilings is None or (isinstance(ceilings, str) and ceilings in CEILINGS_CHOICES):
        return {None: achievable_ceilings, "achievable": achievable_ceilings, "default": default_ceilings,
                "datasheet": datasheet_ceilings}[ceilings](spec)
    raise TypeError("ceilings must be None or 'achievable' (the spec's), 'default', 'datasheet' or a Ceilings, "
                    f"got {ceilings!r}")


def measured_ceilings(matmul: pd.DataFrame | None = None, copy: pd.DataFrame | None = None) -> dict:
    """Best measured values: ``{"flop_s": {dtype: FLOP/s}, "bandwidth": bytes/s}`` from a
    ``ceiling_matmul`` frame (column ``tflops``) and a ``ceiling_copy`` frame (column ``gbps``)."""
    out: dict = {"flop_s": {}, "bandwidth": None}
    if matmul is not None and len(matmul):
        out["flop_s"] = {d: float(g["tflops"].max()) * TERA for d, g in matmul.groupby("dtype")}
    if copy is not None and len(copy):
        out["bandwidth"] = float(copy["gbps"].max()) * GIGA
    return out


def alignment_slowdowns(frame: pd.DataFrame | None) -> dict[str, dict[str, float]]:
    """``{"partial": {dtype: x}, "narrow": {dtype: x}}`` from a ``gemm_alignment`` frame (K swept around a
    multiple of 16 bytes; columns ``K, dtype, time_s, aligned``): per dtype, the median time of its
    unaligned GEMMs whose K is aligned to 4–8 bytes (partial) or to under 4 (narrow) over the median of
    its aligned ones, at least 1; a dtype without both kinds of row is left out."""
    out: dict[str, dict[str, float]] = {"partial": {}, "narrow": {}}
    if frame is None or not len(frame):
        return out
    for d, g in frame.groupby("dtype"):
        ok = g[g["aligned"].astype(bool)]
        classes = g["K"].map(lambda k: alignment_class(alignment_bytes(int(k), itemsize(d))))
        for cls in out:
            bad = g[~g["aligned"].astype(bool) & (classes == cls)]
            if len(ok) and len(bad):
                out[cls][d] = max(1.0, float(bad["time_s"].median() / ok["time_s"].median()))
    return out


def alignment_slowdown(frame: pd.DataFrame | None) -> dict[str, float]:
    """Per dtype, the partial slowdown of a ``gemm_alignment`` frame (:func:`alignment_slowdowns`): how
    many times slower its GEMMs with K aligned to 4–8 bytes ran than the aligned ones (at least 1)."""
    return alignment_slowdowns(frame)["partial"]


def describe(ceilings: Ceilings, dtype) -> str:
    """One line: the achievable throughput for ``dtype``, the bandwidth, and their source."""
    return (f"{ceilings.flop_s_for(dtype) / TERA:,.1f} TFLOP/s, {ceilings.bandwidth / GIGA:,.0f} GB/s "
            f"({ceilings.source})")
