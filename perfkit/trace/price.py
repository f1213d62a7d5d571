"""Each op instance of a trace priced by perfkit's models and held to its measured kernels: the rule that
explains the gap, and the fix.

:class:`TracePricer` prices an op's :class:`~.opmap.Work` exactly as the advisor prices a pass
(:class:`perfkit.advisor.price.Pricer`: the GEMM model, the implicit-GEMM convolution with cuDNN's NCHW
transposes, the fused-attention model, the byte model of memory-bound ops) on the trace's device.
:func:`diagnose_op` then names **one cause per op**, the first that holds, in the book's terms:

=================  ===========================================================================
rule               when, and the fix (its saving: measured seconds minus the model's time of the fix)
=================  ===========================================================================
``host_transfer``  only host↔GPU copies: pinned memory and ``non_blocking=True`` (not priced)
``communication``  an NCCL/RCCL kernel: overlap it with compute (not priced)
``precision``      a float32 GEMM or convolution on a Tensor Core GPU: bf16 autocast (or TF32)
``first_conv``     a convolution on 3 input channels: pad them to 4 or 8
``layout``         cuDNN NCHW↔NHWC transposes among the op's kernels: channels_last (saves them)
``alignment``      a GEMM dimension or a channel count not a multiple of 16 bytes: pad it
``quantization``   under 75 % of the launched tile work useful: dims that fill tiles and waves (not priced)
``small_batch``    a GEMM below the ridge point (FLOP/byte): more rows per step (not priced)
``attention_math`` QKᵀ, softmax and PV as separate kernels (:mod:`.patterns`): fused attention (SDPA)
``fusion``         a memory-bound op in a chain of them between GEMMs: fuse (torch.compile)
``launch_bound``   an op of a few kernel latencies after as long an idle GPU: CUDA graphs, more work per launch
``model_gap``      slower than the model by over 1.5× with none of the above: the kernel, not the shape
``memory_bound``   a memory-bound op near its bandwidth time: fewer bytes (fusion, lower precision)
``unmapped``       perfkit has no model of the op (its time is still counted)
=================  ===========================================================================

``predicted_s`` is in a profiler's terms: the model's time less the launch gap its event-timed latencies
include and a kernel's duration does not (:data:`LAUNCH_GAPS`: measured on our H200 for Hopper; other
families use it labelled assumed, :func:`launch_gap`). Units: seconds, FLOP, bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from ..architectures import evidence_of
from ..attention_model import BACKENDS
from ..ceilings import TENSOR_CORE_DTYPES
from ..devices import DeviceSpec
from ..gemm_alignment import leading_dims
from ..quantization import alignment, pad_to_multiple
from .opmap import Work

__all__ = ["CLASSES", "GAP", "KERNEL_FLOOR_S", "LAUNCH_GAPS", "LAUNCH_GAP_S", "LAUNCH_LATENCIES", "LaunchGap",
           "TRACE_RULES", "TracePricer", "diagnose_op", "kernel_class", "launch_gap"]

#: Rule id → what it says (one cause per op, the first that holds; see the module table).
TRACE_RULES: dict[str, str] = {
    "communication": "a collective (NCCL/RCCL) kernel: overlap it with compute",
    "host_transfer": "a copy between host and GPU: pinned memory, non_blocking, overlapped with compute",
    "precision": "float32 math on a Tensor Core GPU: bf16 autocast or TF32",
    "first_conv": "a convolution on 3 input channels: pad them to 4 or 8",
    "layout": "NCHW convolution paying cuDNN's transposes: channels_last",
    "alignment": "a GEMM dimension or channel count not a multiple of 16 bytes: pad it",
    "quantization": "tiles or waves mostly empty: resize to fill them",
    "small_batch": "a GEMM below the ridge point: more rows (tokens, images) per step",
    "attention_math": "attention as two batched GEMMs around a softmax that writes the scores: fuse it (SDPA)",
    "fusion": "a chain of memory-bound ops between GEMMs: fuse them (torch.compile)",
    "launch_bound": "a few microseconds of work per launch: CUDA graphs or more work per kernel",
    "model_gap": "slower than the model by over 1.5x for this shape: the kernel chosen, not the shape",
    "memory_bound": "time set by bytes at the bandwidth ceiling: move fewer bytes",
    "unmapped": "an op perfkit does not model (its time is still counted)",
}

#: Classes of GPU time: GEMMs and convolutions, attention, memory-bound ops, collectives, host↔GPU copies (an op
#: perfkit does not map is classed by its kernels' names, :func:`kernel_class`).
CLASSES = ("gemm", "attention", "memory", "communication", "transfer")

#: Measured ÷ predicted above which an op with no other cause is reported as ``model_gap``.
GAP = 1.5

@dataclass(frozen=True)
class LaunchGap:
    """A kernel's fixed cost that a trace's kernel duration leaves out (``gap_s``) and the shortest kernel
    (``floor_s``), in seconds, with where they come from. perfkit's latencies are timed with events around
    plain launches, which include the GPU's gap between one launch and the next; a profiler's kernel
    duration runs from the kernel's first block to its last."""

    gap_s: float
    floor_s: float
    source: str


