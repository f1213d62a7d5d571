"""A small residual CNN's time budget, layer by layer (the memory-limited chapter).

``convnet_breakdown`` times each distinct layer of :func:`network_layers` alone, forward and
backward, and the whole training step, and predicts each with the GEMM model (conv, linear) or
the byte model (the rest). :func:`memory_share` turns a frame into the share of the time spent
in memory-bound layers. A CPU runs batch 4 in float32 on one thread, without predictions (the
models are of GPUs). Units: seconds, bytes, FLOPs.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable

import pandas as pd

from ..._validate import dtype_name, positive_int
from ...dtypes import itemsize
from ...matmul import seeded_on
from ...memory_model import layer_bytes, memory_time
from ...placement import ensure_fits, lean_bench, resolve_device
from ...shapes import conv_gemms, linear_gemms
from ...timing import Measurement
from ...experiments.measure import known_names, layer_op, measured_spec, predicted_s, seeded_randn, sweep, timing_or_nan
from ...experiments.registry import register

__all__ = ["NETWORKS", "convnet_breakdown", "memory_share", "network_layers", "predicted_breakdown"]

#: Channels of the three stages: a small CIFAR-style network, and one 4× wider.
NETWORKS: dict[str, tuple[int, ...]] = {"small": (16, 32, 64), "wide": (64, 128, 256)}
_GPU_BATCH = 128  # images per step on a GPU
_CPU_BATCH = 4
_IMAGE = 32  # height = width of the input images, pixels
_DTYPES = ("float16", "bfloat16", "float32")

#: One op of the network: ``(name, kind, input shape, params)``.
_Op = tuple[str, str, tuple[int, ...], dict]
#: One distinct layer: ``(name, kind, count, input shape, params)``.
_Layer = tuple[str, str, int, tuple[int, ...], dict]


def network_layers(widths, batch: int, image: int = _IMAGE, classes: int = 10, *,
                   distinct: bool = True) -> list[tuple]:
    """The residual CNN, op by op ``(name, kind, input shape, params)``, or its ``distinct``
    layers ``(name, kind, count, shape, params)``.

    A stem conv; per stage a strided conv (not the first stage) and a block of two 3×3 convs and
    a residual add; each conv followed by batch norm and ReLU; global average pooling; a linear
    layer. ``widths``: channels per stage; ``image``: height = width, pixels.
    """
    batch = positive_int("batch", batch)
    image = positive_int("image", image)
    classes = positive_int("classes", classes)
    widths = [positive_int("widths", width) for width in widths]
    if not widths or image % 2 ** (len(widths) - 1):
        raise ValueError(f"image must be divisible by 2 per stage after the first "
                         f"({len(widths)} stages), got {image}")

    def norm_relu(channels: int, size: int, *middle: str) -> list[_Op]:
        """Batch norm, the ``middle`` ops (the residual add), then ReLU."""
        shape = (batch, channels, size, size)
        kinds = ("batchnorm", *middle, "relu")
        return [(f"{kind} {channels}, {size}²", kind, shape, {}) for kind in kinds]

    ops: list[_Op] = []
    channels_in, size = 3, image
    for stage, channels in enumerate(widths):
        shape = (batch, channels_in, size, size)
        if stage == 0:
            ops.append((f"conv {channels_in}→{channels}, {size}²", "conv", shape,
                        {"out": channels, "stride": 1, "first": True}))
        else:
            ops.append((f"conv {channels_in}→{channels} /2, {size}²", "conv", shape,
                        {"out": channels, "stride": 2}))
            size //= 2
        for skip in (True, False):  # the block's first conv starts the residual branch
            ops += norm_relu(channels, size)
            block_shape = (batch, channels, size, size)
            ops.append((f"conv {channels}→{channels}, {size}²", "conv", block_shape,
                        {"out": channels, "stride": 1, "skip": skip}))
        ops += norm_relu(channels, size, "add")
        channels_in = channels
    ops.append((f"avgpool {channels_in}, {size}²", "avgpool", (batch, channels_in, size, size),
                {"kernel_size": size}))
    ops.append((f"linear {channels_in}→{classes}", "linear", (batch, channels_in),
                {"out": classes}))
    if not distinct:
        return ops

    counts = Counter(name for name, *_ in ops)
    by_name = {op[0]: op for op in ops}  # layers of one name differ only in "skip"
    layers = []
    for name, kind, shape, params in by_name.values():
        kept = {key: value for key, value in params.items() if key != "skip"}
        layers.append((name, kind, counts[name], shape, kept))
    return layers


def _gemm_layer(kind: str, shape: tuple, params: dict, phase: str, dtype: str,
                spec: Any) -> tuple[float, int, float]:
    """FLOPs, minimum bytes (each GEMM's three tensors once) and predicted seconds of one pass of a
    conv or linear layer, by its implicit GEMMs; NaN seconds without ``spec``."""
    out = params["out"]
    if kind == "conv":
        gemms = conv_gemms(*shape, out, 3, 3, params["stride"], 1)
        weights = out * shape[1] * 9
    else:
        gemms = linear_gemms(shape[0], shape[1], out)
        weights = out * (shape[1] + 1)  # and the bias
    if phase == "forward":
        passes = ["forward"]
    elif params.get("first"):
        passes = ["wgrad"]  # the stem: its input needs no gradient
    else:
        passes = ["dgrad", "wgrad"]
    M, N, _ = gemms["forward"]
    moved = len(passes) * itemsize(dtype) * (math.prod(shape) + weights + M * N)
    flops = float(sum(2 * math.prod(gemms[p]) for p in passes))
    if spec is None:
        return flops, moved, math.nan
    return flops, moved, sum(predicted_s(*gemms[p], dtype, spec) for p in passes)


def _layer_row(net: str, layer: _Layer, phase: str, dtype: str, spec: Any,
               m: Measurement | None = None) -> dict[str, Any]:
    """A ``convnet_breakdown`` row of one pass of a layer: GEMM model (conv, linear) or byte
    model (the rest)."""
    name, kind, count, shape, params = layer
    if kind in ("conv", "linear"):
        category = "math"
        flops, moved, predicted = _gemm_layer(kind, shape, params, phase, dtype, spec)
    else:
        category = "memory"
        flops = 0.0
        moved = layer_bytes(kind, shape, dtype, pass_=phase, **params)
        if spec is None:
            predicted = math.nan
        elif moved == 0:  # nothing to move, no kernel (an add's backward passes dy through)
            predicted = 0.0
        else:
            predicted = memory_time(moved, spec)
    return {
        "network": net, "layer": name, "kind": kind, "category": category, "count": count,
        "phase": phase, "batch": shape[0], "channels": params.get("out", shape[1]),
        "size": shape[2] if len(shape) == 4 else 1, "dtype": dtype,
        "flops": flops, "bytes": moved,
        **timing_or_nan(m),
        "predicted_s": predicted,
    }


def _network_row(net: str, layers: list[_Layer], image: int, dtype: str, spec: Any,
                 m: Measurement | None = None) -> dict[str, Any]:
    """The whole step; its flops, bytes and predicted_s sum its layers' (× count), both passes."""
    parts = [_layer_row(net, layer, phase, dtype, spec)
             for layer in layers for phase in ("forward", "backward")]
    row = _layer_row(net, layers[0], "forward", dtype, spec, m)
    row.update({"layer": "whole network", "kind": "network", "category": "network", "count": 1,
                "phase": "forward+backward", "size": image})
    for column in ("flops", "bytes", "predicted_s"):
        row[column] = sum(part["count"] * part[column] for part in parts)
    return row


def _layer_fns(layer: _Layer, dtype: str, device: str) -> tuple[Callable, Callable]:
    """``(forward, backward)`` of one layer alone on a seeded input; backward reuses the graph of
    one forward."""
    import torch

    _, kind, _, shape, params = layer
    on, gen = seeded_on(device)  # on: "meta" on a pretend GPU
    x = seeded_randn(gen, shape, dtype, on, grad=not params.get("first", False))
    weights, apply = layer_op(kind, shape, params, dtype, on, gen)
    other = seeded_randn(gen, shape, dtype, on) if kind == "add" else None
    y = apply(x, weights, other)
    inputs = []
    if x.requires_grad:
        inputs.append(x)
    inputs += weights
    if other is not None:
        inputs.append(other)
    dy = seeded_randn(gen, tuple(y.shape), dtype, on, grad=False)

    def forward():
        return apply(x, weights, other)

    def backward():
        return torch.autograd.grad(y, inputs, dy, retain_graph=True)

    return forward, backward


def _network_fn(widths, batch: int, image: int, dtype: str, device: str) -> Callable:
    """The whole network's step: forward, then the gradients of every parameter."""
    import torch

    on, gen = seeded_on(device)  # on: "meta" on a pretend GPU
    ops = network_layers(widths, batch, image, distinct=False)
    built = []
    for _, kind, shape, params in ops:
        tensors, apply = layer_op(kind, shape, params, dtype, on, gen)
        built.append((params.get("skip"), tensors, apply))
    weights = [tensor for _, tensors, _ in built for tensor in tensors]
    x = seeded_randn(gen, ops[0][2], dtype, on, grad=False)
    classes = ops[-1][3]["out"]
    dy = seeded_randn(gen, (batch, classes), dtype, on, grad=False)

    def forward(h):
        skip = h
        for starts_branch, tensors, apply in built:
            if starts_branch:
                skip = h
            h = apply(h, tensors, skip)
        return h

    def step():
        return torch.autograd.grad(forward(x), weights, dy)

    return step


def _bytes_needed(layers: dict[str, list[_Layer]], dtype: str) -> int:
    """Bytes the largest network needs, a bound: 8× each layer's forward bytes, × count."""
    totals = []
    for net, net_layers in layers.items():
        total = 0
        for layer in net_layers:
            count = layer[2]
            total += 8 * count * _layer_row(net, layer, "forward", dtype, None)["bytes"]
        totals.append(total)
    return max(totals)


_NET_COLUMNS = {
    "network": "'small' or 'wide' (NETWORKS: channels of the three stages)",
    "layer": "e.g. 'conv 16→16, 32²' (channels, input height²), or 'whole network'",
    "kind": "conv, batchnorm, relu, add, avgpool, linear or network",
    "category": "'math' (conv, linear), 'memory' (the rest) or 'network'",
    "count": "times the layer occurs",
    "phase": "'forward', 'backward' (input and parameter gradients; the stem: parameters only) or "
             "'forward+backward' (the whole step)",
    "batch": "images",
    "channels": "output channels (linear: features; network: the first stage's)",
    "size": "height = width of the layer's input, pixels",
    "dtype": "activations' dtype (batch norm's params float32)",
    "flops": "FLOPs of the pass's GEMMs (memory-bound layers: 0, their few FLOPs not counted)",
    "bytes": "minimum bytes the pass moves: each GEMM's three tensors once, "
             "or the byte model (layer_bytes)",
    "time_s": "median duration of one occurrence, seconds",
    "iqr_s": "inter-quartile range, seconds",
    "predicted_s": "GEMM model (conv, linear) or byte model (memory_time) of one occurrence, "
                   "seconds; network: the sum over layers × count; NaN on a CPU",
}


@register("convnet_breakdown",
          "A small CIFAR-style residual CNN and one 4× wider: each conv, bn, relu, add, pool and "
          "linear layer timed alone forward and backward, predicted, and the whole step "
          "(NVIDIA: memory-bound layers matter most in small networks)",
          _NET_COLUMNS, needs=("cuda",))
def convnet_breakdown(*, networks=None, batch=None, image=_IMAGE, dtype="float16", device="auto",
                      quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each distinct layer (:func:`network_layers`) forward and backward, then the whole step, per
    network. GPU: both at batch 128 on 32×32 images (~70 timings); CPU: batch 4, float32;
    ``quick``: the small one."""
    names = known_names("networks", networks if networks is not None else ("small",) if quick else NETWORKS,
                        NETWORKS)
    batch = positive_int("batch", batch) if batch is not None else None
    image, dtype = positive_int("image", image), dtype_name("dtype", dtype, _DTYPES)
    device = resolve_device(device)
    if batch is None:
        batch = _CPU_BATCH if device == "cpu" else _GPU_BATCH
    if device == "cpu":
        dtype = "float32"  # CPUs have no fast float16
    spec = measured_spec(device, cpu=False)
    layers = {name: network_layers(NETWORKS[name], batch, image) for name in names}
    ensure_fits(_bytes_needed(layers, dtype), device, what="convnet_breakdown")
    points = []
    for name in names:
        for layer in layers[name]:
            points += [(name, layer, "forward"), (name, layer, "backward")]
        points.append((name, None, "forward+backward"))  # the whole step

    def measure(point: tuple) -> dict[str, Any]:
        name, layer, phase = point
        if layer is None:
            step = _network_fn(NETWORKS[name], batch, image, dtype, device)
            m = lean_bench(step, device, f"{name} network step")
            return _network_row(name, layers[name], image, dtype, spec, m)
        forward, backward = _layer_fns(layer, dtype, device)
        fn = backward if phase == "backward" else forward
        m = lean_bench(fn, device, f"{name}: {layer[0]} {phase}")
        return _layer_row(name, layer, phase, dtype, spec, m)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="network layers")


def predicted_breakdown(spec: Any, *, dtype: str = "float16") -> pd.DataFrame:
    """``convnet_breakdown`` at its GPU sizes by the models of ``spec`` alone: its columns,
    ``time_s`` NaN. Caption it with :func:`perfkit.provenance.modelled`."""
    dtype = dtype_name("dtype", dtype, _DTYPES)
    layers = {name: network_layers(widths, _GPU_BATCH) for name, widths in NETWORKS.items()}
    rows = [_layer_row(name, layer, phase, dtype, spec)
            for name in layers for layer in layers[name] for phase in ("forward", "backward")]
    rows += [_network_row(name, layers[name], _IMAGE, dtype, spec) for name in layers]
    return pd.DataFrame(rows, columns=list(_NET_COLUMNS))


def _total_and_share(seconds: pd.Series, memory: pd.Series) -> tuple[float, float]:
    """The sum of ``seconds`` and the fraction of it where ``memory`` is true; NaN for both if any
    is missing."""
    if len(seconds) == 0 or seconds.isna().any():
        return math.nan, math.nan
    total = seconds.sum()
    return total, seconds[memory].sum() / total


def memory_share(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per network: the fraction of the layers' time (each × count, both passes) in memory-bound
    layers, measured and predicted (NaN if any is missing), the sums (``layers_s``,
    ``predicted_layers_s``) and the step measured whole (``network_s``). Seconds.
    Pure: None in, None out."""
    if frame is None:
        return None
    rows = []
    for net, group in frame.groupby("network", sort=False):
        layers = group[group["category"] != "network"]
        memory = layers["category"] == "memory"
        measured_s = layers["count"] * layers["time_s"]
        modelled_s = layers["count"] * layers["predicted_s"]
        layers_s, share = _total_and_share(measured_s, memory)
        predicted_layers_s, predicted_share = _total_and_share(modelled_s, memory)
        whole = group.loc[group["category"] == "network", "time_s"]
        rows.append({"network": net, "memory_share": share,
                     "predicted_memory_share": predicted_share, "layers_s": layers_s,
                     "predicted_layers_s": predicted_layers_s,
                     "network_s": whole.iloc[0] if len(whole) else math.nan})
    columns = ["network", "memory_share", "predicted_memory_share", "layers_s",
               "predicted_layers_s", "network_s"]
    return pd.DataFrame(rows, columns=columns)
