"""Convolution shapes, and the numbers the convolution chapter computes from its frames (no torch, no timing).

A convolution is a dict of its sizes (:func:`conv_shape`: N, C, H, W, K, R, S, stride, padding, dilation
and the output P, Q); :func:`conv_gemm` gives the implicit GEMM of a pass (:func:`perfkit.shapes.conv_gemms`).
The analyses take the frames of :mod:`perfkit.book.convolutions.experiments` (live, recorded or, for DeepBench's
columns, published) and return effects: ratios where larger means the rule matters more, as
:func:`perfkit.book.verdict.finding` expects. Times are seconds, throughput TFLOP/s.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..._validate import positive_int
from ...conv_model import CONV_LAYOUTS, conv_tensors, implicit_gemm_s, narrow_channels
from ...dtypes import canonical_dtype
from ...gemm_model import explain_gemm
from ...quantization import alignment
from ...shapes import conv_gemms, conv_output_size
from ...then_now import CONV_SHAPE, speedups
from ..reader import CONV_NAMES, readable

__all__ = ["CHANNEL_COLUMNS", "DB_COLUMNS", "DB_MEANINGS", "DEEPBENCH_CONVS", "PHASES", "PREDICTED", "SHAPE_COLUMNS", "TIME_COLUMNS",
           "channel_effects", "channel_points", "conv_flops", "conv_gemm", "conv_shape", "db_shape", "model_row",
           "param_points", "pass_s", "predicted_channels", "predicted_params",
           "first_layer_effects", "for_reader", "furthest_off", "layout_effects", "layout_payback", "median_speedup",
           "model_agreement", "param_effects", "predicted_deepbench", "predicted_published", "share_within",
           "speedup_by_channels", "throughput_gain"]

#: DeepBench training convolutions measured by ``conv_deepbench``: (W, H, C, N, K, R, S, pad_h, pad_w,
#: stride_h, stride_w), speech, face, VGG, ResNet-50, Inception and DeepSpeech layers.
DEEPBENCH_CONVS: tuple[tuple[int, ...], ...] = (
    (700, 161, 1, 16, 32, 5, 20, 0, 0, 2, 2), (341, 79, 32, 16, 32, 5, 10, 0, 0, 2, 2),
    (480, 48, 1, 16, 16, 3, 3, 1, 1, 1, 1), (240, 24, 16, 16, 32, 3, 3, 1, 1, 1, 1),
    (108, 108, 3, 8, 64, 3, 3, 1, 1, 2, 2), (224, 224, 3, 16, 64, 3, 3, 1, 1, 1, 1),
    (112, 112, 64, 16, 128, 3, 3, 1, 1, 1, 1), (56, 56, 128, 16, 256, 3, 3, 1, 1, 1, 1),
    (28, 28, 256, 16, 512, 3, 3, 1, 1, 1, 1), (14, 14, 512, 16, 512, 3, 3, 1, 1, 1, 1),
    (224, 224, 3, 16, 64, 7, 7, 3, 3, 2, 2), (56, 56, 64, 16, 64, 3, 3, 1, 1, 1, 1),
    (56, 56, 64, 16, 256, 1, 1, 0, 0, 2, 2), (14, 14, 256, 16, 256, 3, 3, 1, 1, 1, 1),
    (7, 7, 512, 16, 2048, 1, 1, 0, 0, 1, 1), (28, 28, 192, 16, 32, 5, 5, 2, 2, 1, 1),
    (14, 14, 512, 16, 192, 1, 1, 0, 0, 1, 1), (350, 80, 64, 16, 128, 5, 5, 1, 1, 2, 2),
    (84, 20, 256, 16, 512, 5, 5, 1, 1, 2, 2))
#: DeepBench's shape columns (:data:`perfkit.then_now.CONV_SHAPE` without the dtype), and their meanings.
DB_COLUMNS = ["W", "H", "C", "N", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w"]
DB_MEANINGS = dict(zip(DB_COLUMNS, ("input width, pixels", "input height, pixels", "input channels", "batch",
                                    "output channels (filters)", "filter height", "filter width",
                                    "padding along H, pixels", "padding along W, pixels", "stride along H",
                                    "stride along W")))
#: The meanings of the convolution experiments' shape and timing columns.
SHAPE_COLUMNS = dict(N="batch (images)", C="input channels", H="input height, pixels", W="input width, pixels",
                     K="output channels (filters)", R="filter height", S="filter width",
                     stride="stride (both axes)", padding="zero padding, pixels (both axes)",
                     dilation="dilation (both axes)", P="output height, pixels", Q="output width, pixels",
                     gemm_M="implicit GEMM rows (forward: N·P·Q)", gemm_N="implicit GEMM columns (forward: K)",
                     gemm_K="implicit GEMM inner dimension (forward: C·R·S)")
TIME_COLUMNS = dict(dtype="data type ('tf32': float32 tensors on TF32 Tensor Cores)",
                    time_s="median duration, seconds", iqr_s="inter-quartile range of the samples, seconds",
                    tflops="useful FLOPs 2·N·K·C·R·S·P·Q per pass / time_s, in 1e12 FLOP/s",
                    predicted_s="perfkit.conv_model.implicit_gemm_s: the implicit GEMM(s) of the row on the device "
                                "measured, their math by the GEMM model and the tensors' bytes once (not im2col), "
                                "seconds")
#: The columns of ``conv_channels``.
CHANNEL_COLUMNS = dict(C="input channels (= K, the output channels)", aligned="C is a multiple of 16 bytes "
                       "(8 for float16/bfloat16, 4 for tf32/float32)",
                       divisible_by="largest power of two ≤ 256 dividing C",
                       **{k: v for k, v in SHAPE_COLUMNS.items() if k != "C"}, **TIME_COLUMNS)
#: The passes of a convolution, by their implicit GEMMs' names.
PHASES = ("forward", "dgrad", "wgrad")
#: The model's column for each pass, and the measured column it predicts.
PREDICTED = {"predicted_s": ("forward", "time_s"), "predicted_bwd_inputs_s": ("dgrad", "bwd_inputs_time_s"),
             "predicted_bwd_params_s": ("wgrad", "bwd_params_time_s")}


def conv_shape(N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1) -> dict[str, Any]:
    """A convolution as a dict of its sizes, the output ``P`` × ``Q`` included (``ValueError`` if empty)."""
    P, Q = conv_output_size(H, W, R, S, stride, padding, dilation)
    return dict(N=positive_int("N", N), C=positive_int("C", C), H=H, W=W, K=positive_int("K", K), R=R, S=S,
                stride=stride, padding=padding, dilation=dilation, P=P, Q=Q)


def conv_gemm(s: dict, phase: str) -> tuple[int, int, int]:
    """(M, N, K) of the implicit GEMM of ``phase`` ('forward', 'dgrad' or 'wgrad') of the convolution ``s``."""
    return conv_gemms(s["N"], s["C"], s["H"], s["W"], s["K"], s["R"], s["S"], s["stride"], s["padding"],
                      s["dilation"])[phase]


def conv_flops(s: dict) -> float:
    """Useful FLOPs of one pass: 2·N·K·C·R·S·P·Q."""
    return 2.0 * s["N"] * s["K"] * s["C"] * s["R"] * s["S"] * s["P"] * s["Q"]


def db_shape(t, name: str = "shape") -> dict[str, Any]:
    """The convolution of a DeepBench tuple or row (its :data:`DB_COLUMNS`, in that order); ``ValueError``
    naming ``name`` for anything else."""
    values = list(t) if isinstance(t, (tuple, list, pd.Series)) else []
    if len(values) != len(DB_COLUMNS) or not all(isinstance(v, (int, np.integer)) for v in values):
        raise ValueError(f"{name} must hold tuples of DeepBench's {len(DB_COLUMNS)} integer sizes {DB_COLUMNS}, "
                         f"got {t!r}")
    W, H, C, N, K, R, S, ph, pw, sh, sw = (int(v) for v in values)
    return conv_shape(N, C, H, W, K, R, S, (sh, sw), (ph, pw))


def pass_s(s: dict, phase: str, dtype: str, spec, math_dtype: str | None = None) -> float:
    """Seconds of one pass of the convolution ``s`` as an implicit GEMM on ``spec``
    (:func:`perfkit.conv_model.implicit_gemm_s`): the GEMM model's math for the pass's GEMM
    (:func:`conv_gemm`, NVIDIA's sizes), its input, filters and output moved once, not the im2col matrix (an
    implicit GEMM gathers its A operand from the input; only a first layer's narrow channels are gathered tap
    by tap). NaN where the model has no peak for ``dtype`` (or ``math_dtype``, the P100's FP32 math)."""
    M, N, K = conv_gemm(s, phase)
    try:
        e = explain_gemm(M, N, K, dtype, spec, math_dtype=math_dtype, layout=CONV_LAYOUTS[phase])
    except LookupError:  # no peak known for this dtype on this device
        return math.nan
    return implicit_gemm_s(e, sum(conv_tensors(s, dtype).values()), narrow_channels(s["C"], dtype))


def model_row(s: dict, which: str, dtype: str, spec, **extra: Any) -> dict[str, Any]:
    """A row of the model alone: ``extra``, the shape ``s``, the implicit GEMM of pass ``which`` (its forward
    GEMM for ``"forward+backward"``, whose model adds the wgrad GEMM), empty timing columns, and
    ``predicted_s`` on ``spec`` (NaN when ``spec`` is None or has no peak for ``dtype``)."""
    M, N, K = conv_gemm(s, which if which in PHASES else "forward")
    phases = (which,) if which in PHASES else ("forward", "wgrad")
    model = sum(pass_s(s, p, dtype, spec) for p in phases) if spec is not None else math.nan
    return {**extra, **s, "gemm_M": M, "gemm_N": N, "gemm_K": K, "dtype": dtype, "time_s": math.nan,
            "iqr_s": math.nan, "tflops": math.nan, "predicted_s": model}


def channel_points(quick: bool = False, cpu: bool = False) -> list[int]:
    """C = K of ``conv_channels``: 56…72 every 1, around 128 and 256 (±1, ±4, ±8); quick: 60…68 and 127…129;
    CPU: 28…36."""
    if cpu or quick:
        return list(range(28, 37)) if cpu else list(range(60, 69)) + [127, 128, 129]
    return list(range(56, 73)) + [m + k for m in (128, 256) for k in (-8, -4, -1, 0, 1, 4, 8)]


def predicted_channels(spec, *, dtypes=("float16", "tf32"), batch: int = 32, size: int = 56) -> pd.DataFrame:
    """The model's view of ``conv_channels`` on ``spec`` (no measurement): its rows and columns with
    ``time_s``, ``iqr_s`` and ``tflops`` empty. Caption it with :func:`perfkit.provenance.modelled`."""
    rows = [model_row(conv_shape(batch, c, size, size, c, 3, 3, 1, 1), "forward", canonical_dtype(d), spec,
                      aligned=c % alignment(d) == 0, divisible_by=math.gcd(c, 256))
            for d in dtypes for c in channel_points()]
    return pd.DataFrame(rows, columns=list(CHANNEL_COLUMNS))


def param_points(cpu: bool = False, quick: bool = False) -> list[tuple[str, int, dict]]:
    """(sweep, value, shape) of ``conv_params``: from a 3×3 layer (C = K = 64 on 56², batch 32; on a CPU
    C = K = 32 on 28², batch 2), the batch, filter size (padded f // 2), stride and dilation (padded d)
    changed one at a time."""
    C, H, K, R, st, p, dil = (32, 28, 32, 3, 1, 1, 1) if cpu else (64, 56, 64, 3, 1, 1, 1)
    N0, batches = (2, (1, 2, 4, 8)) if cpu else (32, (8, 16, 128) if quick else (8, 16, 32, 64, 128))
    return ([("batch", b, conv_shape(b, C, H, H, K, R, R, st, p, dil)) for b in batches]
            + [("filter", f, conv_shape(N0, C, H, H, K, f, f, st, f // 2, dil)) for f in (1, 3, 5, 7)]
            + [("stride", v, conv_shape(N0, C, H, H, K, R, R, v, p, dil)) for v in (1, 2, 4)]
            + [("dilation", v, conv_shape(N0, C, H, H, K, R, R, st, v, v)) for v in (1, 2, 3)])


def predicted_params(spec, *, dtype: str = "float16") -> pd.DataFrame:
    """The model's view of ``conv_params`` on ``spec`` (no measurement): the GPU sweep's rows with ``time_s``,
    ``iqr_s`` and ``tflops`` empty. Caption it with :func:`perfkit.provenance.modelled`."""
    rows = [model_row(s, "forward", canonical_dtype(dtype), spec, sweep=n, swept=v) for n, v, s in param_points()]
    return pd.DataFrame(rows, columns=["sweep", "swept", *SHAPE_COLUMNS, *TIME_COLUMNS])


def predicted_published(frame: pd.DataFrame | None, spec) -> pd.DataFrame | None:
    """A frame with DeepBench's columns with the GEMM model of ``spec`` added for each pass (``predicted_s``,
    ``predicted_bwd_inputs_s``, ``predicted_bwd_params_s``, seconds; NaN where the model has no peak) and
    ``ratio``, the forward pass's model ÷ measured time. The math runs in the frame's ``math_dtype`` where it
    has one (the P100's "pseudo FP16" is FP32 math). Keeps ``attrs``. Pure: None in, None out."""
    if frame is None:
        return None
    out = frame.copy()
    for col, (phase, _) in PREDICTED.items():
        out[col] = [pass_s(db_shape(r[DB_COLUMNS]), phase, r["dtype"], spec, r.get("math_dtype"))
                    for _, r in frame.iterrows()]
    out["ratio"] = out["predicted_s"] / out["time_s"]
    out.attrs = dict(frame.attrs)
    return out


def predicted_deepbench(spec, shapes: Sequence[tuple[int, ...]] | None = None, dtype: str = "float16") -> pd.DataFrame:
    """The GEMM model's view of DeepBench's convolutions on ``spec`` (no measurement): DeepBench's columns
    (:data:`DB_COLUMNS`, dtype) with the model's time of each pass as ``time_s``, ``bwd_inputs_time_s`` and
    ``bwd_params_time_s`` (seconds). ``shapes``: DeepBench tuples, default
    :data:`DEEPBENCH_CONVS`. Caption it with :func:`perfkit.provenance.modelled`."""
    if shapes is None:
        shapes = DEEPBENCH_CONVS
    dtype = canonical_dtype(dtype)
    rows = []
    for t in shapes:
        s = db_shape(t, "shapes")
        times = {measured: pass_s(s, phase, dtype, spec) for phase, measured in PREDICTED.values()}
        rows.append({**dict(zip(DB_COLUMNS, (int(v) for v in t))), "dtype": dtype, **times})
    return pd.DataFrame(rows, columns=[*DB_COLUMNS, "dtype", "time_s", "bwd_inputs_time_s", "bwd_params_time_s"])


def share_within(frame: pd.DataFrame | None, low: float = 0.8, high: float = 1.25) -> float | None:
    """The share of the rows of :func:`predicted_published` whose ``ratio`` (the model ÷ the measured forward
    time) lies strictly between ``low`` and ``high``. Pure: None in, None out."""
    if frame is None:
        return None
    return float(((frame["ratio"] > low) & (frame["ratio"] < high)).mean())


def furthest_off(frame: pd.DataFrame | None, n: int = 5) -> pd.DataFrame | None:
    """The ``n`` rows of :func:`predicted_published` whose forward time the model underestimates most
    (smallest ``ratio``). Pure: None in, None out."""
    return None if frame is None else frame.nsmallest(positive_int("n", n), "ratio")


def speedup_by_channels(frame: pd.DataFrame | None, at: int = 8) -> dict[bool, float | None]:
    """The median ``speedup`` of a :func:`perfkit.then_now.speedups` frame of convolutions, over the layers
    with ``C >= at`` (key True) and with fewer channels (key False); None where there are none (or no frame)."""
    out: dict[bool, float | None] = {True: None, False: None}
    if frame is not None:
        for key, g in frame.groupby(frame["C"] >= at)["speedup"]:
            out[bool(key)] = float(g.median())
    return out


def median_speedup(now: pd.DataFrame | None, then: pd.DataFrame | None, column: str = "time_s") -> float | None:
    """The median speedup (then ÷ now) of ``column`` (seconds) over the DeepBench shapes both frames timed
    (:func:`perfkit.then_now.speedups` on its convolution shape). None if either is None or none is shared."""
    s = speedups(now, then, on=CONV_SHAPE, column=column)
    return None if s is None or not len(s) else float(s["speedup"].median())


def model_agreement(frame: pd.DataFrame | None) -> float | None:
    """Median over every row and pass of ``min(p/m, m/p)`` between a ``predicted*`` column and the time it
    predicts (see :func:`predicted_published`; a ``phase`` frame's ``predicted_s``/``time_s`` too): 1.0 when
    the model equals the measurement, 0.5 when it is typically a factor of two off. None without pairs."""
    if frame is None:
        return None
    ratios = [frame[p] / frame[m] for p, (_, m) in PREDICTED.items() if p in frame and m in frame]
    r = pd.concat(ratios).replace([np.inf, -np.inf], np.nan).dropna() if ratios else pd.Series(dtype=float)
    return float(np.minimum(r, 1 / r).median()) if len(r) else None


def channel_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``conv_channels`` per dtype: median TFLOP/s of aligned and unaligned C; ``align_gain``, the median over
    unaligned C of the mean TFLOP/s of its two aligned neighbours ÷ its own; ``tile_gain``, the median over
    multiples of 64 of their TFLOP/s ÷ the mean of C ± 8. NaN where the sweep lacks the neighbours."""
    if frame is None:
        return None
    rows = []
    for dtype, g in frame.groupby("dtype", sort=False):
        t, a = g.groupby("C")["tflops"].median(), alignment(dtype)
        align = [(t[c // a * a] + t[c // a * a + a]) / 2 / t[c] for c in t.index
                 if c % a and c // a * a in t and c // a * a + a in t]
        tile = [t[m] / ((t[m - 8] + t[m + 8]) / 2) for m in t.index if m % 64 == 0 and m - 8 in t and m + 8 in t]
        aligned = g["aligned"].astype(bool)
        rows.append({"dtype": dtype, "aligned_tflops": g.loc[aligned, "tflops"].median(),
                     "unaligned_tflops": g.loc[~aligned, "tflops"].median(),
                     "align_gain": float(np.median(align)) if align else np.nan,
                     "tile_gain": float(np.median(tile)) if tile else np.nan})
    return pd.DataFrame(rows)


def first_layer_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``conv_first_layer`` per stem and phase: ``speedup_4`` and ``speedup_8``, the time of C = 3 ÷ that of 4
    or 8 channels padded once (> 1: padding pays), and ``pad_cost_4``, ``pad_cost_8``: padding on every step
    ÷ padding once (> 1: the per-step F.pad costs that much)."""
    if frame is None:
        return None
    t = frame.groupby(["stem", "phase", "channels", "input_padding"], sort=False)["time_s"].median()
    rows = []
    for (stem, phase), g in t.groupby(level=[0, 1], sort=False):
        g = g.droplevel([0, 1])
        c3, c4, c8 = (g.get((c, "once" if c > 3 else "none"), np.nan) for c in (3, 4, 8))
        rows.append({"stem": stem, "phase": phase, "speedup_4": c3 / c4, "speedup_8": c3 / c8,
                     "pad_cost_4": g.get((4, "every step"), np.nan) / c4,
                     "pad_cost_8": g.get((8, "every step"), np.nan) / c8})
    return pd.DataFrame(rows)


def layout_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``conv_layout`` per layer: ``nhwc_gain`` (NCHW ÷ NHWC, each at its best flag), ``benchmark_gain``
    (steady time with cudnn.benchmark off ÷ on, each at its best layout; NaN on a CPU), ``autotune_s``
    (NHWC first call with the flag on − off, seconds), ``convert_s`` (the NCHW → NHWC copy, seconds) and
    ``convert_share`` (convert_s ÷ the NHWC forward time)."""
    if frame is None:
        return None
    rows = []
    for layer, g in frame.groupby("layer", sort=False):
        conv = g[g["op"] == "forward"]
        best = conv.groupby("layout")["time_s"].min()
        flag = conv.groupby("cudnn_benchmark")["time_s"].min()
        first = conv[conv["layout"] == "NHWC"].groupby("cudnn_benchmark")["first_call_s"].min()
        convert = g.loc[g["op"] != "forward", "time_s"].min()
        rows.append({"layer": layer, "nhwc_gain": best.get("NCHW", np.nan) / best.get("NHWC", np.nan),
                     "benchmark_gain": flag.get(False, np.nan) / flag.get(True, np.nan),
                     "autotune_s": first.get(True, np.nan) - first.get(False, np.nan),
                     "convert_s": convert, "convert_share": convert / best.get("NHWC", np.nan)})
    return pd.DataFrame(rows)


def param_effects(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """``conv_params`` per sweep: its first and last value, ``time_ratio`` and ``tflops_ratio`` (last ÷ first),
    and the same ratios of the model (``predicted_time_ratio``). A larger size that raises efficiency has
    ``tflops_ratio`` > 1 with ``time_ratio`` ≥ 1."""
    if frame is None:
        return None
    rows = []
    for name, g in frame.groupby("sweep", sort=False):
        g = g.sort_values("swept")
        a, b = g.iloc[0], g.iloc[-1]
        rows.append({"sweep": name, "first": a["swept"], "last": b["swept"], "time_ratio": b["time_s"] / a["time_s"],
                     "tflops_ratio": b["tflops"] / a["tflops"],
                     "predicted_time_ratio": b["predicted_s"] / a["predicted_s"]})
    return pd.DataFrame(rows)


def throughput_gain(frame: pd.DataFrame | None, small: int, large: int, *, column: str = "time_s") -> float | None:
    """Median, over the shapes a frame with DeepBench's columns has at batch ``small`` and at ``large``, of
    images per second at ``large`` ÷ at ``small`` (``column`` is the time; > 1: the larger batch is more
    efficient). None if no shape has both."""
    if frame is None or not len(frame):
        return None
    keys = [c for c in DB_COLUMNS + ["dtype"] if c != "N"]
    t = frame[frame["N"].isin([small, large])].groupby(keys + ["N"])[column].min().unstack("N")
    if small not in t or large not in t:
        return None
    gain = ((t[small] / small) / (t[large] / large)).dropna()
    return float(gain.median()) if len(gain) else None


def layout_payback(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """:func:`layout_effects` with ``repay_calls``: how many NHWC forward calls the time cudnn.benchmark
    saves per call takes to repay its autotuning (``autotune_s`` ÷ the steady NHWC time with the flag
    off − on; NaN on a CPU, where there is no flag to compare). Pure: None in, None out."""
    effects = layout_effects(frame)
    if effects is None:
        return None
    conv = frame[(frame["op"] == "forward") & (frame["layout"] == "NHWC")]
    steady = conv.pivot_table(index="layer", columns="cudnn_benchmark", values="time_s", aggfunc="min")
    if {False, True} <= set(steady.columns):
        per_call = (steady[False] - steady[True]).clip(lower=1e-9)
        effects["repay_calls"] = (effects["autotune_s"] / effects["layer"].map(per_call)).round()
    else:
        effects["repay_calls"] = np.nan
    return effects



def for_reader(frame: pd.DataFrame | None, columns: Sequence[str] | None = None, *,
               seconds: str | Mapping[str, str] | None = None) -> pd.DataFrame | None:
    """A convolution frame's ``columns`` named for the page (:data:`perfkit.book.reader.CONV_NAMES`),
    columns of seconds in the unit ``seconds`` (e.g. ``"µs"``), for :func:`perfkit.table`. Pure: None
    in, None out."""
    return readable(frame, columns, names=CONV_NAMES, seconds=seconds)
