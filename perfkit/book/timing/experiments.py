"""Timer validation: the same kernels timed by perfkit, Triton's do_bench and torch.utils.benchmark."""

from __future__ import annotations

import time

import pandas as pd

from ...matmul import matmul_fn
from ...placement import ensure_fits, resolve_device, timer
from ...units import MiB, format_time
from ...experiments.measure import sweep
from ...experiments.registry import register


def timer_cases(device: str, quick: bool = False) -> dict:
    """Name → zero-argument function: a ~5 µs elementwise op, a mid-size and a large GEMM, a large copy."""
    import torch

    n_elem = 1 << 20 if device == "cuda" else 1 << 16
    x = torch.randn(n_elem, device=device)
    y = torch.empty_like(x)
    big = (256 << 20) if quick or device == "cpu" else (1 << 30)
    src = torch.ones(big, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dt = "bfloat16"
    mid, large = (256, 1024) if quick or device == "cpu" else (2048, 8192)
    return {
        f"elementwise add, {n_elem * 4 / MiB:g} MiB fp32": lambda: torch.add(x, 1.0, out=y),
        f"gemm {mid}³ {dt}": matmul_fn(mid, mid, mid, dt, device),
        f"gemm {large}³ {dt}": matmul_fn(large, large, large, dt, device),
        f"copy {big // MiB} MiB": lambda: dst.copy_(src),
    }


def _timed(f):
    t0 = time.perf_counter()
    value = f()
    return value, time.perf_counter() - t0


@register("timer_validation", "Each case timed by perfkit.bench (L2 flushed, and with CUDA graphs), "
          "triton.testing.do_bench (median) and torch.utils.benchmark.Timer (blocked_autorange median)",
          {"case": "what is timed", "time_s": "perfkit.bench median, seconds (= perfkit_time_s)",
           "perfkit_time_s": "perfkit.bench median (L2 flushed), seconds",
           "perfkit_graph_time_s": "perfkit.bench median with cuda_graph=True (no flush), seconds",
           "triton_do_bench_s": "triton.testing.do_bench(return_mode='median'), seconds",
           "torch_timer_s": "torch.utils.benchmark.Timer.blocked_autorange().median, seconds",
           "perfkit_wall_s": "wall time perfkit.bench spent, seconds",
           "perfkit_graph_wall_s": "wall time of the CUDA-graph run, seconds",
           "triton_wall_s": "wall time do_bench spent, seconds",
           "torch_wall_s": "wall time Timer spent, seconds",
           "perfkit_vs_do_bench": "perfkit_time_s / triton_do_bench_s - 1",
           "perfkit_vs_torch_timer": "perfkit_time_s / torch_timer_s - 1"},
          needs=("cuda", "triton"))
def timer_validation(*, device="auto", quick=False, progress=True, on_row=None) -> pd.DataFrame:
    """Time each of :func:`timer_cases` with the three tools in the same run.

    On a CPU (``device="cpu"``, or no GPU) only perfkit and torch's Timer run (do_bench and CUDA
    graphs need a GPU; their columns are NaN), on smaller cases.
    """
    import torch
    import torch.utils.benchmark as tb

    device = resolve_device(device)
    on_gpu = device == "cuda"
    if on_gpu:
        import triton.testing

    ensure_fits((3 << 30) if on_gpu and not quick else (1 << 30), device, what="timer_validation")
    cases = timer_cases(device, quick)
    nan = float("nan")

    def measure(name):
        fn = cases[name]
        pk, pk_wall = _timed(lambda: timer(fn, device=device, label=name))
        pg, pg_wall, tr, tr_wall = None, nan, nan, nan
        if on_gpu:
            pg, pg_wall = _timed(lambda: timer(fn, device=device, cuda_graph=True, flush_l2=False, label=name))
            tr, tr_wall = _timed(lambda: triton.testing.do_bench(fn, return_mode="median") / 1e3)
        torch_timer = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        tt, tt_wall = _timed(lambda: torch_timer.blocked_autorange(min_run_time=0.2).median)
        return {"case": name, "time_s": pk.median, "perfkit_time_s": pk.median,
                "perfkit_graph_time_s": pg.median if pg else nan, "triton_do_bench_s": tr, "torch_timer_s": tt,
                "perfkit_wall_s": pk_wall, "perfkit_graph_wall_s": pg_wall, "triton_wall_s": tr_wall,
                "torch_wall_s": tt_wall, "perfkit_vs_do_bench": pk.median / tr - 1,
                "perfkit_vs_torch_timer": pk.median / tt - 1}

    return sweep(list(cases), measure, on_row=on_row, progress=progress, desc="timer validation")


#: The timers a reader compares, as ``timer_validation`` columns → table headers.
TIMER_COLUMNS = {"perfkit_time_s": "perfkit.bench", "perfkit_graph_time_s": "perfkit, CUDA graph",
                 "triton_do_bench_s": "do_bench", "torch_timer_s": "torch Timer"}


def timer_table(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """A ``timer_validation`` frame for a reader: one row per case, each timer's median time per
    call written with its unit (:func:`perfkit.units.format_time`; "–" where it did not run), and
    perfkit's difference from do_bench and from torch's Timer as percentages ("–" where missing).

    Timers that ran on no case (do_bench and CUDA graphs on a CPU) are left out. Pure: None in,
    None out (no recording yet), so a chapter passes it straight to :func:`perfkit.table`.
    """
    if frame is None:
        return None

    out = pd.DataFrame({"case": frame["case"].to_numpy()})
    for column, name in TIMER_COLUMNS.items():
        if column in frame and frame[column].notna().any():
            out[name] = [format_time(v) if pd.notna(v) else "–" for v in frame[column]]
    for column, name in (("perfkit_vs_do_bench", "perfkit vs do_bench"),
                         ("perfkit_vs_torch_timer", "perfkit vs Timer")):
        if column in frame and frame[column].notna().any():
            out[name] = [f"{v:+.1%}" if pd.notna(v) else "–" for v in frame[column]]
    return out


#: Kernels at least this long (seconds, do_bench's time) are where careful timers must agree.
AGREEMENT_FLOOR_S = 10e-6


def timer_agreement(frame: pd.DataFrame | None) -> dict | None:
    """How far perfkit.bench lies from do_bench in a GPU ``timer_validation`` frame: ``gap``, the
    median of ``|perfkit / do_bench − 1|`` over the cases of at least :data:`AGREEMENT_FLOOR_S`
    (``n`` of them), and ``copy_case`` and ``graph_ratio``, the copy's time replayed from a CUDA
    graph over its time launched plainly. None without do_bench timings (no frame, or a CPU run)."""
    if frame is None or "triton_do_bench_s" not in frame or not frame["triton_do_bench_s"].notna().any():
        return None
    long = frame[frame["triton_do_bench_s"] >= AGREEMENT_FLOOR_S]
    copy = frame[frame["case"].str.startswith("copy")]
    ratio = float(copy["perfkit_graph_time_s"].iloc[0] / copy["perfkit_time_s"].iloc[0]) if len(copy) else float("nan")
    return {"gap": float(long["perfkit_vs_do_bench"].abs().median()), "n": len(long),
            "copy_case": str(copy["case"].iloc[0]) if len(copy) else None, "graph_ratio": ratio}
