"""The problems of chapter 06_memory_limited, with answers computed by perfkit.

Every answer comes from the byte model (:func:`perfkit.memory_model.layer_bytes`,
:func:`perfkit.memory_model.memory_time`), the GEMM model and the fusion experiment's byte count
(:func:`perfkit.book.memory_limited.fusion.tail_bytes`), on datasheet specs: nothing is measured.
"""

from __future__ import annotations

import math

from ...devices import device_spec
from ...ceilings import kernel_latency_s
from ...gemm_model import predict_gemm_time
from ...memory_model import layer_bytes, memory_time, predict_layer_time
from ...shapes import linear_gemms
from ..exercise import Exercise
from .fusion import tail_bytes

CHAPTER = "06_memory_limited"

_H100, _H200 = "H100-SXM", "H200"
_MLP = (8, 1024, 4096, 16384)  # batch, sequence, model width, MLP width
_MAPS = (64, 56, 56)  # channels, height, width of ResNet-50's first stage
_BN = (256, 64, 56, 56)
_POOL = (32, 64, 112, 112)
_WINDOW = dict(kernel_size=3, stride=2, padding=1)
_SMALL = (128, 16, 16, 32)  # the small CNN's first block: batch, channels in, out, 32² images
_PASSES = ("forward", "backward")


# Problem 1: a GELU beside the GEMM that feeds it.
def _gelu_s(width: int) -> float:
    """GELU forward + backward on the (batch, sequence, width) bfloat16 tensor, H100 seconds."""
    b, t, _, _ = _MLP
    return sum(predict_layer_time("gelu", (b, t, width), "bfloat16", device_spec(_H100), pass_=p)
               for p in _PASSES)


def _gemm_s(passes: tuple[str, ...] = ("forward", "dgrad", "wgrad")) -> float:
    """The MLP's first Linear (model width → MLP width) on batch × sequence tokens, H100 seconds."""
    b, t, d, f = _MLP
    gemms = linear_gemms(b * t, d, f)
    return sum(predict_gemm_time(*gemms[p], "bfloat16", device_spec(_H100)) for p in passes)


def _gelu_share() -> float:
    return _gelu_s(_MLP[3]) / _gemm_s()


# Problem 2: the largest launch-bound batch.
def _knee_batch(spec: str = _H200, per_image_pass_bytes: bool = True) -> int:
    """The largest batch N whose ReLU forward on N × 64 × 56 × 56 bfloat16 moves fewer bytes than
    ``spec``'s knee (latency × achievable bandwidth)."""
    ceilings = device_spec(spec).ceilings
    knee = kernel_latency_s(ceilings) * ceilings.bandwidth
    per_image = layer_bytes("relu", (1, *_MAPS), "bfloat16")
    if not per_image_pass_bytes:  # the slip: only the input tensor's bytes
        per_image //= 2
    return math.ceil(knee / per_image) - 1


# Problem 3: persistent batch norm.
def _bn_saving_us(passes: tuple[str, ...] = _PASSES) -> float:
    h100 = device_spec(_H100)
    return 1e6 * sum(predict_layer_time("batchnorm", _BN, "bfloat16", h100, pass_=p, persistent=False)
                     - predict_layer_time("batchnorm", _BN, "bfloat16", h100, pass_=p) for p in passes)


# Problem 4: smaller pooling indices.
def _pool_backward(indices_itemsize: int) -> int:
    return layer_bytes("maxpool", _POOL, "bfloat16", pass_="backward", indices_itemsize=indices_itemsize,
                       **_WINDOW)


def _pool_shrink_percent() -> float:
    return 100 * (1 - _pool_backward(2) / _pool_backward(8))


def _index_shrink_percent() -> float:
    """The slip: the shrink of the index bytes alone (what the forward pass writes beyond its data)."""
    def index_bytes(i: int) -> int:
        return (layer_bytes("maxpool", _POOL, "bfloat16", indices_itemsize=i, **_WINDOW)
                - layer_bytes("maxpool", _POOL, "bfloat16", indices_itemsize=0, **_WINDOW))
    return 100 * (1 - index_bytes(2) / index_bytes(8))


# Problem 5: fusing a small network's batch norm and ReLU.
def _tail_shape() -> tuple[int, int, int, int]:
    batch, _, out, size = _SMALL
    return (batch, out, size, size)


def _fusion_saving_us() -> float:
    """Eager (4 kernels: batch norm and ReLU, forward and backward) minus fused (one kernel per
    pass), H100 microseconds."""
    h100 = device_spec(_H100)
    eager = sum(memory_time(layer_bytes(k, _tail_shape(), "float16", pass_=p), h100)
                for k in ("batchnorm", "relu") for p in _PASSES)
    forward = tail_bytes("conv_bn_relu", _SMALL, "float16", fused=True)
    backward = tail_bytes("conv_bn_relu", _SMALL, "float16", phase="forward+backward", fused=True) - forward
    return 1e6 * (eager - memory_time(forward, h100) - memory_time(backward, h100))


