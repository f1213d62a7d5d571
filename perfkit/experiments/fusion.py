"""Fusion, and a small network's time budget (the memory-limited chapter). Units: seconds, bytes, FLOPs.

``fusion_chains``: a GEMM and the memory-bound ops after it (:data:`CHAINS`), eager (one kernel per op)
against ``torch.compile`` (the tail fused), with the tail's bytes by the byte model. ``convnet_breakdown``:
each layer of a small residual CNN alone, and the whole step (:func:`memory_share`). A CPU (or ``quick``)
runs small sizes in float32 on one thread, without predictions (the models are of GPUs)."""

from __future__ import annotations

import functools
import math
import shutil
import time
from collections import Counter
from typing import Any, Callable

import numpy as np
import pandas as pd

from .._validate import one_of, positive_int
from ..devices import current_device
from ..dtypes import canonical_dtype, itemsize, torch_dtype
from ..memory_model import chain_bytes, layer_bytes, memory_time
from ..shapes import conv_gemms, linear_gemms
from ..timing import bench
from .common import ensure_fits, predicted_s, resolve_device, sweep, timing_row
from .registry import register

__all__ = ["CHAINS", "MODES", "NETWORKS", "PHASES", "compiler_missing", "convnet_breakdown", "fusion_chains",
           "fusion_savings", "memory_share", "network_layers", "predicted_frame", "tail_bytes"]

#: Each chain: its GEMM layer, then the memory-bound tail as ``(kind, params)`` of :mod:`perfkit.memory_model`.
CHAINS: dict[str, tuple[str, tuple]] = {
    "conv_bn_relu": ("conv", (("batchnorm", {}), ("relu", {}))),
    "linear_bias_gelu_dropout": ("linear", (("bias", {"dim": -1}), ("gelu", {}), ("dropout", {}))),
}
MODES, PHASES, _DTYPES = ("eager", "compiled"), ("forward", "forward+backward"), ("float16", "bfloat16", "float32")
#: Sizes: conv (images, channels in, out, height), linear (tokens, in, out); a chain's GPU sizes share the tail.
_GPU_SIZES = {"conv_bn_relu": ((128, 64, 64, 56), (128, 256, 64, 56)),
              "linear_bias_gelu_dropout": ((8192, 1024, 4096), (8192, 4096, 4096))}
_CPU_SIZES = {"conv_bn_relu": ((8, 16, 16, 16),), "linear_bias_gelu_dropout": ((512, 128, 512),)}
_BWD_MAIN = {"batchnorm": 3, "bias": 1, "dropout": 2, "relu": 3, "gelu": 3}  # E·s terms of each backward
_NAN, _NO_TIME = float("nan"), {"time_s": float("nan"), "iqr_s": float("nan")}


def _names(name: str, value: Any, known: dict) -> list[str]:
    items = [value] if isinstance(value, str) or not hasattr(value, "__iter__") else list(value)
    if not items or any(not isinstance(v, str) or v not in known for v in items):
        raise LookupError(f"unknown {name} {value!r}; known: {', '.join(known)}")
    return items


def _geometry(chain: str, size: Any) -> tuple[tuple, tuple, dict, tuple]:
    """``(batch, in, out, height)``, the GEMM layer's input shape, its GEMMs and the tail's shape."""
    conv = CHAINS[chain][0] == "conv"
    if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != 3 + conv:
        raise TypeError(f"size of {chain!r} must be (batch, in, out{', height' * conv}), got {size!r}")
    b, i, o, s = (positive_int(f"size[{k}]", v) for k, v in enumerate((*size, 1)[:4]))
    if conv:
        return (b, i, o, s), (b, i, s, s), conv_gemms(b, i, s, s, o, 3, 3, padding=1), (b, o, s, s)
    return (b, i, o, 1), (b, i), linear_gemms(b, i, o), (b, o)


