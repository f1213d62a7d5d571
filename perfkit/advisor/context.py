"""What every rule sees (:class:`Context`) and what it returns (:func:`finding`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..roofline import math_bound_batch
from ..shapes import RNN_GATES
from .ops import Op
from .price import Pricer

__all__ = ["MIN_SHARE", "Context", "finding", "matrix_cores", "ref", "small_batch_of"]

#: An op must take at least this share of the step for quantization or memory_bound to report it.
MIN_SHARE = 0.005


@dataclass
class Context:
    """The ops, their pricer, the step's predicted seconds, each op's seconds, and what the data's paths
    say: which GEMMs write a width shared with other layers (a residual stream), which layers' weights
    are tied to others', and which layers perfkit's padding tools take (:func:`.dataflow.paddable_layers`)."""

    ops: list[Op]
    pricer: Pricer
    step_s: float
    times: dict[int, float]  # op index → predicted seconds
    shared: frozenset[int] = frozenset()  # op indices whose output width is shared (dataflow.shared_width_ops)
    tied: dict[str, list[str]] = field(default_factory=dict)  # layer → layers whose weight is the same tensor
    paddable: dict[str, str] = field(default_factory=dict)  # layer → "linear" or "conv2d": what pk pads

    @property
    def dtype(self) -> str:
        return self.pricer.dtype

    def large(self, op: Op) -> bool:
        """Whether ``op`` takes at least :data:`MIN_SHARE` of the step."""
        return self.times[op.index] >= MIN_SHARE * self.step_s

    def saving(self, op: Op, fixed: Op, per_work: float = 1.0) -> float:
        """Seconds saved by running ``fixed`` instead of ``op`` (``per_work``: its share of the work)."""
        return self.times[op.index] - self.pricer.time_s(fixed) * per_work


def finding(op_or_layer: Any, rule: str, message: str, fix: str, saving: float = math.nan,
            fixed: Op | None = None, per_work: float = 1.0) -> dict[str, Any]:
    """A finding; ``fixed`` (the op with the fix applied, priced per ``per_work``) lets it be re-measured."""
    op = op_or_layer if isinstance(op_or_layer, Op) else None
    return {"layer": op.layer if op else op_or_layer, "rule": rule, "message": message, "fix": fix,
            "predicted_saving_s": saving, "_op": op, "_fixed": fixed, "_per_work": per_work}


def small_batch_of(ctx: Context, op: Op) -> tuple[str, int, int] | None:
    """(parameter, value, math-bound value) when ``op`` is memory-bound because of its batch: the gains of a
    larger batch belong to the ``small_batch`` rule alone."""
    if op.op == "linear":
        key, n = "tokens", op.params["tokens"]
        star = math_bound_batch(op.params["in_features"], op.params["out_features"], ctx.pricer.spec, ctx.dtype)
    elif op.op == "rnn":
        H, gates = op.params["hidden"], RNN_GATES[op.params["cell"]]
        key, n = "batch", op.params["batch"]
        star = math_bound_batch(H, H * gates, ctx.pricer.spec, ctx.dtype)
    else:
        return None
    return (key, n, star) if star is not None and n < star else None


def ref(layer: str) -> str:
    """Python that reaches the module named ``layer`` from ``model``: ``model.blocks[0].attn``."""
    return "model" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in layer.split(".")) if layer else "model"


def matrix_cores(spec) -> str:
    """What the vendor calls the GEMM units of ``spec`` (a :class:`~perfkit.DeviceSpec`): "Tensor Core", or
    "Matrix Core" on AMD, for the findings' words."""
    return "Matrix Core" if getattr(spec, "vendor", "") == "AMD" else "Tensor Core"
