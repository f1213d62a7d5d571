"""Record a ``torch.profiler`` trace of one step, the kind :func:`perfkit.diagnose_trace` reads: :func:`capture_trace`.

The step runs ``warmup`` times unprofiled (lazy initialisation, cuDNN/cuBLAS set-up, optimizer state), then
twice under the profiler on a schedule (``wait=0, warmup=1, active=1``): the first profiled step is
discarded (the profiler's own start-up lands in it), the second is kept as ``ProfilerStep#1``, the span
:mod:`perfkit.trace.join` groups ops and kernels by. Shapes are recorded (``record_shapes``: what
:mod:`perfkit.trace.opmap` prices); Python stacks and memory are not (they multiply the file's size and
the reader drops them). On CUDA each step ends with a synchronize, so all of its kernels fall in its window.

The Chrome trace is exported into the destination folder under a hidden name, stripped of the machine's
name (:data:`SANITIZED`), gzipped (level 9, no name
or time in the gzip header) and renamed into place only if it fits in ``max_bytes``; then ``<name>.json``
(the metadata) is written beside ``<name>.json.gz``. A file over the limit is refused, never truncated:
nothing is left behind. The metadata is the caller's ``meta`` (what ran, the device and software) plus
what this module measured (:data:`CAPTURE_KEYS`).
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from .._files import write_atomic
from .._validate import folder, non_negative_int, positive_int, zero_arg_callable
from ..placement import resolve_device
from .stream import read_document

__all__ = ["CAPTURE_KEYS", "MAX_TRACE_BYTES", "SANITIZED", "capture_trace", "metadata_path"]

#: The largest gzipped trace the book commits: 3 MB (10**6 bytes).
MAX_TRACE_BYTES = 3_000_000
#: Keys :func:`capture_trace` adds to the caller's ``meta`` (``meta`` must not hold them).
CAPTURE_KEYS = ("recorded_at", "profiler", "file", "bytes", "json_bytes", "events", "sha256", "sanitized")
#: What is changed in the exported trace before it is kept: no machine's name (as no recording holds one).
SANITIZED = "host_name removed; traceName set to the file's name"
_SUFFIX = ".json.gz"


def metadata_path(path: str | os.PathLike) -> Path:
    """The metadata file of the trace ``path``: ``<name>.json`` beside ``<name>.json.gz``."""
    p = Path(path)
    return p.with_name(p.name[: -len(_SUFFIX)] + ".json")


def _check(step: Any, path: Any, meta: Any, max_bytes: Any) -> tuple[Callable[[], Any], Path, dict, int]:
    step = zero_arg_callable("step", step)
    path = folder("path", path)
    if not path.name.endswith(_SUFFIX) or path.name == _SUFFIX:
        raise ValueError(f"path must name a gzipped trace file ending in {_SUFFIX} "
                         f"(e.g. traces/resnet50.json.gz), got {str(path)!r}")
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a dict of what ran (model, mode, dtype, ...), got {type(meta).__name__}")
    taken = [k for k in CAPTURE_KEYS if k in meta]
    if taken:
        raise ValueError(f"meta must not hold the keys capture_trace writes itself: {taken}")
    try:
        json.dumps(dict(meta))
    except (TypeError, ValueError) as e:
        raise TypeError(f"meta must be JSON-serializable (strings, numbers, lists, dicts): {e}") from None
    return step, path, dict(meta), positive_int("max_bytes", max_bytes)


def _gzip(src: Path, dst: Path) -> None:
    """``src`` gzipped into ``dst``: level 9, no file name and a zero time in the header (same bytes each time)."""
    with open(src, "rb") as fin, open(dst, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _sanitize(plain: Path, name: str) -> None:
    """Drop the machine's name torch writes at the top of the trace; name the trace by its file."""
    doc = json.loads(plain.read_text(encoding="utf-8"))
    doc.pop("host_name", None)
    doc["traceName"] = name
    plain.write_text(json.dumps(doc), encoding="utf-8")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def capture_trace(step: Callable[[], Any], path: str | os.PathLike, *, meta: Mapping[str, Any], warmup: int = 2,
                  max_bytes: int = MAX_TRACE_BYTES, device: str = "auto") -> dict[str, Any]:
    """Profile one call of ``step`` and write ``path`` (a ``.json.gz`` Chrome trace) and its ``.json`` metadata.

    ``step``: a zero-argument callable doing one step (a training step, a decoding step) on ``device``
    ("auto", "cuda" or "cpu"; CUDA adds GPU activity to the trace). ``warmup``: unprofiled calls first.
    ``meta``: what ran and where (JSON-serializable); the metadata written is ``meta`` plus
    :data:`CAPTURE_KEYS`: ``recorded_at`` (ISO 8601 UTC), ``profiler`` (its settings), ``file``, ``bytes``
    (of the gzipped file), ``json_bytes`` (uncompressed), ``events`` (in ``traceEvents``), ``sha256`` (of
    the gzipped file), ``sanitized`` (what was changed). Returns that dict. Raises ``ValueError`` naming the file, its size and the limit
    when the gzipped trace exceeds ``max_bytes`` bytes, and leaves no file behind (nor on any error).
    """
    step, path, meta, max_bytes = _check(step, path, meta, max_bytes)
    warmup = non_negative_int("warmup", warmup)
    device = resolve_device(device)
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])

    def one() -> None:
        step()
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        one()
    recorded_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with profile(activities=activities, record_shapes=True, with_stack=False, profile_memory=False,
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        for _ in range(2):
            one()
            prof.step()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, plain = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".json")
    os.close(fd)
    packed, replaced = Path(f"{plain}.gz"), False
    try:
        prof.export_chrome_trace(plain)
        _sanitize(Path(plain), path.name)
        events = [0]
        read_document(plain, lambda _e: events.__setitem__(0, events[0] + 1))  # a check that it reads back
        _gzip(Path(plain), packed)
        size = packed.stat().st_size
        if size > max_bytes:
            raise ValueError(f"the trace {path} would be {size:,} bytes gzipped, over the limit max_bytes="
                             f"{max_bytes:,}; nothing was written (profile less: fewer layers, one step)")
        info = {**meta, "recorded_at": recorded_at,
                "profiler": {"activities": [a.name for a in activities], "record_shapes": True,
                             "with_stack": False, "profile_memory": False, "warmup_steps": warmup,
                             "schedule": "wait=0, warmup=1, active=1", "recorded_step": "ProfilerStep#1"},
                "file": path.name, "bytes": size, "json_bytes": Path(plain).stat().st_size,
                "events": events[0], "sha256": _sha256(packed), "sanitized": SANITIZED}
        os.replace(packed, path)  # the trace first: a reader trusts a trace only with its metadata
        replaced = True
        write_atomic(metadata_path(path), (json.dumps(info, indent=2) + "\n").encode("utf-8"))
        return info
    except BaseException:
        if replaced:  # the trace is in place but its metadata could not be written: neither is trusted
            path.unlink(missing_ok=True)
            metadata_path(path).unlink(missing_ok=True)
        raise
    finally:
        Path(plain).unlink(missing_ok=True)
        packed.unlink(missing_ok=True)
