"""Synthetic Kineto traces for the tests of :mod:`perfkit.trace` (a helper, not a test module).

:class:`SyntheticTrace` builds, in memory, what ``torch.profiler`` writes for a tiny model on an H100:
one ``ProfilerStep#N`` per step, ``nn.Module`` frames, ATen ops with their ``record_shapes`` arguments,
the CUDA runtime calls that launch kernels, and the kernels, copies and collectives on the GPU, each
tied to its launch by ``correlation`` and to its op by ``External id``. ``.doc`` is the JSON document;
``.expect`` says, for each GPU event's correlation id, the op, layer and step perfkit must charge it to
and how it must join. :func:`write_trace` writes a document as ``.json`` or ``.json.gz``.

Two schemas: ``"current"`` (torch >= 1.10: ``cpu_op``, ``user_annotation``, ``cuda_runtime``,
``kernel``, ``gpu_memcpy``; float microsecond times) and ``"2021"`` (torch 1.8-1.9: ``Operator``,
``Runtime``, ``Kernel``, ``Memcpy``; the kernel's op id spelled ``external id``; integer times; no
``Concrete Inputs``, no module frames). Times are microseconds, as in Kineto.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Sequence

__all__ = ["BF16", "CONV", "F32", "GPU_CATS", "H100_NAME", "KERNELS", "LN", "MEMCPY_BYTES", "RELU", "SDPA",
           "Expected", "Gemm", "SyntheticTrace", "gpu_events", "kineto_trace", "write_trace"]

H100_NAME = "NVIDIA H100 80GB HBM3"
BF16 = "c10::BFloat16"
F32 = "float"

#: GPU event categories of both schemas (read_trace makes one row of each).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")

#: Kernel names, as CUDA, cuBLAS, cuDNN, flash attention and NCCL name them.
KERNELS = {
    "layer_norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
                  "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, "
                  "float*, float*, c10::BFloat16*)",
    "gemm_bf16": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                 "execute_segment_k_off_kernel__5x_cublas",
    "gemm_f32": "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_"
                "execute_segment_k_off_kernel__5x_cublas",
    "relu": "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
            "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
            "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
            "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, "
            "at::native::(anonymous namespace)::launch_clamp_scalar)",
    "conv": "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x3_"
            "nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x3_nhwc_align8::Params)",
    "bias": "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
            "at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, "
            "at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1}>(int, "
            "at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >("
            "at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1})",
    "flash": "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, "
             "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, "
             "cutlass::bfloat16_t> >, false, false, false, false, false, true, false>("
             "pytorch_flash::Flash_fwd_params)",
    "memcpy": "Memcpy HtoD (Pageable -> Device)",
    "nccl": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "unjoined": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
                "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, "
                "std::array<char*, 1ul>)",
}

#: The convolution: input N×C×H×W, weight K×(C/groups)×R×S, stride (2, 1), padding (1, 0), groups 2:
#: P = (56 + 2 - 3) // 2 + 1 = 28, Q = (56 + 0 - 3) // 1 + 1 = 54.
CONV = {"N": 8, "C": 64, "H": 56, "W": 56, "K": 128, "R": 3, "S": 3, "stride": (2, 1), "padding": (1, 0),
        "dilation": (1, 1), "groups": 2}
#: Flash attention: batch, heads, query length, key length, head dim; not causal.
SDPA = {"B": 2, "H": 8, "L": 256, "S": 256, "E": 64}
#: The layer norm's input (rows × features) and the ReLU's.
LN = (128, 1024)
RELU = (128, 2048)
#: The host-to-device copy's bytes and the all-reduce's elements.
MEMCPY_BYTES = 128 * 1024 * 2
NCCL_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class Gemm:
    """One ``nn.Linear``: ``aten::linear`` → ``aten::addmm`` on an M×K input and a K×N weight; ``dtype`` is
    the profiler's ``Input type`` (``c10::BFloat16``, ``float``)."""

    M: int
    N: int
    K: int
    dtype: str = BF16


@dataclass(frozen=True)
class Expected:
    """What perfkit must make of one GPU event: the op it is charged to ("" for none), how it joins, its layer
    and profiler step, its kind and its duration (µs, as written)."""

    name: str
    kind: str
    op: str
    joined_by: str
    layer: str
    step: int
    dur_us: float
    tag: str


