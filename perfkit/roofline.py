"""The roofline: FLOPs, bytes, arithmetic intensity, and which of the two bounds an operation.

A function is math-limited when its arithmetic intensity (FLOP per byte moved) exceeds the device's
ops:byte ratio (peak FLOP/s ÷ memory bytes/s), and memory-limited otherwise; its time is about
``max(flops / peak, bytes / bandwidth)`` (NVIDIA, *GPU Performance Background*, "Understanding
Performance"). This is a first-order model: it ignores latency, caches and instruction overheads,
and assumes every input is read once and every output written once.

Units: FLOP, bytes, seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._validate import non_negative_number, positive_int, positive_number
from .devices import DeviceSpec, resolve_spec
from .dtypes import canonical_dtype, itemsize, output_itemsize, scale_itemsize
from .memory_model import layer_bytes

__all__ = [
    "Operation",
    "arithmetic_intensity",
    "attainable_flop_s",
    "batch_crossover",
    "gemm_bytes",
    "gemm_flops",
    "gemm_operation",
    "math_bound_batch",
    "nvidia_example_operations",
    "roofline_time",
]


def _bandwidth(spec: DeviceSpec) -> float:
    if not spec.mem_bandwidth:
        raise LookupError(f"memory bandwidth of {spec.name} is unknown, so it has no roofline")
    return float(spec.mem_bandwidth)


def gemm_flops(M: int, N: int, K: int) -> int:
    """FLOPs of an M×N×K GEMM: ``2·M·N·K`` (each multiply-add counts as two)."""
    M, N, K = positive_int("M", M), positive_int("N", N), positive_int("K", K)
    return 2 * M * N * K


def gemm_bytes(M: int, N: int, K: int, dtype: Any) -> int:
    """Bytes a GEMM must move if A (M×K), B (K×N) and C (M×N) each cross memory once.

    C has the output element size (:func:`~perfkit.dtypes.output_itemsize`: int32 for int8 inputs);
    block-scaled inputs (float6, float4) add their scales (:func:`~perfkit.dtypes.scale_itemsize`).
    """
    M, N, K = positive_int("M", M), positive_int("N", N), positive_int("K", K)
    return (itemsize(dtype) + scale_itemsize(dtype)) * (M * K + K * N) + output_itemsize(dtype) * M * N


def arithmetic_intensity(M: int, N: int, K: int, dtype: Any) -> float:
    """FLOP per byte of an M×N×K GEMM; in float16 this is ``M·N·K / (M·K + K·N + M·N)``.

    >>> round(arithmetic_intensity(8192, 128, 8192, "float16"), 1)
    124.1
    """
    return gemm_flops(M, N, K) / gemm_bytes(M, N, K, dtype)


def math_bound_batch(in_features: int, out_features: int, spec: str | DeviceSpec,
                     dtype: Any = "float16") -> int | None:
    """The smallest batch at which a linear layer's forward GEMM reaches ``spec``'s ridge point.

    The forward GEMM is M = ``out_features``, N = batch, K = ``in_features``; its intensity
    grows with the batch towards ``2·I·O / (s·I + s_out·O)`` FLOP/B (s: element bytes). Returns
    None when even that limit stays below the ridge (the layer is memory-bound at any batch).
    NVIDIA's V100 rule "batch greater than 128" is this number for 4096→4096 in float16 (149).

    >>> from perfkit.devices import device_spec
    >>> math_bound_batch(4096, 4096, device_spec("V100-SXM2"))
    149
    """
    I, O = positive_int("in_features", in_features), positive_int("out_features", out_features)
    ridge = resolve_spec(spec, none_ok=False).ops_per_byte(dtype)
    s, s_out = itemsize(dtype), output_itemsize(dtype)
    denominator = 2 * I * O - ridge * (s * I + s_out * O)
    if denominator <= 0:
        return None
    batch = max(1, int(np.ceil(ridge * s * I * O / denominator)))
    while batch > 1 and arithmetic_intensity(O, batch - 1, I, dtype) >= ridge:  # float rounding
        batch -= 1
    while arithmetic_intensity(O, batch, I, dtype) < ridge:
        batch += 1
    return batch


def batch_crossover(frame: pd.DataFrame) -> pd.DataFrame:
    """Where a layer's forward GEMM turns math-bound, measured: one row per (M, K, dtype) in ``frame``.

    Two asymptotes from the data: the flat time of small batches (``floor_s``, the sweep's fastest
    GEMM: the weights cross memory once) and the time of the best throughput, ``2·M·N·K /
    best_tflops``, which grows ∝ N. They meet at ``crossover_batch = floor_s · best / (2·M·K)``, the
    measured counterpart of :func:`math_bound_batch`. Columns: M, K, dtype, floor_s,
    best_tflops, best_batch, crossover_batch, max_batch. Works on ``fc_batch`` and published GEMMs.
    """
    rows = []
    for (M, K, dtype), g in frame.groupby(["M", "K", "dtype"], sort=False):
        floor_s, best = float(g["time_s"].min()), float(g["tflops"].max())
        rows.append({"M": M, "K": K, "dtype": dtype, "floor_s": floor_s, "best_tflops": best,
                     "best_batch": int(g.loc[g["tflops"].idxmax(), "N"]),
                     "crossover_batch": floor_s * best * 1e12 / (2 * M * K), "max_batch": int(g["N"].max())})
    return pd.DataFrame(rows, columns=["M", "K", "dtype", "floor_s", "best_tflops", "best_batch",
                                       "crossover_batch", "max_batch"])


@dataclass(frozen=True)
class Operation:
    """An operation reduced to what the roofline needs: FLOPs and bytes moved."""

    name: str
    flops: float
    bytes: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {self.name!r}")
        non_negative_number("flops", self.flops)
        if non_negative_number("bytes", self.bytes) == 0:
            raise ValueError("bytes must be > 0: an operation that moves no data has no intensity")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes


def gemm_operation(M: int, N: int, K: int, dtype: Any, name: str | None = None) -> Operation:
    """The :class:`Operation` of an M×N×K GEMM in ``dtype`` (named ``'GEMM M×N×K'`` by default)."""
    return Operation(name or f"GEMM {M}×{N}×{K}", gemm_flops(M, N, K), gemm_bytes(M, N, K, dtype))


def roofline_time(flops: float, bytes: float, spec: str | DeviceSpec, dtype: Any) -> tuple[float, str]:
    """Roofline time in seconds and the bound, ``'math'`` or ``'memory'``.

    Time is ``max(flops / peak_flop_s(dtype), bytes / mem_bandwidth)``: math and memory traffic are
    assumed to overlap perfectly. A tie counts as ``'math'``.
    """
    flops = non_negative_number("flops", flops)
    nbytes = non_negative_number("bytes", bytes)
    spec = resolve_spec(spec, none_ok=False)
    math_s = flops / spec.peak_flop_s(dtype)
    memory_s = nbytes / _bandwidth(spec)
    return (math_s, "math") if math_s >= memory_s else (memory_s, "memory")


def attainable_flop_s(intensity, spec: str | DeviceSpec, dtype: Any):
    """The roof: FLOP/s attainable at ``intensity`` (FLOP/byte), ``min(peak, intensity·bandwidth)``.

    ``intensity`` may be a number (returns a float) or an array of positive numbers (returns an array).
    """
    spec = resolve_spec(spec, none_ok=False)
    peak, bw = spec.peak_flop_s(dtype), _bandwidth(spec)
    if np.ndim(intensity) == 0:
        return min(peak, positive_number("intensity", intensity) * bw)
    x = np.asarray(intensity, dtype=float)
    if not np.all(x > 0):
        raise ValueError("intensity must hold only positive numbers of FLOP per byte")
    return np.minimum(peak, x * bw)


#: Elements in the activation tensor of the elementwise examples (64×1024×1024).
EXAMPLE_ELEMENTS = 64 * 1024 * 1024

#: FLOPs per element counted for layer normalization: mean (1 add), variance (subtract, square,
#: add: 3), normalize (subtract, multiply by the reciprocal std: 2), scale and shift (2). The
#: per-row reciprocal square root is negligible.
LAYER_NORM_FLOPS_PER_ELEMENT = 8


def nvidia_example_operations(dtype: Any = "float16") -> list[Operation]:
    """The operations of Table 1 of NVIDIA's *GPU Performance Background* guide.

    - Linear layer, 4096 outputs, 1024 inputs, batch 512 (GEMM M=4096, N=512, K=1024): 315 FLOP/B
      in float16.
    - The same at batch 1: ≈ 1 FLOP/B.
    - ReLU: 1 op per element, each element read and written once: 0.25 FLOP/B in float16
      (bytes from :func:`perfkit.memory_model.layer_bytes`, as for the next two).
    - Max pooling 3×3, stride 1, padding 1 (same-size output): 9 ops per output, one read and one
      write per element: 2.25 FLOP/B in float16.
    - Layer normalization: :data:`LAYER_NORM_FLOPS_PER_ELEMENT` (8) FLOPs per element, x read once
      and y written once: 2 FLOP/B in float16 (NVIDIA: "< 10").

    The elementwise operations act on a tensor of :data:`EXAMPLE_ELEMENTS` (64×1024×1024)
    elements; their intensities do not depend on that size. Wider dtypes scale the byte counts.
    """
    canonical_dtype(dtype)
    e = EXAMPLE_ELEMENTS
    return [
        gemm_operation(4096, 512, 1024, dtype, "Linear 4096×1024, batch 512"),
        gemm_operation(4096, 1, 1024, dtype, "Linear 4096×1024, batch 1"),
        Operation("ReLU", 1 * e, layer_bytes("relu", (e,), dtype)),
        Operation("Max pool 3×3, stride 1", 9 * e,
                  layer_bytes("maxpool", (64, 1, 1024, 1024), dtype, kernel_size=3, stride=1, padding=1,
                              indices_itemsize=0)),
        Operation("Layer norm", LAYER_NORM_FLOPS_PER_ELEMENT * e,
                  layer_bytes("layernorm", (64 * 1024, 1024), dtype, training=False, elementwise_affine=False)),
    ]
