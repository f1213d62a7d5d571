"""The rules about time set by bytes: ``memory_bound`` (any op below the ridge point, with what limits it)
and ``fusion`` (chains of memory-bound ops that one kernel could run), NVIDIA's *Memory-Limited Layers*.

A GEMM below the ridge is named with the dimension that limits its intensity: each tensor it moves is
reused across one dimension (a linear layer's weights across the tokens, its input across the output
features, its output across the input features), so the intensity is ``2 / (s/M + s/N + o/K)`` FLOP/B
(s, o: input and output bytes per element) and the smallest dimension sets it: a larger batch helps
only when the batch is that dimension. A norm, an activation or an elementwise op is reported
where it takes at least :data:`~perfkit.advisor.context.MIN_SHARE` of the step and no ``fusion`` chain
holds it (a chain's saving is that finding's, not this one's). Units: seconds, bytes, FLOP.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..dtypes import itemsize, output_itemsize
from ..memory_model import CHAIN_KINDS, chain_bytes, layer_bytes, memory_time
from ..quantization import alignment
from .context import Context, finding, small_batch_of
from .ops import Op

__all__ = ["chains", "fusion", "memory_bound"]

#: The forward GEMM's (M, N, K) of each GEMM kind, in words, and which of them is the batch.
_DIMS = {"linear": (("out_features", "tokens (batch × positions)", "in_features"), 1),
         "conv": (("batch × output pixels", "output channels", "input channels × filter taps"), 0),
         "matmul": (("rows", "columns", "inner size"), None)}
_HALF = "bfloat16"
_POINTWISE = {"relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "add", "elementwise"}


def chains(ctx: Context) -> list[list[Op]]:
    """Runs of two or more memory-bound ops of one shape in a row, each reading the whole tensor."""
    out, chain = [], []
    for op in [*ctx.ops, None]:
        keeps = op is not None and op.op in CHAIN_KINDS and (
            op.op != "elementwise" or op.params["read_elements"] >= math.prod(op.params["shape"]))
        if keeps and (not chain or op.params["shape"] == chain[0].params["shape"]):
            chain.append(op)
            continue
        if len(chain) >= 2:
            out.append(chain)
        chain = [op] if keeps else []
    return out


def _common_layer(layers: list[str]) -> str:
    common = []
    for level in zip(*(name.split(".") for name in layers)):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    return ".".join(common)


def fusion(ctx: Context) -> Iterable[dict]:
    """Each chain of :func:`chains`, priced as one kernel reading its inputs and writing its output once."""
    for chain in chains(ctx):
        kinds = [(o.op, o.byte_params) for o in chain]
        shape = chain[0].params["shape"]
        fused = memory_time(chain_bytes(kinds, shape, ctx.dtype, fused=True), ctx.pricer.spec,
                            ceilings=ctx.pricer.ceilings)
        eager = sum(ctx.pricer.rows(o)[0]["predicted_s"] for o in chain)
        names = " → ".join(o.label for o in chain)
        yield finding(_common_layer([o.layer for o in chain]), "fusion",
                      f"{len(chain)} memory-bound ops in a row ({names}) each read and write the whole tensor "
                      f"{tuple(shape)}.", "fuse them: torch.compile(model) makes one kernel of such chains "
                      "(forward saving shown)", eager - fused)


def _gemm(ctx: Context, op: Op, ridge: float) -> dict | None:
    rows = [r for r in ctx.pricer.rows(op) if r["pass"] == "forward"]
    if not rows or rows[0]["bound"] != "memory" or rows[0]["intensity"] >= ridge:
        return None
    r = rows[0]
    head = (f"{r['intensity']:.0f} FLOP/B, below the ridge point of {ridge:.0f} FLOP/B of {ctx.pricer.spec.name} "
            f"in {ctx.dtype}: memory-bound.")
    p = op.params
    if ctx.pricer.direct(op):
        return finding(op, "memory_bound", head + f" A {'depthwise' if p['C'] == p['groups'] else 'grouped'} "
                       f"convolution with {p['C'] // p['groups']} input channel(s) per group runs as a direct "
                       "kernel, not a GEMM: memory-bound at any batch.",
                       "fuse it with the ops around it (torch.compile), keep its tensors in a 2-byte dtype, or "
                       "give each group more channels (fewer groups) so that it becomes a GEMM")
    if op.op == "matmul" and p["batch"] > 1:
        return finding(op, "memory_bound", head, "use F.scaled_dot_product_attention, whose fused kernel never "
                       "writes the scores")
    names, batch = _DIMS[op.op]
    if op.op == "conv":  # the input is read once per pass, reused across the output channels and filter taps
        dims = (p["N"] * p["P"] * p["Q"], p["K"], (p["C"] // p["groups"]) * p["R"] * p["S"])
        x, w, y = ctx.pricer.conv_parts(p)
        parts = (w, x, y)
    else:
        s, o = itemsize(ctx.dtype), output_itemsize(ctx.dtype)
        dims = (r["M"], r["N"], r["K"])
        b = r["batch"]
        parts = (s * r["K"] * r["N"] * b, s * r["M"] * r["K"] * b, o * r["M"] * r["N"] * b)
    # each part of the bytes is reused across one dimension: the weights across the batch, the input across
    # the outputs, the output across the inner size; the smallest of them sets the intensity
    terms = [part / r["flops"] for part in parts]
    top = max(terms)
    limiting = [i for i in range(3) if terms[i] >= 0.5 * top]
    listed = " and ".join(f"{names[i]} ({dims[i]})" for i in limiting)
    if batch is None:
        fix = "fuse it with its neighbours (torch.compile), or make its smallest dimension larger"
    elif batch in limiting:
        fix = (f"a larger batch: the {names[batch]} limit its intensity; or fuse it with its neighbours "
               "(torch.compile)")
    else:
        rest = sum(terms[i] for i in range(3) if i != batch)
        fix = (f"a larger batch will not help (at most {1 / rest:.0f} FLOP/B at any batch): fuse it with its "
               "neighbours (torch.compile), or widen it where the model is defined")
    return finding(op, "memory_bound", head + f" Its {listed} limit{'s' if len(limiting) == 1 else ''} its "
                   "intensity.", fix)


def _pointwise(ctx: Context, op: Op) -> dict:
    t, p = ctx.times[op.index], op.params
    share = (f"{op.label} on {tuple(p['shape'])} takes {t / ctx.step_s:.1%} of the step, all of it "
             "moving bytes.")
    if itemsize(ctx.dtype) >= 4:
        params = op.byte_params
        passes = ("forward", "backward") if ctx.pricer.training else ("forward",)
        half = sum(memory_time(layer_bytes(op.op, p["shape"], _HALF, pass_=ps, **params), ctx.pricer.spec,
                               ceilings=ctx.pricer.ceilings) for ps in passes)
        return finding(op, "memory_bound", share, "run it in bfloat16 (torch.autocast): half the bytes", t - half)
    if op.op == "softmax" and len(p["shape"]) >= 3:
        return finding(op, "memory_bound", share + " A softmax over attention scores.",
                       "F.scaled_dot_product_attention computes it inside its fused kernel, never in memory", t)
    if op.op == "batchnorm" and not p.get("nhwc", False):
        return finding(op, "memory_bound", share + " Batch norm in NCHW.",
                       "model.to(memory_format=torch.channels_last): the NHWC batch norm, and no transposes "
                       "around the convolutions (the layout finding prices those)")
    if op.op in _POINTWISE and op.index and ctx.ops[op.index - 1].is_gemm:
        return finding(op, "memory_bound", share, "fuse it into the GEMM before it: torch.compile(model, "
                       "mode='max-autotune') runs such pointwise ops in the GEMM's epilogue (its whole pass saved)",
                       t)
    return finding(op, "memory_bound", share, "fuse it with its neighbours (torch.compile) where they are "
                   "pointwise; alone it is at the memory roof, and only fewer bytes make it faster")


def memory_bound(ctx: Context) -> Iterable[dict]:
    """GEMMs below the ridge point (not because of their batch: that is ``small_batch``'s), and memory-bound
    ops outside any fusion chain, each taking at least MIN_SHARE of the step."""
    ridge = ctx.pricer.spec.ops_per_byte(ctx.dtype)
    in_chains = {o.index for chain in chains(ctx) for o in chain}
    for op in ctx.ops:
        if not ctx.large(op) or op.index in in_chains:
            continue
        if op.is_gemm:
            if op.op in ("attention", "rnn") or small_batch_of(ctx, op) is not None:
                continue
            if op.op == "conv" and op.params.get("reads_input") and op.params["C"] < alignment(ctx.dtype):
                continue  # a first layer: the first_conv rule
            hit = _gemm(ctx, op, ridge)
            if hit is not None:
                yield hit
        elif op.op not in ("embedding", "maxpool", "avgpool"):  # a gather or a pool reads what it must
            yield _pointwise(ctx, op)
