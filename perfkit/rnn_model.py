"""``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` on cuDNN: which algorithm runs, and what it costs beyond its GEMMs.

PyTorch picks cuDNN's algorithm by fixed rules (``aten/src/ATen/native/cudnn/RNN.cpp``, ``get_algo``):

- ``PERSIST_STATIC_SMALL_H`` (cuDNN ≥ 8.2.1, not float64): forward hidden ≤ 384 (vanilla) or ≤ 192
  (LSTM, GRU); backward ≤ 256 or ≤ 128.
- ``PERSIST_STATIC`` (float16 only — not bfloat16): one layer, one direction, hidden ≤ 1024, hidden and
  input size multiples of 128, and on the device: sm80+ with at least 98 SMs (not sm86): LSTM with a batch
  multiple of 8 up to 128, vanilla RNN the same but not batch ≥ 96 with hidden ≥ 896, GRU never; Volta
  (sm70): batch 8 or a multiple of 16 (not 80, 112) with enough steps; Turing never.
- else ``STANDARD``.

What each runs (:func:`cudnn_algo`):

- **Standard**: per layer and direction, one input GEMM over all steps, then per step the recurrent GEMM
  and one elementwise kernel for the gates (sigmoid/tanh, the cell update), which reads the two GEMMs'
  gate pre-activations and writes h (and c). So a step costs a GEMM plus a memory-bound kernel's fixed cost
  (:func:`gate_bytes`): on the H200 a float16 step takes 9.5–21 µs, and the GEMM model plus one kernel
  latency predicts the 60 standard steps of ``rnn_cudnn`` and ``rnn_persistent`` to a median 8 % (no
  constant fitted). The backward pass is the same loop (the gates' gradient, then the recurrent dgrad GEMM)
  and the weight gradients as two GEMMs over all steps.
- **Persistent**: one kernel keeps the recurrent weights on chip and runs every step, with a grid-wide
  barrier between steps: ``sync_s + step FLOPs / F`` per step (:func:`persistent_step_s`), fitted on the
  float16 persistent rows of ``rnn_cudnn`` (LSTM) and ``rnn_persistent`` (vanilla) by :func:`fit_persistent`.

Constants are per architecture family (:data:`RNN_EVIDENCE`); others use the nearest one's, labelled
assumed. Units: seconds, bytes, FLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .architectures import evidence_of, family
from .dtypes import canonical_dtype, itemsize
from .shapes import RNN_GATES

__all__ = ["ALGOS", "RNN_EVIDENCE", "RnnEvidence", "cudnn_algo", "fit_persistent", "gate_bytes",
           "persistent_step_s", "rnn_evidence"]

#: cuDNN's recurrent algorithms as PyTorch names them.
ALGOS = ("standard", "persist_static", "persist_static_small_h")


@dataclass(frozen=True)
class RnnEvidence:
    """A persistent recurrent kernel's per-step costs on one architecture family."""

    family: str
    sync_s: float  # the grid-wide barrier and hidden-state exchange of one step
    persistent_fraction: float  # its step FLOP/s ÷ the float16 dense Tensor Core peak
    source: str


#: Fitted by :func:`fit_persistent` on our H200 recordings (16 float16 persistent rows: rnn_cudnn LSTM,
#: rnn_persistent vanilla; the steps' FLOPs at 104 TFLOP/s, 0.105 of 989.4, plus 2.09 µs).
RNN_EVIDENCE: dict[str, RnnEvidence] = {
    "hopper": RnnEvidence("hopper", 2.09e-6, 0.105, "fitted on our H200 recordings (rnn_cudnn, rnn_persistent "
                                                     "persistent rows; 2026-11-26)"),
}


def rnn_evidence(spec: Any) -> tuple[RnnEvidence, str]:
    """``(evidence, label)`` for ``spec``'s family, or the nearest family's, labelled as assumed."""
    return evidence_of(spec, RNN_EVIDENCE)


