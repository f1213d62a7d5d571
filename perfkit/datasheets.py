"""Vendor datasheets: the dense peaks, memory and caches of the GPUs perfkit knows, grouped by vendor.

Plain data, each entry with its source; :mod:`perfkit.devices` turns them into
:class:`~perfkit.devices.DeviceSpec`. Peaks are the vendor's **dense** figures in TFLOP/s (TOP/s for
int8), never the 2:4-sparse ones (NVIDIA's Blackwell sheets print sparse figures first: they are halved
here), stored as published rather than derived from clocks. A dtype a part has no figure for is left
out, so asking for it is refused (B300's int8, CDNA 4's TF32). "[R]" marks a value recalled from the
vendor's material that our stored copies do not show: check before quoting; where the driver reports
the value (SMs, L2, memory) the live one replaces it at run time.

Fields: ``sms`` (NVIDIA SMs, AMD compute units), ``bw_gbs`` (HBM GB/s), ``l2_mib`` (the last cache
before memory that a kernel's tiles share: NVIDIA's L2; on AMD the L2 of all dies together, 4 MB per
die), ``mem_gb``, ``dies`` (AMD's XCDs: each with its own L2 and work-group dispatcher; 1 where one
scheduler sees every SM, Blackwell's two dies included), ``warp`` (threads per warp or wavefront),
``llc_mib`` (a memory-side cache behind the L2: AMD's Infinity Cache).
"""

from __future__ import annotations

__all__ = ["AMD", "DRIVER_PATTERNS", "NVIDIA", "VENDORS"]

_HGX_B200 = ("NVIDIA HGX B200 / DGX B200 datasheets (per GPU of eight), sparse halved: FP4 9, FP8/FP6 4.5, "
             "INT8 4.5 POPS, FP16/BF16 2.25, TF32 1.125 PFLOPS; FP32 75, FP64 37 TFLOPS; HBM3e 8 TB/s")
_NVL72 = ("NVIDIA GB200 NVL72 datasheet (per GPU of 72), sparse halved: FP4 10, FP8/FP6 5, INT8 5 POPS, "
          "FP16/BF16 2.5, TF32 1.25 PFLOPS; FP64 45 TFLOPS; 186 GB HBM3e at 8 TB/s")
_HGX_B300 = ("NVIDIA HGX B300 datasheet (per GPU of eight), dense: FP4 13.5, FP8/FP6 4.5, FP16/BF16 2.25, "
             "TF32 1.125 PFLOPS; FP32 75, FP64 1.25 TFLOPS; 288 GB HBM3e at 8 TB/s")
_GB300 = ("NVIDIA Blackwell Ultra technical blog (2025-08): NVFP4 15 PF dense; GB300 NVL72 datasheet per GPU, "
          "sparse halved: FP8/FP6 5, FP16/BF16 2.5 PFLOPS; 288 GB HBM3e at 8 TB/s")
_MI300X = ("AMD Instinct MI300X data sheet, dense: FP64 matrix 163.4, FP32 163.4, TF32 (XF32) 653.7, "
           "FP16/BF16 1307.4, FP8 2614.9, INT8 2614.9 TOPS; 192 GB HBM3 at 5.3 TB/s; 256 MB Infinity Cache")
_MI325X = ("AMD Instinct MI325X data sheet: MI300X's compute (same 304 CUs and clocks), 256 GB HBM3E at "
           "6.0 TB/s")
_MI355X = ("AMD Instinct MI355X data sheet, dense: FP64 78.6, FP32 157.3, FP16/BF16 2516.6, FP8 5033.2, "
           "MXFP6/MXFP4 10066.3, INT8 5033.2 TOPS (no TF32 on CDNA 4); 288 GB HBM3E at 8 TB/s")
_MI350X = ("AMD Instinct MI350X data sheet, dense (2.2 GHz against MI355X's 2.4): FP64 72.1, FP32 144.2, "
           "FP16/BF16 2306.9, FP8 4613.7, MXFP6/MXFP4 9227.5, INT8 4613.7 TOPS; 288 GB HBM3E at 8 TB/s")


