"""The verdicts of chapter 04_recurrent, computed from the frames the chapter shows.

The frames, by key (None where not measured):

- ``"rnn_combine_time"``, ``"rnn_hidden"``, ``"rnn_batch"``, ``"rnn_cudnn"``, ``"rnn_persistent"``:
  the experiments' frames from a GPU, live or recorded (a frame whose metadata says it ran on a
  CPU is ignored: it is never "now");
- ``"published_gemm"``: DeepBench's V100 GEMMs (``perfkit.published("deepbench_gemm", "V100-SXM2")``);
- ``"published_rnn"``: DeepBench's V100 RNN layers in float16
  (``published_counterparts("rnn_cudnn")``).

Where nothing was measured, :func:`alternatives` gives each rule a "now": OpenXLA's published H100
GEMMs for "combine over time", else the GEMM model's prediction for an H100.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from ...devices import DeviceSpec
from ...gemm_model import explain_gemm
from ...published_data import published
from ...shapes import rnn_gemms
from ...then_now import counterpart, layout_spread
from ..evidence import frame_of, from_model, from_published, modern, number, prefer, today, xla_rows
from ..frames import gpu_rows, recorded
from ...experiments.measure import predicted_s
from ..verdict import Evidence, Finding, finding, instead_of
from .analysis import combine_speedup, deepbench_comparable, throughput_ratio
from .experiments import DEEPBENCH_LAYERS

TITLE = "Recurrent layers"
CHAPTER = "04_recurrent"

#: The experiments whose GPU frames the findings read.
EXPERIMENTS: tuple[str, ...] = ("rnn_combine_time", "rnn_hidden", "rnn_batch", "rnn_cudnn", "rnn_persistent")
#: The published frames, and the GPU they come from.
PUBLISHED_KEYS: tuple[str, ...] = ("published_gemm", "published_rnn")
THEN_GPU = "V100-SXM2"
KEYS: tuple[str, ...] = EXPERIMENTS + PUBLISHED_KEYS
#: The published tables of current GPUs the verdicts can rest on (see :func:`alternatives`).
MODERN: tuple[str, ...] = ("xla_h100_gemm",)
#: The keys of :func:`alternatives`, one per rule in the order of :func:`findings`.
RULES: tuple[str, ...] = ("combine", "gain_32", "pen_125", "h_1024", "h_2560", "spread", "batch", "loop", "graph",
                          "vs_loop", "vs_cudnn")
#: XLA's per-step batch (its smallest N) and the steps combined into one GEMM of ≥ 1024 columns.
XLA_STEP_BATCH, XLA_STEPS = 256, (4, 8, 16)


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live) and published frames that findings() reads."""
    out = recorded(EXPERIMENTS)
    try:
        out["published_gemm"] = published("deepbench_gemm", THEN_GPU)
        out["published_rnn"] = counterpart("rnn_cudnn", published("deepbench_rnn", THEN_GPU), "float16")
    except LookupError:  # no published-data folder here: the findings say "no data yet"
        out["published_gemm"] = out["published_rnn"] = None
    return out


def _gpu(frames: Mapping[str, Any], key: str) -> pd.DataFrame | None:
    """``frames[key]`` unless it is missing, empty or measured on a CPU."""
    return gpu_rows(frames.get(key), f"frames[{key!r}]")


def _published(frames: Mapping[str, Any], key: str) -> pd.DataFrame | None:
    f = frames.get(key)
    if f is not None and not isinstance(f, pd.DataFrame):
        raise TypeError(f"frames[{key!r}] must be a DataFrame or None, got {type(f).__name__}")
    return None if f is None or not len(f) else f


