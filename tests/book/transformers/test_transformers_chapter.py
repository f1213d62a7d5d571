"""Chapter 07_transformers: the model's frames, the layer split, the effects the verdicts read, the
verdicts themselves and the figures. Everything here is computed from perfkit's models or from
made-up frames whose answers are known: nothing is timed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import transformers as tr
from perfkit.book.figures import BookFigure
from perfkit.book.transformers import analysis, verdict
from perfkit.display import Note
from testkit import H100, framed, heading_text


def _measured(frame: pd.DataFrame, meta: bool = True, **factors: float) -> pd.DataFrame:
    """``frame`` (a model frame) as if measured on an H100: ``time_s`` = ``predicted_s`` × the factor of
    each row's backend (attention) or 1, with GPU metadata if ``meta``."""
    out = frame.copy()
    scale = out["backend"].map(factors).fillna(1.0) if "backend" in out else 1.0
    out["time_s"] = out["predicted_s"] * scale
    return framed(out, {"device": "H100-SXM", "device_kind": "gpu", "live": False} if meta else {})


# --------------------------------------------------------------------------------------------
# The model's frames


def test_predicted_attention_is_the_model_row_by_row():
    frame = analysis.predicted_attention(H100, seqs=(512, 4096), backends=("math", "flash", "cudnn"))
    assert list(frame.columns) == list(tr.experiments.ATTENTION_COLUMNS)
    assert len(frame) == 3 * 2 * 2 and frame["time_s"].isna().all()
    row = frame.query("backend == 'flash' and seq == 4096 and causal").iloc[0]
    want = pk.predict_attention_time(1, 32, 4096, 4096, 128, spec=H100, dtype="bfloat16", causal=True,
                                     backend="flash")
    assert row["predicted_s"] == want.time_s and row["flops"] == pk.attention_flops(1, 32, 4096, 4096, 128,
                                                                                   causal=True)
    assert row["bytes_unfused"] == pk.attention_bytes(1, 32, 4096, 4096, 128, "bfloat16", fused=False)
    math_rows = frame.query("backend == 'math'").pivot_table(index="seq", columns="causal", values="predicted_s")
    assert (math_rows[True] == math_rows[False]).all()  # the math path computes every score, then masks
    fused = frame.query("backend == 'flash'").pivot_table(index="seq", columns="causal", values="predicted_s")
    # the mask skips half the score blocks, but the SMs are unevenly loaded: more than half the time is left
    assert (fused[True] <= fused[False]).all() and 0.5 < fused.loc[4096, True] / fused.loc[4096, False] < 0.65
    assert fused.loc[512, True] == fused.loc[512, False]  # 4 query blocks per head: the longest one decides
    # each fused backend is its own kernel: on Hopper cuDNN's is the fastest, then flash's
    at = frame.query("seq == 4096 and not causal").set_index("backend")["predicted_s"]
    assert at["cudnn"] < 0.6 * at["flash"]
    assert at["cudnn"] == pk.predict_attention_time(1, 32, 4096, 4096, 128, spec=H100, dtype="bfloat16",
                                                    backend="cudnn").time_s


def test_predicted_decode_counts_the_stack_it_names():
    model = tr.GPU_MODEL
    frame = analysis.predicted_decode(H100, batches=(1, 64))
    assert list(frame.columns) == list(tr.decoding.DECODE_COLUMNS) and len(frame) == 4
    for _, row in frame.iterrows():
        kv, b = int(row["kv_heads"]), int(row["batch"])
        params = model.params(kv)
        assert row["params"] == params
        assert row["bytes"] == pk.decode_step_bytes(params, b, 2048, layers=4, kv_heads=kv, head_dim=128,
                                                    dtype="bfloat16")
        assert row["predicted_s"] == pk.predict_decode_time(params, b, 2048, layers=4, kv_heads=kv, head_dim=128,
                                                            dtype="bfloat16", spec=H100, heads=32).time_s
    # by hand: one layer's weights, Q/K/V + output + SwiGLU
    assert model.params(32, layers=1) == 4096 * 96 * 128 + 4096 * 4096 + 3 * 4096 * 11008


def test_block_costs_split_a_layer_into_its_ops():
    block = analysis.block_costs(H100, seq=4096)
    assert list(block["kind"].value_counts().sort_index().items()) == [("GEMM", 4), ("attention", 1),
                                                                       ("memory-bound", 6)]
    assert math.isclose(block["share"].sum(), 1.0)
    qkv = block.set_index("op").loc["Q, K, V projection"]
    assert qkv["flops"] == 2 * 4096 * 4096 * 3 * 4096
    assert qkv["predicted_s"] == pk.explain_gemm(*pk.linear_gemms(4096, 4096, 3 * 4096)["forward"], "bfloat16",
                                                 H100).predicted_s
    attention = block.set_index("op").loc["attention (fused, causal)"]
    assert attention["predicted_s"] == pk.predict_attention_time(1, 32, 4096, 4096, 128, spec=H100,
                                                                 dtype="bfloat16", causal=True).time_s
    silu = block.set_index("op").loc["SiLU"]
    assert silu["bytes"] == pk.layer_bytes("silu", (4096, 11008), "bfloat16")
    # attention grows with the square of the sequence, the projections linearly
    share = {s: analysis.block_costs(H100, seq=s).set_index("kind").loc["attention", "share"] for s in (512, 32768)}
    assert share[512] < 0.05 < 0.3 < share[32768]
    gqa = analysis.block_costs(H100, seq=4096, kv_heads=8).set_index("op").loc["Q, K, V projection", "flops"]
    assert gqa == 2 * 4096 * 4096 * (32 + 16) * 128


