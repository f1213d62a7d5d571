"""The fused-attention model (:mod:`perfkit.attention_model`) against published SDPA timings.

Two third-party tables, read through :mod:`perfkit.published_data`: cuDNN's training benchmarks
(``cudnn_sdpa_training``: B200, GB200, GB300, H200; cuDNN, FlashAttention-2 and PyTorch's SDPA backends;
forward and backward) and HipKittens' MI355X attention runs (``hipkittens``: AITER's kernels and
HipKittens' own). One row per (GPU, kernel, shape, pass): :func:`published_attention_table`.

Fit and score halves (``half``): Blackwell's rates are fitted on the B200 rows (cudnn-frontend's 2025
``artifacts/`` campaigns) and every GB200 and GB300 row is held out; CDNA 4's on AITER's non-causal MI355X
rows, its causal rows held out; the H200 rows score Hopper's rates, fitted on our own H200 recordings
(held out too: they were never fitted here). :func:`fit_published` re-derives the constants of
:data:`perfkit.attention_model.ATTENTION_EVIDENCE` from the fit half; :func:`attention_errors` prices every
row, :func:`attention_summary` gives per (GPU, backend, pass, dtype, half) the median and 90th percentile
of ``|predicted/measured − 1|``. The fit holds the multiplies of cuDNN's and AITER's kernels at the GEMM
rate the MAMF table (``mamf_newest``) gives the B200 and the MI355X (:func:`gemm_fractions`).

What the model cannot represent is left out of the scoring with its reason (``excluded``): PyTorch's math
path (not a fused kernel), HipKittens' own kernels (not ones PyTorch's SDPA runs) and cuDNN's
deterministic backward (dQ accumulated in a fixed order: a schedule the model has no term for). Grouped-
query attention (FLOPs per query head), d_qk ≠ d_v, causal masks and causal sliding windows are priced.
mxfp8 (block-scaled float8) is priced as float8 at cuDNN's float8 rates. Units: seconds.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .attention_model import ATTENTION_EVIDENCE, BackendRates, exp_basis_flop_s, fit_rates, fused_attention_s
from .ceilings import gemm_latency_s, resolve_ceilings
from .devices import DeviceSpec, device_spec
from .dtypes import canonical_dtype
from .published_data import HOW_TO_GET, has_published, published

__all__ = ["COLUMNS", "FIT_GPU", "attention_errors", "attention_summary", "fit_published", "gemm_fractions",
           "published_attention_table"]

#: The published tables read, and the GPU each family's rates are fitted on.
SOURCES = ("cudnn_sdpa_training", "hipkittens")
FIT_GPU = {"blackwell": "B200", "cdna4": "MI355X"}
#: Columns of :func:`published_attention_table`.
COLUMNS = ("source", "gpu", "library", "backend", "pass", "dtype", "batch", "heads_q", "heads_kv", "seq_q",
           "seq_kv", "head_dim", "head_dim_v", "causal", "window", "deterministic", "variant", "measured",
           "time_s", "half", "excluded")
# The table's kernel → the model's backend (AITER's kernels stand for PyTorch's ROCm flash slot).
_BACKEND = {"cudnn_fe": "cudnn", "pyt_cudnn": "cudnn", "flash_attention": "flash",
            "pyt_flash_attention": "flash", "aiter": "flash"}
_DTYPE = {"bfloat16": "bfloat16", "fp8": "float8", "mxfp8": "float8"}
_PASS = {"fwd": "forward", "bwd": "backward"}
_MATH = "PyTorch's math path: unfused, not a fused kernel"
_HK = "HipKittens' own kernels: not one PyTorch's SDPA runs"
_DET = "deterministic backward (dQ accumulated in a fixed order): not modelled"


def _cudnn_rows(t: pd.DataFrame) -> pd.DataFrame:
    det = t["deterministic_bwd"].astype("boolean").fillna(False).astype(bool)
    out = pd.DataFrame({
        "source": "cudnn_sdpa_training", "gpu": t["device"], "library": t["backend"],
        "backend": t["backend"].map(_BACKEND).fillna("math"), "pass": t["pass"], "dtype": t["dtype"],
        "batch": t["batch"], "heads_q": t["heads_q"], "heads_kv": t["heads_kv"], "seq_q": t["seq_q"],
        "seq_kv": t["seq_kv"], "head_dim": t["head_dim"], "head_dim_v": t["head_dim_v"],
        "causal": t["causal"].astype(bool), "window": t["sliding_window"], "deterministic": det,
        "variant": "", "measured": t["measured"].astype(str), "time_s": t["time_s"]})
    fit = (out["gpu"] == FIT_GPU["blackwell"]) & (out["measured"] < "2026")  # the 2025 artifacts campaigns
    out["half"] = np.where(fit, "fit", "held out")
    out["excluded"] = np.where(out["backend"] == "math", _MATH, np.where(det, _DET, ""))
    return out


def _hipkittens_rows(t: pd.DataFrame) -> pd.DataFrame:
    t = t[t["op"].isin(("attn_fwd", "attn_bwd"))]
    causal = t["causal"].astype(bool)
    out = pd.DataFrame({
        "source": "hipkittens", "gpu": t["device"], "library": t["library"],
        "backend": t["library"].map(_BACKEND).fillna("other"), "pass": t["op"].str.removeprefix("attn_"),
        "dtype": t["dtype"], "batch": t["batch"], "heads_q": t["heads_q"], "heads_kv": t["heads_kv"],
        "seq_q": t["seq"], "seq_kv": t["seq"], "head_dim": t["head_dim"], "head_dim_v": t["head_dim"],
        "causal": causal, "window": np.nan, "deterministic": False, "variant": t["variant"].fillna(""),
        "measured": "", "time_s": t["time_s"]})
    out["half"] = np.where(causal, "held out", "fit")
    out["excluded"] = np.where(out["library"] == "aiter", "", _HK)
    return out


def published_attention_table() -> pd.DataFrame:
    """cuDNN's and HipKittens' published attention timings in one frame (:data:`COLUMNS`, one row per
    GPU, kernel, shape and pass); an empty frame, its ``attrs["note"]`` saying how to get the tables,
    where they are absent."""
    if not all(has_published(s) for s in SOURCES):
        empty = pd.DataFrame(columns=list(COLUMNS))
        empty.attrs["note"] = f"no published attention tables: {HOW_TO_GET}"
        return empty
    frame = pd.concat([_cudnn_rows(published("cudnn_sdpa_training")),
                       _hipkittens_rows(published("hipkittens"))], ignore_index=True)
    for col in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim", "head_dim_v"):
        frame[col] = frame[col].astype(int)
    return frame[list(COLUMNS)]


def _window(value) -> int | None:
    return None if value is None or value != value else int(value)


def attention_errors(frame: pd.DataFrame, spec_of: Callable[[str], DeviceSpec] = device_spec) -> pd.DataFrame:
    """``frame`` (:func:`published_attention_table`) with, per row not ``excluded``, the model's
    ``predicted_s`` (:func:`perfkit.attention_model.fused_attention_s` of the row's backend, dtype, pass and
    shape on ``spec_of(gpu)``), ``ratio`` = predicted/measured, ``abs_error`` = ``|ratio − 1|`` and the
    rates' ``label``."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a DataFrame of published_attention_table()'s columns, "
                        f"got {type(frame)!r}")
    missing = [c for c in COLUMNS if c not in frame]
    if missing:
        raise ValueError(f"frame lacks the columns {missing} (published_attention_table() gives them)")
    out = frame.copy()
    predicted, labels, specs = [], [], {}
    for r in out.to_dict("records"):
        if r["excluded"]:
            predicted.append(np.nan)
            labels.append("")
            continue
        spec = specs.setdefault(r["gpu"], spec_of(r["gpu"]))
        t, _, label = fused_attention_s(
            int(r["batch"]) * int(r["heads_q"]), int(r["seq_q"]), int(r["seq_kv"]), int(r["head_dim"]),
            _DTYPE[r["dtype"]], spec, causal=bool(r["causal"]), backend=r["backend"], pass_=_PASS[r["pass"]],
            head_dim_v=int(r["head_dim_v"]), window=_window(r["window"]))
        predicted.append(t)
        labels.append(label)
    out["predicted_s"] = np.array(predicted, float)
    out["ratio"] = out["predicted_s"] / out["time_s"].astype(float)
    out["abs_error"] = (out["ratio"] - 1).abs()
    out["label"] = labels
    return out


