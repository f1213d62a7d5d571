"""perfkit.gemm_model: worked examples from NVIDIA's guide, and properties over many random GEMMs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.ceilings import gemm_latency_s
from perfkit.devices import KNOWN_DEVICES, device_spec
from perfkit.gemm_model import (CANDIDATE_TILES, DEFAULT_MODEL, REFERENCE_REUSE_HALF, SPLITS, TILE_SHAPE_FACTORS,
                                GemmModel, GemmPrediction, explain_gemm, predict_gemm_time, shape_factor)
from perfkit.quantization import wave_quantization
from perfkit.roofline import gemm_bytes, gemm_flops, roofline_time
from testkit import A100, H100

TILE = (256, 128)


def t(N, M=2304, K=4096, **kw):
    # "NTT" (nn.Linear's forward): N is no operand's leading dimension, so an odd N pays no alignment penalty
    return predict_gemm_time(M, N, K, "float16", A100, TILE, layout="NTT", **kw)


def test_wave_boundary_jump_and_plateau():
    one, two = t(1536), t(1537)
    assert 1.9 < two / one < 2.0  # one more column: a whole extra wave
    plateau = [t(n) for n in range(1537, 3073)]
    assert max(plateau) == pytest.approx(min(plateau), rel=1e-12)  # flat within 2 waves
    assert t(3073) / t(3072) == pytest.approx(1.5, rel=0.02)


def test_steps_exactly_where_wave_count_changes():
    # From N = 256 on, 2304×N×4096 is math-bound on an A100 (below, it is memory-bound: no waves).
    Ns = np.arange(256, 10001)
    times = np.array([t(int(n)) for n in Ns])
    waves = np.array([wave_quantization(2304, int(n), TILE, A100.sms).waves for n in Ns])
    time_steps = Ns[1:][~np.isclose(times[1:], times[:-1], rtol=1e-9, atol=0)]
    wave_steps = Ns[1:][waves[1:] != waves[:-1]]
    assert len(wave_steps) >= 5
    np.testing.assert_array_equal(time_steps, wave_steps)
    np.testing.assert_array_equal(wave_steps[:3], [1537, 3073, 4609])


def test_explain_fields_and_consistency():
    p = explain_gemm(2304, 1537, 4096, "fp16", A100, TILE, layout="NTT")
    assert isinstance(p, GemmPrediction)
    assert (p.M, p.N, p.K, p.dtype, p.device, p.tile) == (2304, 1537, 4096, "float16", A100.label, TILE)
    assert (p.tiles, p.waves) == (117, 2)
    assert p.utilization == pytest.approx(117 / 216)
    assert p.tile_efficiency == pytest.approx(2304 * 1537 / (117 * 256 * 128))
    assert p.bound == "math" and not p.aligned
    assert p.floor_s == roofline_time(gemm_flops(2304, 1537, 4096), gemm_bytes(2304, 1537, 4096, "float16"),
                                      A100, "float16")[0]
    assert p.predicted_s == predict_gemm_time(2304, 1537, 4096, "float16", A100, TILE, layout="NTT")
    # 2304×1536 is exactly 108 full 256×128 tiles: one full wave runs at the datasheet peak ...
    full = explain_gemm(2304, 1536, 4096, "float16", A100, TILE, ceilings="datasheet")
    assert full.aligned and full.waves == 1 and full.utilization == 1.0
    assert full.math_s == pytest.approx(gemm_flops(2304, 1536, 4096) / 312e12)
    # With the default ceilings it runs at the achievable fraction of the peak instead.
    default = explain_gemm(2304, 1536, 4096, "float16", A100, TILE)
    assert default.flop_s_ceiling == pytest.approx(0.869 * 312e12)
    assert default.math_s == pytest.approx(gemm_flops(2304, 1536, 4096) / default.flop_s_ceiling)
    assert "MAMF" in default.ceilings_source and default.split_k == 1
    # ... and one more column costs a whole second wave.
    assert p.math_s == pytest.approx(2 * default.math_s)


def test_overhead_blocks_per_sm_and_memory_bound():
    assert t(1536, launch_overhead_s=0) == pytest.approx(t(1536) - DEFAULT_MODEL.latency_s)
    # Two blocks per SM share each SM: a wave holds 216 tiles and takes twice as long, so
    # 117 tiles cost as much as 216.
    assert t(1537, blocks_per_sm=2) == pytest.approx(t(3072))
    assert t(3072, blocks_per_sm=2) == pytest.approx(t(3072))
    h100 = device_spec("H100-SXM")
    p = explain_gemm(16384, 1, 8192, "float16", h100)  # batch-1 linear layer: memory-bound
    assert p.bound == "memory" and p.predicted_s == pytest.approx(p.memory_s + p.launch_overhead_s)
    # its operands at the rate a Hopper GEMM streams them (132 SMs × 21 GB/s, below the 0.9 × 3350 GB/s a copy gets)
    stream_s = (16384 * 8192 + 8192) * 2 / min(0.9 * 3350e9, 132 * 21e9)
    assert p.stream_bandwidth == pytest.approx(132 * 21e9) and stream_s <= p.memory_s < 1.05 * stream_s
    tiny = explain_gemm(64, 1, 64, "float16", h100)  # nothing to do: the kernel's fixed cost dominates
    floor_s = gemm_latency_s(h100.ceilings)  # Hopper's flushed-L2 floor, above the model's 5 µs
    assert floor_s > DEFAULT_MODEL.latency_s and tiny.bound == "latency" and floor_s < tiny.predicted_s < 1.1 * floor_s


def test_shape_factor_table_and_override():
    assert CANDIDATE_TILES[:2] == ((256, 128), (128, 256)) and CANDIDATE_TILES[-1] == (32, 32)
    # NVIDIA's ordering of tile efficiency follows from the operand reuse TM·TN/(TM+TN).
    order = [(256, 128), (128, 128), (256, 64), (128, 64), (64, 64), (32, 32)]
    assert [shape_factor(t) for t in order] == sorted((shape_factor(t) for t in order), reverse=True)
    assert TILE_SHAPE_FACTORS[(256, 128)] == 1.0 > TILE_SHAPE_FACTORS[(128, 128)] > TILE_SHAPE_FACTORS[(64, 64)]
    p = explain_gemm(4096, 4096, 4096, "float16", A100, (128, 128))
    assert p.reuse_half == pytest.approx(p.flop_s_ceiling / p.bandwidth_ceiling)  # r0 = c · ridge, c = 1
    assert p.shape_factor == shape_factor((128, 128), p.reuse_half) < TILE_SHAPE_FACTORS[(128, 128)]
    small = explain_gemm(4096, 4096, 4096, "float16", A100, (16, 8))
    assert small.shape_factor == shape_factor((16, 8), small.reuse_half) < 0.5
    q = explain_gemm(4096, 4096, 4096, "float16", A100, (32, 32), shape_factors={(32, 32): 0.5})
    plain = explain_gemm(4096, 4096, 4096, "float16", A100, (32, 32))
    assert q.shape_factor == 0.5 and q.math_s == pytest.approx(plain.math_s * plain.shape_factor / 0.5)
    r = explain_gemm(4096, 4096, 4096, "float16", A100, shape_factors={(64, 64): 1.0})
    assert r.tile == (64, 64)  # the table given is the candidate list
    with pytest.raises(ValueError, match=r"shape_factors\[\(64, 64\)\] must be a number in \(0, 1\]"):
        explain_gemm(64, 64, 64, "float16", A100, shape_factors={(64, 64): 1.5})


def test_faster_math_needs_more_reuse():
    # r0 scales with the ridge point: on a V100 the Tensor Cores (fp16) need ~8x the FP32 reuse,
    # so the same small tile loses more of its speed in fp16.
    v100 = device_spec("V100-SXM2")
    h, s = (explain_gemm(4096, 4096, 4096, dt, v100, (64, 64)) for dt in ("float16", "float32"))
    assert h.reuse_half / s.reuse_half == pytest.approx(112.25 / 14.77, rel=0.01)
    assert h.shape_factor < s.shape_factor
    assert s.reuse_half == pytest.approx(REFERENCE_REUSE_HALF, rel=0.15)
    slow = explain_gemm(4096, 4096, 4096, "float16", v100, (64, 64), model=GemmModel(reuse_per_ridge=2.0))
    assert slow.reuse_half == pytest.approx(2 * h.reuse_half) and slow.shape_factor < h.shape_factor
    with pytest.raises(ValueError, match="reuse_per_ridge"):
        GemmModel(reuse_per_ridge=0)
    with pytest.raises(ValueError, match="reuse_half"):
        shape_factor((64, 64), 0)


def test_old_name_of_the_table_still_works_with_a_warning():
    import perfkit as pk

    with pytest.warns(DeprecationWarning, match="TILE_SHAPE_FACTORS"):
        assert pk.gemm_model.TILE_EFFICIENCY is TILE_SHAPE_FACTORS


def test_auto_tile_picks_nvidia_figure_5_shape():
    # 6912×2048×4096 on A100: 432 tiles of 256×128 = 4 full waves, the most efficient tile.
    p = explain_gemm(6912, 2048, 4096, "float16", A100)
    assert p.tile == (256, 128) and p.waves == 4 and p.utilization == 1.0


DEVICES = list(KNOWN_DEVICES.values())
dims = st.integers(1, 20000)


@st.composite
def gemms(draw):
    """A random GEMM on a random known device, in a dtype that device has a peak for."""
    spec = draw(st.sampled_from(DEVICES))
    return draw(dims), draw(dims), draw(dims), draw(st.sampled_from(list(spec.peaks))), spec


tiles = st.sampled_from([None, (256, 128), (64, 64), (16, 8), (128, 256)])


@settings(max_examples=300, deadline=None)
@given(gemms(), tiles, st.sampled_from([0.0, 3e-6]))
def test_never_faster_than_the_roofline(gemm, tile, overhead):
    M, N, K, dtype, spec = gemm
    p = explain_gemm(M, N, K, dtype, spec, tile, launch_overhead_s=overhead)
    floor = roofline_time(gemm_flops(M, N, K), gemm_bytes(M, N, K, dtype), spec, dtype)[0]
    assert p.floor_s == floor and p.predicted_s >= floor
    assert p.math_s >= gemm_flops(M, N, K) / spec.peak_flop_s(dtype)
    assert 0 < p.utilization <= 1 and 0 < p.tile_efficiency <= 1
    work = max(p.math_s, p.memory_s)
    assert p.bound == ("latency" if p.launch_overhead_s > work else "math" if p.math_s >= p.memory_s else "memory")
    assert p.predicted_s == pytest.approx(max(work + p.launch_overhead_s, floor), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(gemms(), tiles, st.sampled_from(["M", "N", "K"]), st.integers(1, 5000))
def test_more_work_never_takes_less_time(gemm, tile, axis, extra):
    """A longer K always costs more. A larger M or N does once the GEMM is math-bound; while it is
    memory-bound, more tiles bring more SMs to draw bandwidth, as on a real GPU. Unless the bigger one is
    better aligned (a cheaper fallback kernel, or none): what padding a dimension is for."""
    M, N, K, dtype, spec = gemm
    bigger = dict(M=M, N=N, K=K)
    bigger[axis] += extra
    before = explain_gemm(M, N, K, dtype, spec, tile)
    after = explain_gemm(dtype=dtype, spec=spec, tile=tile, **bigger)
    if after.alignment_slowdown < before.alignment_slowdown or after.split_k != before.split_k:
        return  # better aligned; or a K long enough to split (min_split_k), which a shorter K may not be
    if axis == "K" or (before.bound == after.bound == "math"):
        assert after.predicted_s >= before.predicted_s * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(gemms())
def test_auto_tile_is_the_fastest_candidate(gemm):
    M, N, K, dtype, spec = gemm
    auto = explain_gemm(M, N, K, dtype, spec)
    assert auto.tile in CANDIDATE_TILES and auto.split_k in SPLITS
    options = [predict_gemm_time(M, N, K, dtype, spec, t, split_k=s) for t in CANDIDATE_TILES for s in SPLITS
               if s == 1 or (-(-K // s) >= DEFAULT_MODEL.min_split_k and s <= K)]
    assert auto.predicted_s == pytest.approx(min(options), rel=1e-12)
    assert auto.predicted_s <= min(predict_gemm_time(M, N, K, dtype, spec, t) for t in CANDIDATE_TILES)


@settings(max_examples=150, deadline=None)
@given(gemms())
def test_aligned_means_every_dimension_is_a_multiple_of_16_bytes(gemm):
    M, N, K, dtype, spec = gemm
    from perfkit.quantization import is_aligned

    assert explain_gemm(M, N, K, dtype, spec, (128, 128)).aligned == is_aligned(dtype, M, N, K)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(M=0), ValueError, "M must be a positive integer"),
    (dict(K=1.5), TypeError, "K must be a positive integer"),
    (dict(dtype="float7"), ValueError, "dtype 'float7' is not known"),
    (dict(dtype="float8"), LookupError, "no peak for dtype 'float8'"),
    (dict(tile=(256, 0)), ValueError, r"tile\[1\] must be a positive integer"),
    (dict(tile=256), TypeError, "tile must be a pair"),
    (dict(blocks_per_sm=0), ValueError, "blocks_per_sm must be a positive integer"),
    (dict(launch_overhead_s=-1), ValueError, "launch_overhead_s must be a finite number of seconds"),
    (dict(spec=132), TypeError, "spec must be a device name such as 'H100-SXM', a DeviceSpec"),
    (dict(spec=None), TypeError, "spec must be a device name such as 'H100-SXM', a DeviceSpec, got None"),
    (dict(spec="TPU v5e"), LookupError, "spec: unknown device name 'TPU v5e'"),
    (dict(math_dtype="float9"), ValueError, "dtype 'float9' is not known"),
    (dict(accumulate=1), TypeError, "accumulate must be True or False"),
    (dict(split_k=0), ValueError, "split_k must be a positive integer"),
    (dict(split_k=65), ValueError, "split_k must be at most K=64"),
    (dict(ceilings="best"), TypeError, "ceilings must be None"),
    (dict(model={"latency_s": 0}), TypeError, "model must be a GemmModel"),
])
def test_bad_arguments(kwargs, exc, match):
    args = dict(M=64, N=64, K=64, dtype="float16", spec=A100) | kwargs
    with pytest.raises(exc, match=match):
        explain_gemm(**args)


# --- batched GEMMs, Hopper's split-K and TF32 --------------------------------------------------


def test_batch_one_is_the_plain_gemm_and_a_batch_shares_the_waves():
    for shape in ((256, 256, 4096), (4096, 4096, 4096), (2304, 1537, 4096)):
        one = explain_gemm(*shape, "bfloat16", H100)
        assert explain_gemm(*shape, "bfloat16", H100, batch=1) == one and one.batch == 1
    small = explain_gemm(256, 256, 4096, "bfloat16", H100, tile=(128, 128), split_k=1)
    four = explain_gemm(256, 256, 4096, "bfloat16", H100, tile=(128, 128), split_k=1, batch=4)
    assert (small.tiles, four.tiles) == (4, 16) and small.waves == four.waves == 1  # 16 tiles, one wave
    assert four.math_s == pytest.approx(small.math_s)  # the extra tiles ran on idle SMs
    assert four.launch_overhead_s == small.launch_overhead_s  # one launch
    assert four.achieved_flop_s == pytest.approx(4 * gemm_flops(256, 256, 4096) / four.predicted_s)
    assert four.floor_s == pytest.approx(4 * small.floor_s)


@settings(max_examples=150, deadline=None)
@given(gemms(), st.integers(2, 16))
def test_b_gemms_in_one_launch_cost_more_than_one_and_at_most_b(gemm, b):
    M, N, K, dtype, spec = gemm
    one = predict_gemm_time(M, N, K, dtype, spec)
    many = explain_gemm(M, N, K, dtype, spec, batch=b)
    assert one * (1 - 1e-12) <= many.predicted_s <= b * one * (1 + 1e-12)
    assert many.predicted_s >= many.floor_s and many.tiles % b == 0


@pytest.mark.parametrize("batch, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                        ("4", TypeError)])
def test_batch_must_be_a_positive_integer(batch, exc):
    with pytest.raises(exc, match="batch must be a positive integer"):
        explain_gemm(64, 64, 64, "float16", A100, batch=batch)
    with pytest.raises(exc, match="batch must be a positive integer"):
        predict_gemm_time(64, 64, 64, "float16", A100, batch=batch)


def test_split_k_costs_one_launch_on_hopper_and_two_before():
    from perfkit.gemm_model import SPLIT_K_IN_KERNEL

    assert {"H100-SXM", "H200"} <= SPLIT_K_IN_KERNEL and "A100-SXM4-80GB" not in SPLIT_K_IN_KERNEL
    hopper = explain_gemm(512, 512, 8192, "float16", H100, tile=(128, 128), split_k=4)
    ampere = explain_gemm(512, 512, 8192, "float16", A100, tile=(128, 128), split_k=4)
    assert hopper.launch_overhead_s == pytest.approx(gemm_latency_s(H100.ceilings))  # Hopper's flushed-L2 floor
    assert ampere.launch_overhead_s == pytest.approx(2 * DEFAULT_MODEL.latency_s)


def test_tf32_on_hopper_has_its_own_fitted_ceiling_and_fixed_cost():
    from perfkit.ceilings import TF32_FIT

    for shape in ((256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096)):
        assert predict_gemm_time(*shape, "tf32", H100) > predict_gemm_time(*shape, "bfloat16", H100)
    p = explain_gemm(4096, 4096, 4096, "tf32", H100)
    assert p.flop_s_ceiling == pytest.approx(TF32_FIT["fraction"] * H100.peak_flop_s("tf32"))
    assert p.launch_overhead_s == pytest.approx(gemm_latency_s(H100.ceilings) + TF32_FIT["extra_latency_s"])
    # float32 storage with TF32 math is the same GEMM as "tf32"
    assert explain_gemm(512, 512, 512, "float32", H100, math_dtype="tf32").predicted_s == pytest.approx(
        explain_gemm(512, 512, 512, "tf32", H100).predicted_s)
    # the extra fixed cost is TF32's and Hopper's alone; a given overhead replaces it
    assert explain_gemm(64, 64, 64, "bfloat16", H100).launch_overhead_s == gemm_latency_s(H100.ceilings)
    assert explain_gemm(64, 64, 64, "tf32", A100).launch_overhead_s == DEFAULT_MODEL.latency_s
    assert explain_gemm(64, 64, 64, "tf32", H100, launch_overhead_s=1e-6).launch_overhead_s == 1e-6
