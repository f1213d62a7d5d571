"""Peer predictors on the models and rows perfkit is scored on: MLSys·im and torch's RuntimeEstimator.

Both run on the four :data:`~.experiments.MODELS` at their GPU shapes in bfloat16, one training step
(forward + backward), so their errors can sit next to the advisor's against the same H200 recordings
(``advisor_layers``: the step is Σ ``time_s`` × ``layers`` over a model's rows, the
``scaled_dot_product_attention`` rows left out because they timed the math path).

``mlsysim 0.3.0`` (:func:`peer_steps` only: it predicts whole models, not ops). Its own catalog
entries where it has one (``GPT2_Small``: 124e6 parameters, 248e6 FLOP per token; ``Llama2_7B``, the
shape of LLaMA-7B, 7.0e9 parameters against the exact 6,738,415,616, 14e9 FLOP per token; ``ResNet50``:
8.2e9 FLOP per image). Its LM convention is 2 × parameters FLOP per token: no attention-score FLOPs,
like the measured step, which leaves the attention rows out. It has no recurrent workload type: the
LSTM LM is its generic ``Workload`` with our model's parameter count and 2 × (its matmul weights) FLOP
per token × 35 tokens per sequence. Priced by its training-step path, ``DistributedModel`` on a fleet
of one H200 (as its own single-device evaluation builds one), at its defaults: its catalog H200 (989
TFLOP/s dense fp16/bf16 — bf16 falls back to that peak —, 4.8 TB/s), efficiency 0.5 of peak, a
1e-5 s dispatch tax and 1e-5 s per layer per pass. Step = max(3 × FLOPs / (0.5 × peak), weight bytes ×
(1 + 0.1 × batch) / bandwidth) + taxes.

``torch RuntimeEstimator (roofline)``: ``torch.distributed._tools.runtime_estimator`` in its
``operator-level-cost-model`` mode, per aten op max(FLOPs / 2 / (0.75 × peak), bytes read and written /
bandwidth) — the tool counts multiply-adds (FLOPs / 2) against the FLOP/s peak at 75 %, so its GEMM
ceiling is 1.5 × the peak it is given. FLOPs come from ``torch.utils.flop_counter`` (mm, addmm, bmm,
convolutions, fused attention); every other op is priced by its bytes. It asks the GPU for its numbers;
here it is given perfkit's ``device_spec("H200")`` (NVIDIA datasheet, dense: bf16 989.4 TFLOP/s, fp32
67, DRAM 4800 GB/s) through the two functions it calls, ``torch.utils._runtime_estimation
.get_device_tflops`` / ``get_gpu_dram_gbps``, patched while it runs, with ``torch.cuda.is_available``
reading True (its roofline asserts it). This torch has no CUDA, so the tensors are fake *CPU* tensors
(``FakeTensorMode``): the same aten ops as on a GPU except dropout (decomposed on a CPU), the LSTM
(``mkldnn_rnn_layer`` here, ``_cudnn_rnn`` there: neither has a FLOP formula, so bytes only) and SDPA
(the CPU flash kernel: bytes only; left out of scoring anyway). The tool also charges each
``prim.device`` device query as a read of the whole tensor; that is no kernel, so it is left out and
reported in ``device_queries_s``. Two ways: each of our rows' ops alone, forward and backward, as
``advisor_layers`` timed it (:func:`perfkit.advisor.measure.op_functions`; summed × ``layers`` into the
step), and the whole model run forward + backward (``... whole model``: every aten op, copies and
reshapes our rows do not time included, attention kernels left out).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import math
from typing import Any, Callable, Iterable
from unittest import mock

import numpy as np
import pandas as pd

from ...devices import DeviceSpec, device_spec
from ...units import format_time
from .experiments import MODELS, model_inputs

__all__ = ["ATTENTION", "MLSYSIM_PIN", "RTE", "RTE_WHOLE", "compare_ops", "compare_steps", "measured_steps",
           "op_error_summary", "peer_hardware", "peer_ops", "peer_steps"]

#: The op whose recorded rows timed the math path: left out of every step and score.
ATTENTION = "scaled_dot_product_attention"
MLSYSIM_PIN = "0.3.0"
RTE = "torch RuntimeEstimator (roofline)"
RTE_WHOLE = "torch RuntimeEstimator (roofline, whole model)"
_SPEC = "H200"  # perfkit's datasheet H200, given to RuntimeEstimator
_DTYPE = "bfloat16"
#: mlsysim catalog entries (its registry group, its name) for our models; the LSTM LM has none.
_CATALOG = {"gpt2_small": ("Language", "GPT2_Small"), "llama_7b": ("Language", "Llama2_7B"),
            "resnet50": ("Vision", "ResNet50")}
_ATTENTION_KERNELS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention")
_OP_NOTES = {
    "lstm": "its recurrent kernel (mkldnn_rnn_layer on fake CPU tensors, _cudnn_rnn on a GPU) has no FLOP "
            "formula: priced by bytes only",
    "dropout": "on CPU tensors dropout runs decomposed (empty_like, bernoulli_, div_, mul): four passes where "
               "a GPU runs one native_dropout kernel",
    ATTENTION: "left out of scoring (the recorded row timed the math path); fake CPU tensors dispatch the CPU "
               "flash kernel, which has no FLOP formula: bytes only",
}


def _names(models: Any) -> list[str]:
    if models is None:
        return list(MODELS)
    items = [models] if isinstance(models, str) else list(models) if isinstance(models, Iterable) else None
    if items is None or not items or any(not isinstance(m, str) or m not in MODELS for m in items):
        raise ValueError(f"models must be None or names among {', '.join(MODELS)}, got {models!r}")
    return items


# ------------------------------------------------------------------------------------------ mlsysim
def _mlsysim() -> Any | None:
    try:  # optional (pip install mlsysim==0.3.0) and slow to import (~4 s): only when asked for
        return importlib.import_module("mlsysim")
    except ImportError:
        return None


def _lstm_workload(mlsysim: Any, name: str) -> tuple[Any, str]:
    """Our LSTM LM as mlsysim's generic ``Workload``: parameters, and forward FLOPs per sequence."""
    import torch

    model, x = model_inputs(name, "cuda", meta=True)
    params = sum(p.numel() for p in model.parameters())
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    matmul = sum(p.numel() for p in model.parameters() if p.dim() >= 2 and id(p) not in embeddings)
    flop = 2 * matmul * x.shape[1]
    types = importlib.import_module("mlsysim.models.types")
    workload = types.Workload(name="LSTM LM (perfkit.zoo)", architecture="RNN",
                              parameters=mlsysim.Q_(params, "param"), inference_flops=mlsysim.Q_(flop, "flop"))
    return workload, (f"not in its catalog and no recurrent type: generic Workload, {params:,} parameters, "
                      f"{flop:.3g} FLOP per sequence of {x.shape[1]} tokens (2 × matmul weights per token)")


