"""The GEMM model and its defaults on the newest GPUs: Blackwell and AMD CDNA (no published data needed)."""

import math

import pytest
from hypothesis import given, strategies as st

import perfkit as pk
from perfkit.achievable import ACHIEVABLE_FRACTIONS, AMD_FIT, BANDWIDTH_FRACTION
from perfkit.gemm_model import DEFAULT_MODEL, FAMILY_MODELS, explain_gemm
from perfkit.quantization import alignment, cdiv
from perfkit.roofline import gemm_bytes


def test_amd_fractions_are_mamf_times_the_typical_factor_and_differ_by_part():
    mi300x, mi355x = ACHIEVABLE_FRACTIONS["MI300X"], ACHIEVABLE_FRACTIONS["MI355X"]
    assert mi300x["tensor"] == pytest.approx(668.4 / 1307.4 * AMD_FIT["typical_of_best"])
    assert mi355x["tensor"] == pytest.approx(1565.0 / 2516.6 * AMD_FIT["typical_of_best"])
    assert mi300x["tensor"] < mi355x["tensor"] < ACHIEVABLE_FRACTIONS["B200"]["tensor"]
    for name in ("MI300X", "MI355X", "B200"):
        assert "MAMF" in ACHIEVABLE_FRACTIONS[name]["source"]


def test_cdna_ceilings_carry_the_fitted_fixed_cost_and_bandwidth_nvidia_keeps_its_own():
    mi355x, b200 = pk.device_spec("MI355X").ceilings, pk.device_spec("B200").ceilings
    assert mi355x.bandwidth == pytest.approx(AMD_FIT["bandwidth_fraction"] * 8000e9)
    assert mi355x.gemm_latency_s == AMD_FIT["latency_s"] and mi355x.gemm_floor_s is None
    assert b200.bandwidth == pytest.approx(BANDWIDTH_FRACTION * 8000e9) and b200.gemm_latency_s is None
    # Hopper's measured streaming cap and flushed-L2 floor are Hopper's own: not lent to other families
    assert b200.gemm_sm_bandwidth is None and b200.gemm_floor_s is None
    assert pk.device_spec("H200").ceilings.gemm_floor_s is not None


def test_cdna_uses_its_family_model_others_the_default():
    p_amd = explain_gemm(4096, 4096, 4096, "bf16", "MI355X")
    p_nv = explain_gemm(4096, 4096, 4096, "bf16", "B200")
    assert p_amd.reuse_half == pytest.approx(FAMILY_MODELS["cdna4"].reuse_per_ridge
                                             * p_amd.flop_s_ceiling / p_amd.bandwidth_ceiling)
    assert p_nv.reuse_half == pytest.approx(DEFAULT_MODEL.reuse_per_ridge * p_nv.flop_s_ceiling / p_nv.bandwidth_ceiling)


def test_narrower_formats_run_faster_on_the_parts_that_have_them():
    big = (8192, 8192, 8192)
    t = {d: pk.predict_gemm_time(*big, d, "B200") for d in ("bf16", "fp8", "fp6", "nvfp4")}
    assert t["nvfp4"] < t["fp8"] < t["bf16"] and t["fp6"] == pytest.approx(t["fp8"], rel=0.05)
    amd = {d: pk.predict_gemm_time(*big, d, "MI355X") for d in ("fp8", "mxfp6", "mxfp4")}
    assert amd["mxfp6"] == pytest.approx(amd["mxfp4"], rel=0.05) and amd["mxfp4"] < amd["fp8"]
    with pytest.raises(LookupError, match="float4.*H100-SXM.*dtypes with a peak"):
        pk.predict_gemm_time(*big, "fp4", "H100-SXM")
    with pytest.raises(LookupError, match="tf32.*MI355X"):
        pk.predict_gemm_time(*big, "tf32", "MI355X")


def test_block_scaled_bytes_count_their_scales():
    m, n, k = 1024, 2048, 4096
    assert gemm_bytes(m, n, k, "float4") == pytest.approx((0.5 + 1 / 16) * (m * k + k * n) + 2 * m * n)
    assert gemm_bytes(m, n, k, "float6") == pytest.approx((0.75 + 1 / 32) * (m * k + k * n) + 2 * m * n)
    assert alignment("float4") == 32 and alignment("float6") == 64  # 16 and 48 bytes


@given(st.integers(1, 100_000), st.sampled_from(["MI300X", "MI355X"]))
def test_a_wave_per_die_is_a_wave_over_all_cus(tiles, name):
    # work-groups go to the 8 dies round robin: the busiest die's waves equal the pool's
    spec = pk.device_spec(name)
    per_die = spec.sms // spec.dies
    assert cdiv(cdiv(tiles, spec.dies), per_die) == cdiv(tiles, spec.sms)


@pytest.mark.parametrize("name", ["B200", "GB200", "B300", "GB300", "MI300X", "MI325X", "MI350X", "MI355X"])
def test_every_new_part_prices_every_dtype_it_has(name):
    spec = pk.device_spec(name)
    for d in spec.peaks:
        p = explain_gemm(512, 512, 512, d, spec)
        assert math.isfinite(p.predicted_s) and p.predicted_s >= p.floor_s > 0