def effects(frames: Mapping[str, pd.DataFrame | None]) -> dict[str, float | None]:
    """The effects the verdicts judge (ratios; None where a frame or a shape is missing):
    ``wide_speedup``, ``then_combine``, ``gain_32``, ``pen_125``, ``h_1024``, ``h_2560``,
    ``spread``, ``then_spread``, ``now_batch``, ``then_batch``, ``loop_cost``, ``graph_cost``,
    ``vs_loop``, ``vs_cudnn``."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of name → DataFrame or None, got {type(frames).__name__}")
    unknown = set(frames) - set(KEYS)
    if unknown:
        raise ValueError(f"frames has unknown key(s) {sorted(unknown)}; accepted: {list(KEYS)}")
    combine, hidden, batch, layers, persistent = (_gpu(frames, k) for k in EXPERIMENTS)
    v100_gemm, v100_rnn = (_published(frames, k) for k in PUBLISHED_KEYS)
    e: dict[str, float | None] = {}

    speed = combine_speedup(combine)  # §2: one GEMM over batch·T ≥ 1024 columns vs T GEMMs
    wide = None if speed is None else speed[speed["columns"] >= 1024]
    e["wide_speedup"] = None if wide is None or not len(wide) else float(wide["speedup"].median())
    e["then_combine"] = None if v100_gemm is None else throughput_ratio(
        v100_gemm, "N", 7000, 16, on=["M", "K", "layout"], M=2560, K=2560, dtype="float16", layout="NN")

    e["h_1024"] = throughput_ratio(hidden, "hidden", 1024, 1000)  # §3
    e["h_2560"] = throughput_ratio(hidden, "hidden", 2560, 2568)

    vanilla = dict(cell="rnn", hidden=2560, layout="NN")  # §4
    e["gain_32"] = throughput_ratio(batch, "batch", 32, 1, **vanilla)
    e["pen_125"] = throughput_ratio(batch, "batch", 128, 125, **vanilla)
    spreads = None if batch is None else layout_spread(batch)["spread"]
    e["spread"] = None if spreads is None or not len(spreads) else float(spreads.median())
    e["then_spread"] = None
    if v100_gemm is not None:
        g = v100_gemm
        square = g[(g["M"] == 2560) & (g["K"] == 2560) & (g["N"] <= 256) & (g["dtype"] == "float16")]
        then = layout_spread(square)["spread"]
        e["then_spread"] = float(then.median()) if len(then) else None

    e["loop_cost"] = throughput_ratio(layers, "impl", "cudnn", "gemm loop")  # §5
    e["graph_cost"] = throughput_ratio(layers, "impl", "cudnn", "gemm loop (CUDA graph)")

    e["then_batch"] = throughput_ratio(v100_rnn, "batch", 128, 16)  # §5: then and now
    e["now_batch"] = throughput_ratio(deepbench_comparable(layers), "batch", 128, 16)

    e["vs_loop"] = throughput_ratio(persistent, "impl", "persistent", "gemm loop", batch=4)  # §6
    e["vs_cudnn"] = throughput_ratio(persistent, "impl", "persistent", "cudnn", batch=4)
    return e


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN` (None where the published-data folder lacks one)."""
    return modern(MODERN)


def xla_combine_speedup(xla: pd.DataFrame | None) -> float | None:
    """Combining T steps in XLA's H100 GEMMs (bf16, b = 1): the median over its (M, K) and T in
    :data:`XLA_STEPS` of T × time(N = 256) ÷ time(N = 256·T), T per-step GEMMs against one GEMM of
    ≥ 1024 columns. None without the rows."""
    rows = xla_rows(xla)
    if rows is None:
        return None
    t = rows[rows["dtype"] == "bfloat16"].pivot_table(index=["M", "K"], columns="N", values="time_s")
    ratios = [T * t[XLA_STEP_BATCH] / t[XLA_STEP_BATCH * T] for T in XLA_STEPS
              if XLA_STEP_BATCH in t and XLA_STEP_BATCH * T in t]
    return number(pd.concat(ratios).median()) if ratios else None


def _model_gemms(points, spec: DeviceSpec, dtype: str = "float16") -> pd.DataFrame:
    """The model's recurrent GEMM of each (cell, hidden, batch, extra) point, as rnn_batch rows."""
    rows = []
    for c, h, b, extra in points:
        M, N, K = rnn_gemms(c, h, h, b, 1)["recurrent"]
        t = predicted_s(M, N, K, dtype, spec)
        rows.append({"cell": c, "hidden": h, "batch": b, "dtype": dtype, "M": M, "N": N, "K": K, "time_s": t,
                     "tflops": 2.0 * M * N * K / t / 1e12, **extra})
    return pd.DataFrame(rows)


