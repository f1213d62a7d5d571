"""Published measurements of memory-limited kernels against the byte model (the memory-limited chapter).

Pure functions of published frames, never of perfkit's own runs:

- **Liger-Kernel** (``pk.published("liger_memory_bound")``: layer norm, RMS norm, add + RMS norm,
  SwiGLU and ReLU² on an H100 SXM and an A100-SXM4-80GB, fused Triton kernels against the eager
  PyTorch modules, ``triton.testing.do_bench`` medians with the L2 flushed). :func:`liger_forward`
  gives each forward row the bytes the byte model says its provider moves (:func:`provider_kernels`:
  the kernels it launches, each counted by :func:`perfkit.memory_model.layer_bytes` or
  :func:`~perfkit.memory_model.chain_bytes`) and the model's time; :func:`fusion_pairs` sets each
  eager provider beside the fused one (:data:`PAIRS`).
- **gpu-benches** (``pk.published("gpu_benches_stream")``: float64 STREAM-like kernels, host-timed,
  bandwidth against occupancy): :func:`stream_occupancy` and its kin, from
  :mod:`perfkit.book.memory_limited.stream`, re-exported here.

Where the table is absent, ``model=`` (a DeviceSpec) gives the model's rows only (``time_s`` NaN,
``attrs["model_of"]`` naming the GPU). The one-number functions at the end (``fusion_ratio_measured``,
``achieved_fraction_of_bandwidth``, ...) return None without data; verdicts call them. Fractions are
of the **datasheet** bandwidth (``DeviceSpec.mem_bandwidth``). Units: seconds, bytes, GB/s (1e9 B/s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._validate import one_of, positive_number
from ...devices import DeviceSpec, device_spec
from ...dtypes import canonical_dtype, itemsize
from ...memory_model import PARAM_ITEMSIZE, chain_bytes, layer_bytes, memory_time
from ..reader import readable
from .stream import GENERATIONS, occupancy_for_fraction, stream_occupancy, stream_peak_fraction, stream_table

__all__ = ["FUSED", "GENERATIONS", "LABELS", "PAIRS", "SWEEPS", "TWINS", "achieved_fraction_of_bandwidth",
           "bandwidth_spread", "bandwidth_table", "byte_model_error", "fusion_pairs", "fusion_ratio_measured",
           "fusion_ratio_predicted", "fusion_saving_realised", "liger_forward", "occupancy_for_fraction", "pairs_table",
           "provider_kernels", "stream_occupancy", "stream_peak_fraction", "stream_table"]

#: The fused (Liger) provider of each Liger kernel.
FUSED: dict[str, str] = {"layer_norm": "liger", "rms_norm": "liger", "fused_add_rms_norm": "liger_fused_add_rms_norm",
                         "megatron_rms_norm": "liger", "megatron_swiglu": "liger", "relu_squared": "liger"}
#: Eager-against-fused pairs: (kernel, eager provider), each timed against :data:`FUSED`'s provider.
#: Megatron's SwiGLU (``@jit_fuser``) is left out: which fuser ran is not recorded; Megatron's RMS
#: norm is ``torch.nn.RMSNorm`` itself (the ``torch`` pair).
PAIRS: tuple[tuple[str, str], ...] = (
    ("layer_norm", "huggingface"), ("rms_norm", "huggingface"), ("fused_add_rms_norm", "huggingface"),
    ("fused_add_rms_norm", "liger_rms_norm"), ("megatron_rms_norm", "torch"), ("megatron_swiglu", "torch"),
    ("relu_squared", "torch"))
#: Providers that rerun another provider's kernel (same timings within noise): left out of figures.
TWINS: frozenset[tuple[str, str]] = frozenset({("megatron_swiglu", "liger_in_place"), ("megatron_rms_norm", "megatron")})
#: What each (kernel, provider) runs, for tables and legends.
LABELS: dict[tuple[str, str], str] = {
    ("layer_norm", "liger"): "Liger layer norm", ("layer_norm", "huggingface"): "torch.nn.LayerNorm",
    ("rms_norm", "liger"): "Liger RMS norm", ("rms_norm", "huggingface"): "HF LlamaRMSNorm (eager)",
    ("fused_add_rms_norm", "liger_fused_add_rms_norm"): "Liger add + RMS norm",
    ("fused_add_rms_norm", "huggingface"): "add + HF RMS norm (eager)",
    ("fused_add_rms_norm", "liger_rms_norm"): "add + Liger RMS norm",
    ("megatron_rms_norm", "liger"): "Liger RMS norm (Megatron)", ("megatron_rms_norm", "torch"): "torch.nn.RMSNorm",
    ("megatron_rms_norm", "megatron"): "Megatron RMSNorm (= torch.nn.RMSNorm)",
    ("megatron_swiglu", "liger"): "Liger SwiGLU", ("megatron_swiglu", "liger_in_place"): "Liger SwiGLU, in place",
    ("megatron_swiglu", "torch"): "silu(gate) * up (eager)", ("megatron_swiglu", "megatron"): "Megatron SwiGLU (jit)",
    ("relu_squared", "liger"): "Liger ReLU²", ("relu_squared", "torch"): "relu, then square (eager)",
}
#: The shapes Liger's benchmark scripts sweep (their configuration, not their results): kernel →
#: (rows, hidden sizes, dtype). Used for the model's rows when the published table is absent.
SWEEPS: dict[str, tuple[int, tuple[int, ...], str]] = {
    "layer_norm": (4096, tuple(2**k for k in range(10, 15)), "float32"),
    "rms_norm": (2048, tuple(2**k for k in range(10, 16)), "bfloat16"),
    "fused_add_rms_norm": (2048, tuple(2**k for k in range(10, 16)), "float32"),
    "megatron_rms_norm": (4096, tuple(2**k for k in range(10, 15)), "bfloat16"),
    "megatron_swiglu": (8192, tuple(2**k for k in range(10, 16)), "bfloat16"),
    "relu_squared": (4096, tuple(2**k for k in range(7, 15)), "bfloat16"),
}
_F32 = "float32"


def _rms_chain(shape: tuple[int, int], dtype: str, *, add: bool) -> list[tuple[str, int]]:
    """The kernels of an eager RMS norm as Hugging Face writes it (upcast, pow, mean, rsqrt, scale,
    downcast, float32 weight), after a residual add when ``add``."""
    rows, hidden = shape
    up = dtype != _F32
    ks = [(f"{n}.to(float32)", layer_bytes("cast", shape, dtype)) for n in (("x", "residual") if add else ("x",))
          if up]
    if add:
        ks.append(("x + residual", layer_bytes("add", shape, _F32)))
    ks += [("pow(2)", layer_bytes("elementwise", shape, _F32)),
           ("mean(-1)", layer_bytes("elementwise", (rows, 1), _F32, read_elements=rows * hidden)),
           ("+ eps", layer_bytes("elementwise", (rows, 1), _F32)), ("rsqrt", layer_bytes("elementwise", (rows, 1), _F32)),
           ("x * rsqrt", layer_bytes("elementwise", shape, _F32, read_elements=rows * hidden + rows))]
    if up:
        ks.append((f"to({dtype})", layer_bytes("cast", shape, _F32, to=dtype)))
    # a float32 weight times the result: type promotion writes float32
    ks.append(("weight * y", layer_bytes("cast", shape, dtype) + hidden * PARAM_ITEMSIZE))
    if add and up:
        ks.append((f"residual.to({dtype})", layer_bytes("cast", shape, _F32, to=dtype)))
    return ks


def provider_kernels(kernel: str, provider: str, rows: int, hidden: int, dtype: str) -> list[tuple[str, int]] | None:
    """The kernels one forward call of ``provider``'s ``kernel`` launches on ``rows × hidden`` (SwiGLU:
    the output's, gate and up read side by side), as ``[(what, bytes)]`` by the byte model; None
    where what ran is not known (Megatron's jit-fused SwiGLU)."""
    shape = (rows, hidden)
    E = rows * hidden
    mul = ("elementwise", {"read_elements": 2 * E})  # gate·up: two inputs, one output
    fused = FUSED.get(kernel)
    if (kernel, provider) not in LABELS:
        raise LookupError(f"provider_kernels knows no provider {provider!r} for kernel {kernel!r}; known: "
                          f"{', '.join(f'{k}/{p}' for k, p in LABELS)}")
    if kernel == "layer_norm":
        return [(LABELS[kernel, provider], layer_bytes("layernorm", shape, dtype, persistent=provider == fused))]
    if kernel == "megatron_rms_norm":  # torch.nn.RMSNorm: PyTorch's layer norm kernel, rows read twice
        return [(LABELS[kernel, provider], layer_bytes("rmsnorm", shape, dtype, persistent=provider == fused))]
    if kernel == "rms_norm":
        return [(LABELS[kernel, provider], layer_bytes("rmsnorm", shape, dtype))] if provider == fused else \
            _rms_chain(shape, dtype, add=False)
    if kernel == "fused_add_rms_norm":
        if provider == fused:  # reads x and the residual, writes y and the new residual
            second_output = E * itemsize(canonical_dtype(dtype))
            return [(LABELS[kernel, provider], chain_bytes(["add", "rmsnorm"], shape, dtype, fused=True) + second_output)]
        if provider == "huggingface":
            return _rms_chain(shape, dtype, add=True)
        return [("x + residual", layer_bytes("add", shape, dtype)), ("Liger RMS norm", layer_bytes("rmsnorm", shape, dtype)),
                ("weight * y", layer_bytes("elementwise", shape, dtype, read_elements=E + hidden))]
    if kernel == "megatron_swiglu":
        if provider == "megatron":
            return None
        if provider in ("liger", "liger_in_place"):
            return [(LABELS[kernel, provider], chain_bytes(["silu", mul], shape, dtype, fused=True))]
        return [("silu(gate)", layer_bytes("silu", shape, dtype)),
                ("· * up", layer_bytes("elementwise", shape, dtype, **mul[1]))]
    if provider == fused:  # relu_squared
        return [(LABELS[kernel, provider], chain_bytes(["relu", "elementwise"], shape, dtype, fused=True))]
    return [("relu", layer_bytes("relu", shape, dtype)), ("square", layer_bytes("elementwise", shape, dtype))]


def _spec(device: Any) -> DeviceSpec | None:
    try:
        return device if isinstance(device, DeviceSpec) else device_spec(str(device)) if device else None
    except LookupError:
        return None


def _model_rows(spec: DeviceSpec) -> pd.DataFrame:
    """Liger's sweeps for every provider perfkit models, on ``spec``, without times."""
    rows = [{"device": spec.name, "kernel": k, "provider": p, "dtype": dt, "rows": r, "hidden": h,
             "time_s": np.nan, "time_s_p20": np.nan, "time_s_p80": np.nan}
            for (k, p) in LABELS for r, hs, dt in [SWEEPS[k]] for h in hs]
    return pd.DataFrame(rows)


def liger_forward(frame: pd.DataFrame | None, *, model: DeviceSpec | None = None) -> pd.DataFrame | None:
    """Liger's forward rows with the byte model beside each: ``label``, ``role`` ("fused", "eager"),
    ``twin`` (a provider that reruns another's kernel, :data:`TWINS`), ``kernels`` (launched), ``bytes`` (byte model), ``gbps`` (bytes ÷ time), ``fraction`` (of the
    datasheet bandwidth), ``predicted_s`` (Σ ``pk.memory_time`` of each kernel's bytes) and
    ``error`` (predicted ÷ measured − 1). ``frame``: ``pk.published("liger_memory_bound")`` (or one
    GPU's rows); None gives the model's rows on ``model`` (``time_s`` NaN), or None without it."""
    if frame is None:
        if model is None:
            return None
        if not isinstance(model, DeviceSpec):
            raise TypeError(f"model must be a DeviceSpec (pk.device_spec('H100-SXM')) or None, got {model!r}")
        base, meta = _model_rows(model), None
    else:
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be pk.published('liger_memory_bound') or None, got {type(frame).__name__}")
        missing = {"device", "kernel", "provider", "mode", "rows", "hidden", "dtype", "time_s"} - set(frame.columns)
        if missing:
            raise ValueError(f"frame lacks the columns {sorted(missing)} of pk.published('liger_memory_bound')")
        base, meta = frame[frame["mode"] == "forward"], frame.attrs.get("meta")
    out = []
    for r in base.itertuples(index=False):
        spec = _spec(r.device)
        ks = provider_kernels(r.kernel, r.provider, int(r.rows), int(r.hidden), str(r.dtype)) \
            if (r.kernel, r.provider) in LABELS else None
        nbytes = float(sum(b for _, b in ks)) if ks else np.nan
        predicted = sum(memory_time(b, spec) for _, b in ks) if ks and spec is not None else np.nan
        datasheet = spec.mem_bandwidth if spec is not None and spec.mem_bandwidth else np.nan
        out.append({"device": r.device, "kernel": r.kernel, "provider": r.provider,
                    "label": LABELS.get((r.kernel, r.provider), r.provider),
                    "role": "fused" if FUSED.get(r.kernel) == r.provider or r.provider == "liger_in_place" else "eager",
                    "twin": (r.kernel, r.provider) in TWINS, "dtype": r.dtype, "rows": int(r.rows),
                    "hidden": int(r.hidden),
                    "kernels": len(ks) if ks else np.nan, "bytes": nbytes, "time_s": r.time_s,
                    "time_s_p20": r.time_s_p20, "time_s_p80": r.time_s_p80,
                    "gbps": nbytes / r.time_s / 1e9, "fraction": nbytes / r.time_s / datasheet,
                    "predicted_s": predicted, "error": predicted / r.time_s - 1})
    result = pd.DataFrame(out)
    if meta:
        result.attrs["meta"] = dict(meta)
    if frame is None:
        result.attrs["model_of"] = model.name
    return result


_PAIR_KEYS = ["device", "kernel", "rows", "hidden"]


def fusion_pairs(forward: pd.DataFrame | None) -> pd.DataFrame | None:
    """Each pair of :data:`PAIRS` at each size, from :func:`liger_forward`'s frame: ``eager_s`` and
    ``fused_s`` (measured), ``ratio`` (eager ÷ fused), ``bytes_ratio`` (byte model), the model's
    ``predicted_ratio`` (Σ memory_time eager ÷ fused), ``error`` (predicted ÷ measured ratio − 1),
    ``eager_kernels`` and ``largest`` (the pair's largest size). Pure: None in, None out."""
    if forward is None:
        return None
    parts = []
    for kernel, eager in PAIRS:
        e = forward[(forward["kernel"] == kernel) & (forward["provider"] == eager)]
        f = forward[(forward["kernel"] == kernel) & (forward["provider"] == FUSED[kernel])]
        both = e.merge(f, on=_PAIR_KEYS, suffixes=("_e", "_f"))
        if len(both):
            parts.append(both.assign(eager=eager))
    if not parts:
        return forward.iloc[0:0].assign(ratio=[])
    p = pd.concat(parts, ignore_index=True)
    out = pd.DataFrame({
        "device": p["device"], "kernel": p["kernel"], "eager": p["eager"], "eager_label": p["label_e"],
        "fused_label": p["label_f"], "rows": p["rows"], "hidden": p["hidden"], "dtype": p["dtype_e"],
        "eager_kernels": p["kernels_e"], "bytes_eager": p["bytes_e"], "bytes_fused": p["bytes_f"],
        "bytes_ratio": p["bytes_e"] / p["bytes_f"], "eager_s": p["time_s_e"], "fused_s": p["time_s_f"],
        "ratio": p["time_s_e"] / p["time_s_f"], "predicted_eager_s": p["predicted_s_e"],
        "predicted_fused_s": p["predicted_s_f"], "predicted_ratio": p["predicted_s_e"] / p["predicted_s_f"]})
    out["error"] = out["predicted_ratio"] / out["ratio"] - 1
    out["largest"] = out["hidden"] == out.groupby(["device", "kernel", "eager"])["hidden"].transform("max")
    out.attrs.update(forward.attrs)
    return out


# ---------------------------------------------------------------------------------- one number each
def _rows_of(frame: pd.DataFrame | None, gpu: Any) -> pd.DataFrame | None:
    """Liger's forward rows (with the byte model) on ``gpu`` (a perfkit name or DeviceSpec), or None."""
    if frame is None:
        return None
    name = gpu.name if isinstance(gpu, DeviceSpec) else device_spec(gpu).name
    fwd = liger_forward(frame)
    fwd = fwd[fwd["device"] == name]
    return fwd if len(fwd) else None


def _pair(frame: pd.DataFrame | None, kernel: str, gpu: Any, eager: str | None) -> pd.Series | None:
    kernel = one_of("kernel", kernel, tuple(FUSED))
    eager = eager or next(p for k, p in PAIRS if k == kernel)
    fwd = _rows_of(frame, gpu)
    pairs = fusion_pairs(fwd) if fwd is not None else None
    if pairs is None:
        return None
    hit = pairs[(pairs["kernel"] == kernel) & (pairs["eager"] == eager) & pairs["largest"]]
    return hit.iloc[0] if len(hit) else None


def fusion_ratio_measured(frame: pd.DataFrame | None, kernel: str, gpu: Any, eager: str | None = None) -> float | None:
    """Measured eager ÷ fused forward time of ``kernel`` on ``gpu`` at its largest size (Liger's
    table ``frame``); ``eager``: the eager provider (default: the first of :data:`PAIRS`)."""
    hit = _pair(frame, kernel, gpu, eager)
    return None if hit is None else float(hit["ratio"])


def fusion_ratio_predicted(frame: pd.DataFrame | None, kernel: str, gpu: Any, eager: str | None = None) -> float | None:
    """The byte model's eager ÷ fused time for the same pair and size as :func:`fusion_ratio_measured`."""
    hit = _pair(frame, kernel, gpu, eager)
    return None if hit is None else float(hit["predicted_ratio"])


def fusion_saving_realised(frame: pd.DataFrame | None, gpu: Any) -> float | None:
    """Median over :data:`PAIRS` on ``gpu`` (largest size) of the time fusion saved, measured ÷ predicted."""
    fwd = _rows_of(frame, gpu)
    pairs = fusion_pairs(fwd) if fwd is not None else None
    if pairs is None or not len(pairs):
        return None
    p = pairs[pairs["largest"]]
    saved = (p["eager_s"] - p["fused_s"]) / (p["predicted_eager_s"] - p["predicted_fused_s"])
    return float(saved.median())


def achieved_fraction_of_bandwidth(frame: pd.DataFrame | None, gpu: Any, *, ceiling: float | None = None) -> float | None:
    """The best GB/s of a fused (Liger) forward kernel on ``gpu`` (byte-model bytes ÷ time), as a
    fraction of ``ceiling`` (bytes/s; default: the GPU's datasheet bandwidth)."""
    fwd = _rows_of(frame, gpu)
    if fwd is None:
        return None
    best = fwd.loc[fwd["role"] == "fused", "gbps"].max() * 1e9
    bw = positive_number("ceiling", ceiling) if ceiling is not None else _spec(fwd["device"].iloc[0]).mem_bandwidth
    return float(best / bw) if np.isfinite(best) else None


def bandwidth_spread(frame: pd.DataFrame | None, gpu: Any) -> float | None:
    """Slowest ÷ fastest GB/s of the fused (Liger) forward kernels on ``gpu``, each at its largest
    size: 1.0 when every kernel's time is its bytes at one bandwidth ("time is bytes")."""
    fwd = _rows_of(frame, gpu)
    if fwd is None:
        return None
    fused = fwd[fwd["role"] == "fused"]
    top = fused[fused["hidden"] == fused.groupby("kernel")["hidden"].transform("max")]
    return float(top["gbps"].min() / top["gbps"].max()) if len(top) else None


def byte_model_error(frame: pd.DataFrame | None, gpu: Any, kernel: str = "layer_norm",
                     provider: str | None = None) -> float | None:
    """Median |predicted ÷ measured − 1| of the byte model's forward time of ``kernel`` by
    ``provider`` (default: the fused one) on ``gpu``, over Liger's sizes."""
    kernel = one_of("kernel", kernel, tuple(FUSED))
    fwd = _rows_of(frame, gpu)
    if fwd is None:
        return None
    rows = fwd[(fwd["kernel"] == kernel) & (fwd["provider"] == (provider or FUSED[kernel]))]
    return float(rows["error"].abs().median()) if rows["error"].notna().any() else None


# ---------------------------------------------------------------------------------- for the page
_NAMES = {"device": "GPU", "label": "kernel", "dtype": "dtype", "hidden": "hidden", "kernels": "kernels",
          "bytes": ("MB moved (model)", 1e-6), "time_s": "measured", "predicted_s": "model", "gbps": "GB/s",
          "fraction": ("% of datasheet", 100.0), "error": ("model error (%)", 100.0),
          "eager_label": "eager", "fused_label": "fused", "eager_kernels": "eager kernels",
          "ratio": "measured (×)", "predicted_ratio": "model (×)", "bytes_ratio": "bytes (×)"}


def bandwidth_table(forward: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`liger_forward`'s rows at each provider's largest size, for ``pk.table``: GPU, kernel,
    the bytes the byte model counts, the GB/s they imply, % of the datasheet bandwidth and the
    model's error. Six columns, so that each stays wider than its longest word on a page's column
    (select rows first, e.g. ``forward[forward["role"] == "fused"]``). None in, None out."""
    if forward is None:
        return None
    f = forward[forward["bytes"].notna() & ~forward["twin"]]
    top = f[f["hidden"] == f.groupby(["device", "kernel", "provider"])["hidden"].transform("max")]
    top = top.sort_values(["device", "role", "fraction"], ascending=[False, False, False])
    return readable(top, ["device", "label", "bytes", "gbps", "fraction", "error"], names=_NAMES)


def pairs_table(pairs: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`fusion_pairs` at each pair's largest size, for ``pk.table``: the eager code (each
    against the fused kernel that replaces it), its kernel count, the measured eager ÷ fused ratio,
    the model's and the model's error; six columns. None in, None out."""
    if pairs is None:
        return None
    top = pairs[pairs["largest"]].astype({"eager_kernels": int})
    cols = ["device", "eager_label", "eager_kernels", "ratio", "predicted_ratio", "error"]
    return readable(top, cols, names=_NAMES)
