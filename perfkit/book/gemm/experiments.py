"""GEMM experiments (the matrix-multiplication chapter): sizes, alignment, tiles, waves, transposes, small N.

Each function measures with :func:`perfkit.bench` and returns one row per measured GEMM with
``time_s`` (median seconds), ``tflops`` (2·M·N·K / time_s / 1e12), ``dtype`` and, where the model
applies, ``predicted_s`` from :func:`perfkit.gemm_model.predict_gemm_time`. cuBLAS runs through
``torch.matmul``; forced tiles run through :func:`perfkit.kernels.tiled_matmul` (Triton).
"""

from __future__ import annotations

import math

import pandas as pd

from ..._validate import dtype_name, dtype_names, positive_int, sequence_of, tile_pair
from ...dtypes import canonical_dtype
from ...kernels import tiled_matmul
from ...matmul import matmul_fn, matmul_operands, supports_dtype
from ...placement import ensure_fits, measured_on, resolve_device, timer
from ...quantization import alignment, wave_quantization
from ...roofline import arithmetic_intensity, gemm_bytes
from ...experiments.measure import gemm_bytes_needed, gemm_row, predicted_s, require_gpu, sweep
from ...experiments.registry import register

GEMM_COLUMNS = {
    "M": "rows of A and C", "N": "columns of B and C", "K": "inner dimension",
    "dtype": "data type of A and B", "time_s": "median duration of one GEMM, seconds",
    "iqr_s": "inter-quartile range of the samples, seconds",
    "tflops": "2·M·N·K / time_s, in 1e12 FLOP/s",
}

#: Dtypes the GEMM chapter compares (float8 only where the device supports it).
GEMM_DTYPES = ("float32", "tf32", "float16", "bfloat16", "float8")


def _dtypes(dtypes, device):
    chosen = [canonical_dtype(d) for d in dtypes]
    return [d for d in chosen if supports_dtype(d, device)]


def _measure_cublas(M, N, K, dtype, device, blas_layout="NN", **extra):
    m = timer(matmul_fn(M, N, K, dtype, device, blas_layout), device=device,
              label=f"gemm {M}×{N}×{K} {dtype} {blas_layout}")
    return gemm_row(M, N, K, dtype, m, **extra)


@register("gemm_sizes", "GEMM duration and throughput as M=N grows at K=4096, and as K grows at M=N=4096 "
          "(NVIDIA Matrix Multiplication guide, Figures 3 and 4)",
          dict(GEMM_COLUMNS, sweep="'mn' (M=N swept, K fixed) or 'k' (K swept, M=N fixed)",
               predicted_s="perfkit.model prediction, seconds"),
          needs=("cuda",))
