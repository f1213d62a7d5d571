"""The problems of chapter 05_convolutions, with answers computed by perfkit.

Every answer is a function of :func:`perfkit.conv_gemms`, :func:`perfkit.linear_gemms`,
:func:`perfkit.explain_gemm`, :func:`perfkit.gemm_bytes` and the byte model
(:func:`perfkit.layer_bytes`, :func:`perfkit.predict_layer_time`) on the H100's datasheet.
"""

from __future__ import annotations

from ...devices import device_spec
from ...dtypes import itemsize
from ...gemm_model import explain_gemm
from ...memory_model import predict_layer_time
from ...roofline import gemm_bytes
from ...shapes import conv_gemms, linear_gemms
from ..exercise import Exercise

CHAPTER = "05_convolutions"
H100 = "H100-SXM"
#: §1's ResNet-50 3×3 layer: N, C, H, W, K, R, S, stride, padding.
LAYER_3X3 = (32, 64, 56, 56, 64, 3, 3, 1, 1)


def _linear_batch() -> int:
    """The batch at which a 256→64 linear layer has the GEMMs of a 1×1, 256→64 convolution on 32 × 56²."""
    gemms = conv_gemms(32, 256, 56, 56, 64, 1, 1)
    M = gemms["forward"][0]  # N·P·Q: one row per output pixel
    linear = linear_gemms(M, 256, 64)
    for phase, (m, n, k) in gemms.items():  # the same GEMMs, each transposed (row-major vs column-major)
        if sorted((m, n, k)) != sorted(linear[phase]):
            raise RuntimeError(f"{phase}: conv GEMM {(m, n, k)} is not the linear layer's {linear[phase]}")
    return M


def _traffic_ratio() -> float:
    """Bytes the GEMM model charges the forward GEMM (im2col A, filters B, output C) ÷ the bytes an implicit
    GEMM must move (input, filters and output, each once), FP16."""
    N, C, H, W, K, R, S, st, p = LAYER_3X3
    M, Ng, Kg = conv_gemms(N, C, H, W, K, R, S, st, p)["forward"]
    implicit = itemsize("float16") * (N * C * H * W + K * C * R * S + M * K)  # output N·K·P·Q = M·K
    return gemm_bytes(M, Ng, Kg, "float16") / implicit


def _im2col_ratio() -> float:
    """The im2col matrix ÷ the input alone: R·S."""
    N, C, H, W, K, R, S, st, p = LAYER_3X3
    M, _, Kg = conv_gemms(N, C, H, W, K, R, S, st, p)["forward"]
    return M * Kg / (N * C * H * W)


def _forward_s(c: int) -> float:
    """The model's forward time of §2's layer (3×3 on 56², batch 32) with C = K = ``c`` on an H100, FP16."""
    return explain_gemm(*conv_gemms(32, c, 56, 56, c, 3, 3, 1, 1)["forward"], "float16", device_spec(H100)).predicted_s


def _largest_step(low: int = 200, high: int = 300) -> int:
    """The C in ``low``…``high`` whose forward time jumps most over C − 1's."""
    return max(range(low + 1, high + 1), key=lambda c: _forward_s(c) / _forward_s(c - 1))


#: Problem 4: a batch of 256 RGB images of 224², FP16, padded to 4 channels.
BATCH_RGB = (256, 3, 224, 224)


def _pad_us(read_channels: int = 3) -> float:
    """µs the byte model gives F.pad on an H100: read the 3-channel batch, write the 4-channel one."""
    n, c, h, w = BATCH_RGB
    return 1e6 * predict_layer_time("elementwise", (n, c + 1, h, w), "float16", device_spec(H100),
                                    read_elements=n * read_channels * h * w)


def _pad_datasheet_us() -> float:
    """The same bytes at the datasheet's bandwidth, without latency (the slip of using the peak)."""
    n, c, h, w = BATCH_RGB
    return 1e6 * (n * (2 * c + 1) * h * w * itemsize("float16")) / device_spec(H100).mem_bandwidth


def _convert_share(copies: int = 2, layers: int = 1) -> float:
    """% of the forward time of ``layers`` §1 layers spent on ``copies`` NCHW ↔ NHWC conversions (H100, FP16)."""
    N, C, H, W, K, R, S, st, p = LAYER_3X3
    spec = device_spec(H100)
    conv = explain_gemm(*conv_gemms(N, C, H, W, K, R, S, st, p)["forward"], "float16", spec).predicted_s
    copy = predict_layer_time("elementwise", (N, C, H, W), "float16", spec)  # input and output: same size here
    return 100 * copies * copy / (layers * conv + copies * copy)


