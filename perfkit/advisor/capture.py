"""One forward pass that records the shape of every op a model runs, on the meta device when it can.

:func:`capture` runs ``model(*inputs)`` once under a ``TorchFunctionMode`` that records the torch
functions the advisor knows (:data:`RECORDED`), each with the qualified name of the innermost
module running it (as in ``model.named_modules()``), and marks which tensors come from the
inputs or the parameters, so that ops on constants (masks, position tables) are left out. Each
tensor's :class:`TensorInfo` says which recorded call computed it (``source``, through views and
casts), so the advisor can follow the data: which layers feed a residual stream, which convolution
reads the images.

- **meta path**: a model whose parameters are on the meta device runs as it is; a model with real
  weights is copied to the meta device first (parameters and buffers replaced, never copied), so
  a multi-billion-parameter model is checked without allocating its weights. Meta tensors hold no
  values: where the model checks a boolean tensor's value (``bool(mask.all())``, as transformers
  does to skip an all-ones attention mask) the answer is True, and ``Capture.assumed`` counts how often;
- **real path**: if the meta copy cannot run (an op without a meta kernel, a data-dependent
  branch), the model itself runs, in eval mode (batch-norm statistics stay as they were) and
  without autograd.

Nothing of the user's model changes: hooks are removed and train/eval flags restored in a
``finally``, and the forward pass runs without gradients.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["Call", "Capture", "ModuleRun", "RECORDED", "TensorInfo", "capture", "canonical_op"]

#: Function names (after :func:`canonical_op`) recorded: the ops the advisor maps, and compute ops
#: it knows it cannot map (reported as unmapped rather than silently dropped).
RECORDED = frozenset({
    "linear", "conv1d", "conv2d", "matmul", "bmm", "baddbmm", "addmm", "mm",
    "scaled_dot_product_attention", "lstm", "gru", "rnn_tanh", "rnn_relu", "embedding",
    "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "cross_entropy",
    "layer_norm", "rms_norm", "batch_norm", "dropout", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "add", "sub", "mul", "div", "pow", "rsqrt", "sqrt", "exp", "neg", "where", "masked_fill", "mean", "sum",
    "square", "sin", "cos", "erf", "clamp", "hardtanh", "leaky_relu", "elu", "mish", "softplus",
    "pad", "adaptive_avg_pool1d", "adaptive_max_pool2d", "getitem", "group_norm", "instance_norm", "_weight_norm",
    # compute ops with no mapping (listed under unmapped)
    "einsum", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "embedding_bag",
    "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
    "interpolate", "upsample", "lstm_cell", "gru_cell", "rnn_tanh_cell",
    # composites whose insides torch's function mode cannot see: mapped from their arguments
    "multi_head_attention_forward", "_native_multi_head_attention",
})

_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub",
            "clip": "clamp", "max_pool2d_with_indices": "max_pool2d"}


def canonical_op(name: str) -> str:
    """A torch function's name without dunders, in-place or reflected forms: ``__iadd__`` → ``add``."""
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core[:1] in ("i", "r") and _ALIASES.get(core[1:], core[1:]) in RECORDED:
            core = core[1:]
    else:
        core = name.rstrip("_")
    return _ALIASES.get(core, core)


@dataclass(frozen=True)
class TensorInfo:
    """What the advisor keeps of a tensor: its shape, dtype and layout, never its values."""

    shape: tuple[int, ...]
    dtype: str  # the torch dtype's name, e.g. "float32", "int64"
    nhwc: bool  # a 4-D tensor stored channels-last (channels the fastest-moving dim, C > 1)
    derived: bool  # computed from the example inputs or the parameters
    is_input: bool  # one of the example inputs, or a view, cast or copy of them alone (needs no gradient)
    requires_grad: bool = True  # for a parameter: trained (False: frozen, no weight gradient)
    ident: int = field(default=-1, compare=False)  # the same number for the same tensor within a capture
    source: int = field(default=-1, compare=False)  # index of the recorded Call that computed it (through
    # views, casts and reshapes); -1 for an input, a parameter or a constant

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Call:
    """One recorded torch function call: ``op`` in the module ``layer`` (qualified name, "" = the model)."""

    index: int
    layer: str
    module: str  # the module's class name
    op: str  # canonical_op(function name)
    args: tuple
    kwargs: dict
    output: Any  # TensorInfo, a tuple of them, or a plain value


