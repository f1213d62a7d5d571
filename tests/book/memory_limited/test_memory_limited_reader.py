"""Chapter 06 (memory-limited layers) for the reader: its interactive figure, its problems and its
verdicts (perfkit.book.memory_limited.interactive, perfkit.book.memory_limited.problems, perfkit.book.memory_limited.verdict)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.memory_limited import convnet, fusion, experiments as memory
from perfkit.book.memory_limited import interactive as interactive
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes
from perfkit.book.memory_limited import verdict as verdict
from testkit import H100, H100_NAME, framed, heading_text

GPU_META = {"experiment": "x", "device_name": H100_NAME, "device": "H100-SXM",
            "device_kind": "gpu", "recorded_at": "2026-01-02T00:00:00+00:00", "complete": True}
CPU_META = {"experiment": "x", "live": True, "device_name": "CPU (x86_64, 2 cores)", "device_kind": "cpu"}


def _as_measured(frame: pd.DataFrame, meta: dict = GPU_META) -> pd.DataFrame:
    """A model-only frame whose 'measured' times are the model's own: known effects."""
    frame = frame.copy()
    frame["time_s"] = frame["predicted_s"]
    return framed(frame, meta)


# ------------------------------------------------------------------------------ the figure
@pytest.fixture(scope="module")
def figure():
    return interactive.time_vs_bytes()


def _steps(fig):
    return fig.figure.layout.sliders[0].steps


def _state(step) -> tuple[dict, dict]:
    """A slider step as ``({property: {trace index: value}}, layout update)``."""
    data, layout, touched = step.args
    return {k: dict(zip(touched, values)) for k, values in data.items()}, layout


# the traces: 0 the model's line, 1-3 the measured points, 4 the diamonds, 5-6 the bars
LINE, ACTS, BN, POOLS, DIAMONDS, LATENCY, STREAMING = range(7)


def test_every_registered_figure_builds_with_its_defaults():
    for name, build in interactive.FIGURES.items():
        fig = build()
        assert html_bytes(fig) < MAX_HTML_BYTES, name
        assert len(fig.states) >= 10 and fig.name == "memory-time-vs-bytes"
        assert "model of H100-SXM" in heading_text(fig)
        assert "(model only)" in heading_text(fig)  # no GPU frame given
        assert "slider" in fig.alt


def test_states_are_the_batches_and_open_near_32(figure):
    assert figure.states == [str(n) for n in interactive.BATCHES]
    assert interactive.BATCHES[figure.figure.layout.sliders[0].active] == 32


def test_each_state_is_the_byte_model_at_its_batch(figure):
    n_layers = len(interactive.LAYERS)
    for step, n in zip(_steps(figure), interactive.BATCHES):
        data, layout = _state(step)
        shape = (n, 64, 56, 56)
        table = interactive.layer_times(shape, "bfloat16", H100)
        latency, streaming = data["x"][LATENCY], data["x"][STREAMING]
        assert len(latency) == len(streaming) == n_layers
        for k, row in table.iterrows():
            assert math.isclose(latency[k] + streaming[k], row["predicted_s"], rel_tol=1e-3)
        relu = pk.predict_layer_time("relu", shape, "bfloat16", H100)
        assert math.isclose(latency[0] + streaming[0], relu, rel_tol=1e-3)
        eager = sum(pk.memory_time(pk.layer_bytes(k, shape, "bfloat16"), H100) for k in interactive.CHAIN)
        fused = pk.memory_time(pk.chain_bytes(list(interactive.CHAIN), shape, "bfloat16", fused=True), H100)
        assert math.isclose(latency[-2] + streaming[-2], eager, rel_tol=1e-3)
        assert math.isclose(latency[-1] + streaming[-1], fused, rel_tol=1e-3)
        assert math.isclose(latency[-2], 3 * pk.memory_time(0, H100), rel_tol=1e-3)  # three launches
        # the diamonds lie on the model's line
        xs, ys = data["x"][DIAMONDS], data["y"][DIAMONDS]
        assert all(math.isclose(y, pk.memory_time(x, H100), rel_tol=1e-3) for x, y in zip(xs, ys))
        assert f"N = {n}:" in layout["annotations[0].text"]