@functools.lru_cache(maxsize=None)
def _mlsysim_step(name: str) -> tuple[str, float, str]:
    """(predictor, predicted step in seconds, note) from mlsysim's training-step path on one H200."""
    mlsysim = _mlsysim()
    if mlsysim is None:
        return f"mlsysim {MLSYSIM_PIN}", math.nan, f"mlsysim is not installed (pip install mlsysim=={MLSYSIM_PIN})"
    systems = importlib.import_module("mlsysim.systems.types")
    distributed = importlib.import_module("mlsysim.engine.solvers.distributed")
    hardware = mlsysim.Hardware.Cloud.H200
    node = systems.Node(name="one H200", accelerator=hardware, accelerators_per_node=1, intra_node_bw="50 GB/s")
    fleet = systems.Fleet(name="one H200", node=node, count=1, fabric=mlsysim.Systems.Fabrics.Ethernet_10G)
    shape = MODELS[name][3]
    if name in _CATALOG:
        group, entry = _CATALOG[name]
        workload = getattr(getattr(mlsysim.Models, group), entry)
        note = f"its catalog {entry}: {workload.parameters.m_as('param'):.3g} parameters"
    else:
        workload, note = _lstm_workload(mlsysim, name)
    seq_len = shape[1] if len(shape) == 2 else 1
    result = distributed.DistributedModel().solve(workload, fleet, batch_size=shape[0], precision="bf16",
                                                  seq_len=seq_len)
    profile = result.node_profile
    note += (f"; batch {shape[0]} × {seq_len}; compute {format_time(profile.latency_compute.m_as('s'))}, "
             f"memory {format_time(profile.latency_memory.m_as('s'))}, "
             f"taxes {format_time(profile.latency_overhead.m_as('s'))}")
    return f"mlsysim {mlsysim.__version__}", float(result.step_latency_total.m_as("s")), note


