"""Alignment by leading dimension, Hopper's GEMM streaming rate and flushed-L2 floor, TF32's serial
epilogue, and how validation reads layouts (perfkit.gemm_alignment, perfkit.ceilings, perfkit.gemm_model)."""

from dataclasses import replace

import pytest

import perfkit as pk
from perfkit.advisor.ops import Op, passes
from perfkit.advisor.price import Pricer
from perfkit.ceilings import (ALIGNMENT_SLOWDOWNS, GEMM_FLOOR_S, GEMM_SM_BANDWIDTH, Ceilings, alignment_slowdowns,
                              architecture, cold_start_s, gemm_latency_s, merged, unaligned_slowdown_for)
from perfkit.gemm_alignment import (LINEAR_LAYOUTS, MATMUL_LAYOUTS, alignment_class, check_layout,
                                    from_column_major, leading_dims, narrowest_alignment)
from perfkit.gemm_model import DEFAULT_MODEL, explain_gemm
from perfkit.validation import neighbour_slowdowns, recorded_fit_rows, row_layouts, with_predictions
from testkit import framed

H200 = pk.device_spec("H200")
H100 = pk.device_spec("H100-SXM")


def test_layouts_name_the_leading_dimension_of_each_operand():
    assert leading_dims("NN") == ("K", "N", "N") and leading_dims("tt") == ("M", "K", "N")
    assert leading_dims("NTT") == ("K", "K", "M") and leading_dims("") is None
    # nn.Linear (out, tokens, in): in and out are leading in every pass, tokens in none
    for pass_, lay in LINEAR_LAYOUTS.items():
        tokens_dim = {"forward": "N", "dgrad": "N", "wgrad": "K"}[pass_]
        assert tokens_dim not in leading_dims(lay)
    assert set(MATMUL_LAYOUTS.values()) == {"NN", "NT", "TN"}
    # DeepBench's cuBLAS layouts are column-major: C's leading dimension is M
    assert from_column_major("NN") == "TTT" and from_column_major("TN") == "NTT"
    assert leading_dims(from_column_major("NT")) == ("M", "N", "M")


@pytest.mark.parametrize("layout, exc", [("NX", ValueError), ("N", ValueError), ("NNNN", ValueError),
                                         (3, TypeError), (None, TypeError)])
def test_a_bad_layout_is_refused_by_name(layout, exc):
    with pytest.raises(exc, match="layout"):
        check_layout(layout)
    with pytest.raises(exc, match="layout"):
        explain_gemm(64, 64, 64, "float16", H100, layout=layout)
    with pytest.raises(ValueError, match="layout"):
        from_column_major("NTT")


def test_narrowest_alignment_counts_leading_dimensions_only():
    fwd = LINEAR_LAYOUTS["forward"]
    assert narrowest_alignment(10000, 700, 1000, "bfloat16", fwd) == 16  # tokens 700: not leading
    assert narrowest_alignment(50257, 8192, 768, "bfloat16", fwd) == 2  # out 50257 is C's leading dimension
    assert narrowest_alignment(4096, 4096, 770, "float16", "NN") == 4  # even K: 4-byte copies
    assert narrowest_alignment(4097, 4096, 4096, "float16", "NN") == 16  # M leads no operand in NN
    assert narrowest_alignment(4097, 4096, 4096, "float16", "") == 2  # unknown layout: every dimension
    assert narrowest_alignment(2560, 1, 2560, "float16", "NN") == 16  # a vector has no stride
    assert narrowest_alignment(4096, 4096, 4097, "tf32", "NN") == 4  # 4-byte elements: never narrow
    assert [alignment_class(b) for b in (16, 8, 4, 2, 1)] == ["aligned", "partial", "partial", "narrow", "narrow"]


def test_gpt2_lm_head_pays_the_narrow_penalty_in_every_pass_and_padding_removes_it():
    for pass_ in LINEAR_LAYOUTS:
        bad = explain_gemm(*pk.linear_gemms(8192, 768, 50257)[pass_], "bfloat16", H200, layout=LINEAR_LAYOUTS[pass_])
        good = explain_gemm(*pk.linear_gemms(8192, 768, 50304)[pass_], "bfloat16", H200, layout=LINEAR_LAYOUTS[pass_])
        narrow = ALIGNMENT_SLOWDOWNS["hopper"]["narrow"]["bfloat16"]
        assert bad.alignment_bytes == 2 and bad.alignment_slowdown == narrow and good.alignment_slowdown == 1
        assert bad.predicted_s > 4 * good.predicted_s  # measured on the H200: 6.1× forward, 5.0× backward
    # tokens unaligned (700, the LSTM LM's decoder) costs nothing in any pass
    for pass_, lay in LINEAR_LAYOUTS.items():
        assert explain_gemm(*pk.linear_gemms(700, 1000, 10000)[pass_], "bfloat16", H200,
                            layout=lay).alignment_slowdown == 1


