"""How long a lab's live run will take, predicted before it runs, on this machine or on another GPU.

A live run is a registered experiment called with a lab's quick settings. Its points come from the
experiment's own code, run dry: on a pretend device (:func:`perfkit.placement.use`) whose timer
times nothing and whose tensors live on torch's meta device (no storage), so nothing is computed
and nothing is allocated. For each call the experiment would time, the dry timer runs the timed
function once on meta tensors and counts what it would do: FLOPs by torch's own formulas
(``torch.utils.flop_counter``) and bytes read and written by every op that is not a view. The op's
time is then perfkit's roofline at the device's achievable ceilings (:func:`perfkit.achievable_ceilings`)
plus a kernel's fixed cost, and the run's time is what :func:`perfkit.bench` spends on such an op:
the first call, the warm-up, then samples that fill ``rep_s`` (10 to 1000 of them, each with its
L2 flush on a GPU), capped by ``max_time_s``. Tensors the experiment builds outside the timed
function (its operands) cost their bytes at the device's fill rate: on a CPU, torch's random-number
fill measured here (a few milliseconds, once); on a GPU, its memory bandwidth.

What is not modelled: a GPU's start-up (CUDA context, cuBLAS, cuDNN; :data:`GPU_START_S`, an
assumption), compilation (Triton, ``torch.compile``), and ops that cannot run on meta tensors
(counted in :attr:`RunEstimate.unpriced`, each priced at the bench's overhead alone).
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ... import placement, timing
from ...ceilings import achievable_ceilings
from ...devices import DeviceSpec
from ...dtypes import canonical_dtype
from ...experiments import registry
from ...measurement import Measurement
from ...units import format_time

if TYPE_CHECKING:
    import pandas as pd

#: Seconds a GPU takes before its first kernel: CUDA context, cuBLAS and cuDNN handles (an assumption,
#: typical of a T4 on Colab; not measured by perfkit).
GPU_START_S = 3.0
#: Seconds of a kernel's fixed cost when the spec carries none (a launch and its synchronisation).
KERNEL_FLOOR_S = 5e-6
#: Host seconds around each sample on a GPU: two events and the busy-wait perfkit.bench enqueues first.
GPU_SAMPLE_OVERHEAD_S = 30e-6
#: Host seconds per point outside the timer: building the row, the progress bar, Python.
POINT_OVERHEAD_S = 2e-3
#: Factory ops whose output bytes are filled outside the timed function (the operands).
_FILLS = {"randn", "rand", "normal", "normal_", "uniform_", "randint", "random_", "ones", "zeros", "full",
          "fill_", "zero_", "arange", "copy_", "_to_copy", "empty_like", "randn_like", "rand_like"}


@dataclass(frozen=True)
class RunEstimate:
    """A live run's predicted wall time on ``device`` (seconds), and what it rests on."""

    experiment: str
    device: str
    points: int  # timed calls the experiment makes
    run_s: float  # predicted seconds: start-up + operands + every timed call
    op_s: float  # seconds the timed ops themselves take, once each (the model's)
    unpriced: int  # timed calls whose op could not run on meta tensors (priced at the bench's overhead)

    def __str__(self) -> str:
        return f"about {format_time(self.run_s)} on {self.device} ({self.points} timed points; perfkit's models)"


@functools.lru_cache(maxsize=1)
def _counter_class() -> type:
    """The dispatch mode that counts (defined on first use: importing perfkit does not import torch)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import flop_registry

    class Counter(TorchDispatchMode):
        """Counts FLOPs and bytes (inside the timed function) and filled bytes (outside it) of every op."""

        def __init__(self) -> None:
            super().__init__()
            self.timed = False
            self.flops = 0
            self.bytes = 0
            self.fill_bytes = 0
            self.dtype = "float32"

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.__name__.split(".")[0]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            if not self.timed:
                if name in _FILLS:
                    self.fill_bytes += sum(t.numel() * t.element_size() for t in outs)
                return out
            packet = func._overloadpacket
            if packet in flop_registry:
                self.flops += int(flop_registry[packet](*args, **kwargs, out_val=out))
                if outs and outs[0].dtype.is_floating_point:
                    self.dtype = canonical_dtype(outs[0].dtype)
            if not any(r.alias_info is not None for r in func._schema.returns):  # a view moves nothing
                ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                self.bytes += sum(t.numel() * t.element_size() for t in ins + outs)
            return out

    return Counter


def _op_s(flops: int, nbytes: int, dtype: str, spec: DeviceSpec) -> float:
    """The roofline at the achievable ceilings, plus a kernel's fixed cost (seconds)."""
    c = achievable_ceilings(spec)
    flop_s = c.flop_s.get(dtype) or c.flop_s.get("float32") or max(c.flop_s.values())
    floor = c.kernel_latency_s or KERNEL_FLOOR_S
    return max(flops / flop_s, nbytes / c.bandwidth) + floor


#: :func:`perfkit.bench`'s defaults, read from its signature.
BENCH_DEFAULTS = {k: p.default for k, p in inspect.signature(timing.bench).parameters.items()
                  if p.default is not inspect.Parameter.empty}


