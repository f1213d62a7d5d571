"""Achievable defaults: what real kernels reach on each GPU and architecture family, each with its evidence.

The documented defaults :func:`perfkit.ceilings.default_ceilings` builds a device's ceilings from (the
models use them where no calibration of the device is attached):

- per device, the achievable fraction of the datasheet peak (:data:`ACHIEVABLE_FRACTIONS`): NVIDIA's from
  the MAMF finder's best shapes (Hopper's TF32 fitted on XLA's H100 table); Blackwell takes Hopper's (no
  Blackwell row fitted anything, MAMF's B200, B300 and GB200 rows are held out); AMD's from MAMF × what a
  typical library GEMM reaches of the best (:data:`AMD_TYPICAL_OF_BEST`, fitted on AITER's MI355X-class
  rows: on AMD the typical kernel sits further below the best than on NVIDIA);
- per architecture family (:func:`perfkit.ceilings.architecture`): the achievable bandwidth fraction
  (:data:`BANDWIDTH_FRACTIONS`), a GEMM kernel's fixed cost (:data:`GEMM_LATENCY_S`), the unaligned-GEMM
  slowdowns (:data:`ALIGNMENT_SLOWDOWNS`), the rate a GEMM kernel streams its operands per SM
  (:data:`GEMM_SM_BANDWIDTH`) and the flushed-L2 floor (:data:`GEMM_FLOOR_S`).

Plain data: nothing here reads a file. Units: fractions, seconds, bytes/s.
"""

from __future__ import annotations

__all__ = ["ACHIEVABLE_FRACTIONS", "ALIGNMENT_SLOWDOWNS", "AMD_FIT", "AMD_TYPICAL_OF_BEST", "BANDWIDTH_FRACTION",
           "BANDWIDTH_FRACTIONS", "EXTRA_LATENCY_S", "GEMM_FLOOR_S", "GEMM_LATENCY_S", "GEMM_SM_BANDWIDTH",
           "GENERIC_FRACTIONS", "KERNEL_LATENCY_S", "TENSOR_CORE_DTYPES", "TF32_FIT"]

#: The fixed cost of one kernel (seconds): launch, ramp-up and drain. The GEMM model's default
#: ``GemmModel.latency_s`` (fitted on DeepBench's V100 GEMMs, ``scripts/fit_gemm_model.py``) and the
#: byte model's latency (:func:`perfkit.memory_model.memory_time`).
KERNEL_LATENCY_S = 5e-6

#: Dtypes that run on Tensor Cores (AMD: matrix cores) where a device has them.
TENSOR_CORE_DTYPES = frozenset({"tf32", "float16", "bfloat16", "float8", "int8", "float6", "float4"})

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

#: AMD: what a typical library GEMM reaches of the MAMF finder's best, and CDNA's GEMM kernel fixed cost,
#: bandwidth fraction and tile reuse (the GEMM model's ``reuse_per_ridge``), fitted together by
#: ``scripts/fit_gemm_model.py --cdna`` (grid search, median + 90th percentile of |predicted/measured − 1|)
#: on the *fit* half (:func:`perfkit.validation.fit_half`) of AMD AITER's tuned bf16 GEMMs on gfx950
#: (MI355X-class, 256 CUs; device time by torch.profiler, cold operands, no launch gap: hence a fixed cost
#: of 2.5 µs, not NVIDIA's 5 µs of a call timed back to back). Held out: the other half (15.8 % median,
#: 31.7 % p90 against 16.1 % and 31.3 % fitted), all of gfx942 (MI300X-class: 9.6 %, 22 %) and MAMF's
#: rows. Why a factor: AITER's 8192³ reaches MAMF's best (1597 against 1565 TFLOP/s) but its typical
#: large GEMM about 0.75 of it and its medium ones (20–100 µs) less; NVIDIA's libraries sit closer to
#: their best (XLA's H100 table against MAMF's H100). MI300X's MAMF (668 TFLOP/s, 0.51 of its peak,
#: against MI355X's 0.62) times the factor gives the 0.34–0.41 its batched GEMMs reach in AITER's gfx942
#: rows. The reuse, 64 ridge points (the score is flat beyond it), makes a tile's speed nearly
#: proportional to its reuse: small tiles feed CDNA's matrix cores poorly. The grid's edges and its flat
#: optimum are in the script's output; MAMF's own best shapes come out 0.75 too slow by construction.
AMD_FIT = {"typical_of_best": 0.75, "latency_s": 2.5e-6, "bandwidth_fraction": 0.80, "reuse_per_ridge": 64.0,
           "source": "fitted on the fit half of AMD AITER's gfx950 bf16 GEMMs (ROCm/aiter @ e4048607)"}
