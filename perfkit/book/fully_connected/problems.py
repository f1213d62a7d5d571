"""The problems of chapter 03_fully_connected, with answers computed by perfkit."""

from __future__ import annotations

import math

from ...devices import device_spec
from ...dtypes import itemsize
from ...padding import padded_linear
from ...quantization import pad_to_multiple, wave_quantization
from ...roofline import gemm_bytes, gemm_flops, math_bound_batch, roofline_time
from ...shapes import linear_gemms
from ..exercise import Exercise

CHAPTER = "03_fully_connected"

#: GPT-2 small's linear layers per block (inputs, outputs): qkv, attention output, MLP up, MLP down.
GPT2_BLOCK = ((768, 2304), (768, 768), (768, 3072), (3072, 768))
GPT2_LAYERS, GPT2_HEAD, GPT2_TOKENS = 12, (768, 50257), 8 * 1024
#: Problem 3's layer: 1001 inputs padded to a multiple of 8, 4096 outputs, 8192 rows, float16.
P3_IN, P3_OUT, P3_ROWS, P3_DTYPE = 1001, 4096, 8192, "float16"
#: Problem 5: the forward GEMM of a layer with 4096 inputs at batch 4096, 256×128 tiles on an H100.
P5_OUT, P5_BATCH, P5_TILE = 1032, 4096, (256, 128)


def _a100_batch(in_features: int = 1024, out_features: int = 4096, gpu: str = "A100-SXM4-80GB") -> int:
    return math_bound_batch(in_features, out_features, device_spec(gpu))


def _flops(layers, tokens: int = GPT2_TOKENS) -> int:
    """Forward FLOPs of ``layers`` ((inputs, outputs) pairs) on ``tokens`` rows, by pk.linear_gemms."""
    return sum(gemm_flops(*linear_gemms(tokens, i, o)["forward"]) for i, o in layers)


def _head_share(block=GPT2_BLOCK, layers: int = GPT2_LAYERS) -> float:
    head = _flops([GPT2_HEAD])
    return head / (layers * _flops(block) + head)


def _copy_share(read_too: bool = True) -> float:
    """Roofline time of padding the input (read it, write it wider) ÷ that of the padded forward GEMM."""
    h100, padded = device_spec("H100-SXM"), pad_to_multiple(P3_IN, 8)
    copy_bytes = itemsize(P3_DTYPE) * P3_ROWS * (padded + (P3_IN if read_too else 0))
    copy_s, _ = roofline_time(0, copy_bytes, h100, P3_DTYPE)
    M, N, K = linear_gemms(P3_ROWS, padded, P3_OUT)["forward"]
    gemm_s, _ = roofline_time(gemm_flops(M, N, K), gemm_bytes(M, N, K, P3_DTYPE), h100, P3_DTYPE)
    return copy_s / gemm_s


def _loss_gap(multiple: int = 64, vocab: int = 1001) -> float:
    """Cross-entropy of equal logits with the padding kept, minus with it masked (nats)."""
    import torch
    import torch.nn.functional as F

    fast = padded_linear(torch.nn.Linear(48, vocab), multiple, keep_padding=True)
    logits = torch.zeros(1, fast.padded_out_features, dtype=torch.float64)  # equal logits: a uniform start
    target = torch.tensor([0])
    wide = F.cross_entropy(logits, target)
    masked = F.cross_entropy(fast.mask_padding(logits.clone()), target)
    return float(wide - masked)


def _waves(out_features: int) -> int:
    M, N, _ = linear_gemms(P5_BATCH, 4096, out_features)["forward"]
    return wave_quantization(M, N, P5_TILE, device_spec("H100-SXM").sms).waves


def _same_waves(limit: int = 4096) -> int:
    """The largest output count ≤ ``limit`` whose forward GEMM runs in as many waves as P5_OUT's."""
    return max(o for o in range(P5_OUT, limit + 1) if _waves(o) == _waves(P5_OUT))


def _same_tiles() -> int:
    M, N, _ = linear_gemms(P5_BATCH, 4096, P5_OUT)["forward"]
    tiles = wave_quantization(M, N, P5_TILE, 1).tiles
    return max(o for o in range(P5_OUT, 4097) if wave_quantization(o, N, P5_TILE, 1).tiles == tiles)


