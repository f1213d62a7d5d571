"""perfkit.attention_model: which SDPA kernel PyTorch runs, and the fused kernel's time by hand and from the H200."""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit.attention_model import (ATTENTION_EVIDENCE, BLOCK, attention_ctas, backend_rates, fit_rates,
                                     fused_attention_s, run_head_dim, sdpa_backend)
from perfkit.ceilings import gemm_latency_s
from perfkit import calibrated
from perfkit.devices import device_spec
from testkit import A100, DATA, H100, V100

HOPPER = ATTENTION_EVIDENCE["hopper"]


@pytest.mark.parametrize("spec, dtype, d, mask, want", [
    (H100, "bfloat16", 128, False, "cudnn"),  # sm90: cuDNN first for 16-bit types
    (H100, "float16", 80, True, "cudnn"),
    (H100, "float32", 64, False, "efficient"),  # no 16-bit type: neither cuDNN nor FlashAttention
    (H100, "bfloat16", 264, False, "efficient"),  # head dim above 256
    (A100, "bfloat16", 128, False, "flash"),  # sm80: FlashAttention-2 first
    (A100, "bfloat16", 128, True, "efficient"),  # FlashAttention-2 takes no mask
    (device_spec("L4"), "float16", 64, False, "flash"),  # Ada
    (V100, "float16", 64, False, "efficient"),  # sm70: no FlashAttention
    (device_spec("T4"), "bfloat16", 64, False, "math"),  # bfloat16 needs sm80 for the efficient kernel
])
def test_sdpa_backend_follows_pytorchs_rules(spec, dtype, d, mask, want):
    assert sdpa_backend(spec, dtype, d, mask=mask) == want


def test_head_dims_run_padded_to_the_kernels_built():
    # attention_head_dims (H200): cuDNN took as long at 80 and 96 as at 128; flash at 80 as at 96
    assert [run_head_dim("cudnn", d) for d in (32, 64, 80, 96, 128, 200)] == [64, 64, 128, 128, 128, 256]
    assert [run_head_dim("flash", d) for d in (64, 80, 96, 100, 256)] == [64, 96, 96, 128, 256]
    assert [run_head_dim("efficient", d) for d in (40, 80, 128, 256)] == [64, 128, 128, 256]


def test_causal_ctas_walk_fewer_key_blocks_longest_first():
    assert attention_ctas(2, 4 * BLOCK, 4 * BLOCK, False) == [4] * 8
    assert attention_ctas(2, 4 * BLOCK, 4 * BLOCK, True) == [4, 3, 2, 1] * 2
    # queries aligned to the end of the keys (a chunk over a cache): every block sees the cache before it
    assert attention_ctas(1, 2 * BLOCK, 5 * BLOCK, True) == [5, 4]


def test_fused_time_by_hand_on_an_h100():
    r = HOPPER["cudnn"]
    block_s = 4 * 128 * BLOCK * BLOCK / (r.mma_fraction * 989.4e12 / 132) + BLOCK * BLOCK / (
        r.exp_per_fp32_flop * 66.9e12 / 132)
    t, backend, label = fused_attention_s(64, 4096, 4096, 128, "bfloat16", H100)
    ctas = 64 * 32  # heads × query blocks, 32 key blocks each, 132 SMs
    assert backend == "cudnn" and "H200" in label
    assert t == pytest.approx(gemm_latency_s(H100.ceilings) + -(-ctas // 132) * (r.cta_s + 32 * block_s), rel=1e-12)
    back, _, _ = fused_attention_s(64, 4096, 4096, 128, "bfloat16", H100, pass_="backward")
    assert 2 * t < back < 2.5 * t  # 2.5× the multiplies, the exponentials once more, one more kernel
    with pytest.raises(ValueError, match="pass_"):
        fused_attention_s(64, 4096, 4096, 128, "bfloat16", H100, pass_="dgrad")


def test_a_short_causal_sequence_saves_nothing_a_long_one_half():
    """One wave of CTAs: the longest (the last query block, all keys) sets the time, as the H200 showed
    at 512 and 1024 tokens (causal = non-causal); at 16k tokens the mask halves the time."""
    for seq, low, high in ((512, 1.0, 1.0), (16384, 0.48, 0.53)):
        full, causal = (fused_attention_s(32, seq, seq, 128, "bfloat16", H100, causal=c)[0] for c in (False, True))
        fixed = gemm_latency_s(H100.ceilings)
        assert low <= (causal - fixed) / (full - fixed) <= high


def test_other_families_say_what_they_assume():
    rates, label = backend_rates(A100, "flash")
    assert rates is ATTENTION_EVIDENCE["ampere"]["flash"] and "FlashAttention-2" in label
    rates, label = backend_rates(V100, "efficient")
    assert label.startswith("assumed from hopper (fitted on our H200") and "no volta GPU measured yet" in label
    # no fused kernel takes bfloat16 on a T4 (PyTorch runs the math path): priced as the efficient kernel, said so
    _, name, label = fused_attention_s(8, 1024, 1024, 64, "bfloat16", device_spec("T4"))
    assert name == "efficient" and "runs the math path" in label
    # FlashAttention-2 is an Ampere design: on the A100 it reaches a larger share of the peak than on Hopper
    assert ATTENTION_EVIDENCE["ampere"]["flash"].mma_fraction > HOPPER["flash"].mma_fraction


def test_hopper_rates_are_what_the_h200_recordings_give():
    """Refit on the fit set (attention_head_dims; attention_backends' non-causal rows): the constants, within
    rounding. The causal rows, held out, are then predicted within 15 % (the fit rows within 25 %)."""
    heads = pd.read_csv(DATA / "nvidia-h200" / "attention_head_dims.csv")
    backends = pd.read_csv(DATA / "nvidia-h200" / "attention_backends.csv")
    spec = calibrated("H200")
    fitted = fit_rates(pd.concat([heads, backends[~backends["causal"]]]), peak_flop_s=989.4e12, fp32_flop_s=67e12,
                       sms=132, latency_s=spec.ceilings.gemm_latency_s)
    for name, r in HOPPER.items():
        assert fitted[name].mma_fraction == pytest.approx(r.mma_fraction, abs=2e-3)
        assert fitted[name].exp_per_fp32_flop == pytest.approx(r.exp_per_fp32_flop, rel=0.01)
        assert fitted[name].cta_s == pytest.approx(r.cta_s, rel=0.01)
    for frame, bound in ((backends[backends["causal"]], 0.15), (heads, 0.25)):
        for row in frame[frame["backend"] != "math"].itertuples():
            t, _, _ = fused_attention_s(row.batch * row.heads, row.seq, row.seq, row.head_dim, "bfloat16", spec,
                                        causal=row.causal, backend=row.backend)
            assert abs(row.time_s / t - 1) < bound, row