AMD_TYPICAL_OF_BEST = AMD_FIT["typical_of_best"]
_AMD = f"{_MAMF} × {AMD_TYPICAL_OF_BEST} ({AMD_FIT['source']})"
_BLACKWELL = ("no Blackwell row fitted anything: the H100 SXM's fractions (MAMF); MAMF's B200, B300 and GB200 "
              "rows are held out")


def _amd(mamf_tflops: float, peak_tflops: float, what: str) -> dict:
    frac = mamf_tflops / peak_tflops * AMD_TYPICAL_OF_BEST
    return {"tensor": frac, "cuda": frac,
            "source": f"{_AMD}: {what} bf16 {mamf_tflops} of {peak_tflops} TFLOP/s; the same fraction for every "
                      "dtype (no other dtype published)"}


ACHIEVABLE_FRACTIONS.update({
    # fp8 takes the Tensor Core fraction, not Hopper's lower fp8 one: Hopper's fp8 MMA accumulates with
    # limited precision, so its libraries promote partial sums to FP32 registers every few K-steps (DeepSeek-V3
    # report, §3.3.2), which Blackwell's tcgen05 does not need (FP32 accumulators in tensor memory). Chosen
    # after MAMF's Blackwell fp8 rows came out 10–23 % slow with Hopper's 0.709: those rows are no longer a
    # clean held-out check of fp8 (scripts/validate_newest_gpus.py says so). fp6 and fp4: none published.
    **{name: {"tensor": 0.803, "cuda": 0.941,
              "source": _BLACKWELL + "; fp8, fp6 and fp4 the Tensor Core fraction (no fp8 accumulator promotion)"}
       for name in ("B200", "GB200", "B300", "GB300")},
    "MI300X": _amd(668.4, 1307.4, "MI300X (TunableOp, ROCm 6.3)"),
    "MI325X": _amd(784.9, 1307.4, "MI325X (1000 W, TunableOp)"),
    "MI355X": _amd(1565.0, 2516.6, "MI355X (ROCm 7.0)"),
    "MI350X": {**_amd(1565.0, 2516.6, "MI355X (ROCm 7.0)"), "source": "no MAMF row of its own: MI355X's fraction "
               f"(the same CDNA 4 silicon at a lower clock); {_AMD}"},
})

#: Per architecture family: the achievable fraction of the datasheet memory bandwidth where it differs from
#: :data:`BANDWIDTH_FRACTION` (CDNA: :data:`AMD_FIT`; CDNA 3 assumed from CDNA 4's).
BANDWIDTH_FRACTIONS: dict[str, float] = {"cdna4": AMD_FIT["bandwidth_fraction"], "cdna3": AMD_FIT["bandwidth_fraction"]}

#: Per architecture family: a GEMM kernel's fixed cost in seconds where it differs from
#: :data:`KERNEL_LATENCY_S` (CDNA: :data:`AMD_FIT`, device time without a launch gap; CDNA 3 assumed).
GEMM_LATENCY_S: dict[str, float] = {"cdna4": AMD_FIT["latency_s"], "cdna3": AMD_FIT["latency_s"]}

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
