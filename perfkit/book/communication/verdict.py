"""The verdicts of chapter 08_communication, computed from the frames the chapter shows.

The frames, by name: ``collective_sizes`` (:data:`EXPERIMENTS`), from GPUs, live or recorded (a run of
gloo on a CPU is never a "now"), and DeepBench's 2017 all-reduce under :data:`PUBLISHED`, the "then":
8 Tesla P100s in one PCIe node (:func:`~perfkit.book.communication.analysis.deepbench_frame`), the
P100's FP32 peak for its compute. Where nothing was measured, :func:`alternatives` gives each rule
XLA's 2025 table of 8 H100s on an NVSwitch (published), else the α-β model's prediction for 8 H100s on
NVLink 4 (:func:`perfkit.collectives.explain_collective`, ring). Where a rule needs compute as well
(overlap, tensor parallelism), it comes from the datasheet GPU at its achievable FLOP/s.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ...devices import DeviceSpec, device_spec
from ...published_data import published_or_none
from ..evidence import as_measured, frame_of, from_model, from_published, modern, prefer, today
from ..frames import gpu_rows, recorded, spec_of
from ..verdict import Band, Evidence, Finding, finding, instead_of
from .analysis import (BUCKET_BYTES, SMALL_BYTES, bucket_share, deepbench_frame, gpu_count_ratio, latency_gain,
                       predicted_collectives, xla_frame)
from .training import DP_BATCH, TP_TOKENS, overlap_ratio, tensor_parallel_ratio

TITLE = "Beyond one GPU: communication"
CHAPTER = "08_communication"

#: The experiments whose GPU frames the findings read.
EXPERIMENTS: tuple[str, ...] = ("collective_sizes",)
#: The key of ``frames`` that holds DeepBench's 2017 all-reduce (the "then"), and the GPU it reads.
PUBLISHED, THEN_GPU = "deepbench_allreduce", "P100-PCIe"
#: The published tables of current GPUs the verdicts can rest on (see :func:`alternatives`).
MODERN: tuple[str, ...] = ("xla_h100_collectives",)
#: The effects :func:`effects` computes, one per rule, in the order of the verdict table.
RULES: tuple[str, ...] = ("latency", "gpu_count", "buckets", "overlap", "tensor_parallel")
#: The GPU counts the rules compare (one 8-GPU node, against pairs), and the dtypes of then and now.
RANKS, FEW = 8, 2
THEN_DTYPE, NOW_DTYPE = "float32", "bfloat16"
#: Two-sided claims, each judged as a factor either way of what it claims (one-sided thresholds would
#: pass a ring that gains bandwidth with the GPU count, or a bucket faster than a large message):
#: "does not depend on the GPU count" and "near the bus bandwidth of a large message" both claim 1,
#: hold within ×1.25 either way (the 0.8 the rules always held at, mirrored) and are gone beyond ×2 (the
#: 0.5 they were gone below). The α-β model's ring on NVLink 4 gives 8 GPUs 0.997 of the bus bandwidth of
#: 2 at its largest message: independence, as claimed, is well inside the band.
INDEPENDENT = Band(1.0, holds_within=1.25, gone_beyond=2.0)


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live) frames that findings() reads, and DeepBench's P100 all-reduce
    (None where the published-data folder lacks it)."""
    return {**recorded(EXPERIMENTS), PUBLISHED: published_or_none(PUBLISHED, THEN_GPU)}


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN` (None where the published-data folder lacks one)."""
    return modern(MODERN)


def _frames(frames: Mapping[str, pd.DataFrame | None]) -> Mapping[str, pd.DataFrame | None]:
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of experiment name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    unknown = set(frames) - {*EXPERIMENTS, PUBLISHED}
    if unknown:
        raise ValueError(f"frames has unknown key(s) {sorted(unknown)}; accepted: {[*EXPERIMENTS, PUBLISHED]}")
    return frames


def _gpu(frames: Mapping[str, pd.DataFrame | None]) -> pd.DataFrame | None:
    """The ``collective_sizes`` rows measured between GPUs: a frame run on a GPU machine may still have
    run gloo on CPU tensors (its ``device`` column says so), and those rows are never a "now"."""
    frame = gpu_rows(frames.get(EXPERIMENTS[0]), f"frames[{EXPERIMENTS[0]!r}]")
    if frame is None or "device" not in frame:
        return frame
    rows = frame[frame["device"] == "cuda"]
    return rows if len(rows) else None


def _ranks(frame: pd.DataFrame | None) -> int | None:
    """The most ranks an all-reduce of ``frame`` ran on (the rules read one node's worth)."""
    if frame is None:
        return None
    rows = frame[frame["op"] == "all-reduce"]
    return int(rows["n_ranks"].max()) if len(rows) else None


def curve_effects(frame: pd.DataFrame | None, spec: DeviceSpec | None, dtype: str = NOW_DTYPE,
                  n_ranks: int | None = None) -> dict[str, float | None]:
    """Every effect of :data:`RULES` read off one collective frame (measured, published or the model's
    as measured), on ``n_ranks`` (default: the most it has); ``spec`` (in ``dtype``) prices the
    compute of the overlap and tensor-parallel rules (None: those are None)."""
    n = _ranks(frame) if n_ranks is None else n_ranks
    if frame is None or n is None:
        return dict.fromkeys(RULES)
    return {"latency": latency_gain(frame, n_ranks=n), "gpu_count": gpu_count_ratio(frame, many=n, few=FEW),
            "buckets": bucket_share(frame, n_ranks=n),
            "overlap": overlap_ratio(frame, spec, n_ranks=n, dtype=dtype),
            "tensor_parallel": tensor_parallel_ratio(frame, spec, tp=n, dtype=dtype)}


def effects(frames: Mapping[str, pd.DataFrame | None]) -> dict[str, float | None]:
    """Each rule's "now" (:data:`RULES`) from a GPU ``collective_sizes`` frame, None where it is missing
    or a CPU's (all-reduce rows only; the compute of the GPU it ran on)."""
    f = _frames(frames)
    gpu = _gpu(f)
    return curve_effects(gpu, spec_of(gpu))


def then_effects(deepbench: pd.DataFrame | None) -> dict[str, float | None]:
    """Each rule's "then" from DeepBench's 2017 all-reduce: 8 P100s in one PCIe node (2 for the
    GPU-count rule), the P100's FP32 compute; the tensor-parallel rule has none (no published
    measurement of it from those years)."""
    frame = deepbench_frame(deepbench, system="P100", nodes=1)
    out = curve_effects(frame, device_spec(THEN_GPU), THEN_DTYPE, RANKS if frame is not None else None)
    return {**out, "tensor_parallel": None}  # a 2017 table, but no tensor parallelism (Megatron-LM: 2019)


def model_effects(spec: DeviceSpec) -> dict[str, float | None]:
    """The same effects from the α-β model for ``spec``'s GPUs on NVLink 4: a ring on 2 and 8 ranks."""
    frame = as_measured(predicted_collectives("nvlink4", n_ranks=(FEW, RANKS)))
    return curve_effects(frame, spec, NOW_DTYPE, RANKS)


def published_effects(xla: pd.DataFrame | None) -> dict[str, float | None]:
    """The effects XLA's table measures (8 H100s on an NVSwitch, 2 for the GPU-count rule), with the
    H100 SXM's compute."""
    frame = xla_frame(xla)
    return curve_effects(frame, device_spec("H100-SXM"), NOW_DTYPE, RANKS if frame is not None else None)


_WHERE = {
    "latency": f"§2: busbw of the largest all-reduce ÷ of {SMALL_BYTES / 1e3:.0f} KB, {RANKS} GPUs",
    "gpu_count": f"§3: busbw of the largest all-reduce, {RANKS} GPUs ÷ {FEW}",
    "buckets": f"§4: busbw of a {BUCKET_BYTES // 2**20} MiB bucket ÷ of the largest, {RANKS} GPUs",
    "overlap": f"§4: GPT-2 small, {DP_BATCH} × 1024 tokens per GPU: backward ÷ its bucketed all-reduce",
    "tensor_parallel": f"§5: LLaMA-2-70B layer, {TP_TOKENS} tokens, TP {RANKS}: math ÷ its two all-reduces",
}


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): XLA's table of 8 H100s where
    the published-data folder has it (``published``: the names of :data:`MODERN` to their frames), else
    the model's prediction for ``spec`` (default: the H100 SXM) on NVLink 4."""
    spec = today(spec)
    xla = frame_of(published, MODERN[0])
    p = published_effects(xla)
    m = model_effects(spec)
    rows = xla_frame(xla)
    where_model = {k: f"{v}, ring over NVLink 4 (α-β)" for k, v in _WHERE.items()}
    return {k: prefer(from_published(p[k], rows, _WHERE[k], device="H100-SXM"),
                      from_model(m[k], spec, where_model[k])) for k in RULES}


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from ``frames`` (``collective_sizes``: a GPU frame or None;
    ``deepbench_allreduce``: DeepBench's table or None, the "then"); ``instead`` (:func:`alternatives`)
    gives a published or predicted "now" to the rules nothing measured."""
    f = _frames(frames)
    e, then = effects(f), then_effects(f.get(PUBLISHED))
    alt = instead_of(instead, RULES)
    on = _gpu(f)
    return [
        finding("Small messages are latency-bound", "nccl-tests PERFORMANCE.md; Hockney's α-β model",
                f"a {SMALL_BYTES / 1e3:.0f} KB all-reduce runs far below the bus bandwidth of a large one",
                now=e["latency"], then=then["latency"], holds_at=3, gone_below=1.5, fmt="{:.1f}×",
                where=_WHERE["latency"], on=on, instead=alt["latency"]),
        finding("A ring's bandwidth does not depend on the GPU count", "Baidu ring all-reduce (Gibiansky 2017)",
                f"{RANKS} GPUs reach the bus bandwidth of {FEW}", now=e["gpu_count"], then=then["gpu_count"],
                band=INDEPENDENT, where=_WHERE["gpu_count"], on=on, instead=alt["gpu_count"]),
        finding("Bucket the gradients (25 MiB)", "PyTorch DDP (Li et al. 2020)",
                "one 25 MiB bucket runs near the bus bandwidth of a large message", now=e["buckets"],
                then=then["buckets"], band=INDEPENDENT, fmt="{:.0%}", where=_WHERE["buckets"], on=on,
                instead=alt["buckets"]),
        finding("Overlap hides the all-reduce", "PyTorch DDP (Li et al. 2020)",
                "the backward pass outlasts the gradients' all-reduce", now=e["overlap"], then=then["overlap"],
                holds_at=1, gone_below=0.5, where=_WHERE["overlap"], on=on, instead=alt["overlap"]),
        finding("Keep tensor parallelism inside NVLink", "Megatron-LM (Shoeybi et al. 2019)",
                "inside a node a layer's math outlasts its all-reduces", now=e["tensor_parallel"],
                holds_at=1, gone_below=0.5, where=_WHERE["tensor_parallel"], on=on, instead=alt["tensor_parallel"]),
    ]

