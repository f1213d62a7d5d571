"""What a calibration times on the device in use: GEMMs per dtype, copies of growing size, the floor of
a kernel, and a fixed validation set of GEMMs and memory-bound ops.

Every timing is :func:`perfkit.timing.bench`'s median (through :func:`perfkit.placement.timer`, so a
test can swap the timer), with a shorter sampling budget than the book's experiments: a calibration
takes about a minute. On a GPU bench flushes the L2 before each sample (cold cache, as the models
assume and as :func:`bench_options` says) except where a function says otherwise (the copy sweep, the
warm launch floors); on a CPU it times blocks of calls with ``perf_counter`` (no flush).
Units: seconds, bytes, bytes/s, FLOP. ``torch`` is imported when a function needs it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ..device_runtime import graph_name
from ..dtypes import itemsize, torch_dtype
from ..matmul import matmul_fn
from ..measurement import NoiseWarning
from ..memory_model import layer_bytes
from ..placement import free_memory, tensor_device, timer
from ..units import MiB

__all__ = ["MemoryCase", "bench_options", "copy_sweep", "free_bytes", "gemm_timer",
           "launch_floors", "memory_case_bytes", "memory_cases", "time_memory_case", "validation_gemms"]

#: Share of the free memory a calibration may allocate at once.
MEMORY_SHARE = 0.5


def bench_options(device: str, quick: bool) -> dict[str, Any]:
    """:func:`perfkit.bench` options for one calibration timing: short, since a calibration times
    a few hundred things (seconds), and with the L2 flushed before each sample, as the book's
    timings are and the models assume (bench's default; ignored on a CPU)."""
    if device == "cpu":
        return {"warmup_s": 0.005, "rep_s": 0.01 if quick else 0.03, "max_time_s": 0.3 if quick else 0.5,
                "flush_l2": True}
    return {"warmup_s": 0.005 if quick else 0.01, "rep_s": 0.02 if quick else 0.05, "max_time_s": 2.0,
            "flush_l2": True}


def _median_s(fn: Callable[[], Any], device: str, label: str, options: dict[str, Any]) -> float:
    """bench's median (seconds); its noise warnings are kept quiet (the calibration reports its spread)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseWarning)
        warnings.filterwarnings("ignore", message=".*cuda_graph=True.*")
        return float(timer(fn, device=device, label=label, **options).median)


def free_bytes(device: str) -> int:
    """The bytes a calibration may allocate on ``device``: :data:`MEMORY_SHARE` of the free memory."""
    return int(MEMORY_SHARE * free_memory(device))


def _release(device: str) -> None:
    if tensor_device(device) == "cuda":
        import torch

        torch.cuda.empty_cache()


def gemm_timer(dtype: str, device: str, *, quick: bool = False) -> Callable[[int, int, int], float]:
    """``time_gemm(M, N, K)`` → the median seconds of an M×N×K GEMM in ``dtype`` (cuBLAS on a GPU,
    :func:`perfkit.matmul.matmul_fn`), its operands freed after each shape."""
    options = bench_options(device, quick)

    def time_gemm(M: int, N: int, K: int) -> float:
        time_s = _median_s(matmul_fn(M, N, K, dtype, device), device, f"gemm {M}×{N}×{K} {dtype}", options)
        _release(device)  # the operands are gone with the function
        return time_s

    return time_gemm


def copy_sweep(device: str, *, quick: bool = False, max_bytes: int | None = None) -> list[dict[str, float]]:
    """Device-to-device copies (``Tensor.copy_``) of 256 KiB up to 1 GiB (a CPU, or ``quick``: up to
    256 MiB) that fit ``max_bytes`` (source and destination), each timed warm: the same buffers
    copied again and again (``flush_l2=False``), so a copy that fits the L2 runs from it. Rows:
    ``bytes`` (the tensor's), ``time_s``, ``bandwidth`` (bytes read + written per second)."""
    import torch

    top = 28 if quick or device == "cpu" else 30
    sizes = [1 << p for p in range(18, top + 1, 2 if quick else 1)]
    limit = free_bytes(device) if max_bytes is None else max_bytes
    options = {**bench_options(device, quick), "flush_l2": False}

    def time_copy(nbytes: int) -> float:
        src = torch.ones(nbytes, dtype=torch.uint8, device=tensor_device(device))
        dst = torch.empty_like(src)
        return _median_s(lambda: dst.copy_(src), device, f"copy {nbytes / MiB:g} MiB", options)

    rows = []
    for nbytes in (n for n in sizes if 2 * n <= limit):
        time_s = time_copy(nbytes)  # its buffers are gone once it returns
        _release(device)
        rows.append({"bytes": nbytes, "time_s": time_s, "bandwidth": 2 * nbytes / time_s})
    return rows


def launch_floors(device: str, dtype: str, *, quick: bool = False) -> dict[str, float | None]:
    """The fixed cost of a kernel (seconds), timed as the validation set is (:func:`bench_options`: on
    a GPU the L2 flushed before each sample, so a small kernel pays a cold memory access, as the
    kernels the models predict do): ``kernel_s``, a one-element add (a plain launch; on a CPU, the
    call overhead of a torch op); ``gemm_s``, a 16×16×16 GEMM in ``dtype`` (negligible math).
    Warm, the L2 not flushed: ``warm_kernel_s``, the add again (the fixed cost of the copy sweep's
    warm copies; on a CPU, which bench never flushes, ``kernel_s`` itself), and ``graph_s``, the add
    inside a CUDA graph (a HIP graph on ROCm; ``None`` on a CPU)."""
    import torch

    options = bench_options(device, quick)
    x = torch.zeros(1, device=tensor_device(device))
    kernel_s = _median_s(lambda: x.add_(1), device, "one-element add", options)
    gemm_s = _median_s(matmul_fn(16, 16, 16, dtype, device), device, f"gemm 16×16×16 {dtype}", options)
    warm_kernel_s, graph_s = kernel_s, None
    if device == "cuda":
        warm = {**options, "flush_l2": False}
        warm_kernel_s = _median_s(lambda: x.add_(1), device, "one-element add, warm L2", warm)
        graph_s = _median_s(lambda: x.add_(1), device, f"one-element add, {graph_name()}",
                            {**warm, "cuda_graph": True})
    return {"kernel_s": kernel_s, "gemm_s": gemm_s, "warm_kernel_s": warm_kernel_s, "graph_s": graph_s}


def validation_gemms(device: str, quick: bool = False) -> tuple[tuple[int, int, int], ...]:
    """The validation set's GEMMs (M, N, K): square, skinny, deep, shallow and unaligned shapes, sized
    for the device (a CPU's are smaller), the same on every run so that errors compare."""
    if device == "cpu":
        shapes = ((64, 64, 64), (256, 256, 256), (512, 512, 512), (1000, 1000, 1000), (16, 1024, 1024),
                  (1024, 1024, 64), (128, 2048, 512), (768, 768, 3072))
        return shapes[:5] if quick else shapes
    shapes = ((256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (8, 8192, 8192),
              (64, 4096, 4096), (8192, 8192, 128), (1000, 1000, 1000), (2048, 2048, 13312),
              (16384, 1024, 4096), (4096, 14336, 4096), (128, 128, 128))
    return shapes[:7] if quick else shapes


@dataclass(frozen=True)
class MemoryCase:
    """A memory-bound op of the validation set: ``kind`` a :func:`perfkit.layer_bytes` kind (or
    ``"copy"``) on a tensor of ``shape``."""

    kind: str
    shape: tuple[int, ...]


def memory_cases(device: str, quick: bool = False) -> tuple[MemoryCase, ...]:
    """The validation set's memory-bound ops: copies, ReLU, an add of two tensors and a softmax over
    rows, small (where the fixed cost of a kernel matters) to large (where the bandwidth does)."""
    sizes = (1 << 16, 1 << 20, 1 << 24) if device == "cpu" else (1 << 18, 1 << 22, 1 << 26)
    if quick:
        sizes = sizes[1:]
    cases = []
    for n in sizes:
        cases += [MemoryCase("copy", (n,)), MemoryCase("relu", (n,)), MemoryCase("add", (n,))]
    cases.append(MemoryCase("softmax", (sizes[-1] // 1024, 1024)))
    return tuple(cases)


def time_memory_case(case: MemoryCase, dtype: str, device: str, *, quick: bool = False) -> float:
    """The median seconds of ``case`` in ``dtype`` on ``device`` (:func:`bench_options`: cold L2 on a GPU)."""
    time_s = _time_case(case, dtype, device, quick)  # its tensors are gone once it returns
    _release(device)
    return time_s


def _time_case(case: MemoryCase, dtype: str, device: str, quick: bool) -> float:
    import torch

    dt = torch_dtype(dtype)
    on = tensor_device(device)
    x = torch.randn(case.shape, device=on).to(dt)
    y = torch.randn(case.shape, device=on).to(dt)
    fn = {"copy": lambda: y.copy_(x), "relu": lambda: torch.relu(x), "add": lambda: x + y,
          "softmax": lambda: torch.softmax(x, dim=-1)}[case.kind]
    return _median_s(fn, device, f"{case.kind} {case.shape} {dtype}", bench_options(device, quick))


def memory_case_bytes(case: MemoryCase, dtype: str) -> int:
    """Bytes ``case`` moves: a copy reads and writes the tensor; the others per :func:`perfkit.layer_bytes`."""
    if case.kind == "copy":
        return 2 * math.prod(case.shape) * itemsize(dtype)
    return layer_bytes(case.kind, case.shape, dtype)
