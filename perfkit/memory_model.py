"""The byte model of memory-limited layers: activations, normalizations, pooling, elementwise ops.

NVIDIA's *Memory-Limited Layers* guide says such a layer's duration is set by "the number of
inputs, outputs, and weights that need to be loaded and/or stored per pass". :func:`layer_bytes`
counts those bytes: the **minimum** a kernel must read and write from DRAM for one pass, each
tensor moved once (a real kernel may move more: a two-pass batch norm reads its input twice).
With E elements of s bytes (``dtype``), C channels and the pooled output's E_out elements:

=================  =========================  ==============================================
kind               forward                    backward
=================  =========================  ==============================================
activation [1]_    2·E·s (read x, write y)    3·E·s (read y or x, read dy, write dx)
``bias``           2·E·s + C·s                E·s + C·s (dy summed into db; dx is dy)
``add``            3·E·s (two inputs)         0 (each input's gradient is dy itself)
``dropout``        2·E·s + E·m (mask)         2·E·s + E·m (read dy and the mask, write dx)
``batchnorm``      2·E·s [2]_ + 8·C·4         3·E·s [2]_ + 5·C·4
``layernorm`` [4]_  2·E·s + 2·D·4 + 2·rows·4   3·E·s + 3·D·4 + 2·rows·4
``rmsnorm`` [4]_   2·E·s + D·4 + rows·4       3·E·s + 2·D·4 + rows·4
``cast`` [7]_      E·s + E·t                  E·t + E·s
``maxpool`` [3]_   s·(E + E_out) + E_out·i    s·(E_out + E) + E_out·i
``avgpool``        s·(E + E_out)              s·(E_out + E)
``elementwise`` [5]_  s·(R + E)               s·(E + 2·R)
``embedding`` [6]_  2·E·s + (E/D)·i           E·s + (E/D)·i + V·D·s
=================  =========================  ==============================================

.. [1] ``relu``, ``sigmoid``, ``tanh``, ``gelu``, ``silu`` and ``softmax`` (over the last dim).
.. [2] ``persistent=True`` (default): x stays on chip between the statistics and the normalization
   (cuDNN's persistent kernels, which NVIDIA's guide says "require fewer loads from memory").
   ``persistent=False``: forward reads x twice (3·E·s), backward reads x and dy twice (5·E·s).
   In eval mode (``training=False``) the forward reads the running statistics: 2·E·s + 4·C·4.
   Per-channel parameters and statistics are float32 (4 bytes), as cuDNN keeps them for fp16.
.. [3] i = ``indices_itemsize``: bytes per argmax index saved for the backward pass (default 8:
   PyTorch's int64 indices in training; 0 = none, as in inference or cuDNN, whose backward then
   reads x and y instead of indices: s·(E_out + 2·E + E_out)).
.. [4] Over the last ``normalized_ndim`` dims (D elements; rows = E / D). The affine weight and
   bias (float32; none with ``elementwise_affine=False``; an RMS norm has a weight only); the per-row
   mean and 1/std (an RMS norm: 1/rms only) are written in training (``training=True``) and read by
   the backward pass. ``persistent=False``: a kernel that reads each row twice, once for the
   statistics and once to normalize (PyTorch's layer norm kernel does), as for batch norm [2]_.
.. [5] Any other elementwise op or reduction (``mul``, ``pow``, ``where``, ``mean``, a copy or a
   layout change): each input read once (``read_elements`` R in all, default E: one input of the
   output's size), the output's E elements written; backward reads dy and the inputs and writes
   each input's gradient. A unary op moves what an activation does; ``mul`` of two tensors is
   R = 2·E.
.. [6] ``shape`` is the output's (..., D): each looked-up row read and written, and its index
   (``indices_itemsize`` i, default 8: int64) read. Backward writes the dense gradient of the
   whole V×D table (``num_embeddings`` V), PyTorch's default (``sparse=False``).
.. [7] A dtype conversion (``x.to(torch.float32)``): E elements read in ``dtype`` (s bytes) and
   written in ``to`` (t bytes; default float32, the upcast of mixed-precision code). It changes
   the dtype, so :func:`chain_bytes` does not chain it: sum :func:`layer_bytes` of each kernel.

NVIDIA's worked numbers (*GPU Performance Background*, Table 1) follow: a float16 ReLU moves 4 bytes
per element for 1 FLOP (0.25 FLOP/B); a 3×3 stride-1 max pool 4 bytes for 9 FLOPs (2.25 FLOP/B).

:func:`chain_bytes` counts a chain of shape-preserving ops run eagerly (each op reads and writes
DRAM) or fused into one kernel (the chain's inputs read once, its output written once):
the bytes fusion saves. :func:`memory_time` turns bytes into seconds on a device. Units: bytes,
seconds.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from ._validate import boolean, int_or_pair, non_negative_int, non_negative_number, one_of, positive_int
from .ceilings import Ceilings, kernel_latency_s, resolve_ceilings
from .devices import DeviceSpec, resolve_spec
from .dtypes import canonical_dtype, itemsize

__all__ = ["ACTIVATIONS", "CHAIN_KINDS", "KINDS", "PARAM_ITEMSIZE", "PASSES", "chain_bytes", "layer_bytes", "memory_time",
           "pool_output_shape", "predict_layer_time"]

#: Elementwise activations: one read and one write forward, two reads and one write backward.
ACTIVATIONS = ("relu", "sigmoid", "tanh", "gelu", "silu", "softmax")

#: Every kind :func:`layer_bytes` knows, with the keyword parameters it accepts (and their defaults).
KINDS: dict[str, dict[str, Any]] = {
    **{a: {} for a in ACTIVATIONS},
    "bias": {"dim": 1},
    "add": {},
    "dropout": {"mask_itemsize": 1},
    "batchnorm": {"training": True, "persistent": True},
    "layernorm": {"normalized_ndim": 1, "elementwise_affine": True, "training": True, "persistent": True},
    "rmsnorm": {"normalized_ndim": 1, "elementwise_affine": True, "training": True, "persistent": True},
    "cast": {"to": "float32"},
    "maxpool": {"kernel_size": None, "stride": None, "padding": 0, "indices_itemsize": 8},
    "avgpool": {"kernel_size": None, "stride": None, "padding": 0},
    "elementwise": {"read_elements": None},
    "embedding": {"num_embeddings": None, "indices_itemsize": 8},
}

#: The passes a layer has.
PASSES = ("forward", "backward")

#: Bytes per element of per-channel parameters and statistics (float32).
PARAM_ITEMSIZE = 4

#: Kinds that keep the tensor's shape, so :func:`chain_bytes` can chain them.
CHAIN_KINDS = frozenset(ACTIVATIONS) | {"bias", "add", "dropout", "batchnorm", "layernorm", "rmsnorm",
                                        "elementwise"}


def _shape(shape: Any, least_ndim: int = 1) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError(f"shape must be a tuple of positive integers, e.g. (32, 64, 56, 56), got {shape!r}")
    dims = tuple(shape)
    if len(dims) < least_ndim:
        raise ValueError(f"shape must have at least {least_ndim} dimensions here, got {dims}")
    for i, d in enumerate(dims):
        positive_int(f"shape[{i}]", d)
    return tuple(int(d) for d in dims)


def _params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    accepted = KINDS[kind]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        what = ", ".join(accepted) or "none"
        raise TypeError(f"{kind!r} takes no parameter {', '.join(map(repr, unknown))}; it accepts: {what}")
    return {**accepted, **params}


def pool_output_shape(shape: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> tuple[int, ...]:
    """``(N, C, P, Q)`` of 2-D pooling over the last two dims of ``shape`` (N×C×H×W).

    ``stride`` defaults to ``kernel_size`` (as in ``torch.nn.MaxPool2d``). Raises ``ValueError``
    when the window is larger than the padded input, or the padding more than half the window.
    """
    dims = _shape(shape, 3)
    if kernel_size is None:
        raise TypeError("pooling needs kernel_size (an int or an (h, w) pair)")
    kh, kw = int_or_pair("kernel_size", kernel_size, positive_int)
    sh, sw = int_or_pair("stride", kernel_size if stride is None else stride, positive_int)
    ph, pw = int_or_pair("padding", padding, non_negative_int)
    H, W = dims[-2:]
    if 2 * ph > kh or 2 * pw > kw:
        raise ValueError(f"padding ({ph}, {pw}) must be at most half of kernel_size ({kh}, {kw})")
    if kh > H + 2 * ph or kw > W + 2 * pw:
        raise ValueError(f"kernel_size ({kh}, {kw}) is larger than the padded input "
                         f"({H + 2 * ph}, {W + 2 * pw}); use a smaller window or more padding")
    return dims[:-2] + ((H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1)


def _traffic(kind: str, dims: tuple[int, ...], s: int, pass_: str, p: dict[str, Any]) -> tuple[int, int, int]:
    """``(inputs, outputs, extra)`` bytes of one pass: main tensors read, written, and the rest."""
    E = math.prod(dims)
    fwd = pass_ == "forward"
    if kind in ACTIVATIONS:
        return (E * s, E * s, 0) if fwd else (2 * E * s, E * s, 0)
    if kind == "bias":
        if len(dims) < 2 and p["dim"] not in (0, -1):
            raise ValueError(f"dim must index shape {dims}, got {p['dim']}")
        try:
            C = dims[p["dim"]]
        except (IndexError, TypeError):
            raise ValueError(f"dim must be an integer index into shape {dims}, got {p['dim']!r}") from None
        return (E * s, E * s, C * s) if fwd else (E * s, 0, C * s)
    if kind == "add":
        return (2 * E * s, E * s, 0) if fwd else (0, 0, 0)
    if kind == "elementwise":
        R = E if p["read_elements"] is None else non_negative_int("read_elements", p["read_elements"])
        return (R * s, E * s, 0) if fwd else ((E + R) * s, R * s, 0)
    if kind == "embedding":
        if p["num_embeddings"] is None:
            raise TypeError("embedding needs num_embeddings (the table's rows V)")
        V = positive_int("num_embeddings", p["num_embeddings"])
        idx = (E // dims[-1]) * non_negative_int("indices_itemsize", p["indices_itemsize"])
        return (E * s + idx, E * s, 0) if fwd else (E * s + idx, V * dims[-1] * s, 0)
    if kind == "dropout":
        m = non_negative_int("mask_itemsize", p["mask_itemsize"])
        return (E * s, E * s, E * m)
    if kind == "batchnorm":
        C = _shape(dims, 2)[1]
        training, persistent = boolean("training", p["training"]), boolean("persistent", p["persistent"])
        reads = 1 if persistent else 2
        if fwd:
            if not training:
                return (E * s, E * s, 4 * C * PARAM_ITEMSIZE)
            return (reads * E * s, E * s, 8 * C * PARAM_ITEMSIZE)
        if not training:
            raise ValueError("a batchnorm backward pass needs training=True (eval mode has no batch statistics)")
        return (2 * reads * E * s, E * s, 5 * C * PARAM_ITEMSIZE)
    if kind == "cast":
        t = itemsize(canonical_dtype(p["to"]))
        return (E * s, E * t, 0) if fwd else (E * t, E * s, 0)
    if kind in ("layernorm", "rmsnorm"):
        k = positive_int("normalized_ndim", p["normalized_ndim"])
        if k > len(dims):
            raise ValueError(f"normalized_ndim must be at most the number of dims of shape {dims}, got {k}")
        D = math.prod(dims[-k:])
        affine = boolean("elementwise_affine", p["elementwise_affine"])
        reads = 1 if boolean("persistent", p["persistent"]) else 2
        vectors, n_stats = (2, 2) if kind == "layernorm" else (1, 1)  # weight and bias; mean and 1/std
        stats = n_stats * (E // D) * PARAM_ITEMSIZE  # per row: saved for backward in training
        if fwd:
            if not boolean("training", p["training"]):
                stats = 0
            return (reads * E * s, E * s, (vectors * D if affine else 0) * PARAM_ITEMSIZE + stats)
        return (2 * reads * E * s, E * s, ((vectors + 1) * D if affine else 0) * PARAM_ITEMSIZE + stats)
    # pooling
    out = math.prod(pool_output_shape(dims, p["kernel_size"], p["stride"], p["padding"]))
    if fwd:  # a max pool in training also writes each window's argmax for the backward pass
        return (E * s, out * s, out * non_negative_int("indices_itemsize", p["indices_itemsize"])
                if kind == "maxpool" else 0)
    if kind == "avgpool":
        return (out * s, E * s, 0)
    idx = non_negative_int("indices_itemsize", p["indices_itemsize"])
    if idx == 0:  # no saved indices: read x and y again to find each window's maximum
        return (out * s + E * s + out * s, E * s, 0)
    return (out * s, E * s, out * idx)


def layer_bytes(kind: str, shape: Any, dtype: Any, *, pass_: str = "forward", **params: Any) -> int:
    """Minimum bytes one ``pass_`` of a memory-limited layer reads and writes (see the module table).

    ``kind``: one of :data:`KINDS`; ``shape``: the input's shape (N×C×H×W for batch norm and
    pooling, channels in dim 1); ``dtype``: the activations' dtype; ``pass_``: "forward" or
    "backward"; ``params``: the kind's parameters (:data:`KINDS`), e.g. ``kernel_size=3`` for
    pooling. Raises ``LookupError`` for an unknown kind, ``TypeError`` for a parameter the kind
    does not take, ``ValueError`` for a bad shape, pass or window.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise LookupError(f"unknown layer kind {kind!r}; kinds: {', '.join(KINDS)}")
    pass_ = one_of("pass_", pass_, PASSES)
    dims = _shape(shape, 4 if kind.endswith("pool") else 1)
    return sum(_traffic(kind, dims, itemsize(canonical_dtype(dtype)), pass_, _params(kind, params)))


