"""The book's chapters and experiments, listed once.

:data:`CHAPTERS`: ``chapters/NN_name.md`` is served by the folder ``perfkit/book/name/``; the order is
the reading order of ``_toc.yml`` (a test checks that the two agree).

:data:`EXPERIMENTS`: the catalog the experiment registry reads (``perfkit/__init__.py`` gives it by
name: ``use_catalog("perfkit.book.chapters")``): each experiment's name → the module whose
``@register`` defines it, in the recorder's order: the ceilings, timers and GEMMs the model and the
other chapters rest on first, then the chapters in reading order. A test checks that each name is
registered by exactly its module and that every module that registers an experiment is listed.
This module imports nothing: reading the catalog imports no chapter.
"""

from __future__ import annotations

#: Folder name → chapter file (without extension), in reading order.
CHAPTERS: dict[str, str] = {
    "background": "01_background",
    "gemm": "02_gemm",
    "fully_connected": "03_fully_connected",
    "recurrent": "04_recurrent",
    "convolutions": "05_convolutions",
    "memory_limited": "06_memory_limited",
    "transformers": "07_transformers",
    "communication": "08_communication",
    "check_your_model": "09_check_your_model",
    "timing": "90_timing",
    "model_accuracy": "91_model_accuracy",
}

#: Experiment name → the module that registers it (``@register``), in the recorder's order.
EXPERIMENTS: dict[str, str] = {
    "ceiling_matmul": "perfkit.book.background.ceilings",
    "ceiling_copy": "perfkit.book.background.ceilings",
    "timer_validation": "perfkit.book.timing.experiments",
    "gemm_sizes": "perfkit.book.gemm.experiments",
    "gemm_alignment": "perfkit.book.gemm.experiments",
    "gemm_tile_quantization": "perfkit.book.gemm.experiments",
    "gemm_tile_sizes": "perfkit.book.gemm.experiments",
    "gemm_waves": "perfkit.book.gemm.experiments",
    "gemm_transposes": "perfkit.book.gemm.experiments",
    "gemm_small_n": "perfkit.book.gemm.experiments",
    "waves": "perfkit.book.background.experiments",
    "fc_passes": "perfkit.book.fully_connected.experiments",
    "fc_batch": "perfkit.book.fully_connected.experiments",
    "fc_features": "perfkit.book.fully_connected.experiments",
    "vocab_padding": "perfkit.book.fully_connected.experiments",
    "rnn_combine_time": "perfkit.book.recurrent.experiments",
    "rnn_hidden": "perfkit.book.recurrent.experiments",
    "rnn_batch": "perfkit.book.recurrent.experiments",
    "rnn_cudnn": "perfkit.book.recurrent.experiments",
    "rnn_persistent": "perfkit.book.recurrent.experiments",
    "conv_passes": "perfkit.book.convolutions.experiments",
    "conv_channels": "perfkit.book.convolutions.experiments",
    "conv_first_layer": "perfkit.book.convolutions.experiments",
    "conv_layout": "perfkit.book.convolutions.experiments",
    "conv_params": "perfkit.book.convolutions.experiments",
    "conv_deepbench": "perfkit.book.convolutions.experiments",
    "convnet_breakdown": "perfkit.book.memory_limited.convnet",
    "activation_sizes": "perfkit.book.memory_limited.experiments",
    "batchnorm_sizes": "perfkit.book.memory_limited.experiments",
    "pool_sizes": "perfkit.book.memory_limited.experiments",
    "batchnorm_channels": "perfkit.book.memory_limited.op_sweeps",
    "layernorm_sizes": "perfkit.book.memory_limited.op_sweeps",
    "embedding_sizes": "perfkit.book.memory_limited.op_sweeps",
    "fusion_chains": "perfkit.book.memory_limited.fusion",
    "attention_backends": "perfkit.book.transformers.experiments",
    "attention_head_dims": "perfkit.book.transformers.experiments",
    "decode_steps": "perfkit.book.transformers.decoding",
    "collective_sizes": "perfkit.book.communication.experiments",
    "advisor_layers": "perfkit.book.check_your_model.experiments",
    "advisor_fixes": "perfkit.book.check_your_model.experiments",
    "model_op_dtypes": "perfkit.book.check_your_model.op_dtypes",
    "model_steps": "perfkit.book.check_your_model.steps",
}

__all__ = ["CHAPTERS", "EXPERIMENTS"]
