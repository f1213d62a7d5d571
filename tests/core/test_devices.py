"""Device table, driver-name matching, the current device, and dtype names."""

from __future__ import annotations

import pytest
import torch

import perfkit as pk
from perfkit.devices import KNOWN_DEVICES

REQUIRED = ["V100-SXM2", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM", "H100-PCIe", "H200", "L4", "T4", "A10",
            "RTX-4090", "L40S"]


def test_table_has_every_required_device_with_sources():
    for name in REQUIRED:
        d = pk.device_spec(name)
        assert d.kind == "gpu" and d.sms > 0 and d.mem_bandwidth > 0 and d.l2_bytes > 0
        assert d.peak_flop_s("float16") > d.peak_flop_s("float32") > 0
        assert d.sources["peaks"].startswith("NVIDIA")  # a vendor document, never a measurement


@pytest.mark.parametrize("name, ops_per_byte", [("V100-SXM2", 138.9), ("A100-SXM4-40GB", 200.6),
                                                ("A100-SXM4-80GB", 153.0), ("H100-SXM", 295.3), ("H200", 206.1)])
def test_fp16_ops_per_byte(name, ops_per_byte):
    assert pk.device_spec(name).ops_per_byte("float16") == pytest.approx(ops_per_byte, abs=0.05)


def test_dense_not_sparse_peaks():
    h100 = pk.device_spec("H100-SXM")
    assert h100.peak_flop_s("bfloat16") == pytest.approx(989.4e12)
    assert h100.peak_flop_s(torch.bfloat16) == h100.peak_flop_s("bf16")
    assert h100.peak_flop_s("float8") == pytest.approx(1978.9e12)


@pytest.mark.parametrize("driver, entry", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2"), ("Tesla T4", "T4"), ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA A10", "A10"), ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("NVIDIA GH200 480GB", None),
    ("NVIDIA A40", None), ("NVIDIA B200", "B200"), ("NVIDIA GB200", "GB200"), ("NVIDIA B300 SXM6 AC", "B300"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI300X VF", "MI300X"), ("AMD Instinct MI325X", "MI325X"),
    ("AMD Instinct MI355X", "MI355X"), ("AMD Instinct MI350X", "MI350X"), ("AMD Instinct MI250X", None),
])
def test_driver_names(driver, entry):
    assert pk.devices.match_driver_name(driver) == entry


def test_lookup_is_forgiving_but_unknown_names_fail_clearly():
    assert pk.device_spec("h100 sxm") is KNOWN_DEVICES["H100-SXM"]
    assert pk.device_spec("NVIDIA H100 80GB HBM3") is KNOWN_DEVICES["H100-SXM"]
    with pytest.raises(LookupError, match="known devices: NVIDIA: V100-SXM2.*B200.*; AMD: MI300X.*MI355X"):
        pk.device_spec("TPU v5e")
    with pytest.raises(TypeError, match="name"):
        pk.device_spec(132)


def test_missing_peak_is_a_lookup_error_naming_the_dtypes():
    with pytest.raises(LookupError, match="tf32.*T4"):
        pk.device_spec("T4").peak_flop_s("tf32")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU spec")
def test_current_device_on_cpu_is_measured_and_labelled():
    d = pk.current_device()
    assert d.kind == "cpu" and d.name.startswith("CPU")
    assert d.peak_flop_s("float32") > 0 and d.mem_bandwidth > 0
    assert "measured here" in d.sources["peaks"] and "measured here" in d.sources["mem_bandwidth"]
    assert pk.current_device() is d  # cached
    text = d.describe()
    assert "cores" in text and "measured here" in text


def test_describe_names_the_sources():
    text = pk.device_spec("H100-SXM").describe()
    assert "3,350.0 GB/s" in text and "989.4 TFLOP/s" in text and "datasheet" in text


@pytest.mark.parametrize("given, name, size", [("fp16", "float16", 2), ("bf16", "bfloat16", 2), ("tf32", "tf32", 4),
                                               (torch.float8_e4m3fn, "float8", 1), (torch.int8, "int8", 1),
                                               ("FLOAT64", "float64", 8)])
def test_dtype_names(given, name, size):
    assert pk.canonical_dtype(given) == name and pk.itemsize(given) == size


def test_bad_dtypes():
    with pytest.raises(ValueError, match="accepted: 'float64'"):
        pk.canonical_dtype("float12")
    with pytest.raises(TypeError, match="dtype"):
        pk.canonical_dtype(16)
    with pytest.raises(ValueError, match="not supported"):
        pk.canonical_dtype(torch.complex64)
    assert pk.dtypes.torch_dtype("tf32") is torch.float32


@pytest.mark.gpu
def test_current_device_on_gpu_reads_the_driver():
    d = pk.current_device()
    props = torch.cuda.get_device_properties(0)
    assert d.kind == "gpu" and d.sms == props.multi_processor_count
    assert d.driver_name == props.name
    assert d.peak_flop_s("float32") > 0


def test_newest_parts_have_their_vendor_dies_and_dtypes():
    b200, mi300x, mi355x = (pk.device_spec(n) for n in ("B200", "MI300X", "MI355X"))
    assert (b200.vendor, b200.dies, b200.warp_size, b200.unit_name) == ("NVIDIA", 1, 32, "SMs")
    assert (mi300x.vendor, mi300x.dies, mi300x.warp_size, mi300x.unit_name) == ("AMD", 8, 64, "CUs")
    assert mi300x.sms % mi300x.dies == 0 and mi355x.sms // mi355x.dies == 32
    # Dense, never sparse: B200 bf16 2.25 PFLOP/s, fp4 twice fp8; MI355X's fp6 runs at its fp4 rate, B200's at fp8's
    assert b200.peak_flop_s("bf16") == 2250e12 and b200.peak_flop_s("nvfp4") == 2 * b200.peak_flop_s("fp8")
    assert mi355x.peak_flop_s("mxfp6") == mi355x.peak_flop_s("mxfp4") and b200.peak_flop_s("fp6") == 4500e12
    assert "CUs" in mi300x.describe() and "Infinity Cache" in mi300x.describe()


@pytest.mark.parametrize("name, dtype", [("MI355X", "tf32"), ("B300", "int8"), ("H100-SXM", "float4"),
                                         ("MI300X", "mxfp4")])
def test_a_dtype_a_part_lacks_is_refused_naming_its_dtypes(name, dtype):
    with pytest.raises(LookupError, match=f"on {name}; dtypes with a peak: 'float64'"):
        pk.device_spec(name).peak_flop_s(dtype)


def test_every_peak_is_dense_and_ordered_like_the_hardware():
    for spec in KNOWN_DEVICES.values():
        p = spec.peaks
        assert spec.vendor in ("NVIDIA", "AMD") and spec.sources["peaks"]
        # narrower types never run slower than wider ones on the same part
        for wide, narrow in (("bfloat16", "float8"), ("float8", "float6"), ("float6", "float4")):
            if wide in p and narrow in p:
                assert p[narrow] >= p[wide], (spec.name, wide, narrow)
