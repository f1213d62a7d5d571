"""The problems of chapter 08_communication, with answers computed by perfkit.

Every answer comes from nccl-tests' conventions (:func:`perfkit.collectives.bus_bandwidth`) or the
α-β model of :mod:`perfkit.collectives` (``collective_time``, ``crossover_bytes``,
``data_parallel_step``) with NCCL's link constants (:mod:`perfkit.interconnects`), and the 6N rule on
a datasheet H100 at its default achievable ceilings
(:func:`perfkit.book.communication.analysis.backward_time`): nothing is measured. Seconds, bytes.
"""

from __future__ import annotations

import math

from ...collectives import algorithm_bandwidth, bus_bandwidth, collective_time, crossover_bytes, data_parallel_step
from ...collectives import explain_collective
from ...interconnects import link_spec
from ...units import GIGA, MiB, format_time
from ..exercise import Exercise
from .analysis import BUCKET_BYTES
from .training import GPT2_SMALL, LLAMA2_70B, TP_TOKENS, backward_time, gpt2_params

__all__ = ["CHAPTER", "EXERCISES"]

CHAPTER = "08_communication"

_H100 = "H100-SXM"
_N = 8  # GPUs in one node
GiB = 2**30


# Problem 1: bus bandwidth from a measured time.
_P1_BYTES, _P1_TIME_S = GiB, 4.72e-3  # XLA's 8× H100 all-reduce of 1 GiB (the chapter's §2)


def _busbw_gbps() -> float:
    return bus_bandwidth("all-reduce", _P1_BYTES, _N, _P1_TIME_S) / GIGA


def _algbw_gbps() -> float:
    """The slip: the algorithm bandwidth, size ÷ time, without nccl-tests' factor."""
    return algorithm_bandwidth(_P1_BYTES, _P1_TIME_S) / GIGA


def _all_gather_factor_gbps() -> float:
    """The slip: the factor of an all-gather, (n − 1)/n, instead of an all-reduce's 2(n − 1)/n."""
    return _algbw_gbps() * (_N - 1) / _N


def _gib_gbps() -> float:
    """The slip: 1 GiB counted as 1e9 bytes (or the answer in GiB/s)."""
    return _busbw_gbps() * 1e9 / GiB


# Problem 2: the crossover of a ring on NVLink 4.
def _crossover_mib(link: str = "nvlink4") -> float:
    return crossover_bytes("all-reduce", _N, link) / MiB


def _one_step_mib() -> float:
    """The slip: one α per call instead of one per step of the ring's 2(n − 1)."""
    p = explain_collective("all-reduce", 1.0, _N, "nvlink4")
    alpha = link_spec("nvlink4").latency_s
    return (p.latency_s - (p.steps - 1) * alpha) / p.transfer_s / MiB


def _no_factor_mib() -> float:
    """The slip: each GPU sends the buffer once (``nbytes``), not the ring's 2(n − 1)/n of it."""
    p = explain_collective("all-reduce", 1.0, _N, "nvlink4")
    return p.latency_s * link_spec("nvlink4").achievable_bytes_s / MiB


def _datasheet_mib() -> float:
    """The slip: the datasheet's 450 GB/s instead of the bandwidth NCCL reaches."""
    p = explain_collective("all-reduce", 1.0, _N, "nvlink4")
    return p.latency_s * link_spec("nvlink4").bandwidth_bytes_s / p.wire_bytes / MiB


# Problem 3: the exposed share of a data-parallel step.
_P3_BATCH = 4


def _gpt2_backward(batch: int) -> float:
    return backward_time(_H100, gpt2_params(), batch * GPT2_SMALL["context"])


def _step(grad_itemsize: int = 4, bucket: float = BUCKET_BYTES):
    backward = _gpt2_backward(_P3_BATCH)
    return data_parallel_step(gpt2_params() * grad_itemsize, backward, _N, "nvlink4", forward_s=backward / 2,
                              bucket_bytes=bucket)


