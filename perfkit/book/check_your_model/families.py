"""Every recorded microbenchmark beside what perfkit predicts for it, by family, with the fit/score split.

A **family** is a kind of work the models predict: GEMMs (``gemm_*``, ``fc_*``, the recurrent GEMMs of
``rnn_hidden``/``rnn_batch``), memory-bound ops (``activation_sizes``, ``batchnorm_sizes``, ``pool_sizes``),
convolutions (``conv_*``), recurrent layers (``rnn_cudnn``), attention (``attention_*``) and decoding
(``decode_steps``). :data:`FITTED` says which recordings fitted which constants; every other recording,
and the real models of :mod:`.held_out`, is scored on data the models never saw. :func:`predict_rows`
gives one recording's rows a ``predicted_s`` column from today's models (NaN, with ``unpredicted``, for a
row no model covers); :func:`family_rows` gathers them and :func:`family_table` summarises them. Pure functions of frames; units: seconds.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pandas as pd

from ...devices import DeviceSpec
from ...op_model import op_time_s
from ...transformer import predict_attention_time, predict_decode_time
from ...validation import RECORDED_FITS, with_predictions
from .held_out import error_stats

__all__ = ["FAMILIES", "FITTED", "ROW_COLUMNS", "family_rows", "family_table", "predict_rows"]

#: Recording → what was fitted on it (everything not listed is held out from every fit).
FITTED: dict[str, str] = {
    "ceiling_matmul": "the calibrated matmul ceilings (device_profile.json)",
    "ceiling_copy": "the calibrated copy bandwidth (device_profile.json)",
    **{name: f"perfkit.ceilings: {what}" for name, what in RECORDED_FITS.items()},
    "batchnorm_sizes": "perfkit.op_model: the DRAM/L2 round and extra-kernel cost (Hopper)",
    "pool_sizes": "perfkit.op_model: pooling's cost per element and per window (Hopper)",
    "activation_sizes": "perfkit.op_model: GELU's and the sigmoid's arithmetic per element (Hopper), ≥ 64 Mi elements",
    "conv_layout": "perfkit.conv_model: NCHW transposes' share of copy bandwidth (Hopper)",
    "conv_first_layer": "perfkit.conv_model: the 3 → 4 channel padding copy (Hopper)",
    "rnn_cudnn": "perfkit.rnn_model: cuDNN's algorithms (the persistent kernel's constants, Hopper)",
    "rnn_persistent": "perfkit.rnn_model: the persistent kernel's sync and rate (Hopper)",
    "attention_head_dims": "perfkit.attention_model: each backend's rates (Hopper)",
    "attention_backends": "perfkit.attention_model: its non-causal rows (the causal ones are held out)",
}

_GEMM = ("gemm_sizes", "gemm_small_n", "gemm_transposes", "gemm_alignment", "ceiling_matmul", "gemm_waves",
         "gemm_tile_quantization", "fc_features", "fc_batch", "fc_passes", "rnn_hidden", "rnn_batch")


def _gemms(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    f = frame.rename(columns={"batch": "rows"}) if "M" in frame and "in_features" in frame or "cell" in frame \
        else frame  # fc_*/rnn_* "batch" is the layer's rows, not a batch of GEMMs
    if "impl" in f and f["impl"].astype(str).isin(["autograd"]).any():
        f = f.assign(impl="cublas")
    return pd.Series(with_predictions(f, spec)["predicted_s"].to_numpy(), index=frame.index)


def _memory(kind_of: Callable[[dict], tuple]) -> Callable[[pd.DataFrame, DeviceSpec], pd.Series]:
    def predict(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
        out = []
        for r in frame.to_dict("records"):
            kind, shape, params = kind_of(r)
            out.append(op_time_s(kind, shape, r["dtype"], spec, pass_=r["pass"], **params))
        return pd.Series(out, index=frame.index)
    return predict


def _pool(r: dict) -> tuple:
    return (f"{r['kind']}pool", (r["N"], r["C"], r["H"], r["W"]),
            {"kernel_size": int(r["kernel_size"]), "stride": int(r["stride"]), "padding": int(r["padding"]),
             **({"indices_itemsize": int(r["indices_itemsize"])} if r["kind"] == "max" else {})})


def _pricer(spec: DeviceSpec, dtype: str, training: bool) -> Any:
    from ...advisor.price import Pricer  # the advisor's own pricing, so the families score what it uses

    return Pricer(dtype, spec, training)


def _conv_op(r: dict, nhwc: bool, training: bool) -> Any:
    from ...advisor.ops import Op

    stride = int(r.get("stride", r.get("stride_h", 1)))
    pad = int(r.get("padding", r.get("pad_h", 0)))
    H, W, R, S = int(r["H"]), int(r["W"]), int(r["R"]), int(r["S"])
    P = int(r["P"]) if "P" in r else (H + 2 * pad - R) // stride + 1
    Q = int(r["Q"]) if "Q" in r else (W + 2 * pad - S) // stride + 1
    return Op(0, "", "Conv2d", "conv", {"N": int(r["N"]), "C": int(r["C"]), "H": H, "W": W, "K": int(r["K"]),
                                         "R": R, "S": S, "P": P, "Q": Q, "groups": 1, "nhwc": nhwc, "dims": 2,
                                         "stride": stride, "padding": pad, "dilation": int(r.get("dilation", 1)),
                                         "input_grad": training, "weight_grad": training, "reads_input": False})


def _conv_time(r: dict, spec: DeviceSpec, passes: tuple[str, ...], nhwc: bool = False) -> float:
    pricer = _pricer(spec, r["dtype"], True)
    rows = pricer.rows(_conv_op(r, nhwc, True))
    return sum(x["predicted_s"] for x in rows if x["pass"] in passes) if rows else math.nan


_PHASES = {"forward": ("forward",), "dgrad": ("dgrad",), "wgrad": ("wgrad",),
           "forward+backward": ("forward", "wgrad")}


def _convs(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    out = []
    for r in frame.to_dict("records"):
        phase = r.get("phase", r.get("op", "forward"))
        layout = str(r.get("layout", "NCHW"))
        if phase not in _PHASES or layout not in ("NCHW", "NHWC"):
            out.append(math.nan)  # a layout conversion alone: not a convolution
            continue
        out.append(_conv_time(r, spec, _PHASES[phase], nhwc=layout == "NHWC"))
    return pd.Series(out, index=frame.index)


def _deepbench_convs(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    return pd.Series([_conv_time(r, spec, ("forward",)) for r in frame.to_dict("records")], index=frame.index)


def _rnns(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    from ...advisor.ops import Op

    out = []
    for r in frame.to_dict("records"):
        if r["impl"] != "cudnn":
            out.append(math.nan)  # a loop of GEMMs written by hand: the GEMM family scores its GEMMs
            continue
        op = Op(0, "", "RNN", "rnn", {"cell": r["cell"], "input_size": int(r["hidden"]), "hidden": int(r["hidden"]),
                                      "batch": int(r["batch"]), "seq_len": int(r["timesteps"]), "layers": 1,
                                      "directions": 1, "input_grad": False, "weight_grad": False})
        out.append(_pricer(spec, r["dtype"], False).time_s(op))
    return pd.Series(out, index=frame.index)


def _attention(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    out = [predict_attention_time(int(r["batch"]), int(r["heads"]), int(r["seq"]), int(r["seq"]), int(r["head_dim"]),
                                  spec=spec, dtype=r["dtype"], fused=r["backend"] != "math",
                                  causal=str(r["causal"]) == "True",
                                  **({"backend": r["backend"]} if r["backend"] != "math" else {})).time_s
           for r in frame.to_dict("records")]
    return pd.Series(out, index=frame.index)


def _decode(frame: pd.DataFrame, spec: DeviceSpec) -> pd.Series:
    out = [predict_decode_time(int(r["params"]), int(r["batch"]), int(r["context"]), layers=int(r["layers"]),
                               kv_heads=int(r["kv_heads"]), head_dim=int(r["head_dim"]), dtype=r["dtype"], spec=spec,
                               heads=int(r["heads"])).time_s
           for r in frame.to_dict("records")]
    return pd.Series(out, index=frame.index)


def _deepbench_long(frame: pd.DataFrame) -> pd.DataFrame:
    """conv_deepbench's forward column only (its backward columns time other passes)."""
    return frame.rename(columns={"stride_h": "stride", "pad_h": "padding"})


