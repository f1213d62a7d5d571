"""What a convolution runs besides its implicit GEMM: layout transposes, padded channels, per-image GEMMs.

cuDNN's Tensor Core convolution kernels work in NHWC (channels last) on channels padded to whole
vectors. What our H200 recordings show a convolution costs, pass by pass (forward, dgrad, wgrad):

- **NCHW input on Tensor Cores** (``conv_layout``: NCHW 2.0× NHWC for 3×3 layers, the same for a 1×1):
  cuDNN transposes what the pass reads into NHWC (the input or output gradient, and the filters, KCRS →
  KRSC) and what it writes back into NCHW: three more memory-bound kernels, each reading and writing its
  tensor once at the transposes' bandwidth, a fraction of a streaming copy's (strided reads of C-long
  rows): :func:`nchw_transposes`. Fitted on ``conv_layout`` (the NCHW − NHWC time of its 3×3 layers).
- **A 1×1, stride-1, unpadded convolution in NCHW** is a plain GEMM per image, ``Y[n] (K×PQ) = W (K×C) ·
  X[n] (C×HW)``, run on the NCHW tensors as they are (no transpose: ``conv_layout``'s 1×1 layer runs
  as fast in NCHW as in NHWC). Its tiles cannot span images, so a small image (7², 14²) leaves tiles
  part-empty: a batch of ``N`` GEMMs (:func:`direct_nchw`, :func:`conv_gemm`). cuDNN takes the faster of
  that and the transposes (``conv_deepbench``'s 7² 1×1 layer runs at the transposed path's time).
- **Fewer channels than one vector** (a first layer's 3): the kernels read each filter tap's channels as
  8- or 16-byte vectors, so cuDNN pads C to 4 (16-bit types) in one more kernel that copies the input with
  6-byte rows: a narrow copy well below a streaming copy's bandwidth (``conv_first_layer``: C = 3 costs
  26 µs more than C = 4 padded once, on a 9.6 MB input). The padded layer then runs NVIDIA's 4-channel
  first-layer kernels: an aligned implicit GEMM of K = 4·R·S (:func:`kernel_channels`).
- **The A operand**: an implicit GEMM gathers it from the input, each element read once from memory (the
  filter taps' reuse served on chip), not an im2col copy; but a tap's channels that are not whole 16-byte
  vectors (a first layer's, an unaligned C) are gathered tap by tap: the im2col volume (:func:`implicit_gemm_s`;
  ``conv_params``: 39 % → 5 % median error against charging the im2col matrix; ``conv_channels``: 32 % → 19 %).

Not modelled (left as measured residuals, no cause found in the recordings): cuDNN's NHWC dgrad kernels
chosen without autotuning run 2.5–10× slower than the GEMM model (``conv_passes``, timed through
``torch.nn.grad.conv2d_input``; NCHW dgrad, ``conv_deepbench``, runs at the model's time); first layers
other than the 7×7/2 stem on 4 channels (3×3/1 on 224² images; 8 channels) and their weight gradients run
1.4–2× slower than their GEMM. Constants are per architecture family (:data:`CONV_EVIDENCE`); a family
without a recording uses the nearest one's, labelled assumed. :func:`fit_hopper` re-derives them from the
recordings. Units: bytes, seconds, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .architectures import evidence_of
from .dtypes import itemsize, output_itemsize
from .quantization import alignment

__all__ = ["CONV_EVIDENCE", "CONV_LAYOUTS", "DIRECT_LAYOUTS", "ConvEvidence", "conv_evidence", "conv_gemm",
           "conv_tensors", "direct_nchw", "fit_hopper", "implicit_gemm_s", "kernel_channels", "narrow_channels",
           "nchw_transposes", "pad_channels_copy"]

#: Layouts (:mod:`perfkit.gemm_alignment`) of an implicit-GEMM convolution's passes in NHWC: forward A = the
#: input's taps (C contiguous), B = the filters KRSC, C = the output (K contiguous); dgrad A = dy's taps,
#: B = the filters, C = dx; wgrad A = the input's taps transposed, B = dy, C = dW.
CONV_LAYOUTS = {"forward": "NTN", "dgrad": "NNN", "wgrad": "TNT"}
#: The same for the per-image GEMMs of a 1×1 convolution run on NCHW tensors (the pixels contiguous).
DIRECT_LAYOUTS = {"forward": "TTT", "dgrad": "TNT", "wgrad": "NTT"}


@dataclass(frozen=True)
class ConvEvidence:
    """Per-architecture bandwidths of the copies cuDNN adds around a convolution, as fractions of the
    achievable streaming bandwidth (``spec.ceilings.bandwidth``)."""

    family: str
    transpose_fraction: float  # NCHW ↔ NHWC transposes
    narrow_copy_fraction: float  # the channel-padding copy of a 3-channel input (6-byte rows)
    source: str


#: Fitted by :func:`fit_hopper` on our H200 recordings (``conv_layout``: the 3×3 layers' NCHW − NHWC times,
#: 3.1 TB/s of 4.26; ``conv_first_layer``: the 7×7/2 stem with C = 3 against C = 4 padded once, 1.1 TB/s).
CONV_EVIDENCE: dict[str, ConvEvidence] = {
    "hopper": ConvEvidence("hopper", 0.73, 0.27, "fitted on our H200 recordings (conv_layout, conv_first_layer; "
                                                 "2026-11-26)"),
}


def conv_evidence(spec: Any) -> tuple[ConvEvidence, str]:
    """``(evidence, label)`` for ``spec``'s family, or the nearest family's, labelled as assumed."""
    return evidence_of(spec, CONV_EVIDENCE)


def kernel_channels(C: int, dtype: Any) -> int:
    """Input channels the Tensor Core kernel runs: ``C`` itself, or 4 for fewer (16-bit types: the
    first-layer kernels read 8-byte vectors; cuDNN pads the input). Unaligned wider ``C`` run unpadded, on
    kernels the GEMM model's alignment slowdown prices."""
    return 4 if C < 4 and itemsize(dtype) == 2 else C


