"""Chapter 07_transformers: the model's view of its experiments, and the effects read off their frames.

:func:`predicted_attention` and :func:`predicted_decode` are the rows ``attention_backends`` and
``decode_steps`` would give, with nothing measured: ``time_s`` empty, ``predicted_s`` from
:func:`perfkit.predict_attention_time` and :func:`perfkit.predict_decode_time` on a datasheet spec.
The effect functions (:func:`fusion_speedup`, :func:`causal_speedup`, :func:`head_dim_gain`,
:func:`decode_fraction`, :func:`batching_gain`, :func:`gqa_speedup`) read any such frame, measured or
predicted (through :func:`perfkit.book.evidence.as_measured`), and return a ratio, or None where the
rows they need are missing. Seconds, FLOPs, bytes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..._validate import boolean, one_of, positive_int, sequence_of
from ...devices import DeviceSpec, resolve_spec
from ...dtypes import canonical_dtype
from ...gemm_model import explain_gemm
from ...memory_model import layer_bytes, memory_time
from ...roofline import gemm_bytes, gemm_flops
from ...shapes import linear_gemms
from ...transformer import attention_bytes, attention_flops, decode_step_bytes, predict_attention_time
from ...transformer import predict_decode_time
from .decoding import DECODE_COLUMNS, GPU_MODEL, DecodeModel
from .experiments import ATTENTION_BACKENDS, ATTENTION_COLUMNS

__all__ = ["FUSED", "SEQS", "BATCHES", "attention_kernels", "batching_gain", "best_fused", "block_costs", "causal_speedup", "decode_fraction",
           "fusion_speedup", "gqa_speedup", "head_dim_gain", "predicted_attention", "predicted_decode"]

#: The fused SDPA backends (every one but the math path).
FUSED: tuple[str, ...] = tuple(b for b in ATTENTION_BACKENDS if b != "math")
#: Sequence lengths of the model's attention frames (the GPU experiment's).
SEQS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
#: Batches of the model's decoding frames (the GPU experiment's).
BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def predicted_attention(spec: str | DeviceSpec, *, seqs: Sequence[int] = SEQS, head_dims: Sequence[int] = (128,),
                        backends: Sequence[str] = ATTENTION_BACKENDS, causal: Sequence[bool] = (False, True),
                        batch: int = 1, heads: int = 32, dtype: Any = "bfloat16") -> pd.DataFrame:
    """``attention_backends``' rows as the model predicts them on ``spec`` (nothing measured): the
    math backend unfused (three kernels), every other backend as that fused SDPA kernel
    (:func:`perfkit.predict_attention_time` with ``backend=``: each priced at its own measured rates,
    head dimension padding and causal schedule). Caption the figure with :func:`perfkit.provenance.modelled`."""
    spec = resolve_spec(spec, none_ok=False)
    seqs_ = sequence_of("seqs", seqs, positive_int)
    dims = sequence_of("head_dims", head_dims, positive_int)
    names = sequence_of("backends", backends, lambda n, v: one_of(n, v, ATTENTION_BACKENDS))
    masks = sequence_of("causal", causal, boolean)
    b, h, d = positive_int("batch", batch), positive_int("heads", heads), canonical_dtype(dtype)
    rows = []
    for name in names:
        for hd in dims:
            for mask in masks:
                for s in seqs_:
                    fused = name != "math"
                    p = predict_attention_time(b, h, s, s, hd, spec=spec, dtype=d, fused=fused, causal=mask,
                                               backend=name if fused else None)
                    rows.append({"backend": name, "batch": b, "heads": h, "seq": s, "head_dim": hd, "causal": mask,
                                 "dtype": d, "flops": attention_flops(b, h, s, s, hd, causal=mask),
                                 "bytes_fused": attention_bytes(b, h, s, s, hd, d),
                                 "bytes_unfused": attention_bytes(b, h, s, s, hd, d, fused=False),
                                 "predicted_s": p.time_s})
    return pd.DataFrame(rows).reindex(columns=list(ATTENTION_COLUMNS))


def predicted_decode(spec: str | DeviceSpec, *, model: DecodeModel = GPU_MODEL, batches: Sequence[int] = BATCHES,
                     kv_heads: Sequence[int] | None = None, context: int | None = None,
                     dtype: Any = "bfloat16") -> pd.DataFrame:
    """``decode_steps``' rows as the model predicts them on ``spec``: :func:`perfkit.predict_decode_time`
    of ``model`` (default: the GPU experiment's stack) for each batch and K/V head count (default:
    the model's), at ``context`` tokens (default: the model's)."""
    spec = resolve_spec(spec, none_ok=False)
    if not isinstance(model, DecodeModel):
        raise TypeError(f"model must be a DecodeModel, got {type(model).__name__}")
    ns = sequence_of("batches", batches, positive_int)
    kvs = sequence_of("kv_heads", model.kv_heads if kv_heads is None else kv_heads, positive_int)
    c = model.context if context is None else positive_int("context", context)
    d = canonical_dtype(dtype)
    rows = []
    for kv in kvs:
        params = model.params(kv)
        for n in ns:
            p = predict_decode_time(params, n, c, layers=model.layers, kv_heads=kv, head_dim=model.head_dim,
                                    dtype=d, spec=spec, heads=model.heads)
            rows.append({"batch": n, "context": c, "layers": model.layers, "hidden": model.hidden,
                         "heads": model.heads, "kv_heads": kv, "head_dim": model.head_dim, "ffn": model.ffn,
                         "params": params, "dtype": d,
                         "bytes": decode_step_bytes(params, n, c, layers=model.layers, kv_heads=kv,
                                                    head_dim=model.head_dim, dtype=d),
                         "flops": p.flops, "predicted_s": p.time_s})
    return pd.DataFrame(rows).reindex(columns=list(DECODE_COLUMNS))


def attention_kernels(spec: str | DeviceSpec, seq: int, *, batch: int = 1, heads: int = 32, head_dim: int = 128,
                      dtype: Any = "bfloat16") -> dict[str, float]:
    """Predicted seconds of attention's forward pass on ``spec``, s_q = s_k = ``seq``: unfused, kernel by
    kernel (``"QKᵀ"``, ``"softmax"``, ``"PV"``: :func:`perfkit.predict_attention_time`'s ``kernels_s``),
    and ``"fused"``, one kernel."""
    def predict(fused: bool):
        return predict_attention_time(batch, heads, seq, seq, head_dim, spec=spec, dtype=dtype, fused=fused)

    return {**dict(predict(False).kernels_s), "fused": predict(True).time_s}


def _rows(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    if frame is None:
        return None
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a DataFrame or None, got {type(frame).__name__}")
    frame = frame[frame["time_s"].notna() & (frame["time_s"] > 0)] if "time_s" in frame else frame.iloc[:0]
    return frame if len(frame) else None


def best_fused(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per point (seq, head_dim, causal, batch, heads, dtype), the fastest fused backend's row."""
    rows = _rows(frame)
    if rows is None:
        return None
    fused = rows[rows["backend"].isin(FUSED)]
    if not len(fused):
        return None
    keys = ["batch", "heads", "seq", "head_dim", "causal", "dtype"]
    return fused.loc[fused.groupby(keys)["time_s"].idxmin()].reset_index(drop=True)


def _median(values: pd.Series) -> float | None:
    values = values[np.isfinite(values)]
    return float(values.median()) if len(values) else None


def fusion_speedup(frame: pd.DataFrame | None) -> float | None:
    """Unfused (math) time ÷ the best fused time, at the longest sequence both ran (median over the
    other parameters: causal or not, head dims)."""
    rows, fused = _rows(frame), best_fused(frame)
    if rows is None or fused is None:
        return None
    keys = ["batch", "heads", "seq", "head_dim", "causal", "dtype"]
    pair = rows[rows["backend"] == "math"].merge(fused, on=keys, suffixes=("_math", "_fused"))
    if not len(pair):
        return None
    longest = pair[pair["seq"] == pair["seq"].max()]
    return _median(longest["time_s_math"] / longest["time_s_fused"])


def causal_speedup(frame: pd.DataFrame | None) -> float | None:
    """The best fused backend's time without a mask ÷ with a causal mask, at the longest sequence
    measured both ways (a causal mask needs about half the FLOPs)."""
    fused = best_fused(frame)
    if fused is None:
        return None
    t = fused.pivot_table(index=["batch", "heads", "seq", "head_dim", "dtype"], columns="causal", values="time_s")
    if False not in t or True not in t:
        return None
    t = t.dropna(subset=[False, True])
    if not len(t):
        return None
    longest = t[t.index.get_level_values("seq") == t.index.get_level_values("seq").max()]
    return _median(longest[False] / longest[True])


def head_dim_gain(frame: pd.DataFrame | None, *, good: int = 128, odd: int = 80) -> float | None:
    """The best fused backend's TFLOP/s at head dimension ``good`` ÷ at ``odd`` (median over the other
    parameters): what a head dimension that is a multiple of 64 buys per FLOP."""
    fused = best_fused(frame)
    if fused is None:
        return None
    rate = fused.assign(rate=fused["flops"] / fused["time_s"])
    t = rate.pivot_table(index=["batch", "heads", "seq", "causal", "dtype"], columns="head_dim", values="rate")
    if good not in t or odd not in t:
        return None
    return _median((t[good] / t[odd]).dropna())


def decode_fraction(frame: pd.DataFrame | None, bandwidth: float, *, batch: int = 1) -> float | None:
    """Bytes a decoding step moves ÷ its time, at ``batch``, as a fraction of ``bandwidth`` (bytes/s):
    how close a memory-bound step comes to the memory (median over K/V head counts)."""
    rows = _rows(frame)
    if rows is None or not bandwidth or not np.isfinite(bandwidth):
        return None
    at = rows[rows["batch"] == batch]
    return _median(at["bytes"] / at["time_s"] / bandwidth) if len(at) else None


def batching_gain(frame: pd.DataFrame | None, *, batch: int = 64) -> float | None:
    """Tokens/s at ``batch`` ÷ tokens/s at batch 1, with one K/V head per query head (no GQA)."""
    rows = _rows(frame)
    if rows is None:
        return None
    mha = rows[rows["kv_heads"] == rows["heads"]]
    t = mha.groupby("batch")["time_s"].median()
    if 1 not in t or batch not in t:
        return None
    return float(batch * t[1] / t[batch])


def gqa_speedup(frame: pd.DataFrame | None) -> float | None:
    """A step's time with one K/V head per query head ÷ with the fewest K/V heads measured, at the
    largest batch measured both ways."""
    rows = _rows(frame)
    if rows is None:
        return None
    t = rows.pivot_table(index="batch", columns="kv_heads", values="time_s")
    heads = int(rows["heads"].iloc[0])
    fewest = int(rows["kv_heads"].min())
    if heads not in t or fewest == heads:
        return None
    both = t[[heads, fewest]].dropna()
    return float(both[heads].iloc[-1] / both[fewest].iloc[-1]) if len(both) else None


def block_costs(spec: str | DeviceSpec, *, model: DecodeModel = GPU_MODEL, batch: int = 1, seq: int = 4096,
                kv_heads: int | None = None, dtype: Any = "bfloat16") -> pd.DataFrame:
    """One layer of ``model`` (default: LLaMA-2-7B's), forward, on ``batch`` sequences of ``seq`` tokens
    with a causal mask, op by op as the model predicts it on ``spec``: ``op``, ``kind`` ("GEMM",
    "attention" (fused, :func:`perfkit.predict_attention_time`) or "memory-bound"), ``shape`` (M×N×K
    of a GEMM, elements of a memory-bound op), ``flops``, ``bytes``, ``predicted_s`` and ``bound``. The
    memory-bound ops (RMSNorm, residual adds, SiLU and the gate's product) are priced by
    :func:`perfkit.memory_time` of :func:`perfkit.layer_bytes`; the GEMMs by :func:`perfkit.explain_gemm`."""
    spec = resolve_spec(spec, none_ok=False)
    if not isinstance(model, DecodeModel):
        raise TypeError(f"model must be a DecodeModel, got {type(model).__name__}")
    b, s, d = positive_int("batch", batch), positive_int("seq", seq), canonical_dtype(dtype)
    kv = model.heads if kv_heads is None else positive_int("kv_heads", kv_heads)
    tokens, width, ffn, hd = b * s, model.hidden, model.ffn, model.head_dim
    rows = []

    def gemm(op: str, n_in: int, n_out: int) -> None:
        M, N, K = linear_gemms(tokens, n_in, n_out)["forward"]
        e = explain_gemm(M, N, K, d, spec)
        rows.append({"op": op, "kind": "GEMM", "shape": f"{M:,}×{N:,}×{K:,}", "flops": gemm_flops(M, N, K),
                     "bytes": gemm_bytes(M, N, K, d),
                     "predicted_s": e.predicted_s, "bound": e.bound})

    def memory(op: str, kind: str, elements: int) -> None:
        nbytes = layer_bytes(kind, (tokens, elements), d)
        rows.append({"op": op, "kind": "memory-bound", "shape": f"{tokens:,}×{elements:,}", "flops": 0,
                     "bytes": nbytes, "predicted_s": memory_time(nbytes, spec), "bound": "memory"})

    memory("RMSNorm", "rmsnorm", width)
    gemm("Q, K, V projection", width, (model.heads + 2 * kv) * hd)
    a = predict_attention_time(b, model.heads, s, s, hd, spec=spec, dtype=d, causal=True, kv_heads=kv)
    rows.append({"op": "attention (fused, causal)", "kind": "attention", "shape": f"{b * model.heads}×({s:,}²×{hd})",
                 "flops": a.flops, "bytes": a.bytes, "predicted_s": a.time_s, "bound": a.bound})
    gemm("output projection", model.heads * hd, width)
    memory("residual add", "add", width)
    memory("RMSNorm", "rmsnorm", width)
    gemm("gate and up projections", width, 2 * ffn)
    memory("SiLU", "silu", ffn)
    memory("gate × up", "add", ffn)
    gemm("down projection", ffn, width)
    memory("residual add", "add", width)
    out = pd.DataFrame(rows)
    out["share"] = out["predicted_s"] / out["predicted_s"].sum()
    return out
