"""Chapter 07 (transformers) for the reader: its interactive figures and its problems
(perfkit.book.transformers.interactive, perfkit.book.transformers.problems)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes
from perfkit.book.transformers import decoding, interactive
from perfkit.book.transformers import problems
from figure_helpers import steps
from testkit import H100, V100, heading_text

P, LAYERS, HEADS, D = 6_740_000_000, 32, 32, 128  # LLaMA-2-7B
BF16 = 2  # bytes per bfloat16 value


def _achievable(spec=H100, dtype="bfloat16") -> tuple[float, float]:
    cl = pk.achievable_ceilings(spec)
    return cl.flop_s_for(dtype), cl.bandwidth


# ------------------------------------------------------------------------------ the figures
@pytest.fixture(scope="module")
def decode():
    return interactive.decode_roofline()


@pytest.fixture(scope="module")
def split():
    return interactive.attention_split()


def test_every_registered_figure_builds_with_its_defaults():
    assert set(interactive.FIGURES) == {"decode_roofline", "attention_split"}
    for name, build in interactive.FIGURES.items():
        fig = build()
        assert html_bytes(fig) < MAX_HTML_BYTES, name
        assert len(fig.states) >= 5 and "slider" in fig.alt
        assert "model of H100-SXM" in heading_text(fig)
        args = [json.dumps(state, sort_keys=True, default=str) for _, state in steps(fig)]
        assert len(set(args)) == len(args), name  # every state shows something else


# the decode figure's traces: per (GPU, kv_heads) a line then its math-bound marker
LINES = [(H100, "bfloat16", 32), (H100, "bfloat16", 8), (V100, "float16", 32), (V100, "float16", 8)]


def test_decode_states_are_the_contexts_and_open_at_2048(decode):
    assert decode.states == [str(c) for c in interactive.CONTEXTS]
    assert interactive.CONTEXTS[decode.figure.layout.sliders[0].active] == 2048
    assert "V100-SXM2" in heading_text(decode)
    names = [t.name for t in decode.figure.data[::2]]
    assert names[0].startswith("H100-SXM, MHA (32 K/V heads), bfloat16")
    assert names[3].startswith("V100-SXM2, GQA 8 (8 K/V heads), float16")  # a V100 has no bfloat16 peak


def _predict(spec, dtype, kv, batch, context):
    return pk.predict_decode_time(P, batch, context, layers=LAYERS, kv_heads=kv, head_dim=D, dtype=dtype,
                                  spec=spec, heads=HEADS)


def test_each_decode_state_is_the_model_at_its_context(decode):
    for (_, (data, layout)), context in zip(steps(decode), interactive.CONTEXTS):
        assert f"context {context} tokens" in layout["annotations[0].text"]
        for k, (spec, dtype, kv) in enumerate(LINES):
            xs, ys = data["x"][2 * k], data["y"][2 * k]
            assert len(xs) == len(ys) >= 1
            for n, y in zip(xs, ys):
                assert math.isclose(y, _predict(spec, dtype, kv, n, context).tokens_per_s, rel_tol=1e-4)
            # the line stops at the largest batch whose weights and KV cache fit in memory, by hand
            size = BF16  # bfloat16 and float16 alike
            per_sequence = 2 * LAYERS * context * kv * D * size
            fit = (spec.memory_bytes - P * size) // per_sequence
            assert P * size + fit * per_sequence <= spec.memory_bytes < P * size + (fit + 1) * per_sequence
            assert interactive.largest_batch(decoding.LLAMA2_7B, context, kv, dtype, spec) == fit
            assert max(xs) == min(fit, interactive.BATCHES[-1])
            # the marker: the first math-bound batch, drawn when the line reaches it
            first = _predict(spec, dtype, kv, 1, context).math_bound_batch
            marker = data["x"][2 * k + 1]
            assert list(marker) == ([first] if first is not None and first <= max(xs) else [])


def test_the_marker_is_where_a_step_turns_math_bound(decode):
    data, _ = steps(decode)[interactive.CONTEXTS.index(128)][1]
    (n,) = data["x"][3]  # the H100 with GQA at context 128
    assert _predict(H100, "bfloat16", 8, n, 128).bound == "math"
    assert _predict(H100, "bfloat16", 8, n - 1, 128).bound == "memory"
    assert data["x"][1] == []  # MHA on the H100: never math-bound at this context


def test_longer_contexts_lower_the_lines_and_gqa_lifts_them(decode):
    states = [data for _, (data, _) in steps(decode)]
    for k in range(len(LINES)):
        at_batch_1 = [s["y"][2 * k][0] for s in states]
        assert all(a > b for a, b in zip(at_batch_1, at_batch_1[1:]))  # more cache per token
        lengths = [len(s["x"][2 * k]) for s in states]
        assert lengths[0] > lengths[-1]  # fewer batches fit
    for s in states:
        for mha, gqa in ((0, 2), (4, 6)):
            n = min(len(s["y"][mha]), len(s["y"][gqa]))
            assert all(g >= m for m, g in zip(s["y"][mha][:n], s["y"][gqa][:n]))


def test_each_split_state_is_the_attention_model(split):
    shares = []
    for (_, (data, layout)), s in zip(steps(split), interactive.SEQS):
        qk, softmax, pv, fused, totals = (data["x"][i] for i in range(5))
        unfused = pk.predict_attention_time(1, 32, s, s, 128, spec=H100, dtype="bfloat16", fused=False).time_s
        assert math.isclose(qk[0] + softmax[0] + pv[0], unfused, rel_tol=1e-4)
        assert math.isclose(softmax[0], pk.memory_time(pk.layer_bytes("softmax", (32, s, s), "bfloat16"), H100),
                            rel_tol=1e-4)
        assert math.isclose(qk[0], pk.predict_gemm_time(s, s, 128, "bfloat16", H100, batch=32), rel_tol=1e-4)
        assert math.isclose(fused[1], pk.predict_attention_time(1, 32, s, s, 128, spec=H100, dtype="bfloat16")
                            .time_s, rel_tol=1e-4)
        assert qk[1] == softmax[1] == pv[1] == fused[0] == 0
        assert math.isclose(totals[0], unfused, rel_tol=1e-4) and math.isclose(totals[1], fused[1], rel_tol=1e-4)
        assert data["text"][4][0].strip() == pk.units.format_time(unfused)
        assert f"s = {s}:" in layout["annotations[0].text"]
        assert ("could not run" in layout["annotations[0].text"]) == (2 * 32 * s * s * BF16 > H100.memory_bytes)
        shares.append(softmax[0] / (qk[0] + softmax[0] + pv[0]))
    assert shares[-1] > shares[0]  # the softmax's share grows with the length


def test_figures_refuse_bad_input():
    with pytest.raises(ValueError, match="kv_heads"):
        interactive.decode_roofline(kv_heads=(32, 5))
    with pytest.raises(TypeError, match="model"):
        interactive.decode_roofline(model=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="model lacks"):
        interactive.decode_roofline(model={"params": P})
    with pytest.raises(TypeError, match="model\\['layers'\\]"):
        interactive.decode_roofline(model={**decoding.LLAMA2_7B, "layers": 32.0})
    with pytest.raises(LookupError, match="specs"):
        interactive.decode_roofline(specs=("H100-SXM", "no such GPU"))
    with pytest.raises(TypeError, match="specs"):
        interactive.decode_roofline(specs=[3])
    with pytest.raises(ValueError, match="once"):
        interactive.decode_roofline(specs=["H100-SXM", H100])
    with pytest.raises(ValueError, match="contexts"):
        interactive.decode_roofline(contexts=[2048])
    with pytest.raises(ValueError, match="contexts"):
        interactive.decode_roofline(contexts=[2048, 0])
    with pytest.raises(ValueError, match="batches"):
        interactive.decode_roofline(batches=[1, 1])
    with pytest.raises(ValueError, match="active"):
        interactive.decode_roofline(active=9)
    with pytest.raises(ValueError, match="dtype"):
        interactive.decode_roofline(dtype="int4")
    fp32_only = dataclasses.replace(V100, peaks={"float32": V100.peak_flop_s("float32")})
    with pytest.raises(LookupError, match="dtype"):  # neither bfloat16 nor the float16 fallback
        interactive.decode_roofline(specs=[fp32_only])
    with pytest.raises(TypeError, match="model_name"):
        interactive.decode_roofline(model_name="")
    with pytest.raises(ValueError, match="head_dim"):
        interactive.attention_split(head_dim=0)
    with pytest.raises(ValueError, match="seqs"):
        interactive.attention_split(seqs=[1024])
    with pytest.raises(ValueError, match="active"):
        interactive.attention_split(active=-1)
    with pytest.raises(LookupError, match="bfloat16"):
        interactive.attention_split("V100-SXM2")
    with pytest.raises(TypeError, match="spec"):
        interactive.attention_split(spec=3)
    with pytest.raises(ValueError, match="context"):
        interactive.largest_batch(decoding.LLAMA2_7B, 0, 32, "bfloat16", H100)


# ------------------------------------------------------------------------------ the problems
@pytest.fixture
def check():
    """``problems.check``, which knows this chapter's exercises."""
    return exercises.check


