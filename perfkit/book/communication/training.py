"""Chapter 08_communication: the training side. What a data-parallel step and a tensor-parallel layer
cost, with their all-reduces priced by the α-β model or read off any collective frame
(:func:`perfkit.book.communication.analysis.time_at`).

- data parallelism: GPT-2 small's parameters (:func:`gpt2_params`, counted on :func:`perfkit.zoo.gpt2_small`),
  its backward pass by the 6N rule (:func:`backward_time`), its gradients all-reduced in DDP's 25 MiB buckets
  (:func:`ddp_allreduce_time`), and whole steps with overlap (:func:`data_parallel_sweep`, on
  :func:`perfkit.data_parallel_step`);
- tensor parallelism: one Megatron-style layer of LLaMA-2-70B split over GPUs
  (:func:`tensor_parallel_layer`: the GEMM and attention models, two all-reduces).

:func:`overlap_ratio` and :func:`tensor_parallel_ratio` are the effects of the overlap and
tensor-parallel rules: a ratio read off a collective frame, or None where the rows are missing.
Seconds, bytes, FLOPs.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import pandas as pd

from ..._validate import positive_int, positive_number, sequence_of
from ...ceilings import achievable_ceilings
from ...collectives import data_parallel_step, explain_collective
from ...devices import DeviceSpec, resolve_spec
from ...dtypes import canonical_dtype, itemsize
from ...gemm_model import explain_gemm
from ...interconnects import LinkSpec
from ...provenance import Source
from ...transformer import predict_attention_time
from ...zoo import gpt2_small, parameter_count
from ..transformers.decoding import DecodeModel
from .analysis import BUCKET_BYTES, _curve, _ranks, time_at

__all__ = ["DP_BATCH", "DP_SETUPS", "GPT2_SMALL", "LLAMA2_70B", "TP_TOKENS", "backward_time", "data_parallel_source",
           "data_parallel_sweep", "ddp_allreduce_time", "gpt2_params", "overlap_ratio", "tensor_parallel_layer",
           "tensor_parallel_ratio"]

#: GPT-2 small (Radford et al. 2019; :func:`perfkit.zoo.gpt2_small`): vocabulary, context, width, layers.
GPT2_SMALL: dict[str, int] = {"vocab": 50257, "context": 1024, "dim": 768, "layers": 12}
#: The data-parallel example: sequences of GPT-2's context per GPU in the overlap rule.
DP_BATCH = 8
#: LLaMA-2-70B's layer (Touvron et al. 2023b: width 8192, 64 heads of 128, 8 K/V heads, SwiGLU 28672).
LLAMA2_70B = DecodeModel(hidden=8192, heads=64, head_dim=128, ffn=28672, layers=80, kv_heads=(8,), context=4096)
#: Tokens of the tensor-parallel example: one sequence of 4096.
TP_TOKENS = 4096
#: The data-parallel setups of the chapter: name → (GPUs, link in a node, link between nodes, GPUs per
#: node, algorithm). Across nodes the ring would pay the network's α on each of its 2(n − 1) steps; NCCL
#: runs trees there, with 2·log2(n) steps.
DP_SETUPS: dict[str, tuple[int, str, str | None, int | None, str]] = {
    "8 GPUs, NVLink 4 (one node)": (8, "nvlink4", None, None, "ring"),
    "64 GPUs, 8 nodes, InfiniBand NDR": (64, "nvlink4", "ib-ndr", 8, "tree"),
    "64 GPUs, 8 nodes, 100 GbE": (64, "nvlink4", "ethernet-100g", 8, "tree"),
}


@functools.lru_cache(maxsize=1)
def gpt2_params() -> int:
    """GPT-2 small's parameters (the tied ``lm_head`` once), counted on :func:`perfkit.zoo.gpt2_small` built
    on the meta device: 124,439,808."""
    import torch

    with torch.device("meta"):
        return parameter_count(gpt2_small())


def backward_time(spec: str | DeviceSpec, params: int, tokens: int, *, dtype: Any = "bfloat16") -> float:
    """Seconds of a backward pass by the 6N rule (Kaplan et al. 2020: a token costs 2 FLOPs per parameter
    forward and 4 backward, attention left out): ``4 · params · tokens`` FLOPs at ``spec``'s achievable
    FLOP/s in ``dtype`` (:func:`perfkit.achievable_ceilings`)."""
    spec = resolve_spec(spec, none_ok=False)
    flop_s = achievable_ceilings(spec).flop_s_for(canonical_dtype(dtype))
    return 4 * positive_int("params", params) * positive_int("tokens", tokens) / flop_s


def ddp_allreduce_time(frame: pd.DataFrame | None, gradient_bytes: float, *, n_ranks: int | None = None,
                       bucket: float = BUCKET_BYTES) -> float | None:
    """Seconds of all-reducing ``gradient_bytes`` in DDP's buckets, one after the other, each priced off
    ``frame`` (:func:`time_at`; a last bucket smaller than the frame's smallest message costs that
    message's time). None where a bucket is larger than the frame's largest message."""
    g, b = positive_number("gradient_bytes", gradient_bytes), positive_number("bucket", bucket)
    k = max(1, math.ceil(g / b * (1 - 1e-12)))
    full = time_at(frame, b, n_ranks=n_ranks, below="floor") if k > 1 else 0.0
    last = time_at(frame, g - (k - 1) * b, n_ranks=n_ranks, below="floor")
    return None if full is None or last is None else (k - 1) * full + last


def overlap_ratio(frame: pd.DataFrame | None, spec: str | DeviceSpec | None, *, n_ranks: int | None = None,
                  dtype: Any = "bfloat16", batch: int = DP_BATCH, grad_itemsize: int = 4) -> float | None:
    """GPT-2 small's backward pass (:func:`backward_time`, ``batch`` sequences of 1024 tokens per GPU,
    on ``spec`` in ``dtype``) ÷ the all-reduce of its ``grad_itemsize``-byte gradients in 25 MiB buckets
    (:func:`ddp_allreduce_time` off ``frame``): ≥ 1 where the backward pass is long enough to hide it."""
    if spec is None:
        return None
    params = gpt2_params()
    comm = ddp_allreduce_time(frame, params * grad_itemsize, n_ranks=n_ranks)
    if comm is None:
        return None
    return backward_time(spec, params, batch * GPT2_SMALL["context"], dtype=dtype) / comm


def data_parallel_source(spec: str | DeviceSpec = "H100-SXM") -> Source:
    """The :class:`~perfkit.provenance.Source` of :func:`data_parallel_sweep`'s numbers on ``spec``."""
    spec = resolve_spec(spec, none_ok=False)
    return Source("model", f"GPT-2 small on {spec.name}", detail="backward by the 6N rule at the achievable "
                  "FLOP/s, forward half of it; α-β all-reduces in 25 MiB buckets (pk.data_parallel_step)")


