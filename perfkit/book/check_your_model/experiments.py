"""The chapter "Check your own model": the advisor's predictions against measurements, op by op and fix by fix.

Four architectures built in code (:mod:`perfkit.zoo`: GPT-2 small, ResNet-50, an LSTM language model
with hidden 1000, LLaMA-7B) are advised on the device they run on (:func:`perfkit.advise` with
``spec`` = this device), then every distinct op is timed forward and backward, and every fix that
changes an op is timed against the original (:meth:`perfkit.advisor.Advice.measure`'s functions).
On a CPU, or with ``quick``, the models are shrunk (same structure, smaller dimensions) and run in
float32.
"""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from ..._validate import dtype_name
from ...placement import resolve_device
from ...experiments.measure import known_names, measured_spec, sweep
from ...experiments.registry import register

__all__ = ["MODELS", "advisor_fixes", "advisor_layers", "finding_savings", "largest_savings", "model_inputs",
           "rule_summary", "step_summary"]

#: Model name → (zoo builder name, GPU keyword arguments, CPU keyword arguments, input shape on a GPU,
#: input shape on a CPU; integer inputs are token ids).
MODELS: dict[str, tuple[str, dict, dict, tuple, tuple]] = {
    "gpt2_small": ("gpt2_small", {}, {"vocab_size": 1001, "context": 64, "dim": 64, "layers": 2, "heads": 4},
                   (8, 1024), (2, 64)),
    "resnet50": ("resnet50", {}, {"num_classes": 10}, (32, 3, 224, 224), (2, 3, 32, 32)),
    "lstm_lm": ("lstm_lm", {}, {"vocab_size": 500, "hidden": 100, "layers": 2}, (20, 35), (4, 12)),
    "llama_7b": ("llama", {}, {"dim": 64, "layers": 2, "heads": 4, "ffn": 172, "vocab_size": 500, "context": 64},
                 (1, 2048), (1, 64)),
}

_IMAGE_MODELS = {"resnet50"}
_QUICK = ("gpt2_small", "lstm_lm")

_LAYER_COLUMNS = {
    "model": "the architecture (perfkit.zoo)",
    "layer": "the first layer (qualified module name) running this op",
    "layers": "how many layers run the same op (timed once)",
    "module": "the module's class",
    "op": "the torch function it calls",
    "dtype": "the dtype it ran in",
    "forward_s": "measured forward time (seconds, median)",
    "backward_s": "measured backward time (seconds, median; autograd of the op alone)",
    "time_s": "measured forward + backward (seconds)",
    "predicted_forward_s": "the advisor's forward prediction for this device (seconds)",
    "predicted_backward_s": "the advisor's backward prediction (seconds)",
    "predicted_s": "predicted forward + backward (seconds)",
}

_FIX_COLUMNS = {
    "model": "the architecture (perfkit.zoo)",
    "rule": "the advisor's rule id",
    "layer": "the layer the finding is about",
    "fix": "the fix, as the advisor words it",
    "dtype": "the dtype it ran in",
    "predicted_saving_s": "the advisor's predicted saving per step (seconds)",
    "time_s": "measured forward + backward of the op as it is (seconds)",
    "fixed_time_s": "measured forward + backward of the op with the fix (seconds)",
    "per_work": "factor applied to fixed_time_s for fixes that change the batch (same work)",
    "measured_saving_s": "time_s − fixed_time_s × per_work (seconds; negative: the fix is slower)",
}


def model_inputs(name: str, device: str = "cpu", *, meta: bool = False) -> tuple[Any, Any]:
    """``(model, input)`` of a :data:`MODELS` entry at the sizes for ``device`` ("cuda": the real shapes,
    "cpu": shrunk), built on the meta device when ``meta`` (nothing allocated)."""
    import torch

    from ...zoo import gpt2_small, llama, lstm_lm, resnet50  # torch: imported when a model is built

    builders = {"gpt2_small": gpt2_small, "resnet50": resnet50, "lstm_lm": lstm_lm, "llama": llama}
    known_names("model", name, MODELS)
    builder, gpu_kw, cpu_kw, gpu_shape, cpu_shape = MODELS[name]
    kwargs, shape = (gpu_kw, gpu_shape) if device == "cuda" else (cpu_kw, cpu_shape)
    where = "meta" if meta else "cpu"
    with torch.device(where):
        model = builders[builder](**kwargs)
    if name in _IMAGE_MODELS:
        return model, torch.zeros(shape, device=where)
    return model, torch.zeros(shape, dtype=torch.long, device=where)


