"""The verdicts of chapter 03_fully_connected, computed from the frames the chapter shows.

``frames`` maps the chapter's experiments to their GPU frames (live or recorded; None where there
is none, and never a CPU run): ``"fc_passes"``, ``"fc_batch"``, ``"fc_features"``,
``"vocab_padding"``; and ``"published_fc_batch"`` to DeepBench's V100 counterpart of ``fc_batch``
(``perfkit.published_counterparts("fc_batch")["V100-SXM2, 2019"]``), the "then" of two rows.

Where nothing was measured, :func:`alternatives` gives each rule a "now": OpenXLA's published H100
GEMMs for the batch rules (a 4096 → 4096 layer whose batch is the GEMM's N, against
:func:`perfkit.math_bound_batch`), else the model's prediction for an H100.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ...devices import DeviceSpec, device_spec
from ...gemm_model import predict_gemm_time
from ...provenance import published_counterparts
from ...roofline import batch_crossover, math_bound_batch
from ..evidence import as_measured, frame_of, from_model, from_published, modern, prefer, today
from ..frames import gpu_rows, recorded, spec_of
from ..verdict import Band, Evidence, Finding, finding, instead_of
from .analysis import feature_effects, pass_overhead, published_batch_sweeps, vocab_savings
from .experiments import predicted_features, predicted_vocab

TITLE = "Fully-connected layers"
CHAPTER = "03_fully_connected"

#: The GPU experiments the verdicts read ("now").
EXPERIMENTS = ("fc_passes", "fc_batch", "fc_features", "vocab_padding")
#: The key of DeepBench's V100 forward GEMMs of the 4096 → 4096 layer ("then").
PUBLISHED = "published_fc_batch"
#: The V100 the published batch sweep ran on, and the batch its gain is measured from.
THEN_GPU, SMALL_BATCH = "V100-SXM2", 16
#: The published tables of current GPUs the verdicts can rest on (see :func:`alternatives`).
MODERN: tuple[str, ...] = ("xla_h100_gemm",)
#: The keys of :func:`alternatives`, one per rule in the order of :func:`findings`.
RULES: tuple[str, ...] = ("passes", "crossover", "crossover_tf32", "batch_gain", "align", "tile", "vocab8",
                          "vocab64")
#: "A layer is three GEMMs": GEMMs alone ÷ autograd, about 1, judged within ×1.25 either way (the 0.8 the
#: rule always held at, mirrored: GEMMs alone slower than the layer would not be "its GEMMs" either),
#: gone beyond ×2. The crossover rules are two-sided already: their effect is folded (min(r, 1/r)).
THEIR_GEMMS = Band(1.0, holds_within=1.25, gone_beyond=2.0)
#: The layer of the batch rules (inputs = outputs), and the batches the model's sweep predicts.
LAYER = 4096
MODEL_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096, 8192)


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


def of_dtype(batch: pd.DataFrame | None, dtype: str) -> pd.DataFrame | None:
    """The rows of a batch sweep in ``dtype`` (None if it has none)."""
    if batch is None:
        return None
    rows = batch[batch["dtype"] == dtype]
    return rows if len(rows) else None


def crossover_fold(batch: pd.DataFrame | None, spec: DeviceSpec | None) -> float | None:
    """Measured ÷ predicted crossover batch of a batch sweep, folded: 1.0 agrees, 0.5 is 2× off."""
    if batch is None or spec is None or not len(batch):
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


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN` (None where the published-data folder lacks one)."""
    return modern(MODERN)


def h100_sweep(xla: pd.DataFrame | None, dtype: str = "bfloat16") -> pd.DataFrame | None:
    """The :data:`LAYER`-wide layer's batch sweep in ``dtype`` from XLA's H100 GEMMs (its N as the
    batch: :func:`perfkit.book.fully_connected.analysis.published_batch_sweeps`); None without them."""
    return of_dtype(published_batch_sweeps(xla, layers=(LAYER,)), dtype)


