"""Predicted time of every op's passes on a device: the GEMM model for GEMMs, the byte model for the rest.

- A GEMM is priced by :func:`perfkit.explain_gemm`; a batch of ``b`` equal GEMMs as one GEMM with the
  batch stacked into M (the same tiles, in the same waves), never faster than its true bytes allow; a
  GEMM repeated ``count`` times (a recurrent step) costs ``count`` times one.
- Fused attention (``F.scaled_dot_product_attention``) is the SDPA kernel PyTorch runs on the device
  (cuDNN's on Hopper and Blackwell, AOTriton's flash kernel on AMD), priced by
  :func:`perfkit.attention_model.fused_attention_s`: its thread blocks' multiplies and exponentials at that
  backend's measured rates, scheduled on the SMs; never below the time to move Q, K, V and O (and their
  gradients backward) plus one kernel's latency.
- A memory-bound op costs :func:`perfkit.op_model.op_time_s`: :func:`perfkit.layer_bytes` at the achievable
  bandwidth, or what bounds the kernels PyTorch runs for it where the recordings show it (batch norm, pooling);
  its FLOPs are counted as one per output element (NVIDIA's convention for ReLU), to place it on the roofline.
- A convolution is an implicit GEMM that moves its input, weights and output once per pass (not the
  GEMM's operands: its input is not copied once per filter tap). A grouped convolution is a batch of
  per-group GEMMs, or, where its groups are too narrow for Tensor Core tiles (fewer than 16 bytes of
  channels per group: a depthwise convolution has one) or where that is faster, a direct kernel on
  CUDA cores: its bytes or its FLOPs at the float32 (CUDA-core) peak, whichever is longer
  (:meth:`Pricer.direct`).
- An NCHW convolution on Tensor Cores also pays cuDNN's transposes into NHWC and back
  (``conv.nchw_transpose`` rows: what the pass reads, the filters, what it writes), each a kernel at the
  transposes' measured bandwidth: what ``channels_last`` saves; a 1×1 stride-1 one runs as per-image GEMMs
  on the NCHW tensors instead. A 3-channel input is padded to 4 channels by one more, narrow, copy
  (``conv.pad_channels``). :mod:`perfkit.conv_model` says why and what the constants rest on.
- A recurrent layer runs the cuDNN algorithm PyTorch picks (:func:`perfkit.rnn_model.cudnn_algo`): the
  standard one pays one elementwise gate kernel per step and pass besides its GEMMs (``rnn.*.gates`` rows);
  a persistent one replaces the per-step recurrent GEMMs by one kernel's steps (``rnn.*.persistent`` rows).

Units: seconds, bytes, FLOP.
"""

from __future__ import annotations

import math
from typing import Any

from ..ceilings import TENSOR_CORE_DTYPES
from ..devices import DeviceSpec
from ..dtypes import itemsize, output_itemsize
from ..ceilings import cold_start_s, gemm_latency_s, kernel_latency_s
from ..attention_model import fused_attention_s, sdpa_backend
from ..conv_model import (CONV_LAYOUTS, DIRECT_LAYOUTS, conv_evidence, conv_gemm, direct_nchw, implicit_gemm_s,
                          narrow_channels, nchw_transposes, pad_channels_copy)