def _answer(ex_id: str):
    return next(ex for ex in problems.EXERCISES if ex.id == ex_id).answer()


def test_problem_ids_and_chapter(check):
    assert [e.id for e in problems.EXERCISES] == [f"transformer-{k}" for k in range(1, 6)]
    assert {e.chapter for e in problems.EXERCISES} == {"07_transformers"} == {problems.CHAPTER}
    assert [e.id for e in exercises.all_exercises("07_transformers")] == [e.id for e in problems.EXERCISES]
    for ex in problems.EXERCISES:
        assert check(ex.id, ex.answer()).status == "right"
        assert ex.hint and ex.mistakes
        for solve, why in ex.mistakes:
            slip = check(ex.id, solve())
            assert slip.status == "wrong" and why in slip.message, (ex.id, slip)


def test_transformer_1_milliseconds_per_token(check):
    h200 = pk.device_spec("H200")
    weights, cache = P * BF16, 2 * LAYERS * 1 * 4096 * HEADS * D * BF16
    assert cache == 2 * 1_073_741_824  # decode_step_bytes's docstring, at twice the context
    flops = 2 * P + 4 * LAYERS * 4096 * HEADS * D
    flop_s, bandwidth = _achievable(h200)
    assert flops / flop_s < (weights + cache) / bandwidth  # memory-bound
    ms = 1e3 * (weights + cache) / bandwidth
    assert math.isclose(_answer("transformer-1"), ms, rel_tol=1e-9)
    assert 3 < ms < 4
    no_cache = check("transformer-1", round(1e3 * weights / bandwidth, 2))
    assert no_cache.status == "wrong" and "KV cache" in no_cache.message
    datasheet = check("transformer-1", 1e3 * (weights + cache) / h200.mem_bandwidth)
    assert datasheet.status == "wrong" and "datasheet" in datasheet.message
    assert check("transformer-1", round(ms, 2)).status == "right"


