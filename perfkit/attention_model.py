"""Fused attention as PyTorch runs it: which SDPA kernel, and what one of its thread blocks costs.

``F.scaled_dot_product_attention`` dispatches to one of three fused kernels (or the unfused "math" path):
cuDNN's (``cudnn``), FlashAttention-2 (``flash``) or the CUTLASS memory-efficient kernel (``efficient``).
Which one runs follows PyTorch's own rules (``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``,
torch ≥ 2.9 with cuDNN ≥ 9.9): on sm90/sm100 data-centre GPUs (Hopper, Blackwell B100/B200) cuDNN comes
first for float16/bfloat16 (``check_prefer_cudnn_attention``); else FlashAttention-2 on sm80+ (Ampere,
Ada, Hopper, Blackwell) for 16-bit types; else the memory-efficient kernel (any sm50+, bfloat16 from
sm80); else the math path (:func:`sdpa_backend`).

What a fused kernel does: one thread block (CTA) per (sequence, head, block of ``BLOCK`` queries) loads its
Q block once, then walks the key blocks: per ``BLOCK×BLOCK`` block of scores, ``4·d·BLOCK²`` FLOPs of
matrix multiplies (QKᵀ and PV) on the Tensor Cores and ``BLOCK²`` exponentials (the online softmax, on the
special-function units, partly hidden behind the multiplies), and at the end writes its O block and
log-sum-exp. So a block of scores costs ``4·d_run·BLOCK²/F + BLOCK²/E`` per SM (``d_run``: the head
dimension the kernel was built for, ≥ d: cuDNN's Hopper kernels exist for 64, 128 and 256, FlashAttention-2's
for multiples of 32, the efficient kernel's for ≤ 64, ≤ 128 and a generic one), and a CTA pays a fixed
``cta_s`` (its Q load, O write and pipeline fill). CTAs go to the first free SM in launch order (a head's
query blocks, the longest first under a causal mask), so with a causal mask the work is uneven and short
sequences save nothing: :func:`fused_attention_s`.

Hopper's constants (:data:`ATTENTION_EVIDENCE`) are fitted on our H200 recordings by :func:`fit_rates`:
on ``attention_head_dims`` (head dims 64…256) and the non-causal rows of ``attention_backends``; the causal
rows of ``attention_backends`` are held out (they score the scheduling model). The backward pass has no
recording: it is taken as the same kernels running 2.5 times the forward's multiplies (QKᵀ recomputed, dP,
dV, dQ, dK) and the exponentials again, plus a pre-processing kernel (``rowsum(dO·O)``), labelled assumed.
Units: seconds, FLOP/s, exponentials/s.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from .architectures import family, nearest_family
from .ceilings import Ceilings, gemm_latency_s, resolve_ceilings
from .devices import DeviceSpec
from .dtypes import canonical_dtype

__all__ = ["ATTENTION_EVIDENCE", "BACKENDS", "BLOCK", "BackendRates", "attention_ctas", "backend_rates",
           "fit_rates", "fused_attention_s", "run_head_dim", "sdpa_backend"]

#: SDPA's backends: three fused kernels and the unfused math path.
BACKENDS = ("cudnn", "flash", "efficient", "math")
#: Queries (and keys) per block of the fused kernels (128 on sm80+ for d ≤ 128).
BLOCK = 128
#: Multiplies of the backward pass per forward multiply (QKᵀ again, dP, dV, dQ, dK against QKᵀ, PV).
BACKWARD_MMA = 2.5
_HALF = ("float16", "bfloat16")
# Largest CTA count simulated one by one (greedy list scheduling); beyond it the SMs are taken as balanced.
_SIMULATE_CTAS = 20000


@dataclass(frozen=True)
class BackendRates:
    """What one fused SDPA kernel reaches on a family (see the module docstring)."""

    mma_fraction: float  # achieved multiply FLOP/s ÷ the dtype's dense Tensor Core peak (datasheet)
    exp_per_fp32_flop: float  # per-score softmax rate E (exponentials/s) ÷ the float32 peak FLOP/s
    cta_s: float  # fixed seconds of one CTA: Q load, O and log-sum-exp write, pipeline fill
    source: str


_H200 = ("fitted on our H200 recordings (attention_head_dims; attention_backends non-causal rows; "
         "2026-11-26; causal rows held out)")
#: Per family and backend. Hopper: fitted (:func:`fit_rates`, bfloat16, torch 2.11 + cuDNN 9). Ampere:
#: FlashAttention-2's paper (Dao, 2023: forward "50–73 % of the theoretical maximum FLOPs/s on A100"), its
#: other constants assumed from Hopper's. Other families use the nearest one's, labelled assumed.
ATTENTION_EVIDENCE: dict[str, dict[str, BackendRates]] = {
    "hopper": {
        "cudnn": BackendRates(0.909, 0.0921, 3.99e-6, _H200),
        "flash": BackendRates(0.386, 0.491, 6.31e-6, _H200),
        "efficient": BackendRates(0.211, 0.0351, 4.52e-6, _H200),
    },
    "ampere": {
        "flash": BackendRates(0.73, 0.491, 6.31e-6, "FlashAttention-2 paper (Dao 2023): up to 73 % of the A100's "
                              "peak forward; softmax rate and per-CTA cost assumed from the H200's flash rows"),
    },
}


def _major(spec: DeviceSpec) -> tuple[str, bool]:
    """(family, a data-centre part): Blackwell's RTX cards are sm120, not sm100."""
    fam = family(spec)
    names = " ".join(n for n in (getattr(spec, "name", ""), getattr(spec, "driver_name", "") or "") if n).upper()
    return fam, "RTX" not in names