#: Per architecture family (:mod:`perfkit.architectures`). Hopper: our H200 profile
#: (``data/nvidia-h200/device_profile.json``, 2026-11-26) timed a one-element add at 3.81 µs launched plainly
#: and 0.876 µs inside a CUDA graph (no launch gap): the difference is the gap, the graph's time the floor.
#: No other family is measured: they take the nearest family's (an AMD one its NVIDIA contemporary's),
#: labelled assumed (:func:`launch_gap`).
LAUNCH_GAPS: dict[str, LaunchGap] = {
    "hopper": LaunchGap(3.808e-6 - 0.876e-6, 0.876e-6,
                        "measured on our H200, 2026-11-26: a one-element add launched plainly less in a CUDA graph"),
}

#: Hopper's launch gap and kernel floor, seconds (:data:`LAUNCH_GAPS`).
LAUNCH_GAP_S = LAUNCH_GAPS["hopper"].gap_s
KERNEL_FLOOR_S = LAUNCH_GAPS["hopper"].floor_s


def launch_gap(spec: DeviceSpec) -> tuple[LaunchGap, str]:
    """``(gap, label)``: :data:`LAUNCH_GAPS`' entry for ``spec``'s family, or the nearest family's with a label
    saying it is assumed (an AMD GPU's and a Blackwell's are Hopper's, not measured)."""
    return evidence_of(spec, LAUNCH_GAPS)


#: An op whose kernels take at most this many kernel latencies, after the GPU idled at least as long, is
#: ``launch_bound``: the host did not issue work as fast as the GPU ran it.
LAUNCH_LATENCIES = 2.0

_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|sendrecv|all_?to_?all|cross_device_reduce",
                   re.IGNORECASE)
_HOST_COPY = re.compile(r"Memcpy (HtoD|DtoH)|Memcpy .*(Host|Pageable|Pinned)", re.IGNORECASE)
#: NCHW↔NHWC transposes around a convolution: cuDNN's, and MIOpen's (``batched_transpose_32x16_half``)
_TRANSPOSE = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|batched_transpose_\d", re.IGNORECASE)
#: GEMM kernels: cuBLAS (``sm90_xmma_gemm_…``, ``nvjet_…``), CUTLASS kernels (not a ``cutlass::bfloat16_t``
#: template argument of another kernel), TensorRT-LLM's batched GEMMs (``bmm_E4m3_…``), ROCm's Tensile /
#: hipBLASLt (``Cijk_…``), Composable Kernel's (``ck::…gemm…``), vLLM's ROCm skinny GEMMs (``wvSplitK``)
#: and Inductor's GEMM templates (``triton_tem_fused_mm_0``)
_GEMM_NAMES = re.compile(r"gemm|xmma|nvjet|cutlass(?!::(bfloat16_t|half_t|float_|tfloat32_t|Array))|\bbmm_|"
                         r"Cijk_|cublas|hipblaslt|wmma|s16816|matmul|wvSplitK|triton_tem_fused_\w*mm",
                         re.IGNORECASE)
