"""perfkit: measure, model and explain deep-learning GPU performance.

The public API (``perfkit.__all__``), by concept; each concept is one module of the core:

- devices: :class:`DeviceSpec`, :func:`device_spec` (a datasheet, by name), :data:`KNOWN_DEVICES`,
  :func:`current_device` (the device in use, with its recorded ceilings when ``data/`` has them),
  :func:`calibrated` (a spec carrying the ceilings measured for it), :func:`calibrate` (measure the
  device in use: its achievable ceilings, the model's error on it; a profile saved for next time)
- dtypes: :data:`DTYPES`, :func:`canonical_dtype`, :func:`itemsize`
- roofline: :func:`arithmetic_intensity`, :func:`roofline_time`, :func:`math_bound_batch`,
  :func:`gemm_flops`, :func:`gemm_bytes`
- quantization: :func:`alignment`, :func:`is_aligned`, :func:`pad_to_multiple`,
  :func:`tile_quantization`, :func:`wave_quantization`
- shapes (layer → GEMM): :func:`linear_gemms`, :func:`conv_gemms`, :func:`rnn_gemms`
- the GEMM model: :func:`predict_gemm_time`, :func:`explain_gemm`; achievable ceilings, carried by
  the spec (``spec.ceilings``): :class:`Ceilings`, :func:`achievable_ceilings`
- the byte model of memory-limited layers: :func:`layer_bytes`, :func:`chain_bytes` (eager vs
  fused), :func:`memory_time`, :func:`predict_layer_time`
- transformers (attention as batched GEMMs and a softmax, decoding): :func:`attention_flops`,
  :func:`attention_gemms`, :func:`attention_bytes` (fused vs unfused), :func:`predict_attention_time`,
  :func:`decode_step_bytes`, :func:`predict_decode_time` (seconds per step, the batch that turns it math-bound)
- collectives (multi-GPU communication, the α-β model): :func:`link_spec` (NVLink, PCIe, InfiniBand, Ethernet:
  datasheet and the fraction NCCL reaches), :func:`collective_time`, :func:`explain_collective` (its terms,
  busbw), :func:`data_parallel_step` (how much of the gradients' all-reduce the backward pass hides)
- timing: :func:`bench`, :class:`Measurement`
- layers: :func:`padded_linear`, :func:`padded_conv2d` (padded copies, same outputs)
- the advisor (the book's rules applied to your model): :func:`advise`
- your own profile (a ``torch.profiler`` trace, :mod:`perfkit.trace`): :func:`read_trace` (every GPU kernel
  joined to the op that launched it), :func:`diagnose_trace` (every op held to the model of its shape, the
  rule that explains the gap and its fix; every step's time by class, idle GPU and MFU)
- data: :func:`run_or_load` (live on a GPU, else the recording in ``data/``), :func:`record`
  (both from :mod:`perfkit.experiments`, the experiment machinery),
  :func:`published` / :func:`published_or_none` / :func:`published_sources` (third-party
  measurements, read from a folder outside the package), :func:`source_of` (what a frame rests on)
- what a notebook shows besides figures: :func:`note`, :func:`table`, :func:`device_card`

Everything else is one module away: ``pk.gemm_model``, ``pk.memory_model``, ``pk.provenance``,
``pk.interconnects`` (``KNOWN_LINKS``), ``pk.collectives`` (``bus_bandwidth``, ``crossover_bytes``),
``pk.kernels`` (Triton and CuPy kernels), ``pk.zoo`` (architectures built in code),
``pk.validation`` (the model against every published and recorded GEMM), ``pk.experiments`` (the
registry, the recorder). The book's machinery, one folder per chapter, is :mod:`perfkit.book`
(``from perfkit.book import gemm``); the experiments' catalog, ``perfkit.book.chapters.EXPERIMENTS``,
is given to the registry by name below, so ``import perfkit`` imports nothing of the book.

Units everywhere: seconds, bytes, FLOP, FLOP/s, bytes/s.
"""

from __future__ import annotations

import importlib as _importlib
import importlib.util as _util

