"""From recorded calls to the work they stand for: GEMMs (with their passes) or bytes of memory-bound ops.

Each recorded call becomes an :class:`Op`: a kind of work (``linear``, ``conv``, ``matmul``,
``attention``, ``rnn`` for GEMMs; a :func:`perfkit.layer_bytes` kind for memory-bound ops) and the
shape parameters it is built from. :func:`passes` turns an op's parameters into its work per pass, so
a rule can change a parameter (pad a dimension, grow the batch) and price the result the same way.

GEMMs follow :mod:`perfkit.shapes` (NVIDIA's conventions): forward, ``dgrad`` (the input's gradient,
left out where the input needs none, as for the images a first convolution reads) and ``wgrad`` (the
weight's) in training. A convolution's ``dgrad`` is taken as ``(N·P·Q, C, K·R·S)``: the same
multiply-adds as its forward pass, which is what a strided convolution's input gradient does
(NVIDIA's ``(N·H·W, C, K·R·S)`` counts stride² times too many). A grouped convolution or a
batched matmul is a batch of equal GEMMs; ``F.scaled_dot_product_attention`` is one fused kernel
per pass whose GEMMs (QKᵀ and PV, four more backward) never write the L×S scores; a causal mask
halves the rows each GEMM computes; ``nn.MultiheadAttention`` is its projections and its attention
(:func:`map_call`). A recurrent layer is an input GEMM over all steps and a recurrent GEMM repeated
once per step (its weight gradient summed over all steps in one GEMM). Gate arithmetic inside
recurrent cells and bias adds fused into GEMMs are not counted. ``x @ W`` with a parameter ``W`` is
a linear layer; indexing a parameter table is a lookup (an embedding's bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..gemm_alignment import LINEAR_LAYOUTS, MATMUL_LAYOUTS
from ..shapes import RNN_GATES, linear_gemms, rnn_gemms
from .capture import Call, TensorInfo

__all__ = ["COMPOSITES", "GEMM_OPS", "Gemm", "Op", "UNMAPPED_OPS", "map_call", "passes"]

#: Recorded ops perfkit has no model for: listed as unmapped.
UNMAPPED_OPS = frozenset({
    "einsum", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "embedding_bag",
    "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
    "interpolate", "upsample", "lstm_cell", "gru_cell", "rnn_tanh_cell",
})

#: Functions that do a module's whole work in one call (``nn.MultiheadAttention``'s): mapped to several ops.
COMPOSITES = ("multi_head_attention_forward", "_native_multi_head_attention")

#: Op kinds whose work is GEMMs (everything else is a memory-bound kind of :func:`perfkit.layer_bytes`).
GEMM_OPS = ("linear", "conv", "matmul", "attention", "rnn")

_ACTIVATIONS = {"relu", "gelu", "silu", "sigmoid", "tanh"}
_ELEMENTWISE = {"add", "sub", "mul", "div", "pow", "rsqrt", "sqrt", "exp", "neg", "where", "masked_fill",
                "mean", "sum", "square", "sin", "cos", "erf", "clamp", "hardtanh", "leaky_relu", "elu",
                "mish", "softplus", "adaptive_avg_pool2d", "adaptive_avg_pool1d", "adaptive_max_pool2d", "pad"}
_RNN = {"lstm": "lstm", "gru": "gru", "rnn_tanh": "rnn", "rnn_relu": "rnn"}


@dataclass(frozen=True)
class Gemm:
    """``batch`` independent M×N×K GEMMs, run ``count`` times one after another; ``layout`` says which
    dimension of each operand is contiguous (:mod:`perfkit.gemm_alignment`; "" unknown)."""

    M: int
    N: int
    K: int
    batch: int = 1
    count: int = 1
    layout: str = ""


@dataclass(frozen=True)
class Op:
    """The work of one call: ``op`` (see :data:`GEMM_OPS`, else a byte-model kind) and its parameters."""

    index: int  # the op's place among the advice's ops
    layer: str
    module: str
    op: str
    params: dict = field(default_factory=dict)
    name: str = ""  # the torch function called (e.g. "mul", "layer_norm")
    call: int = -1  # index of the recorded Call it comes from (several ops may share one: attention)

    @property
    def is_gemm(self) -> bool:
        return self.op in GEMM_OPS

    @property
    def byte_params(self) -> dict:
        """A memory-bound op's parameters as :func:`perfkit.layer_bytes` takes them (not its shape, nor
        what only the advisor reads: ``frozen``, ``nhwc``)."""
        return {k: v for k, v in self.params.items() if k not in ("shape", "frozen", "nhwc")}

    @property
    def label(self) -> str:
        """What the model called: the torch function, or the op's kind for a part of a composite."""
        return self.op if self.name in COMPOSITES or not self.name else self.name

    def with_params(self, **changes: Any) -> "Op":
        """The same op with some parameters changed (a rule's fix)."""
        return replace(self, params={**self.params, **changes})


