"""Extractors for XLA's measured GPU cost tables (openxla/xla, Apache-2.0): H100 (``sm_90``) GEMMs and collectives.

XLA embeds two text-format protos written on real GPUs: ``default_matmul_perf_table.txtpb`` (before
2026-07 the same textproto inside ``matmul_interpolator_data.h``) stores, per batched dot
``[b,M,K]×[b,K,N]`` and dtype, ``flops = 2·b·M·N·K·1e9 / median_ns`` (int64, truncated);
``default_collective_perf_table.txtpb`` (before: ``collective_interpolator_data.h``) stores, per collective,
``network_throughput_bytes_per_sec = uint64(size·1e9 / runtime_ns)``. Both are inverted here to the
integer nanoseconds the generator divided by. Times are in seconds, rates in TFLOP/s and GB/s (1e9 B/s).

Besides the pinned file, the extractors read earlier versions of the table (the commits below) to record
when each value first appeared and what the earlier campaign measured; the reader fetches those commits.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import pandas as pd

from .catalog import PublishedSource
from .extract_text import Reader, require, source_of, table, text_of

_H_MATMUL = "xla/service/gpu/model/matmul_interpolator_data.h"
_TXTPB_MATMUL = "xla/service/gpu/model/default_matmul_perf_table.txtpb"
_H_COLL = "xla/service/gpu/model/collective_interpolator_data.h"
_TXTPB_COLL = "xla/service/gpu/model/default_collective_perf_table.txtpb"

#: (commit, path) of every version of the GEMM table, oldest first (all upstream openxla/xla commits).
GEMM_VERSIONS: tuple[tuple[str, str], ...] = (
    ("f3253733e51583a39abd0d293e5486b95cb83c09", _H_MATMUL),     # 2025-05-28 first embedded table
    ("b2766086ecf90e6e0a52b32f3b1837348859027f", _H_MATMUL),     # 2025-08-12 "GEMMS on H100"
    ("71feeddf7cc3c9c7878eee18ea43c983631e6e84", _H_MATMUL),     # 2025-10-21 H100 re-measured, fp8 added
    ("e97611c4c41c1f2dd331aca646792089f7f86b66", _H_MATMUL),     # 2026-02-13 GB200/GB300 added
    ("ad6eaee1b2f13931e3ceb26dc50bf3ac6b425496", _TXTPB_MATMUL),  # 2026-07-10 moved to .txtpb
    ("dc660322168302831d1cbc4c99683cd79671286e", _TXTPB_MATMUL),  # 2026-08-19 gfx950 added
)
#: The August 2025 H100 campaign, kept beside the current values as ``tflops_2025_08``.
GEMM_AUG_2025 = "b2766086ecf90e6e0a52b32f3b1837348859027f"
#: (commit, path) of every version of the collective table, oldest first.
COLLECTIVE_VERSIONS: tuple[tuple[str, str], ...] = (
    ("43a8dcc9c83d1d1b9b45aca6754383d5d3c4a7e2", _H_COLL),      # 2025-04-11 first table (AR/AG/RS on 8 GPUs)
    ("355ea80fdda3893c2d396abf3e1a34d4bc10ef4a", _H_COLL),      # 2025-06-05 all-to-all, groups of 2/4/8
    ("e34bca371fe81143f8059b6169615cb07e0101bc", _H_COLL),      # 2025-08-29 B200 added
    ("6984b93376fba7a8f15b0f022add783a2ae650ad", _H_COLL),      # 2025-12-11 collective-permute added
    ("e97611c4c41c1f2dd331aca646792089f7f86b66", _H_COLL),      # 2026-02-13 GB200/GB300 added
    ("ad6eaee1b2f13931e3ceb26dc50bf3ac6b425496", _TXTPB_COLL),  # 2026-07-10 moved to .txtpb
    ("dc660322168302831d1cbc4c99683cd79671286e", _TXTPB_COLL),  # 2026-08-19 gfx950 added
)
#: How the generator at the commit that first wrote a value timed it.
COLLECTIVE_TIMING = {
    "355ea80fdda3893c2d396abf3e1a34d4bc10ef4a":
        "median of 5 runs of ExecutionProfile.compute_time_ns (collective_perf_table_gen @da63f297)",
    "6984b93376fba7a8f15b0f022add783a2ae650ad":
        "median of 20 runs of a 1+100-iteration while loop, divided by 100 (collective_perf_table_gen @e2a7ce36)",
}
DEVICE_KEY = "sm_90"
GEMM_GPU = "H100 (sm_90; XLA's table; variant not stated, see README)"
COLLECTIVE_GPU = "H100 (sm_90; 8-GPU NVSwitch host; variant not stated)"
#: H100 SXM5 dense datasheet peaks (TFLOP/s) and HBM3 bandwidth (B/s), frozen here: they define the
#: ``above_peak``, ``floor_ratio`` and ``possible`` columns, so the table's checksum depends on them.
PEAK_TFLOPS = {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float8": 1978.9}
HBM_BYTES_PER_S = 3.35e12
_ELEMENT = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}
_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f8e4m3fn": "float8_e4m3fn",
           "f8e5m2": "float8_e5m2"}
_COLL_BYTES = {"F32": 4, "BF16": 2, "F16": 2}
_COLL_ORDER = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
#: How each table's numbers are written (the shared CSVs' formatting, which their checksums pin).
GEMM_FORMATS = {"time_s": ".9e", "tflops": ".3f", "tflops_table": ".3f", "floor_ratio": ".3f", "tflops_2025_08": ".3f"}
COLLECTIVE_FORMATS = {"time_s": ".9e", "time_us": ".3f", "algbw_GBps": ".3f", "busbw_factor": ".4f",
                      "busbw_GBps": ".3f", "time_s_2025_04": ".9e"}

# ---------------------------------------------------------------------------------------------- textproto

_TOKEN = re.compile(r'#[^\n]*|"(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"#]+')
Message = list[tuple[str, Any]]


def textproto(text: str) -> Message:
    """Parse protobuf text format into nested ``[(field, value), …]`` (value: message, int or str).

    A C++ header holding the proto in raw strings (``R"pb( … )pb"``) is read from those strings.
    """
    if 'R"pb(' in text:
        text = "".join(chunk.split(')pb"', 1)[0] for chunk in text.split('R"pb(')[1:])
    tokens = [t for t in _TOKEN.findall(text) if not t.startswith("#")]  # '#' starts a comment
    pos = 0

    def message(closing: str | None) -> Message:
        nonlocal pos
        fields: Message = []
        while pos < len(tokens) and tokens[pos] != closing:
            name = tokens[pos]
            pos += 1
            if pos < len(tokens) and tokens[pos] == ":":
                pos += 1
            require(pos < len(tokens), f"textproto ends after field {name!r}")
            if tokens[pos] == "{":
                pos += 1
                value: Any = message("}")
                pos += 1
            else:
                raw = tokens[pos]
                pos += 1
                value = raw[1:-1] if raw.startswith('"') else int(raw) if re.fullmatch(r"-?\d+", raw) else raw
            fields.append((name, value))
        require(closing is None or pos < len(tokens), "textproto: unbalanced braces")
        return fields

    return message(None)


def _get(msg: Message, name: str, default: Any = None) -> Any:
    return next((v for k, v in msg if k == name), default)


def _all(msg: Message, name: str) -> list[Any]:
    return [v for k, v in msg if k == name]


def _device(text: str, key: str) -> Iterator[Message]:
    for dev in _all(textproto(text), "entries"):
        if _get(dev, "key") == key:
            yield from _all(_get(dev, "value", []), "entries")


def _with_head(versions: tuple[tuple[str, str], ...], commit: str, path: str) -> tuple[tuple[str, str], ...]:
    """The table's versions, oldest first, ending with the pinned one (added if the list lacks it)."""
    require(all(c != commit or p == path for c, p in versions), f"{commit[:12]} is listed with another path")
    return versions if any(c == commit for c, _ in versions) else (*versions, (commit, path))


