"""The verdicts of chapter 05_convolutions, computed from the frames the chapter shows.

:func:`findings` reads a mapping of frames (None or absent where nothing was measured):

- the chapter's GPU experiments, live or recorded, by name: ``conv_passes``, ``conv_channels``,
  ``conv_first_layer``, ``conv_layout``, ``conv_params`` and ``conv_deepbench``; a frame measured
  on a CPU is never "now" (it counts as not measured);
- DeepBench's published FP16 convolutions: ``deepbench_v100`` (2019) and ``deepbench_p100`` (2018),
  as :func:`perfkit.provenance.published_counterparts` gives them.

:func:`effects` computes every effect (ratios where larger means the rule matters more; for the
model, 1.0 means exact agreement) with :mod:`perfkit.book.convolutions.analysis`.

No published measurement of convolutions on a current GPU exists here, so where nothing was
measured :func:`alternatives` gives each rule the model's prediction for an H100, labelled as such.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from ...devices import DeviceSpec, device_spec
from ...memory_model import memory_time
from ...provenance import published_counterparts
from ...then_now import CONV_SHAPE, speedups
from ..evidence import as_measured, from_model, today
from ..frames import gpu_rows, recorded
from ..verdict import Evidence, Finding, finding, instead_of
from . import analysis as ca
from .experiments import STEMS

TITLE = "Convolutions"
CHAPTER = "05_convolutions"

#: The chapter's GPU experiments whose frames findings() reads.
EXPERIMENTS = ("conv_passes", "conv_channels", "conv_first_layer", "conv_layout", "conv_params", "conv_deepbench")
#: The published frames findings() reads, and the GPU each comes from.
PUBLISHED = {"deepbench_v100": "V100-SXM2", "deepbench_p100": "P100-PCIe"}
#: The effects :func:`effects` returns, in the order of the verdict table.
EFFECTS = ("agreement_then", "agreement_now", "align_fp16", "align_tf32", "tile_gain", "pad4", "four_vs_8",
           "pad_cost", "nhwc_gain", "bench_gain", "batch_gain_then", "batch_gain_now", "generation_then",
           "generation_now")


def published_frames() -> dict[str, pd.DataFrame | None]:
    """DeepBench's FP16 convolutions on the V100 and the P100 (None where a GPU's file is missing)."""
    out: dict[str, pd.DataFrame | None] = {}
    for key, gpu in PUBLISHED.items():
        try:
            out[key] = next(iter(published_counterparts("conv_deepbench", gpus=(gpu,)).values()), None)
        except LookupError:
            out[key] = None
    return out


def frames() -> dict[str, pd.DataFrame | None]:
    """The recorded (never live, never CPU) and published frames that findings() reads."""
    return {**recorded(EXPERIMENTS), **published_frames()}


def _checked(frames: Any) -> dict[str, pd.DataFrame | None]:
    """``frames`` with every key, CPU frames replaced by None; TypeError/ValueError on bad input."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"frames must be a mapping of names to DataFrames or None, got {type(frames).__name__}")
    known = (*EXPERIMENTS, *PUBLISHED)
    unknown = [k for k in frames if k not in known]
    if unknown:
        raise ValueError(f"frames has unknown names {unknown}; accepted: {', '.join(known)}")
    return {name: gpu_rows(frames.get(name), f"frames[{name!r}]") for name in known}