def _steps(kinds: Sequence[Any]) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(kinds, str) or not isinstance(kinds, Sequence) or not kinds:
        raise TypeError(f"kinds must be a non-empty list of kind names or (kind, params) pairs, got {kinds!r}")
    steps = []
    for step in kinds:
        kind, params = (step, {}) if isinstance(step, str) else tuple(step)
        if kind not in KINDS:
            raise LookupError(f"unknown layer kind {kind!r} in kinds; kinds: {', '.join(KINDS)}")
        if kind not in CHAIN_KINDS:
            raise ValueError(f"{kind!r} changes the tensor's shape or dtype; a chain takes only: "
                             f"{', '.join(sorted(CHAIN_KINDS))}")
        steps.append((kind, dict(params)))
    return steps


def chain_bytes(kinds: Sequence[Any], shape: Any, dtype: Any, *, fused: bool = False) -> int:
    """Bytes the forward pass of a chain of shape-keeping ops moves, run eagerly or fused.

    ``kinds``: e.g. ``["batchnorm", "relu"]`` or ``[("bias", {"dim": -1}), "gelu", "dropout"]``.
    Eager: each op reads its input from DRAM and writes its output (the sum of
    :func:`layer_bytes`). Fused (``fused=True``): one kernel reads the chain's input once (and
    each ``add``'s second operand), writes the final output once, and still moves every op's
    parameters, statistics and masks: the lower bound a compiler such as ``torch.compile`` can
    reach. Forward only: a fused backward depends on what the compiler saves or recomputes.
    """
    steps = _steps(kinds)
    fused = boolean("fused", fused)
    dims = _shape(shape)
    s = itemsize(canonical_dtype(dtype))
    if not fused:
        return sum(layer_bytes(k, dims, dtype, **p) for k, p in steps)
    E = math.prod(dims)
    extra = sum(_traffic(k, dims, s, "forward", _params(k, p))[2] for k, p in steps)
    reads = 1 + sum(k == "add" for k, _ in steps)
    multi_read = any(k in ("batchnorm", "layernorm", "rmsnorm") and not _params(k, p)["persistent"]
                     for k, p in steps)
    other = sum(max(0, _traffic(k, dims, 1, "forward", _params(k, p))[0] - E)  # second operands
                for k, p in steps if k == "elementwise")
    return (reads + multi_read) * E * s + other * s + E * s + extra


