"""Extractors for two kernel tables: cuDNN-frontend's training-attention benchmarks and HipKittens' benchmarks.

Ports of the reference scripts kept beside the tables (``modern/extract_cudnn_sdpa_training.py`` and
``modern/extract_hipkittens_mi350.py``): the same rows, columns, order and number formatting, so the CSV
bytes, and their SHA-256, are the catalogue's. As in :mod:`perfkit.published_data.extract_gemm_tables`,
values are kept as the scripts write them and lines end with CRLF. Times are in seconds, TFLOP/s in
1e12 FLOP/s, GB/s in 1e9 B/s.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
from typing import Any

import pandas as pd

from .catalog import PublishedSource
from .extract_gemm_tables import files_in, text_at
from .extract_text import Reader, commit_date, history, require, source_of, table

# ---------------------------------------------------------------------------------------------- cuDNN SDPA

SDPA_BASE = "benchmark/sdpa_benchmark_training"
#: How the code that wrote each file timed (spelled out in the catalogue's timing and the shared README).
TIMING_EVENTS = "CUDA events, 5 warm-up + 10 calls, median, no L2 flush"
TIMING_CUPTI_BF16 = "CUPTI kernel-time sum, L2 flushed, 30 calls, median of last 25"
TIMING_CUPTI_FP8 = "CUPTI kernel-time sum, L2 flushed, 5 warm-up + 10 calls, median of last 5"
TIMING_RESULTS = "CUPTI kernel-time sum, L2 flushed, median of calls 6..num_iterations"
#: How the FLOPs are counted: causal as half of the square, or the exact unmasked triangle.
FLOP_HALF, FLOP_TRIL = "causal=half", "causal=triangle"
_ARTIFACT = re.compile(r"sdpa_(bf16|fp8)_benchmark_results_NVIDIA_(\w+)\.csv$")
_SOFTWARE = (("torch", r"torch.__version__ = '([^']+)'"), ("CUDA", r"torch.version.cuda = '([^']+)'"),
             ("cuDNN backend", r"cudnn.backend_version\(\) = (\d+)"),
             ("torch cuDNN", r"torch.backends.cudnn.version\(\) = (\d+)"),
             ("cuDNN FE", r"cudnn.__version__ = '([^']+)'"), ("flash_attn", r"flash_attn.__version__ = '([^']+)'"))


def sdpa_versions(entry: PublishedSource, read: Reader) -> list[tuple[str, str, str]]:
    """(commit, date, path) of every CSV that one of the entry's commits added or changed under its folders,
    by date then path. (The reference script walks the history up to a newer head; the versions it finds are
    those of the catalogue's commits, which are the commits its rows name.)"""
    found = []
    for commit in entry.commits:
        touched = history(read, commit, *entry.paths)
        if not touched or touched[0] != commit:
            continue  # this commit changed nothing under the folders
        date = commit_date(read, commit)
        for folder in entry.paths:
            found += [(commit, date, p) for p in files_in(read, commit, folder)
                      if p.endswith(".csv") and history(read, commit, p)[0] == commit]
    return sorted(found, key=lambda v: (v[1], v[2]))


def tril_count(sq: int, skv: int) -> int:
    """Number of (i, j) with j <= i, 0 <= i < sq, 0 <= j < skv (``torch.tril(ones(sq, skv)).sum()``)."""
    if sq <= skv:
        return sum(min(i + 1, skv) for i in range(sq))
    return skv * (skv + 1) // 2 + (sq - skv) * skv


def flop_tril(b: int, sq: int, skv: int, hq: int, dqk: int, dv: int, mask: str, window: int | None,
              pas: str) -> int:
    """FLOPs of one pass counting the unmasked (q, k) pairs exactly (with a sliding window of ``window`` keys)."""
    if mask == "no_mask":
        n = sq * skv
    elif window:
        w, s = window, min(sq, skv)
        n = s * (s + 1) // 2 if s <= w else w * (w + 1) // 2 + (s - w) * w
    else:
        n = tril_count(sq, skv)
    base = b * hq * n * 2
    return base * (dqk + dv) if pas == "fwd" else base * (3 * dqk + 2 * dv)


def flop_half(b: int, sq: int, skv: int, hq: int, d: int, causal: bool, pas: str) -> int:
    """FLOPs of one pass as the early scripts counted them: causal is half the square, backward 2.5x."""
    f = 4 * b * sq * skv * hq * d // (2 if causal else 1)
    return f if pas == "fwd" else f * 5 // 2


def _sample_software(read: Reader, commit: str, gpu: str, kind: str) -> str:
    """Software versions printed in ``artifacts/sample_<gpu>_<kind>_run.txt`` at the commit ("" without it)."""
    path = f"{SDPA_BASE}/artifacts/sample_{gpu.lower()}_{kind}_run.txt"
    try:
        text = text_at(read, commit, path)
    except FileNotFoundError:
        return ""
    parts = [f"{label} {m.group(1)}" for label, pattern in _SOFTWARE if (m := re.search(pattern, text))]
    return "; ".join(parts) + f" (from {path.rsplit('/', 1)[1]})"


def _ms_to_s(ms: str) -> str:
    return f"{float(ms) * 1e-3:.6e}"


def _check_tflops(tflops: float, flop: int, time_s: str, where: str) -> None:
    """The printed TFLOP/s must be flop / time within the rounding of the printed time (1 µs)."""
    t = float(time_s)
    lo, hi = flop / (t + 0.5e-6) / 1e12, flop / max(t - 0.5e-6, 1e-9) / 1e12
    require(lo * 0.995 - 0.5 <= tflops <= hi * 1.005 + 0.5,
            f"{where}: printed {tflops} TFLOP/s, but {flop} FLOP in {time_s} s is {flop / t / 1e12:.3f}")


def _sdpa_artifact(entry: PublishedSource, read: Reader, commit: str, date: str, path: str) -> list[dict]:
    m = _ARTIFACT.match(path.rsplit("/", 1)[1])
    require(m is not None, f"{path}: not an sdpa_<bf16|fp8>_benchmark_results_NVIDIA_<gpu>.csv file")
    kind, gpu = m.groups()
    software = _sample_software(read, commit, gpu, kind)
    # Before b372d39 the scripts timed with CUDA events and counted causal FLOPs as half; from b372d39 on
    # they call benchmark_single_sdpa.py (CUPTI, exact triangle count).
    new_code = "benchmark_single_sdpa.py" in text_at(read, commit, f"{SDPA_BASE}/benchmark_{kind}_sdpa.py")
    timing = (TIMING_CUPTI_BF16 if kind == "bf16" else TIMING_CUPTI_FP8) if new_code else TIMING_EVENTS
    rows = []
    for r in csv.DictReader(io.StringIO(text_at(read, commit, path))):
        if kind == "bf16":
            src_backend = r["backend"]
            dtype = "fp8" if src_backend == "cudnn_fe_fp8" else "bfloat16"
            backend = "cudnn_fe" if src_backend.startswith("cudnn_fe") else src_backend
        else:
            src_backend = f"precision={r['precision']}"
            dtype = {"fp8": "fp8", "bf16": "bfloat16"}[r["precision"]]
            backend = "cudnn_fe"
        b, sq, skv = int(r["batch_size"]), int(r["q_seqlen"]), int(r["kv_seqlen"])
        hq, hkv, d = int(r["num_q_heads"]), int(r["num_kv_heads"]), int(r["head_dim"])
        causal = r["is_causal"] == "True"
        for pas, tcol, fcol in (("fwd", "forward_time", "fwd_tflops_per_sec"),
                                ("bwd", "backward_time", "bwd_tflops_per_sec")):
            if not math.isfinite(float(r[tcol])):
                continue  # the source marks the pass as failed (inf)
            if new_code:
                flop = flop_tril(b, sq, skv, hq, d, d, "top_left" if causal else "no_mask", None, pas)
            else:
                flop = flop_half(b, sq, skv, hq, d, causal, pas)
            time_s = _ms_to_s(r[tcol])
            _check_tflops(float(r[fcol]), flop, time_s, f"{path}@{commit[:12]}")
            rows.append({
                "gpu": f"NVIDIA {gpu}", "backend": backend, "backend_source": src_backend, "dtype": dtype,
                "batch": b, "seq_q": sq, "seq_kv": skv, "heads_q": hq, "heads_kv": hkv, "head_dim": d,
                "head_dim_v": d, "causal": causal, "mask": "top_left" if causal else "no_mask",
                "sliding_window": "", "pass": pas, "deterministic_bwd": "", "time_s": time_s,
                "tflops": f"{float(r[fcol]):.3f}", "flop": flop, "flop_formula": FLOP_TRIL if new_code else FLOP_HALF,
                "model": "llama3.1-405b-like", "software": software, "timing": timing, "measured": date,
                "first_seen": commit, "source": source_of(entry, path, commit),
            })
    return rows


def _sdpa_results(entry: PublishedSource, read: Reader, commit: str, date: str, path: str) -> list[dict]:
    m = re.search(r"_(\d{4})(\d{2})(\d{2})_\d{6}\.csv$", path.rsplit("/", 1)[1])
    measured = f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else date
    rows = []
    for r in csv.DictReader(io.StringIO(text_at(read, commit, path))):
        if r["success"] != "True":
            continue  # a failed run
        b, sq, skv = int(r["batch_size"]), int(r["q_seqlen"]), int(r["kv_seqlen"])
        hq, hkv = int(r["num_q_heads"]), int(r["num_kv_heads"])
        dqk, dv = int(r["head_dim_qk"]), int(r["head_dim_vo"])
        mask = r["attn_mask"]
        require(mask in ("top_left", "no_mask"), f"{path}: attn_mask {mask!r}, expected top_left or no_mask")
        window = int(r["sliding_window_size"]) if r.get("sliding_window_size") else None
        if "profile_pass" in r and r["profile_pass"] in ("fwd", "bwd") and "time_ms" in r:
            passes = [(r["profile_pass"], r["time_ms"], r["tflops"])]
        else:
            require(r.get("profile_pass") == "both", f"{path}: profile_pass {r.get('profile_pass')!r}, expected "
                                                     "fwd, bwd or both")
            passes = [("fwd", r["fwd_time_ms"], r["fwd_tflops"]), ("bwd", r["bwd_time_ms"], r["bwd_tflops"])]
        software = (f"cuDNN FE {r['cudnn_version']}; cuDNN backend "
                    f"{int(float(r['cudnn_backend_version']))} (from the row)")
        for pas, ms, tf in passes:
            flop = flop_tril(b, sq, skv, hq, dqk, dv, mask, window, pas)
            time_s = _ms_to_s(ms)
            _check_tflops(float(tf), flop, time_s, f"{path}@{commit[:12]}")
            rows.append({
                "gpu": r["gpu_name"], "backend": "cudnn_fe" if r["backend"] == "cudnn" else r["backend"],
                "backend_source": r["backend"], "dtype": r["data_type"], "batch": b, "seq_q": sq, "seq_kv": skv,
                "heads_q": hq, "heads_kv": hkv, "head_dim": dqk, "head_dim_v": dv, "causal": mask == "top_left",
                "mask": mask, "sliding_window": "" if window is None else window, "pass": pas,
                "deterministic_bwd": r["deterministic_bwd"] if pas == "bwd" else "", "time_s": time_s,
                "tflops": f"{float(tf):.3f}", "flop": flop, "flop_formula": FLOP_TRIL, "model": r["model_name"],
                "software": software, "timing": TIMING_RESULTS.replace("num_iterations", r["num_iterations"]),
                "measured": measured, "first_seen": commit, "source": source_of(entry, path, commit),
            })
    return rows


def extract_cudnn_sdpa_training(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """cuDNN-frontend's ``sdpa_benchmark_training`` CSVs (``artifacts/``, ``results/``), every version the
    entry's commits wrote → one row per pass (fwd, bwd); passes the source marks as failed are left out.

    ``time_s`` is the file's median (ms, 3 decimals); ``flop`` is recounted with the formula of the code that
    wrote the file (``flop_formula``) and checked against the printed TFLOP/s; ``measured`` is the date in the
    file name, else the commit's.
    """
    rows = []
    for commit, date, path in sdpa_versions(entry, read):
        extract = _sdpa_artifact if "/artifacts/" in path else _sdpa_results
        rows += extract(entry, read, commit, date, path)
    rows.sort(key=lambda r: (r["measured"], r["gpu"], r["source"], r["model"], r["backend"], r["dtype"],
                             r["mask"], str(r["sliding_window"]), r["batch"], r["seq_q"], r["seq_kv"],
                             r["heads_q"], r["head_dim"], r["pass"], r["deterministic_bwd"]))
    return table(rows)


# ---------------------------------------------------------------------------------------------- HipKittens

#: (path, gpu, dtype, {library: (time key, TFLOP/s key)}) of the GEMM JSONs.
HK_GEMM_JSON = (
    ("analysis/bf16_gemm/mi350x/mi355x_bf16_gemm.json", "AMD MI355X", "bfloat16",
     {"torch_matmul": ("avg_time_pytorch", "tflops_pytorch"), "aiter": ("avg_time_aiter", "tflops_aiter"),
      "hipkittens": ("avg_time", "tflops")}),
    ("analysis/bf16_gemm/mi325x/mi325x_bf16_gemm.json", "AMD MI325X", "bfloat16",
     {"torch_matmul": ("avg_time_pytorch", "tflops_pytorch"), "hipkittens": ("avg_time", "tflops")}),
    ("analysis/bf16_gemm/mi325x/data_to_log.json", "AMD MI325X", "bfloat16",
     {"torch_matmul": ("avg_time_pytorch", "tflops_pytorch"), "hipkittens": ("avg_time", "tflops")}),
    ("analysis/fp8_gemm/mi350x/mi355x_fp8_gemm.json", "AMD MI355X", "float8_e4m3fn",
     {"hipblaslt": ("avg_time_hipblaslt", "tflops_hipblaslt"), "hipkittens": ("avg_time", "tflops")}),
)
#: (path, dict name, gpu, dtype) of the library baselines hard-coded in the plot scripts (TFLOP/s only).
HK_GEMM_PLOT = (("analysis/bf16_gemm/plot.py", "mi355x_baselines", "AMD MI355X", "bfloat16"),
                ("analysis/fp8_gemm/plot.py", "mi355x_baselines", "AMD MI355X", "float8_e4m3fn"))
HK_ATTN_DIRS = (("attn_fwd", "analysis/attn/fwd/benchmark"), ("attn_bwd", "analysis/attn/bkwd/benchmark"))
#: (path, op, {library: (time key, TFLOP/s key)}) of the memory-bound kernels' JSONs.
HK_MEM_JSON = (
    ("analysis/layernorm/mi350x/mi355x_layernorm.json", "layernorm",
     {"torch_eager": ("avg_time_pytorch", "tflops_pytorch"), "torch_compile": ("avg_time_compiled", "tflops_compiled"),
      "hipkittens": ("avg_time_tk", "tflops_tk")}),
    ("analysis/rotary/mi350x/mi355x_rotary.json", "rotary",
     {"torch_eager": ("avg_time_pytorch", "tflops_pytorch"),
      "torch_compile": ("avg_time_pytorch_compiled", "tflops_pytorch_compiled"),
      "aiter": ("avg_time_aiter", "tflops_aiter"), "hipkittens": ("avg_time_tk", "tflops_tk")}),
)
HK_TIMING = "mean of 100 CUDA-event-timed calls after 500 warm-up"
HK_COLUMNS = ("gpu", "op", "library", "dtype", "batch", "M", "N", "K", "seq", "heads_q", "heads_kv", "head_dim",
              "hidden", "causal", "variant", "time_s", "time_from", "tflops", "flop", "io_bytes_min", "gbps_min",
              "json_key", "source")
_HK_OPS = {"gemm": 0, "attn_fwd": 1, "attn_bwd": 2, "layernorm": 3, "rotary": 4}
_HK_RUN = re.compile(r"python3? test_python\.py\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d)\s+(\S+\.json)(?:\s+(\d+))?")


def _hk_row(**values: Any) -> dict[str, Any]:
    """A HipKittens row: every column, blank ("") where not given."""
    return {**dict.fromkeys(HK_COLUMNS, ""), **values}


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _hk_gemm(entry: PublishedSource, read: Reader, commit: str) -> list[dict]:
    rows = []
    for path, gpu, dtype, libs in HK_GEMM_JSON:
        exact = "fp8" not in path  # bf16 JSONs: unrounded mean and TFLOP/s; the FP8 JSON rounds times to 1 us
        for key, values in json.loads(text_at(read, commit, path)).items():
            n = int(key)
            flop = 2 * n ** 3
            for lib, (tk, fk) in libs.items():
                t, tf = values[tk] * 1e-3, values[fk]
                require(_close(flop / t / 1e12, tf, 1e-9) if exact else abs(flop / tf / 1e12 - t) <= 0.6e-6,
                        f"{path}: {key} {lib}: {tf} TFLOP/s is not 2N^3 / {t} s")
                rows.append(_hk_row(gpu=gpu, op="gemm", library=lib, dtype=dtype, M=n, N=n, K=n, time_s=f"{t:.6e}",
                                    time_from=HK_TIMING if exact else "mean, printed to 1 us", tflops=f"{tf:.3f}",
                                    flop=flop, json_key=key, source=source_of(entry, path, commit)))
    for path, name, gpu, dtype in HK_GEMM_PLOT:
        nodes = [n for n in ast.parse(text_at(read, commit, path)).body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == name for t in n.targets)]
        require(len(nodes) == 1, f"{path}: {len(nodes)} assignments to {name}, expected one")
        for lib, values in ast.literal_eval(nodes[0].value).items():
            for key, tf in values.items():
                if not isinstance(tf, (int, float)):
                    continue  # "OOM"
                n = int(key)
                flop = 2 * n ** 3
                rows.append(_hk_row(gpu=gpu, op="gemm", library=lib, dtype=dtype, M=n, N=n, K=n,
                                    time_s=f"{flop / (tf * 1e12):.6e}",
                                    time_from="derived: 2N^3 / TFLOP/s (plot.py gives TFLOP/s only)",
                                    tflops=f"{tf:.3f}", flop=flop, json_key=f"{name}['{lib}']['{key}']",
                                    source=source_of(entry, path, commit)))
    return rows


def _hk_attention(entry: PublishedSource, read: Reader, commit: str) -> list[dict]:
    rows = []
    for op, folder in HK_ATTN_DIRS:
        names = [p[len(folder) + 1:] for p in files_in(read, commit, folder)]
        names = [f for f in names if "/" not in f]  # the folder's own files
        runs: dict[str, list[tuple[int, ...]]] = {}  # every `python test_python.py ...` line of every .sh
        for sh in (f for f in names if f.endswith(".sh")):
            for line in text_at(read, commit, f"{folder}/{sh}").splitlines():
                if m := _HK_RUN.search(line):
                    b, n, h, hkv, causal, fn, dd = m.groups()
                    runs.setdefault(fn, []).append((int(b), int(n), int(h), int(hkv), int(causal), int(dd or 128)))
        for fn in sorted(f for f in names if f.endswith(".json")):
            cfg = {(h, hkv, c, dd) for _, _, h, hkv, c, dd in runs.get(fn, [])}
            require(len(cfg) == 1, f"{folder}/{fn}: {len(cfg)} head/causal/dim settings in the .sh lines, expected 1")
            [(h, hkv, causal, dd)] = cfg
            variant = re.search(r"_(\dwarps)\.json$", fn)
            for key, values in json.loads(text_at(read, commit, f"{folder}/{fn}")).items():
                n = int(key)
                f1 = 4 * n * n * h * dd // (2 if causal else 1)
                if op == "attn_bwd":
                    f1 = 2.5 * f1
                for lib, tk, fk in (("aiter", "avg_time_ref", "tflops_ref"), ("hipkittens", "avg_time", "tflops")):
                    t, tf = values[tk] * 1e-3, values[fk]
                    b_exact = tf * 1e12 * t / f1
                    b = round(b_exact)
                    require(b >= 1 and abs(b_exact - b) < 1e-6 * b, f"{fn}: {key} {lib}: batch {b_exact} not whole")
                    require(b in {rb for rb, rn, *_ in runs[fn] if rn == n}, f"{fn}: {key}: batch {b} not run")
                    rows.append(_hk_row(gpu="AMD MI355X", op=op, library=lib, dtype="bfloat16", batch=b, seq=n,
                                        heads_q=h, heads_kv=hkv, head_dim=dd, causal=bool(causal),
                                        variant=variant.group(1) if variant else "", time_s=f"{t:.6e}",
                                        time_from=HK_TIMING, tflops=f"{tf:.3f}", flop=int(b * f1), json_key=key,
                                        source=source_of(entry, f"{folder}/{fn}", commit)))
    return rows


def _hk_memory(entry: PublishedSource, read: Reader, commit: str) -> list[dict]:
    rows = []
    for path, op, libs in HK_MEM_JSON:
        test = text_at(read, commit, f"{path.rsplit('/', 1)[0]}/test_python.py")
        const = {k: int(v) for k, v in re.findall(r"^(B|H|HEAD_D|D) = (\d+)\s*$", test, re.M)}
        for key, values in json.loads(text_at(read, commit, path)).items():
            n = int(key)
            if op == "layernorm":
                b, hidden = const["B"], const["HEAD_D"] * const["H"]  # D = HEAD_D * H
                flop, nbytes = 8 * b * n * hidden, 4 * b * n * hidden * 2
                shape: dict[str, int] = dict(batch=b, seq=n, hidden=hidden)
            else:
                b, h, dd = const["B"], const["H"], const["D"]
                flop, nbytes = b * h * n * (dd // 2) * 2 + b * n * (dd // 2), 2 * b * h * n * dd * 2
                shape = dict(batch=b, seq=n, heads_q=h, head_dim=dd)
            for lib, (tk, fk) in libs.items():
                t, tf = values[tk] * 1e-3, values[fk]
                require(_close(flop / t / 1e12, tf, 1e-9), f"{path}: {key} {lib}: {tf} TFLOP/s is not FLOPs / {t} s")
                rows.append(_hk_row(gpu="AMD MI355X", op=op, library=lib, dtype="bfloat16", **shape,
                                    time_s=f"{t:.6e}", time_from=HK_TIMING, tflops=f"{tf:.4f}", flop=flop,
                                    io_bytes_min=nbytes, gbps_min=f"{nbytes / t / 1e9:.1f}", json_key=key,
                                    source=source_of(entry, path, commit)))
    return rows


def extract_hipkittens(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """HipKittens' ``analysis/`` JSONs and plot baselines → one row per (kernel, library, size) on MI355X/MI325X.

    GEMMs are square (M = N = K = the JSON key); attention shapes come from the ``.sh`` lines beside the JSON,
    the batch solved from the JSON; ``time_s`` is the mean (derived from TFLOP/s for the plot baselines).
    """
    commit = entry.commits[0]
    rows = _hk_gemm(entry, read, commit) + _hk_attention(entry, read, commit) + _hk_memory(entry, read, commit)
    rows.sort(key=lambda r: (r["gpu"], _HK_OPS[r["op"]], r["dtype"], r["source"], r["variant"], r["library"],
                             int(r["M"] or r["seq"] or 0)))
    return table(rows)
