"""What a memory-bound op costs beyond its bytes: the kernels PyTorch runs for it and what bounds each.

The byte model (:func:`perfkit.layer_bytes`) assumes one kernel per pass that streams its bytes at the
achievable bandwidth. Our H200 recordings show where that fails, and why:

- **Batch norm in NCHW, training** (PyTorch's native CUDA kernels, ``batchnorm_sizes``): the statistics
  are reduced by *one thread block per channel* (512 threads: ``tf`` threads along H·W, the rest along N),
  each looping over its channel's N·H·W elements one load per thread at a time. With 64 channels only 64
  blocks run, so the GPU's bandwidth is never reached: each loop round waits one memory latency (Little's
  law). Forward = that reduction (one sweep of x) + an elementwise kernel (read x, write y at full
  bandwidth); backward = one per-channel kernel that sweeps x and dy twice (reduce, then write dx), the
  second sweep from L2 when the channel's data fits. Fitted on the H200: 449 ns per DRAM round, 194 ns per
  L2 round; both passes agree on the DRAM round (449 and 451 ns fitted separately).
- **Batch norm in channels-last** (the same recording's NHWC rows): PyTorch's channels-last kernels reduce
  over the whole grid (a zeroed semaphore, partial sums, the last block merges) and are bound by their
  arithmetic per element (Welford's running mean divides once per element forward): 4.8 ps per element on
  the H200 forward, 3.0 backward, flat from 3 to 51 million elements; then an elementwise pass at bandwidth.
- **Pooling** (``pool_sizes``): NCHW pooling kernels run one thread per output element forward and one per
  *input* element backward (gathering from every window that covers it), and are bound by their index
  arithmetic, not by DRAM: measured time per element is flat (±2 %) from 3 to 51 million elements and far
  above the bytes' time. Cost per element = a fixed part + a part per window visited, per SM.
- **Activations** (``activation_sizes``): at 64 Mi elements and more, ReLU, tanh and the backward passes
  of sigmoid and tanh stream at the bandwidth, but GELU (an erf per element, both passes) and the sigmoid's
  forward (an exp and a divide) are bound by their arithmetic: 1.29 / 1.73 ps per element for GELU, 1.03
  for the sigmoid (and SiLU, which computes the same, assumed) on the H200.
- **Kernel count**: an op that launches several kernels pays each one's fixed cost
  (``extra_kernel_s``); training batch norm forward runs three.

Constants are per architecture family (:mod:`perfkit.architectures`); each says what it rests on. A GPU
of another family uses the nearest family's, labelled as assumed; cycle-bound costs scale with the SM
count. :func:`fit_hopper` re-derives the Hopper constants from the recordings (the fit set), so the
numbers below can be checked; nothing here reads ``data/``. Units: seconds, bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .architectures import evidence_of
from .ceilings import Ceilings, kernel_latency_s, resolve_ceilings
from .devices import DeviceSpec
from .dtypes import canonical_dtype, itemsize
from .memory_model import layer_bytes, pool_output_shape

__all__ = ["OP_EVIDENCE", "OpEvidence", "evidence_for", "fit_hopper", "op_time_s", "pool_work",
           "stats_rounds"]

#: Threads per block of PyTorch's per-channel batch-norm kernels (``MAX_BLOCK_SIZE``).
BN_BLOCK_THREADS = 512


@dataclass(frozen=True)
class OpEvidence:
    """Per-architecture costs of memory-bound kernels, and what they rest on."""

    family: str
    source: str
    sms: int  # the SM count the cycle-bound costs were measured with
    extra_kernel_s: float  # each kernel after an op's first (the first pays the kernel latency)
    dram_round_s: float  # one dependent round of loads from DRAM, one block
    l2_round_s: float  # the same served by L2
    blocks_per_sm: int = 4  # resident 512-thread blocks per SM
    pool_s: dict = field(default_factory=dict)  # (kind, pass) → (fixed, per window) seconds per element, all SMs
    bn_nhwc_s: dict = field(default_factory=dict)  # pass → seconds per element of the channels-last reduction, all SMs
    activation_s: dict = field(default_factory=dict)  # (kind, pass) → arithmetic seconds per element, all SMs


#: Fitted on our H200 recordings (data/nvidia-h200: batchnorm_sizes NCHW rows, pool_sizes), by
#: :func:`fit_hopper`; the H200 and H100 share the SM design and memory latency (the H200's HBM3e is faster, not
#: nearer). Other families have no such recording yet: :func:`evidence_for` labels them as assumed.
OP_EVIDENCE: dict[str, OpEvidence] = {
    "hopper": OpEvidence(
        family="hopper", sms=132,
        source="fitted on our H200 recordings (batchnorm_sizes NCHW, pool_sizes; 2026-11-26)",
        extra_kernel_s=3.29e-6, dram_round_s=4.49e-7, l2_round_s=1.94e-7,
        pool_s={("max", "forward"): (8.91e-12, 0.835e-12), ("avg", "forward"): (10.56e-12, 0.303e-12),
                ("max", "backward"): (8.59e-12, 1.288e-12), ("avg", "backward"): (14.02e-12, 3.429e-12)},
        bn_nhwc_s={"forward": 4.74e-12, "backward": 2.98e-12},
        # erf-based GELU both ways; the sigmoid's exp and divide forward (SiLU computes the same: assumed)
        activation_s={("gelu", "forward"): 1.29e-12, ("gelu", "backward"): 1.73e-12,
                      ("sigmoid", "forward"): 1.03e-12, ("silu", "forward"): 1.03e-12}),
}


def evidence_for(spec: DeviceSpec) -> tuple[OpEvidence, str]:
    """``(evidence, label)`` for ``spec``: its family's constants, or the nearest family's (label says so)."""
    return evidence_of(spec, OP_EVIDENCE)


def _floor_s(cl: Ceilings, ev: OpEvidence) -> float:
    """One kernel's fixed cost when its data comes from DRAM: a calibrated profile's latency was timed with the
    L2 warm (a one-element add), so the first loads' DRAM round is added to it; the default latency stands."""
    return kernel_latency_s(cl) + (ev.dram_round_s if cl.kernel_latency_s is not None else 0.0)


