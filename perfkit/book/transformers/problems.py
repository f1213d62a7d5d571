"""The problems of chapter 07_transformers, with answers computed by perfkit.

Every answer comes from the transformer model (:func:`perfkit.predict_decode_time`,
:func:`perfkit.decode_step_bytes`, :func:`perfkit.attention_bytes`, :func:`perfkit.attention_flops`)
and the byte model (:func:`perfkit.layer_bytes`), on datasheet specs at their default achievable
ceilings: nothing is measured. Seconds, bytes, FLOPs.
"""

from __future__ import annotations

from ...ceilings import achievable_ceilings
from ...devices import device_spec
from ...dtypes import itemsize
from ...memory_model import layer_bytes
from ...transformer import attention_bytes, attention_flops, decode_step_bytes, predict_decode_time
from ..exercise import Exercise
from .decoding import LLAMA2_7B

__all__ = ["CHAPTER", "EXERCISES"]

CHAPTER = "07_transformers"

_H100, _H200 = "H100-SXM", "H200"
_P1_CONTEXT = 4096  # problem 1: an H200, batch 1 (section 5 of the chapter shows an H100 at 2048)
_DTYPE = "bfloat16"
_GQA_KV_HEADS = 8
_ATTENTION_SEQ = 8192  # problem 3's sequence length
_SHORT_CONTEXT = 64  # problem 4's context
_PREFILL = 4096  # problem 5's prompt


def _decode(batch: int, context: int, kv_heads: int = LLAMA2_7B["heads"], spec: str = _H100):
    """LLaMA-2-7B's decoding step in bfloat16 on ``spec`` (:func:`predict_decode_time`)."""
    m = LLAMA2_7B
    return predict_decode_time(m["params"], batch, context, layers=m["layers"], kv_heads=kv_heads,
                               head_dim=m["head_dim"], dtype=_DTYPE, spec=device_spec(spec), heads=m["heads"])


def _bandwidth(spec: str = _H100) -> float:
    """``spec``'s achievable memory bandwidth, bytes/s."""
    return achievable_ceilings(device_spec(spec)).bandwidth


# Problem 1: milliseconds per token.
def _token_ms() -> float:
    return 1e3 * _decode(1, _P1_CONTEXT, spec=_H200).time_s


def _weights_only_ms() -> float:
    """The slip: the weights' bytes alone at the achievable bandwidth (no KV cache)."""
    return 1e3 * LLAMA2_7B["params"] * itemsize(_DTYPE) / _bandwidth(_H200)


def _datasheet_ms() -> float:
    """The slip: the same roofline at the datasheet's bandwidth."""
    return 1e3 * _decode(1, _P1_CONTEXT, spec=_H200).datasheet_s


# Problem 2: grouped-query attention.
_P2 = (16, 4096)  # batch, context: MHA's weights and cache (48 GB) fit in an H100's 80 GB


def _gqa_speedup() -> float:
    return _decode(*_P2).time_s / _decode(*_P2, kv_heads=_GQA_KV_HEADS).time_s


def _kv_bytes(kv_heads: int) -> int:
    m = LLAMA2_7B
    return (decode_step_bytes(m["params"], *_P2, layers=m["layers"], kv_heads=kv_heads, head_dim=m["head_dim"],
                              dtype=_DTYPE) - m["params"] * itemsize(_DTYPE))


def _kv_ratio() -> float:
    """The slip: the KV cache's bytes shrink by heads / kv_heads, the weights' do not."""
    return _kv_bytes(LLAMA2_7B["heads"]) / _kv_bytes(_GQA_KV_HEADS)


# Problem 3: the bytes of unfused attention.
def _attention(fused: bool) -> int:
    m = LLAMA2_7B
    return attention_bytes(1, m["heads"], _ATTENTION_SEQ, _ATTENTION_SEQ, m["head_dim"], _DTYPE, fused=fused)


def _unfused_ratio() -> float:
    return _attention(False) / _attention(True)


def _no_softmax_ratio() -> float:
    """The slip: the math path's bytes without the softmax reading and writing the scores."""
    softmax = layer_bytes("softmax", (LLAMA2_7B["heads"], _ATTENTION_SEQ, _ATTENTION_SEQ), _DTYPE)
    return (_attention(False) - softmax) / _attention(True)


# Problem 4: the batch at which decoding turns math-bound.
def _math_bound_batch() -> int:
    batch = _decode(1, _SHORT_CONTEXT).math_bound_batch
    if batch is None:
        raise RuntimeError(f"LLaMA-2-7B decoding at context {_SHORT_CONTEXT} is never math-bound on the {_H100}")
    return batch


def _ridge(datasheet: bool = False) -> float:
    """The slip: the H100's ridge point in FLOP/B (achievable, or the datasheet's)."""
    spec = device_spec(_H100)
    if datasheet:
        return spec.ops_per_byte(_DTYPE)
    cl = achievable_ceilings(spec)
    return cl.flop_s_for(_DTYPE) / cl.bandwidth


# Problem 5: attention's share of a prefill's FLOPs.
def _attention_share_percent(causal: bool = True, layers: int | None = None) -> float:
    m = LLAMA2_7B
    n = m["layers"] if layers is None else layers
    att = n * attention_flops(1, m["heads"], _PREFILL, _PREFILL, m["head_dim"], causal=causal)
    weights = 2 * m["params"] * _PREFILL
    return 100 * att / (att + weights)


_LLAMA = ("LLaMA-2-7B (6.74e9 parameters, 32 layers, 32 heads of dimension 128, no grouped-query "
          "attention) in bfloat16")
_DECODE_CALL = ("pk.predict_decode_time(6_740_000_000, batch, context, layers=32, kv_heads=…, head_dim=128, "
                "heads=32, dtype='bfloat16', spec='H100-SXM')")