def _advice(name: str, device: str, dtype: str):
    from ...advisor import advise  # torch: imported when a model is advised

    model, x = model_inputs(name, device, meta=True)
    return advise(model, x, dtype, measured_spec(device))


def _setup(models: Any, dtype: Any, device: str, quick: bool) -> tuple[list[str], str, str]:
    """(models, dtype, device): ``models`` and ``dtype`` checked first; defaults and a CPU's float32 after."""
    names = known_names("models", models, MODELS) if models is not None else None
    dtype = dtype_name("dtype", dtype)
    device = resolve_device(device)
    if names is None:
        names = list(_QUICK if quick or device == "cpu" else MODELS)
    return names, "float32" if device == "cpu" else dtype, device  # CPUs have no fast bfloat16


def _run(models: list[str], device: str, dtype: str, each: Callable[[str, Any], list], on_row, progress: bool,
         desc: str) -> pd.DataFrame:
    points = [p for name in models for p in each(name, _advice(name, device, dtype))]
    return sweep(points, lambda point: point(), on_row=on_row, progress=progress, desc=desc)


@register("advisor_layers", "GPT-2 small, ResNet-50, an LSTM LM and LLaMA-7B advised for this device: every "
          "distinct op timed forward and backward beside the advisor's prediction", _LAYER_COLUMNS, needs=("cuda",))
def advisor_layers(*, models=None, dtype="bfloat16", device="auto", quick=False, progress=True,
                   on_row=None) -> pd.DataFrame:
    """One row per distinct op of each model: measured and predicted seconds (GPU: ~200 timings)."""
    from ...advisor import measure as advisor_measure  # torch: imported when run
    from ...advisor.measure import op_key

    models, dtype, device = _setup(models, dtype, device, quick)

    def each(name: str, advice) -> list:
        groups: dict[str, list] = {}
        for op in advice.ops:
            groups.setdefault(op_key(op), []).append(op)

        def point(ops: list) -> Callable[[], dict]:
            def measure() -> dict:
                op = ops[0]
                t = advisor_measure.time_op(op, dtype, device, True)
                rows = advice._pricer.rows(op)
                fwd = sum(r["predicted_s"] for r in rows if r["pass"] == "forward")
                total = sum(r["predicted_s"] for r in rows)
                return {"model": name, "layer": op.layer, "layers": len(ops), "module": op.module,
                        "op": op.name or op.op, "dtype": dtype, **t, "time_s": t["forward_s"] + t["backward_s"],
                        "predicted_forward_s": fwd, "predicted_backward_s": total - fwd, "predicted_s": total}
            return measure

        return [point(ops) for ops in groups.values()]

    return _run(models, device, dtype, each, on_row, progress, "advisor layers")


@register("advisor_fixes", "Every fix the advisor proposes that changes an op (padding, channels_last, batch, "
          "hidden size), timed against the op as it is, beside the predicted saving", _FIX_COLUMNS, needs=("cuda",))
def advisor_fixes(*, models=None, dtype="bfloat16", device="auto", quick=False, progress=True,
                  on_row=None) -> pd.DataFrame:
    """One row per distinct (rule, op, fixed op) of each model: measured and predicted savings."""
    from ...advisor import measure as advisor_measure  # torch: imported when run
    from ...advisor.measure import op_key

    models, dtype, device = _setup(models, dtype, device, quick)

    times: dict[str, float] = {}  # an op with several findings is timed once

    def total(op) -> float:
        key = op_key(op)
        if key not in times:
            t = advisor_measure.time_op(op, dtype, device, True)
            times[key] = t["forward_s"] + t["backward_s"]
        return times[key]

    def each(name: str, advice) -> list:
        seen, points = set(), []
        for row, (op, fixed, per_work) in zip(advice.findings.itertuples(), advice._fixes):
            if op is None or fixed is None or (row.rule, op_key(op), op_key(fixed)) in seen:
                continue
            seen.add((row.rule, op_key(op), op_key(fixed)))

            def measure(row=row, op=op, fixed=fixed, per_work=per_work) -> dict:
                before, after = total(op), total(fixed)
                return {"model": name, "rule": row.rule, "layer": row.layer, "fix": row.fix, "dtype": dtype,
                        "predicted_saving_s": row.predicted_saving_s, "time_s": before, "fixed_time_s": after,
                        "per_work": per_work, "measured_saving_s": before - after * per_work}
            points.append(measure)
        return points

    return _run(models, device, dtype, each, on_row, progress, "advisor fixes")


