"""Matrix multiplication: the shapes a GPU likes (``chapters/02_gemm.md``): the chapter's machinery in one folder.

Its experiments (registered for the recorder), frame analysis and figures are importable from here
(``from perfkit.book import gemm``); its modules: ``experiments``, ``figures``, ``problems``,
``published``, ``newest`` (the best GEMM of Blackwell and AMD Instinct GPUs, published), ``recorded``,
``verdict``, ``interactive``, ``waves_figure``. Each is imported when first asked for
(:mod:`perfkit.book.lazy`): importing the experiments draws nothing.
"""

from __future__ import annotations

from ..lazy import lazy

__all__ = ["GEMM_DTYPES", "alignment_penalty", "alignment_summary", "gemm_alignment", "gemm_sizes",
           "gemm_small_n", "gemm_tile_quantization", "gemm_tile_sizes", "gemm_transposes", "gemm_waves",
           "measure_gemm", "plot_alignment", "plot_fp8_published", "plot_gemm_sizes", "plot_gemm_waves", "plot_h100_batched",
           "plot_h100_sizes", "plot_layout_spread", "plot_predicted_vs_measured", "plot_quantization_sweep",
           "plot_small_n", "plot_throughput_vs_work", "plot_tile_sizes", "plot_transposes",
           "size_throughput", "experiments", "figures", "newest", "problems", "published", "recorded", "verdict",
           "interactive", "waves_figure"]

#: Each module of the folder → the names it provides here, imported when first asked for.
_MODULES = {
    "experiments": ["GEMM_DTYPES", "alignment_penalty", "alignment_summary", "gemm_alignment", "gemm_sizes",
        "gemm_small_n", "gemm_tile_quantization", "gemm_tile_sizes", "gemm_transposes", "gemm_waves", "measure_gemm",
        "size_throughput"],
    "waves_figure": ["plot_gemm_waves"],
    "figures": ["plot_alignment", "plot_fp8_published", "plot_gemm_sizes", "plot_h100_batched", "plot_h100_sizes",
        "plot_layout_spread", "plot_predicted_vs_measured", "plot_quantization_sweep", "plot_small_n",
        "plot_throughput_vs_work", "plot_tile_sizes", "plot_transposes"],
    "problems": [],
    "published": [],
    "newest": [],
    "recorded": [],
    "verdict": [],
    "interactive": [],
}

__getattr__, __dir__ = lazy(__name__, _MODULES)