@dataclass
class SyntheticTrace:
    """A synthetic ``torch.profiler`` trace: ``.doc`` (the JSON document) and ``.expect`` (correlation id →
    :class:`Expected`).

    - ``steps``, ``first_step``: profiler steps ``ProfilerStep#first_step`` … (each runs the whole model);
    - ``gemms``: the ``nn.Linear`` layers, in order;
    - ``wrong_external_id``: the first GEMM kernel of each step carries the ReLU's ``External id`` (its
      correlation still names the addmm's launch, which must win);
    - ``orphan_relu``: the ReLU kernel's launch event is missing (it must join by ``External id``);
    - ``unjoined_kernel``: one more kernel per step with neither a launch nor an ``External id``;
    - ``nccl_annotation``: the NCCL kernel is launched, as torch.distributed does, inside a
      ``nccl:all_reduce`` user annotation inside ``record_param_comms`` inside ``c10d::allreduce_``
      (else directly inside ``c10d::allreduce_``);
    - ``cpu_only``: no runtime calls and no GPU events (a CPU profile);
    - ``gpu_step_annotations``: GPU-side ``ProfilerStep#N`` spans (current schema only);
    - ``device_name``: the GPU ``deviceProperties`` names (None: no ``deviceProperties``);
    - ``rank``, ``world_size``: written as ``distributedInfo`` (rank None: none written);
    - ``schema``: ``"current"`` or ``"2021"``; ``schema_version``: the ``schemaVersion`` written (None: none).
    """

    steps: int = 1
    first_step: int = 1
    gemms: Sequence[Gemm] = (Gemm(128, 512, 768),)
    layer_norm: bool = True
    relu: bool = True
    conv: bool = True
    sdpa: bool = True
    memcpy: bool = True
    nccl: bool = True
    wrong_external_id: bool = False
    orphan_relu: bool = False
    unjoined_kernel: bool = False
    nccl_annotation: bool = False
    cpu_only: bool = False
    gpu_step_annotations: bool = True
    device_name: str | None = H100_NAME
    rank: int | None = None
    world_size: int = 2
    schema: str = "current"
    schema_version: int | None = 1
    doc: dict = field(init=False)
    expect: dict[int, Expected] = field(init=False)

    def __post_init__(self) -> None:
        if self.schema not in ("current", "2021"):
            raise ValueError(f"schema must be 'current' or '2021', got {self.schema!r}")
        self._old = self.schema == "2021"
        self._events: list[dict] = []
        self.expect = {}
        self._t: float = 1_000_000 if self._old else 1_000_000.125  # the CPU clock, µs
        self._g: float = self._t + 40  # the GPU clock
        self._ext = 0
        self._corr = 5000
        self._pid = 4242
        self._tid: Any = "4242" if self._old else 4242
        self._stack: list[tuple[str, str]] = []  # (kind, name) of the open spans
        self._step_events: list[dict] = []
        self._build()

    # -- clocks, spans and launches ------------------------------------------------------------------------
    def _tick(self, us: float) -> None:
        self._t += int(round(us)) if self._old else us

    def _time(self, x: float) -> float:
        return int(round(x)) if self._old else round(x, 3)

    def _cat(self, current: str, old: str) -> str:
        return old if self._old else current

    def _layer(self) -> str:
        return "/".join([n for k, n in self._stack if k == "module"][-2:])

    @contextlib.contextmanager
    def _span(self, name: str, kind: str, args: dict | None = None) -> Iterator[SimpleNamespace]:
        """A CPU span (kind "op", "annotation" or "module") around what the ``with`` body adds."""
        self._ext += 1
        span = SimpleNamespace(ts=self._t, ext=self._ext)
        self._stack.append((kind, name))
        self._tick(1.5)
        yield span
        self._tick(1.25)
        self._stack.pop()
        if kind == "module":
            cat, ev_name = "python_function", f"nn.Module: {name}"
            ev_args: dict[str, Any] = {"Python parent id": 1, "Python id": span.ext, "Python module id": 0}
        else:
            cat = self._cat("cpu_op" if kind == "op" else "user_annotation", "Operator")
            ev_name, ev_args = name, {"External id": span.ext, "Record function id": 0}
        for key, value in (args or {}).items():
            if not (self._old and key in ("Concrete Inputs", "Input Strides")):
                ev_args[key] = value
        self._events.append({"ph": "X", "cat": cat, "name": ev_name, "pid": self._pid, "tid": self._tid,
                             "ts": self._time(span.ts), "dur": self._time(self._t - span.ts),
                             "args": ev_args})

    def _op(self, name: str, args: dict | None = None):
        return self._span(name, "op", args)

    def _module(self, name: str):
        return contextlib.nullcontext() if self._old else self._span(name, "module")  # none in 2021

    def _launch(self, tag: str, dur: float, ext: int | None, charged_to: str, step: int, *,
                kind: str = "kernel", stream: int = 7, launch_name: str = "cudaLaunchKernel",
                with_launch: bool = True, joined_by: str | None = None,
                nbytes: int | None = None) -> dict | None:
        """A runtime call at the CPU clock (inside the open spans) and the GPU event it queues; ``ext`` is
        the op id the GPU event carries (None: none)."""
        if self.cpu_only:
            self._tick(4.5)
            return None
        self._corr += 1
        corr, name = self._corr, KERNELS[tag]
        dur = int(round(dur)) if self._old else dur
        ext_key = self._cat("External id", "external id")
        launch_ts = self._t
        if with_launch:
            self._events.append({"ph": "X", "cat": self._cat("cuda_runtime", "Runtime"), "name": launch_name,
                                 "pid": self._pid, "tid": self._tid, "ts": self._time(launch_ts),
                                 "dur": self._time(3.5), "args": {"cbid": 211, "correlation": corr,
                                                                  ext_key: ext}})
            self._events.append({"ph": "s", "id": corr, "pid": self._pid, "tid": self._tid,
                                 "ts": self._time(launch_ts), "cat": "ac2g", "name": "ac2g"})
        self._tick(4.5)
        start = max(self._g, launch_ts + 6)
        self._g = start + dur + 2.75
        args: dict[str, Any] = {"device": 0, "context": 1, "stream": stream, "correlation": corr}
        if ext is not None:
            args[ext_key] = ext
        if kind == "kernel":
            args.update({"registers per thread": 32, "grid": [132, 1, 1], "block": [128, 1, 1]})
        if nbytes is not None:
            args["bytes"] = nbytes
        cat = self._cat("kernel", "Kernel") if kind == "kernel" else self._cat("gpu_memcpy", "Memcpy")
        tid = f"stream {stream}" if self._old else stream
        ev = {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": self._time(start), "dur": dur,
              "args": args}
        self._events.append(ev)
        self._step_events.append(ev)
        # without its launch, a GPU event's step comes from the GPU-side ProfilerStep spans (none in 2021)
        known_step = with_launch or (self.gpu_step_annotations and not self._old)
        how = joined_by or ("correlation" if with_launch else "external id")
        self.expect[corr] = Expected(name, kind, charged_to, how, self._layer() if charged_to else "",
                                     step if known_step else -1, dur, tag)
        return ev

    # -- the model -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        if not self._old:
            self._events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                                 "tid": "PyTorch Profiler", "ts": self._t - 500, "dur": 10,
                                 "args": {"Op count": 0}})
        for s in range(self.first_step, self.first_step + self.steps):
            self._step(s)
            self._tick(20)
        self._events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": self._pid, "tid": self._tid,
                             "ts": self._time(self._t), "args": {"Bytes": 4, "Device Id": 0}})
        self._events.append({"name": "process_name", "ph": "M", "ts": self._time(self._t), "pid": self._pid,
                             "tid": 0, "args": {"name": "python3"}})
        doc: dict[str, Any] = {}
        if self.schema_version is not None:
            doc["schemaVersion"] = self.schema_version
        if self.device_name is not None:
            doc["deviceProperties"] = [{"id": 0, "name": self.device_name, "totalGlobalMem": 85018279936,
                                        "computeMajor": 9, "computeMinor": 0, "numSms": 132,
                                        "maxThreadsPerBlock": 1024, "warpSize": 32}]
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": self.world_size}
        doc["traceEvents"] = self._events
        doc["displayTimeUnit"] = "ms"
        self.doc = doc

    def _step(self, s: int) -> None:
        self._step_events = []
        with self._span(f"ProfilerStep#{s}", "annotation"):
            with self._module("Net_0"):
                if self.layer_norm:
                    self._layer_norm(s)
                first = [self._linear(s, i, g) for i, g in enumerate(self.gemms)]
                if self.relu:
                    relu_ext = self._relu(s)
                    if self.wrong_external_id and first and first[0] is not None:
                        first[0]["args"][self._cat("External id", "external id")] = relu_ext  # a trap
                if self.conv:
                    self._conv(s)
                if self.sdpa:
                    self._attention(s)
            if self.memcpy:
                self._copy(s)
            if self.nccl:
                self._allreduce(s)
            if self.unjoined_kernel:
                self._launch("unjoined", 1.625, None, "", s, with_launch=False, joined_by="none")
        if self.gpu_step_annotations and not self._old and self._step_events:
            start = min(e["ts"] for e in self._step_events) - 0.5
            end = max(e["ts"] + e["dur"] for e in self._step_events) + 0.5
            self._events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{s}",
                                 "pid": 0, "tid": 7, "ts": round(start, 3), "dur": round(end - start, 3),
                                 "args": {"External id": 0}})

    def _layer_norm(self, s: int) -> None:
        rows, d = LN
        with self._module("LayerNorm_0"), self._op("aten::layer_norm", {
                "Input Dims": [[rows, d], [], [d], [d], [], []],
                "Input type": [BF16, "ScalarList", BF16, BF16, "Scalar", "Scalar"],
                "Concrete Inputs": ["", f"[{d}]", "", "", "1e-05", "True"]}):
            with self._op("aten::native_layer_norm", {
                    "Input Dims": [[rows, d], [], [d], [d], []],
                    "Input type": [BF16, "ScalarList", BF16, BF16, "Scalar"],
                    "Input Strides": [[d, 1], [], [1], [1], []],
                    "Concrete Inputs": ["", f"[{d}]", "", "", "1e-05"]}) as ln:
                self._launch("layer_norm", 3.072, ln.ext, "aten::native_layer_norm", s)

    def _linear(self, s: int, i: int, g: Gemm) -> dict | None:
        with self._module(f"Linear_{i}"), self._op("aten::linear", {
                "Input Dims": [[g.M, g.K], [g.N, g.K], [g.N]], "Input type": [g.dtype] * 3,
                "Concrete Inputs": ["", "", ""]}):
            with self._op("aten::t", {"Input Dims": [[g.N, g.K]], "Input type": [g.dtype]}):
                with self._op("aten::transpose", {"Input Dims": [[g.N, g.K], [], []],
                                                  "Input type": [g.dtype, "Scalar", "Scalar"],
                                                  "Concrete Inputs": ["", "0", "1"]}):
                    pass
            with self._op("aten::addmm", {"Input Dims": [[g.N], [g.M, g.K], [g.K, g.N], [], []],
                                          "Input type": [g.dtype] * 3 + ["Scalar", "Scalar"],
                                          "Input Strides": [[1], [g.K, 1], [1, g.K], [], []],
                                          "Concrete Inputs": ["", "", "", "1", "1"]}) as mm:
                tag = "gemm_f32" if g.dtype == F32 else "gemm_bf16"
                return self._launch(tag, 10.125 + i, mm.ext, "aten::addmm", s)

    def _relu(self, s: int) -> int:
        with self._module("ReLU_0"), self._op("aten::relu", {
                "Input Dims": [list(RELU)], "Input type": [BF16], "Input Strides": [[RELU[1], 1]],
                "Concrete Inputs": [""]}) as relu:
            self._launch("relu", 2.375, relu.ext, "aten::relu", s, with_launch=not self.orphan_relu)
        return relu.ext

    def _conv(self, s: int) -> None:
        c = CONV
        x = [c["N"], c["C"], c["H"], c["W"]]
        w = [c["K"], c["C"] // c["groups"], c["R"], c["S"]]
        out = [c["N"], c["K"], 28, 54]
        args = {"Input Dims": [x, w, [c["K"]], [], [], [], [], [], []],
                "Input type": [BF16, BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar",
                               "ScalarList", "Scalar"],
                "Input Strides": [[c["C"] * c["H"] * c["W"], c["H"] * c["W"], c["W"], 1], [w[1] * 9, 9, 3, 1],
                                  [1], [], [], [], [], [], []],
                "Concrete Inputs": ["", "", "", _ints(c["stride"]), _ints(c["padding"]), _ints(c["dilation"]),
                                    "False", "[0, 0]", str(c["groups"])]}
        with self._module("Conv2d_0"), self._op("aten::conv2d", {
                "Input Dims": [x, w, [c["K"]], [], [], [], []],
                "Input type": [BF16] * 3 + ["ScalarList"] * 3 + ["Scalar"]}):
            with self._op("aten::convolution", args), self._op("aten::_convolution", args):
                with self._op("aten::cudnn_convolution", {"Input Dims": [x, w]}) as cc:
                    self._launch("conv", 61.5, cc.ext, "aten::convolution", s)
                with self._op("aten::add_", {"Input Dims": [out, [1, c["K"], 1, 1], []],
                                             "Input type": [BF16, BF16, "Scalar"]}) as add:
                    self._launch("bias", 3.5, add.ext, "aten::convolution", s)  # the composite owns it

    def _attention(self, s: int) -> None:
        a = SDPA
        q, kv = [a["B"], a["H"], a["L"], a["E"]], [a["B"], a["H"], a["S"], a["E"]]
        with self._module("Attention_0"), self._op("aten::scaled_dot_product_attention", {
                "Input Dims": [q, kv, kv, [], [], []], "Input type": [BF16] * 3}):
            with self._op("aten::_scaled_dot_product_flash_attention", {
                    "Input Dims": [q, kv, kv, [], [], [], []],
                    "Input type": [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar"],
                    "Concrete Inputs": ["", "", "", "0.", "False", "False", "0.125"]}):
                with self._op("aten::_flash_attention_forward", {"Input Dims": [q, kv, kv]}) as fa:
                    self._launch("flash", 20.25, fa.ext, "aten::_scaled_dot_product_flash_attention", s)

    def _copy(self, s: int) -> None:
        x = [128, 1024]
        with self._op("aten::to", {"Input Dims": [x, [], [], [], []],
                                   "Input type": [BF16, "Scalar", "Scalar", "Scalar", "Scalar"]}):
            with self._op("aten::_to_copy", {"Input Dims": [x], "Input type": [BF16]}):
                with self._op("aten::copy_", {"Input Dims": [x, x, []], "Input type": [BF16, BF16, "Scalar"],
                                              "Concrete Inputs": ["", "", "False"]}) as cp:
                    self._launch("memcpy", 25.5, cp.ext, "aten::copy_", s, kind="memcpy",
                                 launch_name="cudaMemcpyAsync", nbytes=MEMCPY_BYTES)

    def _allreduce(self, s: int) -> None:
        with self._op("c10d::allreduce_", {"Input Dims": [[[NCCL_ELEMENTS]], [], [], [], []],
                                           "Input type": ["TensorList", "", "", "", "Scalar"],
                                           "Concrete Inputs": ["", "", "", "", "-1"]}) as ar:
            if not self.nccl_annotation:
                self._launch("nccl", 40.0, ar.ext, "c10d::allreduce_", s, stream=20)
                return
            with self._op("record_param_comms", {"Input Dims": [[[NCCL_ELEMENTS]]],
                                                 "Input type": ["TensorList"]}):
                with self._span("nccl:all_reduce", "annotation", {"Input Dims": [[NCCL_ELEMENTS]],
                                                                  "Input type": [BF16]}) as ann:
                    self._launch("nccl", 40.0, ann.ext, "c10d::allreduce_", s, stream=20)


def _ints(v: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, v)) + "]"


def kineto_trace(**kw: Any) -> dict:
    """The JSON document of a :class:`SyntheticTrace` built with ``kw``."""
    return SyntheticTrace(**kw).doc


def write_trace(path: str | Path, doc: dict | SyntheticTrace) -> Path:
    """Write ``doc`` as JSON to ``path``, gzipped when the name ends in ``.gz``; returns the path."""
    path = Path(path)
    text = json.dumps(doc.doc if isinstance(doc, SyntheticTrace) else doc)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def gpu_events(doc: dict) -> Iterator[dict]:
    """The document's GPU kernels, copies and memsets (read_trace makes one row of each)."""
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            yield e