def gemm_sizes(*, dtypes=GEMM_DTYPES, device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Sweep M=N at fixed K and K at fixed M=N, per dtype (E3).

    On a GPU: M=N from 256 to 16384 at K=4096, and K from 128 to 16384 at M=N=4096. ``quick`` (and a
    CPU) uses sizes up to 1024 so that the same code runs in seconds. Dtypes this device cannot run
    are skipped (a CPU runs float32 only).
    """
    dtypes = dtype_names("dtypes", dtypes)
    device = resolve_device(device)
    spec = measured_on()
    small = quick or device == "cpu"
    fixed = 512 if small else 4096
    sizes = [64, 128, 256, 384, 512, 768, 1024] if small else \
        [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
    dts = _dtypes(dtypes if not small or device != "cpu" else ("float32",), device)
    points = [("mn", s, s, fixed, d) for d in dts for s in sizes] + \
             [("k", fixed, fixed, s, d) for d in dts for s in sizes]
    ensure_fits(max((gemm_bytes_needed(M, N, K, d) for _, M, N, K, d in points), default=0), device,
                what="gemm_sizes")

    def measure(p):
        sw, M, N, K, d = p
        return _measure_cublas(M, N, K, d, device, sweep=sw, predicted_s=predicted_s(M, N, K, d, spec))

    return sweep(points, measure, on_row=on_row, progress=progress, desc="GEMM sizes")


@register("gemm_alignment", "GEMM duration as K steps through values around a multiple of 8 "
          "(is the 16-byte alignment rule still true on today's cuBLAS?)",
          dict(GEMM_COLUMNS, aligned="K is a multiple of 16 bytes' worth of elements",
               alignment="elements per 16 bytes for this dtype"),
          needs=("cuda",))
def gemm_alignment(*, dtypes=("float16", "bfloat16", "tf32", "float32"), M=None, N=None, K_center=None,
                   span=None, device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """K swept over ``K_center - span … K_center + span`` (E5), each dtype; ``aligned`` marks K % alignment == 0.

    Defaults: M = N = K_center = 4096, span 8 on a GPU; 256 and span 4 with ``quick`` or on a CPU.
    Dtypes this device cannot run are skipped (a CPU runs float32 and bfloat16).
    """
    dtypes = dtype_names("dtypes", dtypes)
    M, N, K_center, span = (v if v is None else positive_int(name, v)
                            for name, v in (("M", M), ("N", N), ("K_center", K_center), ("span", span)))
    device = resolve_device(device)
    small = quick or device == "cpu"
    M = M if M is not None else (256 if small else 4096)
    N = N if N is not None else (256 if small else 4096)
    K_center = K_center if K_center is not None else (256 if small else 4096)
    span = span if span is not None else (4 if small else 8)
    if span >= K_center:
        raise ValueError(f"span must be smaller than K_center, got span={span}, K_center={K_center}")
    if device == "cpu":
        dtypes = [d for d in dtypes if d in ("float32", "bfloat16")]
    dts = _dtypes(dtypes, device)
    Ks = range(K_center - span, K_center + span + 1)
    points = [(d, K) for d in dts for K in Ks]
    ensure_fits(max((gemm_bytes_needed(M, N, K, d) for d, K in points), default=0), device, what="gemm_alignment")

    def measure(p):
        d, K = p
        a = alignment(d)
        return _measure_cublas(M, N, K, d, device, aligned=K % a == 0, alignment=a)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="GEMM alignment")


def tiled_fn(M, N, K, dtype, tile, block_k, device):
    """A zero-argument function running :func:`~perfkit.kernels.tiled_matmul` with a forced ``tile``."""
    a, b = matmul_operands(M, N, K, dtype, device)
    num_warps = 8 if tile[0] * tile[1] >= 128 * 128 else 4
    return lambda: tiled_matmul(a, b, tile=tile, block_k=block_k, num_warps=num_warps)


def _require_gpu(device, what):
    require_gpu(device, what, runs="times a Triton kernel with forced tiles",
                instead="show the recorded data (perfkit.data.load) instead")


def _tile_rows(M, N, K, dtype, tile, block_k, device, spec, **extra):
    m = timer(tiled_fn(M, N, K, dtype, tile, block_k, device), device=device,
              label=f"triton {tile[0]}×{tile[1]} gemm {M}×{N}×{K} {dtype}")
    wq = wave_quantization(M, N, tile, spec.sms)
    return gemm_row(M, N, K, dtype, m, impl=f"triton {tile[0]}x{tile[1]}", tile_m=tile[0], tile_n=tile[1],
                    block_k=block_k, tiles=wq.tiles, waves=wq.waves,
                    predicted_s=predicted_s(M, N, K, dtype, spec, tile), **extra)


TILE_COLUMNS = dict(GEMM_COLUMNS, impl="'cublas' (torch.matmul) or 'triton TMxTN' (forced tile)",
                    tile_m="tile rows (of M)", tile_n="tile columns (of N)", block_k="K step of the Triton kernel",
                    tiles="output tiles launched", waves="waves on this GPU's SMs at one tile per SM",
                    predicted_s="perfkit.model prediction for this tile, seconds")


@register("gemm_tile_quantization", "Forced 256×128 tiles with M = SMs·256: N swept across tile boundaries, "
          "so each new tile column adds exactly one wave (NVIDIA MM guide Figure 7)",
          TILE_COLUMNS, needs=("cuda", "triton"))
def gemm_tile_quantization(*, dtype="float16", tile=(256, 128), K=2048, device="auto", quick=False,
                           progress=True, on_row=None) -> pd.DataFrame:
    """N from TN/2 to 8·TN in steps of 16 at M = SMs·TM (E6): duration flat within a tile column, a TFLOP/s sawtooth."""
    dtype, (TM, TN), K = dtype_name("dtype", dtype), tile_pair("tile", tile), positive_int("K", K)
    device = resolve_device(device)
    _require_gpu(device, "gemm_tile_quantization")
    spec = measured_on()
    M = spec.sms * TM
    Ns = list(range(TN // 2, (3 if quick else 8) * TN + 1, 16))
    ensure_fits(gemm_bytes_needed(M, max(Ns), K, dtype), device, what="gemm_tile_quantization")
    return sweep(Ns, lambda N: _tile_rows(M, N, K, dtype, tile, 64, device, spec),
                 on_row=on_row, progress=progress, desc="tile quantization")


def _near_square_factors(n: int) -> tuple[int, int]:
    a = int(math.isqrt(n))
    while n % a:
        a -= 1
    return n // a, a


@register("gemm_tile_sizes", "Throughput of one GEMM under each forced tile size, at a shape whose 256×128 "
          "tile count is exactly 4 waves (NVIDIA MM guide Figure 5), with cuBLAS for reference",
          TILE_COLUMNS, needs=("cuda", "triton"))
def gemm_tile_sizes(*, dtype="float16", K=4096, tiles=((256, 128), (128, 256), (128, 128), (128, 64),
                                                         (64, 128), (64, 64)),
                    device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """E4: M = 256·a, N = 128·b with a·b = 4·SMs (on an A100 this is NVIDIA's 6912×2048×4096)."""
    dtype, K = dtype_name("dtype", dtype), positive_int("K", K)
    tiles = sequence_of("tiles", tiles, tile_pair)
    device = resolve_device(device)
    _require_gpu(device, "gemm_tile_sizes")
    spec = measured_on()
    a, b = _near_square_factors(4 * spec.sms)
    M, N = 256 * a, 128 * b
    if quick:
        tiles = tiles[:2]
    ensure_fits(gemm_bytes_needed(M, N, K, dtype), device, what="gemm_tile_sizes")
    points = [("cublas", None)] + [("triton", tuple(t)) for t in tiles]

    def measure(p):
        impl, t = p
        if impl == "cublas":
            return _measure_cublas(M, N, K, dtype, device, impl="cublas", predicted_s=predicted_s(M, N, K, dtype, spec))
        return _tile_rows(M, N, K, dtype, t, 64, device, spec)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="tile sizes")


@register("gemm_waves", "Wave quantization: forced 256×128 tiles, M and K fixed, N swept so the tile count "
          "crosses 1, 2 and 3 waves of this GPU's SMs (NVIDIA MM guide Figure 8); cuBLAS alongside",
          TILE_COLUMNS, needs=("cuda", "triton"))
def gemm_waves(*, dtype="float16", tile=(256, 128), K=4096, device="auto", quick=False, progress=True,
               on_row=None) -> pd.DataFrame:
    """E7: M = 256·a with a the largest divisor of the SM count ≤ 16; N in steps of 64 up to ~3.3 waves."""
    dtype, (TM, TN), K = dtype_name("dtype", dtype), tile_pair("tile", tile), positive_int("K", K)
    device = resolve_device(device)
    _require_gpu(device, "gemm_waves")
    spec = measured_on()
    a = max(d for d in range(1, 17) if spec.sms % d == 0)
    M = TM * a
    cols_per_wave = spec.sms / a
    max_n = int(round((1.5 if quick else 3.3) * cols_per_wave)) * TN
    Ns = list(range(64, max_n + 1, 64))
    ensure_fits(gemm_bytes_needed(M, max(Ns), K, dtype), device, what="gemm_waves")
    points = [(impl, N) for N in Ns for impl in ("triton", "cublas")]

    def measure(p):
        impl, N = p
        if impl == "cublas":
            wq = wave_quantization(M, N, tile, spec.sms)
            return _measure_cublas(M, N, K, dtype, device, impl="cublas", tiles=wq.tiles, waves=wq.waves,
                                   predicted_s=predicted_s(M, N, K, dtype, spec))
        return _tile_rows(M, N, K, dtype, tile, 64, device, spec)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="wave quantization")


