"""The labs' problems (one per lab), on the GPU a workshop room most often has: a free Colab T4.

Every answer is computed by perfkit (:mod:`perfkit.book.problems` lists them with the chapters').
"""

from __future__ import annotations

from ...devices import device_spec
from ...memory_model import layer_bytes, predict_layer_time
from ...roofline import math_bound_batch
from ...transformer import predict_decode_time
from ..exercise import Exercise
from ..gemm.problems import TILE, first_two_wave_n

T4 = "T4"
#: Lab 2: rows of the GEMM (four rows of 256-row tiles).
WAVE_M = 1024
#: Lab 3: elements of the ReLU (2^24, FP16: 32 MiB read and written).
RELU_ELEMENTS = 2**24
#: Lab 4: LLaMA-2-7B in FP16 (13.5 GB: it fits a T4's 16 GB), 1024 tokens of context.
LLAMA = dict(params=6_738_415_616, layers=32, kv_heads=32, head_dim=128)
CONTEXT = 1024


def _relu_us(spec: str = T4) -> float:
    return predict_layer_time("relu", (RELU_ELEMENTS,), "float16", device_spec(spec)) * 1e6


def _tokens_per_s(spec: str = T4, bandwidth: str = "achievable") -> float:
    p = predict_decode_time(batch=1, context=CONTEXT, dtype="float16", spec=device_spec(spec), **LLAMA)
    return 1 / (p.time_s if bandwidth == "achievable" else p.datasheet_s)


EXERCISES: list[Exercise] = [
    Exercise(
        "lab-1", "labs/01_roofline",
        "A T4's datasheet gives 65 TFLOP/s in FP16 and 320 GB/s. From which batch is the forward GEMM of a "
        "4096 → 4096 linear layer math-bound on it in FP16?",
        lambda: math_bound_batch(4096, 4096, device_spec(T4), "float16"), unit="samples", rel_tol=0,
        close_tol=0.05, fmt="{:,.0f}",
        hint="pk.math_bound_batch(4096, 4096, pk.device_spec('T4'), 'float16'); or find the smallest batch "
             "whose pk.arithmetic_intensity(4096, batch, 4096, 'float16') reaches the T4's ops_per_byte.",
        mistakes=((lambda: math_bound_batch(4096, 4096, device_spec("H100-SXM"), "float16"),
                   "that is the H100's crossing (ridge 295 FLOP/B); the T4's ridge is 203 FLOP/B."),
                  (lambda: round(device_spec(T4).ops_per_byte("float16")),
                   "that is the ridge itself; the intensity is 4096·N / (4096 + 2N), not N."))),
    Exercise(
        "lab-2", "labs/02_gemm",
        f"A T4 has 40 SMs. With 256×128 tiles and M = {WAVE_M}, what is the smallest N whose tiles need a "
        "second wave?",
        lambda: first_two_wave_n(device_spec(T4).sms, WAVE_M), unit="columns", rel_tol=0, close_tol=0.05,
        fmt="{:,.0f}",
        hint=f"M = {WAVE_M} is {WAVE_M // TILE[0]} rows of tiles, so a wave of 40 tiles holds "
             f"{40 // (WAVE_M // TILE[0])} tile columns; a partial column counts as a whole one. Check with "
             f"pk.wave_quantization({WAVE_M}, N, (256, 128), 40).",
        mistakes=((lambda: first_two_wave_n(device_spec(T4).sms, WAVE_M) - 1,
                   "at that N the tile columns hold exactly 40 tiles: one full wave."),
                  (lambda: first_two_wave_n(device_spec("H100-SXM").sms, WAVE_M),
                   "that is the H100's answer (132 SMs); the T4 has 40."))),
    Exercise(
        "lab-3", "labs/03_memory_bound",
        f"By perfkit's byte model, how many microseconds does the forward ReLU of 2^24 FP16 elements take on "
        "a T4?",
        _relu_us, unit="microseconds", rel_tol=0.01, close_tol=0.10, fmt="{:,.0f}",
        hint="pk.predict_layer_time('relu', (2**24,), 'float16', pk.device_spec('T4')): it reads and writes "
             "every element once, at the T4's achievable bandwidth, plus a kernel's fixed cost.",
        mistakes=((lambda: layer_bytes("relu", (RELU_ELEMENTS,), "float16") / device_spec(T4).mem_bandwidth * 1e6,
                   "that uses the datasheet's 320 GB/s and no fixed cost; the model streams at the achievable "
                   "bandwidth, 90 % of it."),
                  (lambda: RELU_ELEMENTS * 2 / device_spec(T4).mem_bandwidth * 1e6,
                   "that counts the bytes read only; a ReLU writes as many as it reads."))),
    Exercise(
        "lab-4", "labs/04_transformers",
        f"LLaMA-2-7B in FP16 (6.74e9 parameters, 32 layers, 32 heads of 128) decodes one sequence with "
        f"{CONTEXT} tokens of context on a T4. How many tokens per second does perfkit predict?",
        _tokens_per_s, unit="tokens/s", rel_tol=0.01, close_tol=0.10, fmt="{:,.1f}",
        hint=f"pk.predict_decode_time(6_738_415_616, 1, {CONTEXT}, layers=32, kv_heads=32, head_dim=128, "
             "dtype='float16', spec=pk.device_spec('T4')): a step reads every weight and the KV cache once; "
             "tokens/s is 1 / its time_s at batch 1.",
        mistakes=((lambda: _tokens_per_s(bandwidth="datasheet"),
                   "that uses the datasheet's 320 GB/s (datasheet_s); the model streams at the achievable "
                   "bandwidth."),
                  (lambda: _tokens_per_s("H200"), "that is the H200's answer; the T4 has 320 GB/s, not 4.8 TB/s."))),
]
