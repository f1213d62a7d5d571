"""The collective-communication experiment: ``collective_sizes``, a real all-reduce and all-gather sweep.

Real runs use gloo with 2 processes on this CPU, on tiny budgets: rows, sizes and bandwidth conventions are
tested, not timings. Failures are injected through the experiment's test hook (``_FAULT``, passed to the
ranks with the run's settings: a rank raises, exits or hangs), and every test that starts ranks checks that
none is left. The NCCL code path is tested up to the ranks (a fake GPU and fake ranks): it needs 2 GPUs.
"""

from __future__ import annotations

import multiprocessing
import os

import psutil
import pytest
import torch

import perfkit as pk
from perfkit import placement
from perfkit.book.communication import experiments as cx
from perfkit.book.communication import workers
from perfkit.experiments.registry import REGISTRY
from perfkit.collectives import bus_factor, collective_time

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # noisy timings on a busy CI box: expected


def _ranks_alive() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("collective_sizes rank")]


def _no_rank_left() -> None:
    assert _ranks_alive() == []


@pytest.fixture(scope="module")
def quick_run():
    """One real quick run (gloo, 2 ranks, 1 KiB, 64 KiB, 4 MiB): ``(frame, rows handed to on_row)``. It also
    starts the fork server the other real runs share."""
    seen: list[dict] = []
    frame = REGISTRY["collective_sizes"](device="cpu", quick=True, progress=False, on_row=seen.append)
    return frame, seen


def test_registered_for_the_recorder_with_two_gpus_and_runs_anywhere_when_called():
    """The recorder and run_or_load need two GPUs (NCCL), so a gloo run on one GPU's host is never recorded
    or shown as a GPU measurement; called directly it runs anywhere (gloo on CPU processes)."""
    exp = REGISTRY["collective_sizes"]
    assert exp.needs == ("gpus2",) and exp.func.__module__ == cx.__name__ and exp.columns == cx.COLLECTIVE_COLUMNS
    assert all(isinstance(v, str) and v for v in exp.columns.values())
    assert cx.COLLECTIVE_OPS == ("all-reduce", "all-gather") and cx.LINK_OF_GPU["H100-SXM"] == "nvlink4"


@pytest.mark.slow  # starts rank processes
def test_quick_gloo_run_measures_every_op_and_size(quick_run):
    frame, seen = quick_run
    assert list(frame.columns) == list(cx.COLLECTIVE_COLUMNS) and len(frame) == len(seen) == 6
    assert frame[["op", "size_bytes"]].values.tolist() == [[op, s] for op in cx.COLLECTIVE_OPS
                                                           for s in (1024, 65536, 4 << 20)]
    assert [r["size_bytes"] for r in seen] == frame["size_bytes"].tolist()  # handed over as measured, in order
    assert set(frame["backend"]) == {"gloo"} and set(frame["device"]) == {"cpu"} and set(frame["n_ranks"]) == {2}
    assert set(frame["dtype"]) == {"float32"} and (frame["time_s"] > 0).all() and (frame["iqr_s"] >= 0).all()
    assert (frame["iterations"] % workers.SAMPLES == 0).all() and (frame["iterations"] > 0).all()
    for r in frame.to_dict("records"):
        assert r["algbw_GBps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * bus_factor(r["op"], 2))
    assert frame["predicted_s"].isna().all()  # no link model for gloo's shared memory
    meta = frame.attrs["meta"]
    assert meta["live"] and meta["device_kind"] == "cpu" and meta["params"] == {"quick": True}
    _no_rank_left()


def test_sizes_are_rounded_to_whole_elements_per_rank():
    assert cx._points(["all-reduce", "all-gather"], [1024, 1030], 3, "float32") == [  # 3 ranks: 12 bytes a row
        ("all-reduce", 1024), ("all-reduce", 1028), ("all-gather", 1020)]
    assert cx._points(["all-gather"], [8], 2, "float32") == [("all-gather", 8)]
    assert cx._need([("all-reduce", 1000), ("all-gather", 900)], 3) == 1200


@pytest.fixture
def nothing_started(monkeypatch):
    """Starting a rank fails the test (AssertionError is not an argument error)."""
    def started(self):
        raise AssertionError("started the ranks before refusing a bad argument")

    monkeypatch.setattr(workers.Ranks, "start", started)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_ranks=1), ValueError, "n_ranks must be at least 2"),
    (dict(n_ranks=os.cpu_count() + 1), ValueError, r"n_ranks=\d+ is more than the \d+ CPU cores"),
    (dict(n_ranks=2.0), TypeError, "n_ranks"),
    (dict(ops=("broadcast",)), LookupError, "known: all-reduce, all-gather"),
    (dict(ops="allreduce"), LookupError, "ops"),
    (dict(sizes_bytes=(1024, 0)), ValueError, "sizes_bytes"),
    (dict(sizes_bytes=(-4,)), ValueError, "sizes_bytes"),
    (dict(sizes_bytes=(4,)), ValueError, r"sizes_bytes \[4\] are too small"),
    (dict(sizes_bytes=1024), TypeError, "sizes_bytes"),
    (dict(backend="mpi"), ValueError, "backend must be one of 'auto', 'gloo', 'nccl'"),
    (dict(dtype="float64"), ValueError, "dtype"),
    (dict(timeout_s=0), ValueError, "timeout_s"),
    (dict(sizes_bytes=(1 << 50,)), ValueError, "GiB.*free"),
])
def test_bad_input_is_refused_before_any_rank_starts(kwargs, error, match, nothing_started):
    with pytest.raises(error, match=match):
        cx.collective_sizes(device="cpu", progress=False, **kwargs)


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="checks the refusal on a machine without 2 GPUs")
def test_nccl_needs_two_gpus(nothing_started):
    with pytest.raises(ValueError, match="backend='nccl' needs at least 2 CUDA GPUs"):
        cx.collective_sizes(backend="nccl", progress=False)
    with pytest.raises(ValueError, match="backend='nccl' needs at least 2 CUDA GPUs"):
        cx.collective_sizes(backend="nccl", device="cpu", progress=False)


