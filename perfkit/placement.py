"""Where a measurement runs: the torch device, whether its tensors fit in free memory, one CPU thread.

Shared by the book's experiments and the advisor's ``measure=True``. ``torch`` is imported when a
function needs it, so importing perfkit stays light.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import psutil

from ._validate import one_of
from .timing import Measurement, bench
from .units import GiB

__all__ = ["ensure_fits", "free_memory", "lean_bench", "one_cpu_thread", "resolve_device"]


def resolve_device(device: str = "auto") -> str:
    """``"cuda"`` or ``"cpu"``; ``"auto"`` picks CUDA when a GPU is visible."""
    device = one_of("device", device, ("auto", "cuda", "cpu"))
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was asked for but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return device


def free_memory(device: str) -> int:
    """Bytes that can still be allocated on ``device`` ("cuda" or "cpu")."""
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)
    return int(psutil.virtual_memory().available)


def ensure_fits(nbytes: int, device: str, *, what: str, headroom: float = 0.9) -> None:
    """Refuse, before allocating, an experiment whose tensors need more than the free memory.

    Raises ``ValueError`` naming the experiment, the bytes it needs and the bytes available.
    """
    free = free_memory(device)
    if nbytes > headroom * free:
        raise ValueError(
            f"{what} needs {nbytes / GiB:.2f} GiB but only {free / GiB:.2f} GiB is free on {device}; "
            "choose smaller sizes (the sweep was refused before allocating anything)"
        )


@contextlib.contextmanager
def one_cpu_thread(device: str) -> Iterator[None]:
    """Run torch on one thread if ``device`` is ``"cpu"`` (busy machines stall parallel kernels)."""
    if device != "cpu":
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def lean_bench(fn: Callable[[], Any], device: str, label: str) -> Measurement:
    """:func:`perfkit.timing.bench` with its defaults on a GPU; on a CPU on one thread, sampling
    for at most 0.3 s (a chapter's live run takes seconds)."""
    budget = {"warmup_s": 0.005, "rep_s": 0.02, "max_time_s": 0.3} if device == "cpu" else {}
    with one_cpu_thread(device):
        return bench(fn, device=device, label=label, **budget)
