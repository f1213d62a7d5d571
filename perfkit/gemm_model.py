"""The GEMM time model: the roofline plus tile and wave quantization.

The output is cut into ``tile=(TM, TN)`` tiles, one thread block each, that run in waves of
``SMs × blocks_per_sm``. Each wave costs as much as a full wave of full tiles over the whole K
(no split-K), so:

- per-wave time = ``2·TM·TN·K / (peak_flops / (SMs·blocks_per_sm)) / shape_factor``;
- ``math_s`` = waves × per-wave time, ``memory_s`` = :func:`~perfkit.roofline.gemm_bytes` / bandwidth;
- predicted = ``max(math_s, memory_s) + launch_overhead_s``.

Because waves·wave_size·TM·TN ≥ M·N and shape factors are ≤ 1, the prediction is never
below the roofline floor ``max(flops / peak, bytes / bandwidth)``. Misalignment (dimensions not a
multiple of 16 bytes) is reported in ``aligned`` but not penalised, and neither split-K nor tiles
smaller than 64×64 are modelled, so tiny, latency-bound GEMMs come out pessimistic.

Units: seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ._validate import non_negative_number, positive_int, positive_number, tile_pair
from .devices import DeviceSpec
from .dtypes import canonical_dtype
from .quantization import alignment, wave_quantization
from .roofline import gemm_bytes, gemm_flops, roofline_time

__all__ = ["CANDIDATE_TILES", "TILE_SHAPE_FACTORS", "GemmPrediction", "explain_gemm", "predict_gemm_time",
           "prediction_error"]

#: Relative speed of each tile shape (1.0 = the fastest): a **modelling assumption**, not a
#: measurement. Not to be confused with a prediction's ``tile_efficiency``, the useful fraction of
#: the launched tile work. The
#: ordering follows NVIDIA's *Matrix Multiplication Background* guide ("Typical Tile Dimensions
#: In cuBLAS And Performance"): 256×128 and 128×256 most efficient, then 128×128, then 256×64 and
#: 64×256, then 128×64 and 64×128, and 64×64 least efficient (larger tiles reuse more data). The
#: values are ours; pass ``shape_factors=`` to use others.
TILE_SHAPE_FACTORS: dict[tuple[int, int], float] = {
    (256, 128): 1.0, (128, 256): 1.0,
    (128, 128): 0.92,
    (256, 64): 0.85, (64, 256): 0.85,
    (128, 64): 0.78, (64, 128): 0.78,
    (64, 64): 0.65,
}

#: Tiles the automatic choice tries, most efficient first (ties go to the earlier one).
CANDIDATE_TILES: tuple[tuple[int, int], ...] = tuple(TILE_SHAPE_FACTORS)


@dataclass(frozen=True)
class GemmPrediction:
    """What :func:`explain_gemm` predicts for one GEMM, and why. Times in seconds."""

    M: int
    N: int
    K: int
    dtype: str
    device: str  # spec.label
    tile: tuple[int, int]  # (TM, TN), chosen or given
    tiles: int
    waves: int
    utilization: float  # tiles / (waves·wave_size): how full the waves are
    tile_efficiency: float  # M·N / (tiles·TM·TN): useful fraction of the launched tile work
    shape_factor: float  # the modelled relative speed of this tile shape (TILE_SHAPE_FACTORS)
    floor_s: float  # roofline time: max(flops/peak, bytes/bandwidth), no quantization, no overhead
    math_s: float  # waves × per-wave time
    memory_s: float  # bytes / bandwidth
    predicted_s: float  # max(math_s, memory_s) + launch overhead
    bound: str  # "math" or "memory"
    aligned: bool  # M, N and K all multiples of alignment(dtype)
    launch_overhead_s: float = 0.0

    @property
    def achieved_flops(self) -> float:
        """Predicted throughput in FLOP/s: ``2·M·N·K / predicted_s``."""
        return gemm_flops(self.M, self.N, self.K) / self.predicted_s


def _factor_table(shape_factors: Mapping | None) -> dict[tuple[int, int], float]:
    if shape_factors is None:
        return TILE_SHAPE_FACTORS
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


def _explain(M, N, K, dtype, spec, tile, blocks_per_sm, overhead, factor) -> GemmPrediction:
    peak = spec.peak_flops(dtype)
    if not spec.sms:
        raise LookupError(f"the SM count of {spec.name} is unknown, so waves cannot be modelled")
    flops, nbytes = gemm_flops(M, N, K), gemm_bytes(M, N, K, dtype)
    floor_s, _ = roofline_time(flops, nbytes, spec, dtype)
    wq = wave_quantization(M, N, tile, spec.sms, blocks_per_sm)
    tm, tn = wq.tile
    wave_s = 2 * tm * tn * K / (peak / wq.wave_size) / factor
    # waves·wave_s ≥ flops/peak mathematically; the max only absorbs rounding at full waves.
    math_s = max(wq.waves * wave_s, flops / peak)
    memory_s = nbytes / spec.mem_bandwidth
    predicted = max(math_s, memory_s) + overhead
    assert predicted >= floor_s, "the model must never beat the roofline"
    a = alignment(dtype)
    return GemmPrediction(
        M=M, N=N, K=K, dtype=dtype, device=spec.label, tile=wq.tile, tiles=wq.tiles, waves=wq.waves,
        utilization=wq.utilization, tile_efficiency=M * N / (wq.tiles * tm * tn), shape_factor=factor,
        floor_s=floor_s, math_s=math_s, memory_s=memory_s, predicted_s=predicted,
        bound="math" if math_s >= memory_s else "memory",
        aligned=M % a == 0 and N % a == 0 and K % a == 0, launch_overhead_s=overhead,
    )


def explain_gemm(M: int, N: int, K: int, dtype: Any, spec: DeviceSpec, tile: tuple[int, int] | None = None, *,
                 blocks_per_sm: int = 1, launch_overhead_s: float = 3e-6,
                 shape_factors: Mapping[tuple[int, int], float] | None = None) -> GemmPrediction:
    """Predict an M×N×K GEMM on ``spec`` and say why (see the module docstring for the model).

    ``tile=(TM, TN)`` forces a tile; ``None`` picks, like a library heuristic, the candidate in
    ``shape_factors`` (default :data:`TILE_SHAPE_FACTORS`) with the smallest predicted time. The
    per-shape factors are modelling assumptions; a forced tile not in the table gets 1.0.
    ``launch_overhead_s`` (seconds, ≥ 0) is added once.
    """
    M, N, K = positive_int("M", M), positive_int("N", N), positive_int("K", K)
    dtype = canonical_dtype(dtype)
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (e.g. device_spec('H100-SXM')), got {spec!r}")
    if not spec.mem_bandwidth:
        raise LookupError(f"memory bandwidth of {spec.name} is unknown, so it has no roofline")
    blocks_per_sm = positive_int("blocks_per_sm", blocks_per_sm)
    overhead = non_negative_number("launch_overhead_s", launch_overhead_s, "seconds")
    table = _factor_table(shape_factors)
    args = (M, N, K, dtype, spec)
    if tile is not None:
        tile = tile_pair("tile", tile)
        return _explain(*args, tile, blocks_per_sm, overhead, table.get(tile, 1.0))
    candidates = [_explain(*args, t, blocks_per_sm, overhead, f) for t, f in table.items()]
    return min(candidates, key=lambda p: p.predicted_s)  # first of equals: the table's order


def predict_gemm_time(M: int, N: int, K: int, dtype: Any, spec: DeviceSpec, tile: tuple[int, int] | None = None, *,
                      blocks_per_sm: int = 1, launch_overhead_s: float = 3e-6,
                      shape_factors: Mapping[tuple[int, int], float] | None = None) -> float:
    """Predicted time of an M×N×K GEMM in seconds: ``explain_gemm(...).predicted_s``."""
    return explain_gemm(M, N, K, dtype, spec, tile, blocks_per_sm=blocks_per_sm,
                        launch_overhead_s=launch_overhead_s, shape_factors=shape_factors).predicted_s


def prediction_error(measured_s, predicted_s) -> dict:
    """Relative error of predictions against measurements (both in seconds, array-like).

    Returns ``{"median_abs", "p90_abs", "median", "n"}`` where errors are ``predicted/measured − 1``
    (negative: the model is optimistic). Pairs with a missing prediction are ignored.
    """
    import numpy as np

    m = np.asarray(measured_s, dtype=float)
    p = np.asarray(predicted_s, dtype=float)
    keep = np.isfinite(m) & np.isfinite(p) & (m > 0)
    if not keep.any():
        raise ValueError("prediction_error needs at least one pair of finite measured_s > 0 and predicted_s")
    e = p[keep] / m[keep] - 1
    return {"median_abs": float(np.median(np.abs(e))), "p90_abs": float(np.percentile(np.abs(e), 90)),
            "median": float(np.median(e)), "n": int(keep.sum())}
