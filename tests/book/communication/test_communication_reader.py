"""Chapter 08 (communication) for the reader: its interactive figures and its problems
(perfkit.book.communication.interactive, perfkit.book.communication.problems)."""

from __future__ import annotations

import json
import math

import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.communication import analysis, interactive, problems, training
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes
from perfkit.collectives import crossover_bytes
from figure_helpers import steps
from testkit import H100, heading_text

P = 124_439_808  # GPT-2 small
MiB = 2**20


# ------------------------------------------------------------------------------ the figures
@pytest.fixture(scope="module")
def busbw():
    return interactive.bus_bandwidth()


@pytest.fixture(scope="module")
def dp():
    return interactive.data_parallel()


def test_every_registered_figure_builds_with_its_defaults():
    assert set(interactive.FIGURES) == {"bus_bandwidth", "data_parallel"}
    for name, build in interactive.FIGURES.items():
        fig = build()
        assert html_bytes(fig) < MAX_HTML_BYTES, name
        assert len(fig.states) >= 5 and "slider" in fig.alt
        assert "model of" in heading_text(fig)
        args = [json.dumps(state, sort_keys=True, default=str) for _, state in steps(fig)]
        assert len(set(args)) == len(args), name  # every state shows something else


def test_bus_bandwidth_states_are_the_model_at_each_gpu_count(busbw):
    assert busbw.states == [str(n) for n in interactive.COUNTS]
    assert interactive.COUNTS[busbw.figure.layout.sliders[0].active] == 8
    for (_, (data, layout)), n in zip(steps(busbw), interactive.COUNTS):
        assert layout["annotations[0].text"].startswith(f"{n} GPUs:")
        for k, (link, inter, per_node, algorithm) in enumerate(interactive.NETWORKS.values()):
            xs, ys = data["x"][2 * k], data["y"][2 * k]
            if algorithm == "nvls" and n > per_node:  # NVLS needs one switch
                assert xs == [] and data["x"][2 * k + 1] == []
                continue
            assert list(xs) == list(analysis.SIZES)
            for size, y in zip(xs, ys):
                p = pk.explain_collective("all-reduce", size, n, link, algorithm=algorithm, inter_link=inter,
                                          ranks_per_node=per_node)
                assert math.isclose(y, p.bus_bytes_s / 1e9, rel_tol=1e-4)
            cross = crossover_bytes("all-reduce", n, link, algorithm=algorithm, inter_link=inter,
                                    ranks_per_node=per_node)
            marker = data["x"][2 * k + 1]
            assert (list(marker) == [pytest.approx(cross, rel=1e-4)]) if cross <= analysis.SIZES[-1] else not marker


def test_beyond_one_node_the_plateau_drops_to_the_nic(busbw):
    states = {n: data for n, (_, (data, _)) in zip(interactive.COUNTS, steps(busbw))}
    ring = 0  # the first network: NVLink 4 + InfiniBand NDR, ring
    assert states[8]["y"][ring][-1] > 360 and 40 < states[16]["y"][ring][-1] < 48.1
    # the ring's crossover grows with the GPUs beyond a node; the tree's barely moves
    assert states[512]["x"][1] == [] or states[512]["x"][1][0] > states[64]["x"][1][0]
    assert states[512]["x"][3][0] < 2 * states[64]["x"][3][0]


def test_each_data_parallel_state_is_the_sweep(dp):
    assert dp.states == [str(b) for b in interactive.BATCHES]
    frame = training.data_parallel_sweep(H100, batches=interactive.BATCHES).set_index(["setup", "batch"])
    names = list(training.DP_SETUPS)
    shares = []
    for (_, (data, layout)), b in zip(steps(dp), interactive.BATCHES):
        compute, exposed, total = data["x"][0], data["x"][1], data["x"][2]
        for i, name in enumerate(names):
            row = frame.loc[(name, b)]
            assert math.isclose(compute[i], row["forward_s"] + row["backward_s"], rel_tol=1e-4)
            assert math.isclose(exposed[i], row["exposed_s"], rel_tol=1e-4, abs_tol=1e-12)
            assert math.isclose(total[i], row["step_s"], rel_tol=1e-4)
            assert f"{row['comm_share']:.0%} exposed" in data["text"][2][i]
        assert f"batch {b} × 1024 tokens per GPU" in layout["annotations[0].text"]
        shares.append(frame.loc[(names[1], b), "comm_share"])
    assert all(a >= b for a, b in zip(shares, shares[1:]))  # a larger batch hides more


