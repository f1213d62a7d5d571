"""Fused attention as PyTorch runs it: which SDPA kernel, and what one of its thread blocks costs.

``F.scaled_dot_product_attention`` dispatches to one of three fused kernels (or the unfused "math" path):
cuDNN's (``cudnn``), FlashAttention-2 (``flash``) or the CUTLASS memory-efficient kernel (``efficient``).
Which one runs follows PyTorch's own rules (``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``,
torch ≥ 2.9 with cuDNN ≥ 9.9): on sm90/sm100 data-centre GPUs (Hopper, Blackwell B100/B200/B300) cuDNN
comes first for float16/bfloat16 (``check_prefer_cudnn_attention``; equal head dims up to 256, or DeepSeek's
d_qk 192 / d_v 128, ``check_cudnn_tensor_shapes``); else FlashAttention-2 on sm80+ (Ampere, Ada, Hopper,
Blackwell) for 16-bit types; else the memory-efficient kernel (any sm50+, bfloat16 from sm80); else the
math path (:func:`sdpa_backend`). ROCm builds (AMD Instinct) have no cuDNN (``can_use_cudnn_attention`` is
false under ``USE_ROCM``): FlashAttention (AOTriton, or CK when asked) first for float16/bfloat16 with
equal head dims up to 512 and no mask, else the memory-efficient kernel (AOTriton ≥ 0.12: float16,
bfloat16 or float32, head dims multiples of 8 (4 for float32) up to 512); gfx942 (MI300X, MI325X) and
gfx950 (MI350X, MI355X) are taken as AOTriton's supported (not experimental) targets.

What a fused kernel does: one thread block (CTA) per (sequence, query head, block of ``BLOCK`` queries)
loads its Q block once, then walks the key blocks: per ``BLOCK×BLOCK`` block of scores, ``2·(d + d_v)·
BLOCK²`` FLOPs of matrix multiplies (QKᵀ at the query/key head dim d, PV at the value head dim d_v;
``4·d·BLOCK²`` when equal) on the Tensor Cores and ``BLOCK²`` exponentials (the online softmax, on the
special-function units, partly hidden behind the multiplies), and at the end writes its O block and
log-sum-exp. So a block of scores costs ``2·(d_run + dv_run)·BLOCK²/F + BLOCK²/E`` per SM (``d_run``:
the head dimension the kernel was built for, ≥ d: :func:`run_head_dim`), and a CTA pays a fixed ``cta_s``
(its Q load, O write and pipeline fill). CTAs go to the first free SM in launch order (a head's query
blocks, the longest first under a causal mask), so with a causal mask the work is uneven and short
sequences save nothing: :func:`fused_attention_s`. Grouped-query attention (fewer K/V heads than query
heads) costs the same per query head: ``heads_total`` counts query heads. A causal sliding window of
``window`` keys walks only the key blocks that hold a key within the window of one of the block's queries.

The backward pass is taken as the same kernels running QKᵀ again, dP = dO·Vᵀ, dV, dQ and dK: ``2·(3·d +
2·d_v)·BLOCK²`` FLOPs per block (2.5 times the forward's when d = d_v, the convention of cuDNN's
benchmarks), the exponentials again, plus a pre-processing kernel (``rowsum(dO·O)``).

Evidence (:data:`ATTENTION_EVIDENCE`), fitted by :func:`fit_rates`. Hopper: on our H200 recordings
(``attention_head_dims`` and the non-causal rows of ``attention_backends``; the causal rows held out); its
backward pass has no recording (taken at the forward's rates, labelled assumed). Blackwell: on cuDNN's B200
training benchmarks (cudnn-frontend's 2025 ``artifacts/`` campaigns, causal, d = 128, forward and backward:
the backward kernels get their own share of the peak; cuDNN's float8 rows give ``"cudnn:float8"``); every
GB200 and GB300 row is held out (:mod:`perfkit.attention_validation`). Rows of one head dim cannot tell
multiplies from exponentials, so one is held: cuDNN's kernels (built on the GEMM's tcgen05 instructions)
run their forward multiplies at the B200's GEMM rate (MAMF), the exponential rate fitted; FlashAttention-2
(sm80's mma.sync) keeps Hopper's fitted exponential rate, assumed. CDNA 4: on HipKittens' MI355X runs of
AITER's attention (non-causal; the causal rows held out; multiplies at the MI355X's GEMM rate, as cuDNN's),
for PyTorch's ROCm flash and memory-efficient slots (the two share AOTriton's kernels on ROCm; AITER's are
CK/assembly kernels: where AOTriton is slower this is optimistic). CDNA 3 takes CDNA 4's, labelled
assumed. The exponential rate is a share of the float32 peak (the special-function units scale with SMs ×
clock), doubled on Blackwell Ultra (B300, GB300), whose MUFU.EX2 throughput is twice Blackwell's (NVIDIA,
"Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2025).
Units: seconds, FLOP/s, exponentials/s.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .architectures import family, nearest_family
from .ceilings import Ceilings, gemm_latency_s, resolve_ceilings
from .devices import KNOWN_DEVICES, DeviceSpec
from .dtypes import canonical_dtype

__all__ = ["ATTENTION_EVIDENCE", "BACKENDS", "BLOCK", "BackendRates", "attention_ctas", "backend_rates",
           "block_flops", "exp_basis_flop_s", "fit_rates", "fused_attention_s", "run_head_dim",
           "sdpa_backend"]

#: SDPA's backends: three fused kernels and the unfused math path.
BACKENDS = ("cudnn", "flash", "efficient", "math")
#: Queries (and keys) per block of the fused kernels (128 on sm80+ for d ≤ 128).
BLOCK = 128
#: Multiplies of the backward pass per forward multiply (QKᵀ again, dP, dV, dQ, dK against QKᵀ, PV), d = d_v.
BACKWARD_MMA = 2.5
_HALF = ("float16", "bfloat16")
_PASSES = ("forward", "backward")
# Largest CTA count simulated one by one (greedy list scheduling); beyond it the SMs are taken as balanced.
_SIMULATE_CTAS = 20000
# Blackwell Ultra: twice Blackwell's special-function (MUFU.EX2) throughput per SM.
_DOUBLE_SFU = re.compile(r"\bG?B300\b")


@dataclass(frozen=True)
class BackendRates:
    """What one fused SDPA kernel reaches on a family (see the module docstring)."""

    mma_fraction: float  # achieved multiply FLOP/s ÷ the dtype's dense Tensor Core peak (datasheet)
    exp_per_fp32_flop: float  # per-score softmax rate E (exponentials/s) ÷ the float32 peak FLOP/s
    cta_s: float  # fixed seconds of one CTA: Q load, O and log-sum-exp write, pipeline fill
    source: str
    backward_mma_fraction: float | None = None  # the backward kernels' share of the peak; None: the forward's


_H200 = ("fitted on our H200 recordings (attention_head_dims; attention_backends non-causal rows; "
         "2026-11-26; causal rows held out)")
_B200 = ("fitted on cuDNN's B200 SDPA training benchmarks (NVIDIA/cudnn-frontend benchmark/"
         "sdpa_benchmark_training artifacts 2025-07-16 and 2025-10-10, {what}, causal, d = 128, forward and "
         "backward; forward multiplies at the B200's GEMM rate (MAMF, stas00/ml-engineering); GB200 and "
         "GB300 rows held out)")
_B200_FA2 = ("fitted on cuDNN's B200 SDPA training benchmarks (NVIDIA/cudnn-frontend benchmark/"
             "sdpa_benchmark_training artifacts 2025-07-16 and 2025-10-10, FlashAttention-2 2.7.4 and "
             "pyt_flash_attention, bfloat16, causal, d = 128, forward and backward; exponential rate assumed "
             "from Hopper's flash fit; GB200 and GB300 rows held out)")
_MI355X = ("fitted on HipKittens' MI355X runs of AITER's attention (HazyResearch/HipKittens analysis/attn @ "
           "f09e9685, bfloat16, non-causal rows, forward and backward; forward multiplies at the MI355X's "
           "GEMM rate (MAMF, stas00/ml-engineering); causal rows held out)")
_ROCM_EFFICIENT = ("ROCm's memory-efficient SDPA runs AOTriton's flash kernels (sdp_utils.cpp): the flash "
                   "rates, ")
#: Per family and backend (a ``"backend:dtype"`` key: that dtype's rates). Hopper: fitted (:func:`fit_rates`,
#: bfloat16, torch 2.11 + cuDNN 9). Ampere: FlashAttention-2's paper (Dao, 2023: forward "50–73 % of the
#: theoretical maximum FLOPs/s on A100"), its other constants assumed from Hopper's. Blackwell and CDNA 4:
#: fitted on published tables (:mod:`perfkit.attention_validation`). Other families use the nearest one's.
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
    "blackwell": {
        "cudnn": BackendRates(0.776, 0.6339, 8.73e-6, _B200.format(what="cudnn_fe and pyt_cudnn, bfloat16"),
                              0.476),
        "flash": BackendRates(0.222, 0.491, 2.25e-5, _B200_FA2, 0.148),
        "cudnn:float8": BackendRates(0.763, 0.1371, 8.57e-6, _B200.format(what="cudnn_fe, float8 e4m3"),
                                     0.365),
    },
    "cdna4": {
        "flash": BackendRates(0.622, 0.0664, 6.01e-6, _MI355X, 0.339),
        "efficient": BackendRates(0.622, 0.0664, 6.01e-6, _ROCM_EFFICIENT + _MI355X, 0.339),
    },
}


def _names(spec: DeviceSpec) -> str:
    names = (getattr(spec, "name", ""), getattr(spec, "driver_name", "") or "")
    return " ".join(n for n in names if n).upper()


def _rocm_backend(d: str, head_dim: int, dv: int, mask: bool) -> str:
    """PyTorch's ROCm dispatch (no cuDNN; AOTriton ≥ 0.12 limits): flash, else efficient, else math."""
    if d in _HALF and head_dim == dv <= 512 and not mask:
        return "flash"
    align = 8 if d in _HALF else 4
    if d in _HALF + ("float32",) and 0 < head_dim <= 512 and 0 < dv <= 512 and not head_dim % align \
            and not dv % align:
        return "efficient"
    return "math"


