"""Devices: datasheet specs of known GPUs, and the spec of the device in use.

Peaks are the vendor's **dense** figures (never the 2:4-sparse ones), stored as published rather
than derived from clocks: on Hopper, SMs × boost clock × rate over-predicts the Tensor Core peak by
about 8 % (the Tensor Core figures assume 1.83 GHz, not the 1.98 GHz boost).

Units: FLOP/s for peaks, bytes/s for memory bandwidth, bytes for L2 and memory sizes.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import time
from dataclasses import dataclass, field, replace
from typing import Mapping

import psutil

from .ceilings import Ceilings, default_ceilings, merged
from .dtypes import DTYPES, canonical_dtype
from .units import GIGA, TERA, GiB, MiB, format_rate


@dataclass(frozen=True)
class DeviceSpec:
    """What bounds a device: compute peaks per dtype, memory bandwidth, SM count, L2 size.

    ``sources`` says where each number comes from (a datasheet, the driver at run time, or a
    measurement on this machine). A value that could not be found is ``None``. ``ceilings`` are
    the achievable ones the models use (``measured_ceilings`` when attached).
    """

    name: str
    kind: str  # "gpu" or "cpu"
    sms: int | None
    mem_bandwidth: float | None  # bytes/s
    l2_bytes: int | None
    memory_bytes: int | None
    peaks: Mapping[str, float] = field(default_factory=dict)  # FLOP/s (OP/s for int8), dense
    sources: Mapping[str, str] = field(default_factory=dict)
    driver_name: str | None = None  # the name the driver reports, for a live device
    measured_ceilings: Ceilings | None = None  # attached by perfkit.calibrated; None: the defaults

    @property
    def ceilings(self) -> Ceilings:
        """The achievable ceilings a model uses for this spec (FLOP/s per dtype, bytes/s): the
        documented defaults (:func:`perfkit.ceilings.default_ceilings`), or the measured ones merged
        with them when attached (``pk.calibrated(spec)`` attaches those recorded in ``data/``)."""
        default = default_ceilings(self)
        return default if self.measured_ceilings is None else merged(default, self.measured_ceilings)

    def peak_flop_s(self, dtype) -> float:
        """Dense peak math throughput for ``dtype`` in FLOP/s (OP/s for int8)."""
        d = canonical_dtype(dtype)
        if d not in self.peaks:
            have = ", ".join(repr(k) for k in self.peaks) or "none"
            raise LookupError(f"no peak for dtype {d!r} on {self.name}; dtypes with a peak: {have}")
        return self.peaks[d]

    def ops_per_byte(self, dtype) -> float:
        """The ridge point of the roofline: peak FLOP/s ÷ memory bytes/s, in FLOP per byte."""
        if not self.mem_bandwidth:
            raise LookupError(f"memory bandwidth of {self.name} is unknown")
        return self.peak_flop_s(dtype) / self.mem_bandwidth

    @property
    def label(self) -> str:
        """A short label for figure captions, e.g. ``'H100-SXM (NVIDIA H100 80GB HBM3)'``."""
        if self.driver_name and self.driver_name != self.name:
            return f"{self.name} ({self.driver_name})"
        return self.name

    def describe(self) -> str:
        """A multi-line table of every number and where it comes from."""
        def fmt(v, unit, scale):
            return "unknown" if v is None else f"{v / scale:,.1f} {unit}"

        rows = [
            ("device", self.label, self.sources.get("name", "")),
            ("kind", self.kind, ""),
            ("SMs" if self.kind == "gpu" else "cores", "unknown" if self.sms is None else str(self.sms),
             self.sources.get("sms", "")),
            ("memory bandwidth", fmt(self.mem_bandwidth, "GB/s", GIGA), self.sources.get("mem_bandwidth", "")),
            ("L2 cache", fmt(self.l2_bytes, "MiB", MiB), self.sources.get("l2_bytes", "")),
            ("memory", fmt(self.memory_bytes, "GiB", GiB), self.sources.get("memory_bytes", "")),
            ("ceilings", "measured" if self.measured_ceilings else "datasheet × fractions",
             self.sources.get("ceilings", "")),
        ]
        for d in DTYPES:
            if d in self.peaks:
                obp = f", ops:byte {self.ops_per_byte(d):.1f}" if self.mem_bandwidth else ""
                rate = format_rate(self.peaks[d], "OP" if d == "int8" else "FLOP")
                rows.append((f"peak {d}", f"{rate}{obp}", self.sources.get("peaks", "")))
        w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
        return "\n".join(f"{a:<{w0}}  {b:<{w1}}  {c}".rstrip() for a, b, c in rows)


def _gpu(name, sms, bw_gbs, l2_mib, mem_gb, peaks_tflops, source):
    return DeviceSpec(
        name=name, kind="gpu", sms=sms, mem_bandwidth=bw_gbs * GIGA, l2_bytes=int(l2_mib * MiB),
        memory_bytes=int(mem_gb * GIGA),
        peaks={k: v * TERA for k, v in peaks_tflops.items()},
        sources={k: source for k in ("sms", "mem_bandwidth", "l2_bytes", "memory_bytes", "peaks")},
    )


# Vendor datasheet values, dense. Sources per entry; "[R]" marks a value recalled from the
# datasheet that our stored copies did not show (check before quoting).
KNOWN_DEVICES: dict[str, DeviceSpec] = {d.name: d for d in (
    # NVIDIA GPU Performance Background guide (V100 text): 80 SMs, 6 MB L2, ~900 GB/s,
    # 15.7 FP32 / 125 FP16 Tensor TFLOPS; FP64 7.8 from the V100 datasheet [R].
    _gpu("V100-SXM2", 80, 900, 6, 32, {"float64": 7.8, "float32": 15.7, "float16": 125},
         "NVIDIA GPU Performance Background guide; V100 datasheet"),
    # NVIDIA Tesla P100 datasheet [R] (no Tensor Cores): 56 SMs, 4 MB L2, 732 GB/s HBM2 (16 GB).
    # SXM2 (1480 MHz boost): FP64 5.3, FP32 10.6, FP16 21.2; PCIe (1329 MHz): 4.7, 9.3, 18.7.
    # The FP16 rate is native half2 math; DeepBench's P100 "pseudo FP16" rows store fp16 but do
    # their math in fp32, so they run at the FP32 rate (model them with math_dtype="float32").
    _gpu("P100-SXM2", 56, 732, 4, 16, {"float64": 5.3, "float32": 10.6, "float16": 21.2},
         "NVIDIA Tesla P100 datasheet (SXM2)"),
    _gpu("P100-PCIe", 56, 732, 4, 16, {"float64": 4.7, "float32": 9.3, "float16": 18.7},
         "NVIDIA Tesla P100 datasheet (PCIe, 16 GB)"),
    # NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), dense:
    # FP64 Tensor Core 19.5, FP32 19.5, TF32 156, FP16/BF16 312, INT8 624; 1555 GB/s (40GB).
    _gpu("A100-SXM4-40GB", 108, 1555, 40, 40,
         {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
         "NVIDIA A100 datasheet (r4), dense"),
    # Same datasheet, 80GB SXM: 2039 GB/s.
    _gpu("A100-SXM4-80GB", 108, 2039, 40, 80,
         {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
         "NVIDIA A100 datasheet (r4), dense"),
    # NVIDIA H100 datasheet (SXM5), sparse figures halved: TF32 494.7, FP16/BF16 989.4,
    # FP8/INT8 1978.9; FP32 66.9; FP64 Tensor Core 67 [R]; 3350 GB/s; 50 MB L2.
    _gpu("H100-SXM", 132, 3350, 50, 80,
         {"float64": 67, "float32": 66.9, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4,
          "float8": 1978.9, "int8": 1978.9},
         "NVIDIA H100 datasheet (SXM), dense"),
    # NVIDIA H100 datasheet (PCIe), dense: FP32 51, TF32 378, FP16/BF16 756, FP8/INT8 1513;
    # FP64 Tensor Core 51 [R]; 2000 GB/s; 114 SMs.
    _gpu("H100-PCIe", 114, 2000, 50, 80,
         {"float64": 51, "float32": 51, "tf32": 378, "float16": 756, "bfloat16": 756,
          "float8": 1513, "int8": 1513},
         "NVIDIA H100 datasheet (PCIe), dense"),
    # H800 SXM5 (China export variant of the H100 SXM): the same GH100 SMs, clocks and HBM3, so the same
    # Tensor-Core peaks and 3.35 TB/s; less NVLink (400 GB/s) and far less FP64 (DeepGEMM's README and
    # NVIDIA's H800 product page [R]). perfkit reads DeepGEMM's published fp8 GEMMs against it.
    _gpu("H800", 132, 3350, 50, 80,
         {"float32": 66.9, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4, "float8": 1978.9, "int8": 1978.9},
         "H100 SXM datasheet figures (H800 SXM5: same SMs and HBM3), dense"),
    # NVIDIA H200 datasheet: same GH100 compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s.
    _gpu("H200", 132, 4800, 50, 141,
         {"float64": 67, "float32": 67, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4,
          "float8": 1979, "int8": 1979},
         "NVIDIA H200 datasheet, dense"),
    # NVIDIA L4 datasheet, sparse halved: TF32 60, FP16/BF16 121, FP8/INT8 242.5; FP32 30.3;
    # 300 GB/s; 48 MB L2; 58 SMs (Ada whitepaper [R]).
    _gpu("L4", 58, 300, 48, 24,
         {"float32": 30.3, "tf32": 60, "float16": 121, "bfloat16": 121, "float8": 242.5, "int8": 242.5},
         "NVIDIA L4 datasheet, dense; Ada whitepaper"),
    # NVIDIA T4 datasheet: FP32 8.1, FP16 65, INT8 130 TOPS; 320 GB/s; 40 SMs, 4 MB L2.
    _gpu("T4", 40, 320, 4, 16, {"float32": 8.1, "float16": 65, "int8": 130},
         "NVIDIA T4 datasheet"),
    # NVIDIA A10 datasheet [R], sparse halved: TF32 62.5, FP16/BF16 125, INT8 250; FP32 31.2;
    # 600 GB/s; 72 SMs, 6 MB L2.
    _gpu("A10", 72, 600, 6, 24,
         {"float32": 31.2, "tf32": 62.5, "float16": 125, "bfloat16": 125, "int8": 250},
         "NVIDIA A10 datasheet, dense"),
    # NVIDIA Ada whitepaper v2.01, RTX 4090, FP32-accumulate Tensor Core figures (what a GEMM
    # with float32 accumulation gets): FP16/BF16 165.2, FP8 330.3, TF32 82.6, INT8 660.6;
    # FP32 82.6; 1008 GB/s; 128 SMs; 72 MB L2.
    _gpu("RTX-4090", 128, 1008, 72, 24,
         {"float32": 82.6, "tf32": 82.6, "float16": 165.2, "bfloat16": 165.2, "float8": 330.3,
          "int8": 660.6},
         "NVIDIA Ada whitepaper v2.01 (FP32 accumulate), dense"),
    # NVIDIA L40S datasheet, sparse halved: TF32 183, FP16/BF16 362.05, FP8/INT8 733; FP32 91.6;
    # 864 GB/s; 142 SMs; L2 96 MB per the Ada whitepaper [R] (read the live value at run time).
    _gpu("L40S", 142, 864, 96, 48,
         {"float32": 91.6, "tf32": 183, "float16": 362.05, "bfloat16": 362.05, "float8": 733, "int8": 733},
         "NVIDIA L40S datasheet, dense"),
)}

# Driver names (as torch.cuda.get_device_name reports them) → table entry. First match wins.
_DRIVER_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bH200\b", "H200"),
    (r"\bH800\b", "H800"),
    (r"\bH100\b.*\bPCIe\b", "H100-PCIe"),
    (r"\bH100\b.*(SXM|HBM3)", "H100-SXM"),
    (r"^\W*H100\W*$", "H100-SXM"),  # the bare name, as in advise(..., spec="H100"): the SXM part
    (r"\bA100\b.*80\s*GB", "A100-SXM4-80GB"),
    (r"\bA100\b", "A100-SXM4-40GB"),
    (r"\bV100\b", "V100-SXM2"),
    (r"\bP100\b.*\bSXM2?\b", "P100-SXM2"),
    (r"\bP100\b", "P100-PCIe"),
    (r"\bL40S\b", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bT4\b", "T4"),
    (r"\bA10\b", "A10"),
    (r"RTX 4090", "RTX-4090"),
)


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def device_spec(name: str) -> DeviceSpec:
    """The datasheet spec of a known GPU, by table name (``'H100-SXM'``) or driver name.

    Matching ignores case and punctuation, so ``'h100 sxm'`` and ``'NVIDIA H100 80GB HBM3'`` both
    work. Raises ``LookupError`` naming the known devices otherwise.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a device name string such as 'H100-SXM', got {name!r}")
    wanted = _key(name)
    for spec in KNOWN_DEVICES.values():
        if _key(spec.name) == wanted:
            return spec
    matched = match_driver_name(name)
    if matched is not None:
        return KNOWN_DEVICES[matched]
    raise LookupError(f"unknown device name {name!r}; known devices: {', '.join(KNOWN_DEVICES)}")


