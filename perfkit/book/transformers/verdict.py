"""The verdicts of chapter 07_transformers, computed from the frames the chapter shows.

The frames, by experiment name (:data:`EXPERIMENTS`): ``attention_backends``,
``attention_head_dims`` and ``decode_steps``, from a GPU, live or recorded (a frame measured on a
CPU is never a "now"). No benchmark of attention or decoding from the guides' years (2015–2023)
is published in a form the book reads, so every "then" is empty. Where nothing was measured,
:func:`alternatives` gives each rule the model's prediction for an H100 (no published table of
attention kernels is read yet).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ...devices import DeviceSpec
from ..evidence import as_measured, from_model, today
from ..frames import gpu_rows, recorded, spec_of
from ..verdict import Band, Evidence, Finding, finding, instead_of
from .analysis import (batching_gain, causal_speedup, decode_fraction, fusion_speedup, gqa_speedup, head_dim_gain,
                       predicted_attention, predicted_decode)

TITLE = "The transformer block"
CHAPTER = "07_transformers"

#: The experiments whose GPU frames the findings read.
EXPERIMENTS: tuple[str, ...] = ("attention_backends", "attention_head_dims", "decode_steps")
#: The effects :func:`effects` computes, one per rule, in the order of the verdict table.
RULES: tuple[str, ...] = ("fusion", "causal", "head_dim", "decode_memory", "batching", "gqa")
#: Head dimensions the "multiple of 64" rule compares, and the batch the batching rule reads.
GOOD_DIM, ODD_DIM, BATCH = 128, 80, 64
#: Two-sided claims, judged as a factor either way of what they claim: each holds within the factor its
#: one-sided threshold always allowed below, mirrored above, and is gone beyond the factor it was gone
#: below. "About 2× faster" (a causal mask skips half the FLOPs): 1.6–2.5×, gone outside 1.15–3.5×; a
#: speedup well past 2× is not the halved work. "At memory speed" (of the datasheet bandwidth): 60–167 %,
#: gone outside 30–333 %; past 100 % the step's bytes did not all come from HBM.
HALVED_WORK = Band(2.0, holds_within=2 / 1.6, gone_beyond=2 / 1.15)
AT_MEMORY_SPEED = Band(1.0, holds_within=1 / 0.6, gone_beyond=1 / 0.3)


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live) frames that findings() reads."""
    return recorded(EXPERIMENTS)


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """No published table of attention or decoding is read yet: an empty mapping."""
    return {}


def _gpu(frames: Mapping[str, pd.DataFrame | None], key: str) -> pd.DataFrame | None:
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of experiment name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    return gpu_rows(frames.get(key), f"frames[{key!r}]")


def effects(frames: Mapping[str, pd.DataFrame | None]) -> dict[str, float | None]:
    """Each rule's effect (:data:`RULES`) from GPU frames, None where a frame or its rows are missing."""
    unknown = set(frames) - set(EXPERIMENTS) if isinstance(frames, Mapping) else set()
    if unknown:
        raise ValueError(f"frames has unknown key(s) {sorted(unknown)}; accepted: {list(EXPERIMENTS)}")
    attention, dims, decode = (_gpu(frames, k) for k in EXPERIMENTS)
    gpu = spec_of(decode)
    return {"fusion": fusion_speedup(attention), "causal": causal_speedup(attention),
            "head_dim": head_dim_gain(dims, good=GOOD_DIM, odd=ODD_DIM),
            "decode_memory": None if gpu is None else decode_fraction(decode, gpu.mem_bandwidth),
            "batching": batching_gain(decode, batch=BATCH), "gqa": gqa_speedup(decode)}


