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
    PublishedSource(
        name="mamf_newest", file="modern/mamf_blackwell_amd.csv", chapters=("gemm", "background"),
        title="Maximum achievable matmul FLOP/s (MAMF): B200, B300, GB200, MI300X, MI325X, MI355X, Gaudi",
        publisher="ml-engineering (Stas Bekman)", repository="https://github.com/stas00/ml-engineering",
        commits=("744d01e18b79512572f64a6bbd8b5f4a725203a7",), paths=("compute/accelerator/README.md",),
        licence="CC BY-SA 4.0 (text; numbers cited)", date="2025",
        timing=("the best, over a brute-force search of shapes, of 2·M·N·K / the mean of 100 torch.mm (bf16) or "
                "torch._scaled_mm (fp8) calls after 50 warm-up calls, a 256 MiB cache-clearing write before each"),
        caveat=("A max over many noisy means is optimistic; each row has its own torch/CUDA/ROCm version and "
                "settings (TunableOp on for MI300X/MI325X, off for MI355X), so rows compare hardware + software. "
                "A100/H100/H200/GH200 rows are withheld."),
        gpu_column="gpu",
        gpus={"NVIDIA B200 SXM": "B200", "NVIDIA B300 SXM": "B300", "NVIDIA GB200 SXM": "GB200",
              "AMD MI300X": "MI300X", "AMD MI325X": "MI325X", "AMD MI355X": "MI355X", "Intel Gaudi 2": "",
              "Intel Gaudi 3": ""},
        columns=("source", "gpu", "vendor", "dtype", "tflops_best", "M", "N", "K", "time_s", "torch_version",
                 "notes"),
        sha256="4283d8ff6b05f3f9f90eec78a88c994d054cebd723d3645ad661b87e85a08ca9"),
    PublishedSource(
        name="aiter_gemm", file="modern/aiter_gemm_mi300_mi355.csv", chapters=("gemm",),
        title="AMD AITER's tuned GEMMs per shape: gfx942 (304 CUs) and gfx950 (256 CUs), bf16 and 8-bit",
        publisher="AMD AITER (ROCm)", repository="https://github.com/ROCm/aiter",
        commits=("e4048607a535ace3a2b51ded31b1c8c2d45c0879",), paths=("aiter/configs",),
        licence="MIT", date="2025–2026",
        timing=("the tuner's winning kernel per shape: torch.profiler device time of all kernels of one call "
                "(split-K reduction included), mean of up to 101 calls, outliers dropped, cold operands"),
        caveat=("gfx942 with 304 CUs is an MI300X or an MI325X, gfx950 with 256 CUs an MI355X or an MI350X: the "
                "files do not say which (perfkit reads them as MI300X and MI355X). C = A·Bᵀ (B stored N×K). "
                "The winner of a search: slightly optimistic."),
        gpu_column="gpu",
        gpus={"AMD MI300X or MI325X (gfx942, 304 CUs)": "MI300X", "AMD MI355X or MI350X (gfx950, 256 CUs)": "MI355X"},
        columns=("source", "gpu", "arch", "cu_num", "kind", "dtype", "out_dtype", "batch", "M", "N", "K",
                 "split_k", "kernel", "time_s", "tflops"),
        sha256="9bd7c898e0a9dbc06d4376e92e63c279331b6fb533a827b666891a4509d26519"),
    PublishedSource(
        name="cudnn_sdpa_training", file="modern/cudnn_sdpa_training.csv", chapters=("transformers",),
        title="cuDNN's training attention benchmarks (SDPA forward and backward): B200, GB200, GB300, H200",
        publisher="NVIDIA cudnn-frontend", repository="https://github.com/NVIDIA/cudnn-frontend",
        commits=("fb682ce761a2705e40f9b5d528737a3e0eb33cec", "df73764adb98b7445b77662ce07b1ea434c8f3ee",
                 "b8c0656e6f6c84fc194f4d57329b55d609eff596", "b372d39879d44c91a8d5b342022e74802b6a8da2",
                 "0b1577c8c83401237d601d0d0db5210506705396", "9793df569ce413f4b1844a9176f7ae24dd981603"),
        paths=("benchmark/sdpa_benchmark_training/artifacts", "benchmark/sdpa_benchmark_training/results"),
        licence="MIT", date="2025–2026",
        timing=("artifacts of 2025-07/10: a CUDA-event pair around one call, median of 10 after 5 warm-up, no L2 "
                "flush; later campaigns: torch.profiler (CUPTI) sum of the attention kernels' device time, L2 "
                "flushed, median of the last calls (the 'timing' column says which)"),
        caveat=("Six campaigns with different software and timing; times printed to a microsecond (±3 % at the smallest "
                "shapes); clocks not locked."),
        gpu_column="gpu",
        gpus={"NVIDIA B200": "B200", "NVIDIA GB200": "GB200", "NVIDIA GB300": "GB300", "NVIDIA H200": "H200"},
        columns=("source", "gpu", "backend", "dtype", "batch", "seq_q", "seq_kv", "heads_q", "heads_kv",
                 "head_dim", "head_dim_v", "causal", "sliding_window", "pass", "time_s", "tflops", "flop",
                 "timing", "measured"),
        sha256="9bc69af1a370924ea90f6cf6f6dbf7d3aa87a7a58267c4b0def50df5b19f357a"),
    PublishedSource(
        name="hipkittens", file="modern/hipkittens_mi350.csv", chapters=("gemm", "transformers", "memory_limited"),
        title="HipKittens' benchmarks: GEMM, attention and memory-bound kernels on MI355X and MI325X",
        publisher="HipKittens (Hazy Research)", repository="https://github.com/HazyResearch/HipKittens",
        commits=("f09e9685c4c6aaa41fb3ebd4fe4ca664938589e1",), paths=("analysis",),
        licence="MIT", date="2025",
        timing=("a torch.cuda.Event pair around one call, 500 warm-up then 100 calls, fresh random inputs before "
                "each (partly resident in MI355X's 256 MB Infinity Cache), the mean"),
        caveat=("ROCm 7.0 preview; library baselines from plot scripts give TFLOP/s only (time_s derived); "
                "layernorm's reference normalises in fp32 and moves more bytes than io_bytes_min."),
        gpu_column="gpu", gpus={"AMD MI355X": "MI355X", "AMD MI325X": "MI325X"},
        columns=("source", "gpu", "op", "library", "dtype", "batch", "M", "N", "K", "seq", "heads_q", "heads_kv",
                 "head_dim", "causal", "time_s", "tflops"),
        sha256="616e3aa67ccf15eae5181d0ec97e494d5894f1f9abbc53ed3d12f55cfeee88dc"),
)

#: Every published table perfkit can read, by name.
CATALOG: Mapping[str, PublishedSource] = MappingProxyType({e.name: e for e in _ENTRIES})
