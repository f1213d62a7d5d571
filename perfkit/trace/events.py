"""The events of a trace perfkit needs, collected while the file streams past (:mod:`.stream`).

Kineto has written two schemas. The current one (torch ≥ 1.10) names CPU ops ``cpu_op``, kernels
``kernel``, copies ``gpu_memcpy`` / ``gpu_memset`` and launches ``cuda_runtime`` / ``cuda_driver``; the
2021 one (torch 1.8–1.9) names them ``Operator``, ``Kernel``, ``Memcpy`` / ``Memset`` and ``Runtime``, and
spells a kernel's op id ``external id``. Both are read. Of the rest only ``nn.Module`` frames (the
layers, recorded with ``with_modules=True`` and ``with_stack=True``), ``ProfilerStep#N`` annotations
and GPU-side step annotations are kept; Python frames, memory events and flow arrows are dropped as
they stream past. An op's arguments (``Input Dims``, ``Input type``, ``Concrete Inputs``, ``Input
Strides``) are kept only for the ops perfkit maps, so memory grows with the ops that matter.

Times stay in the trace's microseconds here; :mod:`.join` turns them into seconds.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .stream import TraceFormatError, read_document

__all__ = ["KNOWN_SCHEMAS", "TraceEvents", "collect"]

#: ``schemaVersion`` values perfkit reads (a trace without one is the 2021 schema or a Chrome trace).
KNOWN_SCHEMAS = (1,)

_OP_CATS = {"cpu_op": "op", "Operator": "op", "user_annotation": "annotation", "python_function": "module"}
_GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
             "gpu_memset": "memset", "Memset": "memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "hip_driver"}
_MODULE = "nn.Module: "


@dataclass
class TraceEvents:
    """What :func:`collect` kept of one trace file (lists of tuples, microseconds)."""

    path: Path
    #: (name, kind, thread, ts_us, end_us, external_id, sequence, fwd_thread, args or None); kind is "op",
    #: "annotation" (ProfilerStep#N, user ranges) or "module" (an nn.Module frame)
    ops: list[tuple] = field(default_factory=list)
    #: correlation id → (thread, ts_us, launch name)
    launches: dict[int, tuple[str, float, str]] = field(default_factory=dict)
    #: (name, kind, ts_us, dur_us, device, stream, correlation, external_id, bytes)
    kernels: list[tuple] = field(default_factory=list)
    #: (name, ts_us, end_us) of GPU-side ProfilerStep annotations
    gpu_steps: list[tuple] = field(default_factory=list)
    top: dict[str, Any] = field(default_factory=dict)
    first_ts_us: float = float("inf")
    events: int = 0

    @property
    def device_names(self) -> list[str]:
        """The GPUs the trace's ``deviceProperties`` names (one per device of the node)."""
        return [str(d.get("name", "")) for d in self.top.get("deviceProperties") or [] if isinstance(d, dict)]

    @property
    def rank(self) -> int:
        """The process's rank in a distributed run (``distributedInfo``), 0 when not recorded."""
        info = self.top.get("distributedInfo") or {}
        return int(info.get("rank", 0)) if isinstance(info, dict) else 0

    @property
    def world_size(self) -> int:
        info = self.top.get("distributedInfo") or {}
        return int(info.get("world_size", 1)) if isinstance(info, dict) else 1


def _thread(event: dict) -> str:
    return f"{event.get('pid')}:{event.get('tid')}"


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def collect(path: str | os.PathLike, keep_args: Callable[[str], bool],
            on_bytes: Callable[[int], None] | None = None) -> TraceEvents:
    """Stream ``path`` and keep what perfkit needs; ``keep_args(name)`` says which ops' arguments to keep.

    Raises :class:`~.stream.TraceFormatError` for a file that is not a trace or whose ``schemaVersion``
    perfkit does not know.
    """
    out = TraceEvents(Path(path))
    intern = sys.intern
    ops, launches, kernels, gpu_steps = out.ops, out.launches, out.kernels, out.gpu_steps

    def on_event(e: dict) -> None:
        out.events += 1
        if e.get("ph") != "X":
            return
        cat = e.get("cat")
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            return
        name = e.get("name", "")
        if ts < out.first_ts_us and cat != "Trace":
            out.first_ts_us = ts
        args = e.get("args") or {}
        if cat in _GPU_CATS:
            ext = args.get("External id", args.get("external id"))
            kernels.append((intern(str(name)), _GPU_CATS[cat], ts, dur, _int(args.get("device"), 0),
                            _int(args.get("stream"), 0), _int(args.get("correlation")), _int(ext),
                            _int(args.get("bytes"), 0)))
        elif cat in _RUNTIME_CATS:
            corr = args.get("correlation")
            if corr is not None:
                launches[_int(corr)] = (intern(_thread(e)), ts, intern(str(name)))
        elif cat in _OP_CATS:
            kind = _OP_CATS[cat]
            if kind == "module":
                if not name.startswith(_MODULE):
                    return
                name = name[len(_MODULE):]
            kept = None
            if kind == "op" and keep_args(name):
                kept = (args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"),
                        args.get("Input Strides"))
            ops.append((intern(name), kind, intern(_thread(e)), ts, ts + dur, _int(args.get("External id")),
                        _int(args.get("Sequence number")), _int(args.get("Fwd thread id"), 0), kept))
        elif cat == "gpu_user_annotation" and name.startswith("ProfilerStep#"):
            gpu_steps.append((name, ts, ts + dur))

    out.top = read_document(path, on_event, on_bytes)
    version = out.top.get("schemaVersion")
    if version is not None and version not in KNOWN_SCHEMAS:
        raise TraceFormatError(f"{out.path}: unknown Kineto schemaVersion {version!r}; perfkit reads "
                               f"{', '.join(map(str, KNOWN_SCHEMAS))} and the 2021 schema (no schemaVersion "
                               f"or categories Operator/Kernel)")
    if out.events == 0:
        raise TraceFormatError(f"{out.path}: traceEvents is empty: nothing was profiled")
    return out
