"""Join every GPU kernel to the op that launched it, and every op to its layer, pass and profiler step.

The join, kernel by kernel:

1. **kernel → launch** by ``correlation``: the CUDA/HIP runtime call (``cudaLaunchKernel``,
   ``cudaMemcpyAsync``, …) that queued it, with its CPU thread and time;
2. **launch → innermost op**: the innermost CPU op on that thread whose span encloses the launch (one
   sweep over each thread's ops in time order, which also gives every op its parent);
3. **innermost op → the op perfkit maps**: the nearest enclosing op whose name :mod:`.opmap` maps
   (``aten::addmm`` under ``aten::linear``), or the outermost of the composites above it (a convolution
   owns its bias add and its memsets); with no mapped op above, the outermost ATen op (listed unmapped).

A kernel whose launch is missing from the trace (some traces lose runtime events) joins the op its
``External id`` names, as a shortcut only (it is missing or wrong in some real traces); a kernel that
joins nothing (a CUDA-graph replay, a kernel launched outside any op) is kept with ``op`` empty. An op's
layer is its innermost ``nn.Module`` frame (two levels, ``BertLayer_0/Linear_3``), a backward op's that
of the forward op with its autograd sequence number; its step is the ``ProfilerStep#N`` whose span holds
it (GPU-side step annotations where the launch is unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .events import TraceEvents
from .opmap import COMPOSITES, MAPPED

__all__ = ["KERNEL_COLUMNS", "Joined", "join"]

#: Columns of :func:`perfkit.read_trace`'s frame, one row per GPU kernel, copy or memset.
KERNEL_COLUMNS = ("rank", "step", "device", "stream", "kind", "name", "start_s", "time_s", "correlation", "launch",
                  "joined_by", "op_id", "op", "layer", "pass", "mapped", "bytes")

_WRAPPERS = ("autograd::engine::evaluate_function", "ProfilerStep#", "Optimizer.", "## ")


@dataclass
class Joined:
    """A trace joined: ``kernels`` (:data:`KERNEL_COLUMNS`) and ``ops`` (one row per op instance)."""

    kernels: pd.DataFrame
    ops: pd.DataFrame
    events: TraceEvents


def _is_backward(name: str) -> bool:
    return name.startswith("autograd::engine::evaluate_function") or name.endswith(("Backward", "Backward0",
                                                                                    "Backward1"))


def _sweep(ev: TraceEvents) -> tuple[np.ndarray, dict[int, int]]:
    """Each op's parent (-1 for none) and each launch's innermost enclosing op, by one time-ordered pass per
    thread: ops sorted by start (longest first on ties), launches after the ops starting with them."""
    n = len(ev.ops)
    corrs = np.fromiter(ev.launches.keys(), dtype=np.int64, count=len(ev.launches))
    lthreads = [t for t, _, _ in ev.launches.values()]
    threads = pd.factorize(pd.Index([o[2] for o in ev.ops] + lthreads))[0]
    ts = np.array([o[3] for o in ev.ops] + [t for _, t, _ in ev.launches.values()], dtype=np.float64)
    ends = np.array([o[4] for o in ev.ops], dtype=np.float64)
    is_launch = np.r_[np.zeros(n, dtype=np.int8), np.ones(len(corrs), dtype=np.int8)]
    neg_end = np.r_[-ends, np.zeros(len(corrs))]
    order = np.lexsort((neg_end, is_launch, ts, threads))
    parent = np.full(n, -1, dtype=np.int64)
    launch_op: dict[int, int] = {}
    stack: list[int] = []
    thread = -1
    threads_l, ts_l, ends_l = threads.tolist(), ts.tolist(), ends.tolist()
    corrs_l = corrs.tolist()
    for i in order.tolist():
        if threads_l[i] != thread:
            thread, stack = threads_l[i], []
        t = ts_l[i]
        if i < n:
            while stack and ends_l[stack[-1]] <= t:
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        else:
            while stack and ends_l[stack[-1]] < t:
                stack.pop()
            launch_op[corrs_l[i - n]] = stack[-1] if stack else -1
    return parent, launch_op


def _steps(ev: TraceEvents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CPU ``ProfilerStep#N`` spans, sorted: starts, ends and step numbers (µs)."""
    steps = sorted((o[3], o[4], int(o[0].split("#")[1])) for o in ev.ops
                   if o[0].startswith("ProfilerStep#") and o[0].split("#")[1].isdigit())
    if not steps:
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    arr = np.array(steps)
    return arr[:, 0], arr[:, 1], arr[:, 2].astype(np.int64)


