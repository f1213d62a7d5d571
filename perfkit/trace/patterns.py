"""Causes that span several ops of a trace: an unfused chain of memory-bound ops, and attention run as
its math (two batched GEMMs around a softmax that writes the L×S scores out).

Both are found in GPU order and priced as one: the chain or the attention is charged its measured time
and saves that less the model's time of the fused kernel, shared among its ops by their time. A fused chain
moves at least what its largest op moves, once: that bound makes its saving an upper bound;
fused attention is :func:`perfkit.attention_model.fused_attention_s` (through the advisor's pricer) for
the same batch, lengths and head size. Units: seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .opmap import Work
from .price import TracePricer

__all__ = ["ATTENTION_FIX", "FUSION_FIX", "attention_groups", "chains", "price_patterns"]

FUSION_FIX = "fuse this chain of memory-bound ops (torch.compile)"
ATTENTION_FIX = ("fused attention: F.scaled_dot_product_attention (attn_implementation='sdpa' in transformers), "
                 "which never writes the L×S scores")

#: The ops between the two GEMMs of unfused attention (scale, mask, softmax, dropout, copies) at most.
_BETWEEN = 6


def chains(works: list[Work | None]) -> np.ndarray:
    """Each memory-bound op's chain number (runs of two or more between other ops, in GPU order), else -1."""
    out, current, run = np.full(len(works), -1), -1, []
    for i, w in enumerate([*works, None]):
        if w is not None and w.family == "memory":
            run.append(i)
            continue
        if len(run) >= 2:
            current += 1
            out[run] = current
        run = []
    return out


def attention_groups(works: list[Work | None]) -> list[tuple[list[int], Work]]:
    """Unfused attention in GPU order: a batched GEMM (QKᵀ, b×L×S), a softmax over exactly those scores
    within :data:`_BETWEEN` ops, then a batched GEMM reading them (PV: b×L×Ev, K = S). Each group's rows and
    the fused attention :class:`Work` it stands for."""
    found, i = [], 0
    while i < len(works):
        qk = works[i]
        if qk is None or qk.family != "gemm" or not qk.batch > 1:
            i += 1
            continue
        b, L, S, E = int(qk.batch), int(qk.M), int(qk.N), int(qk.K)
        soft = next((j for j in range(i + 1, min(i + 1 + _BETWEEN, len(works))) if works[j] is not None
                     and works[j].kind == "softmax" and math.prod(works[j].params["shape"]) == b * L * S), None)
        pv = None if soft is None else next(
            (j for j in range(soft + 1, min(soft + 1 + _BETWEEN, len(works))) if works[j] is not None
             and works[j].family == "gemm" and (works[j].batch, works[j].M, works[j].K) == (b, L, S)), None)
        if pv is None:
            i += 1
            continue
        Ev = int(works[pv].N)
        fused = Work("attention", "fused", "forward", qk.dtype, 2.0 * b * L * S * (E + Ev),
                     float(qk.bytes), qk.shapes, L, S, E, b,
                     {"batch": b, "L": L, "S": S, "E": E, "Ev": Ev, "causal": False, "heads": 1})
        found.append((list(range(i, pv + 1)), fused))
        i = pv + 1
    return found


def _share(saving: np.ndarray, times: np.ndarray, rows: list[int], saving_s: float) -> None:
    total = times[rows].sum()
    saving[rows] = max(0.0, saving_s) * times[rows] / total if total else 0.0


def price_patterns(ops: pd.DataFrame, works: list[Work | None], pricer: TracePricer | None) -> None:
    """Set ``rule``, ``fix`` and ``saving_s`` of ``ops`` (one row per work, GPU order) for fused chains and
    unfused attention, in place; attention first (its softmax is not a chain's to fuse)."""
    times = ops["time_s"].to_numpy(dtype=float)
    saving = ops["saving_s"].to_numpy(dtype=float).copy()
    rule, fix = ops["rule"].to_numpy(dtype=object).copy(), ops["fix"].to_numpy(dtype=object).copy()
    taken: set[int] = set()
    for rows, fused in attention_groups(works):
        rule[rows], fix[rows] = "attention_math", ATTENTION_FIX
        taken.update(rows)
        if pricer is not None:
            _share(saving, times, rows, times[rows].sum() - pricer.kernel_s(fused))
    if pricer is not None:
        chain = chains(works)
        nbytes, dtypes = ops["bytes"].to_numpy(dtype=float), ops["dtype"].to_numpy(dtype=object)
        for rows in np.split(np.argsort(chain, kind="stable"), np.flatnonzero(np.diff(np.sort(chain))) + 1):
            rows = [int(i) for i in rows if chain[i] >= 0 and i not in taken and rule[i] == "fusion"]
            if len(rows) < 2:
                continue
            bandwidth = pricer.pricer(dtypes[rows[0]]).bandwidth
            fused_s = pricer.latency_s + nbytes[rows].max() / bandwidth
            _share(saving, times, rows, times[rows].sum() - fused_s)
    ops["saving_s"], ops["rule"], ops["fix"] = saving, rule, fix
