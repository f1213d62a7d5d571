"""Transformers: attention as two batched GEMMs and a softmax, and the bytes of a decoding step.

Attention over ``batch`` sequences (b) with ``heads`` query heads (h) of ``head_dim`` (d), ``seq_q``
queries (s_q) and ``seq_k`` keys (s_k) is, per head, ``S = Q·Kᵀ`` (an s_q×s_k×d GEMM),
``P = softmax(S)`` and ``O = P·V`` (an s_q×d×s_k GEMM): :func:`attention_flops`,
:func:`attention_gemms`. Run unfused (PyTorch SDPA's math path: three kernels), the s_q×s_k scores
are written by QKᵀ, read and written back by the softmax and read by PV; fused (FlashAttention
style: one kernel), Q, K and V are read once and O written once, and the scores never leave the
chip: :func:`attention_bytes`, :func:`predict_attention_time`. A fused kernel is priced by what it is
(:mod:`perfkit.attention_model`): the backend PyTorch picks on the device (cuDNN on Hopper, FlashAttention-2
on Ampere, …), its thread blocks' multiplies and exponentials at that backend's measured rates, and their
schedule on the SMs — not at the GEMM ceiling, which no SDPA kernel reaches.

Decoding one token per sequence reads every weight and the whole KV cache once per step, for
2 FLOPs per weight per sequence: memory-bound until the batch is large (:func:`decode_step_bytes`,
:func:`predict_decode_time`).

Grouped-query attention (``kv_heads`` < ``heads``; multi-query: ``kv_heads=1``) shares each K/V
head among ``heads/kv_heads`` query heads: it cuts the bytes of K and V, not the FLOPs.

Units: FLOP, bytes, seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._validate import boolean, positive_int
from .attention_model import fused_attention_s
from .ceilings import gemm_latency_s, kernel_latency_s, resolve_ceilings
from .devices import DeviceSpec, resolve_spec
from .dtypes import canonical_dtype, itemsize
from .gemm_model import predict_gemm_time
from .memory_model import layer_bytes, memory_time
from .roofline import gemm_flops

__all__ = ["SEARCH_LIMIT", "AttentionGemm", "AttentionPrediction", "DecodePrediction", "attention_bytes",
           "attention_flops", "attention_gemms", "decode_step_bytes", "predict_attention_time",
           "predict_decode_time"]

#: The largest sequence length and batch the searches of :func:`predict_attention_time` and
#: :func:`predict_decode_time` try (2**20).
SEARCH_LIMIT = 2**20


def _sizes(batch: Any, heads: Any, seq_q: Any, seq_k: Any, head_dim: Any) -> tuple[int, int, int, int, int]:
    return (positive_int("batch", batch), positive_int("heads", heads), positive_int("seq_q", seq_q),
            positive_int("seq_k", seq_k), positive_int("head_dim", head_dim))


def _kv_heads(heads: int, kv_heads: Any) -> int:
    """``kv_heads`` checked against ``heads`` (``None`` → ``heads``: plain multi-head attention)."""
    if kv_heads is None:
        return heads
    kv = positive_int("kv_heads", kv_heads)
    if heads % kv:
        raise ValueError(f"kv_heads must divide heads ({heads}): each K/V head serves heads/kv_heads query heads; "
                         f"got kv_heads={kv}")
    return kv


def _pairs(seq_q: int, seq_k: int, causal: Any) -> int:
    """(query, key) pairs computed; causal: queries aligned to the end of the keys."""
    if not boolean("causal", causal):
        return seq_q * seq_k
    if seq_q > seq_k:
        raise ValueError(f"seq_q must be at most seq_k with causal=True (the queries are the last seq_q of the "
                         f"seq_k positions), got seq_q={seq_q}, seq_k={seq_k}")
    return seq_q * (seq_k - seq_q) + seq_q * (seq_q + 1) // 2


def attention_flops(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *, causal: bool = False) -> int:
    """Forward FLOPs of attention's two GEMMs, QKᵀ and PV: ``4·b·h·s_q·s_k·d`` without a mask.

    With ``causal=True``, exactly the (query, key) pairs a causal mask keeps are counted, the
    queries aligned to the *end* of the keys (prefill, s_q = s_k, or a chunk of new queries over a
    KV cache): query i (0-based) sees ``s_k − s_q + i + 1`` keys, so the pairs are
    ``s_q·(s_k − s_q) + s_q·(s_q + 1)/2`` and the FLOPs ``4·b·h·d`` times that; for s_q = s_k = s
    a fraction ``(s + 1)/(2s)`` of the unmasked count. ``ValueError`` if causal and seq_q > seq_k.
    FlashAttention-style kernels skip whole masked tiles only, so they compute slightly more than
    this count (about half of ``4·b·h·s²·d`` for s_q = s_k); the softmax's FLOPs are not counted.
    """
    b, h, sq, sk, d = _sizes(batch, heads, seq_q, seq_k, head_dim)
    return 4 * b * h * d * _pairs(sq, sk, causal)


@dataclass(frozen=True)
class AttentionGemm:
    """One of attention's GEMMs: ``batch`` GEMMs of M×N×K (C[M×N] = A[M×K]·B[K×N]) in one launch,
    for ``predict_gemm_time(g.M, g.N, g.K, dtype, spec, batch=g.batch)``."""

    pass_: str  # "forward" or "backward"
    name: str  # "QKᵀ", "PV" (forward); "dP", "dV", "dQ", "dK" (backward)
    M: int
    N: int
    K: int
    batch: int  # b·h: one GEMM per sequence and query head

    @property
    def flops(self) -> int:
        """FLOPs of all ``batch`` GEMMs: ``batch·2·M·N·K``."""
        return self.batch * gemm_flops(self.M, self.N, self.K)


def attention_gemms(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *,
                    kv_heads: int | None = None) -> tuple[AttentionGemm, ...]:
    """Attention's GEMMs without a mask, as :class:`AttentionGemm` records, each run b·h times.

    - forward: ``QKᵀ`` (s_q×s_k×d: S = Q·Kᵀ) and ``PV`` (s_q×d×s_k: O = P·V);
    - backward: ``dP = dO·Vᵀ`` (s_q×s_k×d), ``dV = Pᵀ·dO`` (s_k×d×s_q), ``dQ = dS·K`` (s_q×d×s_k)
      and ``dK = dSᵀ·Q`` (s_k×d×s_q): twice the forward FLOPs. FlashAttention's backward also
      recomputes QKᵀ (not listed: it is the forward's first GEMM again).

    ``kv_heads`` (must divide ``heads``) is checked but changes no shape: grouped-query attention
    shares K and V across ``heads/kv_heads`` query heads, but the GEMMs still run per query head,
    which is how SDPA's math path and FlashAttention count them.
    """
    b, h, sq, sk, d = _sizes(batch, heads, seq_q, seq_k, head_dim)
    _kv_heads(h, kv_heads)
    n = b * h
    return (AttentionGemm("forward", "QKᵀ", sq, sk, d, n), AttentionGemm("forward", "PV", sq, d, sk, n),
            AttentionGemm("backward", "dP", sq, sk, d, n), AttentionGemm("backward", "dV", sk, d, sq, n),
            AttentionGemm("backward", "dQ", sq, d, sk, n), AttentionGemm("backward", "dK", sk, d, sq, n))


def attention_bytes(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, dtype: Any, *,
                    fused: bool = True, kv_heads: int | None = None) -> int:
    """Bytes the forward pass of attention moves to and from memory, every tensor in ``dtype``.

    - ``fused=True`` (FlashAttention style, the minimum): Q read (b·h·s_q·d elements), K and V read
      once each (b·kv_heads·s_k·d each), O written (b·h·s_q·d). A real kernel reads K and V once per
      block of queries, mostly from L2; that is not counted.
    - ``fused=False`` (SDPA's math path, three kernels): QKᵀ reads Q and K and writes the scores S
      (b·h·s_q·s_k); the softmax reads S and writes P (as :func:`perfkit.layer_bytes` counts a
      softmax); PV reads P and V and writes O. K and V are read once per *query* head (b·h·s_k·d
      each), because the math path expands them to h heads, so ``kv_heads`` does not change
      this count; the expanding copy itself, and a causal mask's bytes, are not counted.

    ``kv_heads`` (default ``heads``) must divide ``heads``. A causal mask changes no byte count here.
    """
    b, h, sq, sk, d = _sizes(batch, heads, seq_q, seq_k, head_dim)
    kv = _kv_heads(h, kv_heads)
    s = itemsize(dtype)
    if boolean("fused", fused):
        return s * (2 * b * h * sq * d + 2 * b * kv * sk * d)
    return s * b * h * (2 * sq * d + 2 * sk * d + 4 * sq * sk)


def _ceilings(spec: Any, dtype: str):
    """The spec, its ceilings, and the achievable FLOP/s and bytes/s (never above the datasheet's)."""
    spec = resolve_spec(spec, none_ok=False)
    cl = resolve_ceilings(spec, None)
    return spec, cl, min(cl.flop_s_for(dtype), spec.peak_flop_s(dtype)), min(cl.bandwidth, spec.mem_bandwidth)


def _bound(math_s: float, memory_s: float, overhead_s: float) -> str:
    """As :func:`perfkit.explain_gemm` says it: ``'latency'`` when the fixed costs exceed both."""
    if overhead_s > max(math_s, memory_s):
        return "latency"
    return "math" if math_s >= memory_s else "memory"


@dataclass(frozen=True)
class AttentionPrediction:
    """What :func:`predict_attention_time` predicts. Seconds, FLOPs, bytes."""

    time_s: float  # the predicted time of the forward pass
    flops: int  # the FLOPs the kernels compute (fused: attention_flops with the mask; unfused: all)
    bytes: int  # attention_bytes
    bound: str  # "math", "memory" or "latency" (fixed costs above both), as explain_gemm's
    fused: bool
    math_s: float  # flops / achievable FLOP/s
    memory_s: float  # bytes / achievable bytes/s
    overhead_s: float  # fixed kernel costs: one kernel fused, three unfused
    memory_bound_from_seq: int | None  # unfused, s_q = s_k = s: memory-bound from this s on (None: never)
    dtype: str = ""
    device: str = ""  # spec.label
    kernels_s: tuple[tuple[str, float], ...] = ()  # (kernel, seconds): "QKᵀ", "softmax", "PV"; fused: "attention"
    backend: str = ""  # fused: the SDPA kernel priced ("cudnn", "flash", "efficient"); unfused: "math"
    basis: str = ""  # fused: what the backend's rates rest on (perfkit.attention_model)


def _memory_bound_from_seq(b: int, h: int, d: int, size: int, flop_s: float, bw: float, fixed_s: float) -> int | None:
    """The smallest s ≤ :data:`SEARCH_LIMIT` from which unfused attention (s_q = s_k = s) is memory-bound."""
    def bound(s: int) -> str:
        return _bound(4 * b * h * s * s * d / flop_s, size * b * h * (4 * s * d + 4 * s * s) / bw, fixed_s)

    if bound(SEARCH_LIMIT) != "memory":
        return None
    if bound(1) == "memory":
        return 1
    lo, hi = 1, SEARCH_LIMIT  # bound(lo) is not "memory", bound(hi) is
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bound(mid) == "memory" else (mid, hi)
    return hi


def predict_attention_time(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *,
                           spec: str | DeviceSpec, dtype: Any, fused: bool = True, causal: bool = False,
                           kv_heads: int | None = None, backend: str | None = None) -> AttentionPrediction:
    """Predicted seconds of attention's forward pass on ``spec`` (a DeviceSpec or a name such as
    ``"H100-SXM"``), at the spec's achievable ceilings (``spec.ceilings``).

    - Unfused (``fused=False``, three kernels): the GEMM model (:func:`perfkit.predict_gemm_time`,
      ``batch=b·h``) for QKᵀ, the byte model (:func:`perfkit.memory_time` of the softmax's
      :func:`perfkit.layer_bytes`) for the softmax reading and writing the scores, and the GEMM
      model for PV. The math path computes every score and masks afterwards, so ``causal`` does
      not change its time.
    - Fused (one kernel): the SDPA kernel ``backend`` (``"cudnn"``, ``"flash"``, ``"efficient"``; None:
      the one PyTorch picks on ``spec``, :func:`perfkit.attention_model.sdpa_backend`) as
      :func:`perfkit.attention_model.fused_attention_s` prices it (its thread blocks' multiplies at the
      backend's achieved rate, its exponentials, their schedule on the SMs; ``causal=True`` skips the
      masked blocks but leaves the SMs unevenly loaded), never below ``bytes / bandwidth`` plus one
      kernel's fixed cost (the GEMM model's: the ceilings' ``gemm_latency_s``, else
      :data:`perfkit.ceilings.KERNEL_LATENCY_S`); ``math_s`` is the kernel's time less that fixed cost,
      ``flops`` the useful FLOPs (:func:`attention_flops`), ``bytes`` :func:`attention_bytes`.

    ``kernels_s`` gives each kernel's seconds, in launch order (their sum is ``time_s``).
    ``bound`` compares the math time, the bytes time and the fixed kernel costs.
    ``memory_bound_from_seq`` is the smallest sequence length s (s_q = s_k = s, the other sizes the
    same, searched up to :data:`SEARCH_LIMIT`) from which *unfused* attention is memory-bound on
    this spec: its bytes time exceeds both its math time and its three kernels' fixed costs, at s
    and every longer length; ``None`` if there is none. Below it the fixed costs dominate. Its
    intensity ``s·d / (itemsize·(s + d))`` FLOP/B rises with s but stays below ``d/itemsize`` (64 for
    d = 128 in bf16), under the ridge of every Tensor Core GPU, so there it stays memory-bound at
    every longer length; on a device whose ridge is lower it turns math-bound instead (``None``).
    """
    b, h, sq, sk, d = _sizes(batch, heads, seq_q, seq_k, head_dim)
    kv = _kv_heads(h, kv_heads)
    dtype, fused = canonical_dtype(dtype), boolean("fused", fused)
    pairs = _pairs(sq, sk, causal)
    spec, cl, flop_s, bw = _ceilings(spec, dtype)
    size = itemsize(dtype)
    gemm_fixed_s = gemm_latency_s(cl) + cl.extra_latency_s.get(dtype, 0.0)
    unfused_fixed_s = 2 * gemm_fixed_s + kernel_latency_s(cl)
    nbytes = attention_bytes(b, h, sq, sk, d, dtype, fused=fused, kv_heads=kv)
    name, basis = "math", ""
    if not fused and backend not in (None, "math"):
        raise ValueError(f"backend {backend!r} is a fused kernel: pass fused=True, or backend=None for the math path")
    if fused:
        flops = 4 * b * h * d * pairs
        overhead_s = gemm_latency_s(cl)
        kernel_s, name, basis = fused_attention_s(b * h, sq, sk, d, dtype, spec, causal=causal, backend=backend)
        math_s = kernel_s - overhead_s
        kernels = (("attention", max(math_s, nbytes / bw) + overhead_s),)
    else:
        flops = 4 * b * h * d * sq * sk
        overhead_s = unfused_fixed_s
        kernels = (("QKᵀ", predict_gemm_time(sq, sk, d, dtype, spec, batch=b * h)),
                   ("softmax", memory_time(layer_bytes("softmax", (b * h, sq, sk), dtype), spec)),
                   ("PV", predict_gemm_time(sq, d, sk, dtype, spec, batch=b * h)))
    time_s = sum(t for _, t in kernels)
    memory_s = nbytes / bw
    if not fused:
        math_s = flops / flop_s
    return AttentionPrediction(
        time_s=time_s, flops=flops, bytes=nbytes, bound=_bound(math_s, memory_s, overhead_s), fused=fused,
        math_s=math_s, memory_s=memory_s, overhead_s=overhead_s,
        memory_bound_from_seq=_memory_bound_from_seq(b, h, d, size, flop_s, bw, unfused_fixed_s),
        dtype=dtype, device=spec.label, kernels_s=kernels, backend=name, basis=basis)


def _decode_sizes(params, batch, context, layers, kv_heads, head_dim) -> tuple[int, ...]:
    return (positive_int("params", params), positive_int("batch", batch), positive_int("context", context),
            positive_int("layers", layers), positive_int("kv_heads", kv_heads), positive_int("head_dim", head_dim))


def decode_step_bytes(params: int, batch: int, context: int, *, layers: int, kv_heads: int, head_dim: int,
                      dtype: Any) -> int:
    """Bytes one decoding step (one new token for each of ``batch`` sequences) reads: every weight once,
    ``params·itemsize``, plus the KV cache, ``2·layers·batch·context·kv_heads·head_dim·itemsize``
    (K and V of ``context`` cached tokens per sequence and layer). Weights and cache in ``dtype``;
    activations, the new token's K/V written and the logits are not counted (they are tiny).

    LLaMA-2-7B in bf16 at batch 1 and context 2048 moves 6.74e9·2 bytes of weights plus a
    1,073,741,824-byte cache (2·32·1·2048·32·128·2).
    """
    p, b, c, L, kv, d = _decode_sizes(params, batch, context, layers, kv_heads, head_dim)
    s = itemsize(dtype)
    return p * s + 2 * L * b * c * kv * d * s


@dataclass(frozen=True)
class DecodePrediction:
    """What :func:`predict_decode_time` predicts for one decoding step. Seconds, FLOPs, bytes."""

    time_s: float  # per step: max(math_s, memory_s), a lower bound (no per-kernel costs)
    tokens_per_s: float  # batch / time_s
    bytes: int  # decode_step_bytes
    flops: int  # 2·params·batch + 4·layers·batch·context·heads·head_dim
    bound: str  # "math" or "memory"
    math_s: float  # flops / achievable FLOP/s
    memory_s: float  # bytes / achievable bytes/s
    datasheet_s: float  # the same roofline with the datasheet's peak and bandwidth
    math_bound_batch: int | None  # the smallest batch whose step is math-bound (None: none up to 2**20)
    dtype: str = ""
    device: str = ""  # spec.label


def predict_decode_time(params: int, batch: int, context: int, *, layers: int, kv_heads: int, head_dim: int,
                        dtype: Any, spec: str | DeviceSpec, heads: int | None = None) -> DecodePrediction:
    """Predicted seconds per decoding step on ``spec`` (a DeviceSpec or a name such as ``"H100-SXM"``).

    A plain roofline at the spec's achievable ceilings (``spec.ceilings``): ``max(flops / FLOP/s,
    bytes / bandwidth)`` with ``bytes`` = :func:`decode_step_bytes` and ``flops = 2·params·batch``
    (a multiply-add per weight per sequence) ``+ 4·layers·batch·context·heads·head_dim`` (QKᵀ and PV
    of each new token over the cache). No kernel's fixed cost is added, so it is a lower bound
    (``datasheet_s``: the same with datasheet numbers, a lower bound still). ``heads``: query heads
    per layer (default ``kv_heads``; ``kv_heads`` must divide it).

    ``math_bound_batch``: the smallest batch at which a step is math-bound (flops time ≥ bytes
    time), searched up to :data:`SEARCH_LIMIT`; ``None`` if none is. The weights' intensity grows
    with the batch, but the KV cache grows with it too: each sequence adds
    ``4·layers·context·heads·head_dim`` FLOPs for ``2·layers·context·kv_heads·head_dim·itemsize``
    bytes (``2·heads/(kv_heads·itemsize)`` FLOP/B, 1 in bf16 without GQA), so at long contexts no
    batch turns math-bound. With a short context it is about the ridge point times ``itemsize/2``.
    """
    p, b, c, L, kv, d = _decode_sizes(params, batch, context, layers, kv_heads, head_dim)
    h = kv if heads is None else positive_int("heads", heads)
    _kv_heads(h, kv)
    dtype = canonical_dtype(dtype)
    spec, _, flop_s, bw = _ceilings(spec, dtype)

    def flops_bytes(n: int) -> tuple[int, int]:
        return (2 * p * n + 4 * L * n * c * h * d,
                decode_step_bytes(p, n, c, layers=L, kv_heads=kv, head_dim=d, dtype=dtype))

    def math_bound(n: int) -> bool:
        f, m = flops_bytes(n)
        return f / flop_s >= m / bw

    first = None
    if math_bound(SEARCH_LIMIT):  # linear in n: math_bound is False then True, at most one switch
        lo, hi = 0, SEARCH_LIMIT
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if math_bound(mid) else (mid, hi)
        first = hi
    flops, nbytes = flops_bytes(b)
    math_s, memory_s = flops / flop_s, nbytes / bw
    time_s = max(math_s, memory_s)
    return DecodePrediction(
        time_s=time_s, tokens_per_s=b / time_s, bytes=nbytes, flops=flops,
        bound="math" if math_s >= memory_s else "memory", math_s=math_s, memory_s=memory_s,
        datasheet_s=max(flops / spec.peak_flop_s(dtype), nbytes / spec.mem_bandwidth), math_bound_batch=first,
        dtype=dtype, device=spec.label)
