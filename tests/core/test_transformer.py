"""perfkit.transformer against hand-derived numbers: attention FLOPs and bytes, and a decoding step."""

from __future__ import annotations

import dataclasses
import math

import pytest

import perfkit as pk
from perfkit.ceilings import gemm_latency_s, kernel_latency_s
from perfkit.gemm_model import explain_gemm, predict_gemm_time
from perfkit.memory_model import layer_bytes, memory_time
from perfkit.roofline import gemm_bytes
from perfkit.transformer import (
    SEARCH_LIMIT, AttentionGemm, attention_bytes, attention_flops, attention_gemms, decode_step_bytes,
    predict_attention_time, predict_decode_time,
)
from perfkit.attention_model import ATTENTION_EVIDENCE
from testkit import H100, V100


# LLaMA-2-7B: 6.74e9 parameters, 32 layers, 32 heads (no GQA), head_dim 128.
LLAMA = {"layers": 32, "kv_heads": 32, "head_dim": 128}
LLAMA_PARAMS = 6_740_000_000


def _brute_force_pairs(seq_q: int, seq_k: int) -> int:
    """Pairs a causal mask keeps, queries aligned to the end of the keys: key j ≤ s_k − s_q + i."""
    return sum(1 for i in range(seq_q) for j in range(seq_k) if j <= seq_k - seq_q + i)


# --- attention_flops -----------------------------------------------------------------------------

def test_attention_flops_without_a_mask_are_the_two_gemms():
    assert attention_flops(2, 3, 5, 7, 11) == 4 * 2 * 3 * 5 * 7 * 11


@pytest.mark.parametrize("seq_q, seq_k, pairs", [(4, 4, 10), (1, 2048, 2048), (3, 5, 3 + 4 + 5), (1, 1, 1)])
def test_causal_flops_count_exactly_the_pairs_the_mask_keeps(seq_q, seq_k, pairs):
    assert _brute_force_pairs(seq_q, seq_k) == pairs
    assert attention_flops(2, 3, seq_q, seq_k, 64, causal=True) == 4 * 2 * 3 * 64 * pairs


@pytest.mark.parametrize("s", [1, 2, 7, 128, 2048])
def test_causal_factor_is_s_plus_one_over_two_s(s):
    ratio = attention_flops(1, 8, s, s, 64, causal=True) / attention_flops(1, 8, s, s, 64)
    assert ratio == pytest.approx((s + 1) / (2 * s), rel=1e-15)


def test_causal_chunk_over_a_cache_matches_brute_force():
    for seq_q, seq_k in [(2, 9), (6, 6), (5, 17)]:
        assert attention_flops(1, 1, seq_q, seq_k, 1, causal=True) == 4 * _brute_force_pairs(seq_q, seq_k)


# --- attention_gemms -----------------------------------------------------------------------------

def test_attention_gemms_shapes_and_flops():
    b, h, sq, sk, d = 2, 4, 96, 160, 64
    gemms = attention_gemms(b, h, sq, sk, d)
    assert all(isinstance(g, AttentionGemm) and g.batch == b * h for g in gemms)
    shapes = {(g.pass_, g.name): (g.M, g.N, g.K) for g in gemms}
    assert shapes == {("forward", "QKᵀ"): (sq, sk, d), ("forward", "PV"): (sq, d, sk),
                      ("backward", "dP"): (sq, sk, d), ("backward", "dV"): (sk, d, sq),
                      ("backward", "dQ"): (sq, d, sk), ("backward", "dK"): (sk, d, sq)}
    forward = sum(g.flops for g in gemms if g.pass_ == "forward")
    backward = sum(g.flops for g in gemms if g.pass_ == "backward")
    assert forward == attention_flops(b, h, sq, sk, d) == 4 * b * h * sq * sk * d
    assert backward == 2 * forward
    with pytest.raises(dataclasses.FrozenInstanceError):
        gemms[0].M = 1


def test_attention_gemms_feed_the_gemm_model_and_gqa_changes_no_shape():
    gemms = attention_gemms(1, 32, 1024, 1024, 128)
    assert attention_gemms(1, 32, 1024, 1024, 128, kv_heads=8) == gemms
    for g in gemms:
        t = predict_gemm_time(g.M, g.N, g.K, "bfloat16", H100, batch=g.batch)
        assert t == explain_gemm(g.M, g.N, g.K, "bfloat16", H100, batch=g.batch).predicted_s > 0


# --- attention_bytes -----------------------------------------------------------------------------

