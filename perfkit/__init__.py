"""perfkit: measure, model and explain deep-learning GPU performance.

The public API, by concept (one module each):

- devices: :func:`device_spec`, :func:`current_device`, :class:`DeviceSpec`, :data:`KNOWN_DEVICES`
- dtypes: :data:`DTYPES`, :func:`canonical_dtype`, :func:`itemsize`
- roofline: :func:`arithmetic_intensity`, :func:`roofline_time`, :func:`plot_roofline`, …
- quantization: :func:`alignment`, :func:`pad_to_multiple`, :func:`tile_quantization`, :func:`wave_quantization`
- shapes (layer → GEMM): :func:`linear_gemms`, :func:`conv_gemms`, :func:`rnn_gemms`
- model: :func:`predict_gemm_time`, :func:`explain_gemm`
- timing: :func:`bench`, :class:`Measurement`
- kernels: :func:`tiled_matmul` (Triton, forced tiles)
- experiments and data: :func:`run_or_load`, :mod:`perfkit.experiments`, :mod:`perfkit.data`
- figures and widgets: :mod:`perfkit.plots`, :func:`roofline_explorer`, :func:`gemm_explorer`

Units everywhere: seconds, bytes, FLOP/s, bytes/s.
"""

from __future__ import annotations

import datetime as _dt

from . import data, experiments
from .devices import KNOWN_DEVICES, DeviceSpec, current_device, device_spec, match_driver_name
from .dtypes import DTYPES, canonical_dtype, itemsize, torch_dtype
from .experiments import REGISTRY, run_or_load
from .kernels import tiled_matmul, triton_mode
from .model import CANDIDATE_TILES, TILE_EFFICIENCY, GemmPrediction, explain_gemm, predict_gemm_time, prediction_error
from .quantization import alignment, pad_to_multiple, tile_quantization, wave_quantization
from .record import archive, record
from .roofline import (Operation, arithmetic_intensity, attainable_flops, gemm_bytes, gemm_flops, gemm_operation,
                       nvidia_example_operations, roofline_time)
from .shapes import RNN_GATES, conv_gemms, conv_output_size, linear_gemms, rnn_gemms
from .timing import Measurement, NoiseWarning, bench, to_gbps, to_tflops

__version__ = "0.1.0"

experiments._load_all()


def live_source() -> str:
    """The label of a figure measured now on this machine: ``"live on <device>, <YYYY-MM-DD>"``."""
    return f"live on {current_device().label}, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d}"


def plot_roofline(*args, **kwargs):
    """Draw rooflines and place operations on them (see :func:`perfkit.plots.plot_roofline`)."""
    from .plots import plot_roofline as _plot

    return _plot(*args, **kwargs)


def roofline_explorer(*args, **kwargs):
    """Widget: move a GEMM on the roofline (see :func:`perfkit.widgets.roofline_explorer`)."""
    from .widgets import roofline_explorer as _w

    return _w(*args, **kwargs)


def gemm_explorer(*args, **kwargs):
    """Widget: tiles, waves and predicted time of a GEMM (see :func:`perfkit.widgets.gemm_explorer`)."""
    from .widgets import gemm_explorer as _w

    return _w(*args, **kwargs)


def __getattr__(name: str):  # plots and widgets load matplotlib / ipywidgets only when asked for
    if name in ("plots", "widgets"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'perfkit' has no attribute {name!r}")
