"""Predicted time of every op's passes on a device: the GEMM model for GEMMs, the byte model for the rest.

- A GEMM is priced by :func:`perfkit.explain_gemm`; a batch of ``b`` equal GEMMs as one GEMM with the
  batch stacked into M (the same tiles, in the same waves), never faster than its true bytes allow; a
  GEMM repeated ``count`` times (a recurrent step) costs ``count`` times one.
- Fused attention costs, per pass, the math time of its GEMMs or the time to move Q, K, V and O
  (and their gradients backward), whichever is longer, plus one kernel's latency.
- A memory-bound op costs :func:`perfkit.op_model.op_time_s`: :func:`perfkit.layer_bytes` at the achievable
  bandwidth, or what bounds the kernels PyTorch runs for it where the recordings show it (batch norm, pooling);
  its FLOPs are counted as one per output element (NVIDIA's convention for ReLU), to place it on the roofline.
- A convolution is an implicit GEMM that moves its input, weights and output once per pass (not the
  GEMM's operands: its input is not copied once per filter tap). A grouped convolution is a batch of
  per-group GEMMs, or, where its groups are too narrow for Tensor Core tiles (fewer than 16 bytes of
  channels per group: a depthwise convolution has one) or where that is faster, a direct kernel on
  CUDA cores: its bytes or its FLOPs at the float32 (CUDA-core) peak, whichever is longer
  (:meth:`Pricer.direct`).
- An NCHW convolution on Tensor Cores also pays a copy of its input and output into NHWC and back
  (``conv.nchw_transpose`` rows), once per pass: what ``channels_last`` saves.

Units: seconds, bytes, FLOP.
"""

from __future__ import annotations

import math
from typing import Any

from ..ceilings import TENSOR_CORE_DTYPES
from ..devices import DeviceSpec
from ..dtypes import itemsize, output_itemsize
from ..ceilings import gemm_latency_s, kernel_latency_s
from ..gemm_model import DEFAULT_MODEL, GemmPrediction, explain_gemm
from ..memory_model import layer_bytes
from ..op_model import op_time_s
from .ops import Gemm, Op, passes

__all__ = ["COLUMNS", "Pricer"]

#: Columns of ``Advice.layers``, in order.
COLUMNS = ("layer", "module", "op", "pass", "M", "N", "K", "batch", "count", "bytes", "flops", "intensity",
           "bound", "tile", "tiles", "waves", "wave_utilization", "tile_efficiency", "predicted_s")