def test_attention_kernels_are_the_unfused_prediction_term_by_term():
    for seq in (256, 8192):
        t = analysis.attention_kernels(H100, seq)
        unfused = pk.predict_attention_time(1, 32, seq, seq, 128, spec=H100, dtype="bfloat16", fused=False)
        assert t["QKᵀ"] + t["softmax"] + t["PV"] == pytest.approx(unfused.time_s)
        assert t["fused"] == pk.predict_attention_time(1, 32, seq, seq, 128, spec=H100, dtype="bfloat16").time_s
        assert t["softmax"] == pk.memory_time(pk.layer_bytes("softmax", (32, seq, seq), "bfloat16"), H100)
    with pytest.raises(ValueError, match="seq"):
        analysis.attention_kernels(H100, 0)


@pytest.mark.parametrize("call, param", [
    (lambda: analysis.block_costs(H100, seq=0), "seq"),
    (lambda: analysis.block_costs(H100, model="llama"), "model"),
    (lambda: analysis.block_costs(H100, kv_heads=-1), "kv_heads"),
    (lambda: analysis.predicted_attention(H100, backends=("flashy",)), "backends"),
    (lambda: analysis.predicted_attention(H100, seqs=()), "seqs"),
    (lambda: analysis.predicted_attention(H100, causal=("yes",)), "causal"),
    (lambda: analysis.predicted_decode(H100, batches=(0,)), "batches"),
    (lambda: analysis.predicted_decode(H100, context=0), "context"),
    (lambda: analysis.predicted_decode("no such GPU"), "spec"),
])
def test_bad_input_names_the_parameter(call, param):
    with pytest.raises((TypeError, ValueError, LookupError), match=param if param != "spec" else "GPU|device"):
        call()


# --------------------------------------------------------------------------------------------
# The effects, on frames whose answers are known


def test_fusion_and_causal_effects_read_the_longest_sequence_and_the_best_fused_backend():
    model = analysis.predicted_attention(H100, seqs=(1024, 4096), backends=("math", "flash", "efficient"))
    frame = _measured(model, math=3.0, efficient=2.0)  # flash is the fastest fused backend
    longest = frame[frame["seq"] == 4096].pivot_table(index="causal", columns="backend", values="time_s")
    assert analysis.fusion_speedup(frame) == pytest.approx(float((longest["math"] / longest["flash"]).median()))
    best = analysis.best_fused(frame)
    assert set(best["backend"]) == {"flash"} and len(best) == 4
    t = best[best["seq"] == 4096].set_index("causal")["time_s"]
    assert analysis.causal_speedup(frame) == pytest.approx(t[False] / t[True])
    assert analysis.fusion_speedup(frame[frame["backend"] != "math"]) is None  # nothing unfused to compare
    assert analysis.causal_speedup(frame[~frame["causal"]]) is None
    assert analysis.fusion_speedup(None) is None and analysis.best_fused(model) is None  # nothing measured


def test_head_dim_gain_compares_flop_rates():
    frame = _measured(analysis.predicted_attention(H100, seqs=(4096,), head_dims=(64, 80, 128), causal=(False,)))
    model_gain = analysis.head_dim_gain(frame)
    # the best fused backend (cuDNN on Hopper) runs d = 80 as its d = 128 kernel: same time, 80/128 of the FLOPs
    assert analysis.best_fused(frame.query("head_dim == 80"))["backend"].tolist() == ["cudnn"]
    assert model_gain == pytest.approx(128 / 80)
    slow = frame.copy()
    slow.loc[slow["head_dim"] == 80, "time_s"] *= 1.5  # d = 80 padded: 1.5× its FLOPs' time
    assert analysis.head_dim_gain(slow) == pytest.approx(1.5 * model_gain)
    assert analysis.head_dim_gain(slow, good=256) is None