_ATTN_NAMES = re.compile(r"flash|fmha|attention|attn|sdpa", re.IGNORECASE)
#: Kernels whose names say attention or convolution without being one: a KV-cache write, FlashInfer's
#: norms, activations and sampling, a dtype conversion (``_typeConvert``)
_NOT_ATTN = re.compile(r"reshape_and_cache|flashinfer::(norm|activation|sampling)", re.IGNORECASE)
_CONV_NAMES = re.compile(r"conv(?!ert)|implicit_?gemm|cudnn|miopen|winograd|fft|im2col|Im[23]d2Col", re.IGNORECASE)


def kernel_class(name: str) -> str:
    """A kernel's class from its name alone (for kernels no op explains, and traces without shapes):
    communication, attention, gemm (GEMMs and convolutions, CUDA's and ROCm's), or memory (transposes
    included)."""
    if _COMM.search(name):
        return "communication"
    if _TRANSPOSE.search(name):
        return "memory"
    if _ATTN_NAMES.search(name) and not _NOT_ATTN.search(name):
        return "attention"
    if _GEMM_NAMES.search(name) or _CONV_NAMES.search(name):
        return "gemm"
    return "memory"


class TracePricer:
    """Prices op instances on ``spec`` (one advisor :class:`Pricer` per dtype, cached)."""

    def __init__(self, spec: DeviceSpec) -> None:
        self.spec = spec
        self.launch_gap, self.launch_gap_source = launch_gap(spec)
        self._pricers: dict = {}
        self._rows: dict[tuple, dict[str, Any]] = {}

    def pricer(self, dtype: str):
        """The advisor's :class:`~perfkit.advisor.price.Pricer` for ``dtype`` (the advisor imports torch: here,
        when a trace is first priced)."""
        from ..advisor.price import Pricer

        if dtype not in self._pricers:
            self._pricers[dtype] = Pricer(dtype, self.spec, training=True)
        return self._pricers[dtype]

    @property
    def latency_s(self) -> float:
        return self.pricer("bfloat16").latency_s

    def row(self, w: Work, dtype: str | None = None) -> dict[str, Any]:
        """The model's row for ``w`` (``predicted_s``, ``bound`` and the GEMM's tile figures) in ``dtype``
        (default: the op's own); cached, as a trace repeats its shapes every step."""
        dtype = dtype or w.dtype
        key = (w.family, w.kind, w.pass_, w.M, w.N, w.K, w.batch, repr(sorted(w.params.items())), dtype)
        if key not in self._rows:
            self._rows[key] = self._row(w, dtype)
        return self._rows[key]

    def _row(self, w: Work, dtype: str) -> dict[str, Any]:
        from ..advisor.ops import Gemm, Op, passes

        p = self.pricer(dtype)
        if w.family == "gemm":
            return p.gemm_row(Gemm(int(w.M), int(w.N), int(w.K), int(w.batch), layout=w.params.get("layout", "")))
        if w.family == "conv":
            op = Op(0, "", "", "conv", {**{k: v for k, v in w.params.items() if k != "passes"}, "input_grad": True,
                                        "weight_grad": True, "reads_input": False})
            work = [x for x in passes(op, True) if x[0] in w.params["passes"]]
            rows = p.conv_rows(op, work)
            return {"predicted_s": sum(r["predicted_s"] for r in rows), "launches": len(rows),
                    "bound": max(rows, key=lambda r: r["predicted_s"])["bound"],
                    **{k: rows[0].get(k, math.nan) for k in ("tile_efficiency", "wave_utilization")}}
        if w.family == "attention":
            op = Op(0, "", "", "attention", w.params)
            pass_ = "forward" if w.pass_ == "forward" else "backward"
            parts = [(part, g) for ps, part, g in passes(op, True) if ps == pass_]
            # the fused kernel the trace ran; unfused attention ("fused", :mod:`.patterns`): what SDPA would run
            ran = w.kind if w.kind in BACKENDS[:3] else None
            return p.attention_row(parts, pass_, w.params, backend=ran)
        params = {k: v for k, v in w.params.items() if k != "shape"}
        return p.memory_row(w.kind, w.params["shape"], params, w.pass_)

    def kernel_s(self, w: Work, dtype: str | None = None) -> float:
        """What a profiler's kernel durations should add up to for ``w``: :meth:`row`'s seconds less the launch
        gap of each kernel the model counts (:func:`launch_gap` of the device), never below its kernel floor
        each."""
        row = self.row(w, dtype)
        launches = row.get("launches", 1)
        return max(row["predicted_s"] - launches * self.launch_gap.gap_s, launches * self.launch_gap.floor_s)

    def predict(self, w: Work, kernels: list[str]) -> dict[str, Any]:
        """:meth:`row` in the precision the kernels ran (a float32 GEMM whose kernel names say TF32: tf32), its
        ``predicted_s`` in a profiler's terms (:meth:`kernel_s`)."""
        dtype = w.dtype
        if dtype == "float32" and any("tf32" in k.lower() for k in kernels) and "tf32" in self.spec.peaks:
            dtype = "tf32"
        out = dict(self.row(w, dtype))
        out["predicted_s"] = self.kernel_s(w, dtype)
        out["model_dtype"] = dtype
        return out