def test_small_batches_are_launch_bound_and_large_ones_are_not(figure):
    steps = _steps(figure)
    (first, first_layout), (last, last_layout) = _state(steps[0]), _state(steps[-1])
    assert "launch-bound" in first_layout["annotations[0].text"]
    assert "bandwidth-bound" in last_layout["annotations[0].text"]
    f_lat, f_stream = first["x"][LATENCY][0], first["x"][STREAMING][0]
    l_lat, l_stream = last["x"][LATENCY][0], last["x"][STREAMING][0]
    assert f_stream < f_lat and l_stream > 10 * l_lat
    assert f_lat == l_lat  # the fixed cost does not grow with the tensor
    # fusion gains the launches at N = 1 (nearly 3×), the bytes at N = 512 (about 2.3×)
    eager, fused = (first["x"][LATENCY][k] + first["x"][STREAMING][k] for k in (-2, -1))
    assert 2.5 < eager / fused < 3
    eager, fused = (last["x"][LATENCY][k] + last["x"][STREAMING][k] for k in (-2, -1))
    assert 2.2 < eager / fused < 2.5


def test_states_move_only_what_moves(figure):
    """The model's line and the measured points are drawn once; each state moves the diamonds and
    the bars, and restates the bars' labels rather than erasing them."""
    for step in _steps(figure):
        data, _ = _state(step)
        assert set(data) == {"x", "y", "text"}
        assert set(data["x"]) == {DIAMONDS, LATENCY, STREAMING}
        assert all(v is not None for v in data["x"].values()) and all(v is not None for v in data["y"].values())
        assert list(data["y"][STREAMING]) == [label for label, _ in interactive.LAYERS]
    traces = figure.figure.data
    assert len(traces[LINE].x) == 41 and all(math.isclose(y, pk.memory_time(x, H100), rel_tol=1e-3)
                                             for x, y in zip(traces[LINE].x, traces[LINE].y))


def test_measured_points_and_their_source():
    acts = _as_measured(memory.predicted_activations(H100))
    fig = interactive.time_vs_bytes({"activation_sizes": acts, "pool_sizes": None})
    title = heading_text(fig)
    assert "recorded on NVIDIA H100 80GB HBM3" in title and "model of H100-SXM" in title
    assert "(model only)" not in title
    traces = fig.figure.data
    assert len(traces[ACTS].x) == len(acts) and len(traces[BN].x) == 0  # activations; no batch norm
    assert math.isclose(traces[ACTS].y[0], acts["time_s"].iloc[0], rel_tol=1e-3)
    assert traces[ACTS].showlegend and not traces[POOLS].showlegend
    assert html_bytes(fig) < MAX_HTML_BYTES


def test_the_frames_gpu_is_the_one_modelled():
    a100 = pk.device_spec("A100-SXM4-80GB")
    acts = _as_measured(memory.predicted_activations(a100), {**GPU_META, "device": a100.name,
                                                             "device_name": "NVIDIA A100-SXM4-80GB"})
    fig = interactive.time_vs_bytes({"activation_sizes": acts})
    assert "model of A100" in heading_text(fig)


def test_bad_input():
    acts = memory.predicted_activations(H100)
    with pytest.raises(LookupError, match="activation_sizes"):
        interactive.time_vs_bytes({"gemm": acts})
    with pytest.raises(ValueError, match="CPU"):
        interactive.time_vs_bytes({"activation_sizes": framed(acts, CPU_META)})
    with pytest.raises(ValueError, match="columns"):
        interactive.time_vs_bytes({"batchnorm_sizes": acts})
    with pytest.raises(TypeError, match="frames"):
        interactive.time_vs_bytes(acts)
    with pytest.raises(TypeError, match="DataFrame"):
        interactive.time_vs_bytes({"activation_sizes": [1, 2]})
    with pytest.raises(TypeError, match="spec"):
        interactive.time_vs_bytes(spec="H100-SXM")
    with pytest.raises(ValueError, match="batches"):
        interactive.time_vs_bytes(batches=[8])
    with pytest.raises(ValueError, match="batches"):
        interactive.time_vs_bytes(batches=[8, 0])
    with pytest.raises(ValueError, match="active"):
        interactive.time_vs_bytes(active=99)


# ------------------------------------------------------------------------------ the problems
def _status(ex_id, value):
    return exercises.check(ex_id, value)


def test_problem_ids_and_chapter():
    assert [e.id for e in exercises.all_exercises("06_memory_limited")] == [f"memory-{k}" for k in range(1, 6)]