# ---------------------------------------------------------------------------------- RuntimeEstimator
@contextlib.contextmanager
def _roofline(spec: DeviceSpec):
    """A RuntimeEstimator in cost-model mode given ``spec``'s peaks and bandwidth; yields it and the list
    of (aten op, seconds) it charges. Its printout is swallowed."""
    import torch
    import torch.utils._runtime_estimation as estimation
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator

    def tflops(dtype: Any) -> float:  # what torch.cuda would report: the dense peak of that dtype
        return spec.peaks.get(str(dtype).removeprefix("torch."), 0.0) / 1e12

    estimator, charges = RuntimeEstimator(), []
    estimator("operator-level-cost-model")
    roofline = estimator._estimate

    def recorded(func: Any, args: Any, kwargs: Any) -> tuple[Any, float]:
        out, time_ms = roofline(func, args, kwargs)
        charges.append((str(func._overloadpacket), time_ms * 1e-3))
        return out, time_ms

    estimator._estimate = recorded
    with mock.patch.object(estimation, "get_device_tflops", tflops), \
            mock.patch.object(estimation, "get_gpu_dram_gbps", lambda: spec.mem_bandwidth / 1e9), \
            mock.patch.object(torch.cuda, "is_available", lambda: True), contextlib.redirect_stdout(io.StringIO()):
        yield estimator, charges


def _charged(estimator: Any, charges: list, run: Callable[[], Any]) -> tuple[float, float, float]:
    """(kernel seconds, attention-kernel seconds, prim.device seconds) charged while ``run`` runs."""
    charges.clear()
    with estimator:
        run()
    device = sum(s for op, s in charges if op.startswith("prim."))
    attention = sum(s for op, s in charges if any(k in op for k in _ATTENTION_KERNELS))
    total = sum(s for _, s in charges)
    assert math.isclose(total, estimator.total_runtime * 1e-3, rel_tol=1e-9, abs_tol=1e-15)
    return total - device, attention, device


def _rte_op(op: Any, spec: DeviceSpec) -> tuple[float, float, float]:
    """(forward s, backward s, prim.device s) of one op alone, as ``advisor_layers`` timed it."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from ...advisor.measure import op_functions

    with FakeTensorMode():
        # Two copies: a module run under the estimator hooks its inputs (ModTracker), and
        # torch.autograd.grad — the backward advisor_layers timed, with no gradient accumulated — refuses
        # hooked leaves; the backward's output is computed outside the estimator, on the other copy.
        forward_fn, _ = op_functions(op, _DTYPE, "cpu", True)
        backward_fn, tensors = op_functions(op, _DTYPE, "cpu", True)
        out = backward_fn() if tensors else None
        grad = torch.ones_like(out) if tensors else None
        with _roofline(spec) as (estimator, charges):
            with torch.no_grad():
                forward, _, device_f = _charged(estimator, charges, forward_fn)
            if not tensors:
                return forward, math.nan, device_f
            backward, _, device_b = _charged(estimator, charges,
                                             lambda: torch.autograd.grad(out, tensors, grad, retain_graph=True))
    return forward, backward, device_f + device_b


@functools.lru_cache(maxsize=None)
def _rte_rows(name: str) -> tuple[dict, ...]:
    """One row per distinct op of ``name`` in ``advisor_layers``' order (``row``), priced alone."""
    from ...advisor import advise
    from ...advisor.measure import op_key

    spec = device_spec(_SPEC)
    model, x = model_inputs(name, "cuda", meta=True)
    groups: dict[str, list] = {}
    for op in advise(model, x, _DTYPE, spec).ops:
        groups.setdefault(op_key(op), []).append(op)
    rows = []
    for i, ops in enumerate(groups.values()):
        op, label = ops[0], ops[0].name or ops[0].op
        try:
            forward, backward, device = _rte_op(op, spec)
            note = _OP_NOTES.get(label, "")
        except Exception as error:  # a peer that cannot express an op says so rather than stopping the table
            forward = backward = device = math.nan
            note = f"the estimator failed: {type(error).__name__}: {error}"
        rows.append({"model": name, "predictor": RTE, "row": i, "layer": op.layer, "op": label,
                     "layers": len(ops), "predicted_forward_s": forward, "predicted_backward_s": backward,
                     "predicted_s": forward + backward, "device_queries_s": device, "note": note})
    return tuple(rows)


def _to_bfloat16(model: Any) -> None:
    """``model.to(torch.bfloat16)`` for fake tensors (``Module.to`` would swap them, which fake tensors
    refuse): each floating parameter and buffer replaced in place, tied ones once."""
    import torch

    done: dict[int, Any] = {}
    for module in model.modules():
        for table, parameter in ((module._parameters, True), (module._buffers, False)):
            for key, t in list(table.items()):
                if t is None or not t.is_floating_point():
                    continue
                if id(t) not in done:
                    cast = t.detach().to(torch.bfloat16)
                    done[id(t)] = torch.nn.Parameter(cast, t.requires_grad) if parameter else cast
                table[key] = done[id(t)]


