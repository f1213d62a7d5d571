"""The problems of chapter 02_gemm, with answers computed by perfkit."""

from __future__ import annotations

import math

from ...devices import device_spec
from ...gemm_model import predict_gemm_time
from ...quantization import is_aligned, tile_quantization, wave_quantization
from ...roofline import gemm_bytes, gemm_flops, math_bound_batch, roofline_time
from ..exercise import Exercise

CHAPTER = "02_gemm"

H100 = "H100-SXM"
TILE = (256, 128)
#: Problems 1 and 4: NVIDIA's wave example moved to the H100 (12 rows of 256×128 tiles).
WAVE_M, WAVE_K = 3072, 4096
#: Problem 4's layout: nn.Linear's forward (perfkit.gemm_alignment.LINEAR_LAYOUTS), where N (the tokens)
#: is no operand's leading dimension, so one column more changes the waves and not the alignment.
WAVE_LAYOUT = "NTT"
#: Problem 3: K before and after padding, in a 4096×4096 output.
PAD_M, PAD_N, PAD_K = 4096, 4096, 4095
#: Problem 5: Baidu's minibatch study, M = K = 2560.
SMALL_MK, SMALL_N, LARGE_N = 2560, 16, 128
EFFECTS = ("alignment", "tile quantization", "wave quantization", "memory-bound")


def first_two_wave_n(sms: int, M: int = WAVE_M) -> int:
    """The smallest N whose TILE tiles need two waves at ``M`` rows on ``sms`` SMs."""
    n = 1
    while wave_quantization(M, n, TILE, sms).waves < 2:
        n += 1
    return n


def _padding_removes() -> str:
    """Which of EFFECTS differs between K = 4095 and K = 4096 (the others are equal for both)."""
    spec = device_spec(H100)
    shapes = [(PAD_M, PAD_N, k) for k in (PAD_K, PAD_K + 1)]
    measures = {
        "alignment": lambda m, n, k: is_aligned("float16", m, n, k),
        "tile quantization": lambda m, n, k: tile_quantization(m, n, TILE).efficiency,
        "wave quantization": lambda m, n, k: wave_quantization(m, n, TILE, spec.sms).utilization,
        "memory-bound": lambda m, n, k: roofline_time(gemm_flops(m, n, k), gemm_bytes(m, n, k, "float16"),
                                                      spec, "float16")[1],
    }
    changed = [name for name in EFFECTS if len({measures[name](*s) for s in shapes}) > 1]
    if len(changed) != 1:
        raise RuntimeError(f"padding K should change exactly one effect, changed {changed}")
    return changed[0]


def _step_ratio() -> float:
    spec = device_spec(H100)
    n = first_two_wave_n(spec.sms)
    return (predict_gemm_time(WAVE_M, n, WAVE_K, "float16", spec, TILE, layout=WAVE_LAYOUT)
            / predict_gemm_time(WAVE_M, n - 1, WAVE_K, "float16", spec, TILE, layout=WAVE_LAYOUT))


def _roofline_ratio() -> float:
    spec = device_spec(H100)

    def t(n: int) -> float:
        return roofline_time(gemm_flops(SMALL_MK, n, SMALL_MK), gemm_bytes(SMALL_MK, n, SMALL_MK, "float16"),
                             spec, "float16")[0]

    return t(LARGE_N) / t(SMALL_N)