@register("gemm_transposes", "NN vs NT vs TN vs TT for the same GEMM, square and skinny (Baidu SVAIL, 2015)",
          dict(GEMM_COLUMNS, layout="BLAS layout: first letter A, second B; T = stored transposed",
               shape="'square' or 'skinny'"),
          needs=("cuda",))
def gemm_transposes(*, dtype="float16", device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each layout for a square 4096³ GEMM and Baidu's skinny M=K=2560 at N=32…128 (float32 on a CPU)."""
    dtype = dtype_name("dtype", dtype)
    device = resolve_device(device)
    if device == "cpu":
        dtype = "float32"
    shapes = [("square", 4096, 4096, 4096)] + [("skinny", 2560, n, 2560) for n in (32, 64, 128)]
    if quick or device == "cpu":
        shapes = [("square", 512, 512, 512), ("skinny", 512, 32, 512)]
    points = [(s, lay) for s in shapes for lay in ("NN", "NT", "TN", "TT")]
    ensure_fits(max(gemm_bytes_needed(M, N, K, dtype) for (_, M, N, K), _ in points), device, what="gemm_transposes")

    def measure(p):
        (shape, M, N, K), lay = p
        return _measure_cublas(M, N, K, dtype, device, lay, layout=lay, shape=shape)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="transposes")


@register("gemm_small_n", "GEMV-like GEMMs: N from 1 to 256 at M = K = 2560, memory- vs math-bound "
          "(Baidu SVAIL's small-minibatch study)",
          dict(GEMM_COLUMNS, gbps="minimum bytes moved / time_s, 1e9 bytes/s",
               intensity="FLOP per byte with each matrix moved once",
               predicted_s="perfkit.model prediction, seconds"),
          needs=("cuda",))
