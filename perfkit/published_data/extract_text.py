"""Extractors for the text sources, and the table helpers every extractor shares.

An extractor takes a catalogue entry and ``read(commit, path) -> bytes`` (the file at that commit of the
entry's repository) and returns the table as a DataFrame; it touches neither git nor the disk. Extractors
that record provenance from the history (when a file last changed, when a value first appeared, a commit's
date) also call ``read.log(commit, *paths)`` (commits touching the paths, newest first) and
``read.date(commit)`` (author date, ``YYYY-MM-DD``), which :class:`perfkit.published_data.fetch.GitReader`
provides. ``read`` raises ``FileNotFoundError`` for a path that does not exist at a commit.

Sources here: Liger-Kernel's benchmark CSV, gpu-benches' result ``.txt`` files (STREAM-like kernels and the
H200 small kernels) and DeepGEMM's README tables. Times are in seconds, bandwidths in GB/s (1e9 B/s).

The frame carries how it is written (``frame.attrs["csv"]``: per-column formats and the line end) so that
:func:`csv_bytes` gives the same bytes as the published-data folder's CSV.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import pandas as pd

from .catalog import PublishedSource

CRLF, LF = "\r\n", "\n"


class Reader(Protocol):
    """What an extractor reads through: file bytes at a commit, plus the history where it needs it."""

    def __call__(self, commit: str, path: str) -> bytes: ...


# ---------------------------------------------------------------------------------------------- shared

def owner_repo(entry: PublishedSource) -> str:
    """``owner/repo`` of the entry's repository URL (``https://github.com/owner/repo`` → ``owner/repo``)."""
    parts = entry.repository.rstrip("/").removesuffix(".git").split("/")
    return "/".join(parts[-2:])


def source_of(entry: PublishedSource, path: str, commit: str) -> str:
    """The ``source`` column's value: ``owner/repo/path@commit``."""
    return f"{owner_repo(entry)}/{path}@{commit}"


def history(read: Callable[..., Any], commit: str, *paths: str) -> list[str]:
    """Commits (full SHAs, newest first) at or before ``commit`` that touched any of ``paths``."""
    log = getattr(read, "log", None)
    if log is None:
        raise TypeError("this extractor needs the repository's history: pass a reader with log() and date(), "
                        "such as perfkit.published_data.fetch.GitReader")
    return list(log(commit, *paths))


def commit_date(read: Callable[..., Any], commit: str) -> str:
    """The author date of ``commit`` as ``YYYY-MM-DD`` (in the author's time zone)."""
    date = getattr(read, "date", None)
    if date is None:
        raise TypeError("this extractor needs commit dates: pass a reader with log() and date(), "
                        "such as perfkit.published_data.fetch.GitReader")
    return str(date(commit))


def text_of(read: Callable[[str, str], bytes], commit: str, path: str) -> str:
    """The file at ``commit`` decoded as UTF-8."""
    return read(commit, path).decode("utf-8")


Format = str | Callable[[Any], str]


def table(rows: Sequence[Mapping[str, Any]], *, formats: Mapping[str, Format] | None = None,
          line_end: str = CRLF, nullable_int: Iterable[str] = ()) -> pd.DataFrame:
    """A frame of ``rows`` (column order: the first row's keys) that :func:`csv_bytes` writes exactly.

    ``formats`` maps a column to a format spec (``".9e"``) or a function of the value; other values are
    written as Python's csv module writes them (``repr`` of a float, ``True``/``False``, empty for
    missing). ``nullable_int`` columns are integers with gaps (pandas ``Int64``).
    """
    if not rows:
        raise ValueError("no rows were extracted: the source file holds none in the expected format")
    columns = list(rows[0])
    for i, r in enumerate(rows):
        if list(r) != columns:
            raise ValueError(f"row {i} has columns {list(r)}, expected {columns}")
    frame = pd.DataFrame.from_records(list(rows), columns=columns)
    for c in nullable_int:
        frame[c] = frame[c].astype("Int64")
    frame.attrs["csv"] = {"formats": dict(formats or {}), "line_end": line_end}
    return frame