def _gpu(name, sms, bw_gbs, l2_mib, mem_gb, peaks, source, **arch):
    return dict(name=name, sms=sms, bw_gbs=bw_gbs, l2_mib=l2_mib, mem_gb=mem_gb, peaks=peaks, source=source,
                **arch)


#: NVIDIA's data-centre and workstation GPUs, oldest first.
NVIDIA: tuple[dict, ...] = (
    # NVIDIA GPU Performance Background guide (V100 text): 80 SMs, 6 MB L2, ~900 GB/s,
    # 15.7 FP32 / 125 FP16 Tensor TFLOPS; FP64 7.8 from the V100 datasheet [R].
    _gpu("V100-SXM2", 80, 900, 6, 32, {"float64": 7.8, "float32": 15.7, "float16": 125},
         "NVIDIA GPU Performance Background guide; V100 datasheet"),
    # NVIDIA Tesla P100 datasheet [R] (no Tensor Cores): 56 SMs, 4 MB L2, 732 GB/s HBM2 (16 GB).
    # SXM2 (1480 MHz boost): FP64 5.3, FP32 10.6, FP16 21.2; PCIe (1329 MHz): 4.7, 9.3, 18.7.
    # The FP16 rate is native half2 math; DeepBench's P100 "pseudo FP16" rows store fp16 but do
    # their math in fp32, so they run at the FP32 rate (model them with math_dtype="float32").
    _gpu("P100-SXM2", 56, 732, 4, 16, {"float64": 5.3, "float32": 10.6, "float16": 21.2},
         "NVIDIA Tesla P100 datasheet (SXM2)"),
    _gpu("P100-PCIe", 56, 732, 4, 16, {"float64": 4.7, "float32": 9.3, "float16": 18.7},
         "NVIDIA Tesla P100 datasheet (PCIe, 16 GB)"),
    # NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), dense:
    # FP64 Tensor Core 19.5, FP32 19.5, TF32 156, FP16/BF16 312, INT8 624; 1555 GB/s (40GB).
    _gpu("A100-SXM4-40GB", 108, 1555, 40, 40,
         {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
         "NVIDIA A100 datasheet (r4), dense"),
    # Same datasheet, 80GB SXM: 2039 GB/s.
    _gpu("A100-SXM4-80GB", 108, 2039, 40, 80,
         {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
         "NVIDIA A100 datasheet (r4), dense"),
    # NVIDIA H100 datasheet (SXM5), sparse figures halved: TF32 494.7, FP16/BF16 989.4,
    # FP8/INT8 1978.9; FP32 66.9; FP64 Tensor Core 67 [R]; 3350 GB/s; 50 MB L2.
    _gpu("H100-SXM", 132, 3350, 50, 80,
         {"float64": 67, "float32": 66.9, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4,
          "float8": 1978.9, "int8": 1978.9},
         "NVIDIA H100 datasheet (SXM), dense"),
    # NVIDIA H100 datasheet (PCIe), dense: FP32 51, TF32 378, FP16/BF16 756, FP8/INT8 1513;
    # FP64 Tensor Core 51 [R]; 2000 GB/s; 114 SMs.
    _gpu("H100-PCIe", 114, 2000, 50, 80,
         {"float64": 51, "float32": 51, "tf32": 378, "float16": 756, "bfloat16": 756,
          "float8": 1513, "int8": 1513},
         "NVIDIA H100 datasheet (PCIe), dense"),
    # H800 SXM5 (China export variant of the H100 SXM): the same GH100 SMs, clocks and HBM3, so the same
    # Tensor-Core peaks and 3.35 TB/s; less NVLink (400 GB/s) and far less FP64 (DeepGEMM's README and
    # NVIDIA's H800 product page [R]). perfkit reads DeepGEMM's published fp8 GEMMs against it.
    _gpu("H800", 132, 3350, 50, 80,
         {"float32": 66.9, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4, "float8": 1978.9, "int8": 1978.9},
         "H100 SXM datasheet figures (H800 SXM5: same SMs and HBM3), dense"),
    # NVIDIA H200 datasheet: same GH100 compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s.
    _gpu("H200", 132, 4800, 50, 141,
         {"float64": 67, "float32": 67, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4,
          "float8": 1979, "int8": 1979},
         "NVIDIA H200 datasheet, dense"),
    # NVIDIA L4 datasheet, sparse halved: TF32 60, FP16/BF16 121, FP8/INT8 242.5; FP32 30.3;
    # 300 GB/s; 48 MB L2; 58 SMs (Ada whitepaper [R]).
    _gpu("L4", 58, 300, 48, 24,
         {"float32": 30.3, "tf32": 60, "float16": 121, "bfloat16": 121, "float8": 242.5, "int8": 242.5},
         "NVIDIA L4 datasheet, dense; Ada whitepaper"),
    # NVIDIA T4 datasheet: FP32 8.1, FP16 65, INT8 130 TOPS; 320 GB/s; 40 SMs, 4 MB L2.
    _gpu("T4", 40, 320, 4, 16, {"float32": 8.1, "float16": 65, "int8": 130},
         "NVIDIA T4 datasheet"),
    # NVIDIA A10 datasheet [R], sparse halved: TF32 62.5, FP16/BF16 125, INT8 250; FP32 31.2;
    # 600 GB/s; 72 SMs, 6 MB L2.
    _gpu("A10", 72, 600, 6, 24,
         {"float32": 31.2, "tf32": 62.5, "float16": 125, "bfloat16": 125, "int8": 250},
         "NVIDIA A10 datasheet, dense"),
    # NVIDIA Ada whitepaper v2.01, RTX 4090, FP32-accumulate Tensor Core figures (what a GEMM
    # with float32 accumulation gets): FP16/BF16 165.2, FP8 330.3, TF32 82.6, INT8 660.6;
    # FP32 82.6; 1008 GB/s; 128 SMs; 72 MB L2.
    _gpu("RTX-4090", 128, 1008, 72, 24,
         {"float32": 82.6, "tf32": 82.6, "float16": 165.2, "bfloat16": 165.2, "float8": 330.3,
          "int8": 660.6},
         "NVIDIA Ada whitepaper v2.01 (FP32 accumulate), dense"),
    # NVIDIA L40S datasheet, sparse halved: TF32 183, FP16/BF16 362.05, FP8/INT8 733; FP32 91.6;
    # 864 GB/s; 142 SMs; L2 96 MB per the Ada whitepaper [R] (read the live value at run time).
    _gpu("L40S", 142, 864, 96, 48,
         {"float32": 91.6, "tf32": 183, "float16": 362.05, "bfloat16": 362.05, "float8": 733, "int8": 733},
         "NVIDIA L40S datasheet, dense"),
    # Blackwell (sm_100). B200: 148 SMs, 126.5 MB L2 and 178 GiB as the driver reports them (a B200's
    # Kineto deviceProperties in ../shared/reference/traces; pytorch/ao#4002). The driver's bus width
    # (7680 bits at 3996 MHz) gives 7.67 TB/s, below the datasheet's 8: perfkit keeps the datasheet's.
    _gpu("B200", 148, 8000, 126.5, 180,
         {"float64": 37, "float32": 75, "tf32": 1125, "float16": 2250, "bfloat16": 2250, "float8": 4500,
          "int8": 4500, "float6": 4500, "float4": 9000},
         _HGX_B200),
    # GB200 (a B200-class GPU beside a Grace CPU, at a higher power limit): 148 SMs and 126.5 MB L2 as
    # B200 [R] (read at run time). FP32 as B200 [R]: the NVL72 sheet gives none.
    _gpu("GB200", 148, 8000, 126.5, 186,
         {"float64": 45, "float32": 75, "tf32": 1250, "float16": 2500, "bfloat16": 2500, "float8": 5000,
          "int8": 5000, "float6": 5000, "float4": 10000},
         _NVL72),
    # Blackwell Ultra (sm_103): 160 SMs (NVIDIA's Hot Chips 2025 talk on GB300 [R]; read at run time),
    # FP64 and INT8 cut back (B300's INT8 figure is not firm: left out, so int8 is refused).
    _gpu("B300", 160, 8000, 126.5, 288,
         {"float64": 1.25, "float32": 75, "tf32": 1125, "float16": 2250, "bfloat16": 2250, "float8": 4500,
          "float6": 4500, "float4": 13500},
         _HGX_B300),
    _gpu("GB300", 160, 8000, 126.5, 288,
         {"float16": 2500, "bfloat16": 2500, "float8": 5000, "float6": 5000, "float4": 15000},
         _GB300),
)

#: AMD Instinct (CDNA 3: gfx942; CDNA 4: gfx950), each with 8 XCDs of 38 (MI300X, MI325X) or 32
#: (MI350X, MI355X) compute units, wave64, and a 256 MB Infinity Cache in front of HBM.
AMD: tuple[dict, ...] = (
    _gpu("MI300X", 304, 5300, 32, 192,
         {"float64": 163.4, "float32": 163.4, "tf32": 653.7, "float16": 1307.4, "bfloat16": 1307.4,
          "float8": 2614.9, "int8": 2614.9},
         _MI300X, dies=8, warp=64, llc_mib=256),
    _gpu("MI325X", 304, 6000, 32, 256,
         {"float64": 163.4, "float32": 163.4, "tf32": 653.7, "float16": 1307.4, "bfloat16": 1307.4,
          "float8": 2614.9, "int8": 2614.9},
         _MI325X, dies=8, warp=64, llc_mib=256),
    _gpu("MI350X", 256, 8000, 32, 288,
         {"float64": 72.1, "float32": 144.2, "float16": 2306.9, "bfloat16": 2306.9, "float8": 4613.7,
          "int8": 4613.7, "float6": 9227.5, "float4": 9227.5},
         _MI350X, dies=8, warp=64, llc_mib=256),
    _gpu("MI355X", 256, 8000, 32, 288,
         {"float64": 78.6, "float32": 157.3, "float16": 2516.6, "bfloat16": 2516.6, "float8": 5033.2,
          "int8": 5033.2, "float6": 10066.3, "float4": 10066.3},
         _MI355X, dies=8, warp=64, llc_mib=256),
)

#: Vendor → its entries, in the order error messages list them.
VENDORS: dict[str, tuple[dict, ...]] = {"NVIDIA": NVIDIA, "AMD": AMD}

#: Driver names (as torch.cuda.get_device_name reports them, ROCm's included) → table entry. First match
#: wins, so the longer names come first (GB200 before B200, MI300X VF before nothing else).
DRIVER_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bH200\b", "H200"),
    (r"\bH800\b", "H800"),
    (r"\bH100\b.*\bPCIe\b", "H100-PCIe"),
    (r"\bH100\b.*(SXM|HBM3)", "H100-SXM"),
    (r"^\W*H100\W*$", "H100-SXM"),  # the bare name, as in advise(..., spec="H100"): the SXM part
    (r"\bA100\b.*80\s*GB", "A100-SXM4-80GB"),
    (r"\bA100\b", "A100-SXM4-40GB"),
    (r"\bV100\b", "V100-SXM2"),
    (r"\bP100\b.*\bSXM2?\b", "P100-SXM2"),
    (r"\bP100\b", "P100-PCIe"),
    (r"\bL40S\b", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bT4\b", "T4"),
    (r"\bA10\b", "A10"),
    (r"RTX 4090", "RTX-4090"),
    (r"\bGB300\b", "GB300"),
    (r"\bB300\b", "B300"),
    (r"\bGB200\b", "GB200"),
    (r"\bB200\b", "B200"),
    (r"\bMI300X\b", "MI300X"),  # "AMD Instinct MI300X", and the virtual function "AMD Instinct MI300X VF"
    (r"\bMI325X\b", "MI325X"),
    (r"\bMI350X\b", "MI350X"),
    (r"\bMI355X\b", "MI355X"),
)