def test_figures_refuse_bad_input():
    with pytest.raises(ValueError, match="counts"):
        interactive.bus_bandwidth(counts=[8])
    with pytest.raises(ValueError, match="counts"):
        interactive.bus_bandwidth(counts=[1, 8])
    with pytest.raises(ValueError, match="sizes"):
        interactive.bus_bandwidth(sizes=[1024, 1024])
    with pytest.raises(ValueError, match="active"):
        interactive.bus_bandwidth(active=99)
    with pytest.raises(TypeError, match="networks"):
        interactive.bus_bandwidth(networks=[("nvlink4", "ib-ndr", 8, "ring")])
    with pytest.raises(ValueError, match="networks"):
        interactive.bus_bandwidth(networks={"x": ("nvlink4", "ib-ndr")})
    with pytest.raises(LookupError, match="link"):
        interactive.bus_bandwidth(networks={"x": ("nvlink9", "ib-ndr", 8, "ring")})
    with pytest.raises(ValueError, match="batches"):
        interactive.data_parallel(batches=[4])
    with pytest.raises(ValueError, match="active"):
        interactive.data_parallel(active=-1)
    with pytest.raises(ValueError, match="setups"):
        interactive.data_parallel(setups={})
    with pytest.raises(LookupError, match="device|GPU"):
        interactive.data_parallel("no such GPU")


# ------------------------------------------------------------------------------ the problems
@pytest.fixture
def check():
    """``problems.check``, which knows this chapter's exercises."""
    return exercises.check


def _answer(ex_id: str):
    return next(ex for ex in problems.EXERCISES if ex.id == ex_id).answer()


def test_problem_ids_and_chapter(check):
    assert [e.id for e in problems.EXERCISES] == [f"communication-{k}" for k in range(1, 6)]
    assert {e.chapter for e in problems.EXERCISES} == {"08_communication"} == {problems.CHAPTER}
    assert [e.id for e in exercises.all_exercises("08_communication")] == [e.id for e in problems.EXERCISES]
    for ex in problems.EXERCISES:
        assert check(ex.id, ex.answer()).status == "right"
        assert ex.hint and ex.mistakes
        for solve, why in ex.mistakes:
            slip = check(ex.id, solve())
            assert slip.status == "wrong" and why in slip.message, (ex.id, slip)


def test_communication_1_bus_bandwidth(check):
    algbw = 2**30 / 4.72e-3
    busbw = algbw * 2 * 7 / 8
    assert math.isclose(_answer("communication-1"), busbw / 1e9, rel_tol=1e-12)
    assert 395 < busbw / 1e9 < 400
    slip = check("communication-1", round(algbw / 1e9))
    assert slip.status == "wrong" and "algorithm bandwidth" in slip.message
    assert check("communication-1", round(busbw / 1e9)).status == "right"


def test_communication_2_crossover(check):
    latency = 8.4e-6 + 2 * 7 * 3.4e-6
    bandwidth = 450e9 * 20.6 / 25  # NCCL's 20.6 GB/s of each 25 GB/s NVLink 4 link
    cross = latency * bandwidth / (2 * 7 / 8)
    assert math.isclose(_answer("communication-2"), cross / MiB, rel_tol=1e-9)
    assert 11 < cross / MiB < 12
    one = check("communication-2", (8.4e-6 + 3.4e-6) * bandwidth / 1.75 / MiB)
    assert one.status == "wrong" and "2(n − 1)" in one.message


def test_communication_3_exposed_share(check):
    backward = 4 * P * 4 * 1024 / pk.achievable_ceilings(H100).flop_s_for("bfloat16")
    step = pk.data_parallel_step(4 * P, backward, 8, "nvlink4", forward_s=backward / 2)
    assert step.buckets == 19
    assert math.isclose(_answer("communication-3"), 100 * step.exposed_s / step.step_s, rel_tol=1e-12)
    assert 15 < _answer("communication-3") < 25
    slip = check("communication-3", 100 * step.allreduce_s / (1.5 * backward + step.allreduce_s))
    assert slip.status == "wrong" and "during the backward pass" in slip.message


def test_communication_4_hiding_batch(check):
    per_sequence = 4 * P * 1024 / pk.achievable_ceilings(H100).flop_s_for("bfloat16")
    step = pk.data_parallel_step(4 * P, 1.0, 64, "nvlink4", algorithm="tree", inter_link="ib-ndr", ranks_per_node=8)
    b = math.ceil(step.allreduce_s / per_sequence)
    assert _answer("communication-4") == b
    assert b * per_sequence >= step.allreduce_s > (b - 1) * per_sequence
    assert 32 < b < 64
    assert check("communication-4", b + 1).status == "close"
    one_node = check("communication-4", 6)
    assert one_node.status == "wrong" and "one node" in one_node.message


def test_communication_5_tensor_parallel_allreduces(check):
    message = 4096 * 8192 * 2
    assert message == 64 * MiB
    time_s = 8.4e-6 + 14 * 3.4e-6 + 1.75 * message / (450e9 * 20.6 / 25)
    assert math.isclose(_answer("communication-5"), 2e3 * time_s, rel_tol=1e-9)
    layer = training.tensor_parallel_layer(H100).groupby("kind")["predicted_s"].sum()
    assert math.isclose(layer["all-reduce"] * 1e3, _answer("communication-5"), rel_tol=1e-9)
    slip = check("communication-5", 1e3 * time_s)
    assert slip.status == "wrong" and "two" in slip.message