def sdpa_backend(spec: DeviceSpec, dtype: Any, head_dim: int, *, head_dim_v: int | None = None,
                 mask: bool = False) -> str:
    """The backend PyTorch's default dispatch runs for SDPA (dense inputs, no dropout) on ``spec``:
    ``"cudnn"``, ``"flash"``, ``"efficient"`` or ``"math"`` (rules in the module docstring); ``mask``:
    an explicit ``attn_mask`` (FlashAttention-2 takes none)."""
    d = canonical_dtype(dtype)
    dv = head_dim if head_dim_v is None else head_dim_v
    fam = family(spec)
    if spec.kind != "gpu" or fam == "cpu":
        return "math"
    if getattr(spec, "vendor", "") == "AMD" or fam in ("cdna3", "cdna4"):
        return _rocm_backend(d, head_dim, dv, mask)
    datacentre = "RTX" not in _names(spec)  # Blackwell's RTX cards are sm120, not sm100
    square = head_dim == dv and head_dim <= 256 and head_dim % 8 == 0
    deepseek = (head_dim, dv) == (192, 128)  # cuDNN ≥ 9.11's d_qk 192 / d_v 128 kernels (sm90, sm10x)
    if d in _HALF and (square or deepseek) and datacentre and fam in ("hopper", "blackwell"):
        return "cudnn"
    if d in _HALF and square and not mask and fam in ("ampere", "ada", "hopper", "blackwell"):
        return "flash"
    sm80 = fam in ("ampere", "ada", "hopper", "blackwell", "unknown")
    align = 8 if d in _HALF else 4
    if d in _HALF + ("float32",) and (d != "bfloat16" or sm80) and head_dim % align == 0 and dv % align == 0:
        return "efficient"
    return "math"