def narrow_channels(C: int, dtype: Any) -> bool:
    """Whether a filter tap's channels are not loaded as whole 16-byte vectors: they fit in one (a first
    layer's 3, 4 or 8 channels), or they are not a multiple of 16 bytes (the kernel falls back to narrower
    loads: ``conv_channels``' unaligned C)."""
    nbytes = kernel_channels(C, dtype) * itemsize(dtype)
    return nbytes <= 16 or nbytes % 16 != 0


def implicit_gemm_s(e: Any, nbytes: int, narrow: bool) -> float:
    """Seconds of one implicit-GEMM convolution pass from :func:`perfkit.explain_gemm`'s prediction ``e`` of
    its GEMM: the GEMM's math (tiles, waves, alignment) against the convolution's own ``nbytes`` (its
    tensors once: the kernel gathers A from the input, each element read once from memory, the filter taps'
    reuse served on chip: not an im2col copy), plus the GEMM's fixed cost. With ``narrow`` channels
    (:func:`narrow_channels`: a tap's channels one 16-byte vector or less, or not whole vectors) A is gathered
    tap by tap and costs the im2col volume, as the GEMM model counts its A operand (at its fallback kernel's
    rate when the channels are unaligned)."""
    memory_s = nbytes / e.bandwidth_ceiling * e.alignment_slowdown
    if narrow:
        memory_s = max(memory_s, e.memory_s)
    return max(e.math_s, memory_s) + e.launch_overhead_s


def _pair(v: Any) -> tuple[int, int]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def direct_nchw(p: dict) -> bool:
    """Whether an NCHW convolution is a plain per-image GEMM on its tensors: 1×1, stride 1, no padding."""
    return (p["R"], p["S"]) == (1, 1) and _pair(p.get("stride", 1)) == (1, 1) and _pair(p.get("padding", 0)) == (0, 0)


