"""What the RNN chapter computes from its frames (no torch, no timing), and the tables it shows.

The analyses take the frames of :mod:`perfkit.book.recurrent.experiments` (live or recorded) and DeepBench's
published GEMMs and layers, and return effects: times in seconds, throughput ratios where > 1
means the rule matters. The reader tables name their columns in words; a column of seconds ends
in ``_s`` (``then_s``) and is scaled where it is shown (``pk.table(frame, seconds={"then_s":
"ms"})``). The functions that take a frame are pure: None in (no run, no recording), None out.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from ...devices import DeviceSpec
from ...dtypes import canonical_dtype
from ...shapes import rnn_gemms
from ...then_now import RNN_SHAPE, layout_spread, speedups
from ...experiments.measure import predicted_s

__all__ = ["DEEPBENCH_LAYERS", "batch_effects", "combine_speedup", "combine_summary", "deepbench_comparable", "layer_count",
           "layer_speedups", "layout_table", "persistent_summary", "predicted_layers", "throughput_ratio",
           "throughput_ratios"]

#: DeepBench's training layers (cell, hidden, batch, T) that a sweep measures, plus small batches.
DEEPBENCH_LAYERS: tuple[tuple[str, int, int, int], ...] = tuple(
    [("rnn", h, b, 50) for h in (1760, 2048, 2560) for b in (16, 32, 64, 128)]
    + [("lstm", h, b, 25) for h in (512, 1024, 2048) for b in (16, 32, 64, 128)]
    + [("gru", 512, 32, 1), ("gru", 1536, 32, 187), ("gru", 2560, 32, 187), ("gru", 1024, 32, 1500)]
    + [("rnn", 2048, b, 50) for b in (1, 4)] + [("lstm", 1024, b, 25) for b in (1, 4)])


def deepbench_comparable(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The library rows of an ``rnn_cudnn`` frame timed as DeepBench did: ``time_s`` minus ``input_gemm_s``.

    DeepBench ran cuDNN with ``CUDNN_SKIP_INPUT`` (no input GEMM); ours includes it, so its separately
    measured time is subtracted. Columns: the shape, impl, time_s, input_gemm_s; keeps the metadata.
    """
    if frame is None:
        return None
    keep = ["cell", "hidden", "batch", "timesteps", "dtype", "impl", "time_s", "input_gemm_s"]
    rows = frame.loc[frame["impl"].isin(["cudnn", "torch cpu"]), keep].reset_index(drop=True)
    rows["time_s"] = rows["time_s"] - rows["input_gemm_s"]
    rows.attrs = dict(frame.attrs)
    return rows