def test_decode_effects():
    frame = _measured(analysis.predicted_decode(H100, batches=(1, 16, 64, 256)))
    at_1 = frame[frame["batch"] == 1]
    assert analysis.decode_fraction(frame, H100.mem_bandwidth) == pytest.approx(
        float((at_1["bytes"] / at_1["time_s"]).median() / H100.mem_bandwidth))
    assert analysis.decode_fraction(frame, H100.mem_bandwidth) == pytest.approx(0.9)  # achievable ÷ datasheet
    mha = frame[frame["kv_heads"] == 32].set_index("batch")["time_s"]
    assert analysis.batching_gain(frame) == pytest.approx(64 * mha[1] / mha[64])
    assert analysis.batching_gain(frame, batch=128) is None
    gqa = frame.pivot_table(index="batch", columns="kv_heads", values="time_s").loc[256]
    assert analysis.gqa_speedup(frame) == pytest.approx(gqa[32] / gqa[8])
    assert analysis.gqa_speedup(frame[frame["kv_heads"] == 32]) is None
    assert analysis.decode_fraction(frame, float("nan")) is None


# --------------------------------------------------------------------------------------------
# The verdicts


def test_verdicts_rest_on_gpu_frames_and_ignore_a_cpu_run():
    frames = {"attention_backends": _measured(analysis.predicted_attention(H100, seqs=(8192,)), math=1.0),
              "decode_steps": _measured(analysis.predicted_decode(H100, batches=(1, 64, 256)))}
    table = pk.book.verdict.verdict_table(verdict.findings(frames)).set_index("rule")
    assert list(table.index) == [f.rule for f in verdict.findings({})]
    fusion = table.loc["Fuse memory-bound chains (FlashAttention)"]
    assert fusion["evidence"] == "measured" and fusion["now_from"].startswith("ours, recorded on H100-SXM")
    assert fusion["now"] == f"{verdict.model_effects(H100)['fusion']:.2f}"
    assert table.loc["Dimensions a multiple of 64", "verdict"] == "no data yet"  # no head-dim frame
    assert (table["then"] == "—").all()
    cpu = framed(frames["decode_steps"], device="CPU (x86_64, 2 cores)", device_kind="cpu", live=True)
    effects = verdict.effects({"decode_steps": cpu})
    assert effects["batching"] is None and effects["gqa"] is None
    with pytest.raises(ValueError, match="unknown key"):
        verdict.effects({"decode": cpu})
    with pytest.raises(TypeError, match="frames"):
        verdict.effects([cpu])


def test_the_model_predicts_each_rule():
    m = verdict.model_effects(H100)
    assert set(m) == set(verdict.RULES) and all(v is not None for v in m.values())
    assert 4 < m["fusion"] < 9 and 1.8 < m["causal"] < 1.9 and m["head_dim"] == pytest.approx(1.6)
    assert m["decode_memory"] == pytest.approx(0.9) and 4 < m["batching"] < 16 and m["gqa"] > 2.5
    alt = verdict.alternatives({})
    assert list(alt) == list(verdict.RULES) and {e.kind for e in alt.values()} == {"model"}


# --------------------------------------------------------------------------------------------
# The figures


FIGURES = [(tr.plot_attention, lambda: analysis.predicted_attention(H100, seqs=(512, 2048))),
           (tr.plot_attention_memory, lambda: analysis.predicted_attention(H100, seqs=(512, 2048))),
           (tr.plot_head_dims, lambda: analysis.predicted_attention(H100, seqs=(4096,), head_dims=(64, 80, 128))),
           (tr.plot_decode, lambda: analysis.predicted_decode(H100, batches=(1, 8, 64)))]


@pytest.mark.parametrize("plot, frame", FIGURES, ids=[p.__name__ for p, _ in FIGURES])
def test_each_figure_draws_the_model_a_measurement_or_says_why_not(plot, frame):
    model = frame()
    note = plot(None, pk.provenance.missing("no recording"), instead="the H100 model, above")
    assert isinstance(note, Note) and "the H100 model, above" in note._repr_html_()
    drawn = plot(model, pk.provenance.modelled(H100))
    assert isinstance(drawn, BookFigure) and "model" in heading_text(drawn)
    figure = plot(_measured(model, meta=False, math=2.0), "a made-up GPU frame")
    assert isinstance(figure, BookFigure) and "(model only)" not in heading_text(figure)
    assert figure.to_png()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="source"):
        plot(model)  # a frame without metadata must say where its numbers come from


def test_figures_refuse_bad_arguments():
    frame = analysis.predicted_decode(H100, batches=(1, 8))
    with pytest.raises(ValueError, match="bandwidth"):
        tr.plot_decode(frame, "model", bandwidth=-1.0)
    with pytest.raises(TypeError, match="instead"):
        tr.plot_decode(frame, "model", instead=3)
    with pytest.raises(TypeError, match="source"):
        tr.plot_attention(analysis.predicted_attention(H100, seqs=(512,)), 5)


def test_the_cpu_rate_axis_is_in_gflops():
    frame = _measured(analysis.predicted_attention(H100, seqs=(512, 1024)), meta=False)
    frame["time_s"] = frame["flops"] / 20e9  # a CPU's 20 GFLOP/s
    fig = tr.plot_attention(frame, "slow")
    assert fig.axes[1].get_ylabel().startswith("GFLOP/s")
    assert np.allclose(fig.axes[1].lines[0].get_ydata(), 20.0)
