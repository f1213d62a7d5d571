"""The published third-party measurements perfkit knows: where each comes from and how it was timed.

perfkit ships none of these tables: they are other people's datasets. Each entry pins the public
repository and commit the table is extracted from, the files read there, the licence, how the
publisher timed, which column names the GPU, and the SHA-256 of the extracted CSV (so a table
made by ``perfkit published fetch`` can be checked against the one this project reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class PublishedSource:
    """One published table: a CSV under the published-data folder, and its provenance.

    ``file`` is the CSV's path inside that folder; ``gpu_column`` names the column with the
    publisher's GPU label, ``gpus`` maps each label to perfkit's device-table name (``""`` where
    perfkit has no entry). ``commits`` are the repository commits the rows' ``source`` column may
    name; ``paths`` the files read at those commits. ``sha256`` is the checksum of the CSV.
    """

    name: str
    file: str
    title: str
    publisher: str
    repository: str
    commits: tuple[str, ...]
    paths: tuple[str, ...]
    licence: str
    timing: str
    date: str
    chapters: tuple[str, ...]
    gpu_column: str
    gpus: Mapping[str, str]
    columns: tuple[str, ...]
    sha256: str
    caveat: str = ""
    extras: Mapping[str, str] = field(default_factory=dict)

    @property
    def devices(self) -> tuple[str, ...]:
        """perfkit's names of the GPUs in this table (those it has a spec for), in table order."""
        return tuple(dict.fromkeys(d for d in self.gpus.values() if d))

    @property
    def commit(self) -> str:
        """The newest commit the table is read at (short form, 12 hex digits)."""
        return self.commits[0][:12]


DEEPBENCH_TIMING = ("One warm-up call, then N back-to-back calls timed with std::chrono::steady_clock around "
                    "the loop and one cudaDeviceSynchronize; the per-call mean is printed in whole "
                    "microseconds (truncated). Launches are pipelined and L2 is not flushed between calls.")
_DEEPBENCH = dict(
    publisher="Baidu DeepBench", repository="https://github.com/baidu-research/DeepBench",
    commits=("da81ba7820739e2e506dc27f382d15be5479f98f",), licence="Apache-2.0", timing=DEEPBENCH_TIMING,
    date="2018–2019", gpu_column="gpu", gpus={"V100": "V100-SXM2", "P100": "P100-PCIe"},
    paths=("results/train/DeepBench_NV_V100.xlsx", "results/train/DeepBench_NV_P100.xlsx"),
)
_GPU_BENCHES = dict(
    publisher="gpu-benches (Dominik Ernst)", repository="https://github.com/te42kyfo/gpu-benches",
    commits=("1c36d509ee717dca9215c27135fa1e611bb03ed1",), licence="GPL-3.0 (numbers cited, files not copied)",
    timing=("float64 kernels timed on the host around the launch loop, median of 3; GB/s printed as a whole "
            "number"),
)
_XLA_COMMIT = "dc660322168302831d1cbc4c99683cd79671286e"