class FakeRanks:
    """Stands for :class:`workers.Ranks` on a fake GPU: records the run's settings, reports fixed samples."""

    runs: list[FakeRanks] = []

    def __init__(self, n_ranks, config, timeout_s):
        self.n, self.config, self.timeout_s, self.closed = n_ranks, config, timeout_s, False
        FakeRanks.runs.append(self)

    def samples(self, index):
        return [2e-3] * workers.SAMPLES, 3

    def close(self, *, finished=False):
        self.closed = True


@pytest.fixture
def fake_ranks(monkeypatch):
    FakeRanks.runs = []
    monkeypatch.setattr(cx, "Ranks", FakeRanks)
    return FakeRanks.runs


def test_gpu_code_path_runs_nccl_on_every_gpu_and_predicts_nvlink(fake_gpu, fake_ranks, monkeypatch):
    monkeypatch.setattr(cx, "gpu_count", lambda: 8)
    frame = cx.collective_sizes(progress=False)
    run = fake_ranks[-1]
    assert run.n == 8 and run.config["backend"] == "nccl" and run.timeout_s == 600 and run.closed
    assert set(frame["backend"]) == {"nccl"} and set(frame["device"]) == {"cuda"} and set(frame["n_ranks"]) == {8}
    assert sorted(set(frame["size_bytes"])) == [1024 << i for i in range(21)] and len(frame) == 2 * 21
    assert (frame["iterations"] == 3 * workers.SAMPLES).all() and (frame["time_s"] == 2e-3).all()
    for r in frame.to_dict("records"):
        assert r["predicted_s"] == collective_time(r["op"], r["size_bytes"], 8, "nvlink4")
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * bus_factor(r["op"], 8))
    quick = cx.collective_sizes(quick=True, n_ranks=2, progress=False)
    assert sorted(set(quick["size_bytes"])) == [1024, 65536, 4 << 20, 256 << 20] and set(quick["n_ranks"]) == {2}
    with pytest.raises(ValueError, match="n_ranks=9 is more than the 8 GPUs"):
        cx.collective_sizes(n_ranks=9, progress=False)
    with pytest.raises(ValueError, match="GiB.*free on cuda"):  # the fake H100's 80 GB
        cx.collective_sizes(sizes_bytes=(64 << 30,), progress=False)
    assert len(fake_ranks) == 2


def test_an_unknown_gpu_gets_no_prediction(fake_gpu, fake_ranks, monkeypatch):
    monkeypatch.setattr(cx, "gpu_count", lambda: 2)
    with placement.use(spec=pk.device_spec("L4")):
        frame = cx.collective_sizes(quick=True, progress=False)
    assert set(frame["backend"]) == {"nccl"} and frame["predicted_s"].isna().all()