def _missing(v: Any) -> bool:
    if v is None or v is pd.NA:
        return True
    return isinstance(v, float) and math.isnan(v)


def _cell(v: Any, fmt: Format | None) -> str:
    if _missing(v):
        return ""
    if hasattr(v, "item") and not isinstance(v, str):  # numpy scalars → Python scalars
        v = v.item()
    if fmt is not None:
        return fmt(v) if callable(fmt) else format(v, fmt)
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The CSV bytes of an extracted frame: header, then one line per row, minimal quoting, UTF-8."""
    spec = frame.attrs.get("csv", {})
    formats: Mapping[str, Format] = spec.get("formats", {})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=spec.get("line_end", LF))
    w.writerow(frame.columns)
    fmts = [formats.get(c) for c in frame.columns]
    for values in frame.itertuples(index=False, name=None):
        w.writerow([_cell(v, f) for v, f in zip(values, fmts)])
    return buf.getvalue().encode("utf-8")


def require(ok: bool, what: str) -> None:
    """Raise ``ValueError(what)`` unless ``ok``: the source is not in the format this extractor reads."""
    if not ok:
        raise ValueError(what)


# ---------------------------------------------------------------------------------------------- Liger

#: How each table's numbers are written (the shared CSVs' formatting, which their checksums pin).
LIGER_FORMATS = {"time_s": ".6e", "time_s_p20": ".6e", "time_s_p80": ".6e", "gbps_fwd": ".1f"}
SMALL_FORMATS = {"time_s": ".4e"}
DEEPGEMM_FORMATS = {"time_s": ".4e"}
LIGER_GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _squeeze(config: dict, x: int) -> tuple[int, int]:
    """(rows, hidden) of an [M, x] input."""
    return config["M"], x


def _megatron(config: dict, x: int) -> tuple[int, int]:
    """(rows, hidden) of an [S, B, x] input."""
    return config["S"] * config["B"], x


#: kernel → (dtype when the config names none, where that dtype comes from, tensors read, tensors written,
#: (config, x) → (rows, hidden)). Kept: normalisations and elementwise activations; swiglu/geglu rows
#: time a whole MLP with its GEMMs and are left out.
LIGER_KERNELS: Mapping[str, tuple[str | None, str | None, int, int, Callable[[dict, int], tuple[int, int]]]] = {
    "layer_norm": (None, None, 1, 1, _squeeze),
    "rms_norm": (None, None, 1, 1, _squeeze),
    "fused_add_rms_norm": (None, None, 2, 2, _squeeze),
    "relu_squared": (None, None, 1, 1, _squeeze),
    "megatron_rms_norm": ("bfloat16", "benchmark/scripts/benchmark_megatron_rms_norm.py _make_input", 1, 1,
                          _megatron),
    "megatron_swiglu": ("bfloat16", "benchmark/scripts/benchmark_megatron_swiglu.py _make_input", 2, 1, _megatron),
}


def extract_liger(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """Liger-Kernel's ``all_benchmark_data.csv`` → speed rows of the memory-bound kernels on H100/A100.

    ``time_s`` is the median (``y_value_50``, ms → s), ``time_s_p20``/``time_s_p80`` the quantiles;
    forward rows get ``io_bytes_fwd`` (bytes read once + written once, weights ignored) and ``gbps_fwd``.
    """
    commit, path = entry.commits[0], entry.paths[0]
    rows = []
    for r in csv.DictReader(io.StringIO(text_of(read, commit, path))):
        kernel = r["kernel_name"]
        if kernel not in LIGER_KERNELS or r["gpu_name"] not in LIGER_GPUS or r["metric_name"] != "speed":
            continue
        require(r["metric_unit"] == "ms", f"{path}: speed row in {r['metric_unit']!r}, expected milliseconds ('ms')")
        config = json.loads(r["extra_benchmark_config_str"])
        default_dtype, dtype_from, n_read, n_write, dims = LIGER_KERNELS[kernel]
        dtype = config["dtype"].replace("torch.", "") if "dtype" in config else default_dtype
        x = int(float(r["x_value"]))
        n_rows, hidden = dims(config, x)
        t = float(r["y_value_50"]) * 1e-3
        forward = r["kernel_operation_mode"] == "forward"
        nbytes = (n_read + n_write) * n_rows * hidden * _BYTES[dtype] if forward else None
        rows.append({
            "gpu": r["gpu_name"], "kernel": kernel, "provider": r["kernel_provider"],
            "mode": r["kernel_operation_mode"], "dtype": dtype,
            "dtype_from": "row config" if "dtype" in config else dtype_from,
            "rows": n_rows, "hidden": hidden, "x_name": r["x_name"], "x_value": x,
            "time_s": t, "time_s_p20": float(r["y_value_20"]) * 1e-3, "time_s_p80": float(r["y_value_80"]) * 1e-3,
            "io_bytes_fwd": nbytes, "gbps_fwd": nbytes / t / 1e9 if forward else None,
            "config": r["extra_benchmark_config_str"], "liger_version": r["liger_version"],
            "measured_at": r["timestamp"], "source": source_of(entry, path, commit),
        })
    return table(rows, formats=LIGER_FORMATS, nullable_int=("io_bytes_fwd",))


# ---------------------------------------------------------------------------------------------- gpu-benches

#: gpu-stream file stem → the GPU as the repository's README and file names give it.
STREAM_GPUS = {
    "h100_pcie": "NVIDIA H100 PCIe (README: CUDA 11.7)", "h200": "NVIDIA H200", "a100_80": "NVIDIA A100 80GB",
    "a100_40": "NVIDIA A100 40GB", "l40": "NVIDIA L40", "a40": "NVIDIA A40", "v100": "NVIDIA V100",
}
STREAM_ARRAY_BYTES = 128 * 1024 * 1024 * 8  # every array: 128 Mi float64
#: gpu-small-kernels file stem → how the launches were made.
SMALL_VARIANTS = {"h200": "launch", "h200_graph": "graph", "h200_pt": "persistent_atomic",
                  "h200_gsync": "persistent_gsync"}
SMALL_BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)  # the columns of a small-kernels line
_SMALL_LINE = re.compile(r"^\s*(\d+)\s+(\d+)kB\s+((?:\d+\s*)+)$")


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".txt")


def extract_gpu_benches_stream(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """``gpu-stream/<gpu>.txt`` → one row per (GPU, kernel, block size): GB/s at that occupancy (%)."""
    commit = entry.commits[0]
    rows = []
    for path in entry.paths:
        stem = _stem(path)
        require(stem in STREAM_GPUS, f"{path}: no GPU name known for {stem!r} (known: {', '.join(STREAM_GPUS)})")
        lines = text_of(read, commit, path).splitlines()
        require(bool(lines) and "|" in lines[0], f"{path}: no header line 'blockSize threads %occ | kernels'")
        kernels = lines[0].split("|")[1].split()
        require(kernels[:4] == ["init", "read", "scale", "triad"], f"{path}: unexpected kernels {kernels}")
        changed = history(read, commit, path)[0]
        for line in lines[1:]:
            if not line.strip():
                continue
            left, right = line.split("|")
            block, threads, occupancy = left.replace("%", "").split()
            values = right.replace("GB/s:", "").split()
            require(len(values) == len(kernels), f"{path}: {len(values)} values for {len(kernels)} kernels: {line!r}")
            for kernel, v in zip(kernels, values):
                rows.append({"gpu": STREAM_GPUS[stem], "file_gpu": stem, "dtype": "float64", "kernel": kernel,
                             "block_size": int(block), "threads": int(threads), "occupancy_pct": float(occupancy),
                             "array_bytes": STREAM_ARRAY_BYTES, "gbps": float(v), "file_last_changed": changed,
                             "source": source_of(entry, path, commit)})
    return table(rows)


def extract_gpu_benches_small(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """``gpu-small-kernels/h200*.txt`` → one row per (variant, size, block size): GB/s and the time per launch.

    A line is ``n  <kB>kB  <GB/s for each block size>``; the kernel moves 2·8·n bytes, so
    ``time_s = bytes / (GB/s · 1e9)`` (empty where GB/s is 0). Lines cut off when a run ended are skipped.
    """
    commit = entry.commits[0]
    rows = []
    for path in entry.paths:
        stem = _stem(path)
        require(stem in SMALL_VARIANTS, f"{path}: unknown variant {stem!r} (known: {', '.join(SMALL_VARIANTS)})")
        changed = history(read, commit, path)[0]
        for line in text_of(read, commit, path).splitlines():
            m = _SMALL_LINE.match(line)
            if not m or len(m.group(3).split()) != len(SMALL_BLOCK_SIZES):
                continue
            n = int(m.group(1))
            nbytes = 2 * 8 * n
            for block, v in zip(SMALL_BLOCK_SIZES, m.group(3).split()):
                gbps = float(v)
                rows.append({"gpu": "NVIDIA H200", "variant": SMALL_VARIANTS[stem], "dtype": "float64",
                             "kernel": "scale", "n_elements": n, "bytes_moved": nbytes, "kB_printed": int(m.group(2)),
                             "block_size": block, "gbps": gbps, "time_s": nbytes / (gbps * 1e9) if gbps > 0 else None,
                             "file_last_changed": changed, "source": source_of(entry, path, commit)})
    return table(rows, formats=SMALL_FORMATS)


# ---------------------------------------------------------------------------------------------- DeepGEMM

_RULE = re.compile(r"^\|[\s:|-]+\|$")
_GPU_LINE = re.compile(r"on (H800[^,.]*?) with (NVCC \d+(?:\.\d+)*)")


def markdown_tables(section: str) -> list[tuple[str | None, list[str], list[list[str]]]]:
    """Every pipe table of a markdown text: (the ``###`` heading above it, header cells, body rows)."""
    out, title = [], None
    lines = section.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("### "):
            title = lines[i][4:].strip()
        if lines[i].startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            body = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                body.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append((title, header, body))
            continue
        i += 1
    return out


def extract_deepgemm(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """DeepGEMM's README "Performance" tables at each pinned commit (catalogue order) → one row per shape.

    ``tflops`` and ``gbps`` are the README's whole numbers; ``time_s = 2·groups·M·N·K / (TFLOPS·1e12)``.
    """
    path = entry.paths[0]
    rows = []
    for commit in entry.commits:
        readme = text_of(read, commit, path)
        require("## Performance" in readme, f"{path}@{commit[:12]}: no '## Performance' section")
        section = readme.split("## Performance", 1)[1].split("\n## ", 1)[0]
        gpu = _GPU_LINE.search(readme)
        require(gpu is not None, f"{path}@{commit[:12]}: no 'on H800… with NVCC …' sentence")
        published = commit_date(read, commit)
        for title, header, body in markdown_tables(section):
            for cells in body:
                d = dict(zip(header, cells))
                groups = int(d.get("#Groups", 1))
                m = int(d["M per group"] if "M per group" in d else d["M"])
                n, k = int(d["N"]), int(d["K"])
                tflops = float(d["Computation"].split()[0])
                rows.append({
                    "gpu": gpu.group(1), "software": gpu.group(2), "dtype": "float8_e4m3fn (block-scaled)",
                    "out_dtype": "bfloat16", "math_dtype": "float8", "layout": "NT", "table": title, "groups": groups,
                    "M": m, "N": n, "K": k, "tflops": tflops, "gbps": float(d["Memory bandwidth"].split()[0]),
                    "speedup_vs_cutlass36": d["Speedup"].rstrip("x"),
                    "time_s": 2 * groups * m * n * k / (tflops * 1e12), "published": published,
                    "source": source_of(entry, path, commit),
                })
    return table(rows, formats=DEEPGEMM_FORMATS)
