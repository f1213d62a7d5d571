"""Kernel names on CUDA and ROCm: the class a kernel gets from its name alone (kernels no op explains, traces
without shapes), MIOpen's NCHW↔NHWC transposes seen by the ``layout`` rule, and the launch gap each family's
predictions are taken less of, labelled measured or assumed.

The names are copied from real traces (the MI300X and B200 traces of ``../shared/reference/traces``, AMD's
TraceLens): hipBLASLt / Tensile GEMMs (``Cijk_…``), Composable Kernel's (``ck::…gemm…``), MIOpen's implicit
GEMM convolutions (``igemm_…``) and transposes, AOTriton's flash attention (``attn_fwd``), cuBLAS's
``nvjet`` kernels and TensorRT-LLM's batched GEMMs on a B200.
"""

from __future__ import annotations

import math

import pytest

import perfkit as pk
from perfkit.architectures import family
from perfkit.trace import Work
from perfkit.trace.opmap import work_of
from perfkit.trace.price import LAUNCH_GAPS, TracePricer, diagnose_op, kernel_class, launch_gap

#: kernel name (as a trace records it) → its class
NAMES = {
    # ROCm GEMMs: hipBLASLt / Tensile, rocBLAS, Composable Kernel, vLLM's skinny GEMMs
    "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x128_MI16x16x1_SN_LDSB1_AFC1_AFEM1": "gemm",
    "Cijk_Ailk_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1": "gemm",
    "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm": "gemm",
    "ck_tile::kentry<256, 1, ck_tile::GemmKernel<ck_tile::GemmPipelineAgBgCrCompV3>>": "gemm",
    "hipblasltKernel_bf16_tn": "gemm",
    "wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 4, 1>": "gemm",
    # ROCm convolutions: MIOpen's implicit GEMMs and CK's grouped convolutions, im2col
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2": "gemm",
    "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3": "gemm",
    "Im2d2Col_v2": "gemm",
    # ROCm attention: AOTriton's flash kernel, CK's
    "attn_fwd": "attention",
    "ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync>": "attention",
    # MIOpen's NCHW↔NHWC transposes and other memory-bound kernels
    "batched_transpose_32x16_half": "memory",
    "batched_transpose_256x4_half": "memory",
    "SubTensorOpWithScalar1d": "memory",
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>": "memory",
    # collectives: RCCL and NCCL, vLLM's all-reduce
    "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)": "communication",
    # Blackwell: cuBLAS's nvjet kernels, TensorRT-LLM's MoE GEMMs, cuDNN's and TensorRT-LLM's attention
    "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT": "gemm",
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN": "gemm",
    "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0": "attention",
    # CUDA: cuBLAS, CUTLASS, cuDNN's transposes, Inductor's GEMM template against its pointwise kernel
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k": "gemm",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>": "gemm",
    "void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true>": "memory",
    "triton_tem_fused_addmm_relu_0": "gemm",
    "triton_poi_fused_addmm_relu_0": "memory",
    # names that say convolution, CUTLASS or flash without being one
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
    "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>": "memory",
    "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, "
    "cutlass::bfloat16_t, false>>": "memory",
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>": "memory",
}


@pytest.mark.parametrize("name", list(NAMES), ids=[n[:40] for n in NAMES])
def test_a_kernel_name_gives_its_class(name):
    assert kernel_class(name) == NAMES[name]


def _conv_work(C: int = 64, K: int = 64) -> Work:
    x, w = [8, C, 56, 56], [K, C, 3, 3]
    args = ([x, w, [], [], [], [], [], [], []],
            ["c10::BFloat16", "c10::BFloat16", "", "ScalarList", "ScalarList", "ScalarList", "Scalar",
             "ScalarList", "Scalar"],
            ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"], [])
    work = work_of("aten::convolution", args)
    assert work is not None and work.family == "conv" and not work.params["nhwc"]
    return work


def test_miopen_transposes_around_an_nchw_convolution_are_the_layout_rule():
    """On ROCm, MIOpen's NHWC implicit-GEMM kernels are framed by ``batched_transpose_*`` kernels for an NCHW
    convolution, as cuDNN's by ``nchwToNhwc``: channels_last saves them."""
    kernels = ["batched_transpose_32x16_half", "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32",
               "batched_transpose_16x32_half"]
    times = [20e-6, 300e-6, 30e-6]
    d = diagnose_op(_conv_work(), sum(times), kernels, TracePricer(pk.device_spec("MI300X")),
                    kernel_times_s=times)
    assert d["rule"] == "layout" and "channels_last" in d["fix"]
    assert d["saving_s"] == pytest.approx(50e-6)
    plain = diagnose_op(_conv_work(), times[1], kernels[1:2], TracePricer(pk.device_spec("MI300X")),
                        kernel_times_s=times[1:2])
    assert plain["rule"] != "layout"


@pytest.mark.parametrize("device", ["H100-SXM", "H200", "V100-SXM2", "B200", "MI300X", "MI355X"])
def test_the_launch_gap_is_measured_on_hopper_and_labelled_assumed_elsewhere(device):
    spec = pk.device_spec(device)
    gap, label = launch_gap(spec)
    hopper = LAUNCH_GAPS["hopper"]
    assert 0 < gap.floor_s and 0 < gap.gap_s < 10e-6
    if family(spec) == "hopper":
        assert label == hopper.source and "measured on our H200" in label
    else:  # no other family is measured: Hopper's, said so
        assert gap == hopper
        assert label.startswith("assumed from hopper") and hopper.source in label
        assert f"no {family(spec)} GPU measured yet" in label
    pricer = TracePricer(spec)
    assert (pricer.launch_gap, pricer.launch_gap_source) == (gap, label)


def test_kernel_time_is_the_model_less_the_familys_launch_gap():
    work = _conv_work()
    pricer = TracePricer(pk.device_spec("MI300X"))
    row = pricer.row(work)
    expected = max(row["predicted_s"] - row.get("launches", 1) * pricer.launch_gap.gap_s,
                   row.get("launches", 1) * pricer.launch_gap.floor_s)
    assert pricer.kernel_s(work) == expected and math.isfinite(expected) and expected > 0