def test_one_gpu_runs_gloo_on_the_cpu_and_says_so(fake_gpu, fake_ranks, monkeypatch, capsys):
    monkeypatch.setattr(cx, "gpu_count", lambda: 1)
    frame = cx.collective_sizes(quick=True, progress=False)
    assert fake_ranks[-1].config["backend"] == "gloo" and fake_ranks[-1].n == 2
    assert set(frame["backend"]) == {"gloo"} and set(frame["device"]) == {"cpu"}
    assert sorted(set(frame["size_bytes"])) == [1024, 65536, 4 << 20] and frame["predicted_s"].isna().all()
    assert "ranks run gloo on CPU tensors" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(ValueError, match="torch sees 1: use backend='gloo'"):
        cx.collective_sizes(backend="nccl", progress=False)


@pytest.mark.slow  # starts rank processes
@pytest.mark.parametrize("how, match", [
    ("raise", r"rank 1 failed: RuntimeError: an injected failure at point 2.*rank 1's traceback"),
    ("exit", r"rank 1 died \(exit code 3\) without reporting an error"),
])
def test_a_failed_rank_fails_the_run_and_names_it(how, match, quick_run, monkeypatch):
    monkeypatch.setattr(cx, "_FAULT", (1, how, 1))
    seen: list[dict] = []
    with pytest.raises(RuntimeError, match=f"(?s)^collective_sizes: {match}"):
        cx.collective_sizes(device="cpu", ops="all-reduce", sizes_bytes=(1024, 2048), quick=True, progress=False,
                            on_row=seen.append, timeout_s=60)
    assert [r["size_bytes"] for r in seen] == [1024]  # the point measured before the failure is kept
    _no_rank_left()


@pytest.mark.slow  # starts rank processes
def test_a_hung_rank_is_named_at_the_deadline(quick_run, monkeypatch):
    monkeypatch.setattr(cx, "_FAULT", (1, "hang", 0))
    with pytest.raises(RuntimeError, match=r"no result within timeout_s=4 s: rank 1 is behind \(last report: "
                                           r"joining the group\), rank 0 reached point 1 of 1 \(all-reduce, 1024 "
                                           r"bytes\); every rank was stopped"):
        cx.collective_sizes(device="cpu", ops=["all-reduce"], sizes_bytes=[1024], progress=False, timeout_s=4)
    _no_rank_left()


@pytest.mark.slow  # starts rank processes
def test_an_interrupt_keeps_the_rows_and_stops_every_rank(quick_run):
    kept, pids = [], []

    def on_row(row):
        kept.append(row)
        pids.extend(p.pid for p in _ranks_alive())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cx.collective_sizes(device="cpu", quick=True, progress=False, on_row=on_row)
    assert [(r["op"], r["size_bytes"]) for r in kept] == [("all-reduce", 1024)]
    assert len(pids) == 2  # both ranks were running when the row came
    _no_rank_left()
    assert not [pid for pid in pids if psutil.pid_exists(pid)]


def test_two_gpus_are_needed_and_a_cpu_run_beside_a_gpu_is_labelled_cpu(monkeypatch):
    """One GPU is not enough for the recorder, and a frame whose rows all ran on the CPU is labelled a CPU
    measurement even when a GPU is in the machine (never a CPU number presented as a GPU one)."""
    from types import SimpleNamespace

    import pandas as pd

    from perfkit.experiments import registry

    exp = REGISTRY["collective_sizes"]
    monkeypatch.setattr(registry, "cuda_available", lambda: True)
    monkeypatch.setattr(registry, "current_device", lambda: SimpleNamespace(label="NVIDIA H200"))
    for gpus, missing in ((1, ["gpus2"]), (2, [])):
        monkeypatch.setattr(registry, "gpu_count", lambda gpus=gpus: gpus)
        assert registry.missing_needs(exp) == missing

    columns = {"device": "where it ran", "time_s": "seconds"}
    run = registry.register("_probe_device_label", "a probe", columns)(  # "auto": gloo on the CPU, as here
        lambda device="auto": pd.DataFrame({"device": ["cuda" if device == "cuda" else "cpu"], "time_s": [1.0]}))
    try:
        assert run(device="cpu").attrs["meta"]["device_kind"] == "cpu"
        on_cpu = run().attrs["meta"]  # device="auto" on a machine with a GPU, rows from the CPU
        assert on_cpu["device_kind"] == "cpu" and on_cpu["device_name"] != "NVIDIA H200"
        assert run(device="cuda").attrs["meta"]["device_kind"] == "gpu"
    finally:
        REGISTRY.pop("_probe_device_label")