def combine_speedup(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per shape of an ``rnn_combine_time`` frame: per_step_s, combined_s (seconds), ``speedup`` =
    per_step_s / combined_s, ``columns`` = batch·T, and the combined GEMM's ``tflops``.
    Pure: None in, None out."""
    if frame is None:
        return None
    keys = ["cell", "hidden", "batch", "timesteps", "dtype"]
    t = frame.pivot_table(index=keys, columns="method", values="time_s")
    f = frame[frame["method"] == "combined"].set_index(keys)["tflops"]
    out = pd.DataFrame({"per_step_s": t["per step"], "combined_s": t["combined"], "tflops": f}).reset_index()
    out["columns"] = out["batch"] * out["timesteps"]
    out["speedup"] = out["per_step_s"] / out["combined_s"]
    return out


def throughput_ratio(frame: pd.DataFrame | None, column: str, good: Any, bad: Any, *, on: list[str] | None = None,
                     **where: Any) -> float | None:
    """Median, over the shapes that have both, of throughput at ``column == good`` ÷ at ``column == bad``.

    Throughput is ``tflops``; in a frame without it (published RNN layers) ``batch / time_s`` when
    ``column`` is the batch, else ``1 / time_s`` (the same work). ``where`` selects rows (``cell="rnn"``,
    …); ``on`` (default: the RNN shape columns the frame has) pairs them. None if no shape has both.
    """
    if frame is None or column not in frame:
        return None
    rows = frame[(frame[list(where)] == pd.Series(where)).all(axis=1)] if where else frame
    speed = rows["tflops"] if "tflops" in rows else (rows[column] if column == "batch" else 1) / rows["time_s"]
    keys = on or [k for k in ("cell", "hidden", "batch", "timesteps", "dtype", "layout", "method", "impl")
                  if k in rows and k != column and k not in where] or ["_all"]
    table = rows.assign(_all=0, _speed=speed).pivot_table(index=keys, columns=column, values="_speed", aggfunc="median")
    if good not in table or bad not in table:
        return None
    ratio = (table[good] / table[bad]).dropna()
    return float(ratio.median()) if len(ratio) else None


# --- What the chapter shows: the analyses above as tables in words and units, None for None.


def combine_summary(frame: pd.DataFrame | None, min_columns: int = 1024) -> pd.DataFrame | None:
    """:func:`combine_speedup` over the shapes with batch·T ≥ ``min_columns`` (Baidu's threshold), per
    cell and H: columns cell, H, shapes and "median speedup (×)" of one GEMM over T. Empty when no
    shape is that wide (quick sweeps); pure: None in, None out."""
    speed = combine_speedup(frame)
    if speed is None:
        return None
    wide = speed[speed["columns"] >= min_columns]
    out = wide.groupby(["cell", "hidden"], sort=False)["speedup"].agg(["size", "median"]).reset_index()
    return pd.DataFrame({"cell": out["cell"], "H": out["hidden"], "shapes": out["size"],
                         "median speedup (×)": out["median"]})


def throughput_ratios(frame: pd.DataFrame | None, column: str, pairs: list[tuple[Any, Any]], *,
                      on: list[str] | None = None, **where: Any) -> pd.DataFrame | None:
    """:func:`throughput_ratio` for each ``(good, bad)`` of ``pairs``: columns "compared"
    (``"<column> <good> ÷ <bad>"``) and "ratio (×)" (NaN where no shape has both).
    Pure: None in, None out."""
    if frame is None:
        return None
    rows = []
    for good, bad in pairs:
        r = throughput_ratio(frame, column, good, bad, on=on, **where)
        rows.append({"compared": f"{column} {good} ÷ {bad}", "ratio (×)": float("nan") if r is None else r})
    return pd.DataFrame(rows)


def batch_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The effects of an ``rnn_batch`` sweep that §4 of the chapter quotes: TFLOP/s of the vanilla
    H = 2560 recurrent GEMM (NN) at batch 32 ÷ 1 and 128 ÷ 125, and the median over shapes of the
    slower layout's time ÷ the faster's. Columns "compared" and "ratio (×)"; pure: None in, None out."""
    vanilla = dict(cell="rnn", hidden=2560, layout="NN")
    ratios = throughput_ratios(frame, "batch", [(32, 1), (128, 125)], **vanilla)
    if ratios is None:
        return None
    ratios["compared"] = [f"TFLOP/s at {c.removeprefix('batch ')}, H = 2560 NN"
                          for c in ratios["compared"]]
    spreads = layout_spread(frame)["spread"]
    spread = float(spreads.median()) if len(spreads) else float("nan")
    slower = pd.DataFrame([{"compared": "slower layout ÷ faster, median", "ratio (×)": spread}])
    return pd.concat([ratios, slower], ignore_index=True)


def persistent_summary(frame: pd.DataFrame | None, batch: int = 4) -> pd.DataFrame | None:
    """Per H of an ``rnn_persistent`` frame at minibatch ``batch``: the persistent kernel's TFLOP/s ÷
    the loop of GEMMs' and ÷ cuDNN's, and the kernel's note (why it refused a shape, if it did).
    Pure: None in, None out."""
    if frame is None:
        return None
    rows = []
    for h, g in frame.groupby("hidden", sort=True):
        ratio = {impl: throughput_ratio(g, "impl", "persistent", impl, batch=batch)
                 for impl in ("gemm loop", "cudnn")}
        notes = g.loc[(g["impl"] == "persistent") & g["note"].astype(str).str.startswith("refused"), "note"]
        rows.append({"H": h, "÷ loop of GEMMs (×)": ratio["gemm loop"], "÷ cuDNN (×)": ratio["cudnn"],
                     "kernel": str(notes.iloc[0]) if len(notes) else "ran"})
    return pd.DataFrame(rows).astype({"÷ loop of GEMMs (×)": float, "÷ cuDNN (×)": float})


def layer_speedups(ours: pd.DataFrame | None, then: pd.DataFrame | None) -> pd.DataFrame | None:
    """The layer shapes both frames timed (:func:`perfkit.then_now.speedups` on the RNN shape): cell,
    H, batch, T, ``then_s``, ``now_s`` (seconds) and "speedup (×)". Pure: None if either is None."""
    s = speedups(ours, then, on=RNN_SHAPE)
    if s is None:
        return None
    return pd.DataFrame({"cell": s["cell"], "H": s["hidden"], "batch": s["batch"], "T": s["timesteps"],
                         "then_s": s["then_s"], "now_s": s["now_s"], "speedup (×)": s["speedup"]})


def layer_count(frame: pd.DataFrame | None) -> int | None:
    """How many layers (rows) ``frame`` holds. Pure: None in, None out."""
    return None if frame is None else len(frame)


def layout_table(frame: pd.DataFrame | None, size: int = 2560, max_batch: int = 256,
                 dtype: str = "float16") -> pd.DataFrame | None:
    """The recurrent GEMMs ``size × batch × size`` (batch ≤ ``max_batch``) of a GEMM frame (DeepBench's)
    timed in more than one layout, in ``dtype``: columns batch, faster layout, slower layout and
    "slower ÷ faster (×)" (:func:`perfkit.then_now.layout_spread`, largest first). Pure: None in, None out."""
    if frame is None:
        return None
    g = frame
    square = g[(g["M"] == size) & (g["K"] == size) & (g["N"] <= max_batch) & (g["dtype"] == canonical_dtype(dtype))]
    spread = layout_spread(square)
    return pd.DataFrame({"batch": spread["N"], "faster layout": spread["fastest"],
                         "slower layout": spread["slowest"], "slower ÷ faster (×)": spread["spread"]})


def predicted_layers(spec: DeviceSpec, layers: Sequence[tuple[str, int, int, int]] | None = None,
                     dtype: str = "float16") -> pd.DataFrame:
    """The GEMM model's forward time of whole layers as DeepBench timed them (input GEMM excluded): T
    recurrent GEMMs on ``spec``. ``layers``: (cell, hidden, batch, T) tuples, default
    :data:`DEEPBENCH_LAYERS`. Columns cell, hidden, batch, timesteps, dtype and
    time_s (seconds, predicted); caption it with :func:`perfkit.provenance.modelled`."""
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec such as pk.device_spec('V100-SXM2'), got {spec!r}")
    if layers is None:
        layers = DEEPBENCH_LAYERS
    dtype = canonical_dtype(dtype)
    rows = [{"cell": c, "hidden": h, "batch": b, "timesteps": t, "dtype": dtype,
             "time_s": t * predicted_s(*rnn_gemms(c, h, h, b, 1)["recurrent"], dtype, spec)}
            for c, h, b, t in layers]
    return pd.DataFrame(rows, columns=["cell", "hidden", "batch", "timesteps", "dtype", "time_s"])
