"""Pieces shared by the experiment modules: device choice, memory checks, GEMM operands, rows, sweeps.

Experiments time and pick their device through one seam, :mod:`perfkit.placement`:
``placement.timer`` (``perfkit.timing.bench`` unless ``placement.use(timer=...)`` set another),
``resolve_device`` and ``measured_on`` (here: :func:`measured_spec`, :func:`require_gpu`). A test or a
reader swaps them for a ``with`` block, ``placement.use(timer=..., device=..., spec=...)``, without
touching an experiment module.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable

import pandas as pd

from ..devices import DeviceSpec
from ..display import Note, show
from ..dtypes import torch_dtype
from ..gemm_model import predict_gemm_time
from ..placement import measured_on
from ..roofline import gemm_bytes, gemm_flops
from ..timing import Measurement, NoiseWarning


def gemm_bytes_needed(M: int, N: int, K: int, dtype: str) -> int:
    """Device bytes a GEMM experiment allocates: A, B and an output (float8/int8 write wider outputs)."""
    return gemm_bytes(M, N, K, dtype)


def predicted_s(M: int, N: int, K: int, dtype: str, spec: Any, tile: tuple[int, int] | None = None) -> float:
    """:func:`perfkit.gemm_model.predict_gemm_time` in seconds, NaN where ``spec`` has no peak for ``dtype``."""
    try:
        return predict_gemm_time(M, N, K, dtype, spec, tile)
    except LookupError:  # no peak known for this dtype on this device
        return float("nan")


def measured_spec(device: str, *, cpu: bool = True) -> DeviceSpec | None:
    """The spec a prediction for ``device`` ("cuda" or "cpu") uses: the GPU measured on, or this CPU's
    measured spec; None when they differ, or on a CPU with ``cpu=False`` (models of GPUs only).
    The spec is :func:`perfkit.placement.measured_on`'s (a test's pretend GPU included)."""
    spec = measured_on()
    if (spec.kind == "gpu") != (device == "cuda") or (device == "cpu" and not cpu):
        return None
    return spec


def require_gpu(device: str, what: str, *, runs: str, instead: str) -> None:
    """``RuntimeError`` unless ``device`` is ``"cuda"``: ``what`` ``runs``, and on a CPU do ``instead``."""
    if device != "cuda":
        raise RuntimeError(f"{what} {runs} and needs an NVIDIA GPU; on a CPU, {instead}")


def timing_row(m: Measurement) -> dict[str, float]:
    """The timing columns every experiment row has: ``time_s`` (median) and ``iqr_s``, in seconds."""
    return {"time_s": m.median, "iqr_s": m.iqr}


def gemm_row(M: int, N: int, K: int, dtype: str, m: Measurement, **extra: Any) -> dict[str, Any]:
    """A measured GEMM's row: shape, dtype, :func:`timing_row` and ``tflops``, then ``extra`` columns."""
    return {"M": M, "N": N, "K": K, "dtype": dtype, **timing_row(m), "tflops": m.tflop_s(gemm_flops(M, N, K)),
            **extra}


