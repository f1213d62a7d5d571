"""End-to-end checks that need a CUDA GPU: every chapter as a script, and quick recordings that
must be physically possible (no TFLOP/s above the vendor peak, no GB/s above the memory bandwidth).

Run on a GPU machine with ``python -m pytest -m gpu tests -o addopts="" --ignore=tests/book/test_book.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import perfkit as pk

pytestmark = pytest.mark.gpu
from testkit import REPO


def test_every_chapter_runs_as_a_script_on_the_gpu(tmp_path):
    # Quick sweeps keep this test within minutes; scripts/gpu_run.sh --only chapters runs them in full.
    env = dict(os.environ, PERFKIT_QUICK="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "run_chapters.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


@pytest.mark.parametrize("name", ["gemm_sizes", "gemm_small_n", "ceiling_matmul", "ceiling_copy"])
def test_quick_recordings_are_physically_possible(name, tmp_path):
    pk.record([name], out=tmp_path, quick=True, progress=False)
    frame = pk.data.load(name, root=tmp_path)
    meta = frame.attrs["meta"]
    assert meta["complete"] and meta["device_kind"] == "gpu" and meta["rows"] == len(frame) > 0
    spec = pk.current_device()
    assert (frame["time_s"] > 0).all()
    if "tflops" in frame:
        for dtype, g in frame.groupby("dtype"):
            assert g["tflops"].max() * 1e12 <= 1.02 * spec.peak_flop_s(dtype), dtype
    if "gbps" in frame and name == "ceiling_copy":
        assert frame["gbps"].max() * 1e9 <= 1.02 * spec.mem_bandwidth


def test_gemm_prediction_is_never_faster_than_measured_by_much():
    # The model is a floor-based estimate: a measurement far below it would mean a wrong peak.
    from perfkit.book.gemm.experiments import measure_gemm

    spec = pk.current_device()
    for M in (2048, 8192):
        floor = pk.explain_gemm(M, M, M, "bfloat16", spec).floor_s
        assert measure_gemm(M, M, M, "bfloat16") >= 0.98 * floor
