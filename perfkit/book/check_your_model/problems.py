"""The problems of chapter 09_check_your_model, with answers computed by perfkit.

Every answer comes from :func:`perfkit.advise` on models of :mod:`perfkit.zoo` built on the meta
device (no weight allocated), or from :func:`perfkit.math_bound_batch`, for an H100 in bfloat16.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from ... import zoo
from ...advisor.advice import advise
from ...devices import device_spec
from ...quantization import alignment, pad_to_multiple
from ...roofline import math_bound_batch
from ..exercise import Exercise

CHAPTER = "09_check_your_model"
SPEC, DTYPE = "H100-SXM", "bfloat16"


def _meta(build: Callable[[], Any], shape: tuple[int, ...]) -> tuple[Any, Any]:
    """``build()`` and token ids of ``shape``, both on the meta device."""
    import torch

    with torch.device("meta"):
        return build(), torch.zeros(shape, dtype=torch.long)


@lru_cache(maxsize=4)
def _gpt2_unaligned_layers(batch: int, seq: int) -> int:
    """GPT-2 small advised on ``batch × seq`` tokens: how many linear layers run a forward GEMM whose
    N (the tokens) is not a multiple of 8, as the alignment rule's token finding counts them."""

    model, tokens = _meta(zoo.gpt2_small, (batch, seq))
    layers = advise(model, tokens, DTYPE, SPEC, rules=["alignment"]).layers
    forward = layers[(layers["op"] == "linear") & (layers["pass"] == "forward")]
    return int((forward["N"] % alignment(DTYPE) != 0).sum())


def _gpt2_block_linears() -> int:
    """The linear layers inside GPT-2 small's blocks (all of them but the output projection)."""
    import torch

    model, _ = _meta(zoo.gpt2_small, (1, 1))
    return sum(isinstance(m, torch.nn.Linear) for name, m in model.named_modules() if name.startswith("blocks."))


def _mlp_fc_batch(gpu: str = SPEC, dtype: str = DTYPE) -> int:
    """Tokens at which GPT-2 small's first MLP layer (``blocks.0.mlp.fc``) turns math-bound."""

    model, _ = _meta(zoo.gpt2_small, (1, 1))
    fc = model.blocks[0].mlp.fc
    return math_bound_batch(fc.in_features, fc.out_features, device_spec(gpu), dtype)


def _attn_proj_batch() -> int:
    """Tokens at which GPT-2 small's attention output projection (768 → 768) turns math-bound."""

    model, _ = _meta(zoo.gpt2_small, (1, 1))
    proj = model.blocks[0].attn.proj
    return math_bound_batch(proj.in_features, proj.out_features, device_spec(SPEC), DTYPE)


def _lstm_batch(gates: int = 4) -> int:
    """Sequences at which the LSTM LM's recurrent GEMM (``gates``·hidden × hidden) turns math-bound."""

    model, _ = _meta(zoo.lstm_lm, (1, 1))
    hidden = model.lstm.hidden_size
    return math_bound_batch(hidden, gates * hidden, device_spec(SPEC), DTYPE)


def _lstm_sizes_batch() -> int:
    """The batch the ``rnn_sizes`` rule proposes for the LSTM LM's 20 sequences (a multiple of 8)."""
    return pad_to_multiple(20, 8)


@lru_cache(maxsize=2)
def _llama_attention_s(batch: int, seq: int) -> float:
    """Predicted seconds of LLaMA-7B's attention (2 of its 32 identical layers) in a training step."""

    model, tokens = _meta(lambda: zoo.llama(layers=2, context=8192), (batch, seq))
    layers = advise(model, tokens, DTYPE, SPEC, rules=[]).layers
    return float(layers.loc[layers["op"] == "attention", "predicted_s"].sum())


def _attention_growth() -> float:
    return _llama_attention_s(1, 8192) / _llama_attention_s(4, 2048)


def _squared_growth() -> float:
    return (8192 / 2048) ** 2


def _token_growth() -> float:
    return (1 * 8192) / (4 * 2048)


def _flop_growth() -> float:
    return (1 * 8192**2) / (4 * 2048**2)


