"""Baidu DeepBench's V100/P100 tables in perfkit's columns: one frame per GPU, with its metadata.

The published CSVs (``deepbench_{gemm,conv,rnn}_v100_p100.csv``) keep the workbooks' own columns.
perfkit's chapters read GEMMs as ``M, N, K`` (the dimensions the benchmark *ran*), ``layout``,
``dtype``/``math_dtype`` and ``time_s`` in seconds; :func:`convert` makes that frame for one GPU (rows in
workbook order: fp32 sheet, then fp16 sheet) and :func:`metadata` the provenance a figure's label reads.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

REPOSITORY, COMMIT = "https://github.com/baidu-research/DeepBench", "da81ba7820739e2e506dc27f382d15be5479f98f"

ROWS_PER_SHEET = {"gemm": 160, "conv": 94, "rnn": 53}
FP32, V100_FP16, P100_FP16 = "Results FP32", "Results - FP16 ip, Mixed math", "Results - Psuedo FP16"
#: sheet → (storage dtype, math dtype, what the sheet holds)
SHEETS = {
    FP32: ("float32", "float32", "float32 storage, float32 math"),
    V100_FP16: ("float16", "float16", "float16 storage, fp16 multiply with fp32 accumulation on Tensor Cores (per "
                "the sheet; the code at this commit passes an fp16 compute type, which has the same Tensor-Core "
                "peak on V100)"),
    P100_FP16: ("float16", "float32", "'Psuedo FP16' (sic): float16 storage, float32 math (P100 has no Tensor "
                "Cores; these rows run at the fp32 rate)"),
}
TIMING = ("One warm-up call, then N back-to-back calls timed with std::chrono::steady_clock around the loop and "
          "one cudaDeviceSynchronize; the per-call mean is printed in whole microseconds (truncated). Launches "
          "are pipelined (no per-call launch latency) and L2 is not flushed between calls.")
GPUS = {
    "v100": dict(
        device_name="Tesla V100-SXM2", device="V100-SXM2", device_name_in_source="NVIDIA V100",
        device_note=("The workbook names an 'NVIDIA V100' on a Xeon E5-2698 v4 host, the CPU of NVIDIA's DGX-1, "
                     "whose V100s are SXM2 modules; perfkit models it as the V100-SXM2 (the fp32 sheet's best "
                     "GEMM, 14.8 TFLOP/s, is 94 % of its 15.7 TFLOP/s peak)."),
        published_date="2019", source_file="results/train/DeepBench_NV_V100.xlsx",
        detail={"gemm": "cuBLAS 10.1", "conv": "cuDNN 7.6", "rnn": "cuDNN 7.6"}),
    "p100": dict(
        device_name="Tesla P100", device="P100-PCIe", device_name_in_source="NVIDIA Tesla P100",
        device_note=("The workbook names only 'NVIDIA Tesla P100'. Its best fp32 GEMM, 9.12 TFLOP/s, is 98 % of "
                     "the PCIe card's 9.3 TFLOP/s peak and 86 % of the SXM2 module's 10.6, while the V100 sheet "
                     "reaches 94 % of its peak, so perfkit models it as the P100-PCIe."),
        published_date="2018", source_file="results/train/DeepBench_NV_P100.xlsx",
        detail={"gemm": "cuBLAS 8.0", "conv": "cuDNN 6.0", "rnn": "cuDNN 6.0"}),
}
DTYPE = {"dtype": "storage dtype of the operands (float32 or float16)",
         "math_dtype": "dtype whose peak bounds the math (float16 only on V100 Tensor Cores)"}
WHERE = {"sheet": "worksheet of the workbook the row comes from", "row": "1-based spreadsheet row in that sheet"}
COLUMNS = {
    "gemm": {
        "M": "rows of C = A·B, as run (elements)", "N": "columns of C, as run (elements)",
        "K": "inner dimension, as run (elements)", "layout": "transposes of A then B, N or T each (column-major)",
        **DTYPE, "time_s": "seconds per call (published, whole microseconds)",
        "tflops": "2·M·N·K / time_s / 1e12 with the run dimensions (TFLOP/s)",
        "M_sheet": "M as the sheet prints it", "N_sheet": "N as the sheet prints it",
        "K_sheet": "K as the sheet prints it (1530 where 1536 ran)",
        "app": "application the sheet names (empty on P100: its workbook names none)",
        "note": "caveat (sheet K = 1530; time under 10 microseconds), or the sheet's comment", **WHERE},
    "conv": {
        "W": "input width (pixels)", "H": "input height (pixels)", "C": "input channels", "N": "batch size",
        "K": "output channels (filters)", "R": "filter height (pixels)", "S": "filter width (pixels)",
        "pad_h": "padding along H (pixels)", "pad_w": "padding along W (pixels)", "stride_h": "stride along H",
        "stride_w": "stride along W", **DTYPE, "time_s": "forward seconds per call",
        "bwd_inputs_time_s": "backward-data seconds per call (empty on V100 for first layers, C = 1 or 3: not run)",
        "bwd_params_time_s": "backward-filter seconds per call",
        "fwd_algo": "cuDNN's forward algorithm (so not always implicit GEMM)", **WHERE},
    "rnn": {
        "cell": "vanilla, lstm or gru", "hidden": "hidden units", "batch": "batch size",
        "timesteps": "sequence length", **DTYPE, "time_s": "forward seconds per layer call",
        "bwd_inputs_time_s": "backward-data seconds (empty where the sheet gives only bwd_time_s)",
        "bwd_weights_time_s": "backward-weights seconds (empty where the sheet gives only bwd_time_s)",
        "bwd_time_s": "total backward seconds (only the P100 pseudo-fp16 sheet gives it)",
        "app": "application the sheet names (empty on P100's pseudo-fp16 sheet)", **WHERE},
}
DESCRIPTION = {
    "gemm": "DeepBench training GEMMs (cublasGemmEx, beta = 1): 160 shapes in float32 and in float16",
    "conv": "DeepBench training convolutions (cuDNN): forward, backward-data and backward-filter times",
    "rnn": "DeepBench training RNN layers (cuDNN): vanilla, LSTM and GRU, forward and backward times",
}
#: (gpu, sheet, row, column, was, now): cells cut off in the workbook (the extract copies cells verbatim).
FIXES = {"conv": [("v100", FP32, 234, "fwd_algo", "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM"),
                  ("v100", FP32, 236, "fwd_algo", "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM")]}


def _gemm(src: pd.DataFrame) -> pd.DataFrame:
    out = src[["M_run", "N_run", "K_run"]].set_axis(["M", "N", "K"], axis=1)
    out["layout"] = src["a_t"] + src["b_t"]
    out[["dtype", "math_dtype", "time_s"]] = src[["dtype", "math_dtype", "time_s"]]
    out["tflops"] = 2 * out["M"] * out["N"] * out["K"] / out["time_s"] / 1e12
    out[["M_sheet", "N_sheet", "K_sheet", "app"]] = src[["M", "N", "K", "app"]]
    note, comment = src["note"], "sheet comment: " + src["comment"]
    out["note"] = note.where(comment.isna(), (note + "; ").fillna("") + comment)
    out[["sheet", "row"]] = src[["sheet", "row"]]
    return out


def _conv(src: pd.DataFrame) -> pd.DataFrame:
    names = {"R_filter_h": "R", "S_filter_w": "S", "fwd_time_s": "time_s"}
    return src.rename(columns=names)[list(COLUMNS["conv"])]


def _rnn(src: pd.DataFrame) -> pd.DataFrame:
    return src.rename(columns={"fwd_time_s": "time_s"})[list(COLUMNS["rnn"])]


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"{what}: not the DeepBench table perfkit knows")


def convert(kind: str, src: pd.DataFrame, gpu: str) -> tuple[pd.DataFrame, list[dict]]:
    """The rows of one GPU in perfkit's columns, in workbook order, and the corrections made."""
    part = src[src["gpu"].str.lower() == gpu].copy()
    _check(set(part["sheet"]) <= set(SHEETS), f"unknown sheets in {kind}: {set(part['sheet']) - set(SHEETS)}")
    part["dtype"] = part["sheet"].map(lambda s: SHEETS[s][0])
    part["math_dtype"] = part["sheet"].map(lambda s: SHEETS[s][1])
    _check((part["dtype"] == part["precision"]).all(), f"{kind}/{gpu}: precision does not match the sheet")
    if "math" in part:  # the extract's own reading of the sheet's precision must agree with SHEETS
        fp16_math = part["math"].str.contains("fp16 multiply") & ~part["math"].str.contains("pseudo")
        _check(((part["math_dtype"] == "float16") == fp16_math).all(), f"{kind}/{gpu}: math does not match")
    part["order"] = (part["dtype"] == "float16").astype(int)
    part = part.sort_values(["order", "row"], kind="stable").reset_index(drop=True)
    counts = part.groupby("dtype").size().to_dict()
    _check(counts == {"float32": ROWS_PER_SHEET[kind], "float16": ROWS_PER_SHEET[kind]}, f"{kind}/{gpu}: {counts}")
    corrections = []
    for where, sheet, row, column, was, now in FIXES.get(kind, []):
        if where != gpu:
            continue
        hit = (part["sheet"] == sheet) & (part["row"] == row)
        _check(hit.sum() == 1 and part.loc[hit, column].item() == was, f"{kind}: no cell {sheet!r} row {row} = {was}")
        part.loc[hit, column] = now
        corrections.append({"sheet": sheet, "row": row, "column": column, "was": was, "now": now,
                            "why": f"no cuDNN algorithm is named {was}: the cell is cut off "
                                   f"(same shape, fp16 sheet: {now})"})
    return {"gemm": _gemm, "conv": _conv, "rnn": _rnn}[kind](part)[list(COLUMNS[kind])], corrections