@functools.lru_cache(maxsize=None)
def _rte_whole(name: str) -> tuple[float, float, float]:
    """(kernel s without attention, attention kernels s, prim.device s) of one step of the whole model."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        model, x = model_inputs(name, "cuda", meta=False)  # built on fake CPU tensors: nothing allocated
        _to_bfloat16(model)
        x = x if x.dtype == torch.long else x.to(torch.bfloat16)
        with _roofline(device_spec(_SPEC)) as (estimator, charges):
            def step() -> None:
                y = model(x)
                y.backward(torch.ones_like(y))

            kernels, attention, device = _charged(estimator, charges, step)
    return kernels - attention, attention, device


# ----------------------------------------------------------------------------------------- the API
def peer_ops(models: Any = None) -> pd.DataFrame:
    """RuntimeEstimator's roofline for each of our ``advisor_layers`` rows: the same op at the same shapes,
    alone, forward and backward, on fake tensors with perfkit's H200 (see the module docstring for every
    number it is given). Columns: model, predictor, row (position among the model's rows in
    ``advisor_layers``), layer, op, layers, predicted_forward_s, predicted_backward_s, predicted_s
    (seconds), device_queries_s (its ``prim.device`` charges, left out), note. mlsysim predicts whole
    models only: no rows. ~3 s for the four models on a CPU."""
    return pd.DataFrame([r for name in _names(models) for r in _rte_rows(name)])


def peer_steps(models: Any = None) -> pd.DataFrame:
    """Each peer's training step per model, seconds. Columns: model, predictor (``mlsysim 0.3.0``,
    :data:`RTE` — our rows' ops summed × ``layers``, attention rows left out as in the measured step —,
    :data:`RTE_WHOLE`), predicted_step_s (NaN where a peer cannot run, ``note`` saying why), note. The
    hardware numbers each peer is given: :func:`peer_hardware` and the module docstring. ~15 s for the
    four models on a CPU (most of it importing mlsysim), cached in memory."""
    rows = []
    for name in _names(models):
        predictor, step_s, note = _mlsysim_step(name)
        rows.append({"model": name, "predictor": predictor, "predicted_step_s": step_s, "note": note})
        ops = pd.DataFrame(list(_rte_rows(name)))
        kept = ops[ops["op"] != ATTENTION]
        device = (kept["device_queries_s"] * kept["layers"]).sum()
        failed = kept["predicted_s"].isna()
        note = (f"{failed.sum()} op(s) it could not price" if failed.any() else
                f"our {len(kept)} rows' ops alone, summed × layers; as shipped it adds "
                f"{format_time(device)} of prim.device queries")
        step = float((kept["predicted_s"] * kept["layers"]).sum()) if not failed.any() else math.nan
        rows.append({"model": name, "predictor": RTE, "predicted_step_s": step, "note": note})
        try:
            whole, attention, device = _rte_whole(name)
            note = (f"attention kernels ({format_time(attention)}) left out; " if attention else "") + \
                f"as shipped it adds {format_time(device)} of prim.device queries"
        except Exception as error:
            whole, note = math.nan, f"the estimator failed on the whole model: {type(error).__name__}: {error}"
        rows.append({"model": name, "predictor": RTE_WHOLE, "predicted_step_s": whole, "note": note})
    return pd.DataFrame(rows, columns=["model", "predictor", "predicted_step_s", "note"])


def peer_hardware() -> pd.DataFrame:
    """What each peer is given for the H200 and its version: predictor, quantity, value, unit, source."""
    import torch

    spec, rows = device_spec(_SPEC), []
    for dtype in ("bfloat16", "float16", "float32"):
        rows.append((RTE, f"peak, {dtype}", spec.peaks[dtype] / 1e12, "TFLOP/s", "perfkit device_spec('H200')"))
    rows += [(RTE, "DRAM bandwidth", spec.mem_bandwidth / 1e9, "GB/s", "perfkit device_spec('H200')"),
             (RTE, "share of the peak it assumes", 0.75, "", f"torch {torch.__version__}, flops_to_ns"),
             (RTE, "FLOPs per multiply-add it counts", 1, "", f"torch {torch.__version__}, flops_to_ns"),
             (RTE, "its GEMM ceiling, bfloat16", spec.peaks["bfloat16"] / 1e12 * 0.75 * 2, "TFLOP/s", "derived")]
    mlsysim = _mlsysim()
    if mlsysim is not None:
        h200, source = mlsysim.Hardware.Cloud.H200, f"mlsysim {mlsysim.__version__} catalog H200"
        tax = importlib.import_module("mlsysim.engine.calibration").FRAMEWORK_LAYER_TAX_MS * 1e-3
        rows += [(f"mlsysim {mlsysim.__version__}", "peak, fp16/bf16 dense", h200.compute.peak_flops.m_as("TFLOPs/s"),
                  "TFLOP/s", source),
                 (f"mlsysim {mlsysim.__version__}", "HBM bandwidth", h200.memory.bandwidth.m_as("GB/s"), "GB/s", source),
                 (f"mlsysim {mlsysim.__version__}", "efficiency (its default)", 0.5, "", "DistributedModel.solve"),
                 (f"mlsysim {mlsysim.__version__}", "dispatch tax", h200.dispatch_tax.m_as("s"), "s", source),
                 (f"mlsysim {mlsysim.__version__}", "tax per layer per pass", tax, "s", "mlsysim calibration")]
    return pd.DataFrame(rows, columns=["predictor", "quantity", "value", "unit", "source"])


# ------------------------------------------------------------------- scoring against advisor_layers
def _recorded(layers: Any) -> pd.DataFrame:
    need = {"model", "layer", "layers", "op", "time_s"}
    if not isinstance(layers, pd.DataFrame) or not need <= set(layers.columns):
        raise ValueError(f"layers must be the advisor_layers DataFrame with columns {sorted(need)}")
    out = layers.reset_index(drop=True).copy()
    out["row"] = out.groupby("model").cumcount()
    return out


def measured_steps(layers: pd.DataFrame) -> pd.Series:
    """Model → measured step in seconds: Σ ``time_s`` × ``layers`` over its ``advisor_layers`` rows, the
    attention rows (math path) left out."""
    t = _recorded(layers)
    t = t[t["op"] != ATTENTION]
    return (t["time_s"] * t["layers"]).groupby(t["model"], sort=False).sum().rename("measured_step_s")


def compare_steps(steps: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """:func:`peer_steps` (or any frame with model, predictor, predicted_step_s) with ``measured_step_s`` and
    ``measured/predicted`` beside each row."""
    if not isinstance(steps, pd.DataFrame) or not {"model", "predictor", "predicted_step_s"} <= set(steps.columns):
        raise ValueError("steps must be a DataFrame with columns model, predictor, predicted_step_s")
    out = steps.merge(measured_steps(layers).reset_index(), on="model", how="left")
    out["measured/predicted"] = out["measured_step_s"] / out["predicted_step_s"]
    return out


def compare_ops(ops: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """:func:`peer_ops` joined to the recorded rows by (model, row), checked to be the same layer and op;
    attention rows dropped. Adds time_s and ``measured/predicted``. ValueError on a row that differs."""
    if not isinstance(ops, pd.DataFrame) or not {"model", "row", "layer", "op", "predicted_s"} <= set(ops.columns):
        raise ValueError("ops must be a DataFrame with columns model, row, layer, op, predicted_s")
    recorded = _recorded(layers)[["model", "row", "layer", "op", "time_s"]]
    both = ops.merge(recorded, on=["model", "row"], how="inner", suffixes=("", "_recorded"))
    differ = both[(both["layer"].fillna("") != both["layer_recorded"].fillna("")) | (both["op"] != both["op_recorded"])]
    if len(differ):
        r = differ.iloc[0]
        raise ValueError(f"ops row {r['row']} of {r['model']} is {r['layer']!r} {r['op']} but the recording's is "
                         f"{r['layer_recorded']!r} {r['op_recorded']}: not the same rows")
    both = both[both["op"] != ATTENTION].drop(columns=["layer_recorded", "op_recorded"])
    both["measured/predicted"] = both["time_s"] / both["predicted_s"]
    return both.reset_index(drop=True)


def op_error_summary(compared: pd.DataFrame) -> pd.DataFrame:
    """Per predictor and model (and ``all``): n, median and p90 of |measured/predicted − 1|."""
    if not isinstance(compared, pd.DataFrame) or "measured/predicted" not in compared.columns:
        raise ValueError("compared must be compare_ops' DataFrame")
    error = (compared["measured/predicted"] - 1).abs()
    rows = []
    for (predictor, model), e in list(error.groupby([compared["predictor"], compared["model"]], sort=False)) + \
            [((p, "all"), e) for p, e in error.groupby(compared["predictor"], sort=False)]:
        rows.append({"predictor": predictor, "model": model, "n": int(e.notna().sum()),
                     "median |error|": float(np.nanmedian(e)) if e.notna().any() else math.nan,
                     "p90 |error|": float(np.nanquantile(e, 0.9)) if e.notna().any() else math.nan})
    return pd.DataFrame(rows)
