"""The verdicts of chapter 04_recurrent, computed from the frames the chapter shows.

The frames, by key (None where not measured):

- ``"rnn_combine_time"``, ``"rnn_hidden"``, ``"rnn_batch"``, ``"rnn_cudnn"``, ``"rnn_persistent"``:
  the experiments' frames from a GPU, live or recorded (a frame whose metadata says it ran on a
  CPU is ignored: it is never "now");
- ``"published_gemm"``: DeepBench's V100 GEMMs (``perfkit.published("gemm", "V100-SXM2")``);
- ``"published_rnn"``: DeepBench's V100 RNN layers in float16
  (``published_counterparts("rnn_cudnn")``).
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from ..data import published
from ..experiments.rnn_analysis import combine_speedup, deepbench_comparable, throughput_ratio
from ..then_now import counterpart, layout_spread
from ._core import Finding, finding
from ._frames import gpu_rows, recorded

TITLE = "Recurrent layers"
CHAPTER = "04_recurrent"

#: The experiments whose GPU frames the findings read.
EXPERIMENTS: tuple[str, ...] = ("rnn_combine_time", "rnn_hidden", "rnn_batch", "rnn_cudnn", "rnn_persistent")
#: The published frames, and the GPU they come from.
PUBLISHED_KEYS: tuple[str, ...] = ("published_gemm", "published_rnn")
THEN_GPU = "V100-SXM2"
KEYS: tuple[str, ...] = EXPERIMENTS + PUBLISHED_KEYS


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live) and published frames that findings() reads."""
    out = recorded(EXPERIMENTS)
    out["published_gemm"] = published("gemm", THEN_GPU)
    out["published_rnn"] = counterpart("rnn_cudnn", published("rnn", THEN_GPU), "float16")
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

    e["then_batch"] = throughput_ratio(v100_rnn, "batch", 128, 16)  # §6
    e["now_batch"] = throughput_ratio(deepbench_comparable(layers), "batch", 128, 16)

    e["vs_loop"] = throughput_ratio(persistent, "impl", "persistent", "gemm loop", batch=4)  # §7
    e["vs_cudnn"] = throughput_ratio(persistent, "impl", "persistent", "cudnn", batch=4)
    return e


def findings(frames: Mapping[str, pd.DataFrame | None]) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured)."""
    e = effects(frames)
    F, svail, nvidia, svail16 = finding, "Baidu SVAIL 2015", "NVIDIA RNN guide", "Baidu SVAIL 2016"
    strict = dict(gone_below=1.1)
    return [
        F("Combine over time", svail, "one GEMM over batch·T ≥ 1024 columns beats T per-step GEMMs",
          now=e["wide_speedup"], then=e["then_combine"], holds_at=2, **strict, where="§2"),
        F("Minibatch ≥ 32", svail, "×14 TFLOP/s from batch 1 to 32 (cuBLAS)", now=e["gain_32"], then=14,
          holds_at=7, **strict, where="§4"),
        F("Multiples of 32", svail, "over 4× lost at (2560, 125, 2560) vs N = 128", now=e["pen_125"], then=4,
          holds_at=2, **strict, where="§4"),
        F("Hidden a multiple of 64/256", f"{nvidia}; {svail}", "H = 1024 faster than 1000", now=e["h_1024"],
          holds_at=1.3, **strict, where="§3"),
        F("Hidden a multiple of 64/256", nvidia, "H = 2560 faster than 2568", now=e["h_2560"], holds_at=1.3,
          **strict, where="§3"),
        F("Fix the layout (NN, not TN)", svail, "slower layout ÷ faster, recurrent GEMM", now=e["spread"],
          then=e["then_spread"], holds_at=1.3, **strict, where="§4"),
        F("Doubling the minibatch costs < 2× the time", nvidia, "batch 128 vs 16: TFLOP/s of whole layers",
          now=e["now_batch"], then=e["then_batch"], holds_at=3, **strict, where="§6"),
        F("Use cuDNN", nvidia, "cuDNN faster than an eager loop of GEMMs", now=e["loop_cost"], holds_at=1.5,
          **strict, where="§5"),
        F("Use cuDNN", nvidia, "cuDNN faster than the loop replayed from a CUDA graph", now=e["graph_cost"],
          holds_at=1.5, **strict, where="§5"),
        F("Persistent kernels at small batch", svail16, "about 30× a GEMM-per-step loop at minibatch 4",
          now=e["vs_loop"], then=30, holds_at=10, **strict, where="§7"),
        F("Persistent kernels at small batch", svail16, "faster than the vendor library at minibatch 4",
          now=e["vs_cudnn"], holds_at=2, **strict, where="§7"),
    ]
