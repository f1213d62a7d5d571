"""Where a measurement runs: the torch device, whether its tensors fit in free memory, one CPU thread,
and the timer.

Shared by the book's experiments and the advisor's ``measure=True``. ``torch`` is imported when a
function needs it, so importing perfkit stays light.

**The seam.** Every experiment times through :func:`timer` (or :func:`lean_bench`), picks its
device through :func:`resolve_device` and asks which device it measures on through
:func:`measured_on`. All three consult the :class:`Runtime` in use, looked up at call time: by
default the timer is :func:`perfkit.timing.bench`, torch says whether a GPU is visible, and the
spec is :func:`perfkit.devices.current_device`. :func:`use` swaps any of them for a ``with``
block, for another timer (``use(timer=functools.partial(pk.bench, cuda_graph=True))``) or, in
tests, a pretend GPU that allocates nothing::

    with placement.use(timer=lambda fn, **kw: Measurement([1e-3]), device="cuda",
                       spec=pk.device_spec("H100-SXM"), tensor_device="meta"):
        frame = gemm.gemm_sizes(quick=True)   # the GPU code path; nothing runs on a GPU

Kernel builders allocate on :func:`tensor_device`: with ``tensor_device="meta"`` a pretend GPU's
tensors live on torch's meta device (shapes and dtypes, no storage), so building them costs nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import psutil

from . import devices, timing
from ._validate import one_of
from .devices import DeviceSpec
from .timing import Measurement
from .units import GiB

__all__ = ["Runtime", "ensure_fits", "free_memory", "lean_bench", "measured_on", "one_cpu_thread",
           "resolve_device", "runtime", "tensor_device", "timer", "use"]


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What experiments measure with; ``None`` fields keep the default.

    - ``timer``: called as :func:`perfkit.timing.bench` is (``timer(fn, device=..., label=..., **options)``)
      and returns a :class:`~perfkit.measurement.Measurement`; default ``perfkit.timing.bench``.
    - ``device``: ``"cuda"`` or ``"cpu"``, the device ``"auto"`` picks and whether a GPU counts as
      visible; default: ask torch.
    - ``spec``: the :class:`~perfkit.devices.DeviceSpec` measured on; default
      :func:`perfkit.devices.current_device`.
    - ``free_bytes``: the bytes free on the GPU; default: ask the driver (a pretend GPU: its
      ``spec.memory_bytes``).
    - ``tensor_device``: the torch device tensors are allocated on instead of the device measured
      on; ``"meta"`` for a pretend GPU (no storage, ops compute nothing); default: the device itself.
    """

    timer: Callable[..., Measurement] | None = None
    device: str | None = None
    spec: DeviceSpec | None = None
    free_bytes: int | None = None
    tensor_device: str | None = None


_RUNTIME = Runtime()


def runtime() -> Runtime:
    """The :class:`Runtime` in use (the defaults outside a :func:`use` block)."""
    return _RUNTIME


@contextlib.contextmanager
def use(*, timer: Callable[..., Measurement] | None = None, device: str | None = None,
        spec: DeviceSpec | None = None, free_bytes: int | None = None,
        tensor_device: str | None = None) -> Iterator[Runtime]:
    """Measure with another timer, device or spec inside the ``with`` block (nested blocks keep
    what they do not set). ``device="cuda"`` with a ``spec`` is a pretend GPU: nothing asks the
    driver, and its free memory is ``spec.memory_bytes`` unless ``free_bytes`` says otherwise;
    ``tensor_device="meta"`` makes its kernel builders allocate on torch's meta device."""
    global _RUNTIME
    if timer is not None and not callable(timer):
        raise TypeError(f"timer must be callable like perfkit.timing.bench, not {timer!r}")
    if device is not None:
        one_of("device", device, ("cuda", "cpu"))
    if spec is not None and not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (perfkit.device_spec(name)), not {spec!r}")
    if tensor_device is not None:
        one_of("tensor_device", tensor_device, ("meta", "cuda", "cpu"))
    if free_bytes is None and device == "cuda" and spec is not None:
        free_bytes = spec.memory_bytes
    before = _RUNTIME
    changes = {"timer": timer, "device": device, "spec": spec, "free_bytes": free_bytes,
               "tensor_device": tensor_device}
    _RUNTIME = dataclasses.replace(before, **{k: v for k, v in changes.items() if v is not None})
    try:
        yield _RUNTIME
    finally:
        _RUNTIME = before


def timer(fn: Callable[[], Any], **options: Any) -> Measurement:
    """Time ``fn`` with the runtime's timer: :func:`perfkit.timing.bench` (looked up now) unless a
    :func:`use` block set another; ``options`` are ``bench``'s (``device``, ``label``, ...)."""
    return (_RUNTIME.timer or timing.bench)(fn, **options)


def measured_on() -> DeviceSpec:
    """The spec of the device experiments measure on: the runtime's, else
    :func:`perfkit.devices.current_device` (looked up now)."""
    return _RUNTIME.spec if _RUNTIME.spec is not None else devices.current_device()


def tensor_device(device: str) -> str:
    """The torch device to allocate ``device``'s tensors on: the runtime's ``tensor_device``
    (``"meta"`` for a pretend GPU), else ``device`` itself."""
    return _RUNTIME.tensor_device or device


def _gpu_visible() -> bool:
    if _RUNTIME.device is not None:
        return _RUNTIME.device == "cuda"
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str = "auto") -> str:
    """``"cuda"`` or ``"cpu"``; ``"auto"`` picks CUDA when a GPU is visible (the runtime's device)."""
    device = one_of("device", device, ("auto", "cuda", "cpu"))
    if device == "auto":
        return "cuda" if _gpu_visible() else "cpu"
    if device == "cuda" and not _gpu_visible():
        raise RuntimeError("device='cuda' was asked for but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return device


def free_memory(device: str) -> int:
    """Bytes that can still be allocated on ``device`` ("cuda" or "cpu")."""
    if device == "cuda" and _RUNTIME.free_bytes is not None:
        return int(_RUNTIME.free_bytes)
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
    """:func:`timer` (:func:`perfkit.timing.bench`) with its defaults on a GPU; on a CPU on one thread, sampling
    for at most 0.3 s (a chapter's live run takes seconds)."""
    budget = {"warmup_s": 0.005, "rep_s": 0.02, "max_time_s": 0.3} if device == "cpu" else {}
    with one_cpu_thread(device):
        return timer(fn, device=device, label=label, **budget)