#: Recording → (family, predictor(frame, spec) → predicted seconds per row).
FAMILIES: dict[str, tuple[str, Callable[[pd.DataFrame, DeviceSpec], pd.Series]]] = {
    **{name: ("GEMM", _gemms) for name in _GEMM},
    "activation_sizes": ("memory-bound", _memory(lambda r: (r["op"], (int(r["elements"]),), {}))),
    "batchnorm_sizes": ("memory-bound", _memory(lambda r: ("batchnorm", (r["N"], r["C"], r["H"], r["W"]),
                                                           {"nhwc": r["layout"] == "NHWC"}))),
    "pool_sizes": ("memory-bound", _memory(_pool)),
    **{name: ("convolution", _convs) for name in ("conv_layout", "conv_passes", "conv_channels", "conv_params",
                                                    "conv_first_layer")},
    "conv_deepbench": ("convolution", lambda f, s: _deepbench_convs(_deepbench_long(f), s)),
    "rnn_cudnn": ("recurrent layer", _rnns),
    "attention_backends": ("attention", _attention),
    "attention_head_dims": ("attention", _attention),
    "decode_steps": ("decoding", _decode),
}


def predict_rows(name: str, frame: pd.DataFrame, spec: DeviceSpec) -> pd.DataFrame:
    """``frame`` (the recording ``name``) with ``predicted_s`` from today's models on ``spec`` and ``ratio``
    (measured ÷ predicted). ``LookupError`` for a recording no family covers."""
    if name not in FAMILIES:
        raise LookupError(f"no family predicts the recording {name!r}; families cover: {', '.join(FAMILIES)}")
    out = frame.copy()
    out["predicted_s"] = FAMILIES[name][1](frame, spec)
    out["ratio"] = out["time_s"] / out["predicted_s"]
    return out