def test_fused_bytes_read_q_k_v_once_and_write_o():
    b, h, s, d = 2, 32, 1024, 128
    q_and_o = 2 * b * h * s * d * 2
    kv = 2 * b * h * s * d * 2
    assert attention_bytes(b, h, s, s, d, "bfloat16") == q_and_o + kv
    assert attention_bytes(b, h, s, s, d, "float32") == 2 * (q_and_o + kv)


def test_gqa_cuts_exactly_the_kv_term_of_fused_bytes():
    b, h, s, d = 1, 32, 4096, 128
    q_and_o = 2 * b * h * s * d * 2
    kv32 = attention_bytes(b, h, s, s, d, "bf16", kv_heads=32) - q_and_o
    kv8 = attention_bytes(b, h, s, s, d, "bf16", kv_heads=8) - q_and_o
    kv1 = attention_bytes(b, h, s, s, d, "bf16", kv_heads=1) - q_and_o
    assert kv32 == 2 * b * 32 * s * d * 2 and kv32 == 4 * kv8 == 32 * kv1
    assert attention_bytes(b, h, s, s, d, "bf16") == attention_bytes(b, h, s, s, d, "bf16", kv_heads=h)


def test_unfused_bytes_are_the_gemms_and_the_softmax_and_grow_with_the_square():
    b, h, d, dtype = 2, 16, 64, "float16"
    for s in (64, 512, 4096):
        unfused = attention_bytes(b, h, s, s, d, dtype, fused=False)
        # The byte model's own counts: QKᵀ and PV as GEMMs (A, B read, C written), the softmax as a layer.
        parts = b * h * (gemm_bytes(s, s, d, dtype) + gemm_bytes(s, d, s, dtype)) + layer_bytes(
            "softmax", (b * h, s, s), dtype)
        assert unfused == parts == 2 * b * h * (4 * s * d + 4 * s * s)
        assert unfused > attention_bytes(b, h, s, s, d, dtype)
        # The score matrix's 4·s² elements per head: doubling s quadruples them.
        scores = unfused - attention_bytes(b, h, s, s, d, dtype)
        assert scores == 2 * b * h * 4 * s * s
        assert attention_bytes(b, h, 2 * s, 2 * s, d, dtype, fused=False) - attention_bytes(
            b, h, 2 * s, 2 * s, d, dtype) == 4 * scores
    # The math path expands K and V to every query head: GQA does not change its bytes (documented).
    assert attention_bytes(1, 32, 256, 256, 128, "bf16", fused=False, kv_heads=8) == attention_bytes(
        1, 32, 256, 256, 128, "bf16", fused=False)


# --- predict_attention_time ----------------------------------------------------------------------

