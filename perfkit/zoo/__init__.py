"""Model zoo: well-known architectures built in plain torch (no weights, no downloads).

Each builder makes an ``nn.Module`` of standard layers on whatever device is current (build under
``with torch.device("meta"):`` to get the shapes without allocating memory) and returns it in
train mode. Layers carry readable names for :meth:`~torch.nn.Module.named_modules`.

- :func:`gpt2_small` — 124,439,808 parameters (``lm_head`` tied to ``wte``); layers ``wte``, ``wpe``,
  ``blocks.0.attn.qkv``, ``blocks.0.attn.proj``, ``blocks.0.mlp.fc``, ``blocks.0.mlp.proj``, ``ln_f``,
  ``lm_head``.
- :func:`resnet50` — 25,557,032; torchvision's names: ``conv1``, ``bn1``, ``maxpool``,
  ``layer1.0.conv2``, ``layer1.0.downsample.0``, ``fc``.
- :func:`resnext50_32x4d` — 25,028,904; ResNet-50's names, ``layer1.0.conv2`` a grouped 3×3 (32 groups).
- :func:`mobilenet_v2` — 3,504,872; torchvision's names: ``features.0.0``, ``features.1.conv.0.0`` (a
  depthwise 3×3), ``classifier.1``.
- :func:`lstm_lm` — 36,026,000; ``embed``, ``lstm``, ``decoder``.
- :func:`llama` — 6,738,415,616 (7B, the default); ``llama(**LLAMA_CONFIGS["3B"])`` 3,426,473,600;
  ``LLAMA_CONFIGS["13B"]`` 13,015,864,320; ``embed``, ``layers.0.attention.wq`` (``wk wv wo``),
  ``layers.0.feed_forward.w1`` (``w2 w3``), ``norm``, ``output``.
- :func:`vit_b_16` — 86,567,656 (torchvision's ``vit_b_16``); torchvision's names: ``conv_proj``,
  ``encoder.layers.encoder_layer_0.self_attention`` (an ``nn.MultiheadAttention``), ``….mlp.0``, ``heads.head``.

:func:`parameter_count` counts a model's distinct parameters (a tied weight once). The builders live in
``transformers`` (GPT-2, LLaMA), ``vit`` (ViT-B/16), ``cnn`` (ResNet-50, ResNeXt-50, MobileNetV2) and
``rnn`` (the LSTM); every name is also here, as ``perfkit.zoo.<name>``.
"""

from __future__ import annotations

from ._common import parameter_count
from .cnn import Bottleneck, InvertedResidual, MobileNetV2, ResNet50, mobilenet_v2, resnet50, resnext50_32x4d
from .rnn import LSTMLanguageModel, lstm_lm
from .transformers import GPT2, LLAMA_CONFIGS, Llama, RMSNorm, gpt2_small, llama
from .vit import VisionTransformer, vit_b_16

# The parts and helpers perfkit.zoo has always exposed (tests and readers use zoo._rotate, …).
from ._common import _check_tokens, _heads_divide, _probability  # noqa: F401  (re-exported)
from .cnn import _conv_bn_relu6, _make_divisible  # noqa: F401  (re-exported)
from .transformers import (GPT2MLP, GPT2Attention, GPT2Block, LlamaAttention, LlamaBlock,  # noqa: F401
                           LlamaFeedForward, _rotate)

__all__ = ["GPT2", "ResNet50", "Bottleneck", "LSTMLanguageModel", "Llama", "RMSNorm", "LLAMA_CONFIGS",
           "MobileNetV2", "InvertedResidual", "gpt2_small", "resnet50", "resnext50_32x4d", "mobilenet_v2",
           "lstm_lm", "llama", "VisionTransformer", "vit_b_16", "parameter_count"]
