"""Convolution experiments (E10): passes, channels, first layer, layouts, parameters, DeepBench's shapes.

An N×C×H×W input convolved with K filters of C×R×S (output N×K×P×Q) is three implicit GEMMs (NVIDIA's
Convolutional Layers guide, :func:`perfkit.shapes.conv_gemms`): forward (N·P·Q, K, C·R·S), "dgrad"
(N·H·W, C, K·R·S) and "wgrad" (C·R·S, K, N·P·Q), in the columns ``gemm_M``, ``gemm_N``, ``gemm_K``
(``N`` is the batch). Rows hold ``time_s`` (median seconds of :func:`perfkit.timing.bench`), ``iqr_s``,
``tflops`` (2·N·K·C·R·S·P·Q per pass / time_s / 1e12) and ``predicted_s``, the GEMM model of the pass's
implicit GEMM on the device measured (NaN without a peak for the dtype): the GEMM only, not cuDNN's other
algorithms, layout transposes or its padding of unaligned channels. GPU runs use NHWC (``channels_last``)
unless a ``layout`` column says otherwise; a CPU (or ``quick``) runs small float32 shapes in seconds.
Analyses of the frames are in :mod:`perfkit.book.convolutions.analysis` (re-exported here).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pandas as pd

from ..._validate import dtype_name, dtype_names, positive_int, sequence_of
from ...dtypes import itemsize, torch_dtype
from ...matmul import seeded_on
from ...placement import ensure_fits, resolve_device, tensor_device, timer
from ...quantization import alignment
from ...units import MiB
from ...experiments.measure import measured_spec, sweep, timing_row
from ...experiments.registry import register
from .analysis import (CHANNEL_COLUMNS, DB_COLUMNS, DB_MEANINGS, DEEPBENCH_CONVS, PHASES, PREDICTED, SHAPE_COLUMNS,
    TIME_COLUMNS, channel_effects, channel_points, conv_flops, conv_shape, db_shape, first_layer_effects, for_reader,
    layout_effects, layout_payback, model_agreement, model_row, param_effects, param_points, predicted_channels,
    predicted_params, predicted_published, throughput_gain)

__all__ = ["DEEPBENCH_CONVS", "PHASES", "RESNET_LAYERS", "STEMS", "channel_effects", "channel_points",
           "conv_channels", "conv_deepbench", "conv_first_layer", "conv_layout", "conv_params", "conv_passes",
           "first_layer_effects", "for_reader", "layout_effects", "layout_payback",
           "model_agreement", "param_effects", "predicted_channels", "predicted_params", "predicted_published",
           "throughput_gain"]

#: ResNet-50 layers at batch 1 (C, H, W, K, R, S, stride, padding): a conv2_x bottleneck's 3×3 and 1×1s,
#: conv3_x's strided 3×3 (ResNet v1.5) and a conv4_x 3×3.
RESNET_LAYERS: tuple[tuple[int, ...], ...] = ((64, 56, 56, 64, 3, 3, 1, 1), (256, 56, 56, 64, 1, 1, 1, 0),
                                             (64, 56, 56, 256, 1, 1, 1, 0), (128, 56, 56, 128, 3, 3, 2, 1),
                                             (256, 14, 14, 256, 3, 3, 1, 1))
#: First layers on 224² RGB images, K = 64: ResNet's 7×7 stride-2 stem and a stride-1 3×3 (VGG's).
STEMS: dict[str, tuple] = {"7×7/2": (7, 2, 3), "3×3/1": (3, 1, 1)}  # filter, stride, padding


def _layers(layers, N: int, cpu: bool) -> dict[str, dict]:
    """``layers`` (C, H, W, K, R, S, stride, padding) at batch ``N`` (images halved on a CPU), by name."""
    out = {}
    for C, H, W, K, R, S, st, p in layers:
        s = conv_shape(N, C, H // (2 if cpu else 1), W // (2 if cpu else 1), K, R, S, st, p)
        out[f"{R}×{S}{f'/{st}' if st > 1 else ''} {C}→{K}, {s['H']}²"] = s
    return out


def _bytes(s: dict, dtype: str, device: str) -> int:
    """Bytes a pass allocates: input, weight, output and their gradients, plus 256 MiB of cuDNN workspace."""
    n = s["N"] * s["C"] * s["H"] * s["W"] + s["K"] * s["C"] * s["R"] * s["S"] + s["N"] * s["K"] * s["P"] * s["Q"]
    return 2 * itemsize(dtype) * n + (256 * MiB if device == "cuda" else 0)


def _setup(device: str, dtype: Any, accepted=("float16", "bfloat16", "tf32", "float32")) -> tuple[str, str, bool]:
    """(device, dtype, cpu): ``dtype`` checked against ``accepted``, then the device; a CPU always runs float32."""
    d = dtype_name("dtype", dtype, accepted)
    device = resolve_device(device)
    return device, "float32" if device == "cpu" else d, device == "cpu"


def _bench(fn: Callable[[], Any], device: str, **kw: Any):
    """:func:`perfkit.timing.bench` on ``device``; a CPU run (which shows a mechanism) samples for 0.05 s."""
    cpu = dict(rep_s=0.05, warmup_s=0.01, max_time_s=0.5) if device == "cpu" else {}
    return timer(fn, device=device, **cpu, **kw)


def _math(fn: Callable[[], Any], dtype: str, device: str) -> Callable[[], Any]:
    """``fn`` run with cuDNN's TF32 switch on for ``"tf32"`` and off for ``"float32"`` (a GPU only)."""
    if device != "cuda" or dtype not in ("tf32", "float32"):
        return fn
    import torch

    def run(flags=torch.backends.cudnn):
        old, flags.allow_tf32 = flags.allow_tf32, dtype == "tf32"
        try:
            return fn()
        finally:
            flags.allow_tf32 = old

    return run


