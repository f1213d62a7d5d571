"""perfkit: measure, model and explain deep-learning GPU performance.

The public API, by concept (one module each):

- devices: :func:`device_spec`, :func:`current_device`, :class:`DeviceSpec`, :data:`KNOWN_DEVICES`
- dtypes: :data:`DTYPES`, :func:`canonical_dtype`, :func:`itemsize`
- roofline: :func:`arithmetic_intensity`, :func:`roofline_time`, :func:`math_bound_batch`
  (and its measured counterpart :func:`batch_crossover`), :func:`plot_roofline`, …
- quantization: :func:`alignment`, :func:`is_aligned`, :func:`pad_to_multiple`, :func:`tile_quantization`, :func:`wave_quantization`
- shapes (layer → GEMM): :func:`linear_gemms`, :func:`conv_gemms`, :func:`rnn_gemms`
- gemm_model: :func:`predict_gemm_time`, :func:`explain_gemm`, :class:`GemmModel`
- memory_model (bytes of memory-limited layers): :func:`layer_bytes`, :func:`chain_bytes` (eager vs
  fused), :func:`memory_time`, :func:`predict_layer_time`
- ceilings (achievable ceilings, carried by a spec as ``spec.ceilings``): :func:`achievable_ceilings`,
  :class:`Ceilings`; :func:`calibrated` attaches those recorded in ``data/`` (:func:`current_device` does)
- validation (the model against every published and recorded GEMM): :func:`validation_table`
- timing: :func:`bench`, :class:`Measurement`
- kernels: :func:`tiled_matmul` (Triton, forced tiles), :func:`persistent_rnn` (CuPy, Baidu's
  persistent RNN), :func:`persistent_rnn_plan`, :func:`max_persistent_hidden`, :func:`rnn_reference`
- experiments, data and provenance: :mod:`perfkit.experiments`, :mod:`perfkit.data`,
  :func:`run_or_load`, :func:`source_of`, :func:`caption`
- published third-party measurements (DeepBench's V100/P100; XLA, Liger-Kernel, gpu-benches and
  DeepGEMM on H100/H200/A100/H800), read from a folder outside the package: :func:`published`,
  :func:`published_or_none` (None where the table is absent), :func:`published_sources`,
  :mod:`perfkit.published_data`
- then vs now (published beside ours): :func:`published_counterparts`, :mod:`perfkit.then_now`
- verdicts computed from data (holds / weaker / gone / no data yet): :func:`finding`,
  :func:`verdict_table`, :func:`judge`
- layers: :func:`padded_linear` (a Linear padded to a multiple, same outputs), :func:`padded_conv2d`
  (a Conv2d with padded channels, same outputs)
- what a chapter shows besides figures: :func:`note` (a styled admonition), :func:`table` (an
  HTML table, no index), :func:`device_card` (one line about the device, the rest folded)
- figures and widgets: :mod:`perfkit.plots`, :func:`roofline_explorer`, :func:`gemm_explorer`;
  figures that move in a static page (Plotly): :mod:`perfkit.interactive`
- the problems of each chapter, with answers from perfkit and a self-check: :mod:`perfkit.book.problems`
- the advisor (the book's rules applied to your own model): :func:`advise`, :mod:`perfkit.advisor`;
  architectures built in code (GPT-2 small, ResNet-50, an LSTM LM, LLaMA): :mod:`perfkit.zoo`

Units everywhere: seconds, bytes, FLOP/s, bytes/s.
"""

from __future__ import annotations

import importlib as _importlib
import warnings as _warnings

from . import data, book, published_data, provenance, then_now
from ._version import __version__
from .published_data import published, published_all, published_or_none, published_sources
from .display import Note, Table, device_card, note, table
from .devices import KNOWN_DEVICES, DeviceSpec, device_spec, match_driver_name
from .dtypes import DTYPES, canonical_dtype, itemsize, torch_dtype
from .book.registry import REGISTRY
from .calibration import calibrated, current_device
from .ceilings import Ceilings, achievable_ceilings, default_ceilings
from .gemm_model import (CANDIDATE_TILES, TILE_SHAPE_FACTORS, GemmModel, GemmPrediction, explain_gemm,
                         predict_gemm_time, prediction_error, shape_factor)
from .memory_model import chain_bytes, layer_bytes, memory_time, pool_output_shape, predict_layer_time
from .kernels import (PersistentPlan, max_persistent_hidden, persistent_rnn, persistent_rnn_plan, rnn_reference,
                      tiled_matmul, triton_mode)
from .provenance import Source, caption, live_source, published_counterparts, run_or_load, source_of
from .quantization import alignment, cdiv, is_aligned, pad_to_multiple, tile_quantization, wave_quantization
from .book.record import archive, record
from .roofline import (Operation, arithmetic_intensity, attainable_flops, batch_crossover, gemm_bytes, gemm_flops,
                       gemm_operation, math_bound_batch, nvidia_example_operations, roofline_time)
from .shapes import RNN_GATES, conv_gemms, conv_output_size, linear_gemms, rnn_gemms
from .timing import Measurement, NoiseWarning, bench, to_gbps, to_tflops
from .validation import validation_frames, validation_table, with_predictions, worst_predictions
from .book.verdict import Finding, finding, judge, verdict_table

_RENAMED = {"TILE_EFFICIENCY": "TILE_SHAPE_FACTORS"}


def plot_roofline(*args, **kwargs):
    """Draw rooflines and place operations on them (see :func:`perfkit.book.background.plot_roofline`)."""
    from .book.background.figures import plot_roofline as _plot

    return _plot(*args, **kwargs)


def roofline_explorer(*args, **kwargs):
    """Widget: move a GEMM on the roofline (see :func:`perfkit.book.widgets.roofline_explorer`)."""
    from .book.widgets import roofline_explorer as _w

    return _w(*args, **kwargs)


def gemm_explorer(*args, **kwargs):
    """Widget: tiles, waves and predicted time of a GEMM (see :func:`perfkit.book.widgets.gemm_explorer`)."""
    from .book.widgets import gemm_explorer as _w

    return _w(*args, **kwargs)


def padded_linear(layer, multiple: int = 8, keep_padding: bool = False):
    """A Linear layer padded to ``multiple`` features (see :func:`perfkit.padding.padded_linear`)."""
    from .padding import padded_linear as _p

    return _p(layer, multiple=multiple, keep_padding=keep_padding)


def padded_conv2d(conv, in_multiple: int = 1, out_multiple: int = 1, keep_padding: bool = False):
    """A Conv2d with its channels padded to multiples, same outputs (see :func:`perfkit.padding.padded_conv2d`)."""
    from .padding import padded_conv2d as _p

    return _p(conv, in_multiple=in_multiple, out_multiple=out_multiple, keep_padding=keep_padding)


def advise(model, example_inputs, dtype="bfloat16", spec=None, **options):
    """The book's rules applied to ``model`` (see :func:`perfkit.advisor.advise`): findings, layers, fixes."""
    from .advisor import advise as _advise

    return _advise(model, example_inputs, dtype, spec, **options)


def __getattr__(name: str):
    if name in ("book", "padding", "advisor", "zoo"):  # heavy: when asked for
        return _importlib.import_module(f".{name}", __name__)
    if name in _RENAMED:
        _warnings.warn(f"perfkit.{name} is now perfkit.{_RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'perfkit' has no attribute {name!r}")