def test_memory_1_gelu_beside_its_gemm():
    h = H100
    gelu = sum(pk.predict_layer_time("gelu", (8, 1024, 16384), "bfloat16", h, pass_=p)
               for p in ("forward", "backward"))
    gemms = sum(pk.predict_gemm_time(*g, "bfloat16", h) for g in pk.linear_gemms(8192, 4096, 16384).values())
    assert math.isclose(exercises.answer("memory-1"), gelu / gemms, rel_tol=1e-9)
    assert 0.05 < gelu / gemms < 0.2
    wrong_width = _status("memory-1", exercises.answer("memory-1") / 4)
    assert wrong_width.status == "wrong"
    forward_only = _status("memory-1", gelu / pk.predict_gemm_time(*pk.linear_gemms(8192, 4096, 16384)["forward"],
                                                                   "bfloat16", h))
    assert forward_only.status == "wrong" and "three GEMMs" in forward_only.message


def test_memory_2_the_knee_batch_is_exact():
    n = exercises.answer("memory-2")
    knee = pk.gemm_model.DEFAULT_MODEL.latency_s * pk.achievable_ceilings(pk.device_spec("H200")).bandwidth
    per_image = pk.layer_bytes("relu", (1, 64, 56, 56), "bfloat16")
    assert isinstance(n, int) and n * per_image < knee <= (n + 1) * per_image
    assert _status("memory-2", n + 1).status == "close"  # integers: exact or not right
    h100 = _status("memory-2", 18)
    assert h100.status == "wrong" and "H100" in h100.message
    inputs_only = _status("memory-2", 53)
    assert inputs_only.status == "wrong" and "both tensors" in inputs_only.message


def test_memory_3_persistent_batch_norm():
    us = exercises.answer("memory-3")
    shape = (256, 64, 56, 56)
    fwd, bwd = (pk.layer_bytes("batchnorm", shape, "bfloat16", pass_=p, persistent=False)
                - pk.layer_bytes("batchnorm", shape, "bfloat16", pass_=p) for p in ("forward", "backward"))
    # the latencies cancel: the saving is the extra bytes at the achievable bandwidth
    assert math.isclose(us, 1e6 * (fwd + bwd) / pk.achievable_ceilings(H100).bandwidth, rel_tol=1e-6)
    forward_only = _status("memory-3", 1e6 * fwd / pk.achievable_ceilings(H100).bandwidth)
    assert forward_only.status == "wrong" and "backward" in forward_only.message
    assert _status("memory-3", us * 2).status == "wrong"


def test_memory_4_smaller_indices():
    assert math.isclose(exercises.answer("memory-4"), 100 / 3, rel_tol=1e-9)  # 4.5 → 3 bytes per element
    indices_alone = _status("memory-4", 75)
    assert indices_alone.status == "wrong" and "indices alone" in indices_alone.message
    assert _status("memory-4", 66.7).status == "wrong"  # what is left, not what is saved


def test_memory_5_fusion_saves_launches_and_bytes():
    us = exercises.answer("memory-5")
    launches = 1e6 * 2 * pk.memory_time(0, H100)  # four kernels become two
    bytes_only = exercises.get("memory-5").mistakes[0][0]()
    assert math.isclose(us, launches + bytes_only, rel_tol=1e-6)
    slip = _status("memory-5", round(bytes_only, 1))
    assert slip.status == "wrong" and "kernels" in slip.message
    assert _status("memory-5", launches).status == "wrong"


# ------------------------------------------------------------------------------ the verdicts
ALL = ("activation_sizes", "batchnorm_sizes", "pool_sizes", "fusion_chains", "convnet_breakdown",
       "ceiling_copy")


def test_no_frames_no_data_yet():
    for frames in ({}, dict.fromkeys(ALL)):
        table = pk.book.verdict.verdict_table(verdict.findings(frames))
        assert len(table) == 10
        assert (table["now"] == "—").all() and (table["then"] == "—").all()
        assert (table["verdict"] == "no data yet").all()


def test_frames_runs_here_and_holds_no_cpu_frame():
    frames = verdict.frames()
    assert set(frames) == set(ALL)
    for frame in frames.values():
        assert frame is None or (frame.attrs.get("meta") or {}).get("device_kind") != "cpu"
    verdict.findings(frames)


@pytest.fixture(scope="module")
def model_frames():
    """Frames whose 'measurements' are the models' own predictions on an H100."""
    return {"activation_sizes": _as_measured(memory.predicted_activations(H100)),
            "fusion_chains": _as_measured(fusion.predicted_chains(H100)),
            "convnet_breakdown": _as_measured(convnet.predicted_breakdown(H100))}