def tail_bytes(chain: str, size: Any, dtype: str = "float16", *, phase: str = "forward", fused: bool = False) -> int:
    """Bytes the tail of ``chain`` after its GEMM moves in ``phase`` by the byte model, eager or ``fused``:
    forward, :func:`~perfkit.memory_model.chain_bytes`; the backward adds each op's ``layer_bytes`` (eager) or,
    fused, dy and the tail's input read and dx written once (3·E·s) plus each op's parameters, statistics and
    masks: a lower bound, like ``chain_bytes(fused=True)``."""
    kinds = CHAINS[_names("chain", chain, CHAINS)[0]][1]
    shape, phase = _geometry(chain, size)[3], one_of("phase", phase, PHASES)
    total = chain_bytes(kinds, shape, dtype, fused=fused)
    if phase == "forward":
        return total
    back = [(layer_bytes(k, shape, dtype, pass_="backward", **p), k) for k, p in kinds]
    es = math.prod(shape) * itemsize(canonical_dtype(dtype))
    return total + (3 * es + sum(b - _BWD_MAIN[k] * es for b, k in back) if fused else sum(b for b, _ in back))


def _chain_row(chain, size, dtype, mode, phase, spec, m=None, compile_s=_NAN) -> dict[str, Any]:
    """A fusion_chains row; ``predicted_s``: GEMM model + memory_time of the tail, per op (eager) or per pass."""
    size4, _, gemms, tail = _geometry(chain, size)
    moved = [tail_bytes(chain, size, dtype, phase=phase, fused=f) for f in (False, True)]
    pred = _NAN
    if spec is not None:
        pred = sum(predicted_s(*gemms[u], dtype, spec) for u in (["forward"] if phase == "forward" else gemms))
        if mode == "eager":
            pred += sum(memory_time(layer_bytes(k, tail, dtype, pass_=p, **prm), spec)
                        for k, prm in CHAINS[chain][1] for p in ("forward", "backward")[:1 + (phase != "forward")])
        else:
            fwd = tail_bytes(chain, size, dtype, fused=True)
            pred += memory_time(fwd, spec) + (memory_time(moved[1] - fwd, spec) if phase != "forward" else 0.0)
    return {"chain": chain, "mode": mode, "phase": phase, **dict(zip(("batch", "in_features", "out_features", "size"),
            size4)), "dtype": dtype, "bytes_eager": moved[0], "bytes_fused": moved[1], "compile_s": compile_s,
            **(timing_row(m) if m is not None else _NO_TIME), "predicted_s": pred}


_CHAIN_COLUMNS = {
    "chain": "'conv_bn_relu' (conv 3×3, no bias → batch norm, training → ReLU) or 'linear_bias_gelu_dropout' "
    "(linear, no bias → bias add → GELU → dropout p = 0.1)", "mode": "'eager' (one kernel per op) or 'compiled' "
    "(torch.compile, default mode, static shapes)", "phase": "'forward' (of training) or 'forward+backward' "
    "(gradients of the input and every parameter)", "batch": "images (conv) or tokens (linear)",
    "in_features": "input channels or features", "out_features": "output channels or features",
    "size": "conv height = width, pixels (1: linear)", "dtype": "activations' dtype (batch norm's params float32)",
    "bytes_eager": "bytes the tail after the GEMM moves in this phase, one kernel per op (byte model)",
    "bytes_fused": "the same tail fused, one kernel per pass: the byte model's lower bound",
    "compile_s": "seconds of the first compiled forward and backward (tracing, code generation); NaN if eager",
    "time_s": "median duration of the phase, seconds", "iqr_s": "inter-quartile range of the samples, seconds",
    "predicted_s": "GEMM model + memory_time of the tail's bytes (eager: per op; compiled: per pass), seconds; "
    "NaN on a CPU"}


def compiler_missing(device: str = "cpu") -> str | None:
    """Why ``torch.compile`` cannot build kernels here, or None: inductor builds C++ on a CPU, Triton a C launcher."""
    names = ("c++", "g++", "clang++") if device == "cpu" else ("cc", "gcc", "clang")
    return None if any(map(shutil.which, names)) else f"torch.compile needs {' or '.join(names)} on PATH: none found"


