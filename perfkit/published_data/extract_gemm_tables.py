"""Extractors for two GEMM tables: the MAMF table of ml-engineering's README and AMD AITER's tuned-GEMM files.

Ports of the reference scripts kept beside the tables (``modern/extract_mamf_blackwell_amd.py`` and
``modern/extract_aiter_gemm_mi300_mi355.py``): the same rows, columns, order and number formatting, so
the CSV bytes, and their SHA-256, are the catalogue's. Values are kept as those scripts write them (numbers
already formatted as text, the sources' own strings verbatim), so :func:`csv_bytes` writes them unchanged;
lines end with CRLF, as Python's ``csv`` module writes by default. Times are in seconds, TFLOP/s in 1e12
FLOP/s, GB/s in 1e9 B/s.

Shared with :mod:`perfkit.published_data.extract_kernel_tables`: :func:`text_at` (a file decoded as the
scripts read it) and :func:`files_in` (a folder's files at a commit, through ``read.files``, which
:class:`perfkit.published_data.fetch.GitReader` provides).
"""

from __future__ import annotations

import collections
import csv
import io
import re
from typing import Any, Callable, Iterator

import pandas as pd

from .catalog import PublishedSource
from .extract_text import Reader, commit_date, history, require, source_of, table


def text_at(read: Callable[[str, str], bytes], commit: str, path: str) -> str:
    """The file at ``commit`` as UTF-8 text with universal newlines (``\\r\\n`` and ``\\r`` read as ``\\n``)."""
    return read(commit, path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def files_in(read: Callable[..., Any], commit: str, folder: str) -> list[str]:
    """Paths (from the repository root) of the files under ``folder`` at ``commit``, at any depth."""
    files = getattr(read, "files", None)
    if files is None:
        raise TypeError("this extractor lists folders: pass a reader with files(commit, folder), such as "
                        "perfkit.published_data.fetch.GitReader")
    return list(files(commit, folder))


# ---------------------------------------------------------------------------------------------- MAMF

MAMF_SECTION = "#### Maximum Achievable Matmul FLOPS comparison table"
MAMF_END = "Caveat emptor"
#: Accelerators whose rows are withheld (kept back as a validation set).
MAMF_WITHHELD = re.compile(r"\b(A100|H100|H200|GH200)\b")
MAMF_HEADER = ["Accelerator", "MAMF", "Theory", "Efficiency", "Best Shape MxNxK", "torch version", "Notes"]
#: Vendor dense (no sparsity) peaks, TFLOP/s, that the reference script adds for a sanity check (not from the
#: table): NVIDIA HGX B200 / HGX B300 / GB200 NVL72 datasheets (sparse figures / 2); AMD Instinct MI300X,
#: MI325X (304 CU x 2100 MHz) and MI355X (256 CU x 2400 MHz) spec sheets.
MAMF_VENDOR_PEAK_TFLOPS = {
    ("NVIDIA B200 SXM", "bfloat16"): 2250.0, ("NVIDIA B200 SXM", "float8_e4m3fn"): 4500.0,
    ("NVIDIA B300 SXM", "bfloat16"): 2250.0, ("NVIDIA B300 SXM", "float8_e4m3fn"): 4500.0,
    ("NVIDIA GB200 SXM", "bfloat16"): 2500.0, ("NVIDIA GB200 SXM", "float8_e4m3fn"): 5000.0,
    ("AMD MI300X", "bfloat16"): 1307.4, ("AMD MI300X", "float8_e4m3fn"): 2614.9,
    ("AMD MI325X", "bfloat16"): 1307.4, ("AMD MI325X", "float8_e4m3fn"): 2614.9,
    ("AMD MI355X", "bfloat16"): 2516.6, ("AMD MI355X", "float8_e4m3fn"): 5033.2,
}


def _mamf_section(readme: str) -> str:
    """The README's MAMF section; ``ValueError`` if it is not there."""
    start = readme.index(MAMF_SECTION)
    return readme[start:readme.index(MAMF_END, start)]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _mamf_tables(section: str) -> Iterator[tuple[str | None, list[str], list[str]]]:
    """(dtype, header cells, row cells) for every body row of the section's BF16 and FP8 tables."""
    dtype, header = None, None
    for line in section.splitlines():
        s = line.strip()
        if s.startswith("**BF16**"):
            dtype, header = "bfloat16", None
        elif s.startswith("**FP8"):
            require("float8_e4m3fn" in s, f"the FP8 table's title does not name float8_e4m3fn: {s!r}")
            dtype, header = "float8_e4m3fn", None
        elif s.startswith("|"):
            cells = _cells(s)
            if header is None:
                header = cells
            elif not re.match(r"^:?-+:?$", cells[0]):
                yield dtype, header, cells


def _mamf_keys(readme: str) -> set[tuple[str, str, str]]:
    """(accelerator, MAMF, shape) of every table row of one README version (none without the section)."""
    try:
        section = _mamf_section(readme)
    except ValueError:
        return set()
    return {(c[0], c[1], c[4]) for c in (_cells(line) for line in section.splitlines()
                                          if line.strip().startswith("|")) if len(c) >= 5}


def extract_mamf(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """ml-engineering's "Maximum Achievable Matmul FLOPS comparison table" → one row per accelerator and dtype.

    Rows of A100/H100/H200/GH200 and rows without a MAMF are left out. ``time_s = 2·M·N·K / (MAMF·1e12)`` at
    the best shape; ``first_seen`` is the oldest commit whose README holds the row's accelerator, MAMF and
    shape (the history comes from ``read.log``), ``first_seen_date`` its date.
    """
    commit, path = entry.commits[0], entry.paths[0]
    readme = text_at(read, commit, path)
    require(MAMF_SECTION in readme and MAMF_END in readme.split(MAMF_SECTION, 1)[1],
            f"{path}@{commit[:12]}: no {MAMF_SECTION!r} section ending at {MAMF_END!r}")
    oldest_first = history(read, commit, path)[::-1]
    seen: dict[str, set[tuple[str, str, str]]] = {}

    def first_seen(key: tuple[str, str, str]) -> tuple[str, str]:
        for c in oldest_first:
            if c not in seen:
                try:
                    seen[c] = _mamf_keys(text_at(read, c, path))
                except FileNotFoundError:
                    seen[c] = set()
            if key in seen[c]:
                return c, commit_date(read, c)
        raise ValueError(f"{path}: the row {key} is in no version of the file up to {commit[:12]}")

    rows = []
    for dtype, header, cells in _mamf_tables(_mamf_section(readme)):
        require(header == MAMF_HEADER, f"{path}: the MAMF table's header is {header}, expected {MAMF_HEADER}")
        require(len(cells) == len(header), f"{path}: a MAMF row has {len(cells)} cells, expected {len(header)}")
        acc, mamf, theory, eff, shape, torch_v, notes = cells
        if not acc or MAMF_WITHHELD.search(acc) or not mamf:
            continue  # the blank spacer row, a withheld accelerator, or no value
        m, n, k = (int(x) for x in shape.split("x"))
        tflops = float(mamf)
        peak = MAMF_VENDOR_PEAK_TFLOPS.get((acc, dtype))
        fs, fs_date = first_seen((acc, mamf, shape))
        require(abs(tflops / float(theory) * 100 - float(eff.rstrip("%"))) < 0.06,
                f"{path}: {acc} ({dtype}): MAMF {mamf} / theory {theory} is not the efficiency {eff}")
        rows.append({
            "gpu": acc, "vendor": acc.split()[0], "dtype": dtype, "tflops_best": f"{tflops:.1f}",
            "theory_tflops_quoted": theory, "percent_of_peak_quoted": eff.rstrip("%"),
            "M": m, "N": n, "K": k, "time_s": f"{2 * m * n * k / (tflops * 1e12):.6e}", "torch_version": torch_v,
            "notes": notes, "vendor_dense_peak_tflops": "" if peak is None else f"{peak:.1f}",
            "pct_of_vendor_peak": "" if peak is None else f"{100 * tflops / peak:.1f}",
            "first_seen": fs, "first_seen_date": fs_date, "source": source_of(entry, path, commit),
        })
    return table(rows)


# ---------------------------------------------------------------------------------------------- AITER

#: (arch, CU count) kept → the GPU as the table names it (the files do not say which of the two).
AITER_GPUS = {("gfx942", "304"): "AMD MI300X or MI325X (gfx942, 304 CUs)",
              ("gfx950", "256"): "AMD MI355X or MI350X (gfx950, 256 CUs)"}
#: The 8-bit float of each arch (aiter/utility/dtypes.py), for blockscale files that carry no dtype column.
AITER_FP8 = {"gfx942": "float8_e4m3fnuz", "gfx950": "float8_e4m3fn"}
#: A (file, arch, N, K, batch) group sweeping more M values than this keeps only its powers of two.
AITER_DENSE_SWEEP = 64
_OUT_BYTES = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2}


def aiter_kind(name: str) -> str | None:
    """The GEMM family of an AITER config file name; None for files left out (4-bit, MoE, GDN, untuned, MX)."""
    n = name.lower()
    if "a4w4" in n or "fmoe" in n or "gdn" in n or "gemm" not in n or "untuned" in n or "mxscale" in n:
        return None
    if "bf16" in n:
        return "bf16_batched" if "batched" in n else "bf16"
    if "a8w8" in n:
        if "batched" in n:
            return "a8w8_batched"
        if "blockscale" in n:
            return "a8w8_blockscale_bpreshuffle" if "bpreshuffle" in n else "a8w8_blockscale"
        return "a8w8_bpreshuffle" if "bpreshuffle" in n else "a8w8"
    return None


def _dtype_name(s: str | None) -> str:
    return s.replace("torch.", "") if s else ""


def _aiter_row(entry: PublishedSource, commit: str, path: str, kind: str, r: dict) -> dict | None:
    """One table row of a file row (None where it has no valid time)."""
    M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
    B = int(r.get("B") or 1)
    us = float(r["us"])
    if not us > 0:
        return None
    tflops = 2 * B * M * N * K / us / 1e6
    if kind.startswith("bf16"):
        a_b, out_b = 2, _OUT_BYTES[r.get("outdtype") or "torch.bfloat16"]
    else:
        a_b, out_b = 1, 2  # AITER's a8w8 tuners: bpes = (1, 1, 2)
    gbps = B * (M * K * a_b + N * K * a_b + M * N * out_b) / us / 1e3
    if kind.startswith("bf16"):
        dtype = _dtype_name(r.get("dtype")) or "bfloat16"
    elif kind == "a8w8_batched":
        dtype = "int8"  # csrc/ck_batched_gemm_a8w8/batched_gemm_a8w8_tune.py: int8 operands
    elif r.get("q_dtype_w"):
        dtype = _dtype_name(r["q_dtype_w"])
    else:
        dtype = AITER_FP8[r["gfx"]]
    kernel = r.get("kernelName", "")
    if kernel in ("", "None", "Null") and r.get("kernelId", "") != "":
        kernel = f"kernelId={r['kernelId']}"
    name = path.rsplit("/", 1)[1]
    return {
        "gpu": AITER_GPUS[(r["gfx"], r["cu_num"])], "arch": r["gfx"], "cu_num": int(r["cu_num"]), "kind": kind,
        "dtype": dtype, "out_dtype": _dtype_name(r.get("outdtype", "")), "batch": B, "M": M, "N": N, "K": K,
        "bias": r.get("bias", ""), "libtype": r.get("libtype", ""), "split_k": r.get("splitK", ""),
        "kernel": kernel, "time_s": f"{us * 1e-6:.6e}", "tflops": f"{tflops:.2f}", "gbps": f"{gbps:.2f}",
        "tflops_file": r["tflops"], "gbps_file": r["bw"],
        "tflops_file_ok": abs(tflops - float(r["tflops"])) <= 0.006 + 1e-3 * tflops,
        "gbps_file_ok": abs(gbps - float(r["bw"])) <= 0.006 + 1e-3 * gbps,
        "err_ratio": r.get("errRatio", r.get("err_ratio", "")),
        "model_file": name if "/model_configs/" in path else "", "source": source_of(entry, path, commit),
    }


def extract_aiter_gemm(entry: PublishedSource, read: Reader, *, all_m: bool = False) -> pd.DataFrame:
    """AITER's ``*tuned*gemm*.csv`` files under the entry's folder → one row per tuned shape on gfx942/gfx950.

    Kept: bf16 and 8-bit GEMM families, gfx942 with 304 CUs and gfx950 with 256 CUs; unless ``all_m``, a
    dense M sweep (more than 64 M values in one file, arch, N, K, batch) keeps its powers of two only.
    ``tflops`` and ``gbps`` are recomputed from the time (``tflops_file``/``gbps_file``: the files' own).
    """
    commit, folder = entry.commits[0], entry.paths[0]
    files = [p for p in files_in(read, commit, folder) if p.endswith(".csv") and aiter_kind(p.rsplit("/", 1)[1])]
    rows = []
    for path in sorted(files):
        kind = aiter_kind(path.rsplit("/", 1)[1])
        recs = list(csv.DictReader(io.StringIO(text_at(read, commit, path))))
        if not recs or "us" not in recs[0] or "gfx" not in recs[0] or "cu_num" not in recs[0]:
            continue  # not a tuned table with arch, CU count and time
        kept = [r for r in recs if (r["gfx"], r["cu_num"]) in AITER_GPUS]
        ms = collections.defaultdict(set)
        for r in kept:
            ms[(r["gfx"], r["N"], r["K"], r.get("B", "1"))].add(int(r["M"]))
        for r in kept:
            M = int(r["M"])
            if not all_m and len(ms[(r["gfx"], r["N"], r["K"], r.get("B", "1"))]) > AITER_DENSE_SWEEP and M & (M - 1):
                continue  # a dense M sweep: powers of two only
            row = _aiter_row(entry, commit, path, kind, r)
            if row is not None:
                rows.append(row)
    rows.sort(key=lambda r: (r["arch"], r["kind"], r["dtype"], r["model_file"], r["batch"], r["N"], r["K"],
                             r["M"], r["out_dtype"], r["bias"], r["libtype"], r["kernel"]))
    return table(rows)