def attention_summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, backend, pass, dtype, half) of scored rows: ``n``, ``median_abs_error`` and
    ``p90_abs_error`` of ``|predicted/measured − 1|`` (:func:`attention_errors`)."""
    if "abs_error" not in errors:
        raise ValueError("errors must come from attention_errors() (no abs_error column)")
    keys = ["gpu", "backend", "pass", "dtype", "half"]
    scored = errors[errors["excluded"] == ""]
    if scored.empty:
        return pd.DataFrame(columns=keys + ["n", "median_abs_error", "p90_abs_error"])
    g = scored.groupby(keys, sort=True)["abs_error"]
    return pd.DataFrame({"n": g.size(), "median_abs_error": g.median(),
                         "p90_abs_error": g.quantile(0.9)}).reset_index()


def _fit_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Published rows in :func:`perfkit.attention_model.fit_rates`' columns."""
    return pd.DataFrame({"backend": rows["backend"], "batch": rows["batch"], "heads": rows["heads_q"],
                         "seq": rows["seq_q"], "seq_k": rows["seq_kv"], "head_dim": rows["head_dim"],
                         "head_dim_v": rows["head_dim_v"], "causal": rows["causal"], "window": rows["window"],
                         "pass_": rows["pass"].map(_PASS), "time_s": rows["time_s"].astype(float)})


