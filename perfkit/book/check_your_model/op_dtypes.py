"""Two of the real models' ops in float16 and in bfloat16: is the advisor right to price them alike?

``model_op_dtypes`` times ResNet-50's stem (its first convolution: 3 → 64 channels, 7×7, stride 2, on
32 images of 224×224, NCHW and channels-last) and the LSTM language model's recurrent layer (the zoo's own
``nn.LSTM``: 2 layers, hidden 1000, batch 20, 35 steps) in both 16-bit dtypes, forward and backward,
beside the advisor's price of the same op (:func:`perfkit.advise` of the op as the model runs it, on the
meta device). The backward pass is what training runs for the op: the stem's weight gradient only (its
input, the images, needs none); the LSTM's input and weight gradients. ``impl`` records which kernels ran:
the advisor prices cuDNN's LSTM, and whether PyTorch hands cuDNN a bfloat16 LSTM is recorded, not assumed.
On a CPU the ops are shrunk to :data:`perfkit.book.check_your_model.experiments.MODELS`' CPU sizes and run
in float32 only (a CPU's 16-bit math says nothing about a GPU's); ``predicted_s`` is NaN there.
Units: seconds.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from ..._validate import dtype_names, one_of, sequence_of
from ...dtypes import itemsize, torch_dtype
from ...matmul import seeded_on
from ...placement import ensure_fits, lean_bench, resolve_device
from ...experiments.measure import known_names, measured_spec, sweep, timing_row
from ...experiments.registry import register
from .experiments import MODELS, model_inputs

__all__ = ["OPS", "OP_DTYPES", "STEM", "model_op_dtypes"]

#: The ops timed: ``model.layer`` (a :data:`MODELS` entry and its layer's name in :mod:`perfkit.zoo`).
OPS: tuple[str, ...] = ("resnet50.conv1", "lstm_lm.lstm")
#: The dtypes compared on a GPU (a CPU runs float32 only).
OP_DTYPES: tuple[str, ...] = ("float16", "bfloat16")
#: ResNet-50's stem, ``perfkit.zoo.resnet50().conv1`` (no bias: batch norm follows).
STEM: dict[str, int] = {"in_channels": 3, "out_channels": 64, "kernel_size": 7, "stride": 2, "padding": 3}

_LAYOUTS = ("NCHW", "NHWC")
_LSTM_LAYOUT = "batch_first"

_COLUMNS = {
    "op": "'resnet50.conv1' (the stem convolution) or 'lstm_lm.lstm' (the LSTM LM's nn.LSTM, both layers)",
    "dtype": "storage and math dtype of the op's tensors (float32 on a CPU)",
    "layout": "'NCHW' or 'NHWC' (channels_last input and weight) for the convolution; 'batch_first' for the LSTM",
    "pass": "'forward' (autograd on, as in training) or 'backward' (autograd.grad of the output alone: the "
            "stem's weight gradient; the LSTM's input and weight gradients)",
    "shape": "the op's sizes, as text",
    "impl": "the autograd nodes of the kernels that ran: 'ConvolutionBackward0'; for the LSTM 'CudnnRnnBackward0' "
            "where cuDNN ran it (on a CPU 'MkldnnRnnLayerBackward0'), else PyTorch's per-step cells' nodes",
    "time_s": "median duration, seconds",
    "iqr_s": "inter-quartile range of the samples, seconds",
    "predicted_s": "the advisor's price of the pass on the measured GPU (pk.advise of the op as the model runs it; "
                   "backward: its dgrad and wgrad rows), seconds; NaN on a CPU",
}


def _sizes(op: str, device: str) -> tuple[tuple[int, ...], dict[str, Any]]:
    """``(input shape, zoo keyword arguments)`` of ``op`` on ``device``: the model's real sizes on a GPU,
    its shrunk ones on a CPU (:data:`MODELS`)."""
    _, gpu_kw, cpu_kw, gpu_shape, cpu_shape = MODELS[op.split(".")[0]]
    return (gpu_shape, gpu_kw) if device == "cuda" else (cpu_shape, cpu_kw)


def _lstm(kwargs: dict[str, Any], on: str):
    """The LSTM LM's own ``nn.LSTM`` (``perfkit.zoo.lstm_lm(...).lstm``, in training mode), built on ``on``."""
    import torch

    from ...zoo import lstm_lm  # torch: imported when the op is built

    with torch.device(on):
        return lstm_lm(**{**kwargs, "vocab_size": 1}).lstm  # the vocabulary is not the LSTM's


def _impl(out: Any) -> str:
    """The autograd nodes in ``out``'s graph that name a convolution or a recurrent kernel (views, copies and
    elementwise nodes skipped); "unfused" when none does."""
    seen, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo += [n for n, _ in node.next_functions]
    return ", ".join(sorted({n.name() for n in seen if re.search("Convolution|Rnn|Lstm", n.name())})) or "unfused"


def _stem_fns(shape: tuple[int, ...], layout: str, dtype: str, device: str):
    """``(forward, backward, impl)`` of the stem convolution on ``shape`` images in ``layout``."""
    import torch
    import torch.nn.functional as F

    on, gen = seeded_on(device)
    dt = torch_dtype(dtype)
    k = STEM["kernel_size"]
    x = torch.randn(shape, generator=gen, device=on, dtype=dt)
    w = torch.randn((STEM["out_channels"], STEM["in_channels"], k, k), generator=gen, device=on, dtype=dt)
    if layout == "NHWC":
        x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
    w.requires_grad_(True)

    def forward():
        return F.conv2d(x, w, None, STEM["stride"], STEM["padding"])

    y = forward()
    dy = torch.randn_like(y)  # in y's memory format
    return forward, lambda: torch.autograd.grad(y, w, dy, retain_graph=True), _impl(y)


