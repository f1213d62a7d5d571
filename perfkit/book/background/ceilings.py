"""Measured ceilings: the best matmul throughput per dtype and the device-to-device copy bandwidth.

Vendor peaks are upper bounds nobody reaches; these are what a program can actually get, in the
spirit of Stas Bekman's MAMF finder ("maximum achievable matmul FLOPS"): a search over large shapes,
random normal inputs, the best median over the search. The best values of these frames are
:func:`perfkit.ceilings.measured_ceilings` (pure), attached to a spec by :func:`perfkit.calibrated`.
"""

from __future__ import annotations

import pandas as pd

from ..._validate import dtype_names, positive_ints, sequence_of
from ...matmul import matmul_fn, supports_dtype
from ...placement import ensure_fits, resolve_device, timer
from ...units import MiB
from ...experiments.measure import gemm_bytes_needed, gemm_row, sweep, timing_row
from ...experiments.registry import register

#: Shapes searched per dtype on a GPU (square, wide, long-K; MAMF's best H100 shape is 2048×2048×13312).
CEILING_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 8192, 16384),
                  (2048, 2048, 13312), (4096, 8192, 16384), (12288, 12288, 12288), (6144, 16384, 4096))


@register("ceiling_matmul", "Best achievable matmul throughput per dtype: a search over large shapes "
          "(in the spirit of the MAMF finder); the best row per dtype is the measured ceiling",
          {"M": "rows of A", "N": "columns of B", "K": "inner dimension", "dtype": "data type",
           "time_s": "median duration, seconds", "iqr_s": "inter-quartile range, seconds",
           "tflops": "2·M·N·K / time_s, 1e12 FLOP/s (OP/s for int8)"},
          needs=("cuda",))
def ceiling_matmul(*, dtypes=("float32", "tf32", "float16", "bfloat16", "float8", "int8"), shapes=None,
                   device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Time each dtype on each (M, N, K) in ``shapes`` (default :data:`CEILING_SHAPES`); dtypes this
    device cannot run are skipped."""
    dtypes = dtype_names("dtypes", dtypes)
    if shapes is not None:
        shapes = sequence_of("shapes", shapes, lambda n, v: positive_ints(n, v, 3, "(M, N, K)"))
    device = resolve_device(device)
    if shapes is None:
        shapes = CEILING_SHAPES
        if quick or device == "cpu":
            shapes = ((256, 256, 256), (512, 512, 512)) if quick else ((1024, 1024, 1024), (2048, 2048, 2048))
    dts = [d for d in dtypes if supports_dtype(d, device)]
    points = [(d, s) for d in dts for s in shapes]
    ensure_fits(max((gemm_bytes_needed(*s, d) for d, s in points), default=0), device, what="ceiling_matmul")

    def measure(p):
        d, (M, N, K) = p
        return gemm_row(M, N, K, d, timer(matmul_fn(M, N, K, d, device), device=device, label=f"gemm {M}×{N}×{K} {d}"))

    return sweep(points, measure, on_row=on_row, progress=progress, desc="matmul ceiling")


@register("ceiling_copy", "Device-to-device copy bandwidth (bytes read + written) as the copy grows; "
          "the best large-copy row is the measured memory ceiling",
          {"bytes": "size of the copied tensor, bytes", "bytes_moved": "bytes read + written = 2 × bytes",
           "time_s": "median duration, seconds", "iqr_s": "inter-quartile range, seconds",
           "gbps": "bytes_moved / time_s, 1e9 bytes/s"},
          needs=("cuda",))
def ceiling_copy(*, device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Copy tensors of 1 MiB … 4 GiB (CPU and quick: up to 256 MiB) with ``Tensor.copy_``."""
    import torch

    device = resolve_device(device)
    top = 28 if quick or device == "cpu" else 32
    sizes = [1 << p for p in range(20, top + 1, 2)]
    ensure_fits(2 * max(sizes), device, what="ceiling_copy")

    def measure(nbytes):
        src = torch.ones(nbytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        m = timer(lambda: dst.copy_(src), device=device, label=f"copy {nbytes / MiB:.0f} MiB")
        return {"bytes": nbytes, "bytes_moved": 2 * nbytes, **timing_row(m), "gbps": m.gbps(2 * nbytes)}

    return sweep(sizes, measure, on_row=on_row, progress=progress, desc="copy ceiling")