@dataclass(frozen=True)
class ModuleRun:
    """One call of a module: its name, class, whether it has children, and the calls made inside."""

    layer: str
    module: str
    leaf: bool
    inputs: tuple  # TensorInfo of each tensor argument
    first_call: int  # index of the first Call made inside it
    last_call: int  # index after the last Call made inside it
    computes: bool = True  # its output comes from the inputs or the parameters (not only from constants)


@dataclass
class Capture:
    """What :func:`capture` learned: the calls, the module runs, the path taken and why."""

    calls: list[Call] = field(default_factory=list)
    modules: list[ModuleRun] = field(default_factory=list)
    path: str = "meta"  # "meta" or "real"
    note: str = ""  # why the real path was taken, if it was
    input_shapes: tuple = ()
    assumed: int = 0  # checks of a boolean meta tensor's value answered True (an all-ones mask)


def _nhwc(t: torch.Tensor) -> bool:
    if t.dim() != 4 or t.shape[1] <= 1:
        return False
    return t.stride(1) == 1 and t.stride(3) == t.shape[1]


#: Reads of a value that a meta tensor does not have. On a boolean meta tensor (``bool(mask.all())``,
#: a check that an attention mask is all ones) they answer True, as an all-ones mask would.
_VALUE_READS = frozenset({"__bool__", "item"})

#: Recorded ops that only copy or index their input (their bytes may count; where the data came from does not
#: change).
_COPIES = frozenset({"pad", "getitem"})