EXERCISES: list[Exercise] = [
    Exercise("conv-1", CHAPTER,
             "A 1×1 convolution, 256 → 64 channels, runs on 56×56 images at batch 32. At what batch does a "
             "256 → 64 linear layer have the same three GEMMs (up to transposition)?",
             _linear_batch, unit="rows", rel_tol=0, close_tol=0, fmt="{:,.0f}",
             hint="a 1×1 convolution is a linear layer applied to every pixel: count the rows of its forward GEMM "
                  "with pk.conv_gemms.",
             mistakes=((lambda: 32, "32 is the number of images; the linear layer's batch is every output pixel "
                                    "of every image, N·P·Q."),
                       (lambda: 56 * 56, "that is one image's pixels; multiply by the 32 images."))),
    Exercise("conv-2", CHAPTER,
             "For §1's 3×3 layer (batch 32, 64 → 64 channels, 56², FP16), how many times the bytes that an "
             "implicit GEMM must move (input, filters and output, each once) does the GEMM model charge the "
             "forward pass (pk.gemm_bytes of its GEMM)?",
             _traffic_ratio, unit="×", rel_tol=0.02, close_tol=0.1, fmt="{:.2f}",
             hint="the model's bytes are (M·K + K·N + M·N) elements of pk.conv_gemms' forward GEMM; the implicit "
                  "GEMM's are N·C·H·W + K·C·R·S + N·K·P·Q.",
             mistakes=((_im2col_ratio, "that is the im2col matrix over the input alone (R·S); the filters and "
                                       "the output are counted once by both, which dilutes the ratio."),)),
    Exercise("conv-3", CHAPTER,
             "For §2's layer (3×3 on 56², batch 32, C = K, FP16) on an H100, at which C between 201 and 300 does "
             "the GEMM model's forward time jump most over that of C − 1?",
             _largest_step, unit="channels", rel_tol=0, close_tol=0, fmt="{:.0f}",
             hint="sweep C with pk.explain_gemm on the forward GEMM of pk.conv_gemms and compare each time with "
                  "the previous one; look at .tiles and .tile where it jumps.",
             mistakes=((lambda: _largest_step() - 1, "that is the last C before the step, which still fits the "
                                                     "tiles; the jump is one channel later."),)),
    Exercise("conv-4", CHAPTER,
             "A stem padded with pk.padded_conv2d(stem, in_multiple=4) gets 3-channel batches of 256 images of "
             "224² in FP16, so it pads them with F.pad on every step. How many microseconds per step does the "
             "byte model (pk.predict_layer_time of an 'elementwise' copy on an H100) give that padding?",
             _pad_us, unit="microseconds", rel_tol=0.02, close_tol=0.1, fmt="{:.1f}",
             hint="F.pad reads the 3-channel batch and writes a 4-channel one: pass the 4-channel shape and "
                  "read_elements for the 3-channel input.",
             mistakes=((lambda: _pad_us(read_channels=4), "F.pad reads only the 3 real channels; the fourth is "
                                                          "written as zeros, not read."),
                       (_pad_datasheet_us, "that is the datasheet's peak bandwidth with no launch latency; the byte "
                                           "model uses the achievable bandwidth and adds the latency."))),
    Exercise("conv-5", CHAPTER,
             "A network of §1's 3×3 layers runs NHWC convolutions but keeps its activations NCHW, so it converts "
             "each layer's input to channels_last and its output back. On an H100 in FP16 (the GEMM model for the "
             "convolution, the byte model for each copy), what percentage of a layer's forward time is conversion?",
             _convert_share, unit="%", rel_tol=0.02, close_tol=0.1, fmt="{:.1f}",
             hint="per layer: two 'elementwise' copies of a 32×64×56×56 tensor (pk.predict_layer_time) beside "
                  "the forward GEMM's pk.explain_gemm(...).predicted_s.",
             mistakes=((lambda: _convert_share(copies=1), "that counts one conversion per layer; the output is "
                                                          "converted back too."),
                       (lambda: _convert_share(copies=1, layers=50), "that is converting once for 50 layers, the "
                                                                     "cheap way this problem contrasts with."))),
]