def test_transformer_2_gqa(check):
    def step_bytes(kv):
        return P * BF16 + 2 * LAYERS * 16 * 4096 * kv * D * BF16

    flop_s, bandwidth = _achievable()
    assert step_bytes(32) <= H100.memory_bytes  # the MHA batch fits in the H100
    flops = 2 * P * 16 + 4 * LAYERS * 16 * 4096 * HEADS * D  # GQA keeps the FLOPs
    assert flops / flop_s < step_bytes(8) / bandwidth  # both memory-bound: the ratio is the bytes'
    ratio = step_bytes(32) / step_bytes(8)
    assert math.isclose(_answer("transformer-2"), ratio, rel_tol=1e-9)
    assert 2 < ratio < 4
    kv_only = check("transformer-2", 4)
    assert kv_only.status == "wrong" and "KV caches alone" in kv_only.message
    assert check("transformer-2", 1 / ratio).status == "wrong"


def test_transformer_3_unfused_bytes(check):
    s, h, d = 8192, 32, 128
    unfused = BF16 * h * (2 * s * d + 2 * s * d + 4 * s * s)  # QKᵀ, softmax, PV
    fused = BF16 * (2 * h * s * d + 2 * h * s * d)  # Q, O; K, V once
    assert unfused == pk.attention_bytes(1, h, s, s, d, "bfloat16", fused=False)
    assert math.isclose(_answer("transformer-3"), unfused / fused, rel_tol=1e-12)
    assert _answer("transformer-3") == 1 + s / d  # the bytes ratio of unfused to fused attention
    no_softmax = check("transformer-3", 1 + s / (2 * d))
    assert no_softmax.status == "wrong" and "softmax" in no_softmax.message


def test_transformer_4_math_bound_batch(check):
    c = 64
    flop_s, bandwidth = _achievable()
    per_sequence_flops = 2 * P + 4 * LAYERS * c * HEADS * D
    per_sequence_bytes = 2 * LAYERS * c * HEADS * D * BF16  # its KV cache
    # n·flops/F ≥ (weights + n·cache)/B  ⇔  n ≥ (weights/B) / (flops/F − cache/B)
    n = math.ceil((P * BF16 / bandwidth) / (per_sequence_flops / flop_s - per_sequence_bytes / bandwidth))
    assert _answer("transformer-4") == n
    assert _predict(H100, "bfloat16", 32, n, c).bound == "math"
    assert _predict(H100, "bfloat16", 32, n - 1, c).bound == "memory"
    ridge = flop_s / bandwidth
    assert n > 1.5 * ridge  # the KV cache moves it well past the ridge
    slip = check("transformer-4", math.ceil(ridge))
    assert slip.status == "wrong" and "ridge point" in slip.message
    datasheet = check("transformer-4", H100.peak_flop_s("bfloat16") / H100.mem_bandwidth)
    assert datasheet.status == "wrong" and "datasheet" in datasheet.message


def test_transformer_5_prefill_attention_share(check):
    s = 4096
    attention = LAYERS * 4 * HEADS * D * (s * (s + 1) // 2)  # causal: key ≤ query
    weights = 2 * P * s
    share = 100 * attention / (attention + weights)
    assert math.isclose(_answer("transformer-5"), share, rel_tol=1e-12)
    assert 5 < share < 10
    full = LAYERS * 4 * HEADS * D * s * s
    unmasked = check("transformer-5", 100 * full / (full + weights))
    assert unmasked.status == "wrong" and "causal" in unmasked.message
    one_layer = check("transformer-5", 100 * (attention / LAYERS) / (attention / LAYERS + weights))
    assert one_layer.status == "wrong" and "32 layers" in one_layer.message
