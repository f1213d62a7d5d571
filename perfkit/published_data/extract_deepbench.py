"""Extractors for Baidu DeepBench's result workbooks (baidu-research/DeepBench, Apache-2.0, ``results/train/*.xlsx``).

Four tables: the V100 and P100 training GEMMs, convolutions and RNN layers (sheets ``Results FP32`` and
the fp16 sheet of each workbook), and the all-reduce section at the bottom of every workbook that has one.
Sheet times are milliseconds; the tables hold seconds (``time_s``). Columns of a sheet are found by their
header text, never by position; every row names its worksheet and 1-based spreadsheet row.

The all-reduce section's headers are known (they are matched exactly). For the GEMM, convolution and RNN
sections the header texts are *matched loosely* (``M``, ``A^T``, ``Time (msec)``, ``Filter Width (S)``,
``Forward Time``, ``Hidden units`` …): see :data:`HEADERS`. Needs ``openpyxl``.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from typing import Any, Callable, Iterator, Mapping

import pandas as pd

from .catalog import PublishedSource
from .deepbench import FP32, P100_FP16, V100_FP16
from .extract_text import LF, Reader, commit_date, history, require, source_of, table, text_of

#: worksheet → (precision of the operands, what the sheet says about the math)
SHEETS = {
    FP32: ("float32", "fp32 in, fp32 math"),
    V100_FP16: ("float16", "fp16 in, fp16 multiply, fp32 accumulate (per sheet; Tensor Cores, see README)"),
    P100_FP16: ("float16", "pseudo-fp16: fp16 in/out, fp32 math (per sheet)"),
}
K_SHEET, K_RUN = 1530, 1536  # the sheets print K = 1530 where code/kernels/gemm_problems.h runs 1536
NOTE_K = "sheet K=1530 but gemm_problems.h runs K=1536"
NOTE_SHORT = "time < 10 us: integer-microsecond resolution, >=10% quantization"


def load_workbook(data: bytes) -> Any:
    """An openpyxl workbook (cached values, not formulas) from the bytes of an ``.xlsx``."""
    try:
        import openpyxl
    except ImportError as e:  # pragma: no cover - openpyxl is pinned in requirements.txt
        raise ImportError("reading DeepBench's .xlsx workbooks needs openpyxl: pip install openpyxl") from e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about extensions it does not read
        return openpyxl.load_workbook(io.BytesIO(data), data_only=True)


def specs(workbook: Any) -> dict[str, Any]:
    """The ``Specs`` sheet as {key: value} (first two columns), or {} without one."""
    if "Specs" not in workbook.sheetnames:
        return {}
    return {str(r[0]).strip(): r[1] for r in workbook["Specs"].iter_rows(values_only=True)
            if len(r) > 1 and r[0] is not None}


def cell_text(v: Any) -> str:
    """A cell as the CSV writes it: empty, stripped text, or ``repr`` of a number."""
    return "" if v is None else v.strip() if isinstance(v, str) else repr(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any, what: str) -> int:
    require(_is_number(v) and float(v).is_integer(), f"{what}: expected an integer cell, got {v!r}")
    return int(v)


def _norm(v: Any) -> str:
    return " ".join(str(v).lower().split()) if isinstance(v, str) else ""


# ---------------------------------------------------------------------------------------------- sections

Match = Callable[[str], bool]


def _has(*words: str) -> Match:
    return lambda h: all(re.search(w, h) for w in words)


def _letter(x: str) -> Match:  # "M", "(M)", "Input Width (W)"
    return lambda h: h == x or h.endswith(f"({x})")


_BWD = r"backward|bwd"
_PAD = r"\bpad(ding)?(\b|_)"  # not "padded"
_W, _H = r"(\b|_)w\b|width|horiz", r"(\b|_)h\b|height|vert"
#: section → [(field, header test, required)], tried in this order (a header cell is claimed once).
HEADERS: Mapping[str, list[tuple[str, Match, bool]]] = {
    "conv": [("S", _letter("s"), True), ("R", _letter("r"), True), ("W", _letter("w"), True),
             ("H", _letter("h"), True), ("C", _letter("c"), True), ("N", _letter("n"), True),
             ("K", _letter("k"), True),
             ("pad_w", _has(_PAD, _W), False), ("pad_h", _has(_PAD, _H), False), ("pad", _has(_PAD), False),
             ("stride_w", _has("stride", _W), False), ("stride_h", _has("stride", _H), False),
             ("stride", _has("stride"), False),
             ("fwd_algo", _has("algo"), False), ("fwd", _has(r"forward|fwd", "time"), True),
             ("bwd_inputs", _has(_BWD, r"input|data"), False), ("bwd_params", _has(_BWD, r"param|filter|weight"), False),
             ("padded", _has("padded"), False)],
    "gemm": [("M", _letter("m"), True), ("N", _letter("n"), True), ("K", _letter("k"), True),
             ("a_t", lambda h: bool(re.fullmatch(r"a\s*\^?\s*t|a ?trans\w*|trans\w* ?a", h)), True),
             ("b_t", lambda h: bool(re.fullmatch(r"b\s*\^?\s*t|b ?trans\w*|trans\w* ?b", h)), True),
             ("time", _has("time"), True), ("tflops", _has("tflop"), False), ("padded", _has("padded"), False),
             ("app", _has("app"), False), ("comment", _has(r"comment|note|remark"), False)],
    "rnn": [("hidden", _has("hidden"), True), ("batch", _has("batch"), True), ("timesteps", _has(r"time ?steps?"), True),
            ("cell", _has(r"type|cell"), False), ("fwd", _has(r"forward|fwd"), True),
            ("bwd_inputs", _has(_BWD, "input"), False), ("bwd_weights", _has(_BWD, r"weight|param"), False),
            ("bwd", _has(_BWD), False), ("app", _has("app"), False)],
}
_NUMERIC = {"gemm": ("M", "N", "K", "time"), "conv": ("W", "H", "C", "N", "K", "R", "S", "fwd"),
            "rnn": ("hidden", "batch", "timesteps", "fwd")}


def _columns(cells: list[tuple[int, str]], section: str) -> dict[str, int] | None:
    """{field: column index} if this row is a header row of ``section``, else None."""
    taken: dict[str, int] = {}
    for field, test, _ in HEADERS[section]:
        col = next((c for c, h in cells if h and c not in taken.values() and test(h)), None)
        if col is not None:
            taken[field] = col
    return taken if all(f in taken for f, _, req in HEADERS[section] if req) else None


def _scale(header: str) -> float:
    """Seconds per unit of a time column: µs if the header says so, else ms (DeepBench prints msec)."""
    return 1e-6 if re.search(r"\b(usec|us)\b|µs", header) else 1e-3


def _cell_type(text: str) -> str | None:
    t = text.lower()
    return "lstm" if "lstm" in t else "gru" if "gru" in t else "vanilla" if ("vanilla" in t or "rnn" in t) else None


def section_rows(ws: Any, section: str) -> Iterator[tuple[int, dict[str, Any], dict[str, str], str | None, str]]:
    """(row, {field: value}, {field: header}, current RNN cell title, unlabelled text) per data row of a section.

    A data row follows a header row of ``section`` and has numbers in the section's size and time columns;
    other rows (blank, sub-titles, other sections' headers) end nothing but are not data.
    """
    cols: dict[str, int] | None = None
    heads: dict[str, str] = {}
    labelled: set[int] = set()
    title = None
    for row in ws.iter_rows():
        cells = [(c.column, _norm(c.value)) for c in row]
        found = _columns(cells, section)
        if found is not None:
            cols, labelled = found, {c for c, h in cells if h}
            heads = {f: dict(cells)[c] for f, c in found.items()}
            continue
        if any(_columns(cells, other) for other in HEADERS if other != section) or \
                any(h == "all-reduce" for _, h in cells):
            cols = None
            continue
        values = {c.column: c.value for c in row if c.value is not None}
        texts = [v for v in values.values() if isinstance(v, str) and v.strip()]
        if cols is None or not all(_is_number(values.get(cols[f])) for f in _NUMERIC[section]):
            if section == "rnn" and len(texts) == 1 and _cell_type(texts[0]):
                title = texts[0]
            continue
        extra = "; ".join(v.strip() for c, v in values.items() if c not in labelled and isinstance(v, str) and v.strip())
        yield row[0].row, {f: values.get(c) for f, c in cols.items()}, heads, title, extra


# ---------------------------------------------------------------------------------------------- GEMM, conv, RNN

def _time_s(v: Any, header: str) -> float | None:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    require(_is_number(v), f"time cell {v!r} under {header!r} is not a number")
    scale = _scale(header)
    return round(v * scale, 9 if scale == 1e-3 else 12)


def _pad8(x: int) -> int:
    return -(-x // 8) * 8


def _gemm_row(g: dict[str, Any], f: dict[str, Any], h: dict[str, str], extra: str) -> dict[str, Any]:
    m, n, k = (_int(f[d], d) for d in "MNK")
    a_t, b_t = str(f["a_t"]).strip().upper(), str(f["b_t"]).strip().upper()
    require(a_t in "NT" and b_t in "NT" and len(a_t) == len(b_t) == 1, f"transposes {a_t!r}, {b_t!r}: expected N or T")
    t = _time_s(f["time"], h["time"])
    require(t is not None and t > 0, f"GEMM time {f['time']!r} is not a positive number")
    from_time = float(f"{2 * m * n * k / t / 1e12:g}")
    sheet_tflops = f.get("tflops")
    m_run, n_run, k_run = m, n, K_RUN if k == K_SHEET else k
    if g["sheet"] == V100_FP16:  # the 2019 Tensor-Core build pads M and K (B not transposed) or M and N to 8
        m_run, n_run, k_run = (_pad8(m_run), n_run, _pad8(k_run)) if b_t == "N" else (_pad8(m_run), _pad8(n_run), k_run)
    notes = [NOTE_K] * (k == K_SHEET) + [NOTE_SHORT] * (t < 1e-5)
    return {"source": g["source"], "gpu": g["gpu"], "precision": g["precision"], "M": m, "N": n, "K": k,
            "a_t": a_t, "b_t": b_t, "time_s": t,
            "tflops": float(f"{sheet_tflops:g}") if _is_number(sheet_tflops) else from_time,
            "kind": g["kind"], "sheet": g["sheet"], "row": g["row"], "time_ms_sheet": float(f["time"]),
            "tflops_from_time": from_time, "M_run": m_run, "N_run": n_run, "K_run": k_run,
            "padded_kernel_sheet": cell_text(f.get("padded")), "math": g["math"], "app": cell_text(f.get("app")),
            "comment": "; ".join(x for x in (cell_text(f.get("comment")), extra) if x), "note": "; ".join(notes),
            **g["tail"]}


def _conv_row(g: dict[str, Any], f: dict[str, Any], h: dict[str, str], extra: str) -> dict[str, Any]:
    dims = {d: _int(f[d], d) for d in ("W", "H", "C", "N", "K")}
    axis = {a: _int(f[a] if f.get(a) is not None else f.get(a.split("_")[0]), a)
            for a in ("pad_w", "pad_h", "stride_w", "stride_h")}
    times = {k: _time_s(f.get(k), h.get(k, "")) for k in ("fwd", "bwd_inputs", "bwd_params")}
    return {"source": g["source"], "gpu": g["gpu"], "precision": g["precision"], "kind": g["kind"], **dims,
            "S_filter_w": _int(f["S"], "S"), "R_filter_h": _int(f["R"], "R"), **axis,
            "fwd_time_s": times["fwd"], "bwd_inputs_time_s": times["bwd_inputs"],
            "bwd_params_time_s": times["bwd_params"], "fwd_algo": cell_text(f.get("fwd_algo")),
            "padded_kernel_sheet": cell_text(f.get("padded")), "sheet": g["sheet"], "row": g["row"],
            "math": g["math"], **g["tail"]}


def _rnn_row(g: dict[str, Any], f: dict[str, Any], h: dict[str, str], title: str | None) -> dict[str, Any]:
    cell = _cell_type(str(f.get("cell") or "")) or _cell_type(title or "")
    require(cell is not None, f"{g['sheet']} row {g['row']}: no RNN cell type (vanilla, LSTM, GRU)")
    times = {k: _time_s(f.get(k), h.get(k, "")) for k in ("fwd", "bwd_inputs", "bwd_weights", "bwd")}
    return {"source": g["source"], "gpu": g["gpu"], "precision": g["precision"], "kind": g["kind"], "cell": cell,
            "hidden": _int(f["hidden"], "hidden"), "batch": _int(f["batch"], "batch"),
            "timesteps": _int(f["timesteps"], "timesteps"), "fwd_time_s": times["fwd"],
            "bwd_inputs_time_s": times["bwd_inputs"], "bwd_weights_time_s": times["bwd_weights"],
            "bwd_time_s": times["bwd"], "sheet": g["sheet"], "row": g["row"], "app": cell_text(f.get("app")),
            **g["tail"]}


def _gpu_label(path: str) -> str:
    m = re.search(r"DeepBench_NV_(\w+?)\.xlsx$", path)
    require(m is not None, f"{path}: not a DeepBench NVIDIA workbook (DeepBench_NV_<GPU>.xlsx)")
    return m.group(1)


def _extract_kernels(entry: PublishedSource, read: Reader, section: str) -> pd.DataFrame:
    commit = entry.commits[0]
    rows = []
    for path in entry.paths:
        wb = load_workbook(read(commit, path))
        sp = specs(wb)
        changed = history(read, commit, path)[0]
        cudnn = next((v for k, v in sp.items() if "cudnn" in k.lower()), None)
        tail = {"file_last_changed": f"{changed[:10]} ({commit_date(read, changed)})",
                "gpu_model_specs_sheet": " ".join(cell_text(sp.get("GPU Model")).split()),
                "cuda": cell_text(sp.get("CUDA Version")), "cudnn": cell_text(cudnn)}
        sheets = sorted((s for s in wb.sheetnames if s in SHEETS), key=lambda s: SHEETS[s][0] != "float32")
        require(len(sheets) == 2, f"{path}: expected an fp32 and an fp16 results sheet, found {sheets}")
        for sheet in sheets:
            found = 0
            for r, f, h, title, extra in section_rows(wb[sheet], section):
                g = {"source": source_of(entry, path, commit), "gpu": _gpu_label(path), "precision": SHEETS[sheet][0],
                     "math": SHEETS[sheet][1], "kind": "train" if "/train/" in f"/{path}" else "inference",
                     "sheet": sheet, "row": r, "tail": tail}
                rows.append(_gemm_row(g, f, h, extra) if section == "gemm" else
                            _conv_row(g, f, h, extra) if section == "conv" else _rnn_row(g, f, h, title))
                found += 1
            require(found > 0, f"{path}, sheet {sheet!r}: no {section} rows under a recognisable header row")
    return table(rows, line_end=LF)


def extract_deepbench_gemm(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """DeepBench's training GEMM rows (V100, P100; fp32 and fp16 sheets): seconds per call, TFLOP/s."""
    return _extract_kernels(entry, read, "gemm")


def extract_deepbench_conv(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """DeepBench's training convolution rows: forward, backward-data and backward-filter seconds, cuDNN's algorithm."""
    return _extract_kernels(entry, read, "conv")


def extract_deepbench_rnn(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """DeepBench's training RNN rows (vanilla, LSTM, GRU): forward and backward seconds per layer."""
    return _extract_kernels(entry, read, "rnn")


# ---------------------------------------------------------------------------------------------- all-reduce

#: header text (stripped, lower case) of the all-reduce section → field
ALLREDUCE_HEADERS = {
    "size # floats": "size_floats", "# chips / accelerator cards": "n_ranks", "# nodes (1 process per node)": "n_ranks",
    "mean all reduce time (msec)": "time_ms", "gigabytes/sec": "gbps_sheet", "selected algorithm": "algorithm",
    "std dev all reduce time (msec)": "time_std_ms",
}
_TOPO_8 = ("8 GPUs/node, dual-root PCIe 3.0: 2 PLX switches per CPU socket, 2 GPUs per switch, x16 to the socket, "
           "sockets joined by QPI", "InfiniBand FDR",
           ("16 lanes of PCIe v3", "There are two GPUs on each PLX switch",
            "The interconnect across nodes is InfiniBand FDR",
            "In our experiments, P100, TitanX Maxwell and M40 were such systems."))
_TOPO_10 = ("10 GPUs/node, single-root PCIe: 2 PLX switches with 5 GPUs each, joined by a PCIe bridge",
            "not stated in README",
            ("each switch are connected to 5 GPUs", "In our experiments, TitanX Pascal, and 1080Ti were such systems."))
_TOPO_KNL = ("1 Xeon Phi 7250 per node (CPU, no GPU)", "Intel Omni-Path 100, fat tree",
             ("Intel® Omni-Path Architecture (Intel® OPA) series 100 fabric with fat-tree topology",))
ALLREDUCE_FORMATS = {"time_s": ".9e", "time_std_s": ".9e", "algbw_GBps": ".4f", "busbw_GBps": ".4f"}
#: workbook → (within a node, between nodes, README sentences that say so)
TOPOLOGY = {"DeepBench_NV_P100.xlsx": _TOPO_8, "DeepBench_NV_M40.xlsx": _TOPO_8, "DeepBench_NV_TitanX.xlsx": _TOPO_8,
            "DeepBench_NV_TitanX_Pascal.xlsx": _TOPO_10, "DeepBench_NV_1080Ti.xlsx": _TOPO_10,
            "DeepBench_IA_KNL7250.xlsx": _TOPO_KNL}


def allreduce_rows(workbook: Any) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(sheet, row, {field: cell}) for every timed row of each sheet's All-Reduce section (headers on its row)."""
    for ws in workbook.worksheets:
        start = None
        for row in ws.iter_rows(max_col=1):
            if isinstance(row[0].value, str) and row[0].value.strip() == "All-Reduce":
                start = row[0].row
        if start is None:
            continue
        cols = {c.column_letter: ALLREDUCE_HEADERS[c.value.strip().lower()] for c in ws[start]
                if isinstance(c.value, str) and c.value.strip().lower() in ALLREDUCE_HEADERS}
        require(set(cols.values()) == set(ALLREDUCE_HEADERS.values()), f"{ws.title}: all-reduce headers {cols}")
        for r in range(start + 1, ws.max_row + 1):
            values = {c.column_letter: c.value for c in ws[r] if c.value is not None}
            rec = {field: values.get(col) for col, field in cols.items()}
            if not _is_number(rec["time_ms"]):
                continue
            rec["nodes_col_E"] = values.get("E")  # no header: the node count (8 ranks per node)
            require(not set(values) - set(cols) - {"E"}, f"{ws.title} row {r}: unexpected cells {values}")
            yield ws.title, r, rec


def extract_deepbench_allreduce(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """DeepBench's all-reduce rows (fp32 sum): seconds per call, nccl-tests' algbw and busbw in GB/s.

    ``first_seen`` is the oldest commit whose workbook (also under its old path ``results/<name>``) holds
    the same (floats, ranks, time); ``gbps_sheet`` is the sheet's own 4·floats·ranks/time.
    """
    commit = entry.commits[0]
    readme = " ".join(text_of(read, commit, "README.md").split())
    rows = []
    for path in sorted(entry.paths):
        base = path.rsplit("/", 1)[-1]
        require(base in TOPOLOGY, f"{path}: no node topology known for {base}")
        intra, inter, sentences = TOPOLOGY[base]
        for s in sentences:
            require(s in readme, f"README.md@{commit[:12]} no longer says {s!r}")
        wb = load_workbook(read(commit, path))
        found = list(allreduce_rows(wb))
        require(bool(found), f"{path}: no timed all-reduce rows")
        first_seen: dict[tuple, str] = {}
        for c in reversed(history(read, commit, path, "results/" + base)):
            for p in (path, "results/" + base):
                try:
                    old = load_workbook(read(c, p))
                except FileNotFoundError:
                    continue
                for _, _, rec in allreduce_rows(old):
                    first_seen.setdefault((rec["size_floats"], rec["n_ranks"], rec["time_ms"]), c)
        sp = specs(wb)
        gpu = base.startswith("DeepBench_NV_")
        system = " ".join(cell_text(sp.get("GPU Model" if gpu else "CPU Model")).split())
        require(bool(system), f"{path}: the Specs sheet names no {'GPU' if gpu else 'CPU'} Model")
        for sheet, r, rec in found:
            n, e = _int(rec["n_ranks"], "ranks"), rec["nodes_col_E"]
            if gpu:
                require((e is None and n <= 8) or (e is not None and n == 8 * e), f"{path} row {r}: {n} ranks, E={e}")
            else:
                require(e is None, f"{path} row {r}: a node count beside one process per node")
            nodes = (1 if e is None else _int(e, "nodes")) if gpu else n
            size, t = _int(rec["size_floats"], "floats"), rec["time_ms"] / 1e3
            algbw = 4 * size / t / 1e9
            if rec["gbps_sheet"] is not None:
                require(abs(rec["gbps_sheet"] / (algbw * n) - 1) < 1e-6, f"{path} row {r}: GB/s is not 4·floats·ranks/time")
            rows.append({
                "system": system,
                "device_type": "GPU" if gpu else "CPU (Xeon Phi)", "n_ranks": n, "n_nodes": nodes,
                "ranks_per_node": n // nodes, "intra_node": intra, "inter_node": inter if nodes > 1 else "",
                "size_floats": size, "size_bytes": 4 * size, "time_s": t,
                "time_std_s": None if rec["time_std_ms"] is None else rec["time_std_ms"] / 1e3,
                "algorithm": str(rec["algorithm"]).strip(), "gbps_sheet": cell_text(rec["gbps_sheet"]),
                "algbw_GBps": algbw, "busbw_GBps": algbw * 2 * (n - 1) / n,
                "specs_cuda": cell_text(sp.get("CUDA Version")) if gpu else "",
                "specs_driver": cell_text(sp.get("Nvidia Driver")) if gpu else "",
                "specs_mpi": cell_text(sp.get("OpenMPI Version") or sp.get("Intel MPI Version")),
                "workbook": base, "sheet": sheet, "row": r,
                "first_seen": first_seen[(rec["size_floats"], rec["n_ranks"], rec["time_ms"])],
                "source": source_of(entry, path, commit),
            })
    return table(rows, formats=ALLREDUCE_FORMATS)
