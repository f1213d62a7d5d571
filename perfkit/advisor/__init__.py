"""The advisor: the book's rules applied to a user's own model (:func:`advise`).

``advise(model, example_inputs, dtype="bfloat16", spec="H100-SXM")`` runs one forward pass to learn
every op's shape (on the meta device when it can, so a multi-billion-parameter model is checked on a
laptop), maps ``nn.Linear`` (and ``x @ W`` with a parameter ``W``, as GPT-2's ``Conv1D``),
``nn.Conv1d/2d`` (grouped and depthwise too), ``nn.Embedding``, ``nn.RNN/LSTM/GRU``, attention
(``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``, ``matmul``/``bmm``) and memory-bound
ops (norms, activations, pooling, dropout, elementwise) to GEMMs or bytes, prices each pass with
perfkit's GEMM and byte models on ``spec``, and applies the rules:

=================  ==============================================================================
rule id            what it checks (the guide it comes from)
=================  ==============================================================================
``alignment``      features, channels, head size and tokens a multiple of 16 bytes of the dtype
                   (NVIDIA, *Matrix Multiplication Background*; the FC and GEMM chapters)
``quantization``   under 75 % of a GEMM's launched tile work useful: tile and wave quantization
                   (NVIDIA, *Matrix Multiplication Background*; the GEMM chapter)
``memory_bound``   an op whose time is set by bytes: a GEMM below the ridge point for a reason other
                   than its batch (named), or a norm, activation or elementwise op outside a fusion
                   chain (the background chapter's roofline; NVIDIA, *Memory-Limited Layers*)
``small_batch``    tokens (or RNN batch) below the batch that makes the layer math-bound
                   (NVIDIA, *Linear/Fully-Connected Layers*; the FC and recurrent chapters)
``first_conv``     a convolution on 3 colour channels: pad to 4 with stride 2, else 8
                   (NVIDIA, *Convolutional Layers*; the convolution chapter)
``layout``         NCHW convolutions on Tensor Cores: use channels_last (the convolution chapter)
``rnn_sizes``      hidden a multiple of 32 (64, 256), batch a multiple of 8 (Baidu SVAIL; NVIDIA,
                   *Recurrent Layers*; the recurrent chapter)
``fusion``         chains of memory-bound ops between GEMMs, fused by torch.compile
                   (NVIDIA, *Memory-Limited Layers*; the memory-limited chapter)
=================  ==============================================================================

One rule per cause: only ``small_batch`` prices a larger batch. A fix is proposed only where it can be
applied (:mod:`.dataflow`): not to one layer of a width a residual stream or attention shares, not by
untying a tied weight, never a Conv2d tool for a Conv1d, and only channel counts a convolution's
groups divide. ``advice.flops`` and ``advice.mfu(step_time_s)`` give model FLOPs utilization against
the dense datasheet peak and the achievable ceiling; ``advice.memory_bound_share`` the share of the
step whose time is set by bytes.

The ids are stable: filter on them (``advice.findings.query("rule == 'alignment'")``) or pick
some with ``rules=[...]``. ``advice.findings``, ``advice.layers`` and ``advice.unmapped`` are
DataFrames; ``measure_advice`` (:mod:`.measure`) times each GEMM and memory pass on a device and
re-times each fix. Units: seconds, bytes, FLOP.
"""

from .advice import FINDING_COLUMNS, MFU, UNMAPPED_COLUMNS, Advice, advise, advised_spec
from .capture import capture
from .price import COLUMNS as LAYER_COLUMNS
from .rules import MIN_SHARE, QUANTIZATION_THRESHOLD, RULES

__all__ = ["Advice", "FINDING_COLUMNS", "LAYER_COLUMNS", "MFU", "MIN_SHARE", "QUANTIZATION_THRESHOLD", "RULES",
           "UNMAPPED_COLUMNS", "advise", "advised_spec", "capture"]