EXERCISES: list[Exercise] = [
    Exercise(
        id="advisor-1", chapter=CHAPTER,
        question="Advise GPT-2 small (pk.advise on the meta device, H100-SXM, bfloat16) on 7 sequences of "
                 "1023 tokens. The alignment rule now reports the number of tokens per step: in how many "
                 "linear layers?",
        solve=lambda: _gpt2_unaligned_layers(7, 1023), unit="linear layers", rel_tol=0, close_tol=0,
        hint="count the linear layers whose forward GEMM has an N (tokens) that is not a multiple of 8 "
             "(advice.layers), or read the finding whose layer is the model itself ('').",
        mistakes=((_gpt2_block_linears, "the output projection lm_head is a linear layer too, and it "
                                        "sees every token."),
                  (lambda: _gpt2_unaligned_layers(8, 1023), "that is 8 × 1023: 8184 tokens, a multiple of 8. "
                                                            "The rule looks at batch × sequence, not the "
                                                            "sequence alone."))),
    Exercise(
        id="advisor-2", chapter=CHAPTER,
        question="From how many tokens per step on is GPT-2 small's first MLP layer (blocks.0.mlp.fc, "
                 "768 → 3072) math-bound on an H100 in bfloat16, so that the small_batch rule no longer "
                 "fires for it? Use pk.math_bound_batch, and check with pk.advise on one sequence of 512 "
                 "tokens.",
        solve=_mlp_fc_batch, unit="tokens", rel_tol=0, close_tol=0.05,
        hint="the layer's forward GEMM is M = out_features, N = tokens, K = in_features; "
             "pk.math_bound_batch(in_features, out_features, pk.device_spec('H100-SXM'), 'bfloat16').",
        mistakes=((lambda: _mlp_fc_batch("V100-SXM2", "float16"), "that is the V100's ridge point; the "
                                                                 "H100's is higher."),
                  (_attn_proj_batch, "that is the attention's output projection (768 → 768), which does "
                                     "less work per weight and needs more tokens."),
                  (lambda: _mlp_fc_batch(SPEC, "float32"), "that is float32, which runs without Tensor "
                                                           "Cores at a much lower peak."))),
    Exercise(
        id="advisor-3", chapter=CHAPTER,
        question="Advise the LSTM language model (pk.zoo.lstm_lm(), 35 words per sequence) at batches 20, "
                 "64, 256 and 512: the small_batch finding is gone at 512. What is the smallest batch at "
                 "which it no longer fires on an H100 in bfloat16?",
        solve=_lstm_batch, unit="sequences", rel_tol=0, close_tol=0.05,
        hint="the rule applies pk.math_bound_batch to the recurrent GEMM of one time step, whose weight is "
             "4·hidden × hidden for an LSTM (four gates).",
        mistakes=((lambda: _lstm_batch(1), "an LSTM's recurrent weight has four gates: 4·hidden rows, "
                                           "not hidden."),
                  (_lstm_sizes_batch, "that is the rnn_sizes rule's fix (a multiple of 8), not the batch "
                                      "that makes the layer math-bound."))),
    Exercise(
        id="advisor-4", chapter=CHAPTER,
        question="Advise LLaMA-7B (pk.zoo.llama(context=8192)) on 4 sequences of 2048 tokens and on 1 "
                 "sequence of 8192. By what factor does the attention's predicted time (the 'attention' "
                 "rows of advice.layers) grow from the first to the second?",
        solve=_attention_growth, fmt="{:.2f}×", rel_tol=0.01, close_tol=0.10,
        hint="the linear layers see 8192 tokens either way; attention's work per sequence grows with "
             "the square of its length, and there are fewer sequences.",
        mistakes=((_squared_growth, "(8192 / 2048)² is the growth of one sequence's attention, but 4 "
                                    "sequences became 1."),
                  (_token_growth, "the tokens per step are the same, but attention's work is not "
                                  "proportional to them: it grows with each sequence's length."),
                  (_flop_growth, "4× is the growth of attention's FLOPs, not of its time: a causal mask "
                                 "skips only whole 128 × 128 blocks of scores (the short sequences' diagonal "
                                 "blocks are extra work), and both steps launch as many thread blocks, whose "
                                 "fixed costs do not grow."))),
]