def metadata(kind: str, gpu: str, part: pd.DataFrame, frame: pd.DataFrame, corrections: list[dict]) -> dict[str, Any]:
    """The provenance of one GPU's frame (``frame.attrs["meta"]``): device, publisher, versions, columns."""
    g = GPUS[gpu]
    first = part.iloc[0]
    for col in ("file_last_changed", "cuda", "cudnn"):
        _check(part[col].nunique() == 1, f"{kind}/{gpu}: several values of {col}")
    return {
        "experiment": f"deepbench_{kind}", "kind": kind, "description": DESCRIPTION[kind],
        "device_name": g["device_name"], "device": g["device"], "device_kind": "gpu",
        "device_name_in_source": g["device_name_in_source"], "device_note": g["device_note"],
        "published_by": "Baidu DeepBench", "published_detail": g["detail"][kind], "published_date": g["published_date"],
        "source_repository": REPOSITORY, "source_commit": COMMIT, "source_file": g["source_file"],
        "file_last_changed": first["file_last_changed"], "cuda": first["cuda"], "cudnn": first["cudnn"],
        "licence": "Apache-2.0", "timing": TIMING + (" GEMMs run with beta = 1 (C is read and written)."
                                                     if kind == "gemm" else ""),
        "columns": COLUMNS[kind], "rows": len(frame), "complete": True,
        "sheets": {s: SHEETS[s][2] for s in dict.fromkeys(frame["sheet"])}, "corrections": corrections,
        **({"gemm_beta": 1} if kind == "gemm" else {}),
    }


def frames(kind: str, src: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``{"V100-SXM2": frame, "P100-PCIe": frame}`` for one published DeepBench table, each with its meta."""
    out = {}
    for gpu, g in GPUS.items():
        part = src[src["gpu"].str.lower() == gpu]
        _check(len(part) > 0, f"{kind}: no {gpu.upper()} rows")
        frame, corrections = convert(kind, src, gpu)
        frame.attrs["meta"] = metadata(kind, gpu, part, frame, corrections)
        out[g["device"]] = frame
    return out
