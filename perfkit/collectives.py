"""Collectives: how long an all-reduce takes, by the α-β model, and how much of it a training step hides.

The model (Hockney's α-β; NCCL's own tuner is built the same way, ``src/graph/tuning.cc``): an algorithm
takes ``steps`` steps, each costing α (the link's ``latency_s``), plus a fixed cost per call, and moves
``wire_bytes`` through each GPU's link in each direction at the link's achievable bandwidth B
(:attr:`perfkit.interconnects.LinkSpec.achievable_bytes_s`)::

    time = BASE_LATENCY_S + steps·α + wire_bytes / B

``nbytes`` is the buffer as nccl-tests counts it (``doc/PERFORMANCE.md``): all-reduce, the buffer each
rank reduces; all-gather, the gathered output; reduce-scatter, the input; all-to-all, a rank's whole send
buffer; broadcast, the buffer. With n ranks:

=================  ========  ===================  ==========================================
op (ring)          steps     wire_bytes           busbw factor (nccl-tests)
=================  ========  ===================  ==========================================
all-reduce         2(n−1)    2(n−1)/n · nbytes    2(n−1)/n
all-gather         n−1       (n−1)/n · nbytes     (n−1)/n
reduce-scatter     n−1       (n−1)/n · nbytes     (n−1)/n
all-to-all         n−1       (n−1)/n · nbytes     (n−1)/n
broadcast          n−1       nbytes (pipelined)   1
=================  ========  ===================  ==========================================

So a ring's bus bandwidth (:func:`bus_bandwidth`) tends to B for large messages, whatever n.

- ``"tree"`` (all-reduce only): NCCL's double binary tree; 2·⌈log2 n⌉ steps of α, and the ring's
  bandwidth term (each rank sends and receives about 2·nbytes through its two trees, the ring's
  2(n−1)/n·nbytes for large n; NCCL's tuner charges it the same). Its win is latency, at large n.
- ``"nvls"`` (all-reduce only, links with ``in_switch_reduction``, one NVSwitch domain): NVLink SHARP.
  Each GPU sends its data once for the switch to add and receives the sum once:
  ``wire_bytes = (n+1)/n · nbytes``, at ``NVLS_EFFICIENCY × B``, plus ``NVLS_LATENCY_S`` for the whole
  call. Modelled simply, from two public figures, not from a traffic simulation.

Across nodes (``inter_link`` and ``ranks_per_node`` given, ``n_ranks > ranks_per_node``): the ring passes
every node boundary once, through a NIC, carrying the same bytes per step as any other hop, so the
slower of the two links sets B and the larger α is charged on every step (NCCL charges the network's α
only on the inter-node steps: this is an upper bound on the latency). It assumes as many NICs per node as
the ring has channels crossing (one per GPU on DGX-class nodes); with fewer NICs divide their bandwidth.

The constants are NCCL's or its maintainers', never fitted to the tables perfkit validates against
(``scripts/validate_collectives.py``). These are predictions, not measurements.

Units: bytes, seconds, bytes/s.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from ._validate import non_negative_number, positive_int, positive_number
from .interconnects import KNOWN_LINKS, LinkSpec, link_spec

__all__ = ["ALGORITHMS", "BASE_LATENCY_S", "NVLS_EFFICIENCY", "NVLS_LATENCY_S", "OPS", "CollectivePrediction",
           "DataParallelStep", "algorithm_bandwidth", "bus_bandwidth", "bus_factor", "collective_time",
           "crossover_bytes", "data_parallel_step", "explain_collective"]

OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")
ALGORITHMS = ("ring", "tree", "nvls")

#: The fixed cost of one ring or tree call: NCCL's ``baseLat`` for Ring/Simple (tuning.cc @ b6475625), 8.4 µs.
BASE_LATENCY_S = 8.4e-6
#: The whole cost of one NVLS call besides its bytes: NCCL's ``hwLat`` for NVLS over NVLink (tuning.cc), 23 µs.
NVLS_LATENCY_S = 23e-6
#: The fraction of a link's achievable bandwidth NVLS reaches on ``(n+1)/n·nbytes``: an NCCL maintainer gives,
#: for 8 H100s, ~370 GB/s effective NVLink bandwidth and an NVLS all-reduce algbw of ~275 GB/s (nccl-tests
#: issue #212), and 275 × 9/8 / 370 ≈ 0.83.
NVLS_EFFICIENCY = 0.83

_ALIASES = {op.replace("-", ""): op for op in OPS}
_ALL_REDUCE_ONLY = {"tree": "NCCL's trees run all-reduce only", "nvls": "perfkit models NVLS for all-reduce only"}


def _op(op: Any) -> str:
    if not isinstance(op, str):
        raise TypeError(f"op must be one of {', '.join(map(repr, OPS))}, got {op!r} ({type(op).__name__})")
    key = op.strip().lower().replace("_", "").replace("-", "").replace(" ", "")
    if key not in _ALIASES:
        raise LookupError(f"unknown collective {op!r}; known: {', '.join(OPS)} (also written allreduce, all_reduce)")
    return _ALIASES[key]


def _algorithm(algorithm: Any) -> str:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be one of {', '.join(map(repr, ALGORITHMS))}, got {algorithm!r}")
    a = algorithm.strip().lower()
    if a not in ALGORITHMS:
        raise LookupError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    return a


def _ranks(n_ranks: Any) -> int:
    if isinstance(n_ranks, bool) or not isinstance(n_ranks, numbers.Integral):
        raise TypeError(f"n_ranks must be an integer ≥ 2, got {n_ranks!r} ({type(n_ranks).__name__})")
    if n_ranks < 2:
        raise ValueError(f"n_ranks must be at least 2 (a collective of one rank moves nothing), got {n_ranks}")
    return int(n_ranks)


def bus_factor(op: str, n_ranks: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth: all-reduce ``2(n−1)/n``; all-gather,
    reduce-scatter, all-to-all ``(n−1)/n``; broadcast 1. busbw is what a ring would need from each link,
    comparable with the hardware's bandwidth whatever n."""
    op, n = _op(op), _ranks(n_ranks)
    return {"all-reduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)


def algorithm_bandwidth(nbytes: float, time_s: float) -> float:
    """nccl-tests' algbw, ``nbytes / time_s`` (bytes/s), with ``nbytes`` the buffer as nccl-tests defines
    it per op (all-reduce: the buffer; all-gather: the gathered output; reduce-scatter: the input;
    all-to-all: a rank's whole send buffer; broadcast: the buffer)."""
    return non_negative_number("nbytes", nbytes, "bytes") / positive_number("time_s", time_s)


def bus_bandwidth(op: str, nbytes: float, n_ranks: int, time_s: float) -> float:
    """nccl-tests' busbw (bytes/s): :func:`algorithm_bandwidth` × :func:`bus_factor`."""
    return algorithm_bandwidth(nbytes, time_s) * bus_factor(op, n_ranks)


@dataclass(frozen=True)
class CollectivePrediction:
    """What :func:`explain_collective` predicts for one collective. Bytes, seconds, bytes/s."""

    op: str
    nbytes: float  # the buffer, as nccl-tests counts it for this op
    n_ranks: int
    algorithm: str  # "ring", "tree" or "nvls"
    steps: int  # algorithm steps, each charged α
    latency_s: float  # BASE_LATENCY_S + steps·α (nvls: NVLS_LATENCY_S)
    transfer_s: float  # wire_bytes / the bottleneck's achievable bandwidth
    time_s: float  # latency_s + transfer_s
    bound: str  # "latency" (latency_s ≥ transfer_s) or "bandwidth"
    link: LinkSpec  # the link whose bandwidth bounds the transfer
    bus_bytes_s: float  # predicted busbw (nccl-tests' convention)
    algbw_bytes_s: float  # predicted algbw, nbytes / time_s
    wire_bytes: float = 0.0  # bytes each rank sends (and receives) over its link


def _links(link: Any, inter_link: Any, ranks_per_node: Any, n: int) -> tuple[LinkSpec, float, bool]:
    """The bottleneck link, the α charged per step (see the module's multi-node rule), and whether the
    ranks span several nodes."""
    intra = link_spec(link)
    if (inter_link is None) != (ranks_per_node is None):
        raise ValueError("give inter_link and ranks_per_node together (the link between nodes and how many "
                         f"ranks share a node), got inter_link={inter_link!r}, ranks_per_node={ranks_per_node!r}")
    if inter_link is None:
        return intra, intra.latency_s, False
    inter, per_node = link_spec(inter_link), positive_int("ranks_per_node", ranks_per_node)
    if n <= per_node:
        return intra, intra.latency_s, False
    slow = inter if inter.achievable_bytes_s <= intra.achievable_bytes_s else intra
    return slow, max(intra.latency_s, inter.latency_s), True


def _steps_wire(op: str, algorithm: str, n: int, nbytes: float) -> tuple[int, float]:
    if algorithm == "tree":
        return 2 * math.ceil(math.log2(n)), 2 * (n - 1) / n * nbytes
    if algorithm == "nvls":
        return 2, (n + 1) / n * nbytes
    if op == "all-reduce":
        return 2 * (n - 1), 2 * (n - 1) / n * nbytes
    return n - 1, (nbytes if op == "broadcast" else (n - 1) / n * nbytes)


def explain_collective(op: str, nbytes: float, n_ranks: int, link: str | LinkSpec, *, algorithm: str = "ring",
                       inter_link: str | LinkSpec | None = None,
                       ranks_per_node: int | None = None) -> CollectivePrediction:
    """The α-β model of one collective (the module's table), with each term: a :class:`CollectivePrediction`.

    ``op``: one of :data:`OPS` (``"allreduce"`` and ``"all_reduce"`` work too); ``nbytes``: the buffer as
    nccl-tests counts it; ``link``: a :class:`~perfkit.interconnects.LinkSpec` or a key of
    :data:`~perfkit.interconnects.KNOWN_LINKS`; ``algorithm``: ``"ring"`` (any op), ``"tree"`` or ``"nvls"``
    (all-reduce; nvls needs a link with ``in_switch_reduction`` and one node). ``inter_link`` with
    ``ranks_per_node``: the link between nodes, used when ``n_ranks > ranks_per_node``.

    ``ValueError`` for n_ranks < 2, negative bytes, an algorithm the op or link cannot run; ``LookupError``
    for an unknown op, algorithm or link; ``TypeError`` for values of the wrong type.
    """
    op, n, algorithm = _op(op), _ranks(n_ranks), _algorithm(algorithm)
    nbytes = non_negative_number("nbytes", nbytes, "bytes")
    bottleneck, alpha, multi_node = _links(link, inter_link, ranks_per_node, n)
    if algorithm != "ring" and op != "all-reduce":
        raise ValueError(f"algorithm {algorithm!r} runs all-reduce only ({_ALL_REDUCE_ONLY[algorithm]}); "
                         f"use 'ring' for {op}")
    bandwidth = bottleneck.achievable_bytes_s
    if algorithm == "nvls":
        intra = link_spec(link)
        if not intra.in_switch_reduction:
            able = ", ".join(k for k, s in KNOWN_LINKS.items() if s.in_switch_reduction)
            raise ValueError(f"algorithm 'nvls' needs a switch that reduces (NVLink SHARP); {intra.name} has none; "
                             f"links that do: {able}")
        if multi_node:
            raise ValueError("algorithm 'nvls' is modelled within one NVSwitch domain; n_ranks exceeds ranks_per_node")
        bandwidth *= NVLS_EFFICIENCY
    steps, wire = _steps_wire(op, algorithm, n, nbytes)
    latency = NVLS_LATENCY_S if algorithm == "nvls" else BASE_LATENCY_S + steps * alpha
    transfer = wire / bandwidth
    time_s = latency + transfer
    algbw = nbytes / time_s
    return CollectivePrediction(
        op=op, nbytes=nbytes, n_ranks=n, algorithm=algorithm, steps=steps, latency_s=latency, transfer_s=transfer,
        time_s=time_s, bound="latency" if latency >= transfer else "bandwidth", link=bottleneck,
        bus_bytes_s=algbw * bus_factor(op, n), algbw_bytes_s=algbw, wire_bytes=wire)


def collective_time(op: str, nbytes: float, n_ranks: int, link: str | LinkSpec, *, algorithm: str = "ring",
                    inter_link: str | LinkSpec | None = None, ranks_per_node: int | None = None) -> float:
    """Predicted seconds of one collective: ``explain_collective(...).time_s`` (see :func:`explain_collective`).

    A ring all-reduce of 1 GiB on 8 H100s over NVLink 4: 8.4 µs + 14 × 3.4 µs + 1.75 GiB / 370.8 GB/s
    ≈ 5.12 ms (busbw ≈ 367 GB/s).
    """
    return explain_collective(op, nbytes, n_ranks, link, algorithm=algorithm, inter_link=inter_link,
                              ranks_per_node=ranks_per_node).time_s


def crossover_bytes(op: str, n_ranks: int, link: str | LinkSpec, *, algorithm: str = "ring",
                    inter_link: str | LinkSpec | None = None, ranks_per_node: int | None = None) -> float:
    """The message size (bytes) at which the latency term equals the bandwidth term: below it a collective
    is latency-bound (its time barely depends on the size), above it bandwidth-bound. Same arguments as
    :func:`explain_collective`; a ring all-reduce on 8 NVLink-4 GPUs crosses over at about 11 MiB."""
    one = explain_collective(op, 1.0, n_ranks, link, algorithm=algorithm, inter_link=inter_link,
                             ranks_per_node=ranks_per_node)
    return one.latency_s / one.transfer_s


@dataclass(frozen=True)
class DataParallelStep:
    """What :func:`data_parallel_step` predicts for one data-parallel training step. Bytes, seconds."""

    gradient_bytes: float
    n_ranks: int
    bucket_bytes: float
    buckets: int
    backward_s: float
    allreduce_s: float  # all buckets' all-reduce time, summed
    exposed_s: float  # communication still running after the backward pass ends
    overlapped_s: float  # allreduce_s − exposed_s: hidden behind the backward pass
    step_s: float  # compute_s + exposed_s
    compute_s: float  # forward_s + backward_s
    comm_share: float  # exposed_s / step_s
    link: LinkSpec  # the bottleneck link of the all-reduces


def data_parallel_step(gradient_bytes: float, backward_s: float, n_ranks: int, link: str | LinkSpec, *,
                       forward_s: float = 0.0, bucket_bytes: float = 25 * 2**20, algorithm: str = "ring",
                       inter_link: str | LinkSpec | None = None,
                       ranks_per_node: int | None = None) -> DataParallelStep:
    """One data-parallel step, PyTorch-DDP-like: how much of the gradients' all-reduce hides behind the
    backward pass.

    Assumptions: the gradients (``gradient_bytes``, all ranks' buffers alike) are all-reduced in
    ``⌈gradient_bytes / bucket_bytes⌉`` buckets (DDP's default 25 MiB), the last one holding the rest; the
    buckets become ready evenly through the backward pass, in proportion to their bytes, the last when
    the backward pass ends; one communication stream: a bucket's all-reduce (:func:`collective_time`)
    starts when it is ready and the previous one has finished; communication does not slow the
    backward kernels down (on a real GPU it takes some SMs and memory bandwidth, so this is optimistic);
    the optimizer step is not counted. Then ``exposed_s`` = max(0, end of the last all-reduce − end of
    the backward pass) and ``step_s = forward_s + backward_s + exposed_s``.

    One bucket holding every gradient cannot overlap at all (``exposed_s == allreduce_s``); smaller buckets
    overlap more but pay the all-reduce's fixed latency once each.
    """
    g = positive_number("gradient_bytes", gradient_bytes)
    backward = non_negative_number("backward_s", backward_s, "seconds")
    forward = non_negative_number("forward_s", forward_s, "seconds")
    bucket = positive_number("bucket_bytes", bucket_bytes)
    n = _ranks(n_ranks)
    k = max(1, math.ceil(g / bucket * (1 - 1e-12)))
    last = g - (k - 1) * bucket

    def allreduce(nbytes: float) -> CollectivePrediction:
        return explain_collective("all-reduce", nbytes, n, link, algorithm=algorithm, inter_link=inter_link,
                                  ranks_per_node=ranks_per_node)

    p_last = allreduce(last)
    full_s = allreduce(bucket).time_s if k > 1 else 0.0
    # Full bucket j (1 ≤ j ≤ k−1) is ready at j·bucket/g·backward; with equal durations d, the last full
    # bucket ends at max_j(ready_j + (k−j)·d), and that maximum of a line in j lies at j = 1 or j = k−1.
    if k > 1:
        ready = [j * bucket / g * backward for j in (1, k - 1)]
        end_full = max(ready[0] + (k - 1) * full_s, ready[1] + full_s)
    else:
        end_full = 0.0
    end = max(end_full, backward) + p_last.time_s
    total = (k - 1) * full_s + p_last.time_s
    exposed = max(0.0, end - backward)
    compute = forward + backward
    step = compute + exposed
    return DataParallelStep(
        gradient_bytes=g, n_ranks=n, bucket_bytes=bucket, buckets=k, backward_s=backward, allreduce_s=total,
        exposed_s=exposed, overlapped_s=total - exposed, step_s=step, compute_s=compute,
        comm_share=exposed / step if step > 0 else 0.0, link=p_last.link)
