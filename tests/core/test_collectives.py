"""The α-β model of collectives (perfkit.collectives) and the link table (perfkit.interconnects), issue 28.

Hand-computed cases, nccl-tests' bandwidth conventions, the data-parallel step's overlap, bad input. The
accuracy targets on the published tables are checked by running scripts/validate_collectives.py's main
(skipped without the tables). No test times anything.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import random
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.collectives import (ALGORITHMS, BASE_LATENCY_S, NVLS_EFFICIENCY, NVLS_LATENCY_S, OPS, algorithm_bandwidth,
                                 bus_bandwidth, bus_factor, collective_time, crossover_bytes, data_parallel_step,
                                 explain_collective)
from perfkit.interconnects import KNOWN_LINKS, LinkSpec, link_spec
from testkit import SCRIPTS

GiB, MiB = 2**30, 2**20
NVLINK4_B = 450e9 * 20.6 / 25  # 370.8 GB/s: NCCL's 20.6 GB/s per 25 GB/s link
SCRIPT = SCRIPTS / "validate_collectives.py"


# ----------------------------------------------------------------------------------------- the link table
def test_known_links_carry_the_datasheets_and_a_source():
    need = {"nvlink2": 150e9, "nvlink3": 300e9, "nvlink4": 450e9, "nvlink5": 900e9, "pcie3": 15.75e9,
            "pcie4": 31.5e9, "pcie5": 63e9, "ib-fdr": 56e9 / 8, "ib-edr": 100e9 / 8, "ib-hdr": 200e9 / 8,
            "ib-ndr": 400e9 / 8, "ethernet-100g": 100e9 / 8}
    for key, bandwidth in need.items():
        assert KNOWN_LINKS[key].bandwidth_bytes_s == pytest.approx(bandwidth), key
    for key, s in KNOWN_LINKS.items():
        assert s.key == key == key.lower()
        assert s.kind in ("nvlink", "pcie", "infiniband", "ethernet")
        assert 0.5 < s.efficiency <= 1 and 0 < s.latency_s < 1e-4 and s.source
        assert s.achievable_bytes_s == pytest.approx(s.bandwidth_bytes_s * s.efficiency)
    assert {k for k, s in KNOWN_LINKS.items() if s.in_switch_reduction} == {"nvlink4", "nvlink5"}
    assert KNOWN_LINKS["nvlink4"].achievable_bytes_s == pytest.approx(NVLINK4_B)
    assert KNOWN_LINKS["pcie3"].achievable_bytes_s == pytest.approx(12e9)  # NCCL's PCI_BW for Gen3 x16


def test_link_spec_by_name_any_case_or_as_given():
    assert link_spec("NVLink4") is KNOWN_LINKS["nvlink4"]
    mine = dataclasses.replace(link_spec("pcie4"), key="mine", efficiency=0.5)
    assert link_spec(mine) is mine
    with pytest.raises(LookupError, match="nvlink4"):
        link_spec("nvlink9")
    with pytest.raises(TypeError):
        link_spec(450e9)


# ---------------------------------------------------------------------------------------------- the model
def test_ring_all_reduce_of_1_gib_on_8_nvlink4_gpus_by_hand():
    # 14 steps of 3.4 µs + NCCL's 8.4 µs base; 2·7/8 of 1 GiB at 370.8 GB/s
    latency = 8.4e-6 + 14 * 3.4e-6
    transfer = 1.75 * GiB / NVLINK4_B
    p = explain_collective("all-reduce", GiB, 8, "nvlink4")
    assert (p.steps, p.algorithm, p.bound, p.link.key) == (14, "ring", "bandwidth", "nvlink4")
    assert p.latency_s == pytest.approx(latency) and p.transfer_s == pytest.approx(transfer)
    assert p.time_s == pytest.approx(5.1236e-3, rel=1e-4) == collective_time("allreduce", GiB, 8, "nvlink4")
    assert p.wire_bytes == pytest.approx(1.75 * GiB)
    assert p.algbw_bytes_s == pytest.approx(GiB / p.time_s)
    assert p.bus_bytes_s == pytest.approx(366.7e9, rel=1e-3)  # just under B: the latency's share


def test_other_ops_by_hand():
    b4 = 24e9  # pcie4 x16 at NCCL's 24 GB/s
    assert collective_time("all-gather", 64 * MiB, 4, "pcie4") == pytest.approx(8.4e-6 + 3 * 5.7e-6 + 0.75 * 64 * MiB / b4)
    assert collective_time("reduce_scatter", 64 * MiB, 4, "pcie4") == pytest.approx(collective_time("all-gather", 64 * MiB, 4, "pcie4"))
    assert collective_time("AllToAll", 64 * MiB, 4, "pcie4") == pytest.approx(collective_time("all-gather", 64 * MiB, 4, "pcie4"))
    bcast = explain_collective("broadcast", 64 * MiB, 4, "pcie4")
    assert (bcast.steps, bcast.wire_bytes) == (3, 64 * MiB)
    assert bcast.time_s == pytest.approx(8.4e-6 + 3 * 5.7e-6 + 64 * MiB / b4)
    zero = explain_collective("all-reduce", 0, 8, "nvlink4")
    assert zero.time_s == pytest.approx(BASE_LATENCY_S + 14 * 3.4e-6) and zero.bound == "latency"


def test_tree_saves_latency_steps_and_nvls_needs_a_reducing_switch():
    tree = explain_collective("all-reduce", 4 * MiB, 64, "nvlink4", algorithm="tree")
    ring = explain_collective("all-reduce", 4 * MiB, 64, "nvlink4")
    assert tree.steps == 12 and ring.steps == 126 and tree.transfer_s == pytest.approx(ring.transfer_s)
    assert explain_collective("all-reduce", 1, 5, "nvlink4", algorithm="tree").steps == 6  # 2·⌈log2 5⌉
    nvls = explain_collective("all-reduce", GiB, 8, "nvlink4", algorithm="nvls")
    assert nvls.latency_s == NVLS_LATENCY_S
    assert nvls.transfer_s == pytest.approx(9 / 8 * GiB / (NVLINK4_B * NVLS_EFFICIENCY))
    assert nvls.algbw_bytes_s == pytest.approx(275e9, rel=0.03)  # the maintainer's figure it rests on
    assert nvls.time_s < explain_collective("all-reduce", GiB, 8, "nvlink4").time_s


def test_across_nodes_the_slower_link_and_the_larger_alpha():
    p = explain_collective("all-reduce", GiB, 16, "nvlink4", inter_link="ib-ndr", ranks_per_node=8)
    assert p.link.key == "ib-ndr" and p.steps == 30
    assert p.latency_s == pytest.approx(8.4e-6 + 30 * 14e-6)
    assert p.transfer_s == pytest.approx(2 * 15 / 16 * GiB / (50e9 * 0.96))
    one_node = explain_collective("all-reduce", GiB, 8, "nvlink4", inter_link="ib-ndr", ranks_per_node=8)
    assert one_node == explain_collective("all-reduce", GiB, 8, "nvlink4")


def test_bus_bandwidth_follows_nccl_tests():
    for n in (2, 3, 8, 64):
        assert bus_factor("all-reduce", n) == pytest.approx(2 * (n - 1) / n)
        for op in ("all-gather", "reduce-scatter", "all-to-all"):
            assert bus_factor(op, n) == pytest.approx((n - 1) / n)
        assert bus_factor("broadcast", n) == 1
    # XLA's 1 KiB all-reduce on 8 GPUs, 49.312 µs: algbw = size / time, busbw × 2·7/8
    assert algorithm_bandwidth(1024, 49.312e-6) == pytest.approx(20.766e6, rel=1e-4)
    assert bus_bandwidth("all_reduce", 1024, 8, 49.312e-6) == pytest.approx(1.75 * 1024 / 49.312e-6)
    for op in OPS:  # a ring's busbw tends to the link's achievable bandwidth, whatever n
        for n in (2, 4, 8, 16):
            p = explain_collective(op, 1e13, n, "nvlink4")
            assert p.bus_bytes_s == pytest.approx(NVLINK4_B, rel=1e-3), (op, n)
            assert p.bus_bytes_s == pytest.approx(bus_bandwidth(op, 1e13, n, p.time_s))


def test_crossover_is_where_latency_equals_transfer():
    s = crossover_bytes("all-reduce", 8, "nvlink4")
    assert s == pytest.approx(56e-6 * NVLINK4_B / 1.75)
    p = explain_collective("all-reduce", s, 8, "nvlink4")
    assert p.latency_s == pytest.approx(p.transfer_s)
    assert explain_collective("all-reduce", s / 2, 8, "nvlink4").bound == "latency"
    assert explain_collective("all-reduce", s * 2, 8, "nvlink4").bound == "bandwidth"
    assert crossover_bytes("all-reduce", 64, "nvlink4", algorithm="tree") < crossover_bytes("all-reduce", 64, "nvlink4")


# --------------------------------------------------------------------------------- the data-parallel step
def _simulated(g, backward, n, link, bucket, **kw):
    """The step by brute force: bucket by bucket, one stream."""
    k = max(1, math.ceil(g / bucket * (1 - 1e-12)))
    sizes = [bucket] * (k - 1) + [g - (k - 1) * bucket]
    end, done, total = 0.0, 0.0, 0.0
    for size in sizes:
        done += size
        d = collective_time("all-reduce", size, n, link, **kw)
        end = max(end, done / g * backward) + d
        total += d
    return k, total, max(0.0, end - backward)


def test_the_step_matches_a_bucket_by_bucket_simulation():
    rng = random.Random(0)
    for _ in range(200):
        g, backward = rng.uniform(1e6, 4e9), rng.uniform(0, 0.5)
        bucket, n = rng.uniform(1e6, 2e8), rng.choice((2, 4, 8, 16, 32))
        link = rng.choice(("nvlink3", "pcie4", "ib-hdr"))
        step = data_parallel_step(g, backward, n, link, bucket_bytes=bucket, forward_s=0.01)
        k, total, exposed = _simulated(g, backward, n, link, bucket)
        assert step.buckets == k
        assert step.allreduce_s == pytest.approx(total) and step.exposed_s == pytest.approx(exposed, abs=1e-12)
        assert step.overlapped_s + step.exposed_s == pytest.approx(step.allreduce_s)
        assert step.compute_s == pytest.approx(0.01 + backward)
        assert step.step_s == pytest.approx(step.compute_s + step.exposed_s)
        assert step.comm_share == pytest.approx(step.exposed_s / step.step_s)


def test_one_bucket_cannot_overlap():
    step = data_parallel_step(1e9, 0.2, 8, "pcie3", bucket_bytes=2e9)
    assert step.buckets == 1 and step.overlapped_s == 0
    assert step.exposed_s == pytest.approx(collective_time("all-reduce", 1e9, 8, "pcie3")) == step.allreduce_s


def test_cheap_communication_hides_behind_the_backward_pass():
    step = data_parallel_step(1e9, 10.0, 8, "nvlink4", bucket_bytes=1e6)
    assert step.buckets == 1000
    assert step.exposed_s == pytest.approx(collective_time("all-reduce", 1e6, 8, "nvlink4"))  # the last bucket only
    assert step.comm_share < 1e-4 and step.overlapped_s > 0.99 * step.allreduce_s


def test_the_step_grows_with_the_ranks():
    steps = [data_parallel_step(2e9, 0.05, n, "nvlink4", inter_link="ib-hdr", ranks_per_node=8)
             for n in (2, 4, 8, 16, 32, 64, 256)]
    for a, b in zip(steps, steps[1:]):
        assert b.allreduce_s > a.allreduce_s and b.step_s >= a.step_s
    assert steps[2].link.key == "nvlink4" and steps[3].link.key == "ib-hdr"


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, error, match", [
    (lambda: collective_time("all-sum", 1, 8, "nvlink4"), LookupError, "all-reduce"),
    (lambda: collective_time("all-reduce", 1, 8, "nvlink9"), LookupError, "pcie4"),
    (lambda: collective_time("all-reduce", 1, 8, "nvlink4", algorithm="butterfly"), LookupError, "ring"),
    (lambda: collective_time("all-reduce", 1, 1, "nvlink4"), ValueError, "n_ranks"),
    (lambda: collective_time("all-reduce", -1, 8, "nvlink4"), ValueError, "nbytes"),
    (lambda: collective_time("all-reduce", 1, 2.0, "nvlink4"), TypeError, "n_ranks"),
    (lambda: collective_time("all-reduce", 1, True, "nvlink4"), TypeError, "n_ranks"),
    (lambda: collective_time("all-reduce", "1", 8, "nvlink4"), TypeError, "nbytes"),
    (lambda: collective_time(3, 1, 8, "nvlink4"), TypeError, "op"),
    (lambda: collective_time("all-reduce", 1, 8, 450e9), TypeError, "link"),
    (lambda: collective_time("all-reduce", 1, 8, "nvlink4", algorithm=None), TypeError, "algorithm"),
    (lambda: collective_time("all-reduce", 1, 8, "pcie4", algorithm="nvls"), ValueError, "nvlink4"),
    (lambda: collective_time("all-reduce", 1, 8, "nvlink3", algorithm="nvls"), ValueError, "reduces"),
    (lambda: collective_time("all-gather", 1, 8, "nvlink4", algorithm="nvls"), ValueError, "all-reduce only"),
    (lambda: collective_time("broadcast", 1, 8, "nvlink4", algorithm="tree"), ValueError, "all-reduce only"),
    (lambda: collective_time("all-reduce", 1, 16, "nvlink4", algorithm="nvls", inter_link="ib-ndr",
                             ranks_per_node=8), ValueError, "NVSwitch"),
    (lambda: collective_time("all-reduce", 1, 16, "nvlink4", inter_link="ib-ndr"), ValueError, "together"),
    (lambda: collective_time("all-reduce", 1, 16, "nvlink4", ranks_per_node=8), ValueError, "together"),
    (lambda: collective_time("all-reduce", 1, 16, "nvlink4", inter_link="ib-ndr", ranks_per_node=0),
     ValueError, "ranks_per_node"),
    (lambda: algorithm_bandwidth(1, 0), ValueError, "time_s"),
    (lambda: bus_bandwidth("all-reduce", 1, 8, -1e-3), ValueError, "time_s"),
    (lambda: bus_factor("all-reduce", 1), ValueError, "n_ranks"),
    (lambda: crossover_bytes("gather", 8, "nvlink4"), LookupError, "all-gather"),
    (lambda: data_parallel_step(0, 0.1, 8, "nvlink4"), ValueError, "gradient_bytes"),
    (lambda: data_parallel_step(1e9, -0.1, 8, "nvlink4"), ValueError, "backward_s"),
    (lambda: data_parallel_step(1e9, 0.1, 8, "nvlink4", bucket_bytes=0), ValueError, "bucket_bytes"),
    (lambda: data_parallel_step(1e9, 0.1, 1, "nvlink4"), ValueError, "n_ranks"),
])
def test_bad_input_says_what_is_accepted(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_names_are_forgiving_and_public():
    for name in ("allreduce", "all_reduce", "All-Reduce", " ALLGATHER ", "reduce_scatter", "alltoall", "Broadcast"):
        assert explain_collective(name, 1, 4, "nvlink3").op in OPS
    assert ALGORITHMS == ("ring", "tree", "nvls")
    assert pk.collective_time is collective_time and pk.link_spec is link_spec
    assert pk.explain_collective is explain_collective and pk.data_parallel_step is data_parallel_step
    assert isinstance(pk.collectives.explain_collective("all-reduce", 1, 2, "pcie3").link, LinkSpec)


# ------------------------------------------------------------------------------------- the published tables
def test_the_validation_targets_hold_on_the_published_tables(capsys):
    if not all(pk.published_data.has_published(s) for s in ("xla_h100_collectives", "deepbench_allreduce")):
        pytest.skip(pk.published_data.HOW_TO_GET)
    spec = importlib.util.spec_from_file_location("validate_collectives", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main() == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.count("PASS") >= 3 and "FAIL" not in out