def sdpa_backend(spec: DeviceSpec, dtype: Any, head_dim: int, *, head_dim_v: int | None = None,
                 mask: bool = False) -> str:
    """The backend PyTorch's default dispatch runs for SDPA (dense inputs, no dropout) on ``spec``:
    ``"cudnn"``, ``"flash"``, ``"efficient"`` or ``"math"`` (rules in the module docstring); ``mask``:
    an explicit ``attn_mask`` (FlashAttention-2 takes none)."""
    d = canonical_dtype(dtype)
    dv = head_dim if head_dim_v is None else head_dim_v
    fam, datacentre = _major(spec)
    if spec.kind != "gpu" or fam == "cpu":
        return "math"
    square = head_dim == dv and head_dim <= 256 and head_dim % 8 == 0
    if d in _HALF and square and datacentre and fam in ("hopper", "blackwell"):
        return "cudnn"
    if d in _HALF and square and not mask and fam in ("ampere", "ada", "hopper", "blackwell"):
        return "flash"
    sm80 = fam in ("ampere", "ada", "hopper", "blackwell", "unknown")
    align = 8 if d in _HALF else 4
    if d in _HALF + ("float32",) and (d != "bfloat16" or sm80) and head_dim % align == 0 and dv % align == 0:
        return "efficient"
    return "math"


