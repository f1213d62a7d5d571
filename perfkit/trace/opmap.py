"""From an op recorded in a trace (its ATen name and ``record_shapes`` arguments) to the work it does.

:func:`work_of` turns ``aten::addmm`` with ``Input Dims [[512], [141, 512], [512, 2048]]`` into a
:class:`Work`: a GEMM of M×N×K = 141×2048×512, its FLOPs (2·M·N·K: the bias add is not counted, as the
advisor does not count it; TraceLens adds M·N) and the bytes its operands move, counted as
:mod:`perfkit.advisor` counts them. Families:

- ``gemm``: ``mm``, ``addmm``, ``_addmm_activation``, ``bmm``, ``baddbmm``, ``_scaled_mm`` (fp8);
- ``conv``: ``convolution`` (forward: stride, padding and groups from ``Concrete Inputs``; where a 2021
  trace lacks them, groups from the weight and the output's size from the next op's input, ``hints``),
  ``convolution_backward`` and the 2021 ``cudnn_convolution_backward`` (dgrad and wgrad as the output mask
  says, or in a 2021 trace as the ``_input`` / ``_weight`` ops inside it say: ``hints["inner"]``);
- ``attention``: the fused SDPA kernels (flash, memory-efficient, cuDNN) and their backward;
- ``memory``: norms, activations and their backward, softmax, dropout, pools, embeddings, copies and
  casts, fills, concatenation, elementwise ops and reductions (a :func:`perfkit.layer_bytes` kind).

A name not listed maps to nothing (:data:`MAPPED` says which do). Units: FLOP, bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import itemsize, output_itemsize
from ..memory_model import layer_bytes

__all__ = ["COMPOSITES", "MAPPED", "Work", "dtype_of", "work_of"]

_DTYPES = {"c10::bfloat16": "bfloat16", "bfloat16": "bfloat16", "c10::half": "float16", "half": "float16",
           "float": "float32", "double": "float64", "c10::float8_e4m3fn": "float8", "c10::float8_e5m2": "float8",
           "c10::float8_e4m3fnuz": "float8", "c10::float8_e5m2fnuz": "float8", "signed char": "int8"}


@dataclass(frozen=True)
class Work:
    """What one op instance computes: its family and kind, pass, dtype, GEMM dims, FLOPs and bytes."""

    family: str  # gemm, conv, attention, memory
    kind: str  # gemm: "gemm"; conv: "conv"; attention: its backend; memory: a layer_bytes kind
    pass_: str  # forward, backward (conv: forward, dgrad, wgrad or dgrad+wgrad)
    dtype: str
    flops: float
    bytes: float
    shapes: str  # the recorded input shapes, e.g. "141x512 @ 512x2048"
    M: float = math.nan
    N: float = math.nan
    K: float = math.nan
    batch: float = math.nan
    params: dict = field(default_factory=dict)  # what the pricer needs (layer_bytes params, conv/attention dims)
    assumed: str = ""  # what had to be assumed (a 2021 trace without Concrete Inputs)


def dtype_of(types: list | None) -> str:
    """perfkit's name of the first floating dtype in ``Input type`` (``c10::BFloat16`` → bfloat16), else ""."""
    for t in types or []:
        name = _DTYPES.get(str(t).lower())
        if name is not None and name != "int8":
            return name
    return ""


def _dims(args: tuple, i: int) -> tuple[int, ...] | None:
    dims = args[0] or []
    if i < len(dims) and isinstance(dims[i], list) and all(isinstance(d, int) for d in dims[i]):
        return tuple(dims[i])
    return None


def _concrete(args: tuple, i: int) -> Any:
    """The i-th ``Concrete Inputs`` value parsed (``'[2, 2]'`` → [2, 2], ``'True'`` → True), else None."""
    values = args[2] or []
    if i >= len(values) or values[i] in ("", None):
        return None
    text = str(values[i]).strip()
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("["):
        items = [v.strip() for v in text.strip("[]").split(",") if v.strip()]
        if all(v in ("True", "False") for v in items):
            return [v == "True" for v in items]
        try:
            return [int(v) for v in items]
        except ValueError:
            return None
    try:
        return float(text)
    except ValueError:
        return None


