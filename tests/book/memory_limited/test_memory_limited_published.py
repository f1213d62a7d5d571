"""Published memory-bound measurements against the byte model (perfkit.book.memory_limited.published,
perfkit.book.timing.published), their figures, and the byte model's kinds they need
(rmsnorm, cast, a layer norm that reads its rows twice).

The analysis is checked on hand-made frames whose "measured" times are the model's own (known
answers); the checks that read the published tables skip without them. No test times anything:
the targets (byte-model errors) are printed by scripts/validate_memory_published.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.memory_limited import published as mp
from perfkit.book.timing import published as tp
from perfkit.book.figures import BookFigure
from figure_helpers import note_of
from testkit import A100, H100, framed, heading_text

H200 = pk.device_spec("H200")


def _needs(source: str) -> pd.DataFrame:
    if not pk.published_data.has_published(source):
        pytest.skip(pk.published_data.HOW_TO_GET)
    return pk.published(source)


# ------------------------------------------------------------------------------ the byte model's new kinds
def test_rmsnorm_cast_and_a_layer_norm_that_reads_twice():
    shape, s = (2048, 4096), 2
    E, rows, D = 2048 * 4096, 2048, 4096
    assert pk.layer_bytes("rmsnorm", shape, "bfloat16") == 2 * E * s + D * 4 + rows * 4  # weight; 1/rms
    assert pk.layer_bytes("rmsnorm", shape, "bfloat16", pass_="backward") == 3 * E * s + 2 * D * 4 + rows * 4
    assert pk.layer_bytes("rmsnorm", shape, "bfloat16", training=False, elementwise_affine=False) == 2 * E * s
    ln = pk.layer_bytes("layernorm", shape, "float32")
    assert pk.layer_bytes("layernorm", shape, "float32", persistent=False) == ln + E * 4  # x read again
    assert pk.layer_bytes("rmsnorm", shape, "bfloat16", persistent=False) == \
        pk.layer_bytes("rmsnorm", shape, "bfloat16") + E * s
    # a cast reads one dtype and writes another; backward the other way round
    assert pk.layer_bytes("cast", shape, "bfloat16") == E * (2 + 4)  # default: to float32
    assert pk.layer_bytes("cast", shape, "float32", to="bfloat16") == E * (4 + 2)
    assert pk.layer_bytes("cast", shape, "bfloat16", pass_="backward", to="float32") == E * (4 + 2)
    # fused chains: a norm that reads its rows twice does so fused too; a cast changes the dtype
    fused = pk.chain_bytes(["add", "rmsnorm"], shape, "float32", fused=True)
    assert fused == 2 * E * 4 + E * 4 + D * 4 + rows * 4
    assert pk.chain_bytes([("rmsnorm", {"persistent": False}), "relu"], shape, "float32", fused=True) == \
        pk.chain_bytes(["rmsnorm", "relu"], shape, "float32", fused=True) + E * 4
    with pytest.raises(ValueError, match="shape or dtype"):
        pk.chain_bytes(["cast", "relu"], shape, "bfloat16")
    with pytest.raises(ValueError, match="dtype"):
        pk.layer_bytes("cast", shape, "bfloat16", to="float17")
    with pytest.raises(TypeError, match="persistent"):
        pk.layer_bytes("rmsnorm", shape, "bfloat16", persistent="no")


# ------------------------------------------------------------------------------ what each provider runs
def test_provider_kernels_follow_the_chain_model():
    rows, hidden = 8192, 4096
    shape, E = (rows, hidden), rows * hidden
    mul = ("elementwise", {"read_elements": 2 * E})
    eager = mp.provider_kernels("megatron_swiglu", "torch", rows, hidden, "bfloat16")
    assert [w for w, _ in eager] == ["silu(gate)", "· * up"]
    assert sum(b for _, b in eager) == pk.chain_bytes(["silu", mul], shape, "bfloat16") == 5 * E * 2
    (_, fused), = mp.provider_kernels("megatron_swiglu", "liger", rows, hidden, "bfloat16")
    assert fused == pk.chain_bytes(["silu", mul], shape, "bfloat16", fused=True) == 3 * E * 2
    assert mp.provider_kernels("megatron_swiglu", "megatron", rows, hidden, "bfloat16") is None  # unknown fuser
    relu2 = mp.provider_kernels("relu_squared", "torch", rows, hidden, "bfloat16")
    assert sum(b for _, b in relu2) == pk.chain_bytes(["relu", "elementwise"], shape, "bfloat16") == 4 * E * 2
    (_, add_rms), = mp.provider_kernels("fused_add_rms_norm", "liger_fused_add_rms_norm", rows, hidden, "float32")
    assert add_rms == 4 * E * 4 + hidden * 4 + rows * 4  # x, residual read; y, residual written
    # Hugging Face's RMS norm in bfloat16: upcasts, five float32 passes, a float32 result
    hf = mp.provider_kernels("rms_norm", "huggingface", rows, hidden, "bfloat16")
    assert len(hf) == 8 and sum(b for _, b in hf) / E == pytest.approx(38, rel=1e-3)
    add_hf = mp.provider_kernels("fused_add_rms_norm", "huggingface", rows, hidden, "float32")
    assert len(add_hf) == 7 and sum(b for _, b in add_hf) / (E * 4) == pytest.approx(10, rel=1e-3)  # casts: no-ops
    (_, ln), = mp.provider_kernels("layer_norm", "huggingface", rows, hidden, "float32")
    assert ln == pk.layer_bytes("layernorm", shape, "float32", persistent=False)
    with pytest.raises(LookupError, match="knows no provider"):
        mp.provider_kernels("layer_norm", "apex", rows, hidden, "float32")


def _model_as_measured(spec=H100) -> pd.DataFrame:
    """Liger's sweep shapes with the model's times as the 'measured' ones: every ratio is known."""
    fwd = mp.liger_forward(None, model=spec)
    frame = fwd[["device", "kernel", "provider", "dtype", "rows", "hidden"]].assign(
        mode="forward", time_s=fwd["predicted_s"], time_s_p20=fwd["predicted_s"], time_s_p80=fwd["predicted_s"])
    return framed(frame[frame["time_s"].notna()].reset_index(drop=True), published_by="a test",
                  published_date="2026", device_name=spec.name, timing="none")


def test_liger_forward_and_pairs_on_known_times():
    frame = _model_as_measured()
    fwd = mp.liger_forward(frame)
    assert fwd["error"].abs().max() < 1e-12 and set(fwd["role"]) == {"fused", "eager"}
    assert (fwd["fraction"] < 1).all() and pk.source_of(fwd).by == "a test"
    assert set(fwd.loc[fwd["twin"], "provider"]) == {"liger_in_place", "megatron"}
    pairs = mp.fusion_pairs(fwd)
    assert {(k, e) for k, e in zip(pairs["kernel"], pairs["eager"])} == set(mp.PAIRS)
    assert np.allclose(pairs["ratio"], pairs["predicted_ratio"]) and pairs["error"].abs().max() < 1e-12
    assert pairs.groupby(["kernel", "eager"])["largest"].sum().eq(1).all()
    big = pairs[pairs["largest"]].set_index(["kernel", "eager"])
    # at the largest size the time ratio is close to the bytes ratio: launches no longer count
    assert np.allclose(big["predicted_ratio"], big["bytes_ratio"], rtol=0.05)
    assert big.loc[("layer_norm", "huggingface"), "bytes_ratio"] == pytest.approx(1.5, rel=1e-3)
    assert big.loc[("megatron_swiglu", "torch"), "bytes_ratio"] == pytest.approx(5 / 3)
    # the one-number functions read the same
    assert mp.fusion_ratio_measured(frame, "relu_squared", H100) == pytest.approx(
        mp.fusion_ratio_predicted(frame, "relu_squared", H100))
    assert mp.fusion_ratio_measured(frame, "fused_add_rms_norm", "H100-SXM", eager="liger_rms_norm") == \
        pytest.approx(big.loc[("fused_add_rms_norm", "liger_rms_norm"), "ratio"])
    assert mp.byte_model_error(frame, H100) == pytest.approx(0, abs=1e-12)
    assert mp.fusion_saving_realised(frame, H100) == pytest.approx(1)
    assert 0 < mp.bandwidth_spread(frame, H100) <= 1
    fraction = mp.achieved_fraction_of_bandwidth(frame, H100)
    assert fraction == pytest.approx(fwd.loc[fwd["role"] == "fused", "fraction"].max())
    assert mp.achieved_fraction_of_bandwidth(frame, H100, ceiling=H100.mem_bandwidth / 2) == pytest.approx(2 * fraction)


def test_without_data_the_model_or_none():
    assert mp.liger_forward(None) is None and mp.fusion_pairs(None) is None
    for fn in (mp.achieved_fraction_of_bandwidth, mp.bandwidth_spread, mp.byte_model_error, mp.fusion_saving_realised):
        assert fn(None, H100) is None
    assert mp.fusion_ratio_measured(None, "layer_norm", H100) is None
    assert mp.fusion_ratio_predicted(None, "layer_norm", H100) is None
    model = mp.liger_forward(None, model=A100)
    assert model["time_s"].isna().all() and model["predicted_s"].notna().sum() > 50
    assert model.attrs["model_of"] == "A100-SXM4-80GB" and "meta" not in model.attrs
    assert mp.stream_occupancy(None) is None
    flat = mp.stream_occupancy(None, model=True)
    assert list(dict.fromkeys(flat["device"])) == list(mp.GENERATIONS) and flat["gbps"].isna().all()
    assert mp.stream_peak_fraction(None, "H200") is None and mp.occupancy_for_fraction(None, "H200") is None
    for fn in (tp.launch_floor_s, tp.launch_bound_bytes, tp.l2_plateau_gbps, tp.hbm_plateau_gbps):
        assert fn(None) is None
    assert tp.small_kernel_sweep(None) is None and tp.small_kernel_summary(None) is None
    curve = tp.predicted_small_kernels(H200)
    assert curve["predicted_s"].is_monotonic_increasing and curve.attrs["model_of"] == "H200"


def test_bad_input():
    with pytest.raises(TypeError, match="model"):
        mp.liger_forward(None, model="H100-SXM")
    with pytest.raises(TypeError, match="frame"):
        mp.liger_forward([1, 2])
    with pytest.raises(ValueError, match="columns"):
        mp.liger_forward(pd.DataFrame({"kernel": ["layer_norm"]}))
    with pytest.raises(ValueError, match="kernel"):
        mp.fusion_ratio_measured(_model_as_measured(), "softmax", H100)
    with pytest.raises(LookupError):
        mp.byte_model_error(_model_as_measured(), "Z100")
    with pytest.raises(ValueError, match="of_peak"):
        mp.occupancy_for_fraction(None, "H200", of_peak=1.5)
    with pytest.raises(TypeError, match="spec"):
        tp.predicted_small_kernels("H200")
    with pytest.raises(TypeError, match="frame"):
        tp.small_kernel_sweep("h200.txt")
    with pytest.raises(ValueError, match="variant"):
        tp.launch_floor_s(_small(), "cooperative")
    with pytest.raises(LookupError, match="variants"):
        tp.launch_floor_s(_small(), "persistent_gsync")


# ------------------------------------------------------------------------------ small kernels, known answers
def _small(floor_s: float = 2e-6, bw: float = 3e12, l2: float = H200.l2_bytes) -> pd.DataFrame:
    """A made-up H200 sweep: time = floor + bytes ÷ bandwidth (twice as fast inside the L2), two block
    sizes (the slower one 10 % slower), 'launch' and 'graph' (half the floor)."""
    rows = []
    for variant, floor in (("launch", floor_s), ("graph", floor_s / 2)):
        for b in np.geomspace(64e3, 2e9, 60):
            t = floor + b / (2 * bw if b <= l2 else bw)
            for block, slow in ((256, 1.0), (1024, 1.1)):
                rows.append({"device": "H200", "variant": variant, "bytes_moved": b, "block_size": block,
                             "time_s": t * slow, "gbps": b / (t * slow) / 1e9})
    return pd.DataFrame(rows)


def test_small_kernel_numbers_on_a_known_sweep():
    frame = _small()
    sweep = tp.small_kernel_sweep(frame)
    assert (sweep["block_size"] == 256).all() and len(sweep) == 120
    assert tp.launch_floor_s(frame) == pytest.approx(2e-6, rel=0.05)  # the bytes add nanoseconds
    assert tp.launch_floor_s(sweep, "graph") == pytest.approx(1e-6, rel=0.05)
    bound = tp.launch_bound_bytes(frame)  # time < 2 × floor: bytes < floor × 6e12 B/s in the L2
    assert 0.8 * 12e6 < bound <= 12e6
    in_l2 = [b for b in np.geomspace(64e3, 2e9, 60) if b <= H200.l2_bytes]
    assert tp.l2_plateau_gbps(frame, "launch") == pytest.approx(max(b / (2e-6 + b / 6e12) / 1e9 for b in in_l2))
    assert tp.hbm_plateau_gbps(frame, "launch") == pytest.approx(3000, rel=0.01)
    summary = tp.small_kernel_summary(frame).set_index("variant")
    assert list(summary.index) == ["launch", "graph"]
    assert summary.loc["graph", "launch_bound_bytes"] < summary.loc["launch", "launch_bound_bytes"]
    assert summary.loc["launch", "hbm_fraction"] == pytest.approx(3000e9 / H200.mem_bandwidth, rel=0.01)


# ------------------------------------------------------------------------------ the published tables
def test_liger_published():
    liger = _needs("liger_memory_bound")
    fwd = mp.liger_forward(liger)
    assert set(fwd["device"]) == {"H100-SXM", "A100-SXM4-80GB"}
    assert (fwd.loc[fwd["kernels"].notna(), "fraction"] < 1).all()  # no kernel beats the datasheet
    assert fwd.loc[fwd["provider"] == "megatron", "bytes"].isna().any()  # Megatron's SwiGLU: unknown
    pairs = mp.fusion_pairs(fwd)
    top = pairs[pairs["largest"]]
    assert len(top) == len(mp.PAIRS) + 1  # layer norm on both GPUs
    assert (top["ratio"] > 1).all() and (top["predicted_ratio"] > 1).all()
    for gpu in (H100, A100):
        assert 0.5 < mp.achieved_fraction_of_bandwidth(liger, gpu) < 1
        assert 0 < mp.bandwidth_spread(liger, gpu) <= 1
        assert mp.byte_model_error(liger, gpu) >= 0
    assert mp.fusion_ratio_measured(liger, "layer_norm", "H100-SXM") == pytest.approx(
        top.set_index(["device", "kernel"]).loc[("H100-SXM", "layer_norm"), "ratio"])


def test_stream_published():
    stream = _needs("gpu_benches_stream")
    occ = mp.stream_occupancy(stream)
    assert list(dict.fromkeys(occ["device"])) == list(mp.GENERATIONS)
    assert (occ["gbps_low"] <= occ["gbps"]).all() and (occ["gbps"] <= occ["gbps_high"]).all()
    assert (occ["fraction"] < 1).all() and occ["occupancy_pct"].between(0, 100).all()
    assert "NVIDIA H200" in str(pk.source_of(occ)) and "(README" not in str(pk.source_of(occ))
    for gpu in mp.GENERATIONS:
        assert 0 < mp.stream_peak_fraction(stream, gpu) < 1
        assert 0 < mp.occupancy_for_fraction(stream, gpu) <= 100
        assert mp.occupancy_for_fraction(stream, gpu, 0.5) <= mp.occupancy_for_fraction(stream, gpu, 0.9)
    with pytest.raises(LookupError, match="kernels"):
        mp.stream_occupancy(stream, kernel="copy")


def test_small_kernels_published():
    small = _needs("gpu_benches_small_kernels")
    summary = tp.small_kernel_summary(small).set_index("variant")
    assert list(summary.index) == list(tp.VARIANTS)
    assert summary.loc["graph", "floor_s"] < summary.loc["launch", "floor_s"]  # a graph skips the CPU launch
    assert (summary["l2_gbps"] > summary["hbm_gbps"]).all()
    assert (summary["hbm_fraction"] < 1).all() and (summary["floor_s"] > 0).all()
    assert tp.launch_floor_s(small) == pytest.approx(summary.loc["launch", "floor_s"])


# ------------------------------------------------------------------------------ the figures
def test_figures_draw_published_model_and_nothing():
    frame = _model_as_measured()
    fwd = mp.liger_forward(frame)
    model = mp.liger_forward(None, model=H100)
    small = tp.small_kernel_sweep(_small())
    cases = [(pk.book.memory_limited.plot_published_time_vs_bytes, fwd, model),
             (pk.book.memory_limited.plot_fusion_published, mp.fusion_pairs(fwd), mp.fusion_pairs(model)),
             (pk.book.memory_limited.plot_bandwidth_vs_occupancy, None, mp.stream_occupancy(None, model=True)),
             (pk.book.timing.plot_small_kernels, small.assign(device="H200"), tp.predicted_small_kernels(H200))]
    for plot, measured, predicted in cases:
        if measured is not None:
            fig = plot(measured, None if pk.source_of(measured) else "published by a test, measured on H200 (2026)")
            assert isinstance(fig, BookFigure) and "(model only)" not in heading_text(fig)
        fig = plot(predicted, instead="unused")
        assert isinstance(fig, BookFigure) and "model" in heading_text(fig)
        assert "(model only)" in heading_text(fig)
        text = note_of(plot(None, pk.provenance.missing("no table here"), instead="the model, above"))
        assert "No table here" in text and "the model, above" in text
    bare = mp.fusion_pairs(fwd)
    bare.attrs = {}
    with pytest.raises(ValueError, match="model_of"):
        pk.book.memory_limited.plot_fusion_published(bare)


def test_tables_for_the_page_keep_six_columns():
    """The page's column is about 800 px: six columns leave each wider than its longest word."""
    fwd = mp.liger_forward(_needs("liger_memory_bound"))
    fused = mp.bandwidth_table(fwd[fwd["role"] == "fused"])
    assert list(fused.columns) == ["GPU", "kernel", "MB moved (model)", "GB/s", "% of datasheet",
                                   "model error (%)"]
    assert len(fused) == 7 and fused["kernel"].str.startswith("Liger").all()  # one row per kernel and GPU
    assert fused["% of datasheet"].between(70, 95).all()
    pairs = mp.pairs_table(mp.fusion_pairs(fwd))
    assert list(pairs.columns) == ["GPU", "eager", "eager kernels", "measured (×)", "model (×)",
                                   "model error (%)"]
    assert mp.bandwidth_table(None) is None and mp.pairs_table(None) is None