def _arg(call: Call, i: int, name: str, default: Any = None) -> Any:
    if len(call.args) > i:
        return call.args[i]
    return call.kwargs.get(name, default)


def _floats(call: Call) -> list[TensorInfo]:
    leaves = [a for a in (*call.args, *call.kwargs.values()) if isinstance(a, TensorInfo)]
    return [t for t in leaves if t.dtype.startswith(("float", "bfloat"))]


def _needs_grad(t: Any) -> bool:
    return isinstance(t, TensorInfo) and t.derived and not t.is_input and t.dtype.startswith(("float", "bfloat"))


def _is_weight(t: Any) -> bool:
    """A 2-D parameter (or a view or cast of one): computed from nothing the forward pass ran."""
    return isinstance(t, TensorInfo) and t.derived and not t.is_input and t.source < 0 and len(t.shape) == 2


def _out(call: Call) -> TensorInfo | None:
    out = call.output
    if isinstance(out, (tuple, list)):
        out = out[0] if out else None
    return out if isinstance(out, TensorInfo) else None


def _matmul(call: Call, a: TensorInfo, b: TensorInfo) -> dict:
    sa = (1,) + a.shape if len(a.shape) == 1 else a.shape
    sb = b.shape + (1,) if len(b.shape) == 1 else b.shape
    m, k, n = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:  # a weight-like right operand: fold the left operand's batch into the rows
        m, batch = math.prod(sa[:-1]), 1
    else:
        batch = math.prod(_out(call).shape[:-2]) if _out(call) is not None else 1
    return {"M": m, "N": n, "K": k, "batch": batch, "grad_a": _needs_grad(a), "grad_b": _needs_grad(b)}


def map_call(call: Call, training: bool) -> tuple[list[Op], str]:
    """The :class:`Op` s of ``call`` (none if it does no work worth counting; several for a composite such
    as ``nn.MultiheadAttention``) and, when it cannot be mapped, the reason (else "")."""
    if call.op in COMPOSITES:
        return _multihead(call, training), ""
    op, reason = _map_one(call, training)
    if op is not None and not op.is_gemm and all(t.is_input for t in _floats(call)):
        op = op.with_params(frozen=True)  # on the inputs alone (images scaled, padded): no backward pass
    return ([op] if op is not None else []), reason