def _randn(shape: tuple, dtype: str, device: str, layout: str = "NCHW", seed: int = 0):
    """A seeded standard-normal 4-D tensor in ``dtype`` on ``device`` (meta on a pretend GPU), NCHW or
    NHWC (``channels_last``)."""
    import torch

    on, gen = seeded_on(device, seed)
    x = torch.randn(shape, generator=gen, device=on)
    x = x.to(torch_dtype(dtype))
    return x.contiguous(memory_format=torch.channels_last) if layout == "NHWC" else x


def _conv_fn(s: dict, phase: str, dtype: str, device: str, layout: str = "NHWC") -> Callable[[], Any]:
    """A zero-argument function running one pass of the convolution ``s`` on seeded tensors in ``layout``:
    ``F.conv2d`` (forward), ``torch.nn.grad.conv2d_input`` (dgrad) or ``conv2d_weight`` (wgrad)."""
    import torch.nn.functional as F
    from torch.nn import grad

    x = _randn((s["N"], s["C"], s["H"], s["W"]), dtype, device, layout)
    w = _randn((s["K"], s["C"], s["R"], s["S"]), dtype, device, layout, 1)
    g = _randn((s["N"], s["K"], s["P"], s["Q"]), dtype, device, layout, 2) if phase != "forward" else None
    kw = dict(stride=s["stride"], padding=s["padding"], dilation=s["dilation"])
    fn = {"forward": lambda: F.conv2d(x, w, None, **kw), "dgrad": lambda: grad.conv2d_input(x.shape, w, g, **kw),
          "wgrad": lambda: grad.conv2d_weight(x, w.shape, g, **kw)}[phase]
    return _math(fn, dtype, device)


def _row(s: dict, which: str, dtype: str, m, spec, flops_passes: int = 1, **extra: Any) -> dict[str, Any]:
    """:func:`~perfkit.book.convolutions.analysis.model_row` with the timing of the Measurement ``m``."""
    return dict(model_row(s, which, dtype, spec, **extra), **timing_row(m),
                tflops=m.tflop_s(flops_passes * conv_flops(s)))


