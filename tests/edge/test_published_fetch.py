"""`perfkit published fetch`, offline: small git repositories with synthetic sources in the real formats.

Each test builds a repository in a temporary folder, fetches through ``mirrors={entry.repository: path}``
with catalogue entries (``dataclasses.replace``) that name the test commit, and checks the rows, the
bytes (the expected CSV is written out here, line by line), the checksum handling and the errors.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from perfkit.published_data import CATALOG
from perfkit.published_data import extract_deepbench as D
from perfkit.published_data import extract_xla as X
from perfkit.published_data import fetch as F
from testkit import H100_NAME

pytestmark = [pytest.mark.skipif(shutil.which("git") is None, reason="perfkit published fetch runs plain git"),
              pytest.mark.slow]  # every test runs git in subprocesses


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No user git config, no user home, no $PERFKIT_PUBLISHED."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PERFKIT_PUBLISHED", raising=False)


def make_repo(path: Path, versions: list[dict[str, bytes | None]], dates: list[str] | None = None) -> list[str]:
    """A git repository at ``path`` with one commit per version ({file: bytes, or None to delete}); the SHAs."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    run = functools.partial(subprocess.run, check=True, capture_output=True, cwd=path)
    path.mkdir(parents=True)
    run(["git", "init", "-q"], env=env)
    shas = []
    for i, files in enumerate(versions):
        for name, data in files.items():
            f = path / name
            if data is None:
                f.unlink()
                continue
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
        date = (dates or [])[i] if dates else f"2024-01-0{i + 1}T12:00:00+00:00"
        run(["git", "add", "-A"], env=env)
        run(["git", "commit", "-q", "-m", f"v{i}"], env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        shas.append(run(["git", "rev-parse", "HEAD"], env=env).stdout.decode().strip())
    return shas


def entry(name: str, commits: list[str], paths=None, expected: bytes | None = None):
    """A catalogue entry for the test repository; its checksum is that of ``expected`` (or a wrong one)."""
    e = CATALOG[name]
    sha = hashlib.sha256(expected).hexdigest() if expected is not None else "0" * 64
    return dataclasses.replace(e, commits=tuple(commits), paths=tuple(paths or e.paths), sha256=sha)


def run_fetch(tmp_path, repo, entries, **kw):
    catalog = {e.name: e for e in entries}
    kw.setdefault("into", tmp_path / "published")
    return F.fetch(list(catalog), catalog=catalog, mirrors={entries[0].repository: str(repo)},
                   cache=tmp_path / "cache", **kw)


def csv_of(header: str, rows: list[str], crlf: bool = True) -> bytes:
    end = "\r\n" if crlf else "\n"
    return (end.join([header, *rows]) + end).encode()


# ---------------------------------------------------------------------------------------------- text sources

STREAM_V100 = b"""blockSize   threads       %occ  |                init       read       scale     triad       3pt        5pt
       32        2560      3 %  |  GB/s:         153         72        128        180        122        117
     1024       81920  100.0 %  |  GB/s:         895        866        802        814        798        795
"""
STREAM_H200 = b"""blockSize   threads       %occ  |                init       read       scale     triad       1pt        3pt
       64        8448    6.2 %  |  GB/s:         590        244        463        638        425        418
"""
SMALL_H200 = (b"4096  64kB     26     26     26     26     27     27  \n"
              b"8192  128kB      0     51     52     52     51     53  \n"
              b"16384  256kB    101  \n")  # the run ended mid-line: skipped


def test_gpu_benches_stream_and_small_kernels(tmp_path):
    repo = tmp_path / "gpu-benches"
    c1, c2 = make_repo(repo, [{"gpu-stream/v100.txt": STREAM_V100},
                              {"gpu-stream/h200.txt": STREAM_H200, "gpu-small-kernels/h200.txt": SMALL_H200}])
    src = "te42kyfo/gpu-benches/gpu-stream/{}.txt@" + c2
    rows = []
    for stem, gpu, changed, lines in (("h200", "NVIDIA H200", c2, [(64, 8448, "6.2", [590, 244, 463, 638, 425, 418])]),
                                      ("v100", "NVIDIA V100", c1, [(32, 2560, "3.0", [153, 72, 128, 180, 122, 117]),
                                                                   (1024, 81920, "100.0", [895, 866, 802, 814, 798, 795])])):
        kernels = ["init", "read", "scale", "triad"] + (["1pt", "3pt"] if stem == "h200" else ["3pt", "5pt"])
        for block, threads, occ, values in lines:
            rows += [f"{gpu},{stem},float64,{k},{block},{threads},{occ},1073741824,{v}.0,{changed},{src.format(stem)}"
                     for k, v in zip(kernels, values)]
    stream = csv_of("gpu,file_gpu,dtype,kernel,block_size,threads,occupancy_pct,array_bytes,gbps,file_last_changed,"
                    "source", rows)
    small_src = f"te42kyfo/gpu-benches/gpu-small-kernels/h200.txt@{c2}"
    small_rows = []
    for n, kb, values in ((4096, 64, [26, 26, 26, 26, 27, 27]), (8192, 128, [0, 51, 52, 52, 51, 53])):
        for block, v in zip((32, 64, 128, 256, 512, 1024), values):
            t = f"{16 * n / (v * 1e9):.4e}" if v else ""
            small_rows.append(f"NVIDIA H200,launch,float64,scale,{n},{16 * n},{kb},{block},{v}.0,{t},{c2},{small_src}")
    small = csv_of("gpu,variant,dtype,kernel,n_elements,bytes_moved,kB_printed,block_size,gbps,time_s,file_last_changed,"
                   "source", small_rows)
    entries = [entry("gpu_benches_stream", [c2], ["gpu-stream/h200.txt", "gpu-stream/v100.txt"], stream),
               entry("gpu_benches_small_kernels", [c2], ["gpu-small-kernels/h200.txt"], small)]
    out = run_fetch(tmp_path, repo, entries)
    assert list(out.columns) == list(F.RESULT_COLUMNS)
    assert out["matches"].all() and out["written"].all() and out["rows"].tolist() == [18, 12]
    assert (tmp_path / "published/modern/gpu_benches_stream.csv").read_bytes() == stream
    assert (tmp_path / "published/modern/gpu_benches_small_kernels_h200.csv").read_bytes() == small
    # A second fetch finds both tables already there, byte for byte: no git, no download.
    again = F.fetch(list(e.name for e in entries), catalog={e.name: e for e in entries}, into=tmp_path / "published",
                    mirrors={entries[0].repository: str(tmp_path / "gone")}, cache=tmp_path / "no-cache")
    assert again["matches"].all() and not again["written"].any() and again["rows"].tolist() == [18, 12]
    assert not (tmp_path / "no-cache").exists()
    table = pd.read_csv(tmp_path / "published/modern/gpu_benches_small_kernels_h200.csv")
    assert table["time_s"].iloc[0] == pytest.approx(65536 / 26e9, rel=1e-4)  # seconds per launch, 2.52 µs
    assert out["sha256"].tolist() == [hashlib.sha256(stream).hexdigest(), hashlib.sha256(small).hexdigest()]
    # the cache now holds the commit: a second fetch works with the mirror gone
    shutil.rmtree(repo)
    again = run_fetch(tmp_path, repo, entries, into=tmp_path / "again")
    assert again["matches"].all() and (tmp_path / "again/modern/gpu_benches_stream.csv").read_bytes() == stream


LIGER_HEADER = ("kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
                "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version")
LN_CFG = '"{""M"": 4096, ""dtype"": ""torch.float32"", ""eps"": 1e-06}"'
SB_CFG = '"{""S"": 2048, ""B"": 4}"'
A100_NAME = "NVIDIA A100-SXM4-80GB"
LIGER = "\n".join([
    LIGER_HEADER,
    f"layer_norm,liger,forward,speed,ms,N,hidden size,1024,0.030271999537944794,0.02921600081026554,"
    f"0.03142400085926056,{LN_CFG},{A100_NAME},2024-09-03 15:39:14,0.2.1",
    f"layer_norm,liger,full,memory,MB,N,hidden size,1024,80.90625,80.90625,80.90625,{LN_CFG},{A100_NAME},2024-09-03 15:39:21,0.2.1",
    f"swiglu,liger,forward,speed,ms,T,sequence length,1024,9.2,9.1,9.3,{LN_CFG},{A100_NAME},2024-09-03 15:38:26,0.2.1",
    f"layer_norm,liger,forward,speed,ms,N,hidden size,1024,0.02,0.01,0.03,{LN_CFG},NVIDIA GeForce RTX 4090,2024-09-03,0.2.1",
    f"megatron_swiglu,liger,forward,speed,ms,ffn_local,ffn,4096,0.5,0.4,0.6,{SB_CFG},{H100_NAME},2026-07-26 00:09:58,0.8.1",
    f"megatron_swiglu,megatron,full,speed,ms,ffn_local,ffn,16384,2.55408,2.553056,2.55504,{SB_CFG},{H100_NAME},"
    f"2026-07-26 00:09:58,0.8.1",
]).encode()


def test_liger(tmp_path):
    repo = tmp_path / "liger"
    (c,) = make_repo(repo, [{"benchmark/data/all_benchmark_data.csv": LIGER}])
    src = f"linkedin/Liger-Kernel/benchmark/data/all_benchmark_data.csv@{c}"
    expected = csv_of(
        "gpu,kernel,provider,mode,dtype,dtype_from,rows,hidden,x_name,x_value,time_s,time_s_p20,time_s_p80,io_bytes_fwd,"
        "gbps_fwd,config,liger_version,measured_at,source",
        [f"{A100_NAME},layer_norm,liger,forward,float32,row config,4096,1024,N,1024,3.027200e-05,2.921600e-05,3.142400e-05,"
         f"33554432,1108.4,{LN_CFG},0.2.1,2024-09-03 15:39:14,{src}",
         # [S, B, 2·4096] read, [S, B, 4096] written, bf16: 3·8192·4096·2 B in 0.5 ms
         f"{H100_NAME},megatron_swiglu,liger,forward,bfloat16,benchmark/scripts/benchmark_megatron_swiglu.py _make_input,8192,"
         f"4096,ffn_local,4096,5.000000e-04,4.000000e-04,6.000000e-04,201326592,402.7,{SB_CFG},0.8.1,2026-07-26 00:09:58,{src}",
         f"{H100_NAME},megatron_swiglu,megatron,full,bfloat16,benchmark/scripts/benchmark_megatron_swiglu.py _make_input,8192,"
         f"16384,ffn_local,16384,2.554080e-03,2.553056e-03,2.555040e-03,,,{SB_CFG},0.8.1,2026-07-26 00:09:58,{src}"])
    out = run_fetch(tmp_path, repo, [entry("liger_memory_bound", [c], expected=expected)])
    assert out.loc[0, "matches"] and out.loc[0, "rows"] == 3
    assert (tmp_path / "published/modern/liger_memory_bound_h100_a100.csv").read_bytes() == expected


def readme(gpu: str, tables: str) -> bytes:
    return (f"# DeepGEMM\n\nIntro.\n\n## Performance\n\nWe test all shapes (…) on {gpu} with NVCC 12.8. All speedup "
            f"metrics are calculated in comparison to CUTLASS 3.6.\n\n{tables}\n## Quick start\n\n| a | b |\n|---|---|\n"
            "| 1 | 2 |\n").encode()


DENSE = """### Normal GEMMs for dense models

|  M   |   N   |   K   | Computation | Memory bandwidth | Speedup |
|:----:|:-----:|:-----:|:-----------:|:----------------:|:-------:|
|  64  | 2112  | 7168  | 206 TFLOPS  |    1688 GB/s     |  2.7x   |
| 4096 | 7168  | 2048  | 1025 TFLOPS |     697 GB/s     |  1.1x   |
"""
MASKED = """### Grouped GEMMs for MoE models (masked layout)

| #Groups | M per group |  N   |  K   | Computation | Memory bandwidth | Speedup |
|:-------:|:-----------:|:----:|:----:|:-----------:|:----------------:|:-------:|
|    4    |     256     | 4096 | 7168 | 932 TFLOPS  |    2064 GB/s     |  1.1x   |
"""


def test_deepgemm_reads_both_commits(tmp_path):
    repo = tmp_path / "deepgemm"
    c1, c2 = make_repo(repo, [{"README.md": readme("H800", DENSE)}, {"README.md": readme("H800 SXM5", MASKED)}],
                       dates=["2025-02-25T10:00:00+08:00", "2025-03-25T10:00:00+08:00"])
    pre = "float8_e4m3fn (block-scaled),bfloat16,float8,NT"
    expected = csv_of(
        "gpu,software,dtype,out_dtype,math_dtype,layout,table,groups,M,N,K,tflops,gbps,speedup_vs_cutlass36,time_s,"
        "published,source",
        [f"H800,NVCC 12.8,{pre},Normal GEMMs for dense models,1,64,2112,7168,206.0,1688.0,2.7,9.4066e-06,2025-02-25,"
         f"deepseek-ai/DeepGEMM/README.md@{c1}",
         f"H800,NVCC 12.8,{pre},Normal GEMMs for dense models,1,4096,7168,2048,1025.0,697.0,1.1,"
         f"{2 * 4096 * 7168 * 2048 / 1025e12:.4e},2025-02-25,deepseek-ai/DeepGEMM/README.md@{c1}",
         f"H800 SXM5,NVCC 12.8,{pre},Grouped GEMMs for MoE models (masked layout),4,256,4096,7168,932.0,2064.0,1.1,"
         f"6.4517e-05,2025-03-25,deepseek-ai/DeepGEMM/README.md@{c2}"])
    out = run_fetch(tmp_path, repo, [entry("deepgemm_fp8", [c1, c2], expected=expected)])
    assert out.loc[0, "matches"], (tmp_path / "published/modern/deepgemm_h800_fp8.csv").read_text()
    table = pd.read_csv(tmp_path / "published/modern/deepgemm_h800_fp8.csv")
    assert table["time_s"].iloc[0] == pytest.approx(2 * 64 * 2112 * 7168 / 206e12, rel=1e-4)  # 9.4 µs


# ---------------------------------------------------------------------------------------------- XLA

MATMUL_H, MATMUL_PB = "xla/service/gpu/model/matmul_interpolator_data.h", "xla/service/gpu/model/default_matmul_perf_table.txtpb"
COLL_H, COLL_PB = "xla/service/gpu/model/collective_interpolator_data.h", "xla/service/gpu/model/default_collective_perf_table.txtpb"
FLOP = 2 * 256 ** 3


def gemm_table(values: dict[str, int]) -> str:
    flops = "\n".join(f'      flops {{ key: "{k}" value: {v} }}' for k, v in values.items())
    return ('entries {\n  key: "sm_100_B200"\n  value {\n    entries {\n      b: 1\n      m: 256\n      n: 256\n      k: 256\n'
            '      flops { key: "bf16xbf16->bf16" value: 6765006451612 }\n    }\n  }\n}\n'
            f'entries {{\n  key: "sm_90"\n  value {{\n    entries {{\n      b: 1\n      m: 256\n      n: 256\n      k: 256\n'
            f'{flops}\n    }}\n  }}\n}}\n')


def in_header(textproto: str) -> bytes:
    return f'// Copyright\n#define X_H_\nconstexpr char kDefaultPTable[] = R"pb(\n{textproto})pb";\n#endif\n'.encode()


def test_xla_gemm(tmp_path, monkeypatch):
    bf16, f32, fp8 = (int(FLOP * 1e9 / ns) for ns in (4992, 5568, 5584))
    repo = tmp_path / "xla"
    c1, c2 = make_repo(repo, [
        {MATMUL_H: in_header(gemm_table({"bf16xbf16->bf16": bf16, "f32xf32->f32": 5653 * 10 ** 9}))},
        {MATMUL_PB: ("# Copyright\n# proto-message: xla.GemmPerfTable\n\n" + gemm_table(
            {"bf16xbf16->bf16": bf16, "f32xf32->f32": f32, "f8e5m2xf8e4m3fn->bf16": fp8})).encode()}])
    monkeypatch.setattr(X, "GEMM_VERSIONS", ((c1, MATMUL_H), (c2, MATMUL_PB)))
    monkeypatch.setattr(X, "GEMM_AUG_2025", c1)
    gpu, src = '"H100 (sm_90; XLA\'s table; variant not stated, see README)",sm_90', f"openxla/xla/{MATMUL_PB}@{c2}"
    expected = csv_of(
        "gpu,device_key,dtype,out_dtype,math_dtype,b,M,N,K,layout,time_s,tflops,tflops_table,above_peak,floor_ratio,"
        "possible,tflops_2025_08,first_seen,source",
        [f"{gpu},bfloat16,bfloat16,bfloat16,1,256,256,256,NN,4.992000000e-06,6.722,6.722,False,42.529,True,6.722,{c1},{src}",
         f"{gpu},float32,float32,tf32,1,256,256,256,NN,5.568000000e-06,6.026,6.026,False,23.718,True,5.653,{c2},{src}",
         f"{gpu},float8_e5m2xfloat8_e4m3fn,bfloat16,float8,1,256,256,256,NN,5.584000000e-06,6.009,6.009,False,71.359,True,,"
         f"{c2},{src}"])
    out = run_fetch(tmp_path, repo, [entry("xla_h100_gemm", [c2], expected=expected)])
    assert out.loc[0, "matches"], (tmp_path / "published/modern/xla_h100_gemm.csv").read_text()


def collective(op: str, elements: int, tput: int, groups: tuple[int, int] | None = None, ring: int = 0) -> str:
    if ring:
        pairs = "\n".join("      source_target_pairs { " + (f"source: {i} " if i else "") +
                          (f"target: {(i + 1) % ring}" if (i + 1) % ring else "") + " }" for i in range(ring))
    else:
        pairs = (f"      iota_collective_device_list {{\n        num_replica_groups: {groups[0]}\n"
                 f"        num_devices_per_group: {groups[1]}\n        iota_reshape_dims: 8\n        iota_transpose_perm: 0\n      }}")
    return (f'    entries {{\n      instruction {{\n        name: "_"\n        opcode: "{op}"\n        shape {{\n'
            f'          element_type: F32\n          dimensions: {elements}\n'
            f'          layout {{ minor_to_major: 0 tail_padding_alignment_in_elements: 1 }}\n'
            f'          is_dynamic_dimension: false\n        }}\n        metadata {{}}\n        channel_id: 1\n{pairs}\n'
            f'        statistics_viz {{}}\n      }}\n      fingerprint: "82724b215353fdf447c8f5867b927fe2"\n'
            f'      network_throughput_bytes_per_sec: {tput}\n    }}')


def coll_table(*entries: str) -> str:
    other = collective("all-reduce", 256, 999, (1, 8))
    return (f'entries {{\n  key: "sm_100"\n  value {{\n{other}\n  }}\n}}\n'
            f'entries {{\n  key: "sm_90"\n  value {{\n' + "\n".join(entries) + "\n  }\n}\n")


def test_xla_collectives(tmp_path, monkeypatch):
    rs = collective("reduce-scatter", 256, 154216867, (4, 2))  # 2 KiB in, groups of 2: unchanged since the first table
    repo = tmp_path / "xla"
    c1, c2 = make_repo(repo, [
        {COLL_H: in_header(coll_table(collective("all-reduce", 256, int(1024e9 / 35840), (1, 8)), rs))},
        {COLL_PB: ("# proto-message: x\n" + coll_table(
            collective("collective-permute", 256, 90820399, ring=8), rs,
            collective("all-reduce", 256, 20765736, (1, 8)))).encode()}])
    monkeypatch.setattr(X, "COLLECTIVE_VERSIONS", ((c1, COLL_H), (c2, COLL_PB)))
    monkeypatch.setattr(X, "COLLECTIVE_TIMING", {c1: "first method", c2: "second, method"})
    gpu, src = "H100 (sm_90; 8-GPU NVSwitch host; variant not stated),sm_90", f"openxla/xla/{COLL_PB}@{c2}"
    expected = csv_of(
        "gpu,device_key,collective,dtype,n_gpus,n_groups,permute_pattern,out_elements,size_bytes,bytes_per_gpu_in,"
        "bytes_per_gpu_out,time_s,time_us,algbw_GBps,busbw_factor,busbw_GBps,throughput_table,time_s_2025_04,first_seen,"
        "timing,source",
        [f'{gpu},all-reduce,f32,8,1,,256,1024,1024,1024,4.931200000e-05,49.312,0.021,1.7500,0.036,20765736,'
         f'3.584000000e-05,{c2},"second, method",{src}',
         f"{gpu},reduce-scatter,f32,2,4,,256,2048,2048,1024,1.328000000e-05,13.280,0.154,0.5000,0.077,154216867,"
         f"1.328000000e-05,{c1},first method,{src}",
         f'{gpu},collective-permute,f32,8,1,ring i->i+1 (kIntraPartitionTwoWayHasNonMutual),256,1024,1024,1024,'
         f'1.127500000e-05,11.275,0.091,1.0000,0.091,90820399,,{c2},"second, method",{src}'])
    out = run_fetch(tmp_path, repo, [entry("xla_h100_collectives", [c2], expected=expected)])
    assert out.loc[0, "matches"], (tmp_path / "published/modern/xla_h100_collectives.csv").read_text()


def test_textproto_parser():
    msg = X.textproto('# c\nentries { key: "a # not a comment" value { n: -3 x: "q\\"r" } }  # tail\n')
    assert msg == [("entries", [("key", "a # not a comment"), ("value", [("n", -3), ("x", 'q\\"r')])])]
    with pytest.raises(ValueError, match="unbalanced"):
        X.textproto("entries { key: 1")
    assert X.runtime_ns(1024, 20765736) == 49312
    assert X.permute_pattern(((0, 4), (1, 5), (2, 6), (3, 7)))[1].startswith("one-way")


# ---------------------------------------------------------------------------------------------- DeepBench

def workbook(sheets: dict[str, list[tuple[int, list]]], specs: list[tuple[str, object]]) -> bytes:
    """An .xlsx with cells placed at (row, column A…) and a Specs sheet."""
    import openpyxl
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for r, cells in rows:
            for c, v in enumerate(cells, start=1):
                if v is not None:
                    ws.cell(r, c, v)
    spec = wb.create_sheet("Specs")
    for kv in specs:
        spec.append(list(kv))
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


GEMM_HEAD = [None, "M", "N", "K", "A^T", "B^T", "Time (msec)", "TFLOPS", "Application", "Comment"]
CONV_HEAD = [None, "Input Width (W)", "Input Height (H)", "Input Channels (C)", "Batch Size (N)", "Output Channels (K)",
             "Filter Width (S)", "Filter Height (R)", "Pad W", "Pad H", "Stride W", "Stride H", "Forward Time (msec)",
             "Backward Inputs Time (msec)", "Backward Params Time (msec)", "Fwd Algo"]
RNN_HEAD = [None, "Type", "Hidden Units", "Batch Size", "Time Steps", "Forward Time (msec)",
            "Backward Inputs Time (msec)", "Backward Weights Time (msec)", "Application"]


def results_sheet(gemm: list[list], conv: list[list], rnn: list[list]) -> list[tuple[int, list]]:
    rows = [(2, ["GEMM"]), (3, GEMM_HEAD)] + [(4 + i, [None, *g]) for i, g in enumerate(gemm)]
    rows += [(9, ["Convolution"]), (10, CONV_HEAD)] + [(11 + i, [None, *c]) for i, c in enumerate(conv)]
    return rows + [(15, ["RNN"]), (16, RNN_HEAD)] + [(18 + i, [None, *r]) for i, r in enumerate(rnn)]  # 17: blank


V100_SPECS = [("GPU Model", "NVIDIA V100"), ("CUDA Version", "10.1.243"), ("cuDNN Version", "7.6.2.24")]
P100_SPECS = [("GPU Model", "NVIDIA Tesla P100"), ("CUDA Version", "8.0.88"), ("cuDNN Version", "6.0.21")]


def test_deepbench_gemm_conv_rnn(tmp_path):
    conv = [700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2, 0.078, None, 0.127, "IMPLICIT_GEMM"]
    v100 = workbook({
        D.FP32: results_sheet([[1760, 16, 1760, "N", "N", 0.038, 2.60851, "DeepSpeech", None],
                               [512, 24000, 1530, "N", "N", 2.902, None, "DeepSpeech", None]],
                              [conv], [["LSTM", 1760, 16, 50, 4.201, 2.881, 0.588, "DeepSpeech"]]),
        D.V100_FP16: results_sheet([[35, 8457, 1760, "N", "N", 0.009, None, "DeepSpeech", None],
                                    [1760, 7133, 1760, "N", "T", 0.452, None, "DeepSpeech", "(both matrices are 2560x7133)"]],
                                   [conv], [["GRU", 1024, 32, 1500, 5.0, 1.0, 2.0, None]])}, V100_SPECS)
    p100_rnn_head = [None, "Hidden Units", "Batch Size", "Time Steps", "Forward Time (msec)", "Backward Time (msec)"]
    p100 = workbook({D.FP32: results_sheet([[4096, 32, 4096, "N", "N", 0.172, None, None, None]], [conv],
                                           [["Vanilla", 1760, 16, 50, 4.2, 2.9, 0.6, None]]),
                     D.P100_FP16: [(3, GEMM_HEAD), (4, [None, 512, 32, 512, "N", "T", 0.011]), (9, CONV_HEAD),
                                   (10, [None, *conv]), (16, p100_rnn_head), (17, [None, "GRU"]),
                                   (18, [None, 1024, 32, 1500, 520.007, 727.801])]}, P100_SPECS)
    repo = tmp_path / "deepbench"
    v_path, p_path = CATALOG["deepbench_gemm"].paths
    c1, c2 = make_repo(repo, [{p_path: p100}, {v_path: v100}], dates=["2018-05-21T10:00:00-07:00", "2019-10-07T10:00:00-07:00"])
    entries = [entry(n, [c2]) for n in ("deepbench_gemm", "deepbench_conv", "deepbench_rnn")]  # checksums: wrong
    with pytest.warns(UserWarning, match="not installed"):
        out = run_fetch(tmp_path, repo, entries)
    assert out["rows"].tolist() == [6, 4, 4] and not out["matches"].any() and not out["written"].any()
    assert not (tmp_path / "published").exists()  # nothing installed
    with pytest.warns(UserWarning, match="installed anyway"):
        out = run_fetch(tmp_path, repo, entries, allow_mismatch=True)
    assert out["written"].all() and not out["matches"].any()
    raw = (tmp_path / "published/deepbench_gemm_v100_p100.csv").read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n")  # DeepBench's tables end lines with \n
    g = pd.read_csv(io.BytesIO(raw), keep_default_na=False)
    assert g["source"].tolist() == [f"baidu-research/DeepBench/{v_path}@{c2}"] * 4 + [f"baidu-research/DeepBench/{p_path}@{c2}"] * 2
    assert g["time_s"].tolist() == [3.8e-05, 0.002902, 9e-06, 0.000452, 0.000172, 1.1e-05]  # seconds, from msec
    assert g["row"].tolist() == [4, 5, 4, 5, 4, 4] and g["gpu"].tolist() == ["V100"] * 4 + ["P100"] * 2
    assert g["sheet"].tolist() == [D.FP32, D.FP32, D.V100_FP16, D.V100_FP16, D.FP32, D.P100_FP16]
    assert g["precision"].tolist() == ["float32", "float32", "float16", "float16", "float32", "float16"]
    assert g.loc[1, "tflops"] == float(f"{2 * 512 * 24000 * 1530 / 0.002902 / 1e12:g}")  # no sheet TFLOPS: from time
    assert (g.loc[1, "K_run"], g.loc[1, "note"]) == (1536, D.NOTE_K)
    assert (g.loc[2, "M_run"], g.loc[2, "K_run"], g.loc[2, "note"]) == (40, 1760, D.NOTE_SHORT)  # Tensor-Core padding
    assert (g.loc[3, "M_run"], g.loc[3, "N_run"], g.loc[3, "comment"]) == (1760, 7136, "(both matrices are 2560x7133)")
    assert g["time_ms_sheet"].tolist()[:2] == [0.038, 2.902] and g["app"].tolist()[:2] == ["DeepSpeech"] * 2
    assert g["file_last_changed"].tolist() == [f"{c2[:10]} (2019-10-07)"] * 4 + [f"{c1[:10]} (2018-05-21)"] * 2
    assert g["cuda"].tolist()[-1] == "8.0.88" and g["gpu_model_specs_sheet"].iloc[0] == "NVIDIA V100"
    c = pd.read_csv(tmp_path / "published/deepbench_conv_v100_p100.csv")
    assert c["fwd_time_s"].tolist() == [7.8e-05] * 4 and c["bwd_inputs_time_s"].isna().all()
    assert c[["S_filter_w", "R_filter_h", "pad_w", "stride_h"]].iloc[0].tolist() == [20, 5, 0, 2]
    r = pd.read_csv(tmp_path / "published/deepbench_rnn_v100_p100.csv", keep_default_na=False)
    assert r["cell"].tolist() == ["lstm", "gru", "vanilla", "gru"]  # P100 fp16: from the sub-title row
    assert r["fwd_time_s"].tolist() == [0.004201, 0.005, 0.0042, 0.520007]
    assert (r.loc[3, "bwd_time_s"], r.loc[3, "bwd_inputs_time_s"]) == ("0.727801", "")


def test_deepbench_allreduce_first_seen(tmp_path):
    head = ["All-Reduce", "Size # floats", "# chips / accelerator cards", None, None, "Mean all reduce time (msec)",
            "Std dev all reduce time (msec)", "Gigabytes/sec", "Selected Algorithm"]
    row_a = [None, 100000, 2, None, None, 0.1, 0.001, 4 * 100000 * 2 / 1e-4 / 1e9, "NCCL 2.0 single"]
    row_b = [None, 100000, 16, None, 2, 0.5, None, None, "NCCL 2.0 MPI"]
    specs = [("GPU Model", "NVIDIA Tesla P100"), ("CUDA Version", 8), ("Nvidia Driver", 367.48), ("OpenMPI Version", "1.10.2")]
    old = workbook({"Results FP32": [(344, head), (345, row_a)]}, specs)
    new = workbook({"Results FP32": [(1, ["GEMM"]), (344, head), (345, row_a), (346, row_b)]}, specs)
    text = " ".join(s for _, _, sentences in D.TOPOLOGY.values() for s in sentences)
    repo = tmp_path / "deepbench"
    new_path = "results/train/DeepBench_NV_P100.xlsx"
    c1, c2 = make_repo(repo, [{"README.md": text.encode(), "results/DeepBench_NV_P100.xlsx": old},
                              {"results/DeepBench_NV_P100.xlsx": None, new_path: new}])
    with pytest.warns(UserWarning, match="installed anyway"):
        out = run_fetch(tmp_path, repo, [entry("deepbench_allreduce", [c2], [new_path])], allow_mismatch=True)
    assert out.loc[0, "written"] and out.loc[0, "rows"] == 2
    a = pd.read_csv(tmp_path / "published/modern/deepbench_allreduce.csv", keep_default_na=False)
    assert a["first_seen"].tolist() == [c1, c2]  # row A was already in the workbook at its old path
    assert a["time_s"].tolist() == [1e-4, 5e-4] and a["time_std_s"].tolist() == ["1.000000000e-06", ""]
    assert a["n_nodes"].tolist() == [1, 2] and a["ranks_per_node"].tolist() == [2, 8]
    assert a["inter_node"].tolist() == ["", "InfiniBand FDR"]
    assert a["busbw_GBps"].tolist() == [round(4e5 / 1e-4 / 1e9, 4), round(4e5 / 5e-4 / 1e9 * 2 * 15 / 16, 4)]
    assert a[["system", "specs_cuda", "specs_driver", "row"]].iloc[0].tolist() == ["NVIDIA Tesla P100", 8, 367.48, 345]


# ---------------------------------------------------------------------------------------------- fetch itself

@pytest.fixture
def deepgemm_repo(tmp_path):
    repo = tmp_path / "deepgemm"
    (c,) = make_repo(repo, [{"README.md": readme("H800", MASKED)}])
    return repo, c


def test_mismatch_and_atomic_write(tmp_path, deepgemm_repo, monkeypatch):
    repo, c = deepgemm_repo
    e = entry("deepgemm_fp8", [c])
    with pytest.warns(UserWarning, match="SHA-256"):
        out = run_fetch(tmp_path, repo, [e])
    assert out.loc[0, ["matches", "written"]].tolist() == [False, False] and out.loc[0, "expected_sha256"] == "0" * 64
    assert not Path(out.loc[0, "path"]).exists()
    target = tmp_path / "published/modern/deepgemm_h800_fp8.csv"
    target.parent.mkdir(parents=True)
    target.write_text("old table\n")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(F.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt), pytest.warns(UserWarning):
        run_fetch(tmp_path, repo, [e], allow_mismatch=True)
    assert target.read_text() == "old table\n" and os.listdir(target.parent) == [target.name]  # no half table
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="installed anyway"):
        out = run_fetch(tmp_path, repo, [e], allow_mismatch=True)
    assert out.loc[0, "written"] and target.read_bytes().startswith(b"gpu,software,") and out.loc[0, "rows"] == 1
    assert out.loc[0, "sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()


def test_bad_input(tmp_path, deepgemm_repo):
    repo, c = deepgemm_repo
    url = CATALOG["deepgemm_fp8"].repository
    with pytest.raises(LookupError, match="unknown published source 'nope'.*xla_h100_gemm"):
        F.fetch(["nope"], into=tmp_path / "x", cache=tmp_path / "cache")
    assert not (tmp_path / "x").exists() and not (tmp_path / "cache").exists()  # refused before any disk work
    for kw, err in [(dict(names="deepgemm_fp8"), TypeError), (dict(into=3), TypeError), (dict(mirrors=[url]), TypeError),
                    (dict(mirrors={url: 5}), TypeError), (dict(mirrors={"https://example.org/x": str(repo)}), ValueError),
                    (dict(allow_mismatch="yes"), TypeError), (dict(catalog={"a": 1}), TypeError), (dict(cache=b"x"), TypeError)]:
        with pytest.raises(err, match=next(iter(kw))):
            F.fetch(**{"names": ["deepgemm_fp8"], **kw})
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="into must be a folder"):
        F.fetch(["deepgemm_fp8"], into=tmp_path / "file")
    assert set(F.EXTRACTORS) == set(CATALOG)