def _bench_s(op_s: float, options: dict, spec: DeviceSpec) -> float:
    """Seconds :func:`perfkit.bench` spends timing an op of ``op_s`` seconds with these ``options``."""
    options = {**BENCH_DEFAULTS, **options}
    warmup_s, rep_s, max_time_s = (float(options[k]) for k in ("warmup_s", "rep_s", "max_time_s"))
    if spec.kind == "gpu":
        flush = options["flush_l2"] and not options["cuda_graph"]
        flush_s = (spec.l2_bytes or 0) / (0.9 * spec.mem_bandwidth) if flush else 0.0
        setup = 8 * op_s + 4 * GPU_SAMPLE_OVERHEAD_S  # first call, host time, the estimate's 1 + 5 calls
        n = min(max(math.ceil(rep_s / op_s), timing.MIN_SAMPLES), timing.MAX_SAMPLES)
        sampling = min(n * (op_s + flush_s + GPU_SAMPLE_OVERHEAD_S), max_time_s)
        return setup + max(warmup_s, op_s) + sampling
    block_s = max(op_s, timing._CPU_MIN_BLOCK_S)
    setup = op_s + block_s * (1 + (op_s < timing._CPU_MIN_BLOCK_S))  # the first call, the blocks that size a sample
    n = min(max(math.ceil(rep_s / block_s), timing.MIN_SAMPLES), timing.MAX_SAMPLES)
    return setup + max(min(warmup_s, max_time_s), block_s) + min(n * block_s, max_time_s + block_s)


def _pretend(spec: DeviceSpec) -> Any:
    """A pretend ``spec``: its code path (GPU or CPU), tensors on meta, its memory free."""
    gpu = spec.kind == "gpu"
    return placement.use(device="cuda" if gpu else "cpu", spec=spec, tensor_device="meta",
                         free_bytes=spec.memory_bytes if gpu else None)


def _call(experiment: registry.Experiment, device: str, kwargs: dict) -> dict:
    """The experiment's keyword arguments: ``kwargs`` with ``device`` set and no progress bar."""
    params = inspect.signature(experiment.func).parameters
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise TypeError(f"experiment {experiment.name!r} takes no argument {', '.join(map(repr, unknown))}; "
                        f"it takes {', '.join(p for p in params if p not in ('device', 'progress', 'on_row'))}")
    call = {k: v for k, v in kwargs.items() if k not in ("device", "progress")}
    call.update({k: v for k, v in (("device", device), ("progress", False)) if k in params})
    return call


#: Columns of an experiment's frame that a dry run cannot fill: they are measurements.
MEASURED = ("time_s", "iqr_s", "tflops", "gbps", "tokens_per_s", "speedup", "saving_s")


def predict_frame(name: str, spec: DeviceSpec, **kwargs: Any) -> "pd.DataFrame":
    """The frame experiment ``name`` would return on ``spec`` (e.g. ``pk.device_spec("T4")``), with only
    what its own models predict (``predicted_s`` and the like): its code runs on the pretend device,
    nothing is timed, and every measured column (:data:`MEASURED`) is dropped.
    ``frame.attrs["model_of"]`` names the device."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a perfkit DeviceSpec, got {type(spec).__name__}")
    experiment = registry.get(name)
    call = _call(experiment, "cuda" if spec.kind == "gpu" else "cpu", kwargs)
    with _pretend(spec), placement.use(timer=lambda fn, **kw: Measurement([1.0])), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = experiment(**call)
    frame = frame.drop(columns=[c for c in MEASURED if c in frame.columns]).reset_index(drop=True)
    frame.attrs = {"model_of": spec.name}
    return frame


@functools.lru_cache(maxsize=1)
def cpu_fill_rate() -> float:
    """Bytes per second this CPU fills with ``torch.randn`` (measured once: a few milliseconds)."""
    import torch

    x = torch.empty(1 << 20)  # 4 MiB
    x.normal_()
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        x.normal_()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * x.element_size() / max(best, 1e-9)


def estimate_run(name: str, spec: DeviceSpec, **kwargs: Any) -> RunEstimate:
    """Predict the wall time of ``registry.get(name)(**kwargs)`` on ``spec`` (a GPU's or this CPU's)
    before running it: a dry run of the experiment's own code (see the module's docstring).

    ``kwargs`` are the experiment's (its quick settings); ``device`` and ``progress`` are set here.
    ``LookupError`` for an unknown experiment; ``TypeError`` for a ``spec`` that is not a DeviceSpec.
    """
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a perfkit DeviceSpec (pk.device_spec('T4'), pk.current_device()), "
                        f"got {type(spec).__name__}")
    experiment = registry.get(name)
    device = "cuda" if spec.kind == "gpu" else "cpu"
    call = _call(experiment, device, kwargs)
    counter = _counter_class()()
    timed: list[tuple[float, dict, bool]] = []

    def dry_timer(fn: Callable[[], Any], **options: Any) -> Measurement:
        counter.timed, counter.flops, counter.bytes = True, 0, 0
        try:
            fn()
            priced = True
        except Exception:  # noqa: BLE001  (an op without a meta kernel: priced at the bench's overhead)
            priced = False
        finally:
            counter.timed = False
        op_s = _op_s(counter.flops, counter.bytes, counter.dtype, spec) if priced else (
            spec.ceilings.kernel_latency_s or KERNEL_FLOOR_S)
        timed.append((op_s, options, priced))
        return Measurement([op_s], label=str(options.get("label", "dry run")))

    with _pretend(spec), counter, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with placement.use(timer=dry_timer):
            experiment(**call)
    fill_rate = cpu_fill_rate() if device == "cpu" else 0.9 * spec.mem_bandwidth
    run_s = (GPU_START_S if device == "cuda" else 0.0) + counter.fill_bytes / fill_rate
    run_s += sum(_bench_s(op_s, options, spec) + POINT_OVERHEAD_S for op_s, options, _ in timed)
    return RunEstimate(experiment=name, device=spec.name, points=len(timed), run_s=run_s,
                       op_s=sum(op_s for op_s, _, _ in timed), unpriced=sum(not p for _, _, p in timed))