def model_effects(spec: DeviceSpec) -> dict[str, float | None]:
    """The same effects from the model's frames for ``spec`` (the GPU experiments' shapes)."""
    attention = as_measured(predicted_attention(spec, seqs=(8192,)))
    dims = as_measured(predicted_attention(spec, seqs=(4096,), head_dims=(ODD_DIM, GOOD_DIM), causal=(False,)))
    decode = as_measured(predicted_decode(spec, batches=(1, BATCH, 256)))
    return {"fusion": fusion_speedup(attention), "causal": causal_speedup(attention),
            "head_dim": head_dim_gain(dims, good=GOOD_DIM, odd=ODD_DIM),
            "decode_memory": decode_fraction(decode, spec.mem_bandwidth),
            "batching": batching_gain(decode, batch=BATCH), "gqa": gqa_speedup(decode)}


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): the model's prediction for
    ``spec`` (default: the H100 SXM). ``published`` is accepted for the book's protocol; no
    published table decides these rules yet."""
    spec = today(spec)
    m = model_effects(spec)
    return {
        "fusion": from_model(m["fusion"], spec, "seq 8192, 32 heads, d 128, bf16: three kernels ÷ one"),
        "causal": from_model(m["causal"], spec, "best fused backend, seq 8192: half the score blocks, "
                             "unevenly spread over the SMs"),
        "head_dim": from_model(m["head_dim"], spec, "best fused backend, seq 4096: d = 80 runs as the kernel "
                               "built for the next head dimension up"),
        "decode_memory": from_model(m["decode_memory"], spec, "batch 1: the roofline at the achievable bandwidth "
                                    "(90 % of the datasheet's)"),
        "batching": from_model(m["batching"], spec, f"4 LLaMA-2-7B layers, context 2048: batch {BATCH} ÷ 1"),
        "gqa": from_model(m["gqa"], spec, "batch 256, context 2048: 32 K/V heads ÷ 8"),
    }


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured); ``instead``
    (:func:`alternatives`) gives a predicted "now" to the rules nothing measured."""
    e = effects(frames)
    alt = instead_of(instead, RULES)
    attention, dims, decode = (_gpu(frames, k) for k in EXPERIMENTS)
    strict = dict(gone_below=1.1)
    return [
        finding("Fuse memory-bound chains (FlashAttention)", "NVIDIA memory-limited guide; Dao et al. 2022",
                "one attention kernel beats QKᵀ → softmax → PV run as three", now=e["fusion"], holds_at=2,
                **strict, where="§3: math ÷ best fused, longest sequence", on=attention, instead=alt["fusion"]),
        finding("A causal mask halves the work", "Dao 2023 (FlashAttention-2)",
                "a fused kernel skips the masked half: about 2× faster", now=e["causal"], band=HALVED_WORK,
                where="§3: no mask ÷ causal, best fused", on=attention, instead=alt["causal"]),
        finding("Dimensions a multiple of 64", "NVIDIA matmul and FC guides",
                f"head dim {GOOD_DIM} runs more FLOP/s than {ODD_DIM}", now=e["head_dim"], holds_at=1.2,
                gone_below=1.05, where=f"§4: TFLOP/s at d = {GOOD_DIM} ÷ d = {ODD_DIM}", on=dims,
                instead=alt["head_dim"]),
        finding("Memory-limited: time is bytes", "NVIDIA memory-limited guide",
                "a decoding step at batch 1 streams weights and cache at memory speed", now=e["decode_memory"],
                band=AT_MEMORY_SPEED, fmt="{:.0%}", where="§5: step bytes ÷ time ÷ datasheet bandwidth",
                on=decode, instead=alt["decode_memory"]),
        finding("Larger batches raise intensity", "NVIDIA GPU performance background",
                f"batch {BATCH} decodes far more tokens/s than batch 1", now=e["batching"], holds_at=16,
                gone_below=4, where=f"§5: tokens/s at batch {BATCH} ÷ batch 1", on=decode, instead=alt["batching"]),
        finding("Share K/V heads (GQA)", "Ainslie et al. 2023",
                "fewer K/V heads cut a large batch's step", now=e["gqa"], holds_at=1.5, **strict,
                where="§6: 32 K/V heads ÷ 8, largest batch", on=decode, instead=alt["gqa"]),
    ]