def _fmt(*shapes: tuple | None) -> str:
    return " @ ".join("x".join(map(str, s)) for s in shapes if s is not None)


def _layout(args: tuple, a_i: int, b_i: int) -> str:
    """The GEMM's layout (:mod:`perfkit.gemm_alignment`) from ``Input Strides``: an operand whose last dim is
    contiguous is "N", whose second-last is "T"; C written contiguous. "" when the strides do not say."""
    strides = args[3] or []
    letters = []
    for i in (a_i, b_i):
        st = strides[i] if i < len(strides) else None
        if not isinstance(st, list) or len(st) < 2:
            return ""
        letters.append("N" if st[-1] == 1 else "T" if st[-2] == 1 else "")
    return "".join(letters) if all(letters) else ""


def _gemm(name: str, args: tuple, dtype: str) -> Work | None:
    a_i, b_i = (1, 2) if name in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation") else (0, 1)
    a, b = _dims(args, a_i), _dims(args, b_i)
    if a is None or b is None or len(a) != len(b) or len(a) not in (2, 3):
        return None
    batch = a[0] if len(a) == 3 else 1
    M, K, N = a[-2], a[-1], b[-1]
    s, out = itemsize(dtype), output_itemsize(dtype)
    nbytes = batch * (s * (M * K + K * N) + out * M * N)
    return Work("gemm", "gemm", "forward", dtype, 2.0 * M * N * K * batch, nbytes, _fmt(a, b), M, N, K, batch,
                {"layout": _layout(args, a_i, b_i)})


