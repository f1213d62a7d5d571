"""perfkit.attention_model: which SDPA kernel PyTorch runs, and the fused kernel's time by hand and from the H200."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

import perfkit as pk
from perfkit.architectures import family
from perfkit.attention_model import (ATTENTION_EVIDENCE, BACKWARD_MMA, BLOCK, attention_ctas, backend_rates,
                                     block_flops, exp_basis_flop_s, fit_rates, fused_attention_s, run_head_dim,
                                     sdpa_backend)
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


B200, GB300, B300 = device_spec("B200"), device_spec("GB300"), device_spec("B300")
MI300X, MI355X = device_spec("MI300X"), device_spec("MI355X")


@pytest.mark.parametrize("spec, dtype, d, dv, mask, want", [
    (B200, "bfloat16", 128, None, False, "cudnn"),  # sm100: cuDNN first, as on Hopper
    (B200, "bfloat16", 192, 128, False, "cudnn"),  # DeepSeek's d_qk 192 / d_v 128: cuDNN's own kernels
    (H100, "float16", 192, 128, False, "cudnn"),
    (A100, "bfloat16", 192, 128, False, "efficient"),  # FlashAttention-2 needs equal head dims
    (B200, "float32", 64, None, False, "efficient"),
    (MI300X, "bfloat16", 128, None, False, "flash"),  # ROCm: no cuDNN; AOTriton's FlashAttention first
    (MI355X, "float16", 256, None, False, "flash"),
    (MI355X, "bfloat16", 512, None, False, "flash"),  # AOTriton takes head dims up to 512
    (MI300X, "bfloat16", 128, None, True, "efficient"),  # a mask: the memory-efficient kernel
    (MI355X, "bfloat16", 192, 128, False, "efficient"),  # unequal head dims: not flash
    (MI300X, "float32", 64, None, False, "efficient"),
    (MI300X, "float32", 66, None, False, "math"),  # float32 head dims must be multiples of 4
    (MI355X, "float8", 128, None, False, "math"),  # no fused float8 kernel behind torch's SDPA
])
def test_sdpa_backend_on_blackwell_and_rocm(spec, dtype, d, dv, mask, want):
    assert sdpa_backend(spec, dtype, d, head_dim_v=dv, mask=mask) == want


def test_blackwell_and_cdna_rates_are_looked_up_by_family_and_dtype():
    rates, label = backend_rates(B200, "cudnn")
    assert rates is ATTENTION_EVIDENCE["blackwell"]["cudnn"] and "B200" in label and "held out" in label
    assert backend_rates(GB300, "flash")[0] is ATTENTION_EVIDENCE["blackwell"]["flash"]
    assert backend_rates(B200, "cudnn", "fp8")[0] is ATTENTION_EVIDENCE["blackwell"]["cudnn:float8"]
    assert backend_rates(B200, "cudnn", "bfloat16")[0] is ATTENTION_EVIDENCE["blackwell"]["cudnn"]
    # Hopper keeps its own 16-bit rates; float8 has none of its own: Blackwell's, said to be assumed
    assert backend_rates(H100, "cudnn", "bfloat16")[0] is HOPPER["cudnn"]
    rates, label = backend_rates(H100, "cudnn", "float8")
    assert rates is ATTENTION_EVIDENCE["blackwell"]["cudnn:float8"]
    assert label.startswith("assumed from blackwell")
    rates, label = backend_rates(MI355X, "flash")
    assert rates is ATTENTION_EVIDENCE["cdna4"]["flash"] and "MI355X" in label
    # CDNA 3 takes CDNA 4's (AMD first), not an NVIDIA family's
    rates, label = backend_rates(MI300X, "efficient")
    assert rates is ATTENTION_EVIDENCE["cdna4"]["efficient"] and label.startswith("assumed from cdna4")
    assert "no cdna3 GPU measured yet" in label
    t, name, label = fused_attention_s(32, 4096, 4096, 128, "bfloat16", MI300X)
    assert name == "flash" and label.startswith("assumed from cdna4") and t > 0
    for table in ATTENTION_EVIDENCE.values():
        for r in table.values():
            assert 0 < r.mma_fraction <= 1 and r.exp_per_fp32_flop > 0 and r.cta_s > 0
            assert r.backward_mma_fraction is None or 0 < r.backward_mma_fraction <= 1


def test_unequal_head_dims_and_the_backward_pass_count_their_own_multiplies():
    per_block = BLOCK * BLOCK
    assert block_flops("cudnn", 128) == 4 * 128 * per_block
    assert block_flops("cudnn", 128, pass_="backward") == BACKWARD_MMA * block_flops("cudnn", 128)
    # QKᵀ at d_qk, PV at d_v; backward: QKᵀ, dQ, dK at d_qk; dP, dV at d_v
    assert block_flops("cudnn", 192, 128) == 2 * (192 + 128) * per_block
    assert block_flops("cudnn", 192, 128, "backward") == 2 * (3 * 192 + 2 * 128) * per_block
    assert block_flops("flash", 80, 80) == 4 * 96 * per_block  # padded to the kernel built
    with pytest.raises(ValueError, match="pass_"):
        block_flops("cudnn", 128, pass_="dgrad")
    wide, _, _ = fused_attention_s(64, 4096, 4096, 192, "bfloat16", B200)
    deepseek, name, _ = fused_attention_s(64, 4096, 4096, 192, "bfloat16", B200, head_dim_v=128)
    narrow, _, _ = fused_attention_s(64, 4096, 4096, 128, "bfloat16", B200)
    assert name == "cudnn" and narrow < deepseek < wide


def test_grouped_query_attention_costs_the_same_per_query_head():
    """The kernels run one CTA per query head and block: K/V heads shared by a group change no FLOP, so a
    GQA layer is priced by its query heads (``heads_total`` = sequences × query heads)."""
    one, _, _ = fused_attention_s(1 * 64, 8192, 8192, 128, "bfloat16", B200, causal=True)
    two, _, _ = fused_attention_s(2 * 64, 8192, 8192, 128, "bfloat16", B200, causal=True)
    fixed = gemm_latency_s(B200.ceilings)
    assert (two - fixed) == pytest.approx(2 * (one - fixed), rel=0.02)


def test_a_sliding_window_walks_only_the_blocks_it_sees():
    assert attention_ctas(1, 4 * BLOCK, 4 * BLOCK, True, window=BLOCK) == [2, 2, 2, 1]
    assert attention_ctas(1, 4 * BLOCK, 4 * BLOCK, True, window=2 * BLOCK + 1) == [3, 3, 2, 1]
    assert attention_ctas(1, 4 * BLOCK, 4 * BLOCK, True, window=10 ** 6) == attention_ctas(1, 4 * BLOCK,
                                                                                          4 * BLOCK, True)
    with pytest.raises(ValueError, match="window"):
        attention_ctas(1, 4 * BLOCK, 4 * BLOCK, False, window=BLOCK)
    full, _, _ = fused_attention_s(128, 32768, 32768, 64, "bfloat16", B200, causal=True)
    windowed, _, _ = fused_attention_s(128, 32768, 32768, 64, "bfloat16", B200, causal=True, window=1024)
    # 9 of up to 256 key blocks per query block (128.5 on average without the window); the CTAs' fixed costs stay
    assert windowed < full / 4


def test_the_exponential_rate_rests_on_float32_doubled_on_blackwell_ultra():
    assert exp_basis_flop_s(B200) == B200.peaks["float32"] and exp_basis_flop_s(H100) == H100.peaks["float32"]
    assert exp_basis_flop_s(B300) == 2 * B300.peaks["float32"]  # twice Blackwell's MUFU.EX2 rate
    # a datasheet without a float32 figure: the 16-bit peak at the family's float32 ratio
    bare = replace(B200, peaks={k: v for k, v in B200.peaks.items() if k != "float32"})
    ratios = [s.peaks["float32"] / s.peaks["bfloat16"] for s in pk.KNOWN_DEVICES.values()
              if family(s) == "blackwell" and "float32" in s.peaks]
    assert min(ratios) <= exp_basis_flop_s(bare) / B200.peaks["bfloat16"] <= max(ratios)
    assert exp_basis_flop_s(GB300) > 0


def _synthetic(spec, rows):
    """Recordings the model itself would make (attention_backends' columns, plus pass_ and head_dim_v)."""
    out = []
    for batch, heads, seq, d, dv, causal, pass_ in rows:
        t, _, _ = fused_attention_s(batch * heads, seq, seq, d, "bfloat16", spec, causal=causal,
                                    backend="cudnn", pass_=pass_, head_dim_v=dv)
        out.append(dict(backend="cudnn", batch=batch, heads=heads, seq=seq, head_dim=d, head_dim_v=dv,
                        causal=causal, pass_=pass_, time_s=t))
    return pd.DataFrame(out)


def test_fit_rates_recovers_causal_and_backward_rates(monkeypatch):
    """Causal rows (an uneven schedule) and backward rows (their own share of the peak) made by the model
    with known rates give those rates back; rows of one head dim, with the multiplies held, too."""
    truth = replace(HOPPER["cudnn"], backward_mma_fraction=0.6)
    monkeypatch.setitem(ATTENTION_EVIDENCE["hopper"], "cudnn", truth)
    shapes = [(b, 16, s, d, d, c, p) for b in (1, 4) for s in (1024, 4096, 16384) for d in (64, 128, 256)
              for c in (True, False) for p in ("forward", "backward")]
    kw = dict(peak_flop_s=H100.peaks["bfloat16"], fp32_flop_s=exp_basis_flop_s(H100), sms=H100.sms,
              latency_s=gemm_latency_s(H100.ceilings), causal=True)
    fitted = fit_rates(_synthetic(H100, shapes), **kw)["cudnn"]
    assert fitted.mma_fraction == pytest.approx(truth.mma_fraction, abs=2e-3)
    assert fitted.backward_mma_fraction == pytest.approx(0.6, abs=2e-3)
    assert fitted.exp_per_fp32_flop == pytest.approx(truth.exp_per_fp32_flop, rel=0.01)
    assert fitted.cta_s == pytest.approx(truth.cta_s, rel=0.01)
    one_dim = _synthetic(H100, [s for s in shapes if s[3] == 128])
    held = fit_rates(one_dim, mma_fraction=truth.mma_fraction, **kw)["cudnn"]
    assert held.exp_per_fp32_flop == pytest.approx(truth.exp_per_fp32_flop, rel=0.01)
    assert held.cta_s == pytest.approx(truth.cta_s, rel=0.01)
