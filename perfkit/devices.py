"""Devices: datasheet specs of known GPUs, and the spec of the device in use.

Peaks are the vendor's **dense** figures (never the 2:4-sparse ones), stored as published rather
than derived from clocks: on Hopper, SMs × boost clock × rate over-predicts the Tensor Core peak by
about 8 % (the Tensor Core figures assume 1.83 GHz, not the 1.98 GHz boost).

Units: FLOP/s for peaks, bytes/s for memory bandwidth, bytes for L2 and memory sizes.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, replace
from typing import Mapping

import psutil

from .ceilings import Ceilings, default_ceilings, merged
from .datasheets import DRIVER_PATTERNS, VENDORS
from .device_runtime import (DriverProperties, cpu_name, cuda_available, driver_properties, gpu_runtime,
                             measure_copy_bandwidth, measure_peaks, theoretical_bandwidth)
from .dtypes import DTYPES, canonical_dtype
from .units import GIGA, TERA, GiB, MiB, format_rate


@dataclass(frozen=True)
class DeviceSpec:
    """What bounds a device: compute peaks per dtype, memory bandwidth, SM count, L2 size.

    On AMD GPUs ``sms`` counts compute units (CUs), spread over ``dies`` dies (XCDs), and
    ``warp_size`` is the wavefront (64).

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
    vendor: str = ""  # "NVIDIA", "AMD"; "" for a CPU
    dies: int = 1  # dies dispatching work-groups round robin, each with its own L2 (AMD's XCDs)
    warp_size: int = 32  # threads per warp (NVIDIA) or wavefront (AMD CDNA: 64)
    llc_bytes: int | None = None  # a memory-side cache behind the L2 (AMD's Infinity Cache), bytes

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
    def unit_name(self) -> str:
        """What the vendor calls a multiprocessor: ``"SMs"``, or ``"CUs"`` on AMD."""
        return "CUs" if self.vendor == "AMD" else "SMs"

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
            (self.unit_name if self.kind == "gpu" else "cores",
             "unknown" if self.sms is None else str(self.sms) + (f" on {self.dies} dies" if self.dies > 1 else ""),
             self.sources.get("sms", "")),
            ("memory bandwidth", fmt(self.mem_bandwidth, "GB/s", GIGA), self.sources.get("mem_bandwidth", "")),
            ("L2 cache", fmt(self.l2_bytes, "MiB", MiB), self.sources.get("l2_bytes", "")),
            ("memory", fmt(self.memory_bytes, "GiB", GiB), self.sources.get("memory_bytes", "")),
            *([("Infinity Cache", fmt(self.llc_bytes, "MiB", MiB),
                self.sources.get("llc_bytes", self.sources.get("peaks", "")))]
              if self.llc_bytes else []),
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


def _gpu(vendor: str, name, sms, bw_gbs, l2_mib, mem_gb, peaks, source, dies=1, warp=32, llc_mib=None):
    return DeviceSpec(
        name=name, kind="gpu", sms=sms, mem_bandwidth=bw_gbs * GIGA, l2_bytes=int(l2_mib * MiB),
        memory_bytes=int(mem_gb * GIGA),
        peaks={k: v * TERA for k, v in peaks.items()},
        sources={k: source for k in ("sms", "mem_bandwidth", "l2_bytes", "memory_bytes", "peaks")
                 + (("llc_bytes",) if llc_mib else ())},
        vendor=vendor, dies=dies, warp_size=warp, llc_bytes=None if llc_mib is None else int(llc_mib * MiB),
    )


#: Every GPU of the vendor datasheets (:mod:`perfkit.datasheets`), by table name: dense peaks, memory,
#: caches and dies, each number with its source.
KNOWN_DEVICES: dict[str, DeviceSpec] = {
    e["name"]: _gpu(vendor, **e) for vendor, entries in VENDORS.items() for e in entries}

def known_by_vendor() -> dict[str, list[str]]:
    """The table's device names per vendor (``{"NVIDIA": [...], "AMD": [...]}``)."""
    out: dict[str, list[str]] = {}
    for spec in KNOWN_DEVICES.values():
        out.setdefault(spec.vendor, []).append(spec.name)
    return out


def known_devices_text() -> str:
    """The table's names grouped by vendor, as an unknown name's ``LookupError`` lists them
    (``"NVIDIA: V100-SXM2, …; AMD: MI300X, …"``)."""
    return "; ".join(f"{v}: {', '.join(names)}" for v, names in known_by_vendor().items())


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
    raise LookupError(f"unknown device name {name!r}; known devices: {known_devices_text()}")


def match_driver_name(driver_name: str) -> str | None:
    """The table entry for a driver-reported GPU name, or ``None`` if it is not in the table."""
    for pattern, entry in DRIVER_PATTERNS:
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