@register("conv_passes", "Forward, activation-gradient and weight-gradient passes of ResNet-50 convolutions "
          "(cuDNN), each beside the GEMM model's time for its implicit GEMM (NVIDIA Convolutional Layers guide)",
          dict(layer="the layer: filter, channels in→out, input size", phase="'forward', 'dgrad' (input "
               "gradient) or 'wgrad' (weight gradient)", **SHAPE_COLUMNS, **TIME_COLUMNS), needs=("cuda",))
def conv_passes(*, batch=None, dtype="float16", device="auto", quick=False, progress=True,
                on_row=None) -> pd.DataFrame:
    """Each pass of :data:`RESNET_LAYERS` at batch 32 (GPU), 8 (``quick``) or 1 at half the image size (CPU)."""
    device, d, cpu = _setup(device, dtype)
    N = positive_int("batch", batch if batch is not None else 1 if cpu else 8 if quick else 32)
    shapes = _layers(RESNET_LAYERS, N, cpu)
    ensure_fits(max(_bytes(s, d, device) for s in shapes.values()), device, what="conv_passes")
    spec = measured_spec(device)

    def measure(p):
        name, phase = p
        m = _bench(_conv_fn(shapes[name], phase, d, device), device, label=f"{phase} {name}")
        return _row(shapes[name], phase, d, m, spec, layer=name, phase=phase)

    return sweep([(n, ph) for n in shapes for ph in PHASES], measure, on_row=on_row, progress=progress,
                 desc="conv passes")


@register("conv_channels", "Forward 3×3 convolution with C = K channels stepping around multiples of 8, 64 and "
          "256, in float16 and tf32 (NVIDIA: divisible by 8 for FP16, 4 for TF32; 64 or 256 for tiling)",
          CHANNEL_COLUMNS, needs=("cuda",))