#: Columns of :func:`family_rows`.
ROW_COLUMNS = ("family", "recording", "split", "time_s", "predicted_s", "ratio")


def family_rows(frames: dict[str, pd.DataFrame], spec: DeviceSpec) -> pd.DataFrame:
    """Every row of every recording a family covers, predicted on ``spec``: family, recording, split
    (``"fit"`` for a recording that fitted a constant, :data:`FITTED`, else ``"held out"``), time_s
    (measured), predicted_s (NaN where no model covers the row) and ratio (measured ÷ predicted)."""
    parts = []
    for name, frame in frames.items():
        if name not in FAMILIES:
            continue
        scored = predict_rows(name, frame, spec)
        parts.append(pd.DataFrame({"family": FAMILIES[name][0], "recording": name,
                                   "split": "fit" if name in FITTED else "held out",
                                   "time_s": scored["time_s"].to_numpy(dtype=float),
                                   "predicted_s": scored["predicted_s"].to_numpy(dtype=float),
                                   "ratio": scored["ratio"].to_numpy(dtype=float)}))
    if not parts:
        return pd.DataFrame(columns=list(ROW_COLUMNS))
    return pd.concat(parts, ignore_index=True)[list(ROW_COLUMNS)]


def family_table(frames: dict[str, pd.DataFrame] | None, spec: DeviceSpec | None = None, *,
                 rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per recording: family, split ("fit: …" or "held out"), n, median and p90 |error|, median
    signed error (+: the model is too fast), and rows left unpredicted. From ``frames`` predicted on
    ``spec``, or from ``rows`` already predicted (:func:`family_rows`)."""
    if rows is None:
        rows = family_rows(frames, spec)
    out = []
    for name, g in rows.groupby("recording", sort=False):
        out.append({"family": g["family"].iloc[0], "recording": name,
                    "split": f"fit: {FITTED[name]}" if name in FITTED else "held out",
                    **error_stats(g["ratio"]), "unpredicted": int(g["predicted_s"].isna().sum())})
    return pd.DataFrame(out)