def test_figures_of_the_published_tables():
    liger = _needs("liger_memory_bound")
    fig = pk.book.memory_limited.plot_published_time_vs_bytes(mp.liger_forward(liger))
    assert "Liger-Kernel" in heading_text(fig) and "do_bench" in heading_text(fig)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["H100-SXM", "A100-SXM4-80GB"]  # fastest memory first
    assert math.isclose(fig.axes[2].get_ylim()[1], 1.1 * H100.mem_bandwidth / 1e9)


def test_absent_tables_give_one_note_and_the_model(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFKIT_PUBLISHED", str(tmp_path))  # an empty published-data folder
    assert pk.published_or_none("liger_memory_bound") is None
    text = " ".join(str(pk.published_data.absent_note("liger_memory_bound", "gpu_benches_stream")).split())
    assert "liger_memory_bound, gpu_benches_stream are not here" in text
    assert " ".join(pk.published_data.HOW_TO_GET.split()) in text and "model's prediction" in text
    assert not hasattr(tp, "absent_note") and not hasattr(mp, "absent_note")  # one note, in perfkit.display
    curve = tp.small_kernel_sweep(pk.published_or_none("gpu_benches_small_kernels"), model=H200)
    assert curve["variant"].eq("model").all() and curve.attrs["model_of"] == "H200"
    with pytest.raises(LookupError, match="unknown published source"):
        pk.published_data.absent_note("liger")


def test_an_absent_note_is_none_when_the_tables_are_here():
    _needs("liger_memory_bound")
    assert pk.published_data.absent_note("liger_memory_bound") is None