def _rand(gen, shape, dtype, device, scale=1.0, grad=True):
    import torch
    return (torch.randn(shape, generator=gen, device=device) * scale).to(torch_dtype(dtype)).requires_grad_(grad)


def _op(kind: str, shape: tuple, prm: dict, dtype: str, device: str, gen) -> tuple[list, Callable]:
    """An op on an input of ``shape``: seeded parameters (batch norm's float32) and ``apply(x, params, other)``."""
    import torch
    import torch.nn.functional as F
    c, o, dev = shape[1], prm.get("out"), dict(device=device)
    if kind == "batchnorm":
        stats = torch.zeros(c, **dev), torch.ones(c, **dev)  # running mean and variance
        return [torch.ones(c, **dev, requires_grad=True), torch.zeros(c, **dev, requires_grad=True)], \
            lambda x, p, _: F.batch_norm(x, *stats, *p, training=True)
    if kind == "conv":
        return [_rand(gen, (o, c, 3, 3), dtype, device, (9 * c) ** -0.5)], \
            lambda x, p, _: F.conv2d(x, p[0], stride=prm["stride"], padding=1)
    if kind in ("linear", "bias"):
        w = [_rand(gen, (o, c), dtype, device, c ** -0.5)] if kind == "linear" else []
        b = [_rand(gen, (o or shape[-1],), dtype, device, 0.1)] if prm.get("bias", True) else []
        return w + b, (lambda x, p, _: F.linear(x, *p)) if kind == "linear" else lambda x, p, _: x + p[0]
    fn = {"relu": F.relu, "gelu": F.gelu, "dropout": lambda x: F.dropout(x, p=0.1, training=True),
          "avgpool": lambda x: F.avg_pool2d(x, prm.get("kernel_size", 1)).flatten(1)}
    return [], lambda x, p, other: x + other if kind == "add" else fn[kind](x)


def _chain_fn(chain: str, size: tuple, dtype: str, device: str):
    """``(forward, inputs, dy)``: the chain as a function of its input and parameters (seeded), and a gradient."""
    import torch
    gen = torch.Generator(device=device).manual_seed(0)
    size4, shape, _, tail = _geometry(chain, size)
    ops = [_op(CHAINS[chain][0], shape, {"out": size4[2], "stride": 1, "bias": False}, dtype, device, gen)]
    ops += [_op(k, tail, p, dtype, device, gen) for k, p in CHAINS[chain][1]]
    inputs = [_rand(gen, shape, dtype, device)] + [p for ps, _ in ops for p in ps]

    def forward(x, *params):
        for ps, apply in ops:
            x, params = apply(x, params[:len(ps)], None), params[len(ps):]
        return x
    return forward, inputs, _rand(gen, tail, dtype, device, grad=False)


def _compile(forward, inputs, dy, chain: str, device: str):
    """The compiled chain, and the seconds of its first forward and backward (tracing, code generation)."""
    import torch
    torch._dynamo.reset()  # a fresh graph per chain and size: no recompilation limits, no dynamic shapes
    compiled, start, threads = torch.compile(forward, dynamic=False), time.perf_counter(), torch.get_num_threads()
    torch.set_num_threads(1 if device == "cpu" else threads)  # as _bench runs it: a thread count change recompiles
    try:
        torch.autograd.grad(compiled(*inputs), inputs, dy)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # inductor, Triton or the C compiler failed: say which chain
        raise RuntimeError(f"torch.compile failed on chain {chain!r} ({type(e).__name__}: {str(e).strip()[:300]}); "
                           "run it with modes=('eager',)") from e
    finally:
        torch.set_num_threads(threads)
    return compiled, time.perf_counter() - start


