"""perfkit on an AMD GPU through torch's ROCm build, on a pretend device: torch.cuda says it sees a GPU
whose properties the test chooses, and torch.version.hip names a ROCm version. Nothing runs on a GPU;
the quick measurements of an unknown GPU are replaced by fixed numbers, so nothing depends on the clock."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import perfkit as pk
from perfkit import data, devices, placement
from perfkit.__main__ import main
from perfkit.book.background import experiments as background
from perfkit.calibration import probes, profile as pf, report as calibration_report, run as calibration_run
from perfkit.device_runtime import driver_properties, gpu_runtime, graph_name, runtime_name
from perfkit.kernels import rocm_note, spin_blocks_per_sm, spin_launcher, triton_gemm
from perfkit.kernels.cupy_spin import ROCM_NOTE
from perfkit.memory_model import memory_time
from perfkit.units import GIGA, GiB, MiB

HIP = "6.2.41133-dd7f95766"
MI300X = pk.device_spec("MI300X")
#: What the quick measurements of an unknown GPU return here (FLOP/s, bytes/s).
FAKE_PEAKS = {"float32": 40e12, "tf32": 40e12, "bfloat16": 300e12, "float16": 300e12}
FAKE_PEAKS_SOURCE = "measured here (pretend): quick matmuls"
FAKE_COPY_SOURCE = "measured here (pretend): copies"


def _props(name, *, sms=304, l2=4 * MiB, memory=192 * GIGA, warp=64, arch="gfx942:sramecc+:xnack-",
           clock_khz=1_300_000, bus_bits=8192):
    """What torch.cuda.get_device_properties returns on a ROCm build (the fields perfkit reads)."""
    return SimpleNamespace(name=name, multi_processor_count=sms, L2_cache_size=l2, total_memory=memory,
                           warp_size=warp, gcnArchName=arch, memory_clock_rate=clock_khz, memory_bus_width=bus_bits)


@pytest.fixture
def pretend(monkeypatch):
    """``pretend(props, hip=HIP, copy_bandwidth=...)``: torch sees one GPU with ``props``; ``hip=None`` is a
    CUDA build. The quick measurements return :data:`FAKE_PEAKS` and ``copy_bandwidth`` (bytes/s)."""
    calls = []

    def make(props, *, hip=HIP, copy_bandwidth=2.0e12):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
        monkeypatch.setattr(torch.version, "hip", hip, raising=False)
        monkeypatch.setattr(devices, "measure_peaks", lambda device: (calls.append(("peaks", device)) or (
            dict(FAKE_PEAKS), FAKE_PEAKS_SOURCE)))
        monkeypatch.setattr(devices, "measure_copy_bandwidth", lambda device: (calls.append(("copy", device)) or (
            copy_bandwidth, FAKE_COPY_SOURCE)))
        devices._current_device.cache_clear()
        return calls

    yield make
    devices._current_device.cache_clear()  # the next test measures this machine again


def test_gpu_runtime_names_cuda_rocm_or_none(pretend, monkeypatch):
    pretend(_props("AMD Instinct MI300X"))
    assert (gpu_runtime(), runtime_name(), graph_name()) == ("rocm", "ROCm", "HIP graph")
    monkeypatch.setattr(torch.version, "hip", None)
    assert (gpu_runtime(), runtime_name(), graph_name()) == ("cuda", "CUDA", "CUDA graph")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert (gpu_runtime(), runtime_name()) == ("", "no GPU")
    assert runtime_name("rocm") == "ROCm" and graph_name("cuda") == "CUDA graph"
    with pytest.raises(ValueError, match="runtime must be one of 'cuda', 'rocm', ''"):
        runtime_name("metal")


@pytest.mark.parametrize("driver", ["AMD Instinct MI300X", "AMD Instinct MI300X VF"])
def test_a_known_amd_gpu_takes_its_datasheet_with_the_drivers_counts(pretend, driver):
    calls = pretend(_props(driver, sms=304, l2=4 * MiB, memory=191 * GiB))
    spec = pk.devices.current_device()
    assert spec.name == "MI300X" and spec.driver_name == driver and spec.kind == "gpu"
    assert (spec.vendor, spec.dies, spec.warp_size, spec.unit_name) == ("AMD", 8, 64, "CUs")
    assert dict(spec.peaks) == dict(MI300X.peaks) and spec.mem_bandwidth == MI300X.mem_bandwidth  # the datasheet's
    assert spec.sms == 304 and spec.memory_bytes == 191 * GiB and spec.sources["sms"].startswith("read at run time")
    # ROCm reports one XCD's L2: the spec holds all eight dies', as the table does
    assert spec.l2_bytes == 8 * 4 * MiB == MI300X.l2_bytes and "× 8 dies" in spec.sources["l2_bytes"]
    assert spec.llc_bytes == MI300X.llc_bytes and spec.sources["llc_bytes"] == MI300X.sources["l2_bytes"]
    assert spec.sources["name"] == "matched to table entry MI300X" and "AMD Instinct MI300X data sheet" in \
        spec.sources["peaks"]
    assert calls == []  # a known GPU is never measured
    assert "304 on 8 dies" in spec.describe() and "CUs" in spec.describe()


def test_the_drivers_count_wins_over_the_datasheets(pretend):
    pretend(_props("AMD Instinct MI300X", sms=228, l2=32 * MiB))  # a part with fewer CUs; an L2 reported whole
    spec = pk.devices.current_device()
    assert spec.sms == 228 and spec.l2_bytes == 32 * MiB and spec.sources["l2_bytes"].startswith("read at run time")


def test_an_empty_rocm_name_becomes_the_gfx_target():
    def read(name):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(torch.cuda, "current_device", lambda: 0)
            m.setattr(torch.cuda, "get_device_properties", lambda index=0: _props(name, arch="gfx90a:sramecc+:xnack-"))
            return driver_properties()

    assert read("").name == "AMD gfx90a" and read("Device 740c").name == "AMD gfx90a"
    props = read("AMD Instinct MI250X")
    assert (props.name, props.arch, props.sms, props.warp_size) == ("AMD Instinct MI250X", "gfx90a", 304, 64)


def test_an_unknown_amd_gpu_reads_the_driver_and_measures_the_rest(pretend):
    # one MI250X die (GCD): 110 CUs, 8 MiB L2, 64 GB of HBM2e at 1.6 GHz on a 4096-bit bus
    calls = pretend(_props("AMD Instinct MI250X", sms=110, l2=8 * MiB, memory=64 * GIGA,
                           arch="gfx90a:sramecc+:xnack-", clock_khz=1_600_000, bus_bits=4096),
                    copy_bandwidth=1.3e12)
    spec = pk.devices.current_device()
    assert spec.name == spec.driver_name == "AMD Instinct MI250X"
    assert (spec.vendor, spec.dies, spec.warp_size, spec.unit_name) == ("AMD", 1, 64, "CUs")
    assert (spec.sms, spec.l2_bytes, spec.memory_bytes) == (110, 8 * MiB, 64 * GIGA)
    theory = 1.6e9 * 2 * 4096 / 8  # 1.64 TB/s, above the copies' 1.3: the driver's figure is the peak
    assert spec.mem_bandwidth == pytest.approx(theory) and spec.sources["mem_bandwidth"].startswith("theoretical")
    assert dict(spec.peaks) == FAKE_PEAKS and spec.sources["peaks"] == FAKE_PEAKS_SOURCE
    assert sorted(calls) == [("copy", "cuda"), ("peaks", "cuda")]
    note = spec.sources["name"]
    assert note.startswith("not in perfkit's table: AMD GPU (gfx90a)")
    assert "read from the driver: CU count, L2, memory size, warp size, memory bandwidth (clock × bus width)" in note
    assert "measured here: compute peaks (quick matmuls)" in note and "dies unknown" in note
    assert "memory bandwidth (copies)" not in note
    assert "not in perfkit's table" in spec.describe() and "CUs" in spec.describe()


def test_an_unknown_amd_gpu_keeps_a_measured_copy_above_the_drivers_clock_figure(pretend):
    # HBM3 reported at a quarter of its pin rate: clock × bus × 2 gives half the real bandwidth
    pretend(_props("AMD Instinct MI308X", sms=80, clock_khz=1_300_000, bus_bits=8192), copy_bandwidth=4.0e12)
    spec = pk.devices.current_device()
    assert spec.mem_bandwidth == 4.0e12 and spec.sources["mem_bandwidth"].startswith(FAKE_COPY_SOURCE)
    assert "above the theoretical from memory clock × bus width" in spec.sources["mem_bandwidth"]
    assert "measured here: compute peaks (quick matmuls), memory bandwidth (copies)" in spec.sources["name"]


def test_an_unknown_nvidia_gpu_is_labelled_nvidia_and_not_copy_measured(pretend):
    calls = pretend(SimpleNamespace(name="NVIDIA A40", multi_processor_count=84, L2_cache_size=6 * MiB,
                                    total_memory=48 * GIGA, warp_size=32, memory_clock_rate=7_251_000,
                                    memory_bus_width=384), hip=None)
    spec = pk.devices.current_device()
    assert (spec.vendor, spec.warp_size, spec.unit_name, spec.sms) == ("NVIDIA", 32, "SMs", 84)
    assert spec.mem_bandwidth == pytest.approx(7.251e9 * 2 * 384 / 8) and calls == [("peaks", "cuda")]
    assert spec.sources["name"].startswith("not in perfkit's table: NVIDIA GPU;") and "dies" not in spec.sources["name"]


def test_device_slugs_and_profile_paths_of_an_amd_gpu(pretend):
    pretend(_props("AMD Instinct MI300X"))
    spec = pk.devices.current_device()
    assert data.device_slug(spec.driver_name or spec.name) == "amd-instinct-mi300x"  # record's data/<slug>/
    assert data.device_slug("AMD Instinct MI300X VF") == "amd-instinct-mi300x-vf"
    assert pf.profile_path(spec.name).name == "mi300x.json"  # calibrate's profile


def test_perfkit_info_on_an_amd_gpu_says_rocm_never_cuda(pretend, capsys):
    pretend(_props("AMD Instinct MI300X"))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"GPU runtime        ROCm {HIP}" in out and "torch.version.hip" in out and "AMD GPU available  True" in out
    assert "AMD Instinct MI300X" in out and "304 on 8 dies" in out and "AMD driver" in out
    assert "CUDA" not in out and "NVIDIA" not in out


def test_perfkit_info_on_a_cuda_gpu_keeps_the_cuda_rows(pretend, capsys):
    pretend(_props("NVIDIA H100 80GB HBM3", sms=132, l2=50 * MiB, memory=80 * GiB, warp=32, arch=None), hip=None)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CUDA available" in out and "torch.version.cuda" in out and "ROCm" not in out and "H100-SXM" in out


def test_the_cupy_kernels_are_not_run_on_rocm_and_say_why(pretend, monkeypatch):
    pretend(_props("NVIDIA H100 80GB HBM3", warp=32, arch=None), hip=None)
    assert rocm_note() is None  # CUDA: no note
    pretend(_props("AMD Instinct MI300X"))
    assert rocm_note() == ROCM_NOTE and "32-lane warps" in ROCM_NOTE and "AMD wavefront has 64 lanes" in ROCM_NOTE
    for call in (spin_blocks_per_sm, lambda: spin_launcher(304)):
        with pytest.raises(RuntimeError, match="the spin kernel is not run on this AMD GPU: perfkit's CuPy kernels"):
            call()
    x, w = torch.zeros(4, 1, 8, dtype=torch.float16), torch.zeros(8, 8, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="the persistent RNN kernel is not run on this AMD GPU"):
        pk.kernels.persistent_rnn(x, w)
    # the waves experiment (CuPy's spin kernel) stops, naming why, before it launches or times anything
    monkeypatch.setattr(placement, "timer", lambda *a, **k: pytest.fail("nothing may be timed"))
    with placement.use(device="cuda", spec=MI300X, tensor_device="meta"):
        with pytest.raises(RuntimeError, match="not run on this AMD GPU: .*not run on ROCm"):
            background.waves(quick=True, progress=False)


def test_the_triton_gemm_runs_on_rocm_with_ieee_dots_for_16_bit_inputs():
    # Portable Triton (no PTX, no CUDA library): not skipped on ROCm; there its 16-bit dots are passed "ieee"
    # (Triton's HIP backend takes "tf32" on gfx942 only), and on CUDA Triton's default "tf32" as before
    assert triton_gemm._precision_16bit("compiled", "rocm") == "ieee"
    assert triton_gemm._precision_16bit("compiled", "cuda") == "tf32"
    assert triton_gemm._precision_16bit("interpreter", "cuda") == "ieee"


# ------------------------------------------------------------------------- calibrate on a pretend MI300X

@pytest.fixture
def pretend_mi300x(pretend, monkeypatch):
    """The calibration's GPU code path on a pretend MI300X (ROCm) whose timings are perfkit's models."""
    pretend(_props("AMD Instinct MI300X"))
    spec = pk.devices.current_device()
    monkeypatch.setattr(probes, "gemm_timer", lambda dtype, device, quick=False: (
        lambda M, N, K: pk.predict_gemm_time(M, N, K, dtype, spec)))
    monkeypatch.setattr(probes, "copy_sweep", lambda device, quick=False, max_bytes=None: [
        {"bytes": n, "time_s": 4e-6 + 2 * n / 4e12, "bandwidth": 2 * n / (4e-6 + 2 * n / 4e12)}
        for n in (1 << p for p in range(18, 31, 4))])
    monkeypatch.setattr(probes, "launch_floors", lambda device, dtype, quick=False: {
        "kernel_s": 5e-6, "gemm_s": 8e-6, "warm_kernel_s": 4e-6, "graph_s": 2e-6})
    monkeypatch.setattr(probes, "time_memory_case", lambda case, dtype, device, quick=False: memory_time(
        probes.memory_case_bytes(case, dtype), spec))
    with placement.use(device="cuda", spec=spec, tensor_device="meta"):
        yield spec


def test_calibrate_on_rocm_leaves_out_ocp_float8_on_gfx942_and_names_hip_graphs(pretend_mi300x, tmp_path):
    assert "float8" in calibration_run.rocm_exclusions("cuda") and calibration_run.rocm_exclusions("cpu") == {}
    with pytest.raises(ValueError, match="'float8' cannot be calibrated on MI300X .*float8_e4m3fnuz"):
        pk.calibrate(dtypes=["float8"], save=False, progress=False)
    cal = pk.calibrate(quick=True, dtypes=["bfloat16"], out=tmp_path / "mi300x.json", progress=False)
    assert cal.profile.environment["hip"] == HIP and cal.profile.environment["cuda"] is None
    assert "HIP graph" in cal.profile.latency["how"] and "CUDA" not in cal.profile.latency["how"]
    text = str(cal)
    assert "inside a HIP graph" in text and "CUDA" not in text
    back = pk.calibrated(str(cal.path))  # the profile keeps the device's layout
    assert (back.vendor, back.dies, back.warp_size, back.llc_bytes, back.unit_name) == \
        ("AMD", 8, 64, MI300X.llc_bytes, "CUs")


def test_a_profile_without_the_layout_keys_takes_its_table_entrys(pretend_mi300x, tmp_path):
    cal = pk.calibrate(quick=True, dtypes=["bfloat16"], save=False, progress=False)
    device = {k: v for k, v in cal.profile.device.items() if k not in ("vendor", "dies", "warp_size", "llc_bytes")}
    environment = {k: v for k, v in cal.profile.environment.items() if k != "hip"}
    old = pf.DeviceProfile.from_json(replace(cal.profile, device=device, environment=environment).to_json())
    spec = old.spec()
    assert (spec.vendor, spec.dies, spec.warp_size) == ("AMD", 8, 64)
    assert "inside a CUDA graph" in calibration_report.report(old)  # an older profile says nothing of ROCm
