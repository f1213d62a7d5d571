"""Our own ``torch.profiler`` traces (issue 45): one step of the chapter's models, profiled as a reader would.

:data:`TRACE_RUNS` names each run; :func:`record_traces` profiles them on this machine
(:func:`perfkit.trace.capture.capture_trace`: shapes recorded, no Python stacks, no memory events) and writes
``<out>/<device-slug>/traces/<run>.json.gz`` (at most 3 MB each) with ``<run>.json`` beside it: a recording's
device and software keys (``perfkit record``'s own), ``params`` (``quick``), what ran (``ran``), the
profiler's settings, ``bytes`` and ``sha256``. ``perfkit.diagnose_trace`` reads them back.

On a GPU the runs are the real sizes in bfloat16 (weights and activations in bfloat16, as the advisor prices
them; no autocast): ResNet-50 and GPT-2 small take one training step (forward, cross-entropy, backward,
torch's default AdamW: ``foreach`` on CUDA), LLaMA one decoding step. On a CPU, or with ``quick``, the models
are shrunk (:data:`~perfkit.book.check_your_model.experiments.MODELS`' CPU sizes; the decoding stack of
:data:`~perfkit.book.transformers.decoding.CPU_MODEL`), in float32 on a CPU. A CPU trace is refused in the
repository's ``data/`` (as ``perfkit record`` refuses a CPU recording there).
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from ..._validate import boolean, folder
from ...data import device_slug
from ...device_runtime import cpu_name
from ...devices import DeviceSpec, current_device
from ...dtypes import torch_dtype
from ...environment import environment
from ...experiments.measure import known_names
from ...experiments.record import _check_out, _new_meta
from ...experiments.registry import Experiment
from ...matmul import seeded_on
from ...placement import resolve_device
from ...trace.capture import capture_trace
from ..transformers.decoding import CPU_MODEL, GPU_MODEL, _decode_step, _decode_tensors
from .experiments import model_inputs

__all__ = ["DECODE_BATCH", "TRACE_COLUMNS", "TRACE_RUNS", "TraceRun", "TracesFailed", "record_traces"]

#: Sequences decoded together in the LLaMA decoding step (one new token each).
DECODE_BATCH = 16


@dataclass(frozen=True)
class TraceRun:
    """One profiled step: ``model`` (a ``MODELS`` entry, or ``"llama_decode"``), ``mode`` (``"train"``: forward,
    loss, backward and optimizer step; ``"decode"``: one token per sequence, no gradients), ``layout`` of image
    inputs (``"nchw"``, ``"channels_last"``; ``""`` otherwise) and ``description``: what runs on a GPU."""

    model: str
    mode: str
    layout: str
    description: str


TRACE_RUNS: dict[str, TraceRun] = {
    "resnet50_bf16_nchw": TraceRun("resnet50", "train", "nchw", "ResNet-50, one training step (forward, "
                                   "cross-entropy, backward, AdamW), batch 32 at 224x224, bfloat16, NCHW"),
    "resnet50_bf16_channels_last": TraceRun("resnet50", "train", "channels_last", "ResNet-50, one training step "
                                            "(forward, cross-entropy, backward, AdamW), batch 32 at 224x224, "
                                            "bfloat16, channels-last (model and input)"),
    "gpt2_small_bf16": TraceRun("gpt2_small", "train", "", "GPT-2 small, one training step (forward, "
                                "cross-entropy, backward, AdamW), 8 sequences of 1,024 tokens, bfloat16"),
    "llama_decode_bf16": TraceRun("llama_decode", "decode", "", f"one decoding step of LLaMA-2-7B's layers (4 of "
                                  f"32), batch {DECODE_BATCH}, 2,048 cached tokens, 32 K/V heads, bfloat16"),
}

#: Columns of :func:`record_traces`' frame, one row per trace written.
TRACE_COLUMNS: dict[str, str] = {
    "name": "the run (TRACE_RUNS)", "path": "the gzipped trace written", "bytes": "its size, bytes",
    "model": "the model profiled", "mode": "train (one training step) or decode (one decoding step)",
    "dtype": "the dtype it ran in", "device": "the device it ran on (the driver's name)",
}

#: Keys of a recording's metadata that describe the recording, not the machine (left out of a trace's).
_RECORDING_ONLY = ("experiment", "description", "recorded_at", "finished_at", "complete", "error", "columns",
                   "needs", "rows")


class TracesFailed(RuntimeError):
    """Raised by :func:`record_traces` after every run was tried, when some failed: ``failed`` maps run →
    error; ``written`` is the frame of the traces that were written."""

    def __init__(self, failed: Mapping[str, str], written: pd.DataFrame):
        self.failed, self.written = dict(failed), written
        super().__init__(f"{len(self.failed)} trace(s) failed ({len(written)} written): "
                         + "; ".join(f"{k}: {v}" for k, v in self.failed.items()))


def _spec(device: str) -> DeviceSpec:
    """The GPU's spec on "cuda"; on "cpu" this CPU by name only (nothing measured: a trace needs no peaks)."""
    if device == "cuda":
        return current_device()
    return DeviceSpec(name=cpu_name(), kind="cpu", sms=os.cpu_count(), mem_bandwidth=None, l2_bytes=None,
                      memory_bytes=None, sources={"name": "this machine's CPU", "sms": "os.cpu_count()"})


