"""``advise(model, example_inputs, dtype, spec)``: the whole book applied to a user's model.

One forward pass learns every op's shape (:mod:`.capture`, on the meta device when it can), each op
becomes GEMMs or bytes (:mod:`.ops`) priced on the device (:mod:`.price`), and the rules
(:mod:`.rules`) turn what they see into findings with fixes and predicted savings.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any, Iterable

import pandas as pd

from .._validate import boolean, positive_number
from ..devices import DeviceSpec, cuda_available, resolve_spec
from ..display import Table
from ..dtypes import canonical_dtype
from ..units import format_percent, format_time
from .capture import Capture, ForwardFailed, capture
from .measure import measure_advice
from .ops import GEMM_OPS, Op, map_call
from .price import COLUMNS, Pricer
from .context import Context
from .dataflow import paddable_layers, shared_width_ops, tied_weights
from .rules import RULES, apply_rules

__all__ = ["Advice", "FINDING_COLUMNS", "MFU", "UNMAPPED_COLUMNS", "advise", "advised_spec"]

#: Columns of ``Advice.findings``.
FINDING_COLUMNS = ("layer", "rule", "severity", "message", "fix", "predicted_saving_s")
#: Columns of ``Advice.unmapped``.
UNMAPPED_COLUMNS = ("layer", "module", "op", "reason")

#: The device advice is for when none is given and no GPU is visible.
FALLBACK_SPEC = "H100-SXM"

_FREE_MODULES = {"Identity", "Flatten", "Unflatten"}
_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


@dataclass
class Advice:
    """What :func:`advise` found. ``findings`` and ``layers`` are DataFrames (see their columns);
    ``step_s`` is the predicted seconds of one step (forward, and backward in training)."""

    model: str
    spec: DeviceSpec
    dtype: str
    training: bool
    findings: pd.DataFrame
    layers: pd.DataFrame
    unmapped: pd.DataFrame
    ops: list[Op] = field(repr=False, default_factory=list)
    path: str = "meta"
    note: str = ""
    input_shapes: tuple = ()
    measured: pd.DataFrame | None = None  # per op, after measure(): predicted and measured seconds
    _fixes: list = field(repr=False, default_factory=list)  # per finding: (op, fixed op, per-work factor)
    _pricer: Pricer | None = field(repr=False, default=None)

    @property
    def step_s(self) -> float:
        """Predicted seconds of one step: the sum of every op's passes."""
        return float(self.layers["predicted_s"].sum()) if len(self.layers) else 0.0

    @property
    def flops(self) -> float:
        """FLOPs of one step in its GEMMs (linear, convolution, matmul, attention, recurrent; forward, and
        backward in training): the model FLOPs of :meth:`mfu`. Causal attention counts the half of QKᵀ and PV
        its kernels compute (``FlopCounterMode`` counts the whole L×S); memory-bound ops count none."""
        return float(self.layers.loc[self._gemm_rows(), "flops"].sum()) if len(self.layers) else 0.0

    @property
    def forward_flops(self) -> float:
        """The forward pass's share of :attr:`flops` (what ``FlopCounterMode`` counts on a forward pass)."""
        if not len(self.layers):
            return 0.0
        return float(self.layers.loc[self._gemm_rows() & (self.layers["pass"] == "forward"), "flops"].sum())

    def _gemm_rows(self) -> pd.Series:
        kind = self.layers["op"].str.split(".").str[0]
        return kind.isin(GEMM_OPS) & (self.layers["op"] != "conv.nchw_transpose")

    @property
    def memory_bound_share(self) -> float:
        """Share of the predicted step spent in passes whose time is set by bytes (0 to 1)."""
        if not self.step_s:
            return 0.0
        return float(self.layers.loc[self.layers["bound"] == "memory", "predicted_s"].sum() / self.step_s)

    def mfu(self, step_time_s: float) -> MFU:
        """Model FLOPs utilization of a step measured at ``step_time_s`` seconds: :attr:`flops` ÷ the time,
        against the spec's dense datasheet peak for the dtype and against its achievable ceiling."""
        step_time_s = positive_number("step_time_s", step_time_s)
        measured = self.spec.measured_ceilings
        calibrated = measured is not None and self.dtype in measured.flop_s
        return MFU(self.flops, step_time_s, self.spec.peak_flop_s(self.dtype),
                   self.spec.ceilings.flop_s_for(self.dtype), self.spec.label, self.dtype,
                   measured.source if calibrated else "")

    def by_rule(self) -> pd.DataFrame:
        """One row per rule that fired, in :data:`RULES` order: how many findings, the summed predicted
        saving of those whose fix pays (seconds per step; fixes may overlap) and its share of the step,
        and the finding with the largest saving (its layer, message and fix) as the example."""
        rows = []
        for rule, part in self.findings.groupby("rule", sort=False):
            best = part.sort_values("predicted_saving_s", ascending=False, na_position="last").iloc[0]
            savings = part["predicted_saving_s"]
            total = float(savings[savings > 0].sum()) if (savings > 0).any() else float(savings.max())
            row = {"rule": rule, "findings": len(part), "predicted_saving_s": total,
                   "share": total / self.step_s if self.step_s else math.nan,
                   "example": best["layer"] or "(model)", "message": best["message"], "fix": best["fix"]}
            if "measured_saving_s" in part:
                measured = part["measured_saving_s"]
                row["measured_saving_s"] = float(measured[savings > 0].sum(min_count=1))
            rows.append(row)
        columns = ["rule", "findings", "predicted_saving_s", "share", "example", "message", "fix"]
        table = pd.DataFrame(rows, columns=columns + (["measured_saving_s"] if "measured_saving_s" in
                                                      self.findings else []))
        return table.set_index("rule").reindex([r for r in RULES if r in set(table["rule"])])

    def by_layer(self) -> pd.DataFrame:
        """Predicted seconds per layer, largest first, with its share of the step."""
        t = self.layers.groupby(["layer", "module"], sort=False)["predicted_s"].sum().reset_index()
        t["share"] = t["predicted_s"] / self.step_s
        return t.sort_values("predicted_s", ascending=False, ignore_index=True)

    def _headline(self) -> list[str]:
        mode = "training step" if self.training else "forward pass"
        lines = [f"perfkit advice for {self.model} in {self.dtype} on {self.spec.label} (model predictions)",
                 f"inputs {', '.join(map(str, self.input_shapes))}; one {mode} predicted at "
                 f"{format_time(self.step_s)}; {len(self.layers)} GEMM and memory passes from "
                 f"{len(self.ops)} ops ({'meta device' if self.path == 'meta' else 'a real forward pass'})"]
        if self.measured is not None and len(self.measured):
            m = self.measured
            measured = m["forward_s"] + (m["backward_s"].fillna(0) if self.training else 0)
            predicted = m["predicted_forward_s"] + (m["predicted_backward_s"] if self.training else 0)
            lines.append(f"measured here, each op alone: {format_time(float(measured.sum()))} in all; per op, "
                         f"predicted ÷ measured has a median of {float((predicted / measured).median()):.2f}")
        if self.step_s:
            lines.append(f"memory-bound ops: {format_percent(self.memory_bound_share)} of the step (time set by "
                         f"bytes); {self.flops / 1e9:,.1f} GFLOP per step in GEMMs")
        if self.note:
            lines.append(f"note: {self.note}")
        return lines

    def __str__(self) -> str:
        lines = self._headline()
        if not len(self.findings):
            lines.append("no findings: every rule is met")
        for rule, r in self.by_rule().iterrows():
            saving = (f"saves {format_time(r.predicted_saving_s)} per step ({format_percent(r.share)})"
                      if r.predicted_saving_s > 0 else "no saving priced")
            more = f", {r.findings - 1} more like it" if r.findings > 1 else ""
            if "measured_saving_s" in r and math.isfinite(r.measured_saving_s):
                saving += f"; measured {format_time(r.measured_saving_s)}"
            lines += [f"- {rule}: {r.findings} finding{'s' if r.findings > 1 else ''}, {saving}",
                      f"    e.g. {r.example}{more}: {r.message}", f"    fix: {r.fix}"]
        if len(self.unmapped):
            lines.append(f"unmapped ({len(self.unmapped)}): "
                         + ", ".join(sorted(set(f"{r.module or r.op}" for r in self.unmapped.itertuples()))))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<p>{html.escape(line)}</p>" for line in self._headline())
        if not len(self.findings):
            return head + "<p>No findings: every rule is met.</p>"
        rules = self.by_rule().copy()
        rules["predicted_saving_s"] = [format_time(s) if s > 0 else "–" for s in rules["predicted_saving_s"]]
        rules["share"] = [format_percent(s) if s > 0 else "–" for s in rules["share"]]
        if "measured_saving_s" in rules:
            rules["measured_saving_s"] = [format_time(s) if math.isfinite(s) else "–"
                                          for s in rules["measured_saving_s"]]
        rules = rules.rename(columns={"predicted_saving_s": "saving per step", "share": "of the step",
                                      "measured_saving_s": "measured saving"}).reset_index()
        tail = (f"<p>Unmapped: {html.escape(', '.join(sorted(set(self.unmapped['module']))))}</p>"
                if len(self.unmapped) else "")
        return head + Table(rules)._repr_html_() + tail

    def measure(self, device: str = "auto", *, fixes: bool = True, progress: bool = True) -> pd.DataFrame:
        """Time every op (forward, and backward in training) on ``device`` and, with ``fixes``, each fix that
        changes an op; returns ``measured`` (one row per op: predicted and measured seconds) and adds
        ``measured_saving_s`` to ``findings``. Identical ops are timed once. The device must be the one
        the advice is for (``spec``), so that predictions and measurements compare.
        """
        return measure_advice(self, device, fixes=fixes, progress=progress)

    def saving_share(self) -> float:
        """The findings' summed positive predicted savings as a share of the step (an upper bound: fixes
        may overlap)."""
        s = self.findings["predicted_saving_s"]
        return float(s[s > 0].sum() / self.step_s) if self.step_s else 0.0


