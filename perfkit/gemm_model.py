"""The GEMM time model: achievable ceilings, tiles, waves, split-K and a latency floor.

For an M×N×K GEMM on a device with ``SMs`` multiprocessors (``W = SMs × blocks_per_sm`` work units
run at once):

1. **Ceilings.** ``P``, the achievable math throughput of the math dtype, and ``B``, the achievable
   bandwidth: the ceilings the spec carries (``spec.ceilings``, :mod:`perfkit.ceilings`: documented
   fractions of the datasheet, or measured ones that :func:`perfkit.calibrated` attached).
2. **Tiles and split-K.** The output is cut into ``TM×TN`` tiles and K into ``s`` slices, so
   ``units = ⌈M/TM⌉·⌈N/TN⌉·s`` run in ``⌈units/W⌉`` waves. Splitting K (split-K) gives a
   small-M·N GEMM enough units to fill the GPU, at the price of fp32 partial sums written and read
   back, and a second kernel.
3. **One unit** takes ``max(2·TM·TN·k / (P/W) / f, u / (β·B/W))`` with ``k = ⌈K/s⌉``: its math
   at its share of ``P``, slowed by the tile-shape factor ``f``; or its own share ``u`` of the
   operands (``TM·k`` elements of A shared by the ``⌈N/TN⌉`` tiles of its row, ``TN·k`` of B
   shared by the ``⌈M/TM⌉`` tiles of its column) at ``β`` times its fair share of bandwidth. So a
   GEMM that occupies few SMs cannot draw the whole memory system.
4. **Time** = ``max(math, memory) + latency``, math = waves × unit math, memory = ``max(waves ×
   unit share, bytes / B, (A + B) / S)`` (twice the latency with split-K, whose partial sums a
   second kernel adds, except on the devices of :data:`SPLIT_K_IN_KERNEL`), with ``bytes`` = A + B +
   C (C read too when ``accumulate``) + split-K partials, and ``S`` the rate a GEMM kernel streams its
   operands (``SMs × ceilings.gemm_sm_bandwidth``: what its pipeline keeps in flight per SM; on
   Hopper 2.8 TB/s, below an H200's copy bandwidth, so GEMV-like GEMMs reach it, not 4.3 TB/s). The
   latency is :class:`GemmModel`'s plus the ceilings' extra fixed cost for the math dtype (only
   Hopper's TF32 has one). A math dtype in ``ceilings.serial_epilogue`` (Hopper's TF32) writes C after
   its main loop: ``max(math, operands) + C / B + latency``.
5. **Alignment.** When the worst-aligned leading (contiguous) dimension of A, B or C
   (:mod:`perfkit.gemm_alignment`, by ``layout``) is not a multiple of 16 bytes, the library runs a
   fallback kernel that loads 4 or 8 bytes at a time, or under 4 bytes without asynchronous copies:
   its math time is multiplied by the ceilings' unaligned slowdown for that alignment
   (per architecture, :data:`perfkit.ceilings.ALIGNMENT_SLOWDOWNS`; measured on the H200 2.9× and
   5.1× in 16-bit, 2.8× in TF32, none in FP32). Only leading dimensions count: ``nn.Linear``'s
   tokens never do. (A memory-bound GEMM with an unaligned leading dimension also runs slower,
   1.3–1.9× on the H200's GEMV-like rows, which this does not model.)
6. Like a library heuristic, the model takes the (tile, split) with the smallest time.
7. **Batched GEMMs** (``batch=b``: b independent GEMMs of one shape in one launch, as
   ``torch.bmm`` or a grouped kernel runs them): their tiles share the waves, so
   ``units = b·⌈M/TM⌉·⌈N/TN⌉·s``; FLOPs and bytes are ``b`` times one GEMM's, and the latency is
   paid once. A batch of small GEMMs fills the SMs that one of them leaves idle.

So the bandwidth a GEMM reaches depends on how much data it moves: a memory-bound GEMM of
``bytes`` runs at ``bytes / (bytes/B + latency)``, half of ``B`` when its transfer takes as long as
the latency (about 4 MB on a V100), and less still when it has too few tiles to occupy every SM.

``f`` follows the operand reuse of a tile, ``r = TM·TN/(TM+TN)`` (half the FLOPs per operand
element loaded): ``f = r/(r + r0)``, normalised to 1 for 256×128. This reproduces NVIDIA's ordering
of tile efficiency (256×128 > 128×128 > 256×64 > 128×64 > 64×64). The reuse a tile needs grows
with how fast the math is compared with memory, so ``r0 = c · P/B``: ``c`` times the device's
ridge point (FLOP/byte) for the math dtype. On a V100 the Tensor Cores (ridge ≈ 139) need about
eight times the reuse of the FP32 units (ridge ≈ 18). The constants of
:class:`GemmModel` (``c``, ``β``, latency) were fitted on half of Baidu DeepBench's published V100
GEMMs (``scripts/fit_gemm_model.py``); :func:`perfkit.validation.validation_table` reports the
other half and the P100. (DeepBench's unaligned dimensions are none of its operands' leading
dimensions in FP16 — its FP16 sheet padded M 5124 → 5128 and 35 → 40 — and FP32 pays no alignment
penalty, so its rows are unaffected by item 5.)

The prediction is never below the plain roofline floor ``max(flops / peak, bytes / bandwidth)``
with datasheet numbers, which :class:`GemmPrediction` keeps as ``floor_s``. Units: seconds,
FLOP/s, bytes/s.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ._validate import non_negative_number, positive_int, positive_number, tile_pair
from .achievable import AMD_FIT
from .architectures import family
from .ceilings import KERNEL_LATENCY_S, Ceilings, gemm_latency_s, resolve_ceilings, unaligned_slowdown_for
from .devices import DeviceSpec, resolve_spec
from .dtypes import canonical_dtype, itemsize, output_itemsize, scale_itemsize
from .gemm_alignment import check_layout, narrowest_alignment
from .quantization import alignment, cdiv
from .roofline import gemm_bytes, gemm_flops

__all__ = ["CANDIDATE_TILES", "DEFAULT_MODEL", "FAMILY_MODELS", "GemmModel", "GemmPrediction", "REFERENCE_REUSE_HALF",
           "SPLIT_K_IN_KERNEL", "TILE_SHAPE_FACTORS", "explain_gemm", "predict_gemm_time", "prediction_error",
           "shape_factor"]

#: Tiles the automatic choice tries, largest first (ties go to the earlier one).
CANDIDATE_TILES: tuple[tuple[int, int], ...] = (
    (256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64),
    (128, 32), (32, 128), (64, 32), (32, 64), (32, 32),
)

#: K slices the automatic choice tries (1 = no split-K).
SPLITS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)

#: Devices whose libraries reduce split-K partial sums inside the GEMM kernel (Hopper: cuBLAS 12's
#: stream-K and in-place split-K reductions), so split-K pays one kernel latency, not two. Chosen on
#: the *fit* half of OpenXLA's published H100 BF16 rows (90th percentile of |error| 22 % → 17 %;
#: held out 24 % → 18 %); DeepBench's V100 and P100 (cuBLAS 10.1 and 8) keep the second kernel.
SPLIT_K_IN_KERNEL: frozenset[str] = frozenset({"H100-SXM", "H100-PCIe", "H200", "H800"})
# Blackwell (cuBLAS 12.8+, the same stream-K machinery) is assumed to do the same; no published Blackwell
# GEMM table with split-K shapes exists to check it. AMD's libraries were fitted with the second kernel
# (perfkit.achievable.AMD_FIT).
SPLIT_K_IN_KERNEL |= frozenset({"B200", "GB200", "B300", "GB300"})


@dataclass(frozen=True)
class GemmModel:
    """The model's constants. Defaults: fitted on DeepBench's V100 GEMMs (see the module docstring).

    - ``reuse_per_ridge`` (``c``): the tile reuse at which a tile runs at half its best speed,
      ``r0 = c · P/B`` elements, in units of the ridge point ``P/B`` (FLOP/byte) of the device
      and math dtype;
    - ``sm_bandwidth_share`` (``β``): how many times its fair share of bandwidth one SM can draw;
    - ``latency_s`` (seconds): the fixed cost of a kernel: launch, ramp-up and drain;
    - ``min_split_k``: the shortest K slice split-K makes (elements).
    """

    reuse_per_ridge: float = 1.0
    sm_bandwidth_share: float = 1.0
    latency_s: float = KERNEL_LATENCY_S
    min_split_k: int = 256

    def __post_init__(self) -> None:
        positive_number("reuse_per_ridge", self.reuse_per_ridge)
        positive_number("sm_bandwidth_share", self.sm_bandwidth_share)
        non_negative_number("latency_s", self.latency_s, "seconds")
        positive_int("min_split_k", self.min_split_k)


    def reuse_half(self, flop_s: float, bandwidth: float) -> float:
        """``r0`` in elements for a math throughput ``flop_s`` (FLOP/s) and a bandwidth (bytes/s)."""
        return self.reuse_per_ridge * positive_number("flop_s", flop_s) / positive_number("bandwidth", bandwidth)


DEFAULT_MODEL = GemmModel()

#: Per architecture family, the model's constants where they differ from :data:`DEFAULT_MODEL`: CDNA's tile
#: reuse (:data:`perfkit.achievable.AMD_FIT`; CDNA 3 assumed from CDNA 4). Blackwell's 2-SM MMA runs a
#: 256×256 tile on a pair of SMs, which per SM is the 256×128 tile the candidates hold; CDNA's 8 dies take
#: work-groups round robin, so a wave of ``T`` tiles over 8 dies of ``n`` CUs, ⌈⌈T/8⌉/n⌉, is ⌈T/(8n)⌉: the
#: same waves as one pool of CUs.
FAMILY_MODELS: dict[str, GemmModel] = {
    f: GemmModel(reuse_per_ridge=AMD_FIT["reuse_per_ridge"]) for f in ("cdna3", "cdna4")}

#: The ``r0`` of :data:`TILE_SHAPE_FACTORS`: a V100's FP32 units (14.8 TFLOP/s over 810 GB/s).
REFERENCE_REUSE_HALF = 16.0


def shape_factor(tile: tuple[int, int], reuse_half: float = REFERENCE_REUSE_HALF) -> float:
    """Relative speed of a ``(TM, TN)`` tile, 1.0 for 256×128: ``f = r/(r + r0)`` normalised, ``r = TM·TN/(TM+TN)``.

    ``reuse_half`` is ``r0`` in elements; :func:`explain_gemm` takes it from :class:`GemmModel`.
    """
    tm, tn = tile_pair("tile", tile)
    reuse_half = positive_number("reuse_half", reuse_half)
    r, best = tm * tn / (tm + tn), 256 * 128 / 384
    return min(1.0, (r / (r + reuse_half)) / (best / (best + reuse_half)))


#: :func:`shape_factor` of every candidate tile at :data:`REFERENCE_REUSE_HALF` (a V100's FP32 units);
#: a faster math dtype has a larger ``r0``, which slows small tiles more.
TILE_SHAPE_FACTORS: dict[tuple[int, int], float] = {t: shape_factor(t) for t in CANDIDATE_TILES}


@dataclass(frozen=True)
class GemmPrediction:
    """What :func:`explain_gemm` predicts for one GEMM, and why. Times in seconds."""

    M: int
    N: int
    K: int
    dtype: str
    device: str  # spec.label
    tile: tuple[int, int]  # (TM, TN), chosen or given
    tiles: int  # output tiles of all ``batch`` GEMMs: batch·⌈M/TM⌉·⌈N/TN⌉
    waves: int
    utilization: float  # units / (waves·wave_size): how full the waves are
    tile_efficiency: float  # M·N / (tiles·TM·TN): useful fraction of the launched tile work
    shape_factor: float  # the tile's modelled relative speed (shape_factor)
    floor_s: float  # plain roofline with datasheet numbers: max(flops/peak, bytes/bandwidth)
    math_s: float  # waves × a unit's math time (× the alignment slowdown; + writing C with a serial epilogue)
    memory_s: float  # max(bytes / bandwidth, operands / stream bandwidth, waves × a unit's operand share time)
    predicted_s: float  # max(math_s, memory_s) + latency
    bound: str  # "math", "memory" or "latency"
    aligned: bool  # M, N and K all multiples of alignment(dtype)
    launch_overhead_s: float = 0.0  # the latency added (twice with a split-K second kernel)
    split_k: int = 1  # K slices
    math_dtype: str = ""  # the dtype whose throughput bounds the math
    flop_s_ceiling: float = 0.0  # achievable FLOP/s used
    bandwidth_ceiling: float = 0.0  # achievable bytes/s used
    ceilings_source: str = ""  # where the ceilings come from
    reuse_half: float = 0.0  # r0 in elements: the tile reuse at half speed (c · flop_s / bandwidth)
    batch: int = 1  # GEMMs of this shape in the one launch
    layout: str = "NN"  # which dimension of A, B (and C) is contiguous (perfkit.gemm_alignment)
    alignment_bytes: int = 16  # bytes the worst-aligned leading dimension is aligned to (16: all)
    alignment_slowdown: float = 1.0  # the fallback kernel's slowdown that applied (1: none)
    stream_bandwidth: float = 0.0  # bytes/s the kernel streams its operands A and B at (≤ bandwidth_ceiling)

    @property
    def achieved_flop_s(self) -> float:
        """Predicted throughput in FLOP/s: ``batch·2·M·N·K / predicted_s``."""
        return self.batch * gemm_flops(self.M, self.N, self.K) / self.predicted_s


def _factor_table(shape_factors: Mapping | None) -> dict[tuple[int, int], float] | None:
    if shape_factors is None:
        return None
    if not isinstance(shape_factors, Mapping) or not shape_factors:
        raise TypeError("shape_factors must be a non-empty mapping of (TM, TN) tiles to factors in (0, 1], "
                        f"got {shape_factors!r}")
    table = {}
    for t, f in shape_factors.items():
        t = tile_pair("shape_factors key", t)
        f = positive_number(f"shape_factors[{t}]", f)
        if f > 1:
            raise ValueError(f"shape_factors[{t}] must be a number in (0, 1], got {f!r}")
        table[t] = f
    return table


def _unit_times(tm, tn, k, size, rows, cols, peak_per_unit, bw_per_unit, factor):
    """Seconds for one work unit's math, and for its share of the operands at its share of bandwidth."""
    share = (tm * k / cols + tn * k / rows) * size
    return 2 * tm * tn * k / peak_per_unit / factor, share / bw_per_unit