def _map_one(call: Call, training: bool) -> tuple[Op | None, str]:
    op, out = call.op, _out(call)
    mk = lambda kind, **p: (Op(call.index, call.layer, call.module, kind, p, call.op, call.index), "")  # noqa: E731
    if op in UNMAPPED_OPS:
        return None, f"perfkit does not map {op}"
    if op == "linear":
        x, w = call.args[0], _arg(call, 1, "weight")
        return mk("linear", tokens=math.prod(x.shape[:-1]), in_features=w.shape[1], out_features=w.shape[0],
                  input_grad=_needs_grad(x), weight_grad=w.requires_grad)
    if op in ("conv1d", "conv2d"):
        x, w = call.args[0], _arg(call, 1, "weight")
        two_d = op == "conv2d"
        N, C = x.shape[0], x.shape[1]
        H, W = (x.shape[2], x.shape[3]) if two_d else (1, x.shape[2])
        P, Q = (out.shape[2], out.shape[3]) if two_d else (1, out.shape[2])
        R, S = (w.shape[2], w.shape[3]) if two_d else (1, w.shape[2])
        return mk("conv", N=N, C=C, H=H, W=W, K=w.shape[0], R=R, S=S, P=P, Q=Q,
                  groups=int(_arg(call, 6, "groups", 1)), nhwc=x.nhwc or w.nhwc, dims=2 if two_d else 1,
                  stride=_arg(call, 3, "stride", 1), padding=_arg(call, 4, "padding", 0),
                  dilation=_arg(call, 5, "dilation", 1), input_grad=_needs_grad(x), weight_grad=w.requires_grad,
                  reads_input=x.source < 0)  # reads the model's inputs: a first layer
    if op in ("matmul", "bmm", "mm", "addmm", "baddbmm"):
        x, w = call.args[1:3] if op in ("addmm", "baddbmm") else call.args[:2]
        if _is_weight(w) and len(x.shape) >= 2:  # x @ W with a parameter W (in, out): a linear layer, as GPT-2's
            return mk("linear", tokens=math.prod(x.shape[:-1]), in_features=w.shape[0], out_features=w.shape[1],
                      input_grad=_needs_grad(x), weight_grad=w.requires_grad)
        return mk("matmul", **_matmul(call, x, w))
    if op == "scaled_dot_product_attention":
        q, k, v = call.args[0], _arg(call, 1, "key"), _arg(call, 2, "value")
        return mk("attention", batch=math.prod(q.shape[:-2]), L=q.shape[-2], S=k.shape[-2], E=q.shape[-1],
                  Ev=v.shape[-1], causal=bool(_arg(call, 5, "is_causal", False)),
                  heads=q.shape[-3] if len(q.shape) > 3 else 1)
    if op in _RNN:
        if isinstance(call.args[1], TensorInfo) and len(call.args[1].shape) == 1:
            return None, "packed sequences are not mapped"
        x, weights = call.args[0], call.args[2]
        layers, bidirectional, batch_first = call.args[4], call.args[7], call.args[8]
        T, B = (x.shape[0], 1) if len(x.shape) == 2 else (
            (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1]))
        cell = _RNN[op]
        return mk("rnn", cell=cell, input_size=weights[0].shape[1], hidden=weights[0].shape[0] // RNN_GATES[cell],
                  batch=B, seq_len=T, layers=int(layers), directions=2 if bidirectional else 1,
                  input_grad=_needs_grad(x), weight_grad=weights[0].requires_grad)
    if out is None or not out.dtype.startswith(("float", "bfloat")) or not out.shape and op != "sum":
        return None, ""
    shape = out.shape or (1,)
    if op == "getitem":  # table[ids]: a lookup in a parameter (a position table); any other indexing is a view
        table = call.args[0]
        if not _is_weight(table) or not out.shape or out.numel <= 1:
            return None, ""
        return mk("embedding", shape=shape, num_embeddings=table.shape[0], frozen=not table.requires_grad)
    if op == "embedding":
        w = _arg(call, 1, "weight")
        if not w.requires_grad:  # a frozen table: its backward pass computes nothing
            return mk("embedding", shape=shape, num_embeddings=w.shape[0], frozen=True)
        return mk("embedding", shape=shape, num_embeddings=w.shape[0])
    if op in _ACTIVATIONS:
        return mk(op, shape=shape)
    if op in ("softmax", "log_softmax", "cross_entropy"):
        return mk("softmax", shape=call.args[0].shape)
    if op in ("layer_norm", "rms_norm"):
        normalized = _arg(call, 1, "normalized_shape")
        weight = _arg(call, 2, "weight")
        return mk("layernorm", shape=shape, normalized_ndim=len(normalized),
                  elementwise_affine=isinstance(weight, TensorInfo), training=training)
    if op in ("group_norm", "instance_norm") and len(shape) >= 2:  # a norm per sample (and group): layer norm's bytes
        weight = _arg(call, 2 if op == "group_norm" else 3, "weight")
        return mk("layernorm", shape=shape, normalized_ndim=len(shape) - 1,
                  elementwise_affine=isinstance(weight, TensorInfo), training=training)
    if op == "_weight_norm":  # w = g · v / ‖v‖ (nn.utils.weight_norm): one pass over the weight
        return mk("elementwise", shape=shape, read_elements=sum(t.numel for t in _floats(call)))
    if op == "batch_norm":
        x = call.args[0]
        return mk("batchnorm", shape=shape, training=training, nhwc=x.nhwc) if len(shape) >= 2 else (None, "")
    if op == "dropout":
        p = float(_arg(call, 1, "p", 0.5))
        return mk("dropout", shape=shape) if training and p > 0 else (None, "")
    if op in ("max_pool2d", "avg_pool2d"):
        x = call.args[0]
        if len(x.shape) != 4:
            return None, f"{op} on a {len(x.shape)}-D input is not mapped"
        kernel, stride, padding = _arg(call, 1, "kernel_size"), _arg(call, 2, "stride"), _arg(call, 3, "padding", 0)
        params = {"kernel_size": kernel, "stride": stride or None, "padding": padding}
        pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
        pads = pair(padding)
        if any(k > d + 2 * p for k, d, p in zip(pair(kernel), x.shape[2:], pads)):  # ceil_mode: one window
            params = {"kernel_size": tuple(x.shape[2:]), "stride": tuple(x.shape[2:]), "padding": 0}
        if op == "max_pool2d":
            return mk("maxpool", shape=x.shape, indices_itemsize=8 if training else 0, **params)
        return mk("avgpool", shape=x.shape, **params)
    if op in ("add", "sub"):
        full = [t for t in _floats(call) if t.shape == out.shape]
        if len(full) >= 2:
            return mk("add", shape=shape)
    if op in _ELEMENTWISE or op in ("add", "sub"):
        return mk("elementwise", shape=shape, read_elements=sum(t.numel for t in _floats(call)))
    return None, ""


