"""The collective-communication experiment: a real all-reduce and all-gather sweep with ``torch.distributed``.

``collective_sizes`` starts a group of processes, one per rank (:mod:`.workers`), times each collective
and size in all of them, and stops them before it returns, whatever happens. On a machine with two or
more GPUs it runs NCCL, one GPU per rank; anywhere else, gloo on CPU tensors (2 ranks by default). Rows
hold the size as nccl-tests counts it, ``time_s`` (the median over the timed calls of the slowest rank's
time), the algorithm and bus bandwidths (:mod:`perfkit.collectives`' conventions) and ``predicted_s``
(the α-β model on the GPUs' link; NaN for gloo on a CPU).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import pandas as pd

from ..._validate import dtype_name, one_of, positive_int, positive_number, sequence_of
from ...collectives import bus_bandwidth, collective_time
from ...display import Note, show
from ...dtypes import itemsize
from ...measurement import Measurement, NoiseWarning, noise_message
from ...placement import ensure_fits, resolve_device
from ...units import GIGA, MiB
from ...experiments.measure import known_names, measured_spec, sweep, timing_row
from ...experiments.registry import gpu_count, register
from .workers import Ranks

__all__ = ["BACKENDS", "COLLECTIVE_COLUMNS", "COLLECTIVE_DTYPES", "COLLECTIVE_OPS", "LINK_OF_GPU",
           "collective_sizes"]

#: The collectives measured, by nccl-tests' names.
COLLECTIVE_OPS: tuple[str, ...] = ("all-reduce", "all-gather")
#: ``backend``: "auto" (NCCL with ≥ 2 GPUs, else gloo), "gloo" (CPU tensors) or "nccl" (one GPU per rank).
BACKENDS: tuple[str, ...] = ("auto", "gloo", "nccl")
#: Element dtypes accepted (the bytes moved are what count; a sum in float16 costs a CPU more).
COLLECTIVE_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
#: The link between GPUs of each kind, where it is clearly known: SXM boards on an NVSwitch (HGX), every
#: GPU reaching any other over all its NVLinks. Other GPUs (PCIe cards, with or without bridges) get NaN.
LINK_OF_GPU: dict[str, str] = {"H100-SXM": "nvlink4", "H200": "nvlink4"}

_KiB = 1 << 10
_CPU_SIZES = tuple(_KiB << i for i in range(0, 15))  # 1 KiB … 16 MiB, every power of two
_QUICK_CPU_SIZES = (_KiB, 64 * _KiB, 4 * MiB)
_GPU_SIZES = tuple(_KiB << i for i in range(0, 21))  # 1 KiB … 1 GiB
_QUICK_GPU_SIZES = (_KiB, 64 * _KiB, 4 * MiB, 256 * MiB)
#: Seconds of timed calls per point (each point also takes a warm-up and a few calls to size the run).
_BUDGET_S = {"cpu": 0.2, "quick": 0.03, "cuda": 0.1}
#: The whole run's default deadline, seconds: ranks start, meet, measure and leave within it.
_TIMEOUT_S = {"cpu": 120.0, "cuda": 600.0}
_CPU_RANKS = 2  # each rank busy-waits on its own core: more ranks than cores measure the scheduler

COLLECTIVE_COLUMNS: dict[str, str] = dict(
    op="the collective: 'all-reduce' (a sum) or 'all-gather'",
    backend="torch.distributed backend: 'gloo' (CPU tensors: shared memory and loopback TCP) or 'nccl'",
    device="where the tensors live: 'cpu' (gloo) or 'cuda' (nccl, one GPU per rank)",
    n_ranks="processes in the group (nccl: one per GPU)",
    size_bytes="the buffer as nccl-tests counts it: all-reduce, the buffer each rank reduces; all-gather, the "
               "gathered output (each rank gives size_bytes / n_ranks; rounded down to a multiple of "
               "n_ranks · itemsize), bytes",
    dtype="element dtype",
    iterations="timed calls, after warm-up: 10 samples of k back-to-back calls, each sample after a barrier",
    time_s="median over the samples of the slowest rank's seconds per call (a collective ends when its "
           "slowest rank does), seconds",
    iqr_s="inter-quartile range over the samples, seconds",
    algbw_GBps="algorithm bandwidth, size_bytes / time_s, 1e9 bytes/s",
    busbw_GBps="bus bandwidth, algbw × nccl-tests' factor (pk.collectives.bus_factor: all-reduce 2(n−1)/n, "
               "all-gather (n−1)/n), comparable with a link's bandwidth whatever n, 1e9 bytes/s",
    predicted_s="pk.collectives.collective_time (ring) on the GPUs' link (LINK_OF_GPU: NVLink 4 for H100 and "
                "H200 SXM), seconds; NaN for gloo on a CPU (shared memory has no link model) and for GPUs "
                "whose link is not known")


def _cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _backend(backend: Any, device: str) -> tuple[str, str, int]:
    """(backend, device, GPUs): ``backend`` checked against :data:`BACKENDS` and this machine."""
    asked = one_of("backend", backend, BACKENDS)
    gpus = gpu_count() if device == "cuda" else 0
    if asked == "nccl" and gpus < 2:
        have = f"torch sees {gpus}" if device == "cuda" else "device='cpu' asks for none"
        raise ValueError(f"backend='nccl' needs at least 2 CUDA GPUs, one per rank; {have}: use backend='gloo' "
                         "(CPU tensors) or 'auto'")
    if asked == "nccl" or (asked == "auto" and gpus >= 2):
        return "nccl", "cuda", gpus
    return "gloo", "cpu", gpus


def _ranks(n_ranks: Any, backend: str, gpus: int) -> int:
    """``n_ranks`` (default: 2 on a CPU, every GPU with nccl), refused below 2 or beyond the cores or GPUs."""
    n = positive_int("n_ranks", (_CPU_RANKS if backend == "gloo" else gpus) if n_ranks is None else n_ranks)
    if n < 2:
        raise ValueError(f"n_ranks must be at least 2 (a collective of one rank moves nothing), got {n}")
    if backend == "nccl":
        have, what = gpus, "GPUs (nccl: one per rank)"
    else:
        have, what = _cores(), "CPU cores (gloo: one busy rank per core)"
    if n > have:
        raise ValueError(f"n_ranks={n} is more than the {have} {what} this machine has; ask for at most {have}")
    return n


def _points(ops: list[str], sizes: list[int], n: int, dtype: str) -> list[tuple[str, int]]:
    """(op, bytes moved) for each op and size: all-reduce rounds to whole elements, all-gather to whole
    elements per rank (``n · itemsize``); repeated points once."""
    unit = {"all-reduce": itemsize(dtype), "all-gather": n * itemsize(dtype)}
    small = [s for s in sizes if s < unit["all-gather" if "all-gather" in ops else "all-reduce"]]
    if small:
        raise ValueError(f"sizes_bytes {small} are too small: each rank needs at least one {dtype} element "
                         f"({max(unit[op] for op in ops)} bytes with {n} ranks)")
    return list(dict.fromkeys((op, s // unit[op] * unit[op]) for op in ops for s in sizes))


def _need(points: list[tuple[str, int]], n: int) -> int:
    """Bytes one rank holds at once: all-reduce its buffer; all-gather the output and its 1/n part."""
    return max(nbytes + (nbytes // n if op == "all-gather" else 0) for op, nbytes in points)


def _link(device: str) -> str | None:
    """The link between the GPUs measured (:data:`LINK_OF_GPU`); None on a CPU or an unknown GPU."""
    spec = measured_spec(device, cpu=False) if device == "cuda" else None
    return LINK_OF_GPU.get(spec.name) if spec is not None else None


def _row(op: str, nbytes: int, times: list[float], calls: int, *, backend: str, device: str, n: int, dtype: str,
         link: str | None) -> dict[str, Any]:
    """One point's row from its samples (the slowest rank's seconds per call, ``calls`` calls each); a noisy
    point warns (``sweep`` counts it)."""
    m = Measurement(samples=times, label=f"{op} {nbytes} bytes, {n} ranks, {backend}", device=device,
                    calls_per_sample=calls)
    if (msg := noise_message(m.label, m.noise)) is not None:
        warnings.warn(msg, NoiseWarning, stacklevel=2)
    t = m.median
    return {"op": op, "backend": backend, "device": device, "n_ranks": n, "size_bytes": nbytes, "dtype": dtype,
            "iterations": m.n * calls, **timing_row(m), "algbw_GBps": nbytes / t / GIGA,
            "busbw_GBps": bus_bandwidth(op, nbytes, n, t) / GIGA,
            "predicted_s": collective_time(op, nbytes, n, link) if link is not None else math.nan}


#: Tests only: ``(rank, "raise" | "hang" | "exit", point)`` makes that rank fail at that point (−1: the
#: rendezvous). The ranks are other processes, so this is passed to them with the run's settings.
_FAULT: tuple[int, str, int] | None = None


@register("collective_sizes", "A real all-reduce and all-gather with torch.distributed, 1 KiB to 1 GiB over NCCL "
          "on every GPU (gloo on 2 CPU processes elsewhere): time, algorithm and bus bandwidth against the "
          "α-β model", COLLECTIVE_COLUMNS, needs=("gpus2",))
def collective_sizes(*, ops=COLLECTIVE_OPS, sizes_bytes=None, n_ranks=None, backend="auto", device="auto",
                     dtype="float32", quick=False, progress=True, on_row=None, timeout_s=None) -> pd.DataFrame:
    """Each collective and size, measured by ``n_ranks`` processes that start and stop inside the call.

    ``backend="auto"``: NCCL when ``device`` is CUDA and torch sees at least 2 GPUs (``n_ranks``: all of
    them; sizes 1 KiB … 1 GiB, every power of two; ``quick``: 1 KiB, 64 KiB, 4 MiB, 256 MiB); otherwise
    gloo on CPU tensors, with a note on a one-GPU machine (``n_ranks`` 2: each rank keeps a core busy;
    1 KiB … 16 MiB; ``quick``: 1 KiB, 64 KiB, 4 MiB). Sizes are nccl-tests' (all-gather: the gathered
    output). Each point: a warm-up, then 10 samples of k back-to-back calls (k: as many as fill a short
    budget), each sample after a barrier; its row is handed to ``on_row`` as soon as rank 0 reports it. ``timeout_s`` (default 120 s on a CPU,
    600 s with NCCL) bounds the whole run: a rank that fails, dies or hangs raises ``RuntimeError``
    naming it, and every rank is stopped before the call returns or raises (an interrupt too).
    """
    names = known_names("ops", ops, COLLECTIVE_OPS)
    d = dtype_name("dtype", dtype, COLLECTIVE_DTYPES)
    asked_device = resolve_device(device)
    backend_, device_, gpus = _backend(backend, asked_device)
    n = _ranks(n_ranks, backend_, gpus)
    default = (_QUICK_CPU_SIZES if quick else _CPU_SIZES) if device_ == "cpu" else \
        (_QUICK_GPU_SIZES if quick else _GPU_SIZES)
    sizes = sequence_of("sizes_bytes", default if sizes_bytes is None else sizes_bytes, positive_int)
    points = _points(list(dict.fromkeys(names)), sizes, n, d)
    deadline = positive_number("timeout_s", _TIMEOUT_S[device_] if timeout_s is None else timeout_s)
    ensure_fits(_need(points, n) * (n if device_ == "cpu" else 1), device_, what="collective_sizes")
    link = _link(device_)
    if asked_device == "cuda" and device_ == "cpu":
        show(Note(f"This machine has {gpus} CUDA GPU{'s' if gpus != 1 else ''}; NCCL needs one per rank and at "
                  "least 2 ranks, so the ranks run gloo on CPU tensors (the backend and device columns say so).",
                  title="Collectives on the CPU"))
    budget = _BUDGET_S["quick" if quick and device_ == "cpu" else device_]
    ranks = Ranks(n, {"backend": backend_, "points": points, "dtype": d, "budget_s": budget, "fault": _FAULT},
                  deadline)
    index = {p: i for i, p in enumerate(points)}
    finished = False

    def measure(point: tuple[str, int]) -> dict[str, Any]:
        times, calls = ranks.samples(index[point])
        return _row(*point, times, calls, backend=backend_, device=device_, n=n, dtype=d, link=link)

    try:
        frame = sweep(points, measure, on_row=on_row, progress=progress, desc="collective sizes")
        finished = True
        return frame
    finally:
        ranks.close(finished=finished)

