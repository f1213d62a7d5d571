"""Chapter 08's verdicts judged both ways: a claim of independence ("a ring's bandwidth does not depend
on the GPU count") or of nearness ("one 25 MiB bucket runs near the bus bandwidth of a large message")
holds only within a band around 1, so a ring that gains bandwidth with more GPUs is not a ring whose
bandwidth does not depend on them. Made-up frames whose answers are known by hand; nothing is timed."""

from __future__ import annotations

import pytest

from perfkit.book.communication import verdict
from perfkit.book.verdict import verdict_table
from perfkit.collectives import bus_bandwidth
from testkit import framed

GiB = 2**30


def _ring(busbw_by_ranks: dict[int, float], sizes=(2**20, 25 * 2**20, GiB)) -> dict:
    """A recorded-looking ``collective_sizes`` frame of all-reduces with no latency: each message on n
    ranks reaches exactly ``busbw_by_ranks[n]`` bytes/s of bus bandwidth."""
    rows = []
    for n, busbw in busbw_by_ranks.items():
        for s in sizes:
            t = s * 2 * (n - 1) / n / busbw
            rows.append({"op": "all-reduce", "backend": "nccl", "n_ranks": n, "size_bytes": s, "time_s": t,
                         "algbw_GBps": s / t / 1e9, "busbw_GBps": bus_bandwidth("all-reduce", s, n, t) / 1e9,
                         "predicted_s": float("nan"), "device": "cuda"})
    frame = framed(rows, device="H100-SXM", device_kind="gpu", live=False, recorded_at="2026-01-01")
    return {"collective_sizes": frame}


def _gpu_count(ratio: float) -> tuple[str, str]:
    table = verdict_table(verdict.findings(_ring({2: 300e9, 8: 300e9 * ratio}))).set_index("rule")
    row = table.loc["A ring's bandwidth does not depend on the GPU count"]
    return row["now"], row["verdict"]


@pytest.mark.parametrize("ratio, now, expected", [
    (1.0, "1.00", "holds"), (1.2, "1.20", "holds"), (0.85, "0.85", "holds"),
    (1.61, "1.61", "weaker"),  # XLA's eight H100s ÷ two: more GPUs gained bandwidth, so it depends on them
    (0.7, "0.70", "weaker"), (2.5, "2.50", "gone"), (0.4, "0.40", "gone")])
def test_a_ring_that_gains_bandwidth_with_more_gpus_does_not_hold(ratio, now, expected):
    assert _gpu_count(ratio) == (now, expected)


def test_the_claims_state_their_bands():
    table = verdict_table(verdict.findings({})).set_index("rule")
    assert table.loc["A ring's bandwidth does not depend on the GPU count", "claim"] == (
        "8 GPUs reach the bus bandwidth of 2; holds within 0.80–1.25×")
    assert table.loc["Bucket the gradients (25 MiB)", "claim"].endswith("; holds within 80–125 %")
    assert verdict.INDEPENDENT.holds == (0.8, 1.25) and verdict.INDEPENDENT.gone == (0.5, 2.0)
    # One-sided claims state no band: more of the effect only strengthens them.
    assert "holds within" not in table.loc["Small messages are latency-bound", "claim"]


def test_the_bucket_rule_is_judged_both_ways():
    flat = verdict_table(verdict.findings(_ring({2: 300e9, 8: 300e9}))).set_index("rule")
    assert flat.loc["Bucket the gradients (25 MiB)", ["now", "verdict"]].tolist() == ["100", "holds"]
    # a bucket at 2.5× the bus bandwidth of the largest message is no "near" either
    fast_bucket = _ring({8: 300e9}, sizes=(2**20, GiB))
    frame = fast_bucket["collective_sizes"]
    bucket = _ring({8: 750e9}, sizes=(25 * 2**20,))["collective_sizes"]
    both = framed(list(frame.to_dict("records")) + list(bucket.to_dict("records")), device="H100-SXM",
                  device_kind="gpu", live=False, recorded_at="2026-01-01")
    table = verdict_table(verdict.findings({"collective_sizes": both})).set_index("rule")
    assert table.loc["Bucket the gradients (25 MiB)", ["now", "verdict"]].tolist() == ["250", "gone"]