class Pricer:
    """Prices ops for one dtype, device and mode (training or inference), caching each GEMM shape."""

    def __init__(self, dtype: str, spec: DeviceSpec, training: bool) -> None:
        self.dtype, self.spec, self.training = dtype, spec, training
        self.ceilings = spec.ceilings
        self.bandwidth = min(self.ceilings.bandwidth, spec.mem_bandwidth)
        self.gemm_latency_s = gemm_latency_s(self.ceilings, DEFAULT_MODEL.latency_s)  # measured, else the model's
        self.latency_s = kernel_latency_s(self.ceilings)  # a memory-bound kernel's
        self._gemms: dict[tuple[int, int, int], GemmPrediction] = {}

    def explain(self, M: int, N: int, K: int) -> GemmPrediction:
        """:func:`perfkit.explain_gemm` of one M×N×K GEMM in this dtype on this device (cached)."""
        key = (M, N, K)
        if key not in self._gemms:
            self._gemms[key] = explain_gemm(M, N, K, self.dtype, self.spec, ceilings=self.ceilings)
        return self._gemms[key]

    def gemm_bytes(self, g: Gemm) -> int:
        s, out = itemsize(self.dtype), output_itemsize(self.dtype)
        return g.batch * (s * (g.M * g.K + g.K * g.N) + out * g.M * g.N)

    def gemm_row(self, g: Gemm, nbytes: int | None = None) -> dict[str, Any]:
        """The layers-table columns of one (batched, repeated) GEMM; ``nbytes``: the bytes it moves, when not
        its operands' (an implicit-GEMM convolution reads its input once, not once per filter tap)."""
        p = self.explain(g.M * g.batch, g.N, g.K)
        nbytes = self.gemm_bytes(g) if nbytes is None else nbytes
        floor_s = nbytes / self.bandwidth + self.gemm_latency_s
        one_s = max(p.predicted_s, floor_s)
        flops = 2 * g.M * g.N * g.K * g.batch
        return {"M": g.M, "N": g.N, "K": g.K, "batch": g.batch, "count": g.count, "bytes": nbytes * g.count,
                "flops": flops * g.count, "intensity": flops / nbytes,
                "bound": p.bound if one_s == p.predicted_s else "memory", "tile": f"{p.tile[0]}x{p.tile[1]}",
                "tiles": p.tiles, "waves": p.waves,
                "wave_utilization": p.utilization, "tile_efficiency": p.tile_efficiency,
                "predicted_s": one_s * g.count}

    def attention_row(self, parts: list[tuple[str, Gemm]], pass_: str, p: dict) -> dict[str, Any]:
        """One fused attention kernel: the GEMMs' math or the Q, K, V, O traffic, whichever is longer."""
        s, b = itemsize(self.dtype), p["batch"]
        q, k, v, o = p["L"] * p["E"], p["S"] * p["E"], p["S"] * p["Ev"], p["L"] * p["Ev"]
        stats = 4 * b * p["L"]  # float32 log-sum-exp per query row, saved for backward
        nbytes = s * b * ((q + k + v + o) if pass_ == "forward" else 2 * (q + k + v + o)) + stats
        math_s = sum(self.explain(g.M * g.batch, g.N, g.K).math_s for _, g in parts)
        flops = sum(2 * g.M * g.N * g.K * g.batch for _, g in parts)
        first = self.explain(parts[0][1].M * b, parts[0][1].N, parts[0][1].K)
        memory_s = nbytes / self.bandwidth
        g0 = parts[0][1]
        return {"M": g0.M, "N": g0.N, "K": g0.K, "batch": b, "count": 1, "bytes": nbytes, "flops": flops,
                "intensity": flops / nbytes, "bound": "math" if math_s >= memory_s else "memory",
                "tile": f"{first.tile[0]}x{first.tile[1]}", "tiles": first.tiles, "waves": first.waves,
                "wave_utilization": first.utilization, "tile_efficiency": first.tile_efficiency,
                "predicted_s": max(math_s, memory_s) + self.latency_s}

    def memory_row(self, kind: str, shape: tuple, params: dict, pass_: str, nhwc: bool = False) -> dict[str, Any]:
        """One memory-bound op's pass: bytes from the byte model, seconds from :func:`perfkit.op_model.op_time_s`
        (the kernels PyTorch runs for it), one FLOP per output element."""
        nbytes = layer_bytes(kind, shape, self.dtype, pass_=pass_, **params)
        flops = math.prod(shape)
        return {"bytes": nbytes, "flops": flops, "intensity": flops / nbytes if nbytes else math.nan,
                "bound": "memory", "predicted_s": op_time_s(kind, shape, self.dtype, self.spec, pass_=pass_,
                                                            ceilings=self.ceilings, nhwc=nhwc, **params)}

    def rows(self, op: Op) -> list[dict[str, Any]]:
        """The layers-table rows of ``op``: one per pass (and part), each with its predicted seconds."""
        work = passes(op, self.training)
        base = {"layer": op.layer, "module": op.module}
        if op.op == "attention":
            out = []
            for pass_ in dict.fromkeys(w[0] for w in work):
                parts = [(part, g) for ps, part, g in work if ps == pass_]
                out.append({**base, "op": "attention", "pass": pass_, **self.attention_row(parts, pass_, op.params)})
            return out
        if self.direct(op):
            return [{**base, "op": "conv.direct", "pass": pass_, **self.direct_row(op.params, w)}
                    for pass_, _, w in work]
        out = []
        for pass_, part, w in work:
            name = f"{op.op}.{part}" if part else op.op
            if op.is_gemm:
                row = self.gemm_row(w, self.conv_bytes(op.params) if op.op == "conv" else None)
            else:
                row = self.memory_row(*w, pass_, nhwc=op.params.get("nhwc", False))
            if row["bytes"] or op.is_gemm:
                out.append({**base, "op": name, "pass": pass_, **row})
        if op.op == "conv" and self.transposes(op):
            p = op.params
            shapes = [(p["N"], p["C"], p["H"], p["W"]), (p["N"], p["K"], p["P"], p["Q"])]
            for pass_ in ("forward", "backward") if self.training else ("forward",):
                for shape in shapes:  # the input and output (their gradients backward), each copied once
                    out.append({**base, "op": "conv.nchw_transpose", "pass": pass_,
                                **self.memory_row("elementwise", shape, {}, "forward")})
        return out

    def conv_parts(self, p: dict) -> tuple[int, int, int]:
        """Bytes of a convolution's input, weights and output: what one pass moves, once each (an implicit
        GEMM reads each input element once from memory; the filter taps' reuse is served by caches)."""
        s, out = itemsize(self.dtype), output_itemsize(self.dtype)
        return (s * p["N"] * p["C"] * p["H"] * p["W"], s * p["K"] * (p["C"] // p["groups"]) * p["R"] * p["S"],
                out * p["N"] * p["K"] * p["P"] * p["Q"])

    def conv_bytes(self, p: dict) -> int:
        """Bytes one pass of a convolution moves (:meth:`conv_parts`, summed)."""
        return sum(self.conv_parts(p))

    def direct(self, op: Op) -> bool:
        """Whether ``op`` is a grouped convolution that runs as a direct kernel: too narrow per group for
        Tensor Core tiles (fewer than 16 bytes of input or output channels per group, as in a depthwise
        convolution), or faster that way than as a batch of per-group GEMMs (a library picks the faster)."""
        if op.op != "conv" or op.params["groups"] == 1:
            return False
        p, g = op.params, op.params["groups"]
        if min(p["C"] // g, p["K"] // g) * itemsize(self.dtype) < 16:
            return True
        work = passes(op, self.training)
        as_gemms = sum(self.gemm_row(w, self.conv_bytes(p))["predicted_s"] for _, _, w in work)
        return sum(self.direct_row(p, w)["predicted_s"] for _, _, w in work) < as_gemms

    def direct_row(self, p: dict, g: Gemm) -> dict[str, Any]:
        """One pass of a direct convolution: its tensors' bytes once, or its FLOPs at the CUDA-core peak."""
        nbytes = self.conv_bytes(p)
        flops = 2 * g.M * g.N * g.K * g.batch
        math_s = flops / self.spec.peaks.get("float32", self.spec.peak_flop_s(self.dtype))
        memory_s = nbytes / self.bandwidth
        return {"M": g.M, "N": g.N, "K": g.K, "batch": g.batch, "count": 1, "bytes": nbytes, "flops": flops,
                "intensity": flops / nbytes, "bound": "memory" if memory_s >= math_s else "math",
                "predicted_s": max(memory_s, math_s) + self.latency_s}

    def transposes(self, op: Op) -> bool:
        """Whether a convolution pays NCHW ↔ NHWC transposes: an NCHW 2-D convolution on Tensor Cores,
        whose kernels work in NHWC (NVIDIA, *Convolutional Layers*: the layout section)."""
        return (op.op == "conv" and self.dtype in TENSOR_CORE_DTYPES and not op.params["nhwc"]
                and op.params["dims"] == 2 and not self.direct(op))

    def time_s(self, op: Op) -> float:
        """Predicted seconds of all of ``op``'s passes."""
        return sum(r["predicted_s"] for r in self.rows(op))