def match_driver_name(driver_name: str) -> str | None:
    """The table entry for a driver-reported GPU name, or ``None`` if it is not in the table."""
    for pattern, entry in _DRIVER_PATTERNS:
        if re.search(pattern, driver_name, flags=re.IGNORECASE):
            return entry
    return None


def resolve_spec(spec: "str | DeviceSpec | None", *, default: "str | DeviceSpec | None" = None,
                 param: str = "spec", none_ok: bool = True) -> DeviceSpec:
    """The device a caller means: a :class:`DeviceSpec` as it is, a name (``'H100-SXM'``) through
    :func:`device_spec`, ``None`` → ``default`` (a name or a spec) or else :func:`current_device`
    (refused when not ``none_ok``: a model predicts for the device it is given).
    ``TypeError`` naming ``param`` and what it accepts otherwise; ``LookupError`` for an unknown name."""
    if spec is None and none_ok:
        return current_device() if default is None else resolve_spec(default, param=param)
    if isinstance(spec, DeviceSpec):
        return spec
    if isinstance(spec, str):
        try:
            return device_spec(spec)
        except LookupError as e:
            raise LookupError(f"{param}: {e}") from None
    accepted = "a device name such as 'H100-SXM', a DeviceSpec" + (" or None" if none_ok else "")
    raise TypeError(f"{param} must be {accepted}, got {spec!r} ({type(spec).__name__})")


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA GPU (a broken driver counts as no GPU)."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def current_device(refresh: bool = False) -> DeviceSpec:
    """The spec of the device perfkit measures on: the current CUDA GPU, else this CPU.

    - A known GPU: datasheet peaks and bandwidth, with SM count, L2 size and memory read from the
      driver at run time.
    - An unknown GPU: SMs, L2, memory and theoretical bandwidth read from the driver; compute peaks
      measured with quick matmuls (labelled as measured).
    - A CPU: ceilings measured with quick matmuls and a copy (labelled as measured); the ``sms``
      field holds the core count.

    The result is cached; ``refresh=True`` measures again.
    """
    if refresh:
        _current_device.cache_clear()
    return _current_device()