def data_parallel_sweep(spec: str | DeviceSpec = "H100-SXM", *, batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
                        setups: dict[str, tuple[int, str, str | None, int | None, str]] | None = None,
                        params: int | None = None, seq: int = GPT2_SMALL["context"], dtype: Any = "bfloat16",
                        grad_itemsize: int = 4, bucket_bytes: float = BUCKET_BYTES) -> pd.DataFrame:
    """One data-parallel step of GPT-2 small (or ``params`` parameters) per setup of ``setups`` (default
    :data:`DP_SETUPS`) and per-GPU batch of ``seq``-token sequences, by
    :func:`perfkit.data_parallel_step`: backward by the 6N rule on ``spec``, forward half of it,
    ``grad_itemsize``-byte gradients in ``bucket_bytes`` buckets. Columns: setup, n_ranks, batch, tokens,
    gradient_bytes, buckets, forward_s, backward_s, allreduce_s, exposed_s, step_s, comm_share."""
    spec = resolve_spec(spec, none_ok=False)
    p = gpt2_params() if params is None else positive_int("params", params)
    ns = sequence_of("batches", batches, positive_int)
    rows = []
    for name, (n, link, inter, per_node, algorithm) in (DP_SETUPS if setups is None else setups).items():
        for b in ns:
            tokens = b * positive_int("seq", seq)
            backward = backward_time(spec, p, tokens, dtype=dtype)
            step = data_parallel_step(p * grad_itemsize, backward, n, link, forward_s=backward / 2,
                                      bucket_bytes=bucket_bytes, algorithm=algorithm, inter_link=inter,
                                      ranks_per_node=per_node)
            rows.append({"setup": name, "n_ranks": n, "algorithm": algorithm, "batch": b, "tokens": tokens,
                         "gradient_bytes": step.gradient_bytes, "buckets": step.buckets, "forward_s": backward / 2,
                         "backward_s": backward, "allreduce_s": step.allreduce_s, "exposed_s": step.exposed_s,
                         "step_s": step.step_s, "comm_share": step.comm_share})
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------------- tensor parallel
def tensor_parallel_layer(spec: str | DeviceSpec = "H100-SXM", *, model: DecodeModel = LLAMA2_70B, tp: int = 8,
                          tokens: int = TP_TOKENS, link: str | LinkSpec = "nvlink4",
                          inter_link: str | LinkSpec | None = None, ranks_per_node: int | None = None,
                          collectives: pd.DataFrame | None = None, dtype: Any = "bfloat16") -> pd.DataFrame:
    """One layer of ``model`` (default LLaMA-2-70B's), forward, on one sequence of ``tokens``, split
    Megatron-style over ``tp`` GPUs: each GPU runs its slice of every projection (Q, K, V and the MLP's
    gate and up by columns, the output and down projections by rows: :func:`perfkit.explain_gemm`) and
    of the heads (:func:`perfkit.predict_attention_time`, causal), and the layer all-reduces its
    ``tokens × hidden`` activations twice, after attention and after the MLP.

    The all-reduces are priced off ``collectives`` (a collective frame on ``tp`` ranks: :func:`time_at`)
    when given, else by the α-β model on ``link`` (and ``inter_link`` between nodes of ``ranks_per_node``).
    Rows: op, kind ("GEMM", "attention", "all-reduce"), shape, predicted_s, share of the layer. The
    memory-bound operations are left out; nothing overlaps."""
    spec = resolve_spec(spec, none_ok=False)
    t, s, d = positive_int("tp", tp), positive_int("tokens", tokens), canonical_dtype(dtype)
    if not isinstance(model, DecodeModel):
        raise TypeError(f"model must be a DecodeModel, got {type(model).__name__}")
    kv = model.kv_heads[0]
    bad = [name for name, v in (("heads", model.heads), ("kv_heads", kv), ("ffn", model.ffn)) if v % t]
    if bad:
        raise ValueError(f"tp={t} must divide the model's {', '.join(bad)}")
    h, hd = model.hidden, model.head_dim
    rows = []

    def gemm(op: str, M: int, N: int, K: int) -> None:
        e = explain_gemm(M, N, K, d, spec)
        rows.append({"op": op, "kind": "GEMM", "shape": f"{M:,}×{N:,}×{K:,}", "predicted_s": e.predicted_s})

    message = s * h * itemsize(d)

    def allreduce(op: str) -> None:
        if collectives is not None:
            time_s = time_at(collectives, message, n_ranks=t, below="floor")
            if time_s is None:
                raise ValueError(f"collectives has no all-reduce on {t} ranks of {message:,} bytes or more")
        else:
            time_s = explain_collective("all-reduce", message, t, link, inter_link=inter_link,
                                        ranks_per_node=ranks_per_node).time_s
        rows.append({"op": op, "kind": "all-reduce", "shape": f"{s:,}×{h:,} ({message / 1e6:,.0f} MB)",
                     "predicted_s": time_s})

    gemm("Q, K, V projection", s, (model.heads + 2 * kv) * hd // t, h)
    a = predict_attention_time(1, model.heads // t, s, s, hd, spec=spec, dtype=d, causal=True, kv_heads=kv // t)
    rows.append({"op": "attention (fused, causal)", "kind": "attention",
                 "shape": f"{model.heads // t} heads × {s:,}²", "predicted_s": a.time_s})
    gemm("output projection", s, h, model.heads * hd // t)
    allreduce("all-reduce after attention")
    gemm("gate and up projections", s, 2 * model.ffn // t, h)
    gemm("down projection", s, h, model.ffn // t)
    allreduce("all-reduce after the MLP")
    out = pd.DataFrame(rows)
    out["share"] = out["predicted_s"] / out["predicted_s"].sum()
    return out


def tensor_parallel_ratio(frame: pd.DataFrame | None, spec: str | DeviceSpec | None, *, tp: int | None = None,
                          tokens: int = TP_TOKENS, model: DecodeModel = LLAMA2_70B,
                          dtype: Any = "bfloat16") -> float | None:
    """The compute of one tensor-parallel layer (its GEMMs and attention, :func:`tensor_parallel_layer`)
    ÷ its two all-reduces, read off ``frame`` on ``tp`` ranks (default: the most it has), in ``dtype``
    (its activations too): ≥ 1 where the link keeps up with the math. None without the rows, the GPU,
    or a peak of ``spec`` in ``dtype``."""
    n = _ranks(frame, tp, "all-reduce")
    if spec is None or n is None or n < 2 or _curve(frame, n, "all-reduce") is None:
        return None
    if any(v % n for v in (model.heads, model.kv_heads[0], model.ffn)):
        return None
    spec = resolve_spec(spec, none_ok=False)
    if canonical_dtype(dtype) not in spec.peaks:
        return None
    message = tokens * model.hidden * itemsize(dtype)
    if time_at(frame, message, n_ranks=n, below="floor") is None:
        return None
    layer = tensor_parallel_layer(spec, model=model, tp=n, tokens=tokens, collectives=frame, dtype=dtype)
    comm = layer.loc[layer["kind"] == "all-reduce", "predicted_s"].sum()
    return float(layer["predicted_s"].sum() - comm) / float(comm)
