"""Fused attention on the newest GPUs: NVIDIA's published cuDNN benchmarks beside our recording.

Pure functions of ``pk.published("cudnn_sdpa_training")`` (cudnn-frontend's training SDPA
benchmarks, forward and backward, on H200, B200, GB200 and GB300; several campaigns, each with its
software, timing and date in the row). :func:`cudnn_rows` keeps cuDNN's own rows (backend
``cudnn_fe``) at one shape, the latest campaign per GPU and pass; :func:`attention_table` sets them
beside the cuDNN row of our ``attention_backends`` recording at the same length, head dimension
and mask, each as TFLOP/s and a share of the GPU's dense datasheet peak; :func:`show_attention`
shows that table captioned with who measured what and how.

The heads differ (our experiment: 32 heads of 128; cuDNN's presets: Llama 3.1 with 64 query and 8
key/value heads, or a Llama-3.1-405B-like layer with 128 and 8), which the table says. FLOPs of
a causal layer are half of 4·b·h·s²·d in every source. Units: TFLOP/s, fractions of the peak.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..._validate import boolean, frame_or_none, positive_int
from ...devices import device_spec
from ...display import Note, Table, table
from ...dtypes import canonical_dtype
from ...meta import FrameMeta
from ...provenance import caption, source_of
from ...published_data.notes import published_absent
from ..figures import published_label

__all__ = ["CUDNN_GPUS", "attention_table", "cudnn_rows", "show_attention"]

#: The GPUs the chapter shows: now (H200) and next (Blackwell: B200, GB200).
CUDNN_GPUS: tuple[str, ...] = ("H200", "B200", "GB200")
_COLUMNS = {"device", "backend", "dtype", "batch", "seq_q", "seq_kv", "heads_q", "heads_kv", "head_dim",
            "head_dim_v", "causal", "sliding_window", "pass", "deterministic_bwd", "tflops", "timing", "measured"}


def _published(frame) -> pd.DataFrame | None:
    frame = frame_or_none("frame", frame)
    if frame is not None and (missing := _COLUMNS - set(frame.columns)):
        raise ValueError(f"frame lacks the columns {sorted(missing)} of pk.published('cudnn_sdpa_training')")
    return frame


def cudnn_rows(frame: pd.DataFrame | None, *, seq: int = 8192, head_dim: int = 128, causal: bool = True,
               dtype: str = "bfloat16", gpus: Sequence[str] = CUDNN_GPUS) -> pd.DataFrame | None:
    """cuDNN's forward and backward rows at batch 1, ``seq`` tokens (queries = keys), ``head_dim``
    (Q, K and V), ``causal``, no sliding window, ``dtype``, non-deterministic backward: per GPU
    of ``gpus`` and pass, the latest campaign (``measured``), with ``fraction`` of the dense
    datasheet peak. The metadata says the GPUs shown, their dates and each timing method. None
    in, None out."""
    frame = _published(frame)
    if frame is None:
        return None
    seq, head_dim = positive_int("seq", seq), positive_int("head_dim", head_dim)
    causal = boolean("causal", causal)
    if isinstance(gpus, str) or not gpus:
        raise TypeError(f"gpus must be a non-empty list of perfkit GPU names such as {list(CUDNN_GPUS)}, "
                        f"got {gpus!r}")
    names, d = [device_spec(g).name for g in gpus], canonical_dtype(dtype)
    f = frame[(frame["backend"] == "cudnn_fe") & (frame["dtype"] == d) & (frame["batch"] == 1)
              & (frame["seq_q"] == seq) & (frame["seq_kv"] == seq) & (frame["head_dim"] == head_dim)
              & (frame["head_dim_v"] == head_dim) & (frame["causal"] == causal) & frame["sliding_window"].isna()
              & (frame["deterministic_bwd"] != True) & frame["device"].isin(names)]  # noqa: E712 (NaN: forward)
    f = f.sort_values("measured").groupby(["device", "pass"], sort=False).tail(1)
    f = f.assign(order=f["device"].map(names.index)).sort_values(["order", "pass"], ascending=[True, False])
    out = f.drop(columns="order").reset_index(drop=True)
    out["fraction"] = [t * 1e12 / device_spec(g).peak_flop_s(d) for g, t in zip(out["device"], out["tflops"])]
    shown = list(dict.fromkeys(out["device"]))
    timings = {t: ", ".join(dict.fromkeys(out.loc[out["timing"] == t, "device"]))
               for t in out["timing"].unique()}
    dates = sorted(out["measured"].astype(str).unique())
    out.attrs["meta"] = {**dict(frame.attrs.get("meta") or {}), "device_name": ", ".join(shown),
                         "published_date": " to ".join(dict.fromkeys([dates[0], dates[-1]])) if dates else "",
                         "timing": "; ".join(f"{g}: {t}" for t, g in timings.items())}
    return out


def _ours(recorded: pd.DataFrame | None, seq: int, head_dim: int, causal: bool, dtype: str) -> dict | None:
    """The cuDNN forward row of an ``attention_backends`` frame at the shape, as a table row."""
    if frame_or_none("recorded", recorded) is None or "backend" not in recorded:
        return None
    r = recorded[(recorded["backend"] == "cudnn") & (recorded["seq"] == seq) & (recorded["head_dim"] == head_dim)
                 & (recorded["causal"] == causal) & (recorded["dtype"] == dtype) & recorded["tflops"].notna()]
    if not len(r):
        return None
    meta = FrameMeta.of(recorded)
    row, gpu = r.iloc[0], meta.device or meta.device_name or "this GPU"
    try:
        spec = device_spec(gpu)
        gpu, peak = spec.name, spec.peak_flop_s(dtype) / 1e12
    except LookupError:  # a GPU perfkit has no spec for: its rate alone
        peak = float("nan")
    heads = f"{row['heads']}/{row['heads']}"
    return {"GPU": gpu, "measured by": "ours (SDPA)", "heads (Q/KV)": heads, "fwd (TFLOP/s)": row["tflops"],
            "fwd share": row["tflops"] / peak, "bwd (TFLOP/s)": float("nan"), "bwd share": float("nan")}


def attention_table(frame: pd.DataFrame | None, recorded: pd.DataFrame | None = None, *, seq: int = 8192,
                    head_dim: int = 128, causal: bool = True, dtype: str = "bfloat16",
                    gpus: Sequence[str] = CUDNN_GPUS) -> pd.DataFrame | None:
    """One row per GPU of :func:`cudnn_rows` (who timed it and when, the heads, forward and backward
    TFLOP/s and their shares of the dense peak), after the cuDNN row of ``recorded`` (an
    ``attention_backends`` frame) at the same shape when it has one (its ``measured`` date empty: the
    caption says it). None without ``frame``."""
    rows = cudnn_rows(frame, seq=seq, head_dim=head_dim, causal=causal, dtype=dtype, gpus=gpus)
    if rows is None:
        return None
    ours = _ours(recorded, seq, head_dim, causal, canonical_dtype(dtype))
    out = [{**ours, "measured": ""}] if ours else []
    for gpu, g in rows.groupby("device", sort=False):
        by = g.set_index("pass")
        first = g.iloc[0]
        row = {"GPU": gpu, "measured by": "cuDNN", "measured": str(first["measured"]),
               "heads (Q/KV)": f"{first['heads_q']:.0f}/{first['heads_kv']:.0f}"}
        for p in ("fwd", "bwd"):
            row[f"{p} (TFLOP/s)"] = by.loc[p, "tflops"] if p in by.index else float("nan")
            row[f"{p} share"] = by.loc[p, "fraction"] if p in by.index else float("nan")
        out.append(row)
    result = pd.DataFrame(out)
    result.attrs["meta"] = rows.attrs["meta"]
    result.attrs["recorded"] = source_of(recorded) if recorded is not None else None
    return result


def show_attention(frame: pd.DataFrame | None, recorded: pd.DataFrame | None = None, **shape) -> Table | Note:
    """:func:`attention_table` for the page (each pass's TFLOP/s with its share of the peak) captioned
    with where each row comes from: our recording's source; cuDNN's publisher, GPUs, dates and
    timing. Without the published table, the note saying how to get it."""
    rows = attention_table(frame, recorded, **shape)
    if rows is None or not len(rows):
        return published_absent()
    shown = rows[["GPU", "measured by", "heads (Q/KV)"]].copy()
    for p, word in (("fwd", "forward"), ("bwd", "backward")):
        shown[f"{word}, TFLOP/s (share)"] = [f"{t:,.0f} ({f:.0%})" if t == t else "—"
                                            for t, f in zip(rows[f"{p} (TFLOP/s)"], rows[f"{p} share"])]
    cudnn, _ = published_label(rows, None)
    ours = rows.attrs.get("recorded") if (rows["measured by"].str.startswith("ours")).any() else None
    return table(shown, caption=caption({"ours": ours, "cuDNN": cudnn}))