from ..rnn_model import cudnn_algo, gate_bytes, persistent_step_s
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

    def explain(self, M: int, N: int, K: int, layout: str = "") -> GemmPrediction:
        """:func:`perfkit.explain_gemm` of one M×N×K GEMM in this dtype on this device (cached); ``layout``:
        which dimension of each operand is contiguous (:mod:`perfkit.gemm_alignment`; "" unknown: M, N
        and K all count as leading dimensions for alignment)."""
        key = (M, N, K, layout)
        if key not in self._gemms:
            self._gemms[key] = explain_gemm(M, N, K, self.dtype, self.spec, ceilings=self.ceilings, layout=layout)
        return self._gemms[key]

    def gemm_bytes(self, g: Gemm) -> int:
        s, out = itemsize(self.dtype), output_itemsize(self.dtype)
        return g.batch * (s * (g.M * g.K + g.K * g.N) + out * g.M * g.N)

    def gemm_row(self, g: Gemm, nbytes: int | None = None) -> dict[str, Any]:
        """The layers-table columns of one (batched, repeated) GEMM; ``nbytes``: the bytes it moves, when not
        its operands' (an implicit-GEMM convolution reads its input once, not once per filter tap)."""
        p = self.explain(g.M * g.batch, g.N, g.K, g.layout)
        nbytes = self.gemm_bytes(g) if nbytes is None else nbytes
        floor_s = nbytes / self.bandwidth + self.gemm_latency_s
        one_s = max(p.predicted_s, floor_s)
        # only the first of ``count`` GEMMs run back to back starts with its L2 cold (the flushed-L2 floor)
        repeats_s = (one_s - cold_start_s(self.ceilings, DEFAULT_MODEL.latency_s)) * (g.count - 1)
        flops = 2 * g.M * g.N * g.K * g.batch
        return {"M": g.M, "N": g.N, "K": g.K, "batch": g.batch, "count": g.count, "bytes": nbytes * g.count,
                "flops": flops * g.count, "intensity": flops / nbytes,
                "bound": p.bound if one_s == p.predicted_s else "memory", "tile": f"{p.tile[0]}x{p.tile[1]}",
                "tiles": p.tiles, "waves": p.waves,
                "wave_utilization": p.utilization, "tile_efficiency": p.tile_efficiency,
                "predicted_s": one_s + repeats_s}

    def attention_row(self, parts: list[tuple[str, Gemm]], pass_: str, p: dict,
                      backend: str | None = None) -> dict[str, Any]:
        """One fused attention kernel per pass: :func:`perfkit.attention_model.fused_attention_s` of ``backend``
        (a fused one: "flash", "efficient", "cudnn", as a trace records it) or, None, of the one PyTorch runs
        here, never below the Q, K, V, O traffic (and their gradients backward) plus a latency. Where PyTorch
        would run the unfused math path instead, its GEMMs' math ("math path" in ``bound``)."""
        s, b = itemsize(self.dtype), p["batch"]
        q, k, v, o = p["L"] * p["E"], p["S"] * p["E"], p["S"] * p["Ev"], p["L"] * p["Ev"]
        stats = 4 * b * p["L"]  # float32 log-sum-exp per query row, saved for backward
        nbytes = s * b * ((q + k + v + o) if pass_ == "forward" else 2 * (q + k + v + o)) + stats
        flops = sum(2 * g.M * g.N * g.K * g.batch for _, g in parts)
        first = self.explain(parts[0][1].M * b, parts[0][1].N, parts[0][1].K)
        floor_s = nbytes / self.bandwidth + self.latency_s
        if backend is None and sdpa_backend(self.spec, self.dtype, p["E"], head_dim_v=p["Ev"]) == "math":
            kernel_s, bound = sum(self.explain(g.M * g.batch, g.N, g.K).math_s for _, g in parts) + self.latency_s, \
                "math path"
        else:
            kernel_s = fused_attention_s(b, p["L"], p["S"], p["E"], self.dtype, self.spec, causal=p["causal"],
                                         backend=backend, pass_=pass_, ceilings=self.ceilings,
                                         head_dim_v=p["Ev"])[0]
            bound = "math"
        g0 = parts[0][1]
        return {"M": g0.M, "N": g0.N, "K": g0.K, "batch": b, "count": 1, "bytes": nbytes, "flops": flops,
                "intensity": flops / nbytes, "bound": bound if kernel_s >= floor_s else "memory",
                "tile": f"{first.tile[0]}x{first.tile[1]}", "tiles": first.tiles, "waves": first.waves,
                "wave_utilization": first.utilization, "tile_efficiency": first.tile_efficiency,
                "predicted_s": max(kernel_s, floor_s)}

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
        if op.op == "conv":
            return [{**base, **row} for row in self.conv_rows(op, work)]
        if op.op == "rnn":
            return [{**base, **row} for row in self.rnn_rows(op, work)]
        out = []
        for pass_, part, w in work:
            name = f"{op.op}.{part}" if part else op.op
            if op.is_gemm:
                row = self.gemm_row(w)
            else:
                row = self.memory_row(*w, pass_, nhwc=op.params.get("nhwc", False))
            if row["bytes"] or op.is_gemm:
                out.append({**base, "op": name, "pass": pass_, **row})
        return out

    def conv_gemm_row(self, p: dict, pass_: str, g: Gemm, per_image: bool = False) -> dict[str, Any]:
        """One pass's implicit GEMM(s) as run (:func:`perfkit.conv_model.conv_gemm`: channels padded, grouped a
        batch of per-group GEMMs; ``per_image``, a direct NCHW 1×1: per-image GEMMs, whose tiles cannot span
        images), priced by :func:`perfkit.conv_model.implicit_gemm_s` (the GEMM model's math, the convolution's
        tensors once); M, N, K and FLOPs those of the pass's GEMM ``g`` (:func:`perfkit.advisor.ops.passes`)."""
        M, N, K, images = conv_gemm(p, pass_, self.dtype, direct=per_image)
        layout = (DIRECT_LAYOUTS if per_image else CONV_LAYOUTS)[pass_]
        batch = p["groups"] * images
        key = ("conv", M, N, K, batch, layout)
        if key not in self._gemms:
            self._gemms[key] = explain_gemm(M, N, K, self.dtype, self.spec, ceilings=self.ceilings, batch=batch,
                                            layout=layout)
        e, nbytes = self._gemms[key], self.conv_bytes(p)
        if per_image and pass_ == "wgrad":  # each image's float32 partial dW, written and read back to be summed
            nbytes += 2 * 4 * batch * M * N
        time_s = implicit_gemm_s(e, nbytes, narrow_channels(p["C"] // p["groups"], self.dtype))
        flops = 2 * g.M * g.N * g.K * g.batch
        return {"M": g.M, "N": g.N, "K": g.K, "batch": g.batch, "count": 1, "bytes": nbytes, "flops": flops,
                "intensity": flops / nbytes, "bound": "math" if e.math_s + e.launch_overhead_s >= time_s else "memory",
                "tile": f"{e.tile[0]}x{e.tile[1]}", "tiles": e.tiles, "waves": e.waves,
                "wave_utilization": e.utilization, "tile_efficiency": e.tile_efficiency,
                "predicted_s": time_s}

    def copy_row(self, nbytes: int, fraction: float) -> dict[str, Any]:
        """One memory-bound copy kernel moving ``nbytes`` (read + written) at ``fraction`` of the bandwidth."""
        return {"bytes": nbytes, "flops": 0, "intensity": 0.0, "bound": "memory",
                "predicted_s": self.latency_s + nbytes / (fraction * self.bandwidth)}

    def conv_rows(self, op: Op, work: list) -> list[dict[str, Any]]:
        """A convolution's rows, pass by pass: a direct kernel (:meth:`direct`), or its GEMM(s), cuDNN's
        channel-padding copy of a 3-channel input and, in NCHW on Tensor Cores, its transposes (the input
        padded in the same transpose); a 1×1 stride-1 NCHW pass as per-image GEMMs on the NCHW tensors where
        that is faster (cuDNN picks the faster). :mod:`perfkit.conv_model` gives the causes and the evidence."""
        if self.direct(op):
            return [{"op": "conv.direct", "pass": pass_, **self.direct_row(op.params, w)} for pass_, _, w in work]
        p, out = op.params, []
        ev, _ = conv_evidence(self.spec)
        nchw = self.transposes(op)
        for pass_, _, w in work:
            rows = [{"op": "conv", "pass": pass_, **self.conv_gemm_row(p, pass_, w)}]
            pad = pad_channels_copy(p, pass_, self.dtype) if self.dtype in TENSOR_CORE_DTYPES else 0
            if pad and not nchw:
                rows.append({"op": "conv.pad_channels", "pass": pass_, **self.copy_row(pad, ev.narrow_copy_fraction)})
            for tensor, moved in nchw_transposes(p, pass_, self.dtype) if nchw else []:
                narrow = pad and tensor == "x"  # the input's transpose pads it too: 6-byte rows
                rows.append({"op": "conv.nchw_transpose", "pass": pass_, **self.copy_row(
                    pad if narrow else moved, ev.narrow_copy_fraction if narrow else ev.transpose_fraction)})
            if nchw and direct_nchw(p):
                direct = [{"op": "conv", "pass": pass_, **self.conv_gemm_row(p, pass_, w, per_image=True)}]
                if direct[0]["predicted_s"] < sum(r["predicted_s"] for r in rows):
                    rows = direct
            out += rows
        return out

    def rnn_rows(self, op: Op, work: list) -> list[dict[str, Any]]:
        """A recurrent layer's rows under the cuDNN algorithm PyTorch picks (:func:`perfkit.rnn_model.cudnn_algo`):
        its GEMMs and, per step of the recurrence (forward, and the backward's dgrad loop), either one
        elementwise gate kernel besides the recurrent GEMM (standard) or a persistent kernel's step instead."""
        p, out = op.params, []
        T, B, H, cell = p["seq_len"], p["batch"], p["hidden"], p["cell"]
        for pass_, part, w in work:
            name = f"rnn.{part}"
            if not part.endswith(".recurrent") or pass_ == "wgrad":
                out.append({"op": name, "pass": pass_, **self.gemm_row(w)})
                continue
            layer = int(part[1:].split(".")[0])
            x = p["input_size"] if layer == 0 else H * p["directions"]
            algo = cudnn_algo(cell, H, x, B, T, p["layers"], p["directions"], self.dtype, self.spec,
                              forward=pass_ == "forward")
            if algo == "standard":
                out.append({"op": name, "pass": pass_, **self.gemm_row(w)})
                step = "forward" if pass_ == "forward" else "backward"
                gates = self.copy_row(gate_bytes(cell, H, B, self.dtype, step), 1.0)
                out.append({"op": name.replace(".recurrent", ".gates"), "pass": pass_, "count": T, **gates,
                            "bytes": T * gates["bytes"], "predicted_s": T * gates["predicted_s"]})
            else:  # one kernel: its launch, then every step's barrier and math
                step_s, _ = persistent_step_s(cell, H, B, self.spec)
                row = self.gemm_row(w)
                row.update(predicted_s=self.latency_s + T * step_s, bound="latency")
                out.append({"op": name.replace(".recurrent", ".persistent"), "pass": pass_, **row})
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
        as_gemms = sum(self.conv_gemm_row(p, pass_, w)["predicted_s"] for pass_, _, w in work)
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