def _exposed_percent() -> float:
    return 100 * _step().comm_share


def _no_overlap_percent() -> float:
    """The slip: the whole all-reduce after the backward pass, as if nothing overlapped."""
    s = _step()
    return 100 * s.allreduce_s / (s.compute_s + s.allreduce_s)


def _one_bucket_percent() -> float:
    """The slip: one bucket of every gradient (no overlap, but one latency)."""
    return 100 * _step(bucket=gpt2_params() * 4).comm_share


def _bf16_gradients_percent() -> float:
    """The slip: gradients of 2 bytes; DDP reduces them in the parameters' dtype, float32 here."""
    return 100 * _step(grad_itemsize=2).comm_share


# Problem 4: the batch that hides the all-reduce across nodes.
_P4_RANKS, _P4_PER_NODE = 64, 8


def _allreduce_s(n: int = _P4_RANKS, algorithm: str = "tree", inter: str | None = "ib-ndr") -> float:
    per_node = _P4_PER_NODE if inter is not None else None
    return data_parallel_step(gpt2_params() * 4, 1.0, n, "nvlink4", algorithm=algorithm, inter_link=inter,
                              ranks_per_node=per_node).allreduce_s


def _hiding_batch(n: int = _P4_RANKS, algorithm: str = "tree", inter: str | None = "ib-ndr") -> int:
    return math.ceil(_allreduce_s(n, algorithm, inter) / _gpt2_backward(1))


# Problem 5: tensor parallelism's all-reduces.
_P5_BYTES = TP_TOKENS * LLAMA2_70B.hidden * 2  # bfloat16 activations, every GPU the whole tensor


def _tp_ms(nbytes: float = _P5_BYTES, count: int = 2) -> float:
    return 1e3 * count * collective_time("all-reduce", nbytes, _N, "nvlink4")


_GPT2 = (f"GPT-2 small ({gpt2_params():,} parameters, float32 gradients, so {gpt2_params() * 4 / 1e6:,.0f} MB "
         "per step)")

