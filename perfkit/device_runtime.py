"""The GPU runtime torch runs on (CUDA or ROCm), what its driver reports, and quick measurements.

torch's ROCm build exposes AMD GPUs through ``torch.cuda``: ``torch.cuda.is_available()`` is true,
tensors live on device ``"cuda"``, CUDA graphs are HIP graphs, and ``torch.version.hip`` names the
ROCm (HIP) version where a CUDA build has ``torch.version.cuda``. :func:`gpu_runtime` tells the two
apart; :func:`driver_properties` reads what the driver reports of the GPU in use, either way.

Nothing here knows perfkit's device table: :mod:`perfkit.devices` builds a
:class:`~perfkit.devices.DeviceSpec` from these. ``torch`` is imported when a function needs it.
Units: bytes, bytes/s, FLOP/s, kHz (the driver's memory clock), bits (its memory bus).
"""

from __future__ import annotations

import os
import platform
import re
import time
from dataclasses import dataclass

from .units import MiB

__all__ = ["RUNTIME_NAMES", "DriverProperties", "cpu_name", "cuda_available", "driver_properties", "gcn_arch",
           "gpu_runtime", "graph_name", "hip_version", "measure_copy_bandwidth", "measure_peaks",
           "runtime_name", "theoretical_bandwidth"]

#: How perfkit names each value of :func:`gpu_runtime` to a reader.
RUNTIME_NAMES: dict[str, str] = {"cuda": "CUDA", "rocm": "ROCm", "": "no GPU"}


def cuda_available() -> bool:
    """Whether torch is installed and sees a GPU through ``torch.cuda`` (an NVIDIA GPU through CUDA,
    or an AMD GPU through torch's ROCm build); a broken driver counts as no GPU."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def hip_version() -> str | None:
    """``torch.version.hip`` (the ROCm/HIP version of a ROCm build of torch, e.g. ``'6.2.41133'``), or
    ``None`` for a CUDA or CPU build (or without torch)."""
    try:
        import torch
    except ImportError:
        return None
    return getattr(torch.version, "hip", None) or None


def gpu_runtime() -> str:
    """The runtime of the GPU perfkit measures on: ``"cuda"`` (NVIDIA, CUDA), ``"rocm"`` (AMD, torch's
    ROCm build) or ``""`` when torch sees no GPU."""
    if not cuda_available():
        return ""
    return "rocm" if hip_version() else "cuda"


def runtime_name(runtime: str | None = None) -> str:
    """``"CUDA"``, ``"ROCm"`` or ``"no GPU"``: ``runtime``'s name (default :func:`gpu_runtime`) for a reader."""
    runtime = gpu_runtime() if runtime is None else runtime
    if runtime not in RUNTIME_NAMES:
        raise ValueError(f"runtime must be one of {', '.join(map(repr, RUNTIME_NAMES))}, got {runtime!r}")
    return RUNTIME_NAMES[runtime]


def graph_name(runtime: str | None = None) -> str:
    """What a captured graph of kernels is called on ``runtime`` (default :func:`gpu_runtime`):
    ``"HIP graph"`` on ROCm (torch's ``torch.cuda.CUDAGraph`` is one there), else ``"CUDA graph"``."""
    return "HIP graph" if runtime_name(runtime) == "ROCm" else "CUDA graph"


@dataclass(frozen=True)
class DriverProperties:
    """What the driver reports of a GPU (``torch.cuda.get_device_properties``); ``None``: not reported.

    ``sms`` counts NVIDIA's SMs or AMD's compute units; ``l2_bytes`` is what the driver calls the L2
    (on a multi-die AMD GPU, one die's); ``arch`` is AMD's ``gfx`` target (e.g. ``'gfx942'``)."""

    name: str
    sms: int
    memory_bytes: int
    l2_bytes: int | None = None
    warp_size: int | None = None
    arch: str | None = None
    memory_clock_khz: float | None = None
    memory_bus_bits: int | None = None


def _positive(value) -> int | None:
    try:
        return int(value) if value and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