def _number(value: Any) -> float | None:
    """``value`` as a float, None for None, NaN or infinity."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _median(series: pd.Series | None) -> float | None:
    return None if series is None or series.dropna().empty else _number(series.median())


def _channels(frame: pd.DataFrame | None) -> dict[str, float | None]:
    fx = ca.channel_effects(frame)
    if fx is None:
        return dict(align_fp16=None, align_tf32=None, tile_gain=None)
    fx = fx.set_index("dtype")
    return dict(align_fp16=_number(fx["align_gain"].get("float16")), align_tf32=_number(fx["align_gain"].get("tf32")),
                tile_gain=_number(fx["tile_gain"].get("float16")))


def _first_layer(frame: pd.DataFrame | None) -> dict[str, float | None]:
    """The 7×7 stride-2 stem, forward + weight gradient: C = 3 ÷ 4, time of 8 ÷ 4, every step ÷ once."""
    fx = ca.first_layer_effects(frame)
    none = dict(pad4=None, four_vs_8=None, pad_cost=None)
    if fx is None:
        return none
    fx = fx.set_index(["stem", "phase"])
    if ("7×7/2", "forward+backward") not in fx.index:
        return none
    r = fx.loc[("7×7/2", "forward+backward")]
    return dict(pad4=_number(r["speedup_4"]), four_vs_8=_number(r["speedup_4"] / r["speedup_8"]),
                pad_cost=_number(r["pad_cost_4"]))


def _layout(frame: pd.DataFrame | None) -> dict[str, float | None]:
    fx = ca.layout_effects(frame)
    if fx is None:
        return dict(nhwc_gain=None, bench_gain=None)
    return dict(nhwc_gain=_median(fx["nhwc_gain"]), bench_gain=_median(fx["benchmark_gain"]))


def _batch_gain(frame: pd.DataFrame | None) -> float | None:
    """TFLOP/s at batch 16 ÷ at batch 8 in the ``conv_params`` batch sweep."""
    if frame is None:
        return None
    b = frame[frame["sweep"] == "batch"].groupby("swept")["tflops"].median()
    return _number(b[16] / b[8]) if 8 in b.index and 16 in b.index else None


def _generation(now: pd.DataFrame | None, then: pd.DataFrame | None) -> float | None:
    """Median forward speedup of ``now`` over ``then`` on the DeepBench shapes both measured."""
    if now is None or then is None:
        return None
    return _median(speedups(now, then, on=CONV_SHAPE)["speedup"])


def effects(frames: Mapping[str, pd.DataFrame | None]) -> dict[str, float | None]:
    """Every effect of the verdict table (:data:`EFFECTS`), None where its frames are missing."""
    f = _checked(frames)
    v100, p100 = f["deepbench_v100"], f["deepbench_p100"]
    then = ca.predicted_published(v100, device_spec("V100-SXM2")) if v100 is not None else None
    return {"agreement_then": _number(ca.model_agreement(then)),
            "agreement_now": _number(ca.model_agreement(f["conv_passes"])),
            **_channels(f["conv_channels"]), **_first_layer(f["conv_first_layer"]), **_layout(f["conv_layout"]),
            "batch_gain_then": _number(ca.throughput_gain(v100, 8, 16)),
            "batch_gain_now": _batch_gain(f["conv_params"]),
            "generation_then": _generation(v100, p100),
            "generation_now": _generation(f["conv_deepbench"], v100)}


#: The published tables of current GPUs the verdicts can rest on: none measures convolutions.
MODERN: tuple[str, ...] = ()
#: The keys of :func:`alternatives`, one per rule in the order of :func:`findings`.
RULES: tuple[str, ...] = ("agreement", "align_fp16", "align_tf32", "tile_gain", "pad4", "four_vs_8", "pad_cost",
                          "nhwc", "bench", "batch_gain", "generation")
#: The first-layer variants the model prices: (channels, how the input is padded).
FIRST_LAYER = ((3, "none"), (4, "once"), (4, "every step"), (8, "once"), (8, "every step"))


def modern_frames() -> dict[str, pd.DataFrame | None]:
    """The published tables of :data:`MODERN`: none (no current GPU's convolutions are published here)."""
    return {}


def predicted_first_layer(spec: DeviceSpec, *, batch: int = 32, size: int = 224, dtype: str = "float16"
                          ) -> pd.DataFrame:
    """The model's ``conv_first_layer`` on ``spec``, forward+backward of the 7×7/2 stem (K = 64): the
    convolution that runs on ``channels`` (its forward and wgrad GEMMs), plus, padded "every step",
    the copy of the 3-channel input into ``channels`` (read 3, write ``channels``, at the memory model's
    bandwidth and latency)."""
    R, stride, pad = STEMS["7×7/2"]
    rows = []
    for c, how in FIRST_LAYER:
        run = ca.conv_shape(batch, c, size, size, 64, R, R, stride, pad)
        t = ca.model_row(run, "forward+backward", dtype, spec)["predicted_s"]
        if how == "every step":
            t += memory_time(batch * size * size * (3 + c) * 2, spec)
        rows.append({"stem": "7×7/2", "phase": "forward+backward", "channels": c, "input_padding": how, "time_s": t})
    return pd.DataFrame(rows)


def alternatives(published: Mapping[str, pd.DataFrame | None] | None = None,
                 spec: DeviceSpec | None = None) -> dict[str, Evidence | None]:
    """Each rule's "now" where nothing was measured (keys :data:`RULES`): the model's prediction for
    ``spec`` (default: the H100 SXM); no published measurement of a current GPU's convolutions
    exists, so ``published`` is not read."""
    spec = today(spec)
    channels = _channels(as_measured(ca.predicted_channels(spec)))
    first = _first_layer(predicted_first_layer(spec))
    params = as_measured(ca.predicted_params(spec))
    v100 = ca.predicted_params(device_spec("V100-SXM2"))["predicted_s"]
    generation = _median(v100 / params["predicted_s"])
    alike = "the model has no layout term: NCHW and NHWC are priced alike"
    return {
        "agreement": from_model(1.0, spec, "by construction: the model prices a convolution as its implicit GEMMs"),
        "align_fp16": from_model(channels["align_fp16"], spec, "align_gain, float16"),
        "align_tf32": from_model(channels["align_tf32"], spec, "align_gain, tf32"),
        "tile_gain": from_model(channels["tile_gain"], spec, "tile_gain of the model's channel sweep, float16"),
        "pad4": from_model(first["pad4"], spec, "7×7/2 stem, forward+backward: C = 3 ÷ C = 4"),
        "four_vs_8": from_model(first["four_vs_8"], spec, "7×7/2 stem: time of C = 8 ÷ C = 4"),
        "pad_cost": from_model(first["pad_cost"], spec, "7×7/2 stem: the per-step copy priced by the byte model"),
        "nhwc": from_model(1.0, spec, alike),
        "bench": from_model(1.0, spec, "the model always picks the best tile, as autotuning would: no gain"),
        "batch_gain": from_model(_batch_gain(params), spec, "TFLOP/s at batch 16 ÷ at batch 8, the model's "
                                                            "conv_params sweep"),
        "generation": from_model(generation, spec, "the model's V100 ÷ its H100, conv_params layers"),
    }


def findings(frames: Mapping[str, pd.DataFrame | None], *,
             instead: Mapping[str, Evidence | None] | None = None) -> list[Finding]:
    """One Finding per rule of the chapter, from frames (None where not measured); ``instead``
    (:func:`alternatives`) gives a predicted "now" to the rules nothing measured."""
    e = effects(frames)
    alt = instead_of(instead, RULES)
    f = _checked(frames)
    guide, gain = "NVIDIA conv guide", dict(holds_at=1.1, gone_below=1.03)
    return [
        finding("A convolution is its implicit GEMMs", f"{guide}; CUTLASS",
                "each pass costs what the GEMM model prices its GEMM at", then=e["agreement_then"],
                now=e["agreement_now"], holds_at=0.67, gone_below=0.33, fmt="{:.2f}",
                where="§1: model ÷ measured, folded", on=f["conv_passes"], instead=alt["agreement"]),
        finding("Channels divisible by 8 (FP16)", guide, "aligned C = K is faster", now=e["align_fp16"], **gain,
                where="§2: align_gain, float16", on=f["conv_channels"], instead=alt["align_fp16"]),
        finding("Channels divisible by 4 (TF32)", guide, "aligned C = K is faster", now=e["align_tf32"], **gain,
                where="§2: align_gain, tf32", on=f["conv_channels"], instead=alt["align_tf32"]),
        finding("Channels divisible by 64 or 256", guide, "better tiling", now=e["tile_gain"], **gain,
                where="§2: tile_gain, float16", on=f["conv_channels"], instead=alt["tile_gain"]),
        finding("Pad the first layer's 3 channels to 4", guide, "faster with stride 2", now=e["pad4"], **gain,
                where="§3: 7×7/2, forward+backward", on=f["conv_first_layer"], instead=alt["pad4"]),
        finding("… and 4 channels suffice", guide, "4 as fast as 8 with stride 2", now=e["four_vs_8"],
                holds_at=0.95, gone_below=0.8, where="§3: time of 8 ÷ 4", on=f["conv_first_layer"],
                instead=alt["four_vs_8"]),
        finding("Pad the input once, not every step", "perfkit (pk.padded_conv2d)", "F.pad on every step costs time",
                now=e["pad_cost"], holds_at=1.05, gone_below=1.01, where="§3: every step ÷ once, 4 channels",
                on=f["conv_first_layer"], instead=alt["pad_cost"]),
        finding("Prefer NHWC", guide, "NHWC faster than NCHW", now=e["nhwc_gain"], **gain,
                where="§4: median over layers", on=f["conv_layout"], instead=alt["nhwc"]),
        finding("Enable cudnn.benchmark", guide, "autotuned steady state faster", now=e["bench_gain"], **gain,
                where="§4: median over layers", on=f["conv_layout"], instead=alt["bench"]),
        finding("Larger sizes: more efficient, not faster", guide, "batch 16 vs 8: throughput",
                then=e["batch_gain_then"], now=e["batch_gain_now"], holds_at=1.15, gone_below=1.03,
                where="§5: TFLOP/s ratio", on=f["conv_params"], instead=alt["batch_gain"]),
        finding("A newer GPU runs the same layers faster", "Baidu DeepBench",
                "median forward speedup over the previous GPU", then=e["generation_then"], now=e["generation_now"],
                holds_at=2, gone_below=1.1, where="§6: then V100 ÷ P100, now ours ÷ V100", on=f["conv_deepbench"],
                instead=alt["generation"]),
    ]


__all__ = ["CHAPTER", "EFFECTS", "EXPERIMENTS", "MODERN", "PUBLISHED", "RULES", "TITLE", "alternatives", "effects",
           "findings", "frames", "modern_frames", "predicted_first_layer", "published_frames"]
