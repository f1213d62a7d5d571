"""The decoding experiment: one decoding step of a LLaMA-shaped stack against the batch, with one K/V
head per query head and with grouped-query attention. Rows hold the bytes and FLOPs of the step
(:func:`perfkit.decode_step_bytes`), ``time_s`` (median seconds) and ``predicted_s``
(:func:`perfkit.predict_decode_time` on the measured GPU; NaN on a CPU). GPU: bfloat16, 4 of
LLaMA-2-7B's layers; CPU: a small stack of the same shape in float32, one thread, a second.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..._validate import positive_int, sequence_of
from ...dtypes import itemsize, torch_dtype
from ...matmul import seeded_on
from ...placement import ensure_fits, lean_bench, resolve_device
from ...transformer import decode_step_bytes, predict_decode_time
from ...experiments.measure import sweep, timing_row
from ...experiments.registry import register
from .experiments import TIMING_COLUMNS, gpu_spec, pick, predicted_time, setup

__all__ = ["CPU_MODEL", "DECODE_COLUMNS", "GPU_MODEL", "LLAMA2_7B", "DecodeModel", "decode_model", "decode_steps"]

DECODE_COLUMNS: dict[str, str] = dict(
    batch="sequences decoded together, one new token each", context="cached tokens per sequence",
    layers="decoder layers run", hidden="model width", heads="query heads", kv_heads="K/V heads (fewer: GQA)",
    head_dim="head dimension", ffn="feed-forward width (SwiGLU)", params="weights of the layers run",
    dtype="storage dtype of weights, cache and activations",
    bytes="pk.decode_step_bytes: every weight and the whole KV cache read once, bytes",
    flops="2·params·batch + 4·layers·batch·context·heads·head_dim, FLOP", **TIMING_COLUMNS,
    tokens_per_s="batch / time_s, tokens/s", gbps="bytes / time_s, 1e9 bytes/s",
    predicted_s="pk.predict_decode_time on the measured GPU (a roofline, no kernel costs), seconds; NaN on a CPU")


@dataclass(frozen=True)
class DecodeModel:
    """A LLaMA-shaped decoder stack: each layer a Q/K/V projection, attention over a KV cache, an output
    projection and a SwiGLU feed-forward; ``layers``, ``kv_heads`` and ``context`` are the defaults swept."""

    hidden: int  # model width
    heads: int  # query heads
    head_dim: int
    ffn: int  # feed-forward width
    layers: int  # layers run per step
    kv_heads: tuple[int, ...]  # K/V head counts swept (fewer than heads: grouped-query attention)
    context: int  # cached tokens per sequence

    def params(self, kv_heads: int, layers: int | None = None) -> int:
        """Weights of ``layers`` layers (default :attr:`layers`): ``hidden·(heads + 2·kv_heads)·head_dim``
        (Q, K, V), ``heads·head_dim·hidden`` (output) and ``3·hidden·ffn`` (gate, up, down) each."""
        n, h, d = (self.layers if layers is None else positive_int("layers", layers)), self.heads, self.head_dim
        return n * self.hidden * ((h + 2 * kv_heads) * d + h * d + 3 * self.ffn)


#: LLaMA-2-7B's layer, 4 of its 32 layers (the step's time and bytes scale with the layer count).
GPU_MODEL = DecodeModel(hidden=4096, heads=32, head_dim=128, ffn=11008, layers=4, kv_heads=(32, 8), context=2048)
#: A small stack of the same shape that a CPU runs in seconds.
CPU_MODEL = DecodeModel(hidden=256, heads=4, head_dim=64, ffn=688, layers=2, kv_heads=(4, 1), context=256)
#: LLaMA-2-7B whole, as the model's decoding functions take it: parameters (6.74e9, as its paper rounds
#: them), layers, query heads (= K/V heads: no GQA) and head dimension.
LLAMA2_7B: dict[str, int] = {"params": 6_740_000_000, "layers": 32, "heads": 32, "head_dim": 128}
_GPU_BATCHES, _QUICK_BATCHES, _CPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256), (1, 8, 64), (1, 4, 16, 64)


def decode_model(device: str = "auto") -> DecodeModel:
    """The stack ``decode_steps`` runs on ``device`` ("auto", "cuda" or "cpu"): GPU_MODEL or CPU_MODEL."""
    return CPU_MODEL if resolve_device(device) == "cpu" else GPU_MODEL


def _decode_need(model: DecodeModel, kv: int, batch: int, context: int, layers: int, dtype: str) -> int:
    """Bytes a step allocates: weights, the KV cache, one layer's K and V expanded to every query head (SDPA's
    math path repeats them for GQA) and twice the activations of one layer."""
    h, d = model.heads, model.head_dim
    cache, expanded = 2 * layers * batch * context * kv * d, (2 * batch * context * h * d if kv < h else 0)
    acts = 2 * batch * (2 * model.hidden + (h + 2 * kv) * d + 2 * h * d + 3 * model.ffn)
    return (model.params(kv, layers) + cache + expanded + acts) * itemsize(dtype)


def _decode_tensors(model: DecodeModel, kv: int, batch: int, context: int, layers: int, dtype: str,
                    device: str) -> tuple[list, Any]:
    """Seeded weights per layer (W_qkv, W_o, W_gate/up, W_down, each scaled by fan-in^-½) and a KV cache
    of shape (layers, 2, batch, kv, context, head_dim)."""
    import torch

    on, gen = seeded_on(device)
    randn = functools.partial(torch.randn, generator=gen, device=on, dtype=torch_dtype(dtype))
    hid, h, d, f = model.hidden, model.heads, model.head_dim, model.ffn
    shapes = ((hid, (h + 2 * kv) * d), (h * d, hid), (hid, 2 * f), (f, hid))
    weights = [tuple(randn(shape).mul_(shape[0] ** -0.5) for shape in shapes) for _ in range(layers)]
    return weights, randn((layers, 2, batch, kv, context, d))


def _decode_step(x, weights: list, cache, model: DecodeModel, kv: int):
    """One token per sequence through every layer: x (b, hidden) → x. Norms and writing the new token's
    K and V into the cache are left out (both tiny)."""
    import torch.nn.functional as F

    b, h, d = x.shape[0], model.heads, model.head_dim
    for i, (w_qkv, w_o, w_gu, w_down) in enumerate(weights):
        q = (x @ w_qkv)[:, : h * d].view(b, h, 1, d)
        o = F.scaled_dot_product_attention(q, cache[i, 0, :b], cache[i, 1, :b], enable_gqa=kv < h)
        x = x + o.reshape(b, h * d) @ w_o
        gate, up = (x @ w_gu).chunk(2, dim=-1)
        x = x + (F.silu(gate) * up) @ w_down
    return x


@register("decode_steps", "One decoding step of LLaMA-2-7B's layers (4 of 32), batch 1 to 256, 2,048 cached tokens, "
          "32 or 8 K/V heads: tokens/s and the bytes of weights and KV cache per step", DECODE_COLUMNS, needs=("cuda",))
def decode_steps(*, batches=None, kv_heads=None, context=None, layers=None, dtype="bfloat16", device="auto",
                 quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Each K/V head count and batch: one new token per sequence through ``layers`` layers of
    :func:`decode_model`. GPU: LLaMA-2-7B's layer, 4 of its 32 layers, kv_heads 32 and 8, batches 1 … 256,
    context 2,048 (``quick``: batches 1, 8, 64, context 1,024). CPU: :data:`CPU_MODEL`, batches 1 … 64."""
    device, d = setup(device, dtype)
    model = decode_model(device)
    ns = sequence_of("batches", pick(batches, device, quick, _CPU_BATCHES, _QUICK_BATCHES, _GPU_BATCHES),
                     positive_int)
    kvs = sequence_of("kv_heads", model.kv_heads if kv_heads is None else kv_heads, positive_int)
    if bad := [kv for kv in kvs if model.heads % kv]:
        raise ValueError(f"kv_heads must divide heads ({model.heads}): each K/V head serves heads/kv_heads query "
                         f"heads; got kv_heads {bad}")
    ctx = positive_int("context", pick(context, device, quick, model.context, 1024, model.context))
    n_layers = positive_int("layers", model.layers if layers is None else layers)
    ensure_fits(max(_decode_need(model, kv, max(ns), ctx, n_layers, d) for kv in kvs), device, what="decode_steps")
    spec = gpu_spec(device)
    held: dict[str, Any] = {}  # one K/V head count's weights and cache (for the largest batch) at a time

    def measure(point: tuple[int, int]) -> dict[str, Any]:
        import torch

        kv, b = point
        if held.get("kv") != kv:
            held.clear()
            held.update(kv=kv, tensors=_decode_tensors(model, kv, max(ns), ctx, n_layers, d, device))
        weights, cache = held["tensors"]
        on, gen = seeded_on(device)
        x = torch.randn((b, model.hidden), generator=gen, device=on, dtype=torch_dtype(d))
        with torch.no_grad():
            m = lean_bench(lambda: _decode_step(x, weights, cache, model, kv), device,
                           f"decode step b{b} kv{kv} context {ctx} {n_layers} layers {d}")
        p = model.params(kv, n_layers)
        nbytes = decode_step_bytes(p, b, ctx, layers=n_layers, kv_heads=kv, head_dim=model.head_dim, dtype=d)
        return {"batch": b, "context": ctx, "layers": n_layers, "hidden": model.hidden, "heads": model.heads,
                "kv_heads": kv, "head_dim": model.head_dim, "ffn": model.ffn, "params": p, "dtype": d,
                "bytes": nbytes, "flops": 2 * p * b + 4 * n_layers * b * ctx * model.heads * model.head_dim,
                **timing_row(m), "tokens_per_s": b / m.median, "gbps": m.gbps(nbytes),
                "predicted_s": predicted_time(predict_decode_time, spec, p, b, ctx, layers=n_layers, kv_heads=kv,
                                          head_dim=model.head_dim, dtype=d, heads=model.heads)}

    try:
        return sweep([(kv, b) for kv in kvs for b in ns], measure, on_row=on_row, progress=progress,
                     desc="decode steps")
    finally:
        held.clear()
