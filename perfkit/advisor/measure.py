"""Timing an advice: each op's forward and backward passes on a device, and each fix against the original.

Every op is rebuilt from its shape parameters on random tensors (the user's weights are never
needed: a model checked on the meta device is timed the same way) and run through the torch
function the model calls (``F.linear``, ``F.conv2d``, ``F.scaled_dot_product_attention``, an
``nn.LSTM``, ``F.layer_norm`` …). Backward is timed alone, as ``torch.autograd.grad`` of an output
computed once outside the timed calls. Units: seconds.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import pandas as pd

from ..dtypes import itemsize, torch_dtype
from ..placement import ensure_fits, lean_bench, measured_on, resolve_device, tensor_device
from ..timing import NoiseWarning
from .ops import Op

__all__ = ["MEASURED_COLUMNS", "measure_advice", "op_functions", "op_key", "time_op"]

#: Torch functions that reduce (their output smaller than what they read); other elementwise ops that read
#: twice their output's elements are binary ops of two full-size tensors.
REDUCTIONS = frozenset({"mean", "sum", "amax", "amin", "max", "min", "norm", "var", "std", "logsumexp", "prod",
                        "adaptive_avg_pool2d", "adaptive_avg_pool1d", "adaptive_max_pool2d"})

#: Columns of ``Advice.measured``: one row per op, seconds.
MEASURED_COLUMNS = ("layer", "module", "op", "predicted_forward_s", "predicted_backward_s", "forward_s",
                    "backward_s")


def _rand(shape: tuple, dtype: Any, device: str, grad: bool):
    import torch

    return torch.randn(shape, device=device).to(dtype).requires_grad_(grad)


def _memory_fn(op: Op, dtype: Any, device: str, training: bool) -> tuple[Callable[[], Any], list]:
    import torch
    import torch.nn.functional as F

    p, shape = op.params, tuple(op.params["shape"])
    E = math.prod(shape)
    x = _rand(shape, dtype, device, training)
    kind = op.op
    if kind in ("relu", "gelu", "silu", "sigmoid", "tanh"):
        return (lambda: getattr(F, kind)(x)), [x]
    if kind == "softmax":
        return (lambda: torch.softmax(x, -1)), [x]
    if kind == "layernorm":
        k = p.get("normalized_ndim", 1)
        w = _rand(shape[-k:], torch.float32, device, training) if p.get("elementwise_affine", True) else None
        return (lambda: F.layer_norm(x, shape[-k:], w.to(dtype) if w is not None else None)), [x]
    if kind == "batchnorm":
        C = shape[1]
        mean, var = torch.zeros(C, device=device), torch.ones(C, device=device)
        w, b = _rand((C,), torch.float32, device, training), _rand((C,), torch.float32, device, training)
        return (lambda: F.batch_norm(x, mean, var, w, b, training=p.get("training", True))), [x]
    if kind == "dropout":
        return (lambda: F.dropout(x, 0.1, training=True)), [x]
    if kind in ("maxpool", "avgpool"):
        pool = F.max_pool2d if kind == "maxpool" else F.avg_pool2d
        return (lambda: pool(x, p["kernel_size"], p["stride"], p["padding"])), [x]
    if kind == "add":
        y = _rand(shape, dtype, device, training)
        return (lambda: x + y), [x, y]
    if kind == "embedding":
        w = _rand((p["num_embeddings"], shape[-1]), dtype, device, training and not p.get("frozen"))
        idx = torch.randint(p["num_embeddings"], shape[:-1], device=device)
        return (lambda: F.embedding(idx, w)), [w] if w.requires_grad else []
    reads = p.get("read_elements") or E  # elementwise: a reduction or a binary op reading `reads` elements
    k = reads // E
    if k >= 2 and reads == k * E and op.name in REDUCTIONS:  # a reduction over k elements per output
        wide = _rand((E, k), dtype, device, training)
        return (lambda: wide.sum(-1)), [wide]
    if k >= 2 and reads == k * E:  # a binary op of full-size tensors (x * y): not a reduction over 2 elements
        y = _rand(shape, dtype, device, training)
        return (lambda: x * y), [x, y]
    return (lambda: x * 2), [x]


def op_functions(op: Op, dtype: Any, device: str, training: bool) -> tuple[Callable[[], Any], list]:
    """``(forward, tensors)``: a function running ``op`` on random tensors on ``device`` in ``dtype``,
    and the tensors whose gradients its backward pass computes. The tensors live where the placement
    seam says (:func:`perfkit.placement.tensor_device`: a pretend GPU's on torch's meta device)."""
    import torch
    import torch.nn.functional as F

    device = tensor_device(device)
    dt = torch_dtype(dtype)
    p = op.params
    if op.op == "linear":
        x = _rand((p["tokens"], p["in_features"]), dt, device, training and p["input_grad"])
        w = _rand((p["out_features"], p["in_features"]), dt, device, training and p.get("weight_grad", True))
        return (lambda: F.linear(x, w)), [t for t in (x, w) if t.requires_grad]
    if op.op == "conv":
        g = p["groups"]
        two_d = p["dims"] == 2
        xs = (p["N"], p["C"], p["H"], p["W"]) if two_d else (p["N"], p["C"], p["W"])
        ws = (p["K"], p["C"] // g, p["R"], p["S"]) if two_d else (p["K"], p["C"] // g, p["S"])
        x, w = _rand(xs, dt, device, False), _rand(ws, dt, device, False)
        if p["nhwc"] and two_d:
            x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        x.requires_grad_(training and p["input_grad"])
        w.requires_grad_(training and p.get("weight_grad", True))
        conv = F.conv2d if two_d else F.conv1d
        return (lambda: conv(x, w, None, p["stride"], p["padding"], p["dilation"], g)), \
            [t for t in (x, w) if t.requires_grad]
    if op.op == "matmul":
        lead = (p["batch"],) if p["batch"] > 1 else ()
        a = _rand(lead + (p["M"], p["K"]), dt, device, training and p["grad_a"])
        b = _rand(lead + (p["K"], p["N"]), dt, device, training and p["grad_b"])
        return (lambda: torch.matmul(a, b)), [t for t in (a, b) if t.requires_grad]
    if op.op == "attention":  # 4-D (batch, heads, tokens, dim): torch's fused kernels refuse 3-D inputs
        lead = (p["batch"] // p.get("heads", 1), p.get("heads", 1))
        q = _rand(lead + (p["L"], p["E"]), dt, device, training)
        k = _rand(lead + (p["S"], p["E"]), dt, device, training)
        v = _rand(lead + (p["S"], p["Ev"]), dt, device, training)
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"])), [q, k, v]
    if op.op == "rnn":
        cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[p["cell"]]
        rnn = cls(p["input_size"], p["hidden"], p["layers"], batch_first=True,
                  bidirectional=p["directions"] == 2, device=device, dtype=dt)
        x = _rand((p["batch"], p["seq_len"], p["input_size"]), dt, device, training and p["input_grad"])
        trained = training and p.get("weight_grad", True)
        tensors = ([x] if x.requires_grad else []) + (list(rnn.parameters()) if trained else [])
        return (lambda: rnn(x)[0]), tensors
    return _memory_fn(op, dt, device, training)


def _bytes_needed(op: Op, dtype: Any) -> int:
    p, s = op.params, itemsize(dtype)
    if op.op == "linear":
        n = p["tokens"] * (p["in_features"] + p["out_features"]) + p["in_features"] * p["out_features"]
    elif op.op == "conv":
        n = p["N"] * (p["C"] * p["H"] * p["W"] + p["K"] * p["P"] * p["Q"]) + p["K"] * p["C"] * p["R"] * p["S"]
    elif op.op == "matmul":
        n = p["batch"] * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"])
    elif op.op == "attention":
        n = p["batch"] * (2 * p["L"] * (p["E"] + p["Ev"]) + p["S"] * (p["E"] + p["Ev"]))
    elif op.op == "rnn":
        n = p["batch"] * p["seq_len"] * (p["input_size"] + 8 * p["hidden"]) * p["layers"]
    else:
        n = 4 * max(math.prod(p["shape"]), p.get("read_elements") or 0)
    return 3 * n * s  # the tensors, their gradients and the backward pass's temporaries


def time_op(op: Op, dtype: Any, device: str, training: bool) -> dict[str, float]:
    """Measured ``forward_s`` and (in training) ``backward_s`` of ``op`` on ``device``, in seconds.

    Refused before allocating (``ValueError``) when its tensors would not fit in free memory.
    """
    import torch

    ensure_fits(_bytes_needed(op, dtype), device, what=f"timing {op.layer or 'the model'} ({op.op})")
    fn, tensors = op_functions(op, dtype, device, training)
    label = f"{op.layer}:{op.op}"
    with warnings.catch_warnings():  # one op among many: its noise shows in the per-layer ratios
        warnings.simplefilter("ignore", NoiseWarning)
        with torch.no_grad():
            forward_s = lean_bench(fn, device, label).median
        if not training or not tensors:
            return {"forward_s": forward_s, "backward_s": math.nan if training else 0.0}
        out = fn()
        grad = torch.ones_like(out)

        def backward() -> Any:
            return torch.autograd.grad(out, tensors, grad, retain_graph=True)

        return {"forward_s": forward_s, "backward_s": lean_bench(backward, device, label + ":backward").median}


def op_key(op: Op) -> str:
    """A key equal for ops that do the same work (same kind and parameters), to time them once."""
    return f"{op.op}:{sorted(op.params.items())!r}"


def measure_advice(advice: Any, device: str = "auto", *, fixes: bool = True, progress: bool = True):
    """:meth:`perfkit.advisor.Advice.measure`: time each op and fix of ``advice`` on ``device``."""
    from tqdm.auto import tqdm

    device = resolve_device(device)
    here = measured_on()
    if (here.kind == "gpu") != (device == "cuda") or here.name != advice.spec.name:
        raise ValueError(f"the advice is for {advice.spec.name} but {device} here is {here.name}: measurements "
                         f"would not compare with the predictions; advise with spec=pk.current_device() to "
                         "measure on this machine")
    pricer, training = advice._pricer, advice.training
    wanted = list(advice.ops) + ([f for _, f, _ in advice._fixes if f is not None] if fixes else [])
    times: dict[str, dict[str, float]] = {}
    for op in tqdm([o for o in {op_key(o): o for o in wanted}.values()], desc="timing ops", disable=not progress):
        times[op_key(op)] = time_op(op, advice.dtype, device, training)

    def total(op: Op) -> float:
        t = times[op_key(op)]
        return t["forward_s"] + (t["backward_s"] if training else 0.0)

    rows = []
    for op in advice.ops:
        predicted = pricer.rows(op)
        fwd = sum(r["predicted_s"] for r in predicted if r["pass"] == "forward")
        rows.append({"layer": op.layer, "module": op.module, "op": op.label, "predicted_forward_s": fwd,
                     "predicted_backward_s": sum(r["predicted_s"] for r in predicted) - fwd,
                     **times[op_key(op)]})
    advice.measured = pd.DataFrame(rows, columns=list(MEASURED_COLUMNS))
    if fixes:
        advice.findings["measured_saving_s"] = [
            total(op) - total(fixed) * per_work if op is not None and fixed is not None else math.nan
            for op, fixed, per_work in advice._fixes]
    return advice.measured