def test_known_effects_give_the_expected_verdicts(model_frames):
    e = verdict.effects(model_frames)
    assert math.isclose(e["spread"], 1.0, rel_tol=1e-3)  # every op and pass on one line
    assert math.isclose(e["near_copy"], 1.0, rel_tol=0.01)  # the model streams at the achievable bandwidth
    assert 5 < e["knee_mb"] < 20  # the H100's knee is 15 MB: the fit finds the floor near it
    share = convnet.memory_share(model_frames["convnet_breakdown"]).set_index("network")
    assert math.isclose(e["small_share"], share.loc["small", "predicted_memory_share"], rel_tol=1e-9)
    assert math.isclose(e["share_ratio"], share.loc["small", "predicted_memory_share"]
                        / share.loc["wide", "predicted_memory_share"], rel_tol=1e-9)
    assert math.isclose(e["fusion_realised"], 1.0, rel_tol=1e-9)  # the saving is the predicted one
    saved = fusion.fusion_savings(model_frames["fusion_chains"])
    both = saved[saved["phase"] == "forward+backward"]
    assert math.isclose(e["fusion_gain"], both["predicted_speedup"].median(), rel_tol=1e-9)
    verdicts = pk.book.verdict.verdict_table(verdict.findings(model_frames)).set_index("rule")["verdict"]
    assert verdicts["Time is bytes"] == "holds"
    assert verdicts["Large tensors stream at copy speed"] == "holds"
    assert verdicts["Small tensors are launch-bound"] == "holds"
    assert verdicts["Memory-bound layers matter in small networks"] == "holds"  # 40 %
    assert verdicts["… more than in larger networks"] == "weaker"  # 40 % ÷ 33 %: 1.2×
    assert verdicts["Bytes saved predict time saved"] == "holds"
    assert verdicts["Persistent batch norm"] == "no data yet"  # no batchnorm_sizes frame
    assert verdicts["Pooling is memory-bound"] == "no data yet"


def test_half_the_bandwidth_is_weaker_and_a_slow_op_breaks_the_line(model_frames):
    acts = model_frames["activation_sizes"].copy()
    acts.attrs = model_frames["activation_sizes"].attrs
    gelu = acts["op"] == "gelu"
    acts.loc[gelu, "time_s"] = pk.memory_time(0, H100) + acts.loc[gelu, "bytes"] / (
        0.3 * pk.achievable_ceilings(H100).bandwidth)
    e = verdict.activation_effects(acts, pk.achievable_ceilings(H100).bandwidth)
    assert math.isclose(e["spread"], 0.3, rel_tol=0.05)
    table = pk.book.verdict.verdict_table(verdict.findings({"activation_sizes": acts})).set_index("rule")
    assert table.loc["Time is bytes", "verdict"] == "gone"


@pytest.fixture(scope="module")
def cpu_runs():
    """Tiny live CPU runs of the chapter's memory experiments."""
    return {"batchnorm_sizes": memory.batchnorm_sizes(device="cpu", shapes=[(1, 8, 8, 8), (2, 8, 16, 16)],
                                                      progress=False),
            "pool_sizes": memory.pool_sizes(device="cpu", shapes=[(1, 8, 16, 16), (2, 8, 32, 32)],
                                            windows=["2×2/2"], progress=False)}


def test_cpu_frames_are_never_now(cpu_runs):
    assert all(f.attrs["meta"]["device_kind"] == "cpu" for f in cpu_runs.values())
    table = pk.book.verdict.verdict_table(verdict.findings(cpu_runs))
    assert (table["verdict"] == "no data yet").all()
    assert verdict.spec_of(cpu_runs["pool_sizes"]) is None


def test_batch_norm_and_pooling_effects_from_frames(cpu_runs):
    """The CPU runs relabelled as a GPU's, with a copy ceiling of 20 GB/s: the verdict's numbers
    are the chapter's analysis functions applied to them."""
    frames = {name: framed(f, GPU_META) for name, f in cpu_runs.items()}
    frames["ceiling_copy"] = framed({"gbps": [12.0, 20.0]}, GPU_META)
    e = verdict.effects(frames)
    bn = frames["batchnorm_sizes"]
    speed = memory.layout_speedup(bn)
    largest = speed[(speed["elements"] == speed["elements"].max()) & (speed["pass"] == "forward+backward")]
    assert math.isclose(e["nhwc_gain"], largest["speedup"].iloc[0], rel_tol=1e-9)
    assert math.isclose(e["bn_saving"], memory.batchnorm_bytes(bn, 20e9)["two_pass_ratio"].max(), rel_tol=1e-9)
    fits = memory.bandwidth_fit(frames["pool_sizes"], ["kind", "window", "pass"], ceiling=20e9)
    want = fits["fraction"].median()
    assert (e["pool_fraction"] is None) == bool(np.isnan(want))
    if e["pool_fraction"] is not None:
        assert math.isclose(e["pool_fraction"], want, rel_tol=1e-9)