def _persist_device(cell: str, hidden: int, batch: int, seq_len: int, spec: Any) -> bool:
    """``use_persist_device_heuristics``: the device and batch rules of ``PERSIST_STATIC``."""
    fam = family(spec)
    if fam == "volta":
        return ((batch % 16 == 0 and batch not in (80, 112)) or batch == 8) and (
            (seq_len >= 40 and batch <= 128) or (seq_len >= 20 and batch <= 96) or (seq_len >= 10 and batch <= 32))
    if fam not in ("ampere", "ada", "hopper", "blackwell") or (spec.sms or 0) < 98:
        return False  # Turing, Pascal; small Ampere parts (A30, A10, A40: sm86 and < 98 SMs)
    if cell == "gru":
        return False
    if cell == "lstm":
        return batch % 8 == 0 and batch <= 128
    return batch % 8 == 0 and batch <= 128 and (batch < 96 or hidden < 896)


def cudnn_algo(cell: str, hidden: int, input_size: int, batch: int, seq_len: int, layers: int, directions: int,
               dtype: Any, spec: Any, *, forward: bool = True) -> str:
    """The cuDNN algorithm PyTorch runs for a (non-packed) recurrent layer stack on ``spec``: one of
    :data:`ALGOS` (rules in the module docstring)."""
    d = canonical_dtype(dtype)
    if cell not in RNN_GATES:
        raise ValueError(f"cell must be one of {tuple(RNN_GATES)}, got {cell!r}")
    if d != "float64":
        small = (384 if forward else 256) if cell == "rnn" else (192 if forward else 128)
        if hidden <= small:
            return "persist_static_small_h"
    if (d == "float16" and layers == 1 and directions == 1 and hidden <= 1024 and hidden % 128 == 0
            and input_size % 128 == 0 and _persist_device(cell, hidden, batch, seq_len, spec)):
        return "persist_static"
    return "standard"


def gate_bytes(cell: str, hidden: int, batch: int, dtype: Any, pass_: str = "forward") -> int:
    """Bytes one step's elementwise gate kernel moves: forward reads both GEMMs' gate pre-activations
    (2·gates·H·B) and the previous cell state, writes h and c (and the activations kept for backward);
    backward reads those activations, the incoming gradients and c, and writes the gates' gradient."""
    g, s = RNN_GATES[cell], itemsize(dtype)
    n = hidden * batch
    if pass_ == "forward":
        return s * n * (2 * g + 3)
    return s * n * (2 * g + 5)


def persistent_step_s(cell: str, hidden: int, batch: int, spec: Any) -> tuple[float, str]:
    """``(seconds, label)`` of one step of a persistent kernel: the barrier plus the recurrent step's FLOPs
    (``2·gates·H²·B``) at the family's persistent rate."""
    ev, label = rnn_evidence(spec)
    peak = spec.peaks.get("float16") or max(spec.peaks.values())
    flops = 2 * RNN_GATES[cell] * hidden * hidden * batch
    return ev.sync_s + flops / (ev.persistent_fraction * peak), label


def fit_persistent(cudnn_layers, persistent, peak_flop_s: float) -> dict[str, float]:
    """Re-derive :data:`RNN_EVIDENCE`'s Hopper constants: the per-step time of every row that ran
    ``PERSIST_STATIC`` (``rnn_cudnn`` cuDNN rows less their input GEMM; ``rnn_persistent`` cuDNN rows, whose
    time already excludes it), least squares on relative error against ``sync + flops / F``."""
    rows = []
    for r in cudnn_layers[cudnn_layers["impl"] == "cudnn"].itertuples():
        rows.append((r.cell, r.hidden, r.batch, r.timesteps, (r.time_s - r.input_gemm_s) / r.timesteps))
    for r in persistent[persistent["impl"] == "cudnn"].itertuples():
        rows.append(("rnn", r.hidden, r.batch, r.timesteps, r.time_s / r.timesteps))

    class _Hopper:  # the rules only need the family and the SM count
        name, driver_name, kind, sms = "H200", "", "gpu", 132

    keep = [r for r in rows if cudnn_algo(r[0], r[1], r[1], r[2], r[3], 1, 1, "float16", _Hopper) == "persist_static"]
    flops = np.array([2 * RNN_GATES[c] * h * h * b for c, h, b, _, _ in keep], float)
    y = np.array([r[4] for r in keep])
    (sync, inv), *_ = np.linalg.lstsq(np.c_[np.ones(len(y)), flops] / y[:, None], np.ones(len(y)), rcond=None)
    return {"sync_s": float(sync), "persistent_flop_s": float(1 / inv),
            "persistent_fraction": float(1 / inv / peak_flop_s), "rows": len(keep)}
