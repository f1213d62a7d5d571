"""What the FC chapter computes from its frames (no torch, no timing), and the tables it shows.

The analyses take the frames of :mod:`perfkit.book.fully_connected.experiments` (live, recorded or, for the batch
sweeps, DeepBench's published GEMMs) and return effects in base units: times in seconds, ratios
where > 1 means the rule matters. The reader tables name their columns in words; a column of
seconds ends in ``_s`` (``GEMM_alone_s``) and is scaled where it is shown
(``pk.table(frame, seconds={"GEMM_alone_s": "µs"})``). Every function here is pure: None in (no
run, no recording), None out, so a chapter hands the result to ``pk.table`` as it is.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ...devices import DeviceSpec, current_device
from ...meta import FrameMeta
from ...roofline import batch_crossover, math_bound_batch
from ...then_now import speedups

__all__ = ["SWEEP_NAMES", "XLA_DTYPES", "batch_speedups", "crossover_table", "crossovers", "effects_table",
           "feature_effects", "frame_device", "overhead_table", "padded_shapes", "pass_overhead",
           "published_batch_sweeps", "savings_table", "square_layers", "vocab_savings"]

#: The swept dimension of ``fc_features`` in words.
SWEEP_NAMES = {"in": "inputs", "out": "outputs", "batch": "batch"}


def pass_overhead(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``fc_passes`` per batch and phase: ``autograd_s``, ``gemm_s`` (seconds) and ``ratio`` = autograd ÷ gemm.

    Pure: None in (no run, no recording), None out.
    """
    if frame is None:
        return None
    t = frame.pivot_table(index=["batch", "phase"], columns="impl", values="time_s", sort=False)
    out = pd.DataFrame({"autograd_s": t["autograd"], "gemm_s": t["gemm"]})
    out["ratio"] = out["autograd_s"] / out["gemm_s"]
    return out


def feature_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``fc_features`` per sweep: median TFLOP/s of sizes divisible by 256, by 64 (not 256), by 8 (not
    64), and not by 8; ``align_gain`` = (÷8) ÷ (not ÷8) and ``tile_gain`` = (÷64) ÷ (÷8 only).

    Pure: None in (no run, no recording), None out.
    """
    if frame is None:
        return None
    rows = []
    for s, g in frame.groupby("sweep", sort=False):
        d = g["divisible_by"]
        med = {name: g.loc[sel, "tflops"].median() for name, sel in (
            ("by_256", d >= 256), ("by_64", (d >= 64) & (d < 256)), ("by_8", (d >= 8) & (d < 64)),
            ("unaligned", d < 8))}
        rows.append({"sweep": s, **med, "align_gain": g.loc[d >= 8, "tflops"].median() / med["unaligned"],
                     "tile_gain": g.loc[d >= 64, "tflops"].median() / med["by_8"]})
    return pd.DataFrame(rows)


def vocab_savings(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``vocab_padding`` with ``saving`` = time of the unpadded nn.Linear in the same phase ÷ time_s (> 1:
    faster), and ``predicted_saving``, the same ratio of the model's ``predicted_s``.

    Pure: None in (no run, no recording), None out.
    """
    if frame is None:
        return None
    base = frame[(frame["impl"] == "linear") & (frame["multiple"] == 1)].set_index("phase")
    out = frame[["phase", "impl", "multiple", "out_features", "time_s", "predicted_s"]].copy()
    out["saving"] = out["phase"].map(base["time_s"]) / out["time_s"]
    out["predicted_saving"] = out["phase"].map(base["predicted_s"]) / out["predicted_s"]
    return out.reset_index(drop=True)


# --- What the chapter shows: the analyses above with columns in words, seconds in ``_s`` columns.


