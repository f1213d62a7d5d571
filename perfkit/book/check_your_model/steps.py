"""Whole training steps of the advisor chapter's models, measured, beside the step the advisor predicts.

``model_steps`` times one whole step of each model of :data:`STEP_MODELS` the way a training loop runs
it: ``zero_grad``, forward, backward and AdamW's step ("train"), and the forward pass alone under
``torch.inference_mode`` ("inference"). Warm (:data:`WARMUP_STEPS` untimed steps first), no CUDA
graphs, each step timed on its own from an idle device (CUDA events on a GPU, ``time.perf_counter`` on
a CPU); it reports the median, 10th and 90th percentiles of ``steps`` steps (20 by default: the
issue's "≥ 20"), the forward + backward and the optimizer step apart, and the peak memory. Beside
them: :func:`perfkit.advise`'s predicted step for the same model, input and dtype (``step_s``: forward
+ backward, what ``forward_backward_s`` measures; the forward pass for inference) and AdamW's step
priced by its bytes (:func:`adamw_time_s`), which the advisor does not price.

The backward starts from a fixed gradient of the output (``out.backward(grad)``, the gradient of the
output's mean) rather than from a loss: a loss over GPT-2's 50,257 logits is a softmax the advisor does
not price, and would bias the comparison by a few per cent. Parameters, gradients and AdamW's states
are all in ``dtype`` (pure bfloat16 training, as the advisor prices a bfloat16 step); a CPU runs float32.

Pure analysis: :func:`step_gaps` (the measured step against the sum of the ops timed alone, the
``advisor_layers`` recording: the gap is what launch gaps and idle time between kernels explain) and
:func:`whole_step_ratios`; :func:`score_steps` re-predicts a recording with a spec (``perfkit validate``).
Units: seconds, bytes.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Any

import numpy as np
import pandas as pd

from ..._validate import dtype_name, frame_or_none, frame_with_columns, positive_int
from ...devices import DeviceSpec
from ...dtypes import itemsize, torch_dtype
from ...experiments.measure import known_names, measured_spec, sweep
from ...experiments.registry import register
from ...memory_model import memory_time
from ...placement import ensure_fits, one_cpu_thread, resolve_device, tensor_device
from .experiments import MODELS

__all__ = ["BLOCKS", "COLUMNS", "DTYPES", "MODES", "STEP_MODELS", "WARMUP_STEPS", "adamw_time_s", "model_steps",
           "score_steps", "step_gaps", "step_inputs", "whole_step_ratios"]

#: Model name → (zoo builder name, GPU keyword arguments, CPU keyword arguments, input shape on a GPU,
#: input shape on a CPU): :data:`.experiments.MODELS` at its sizes, LLaMA-7B as a stack of 4 of its 32
#: layers with its embedding and head (as ``decode_steps``; the whole model's weights, gradients and AdamW
#: states are ~54 GB before activations: the stack keeps the run short and within an 80 GB GPU), and the
#: chapter's ViT-B/16 and MobileNetV2 on 64 images of 224² (shrunk on a CPU).
STEP_MODELS: dict[str, tuple[str, dict, dict, tuple, tuple]] = {
    **{name: MODELS[name] for name in ("gpt2_small", "resnet50", "lstm_lm")},
    "llama_7b": (MODELS["llama_7b"][0], {**MODELS["llama_7b"][1], "layers": 4}, *MODELS["llama_7b"][2:]),
    "vit_b_16": ("vit_b_16", {}, {"num_classes": 10, "image_size": 32, "patch_size": 8, "dim": 64, "layers": 2,
                                  "heads": 4, "mlp_dim": 128}, (64, 3, 224, 224), (2, 3, 32, 32)),
    "mobilenet_v2": ("mobilenet_v2", {}, {"num_classes": 10, "width_mult": 0.25}, (64, 3, 224, 224), (2, 3, 32, 32)),
}

#: A model whose GPU step runs part of its repeated blocks: name → (the blocks' layer-name prefix, blocks
#: run, blocks of the architecture), so its ops timed alone can be counted for the same stack.
BLOCKS: dict[str, tuple[str, int, int]] = {"llama_7b": ("layers.", 4, 32)}

#: The two steps timed per model.
MODES: tuple[str, ...] = ("train", "inference")
#: The dtypes a model is trained in (parameters, gradients and AdamW's states alike).
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
#: Untimed steps before the timed ones (cuDNN/cuBLAS choices, AdamW's states, the allocator's cache).
WARMUP_STEPS = 3

_IMAGE_MODELS = {"resnet50", "vit_b_16", "mobilenet_v2"}
_QUICK = ("lstm_lm", "vit_b_16")  # cheap on a CPU: a token model and an image model, a second

#: The columns of ``model_steps`` (units in their descriptions).
COLUMNS = {
    "model": "the architecture (perfkit.zoo); llama_7b on a GPU: 4 of its 32 layers, embedding and head",
    "mode": "train (zero_grad, forward, backward, AdamW step) or inference (forward, inference_mode)",
    "dtype": "the dtype of parameters, inputs, gradients and AdamW's states",
    "input": "the input's shape (token ids or images)",
    "params": "parameters of the model as run (count)",
    "block_share": "share of the architecture's repeated blocks run (1: the whole model; llama_7b on a GPU: 4/32)",
    "optimizer": "AdamW fused or AdamW foreach (train); empty for inference",
    "steps": "timed steps (after the untimed warm-up steps)",
    "time_s": "median whole step (seconds): forward, backward and optimizer (train) or forward (inference)",
    "p10_s": "10th percentile of the whole step (seconds)",
    "p90_s": "90th percentile of the whole step (seconds)",
    "forward_backward_s": "median forward + backward, the part advice.step_s predicts (seconds; NaN: inference)",
    "optimizer_s": "median AdamW step (seconds; NaN: inference)",
    "peak_memory_bytes": "peak allocated device memory over the steps (bytes; NaN on a CPU)",
    "predicted_s": "the advisor's step on the spec measured on (seconds; train: forward + backward)",
    "predicted_optimizer_s": "AdamW's step priced by its bytes at the achievable bandwidth (seconds; NaN: inference)",
    "ops": "ops the advisor priced",
}


def step_inputs(name: str, device: str = "cpu", *, meta: bool = False, dtype: Any = "float32") -> tuple[Any, Any]:
    """``(model, input)`` of a :data:`STEP_MODELS` entry at the sizes for ``device`` ("cuda": the real
    shapes, "cpu": shrunk), in ``dtype`` (images too; token ids are random ids of the vocabulary), on
    :func:`perfkit.placement.tensor_device`, or on the meta device when ``meta`` (nothing allocated)."""
    import torch

    from ...zoo import gpt2_small, llama, lstm_lm, mobilenet_v2, resnet50, vit_b_16  # torch: when a model is built

    known_names("model", name, STEP_MODELS)
    builder, gpu_kw, cpu_kw, gpu_shape, cpu_shape = STEP_MODELS[name]
    kwargs, shape = (gpu_kw, gpu_shape) if device == "cuda" else (cpu_kw, cpu_shape)
    where = "meta" if meta else tensor_device(device)
    with torch.device(where):
        builders = {"gpt2_small": gpt2_small, "resnet50": resnet50, "lstm_lm": lstm_lm, "llama": llama,
                    "vit_b_16": vit_b_16, "mobilenet_v2": mobilenet_v2}
        model = builders[builder](**kwargs).to(torch_dtype(dtype))
    if name in _IMAGE_MODELS:
        return model, torch.randn(shape, device=where).to(torch_dtype(dtype))
    vocab = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding)).num_embeddings
    return model, torch.randint(vocab, shape, device=where)


def adamw_time_s(params: int, dtype: Any, spec: DeviceSpec | None) -> float:
    """Seconds of one AdamW step over ``params`` parameters on ``spec``, by its bytes: it reads each
    parameter, gradient and both moments and writes the parameter and both moments (7 tensors; the moments
    in the parameters' dtype, as torch keeps them), at ``spec``'s achievable bandwidth
    (:func:`perfkit.memory_model.memory_time`). NaN without a spec or its bandwidth."""
    if spec is None or not spec.mem_bandwidth:
        return math.nan
    return memory_time(7 * int(params) * itemsize(dtype), spec)


class _Clock:
    """Marks on the device's timeline: CUDA events on a GPU, ``time.perf_counter`` elsewhere."""

    def __init__(self, where: str) -> None:
        import torch

        self.torch, self.cuda = torch, where == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


def _timed(step: Any, steps: int, clock: _Clock) -> np.ndarray:
    """``steps`` × (marks − 1) seconds from each step's first mark to its others, after the warm-up."""
    for _ in range(WARMUP_STEPS):
        step()
    rows = []
    for _ in range(steps):
        clock.sync()  # each step starts on an idle device
        marks = step()
        clock.sync()
        rows.append([clock.seconds(marks[0], m) for m in marks[1:]])
    return np.asarray(rows)


def _advised(model: Any, x: Any, dtype: str, spec: DeviceSpec | None, training: bool) -> tuple[Any, bool]:
    """The advice for ``model`` and whether it is priced on ``spec`` (else H100-SXM's, for its ops and bytes)."""
    from ...advisor import advise
    from ...advisor.advice import FALLBACK_SPEC

    if spec is not None:
        try:
            return advise(model, x, dtype, spec, training=training), True
        except LookupError:  # no peak for dtype, or a spec it cannot model
            pass
    return advise(model, x, dtype, FALLBACK_SPEC, training=training), False


def _run_steps(name: str, training: bool, device: str, dtype: str, steps: int,
               clock: _Clock) -> tuple[np.ndarray, float]:
    """Build the model, time its steps (:func:`_timed`); the peak allocated bytes (NaN off a GPU)."""
    import torch

    model, x = step_inputs(name, device, dtype=dtype)
    model.train(training)
    if clock.cuda:
        torch.cuda.reset_peak_memory_stats()
    if training:
        optimizer = torch.optim.AdamW(model.parameters(), **({"fused": True} if clock.cuda else {"foreach": True}))
        grad: list = []

        def step() -> list:
            start = clock.mark()
            optimizer.zero_grad(set_to_none=True)
            out = model(x)
            if not grad:
                grad.append(torch.full_like(out, 1.0 / out.numel()))  # the gradient of the output's mean
            out.backward(grad[0])
            backward = clock.mark()
            optimizer.step()
            return [start, backward, clock.mark()]
    else:
        def step() -> list:
            with torch.inference_mode():
                start = clock.mark()
                model(x)
                return [start, clock.mark()]
    times = _timed(step, steps, clock)
    return times, float(torch.cuda.max_memory_allocated()) if clock.cuda else math.nan


def _measure(name: str, mode: str, device: str, dtype: str, steps: int) -> dict:
    import torch

    training = mode == "train"
    spec = measured_spec(device)
    meta_model, meta_x = step_inputs(name, device, meta=True)
    advice, priced = _advised(meta_model, meta_x, dtype, spec, training)
    params = sum(p.numel() for p in meta_model.parameters())
    forward_bytes = advice.layers.loc[advice.layers["pass"] == "forward", "bytes"].sum()
    need = params * itemsize(dtype) * (4 if training else 1) + int(forward_bytes)  # a guard, generous
    ensure_fits(need, device, what=f"model_steps ({name}, {mode})")
    clock = _Clock(tensor_device(device))
    with one_cpu_thread(device):
        t, peak = _run_steps(name, training, device, dtype, steps, clock)
    if clock.cuda:
        gc.collect()
        torch.cuda.empty_cache()  # the model and its states are gone: the next point starts clean
    whole = t[:, -1]
    _prefix, run, of = BLOCKS.get(name, ("", 1, 1)) if device == "cuda" else ("", 1, 1)
    kind = " images" if name in _IMAGE_MODELS else " tokens"
    return {"model": name, "mode": mode, "dtype": dtype, "input": "×".join(map(str, meta_x.shape)) + kind,
            "params": int(params), "block_share": run / of,
            "optimizer": ("AdamW fused" if clock.cuda else "AdamW foreach") if training else "", "steps": steps,
            "time_s": float(np.median(whole)), "p10_s": float(np.percentile(whole, 10)),
            "p90_s": float(np.percentile(whole, 90)),
            "forward_backward_s": float(np.median(t[:, 0])) if training else math.nan,
            "optimizer_s": float(np.median(whole - t[:, 0])) if training else math.nan,
            "peak_memory_bytes": peak, "predicted_s": advice.step_s if priced else math.nan,
            "predicted_optimizer_s": adamw_time_s(params, dtype, spec) if training else math.nan,
            "ops": len(advice.ops)}


@register("model_steps", "One whole training step (zero_grad, forward, backward, AdamW) and one inference "
          "forward of GPT-2 small, ResNet-50, the LSTM LM, a LLaMA-7B stack of 4 of its 32 layers, ViT-B/16 and "
          "MobileNetV2: warm, no CUDA graphs, median of 20 steps and peak memory, beside the advisor's step",
          COLUMNS, needs=("cuda",))
def model_steps(*, models=None, dtype="bfloat16", steps=20, device="auto", quick=False, progress=True,
                on_row=None) -> pd.DataFrame:
    """One row per (model, mode): the measured whole step, its forward + backward and optimizer parts,
    the peak memory, and the advisor's predicted step (GPU: ~15 s on an H200 for the six models)."""
    names = known_names("models", models, STEP_MODELS) if models is not None else None
    dtype = dtype_name("dtype", dtype, DTYPES)
    steps = positive_int("steps", steps)
    device = resolve_device(device)
    if names is None:
        names = list(_QUICK if quick or device == "cpu" else STEP_MODELS)
    dtype = "float32" if device == "cpu" else dtype  # CPUs have no fast bfloat16
    points = [(name, mode) for name in names for mode in MODES]
    return sweep(points, lambda p: _measure(*p, device, dtype, steps), on_row=on_row, progress=progress,
                 desc="model steps")


# ------------------------------------------------------------------------------------------------
# Pure analysis: the whole step against the ops timed alone and against the advisor


_STEP_COLUMNS = ("model", "mode", "forward_backward_s", "predicted_s")


def whole_step_ratios(steps: pd.DataFrame) -> pd.DataFrame:
    """Per model of a ``model_steps`` frame: the measured forward + backward, the advisor's predicted
    step and their ratio (measured ÷ predicted: the step ratio the report's targets judge)."""
    frame_with_columns("steps", steps, _STEP_COLUMNS, "model_steps")
    train = steps[steps["mode"] == "train"]
    return pd.DataFrame({"model": train["model"].to_numpy(),
                         "forward_backward_s": train["forward_backward_s"].to_numpy(dtype=float),
                         "predicted_s": train["predicted_s"].to_numpy(dtype=float),
                         "ratio": (train["forward_backward_s"] / train["predicted_s"]).to_numpy(dtype=float)})


def _op_counts(rows: pd.DataFrame, model: str, share: float) -> pd.Series:
    """Each row's op instances in the step measured: ``layers``, block ops × ``share`` of the blocks."""
    counts = rows["layers"].astype(float)
    if share != 1 and model in BLOCKS:
        in_block = rows["layer"].astype(str).str.startswith(BLOCKS[model][0])
        counts = counts.where(~in_block, counts * share)
    return counts


def step_gaps(steps: pd.DataFrame, layers: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model of a ``model_steps`` frame (train rows): the measured forward + backward, the sum of the
    per-op times measured alone (``layers``: an ``advisor_layers`` frame, or :func:`.held_out.score_ops`'s,
    whose rows with ``scored`` False are left out; Σ ``time_s`` × ``layers``), the gap (step − Σ ops,
    seconds) and the gap per op instance (Σ ``layers``): what launch gaps and idle time between kernels
    explain. A partial stack (``block_share`` < 1, :data:`BLOCKS`) counts its block ops × that share (an
    op grouped with one outside the blocks, LLaMA's final RMSNorm, is then counted × the share too). The
    advisor's predicted step and measured ÷ predicted beside. NaN where ``layers`` lacks the model."""
    frame_with_columns("steps", steps, _STEP_COLUMNS, "model_steps")
    layers = frame_or_none("layers", layers)
    if layers is not None:
        frame_with_columns("layers", layers, ("model", "layer", "layers", "time_s"), "advisor_layers")
        if "scored" in layers:
            layers = layers[layers["scored"].astype(bool)]
    rows = []
    for r in steps[steps["mode"] == "train"].to_dict("records"):
        share = float(r.get("block_share", 1.0))
        mine = layers[layers["model"] == r["model"]] if layers is not None else None
        if mine is not None and len(mine):
            counts = _op_counts(mine, r["model"], share)
            ops_s, instances = float((mine["time_s"] * counts).sum()), float(counts.sum())
        else:
            ops_s = instances = math.nan
        measured, predicted = float(r["forward_backward_s"]), float(r["predicted_s"])
        rows.append({"model": r["model"], "forward_backward_s": measured, "ops_s": ops_s, "op_instances": instances,
                     "gap_s": measured - ops_s, "gap_per_op_s": (measured - ops_s) / instances,
                     "predicted_s": predicted, "ratio": measured / predicted})
    return pd.DataFrame(rows, columns=["model", "forward_backward_s", "ops_s", "op_instances", "gap_s",
                                       "gap_per_op_s", "predicted_s", "ratio"])


def score_steps(steps: pd.DataFrame, spec: DeviceSpec, layers: pd.DataFrame | None = None) -> pd.DataFrame:
    """A GPU's ``model_steps`` recording (train rows) re-predicted by today's advisor on ``spec`` (the
    recorded ``predicted_s`` was the day's): model, measured_step_s (forward + backward), predicted_step_s,
    ratio, step_s (whole step, optimizer included), optimizer_s, predicted_optimizer_s, block_share, and
    :func:`step_gaps`' ops_s and gap_s against ``layers`` (NaN without). Advises each model at its GPU sizes
    on the meta device (torch; seconds)."""
    from ...advisor import advise

    frame_with_columns("steps", steps, (*_STEP_COLUMNS, "dtype", "params", "time_s", "optimizer_s"), "model_steps")
    rows = []
    for r in steps[steps["mode"] == "train"].to_dict("records"):
        model, x = step_inputs(r["model"], "cuda", meta=True)
        predicted = advise(model, x, r["dtype"], spec, training=True).step_s
        rows.append({"model": r["model"], "measured_step_s": r["forward_backward_s"], "predicted_step_s": predicted,
                     "ratio": r["forward_backward_s"] / predicted, "step_s": r["time_s"],
                     "optimizer_s": r["optimizer_s"],
                     "predicted_optimizer_s": adamw_time_s(int(r["params"]), r["dtype"], spec),
                     "block_share": float(r.get("block_share", 1.0))})
    out = pd.DataFrame(rows, columns=["model", "measured_step_s", "predicted_step_s", "ratio", "step_s", "optimizer_s",
                                      "predicted_optimizer_s", "block_share"])
    gaps = step_gaps(steps, layers).set_index("model")
    out["ops_s"] = out["model"].map(gaps["ops_s"])
    out["gap_s"] = out["measured_step_s"] - out["ops_s"]
    return out
