"""Achievable ceilings: the math throughput and bandwidth a real GEMM can reach on a device.

Datasheet peaks are never reached: cuBLAS gets about 80 % of an H100's dense BF16 peak and 87 % of
an A100's (the MAMF finder's best shapes), and a copy draws about 90 % of the memory bandwidth. The
GEMM model (:mod:`perfkit.gemm_model`) and the byte model (:mod:`perfkit.memory_model`) use the
**achievable** ceilings a :class:`~perfkit.devices.DeviceSpec` carries (``spec.ceilings``):

1. measured ones, when the edge attached them (:func:`perfkit.calibrated` reads a recording of
   ``ceiling_matmul`` and ``ceiling_copy`` for the device in ``data/``, and ``gemm_alignment`` for
   the measured cost of unaligned dimensions; :func:`measured_ceilings` and
   :func:`alignment_slowdown` are the pure analysis of those frames), merged with the defaults
   (:func:`merged`: dtypes not measured keep their default), else
2. documented defaults: a fraction of the datasheet per device (:data:`ACHIEVABLE_FRACTIONS`), each
   with its source.

TF32 on Hopper is the one default fitted to GEMM timings rather than read off a best case: XLA's
published H100 table shows mid-sized TF32 GEMMs far slower than half their BF16 speed, so the
H100-class devices carry a TF32 fraction and an extra fixed cost per TF32 kernel
(:data:`EXTRA_LATENCY_S`) fitted on the *fit* half of those rows (see :data:`TF32_FIT`).

Nothing here reads ``data/``: every function is a function of its arguments. The model never uses
a ceiling above the datasheet's. Units: FLOP/s, bytes/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from .dtypes import canonical_dtype
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

__all__ = ["ACHIEVABLE_FRACTIONS", "BANDWIDTH_FRACTION", "CEILINGS_CHOICES", "EXTRA_LATENCY_S", "GENERIC_FRACTIONS",
           "KERNEL_LATENCY_S", "TENSOR_CORE_DTYPES", "TF32_FIT", "Ceilings", "achievable_ceilings",
           "alignment_slowdown", "datasheet_ceilings", "default_ceilings", "describe", "gemm_latency_s",
           "kernel_latency_s", "measured_ceilings", "merged", "resolve_ceilings"]

#: The fixed cost of one kernel (seconds): launch, ramp-up and drain. The GEMM model's default
#: ``GemmModel.latency_s`` (fitted on DeepBench's V100 GEMMs, ``scripts/fit_gemm_model.py``) and the
#: byte model's latency (:func:`perfkit.memory_model.memory_time`).
KERNEL_LATENCY_S = 5e-6

#: Dtypes that run on Tensor Cores where a device has them.
TENSOR_CORE_DTYPES = frozenset({"tf32", "float16", "bfloat16", "float8", "int8"})

_MAMF = "MAMF finder (ml-engineering, 2025)"
_DEEPBENCH = "Baidu DeepBench V100 results (cuBLAS 10.1, 2019)"

#: The TF32 defaults of the H100-class devices (Hopper SMs: H100 SXM and PCIe, H200, H800): an
#: effective fraction of the TF32 peak and an extra fixed cost per TF32 kernel (seconds), fitted
#: together by ``scripts/fit_gemm_model.py --tf32`` (grid search, median + 90th percentile of
#: |predicted/measured − 1|) on the *fit* half (:func:`perfkit.validation.fit_half`, a hash of the
#: shape) of OpenXLA's published H100 float32 rows, which run as TF32 (b = 1, 2, 4; 2025); the
#: *held-out* half is reported by ``scripts/validate_published.py`` and the GEMM chapter. Why: at
#: the largest shape XLA's TF32 reaches 81 % of the peak, as BF16 does, but mid-sized TF32 GEMMs take
#: 2.0–2.3× their BF16 time and the smallest 1.3–1.7× (where the math is negligible), which a
#: BF16-like ceiling and the V100-fitted 5 µs kernel cost cannot give. The fraction is therefore an
#: effective rate below what the largest TF32 GEMMs reach. No other GPU has TF32 evidence: the
#: A100 keeps its Tensor Core fraction.
TF32_FIT = {"fraction": 0.625, "extra_latency_s": 3.0e-6,
            "source": "fitted on the fit half of OpenXLA's published H100 TF32 GEMMs (2025)"}
_HOPPER_TF32 = f"TF32 {TF32_FIT['fraction']:.3f}: {TF32_FIT['source']}"

#: Per device: the achievable fraction of the datasheet peak for Tensor Core dtypes
#: (``"tensor"``), for CUDA-core dtypes (``"cuda"``, float32/float64 and everything on a GPU without
#: Tensor Cores), and per-dtype exceptions, with the source of each.
ACHIEVABLE_FRACTIONS: dict[str, dict] = {
    "V100-SXM2": {"tensor": 0.898, "cuda": 0.941,
                  "source": f"{_DEEPBENCH}: best FP16 GEMM 112.3 of 125, best FP32 14.8 of 15.7 TFLOP/s"},
    "P100-SXM2": {"tensor": None, "cuda": 0.941, "source": "no data of its own: the V100's FP32 fraction"},
    "P100-PCIe": {"tensor": None, "cuda": 0.941, "source": "no data of its own: the V100's FP32 fraction"},
    "A100-SXM4-40GB": {"tensor": 0.869, "cuda": 0.941,
                       "source": f"{_MAMF}: A100 SXM BF16 271.2 of 312 TFLOP/s; CUDA cores as on V100"},
    "A100-SXM4-80GB": {"tensor": 0.869, "cuda": 0.941,
                       "source": f"{_MAMF}: A100 SXM BF16 271.2 of 312 TFLOP/s; CUDA cores as on V100"},
    "H100-SXM": {"tensor": 0.803, "cuda": 0.941, "float8": 0.709, "tf32": TF32_FIT["fraction"],
                 "source": f"{_MAMF}: H100 SXM BF16 794.5 of 989, FP8 1402.6 of 1979 TFLOP/s; {_HOPPER_TF32}"},
    "H100-PCIe": {"tensor": 0.803, "cuda": 0.941, "float8": 0.709, "tf32": TF32_FIT["fraction"],
                  "source": f"{_MAMF}: the H100 SXM's fractions; {_HOPPER_TF32}"},
    "H200": {"tensor": 0.803, "cuda": 0.941, "float8": 0.734, "tf32": TF32_FIT["fraction"],
             "source": f"{_MAMF}: H100 SXM BF16 794.5 of 989 ('H200 is the same'), H200 FP8 1453.4 of 1979; "
                       f"{_HOPPER_TF32}"},
    # The H800 SXM5 has the H100 SXM's SMs and HBM3: its fractions, none fitted to DeepGEMM's H800 rows.
    "H800": {"tensor": 0.803, "cuda": 0.941, "float8": 0.709, "tf32": TF32_FIT["fraction"],
             "source": f"{_MAMF}: the H100 SXM's fractions (same SMs and HBM3); {_HOPPER_TF32}"},
}

#: Per device: the extra fixed cost of a kernel in a math dtype (seconds), added to the GEMM
#: model's ``latency_s``. Only Hopper's TF32 has one (:data:`TF32_FIT`).
EXTRA_LATENCY_S: dict[str, dict[str, float]] = {
    name: {"tf32": TF32_FIT["extra_latency_s"]} for name in ("H100-SXM", "H100-PCIe", "H200", "H800")
}

#: Fractions for a device not in :data:`ACHIEVABLE_FRACTIONS`: the H100's Tensor Core fraction.
GENERIC_FRACTIONS = {"tensor": 0.803, "cuda": 0.941,
                     "source": "no published figure for this device: the H100's and V100's fractions"}

#: Achievable fraction of the datasheet memory bandwidth. DeepBench's V100 GEMV-like GEMMs
#: (512×8×500000, FP32) draw 817 of 900 GB/s, 0.91; STREAM-like copies on HBM GPUs reach about 0.9.
BANDWIDTH_FRACTION = 0.9


@dataclass(frozen=True)
class Ceilings:
    """Achievable math throughput per dtype (FLOP/s) and memory bandwidth (bytes/s), and their source.

    ``unaligned_slowdown`` (per dtype, ≥ 1) multiplies the math time of a GEMM whose dimensions are
    not multiples of 16 bytes; it is only set from a measurement (a ``gemm_alignment`` recording).
    ``extra_latency_s`` (per math dtype, seconds ≥ 0) is added to the model's fixed cost of a kernel
    (:data:`EXTRA_LATENCY_S`). ``gemm_latency_s`` and ``kernel_latency_s`` (seconds) are measured fixed
    costs of a GEMM kernel and of a memory-bound kernel (a calibration's, :func:`perfkit.calibrate`);
    ``None`` keeps the model's :data:`KERNEL_LATENCY_S` (:func:`gemm_latency_s`, :func:`kernel_latency_s`).
    """

    flop_s: Mapping[str, float]
    bandwidth: float
    source: str
    unaligned_slowdown: Mapping[str, float] = field(default_factory=dict)
    extra_latency_s: Mapping[str, float] = field(default_factory=dict)
    gemm_latency_s: float | None = None
    kernel_latency_s: float | None = None

    def flop_s_for(self, dtype) -> float:
        """Achievable FLOP/s for ``dtype``; ``LookupError`` if there is none."""
        d = canonical_dtype(dtype)
        if d not in self.flop_s:
            have = ", ".join(map(repr, self.flop_s)) or "none"
            raise LookupError(f"no achievable throughput for dtype {d!r} ({self.source}); dtypes: {have}")
        return self.flop_s[d]


def gemm_latency_s(ceilings: Ceilings, default_s: float = KERNEL_LATENCY_S) -> float:
    """The fixed cost of a GEMM kernel (seconds): the measured one the ceilings carry, else ``default_s``."""
    return default_s if ceilings.gemm_latency_s is None else ceilings.gemm_latency_s


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
    return Ceilings(flop_s, spec.mem_bandwidth * BANDWIDTH_FRACTION,
                    f"default fractions of the datasheet ({fr['source']}; bandwidth ×{BANDWIDTH_FRACTION})",
                    extra_latency_s=dict(EXTRA_LATENCY_S.get(spec.name, {})))


def merged(default: Ceilings, measured: Ceilings) -> Ceilings:
    """``measured`` ceilings completed by ``default``: dtypes not measured keep their default
    throughput; the bandwidth, source, unaligned slowdowns and measured fixed costs are the
    measured ones (a fixed cost not measured keeps the default's), the extra fixed costs the default's."""
    for name, c in (("default", default), ("measured", measured)):
        if not isinstance(c, Ceilings):
            raise TypeError(f"{name} must be a Ceilings, got {c!r}")
    def either(name):
        value = getattr(measured, name)
        return getattr(default, name) if value is None else value

    return Ceilings({**default.flop_s, **measured.flop_s}, measured.bandwidth, measured.source,
                    measured.unaligned_slowdown, default.extra_latency_s, either("gemm_latency_s"),
                    either("kernel_latency_s"))


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


def alignment_slowdown(frame: pd.DataFrame | None) -> dict[str, float]:
    """Per dtype, how many times slower the unaligned GEMMs of a ``gemm_alignment`` frame ran than
    the aligned ones (median ``time_s`` over median, at least 1); dtypes without both kinds of row
    are left out."""
    slowdown: dict[str, float] = {}
    if frame is None or not len(frame):
        return slowdown
    for d, g in frame.groupby("dtype"):
        ok, bad = g[g["aligned"].astype(bool)], g[~g["aligned"].astype(bool)]
        if len(ok) and len(bad):
            slowdown[d] = max(1.0, float(bad["time_s"].median() / ok["time_s"].median()))
    return slowdown


def describe(ceilings: Ceilings, dtype) -> str:
    """One line: the achievable throughput for ``dtype``, the bandwidth, and their source."""
    return (f"{ceilings.flop_s_for(dtype) / TERA:,.1f} TFLOP/s, {ceilings.bandwidth / GIGA:,.0f} GB/s "
            f"({ceilings.source})")