class _Recorder(TorchFunctionMode):
    def __init__(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> None:
        super().__init__()
        self.derived = WeakIdKeyDictionary()
        self.inputs = WeakIdKeyDictionary()
        self.idents = WeakIdKeyDictionary()  # tensor → its number in this capture
        self.sources = WeakIdKeyDictionary()  # tensor → index of the recorded call that computed it
        for t in params:
            self.derived[t] = True
        for t in inputs:
            self.derived[t] = True
            self.inputs[t] = True
        self.calls: list[Call] = []
        self.stack: list[tuple[str, str]] = [("", "")]
        self.assumed = 0  # value reads answered True on a meta tensor
        self._next = 0

    def info(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        ident = self.idents.get(value)
        if ident is None:
            ident = self.idents[value] = self._next
            self._next += 1
        return TensorInfo(tuple(int(d) for d in value.shape), str(value.dtype).removeprefix("torch."),
                          _nhwc(value), value in self.derived, value in self.inputs, value.requires_grad,
                          ident, self.sources.get(value, -1))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name in _VALUE_READS and args and isinstance(args[0], torch.Tensor) and args[0].is_meta
                and args[0].dtype == torch.bool):
            self.assumed += 1
            return True
        out = func(*args, **kwargs)
        flat = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        mine = [t for t in flat if t in self.derived]
        if not mine:
            return out
        op = canonical_op(name)
        if op in RECORDED:  # the arguments as they were before this call (an in-place op changes its first)
            recorded = pytree.tree_map(self.info, tuple(args)), pytree.tree_map(self.info, dict(kwargs))
        if op in RECORDED and op not in _COPIES:
            source = len(self.calls)
        else:  # a view, a cast, a padded copy: the result comes from where its newest input came from
            source = max(self.sources.get(t, -1) for t in mine)
        # a view, cast or copy of the example inputs alone is still an input: it needs no gradient
        of_inputs = (op not in RECORDED or op in _COPIES) and all(t in self.inputs for t in mine)
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.derived[t] = True
                if source >= 0:
                    self.sources[t] = source
                if of_inputs:
                    self.inputs[t] = True
        if op in RECORDED:
            layer, module = self.stack[-1]
            self.calls.append(Call(len(self.calls), layer, module, op, *recorded, pytree.tree_map(self.info, out)))
        return out


class ForwardFailed(Exception):
    """The forward pass raised: ``layer`` and ``module`` name where, ``shapes`` its inputs."""

    def __init__(self, layer: str, module: str, shapes: list, error: BaseException) -> None:
        self.layer, self.module, self.shapes, self.error = layer, module, shapes, error
        where = f"layer {layer!r} ({module})" if layer else f"the model's own forward ({module})"
        hint = (" (meta tensors hold no values, and this model reads one: build it on the CPU instead, a "
                "small configuration of it if it is large, and perfkit runs it for real where meta cannot)"
                if "meta" in str(error) else "")
        super().__init__(f"the forward pass failed in {where} on inputs of shapes {shapes}: "
                         f"{type(error).__name__}: {error}{hint}")


def _run(model: nn.Module, args: tuple, kwargs: dict, training: bool, inputs: list) -> tuple[list, list, int]:
    """Run ``model`` once under the recorder; returns (calls, module runs, value reads answered True).
    Raises ForwardFailed."""
    names = {m: n for n, m in model.named_modules()}  # a shared module keeps its first name, as listed there
    rec = _Recorder(inputs, list(model.parameters()))
    runs: list[ModuleRun] = []
    open_runs: list[tuple[str, str, bool, tuple, int]] = []

    def pre(module, a, kw):
        name, kind = names.get(module, ""), type(module).__name__
        tensors = tuple(rec.info(t) for t in pytree.tree_leaves((a, kw)) if isinstance(t, torch.Tensor))
        open_runs.append((name, kind, not any(True for _ in module.children()), tensors, len(rec.calls)))
        rec.stack.append((name, kind))

    def post(module, a, kw, out):
        name, kind, leaf, tensors, first = open_runs.pop()
        rec.stack.pop()
        computes = any(isinstance(t, torch.Tensor) and t in rec.derived for t in pytree.tree_leaves(out))
        runs.append(ModuleRun(name, kind, leaf, tensors, first, len(rec.calls), computes))

    flags = {m: m.training for m in names}
    handles = []
    try:
        for m in names:
            handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(m.register_forward_hook(post, with_kwargs=True))
        model.train(training)
        with torch.no_grad(), rec:
            model(*args, **kwargs)
    except Exception as e:
        name, kind, _leaf, tensors, _first = open_runs[-1] if open_runs else ("", type(model).__name__, 0, (), 0)
        raise ForwardFailed(name, kind, [list(t.shape) for t in tensors], e) from e
    finally:
        for h in handles:
            h.remove()
        for m, flag in flags.items():
            m.training = flag
    return rec.calls, sorted(runs, key=lambda r: r.first_call), rec.assumed


def _to_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def _meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose parameters and buffers are empty meta tensors (no weight is copied)."""
    memo: dict[int, Any] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        meta = torch.empty_like(t, device="meta")
        memo[id(t)] = nn.Parameter(meta, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) else meta
    return copy.deepcopy(model, memo)


def _split(example_inputs: Any) -> tuple[tuple, dict]:
    if isinstance(example_inputs, Mapping):  # a dict, or a tokenizer's BatchEncoding
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def capture(model: nn.Module, example_inputs: Any, *, training: bool = True, meta: bool = True) -> Capture:
    """Run ``model`` once on ``example_inputs`` (a tensor, a tuple of arguments, or a Mapping of keyword
    arguments such as a dict or a tokenizer's ``BatchEncoding``) and record its ops. ``meta=False``
    skips the meta copy of a model with real weights.

    Raises :class:`ForwardFailed` when the forward pass fails on the path that must work.
    """
    args, kwargs = _split(example_inputs)
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    shapes = tuple(tuple(t.shape) for t in tensors)
    on_meta = [t.device.type == "meta" for t in (*model.parameters(), *model.buffers())]
    if any(on_meta) or any(t.device.type == "meta" for t in tensors) or meta:
        margs, mkwargs = pytree.tree_map(_to_meta, (args, kwargs))
        mtensors = [t for t in pytree.tree_leaves((margs, mkwargs)) if isinstance(t, torch.Tensor)]
        try:
            target = model if all(on_meta) else _meta_copy(model)
        except Exception as e:  # an attribute deepcopy cannot copy: run the model itself
            note = f"the model could not be copied to the meta device ({type(e).__name__}: {e})"
        else:
            try:
                calls, runs, assumed = _run(target, margs, mkwargs, training, mtensors)
                return Capture(calls, runs, "meta", "", shapes, assumed)
            except ForwardFailed as e:
                if any(on_meta) or any(t.device.type == "meta" for t in tensors):
                    raise
                note = f"the meta device could not run it: {e}"
    else:
        note = "meta=False"
    calls, runs, _ = _run(model, args, kwargs, False, tensors)
    return Capture(calls, runs, "real", note, shapes)