def _bench(fn: Callable[[], Any], device: str, label: str):
    """:func:`perfkit.timing.bench`; on a CPU a small budget and one thread (busy machines stall parallel kernels)."""
    import torch
    threads, budget = torch.get_num_threads(), dict(warmup_s=0.005, rep_s=0.02, max_time_s=0.3)
    torch.set_num_threads(1 if device == "cpu" else threads)
    try:
        return bench(fn, device=device, label=label, **(budget if device == "cpu" else {}))
    finally:
        torch.set_num_threads(threads)


@register("fusion_chains", "A GEMM and the memory-bound ops after it (conv → batch norm → ReLU; linear → bias → "
          "GELU → dropout), eager against torch.compile: bytes the byte model says fusion saves, time saved",
          _CHAIN_COLUMNS, needs=("cuda", "triton"))
def fusion_chains(*, chains=None, modes=MODES, dtype="float16", device="auto", quick=False, progress=True,
                  on_row=None) -> pd.DataFrame:
    """Each chain and size, eager then compiled, forward and forward+backward. GPU: both chains at two sizes, one
    compile each; CPU or ``quick``: the linear chain, small (CPU: float32, 10–20 s to compile). Without a C
    compiler, no compiled rows. Compiling resets ``torch._dynamo``: your compiled functions recompile."""
    import torch
    device = resolve_device(device)
    small = ("linear_bias_gelu_dropout",) if quick or device == "cpu" else CHAINS
    names = _names("chain", chains if chains is not None else small, CHAINS)
    modes = [one_of("modes", m, MODES) for m in ([modes] if isinstance(modes, str) else modes)]
    d = "float32" if device == "cpu" else canonical_dtype(one_of("dtype", dtype, _DTYPES))
    if "compiled" in modes and compiler_missing(device):
        print(f"fusion_chains: compiled rows left out: {compiler_missing(device)}")
        modes = [m for m in modes if m != "compiled"]
    spec = current_device() if device == "cuda" else None
    sizes = {c: (_CPU_SIZES if device == "cpu" else _GPU_SIZES)[c][:1 if quick else None] for c in names}
    points = [(c, s, m, p) for c in names for s in sizes[c] for m in modes for p in PHASES]
    ensure_fits(max([(2 * b * i * s * s + 10 * b * o * s * s + 18 * i * o) * itemsize(d) for c, size, *_ in points
                     for b, i, o, s in [_geometry(c, size)[0]]] or [0]), device, what="fusion_chains")
    chain = functools.lru_cache(maxsize=1)(lambda c, s: _chain_fn(c, s, d, device))  # one chain alive at a time
    compiled = functools.lru_cache(maxsize=1)(lambda c, s: _compile(*chain(c, s), c, device))

    def measure(p):
        c, s, m, ph = p
        forward, inputs, dy = chain(c, s)
        forward, compile_s = compiled(c, s) if m == "compiled" else (forward, _NAN)
        fn = (lambda: forward(*inputs)) if ph == "forward" else lambda: torch.autograd.grad(forward(*inputs),
                                                                                            inputs, dy)
        return _chain_row(c, s, d, m, ph, spec, _bench(fn, device, f"{c} {m} {ph} {s}"), compile_s)

    try:
        return sweep(points, measure, on_row=on_row, progress=progress, desc="fusion")
    finally:  # free the last chain, and dynamo's cache of it
        chain.cache_clear()
        compiled.cache_clear()
        torch._dynamo.reset() if "compiled" in modes else None


def fusion_savings(frame: pd.DataFrame) -> pd.DataFrame:
    """Per chain, size and phase: eager and compiled seconds, ``speedup`` (eager ÷ compiled), ``time_saved_s``,
    ``bytes_saved`` (byte model), ``predicted_saved_s`` and ``predicted_speedup`` (the model's), ``compile_s``."""
    keys = ["chain", "batch", "in_features", "out_features", "size", "phase"]
    e, c = (frame[frame["mode"] == m].set_index(keys) for m in MODES)
    j = e.merge(c, left_index=True, right_index=True, suffixes=("", "_c"))
    t, tc, p, pc = j["time_s"], j["time_s_c"], j["predicted_s"], j["predicted_s_c"]
    return pd.DataFrame({"eager_s": t, "compiled_s": tc, "speedup": t / tc, "time_saved_s": t - tc,
                         "bytes_saved": j["bytes_eager"] - j["bytes_fused"], "predicted_saved_s": p - pc,
                         "predicted_speedup": p / pc, "compile_s": j["compile_s_c"]}).reset_index()