def test_per_architecture_defaults_and_what_they_rest_on():
    fams = {n: architecture(pk.device_spec(n)) for n in ("H200", "H800", "A100-SXM4-80GB", "V100-SXM2", "P100-PCIe")}
    assert fams == {"H200": "hopper", "H800": "hopper", "A100-SXM4-80GB": "ampere", "V100-SXM2": "volta",
                    "P100-PCIe": "pascal"}
    v100 = pk.device_spec("V100-SXM2").ceilings
    # Volta (cuBLAS 10): unaligned FP16 on CUDA cores: its Tensor Core over FP32 achievable throughput
    tensor_over_cuda = v100.flop_s["float16"] / v100.flop_s["float32"]
    assert v100.unaligned_slowdown["float16"] == pytest.approx(tensor_over_cuda, rel=0.01)
    assert not pk.device_spec("P100-PCIe").ceilings.unaligned_slowdown  # no Tensor Cores
    for spec in (H200, pk.device_spec("A100-SXM4-80GB"), pk.device_spec("V100-SXM2")):
        assert unaligned_slowdown_for(spec.ceilings, "float32", 4) == 1  # FP32: no penalty, as measured
    c = H200.ceilings
    assert unaligned_slowdown_for(c, "bfloat16", 2) > unaligned_slowdown_for(c, "bfloat16", 4) > 1
    assert unaligned_slowdown_for(c, "tf32", 2) == unaligned_slowdown_for(c, "tf32", 4)  # no narrow TF32: partial
    assert unaligned_slowdown_for(c, "bfloat16", 16) == 1
    assert "gemm_alignment" in ALIGNMENT_SLOWDOWNS["hopper"]["source"]


def test_alignment_slowdowns_split_a_recording_by_how_far_k_is_aligned():
    rows = {"K": [4088, 4089, 4090, 4096], "dtype": "float16", "aligned": [True, False, False, True],
            "time_s": [2e-4, 1e-3, 5e-4, 2e-4]}
    frame = framed(rows, experiment="gemm_alignment", device_name="NVIDIA H200")
    out = alignment_slowdowns(frame)
    assert out == {"partial": {"float16": pytest.approx(2.5)}, "narrow": {"float16": pytest.approx(5.0)}}
    assert pk.ceilings.alignment_slowdown(frame) == out["partial"]
    assert alignment_slowdowns(None) == {"partial": {}, "narrow": {}}
    near = neighbour_slowdowns(frame.drop(columns="aligned"), "K")
    assert list(near["alignment_class"]) == ["narrow", "partial"] and list(near["slowdown"]) == pytest.approx([5, 2.5])
    with pytest.raises(ValueError, match="lacks the columns"):
        neighbour_slowdowns(frame, "swept")


def test_merged_ceilings_keep_the_default_slowdowns_a_recording_lacks():
    default = H200.ceilings
    measured = Ceilings({"bfloat16": 7e14}, 4.2e12, "measured", {"bfloat16": 2.7}, gemm_latency_s=4.86e-6)
    c = merged(default, measured)
    assert c.unaligned_slowdown["bfloat16"] == 2.7 and c.unaligned_slowdown["float16"] == default.unaligned_slowdown[
        "float16"]
    assert c.unaligned_narrow_slowdown == default.unaligned_narrow_slowdown
    assert c.gemm_sm_bandwidth == GEMM_SM_BANDWIDTH["hopper"] and c.serial_epilogue == frozenset({"tf32"})
    # a 16×16×16 GEMM timed warm does not lower a real GEMM's flushed-L2 floor
    assert gemm_latency_s(c) == GEMM_FLOOR_S["hopper"] and cold_start_s(c) == pytest.approx(6.5e-6 - 4.86e-6)
    assert gemm_latency_s(replace(c, gemm_latency_s=9e-6)) == 9e-6
    a100 = pk.device_spec("A100-SXM4-80GB").ceilings
    assert gemm_latency_s(a100) == DEFAULT_MODEL.latency_s and cold_start_s(a100) == 0