def run_head_dim(backend: str, head_dim: int) -> int:
    """The head dimension ``backend``'s kernel runs for ``head_dim`` (its padded instantiation): cuDNN's
    kernels exist for 64, 128 and 256 (and 192, its DeepSeek d_qk), FlashAttention-2's for multiples of 32."""
    if backend == "cudnn":
        return 192 if head_dim == 192 else max(64, 1 << (head_dim - 1).bit_length())
    if backend == "flash":
        return -(-head_dim // 32) * 32
    return 64 if head_dim <= 64 else 128 if head_dim <= 128 else head_dim


def block_flops(backend: str, head_dim: int, head_dim_v: int | None = None, pass_: str = "forward") -> int:
    """Multiply FLOPs of one ``BLOCK×BLOCK`` block of scores in ``backend``'s kernel (padded head dims):
    ``2·(d + d_v)·BLOCK²`` forward, ``2·(3·d + 2·d_v)·BLOCK²`` backward."""
    if pass_ not in _PASSES:
        raise ValueError(f"pass_ must be 'forward' or 'backward', got {pass_!r}")
    d = run_head_dim(backend, head_dim)
    dv = d if head_dim_v is None else run_head_dim(backend, head_dim_v)
    return 2 * ((d + dv) if pass_ == "forward" else (3 * d + 2 * dv)) * BLOCK * BLOCK


def _fp32_ratio(fam: str) -> float:
    """float32 ÷ 16-bit dense peak of ``fam``'s datasheets that give both (1/16 where none does)."""
    ratios = [s.peaks["float32"] / s.peaks["bfloat16"] for s in KNOWN_DEVICES.values()
              if family(s) == fam and "float32" in s.peaks and "bfloat16" in s.peaks]
    return float(np.median(ratios)) if ratios else 1 / 16


def exp_basis_flop_s(spec: DeviceSpec) -> float:
    """FLOP/s the exponential rate is a share of: the float32 peak (a datasheet without one: the 16-bit peak
    at its family's float32 ratio), doubled on Blackwell Ultra (B300, GB300: twice the MUFU.EX2 rate)."""
    fp32 = spec.peaks.get("float32")
    if fp32 is None:
        half = spec.peaks.get("bfloat16") or spec.peaks.get("float16") or 0.0
        fp32 = half * _fp32_ratio(family(spec))
    return fp32 * (2.0 if _DOUBLE_SFU.search(_names(spec)) else 1.0)


def backend_rates(spec: DeviceSpec, backend: str, dtype: Any = None) -> tuple[BackendRates, str]:
    """``(rates, label)`` of ``backend`` on ``spec``'s family, or of the nearest family that has them;
    ``dtype``: that dtype's rates first (``"cudnn:float8"``), where a family has them."""
    fam = family(spec)
    keys = ([f"{backend}:{canonical_dtype(dtype)}"] if dtype is not None else []) + [backend]
    for key in keys:
        if key in ATTENTION_EVIDENCE.get(fam, {}):
            r = ATTENTION_EVIDENCE[fam][key]
            return r, r.source
        have = [f for f, table in ATTENTION_EVIDENCE.items() if key in table]
        if have:
            near = nearest_family(fam, have) or have[0]
            r = ATTENTION_EVIDENCE[near][key]
            return r, f"assumed from {near} ({r.source}); no {fam} GPU measured yet"
    r = ATTENTION_EVIDENCE["hopper"]["efficient"]
    return r, f"assumed from hopper ({r.source}); no {fam} GPU measured yet"


def attention_ctas(heads_total: int, seq_q: int, seq_k: int, causal: bool,
                   window: int | None = None) -> list[int]:
    """Key blocks each CTA walks, in launch order: per (sequence, head), its query blocks, the longest
    first under a causal mask (queries aligned to the end of the keys); ``window``: a causal sliding window
    (each query sees its last ``window`` keys, itself included), only the blocks holding such keys."""
    nq, nk = -(-seq_q // BLOCK), -(-seq_k // BLOCK)
    if window is not None and (not causal or window < 1):
        raise ValueError(f"window must be a positive number of keys with causal=True, got {window!r}")
    if not causal:
        return [nk] * (heads_total * nq)
    off, shift = nk - nq, seq_k - seq_q
    first = (lambda q: 0) if window is None else (lambda q: max(0, q * BLOCK + shift - window + 1) // BLOCK)
    one = [min(nk, off + q + 1) - first(q) for q in range(nq - 1, -1, -1)]
    return one * heads_total


def _critical_sm(blocks: list[int], sms: int, cta_s: float, block_s: float) -> tuple[float, float]:
    """``(CTAs, key blocks)`` of the SM that finishes last, CTAs going to the first free SM in launch order:
    the kernel takes ``CTAs·cta_s + key blocks·block_s``."""
    if len(set(blocks)) == 1:
        waves = -(-len(blocks) // sms)
        return waves, waves * blocks[0]
    if len(blocks) > _SIMULATE_CTAS:  # balanced, plus half the longest CTA
        return len(blocks) / sms + 0.5, sum(blocks) / sms + max(blocks) / 2
    free = [(0.0, 0, 0)] * min(sms, len(blocks))
    for b in blocks:
        t, n, k = free[0]
        heapq.heapreplace(free, (t + cta_s + b * block_s, n + 1, k + b))
    _, n, k = max(free)
    return n, k


def _makespan(blocks: list[int], sms: int, cta_s: float, block_s: float) -> float:
    """Seconds until the last SM finishes."""
    if len(set(blocks)) == 1:
        return -(-len(blocks) // sms) * (cta_s + blocks[0] * block_s)
    n, k = _critical_sm(blocks, sms, cta_s, block_s)
    return n * cta_s + k * block_s


def fused_attention_s(heads_total: int, seq_q: int, seq_k: int, head_dim: int, dtype: Any,
                      spec: DeviceSpec, *, causal: bool = False, backend: str | None = None,
                      pass_: str = "forward", ceilings: Ceilings | None = None, head_dim_v: int | None = None,
                      window: int | None = None) -> tuple[float, str, str]:
    """``(seconds, backend, label)`` of one fused SDPA kernel over ``heads_total`` (sequences × query heads)
    on ``spec``: the CTA schedule of the module docstring plus one kernel's fixed cost (the GEMM's); the
    backward pass (``pass_="backward"``) at its multiplies, plus its pre-processing kernel. ``head_dim_v``:
    the value head dim (None: ``head_dim``); ``window``: a causal sliding window (keys). ``label`` says
    what the rates rest on. ``backend`` None: :func:`sdpa_backend`'s (where that is the math path, the
    memory-efficient kernel's rates, labelled so)."""
    d = canonical_dtype(dtype)
    dv = head_dim if head_dim_v is None else int(head_dim_v)
    name = sdpa_backend(spec, d, head_dim, head_dim_v=dv) if backend is None else backend
    note = ""
    if backend is None and name == "math":  # no fused kernel takes these inputs here: the closest one's cost
        name = "efficient"
        note = "no fused SDPA kernel takes these inputs here (PyTorch runs the math path); "
    if name not in BACKENDS[:3]:
        raise ValueError(f"backend must be one of {BACKENDS[:3]} (fused), got {name!r}")
    if pass_ not in _PASSES:
        raise ValueError(f"pass_ must be 'forward' or 'backward', got {pass_!r}")
    rates, label = backend_rates(spec, name, d)
    label = note + label
    cl = resolve_ceilings(spec, ceilings)
    peak = spec.peaks.get(d) or spec.peak_flop_s("float16" if d in _HALF else d)
    back = pass_ == "backward" and rates.backward_mma_fraction is not None
    fraction = rates.backward_mma_fraction if back else rates.mma_fraction
    mma_s = fraction * peak / spec.sms  # per SM
    exp_s = rates.exp_per_fp32_flop * exp_basis_flop_s(spec) / spec.sms
    block_s = block_flops(name, head_dim, dv, pass_) / mma_s + BLOCK * BLOCK / exp_s
    blocks = attention_ctas(heads_total, seq_q, seq_k, causal, window)
    kernels = 2 if pass_ == "backward" else 1  # backward: rowsum(dO·O) first
    return kernels * gemm_latency_s(cl) + _makespan(blocks, spec.sms, rates.cta_s, block_s), name, label


def _fit_row(name: str, r: dict) -> tuple[list[int], int, bool]:
    """(key blocks per CTA, multiply FLOPs per block, backward) of one recording row."""
    seq, pass_ = int(r["seq"]), r.get("pass_", "forward")
    window = r.get("window")
    window = None if window is None or window != window else int(window)
    dv = r.get("head_dim_v")
    dv = None if dv is None or dv != dv else int(dv)
    blocks = attention_ctas(int(r["batch"]) * int(r["heads"]), seq, int(r.get("seq_k", seq)),
                            bool(r["causal"]), window)
    return blocks, block_flops(name, int(r["head_dim"]), dv, pass_), pass_ == "backward"


def _solve(X: np.ndarray, y: np.ndarray, w: np.ndarray, fix_f: float | None, fix_e: float | None,
           back: bool) -> tuple[float, float, float, float]:
    """One weighted least-squares step: (cta_s, 1/forward multiply rate, 1/backward one, 1/exponential rate),
    per SM; X's columns: CTAs, forward multiply FLOPs, exponentials, backward multiply FLOPs."""
    free = [True, fix_f is None, fix_e is None, back]
    y = y - sum(X[:, j] * v for j, v in ((1, fix_f), (2, fix_e)) if v is not None)
    sol, *_ = np.linalg.lstsq(X[:, free] * w[:, None], y * w, rcond=None)
    it = iter(sol)
    cta, inv_f, inv_e, inv_b = (float(next(it)) if on else None for on in free)
    inv_f = fix_f if inv_f is None else inv_f
    inv_e = fix_e if inv_e is None else inv_e
    return cta, inv_f, inv_f if inv_b is None else inv_b, inv_e


def fit_rates(frame, *, peak_flop_s: float, fp32_flop_s: float, sms: int, latency_s: float,
              causal: bool = False, exp_per_fp32_flop: float | None = None,
              mma_fraction: float | None = None) -> dict[str, BackendRates]:
    """Re-derive one family's rates from SDPA recordings (``attention_backends`` / ``attention_head_dims``
    columns: backend, batch, heads, seq, head_dim, causal, time_s; optional seq_k, head_dim_v, window and
    pass_): least squares on relative error. ``latency_s``: one kernel's fixed cost (the calibration's GEMM
    latency); ``peak_flop_s``: the dtype's dense peak; ``fp32_flop_s``: the exponential rate's basis
    (:func:`exp_basis_flop_s`). Non-causal rows only unless ``causal``: equal CTAs make the time linear in
    the unknowns; with causal rows the schedule depends on the rates, so solve and reschedule (up to 20
    times, or until a schedule repeats) and keep the solution whose own schedule fits best. Backward rows
    (``pass_ == "backward"``) add one unknown, the backward kernels' share of the peak (CTA cost and
    exponential rate shared). Rows of one head dim cannot tell multiplies from exponentials: hold one,
    ``exp_per_fp32_flop`` or the forward's ``mma_fraction``."""
    rows = frame[frame["backend"] != "math"]
    if not causal:
        rows = rows[~rows["causal"].astype(bool)]
    out = {}
    fix_e = None if exp_per_fp32_flop is None else sms / (exp_per_fp32_flop * fp32_flop_s)
    fix_f = None if mma_fraction is None else sms / (mma_fraction * peak_flop_s)
    for name, g in rows.groupby("backend"):
        shapes = [_fit_row(name, r) for r in g.to_dict("records")]
        time_s = g["time_s"].to_numpy(float)
        y = time_s - np.array([latency_s * (2 if b else 1) for *_, b in shapes])
        back = any(b for *_, b in shapes)
        coef, seen, best = None, [], (np.inf, None)
        for _ in range(20):
            cta, inv_f, inv_b, inv_e = coef or (0.0, 1.0, 1.0, 0.0)
            costs = [(cta, f * (inv_b if b else inv_f) + BLOCK * BLOCK * inv_e) for _, f, b in shapes]
            now = [_critical_sm(bl, sms, *c) for (bl, _, _), c in zip(shapes, costs)]
            if coef is not None:  # the model's own prediction with these rates: keep the best
                pred = np.array([n * c + k * s for (n, k), (c, s) in zip(now, costs)])
                err = float(np.sum(((pred - y) / time_s) ** 2))
                best = min(best, (err, coef), key=lambda e: e[0])
            if now in seen:  # converged, or cycling through schedules already solved for
                break
            seen.append(now)
            X = np.array([[n, 0 if b else k * f, k * BLOCK * BLOCK, k * f if b else 0]
                          for (n, k), (_, f, b) in zip(now, shapes)], float)
            coef = _solve(X, y, 1 / time_s, fix_f, fix_e, back)
        cta, inv_f, inv_b, inv_e = best[1]
        if min(inv_f, inv_b, inv_e) <= 0:
            raise ValueError(f"backend {name!r}: the rows do not determine positive rates (got {best[1]})")
        out[name] = BackendRates(round(sms / inv_f / peak_flop_s, 3), round(sms / inv_e / fp32_flop_s, 4),
                                 float(f"{cta:.3g}"), "fit_rates",
                                 round(sms / inv_b / peak_flop_s, 3) if back else None)
    return out