#: Channels of the three stages: a small CIFAR-style network, and one 4× wider.
NETWORKS: dict[str, tuple[int, ...]] = {"small": (16, 32, 64), "wide": (64, 128, 256)}


def network_layers(widths, batch: int, image: int = 32, classes: int = 10, *, distinct: bool = True) -> list[tuple]:
    """The residual CNN: a stem conv, per stage a strided conv (not the first) and a block of two 3×3 convs and
    a residual add, each conv then batch norm and ReLU, global average pooling, a linear layer. Op by op
    ``(name, kind, input shape, params)``, or its ``distinct`` layers ``(name, kind, count, shape, params)``."""
    b, image, classes = positive_int("batch", batch), positive_int("image", image), positive_int("classes", classes)
    ws = [positive_int("widths", w) for w in widths]
    if not ws or image % 2 ** (len(ws) - 1):
        raise ValueError(f"image must be divisible by 2 per stage after the first ({len(ws)} stages), got {image}")

    norm = lambda c, s, *tail: [(f"{k} {c}, {s}²", k, (b, c, s, s), {}) for k in ("batchnorm", *tail, "relu")]  # noqa
    ops, prev, s = [], 3, image
    for k, c in enumerate(ws):
        ops.append((f"conv {prev}→{c}{' /2' if k else ''}, {s}²", "conv", (b, prev, s, s),
                    dict(out=c, stride=2 if k else 1, **({} if k else {"first": True}))))
        s //= 2 if k else 1
        for skip in (True, False):
            ops += norm(c, s) + [(f"conv {c}→{c}, {s}²", "conv", (b, c, s, s), dict(out=c, stride=1, skip=skip))]
        ops += norm(c, s, "add")
        prev = c
    ops += [(f"avgpool {prev}, {s}²", "avgpool", (b, prev, s, s), dict(kernel_size=s)),
            (f"linear {prev}→{classes}", "linear", (b, prev), dict(out=classes))]
    if not distinct:
        return ops
    counts = Counter(op[0] for op in ops)  # layers of one name differ only in "skip"
    return [(n, k, counts[n], sh, {p: v for p, v in prm.items() if p != "skip"})
            for n, k, sh, prm in {op[0]: op for op in ops}.values()]


def _layer_row(net: str, layer: tuple, phase: str, dtype: str, spec: Any, m=None) -> dict[str, Any]:
    """A convnet_breakdown row: GEMM model (conv, linear) or byte model (the rest) of one pass of a layer."""
    name, kind, count, shape, prm = layer
    if kind in ("conv", "linear"):
        o = prm["out"]
        g = conv_gemms(*shape, o, 3, 3, prm["stride"], 1) if kind == "conv" else linear_gemms(shape[0], shape[1], o)
        used = ["forward"] if phase == "forward" else ["wgrad"] if prm.get("first") else ["dgrad", "wgrad"]
        w = o * shape[1] * 9 if kind == "conv" else o * (shape[1] + 1)
        moved = len(used) * itemsize(dtype) * (math.prod(shape) + w + g["forward"][0] * g["forward"][1])
        flops = float(sum(2 * math.prod(g[u]) for u in used))
        pred = _NAN if spec is None else sum(predicted_s(*g[u], dtype, spec) for u in used)
    else:
        moved, flops = layer_bytes(kind, shape, dtype, pass_=phase, **prm), 0.0
        pred = _NAN if spec is None else 0.0 if moved == 0 else memory_time(moved, spec)
    return {"network": net, "layer": name, "kind": kind, "category": "math" if kind in ("conv", "linear") else
            "memory", "count": count, "phase": phase, "batch": shape[0], "channels": prm.get("out", shape[1]),
            "size": shape[2] if len(shape) == 4 else 1, "dtype": dtype, "flops": flops, "bytes": moved,
            **(timing_row(m) if m is not None else _NO_TIME), "predicted_s": pred}