def _machine_meta(spec: DeviceSpec, quick: bool) -> dict[str, Any]:
    """The device and software keys a recording's metadata holds (``perfkit record``'s own, from a stand-in
    experiment), and ``params``."""
    meta = _new_meta(Experiment("trace", record_traces, ""), spec, environment(), quick)
    return {k: v for k, v in meta.items() if k not in _RECORDING_ONLY}


def _train(run: TraceRun, device: str, dtype: str, full: bool) -> tuple[Callable[[], None], dict[str, Any]]:
    """One training step of ``run.model`` (ResNet-50 or GPT-2 small) and what ran."""
    import torch
    import torch.nn.functional as F

    model, x = model_inputs(run.model, "cuda" if full else "cpu")
    fmt = torch.channels_last if run.layout == "channels_last" else torch.contiguous_format
    model = model.to(device=device, dtype=torch_dtype(dtype), memory_format=fmt)
    classes = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].out_features  # fc, lm_head
    on, gen = seeded_on(device)
    if x.is_floating_point():  # images, and one class per image
        inputs = torch.randn(x.shape, generator=gen, device=on, dtype=torch_dtype(dtype)).contiguous(memory_format=fmt)
        target = torch.randint(0, classes, x.shape[:1], generator=gen, device=on)
    else:  # tokens, and the next token of each
        inputs = torch.randint(0, classes, x.shape, generator=gen, device=on)
        target = torch.randint(0, classes, x.shape, generator=gen, device=on)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(inputs)
        F.cross_entropy(out.flatten(0, -2), target.flatten()).backward()
        opt.step()

    return step, {"input": list(x.shape), "batch": int(x.shape[0]), "layout": run.layout,
                  "optimizer": "torch.optim.AdamW(lr=1e-4), torch's default implementation",
                  "loss": "cross-entropy", "parameters": sum(p.numel() for p in model.parameters())}


def _decode(device: str, dtype: str, full: bool) -> tuple[Callable[[], None], dict[str, Any]]:
    """One decoding step of a LLaMA-shaped stack (decoding.py's), one K/V head per query head, and what ran."""
    import torch

    shape = GPU_MODEL if full else CPU_MODEL
    kv = shape.heads
    weights, cache = _decode_tensors(shape, kv, DECODE_BATCH, shape.context, shape.layers, dtype, device)
    on, gen = seeded_on(device)
    x = torch.randn((DECODE_BATCH, shape.hidden), generator=gen, device=on, dtype=torch_dtype(dtype))

    def step() -> None:
        with torch.no_grad():
            _decode_step(x, weights, cache, shape, kv)

    return step, {"input": [DECODE_BATCH, shape.hidden], "batch": DECODE_BATCH, "layout": "",
                  "context": shape.context, "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads,
                  "kv_heads": kv, "head_dim": shape.head_dim, "ffn": shape.ffn, "parameters": shape.params(kv)}


def _build(name: str, device: str, quick: bool) -> tuple[Callable[[], None], dict[str, Any]]:
    run = TRACE_RUNS[name]
    full, dtype = device == "cuda" and not quick, "bfloat16" if device == "cuda" else "float32"
    step, ran = _decode(device, dtype, full) if run.mode == "decode" else _train(run, device, dtype, full)
    size = "the real sizes" if full else "shrunk (CPU or quick sizes)"
    return step, {"model": run.model, "mode": run.mode, "dtype": dtype, "sizes": size, **ran,
                  "description": run.description if full else f"{run.description}; here {size}, {dtype}"}


def record_traces(out: str | os.PathLike, runs: Any = None, *, device: str = "auto", quick: bool = False,
                  progress: bool = True) -> pd.DataFrame:
    """Profile each run of :data:`TRACE_RUNS` (``runs``: names; ``None``: all) into
    ``<out>/<device-slug>/traces/<run>.json.gz`` and ``<run>.json``. Returns one row per trace written
    (:data:`TRACE_COLUMNS`).

    Raises ``LookupError`` for an unknown run and ``ValueError`` for a CPU run into the repository's
    ``data/``, before any model is built; :class:`TracesFailed` after all runs, when one failed (e.g. a trace
    over 3 MB: refused, never truncated), the others' files kept.
    """
    names = list(dict.fromkeys(known_names("runs", runs, TRACE_RUNS))) if runs is not None else list(TRACE_RUNS)
    out = folder("out", out)
    quick, progress = boolean("quick", quick), boolean("progress", progress)
    device = resolve_device(device)
    spec = _spec(device)
    _check_out(out, spec)
    from tqdm.auto import tqdm

    where = Path(out) / device_slug(spec.driver_name or spec.name) / "traces"
    machine = _machine_meta(spec, quick)
    rows, failed = [], {}
    for name in tqdm(names, desc="traces", disable=not progress, leave=False):
        try:
            step, ran = _build(name, device, quick)
            info = capture_trace(step, where / f"{name}.json.gz", meta={"trace": name, **machine, "ran": ran},
                                 device=device)
            rows.append({"name": name, "path": str(where / info["file"]), "bytes": info["bytes"],
                         "model": ran["model"], "mode": ran["mode"], "dtype": ran["dtype"],
                         "device": machine["device_name"]})
        except Exception as e:  # noqa: BLE001  (reported after the other runs)
            failed[name] = f"{type(e).__name__}: {e}"
        finally:
            step = None  # the model, its optimizer state and activations go before the next run
            gc.collect()
            if device == "cuda":
                import torch

                torch.cuda.empty_cache()
    frame = pd.DataFrame(rows, columns=list(TRACE_COLUMNS))
    if failed:
        raise TracesFailed(failed, frame)
    return frame