from ._version import __version__
from .calibration import calibrate, calibrated, current_device
from .ceilings import Ceilings, achievable_ceilings
from .collectives import collective_time, data_parallel_step, explain_collective
from .devices import KNOWN_DEVICES, DeviceSpec, device_spec
from .devices import cuda_available as _cuda_available
from .display import device_card, note, table
from .dtypes import DTYPES, canonical_dtype, itemsize
from .experiments import registry as _registry
from .experiments.record import record
from .experiments.run import run_or_load
from .gemm_model import explain_gemm, predict_gemm_time
from .interconnects import link_spec
from .memory_model import chain_bytes, layer_bytes, memory_time, predict_layer_time
from .provenance import source_of
from .published_data import published, published_or_none, published_sources
from .quantization import alignment, is_aligned, pad_to_multiple, tile_quantization, wave_quantization
from .roofline import arithmetic_intensity, gemm_bytes, gemm_flops, math_bound_batch, roofline_time
from .shapes import conv_gemms, linear_gemms, rnn_gemms
from .timing import Measurement, bench
from .trace import diagnose_trace, read_trace
from .transformer import (attention_bytes, attention_flops, attention_gemms, decode_step_bytes,
                          predict_attention_time, predict_decode_time)

# The experiments' catalog (name → the chapter module that registers it), by name: nothing of the book
# is imported until an experiment is asked for.
_registry.use_catalog("perfkit.book.chapters")

__all__ = [
    "DeviceSpec", "device_spec", "current_device", "calibrated", "calibrate", "KNOWN_DEVICES",
    "DTYPES", "canonical_dtype", "itemsize",
    "arithmetic_intensity", "roofline_time", "math_bound_batch", "gemm_flops", "gemm_bytes",
    "alignment", "is_aligned", "pad_to_multiple", "tile_quantization", "wave_quantization",
    "linear_gemms", "conv_gemms", "rnn_gemms",
    "predict_gemm_time", "explain_gemm", "Ceilings", "achievable_ceilings",
    "layer_bytes", "chain_bytes", "memory_time", "predict_layer_time",
    "attention_flops", "attention_gemms", "attention_bytes", "predict_attention_time",
    "decode_step_bytes", "predict_decode_time",
    "link_spec", "collective_time", "explain_collective", "data_parallel_step",
    "bench", "Measurement",
    "padded_linear", "padded_conv2d",
    "advise", "read_trace", "diagnose_trace",
    "run_or_load", "record", "published", "published_or_none", "published_sources", "source_of",
    "note", "table", "device_card",
    "__version__",
]


# The advisor and the padded layers need torch: imported when first called, so `import perfkit` stays light.
def padded_linear(layer, multiple: int = 8, keep_padding: bool = False):
    """A Linear layer padded to ``multiple`` features, same outputs (see :func:`perfkit.padding.padded_linear`)."""
    from .padding import padded_linear as _padded

    return _padded(layer, multiple=multiple, keep_padding=keep_padding)


def padded_conv2d(conv, in_multiple: int = 1, out_multiple: int = 1, keep_padding: bool = False):
    """A Conv2d with its channels padded to multiples, same outputs (see :func:`perfkit.padding.padded_conv2d`)."""
    from .padding import padded_conv2d as _padded

    return _padded(conv, in_multiple=in_multiple, out_multiple=out_multiple, keep_padding=keep_padding)


def advise(model, example_inputs, dtype="bfloat16", spec=None, **options):
    """The book's rules applied to ``model``: findings, layers, fixes (see :func:`perfkit.advisor.advise`);
    ``spec=None`` on a GPU is this GPU, calibrated (:func:`current_device`)."""
    from .advisor import advise as _advise

    if spec is None and _cuda_available():
        spec = current_device()
    return _advise(model, example_inputs, dtype, spec, **options)


def __getattr__(name: str):
    """``pk.<module>``: any of perfkit's modules (``pk.zoo``, ``pk.book``, …), imported when first asked for."""
    if not name.startswith("_") and _util.find_spec(f"{__name__}.{name}") is not None:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'perfkit' has no attribute {name!r}")