def _network_row(net: str, layers: list, image: int, dtype: str, spec: Any, m=None) -> dict[str, Any]:
    """The whole step; its flops, bytes and predicted_s are the sums over its layers (× count) of both passes."""
    parts = [_layer_row(net, layer, p, dtype, spec) for layer in layers for p in ("forward", "backward")]
    total = {k: sum(r["count"] * r[k] for r in parts) for k in ("flops", "bytes", "predicted_s")}
    return {**_layer_row(net, layers[0], "forward", dtype, spec, m), "layer": "whole network", "kind": "network",
            "category": "network", "count": 1, "phase": "forward+backward", "size": image, **total}


def _layer_fns(layer: tuple, dtype: str, device: str):
    """``(forward, backward)`` of one layer alone on a seeded input; backward reuses one forward's graph."""
    import torch
    (_, kind, _, shape, prm), gen = layer, torch.Generator(device=device).manual_seed(0)
    x = _rand(gen, shape, dtype, device, grad=not prm.get("first", False))
    params, apply = _op(kind, shape, prm, dtype, device, gen)
    other = _rand(gen, shape, dtype, device) if kind == "add" else None
    y, inputs = apply(x, params, other), [x] * x.requires_grad + params + [other] * (other is not None)
    dy = _rand(gen, tuple(y.shape), dtype, device, grad=False)
    return (lambda: apply(x, params, other)), lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)


def _network_fn(widths, batch: int, image: int, dtype: str, device: str):
    """The whole network's step: forward, then the gradients of every parameter."""
    import torch
    gen = torch.Generator(device=device).manual_seed(0)
    ops = network_layers(widths, batch, image, distinct=False)
    built = [(prm.get("skip"), *_op(kind, shape, prm, dtype, device, gen)) for _, kind, shape, prm in ops]
    params = [p for _, ps, _ in built for p in ps]
    x, dy = (_rand(gen, s, dtype, device, grad=False) for s in (ops[0][2], (batch, ops[-1][3]["out"])))

    def forward(h):
        skip = h
        for starts, ps, apply in built:
            skip = h if starts else skip
            h = apply(h, ps, skip)
        return h

    return lambda: torch.autograd.grad(forward(x), params, dy)


_NET_COLUMNS = {
    "network": "'small' or 'wide' (NETWORKS: channels of the three stages)", "layer": "e.g. 'conv 16→16, 32²' "
    "(channels, input height²), or 'whole network'", "kind": "conv, batchnorm, relu, add, avgpool, linear or network",
    "category": "'math' (conv, linear), 'memory' (the rest) or 'network'", "count": "times the layer occurs",
    "phase": "'forward', 'backward' (input and parameter gradients; the stem: parameters only) or 'forward+backward' "
    "(the whole step)", "batch": "images", "channels": "output channels (linear: features; network: the first "
    "stage's)", "size": "height = width of the layer's input, pixels", "dtype": _CHAIN_COLUMNS["dtype"],
    "flops": "FLOPs of the pass's GEMMs (memory-bound layers: 0, their few FLOPs not counted)",
    "bytes": "minimum bytes the pass moves: each GEMM's three tensors once, or the byte model (layer_bytes)",
    "time_s": "median duration of one occurrence, seconds", "iqr_s": "inter-quartile range, seconds",
    "predicted_s": "GEMM model (conv, linear) or byte model (memory_time) of one occurrence, seconds; network: "
    "the sum over layers × count; NaN on a CPU"}


@register("convnet_breakdown", "A small CIFAR-style residual CNN and one 4× wider: each conv, bn, relu, add, pool "
          "and linear layer timed alone forward and backward, predicted, and the whole step (NVIDIA: memory-bound "
          "layers matter most in small networks)", _NET_COLUMNS, needs=("cuda",))