def model_effects(spec: DeviceSpec) -> dict[str, float | None]:
    """The effects of :func:`effects` that the GEMM model predicts on ``spec`` (float16), from the
    experiments' GPU shapes; the model has no layout term and prices cuDNN, the loop and a CUDA
    graph alike (their GEMMs), so those effects are 1.0."""
    e: dict[str, float | None] = {}
    M, N, K = rnn_gemms("lstm", 1024, 1024, 16, 64)["input"]  # §2: the chapter's LSTM, b = 16, T = 64
    e["wide_speedup"] = 64 * predicted_s(M, 16, K, "float16", spec) / predicted_s(M, N, K, "float16", spec)
    batches = (1, 2, 4, 8, 9, 16, 24, 32, 48, 64, 96, 125, 128, 160, 192, 256)
    batch = _model_gemms([(c, h, b, {"layout": "NN"}) for c in ("rnn", "lstm") for h in (1024, 2560)
                          for b in batches], spec)
    e["gain_32"] = throughput_ratio(batch, "batch", 32, 1, cell="rnn", hidden=2560, layout="NN")
    e["pen_125"] = throughput_ratio(batch, "batch", 128, 125, cell="rnn", hidden=2560, layout="NN")
    hidden = _model_gemms([(c, h, b, {}) for c in ("rnn", "lstm") for b in (32, 128)
                           for h in (1000, 1024, 2560, 2568)], spec)
    e["h_1024"] = throughput_ratio(hidden, "hidden", 1024, 1000)
    e["h_2560"] = throughput_ratio(hidden, "hidden", 2560, 2568)
    layers = []
    for c, h, b, t in DEEPBENCH_LAYERS:
        g = rnn_gemms(c, h, h, b, t)
        layers.append({"cell": c, "hidden": h, "batch": b, "timesteps": t, "dtype": "float16", "impl": "cudnn",
                       "input_gemm_s": predicted_s(*g["input"], "float16", spec),
                       "time_s": predicted_s(*g["input"], "float16", spec)
                       + t * predicted_s(*g["recurrent"], "float16", spec)})
    e["now_batch"] = throughput_ratio(deepbench_comparable(pd.DataFrame(layers)), "batch", 128, 16)
    step = explain_gemm(2048, 4, 2048, "float16", spec)  # §6: one loop step at minibatch 4, U reloaded
    on_chip = 2.0 * 2048 * 4 * 2048 / step.flop_s_ceiling  # its FLOPs at the achievable rate, U on chip
    e["vs_loop"] = e["vs_cudnn"] = step.predicted_s / on_chip
    return e