def overhead_table(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`pass_overhead` for a reader: one row per batch and pass.

    Columns: batch, pass, ``through_autograd_s``, ``GEMM_alone_s`` (seconds) and "autograd ÷ GEMM".
    Pure: None in, None out.
    """
    over = pass_overhead(frame)
    if over is None:
        return None
    out = over.reset_index()
    return pd.DataFrame({"batch": out["batch"], "pass": out["phase"],
                         "through_autograd_s": out["autograd_s"], "GEMM_alone_s": out["gemm_s"],
                         "autograd ÷ GEMM": out["ratio"]})


def effects_table(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`feature_effects` for a reader: the swept dimension in words, median TFLOP/s per class of
    sizes, and the two gains (× ratios). Pure: None in, None out."""
    eff = feature_effects(frame)
    if eff is None:
        return None
    return pd.DataFrame({"swept": eff["sweep"].map(lambda s: SWEEP_NAMES.get(s, s)),
                         "÷256 (TFLOP/s)": eff["by_256"], "÷64 only (TFLOP/s)": eff["by_64"],
                         "÷8 only (TFLOP/s)": eff["by_8"], "not ÷8 (TFLOP/s)": eff["unaligned"],
                         "align gain (×)": eff["align_gain"], "tile gain (×)": eff["tile_gain"]})


def savings_table(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`vocab_savings` for a reader: pass, implementation, logits, ``time_s`` (seconds) and the
    speedup over the unpadded nn.Linear, measured and modelled. Pure: None in, None out."""
    saved = vocab_savings(frame)
    if saved is None:
        return None
    return pd.DataFrame({"pass": saved["phase"], "implementation": saved["impl"],
                         "logits": saved["out_features"], "time_s": saved["time_s"],
                         "speedup (×)": saved["saving"], "model's speedup (×)": saved["predicted_saving"]})


def frame_device(frame: pd.DataFrame) -> DeviceSpec | None:
    """The device a frame was measured on, from its ``attrs["meta"]``: its GPU (a recording's table
    name, else its driver's name, else this GPU for a live frame), or this machine's CPU for a live
    CPU run made here; None when perfkit cannot tell (an unknown GPU, another machine's CPU)."""
    meta = FrameMeta.of(frame)
    if meta.is_cpu:
        here = current_device()
        return here if here.kind == "cpu" and meta.live else None
    return meta.gpu


def crossovers(frames: Mapping[str, pd.DataFrame | None]) -> pd.DataFrame | None:
    """Measured and predicted crossover batch of each named batch sweep (``fc_batch`` or published
    GEMMs), one row per frame and layer (M, K, dtype) of :func:`perfkit.batch_crossover`.

    Columns: data (the name), device, layer ("I→O"), dtype, ``fastest_s`` (seconds), "best TFLOP/s",
    "measured crossover" and "predicted crossover" (:func:`perfkit.math_bound_batch` on the frame's
    device, :func:`frame_device`; NaN where the device is unknown). None frames are left out; pure:
    None if none is left.
    """
    rows = []
    for name, frame in frames.items():
        if frame is None or not len(frame):
            continue
        spec = frame_device(frame)
        for r in batch_crossover(frame).itertuples():
            predicted = None if spec is None else math_bound_batch(int(r.K), int(r.M), spec, str(r.dtype))
            rows.append({"data": name, "device": spec.name if spec is not None else
                         FrameMeta.of(frame).device_name or "unknown",
                         "layer": f"{r.K}→{r.M}", "dtype": r.dtype, "fastest_s": r.floor_s,
                         "best TFLOP/s": r.best_tflops, "measured crossover": r.crossover_batch,
                         "predicted crossover": float("nan") if predicted is None else float(predicted)})
    return pd.DataFrame(rows) if rows else None


def crossover_table(frames: Mapping[str, pd.DataFrame | None]) -> pd.DataFrame | None:
    """:func:`crossovers` for a reader: device, layer, dtype, "best TFLOP/s", "measured crossover" and
    "predicted crossover" (the frames' names and fastest times left out). Pure: None if no frame is left."""
    table = crossovers(frames)
    return None if table is None else table.drop(columns=["data", "fastest_s"])


def batch_speedups(now: pd.DataFrame | None, then: pd.DataFrame | None) -> pd.DataFrame | None:
    """The batches two batch sweeps of one layer share (:func:`perfkit.then_now.speedups`): batch,
    layer, ``then_s``, ``now_s`` (seconds) and "speedup (×)" = then ÷ now. Pure: None if either is None."""
    s = speedups(now, then)
    if s is None:
        return None
    return pd.DataFrame({"batch": s["N"], "layer": s["K"].astype(str) + "→" + s["M"].astype(str),
                         "then_s": s["then_s"], "now_s": s["now_s"], "speedup (×)": s["speedup"]})


#: The dtypes of XLA's H100 GEMM table that a sweep may use, by their math (its fp8 rows are not
#: trustworthy, see the published README); its float32 GEMMs ran as TF32.
XLA_DTYPES = {"bfloat16": "bfloat16", "float32": "tf32"}


def published_batch_sweeps(frame: pd.DataFrame | None, *, batch: str = "N",
                           layers: tuple[int, ...] | None = (1024, 2048, 4096)) -> pd.DataFrame | None:
    """Batch sweeps of layers read from XLA's published H100 GEMMs (``pk.published("xla_h100_gemm")``):
    one GEMM per launch (b = 1), bf16 and f32 (``dtype`` = the math dtype: ``"bfloat16"``, ``"tf32"``),
    in ``fc_batch``'s columns: ``M`` = outputs, ``N`` = batch, ``K`` = inputs, ``time_s`` (seconds,
    XLA's CUPTI kernel time), ``tflops``.

    ``batch`` is the GEMM dimension read as the batch, the one small dimension of a layer: ``"N"``
    (``y = W·x``, perfkit's forward GEMM) or ``"M"`` (``y = x·W``, rows of activations); the other
    two are the layer's features. ``layers``: the square layers kept (inputs = outputs), None for
    every pair. The frame keeps the publisher's metadata, so :func:`crossovers` finds its GPU. Pure:
    None in, None out.
    """
    if batch not in ("N", "M"):
        raise ValueError(f"batch must be 'N' or 'M' (the XLA dimension read as the batch), got {batch!r}")
    if frame is None:
        return None
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be XLA's published GEMM table (a DataFrame) or None, got {type(frame).__name__}")
    missing = [c for c in ("b", "M", "N", "K", "dtype", "time_s", "tflops") if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}; pass pk.published('xla_h100_gemm')")
    rows = frame[(frame["b"] == 1) & frame["dtype"].isin(list(XLA_DTYPES))]
    out = pd.DataFrame({"M": rows["M" if batch == "N" else "N"], "N": rows[batch], "K": rows["K"],
                        "dtype": rows["dtype"].map(XLA_DTYPES), "time_s": rows["time_s"],
                        "tflops": rows["tflops"]})
    if layers is not None:
        out = out[(out["M"] == out["K"]) & out["M"].isin(list(layers))]
    out = out.sort_values(["dtype", "M", "K", "N"], ascending=[True, False, False, True]).reset_index(drop=True)
    out.attrs = dict(frame.attrs)
    return out if len(out) else None


def square_layers(frame: pd.DataFrame | None, *, dtype: str = "float16", wider_than: int = 512) -> pd.DataFrame | None:
    """DeepBench's GEMMs of square layers (M = K, NN layout) in ``dtype``, wider than ``wider_than``:
    batch sweeps that :func:`crossovers` reads. Pure: None in, None out (also when none is left)."""
    if frame is None:
        return None
    rows = frame[(frame["M"] == frame["K"]) & (frame["layout"] == "NN") & (frame["dtype"] == dtype)
                 & (frame["M"] > wider_than)]
    return rows if len(rows) else None


def padded_shapes(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """DeepBench's GEMMs whose sizes its benchmark padded before running them (``M`` or ``N`` as run
    differs from the sheet's), one row per shape and layout: "M in the sheet", "M as run", "N in
    the sheet", "N as run", K, layout, dtype. Pure: None in, None out (also when none was padded)."""
    if frame is None:
        return None
    rows = frame[(frame["M"] != frame["M_sheet"]) | (frame["N"] != frame["N_sheet"])]
    rows = rows.drop_duplicates(["M_sheet", "N_sheet", "layout"])
    out = pd.DataFrame({"M in the sheet": rows["M_sheet"], "M as run": rows["M"], "N in the sheet": rows["N_sheet"],
                        "N as run": rows["N"], "K": rows["K"], "layout": rows["layout"], "dtype": rows["dtype"]})
    return out.reset_index(drop=True) if len(out) else None
