"""`perfkit published fetch` for the four newest tables, offline: MAMF, AITER, cuDNN SDPA training, HipKittens.

Each test builds a small git repository with the source's real layout and a few rows made here, fetches it
through a mirror with a catalogue entry naming the test commits, and checks the rows. Where the reference
scripts that made the catalogue's tables are present (``../shared/reference/published/modern/extract_*.py``),
each port is also checked byte for byte against its script run on the same repository (with the script's
pinned commit set to the test's); those checks skip, saying why, without them.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfkit.published_data import extract_kernel_tables as K
from perfkit.published_data import fetch as F
from test_published_fetch import _isolated, csv_of, entry, make_repo, run_fetch  # noqa: F401 (autouse fixture)

pytestmark = [pytest.mark.skipif(shutil.which("git") is None, reason="perfkit published fetch runs plain git"),
              pytest.mark.slow]  # every test runs git in subprocesses

#: The reference scripts, beside the tables in the shared folder (not in this repository).
REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "published" / "modern"
SCRIPTS = {"mamf_newest": "extract_mamf_blackwell_amd.py", "aiter_gemm": "extract_aiter_gemm_mi300_mi355.py",
           "cudnn_sdpa_training": "extract_cudnn_sdpa_training.py", "hipkittens": "extract_hipkittens_mi350.py"}


def port_bytes(tmp_path, name: str, repo: Path, commits: list[str]) -> bytes:
    """The CSV bytes perfkit's extractor makes from the test repository."""
    e = entry(name, commits)
    return F.csv_bytes(F.EXTRACTORS[name](e, F.GitReader(e.repository, str(repo), tmp_path / "port-cache")))