# ------------------------------------------------------------------------------------------------
# What the chapter shows: tables ready for :func:`perfkit.table`, and the CPU stand-in


def rule_summary(advice: Any) -> pd.DataFrame | None:
    """``advice.by_rule()`` as a table for a reader: one row per rule that fired, with its number of
    findings, the summed predicted saving per step in seconds (``predicted_saving_s``, NaN where the
    model prices none; show it with ``pk.table(..., seconds={"predicted_saving_s": "µs"})``), that
    saving as a share of the step, and an example layer. Pure: None in → None out."""
    if advice is None:
        return None
    t = advice.by_rule().reset_index()
    return pd.DataFrame({"rule": t["rule"], "findings": t["findings"],
                         "predicted_saving_s": t["predicted_saving_s"],
                         "share of the step": t["share"],
                         "example": t["example"].replace("", "(the model)")})


def step_summary(advices: Any) -> pd.DataFrame | None:
    """For each named :class:`~perfkit.advisor.Advice` in ``advices`` (a mapping name → advice): its predicted
    step in seconds (``predicted_step_s``: show it with ``pk.table(..., seconds=...)``), the FLOPs of its
    GEMMs' forward passes (``forward GFLOP`` per step: what ``FlopCounterMode`` counts), the share of the
    step in passes whose time is set by bytes (``Advice.memory_bound_share``) and the share in direct
    (non-GEMM) convolutions, the ``conv.direct`` rows. Pure: None (or an empty mapping) in → None out."""
    if not advices:
        return None
    rows = []
    for name, advice in advices.items():
        layers, step = advice.layers, advice.step_s
        direct = layers.loc[layers["op"] == "conv.direct", "predicted_s"].sum()
        rows.append({"model": name, "predicted_step_s": step, "forward GFLOP": advice.forward_flops / 1e9,
                     "memory-bound share": advice.memory_bound_share,
                     "in direct convolutions": direct / step if step else 0.0})
    return pd.DataFrame(rows)


def largest_savings(advices: Any) -> pd.DataFrame | None:
    """For each named :class:`~perfkit.advisor.Advice` in ``advices`` (a mapping name → advice), the rule
    with the largest predicted saving and that saving as a share of the step; a model whose rules
    price no saving at all gets "none priced". Pure: None (or an empty mapping) in → None out."""
    if not advices:
        return None
    rows = []
    for name, advice in advices.items():
        share = advice.by_rule()["share"].dropna()
        top = share.idxmax() if len(share) and share.max() > 0 else "none priced"
        rows.append({"model": name, "largest predicted saving from": top,
                     "share of the step": share.max() if top != "none priced" else float("nan")})
    return pd.DataFrame(rows)


def finding_savings(advice: Any) -> pd.DataFrame | None:
    """``advice.findings`` as a table: layer ("(the model)" for a finding about the whole model), rule,
    predicted saving per step and, after ``measure=True``, the measured one (NaN where a fix could
    not be timed), both in seconds (``predicted_saving_s``, ``measured_saving_s``: show them with
    ``pk.table(..., seconds=...)``). Pure: None in → None out."""
    if advice is None:
        return None
    f = advice.findings
    out = pd.DataFrame({"layer": f["layer"].replace("", "(the model)"), "rule": f["rule"],
                        "predicted_saving_s": f["predicted_saving_s"]})
    if "measured_saving_s" in f:
        out["measured_saving_s"] = f["measured_saving_s"]
    return out.reset_index(drop=True)