def _conv_params(x: tuple, w: tuple, stride: Any, padding: Any, dilation: Any, groups: Any,
                 out_hw: tuple | None) -> tuple[dict, str]:
    nd = len(x) - 2
    pair = lambda v, d: list(v) * (nd if len(v) == 1 else 1) if isinstance(v, list) else [d] * nd  # noqa: E731
    st, pd, dl = pair(stride, 1), pair(padding, 0), pair(dilation, 1)
    g = int(groups) if groups else max(1, x[1] // w[1])
    assumed = "" if stride is not None else "stride and padding (no Concrete Inputs)"
    if out_hw is not None and stride is None:
        P, Q = out_hw if nd == 2 else (1, out_hw[-1])
    else:
        sizes = [(h + 2 * p - d * (r - 1) - 1) // s + 1 for h, p, d, r, s in zip(x[2:], pd, dl, w[2:], st)]
        P, Q = (sizes[0], sizes[1]) if nd == 2 else (1, sizes[0])
    H, W = (x[2], x[3]) if nd == 2 else (1, x[2])
    R, S = (w[2], w[3]) if nd == 2 else (1, w[2])
    return {"N": x[0], "C": x[1], "H": H, "W": W, "K": w[0], "R": R, "S": S, "P": P, "Q": Q, "groups": g,
            "dims": nd, "stride": st, "padding": pd, "dilation": dl}, assumed


def _conv_work(p: dict, pass_: str, dtype: str, shapes: str, assumed: str, nhwc: bool) -> Work:
    g, npq = p["groups"], p["N"] * p["P"] * p["Q"]
    C, K, rs = p["C"] // g, p["K"] // g, p["R"] * p["S"]
    passes = pass_.split("+")
    flops = 2.0 * npq * K * C * rs * g * len(passes)
    s, out = itemsize(dtype), output_itemsize(dtype)
    nbytes = len(passes) * (s * p["N"] * p["C"] * p["H"] * p["W"] + s * p["K"] * C * rs + out * npq * p["K"])
    M, N, Kd = {"forward": (npq, K, C * rs), "dgrad": (npq, C, K * rs), "wgrad": (C * rs, K, npq)}[passes[0]]
    return Work("conv", "conv", pass_, dtype, flops, nbytes, shapes, M, N, Kd, g,
                {**p, "nhwc": nhwc, "passes": passes}, assumed)


def _nhwc(args: tuple, i: int) -> bool:
    strides = args[3] or []
    st = strides[i] if i < len(strides) else None
    return isinstance(st, list) and len(st) == 4 and st[1] == 1 and st[3] != 1


def _conv(name: str, args: tuple, dtype: str, hints: dict) -> Work | None:
    if name == "aten::convolution":  # (input, weight, bias, stride, padding, dilation, transposed, out_pad, groups)
        x, w = _dims(args, 0), _dims(args, 1)
        if x is None or w is None or len(x) not in (3, 4) or len(w) != len(x) or _concrete(args, 6):
            return None
        p, assumed = _conv_params(x, w, _concrete(args, 3), _concrete(args, 4), _concrete(args, 5),
                                  _concrete(args, 8), hints.get("next_hw"))
        return _conv_work(p, "forward", dtype, _fmt(x, w), assumed, _nhwc(args, 0))
    if name == "aten::convolution_backward":  # (grad_out, input, weight, bias_sizes, stride, padding, dilation,
        go, x, w = _dims(args, 0), _dims(args, 1), _dims(args, 2)  # transposed, output_padding, groups, mask)
        mask = _concrete(args, 10)
        dims_ok = go is not None and x is not None and w is not None and len(x) in (3, 4)
        if not dims_ok or _concrete(args, 7):
            return None
        p, assumed = _conv_params(x, w, _concrete(args, 4), _concrete(args, 5), _concrete(args, 6),
                                  _concrete(args, 9), tuple(go[2:]))
        passes = "+".join(ps for ps, on in zip(("dgrad", "wgrad"), mask if isinstance(mask, list) else [1, 1]) if on)
        return _conv_work(p, passes or "dgrad+wgrad", dtype, _fmt(go, x, w), "", _nhwc(args, 1))
    # 2021: cudnn_convolution_backward(input, grad_output, weight, padding, stride, dilation, groups, ..., mask)
    x, go, w = _dims(args, 0), _dims(args, 1), _dims(args, 2)
    if x is None or go is None or w is None or len(x) not in (3, 4):
        return None
    p, _ = _conv_params(x, w, None, None, None, None, tuple(go[2:]))
    inner = hints.get("inner", frozenset())
    ran = [ps for ps in ("dgrad", "wgrad") if f"aten::cudnn_convolution_backward_{'input' if ps == 'dgrad' else 'weight'}"
           in inner]
    return _conv_work(p, "+".join(ran) or "dgrad+wgrad", dtype, _fmt(go, x, w), "", False)


_SDPA = {  # name: (backend, pass, index of query, index of is_causal)
    "aten::_scaled_dot_product_flash_attention": ("flash", "forward", 0, 4),
    "aten::_scaled_dot_product_efficient_attention": ("efficient", "forward", 0, 6),
    "aten::_scaled_dot_product_cudnn_attention": ("cudnn", "forward", 0, 6),
    "aten::_scaled_dot_product_flash_attention_backward": ("flash", "backward", 1, 11),
    "aten::_scaled_dot_product_efficient_attention_backward": ("efficient", "backward", 1, 11),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("cudnn", "backward", 1, 14),
}


def _attention(name: str, args: tuple, dtype: str) -> Work | None:
    backend, pass_, qi, ci = _SDPA[name]
    q, k, v = _dims(args, qi), _dims(args, qi + 1), _dims(args, qi + 2)
    if q is None or k is None or v is None or len(q) != 4:
        return None
    B, H, L, E = q
    S, Ev = k[-2], v[-1]
    causal = bool(_concrete(args, ci))
    frac = 0.5 if causal else 1.0
    flops = frac * 2.0 * B * H * L * S * (E + Ev) * (1 if pass_ == "forward" else 2.5)
    s = itemsize(dtype)
    nbytes = s * B * H * (L * E + S * E + S * Ev + L * Ev) * (1 if pass_ == "forward" else 2) + 4 * B * H * L
    params = {"batch": B * H, "L": L, "S": S, "E": E, "Ev": Ev, "causal": causal, "heads": H}
    return Work("attention", backend, pass_, dtype, flops, nbytes, _fmt(q, k, v), L, S, E, B * H, params)


def _numel(shape: tuple | None) -> int:
    return math.prod(shape) if shape else 0


def _tensors(args: tuple) -> list[tuple[int, ...]]:
    """Every tensor's dims among the inputs (a tensor list's too)."""
    out = []
    for d in args[0] or []:
        if isinstance(d, list) and d and all(isinstance(v, list) for v in d):
            out += [tuple(v) for v in d if all(isinstance(i, int) for i in v)]
        elif isinstance(d, list) and d and all(isinstance(v, int) for v in d):
            out.append(tuple(d))
    return out


_ACT = {"relu": "relu", "relu_": "relu", "gelu": "gelu", "gelu_": "gelu", "silu": "silu", "silu_": "silu",
        "sigmoid": "sigmoid", "sigmoid_": "sigmoid", "tanh": "tanh", "tanh_": "tanh", "threshold_backward": "relu",
        "gelu_backward": "gelu", "silu_backward": "silu", "sigmoid_backward": "sigmoid", "tanh_backward": "tanh",
        "_softmax": "softmax", "_log_softmax": "softmax", "_softmax_backward_data": "softmax",
        "_log_softmax_backward_data": "softmax"}
_BN = {"cudnn_batch_norm": (0, 5), "native_batch_norm": (0, 5), "miopen_batch_norm": (0, 5),
       "_native_batch_norm_legit": (0, 5), "_native_batch_norm_legit_no_training": (0, None),
       "cudnn_batch_norm_backward": (0, None), "native_batch_norm_backward": (1, None),
       "miopen_batch_norm_backward": (0, None)}
_ELEMENTWISE = {"add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "pow", "rsqrt", "sqrt", "exp", "neg",
                "where", "masked_fill", "masked_fill_", "clamp", "clamp_", "clamp_min", "clamp_min_", "addcmul_",
                "addcdiv_", "lerp_", "sqrt_", "cos", "sin", "erf", "abs", "reciprocal", "maximum", "minimum",
                "fill_", "zero_", "copy_", "cat", "sum", "mean", "amax", "max", "min", "var_mean", "norm",
                "linalg_vector_norm", "nll_loss_forward", "nll_loss_backward", "index_select", "gather",
                "triu", "tril", "eq", "ne", "lt", "gt", "le", "ge", "bitwise_not", "logical_not", "_to_copy"}
_REDUCTIONS = {"sum", "mean", "amax", "max", "min", "var_mean", "norm", "linalg_vector_norm", "nll_loss_forward"}


def _memory(op: str, args: tuple, dtype: str) -> Work | None:
    ts = _tensors(args)
    if not ts:
        return None
    x = ts[0]
    backward = "backward" in op
    pass_ = "backward" if backward else "forward"
    if op in _ACT:
        kind, shape, params = _ACT[op], (x if not backward else _dims(args, 1) or x), {}
    elif op in ("native_layer_norm", "native_layer_norm_backward", "_fused_rms_norm", "native_group_norm"):
        xi = 1 if op == "native_layer_norm_backward" else 0
        shape = _dims(args, xi) or x
        norm = _concrete(args, 1 if xi == 0 else 2)
        ndim = len(norm) if isinstance(norm, list) else (len(shape) - 1 if op == "native_group_norm" else 1)
        kind = "rmsnorm" if op == "_fused_rms_norm" else "layernorm"
        params = {"normalized_ndim": max(1, min(ndim, len(shape))), "elementwise_affine": True, "training": True}
    elif op in _BN:
        xi, ti = _BN[op]
        shape = _dims(args, xi) or x
        training = True if ti is None else _concrete(args, ti) is not False
        if len(shape) < 2 or (backward and not training):
            return None
        kind, params = "batchnorm", {"training": training or backward}
    elif op in ("native_dropout", "native_dropout_backward"):
        kind, shape, params = "dropout", x, {}
    elif op in ("max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward"):
        xi = 1 if backward else 0
        shape = _dims(args, xi) or x
        kernel, stride, pad = (_concrete(args, xi + i) for i in (1, 2, 3))
        if len(shape) != 4 or kernel is None:
            kind, params = "elementwise", {}
        else:
            kind = "maxpool" if op.startswith("max") else "avgpool"
            params = {"kernel_size": tuple(kernel), "stride": tuple(stride) if stride else None,
                      "padding": tuple(pad) if pad else 0}
    elif op in ("embedding", "embedding_dense_backward"):
        if backward:
            idx, grad = _dims(args, 1), x
            V = _concrete(args, 2)
            if idx is None or V is None:
                return None
            kind, shape, params = "embedding", grad, {"num_embeddings": int(V)}
        else:
            w, idx = x, _dims(args, 1)
            if idx is None or len(w) != 2:
                return None
            kind, shape, params = "embedding", tuple(idx) + (w[1],), {"num_embeddings": w[0]}
    else:
        floats = ts
        if op in _REDUCTIONS:
            kind, shape, params = "elementwise", (1,), {"read_elements": _numel(x)}
        elif op in ("fill_", "zero_"):
            kind, shape, params = "elementwise", x, {"read_elements": 0}
        elif op == "cat":
            total = sum(_numel(t) for t in floats)
            kind, shape, params = "elementwise", (total,), {"read_elements": total}
        elif op == "copy_":
            src = ts[1] if len(ts) > 1 else x
            kind, shape, params = "elementwise", x, {"read_elements": _numel(src)}
        else:
            try:
                out = tuple(np.broadcast_shapes(*floats))
            except ValueError:
                out = x
            kind, shape, params = "elementwise", out, {"read_elements": sum(_numel(t) for t in floats)}
    if not shape or not all(shape):
        return None
    try:
        nbytes = layer_bytes(kind, shape, dtype, pass_=pass_, **params)
    except (TypeError, ValueError):
        return None
    return Work("memory", kind, pass_, dtype, float(math.prod(shape)), float(nbytes), _fmt(*ts[:3]),
                params={"shape": tuple(shape), **params})


_GEMMS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::_addmm_activation"}
_CONVS = {"aten::convolution", "aten::convolution_backward", "aten::cudnn_convolution_backward"}
_MEMORY = ({f"aten::{n}" for n in (*_ACT, *_BN, *_ELEMENTWISE)} | {
    f"aten::{n}" for n in ("native_layer_norm", "native_layer_norm_backward", "_fused_rms_norm", "native_group_norm",
                           "native_dropout", "native_dropout_backward", "max_pool2d_with_indices",
                           "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward", "embedding",
                           "embedding_dense_backward")})

#: Every ATen op name :func:`work_of` maps.
MAPPED = frozenset(_GEMMS | _CONVS | set(_SDPA) | _MEMORY)

#: Ops that own every kernel launched inside them (a convolution's bias add, an embedding's index_select):
#: a kernel joins the outermost of these above it rather than the innermost mapped op.
COMPOSITES = frozenset(_CONVS | set(_SDPA) | {"aten::embedding", "aten::native_layer_norm",
                                               "aten::native_layer_norm_backward", "aten::native_group_norm"}
                       | {f"aten::{n}" for n in _BN})


def work_of(name: str, args: tuple | None, hints: dict | None = None) -> Work | None:
    """The :class:`Work` of one op instance (``args``: ``(Input Dims, Input type, Concrete Inputs, Input
    Strides)``), or None when perfkit does not map it or its shapes were not recorded."""
    if name not in MAPPED or not args or not args[0]:
        return None
    dtype = dtype_of(args[1])
    if not dtype:
        return None
    if name in _GEMMS:
        return _gemm(name, args, dtype)
    if name in _CONVS:
        return _conv(name, args, dtype, hints or {})
    if name in _SDPA:
        return _attention(name, args, dtype)
    return _memory(name[len("aten::"):], args, dtype)