def test_gemv_like_gemms_stream_at_the_gemm_rate_not_the_copy_rate():
    p = explain_gemm(4096, 8, 4096, "float16", H200)  # a batch-8 linear layer: memory-bound
    rate = H200.sms * GEMM_SM_BANDWIDTH["hopper"]
    assert p.stream_bandwidth == pytest.approx(rate) and rate < p.bandwidth_ceiling
    operands = (4096 * 4096 + 4096 * 8) * 2
    assert p.memory_s == pytest.approx(operands / rate, rel=0.02) and p.bound == "memory"
    # the A100 has no recorded cap: its GEMMs stream at its achievable bandwidth
    a100 = explain_gemm(4096, 8, 4096, "float16", pk.device_spec("A100-SXM4-80GB"))
    assert a100.stream_bandwidth == a100.bandwidth_ceiling


def test_hopper_tf32_writes_its_output_after_the_main_loop():
    big_c = explain_gemm(4096, 4096, 256, "tf32", H100)  # 64 MB of float32 C, a short K
    out_s = 4096 * 4096 * 4 / big_c.bandwidth_ceiling
    bf16 = explain_gemm(4096, 4096, 256, "bfloat16", H100)
    assert big_c.math_s >= 2 * 4096 * 4096 * 256 / big_c.flop_s_ceiling + out_s * 0.999
    assert big_c.predicted_s == pytest.approx(max(big_c.math_s, big_c.memory_s) + big_c.launch_overhead_s)
    assert big_c.predicted_s > 2 * bf16.predicted_s  # XLA's H100: 2.1× at this shape
    assert "tf32" not in pk.device_spec("A100-SXM4-80GB").ceilings.serial_epilogue


def test_validation_reads_each_rows_layout():
    deepbench = framed({"M": [64], "N": [64], "K": [64], "dtype": ["float16"], "time_s": [1e-5], "layout": ["NT"]},
                       published_by="Baidu DeepBench")
    assert list(row_layouts(deepbench)) == ["TNT"]
    fc = framed({"M": [64], "N": [64], "K": [64], "dtype": ["float16"], "time_s": [1e-5]}, experiment="fc_features")
    assert list(row_layouts(fc)) == ["NT"]
    passes_ = framed({"M": [64] * 2, "N": [64] * 2, "K": [64] * 2, "dtype": "float16", "time_s": [1e-5] * 2,
                      "layout": ["TT", "TT"], "impl": ["autograd", "gemm"], "phase": ["dgrad", "dgrad"]},
                     experiment="fc_passes")
    assert list(row_layouts(passes_)) == ["TTT", "TT"]
    small = framed({"M": [2560] * 4, "N": [1, 3, 8, 256], "K": [2560] * 4, "dtype": "float16", "time_s": [1e-5] * 4},
                   experiment="gemm_small_n", device_name="NVIDIA H200")
    assert list(recorded_fit_rows(small)) == [True, False, True, False]


def test_published_tables_timed_warm_are_predicted_without_the_flushed_l2_floor():
    rows = {"M": [256], "N": [256], "K": [256], "dtype": ["bfloat16"], "time_s": [5e-6]}
    xla = framed(rows, published_by="OpenXLA", device="H100-SXM")
    ours = framed(rows, experiment="gemm_sizes", device_name="NVIDIA H100 80GB HBM3")
    warm, cold = with_predictions(xla, H100)["predicted_s"][0], with_predictions(ours, H100)["predicted_s"][0]
    assert cold - warm == pytest.approx(GEMM_FLOOR_S["hopper"] - DEFAULT_MODEL.latency_s)


def test_the_advisor_prices_linear_passes_with_their_layouts_and_one_cold_start_per_op():
    op = Op(0, "lm_head", "Linear", "linear", {"tokens": 8192, "in_features": 768, "out_features": 50257,
                                              "input_grad": True, "weight_grad": True})
    work = passes(op, training=True)
    assert [w.layout for _, _, w in work] == [LINEAR_LAYOUTS[p] for p in ("forward", "dgrad", "wgrad")]
    pricer = Pricer("bfloat16", H100, training=True)
    padded = Pricer("bfloat16", H100, training=True).time_s(op.with_params(out_features=50304))
    assert pricer.time_s(op) > 4 * padded  # the padded vocabulary is a large saving
    step = pk.advisor.ops.Gemm(4000, 20, 1000, layout=LINEAR_LAYOUTS["forward"])
    one = pricer.gemm_row(step)["predicted_s"]
    many = pricer.gemm_row(replace(step, count=35))["predicted_s"]
    assert many == pytest.approx(35 * one - 34 * cold_start_s(H100.ceilings, DEFAULT_MODEL.latency_s))
    assert cold_start_s(H100.ceilings, DEFAULT_MODEL.latency_s) > 0
