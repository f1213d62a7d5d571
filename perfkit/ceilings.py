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

#: The fixed cost of one kernel (seconds): launch, ramp-up and drain. The GEMM model's default
#: ``GemmModel.latency_s`` (fitted on DeepBench's V100 GEMMs, ``scripts/fit_gemm_model.py``) and the
#: byte model's latency (:func:`perfkit.memory_model.memory_time`).
KERNEL_LATENCY_S = 5e-6

#: Dtypes that run on Tensor Cores where a device has them.
TENSOR_CORE_DTYPES = frozenset({"tf32", "float16", "bfloat16", "float8", "int8"})

_MAMF = "MAMF finder (ml-engineering, 2025)"
_DEEPBENCH = "Baidu DeepBench V100 results (cuBLAS 10.1, 2019)"

#: The TF32 defaults of the H100-class devices (Hopper SMs: H100 SXM and PCIe, H200, H800): the
#: fraction of the TF32 peak a TF32 kernel reaches, an extra fixed cost per TF32 kernel (seconds), and
#: ``serial_epilogue``: a TF32 kernel writes its float32 C after its main loop, not while the next
#: tile's runs (:class:`Ceilings`). Fitted together by ``scripts/fit_gemm_model.py --tf32`` (grid
#: search, median + 90th percentile of |predicted/measured − 1|) on the *fit* half
#: (:func:`perfkit.validation.fit_half`, a hash of the shape) of OpenXLA's published H100 float32 rows,
#: which run as TF32 (b = 1, 2, 4; 2025); the *held-out* half is reported by ``python -m perfkit
#: validate`` and the GEMM chapter. Why: XLA's largest TF32 GEMM reaches 0.81 of the TF32 peak (our
#: H200: 391 of 494.7 TFLOP/s, 0.79), as BF16 does of its own, yet mid-sized TF32 GEMMs take 2.0–2.4×
#: their BF16 time and those with a large M·N and a short K are the slowest of all, which an output
#: written while the main loop runs cannot give. The likely cause (not measured here): Hopper's wgmma
#: reads TF32 operands from shared memory only K-major, so a row-major B (every XLA row is "NN") cannot
#: use the warp-specialised kernels that overlap a tile's epilogue with the next tile. The fixed cost
#: and the serial epilogue apply to every TF32 GEMM on these devices. No other GPU has TF32 evidence:
#: the A100 keeps its Tensor Core fraction. The previous fit (0.625 of the peak, 3 µs, overlapped
#: epilogue) scored 13.9 % / 33 % (median / p90, b = 1); this one 9.9 % / 27 % on the fit half, 12.7 % / 35 % held out.
TF32_FIT = {"fraction": 0.775, "extra_latency_s": 2.0e-6,
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
    # A 70 W part holds nowhere near its boost clock under a long GEMM: cuBLAS 4096³ FP16 runs at about
    # 24 of 65 TFLOP/s (0.37, "due to power capping", NVIDIA developer forum thread 264462, 2023), as
    # the clock falls toward its 585 MHz base (boost 1590); the same clock slows its CUDA cores.
    "T4": {"tensor": 0.37, "cuda": 0.37 * 0.941,
           "source": "NVIDIA developer forum (2023): cuBLAS 4096³ FP16 on a T4, ~24 of 65 TFLOP/s under its "
                     "70 W power cap; CUDA cores at the same clock"},
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

_H200_ALIGN = ("H200 recordings (2026-11-26): median, over the unaligned GEMMs of gemm_alignment (K) and "
               "fc_features (in = K of A and B, batch = N of C; 16-bit and TF32 pooled by class), of each one's "
               "time over its aligned neighbours' (perfkit.validation.neighbour_slowdowns); fc_features' out "
               "sweep (M, not a leading dimension) ran ×0.99 and float32 ×1.02 (no penalty); fit by "
               "scripts/fit_gemm_model.py --alignment")
_HOPPER_ALIGN = {"partial": {"float16": 2.92, "bfloat16": 2.92, "tf32": 2.79, "float8": 2.92, "int8": 2.92},
                 "narrow": {"float16": 5.08, "bfloat16": 5.08, "float8": 5.08, "int8": 5.08}}

#: Per architecture family (:mod:`perfkit.architectures`; a family without an entry takes the nearest
#: one's, :func:`architecture`): how many times slower a GEMM runs when its worst-aligned leading dimension
#: (:func:`perfkit.gemm_alignment.narrowest_alignment`) is aligned to 4–8 bytes (``"partial"``: the
#: fallback kernels copy 4 or 8 bytes at a time) or to under 4 (``"narrow"``: no asynchronous copy),
#: per dtype (a dtype not listed: no slowdown), and the basis. float8/int8 take the 16-bit values (not
#: measured; torch's float8 GEMM refuses dimensions that are not multiples of 16). Volta: cuBLAS 10
#: (DeepBench's) runs Tensor Cores only when dimensions are multiples of 8 (NVIDIA, *Matrix
#: Multiplication Background*, Tensor Core requirements), else CUDA cores: the V100's achievable
#: Tensor Core over FP32 throughput (112.3 / 14.8); DeepBench's V100 rows have no unaligned FP16
#: leading dimension (its FP16 sheet padded 5124 → 5128 and 35 → 40) and its FP32 ones ran unpenalised.
ALIGNMENT_SLOWDOWNS: dict[str, dict] = {
    "hopper": {**_HOPPER_ALIGN, "source": _H200_ALIGN},
    "ampere": {**_HOPPER_ALIGN, "source": "no recording of this family: Hopper's (cuBLAS falls back to the "
                                          f"same cp.async kernel family there; {_H200_ALIGN})"},
    "ada": {**_HOPPER_ALIGN, "source": "no recording of this family: Hopper's (the same fallback kernels)"},
    "turing": {**_HOPPER_ALIGN, "source": "no recording of this family: Hopper's (the nearest measured)"},
    "volta": {"partial": {"float16": 7.6}, "narrow": {"float16": 7.6},
              "source": "cuBLAS 10: unaligned FP16 runs on CUDA cores; V100 Tensor Core / FP32 achievable "
                        f"({_DEEPBENCH})"},
    "pascal": {"partial": {}, "narrow": {}, "source": "no Tensor Cores: no aligned fast path to lose"},
}

#: Per architecture family: the bandwidth one SM draws streaming a GEMM's operands (bytes/s): a GEMM
#: kernel keeps only its shared-memory pipeline's stages in flight, and by Little's law an SM draws
#: those bytes per DRAM round trip. Hopper: 21 GB/s per SM (2.8 TB/s over the H200's 132 SMs, 0.58 of
#: its datasheet, 0.65 of its copy bandwidth; an H100 SXM's 3.0 TB/s achievable barely above it),
#: fitted with :data:`GEMM_FLOOR_S` by ``scripts/fit_gemm_model.py --stream`` (grid search, median + p90
#: of |error|) on the memory-bound aligned GEMMs of gemm_small_n and fc_batch (H200, 2026-11-26; N ≤ 128:
#: :data:`perfkit.validation.RECORDED_FITS`). Other families: no cap (not measured; DeepBench's V100
#: GEMV-like GEMMs reach 0.91 of the datasheet).
GEMM_SM_BANDWIDTH: dict[str, float] = {"hopper": 21.0e9}

#: Per architecture family: the least a GEMM takes when timed as perfkit times it (one call alone, the
#: L2 flushed before it: the book's recordings, the advisor's ``measure=True``), in seconds: its kernel's
#: own minimum (prologue, pipeline fill, epilogue: XLA's smallest H100 GEMM kernel takes 5.0 µs by CUPTI)
#: plus its first loads missing the flushed L2. Hopper: 6.5 µs, fitted with :data:`GEMM_SM_BANDWIDTH` on
#: the same rows (the plain line through them: 7.0 µs + bytes / 3.0 TB/s), against the 4.86 µs a
#: calibration measured on a 16×16×16 GEMM with the L2 warm (a trivial kernel: it does not lower this
#: floor, :func:`gemm_latency_s`). Only the first of GEMMs run back to back pays the cold start
#: (:func:`cold_start_s`). Other families: none recorded (the model's 5 µs). Tables timed warm
#: (DeepBench back to back, XLA by CUPTI) are predicted without it (:func:`perfkit.validation.with_predictions`).
GEMM_FLOOR_S: dict[str, float] = {"hopper": 6.5e-6}


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
    family = architecture(spec)
    align = ALIGNMENT_SLOWDOWNS[family]
    return Ceilings(flop_s, spec.mem_bandwidth * BANDWIDTH_FRACTION,
                    f"default fractions of the datasheet ({fr['source']}; bandwidth ×{BANDWIDTH_FRACTION}; "
                    f"unaligned GEMMs and GEMM floors: the {family} defaults of perfkit.ceilings)",
                    unaligned_slowdown=dict(align["partial"]), extra_latency_s=dict(EXTRA_LATENCY_S.get(spec.name, {})),
                    unaligned_narrow_slowdown=dict(align["narrow"]), gemm_sm_bandwidth=GEMM_SM_BANDWIDTH.get(family),
                    serial_epilogue=frozenset({"tf32"}) if spec.name in EXTRA_LATENCY_S else frozenset(),
                    gemm_floor_s=GEMM_FLOOR_S.get(family))


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