def predicted_sweep(spec: DeviceSpec, dtype: str = "float16") -> pd.DataFrame:
    """The model's batch sweep of the :data:`LAYER`-wide layer's forward GEMM on ``spec``, in
    ``fc_batch``'s columns (``time_s`` = the prediction)."""
    rows = []
    for B in MODEL_BATCHES:
        t = predict_gemm_time(LAYER, B, LAYER, dtype, spec)
        rows.append({"M": LAYER, "N": B, "K": LAYER, "dtype": dtype, "time_s": t,
                     "tflops": 2.0 * LAYER * B * LAYER / t / 1e12})
    return pd.DataFrame(rows)


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): XLA's published H100 GEMMs
    for the batch rules, else the model's prediction for ``spec`` (default: the H100 SXM).
    ``published`` maps the names of :data:`MODERN` to their frames (None or absent: not available)."""
    spec = today(spec)
    xla = frame_of(published, "xla_h100_gemm")
    bf16, tf32 = h100_sweep(xla, "bfloat16"), h100_sweep(xla, "tf32")
    h100 = device_spec("H100-SXM")
    model16, model32 = predicted_sweep(spec), predicted_sweep(spec, "tf32")
    features = as_measured(predicted_features(spec))
    align, tile = feature_gains(features)
    vocab8, vocab64 = vocab_gains(as_measured(predicted_vocab(spec)))
    layer = f"{LAYER}²"
    xla_where = f"{layer}, the batch as N"
    return {
        "passes": from_model(1.0, spec, "by construction: the model prices a layer as its three GEMMs, with no "
                                        "framework overhead"),
        "crossover": prefer(
            from_published(crossover_fold(bf16, h100), bf16, f"{xla_where}, bf16: crossover ÷ predicted"),
            from_model(crossover_fold(model16, spec), spec, f"the model's sweep of {layer}, float16: its "
                       "crossover ÷ the roofline's")),
        "crossover_tf32": prefer(
            from_published(crossover_fold(tf32, h100), tf32, f"{xla_where}, TF32: crossover ÷ predicted"),
            from_model(crossover_fold(model32, spec), spec, f"the model's sweep of {layer}, TF32: its "
                       "crossover ÷ the roofline's")),
        "batch_gain": prefer(
            from_published(batch_gain(bf16, int(bf16["N"].min())) if bf16 is not None else None, bf16,
                           f"{xla_where}, bf16: best TFLOP/s ÷ at batch 256 (XLA's smallest)"),
            from_model(batch_gain(model16), spec, f"the model's sweep of {layer}, float16: best TFLOP/s ÷ "
                       f"TFLOP/s at batch {SMALL_BATCH}")),
        "align": from_model(align, spec, "align gain of the model's feature sweeps, worst dimension"),
        "tile": from_model(tile, spec, "tile gain of the model's feature sweeps, worst dimension"),
        "vocab8": from_model(vocab8, spec, "forward+backward, nn.Linear: the model's speedup"),
        "vocab64": from_model(vocab64, spec, "forward+backward, nn.Linear: the model's speedup"),
    }


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from ``frames`` (None or absent where not measured);
    ``instead`` (:func:`alternatives`) gives a published or predicted "now" to the rules nothing
    measured."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of experiment name → DataFrame or None, got "
                        f"{type(frames).__name__}")
    now = {name: gpu_rows(frames.get(name), f"frames[{name!r}]") for name in EXPERIMENTS}
    then = frames.get(PUBLISHED)
    if then is not None and not isinstance(then, pd.DataFrame):
        raise TypeError(f"frames[{PUBLISHED!r}] must be a DataFrame or None, got {type(then).__name__}")
    then = then if then is not None and len(then) else None
    alt = instead_of(instead, RULES)
    batch = now["fc_batch"]
    half = of_dtype(batch, "float16")
    fold_then = crossover_fold(then, device_spec(THEN_GPU))
    fold_now = crossover_fold(batch if half is None else half, spec_of(batch))
    tf32 = of_dtype(batch, "tf32")
    align_gain, tile_gain = feature_gains(now["fc_features"])
    saving8, saving64 = vocab_gains(now["vocab_padding"])
    return [
        finding("A layer is three GEMMs", "NVIDIA FC guide (Table)",
                "each pass costs its GEMM", now=gemm_share(now["fc_passes"]),
                band=THEIR_GEMMS, fmt="{:.2f}",
                where="§1: GEMM ÷ autograd, largest batch", on=now["fc_passes"],
                instead=alt["passes"]),
        finding("Batch > 128 (V100)", "NVIDIA FC guide",
                "math-bound once intensity reaches the ridge",
                then=fold_then, now=fold_now, holds_at=0.67, gone_below=0.33,
                fmt="{:.2f}", where="§2: crossover ÷ predicted, 4096²", on=batch,
                instead=alt["crossover"]),
        finding("… and in TF32", "NVIDIA MM background guide",
                "the same at the TF32 ridge",
                now=crossover_fold(tf32, spec_of(batch)), holds_at=0.67, gone_below=0.33, fmt="{:.2f}",
                where="§2: crossover ÷ predicted, 4096², TF32", on=batch, instead=alt["crossover_tf32"]),
        finding("Larger batches are more efficient", "NVIDIA FC guide",
                "TFLOP/s grows with the batch", then=batch_gain(then), now=batch_gain(batch),
                holds_at=2, gone_below=1.2, fmt="{:.1f}×",
                where="§2: best TFLOP/s ÷ TFLOP/s at batch 16", on=batch, instead=alt["batch_gain"]),
        finding("Features divisible by 8 (FP16)", "NVIDIA FC guide; Tips blog",
                "aligned sizes are faster", now=align_gain, holds_at=1.1,
                gone_below=1.03, where="§3: align gain, worst dimension", on=now["fc_features"],
                instead=alt["align"]),
        finding("Divisible by 64, ideally 256", "NVIDIA FC guide",
                "better tiles when small", now=tile_gain, holds_at=1.1,
                gone_below=1.03, where="§3: tile gain, worst dimension", on=now["fc_features"],
                instead=alt["tile"]),
        finding("Pad the vocabulary to ×8", "NVIDIA Tips blog (Tip 1)",
                "50264 logits faster than 50257", now=saving8, holds_at=1.1,
                gone_below=1.03, where="§4: forward+backward, nn.Linear", on=now["vocab_padding"],
                instead=alt["vocab8"]),
        finding("Pad the vocabulary to ×64", "nanoGPT (Karpathy)",
                "50304 logits 'for efficiency'", now=saving64, holds_at=1.1,
                gone_below=1.03, where="§4: forward+backward, nn.Linear", on=now["vocab_padding"],
                instead=alt["vocab64"]),
    ]


__all__ = ["CHAPTER", "EXPERIMENTS", "LAYER", "MODERN", "PUBLISHED", "RULES", "TITLE", "alternatives", "batch_gain",
           "crossover_fold", "feature_gains", "findings", "frames", "gemm_share", "h100_sweep", "modern_frames",
           "of_dtype", "predicted_sweep", "vocab_gains"]