def current_device(refresh: bool = False) -> DeviceSpec:
    """The spec of the device perfkit measures on: the current GPU (NVIDIA through CUDA, or AMD through
    torch's ROCm build, :func:`~perfkit.device_runtime.gpu_runtime`), else this CPU.

    - A known GPU: datasheet peaks and bandwidth, with SM (AMD: CU) count, L2 size and memory read
      from the driver at run time (on a multi-die AMD GPU the driver reports one die's L2: × dies).
    - An unknown GPU: SMs or CUs, L2, memory, warp size and theoretical bandwidth read from the
      driver; compute peaks measured with quick matmuls (labelled as measured). On AMD the bandwidth
      is also measured with copies, and the larger of the two kept (see :func:`_unknown_gpu`).
      ``sources["name"]`` says it is not in perfkit's table and what was read and what measured.
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


_RUNTIME_SOURCE = "read at run time (torch.cuda.get_device_properties)"


def _cuda_spec() -> DeviceSpec:
    """The GPU in use (CUDA or ROCm): its table entry with the driver's counts, else what the driver
    reports plus quick measurements."""
    props = driver_properties()
    entry = match_driver_name(props.name)
    if entry is not None:
        return _known_gpu(KNOWN_DEVICES[entry], props)
    return _unknown_gpu(props, "AMD" if gpu_runtime() == "rocm" else "NVIDIA")


def _known_gpu(base: DeviceSpec, props: DriverProperties) -> DeviceSpec:
    """``base`` (a table entry) with the SM/CU count, L2 and memory the driver reports."""
    runtime = _RUNTIME_SOURCE
    sources = dict(base.sources, sms=runtime, memory_bytes=runtime, name=f"matched to table entry {base.name}")
    l2 = props.l2_bytes
    if l2 and base.dies > 1 and base.l2_bytes and l2 < base.l2_bytes:
        # ROCm reports one XCD's L2 (4 MiB on an MI300X); the table holds all the dies' (32 MiB)
        l2 *= base.dies
        sources["l2_bytes"] = f"{runtime}: one die's L2 × {base.dies} dies"
    elif l2:
        sources["l2_bytes"] = runtime
    return replace(base, sms=props.sms, l2_bytes=l2 or base.l2_bytes, memory_bytes=props.memory_bytes,
                   driver_name=props.name, sources=sources)


def _unknown_gpu(props: DriverProperties, vendor: str) -> DeviceSpec:
    """A GPU perfkit's table lacks: what the driver reports, the rest measured here (quick matmuls).

    Memory bandwidth: the driver's memory clock × bus width, double data rate. On AMD that reading
    is not trusted alone (ROCm may report an HBM3 clock at a quarter of the pin rate, e.g. 1.3 GHz
    on an MI300X for 5.2 Gb/s pins: × 2 then gives half the real figure), so copies are measured
    too and the larger figure kept: a peak is never below a measured copy."""
    runtime, amd = _RUNTIME_SOURCE, vendor == "AMD"
    units = "CUs" if amd else "SMs"
    theory = theoretical_bandwidth(props.memory_clock_khz, props.memory_bus_bits)
    theory_src = "theoretical from memory clock × bus width (driver)"
    peaks, peak_src = measure_peaks("cuda")
    bw, bw_src = theory, theory_src
    if theory is None or amd:
        copy, copy_src = measure_copy_bandwidth("cuda")
        if theory is None or (copy is not None and copy > theory):
            bw, bw_src = copy, copy_src + (f"; above the {theory_src}" if theory else "")
    read = [f"{units[:-1]} count", "L2", "memory size", *(["warp size"] if props.warp_size else []),
            *(["memory bandwidth (clock × bus width)"] if bw_src == theory_src else [])]
    copied = bw is not None and bw_src != theory_src
    measured = ["compute peaks (quick matmuls)", *(["memory bandwidth (copies)"] if copied else [])]
    arch = f" ({props.arch})" if props.arch else ""
    note = (f"not in perfkit's table: {vendor} GPU{arch}; read from the driver: {', '.join(read)}; "
            f"measured here: {', '.join(measured)}" + ("; dies unknown (counted as 1)" if amd else ""))
    sources = {"name": note, "sms": runtime, "l2_bytes": runtime, "memory_bytes": runtime,
               "mem_bandwidth": bw_src if bw is not None else "unknown", "peaks": peak_src}
    return DeviceSpec(
        name=props.name, kind="gpu", sms=props.sms, mem_bandwidth=bw, l2_bytes=props.l2_bytes,
        memory_bytes=props.memory_bytes, peaks=peaks, driver_name=props.name, sources=sources, vendor=vendor,
        warp_size=props.warp_size or (64 if amd and (props.arch or "").startswith("gfx9") else 32))


def _cpu_spec() -> DeviceSpec:
    cores = os.cpu_count()
    try:
        l2 = os.sysconf("SC_LEVEL2_CACHE_SIZE") or None
    except (ValueError, OSError, AttributeError):
        l2 = None
    mem = int(psutil.virtual_memory().total)
    peaks, peak_src = measure_peaks("cpu")
    bw, bw_src = measure_copy_bandwidth("cpu")
    name = cpu_name()
    return DeviceSpec(
        name=name, kind="cpu", sms=cores, mem_bandwidth=bw, l2_bytes=l2, memory_bytes=mem,
        peaks=peaks,
        sources={"name": "this machine (no GPU found: torch sees neither a CUDA nor a ROCm GPU)",
                 "sms": "os.cpu_count()", "l2_bytes": "sysconf", "memory_bytes": "psutil.virtual_memory()",
                 "mem_bandwidth": bw_src, "peaks": peak_src},
    )