def _multihead(call: Call, training: bool) -> list[Op]:
    """``nn.MultiheadAttention``'s work, from the arguments of its one function call (torch's function
    mode cannot see inside it): the input projections (one packed GEMM when query, key and value are one
    tensor, as in self-attention), the attention (a fused kernel with ``need_weights=False``, else the
    scores written out: two batched matmuls and a softmax) and the output projection."""
    q, k, v, E, h = call.args[:5]
    if call.op == "_native_multi_head_attention":  # (q, k, v, E, heads, qkv_w, qkv_b, proj_w, proj_b, mask, ...)
        w_in, w_out, separate = call.args[5], call.args[7], None
        need_weights, causal = bool(_arg(call, 10, "need_weights", True)), False
        batch_first = True
    else:  # F.multi_head_attention_forward: (q, k, v, E, heads, in_w, in_b, bias_k, bias_v, zero_attn, p, out_w, ...)
        w_in, w_out = call.args[5], call.args[11]
        kw = call.kwargs
        separate = ([kw.get(n) for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight")]
                    if kw.get("use_separate_proj_weight") else None)
        need_weights = bool(kw.get("need_weights", True))
        causal = bool(kw.get("is_causal", False)) and kw.get("attn_mask") is None
        batch_first = False  # nn.MultiheadAttention hands it (length, batch, features)
    seq, bat = (1, 0) if batch_first else (0, 1)
    three = len(q.shape) == 3
    L, S = q.shape[seq if three else 0], k.shape[seq if three else 0]
    n = q.shape[bat] if three else 1
    mk = lambda kind, **p: Op(call.index, call.layer, call.module, kind, p, call.op, call.index)  # noqa: E731

    def lin(x: TensorInfo | None, tokens: int, i: int, o: int, w: Any) -> Op:
        return mk("linear", tokens=tokens, in_features=i, out_features=o, input_grad=x is None or _needs_grad(x),
                  weight_grad=isinstance(w, TensorInfo) and w.requires_grad)

    if separate is not None:
        ops = [lin(q, L * n, q.shape[-1], E, separate[0]), lin(k, S * n, k.shape[-1], E, separate[1]),
               lin(v, S * n, v.shape[-1], E, separate[2])]
    elif q.ident == k.ident == v.ident:
        ops = [lin(q, L * n, E, 3 * E, w_in)]
    elif k.ident == v.ident:
        ops = [lin(q, L * n, E, E, w_in), lin(k, S * n, E, 2 * E, w_in)]
    else:
        ops = [lin(q, L * n, E, E, w_in), lin(k, S * n, E, E, w_in), lin(v, S * n, E, E, w_in)]
    d, b = E // h, n * h
    if need_weights:
        ops += [mk("matmul", M=L, N=S, K=d, batch=b, grad_a=True, grad_b=True), mk("softmax", shape=(b, L, S)),
                mk("matmul", M=L, N=d, K=S, batch=b, grad_a=True, grad_b=True)]
    else:
        ops.append(mk("attention", batch=b, L=L, S=S, E=d, Ev=d, causal=causal, heads=h))
    return ops + [lin(None, L * n, E, E, w_out)]


def _linear(p: dict, training: bool) -> list[tuple[str, str, Gemm]]:
    g = linear_gemms(p["tokens"], p["in_features"], p["out_features"])
    keep = ["forward"]
    if training:
        keep += (["dgrad"] if p["input_grad"] else []) + (["wgrad"] if p.get("weight_grad", True) else [])
    return [(pass_, "", Gemm(*g[pass_], layout=LINEAR_LAYOUTS[pass_])) for pass_ in keep]


def _conv(p: dict, training: bool) -> list[tuple[str, str, Gemm]]:
    g = p["groups"]
    C, K = p["C"] // g, p["K"] // g
    npq, rs = p["N"] * p["P"] * p["Q"], p["R"] * p["S"]
    out = [("forward", "", Gemm(npq, K, C * rs, g))]
    if training and p["input_grad"]:
        out.append(("dgrad", "", Gemm(npq, C, K * rs, g)))  # as many MACs as forward, at any stride
    if training and p.get("weight_grad", True):
        out.append(("wgrad", "", Gemm(C * rs, K, npq, g)))
    return out


def _matmul_passes(p: dict, training: bool) -> list[tuple[str, str, Gemm]]:
    M, N, K, b = p["M"], p["N"], p["K"], p["batch"]
    lay = MATMUL_LAYOUTS
    out = [("forward", "", Gemm(M, N, K, b, layout=lay["forward"]))]
    if training and p["grad_a"]:
        out.append(("dgrad", "", Gemm(M, K, N, b, layout=lay["dgrad"])))
    if training and p["grad_b"]:
        out.append(("wgrad", "", Gemm(K, N, M, b, layout=lay["wgrad"])))
    return out


def _attention(p: dict, training: bool) -> list[tuple[str, str, Gemm]]:
    L, S, E, Ev, b = p["L"], p["S"], p["E"], p["Ev"], p["batch"]
    half = (lambda n: -(-n // 2)) if p["causal"] else (lambda n: n)
    out = [("forward", "qk", Gemm(half(L), S, E, b)), ("forward", "pv", Gemm(half(L), Ev, S, b))]
    if training:
        out += [("backward", "dp", Gemm(half(L), S, Ev, b)), ("backward", "dv", Gemm(half(S), Ev, L, b)),
                ("backward", "dq", Gemm(half(L), E, S, b)), ("backward", "dk", Gemm(half(S), E, L, b))]
    return out


def _rnn(p: dict, training: bool) -> list[tuple[str, str, Gemm]]:
    out = []
    T, B, H = p["seq_len"], p["batch"], p["hidden"]
    for layer in range(p["layers"]):
        x = p["input_size"] if layer == 0 else H * p["directions"]
        g = rnn_gemms(p["cell"], H, x, B, T)
        gH = g["input"][0]
        for d in range(p["directions"]):
            part = f"l{layer}" + (".reverse" if d else "")
            fw, dg, wg = (LINEAR_LAYOUTS[k] for k in ("forward", "dgrad", "wgrad"))  # W·x, as nn.Linear
            out += [("forward", part + ".input", Gemm(*g["input"], layout=fw)),
                    ("forward", part + ".recurrent", Gemm(*g["recurrent"], count=T, layout=fw))]
            if training:
                if layer or p["input_grad"]:
                    out.append(("dgrad", part + ".input", Gemm(x, B * T, gH, layout=dg)))
                out.append(("dgrad", part + ".recurrent", Gemm(H, B, gH, count=T, layout=dg)))
                if p.get("weight_grad", True):
                    out += [("wgrad", part + ".input", Gemm(x, gH, B * T, layout=wg)),
                            ("wgrad", part + ".recurrent", Gemm(H, gH, B * T, layout=wg))]
    return out


_BUILDERS = {"linear": _linear, "conv": _conv, "matmul": _matmul_passes, "attention": _attention, "rnn": _rnn}


def passes(op: Op, training: bool) -> list[tuple[str, str, Any]]:
    """``(pass, part, work)`` of ``op``: a :class:`Gemm` for GEMM ops, else ``(kind, shape, params)``
    for :func:`perfkit.layer_bytes` (a backward pass only in training)."""
    if op.is_gemm:
        return _BUILDERS[op.op](op.params, training)
    params = op.byte_params
    work = [("forward", "", (op.op, op.params["shape"], params))]
    if training and not op.params.get("frozen") and not (op.op == "batchnorm" and not params.get("training", True)):
        work.append(("backward", "", (op.op, op.params["shape"], params)))
    return work