# ---------------------------------------------------------------------------------------------- GEMM

def gemm_entries(text: str, key: str = DEVICE_KEY) -> Iterator[tuple[int, int, int, int, str, int]]:
    """``(b, m, n, k, dtype key, flops)`` for every measured dot of device ``key`` in a GEMM table."""
    for e in _device(text, key):
        dims = tuple(_get(e, d) for d in "bmnk")
        require(all(isinstance(d, int) for d in dims), f"GEMM entry without b, m, n, k: {e}")
        for f in _all(e, "flops"):
            yield (*dims, str(_get(f, "key")), int(_get(f, "value")))


def _split_dtype(key: str) -> tuple[str, str, str]:
    """``'bf16xbf16->bf16'`` → ``('bfloat16', 'bfloat16', 'bfloat16')``."""
    operands, out = key.split("->")
    m = re.fullmatch(r"(.+?)x(.+)", operands)
    require(m is not None and m.group(1) in _DTYPES and m.group(2) in _DTYPES and out in _DTYPES,
            f"unknown dtype key {key!r}")
    return _DTYPES[m.group(1)], _DTYPES[m.group(2)], _DTYPES[out]


def _math(dtype: str) -> str:
    # f32 dots run as TF32 on Hopper by XLA's default precision (the table exceeds the FP32-core peak)
    return "tf32" if dtype == "float32" else "float8" if dtype.startswith("float8") else dtype