def memory_time(nbytes: float, spec: str | DeviceSpec, *, latency_s: float | None = None,
                ceilings: Ceilings | str | None = None) -> float:
    """Predicted seconds to move ``nbytes`` on ``spec`` (a DeviceSpec or a name such as ``"H100-SXM"``):
    a kernel's fixed latency + bytes / bandwidth.

    The bandwidth is the achievable one of ``ceilings`` (as :func:`perfkit.explain_gemm` takes it;
    default the spec's own, ``spec.ceilings``: 90 % of the datasheet unless measured ceilings were
    attached by :func:`perfkit.calibrated`), the latency the ceilings' measured ``kernel_latency_s``, else
    the GEMM model's (:data:`perfkit.ceilings.KERNEL_LATENCY_S`), unless given.
    """
    nbytes = non_negative_number("nbytes", nbytes, "bytes")
    cl = resolve_ceilings(resolve_spec(spec, none_ok=False), ceilings)
    lat = kernel_latency_s(cl) if latency_s is None else non_negative_number("latency_s", latency_s, "seconds")
    return lat + nbytes / cl.bandwidth


def predict_layer_time(kind: str, shape: Any, dtype: Any, spec: str | DeviceSpec, *, pass_: str = "forward",
                       latency_s: float | None = None, **params: Any) -> float:
    """:func:`memory_time` of :func:`layer_bytes`: the byte model's seconds for one pass of a layer."""
    return memory_time(layer_bytes(kind, shape, dtype, pass_=pass_, **params), spec, latency_s=latency_s)