def sweep(points: Iterable[Any], measure: Callable[[Any], dict], *, on_row=None, progress: bool = True,
          desc: str = "") -> pd.DataFrame:
    """Measure each point, hand each row to ``on_row`` as soon as it exists, return all rows.

    Noisy timings (:class:`~perfkit.timing.NoiseWarning`) are counted, not warned about one by
    one: one short note is printed at the end, and each row's ``iqr_s`` says how noisy it was.

    If the sweep is interrupted, the rows already handed to ``on_row`` are kept by the caller.
    """
    from tqdm.auto import tqdm

    points = list(points)
    rows: list[dict] = []
    noisy = 0
    try:
        for p in tqdm(points, desc=desc, disable=not progress, leave=False):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", NoiseWarning)
                row = measure(p)
            for w in caught:  # anything but noise is passed on
                if not issubclass(w.category, NoiseWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            # noise is counted per point (a point may time several things), summarised once below
            noisy += any(issubclass(w.category, NoiseWarning) for w in caught)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    finally:
        if noisy:  # a short note for the reader, not a warning with this file's path
            show(Note(f"{noisy} of {len(rows)} {desc or 'sweep'} points had noisy timings (an IQR above 10 % "
                      "of the median, or too few samples: the machine was busy); the iqr_s column says by "
                      "how much.", title="Noisy timings"))
    return pd.DataFrame(rows)



def timing_or_nan(m: Measurement | None) -> dict[str, float]:
    """:func:`timing_row` of ``m``, or NaN seconds where nothing was measured (a model's row)."""
    if m is None:
        return {"time_s": float("nan"), "iqr_s": float("nan")}
    return timing_row(m)


def seeded_randn(gen: Any, shape: tuple, dtype: str, device: str, scale: float = 1.0,
                 grad: bool = True):
    """A normal tensor from the generator ``gen``, times ``scale``, drawn in float32 and cast to
    ``dtype``; it requires grad if ``grad``."""
    import torch

    values = torch.randn(shape, generator=gen, device=device) * scale
    return values.to(torch_dtype(dtype)).requires_grad_(grad)


#: A layer's function: ``apply(x, tensors, other)``; ``other`` is the residual an add adds.
LayerApply = Callable[[Any, Any, Any], Any]


def _layer_apply(kind: str, params: dict, channels: int, device: str) -> LayerApply:
    """The function of a :func:`layer_op` (training mode)."""
    import torch
    import torch.nn.functional as F

    if kind == "batchnorm":
        running_mean = torch.zeros(channels, device=device)
        running_var = torch.ones(channels, device=device)
        return lambda x, tensors, other: F.batch_norm(x, running_mean, running_var, *tensors,
                                                      training=True)
    if kind == "conv":
        return lambda x, tensors, other: F.conv2d(x, tensors[0], stride=params["stride"], padding=1)
    if kind == "linear":
        return lambda x, tensors, other: F.linear(x, *tensors)
    if kind == "bias":
        return lambda x, tensors, other: x + tensors[0]
    if kind == "add":
        return lambda x, tensors, other: x + other
    if kind == "avgpool":
        kernel_size = params.get("kernel_size", 1)
        return lambda x, tensors, other: F.avg_pool2d(x, kernel_size).flatten(1)
    if kind == "dropout":
        return lambda x, tensors, other: F.dropout(x, p=0.1, training=True)
    unary = {"relu": F.relu, "gelu": F.gelu}[kind]
    return lambda x, tensors, other: unary(x)


def layer_op(kind: str, shape: tuple, params: dict, dtype: str, device: str,
             gen: Any) -> tuple[list, LayerApply]:
    """A layer on an input of ``shape``: its tensors, seeded from ``gen`` (batch norm's float32),
    and ``apply(x, tensors, other)``. Kinds: conv (3×3, padding 1; params ``out``, ``stride``),
    linear (``out``, ``bias``), bias, batchnorm, relu, gelu, dropout (p = 0.1), add, avgpool
    (``kernel_size``, then flattened)."""
    import torch

    channels = shape[1]
    tensors = []
    if kind == "batchnorm":
        tensors = [torch.ones(channels, device=device, requires_grad=True),
                   torch.zeros(channels, device=device, requires_grad=True)]
    elif kind == "conv":
        scale = (9 * channels) ** -0.5
        tensors = [seeded_randn(gen, (params["out"], channels, 3, 3), dtype, device, scale)]
    elif kind == "linear":
        tensors = [seeded_randn(gen, (params["out"], channels), dtype, device, channels ** -0.5)]
        if params.get("bias", True):
            tensors.append(seeded_randn(gen, (params["out"],), dtype, device, 0.1))
    elif kind == "bias":
        tensors = [seeded_randn(gen, (shape[-1],), dtype, device, 0.1)]
    return tensors, _layer_apply(kind, params, channels, device)


def known_names(name: str, value: Any, known: Iterable[str]) -> list[str]:
    """``value`` (one name or several) as a list of names in ``known``; ``LookupError`` naming
    the parameter ``name`` and the known names otherwise."""
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        items = [value]
    else:
        items = list(value)
    unknown = [v for v in items if not isinstance(v, str) or v not in known]
    if not items or unknown:
        raise LookupError(f"unknown {name} {value!r}; known: {', '.join(known)}")
    return items