def explain_gemm(M: int, N: int, K: int, dtype: Any, spec: str | DeviceSpec, tile: tuple[int, int] | None = None, *,
                 blocks_per_sm: int = 1, launch_overhead_s: float | None = None,
                 shape_factors: Mapping[tuple[int, int], float] | None = None, math_dtype: Any = None,
                 accumulate: bool = False, split_k: int | None = None, ceilings: Ceilings | str | None = None,
                 model: GemmModel | None = None, batch: int = 1, layout: str = "NN") -> GemmPrediction:
    """Predict an M×N×K GEMM on ``spec`` (a DeviceSpec or a name such as ``"H100-SXM"``) and say why
    (the model is in the module docstring).

    - ``dtype``: the storage dtype of A and B (int8 writes an int32 C, float8 a 2-byte C);
      ``math_dtype`` (default ``dtype``): the dtype whose throughput bounds the math, e.g.
      ``"float32"`` for fp16 storage with fp32 math (the P100's "pseudo FP16").
    - ``tile=(TM, TN)`` forces a tile and, unless ``split_k`` says otherwise, no split-K (a forced
      tile is a hand-written kernel); ``None`` picks the fastest candidate tile and split.
    - ``accumulate``: C is read as well as written (``beta ≠ 0``).
    - ``ceilings``: ``None`` or ``"achievable"`` (the spec's own, ``spec.ceilings``), ``"default"``,
      ``"datasheet"`` or a :class:`~perfkit.ceilings.Ceilings`.
    - ``launch_overhead_s`` (seconds, ≥ 0) replaces the model's latency (and the ceilings' extra
      fixed cost); without it, a measured ``gemm_latency_s`` on the ceilings (a calibration's)
      replaces ``model.latency_s``; ``shape_factors`` maps tiles to factors in (0, 1] replacing
      :func:`shape_factor` (and the candidate tiles).
    - ``batch``: how many M×N×K GEMMs run in the one launch (a batched or grouped GEMM); their
      tiles share the waves, FLOPs and bytes are ``batch`` times one GEMM's, the latency is paid
      once. ``predicted_s`` is the time of all of them; ``batch=1`` is one plain GEMM.
    - ``layout``: which dimension of each operand is contiguous (:mod:`perfkit.gemm_alignment`; "NN",
      ``torch.matmul`` of contiguous tensors; "" unknown: M, N and K all count). When the worst-aligned
      leading dimension is not a multiple of 16 bytes, the GEMM runs the library's fallback kernel:
      its math time is multiplied by the ceilings' unaligned slowdown for that alignment
      (:func:`perfkit.ceilings.unaligned_slowdown_for`).
    """
    M, N, K = positive_int("M", M), positive_int("N", N), positive_int("K", K)
    batch = positive_int("batch", batch)
    dtype = canonical_dtype(dtype)
    math_dtype = dtype if math_dtype is None else canonical_dtype(math_dtype)
    layout = check_layout(layout)
    spec = resolve_spec(spec, none_ok=False)
    if not spec.mem_bandwidth:
        raise LookupError(f"memory bandwidth of {spec.name} is unknown, so it has no roofline")
    if not spec.sms:
        raise LookupError(f"the SM count of {spec.name} is unknown, so waves cannot be modelled")
    model = FAMILY_MODELS.get(family(spec), DEFAULT_MODEL) if model is None else model
    if not isinstance(model, GemmModel):
        raise TypeError(f"model must be a GemmModel or None, got {model!r}")
    blocks_per_sm = positive_int("blocks_per_sm", blocks_per_sm)
    latency = None if launch_overhead_s is None else non_negative_number(
        "launch_overhead_s", launch_overhead_s, "seconds")
    if not isinstance(accumulate, bool):
        raise TypeError(f"accumulate must be True or False, got {accumulate!r}")
    table = _factor_table(shape_factors)
    if tile is not None:
        tile = tile_pair("tile", tile)
    auto_split = split_k is None and tile is None
    splits = SPLITS if auto_split else (positive_int("split_k", 1 if split_k is None else split_k),)
    if splits[0] > K:
        raise ValueError(f"split_k must be at most K={K} (each slice needs at least one k), got {split_k}")
    tiles = [tile] if tile is not None else list(table or CANDIDATE_TILES)
    cl = resolve_ceilings(spec, ceilings)
    if latency is None:
        latency = gemm_latency_s(cl, model.latency_s) + cl.extra_latency_s.get(math_dtype, 0.0)
    split_launches = 1 if spec.name in SPLIT_K_IN_KERNEL else 2
    peak_sheet = spec.peak_flop_s(math_dtype)
    peak = min(cl.flop_s_for(math_dtype), peak_sheet)
    bw = min(cl.bandwidth, spec.mem_bandwidth)
    r0 = model.reuse_half(peak, bw)
    a = alignment(dtype)
    aligned = M % a == 0 and N % a == 0 and K % a == 0
    align_bytes = narrowest_alignment(M, N, K, dtype, layout)
    slowdown = unaligned_slowdown_for(cl, math_dtype, align_bytes)
    sm_bw = cl.gemm_sm_bandwidth or float("inf")  # what one SM's GEMM pipeline streams (bytes/s)
    bw_gemm = min(bw, sm_bw * spec.sms)
    serial = math_dtype in cl.serial_epilogue

    flops = batch * gemm_flops(M, N, K)
    size, out_size = itemsize(dtype), output_itemsize(dtype)
    in_bytes = batch * (size + scale_itemsize(dtype)) * (M * K + K * N)  # operands (and block scales) streamed in
    base_bytes = in_bytes + batch * out_size * M * N * (2 if accumulate else 1)
    floor_s = max(flops / peak_sheet, batch * gemm_bytes(M, N, K, dtype) / spec.mem_bandwidth)
    wave = spec.sms * blocks_per_sm
    best = None
    for t in tiles:
        tm, tn = t
        factor = (table or {}).get(t) or shape_factor(t, r0)
        rows, cols = cdiv(M, tm), cdiv(N, tn)
        n_tiles = batch * rows * cols
        for s in splits:
            k = cdiv(K, s)
            if auto_split and s > 1 and (k < model.min_split_k or s > K):
                continue
            waves = cdiv(n_tiles * s, wave)
            unit_math, unit_memory = _unit_times(tm, tn, k, size, rows, cols, peak / wave,
                                                 model.sm_bandwidth_share * bw / wave, factor)
            math_s = max(waves * unit_math, flops / peak) * slowdown
            nbytes = base_bytes + (8 * batch * M * N * s if s > 1 else 0)  # fp32 partials, written and read
            memory_s = max(in_bytes / bw_gemm, nbytes / bw, waves * unit_memory)
            overhead = latency * (split_launches if s > 1 else 1)
            if serial:  # C (and split-K partials) written after the main loop, not while it runs: both add it
                out_s = (nbytes - in_bytes) / bw
                math_s, memory_s = math_s + out_s, max(in_bytes / bw_gemm, waves * unit_memory) + out_s
            total = max(math_s, memory_s) + overhead
            if best is None or total < best[0]:
                best = (total, t, s, n_tiles, waves, factor, math_s, memory_s, overhead)
    total, t, s, n_tiles, waves, factor, math_s, memory_s, overhead = best
    predicted = max(total, floor_s)
    bound = "latency" if overhead > max(math_s, memory_s) else "math" if math_s >= memory_s else "memory"
    return GemmPrediction(
        M=M, N=N, K=K, dtype=dtype, device=spec.label, tile=t, tiles=n_tiles, waves=waves,
        utilization=n_tiles * s / (waves * wave), tile_efficiency=batch * M * N / (n_tiles * t[0] * t[1]),
        shape_factor=factor, floor_s=floor_s, math_s=math_s, memory_s=memory_s, predicted_s=predicted,
        bound=bound, aligned=aligned, launch_overhead_s=overhead, split_k=s, math_dtype=math_dtype,
        flop_s_ceiling=peak, bandwidth_ceiling=bw, ceilings_source=cl.source, reuse_half=r0, batch=batch,
        layout=layout, alignment_bytes=align_bytes, alignment_slowdown=slowdown, stream_bandwidth=bw_gemm,
    )