def conv_channels(*, channels=None, dtypes=("float16", "tf32"), batch=None, size=None, device="auto",
                  quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """3×3, stride 1, ``size``² images (56 on a GPU, 28 on a CPU), batch 32 (GPU), 8 (quick) or 1 (CPU);
    ``channels`` default :func:`channel_points`. A CPU runs float32 only."""
    ds = list(dict.fromkeys(dtype_names("dtypes", dtypes, ("float16", "bfloat16", "tf32", "float32"))))
    cs = sequence_of("channels", channels, positive_int) if channels is not None else None
    device, _, cpu = _setup(device, ds[0])
    ds = ["float32"] if cpu else ds
    cs = cs if cs is not None else channel_points(quick, cpu)
    N = positive_int("batch", batch if batch is not None else 1 if cpu else 8 if quick else 32)
    H = positive_int("size", size if size is not None else 28 if cpu else 56)
    ensure_fits(_bytes(conv_shape(N, max(cs), H, H, max(cs), 3, 3, 1, 1), "float32", device), device,
                what="conv_channels")
    spec = measured_spec(device)

    def measure(p):
        d, c = p
        s = conv_shape(N, c, H, H, c, 3, 3, 1, 1)
        m = _bench(_conv_fn(s, "forward", d, device), device, label=f"C=K={c} {d}")
        return _row(s, "forward", d, m, spec, aligned=c % alignment(d) == 0, divisible_by=math.gcd(c, 256))

    return sweep([(d, c) for d in ds for c in cs], measure, on_row=on_row, progress=progress, desc="conv channels")


def _first_layer_fn(stem: str, channels: int, input_padding: str, phase: str, N: int, H: int, dtype: str,
                    device: str) -> Callable[[], Any]:
    """One step of a first layer on a 3-channel batch: ``padded_conv2d`` to ``channels``, the input padded
    ``"once"`` (here, outside the timed function) or on ``"every step"`` (inside the module)."""
    import torch

    from ...padding import padded_conv2d  # torch: imported when a first layer is built

    R, stride, pad = STEMS[stem]
    conv = torch.nn.Conv2d(3, 64, R, stride, pad, bias=False, device=tensor_device(device), dtype=torch_dtype(dtype))
    module = conv if channels == 3 else padded_conv2d(conv, in_multiple=channels)
    module = module.to(memory_format=torch.channels_last)
    x = _randn((N, 3, H, H), dtype, device, "NHWC")
    x = module.pad_input(x) if input_padding == "once" else x  # F.pad keeps channels_last
    if phase == "forward":
        return _math(lambda: module(x), dtype, device)
    g, weights = _randn(tuple(module(x).shape), dtype, device, "NHWC", 1), list(module.parameters())
    return _math(lambda: torch.autograd.grad(module(x), weights, g), dtype, device)


_FIRST = [(3, "none"), (4, "once"), (4, "every step"), (8, "once"), (8, "every step")]


@register("conv_first_layer", "First convolution on 3-channel images: C = 3 against padded to 4 and 8 "
          "(pk.padded_conv2d), input padded once or on every step, forward and forward+weight gradient, for "
          "ResNet's 7×7 stride-2 stem and a stride-1 3×3 (NVIDIA: 4 channels suffice with stride 2)",
          dict(stem="'7×7/2' (ResNet) or '3×3/1'", phase="'forward' or 'forward+backward' (weight gradient "
               "only: a first layer needs no input gradient)", channels="channels the convolution runs: 3, 4 "
               "or 8", input_padding="'none' (C = 3), 'once' (the batch arrives padded) or 'every step' "
               "(F.pad inside the module)", **SHAPE_COLUMNS, **TIME_COLUMNS), needs=("cuda",))
def conv_first_layer(*, batch=None, size=None, dtype="float16", device="auto", quick=False, progress=True,
                     on_row=None) -> pd.DataFrame:
    """K = 64 on ``size``² images (224 on a GPU, 64 on a CPU), batch 32 (GPU), 8 (quick) or 1 (CPU).

    ``C`` and the shape columns describe the real 3-channel layer; ``gemm_K`` is the forward GEMM's
    ``channels·R·S``. ``tflops`` counts the 3-channel layer's useful FLOPs (twice for forward+backward).
    """
    device, d, cpu = _setup(device, dtype)
    N = positive_int("batch", batch if batch is not None else 1 if cpu else 8 if quick else 32)
    H = positive_int("size", size if size is not None else 64 if cpu else 224)
    ensure_fits(3 * _bytes(conv_shape(N, 8, H, H, 64, 3, 3, 1, 1), d, device), device, what="conv_first_layer")
    spec = measured_spec(device)

    def measure(p):
        stem, (c, how), phase = p
        R, stride, pad = STEMS[stem]
        s, run = conv_shape(N, 3, H, H, 64, R, R, stride, pad), conv_shape(N, c, H, H, 64, R, R, stride, pad)
        m = _bench(_first_layer_fn(stem, c, how, phase, N, H, d, device), device, label=f"{stem} C={c} {how}")
        row = _row(s, phase, d, m, None, 1 if phase == "forward" else 2, stem=stem, phase=phase, channels=c,
                   input_padding=how)
        model = model_row(run, phase, d, spec)  # the GEMMs of the convolution that runs, on `channels`
        return dict(row, **{k: model[k] for k in ("gemm_M", "gemm_N", "gemm_K", "predicted_s")})

    points = [(stem, v, phase) for stem in STEMS for phase in ("forward", "forward+backward") for v in _FIRST]
    return sweep(points, measure, on_row=on_row, progress=progress, desc="first layer")


_LAYOUT_LAYERS = RESNET_LAYERS[:2] + RESNET_LAYERS[4:] + ((3, 224, 224, 64, 7, 7, 2, 3),)  # and ResNet's stem


@register("conv_layout", "Forward convolutions in NCHW and NHWC (channels_last), with cudnn.benchmark off and "
          "on: the first call (autotuning included) and the steady state; and the cost of converting the input "
          "NCHW → NHWC (NVIDIA: prefer NHWC; enable autotuning)",
          dict(layer="the layer: filter, channels in→out, input size", op="'forward' or 'to channels_last' "
               "(x.contiguous(memory_format=torch.channels_last) of the NCHW input)",
               layout="'NCHW' or 'NHWC' (conversion rows: 'NCHW→NHWC')",
               cudnn_benchmark="torch.backends.cudnn.benchmark during the row (False on a CPU and for "
               "conversions)", **SHAPE_COLUMNS, **TIME_COLUMNS,
               first_call_s="wall seconds of the first call, synchronized (cuDNN's autotuning when "
               "cudnn_benchmark is on and the shape is new to the process)",
               gbps="conversion rows: bytes read + written / time_s, in 1e9 bytes/s; NaN for convolutions"),
          needs=("cuda",))
def conv_layout(*, batch=None, dtype="float16", device="auto", quick=False, progress=True,
                on_row=None) -> pd.DataFrame:
    """Four layers (three ResNet-50 ones and its stem) at batch 32 (GPU), 8 (quick), 1 at half size (CPU).

    Per layer and layout, cudnn.benchmark off is measured before on, so the first call with it on
    autotunes (cuDNN caches its choice per shape, layout and dtype for the rest of the process). A
    CPU has no cuDNN: its rows have the flag off. The flag is restored afterwards.
    """
    import torch

    device, d, cpu = _setup(device, dtype)
    N = positive_int("batch", batch if batch is not None else 1 if cpu else 8 if quick else 32)
    shapes = _layers(_LAYOUT_LAYERS, N, cpu)
    ensure_fits(2 * max(_bytes(s, d, device) for s in shapes.values()), device, what="conv_layout")
    spec = measured_spec(device)
    flags = (False,) if cpu else (False, True)
    points = [(n, "forward", lay, b) for n in shapes for lay in ("NCHW", "NHWC") for b in flags]
    points += [(n, "to channels_last", "NCHW→NHWC", False) for n in shapes]

    def measure(p):
        name, op, layout, flag = p
        s = shapes[name]
        torch.backends.cudnn.benchmark = flag
        if op == "forward":
            m = _bench(_conv_fn(s, "forward", d, device, layout), device, label=f"{name} {layout} benchmark={flag}")
            extra = dict(gbps=math.nan)
        else:
            x = _randn((s["N"], s["C"], s["H"], s["W"]), d, device)
            m = _bench(lambda: x.contiguous(memory_format=torch.channels_last), device, label=f"{name} {op}")
            nbytes = 2 * itemsize(d) * s["N"] * s["C"] * s["H"] * s["W"]  # read and written once
            copy_s = nbytes / spec.ceilings.bandwidth if spec is not None else math.nan
            extra = dict(gbps=m.gbps(nbytes), tflops=math.nan, predicted_s=copy_s)
        first = m.first_call_s if m.first_call_s is not None else math.nan
        return {**_row(s, "forward", d, m, spec, layer=name, op=op, layout=layout, cudnn_benchmark=flag),
                "first_call_s": first, **extra}

    old = torch.backends.cudnn.benchmark
    try:
        _conv_fn(conv_shape(1, 8, 8, 8, 8, 3, 3, 1, 1), "forward", d, device)()  # cuDNN's one-time set-up, untimed
        return sweep(points, measure, on_row=on_row, progress=progress, desc="conv layouts")
    finally:
        torch.backends.cudnn.benchmark = old


@register("conv_params", "Forward convolution as the batch, filter size (1, 3, 5, 7), stride (1, 2, 4) and "
          "dilation (1, 2, 3) change one at a time from a 3×3 64→64 layer on 56² images: the implicit GEMM each "
          "becomes and its time (NVIDIA: larger sizes raise efficiency, not speed)",
          dict(sweep="the parameter changed: 'batch', 'filter', 'stride' or 'dilation'", swept="its value",
               **SHAPE_COLUMNS, **TIME_COLUMNS), needs=("cuda",))
def conv_params(*, dtype="float16", device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Base layer N = 32, C = K = 64, 56², 3×3, padding 1 (GPU); N = 2, C = K = 32, 28² on a CPU. Filters of
    size f are padded f // 2 and dilations d padded d, so the output keeps its size at stride 1."""
    device, d, cpu = _setup(device, dtype)
    points = param_points(cpu, quick)
    ensure_fits(max(_bytes(s, d, device) for _, _, s in points), device, what="conv_params")
    spec = measured_spec(device)

    def measure(p):
        name, v, s = p
        m = _bench(_conv_fn(s, "forward", d, device), device, label=f"conv {name}={v}")
        return _row(s, "forward", d, m, spec, sweep=name, swept=v)

    return sweep(points, measure, on_row=on_row, progress=progress, desc="conv parameters")


@register("conv_deepbench", "DeepBench's training convolutions measured again with cuDNN through torch: forward, "
          "backward-data and backward-filter times in DeepBench's columns, beside the GEMM model",
          dict(DB_MEANINGS, dtype="data type", layout="memory layout ('NCHW', as DeepBench)",
               time_s="median forward seconds (L2 not flushed, as DeepBench)", iqr_s=TIME_COLUMNS["iqr_s"],
               bwd_inputs_time_s="median backward-data seconds; NaN for first layers (C ≤ 3), as DeepBench",
               bwd_params_time_s="median backward-filter seconds", tflops="forward: 2·N·K·C·R·S·P·Q / time_s, "
               "in 1e12 FLOP/s", predicted_s="perfkit.gemm_model: the forward implicit GEMM, seconds",
               predicted_bwd_inputs_s="the same for the dgrad GEMM (N·H·W, C, K·R·S), seconds",
               predicted_bwd_params_s="the same for the wgrad GEMM (C·R·S, K, N·P·Q), seconds"),
          needs=("cuda",))
def conv_deepbench(*, shapes=None, dtype="float16", device="auto", quick=False, progress=True,
                   on_row=None) -> pd.DataFrame:
    """``shapes`` (DeepBench tuples, default :data:`DEEPBENCH_CONVS`; the four smallest on a CPU, the first
    eight with ``quick``), each pass timed in NCHW, without L2 flushes (DeepBench's back-to-back loop)."""
    given = sequence_of("shapes", shapes, lambda n, t: db_shape(t, n)) if shapes is not None else None
    device, d, cpu = _setup(device, dtype)
    todo = list(shapes) if given is not None else sorted(DEEPBENCH_CONVS, key=lambda t: conv_flops(db_shape(t)))[:4] \
        if cpu else DEEPBENCH_CONVS[:8] if quick else DEEPBENCH_CONVS
    conv = given if given is not None else [db_shape(t, "shapes") for t in todo]
    ensure_fits(max(_bytes(s, d, device) for s in conv), device, what="conv_deepbench")
    spec = measured_spec(device)

    def measure(i):
        s, t = conv[i], {}
        for phase in PHASES if s["C"] > 3 else ("forward", "wgrad"):
            t[phase] = _bench(_conv_fn(s, phase, d, device, "NCHW"), device, flush_l2=False,
                              label=f"deepbench {phase} {todo[i]}")
        return {**dict(zip(DB_COLUMNS, todo[i])), "dtype": d, "layout": "NCHW", **timing_row(t["forward"]),
                "bwd_inputs_time_s": t["dgrad"].median if "dgrad" in t else math.nan,
                "bwd_params_time_s": t["wgrad"].median, "tflops": t["forward"].tflop_s(conv_flops(s)),
                **{c: model_row(s, ph, d, spec)["predicted_s"] for c, (ph, _) in PREDICTED.items()}}

    return sweep(range(len(conv)), measure, on_row=on_row, progress=progress, desc="DeepBench convolutions")
