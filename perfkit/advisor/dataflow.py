"""Which sizes of a model can change alone: the data's paths between ops, and weights shared by layers.

A fix is worth proposing only where it can be applied. Two things stop it:

- **a shared width**: a layer whose output is added to another tensor of its width (a residual stream,
  a position table) cannot change that width alone: every block reading and writing the stream
  would have to change with it (:func:`shared_width_ops`). Attention's projections are sized by its
  heads × head size, which query, key and value share, so no projection feeding attention (nor
  ``nn.MultiheadAttention``'s GEMMs) is resized alone either;
- **a tied weight**: a layer whose weight is the same tensor as another's (a language model's output
  head and its token embedding) keeps the tie only if both change (:func:`tied_weights`).

The paths come from :attr:`TensorInfo.source <perfkit.advisor.capture.TensorInfo>`: which recorded call
computed each tensor, through views and casts.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .capture import Call, TensorInfo
from .ops import COMPOSITES, Op

__all__ = ["paddable_layers", "shared_width_ops", "tied_weights"]

#: How many ops back from an addition the search for the GEMM that wrote its operand goes.
MAX_HOPS = 8


def _floats(call: Call) -> list[TensorInfo]:
    return [a for a in (*call.args, *call.kwargs.values())
            if isinstance(a, TensorInfo) and a.dtype.startswith(("float", "bfloat"))]


def _widening(call: Call) -> bool:
    """An addition of two computed tensors of the output's width (a residual, a position table)."""
    if call.op != "add" or not isinstance(call.output, TensorInfo) or len(call.output.shape) < 2:
        return False
    width = call.output.shape[-1]
    operands = [t for t in _floats(call) if t.derived and len(t.shape) >= 2 and t.shape[-1] == width]
    return len(operands) >= 2


def _attention(call: Call) -> bool:
    """Attention: the fused kernel, or a batched product of two computed tensors (the scores, or P·V)."""
    if call.op == "scaled_dot_product_attention":
        return True
    operands = [t for t in _floats(call) if t.source >= 0 and len(t.shape) >= 3]
    return call.op in ("matmul", "bmm", "baddbmm") and len(operands) >= 2


def _writer(operand: TensorInfo, gemms: dict[int, list[Op]], by_index: dict[int, Call], stream: bool) -> int | None:
    """Index of the GEMM op whose output ``operand`` is, through ops that keep its width, or None."""
    source, hops = operand.source, 0
    while source >= 0 and hops < MAX_HOPS:
        if source in gemms:
            return gemms[source][-1].index  # the op that wrote it (attention: its out projection)
        producer = by_index[source]
        if stream and producer.op == "add" or _attention(producer):
            return None  # another stream, or another attention: searched from its own call
        computed = [t for t in _floats(producer) if t.source >= 0]
        source, hops = (computed[0].source if computed else -1), hops + 1
    return None


def shared_width_ops(calls: list[Call], ops: list[Op]) -> frozenset[int]:
    """Indices of the GEMM ops whose output width other layers share: each one's output reaches an addition
    (:func:`_widening`: a residual stream) through ops that keep its width (dropout, a norm, an activation,
    a scale), or reaches attention (its width is heads × head size, which the other projections share),
    or it belongs to ``nn.MultiheadAttention``."""
    gemms: dict[int, list[Op]] = {}
    for op in ops:
        if op.is_gemm:
            gemms.setdefault(op.call, []).append(op)
    shared = {op.index for op in ops if op.is_gemm and op.name in COMPOSITES}
    by_index = {c.index: c for c in calls}
    for call in calls:
        stream = _widening(call)
        if not stream and not _attention(call):
            continue
        writers = [_writer(operand, gemms, by_index, stream) for operand in _floats(call)]
        found = [w for w in writers if w is not None]
        if stream and len(found) == len(writers) and len(set(found)) == 1:
            continue  # both terms computed from one GEMM's output (GELU's x + 0.044715·x³): not a stream
        shared.update(found)
    return frozenset(shared)


def tied_weights(model: Any) -> dict[str, list[str]]:
    """Module name → the other modules whose weight is the same tensor (``lm_head`` → ``["wte"]``)."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if name.endswith(".weight") or name == "weight":
            names.setdefault(id(p), []).append(name.removesuffix("weight").removesuffix("."))
    return {m: [o for o in group if o != m] for group in names.values() if len(group) > 1 for m in group}


def paddable_layers(model: Any) -> dict[str, str]:
    """Module name → ``"linear"`` or ``"conv2d"`` for the layers :func:`perfkit.padded_linear` and
    :func:`perfkit.padded_conv2d` take (``nn.Linear``, ``nn.Conv2d`` and their subclasses); a GPT-2
    ``Conv1D`` or an ``nn.Conv1d`` is neither: its fix is made where the model is defined."""
    return {name: "linear" if isinstance(m, nn.Linear) else "conv2d" for name, m in model.named_modules()
            if isinstance(m, (nn.Linear, nn.Conv2d))}
