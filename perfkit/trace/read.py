"""Open a trace file, check it, stream it and join it: :func:`read_trace` and what :func:`perfkit.diagnose_trace`
builds on (:func:`load`)."""

from __future__ import annotations

import os
import struct
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..devices import DeviceSpec, device_spec, known_devices_text
from .events import collect
from .join import Joined, join
from .opmap import MAPPED

__all__ = ["NoGpuKernels", "PROGRESS_BYTES", "UnknownTraceDevice", "load", "read_trace",
           "trace_spec"]

#: Files whose text is larger than this get a progress bar while they stream.
PROGRESS_BYTES = 50 << 20


class NoGpuKernels(ValueError):
    """A trace without GPU kernels: a CPU-only profile (:func:`perfkit.diagnose_trace` reports its CPU op times)."""


class UnknownTraceDevice(LookupError):
    """The trace's GPU is not in perfkit's device table: pass ``spec``."""


def _path(path: str | os.PathLike) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a trace file's path (a Kineto .json or .json.gz), got {type(path).__name__}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"trace file not found: {p}")
    return p


def _text_size(p: Path) -> int | None:
    """The size of the file's text: the file's size, or for gzip the size its trailer records (mod 4 GiB)."""
    with open(p, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return p.stat().st_size
        if p.stat().st_size < 4:  # not even a gzip trailer: reading it says what is wrong
            return None
        fh.seek(-4, os.SEEK_END)
        return struct.unpack("<I", fh.read(4))[0] or None


def load(path: str | os.PathLike, progress: bool = True) -> Joined:
    """Stream ``path`` and join its kernels to their ops (:mod:`.join`); a progress bar on a large file."""
    p = _path(path)
    size = _text_size(p)
    bar = None
    if progress and size and size > PROGRESS_BYTES:
        from tqdm.auto import tqdm

        bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {p.name}", leave=False)
    try:
        events = collect(p, MAPPED.__contains__, bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    return join(events)


def read_trace(path: str | os.PathLike, progress: bool = True) -> pd.DataFrame:
    """Every GPU kernel, copy and memset of a ``torch.profiler`` trace, joined to the op that launched it.

    ``path``: a Kineto JSON file, plain or gzipped, from torch.profiler on CUDA or ROCm (the current
    schema and 2021's). One row per kernel with the columns :data:`perfkit.trace.KERNEL_COLUMNS`:
    ``start_s`` and ``time_s`` (seconds from the trace's first event), ``op`` (the op perfkit charges it
    to; "" when it joins none), ``joined_by`` ("correlation", "external id" or "none"), ``mapped``
    (perfkit models that op), ``layer``, ``pass``, ``step``, ``stream``. Raises
    :class:`~.stream.TraceFormatError` for a file that is not a trace, :class:`NoGpuKernels` for a CPU-only
    profile.
    """
    joined = load(path, progress)
    if joined.kernels.empty:
        raise NoGpuKernels(f"{Path(path)}: no GPU kernels in this trace (a CPU-only profile); "
                           "pk.diagnose_trace reports its CPU op times")
    return joined.kernels


def trace_spec(joined: Joined, spec: str | DeviceSpec | None) -> DeviceSpec | None:
    """``spec`` resolved, else the GPU the trace's ``deviceProperties`` names (its table entry, with the
    trace's name as ``driver_name``: ``MI300X (AMD Instinct MI300X VF)``); None for a CPU-only trace.

    Raises :class:`UnknownTraceDevice` (a ``LookupError``) naming the GPU and the known devices, by vendor,
    when the trace's GPU is not in perfkit's table and no ``spec`` is given."""
    if isinstance(spec, DeviceSpec):
        return spec
    if spec is not None:
        if not isinstance(spec, str):
            raise TypeError(f"spec must be a device name such as 'H100-SXM' or a DeviceSpec, got {spec!r}")
        return device_spec(spec)
    names = joined.events.device_names
    if joined.kernels.empty:
        return None
    used = sorted(set(joined.kernels["device"]))
    name = names[used[0]] if used and used[0] < len(names) else (names[0] if names else "")
    if not name:
        raise UnknownTraceDevice(f"{joined.events.path}: the trace does not name its GPU (no deviceProperties); "
                                 f"pass spec (--spec), one of the known devices: {known_devices_text()}")
    try:
        found = device_spec(name)
    except LookupError:
        raise UnknownTraceDevice(f"{joined.events.path}: perfkit does not know the trace's GPU {name!r}; pass "
                                 f"spec (--spec) naming the closest of the known devices: "
                                 f"{known_devices_text()}") from None
    return found if name == found.name else replace(found, driver_name=name)