EXERCISES: list[Exercise] = [
    Exercise(
        "gemm-1", CHAPTER,
        "An H100 SXM has 132 SMs. With 256×128 tiles and M = 3072, what is the smallest N whose tiles "
        "need a second wave?",
        lambda: first_two_wave_n(device_spec(H100).sms), unit="columns", rel_tol=0, close_tol=0.05,
        fmt="{:,.0f}",
        hint="M = 3072 gives 12 rows of tiles, so one wave of 132 tiles holds 11 tile columns; a partial "
             "tile column counts as a whole one. Check with pk.wave_quantization(3072, N, (256, 128), 132).",
        mistakes=((lambda: first_two_wave_n(device_spec(H100).sms) - 1,
                   "at that N the 11 tile columns hold exactly 132 tiles, one full wave."),
                  (lambda: first_two_wave_n(device_spec(H100).sms) + TILE[1] - 1,
                   "that fills the 12th tile column, but a single extra column already opens it: a partly "
                   "empty tile counts as a whole one."),
                  (lambda: first_two_wave_n(device_spec("A100-SXM4-80GB").sms),
                   "that is the A100's answer (108 SMs); the H100 SXM has 132.")),
    ),
    Exercise(
        "gemm-2", CHAPTER,
        "At what batch size does the forward GEMM of a 4096→4096 fully-connected layer in FP16 reach the "
        "H100 SXM's ridge point?",
        lambda: math_bound_batch(4096, 4096, device_spec(H100), "float16"), unit="samples", rel_tol=0,
        close_tol=0.05, fmt="{:,.0f}",
        hint="the forward GEMM is pk.linear_gemms(batch, 4096, 4096)['forward']; find the smallest batch "
             "whose pk.arithmetic_intensity reaches device_spec('H100-SXM').ops_per_byte('float16').",
        mistakes=((lambda: math_bound_batch(4096, 4096, device_spec("V100-SXM2"), "float16"),
                   "that is the V100's crossing (ridge 139 FLOP/B); the H100's ridge is 295 FLOP/B."),
                  (lambda: math.ceil(device_spec(H100).ops_per_byte("float16")),
                   "that is the ridge itself: the intensity is close to the batch only when the batch is "
                   "much smaller than 4096; here it is 4096·N / (4096 + 2N)."))),
    Exercise(
        "gemm-3", CHAPTER,
        "Padding K from 4095 to 4096 in a 4096×4096×K FP16 GEMM adds 0.02 % more work but can save time. "
        "Which effect of this chapter does it remove?",
        _padding_removes, choices=EFFECTS,
        hint="tiles and waves cut the M×N output; which rule is about every one of M, N and K?",
        mistakes=((lambda: "tile quantization",
                   "tiles cut the M×N output, so pk.tile_quantization(4096, 4096, tile) does not depend on K."),
                  (lambda: "wave quantization",
                   "the number of tiles, and so of waves, depends on M and N only."),
                  (lambda: "memory-bound",
                   "both shapes have an intensity near 1,365 FLOP/B, far above the H100's ridge: math-bound."))),
    Exercise(
        "gemm-4", CHAPTER,
        "With forced 256×128 tiles on an H100 SXM (M = 3072, K = 4096, FP16, stored as nn.Linear's forward "
        "stores them: layout 'NTT', N the tokens), how many times longer does perfkit's model predict the "
        "GEMM of Problem 1's N takes than the one with a column less?",
        _step_ratio, rel_tol=0.02, close_tol=0.15, fmt="{:.2f}×",
        hint="pk.predict_gemm_time(3072, N, 4096, 'float16', spec, tile=(256, 128), layout='NTT') for both "
             "N (in 'NN' an odd N is also an unaligned leading dimension); the figure's slider shows the "
             "same wave step.",
        mistakes=((lambda: (first_two_wave_n(device_spec(H100).sms)
                            / (first_two_wave_n(device_spec(H100).sms) - 1)),
                   "that is the ratio of the work; the 12 extra tiles run in a second wave that costs as "
                   "long as the first."),)),
    Exercise(
        "gemm-5", CHAPTER,
        "By the plain roofline on an H100 SXM, how many times longer does an FP16 GEMM with M = K = 2560 "
        "take at N = 128 than at N = 16?",
        _roofline_ratio, rel_tol=0.01, close_tol=0.05, fmt="{:.3f}×",
        hint="pk.roofline_time(pk.gemm_flops(M, N, K), pk.gemm_bytes(M, N, K, 'float16'), spec, 'float16') "
             "for both N; check which bound each is under.",
        mistakes=((lambda: LARGE_N / SMALL_N,
                   "that is the ratio of the work, the answer if both were math-bound; at this size both "
                   "are memory-bound, so their times follow the bytes, and the weights dominate those."),)),
]
