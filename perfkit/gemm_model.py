"""A GEMM time model: the roofline plus tile and wave quantization.

The output is cut into ``tile=(TM, TN)`` tiles, one thread block each, that run in waves of
``SMs × blocks_per_sm``. Each wave costs as much as a full wave of full tiles over the whole K
(no split-K), so:

- per-wave time = ``2·TM·TN·K / (peak_flops / (SMs·blocks_per_sm)) / shape_efficiency``;
- ``math_s`` = waves × per-wave time, ``memory_s`` = :func:`~perfkit.roofline.gemm_bytes` / bandwidth;
- predicted = ``max(math_s, memory_s) + launch_overhead_s``.

Because waves·wave_size·TM·TN ≥ M·N and shape efficiencies are ≤ 1, the prediction is never
below the roofline floor ``max(flops / peak, bytes / bandwidth)``. Misalignment (dimensions not a
multiple of 16 bytes) is reported in ``aligned`` but not penalised, and neither split-K nor tiles
smaller than 64×64 are modelled, so tiny, latency-bound GEMMs come out pessimistic.

Units: seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ._validate import positive_int, tile_pair
from .devices import DeviceSpec
from .dtypes import canonical_dtype
from .quantization import alignment, wave_quantization
from .roofline import gemm_bytes, gemm_flops, roofline_time

__all__ = ["CANDIDATE_TILES", "TILE_EFFICIENCY", "GemmPrediction", "explain_gemm", "predict_gemm_time",
           "prediction_error"]

#: Relative efficiency of each tile shape: a **modelling assumption**, not a measurement. The
#: ordering follows NVIDIA's *Matrix Multiplication Background* guide ("Typical Tile Dimensions
#: In cuBLAS And Performance"): 256×128 and 128×256 most efficient, then 128×128, then 256×64 and
#: 64×256, then 128×64 and 64×128, and 64×64 least efficient (larger tiles reuse more data). The
#: values are ours; pass ``tile_efficiency=`` to use others.
TILE_EFFICIENCY: dict[tuple[int, int], float] = {
    (256, 128): 1.0, (128, 256): 1.0,
    (128, 128): 0.92,
    (256, 64): 0.85, (64, 256): 0.85,
    (128, 64): 0.78, (64, 128): 0.78,
    (64, 64): 0.65,
}

#: Tiles the automatic choice tries, most efficient first (ties go to the earlier one).
CANDIDATE_TILES: tuple[tuple[int, int], ...] = tuple(TILE_EFFICIENCY)


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
    shape_efficiency: float  # the modelled efficiency factor of this tile shape
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


def _efficiency_table(tile_efficiency: Mapping | None) -> dict[tuple[int, int], float]:
    if tile_efficiency is None:
        return TILE_EFFICIENCY
    if not isinstance(tile_efficiency, Mapping) or not tile_efficiency:
        raise TypeError("tile_efficiency must be a non-empty mapping of (TM, TN) tiles to factors in (0, 1], "
                        f"got {tile_efficiency!r}")
    table = {}
    for t, f in tile_efficiency.items():
        t = tile_pair("tile_efficiency key", t)
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise ValueError(f"tile_efficiency[{t}] must be a number in (0, 1], got {f!r}")
        table[t] = float(f)
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
        utilization=wq.utilization, tile_efficiency=M * N / (wq.tiles * tm * tn), shape_efficiency=factor,
        floor_s=floor_s, math_s=math_s, memory_s=memory_s, predicted_s=predicted,
        bound="math" if math_s >= memory_s else "memory",
        aligned=M % a == 0 and N % a == 0 and K % a == 0, launch_overhead_s=overhead,
    )


def explain_gemm(M: int, N: int, K: int, dtype: Any, spec: DeviceSpec, tile: tuple[int, int] | None = None, *,
                 blocks_per_sm: int = 1, launch_overhead_s: float = 3e-6,
                 tile_efficiency: Mapping[tuple[int, int], float] | None = None) -> GemmPrediction:
    """Predict an M×N×K GEMM on ``spec`` and say why (see the module docstring for the model).

    ``tile=(TM, TN)`` forces a tile; ``None`` picks, like a library heuristic, the candidate in
    ``tile_efficiency`` (default :data:`TILE_EFFICIENCY`) with the smallest predicted time. The
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
    if isinstance(launch_overhead_s, bool) or not isinstance(launch_overhead_s, (int, float)) \
            or not 0 <= launch_overhead_s < float("inf"):
        raise ValueError(f"launch_overhead_s must be a non-negative number of seconds, got {launch_overhead_s!r}")
    table = _efficiency_table(tile_efficiency)
    args = (M, N, K, dtype, spec)
    if tile is not None:
        tile = tile_pair("tile", tile)
        return _explain(*args, tile, blocks_per_sm, float(launch_overhead_s), table.get(tile, 1.0))
    candidates = [_explain(*args, t, blocks_per_sm, float(launch_overhead_s), f) for t, f in table.items()]
    return min(candidates, key=lambda p: p.predicted_s)  # first of equals: the table's order


def predict_gemm_time(M: int, N: int, K: int, dtype: Any, spec: DeviceSpec, tile: tuple[int, int] | None = None, *,
                      blocks_per_sm: int = 1, launch_overhead_s: float = 3e-6,
                      tile_efficiency: Mapping[tuple[int, int], float] | None = None) -> float:
    """Predicted time of an M×N×K GEMM in seconds: ``explain_gemm(...).predicted_s``."""
    return explain_gemm(M, N, K, dtype, spec, tile, blocks_per_sm=blocks_per_sm,
                        launch_overhead_s=launch_overhead_s, tile_efficiency=tile_efficiency).predicted_s


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