def predict_gemm_time(M: int, N: int, K: int, dtype: Any, spec: str | DeviceSpec, tile: tuple[int, int] | None = None,
                      **options) -> float:
    """Predicted time of an M×N×K GEMM in seconds: ``explain_gemm(...).predicted_s`` (same options;
    ``batch=b`` gives the time of b such GEMMs in one launch)."""
    return explain_gemm(M, N, K, dtype, spec, tile, **options).predicted_s


def prediction_error(measured_s, predicted_s) -> dict:
    """Relative error of predictions against measurements (both in seconds, array-like).

    Returns ``{"median_abs", "p90_abs", "median", "optimistic", "n"}`` where errors are
    ``predicted/measured − 1`` (negative: the model is optimistic; ``optimistic`` is the share of
    such pairs). Pairs with a missing prediction are ignored.
    """
    m = np.asarray(measured_s, dtype=float)
    p = np.asarray(predicted_s, dtype=float)
    keep = np.isfinite(m) & np.isfinite(p) & (m > 0)
    if not keep.any():
        raise ValueError("prediction_error needs at least one pair of finite measured_s > 0 and predicted_s")
    e = p[keep] / m[keep] - 1
    return {"median_abs": float(np.median(np.abs(e))), "p90_abs": float(np.percentile(np.abs(e), 90)),
            "median": float(np.median(e)), "optimistic": float(np.mean(e < 0)), "n": int(keep.sum())}


def __getattr__(name: str):
    if name == "TILE_EFFICIENCY":  # the table's old name
        warnings.warn("perfkit.gemm_model.TILE_EFFICIENCY is now TILE_SHAPE_FACTORS", DeprecationWarning, stacklevel=2)
        return TILE_SHAPE_FACTORS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
