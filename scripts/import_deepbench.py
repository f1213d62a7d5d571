#!/usr/bin/env python
"""Import Baidu DeepBench's published V100 and P100 training results as third-party recordings.

Reads the three row-by-row extracts of DeepBench's result workbooks (``deepbench_{gemm,conv,rnn}_v100_p100.csv``,
see the README beside them) and writes ``<out>/<gpu>/<kind>.csv`` + ``<kind>.json`` for ``<gpu>`` in
``v100, p100`` and ``<kind>`` in ``gemm, conv, rnn``, in the layout :func:`perfkit.data.published` reads
(``data/published/deepbench/`` by default). Rows keep the workbooks' order (fp32 sheet, then fp16 sheet, by
spreadsheet row); the output is the same bytes on every run. Times are seconds per call; ``tflops`` is
recomputed from the dimensions the benchmark ran (``M_run`` …), not the sheet's printed ones.

Usage::

    python scripts/import_deepbench.py [--src DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".." / "shared" / "reference" / "published"
OUT = REPO / "data" / "published" / "deepbench"
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
        "note": "caveat (sheet K = 1530; time under 10 µs), or the sheet's comment", **WHERE},
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
        raise SystemExit(f"import_deepbench: {what}")


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


def metadata(kind: str, gpu: str, src: pd.DataFrame, frame: pd.DataFrame, corrections: list[dict]) -> dict:
    """The JSON written beside one CSV."""
    g = GPUS[gpu]
    part = src[src["gpu"].str.lower() == gpu]
    first = part.iloc[0]
    _check(part["gpu_model_specs_sheet"].eq(g["device_name_in_source"]).all(), f"{gpu}: device name changed")
    for col in ("file_last_changed", "cuda", "cudnn"):
        _check(part[col].nunique() == 1, f"{kind}/{gpu}: several values of {col}")
    timing = TIMING + (" GEMMs run with beta = 1 (C is read and written)." if kind == "gemm" else "")
    return {
        "experiment": f"deepbench_{kind}", "kind": kind, "description": DESCRIPTION[kind],
        "device_name": g["device_name"], "device": g["device"], "device_kind": "gpu",
        "device_name_in_source": g["device_name_in_source"], "device_note": g["device_note"],
        "published_by": "Baidu DeepBench", "published_detail": g["detail"][kind], "published_date": g["published_date"],
        "source_repository": REPOSITORY, "source_commit": COMMIT, "source_file": g["source_file"],
        "file_last_changed": first["file_last_changed"], "cuda": first["cuda"], "cudnn": first["cudnn"],
        "licence": "Apache-2.0", "timing": timing, "columns": COLUMNS[kind], "rows": len(frame), "complete": True,
        "sheets": {s: SHEETS[s][2] for s in dict.fromkeys(frame["sheet"])}, "corrections": corrections,
        "imported_by": "scripts/import_deepbench.py",
        **({"gemm_beta": 1} if kind == "gemm" else {}),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the six CSV + JSON pairs; returns 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", type=Path, default=SRC, help="folder holding deepbench_*_v100_p100.csv")
    p.add_argument("--out", type=Path, default=OUT, help="output folder; files go to OUT/<gpu>/<kind>.*")
    args = p.parse_args(argv)
    for kind in COLUMNS:
        src = pd.read_csv(args.src / f"deepbench_{kind}_v100_p100.csv")
        for gpu in GPUS:
            frame, corrections = convert(kind, src, gpu)
            folder = args.out / gpu
            folder.mkdir(parents=True, exist_ok=True)
            frame.to_csv(folder / f"{kind}.csv", index=False, lineterminator="\n")
            meta = metadata(kind, gpu, src, frame, corrections)
            text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
            (folder / f"{kind}.json").write_text(text, encoding="utf-8")
            print(f"{folder / kind}.csv: {len(frame)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