def gemm_fractions(gpu: str, spec_of: Callable[[str], DeviceSpec] = device_spec) -> dict[str, float]:
    """Per dtype, the share of ``gpu``'s dense peak its best GEMM reaches: the MAMF table
    (``mamf_newest``, stas00/ml-engineering), over perfkit's datasheet peak."""
    spec, t = spec_of(gpu), published("mamf_newest")
    t = t[t["device"] == gpu]
    return {canonical_dtype(d): float(v) * 1e12 / spec.peak_flop_s(canonical_dtype(d))
            for d, v in zip(t["dtype"], t["tflops_best"]) if v == v}


def fit_published(frame: pd.DataFrame, fam: str, spec_of: Callable[[str], DeviceSpec] = device_spec
                  ) -> dict[str, BackendRates]:
    """``fam``'s rates (``"blackwell"`` or ``"cdna4"``: keys as in :data:`ATTENTION_EVIDENCE`) re-derived by
    :func:`perfkit.attention_model.fit_rates` from the fit half of ``frame`` on :data:`FIT_GPU` ``[fam]``,
    causal rows included, forward and backward together. The split between multiplies and exponentials:
    kernels built on the GEMM's matrix instructions (cuDNN's on Blackwell, AITER's on CDNA 4) run their
    forward multiplies at the GEMM's achievable rate (:func:`gemm_fractions`), the exponential rate fitted;
    FlashAttention-2 on Blackwell (sm80's mma.sync, not the GEMM's tcgen05) keeps Hopper's fitted
    exponential rate, its multiplies fitted (the B200 rows all have d = 128: one of the two must be held)."""
    if fam not in FIT_GPU:
        raise ValueError(f"fam must be one of {sorted(FIT_GPU)}, got {fam!r}")
    gpu = FIT_GPU[fam]
    spec, gemm = spec_of(gpu), gemm_fractions(gpu, spec_of)
    rows = frame[(frame["half"] == "fit") & (frame["excluded"] == "") & (frame["gpu"] == gpu)]
    latency_s = gemm_latency_s(resolve_ceilings(spec, None))
    out: dict[str, BackendRates] = {}
    for dtype, g in rows.groupby(rows["dtype"].map(_DTYPE)):
        for name, b in g.groupby("backend"):
            hold = {"exp_per_fp32_flop": ATTENTION_EVIDENCE["hopper"][name].exp_per_fp32_flop} \
                if (fam, name) == ("blackwell", "flash") else {"mma_fraction": round(gemm[dtype], 3)}
            fitted = fit_rates(_fit_frame(b), peak_flop_s=spec.peak_flop_s(dtype),
                               fp32_flop_s=exp_basis_flop_s(spec), sms=spec.sms, latency_s=latency_s,
                               causal=True, **hold)[name]
            out[name if dtype == "bfloat16" else f"{name}:{dtype}"] = fitted
    return out