def alternatives(published: Mapping[str, pd.DataFrame | None] | None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): XLA's published H100 GEMMs
    for "combine over time", else the GEMM model's prediction for ``spec`` (default: the H100 SXM).
    ``published`` maps the names of :data:`MODERN` to their frames (None or absent: not available)."""
    spec = today(spec)
    xla = frame_of(published, "xla_h100_gemm")
    m = model_effects(spec)
    alike = "the model prices cuDNN, the loop and a CUDA graph alike: each step is its GEMM"
    return {
        "combine": prefer(
            from_published(xla_combine_speedup(xla), xla, "CUPTI kernel time, bf16: T GEMMs of N = "
                           f"{XLA_STEP_BATCH} ÷ one of N = {XLA_STEP_BATCH}·T, T = 4, 8, 16, median over M, K "
                           f"(XLA's smallest N is {XLA_STEP_BATCH})"),
            from_model(m["wide_speedup"], spec, "LSTM H = 1024: 64 steps of N = 16 ÷ one GEMM of N = 1024")),
        "gain_32": from_model(m["gain_32"], spec, "recurrent GEMM, H = 2560, float16"),
        "pen_125": from_model(m["pen_125"], spec, "recurrent GEMM, H = 2560"),
        "h_1024": from_model(m["h_1024"], spec, "recurrent GEMMs at batch 32 and 128"),
        "h_2560": from_model(m["h_2560"], spec, "recurrent GEMMs at batch 32 and 128"),
        "spread": from_model(1.0, spec, "the model has no layout term: it prices every layout alike"),
        "batch": from_model(m["now_batch"], spec, "DeepBench's layers as their GEMMs, batch 128 ÷ 16"),
        "loop": from_model(1.0, spec, alike),
        "graph": from_model(1.0, spec, alike),
        "vs_loop": from_model(m["vs_loop"], spec, "H = 2048, batch 4: a loop step (launch latency, U reloaded) ÷ "
                              "its math alone, U kept on chip: an upper bound (no barrier cost)"),
        "vs_cudnn": from_model(m["vs_cudnn"], spec, "as the loop: the model prices cuDNN's step as its GEMM; an "
                               "upper bound (no barrier cost)"),
    }


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured); ``instead``
    (:func:`alternatives`) gives a published or predicted "now" to the rules nothing measured."""
    e = effects(frames)
    alt = instead_of(instead, RULES)
    combine, hidden, batch, layers, persistent = (frames.get(k) for k in EXPERIMENTS)
    F, svail, nvidia, svail16 = finding, "Baidu SVAIL 2015", "NVIDIA RNN guide", "Baidu SVAIL 2016"
    strict = dict(gone_below=1.1)
    return [
        F("Combine over time", svail, "one GEMM over batch·T ≥ 1024 columns beats T per-step GEMMs",
          now=e["wide_speedup"], then=e["then_combine"], holds_at=2, **strict, where="§2", on=combine,
          instead=alt["combine"]),
        F("Minibatch ≥ 32", svail, "×14 TFLOP/s from batch 1 to 32 (cuBLAS)", now=e["gain_32"], then=14,
          holds_at=7, **strict, where="§4", on=batch, instead=alt["gain_32"]),
        F("Multiples of 32", svail, "over 4× lost at (2560, 125, 2560) vs N = 128", now=e["pen_125"], then=4,
          holds_at=2, **strict, where="§4", on=batch, instead=alt["pen_125"]),
        F("Hidden a multiple of 64/256", f"{nvidia}; {svail}", "H = 1024 faster than 1000", now=e["h_1024"],
          holds_at=1.3, **strict, where="§3", on=hidden, instead=alt["h_1024"]),
        F("Hidden a multiple of 64/256", nvidia, "H = 2560 faster than 2568", now=e["h_2560"], holds_at=1.3,
          **strict, where="§3", on=hidden, instead=alt["h_2560"]),
        F("Fix the layout (NN, not TN)", svail, "slower layout ÷ faster, recurrent GEMM", now=e["spread"],
          then=e["then_spread"], holds_at=1.3, **strict, where="§4", on=batch, instead=alt["spread"]),
        F("Doubling the minibatch costs < 2× the time", nvidia, "batch 128 vs 16: TFLOP/s of whole layers",
          now=e["now_batch"], then=e["then_batch"], holds_at=3, **strict, where="§5", on=layers,
          instead=alt["batch"]),
        F("Use cuDNN", nvidia, "cuDNN faster than an eager loop of GEMMs", now=e["loop_cost"], holds_at=1.5,
          **strict, where="§5", on=layers, instead=alt["loop"]),
        F("Use cuDNN", nvidia, "cuDNN faster than the loop replayed from a CUDA graph", now=e["graph_cost"],
          holds_at=1.5, **strict, where="§5", on=layers, instead=alt["graph"]),
        F("Persistent kernels at small batch", svail16, "about 30× a GEMM-per-step loop at minibatch 4",
          now=e["vs_loop"], then=30, holds_at=10, **strict, where="§6", on=persistent, instead=alt["vs_loop"]),
        F("Persistent kernels at small batch", svail16, "faster than the vendor library at minibatch 4",
          now=e["vs_cudnn"], holds_at=2, **strict, where="§6", on=persistent, instead=alt["vs_cudnn"]),
    ]