@dataclass(frozen=True)
class MFU:
    """Model FLOPs utilization: ``flops`` done in ``step_time_s`` (``flop_s``) as a share of the dense
    datasheet peak (``of_peak``, what papers report) and of the achievable ceiling (``of_ceiling``, what
    is left to win): measured on this GPU when ``ceiling_source`` says so (:func:`perfkit.calibrate`),
    else the documented fraction of the datasheet. Never a sparse peak: a dense model cannot use 2:4
    sparsity's doubled rate."""

    flops: float
    step_time_s: float
    peak_flop_s: float
    ceiling_flop_s: float
    device: str = ""
    dtype: str = ""
    ceiling_source: str = ""  # where a measured ceiling comes from; "" for the default fraction

    @property
    def flop_s(self) -> float:
        return self.flops / self.step_time_s

    @property
    def of_peak(self) -> float:
        return self.flop_s / self.peak_flop_s

    @property
    def of_ceiling(self) -> float:
        return self.flop_s / self.ceiling_flop_s

    def __str__(self) -> str:
        head = (f"{self.flop_s / 1e12:.1f} TFLOP/s in {self.dtype} on {self.device}: "
                f"MFU {format_percent(self.of_peak)} "
                f"of the {self.peak_flop_s / 1e12:.0f} TFLOP/s dense datasheet peak, "
                f"{format_percent(self.of_ceiling)} of ")
        if self.ceiling_source:
            return head + f"the {self.ceiling_flop_s / 1e12:.0f} TFLOP/s this GPU achieves ({self.ceiling_source})"
        return head + (f"the {self.ceiling_flop_s / 1e12:.0f} TFLOP/s achievable (a documented fraction of the "
                       "datasheet; `python -m perfkit calibrate` measures this GPU's)")