def _lstm_fns(shape: tuple[int, ...], kwargs: dict[str, Any], dtype: str, device: str):
    """``(forward, backward, impl)`` of the LM's LSTM on ``shape`` = (batch, steps) tokens' embeddings."""
    import torch

    on, gen = seeded_on(device)
    lstm = _lstm(kwargs, on).to(torch_dtype(dtype))
    x = torch.randn((*shape, lstm.input_size), generator=gen, device=on, dtype=torch_dtype(dtype))
    x.requires_grad_(True)  # the embedding's output: its gradient flows back to the table

    def forward():
        return lstm(x)[0]

    out = forward()
    dy, tensors = torch.randn_like(out), [x, *lstm.parameters()]
    return forward, lambda: torch.autograd.grad(out, tensors, dy, retain_graph=True), _impl(out)


def _shape_text(op: str, shape: tuple[int, ...], kwargs: dict[str, Any]) -> str:
    if op == "resnet50.conv1":
        k = STEM["kernel_size"]
        return (f"x {'×'.join(map(str, shape))}, w {STEM['out_channels']}×{STEM['in_channels']}×{k}×{k}, "
                f"stride {STEM['stride']}, padding {STEM['padding']}")
    lstm = _lstm(kwargs, "meta")
    return (f"x {shape[0]}×{shape[1]}×{lstm.input_size} (batch × steps × features), {lstm.num_layers} layers, "
            f"hidden {lstm.hidden_size}")


def _bytes_needed(op: str, shape: tuple[int, ...], kwargs: dict[str, Any], dtype: str) -> int:
    """Device bytes an op's tensors take: input, output, dy, the gradients and cuDNN's workspace (generously)."""
    if op == "resnet50.conv1":
        n, c, h, w = shape
        out = n * STEM["out_channels"] * math.ceil(h / STEM["stride"]) * math.ceil(w / STEM["stride"])
        return 4 * (2 * n * c * h * w + 3 * out) * itemsize(dtype)
    lstm = _lstm(kwargs, "meta")
    H, L = lstm.hidden_size, lstm.num_layers
    return 4 * (math.prod(shape) * (lstm.input_size + 12 * H * L) + 16 * H * H * L) * itemsize(dtype)


def _predicted(op: str, dtype: str, layout: str, spec: Any) -> dict[str, float]:
    """pass → the advisor's seconds for ``op`` as its model runs it on ``spec`` in ``dtype`` (NaN without a spec)."""
    if spec is None:
        return {"forward": np.nan, "backward": np.nan}
    import torch

    from ...advisor import advise  # torch: imported when an op is priced

    if op == "resnet50.conv1":  # the model's first layer: advised alone it is the same op (no input gradient)
        with torch.device("meta"):
            model = torch.nn.Conv2d(**STEM, bias=False)
            x = torch.zeros(_sizes(op, "cuda")[0])
        if layout == "NHWC":
            model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        layers = advise(model, x, dtype, spec).layers
    else:  # advised in its model, where its input (the embedding's output) needs a gradient
        layers = advise(*model_inputs("lstm_lm", "cuda", meta=True), dtype, spec).layers
        layers = layers[layers["layer"] == op.split(".")[1]]
    forward = layers["pass"] == "forward"
    return {"forward": float(layers.loc[forward, "predicted_s"].sum()),
            "backward": float(layers.loc[~forward, "predicted_s"].sum())}


@register("model_op_dtypes", "ResNet-50's stem convolution (NCHW and channels-last) and the LSTM LM's nn.LSTM in "
          "float16 and bfloat16, forward and backward, beside the advisor's price of each", _COLUMNS, needs=("cuda",))
def model_op_dtypes(*, ops=OPS, dtypes=OP_DTYPES, layouts=_LAYOUTS, device="auto", quick=False, progress=True,
                    on_row=None) -> pd.DataFrame:
    """Each op, dtype, layout (the convolution's) and pass: 12 points on a GPU (``quick`` changes nothing: the
    sweep is small already); on a CPU the ops at :data:`MODELS`' CPU sizes, in float32 only."""
    names = known_names("ops", ops, OPS)
    asked = dtype_names("dtypes", dtypes, (*OP_DTYPES, "float32"))
    lays = sequence_of("layouts", layouts, lambda n, v: one_of(n, v, ("nchw", "nhwc")).upper())
    device = resolve_device(device)
    kinds = list(dict.fromkeys(["float32"] if device == "cpu" else asked))
    for op in names:
        shape, kwargs = _sizes(op, device)
        ensure_fits(max(_bytes_needed(op, shape, kwargs, d) for d in kinds), device, what=f"model_op_dtypes ({op})")
    spec = measured_spec(device, cpu=False)
    points = [(op, d, lay, p) for op in names for d in kinds
              for lay in (lays if op == "resnet50.conv1" else [_LSTM_LAYOUT]) for p in ("forward", "backward")]
    priced: dict[tuple[str, str, str], dict[str, float]] = {}

    def measure(point):
        op, d, lay, p = point
        shape, kwargs = _sizes(op, device)
        if (op, d, lay) not in priced:
            priced[op, d, lay] = _predicted(op, d, lay, spec)
        forward, backward, impl = (_stem_fns(shape, lay, d, device) if op == "resnet50.conv1"
                                   else _lstm_fns(shape, kwargs, d, device))
        m = lean_bench(forward if p == "forward" else backward, device, f"{op} {p} {lay} {d}")
        return {"op": op, "dtype": d, "layout": lay, "pass": p, "shape": _shape_text(op, shape, kwargs),
                "impl": impl, **timing_row(m), "predicted_s": priced[op, d, lay][p]}

    return sweep(points, measure, on_row=on_row, progress=progress, desc="model ops in 16-bit dtypes")