EXERCISES: list[Exercise] = [
    Exercise(
        "fc-1", CHAPTER,
        "From which batch is a 1024 → 4096 layer's forward GEMM math-bound in FP16 on an A100-SXM4-80GB "
        "(pk.math_bound_batch)?",
        _a100_batch, unit="rows", rel_tol=0, close_tol=0.10, fmt="{:,.0f}",
        hint="pk.math_bound_batch(in_features, out_features, pk.device_spec('A100-SXM4-80GB')).",
        mistakes=((lambda: _a100_batch(4096, 4096), "that is the 4096 → 4096 layer; this one has 1024 inputs"),
                  (lambda: _a100_batch(gpu="V100-SXM2"), "that is the V100's ridge; use the A100-SXM4-80GB's"),
                  (lambda: _a100_batch(gpu="H100-SXM"), "that is the H100's ridge; use the A100-SXM4-80GB's"))),
    Exercise(
        "fc-2", CHAPTER,
        "GPT-2 small (12 blocks, width 768) on 8192 tokens: what fraction of the FLOPs of its linear layers "
        "(qkv, attention output, MLP up and down, and the 768 → 50257 head) is the head's?",
        _head_share, rel_tol=0.01, close_tol=0.10, fmt="{:.3f}",
        hint="sum 2·M·N·K of each layer's forward GEMM (pk.linear_gemms), 12 times per block; the "
             "backward doubles every term, so the fraction is the same.",
        mistakes=((lambda: 100 * _head_share(), "give a fraction (0.25 for 25 %), not a percentage"),
                  (lambda: _head_share(GPT2_BLOCK[2:]), "you counted only the MLP; the attention's qkv "
                                                        "and output projections are linear layers too"),
                  (lambda: _head_share(layers=1), "GPT-2 small has 12 blocks, each with its four layers"))),
    Exercise(
        "fc-3", CHAPTER,
        "pk.padded_linear(nn.Linear(1001, 4096), 8) pads its input to 1008 features at every call. On 8192 "
        "rows in FP16 on an H100, how long does that copy take as a fraction of the padded forward GEMM "
        "(both by the roofline, pk.roofline_time)?",
        _copy_share, rel_tol=0.01, close_tol=0.10, fmt="{:.3f}",
        hint="the copy reads 8192×1001 elements and writes 8192×1008, 2 bytes each, at no FLOPs; "
             "the GEMM is the forward one of pk.linear_gemms(8192, 1008, 4096).",
        mistakes=((lambda: _copy_share(read_too=False), "the copy also reads the unpadded input, "
                                                        "not only writes the padded one"),)),
    Exercise(
        "fc-4", CHAPTER,
        "Section 4's toy language model pads 1001 logits to a multiple of 64 with keep_padding=True. When all "
        "real logits are equal, by how many nats is cross_entropy of the wide logits higher than of the "
        "logits masked with mask_padding?",
        _loss_gap, unit="nats", rel_tol=0.01, close_tol=0.10, fmt="{:.4g}",
        hint="with equal logits the loss is ln of the number of classes that share the probability.",
        mistakes=((lambda: _loss_gap() / math.log(2), "that is in bits; cross_entropy uses the natural log"),
                  (lambda: _loss_gap(multiple=8), "the toy model pads to a multiple of 64 (1024 logits), "
                                                  "not 8"))),
    Exercise(
        "fc-5", CHAPTER,
        "With 256×128 tiles on an H100's 132 SMs, a layer with 4096 inputs at batch 4096 and 1032 outputs "
        "needs two waves. What is the largest output count whose forward GEMM still runs in that many "
        "waves (pk.wave_quantization)?",
        _same_waves, unit="output features", rel_tol=0, close_tol=0.10, fmt="{:,.0f}",
        hint="tiles = ceil(outputs / 256) · ceil(4096 / 128); a wave holds 132 tiles.",
        mistakes=((_same_tiles, "that keeps the same number of tiles; a wave holds 132 tiles, so more "
                                "tiles fit in the same two waves"),
                  (lambda: pad_to_multiple(P5_OUT, 64), "that is the next multiple of 64, not the end "
                                                         "of the second wave"))),
]