@functools.lru_cache(maxsize=1)
def _current_device() -> DeviceSpec:
    if cuda_available():
        return _cuda_spec()
    return _cpu_spec()


def _cuda_spec() -> DeviceSpec:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    driver_name = props.name
    runtime = "read at run time (torch.cuda.get_device_properties)"
    entry = match_driver_name(driver_name)
    sms = int(props.multi_processor_count)
    l2 = int(getattr(props, "L2_cache_size", 0)) or None
    mem = int(props.total_memory)
    if entry is not None:
        base = KNOWN_DEVICES[entry]
        sources = dict(base.sources, sms=runtime, memory_bytes=runtime, name=f"matched to table entry {entry}")
        if l2:
            sources["l2_bytes"] = runtime
        return replace(base, sms=sms, l2_bytes=l2 or base.l2_bytes, memory_bytes=mem,
                       driver_name=driver_name, sources=sources)
    # Unknown GPU: read what the driver knows, measure the rest.
    bw, bw_src = None, "unknown"
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if clock_khz and bus_bits:
        bw = clock_khz * 1e3 * 2 * bus_bits / 8  # double data rate
        bw_src = "theoretical from memory clock × bus width (driver)"
    peaks, peak_src = _measure_peaks("cuda")
    if bw is None:
        bw, bw_src = _measure_copy_bandwidth("cuda")
    return DeviceSpec(
        name=driver_name, kind="gpu", sms=sms, mem_bandwidth=bw, l2_bytes=l2, memory_bytes=mem,
        peaks=peaks, driver_name=driver_name,
        sources={"name": "not in perfkit's table", "sms": runtime, "l2_bytes": runtime,
                 "memory_bytes": runtime, "mem_bandwidth": bw_src, "peaks": peak_src},
    )