def conv_tensors(p: dict, dtype: Any) -> dict[str, int]:
    """Bytes of a convolution's input ``x``, filters ``w`` and output ``y`` (per group summed)."""
    s, out = itemsize(dtype), output_itemsize(dtype)
    w = s * p["K"] * (p["C"] // p.get("groups", 1)) * p["R"] * p["S"]
    return {"x": s * p["N"] * p["C"] * p["H"] * p["W"], "w": w, "y": out * p["N"] * p["K"] * p["P"] * p["Q"]}


def conv_gemm(p: dict, pass_: str, dtype: Any, *, direct: bool = False) -> tuple[int, int, int, int]:
    """``(M, N, K, batch)`` of the GEMM(s) a pass runs (one group; ``batch`` GEMMs of M×N×K in one launch).

    NHWC (or transposed into it): forward ``(N·P·Q, K, C'·R·S)``, dgrad ``(N·P·Q, C', K·R·S)`` (as many
    multiply-adds as forward at any stride), wgrad ``(C'·R·S, K, N·P·Q)``, with ``C'`` =
    :func:`kernel_channels` and the reduction rounded up to whole vectors below 16 bytes of channels.
    ``direct``, an NCHW 1×1 run on its tensors (:func:`direct_nchw`): a batch of N per-image GEMMs (wgrad:
    each image's contribution to dW, then summed)."""
    g = p.get("groups", 1)
    C, K = p["C"] // g, p["K"] // g
    Cr = kernel_channels(C, dtype)
    rs, npq = p["R"] * p["S"], p["N"] * p["P"] * p["Q"]
    if direct:
        pq = p["P"] * p["Q"]
        return {"forward": (pq, K, C, p["N"]), "dgrad": (pq, C, K, p["N"]), "wgrad": (C, K, pq, p["N"])}[pass_]
    red = Cr * rs
    if Cr * itemsize(dtype) < 16:  # a first-layer kernel: the reduction padded to whole vectors, aligned
        a = alignment(dtype)
        red = -(-red // a) * a
    return {"forward": (npq, K, red, 1), "dgrad": (npq, Cr, K * rs, 1), "wgrad": (red, K, npq, 1)}[pass_]


def nchw_transposes(p: dict, pass_: str, dtype: Any) -> list[tuple[str, int]]:
    """``(tensor, bytes read + written)`` of each transpose an NCHW pass run in NHWC adds: forward reads x and
    w, writes y; dgrad reads dy and w, writes dx; wgrad reads x and dy, writes dw."""
    t = conv_tensors(p, dtype)
    names = {"forward": ("x", "w", "y"), "dgrad": ("dy", "w", "dx"), "wgrad": ("x", "dy", "dw")}[pass_]
    size = {"x": t["x"], "dx": t["x"], "w": t["w"], "dw": t["w"], "y": t["y"], "dy": t["y"]}
    return [(n, 2 * size[n]) for n in names]


def pad_channels_copy(p: dict, pass_: str, dtype: Any) -> int:
    """Bytes read + written by cuDNN's channel-padding copy of the input (0 when none): forward and wgrad
    read the input, padded from C to :func:`kernel_channels`; dgrad does not (the input's gradient of a
    first layer is not computed; when it is, it is written at C)."""
    C = p["C"] // p.get("groups", 1)
    Cr = kernel_channels(C, dtype)
    if Cr == C or pass_ == "dgrad":
        return 0
    x = conv_tensors(p, dtype)["x"]
    return x + x * Cr // C


def fit_hopper(layout, first_layer, bandwidth_Bps: float, latency_s: float) -> dict[str, float]:
    """Re-derive :data:`CONV_EVIDENCE`'s fractions from ``conv_layout`` and ``conv_first_layer`` recordings
    (``bandwidth_Bps``, ``latency_s``: the calibration's streaming bandwidth and memory-bound kernel latency).

    Transposes: the NCHW − NHWC time of each layer that is neither a direct 1×1 nor a 3-channel stem,
    minus three kernels' latency, against the bytes the three transposes move (least squares through 0).
    Narrow copy: the C = 3 stem's time less the C = 4 one padded once (7×7/2; forward, and forward + wgrad
    with two copies), less one latency per copy, against the bytes copied."""
    conv = layout[(layout["op"] == "forward") & (~layout["cudnn_benchmark"].astype(bool))]
    xs, ys = [], []
    for _, g in conv.groupby("layer"):
        r = g.iloc[0]
        p = {k: r[k] for k in ("N", "C", "H", "W", "K", "R", "S", "P", "Q")}
        p.update(stride=int(r["stride"]), padding=int(r["padding"]))
        if direct_nchw(p) or p["C"] < 4:  # a 1×1 runs on NCHW as it is; the stem pads in its transpose
            continue
        t = g.set_index("layout")["time_s"]
        moved = sum(b for _, b in nchw_transposes(p, "forward", r["dtype"]))
        xs.append(moved)
        ys.append(t["NCHW"] - t["NHWC"] - 3 * latency_s)
    xs, ys = np.array(xs, float), np.array(ys, float)
    transpose_Bps = float(xs @ xs / (xs @ ys))
    stem = first_layer[(first_layer["stem"] == "7×7/2") & (first_layer["input_padding"] != "every step")]
    narrow = []
    for phase, copies in (("forward", 1), ("forward+backward", 2)):
        t = stem[stem["phase"] == phase].set_index("channels")["time_s"]
        r = stem.iloc[0]
        x = 2 * r["N"] * 3 * r["H"] * r["W"]  # bytes of the 3-channel input (16-bit)
        narrow.append(copies * (x + x * 4 // 3) / (t[3] - t[4] - copies * latency_s))
    return {"transpose_fraction": transpose_Bps / bandwidth_Bps, "transpose_Bps": transpose_Bps,
            "narrow_copy_fraction": float(np.mean(narrow)) / bandwidth_Bps, "narrow_copy_Bps": float(np.mean(narrow))}