def _unaligned(w: Work) -> list[tuple[str, int, int]]:
    """(dimension, value, padded value) of every GEMM dimension or channel count off 16 bytes."""
    a = alignment(w.dtype)
    if w.family == "conv":
        g = w.params["groups"]
        dims = {"input channels": w.params["C"] // g, "output channels": w.params["K"] // g}
        if w.params["C"] == 3:
            return []
    elif w.family == "gemm":
        lead = leading_dims(w.params.get("layout", ""))  # only leading dimensions need aligning
        dims = {d: int(getattr(w, d)) for d in ("M", "N", "K") if lead is None or d in lead}
    else:
        return []
    return [(k, v, pad_to_multiple(v, a)) for k, v in dims.items() if v % a]


def _padded(w: Work, pads: list[tuple[str, int, int]]) -> Work:
    if w.family == "gemm":
        new = {k: p for k, _, p in pads}
        return replace(w, M=new.get("M", w.M), N=new.get("N", w.N), K=new.get("K", w.K))
    g = w.params["groups"]
    new = {"input channels": "C", "output channels": "K"}
    params = dict(w.params)
    for k, _, p in pads:
        params[new[k]] = p * g
    return replace(w, params=params)


def _low_precision(spec: DeviceSpec) -> str | None:
    """The 16-bit dtype whose Tensor Core peak is over twice float32's on ``spec`` (bf16 first), else None."""
    fp32 = spec.peaks.get("float32", math.inf)
    return next((d for d in ("bfloat16", "float16") if spec.peaks.get(d, 0.0) > 2 * fp32), None)


def diagnose_op(w: Work | None, time_s: float, kernels: list[str], pricer: TracePricer | None,
                in_chain: bool = False, kernel_times_s: list[float] | None = None,
                gap_before_s: float = 0.0) -> dict[str, Any]:
    """``predicted_s``, ``bound``, ``rule``, ``fix`` and ``saving_s`` of one op instance measured at ``time_s``
    with kernels named ``kernels`` taking ``kernel_times_s`` (``in_chain``: a memory-bound op next to other
    memory-bound ops; ``gap_before_s``: how long the GPU was idle before its first kernel). A rule whose fix the model prices is reported only where it saves time: the measured
    seconds above the model's time of the fixed op."""
    out: dict[str, Any] = {"predicted_s": math.nan, "bound": "", "rule": "", "fix": "", "saving_s": math.nan,
                           "tile_efficiency": math.nan, "wave_utilization": math.nan}
    if kernels and all(_HOST_COPY.search(k) for k in kernels):
        pageable = any("Pageable" in k for k in kernels)
        return {**out, "bound": "transfer", "rule": "host_transfer",
                "fix": "pin the host memory (DataLoader(pin_memory=True)) and copy with non_blocking=True"
                if pageable else "overlap it with compute (non_blocking=True; prefetch the next batch)"}
    if any(_COMM.search(k) for k in kernels):
        return {**out, "bound": "communication", "rule": "communication",
                "fix": "overlap it with compute (DDP gradient buckets, FSDP prefetch)"}
    if w is None:
        return {**out, "bound": "unmapped", "rule": "unmapped",
                "fix": "perfkit does not model this op: its time is counted, not explained"}
    if pricer is None:
        return out
    row = pricer.predict(w, kernels)
    pred = float(row["predicted_s"])
    out.update(predicted_s=pred, bound=row["bound"], tile_efficiency=row.get("tile_efficiency", math.nan),
               wave_utilization=row.get("wave_utilization", math.nan))

    def saves(rule: str, fix: str, saving_s: float) -> dict[str, Any] | None:
        return {**out, "rule": rule, "fix": fix, "saving_s": saving_s} if saving_s > 0 else None

    tensor = w.family in ("gemm", "conv")
    low = _low_precision(pricer.spec)
    found = None
    if tensor and w.dtype == "float32" and row["model_dtype"] == "float32" and low:
        found = saves("precision", f"run it in {low} (torch.autocast)" + (" or allow TF32" if "tf32" in
                      pricer.spec.peaks else ""), time_s - pricer.kernel_s(w, low))
    if found is None and w.family == "conv" and w.params["C"] == 3 and w.pass_ == "forward":
        p = w.params
        patches = p["R"] > 1 and list(p["stride"]) == [p["R"], p["S"]][-len(p["stride"]):]
        fix = (f"a patch embedding on 3 channels ({p['R']}x{p['S']} at stride {p['R']}): pad them to 4 or 8, or "
               "run it as one GEMM (unfold + linear)" if patches else "pad the 3 input channels to 4 (stride 2) or 8")
        found = saves("first_conv", fix, time_s - pricer.kernel_s(replace(w, params={**p, "C": 4})))
    transposes = sum(t for k, t in zip(kernels, kernel_times_s or [0.0] * len(kernels)) if _TRANSPOSE.search(k))
    if found is None and w.family == "conv" and transposes:
        found = saves("layout", "model.to(memory_format=torch.channels_last): no NCHW↔NHWC transposes", transposes)
    pads = _unaligned(w) if w.dtype in TENSOR_CORE_DTYPES else []
    if found is None and tensor and pads:
        text = ", ".join(f"{k} {v} → {p}" for k, v, p in pads)
        found = saves("alignment", f"pad {text} (multiples of 16 bytes)",
                      time_s - pricer.kernel_s(_padded(w, pads)))
    if found is not None:
        return found
    useful = out["tile_efficiency"] * out["wave_utilization"]
    if tensor and useful < 0.75 and row["bound"] == "math":  # not priced: the dims may be the model's own
        return {**out, "rule": "quantization", "fix": f"{useful:.0%} of the launched tile work is useful: a token "
                "count (batch × sequence) or width that fills whole waves would use the rest (not priced: "
                "a width a residual stream shares cannot change alone)"}
    cl = pricer.spec.ceilings
    if tensor and w.flops / w.bytes < cl.flop_s_for(row["model_dtype"]) / cl.bandwidth:
        return {**out, "rule": "small_batch", "fix": "more rows per step (tokens, images): below the ridge point "
                                                     "a larger batch costs little more time"}
    if w.family == "memory" and in_chain:
        return {**out, "rule": "fusion", "fix": "fuse this chain of memory-bound ops (torch.compile)"}
    if time_s <= LAUNCH_LATENCIES * pricer.latency_s and gap_before_s >= time_s:
        return {**out, "rule": "launch_bound", "fix": "the GPU idled at least this long before it: CUDA graphs "
                                                      "(torch.compile mode='reduce-overhead') or more work per launch"}
    if time_s > GAP * pred:
        return {**out, "rule": "model_gap", "saving_s": time_s - pred,
                "fix": f"{time_s / pred:.1f}x the model for this shape: check the kernel chosen "
                       "(torch.compile max-autotune, another backend)"}
    if w.family == "memory":
        return {**out, "rule": "memory_bound", "fix": "move fewer bytes: fuse with its neighbours, lower precision"}
    return out