def run_head_dim(backend: str, head_dim: int) -> int:
    """The head dimension ``backend``'s kernel runs for ``head_dim`` (its padded instantiation)."""
    if backend == "cudnn":
        return max(64, 1 << (head_dim - 1).bit_length())
    if backend == "flash":
        return -(-head_dim // 32) * 32
    return 64 if head_dim <= 64 else 128 if head_dim <= 128 else head_dim


def backend_rates(spec: DeviceSpec, backend: str) -> tuple[BackendRates, str]:
    """``(rates, label)`` of ``backend`` on ``spec``'s family, or of the nearest family that has them."""
    fam = family(spec)
    if backend in ATTENTION_EVIDENCE.get(fam, {}):
        r = ATTENTION_EVIDENCE[fam][backend]
        return r, r.source
    have = [f for f, table in ATTENTION_EVIDENCE.items() if backend in table]
    near = nearest_family(fam, have) or "hopper"
    r = ATTENTION_EVIDENCE[near].get(backend) or ATTENTION_EVIDENCE["hopper"]["efficient"]
    return r, f"assumed from {near} ({r.source}); no {fam} GPU measured yet"


def attention_ctas(heads_total: int, seq_q: int, seq_k: int, causal: bool) -> list[int]:
    """Key blocks each CTA walks, in launch order: per (sequence, head), its query blocks, the longest
    first under a causal mask (queries aligned to the end of the keys)."""
    nq, nk = -(-seq_q // BLOCK), -(-seq_k // BLOCK)
    if not causal:
        return [nk] * (heads_total * nq)
    off = nk - nq
    one = [min(nk, off + q + 1) for q in range(nq - 1, -1, -1)]
    return one * heads_total


def _makespan(blocks: list[int], sms: int, cta_s: float, block_s: float) -> float:
    """Seconds until the last SM finishes: CTAs to the first free SM in launch order."""
    if len(set(blocks)) == 1:
        return -(-len(blocks) // sms) * (cta_s + blocks[0] * block_s)
    if len(blocks) > _SIMULATE_CTAS:
        total = sum(cta_s + b * block_s for b in blocks)
        return total / sms + (cta_s + max(blocks) * block_s) / 2
    free = [0.0] * min(sms, len(blocks))
    for b in blocks:
        heapq.heapreplace(free, free[0] + cta_s + b * block_s)
    return max(free)


def fused_attention_s(heads_total: int, seq_q: int, seq_k: int, head_dim: int, dtype: Any, spec: DeviceSpec, *,
                      causal: bool = False, backend: str | None = None, pass_: str = "forward",
                      ceilings: Ceilings | None = None) -> tuple[float, str, str]:
    """``(seconds, backend, label)`` of one fused SDPA kernel over ``heads_total`` (sequences × query heads)
    on ``spec``: the CTA schedule of the module docstring plus one kernel's fixed cost (the GEMM's); the
    backward pass (``pass_="backward"``) at 2.5× the multiplies, plus its pre-processing kernel. ``label``
    says what the rates rest on. ``backend`` None: :func:`sdpa_backend`'s (where that is the math path, the
    memory-efficient kernel's rates, labelled so)."""
    d = canonical_dtype(dtype)
    name = sdpa_backend(spec, d, head_dim) if backend is None else backend
    note = ""
    if backend is None and name == "math":  # no fused kernel takes these inputs here: the closest one's cost
        name, note = "efficient", "no fused SDPA kernel takes these inputs here (PyTorch runs the math path); "
    if name not in BACKENDS[:3]:
        raise ValueError(f"backend must be one of {BACKENDS[:3]} (fused), got {name!r}")
    if pass_ not in ("forward", "backward"):
        raise ValueError(f"pass_ must be 'forward' or 'backward', got {pass_!r}")
    rates, label = backend_rates(spec, name)
    label = note + label
    cl = resolve_ceilings(spec, ceilings)
    peak = spec.peaks.get(d) or spec.peak_flop_s("float16" if d in _HALF else d)
    mma_s = rates.mma_fraction * peak / spec.sms  # per SM
    exp_s = rates.exp_per_fp32_flop * spec.peaks.get("float32", peak / 16) / spec.sms
    mma = BACKWARD_MMA if pass_ == "backward" else 1.0
    block_s = mma * 4 * run_head_dim(name, head_dim) * BLOCK * BLOCK / mma_s + BLOCK * BLOCK / exp_s
    blocks = attention_ctas(heads_total, seq_q, seq_k, causal)
    kernels = 2 if pass_ == "backward" else 1  # backward: rowsum(dO·O) first
    return kernels * gemm_latency_s(cl) + _makespan(blocks, spec.sms, rates.cta_s, block_s), name, label


def fit_rates(frame, *, peak_flop_s: float, fp32_flop_s: float, sms: int, latency_s: float) -> dict[str, BackendRates]:
    """Re-derive one family's rates from SDPA recordings (``attention_backends`` / ``attention_head_dims``
    columns: backend, batch, heads, seq, head_dim, causal, time_s): non-causal rows only (their CTAs are
    equal, so the time is linear in the three unknowns), least squares on relative error. ``latency_s``:
    one kernel's fixed cost (the calibration's GEMM latency); ``peak_flop_s``: the dtype's dense peak."""
    out = {}
    for name, g in frame[(frame["backend"] != "math") & (~frame["causal"].astype(bool))].groupby("backend"):
        X, y = [], []
        for r in g.itertuples():
            nq = -(-int(r.seq) // BLOCK)
            waves = -(-(int(r.batch) * int(r.heads) * nq) // sms)
            X.append([waves, waves * nq * 4 * run_head_dim(name, int(r.head_dim)) * BLOCK * BLOCK,
                      waves * nq * BLOCK * BLOCK])
            y.append(r.time_s - latency_s)
        w = 1 / g["time_s"].to_numpy()
        (cta, inv_mma, inv_exp), *_ = np.linalg.lstsq(np.array(X) * w[:, None], np.array(y) * w, rcond=None)
        out[name] = BackendRates(round(sms / inv_mma / peak_flop_s, 3), round(sms / inv_exp / fp32_flop_s, 4),
                                 float(f"{cta:.3g}"), "fit_rates")
    return out

