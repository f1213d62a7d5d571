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
    ("NVIDIA A40", None),
])
def test_driver_names(driver, entry):
    assert pk.devices.match_driver_name(driver) == entry


def test_lookup_is_forgiving_but_unknown_names_fail_clearly():
    assert pk.device_spec("h100 sxm") is KNOWN_DEVICES["H100-SXM"]
    assert pk.device_spec("NVIDIA H100 80GB HBM3") is KNOWN_DEVICES["H100-SXM"]
    with pytest.raises(LookupError, match="known devices: V100-SXM2"):
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
