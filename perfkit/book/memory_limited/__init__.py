"""Memory-limited layers: time is bytes (``chapters/06_memory_limited.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import memory_limited``); its modules: ``convnet``, ``experiments``, ``figures``,
``fusion``, ``fusion_figures``, ``hipkittens`` (fused against eager kernels on AMD's MI355X, published),
``problems``, ``published``, ``stream``, ``verdict``, ``interactive``.
Each is imported when first asked for (:mod:`perfkit.book.lazy`): importing the experiments draws
nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["ACTIVATION_OPS", "CHAINS", "LAYOUTS", "MEMORY_DTYPES", "MODES", "NETWORKS", "PHASES",
           "POOL_INDEX_ITEMSIZE", "POOL_WINDOWS", "activation_sizes", "bandwidth_fit", "batchnorm_bytes",
           "batchnorm_sizes", "byte_table", "compiler_missing", "convnet_breakdown", "for_reader",
           "fusion_chains", "fusion_savings", "layout_speedup", "memory_share", "network_layers",
           "plot_activation_sizes", "plot_bandwidth_vs_occupancy", "plot_batchnorm_sizes", "plot_fusion",
           "plot_fusion_published", "plot_network_breakdown", "plot_pool_sizes",
           "plot_published_time_vs_bytes", "pool_sizes", "predicted_activations", "predicted_breakdown",
           "predicted_chains", "tail_bytes", "convnet", "experiments", "figures", "fusion", "fusion_figures",
           "hipkittens", "problems", "published", "stream", "verdict", "interactive"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "convnet": ["NETWORKS", "convnet_breakdown", "memory_share", "network_layers", "predicted_breakdown"],
    "experiments": ["ACTIVATION_OPS", "LAYOUTS", "MEMORY_DTYPES", "POOL_INDEX_ITEMSIZE", "POOL_WINDOWS",
        "activation_sizes", "bandwidth_fit", "batchnorm_bytes", "batchnorm_sizes", "byte_table", "for_reader",
        "layout_speedup", "pool_sizes", "predicted_activations"],
    "figures": ["plot_activation_sizes", "plot_bandwidth_vs_occupancy", "plot_batchnorm_sizes", "plot_pool_sizes",
        "plot_published_time_vs_bytes"],
    "fusion": ["CHAINS", "MODES", "PHASES", "compiler_missing", "fusion_chains", "fusion_savings",
        "predicted_chains", "tail_bytes"],
    "fusion_figures": ["plot_fusion", "plot_fusion_published", "plot_network_breakdown"],
    "hipkittens": [],
    "problems": [],
    "published": [],
    "stream": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
