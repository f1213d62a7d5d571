"""Published ``torch.profiler`` traces: where the shared ones are, who recorded them and what ran.

Real GPU profiles recorded by other projects (AMD's TraceLens test traces, PyTorch Kineto's TensorBoard
sample), kept outside the repository like the published tables: perfkit ships none of them. The folder is,
in order: the ``root`` argument, ``$PERFKIT_TRACES``, then ``../shared/reference/traces`` beside a
checkout (where this project's build and CI machines keep them; its README says how each file was
obtained). :data:`TRACES` names each file perfkit's book reads, its publisher, the repository, path and
commit it comes from, the GPU and what ran on it, and the SHA-256 of the file, checked before use.
:func:`published_trace` returns a file's path; :func:`trace_meta` its provenance in the form a frame's
``attrs["meta"]`` takes (:class:`perfkit.meta.FrameMeta`), which :mod:`perfkit.provenance` labels.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .._validate import folder

__all__ = ["ENV", "HOW_TO_GET", "TRACES", "TRACES_ABSENT", "PublishedTrace", "TracesMissing", "has_trace",
           "published_trace", "published_trace_or_none", "trace_meta", "traces_root"]

#: The environment variable naming the folder of published traces.
ENV = "PERFKIT_TRACES"
#: What to do when the folder or a trace is missing (said by every error and note).
HOW_TO_GET = (f"set ${ENV} to a folder holding them, or keep them in ../shared/reference/traces beside the "
              "checkout (each trace's repository, path and commit: perfkit.published_data.traces.TRACES)")
#: Why a figure or table drawn from a published trace is missing (a note's text).
TRACES_ABSENT = ("the published profiler traces this rests on are not on this machine. To see them, "
                 f"{HOW_TO_GET}.")


class TracesMissing(LookupError):
    """The folder of published traces, or one trace in it, is not there."""


@dataclass(frozen=True)
class PublishedTrace:
    """One published trace file and its provenance.

    ``gpu`` is the GPU's name in the trace's ``deviceProperties``; ``device`` perfkit's name for it.
    ``ran``: the model, batch, precision and mode; ``software``: the recording's torch/CUDA versions;
    ``recorded``: the day it was recorded (``YYYY-MM-DD``, from the trace); ``commit``: the commit of
    ``repository`` it is read at (as short as the source README gives it); ``sha256``: the checksum of the
    file this project keeps; ``blob``: the upstream file's git blob id (a prefix), where the kept file is
    a sanitized copy of it (the environment block of TraceLens's files dropped, every event unchanged).
    """

    name: str
    file: str
    title: str
    publisher: str
    repository: str
    path: str
    commit: str
    licence: str
    gpu: str
    device: str
    ran: str
    software: str
    recorded: str
    training: bool
    sha256: str
    caveat: str = ""
    blob: str = ""


_TRACELENS = dict(publisher="AMD TraceLens", repository="https://github.com/AMD-AGI/TraceLens",
                  commit="171dd747", licence="MIT", gpu="NVIDIA H100 80GB HBM3", device="H100-SXM",
                  software="torch 2.6.0+cu124", recorded="2025-07-18", training=False,
                  caveat=("Hugging Face pipeline inference in eager mode, one profiler step after 5 "
                          "warm-ups; TraceLens: 'for testing, validation, and educational purposes only', "
                          "not official performance numbers. The recording environment block was removed "
                          "(it held a token); every trace event is unchanged."))

_ENTRIES = (
    PublishedTrace(
        name="h100_vit_base", file="tracelens_h100_Falconsai_nsfw_image_detection__1016002.json.gz",
        title="ViT-base image classifier (Falconsai/nsfw_image_detection)",
        path="tests/traces/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
        ran="ViT-base inference, batch 4 images of 3×224×224, bfloat16", blob="0702619a",
        sha256="c96606ad62d7403035c4d9d0bd1713061b78c663773147f49afc9c4f5672beac", **_TRACELENS),
    PublishedTrace(
        name="h100_bert_small", file="tracelens_h100_gaunernst_bert-small-uncased__1016001.json.gz",
        title="BERT-small fill-mask model (gaunernst/bert-small-uncased)",
        path="tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",
        ran="BERT-small inference, batch 1 of 141 tokens, bfloat16", blob="737b43a1",
        sha256="b7f82d108f4a50b5b8375d0b13dac415c5de0897b3ff3b722fd5b84dd111787e", **_TRACELENS),
    PublishedTrace(
        name="h100_qwen_0.5b", file="tracelens_h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        title="Qwen1.5-0.5B-Chat language model (Qwen/Qwen1.5-0.5B-Chat)",
        path="tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        ran="Qwen1.5-0.5B inference forward, batch 16 × 2048 tokens, bfloat16", blob="6f3f5884",
        sha256="16b93728ccdf18f6ab8a001876b71ccf4081ae3a3fb7f3a791e77a5768d851b7", **_TRACELENS),
    PublishedTrace(
        name="h100_timesformer",
        file="tracelens_h100_facebook_timesformer-base-finetuned-k400__1016002.json.gz",
        title="TimeSformer-base video classifier (facebook/timesformer-base-finetuned-k400)",
        path="tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz",
        ran="TimeSformer-base inference, 1 video of 128 frames of 3×224×224, bfloat16", blob="5e8c10d7",
        sha256="42ba8de4122aac4db2d6f3c66e93940a02e2e517182000950b72d8672f4bf86c", **_TRACELENS),
    PublishedTrace(
        name="h100_owlv2_large", file="tracelens_h100_google_owlv2-large-patch14-ensemble__1016001.json.gz",
        title="OWLv2-large zero-shot object detector (google/owlv2-large-patch14-ensemble)",
        path="tests/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
        ran="OWLv2-large inference, 1 image of 3×224×224 and 5 labels, bfloat16", blob="64cc6ea9",
        sha256="b5c907ec869b3fea366d9a54aa128b9249e349713818608448dff46082761b93", **_TRACELENS),
    PublishedTrace(
        name="v100_resnet50_training", file="kineto_resnet50_v100_worker0.1623143089861.pt.trace.json.gz",
        title="torchvision ResNet-50 training (Kineto's TensorBoard plugin sample)",
        publisher="PyTorch Kineto",
        repository="https://github.com/pytorch/kineto", commit="041e7ce9",
        path="tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
        licence="BSD-3-Clause", gpu="Tesla V100-DGXS-32GB", device="V100-SXM2", software="torch 1.9",
        recorded="2021-06-08", training=True,
        ran=("ResNet-50 training (forward, backward, SGD step), batch 32 images of 3×224×224, float32, "
             "6 steps"),
        sha256="a91798b500ce9d6e21c416ce32dcd8ecf4788489df86f59ba2f944906c90b853",
        caveat=("A 2021 trace: its ops carry input shapes but no Concrete Inputs, so a convolution's stride "
                "and padding are inferred from the op that reads its output. The sample folder was deleted "
                "upstream in 2026 (commit 94979607); the file is byte-identical to the blob at 041e7ce9.")),
)

#: Every published trace perfkit's book reads, by name.
TRACES: Mapping[str, PublishedTrace] = MappingProxyType({e.name: e for e in _ENTRIES})


def _checkout_shared() -> Path:
    return Path(__file__).resolve().parents[3] / "shared" / "reference" / "traces"


def traces_root(root: str | os.PathLike | None = None) -> Path:
    """The folder of published traces: ``root``, else ``$PERFKIT_TRACES``, else ``../shared/reference/traces``
    beside the checkout. Raises :class:`TracesMissing` (a ``LookupError``) saying how to get them when the
    folder it settles on does not exist."""
    if root is not None:
        path = folder("root", root)
    elif os.environ.get(ENV):
        path = Path(os.environ[ENV])
    else:
        path = _checkout_shared()
    if not path.is_dir():
        raise TracesMissing(f"no folder of published traces at {path}: {HOW_TO_GET}")
    return path


def _entry(name: Any) -> PublishedTrace:
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a published trace's name such as 'h100_vit_base', got {name!r}")
    if name not in TRACES:
        raise LookupError(f"unknown published trace {name!r}; known: {', '.join(TRACES)}")
    return TRACES[name]


@functools.lru_cache(maxsize=32)
def _digests(path: str, mtime_ns: int, size: int) -> tuple[str, str]:
    """The SHA-256 of the file at ``path`` and its git blob id (SHA-1 of ``blob <size>\0`` + its bytes),
    computed once per file version."""
    sha256, blob = hashlib.sha256(), hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest()


def published_trace(name: str, *, root: str | os.PathLike | None = None) -> Path:
    """The path of the published trace ``name`` (a key of :data:`TRACES`), checked against its SHA-256
    (or, for a sanitized file, against the upstream file's git blob id: the original is accepted too).

    Raises ``TypeError``/``LookupError`` for a name perfkit does not know (listing those it does),
    :class:`TracesMissing` (a ``LookupError``) when the folder or the file is absent, and ``ValueError``
    naming the file when its bytes are not those the catalogue pins.
    """
    entry = _entry(name)
    base = traces_root(root)
    path = base / entry.file
    if not path.is_file():
        raise TracesMissing(f"the published trace {name!r} ({entry.file}) is not in {base}: {HOW_TO_GET}")
    stat = path.stat()
    sha256, blob = _digests(str(path), stat.st_mtime_ns, stat.st_size)
    if sha256 != entry.sha256 and not (entry.blob and blob.startswith(entry.blob)):
        upstream = f" or git blob {entry.blob}" if entry.blob else ""
        raise ValueError(f"{path}: not the trace perfkit knows as {name!r} (SHA-256 {entry.sha256[:12]}…"
                         f"{upstream}): get {entry.path} again from {entry.repository} at {entry.commit}")
    return path


def has_trace(name: str, root: str | os.PathLike | None = None) -> bool:
    """Whether :func:`published_trace` would find ``name``'s file (its checksum is checked only there)."""
    entry = _entry(name)
    try:
        return (traces_root(root) / entry.file).is_file()
    except TracesMissing:
        return False


def published_trace_or_none(name: str, *, root: str | os.PathLike | None = None) -> Path | None:
    """:func:`published_trace`, or None where the folder (or the file) is absent: for chapters that then
    say the published traces are not here."""
    return published_trace(name, root=root) if has_trace(name, root) else None


def trace_meta(name: str) -> dict[str, Any]:
    """The provenance of trace ``name`` as a frame's metadata (``published_by``, ``published_date``,
    ``published_detail``, ``device_name``, ``device``, …), which :func:`perfkit.provenance.from_meta`
    labels."""
    e = _entry(name)
    return {"published_by": e.publisher, "published_date": e.recorded, "published_detail": e.software,
            "device_name": e.gpu, "device": e.device, "device_kind": "gpu", "title": e.title, "ran": e.ran,
            "source_name": e.name, "source_repository": e.repository, "source_commit": e.commit,
            "source_files": [e.path], "licence": e.licence, "caveat": e.caveat, "training": e.training,
            "timing": "torch.profiler (Kineto, CUPTI): each GPU kernel's start and duration on the device",
            "complete": True}
