"""The calibration on a real GPU (marked ``gpu``: skipped without one; ``scripts/gpu_run.sh`` runs it).

The same checks as on a CPU (tests/edge/test_calibration.py), on the GPU in use, and the bfloat16
ceiling against the published achievable figure: the MAMF finder's best H100 SXM BF16 GEMM,
794.5 TFLOP/s of the 989.4 dense peak (Stas Bekman's ml-engineering, 2025; "H200 is the same").
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calibration.profile import load_profile

pytestmark = pytest.mark.gpu

#: Published achievable BF16 matmul throughput (FLOP/s) by device, and the share of it we accept.
MAMF_BF16_FLOP_S = {"H100-SXM": 794.5e12, "H200": 794.5e12}
ACCEPT = 0.85


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    spec = pk.devices.current_device()
    dtype = "bfloat16" if "bfloat16" in spec.peaks else "float16"
    return pk.calibrate(thorough=True, dtypes=[dtype, "float32"], out=tmp_path_factory.mktemp("p") / "gpu.json",
                        progress=False)


def test_the_guided_search_gets_within_ten_percent_of_the_wide_one(calibration):
    for d, m in calibration.profile.matmul.items():
        assert m["flop_s"] >= 0.9 * m["wide_flop_s"], (d, m)
        assert m["trials"] * 3 <= m["wide_trials"]


def test_the_measured_ceilings_are_physically_possible_and_load_back(calibration):
    spec = pk.devices.current_device()
    p = calibration.profile
    assert load_profile(calibration.path) == p and pk.calibrated(calibration.path) == calibration.spec
    for d, m in p.matmul.items():
        assert 0 < m["flop_s"] <= 1.02 * spec.peak_flop_s(d), d
    assert 0 < p.copy["bandwidth"] <= 1.02 * spec.mem_bandwidth
    assert p.latency["graph_s"] is not None and 0 < p.latency["graph_s"] and 0 < p.latency["kernel_s"] < 1e-4
    assert p.validation["after"]["n"] >= 15


def test_bf16_against_the_published_achievable_figure(calibration):
    spec = pk.devices.current_device()
    if spec.name not in MAMF_BF16_FLOP_S:
        pytest.skip(f"no published achievable BF16 figure for {spec.name}")
    measured = calibration.profile.matmul["bfloat16"]["flop_s"]
    assert measured >= ACCEPT * MAMF_BF16_FLOP_S[spec.name], f"{measured / 1e12:.1f} TFLOP/s"
