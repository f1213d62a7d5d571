"""The verdicts of chapter 03_fully_connected, computed from the frames the chapter shows.

``frames`` maps the chapter's experiments to their GPU frames (live or recorded; None where there
is none, and never a CPU run): ``"fc_passes"``, ``"fc_batch"``, ``"fc_features"``,
``"vocab_padding"``; and ``"published_fc_batch"`` to DeepBench's V100 counterpart of ``fc_batch``
(``perfkit.published_counterparts("fc_batch")["V100-SXM2, 2019"]``), the "then" of two rows.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ..devices import DeviceSpec, device_spec
from ..experiments.fc_analysis import feature_effects, pass_overhead, vocab_savings
from ..provenance import published_counterparts
from ..roofline import batch_crossover, math_bound_batch
from ._core import Finding, finding
from ._frames import gpu_rows, recorded, spec_of

TITLE = "Fully-connected layers"
CHAPTER = "03_fully_connected"

#: The GPU experiments the verdicts read ("now").
EXPERIMENTS = ("fc_passes", "fc_batch", "fc_features", "vocab_padding")
#: The key of DeepBench's V100 forward GEMMs of the 4096 → 4096 layer ("then").
PUBLISHED = "published_fc_batch"
#: The V100 the published batch sweep ran on, and the batch its gain is measured from.
THEN_GPU, SMALL_BATCH = "V100-SXM2", 16


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live, never CPU) and published frames that :func:`findings` reads."""
    out = recorded(EXPERIMENTS)
    then = published_counterparts("fc_batch", gpus=(THEN_GPU,))
    out[PUBLISHED] = next(iter(then.values()), None)
    return out


def gemm_share(passes: pd.DataFrame | None) -> float | None:
    """At the largest batch of ``fc_passes``: the median over passes of GEMM alone ÷ through autograd."""
    if passes is None:
        return None
    largest = pass_overhead(passes).loc[passes["batch"].max()]
    return float((largest["gemm_s"] / largest["autograd_s"]).median())


def crossover_fold(batch: pd.DataFrame | None, spec: DeviceSpec | None) -> float | None:
    """Measured ÷ predicted crossover batch of a batch sweep, folded: 1.0 agrees, 0.5 is 2× off."""
    if batch is None or spec is None:
        return None
    row = batch_crossover(batch).iloc[0]
    predicted = math_bound_batch(int(row["K"]), int(row["M"]), spec, str(row["dtype"]))
    if predicted is None:
        return None
    ratio = float(row["crossover_batch"]) / predicted
    return min(ratio, 1 / ratio)


def batch_gain(batch: pd.DataFrame | None, small: int = SMALL_BATCH) -> float | None:
    """Best TFLOP/s of a batch sweep ÷ its TFLOP/s at batch ``small`` (None if not measured there)."""
    if batch is None or small not in set(batch["N"]):
        return None
    at_small = batch.loc[batch["N"] == small, "tflops"].max()
    return float(batch_crossover(batch).iloc[0]["best_tflops"] / at_small)


def feature_gains(feats: pd.DataFrame | None) -> tuple[float | None, float | None]:
    """``(align_gain, tile_gain)`` of ``fc_features``: each the largest over the swept dimensions."""
    if feats is None:
        return None, None
    effects = feature_effects(feats)
    return float(effects["align_gain"].max()), float(effects["tile_gain"].max())


def vocab_gains(vocab: pd.DataFrame | None) -> tuple[float | None, float | None]:
    """Speedups of nn.Linear at the vocabulary padded to ×8 and ×64, forward+backward."""
    if vocab is None:
        return None, None
    saved = vocab_savings(vocab)
    both = saved[saved["phase"] == "forward+backward"].set_index(["impl", "multiple"])
    return float(both.loc[("linear", 8), "saving"]), float(both.loc[("linear", 64), "saving"])


def findings(frames: Mapping[str, pd.DataFrame | None]) -> list[Finding]:
    """One Finding per rule of the chapter, from ``frames`` (None or absent where not measured)."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of experiment name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    now = {name: gpu_rows(frames.get(name), f"frames[{name!r}]") for name in EXPERIMENTS}
    then = frames.get(PUBLISHED)
    if then is not None and not isinstance(then, pd.DataFrame):
        raise TypeError(f"frames[{PUBLISHED!r}] must be a DataFrame or None, got {type(then).__name__}")
    then = then if then is not None and len(then) else None
    batch = now["fc_batch"]
    fold_then = crossover_fold(then, device_spec(THEN_GPU))
    fold_now = crossover_fold(batch, spec_of(batch))
    align_gain, tile_gain = feature_gains(now["fc_features"])
    saving8, saving64 = vocab_gains(now["vocab_padding"])
    return [
        finding("A layer is three GEMMs", "NVIDIA FC guide (Table)",
                "forward, dgrad, wgrad cost their GEMMs", now=gemm_share(now["fc_passes"]),
                holds_at=0.8, gone_below=0.5, fmt="{:.2f}",
                where="§1: GEMMs alone ÷ autograd, largest batch"),
        finding("Batch > 128 (V100)", "NVIDIA FC guide",
                "math-bound from the batch whose intensity reaches the ridge",
                then=fold_then, now=fold_now, holds_at=0.67, gone_below=0.33,
                fmt="{:.2f}", where="§2: measured ÷ predicted crossover, 4096²"),
        finding("Larger batches are more efficient", "NVIDIA FC guide",
                "TFLOP/s grows with the batch", then=batch_gain(then), now=batch_gain(batch),
                holds_at=2, gone_below=1.2, fmt="{:.1f}×",
                where="§2: best TFLOP/s ÷ TFLOP/s at batch 16"),
        finding("Features divisible by 8 (FP16)", "NVIDIA FC guide; Tips blog",
                "aligned sizes are faster", now=align_gain, holds_at=1.1,
                gone_below=1.03, where="§3: align gain, worst dimension"),
        finding("Divisible by 64, ideally 256", "NVIDIA FC guide",
                "better tiling for small dimensions", now=tile_gain, holds_at=1.1,
                gone_below=1.03, where="§3: tile gain, worst dimension"),
        finding("Pad the vocabulary to ×8", "NVIDIA Tips blog (Tip 1)",
                "50264 logits faster than 50257", now=saving8, holds_at=1.1,
                gone_below=1.03, where="§4: forward+backward, nn.Linear"),
        finding("Pad the vocabulary to ×64", "nanoGPT (Karpathy)",
                "50304 logits 'for efficiency'", now=saving64, holds_at=1.1,
                gone_below=1.03, where="§4: forward+backward, nn.Linear"),
    ]


__all__ = ["CHAPTER", "EXPERIMENTS", "PUBLISHED", "TITLE", "batch_gain", "crossover_fold", "feature_gains",
           "findings", "frames", "gemm_share", "vocab_gains"]