def advised_spec(spec: str | DeviceSpec | None) -> tuple[DeviceSpec, str]:
    """``spec`` as a :class:`DeviceSpec` (:func:`perfkit.devices.resolve_spec`) and a note: a name or
    spec as given; None is this GPU, or :data:`FALLBACK_SPEC` when there is none."""
    if spec is None and not cuda_available():
        return resolve_spec(FALLBACK_SPEC), f"no GPU here: advice for {FALLBACK_SPEC} (pass spec= to choose)"
    return resolve_spec(spec), ""


def _check_inputs(example_inputs: Any) -> None:
    import torch
    from torch.utils import _pytree as pytree

    if isinstance(example_inputs, Mapping) and not isinstance(example_inputs, dict):
        example_inputs = dict(example_inputs)  # a tokenizer's BatchEncoding, which pytree does not open
    tensors = [t for t in pytree.tree_leaves(example_inputs) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise TypeError("example_inputs must be a tensor, a tuple of positional arguments or a mapping of keyword "
                        f"arguments holding at least one tensor, got {type(example_inputs).__name__}")
    empty = [tuple(t.shape) for t in tensors if t.numel() == 0]
    if empty:
        raise ValueError(f"example_inputs holds a tensor of size zero (shape {empty[0]}): give at least one "
                         "sample, as many as a training or inference step has")


def _unmapped(cap: Capture, reasons: dict[int, str], mapped: set[int]) -> pd.DataFrame:
    rows = [{"layer": c.layer, "module": c.module, "op": c.op, "reason": reasons[c.index]}
            for c in cap.calls if reasons.get(c.index)]
    # modules some of whose descendants ran; one none of whose children ran is listed like a leaf (its work,
    # e.g. nn.MultiheadAttention's one function call, is lost otherwise)
    parents = {".".join(parts[:i]) for parts in (r.layer.split(".") for r in cap.modules if r.layer)
               for i in range(len(parts))}
    for run in cap.modules:
        inside = range(run.first_call, run.last_call)
        innermost = run.leaf or run.layer not in parents
        if (innermost and run.computes and run.module not in _FREE_MODULES
                and not any(i in mapped or i in reasons for i in inside)):
            rows.append({"layer": run.layer, "module": run.module, "op": "",
                         "reason": "ran no op perfkit recognises"})
    return pd.DataFrame(rows, columns=list(UNMAPPED_COLUMNS)).drop_duplicates(ignore_index=True)


def advise(model: Any, example_inputs: Any, dtype: Any = "bfloat16", spec: Any = None, *, training: bool = True,
           meta: bool = True, measure: bool = False, rules: Iterable[str] | None = None) -> Advice:
    """Apply the book's rules to ``model`` on ``spec`` in ``dtype`` (see :mod:`perfkit.advisor`).

    - ``example_inputs``: a tensor, a tuple of positional arguments or a dict of keyword arguments
      (meta tensors are fine); ``dtype``: the dtype the model is to run in; ``spec``: a device name,
      a :class:`~perfkit.DeviceSpec`, or None for this GPU (H100-SXM without one);
    - ``training``: a training step (forward, activation and weight gradients) or a forward pass;
    - ``meta``: learn the shapes on a meta-device copy (no weight is allocated); the model itself
      runs only when that fails;
    - ``measure``: also time every op and fix on this device (:meth:`Advice.measure`);
    - ``rules``: the rule ids to apply (default: all of :data:`~perfkit.advisor.RULES`).

    Raises ``TypeError`` for a model that is not an ``nn.Module`` or inputs without a tensor,
    ``ValueError`` naming the layer where the forward pass failed, ``LookupError`` for an unknown
    device, rule or a dtype the device has no peak for. The model is left as it was.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_inputs(example_inputs)
    dtype = canonical_dtype(dtype)
    training, meta = boolean("training", training), boolean("meta", meta)
    spec, note = advised_spec(spec)
    if dtype not in spec.peaks:  # refused before the model runs: no math in this dtype to price
        raise LookupError(f"dtype {dtype!r}: {spec.name} has no {dtype} peak (its datasheet gives none), so "
                          f"perfkit cannot advise for it there; dtypes {spec.name} has: "
                          f"{', '.join(spec.peaks) or 'none'}")
    if not spec.sms or not spec.mem_bandwidth:
        raise LookupError(f"{spec.name} has no SM count or memory bandwidth, so perfkit cannot model it")
    chosen = list(RULES) if rules is None else list(rules)
    unknown = [r for r in chosen if r not in RULES]
    if unknown:
        raise LookupError(f"unknown rule(s) {', '.join(map(repr, unknown))}; rules: {', '.join(RULES)}")
    try:
        cap = capture(model, example_inputs, training=training, meta=meta)
    except ForwardFailed as e:
        raise ValueError(str(e)) from e.error
    ops, reasons = [], {}
    for call in cap.calls:
        mapped, reason = map_call(call, training)
        ops += mapped
        if reason:
            reasons[call.index] = reason
    ops = [replace(op, index=i) for i, op in enumerate(ops)]
    pricer = Pricer(dtype, spec, training)
    rows, times = [], {}
    for op in ops:
        op_rows = pricer.rows(op)
        times[op.index] = sum(r["predicted_s"] for r in op_rows)
        rows += op_rows
    layers = pd.DataFrame(rows, columns=list(COLUMNS))
    step_s = float(layers["predicted_s"].sum()) if len(layers) else 0.0
    ctx = Context(ops, pricer, step_s, times, shared_width_ops(cap.calls, ops), tied_weights(model),
                  paddable_layers(model))
    found = apply_rules(ctx, chosen) if step_s else []
    table = pd.DataFrame(found, columns=[*FINDING_COLUMNS, "_op", "_fixed", "_per_work"])
    table["order"] = table["severity"].map(_ORDER)
    table = table.sort_values(["order", "predicted_saving_s"], ascending=[True, False], na_position="last",
                              ignore_index=True)
    fixes = list(zip(table["_op"], table["_fixed"], table["_per_work"]))
    assumed = (f"meta tensors hold no values: {cap.assumed} check(s) of a boolean tensor (such as 'is the "
               "attention mask all ones?') were taken as true" if cap.assumed else "")
    notes = "; ".join(n for n in (note, cap.note if cap.path == "real" else "", assumed) if n)
    mapped = {c.index for c in cap.calls if c.index not in reasons}
    advice = Advice(type(model).__name__, spec, dtype, training, table[list(FINDING_COLUMNS)], layers,
                    _unmapped(cap, reasons, mapped), ops, cap.path, notes, cap.input_shapes, None, fixes, pricer)
    if boolean("measure", measure):
        advice.measure()
    return advice