def extract_xla_gemm(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """XLA's ``sm_90`` GEMM table at the pinned commit → one row per (dtype, b, M, N, K), seconds per dot."""
    commit, path = entry.commits[0], entry.paths[0]
    versions = {c: list(gemm_entries(text_of(read, c, p))) for c, p in _with_head(GEMM_VERSIONS, commit, path)}
    first_seen: dict[tuple, str] = {}
    for c, found in versions.items():
        for e in found:
            first_seen.setdefault(e, c)
    aug = {(b, m, n, k, dk): fl for b, m, n, k, dk, fl in versions[GEMM_AUG_2025]}
    rows = []
    for b, m, n, k, dk, fl in versions[commit]:
        a_dt, b_dt, out_dt = _split_dtype(dk)
        flop = 2 * b * m * n * k
        ns = round(flop * 1e9 / fl)
        t = ns * 1e-9
        math_dt = _math(a_dt)
        tflops = flop / t / 1e12
        nbytes = b * (m * k * _ELEMENT[a_dt] + k * n * _ELEMENT[b_dt] + m * n * _ELEMENT[out_dt])
        floor_s = max(flop / (PEAK_TFLOPS[math_dt] * 1e12), nbytes / HBM_BYTES_PER_S)
        old = aug.get((b, m, n, k, dk))
        rows.append({
            "gpu": GEMM_GPU, "device_key": DEVICE_KEY, "dtype": a_dt if a_dt == b_dt else f"{a_dt}x{b_dt}",
            "out_dtype": out_dt, "math_dtype": math_dt, "b": b, "M": m, "N": n, "K": k, "layout": "NN",
            "time_s": t, "tflops": tflops, "tflops_table": fl / 1e12, "above_peak": tflops > PEAK_TFLOPS[math_dt],
            "floor_ratio": t / floor_s, "possible": t >= floor_s,
            "tflops_2025_08": None if old is None else old / 1e12,
            "first_seen": first_seen[(b, m, n, k, dk, fl)], "source": source_of(entry, path, commit),
        })
    rows.sort(key=lambda r: (r["dtype"], r["out_dtype"], r["b"], r["M"], r["N"], r["K"]))
    return table(rows, formats=GEMM_FORMATS)


# ---------------------------------------------------------------------------------------------- collectives

def collective_entries(text: str, key: str = DEVICE_KEY) -> Iterator[dict[str, Any]]:
    """One dict per profiled collective of device ``key``: opcode, element type, dims, groups, pairs, throughput."""
    for p in _device(text, key):
        ins = _get(p, "instruction", [])
        shape = _get(ins, "shape", [])
        iota = _get(ins, "iota_collective_device_list")
        if iota is None and _get(ins, "collective_device_list") is not None:
            iota = _get(_get(ins, "collective_device_list"), "iota_replica_group_list")
        groups = None if iota is None else (
            _get(iota, "num_replica_groups"), _get(iota, "num_devices_per_group"),
            tuple(_all(iota, "iota_reshape_dims")), tuple(_all(iota, "iota_transpose_perm")))
        yield {"op": _get(ins, "opcode"), "dtype": _get(shape, "element_type"),
               "dims": tuple(_all(shape, "dimensions")), "groups": groups,
               "pairs": tuple((_get(x, "source", 0), _get(x, "target", 0)) for x in _all(ins, "source_target_pairs")),
               "tput": _get(p, "network_throughput_bytes_per_sec")}


def _spec(e: dict[str, Any]) -> tuple:
    return e["op"], e["dtype"], e["dims"], e["groups"], e["pairs"]


def permute_pattern(pairs: tuple[tuple[int, int], ...]) -> tuple[int, str]:
    """(devices, name) of the generator's three collective-permute patterns."""
    n = len({d for p in pairs for d in p})
    half, s = n // 2, set(pairs)
    if s == {(i, i + half) for i in range(half)}:
        return n, "one-way i->i+n/2 (kIntraPartitionOneWay)"
    if s == {(2 * i, 2 * i + 1) for i in range(half)} | {(2 * i + 1, 2 * i) for i in range(half)}:
        return n, "mutual pairs 2i<->2i+1 (kIntraPartitionTwoWayAllMutual)"
    if s == {(i, (i + 1) % n) for i in range(n)}:
        return n, "ring i->i+1 (kIntraPartitionTwoWayHasNonMutual)"
    raise ValueError(f"unknown collective-permute pattern {pairs}")


def runtime_ns(size: int, throughput: int) -> int:
    """The integer ``ns`` with ``uint64(size·1e9 / ns) == throughput`` (the generator's division, inverted)."""
    guess = round(size * 1e9 / throughput)
    for ns in (guess, guess - 1, guess + 1):
        if ns > 0 and int(size * 1e9 / ns) == throughput:
            return ns
    raise ValueError(f"no integer runtime gives {throughput} B/s for {size} bytes")


def extract_xla_collectives(entry: PublishedSource, read: Reader) -> pd.DataFrame:
    """XLA's ``sm_90`` collective table → one row per (collective, group size, pattern, size), seconds per op.

    ``size_bytes`` is nccl-tests' "size" (reduce-scatter: the input; all-gather: the gathered output);
    ``algbw = size / time``, ``busbw = algbw ×`` 2(n−1)/n (all-reduce), (n−1)/n (gather, scatter,
    all-to-all) or 1 (permute).
    """
    commit, path = entry.commits[0], entry.paths[0]
    versions = {c: list(collective_entries(text_of(read, c, p)))
                for c, p in _with_head(COLLECTIVE_VERSIONS, commit, path)}
    first_seen: dict[tuple, str] = {}
    for c, found in versions.items():
        for e in found:
            first_seen.setdefault((_spec(e), e["tput"]), c)
    first = {_spec(e): e["tput"] for e in versions[COLLECTIVE_VERSIONS[0][0]]}
    rows = []
    for e in versions[commit]:
        op = e["op"]
        require(op in _COLL_ORDER and len(e["dims"]) == 1, f"unexpected collective entry {e}")
        out_elements = e["dims"][0]
        if op == "collective-permute":
            n, pattern = permute_pattern(e["pairs"])
            n_groups = 1
        else:
            require(e["groups"] is not None, f"{op} without replica groups: {e}")
            n_groups, n, reshape, perm = e["groups"]
            require(n_groups * n == 8 and reshape == (8,) and perm == (0,), f"unexpected replica groups {e}")
            pattern = ""
        out_bytes = out_elements * _COLL_BYTES[e["dtype"]]
        size = out_bytes * n if op == "reduce-scatter" else out_bytes
        require(size & (size - 1) == 0 and 1024 <= size <= 2 ** 31, f"unexpected size {size} in {e}")
        factor = {"all-reduce": 2 * (n - 1) / n, "collective-permute": 1.0}.get(op, (n - 1) / n)
        ns = runtime_ns(size, e["tput"])
        t = ns * 1e-9
        algbw = size / t / 1e9
        seen = first_seen[(_spec(e), e["tput"])]
        require(seen in COLLECTIVE_TIMING, f"no timing method known for values first seen at {seen}")
        old = first.get(_spec(e))
        rows.append({
            "gpu": COLLECTIVE_GPU, "device_key": DEVICE_KEY, "collective": op, "dtype": e["dtype"].lower(),
            "n_gpus": n, "n_groups": n_groups, "permute_pattern": pattern, "out_elements": out_elements,
            "size_bytes": size, "bytes_per_gpu_in": size // n if op == "all-gather" else size,
            "bytes_per_gpu_out": out_bytes, "time_s": t, "time_us": ns / 1e3, "algbw_GBps": algbw,
            "busbw_factor": factor, "busbw_GBps": algbw * factor, "throughput_table": e["tput"],
            "time_s_2025_04": None if old is None else runtime_ns(size, old) * 1e-9,
            "first_seen": seen, "timing": COLLECTIVE_TIMING[seen], "source": source_of(entry, path, commit),
        })
    rows.sort(key=lambda r: (_COLL_ORDER.index(r["collective"]), r["n_gpus"], r["permute_pattern"], r["size_bytes"]))
    return table(rows, formats=COLLECTIVE_FORMATS)