def _arch(props) -> str | None:
    """``'gfx942'`` from ``gcnArchName`` (``'gfx942:sramecc+:xnack-'``), or ``None`` (a CUDA build)."""
    full = getattr(props, "gcnArchName", None)
    base = full.split(":", 1)[0].strip() if isinstance(full, str) else ""
    return base if base.startswith("gfx") else None


def driver_properties(index: int | None = None) -> DriverProperties:
    """The properties the driver reports of GPU ``index`` (default: the current one).

    A ROCm driver may report an empty name (or a PCI id such as ``'Device 74a1'``) for a part it
    has no marketing name for: the name is then ``'AMD <gfx target>'``."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
    arch, name = _arch(props), str(getattr(props, "name", "") or "").strip()
    if arch and (not name or re.fullmatch(r"Device [0-9a-fA-F]+", name)):
        name = f"AMD {arch}"
    return DriverProperties(
        name=name, sms=int(props.multi_processor_count), memory_bytes=int(props.total_memory),
        l2_bytes=_positive(getattr(props, "L2_cache_size", None)),
        warp_size=_positive(getattr(props, "warp_size", None)), arch=arch,
        memory_clock_khz=_positive(getattr(props, "memory_clock_rate", None)),
        memory_bus_bits=_positive(getattr(props, "memory_bus_width", None)))


def gcn_arch() -> str | None:
    """The AMD ``gfx`` target of the GPU in use (``'gfx942'`` on an MI300X); ``None`` without a ROCm GPU."""
    return driver_properties().arch if gpu_runtime() == "rocm" else None


def theoretical_bandwidth(memory_clock_khz: float | None, memory_bus_bits: int | None) -> float | None:
    """Memory bytes/s from the driver's memory clock (kHz) × bus width (bits), double data rate;
    ``None`` when either is unknown."""
    if not memory_clock_khz or not memory_bus_bits:
        return None
    return memory_clock_khz * 1e3 * 2 * memory_bus_bits / 8


def cpu_name() -> str:
    """This CPU's label, e.g. ``'CPU (x86_64, 2 cores)'`` (no measurement; instant)."""
    return f"CPU ({platform.machine() or 'unknown'}, {os.cpu_count()} cores)"


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure_peaks(device: str) -> tuple[dict[str, float], str]:
    """Best matmul FLOP/s per dtype from a few quick square matmuls (a floor for the true peak), on
    ``device`` (``"cuda"``: the GPU, CUDA or ROCm; ``"cpu"``), and where the numbers come from."""
    try:
        import torch
    except ImportError:
        return {}, "unknown (torch is not installed)"
    n = 512 if device == "cpu" else 4096  # CPU float16 matmuls run at ~1 GFLOP/s: keep them short
    when = time.strftime("%Y-%m-%d")
    peaks: dict[str, float] = {}
    dtypes = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
              "float16": torch.float16}
    for name, dt in dtypes.items():
        try:
            a = torch.randn(n, n, device=device).to(dt)
            b = torch.randn(n, n, device=device).to(dt)
            best = float("inf")
            for _ in range(5 if device == "cpu" else 10):
                _sync(torch, device)
                t0 = time.perf_counter()
                torch.matmul(a, b)
                _sync(torch, device)
                best = min(best, time.perf_counter() - t0)
            peaks[name] = 2 * n**3 / best
        except (RuntimeError, TypeError):  # dtype not supported by this build
            continue
    if "float32" in peaks:
        peaks["tf32"] = peaks["float32"] if device == "cpu" else peaks.get("tf32", peaks["float32"])
    return peaks, f"measured here on {when}: best of a few {n}×{n}×{n} torch.matmul calls (a floor, not a datasheet peak)"


def measure_copy_bandwidth(device: str) -> tuple[float | None, str]:
    """Best copy bandwidth in bytes/s (bytes read + written) over a few 64 MiB copies on ``device``."""
    try:
        import torch
    except ImportError:
        return None, "unknown (torch is not installed)"
    nbytes = 64 * MiB
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    src.fill_(1)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        _sync(torch, device)
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(torch, device)
        best = min(best, time.perf_counter() - t0)
    when = time.strftime("%Y-%m-%d")
    return 2 * nbytes / best, f"measured here on {when}: best of 5 copies of 64 MiB (bytes read + written)"