def test_git_failure_names_repository_and_commit(tmp_path, deepgemm_repo):
    repo, _ = deepgemm_repo
    missing = "1234567890" * 4
    e = entry("deepgemm_fp8", [missing])
    with pytest.raises(RuntimeError) as info:
        run_fetch(tmp_path, repo, [e])
    assert e.repository in str(info.value) and missing in str(info.value)
    with pytest.raises(RuntimeError, match="cannot fetch commit") as info:
        run_fetch(tmp_path, tmp_path / "no-such-repo", [e])
    assert "fatal" in str(info.value)  # git's own message


def test_source_column_is_checked(tmp_path, deepgemm_repo, monkeypatch):
    repo, c = deepgemm_repo
    real = F.EXTRACTORS["deepgemm_fp8"]

    def elsewhere(entry, read):
        frame = real(entry, read)
        frame.loc[0, "source"] = frame.loc[0, "source"].replace("deepseek-ai", "someone")
        return frame

    monkeypatch.setattr(F, "EXTRACTORS", {**F.EXTRACTORS, "deepgemm_fp8": elsewhere})
    with pytest.raises(ValueError, match="row 0 has source 'someone/DeepGEMM"):
        run_fetch(tmp_path, repo, [entry("deepgemm_fp8", [c])])
    assert not (tmp_path / "published").exists()
    e = CATALOG["deepgemm_fp8"]
    frame = pd.DataFrame({c: [1] for c in e.columns})
    frame["source"] = f"deepseek-ai/DeepGEMM/README.md@{e.commits[0]}"
    F.check_sources(e, frame)
    for bad in ("", f"deepseek-ai/DeepGEMM/other.md@{e.commits[0]}", "deepseek-ai/DeepGEMM/README.md@" + "f" * 40,
                f"someone/else/README.md@{e.commits[0]}"):
        frame["source"] = bad
        with pytest.raises(ValueError, match="source"):
            F.check_sources(e, frame)
    with pytest.raises(ValueError, match="lacks the columns"):
        F.check_sources(e, frame.drop(columns=["tflops"]))
    a = CATALOG["aiter_gemm"]  # an entry that lists a folder: the files under it, at any depth
    frame = pd.DataFrame({c: [1] for c in a.columns})
    for path in ("aiter/configs/bf16_tuned_gemm.csv", "aiter/configs/model_configs/dsv3_bf16_tuned_gemm.csv"):
        frame["source"] = f"ROCm/aiter/{path}@{a.commits[0]}"
        F.check_sources(a, frame)
    for path in ("aiter/configs_old/bf16_tuned_gemm.csv", "aiter/bf16_tuned_gemm.csv", "aiter/configs/../setup.py"):
        frame["source"] = f"ROCm/aiter/{path}@{a.commits[0]}"
        with pytest.raises(ValueError, match="file under one of"):
            F.check_sources(a, frame)


def test_main(tmp_path, deepgemm_repo, monkeypatch, capsys):
    repo, c = deepgemm_repo
    url = CATALOG["deepgemm_fp8"].repository
    args = ["deepgemm_fp8", "--into", str(tmp_path / "cli"), "--mirror", f"{url}={repo}", "--cache", str(tmp_path / "c")]
    assert F.main(["nope", "--cache", str(tmp_path / "c")]) == 2
    assert "known: deepbench_gemm" in capsys.readouterr().err
    assert F.main(args) == 2  # the real catalogue's commit is not in the test repository
    assert url in capsys.readouterr().err
    good = F.csv_bytes(F.EXTRACTORS["deepgemm_fp8"](entry("deepgemm_fp8", [c]), F.GitReader(url, str(repo), tmp_path / "c")))
    for expected, code, word in ((good, 0, "installed"), (None, 1, "NOT installed")):
        catalog = {"deepgemm_fp8": entry("deepgemm_fp8", [c], expected=expected)}
        monkeypatch.setattr(F, "fetch", functools.partial(F.fetch, catalog=catalog))
        assert F.main(args) == code
        assert word in capsys.readouterr().out
    with pytest.raises(SystemExit):
        F.main(["--mirror", "no-equals-sign"])