def gemm_small_n(*, dtype="float16", M=2560, K=2560, device="auto", quick=False, progress=True,
                 on_row=None) -> pd.DataFrame:
    """N in 1…256 (every power of two and a few in between) at M = K = 2560 (float32 on a CPU)."""
    dtype, M, K = dtype_name("dtype", dtype), positive_int("M", M), positive_int("K", K)
    device = resolve_device(device)
    if device == "cpu":
        dtype = "float32"
    spec = measured_on()
    Ns = [1, 2, 4, 8, 16, 32, 64, 128, 256] if quick or device == "cpu" else \
        [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256]
    ensure_fits(gemm_bytes_needed(M, max(Ns), K, dtype), device, what="gemm_small_n")

    def measure(N):
        m = timer(matmul_fn(M, N, K, dtype, device), device=device, label=f"gemm {M}×{N}×{K} {dtype}")
        return gemm_row(M, N, K, dtype, m, gbps=m.gbps(gemm_bytes(M, N, K, dtype)),
                        intensity=arithmetic_intensity(M, N, K, dtype), predicted_s=predicted_s(M, N, K, dtype, spec))

    return sweep(Ns, measure, on_row=on_row, progress=progress, desc="small N")


def measure_gemm(M: int, N: int, K: int, dtype: str, device: str = "auto") -> float:
    """Median seconds of one M×N×K GEMM through torch.matmul (cuBLAS on a GPU), L2 flushed.

    The widget :func:`perfkit.gemm_explorer` takes this as its ``measure`` argument.
    """
    M, N, K, dtype = positive_int("M", M), positive_int("N", N), positive_int("K", K), dtype_name("dtype", dtype)
    device = resolve_device(device)
    ensure_fits(gemm_bytes_needed(M, N, K, dtype), device, what=f"a {M}×{N}×{K} {dtype} GEMM")
    return timer(matmul_fn(M, N, K, dtype, device), device=device, label=f"gemm {M}×{N}×{K} {dtype}").median


def alignment_penalty(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per dtype: median time of aligned and of unaligned K, and their ratio (``penalty`` > 1 = slower).

    Pure: None in, None out (no recording to compare).
    """
    if frame is None:
        return None
    g = frame.groupby(["dtype", "aligned"])["time_s"].median().unstack("aligned")
    out = pd.DataFrame({"aligned_s": g[True], "unaligned_s": g[False]})
    out["penalty"] = out["unaligned_s"] / out["aligned_s"]
    return out


def alignment_summary(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`alignment_penalty` for a reader: one row per dtype, columns ``dtype``,
    ``aligned_K_s``, ``unaligned_K_s`` (median durations in seconds; show them with
    ``pk.table(..., seconds={"aligned_K_s": "µs", "unaligned_K_s": "µs"})``) and ``penalty (×)``.

    Pure: None in, None out (a chapter passes it straight to :func:`perfkit.table`).
    """
    penalty = alignment_penalty(frame)
    if penalty is None:
        return None
    return pd.DataFrame({"dtype": penalty.index, "aligned_K_s": penalty["aligned_s"].to_numpy(),
                         "unaligned_K_s": penalty["unaligned_s"].to_numpy(),
                         "penalty (×)": penalty["penalty"].to_numpy()})


def size_throughput(frame: pd.DataFrame | None, sweep: str = "mn") -> pd.DataFrame | None:
    """Per dtype of a ``gemm_sizes`` frame: the TFLOP/s of the smallest GEMM of ``sweep`` ("mn":
    M = N swept at fixed K; "k": K swept) and the best TFLOP/s of that sweep.

    Columns ``dtype``, ``smallest (TFLOP/s)``, ``best (TFLOP/s)``. Pure: None in, None out.
    """
    if sweep not in ("mn", "k"):
        raise ValueError(f"sweep must be 'mn' or 'k', got {sweep!r}")
    if frame is None:
        return None
    size = "M" if sweep == "mn" else "K"
    rows = []
    for dtype, g in frame[frame["sweep"] == sweep].groupby("dtype", sort=False):
        rows.append((dtype, g.loc[g[size].idxmin(), "tflops"], g["tflops"].max()))
    return pd.DataFrame(rows, columns=["dtype", "smallest (TFLOP/s)", "best (TFLOP/s)"])


__all__ = ["alignment_penalty", "alignment_summary", "size_throughput", "measure_gemm", "gemm_sizes", "gemm_alignment", "gemm_tile_quantization", "gemm_tile_sizes", "gemm_waves",
           "gemm_transposes", "gemm_small_n", "GEMM_DTYPES"]