_ENTRIES = (
    PublishedSource(
        name="deepbench_gemm", file="deepbench_gemm_v100_p100.csv", chapters=("gemm", "fully_connected"),
        title="DeepBench training GEMMs (cublasGemmEx, beta = 1), fp32 and fp16, V100 (2019) and P100 (2018)",
        columns=("source", "gpu", "precision", "M", "N", "K", "a_t", "b_t", "time_s", "M_run", "N_run", "K_run",
                 "sheet", "row"),
        sha256="1f278bd5813a3f2f3996ecbdd3de6015171b8a57bb2acf2e64a44ce472a88958", **_DEEPBENCH),
    PublishedSource(
        name="deepbench_conv", file="deepbench_conv_v100_p100.csv", chapters=("convolutions",),
        title="DeepBench training convolutions (cuDNN): forward, backward-data, backward-filter",
        columns=("source", "gpu", "precision", "W", "H", "C", "N", "K", "fwd_time_s", "fwd_algo", "sheet", "row"),
        sha256="8b7aabe53f356a3af786755850c1b91d78c02297960b4b0a20690d234ca23822", **_DEEPBENCH),
    PublishedSource(
        name="deepbench_rnn", file="deepbench_rnn_v100_p100.csv", chapters=("recurrent",),
        title="DeepBench training RNN layers (cuDNN): vanilla, LSTM, GRU, forward and backward",
        columns=("source", "gpu", "precision", "cell", "hidden", "batch", "timesteps", "fwd_time_s", "sheet", "row"),
        sha256="6f1c6af78b203cac15c00604dd8505d3db7d1da9b8fc69e65ffca5452d587f77", **_DEEPBENCH),
    PublishedSource(
        name="xla_h100_gemm", file="modern/xla_h100_gemm.csv", chapters=("gemm", "fully_connected"),
        title="XLA's H100 GEMM table: batched [b,M,K]×[b,K,N], b ∈ {1,2,4}, M,N,K ∈ 256…4096, bf16/TF32/fp8",
        publisher="OpenXLA (XLA's GPU matmul performance table)", repository="https://github.com/openxla/xla",
        commits=(_XLA_COMMIT,), paths=("xla/service/gpu/model/default_matmul_perf_table.txtpb",),
        licence="Apache-2.0", date="2025",
        timing=("CUPTI kernel time: one warm-up, then 5 × 2 runs on two random argument sets; the median over "
                "all kernel events (not the whole op)"),
        caveat=("The fp8 rows mix a layout kernel with the GEMM in one median and are untrustworthy: perfkit "
                "uses the bf16 and f32 (TF32) rows only. Powers of two only: nothing about alignment."),
        gpu_column="gpu", gpus={"H100 (sm_90; XLA's table; variant not stated, see README)": "H100-SXM"},
        columns=("source", "gpu", "dtype", "math_dtype", "b", "M", "N", "K", "layout", "time_s", "tflops"),
        sha256="383e36461e89271342395d30845ac38aac58bf31c0cf7980a4e0fbb261994613"),
    PublishedSource(
        name="liger_memory_bound", file="modern/liger_memory_bound_h100_a100.csv", chapters=("memory_limited",),
        title="Liger-Kernel's benchmarks: layer norm, RMS norm, SwiGLU, ReLU², fused (Liger) vs eager",
        publisher="Liger-Kernel (LinkedIn)", repository="https://github.com/linkedin/Liger-Kernel",
        commits=("ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c",), paths=("benchmark/data/all_benchmark_data.csv",),
        licence="BSD-2-Clause", date="2024–2026",
        timing="triton.testing.do_bench (CUDA events, L2 flushed before each call): median, p20 and p80",
        caveat="io_bytes_fwd/gbps_fwd are a lower-bound byte model (inputs read once, outputs written once).",
        gpu_column="gpu", gpus={"NVIDIA H100 80GB HBM3": "H100-SXM", "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB"},
        columns=("source", "gpu", "kernel", "provider", "mode", "dtype", "rows", "hidden", "time_s"),
        sha256="fc806ecee28cfbc81e2066419d5756d117d19a8a4264fba397020404c7f26f2d"),
    PublishedSource(
        name="gpu_benches_stream", file="modern/gpu_benches_stream.csv", chapters=("memory_limited",),
        title="gpu-benches' STREAM-like kernels: GB/s against occupancy, V100 to H200",
        paths=tuple(f"gpu-stream/{g}.txt" for g in ("h100_pcie", "h200", "a100_80", "a100_40", "l40", "a40", "v100")),
        date="2023–2024", gpu_column="gpu",
        gpus={"NVIDIA H100 PCIe (README: CUDA 11.7)": "H100-PCIe", "NVIDIA H200": "H200",
              "NVIDIA A100 80GB": "A100-SXM4-80GB", "NVIDIA A100 40GB": "A100-SXM4-40GB", "NVIDIA L40": "",
              "NVIDIA A40": "", "NVIDIA V100": "V100-SXM2"},
        caveat=("The x-axis is occupancy (threads resident), not size: every array is 1 GiB. The A100s' form "
                "factor is not stated; perfkit models them as SXM4."),
        columns=("source", "gpu", "kernel", "block_size", "threads", "occupancy_pct", "array_bytes", "gbps"),
        sha256="b10d49ce3cb6f05548f949d4274ae755f17ea0669a31370c9e4395226f87aaaf", **_GPU_BENCHES),
    PublishedSource(
        name="gpu_benches_small_kernels", file="modern/gpu_benches_small_kernels_h200.csv",
        chapters=("memory_limited", "timing"),
        title="gpu-benches' small kernels on an H200: 64 kB–2 GB, plain launch vs CUDA graph vs persistent",
        paths=tuple(f"gpu-small-kernels/{f}.txt" for f in ("h200", "h200_graph", "h200_pt", "h200_gsync")),
        date="2023–2024", gpu_column="gpu", gpus={"NVIDIA H200": "H200"},
        caveat="time_s is derived from the printed (rounded) GB/s; the plain-launch file ends at 288 MB.",
        columns=("source", "gpu", "variant", "kernel", "n_elements", "bytes_moved", "block_size", "gbps", "time_s"),
        sha256="a37a9e4c102719e23c19cb50d2cc44870b3e281cb8d154941e7d903a0b4c0e42", **_GPU_BENCHES),
    PublishedSource(
        name="deepgemm_fp8", file="modern/deepgemm_h800_fp8.csv", chapters=("gemm",),
        title="DeepGEMM's block-scaled fp8 GEMMs (dense and grouped) on an H800",
        publisher="DeepGEMM (DeepSeek)", repository="https://github.com/deepseek-ai/DeepGEMM",
        commits=("a6d97a1c1b48a7a9d7994d0e155ee6f11d0a3f07", "55ab91f72f76e8a6db0e86282c3169a88d93df1b"),
        paths=("README.md",), licence="MIT", date="2025",
        timing="DeepGEMM's own test harness (NVCC 12.8); TFLOPS and GB/s printed as whole numbers",
        caveat="DeepGEMM's kernels, not cuBLAS; time_s = 2·groups·M·N·K / TFLOPS (≤ 0.25 % rounding).",
        gpu_column="gpu", gpus={"H800": "H800", "H800 SXM5": "H800"},
        columns=("source", "gpu", "table", "groups", "M", "N", "K", "tflops", "gbps", "time_s"),
        sha256="6e994cc50f8083ddc3509a90c23c011525af39471cb9a69f8bda1e35e0370b88"),
    PublishedSource(
        name="xla_h100_collectives", file="modern/xla_h100_collectives.csv", chapters=("communication",),
        title="XLA's collective table: all-reduce, all-gather, reduce-scatter, all-to-all, permute on 8× H100",
        publisher="OpenXLA (XLA's GPU collective performance table)", repository="https://github.com/openxla/xla",
        commits=(_XLA_COMMIT,), paths=("xla/service/gpu/model/default_collective_perf_table.txtpb",),
        licence="Apache-2.0", date="2025",
        timing="median of 5 (or 20 looped) runs of the one-op executable, CUDA-event time on the stream",
        caveat="Groups of 2 and 4 run 4 or 2 at a time (all 8 GPUs busy); small messages are noisy.",
        gpu_column="gpu", gpus={"H100 (sm_90; 8-GPU NVSwitch host; variant not stated)": "H100-SXM"},
        columns=("source", "gpu", "collective", "dtype", "n_gpus", "size_bytes", "time_s", "busbw_GBps"),
        sha256="c3621bea147bbf5934b84917df1c870ce01057d61a9633925c9c3457ec6e43a5"),
    PublishedSource(
        name="deepbench_allreduce", file="modern/deepbench_allreduce.csv", chapters=("communication",),
        title="DeepBench's all-reduce (fp32 sum), 2017: P100, M40, TitanX, 1080 Ti nodes and Xeon Phi",
        publisher="Baidu DeepBench", repository="https://github.com/baidu-research/DeepBench",
        commits=("da81ba7820739e2e506dc27f382d15be5479f98f",),
        paths=tuple(f"results/train/DeepBench_{w}.xlsx" for w in
                    ("IA_KNL7250", "NV_1080Ti", "NV_M40", "NV_P100", "NV_TitanX", "NV_TitanX_Pascal")),
        licence="Apache-2.0", date="2017",
        timing="host wall clock around 1 000–10 000 calls, each synchronised; fastest of four libraries",
        gpu_column="system",
        gpus={"NVIDIA Tesla P100": "P100-PCIe", "Nvidia Tesla M40": "", "Nvidia TitanX": "",
              "Nvidia TitanX Pascal": "", "NVIDIA GTX 1080 Ti": "", "Intel(R) Xeon Phi(TM) 7250F": ""},
        columns=("source", "system", "n_ranks", "n_nodes", "size_bytes", "time_s", "algorithm", "busbw_GBps"),
        sha256="5eea16cbf134e588029e0d788fbc7e5c2e974e5708a8aa6598a515acc8f6f388"),
)

#: Every published table perfkit can read, by name.
CATALOG: Mapping[str, PublishedSource] = MappingProxyType({e.name: e for e in _ENTRIES})