def _step_at(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    if not len(starts):
        return np.full(len(ts), -1, dtype=np.int64)
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = (i >= 0) & (ts <= ends[np.clip(i, 0, None)])
    return np.where(ok, numbers[np.clip(i, 0, None)], -1)


def join(ev: TraceEvents) -> Joined:
    """Join ``ev``'s kernels to their ops (see the module docstring); times in seconds from the trace's start."""
    parent, launch_op = _sweep(ev)
    ops = ev.ops
    n = len(ops)
    unit = np.full(n, -1, dtype=np.int64)  # the op each op's kernels are charged to
    layer = [""] * n
    backward = np.zeros(n, dtype=bool)
    bseq = np.full(n, -1, dtype=np.int64)  # the autograd sequence number of the backward node above
    optimizer = np.zeros(n, dtype=bool)
    mapped_above = np.zeros(n, dtype=bool)  # some op above is mapped (not the outermost mapped op)
    seq_layer: dict[int, str] = {}
    inner: dict[int, set[str]] = {}  # a composite's op names inside it (which passes a 2021 backward ran)
    for i in np.argsort(np.array([o[3] for o in ops]), kind="stable").tolist() if n else []:
        name, kind, _, _, _, _, seq, _, _ = ops[i]
        p = parent[i]
        up_unit = unit[p] if p >= 0 else -1
        if kind == "module":
            outer = layer[p] if p >= 0 else ""
            layer[i] = f"{outer.rsplit('/', 1)[-1]}/{name}" if outer else name
        else:
            layer[i] = layer[p] if p >= 0 else ""
        backward[i] = (backward[p] if p >= 0 else False) or _is_backward(name)
        optimizer[i] = (optimizer[p] if p >= 0 else False) or name.startswith("Optimizer.")
        bseq[i] = seq if backward[i] and seq >= 0 and _is_backward(name) else (bseq[p] if p >= 0 else -1)
        if kind == "op" and seq >= 0 and not backward[i] and layer[i]:
            seq_layer.setdefault(seq, layer[i])
        mapped_above[i] = p >= 0 and (ops[p][0] in MAPPED or mapped_above[p])
        if name.startswith(_WRAPPERS) or _is_backward(name):
            unit[i] = -1
        elif kind != "op":  # an annotation or a module frame: its kernels belong to the op around it
            unit[i] = up_unit
        elif up_unit >= 0 and ops[up_unit][0] in COMPOSITES:
            unit[i] = up_unit  # a composite owns everything inside it
            inner.setdefault(int(up_unit), set()).add(name)
        elif name in MAPPED or up_unit < 0:
            unit[i] = i
        else:
            unit[i] = up_unit
    # a backward op without a module frame: the layer of the forward op with its sequence number
    layer = [lay or (seq_layer.get(int(bseq[i]), "") if backward[i] else "") for i, lay in enumerate(layer)]
    t0 = ev.first_ts_us if math.isfinite(ev.first_ts_us) else 0.0
    starts, ends, numbers = _steps(ev)
    ext_op = {o[5]: i for i, o in enumerate(ops) if o[5] >= 0 and o[1] == "op"}

    rows = []
    for name, kind, ts, dur, device, stream, corr, ext, nbytes in ev.kernels:
        launch = ev.launches.get(corr)
        op, joined = -1, "none"
        if launch is not None and launch_op.get(corr, -1) >= 0:
            op, joined = launch_op[corr], "correlation"
        elif ext in ext_op:
            op, joined = ext_op[ext], "external id"
        u = int(unit[op]) if op >= 0 else -1
        if op >= 0 and u < 0:  # launched from a wrapper or annotation itself
            u = op if ops[op][1] == "op" else -1
        if u < 0:
            joined = "none"
        rows.append((name, kind, ts, dur, device, stream, corr, launch[2] if launch else "", launch[1] if launch
                     else math.nan, joined, u, nbytes))
    k = pd.DataFrame(rows, columns=["name", "kind", "ts", "dur", "device", "stream", "correlation", "launch",
                                    "launch_ts", "joined_by", "op_id", "bytes"])
    op_ids = k["op_id"].to_numpy(dtype=np.int64)
    has = op_ids >= 0
    safe = np.where(has, op_ids, 0)
    names = np.array([o[0] for o in ops] or [""], dtype=object)
    k["op"] = np.where(has, names[safe] if n else "", "")
    k["layer"] = np.where(has, np.array(layer or [""], dtype=object)[safe], "")
    k["pass"] = np.where(has, np.where(backward[safe] if n else False, "backward",
                                       np.where(optimizer[safe] if n else False, "optimizer", "forward")), "")
    k["mapped"] = has & pd.Series(k["op"]).isin(MAPPED).to_numpy()
    k["step"] = np.where(k["launch_ts"].notna(), _step_at(k["launch_ts"].fillna(0).to_numpy(), starts, ends, numbers),
                         _gpu_step(ev, k["ts"].to_numpy()))
    k["start_s"] = (k["ts"] - t0) * 1e-6
    k["time_s"] = k["dur"] * 1e-6
    k["rank"] = ev.rank
    kernels = k[list(KERNEL_COLUMNS)].sort_values("start_s", kind="stable").reset_index(drop=True)

    units = sorted({int(u) for u in unit if u >= 0} | set(int(v) for v in op_ids[has]))
    op_frame = pd.DataFrame({
        "op_id": units, "op": [ops[u][0] for u in units], "layer": [layer[u] for u in units],
        "pass": ["backward" if backward[u] else "optimizer" if optimizer[u] else "forward" for u in units],
        "start_s": [(ops[u][3] - t0) * 1e-6 for u in units], "cpu_time_s": [(ops[u][4] - ops[u][3]) * 1e-6
                                                                           for u in units],
        "thread": [ops[u][2] for u in units], "args": [ops[u][8] for u in units],
        "inner": [frozenset(inner.get(u, ())) for u in units],
        "outermost": [not mapped_above[u] for u in units],
    })
    op_frame["step"] = _step_at(np.array([ops[u][3] for u in units], dtype=np.float64), starts, ends, numbers)
    op_frame["rank"] = ev.rank
    return Joined(kernels, op_frame, ev)


def _gpu_step(ev: TraceEvents, ts: np.ndarray) -> np.ndarray:
    steps = sorted((s, e, int(name.split("#")[1])) for name, s, e in ev.gpu_steps if name.split("#")[1].isdigit())
    if not steps:
        return np.full(len(ts), -1, dtype=np.int64)
    arr = np.array(steps)
    return _step_at(ts, arr[:, 0], arr[:, 1], arr[:, 2].astype(np.int64))