def _threads_along(n: int) -> int:
    """PyTorch's ``getNumThreads``: the first of 32…512 threads that covers ``n`` elements, else 512."""
    return next((t for t in (32, 64, 128, 256) if t >= n), BN_BLOCK_THREADS)


def stats_rounds(shape: tuple[int, ...]) -> int:
    """Sequential load rounds of one per-channel block sweeping an N×C×(spatial) tensor once."""
    n, spatial = shape[0], math.prod(shape[2:]) if len(shape) > 2 else 1
    along = _threads_along(spatial)
    return math.ceil(n / max(1, BN_BLOCK_THREADS // along)) * math.ceil(spatial / along)


def _bn_nchw_s(shape: tuple, s: int, pass_: str, spec: DeviceSpec, cl: Ceilings, ev: OpEvidence) -> float:
    """Training batch norm in NCHW: per-channel blocks, latency-bound (see the module docstring)."""
    C = shape[1]
    E = math.prod(shape)
    waves = math.ceil(C / (ev.blocks_per_sm * spec.sms))
    rounds = stats_rounds(shape) * waves
    if pass_ == "forward":  # one sweep of x (latency-bound, or DRAM-bound if wide enough), then y = f(x)
        sweep = max(E * s / cl.bandwidth, rounds * ev.dram_round_s)
        return _floor_s(cl, ev) + 2 * ev.extra_kernel_s + sweep + 2 * E * s / cl.bandwidth
    # one kernel: a sweep of x and dy (two loads per round) for the sums, a second one writing dx
    sweep = max(2 * E * s / cl.bandwidth, rounds * ev.dram_round_s)
    fits = 2 * E * s <= (spec.l2_bytes or 0) / 2  # x and dy of all channels within the near half of L2
    again = max(3 * E * s / cl.bandwidth, rounds * (ev.l2_round_s if fits else ev.dram_round_s))
    return _floor_s(cl, ev) + sweep + again


def _bn_nhwc_s(shape: tuple, s: int, pass_: str, spec: DeviceSpec, cl: Ceilings, ev: OpEvidence) -> float:
    """Training batch norm in channels-last: a grid-wide reduction (a zeroed semaphore, partial sums, the last
    block's merge) bound by its per-element arithmetic (Welford's division forward), then an elementwise pass."""
    E = math.prod(shape)
    per_element_s = ev.bn_nhwc_s[pass_] * ev.sms / spec.sms
    if pass_ == "forward":
        return (_floor_s(cl, ev) + 3 * ev.extra_kernel_s + max(E * s / cl.bandwidth, E * per_element_s)
                + 2 * E * s / cl.bandwidth)
    return (_floor_s(cl, ev) + 2 * ev.extra_kernel_s + max(2 * E * s / cl.bandwidth, E * per_element_s)
            + 3 * E * s / cl.bandwidth)


def pool_work(shape: tuple, kind: str, pass_: str, kernel_size: Any, stride: Any = None, padding: Any = 0
              ) -> tuple[int, float]:
    """``(elements, windows per element)`` a pooling pass's threads run: output elements and the window's
    taps forward; input elements and the windows covering each backward."""
    out = pool_output_shape(shape, kernel_size, stride, padding)
    k = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size, kernel_size)
    st = k if stride is None else (stride if isinstance(stride, (tuple, list)) else (stride, stride))
    if pass_ == "forward":
        return math.prod(out), float(k[0] * k[1])
    return math.prod(shape), (k[0] / st[0]) * (k[1] / st[1])


def op_time_s(kind: str, shape: Any, dtype: Any, spec: DeviceSpec, *, pass_: str = "forward",
              ceilings: Ceilings | None = None, nhwc: bool = False, **params: Any) -> float:
    """Predicted seconds of one pass of a memory-bound op: its bytes at the achievable bandwidth plus one
    kernel's latency, except where the recordings show another bound (batch norm in NCHW, pooling)."""
    cl = resolve_ceilings(spec, ceilings)
    nbytes = layer_bytes(kind, shape, dtype, pass_=pass_, **params)
    if not nbytes:
        return 0.0
    ev, _ = evidence_for(spec)
    streamed = _floor_s(cl, ev) + nbytes / cl.bandwidth
    shape = tuple(int(v) for v in shape)
    s = itemsize(canonical_dtype(dtype))
    if kind == "batchnorm" and params.get("training", True) and len(shape) >= 3:
        return (_bn_nhwc_s if nhwc else _bn_nchw_s)(shape, s, pass_, spec, cl, ev)
    if (kind, pass_) in ev.activation_s:  # arithmetic-bound above the bytes' time
        return max(streamed, _floor_s(cl, ev) + math.prod(shape) * ev.activation_s[(kind, pass_)] * ev.sms / spec.sms)
    if kind in ("maxpool", "avgpool") and not nhwc:
        p = {k: params[k] for k in ("kernel_size", "stride", "padding") if k in params}
        n, windows = pool_work(shape, kind[:3], pass_, **p)
        fixed, per_window = ev.pool_s[(kind[:3], pass_)]
        return max(streamed, _floor_s(cl, ev) + n * (fixed + per_window * windows) * ev.sms / spec.sms)
    return streamed


def fit_hopper(batchnorm: pd.DataFrame, pools: pd.DataFrame, activations: pd.DataFrame, bandwidth_Bps: float,
               latency_s: float) -> dict[str, Any]:
    """Re-derive the Hopper constants from ``batchnorm_sizes``, ``pool_sizes`` and ``activation_sizes`` (least squares;
    ``bandwidth_Bps`` and ``latency_s``: the achievable bandwidth and one kernel's latency with the L2 warm,
    as the calibration measures them). Returns the fitted values, seconds."""
    nchw = batchnorm[batchnorm["layout"] == "NCHW"]
    fwd = nchw[nchw["pass"] == "forward"]
    rounds = np.array([stats_rounds((n, c, h, w)) for n, c, h, w in zip(fwd.N, fwd.C, fwd.H, fwd.W)])
    y = fwd["time_s"].to_numpy() - 2 * fwd["elements"].to_numpy() * 2 / bandwidth_Bps
    (floor_s, round_s), *_ = np.linalg.lstsq(np.c_[np.ones(len(y)), rounds], y, rcond=None)
    out: dict[str, Any] = {"forward_floor_s": floor_s, "dram_round_s": round_s}
    latency_s += round_s  # a kernel's floor with its data in DRAM (:func:`_floor_s`)
    bwd = nchw[(nchw["pass"] == "backward") & (nchw["elements"] * 4 > 32 * 2**20)]  # beyond L2: both sweeps DRAM
    r = np.array([stats_rounds((n, c, h, w)) for n, c, h, w in zip(bwd.N, bwd.C, bwd.H, bwd.W)])
    out["backward_dram_round_s"] = float(np.sum((bwd["time_s"] - latency_s) * 2 * r) / np.sum((2 * r) ** 2))
    near = nchw[(nchw["pass"] == "backward") & (nchw["elements"] * 4 <= 32 * 2**20) & (nchw["elements"] >= 2**19)]
    r = np.array([stats_rounds((n, c, h, w)) for n, c, h, w in zip(near.N, near.C, near.H, near.W)])
    again = near["time_s"].to_numpy() - latency_s - r * round_s  # the second sweep, from L2
    out["l2_round_s"] = float(np.sum(again * r) / np.sum(r * r))
    out["extra_kernel_s"] = (floor_s - latency_s) / 2  # forward: statistics, update, elementwise
    extra = out["extra_kernel_s"]
    for pass_, kernels, moved in (("forward", 4, 2), ("backward", 3, 3)):
        g = batchnorm[(batchnorm["layout"] == "NHWC") & (batchnorm["pass"] == pass_) & (batchnorm["elements"] >= 2**21)]
        E = g["elements"].to_numpy(dtype=float)
        rest = g["time_s"].to_numpy() - latency_s - (kernels - 1) * extra - moved * E * 2 / bandwidth_Bps
        out[f"bn_nhwc {pass_}"] = float(np.sum(rest * E) / np.sum(E * E))
    for (kind, pass_), g in pools.groupby(["kind", "pass"]):
        big = g[g["elements"] >= 2**21]
        work = [pool_work((n, c, h, w), kind, pass_, k, s, p)
                for n, c, h, w, k, s, p in zip(big.N, big.C, big.H, big.W, big.kernel_size, big.stride, big.padding)]
        n = np.array([w[0] for w in work], dtype=float)
        win = np.array([w[1] for w in work])
        (a, b), *_ = np.linalg.lstsq(np.c_[n, n * win], big["time_s"].to_numpy(), rcond=None)
        out[f"pool {kind} {pass_}"] = (a, b)
    big = activations[activations["elements"] >= 2**26]  # ≥ 64 Mi elements: no floor left
    for (kind, pass_), g in big.groupby(["op", "pass"]):
        E = g["elements"].to_numpy(dtype=float)
        out[f"{kind} {pass_}"] = float(np.sum(g["time_s"].to_numpy() * E) / np.sum(E * E))
    return out