def convnet_breakdown(*, networks=None, batch=None, image=32, dtype="float16", device="auto", quick=False,
                      progress=True, on_row=None) -> pd.DataFrame:
    """Each distinct layer (:func:`network_layers`) forward and backward, then the whole step, per network.
    GPU: both at batch 128 on 32×32 images (~70 timings); CPU: batch 4, float32; ``quick``: the small one."""
    device = resolve_device(device)
    nets = _names("network", networks if networks is not None else ("small",) if quick else NETWORKS, NETWORKS)
    b = positive_int("batch", batch if batch is not None else 4 if device == "cpu" else 128)
    d = "float32" if device == "cpu" else canonical_dtype(one_of("dtype", dtype, _DTYPES))
    spec = current_device() if device == "cuda" else None
    layers = {n: network_layers(NETWORKS[n], b, image) for n in nets}
    ensure_fits(max(sum(8 * lay[2] * _layer_row(n, lay, "forward", d, None)["bytes"] for lay in layers[n])
                    for n in nets), device, what="convnet_breakdown")
    points = [(n, lay, p) for n in nets for lay in [*layers[n], None]
              for p in (("forward", "backward") if lay else ("forward+backward",))]

    def measure(pt):
        n, lay, p = pt
        if lay is None:
            t = _bench(_network_fn(NETWORKS[n], b, image, d, device), device, f"{n} network step")
            return _network_row(n, layers[n], image, d, spec, t)
        fn = _layer_fns(lay, d, device)[p == "backward"]
        return _layer_row(n, lay, p, d, spec, _bench(fn, device, f"{n}: {lay[0]} {p}"))

    return sweep(points, measure, on_row=on_row, progress=progress, desc="network layers")


def predicted_frame(experiment: str, spec, *, dtype: str = "float16") -> pd.DataFrame:
    """``fusion_chains`` or ``convnet_breakdown`` (GPU sizes) by the models of ``spec`` alone: the experiment's
    columns with ``time_s`` empty. Caption it with :func:`perfkit.provenance.modelled`."""
    d = canonical_dtype(one_of("dtype", dtype, _DTYPES))
    if one_of("experiment", experiment, ("fusion_chains", "convnet_breakdown")) == "fusion_chains":
        return pd.DataFrame([_chain_row(c, s, d, m, p, spec) for c in CHAINS for s in _GPU_SIZES[c] for m in MODES
                             for p in PHASES], columns=list(_CHAIN_COLUMNS))
    nets = {n: network_layers(w, 128) for n, w in NETWORKS.items()}
    rows = [_layer_row(n, lay, p, d, spec) for n in nets for lay in nets[n] for p in ("forward", "backward")]
    return pd.DataFrame(rows + [_network_row(n, nets[n], 32, d, spec) for n in nets], columns=list(_NET_COLUMNS))


def memory_share(frame: pd.DataFrame) -> pd.DataFrame:
    """Per network: the fraction of the layers' time (each × count, both passes) in memory-bound layers, measured
    and predicted (NaN if any is missing), the sums (``layers_s``, ``predicted_layers_s``) and the step measured."""
    rows = []
    for net, g in frame.groupby("network", sort=False):
        part, whole = g[g["category"] != "network"], g.loc[g["category"] == "network", "time_s"]
        (t, ts), (p, ps) = ((x.sum(), x[part["category"] == "memory"].sum() / x.sum()) if len(x) and x.notna().all()
                            else (np.nan, np.nan) for x in (part["count"] * part["time_s"],
                                                            part["count"] * part["predicted_s"]))
        rows.append({"network": net, "memory_share": ts, "predicted_memory_share": ps, "layers_s": t,
                     "predicted_layers_s": p, "network_s": whole.iloc[0] if len(whole) else np.nan})
    return pd.DataFrame(rows, columns=["network", "memory_share", "predicted_memory_share", "layers_s",
                                       "predicted_layers_s", "network_s"])