def reference_bytes(tmp_path, monkeypatch, name: str, repo: Path, **constants: str) -> bytes:
    """The CSV bytes the reference script writes from the test repository, its pinned commits replaced."""
    script = REFERENCE / SCRIPTS[name]
    if not script.is_file():
        pytest.skip(f"the reference script {SCRIPTS[name]} is not in {REFERENCE} (the shared folder beside the "
                    "checkout holds it)")
    spec = importlib.util.spec_from_file_location(f"reference_{name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for key, value in constants.items():
        assert isinstance(getattr(module, key), str), f"{SCRIPTS[name]} has no constant {key}"
        monkeypatch.setattr(module, key, value)
    out = tmp_path / f"reference_{name}.csv"
    monkeypatch.setattr(sys, "argv", [str(script), "--mirror", str(repo), "--out", str(out)])
    module.main()
    return out.read_bytes()


def same_as_reference(tmp_path, monkeypatch, name: str, repo: Path, commits: list[str], **constants: str) -> bytes:
    """Assert the port's bytes are the reference script's, and that fetch installs them; the bytes."""
    reference = reference_bytes(tmp_path, monkeypatch, name, repo, **constants)
    port = port_bytes(tmp_path, name, repo, commits)
    assert port.decode().splitlines() == reference.decode().splitlines()
    assert port == reference  # line ends too
    out = run_fetch(tmp_path, repo, [entry(name, commits, expected=reference)])
    assert out.loc[0, "matches"] and out.loc[0, "written"]
    return reference


def installed(tmp_path, repo: Path, name: str, commits: list[str], blank_na: bool = False) -> pd.DataFrame:
    """Fetch with a wrong checksum (allow_mismatch) and read the installed table back, blanks as "" (or NaN)."""
    with pytest.warns(UserWarning, match="installed anyway"):
        out = run_fetch(tmp_path, repo, [entry(name, commits)], allow_mismatch=True)
    assert out.loc[0, "written"]
    raw = Path(out.loc[0, "path"]).read_bytes()
    assert raw.endswith(b"\r\n") and raw.count(b"\r\n") == raw.count(b"\n")  # csv's default line end, as published
    return pd.read_csv(io.BytesIO(raw), keep_default_na=blank_na)


# ---------------------------------------------------------------------------------------------- MAMF

MAMF_PATH = "compute/accelerator/README.md"
MAMF_HEAD = ("| Accelerator | MAMF | Theory | Efficiency | Best Shape MxNxK | torch version | Notes |\n"
             "| :---------- | ---: | -----: | ---------: | :--------------- | :------------ | :---- |\n")


def mamf_readme(bf16_rows: list[str], fp8_rows: list[str]) -> bytes:
    return ("# Accelerators\n\nIntro | with a pipe.\n\n#### Maximum Achievable Matmul FLOPS comparison table\n\n"
            "Measured with mamf-finder.py.\n\n**BF16**:\n\n" + MAMF_HEAD + "\n".join(bf16_rows) +
            "\n\n**FP8 (`float8_e4m3fn`)**:\n\n" + MAMF_HEAD + "\n".join(fp8_rows) +
            "\n\nCaveat emptor: these are not the peaks.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n").encode()


B200 = "| NVIDIA B200 SXM | 1745.0 | 2250 | 77.6% | 1792x16128x3072 | 2.7.1+cu128 | |"
MAMF_BF16 = [
    "| NVIDIA A100 SXM | 271.2 | 312 | 86.9% | 1024x10240x5120 | 2.6.0+cu126 | withheld |",
    "| NVIDIA GH200 SXM | 828.6 | 989 | 83.8% | 1024x15360x4096 | 2.6.0+cu126 | withheld too |",
    B200,
    "| NVIDIA B300 SXM | 1769.0 | 2250 | 78.6% | 12288x18432x1024 | 2.9.1+cu130 | same as B200, newer torch/cuda |",
    "| | | | | | | |",
    "| AMD MI300X | 781.9 | 1300 | 60.1% | 4096x4864x2048 | 2.5.1+rocm6.2 | TunableOp on |",
    "| Intel Gaudi 2 | 418.7 | 432 | 96.9% | 14336x15360x2048 | 2.6.0+hpu_1.21.2-76.gitabf798b | PT_HPU_LAZY_MODE=1 |",
]
MAMF_FP8 = ["| NVIDIA H100 SXM | 1000.0 | 1979 | 50.5% | 8192x8192x8192 | 2.6.0 | |",
            "| NVIDIA B200 SXM | 3086 | 4500 | 68.6% | 8192x8192x8192 | 2.7.1+cu128 | |",
            "| AMD MI300X | | 2614 | | | 2.5.1+rocm6.2 | no value |"]


def mamf_repo(tmp_path) -> tuple[Path, list[str]]:
    repo = tmp_path / "ml-engineering"
    old_b200 = B200.replace("2.7.1+cu128 | |", "2.7.0+cu128 | an older note |")  # same accelerator, MAMF, shape
    old_b300 = MAMF_BF16[3].replace("1769.0", "1700.0").replace("78.6%", "75.6%")
    shas = make_repo(repo, [{MAMF_PATH: b"# Accelerators\n\nNo table yet.\n"},
                            {MAMF_PATH: mamf_readme([old_b200, old_b300], [])},
                            {"README.md": b"# ml-engineering\n"},
                            {MAMF_PATH: mamf_readme(MAMF_BF16, MAMF_FP8)}],
                     dates=["2024-02-01T10:00:00-08:00", "2025-08-30T10:00:00-08:00", "2025-09-01T10:00:00-08:00",
                            "2025-12-09T23:30:00-08:00"])
    return repo, shas


def test_mamf(tmp_path):
    repo, (_, c1, _, c3) = mamf_repo(tmp_path)
    src = f"stas00/ml-engineering/{MAMF_PATH}@{c3}"

    def line(gpu, dtype, mamf, theory, eff, m, n, k, torch_v, notes, peak, pct, seen, date):
        t = f"{2 * m * n * k / (float(mamf) * 1e12):.6e}"
        return (f"{gpu},{gpu.split()[0]},{dtype},{mamf},{theory},{eff},{m},{n},{k},{t},{torch_v},{notes},{peak},{pct},"
                f"{seen},{date},{src}")

    expected = csv_of(
        "gpu,vendor,dtype,tflops_best,theory_tflops_quoted,percent_of_peak_quoted,M,N,K,time_s,torch_version,notes,"
        "vendor_dense_peak_tflops,pct_of_vendor_peak,first_seen,first_seen_date,source",
        [line("NVIDIA B200 SXM", "bfloat16", "1745.0", 2250, 77.6, 1792, 16128, 3072, "2.7.1+cu128", "", "2250.0",
              "77.6", c1, "2025-08-30"),
         line("NVIDIA B300 SXM", "bfloat16", "1769.0", 2250, 78.6, 12288, 18432, 1024, "2.9.1+cu130",
              '"same as B200, newer torch/cuda"', "2250.0", "78.6", c3, "2025-12-09"),  # the author's date
         line("AMD MI300X", "bfloat16", "781.9", 1300, 60.1, 4096, 4864, 2048, "2.5.1+rocm6.2", "TunableOp on",
              "1307.4", "59.8", c3, "2025-12-09"),
         line("Intel Gaudi 2", "bfloat16", "418.7", 432, 96.9, 14336, 15360, 2048, "2.6.0+hpu_1.21.2-76.gitabf798b",
              "PT_HPU_LAZY_MODE=1", "", "", c3, "2025-12-09"),
         line("NVIDIA B200 SXM", "float8_e4m3fn", "3086.0", 4500, 68.6, 8192, 8192, 8192, "2.7.1+cu128", "",
              "4500.0", "68.6", c3, "2025-12-09")])
    out = run_fetch(tmp_path, repo, [entry("mamf_newest", [c3], expected=expected)])
    assert out.loc[0, "matches"], (tmp_path / "published/modern/mamf_blackwell_amd.csv").read_text()
    assert out.loc[0, "rows"] == 5  # A100/GH200/H100 withheld, the spacer row and the empty FP8 MI300X row left out


def test_mamf_rejects_a_table_in_another_format(tmp_path):
    repo = tmp_path / "ml-engineering"
    bad = mamf_readme([B200.replace("77.6%", "70.0%")], [])  # the efficiency disagrees with MAMF / theory
    (c,) = make_repo(repo, [{MAMF_PATH: bad}])
    with pytest.raises(ValueError, match="not the efficiency 70.0%"):
        run_fetch(tmp_path, repo, [entry("mamf_newest", [c])])
    (c2,) = make_repo(tmp_path / "other", [{MAMF_PATH: b"# no table\n"}])
    with pytest.raises(ValueError, match="no '#### Maximum Achievable Matmul FLOPS"):
        run_fetch(tmp_path / "second", tmp_path / "other", [entry("mamf_newest", [c2])])


def test_mamf_same_as_reference(tmp_path, monkeypatch):
    repo, shas = mamf_repo(tmp_path)
    same_as_reference(tmp_path, monkeypatch, "mamf_newest", repo, [shas[-1]], COMMIT=shas[-1])


# ---------------------------------------------------------------------------------------------- AITER

def aiter_csv(header: str, rows: list[dict]) -> bytes:
    """A tuned-GEMM file: ``tflops`` and ``bw`` as AITER prints them (2 decimals) unless a row gives its own."""
    cols = header.split(",")
    lines = []
    for r in rows:
        m, n, k, b, us = (int(r["M"]), int(r["N"]), int(r["K"]), int(r.get("B", 1)), float(r["us"]))
        a_b, out_b = (2, 4 if r.get("outdtype") == "torch.float32" else 2) if r.get("bf16") else (1, 2)
        values = {"tflops": f"{2 * b * m * n * k / us / 1e6:.2f}" if us > 0 else "0",
                  "bw": f"{b * (m * k * a_b + n * k * a_b + m * n * out_b) / us / 1e3:.2f}" if us > 0 else "0", **r}
        lines.append(",".join(str(values.get(c, "")) for c in cols))
    return csv_of(header, lines, crlf=False)


BF16_HEAD = "gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,libtype,solidx,splitK,us,kernelName,tflops,bw,errRatio"
A8W8_HEAD = "cu_num,M,N,K,kernelId,splitK,us,kernelName,tflops,bw,errRatio,gfx"
BLOCK_HEAD = "gfx,cu_num,M,N,K,q_dtype_w,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio"
BATCHED_HEAD = "gfx,cu_num,B,M,N,K,kernelId,splitK,us,kernelName,tflops,bw"


def aiter_files() -> dict[str, bytes]:
    bf16 = dict(bf16=True, N=1280, K=8192, bias="False", dtype="torch.bfloat16", scaleAB="False", errRatio="0.0")
    bf16_rows = [
        dict(bf16, gfx="gfx950", cu_num=256, M=128, outdtype="torch.float32", libtype="asm", solidx=0, splitK=2,
             us=15.0, kernelName="_ZN5aiter_bf16_128x64"),
        dict(bf16, gfx="gfx942", cu_num=304, M=128, outdtype="torch.bfloat16", libtype="hipblaslt", solidx=123,
             splitK=0, us=20.5, kernelName="Cijk_Alik_Bljk"),
        dict(bf16, gfx="gfx942", cu_num=80, M=128, outdtype="torch.bfloat16", libtype="hipblaslt", us=9.0),  # 80 CUs
        dict(bf16, gfx="gfx950", cu_num=256, M=64, outdtype="torch.bfloat16", libtype="torch", us=0),  # no time
        dict(bf16, gfx="gfx950", cu_num=256, M=32, outdtype="torch.bfloat16", libtype="triton", solidx=3, splitK=0,
             us=7.25, kernelName="triton_mm", tflops="99.99"),  # a printed TFLOP/s that disagrees
    ]
    a8w8_rows = [dict(gfx="gfx950", cu_num=256, M=16, N=7168, K=2048, kernelId=7, splitK=0, us=4.5, kernelName="",
                      errRatio=0.01),
                 dict(gfx="gfx942", cu_num=304, M=16, N=7168, K=2048, kernelId=3, splitK=1, us=6.0,
                      kernelName="a8w8_rowwise_256x16x64", errRatio=0.0)]
    sweep = [dict(gfx="gfx950", cu_num=256, M=m, N=512, K=7168, q_dtype_w="torch.float8_e4m3fn", libtype="ck",
                  kernelId=m, splitK=0, us=2.0 + m / 10, kernelName=f"blockscale_{m}") for m in range(1, 71)]
    sweep += [dict(gfx="gfx942", cu_num=304, M=m, N=512, K=7168, q_dtype_w="torch.float8_e4m3fnuz",
                   libtype="cktile", kernelId=1, splitK=0, us=3.0, kernelName="bs") for m in (6, 3, 5)]
    batched = [dict(gfx="gfx950", cu_num=256, B=16, M=32, N=1280, K=8192, kernelId=2, splitK=0, us=68.98,
                    kernelName="a8w8_batched_rowwise")]
    model = [dict(bf16, gfx="gfx950", cu_num=256, M=1, N=7168, K=512, outdtype="torch.bfloat16", libtype="asm",
                  splitK=0, us=3.2, kernelName="dsv3_kernel")]
    return {
        "aiter/configs/bf16_tuned_gemm.csv": aiter_csv(BF16_HEAD, bf16_rows),
        "aiter/configs/a8w8_tuned_gemm.csv": aiter_csv(A8W8_HEAD, a8w8_rows),
        "aiter/configs/a8w8_blockscale_tuned_gemm.csv": aiter_csv(BLOCK_HEAD, sweep),
        "aiter/configs/a8w8_tuned_batched_gemm.csv": aiter_csv(BATCHED_HEAD, batched),
        "aiter/configs/model_configs/dsv3_bf16_tuned_gemm.csv": aiter_csv(BF16_HEAD.replace("errRatio", "err_ratio"),
                                                                          model),
        # left out: no cu_num column; 4-bit; untuned; not a CSV; outside aiter/configs
        "aiter/configs/a8w8_bpreshuffle_tuned_gemm.csv": aiter_csv(BF16_HEAD.replace("cu_num,", ""), model),
        "aiter/configs/a4w4_blockscale_tuned_gemm.csv": aiter_csv(BLOCK_HEAD, sweep[:2]),
        "aiter/configs/bf16_untuned_gemm.csv": aiter_csv(BF16_HEAD, bf16_rows[:1]),
        "aiter/configs/bf16_tuned_gemm.json": b"{}\n",
        "aiter/other/bf16_tuned_gemm.csv": aiter_csv(BF16_HEAD, bf16_rows[:1]),
    }


def test_aiter_gemm(tmp_path):
    repo = tmp_path / "aiter"
    (c,) = make_repo(repo, [aiter_files()])
    t = installed(tmp_path, repo, "aiter_gemm", [c])
    assert t["source"].str.startswith("ROCm/aiter/aiter/configs/").all() and t["source"].str.endswith(f"@{c}").all()
    assert t["arch"].tolist() == ["gfx942"] * 5 + ["gfx950"] * 12  # sorted by arch, kind, dtype, file, batch, N, K, M
    assert t["kind"].tolist() == (["a8w8"] + ["a8w8_blockscale"] * 3 + ["bf16"] + ["a8w8"] + ["a8w8_batched"]
                                  + ["a8w8_blockscale"] * 7 + ["bf16"] * 3)
    g950 = t[t["arch"] == "gfx950"]
    assert g950[g950["kind"] == "a8w8_blockscale"]["M"].tolist() == [1, 2, 4, 8, 16, 32, 64]  # a dense M sweep
    assert t[t["arch"] == "gfx942"]["M"].tolist()[1:4] == [3, 5, 6]  # three M values: all kept
    assert t["dtype"].tolist()[:2] == ["float8_e4m3fnuz", "float8_e4m3fnuz"] and t["dtype"].iloc[5] == "float8_e4m3fn"
    assert t["dtype"].iloc[6] == "int8" and t["batch"].iloc[6] == 16
    assert t["kernel"].iloc[5] == "kernelId=7" and t["err_ratio"].iloc[5] == "0.01"
    bf16 = t[t["kind"] == "bf16"]
    assert bf16["model_file"].tolist() == ["", "", "", "dsv3_bf16_tuned_gemm.csv"]
    assert bf16["M"].tolist() == [128, 32, 128, 1] and bf16["out_dtype"].tolist()[:3] == ["bfloat16", "bfloat16",
                                                                                           "float32"]
    row = bf16.iloc[2]  # gfx950, fp32 out: 2·128·1280·8192 FLOP and (128·8192·2 + 1280·8192·2 + 128·1280·4) B in 15 µs
    assert row["time_s"] == 1.5e-05 and row["tflops"] == round(2 * 128 * 1280 * 8192 / 15e-6 / 1e12, 2)
    assert row["gbps"] == round((128 * 8192 * 2 + 1280 * 8192 * 2 + 128 * 1280 * 4) / 15e-6 / 1e9, 2)
    assert row["gpu"] == "AMD MI355X or MI350X (gfx950, 256 CUs)" and row["split_k"] == 2 and row["libtype"] == "asm"
    assert bf16["tflops_file_ok"].tolist() == [True, False, True, True] and t["gbps_file_ok"].all()


def test_aiter_gemm_same_as_reference(tmp_path, monkeypatch):
    repo = tmp_path / "aiter"
    (c,) = make_repo(repo, [aiter_files()])
    same_as_reference(tmp_path, monkeypatch, "aiter_gemm", repo, [c], COMMIT=c)


# ---------------------------------------------------------------------------------------------- cuDNN SDPA

BASE = "benchmark/sdpa_benchmark_training"
ART_HEAD = ("batch_size,q_seqlen,kv_seqlen,num_q_heads,num_kv_heads,head_dim,is_causal,{},forward_time,"
            "backward_time,fwd_tflops_per_sec,bwd_tflops_per_sec")
RES_HEAD = ("gpu_name,model_name,backend,data_type,batch_size,q_seqlen,kv_seqlen,num_q_heads,num_kv_heads,"
            "head_dim_qk,head_dim_vo,attn_mask,sliding_window_size,profile_pass,deterministic_bwd,num_iterations,"
            "fwd_time_ms,fwd_tflops,bwd_time_ms,bwd_tflops,time_ms,tflops,cudnn_version,cudnn_backend_version,success")


def half(s: int, causal: bool) -> tuple[int, int]:
    """(fwd, bwd) FLOPs of one 128-head, d = 128 layer as the early scripts counted them."""
    fwd = 4 * s * s * 128 * 128 // (2 if causal else 1)
    return fwd, fwd * 5 // 2


def triangle(s: int, h: int, dqk: int, dv: int, causal: bool, window: int = 0) -> tuple[int, int]:
    """(fwd, bwd) FLOPs counting the unmasked (q, k) pairs of an s × s causal mask exactly."""
    pairs = (window * (window + 1) // 2 + (s - window) * window if window else s * (s + 1) // 2) if causal else s * s
    return 2 * h * pairs * (dqk + dv), 2 * h * pairs * (3 * dqk + 2 * dv)


def tf(flop: int, ms: float) -> str:
    return f"{flop / (ms * 1e-3) / 1e12 * 1.001:.3f}"  # as printed: a little off the rounded time


def artifact(label: str, rows: list[tuple[int, bool, str, float, float, tuple[int, int]]]) -> bytes:
    return csv_of(ART_HEAD.format(label), [f"1,{s},{s},128,8,128,{c},{b},{fm},{bm},{tf(fl[0], fm)},{tf(fl[1], bm)}"
                                           if fm != float("inf") else f"1,{s},{s},128,8,128,{c},{b},inf,inf,0,0"
                                           for s, c, b, fm, bm, fl in rows], crlf=False)


def result(gpu: str, s: int, mask: str, window: str, pas: str, ms: tuple[float, float], ok: str = "True",
           det: str = "False") -> str:
    h, dqk, dv = 64, 192, 128
    fl = triangle(s, h, dqk, dv, mask == "top_left", int(window or 0))
    both = pas == "both"
    one = (fl[0] if pas == "fwd" else fl[1], ms[0])
    return ",".join(map(str, [gpu, "deepseek_v3", "cudnn", "bfloat16", 1, s, s, h, h, dqk, dv, mask, window, pas, det,
                              30, ms[0] if both else "", tf(fl[0], ms[0]) if both else "", ms[1] if both else "",
                              tf(fl[1], ms[1]) if both else "", "" if both else one[1],
                              "" if both else tf(one[0], one[1]), "1.17.0", "91300.0", ok]))


def cudnn_repo(tmp_path) -> tuple[Path, list[str]]:
    old, new = b"import torch\n# torch.cuda.Event pairs\n", b"import subprocess\n# runs benchmark_single_sdpa.py\n"
    b200 = f"{BASE}/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv"
    gb200 = f"{BASE}/artifacts/sdpa_fp8_benchmark_results_NVIDIA_GB200.csv"
    log = (b"torch.__version__ = '2.8.0a0+5228986c39.nv25.06'\ntorch.version.cuda = '12.9'\n"
           b"torch.backends.cudnn.version() = 91002\nflash_attn.__version__ = '2.7.4.post1'\n")
    v1 = {f"{BASE}/benchmark_bf16_sdpa.py": old, f"{BASE}/benchmark_fp8_sdpa.py": old,
          f"{BASE}/artifacts/sample_b200_bf16_run.txt": log,
          b200: artifact("backend", [(512, True, "flash_attention", 0.187, 0.765, half(512, True)),
                                     (512, True, "cudnn_fe", 0.101, 0.333, half(512, True)),
                                     (16384, True, "pyt_math", float("inf"), 0, (0, 0)),
                                     (1024, False, "cudnn_fe_fp8", 0.12, 0.4, half(1024, False))])}
    v3 = {f"{BASE}/benchmark_fp8_sdpa.py": new,
          b200: artifact("backend", [(2048, True, "cudnn_fe", 0.5, 1.5, half(2048, True))]),
          gb200: artifact("precision", [(512, True, "fp8", 0.05, 0.15, triangle(512, 128, 128, 128, True)),
                                        (512, False, "bf16", 0.09, 0.3, triangle(512, 128, 128, 128, False))])}
    v4 = {f"{BASE}/results/gb300_deepseek_20260226_101010.csv": csv_of(RES_HEAD, [
              result("NVIDIA GB300", 4096, "top_left", "", "both", (0.9, 2.7), det="True"),
              result("NVIDIA GB300", 4096, "top_left", "128", "both", (0.2, 0.6)),
              result("NVIDIA GB300", 8192, "no_mask", "", "both", (5.0, 15.0), ok="False"),
              result("NVIDIA GB300", 1024, "no_mask", "", "both", (0.3, 0.8))], crlf=False),
          f"{BASE}/results/h200_deepseek.csv": csv_of(RES_HEAD, [
              result("NVIDIA H200", 2048, "top_left", "", "bwd", (1.1, 0)),
              result("NVIDIA H200", 2048, "top_left", "", "fwd", (0.45, 0))], crlf=False)}
    return tmp_path / "cudnn", make_repo(tmp_path / "cudnn", [
        v1, {f"{BASE}/README.md": b"# how to run\n"}, v3, v4, {gb200: None}],
        dates=["2025-07-16T10:00:00-07:00", "2025-08-01T10:00:00-07:00", "2025-10-10T10:00:00-07:00",
               "2026-02-27T10:00:00-08:00", "2026-03-01T10:00:00-08:00"])


def test_cudnn_sdpa_training(tmp_path):
    repo, shas = cudnn_repo(tmp_path)
    c1, _, c3, c4, _ = shas
    assert K.sdpa_versions(entry("cudnn_sdpa_training", shas[::-1]), F.GitReader("x", str(repo), tmp_path / "c")) == [
        (c1, "2025-07-16", f"{BASE}/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv"),
        (c3, "2025-10-10", f"{BASE}/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv"),
        (c3, "2025-10-10", f"{BASE}/artifacts/sdpa_fp8_benchmark_results_NVIDIA_GB200.csv"),
        (c4, "2026-02-27", f"{BASE}/results/gb300_deepseek_20260226_101010.csv"),
        (c4, "2026-02-27", f"{BASE}/results/h200_deepseek.csv")]  # not the README's commit, not the deletion
    t = installed(tmp_path, repo, "cudnn_sdpa_training", shas[::-1])
    assert len(t) == 6 + 2 + 4 + 6 + 2  # the failed passes (inf, success False) left out
    assert t["measured"].tolist() == sorted(t["measured"]) and t["first_seen"].iloc[0] == c1
    first = t.iloc[:6]  # 2025-07-16: CUDA events, causal counted as half
    assert first["backend"].tolist() == ["cudnn_fe"] * 4 + ["flash_attention"] * 2
    assert first["dtype"].tolist() == ["bfloat16", "bfloat16", "fp8", "fp8", "bfloat16", "bfloat16"]
    assert first["backend_source"].tolist()[:3] == ["cudnn_fe", "cudnn_fe", "cudnn_fe_fp8"]
    assert first["flop"].tolist()[:4] == [*half(512, True)[::-1], *half(1024, False)[::-1]]  # bwd before fwd
    assert (first["timing"] == K.TIMING_EVENTS).all() and (first["flop_formula"] == K.FLOP_HALF).all()
    assert first["software"].iloc[0] == ("torch 2.8.0a0+5228986c39.nv25.06; CUDA 12.9; torch cuDNN 91002; "
                                         "flash_attn 2.7.4.post1 (from sample_b200_bf16_run.txt)")
    assert first["time_s"].iloc[-1] == 1.87e-4 and first["seq_q"].iloc[-1] == 512
    gb200 = t[t["gpu"] == "NVIDIA GB200"]  # the new fp8 script: CUPTI, the exact triangle; no run log beside it
    assert (gb200["timing"] == K.TIMING_CUPTI_FP8).all() and (gb200["software"] == "").all()
    assert gb200["dtype"].tolist() == ["bfloat16", "bfloat16", "fp8", "fp8"]
    assert gb200["flop"].tolist() == [*triangle(512, 128, 128, 128, False)[::-1], *triangle(512, 128, 128, 128, True)[::-1]]
    assert (t[t["gpu"] == "NVIDIA B200"]["flop_formula"] == K.FLOP_HALF).all()  # the bf16 script was still old
    gb300 = t[t["gpu"] == "NVIDIA GB300"]
    assert (gb300["measured"] == "2026-02-26").all()  # the date in the file name, not the commit's
    assert gb300["sliding_window"].tolist() == ["", "", "", "", "128", "128"]
    assert gb300["mask"].tolist()[:2] == ["no_mask", "no_mask"] and gb300["causal"].tolist()[2:] == [True] * 4
    assert gb300["deterministic_bwd"].tolist() == ["False", "", "True", "", "False", ""]
    assert gb300["flop"].iloc[4] == triangle(4096, 64, 192, 128, True, 128)[1]
    assert (gb300["timing"] == "CUPTI kernel-time sum, L2 flushed, median of calls 6..30").all()
    assert gb300["software"].iloc[0] == "cuDNN FE 1.17.0; cuDNN backend 91300 (from the row)"
    h200 = t[t["gpu"] == "NVIDIA H200"]
    assert h200["measured"].tolist() == ["2026-02-27"] * 2 and h200["pass"].tolist() == ["bwd", "fwd"]
    assert h200["time_s"].tolist() == [1.1e-3, 4.5e-4] and h200["head_dim_v"].tolist() == [128, 128]


def test_cudnn_checks_the_printed_tflops(tmp_path):
    row = result("NVIDIA GB300", 1024, "no_mask", "", "both", (0.3, 0.8))
    bad = csv_of(RES_HEAD, [row.replace(",30,0.3,", ",30,0.6,")], crlf=False)  # twice the time, the same TFLOP/s
    repo = tmp_path / "cudnn"
    (c,) = make_repo(repo, [{f"{BASE}/results/x.csv": bad}])
    with pytest.raises(ValueError, match="printed .* TFLOP/s"):
        run_fetch(tmp_path, repo, [entry("cudnn_sdpa_training", [c])])


def test_cudnn_sdpa_training_same_as_reference(tmp_path, monkeypatch):
    repo, shas = cudnn_repo(tmp_path)
    same_as_reference(tmp_path, monkeypatch, "cudnn_sdpa_training", repo, shas[::-1], HEAD_COMMIT=shas[-1])


# ---------------------------------------------------------------------------------------------- HipKittens

def timed(flop: float, ms: float, keys: tuple[str, str]) -> dict[str, float]:
    """A JSON entry: the mean time in ms and the TFLOP/s test_python.py prints from it."""
    return {keys[0]: ms, keys[1]: flop / (ms * 1e-3) / 1e12}


def gemm_json(sizes: dict[int, float], libs: list[tuple[str, str]], fp8: bool = False) -> bytes:
    data = {}
    for n, ms in sizes.items():
        entry_ = {}
        for i, keys in enumerate(libs):
            true_ms = ms * (1 + i / 10)
            entry_.update(timed(2 * n ** 3, true_ms, keys))
            if fp8:
                entry_[keys[0]] = round(true_ms, 3)  # the FP8 JSON prints times to 1 us
        data[str(n)] = entry_
    return json.dumps(data, indent=2).encode()


def attn_json(sizes: dict[int, tuple[int, float]], h: int, d: int, causal: bool, bwd: bool) -> bytes:
    data = {}
    for n, (b, ms) in sizes.items():
        f1 = 4 * n * n * h * d // (2 if causal else 1) * (2.5 if bwd else 1)
        data[str(n)] = {**timed(b * f1, ms * 1.3, ("avg_time_ref", "tflops_ref")),
                        **timed(b * f1, ms, ("avg_time", "tflops"))}
    return json.dumps(data).encode()


def hipkittens_files() -> dict[str, bytes]:
    torch_hk = [("avg_time_pytorch", "tflops_pytorch"), ("avg_time", "tflops")]
    ln_flop, rot = (lambda n: 8 * 16 * n * 2048), (lambda n: 16 * 16 * n * 64 * 2 + 16 * n * 64)
    fwd, bwd = "analysis/attn/fwd/benchmark", "analysis/attn/bkwd/benchmark"
    plot = ('import matplotlib\nother = 1\nmi355x_baselines = {\n    "hipblaslt": {"1024": 500.5, "2048": "OOM"},\n'
            '    "triton": {"1024": 400},\n}\nmi325x_baselines = {"ck": {"1024": 1.0}}\n')
    return {
        "analysis/bf16_gemm/mi350x/mi355x_bf16_gemm.json": gemm_json(
            {8192: 1.5, 1024: 0.011}, [("avg_time_pytorch", "tflops_pytorch"), ("avg_time_aiter", "tflops_aiter"),
                                       ("avg_time", "tflops")]),
        "analysis/bf16_gemm/mi325x/mi325x_bf16_gemm.json": gemm_json({2048: 0.06}, torch_hk),
        "analysis/bf16_gemm/mi325x/data_to_log.json": gemm_json({1024: 0.03}, torch_hk),
        "analysis/fp8_gemm/mi350x/mi355x_fp8_gemm.json": gemm_json(
            {4096: 0.05}, [("avg_time_hipblaslt", "tflops_hipblaslt"), ("avg_time", "tflops")], fp8=True),
        "analysis/bf16_gemm/plot.py": plot.encode(),
        "analysis/fp8_gemm/plot.py": plot.replace("500.5", "900").encode(),
        f"{fwd}/run.sh": (b"python test_python.py 16 1024 64 8 1 mi355x_gqa_causal_fwd.json\n"
                          b"# python test_python.py 15 2048 64 8 1 mi355x_gqa_causal_fwd.json\n"
                          b"python3 test_python.py 8 1024 64 64 0 mi355x_d64_mha_non_causal_fwd.json 64\n"),
        f"{fwd}/mi355x_gqa_causal_fwd.json": attn_json({1024: (16, 0.2), 2048: (15, 0.5)}, 64, 128, True, False),
        f"{fwd}/mi355x_d64_mha_non_causal_fwd.json": attn_json({1024: (8, 0.1)}, 64, 64, False, False),
        f"{fwd}/old/mi355x_gqa_causal_fwd.json": b"{not json",  # a subfolder: not read
        f"{bwd}/bench.sh": b"python test_python.py 16 1024 64 8 1 mi355x_gqa_bkwd_causal_4warps.json\n",
        f"{bwd}/mi355x_gqa_bkwd_causal_4warps.json": attn_json({1024: (16, 0.7)}, 64, 128, True, True),
        "analysis/layernorm/mi350x/test_python.py": b"import torch\nB = 16\nH = 16\nHEAD_D = 128\nD = HEAD_D * H\n",
        "analysis/layernorm/mi350x/mi355x_layernorm.json": json.dumps({str(n): {
            **timed(ln_flop(n), 0.02, ("avg_time_pytorch", "tflops_pytorch")),
            **timed(ln_flop(n), 0.03, ("avg_time_compiled", "tflops_compiled")),
            **timed(ln_flop(n), 0.01, ("avg_time_tk", "tflops_tk"))} for n in (1024, 4096)}).encode(),
        "analysis/rotary/mi350x/test_python.py": b"B = 16\nH = 16\nD = 128\n",
        "analysis/rotary/mi350x/mi355x_rotary.json": json.dumps({"2048": {
            **timed(rot(2048), 0.05, ("avg_time_pytorch", "tflops_pytorch")),
            **timed(rot(2048), 0.04, ("avg_time_pytorch_compiled", "tflops_pytorch_compiled")),
            **timed(rot(2048), 0.03, ("avg_time_aiter", "tflops_aiter")),
            **timed(rot(2048), 0.02, ("avg_time_tk", "tflops_tk"))}}).encode(),
    }


def test_hipkittens(tmp_path):
    repo = tmp_path / "hipkittens"
    (c,) = make_repo(repo, [hipkittens_files()])
    t = installed(tmp_path, repo, "hipkittens", [c], blank_na=True)  # numbers with gaps: float
    assert t["gpu"].tolist() == ["AMD MI325X"] * 4 + ["AMD MI355X"] * (12 + 6 + 2 + 6 + 4)
    assert t["op"].tolist()[4:] == ["gemm"] * 12 + ["attn_fwd"] * 6 + ["attn_bwd"] * 2 + ["layernorm"] * 6 + [
        "rotary"] * 4  # "OOM" left out
    gemm = t[(t["op"] == "gemm") & (t["gpu"] == "AMD MI355X")]
    assert gemm["dtype"].tolist() == ["bfloat16"] * 8 + ["float8_e4m3fn"] * 4
    assert gemm["library"].tolist()[:8] == ["aiter", "aiter", "hipkittens", "hipkittens", "torch_matmul",
                                            "torch_matmul", "hipblaslt", "triton"]
    assert gemm["M"].tolist()[:2] == [1024, 8192] and gemm["K"].tolist()[:2] == [1024, 8192]
    plot = gemm[gemm["source"].str.contains("plot.py")]
    assert plot["json_key"].tolist() == ["mi355x_baselines['hipblaslt']['1024']", "mi355x_baselines['triton']['1024']",
                                         "mi355x_baselines['hipblaslt']['1024']", "mi355x_baselines['triton']['1024']"]
    assert plot["tflops"].tolist() == [500.5, 400.0, 900.0, 400.0] and plot["time_s"].iloc[0] == float(
        f"{2 * 1024 ** 3 / 500.5e12:.6e}")  # derived from TFLOP/s
    fp8 = gemm[gemm["source"].str.contains("mi355x_fp8")]
    assert (fp8["time_from"] == "mean, printed to 1 us").all() and fp8["time_s"].tolist() == [5e-05, 5.5e-05]
    fwd = t[t["op"] == "attn_fwd"]
    assert fwd["head_dim"].tolist() == [64, 64, 128, 128, 128, 128] and fwd["heads_kv"].tolist() == [64] * 2 + [8] * 4
    assert fwd["batch"].tolist() == [8, 8, 16, 15, 16, 15] and fwd["causal"].tolist() == [False] * 2 + [True] * 4
    assert fwd["flop"].iloc[3] == 15 * 4 * 2048 ** 2 * 64 * 128 // 2  # the batch solved from the JSON: 15
    bwd = t[t["op"] == "attn_bwd"]
    assert bwd["variant"].tolist() == ["4warps"] * 2 and bwd["flop"].iloc[0] == int(16 * 2.5 * 4 * 1024 ** 2 * 64 * 64)
    ln = t[t["op"] == "layernorm"]
    assert ln["library"].tolist() == ["hipkittens"] * 2 + ["torch_compile"] * 2 + ["torch_eager"] * 2
    assert ln["hidden"].tolist() == [2048] * 6 and ln["io_bytes_min"].iloc[0] == 4 * 16 * 1024 * 2048 * 2
    assert ln["gbps_min"].iloc[0] == round(4 * 16 * 1024 * 2048 * 2 / 1e-5 / 1e9, 1)
    rotary = t[t["op"] == "rotary"]
    assert rotary["heads_q"].tolist() == [16] * 4 and rotary["io_bytes_min"].iloc[0] == 2 * 16 * 16 * 2048 * 128 * 2


def test_hipkittens_needs_the_run_lines(tmp_path):
    files = hipkittens_files()
    files["analysis/attn/bkwd/benchmark/bench.sh"] = b"echo nothing\n"
    repo = tmp_path / "hipkittens"
    (c,) = make_repo(repo, [files])
    with pytest.raises(ValueError, match="mi355x_gqa_bkwd_causal_4warps.json: 0 head/causal/dim settings"):
        run_fetch(tmp_path, repo, [entry("hipkittens", [c])])


def test_hipkittens_same_as_reference(tmp_path, monkeypatch):
    repo = tmp_path / "hipkittens"
    (c,) = make_repo(repo, [hipkittens_files()])
    same_as_reference(tmp_path, monkeypatch, "hipkittens", repo, [c], COMMIT=c)


# ---------------------------------------------------------------------------------------------- listing

def test_reader_lists_a_folder_and_extractors_ask_for_it(tmp_path):
    repo = tmp_path / "r"
    c1, c2 = make_repo(repo, [{"a/x.csv": b"1\n", "a/b/y.csv": b"2\n", "ab.csv": b"3\n"}, {"a/x.csv": None}])
    read = F.GitReader("https://github.com/ROCm/aiter", str(repo), tmp_path / "cache")
    assert read.files(c1, "a") == ["a/b/y.csv", "a/x.csv"] and read.files(c1, "a/") == read.files(c1, "a")
    assert read.files(c2, "a") == ["a/b/y.csv"] and read.files(c2, "nowhere") == []
    with pytest.raises(TypeError, match="files"):
        F.EXTRACTORS["aiter_gemm"](entry("aiter_gemm", [c1]), lambda commit, path: read(commit, path))