def cpu_name() -> str:
    """This CPU's label, e.g. ``'CPU (x86_64, 2 cores)'`` (no measurement; instant)."""
    return f"CPU ({platform.machine() or 'unknown'}, {os.cpu_count()} cores)"


def _cpu_spec() -> DeviceSpec:
    cores = os.cpu_count()
    try:
        l2 = os.sysconf("SC_LEVEL2_CACHE_SIZE") or None
    except (ValueError, OSError, AttributeError):
        l2 = None
    mem = int(psutil.virtual_memory().total)
    peaks, peak_src = _measure_peaks("cpu")
    bw, bw_src = _measure_copy_bandwidth("cpu")
    name = cpu_name()
    return DeviceSpec(
        name=name, kind="cpu", sms=cores, mem_bandwidth=bw, l2_bytes=l2, memory_bytes=mem,
        peaks=peaks,
        sources={"name": "this machine (no CUDA GPU found)", "sms": "os.cpu_count()",
                 "l2_bytes": "sysconf", "memory_bytes": "psutil.virtual_memory()",
                 "mem_bandwidth": bw_src, "peaks": peak_src},
    )


def _measure_peaks(device: str) -> tuple[dict[str, float], str]:
    """Best matmul FLOP/s per dtype from a few quick square matmuls (a floor for the true peak)."""
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
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                torch.matmul(a, b)
                if device == "cuda":
                    torch.cuda.synchronize()
                best = min(best, time.perf_counter() - t0)
            peaks[name] = 2 * n**3 / best
        except (RuntimeError, TypeError):  # dtype not supported by this build
            continue
    if "float32" in peaks:
        peaks["tf32"] = peaks["float32"] if device == "cpu" else peaks.get("tf32", peaks["float32"])
    return peaks, f"measured here on {when}: best of a few {n}×{n}×{n} torch.matmul calls (a floor, not a datasheet peak)"


def _measure_copy_bandwidth(device: str) -> tuple[float | None, str]:
    """Best copy bandwidth in bytes/s (bytes read + written) over a few 64 MiB copies."""
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
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        dst.copy_(src)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    when = time.strftime("%Y-%m-%d")
    return 2 * nbytes / best, f"measured here on {when}: best of 5 copies of 64 MiB (bytes read + written)"