def test_the_copy_ceiling():
    copy = framed({"gbps": [2500.0, 3100.0]}, GPU_META)
    acts = _as_measured(memory.predicted_activations(H100))
    assert verdict.copy_ceiling(copy, acts)[0] == 3100e9
    bandwidth, source = verdict.copy_ceiling(None, acts)
    assert bandwidth == pk.achievable_ceilings(H100).bandwidth and source
    assert verdict.copy_ceiling(framed(copy, CPU_META), None) == (None, None)  # a CPU's copy is no GPU's
    assert verdict.copy_ceiling(None, None) == (None, None)
    with pytest.raises(TypeError, match="frames"):
        verdict.findings([1, 2])
    with pytest.raises(TypeError, match="DataFrame"):
        verdict.findings({"activation_sizes": "recorded"})



# ------------------------------------------------------------------------------ what the chapter shows
def test_analyses_are_none_in_none_out():
    assert memory.bandwidth_fit(None, ["op", "pass"], ceiling=1e9) is None
    assert memory.layout_speedup(None) is None and memory.layout_speedup(None, largest=True) is None
    assert memory.batchnorm_bytes(None, 1e9) is None
    assert fusion.fusion_savings(None) is None and convnet.memory_share(None) is None
    assert memory.for_reader(None) is None
    assert isinstance(pk.table(memory.for_reader(memory.bandwidth_fit(None)), "no recording"), pk.display.Note)


def test_batchnorm_bytes_without_a_ceiling_is_none(cpu_runs):
    assert memory.batchnorm_bytes(cpu_runs["batchnorm_sizes"], None) is None
    assert len(memory.batchnorm_bytes(cpu_runs["batchnorm_sizes"], 20e9))


def test_layout_speedup_of_the_largest_size(cpu_runs):
    bn = cpu_runs["batchnorm_sizes"]
    every, largest = memory.layout_speedup(bn), memory.layout_speedup(bn, largest=True)
    assert set(largest["elements"]) == {bn["elements"].max()}
    assert set(largest["pass"]) == {"forward", "backward", "forward+backward"}
    pd.testing.assert_frame_equal(largest, every[every["elements"] == every["elements"].max()]
                                  .reset_index(drop=True))


def test_for_reader_names_columns_with_units():
    fits = memory.bandwidth_fit(_as_measured(memory.predicted_activations(H100)), ["op", "pass"],
                                ceiling=pk.achievable_ceilings(H100).bandwidth)
    out = memory.for_reader(fits, ["op", "pass", "floor_s", "gbps", "fraction", "knee_bytes"], seconds="µs")
    assert list(out.columns) == ["op", "pass", "floor (µs)", "GB/s", "% of copy ceiling", "knee (MB)"]
    np.testing.assert_allclose(out["floor (µs)"], fits["floor_s"] * 1e6)
    np.testing.assert_allclose(out["% of copy ceiling"], fits["fraction"] * 100)
    np.testing.assert_allclose(out["knee (MB)"], fits["knee_bytes"] / 1e6)
    share = memory.for_reader(convnet.memory_share(convnet.predicted_breakdown(H100)), seconds="ms")
    assert "model: layers (ms)" in share and share["model: memory-bound (%)"].between(0, 100).all()
    saved = memory.for_reader(fusion.fusion_savings(fusion.predicted_chains(H100)), ["compile_s", "eager_s"],
                              seconds={"eager_s": "ms"})
    assert list(saved.columns) == ["compile (s)", "eager (ms)"]  # compiling takes seconds: left in s


def test_cpu_ceiling_and_copy_frame():
    assert verdict.cpu_ceiling(H100) == (None, None)  # a GPU's copy ceiling is not a CPU's line
    cpu = pk.current_device()
    if cpu.kind == "cpu":
        bandwidth, source = verdict.cpu_ceiling(cpu)
        assert bandwidth == cpu.mem_bandwidth and (source is None or isinstance(source, str))
        # no GPU here and no GPU frame: no copy ceiling to load
        assert verdict.copy_frame(cpu) is None and verdict.copy_frame(cpu, None) is None
    with pytest.raises(TypeError, match="DeviceSpec"):
        verdict.cpu_ceiling("H100-SXM")