def test_fused_time_is_the_backends_kernel_by_hand():
    # H100 (Hopper), bf16, d = 128: PyTorch runs cuDNN's kernel; 32·16 = 512 CTAs of 16 key blocks each.
    b, h, s, d = 1, 32, 2048, 128
    p = predict_attention_time(b, h, s, s, d, spec="H100-SXM", dtype="bf16")
    r = ATTENTION_EVIDENCE["hopper"]["cudnn"]
    block_s = 4 * d * 128 * 128 / (r.mma_fraction * 989.4e12 / 132) + 128 * 128 / (r.exp_per_fp32_flop * 66.9e12 / 132)
    kernel_s = -(-512 // 132) * (r.cta_s + 16 * block_s)
    assert p.flops == 4 * b * h * s * s * d and p.bytes == 4 * b * h * s * d * 2 and p.fused
    assert p.backend == "cudnn" and "H200" in p.basis
    assert p.math_s == pytest.approx(kernel_s, rel=1e-12)
    assert p.memory_s == pytest.approx(p.bytes / (3350e9 * 0.9), rel=1e-12)
    fixed = gemm_latency_s(H100.ceilings)  # one kernel's fixed cost, the GEMM model's
    assert p.time_s == pytest.approx(kernel_s + fixed, rel=1e-12)
    assert p.bound == "math" and p.overhead_s == fixed and p.device == "H100-SXM"
    # FlashAttention-2 on the same GPU is slower; a causal mask halves the blocks of long sequences only.
    flash = predict_attention_time(b, h, s, s, d, spec=H100, dtype="bf16", backend="flash")
    assert flash.backend == "flash" and flash.time_s > 1.5 * p.time_s
    causal = predict_attention_time(b, h, 16384, 16384, d, spec=H100, dtype="bf16", causal=True)
    full = predict_attention_time(b, h, 16384, 16384, d, spec=H100, dtype="bf16")
    assert causal.flops == attention_flops(b, h, 16384, 16384, d, causal=True)
    assert 0.48 < causal.math_s / full.math_s < 0.53
    short = [predict_attention_time(b, h, 512, 512, d, spec=H100, dtype="bf16", causal=c).time_s for c in (False, True)]
    assert short[0] == short[1]  # 128 CTAs, one wave: the longest CTA sets the time either way
    with pytest.raises(ValueError, match="backend"):
        predict_attention_time(b, h, s, s, d, spec=H100, dtype="bf16", backend="math")


def test_unfused_time_is_three_kernels_and_ignores_the_mask():
    b, h, s, d = 2, 16, 1024, 64
    p = predict_attention_time(b, h, s, s, d, spec=H100, dtype="float16", fused=False)
    expected = (predict_gemm_time(s, s, d, "float16", H100, batch=b * h)
                + memory_time(layer_bytes("softmax", (b * h, s, s), "float16"), H100)
                + predict_gemm_time(s, d, s, "float16", H100, batch=b * h))
    assert p.time_s == pytest.approx(expected, rel=1e-12)
    kernels = dict(p.kernels_s)
    assert list(kernels) == ["QKᵀ", "softmax", "PV"]
    assert kernels["softmax"] == memory_time(layer_bytes("softmax", (b * h, s, s), "float16"), H100)
    assert kernels["PV"] == predict_gemm_time(s, d, s, "float16", H100, batch=b * h)
    fused = predict_attention_time(b, h, s, s, d, spec=H100, dtype="float16")
    assert fused.kernels_s == (("attention", fused.time_s),)
    assert p.overhead_s == pytest.approx(2 * gemm_latency_s(H100.ceilings) + kernel_latency_s(H100.ceilings))
    assert not p.fused
    assert p.bytes == attention_bytes(b, h, s, s, d, "float16", fused=False)
    causal = predict_attention_time(b, h, s, s, d, spec=H100, dtype="float16", fused=False, causal=True)
    assert causal.time_s == p.time_s and causal.flops == p.flops == attention_flops(b, h, s, s, d)


@pytest.mark.parametrize("s", [1024, 4096, 16384])
def test_fused_is_never_slower_than_unfused_at_long_sequences(s):
    # On the H100 (cuDNN's kernel, fitted on the H200). A V100 runs the memory-efficient kernel at rates
    # assumed from Hopper's, against an unfused model that still counts 16-bit Tensor Core GEMMs, where
    # PyTorch's math path computes in float32: that comparison says nothing, so it is not made here.
    fused = predict_attention_time(1, 16, s, s, 128, spec=H100, dtype="bfloat16")
    unfused = predict_attention_time(1, 16, s, s, 128, spec=H100, dtype="bfloat16", fused=False)
    assert fused.time_s < unfused.time_s and fused.bytes < unfused.bytes
    assert predict_attention_time(1, 16, s, s, 128, spec=V100, dtype="float16").backend == "efficient"


def test_memory_bound_from_seq_on_h100_is_where_the_fixed_costs_stop_dominating():
    b, h, d = 1, 32, 128
    # Unfused bf16, s_q = s_k = s: bytes 2·b·h·(4·s·d + 4·s²), FLOPs 4·b·h·s²·d. Its intensity
    # s·d/(2·(s + d)) < d/2 = 64 FLOP/B stays under the H100's ridge (263.5 achievable), so the bytes
    # time exceeds the math time at every s; it passes the three kernels' fixed costs F (two GEMMs' and the
    # softmax's: 3 × 5 µs with the model's default latency) when 2·b·h·4·(s² + d·s) ≥ F · 3.015e12.
    fixed = 2 * gemm_latency_s(H100.ceilings) + kernel_latency_s(H100.ceilings)
    c = fixed * 3350e9 * 0.9 / (2 * b * h * 4)
    s_star = math.ceil((-d + math.sqrt(d * d + 4 * c)) / 2)
    p = predict_attention_time(b, h, 64, 64, d, spec=H100, dtype="bf16")
    assert p.memory_bound_from_seq == s_star
    at = predict_attention_time(b, h, s_star, s_star, d, spec=H100, dtype="bf16", fused=False)
    below = predict_attention_time(b, h, s_star - 1, s_star - 1, d, spec=H100, dtype="bf16", fused=False)
    assert (at.bound, below.bound) == ("memory", "latency")
    for s in (s_star + 1, 4096, SEARCH_LIMIT):
        assert predict_attention_time(b, h, s, s, d, spec=H100, dtype="bf16", fused=False).bound == "memory"
    # More sequences reach the fixed costs' bytes sooner.
    assert predict_attention_time(8, h, 64, 64, d, spec=H100, dtype="bf16").memory_bound_from_seq < s_star


def test_memory_bound_from_seq_is_none_where_unfused_attention_turns_math_bound():
    # V100 FP32 (CUDA cores): ridge 14.8/0.81 ≈ 18.3 FLOP/B achievable; intensity s·128/(4·(s + 128)) → 32.
    p = predict_attention_time(1, 32, 4096, 4096, 128, spec=V100, dtype="float32", fused=False)
    assert p.memory_bound_from_seq is None and p.bound == "math"


# --- decoding ------------------------------------------------------------------------------------

def test_llama2_7b_decode_step_bytes():
    kv_cache = 2 * 32 * 1 * 2048 * 32 * 128 * 2
    assert kv_cache == 1_073_741_824
    nbytes = decode_step_bytes(LLAMA_PARAMS, 1, 2048, dtype="bf16", **LLAMA)
    assert nbytes == LLAMA_PARAMS * 2 + kv_cache
    assert nbytes - kv_cache == pytest.approx(13.5e9, rel=0.01)  # the "≈ 13.5 GB" of weights
    # GQA with 8 K/V heads reads a quarter of the cache.
    gqa = decode_step_bytes(LLAMA_PARAMS, 1, 2048, dtype="bf16", layers=32, kv_heads=8, head_dim=128)
    assert nbytes - gqa == kv_cache - kv_cache // 4


def test_llama2_7b_decode_time_on_h100():
    p = predict_decode_time(LLAMA_PARAMS, 1, 2048, dtype="bfloat16", spec="H100-SXM", **LLAMA)
    nbytes = LLAMA_PARAMS * 2 + 1_073_741_824
    assert p.bytes == nbytes and p.flops == 2 * LLAMA_PARAMS + 4 * 32 * 2048 * 32 * 128
    assert p.datasheet_s == pytest.approx(nbytes / 3350e9, rel=1e-12) and p.datasheet_s >= 4.3e-3
    assert p.time_s == pytest.approx(nbytes / (3350e9 * 0.9), rel=1e-12)  # 90 % of 3.35 TB/s: 4.83 ms
    assert p.time_s >= 4.3e-3 and p.bound == "memory"
    assert p.tokens_per_s == pytest.approx(1 / p.time_s)
    # Each sequence's cache brings 4·L·c·h·d FLOPs for 2·L·c·kv·d·2 bytes: 1 FLOP/B, far under the
    # ridge, so at context 2048 no batch makes the step math-bound.
    assert p.math_bound_batch is None


def test_h100_bf16_ridge_is_the_scaling_books():
    assert H100.ops_per_byte("bfloat16") == pytest.approx(989.4e12 / 3.35e12) == pytest.approx(295.3, abs=0.05)


def test_decode_turns_math_bound_near_the_ridge_with_a_short_context():
    # Context 1: per sequence 4·32·1·32·128 = 524288 FLOPs and 2·32·1·32·128·2 = 524288 cache bytes.
    # Math-bound when n·(2p + e)/P ≥ (2p + n·e)/B, i.e. n ≥ 2p·R / (2p + e − e·R), R = P/B.
    p_, e = LLAMA_PARAMS, 524288
    R = 989.4e12 * 0.803 / (3350e9 * 0.9)
    n = math.ceil(2 * p_ * R / (2 * p_ + e - e * R))
    assert n == 267 and R < n < R * 1.02  # the achievable ridge (263.5 FLOP/B), a little more for the cache
    got = predict_decode_time(p_, 1, 1, dtype="bf16", spec=H100, **LLAMA)
    assert got.math_bound_batch == n
    assert predict_decode_time(p_, n, 1, dtype="bf16", spec=H100, **LLAMA).bound == "math"
    assert predict_decode_time(p_, n - 1, 1, dtype="bf16", spec=H100, **LLAMA).bound == "memory"
    # Query heads sharing K/V (heads=32 over kv_heads=8): more FLOPs per cache byte, same weights.
    gqa = predict_decode_time(p_, 4, 2048, dtype="bf16", spec=H100, layers=32, kv_heads=8, head_dim=128, heads=32)
    assert gqa.flops == 2 * p_ * 4 + 4 * 32 * 4 * 2048 * 32 * 128


# --- exports and bad input -----------------------------------------------------------------------

def test_exported_at_the_top_level_and_documented():
    names = ["attention_flops", "attention_gemms", "attention_bytes", "predict_attention_time",
             "decode_step_bytes", "predict_decode_time"]
    for name in names:
        assert getattr(pk, name) is getattr(pk.transformer, name) and name in pk.__all__
        assert f":func:`{name}`" in pk.__doc__


ATT = {"batch": 1, "heads": 8, "seq_q": 16, "seq_k": 16, "head_dim": 64}
DEC = {"params": 1000, "batch": 1, "context": 16, "layers": 2, "kv_heads": 2, "head_dim": 64}
CALLS = {
    "attention_flops": (lambda **k: attention_flops(**k), ATT),
    "attention_gemms": (lambda **k: attention_gemms(**k), ATT),
    "attention_bytes": (lambda **k: attention_bytes(dtype="bf16", **k), ATT),
    "predict_attention_time": (lambda **k: predict_attention_time(spec=H100, dtype="bf16", **k), ATT),
    "decode_step_bytes": (lambda **k: decode_step_bytes(dtype="bf16", **k), DEC),
    "predict_decode_time": (lambda **k: predict_decode_time(dtype="bf16", spec=H100, **k), DEC),
}
BAD_SIZES = [(fn, name, bad, err) for fn, (_, sizes) in CALLS.items() for name in sizes
             for bad, err in ((0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError))]


@pytest.mark.parametrize("fn, name, bad, err", BAD_SIZES, ids=[f"{f}-{n}-{b!r}" for f, n, b, _ in BAD_SIZES])
def test_bad_sizes_name_the_parameter(fn, name, bad, err):
    call, sizes = CALLS[fn]
    with pytest.raises(err, match=name):
        call(**{**sizes, name: bad})


@pytest.mark.parametrize("fn", ["attention_gemms", "attention_bytes", "predict_attention_time"])
def test_kv_heads_must_divide_heads(fn):
    call, sizes = CALLS[fn]
    with pytest.raises(ValueError, match="kv_heads"):
        call(**{**sizes, "heads": 8}, kv_heads=3)
    with pytest.raises(ValueError, match="kv_heads"):
        call(**{**sizes, "heads": 8}, kv_heads=0)
    call(**{**sizes, "heads": 8}, kv_heads=2)  # fine


def test_decode_heads_must_be_a_multiple_of_kv_heads():
    with pytest.raises(ValueError, match="kv_heads"):
        predict_decode_time(dtype="bf16", spec=H100, heads=5, **DEC)


@pytest.mark.parametrize("fn", ["attention_bytes", "predict_attention_time", "decode_step_bytes",
                                "predict_decode_time"])
def test_unknown_dtype_is_a_value_error_naming_dtype(fn):
    sizes = CALLS[fn][1]
    kwargs = {"spec": H100} if fn.startswith("predict") else {}
    target = {"attention_bytes": attention_bytes, "predict_attention_time": predict_attention_time,
              "decode_step_bytes": decode_step_bytes, "predict_decode_time": predict_decode_time}[fn]
    with pytest.raises(ValueError, match="dtype 'float12' is not known"):
        target(**sizes, dtype="float12", **kwargs)


def test_causal_with_more_queries_than_keys_is_refused():
    with pytest.raises(ValueError, match="seq_q"):
        attention_flops(1, 1, 5, 4, 8, causal=True)
    with pytest.raises(ValueError, match="seq_q"):
        predict_attention_time(1, 1, 5, 4, 8, spec=H100, dtype="bf16", causal=True)
    assert attention_flops(1, 1, 5, 4, 8) == 4 * 5 * 4 * 8  # without a mask any shape is fine


def test_bad_spec_and_flags():
    with pytest.raises(LookupError, match="spec"):
        predict_attention_time(**ATT, spec="H999", dtype="bf16")
    with pytest.raises(LookupError, match="spec"):
        predict_decode_time(**DEC, dtype="bf16", spec="H999")
    with pytest.raises(TypeError, match="spec"):
        predict_decode_time(**DEC, dtype="bf16", spec=None)
    with pytest.raises(TypeError, match="fused"):
        attention_bytes(**ATT, dtype="bf16", fused="yes")
    with pytest.raises(TypeError, match="causal"):
        attention_flops(**ATT, causal=1)
    with pytest.raises(LookupError, match="float64"):  # the L4's datasheet has no FP64 peak
        predict_attention_time(**ATT, spec="L4", dtype="float64")