EXERCISES: list[Exercise] = [
    Exercise(
        "communication-1", CHAPTER,
        f"An all-reduce of 1 GiB (2^30 bytes) on {_N} GPUs takes {format_time(_P1_TIME_S)}. What is its bus "
        "bandwidth by nccl-tests' convention, in GB/s (1e9 bytes/s)?",
        _busbw_gbps, unit="GB/s", rel_tol=0.01, close_tol=0.10, fmt="{:,.0f}",
        hint="algbw = bytes ÷ time; busbw = algbw × 2(n − 1)/n for an all-reduce "
             "(pk.collectives.bus_bandwidth('all-reduce', 2**30, 8, 4.72e-3)).",
        mistakes=((_algbw_gbps, "that is the algorithm bandwidth, bytes ÷ time; nccl-tests multiplies an "
                   "all-reduce's by 2(n − 1)/n = 1.75 on 8 GPUs, the share of the buffer each link carries twice."),
                  (_all_gather_factor_gbps, "that uses (n − 1)/n, the factor of an all-gather or reduce-scatter; "
                   "an all-reduce is both in turn, 2(n − 1)/n."),
                  (_gib_gbps, "that counts 1 GiB as 1e9 bytes (or answers in GiB/s): 1 GiB is 1.074e9 bytes."))),
    Exercise(
        "communication-2", CHAPTER,
        f"By the α-β model, from what message size (in MiB) on is a ring all-reduce on {_N} GPUs over NVLink 4 "
        "bandwidth-bound, its transfer term at least its latency term?",
        _crossover_mib, unit="MiB", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint="pk.collectives.crossover_bytes('all-reduce', 8, 'nvlink4') ÷ 2**20; or by hand: 8.4 microseconds "
             "+ 14 steps × 3.4 against 2(n − 1)/n bytes per byte at the bandwidth NCCL reaches on NVLink 4.",
        mistakes=((_one_step_mib, "that charges one α per call; a ring pays it on each of its 2(n − 1) = 14 steps."),
                  (_no_factor_mib, "that sends each byte once; each GPU's link carries 2(n − 1)/n of the buffer."),
                  (_datasheet_mib, "that uses the datasheet's 450 GB/s; NCCL reaches about 82 % of it "
                   "(link_spec('nvlink4').achievable_bytes_s)."))),
    Exercise(
        "communication-3", CHAPTER,
        f"{_GPT2} trains data-parallel on {_N} H100s joined by NVLink 4, {_P3_BATCH} sequences of 1024 tokens "
        f"per GPU (backward {format_time(_gpt2_backward(_P3_BATCH))} by the 6N rule, forward half of it), in "
        "DDP's 25 MiB buckets. What percentage of the step does the model predict the all-reduce leaves exposed?",
        _exposed_percent, unit="%", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint="pk.data_parallel_step(gradient_bytes, backward_s, 8, 'nvlink4', forward_s=backward_s / 2): its "
             "comm_share.",
        mistakes=((_no_overlap_percent, "that runs the whole all-reduce after the backward pass; DDP starts each "
                   "bucket as soon as its gradients are ready, during the backward pass."),
                  (_one_bucket_percent, "that is one bucket of every gradient, which cannot start before the "
                   "backward pass ends."),
                  (_bf16_gradients_percent, "that counts 2 bytes per gradient; DDP reduces the gradients in the "
                   "parameters' dtype, float32 under mixed precision."))),
    Exercise(
        "communication-4", CHAPTER,
        f"{_GPT2} trains data-parallel on {_P4_RANKS} H100s, {_P4_RANKS // _P4_PER_NODE} nodes of "
        f"{_P4_PER_NODE} joined by InfiniBand NDR (NCCL's tree across nodes). From what batch per GPU "
        "(sequences of 1024 tokens) does the backward pass last at least as long as the bucketed all-reduce?",
        _hiding_batch, unit="sequences", rel_tol=0.0, close_tol=0.10, fmt="{:,.0f}",
        hint="allreduce_s of pk.data_parallel_step(gradient_bytes, backward_s, 64, 'nvlink4', algorithm='tree', "
             "inter_link='ib-ndr', ranks_per_node=8) does not depend on backward_s; divide it by the backward "
             "time of one sequence and round up.",
        mistakes=((lambda: _hiding_batch(_N, "ring", None), "that is one node of 8 GPUs on NVLink; across nodes "
                   "the all-reduce runs at a NIC's 48 GB/s, not NVLink's 370."),
                  (lambda: _hiding_batch(algorithm="ring"), "that is a ring across the nodes, which pays the "
                   "network's latency on each of its 126 steps; NCCL runs a tree there."))),
    Exercise(
        "communication-5", CHAPTER,
        f"One LLaMA-2-70B layer (width {LLAMA2_70B.hidden}) runs tensor-parallel on {_N} H100s over NVLink 4, one "
        f"sequence of {TP_TOKENS} tokens in bfloat16. How many milliseconds do its two all-reduces (after "
        "attention and after the MLP) take in the forward pass, by the model (ring)?",
        _tp_ms, unit="ms", rel_tol=0.01, close_tol=0.10, fmt="{:.3f}",
        hint=f"each all-reduces tokens × width × 2 bytes, the whole activation on every GPU: "
             f"2 × pk.collective_time('all-reduce', {TP_TOKENS} * {LLAMA2_70B.hidden} * 2, 8, 'nvlink4').",
        mistakes=((lambda: _tp_ms(_P5_BYTES / _N), "that all-reduces an eighth of the activations; every GPU "
                   "holds a partial sum of the whole tokens × width output, and the all-reduce adds them."),
                  (lambda: _tp_ms(count=1), "that is one all-reduce; a Megatron layer has two in its forward pass, "
                   "after the attention's output projection and after the MLP's down projection."),
                  (lambda: _tp_ms(2 * _P5_BYTES), "that counts 4 bytes per activation; they are bfloat16."))),
]
