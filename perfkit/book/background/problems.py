"""The problems of chapter 01_background, with answers computed by perfkit."""

from __future__ import annotations

from ...devices import device_spec
from ...quantization import wave_quantization
from ...roofline import arithmetic_intensity, gemm_flops, math_bound_batch, nvidia_example_operations, roofline_time
from ..exercise import Exercise

CHAPTER = "01_background"

#: The linear layer of NVIDIA's Table 1 (1024 inputs, 4096 outputs), at batch 64 in problem 1.
IN_FEATURES, OUT_FEATURES, BATCH = 1024, 4096, 64
#: Blocks launched in problem 4.
BLOCKS = 140


def _relu():
    return next(op for op in nvidia_example_operations("float16") if op.name == "ReLU")


def _ai_without_output() -> float:
    """The intensity if C (M×N) were never written: only A and B cross memory."""
    m, n, k = OUT_FEATURES, BATCH, IN_FEATURES
    return gemm_flops(m, n, k) / (2 * (m * k + k * n))


def _ridge(gpu: str) -> str:
    return f"{device_spec(gpu).ops_per_byte('float16'):.0f} FLOP/byte"


def _utilization(gpu: str) -> float:
    return 100 * wave_quantization(BLOCKS, 1, tile=(1, 1), sms=device_spec(gpu).sms).utilization


EXERCISES: list[Exercise] = [
    Exercise(
        id="background-1", chapter=CHAPTER,
        question=(f"A linear layer with {IN_FEATURES} inputs and {OUT_FEATURES} outputs at batch {BATCH} runs "
                  f"the forward GEMM M={OUT_FEATURES}, N={BATCH}, K={IN_FEATURES} in float16. What is its "
                  "arithmetic intensity, in FLOP per byte (pk.arithmetic_intensity)?"),
        solve=lambda: arithmetic_intensity(OUT_FEATURES, BATCH, IN_FEATURES, "float16"),
        unit="FLOP/byte", fmt="{:,.1f}",
        hint="FLOPs are 2·M·N·K; bytes are 2 per element of A (M×K), B (K×N) and C (M×N).",
        mistakes=(
            (lambda: arithmetic_intensity(OUT_FEATURES, BATCH, IN_FEATURES, "float16") / 2,
             "half the intensity: a multiply-add is two FLOPs (2·M·N·K), and a float16 element two bytes, "
             "not four."),
            (_ai_without_output,
             "the output C (M×N) is written to memory too: count its bytes with those of A and B."),
        ),
    ),
    Exercise(
        id="background-2", chapter=CHAPTER,
        question=(f"From which batch on is the forward GEMM of that {IN_FEATURES}→{OUT_FEATURES} layer "
                  "math-bound on an H100-SXM in float16 (pk.math_bound_batch)?"),
        solve=lambda: math_bound_batch(IN_FEATURES, OUT_FEATURES, device_spec("H100-SXM"), "float16"),
        unit="samples", rel_tol=0, close_tol=0.10, fmt="{:,.0f}",
        hint="find the batch at which the GEMM's intensity reaches the H100's ops:byte ratio.",
        mistakes=(
            (lambda: math_bound_batch(IN_FEATURES, OUT_FEATURES, device_spec("V100-SXM2"), "float16"),
             f"that is the batch for a V100, whose ridge is at {_ridge('V100-SXM2')}; the H100's is at "
             f"{_ridge('H100-SXM')}."),
            (lambda: math_bound_batch(IN_FEATURES, OUT_FEATURES, device_spec("A100-SXM4-80GB"), "float16"),
             f"that is the batch for an A100 (ridge at {_ridge('A100-SXM4-80GB')}); the H100's ridge is at "
             f"{_ridge('H100-SXM')}."),
        ),
    ),
    Exercise(
        id="background-3", chapter=CHAPTER,
        question=("How long does the ReLU of NVIDIA's Table 1 (64·1024·1024 float16 elements, "
                  "pk.roofline.nvidia_example_operations) take on an H100-SXM by the roofline model "
                  "(pk.roofline_time), in microseconds?"),
        solve=lambda: roofline_time(_relu().flops, _relu().bytes, device_spec("H100-SXM"), "float16")[0] * 1e6,
        unit="microseconds", fmt="{:,.3g}",
        hint="the time is the larger of FLOPs ÷ peak and bytes ÷ bandwidth.",
        mistakes=(
            (lambda: _relu().flops / device_spec("H100-SXM").peak_flop_s("float16") * 1e6,
             "that is the math time alone: ReLU is memory-bound, so bytes ÷ bandwidth sets its time."),
            (lambda: _relu().bytes / 2 / device_spec("H100-SXM").mem_bandwidth * 1e6,
             "that counts only the read: ReLU writes its output too, as many bytes again."),
        ),
    ),
    Exercise(
        id="background-4", chapter=CHAPTER,
        question=(f"A kernel launches {BLOCKS} equal blocks, one block per SM at a time, on an H100-SXM "
                  f"({device_spec('H100-SXM').sms} SMs). What percentage of the SM-time is busy "
                  "(pk.wave_quantization with tile=(1, 1))?"),
        solve=lambda: _utilization("H100-SXM"),
        unit="%", fmt="{:.1f}",
        hint="count the waves; the last one runs only the blocks left over.",
        mistakes=(
            (lambda: _utilization("V100-SXM2"),
             f"that is a V100, with {device_spec('V100-SXM2').sms} SMs: the H100 has {device_spec('H100-SXM').sms}, "
             "so the blocks left over run alone in a second wave."),
        ),
    ),
]