_CACHE_GB = (decode_step_bytes(LLAMA2_7B["params"], 1, _P1_CONTEXT, layers=LLAMA2_7B["layers"], kv_heads=LLAMA2_7B["heads"],
                               head_dim=LLAMA2_7B["head_dim"], dtype=_DTYPE)
             - LLAMA2_7B["params"] * itemsize(_DTYPE)) / 1e9
_WEIGHTS_GB = LLAMA2_7B["params"] * itemsize(_DTYPE) / 1e9
_H100_SPEC, _H200_SPEC = device_spec(_H100), device_spec(_H200)

EXERCISES: list[Exercise] = [
    Exercise(
        "transformer-1", CHAPTER,
        f"{_LLAMA} decodes one sequence with {_P1_CONTEXT} tokens of context on an H200. How many milliseconds "
        "does the model predict per generated token?",
        _token_ms, unit="milliseconds", rel_tol=0.01, close_tol=0.10, fmt="{:.2f}",
        hint=f"{_DECODE_CALL.replace(_H100, _H200)} with batch 1, context {_P1_CONTEXT}, kv_heads 32; its "
             "time_s is per step, one token per sequence.",
        mistakes=((_weights_only_ms, "that is the weights alone; each step also reads the whole KV cache, "
                   f"2 · 32 layers · {_P1_CONTEXT} tokens · 32 heads · 128 · 2 bytes ({_CACHE_GB:.2f} GB)."),
                  (_datasheet_ms, f"that uses the datasheet's {_H200_SPEC.mem_bandwidth / 1e12:.2f} TB/s; the model "
                   f"streams at the achievable bandwidth, {_bandwidth(_H200) / _H200_SPEC.mem_bandwidth:.0%} of it "
                   "(datasheet_s is the other number)."))),
    Exercise(
        "transformer-2", CHAPTER,
        f"The same model served at batch {_P2[0]} with {_P2[1]} tokens of context on an H100: by what factor does "
        f"grouped-query attention with {_GQA_KV_HEADS} K/V heads (instead of 32) cut the predicted step "
        "time (MHA time ÷ GQA time)?",
        _gqa_speedup, unit="", rel_tol=0.01, close_tol=0.10, fmt="{:.2f}",
        hint=f"{_DECODE_CALL} twice, kv_heads=32 and kv_heads={_GQA_KV_HEADS}, batch {_P2[0]}, context {_P2[1]}; "
             "divide the time_s.",
        mistakes=((_kv_ratio, f"that is the ratio of the KV caches alone (32 ÷ {_GQA_KV_HEADS}); the "
                   f"{_WEIGHTS_GB:.1f} GB of weights are read every step with or without GQA."),
                  (lambda: 1 / _gqa_speedup(), "that is GQA ÷ MHA; the question asks how many times faster "
                   "the GQA step is."))),
    Exercise(
        "transformer-3", CHAPTER,
        f"Attention on one sequence of {_ATTENTION_SEQ} tokens, 32 heads of dimension 128, bfloat16, "
        "forward: how many times more bytes does the unfused math path (three kernels) move than a fused "
        "FlashAttention-style kernel?",
        _unfused_ratio, unit="", rel_tol=0.01, close_tol=0.10, fmt="{:.0f}",
        hint=f"pk.attention_bytes(1, 32, {_ATTENTION_SEQ}, {_ATTENTION_SEQ}, 128, 'bfloat16', fused=False) "
             "÷ the same with fused=True.",
        mistakes=((_no_softmax_ratio, "that counts the scores written by QKᵀ and read by PV, but not the "
                   "softmax in between, which reads them and writes them back (pk.layer_bytes('softmax', ...))."),)),
    Exercise(
        "transformer-4", CHAPTER,
        f"{_LLAMA} decodes with only {_SHORT_CONTEXT} tokens of context on an H100. From what batch on does the "
        "model predict a decoding step to be math-bound?",
        _math_bound_batch, unit="sequences", rel_tol=0.01, close_tol=0.10, fmt="{:,.0f}",
        hint=f"{_DECODE_CALL} at context {_SHORT_CONTEXT}, any batch: its math_bound_batch.",
        mistakes=((_ridge, "that is the H100's ridge point (achievable FLOP/s ÷ bytes/s), the answer if only "
                   "the weights were read; every sequence adds its KV cache, bytes that no other sequence "
                   "shares, so the batch must be larger."),
                  (lambda: _ridge(datasheet=True), f"that is the datasheet's ridge point "
                   f"({_H100_SPEC.peak_flop_s(_DTYPE) / 1e12:.0f} TFLOP/s ÷ {_H100_SPEC.mem_bandwidth / 1e12:.2f} "
                   "TB/s), and it leaves out the KV cache that every sequence adds."))),
    Exercise(
        "transformer-5", CHAPTER,
        f"A causal prefill of one {_PREFILL}-token prompt through LLaMA-2-7B: what percentage of its FLOPs "
        "are attention's two GEMMs (QKᵀ and PV in all 32 layers), against those plus the weights' GEMMs "
        "(2 · parameters · tokens)?",
        _attention_share_percent, unit="%", rel_tol=0.01, close_tol=0.10, fmt="{:.1f}",
        hint=f"32 × pk.attention_flops(1, 32, {_PREFILL}, {_PREFILL}, 128, causal=True) against "
             f"2 · 6.74e9 · {_PREFILL}.",
        mistakes=((lambda: _attention_share_percent(causal=False), "that counts every (query, key) pair; a "
                   "causal mask keeps only the keys at or before each query, about half of them."),
                  (lambda: _attention_share_percent(layers=1), "that is one layer's attention; it runs in "
                   "all 32 layers, and 2 · parameters · tokens already counts all 32 layers' weights."))),
]