def _fusion_bytes_only_us() -> float:
    """The slip: the bytes fusion saves at the achievable bandwidth, without the launches saved."""
    saved = (tail_bytes("conv_bn_relu", _SMALL, "float16", phase="forward+backward")
             - tail_bytes("conv_bn_relu", _SMALL, "float16", phase="forward+backward", fused=True))
    return 1e6 * saved / device_spec(_H100).ceilings.bandwidth


EXERCISES: list[Exercise] = [
    Exercise(
        "memory-1", CHAPTER,
        "A transformer MLP's first Linear maps 4096 to 16384 features on 8 × 1024 bfloat16 tokens; GELU "
        "follows on its output. On an H100, what is GELU's time (forward + backward) divided by the "
        "Linear's three GEMMs (forward, dgrad, wgrad)?",
        _gelu_share, unit="", rel_tol=0.01, close_tol=0.10, fmt="{:.3f}",
        hint="GELU acts on the GEMM's output, 8 × 1024 × 16384; pk.predict_layer_time for both of its "
             "passes, pk.predict_gemm_time for each GEMM of pk.linear_gemms(8192, 4096, 16384).",
        mistakes=((lambda: _gelu_s(_MLP[2]) / _gemm_s(), "GELU acts on the Linear's output (16384 features), "
                   "not on its input (4096)."),
                  (lambda: _gelu_s(_MLP[3]) / _gemm_s(("forward",)), "a training step runs all three GEMMs "
                   "(forward, dgrad, wgrad), not only the forward one."))),
    Exercise(
        "memory-2", CHAPTER,
        "On an H200, what is the largest batch N for which a bfloat16 ReLU's forward pass on "
        "N × 64 × 56 × 56 feature maps moves fewer bytes than the knee (latency × achievable bandwidth)?",
        _knee_batch, unit="images", rel_tol=0, close_tol=0.10, fmt="{:,.0f}",
        hint="knee = pk.gemm_model.DEFAULT_MODEL.latency_s × pk.achievable_ceilings(spec).bandwidth; "
             "one image's forward moves pk.layer_bytes('relu', (1, 64, 56, 56), 'bfloat16').",
        mistakes=((lambda: _knee_batch(_H100), "that is the H100's knee; the H200's memory is faster, so its "
                   "knee is larger."),
                  (lambda: _knee_batch(per_image_pass_bytes=False), "a ReLU's forward pass reads x and writes "
                   "y: count both tensors (pk.layer_bytes does)."))),
    Exercise(
        "memory-3", CHAPTER,
        "For the training-mode batch norm of section 3 (256 × 64 × 56 × 56, bfloat16), how many "
        "microseconds does a persistent kernel save over a two-pass one on an H100, forward plus backward, "
        "by the byte model?",
        _bn_saving_us, unit="microseconds", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint="pk.predict_layer_time('batchnorm', shape, 'bfloat16', h100, pass_=p, persistent=k) for both "
             "passes p and both values of k.",
        mistakes=((lambda: _bn_saving_us(("forward",)), "a training step also runs the backward pass, where "
                   "the two-pass kernel reads x and dy twice."),)),
    Exercise(
        "memory-4", CHAPTER,
        "ResNet's max pool (3×3, stride 2, padding 1) on 32 × 64 × 112 × 112 bfloat16 saves an int64 "
        "index per output. By what percentage would its backward pass shrink with 2-byte indices?",
        _pool_shrink_percent, unit="%", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint="pk.layer_bytes('maxpool', shape, 'bfloat16', pass_='backward', indices_itemsize=i, "
             "kernel_size=3, stride=2, padding=1) for i = 8 and i = 2.",
        mistakes=((_index_shrink_percent, "that is the shrink of the indices alone; the backward pass also "
                   "reads dy and writes dx, which do not shrink."),)),
    Exercise(
        "memory-5", CHAPTER,
        "In the small CNN at batch 128, the first block's 3×3 convolution (16 → 16 channels, 32 × 32 "
        "images, float16) is followed by batch norm and ReLU. How many microseconds does fusing them save "
        "per training step (forward + backward) on an H100, by the byte model?",
        _fusion_saving_us, unit="microseconds", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint="Eager: pk.memory_time of each op's pk.layer_bytes, both passes (four kernels). Fused: "
             "fusion.tail_bytes('conv_bn_relu', (128, 16, 16, 32), 'float16', fused=True) for the forward "
             "kernel and the rest of phase='forward+backward' for the backward one, each through pk.memory_time.",
        mistakes=((_fusion_bytes_only_us, "that counts the bytes saved but not the kernels: fusion also "
                   "launches two kernels instead of four, and each launch costs the model's latency."),)),
]
